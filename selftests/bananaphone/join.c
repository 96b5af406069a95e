// SPDX-License-Identifier: GPL-2.0
/*
 * Bananaphone join: leader late, follower late, join timeouts, a second
 * leader for the same job, two concurrent jobs, a rank claimed twice,
 * invalid arguments.
 */
#include "kselftest_harness.h"
#include "bp_test.h"

struct join_arg {
	char job[96];
	unsigned int delay_ms[NPROXY_BP_MAX_RANKS];	/* before create/connect */
	const char *tag;
};

/* Each rank contributes "<tag>:<rank>"; everyone checks every part. */
static int tagged_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct join_arg *arg = varg;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS];
	char mine[128], want[128];
	enum nproxy_status st;
	void *all = NULL;
	struct nproxy_bp *bp;
	uint32_t r;

	bp_t_sleep_ms(arg->delay_ms[rank]);
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	snprintf(mine, sizeof(mine), "%s:%u", arg->tag ? arg->tag : arg->job, rank);
	st = nproxy_bp_allgather(bp, mine, strlen(mine), &all, lens, offs, BP_T_TIMEOUT_MS);
	BP_T_CHECK(st == NPROXY_SUCCESS, "allgather: %s", nproxy_bp_strerror(bp));
	for (r = 0; r < n; r++) {
		snprintf(want, sizeof(want), "%s:%u", arg->tag ? arg->tag : arg->job, r);
		BP_T_CHECK(lens[r] == strlen(want) && !memcmp((char *)all + offs[r], want, lens[r]),
			   "part %u is '%.*s', want '%s'", r, (int)lens[r], (char *)all + offs[r],
			   want);
	}
	free(all);
	BP_T_CHECK(nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS, "barrier: %s",
		   nproxy_bp_strerror(bp));
	bp_t_leave(bp);
	return 0;
}

TEST(leader_late)
{
	struct join_arg arg = { .delay_ms = { 400 } };

	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "ll", tagged_rank, 4, 20000));
}

TEST(follower_late)
{
	struct join_arg arg = { .delay_ms = { 0, 0, 400, 0, 200 } };

	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "fl", tagged_rank, 5, 20000));
}

/* Two jobs of 4 ranks at once: each sees only its own parts. */
TEST(two_concurrent_jobs)
{
	struct join_arg a = { .tag = "alpha" }, b = { .tag = "beta" };
	struct bp_run run = { 0 };
	uint32_t r;

	bp_t_job(a.job, sizeof(a.job), "ja");
	bp_t_job(b.job, sizeof(b.job), "jb");
	for (r = 0; r < 4; r++) {
		run.pids[r] = bp_t_spawn(tagged_rank, r, 4, &a);
		run.pids[4 + r] = bp_t_spawn(tagged_rank, r, 4, &b);
	}
	bp_t_reap(&run, 8, 20000);
	for (r = 0; r < 8; r++)
		EXPECT_EQ(0, run.status[r]);
}

TEST(connect_timeout_without_leader)
{
	char job[96];
	struct nproxy_bp *bp = (struct nproxy_bp *)1;
	uint64_t t0 = bp_t_now_ms();
	enum nproxy_status st;

	bp_t_job(job, sizeof(job), "nl");
	st = nproxy_test_bp_open(job, 1, 2, 150, &bp);
	ASSERT_EQ(NPROXY_TIMEOUT, st);
	ASSERT_EQ(NULL, bp);
	ASSERT_GE(bp_t_now_ms() - t0, 150);
	ASSERT_NE(NULL, strstr(nproxy_bp_strerror(NULL), "no leader"));
}

TEST(second_leader_refused)
{
	struct nproxy_bp *first, *second = (struct nproxy_bp *)1;
	struct bp_run run = { 0 };
	char job[96];

	bp_t_job(job, sizeof(job), "sl");
	ASSERT_EQ(NPROXY_SUCCESS, nproxy_test_bp_open(job, 0, 2, 0, &first));
	ASSERT_EQ(NPROXY_BUSY, nproxy_test_bp_open(job, 0, 2, 0, &second));
	ASSERT_EQ(NULL, second);
	ASSERT_NE(NULL, strstr(nproxy_bp_strerror(NULL), "already has a leader"));
	/* From another process too. */
	run.pids[0] = fork();
	if (run.pids[0] == 0) {
		struct nproxy_bp *other;

		_exit(nproxy_test_bp_open(job, 0, 2, 0, &other) == NPROXY_BUSY ? 0 : 1);
	}
	bp_t_reap(&run, 1, 5000);
	ASSERT_EQ(0, run.status[0]);
	/* The name is free again once the leader is gone. */
	nproxy_bp_close(first);
	ASSERT_EQ(NPROXY_SUCCESS, nproxy_test_bp_open(job, 0, 2, 0, &second));
	nproxy_bp_close(second);
}

