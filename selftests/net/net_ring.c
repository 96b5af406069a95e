// SPDX-License-Identifier: GPL-2.0
/*
 * Ring all-gather and ring all-reduce through the libfabric engine's seam,
 * 2 and 4 forked ranks, on shm and on tcp;ofi_rxm (FI_TCP_IFACE=lo), sizes
 * 1 B, 4 KiB, 1 MiB, 8 MiB and odd ones, verified byte for byte; on
 * udp;ofi_rxd (FI_UDP_IFACE=lo) up to 1 MiB + 13.  The
 * rendezvous runs on 127.0.0.1.  A rank slow to reach its first op (3 s
 * after its open, 1 s engine deadline) is not reported dead.
 *
 * With arguments it runs one rank instead (net_multihost.sh uses that):
 *   net_ring --rank R --ranks N [--sizes a,b,c] [--timeout-ms T] [--hold-ms H]
 *   (env: NPROXY_ROOT_COMM_ID, FI_*); --hold-ms: print "rank R: open" after
 *   nproxy_net_open() and wait H ms before the ops.
 */
#include "kselftest_harness.h"
/* Multi-process tests on a shared 2-CPU box: each test bounds its ranks
 * itself (ring_fork_ranks); the harness's 30 s default is too tight. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 240
#include <nproxy/bananaphone.h>
#include "ring_common.h"

static const size_t ring_sizes[] = { 1, 4096, 4097, 1 << 20, (1 << 20) + 13, 8 << 20 };

struct ring_job {
	const char *provider;
	uint32_t n;
	char root[64];
	const size_t *sizes;
	int n_sizes;
	int timeout_ms;
	bool verbose;		/* rank mode: a line per size done */
	bool bananaphone;	/* exchange names over bananaphone, provider auto */
	int hold_ms;		/* rank mode: say "open" and wait this long before the ops */
};

static int ring_rank(uint32_t rank, void *arg)
{
	struct ring_job *job = arg;
	struct nproxy_net_opts o = {
		.size = sizeof(o), .rank = rank, .n_ranks = job->n, .comm_id = 7,
		.timeout_ms = job->timeout_ms, .root = job->root[0] ? job->root : NULL,
	};
	struct nproxy_net *net;
	enum nproxy_status st;
	int bad = 0;

	struct nproxy_bp *bp = NULL;

	if (job->provider) {
		setenv("FI_PROVIDER", job->provider, 1);
		setenv("FI_TCP_IFACE", "lo", 0);
		setenv("FI_UDP_IFACE", "lo", 0);
	}
	if (job->bananaphone) {
		/* Local ranks: no rendezvous address, names go over the bus. */
		struct nproxy_bp_opts bo = NPROXY_BP_OPTS_INIT;

		bo.job_id = job->root;
		bo.rank = rank;
		bo.n_ranks = job->n;
		bo.timeout_ms = 10000;
		st = nproxy_bp_open(&bo, &bp);
		if (st) {
			fprintf(stderr, "rank %u: bananaphone: %s\n", rank, nproxy_status_str(st));
			return 2;
		}
		o.root = NULL;
		o.bp = bp;
		unsetenv("FI_PROVIDER");
	}
	st = nproxy_net_open(&o, &net);
	if (st) {
		fprintf(stderr, "rank %u: nproxy_net_open: %s\n", rank, nproxy_status_str(st));
		return 2;
	}
	if (job->hold_ms) {
		/* net_scale.sh looks at the connections the open made. */
		printf("rank %u: open\n", rank);
		fflush(stdout);
		usleep((useconds_t)job->hold_ms * 1000);
	}
	/* With bananaphone every rank is local: auto selection must pick shm. */
	if (job->provider && strcmp(nproxy_net_provider(net), job->provider)) {
		fprintf(stderr, "rank %u: got provider %s, want %s\n", rank,
			nproxy_net_provider(net), job->provider);
		bad = 1;
	}
	for (int i = 0; !bad && i < job->n_sizes; i++) {
		if (ring_allgather(net, job->sizes[i], (uint32_t)i, 2 * (uint32_t)i, job->timeout_ms) ||
		    ring_allreduce(net, job->sizes[i], (uint32_t)i + 100, 2 * (uint32_t)i, job->timeout_ms))
			bad = 1;
		else if (job->verbose)
			printf("rank %u: size %zu ok\n", rank, job->sizes[i]), fflush(stdout);
	}
	nproxy_net_close(net);
	if (bp) {
		if (nproxy_bp_barrier(bp, 20000))
			bad = 1;
		nproxy_bp_close(bp);
	}
	return bad;
}

