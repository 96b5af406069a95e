// SPDX-License-Identifier: GPL-2.0
/*
 * Failure paths of the libfabric engine: bad FIFO records are refused at
 * start(); a rendezvous peer that never shows up is named; a rank killed
 * mid-collective ends the survivors' blocks with an error status within
 * the engine timeout (never a hang); the host barrier orders ranks and
 * fails on a dead peer.
 */
#include <sys/mman.h>
#include "kselftest_harness.h"
/* Multi-process tests on a shared 2-CPU box: each test bounds its ranks
 * itself (ring_fork_ranks); the harness's 30 s default is too tight. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 240
#include "ring_common.h"

TEST(bad_options)
{
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = 2, .n_ranks = 2 };
	struct nproxy_net *net = (void *)1;

	ASSERT_EQ((int)NPROXY_INVALID, (int)nproxy_net_open(&o, &net));
	ASSERT_EQ(NULL, net);
	o.rank = 0;
	o.comm_id = NPROXY_NET_MAX_COMM_ID + 1;
	ASSERT_EQ((int)NPROXY_INVALID, (int)nproxy_net_open(&o, &net));
	o.comm_id = 0;
	/* At most one hour (3600000 ms); 0 is the default, tested below. */
	o.rdzv_timeout_ms = 3600001;
	ASSERT_EQ((int)NPROXY_INVALID, (int)nproxy_net_open(&o, &net));
	o.timeout_ms = 3600001;
	o.rdzv_timeout_ms = 0;
	ASSERT_EQ((int)NPROXY_INVALID, (int)nproxy_net_open(&o, &net));
	o.timeout_ms = 0;
	/* Two ranks, no bus, no root address. */
	unsetenv("NPROXY_ROOT_COMM_ID");
	ASSERT_EQ((int)NPROXY_INVALID, (int)nproxy_net_open(&o, &net));
	o.root = "no-port-here";
	ASSERT_EQ((int)NPROXY_INVALID, (int)nproxy_net_open(&o, &net));
	o.n_ranks = 1;
	o.provider = "no-such-provider";
	ASSERT_EQ((int)NPROXY_UNSUPPORTED, (int)nproxy_net_open(&o, &net));
}

