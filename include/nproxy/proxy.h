/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy: the shared proxy driver (Documentation/proxy.md).
 *
 * One worker thread ("proxy-<tid>") per shared-proxy group, in a
 * process-global registry keyed by gid and refcounted by comms:
 *
 *   gid = device_index / ranks_per_proxy
 *
 * ranks_per_proxy: opts->ranks_per_proxy, else NPROXY_RANKS_PER_NETWORK_PROXY,
 * else NEURON_RT_RANKS_PER_NETWORK_PROXY, else 1 (one worker per device).
 * The first comm of a group creates the queue and starts the worker (pinned
 * to NPROXY_PROXY_CPUSET, e.g. "0-1,3", when set; inherited otherwise);
 * later comms only bump the group's refcount; the last nproxy_comm_close()
 * stops and joins the worker.
 *
 * Per CC op the producer (nproxy_enq_proxy_tasks) queues one network task
 * and one barrier task.  Their status is published before they are queued;
 * a consumer polls it with nproxy_check_status() or waits with
 * nproxy_wait_status().  The worker steps every active task once per tick:
 *
 *   INIT -> [WAITING_DEVICE_TRIGGER ->] PROGRESSING <-> IDLE -> DONE
 *
 * A consumer waiting in nproxy_await_status()/nproxy_wait_status() may make
 * those ticks itself (NPROXY_CALLER_DRIVES=auto|always|never, read once per
 * group; Documentation/proxy.md says when auto does): it borrows the
 * group's step right from the worker, which parks meanwhile, and gives it
 * back when its wait ends (done, timed out).  One thread steps a group at
 * any time; the worker steps it whenever nobody waits.
 *
 * Threading: comm open/close, enqueue and the status calls may be made from
 * any thread.  A comm must not be freed while another thread uses it.
 */
#ifndef NPROXY_PROXY_H
#define NPROXY_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <nproxy/seam.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Per-op stream limit (== NPROXY_MAX_STREAMS of <linux/nproxy.h>). */
#define NPROXY_PROXY_MAX_STREAMS	4
/* Barrier-done semaphores the leader increments per barrier task. */
#define NPROXY_PROXY_MAX_BARRIER_SEMS	4
/* The device's "not reached the network stage" trigger value. */
#define NPROXY_PROXY_TRIGGER_SENTINEL	0xFFFFFFFFu

/* libnrt's proxy_task_state_type_t, same values. */
enum nproxy_task_type {
	NPROXY_TASK_UNKNOWN	= 0,
	NPROXY_TASK_NETWORK	= 1,
	NPROXY_TASK_BARRIER	= 2,
};

/* libnrt's proxy_task_run_state_t, same values. */
enum nproxy_task_run_state {
	NPROXY_TASK_STATE_INIT			= 0,
	NPROXY_TASK_STATE_PROGRESSING		= 1,
	NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER = 2,
	NPROXY_TASK_STATE_IDLE			= 3,
	NPROXY_TASK_STATE_DONE			= 4,
};

/*
 * What the worker does on a tick where no active task moved (every one is
 * IDLE or still waiting for its device trigger).  Chosen once per group,
 * by the comm that creates it.
 */
enum nproxy_idle_policy {
	/* NPROXY_IDLE_POLICY=spin|yield|adaptive|adaptive-yield, else SPIN
	 * if NPROXY_ONE_THREAD_PER_CORE=1 (the reference runtime's rule),
	 * ADAPTIVE otherwise. */
	NPROXY_IDLE_DEFAULT	= 0,
	NPROXY_IDLE_SPIN	= 1,	/* re-tick at once (dedicated core) */
	NPROXY_IDLE_YIELD	= 2,	/* sched_yield() between ticks */
	/*
	 * The default: re-tick for the spin window (NPROXY_SPIN_US, default
	 * 50 us), then park until something that ends the idleness is
	 * signalled (enqueue, stop, a memfd device's trigger store).  Waits
	 * nothing signals (network completions, nproxy.ko's trigger words)
	 * are polled with parks doubling from 16 us to 1 ms.  The spin
	 * window yields between ticks, until a yield takes long (another
	 * process got a whole time slice): then, for a second, it pauses
	 * instead while the network is polled, and parks at once otherwise.
	 */
	NPROXY_IDLE_ADAPTIVE	= 3,
	/*
	 * ADAPTIVE whose spin window yields between ticks: for hosts where
	 * the job's own threads outnumber the cpus (the peer a worker waits
	 * for is often runnable on its cpu).  With other busy processes on
	 * the host it loses a time slice per yield: prefer ADAPTIVE there.
	 */
	NPROXY_IDLE_ADAPTIVE_YIELD = 4,
};

