/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Bananaphone: the host bootstrap bus for local ranks (one host).
 *
 * A memfd segment (one single-producer ring per local rank + a control
 * block), handed from the local leader to followers over an abstract Unix
 * socket with SCM_RIGHTS; waiters sleep on futexes; every participant holds
 * a pidfd of every peer, so a dead peer turns pending calls into
 * NPROXY_PEER_DEAD (naming rank and pid) instead of a hang.  Used for the
 * local-leader rendezvous (all-gather, barrier, bcast) before any proxy
 * task exists.  Nothing is ever left in the filesystem.
 *
 * Every blocking call takes a timeout in milliseconds (relative, > 0).
 * All ranks must call the collectives in the same order (as with MPI).
 * One struct bp is used by one thread at a time (the caller serializes).
 * Documentation/bananaphone.md and bananaphone(3) describe the protocol.
 */
#ifndef NPROXY_BANANAPHONE_H
#define NPROXY_BANANAPHONE_H

#include <stddef.h>
#include <stdint.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_MAX_RANKS	64
#define BP_MAX_JOB_ID	64	/* bytes, without the NUL; printable ASCII, no '/' */
#define BP_MAX_BLOB	(64u << 20)	/* largest all-gather / bcast blob, bytes */

struct bp;

/*
 * Local leader (local rank 0): create the sealed memfd segment and bind the
 * abstract socket "\0nproxy-bp/<uid>/<job_id>".  Returns at once; the leader
 * admits followers inside its next Bananaphone call (normally the first
 * collective).  A second leader for the same job id (any process of this
 * uid in this network namespace) gets NPROXY_BUSY.
 */
NPROXY_API enum nproxy_status bp_create(const char *job_id, uint32_t n_ranks,
					struct bp **out);
/*
 * Connect as local rank `rank` (1..n_ranks-1), retrying until the leader
 * appears or timeout_ms passes (NPROXY_TIMEOUT).  Returns once the join
 * request is sent; the first collective waits for everyone to arrive and
 * reports a refusal by the leader (NPROXY_PERM for another uid,
 * NPROXY_BUSY for a rank already taken, NPROXY_INVALID for a bad request).
 */
NPROXY_API enum nproxy_status bp_connect(const char *job_id, uint32_t rank,
					 uint32_t n_ranks, int timeout_ms,
					 struct bp **out);

NPROXY_API uint32_t bp_rank(const struct bp *bp);
NPROXY_API uint32_t bp_size(const struct bp *bp);

/*
 * All-gather variable-size blobs (len <= BP_MAX_BLOB, may be 0): rank r
 * contributes (data, len); on success *out_bufs is one malloc'd block (free
 * it with free()) holding every rank's blob back to back, and
 * out_lens[r]/out_offs[r] (caller arrays of bp_size() entries) locate each.
 */
NPROXY_API enum nproxy_status bp_allgather(struct bp *bp, const void *data, size_t len,
					   void **out_bufs, size_t *out_lens,
					   size_t *out_offs, int timeout_ms);
/*
 * Barrier.  A barrier that timed out may be retried: the retry waits for
 * the same barrier instead of entering a new one.
 */
NPROXY_API enum nproxy_status bp_barrier(struct bp *bp, int timeout_ms);
/*
 * The leader's (data, len) reaches everyone (followers' data/len are
 * ignored); *out (malloc'd, may be NULL to discard) and *out_len are set
 * on every rank, the leader included.
 */
NPROXY_API enum nproxy_status bp_bcast(struct bp *bp, const void *data, size_t len,
				       void **out, size_t *out_len, int timeout_ms);

/*
 * Non-blocking barrier pieces, for the proxy worker's barrier task: they
 * never sleep.  Barriers are numbered 1, 2, 3, ... per bus, shared with
 * bp_barrier(): `seq` passed to bp_barrier_arrive() must be exactly one more
 * than the last barrier this rank entered (bp_barrier_next_seq() says which).
 * bp_barrier_test() sets *done to 1 once every rank arrived at `seq`, else
 * 0; it returns an error status if a peer died or left before arriving.
 */
NPROXY_API enum nproxy_status bp_barrier_arrive(struct bp *bp, uint64_t seq);
NPROXY_API enum nproxy_status bp_barrier_test(struct bp *bp, uint64_t seq, int *done);
NPROXY_API uint64_t bp_barrier_next_seq(const struct bp *bp);

/*
 * Last error text (names the rank/pid/job involved); valid until the next
 * call on that bus.  bp_strerror(NULL) is the text of this thread's last
 * failed bp_create()/bp_connect().
 */
NPROXY_API const char *bp_strerror(const struct bp *bp);

/*
 * Leave in an orderly way: what this rank already sent is still delivered;
 * peers still waiting for something from it get NPROXY_PEER_LEFT, and its
 * exit is not reported as a death.  Call it before bp_cleanup() on the
 * normal path.
 */
NPROXY_API void bp_hangup(struct bp *bp);
/*
 * This rank is about to give up because bus rank dead_rank died (seen by
 * other means than the bus, e.g. the caller's own pidfd): peers that then
 * see this rank exit name dead_rank as the cause, not this rank.  The bus
 * records it itself when it is what saw the death.  The first call wins;
 * a bad rank, this rank or NULL are ignored.
 */
NPROXY_API void bp_abandon(struct bp *bp, uint32_t dead_rank);
/* The bus rank to name for gone_rank's exit: the rank it recorded with
 * bp_abandon(), else gone_rank itself. */
NPROXY_API uint32_t bp_blame(const struct bp *bp, uint32_t gone_rank);
/*
 * Unmap, close, free.  NULL is a no-op.  Without bp_hangup() first, peers
 * see this rank die (NPROXY_PEER_DEAD) once the process exits: the
 * abnormal-exit path.
 */
NPROXY_API void bp_cleanup(struct bp *bp);

#ifdef __cplusplus
}
#endif
#endif
