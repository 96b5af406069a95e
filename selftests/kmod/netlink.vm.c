// SPDX-License-Identifier: GPL-2.0
/*
 * The generic netlink family "nproxy", driven with
 * libnl-genl-3 as users would: module info, region dump and lookup, stats
 * (agreeing with sysfs), strict policies, GENL_ADMIN_PERM, and the
 * "events" multicast group.
 */
#include <sys/wait.h>

#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "kselftest_harness.h"
#include "kmod_util.h"
#include "nl_raw.h"

#define MAX_MSGS 64

/* Every message a request or a listener received, attributes parsed. */
struct np_msgs {
	int n;
	uint8_t cmd[MAX_MSGS];
	struct {
		bool present;
		uint64_t v;
	} attr[MAX_MSGS][NPROXY_A_MAX + 1];
	int error;	/* from NLMSG_ERROR, 0 or -errno */
	bool done;
};

static int collect_cb(struct nl_msg *msg, void *arg)
{
	struct np_msgs *m = arg;
	struct genlmsghdr *gh = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[NPROXY_A_MAX + 1];
	int a;

	if (m->n >= MAX_MSGS)
		return NL_STOP;
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, NPROXY_A_MAX, NULL))
		return NL_SKIP;
	m->cmd[m->n] = gh->cmd;
	for (a = 1; a <= NPROXY_A_MAX; a++) {
		if (!tb[a])
			continue;
		m->attr[m->n][a].present = true;
		m->attr[m->n][a].v = nla_len(tb[a]) == 8 ? nla_get_u64(tb[a]) : nla_get_u32(tb[a]);
	}
	m->n++;
	return NL_OK;
}

static int error_cb(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	struct np_msgs *m = arg;

	m->error = e->error;
	m->done = true;
	return NL_STOP;
}

static int no_seq_check_cb(struct nl_msg *msg, void *arg)
{
	return NL_OK;
}

static int done_cb(struct nl_msg *msg, void *arg)
{
	((struct np_msgs *)arg)->done = true;
	return NL_STOP;
}

struct np_nl {
	struct nl_sock *sk;
	int family;
};

static int np_nl_open(struct np_nl *nl)
{
	nl->sk = nl_socket_alloc();
	if (!nl->sk || genl_connect(nl->sk))
		return -1;
	nl->family = genl_ctrl_resolve(nl->sk, NPROXY_GENL_NAME);
	return nl->family < 0 ? -1 : 0;
}

/*
 * Send one request (optionally with one u32 attribute, or a raw attribute
 * of the wrong size) and gather the replies; returns 0 or -errno.
 */
static int np_nl_request(struct np_nl *nl, uint8_t cmd, int flags, int attr,
			 uint32_t val, int attr_len, struct np_msgs *out)
{
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	struct nl_msg *msg = nlmsg_alloc();
	int err;

	memset(out, 0, sizeof(*out));
	if (!cb || !msg)
		return -ENOMEM;
	genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, nl->family, 0, flags, cmd,
		    NPROXY_GENL_VERSION);
	if (attr)
		nla_put(msg, attr, attr_len, &val);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, collect_cb, out);
	nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, done_cb, out);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, done_cb, out);
	nl_cb_err(cb, NL_CB_CUSTOM, error_cb, out);
	err = nl_send_auto(nl->sk, msg);
	nlmsg_free(msg);
	while (err >= 0 && !out->done)
		err = nl_recvmsgs(nl->sk, cb);
	nl_cb_put(cb);
	if (err < 0 && !out->error)
		return -EIO;
	return out->error;
}

static uint64_t A(const struct np_msgs *m, int i, int attr)
{
	return m->attr[i][attr].v;
}

FIXTURE(nl) {
	int dev;
	struct np_nl nl;
};

FIXTURE_SETUP(nl)
{
	self->nl.sk = NULL;
	NP_OPEN_DEV_OR_SKIP(self->dev);
	ASSERT_EQ(0, np_nl_open(&self->nl)) {
		TH_LOG("generic netlink family \"" NPROXY_GENL_NAME "\" not found");
	}
}

