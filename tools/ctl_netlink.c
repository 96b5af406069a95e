// SPDX-License-Identifier: GPL-2.0
/* nproxyctl: the "nproxy" generic netlink family through libnl-genl-3. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netlink/netlink.h>
#include <netlink/genl/genl.h>
#include <netlink/genl/ctrl.h>
#include "ctl.h"

struct ctl_nl {
	struct nl_sock *sk;
	int family;
	ctl_nl_cb cb;
	void *arg;
	int cb_ret;
};

static const struct {
	const char *name;
	bool is_u64;
} attr_desc[NPROXY_A_MAX + 1] = {
	[NPROXY_A_ABI_VERSION] = { "abi_version", false },
	[NPROXY_A_MAX_STREAMS] = { "max_streams", false },
	[NPROXY_A_MAX_SEMS] = { "max_sems", false },
	[NPROXY_A_MAX_PROG_STEPS] = { "max_prog_steps", false },
	[NPROXY_A_REGION_ID] = { "region_id", false },
	[NPROXY_A_OWNER_PID] = { "owner_pid", false },
	[NPROXY_A_RANK] = { "rank", false },
	[NPROXY_A_GID] = { "gid", false },
	[NPROXY_A_N_STREAMS] = { "n_streams", false },
	[NPROXY_A_N_SEMS] = { "n_sems", false },
	[NPROXY_A_PROG_STATE] = { "prog_state", false },
	[NPROXY_A_PROG_SEQ] = { "prog_seq", true },
	[NPROXY_A_EVENT_TYPE] = { "event", false },
	[NPROXY_A_STREAM] = { "stream", false },
	[NPROXY_A_VALUE] = { "value", true },
	[NPROXY_A_STAT_REGIONS_LIVE] = { "regions_live", true },
	[NPROXY_A_STAT_REGIONS_CREATED] = { "regions_created", true },
	[NPROXY_A_STAT_PROGS_RUN] = { "progs_run", true },
	[NPROXY_A_STAT_TRIGGERS_WRITTEN] = { "triggers_written", true },
	[NPROXY_A_STAT_TIMEOUTS] = { "timeouts", true },
	[NPROXY_A_STAT_CANCELS] = { "cancels", true },
};

const char *ctl_attr_name(int attr)
{
	if (attr <= 0 || attr > NPROXY_A_MAX)
		return NULL;
	return attr_desc[attr].name;
}

bool ctl_attr_is_u64(int attr)
{
	return attr > 0 && attr <= NPROXY_A_MAX && attr_desc[attr].is_u64;
}

const char *ctl_event_name(uint64_t type)
{
	static const char *const names[] = {
		[NPROXY_EVENT_REGION_CREATED] = "region-created",
		[NPROXY_EVENT_REGION_DESTROYED] = "region-destroyed",
		[NPROXY_EVENT_TRIGGER_WRITTEN] = "trigger-written",
		[NPROXY_EVENT_PROG_DONE] = "prog-done",
		[NPROXY_EVENT_PROG_TIMEDOUT] = "prog-timedout",
		[NPROXY_EVENT_PROG_CANCELLED] = "prog-cancelled",
		[NPROXY_EVENT_PROG_ERROR] = "prog-error",
		[NPROXY_EVENT_SIGNAL] = "signal",
	};

	if (type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "unknown";
}

static int nl_exit(int nlerr, const char *what)
{
	switch (-nlerr) {
	case NLE_PERM:
		return ctl_errno_exit(EPERM, what);
	case NLE_OBJ_NOTFOUND:
		return ctl_errno_exit(ENOENT, what);
	default:
		ctl_err("%s: %s", what, nl_geterror(nlerr));
		return -CTL_FAIL;
	}
}

int ctl_nl_open(struct ctl_nl **out)
{
	struct ctl_nl *nl = calloc(1, sizeof(*nl));
	int ret;

	if (!nl) {
		ctl_err("out of memory");
		return -CTL_FAIL;
	}
	nl->sk = nl_socket_alloc();
	if (!nl->sk) {
		free(nl);
		ctl_err("out of memory");
		return -CTL_FAIL;
	}
	ret = genl_connect(nl->sk);
	if (ret < 0) {
		ret = nl_exit(ret, "generic netlink socket");
		goto fail;
	}
	{
		/* Never hang on a module that stopped answering. */
		struct timeval tv = { .tv_sec = 10 };

		setsockopt(nl_socket_get_fd(nl->sk), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	nl->family = genl_ctrl_resolve(nl->sk, NPROXY_GENL_NAME);
	if (nl->family < 0) {
		ctl_err("generic netlink family '%s' not found: is nproxy.ko loaded? (modprobe nproxy)",
			NPROXY_GENL_NAME);
		ret = -CTL_NO_MODULE;
		goto fail;
	}
	*out = nl;
	return 0;
fail:
	nl_socket_free(nl->sk);
	free(nl);
	return ret;
}