TEST(bad_fifo_records)
{
	struct nproxy_net *net = ring_open_single(2000, NULL);
	static uint8_t buf[4096];
	uint64_t sems[2] = { 0 };
	struct nproxy_device_sems dev = { .sems = sems, .n_sems = 2 };
	struct nproxy_net_op op = { .kind = NPROXY_NET_OP_SEND, .peer = 0, .len = 16 };
	struct nproxy_net_addr a = { 0 };
	struct nproxy_fifo_set fs = { .ops = &op, .n_ops = 1, .src = &a, .n_src = 1, .dst = &a,
				      .n_dst = 1 };
	struct nproxy_seam seam;
	uint32_t mr, mr2;
	bool idle, bd, done;

	ASSERT_NE(NULL, net);
	nproxy_net_seam(net, &seam);
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_mr_register(net, buf, sizeof(buf), &mr));
	/* The cache hands back the same region for the same buffer. */
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_mr_register(net, buf, sizeof(buf), &mr2));
	ASSERT_EQ(mr, mr2);
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_mr_deregister(net, mr2));
	a.mr = mr;

	op.kind = NPROXY_NET_OP_COPY + 1;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.kind = 0;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	/* A COPY has no peer, no type or operator, and stays inside its regions. */
	op.kind = NPROXY_NET_OP_COPY;
	op.peer = 1;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.peer = 0;
	op.dtype = NPROXY_UINT8;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.dtype = 0;
	op.redop = NPROXY_MAX;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	EXPECT_NE(NULL, strstr(nproxy_net_strerror(net), "bad COPY"));
	op.redop = 0;
	op.len = sizeof(buf) + 1;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	EXPECT_NE(NULL, strstr(nproxy_net_strerror(net), "COPY of 4097 bytes overruns"));
	op.len = 16;
	op.flags = 1u << 2;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.flags = 0;
	/* A REDUCE has no peer, a known type and op, and whole elements. */
	op.kind = NPROXY_NET_OP_REDUCE;
	op.dtype = NPROXY_FLOAT32;
	op.peer = 1;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.peer = 0;
	op.dtype = NPROXY_DTYPE_COUNT;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.dtype = NPROXY_FLOAT64;
	op.len = 12;	/* not a whole number of doubles */
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.dtype = NPROXY_FLOAT32;
	op.redop = NPROXY_REDOP_COUNT;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	EXPECT_NE(NULL, strstr(nproxy_net_strerror(net), "bad REDUCE"));
	op.redop = 0;
	op.dtype = 0;
	op.len = 16;
	op.kind = NPROXY_NET_OP_SEND;
	op.peer = 1;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	EXPECT_NE(NULL, strstr(nproxy_net_strerror(net), "peer 1 of 1"));
	op.peer = 0;
	op.len = sizeof(buf) + 1;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	EXPECT_NE(NULL, strstr(nproxy_net_strerror(net), "overrun"));
	op.len = 16;
	op.flags = NPROXY_NET_OP_F_PRECOND;
	op.pre_sem = 2;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, NULL));
	op.flags = 0x80;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.flags = 0;
	op.dtype = NPROXY_FLOAT32;	/* a SEND/RECV carries no type */
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.dtype = 0;
	op.redop = NPROXY_MAX;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	op.redop = 0;
	a.mr = 99;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	a.mr = mr;
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->start(seam.engine, NPROXY_MAX_STREAMS, 0, &fs, &dev));
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->progress(seam.engine, 0, 5, &idle, &bd, &done));
	EXPECT_TRUE(done);

	/* A send to self with a precondition: gated until the "device" moves. */
	struct nproxy_net_op pair[2] = {
		{ .kind = NPROXY_NET_OP_RECV, .peer = 0, .addr_idx = 0, .len = 16,
		  .flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = 1, .post_inc = 5 },
		{ .kind = NPROXY_NET_OP_SEND, .peer = 0, .addr_idx = 0, .len = 16,
		  .flags = NPROXY_NET_OP_F_PRECOND, .pre_sem = 0, .pre_value = 1 },
	};
	struct nproxy_net_addr dst = { .mr = mr, .offset = 1024 };

	memset(buf, 0x5a, 16);
	fs = (struct nproxy_fifo_set){ .ops = pair, .n_ops = 2, .src = &a, .n_src = 1,
				       .dst = &dst, .n_dst = 1 };
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	EXPECT_EQ((int)NPROXY_BUSY, (int)seam.ops->start(seam.engine, 0, 0, &fs, &dev));
	/* The region is in use by a started block. */
	EXPECT_EQ((int)NPROXY_BUSY, (int)nproxy_net_mr_deregister(net, mr));
	for (int i = 0; i < 200; i++) {
		ASSERT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->progress(seam.engine, 0, 0, &idle, &bd, &done));
		usleep(100);
	}
	EXPECT_FALSE(bd);
	EXPECT_EQ(0, (int)sems[1]);
	EXPECT_EQ(0, buf[1024]);
	sems[0] = 1;	/* the device produced the data */
	for (int i = 0; i < 100000 && !done; i++)
		ASSERT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->progress(seam.engine, 0, 0, &idle, &bd, &done));
	EXPECT_TRUE(bd);
	EXPECT_TRUE(done);
	EXPECT_EQ(5, (int)sems[1]);
	EXPECT_EQ(0x5a, buf[1024 + 15]);
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->stop(seam.engine, 0, 0));
	EXPECT_EQ((int)NPROXY_INVALID, (int)seam.ops->stop(seam.engine, 0, 0));

	/* Stopping a block with a recv still posted (abort) must not leak or crash. */
	fs.n_ops = 1;
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->start(seam.engine, 0, 1, &fs, &dev));
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->progress(seam.engine, 0, 1, &idle, &bd, &done));
	EXPECT_FALSE(bd);
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)seam.ops->stop(seam.engine, 0, 1));
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_mr_deregister(net, mr));
	EXPECT_EQ((int)NPROXY_INVALID_HANDLE, (int)nproxy_net_mr_deregister(net, mr));
	nproxy_net_close(net);
}

struct err_job {
	const char *provider;
	uint32_t n;
	char root[64];
	int timeout_ms;
	uint32_t victim;
	int64_t *elapsed_ms;	/* shared: per rank, from the kill to the error */
	volatile int64_t *killed_at;
};

/* Exit codes of an error-test rank. */
#define RANK_GOT_ERROR	3	/* the collective failed with an error status: expected */

