// SPDX-License-Identifier: GPL-2.0
/*
 * Bananaphone barrier: 1000 barriers in a row (nobody may leave barrier i
 * before every rank entered it, checked through a shared page), the
 * non-blocking arrive/test pair, and a timed-out barrier that is retried.
 */
#include "kselftest_harness.h"
#include "bp_test.h"

struct bar_arg {
	char job[96];
	int rounds;
	bool spin;		/* exercise the spin-then-sleep path */
	volatile uint64_t *entered;	/* shared: barrier number each rank entered */
};

static int barrier_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct bar_arg *arg = varg;
	struct nproxy_bp *bp;
	uint32_t r;
	int i;

	BP_T_CHECK(bp_t_join_spin(arg->job, rank, n, arg->spin, &bp) == NPROXY_SUCCESS, "join");
	for (i = 1; i <= arg->rounds; i++) {
		enum nproxy_status st;

		__atomic_store_n(&arg->entered[rank], (uint64_t)i, __ATOMIC_SEQ_CST);
		st = nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS);
		BP_T_CHECK(st == NPROXY_SUCCESS, "barrier %d: %s", i, nproxy_bp_strerror(bp));
		for (r = 0; r < n; r++)
			BP_T_CHECK(__atomic_load_n(&arg->entered[r], __ATOMIC_SEQ_CST) >= (uint64_t)i,
				   "left barrier %d before rank %u entered it", i, r);
	}
	bp_t_leave(bp);
	return 0;
}

static int run_barriers(uint32_t n, int rounds, bool spin)
{
	struct bar_arg arg = { .rounds = rounds, .spin = spin };
	int bad;

	arg.entered = bp_t_shared(NPROXY_BP_MAX_RANKS * sizeof(uint64_t));
	if (!arg.entered)
		return -1;
	bp_t_job(arg.job, sizeof(arg.job), "bar");
	bad = bp_t_run(barrier_rank, n, &arg, 25000);
	munmap((void *)arg.entered, NPROXY_BP_MAX_RANKS * sizeof(uint64_t));
	return bad;
}

TEST(barrier_1000_2_ranks) { ASSERT_EQ(0, run_barriers(2, 1000, false)); }
TEST(barrier_1000_4_ranks) { ASSERT_EQ(0, run_barriers(4, 1000, false)); }
TEST(barrier_1000_8_ranks) { ASSERT_EQ(0, run_barriers(8, 1000, false)); }
TEST(barrier_100_16_ranks) { ASSERT_EQ(0, run_barriers(16, 100, false)); }
/* Spinning before sleeping (the default when pinned) must not change anything. */
TEST(barrier_1000_2_ranks_spinning) { ASSERT_EQ(0, run_barriers(2, 1000, true)); }
TEST(barrier_200_4_ranks_spinning) { ASSERT_EQ(0, run_barriers(4, 200, true)); }

/* arrive/test: done only once everyone arrived; test never blocks. */
static int nonblocking_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct bar_arg *arg = varg;
	struct nproxy_bp *bp;
	int i;

	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	BP_T_CHECK(nproxy_bp_barrier_next_seq(bp) == 1, "first seq");
	BP_T_CHECK(nproxy_bp_barrier_arrive(bp, 2) == NPROXY_INVALID, "seq 2 before 1 accepted");
	for (i = 1; i <= arg->rounds; i++) {
		uint64_t seq = nproxy_bp_barrier_next_seq(bp);
		uint64_t spins = 0;
		bool done = false;
		uint32_t r;

		BP_T_CHECK(seq == (uint64_t)i, "seq %llu at round %d", (unsigned long long)seq, i);
		/* Stagger the arrivals so the test sees "not yet" often. */
		if ((uint32_t)i % n == rank)
			bp_t_sleep_ms(3);
		__atomic_store_n(&arg->entered[rank], seq, __ATOMIC_SEQ_CST);
		BP_T_CHECK(nproxy_bp_barrier_arrive(bp, seq) == NPROXY_SUCCESS, "arrive: %s",
			   nproxy_bp_strerror(bp));
		while (!done) {
			enum nproxy_status st = nproxy_bp_barrier_test(bp, seq, &done);

			BP_T_CHECK(st == NPROXY_SUCCESS, "test: %s", nproxy_bp_strerror(bp));
			if (!done) {
				spins++;
				usleep(100);
			}
			BP_T_CHECK(spins < 200000, "barrier %d never completed", i);
		}
		for (r = 0; r < n; r++)
			BP_T_CHECK(__atomic_load_n(&arg->entered[r], __ATOMIC_SEQ_CST) >= seq,
				   "done before rank %u arrived", r);
		/* Mixing with the blocking barrier keeps one numbering. */
		BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier: %s",
			   nproxy_bp_strerror(bp));
		BP_T_CHECK(nproxy_bp_barrier_next_seq(bp) == seq + 2, "seq after blocking barrier");
		__atomic_store_n(&arg->entered[rank], seq + 1, __ATOMIC_SEQ_CST);
		i++;
	}
	bp_t_leave(bp);
	return 0;
}

