// SPDX-License-Identifier: GPL-2.0
/*
 * Every failure path of nproxy_rank_open() releases what it had opened:
 * the library's allocations, thread creations and libfabric calls are
 * failed in turn (nproxy_fault_set("alloc:N") etc., N = 1, 2, ... until a
 * run meets no fault), on a lone rank and on the leader of a 2-rank bus
 * whose follower is a clean forked process.  Each open must succeed or
 * return the documented status with a message, and leave no fd, thread,
 * shared mapping or /dev/shm file of this process behind.
 */
#include "kselftest_harness.h"
#include "rank_test.h"
#include <nproxy/fault.h>
#include <nproxy/log.h>

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 900
#define SWEEP_MAX 400	/* more calls of a kind than an open makes */
#define FOLLOWER_WAIT_MS 10000u

static void quiet(enum nproxy_log_level level, const char *msg, void *arg)
{
}

static bool allowed(enum nproxy_status st)
{
	return st == NPROXY_SUCCESS || st == NPROXY_RESOURCE || st == NPROXY_NET_ERROR ||
	       st == NPROXY_UNSUPPORTED;
}

struct pair {
	char id[64];
	pid_t follower;
};

/* The follower: opens, allgathers if it can, closes; whatever the leader did. */
static void follower_main(const char *job_id)
{
	struct nproxy_rank_opts o = rt_opts(job_id, 1, 2);
	struct nproxy_rank *rk;

	o.open_timeout_ms = FOLLOWER_WAIT_MS;
	if (nproxy_rank_open(&o, &rk) == NPROXY_SUCCESS)
		nproxy_rank_close(rk);
	_exit(0);
}

/* One open and close of rank 0 (with a forked rank 1 when n_ranks is 2). */
static enum nproxy_status open_once(uint32_t n_ranks, char *why, size_t why_len)
{
	struct nproxy_rank_opts o;
	struct nproxy_rank *rk;
	enum nproxy_status st;
	char job_id[64];
	pid_t follower = -1;
	int ws;

	rt_job_id(job_id, sizeof(job_id), "fault");
	o = rt_opts(n_ranks > 1 ? job_id : NULL, 0, n_ranks);
	o.open_timeout_ms = FOLLOWER_WAIT_MS;
	if (n_ranks > 1) {
		fflush(NULL);
		follower = fork();
		if (follower == 0) {
			nproxy_fault_set(NULL);
			follower_main(job_id);
		}
	}
	st = nproxy_rank_open(&o, &rk);
	snprintf(why, why_len, "%s", nproxy_rank_strerror(st ? NULL : rk));
	nproxy_rank_close(rk);
	if (follower > 0) {
		/* It gives up at its own deadline at the latest. */
		waitpid(follower, &ws, 0);
		/* Killed or not, its libfabric regions go with it. */
		struct nproxy_shm_sweep_opts so = { .size = sizeof(so), .pid = follower };
		uint32_t n;

		nproxy_net_shm_sweep(&so, &n);
	}
	return st;
}

static void sweep(struct __test_metadata *_metadata, const char *kind, uint32_t n_ranks,
		  unsigned int min_faults)
{
	struct rt_census before, got;
	unsigned int n, faults = 0;
	char why[512];

	nproxy_log_set_sink(quiet, NULL);
	ASSERT_ST(NPROXY_SUCCESS, open_once(n_ranks, why, sizeof(why)));	/* warm-up */
	before = rt_census();
	for (n = 1; n <= SWEEP_MAX; n++) {
		enum nproxy_status st;
		char spec[32];
		uint64_t hit;

		snprintf(spec, sizeof(spec), "%s:%u", kind, n);
		ASSERT_ST(NPROXY_SUCCESS, nproxy_fault_set(spec));
		st = open_once(n_ranks, why, sizeof(why));
		hit = nproxy_fault_injected();
		nproxy_fault_set(NULL);
		if (!hit) {
			EXPECT_ST(NPROXY_SUCCESS, st);
			break;
		}
		faults++;
		EXPECT_TRUE(allowed(st)) TH_LOG("%s: %s: %s", spec, nproxy_status_str(st), why);
		if (st != NPROXY_SUCCESS)
			EXPECT_NE(0, why[0]) TH_LOG("%s: %s without a message", spec,
						    nproxy_status_str(st));
		/* One leak fails the test: stop there (each check waits 5 s to settle). */
		if (!rt_census_settles(before, &got)) {
			TH_LOG("%s left fds %d->%d threads %d->%d maps %d->%d shm %d->%d (%s)",
			       spec, before.fds, got.fds, before.threads, got.threads,
			       before.shared_maps, got.shared_maps, before.shm_files,
			       got.shm_files, why);
			EXPECT_TRUE(false);
			break;
		}
	}
	nproxy_log_set_sink(NULL, NULL);
	if (!_metadata->passed)
		return;
	EXPECT_LE(n, (unsigned int)SWEEP_MAX);
	EXPECT_GE(faults, min_faults);
	TH_LOG("%s over %u rank(s): %u faults injected", kind, n_ranks, faults);
}

TEST(every_allocation_of_a_lone_rank)
{
	sweep(_metadata, "alloc", 1, 5);
}

TEST(every_thread_creation_of_a_lone_rank)
{
	sweep(_metadata, "thread", 1, 2);	/* the device emulator, the proxy worker */
}

TEST(every_libfabric_call_of_a_lone_rank)
{
	sweep(_metadata, "fi", 1, 8);
}

TEST(every_allocation_of_a_bus_leader)
{
	sweep(_metadata, "alloc", 2, 10);
}

TEST_HARNESS_MAIN
