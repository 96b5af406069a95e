// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Bananaphone public API: lifecycle (open as leader or follower / hangup /
 * close),
 * the collectives' entry points and error reporting.  The machinery lives
 * in bananaphone_{segment,socket,liveness,wait,ring,barrier}.c, errors are
 * recorded by bananaphone_error.c.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/log.h>
#include "common/common_internal.h"
#include "bananaphone_internal.h"

static enum nproxy_status check_job_id(const char *job_id)
{
	size_t len, i;

	if (!job_id)
		return npx_bp_error(NULL, NPROXY_INVALID, "bananaphone: job id is NULL");
	len = strlen(job_id);
	if (len == 0 || len > NPROXY_BP_MAX_JOB_ID)
		return npx_bp_error(NULL, NPROXY_INVALID,
				"bananaphone: job id '%.80s' must be 1..%d bytes, is %zu",
				job_id, NPROXY_BP_MAX_JOB_ID, len);
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)job_id[i];

		if (c <= 0x20 || c >= 0x7f || c == '/')
			return npx_bp_error(NULL, NPROXY_INVALID,
					"bananaphone: job id '%.80s' has a byte 0x%02x at %zu (printable ASCII without '/' and space only)",
					job_id, c, i);
	}
	return NPROXY_SUCCESS;
}

/*
 * Spinning only pays when the peer we wait for runs on another cpu.
 * Unpinned, a futex wake tends to move the woken rank onto the
 * waker's cpu (wake-affine), and a spin there only delays the peer:
 * so spin by default only when this process is pinned to one cpu and
 * every rank can have a cpu.  NPROXY_BP_SPIN_US overrides.
 */
static uint64_t wait_spin_ns(uint32_t n_ranks)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t spin_us, dflt_ns = 0;
	cpu_set_t mask;

	if (cpus > 0 && n_ranks <= (uint32_t)cpus &&
	    !sched_getaffinity(0, sizeof(mask), &mask) && CPU_COUNT(&mask) == 1)
		dflt_ns = BP_SPIN_NS;
	npx_env_u64("NPROXY_BP_SPIN_US", dflt_ns / 1000, 0, BP_MAX_SPIN_US, &spin_us);
	return spin_us * 1000;
}

/*
 * Yield before sleeping only when the ranks outnumber the cpus: the
 * peer is then often runnable on this cpu.  Otherwise a yield hands
 * the cpu to whatever else runs here (another job, a build) for its
 * whole time slice: milliseconds per barrier.  NPROXY_BP_YIELDS overrides.
 */
static uint32_t wait_yields(uint32_t n_ranks)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t yields;

	npx_env_u32("NPROXY_BP_YIELDS", cpus > 0 && n_ranks > (uint32_t)cpus ? BP_YIELDS : 0, 0,
		    BP_MAX_YIELDS, &yields);
	return yields;
}

static struct nproxy_bp *bp_alloc(const char *job_id, uint32_t rank, uint32_t n_ranks)
{
	struct nproxy_bp *bp = calloc(1, sizeof(*bp));
	uint32_t i;

	if (!bp)
		return NULL;
	bp->rank = rank;
	bp->n = n_ranks;
	bp->leader = rank == 0;
	bp->yields = (int)wait_yields(n_ranks);
	bp->spin_ns = wait_spin_ns(n_ranks);
	bp->state = BP_S_JOINING;
	bp->memfd = -1;
	bp->sock = -1;
	bp->watch_fd = -1;
	bp->watch_rank = BP_WAIT_ANY;
	bp->want_watch = BP_WAIT_ANY;
	snprintf(bp->job_id, sizeof(bp->job_id), "%s", job_id);
	for (i = 0; i < NPROXY_BP_MAX_RANKS; i++)
		bp->pidfds[i] = -1;
	for (i = 0; i < BP_MAX_CONNS; i++) {
		bp->conns[i].fd = -1;
		bp->conns[i].pidfd = -1;
	}
	bp->pids[rank] = getpid();
	return bp;
}

static void bp_free(struct nproxy_bp *bp)
{
	uint32_t i;

	npx_bp_close_join(bp);
	if (bp->sock >= 0)
		close(bp->sock);
	if (bp->memfd >= 0)
		close(bp->memfd);
	for (i = 0; i < NPROXY_BP_MAX_RANKS; i++)
		if (bp->pidfds[i] >= 0)
			close(bp->pidfds[i]);
	if (bp->watch_fd >= 0)
		close(bp->watch_fd);
	npx_bp_segment_unmap(bp);
	free(bp);
}

