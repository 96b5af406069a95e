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
	atomic64_set(&s->cancels, 0);
}

/*
 * One read-only attribute per counter.  checkpatch's MACRO_ARG_REUSE does
 * not apply: _name is only pasted into identifiers, never evaluated.
 */
#define NPROXY_STAT_ATTR(_name)						\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n",				\
			  atomic64_read(&nproxy_stats._name));		\
}									\
static DEVICE_ATTR_RO(_name)

NPROXY_STAT_ATTR(regions_live);
NPROXY_STAT_ATTR(regions_created);
NPROXY_STAT_ATTR(progs_run);
NPROXY_STAT_ATTR(triggers_written);
NPROXY_STAT_ATTR(timeouts);
NPROXY_STAT_ATTR(cancels);

static struct attribute *nproxy_stats_attrs[] = {
	&dev_attr_regions_live.attr,
	&dev_attr_regions_created.attr,
	&dev_attr_progs_run.attr,
	&dev_attr_triggers_written.attr,
	&dev_attr_timeouts.attr,
	&dev_attr_cancels.attr,
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
