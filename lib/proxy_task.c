// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The task base: the refcounted status object, the device-trigger gate,
 * and the consumer side (check / wait on a published status).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include "proxy_internal.h"

struct proxy_task_status *proxy_status_new(const struct nproxy_comm *comm, uint64_t ctx,
					   enum nproxy_task_type type)
{
	struct proxy_task_status *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->progress_status = NPROXY_SUCCESS;
	st->run_state = NPROXY_TASK_STATE_INIT;
	st->task_type = type;
	st->enc_ctx = ctx;
	st->comm = comm;
	st->refcnt = 1;		/* the creator's; task and list take their own */
	return st;
}

void proxy_status_put(struct proxy_task_status *st)
{
	if (st && __atomic_sub_fetch(&st->refcnt, 1, __ATOMIC_ACQ_REL) == 0)
		free(st);
}

static void proxy_status_get(struct proxy_task_status *st)
{
	__atomic_add_fetch(&st->refcnt, 1, __ATOMIC_RELAXED);
}

void proxy_task_init(struct proxy_task *task, const struct proxy_task_ops *ops,
		     struct nproxy_comm *comm, struct proxy_task_status *st,
		     uint64_t exec_id, uint32_t streams_n,
		     volatile uint32_t *const *trigger_words)
{
	uint32_t i;

	task->ops = ops;
	task->comm = comm;
	task->rank = comm->rank;
	task->exec_id = exec_id;
	task->status = st;
	proxy_status_get(st);
	task->streams_n = streams_n;
	/* Copy only the valid prefix: nothing past streams_n is ever touched. */
	for (i = 0; i < streams_n; i++)
		task->trigger_words[i] = trigger_words[i];
	task->next = NULL;
}

void proxy_task_fini(struct proxy_task *task)
{
	proxy_status_put(task->status);
	task->status = NULL;
}

/* The seed's can_start_proxy_task: one acquire load per valid stream. */
bool proxy_task_can_start(const struct proxy_task *task)
{
	uint32_t i;

	for (i = 0; i < task->streams_n; i++)
		if (nproxy_trigger_load(task->trigger_words[i]) == NPROXY_PROXY_TRIGGER_SENTINEL)
			return false;
	return true;
}

/* The seed's clear_start_proxy_task_flag: consume with release stores of 0. */
void proxy_task_clear_start_flag(struct proxy_task *task)
{
	uint32_t i;

	for (i = 0; i < task->streams_n; i++)
		nproxy_trigger_clear(task->trigger_words[i]);
}

/* ---- consumer ---- */

enum nproxy_status nproxy_check_status(struct nproxy_comm *comm, uint64_t ctx,
				       enum nproxy_task_type type, bool *done,
				       enum nproxy_status *status)
{
	struct proxy_queue *q;
	struct proxy_task_status *st, *found = NULL;
	uint32_t rs;

	if (!comm || !done || !status)
		return NPROXY_INVALID;
	q = comm->queue;
	pthread_mutex_lock(&q->state_mtx);
	for (st = q->status_head.next; st != &q->status_head; st = st->next) {
		if (st->comm == comm && st->enc_ctx == ctx && st->task_type == type) {
			found = st;
			break;
		}
	}
	if (!found) {
		pthread_mutex_unlock(&q->state_mtx);
		return NPROXY_FAILURE;
	}
	/* run_state first (acquire), then the status published before it. */
	rs = proxy_status_run_state(found);
	*status = (enum nproxy_status)__atomic_load_n(&found->progress_status, __ATOMIC_RELAXED);
	*done = rs == NPROXY_TASK_STATE_DONE;
	if (*done) {
		found->prev->next = found->next;
		found->next->prev = found->prev;
		found->prev = found->next = NULL;
	} else {
		found = NULL;
	}
	pthread_mutex_unlock(&q->state_mtx);
	if (found)
		proxy_status_put(found);	/* the list's reference */
	return NPROXY_SUCCESS;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The seed's enc_consume_proxy_task_status: check + short sleep, with a deadline. */
enum nproxy_status nproxy_wait_status(struct nproxy_comm *comm, uint64_t ctx,
				      enum nproxy_task_type type, uint32_t timeout_ms)
{
	uint64_t timeout_ns, deadline;
	long sleep_ns = 1000;	/* 1 us, doubling to 256 us: cheap when fast, idle when slow */
	enum nproxy_status st, rc;
	bool done;

	if (!comm)
		return NPROXY_INVALID;
	timeout_ns = timeout_ms ? (uint64_t)timeout_ms * 1000000ull
				: (uint64_t)comm->timeout_s * 1000000000ull;
	deadline = mono_ns() + timeout_ns;
	for (;;) {
		rc = nproxy_check_status(comm, ctx, type, &done, &st);
		if (rc != NPROXY_SUCCESS)
			return rc;
		if (done) {
			if (st != NPROXY_SUCCESS)
				nproxy_log(NPROXY_LOG_ERROR,
					   "[nec_dev %u gid %u] Proxy failed to execute task, status = %d",
					   comm->device_index, comm->gid, (int)st);
			return st;
		}
		if (mono_ns() >= deadline) {
			nproxy_log(NPROXY_LOG_ERROR,
				   "[nec_dev %u gid %u] Timeout exceeded: Waiting on proxy task type %d: %u sec",
				   comm->device_index, comm->gid, (int)type,
				   (unsigned int)((timeout_ns + 999999999ull) / 1000000000ull));
			return NPROXY_TIMEOUT;
		}
		{
			struct timespec ts = { 0, sleep_ns };

			nanosleep(&ts, NULL);
		}
		if (sleep_ns < 256000)
			sleep_ns *= 2;
	}
}

const char *nproxy_task_type_str(enum nproxy_task_type type)
{
	switch (type) {
	case NPROXY_TASK_UNKNOWN:
		return "UNKNOWN";
	case NPROXY_TASK_NETWORK:
		return "NETWORK";
	case NPROXY_TASK_BARRIER:
		return "BARRIER";
	}
	return "INVALID";
}

const char *nproxy_task_run_state_str(enum nproxy_task_run_state state)
{
	switch (state) {
	case NPROXY_TASK_STATE_INIT:
		return "INIT";
	case NPROXY_TASK_STATE_PROGRESSING:
		return "PROGRESSING";
	case NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER:
		return "WAITING_DEVICE_TRIGGER";
	case NPROXY_TASK_STATE_IDLE:
		return "IDLE";
	case NPROXY_TASK_STATE_DONE:
		return "DONE";
	}
	return "INVALID";
}
