// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * One collective op per call (<nproxy/coll.h>): start builds the op's
 * block and device program, re-arms the trigger gate, submits and
 * enqueues; wait waits for the network task and the device program and
 * collects the previous op's barrier task, watching the bus for a dead
 * peer between slices.  Everything goes through the public calls of the
 * proxy, handshake, net, bananaphone and rank subsystems: this is the
 * sequence a runtime would otherwise write by hand.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/bananaphone.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include <nproxy/net.h>
#include "common/common_internal.h"
#include "coll_internal.h"
#include "rank/rank_internal.h"

/*
 * A wait looks at the bus's liveness between slices of this length: a
 * local peer's death ends it within a slice, where the engine alone would
 * notice only at its no-progress deadline.
 */
#define COLL_LIVENESS_SLICE_MS	10u
/* After a failure, how long the device program is given to stop. */
#define COLL_CANCEL_MS		1000u

const char *nproxy_coll_kind_name(enum nproxy_coll_kind kind)
{
	static const char *const names[] = {
		[NPROXY_COLL_ALLGATHER] = "allgather", [NPROXY_COLL_ALLREDUCE] = "allreduce",
		[NPROXY_COLL_SENDRECV] = "sendrecv", [NPROXY_COLL_CUSTOM] = "custom",
	};

	return (unsigned int)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : NULL;
}

enum nproxy_status nproxy_coll_open(struct nproxy_rank *rank, struct nproxy_coll **out)
{
	struct nproxy_coll *c;

	npx_err_clear_open(NPX_ERR_COLL);
	if (out)
		*out = NULL;
	if (!rank || !out || !nproxy_rank_comm(rank))
		return npx_coll_fail(NULL, NPROXY_INVALID, "coll: open: %s",
				     !out ? "out is NULL" : !rank ? "rank is NULL" : "the rank has no comm");
	c = calloc(1, sizeof(*c));
	if (!c)
		return npx_coll_fail(NULL, NPROXY_RESOURCE, "coll: open: out of memory");
	c->rank = rank;
	c->comm = nproxy_rank_comm(rank);
	c->hs = nproxy_rank_hs(rank);
	c->net = nproxy_rank_net(rank);
	c->bp = nproxy_rank_bp(rank);
	c->me = nproxy_rank_rank(rank);
	c->n_ranks = nproxy_rank_size(rank);
	c->owns_barrier = npx_rank_barrier_claim(rank);
	*out = c;
	return NPROXY_SUCCESS;
}

static bool in_place_or_apart(const void *send, const void *place, size_t len,
			      const void *whole, size_t whole_len)
{
	const char *s = send, *w = whole;

	if (!send || send == place)
		return true;
	/* An out-of-place input must not overlap the result. */
	return s + len <= w || s >= w + whole_len;
}

/* Everything about desc that can be wrong before anything starts. */
static enum nproxy_status check_desc(struct nproxy_coll *c, const struct nproxy_coll_desc *d)
{
	size_t esize;
	uint64_t bytes, total;

