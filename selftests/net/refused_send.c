// SPDX-License-Identifier: GPL-2.0
/*
 * A send the provider refuses for good (-FI_EAGAIN: ofi_rxm reconnecting
 * to a ring's next rank after it died) ends the block within the ops'
 * deadline, naming the refused peer, once that peer is known past its
 * open's setup -- not at the open's deadline, which a wait on a peer this
 * rank never received from gets.  Rank 0's endpoint gets a tagged send
 * that refuses every send to one peer; the other ranks stay up and silent.
 *
 * Ring first: three ranks over shm run a ring all-gather (rank 0 sends to
 * rank 1, never receives from it), then rank 0 alone starts a block of a
 * send to rank 1 and a receive from rank 2.  A completed send says rank
 * 1's endpoint took rank 0's messages after its open.
 *
 * Barrier first: a host barrier a caller arrives at proves every rank
 * reached an op after its open.  In a dissemination barrier of eight
 * ranks rank 0 sends to ranks 1, 2, 4 and receives from 7, 6, 4: rank 3
 * is neither heard nor reached.  After host barrier 1, rank 0's block of
 * one send to rank 3 is refused.
 *
 * Refused, not stuck: libfabric 1.17's shm takes one large (SAR) send per
 * peer at a time and refuses the next until the first one's completion is
 * read.  Two ranks whose blocks each start with two such sends to the
 * other must still post their receives: if a refusal ended the posting
 * pass, neither rank's first send could complete (the peer never posted
 * its receive), and both would wait out the open's deadline.
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
#define OPEN_LIMIT_MS	60000	/* a wait on a peer never heard from */
#define DRIVE_LIMIT_MS	15000	/* the test's backstop: well under OPEN_LIMIT_MS */

/* Exit codes of rank 0. */
#define R0_OK		0
#define R0_NO_REFUSAL	10	/* the spy never refused: the case was not run */
#define R0_WRONG_ERROR	11	/* failed, but not naming the refused send */

