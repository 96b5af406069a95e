// SPDX-License-Identifier: GPL-2.0
/*
 * How fast a waiting rank sees a peer die, by its median: the design is
 * about two liveness polls (BP_WAIT_SLICE_MS, 10 ms each), so over seven
 * kills the median from SIGKILL to the waiter's NPROXY_PEER_DEAD is well
 * under 100 ms in a plain build (liveness.c only bounds the worst case at
 * seconds).  Sanitizer and valgrind builds slow every step: skipped there.
 * Each round: a two-rank bus; the follower completes one allgather and
 * then sleeps; the leader enters the next allgather and a helper thread
 * kills the follower 30 ms later.
 */
#include <pthread.h>
#include "kselftest_harness.h"
#include "bp_test.h"

#define ROUNDS		7
#define MEDIAN_BOUND_MS	100

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SLOW_BUILD 1
#else
#define SLOW_BUILD 0
#endif

struct killer {
	pid_t victim;
	uint64_t kill_ns;
};

static void *kill_later(void *varg)
{
	struct killer *k = varg;

	bp_t_sleep_ms(30);
	k->kill_ns = nproxy_test_now_ns();
	kill(k->victim, SIGKILL);
	return NULL;
}

static int follower(uint32_t rank, uint32_t n, void *varg)
{
	const char *job = varg;
	size_t lens[2], offs[2];
	struct nproxy_bp *bp;
	void *all = NULL;

	BP_T_CHECK(bp_t_join(job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	BP_T_CHECK(nproxy_bp_allgather(bp, "f", 1, &all, lens, offs, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS,
		   "allgather");
	free(all);
	bp_t_sleep_ms(20000);	/* killed long before */
	return 0;
}

/* One round: the ms from the kill to the leader's PEER_DEAD, or -1. */
static double one_round(struct __test_metadata *_metadata, unsigned int round)
{
	struct bp_run run = { 0 };
	size_t lens[2], offs[2];
	struct killer k;
	struct nproxy_bp *bp;
	enum nproxy_status st;
	pthread_t th;
	void *all = NULL;
	char job[96];
	uint64_t end_ns;

	bp_t_job(job, sizeof(job), "dm");
	if (nproxy_test_bp_open(job, 0, 2, 0, &bp) != NPROXY_SUCCESS)
		return -1;
	run.pids[0] = bp_t_spawn(follower, 1, 2, job);
	st = nproxy_bp_allgather(bp, "l", 1, &all, lens, offs, BP_T_TIMEOUT_MS);
	free(all);
	all = NULL;
	if (st != NPROXY_SUCCESS) {
		TH_LOG("round %u: first allgather: %s", round, nproxy_bp_strerror(bp));
		kill(run.pids[0], SIGKILL);
		bp_t_reap(&run, 1, 5000);
		nproxy_bp_close(bp);
		return -1;
	}
	k.victim = run.pids[0];
	pthread_create(&th, NULL, kill_later, &k);
	st = nproxy_bp_allgather(bp, "l", 1, &all, lens, offs, BP_T_TIMEOUT_MS);
	end_ns = nproxy_test_now_ns();
	pthread_join(th, NULL);
	free(all);
	bp_t_reap(&run, 1, 5000);
	nproxy_bp_hangup(bp);
	nproxy_bp_close(bp);
	if (st != NPROXY_PEER_DEAD) {
		TH_LOG("round %u: %s instead of PEER_DEAD", round, nproxy_status_str(st));
		return -1;
	}
	return (double)(end_ns - k.kill_ns) / 1e6;
}

TEST(peer_death_seen_by_a_waiter_median_under_100_ms)
{
	double ms[ROUNDS];

	if (SLOW_BUILD || getenv("NPROXY_TEST_WRAPPER"))
		SKIP(return, "a sanitizer or valgrind build: latencies are not the design's");
	for (unsigned int i = 0; i < ROUNDS; i++) {
		ms[i] = one_round(_metadata, i);
		ASSERT_LE(0.0, ms[i]);
	}
	TH_LOG("kill to PEER_DEAD: median %.1f ms of %d", nproxy_test_median_double(ms, ROUNDS),
	       ROUNDS);
	EXPECT_GT(MEDIAN_BOUND_MS, nproxy_test_median_double(ms, ROUNDS));
}

TEST_HARNESS_MAIN
