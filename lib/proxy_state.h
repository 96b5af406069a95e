/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Private to libnproxy: the proxy state a comm publishes for tools
 * (struct nproxy_proxy_state, <linux/nproxy.h>) in its handshake region's
 * NPROXY_OFF_PROXY page (kmod) or the memfd's fourth page (memfd backend).
 *
 * Cost model: the hooks below are a handful of plain stores into a page the
 * process already has mapped, plus one CLOCK_MONOTONIC_COARSE read (vDSO,
 * no syscall) per state change.  No lock, no atomic read-modify-write on
 * the worker's path.  A comm without a page (no handshake region, or a
 * module too old to have the page) has NULL slots and every hook is a
 * single compare.
 *
 * Writers: a task slot is filled by the producer in proxy_task_init()
 * (before the task is queued) and written only by the group's worker
 * after that; the header's worker fields are written by the worker under
 * q->mtx, and the comm's page list (struct proxy_state_worker) changes
 * under q->mtx too.
 */
#ifndef NPROXY_PROXY_STATE_H
#define NPROXY_PROXY_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <linux/nproxy.h>

struct nproxy_comm;
struct nproxy_hs;
struct proxy_queue;
struct proxy_task;

/* Comms of one proxy group whose pages show the worker's state. */
#define PROXY_STATE_MAX_PAGES	64

struct proxy_state_worker {
	struct nproxy_proxy_state *pages[PROXY_STATE_MAX_PAGES];
	uint32_t n_pages;
	uint32_t state;		/* enum nproxy_worker_state last published */
};

static inline uint64_t proxy_state_now_ns(void)
{
	struct timespec ts;

	/* COARSE: a vDSO read of the tick, no hardware counter, no syscall. */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Seqlock writer halves: the word is odd while the fields change.  Every
 * field between them is stored with PROXY_STATE_STORE (release), which keeps
 * it after the odd word without a fence: on x86 each is a plain mov, and
 * TSan (which has no atomic_thread_fence) follows it.
 */
#define PROXY_STATE_STORE(field, val)	__atomic_store_n(&(field), (val), __ATOMIC_RELEASE)

static inline uint32_t proxy_state_write_begin(uint32_t *seq)
{
	uint32_t s = __atomic_load_n(seq, __ATOMIC_RELAXED) + 1;

	__atomic_store_n(seq, s, __ATOMIC_RELAXED);
	return s;
}

static inline void proxy_state_write_end(uint32_t *seq, uint32_t s)
{
	__atomic_store_n(seq, s + 1, __ATOMIC_RELEASE);
}

/* ---- handshake side (handshake.c) ---- */
/* Keep a copy of the program about to be submitted: the hang evidence. */
void proxy_state_prog(struct nproxy_proxy_state *ps, const struct nproxy_prog_step *steps,
		      uint32_t n_steps);
/* The region's page, or NULL (no page: nothing is published). */
struct nproxy_proxy_state *proxy_state_of_hs(struct nproxy_hs *hs);

/* ---- comm side (proxy_registry.c) ---- */
/* Fill the header and show the group's worker in it; after comm->queue is set. */
void proxy_state_attach(struct nproxy_comm *comm);
/* Stop showing the worker; before the comm's tasks go away. */
void proxy_state_detach(struct nproxy_comm *comm);

/* ---- task side (proxy_task.c, proxy_net_task.c) ---- */
/* Claim the comm's next slot for task (producer, before the append). */
struct nproxy_proxy_task *proxy_state_task_claim(struct nproxy_comm *comm,
						 const struct proxy_task *task);

/* A run_state change (worker).  Repeated states cost one compare. */
static inline void proxy_state_task_state(struct nproxy_proxy_task *slot, uint32_t run_state,
					  int status)
{
	uint32_t s;
	uint64_t now;

	if (!slot || __atomic_load_n(&slot->run_state, __ATOMIC_RELAXED) == run_state)
		return;
	now = proxy_state_now_ns();
	s = proxy_state_write_begin(&slot->seq);
	PROXY_STATE_STORE(slot->run_state, (uint16_t)run_state);
	PROXY_STATE_STORE(slot->status, status);
	PROXY_STATE_STORE(slot->state_ns, now);
	PROXY_STATE_STORE(slot->progress_ns, now);
	proxy_state_write_end(&slot->seq, s);
}

/* A basic-block switch (worker): progress without a state change. */
static inline void proxy_state_task_bb(struct nproxy_proxy_task *slot, uint32_t bb)
{
	uint32_t s;

	if (!slot)
		return;
	s = proxy_state_write_begin(&slot->seq);
	PROXY_STATE_STORE(slot->bb, bb);
	PROXY_STATE_STORE(slot->progress_ns, proxy_state_now_ns());
	proxy_state_write_end(&slot->seq, s);
}

/* ---- worker side (proxy_queue.c), called with q->mtx held ---- */
void proxy_state_worker_publish(struct proxy_state_worker *w, int tid, uint32_t state);

static inline void proxy_state_worker(struct proxy_state_worker *w, int tid, uint32_t state)
{
	if (w->state != state)
		proxy_state_worker_publish(w, tid, state);
}

#endif
