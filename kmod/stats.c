// SPDX-License-Identifier: GPL-2.0
/*
 * Module-wide counters, read-only in sysfs under the misc device:
 * /sys/class/misc/nproxy/stats/<name>, and over netlink (GET_STATS).
 */
#include <linux/device.h>
#include <linux/sysfs.h>

#include "nproxy_priv.h"

struct nproxy_stats nproxy_stats;

/* Everything but regions_live, which counts objects that still exist. */
void nproxy_stats_reset(void)
{
	struct nproxy_stats *s = &nproxy_stats;

	atomic64_set(&s->regions_created, 0);
	atomic64_set(&s->progs_run, 0);
	atomic64_set(&s->triggers_written, 0);
	atomic64_set(&s->timeouts, 0);
	atomic64_set(&s->prog_cancels, 0);
}

/* Every counter file shares one show routine; ->var names the counter. */
static ssize_t nproxy_stat_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	struct dev_ext_attribute *ea = container_of(attr, struct dev_ext_attribute,
						    attr);

	return sysfs_emit(buf, "%lld\n", atomic64_read(ea->var));
}

/* The file NAME shows the counter nproxy_stats.COUNTER. */
#define NPROXY_STAT_ATTR(name, counter) \
	{ __ATTR(name, 0444, nproxy_stat_show, NULL), &nproxy_stats.counter }

static struct dev_ext_attribute nproxy_stat_attrs[] = {
	NPROXY_STAT_ATTR(regions_live, regions_live),
	NPROXY_STAT_ATTR(regions_created, regions_created),
	NPROXY_STAT_ATTR(progs_run, progs_run),
	NPROXY_STAT_ATTR(triggers_written, triggers_written),
	NPROXY_STAT_ATTR(timeouts, timeouts),
	NPROXY_STAT_ATTR(cancels, prog_cancels),
};

static struct attribute *nproxy_stats_attrs[] = {
	&nproxy_stat_attrs[0].attr.attr,
	&nproxy_stat_attrs[1].attr.attr,
	&nproxy_stat_attrs[2].attr.attr,
	&nproxy_stat_attrs[3].attr.attr,
	&nproxy_stat_attrs[4].attr.attr,
	&nproxy_stat_attrs[5].attr.attr,
	NULL,
};

static const struct attribute_group nproxy_stats_group = {
	.name = "stats",
	.attrs = nproxy_stats_attrs,
};

const struct attribute_group *nproxy_stats_groups[] = {
	&nproxy_stats_group,
	NULL,
};
