// SPDX-License-Identifier: GPL-2.0
/*
 * Generic netlink family "nproxy": module info, region dump/lookup, stats,
 * and the "events" multicast group.  Every command is validated strictly
 * (resv_start_op = 0): unknown attributes, wrong types and non-zero
 * genlmsghdr.reserved are -EINVAL.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/pid.h>
#include <net/genetlink.h>
#include <net/netlink.h>

#include "nproxy_priv.h"

static struct genl_family nproxy_genl_family;

enum nproxy_mcgrp {
	NPROXY_MCGRP_EVENTS,
};

static const struct genl_multicast_group nproxy_mcgrps[] = {
	[NPROXY_MCGRP_EVENTS] = { .name = NPROXY_GENL_MCGRP_EVENTS },
};

/*
 * GET_REGIONS (do) takes one region id.  The other commands take nothing:
 * with no .policy, resv_start_op = 0 gives them the core's reject-all one.
 * The GET_REGIONS dump takes nothing either, but a 6.1 genl_ops has one
 * policy for do and dump (and a strict command may not opt out of dump
 * validation), so the policy admits any u32 id, the do refuses id 0 with
 * -ERANGE and the dump refuses the attribute with -EINVAL, both with an
 * extack message.
 */
static const struct nla_policy nproxy_region_policy[NPROXY_A_REGION_ID + 1] = {
	[NPROXY_A_REGION_ID] = { .type = NLA_U32 },
};

static void *nproxy_nl_put_header(struct sk_buff *skb, u32 portid, u32 seq,
				  int flags, u8 cmd)
{
	return genlmsg_put(skb, portid, seq, &nproxy_genl_family, flags, cmd);
}

/* The region's identity and program state; caller keeps @r alive. */
static int nproxy_nl_put_region(struct sk_buff *skb,
				const struct nproxy_region *r)
{
	if (nla_put_u32(skb, NPROXY_A_REGION_ID, r->id) ||
	    nla_put_u32(skb, NPROXY_A_OWNER_PID, pid_vnr(r->owner)) ||
	    nla_put_u32(skb, NPROXY_A_RANK, r->rank) ||
	    nla_put_u32(skb, NPROXY_A_GID, r->gid) ||
	    nla_put_u32(skb, NPROXY_A_N_STREAMS, r->n_streams) ||
	    nla_put_u32(skb, NPROXY_A_N_SEMS, r->n_sems) ||
	    nla_put_u32(skb, NPROXY_A_PROG_STATE, READ_ONCE(r->prog_state)) ||
	    nla_put_u64_64bit(skb, NPROXY_A_PROG_SEQ, READ_ONCE(r->prog_seq),
			      NPROXY_A_PAD))
		return -EMSGSIZE;
	return 0;
}