FIXTURE_TEARDOWN(nl)
{
	if (self->nl.sk)
		nl_socket_free(self->nl.sk);
	if (self->dev >= 0)
		close(self->dev);
}

TEST_F(nl, get_info)
{
	struct np_msgs m;

	ASSERT_EQ(0, np_nl_request(&self->nl, NPROXY_CMD_GET_INFO, 0, 0, 0, 0, &m));
	ASSERT_EQ(1, m.n);
	EXPECT_EQ(NPROXY_ABI_VERSION, A(&m, 0, NPROXY_A_ABI_VERSION));
	EXPECT_EQ(NPROXY_MAX_STREAMS, A(&m, 0, NPROXY_A_MAX_STREAMS));
	EXPECT_EQ(NPROXY_MAX_SEMS, A(&m, 0, NPROXY_A_MAX_SEMS));
	EXPECT_EQ(NPROXY_MAX_PROG_STEPS, A(&m, 0, NPROXY_A_MAX_PROG_STEPS));
}

TEST_F(nl, dump_regions_lists_live_regions)
{
	int r1 = np_create(self->dev, 2, 3), r2 = np_create(self->dev, 4, 0);
	struct nproxy_region_state s1, s2;
	struct np_msgs m;
	int i, seen = 0;

	ASSERT_LE(0, r1);
	ASSERT_LE(0, r2);
	ASSERT_EQ(0, ioctl(r1, NPROXY_IOC_GET_STATE, &s1));
	ASSERT_EQ(0, ioctl(r2, NPROXY_IOC_GET_STATE, &s2));
	ASSERT_EQ(0, np_nl_request(&self->nl, NPROXY_CMD_GET_REGIONS, NLM_F_DUMP, 0, 0, 0, &m));
	for (i = 0; i < m.n; i++) {
		uint64_t id = A(&m, i, NPROXY_A_REGION_ID);

		if (id != s1.region_id && id != s2.region_id)
			continue;
		seen++;
		EXPECT_EQ(getpid(), A(&m, i, NPROXY_A_OWNER_PID));
		EXPECT_EQ(3, A(&m, i, NPROXY_A_RANK));
		EXPECT_EQ(7, A(&m, i, NPROXY_A_GID));
		EXPECT_EQ(id == s1.region_id ? 2 : 4, A(&m, i, NPROXY_A_N_STREAMS));
		EXPECT_EQ(id == s1.region_id ? 3 : 0, A(&m, i, NPROXY_A_N_SEMS));
		EXPECT_EQ(NPROXY_PROG_NONE, A(&m, i, NPROXY_A_PROG_STATE));
		EXPECT_TRUE(m.attr[i][NPROXY_A_PROG_SEQ].present);
	}
	EXPECT_EQ(2, seen);
	close(r1);
	ASSERT_EQ(0, np_nl_request(&self->nl, NPROXY_CMD_GET_REGIONS, NLM_F_DUMP, 0, 0, 0, &m));
	for (i = 0; i < m.n; i++)
		EXPECT_NE(s1.region_id, A(&m, i, NPROXY_A_REGION_ID));
	close(r2);
}

/* More regions than fit in one dump skb: every one is listed once. */
TEST_F(nl, dump_regions_spans_messages)
{
	enum { N = 60 };
	int fds[N], i, found = 0;
	uint32_t first_id;
	struct nproxy_region_state st;
	struct np_msgs m;

	for (i = 0; i < N; i++) {
		fds[i] = np_create(self->dev, 1, 0);
		ASSERT_LE(0, fds[i]);
	}
	ASSERT_EQ(0, ioctl(fds[0], NPROXY_IOC_GET_STATE, &st));
	first_id = st.region_id;
	ASSERT_EQ(0, np_nl_request(&self->nl, NPROXY_CMD_GET_REGIONS, NLM_F_DUMP, 0, 0, 0, &m));
	for (i = 0; i < m.n; i++)
		if (A(&m, i, NPROXY_A_REGION_ID) >= first_id &&
		    A(&m, i, NPROXY_A_REGION_ID) < first_id + N)
			found++;
	EXPECT_EQ(N, found);
	for (i = 0; i < N; i++)
		close(fds[i]);
}

