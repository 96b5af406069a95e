// SPDX-License-Identifier: GPL-2.0
/*
 * A cross-host abort among engines of one process, one of them closed.
 * libfabric's shm provider reaches a peer endpoint of the same process
 * through that endpoint's own region, so a send to one that is closed
 * touches unmapped memory.  Four ranks run as threads of one process
 * (as nproxy-run's ranks of one process do, closing in parallel): rank 0
 * closes its engine, rank 1 reports rank 3 dead, and the abort's binomial
 * tree makes rank 2 forward it to rank 0.  Rank 2 must fail with
 * NPROXY_PEER_DEAD naming rank 3, and nobody may touch rank 0's engine:
 * the group runs in a child, so a crash is a failed test, not a dead
 * harness.
 */
#include <pthread.h>
#include "kselftest_harness.h"
#include "ring_common.h"

#define IP_RANKS	4
#define IP_CLOSED	0
#define IP_REPORTER	1
#define IP_FORWARDER	2
#define IP_DEAD		3
#define IP_WAIT_MS	10000

struct ip_group {
	char root[64];
	pthread_barrier_t opened, closed, done;
	enum nproxy_status forwarder_status;
	char forwarder_reason[320];
	int open_failures;
};

struct ip_thread {
	struct ip_group *g;
	uint32_t rank;
};

/* Poll until the engine fails or ms pass; its status. */
static enum nproxy_status poll_for(struct nproxy_net *net, int64_t ms)
{
	int64_t end = ring_now_ms() + ms;
	enum nproxy_status st = NPROXY_SUCCESS;

	while (st == NPROXY_SUCCESS && ring_now_ms() < end) {
		st = nproxy_net_poll(net);
		usleep(500);
	}
	return st;
}

static void *ip_rank(void *arg)
{
	struct ip_thread *t = arg;
	struct ip_group *g = t->g;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = t->rank, .n_ranks = IP_RANKS,
				     .comm_id = 12, .timeout_ms = 30000, .root = g->root };
	struct nproxy_net *net = NULL;

	if (nproxy_net_open(&o, &net) != NPROXY_SUCCESS)
		__atomic_add_fetch(&g->open_failures, 1, __ATOMIC_SEQ_CST);
	pthread_barrier_wait(&g->opened);
	if (t->rank == IP_CLOSED) {
		nproxy_net_close(net);
		net = NULL;
	}
	pthread_barrier_wait(&g->closed);
	if (net && !g->open_failures) {
		if (t->rank == IP_REPORTER)
			nproxy_net_abort(net, IP_DEAD, 4242, "died: test");
		if (t->rank == IP_FORWARDER) {
			g->forwarder_status = poll_for(net, IP_WAIT_MS);
			snprintf(g->forwarder_reason, sizeof(g->forwarder_reason), "%s",
				 nproxy_net_abort_reason(net));
		} else {
			/* Drive the engine: the reporter's sends go out here. */
			poll_for(net, 2000);
		}
	}
	pthread_barrier_wait(&g->done);
	nproxy_net_close(net);
	return NULL;
}

static int ip_group_run(uint32_t unused, void *arg)
{
	struct ip_group *g = arg;
	struct ip_thread th[IP_RANKS];
	pthread_t tid[IP_RANKS];

	(void)unused;
	setenv("FI_PROVIDER", "shm", 1);
	pthread_barrier_init(&g->opened, NULL, IP_RANKS);
	pthread_barrier_init(&g->closed, NULL, IP_RANKS);
	pthread_barrier_init(&g->done, NULL, IP_RANKS);
	for (uint32_t r = 0; r < IP_RANKS; r++) {
		th[r] = (struct ip_thread){ .g = g, .rank = r };
		if (pthread_create(&tid[r], NULL, ip_rank, &th[r]))
			return 10;
	}
	for (uint32_t r = 0; r < IP_RANKS; r++)
		pthread_join(tid[r], NULL);
	if (g->open_failures)
		return 2;
	if (g->forwarder_status != NPROXY_PEER_DEAD) {
		fprintf(stderr, "forwarder: %s, not NPROXY_PEER_DEAD\n",
			nproxy_status_str(g->forwarder_status));
		return 3;
	}
	if (!strstr(g->forwarder_reason, "rank 3 (pid 4242")) {
		fprintf(stderr, "forwarder's reason: '%s'\n", g->forwarder_reason);
		return 4;
	}
	return 0;
}

TEST(an_abort_skips_a_closed_engine_of_the_same_process)
{
	struct ip_group *g = calloc(1, sizeof(*g));
	int exits[1] = { -1 };

	ASSERT_NE(NULL, g);
	snprintf(g->root, sizeof(g->root), "127.0.0.1:%d", ring_free_port());
	ring_fork_ranks(1, ip_group_run, g, 60000, exits);
	/* 128 + 11: the forwarder's send reached rank 0's unmapped region. */
	EXPECT_EQ(0, exits[0]);
	free(g);
}

TEST_HARNESS_MAIN