	if (!d || NPX_OPTS_CHECK(d, "nproxy_coll_desc") != NPROXY_SUCCESS || d->reserved)
		return npx_coll_fail(c, NPROXY_INVALID, "bad op description (NULL, size %u, or reserved bytes set)",
				     d ? d->size : 0);
	if (d->n_prologue > NPROXY_COLL_MAX_PROLOGUE || (d->n_prologue && !d->prologue))
		return npx_coll_fail(c, NPROXY_INVALID, "prologue of %u steps (at most %u)",
				     d->n_prologue, NPROXY_COLL_MAX_PROLOGUE);
	if (d->kind == NPROXY_COLL_CUSTOM) {
		if (!d->cc || !d->prog || !d->n_prog || d->n_prog > NPROXY_MAX_PROG_STEPS ||
		    d->n_prologue || d->count || d->sendbuf || d->recvbuf)
			return npx_coll_fail(c, NPROXY_INVALID,
					     "custom op: needs cc and prog (1..%u steps), and no buffers or prologue",
					     NPROXY_MAX_PROG_STEPS);
		return NPROXY_SUCCESS;
	}
	if (d->cc || d->prog || d->n_prog)
		return npx_coll_fail(c, NPROXY_INVALID, "cc/prog are for NPROXY_COLL_CUSTOM only");
	esize = nproxy_dtype_size((enum nproxy_dtype)d->dtype);
	if (!nproxy_coll_kind_name((enum nproxy_coll_kind)d->kind) || !esize)
		return npx_coll_fail(c, NPROXY_INVALID, "unknown kind %u or data type %u", d->kind,
				     d->dtype);
	if (d->kind == NPROXY_COLL_ALLREDUCE ? d->redop >= NPROXY_REDOP_COUNT : d->redop != 0)
		return npx_coll_fail(c, NPROXY_INVALID, "reduction op %u for %s", d->redop,
				     nproxy_coll_kind_name((enum nproxy_coll_kind)d->kind));
	if (!d->count)
		return NPROXY_SUCCESS;
	bytes = d->count * esize;
	total = d->kind == NPROXY_COLL_ALLGATHER ? bytes * c->n_ranks : bytes;
	if (d->count > UINT32_MAX || bytes > UINT32_MAX)
		return npx_coll_fail(c, NPROXY_INVALID, "%" PRIu64 " elements: a message is at most 4 GiB",
				     d->count);
	if (!d->recvbuf || (d->kind == NPROXY_COLL_SENDRECV && !d->sendbuf))
		return npx_coll_fail(c, NPROXY_INVALID, "%s of %" PRIu64 " elements without %s",
				     nproxy_coll_kind_name((enum nproxy_coll_kind)d->kind), d->count,
				     d->recvbuf ? "a send buffer" : "a receive buffer");
	if (d->kind == NPROXY_COLL_SENDRECV ?
	    !in_place_or_apart(d->sendbuf, NULL, bytes, d->recvbuf, bytes) :
	    !in_place_or_apart(d->sendbuf,
			       (char *)d->recvbuf + (d->kind == NPROXY_COLL_ALLGATHER ? bytes * c->me : 0),
			       bytes, d->recvbuf, total))
		return npx_coll_fail(c, NPROXY_INVALID, "the send buffer overlaps the receive buffer");
	return NPROXY_SUCCESS;
}

/* AVG: the sum the ring made, divided by the number of ranks. */
static void divide(void *buf, uint64_t n, enum nproxy_dtype dtype, uint32_t by)
{
	switch (dtype) {
#define DIVIDE(T)						\
	do {							\
		T *p = buf;					\
		for (uint64_t i = 0; i < n; i++)		\
			p[i] = (T)(p[i] / (T)by);		\
	} while (0)
	case NPROXY_INT8:
		DIVIDE(int8_t);
		break;
	case NPROXY_UINT8:
		DIVIDE(uint8_t);
		break;
	case NPROXY_INT32:
		DIVIDE(int32_t);
		break;
	case NPROXY_UINT32:
		DIVIDE(uint32_t);
		break;
	case NPROXY_INT64:
		DIVIDE(int64_t);
		break;
	case NPROXY_UINT64:
		DIVIDE(uint64_t);
		break;
	case NPROXY_FLOAT32:
		DIVIDE(float);
		break;
	case NPROXY_FLOAT64:
		DIVIDE(double);
		break;
#undef DIVIDE
	case NPROXY_FLOAT16:
	case NPROXY_BFLOAT16: {
		uint16_t *p = buf;
		bool bf = dtype == NPROXY_BFLOAT16;

		for (uint64_t i = 0; i < n; i++) {
			float f = (bf ? npx_bf16_to_float(p[i]) : npx_half_to_float(p[i])) / (float)by;

			p[i] = bf ? npx_float_to_bf16(f) : npx_float_to_half(f);
		}
		break;
	}
	default:
		break;
	}
}