static enum nproxy_status bp_create(const char *job_id, uint32_t n_ranks, struct nproxy_bp **out)
{
	enum nproxy_status st;
	struct nproxy_bp *bp;

	if (n_ranks < 1 || n_ranks > NPROXY_BP_MAX_RANKS)
		return npx_bp_error(NULL, NPROXY_INVALID,
				"bananaphone job '%s': %u ranks, must be 1..%d",
				job_id, n_ranks, NPROXY_BP_MAX_RANKS);
	bp = bp_alloc(job_id, 0, n_ranks);
	if (!bp)
		return npx_bp_error(NULL, NPROXY_RESOURCE, "bananaphone job '%s': out of memory", job_id);
	st = npx_bp_segment_create(bp);
	if (!st)
		st = npx_bp_listen(bp);
	if (st) {
		npx_bp_keep_setup_err(bp);
		bp_free(bp);
		return st;
	}
	if (n_ranks == 1) {
		close(bp->memfd);
		bp->memfd = -1;
		bp->state = BP_S_READY;
	}
	*out = bp;
	return NPROXY_SUCCESS;
}

static enum nproxy_status bp_connect(const char *job_id, uint32_t rank, uint32_t n_ranks,
				     uint32_t timeout_ms, struct nproxy_bp **out)
{
	enum nproxy_status st;
	struct nproxy_bp *bp;

	if (n_ranks < 2 || n_ranks > NPROXY_BP_MAX_RANKS || rank < 1 || rank >= n_ranks)
		return npx_bp_error(NULL, NPROXY_INVALID,
				"bananaphone job '%s': rank %u of %u ranks is not a follower rank (1..n-1, n <= %d)",
				job_id, rank, n_ranks, NPROXY_BP_MAX_RANKS);
	bp = bp_alloc(job_id, rank, n_ranks);
	if (!bp)
		return npx_bp_error(NULL, NPROXY_RESOURCE, "bananaphone job '%s': out of memory", job_id);
	st = npx_bp_dial(bp, timeout_ms);
	if (st) {
		npx_bp_keep_setup_err(bp);
		bp_free(bp);
		return st;
	}
	*out = bp;
	return NPROXY_SUCCESS;
}

enum nproxy_status nproxy_bp_open(const struct nproxy_bp_opts *opts, struct nproxy_bp **out)
{
	enum nproxy_status st;

	npx_err_clear_open(NPX_ERR_BP);
	if (!out)
		return npx_bp_error(NULL, NPROXY_INVALID, "bananaphone: open: out is NULL");
	*out = NULL;
	st = NPX_OPTS_CHECK(opts, "bananaphone: open");
	if (st) {
		/* Logged by the check already: only keep the text. */
		return npx_err_set(NULL, NPX_ERR_BP, NPX_LOG_NONE, st, NULL,
				   "bananaphone: open: options NULL or of a wrong size (see the log)");
	}
	st = check_job_id(opts->job_id);
	if (st)
		return st;
	if (opts->rank == 0)
		return bp_create(opts->job_id, opts->n_ranks, out);
	return bp_connect(opts->job_id, opts->rank, opts->n_ranks, opts->timeout_ms, out);
}

uint32_t nproxy_bp_rank(const struct nproxy_bp *bp)
{
	return bp ? bp->rank : 0;
}

uint32_t nproxy_bp_size(const struct nproxy_bp *bp)
{
	return bp ? bp->n : 0;
}

/* Common entry check: usable state, finish joining (timeout_ms 0: one look). */
static enum nproxy_status bp_enter(struct nproxy_bp *bp, uint32_t timeout_ms, uint64_t *deadline,
				   const char *what)
{
	enum nproxy_status st;

	if (!bp)
		return NPROXY_INVALID_HANDLE;
	if (bp->state == BP_S_BROKEN)
		return bp->sticky;
	if (bp->state == BP_S_HUNG_UP)
		return npx_bp_error(bp, NPROXY_INVALID, "%s after this rank hung up", what);
	*deadline = npx_deadline_ns((uint64_t)timeout_ms);
	while (bp->state == BP_S_JOINING) {
		st = npx_bp_join_step(bp, *deadline);
		if (st)
			return st;
	}
	if (bp->state == BP_S_BROKEN)
		return bp->sticky;
	/* Rate-limited: also runs for calls that never have to wait. */
	return npx_bp_check_live(bp, false);
}

