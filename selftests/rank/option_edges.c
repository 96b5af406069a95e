// SPDX-License-Identifier: GPL-2.0
/*
 * The edges of nproxy_rank_opts as rank.h states them, one behaviour per
 * test: each bound of a count is refused one past it, a 0 takes its
 * documented default, a provider name matches whole ';'-separated parts
 * only, and the accessors answer their documented values for NULL and
 * out-of-range arguments.
 */
#include "kselftest_harness.h"
#include "rank_test.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT (4 * RT_WAIT_MS / 1000)	/* a forked job's ranks get 3 */

/*
 * Open with o: NPROXY_INVALID, *out NULL and a message that names the
 * rank ("rank <rank>: ") and holds `words`.
 */
static void expect_invalid(struct __test_metadata *_metadata, const struct nproxy_rank_opts *o,
			   const char *words)
{
	struct nproxy_rank *rk = (struct nproxy_rank *)1;
	char who[32];

	snprintf(who, sizeof(who), "rank %u: ", o->rank);
	EXPECT_ST(NPROXY_INVALID, nproxy_rank_open(o, &rk));
	EXPECT_EQ(NULL, rk);
	EXPECT_NE(NULL, strstr(nproxy_rank_strerror(NULL), words)) {
		TH_LOG("message \"%s\" lacks \"%s\"", nproxy_rank_strerror(NULL), words);
	}
	EXPECT_EQ(0, strncmp(nproxy_rank_strerror(NULL), who, strlen(who))) {
		TH_LOG("message \"%s\" does not start with \"%s\"", nproxy_rank_strerror(NULL), who);
	}
}

TEST(zero_ranks_refused)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.n_ranks = 0;
	o.local_size = 1;
	expect_invalid(_metadata, &o, "rank 0 of 0 ranks");
}

TEST(more_ranks_than_the_engine_takes_refused)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.n_ranks = NPROXY_NET_MAX_RANKS + 1;
	o.local_size = 1;
	expect_invalid(_metadata, &o, "ranks (1..");
}

TEST(more_local_ranks_than_the_bus_takes_refused)
{
	struct nproxy_rank_opts o = rt_opts("edges", 0, NPROXY_BP_MAX_RANKS + 1);

	expect_invalid(_metadata, &o, "local rank 0 of");
}

TEST(more_local_ranks_than_the_job_refused)
{
	struct nproxy_rank_opts o = rt_opts("edges", 0, 2);

	o.local_size = 3;
	expect_invalid(_metadata, &o, "local rank 0 of 3 on this host (2 ranks in the job");
}

/* An empty job id is no job id. */
TEST(a_bus_needs_a_non_empty_job_id)
{
	struct nproxy_rank_opts o = rt_opts("", 0, 2);

	expect_invalid(_metadata, &o, "options: 2 ranks on this host need a job id for their bus");
}

TEST(too_many_semaphores_refused)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.n_sems = NPROXY_MAX_SEMS + 1;
	expect_invalid(_metadata, &o, "options: 0 streams, 257 semaphores (at most 4, 256)");
}

TEST(unknown_idle_policy_refused)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.idle_policy = (enum nproxy_idle_policy)(NPROXY_IDLE_ADAPTIVE_YIELD + 1);
	expect_invalid(_metadata, &o, "unknown idle policy");
}

TEST(empty_provider_name_refused)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.provider = "";
	expect_invalid(_metadata, &o, "not a provider name");
}

TEST(provider_name_of_128_bytes_refused)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	char name[129];

	memset(name, 's', 128);
	name[128] = 0;
	o.provider = name;
	expect_invalid(_metadata, &o, "not a provider name");
}

/* "sh" is the start of "shm", not a provider. */
TEST(provider_prefix_is_not_a_provider)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.provider = "sh";
	expect_invalid(_metadata, &o, "provider 'sh': libfabric has no such provider");
}

/* "hm" is the end of "shm", not a provider. */
TEST(provider_suffix_is_not_a_provider)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.provider = "hm";
	expect_invalid(_metadata, &o, "provider 'hm': libfabric has no such provider");
}

