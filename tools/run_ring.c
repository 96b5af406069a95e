// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: one collective as ring steps through the proxy.
 *
 * One op, per local rank (the producer, this thread):
 *   1. build the op's FIFOs: one basic block per ring step, each block
 *      RECV from prev (completion: sem[1+step] += 1) then SEND to next
 *      (precondition: sem[1+step-1] reached, i.e. the chunk it forwards
 *      has arrived);
 *   2. re-arm the trigger word (sentinel) and submit the device program:
 *      DELAY device-delay, WRITE_TRIGGER 0, WAIT_SEM on every step's sem;
 *   3. nproxy_enq_proxy_tasks (network + barrier task).
 * Then the consumer (this thread again) waits for every rank's network and
 * barrier task status and for its device program.
 *
 * Allreduce = ring reduce-scatter + ring allgather.  The emulated device
 * cannot add buffers, so each reduce-scatter step is its own op (one block:
 * send the partial chunk, receive the neighbour's partial into scratch) and
 * the host adds scratch into the chunk between steps; the allgather phase
 * is one op of W-1 blocks chained by semaphore preconditions.
 */
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include "run_rank.h"

#define SEM_OF_STEP(s)	(1 + (s))	/* sem 0 is left unused */

static void op_reset(struct run_rank *rc)
{
	rc->n_blocks = 0;
	memset(rc->sem_used, 0, sizeof(rc->sem_used));
}

/*
 * Append one ring step as a basic block: RECV chunk recv_idx from prev into
 * (scratch ? scratch : data[recv_idx]), SEND data[send_idx] to next.
 * chain: the SEND waits for the previous block's RECV (it forwards it).
 */
static void op_add_step(struct run_rank *rc, uint32_t step, uint32_t send_idx,
			uint32_t recv_idx, bool to_scratch, bool chain)
{
	uint32_t b = rc->n_blocks++, sem = SEM_OF_STEP(step);
	uint32_t next = (rc->rank + 1) % rc->world, prev = (rc->rank + rc->world - 1) % rc->world;
	struct nproxy_net_op *recv = &rc->ops[2 * b], *send = &rc->ops[2 * b + 1];

	rc->sem_expect[sem]++;
	rc->sem_used[sem] = true;
	*recv = (struct nproxy_net_op){
		.kind = NPROXY_NET_OP_RECV, .flags = NPROXY_NET_OP_F_COMPLETE, .peer = prev,
		.addr_idx = 0, .len = (uint32_t)rc->chunk, .post_sem = (uint16_t)sem, .post_inc = 1,
	};
	*send = (struct nproxy_net_op){
		.kind = NPROXY_NET_OP_SEND, .peer = next, .addr_idx = 0, .len = (uint32_t)rc->chunk,
	};
	if (chain) {
		uint32_t psem = SEM_OF_STEP(step - 1);

		send->flags = NPROXY_NET_OP_F_PRECOND;
		send->pre_sem = (uint16_t)psem;
		send->pre_value = rc->sem_expect[psem];
	}
	rc->src[b] = (struct nproxy_net_addr){ .mr = rc->data_mr, .offset = (uint64_t)send_idx * rc->chunk };
	if (to_scratch)
		rc->dst[b] = (struct nproxy_net_addr){ .mr = rc->scratch_mr, .offset = 0 };
	else
		rc->dst[b] = (struct nproxy_net_addr){ .mr = rc->data_mr,
						       .offset = (uint64_t)recv_idx * rc->chunk };
	rc->blocks[b] = (struct nproxy_fifo_set){
		.ops = &rc->ops[2 * b], .n_ops = 2,
		.src = &rc->src[b], .n_src = 1, .dst = &rc->dst[b], .n_dst = 1,
	};
}

enum op_kind { OP_ALLGATHER, OP_RS_STEP, OP_AR_ALLGATHER, OP_SENDRECV };

static void op_build(struct run_rank *rc, enum op_kind kind, uint32_t rs_step)
{
	uint32_t W = rc->world, r = rc->rank;

	op_reset(rc);
	switch (kind) {
	case OP_ALLGATHER:
		for (uint32_t s = 0; s + 1 < W; s++)
			op_add_step(rc, s, (r + W - s) % W, (r + 2 * W - s - 1) % W, false, s > 0);
		break;
	case OP_RS_STEP:
		op_add_step(rc, rs_step, (r + W - rs_step) % W, (r + 2 * W - rs_step - 1) % W,
			    true, false);
		break;
	case OP_AR_ALLGATHER:
		for (uint32_t s = 0; s + 1 < W; s++)
			op_add_step(rc, s, (r + 1 + W - s) % W, (r + W - s) % W, false, s > 0);
		break;
	case OP_SENDRECV:
		op_add_step(rc, 0, 0, 0, true, false);
		break;
	}
}

/*
 * Wait for one task's status like nproxy_wait_status(), but also watch the
 * local peer processes: the wait is cut into slices of PEER_CHECK_MS, and a
 * dead peer ends it at once.
 */
#define PEER_CHECK_MS	20

static enum nproxy_status wait_task(struct run_rank *rc, enum nproxy_task_type type,
				    int timeout_ms, int *dead)
{
	double until = run_now() + timeout_ms / 1000.0;
	enum nproxy_status st, rcode;
	bool done;

	*dead = -1;
	for (;;) {
		double left = until - run_now();
		uint32_t slice = left <= 0 ? 0 : left * 1000 < PEER_CHECK_MS ?
				 (uint32_t)(left * 1000) + 1 : PEER_CHECK_MS;

		rcode = nproxy_await_status(rc->comm, rc->ctx, type, slice, &done, &st);
		if (rcode != NPROXY_SUCCESS)
			return rcode;
		if (done)
			return st;
		*dead = run_peer_dead(rc);
		if (*dead >= 0)
			return NPROXY_PEER_DEAD;
		if (run_now() >= until)
			return NPROXY_TIMEOUT;
	}
}

/* Producer half: re-arm the gate, start the device program, enqueue. */
static int op_start(struct run_rank *rc, double deadline)
{
	char hang = run_hang_hook(rc->rank, rc->exec_id + 1);
	struct nproxy_prog_step prog[RUN_MAX_RANKS + 5];
	struct nproxy_cc_op op = { .size = sizeof(op) };
	uint64_t wait_ns = (uint64_t)run_remaining_ms(deadline) * 1000000ull;
	uint32_t n = 0;
	enum nproxy_status st;

	if (wait_ns > NPROXY_MAX_WAIT_NS)
		wait_ns = NPROXY_MAX_WAIT_NS;
	if (!wait_ns)
		return run_fail(RUN_EXIT_TIMEOUT, "rank %u: timeout (--timeout %.0f s) before op %" PRIu64,
			    rc->rank, rc->o->timeout_s, rc->exec_id);
	memset(prog, 0, sizeof(prog));
	if (hang == 'p')
		raise(SIGSTOP);
	if (hang == 't')
		prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_DELAY,
			.timeout_ns = NPROXY_MAX_WAIT_NS };
	if (hang == 's')
		prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM,
			.index = nproxy_hs_n_sems(rc->hs) - 1, .value = 1ull << 40,
			.timeout_ns = NPROXY_MAX_WAIT_NS };
	if (rc->o->device_delay_us)
		prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_DELAY,
			.timeout_ns = (uint64_t)rc->o->device_delay_us * 1000 };
	prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WRITE_TRIGGER, .index = 0, .value = 1 };
	for (uint32_t s = 0; s <= RUN_MAX_RANKS; s++)
		if (rc->sem_used[s])
			prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM, .index = s,
				.value = rc->sem_expect[s], .timeout_ns = wait_ns };

	/* The device has not reached the net stage of this op yet. */
	nproxy_trigger_store(nproxy_hs_trigger(rc->hs, 0), NPROXY_TRIGGER_SENTINEL);
	st = nproxy_hs_submit(rc->hs, prog, n, NULL);
	if (st != NPROXY_SUCCESS)
		return run_fail(run_status_exit_nonusage(st),
			    "rank %u: device program submit (%s handshake): %s", rc->rank,
			    nproxy_hs_backend_name(nproxy_hs_backend_of(rc->hs)), nproxy_status_str(st));

	op.streams_n = 1;
	op.streams[0].blocks = rc->blocks;
	op.streams[0].n_blocks = rc->n_blocks;
	rc->exec_id++;
	st = nproxy_enq_proxy_tasks(rc->comm, &op, rc->exec_id, &rc->ctx);
	if (st != NPROXY_SUCCESS) {
		nproxy_hs_cancel(rc->hs);
		nproxy_hs_wait(rc->hs, 1000, NULL);
		return run_fail(RUN_EXIT_FAILURE, "rank %u: enqueue proxy tasks for op %" PRIu64 ": %s",
			    rc->rank, rc->exec_id, nproxy_status_str(st));
	}
	run_kill_point(RUN_KILL_TRIGGER, rc->rank);
	return RUN_EXIT_OK;
}

