// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * collective: one allgather driven through the proxy, as a collective
 * library adopting libnproxy would drive it.
 *
 * Each of N ranks (processes on this host) contributes one chunk; after
 * the op every rank holds all N chunks.  The op is a ring: in step s
 * (0..N-2) a rank receives a chunk from its left neighbour and forwards
 * to its right neighbour the chunk it received in the step before (its
 * own in step 0).  What this program does, per rank:
 *
 *   1. nproxy_rank_open(): the local bus, the libfabric engine, the
 *      handshake region and the proxy comm, from one options struct;
 *   2. register the buffer with the engine;
 *   3. describe the op's network work as basic blocks, one per ring step:
 *      RECV (on completion: semaphore 1+s += 1), then SEND (not before
 *      semaphore s shows the chunk it forwards has arrived);
 *   4. start the device program: write trigger word 0 ("the op reached
 *      its network stage"), then wait for every step's semaphore;
 *   5. enqueue the op's proxy tasks (one network task, one barrier task):
 *      the proxy worker waits for the trigger, then moves the data;
 *   6. wait for both tasks' status and for the device program;
 *   7. check every chunk, close the rank.
 *
 * Build: cc collective.c $(pkg-config --cflags --libs libnproxy)
 * Run N ranks of one job, each with its rank and a job id they share:
 *   ./collective 0 2 myjob & ./collective 1 2 myjob; wait
 * FI_PROVIDER picks the libfabric provider (shm on one host) and
 * NPROXY_HANDSHAKE the region's backend (memfd without nproxy.ko).
 * Prints one line per rank and exits 0 when its data is right.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/bananaphone.h>
#include <nproxy/handshake.h>
#include <nproxy/net.h>
#include <nproxy/proxy.h>
#include <nproxy/rank.h>

#define MAX_RANKS	16
#define CHUNK_WORDS	1024		/* 4 KiB per rank */
#define TIMEOUT_MS	30000u

/* What rank r's chunk holds at word w: every rank can check every chunk. */
static uint32_t pattern(uint32_t r, size_t w)
{
	return (r + 1) * 0x9E3779B9u ^ (uint32_t)w;
}

/* The op's FIFOs: borrowed by the engine until the network task is done. */
struct ring_op {
	struct nproxy_net_op ops[2 * MAX_RANKS];
	struct nproxy_net_addr src[MAX_RANKS], dst[MAX_RANKS];
	struct nproxy_fifo_set blocks[MAX_RANKS];
};

/* Step 3: one basic block per ring step. */
static void build_ring(struct ring_op *op, uint32_t rank, uint32_t n, uint32_t mr, size_t chunk)
{
	memset(op, 0, sizeof(*op));
	for (uint32_t s = 0; s + 1 < n; s++) {
		struct nproxy_net_op *recv = &op->ops[2 * s], *send = &op->ops[2 * s + 1];
		uint32_t send_chunk = (rank + n - s) % n, recv_chunk = (rank + 2 * n - s - 1) % n;

		recv->kind = NPROXY_NET_OP_RECV;
		recv->peer = (rank + n - 1) % n;
		recv->len = (uint32_t)chunk;
		recv->flags = NPROXY_NET_OP_F_COMPLETE;	/* tell the device */
		recv->post_sem = (uint16_t)(1 + s);
		recv->post_inc = 1;
		send->kind = NPROXY_NET_OP_SEND;
		send->peer = (rank + 1) % n;
		send->len = (uint32_t)chunk;
		if (s > 0) {	/* forward only what has arrived */
			send->flags = NPROXY_NET_OP_F_PRECOND;
			send->pre_sem = (uint16_t)s;
			send->pre_value = 1;
		}
		op->src[s] = (struct nproxy_net_addr){ .mr = mr, .offset = send_chunk * chunk };
		op->dst[s] = (struct nproxy_net_addr){ .mr = mr, .offset = recv_chunk * chunk };
		op->blocks[s] = (struct nproxy_fifo_set){
			.ops = &op->ops[2 * s], .n_ops = 2,
			.src = &op->src[s], .n_src = 1, .dst = &op->dst[s], .n_dst = 1,
		};
	}
}

/* Steps 2-6 on an open rank.  Returns 0 or prints what failed. */
static int allgather(struct nproxy_rank *rk, uint32_t rank, uint32_t n, uint32_t *data)
{
	struct nproxy_net *net = nproxy_rank_net(rk);
	struct nproxy_hs *hs = nproxy_rank_hs(rk);
	struct nproxy_comm *comm = nproxy_rank_comm(rk);
	size_t chunk = CHUNK_WORDS * sizeof(uint32_t);
	struct nproxy_prog_step prog[MAX_RANKS];
	struct nproxy_cc_op cc = NPROXY_CC_OP_INIT;
	struct nproxy_prog_result result;
	static struct ring_op op;
	enum nproxy_status st;
	uint32_t mr, n_steps = 0;
	uint64_t ctx;
	int rc = 1;

	/* 2. */
	st = nproxy_net_mr_register(net, data, chunk * n, &mr);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "rank %u: register: %s\n", rank, nproxy_status_str(st));
		return 1;
	}
	/* 3. */
	build_ring(&op, rank, n, mr, chunk);
	/* 4. The trigger word is armed before the device may write it. */
	memset(prog, 0, sizeof(prog));
	prog[n_steps].op = NPROXY_STEP_WRITE_TRIGGER;
	prog[n_steps].index = 0;
	prog[n_steps++].value = 1;
	for (uint32_t s = 0; s + 1 < n; s++) {
		prog[n_steps].op = NPROXY_STEP_WAIT_SEM;
		prog[n_steps].index = 1 + s;
		prog[n_steps].value = 1;
		prog[n_steps++].timeout_ns = (uint64_t)TIMEOUT_MS * 1000000ull;
	}
	nproxy_trigger_store(nproxy_hs_trigger(hs, 0), NPROXY_TRIGGER_SENTINEL);
	st = nproxy_hs_submit(hs, prog, n_steps, NULL);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "rank %u: device program: %s\n", rank, nproxy_status_str(st));
		goto out;
	}
	/* 5. Trigger words and semaphores default to the rank's region. */
	cc.streams_n = 1;
	cc.streams[0].blocks = op.blocks;
	cc.streams[0].n_blocks = n - 1;
	st = nproxy_enq_proxy_tasks(comm, &cc, 1, &ctx);
	/* 6. Both tasks, then the device. */
	if (st == NPROXY_SUCCESS)
		st = nproxy_wait_status(comm, ctx, NPROXY_TASK_NETWORK, TIMEOUT_MS);
	if (st == NPROXY_SUCCESS)
		st = nproxy_wait_status(comm, ctx, NPROXY_TASK_BARRIER, TIMEOUT_MS);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "rank %u: proxy tasks: %s %s\n", rank, nproxy_status_str(st),
			nproxy_comm_strerror(comm));
		nproxy_hs_cancel(hs);
		nproxy_hs_wait(hs, TIMEOUT_MS, NULL);
		goto out;
	}
	st = nproxy_hs_wait(hs, TIMEOUT_MS, &result);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "rank %u: device program: %s\n", rank, nproxy_status_str(st));
		goto out;
	}
	rc = 0;