/* Every part of a layered name must be a provider: "shm;nothing" is not. */
TEST(every_part_of_a_layered_provider_must_exist)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);

	o.provider = "shm;no-such-provider";
	expect_invalid(_metadata, &o, "libfabric has no such provider");
}

/* Two local ranks that both say they are rank 0: both are told, naming
 * the bus ranks and the rank they claim. */
static char twice_job[64];

static int twice_main(uint32_t i, uint32_t n_forked, void *arg)
{
	struct nproxy_rank_opts o = rt_opts(twice_job, 0, 2);
	struct nproxy_rank *rk;
	enum nproxy_status st;

	(void)n_forked;
	(void)arg;
	o.local_rank = i;
	st = nproxy_rank_open(&o, &rk);
	if (st == NPROXY_SUCCESS) {
		nproxy_rank_close(rk);
		return 10;
	}
	if (st != NPROXY_INVALID)
		return 20 + (int)st;
	return strstr(nproxy_rank_strerror(NULL), "local ranks 0 and 1 both claim rank 0") ? 0 : 11;
}

TEST(two_local_ranks_claiming_one_rank_refused)
{
	int codes[2];

	rt_job_id(twice_job, sizeof(twice_job), "twice");
	rt_run_forked(2, twice_main, NULL, 3 * RT_WAIT_MS, codes);
	EXPECT_EQ(0, codes[0]);
	EXPECT_EQ(0, codes[1]);
}

/*
 * The largest job and the most ranks on a host pass the option checks:
 * the open goes on to its steps and ends at its deadline (nobody else
 * comes), not with NPROXY_INVALID.
 */
static void expect_past_the_checks(struct __test_metadata *_metadata, struct nproxy_rank_opts *o)
{
	struct nproxy_rank *rk = (struct nproxy_rank *)1;
	enum nproxy_status st;

	o->open_timeout_ms = 300;
	st = nproxy_rank_open(o, &rk);
	EXPECT_NE((int)NPROXY_INVALID, (int)st) {
		TH_LOG("refused: %s", nproxy_rank_strerror(NULL));
	}
	EXPECT_NE((int)NPROXY_SUCCESS, (int)st);
	EXPECT_EQ(NULL, rk);
	EXPECT_EQ(NULL, strstr(nproxy_rank_strerror(NULL), "options:")) {
		TH_LOG("\"%s\"", nproxy_rank_strerror(NULL));
	}
}

TEST(the_largest_job_passes_the_checks)
{
	struct nproxy_rank_opts o = rt_opts(NULL, NPROXY_NET_MAX_RANKS - 1, NPROXY_NET_MAX_RANKS);
	int port = nproxy_test_free_port();
	char root[64];

	ASSERT_GT(port, 0);
	snprintf(root, sizeof(root), "127.0.0.1:%d", port);	/* nobody listens */
	o.local_rank = 0;
	o.local_size = 1;
	o.root = root;
	expect_past_the_checks(_metadata, &o);
}

TEST(the_most_ranks_on_a_host_pass_the_checks)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 1, NPROXY_BP_MAX_RANKS);
	char job[64];

	rt_job_id(job, sizeof(job), "most");	/* no leader ever creates it */
	o.job_id = job;
	expect_past_the_checks(_metadata, &o);
}

/*
 * A provider named by a part of a layered name is one libfabric has:
 * "ofi_rxm" (the part after the ';' of "tcp;ofi_rxm"), and the parts in
 * another order.
 */
static void expect_provider_taken(struct __test_metadata *_metadata, const char *name)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk = NULL;

	setenv("FI_TCP_IFACE", "lo", 1);
	o.provider = name;
	EXPECT_ST(NPROXY_SUCCESS, nproxy_rank_open(&o, &rk)) {
		TH_LOG("provider '%s': %s", name, nproxy_rank_strerror(NULL));
	}
	nproxy_rank_close(rk);
}

TEST(the_part_after_a_semicolon_is_a_provider)
{
	expect_provider_taken(_metadata, "ofi_rxm");
}

TEST(the_parts_of_a_layered_provider_in_any_order)
{
	expect_provider_taken(_metadata, "ofi_rxm;tcp");
}

