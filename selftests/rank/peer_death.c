// SPDX-License-Identifier: GPL-2.0
/*
 * A local peer killed while the others are inside nproxy_rank_open():
 * they get NPROXY_PEER_DEAD (not a timeout) and a message naming the dead
 * rank, well before the open's deadline.  Ranks 0 and 1 open a 3-rank job;
 * "rank 2" does the first step of an open by hand (joins the bus and meets
 * the others at its barrier, so every rank is admitted), says so on a pipe
 * and waits to be killed while the others wait for it in the next step.
 */
#include <poll.h>
#include "kselftest_harness.h"
#include "rank_test.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT (3 * RT_WAIT_MS / 1000)

struct job {
	char id[64];
	int joined[2];	/* pipe: the victim writes one byte once on the bus */
};

static int victim_main(struct job *job)
{
	struct nproxy_bp_opts bo = NPROXY_BP_OPTS_INIT;
	struct nproxy_bp *bp;

	close(job->joined[0]);
	bo.rank = 2;
	bo.n_ranks = 3;
	bo.timeout_ms = RT_WAIT_MS;
	bo.job_id = job->id;
	if (nproxy_bp_open(&bo, &bp))
		return 30;
	if (nproxy_bp_barrier(bp, RT_WAIT_MS))
		return 32;
	if (write(job->joined[1], "j", 1) != 1)
		return 31;
	for (;;)
		pause();	/* until SIGKILL */
}

static int rank_main(uint32_t i, uint32_t n_forked, void *arg)
{
	struct job *job = arg;
	struct nproxy_rank_opts o = rt_opts(job->id, i, 3);
	struct nproxy_rank *rk;
	enum nproxy_status st;
	const char *why;

	if (i == 2)
		return victim_main(job);
	close(job->joined[0]);
	close(job->joined[1]);
	st = nproxy_rank_open(&o, &rk);
	why = nproxy_rank_strerror(NULL);
	if (st == NPROXY_SUCCESS) {
		nproxy_rank_close(rk);
		return 10;
	}
	fprintf(stderr, "# rank %u: %s: %s\n", i, nproxy_status_str(st), why);
	if (st != NPROXY_PEER_DEAD)
		return 20 + (int)st;
	return strstr(why, "rank 2 (pid") ? 0 : 11;
}

/* Fork the three, kill the victim once it joined, reap within the deadline. */
TEST(a_peer_killed_during_open_is_named)
{
	struct job job;
	pid_t pids[3];
	const struct nproxy_test_child how = { .quick_exit = true };
	int codes[3];
	struct pollfd pfd;
	char byte;

	rt_job_id(job.id, sizeof(job.id), "death");
	ASSERT_EQ(0, pipe(job.joined));
	for (uint32_t i = 0; i < 3; i++) {
		pids[i] = nproxy_test_spawn(rank_main, i, 3, &job, &how);
		ASSERT_GE(pids[i], 0);
	}
	close(job.joined[1]);
	pfd = (struct pollfd){ .fd = job.joined[0], .events = POLLIN };
	EXPECT_EQ(1, poll(&pfd, 1, (int)RT_WAIT_MS));
	EXPECT_EQ(1, read(job.joined[0], &byte, 1));
	close(job.joined[0]);
	kill(pids[2], SIGKILL);
	/* The survivors' open deadline is RT_WAIT_MS: they must be back before it. */
	nproxy_test_reap(pids, codes, 3, RT_WAIT_MS);
	EXPECT_EQ(0, codes[0]);
	EXPECT_EQ(0, codes[1]);
	EXPECT_EQ(128 + SIGKILL, codes[2]);
}

TEST_HARNESS_MAIN