enum nproxy_status nproxy_bp_allgather(struct nproxy_bp *bp, const void *data, size_t len, void **out_bufs,
				size_t *out_lens, size_t *out_offs, uint32_t timeout_ms)
{
	uint8_t *parts[NPROXY_BP_MAX_RANKS] = { 0 };
	size_t lens[NPROXY_BP_MAX_RANKS] = { 0 };
	enum nproxy_status st;
	uint64_t deadline;
	size_t total = 0;
	uint8_t *all;
	uint32_t r;

	if (!bp)
		return NPROXY_INVALID_HANDLE;
	if (!out_bufs || !out_lens || !out_offs || (len && !data))
		return npx_bp_error(bp, NPROXY_INVALID, "allgather: NULL argument");
	*out_bufs = NULL;
	if (len > NPROXY_BP_MAX_BLOB)
		return npx_bp_error(bp, NPROXY_INVALID, "allgather: blob of %zu bytes exceeds %u",
				len, NPROXY_BP_MAX_BLOB);
	st = bp_enter(bp, timeout_ms, &deadline, "allgather");
	if (st)
		return st;
	st = npx_bp_ring_collective(bp, BP_OP_ALLGATHER, data, len, ~0ull >> (64 - bp->n), parts,
				lens, deadline);
	if (st)
		goto out;
	lens[bp->rank] = len;
	for (r = 0; r < bp->n; r++)
		total += lens[r];
	all = malloc(total ? total : 1);
	if (!all) {
		st = npx_bp_error(bp, NPROXY_RESOURCE, "allgather: out of memory for %zu bytes", total);
		goto out;
	}
	total = 0;
	for (r = 0; r < bp->n; r++) {
		const void *src = r == bp->rank ? data : parts[r];

		if (lens[r])
			memcpy(all + total, src, lens[r]);
		out_lens[r] = lens[r];
		out_offs[r] = total;
		total += lens[r];
	}
	*out_bufs = all;
out:
	for (r = 0; r < bp->n; r++)
		free(parts[r]);
	return st;
}

enum nproxy_status nproxy_bp_bcast(struct nproxy_bp *bp, const void *data, size_t len, void **out,
			    size_t *out_len, uint32_t timeout_ms)
{
	uint8_t *parts[NPROXY_BP_MAX_RANKS] = { 0 };
	size_t lens[NPROXY_BP_MAX_RANKS] = { 0 };
	enum nproxy_status st;
	uint64_t deadline;
	uint8_t *copy;

	if (!bp)
		return NPROXY_INVALID_HANDLE;
	if (out)
		*out = NULL;
	if (!out_len)
		return npx_bp_error(bp, NPROXY_INVALID, "bcast: out_len is NULL");
	if (bp->leader && len && !data)
		return npx_bp_error(bp, NPROXY_INVALID, "bcast: NULL data");
	if (bp->leader && len > NPROXY_BP_MAX_BLOB)
		return npx_bp_error(bp, NPROXY_INVALID, "bcast: blob of %zu bytes exceeds %u",
				len, NPROXY_BP_MAX_BLOB);
	st = bp_enter(bp, timeout_ms, &deadline, "bcast");
	if (st)
		return st;
	st = npx_bp_ring_collective(bp, BP_OP_BCAST, bp->leader ? data : NULL, bp->leader ? len : 0,
				1, parts, lens, deadline);
	if (st)
		goto out;
	if (bp->leader) {
		lens[0] = len;
		copy = NULL;
		if (out) {
			copy = malloc(len ? len : 1);
			if (!copy) {
				st = npx_bp_error(bp, NPROXY_RESOURCE, "bcast: out of memory");
				goto out;
			}
			if (len)
				memcpy(copy, data, len);
		}
	} else {
		copy = parts[0];
		parts[0] = NULL;
		if (!copy)
			copy = malloc(1);
		if (!out) {
			free(copy);
			copy = NULL;
		} else if (!copy) {
			st = npx_bp_error(bp, NPROXY_RESOURCE, "bcast: out of memory");
			goto out;
		}
	}
	*out_len = lens[0];
	if (out)
		*out = copy;
out:
	free(parts[0]);
	return st;
}

struct barrier_arg {
	uint64_t seq;
};

static enum bp_step barrier_step(struct nproxy_bp *bp, void *arg, uint32_t *wait_for)
{
	struct barrier_arg *ba = arg;

	return npx_bp_barrier_check(bp, ba->seq, wait_for);
}

enum nproxy_status nproxy_bp_barrier(struct nproxy_bp *bp, uint32_t timeout_ms)
{
	struct barrier_arg ba;
	enum nproxy_status st;
	uint64_t deadline;

	st = bp_enter(bp, timeout_ms, &deadline, "barrier");
	if (st)
		return st;
	/* A retry after a timeout waits for the barrier it already entered. */
	if (bp->barrier_retry) {
		ba.seq = bp->barrier_retry;
	} else {
		ba.seq = ++bp->barrier_seq;
		npx_bp_barrier_publish(bp, ba.seq);
	}
	st = npx_bp_wait(bp, barrier_step, &ba, deadline, "barrier");
	bp->barrier_retry = st == NPROXY_TIMEOUT ? ba.seq : 0;
	return st;
}

