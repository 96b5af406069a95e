// SPDX-License-Identifier: GPL-2.0
/*
 * net_pingpong: one-way latency and bandwidth of one send/recv pair through
 * nproxy's libfabric engine, measured like fi_pingpong (fabtests) so the
 * two can be compared in one run (bench/net_run.sh):
 *   usec/xfer = time / (2 * iters),  MB/sec = 2 * iters * size / time / 1e6.
 *
 * One block of 2*iters ops per rank; each send is gated (precondition) on
 * the completion semaphore of the previous recv -- the device's "data is
 * here, forward it" -- so the ping-pong runs entirely inside the engine.
 *
 *   --mode engine  the bench thread drives start/progress/stop itself
 *   --mode proxy   the full path: a comm on the shared proxy driver, a
 *                  network task, the proxy worker thread driving the seam,
 *                  completion semaphores in a memfd handshake region, the
 *                  trigger gate (the bench fires it right after enqueue);
 *                  timed from enqueue to the network task's DONE status
 *
 * Two ranks are forked; the rendezvous runs on 127.0.0.1.  FI_PROVIDER
 * picks the provider.  Prints "size usec_per_xfer MB_per_sec" per size.
 *
 *   net_pingpong [--mode engine|proxy] [--sizes 64,4096,...] [--iters N] [--budget-mib M]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/handshake.h>
#include <nproxy/net.h>
#include <nproxy/proxy.h>
#include "nproxy_test.h"

struct pp_result {
	double usec;
	double mbps;
	int ok;
};

static double now_s(void)
{
	return (double)nproxy_test_now_ns() / 1e9;
}

/* Bytes per direction per size (--budget-mib): 512 MiB, less on slow providers. */
static uint64_t budget = 512ull << 20;

static uint32_t iters_for(size_t size, uint32_t base)
{
	uint64_t n = budget / (size ? size : 1);

	if (n > base)
		n = base;
	return n < 20 ? 20 : (uint32_t)n;
}

/* The FIFO: rank 0 sends first; every later send waits for the previous recv. */
static void build_ops(struct nproxy_net_op *ops, uint32_t rank, uint32_t iters, uint32_t len)
{
	uint32_t peer = 1 - rank, k = 0;

	for (uint32_t i = 0; i < iters; i++) {
		struct nproxy_net_op send = {
			.kind = NPROXY_NET_OP_SEND, .peer = peer, .addr_idx = 0, .len = len,
			.flags = NPROXY_NET_OP_F_PRECOND, .pre_sem = 0,
			.pre_value = rank == 0 ? i : i + 1 };
		struct nproxy_net_op recv = {
			.kind = NPROXY_NET_OP_RECV, .peer = peer, .addr_idx = 0, .len = len,
			.flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = 0, .post_inc = 1 };

		if (rank == 0) {
			ops[k++] = send;
			ops[k++] = recv;
		} else {
			ops[k++] = recv;
			ops[k++] = send;
		}
	}
}

/* One block of the ping-pong's 2 * iters ops over buf (registered with net). */
struct pp_block {
	struct nproxy_net_op *ops;
	struct nproxy_net_addr src, dst;
	struct nproxy_fifo_set fs;
	uint32_t mr;
};

static int pp_block_init(struct pp_block *b, struct nproxy_net *net, uint32_t rank, void *buf,
			 size_t size, uint32_t iters)
{
	*b = (struct pp_block){ .ops = calloc(2 * iters, sizeof(*b->ops)) };
	if (!b->ops || nproxy_net_mr_register(net, buf, size, &b->mr)) {
		free(b->ops);
		return -1;
	}
	b->src.mr = b->dst.mr = b->mr;
	b->fs = (struct nproxy_fifo_set){ .ops = b->ops, .n_ops = 2 * iters, .src = &b->src,
					  .n_src = 1, .dst = &b->dst, .n_dst = 1 };
	build_ops(b->ops, rank, iters, (uint32_t)size);
	return 0;
}

