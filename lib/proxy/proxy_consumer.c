// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The consumer side: one wait on a task's published status (status_wait),
 * and the three public names that wrap it: nproxy_await_status() (done and
 * status out), nproxy_check_status() (look once) and nproxy_wait_status()
 * (until done or a deadline, the reference runtime's words in the log).  A
 * waiting consumer either parks on the status word until the worker's DONE
 * publish wakes it, or steps the group itself (NPROXY_CALLER_DRIVES,
 * npx_proxy_queue_drive() in proxy_queue.c).
 */
#include <stdlib.h>
#include <nproxy/log.h>
#include "proxy_internal.h"

/*
 * The group this thread drove last, left in its grace (a pointer compared
 * against the live groups, never followed on its own).
 */
static __thread const struct proxy_queue *graced_by_this_thread;

/*
 * This thread is about to drive q (a wait, or an enqueue of ops it will
 * wait on): the grace it left on another group ends now, since it is not
 * coming back there soon, and q's is the one to end next time.
 */
void npx_proxy_thread_drives(const struct proxy_queue *q)
{
	if (graced_by_this_thread && graced_by_this_thread != q)
		npx_proxy_registry_end_grace(graced_by_this_thread);
	graced_by_this_thread = q;
}

/* Called with q->state_mtx held. */
static struct proxy_task_status *status_find(struct proxy_queue *q, const struct nproxy_comm *comm,
					     uint64_t ctx, enum nproxy_task_type type)
{
	struct proxy_task_status *st;

	for (st = q->status_head.next; st != &q->status_head; st = st->next)
		if (st->comm == comm && st->enc_ctx == ctx && st->task_type == type)
			return st;
	return NULL;
}

/*
 * Until st is DONE or timeout_ns passed: spin for spin_ns (a hand-off that
 * is about to happen costs no system call), then park on the run_state word,
 * which the worker's DONE publish wakes.
 */
static void status_wait_done(struct proxy_queue *q, struct proxy_task_status *st,
			     uint64_t timeout_ns, uint64_t spin_ns)
{
	uint64_t start = npx_now_ns(), now = start;

	/* The waiting thread steps the group itself (proxy_queue.c). */
	if (npx_proxy_queue_caller_drives(q, st)) {
		npx_proxy_thread_drives(q);
		npx_proxy_queue_drive(q, st, timeout_ns);
		return;
	}

	while (now - start < spin_ns && now - start < timeout_ns) {
		for (int i = 0; i < 64; i++) {
			if (proxy_status_run_state(st) == NPROXY_TASK_STATE_DONE)
				return;
			wake_cpu_relax();
		}
		now = npx_now_ns();
	}
	for (;;) {
		uint32_t seen = __atomic_load_n(&st->run_state, __ATOMIC_SEQ_CST);

		if (seen == NPROXY_TASK_STATE_DONE || now - start >= timeout_ns)
			return;
		wake_word_wait(&st->run_state, &st->sleepers, seen, timeout_ns - (now - start));
		now = npx_now_ns();
	}
}

/*
 * The one wait of the status family, in the op verb's terms
 * (nproxy_coll_wait()): up to timeout_ms (0: look once) for the task to
 * reach DONE.  NPROXY_SUCCESS with *status (the task's, consumed: its node
 * is erased) when it is done, NPROXY_BUSY when it is not yet,
 * NPROXY_NOT_FOUND when no such task exists (or another thread consumed it
 * meanwhile), NPROXY_INVALID for a NULL comm.  Logs nothing but the
 * wrappers' words.
 */
static enum nproxy_status status_wait(struct nproxy_comm *comm, uint64_t ctx,
				      enum nproxy_task_type type, uint32_t timeout_ms,
				      enum nproxy_status *status)
{
	struct proxy_task_status *found, *put_list = NULL, *put_wait = NULL;
	enum nproxy_status rc = NPROXY_BUSY;
	struct proxy_queue *q;
	uint32_t rs;

	if (!comm)
		return NPROXY_INVALID;
	q = comm->queue;
	pthread_mutex_lock(&q->state_mtx);
	found = status_find(q, comm, ctx, type);
	if (!found) {
		pthread_mutex_unlock(&q->state_mtx);
		/* A normal answer to a poll (consumed already): no log line. */
		return npx_comm_note(comm, NPROXY_NOT_FOUND,
				    "no %s task with ctx %llu (never enqueued, or consumed)",
				    nproxy_task_type_str(type), (unsigned long long)ctx);
	}
	rs = proxy_status_run_state(found);
	if (rs != NPROXY_TASK_STATE_DONE && timeout_ms) {
		/* Wait without the lock, holding a reference of our own. */
		proxy_status_get(found);
		put_wait = found;
		pthread_mutex_unlock(&q->state_mtx);
		status_wait_done(q, found, (uint64_t)timeout_ms * 1000000ull, comm->spin_ns);
		pthread_mutex_lock(&q->state_mtx);
		rs = proxy_status_run_state(found);
	}
	/* run_state first (acquire), then the status published before it. */
	*status = (enum nproxy_status)__atomic_load_n(&found->progress_status, __ATOMIC_RELAXED);
	if (rs == NPROXY_TASK_STATE_DONE) {
		if (found->prev) {
			found->prev->next = found->next;
			found->next->prev = found->prev;
			found->prev = found->next = NULL;
			put_list = found;	/* the list's reference */
			rc = NPROXY_SUCCESS;
		} else {
			rc = NPROXY_NOT_FOUND;	/* another consumer took it meanwhile */
		}
	}
	pthread_mutex_unlock(&q->state_mtx);
	npx_proxy_status_put(put_list);
	npx_proxy_status_put(put_wait);
	return rc;
}

/* status_wait() with done/status out-parameters: NPROXY_BUSY is "not done". */
enum nproxy_status nproxy_await_status(struct nproxy_comm *comm, uint64_t ctx,
				       enum nproxy_task_type type, uint32_t timeout_ms,
				       bool *done, enum nproxy_status *status)
{
	enum nproxy_status task_st = NPROXY_SUCCESS, rc;

	if (!comm || !done || !status)
		return NPROXY_INVALID;
	rc = status_wait(comm, ctx, type, timeout_ms, &task_st);
	*done = rc == NPROXY_SUCCESS;
	*status = task_st;
	return rc == NPROXY_BUSY ? NPROXY_SUCCESS : rc;
}

/* libnrt's enc_proxy_check_status: the look-once wait. */
enum nproxy_status nproxy_check_status(struct nproxy_comm *comm, uint64_t ctx,
				       enum nproxy_task_type type, bool *done,
				       enum nproxy_status *status)
{
	return nproxy_await_status(comm, ctx, type, 0, done, status);
}

/*
 * libnrt's enc_consume_proxy_task_status: the wait up to a deadline (0: the
 * comm's), returning the task's status, in the reference runtime's log words.
 */
enum nproxy_status nproxy_wait_status(struct nproxy_comm *comm, uint64_t ctx,
				      enum nproxy_task_type type, uint32_t timeout_ms)
{
	enum nproxy_status st = NPROXY_SUCCESS, rc;

	if (!comm)
		return NPROXY_INVALID;
	if (!timeout_ms)
		timeout_ms = comm->timeout_ms;
	rc = status_wait(comm, ctx, type, timeout_ms, &st);
	if (rc == NPROXY_SUCCESS && st != NPROXY_SUCCESS) {
		nproxy_log(NPROXY_LOG_ERROR,
			   "[nec_dev %u gid %u] Proxy failed to execute task, status = %d",
			   comm->device_index, comm->gid, (int)st);
		npx_comm_note(comm, st, "%s task ctx %llu failed: %s", nproxy_task_type_str(type),
			      (unsigned long long)ctx, nproxy_status_str(st));
	}
	if (rc == NPROXY_SUCCESS)
		return st;
	if (rc != NPROXY_BUSY)
		return rc;
	nproxy_log(NPROXY_LOG_ERROR,
		   "[nec_dev %u gid %u] Timeout exceeded: Waiting on proxy task type %d: %u sec (who waits for whom: nproxyctl hang-report)",
		   comm->device_index, comm->gid, (int)type, (unsigned int)(((uint64_t)timeout_ms + 999u) / 1000u));
	return npx_comm_note(comm, NPROXY_TIMEOUT, "%s task ctx %llu not done after %u ms",
			     nproxy_task_type_str(type), (unsigned long long)ctx, timeout_ms);
}
