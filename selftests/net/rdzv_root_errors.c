// SPDX-License-Identifier: GPL-2.0
/*
 * The rendezvous root's two set-up errors, each with its own status and
 * words in the log (a failed nproxy_rdzv_open() has no handle to ask):
 *   a root host that does not resolve: NPROXY_INVALID, "cannot resolve root";
 *   a root port another process listens on: NPROXY_RESOURCE after the
 *   bind retries, "in use by another process".
 * Neither leaves a descriptor behind.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "kselftest_harness.h"
#include <nproxy/log.h>
#include <nproxy/net.h>
#include "nproxy_test.h"

static char logged[1024];

static void sink(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	snprintf(logged, sizeof(logged), "%s", msg);
}

static enum nproxy_status open_root(const char *root, struct nproxy_rdzv **rz)
{
	struct nproxy_rdzv_opts o = NPROXY_RDZV_OPTS_INIT;
	enum nproxy_status st;

	o.rank = 0;
	o.n_ranks = 2;
	o.timeout_ms = 5000;
	o.root = root;
	logged[0] = 0;
	nproxy_log_set_sink(sink, NULL);
	st = nproxy_rdzv_open(&o, rz);
	nproxy_log_set_sink(NULL, NULL);
	return st;
}

TEST(unresolvable_root_is_invalid_and_says_so)
{
	struct nproxy_rdzv *rz = (struct nproxy_rdzv *)&rz;

	EXPECT_EQ((int)NPROXY_INVALID, (int)open_root("no-such-host.invalid:4242", &rz));
	EXPECT_EQ(NULL, rz);
	EXPECT_NE(NULL, strstr(logged, "cannot resolve root")) {
		TH_LOG("logged \"%s\"", logged);
	}
	EXPECT_NE(NULL, strstr(logged, "no-such-host.invalid:4242"));
}

TEST(port_held_by_another_listener_is_resource_and_says_so)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct nproxy_rdzv *rz = NULL;
	char root[64];
	int fd, port;

	port = nproxy_test_free_port();
	ASSERT_LT(0, port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, fd);
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(fd, 1));
	snprintf(root, sizeof(root), "127.0.0.1:%d", port);
	EXPECT_EQ((int)NPROXY_RESOURCE, (int)open_root(root, &rz));
	EXPECT_EQ(NULL, rz);
	EXPECT_NE(NULL, strstr(logged, "is in use by another process")) {
		TH_LOG("logged \"%s\"", logged);
	}
	close(fd);
}

/* The refused root closes its socket: the process holds what it held. */
TEST(port_held_by_another_listener_leaves_no_descriptor)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct nproxy_rdzv *rz = NULL;
	char root[64];
	int fd, port, before;

	port = nproxy_test_free_port();
	ASSERT_LT(0, port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_LE(0, fd);
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(0, bind(fd, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(fd, 1));
	snprintf(root, sizeof(root), "127.0.0.1:%d", port);
	before = nproxy_test_count_fds();
	ASSERT_EQ((int)NPROXY_RESOURCE, (int)open_root(root, &rz));
	EXPECT_EQ(before, nproxy_test_count_fds());
	close(fd);
}

TEST(unresolvable_root_leaves_no_descriptor)
{
	struct nproxy_rdzv *rz = NULL;
	int before = nproxy_test_count_fds();

	ASSERT_EQ((int)NPROXY_INVALID, (int)open_root("no-such-host.invalid:4242", &rz));
	EXPECT_EQ(before, nproxy_test_count_fds());
}

TEST_HARNESS_MAIN
