/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy: one collective op, one call to start it, one to wait for it.
 *
 * A rank (<nproxy/rank.h>) gives the pieces; a coll on that rank runs a
 * whole op on them, the way liburing's submit / wait pair runs an I/O:
 *
 *   nproxy_coll_start()  builds the op's FIFOs (one basic block: the ring's
 *                        sends, receives and, for an allreduce, the
 *                        reductions between them), re-arms the device-trigger
 *                        word, submits the device program (the caller's
 *                        prologue steps, WRITE_TRIGGER, then WAIT_SEM on the
 *                        op's completion semaphores) and enqueues the
 *                        network task and the barrier task of the op;
 *   nproxy_coll_wait()   waits for the network task and the device program,
 *                        watching the bus for a dead local peer while it
 *                        waits, and reports the first failure.
 *
 * The barrier task of an op is not waited for by its own wait: it overlaps
 * the next op, and the wait after that (or nproxy_coll_close()) collects
 * it.  At 2 ranks an allgather, or an allreduce whose reductions are at
 * most 64 KiB, carries the previous op's barrier on its own data (no
 * barrier message crosses the network); any other op, and the close, run
 * it on the engine.  While a coll is open it owns its rank's barrier tasks
 * (a second coll on the rank runs every barrier on the engine).  Ops of a
 * comm are told apart on the wire by the engine's per-block epoch, so a
 * rank may start op N+1 while a slower peer is still finishing op N.
 *
 * Buffers are plain pointers: the coll registers them with the rank's
 * engine on first use and keeps the registrations of the last few buffers
 * (NPROXY_COLL_MR_CACHE), so a loop over the same buffers registers once;
 * nproxy_coll_forget() drops them before the caller frees a buffer.
 *
 * One op in flight per coll (the device region runs one program at a
 * time).  A coll is used by one thread at a time.  After an op fails, the
 * coll is broken: later starts return that op's status (close the rank;
 * the job is over).
 */
#ifndef NPROXY_COLL_H
#define NPROXY_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/nproxy.h>
#include <nproxy/proxy.h>
#include <nproxy/rank.h>
#include <nproxy/seam.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

enum nproxy_coll_kind {
	/* recvbuf holds n_ranks parts of count elements; rank r's input is
	 * part r (sendbuf NULL or recvbuf + r * count elements: in place). */
	NPROXY_COLL_ALLGATHER	= 1,
	/* count elements reduced with redop over every rank (sendbuf NULL or
	 * == recvbuf: in place).  Ring reduce-scatter then ring allgather in
	 * one op: one network task, one barrier task. */
	NPROXY_COLL_ALLREDUCE	= 2,
	/* count elements from sendbuf to rank + 1, from rank - 1 into recvbuf
	 * (a ring shift; sendbuf and recvbuf must not overlap). */
	NPROXY_COLL_SENDRECV	= 3,
	/* The caller's proxy op (cc) and device program (prog): the coll
	 * re-arms the trigger words of cc's streams, submits, enqueues and
	 * waits.  cc's fifo sets use the caller's own registrations. */
	NPROXY_COLL_CUSTOM	= 4,
};

/* Device steps a description may put before the op's own (a device delay). */
#define NPROXY_COLL_MAX_PROLOGUE	16
/* Buffer registrations a coll keeps. */
#define NPROXY_COLL_MR_CACHE		8

struct nproxy_coll_desc {
	uint32_t size;		/* sizeof(struct nproxy_coll_desc) as the caller compiled it */
	uint32_t kind;		/* enum nproxy_coll_kind */
	uint32_t dtype;		/* enum nproxy_dtype (<nproxy/seam.h>) */
	uint32_t redop;		/* ALLREDUCE: enum nproxy_redop; else 0 */
	uint64_t count;		/* elements, see the kinds; 0 is a valid empty op */
	const void *sendbuf;
	void *recvbuf;
	/* The op's deadline, from its start; 0: the rank's wait_timeout_ms. */
	uint32_t timeout_ms;
	uint32_t n_prologue;	/* 0..NPROXY_COLL_MAX_PROLOGUE */
	const struct nproxy_prog_step *prologue;
	/* NPROXY_COLL_CUSTOM only (else NULL / 0). */
	const struct nproxy_cc_op *cc;
	const struct nproxy_prog_step *prog;
	uint32_t n_prog;
	uint32_t reserved;	/* must be 0 */
};

