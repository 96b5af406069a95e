// SPDX-License-Identifier: GPL-2.0
/*
 * A rank asleep on its bell is woken by the peer that makes it runnable,
 * not by the end of its sleep slice (BP_WAIT_SLICE_MS, the liveness poll).
 * A dropped wake costs every waiter a slice and fails nothing else, so this
 * counts the futex sleeps that a FUTEX_WAKE ended (testlib/futex_spy.h):
 *
 *  - two ranks, rank 0 arriving late: rank 1 is asleep by then, and rank
 *    0's ring wakes it;
 *  - every sleeping rank, the leader (rank 0) included, is woken by the
 *    rank that arrives last at a barrier: with the last rank of three
 *    arriving 2 ms late, most futex sleeps of ranks 0 and 1 end with a
 *    FUTEX_WAKE.  A rank the waker skips still passes every barrier, a
 *    slice late, so only the counts show it;
 *  - a leader that streams more than a ring's worth to a late reader sleeps
 *    waiting for room (for any reader), and the reader that frees a slot
 *    wakes it;
 *  - and the other way: a rank that was woken and is busy elsewhere costs
 *    its peers no FUTEX_WAKE (its "sleeping" word went back to 0);
 *  - and a poll of a barrier that is already done wakes nobody: a peer
 *    asleep in its next wait is not rung by every test() of the last one.
 */
#include "kselftest_harness.h"
#include "bp_test.h"
#include "futex_spy.h"

#define LATE_MS		2	/* the late rank arrives this late: the others are asleep by then */
#define MAX_RANKS	3

struct wake_arg {
	char job[96];
	uint32_t late;		/* the rank that arrives late at every barrier */
	int rounds;
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
	for (int i = 0; i < arg->rounds; i++) {
		if (rank == arg->late)
			bp_t_sleep_ms(LATE_MS);
		BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier %d: %s", i,
			   nproxy_bp_strerror(bp));
	}
	arg->report[rank * 2] = __atomic_load_n(&futex_spy_waits, __ATOMIC_RELAXED);
	arg->report[rank * 2 + 1] = __atomic_load_n(&futex_spy_waits_woken, __ATOMIC_RELAXED);
	bp_t_leave(bp);
	return 0;
}

#define REPORT_BYTES	(2 * MAX_RANKS * sizeof(uint64_t))

/* fn on n ranks with a shared report (unmap it with REPORT_BYTES); NULL on failure. */
static volatile uint64_t *run_report(struct wake_arg *arg, const char *tag, bp_rank_fn fn,
				     uint32_t n)
{
	arg->report = bp_t_shared(REPORT_BYTES);
	if (!arg->report)
		return NULL;
	if (BP_T_RUN_JOB(arg, tag, fn, n, 60000)) {
		munmap((void *)arg->report, REPORT_BYTES);
		return NULL;
	}
	return arg->report;
}

/* n ranks, rank `late` late at each of `rounds` barriers; the report, or NULL. */
static volatile uint64_t *run_wake(struct wake_arg *arg, const char *tag, uint32_t n)
{
	if (!run_report(arg, tag, wake_rank, n))
		return NULL;
	for (uint32_t r = 0; r < n; r++)
		fprintf(stderr, "# rank %u: %llu futex sleeps, %llu ended by a wake\n", r,
			(unsigned long long)arg->report[2 * r],
			(unsigned long long)arg->report[2 * r + 1]);
	return arg->report;
}

TEST(a_sleeping_rank_is_woken_by_its_peer_not_by_its_timeout)
{
	struct wake_arg arg = { .late = 0, .rounds = 100 };
	volatile uint64_t *report = run_wake(&arg, "wake", 2);

	ASSERT_NE(NULL, report);
	/* Rank 1 sleeps in (nearly) every barrier; most end with rank 0's ring. */
	EXPECT_GE(report[2], 1u);
	EXPECT_GE(report[3], 1u);
	munmap((void *)report, REPORT_BYTES);
}

TEST(leader_and_follower_woken_by_the_last_arrival)
{
	struct wake_arg arg = { .late = MAX_RANKS - 1, .rounds = 60 };
	volatile uint64_t *report = run_wake(&arg, "wer", MAX_RANKS);

	ASSERT_NE(NULL, report);
	for (uint32_t r = 0; r < MAX_RANKS - 1; r++) {
		uint64_t waits = report[2 * r], woken = report[2 * r + 1];

		EXPECT_LE((uint64_t)arg.rounds / 2, waits) TH_LOG("rank %u", r);
		EXPECT_LE(waits / 2, woken) TH_LOG("rank %u", r);
	}
	munmap((void *)report, REPORT_BYTES);
}