/* Comm flags (struct nproxy_comm_opts.flags). */
/* libnrt's device-wait policy: after INIT a network task waits for its
 * trigger words (WAITING_DEVICE_TRIGGER) before progressing. */
#define NPROXY_COMM_F_DEVICE_WAIT	(1u << 0)
/* libnrt's early-completion policy: network tasks go INIT -> DONE. */
#define NPROXY_COMM_F_SKIP_NET		(1u << 1)
#define NPROXY_COMM_F_ALL		(NPROXY_COMM_F_DEVICE_WAIT | NPROXY_COMM_F_SKIP_NET)

struct nproxy_hs;

struct nproxy_comm_opts {
	uint32_t size;		/* sizeof(struct nproxy_comm_opts) as the caller compiled it */
	uint32_t rank;		/* rank in the comm; rank 0 leads the barrier */
	uint32_t n_ranks;	/* >= 1 */
	uint32_t device_index;	/* the nec_dev: picks the group */
	uint32_t ranks_per_proxy; /* 0: environment, see above */
	uint32_t flags;		/* NPROXY_COMM_F_* */
	enum nproxy_idle_policy idle_policy; /* used only if this comm creates the group */
	/*
	 * Optional handshake region: ops that leave trigger_words / dev unset
	 * use its first streams_n trigger words and its semaphores.  Borrowed:
	 * must outlive the comm.
	 */
	struct nproxy_hs *hs;
	/* The network engine for this comm's network tasks (required unless
	 * NPROXY_COMM_F_SKIP_NET).  Called only from the one thread that holds
	 * the group's step right (the worker, or a consumer driving while it
	 * waits), never from two threads at once. */
	struct nproxy_seam seam;
	/* The host barrier across the comm's ranks; ops NULL is allowed only
	 * when n_ranks == 1.  Called like the seam. */
	struct nproxy_host_barrier barrier;
	/* nproxy_wait_status()'s deadline when it is given 0; 0 here:
	 * NPROXY_PROXY_TIMEOUT_S (seconds, as the reference runtime's), else 300 s. */
	uint32_t timeout_ms;
	uint32_t reserved;	/* must be 0 */
};

/* Every field not named is 0 (one rank, no flags, default idle policy). */
#define NPROXY_COMM_OPTS_INIT { .size = sizeof(struct nproxy_comm_opts), .n_ranks = 1 }

struct nproxy_comm;

/* NPROXY_INVALID for bad options, NPROXY_RESOURCE when the worker cannot be
 * started (nothing is left behind). */
NPROXY_API enum nproxy_status nproxy_comm_open(const struct nproxy_comm_opts *opts,
					       struct nproxy_comm **out);
/*
 * Release the comm's group reference (the last one joins the worker).
 * Tasks of this comm that are still queued or active are aborted first
 * (their started blocks are stopped) and their status nodes dropped.
 * NULL is a no-op.
 */
NPROXY_API void nproxy_comm_close(struct nproxy_comm *comm);
/*
 * Abort every task of comm that is queued or active (their started blocks
 * are stopped, so the engine no longer touches their buffers) and drop
 * their status nodes, as nproxy_comm_close() does first; the comm stays
 * open.  For a caller giving up on an op after a failure.  NULL is a no-op.
 */
NPROXY_API void nproxy_comm_abort(struct nproxy_comm *comm);
/*
 * Wake the thread that steps comm's group: something a task waits for
 * changed and nothing else announces it (a host barrier whose test()
 * answered NPROXY_BUSY, <nproxy/seam.h>).  Cheap when nobody is parked.
 * NULL is a no-op.
 */
NPROXY_API void nproxy_comm_kick(struct nproxy_comm *comm);
/*
 * Text of this thread's last failed call on comm (enqueue, status, wait),
 * else the comm's last failure on any thread, "" when none;
 * nproxy_comm_strerror(NULL): this thread's last failed nproxy_comm_open().
 * Producers and consumers of a comm are different threads: each reads back
 * its own (the error-text rule: <nproxy/status.h>).
 */