/* The first n_sizes of ring_sizes. */
static void run_ring_sizes(struct __test_metadata *_metadata, const char *provider, uint32_t n,
			   int n_sizes)
{
	struct ring_job job = { .provider = provider, .n = n, .sizes = ring_sizes,
				.n_sizes = n_sizes, .timeout_ms = 20000 };
	int exits[64], port = ring_free_port();

	ASSERT_GT(port, 0);
	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", port);
	ASSERT_EQ((int)n, ring_fork_ranks(n, ring_rank, &job, 200000, exits)) {
		for (uint32_t r = 0; r < n; r++)
			TH_LOG("rank %u exit %d", r, exits[r]);
	}
}

static void run_ring(struct __test_metadata *_metadata, const char *provider, uint32_t n)
{
	run_ring_sizes(_metadata, provider, n, (int)(sizeof(ring_sizes) / sizeof(ring_sizes[0])));
}

TEST(shm_2_ranks) { run_ring(_metadata, "shm", 2); }
TEST(shm_4_ranks) { run_ring(_metadata, "shm", 4); }
TEST(tcp_rxm_2_ranks) { run_ring(_metadata, "tcp;ofi_rxm", 2); }
TEST(tcp_rxm_4_ranks) { run_ring(_metadata, "tcp;ofi_rxm", 4); }
/* RDM over datagrams moves a few MB/s here: every size but the 8 MiB one. */
TEST(udp_rxd_2_ranks) { run_ring_sizes(_metadata, "udp;ofi_rxd", 2, 5); }
TEST(udp_rxd_4_ranks) { run_ring_sizes(_metadata, "udp;ofi_rxd", 4, 5); }

/* Local exchange over bananaphone, provider chosen automatically (shm). */
TEST(bananaphone_4_ranks_auto_provider)
{
	struct ring_job job = { .provider = "shm", .n = 4, .sizes = ring_sizes, .n_sizes = 4,
				.timeout_ms = 20000, .bananaphone = true };
	int exits[4];

	snprintf(job.root, sizeof(job.root), "net-ring-%d", getpid());
	ASSERT_EQ(4, ring_fork_ranks(4, ring_rank, &job, 120000, exits)) {
		for (uint32_t r = 0; r < 4; r++)
			TH_LOG("rank %u exit %d", r, exits[r]);
	}
}

/*
 * A ping-pong in one block of 2 x PP_ROUNDS ops: each send waits for the
 * reply before it (precondition on the recv completions).  Far more than
 * NET_SCAN_MAX_PER_TICK sends are held back at once, and the engine looks
 * at sends first: they must not use up the scan budget the receives that
 * feed them need (that deadlocked both ranks).
 */
#define PP_ROUNDS	200

