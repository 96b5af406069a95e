// SPDX-License-Identifier: GPL-2.0
/*
 * Bad options to nproxy_rank_open() come back as NPROXY_INVALID with a
 * message naming the option, before anything is opened: no fd, thread,
 * mapping or /dev/shm file is left and *out is NULL.
 */
#include "kselftest_harness.h"
#include "rank_test.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT (4 * RT_WAIT_MS / 1000)	/* the forked job's ranks get 3 */

/* Open with o, expect NPROXY_INVALID, a message holding `words`, nothing left. */
static void expect_invalid(struct __test_metadata *_metadata, const struct nproxy_rank_opts *o,
			   const char *words)
{
	struct nproxy_rank *rk = (struct nproxy_rank *)1;
	struct rt_census before = rt_census(), after;

	EXPECT_ST(NPROXY_INVALID, nproxy_rank_open(o, &rk));
	EXPECT_EQ(NULL, rk);
	EXPECT_NE(NULL, strstr(nproxy_rank_strerror(NULL), words)) {
		TH_LOG("message \"%s\" lacks \"%s\"", nproxy_rank_strerror(NULL), words);
	}
	EXPECT_TRUE(rt_census_settles(before, &after)) {
		TH_LOG("left fds %d->%d threads %d->%d maps %d->%d shm %d->%d", before.fds,
		       after.fds, before.threads, after.threads, before.shared_maps,
		       after.shared_maps, before.shm_files, after.shm_files);
	}
}

TEST(size_zero)
{
	struct nproxy_rank_opts o = rt_opts("bad", 0, 1);

	o.size = 0;
	expect_invalid(_metadata, &o, "size 0");
}

/* A newer caller's longer struct is fine only while its tail is zero. */
TEST(unknown_bytes_past_the_struct)
{
	struct {
		struct nproxy_rank_opts o;
		uint64_t newer_field;
	} big;
	struct nproxy_rank *rk;

	memset(&big, 0, sizeof(big));
	big.o = rt_opts(NULL, 0, 1);
	big.o.size = sizeof(big);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_rank_open(&big.o, &rk));
	nproxy_rank_close(rk);
	big.newer_field = 1;
	expect_invalid(_metadata, &big.o, "nothing set past it");
}

TEST(rank_not_below_n_ranks)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 2, 2);

	o.local_size = 1;
	o.local_rank = 0;
	expect_invalid(_metadata, &o, "rank 2 of 2 ranks");
}

TEST(local_rank_not_below_local_size)
{
	struct nproxy_rank_opts o = rt_opts("bad", 1, 4);

	o.local_size = 1;
	expect_invalid(_metadata, &o, "local rank 1 of 1");
}

TEST(a_bus_needs_a_job_id)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 2);

	expect_invalid(_metadata, &o, "job id");
}

TEST(too_many_streams)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.n_streams = NPROXY_MAX_STREAMS + 1;
	expect_invalid(_metadata, &o, "streams");
}

TEST(unknown_provider)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.provider = "no-such-provider";
	expect_invalid(_metadata, &o, "provider 'no-such-provider': libfabric has no such provider");
}

/* Two local ranks that disagree on the job's size: both are told, by the
 * exchange at the end of the bus step. */
static char disagree_job[64];

static int disagree_main(uint32_t i, uint32_t n_forked, void *arg)
{
	struct nproxy_rank_opts o = rt_opts(disagree_job, i, 2);
	struct nproxy_rank *rk;
	enum nproxy_status st;

	if (i == 1)
		o.n_ranks = 3;	/* still 2 on this host */
	st = nproxy_rank_open(&o, &rk);
	if (st == NPROXY_SUCCESS) {
		nproxy_rank_close(rk);
		return 10;
	}
	if (st != NPROXY_INVALID)
		return 20 + (int)st;
	return strstr(nproxy_rank_strerror(NULL), "says the job has") ? 0 : 11;
}

TEST(local_ranks_that_disagree)
{
	int codes[2];

	rt_job_id(disagree_job, sizeof(disagree_job), "disagree");
	rt_run_forked(2, disagree_main, NULL, 3 * RT_WAIT_MS, codes);
	EXPECT_EQ(0, codes[0]);
	EXPECT_EQ(0, codes[1]);
}

TEST(null_arguments)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;

	EXPECT_ST(NPROXY_INVALID, nproxy_rank_open(NULL, &rk));
	EXPECT_ST(NPROXY_INVALID, nproxy_rank_open(&o, NULL));
	EXPECT_EQ(NULL, nproxy_rank_comm(NULL));
	EXPECT_EQ(NULL, nproxy_rank_bp(NULL));
}

TEST_HARNESS_MAIN
