/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy: the network engine over libfabric -- the passive "libnccom"
 * side of the seam (<nproxy/seam.h>).
 *
 * One engine per rank of a comm: one RDM endpoint, one CQ, one AV holding
 * every peer.  nproxy_net_open() selects the provider, brings the endpoint
 * up and all-gathers endpoint names (bananaphone when every rank is local
 * and a bus is given, else a TCP rendezvous at NPROXY_ROOT_COMM_ID).  After
 * that the engine only moves when its owner calls the seam's progress()
 * (manual progress: there is no engine thread) or the host barrier's
 * arrive()/test().
 *
 * Environment (read by nproxy_net_open when the option is 0/NULL):
 *   FI_PROVIDER            the provider (libfabric's own filter); otherwise
 *                          efa, then shm when all ranks share a host, then
 *                          "tcp;ofi_rxm".
 *   NPROXY_ROOT_COMM_ID    host:port of the TCP rendezvous (rank 0 listens).
 *   NPROXY_NET_CREDITS     ops in flight per peer and direction (default 8).
 *   NPROXY_NET_TIMEOUT_MS  no-progress deadline of a posted op or host
 *                          barrier (default 30000).
 *   NPROXY_NET_RDZV_TIMEOUT_MS  deadline of each name exchange step
 *                          (default 60000: libfabric start-up alone can
 *                          take seconds on a loaded host).
 *   NPROXY_NET_SHM_SWEEP   0: do not sweep dead processes' shm regions
 *                          when opening an shm endpoint (default 1).
 *   NPROXY_NET_MR_MODE     local, allocated or efa (both): honour these
 *                          registration modes although the provider does
 *                          not ask for them (runs EFA's path elsewhere).
 *
 * See Documentation/net.md for the op FIFO record format and tag layout.
 */
#ifndef NPROXY_NET_H
#define NPROXY_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <nproxy/seam.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NPROXY_NET_MAX_RANKS		4096	/* 12 bits of the tag */
#define NPROXY_NET_MAX_COMM_ID		2047	/* 11 bits of the tag */
#define NPROXY_NET_DEFAULT_CREDITS	8	/* like NCCL_STEPS */
#define NPROXY_NET_DEFAULT_TIMEOUT_MS	30000
#define NPROXY_NET_DEFAULT_RDZV_TIMEOUT_MS 60000

struct nproxy_bp;
struct nproxy_net;

struct nproxy_net_opts {
	uint32_t size;		/* sizeof(struct nproxy_net_opts) as the caller compiled it */
	uint32_t rank;		/* this rank, 0..n_ranks-1 */
	uint32_t n_ranks;	/* 1..NPROXY_NET_MAX_RANKS */
	uint32_t comm_id;	/* same on every rank, 0..NPROXY_NET_MAX_COMM_ID */
	uint32_t credits;	/* 0: NPROXY_NET_CREDITS or the default */
	uint32_t timeout_ms;	/* 0: NPROXY_NET_TIMEOUT_MS or the default */
	uint32_t rdzv_timeout_ms; /* 0: NPROXY_NET_RDZV_TIMEOUT_MS or 60000: a peer
				 * that never shows up at the exchange */
	const char *provider;	/* NULL: FI_PROVIDER, else efa > shm (one host) > tcp;ofi_rxm */
	const char *root;	/* NULL: NPROXY_ROOT_COMM_ID ("host:port") */
	/*
	 * Optional bananaphone bus spanning exactly these n_ranks (bus rank ==
	 * comm rank): names are then exchanged over it and no TCP rendezvous
	 * is used.  Borrowed during nproxy_net_open() only.
	 */
	struct nproxy_bp *bp;
};

/* Every field not named is 0: the defaults above. */
#define NPROXY_NET_OPTS_INIT { .size = sizeof(struct nproxy_net_opts) }

/*
 * Collective over the comm: every rank calls it; returns once every rank's
 * endpoint is known.  On failure *out is NULL and the log names the rank,
 * provider or rendezvous step that failed.
 */
NPROXY_API enum nproxy_status nproxy_net_open(const struct nproxy_net_opts *opts,
					      struct nproxy_net **out);
/* Cancels whatever is still posted and frees everything.  NULL is a no-op. */
NPROXY_API void nproxy_net_close(struct nproxy_net *net);

/* The seam and host barrier this engine implements (valid until close). */
NPROXY_API void nproxy_net_seam(struct nproxy_net *net, struct nproxy_seam *out);
NPROXY_API void nproxy_net_host_barrier(struct nproxy_net *net,
					struct nproxy_host_barrier *out);

/*
 * Register [buf, buf+len) for ops (struct nproxy_net_addr.mr).  Cached per
 * buffer: registering the same (buf, len) again returns the same id and
 * takes a reference.  The buffer must outlive every block using it.
 */
NPROXY_API enum nproxy_status nproxy_net_mr_register(struct nproxy_net *net, void *buf,
						     size_t len, uint32_t *id);
/* Drop one reference; NPROXY_BUSY if a started block still uses it. */
NPROXY_API enum nproxy_status nproxy_net_mr_deregister(struct nproxy_net *net, uint32_t id);

NPROXY_API uint32_t nproxy_net_rank(const struct nproxy_net *net);
NPROXY_API uint32_t nproxy_net_size(const struct nproxy_net *net);
/* "shm", "tcp;ofi_rxm", "efa", ... */
NPROXY_API const char *nproxy_net_provider(const struct nproxy_net *net);
/* Text of the last error (names rank, peer, stream, block, op); "" if none.
 * NULL: this thread's last failed nproxy_net_open() (the error-text rule: <nproxy/status.h>). */
NPROXY_API const char *nproxy_net_strerror(const struct nproxy_net *net);

/*
 * Cross-host abort.  A rank that learns that rank dead_rank died (its
 * host's bus saw it; dead_pid its pid, 0 if unknown) calls
 * nproxy_net_abort(): the engine fails with NPROXY_PEER_DEAD here and the
 * message reaches every other rank over the engine in ceil(log2 n) hops
 * (a binomial tree that routes around the dead rank), whose engines fail
 * the same way.  A no-progress deadline does not start one (in a ring
 * every rank stalls at once and would blame a live neighbour): its error
 * names the silent peer and its host address instead.  It waits at most 0.5 s for its sends to
 * leave, so the caller may exit right after.  Only the first call counts.
 *
 * Messages are received while the engine's completion queue is driven:
 * by the seam's progress and the host barrier's test, or, for a caller
 * waiting on something else, by nproxy_net_poll(), which returns the
 * engine's sticky status (NPROXY_SUCCESS while nothing failed).  It never
 * waits: while another thread is inside the engine it returns
 * NPROXY_SUCCESS at once, and the status shows at a later call.
 *
 * nproxy_net_abort_reason(): "" until an abort was started or received,
 * then "rank D (pid P, host A) <what happened> (reported by rank O)" --
 * the first one this rank learnt; host A is the dead rank's address as
 * the reporting rank's provider prints it.  nproxy_net_strerror() says
 * the same once the abort is what failed the engine.
 */
NPROXY_API void nproxy_net_abort(struct nproxy_net *net, uint32_t dead_rank, int dead_pid,
				 const char *why);
NPROXY_API enum nproxy_status nproxy_net_poll(struct nproxy_net *net);
NPROXY_API const char *nproxy_net_abort_reason(const struct nproxy_net *net);

/*
 * The rendezvous on its own (also used by tests and tools): all-gather
 * blobs of any size over TCP at root "host:port", rank 0 listening.
 */
struct nproxy_rdzv;

struct nproxy_rdzv_opts {
	uint32_t size;		/* sizeof(struct nproxy_rdzv_opts) as the caller compiled it */
	uint32_t rank;		/* this rank, 0..n_ranks-1; rank 0 listens */
	uint32_t n_ranks;	/* >= 1 */
	/* Deadline of each exchange step; 0: NPROXY_NET_DEFAULT_RDZV_TIMEOUT_MS. */
	uint32_t timeout_ms;
	const char *root;	/* "host:port", required */
};

/* Every field not named is 0. */
#define NPROXY_RDZV_OPTS_INIT { .size = sizeof(struct nproxy_rdzv_opts) }

NPROXY_API enum nproxy_status nproxy_rdzv_open(const struct nproxy_rdzv_opts *opts,
					       struct nproxy_rdzv **out);
/* *out is malloc'd: n_ranks blobs back to back; lens[r]/offs[r] locate each. */
NPROXY_API enum nproxy_status nproxy_rdzv_allgather(struct nproxy_rdzv *rz, const void *data,
						    size_t len, void **out, size_t *lens,
						    size_t *offs);
/*
 * This rank cannot go on (a local error after open): every other rank's
 * pending or next all-gather fails with `st` and a message carrying `why`
 * (the root relays it), instead of waiting for the deadline or blaming
 * the root.  Later all-gathers on rz return the first error.  Idempotent.
 */
NPROXY_API void nproxy_rdzv_abort(struct nproxy_rdzv *rz, enum nproxy_status st,
				  const char *why);
/* Text of the last error (names the root, rank and step); "" if none.
 * NULL: this thread's last failed nproxy_rdzv_open() (the error-text rule: <nproxy/status.h>). */
NPROXY_API const char *nproxy_rdzv_strerror(const struct nproxy_rdzv *rz);
/* NULL is a no-op. */
NPROXY_API void nproxy_rdzv_close(struct nproxy_rdzv *rz);

/*
 * Regions of libfabric's shm provider left by dead processes
 * (/dev/shm/<pid>:<uid>:<index>[_<n>]): a process killed by SIGKILL cannot
 * remove them, and once PIDs wrap one at a new process's own name makes
 * its endpoint fail.  nproxy_net_open() removes the one at its own name
 * and, unless NPROXY_NET_SHM_SWEEP=0, sweeps the others when it opens an
 * shm endpoint.  The sweep removes a file only if its PID does not exist
 * (kill(pid, 0) == ESRCH) and no process we can see has it open or
 * mapped; never a live process's.  /dev/shm shared with processes in
 * another PID namespace is not supported (their PIDs look dead from here;
 * the shm provider's names collide there anyway).
 */
enum nproxy_shm_verdict {
	NPROXY_SHM_REMOVED,
	NPROXY_SHM_WOULD_REMOVE,	/* dry run */
	NPROXY_SHM_IN_USE,		/* its PID is dead but a live process uses it: kept */
	NPROXY_SHM_FAILED,		/* unlink failed (err) */
};

struct nproxy_shm_sweep_opts {
	uint32_t size;		/* sizeof(struct nproxy_shm_sweep_opts) as the caller compiled it */
	const char *dir;	/* NULL: /dev/shm */
	int pid;		/* 0: every dead PID; else only this (dead) PID's files */
	bool dry_run;		/* report, remove nothing */
	/* Called once per file of a dead PID, after the verdict. */
	void (*each)(const char *path, int pid, enum nproxy_shm_verdict v, int user_pid,
		     int err, void *arg);
	void *arg;
};

#define NPROXY_SHM_SWEEP_OPTS_INIT { .size = sizeof(struct nproxy_shm_sweep_opts) }

/* opts may be NULL (every dead PID, /dev/shm).  *n_removed: files removed. */
NPROXY_API enum nproxy_status nproxy_net_shm_sweep(const struct nproxy_shm_sweep_opts *opts,
						   uint32_t *n_removed);
NPROXY_API const char *nproxy_shm_verdict_str(enum nproxy_shm_verdict v);

/*
 * Region locks a dead local peer left held.  libfabric's shm provider
 * takes a spinlock in a region's header around every command it puts into
 * that region (a sender, in the receiver's region) and around its own
 * progress (the owner, in its own).  A process killed inside that section
 * leaves the lock held for good, and every process that touches the
 * region -- its owner in fi_cq_read(), its senders in fi_tsend() -- spins
 * on it for ever, holding whatever locks it held when it called.
 *
 * Called once a local peer is known dead (nproxy_rank_check() and
 * nproxy_rank_abandon() call it when their bus saw a death), this reads
 * the lock of every region mapped in this process for hold_ms (0: 200),
 * never taking one: a lock seen free at any read is left alone; one held
 * for the whole window, while a peer is dead, is the dead peer's, and is
 * released.  The header's layout is checked first against this process's
 * own region (version, owner pid, and the region's own address where the
 * provider keeps it); a layout that does not match touches nothing.  The
 * command the dead process was writing may be half there: the job is
 * failing anyway; this only lets the survivors see it and say so.
 * NPROXY_SHM_BREAK_LOCKS=0 turns it off.  Returns the locks released.
 */
NPROXY_API uint32_t nproxy_net_shm_break_dead_locks(uint32_t hold_ms);

/*
 * How the shm provider copies a large message in this process: "CMA on"
 * or "CMA off", with why (NPROXY_SHM_CMA: auto measures a CMA read of this
 * process's memory against a memcpy; on; off; or the FI_SHM_DISABLE_CMA the
 * user set).  Decided once per process, before libfabric's first
 * fi_getinfo() in nproxy_net_open(); a first call here decides it too.
 */
NPROXY_API const char *nproxy_net_shm_copy(void);

#ifdef __cplusplus
}
#endif
#endif
