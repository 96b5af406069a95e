// SPDX-License-Identifier: GPL-2.0
/*
 * On ofi_rxd endpoints the host barrier's receives are posted one barrier
 * ahead: arriving at barrier s posts the receives of barrier s + 1, and
 * the open posts those of barrier 1, so no peer's barrier message ever
 * arrives before its receive.  ofi_rxd 1.17 loses the rest of a message
 * that is arriving when a receive is posted for an earlier unexpected
 * message from the same peer (lib/net/net_barrier.c says how); a barrier
 * receive posted late, while the next op's data streamed in, hung 4-rank
 * jobs.
 *
 * Two views, both on udp;ofi_rxd: what reaches the provider (every rank's
 * fi_trecv, seen through a wrapped tagged-ops table), and the loss itself:
 * rank 0 arrives at barrier 1 and then sends 1 MiB to rank 1, which
 * arrives at barrier 1 only once that message has begun to land.
 */
#include "kselftest_harness.h"
/* Multi-process tests on a shared 2-CPU box: each test bounds its ranks
 * itself (ring_fork_ranks); the harness's 30 s default is too tight. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120
#include "ring_common.h"
#include "net/net_internal.h"

#define AHEAD_RANKS	4
#define AHEAD_ROUNDS	2	/* ceil(log2(AHEAD_RANKS)) */
#define AHEAD_BARRIERS	5
#define BIG_LEN		(1u << 20)

struct ahead_job {
	const char *provider;
	char root[64];
};

static void use_provider(const char *provider)
{
	setenv("FI_PROVIDER", provider, 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("FI_UDP_IFACE", "lo", 1);
	unsetenv("NPROXY_NET_MR_MODE");
}

static struct nproxy_net *open_rank(struct ahead_job *job, uint32_t rank, uint32_t n)
{
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = n, .comm_id = 9,
				     .timeout_ms = 20000, .root = job->root };
	struct nproxy_net *net = NULL;
	enum nproxy_status st;

	use_provider(job->provider);
	st = nproxy_net_open(&o, &net);
	if (st)
		fprintf(stderr, "rank %u: nproxy_net_open on %s: %s\n", rank, job->provider,
			nproxy_status_str(st));
	return st ? NULL : net;
}

/* ---- what reaches the provider ---- */

static struct fi_ops_tagged spy_ops, *provider_ops;
/* Barrier receives posted so far, by the barrier's number (tag bits 49..34). */
static uint32_t recvs_for[AHEAD_BARRIERS + 2];

static ssize_t spy_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			uint64_t tag, uint64_t ignore, void *context)
{
	ssize_t rc = provider_ops->recv(ep, buf, len, desc, src, tag, ignore, context);
	uint64_t seq = (tag >> 34) & 0xffff;

	if (!rc && (tag & NET_TAG_BARRIER) && seq < sizeof(recvs_for) / sizeof(recvs_for[0]))
		recvs_for[seq]++;
	return rc;
}

static int posted_ahead_rank(uint32_t rank, void *arg)
{
	struct nproxy_net *net = open_rank(arg, rank, AHEAD_RANKS);
	struct nproxy_host_barrier hb;
	int bad = 0;

	if (!net)
		return 2;
	/* The open ran barrier 0 and posted barrier 1's receives before the spy. */
	provider_ops = net->ep->tagged;
	spy_ops = *provider_ops;
	spy_ops.recv = spy_recv;
	net->ep->tagged = &spy_ops;
	nproxy_net_host_barrier(net, &hb);
	for (uint64_t s = 1; !bad && s <= AHEAD_BARRIERS; s++) {
		enum nproxy_status st;
		bool done = false;

		if (recvs_for[s] != (s == 1 ? 0 : AHEAD_ROUNDS)) {
			fprintf(stderr, "rank %u: barrier %llu: %u receives posted before the arrival (want %u, posted with barrier %llu's)\n",
				rank, (unsigned long long)s, recvs_for[s], s == 1 ? 0 : AHEAD_ROUNDS,
				(unsigned long long)s - 1);
			bad = 1;
			break;
		}
		st = hb.ops->arrive(hb.ctx, s);
		/* The next barrier's, before any round of this one ran. */
		if (!st && recvs_for[s + 1] != AHEAD_ROUNDS) {
			fprintf(stderr, "rank %u: arrived at barrier %llu: %u receives of barrier %llu posted, want %u\n",
				rank, (unsigned long long)s, recvs_for[s + 1],
				(unsigned long long)s + 1, AHEAD_ROUNDS);
			bad = 1;
		}
		while (!st && !done)
			st = hb.ops->test(hb.ctx, s, &done);
		if (st) {
			fprintf(stderr, "rank %u: barrier %llu: %s (%s)\n", rank, (unsigned long long)s,
				nproxy_status_str(st), nproxy_net_strerror(net));
			bad = 1;
		}
		/* A receive posted again for a barrier it already had is one too many. */
		if (recvs_for[s] != (s == 1 ? 0 : AHEAD_ROUNDS)) {
			fprintf(stderr, "rank %u: barrier %llu's receives posted again during it (%u)\n",
				rank, (unsigned long long)s, recvs_for[s]);
			bad = 1;
		}
	}
	nproxy_net_close(net);
	return bad;
}

