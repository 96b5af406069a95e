/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy: the network seam -- what a network task calls, per basic block.
 *
 * This is the reference runtime's libnrt <-> libnccom boundary
 * (ncclStartNetworkProxy / ncclNetworkProxyProgress / ncclStopNetworkProxy)
 * as a C ops table.  The engine behind it is passive: it moves only when
 * the proxy calls progress().  The library's implementation is the
 * libfabric engine (<nproxy/net.h>); the in-process loopback the proxy
 * tests use lives in selftests/common (test support, not part of the
 * library).
 *
 * Threading: every call for one engine comes from one thread at a time
 * (whichever holds the step right of the engine's proxy group: its
 * worker, or a consumer stepping the group while it waits), so engines
 * need no locks of their own for these calls.  Consecutive calls may come
 * from different threads: an engine must not keep per-thread state.
 */
#ifndef NPROXY_SEAM_H
#define NPROXY_SEAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- op FIFO records (libnccom's net_ops_info, net_src_addr, ...) ---- */

enum nproxy_net_op_kind {
	NPROXY_NET_OP_SEND = 1,
	NPROXY_NET_OP_RECV = 2,
	/*
	 * Local, no peer: dst_fifo[addr_idx] = dst_fifo[addr_idx] <redop>
	 * src_fifo[addr_idx], len bytes of dtype.  It stands in for the
	 * device's compute engine between a RECV and the SEND that forwards
	 * the result (an allreduce's reduce-scatter), so it is usually gated
	 * by F_PRECOND on the RECV's semaphore and announces itself with
	 * F_COMPLETE.  peer must be 0; len a multiple of the dtype's size.
	 * The engine runs it 64 KiB per progress() call, so the provider's
	 * transfers move on during a long one; the local ops after it wait.
	 */
	NPROXY_NET_OP_REDUCE = 3,
	/*
	 * Local, no peer: dst_fifo[addr_idx] = src_fifo[addr_idx], len bytes
	 * (the device's DMA engine placing a buffer).  Run in the posting
	 * pass like a REDUCE, so one placed after a block's SENDs and RECVs
	 * overlaps their transfers instead of delaying them.  peer, dtype
	 * and redop must be 0.
	 */
	NPROXY_NET_OP_COPY = 4,
};

/* Element types (the same values as NCCL's ncclDataType_t). */
enum nproxy_dtype {
	NPROXY_INT8	= 0,
	NPROXY_UINT8	= 1,
	NPROXY_INT32	= 2,
	NPROXY_UINT32	= 3,
	NPROXY_INT64	= 4,
	NPROXY_UINT64	= 5,
	NPROXY_FLOAT16	= 6,	/* IEEE binary16 ("half") */
	NPROXY_FLOAT32	= 7,
	NPROXY_FLOAT64	= 8,
	NPROXY_BFLOAT16	= 9,
	NPROXY_DTYPE_COUNT
};

/*
 * Reduction operators (the same values as NCCL's ncclRedOp_t).  AVG is
 * SUM followed by a division by the number of ranks, which the collective
 * layer applies once at the end; in a REDUCE op it reduces like SUM.
 */
enum nproxy_redop {
	NPROXY_SUM	= 0,
	NPROXY_PROD	= 1,
	NPROXY_MAX	= 2,
	NPROXY_MIN	= 3,
	NPROXY_AVG	= 4,
	NPROXY_REDOP_COUNT
};

/* Bytes per element of dtype; 0 for a value this library does not know. */
NPROXY_API size_t nproxy_dtype_size(enum nproxy_dtype dtype);
/* "float", "bfloat16", "sum", ...: the names nccl-tests prints; NULL if unknown. */
NPROXY_API const char *nproxy_dtype_name(enum nproxy_dtype dtype);
NPROXY_API const char *nproxy_redop_name(enum nproxy_redop op);
/*
 * acc[i] = acc[i] <op> in[i] for n elements of dtype (AVG reduces as SUM).
 * Half and bfloat16 are computed in float and rounded to nearest even.
 * MAX and MIN of elements that compare equal (-0 and +0) take in[i].
 * NPROXY_INVALID for an unknown dtype or op.
 */
NPROXY_API enum nproxy_status nproxy_reduce(void *acc, const void *in, size_t n,
					    enum nproxy_dtype dtype, enum nproxy_redop op);

#define NPROXY_NET_OP_F_PRECOND	(1u << 0)	/* post only once sem[pre_sem] >= pre_value */
#define NPROXY_NET_OP_F_COMPLETE (1u << 1)	/* on completion: sem[post_sem] += post_inc */

/*
 * One network op (32 bytes).  A SEND reads src_fifo[addr_idx]; a RECV
 * writes dst_fifo[addr_idx]; a REDUCE reads both and writes dst; a COPY
 * reads src and writes dst.  Ops of one block are posted in FIFO order.
 */
