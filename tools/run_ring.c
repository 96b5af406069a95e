// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: one collective, through the library's op verb
 * (<nproxy/coll.h>): per local rank one nproxy_coll_start(), then one
 * nproxy_coll_wait() per rank.  The library builds the ring's FIFOs and
 * device program, re-arms the trigger gate, enqueues the network and
 * barrier tasks, reduces inside the op (an allreduce is one op) and names
 * a dead local peer.  What is nproxy-run's own: the device delay and the
 * selftests' hang hooks, as prologue steps of the device program, and the
 * kill points between start and wait.
 */
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include "run_rank.h"

/* The op's description for this rank's buffers of the current size. */
static void describe(struct run_rank *rc, struct nproxy_coll_desc *d,
		     struct nproxy_prog_step *prologue, double deadline)
{
	char hang = run_hang_hook(rc->rank, rc->exec_id + 1);
	uint32_t n = 0;

	*d = (struct nproxy_coll_desc)NPROXY_COLL_DESC_INIT;
	d->dtype = rc->row.dtype;
	d->count = rc->count;
	d->recvbuf = rc->recv;
	d->sendbuf = rc->send;
	switch (rc->o->coll) {
	case RUN_ALLGATHER:
		d->kind = NPROXY_COLL_ALLGATHER;
		/* In place: the input is this rank's part of the result. */
		if (rc->row.in_place)
			d->sendbuf = (char *)rc->recv + rc->rank * rc->count * rc->esize;
		break;
	case RUN_ALLREDUCE:
		d->kind = NPROXY_COLL_ALLREDUCE;
		d->redop = rc->row.redop;
		if (rc->row.in_place)
			d->sendbuf = rc->recv;
		break;
	case RUN_SENDRECV:
		d->kind = NPROXY_COLL_SENDRECV;
		break;
	}
	if (hang == 'p')
		raise(SIGSTOP);
	if (hang == 't')
		prologue[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_DELAY,
			.timeout_ns = NPROXY_MAX_WAIT_NS };
	if (hang == 's')
		prologue[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM,
			.index = nproxy_hs_n_sems(rc->hs) - 1, .value = 1ull << 40,
			.timeout_ns = NPROXY_MAX_WAIT_NS };
	if (rc->o->device_delay_us)
		prologue[n++] = (struct nproxy_prog_step){ .op = NPROXY_STEP_DELAY,
			.timeout_ns = (uint64_t)rc->o->device_delay_us * 1000 };
	d->prologue = n ? prologue : NULL;
	d->n_prologue = n;
	d->timeout_ms = (uint32_t)run_remaining_ms(deadline);
}

static int op_start(struct run_rank *rc, double deadline)
{
	struct nproxy_prog_step prologue[4];
	struct nproxy_coll_desc d;
	enum nproxy_status st;
	uint32_t pause_ms;

	if (!run_remaining_ms(deadline))
		return run_fail(RUN_EXIT_TIMEOUT, "rank %u: timeout (--timeout %.0f s) before op %" PRIu64,
			    rc->rank, rc->o->timeout_s, rc->exec_id + 1);
	pause_ms = run_pause_hook(rc->exec_id + 1);
	if (pause_ms)
		nanosleep(&(struct timespec){ .tv_sec = pause_ms / 1000,
					      .tv_nsec = (long)(pause_ms % 1000) * 1000000 }, NULL);
	describe(rc, &d, prologue, deadline);
	st = nproxy_coll_start(rc->coll, &d);
	if (st != NPROXY_SUCCESS)
		return run_fail(run_status_exit_nonusage(st), "%s", nproxy_coll_strerror(rc->coll));
	rc->exec_id++;
	run_kill_point(RUN_KILL_TRIGGER, rc->rank);
	return RUN_EXIT_OK;
}

static int op_finish(struct run_rank *rc)
{
	struct nproxy_coll_result res;
	enum nproxy_status st;

	run_kill_point(RUN_KILL_TRANSFER, rc->rank);
	do {
		st = nproxy_coll_wait(rc->coll, UINT32_MAX, &res);
	} while (st == NPROXY_BUSY);
	if (st == NPROXY_SUCCESS)
		return RUN_EXIT_OK;
	/* A death on another host arrives as the engine's abort: no rank
	 * number in the result; the reason ("rank R: op N (...): rank D (pid P,
	 * host A) died ...") names the rank, its pid and host. */
	if (res.part == NPROXY_COLL_PART_PEER && res.dead_rank == UINT32_MAX)
		return run_fail(RUN_EXIT_DEAD, "%s", nproxy_coll_strerror(rc->coll));
	if (res.part == NPROXY_COLL_PART_PEER)
		return run_fail(RUN_EXIT_DEAD, "rank %u: peer rank %u (pid %d) died during op %" PRIu64,
				rc->rank, res.dead_rank, res.dead_pid, res.seq);
	if (res.part == NPROXY_COLL_PART_DEVICE && res.prog.state == NPROXY_PROG_TIMEDOUT)
		st = NPROXY_TIMEOUT;
	return run_fail(run_status_exit_nonusage(st), "%s%s", nproxy_coll_strerror(rc->coll),
			res.part == NPROXY_COLL_PART_DEADLINE ? " (--timeout reached)" : "");
}

/* One op on every local rank: start all, then finish all. */
int run_ring_iteration(struct run_rank *ranks, uint32_t n, double deadline)
{
	uint32_t started = 0;
	int code = RUN_EXIT_OK;

	for (uint32_t i = 0; i < n; i++) {
		code = op_start(&ranks[i], deadline);
		if (code)
			break;
		started++;
	}
	for (uint32_t i = 0; i < started; i++) {
		int c = op_finish(&ranks[i]);

		if (!code)
			code = c;
	}
	return code;
}