TEST(receives_are_posted_one_barrier_ahead_on_rxd)
{
	struct ahead_job job = { .provider = "udp;ofi_rxd" };

	RING_ASSERT_RANKS_OK(AHEAD_RANKS, posted_ahead_rank, &job, job.root, 60000);
}

/* ---- the loss on udp;ofi_rxd ---- */

/* One block of one op to or from the other rank, over registered buf. */
struct one_op {
	struct nproxy_seam seam;
	struct nproxy_net_op op;
	struct nproxy_net_addr addr;
	struct nproxy_fifo_set fs;
	uint64_t sems[2];
	struct nproxy_device_sems dev;
	uint32_t mr;
};

static enum nproxy_status one_op_start(struct nproxy_net *net, struct one_op *o, bool send,
				       uint8_t *buf)
{
	enum nproxy_status st = nproxy_net_mr_register(net, buf, BIG_LEN, &o->mr);

	if (st)
		return st;
	nproxy_net_seam(net, &o->seam);
	o->op = (struct nproxy_net_op){ .kind = send ? NPROXY_NET_OP_SEND : NPROXY_NET_OP_RECV,
					 .peer = 1 - nproxy_net_rank(net), .len = BIG_LEN };
	o->addr = (struct nproxy_net_addr){ .mr = o->mr };
	o->fs = (struct nproxy_fifo_set){ .ops = &o->op, .n_ops = 1 };
	if (send)
		o->fs.src = &o->addr, o->fs.n_src = 1;
	else
		o->fs.dst = &o->addr, o->fs.n_dst = 1;
	o->dev = (struct nproxy_device_sems){ .sems = o->sems, .n_sems = 2 };
	return o->seam.ops->start(o->seam.engine, 0, 1, &o->fs, &o->dev);
}

static void one_op_stop(struct nproxy_net *net, struct one_op *o)
{
	o->seam.ops->stop(o->seam.engine, 0, 1);
	nproxy_net_mr_deregister(net, o->mr);
}

static enum nproxy_status barrier_1(struct nproxy_host_barrier *hb, bool arrive)
{
	enum nproxy_status st = arrive ? hb->ops->arrive(hb->ctx, 1) : NPROXY_SUCCESS;
	bool done = false;

	while (!st && !done)
		st = hb->ops->test(hb->ctx, 1, &done);
	return st;
}

static int mid_transfer_rank(uint32_t rank, void *arg)
{
	struct nproxy_net *net = open_rank(arg, rank, 2);
	uint8_t *buf = calloc(1, BIG_LEN);
	struct nproxy_host_barrier hb;
	enum nproxy_status st;
	struct one_op o;
	int bad = 0;

	if (!net || !buf)
		return 2;
	nproxy_net_host_barrier(net, &hb);
	if (rank == 0) {
		for (size_t i = 0; i < BIG_LEN; i++)
			buf[i] = ring_pattern(0, i, 3);
		/* The barrier message leaves first, then the long one. */
		st = hb.ops->arrive(hb.ctx, 1);
		if (!st)
			st = one_op_start(net, &o, true, buf);
		if (!st) {
			st = ring_drive(&o.seam, 0, 1, NULL, NULL, 20000);
			one_op_stop(net, &o);
		}
		if (!st)
			st = barrier_1(&hb, false);
	} else {
		bool idle, block_done = false, done = false;
		int64_t deadline = ring_now_ms() + 20000;

		st = one_op_start(net, &o, false, buf);
		/* Arrive once the long message has begun to land, not before. */
		while (!st && buf[0] != ring_pattern(0, 0, 3) && ring_now_ms() < deadline)
			st = o.seam.ops->progress(o.seam.engine, 0, 1, &idle, &block_done, &done);
		if (!st && buf[0] != ring_pattern(0, 0, 3)) {
			fprintf(stderr, "rank 1: the long message never began to land\n");
			st = NPROXY_TIMEOUT;
		}
		if (!st && block_done)
			fprintf(stderr, "rank 1: the whole message landed at once: this run shows nothing\n");
		if (!st)
			st = hb.ops->arrive(hb.ctx, 1);
		if (!st && !block_done)
			st = ring_drive(&o.seam, 0, 1, NULL, NULL, 20000);
		if (!st)
			one_op_stop(net, &o);
		if (!st)
			st = barrier_1(&hb, false);
		for (size_t i = 0; !st && !bad && i < BIG_LEN; i++)
			if (buf[i] != ring_pattern(0, i, 3)) {
				fprintf(stderr, "rank 1: byte %zu is %u, want %u\n", i, buf[i],
					ring_pattern(0, i, 3));
				bad = 1;
			}
	}
	if (st) {
		fprintf(stderr, "rank %u: %s (%s)\n", rank, nproxy_status_str(st),
			nproxy_net_strerror(net));
		bad = 1;
	}
	nproxy_net_close(net);
	free(buf);
	return bad;
}

TEST(a_barrier_message_met_mid_transfer_loses_nothing_on_rxd)
{
	struct ahead_job job = { .provider = "udp;ofi_rxd" };

	RING_ASSERT_RANKS_OK(2, mid_transfer_rank, &job, job.root, 60000);
}

TEST_HARNESS_MAIN
