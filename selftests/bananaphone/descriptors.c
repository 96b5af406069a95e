// SPDX-License-Identifier: GPL-2.0
/*
 * Bananaphone file descriptors stay O(ranks) per host, not O(ranks^2):
 * a follower holds the leader's pidfd (and, while it waits, the one of the
 * rank it waits for), the leader one per other process; ranks of one
 * process watch none of each other.  So 64 ranks as 64 processes hold a
 * handful of fds each, and 64 ranks in one process join under a
 * descriptor limit of 256 (64 x 64 pidfds would not fit, and the
 * welcome's passed fds would be cut off with MSG_CTRUNC).  When the
 * process really is out of descriptors, the join fails naming the cause.
 * The pidfd a follower watches is opened once per rank it waits for, not
 * at every liveness poll of a long wait (counted through futex_spy.h).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include "kselftest_harness.h"
#include "bp_test.h"
#include "futex_spy.h"

#define FD_RANKS 64

struct fd_arg {
	char job[96];
	volatile int *held;	/* shared: fds the bus holds in each rank after an all-gather */
};

static int fd_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct fd_arg *arg = varg;
	struct nproxy_bp *bp;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS];
	int before = bp_t_count_fds();
	void *bufs = NULL;
	enum nproxy_status st;

	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	st = nproxy_bp_allgather(bp, &rank, sizeof(rank), &bufs, lens, offs, 20000);
	BP_T_CHECK(st == NPROXY_SUCCESS, "allgather: %s", nproxy_bp_strerror(bp));
	free(bufs);
	st = nproxy_bp_barrier(bp, 20000);
	BP_T_CHECK(st == NPROXY_SUCCESS, "barrier: %s", nproxy_bp_strerror(bp));
	arg->held[rank] = bp_t_count_fds() - before;
	bp_t_leave(bp);
	BP_T_CHECK(bp_t_count_fds() == before, "%d fds left after close", bp_t_count_fds() - before);
	return 0;
}

/* 64 processes: a follower holds at most 3 fds (leader, watched rank, spare), the leader n. */
TEST(sixty_four_processes_hold_o1_fds_each)
{
	struct fd_arg arg;
	uint32_t r;
	int total = 0;

	arg.held = bp_t_shared(FD_RANKS * sizeof(int));
	ASSERT_NE(NULL, arg.held);
	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "fds", fd_rank, FD_RANKS, 60000));
	for (r = 0; r < FD_RANKS; r++) {
		total += arg.held[r];
		if (r)
			EXPECT_GE(3, arg.held[r]) {
				TH_LOG("follower %u holds %d fds", r, arg.held[r]);
			}
	}
	/* The leader: its listening socket, one pidfd per follower process. */
	EXPECT_GE(FD_RANKS + 1, arg.held[0]);
	TH_LOG("%d ranks in %d processes: %d fds held by the bus in all (leader %d)", FD_RANKS,
	       FD_RANKS, total, arg.held[0]);
	EXPECT_GE(4 * FD_RANKS, total);
	munmap((void *)arg.held, FD_RANKS * sizeof(int));
}

struct thr_arg {
	const char *job;
	uint32_t rank;
	uint32_t timeout_ms;
	enum nproxy_status st;
	char text[256];
};

static void *thr_rank(void *varg)
{
	struct thr_arg *a = varg;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS];
	struct nproxy_bp *bp;
	void *bufs = NULL;

	a->st = nproxy_test_bp_open(a->job, a->rank, FD_RANKS, a->timeout_ms, &bp);
	if (a->st) {
		snprintf(a->text, sizeof(a->text), "%s", nproxy_bp_strerror(NULL));
		return NULL;
	}
	a->st = nproxy_bp_allgather(bp, &a->rank, sizeof(a->rank), &bufs, lens, offs,
				    a->timeout_ms);
	if (a->st)
		snprintf(a->text, sizeof(a->text), "%s", nproxy_bp_strerror(bp));
	free(bufs);
	if (!a->st && lens[FD_RANKS - 1] != sizeof(a->rank))
		a->st = NPROXY_FAILURE;
	if (a->st)
		nproxy_bp_close(bp);
	else
		bp_t_leave(bp);
	return NULL;
}

/* All 64 ranks as threads of one process; returns how many failed. */
static int run_threads(struct thr_arg *args, const char *job, uint32_t timeout_ms)
{
	pthread_t th[FD_RANKS];
	uint32_t r;
	int bad = 0;

	for (r = 0; r < FD_RANKS; r++) {
		args[r] = (struct thr_arg){ .job = job, .rank = r, .timeout_ms = timeout_ms };
		if (pthread_create(&th[r], NULL, thr_rank, &args[r]))
			return -1;
	}
	for (r = 0; r < FD_RANKS; r++) {
		pthread_join(th[r], NULL);
		bad += args[r].st != NPROXY_SUCCESS;
	}
	return bad;
}