/* A lone rank opened with o; the test ends it. */
static struct nproxy_rank *open_lone(struct __test_metadata *_metadata,
				     const struct nproxy_rank_opts *o)
{
	struct nproxy_rank *rk = NULL;
	enum nproxy_status st = nproxy_rank_open(o, &rk);

	EXPECT_ST(NPROXY_SUCCESS, st) {
		TH_LOG("open: %s", nproxy_rank_strerror(NULL));
	}
	return rk;
}

/* The largest counts the options allow are taken. */
TEST(the_largest_stream_and_semaphore_counts_are_taken)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;

	o.n_streams = NPROXY_MAX_STREAMS;
	o.n_sems = NPROXY_MAX_SEMS;
	rk = open_lone(_metadata, &o);
	ASSERT_NE(NULL, rk);
	EXPECT_EQ(NPROXY_MAX_STREAMS, nproxy_hs_n_streams(nproxy_rank_hs(rk)));
	EXPECT_EQ(NPROXY_MAX_SEMS, nproxy_hs_n_sems(nproxy_rank_hs(rk)));
	nproxy_rank_close(rk);
}

/* n_streams 0: one trigger word. */
TEST(zero_streams_is_one)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;

	rk = open_lone(_metadata, &o);
	ASSERT_NE(NULL, rk);
	EXPECT_EQ(1u, nproxy_hs_n_streams(nproxy_rank_hs(rk)));
	nproxy_rank_close(rk);
}

/* n_sems 0: n_ranks + 1. */
TEST(zero_semaphores_is_n_ranks_plus_one)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;

	rk = open_lone(_metadata, &o);
	ASSERT_NE(NULL, rk);
	EXPECT_EQ(2u, nproxy_hs_n_sems(nproxy_rank_hs(rk)));
	nproxy_rank_close(rk);
}

/* An idle policy the caller names is the comm's, whatever the cpus. */
TEST(a_named_idle_policy_is_kept)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;

	o.idle_policy = NPROXY_IDLE_ADAPTIVE_YIELD;
	rk = open_lone(_metadata, &o);
	ASSERT_NE(NULL, rk);
	EXPECT_EQ(NPROXY_IDLE_ADAPTIVE_YIELD, nproxy_rank_idle_policy(rk));
	nproxy_rank_close(rk);
}

/* wait_timeout_ms is the comm's default wait, in milliseconds. */
TEST(the_wait_timeout_is_the_comms)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;

	o.wait_timeout_ms = 4321;
	rk = open_lone(_metadata, &o);
	ASSERT_NE(NULL, rk);
	EXPECT_EQ(4321u, nproxy_comm_timeout_ms(nproxy_rank_comm(rk)));
	nproxy_rank_close(rk);
}

/* The rank and size getters: the open's values, 0 for NULL. */
TEST(rank_and_size_of_an_open_rank_and_of_null)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;

	rk = open_lone(_metadata, &o);
	ASSERT_NE(NULL, rk);
	EXPECT_EQ(0u, nproxy_rank_rank(rk));
	EXPECT_EQ(1u, nproxy_rank_size(rk));
	EXPECT_EQ(0u, nproxy_rank_rank(NULL));
	EXPECT_EQ(0u, nproxy_rank_size(NULL));
	nproxy_rank_close(rk);
}

TEST(null_rank_idle_policy_is_default_and_check_is_invalid)
{
	EXPECT_EQ(NPROXY_IDLE_DEFAULT, nproxy_rank_idle_policy(NULL));
	EXPECT_ST(NPROXY_INVALID, nproxy_rank_check(NULL));
}

/* A lone rank has no bus: no bus rank maps to a job rank. */
TEST(a_lone_rank_maps_no_bus_rank)
{
	struct nproxy_rank_opts o = rt_opts(NULL, 0, 1);
	struct nproxy_rank *rk;

	rk = open_lone(_metadata, &o);
	ASSERT_NE(NULL, rk);
	EXPECT_EQ(UINT32_MAX, nproxy_rank_of_bus_rank(rk, 0));
	EXPECT_EQ(UINT32_MAX, nproxy_rank_of_bus_rank(NULL, 0));
	nproxy_rank_close(rk);
}