/* The input in its place in the result buffer (an out-of-place op of one rank). */
static void place_input(struct nproxy_coll *c, const struct nproxy_coll_desc *d)
{
	size_t bytes = d->count * nproxy_dtype_size((enum nproxy_dtype)d->dtype);
	char *place = d->recvbuf;

	if (d->kind == NPROXY_COLL_SENDRECV || !d->sendbuf || !bytes)
		return;
	if (d->kind == NPROXY_COLL_ALLGATHER)
		place += bytes * c->me;
	if (place != d->sendbuf)
		memcpy(place, d->sendbuf, bytes);
}

static uint64_t wait_ns_until(uint64_t deadline_ms, uint64_t now)
{
	uint64_t ns = deadline_ms > now ? (deadline_ms - now) * 1000000ull : 1000000ull;

	return ns > NPROXY_MAX_WAIT_NS ? NPROXY_MAX_WAIT_NS : ns;
}

/* The device program of a built-in op: prologue, trigger, the op's sems. */
static uint32_t build_prog(struct nproxy_coll *c, const struct nproxy_coll_desc *d,
			   uint64_t recv_final, uint64_t reduce_final, uint64_t reduce_base,
			   uint64_t now_ms)
{
	uint64_t wait_ns = wait_ns_until(c->op.deadline_ms, now_ms);
	uint32_t n = 0;

	for (uint32_t i = 0; i < d->n_prologue; i++)
		c->prog[n++] = d->prologue[i];
	c->prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WRITE_TRIGGER, .index = 0,
						  .value = 1 };
	c->prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM,
						  .index = COLL_SEM_RECV, .value = recv_final,
						  .timeout_ns = wait_ns };
	if (reduce_final != reduce_base)
		c->prog[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM,
							  .index = COLL_SEM_REDUCE,
							  .value = reduce_final, .timeout_ns = wait_ns };
	return n;
}

/* The trigger words the op's tasks gate on, back to "not reached". */
static void rearm(struct nproxy_coll *c, const struct nproxy_cc_op *cc)
{
	for (uint32_t s = 0; s < cc->streams_n; s++) {
		volatile uint32_t *w = cc->trigger_words[s] ? cc->trigger_words[s] :
				       nproxy_hs_trigger(c->hs, s);

		if (w)
			nproxy_trigger_store(w, NPROXY_TRIGGER_SENTINEL);
	}
}

/* Submit the program and enqueue the tasks; undo the submit if the enqueue fails. */
static enum nproxy_status launch(struct nproxy_coll *c, const struct nproxy_cc_op *cc,
				 const struct nproxy_prog_step *prog, uint32_t n_prog)
{
	enum nproxy_status st;

	rearm(c, cc);
	st = nproxy_hs_submit(c->hs, prog, n_prog, NULL);
	if (st != NPROXY_SUCCESS)
		return npx_coll_fail(c, st, "op %" PRIu64 ": device program submit: %s (%s)",
				     c->op.seq, nproxy_status_str(st), nproxy_hs_strerror(c->hs));
	/* Marked before the enqueue: the worker may step the barrier at once. */
	if (c->owns_barrier && c->n_ranks <= NPX_AUTO_DRIVE_MAX_RANKS)
		c->op.bar_ordinal = npx_rank_barrier_mark(c->rank);
	st = nproxy_enq_proxy_tasks(c->comm, cc, c->op.seq, &c->op.ctx);
	if (st != NPROXY_SUCCESS) {
		if (c->op.bar_ordinal)
			npx_rank_barrier_unmark(c->rank, c->op.bar_ordinal);
		nproxy_hs_cancel(c->hs);
		nproxy_hs_wait(c->hs, COLL_CANCEL_MS, NULL);
		return npx_coll_fail(c, st, "op %" PRIu64 ": enqueue proxy tasks: %s (%s)",
				     c->op.seq, nproxy_status_str(st), nproxy_comm_strerror(c->comm));
	}
	return NPROXY_SUCCESS;
}