TEST_F(nl, get_region_by_id)
{
	int rfd = np_create(self->dev, 3, 1);
	struct nproxy_region_state st;
	struct np_msgs m;

	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_GET_STATE, &st));
	ASSERT_EQ(0, np_nl_request(&self->nl, NPROXY_CMD_GET_REGIONS, 0, NPROXY_A_REGION_ID,
				   st.region_id, 4, &m));
	ASSERT_EQ(1, m.n);
	EXPECT_EQ(st.region_id, A(&m, 0, NPROXY_A_REGION_ID));
	EXPECT_EQ(3, A(&m, 0, NPROXY_A_N_STREAMS));
	close(rfd);
	EXPECT_EQ(-ENOENT, np_nl_request(&self->nl, NPROXY_CMD_GET_REGIONS, 0,
					 NPROXY_A_REGION_ID, st.region_id, 4, &m));
}

TEST_F(nl, strict_policy_rejects_bad_attributes)
{
	struct np_msgs m;

	/* Missing required id. */
	EXPECT_EQ(-EINVAL, np_nl_request(&self->nl, NPROXY_CMD_GET_REGIONS, 0, 0, 0, 0, &m));
	/* Wrong size for a u32. */
	EXPECT_EQ(-EINVAL, np_nl_request(&self->nl, NPROXY_CMD_GET_REGIONS, 0,
					 NPROXY_A_REGION_ID, 1, 2, &m));
	/* Id 0 is never a region: out of range. */
	EXPECT_EQ(-ERANGE, np_nl_request(&self->nl, NPROXY_CMD_GET_REGIONS, 0,
					 NPROXY_A_REGION_ID, 0, 4, &m));
	/* An attribute the command does not take. */
	EXPECT_EQ(-EINVAL, np_nl_request(&self->nl, NPROXY_CMD_GET_INFO, 0,
					 NPROXY_A_RANK, 1, 4, &m));
	EXPECT_EQ(-EINVAL, np_nl_request(&self->nl, NPROXY_CMD_GET_STATS, 0,
					 NPROXY_A_MAX + 5, 1, 4, &m));
	/* Not a request command. */
	EXPECT_EQ(-EOPNOTSUPP, np_nl_request(&self->nl, NPROXY_CMD_EVENT, 0, 0, 0, 0, &m));
	EXPECT_EQ(-EOPNOTSUPP, np_nl_request(&self->nl, 200, 0, 0, 0, 0, &m));
}

static const struct {
	int attr;
	const char *sysfs;
} stat_names[] = {
	{ NPROXY_A_STAT_REGIONS_LIVE, "regions_live" },
	{ NPROXY_A_STAT_REGIONS_CREATED, "regions_created" },
	{ NPROXY_A_STAT_PROGS_RUN, "progs_run" },
	{ NPROXY_A_STAT_TRIGGERS_WRITTEN, "triggers_written" },
	{ NPROXY_A_STAT_TIMEOUTS, "timeouts" },
	{ NPROXY_A_STAT_CANCELS, "cancels" },
};

TEST_F(nl, stats_agree_with_sysfs)
{
	int rfd = np_create(self->dev, 1, 0);
	struct np_msgs m;
	size_t i;

	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, np_nl_request(&self->nl, NPROXY_CMD_GET_STATS, 0, 0, 0, 0, &m));
	ASSERT_EQ(1, m.n);
	for (i = 0; i < sizeof(stat_names) / sizeof(stat_names[0]); i++) {
		EXPECT_TRUE(m.attr[0][stat_names[i].attr].present);
		EXPECT_EQ(np_stat(stat_names[i].sysfs), (long long)A(&m, 0, stat_names[i].attr)) {
			TH_LOG("%s", stat_names[i].sysfs);
		}
	}
	EXPECT_LE(1, A(&m, 0, NPROXY_A_STAT_REGIONS_LIVE));
	close(rfd);
}

