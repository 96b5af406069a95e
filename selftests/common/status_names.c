// SPDX-License-Identifier: GPL-2.0
/* nproxy_status_str(): every code's name, and unknown values numbered. */
#include <pthread.h>
#include <string.h>
#include "kselftest_harness.h"
#include <nproxy/status.h>

TEST(every_code_has_its_name)
{
	static const struct { enum nproxy_status st; const char *name; } codes[] = {
		{ NPROXY_SUCCESS, "NPROXY_SUCCESS" },
		{ NPROXY_FAILURE, "NPROXY_FAILURE" },
		{ NPROXY_INVALID, "NPROXY_INVALID" },
		{ NPROXY_INVALID_HANDLE, "NPROXY_INVALID_HANDLE" },
		{ NPROXY_RESOURCE, "NPROXY_RESOURCE" },
		{ NPROXY_TIMEOUT, "NPROXY_TIMEOUT" },
		{ NPROXY_HW_ERROR, "NPROXY_HW_ERROR" },
		{ NPROXY_UNSUPPORTED, "NPROXY_UNSUPPORTED" },
		{ NPROXY_NET_ERROR, "NPROXY_NET_ERROR" },
		{ NPROXY_PEER_DEAD, "NPROXY_PEER_DEAD" },
		{ NPROXY_PEER_LEFT, "NPROXY_PEER_LEFT" },
		{ NPROXY_PERM, "NPROXY_PERM" },
		{ NPROXY_BUSY, "NPROXY_BUSY" },
		{ NPROXY_CANCELLED, "NPROXY_CANCELLED" },
		{ NPROXY_NOT_FOUND, "NPROXY_NOT_FOUND" },
	};
	size_t i;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		EXPECT_STREQ(codes[i].name, nproxy_status_str(codes[i].st));
}

/* The values are ABI (the first ones are libnrt's NRT_STATUS): never renumbered. */
TEST(values_are_stable)
{
	EXPECT_EQ(4, NPROXY_RESOURCE);
	EXPECT_EQ(13, NPROXY_CANCELLED);
	EXPECT_EQ(14, NPROXY_NOT_FOUND);
}

TEST(unknown_values_carry_their_number)
{
	EXPECT_STREQ("NPROXY_UNKNOWN(15)", nproxy_status_str((enum nproxy_status)15));
	EXPECT_STREQ("NPROXY_UNKNOWN(-1)", nproxy_status_str((enum nproxy_status)-1));
	EXPECT_STREQ("NPROXY_UNKNOWN(1000)", nproxy_status_str((enum nproxy_status)1000));
}

static void *name_other_unknown(void *arg)
{
	(void)arg;
	return (void *)nproxy_status_str((enum nproxy_status)77);
}

/* Thread-local: another thread's unknown code does not overwrite ours. */
TEST(unknown_text_is_per_thread)
{
	const char *mine = nproxy_status_str((enum nproxy_status)99);
	pthread_t t;
	void *theirs;

	ASSERT_EQ(0, pthread_create(&t, NULL, name_other_unknown, NULL));
	ASSERT_EQ(0, pthread_join(t, &theirs));
	EXPECT_STREQ("NPROXY_UNKNOWN(99)", mine);
	EXPECT_NE(mine, (const char *)theirs);
}

TEST_HARNESS_MAIN
