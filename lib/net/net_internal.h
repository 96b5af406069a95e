/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Internals of the libfabric network engine (lib/net_*.c), shared between
 * its files: fabric setup, MR cache, op engine, host barrier, exchange.
 */
#ifndef NPROXY_NET_INTERNAL_H
#define NPROXY_NET_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <nproxy/net.h>
#include "common/common_internal.h"

/*
 * Tag layout (64 bits), see Documentation/net.md:
 *   63     space: 0 data op, 1 host barrier
 *   62..52 comm id      (11 bits)
 *   51..50 stream       (2 bits)
 *   49..42 basic block  (low 8 bits of bb)
 *   41..34 epoch        (how many times this (stream, bb & 0xff) was
 *                        started before, mod 256: consecutive CC ops reuse
 *                        block numbers, and a fast rank's next op must not
 *                        match a slow rank's previous one)
 *          the barrier uses bits 49..34 for the low 16 bits of its seq
 *   33..22 source rank  (12 bits)
 *   21..0  op index within (block, source -> destination) (22 bits;
 *          the barrier puts its round here)
 */
#define NET_TAG_BARRIER		(1ull << 63)
#define NET_TAG_MAX_SEQ		((1u << 22) - 1)

static inline uint64_t net_tag(uint64_t space, uint32_t comm, uint32_t stream, uint32_t bb,
			       uint32_t src, uint32_t seq)
{
	return space | ((uint64_t)(comm & 0x7ff) << 52) | ((uint64_t)(stream & 0x3) << 50) |
	       ((uint64_t)(bb & 0xffff) << 34) | ((uint64_t)(src & 0xfff) << 22) |
	       (seq & NET_TAG_MAX_SEQ);
}

enum net_req_kind {
	NET_REQ_OP = 1,		/* a FIFO op of a block */
	NET_REQ_BARRIER = 2,	/* a host barrier send/recv */
	NET_REQ_ABORT = 3,	/* a cross-host abort message (net_abort.c) */
};

/* Every posted request starts with this: the CQ hands back &ctx. */
struct net_req {
	struct fi_context2 ctx;		/* FI_CONTEXT | FI_CONTEXT2 mode: provider scratch */
	uint8_t kind;			/* enum net_req_kind */
	uint8_t posted;			/* in the provider's hands */
	uint8_t done;
	uint8_t is_send;
	uint32_t peer;
};

struct net_block;

struct net_op_state {
	struct net_req req;		/* first: CQ op_context points here */
	struct net_block *blk;
	uint32_t idx;			/* index in the block's op FIFO */
	uint32_t seq;			/* per (block, peer, direction) match index */
	uint8_t local;			/* a REDUCE or COPY: runs in place, never posted */
	uint32_t local_done;		/* bytes of a REDUCE reduced so far (run_local()) */
	uint64_t tag;
	int64_t posted_ms;
};

struct net_block {
	uint32_t stream;
	uint32_t bb;
	bool retired;			/* stopped with ops still in the provider */
	struct nproxy_fifo_set fifos;	/* borrowed from start() to stop() */
	struct nproxy_device_sems dev;
	struct net_op_state *st;	/* n_ops */
	uint32_t n_done;
	uint32_t n_inflight;
	uint32_t first_unposted;	/* scan start */
	uint32_t first_undone;		/* no op before it is posted: the deadline scan's start */
	int64_t eagain_since_ms;	/* 0: the last post did not see -FI_EAGAIN */
	uint32_t eagain_op;		/* the op the provider refused */
	int64_t refusal_end_ms;		/* the last refusal's end: ops' deadlines count from it */
	/*
	 * Completion increments to one semaphore are applied in FIFO order:
	 * sem_head[s] is the first op incrementing s whose increment is not
	 * applied yet, next_same_sem[i] the next op after i incrementing the
	 * same semaphore (NET_NONE: none).  Providers complete out of order
	 * (eager vs rendezvous), the device counts in order.
	 */
	uint32_t *sem_head;		/* [dev.n_sems] */
	uint32_t *next_same_sem;	/* [n_ops] */
	struct net_block *next_grave;	/* also the spare list's link */
	uint32_t cap_ops, cap_next, cap_sems;	/* st, next_same_sem, sem_head sizes */
};