/* Point 6: the counters move with what happens. */
TEST_F(nl, stats_count_activity)
{
	struct nproxy_prog_step steps[] = {
		np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1, 0),
		np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 2, 0),
	};
	long long created = np_stat("regions_created"), progs = np_stat("progs_run");
	long long trig = np_stat("triggers_written");
	struct nproxy_prog_result res;
	int rfd = np_create(self->dev, 1, 0);

	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, np_submit(rfd, steps, 2, NULL));
	ASSERT_EQ(0, np_wait_collect(rfd, 5000, &res));
	EXPECT_EQ(created + 1, np_stat("regions_created"));
	EXPECT_EQ(progs + 1, np_stat("progs_run"));
	EXPECT_EQ(trig + 2, np_stat("triggers_written"));
	close(rfd);
}

TEST_F(nl, reset_stats_needs_admin)
{
	struct np_msgs m;
	pid_t child;
	int status;
	int rfd = np_create(self->dev, 1, 0);

	ASSERT_LE(0, rfd);
	ASSERT_LE(1, np_stat("regions_created"));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		struct np_nl nl;

		/* Root -> nobody drops every capability, CAP_NET_ADMIN included. */
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(2);
		if (np_nl_open(&nl))
			_exit(3);
		_exit(np_nl_request(&nl, NPROXY_CMD_RESET_STATS, 0, 0, 0, 0, &m) == -EPERM ? 0 : 1);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_LE(1, np_stat("regions_created"));

	ASSERT_EQ(0, np_nl_request(&self->nl, NPROXY_CMD_RESET_STATS, 0, 0, 0, 0, &m));
	EXPECT_EQ(0, np_stat("regions_created"));
	EXPECT_EQ(0, np_stat("triggers_written"));
	/* Live objects are not history: regions_live is kept. */
	EXPECT_LE(1, np_stat("regions_live"));
	close(rfd);
}

/* Receive events on a multicast listener until @want or a deadline. */
static void listen_events(struct nl_sock *sk, struct np_msgs *ev, int want, int timeout_ms)
{
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	uint64_t deadline = np_now_ns() + (uint64_t)timeout_ms * NP_MS;

	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, collect_cb, ev);
	/* Multicast notifications carry sequence number 0. */
	nl_cb_set(cb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, no_seq_check_cb, NULL);
	while (ev->n < want && np_now_ns() < deadline) {
		struct pollfd pfd = { .fd = nl_socket_get_fd(sk), .events = POLLIN };

		if (poll(&pfd, 1, 100) == 1)
			nl_recvmsgs(sk, cb);
	}
	nl_cb_put(cb);
}

static int find_event(const struct np_msgs *ev, uint32_t type, uint32_t region)
{
	int i;

	for (i = 0; i < ev->n; i++)
		if (ev->cmd[i] == NPROXY_CMD_EVENT &&
		    A(ev, i, NPROXY_A_EVENT_TYPE) == type &&
		    A(ev, i, NPROXY_A_REGION_ID) == region)
			return i;
	return -1;
}

