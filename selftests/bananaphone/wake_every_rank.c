// SPDX-License-Identifier: GPL-2.0
/*
 * Every sleeping rank, the leader (rank 0) included, is woken by the rank
 * that arrives last at a barrier, not by the end of its sleep slice
 * (BP_WAIT_SLICE_MS): with the last rank of three arriving 2 ms late, most
 * futex sleeps of ranks 0 and 1 end with a FUTEX_WAKE.  A rank the waker
 * skips still passes every barrier, a slice late, so this counts the
 * wakes (selftests/common/futex_spy.h).
 */
#include "kselftest_harness.h"
#include "bp_test.h"
#include "futex_spy.h"

#define N_RANKS	3
#define ROUNDS	60
#define LATE_MS	2

struct wake_arg {
	char job[96];
	volatile uint64_t *report;	/* shared: per rank { waits, woken } */
};

static int wake_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct wake_arg *arg = varg;
	struct nproxy_bp *bp;

	/* Park at once: no spin, no yields before the futex sleep. */
	setenv("NPROXY_BP_SPIN_US", "0", 1);
	setenv("NPROXY_BP_YIELDS", "0", 1);
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	__atomic_store_n(&futex_spy_waits, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&futex_spy_waits_woken, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < ROUNDS; i++) {
		if (rank == n - 1)
			bp_t_sleep_ms(LATE_MS);
		BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier %d: %s", i,
			   nproxy_bp_strerror(bp));
	}
	arg->report[rank * 2] = __atomic_load_n(&futex_spy_waits, __ATOMIC_RELAXED);
	arg->report[rank * 2 + 1] = __atomic_load_n(&futex_spy_waits_woken, __ATOMIC_RELAXED);
	bp_t_leave(bp);
	return 0;
}

TEST(leader_and_follower_woken_by_the_last_arrival)
{
	struct wake_arg arg = { 0 };

	arg.report = bp_t_shared(2 * N_RANKS * sizeof(uint64_t));
	ASSERT_NE(NULL, arg.report);
	bp_t_job(arg.job, sizeof(arg.job), "wer");
	ASSERT_EQ(0, bp_t_run(wake_rank, N_RANKS, &arg, 60000));
	for (uint32_t r = 0; r < N_RANKS - 1; r++) {
		uint64_t waits = arg.report[2 * r], woken = arg.report[2 * r + 1];

		TH_LOG("rank %u: %llu futex sleeps, %llu ended by a wake", r,
		       (unsigned long long)waits, (unsigned long long)woken);
		EXPECT_LE((uint64_t)ROUNDS / 2, waits);
		EXPECT_LE(waits / 2, woken);
	}
	munmap((void *)arg.report, 2 * N_RANKS * sizeof(uint64_t));
}

TEST_HARNESS_MAIN