/* Consumer half: both task statuses, then the device program's result. */
static int op_finish(struct run_rank *rc, double deadline)
{
	static const enum nproxy_task_type types[] = { NPROXY_TASK_NETWORK, NPROXY_TASK_BARRIER };
	struct nproxy_prog_result res;
	enum nproxy_status st;
	int code = RUN_EXIT_OK;

	run_kill_point(RUN_KILL_TRANSFER, rc->rank);
	for (int i = 0; i < 2; i++) {
		int ms = run_remaining_ms(deadline);

		/* After a failure only look briefly: nproxy_comm_close aborts the rest. */
		if (code != RUN_EXIT_OK && ms > 1000)
			ms = 1000;

		int dead = -1;

		st = ms ? wait_task(rc, types[i], ms, &dead) : NPROXY_TIMEOUT;
		if (dead >= 0 && code == RUN_EXIT_OK) {
			code = run_fail(RUN_EXIT_DEAD,
				    "rank %u: peer rank %u (pid %d) died during op %" PRIu64,
				    rc->rank, rc->peer_rank[dead], rc->peer_pid[dead], rc->exec_id);
			continue;
		}
		if (st != NPROXY_SUCCESS && code == RUN_EXIT_OK) {
			code = run_fail(run_status_exit_nonusage(st),
				    "rank %u: %s task of op %" PRIu64 " failed: %s%s%s%s", rc->rank,
				    nproxy_task_type_str(types[i]), rc->exec_id, nproxy_status_str(st),
				    st == NPROXY_TIMEOUT ? " (--timeout reached)" : "",
				    *nproxy_net_strerror(rc->net) ? ": " : "",
				    nproxy_net_strerror(rc->net));
		}
	}
	if (code != RUN_EXIT_OK)
		nproxy_hs_cancel(rc->hs);
	memset(&res, 0, sizeof(res));
	st = nproxy_hs_wait(rc->hs, code ? 2000 : (run_remaining_ms(deadline) ?: 1), &res);
	if (code != RUN_EXIT_OK)
		return code;
	if (st != NPROXY_SUCCESS)
		return run_fail(run_status_exit_nonusage(st),
			    "rank %u: device program of op %" PRIu64 ": %s", rc->rank, rc->exec_id,
			    nproxy_status_str(st));
	if (res.state != NPROXY_PROG_DONE)
		return run_fail(res.state == NPROXY_PROG_TIMEDOUT ? RUN_EXIT_TIMEOUT : RUN_EXIT_FAILURE,
			    "rank %u: device program of op %" PRIu64 " ended in state %u at step %u (error %d)",
			    rc->rank, rc->exec_id, res.state, res.failed_step, res.error);
	return RUN_EXIT_OK;
}