TEST_F(nl, listener_receives_events)
{
	struct nproxy_prog_step ok_steps[] = {
		np_step(NPROXY_STEP_WRITE_TRIGGER, 1, 0xabc, 0),
		np_step(NPROXY_STEP_SIGNAL_EVENT, 0, 55, 0),
	};
	struct nproxy_prog_step timeout_steps[] = {
		np_step(NPROXY_STEP_WAIT_SEM, 0, 1, 10 * NP_MS),
	};
	struct nproxy_prog_step long_steps[] = {
		np_step(NPROXY_STEP_DELAY, 0, 0, 30000 * NP_MS),
	};
	struct nproxy_prog_result res;
	struct nproxy_region_state st;
	struct nl_sock *sk = nl_socket_alloc();
	static struct np_msgs ev;
	uint64_t seq1 = 0, seq2 = 0;
	int grp, rfd, i;

	ASSERT_NE(NULL, sk);
	ASSERT_EQ(0, genl_connect(sk));
	nl_socket_disable_seq_check(sk);
	grp = genl_ctrl_resolve_grp(sk, NPROXY_GENL_NAME, NPROXY_GENL_MCGRP_EVENTS);
	ASSERT_LT(0, grp);
	ASSERT_EQ(0, nl_socket_add_membership(sk, grp));

	rfd = np_create(self->dev, 2, 1);
	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_GET_STATE, &st));
	ASSERT_EQ(0, np_submit(rfd, ok_steps, 2, &seq1));
	ASSERT_EQ(0, np_wait_collect(rfd, 5000, &res));
	ASSERT_EQ(0, np_submit(rfd, timeout_steps, 1, &seq2));
	ASSERT_EQ(0, np_wait_collect(rfd, 5000, &res));
	ASSERT_EQ(0, np_submit(rfd, long_steps, 1, NULL));
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_CANCEL_PROG));
	close(rfd);

	memset(&ev, 0, sizeof(ev));
	listen_events(sk, &ev, 7, 5000);

	/* Each event carries its own attributes and no others. */
	i = find_event(&ev, NPROXY_EVENT_REGION_CREATED, st.region_id);
	ASSERT_LE(0, i);
	EXPECT_EQ(3, A(&ev, i, NPROXY_A_RANK));
	EXPECT_EQ(7, A(&ev, i, NPROXY_A_GID));
	EXPECT_FALSE(ev.attr[i][NPROXY_A_STREAM].present);
	EXPECT_FALSE(ev.attr[i][NPROXY_A_VALUE].present);
	EXPECT_FALSE(ev.attr[i][NPROXY_A_PROG_SEQ].present);
	i = find_event(&ev, NPROXY_EVENT_TRIGGER_WRITTEN, st.region_id);
	ASSERT_LE(0, i);
	EXPECT_EQ(1, A(&ev, i, NPROXY_A_STREAM));
	EXPECT_EQ(0xabc, A(&ev, i, NPROXY_A_VALUE));
	EXPECT_FALSE(ev.attr[i][NPROXY_A_PROG_SEQ].present);
	i = find_event(&ev, NPROXY_EVENT_SIGNAL, st.region_id);
	ASSERT_LE(0, i);
	EXPECT_EQ(55, A(&ev, i, NPROXY_A_VALUE));
	EXPECT_FALSE(ev.attr[i][NPROXY_A_STREAM].present);
	i = find_event(&ev, NPROXY_EVENT_PROG_DONE, st.region_id);
	ASSERT_LE(0, i);
	EXPECT_EQ(seq1, A(&ev, i, NPROXY_A_PROG_SEQ));
	EXPECT_EQ(NPROXY_PROG_DONE, A(&ev, i, NPROXY_A_PROG_STATE));
	EXPECT_FALSE(ev.attr[i][NPROXY_A_STREAM].present);
	EXPECT_FALSE(ev.attr[i][NPROXY_A_VALUE].present);
	i = find_event(&ev, NPROXY_EVENT_PROG_TIMEDOUT, st.region_id);
	ASSERT_LE(0, i);
	EXPECT_EQ(seq2, A(&ev, i, NPROXY_A_PROG_SEQ));
	EXPECT_LE(0, find_event(&ev, NPROXY_EVENT_PROG_CANCELLED, st.region_id));
	i = find_event(&ev, NPROXY_EVENT_REGION_DESTROYED, st.region_id);
	ASSERT_LE(0, i);
	/* In order: destroyed is the last event of the region. */
	EXPECT_EQ(ev.n - 1, i);
	nl_socket_free(sk);
}

/* The raw-socket half: extack messages and dump errors libnl hides. */
FIXTURE(raw) {
	int dev;
	int sk;
	int family;
};

FIXTURE_SETUP(raw)
{
	self->sk = -1;
	NP_OPEN_DEV_OR_SKIP(self->dev);
	self->sk = np_nl_raw_socket();
	ASSERT_LE(0, self->sk);
	self->family = np_nl_family_id(self->sk, NPROXY_GENL_NAME);
	ASSERT_LT(0, self->family);
}

FIXTURE_TEARDOWN(raw)
{
	if (self->sk >= 0)
		close(self->sk);
	if (self->dev >= 0)
		close(self->dev);
}

/*
 * The GET_REGIONS dump takes no attributes (uapi.md): any REGION_ID, 0
 * included, is EINVAL with an extack message, in the dump's NLMSG_DONE.
 */
