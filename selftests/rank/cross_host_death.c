// SPDX-License-Identifier: GPL-2.0
/*
 * A rank killed on one "host" ends every rank of the job, on every host,
 * at once: two buses stand for two hosts (ranks 0, 1 on one, 2, 3 on the
 * other; tcp;ofi_rxm on 127.0.0.1), every rank polls nproxy_rank_check()
 * after the open, rank 3 SIGKILLs itself.  Its host-mate's bus sees it and
 * sends the abort over the engine; ranks 0 and 1 never watch rank 3 and
 * their engines' own deadline is 60 s, so only the abort ends them: with
 * NPROXY_PEER_DEAD and a text naming rank 3, its pid and its host.
 */
#include <signal.h>
#include "kselftest_harness.h"
#include "rank_test.h"
#include "rank_death.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 180

#define XH_RANKS	4
#define XH_VICTIM	3
#define XH_BOUND_MS	15000	/* kill to every rank's end; the engine's own deadline is 60 s */

struct xh_job {
	char id[2][64];
	char root[64];
	struct nproxy_test_death *death;	/* shared; died_ms: the kill */
};

static int64_t now_ms(void)
{
	return (int64_t)nproxy_test_now_ms();
}

static int xh_rank(uint32_t rank, uint32_t n, void *arg)
{
	struct xh_job *job = arg;
	struct nproxy_rank_opts o = rt_opts(job->id[rank / 2], rank, n);
	struct nproxy_rank *r;
	enum nproxy_status st;
	int64_t start;

	setenv("FI_TCP_IFACE", "lo", 1);
	o.local_rank = rank % 2;
	o.local_size = 2;
	o.provider = "tcp;ofi_rxm";
	o.root = job->root;
	o.net_timeout_ms = 60000;
	job->death->seen[rank].pid = getpid();	/* the victim records nothing else */
	st = nproxy_rank_open(&o, &r);
	if (st) {
		char text[300];

		snprintf(text, sizeof(text), "open: %s", nproxy_rank_strerror(NULL));
		nproxy_test_death_saw(job->death, rank, (int)st, text);
		return 2;
	}
	start = now_ms();
	do {
		if (rank == XH_VICTIM && now_ms() - start > 1000) {
			nproxy_test_death_mark(job->death);
			raise(SIGKILL);
		}
		st = nproxy_rank_check(r);
		usleep(2000);
	} while (st == NPROXY_SUCCESS && now_ms() - start < 90000);
	nproxy_test_death_saw(job->death, rank, (int)st, nproxy_rank_strerror(r));
	nproxy_rank_abandon(r);
	return 0;
}

TEST(a_kill_on_one_host_ends_the_other_host_naming_rank_pid_and_host)
{
	struct xh_job job;
	int codes[XH_RANKS], port = nproxy_test_free_port();
	const struct nproxy_test_seen *seen;
	char want[64], why[600];

	ASSERT_GT(port, 0);
	rt_job_id(job.id[0], sizeof(job.id[0]), "xha");
	rt_job_id(job.id[1], sizeof(job.id[1]), "xhb");
	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", port);
	job.death = nproxy_test_death_map();
	ASSERT_NE(NULL, job.death);
	seen = job.death->seen;
	rt_run_forked(XH_RANKS, xh_rank, &job, 120000, codes);
	ASSERT_NE(0, job.death->died_ms) {
		for (uint32_t r = 0; r < XH_RANKS; r++)
			TH_LOG("rank %u: exit %d, %s", r, codes[r], seen[r].text);
	}
	snprintf(want, sizeof(want), "rank %u (pid %d", XH_VICTIM, seen[XH_VICTIM].pid);
	for (uint32_t r = 0; r < XH_RANKS; r++) {
		const char *missed;

		if (r == XH_VICTIM)
			continue;
		EXPECT_EQ(0, codes[r]);
		missed = nproxy_test_death_missed(job.death, r, want, XH_BOUND_MS, why, sizeof(why));
		EXPECT_EQ(NULL, missed) {
			TH_LOG("%s", missed);
		}
	}
	for (uint32_t r = 0; r < 2; r++) {
		EXPECT_NE(NULL, strstr(seen[r].text, "host ")) {
			TH_LOG("rank %u: '%s' names no host", r, seen[r].text);
		}
	}
	TH_LOG("rank 0 ended %lld ms after the kill: %s",
	       (long long)(seen[0].ended_ms - job.death->died_ms), seen[0].text);
	nproxy_test_death_unmap(job.death);
}

TEST_HARNESS_MAIN