NPROXY_API const char *nproxy_comm_strerror(const struct nproxy_comm *comm);

/* One basic block list per stream; each block is one seam FIFO set. */
struct nproxy_stream_blocks {
	const struct nproxy_fifo_set *blocks;
	uint32_t n_blocks;
	uint32_t reserved;	/* must be 0 */
};

/*
 * One CC op's proxy work.  The struct and its blocks[] arrays are copied at
 * enqueue; the ops/src/dst arrays the fifo sets point to are borrowed until
 * the network task is DONE (the seam borrows them from start to stop).
 */
struct nproxy_cc_op {
	uint32_t size;		/* sizeof(struct nproxy_cc_op) as the caller compiled it */
	/* The consumer's key (libnrt's enc_ctx): unique among this comm's
	 * unconsumed ops.  0: the library assigns one (see ctx_out). */
	uint64_t ctx;
	uint32_t streams_n;	/* 1..NPROXY_PROXY_MAX_STREAMS */
	uint32_t n_barrier_sems; /* 0..NPROXY_PROXY_MAX_BARRIER_SEMS */
	struct nproxy_stream_blocks streams[NPROXY_PROXY_MAX_STREAMS];
	/*
	 * The device-trigger gate: streams_n host-visible words (entries past
	 * streams_n are never read).  All NULL: the comm's hs words 0..n-1.
	 * Both tasks of the op gate on the same words (consuming writes 0,
	 * which still reads as "triggered" for the other task).
	 */
	volatile uint32_t *trigger_words[NPROXY_PROXY_MAX_STREAMS];
	/* Device semaphores for preconditions / completions and the barrier.
	 * sems NULL: the comm's hs semaphores. */
	struct nproxy_device_sems dev;
	/* Indices into dev.sems the barrier leader increments by 1. */
	uint32_t barrier_sems[NPROXY_PROXY_MAX_BARRIER_SEMS];
};

/* Every field not named is 0. */
#define NPROXY_CC_OP_INIT { .size = sizeof(struct nproxy_cc_op) }

/*
 * nproxy_enq_proxy_tasks() and nproxy_check_status() keep the reference
 * runtime's names (enc_enq_proxy_tasks, enc_proxy_check_status) rather than
 * nproxy_<area>_<verb>: someone porting a libnrt caller finds them by name.
 */

/*
 * Producer: queue one network task and one barrier task for op.  Both
 * statuses are visible to nproxy_check_status() when this returns.
 * *ctx_out (optional) receives the op's ctx.  A comm's network tasks run one
 * at a time in enqueue order (the seam names blocks by (stream, bb) only);
 * its barrier tasks use host barrier seq 1, 2, ... in enqueue order, so all
 * ranks must enqueue a comm's ops in the same order.  Seam and barrier calls
 * run on the thread holding the group's step right (the worker, or a
 * consumer driving while it waits) and must not block.
 */
NPROXY_API enum nproxy_status nproxy_enq_proxy_tasks(struct nproxy_comm *comm,
						     const struct nproxy_cc_op *op,
						     uint64_t exec_id, uint64_t *ctx_out);

/*
 * The status family: one wait, three names.  Each waits on one task of an
 * op (its NETWORK or BARRIER task); a whole op is the op verb's
 * (nproxy_coll_start()/nproxy_coll_wait(), <nproxy/coll.h>), which is
 * built on nproxy_await_status().  They differ only in how the answer
 * comes back:
 *
 *   nproxy_await_status(comm, ctx, type, timeout_ms, &done, &status)
 *       the wait itself, up to timeout_ms (0: look once);
 *   nproxy_check_status(comm, ctx, type, &done, &status)
 *       = nproxy_await_status(..., 0, ...), libnrt's enc_proxy_check_status;
 *   nproxy_wait_status(comm, ctx, type, timeout_ms)
 *       = nproxy_await_status() until done or timeout_ms (0: the comm's
 *       timeout_ms option), returning the task's status or NPROXY_TIMEOUT,
 *       libnrt's enc_consume_proxy_task_status.
 *
 * nproxy_await_status(): waits up to timeout_ms (0: does not wait) for the
 * task to reach DONE.  When the group's NPROXY_CALLER_DRIVES says so,
 * the calling thread steps the group itself meanwhile (the worker parks
 * until it returns; idle ticks spin briefly, then park); otherwise it spins
 * for NPROXY_CONSUMER_SPIN_US (default 0), then parks on the status word,
 * which the worker's DONE publish wakes.  Either way, after timeout_ms it
 * returns NPROXY_SUCCESS with *done false and logs nothing: a caller with
 * its own liveness checks loops on it, and the worker finishes the task if
 * nobody waits any more.  When done: NPROXY_SUCCESS, *done true, *status
 * the task's, and its status node erased (the next call fails).
 * NPROXY_NOT_FOUND when no such task exists (never enqueued, already
 * consumed, or consumed by another thread meanwhile); NPROXY_INVALID for a
 * NULL argument.
 */
