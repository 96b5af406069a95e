// SPDX-License-Identifier: GPL-2.0
/*
 * The introspection calls of <nproxy/proxy.h> with their documented
 * special values, one behaviour per test: a NULL comm reads as 0, a gid
 * no comm holds has no refcount and no stats, and stats need somewhere
 * to go.
 */
#include "kselftest_harness.h"
#include "proxy_test_util.h"

/* A gid no test program of this area opens a comm on. */
#define UNUSED_GID	0x7ffffff0u

TEST(null_comm_has_no_worker_tid)
{
	EXPECT_EQ(0, nproxy_comm_worker_tid(NULL));
}

TEST(null_comm_has_gid_0)
{
	EXPECT_EQ(0u, nproxy_comm_gid(NULL));
}

TEST(null_comm_has_timeout_0)
{
	EXPECT_EQ(0u, nproxy_comm_timeout_ms(NULL));
}

TEST(null_comm_wait_is_invalid)
{
	EXPECT_ST(NPROXY_INVALID, nproxy_wait_status(NULL, 1, NPROXY_TASK_NETWORK, 0));
}

TEST(a_gid_without_comms_has_refcount_0)
{
	EXPECT_EQ(0u, nproxy_proxy_group_refcnt(UNUSED_GID));
}

TEST(a_gid_without_comms_has_no_stats)
{
	struct nproxy_proxy_stats s;

	memset(&s, 0xa5, sizeof(s));
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_proxy_group_stats(UNUSED_GID, &s));
}

/* Stats to NULL: refused even for a group that exists. */
TEST(stats_to_null_refused)
{
	struct nproxy_comm_opts o;
	struct lb_comm k;

	ASSERT_EQ(0, lb_comm_prepare(&k, 0, 0, &o));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &k.c));
	EXPECT_EQ(1u, nproxy_proxy_group_refcnt(nproxy_comm_gid(k.c)));
	EXPECT_ST(NPROXY_INVALID, nproxy_proxy_group_stats(nproxy_comm_gid(k.c), NULL));
	lb_comm_close(&k);
}

TEST_HARNESS_MAIN
