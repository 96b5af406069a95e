/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy: one rank of a job, opened in one call.
 *
 * nproxy_rank_open() does, for one rank, what a runtime otherwise wires by
 * hand from four option structs, in this order (every step is collective
 * over the ranks named in the options):
 *
 *   1. the Bananaphone bus among the ranks of this host (<nproxy/bananaphone.h>;
 *      local rank 0 creates it, the others connect), a barrier and an
 *      exchange of (rank, n_ranks) that checks every local rank agrees;
 *      skipped when this host runs one rank of the job;
 *   2. the network engine (<nproxy/net.h>): names exchanged over the bus
 *      when every rank of the job is on this host, else over TCP at the
 *      root address;
 *   3. the handshake region (<nproxy/handshake.h>): trigger words and
 *      semaphores, kmod or memfd backend;
 *   4. the comm in the shared proxy registry (<nproxy/proxy.h>) over that
 *      engine, host barrier and region, with the device-trigger gate on.
 *
 * Afterwards the caller drives collectives through the accessors: it
 * registers buffers with nproxy_rank_net(), submits device programs on
 * nproxy_rank_hs() and enqueues proxy tasks on nproxy_rank_comm().
 * examples/collective.c is a whole allgather.
 *
 * Threading: one rank is used by one thread at a time; several ranks may
 * be opened from threads of one process (each its own local rank).
 */
#ifndef NPROXY_RANK_H
#define NPROXY_RANK_H

#include <stdbool.h>
#include <stdint.h>
#include <nproxy/handshake.h>
#include <nproxy/proxy.h>
#include <nproxy/status.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nproxy_rank;

/* The steps of nproxy_rank_open(), in order (see the top of this file). */
enum nproxy_rank_step {
	NPROXY_RANK_STEP_BUS	= 1,	/* only when local_size > 1 */
	NPROXY_RANK_STEP_ENGINE	= 2,
	NPROXY_RANK_STEP_REGION	= 3,
	NPROXY_RANK_STEP_COMM	= 4,
};

/* nproxy_rank_opts.open_timeout_ms when 0: libfabric start-up alone can
 * take seconds on a loaded host. */
#define NPROXY_RANK_DEFAULT_OPEN_TIMEOUT_MS	60000u

/*
 * Start from NPROXY_RANK_OPTS_INIT (size set, the rest zero) and set the
 * job's shape; every other field has a default at 0 / NULL.  A newer, longer caller works as long as the bytes
 * past the fields this library knows are zero.
 */
struct nproxy_rank_opts {
	uint32_t size;		/* sizeof(struct nproxy_rank_opts) as the caller compiled it */
	uint32_t rank;		/* this rank in the job, 0..n_ranks-1 */
	uint32_t n_ranks;	/* ranks in the job, 1..NPROXY_NET_MAX_RANKS */
	uint32_t local_rank;	/* index among this host's ranks; 0 leads the bus */
	uint32_t local_size;	/* ranks on this host, 1..NPROXY_BP_MAX_RANKS; 0: 1 */
	/*
	 * Names the bus: the same on every local rank, unique among the jobs
	 * of this uid on this host (printable ASCII, no '/', at most
	 * NPROXY_BP_MAX_JOB_ID bytes).  Required when local_size > 1.
	 */
	const char *job_id;
	/* libfabric provider ("shm", "tcp;ofi_rxm", "efa"); NULL: FI_PROVIDER,
	 * else efa, then shm when every rank is on this host, then tcp;ofi_rxm. */
	const char *provider;
	/* "host:port" of the TCP rendezvous (rank 0 listens) when the job
	 * spans hosts; NULL: NPROXY_ROOT_COMM_ID. */
	const char *root;
	enum nproxy_hs_backend backend;	/* AUTO: NPROXY_HANDSHAKE, else kmod if loaded, else memfd */
	uint32_t n_streams;	/* trigger words, 1..NPROXY_MAX_STREAMS; 0: 1 */
	uint32_t n_sems;	/* semaphores, 1..NPROXY_MAX_SEMS; 0: n_ranks + 1, at most NPROXY_MAX_SEMS */
	/* This rank's device among the devices its process drives (the
	 * runtime's nec_dev); picks the proxy group with ranks_per_proxy:
	 * gid = device_index / ranks_per_proxy.  A process opening several
	 * ranks gives each its own. */
	uint32_t device_index;
	uint32_t ranks_per_proxy; /* 0: environment, see <nproxy/proxy.h> */
	/*
	 * DEFAULT: the comm's default (NPROXY_IDLE_POLICY, NPROXY_ONE_THREAD_PER_CORE,
	 * else ADAPTIVE), except that when this host's ranks (local_size)
	 * outnumber its online cpus and neither variable is set, ADAPTIVE_YIELD:
	 * the peer a worker waits for is then often runnable on its cpu.
	 */
	enum nproxy_idle_policy idle_policy;
	/*
	 * Deadline of the whole open, every collective step included (a peer
	 * that never shows up fails the open with NPROXY_TIMEOUT); also
	 * bounds the wait for the other local ranks in nproxy_rank_close().
	 * 0: NPROXY_RANK_DEFAULT_OPEN_TIMEOUT_MS (an open cannot "just check").
	 */
	uint32_t open_timeout_ms;
	/* The engine's no-progress deadline per posted op; 0: NPROXY_NET_TIMEOUT_MS or 30000. */
	uint32_t net_timeout_ms;
	/* nproxy_wait_status()'s default wait on this comm; 0: NPROXY_PROXY_TIMEOUT_S or 300 s. */
	uint32_t wait_timeout_ms;
	/*
	 * Optional: called on the opening thread before each step, so that a
	 * runtime can say what it is waiting for (a job that hangs in its
	 * setup shows the step) or add its own collective work once the bus
	 * exists (nproxy_rank_bp(rank) is set from STEP_ENGINE on).  A status
	 * other than NPROXY_SUCCESS ends the open with that status, every
	 * part released; the reason is the hook's to keep.
	 */
	enum nproxy_status (*step_hook)(struct nproxy_rank *rank, enum nproxy_rank_step step,
					void *arg);
	void *step_arg;
};

