// SPDX-License-Identifier: GPL-2.0
/*
 * A rank asleep on its bell is woken by the peer that makes it runnable,
 * not by the end of its sleep slice (BP_WAIT_SLICE_MS, the liveness poll).
 * A dropped wake costs every waiter a slice and fails nothing else, so this
 * counts the futex sleeps that a FUTEX_WAKE ended (testlib/futex_spy.h).
 */
#include "kselftest_harness.h"
#include "bp_test.h"
#include "futex_spy.h"

#define ROUNDS		100
#define LATE_MS		2	/* rank 0 arrives this late: rank 1 is asleep by then */

struct wake_arg {
	char job[96];
	volatile uint64_t *report;	/* shared: per rank { waits, woken } */
};

static int wake_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct wake_arg *arg = varg;
	struct nproxy_bp *bp;
	int i;

	/* Park at once: no spin, no yields before the futex sleep. */
	setenv("NPROXY_BP_SPIN_US", "0", 1);
	setenv("NPROXY_BP_YIELDS", "0", 1);
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	__atomic_store_n(&futex_spy_waits, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&futex_spy_waits_woken, 0, __ATOMIC_RELAXED);
	for (i = 0; i < ROUNDS; i++) {
		if (rank == 0)
			bp_t_sleep_ms(LATE_MS);
		BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier %d: %s", i,
			   nproxy_bp_strerror(bp));
	}
	arg->report[rank * 2] = __atomic_load_n(&futex_spy_waits, __ATOMIC_RELAXED);
	arg->report[rank * 2 + 1] = __atomic_load_n(&futex_spy_waits_woken, __ATOMIC_RELAXED);
	bp_t_leave(bp);
	return 0;
}

TEST(a_sleeping_rank_is_woken_by_its_peer_not_by_its_timeout)
{
	struct wake_arg arg = { 0 };
	uint64_t waits, woken;

	arg.report = bp_t_shared(4 * sizeof(uint64_t));
	ASSERT_NE(NULL, arg.report);
	bp_t_job(arg.job, sizeof(arg.job), "wake");
	ASSERT_EQ(0, bp_t_run(wake_rank, 2, &arg, 60000));
	waits = arg.report[2];
	woken = arg.report[3];
	TH_LOG("rank 1: %llu futex sleeps, %llu ended by a wake", (unsigned long long)waits,
	       (unsigned long long)woken);
	/* Rank 1 sleeps in (nearly) every barrier; most end with rank 0's ring. */
	EXPECT_GE(waits, 1u);
	EXPECT_GE(woken, 1u);
	munmap((void *)arg.report, 4 * sizeof(uint64_t));
}

TEST_HARNESS_MAIN