TEST_F(raw, dump_refuses_region_id)
{
	int rfd = np_create(self->dev, 1, 0);
	const uint32_t ids[] = { 0, 1, 0x7fffffff };
	struct nproxy_region_state st;
	struct np_nl_reply r;
	size_t i;

	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_GET_STATE, &st));
	for (i = 0; i < 3; i++) {
		EXPECT_EQ(-EINVAL, np_nl_req1(self->sk, self->family, NPROXY_CMD_GET_REGIONS,
					      NLM_F_DUMP, NPROXY_A_REGION_ID, &ids[i], 4, &r)) {
			TH_LOG("id %u", ids[i]);
		}
		EXPECT_EQ(0, r.n_msgs);
		EXPECT_NE(NULL, strstr(r.msg, "takes no attributes")) {
			TH_LOG("extack \"%s\"", r.msg);
		}
	}
	/* A live region's id too: no filtered dump of one region. */
	EXPECT_EQ(-EINVAL, np_nl_req1(self->sk, self->family, NPROXY_CMD_GET_REGIONS, NLM_F_DUMP,
				      NPROXY_A_REGION_ID, &st.region_id, 4, &r));
	EXPECT_EQ(0, r.n_msgs);
	/* Other attributes: the core's strict policy, EINVAL with a message. */
	EXPECT_EQ(-EINVAL, np_nl_req1(self->sk, self->family, NPROXY_CMD_GET_REGIONS, NLM_F_DUMP,
				      NPROXY_A_RANK, &ids[1], 4, &r));
	EXPECT_STRNE("", r.msg);
	/* Without attributes the dump works and lists the region. */
	EXPECT_EQ(0, np_nl_req1(self->sk, self->family, NPROXY_CMD_GET_REGIONS, NLM_F_DUMP,
				0, NULL, 0, &r));
	EXPECT_LE(1, r.n_msgs);
	close(rfd);
}

/* REGION_ID (0 or not) to a command that does not take it: EINVAL + extack. */
TEST_F(raw, region_id_refused_where_not_taken)
{
	const uint8_t cmds[] = { NPROXY_CMD_GET_INFO, NPROXY_CMD_GET_STATS,
				 NPROXY_CMD_RESET_STATS };
	const uint32_t ids[] = { 0, 1 };
	struct np_nl_reply r;
	size_t i, j;

	for (i = 0; i < sizeof(cmds); i++)
		for (j = 0; j < 2; j++) {
			EXPECT_EQ(-EINVAL, np_nl_req1(self->sk, self->family, cmds[i], 0,
						      NPROXY_A_REGION_ID, &ids[j], 4, &r)) {
				TH_LOG("cmd %u id %u", cmds[i], ids[j]);
			}
			EXPECT_STRNE("", r.msg);
		}
}

/* The do request: id 0 ERANGE, missing id EINVAL, unknown id ENOENT, each with extack. */
TEST_F(raw, get_region_do_errors_carry_messages)
{
	uint32_t zero = 0, gone = 0x7ffffff0;
	struct np_nl_reply r;

	EXPECT_EQ(-ERANGE, np_nl_req1(self->sk, self->family, NPROXY_CMD_GET_REGIONS, 0,
				      NPROXY_A_REGION_ID, &zero, 4, &r));
	EXPECT_NE(NULL, strstr(r.msg, "start at 1")) {
		TH_LOG("extack \"%s\"", r.msg);
	}
	EXPECT_EQ(-EINVAL, np_nl_req1(self->sk, self->family, NPROXY_CMD_GET_REGIONS, 0,
				      0, NULL, 0, &r));
	EXPECT_STRNE("", r.msg);
	EXPECT_EQ(-ENOENT, np_nl_req1(self->sk, self->family, NPROXY_CMD_GET_REGIONS, 0,
				      NPROXY_A_REGION_ID, &gone, 4, &r));
	EXPECT_STREQ("no such region", r.msg);
}