TEST(barrier_nonblocking)
{
	struct bar_arg arg = { .rounds = 40 };

	arg.entered = bp_t_shared(NPROXY_BP_MAX_RANKS * sizeof(uint64_t));
	ASSERT_NE(NULL, arg.entered);
	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "nb", nonblocking_rank, 4, 25000));
}

/* Arrive/test before the join completed: the arrival is held back. */
static int early_arrive_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct bar_arg *arg = varg;
	struct nproxy_bp *bp;
	bool done = false;
	int tries = 0;

	if (rank == 2)
		bp_t_sleep_ms(150);	/* everyone else polls while rank 2 is missing */
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	BP_T_CHECK(nproxy_bp_barrier_arrive(bp, 1) == NPROXY_SUCCESS, "arrive: %s", nproxy_bp_strerror(bp));
	while (!done && tries++ < 10000) {
		BP_T_CHECK(nproxy_bp_barrier_test(bp, 1, &done) == NPROXY_SUCCESS, "test: %s",
			   nproxy_bp_strerror(bp));
		if (!done)
			usleep(500);
	}
	BP_T_CHECK(done, "never done");
	bp_t_leave(bp);
	return 0;
}

TEST(barrier_arrive_before_join)
{
	struct bar_arg arg = { 0 };

	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "ea", early_arrive_rank, 3, 20000));
}

/* A barrier that times out can be retried: the retry waits for the same one. */
static int retry_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct bar_arg *arg = varg;
	enum nproxy_status st;
	struct nproxy_bp *bp;

	BP_T_CHECK(bp_t_join_all(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	if (rank == 1) {
		uint64_t end = bp_t_now_ms() + 10000;

		/* Enter only after both others timed out. */
		while (__atomic_load_n(&arg->entered[0], __ATOMIC_ACQUIRE) +
			       __atomic_load_n(&arg->entered[2], __ATOMIC_ACQUIRE) < 2 &&
		       bp_t_now_ms() < end)
			bp_t_sleep_ms(5);
	} else {
		st = nproxy_bp_barrier(bp, 100);
		__atomic_store_n(&arg->entered[rank], 1, __ATOMIC_RELEASE);
		BP_T_CHECK(st == NPROXY_TIMEOUT, "expected a timeout, got %s", nproxy_status_str(st));
		BP_T_CHECK(strstr(nproxy_bp_strerror(bp), "rank 1"), "text does not name rank 1: %s",
			   nproxy_bp_strerror(bp));
	}
	BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "retry: %s",
		   nproxy_bp_strerror(bp));
	BP_T_CHECK(nproxy_bp_barrier_next_seq(bp) == 3, "seq %llu",
		   (unsigned long long)nproxy_bp_barrier_next_seq(bp));
	BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "third: %s",
		   nproxy_bp_strerror(bp));
	bp_t_leave(bp);
	return 0;
}

TEST(barrier_timeout_retry)
{
	struct bar_arg arg = { 0 };

	arg.entered = bp_t_shared(NPROXY_BP_MAX_RANKS * sizeof(uint64_t));
	ASSERT_NE(NULL, arg.entered);
	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "rt", retry_rank, 3, 20000));
	munmap((void *)arg.entered, NPROXY_BP_MAX_RANKS * sizeof(uint64_t));
}

/* After this rank's hangup an arrival is refused and not counted. */
TEST(barrier_arrive_after_hangup_refused)
{
	struct nproxy_bp *bp;
	char job[96];
	bool done = true;

	bp_t_job(job, sizeof(job), "arrive-hup");
	ASSERT_EQ(NPROXY_SUCCESS, bp_t_join(job, 0, 1, &bp));
	nproxy_bp_hangup(bp);
	EXPECT_EQ(NPROXY_INVALID, nproxy_bp_barrier_arrive(bp, 1));
	EXPECT_NE(NULL, strstr(nproxy_bp_strerror(bp), "barrier_arrive after this rank hung up"))
		TH_LOG("\"%s\"", nproxy_bp_strerror(bp));
	EXPECT_EQ(1u, nproxy_bp_barrier_next_seq(bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_bp_barrier_test(bp, 1, &done));
	EXPECT_FALSE(done);
	nproxy_bp_close(bp);
}

TEST_HARNESS_MAIN