TEST(sixty_four_ranks_in_one_process_under_ulimit_256)
{
	struct rlimit old, lim;
	struct thr_arg args[FD_RANKS];
	char job[96];
	int before = bp_t_count_fds(), bad;
	uint32_t r;

	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
	lim = old;
	lim.rlim_cur = 256;
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &lim));
	bp_t_job(job, sizeof(job), "fds1");
	bad = run_threads(args, job, 20000);
	setrlimit(RLIMIT_NOFILE, &old);
	EXPECT_EQ(0, bad);
	for (r = 0; r < FD_RANKS; r++)
		if (args[r].st)
			TH_LOG("rank %u: %s: %s", r, nproxy_status_str(args[r].st), args[r].text);
	EXPECT_EQ(before, bp_t_count_fds());
}

/*
 * Out of descriptors for real: the limit sits just above what is open, so
 * the leader cannot accept (or a follower cannot dial) every rank.  Every
 * rank fails within its timeout and at least one says why in words
 * ("Too many open files"), none with a malformed-reply riddle.
 */
TEST(out_of_descriptors_is_named)
{
	struct rlimit old, lim;
	struct thr_arg args[FD_RANKS];
	char job[96];
	bool named = false;
	uint32_t r;
	int before = bp_t_count_fds();

	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
	lim = old;
	lim.rlim_cur = (rlim_t)before + 40;
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &lim));
	bp_t_job(job, sizeof(job), "fds2");
	EXPECT_LT(0, run_threads(args, job, 5000));
	setrlimit(RLIMIT_NOFILE, &old);
	for (r = 0; r < FD_RANKS; r++) {
		if (!args[r].st)
			continue;
		EXPECT_EQ(NULL, strstr(args[r].text, "malformed")) {
			TH_LOG("rank %u: %s", r, args[r].text);
		}
		named |= strstr(args[r].text, "Too many open files") != NULL;
	}
	EXPECT_TRUE(named) {
		for (r = 0; r < FD_RANKS; r++)
			if (args[r].st)
				TH_LOG("rank %u: %s: %s", r, nproxy_status_str(args[r].st),
				       args[r].text);
	}
	EXPECT_EQ(before, bp_t_count_fds());
}

/*
 * Descriptor 0 is a descriptor like any other: a process whose stdin is
 * closed gets fd 0 for the bus's segment (the leader's memfd, the copy a
 * follower receives) and the bus still works.
 */
static int fd0_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct fd_arg *arg = varg;
	struct nproxy_bp *bp;

	BP_T_CHECK(bp_t_join_all(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join with fd 0 free");
	bp_t_leave(bp);
	return 0;
}

TEST(a_bus_works_with_descriptor_0_free)
{
	struct fd_arg arg = { .held = NULL };
	struct nproxy_bp *bp;
	char job[96];

	close(0);
	bp_t_job(job, sizeof(job), "fd0-lone");
	ASSERT_EQ(NPROXY_SUCCESS, bp_t_join(job, 0, 1, &bp));
	bp_t_leave(bp);
	EXPECT_EQ(-1, fcntl(0, F_GETFD));	/* the lone bus gave its fd 0 back */
	EXPECT_EQ(0, BP_T_RUN_JOB(&arg, "fd0", fd0_rank, 2, 20000));
}

#define WATCH_RANKS	3
#define WATCH_LATE_MS	200	/* ~20 liveness polls (BP_WAIT_SLICE_MS) for the others */

struct watch_arg {
	char job[96];
	volatile uint64_t *opens;	/* shared: pidfd_open calls per rank in the late barrier */
};

/* Barrier 1 settles the joins; at barrier 2 the last rank is WATCH_LATE_MS late. */
static int watch_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct watch_arg *arg = varg;
	struct nproxy_bp *bp;
	uint64_t before;

	/* Sleep at once, so the wait is a row of liveness polls. */
	setenv("NPROXY_BP_SPIN_US", "0", 1);
	setenv("NPROXY_BP_YIELDS", "0", 1);
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier 1: %s",
		   nproxy_bp_strerror(bp));
	before = __atomic_load_n(&futex_spy_pidfd_opens, __ATOMIC_RELAXED);
	if (rank == n - 1)
		bp_t_sleep_ms(WATCH_LATE_MS);
	BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier 2: %s",
		   nproxy_bp_strerror(bp));
	arg->opens[rank] = __atomic_load_n(&futex_spy_pidfd_opens, __ATOMIC_RELAXED) - before;
	bp_t_leave(bp);
	return 0;
}

/*
 * Ranks 0 and 1 wait ~200 ms for rank 2.  The follower watches rank 2's
 * pidfd for the whole wait: at most one open (none when barrier 1 already
 * left it watching rank 2).  The leader holds every follower's pidfd from
 * the join and opens none.
 */
TEST(a_long_wait_opens_the_watched_pidfd_once)
{
	struct watch_arg arg;

	arg.opens = bp_t_shared(WATCH_RANKS * sizeof(uint64_t));
	ASSERT_NE(NULL, arg.opens);
	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "watch", watch_rank, WATCH_RANKS, 60000));
	TH_LOG("pidfd_open calls in the late barrier: leader %llu, follower %llu",
	       (unsigned long long)arg.opens[0], (unsigned long long)arg.opens[1]);
	EXPECT_EQ(0u, arg.opens[0]);
	EXPECT_GE(1u, arg.opens[1]);
	munmap((void *)arg.opens, WATCH_RANKS * sizeof(uint64_t));
}

TEST_HARNESS_MAIN
