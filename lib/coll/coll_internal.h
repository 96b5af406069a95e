/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy private: the coll subsystem (one collective op per call).  It
 * sits above rank and reaches every other subsystem through its public
 * header only.
 */
#ifndef NPX_COLL_INTERNAL_H
#define NPX_COLL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <nproxy/coll.h>
#include "common/common_internal.h"

/* The op's completion semaphores: receives (and, in recursive doubling,
 * sends), reductions. */
#define COLL_SEM_RECV	1
#define COLL_SEM_REDUCE	2
#define COLL_MIN_SEMS	3
/*
 * An allreduce of at most this many bytes and a power-of-two rank count
 * runs recursive doubling, not the ring (coll_build.c).  Measured here
 * (median us, ring -> doubling): 4 ranks 1 KiB 268-363 -> 85-91, 64 KiB
 * 408-543 -> 239-251, 256 KiB 718-778 -> 625; 2 ranks even at 256 KiB and
 * worse above (512 KiB 101 -> 108-177).
 */
#define COLL_DOUBLING_MAX_BYTES	(256u << 10)

struct coll_mr {
	const void *base;
	size_t len;
	uint32_t id;
	uint64_t used;			/* LRU stamp; 0: empty */
};

/* The one op in flight. */
/* An op's barrier task, until it is collected. */
struct coll_barrier {
	uint64_t ctx;
	uint64_t seq;			/* the op's */
	uint64_t ordinal;		/* the rank's mark (0: it runs on the engine) */
};

#define COLL_BARRIERS_PENDING	2

struct coll_op {
	bool active;
	enum nproxy_coll_kind kind;
	uint64_t seq;			/* exec_id, from 1 */
	uint64_t ctx;
	uint32_t timeout_ms;		/* desc.timeout_ms, resolved */
	uint64_t deadline_ms;		/* CLOCK_MONOTONIC */
	bool net_done, prog_done;
	/* After success: AVG divides the result by n_ranks. */
	bool avg;
	enum nproxy_dtype dtype;
	void *result;
	uint64_t result_count;
	struct nproxy_coll_result res;
	uint64_t bar_ordinal;		/* this op's barrier, as the rank marked it (0: none) */
};

struct nproxy_coll {
	struct nproxy_rank *rank;
	struct nproxy_comm *comm;
	struct nproxy_hs *hs;
	struct nproxy_net *net;
	struct nproxy_bp *bp;
	uint32_t me, n_ranks;

	struct coll_mr mrs[NPROXY_COLL_MR_CACHE];
	uint64_t mr_clock;

	/* Reduce-scatter landing slots, one per ring step (registered). */
	void *scratch;
	size_t scratch_len;
	uint32_t scratch_mr;

	/* The op's one block (borrowed by the engine until the task is DONE). */
	struct nproxy_net_op *ops;
	struct nproxy_net_addr *src, *dst;
	uint32_t cap_ops;
	struct nproxy_fifo_set block;
	struct nproxy_prog_step prog[NPROXY_COLL_MAX_PROLOGUE + 4];

	struct coll_op op;
	/* The previous op's barrier task, collected by a later wait or close. */
	/*
	 * Earlier ops' barrier tasks not collected yet, oldest first: a wait
	 * collects all but the newest (which the op it waits for completes,
	 * when it rides), the close all of them.
	 */
	struct coll_barrier bars[COLL_BARRIERS_PENDING];
	uint32_t n_bars;
	bool owns_barrier;		/* this handle defers the rank's barriers */

	enum nproxy_status broken;	/* the first failed op's status, else SUCCESS */
	struct npx_errbuf err;		/* nproxy_coll_strerror(), by common's rule */
};

/* coll_build.c: the op's block for the built-in kinds; NPROXY_INVALID with
 * coll->err set for a description it cannot build. */
enum nproxy_status npx_coll_build(struct nproxy_coll *coll, const struct nproxy_coll_desc *d,
				  uint64_t recv_base, uint64_t reduce_base,
				  uint64_t *recv_final, uint64_t *reduce_final);
/* coll_mr.c: where base is in a registration of [base, base + len), cached
 * (a cached one that covers the range may start before base). */
enum nproxy_status npx_coll_mr(struct nproxy_coll *coll, const void *base, size_t len,
			       struct nproxy_net_addr *where);
void npx_coll_mr_drop_all(struct nproxy_coll *coll);
/* coll_error.c: record why (the coll's text, logged) and return st; coll
 * NULL: a failed nproxy_coll_open() (this thread's nproxy_coll_strerror(NULL)). */
enum nproxy_status npx_coll_fail(struct nproxy_coll *coll, enum nproxy_status st,
				 const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
