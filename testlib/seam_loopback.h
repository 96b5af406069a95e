/* SPDX-License-Identifier: GPL-2.0 */
/*
 * An in-process loopback network engine for the selftests and benchmarks
 * (in the test-support library, testlib/testlib.mk; never in libnproxy).
 *
 * A "fabric" connects n_ranks loopback engines in one process.  Each engine
 * implements the network seam (<nproxy/seam.h>) for one rank:
 *   - a SEND copies its bytes into the (me -> peer, stream) channel and
 *     completes at once (eager);
 *   - a posted RECV matches the channel (peer -> me, stream) in order;
 *   - ops are posted in FIFO order, an op with F_PRECOND waits (and holds
 *     back the rest of its block) until sem[pre_sem] >= pre_value;
 *   - an op with F_COMPLETE adds post_inc to sem[post_sem] on completion.
 * It also provides a non-blocking host barrier across the fabric's ranks.
 * Fault injection: fail the next progress / barrier call, or report idle
 * for the next N progress calls.  Everything is serialized by one fabric
 * lock: correct, not fast.
 */
#ifndef NPROXY_TEST_SEAM_LOOPBACK_H
#define NPROXY_TEST_SEAM_LOOPBACK_H

#include <stddef.h>
#include <stdint.h>
#include <nproxy/seam.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nproxy_loopback_fabric;
struct nproxy_loopback;

enum nproxy_status nproxy_loopback_fabric_create(uint32_t n_ranks,
						 struct nproxy_loopback_fabric **out);
/* Every engine of the fabric must be destroyed first. */
void nproxy_loopback_fabric_destroy(struct nproxy_loopback_fabric *fabric);

enum nproxy_status nproxy_loopback_create(struct nproxy_loopback_fabric *fabric,
					  uint32_t rank, struct nproxy_loopback **out);
void nproxy_loopback_destroy(struct nproxy_loopback *lb);

struct nproxy_seam nproxy_loopback_seam(struct nproxy_loopback *lb);
struct nproxy_host_barrier nproxy_loopback_barrier(struct nproxy_loopback *lb);

/* Register [base, base + len) as memory region *mr (ids 0, 1, ...). */
enum nproxy_status nproxy_loopback_mr_register(struct nproxy_loopback *lb, void *base,
					       size_t len, uint32_t *mr);

/* The next progress() call returns st (and *done); NPROXY_SUCCESS disarms. */
void nproxy_loopback_fail_next_progress(struct nproxy_loopback *lb, enum nproxy_status st);
/* The next barrier arrive()/test() call returns st. */
void nproxy_loopback_fail_next_barrier(struct nproxy_loopback *lb, enum nproxy_status st);
/* The next `ticks` progress() calls report idle and move nothing. */
void nproxy_loopback_stall(struct nproxy_loopback *lb, uint32_t ticks);

struct nproxy_loopback_counters {
	uint64_t starts, progresses, stops;
	uint64_t ops_completed;		/* sends + recvs */
	uint64_t bytes_received;
	uint64_t misuse;		/* progress/stop of a block not started (or stopped) */
	uint64_t blocks_live;		/* started, not yet stopped */
	uint64_t barrier_arrives, barrier_tests;
};

void nproxy_loopback_counters(struct nproxy_loopback *lb, struct nproxy_loopback_counters *out);

#ifdef __cplusplus
}
#endif
#endif
