/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Private to lib/proxy_*.c: the queue, the task base and the status object.
 *
 * Locks (never both held in the other order):
 *   registry_lock (proxy_registry.c)  the gid -> {queue, refcnt} map
 *   q->mtx                            q->queue + q->active: the right to
 *                                     step the group.  Whoever ticks (the
 *                                     worker, or a consumer that drives
 *                                     while it waits) holds it for a whole
 *                                     drain/step pass; producers push onto
 *                                     q->incoming without it
 *   q->state_mtx                      q->status list (consumers)
 * Order: registry_lock -> q->mtx -> q->state_mtx.
 */
#ifndef NPROXY_PROXY_INTERNAL_H
#define NPROXY_PROXY_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/nproxy.h>
#include <nproxy/handshake.h>
#include <nproxy/proxy.h>
#include "common/common_internal.h"

/*
 * ---- The proxy state page ----
 * The proxy state a comm publishes for tools
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
 * Writers: a task slot is filled by the producer in npx_proxy_task_init()
 * (before the task is queued) and written only by the group's worker
 * after that; the header's worker fields are written by the worker under
 * q->mtx, and the comm's page list (struct proxy_state_worker) changes
 * under q->mtx too.
 */
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

/* ---- comm side (proxy_registry.c) ---- */
/* Fill the header and show the group's worker in it; after comm->queue is set. */
void npx_proxy_state_attach(struct nproxy_comm *comm);
/* Stop showing the worker; before the comm's tasks go away. */
void npx_proxy_state_detach(struct nproxy_comm *comm);

/* ---- task side (proxy_task.c, proxy_net_task.c) ---- */
/* Claim the comm's next slot for task (producer, before the append). */
struct nproxy_proxy_task *npx_proxy_state_task_claim(struct nproxy_comm *comm,
						 const struct proxy_task *task);

/* A claimed slot's first contents: a task of type in INIT, stamped now. */
static inline void proxy_state_task_fill(struct nproxy_proxy_task *slot, uint16_t type,
					 uint64_t ctx, uint64_t exec_id, uint32_t trigger_mask)
{
	uint64_t now = npx_coarse_now_ns();
	uint32_t s = npx_seq_write_begin(&slot->seq);

	NPX_SEQ_STORE(slot->type, type);
	NPX_SEQ_STORE(slot->run_state, (uint16_t)NPROXY_TASK_STATE_INIT);
	NPX_SEQ_STORE(slot->ctx, ctx);
	NPX_SEQ_STORE(slot->exec_id, exec_id);
	NPX_SEQ_STORE(slot->enqueue_ns, now);
	NPX_SEQ_STORE(slot->state_ns, now);
	NPX_SEQ_STORE(slot->progress_ns, now);
	NPX_SEQ_STORE(slot->trigger_mask, trigger_mask);
	NPX_SEQ_STORE(slot->bb, 0);
	NPX_SEQ_STORE(slot->n_sems, 0);
	NPX_SEQ_STORE(slot->flags, 0);
	NPX_SEQ_STORE(slot->status, 0);
	npx_seq_write_end(&slot->seq, s);
}

/* A run_state change (worker).  Repeated states cost one compare. */
static inline void proxy_state_task_state(struct nproxy_proxy_task *slot, uint32_t run_state,
					  int status)
{
	uint32_t s;
	uint64_t now;

	if (!slot || __atomic_load_n(&slot->run_state, __ATOMIC_RELAXED) == run_state)
		return;
	now = npx_coarse_now_ns();
	s = npx_seq_write_begin(&slot->seq);
	NPX_SEQ_STORE(slot->status, status);
	NPX_SEQ_STORE(slot->state_ns, now);
	NPX_SEQ_STORE(slot->progress_ns, now);
	NPX_SEQ_STORE(slot->run_state, (uint16_t)run_state);	/* last: see _flags() */
	npx_seq_write_end(&slot->seq, s);
}

/*
 * The task's flags (worker).  A change restamps progress_ns: a barrier
 * leaving DEFERRED starts a wait of its own then, not when it was deferred.
 * The stamp goes first: a reader that polls one field without the seqlock
 * (a test, a debugger) and sees the new flags then sees its stamp too.
 */