/* The leader waits for a missing rank with a timeout that names it. */
struct missing_arg {
	char job[96];
	int leader_timed_out;	/* shared: rank 2 joins only after this */
	int rank1_connected;	/* and the leader waits only once rank 1 asked */
};

static int missing_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct missing_arg *arg = varg;
	uint64_t end = bp_t_now_ms() + 10000;
	enum nproxy_status st;
	struct nproxy_bp *bp;

	while (rank == 2 && !__atomic_load_n(&arg->leader_timed_out, __ATOMIC_ACQUIRE) &&
	       bp_t_now_ms() < end)
		bp_t_sleep_ms(5);
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	if (rank == 1)
		__atomic_store_n(&arg->rank1_connected, 1, __ATOMIC_RELEASE);
	if (rank == 0) {
		while (!__atomic_load_n(&arg->rank1_connected, __ATOMIC_ACQUIRE) &&
		       bp_t_now_ms() < end)
			bp_t_sleep_ms(5);
		st = nproxy_bp_barrier(bp, 100);
		__atomic_store_n(&arg->leader_timed_out, 1, __ATOMIC_RELEASE);
		BP_T_CHECK(st == NPROXY_TIMEOUT, "got %s", nproxy_status_str(st));
		BP_T_CHECK(strstr(nproxy_bp_strerror(bp), "missing ranks 2"), "text: %s", nproxy_bp_strerror(bp));
	}
	/* Not sticky: the join goes on once rank 2 shows up. */
	st = nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS);
	BP_T_CHECK(st == NPROXY_SUCCESS, "barrier: %s", nproxy_bp_strerror(bp));
	bp_t_leave(bp);
	return 0;
}

TEST(join_timeout_names_missing_rank)
{
	struct missing_arg *arg = bp_t_shared(sizeof(*arg));

	ASSERT_NE(NULL, arg);
	bp_t_job(arg->job, sizeof(arg->job), "mr");
	ASSERT_EQ(0, bp_t_run(missing_rank, 3, arg, 20000));
	munmap(arg, sizeof(*arg));
}

/* Two processes claim rank 1: one is refused with NPROXY_BUSY, the job runs. */
static int dup_rank(uint32_t idx, uint32_t n, void *varg)
{
	struct join_arg *arg = varg;
	uint32_t rank = idx == 3 ? 1 : idx;	/* child 3 is the impostor */
	enum nproxy_status st;
	struct nproxy_bp *bp;

	if (idx == 2)
		bp_t_sleep_ms(200);	/* both rank-1 claims are in before the job completes */
	BP_T_CHECK(bp_t_join(arg->job, rank, 3, &bp) == NPROXY_SUCCESS, "join");
	st = nproxy_bp_barrier(bp, BP_T_TIMEOUT_MS);
	bp_t_leave(bp);
	if (st == NPROXY_BUSY && rank == 1)
		return 42;	/* refused: the test counts exactly one */
	BP_T_CHECK(st == NPROXY_SUCCESS, "barrier: %s", nproxy_status_str(st));
	return 0;
}

TEST(rank_claimed_twice)
{
	struct join_arg arg = { 0 };
	struct bp_run run = { 0 };
	int refused = 0, ok = 0;
	uint32_t i;

	bp_t_job(arg.job, sizeof(arg.job), "dr");
	for (i = 0; i < 4; i++)
		run.pids[i] = bp_t_spawn(dup_rank, i, 4, &arg);
	bp_t_reap(&run, 4, 20000);
	for (i = 0; i < 4; i++) {
		refused += run.status[i] == 42;
		ok += run.status[i] == 0;
	}
	ASSERT_EQ(1, refused);
	ASSERT_EQ(3, ok);
}