/*
 * The previous op's barrier, deferred by the rank (rank_barrier.c), is
 * decided as this op starts.  An allgather or allreduce across the ranks
 * may carry it: every rank sends this op's data only after its wait for
 * the previous op returned, and every rank's result needs every rank's
 * data, so once this rank's receives are all in (COLL_SEM_RECV at
 * recv_final) every rank is past the previous op.  Any other op, and the
 * close, leave it to the engine.  Every rank runs the same op sequence,
 * so every rank decides alike.
 *
 * Carried only where the waiting thread drives the op by default
 * (NPX_AUTO_DRIVE_MAX_RANKS, NPX_AUTO_DRIVE_MAX_REDUCE: the proxy's rule,
 * less its per-process part, which may differ between ranks): there it saves the barrier's messages and its wait (2
 * ranks, 1 KiB to 1 MiB: 5-25 % less per op).  Where the worker drives,
 * the worker parks after each op instead of finishing the barrier, and
 * the next op's wake-up costs as much as the messages saved (4 ranks on 2
 * cpus: up to 20 % more per op), so the engine runs it there.
 */
static bool op_carries_barrier(const struct nproxy_coll *c, const struct nproxy_coll_desc *d)
{
	uint64_t reduce = 0;

	if ((d->kind != NPROXY_COLL_ALLGATHER && d->kind != NPROXY_COLL_ALLREDUCE) ||
	    c->n_ranks > NPX_AUTO_DRIVE_MAX_RANKS)
		return false;
	for (uint32_t i = 0; i < c->block.n_ops; i++)
		if (c->block.ops[i].kind == NPROXY_NET_OP_REDUCE)
			reduce += c->block.ops[i].len;
	return reduce <= NPX_AUTO_DRIVE_MAX_REDUCE;
}

/* recv_final 0: the engine runs it; enqueue_follows: no kick (the enqueue wakes the group). */
static void decide_barrier(struct nproxy_coll *c, uint64_t recv_final, bool enqueue_follows)
{
	const struct coll_barrier *last = c->n_bars ? &c->bars[c->n_bars - 1] : NULL;

	if (!last || !last->ordinal)
		return;
	npx_rank_barrier_decide(c->rank, last->ordinal,
				recv_final ? nproxy_hs_sem(c->hs, COLL_SEM_RECV) : NULL, recv_final,
				!enqueue_follows);
}

enum nproxy_status nproxy_coll_start(struct nproxy_coll *c, const struct nproxy_coll_desc *d)
{
	struct nproxy_cc_op cc = NPROXY_CC_OP_INIT;
	uint64_t recv_base, reduce_base, recv_final, reduce_final, seq, now_ms;
	enum nproxy_status st;
	uint32_t n_prog;

	if (!c)
		return NPROXY_INVALID;
	if (c->broken)
		return c->broken;
	if (c->op.active)
		return npx_coll_fail(c, NPROXY_BUSY, "op %" PRIu64 " is still in flight", c->op.seq);
	st = check_desc(c, d);
	if (st != NPROXY_SUCCESS)
		return st;
	seq = c->op.seq + 1;
	memset(&c->op, 0, sizeof(c->op));
	c->op.seq = seq;
	c->op.kind = (enum nproxy_coll_kind)d->kind;
	c->op.res.seq = seq;
	c->op.res.dead_rank = UINT32_MAX;
	c->op.timeout_ms = d->timeout_ms ? d->timeout_ms : nproxy_comm_timeout_ms(c->comm);
	now_ms = (uint64_t)npx_now_ms();
	c->op.deadline_ms = now_ms + c->op.timeout_ms;
	if (d->kind == NPROXY_COLL_CUSTOM) {
		decide_barrier(c, 0, true);
		st = launch(c, d->cc, d->prog, d->n_prog);
		if (st == NPROXY_SUCCESS)
			c->op.active = true;
		return st;
	}
	c->op.avg = d->kind == NPROXY_COLL_ALLREDUCE && d->redop == NPROXY_AVG;
	c->op.dtype = (enum nproxy_dtype)d->dtype;
	c->op.result = d->recvbuf;
	c->op.result_count = d->count;
	c->op.active = true;
	if (!d->count || (c->n_ranks == 1 && d->kind != NPROXY_COLL_SENDRECV)) {
		/* Nothing crosses the network: done at once, on every rank alike
		 * (a ring op places its input itself, in its block). */
		place_input(c, d);
		decide_barrier(c, 0, false);
		c->op.net_done = c->op.prog_done = true;
		c->op.res.prog.state = NPROXY_PROG_DONE;
		return NPROXY_SUCCESS;
	}
	c->op.active = false;
	if (!c->hs || nproxy_hs_n_sems(c->hs) < COLL_MIN_SEMS)
		return npx_coll_fail(c, NPROXY_INVALID, "the rank's device region has %u semaphores; an op needs %u",
				     c->hs ? nproxy_hs_n_sems(c->hs) : 0, COLL_MIN_SEMS);
	recv_base = nproxy_sem_load(nproxy_hs_sem(c->hs, COLL_SEM_RECV));
	reduce_base = nproxy_sem_load(nproxy_hs_sem(c->hs, COLL_SEM_REDUCE));
	st = npx_coll_build(c, d, recv_base, reduce_base, &recv_final, &reduce_final);
	if (st != NPROXY_SUCCESS)
		return st;
	/* The op's start stands for now: the device's wait ends at most a few us
	 * after the op's deadline, for one clock read less. */
	n_prog = build_prog(c, d, recv_final, reduce_final, reduce_base, now_ms);
	decide_barrier(c, op_carries_barrier(c, d) ? recv_final : 0, true);
	cc.streams_n = 1;
	cc.streams[0].blocks = &c->block;
	cc.streams[0].n_blocks = 1;
	st = launch(c, &cc, c->prog, n_prog);
	if (st == NPROXY_SUCCESS)
		c->op.active = true;
	return st;
}