uint64_t nproxy_bp_barrier_next_seq(const struct nproxy_bp *bp)
{
	return bp ? bp->barrier_seq + 1 : 0;
}

enum nproxy_status nproxy_bp_barrier_arrive(struct nproxy_bp *bp, uint64_t seq)
{
	if (!bp)
		return NPROXY_INVALID_HANDLE;
	if (bp->state == BP_S_BROKEN)
		return bp->sticky;
	if (bp->state == BP_S_HUNG_UP)
		return npx_bp_error(bp, NPROXY_INVALID, "barrier_arrive after this rank hung up");
	if (seq != bp->barrier_seq + 1)
		return npx_bp_error(bp, NPROXY_INVALID,
				"barrier_arrive: seq %llu, expected %llu (barriers are numbered 1, 2, ...)",
				(unsigned long long)seq, (unsigned long long)bp->barrier_seq + 1);
	bp->barrier_seq = seq;
	/* Before the segment exists the arrival waits in barrier_seq and is
	 * published by nproxy_bp_barrier_test() once joining completes. */
	if (bp->state == BP_S_READY)
		npx_bp_barrier_publish(bp, seq);
	return NPROXY_SUCCESS;
}

enum nproxy_status nproxy_bp_barrier_test(struct nproxy_bp *bp, uint64_t seq, bool *done)
{
	enum nproxy_status st;
	uint32_t wait_for = BP_WAIT_ANY;
	enum bp_step step;

	if (!bp)
		return NPROXY_INVALID_HANDLE;
	if (!done)
		return npx_bp_error(bp, NPROXY_INVALID, "barrier_test: done is NULL");
	*done = false;
	if (bp->state == BP_S_BROKEN)
		return bp->sticky;
	if (bp->state == BP_S_HUNG_UP)
		return npx_bp_error(bp, NPROXY_INVALID, "barrier_test after this rank hung up");
	if (seq == 0 || seq > bp->barrier_seq)
		return npx_bp_error(bp, NPROXY_INVALID,
				"barrier_test: seq %llu was never arrived at (last %llu)",
				(unsigned long long)seq, (unsigned long long)bp->barrier_seq);
	if (bp->state == BP_S_JOINING) {
		st = npx_bp_join_step(bp, 0);	/* deadline 0: poll once, never sleep */
		if (st == NPROXY_TIMEOUT)
			return NPROXY_SUCCESS;
		if (st)
			return st;
		if (bp->state != BP_S_READY)
			return NPROXY_SUCCESS;
	}
	if (bp->barrier_published < bp->barrier_seq)
		npx_bp_barrier_publish(bp, bp->barrier_seq);
	step = npx_bp_barrier_check(bp, seq, &wait_for);
	bp->want_watch = wait_for;
	if (step == BP_STEP_ERROR)
		return bp->sticky;
	if (step == BP_STEP_DONE) {
		*done = true;
		return NPROXY_SUCCESS;
	}
	/* Not done: the worker calls again soon; poll the pidfds at most
	 * every BP_WAIT_SLICE_MS so a dead peer still surfaces. */
	return npx_bp_check_live(bp, false);
}

enum nproxy_status nproxy_bp_check(struct nproxy_bp *bp)
{
	if (!bp)
		return NPROXY_INVALID;
	if (bp->state == BP_S_BROKEN)
		return bp->sticky;
	if (bp->state != BP_S_READY)
		return NPROXY_SUCCESS;
	return npx_bp_check_live(bp, false);
}

void nproxy_bp_hangup(struct nproxy_bp *bp)
{
	if (!bp || bp->state == BP_S_HUNG_UP)
		return;
	if (bp->ctl) {
		atomic_store(&npx_bp_rank_ctl(bp, bp->rank)->left, 1);
		npx_bp_notify_all(bp, true);
	}
	if (bp->state == BP_S_JOINING || bp->sock >= 0)
		npx_bp_join_abort(bp, NPROXY_PEER_LEFT, "hung up before every rank joined");
	bp->state = BP_S_HUNG_UP;
}

/*
 * Release only: no "left" flag, so without a nproxy_bp_hangup() first, peers see
 * this rank as alive until the process exits and as dead afterwards (the
 * abnormal-exit path wants exactly that).
 */
void nproxy_bp_close(struct nproxy_bp *bp)
{
	if (!bp)
		return;
	bp_free(bp);
}