struct net_mr {
	void *base;
	size_t len;
	struct fid_mr *mr;		/* NULL when the provider needs no registration */
	void *desc;
	uint64_t key;			/* fi_mr_key(): the provider's or the requested one */
	uint32_t refs;			/* register() calls minus deregister() calls */
	uint32_t users;			/* started blocks referencing it */
};

struct net_barrier;
struct net_abort;

#define NET_MAX_BLOCKS	64
/* Bytes of a REDUCE run per tick (net_engine.c, run_local()): a multiple
 * of every element size. */
#define NET_REDUCE_SLICE	(64u << 10)
#define NET_NONE	UINT32_MAX
/* Largest timeout an option may ask for (the environment's limit too): one
 * hour, which also keeps it an int for the millisecond clock arithmetic. */
#define NET_MAX_TIMEOUT_MS	(3600u * 1000u)

struct nproxy_net {
	pthread_mutex_t lock;		/* serialises entry points (FI_THREAD_DOMAIN) */
	uint32_t rank, n_ranks, comm_id, credits;
	int timeout_ms;

	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_av *av;
	struct fid_cq *cq;
	fi_addr_t *peers;		/* n_ranks */
	uint64_t mr_mode;		/* FI_MR_* honoured: the provider's, plus
					 * NPROXY_NET_MR_MODE's (net_mr.c) */
	uint64_t next_mr_key;		/* requested keys: unique in the domain */
	char prov[64];

	struct net_mr *mrs;
	uint32_t n_mrs;

	struct net_block *blocks[NET_MAX_BLOCKS];
	uint8_t epoch[4][256];		/* [stream][bb & 0xff]: starts so far */
	struct net_block *graveyard;	/* stopped blocks waiting for cancels */
	/* Retired blocks kept for the next start() (no malloc per block). */
	struct net_block *spare;
	uint32_t n_spare;
	uint32_t *start_scratch;	/* start(): 2 * n_ranks seq counters + sem tails */
	uint32_t cap_scratch;
	uint32_t *inflight;		/* [peer * 2 + is_send] */
	uint32_t *chan_stamp;		/* [peer * 2 + is_send]: blocked in scan # */
	uint32_t scan;			/* scan counter for chan_stamp */
	int64_t *last_activity_ms;	/* [peer]: last completion involving peer */
	int64_t pass_ms;		/* npx_net_pass_ms(): 0 until read in this pass */
	/*
	 * A peer has reached its first op once this rank received anything
	 * from it after the open (the open's own messages all arrive before
	 * it returns).  Until then a wait on that peer is allowed the open's
	 * deadline, not timeout_ms: every rank has connected when the open
	 * returns, but a peer's setup after it (its comm, its buffers) takes
	 * seconds when many processes share few cpus, and that is not the
	 * network's to time.  A peer that dies before its first message is
	 * named by its host's bus and the cross-host abort.
	 */
	bool opened;			/* nproxy_net_open() is returning */
	bool *heard;			/* [peer]: received from since the open */
	/*
	 * [peer]: a send of this rank to it completed since the open.  A send
	 * refused after that is not a peer still setting up but one whose
	 * connection is gone (ofi_rxm refuses for as long as a closed peer is
	 * gone): npx_net_refused_limit_ms().  A ring's next rank is reached,
	 * never heard.
	 */
	bool *reached;
	/*
	 * A caller's first host barrier (seq 1) done here proves that every
	 * rank reached its first op.  While it is in flight (a comm's first
	 * op: its data moves beside its barrier) a wait on a peer already
	 * heard from may still hang on a rank further up a ring that is not
	 * at its first op yet: every wait gets the open's deadline until then.
	 */
	bool first_barrier_in;		/* host barrier 1 arrived, not done */
	int open_limit_ms;		/* the open's (rendezvous) deadline */
	int64_t last_deadline_check_ms;