static inline void proxy_state_task_flags(struct nproxy_proxy_task *slot, uint8_t flags)
{
	uint32_t s;

	if (!slot || __atomic_load_n(&slot->flags, __ATOMIC_RELAXED) == flags)
		return;
	s = npx_seq_write_begin(&slot->seq);
	NPX_SEQ_STORE(slot->progress_ns, npx_coarse_now_ns());
	NPX_SEQ_STORE(slot->flags, flags);
	npx_seq_write_end(&slot->seq, s);
}

/* A basic-block switch (worker): progress without a state change. */
static inline void proxy_state_task_bb(struct nproxy_proxy_task *slot, uint32_t bb)
{
	uint32_t s;

	if (!slot)
		return;
	s = npx_seq_write_begin(&slot->seq);
	NPX_SEQ_STORE(slot->progress_ns, npx_coarse_now_ns());
	NPX_SEQ_STORE(slot->bb, bb);
	npx_seq_write_end(&slot->seq, s);
}

/* ---- worker side (proxy_queue.c), called with q->mtx held ---- */
void npx_proxy_state_worker_publish(struct proxy_state_worker *w, int tid, uint32_t state);

static inline void proxy_state_worker(struct proxy_state_worker *w, int tid, uint32_t state)
{
	if (w->state != state)
		npx_proxy_state_worker_publish(w, tid, state);
}


struct proxy_task;
struct proxy_queue;

/* libnrt's enc_proxy_task_state: the one object worker and consumer share. */
struct proxy_task_status {
	int progress_status;		/* enum nproxy_status; atomic */
	uint32_t run_state;		/* enum nproxy_task_run_state; atomic */
	enum nproxy_task_type task_type;
	uint32_t refcnt;		/* task + status list; atomic */
	uint32_t sleepers;		/* consumers parked on run_state (lib/common/common_internal.h) */
	uint64_t enc_ctx;
	const struct nproxy_comm *comm;	/* ctx is unique per comm only */
	struct nproxy_proxy_task *pub;	/* published copy for tools, or NULL */
	/* NPROXY_CALLER_DRIVES=auto: a consumer waiting on this task steps the group. */
	bool auto_drive;
	/* q->status list links, under q->state_mtx */
	struct proxy_task_status *prev, *next;
};

/* C's vtable: step() is libnrt's vtable slot 0. */
struct proxy_task_ops {
	enum nproxy_task_type type;
	/* One tick; publishes status->{progress_status, run_state}. */
	void (*step)(struct proxy_task *task);
	/* Abort whatever the task holds (started blocks) and free it. */
	void (*destroy)(struct proxy_task *task);
};

struct proxy_task {
	const struct proxy_task_ops *ops;
	struct proxy_task_status *status;
	struct nproxy_comm *comm;
	uint32_t rank;			/* active-map bucket key */
	uint64_t exec_id;
	uint32_t streams_n;
	volatile uint32_t *trigger_words[NPROXY_PROXY_MAX_STREAMS];
	/* The words are the comm's hs's, whose device announces its stores. */
	bool trigger_notified;
	/* IDLE on something that announces itself (nproxy_comm_kick()): not polled. */
	bool idle_announced;
	struct proxy_task *next;	/* incoming / queue / active bucket link */
};

/* active_tasks: rank -> list, sorted by rank. */
struct proxy_rank_bucket {
	uint32_t rank;
	struct proxy_task *head, *tail;
	struct proxy_rank_bucket *next;
};

/*
 * Who steps a group while a consumer waits (NPROXY_CALLER_DRIVES, read once
 * per group): the waiting thread itself, or only the worker.
 */
enum proxy_caller_drives {
	PROXY_CALLER_DRIVES_AUTO = 0,	/* the rule in Documentation/proxy.md */
	PROXY_CALLER_DRIVES_ALWAYS = 1,
	PROXY_CALLER_DRIVES_NEVER = 2,
};

