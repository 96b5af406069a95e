// SPDX-License-Identifier: GPL-2.0
/*
 * The shared-proxy registry: one named worker per group, refcounted by
 * comms, destroyed on the last release; thread-creation failure leaves
 * nothing behind; gid and CPU placement come from the environment.
 */
#include <errno.h>
#include <sched.h>
#include "kselftest_harness.h"
#include "proxy_test_util.h"
#include <nproxy/fault.h>

/* No network work in these tests: skip policy, one rank, no engine. */
static struct nproxy_comm_opts plain_opts(uint32_t dev, uint32_t rpp)
{
	return comm_opts(0, 1, dev, rpp, NPROXY_COMM_F_SKIP_NET, NULL);
}

TEST(comms_in_one_group_share_one_named_thread)
{
	struct nproxy_comm *comms[8];
	struct nproxy_comm_opts o = plain_opts(3, 4);
	int i, misnamed = -1, tid;

	ASSERT_EQ(0, count_proxy_threads(NULL));
	for (i = 0; i < 8; i++) {
		o.device_index = 4 + (i % 4);	/* devices 4..7 / 4 -> gid 1 */
		ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &comms[i]));
		ASSERT_EQ(1u, nproxy_comm_gid(comms[i]));
	}
	EXPECT_EQ(1u, nproxy_proxy_group_count());
	EXPECT_EQ(8u, nproxy_proxy_group_refcnt(1));
	EXPECT_EQ(1, count_proxy_threads(&misnamed));
	EXPECT_EQ(0, misnamed);
	tid = nproxy_comm_worker_tid(comms[0]);
	ASSERT_GT(tid, 0);
	for (i = 1; i < 8; i++)
		EXPECT_EQ(tid, nproxy_comm_worker_tid(comms[i]));
	if (1) {
		char path[64], name[32] = "", want[32];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
		f = fopen(path, "r");
		ASSERT_NE(NULL, f);
		ASSERT_NE(NULL, fgets(name, sizeof(name), f));
		fclose(f);
		name[strcspn(name, "\n")] = 0;
		snprintf(want, sizeof(want), "proxy-%d", tid);
		EXPECT_STREQ(want, name);
	}
	for (i = 0; i < 8; i++)
		nproxy_comm_close(comms[i]);
}

TEST(refcount_drops_per_release_and_last_release_joins_worker)
{
	struct nproxy_comm *a, *b, *c;
	struct nproxy_comm_opts o = plain_opts(0, 1);

	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &a));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &b));
	o.device_index = 1;		/* another group */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	EXPECT_EQ(2u, nproxy_proxy_group_count());
	EXPECT_EQ(2u, nproxy_proxy_group_refcnt(0));
	EXPECT_EQ(1u, nproxy_proxy_group_refcnt(1));
	EXPECT_EQ(2, count_proxy_threads(NULL));

	nproxy_comm_close(a);
	EXPECT_EQ(1u, nproxy_proxy_group_refcnt(0));
	EXPECT_EQ(2, count_proxy_threads(NULL));	/* b still holds group 0 */
	nproxy_comm_close(b);
	EXPECT_EQ(0u, nproxy_proxy_group_refcnt(0));
	EXPECT_EQ(1u, nproxy_proxy_group_count());
	/* Joined before free returned; /proc may list an exiting thread a moment longer. */
	EXPECT_TRUE(WAIT_UNTIL(count_proxy_threads(NULL) == 1, 5000));
	nproxy_comm_close(c);
	EXPECT_EQ(0u, nproxy_proxy_group_count());
	EXPECT_TRUE(WAIT_UNTIL(count_proxy_threads(NULL) == 0, 5000));
	nproxy_comm_close(NULL);
}

TEST(thread_create_failure_leaves_no_node_and_no_thread)
{
	struct nproxy_comm *c = (struct nproxy_comm *)0x1;
	struct nproxy_comm_opts o = plain_opts(2, 1);
	char want[64];

	capture_start();
	/* The worker is the library's first thread: fail its creation, once. */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_fault_set("thread:1"));
	EXPECT_ST(NPROXY_RESOURCE, nproxy_comm_open(&o, &c));
	EXPECT_EQ(NULL, c);
	EXPECT_EQ(0u, nproxy_proxy_group_count());
	EXPECT_EQ(0u, nproxy_proxy_group_refcnt(2));
	EXPECT_EQ(0, count_proxy_threads(NULL));
	snprintf(want, sizeof(want), "Failed to create worker thread: %d", EAGAIN);
	EXPECT_EQ(1, capture_count(want, 1));
	EXPECT_EQ(1u, nproxy_fault_injected());
	/* The fault is spent: the next comm of the group starts normally. */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	EXPECT_EQ(1u, nproxy_proxy_group_refcnt(2));
	EXPECT_EQ(1, count_proxy_threads(NULL));
	nproxy_comm_close(c);
	nproxy_fault_set(NULL);
	capture_stop();
}

