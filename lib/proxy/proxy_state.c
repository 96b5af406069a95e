// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Publishing the proxy's state for tools (nproxyctl top / hang-report):
 * the slow parts -- attach, detach, slot claim, the worker's page list.
 * The per-transition hooks are inline in proxy_internal.h; the device
 * program is recorded by the handshake (handshake.c), which owns the page.
 * Layout and reader rules: struct nproxy_proxy_state in <linux/nproxy.h>,
 * Documentation/uapi.md.
 */
#include <string.h>
#include <unistd.h>
#include "proxy_internal.h"

void npx_proxy_state_worker_publish(struct proxy_state_worker *w, int tid, uint32_t state)
{
	uint64_t now = npx_coarse_now_ns();
	uint32_t i;

	w->state = state;
	for (i = 0; i < w->n_pages; i++) {
		struct nproxy_proxy_state *ps = w->pages[i];

		__atomic_store_n(&ps->worker_tid, tid, __ATOMIC_RELAXED);
		__atomic_store_n(&ps->worker_state_ns, now, __ATOMIC_RELAXED);
		__atomic_store_n(&ps->worker_state, state, __ATOMIC_RELEASE);
	}
}

void npx_proxy_state_attach(struct nproxy_comm *comm)
{
	struct nproxy_proxy_state *ps = nproxy_hs_proxy_state(comm->hs);
	struct proxy_queue *q = comm->queue;
	struct proxy_state_worker *w = &q->pub;

	if (!ps)
		return;
	/* A region reused by a second comm starts over (seq_cst: a full
	 * barrier before the rewrite, on the slow path). */
	__atomic_store_n(&ps->magic, 0, __ATOMIC_SEQ_CST);
	memset(ps->tasks, 0, sizeof(ps->tasks));
	ps->version = NPROXY_PROXY_STATE_VERSION;
	ps->size = sizeof(*ps);
	ps->pid = (uint32_t)getpid();
	ps->ppid = (uint32_t)getppid();
	ps->rank = comm->rank;
	ps->n_ranks = comm->n_ranks;
	ps->gid = comm->gid;
	ps->device_index = comm->device_index;
	ps->timeout_s = (uint32_t)(((uint64_t)comm->timeout_ms + 999) / 1000);
	ps->flags = (comm->flags & NPROXY_COMM_F_DEVICE_WAIT ? NPROXY_PROXY_STATE_F_DEVICE_WAIT : 0) |
		    (comm->flags & NPROXY_COMM_F_SKIP_NET ? NPROXY_PROXY_STATE_F_SKIP_NET : 0);
	ps->attach_ns = npx_coarse_now_ns();
	ps->ops_enqueued = 0;
	ps->next_slot = 0;
	ps->worker_tid = __atomic_load_n(&q->tid, __ATOMIC_ACQUIRE);
	ps->worker_state_ns = ps->attach_ns;
	comm->pub = ps;

	npx_proxy_queue_lock(q);
	ps->worker_state = w->state ? w->state : NPROXY_WORKER_SLEEPING;
	if (w->n_pages < PROXY_STATE_MAX_PAGES)
		w->pages[w->n_pages++] = ps;
	npx_proxy_queue_unlock(q);
	/* Readers trust the page once they see the magic. */
	__atomic_store_n(&ps->magic, NPROXY_PROXY_STATE_MAGIC, __ATOMIC_RELEASE);
}

void npx_proxy_state_detach(struct nproxy_comm *comm)
{
	struct nproxy_proxy_state *ps = comm->pub;
	struct proxy_state_worker *w = &comm->queue->pub;
	uint32_t i;

	if (!ps)
		return;
	npx_proxy_queue_lock(comm->queue);
	for (i = 0; i < w->n_pages; i++) {
		if (w->pages[i] == ps) {
			w->pages[i] = w->pages[--w->n_pages];
			break;
		}
	}
	npx_proxy_queue_unlock(comm->queue);
	__atomic_store_n(&ps->worker_state_ns, npx_coarse_now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&ps->worker_state, NPROXY_WORKER_STOPPED, __ATOMIC_RELEASE);
}

/* The stream index of a trigger word of the comm's own region, or -1. */
static int trigger_stream(struct nproxy_comm *comm, const volatile uint32_t *word)
{
	uint32_t s, n = nproxy_hs_n_streams(comm->hs);

	for (s = 0; s < n; s++)
		if (nproxy_hs_trigger(comm->hs, s) == word)
			return (int)s;
	return -1;
}

struct nproxy_proxy_task *npx_proxy_state_task_claim(struct nproxy_comm *comm,
						 const struct proxy_task *task)
{
	struct nproxy_proxy_state *ps = comm->pub;
	struct nproxy_proxy_task *slot;
	uint32_t i, mask = 0;
	uint64_t n;

	if (!ps)
		return NULL;
	n = __atomic_fetch_add(&ps->next_slot, 1, __ATOMIC_RELAXED);
	slot = &ps->tasks[n % NPROXY_PROXY_STATE_TASKS];
	for (i = 0; i < task->streams_n; i++) {
		int stream = trigger_stream(comm, task->trigger_words[i]);

		if (stream >= 0)
			mask |= 1u << stream;
	}
	proxy_state_task_fill(slot, (uint16_t)task->ops->type, task->status->enc_ctx, task->exec_id,
			      mask);
	if (task->ops->type == NPROXY_TASK_NETWORK)
		__atomic_store_n(&ps->ops_enqueued,
				 __atomic_load_n(&ps->ops_enqueued, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	return slot;
}