struct proxy_queue {
	pthread_mutex_t mtx;
	pthread_cond_t cv;
	struct proxy_task *incoming;	/* appended: lock-free push stack, newest first */
	struct proxy_task *queue_head, *queue_tail;	/* taken from incoming, not yet drained */
	struct proxy_rank_bucket *active;
	uint32_t lock_waiters;		/* producers waiting for mtx; atomic */
	bool stop;			/* atomic */
	/*
	 * What ends an idle spell, signalled by enqueue, stop and the devices'
	 * trigger notifications: the adaptive worker parks here after its
	 * spin window (lib/common/common_internal.h).
	 */
	struct wake wake;
	uint64_t spin_ns;		/* the adaptive policy's spin window */
	/*
	 * Consumers stepping the group while they wait (atomic).  While it is
	 * not 0 the worker does not tick: it parks on handback, which the
	 * last driver to leave signals when work is left (and an append
	 * signals when nobody drives).
	 */
	uint32_t drivers;
	struct wake handback;
	/*
	 * Until then (npx_now_ns(), atomic) the last driver's group is still
	 * its: the worker neither ticks nor is signalled, and looks again at
	 * this time on its own (PROXY_DRIVE_GRACE_NS after a driver left).
	 */
	uint64_t driven_until_ns;
	uint32_t drive_epoch;		/* drives begun (atomic): tells one long drive from many */
	/* When a driver's tick in progress began (npx_now_ns(), atomic; 0 between ticks). */
	uint64_t drive_tick_since_ns;
	/*
	 * ADAPTIVE: until then (npx_now_ns(), atomic) drivers spin without
	 * yielding, because a driver's yield lost a time slice (another
	 * process wants this cpu).  Kept here, not per drive: each op is a
	 * new drive, and one that learnt it afresh lost a slice per op.
	 */
	uint64_t drive_no_yield_until_ns;
	enum proxy_caller_drives caller_drives;

	pthread_mutex_t state_mtx;
	struct proxy_task_status status_head;	/* circular list sentinel */

	pthread_t thread;
	bool started;
	int tid;			/* atomic: the worker's gettid() */
	uint32_t gid;
	enum nproxy_idle_policy idle_policy;

	/* Counted by whoever ticks, under mtx (relaxed atomics: readers do
	 * not take mtx); the idle ones outside mtx with atomic adds. */
	uint64_t stat_ticks, stat_steps, stat_idle_ticks, stat_cv_waits;
	uint64_t stat_tasks_done, stat_tasks_active;
	uint64_t stat_idle_parks, stat_safety_timeouts;
	uint64_t stat_caller_ticks;	/* ticks made by a waiting consumer */
	/* The worker's state, shown in its comms' pages (under mtx). */
	struct proxy_state_worker pub;
};

/* Per-comm object caches (proxy_cache.c): no malloc per op in steady state. */
enum proxy_cache_kind {
	PROXY_CACHE_STATUS,
	PROXY_CACHE_NET_TASK,
	PROXY_CACHE_BARRIER_TASK,
	PROXY_CACHE_KINDS
};

struct proxy_cached;

struct proxy_cache {
	struct proxy_cached *head;	/* under comm->cache_lock */
	uint32_t count;
};

struct nproxy_comm {
	uint32_t rank, n_ranks, device_index, ranks_per_proxy, gid, flags;
	uint32_t timeout_ms;		/* nproxy_wait_status() with timeout 0 */
	uint64_t spin_ns;		/* consumer spin window before it parks */
	/* hs calls back on every trigger store: trigger waits need no polling */
	bool trigger_notify;
	struct nproxy_hs *hs;
	struct nproxy_seam seam;
	struct nproxy_host_barrier barrier;
	struct proxy_queue *queue;
	uint64_t next_ctx;		/* atomic: library-assigned ctx values */
	uint64_t barrier_seq;		/* atomic: host barrier sequence numbers */
	/*
	 * The last host barrier this comm finished (or failed): a barrier
	 * task arrives only at barrier_turn + 1, because a host barrier is
	 * entered once the one before it is done.  With the op verb an op's
	 * barrier task overlaps the next op, so two may be active at once.
	 * Touched only by the thread that steps the group.
	 */
	uint64_t barrier_turn;
	/*
	 * Network tasks of one comm run one at a time, in enqueue order: the
	 * seam names a block by (stream, bb) only.  net_seq is taken by
	 * producers (atomic); net_turn is touched only by the group's worker.
	 */
	uint64_t net_seq;
	uint64_t net_turn;
	pthread_mutex_t cache_lock;
	struct proxy_cache cache[PROXY_CACHE_KINDS];
	/* The hs region's proxy-state page (proxy_state.c), or NULL. */
	struct nproxy_proxy_state *pub;
	/* nproxy_comm_strerror(), by common's rule (errbuf.c): its producers
	 * and consumers are different threads, and each reads back its own. */
	struct npx_errbuf err;
};

/*
 * Record why a call on comm failed (nproxy_comm_strerror(); comm NULL: a
 * failed nproxy_comm_open(), this thread's nproxy_comm_strerror(NULL)), log
 * it at ERROR and return st.
 */
