// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The task base: the refcounted status object and the device-trigger gate
 * (the consumer side is proxy_consumer.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include "proxy_internal.h"

struct proxy_task_status *npx_proxy_status_new(struct nproxy_comm *comm, uint64_t ctx,
					   enum nproxy_task_type type)
{
	struct proxy_task_status *st = npx_proxy_cache_get(comm, PROXY_CACHE_STATUS);

	if (st)
		memset(st, 0, sizeof(*st));
	else
		st = calloc(1, sizeof(*st));
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

void npx_proxy_status_put(struct proxy_task_status *st)
{
	if (st && __atomic_sub_fetch(&st->refcnt, 1, __ATOMIC_ACQ_REL) == 0 &&
	    !npx_proxy_cache_put((struct nproxy_comm *)st->comm, PROXY_CACHE_STATUS, st))
		free(st);
}

void npx_proxy_task_init(struct proxy_task *task, const struct proxy_task_ops *ops,
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
	st->pub = npx_proxy_state_task_claim(comm, task);
}

void npx_proxy_task_fini(struct proxy_task *task)
{
	npx_proxy_status_put(task->status);
	task->status = NULL;
}

/* libnrt's can_start_proxy_task: one acquire load per valid stream. */
bool npx_proxy_task_can_start(const struct proxy_task *task)
{
	uint32_t i;

	for (i = 0; i < task->streams_n; i++)
		if (nproxy_trigger_load(task->trigger_words[i]) == NPROXY_PROXY_TRIGGER_SENTINEL)
			return false;
	return true;
}

/* libnrt's clear_start_proxy_task_flag: consume with release stores of 0. */
void npx_proxy_task_clear_start_flag(struct proxy_task *task)
{
	uint32_t i;

	for (i = 0; i < task->streams_n; i++)
		nproxy_trigger_clear(task->trigger_words[i]);
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
