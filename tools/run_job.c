// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: the job of one process, the timing loop.  Its ranks are
 * opened (run_rank.c), then for every size the buffers are made, and for
 * every iteration (warmup first) the inputs are filled, every rank of the
 * bus meets at a barrier, the collective runs (run_ring.c) with its wall
 * and CPU time measured around it alone, and the result is verified
 * (run_verify.c).  The test hooks that kill or crash a process between
 * iterations fire here.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "run_rank.h"

static double cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Where rank i of this process sits in the job and on the bus. */
static void place_ranks(struct run_rank *ranks, const struct run_opts *o,
			const struct run_place *place, double deadline)
{
	uint32_t R = o->ranks_per_proc, world = place->n_procs * R;

	for (uint32_t i = 0; i < R; i++) {
		struct run_rank *rc = &ranks[i];

		rc->o = o;
		rc->place = place;
		rc->deadline = deadline;
		rc->rank = place->proc_rank * R + i;
		rc->world = world;
		rc->local_idx = i;
		if (!place->launched) {
			/* Every rank is on this host: the bus spans the comm. */
			rc->bus_rank = rc->rank;
			rc->bus_size = world;
			rc->net_over_bus = true;
		} else if (place->local_procs) {
			rc->bus_rank = place->local_proc * R + i;
			rc->bus_size = place->local_procs * R;
			rc->net_over_bus = rc->bus_size == world;
		}
	}
}

/*
 * Before each iteration, outside its timing (as OSU and nccl-tests time a
 * collective): every rank of the bus arrives, so an iteration measures the
 * collective and not how far one process lags behind in its verification
 * of the last one.  Without a bus spanning the job (ranks on several hosts)
 * there is none, and the times include that skew.
 */
static int start_barrier(struct run_rank *ranks, uint32_t n, double deadline)
{
	enum nproxy_status st = NPROXY_SUCCESS;

	for (uint32_t i = 0; i < n; i++)
		run_kill_point(RUN_KILL_BARRIER, ranks[i].rank);
	if (!ranks[0].bp || ranks[0].bus_size != ranks[0].world)
		return RUN_EXIT_OK;
	/* Our other local ranks arrive without waiting; rank 0 waits (parked) for all. */
	for (uint32_t i = 1; i < n && st == NPROXY_SUCCESS; i++)
		st = nproxy_bp_barrier_arrive(ranks[i].bp, nproxy_bp_barrier_next_seq(ranks[i].bp));
	if (st == NPROXY_SUCCESS)
		st = nproxy_bp_barrier(ranks[0].bp, run_remaining_ms(deadline) ?: 1);
	if (st == NPROXY_SUCCESS)
		return RUN_EXIT_OK;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t dead;
		int pid;

		if (nproxy_bp_check(ranks[i].bp) == NPROXY_PEER_DEAD &&
		    nproxy_bp_dead_peer(ranks[i].bp, &dead, &pid))
			return run_fail(RUN_EXIT_DEAD,
					"rank %u: peer rank %u (pid %d) died before op %" PRIu64,
					ranks[i].rank, nproxy_rank_of_bus_rank(ranks[i].nrank, dead),
					pid, ranks[i].exec_id + 1);
	}
	return run_fail(run_status_exit_nonusage(st), "rank %u: barrier before an iteration: %s (%s)",
			ranks[0].rank, nproxy_status_str(st), nproxy_bp_strerror(ranks[0].bp));
}

/* The hooks that end this process between iterations (selftests). */
struct job_hooks {
	int corrupt_rank;		/* NPROXY_RUN_CORRUPT, or -1 */
	uint32_t corrupt_row;		/* the row it corrupts (0: the first) */
	int kill_rank, crash_rank;	/* NPROXY_RUN_KILL, NPROXY_RUN_CRASH, or -1 */
	uint32_t kill_iter, crash_iter;
	int crash_sig;
};

static void fire_hooks(const struct job_hooks *h, uint32_t proc_rank, uint32_t R,
		       uint64_t global_iter)
{
	if (h->kill_rank >= 0 && global_iter == h->kill_iter &&
	    (uint32_t)h->kill_rank / R == proc_rank)
		raise(SIGKILL);
	if (h->crash_rank >= 0 && global_iter == h->crash_iter &&
	    (uint32_t)h->crash_rank / R == proc_rank)
		run_crash_now(h->crash_sig);
}

/*
 * Check every local rank's result; the wrong elements over them.  The
 * expected result of an allreduce is every rank's, so it is built once (in
 * local rank 0's buffers) and not once per rank: building it is W fills
 * and W-1 reductions, far more than the check.  Neither is needed for a
 * result equal to the one kept for its pattern.
 */
static uint64_t verify_ranks(struct run_rank *ranks, uint32_t R, const struct job_hooks *h,
			     bool corrupt, uint64_t global_iter, uint64_t bytes)
{
	bool reduce = ranks[0].o->coll == RUN_ALLREDUCE, want_built = false;
	uint64_t wrong = 0;

	for (uint32_t i = 0; i < R; i++) {
		struct run_rank *rc = &ranks[i];
		char msg[400];
		uint64_t bad;

		if (corrupt && (int)rc->rank == h->corrupt_rank)
			*run_corrupt_byte(rc) ^= 0x40;
		if (!rc->o->check || run_result_kept(rc, global_iter))
			continue;
		if (reduce && !want_built) {
			run_expect(&ranks[0], ranks[0].want, ranks[0].tmp, global_iter);
			want_built = true;
		}
		bad = run_verify(rc, ranks[0].want, global_iter, bytes, msg, sizeof(msg));
		if (bad) {
			wrong += bad;
			run_fail(RUN_EXIT_VERIFY, "%s (%" PRIu64 " wrong elements)", msg, bad);
		} else {
			run_keep_result(rc, global_iter);
		}
	}
	return wrong;
}