#define npx_comm_err(comm, st, ...) npx_comm_record(comm, NPROXY_LOG_ERROR, st, __VA_ARGS__)
/* The same without the log line: for failures logged in the reference
 * runtime's own words by the caller, and answers a poll expects. */
#define npx_comm_note(comm, st, ...) npx_comm_record(comm, NPX_LOG_NONE, st, __VA_ARGS__)
/* Both: the text recorded, logged at level (NPX_LOG_NONE: not logged). */
enum nproxy_status npx_comm_record(struct nproxy_comm *comm, enum nproxy_log_level level,
				   enum nproxy_status st, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ---- proxy_queue.c ---- */
struct proxy_queue *npx_proxy_queue_create(uint32_t gid, enum nproxy_idle_policy policy,
				       uint64_t spin_ns);
/* NPROXY_CALLER_DRIVES: auto (default), always, never. */
enum proxy_caller_drives npx_proxy_caller_drives_from_env(void);
/* End the grace the last driver left on q (the worker takes over now). */
void npx_proxy_queue_end_grace(struct proxy_queue *q);
/* npx_proxy_queue_end_grace(q) if q is still a live group (else nothing). */
void npx_proxy_registry_end_grace(const struct proxy_queue *q);
/* proxy_consumer.c: this thread drives q next (ends its grace elsewhere). */
void npx_proxy_thread_drives(const struct proxy_queue *q);
/* Does a consumer waiting on a task of this group step the group itself? */
bool npx_proxy_queue_caller_drives(const struct proxy_queue *q,
				   const struct proxy_task_status *st);
/*
 * auto's rule for one op: the waiting thread drives an op of a comm of at
 * most PROXY_AUTO_DRIVE_MAX_RANKS ranks whose reductions add up to at most
 * PROXY_AUTO_DRIVE_MAX_REDUCE bytes, when that comm is the only one open
 * in the process (Documentation/proxy.md).
 */
#define PROXY_AUTO_DRIVE_MAX_RANKS	NPX_AUTO_DRIVE_MAX_RANKS
#define PROXY_AUTO_DRIVE_MAX_REDUCE	NPX_AUTO_DRIVE_MAX_REDUCE
bool npx_proxy_auto_drives(uint32_t n_ranks, uint64_t reduce_bytes, uint32_t comms_open);
/*
 * Called by a group's worker, holding no lock, when a thread that drives
 * the group has been inside one tick for PROXY_STALL_NS: once per such
 * tick.  A tick never blocks, so one that long is stuck inside an engine
 * (a dead peer's shm lock: lib/rank sets the hook that releases those).
 * NULL: nothing is done.  Set once per process, before the first drive.
 */
void npx_proxy_set_stall_hook(void (*hook)(void));
/* Comms open in this process (nproxy_comm_open() minus nproxy_comm_close()). */
uint32_t npx_proxy_comms_open(void);
/*
 * Step the group from the calling thread (a consumer waiting on st) until
 * st is DONE, timeout_ns passed or the group stops; the worker is parked
 * meanwhile and gets the group back when this returns.
 */
void npx_proxy_queue_drive(struct proxy_queue *q, const struct proxy_task_status *st,
			   uint64_t timeout_ns);
/* Wake the worker out of an idle park (any thread; also a device callback). */
void npx_proxy_queue_kick(void *q);
/* The worker's spin window: NPROXY_SPIN_US or the default, in ns. */
uint64_t npx_proxy_spin_ns_from_env(void);
/* The consumer's: NPROXY_CONSUMER_SPIN_US or the default, in ns. */
uint64_t npx_proxy_consumer_spin_ns_from_env(void);
/* Start the worker, pinned to cpus when non-NULL. */
enum nproxy_status npx_proxy_queue_start(struct proxy_queue *q, const cpu_set_t *cpus);
/* stop = 1, notify, join (if started), free every task and status. */
void npx_proxy_queue_destroy(struct proxy_queue *q);
/* An enqueue its caller will drive: hold the worker off for a grace. */
void npx_proxy_queue_expect_driver(struct proxy_queue *q);
/* libnrt's append_task: publish status, then queue, then notify. */
void npx_proxy_queue_append(struct proxy_queue *q, struct proxy_task *const *tasks, uint32_t n);
/* Abort and drop every task and status node of comm. */
void npx_proxy_queue_drop_comm(struct proxy_queue *q, const struct nproxy_comm *comm);
/* Take mtx, announcing it so a spinning worker lets go between ticks. */
static inline void npx_proxy_queue_lock(struct proxy_queue *q)
{
	__atomic_add_fetch(&q->lock_waiters, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&q->mtx);
	__atomic_sub_fetch(&q->lock_waiters, 1, __ATOMIC_RELAXED);
}

static inline void npx_proxy_queue_unlock(struct proxy_queue *q)
{
	pthread_mutex_unlock(&q->mtx);
}
void npx_proxy_queue_stats(struct proxy_queue *q, struct nproxy_proxy_stats *out);
enum nproxy_idle_policy npx_proxy_idle_policy_from_env(void);

/* ---- proxy_cache.c ---- */
/* An object of kind put back earlier (its contents are stale), or NULL. */
void *npx_proxy_cache_get(struct nproxy_comm *comm, enum proxy_cache_kind kind);
/* Keep obj for reuse; false when the cache is full (the caller frees it). */
bool npx_proxy_cache_put(struct nproxy_comm *comm, enum proxy_cache_kind kind, void *obj);
/* Empty the cache of kind, calling release on every object (nproxy_comm_close). */
void npx_proxy_cache_drain(struct nproxy_comm *comm, enum proxy_cache_kind kind,
		       void (*release)(void *obj));

/* ---- proxy_task.c ---- */
struct proxy_task_status *npx_proxy_status_new(struct nproxy_comm *comm, uint64_t ctx,
					   enum nproxy_task_type type);
void npx_proxy_status_put(struct proxy_task_status *st);

static inline void proxy_status_get(struct proxy_task_status *st)
{
	__atomic_add_fetch(&st->refcnt, 1, __ATOMIC_RELAXED);
}

static inline uint32_t proxy_status_run_state(const struct proxy_task_status *st)
{
	return __atomic_load_n(&st->run_state, __ATOMIC_ACQUIRE);
}

/* Publish progress_status, then run_state: a consumer that reads DONE also
 * reads the status that goes with it, and one parked on the word is woken
 * (a futex wake only when somebody is parked). */
static inline void proxy_status_publish(struct proxy_task_status *st, enum nproxy_status rc,
					enum nproxy_task_run_state rs)
{
	__atomic_store_n(&st->progress_status, (int)rc, __ATOMIC_RELAXED);
	proxy_state_task_state(st->pub, (uint32_t)rs, (int)rc);
	wake_word_store(&st->run_state, &st->sleepers, (uint32_t)rs);
}

static inline void proxy_status_set_state(struct proxy_task_status *st,
					  enum nproxy_task_run_state rs)
{
	proxy_state_task_state(st->pub, (uint32_t)rs, 0);
	__atomic_store_n(&st->run_state, (uint32_t)rs, __ATOMIC_RELEASE);
}

/* The device-trigger gate over the first streams_n words only. */
bool npx_proxy_task_can_start(const struct proxy_task *task);
void npx_proxy_task_clear_start_flag(struct proxy_task *task);
/* Common constructor part; the task takes a status reference. */
void npx_proxy_task_init(struct proxy_task *task, const struct proxy_task_ops *ops,
		     struct nproxy_comm *comm, struct proxy_task_status *st,
		     uint64_t exec_id, uint32_t streams_n,
		     volatile uint32_t *const *trigger_words);
void npx_proxy_task_fini(struct proxy_task *task);

/* ---- proxy_net_task.c / proxy_barrier_task.c ---- */
struct proxy_task *npx_proxy_net_task_new(struct nproxy_comm *comm, const struct nproxy_cc_op *op,
				      volatile uint32_t *const *trigger_words,
				      const struct nproxy_device_sems *dev,
				      struct proxy_task_status *st, uint64_t exec_id);
struct proxy_task *npx_proxy_barrier_task_new(struct nproxy_comm *comm,
					  const struct nproxy_cc_op *op,
					  volatile uint32_t *const *trigger_words,
					  const struct nproxy_device_sems *dev,
					  struct proxy_task_status *st, uint64_t exec_id);
void npx_proxy_net_task_commit(struct proxy_task *task);
/* Free a cached network task for good (its block copies too). */
void npx_proxy_net_task_release(void *task);
void npx_proxy_barrier_task_commit(struct proxy_task *task);

#endif
