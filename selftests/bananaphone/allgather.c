// SPDX-License-Identifier: GPL-2.0
/*
 * Bananaphone all-gather and bcast: 2, 4, 8, 16 forked ranks exchange
 * random-size blobs (0 bytes to several ring-lengths, so fragmentation and
 * flow control are exercised) for several rounds, verified byte for byte.
 */
#include "kselftest_harness.h"
#include "bp_test.h"

struct ag_arg {
	char job[96];
	int rounds;
	size_t max_len;
	bool spin;		/* exercise the spin-then-sleep path */
};

static int ag_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct ag_arg *arg = varg;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS];
	uint8_t *mine, *want;
	struct nproxy_bp *bp;
	int round;
	uint32_t r;

	BP_T_CHECK(bp_t_join_spin(arg->job, rank, n, arg->spin, &bp) == NPROXY_SUCCESS, "join");
	BP_T_CHECK(nproxy_bp_rank(bp) == rank && nproxy_bp_size(bp) == n, "rank/size");
	mine = malloc(arg->max_len + 1);
	want = malloc(arg->max_len + 1);
	BP_T_CHECK(mine && want, "malloc");
	for (round = 0; round < arg->rounds; round++) {
		size_t len = bp_t_blob_len(round * 131 + rank, arg->max_len);
		enum nproxy_status st;
		void *all = NULL;

		bp_t_fill(mine, len, round * 1000003ull + rank);
		st = nproxy_bp_allgather(bp, mine, len, &all, lens, offs, BP_T_TIMEOUT_MS);
		BP_T_CHECK(st == NPROXY_SUCCESS, "allgather round %d: %s: %s", round,
			   nproxy_status_str(st), nproxy_bp_strerror(bp));
		for (r = 0; r < n; r++) {
			size_t wlen = bp_t_blob_len(round * 131 + r, arg->max_len);

			bp_t_fill(want, wlen, round * 1000003ull + r);
			BP_T_CHECK(lens[r] == wlen, "round %d: rank %u len %zu, want %zu",
				   round, r, lens[r], wlen);
			BP_T_CHECK(!memcmp((uint8_t *)all + offs[r], want, wlen),
				   "round %d: rank %u bytes differ", round, r);
		}
		free(all);
	}
	free(mine);
	free(want);
	bp_t_leave(bp);
	return 0;
}

static int run_ag(uint32_t n, int rounds, size_t max_len, bool spin)
{
	struct ag_arg arg = { .rounds = rounds, .max_len = max_len, .spin = spin };

	bp_t_job(arg.job, sizeof(arg.job), "ag");
	return bp_t_run(ag_rank, n, &arg, 25000);
}

TEST(allgather_1_rank) { ASSERT_EQ(0, run_ag(1, 5, 1000, false)); }
TEST(allgather_2_ranks) { ASSERT_EQ(0, run_ag(2, 50, 40000, false)); }
TEST(allgather_4_ranks) { ASSERT_EQ(0, run_ag(4, 30, 40000, false)); }
TEST(allgather_8_ranks) { ASSERT_EQ(0, run_ag(8, 20, 20000, false)); }
TEST(allgather_16_ranks) { ASSERT_EQ(0, run_ag(16, 10, 20000, false)); }
/* Blobs several times the ring size: fragments stream through flow control. */
TEST(allgather_large_blobs) { ASSERT_EQ(0, run_ag(4, 3, 1u << 20, false)); }
TEST(allgather_2_ranks_spinning) { ASSERT_EQ(0, run_ag(2, 50, 40000, true)); }

static int bcast_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct ag_arg *arg = varg;
	uint8_t *want = malloc(200000);
	struct nproxy_bp *bp;
	int round;

	BP_T_CHECK(want, "malloc");
	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	for (round = 0; round < arg->rounds; round++) {
		size_t len = bp_t_blob_len(round, 150000), got_len = 1;
		enum nproxy_status st;
		void *got = NULL;

		bp_t_fill(want, len, round);
		/* Followers pass junk: only the leader's blob counts. */
		st = nproxy_bp_bcast(bp, rank ? "junk" : (void *)want, rank ? 4 : len, &got, &got_len,
			      BP_T_TIMEOUT_MS);
		BP_T_CHECK(st == NPROXY_SUCCESS, "bcast: %s", nproxy_bp_strerror(bp));
		BP_T_CHECK(got_len == len && got && !memcmp(got, want, len),
			   "round %d: got %zu bytes, want %zu", round, got_len, len);
		free(got);
	}
	free(want);
	bp_t_leave(bp);
	return 0;
}

TEST(bcast_5_ranks)
{
	struct ag_arg arg = { .rounds = 10 };

	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "bc", bcast_rank, 5, 25000));
}

/* Mixing collectives in different orders is detected, not mis-delivered. */
static int mismatch_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct ag_arg *arg = varg;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS], len;
	enum nproxy_status st;
	struct nproxy_bp *bp;
	void *out = NULL;

	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	if (rank == 0)
		st = nproxy_bp_bcast(bp, "x", 1, &out, &len, 2000);
	else
		st = nproxy_bp_allgather(bp, "y", 1, &out, lens, offs, 2000);
	free(out);
	/* The leader's bcast completes (nobody answers it); followers see a bcast
	 * message where they expect an all-gather part. */
	if (rank) {
		BP_T_CHECK(st == NPROXY_INVALID, "got %s", nproxy_status_str(st));
		BP_T_CHECK(strstr(nproxy_bp_strerror(bp), "different orders"), "text: %s",
			   nproxy_bp_strerror(bp));
	}
	bp_t_leave(bp);
	return 0;
}

TEST(mismatched_collectives)
{
	struct ag_arg arg = { 0 };

	ASSERT_EQ(0, BP_T_RUN_JOB(&arg, "mm", mismatch_rank, 3, 15000));
}

TEST_HARNESS_MAIN