#define STREAM_BLOB	(256u * 1024)	/* 4 rings' worth: the writer waits for room */

/* The leader bcasts STREAM_BLOB `rounds` times; the follower starts each one late. */
static int stream_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct wake_arg *arg = varg;
	char *blob = rank ? NULL : calloc(1, STREAM_BLOB);
	struct nproxy_bp *bp;

	setenv("NPROXY_BP_SPIN_US", "0", 1);
	setenv("NPROXY_BP_YIELDS", "0", 1);
	BP_T_CHECK(rank || blob, "calloc");
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	__atomic_store_n(&futex_spy_waits, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&futex_spy_waits_woken, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < arg->rounds; i++) {
		size_t len = 0;

		if (rank)
			bp_t_sleep_ms(LATE_MS);
		BP_T_CHECK(nproxy_bp_bcast(bp, blob, STREAM_BLOB, NULL, &len, BP_T_TIMEOUT_MS) ==
			   NPROXY_SUCCESS && len == STREAM_BLOB, "bcast %d: %s", i,
			   nproxy_bp_strerror(bp));
	}
	arg->report[rank * 2] = __atomic_load_n(&futex_spy_waits, __ATOMIC_RELAXED);
	arg->report[rank * 2 + 1] = __atomic_load_n(&futex_spy_waits_woken, __ATOMIC_RELAXED);
	bp_t_leave(bp);
	free(blob);
	return 0;
}

TEST(a_writer_waiting_for_room_is_woken_by_the_reader_that_made_it)
{
	struct wake_arg arg = { .rounds = 20 };
	volatile uint64_t *report = run_report(&arg, "room", stream_rank, 2);

	ASSERT_NE(NULL, report);
	fprintf(stderr, "# leader: %llu futex sleeps, %llu ended by a wake\n",
		(unsigned long long)report[0], (unsigned long long)report[1]);
	/* The leader sleeps on a full ring in every round; a reader wakes it. */
	EXPECT_LE((uint64_t)arg.rounds, report[0]);
	EXPECT_LE(report[0] / 2, report[1]);
	munmap((void *)report, REPORT_BYTES);
}

#define AWAKE_ROUNDS	6
#define AWAKE_NAP_MS	20	/* rank 0 is busy (not on the bus) this long... */
#define ARRIVE_AFTER_MS	5	/* ...and rank 1 arrives at the next barrier meanwhile */
#define AWAKE_FLAG	4	/* report[]: the barrier rank 0 arrived at and naps in */

/*
 * Each round: barrier 2i+1 with rank 1 late (rank 0 sleeps, rank 1's ring
 * wakes it); then rank 0 arrives at barrier 2i+2 without waiting and naps
 * off the bus, and rank 1's arrival completes that barrier meanwhile: the
 * FUTEX_WAKEs of that arrival (the completer rings every sleeper) are
 * counted.
 */
static int barrier_poll(struct nproxy_bp *bp, uint32_t rank, uint64_t seq)
{
	uint64_t deadline = bp_t_now_ms() + BP_T_TIMEOUT_MS;
	bool done = false;

	while (!done && bp_t_now_ms() < deadline) {
		BP_T_CHECK(nproxy_bp_barrier_test(bp, seq, &done) == NPROXY_SUCCESS, "test: %s",
			   nproxy_bp_strerror(bp));
		if (!done)
			usleep(200);
	}
	BP_T_CHECK(done, "barrier %llu not done in %d ms", (unsigned long long)seq, BP_T_TIMEOUT_MS);
	return 0;
}