/* The policy of every command against uapi.md's table. */
TEST_F(raw, every_command_matches_uapi_table)
{
	static const struct {
		uint8_t cmd;
		uint16_t flags;
		int want;
	} table[] = {
		{ NPROXY_CMD_UNSPEC, 0, -EOPNOTSUPP },
		{ NPROXY_CMD_GET_INFO, 0, 0 },
		{ NPROXY_CMD_GET_INFO, NLM_F_DUMP, -EOPNOTSUPP },
		{ NPROXY_CMD_GET_REGIONS, NLM_F_DUMP, 0 },
		{ NPROXY_CMD_GET_REGIONS, 0, -EINVAL },		/* id required */
		{ NPROXY_CMD_GET_STATS, 0, 0 },
		{ NPROXY_CMD_GET_STATS, NLM_F_DUMP, -EOPNOTSUPP },
		{ NPROXY_CMD_RESET_STATS, 0, 0 },		/* as root */
		{ NPROXY_CMD_RESET_STATS, NLM_F_DUMP, -EOPNOTSUPP },
		{ NPROXY_CMD_EVENT, 0, -EOPNOTSUPP },
		{ NPROXY_CMD_EVENT, NLM_F_DUMP, -EOPNOTSUPP },
		{ NPROXY_CMD_MAX + 1, 0, -EOPNOTSUPP },
	};
	struct np_nl_reply r;
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		EXPECT_EQ(table[i].want, np_nl_req1(self->sk, self->family, table[i].cmd,
						    table[i].flags, 0, NULL, 0, &r)) {
			TH_LOG("cmd %u flags %#x", table[i].cmd, table[i].flags);
		}
	}
	/* Non-zero genlmsghdr.reserved: EINVAL with a message. */
	EXPECT_EQ(0, np_nl_raw_request(self->sk, self->family, NPROXY_CMD_GET_INFO, 0, 1,
				       NULL, 0, &r, NULL, NULL));
	EXPECT_EQ(-EINVAL, r.error);
	EXPECT_STRNE("", r.msg);
}

/*
 * Permissions: an unprivileged user may read (info,
 * regions, stats) and may not change state: every command that changes
 * state is GENL_ADMIN_PERM.  RESET_STATS is the only one today.
 */
TEST_F(raw, unprivileged_reads_but_cannot_change_state)
{
	static const struct {
		uint8_t cmd;
		uint16_t flags;
		int want;
	} table[] = {
		{ NPROXY_CMD_GET_INFO, 0, 0 },
		{ NPROXY_CMD_GET_REGIONS, NLM_F_DUMP, 0 },
		{ NPROXY_CMD_GET_STATS, 0, 0 },
		{ NPROXY_CMD_RESET_STATS, 0, -EPERM },
	};
	int status;
	pid_t child = fork();

	ASSERT_LE(0, child);
	if (child == 0) {
		struct np_nl_reply r;
		size_t i;
		int sk;

		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(100);
		sk = np_nl_raw_socket();
		if (sk < 0)
			_exit(101);
		for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
			if (np_nl_req1(sk, self->family, table[i].cmd, table[i].flags, 0, NULL, 0,
				       &r) != table[i].want)
				_exit(1 + i);
		_exit(0);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) {
		TH_LOG("table row %d gave the wrong answer as nobody", WEXITSTATUS(status) - 1);
	}
}

/*
 * The genlmsg core refuses an unknown command and a dump of a do-only
 * command itself (EOPNOTSUPP) before nproxy sees the request: those carry
 * no extack message; every refusal of nproxy's own carries one.
 */
TEST_F(raw, core_eopnotsupp_has_no_message)
{
	struct np_nl_reply r;

	EXPECT_EQ(-EOPNOTSUPP, np_nl_req1(self->sk, self->family, NPROXY_CMD_MAX + 1, 0,
					  0, NULL, 0, &r));
	EXPECT_STREQ("", r.msg);
	EXPECT_EQ(-EOPNOTSUPP, np_nl_req1(self->sk, self->family, NPROXY_CMD_GET_INFO,
					  NLM_F_DUMP, 0, NULL, 0, &r));
	EXPECT_STREQ("", r.msg);
}

TEST_HARNESS_MAIN