struct nproxy_net_op {
	uint8_t  kind;		/* enum nproxy_net_op_kind */
	uint8_t  flags;		/* NPROXY_NET_OP_F_* */
	uint8_t  dtype;		/* REDUCE: enum nproxy_dtype; else must be 0 */
	uint8_t  redop;		/* REDUCE: enum nproxy_redop; else must be 0 */
	uint32_t peer;		/* peer rank in the comm */
	uint32_t addr_idx;	/* index into src_fifo (SEND) or dst_fifo (RECV) */
	uint32_t len;		/* bytes */
	uint16_t pre_sem;	/* semaphore index for F_PRECOND */
	uint16_t post_sem;	/* semaphore index for F_COMPLETE */
	uint32_t post_inc;	/* increment for F_COMPLETE */
	uint64_t pre_value;	/* threshold for F_PRECOND */
};

/* A buffer address: a memory region registered with the engine + offset. */
struct nproxy_net_addr {
	uint32_t mr;		/* id from the engine's mr_register() */
	uint32_t reserved;	/* must be 0 */
	uint64_t offset;
};

/* The per-basic-block FIFO triple (libnrt's enc_fifo_set), borrowed by
 * the engine from start() until stop() of that block returns. */
struct nproxy_fifo_set {
	const struct nproxy_net_op *ops;
	uint32_t n_ops;
	uint32_t n_src;
	const struct nproxy_net_addr *src;
	const struct nproxy_net_addr *dst;
	uint32_t n_dst;
	uint32_t reserved;
};

/*
 * A device's doorbell for semaphore increments (from nproxy_hs_sem_bell()).
 * A device that sleeps in a WAIT_SEM step, instead of only polling, shows
 * it in *sleepers (the memfd emulator; nproxy.ko through its info page);
 * whoever increments one of its semaphores then rings it.  The ring costs
 * one load when the device is not asleep.
 */
struct nproxy_sem_bell {
	const volatile uint32_t *sleepers;	/* non-zero: ring after an increment */
	void *device;				/* the library's, for the ring */
};

/* The device's semaphore page, as the engine sees it (preconditions read it,
 * completions add to it). NULL sems with n_sems 0: no device attached. */
struct nproxy_device_sems {
	volatile uint64_t *sems;
	uint32_t n_sems;
	uint32_t reserved;		/* must be 0 */
	/* NULL: the device polls its semaphores (nproxy.ko, a test's page). */
	struct nproxy_sem_bell *bell;
};

/* Wake the device sleeping behind bell (memfd: run what the increment
 * unblocked; kmod: the region's doorbell ioctl). */
NPROXY_API void nproxy_sem_bell_ring(struct nproxy_sem_bell *bell);

/*
 * The completion back-edge (the reference runtime's nec_inc_semaphore):
 * one atomic add, and a ring only when the device is parked on its bell.
 */
static inline uint64_t nproxy_device_sem_add(const struct nproxy_device_sems *dev, uint32_t sem,
					     uint64_t inc)
{
	uint64_t v = __atomic_add_fetch(&dev->sems[sem], inc, __ATOMIC_SEQ_CST);

	if (dev->bell && __atomic_load_n(dev->bell->sleepers, __ATOMIC_SEQ_CST))
		nproxy_sem_bell_ring(dev->bell);
	return v;
}

struct nproxy_seam_ops {
	const char *name;
	/* Start: hand block bb of stream to the engine. Validates every record. */
	enum nproxy_status (*start)(void *engine, uint32_t stream, uint32_t bb,
				    const struct nproxy_fifo_set *fifos,
				    const struct nproxy_device_sems *dev);
	/*
	 * Progress, the hot call: never blocks.  Posts eligible ops of block bb in
	 * order within the credit window and drains completions.
	 *   *idle: nothing moved this tick;
	 *   *block_done: every op of block bb completed;
	 *   *done: every op of every started block of the stream completed.
	 * An op error returns its status (and *done = true): the task ends.
	 */
	enum nproxy_status (*progress)(void *engine, uint32_t stream, uint32_t bb,
				       bool *idle, bool *block_done, bool *done);
	/* Stop: retire block bb of stream (after it drained, or to abort it). */
	enum nproxy_status (*stop)(void *engine, uint32_t stream, uint32_t bb);
};

struct nproxy_seam {
	const struct nproxy_seam_ops *ops;
	void *engine;
};

/* ---- host barrier, for the barrier task ---- */

/*
 * Non-blocking, because one thread (the proxy worker, or a consumer driving
 * the group) steps the barriers of several ranks: a blocking barrier would
 * deadlock two ranks that share a group.  arrive() enters barrier number seq (1, 2, ...); test()
 * reports whether every rank of the comm has arrived at seq.  Errors (dead
 * peer, timeout) come back as the status of either call.  test() may answer
 * NPROXY_BUSY (done false): not done, and the answer changes only after
 * nproxy_comm_kick() on the comm or after a step of another of the group's
 * tasks that made progress (a tick that moved anything is followed by
 * another, which tests it again), so the group need not poll it otherwise
 * (its stepping thread may park); the barrier task stays IDLE meanwhile.
 */
struct nproxy_host_barrier_ops {
	const char *name;
	enum nproxy_status (*arrive)(void *ctx, uint64_t seq);
	enum nproxy_status (*test)(void *ctx, uint64_t seq, bool *done);
};

struct nproxy_host_barrier {
	const struct nproxy_host_barrier_ops *ops;
	void *ctx;
};

#ifdef __cplusplus
}
#endif
#endif