/* Free b; -1 (saying why) when st failed, else 0. */
static int pp_block_done(struct pp_block *b, struct nproxy_net *net, uint32_t rank,
			 const char *path, enum nproxy_status st)
{
	nproxy_net_mr_deregister(net, b->mr);
	free(b->ops);
	if (st)
		fprintf(stderr, "rank %u: %s%s: %s\n", rank, path, nproxy_status_str(st),
			nproxy_net_strerror(net));
	return st ? -1 : 0;
}

static int run_engine(struct nproxy_net *net, uint32_t rank, void *buf, size_t size,
		      uint32_t iters, uint32_t bb, double *secs)
{
	uint64_t sem = 0;
	struct nproxy_device_sems dev = { .sems = &sem, .n_sems = 1 };
	struct nproxy_seam seam;
	bool idle, bd = false, done;
	enum nproxy_status st;
	struct pp_block b;
	double t0;

	if (pp_block_init(&b, net, rank, buf, size, iters))
		return -1;
	nproxy_net_seam(net, &seam);
	t0 = now_s();
	st = seam.ops->start(seam.engine, 0, bb, &b.fs, &dev);
	while (!st && !bd) {
		st = seam.ops->progress(seam.engine, 0, bb, &idle, &bd, &done);
		if (idle)
			sched_yield();	/* the proxy worker's default idle policy */
	}
	*secs = now_s() - t0;
	seam.ops->stop(seam.engine, 0, bb);
	return pp_block_done(&b, net, rank, "", st);
}

struct proxy_ctx {
	struct nproxy_hs *hs;
	struct nproxy_comm *comm;
};

static int run_proxy(struct proxy_ctx *px, struct nproxy_net *net, uint32_t rank, void *buf,
		     size_t size, uint32_t iters, double *secs)
{
	volatile uint64_t *sem = nproxy_hs_sem(px->hs, 0);
	struct nproxy_cc_op op = { .size = sizeof(op), .streams_n = 1 };
	const struct nproxy_prog_step fire = { .op = NPROXY_STEP_WRITE_TRIGGER, .value = 1 };
	struct nproxy_prog_result res;
	enum nproxy_status st;
	struct pp_block b;
	uint64_t ctx;
	double t0;

	if (pp_block_init(&b, net, rank, buf, size, iters))
		return -1;
	/* Semaphores only grow: rebase this run's thresholds on the current value. */
	for (uint32_t i = 0; i < 2 * iters; i++)
		if (b.ops[i].flags & NPROXY_NET_OP_F_PRECOND)
			b.ops[i].pre_value += nproxy_sem_load(sem);
	op.streams[0] = (struct nproxy_stream_blocks){ .blocks = &b.fs, .n_blocks = 1 };
	t0 = now_s();
	st = nproxy_enq_proxy_tasks(px->comm, &op, 0, &ctx);
	/* The device reaches the network stage (a program, so that it announces it). */
	if (!st)
		st = nproxy_hs_submit(px->hs, &fire, 1, NULL);
	if (!st)
		st = nproxy_wait_status(px->comm, ctx, NPROXY_TASK_NETWORK, 120000);
	*secs = now_s() - t0;
	if (!st)
		st = nproxy_wait_status(px->comm, ctx, NPROXY_TASK_BARRIER, 120000);
	if (!st)
		st = nproxy_hs_wait(px->hs, 10000, &res);
	return pp_block_done(&b, net, rank, "proxy path: ", st);
}

