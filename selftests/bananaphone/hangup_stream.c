// SPDX-License-Identifier: GPL-2.0
/*
 * A reader that hung up while the others stream more than a ring's worth
 * (1 MiB through 64 KiB rings); the hung-up rank stays alive and reads
 * nothing:
 *   allgather  every other rank ends NPROXY_PEER_LEFT (its part is missing),
 *              the first to see it naming rank 3;
 *   bcast      needs nothing from it: ranks 0-2 complete with the blob;
 * both long before the hung-up process exits (a writer blocked on the
 * hung-up reader's full ring would wait for that exit or its timeout).
 */
#include "kselftest_harness.h"
#include "bp_test.h"

#define N_RANKS		4
#define BLOB		(1u << 20)
#define STAY_MS		4000	/* the hung-up rank lives on this long */

struct stream_arg {
	char job[96];
	bool bcast;
	int status[N_RANKS];
	uint64_t ms[N_RANKS];
	char text[N_RANKS][256];
	size_t out_len[N_RANKS];
};

static int stream_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct stream_arg *arg = varg;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS], out_len = 0;
	void *all = NULL;
	struct nproxy_bp *bp;
	uint8_t *blob;
	uint64_t t0;

	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	BP_T_CHECK(nproxy_bp_allgather(bp, "a", 1, &all, lens, offs, BP_T_TIMEOUT_MS) == NPROXY_SUCCESS,
		   "allgather: %s", nproxy_bp_strerror(bp));
	free(all);
	all = NULL;
	if (rank == n - 1) {
		nproxy_bp_hangup(bp);
		bp_t_sleep_ms(STAY_MS);
		nproxy_bp_close(bp);
		return 0;
	}
	blob = malloc(BLOB);
	BP_T_CHECK(blob != NULL, "malloc");
	bp_t_fill(blob, BLOB, rank);
	bp_t_sleep_ms(100);
	t0 = bp_t_now_ms();
	if (arg->bcast)
		arg->status[rank] = nproxy_bp_bcast(bp, blob, BLOB, &all, &out_len, 2 * STAY_MS);
	else
		arg->status[rank] = nproxy_bp_allgather(bp, blob, BLOB, &all, lens, offs, 2 * STAY_MS);
	arg->ms[rank] = bp_t_now_ms() - t0;
	arg->out_len[rank] = out_len;
	snprintf(arg->text[rank], sizeof(arg->text[rank]), "%s", nproxy_bp_strerror(bp));
	free(all);
	free(blob);
	bp_t_leave(bp);
	return 0;
}

static void run_stream(struct __test_metadata *_metadata, bool bcast)
{
	struct stream_arg *arg = bp_t_shared(sizeof(*arg));
	bool named = false;

	ASSERT_NE(NULL, arg);
	arg->bcast = bcast;
	bp_t_job(arg->job, sizeof(arg->job), bcast ? "hsb" : "hsa");
	ASSERT_EQ(0, bp_t_run(stream_rank, N_RANKS, arg, 4 * STAY_MS));
	for (uint32_t r = 0; r < N_RANKS - 1; r++) {
		EXPECT_EQ(bcast ? NPROXY_SUCCESS : NPROXY_PEER_LEFT, arg->status[r]) {
			TH_LOG("rank %u: %s", r, arg->text[r]);
		}
		named |= strstr(arg->text[r], "rank 3 (pid") != NULL;
		/* Ended by the hangup, before the hung-up process exits. */
		EXPECT_GT((uint64_t)STAY_MS - 500, arg->ms[r]) {
			TH_LOG("rank %u: %llu ms", r, (unsigned long long)arg->ms[r]);
		}
	}
	if (bcast) {
		EXPECT_EQ(BLOB, arg->out_len[1]);
	} else {
		EXPECT_TRUE(named);
	}
	munmap(arg, sizeof(*arg));
}

TEST(allgather_past_a_hung_up_reader) { run_stream(_metadata, false); }
TEST(bcast_past_a_hung_up_reader) { run_stream(_metadata, true); }

TEST_HARNESS_MAIN