static int awake_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct wake_arg *arg = varg;
	uint64_t wakes = 0;
	struct nproxy_bp *bp;

	setenv("NPROXY_BP_SPIN_US", "0", 1);
	setenv("NPROXY_BP_YIELDS", "0", 1);
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	__atomic_store_n(&futex_spy_waits, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < AWAKE_ROUNDS; i++) {
		uint64_t seq, before;

		/* Late for rank 0, which polls barrier 2i for up to a nap longer. */
		if (rank)
			bp_t_sleep_ms(LATE_MS + (i ? AWAKE_NAP_MS : 0));
		BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier: %s",
			   nproxy_bp_strerror(bp));
		seq = nproxy_bp_barrier_next_seq(bp);
		if (!rank) {
			BP_T_CHECK(nproxy_bp_barrier_arrive(bp, seq) == NPROXY_SUCCESS, "arrive: %s",
				   nproxy_bp_strerror(bp));
			/* Out of every bus wait from here to the poll: say so. */
			arg->report[AWAKE_FLAG] = seq;
			bp_t_sleep_ms(AWAKE_NAP_MS);
			if (barrier_poll(bp, rank, seq))
				return 1;
			continue;
		}
		/* Rank 0 may be slow to leave its wake-up (a loaded host): wait for it. */
		for (uint64_t end = bp_t_now_ms() + BP_T_TIMEOUT_MS;
		     arg->report[AWAKE_FLAG] != seq && bp_t_now_ms() < end;)
			usleep(100);
		BP_T_CHECK(arg->report[AWAKE_FLAG] == seq, "rank 0 never reached barrier %llu",
			   (unsigned long long)seq);
		bp_t_sleep_ms(ARRIVE_AFTER_MS);
		before = __atomic_load_n(&futex_spy_wakes, __ATOMIC_RELAXED);
		BP_T_CHECK(nproxy_bp_barrier_arrive(bp, seq) == NPROXY_SUCCESS, "arrive: %s",
			   nproxy_bp_strerror(bp));
		wakes += __atomic_load_n(&futex_spy_wakes, __ATOMIC_RELAXED) - before;
		if (barrier_poll(bp, rank, seq))
			return 1;
	}
	arg->report[rank * 2] = __atomic_load_n(&futex_spy_waits, __ATOMIC_RELAXED);
	arg->report[rank * 2 + 1] = wakes;
	bp_t_leave(bp);
	return 0;
}

TEST(a_rank_woken_and_busy_elsewhere_costs_its_peer_no_wake)
{
	struct wake_arg arg = { 0 };
	volatile uint64_t *report = run_report(&arg, "awake", awake_rank, 2);

	ASSERT_NE(NULL, report);
	fprintf(stderr, "# rank 0: %llu futex sleeps; rank 1: %llu FUTEX_WAKEs arriving while rank 0 was busy\n",
		(unsigned long long)report[0], (unsigned long long)report[3]);
	/* Rank 0 did sleep (and was woken), so a stale "sleeping" would show. */
	EXPECT_LE(AWAKE_ROUNDS / 2, report[0]);
	EXPECT_EQ(0u, report[3]);
	munmap((void *)report, REPORT_BYTES);
}

#define POLLS		20
#define POLL_GAP_MS	1

/*
 * Both ranks pass barrier 1.  Rank 1 then sleeps in barrier 2 while rank 0,
 * not yet there, polls barrier 1 (done) POLLS times: the FUTEX_WAKEs those
 * polls make.  Rank 0 then arrives and both pass barrier 2.
 */
static int done_poll_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct wake_arg *arg = varg;
	struct nproxy_bp *bp;
	uint64_t seq, before, sleeps_before;

	setenv("NPROXY_BP_SPIN_US", "0", 1);
	setenv("NPROXY_BP_YIELDS", "0", 1);
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier 1: %s",
		   nproxy_bp_strerror(bp));
	seq = nproxy_bp_barrier_next_seq(bp) - 1;
	sleeps_before = __atomic_load_n(&futex_spy_waits, __ATOMIC_RELAXED);
	if (!rank) {
		bp_t_sleep_ms(LATE_MS * 10);	/* rank 1 is asleep in barrier 2 by then */
		before = __atomic_load_n(&futex_spy_wakes, __ATOMIC_RELAXED);
		for (int i = 0; i < POLLS; i++) {
			bool done = false;

			BP_T_CHECK(nproxy_bp_barrier_test(bp, seq, &done) == NPROXY_SUCCESS && done,
				   "test of done barrier %llu: %s", (unsigned long long)seq,
				   nproxy_bp_strerror(bp));
			bp_t_sleep_ms(POLL_GAP_MS);
		}
		arg->report[1] = __atomic_load_n(&futex_spy_wakes, __ATOMIC_RELAXED) - before;
	}
	BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier 2: %s",
		   nproxy_bp_strerror(bp));
	if (rank)
		arg->report[2] = __atomic_load_n(&futex_spy_waits, __ATOMIC_RELAXED) - sleeps_before;
	bp_t_leave(bp);
	return 0;
}

TEST(polling_a_done_barrier_wakes_nobody)
{
	struct wake_arg arg = { 0 };
	volatile uint64_t *report = run_report(&arg, "dpoll", done_poll_rank, 2);

	ASSERT_NE(NULL, report);
	fprintf(stderr, "# rank 0: %llu FUTEX_WAKEs in %d polls of a done barrier; rank 1: %llu futex sleeps in barrier 2\n",
		(unsigned long long)report[1], POLLS, (unsigned long long)report[2]);
	EXPECT_LE(1u, report[2]);	/* rank 1 slept meanwhile: a wake had someone to ring */
	EXPECT_EQ(0u, report[1]);
	munmap((void *)report, REPORT_BYTES);
}

TEST_HARNESS_MAIN