NPROXY_API enum nproxy_status nproxy_await_status(struct nproxy_comm *comm, uint64_t ctx,
						  enum nproxy_task_type type, uint32_t timeout_ms,
						  bool *done, enum nproxy_status *status);

/* Consumer poll: nproxy_await_status() with timeout_ms 0. */
NPROXY_API enum nproxy_status nproxy_check_status(struct nproxy_comm *comm, uint64_t ctx,
						  enum nproxy_task_type type, bool *done,
						  enum nproxy_status *status);

/*
 * nproxy_await_status() for timeout_ms (0: the comm's timeout_ms option).
 * Returns the task's status (a failed one logged in libnrt's words),
 * NPROXY_TIMEOUT when it is not done by then (logging libnrt's watchdog
 * line; also when the comm's group stops meanwhile), NPROXY_NOT_FOUND when
 * no such task exists, NPROXY_INVALID for a NULL comm.
 */
NPROXY_API enum nproxy_status nproxy_wait_status(struct nproxy_comm *comm, uint64_t ctx,
						 enum nproxy_task_type type, uint32_t timeout_ms);

/* ---- introspection (tools, tests) ---- */

/* The comm's proxy group (0 for NULL). */
NPROXY_API uint32_t nproxy_comm_gid(const struct nproxy_comm *comm);
/* nproxy_wait_status()'s default wait: the timeout_ms option resolved (0 for NULL). */
NPROXY_API uint32_t nproxy_comm_timeout_ms(const struct nproxy_comm *comm);
/* The worker's kernel tid (the <tid> of "proxy-<tid>"), 0 before it ran
 * and for NULL. */
NPROXY_API int nproxy_comm_worker_tid(const struct nproxy_comm *comm);

/* Number of live groups (= worker threads) in this process. */
NPROXY_API uint32_t nproxy_proxy_group_count(void);
/* A group's refcount (comms holding it); 0 when no such group. */
NPROXY_API uint32_t nproxy_proxy_group_refcnt(uint32_t gid);

struct nproxy_proxy_stats {
	uint64_t ticks;		/* loop iterations */
	uint64_t steps;		/* task step() calls */
	uint64_t idle_ticks;	/* ticks where no active task moved */
	uint64_t cv_waits;	/* times the worker slept on quiescence */
	uint64_t tasks_done;	/* tasks recycled (reached DONE) */
	uint64_t tasks_active;	/* active now */
	int32_t worker_tid;
	uint32_t refcnt;
	enum nproxy_idle_policy idle_policy;
	uint32_t reserved;
	/* Adaptive policy: parks after the spin window. */
	uint64_t idle_parks;
	/*
	 * Of those, parks on waits that only a signal ends (enqueue, stop, a
	 * memfd trigger) that ran into their 100 ms safety timeout instead:
	 * a missed wake-up, or a device slower than that.
	 */
	uint64_t safety_timeouts;
};

/* NPROXY_NOT_FOUND when no such group, NPROXY_INVALID for a NULL out. */
NPROXY_API enum nproxy_status nproxy_proxy_group_stats(uint32_t gid,
						       struct nproxy_proxy_stats *out);

NPROXY_API const char *nproxy_task_type_str(enum nproxy_task_type type);
NPROXY_API const char *nproxy_task_run_state_str(enum nproxy_task_run_state state);

#ifdef __cplusplus
}
#endif
#endif
