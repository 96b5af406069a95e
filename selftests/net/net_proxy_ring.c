// SPDX-License-Identifier: GPL-2.0
/*
 * The full path: proxy worker -> network task -> op FIFO -> libfabric ->
 * completion semaphores, with the trigger gate held until the emulated
 * device fires.  Each forked rank opens a memfd handshake region, a
 * libfabric engine and a comm on the shared proxy driver, enqueues one CC
 * op, and submits a device program: WAIT_SEM on a "go" semaphore, then
 * WRITE_TRIGGER, then WAIT_SEM on the completion semaphores the engine
 * increments.  The test checks that nothing moved while the gate was
 * closed, then posts "go": every byte the provider writes comes after the
 * scan (a chain of release/acquire atomics that TSan sees too).
 *
 * All-gather: one block on stream 0.  All-reduce: reduce-scatter and
 * all-gather as blocks 0 and 1 of one stream, so the network task switches
 * blocks (stop of 0, progress of 1); the reductions between a recv and the
 * next send are done by the test's main thread acting as the device's
 * compute engine (the emulator only runs trigger/semaphore programs).
 */
#include <nproxy/proxy.h>
#include "kselftest_harness.h"
/* Multi-process tests on a shared 2-CPU box: each test bounds its ranks
 * itself (ring_fork_ranks); the harness's 30 s default is too tight. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 240
#include "ring_common.h"

/* How long a broken gate gets to show itself before the scan. */
#define GATE_HOLD_US	(50 * 1000)

enum { SEM_RECV = 0, SEM_REDUCED = 1, SEM_AG_RECV = 2, SEM_SENT = 3, SEM_GO = 4, N_SEMS = 5 };
_Static_assert(SEM_RECV == 0 && SEM_REDUCED == 1 && SEM_AG_RECV == 2,
	       "the semaphores struct ring_ar_plan's ops post and wait on");

struct fp_job {
	const char *provider;
	uint32_t n;
	char root[64];
	bool allreduce;
	size_t size;
};

struct fp_rank {
	uint32_t r, n;
	struct nproxy_hs *hs;
	struct nproxy_net *net;
	struct nproxy_comm *comm;
	volatile uint64_t *sems[N_SEMS];
};