#define NPROXY_RANK_OPTS_INIT { .size = sizeof(struct nproxy_rank_opts) }

struct nproxy_net;
struct nproxy_comm;
struct nproxy_bp;

/*
 * Collective over the job: every rank calls it with matching options.
 * NPROXY_INVALID for bad options (size too small or unknown bytes set,
 * rank >= n_ranks, local_rank >= local_size, no job_id with local_size > 1,
 * a provider this host does not have, local ranks that disagree);
 * otherwise the status of the step that failed (NPROXY_PEER_DEAD when a
 * local peer died, NPROXY_TIMEOUT when one never came, ...).  On failure
 * *out is NULL, nothing is left behind (no fd, thread, mapping or
 * /dev/shm file) and, when out is not NULL, the reason is kept for
 * nproxy_rank_strerror(NULL) in this thread.
 */
NPROXY_API enum nproxy_status nproxy_rank_open(const struct nproxy_rank_opts *opts,
					       struct nproxy_rank **out);
/*
 * Tear down: comm (aborting unfinished tasks), engine, handshake region,
 * bus.  With a bus, first waits (bounded by the open
 * timeout; a dead peer ends it at once) until every local rank closes, so
 * no endpoint goes away while a peer may still use it.  NULL is a no-op.
 */
NPROXY_API void nproxy_rank_close(struct nproxy_rank *rank);
/*
 * The same teardown after a failure that leaves the peers unsure of this
 * rank's state: no wait for them and no hangup, so that once this process
 * exits they see this rank die rather than leave (they watch its pidfd;
 * while the process lives on they wait up to their own timeouts), and the
 * bus names the peer recorded with nproxy_bp_abandon(), if any.  NULL is a
 * no-op.
 */
NPROXY_API void nproxy_rank_abandon(struct nproxy_rank *rank);

/*
 * Which step failed and why, naming the peer rank where known; "" when
 * nothing failed.  NULL: this thread's last failed nproxy_rank_open() (the error-text rule: <nproxy/status.h>).
 */
NPROXY_API const char *nproxy_rank_strerror(const struct nproxy_rank *rank);
/*
 * Liveness of the whole job, for a caller's wait loop (never sleeps; call
 * it every few ms): polls this host's bus and drives the engine's abort
 * receive.  A local rank's death seen on the bus is sent to every other
 * rank of the job (nproxy_net_abort(): rank, pid, host); an abort from
 * another host fails the engine.  Returns NPROXY_PEER_DEAD (or the
 * engine's sticky error) with nproxy_rank_strerror() naming the dead
 * rank, its pid and host, else NPROXY_SUCCESS.  nproxy_rank_abandon()
 * sends the same abort when the bus saw a death.
 */
NPROXY_API enum nproxy_status nproxy_rank_check(struct nproxy_rank *rank);

/* The parts, owned by the rank: valid until nproxy_rank_close(). */
NPROXY_API struct nproxy_comm *nproxy_rank_comm(struct nproxy_rank *rank);
NPROXY_API struct nproxy_hs *nproxy_rank_hs(struct nproxy_rank *rank);
NPROXY_API struct nproxy_net *nproxy_rank_net(struct nproxy_rank *rank);
/* NULL when this host runs one rank of the job (no bus). */
NPROXY_API struct nproxy_bp *nproxy_rank_bp(struct nproxy_rank *rank);
/* The idle policy the open chose for the comm (DEFAULT: the comm's own). */
NPROXY_API enum nproxy_idle_policy nproxy_rank_idle_policy(const struct nproxy_rank *rank);
/* This rank in the job and the job's size (0 for NULL). */
NPROXY_API uint32_t nproxy_rank_rank(const struct nproxy_rank *rank);
NPROXY_API uint32_t nproxy_rank_size(const struct nproxy_rank *rank);
/* The job rank of the local rank bus_rank (as nproxy_bp_dead_peer()
 * names it); UINT32_MAX without a bus or out of range. */
NPROXY_API uint32_t nproxy_rank_of_bus_rank(const struct nproxy_rank *rank, uint32_t bus_rank);

#ifdef __cplusplus
}
#endif
#endif