struct refuse_job {
	char root[64];
	uint32_t n;			/* 3: ring first; 8: host barrier first */
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

/* Rank 0's block: a send to `to` (refused), then a receive from rank 2 unless send_only. */
static int rank0_block(struct nproxy_net *net, uint32_t to, bool send_only)
{
	static uint8_t buf[2][256];
	struct nproxy_net_op ops[2] = {
		{ .kind = NPROXY_NET_OP_SEND, .peer = to, .addr_idx = 0, .len = 64 },
		{ .kind = NPROXY_NET_OP_RECV, .peer = 2, .addr_idx = 1, .len = 64 },
	};
	char want[32];
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
	refuse_sends_to(net, to);
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
	snprintf(want, sizeof(want), "send to rank %u", to);
	return st == NPROXY_TIMEOUT && strstr(why, want) && strstr(why, "-FI_EAGAIN") &&
	       strstr(why, "host ") ? R0_OK : R0_WRONG_ERROR;
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
	/* Every rank at its first op (top of the file). */
	if (job->n == 3 ? ring_allgather(net, 4096, 1, 0, OPS_TIMEOUT_MS) != 0 :
	    host_barrier(net) != NPROXY_SUCCESS) {
		rc = 3;
	} else if (rank == 0) {
		rc = job->n == 3 ? rank0_block(net, 1, false) : rank0_block(net, 3, true);
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
	int exits[8];

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

/* Exit codes of a rank of the two-sends block. */
#define PAIR_OK		0
#define PAIR_OPEN	20
#define PAIR_DRIVE	21	/* the block did not finish */
#define PAIR_DATA	22	/* it finished with wrong bytes */
#define PAIR_NO_REFUSAL	23	/* shm never refused: the case was not run */

#define PAIR_LEN	(1u << 20)	/* well above shm's inline and inject sizes: SAR */

static unsigned long provider_refused;

static ssize_t counting_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			     fi_addr_t dest, uint64_t tag, void *context)
{
	ssize_t rc = provider_ops->send(ep, buf, len, desc, dest, tag, context);

	if (rc == -FI_EAGAIN)
		provider_refused++;
	return rc;
}

static int two_sends_rank(uint32_t rank, void *arg)
{
	struct refuse_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = 2, .comm_id = 6,
				     .timeout_ms = 5000, .rdzv_timeout_ms = OPEN_LIMIT_MS,
				     .root = job->root, .provider = "shm" };
	uint32_t peer = 1 - rank, mr;
	struct nproxy_net_op ops[4] = {
		{ .kind = NPROXY_NET_OP_SEND, .peer = peer, .addr_idx = 0, .len = PAIR_LEN },
		{ .kind = NPROXY_NET_OP_SEND, .peer = peer, .addr_idx = 1, .len = PAIR_LEN },
		{ .kind = NPROXY_NET_OP_RECV, .peer = peer, .addr_idx = 2, .len = PAIR_LEN },
		{ .kind = NPROXY_NET_OP_RECV, .peer = peer, .addr_idx = 3, .len = PAIR_LEN },
	};
	struct nproxy_net_addr addrs[4];
	struct nproxy_fifo_set fs = { .ops = ops, .n_ops = 4, .src = addrs, .n_src = 4,
				      .dst = addrs, .n_dst = 4 };
	struct nproxy_seam seam;
	struct nproxy_net *net;
	enum nproxy_status st;
	uint8_t *buf = malloc(4 * (size_t)PAIR_LEN);
	int rc = PAIR_OK;

	if (!buf || nproxy_net_open(&o, &net))
		return PAIR_OPEN;
	for (size_t i = 0; i < PAIR_LEN; i++) {
		buf[i] = ring_pattern(rank, i, 1);
		buf[PAIR_LEN + i] = ring_pattern(rank, i, 2);
	}
	memset(buf + 2 * (size_t)PAIR_LEN, 0, 2 * (size_t)PAIR_LEN);
	if (nproxy_net_mr_register(net, buf, 4 * (size_t)PAIR_LEN, &mr))
		return PAIR_OPEN;
	for (uint32_t i = 0; i < 4; i++)
		addrs[i] = (struct nproxy_net_addr){ .mr = mr, .offset = i * (uint64_t)PAIR_LEN };
	provider_ops = net->ep->tagged;
	spy_ops = *provider_ops;
	spy_ops.send = counting_send;
	net->ep->tagged = &spy_ops;
	nproxy_net_seam(net, &seam);
	st = seam.ops->start(seam.engine, 0, 1, &fs, NULL);
	if (!st)
		st = ring_drive(&seam, 0, 1, NULL, NULL, DRIVE_LIMIT_MS);
	if (st) {
		fprintf(stderr, "rank %u: %s: %s (%lu sends refused)\n", rank,
			nproxy_status_str(st), nproxy_net_strerror(net), provider_refused);
		rc = PAIR_DRIVE;
	}
	for (size_t i = 0; !rc && i < PAIR_LEN; i++)
		if (buf[2 * (size_t)PAIR_LEN + i] != ring_pattern(peer, i, 1) ||
		    buf[3 * (size_t)PAIR_LEN + i] != ring_pattern(peer, i, 2))
			rc = PAIR_DATA;
	if (!rc && !provider_refused)
		rc = PAIR_NO_REFUSAL;
	seam.ops->stop(seam.engine, 0, 1);
	nproxy_net_mr_deregister(net, mr);
	nproxy_net_close(net);
	free(buf);
	return rc;
}

TEST(a_refused_send_does_not_hold_back_the_receives)
{
	struct refuse_job job = { .n = 2 };
	int exits[2];

	/* SAR, whatever the host's CMA costs: the protocol that refuses. */
	setenv("NPROXY_SHM_CMA", "off", 1);
	unsetenv("FI_SHM_DISABLE_CMA");
	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", ring_free_port());
	ring_fork_ranks(2, two_sends_rank, &job, DRIVE_LIMIT_MS + 20000, exits);
	/* Both ranks refused, or the deadlock the test is about cannot happen. */
	if ((exits[0] == PAIR_NO_REFUSAL || exits[0] == PAIR_OK) &&
	    (exits[1] == PAIR_NO_REFUSAL || exits[1] == PAIR_OK) &&
	    (exits[0] == PAIR_NO_REFUSAL || exits[1] == PAIR_NO_REFUSAL))
		SKIP(return, "libfabric %u.%u's shm took a rank's second 1 MiB send at once (1.17 refuses it): the case was not run",
		     FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
	for (uint32_t r = 0; r < 2; r++) {
		EXPECT_EQ(PAIR_OK, exits[r]) TH_LOG("rank %u exit %d (%d: not done, %d: wrong bytes, %d: shm never refused a send, the case was not run)",
						    r, exits[r], PAIR_DRIVE, PAIR_DATA, PAIR_NO_REFUSAL);
	}
}

TEST(refused_send_to_a_reached_peer_is_on_the_ops_deadline) { run_refused(_metadata, 3); }
TEST(after_a_host_barrier_every_peer_is_on_the_ops_deadline) { run_refused(_metadata, 8); }

TEST_HARNESS_MAIN
