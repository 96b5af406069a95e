// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy_rank_open()'s NULL arguments, each one behaviour of rank.h's
 * contract: NPROXY_INVALID, *out NULL whenever out is not NULL, the reason
 * for nproxy_rank_strerror(NULL) and in the log at error level; close and
 * abandon of NULL are no-ops.
 */
#include "kselftest_harness.h"
#include <nproxy/log.h>
#include "rank_test.h"

static char logged[512];
static enum nproxy_log_level logged_level;
static int n_logged;

static void sink(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)arg;
	snprintf(logged, sizeof(logged), "%s", msg);
	logged_level = level;
	n_logged++;
}

FIXTURE(nulls) {};
FIXTURE_SETUP(nulls)
{
	logged[0] = 0;
	n_logged = 0;
	nproxy_log_set_sink(sink, NULL);
}
FIXTURE_TEARDOWN(nulls) { nproxy_log_set_sink(NULL, NULL); }

/* "On failure *out is NULL": also when the failure is the NULL opts. */
TEST_F(nulls, null_opts_clears_out)
{
	struct nproxy_rank *rk = (struct nproxy_rank *)&rk;

	EXPECT_ST(NPROXY_INVALID, nproxy_rank_open(NULL, &rk));
	EXPECT_EQ(NULL, rk);
}

TEST_F(nulls, null_opts_reason_kept_and_logged_as_error)
{
	struct nproxy_rank *rk;

	EXPECT_ST(NPROXY_INVALID, nproxy_rank_open(NULL, &rk));
	EXPECT_NE(NULL, strstr(nproxy_rank_strerror(NULL), "opts is NULL"));
	EXPECT_EQ(1, n_logged);
	EXPECT_EQ(NPROXY_LOG_ERROR, logged_level);
	EXPECT_NE(NULL, strstr(logged, "opts is NULL")) {
		TH_LOG("logged \"%s\"", logged);
	}
}

TEST_F(nulls, null_out_logged_as_error)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	EXPECT_ST(NPROXY_INVALID, nproxy_rank_open(&o, NULL));
	EXPECT_EQ(1, n_logged);
	EXPECT_EQ(NPROXY_LOG_ERROR, logged_level);
	EXPECT_NE(NULL, strstr(logged, "out is NULL")) {
		TH_LOG("logged \"%s\"", logged);
	}
}

TEST_F(nulls, close_and_abandon_of_null_are_no_ops)
{
	nproxy_rank_close(NULL);
	nproxy_rank_abandon(NULL);
	EXPECT_EQ(0, n_logged);
	EXPECT_EQ(NULL, nproxy_rank_hs(NULL));
	EXPECT_EQ(NULL, nproxy_rank_net(NULL));
}

TEST_HARNESS_MAIN