static int rank_main(uint32_t rank, const char *root, bool proxy, const size_t *sizes,
		     int n_sizes, uint32_t base_iters, struct pp_result *res)
{
	struct nproxy_net_opts no = { .size = sizeof(no), .rank = rank, .n_ranks = 2, .comm_id = 1,
				      .timeout_ms = 60000, .root = root };
	struct proxy_ctx px = { 0 };
	struct nproxy_net *net;
	size_t max = 0;
	void *buf;
	int rc = 0;

	for (int i = 0; i < n_sizes; i++)
		if (sizes[i] > max)
			max = sizes[i];
	if (nproxy_net_open(&no, &net))
		return 2;
	if (proxy) {
		struct nproxy_hs_opts ho = { .size = sizeof(ho), .backend = NPROXY_HS_MEMFD,
					     .n_streams = 1, .n_sems = 1, .rank = rank };
		struct nproxy_comm_opts co = { .size = sizeof(co), .rank = rank, .n_ranks = 2,
					       .device_index = rank, .timeout_ms = 120000,
					       .flags = NPROXY_COMM_F_DEVICE_WAIT };

		if (nproxy_hs_open(&ho, &px.hs))
			return 2;
		co.hs = px.hs;
		nproxy_net_seam(net, &co.seam);
		nproxy_net_host_barrier(net, &co.barrier);
		if (nproxy_comm_open(&co, &px.comm))
			return 2;
	}
	/* FI_MR_ALLOCATED: real, touched memory. */
	buf = mmap(NULL, max ? max : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return 2;
	memset(buf, 0x42 + (int)rank, max ? max : 1);
	for (int i = 0; i < n_sizes && !rc; i++) {
		uint32_t iters = iters_for(sizes[i], base_iters);
		double secs = 0, warm;

		/* Warm-up: connections, registration, page faults. */
		rc = proxy ? run_proxy(&px, net, rank, buf, sizes[i], 10, &warm) :
			     run_engine(net, rank, buf, sizes[i], 10, 2 * (uint32_t)i, &warm);
		if (!rc)
			rc = proxy ? run_proxy(&px, net, rank, buf, sizes[i], iters, &secs) :
				     run_engine(net, rank, buf, sizes[i], iters, 2 * (uint32_t)i + 1,
						&secs);
		if (!rc && rank == 0) {
			res[i].usec = secs * 1e6 / (2.0 * iters);
			res[i].mbps = 2.0 * iters * sizes[i] / secs / 1e6;
			res[i].ok = 1;
		}
	}
	munmap(buf, max ? max : 1);
	if (proxy) {
		nproxy_comm_close(px.comm);
		nproxy_hs_close(px.hs);
	}
	nproxy_net_close(net);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	size_t sizes[32] = { 64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20 };
	int n_sizes = 9, status, rc = 0;
	uint32_t base_iters = 2000;
	bool proxy = false;
	struct pp_result *res;
	char root[64];
	pid_t pids[2];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--mode")) {
			proxy = !strcmp(argv[i + 1], "proxy");
		} else if (!strcmp(argv[i], "--iters")) {
			base_iters = (uint32_t)atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "--budget-mib")) {
			budget = strtoull(argv[i + 1], NULL, 0) << 20;
			if (!budget)
				budget = 1;
		} else if (!strcmp(argv[i], "--sizes")) {
			n_sizes = 0;
			for (char *t = strtok(argv[i + 1], ","); t && n_sizes < 32; t = strtok(NULL, ","))
				sizes[n_sizes++] = strtoull(t, NULL, 0);
		} else {
			fprintf(stderr, "usage: %s [--mode engine|proxy] [--sizes a,b] [--iters N] [--budget-mib M]\n",
				argv[0]);
			return 2;
		}
	}
	res = mmap(NULL, sizeof(*res) * 32, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		   -1, 0);
	if (res == MAP_FAILED)
		return 2;
	memset(res, 0, sizeof(*res) * 32);
	snprintf(root, sizeof(root), "127.0.0.1:%d", nproxy_test_free_port());
	for (uint32_t r = 0; r < 2; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			alarm(600);
			_exit(rank_main(r, root, proxy, sizes, n_sizes, base_iters, res));
		}
	}
	for (int r = 0; r < 2; r++) {
		waitpid(pids[r], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			rc = 1;
	}
	printf("# net_pingpong mode=%s provider=%s\n", proxy ? "proxy" : "engine",
	       getenv("FI_PROVIDER") ? getenv("FI_PROVIDER") : "(auto)");
	printf("%-10s %12s %12s\n", "bytes", "usec/xfer", "MB/sec");
	for (int i = 0; i < n_sizes; i++)
		if (res[i].ok)
			printf("%-10zu %12.2f %12.2f\n", sizes[i], res[i].usec, res[i].mbps);
	return rc;
}
