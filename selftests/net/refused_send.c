// SPDX-License-Identifier: GPL-2.0
/*
 * A send the provider refuses for good (-FI_EAGAIN: ofi_rxm reconnecting
 * to a ring's next rank after it died) must not keep the block's receives
 * from being posted: each receive's no-progress deadline is what ends the
 * block when its peer stops sending.  The refused send's own deadline is
 * the open's for a peer this rank only sends to (it never heard from it),
 * far longer than the ops' timeout.
 *
 * Three ranks over shm run a ring all-gather (rank 0 hears from rank 2,
 * never from rank 1), then rank 0 alone starts a block of a send to
 * rank 1 and a receive from rank 2, with its endpoint's tagged send
 * replaced by one that refuses every send to rank 1.  Ranks 1 and 2 stay
 * up and silent.  Rank 0 must fail with NPROXY_TIMEOUT naming the receive
 * from rank 2 -- not wait out the open's deadline on the refused send.
 *
 * A host barrier a caller arrives at proves every rank reached an op after
 * its open: from then on a wait on any peer, one this rank only sends to
 * among them, is on the ops' deadline.  Four ranks (a dissemination
 * barrier's rank 0 receives from ranks 3 and 2, never from rank 1) pass
 * host barrier 1, then rank 0's block holds only the send to rank 1, which
 * is refused: it must fail naming the refused send within the ops' deadline.
 */
#include "kselftest_harness.h"
/* Multi-process tests on a shared 2-CPU box: each test bounds its ranks
 * itself (ring_fork_ranks); the harness's 30 s default is too tight. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120
#include <sys/mman.h>
#include "ring_common.h"
#include "net/net_internal.h"

#define OPS_TIMEOUT_MS	1000
#define OPEN_LIMIT_MS	60000	/* the refused send's deadline (rank 1 never heard) */
#define DRIVE_LIMIT_MS	15000	/* the test's backstop: well under OPEN_LIMIT_MS */

/* Exit codes of rank 0. */
#define R0_OK		0
#define R0_NO_REFUSAL	10	/* the spy never refused: the case was not run */
#define R0_WRONG_ERROR	11	/* failed, but not on the receive's deadline */

struct refuse_job {
	char root[64];
	uint32_t n;			/* 3: ring first; 4: host barrier first */
	volatile int *rank0_done;	/* shared: rank 0 finished, the others may close */
};

static struct fi_ops_tagged spy_ops, *provider_ops;
static fi_addr_t refused_dest;
static unsigned long refused;

static ssize_t refusing_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			     fi_addr_t dest, uint64_t tag, void *context)
{
	if (dest == refused_dest) {
		refused++;
		return -FI_EAGAIN;
	}
	return provider_ops->send(ep, buf, len, desc, dest, tag, context);
}

static void refuse_sends_to(struct nproxy_net *net, uint32_t peer)
{
	refused_dest = net->peers[peer];
	provider_ops = net->ep->tagged;
	spy_ops = *provider_ops;
	spy_ops.send = refusing_send;
	net->ep->tagged = &spy_ops;
}

