// SPDX-License-Identifier: GPL-2.0
/*
 * The documented blob limit (bananaphone.md: 0..64 MiB per rank) as a
 * number, not as the header's macro: one byte over 64 MiB is refused by
 * allgather and by the leader's bcast, with the bus still usable after.
 * A one-rank bus needs no peers, so nothing but the check can refuse.
 * Exactly 64 MiB is within the limit: a leader's bcast of it reaches a
 * follower in another process whole (the receiver checks the length its
 * peer announces against the same limit).
 */
#include "kselftest_harness.h"
#include "bp_test.h"

#define DOCUMENTED_MAX_BLOB	(64ul << 20)

FIXTURE(blob) {
	struct nproxy_bp *bp;
	uint8_t *big;
};

FIXTURE_SETUP(blob)
{
	char job[96];

	bp_t_job(job, sizeof(job), "blob");
	ASSERT_EQ(NPROXY_SUCCESS, bp_t_join(job, 0, 1, &self->bp));
	/* Untouched pages: a refused call never reads them. */
	self->big = mmap(NULL, DOCUMENTED_MAX_BLOB + 1, PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT_NE(MAP_FAILED, self->big);
}

FIXTURE_TEARDOWN(blob)
{
	munmap(self->big, DOCUMENTED_MAX_BLOB + 1);
	bp_t_leave(self->bp);
}

TEST_F(blob, allgather_one_byte_over_64_mib_refused)
{
	size_t lens[1], offs[1];
	void *all = NULL;

	EXPECT_EQ(NPROXY_INVALID, nproxy_bp_allgather(self->bp, self->big, DOCUMENTED_MAX_BLOB + 1,
						      &all, lens, offs, 1000));
	EXPECT_EQ(NULL, all);
	ASSERT_EQ(NPROXY_SUCCESS, nproxy_bp_allgather(self->bp, "x", 1, &all, lens, offs, 1000));
	EXPECT_EQ(1u, lens[0]);
	free(all);
}

TEST_F(blob, bcast_one_byte_over_64_mib_refused)
{
	size_t out_len = 7;
	void *out = NULL;

	EXPECT_EQ(NPROXY_INVALID, nproxy_bp_bcast(self->bp, self->big, DOCUMENTED_MAX_BLOB + 1,
						  &out, &out_len, 1000));
	EXPECT_EQ(NULL, out);
	ASSERT_EQ(NPROXY_SUCCESS, nproxy_bp_bcast(self->bp, "xy", 2, &out, &out_len, 1000));
	EXPECT_EQ(2u, out_len);
	free(out);
}

struct exact_arg {
	char job[96];
};

static int bcast_exact_rank(uint32_t rank, uint32_t n, void *varg)
{
	struct exact_arg *arg = varg;
	uint8_t *data = NULL, *out = NULL;
	size_t out_len = 0;
	struct nproxy_bp *bp;
	enum nproxy_status st;

	BP_T_CHECK(bp_t_join(arg->job, rank, n, &bp) == NPROXY_SUCCESS, "join");
	if (rank == 0) {
		data = malloc(DOCUMENTED_MAX_BLOB);
		BP_T_CHECK(data, "malloc");
		memset(data, 0xa5, DOCUMENTED_MAX_BLOB);
		data[DOCUMENTED_MAX_BLOB - 1] = 0x5a;
	}
	st = nproxy_bp_bcast(bp, data, rank == 0 ? DOCUMENTED_MAX_BLOB : 0, (void **)&out, &out_len,
			     30000);
	BP_T_CHECK(st == NPROXY_SUCCESS, "bcast: %s: %s", nproxy_status_str(st),
		   nproxy_bp_strerror(bp));
	BP_T_CHECK(out_len == DOCUMENTED_MAX_BLOB, "got %zu bytes", out_len);
	BP_T_CHECK(out[0] == 0xa5 && out[DOCUMENTED_MAX_BLOB - 1] == 0x5a, "wrong bytes");
	free(out);
	free(data);
	bp_t_leave(bp);
	return 0;
}

TEST(bcast_of_exactly_64_mib_reaches_a_follower)
{
	struct exact_arg arg;

	EXPECT_EQ(0, BP_T_RUN_JOB(&arg, "blob-exact", bcast_exact_rank, 2, 60000));
}

TEST_HARNESS_MAIN
