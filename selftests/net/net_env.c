// SPDX-License-Identifier: GPL-2.0
/*
 * The engine's environment and its defaults (read by nproxy_net_open()
 * when the option is 0): NPROXY_NET_CREDITS (default 8) and
 * NPROXY_NET_TIMEOUT_MS (milliseconds, default 30000), as the open's info
 * line reports them; an option wins over its variable; and the timeout
 * acts: a posted recv nobody answers fails its block NPROXY_TIMEOUT after
 * NPROXY_NET_TIMEOUT_MS milliseconds.
 */
#include "kselftest_harness.h"
#include <stdlib.h>
#include <string.h>
#include <nproxy/log.h>
#include <nproxy/net.h>
#include <nproxy/seam.h>
#include "nproxy_test.h"

static char opened[512];

static void sink(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	if (strstr(msg, "credits"))
		snprintf(opened, sizeof(opened), "%s", msg);
}

static struct nproxy_net *open_single(uint32_t credits, uint32_t timeout_ms)
{
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = 0, .n_ranks = 1,
				     .provider = "shm", .credits = credits,
				     .timeout_ms = timeout_ms };
	struct nproxy_net *net = NULL;

	opened[0] = 0;
	nproxy_log_set_sink(sink, NULL);
	if (nproxy_net_open(&o, &net) != NPROXY_SUCCESS)
		net = NULL;
	nproxy_log_set_sink(NULL, NULL);
	return net;
}

FIXTURE(env) {};
FIXTURE_SETUP(env)
{
	unsetenv("NPROXY_NET_CREDITS");
	unsetenv("NPROXY_NET_TIMEOUT_MS");
}
FIXTURE_TEARDOWN(env) {}

static void expect_opened(struct __test_metadata *_metadata, uint32_t credits, uint32_t timeout_ms,
			  const char *want)
{
	struct nproxy_net *net = open_single(credits, timeout_ms);

	if (!net)
		SKIP(return, "no libfabric shm provider here");
	EXPECT_NE(NULL, strstr(opened, want)) {
		TH_LOG("open said \"%s\", not \"%s\"", opened, want);
	}
	nproxy_net_close(net);
}

TEST_F(env, defaults_8_credits_30000_ms)
{
	expect_opened(_metadata, 0, 0, " 8 credits, 30000 ms timeout");
}

TEST_F(env, variables_set_credits_and_ms)
{
	setenv("NPROXY_NET_CREDITS", "5", 1);
	setenv("NPROXY_NET_TIMEOUT_MS", "1234", 1);
	expect_opened(_metadata, 0, 0, " 5 credits, 1234 ms timeout");
}

TEST_F(env, options_win_over_variables)
{
	setenv("NPROXY_NET_CREDITS", "5", 1);
	setenv("NPROXY_NET_TIMEOUT_MS", "1234", 1);
	expect_opened(_metadata, 3, 777, " 3 credits, 777 ms timeout");
}

/* A recv from self that no send answers: the block fails after the variable's ms. */
TEST_F(env, timeout_variable_ends_a_silent_recv_in_ms)
{
	static uint8_t buf[64];
	uint64_t sems[1] = { 0 };
	struct nproxy_device_sems dev = { .sems = sems, .n_sems = 1 };
	struct nproxy_net_addr a = { 0 };
	struct nproxy_net_op op = { .kind = NPROXY_NET_OP_RECV, .peer = 0, .len = 16 };
	struct nproxy_fifo_set fs = { .ops = &op, .n_ops = 1, .src = &a, .n_src = 1, .dst = &a,
				      .n_dst = 1 };
	enum nproxy_status st = NPROXY_SUCCESS;
	bool idle, bd = false, done = false;
	struct nproxy_seam seam;
	struct nproxy_net *net;
	uint64_t t0, ms;
	uint32_t mr;

	setenv("NPROXY_NET_TIMEOUT_MS", "300", 1);
	net = open_single(0, 0);
	if (!net)
		SKIP(return, "no libfabric shm provider here");
	nproxy_net_seam(net, &seam);
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_mr_register(net, buf, sizeof(buf), &mr));
	a.mr = mr;
	t0 = nproxy_test_now_ms();
	st = seam.ops->start(seam.engine, 0, 0, &fs, &dev);
	while (!st && !done && nproxy_test_now_ms() - t0 < 20000) {
		st = seam.ops->progress(seam.engine, 0, 0, &idle, &bd, &done);
		nproxy_test_sleep_ms(1);
	}
	ms = nproxy_test_now_ms() - t0;
	EXPECT_EQ((int)NPROXY_TIMEOUT, (int)st);
	EXPECT_LE(300u, ms);
	EXPECT_GT(10000u, ms);	/* milliseconds, not seconds */
	EXPECT_NE(NULL, strstr(nproxy_net_strerror(net), "made no progress for 300 ms")) {
		TH_LOG("error: \"%s\"", nproxy_net_strerror(net));
	}
	seam.ops->stop(seam.engine, 0, 0);
	nproxy_net_mr_deregister(net, mr);
	nproxy_net_close(net);
}

TEST_HARNESS_MAIN