static int fp_setup(struct fp_rank *fr, const struct fp_job *job, uint32_t rank)
{
	struct nproxy_hs_opts ho = { .size = sizeof(ho), .backend = NPROXY_HS_MEMFD, .n_streams = 1,
				     .n_sems = N_SEMS, .rank = rank };
	struct nproxy_net_opts no = { .size = sizeof(no), .rank = rank, .n_ranks = job->n,
				      .comm_id = 11, .timeout_ms = 10000, .root = job->root };
	struct nproxy_comm_opts co = { .size = sizeof(co), .rank = rank, .n_ranks = job->n,
				       .device_index = rank, .flags = NPROXY_COMM_F_DEVICE_WAIT,
				       .timeout_ms = 30000 };
	enum nproxy_status st;

	fr->r = rank;
	fr->n = job->n;
	setenv("FI_PROVIDER", job->provider, 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("FI_UDP_IFACE", "lo", 1);
	if ((st = nproxy_hs_open(&ho, &fr->hs)) ||
	    (st = nproxy_net_open(&no, &fr->net))) {
		fprintf(stderr, "rank %u: setup: %s\n", rank, nproxy_status_str(st));
		return -1;
	}
	for (int i = 0; i < N_SEMS; i++)
		fr->sems[i] = nproxy_hs_sem(fr->hs, (uint32_t)i);
	co.hs = fr->hs;
	nproxy_net_seam(fr->net, &co.seam);
	nproxy_net_host_barrier(fr->net, &co.barrier);
	if ((st = nproxy_comm_open(&co, &fr->comm))) {
		fprintf(stderr, "rank %u: comm_init: %s\n", rank, nproxy_status_str(st));
		return -1;
	}
	return 0;
}

static void fp_teardown(struct fp_rank *fr)
{
	nproxy_comm_close(fr->comm);
	nproxy_net_close(fr->net);
	nproxy_hs_close(fr->hs);
}

/* Start the emulated device: fire the trigger once the test says go, then wait for `want`. */
static int fp_device(struct fp_rank *fr, const uint32_t *sem_idx, const uint64_t *want, int n_waits)
{
	struct nproxy_prog_step prog[8] = {
		{ .op = NPROXY_STEP_WAIT_SEM, .index = SEM_GO, .value = 1,
		  .timeout_ns = 60ull * 1000000000 },
		{ .op = NPROXY_STEP_WRITE_TRIGGER, .index = 0, .value = 1 },
	};
	uint32_t n_steps = 2;

	for (int i = 0; i < n_waits; i++)
		prog[n_steps++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM,
			.index = sem_idx[i], .value = want[i], .timeout_ns = 20ull * 1000000000 };
	return nproxy_hs_submit(fr->hs, prog, n_steps, NULL) ? -1 : 0;
}

/* While the device has not fired, nothing may move. */
static bool fp_triggered(struct fp_rank *fr)
{
	return nproxy_trigger_load(nproxy_hs_trigger(fr->hs, 0)) != NPROXY_TRIGGER_SENTINEL;
}

/*
 * While the device has not fired, nothing may move: no completion
 * semaphore, no byte of the receive buffer, no DONE.  The device waits for
 * SEM_GO, so the gate is closed for the whole check; then "go" is posted
 * (whatever the verdict, so that the program and the task can finish).
 */
static int fp_check_gate(struct fp_rank *fr, uint64_t ctx, const uint8_t *buf, size_t len,
			 uint8_t untouched)
{
	enum nproxy_status task_st;
	bool done = true, moved = false, fired;
	int sem = -1;
	size_t byte = 0;

	usleep(GATE_HOLD_US);
	for (int i = 0; i < SEM_GO && sem < 0; i++)
		if (nproxy_sem_load(fr->sems[i]))
			sem = i;
	for (size_t i = 0; i < len && !moved; i++)
		if (buf[i] != untouched)
			moved = true, byte = i;
	if (nproxy_check_status(fr->comm, ctx, NPROXY_TASK_NETWORK, &done, &task_st))
		done = true;
	fired = fp_triggered(fr);
	nproxy_sem_add(fr->sems[SEM_GO], 1);
	if (sem >= 0 || moved || done || fired) {
		fprintf(stderr, "rank %u: before the trigger: sem %d moved, byte %zu moved %d, task done %d, trigger fired %d\n",
			fr->r, sem, byte, moved, done, fired);
		return -1;
	}
	return 0;
}

static int fp_finish(struct fp_rank *fr, uint64_t ctx)
{
	struct nproxy_prog_result res;
	enum nproxy_status st;

	st = nproxy_wait_status(fr->comm, ctx, NPROXY_TASK_NETWORK, 30000);
	if (st) {
		fprintf(stderr, "rank %u: network task: %s (%s)\n", fr->r, nproxy_status_str(st),
			nproxy_net_strerror(fr->net));
		return -1;
	}
	st = nproxy_wait_status(fr->comm, ctx, NPROXY_TASK_BARRIER, 30000);
	if (st) {
		fprintf(stderr, "rank %u: barrier task: %s\n", fr->r, nproxy_status_str(st));
		return -1;
	}
	st = nproxy_hs_wait(fr->hs, 30000, &res);
	if (st || res.state != NPROXY_PROG_DONE) {
		fprintf(stderr, "rank %u: device program: %s, state %u step %u\n", fr->r,
			nproxy_status_str(st), res.state, res.failed_step);
		return -1;
	}
	return 0;
}

static int fp_allgather(struct fp_rank *fr, size_t size)
{
	uint32_t r = fr->r, n = fr->n, right = (r + 1) % n, left = (r + n - 1) % n;
	uint8_t *buf = malloc(size * n);
	struct nproxy_net_op *ops = calloc(2 * n, sizeof(*ops));
	struct nproxy_net_addr *addrs = calloc(n, sizeof(*addrs));
	struct nproxy_fifo_set fs;
	struct nproxy_cc_op op = { .size = sizeof(op), .streams_n = 1 };
	uint32_t mr, n_ops = 0, widx[2] = { SEM_RECV, SEM_SENT };
	uint64_t ctx, want[2] = { n - 1, n - 1 };
	int bad = 0;

	memset(buf, 0xee, size * n);
	for (size_t i = 0; i < size; i++)
		buf[r * size + i] = ring_pattern(r, i, 5);
	if (nproxy_net_mr_register(fr->net, buf, size * n, &mr))
		return -1;
	for (uint32_t c = 0; c < n; c++)
		addrs[c] = (struct nproxy_net_addr){ .mr = mr, .offset = c * size };
	for (uint32_t s = 0; s + 1 < n; s++) {
		ops[n_ops++] = (struct nproxy_net_op){ .kind = NPROXY_NET_OP_SEND, .peer = right,
			.addr_idx = (r + n - s) % n, .len = (uint32_t)size,
			.flags = NPROXY_NET_OP_F_COMPLETE | (s ? NPROXY_NET_OP_F_PRECOND : 0),
			.pre_sem = SEM_RECV, .pre_value = s, .post_sem = SEM_SENT, .post_inc = 1 };
		ops[n_ops++] = (struct nproxy_net_op){ .kind = NPROXY_NET_OP_RECV, .peer = left,
			.addr_idx = (r + 2 * n - s - 1) % n, .len = (uint32_t)size,
			.flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = SEM_RECV, .post_inc = 1 };
	}
	fs = (struct nproxy_fifo_set){ .ops = ops, .n_ops = n_ops, .src = addrs, .n_src = n,
				       .dst = addrs, .n_dst = n };
	op.streams[0] = (struct nproxy_stream_blocks){ .blocks = &fs, .n_blocks = 1 };
	if (fp_device(fr, widx, want, 2) || nproxy_enq_proxy_tasks(fr->comm, &op, 1, &ctx))
		return -1;
	/* The left neighbour's chunk cannot have arrived: our recv is gated. */
	bad = fp_check_gate(fr, ctx, buf + left * size, size, 0xee);
	if (fp_finish(fr, ctx))
		bad = -1;
	for (uint32_t c = 0; !bad && c < n; c++)
		for (size_t i = 0; i < size; i++)
			if (buf[c * size + i] != ring_pattern(c, i, 5)) {
				fprintf(stderr, "rank %u: chunk %u byte %zu wrong\n", r, c, i);
				bad = -1;
				break;
			}
	nproxy_net_mr_deregister(fr->net, mr);
	free(buf);
	free(ops);
	free(addrs);
	return bad;
}

static int fp_allreduce(struct fp_rank *fr, size_t size)
{
	uint32_t r = fr->r, n = fr->n, reduced = 0, widx[1] = { SEM_AG_RECV };
	struct nproxy_cc_op op = { .size = sizeof(op), .streams_n = 1 };
	uint64_t ctx, want[1] = { n - 1 };
	struct ring_ar_plan p;
	int bad = 0;

	if (ring_ar_plan_init(&p, fr->net, size, 9)) {
		ring_ar_plan_free(&p, fr->net);
		return -1;
	}
	op.streams[0] = (struct nproxy_stream_blocks){ .blocks = p.fs, .n_blocks = 2 };
	if (fp_device(fr, widx, want, 1) || nproxy_enq_proxy_tasks(fr->comm, &op, 1, &ctx)) {
		ring_ar_plan_free(&p, fr->net);
		return -1;
	}
	bad = fp_check_gate(fr, ctx, p.tmp, size * n, 0);
	/* The compute engine: reduce each arrived chunk, then release the next send. */
	for (int64_t deadline = ring_now_ms() + 30000; !bad && reduced + 1 < n;) {
		if (reduced < nproxy_sem_load(fr->sems[SEM_RECV])) {
			uint32_t c = (r + 2 * n - reduced - 1) % n;
			size_t off = chunk_off(size, n, c), len = chunk_len(size, n, c);

			for (size_t i = 0; i < len; i++)
				p.acc[off + i] += p.tmp[reduced * size + off + i];
			reduced++;
			nproxy_sem_add(fr->sems[SEM_REDUCED], 1);
		} else if (ring_now_ms() > deadline) {
			fprintf(stderr, "rank %u: reduce-scatter stuck at step %u\n", r, reduced);
			bad = -1;
		} else {
			usleep(50);
		}
	}
	if (fp_finish(fr, ctx))
		bad = -1;
	if (!bad)
		bad = ring_ar_check(&p, 9);
	ring_ar_plan_free(&p, fr->net);
	return bad;
}

static int fp_rank_main(uint32_t rank, void *arg)
{
	struct fp_job *job = arg;
	struct fp_rank fr = { 0 };
	int bad;

	if (fp_setup(&fr, job, rank))
		return 2;
	bad = job->allreduce ? fp_allreduce(&fr, job->size) : fp_allgather(&fr, job->size);
	fp_teardown(&fr);
	return bad ? 1 : 0;
}

static void run_fp(struct __test_metadata *_metadata, const char *provider, uint32_t n,
		   bool allreduce, size_t size)
{
	struct fp_job job = { .provider = provider, .n = n, .allreduce = allreduce, .size = size };
	const char *only = getenv("NET_TEST_ONLY");
	int exits[8];

	if (only && !strstr(_metadata->name, only))
		SKIP(return, "NET_TEST_ONLY=%s", only);
	snprintf(job.root, sizeof(job.root), "127.0.0.1:%d", ring_free_port());
	ASSERT_EQ((int)n, ring_fork_ranks(n, fp_rank_main, &job, 200000, exits)) {
		for (uint32_t r = 0; r < n; r++)
			TH_LOG("rank %u exit %d", r, exits[r]);
	}
}

TEST(allgather_shm_2_4k) { run_fp(_metadata, "shm", 2, false, 4096); }
TEST(allgather_shm_4_1m) { run_fp(_metadata, "shm", 4, false, 1 << 20); }
TEST(allgather_shm_4_1b) { run_fp(_metadata, "shm", 4, false, 1); }
TEST(allgather_tcp_2_8m) { run_fp(_metadata, "tcp;ofi_rxm", 2, false, 8 << 20); }
TEST(allgather_tcp_4_odd) { run_fp(_metadata, "tcp;ofi_rxm", 4, false, 65537); }
TEST(allreduce_shm_4_1m_odd) { run_fp(_metadata, "shm", 4, true, (1 << 20) + 3); }
TEST(allreduce_shm_2_8m) { run_fp(_metadata, "shm", 2, true, 8 << 20); }
TEST(allreduce_tcp_4_4k) { run_fp(_metadata, "tcp;ofi_rxm", 4, true, 4096); }
TEST(allreduce_tcp_2_1b) { run_fp(_metadata, "tcp;ofi_rxm", 2, true, 1); }
TEST(allgather_rxd_4_odd) { run_fp(_metadata, "udp;ofi_rxd", 4, false, 65537); }
TEST(allreduce_rxd_2_1m_odd) { run_fp(_metadata, "udp;ofi_rxd", 2, true, (1 << 20) + 3); }

TEST_HARNESS_MAIN
