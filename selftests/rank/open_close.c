// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy_rank_open() on 2 and 4 forked ranks (memfd region, libfabric
 * shm): every part is there afterwards, one ring allgather through the
 * comm delivers every rank's chunk, and nproxy_rank_close() ends it; a
 * lone rank needs no bus; the idle policy follows the host's cpus.
 */
#include "kselftest_harness.h"
#include <nproxy/log.h>
#include "rank_test.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT (4 * RT_WAIT_MS / 1000)	/* a job's ranks get 3 */

struct job {
	char id[64];
	uint32_t n_ranks;
	size_t chunk_words;
};

/* One forked rank: open, check the parts, allgather, close. */
static int rank_main(uint32_t i, uint32_t n_forked, void *arg)
{
	const struct job *job = arg;
	struct nproxy_rank_opts o = rt_opts(job->id, i, job->n_ranks);
	struct nproxy_rank *rk;
	enum nproxy_status st;
	char err[256] = "";
	int rc = 0;

	st = nproxy_rank_open(&o, &rk);
	if (st) {
		fprintf(stderr, "# rank %u: open: %s: %s\n", i, nproxy_status_str(st),
			nproxy_rank_strerror(NULL));
		return 10;
	}
	if (!nproxy_rank_comm(rk) || !nproxy_rank_hs(rk) || !nproxy_rank_net(rk) ||
	    !nproxy_rank_bp(rk) || *nproxy_rank_strerror(rk)) {
		fprintf(stderr, "# rank %u: a part is missing or an error is set\n", i);
		rc = 11;
	} else if (nproxy_bp_size(nproxy_rank_bp(rk)) != job->n_ranks ||
		   nproxy_net_size(nproxy_rank_net(rk)) != job->n_ranks ||
		   strcmp(nproxy_net_provider(nproxy_rank_net(rk)), "shm") ||
		   nproxy_hs_backend_of(nproxy_rank_hs(rk)) != NPROXY_HS_MEMFD ||
		   nproxy_hs_n_sems(nproxy_rank_hs(rk)) != job->n_ranks + 1) {
		fprintf(stderr, "# rank %u: parts not as asked\n", i);
		rc = 12;
	} else if (rt_allgather(rk, i, job->n_ranks, job->chunk_words, err, sizeof(err))) {
		fprintf(stderr, "# rank %u: allgather: %s\n", i, err);
		rc = 13;
	}
	nproxy_rank_close(rk);
	return rc;
}

static void run_job(struct __test_metadata *_metadata, uint32_t n_ranks, size_t chunk_words)
{
	struct job job = { .n_ranks = n_ranks, .chunk_words = chunk_words };
	int codes[RT_MAX_RANKS];

	rt_job_id(job.id, sizeof(job.id), "open");
	rt_run_forked(n_ranks, rank_main, &job, 3 * RT_WAIT_MS, codes);
	for (uint32_t i = 0; i < n_ranks; i++) {
		TH_LOG("rank %u exit %d", i, codes[i]);
		EXPECT_EQ(0, codes[i]);
	}
}

TEST(two_ranks_open_allgather_and_close)
{
	run_job(_metadata, 2, 1024);
}

TEST(four_ranks_open_allgather_and_close)
{
	run_job(_metadata, 4, 4096);
}

/* A job with one rank on this host: no bus, the engine alone. */
TEST(a_lone_rank_has_no_bus)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;
	char err[256] = "";

	ASSERT_ST(NPROXY_SUCCESS, nproxy_rank_open(&o, &rk));
	EXPECT_EQ(NULL, nproxy_rank_bp(rk));
	EXPECT_NE(NULL, nproxy_rank_comm(rk));
	EXPECT_EQ(0, rt_allgather(rk, 0, 1, 16, err, sizeof(err)));
	nproxy_rank_close(rk);
	nproxy_rank_close(NULL);
}

/* The region's gid as the handshake logs it when the region opens. */
static int logged_region_gid = -1;

static void catch_region_gid(enum nproxy_log_level level, const char *line, void *arg)
{
	const char *g = strstr(line, "handshake region ");

	(void)arg;
	(void)level;
	if (g && (g = strstr(g, " gid ")))
		logged_region_gid = atoi(g + 5);
}

/*
 * With ranks per proxy left to the environment, the handshake region and
 * the comm read the same setting: one gid for both (device 3, 2 per
 * proxy: group 1), as nproxyctl region and top show them side by side.
 */
TEST(the_region_and_the_comm_agree_on_the_group)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;

	o.device_index = 3;
	ASSERT_EQ(0, setenv("NPROXY_RANKS_PER_NETWORK_PROXY", "2", 1));
	nproxy_log_set_sink(catch_region_gid, NULL);
	nproxy_log_set_level(NPROXY_LOG_DEBUG);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_rank_open(&o, &rk));
	nproxy_log_set_sink(NULL, NULL);
	nproxy_log_set_level(NPROXY_LOG_WARN);
	unsetenv("NPROXY_RANKS_PER_NETWORK_PROXY");
	EXPECT_EQ(1u, nproxy_comm_gid(nproxy_rank_comm(rk)));
	EXPECT_EQ(1, logged_region_gid);
	nproxy_rank_close(rk);
}

/* The caller's step hook: every step in order, the bus there from the engine on. */
struct steps_seen {
	int steps[8];
	bool bus_at_engine;
	int n;
	enum nproxy_rank_step fail_at;
};