	enum nproxy_status failed;	/* sticky: the first op error ends the engine */
	struct net_barrier *bar;
	struct net_abort *abort;
	struct npx_errbuf err;	/* nproxy_net_strerror() */
};

/*
 * The clock of the engine's current pass: read at the first stamp or
 * deadline look after the pass's CQ drain (npx_net_drain_cq() starts every
 * pass and forgets the last one's), then kept.  One read a pass, not one
 * per completion and per post (~30 ns each on a VM's kvm-clock; 2 ranks,
 * 1 KiB: about six a op).  Called with net->lock held.
 */
static inline int64_t npx_net_pass_ms(struct nproxy_net *net)
{
	if (!net->pass_ms)
		net->pass_ms = npx_now_ms();
	return net->pass_ms;
}

/* net_error.c: the last error text, the sticky status (its first value wins) */
/* "net rank N" into buf (NET_WHO_LEN): the name the engine's texts start with. */
#define NET_WHO_LEN	32
const char *npx_net_who(const struct nproxy_net *net, char *buf);
#define npx_net_set_err(net, ...)							\
	((void)npx_err_set(&(net)->err, NPX_ERR_NET, NPROXY_LOG_ERROR, NPROXY_SUCCESS,	\
			   npx_net_who(net, (char[NET_WHO_LEN]){ 0 }), __VA_ARGS__))
enum nproxy_status npx_net_fail(struct nproxy_net *net, enum nproxy_status st);
enum nproxy_status npx_net_post_error(struct nproxy_net *net, ssize_t rc, const char *what,
				  uint32_t peer);

/* net_block.c: blocks of op state and their reuse (net->lock held) */
struct net_block *npx_net_block_get(struct nproxy_net *net, uint32_t n_ops, uint32_t n_sems);
void npx_net_block_free(struct nproxy_net *net, struct net_block *b);
/* A retired block whose last in-flight op came back leaves the graveyard. */
void npx_net_block_free_if_reaped(struct nproxy_net *net, struct net_block *b);
uint32_t *npx_net_start_scratch(struct nproxy_net *net, uint32_t n);
/* After the endpoint closed: free the graveyard, spare blocks and scratch. */
void npx_net_engine_free(struct nproxy_net *net);

/* net_cq.c: the shared completion queue */
/* The no-progress deadline of a wait on peer (see heard). */
int npx_net_peer_limit_ms(const struct nproxy_net *net, uint32_t peer);
/* The deadline of posts to peer the provider keeps refusing (see reached). */
int npx_net_refused_limit_ms(const struct nproxy_net *net, uint32_t peer);
enum nproxy_status npx_net_drain_cq(struct nproxy_net *net, uint32_t *moved);
/* A local op (REDUCE, COPY) ran in the posting pass: count it done, apply its increment. */
void npx_net_local_op_done(struct nproxy_net *net, struct net_op_state *s);
void npx_net_barrier_complete(struct nproxy_net *net, struct net_req *req, bool ok);

/* net_mr.c */
enum nproxy_status npx_net_mr_mode_init(struct nproxy_net *net);
enum nproxy_status npx_net_mr_register_locked(struct nproxy_net *net, void *buf, size_t len,
					  uint32_t *id);
void npx_net_mr_close_all(struct nproxy_net *net);

/* net_engine.c */
void npx_net_engine_close(struct nproxy_net *net);
extern const struct nproxy_seam_ops npx_net_seam_ops;

/* net_barrier.c */
enum nproxy_status npx_net_barrier_init(struct nproxy_net *net);
void npx_net_barrier_cancel(struct nproxy_net *net);
/* At open: connect to r +- 2^k (ring neighbours included) within limit_ms. */
enum nproxy_status npx_net_barrier_connect(struct nproxy_net *net, int limit_ms);
void npx_net_barrier_free(struct nproxy_net *net);
extern const struct nproxy_host_barrier_ops npx_net_barrier_ops;