static int rank0_block(struct nproxy_net *net, bool send_only)
{
	static uint8_t buf[2][256];
	struct nproxy_net_op ops[2] = {
		{ .kind = NPROXY_NET_OP_SEND, .peer = 1, .addr_idx = 0, .len = 64 },
		{ .kind = NPROXY_NET_OP_RECV, .peer = 2, .addr_idx = 1, .len = 64 },
	};
	struct nproxy_net_addr addrs[2];
	struct nproxy_fifo_set fs = { .ops = ops, .n_ops = send_only ? 1 : 2, .src = addrs, .n_src = 2,
				      .dst = addrs, .n_dst = 2 };
	struct nproxy_seam seam;
	enum nproxy_status st;
	const char *why;
	uint32_t mr;

	if (nproxy_net_mr_register(net, buf, sizeof(buf), &mr))
		return 1;
	addrs[0] = (struct nproxy_net_addr){ .mr = mr, .offset = 0 };
	addrs[1] = (struct nproxy_net_addr){ .mr = mr, .offset = sizeof(buf[0]) };
	refuse_sends_to(net, 1);
	nproxy_net_seam(net, &seam);
	st = seam.ops->start(seam.engine, 0, 2, &fs, NULL);
	if (!st)
		st = ring_drive(&seam, 0, 2, NULL, NULL, DRIVE_LIMIT_MS);
	why = nproxy_net_strerror(net);
	fprintf(stderr, "rank 0: %s: %s (%lu sends refused)\n", nproxy_status_str(st), why,
		refused);
	seam.ops->stop(seam.engine, 0, 2);
	nproxy_net_mr_deregister(net, mr);
	if (!refused)
		return R0_NO_REFUSAL;
	if (send_only)
		return st == NPROXY_TIMEOUT && strstr(why, "send to rank 1") &&
		       strstr(why, "-FI_EAGAIN") && strstr(why, "host ") ? R0_OK : R0_WRONG_ERROR;
	return st == NPROXY_TIMEOUT && strstr(why, "recv from rank 2") &&
	       strstr(why, "made no progress") && strstr(why, "host ") ? R0_OK : R0_WRONG_ERROR;
}

/* Host barrier 1 (the open's is 0), bounded by the engine's deadlines. */
static enum nproxy_status host_barrier(struct nproxy_net *net)
{
	struct nproxy_host_barrier hb;
	enum nproxy_status st;
	bool done = false;

	nproxy_net_host_barrier(net, &hb);
	st = hb.ops->arrive(hb.ctx, 1);
	while (!st && !done)
		st = hb.ops->test(hb.ctx, 1, &done);
	return st;
}

static int refuse_rank(uint32_t rank, void *arg)
{
	struct refuse_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = job->n, .comm_id = 5,
				     .timeout_ms = OPS_TIMEOUT_MS,
				     .rdzv_timeout_ms = OPEN_LIMIT_MS, .root = job->root,
				     .provider = "shm" };
	struct nproxy_net *net;
	int rc = 0;

	if (nproxy_net_open(&o, &net))
		return 2;
	/* Every rank at its first op; rank 0 has heard from rank 2 (its left in
	 * the ring of 3; the barrier's round 1 in 4), never from rank 1. */
	if (job->n == 3 ? ring_allgather(net, 4096, 1, 0, OPS_TIMEOUT_MS) != 0 :
	    host_barrier(net) != NPROXY_SUCCESS) {
		rc = 3;
	} else if (rank == 0) {
		rc = rank0_block(net, job->n == 4);
	} else {
		/* Up and silent until rank 0 is through (bounded). */
		for (int64_t end = ring_now_ms() + DRIVE_LIMIT_MS + 5000;
		     !*job->rank0_done && ring_now_ms() < end;)
			usleep(10000);
	}
	if (rank == 0)
		*job->rank0_done = 1;
	nproxy_net_close(net);
	return rc;
}

static void run_refused(struct __test_metadata *_metadata, uint32_t n)
{
	volatile int *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct refuse_job job = { .n = n, .rank0_done = shared };
	int exits[4];

	ASSERT_NE(MAP_FAILED, (void *)shared);
	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", ring_free_port());
	ring_fork_ranks(n, refuse_rank, &job, DRIVE_LIMIT_MS + 20000, exits);
	EXPECT_EQ(R0_OK, exits[0]) TH_LOG("rank 0 exit %d (%d: never refused, %d: not the expected deadline)",
					   exits[0], R0_NO_REFUSAL, R0_WRONG_ERROR);
	for (uint32_t r = 1; r < n; r++) {
		EXPECT_EQ(0, exits[r]) TH_LOG("rank %u exit %d", r, exits[r]);
	}
	munmap((void *)shared, 4096);
}

TEST(refused_send_does_not_hold_back_receives) { run_refused(_metadata, 3); }
TEST(after_a_host_barrier_a_send_only_peer_is_on_the_ops_deadline) { run_refused(_metadata, 4); }

TEST_HARNESS_MAIN