static int nproxy_nl_fill_region(struct sk_buff *skb,
				 const struct nproxy_region *r, u32 portid,
				 u32 seq, int flags)
{
	void *hdr = nproxy_nl_put_header(skb, portid, seq, flags,
					 NPROXY_CMD_GET_REGIONS);

	if (!hdr)
		return -EMSGSIZE;
	if (nproxy_nl_put_region(skb, r)) {
		genlmsg_cancel(skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(skb, hdr);
	return 0;
}

static int nproxy_nl_get_info(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	void *hdr;

	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &nproxy_genl_family, 0,
				NPROXY_CMD_GET_INFO);
	if (!hdr ||
	    nla_put_u32(msg, NPROXY_A_ABI_VERSION, NPROXY_ABI_VERSION) ||
	    nla_put_u32(msg, NPROXY_A_MAX_STREAMS, NPROXY_MAX_STREAMS) ||
	    nla_put_u32(msg, NPROXY_A_MAX_SEMS, NPROXY_MAX_SEMS) ||
	    nla_put_u32(msg, NPROXY_A_MAX_PROG_STEPS, NPROXY_MAX_PROG_STEPS)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

static int nproxy_nl_get_region(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *id_attr = info->attrs[NPROXY_A_REGION_ID];
	struct nproxy_region *r;
	struct sk_buff *msg;
	int err;

	if (GENL_REQ_ATTR_CHECK(info, NPROXY_A_REGION_ID)) {
		NL_SET_ERR_MSG(info->extack,
			       "GET_REGIONS needs a region id (NLM_F_DUMP lists them all)");
		return -EINVAL;
	}
	if (!nla_get_u32(id_attr)) {
		NL_SET_ERR_MSG_ATTR(info->extack, id_attr,
				    "region ids start at 1");
		return -ERANGE;
	}
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;

	mutex_lock(&nproxy_regions_lock);
	r = nproxy_region_find(nla_get_u32(id_attr));
	if (!r) {
		NL_SET_ERR_MSG_ATTR(info->extack, id_attr, "no such region");
		err = -ENOENT;
	} else {
		err = nproxy_nl_fill_region(msg, r, info->snd_portid,
					    info->snd_seq, 0);
	}
	mutex_unlock(&nproxy_regions_lock);
	if (err) {
		nlmsg_free(msg);
		return err;
	}
	return genlmsg_reply(msg, info);
}

/*
 * Called on the dump's first pass, where cb->extack reaches the requester
 * (in the NLMSG_DONE that ends the dump, as for rtnetlink's strict dump
 * checks; ->start has no extack in 6.1).  The core already refused every
 * attribute but REGION_ID.
 */
static int nproxy_nl_dump_check(struct netlink_callback *cb)
{
	const struct genl_dumpit_info *info = genl_dumpit_info(cb);

	if (info->attrs && info->attrs[NPROXY_A_REGION_ID]) {
		NL_SET_ERR_MSG(cb->extack,
			       "GET_REGIONS dump takes no attributes (a region id selects the do request)");
		return -EINVAL;
	}
	return 0;
}

static int nproxy_nl_dump_regions(struct sk_buff *skb,
				  struct netlink_callback *cb)
{
	int id = cb->args[0];
	struct nproxy_region *r;
	int err;

	/* args[1]: the request was checked on the first pass. */
	if (!cb->args[1]) {
		err = nproxy_nl_dump_check(cb);
		if (err)
			return err;
		cb->args[1] = 1;
	}
	mutex_lock(&nproxy_regions_lock);
	for (r = nproxy_region_next(&id); r; id++, r = nproxy_region_next(&id)) {
		if (nproxy_nl_fill_region(skb, r, NETLINK_CB(cb->skb).portid,
					  cb->nlh->nlmsg_seq, NLM_F_MULTI))
			break;	/* skb full: resume at this id */
	}
	mutex_unlock(&nproxy_regions_lock);
	cb->args[0] = id;
	return skb->len;
}

static int nproxy_nl_get_stats(struct sk_buff *skb, struct genl_info *info)
{
	static const struct {
		int attr;
		atomic64_t *counter;
	} stats[] = {
		{ NPROXY_A_STAT_REGIONS_LIVE, &nproxy_stats.regions_live },
		{ NPROXY_A_STAT_REGIONS_CREATED, &nproxy_stats.regions_created },
		{ NPROXY_A_STAT_PROGS_RUN, &nproxy_stats.progs_run },
		{ NPROXY_A_STAT_TRIGGERS_WRITTEN, &nproxy_stats.triggers_written },
		{ NPROXY_A_STAT_TIMEOUTS, &nproxy_stats.timeouts },
		{ NPROXY_A_STAT_CANCELS, &nproxy_stats.prog_cancels },
	};
	struct sk_buff *msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	void *hdr;
	size_t i;

	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &nproxy_genl_family, 0,
				NPROXY_CMD_GET_STATS);
	if (!hdr)
		goto err_size;
	for (i = 0; i < ARRAY_SIZE(stats); i++)
		if (nla_put_u64_64bit(msg, stats[i].attr,
				      atomic64_read(stats[i].counter),
				      NPROXY_A_PAD))
			goto err_size;
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);

err_size:
	nlmsg_free(msg);
	return -EMSGSIZE;
}

static int nproxy_nl_reset_stats(struct sk_buff *skb, struct genl_info *info)
{
	nproxy_stats_reset();
	return 0;
}

static const struct genl_ops nproxy_genl_ops[] = {
	{ .cmd = NPROXY_CMD_GET_INFO, .doit = nproxy_nl_get_info },
	{ .cmd = NPROXY_CMD_GET_REGIONS, .doit = nproxy_nl_get_region,
	  .dumpit = nproxy_nl_dump_regions, .policy = nproxy_region_policy,
	  .maxattr = NPROXY_A_REGION_ID },
	{ .cmd = NPROXY_CMD_GET_STATS, .doit = nproxy_nl_get_stats },
	{ .cmd = NPROXY_CMD_RESET_STATS, .doit = nproxy_nl_reset_stats,
	  .flags = GENL_ADMIN_PERM },
};

static struct genl_family nproxy_genl_family __ro_after_init = {
	.name		= NPROXY_GENL_NAME,
	.version	= NPROXY_GENL_VERSION,
	.module		= THIS_MODULE,
	.ops		= nproxy_genl_ops,
	.n_ops		= ARRAY_SIZE(nproxy_genl_ops),
	.resv_start_op	= 0,	/* strict validation for every command */
	.mcgrps		= nproxy_mcgrps,
	.n_mcgrps	= ARRAY_SIZE(nproxy_mcgrps),
	.parallel_ops	= true,	/* handlers take nproxy_regions_lock themselves */
};

/*
 * Multicast one event to "events" in the initial netns.  Called from
 * process context (ioctl, worker, release) without spinlocks held.  A
 * message that does not fit or finds no memory is dropped: events are
 * notifications, the region's state stays readable.
 */
void nproxy_nl_event(const struct nproxy_region *r,
		     const struct nproxy_event *ev)
{
	struct sk_buff *msg;
	void *hdr;

	if (!genl_has_listeners(&nproxy_genl_family, &init_net,
				NPROXY_MCGRP_EVENTS))
		return;
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return;
	hdr = genlmsg_put(msg, 0, 0, &nproxy_genl_family, 0, NPROXY_CMD_EVENT);
	if (!hdr)
		goto err_free;
	if (nla_put_u32(msg, NPROXY_A_EVENT_TYPE, ev->type) ||
	    nla_put_u32(msg, NPROXY_A_REGION_ID, r->id) ||
	    nla_put_u32(msg, NPROXY_A_RANK, r->rank) ||
	    nla_put_u32(msg, NPROXY_A_GID, r->gid))
		goto err_free;
	if (ev->has_stream && nla_put_u32(msg, NPROXY_A_STREAM, ev->stream))
		goto err_free;
	if (ev->has_value &&
	    nla_put_u64_64bit(msg, NPROXY_A_VALUE, ev->value, NPROXY_A_PAD))
		goto err_free;
	if (ev->has_prog &&
	    (nla_put_u64_64bit(msg, NPROXY_A_PROG_SEQ, ev->prog_seq, NPROXY_A_PAD) ||
	     nla_put_u32(msg, NPROXY_A_PROG_STATE, ev->prog_state)))
		goto err_free;
	genlmsg_end(msg, hdr);
	genlmsg_multicast(&nproxy_genl_family, msg, 0, NPROXY_MCGRP_EVENTS,
			  GFP_KERNEL);
	return;

err_free:
	nlmsg_free(msg);
}

int nproxy_nl_init(void)
{
	return genl_register_family(&nproxy_genl_family);
}

void nproxy_nl_exit(void)
{
	genl_unregister_family(&nproxy_genl_family);
}