/*
 * Two local ranks whose bus ranks are swapped against their job ranks:
 * bus rank b maps to the job rank that sat on it, and bus rank 2 (past
 * local_size) to UINT32_MAX.
 */
static char swapped_job[64], swapped_root[64];

static int swapped_main(uint32_t i, uint32_t n_forked, void *arg)
{
	struct nproxy_rank_opts o = rt_opts(swapped_job, i, 2);
	struct nproxy_rank *rk;
	int code = 0;

	(void)n_forked;
	(void)arg;
	o.local_rank = 1 - i;
	o.root = swapped_root;	/* the bus is not the job: the engine meets over TCP */
	if (nproxy_rank_open(&o, &rk) != NPROXY_SUCCESS)
		return 10;
	if (nproxy_rank_of_bus_rank(rk, 0) != 1 || nproxy_rank_of_bus_rank(rk, 1) != 0)
		code = 11;
	else if (nproxy_rank_of_bus_rank(rk, 2) != UINT32_MAX)
		code = 12;
	else if (nproxy_rank_check(rk) != NPROXY_SUCCESS)
		code = 13;
	nproxy_rank_close(rk);
	return code;
}

TEST(bus_ranks_map_to_the_job_ranks_on_them)
{
	int codes[2], port = nproxy_test_free_port();

	ASSERT_GT(port, 0);
	snprintf(swapped_root, sizeof(swapped_root), "127.0.0.1:%d", port);
	rt_job_id(swapped_job, sizeof(swapped_job), "swapped");
	rt_run_forked(2, swapped_main, NULL, 3 * RT_WAIT_MS, codes);
	EXPECT_EQ(0, codes[0]);
	EXPECT_EQ(0, codes[1]);
}

/*
 * More ranks on this host than cpus, with NPROXY_IDLE_POLICY or
 * NPROXY_ONE_THREAD_PER_CORE set: the variable wins, the open leaves the
 * choice to the comm (DEFAULT) instead of ADAPTIVE_YIELD.
 */
struct env_job {
	char id[64];
	uint32_t n_ranks;
};

static int env_policy_main(uint32_t i, uint32_t n_forked, void *arg)
{
	const struct env_job *job = arg;
	struct nproxy_rank_opts o = rt_opts(job->id, i, job->n_ranks);
	enum nproxy_idle_policy got;
	struct nproxy_rank *rk;

	(void)n_forked;
	if (nproxy_rank_open(&o, &rk))
		return 10;
	got = nproxy_rank_idle_policy(rk);
	nproxy_rank_close(rk);
	return got == NPROXY_IDLE_DEFAULT ? 0 : 20 + (int)got;
}

static void expect_env_wins(struct __test_metadata *_metadata, const char *name, const char *value)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct env_job job;
	int codes[RT_MAX_RANKS];

	if (cpus <= 0 || cpus >= RT_MAX_RANKS)
		SKIP(return, "%ld cpus: this test forks one rank more than the cpus (at most %d)",
		     cpus, RT_MAX_RANKS);
	job.n_ranks = (uint32_t)cpus + 1;
	unsetenv("NPROXY_IDLE_POLICY");
	unsetenv("NPROXY_ONE_THREAD_PER_CORE");
	ASSERT_EQ(0, setenv(name, value, 1));
	rt_job_id(job.id, sizeof(job.id), "envpolicy");
	rt_run_forked(job.n_ranks, env_policy_main, &job, 3 * RT_WAIT_MS, codes);
	unsetenv(name);
	for (uint32_t i = 0; i < job.n_ranks; i++) {
		EXPECT_EQ(0, codes[i]) TH_LOG("rank %u of %u on %ld cpus, %s=%s", i, job.n_ranks,
					      cpus, name, value);
	}
}

TEST(idle_policy_variable_wins_over_ranks_per_cpu)
{
	expect_env_wins(_metadata, "NPROXY_IDLE_POLICY", "spin");
}

TEST(one_thread_per_core_variable_wins_over_ranks_per_cpu)
{
	expect_env_wins(_metadata, "NPROXY_ONE_THREAD_PER_CORE", "1");
}

TEST_HARNESS_MAIN