/* net_shm.c: dead processes' shm regions (between fi_endpoint and fi_enable) */
void npx_net_shm_clear_own(struct nproxy_net *net);
/* The pid in a provider's region name "<pid>:<uid>:<index>[_<n>]", else -1. */
long npx_net_shm_name_pid(const char *name);
/* net_shm_prefault.c: the shm regions mapped here, populated once the peers
 * are known (bounded by NPROXY_SHM_PREFAULT_MB). */
void npx_net_shm_prefault(struct nproxy_net *net);
/* A writable shared mapping of a provider-named region. */
struct npx_shm_mapping {
	unsigned long lo, hi;
	unsigned long off;	/* into the file */
	long pid;		/* the pid in its name */
};

/* The mappings of provider-named regions in this process: how many (the
 * first max kept in m) and their bytes. */
unsigned int npx_net_shm_mapped_regions(struct npx_shm_mapping *m, unsigned int max,
					uint64_t *bytes);
/* net_shm_copy.c: the shm provider's large-message copy, decided once per
 * process before libfabric reads its settings. */
void npx_net_shm_pick_copy(void);
void npx_net_shm_sweep_at_open(struct nproxy_net *net);

/* net_abort.c: the cross-host abort (net->lock held unless said) */
enum nproxy_status npx_net_abort_init(struct nproxy_net *net);
void npx_net_abort_cancel(struct nproxy_net *net);
void npx_net_abort_free(struct nproxy_net *net);
void npx_net_abort_complete(struct nproxy_net *net, struct net_req *req, bool ok);
/* The peer's address as this rank's provider prints it ("?" if unknown). */
void npx_net_peer_host(struct nproxy_net *net, uint32_t peer, char *buf, size_t len);
/* Abort sends still in the provider's hands. */
bool npx_net_abort_sending(struct nproxy_net *net);
/* Post the abort receive again if a failure left it unposted, and the
 * abort sends the provider refused for now (-FI_EAGAIN). */
void npx_net_abort_repost(struct nproxy_net *net);
/* This rank learnt that `dead` died: tell every rank. */
void npx_net_abort_locked(struct nproxy_net *net, uint32_t dead, int pid, const char *why);

/*
 * net_in_process.c: this process's engines by (comm_id, rank), so that no
 * abort is sent to an in-process peer whose endpoint is closing (shm
 * reaches it through that endpoint's own memory).
 */
void npx_net_in_process_add(const struct nproxy_net *net);
/* Before the endpoint is closed: no abort send reaches it after this. */
void npx_net_in_process_closing(const struct nproxy_net *net);
void npx_net_in_process_remove(const struct nproxy_net *net);
/* Held around abort sends and npx_net_in_process_closed(). */
void npx_net_in_process_lock(void);
void npx_net_in_process_unlock(void);
bool npx_net_in_process_closed(const struct nproxy_net *net, uint32_t peer);

/* net_exchange.c: all-gathers over bananaphone or the TCP rendezvous */
struct net_xchg {
	struct nproxy_rdzv *rz;
	struct nproxy_bp *bp;
	uint32_t rank, n_ranks;
	int timeout_ms;
};
enum nproxy_status npx_net_xchg_open(struct net_xchg *x, const struct nproxy_net_opts *opts,
				 int timeout_ms);
enum nproxy_status npx_net_xchg_allgather(struct net_xchg *x, const void *blob, size_t len,
				      void **all, size_t *lens, size_t *offs);
/* A local failure after open: tell the other ranks why (TCP rendezvous). */
void npx_net_xchg_abort(struct net_xchg *x, enum nproxy_status st, const char *why);
void npx_net_xchg_close(struct net_xchg *x);
const char *npx_net_xchg_strerror(const struct net_xchg *x);

#endif