TEST(gid_from_env_ranks_per_proxy_and_neuron_rt_fallback)
{
	struct nproxy_comm_opts o = plain_opts(5, 0);
	struct nproxy_comm *c;

	unsetenv("NPROXY_RANKS_PER_NETWORK_PROXY");
	unsetenv("NEURON_RT_RANKS_PER_NETWORK_PROXY");
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	EXPECT_EQ(5u, nproxy_comm_gid(c));		/* default: 1 rank per proxy */
	nproxy_comm_close(c);

	setenv("NEURON_RT_RANKS_PER_NETWORK_PROXY", "2", 1);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	EXPECT_EQ(2u, nproxy_comm_gid(c));
	nproxy_comm_close(c);

	setenv("NPROXY_RANKS_PER_NETWORK_PROXY", "4", 1);	/* ours wins */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	EXPECT_EQ(1u, nproxy_comm_gid(c));
	nproxy_comm_close(c);

	o.ranks_per_proxy = 5;				/* opts win */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	EXPECT_EQ(1u, nproxy_comm_gid(c));
	nproxy_comm_close(c);

	o.ranks_per_proxy = 0;
	setenv("NPROXY_RANKS_PER_NETWORK_PROXY", "zero", 1);
	capture_start();
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	capture_stop();
	EXPECT_EQ(0u, nproxy_proxy_group_count());
	/* The failed open's reason stays for this thread, and a good open clears it. */
	EXPECT_NE(NULL, strstr(nproxy_comm_strerror(NULL), "ranks per network proxy")) {
		TH_LOG("nproxy_comm_strerror(NULL) = \"%s\"", nproxy_comm_strerror(NULL));
	}
	unsetenv("NPROXY_RANKS_PER_NETWORK_PROXY");
	unsetenv("NEURON_RT_RANKS_PER_NETWORK_PROXY");
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	EXPECT_STREQ("", nproxy_comm_strerror(NULL));
	nproxy_comm_close(c);
}

static int worker_cpus(int tid, cpu_set_t *set)
{
	CPU_ZERO(set);
	return sched_getaffinity(tid, sizeof(*set), set);
}

TEST(cpuset_env_pins_only_the_worker)
{
	struct nproxy_comm_opts o = plain_opts(0, 1);
	cpu_set_t mine, w, want;
	struct nproxy_comm *c;

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(mine), &mine));
	/* Default: inherited from the creator. */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	ASSERT_EQ(0, worker_cpus(nproxy_comm_worker_tid(c), &w));
	EXPECT_TRUE(CPU_EQUAL(&mine, &w));
	nproxy_comm_close(c);

	setenv("NPROXY_PROXY_CPUSET", "0", 1);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	ASSERT_EQ(0, worker_cpus(nproxy_comm_worker_tid(c), &w));
	CPU_ZERO(&want);
	CPU_SET(0, &want);
	EXPECT_TRUE(CPU_EQUAL(&want, &w));
	/* The caller is left where it was. */
	ASSERT_EQ(0, sched_getaffinity(0, sizeof(w), &w));
	EXPECT_TRUE(CPU_EQUAL(&mine, &w));
	nproxy_comm_close(c);

	setenv("NPROXY_PROXY_CPUSET", "1-0,x", 1);
	capture_start();
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	capture_stop();
	EXPECT_EQ(0u, nproxy_proxy_group_count());
	EXPECT_TRUE(WAIT_UNTIL(count_proxy_threads(NULL) == 0, 5000));
}

/* NPROXY_PROXY_CPUSET is read as decimal, up to CPU_SETSIZE - 1, nothing after. */
static enum nproxy_status open_with_cpuset(const char *list)
{
	struct nproxy_comm_opts o = plain_opts(0, 1);
	struct nproxy_comm *c = NULL;
	enum nproxy_status st;

	setenv("NPROXY_PROXY_CPUSET", list, 1);
	capture_start();
	st = nproxy_comm_open(&o, &c);
	capture_stop();
	unsetenv("NPROXY_PROXY_CPUSET");
	if (st == NPROXY_SUCCESS)
		nproxy_comm_close(c);
	return st;
}

TEST(cpu_lists_are_decimal_bounded_and_whole)
{
	char last[32];

	snprintf(last, sizeof(last), "0-%d", CPU_SETSIZE - 1);
	EXPECT_ST(NPROXY_SUCCESS, open_with_cpuset(last));	/* CPUs past the host's are ignored */
	EXPECT_ST(NPROXY_SUCCESS, open_with_cpuset("0,0-0"));
	snprintf(last, sizeof(last), "0-%d", CPU_SETSIZE);
	EXPECT_ST(NPROXY_INVALID, open_with_cpuset(last));
	EXPECT_ST(NPROXY_INVALID, open_with_cpuset("0-1a"));
	EXPECT_ST(NPROXY_INVALID, open_with_cpuset("1a"));
	EXPECT_ST(NPROXY_INVALID, open_with_cpuset("0-"));
	EXPECT_EQ(0u, nproxy_proxy_group_count());
}

TEST(invalid_comm_options_are_rejected)
{
	struct nproxy_comm_opts o = plain_opts(0, 1);
	struct nproxy_comm *c;

	capture_start();
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(NULL, &c));
	o.size = 8;
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	EXPECT_NE(NULL, strstr(nproxy_comm_strerror(NULL), "invalid options"));
	o.size = 0;				/* never set */
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	o = plain_opts(0, 1);
	o.rank = 1;				/* rank >= n_ranks */
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	o = plain_opts(0, 1);
	o.n_ranks = 2;				/* several ranks need a host barrier */
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	o = plain_opts(0, 1);
	o.flags = 0;				/* network tasks need a seam */
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	o = plain_opts(0, 1);
	o.flags |= 1u << 7;
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	o = plain_opts(0, 1);
	o.reserved = 1;
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	o = plain_opts(0, 1);
	o.idle_policy = (enum nproxy_idle_policy)(NPROXY_IDLE_ADAPTIVE_YIELD + 1);
	EXPECT_ST(NPROXY_INVALID, nproxy_comm_open(&o, &c));
	capture_stop();
	EXPECT_EQ(0u, nproxy_proxy_group_count());
}

TEST_HARNESS_MAIN