/* One op on every local rank: start all, then finish all. */
static int run_op(struct run_rank *ranks, uint32_t n, enum op_kind kind, uint32_t rs_step,
		  double deadline)
{
	uint32_t started = 0;
	int code = RUN_EXIT_OK;

	for (uint32_t i = 0; i < n; i++) {
		op_build(&ranks[i], kind, rs_step);
		code = op_start(&ranks[i], deadline);
		if (code)
			break;
		started++;
	}
	for (uint32_t i = 0; i < started; i++) {
		int c = op_finish(&ranks[i], deadline);

		if (!code)
			code = c;
	}
	return code;
}

static void reduce_step(struct run_rank *rc, uint32_t rs_step)
{
	uint32_t W = rc->world, idx = (rc->rank + 2 * W - rs_step - 1) % W;
	size_t n = rc->chunk / 4;
	uint32_t *dst = rc->data + idx * n;

	for (size_t e = 0; e < n; e++)
		dst[e] += rc->scratch[e];
}

int run_ring_iteration(struct run_rank *ranks, uint32_t n, double deadline)
{
	int code;

	switch (ranks[0].o->coll) {
	case RUN_ALLGATHER:
		return run_op(ranks, n, OP_ALLGATHER, 0, deadline);
	case RUN_SENDRECV:
		return run_op(ranks, n, OP_SENDRECV, 0, deadline);
	case RUN_ALLREDUCE:
		for (uint32_t s = 0; s + 1 < ranks[0].world; s++) {
			code = run_op(ranks, n, OP_RS_STEP, s, deadline);
			if (code)
				return code;
			for (uint32_t i = 0; i < n; i++)
				reduce_step(&ranks[i], s);
		}
		return run_op(ranks, n, OP_AR_ALLGATHER, 0, deadline);
	}
	return RUN_EXIT_FAILURE;
}