/* The op's first failure is the one reported; later ones are its fallout. */
static enum nproxy_status op_fail(struct nproxy_coll *c, enum nproxy_coll_part part,
				  enum nproxy_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static enum nproxy_status op_fail(struct nproxy_coll *c, enum nproxy_coll_part part,
				  enum nproxy_status st, const char *fmt, ...)
{
	char text[NPX_ERR_LEN];
	va_list ap;

	if (c->op.res.status != NPROXY_SUCCESS)
		return c->op.res.status;
	c->op.res.status = st;
	c->op.res.part = part;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return npx_coll_fail(c, st, "op %" PRIu64 " (%s): %s", c->op.seq,
			     nproxy_coll_kind_name(c->op.kind), text);
}

/*
 * An abort about another rank than the local one the bus saw die: that
 * local rank left because the abort reached it first, and the abort
 * ("rank D (pid P, host A) ...", nproxy_net_abort_reason) names the cause.
 */
static bool abort_names_other(struct nproxy_coll *c, uint32_t local_dead)
{
	const char *why = nproxy_net_abort_reason(nproxy_rank_net(c->rank));
	char mine[32];

	snprintf(mine, sizeof(mine), "rank %u (", local_dead);
	return *why && strncmp(why, mine, strlen(mine));
}

/*
 * A dead peer: a local one the bus saw (named by job rank and pid), or one
 * on another host whose death reached this rank as the engine's abort
 * (nproxy_rank_check: named in words, with its host).
 */
static bool peer_died(struct nproxy_coll *c)
{
	enum nproxy_status st = nproxy_rank_check(c->rank);
	uint32_t dead;
	int pid;

	if (st == NPROXY_SUCCESS)
		return false;
	if (st == NPROXY_PEER_DEAD && c->bp && nproxy_bp_dead_peer(c->bp, &dead, &pid) &&
	    !abort_names_other(c, nproxy_rank_of_bus_rank(c->rank, dead))) {
		c->op.res.dead_rank = nproxy_rank_of_bus_rank(c->rank, dead);
		c->op.res.dead_pid = pid;
		op_fail(c, NPROXY_COLL_PART_PEER, st, "peer rank %u (pid %d) died",
			c->op.res.dead_rank, pid);
	} else {
		op_fail(c, st == NPROXY_PEER_DEAD ? NPROXY_COLL_PART_PEER : NPROXY_COLL_PART_NETWORK,
			st, "%s", nproxy_rank_strerror(c->rank));
	}
	return true;
}

/* One slice of waiting on the network task. */
static void wait_network(struct nproxy_coll *c, uint32_t slice_ms)
{
	enum nproxy_status st, task_st = NPROXY_SUCCESS;
	bool done = false;

	st = nproxy_await_status(c->comm, c->op.ctx, NPROXY_TASK_NETWORK, slice_ms, &done, &task_st);
	if (st != NPROXY_SUCCESS) {
		op_fail(c, NPROXY_COLL_PART_NETWORK, st, "network task: %s", nproxy_status_str(st));
		return;
	}
	if (!done)
		return;
	c->op.net_done = true;
	/* A peer's death often shows first as a failed transfer: name the death. */
	if (task_st != NPROXY_SUCCESS && !peer_died(c)) {
		const char *why = nproxy_net_strerror(c->net);

		op_fail(c, NPROXY_COLL_PART_NETWORK, task_st, "network task: %s%s%s",
			nproxy_status_str(task_st), *why ? ": " : "", why);
	}
}

/* One slice of waiting on the device program. */
static void wait_device(struct nproxy_coll *c, uint32_t slice_ms)
{
	struct nproxy_prog_result *pr = &c->op.res.prog;
	enum nproxy_status st = nproxy_hs_wait(c->hs, slice_ms, pr);

	if (st == NPROXY_TIMEOUT)
		return;
	c->op.prog_done = true;
	if (st != NPROXY_SUCCESS)
		op_fail(c, NPROXY_COLL_PART_DEVICE, st,
			"device program ended in state %u at step %u (error %d)", pr->state,
			pr->failed_step, pr->error);
}

/*
 * Collect earlier ops' barrier tasks, oldest first, until at most keep are
 * left: those that are DONE at once, and, while more than keep are left,
 * the oldest waited for up to slice_ms.  False while more than keep are
 * left.  A failed barrier fails the op being waited for.
 */
static bool collect_barriers(struct nproxy_coll *c, uint32_t slice_ms, uint32_t keep)
{
	while (c->n_bars) {
		const struct coll_barrier *b = &c->bars[0];
		enum nproxy_status st, task_st = NPROXY_SUCCESS;
		bool must = c->n_bars > keep, done = false;
		uint64_t seq = b->seq;

		st = nproxy_await_status(c->comm, b->ctx, NPROXY_TASK_BARRIER, must ? slice_ms : 0,
					 &done, &task_st);
		if (st == NPROXY_SUCCESS && !done)
			return !must;
		memmove(&c->bars[0], &c->bars[1], --c->n_bars * sizeof(c->bars[0]));
		if (st == NPROXY_SUCCESS)
			st = task_st;
		if (st != NPROXY_SUCCESS && !peer_died(c))
			op_fail(c, NPROXY_COLL_PART_BARRIER, st, "barrier task of op %" PRIu64 ": %s",
				seq, nproxy_status_str(st));
	}
	return true;
}

/* After a failure: stop the device program and the op's tasks, so that no
 * part of the library touches the op's buffers any more. */
static void op_abort(struct nproxy_coll *c)
{
	if (!c->op.prog_done) {
		nproxy_hs_cancel(c->hs);
		nproxy_hs_wait(c->hs, COLL_CANCEL_MS, &c->op.res.prog);
		c->op.prog_done = true;
	}
	nproxy_comm_abort(c->comm);
	c->n_bars = 0;
	c->broken = c->op.res.status;
}

/* The op ended (collected): hand back its result. */
static enum nproxy_status op_end(struct nproxy_coll *c, struct nproxy_coll_result *res)
{
	enum nproxy_status st = c->op.res.status;

	/* NPROXY_BUSY means "still running" to a waiter: a task that failed
	 * with it (a barrier entered out of turn) is a plain failure here. */
	if (st == NPROXY_BUSY)
		st = c->op.res.status = NPROXY_FAILURE;
	if (st != NPROXY_SUCCESS) {
		op_abort(c);
	} else {
		if (c->op.avg)
			divide(c->op.result, c->op.result_count, c->op.dtype, c->n_ranks);
		if (c->op.ctx)	/* room: the wait left at most one */
			c->bars[c->n_bars++] = (struct coll_barrier){
				.ctx = c->op.ctx, .seq = c->op.seq, .ordinal = c->op.bar_ordinal };
		npx_err_clear(&c->err);
	}
	c->op.active = false;
	if (res)
		*res = c->op.res;
	return st;
}

static uint32_t min_ms(uint64_t a, uint64_t b)
{
	uint64_t m = a < b ? a : b;

	return m > COLL_LIVENESS_SLICE_MS ? COLL_LIVENESS_SLICE_MS : (uint32_t)m;
}

enum nproxy_status nproxy_coll_wait(struct nproxy_coll *c, uint32_t timeout_ms,
				    struct nproxy_coll_result *res)
{
	uint64_t end, now;

	if (!c)
		return NPROXY_INVALID;
	if (!c->op.active)
		return npx_coll_fail(c, NPROXY_INVALID, "no op in flight");
	now = (uint64_t)npx_now_ms();
	end = now + timeout_ms;
	for (;;) {
		uint32_t slice = min_ms(end > now ? end - now : 0,
					c->op.deadline_ms > now ? c->op.deadline_ms - now : 0);

		/*
		 * The network task first (the waiting thread may drive it); the
		 * device program is looked at once per slice meanwhile, so a
		 * device that fails before the network stage ends the wait.
		 */
		if (!c->op.net_done)
			wait_network(c, slice);
		if (!c->op.prog_done && c->op.res.status == NPROXY_SUCCESS)
			wait_device(c, c->op.net_done ? slice : 0);
		if (c->op.res.status != NPROXY_SUCCESS)
			return op_end(c, res);
		/* Collecting may fail the op too. */
		if (c->op.net_done && c->op.prog_done &&
		    collect_barriers(c, slice, COLL_BARRIERS_PENDING - 1))
			return op_end(c, res);
		if (peer_died(c))
			return op_end(c, res);
		now = (uint64_t)npx_now_ms();
		if (now >= c->op.deadline_ms) {
			op_fail(c, NPROXY_COLL_PART_DEADLINE, NPROXY_TIMEOUT,
				"not done within its %u ms (network task %s, device program %s)",
				c->op.timeout_ms, c->op.net_done ? "done" : "running",
				c->op.prog_done ? "done" : "running");
			return op_end(c, res);
		}
		if (now >= end)
			return NPROXY_BUSY;
	}
}

enum nproxy_status nproxy_coll_run(struct nproxy_coll *c, const struct nproxy_coll_desc *d,
				   struct nproxy_coll_result *res)
{
	enum nproxy_status st = nproxy_coll_start(c, d);

	if (st != NPROXY_SUCCESS)
		return st;
	do {
		st = nproxy_coll_wait(c, UINT32_MAX, res);
	} while (st == NPROXY_BUSY);
	return st;
}

void nproxy_coll_close(struct nproxy_coll *c)
{
	if (!c)
		return;
	if (c->op.active) {
		if (c->op.res.status == NPROXY_SUCCESS)
			op_fail(c, NPROXY_COLL_PART_NONE, NPROXY_CANCELLED, "closed while in flight");
		op_abort(c);
	}
	if (c->n_bars && !c->broken) {
		uint64_t end = (uint64_t)npx_now_ms() + nproxy_comm_timeout_ms(c->comm);

		/* No op follows to carry the last barrier: the engine runs it. */
		decide_barrier(c, 0, false);
		while (!collect_barriers(c, COLL_LIVENESS_SLICE_MS, 0) &&
		       (uint64_t)npx_now_ms() < end && !peer_died(c))
			;
		if (c->n_bars)
			nproxy_comm_abort(c->comm);
	}
	if (c->owns_barrier)
		npx_rank_barrier_release(c->rank);
	npx_coll_mr_drop_all(c);
	if (c->scratch) {
		nproxy_net_mr_deregister(c->net, c->scratch_mr);
		free(c->scratch);
	}
	free(c->ops);
	free(c->src);
	free(c->dst);
	free(c);
}
