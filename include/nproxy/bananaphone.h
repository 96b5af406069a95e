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
 * Every blocking call takes a timeout in milliseconds (uint32_t, relative;
 * 0 = just check once, never sleep).
 * All ranks must call the collectives in the same order (as with MPI).
 * One struct nproxy_bp is used by one thread at a time (the caller serializes).
 * Documentation/bananaphone.md and bananaphone(3) describe the protocol.
 */
#ifndef NPROXY_BANANAPHONE_H
#define NPROXY_BANANAPHONE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NPROXY_BP_MAX_RANKS	64
#define NPROXY_BP_MAX_JOB_ID	64	/* bytes, without the NUL; printable ASCII, no '/' */
#define NPROXY_BP_MAX_BLOB	(64u << 20)	/* largest all-gather / bcast blob, bytes */

struct nproxy_bp;

struct nproxy_bp_opts {
	uint32_t size;		/* sizeof(struct nproxy_bp_opts) as the caller compiled it */
	uint32_t rank;		/* local rank: 0 is the leader, 1..n_ranks-1 followers */
	uint32_t n_ranks;	/* 1..NPROXY_BP_MAX_RANKS */
	/* Followers: how long to retry until the leader is there (0: try once).
	 * Unused by the leader, which never waits here. */
	uint32_t timeout_ms;
	const char *job_id;	/* same on every rank, at most NPROXY_BP_MAX_JOB_ID bytes */
};

/* Every field not named is 0. */
#define NPROXY_BP_OPTS_INIT { .size = sizeof(struct nproxy_bp_opts) }

/*
 * Open this rank's end of the bus.
 *
 * Rank 0 (the local leader) creates the sealed memfd segment and binds the
 * abstract socket "\0nproxy-bp/<uid>/<job_id>", then returns at once; it
 * admits followers inside its next Bananaphone call (normally the first
 * collective).  A second leader for the same job id (any process of this
 * uid in this network namespace) gets NPROXY_BUSY.
 *
 * A follower (rank 1..n_ranks-1) connects, retrying until the leader appears
 * or timeout_ms passes (NPROXY_TIMEOUT).  It returns once the join request
 * is sent; the first collective waits for everyone to arrive and reports a
 * refusal by the leader (NPROXY_PERM for another uid, NPROXY_BUSY for a
 * rank already taken, NPROXY_INVALID for a bad request).
 *
 * One call for both roles, so that every rank runs the same code; on
 * failure *out is NULL and nproxy_bp_strerror(NULL) says why.
 */
NPROXY_API enum nproxy_status nproxy_bp_open(const struct nproxy_bp_opts *opts,
					     struct nproxy_bp **out);

NPROXY_API uint32_t nproxy_bp_rank(const struct nproxy_bp *bp);
NPROXY_API uint32_t nproxy_bp_size(const struct nproxy_bp *bp);

/*
 * All-gather variable-size blobs (len <= NPROXY_BP_MAX_BLOB, may be 0): rank r
 * contributes (data, len); on success *out_bufs is one malloc'd block (free
 * it with free()) holding every rank's blob back to back, and
 * out_lens[r]/out_offs[r] (caller arrays of nproxy_bp_size() entries) locate each.
 */
NPROXY_API enum nproxy_status nproxy_bp_allgather(struct nproxy_bp *bp, const void *data, size_t len,
					   void **out_bufs, size_t *out_lens,
					   size_t *out_offs, uint32_t timeout_ms);
/*
 * Barrier.  A barrier that timed out may be retried: the retry waits for
 * the same barrier instead of entering a new one.
 */
NPROXY_API enum nproxy_status nproxy_bp_barrier(struct nproxy_bp *bp, uint32_t timeout_ms);
/*
 * The leader's (data, len) reaches everyone (followers' data/len are
 * ignored); *out (malloc'd, may be NULL to discard) and *out_len are set
 * on every rank, the leader included.
 */
NPROXY_API enum nproxy_status nproxy_bp_bcast(struct nproxy_bp *bp, const void *data, size_t len,
				       void **out, size_t *out_len, uint32_t timeout_ms);

/*
 * Non-blocking barrier pieces, for the proxy worker's barrier task: they
 * never sleep.  Barriers are numbered 1, 2, 3, ... per bus, shared with
 * nproxy_bp_barrier(): `seq` passed to nproxy_bp_barrier_arrive() must be exactly one more
 * than the last barrier this rank entered (nproxy_bp_barrier_next_seq() says which).
 * nproxy_bp_barrier_test() sets *done to true once every rank arrived at `seq`,
 * else false; it returns an error status if a peer died or left before arriving.
 */
NPROXY_API enum nproxy_status nproxy_bp_barrier_arrive(struct nproxy_bp *bp, uint64_t seq);
NPROXY_API enum nproxy_status nproxy_bp_barrier_test(struct nproxy_bp *bp, uint64_t seq, bool *done);
NPROXY_API uint64_t nproxy_bp_barrier_next_seq(const struct nproxy_bp *bp);

/*
 * Last error text (names the rank/pid/job involved), "" when none.
 * nproxy_bp_strerror(NULL) is the text of this thread's last failed
 * nproxy_bp_open() (the error-text rule: <nproxy/status.h>).
 */
NPROXY_API const char *nproxy_bp_strerror(const struct nproxy_bp *bp);

/*
 * Leave in an orderly way: what this rank already sent is still delivered;
 * peers still waiting for something from it get NPROXY_PEER_LEFT, and its
 * exit is not reported as a death.  Call it before nproxy_bp_close() on the
 * normal path.
 */
NPROXY_API void nproxy_bp_hangup(struct nproxy_bp *bp);
/*
 * This rank is about to give up because bus rank dead_rank died (seen by
 * other means than the bus, e.g. the caller's own pidfd): peers that then
 * see this rank exit name dead_rank as the cause, not this rank.  The bus
 * records it itself when it is what saw the death.  The first call wins;
 * a bad rank, this rank or NULL are ignored.
 */
NPROXY_API void nproxy_bp_abandon(struct nproxy_bp *bp, uint32_t dead_rank);
/* The bus rank to name for gone_rank's exit: the rank it recorded with
 * nproxy_bp_abandon(), else gone_rank itself. */
NPROXY_API uint32_t nproxy_bp_blame(const struct nproxy_bp *bp, uint32_t gone_rank);
/*
 * Liveness now, for a caller waiting on something else (never sleeps):
 * NPROXY_PEER_DEAD (text in nproxy_bp_strerror()) once a peer died,
 * NPROXY_SUCCESS otherwise, also before every rank joined.
 */
NPROXY_API enum nproxy_status nproxy_bp_check(struct nproxy_bp *bp);
/*
 * The peer whose death this rank saw or was told of by the bus: true and
 * its bus rank and pid, or false when none.
 */
NPROXY_API bool nproxy_bp_dead_peer(const struct nproxy_bp *bp, uint32_t *rank, int *pid);
/*
 * Unmap, close, free.  NULL is a no-op.  Without nproxy_bp_hangup() first, peers
 * see this rank die (NPROXY_PEER_DEAD) once the process exits: the
 * abnormal-exit path.
 */
NPROXY_API void nproxy_bp_close(struct nproxy_bp *bp);

#ifdef __cplusplus
}
#endif
#endif
