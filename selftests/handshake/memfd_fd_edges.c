// SPDX-License-Identifier: GPL-2.0
/*
 * The memfd backend's file descriptor at its edges:
 *   - its name is "nproxy-hs-r<rank>", the prefix nproxyctl looks for in
 *     /proc/<pid>/fd ("/memfd:nproxy-hs-");
 *   - a process whose stdin is closed gets the memfd as fd 0: the open
 *     works and the close releases fd 0 (0 is a valid descriptor).
 */
#include <fcntl.h>
#include <stdio.h>
#include "kselftest_harness.h"
#include "handshake_test.h"

TEST(memfd_name_carries_the_rank)
{
	struct nproxy_hs_opts o = hs_test_opts(NPROXY_HS_MEMFD, 1, 1);
	struct nproxy_hs *hs = NULL;
	char path[64], link[128], want[64];
	ssize_t n;

	o.rank = 37;
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_hs_open(&o, &hs));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", nproxy_hs_fd(hs));
	n = readlink(path, link, sizeof(link) - 1);
	ASSERT_LT(0, n);
	link[n] = '\0';
	snprintf(want, sizeof(want), "/memfd:nproxy-hs-r37 (deleted)");
	EXPECT_STREQ(want, link);
	nproxy_hs_close(hs);
}

TEST(memfd_as_fd_0_opens_and_closes)
{
	struct nproxy_hs *hs = NULL;
	int fd;

	close(0);
	hs = hs_test_open(NPROXY_HS_MEMFD, 1, 1);
	ASSERT_NE(NULL, hs);
	ASSERT_EQ(0, nproxy_hs_fd(hs));
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(hs, 0)));
	nproxy_hs_close(hs);
	/* fd 0 is free again: the next open gets it. */
	fd = open("/dev/null", O_RDONLY);
	EXPECT_EQ(0, fd);
	if (fd > 0)
		close(fd);
}

TEST_HARNESS_MAIN