/* Every iteration of row si: warmup, then timed into rec. */
static int run_size(struct run_rank *ranks, const struct job_hooks *h, uint32_t si,
		    uint64_t *global_iter, struct run_proc_record *rec)
{
	const struct run_opts *o = ranks[0].o;
	struct run_size_result *sr = &rec->sizes[si];
	uint32_t R = o->ranks_per_proc;
	double deadline = ranks[0].deadline;
	int code = RUN_EXIT_OK;
	uint64_t wrong;

	sr->bytes = ranks[0].recv_len;
	sr->count = ranks[0].count;
	for (uint32_t it = 0; it < o->warmup + o->iters && !code; it++) {
		bool timed = it >= o->warmup;
		double t0, c0, t1;

		fire_hooks(h, ranks[0].place->proc_rank, R, *global_iter);
		for (uint32_t i = 0; i < R; i++)
			run_fill_inputs(&ranks[i], *global_iter);
		/*
		 * CPU time is read before the barrier, not between it and t0:
		 * the read is a system call (~1 us on a virtual machine), and
		 * there it would start this rank late against its peers.  The
		 * barrier's own CPU (a futex wait or wake) counts with the op.
		 */
		c0 = cpu_now();
		code = start_barrier(ranks, R, deadline);
		if (code)
			break;
		t0 = run_now();
		code = run_ring_iteration(ranks, R, deadline);
		t1 = run_now();
		if (code)
			break;
		if (timed) {
			rec->lat_us[(size_t)si * o->iters + (it - o->warmup)] = (t1 - t0) * 1e6;
			sr->wall_s += t1 - t0;
			sr->cpu_s += cpu_now() - c0;
		}
		/* nccl-tests checks no warmup op: neither do we in its mode (a
		 * check costs more than the op; the timed ones are checked). */
		wrong = 0;
		if (timed || !o->nccl.on)
			wrong = verify_ranks(ranks, R, h, timed && si == h->corrupt_row &&
					     it == o->warmup, *global_iter, sr->bytes);
		/* nccl-tests' #wrong: the elements of the first check that failed. */
		if (wrong && !sr->verify_errors++)
			sr->wrong = wrong;
		if (timed)
			sr->iters++;
		(*global_iter)++;
		__atomic_add_fetch(&rec->progress, 1, __ATOMIC_RELEASE);
	}
	return code;
}

/* One row: its buffers, its iterations; a skipped variant only counts. */
static int run_row(struct run_rank *ranks, const struct job_hooks *h, uint32_t si,
		   uint64_t *global_iter, struct run_proc_record *rec)
{
	const struct run_opts *o = ranks[0].o;
	uint32_t R = o->ranks_per_proc;
	struct run_row row;
	int code = RUN_EXIT_OK;

	run_row_of(o, si, &row);
	if (row.skipped) {
		__atomic_add_fetch(&rec->progress, o->warmup + o->iters, __ATOMIC_RELEASE);
		return RUN_EXIT_OK;
	}
	run_phase("%s %" PRIu64 " B", run_coll_name(o->coll), row.bytes);
	for (uint32_t i = 0; i < R && !code; i++)
		code = run_buffers_alloc(&ranks[i], &row);
	if (!code)
		code = run_size(ranks, h, si, global_iter, rec);
	/* On failure the buffers may still be in started blocks: teardown frees them. */
	for (uint32_t i = 0; i < R && !code; i++)
		run_buffers_free(&ranks[i]);
	return code;
}

int run_job(const struct run_opts *o, const struct run_place *place, struct run_proc_record *rec)
{
	uint32_t R = o->ranks_per_proc;
	struct run_rank *ranks = calloc(R, sizeof(*ranks));
	struct job_hooks hooks = { .corrupt_rank = -1 };
	uint64_t global_iter = 0;
	int code;

	run_error_init(rec);
	if (!ranks)
		return run_fail(RUN_EXIT_FAILURE, "out of memory");
	hooks.corrupt_rank = run_corrupt_hook(&hooks.corrupt_row);
	hooks.kill_rank = run_kill_hook(&hooks.kill_iter);
	hooks.crash_rank = run_crash_hook(&hooks.crash_iter, &hooks.crash_sig);
	/*
	 * Forked by nproxy-run's supervisor, a rank keeps going a little past
	 * --timeout: the supervisor, which has hang-report's snapshot, stops
	 * every rank at --timeout and names the one that stalled.  A rank
	 * that gave up first would exit, and the others would report it dead.
	 */
	place_ranks(ranks, o, place,
		    run_now() + o->timeout_s + (place->launched ? 0 : RUN_SUPERVISED_GRACE_S));
	code = run_ranks_open(ranks, R);
	if (!code) {
		rec->proxy_threads = nproxy_proxy_group_count();
		snprintf(rec->provider, sizeof(rec->provider), "%s",
			 nproxy_net_provider(ranks[0].net));
		snprintf(rec->handshake, sizeof(rec->handshake), "%s",
			 nproxy_hs_backend_name(nproxy_hs_backend_of(ranks[0].hs)));
	}
	if (!code)
		code = run_memory_check(ranks, R, ranks[0].bus_size);
	for (uint32_t si = 0; si < o->n_rows && !code; si++)
		code = run_row(ranks, &hooks, si, &global_iter, rec);
	run_phase("teardown");
	for (uint32_t i = 0; i < R; i++)
		run_kill_point(RUN_KILL_TEARDOWN, ranks[i].rank);
	run_ranks_close(ranks, R);
	free(ranks);
	if (!code && rec->error[0])
		code = rec->exit_code;
	if (code && !rec->exit_code)
		rec->exit_code = code;
	return code;
}