TEST(invalid_arguments)
{
	char long_id[NPROXY_BP_MAX_JOB_ID + 2];
	struct nproxy_bp *bp;

	memset(long_id, 'x', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = 0;
	EXPECT_EQ(NPROXY_INVALID, nproxy_test_bp_open(NULL, 0, 2, 0, &bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_test_bp_open("", 0, 2, 0, &bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_test_bp_open(long_id, 0, 2, 0, &bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_test_bp_open("a/b", 0, 2, 0, &bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_test_bp_open("a b", 0, 2, 0, &bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_test_bp_open("ok", 0, 0, 0, &bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_test_bp_open("ok", 0, NPROXY_BP_MAX_RANKS + 1, 0, &bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_test_bp_open("ok", 2, 2, 100, &bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_test_bp_open("ok", 1, 1, 100, &bp));
	EXPECT_EQ(NPROXY_INVALID, nproxy_bp_open(NULL, &bp));
	EXPECT_EQ(NULL, bp);
	EXPECT_EQ(NPROXY_INVALID_HANDLE, nproxy_bp_barrier(NULL, 100));
	EXPECT_NE(NULL, nproxy_bp_strerror(NULL));
	nproxy_bp_close(NULL);
	nproxy_bp_hangup(NULL);
}

/* The options carry their size: 0 (never set) and a non-zero tail are refused. */
TEST(options_size_is_checked)
{
	struct {
		struct nproxy_bp_opts o;
		uint64_t newer_field;
	} longer = { .o = NPROXY_BP_OPTS_INIT };
	struct nproxy_bp_opts o = NPROXY_BP_OPTS_INIT;
	struct nproxy_bp *bp = (struct nproxy_bp *)1;
	char job[96];

	bp_t_job(job, sizeof(job), "sz");
	o.job_id = job;
	o.n_ranks = 1;
	o.size = 0;
	EXPECT_EQ(NPROXY_INVALID, nproxy_bp_open(&o, &bp));
	EXPECT_EQ(NULL, bp);
	EXPECT_NE(NULL, strstr(nproxy_bp_strerror(NULL), "options"));
	o.size = sizeof(o) - 1;
	EXPECT_EQ(NPROXY_INVALID, nproxy_bp_open(&o, &bp));
	longer.o.job_id = job;
	longer.o.n_ranks = 1;
	longer.o.size = sizeof(longer);
	longer.newer_field = 1;
	EXPECT_EQ(NPROXY_INVALID, nproxy_bp_open(&longer.o, &bp));
	/* A newer caller whose extra fields are zero works, and clears the text. */
	longer.newer_field = 0;
	ASSERT_EQ(NPROXY_SUCCESS, nproxy_bp_open(&longer.o, &bp));
	EXPECT_STREQ("", nproxy_bp_strerror(NULL));
	EXPECT_STREQ("", nproxy_bp_strerror(bp));
	nproxy_bp_close(bp);
}

/* timeout_ms 0 is "just check": a follower without a leader fails at once. */
TEST(connect_timeout_zero_tries_once)
{
	struct nproxy_bp *bp = (struct nproxy_bp *)1;
	char job[96];

	bp_t_job(job, sizeof(job), "z0");
	EXPECT_EQ(NPROXY_TIMEOUT, nproxy_test_bp_open(job, 1, 2, 0, &bp));
	EXPECT_EQ(NULL, bp);
	EXPECT_NE(NULL, strstr(nproxy_bp_strerror(NULL), "no leader after 0 ms"));
}

/* Collectives refuse bad arguments and keep the bus usable. */
static int badarg_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct join_arg *arg = varg;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS];
	void *all = NULL;
	struct nproxy_bp *bp;

	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	BP_T_CHECK(nproxy_bp_allgather(bp, NULL, 5, &all, lens, offs, 1000) == NPROXY_INVALID,
		   "NULL data accepted");
	BP_T_CHECK(nproxy_bp_allgather(bp, "x", (size_t)NPROXY_BP_MAX_BLOB + 1, &all, lens, offs, 1000) ==
			   NPROXY_INVALID, "huge blob accepted");
	BP_T_CHECK(nproxy_bp_allgather(bp, "x", 1, &all, lens, offs, 1000) == NPROXY_SUCCESS,
		   "allgather: %s", nproxy_bp_strerror(bp));
	free(all);
	nproxy_bp_hangup(bp);
	BP_T_CHECK(nproxy_bp_barrier(bp, 1000) == NPROXY_INVALID, "barrier after own hangup");
	bp_t_leave(bp);
	return 0;
}

TEST(collective_bad_arguments)
{
	struct join_arg arg = { 0 };

	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "ba", badarg_rank, 3, 20000));
}

TEST_HARNESS_MAIN