static int pingpong_rank(uint32_t rank, void *arg)
{
	struct ring_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = 2, .comm_id = 9,
				     .timeout_ms = job->timeout_ms, .root = job->root };
	struct nproxy_net_op ops[2 * PP_ROUNDS];
	uint64_t sem = 0;
	struct nproxy_device_sems dev = { .sems = &sem, .n_sems = 1 };
	struct nproxy_net_addr addr = { 0 };
	struct nproxy_fifo_set fs = { .ops = ops, .n_ops = 2 * PP_ROUNDS, .src = &addr, .n_src = 1,
				      .dst = &addr, .n_dst = 1 };
	uint32_t peer = 1 - rank, k = 0;
	struct nproxy_seam seam;
	struct nproxy_net *net;
	static uint8_t buf[64];
	int bad = 1;

	setenv("FI_PROVIDER", job->provider, 1);
	if (nproxy_net_open(&o, &net))
		return 2;
	if (nproxy_net_mr_register(net, buf, sizeof(buf), &addr.mr))
		goto out;
	for (uint32_t i = 0; i < PP_ROUNDS; i++) {
		struct nproxy_net_op send = {
			.kind = NPROXY_NET_OP_SEND, .peer = peer, .len = sizeof(buf),
			.flags = NPROXY_NET_OP_F_PRECOND, .pre_sem = 0,
			.pre_value = rank == 0 ? i : i + 1 };
		struct nproxy_net_op recv = {
			.kind = NPROXY_NET_OP_RECV, .peer = peer, .len = sizeof(buf),
			.flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = 0, .post_inc = 1 };

		ops[k++] = rank == 0 ? send : recv;
		ops[k++] = rank == 0 ? recv : send;
	}
	nproxy_net_seam(net, &seam);
	if (seam.ops->start(seam.engine, 0, 0, &fs, &dev) == NPROXY_SUCCESS &&
	    ring_drive(&seam, 0, 0, NULL, NULL, RING_BACKSTOP_MS(job->timeout_ms)) == NPROXY_SUCCESS &&
	    sem == PP_ROUNDS)
		bad = 0;
	if (bad)
		fprintf(stderr, "rank %u: ping-pong stopped at %llu of %u replies: %s\n", rank,
			(unsigned long long)sem, PP_ROUNDS, nproxy_net_strerror(net));
	seam.ops->stop(seam.engine, 0, 0);
	nproxy_net_mr_deregister(net, addr.mr);
out:
	nproxy_net_close(net);
	return bad;
}

TEST(held_back_sends_do_not_starve_receives)
{
	struct ring_job job = { .provider = "shm", .n = 2, .timeout_ms = 10000 };

	RING_ASSERT_RANKS_OK(2, pingpong_rank, &job, job.root, 60000);
}

/*
 * A peer that is slow to reach its first op is not a dead peer: rank
 * LATE_RANK sleeps LATE_MS after its open (as a rank whose setup after the
 * open -- its comm, its buffers -- is slow when many processes share few
 * cpus), the others go straight into a host barrier (or the ops) with a
 * LATE_DEADLINE_MS engine deadline, far below LATE_MS.  Every rank must
 * pass: until a peer has sent anything after the open, a wait on it gets
 * the open's deadline.  With the host barrier beside the ops (a comm's
 * first op), 4 ranks: the rank after the late one forwards nothing before
 * the late rank's chunk, so the ranks further down the ring wait on a
 * peer they have heard from -- the first barrier's deadline covers that.
 */
#define LATE_RANK		2
#ifdef __SANITIZE_THREAD__
/* TSan's slowdown stretches a tcp;ofi_rxm connect past 1 s now and then. */
#define LATE_MS			9000
#define LATE_DEADLINE_MS	3000
#else
#define LATE_MS			3000
#define LATE_DEADLINE_MS	1000
#endif

enum late_barrier {
	LATE_NO_BARRIER,	/* the ring only */
	LATE_BARRIER_FIRST,	/* host barrier 1, then the ring */
	LATE_BARRIER_BESIDE,	/* host barrier 1 arrived, the ring, then its end */
};

struct late_job {
	struct ring_job ring;
	enum late_barrier barrier;
};

/* Drive host barrier `seq` (arrived) to its end. */
static int late_barrier_end(struct nproxy_net *net, struct nproxy_host_barrier *bar,
			    uint32_t rank)
{
	int64_t end = ring_now_ms() + RING_BACKSTOP_MS(LATE_DEADLINE_MS);
	enum nproxy_status st = NPROXY_SUCCESS;
	bool done = false;

	while (st == NPROXY_SUCCESS && !done && ring_now_ms() < end) {
		st = bar->ops->test(bar->ctx, 1, &done);
		if (!done)
			usleep(200);
	}
	if (st == NPROXY_SUCCESS && done)
		return 0;
	fprintf(stderr, "rank %u: host barrier: %s: %s\n", rank, nproxy_status_str(st),
		nproxy_net_strerror(net));
	return 1;
}