void ctl_nl_close(struct ctl_nl *nl)
{
	if (!nl)
		return;
	nl_socket_free(nl->sk);
	free(nl);
}

static int on_valid(struct nl_msg *msg, void *arg)
{
	struct ctl_nl *nl = arg;
	struct nlattr *tb[NPROXY_A_MAX + 1];
	struct genlmsghdr *gh = nlmsg_data(nlmsg_hdr(msg));
	struct ctl_attrs a;

	memset(&a, 0, sizeof(a));
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, NPROXY_A_MAX, NULL) < 0)
		return NL_SKIP;
	a.cmd = gh->cmd;
	for (int i = 1; i <= NPROXY_A_MAX; i++) {
		if (!tb[i] || i == NPROXY_A_PAD)
			continue;
		a.present[i] = true;
		if (nla_len(tb[i]) >= 8)
			a.val[i] = nla_get_u64(tb[i]);
		else if (nla_len(tb[i]) >= 4)
			a.val[i] = nla_get_u32(tb[i]);
	}
	if (nl->cb) {
		int r = nl->cb(&a, nl->arg);

		if (r) {
			nl->cb_ret = r;
			return NL_STOP;
		}
	}
	return NL_OK;
}

int ctl_nl_request(struct ctl_nl *nl, uint8_t cmd, bool dump, ctl_nl_cb cb, void *arg)
{
	struct nl_msg *msg = nlmsg_alloc();
	int ret;

	if (!msg) {
		ctl_err("out of memory");
		return -CTL_FAIL;
	}
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, nl->family, 0,
			 dump ? NLM_F_DUMP : 0, cmd, NPROXY_GENL_VERSION)) {
		nlmsg_free(msg);
		ctl_err("cannot build netlink message");
		return -CTL_FAIL;
	}
	nl->cb = cb;
	nl->arg = arg;
	nl->cb_ret = 0;
	nl_socket_modify_cb(nl->sk, NL_CB_VALID, NL_CB_CUSTOM, on_valid, nl);
	ret = nl_send_auto(nl->sk, msg);
	nlmsg_free(msg);
	if (ret < 0)
		return nl_exit(ret, "netlink send");
	/* A request without a reply (cb NULL) gets only the ack. */
	if (cb) {
		ret = nl_recvmsgs_default(nl->sk);
		if (ret < 0)
			return nl_exit(ret, "netlink request");
	}
	if (!dump) {
		ret = nl_wait_for_ack(nl->sk);
		if (ret < 0)
			return nl_exit(ret, "netlink request");
	}
	return nl->cb_ret;
}

int ctl_nl_subscribe(struct ctl_nl *nl)
{
	int grp = genl_ctrl_resolve_grp(nl->sk, NPROXY_GENL_NAME, NPROXY_GENL_MCGRP_EVENTS);
	int ret;

	if (grp < 0)
		return nl_exit(grp, "netlink group '" NPROXY_GENL_MCGRP_EVENTS "'");
	nl_socket_disable_seq_check(nl->sk);
	ret = nl_socket_add_membership(nl->sk, grp);
	if (ret < 0)
		return nl_exit(ret, "joining netlink group '" NPROXY_GENL_MCGRP_EVENTS "'");
	return 0;
}

int ctl_nl_poll_events(struct ctl_nl *nl, int timeout_ms, ctl_nl_cb cb, void *arg)
{
	struct pollfd pfd = { .fd = nl_socket_get_fd(nl->sk), .events = POLLIN };
	int ret;

	ret = poll(&pfd, 1, timeout_ms);
	if (ret < 0)
		return errno == EINTR ? 0 : (ctl_err("poll: %s", strerror(errno)), -CTL_FAIL);
	if (!ret)
		return 0;
	nl->cb = cb;
	nl->arg = arg;
	nl->cb_ret = 0;
	nl_socket_modify_cb(nl->sk, NL_CB_VALID, NL_CB_CUSTOM, on_valid, nl);
	ret = nl_recvmsgs_default(nl->sk);
	if (ret < 0 && ret != -NLE_INTR)
		return nl_exit(ret, "netlink events");
	return nl->cb_ret;
}
