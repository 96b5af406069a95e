// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The barrier task: libnrt's enc_barrier_proxy_task, host-side only.
 *
 *   INIT / WAITING_DEVICE_TRIGGER  wait for the op's trigger gate (the same
 *                                  words as the network task), consume it,
 *                                  arrive at the host barrier
 *   PROGRESSING / IDLE             test the host barrier; once every rank
 *                                  arrived, the leader (rank 0) increments
 *                                  the barrier-done semaphores -> DONE
 *
 * Unlike libnrt (a usleep poll inside step) nothing here blocks: the worker
 * steps the barriers of several ranks on one thread, and one rank blocking
 * would keep the others from ever arriving.
 */
#include <stdlib.h>
#include <string.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include "proxy_internal.h"

struct barrier_task {
	struct proxy_task base;		/* first: the worker sees a proxy_task */
	struct nproxy_host_barrier barrier;
	struct nproxy_device_sems dev;
	uint64_t seq;			/* this op's host barrier number */
	uint32_t n_sems;
	uint32_t sems[NPROXY_PROXY_MAX_BARRIER_SEMS];
};

static struct barrier_task *to_barrier(struct proxy_task *t)
{
	return (struct barrier_task *)t;
}

static void barrier_fail(struct barrier_task *bt, const char *what, enum nproxy_status rc)
{
	const struct nproxy_comm *comm = bt->base.comm;

	nproxy_log(NPROXY_LOG_ERROR, "[nec_dev %u] host barrier %s (rank %u seq %llu) returns %d",
		   comm->device_index, what, comm->rank, (unsigned long long)bt->seq, (int)rc);
	bt->base.comm->barrier_turn = bt->seq;
	proxy_status_publish(bt->base.status, rc, NPROXY_TASK_STATE_DONE);
}

/* libnrt's inc_leader_sps_barrier_done_semas. */
static void barrier_leader_signal(struct barrier_task *bt)
{
	uint32_t i;

	if (bt->base.comm->rank != 0)
		return;
	for (i = 0; i < bt->n_sems; i++)
		nproxy_device_sem_add(&bt->dev, bt->sems[i], 1);
}

static void barrier_step(struct proxy_task *t)
{
	struct barrier_task *bt = to_barrier(t);
	enum nproxy_status rc;
	bool done = true;

	switch ((enum nproxy_task_run_state)proxy_status_run_state(t->status)) {
	case NPROXY_TASK_STATE_INIT:
	case NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER:
		/* The previous op's barrier first: host barriers go in order. */
		if (bt->seq != t->comm->barrier_turn + 1)
			break;
		if (!npx_proxy_task_can_start(t)) {
			proxy_status_set_state(t->status, NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER);
			break;
		}
		npx_proxy_task_clear_start_flag(t);
		nproxy_log(NPROXY_LOG_DEBUG, "[nec_dev %u] run barrier proxy task for ctx %llu",
			   t->comm->device_index, (unsigned long long)t->status->enc_ctx);
		if (bt->barrier.ops) {
			rc = bt->barrier.ops->arrive(bt->barrier.ctx, bt->seq);
			if (rc != NPROXY_SUCCESS) {
				barrier_fail(bt, "arrive", rc);
				break;
			}
		}
		proxy_status_set_state(t->status, NPROXY_TASK_STATE_PROGRESSING);
		/* Tested at once: a barrier that is done already (or deferred) says so in this tick. */
		__attribute__((fallthrough));
	case NPROXY_TASK_STATE_PROGRESSING:
	case NPROXY_TASK_STATE_IDLE:
		if (bt->barrier.ops) {
			rc = bt->barrier.ops->test(bt->barrier.ctx, bt->seq, &done);
			t->idle_announced = rc == NPROXY_BUSY && !done;
			if (t->idle_announced) {
				/* IDLE before the flag: whoever sees DEFERRED sees IDLE. */
				proxy_status_set_state(t->status, NPROXY_TASK_STATE_IDLE);
				proxy_state_task_flags(t->status->pub, NPROXY_PROXY_TASK_F_DEFERRED);
				break;
			}
			proxy_state_task_flags(t->status->pub, 0);
			if (rc != NPROXY_SUCCESS) {
				barrier_fail(bt, "test", rc);
				break;
			}
		}
		if (!done) {
			proxy_status_set_state(t->status, NPROXY_TASK_STATE_IDLE);
			break;
		}
		barrier_leader_signal(bt);
		t->comm->barrier_turn = bt->seq;
		proxy_status_publish(t->status, NPROXY_SUCCESS, NPROXY_TASK_STATE_DONE);
		break;
	case NPROXY_TASK_STATE_DONE:
		nproxy_log(NPROXY_LOG_ERROR, "Task shouldn't be polled after it reached a done state");
		break;
	}
}

static void barrier_destroy(struct proxy_task *t)
{
	struct nproxy_comm *comm = t->comm;

	/* An aborted barrier must not hold back the ones after it. */
	if (comm->barrier_turn < to_barrier(t)->seq)
		comm->barrier_turn = to_barrier(t)->seq;
	npx_proxy_task_fini(t);
	if (!npx_proxy_cache_put(comm, PROXY_CACHE_BARRIER_TASK, t))
		free(to_barrier(t));
}

/*
 * Called once the op's tasks all exist (a failed enqueue must not use up a
 * number): every rank enqueues its ops in the same order, so the same op
 * gets the same host barrier seq on every rank.
 */
void npx_proxy_barrier_task_commit(struct proxy_task *t)
{
	to_barrier(t)->seq = __atomic_add_fetch(&t->comm->barrier_seq, 1, __ATOMIC_RELAXED);
}

static const struct proxy_task_ops barrier_task_ops = {
	.type = NPROXY_TASK_BARRIER,
	.step = barrier_step,
	.destroy = barrier_destroy,
};

struct proxy_task *npx_proxy_barrier_task_new(struct nproxy_comm *comm,
					  const struct nproxy_cc_op *op,
					  volatile uint32_t *const *trigger_words,
					  const struct nproxy_device_sems *dev,
					  struct proxy_task_status *st, uint64_t exec_id)
{
	struct barrier_task *bt = npx_proxy_cache_get(comm, PROXY_CACHE_BARRIER_TASK);
	uint32_t i;

	if (bt)
		memset(bt, 0, sizeof(*bt));
	else
		bt = calloc(1, sizeof(*bt));
	if (!bt)
		return NULL;
	bt->barrier = comm->barrier;
	bt->dev = *dev;
	bt->n_sems = op->n_barrier_sems;
	for (i = 0; i < bt->n_sems; i++)
		bt->sems[i] = op->barrier_sems[i];
	npx_proxy_task_init(&bt->base, &barrier_task_ops, comm, st, exec_id, op->streams_n,
			trigger_words);
	return &bt->base;
}
