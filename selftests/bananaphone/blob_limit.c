// SPDX-License-Identifier: GPL-2.0
/*
 * The documented blob limit (bananaphone.md: 0..64 MiB per rank) as a
 * number, not as the header's macro: one byte over 64 MiB is refused by
 * allgather and by the leader's bcast, with the bus still usable after.
 * A one-rank bus needs no peers, so nothing but the check can refuse.
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

TEST_HARNESS_MAIN
