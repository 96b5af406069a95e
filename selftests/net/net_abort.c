// SPDX-License-Identifier: GPL-2.0
/*
 * Cross-host abort over the engine (tcp;ofi_rxm on 127.0.0.1, 8 ranks):
 * ranks 0..6 wait for a receive from rank 7, which is alive but silent (as
 * a rank on another host is until its host notices it died); rank 1 is
 * told that rank 7 died (nproxy_net_abort(), as its host's bus would) and
 * every other waiting rank's engine must fail with NPROXY_PEER_DEAD naming
 * rank 7, its pid and its host within a few seconds -- far inside the
 * engine's own 60 s no-progress deadline, which would otherwise be the
 * only way out -- and nproxy_net_abort_reason() says who reported it.
 */
#include "kselftest_harness.h"
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 240
#include "ring_common.h"
#include "rank_death.h"

#define AB_RANKS	8
#define AB_DEAD		7
#define AB_REPORTER	1
#define AB_FAKE_PID	424242
#define AB_BOUND_MS	15000	/* from the report to every rank's end; the engine's own is 60000 */

struct ab_job {
	char root[64];
	struct nproxy_test_death *death;	/* shared; died_ms: when rank 1 was told */
};

static int ab_rank(uint32_t rank, void *arg)
{
	struct ab_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = AB_RANKS,
				     .comm_id = 11, .timeout_ms = 60000, .root = job->root };
	static uint8_t buf[64];
	uint64_t sem = 0;
	struct nproxy_device_sems dev = { .sems = &sem, .n_sems = 1 };
	struct nproxy_net_addr addr = { 0 };
	struct nproxy_net_op op = { .kind = NPROXY_NET_OP_RECV, .peer = AB_DEAD, .len = sizeof(buf),
				    .flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = 0, .post_inc = 1 };
	struct nproxy_fifo_set fs = { .ops = &op, .n_ops = 1, .src = &addr, .n_src = 1,
				      .dst = &addr, .n_dst = 1 };
	struct nproxy_seam seam;
	struct nproxy_net *net;
	enum nproxy_status st;
	int64_t start;

	setenv("FI_PROVIDER", "tcp;ofi_rxm", 1);
	setenv("FI_TCP_IFACE", "lo", 0);
	if (nproxy_net_open(&o, &net))
		return 2;
	start = ring_now_ms();
	if (rank == AB_DEAD) {
		/* Silent but alive: drives its engine, sends nothing. */
		while (nproxy_net_poll(net) == NPROXY_SUCCESS && ring_now_ms() - start < 8000)
			usleep(1000);
		nproxy_net_close(net);
		return 0;
	}
	if (nproxy_net_mr_register(net, buf, sizeof(buf), &addr.mr))
		return 3;
	nproxy_net_seam(net, &seam);
	if (seam.ops->start(seam.engine, 0, 0, &fs, &dev))
		return 4;
	st = NPROXY_SUCCESS;
	while (st == NPROXY_SUCCESS && ring_now_ms() - start < 90000) {
		bool idle, block_done = false, done = false;

		if (rank == AB_REPORTER && ring_now_ms() - start > 1000 && !job->death->died_ms) {
			nproxy_test_death_mark(job->death);
			nproxy_net_abort(net, AB_DEAD, AB_FAKE_PID, "died: killed by signal 9");
		}
		st = seam.ops->progress(seam.engine, 0, 0, &idle, &block_done, &done);
		if (block_done)
			break;
		if (idle)
			usleep(200);
	}
	nproxy_test_death_saw(job->death, rank, (int)st, nproxy_net_abort_reason(net));
	seam.ops->stop(seam.engine, 0, 0);
	nproxy_net_mr_deregister(net, addr.mr);
	nproxy_net_close(net);
	return 0;
}

TEST(a_reported_death_ends_every_rank_naming_rank_pid_and_host)
{
	struct ab_job job;
	int exits[AB_RANKS], port = ring_free_port();
	char want[64], why[600];
	int64_t last = 0;

	ASSERT_GT(port, 0);
	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", port);
	job.death = nproxy_test_death_map();
	ASSERT_NE(NULL, job.death);
	ASSERT_EQ(AB_RANKS, ring_fork_ranks(AB_RANKS, ab_rank, &job, 120000, exits)) {
		for (uint32_t r = 0; r < AB_RANKS; r++)
			TH_LOG("rank %u exit %d", r, exits[r]);
	}
	ASSERT_NE(0, job.death->died_ms);
	snprintf(want, sizeof(want), "rank %u (pid %d, host ", AB_DEAD, AB_FAKE_PID);
	for (uint32_t r = 0; r < AB_RANKS; r++) {
		const struct nproxy_test_seen *seen = &job.death->seen[r];
		const char *missed;

		if (r == AB_DEAD)
			continue;
		missed = nproxy_test_death_missed(job.death, r, want, AB_BOUND_MS, why, sizeof(why));
		EXPECT_EQ(NULL, missed) {
			TH_LOG("%s", missed);
		}
		EXPECT_NE(NULL, strstr(seen->text, "127.0.0.1")) {
			TH_LOG("rank %u: reason '%s' names no host address", r, seen->text);
		}
		EXPECT_NE(NULL, strstr(seen->text, "reported by rank 1"));
		if (seen->ended_ms - job.death->died_ms > last)
			last = seen->ended_ms - job.death->died_ms;
	}
	TH_LOG("every rank ended %lld ms after the report; rank 0: %s", (long long)last,
	       job.death->seen[0].text);
	nproxy_test_death_unmap(job.death);
}

TEST_HARNESS_MAIN