static int kill_rank(uint32_t rank, void *arg)
{
	struct err_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = job->n, .comm_id = 3,
				     .timeout_ms = job->timeout_ms, .root = job->root };
	struct nproxy_net *net;
	enum nproxy_status st;
	int rc = 0;

	setenv("FI_PROVIDER", job->provider, 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	if (nproxy_net_open(&o, &net))
		return 2;
	/* A first collective that succeeds everywhere. */
	if (ring_allgather(net, 4096, 1, 0, job->timeout_ms))
		return 1;
	if (rank == job->victim) {
		*job->killed_at = ring_now_ms();
		raise(SIGKILL);
	}
	/* Then a stream of them: the victim's neighbours must fail, not hang. */
	for (uint32_t i = 1; i < 1000; i++) {
		st = (enum nproxy_status)-ring_allgather(net, 65536, i, 2 * i, job->timeout_ms);
		if (st) {
			job->elapsed_ms[rank] = ring_now_ms() - *job->killed_at;
			fprintf(stderr, "rank %u: failed as expected after %ld ms: %s: %s\n", rank,
				(long)job->elapsed_ms[rank], nproxy_status_str(st),
				nproxy_net_strerror(net));
			rc = (st == NPROXY_TIMEOUT || st == NPROXY_NET_ERROR) &&
			     strstr(nproxy_net_strerror(net), "rank") ? RANK_GOT_ERROR : 1;
			break;
		}
	}
	nproxy_net_close(net);
	return rc;
}

static void run_kill(struct __test_metadata *_metadata, const char *provider)
{
	int64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct err_job job = { .provider = provider, .n = 4, .timeout_ms = 5000, .victim = 2 };
	int exits[4], port = ring_free_port();

	ASSERT_NE(MAP_FAILED, shared);
	job.killed_at = &shared[0];
	job.elapsed_ms = &shared[1];
	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", port);
	ring_fork_ranks(job.n, kill_rank, &job, 60000, exits);
	EXPECT_EQ(128 + SIGKILL, exits[job.victim]);
	/* The victim's ring neighbours wait on it directly; every survivor must
	 * end with an error (a neighbour's failure starves the rest). */
	for (uint32_t r = 0; r < job.n; r++) {
		if (r == job.victim)
			continue;
		EXPECT_EQ(RANK_GOT_ERROR, exits[r]) TH_LOG("rank %u exit %d", r, exits[r]);
		/* Within a few engine timeouts (the chain of starved ranks), never a hang. */
		EXPECT_LT(job.elapsed_ms[r], 6 * job.timeout_ms + 2000);
	}
	munmap(shared, 4096);
}

TEST(killed_rank_shm) { run_kill(_metadata, "shm"); }
TEST(killed_rank_tcp_rxm) { run_kill(_metadata, "tcp;ofi_rxm"); }

static int missing_rank(uint32_t rank, void *arg)
{
	struct err_job *job = arg;
	struct nproxy_rdzv *rz;
	enum nproxy_status st;
	int64_t t0 = ring_now_ms();

	/* Three ranks expected, rank 2 never comes. */
	st = ring_rdzv_open(job->root, rank, 3, job->timeout_ms, &rz);
	if (ring_now_ms() - t0 > job->timeout_ms + 1500)
		return 1;
	if (rank == 0)
		return st == NPROXY_TIMEOUT && !rz ? RANK_GOT_ERROR : 1;
	/* Rank 1 connected; its all-gather fails once the root gives up. */
	if (st)
		return 1;
	void *all;
	size_t lens[3], offs[3];

	st = nproxy_rdzv_allgather(rz, "x", 1, &all, lens, offs);
	nproxy_rdzv_close(rz);
	return st != NPROXY_SUCCESS && ring_now_ms() - t0 < 2 * job->timeout_ms + 1500 ?
	       RANK_GOT_ERROR : 1;
}

TEST(rendezvous_missing_rank)
{
	struct err_job job = { .timeout_ms = 800 };
	int exits[2], port = ring_free_port();
	struct nproxy_rdzv *rz;

	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", port);
	ring_fork_ranks(2, missing_rank, &job, 20000, exits);
	EXPECT_EQ(RANK_GOT_ERROR, exits[0]);
	EXPECT_EQ(RANK_GOT_ERROR, exits[1]);
	/* The message names the missing rank. */
	ASSERT_EQ((int)NPROXY_TIMEOUT, (int)ring_rdzv_open(job.root, 0, 3, 300, &rz));
	/* ... and a root nobody listens on is reported by a peer. */
	port = ring_free_port();
	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", port);
	ASSERT_EQ((int)NPROXY_TIMEOUT, (int)ring_rdzv_open(job.root, 1, 2, 300, &rz));
	ASSERT_EQ((int)NPROXY_INVALID, (int)ring_rdzv_open("127.0.0.1:notaport", 1, 2, 300, &rz));
}

/* Host barrier: nobody leaves barrier k before everybody entered it. */
struct bar_job {
	const char *provider;
	uint32_t n;
	char root[64];
	volatile uint32_t *entered;	/* shared: [k] ranks that arrived at barrier k */
	uint32_t rounds;
	uint32_t victim;		/* n: nobody dies */
};