out:
	nproxy_net_mr_deregister(net, mr);
	return rc;
}

int main(int argc, char **argv)
{
	struct nproxy_rank_opts opts = NPROXY_RANK_OPTS_INIT;
	struct nproxy_rank *rk;
	enum nproxy_status st;
	uint32_t rank, n, *data;
	size_t wrong = 0;
	int rc;

	if (argc != 4 || (n = (uint32_t)atoi(argv[2])) < 1 || n > MAX_RANKS ||
	    (rank = (uint32_t)atoi(argv[1])) >= n) {
		fprintf(stderr, "usage: %s RANK NRANKS JOB_ID   (NRANKS 1..%d, all on this host)\n",
			argv[0], MAX_RANKS);
		return 2;
	}
	/* 1. Every rank on this host: local rank = rank, one bus for the job. */
	opts.rank = rank;
	opts.n_ranks = n;
	opts.local_rank = rank;
	opts.local_size = n;
	opts.job_id = argv[3];
	opts.open_timeout_ms = TIMEOUT_MS;
	st = nproxy_rank_open(&opts, &rk);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "rank %u: open: %s: %s\n", rank, nproxy_status_str(st),
			nproxy_rank_strerror(NULL));
		return 1;
	}

	data = aligned_alloc(4096, CHUNK_WORDS * sizeof(uint32_t) * n);
	if (!data) {
		nproxy_rank_close(rk);
		return 1;
	}
	memset(data, 0xA5, CHUNK_WORDS * sizeof(uint32_t) * n);	/* stale data cannot pass */
	for (size_t w = 0; w < CHUNK_WORDS; w++)
		data[rank * CHUNK_WORDS + w] = pattern(rank, w);

	rc = allgather(rk, rank, n, data);
	/* 7. */
	for (size_t w = 0; !rc && w < (size_t)CHUNK_WORDS * n; w++)
		wrong += data[w] != pattern((uint32_t)(w / CHUNK_WORDS), w % CHUNK_WORDS);
	if (!rc)
		printf("rank %u: allgather of %u x %zu bytes (provider %s, %s handshake): %s\n",
		       rank, n, CHUNK_WORDS * sizeof(uint32_t),
		       nproxy_net_provider(nproxy_rank_net(rk)),
		       nproxy_hs_backend_name(nproxy_hs_backend_of(nproxy_rank_hs(rk))),
		       wrong ? "WRONG DATA" : "ok");
	nproxy_rank_close(rk);
	free(data);
	return rc || wrong ? 1 : 0;
}