#define NPROXY_COLL_DESC_INIT { .size = sizeof(struct nproxy_coll_desc) }

/* Which part of an op failed first. */
enum nproxy_coll_part {
	NPROXY_COLL_PART_NONE		= 0,
	NPROXY_COLL_PART_NETWORK	= 1,	/* the network task's status */
	NPROXY_COLL_PART_BARRIER	= 2,	/* a barrier task's status */
	NPROXY_COLL_PART_DEVICE		= 3,	/* the device program */
	NPROXY_COLL_PART_PEER		= 4,	/* a local peer died (the bus saw it) */
	NPROXY_COLL_PART_DEADLINE	= 5,	/* the op's timeout_ms ran out */
};

struct nproxy_coll_result {
	enum nproxy_status status;	/* the op's: NPROXY_SUCCESS or the first failure's */
	uint32_t part;			/* enum nproxy_coll_part of the first failure */
	uint64_t seq;			/* the op's number on this coll, from 1 */
	/* NPROXY_COLL_PART_PEER: the dead rank (in the job) and its pid; else
	 * UINT32_MAX and 0. */
	uint32_t dead_rank;
	int32_t dead_pid;
	/* The device program as it ended (state NPROXY_PROG_DONE on success). */
	struct nproxy_prog_result prog;
};

struct nproxy_coll;

/* A coll on rank (borrowed: close the coll first).  NPROXY_INVALID when
 * rank or out is NULL, NPROXY_RESOURCE when out of memory. */
NPROXY_API enum nproxy_status nproxy_coll_open(struct nproxy_rank *rank, struct nproxy_coll **out);
/*
 * Collect the last op's barrier (bounded by the rank's wait timeout, not
 * at all when the coll is broken), release the registrations and the
 * scratch buffer.  An op still in flight is cancelled first.  NULL is a
 * no-op.
 */
NPROXY_API void nproxy_coll_close(struct nproxy_coll *coll);

/*
 * Start the op desc describes (every rank of the comm starts the same
 * kinds in the same order).  NPROXY_INVALID for a bad description (logged
 * and kept for nproxy_coll_strerror; nothing started), NPROXY_BUSY while
 * an op is in flight, a broken coll's status, or the status of the submit
 * or enqueue that failed.
 */
NPROXY_API enum nproxy_status nproxy_coll_start(struct nproxy_coll *coll,
						const struct nproxy_coll_desc *desc);
/*
 * Wait up to timeout_ms (0: look once) for the op in flight.  Returns
 * NPROXY_BUSY when it is still running (nothing collected; call again),
 * NPROXY_INVALID when nothing was started, else the op's status, with
 * *res (optional) filled.  The op's own deadline (desc.timeout_ms) ends it
 * with NPROXY_TIMEOUT and part NPROXY_COLL_PART_DEADLINE.
 */
NPROXY_API enum nproxy_status nproxy_coll_wait(struct nproxy_coll *coll, uint32_t timeout_ms,
					       struct nproxy_coll_result *res);
/* nproxy_coll_start() then nproxy_coll_wait() until the op ends. */
NPROXY_API enum nproxy_status nproxy_coll_run(struct nproxy_coll *coll,
					      const struct nproxy_coll_desc *desc,
					      struct nproxy_coll_result *res);
/*
 * Drop the coll's registrations of any buffer overlapping [buf, buf + len):
 * call it before freeing (or unmapping) a buffer an op used, so that a new
 * buffer at the same address is registered anew.  Not while an op is in
 * flight.  NULL coll is a no-op.
 */
NPROXY_API void nproxy_coll_forget(struct nproxy_coll *coll, const void *buf, size_t len);
/* Why the last failed call on coll failed, "" when none (or after an op
 * that succeeded).  NULL: this thread's last failed nproxy_coll_open() (the error-text rule: <nproxy/status.h>). */
NPROXY_API const char *nproxy_coll_strerror(const struct nproxy_coll *coll);
/* "allgather", "allreduce", "sendrecv", "custom"; NULL if unknown. */
NPROXY_API const char *nproxy_coll_kind_name(enum nproxy_coll_kind kind);

#ifdef __cplusplus
}
#endif
#endif