static enum nproxy_status record_step(struct nproxy_rank *rk, enum nproxy_rank_step step,
				      void *arg)
{
	struct steps_seen *seen = arg;

	if (seen->n < 8)
		seen->steps[seen->n++] = (int)step;
	if (step == NPROXY_RANK_STEP_ENGINE)
		seen->bus_at_engine = nproxy_rank_bp(rk) != NULL;
	return step == seen->fail_at ? NPROXY_CANCELLED : NPROXY_SUCCESS;
}

static int hook_main(uint32_t i, uint32_t n_forked, void *arg)
{
	struct job *job = arg;
	struct nproxy_rank_opts o = rt_opts(job->id, i, job->n_ranks);
	struct steps_seen seen = { .n = 0 };
	struct nproxy_rank *rk;

	o.step_hook = record_step;
	o.step_arg = &seen;
	if (nproxy_rank_open(&o, &rk))
		return 10;
	nproxy_rank_close(rk);
	if (seen.n != 4 || seen.steps[0] != NPROXY_RANK_STEP_BUS ||
	    seen.steps[1] != NPROXY_RANK_STEP_ENGINE || seen.steps[2] != NPROXY_RANK_STEP_REGION ||
	    seen.steps[3] != NPROXY_RANK_STEP_COMM || !seen.bus_at_engine)
		return 11;
	return 0;
}

TEST(the_step_hook_sees_every_step_in_order)
{
	struct job job = { .n_ranks = 2 };
	int codes[RT_MAX_RANKS];

	rt_job_id(job.id, sizeof(job.id), "hook");
	rt_run_forked(2, hook_main, &job, 3 * RT_WAIT_MS, codes);
	EXPECT_EQ(0, codes[0]);
	EXPECT_EQ(0, codes[1]);
}

/* A hook that says no ends the open with its status, nothing left. */
TEST(a_failing_hook_ends_the_open)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct steps_seen seen = { .fail_at = NPROXY_RANK_STEP_COMM };
	struct rt_census before, after;
	struct nproxy_rank *rk;

	o.step_hook = record_step;
	o.step_arg = &seen;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_rank_open(&(struct nproxy_rank_opts){ .size = sizeof(o),
		.n_ranks = 1, .provider = "shm", .backend = NPROXY_HS_MEMFD }, &rk));
	nproxy_rank_close(rk);	/* warm-up: what stays for good is not a leak */
	before = rt_census();
	EXPECT_ST(NPROXY_CANCELLED, nproxy_rank_open(&o, &rk));
	EXPECT_EQ(NULL, rk);
	EXPECT_EQ(3, seen.n);
	EXPECT_NE(NULL, strstr(nproxy_rank_strerror(NULL), "hook"));
	EXPECT_TRUE(rt_census_settles(before, &after));
}

/* Abandon: the same teardown, at once. */
TEST(abandon_leaves_nothing)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct rt_census before, after;
	struct nproxy_rank *rk;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_rank_open(&o, &rk));
	nproxy_rank_close(rk);
	before = rt_census();
	ASSERT_ST(NPROXY_SUCCESS, nproxy_rank_open(&o, &rk));
	nproxy_rank_abandon(rk);
	nproxy_rank_abandon(NULL);
	EXPECT_TRUE(rt_census_settles(before, &after)) {
		TH_LOG("fds %d->%d threads %d->%d maps %d->%d shm %d->%d", before.fds, after.fds,
		       before.threads, after.threads, before.shared_maps, after.shared_maps,
		       before.shm_files, after.shm_files);
	}
}

/* More ranks on this host than cpus: the comm's spin window yields. */
static int policy_main(uint32_t i, uint32_t n_forked, void *arg)
{
	const struct job *job = arg;
	struct nproxy_rank_opts o = rt_opts(job->id, i, job->n_ranks);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	enum nproxy_idle_policy want, got;
	struct nproxy_rank *rk;

	if (nproxy_rank_open(&o, &rk))
		return 10;
	got = nproxy_rank_idle_policy(rk);
	nproxy_rank_close(rk);
	want = cpus > 0 && job->n_ranks > (uint32_t)cpus ? NPROXY_IDLE_ADAPTIVE_YIELD
							 : NPROXY_IDLE_DEFAULT;
	return got == want ? 0 : 20 + (int)got;
}

/* As many ranks as cpus and one more: the line is "more ranks than cpus". */
TEST(the_idle_policy_follows_ranks_per_cpu)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	bool fits = cpus > 1 && cpus < RT_MAX_RANKS;
	uint32_t sizes[2] = { fits ? (uint32_t)cpus : 2, fits ? (uint32_t)cpus + 1 : 2 };
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;
	int codes[RT_MAX_RANKS];

	unsetenv("NPROXY_IDLE_POLICY");
	unsetenv("NPROXY_ONE_THREAD_PER_CORE");
	for (int k = 0; k < 2; k++) {
		struct job job = { .n_ranks = sizes[k] };

		rt_job_id(job.id, sizeof(job.id), k ? "policy-more" : "policy-as-many");
		rt_run_forked(job.n_ranks, policy_main, &job, 3 * RT_WAIT_MS, codes);
		for (uint32_t i = 0; i < job.n_ranks; i++) {
			EXPECT_EQ(0, codes[i]) TH_LOG("rank %u of %u on %ld cpus", i, job.n_ranks, cpus);
		}
	}
	/* The caller's choice and the environment win. */
	o.idle_policy = NPROXY_IDLE_SPIN;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_rank_open(&o, &rk));
	EXPECT_EQ(NPROXY_IDLE_SPIN, nproxy_rank_idle_policy(rk));
	nproxy_rank_close(rk);
}

TEST_HARNESS_MAIN