static int bar_rank(uint32_t rank, void *arg)
{
	struct bar_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = job->n, .comm_id = 9,
				     .timeout_ms = 5000, .root = job->root };
	struct nproxy_host_barrier hb;
	struct nproxy_net *net;
	enum nproxy_status st = NPROXY_SUCCESS;
	int rc = 0;

	setenv("FI_PROVIDER", job->provider, 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	if (nproxy_net_open(&o, &net))
		return 2;
	nproxy_net_host_barrier(net, &hb);
	for (uint64_t k = 1; k <= job->rounds && !rc; k++) {
		bool done = false;
		int64_t t0 = ring_now_ms();

		if (rank == job->victim && k == job->rounds / 2)
			raise(SIGKILL);
		if (rank == k % job->n)
			usleep(2000);	/* a late rank */
		__atomic_add_fetch(&job->entered[k], 1, __ATOMIC_SEQ_CST);
		st = hb.ops->arrive(hb.ctx, k);
		while (!st && !done)
			st = hb.ops->test(hb.ctx, k, &done);
		if (st) {
			fprintf(stderr, "rank %u: barrier %lu: %s after %ld ms: %s\n", rank,
				(unsigned long)k, nproxy_status_str(st), (long)(ring_now_ms() - t0),
				nproxy_net_strerror(net));
			rc = job->victim < job->n && ring_now_ms() - t0 < 12000 ? RANK_GOT_ERROR : 1;
			break;
		}
		if (__atomic_load_n(&job->entered[k], __ATOMIC_SEQ_CST) != job->n) {
			fprintf(stderr, "rank %u left barrier %lu with %u of %u in\n", rank,
				(unsigned long)k, job->entered[k], job->n);
			rc = 1;
		}
	}
	nproxy_net_close(net);
	return rc;
}

static void run_barrier(struct __test_metadata *_metadata, const char *provider, uint32_t n,
			bool kill)
{
	uint32_t *entered = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct bar_job job = { .provider = provider, .n = n, .entered = entered, .rounds = 100,
			       .victim = kill ? 1 : n };
	int exits[8];

	ASSERT_NE(MAP_FAILED, entered);
	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", ring_free_port());
	ring_fork_ranks(n, bar_rank, &job, 60000, exits);
	for (uint32_t r = 0; r < n; r++) {
		if (kill && r == job.victim) {
			EXPECT_EQ(128 + SIGKILL, exits[r]);
		} else {
			EXPECT_EQ(kill ? RANK_GOT_ERROR : 0, exits[r]) TH_LOG("rank %u exit %d", r, exits[r]);
		}
	}
	munmap(entered, 4096);
}

TEST(host_barrier_shm_3) { run_barrier(_metadata, "shm", 3, false); }
TEST(host_barrier_tcp_rxm_4) { run_barrier(_metadata, "tcp;ofi_rxm", 4, false); }
TEST(host_barrier_dead_peer) { run_barrier(_metadata, "tcp;ofi_rxm", 3, true); }

/* Every entry point that takes options checks their size first. */
TEST(options_size_is_checked)
{
	struct nproxy_rdzv_opts ro = { .size = 0, .root = "127.0.0.1:1", .n_ranks = 1 };
	struct nproxy_net_opts no = { .size = 0, .n_ranks = 1 };
	struct nproxy_shm_sweep_opts so = { .size = 0, .dry_run = true };
	struct nproxy_rdzv *rz = (struct nproxy_rdzv *)1;
	struct nproxy_net *net = (struct nproxy_net *)1;
	struct {
		struct nproxy_net_opts o;
		uint32_t newer_field;
	} longer = { .o = NPROXY_NET_OPTS_INIT, .newer_field = 1 };
	uint32_t n;

	EXPECT_EQ((int)NPROXY_INVALID, (int)nproxy_rdzv_open(&ro, &rz));
	EXPECT_EQ(NULL, rz);
	EXPECT_EQ((int)NPROXY_INVALID, (int)nproxy_rdzv_open(NULL, &rz));
	EXPECT_EQ((int)NPROXY_INVALID, (int)nproxy_net_open(&no, &net));
	EXPECT_EQ(NULL, net);
	longer.o.n_ranks = 1;
	longer.o.size = sizeof(longer);
	EXPECT_EQ((int)NPROXY_INVALID, (int)nproxy_net_open(&longer.o, &net));
	EXPECT_EQ((int)NPROXY_INVALID, (int)nproxy_net_shm_sweep(&so, &n));
}

TEST_HARNESS_MAIN