static int late_peer_rank(uint32_t rank, void *arg)
{
	struct late_job *job = arg;
	struct nproxy_net_opts o = {
		.size = sizeof(o), .rank = rank, .n_ranks = job->ring.n, .comm_id = 11,
		.timeout_ms = LATE_DEADLINE_MS, .rdzv_timeout_ms = 30000, .root = job->ring.root,
	};
	struct nproxy_host_barrier bar;
	struct nproxy_net *net;
	int bad = 0;

	setenv("FI_PROVIDER", job->ring.provider, 1);
	setenv("FI_TCP_IFACE", "lo", 0);
	if (nproxy_net_open(&o, &net))
		return 2;
	if (rank == LATE_RANK)
		usleep(LATE_MS * 1000);
	nproxy_net_host_barrier(net, &bar);
	if (job->barrier != LATE_NO_BARRIER && bar.ops->arrive(bar.ctx, 1) != NPROXY_SUCCESS) {
		fprintf(stderr, "rank %u: host barrier arrive: %s\n", rank, nproxy_net_strerror(net));
		bad = 1;
	}
	if (!bad && job->barrier == LATE_BARRIER_FIRST)
		bad = late_barrier_end(net, &bar, rank);
	if (!bad && ring_allgather(net, 4096, 5, 0, LATE_DEADLINE_MS)) {
		fprintf(stderr, "rank %u: all-gather: %s\n", rank, nproxy_net_strerror(net));
		bad = 1;
	}
	if (!bad && job->barrier == LATE_BARRIER_BESIDE)
		bad = late_barrier_end(net, &bar, rank);
	nproxy_net_close(net);
	return bad;
}

static void run_late_peer(struct __test_metadata *_metadata, const char *provider,
			  enum late_barrier barrier)
{
	struct late_job job = { .ring = { .provider = provider }, .barrier = barrier };

	if (barrier == LATE_BARRIER_BESIDE) {
		job.ring.n = 4;
		RING_ASSERT_RANKS_OK(4, late_peer_rank, &job, job.ring.root, 90000);
	} else {
		job.ring.n = 3;
		RING_ASSERT_RANKS_OK(3, late_peer_rank, &job, job.ring.root, 90000);
	}
}

TEST(late_peer_is_not_dead_tcp_rxm_host_barrier)
{
	run_late_peer(_metadata, "tcp;ofi_rxm", LATE_BARRIER_FIRST);
}
TEST(late_peer_is_not_dead_shm_ops) { run_late_peer(_metadata, "shm", LATE_NO_BARRIER); }
TEST(late_peer_up_the_ring_is_not_dead_shm_first_op)
{
	run_late_peer(_metadata, "shm", LATE_BARRIER_BESIDE);
}

/* One rank, no rendezvous: the ring degenerates, the engine still opens. */
TEST(single_rank)
{
	struct ring_job job = { .provider = "shm", .n = 1, .sizes = ring_sizes, .n_sizes = 2,
				.timeout_ms = 5000 };
	int exits[1];

	ASSERT_EQ(1, ring_fork_ranks(1, ring_rank, &job, 30000, exits));
}

static int rank_main(int argc, char **argv)
{
	struct ring_job job = { .timeout_ms = 30000, .verbose = true };
	size_t sizes[16];
	int rank = -1;

	job.sizes = sizes;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--rank"))
			rank = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--ranks"))
			job.n = (uint32_t)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--timeout-ms"))
			job.timeout_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--hold-ms"))
			job.hold_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--idle-nap-us"))
			ring_idle_nap_us = (unsigned int)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--sizes"))
			for (char *t = strtok(argv[i + 1], ","); t && job.n_sizes < 16; t = strtok(NULL, ","))
				sizes[job.n_sizes++] = strtoull(t, NULL, 0);
	}
	if (rank < 0 || !job.n || (uint32_t)rank >= job.n) {
		fprintf(stderr, "usage: %s --rank R --ranks N [--sizes a,b] [--timeout-ms T] [--hold-ms H]\n", argv[0]);
		return 2;
	}
	if (!job.n_sizes) {
		memcpy(sizes, ring_sizes, sizeof(ring_sizes));
		job.n_sizes = (int)(sizeof(ring_sizes) / sizeof(ring_sizes[0]));
	}
	return ring_rank((uint32_t)rank, &job);
}

static void __attribute__((constructor)) ring_constructor_order_last(void)
{
	if (!__constructor_order)
		__constructor_order = _CONSTRUCTOR_ORDER_BACKWARD;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--rank"))
		return rank_main(argc, argv);
	return test_harness_run(argc, argv);
}
