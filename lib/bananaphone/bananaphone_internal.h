/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Bananaphone internals: the shared segment layout, the join wire format
 * and the helpers the bananaphone_*.c files share.  Not installed; the
 * selftests include it to speak the wire format directly (malformed and
 * wrong-uid clients).
 */
#ifndef NPROXY_BANANAPHONE_INTERNAL_H
#define NPROXY_BANANAPHONE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <nproxy/bananaphone.h>
#include "common/common_internal.h"

#define BP_MAGIC		0x4e504250u	/* "NPBP" */
#define BP_VERSION		2
#define BP_CACHELINE		64
#define BP_SLOT_SIZE		8192
#define BP_SLOT_HDR		64
#define BP_SLOT_PAYLOAD		(BP_SLOT_SIZE - BP_SLOT_HDR)
#define BP_RING_SLOTS		8
#define BP_WAIT_SLICE_MS	10	/* longest futex sleep before a liveness poll */
#define BP_SPIN_NS		50000	/* default spin before sleeping, only if ranks <= cpus */
#define BP_YIELDS		2	/* sched_yield()s before sleeping */
#define BP_MAX_YIELDS		1000	/* NPROXY_BP_YIELDS's bound */
#define BP_MAX_SPIN_US		1000000	/* NPROXY_BP_SPIN_US's bound: 1 s */
#define BP_WAIT_ANY		0xffffffffu
#define BP_MAX_CONNS		(2 * NPROXY_BP_MAX_RANKS)	/* join connections held at once */
#define BP_SOCK_PREFIX		"nproxy-bp/"

/* ---- shared segment (the memfd), all offsets from its start ---- */

struct bp_ctl {
	uint32_t magic;
	uint32_t version;
	uint32_t n_ranks;
	uint32_t ring_slots;
	uint32_t slot_size;
	uint32_t leader_pid;
	uint64_t seg_size;
	uint64_t ranks_off;	/* struct npx_bp_rank_ctl[n_ranks] */
	uint64_t rings_off;	/* ring r at rings_off + r * ring_stride */
	uint64_t ring_stride;
	char job_id[NPROXY_BP_MAX_JOB_ID + 1];
	/* 1 + the first rank seen dead by anyone, or 0.  Only the leader
	 * watches every follower; it (or a follower that saw a death) posts it
	 * here so that every rank learns of a death it does not watch. */
	_Atomic uint32_t dead;
};

/* One per rank.  Line 0 is what others write (bell) and read to decide
 * whether to wake us; line 1 is written only by the owner. */
struct npx_bp_rank_ctl {
	_Atomic uint32_t bell;		/* futex word this rank sleeps on */
	_Atomic uint32_t sleeping;	/* 1 while (about to be) in FUTEX_WAIT */
	_Atomic uint32_t wait_for;	/* rank whose data it waits for, or BP_WAIT_ANY */
	uint32_t pad0[BP_CACHELINE / 4 - 3];
	_Atomic uint32_t left;		/* set by nproxy_bp_hangup: orderly departure */
	uint32_t pid;			/* written by the leader at join */
	_Atomic uint64_t barrier_arrived; /* highest barrier seq this rank entered */
	/* 1 + the rank whose death made this one give up (nproxy_bp_abandon), or 0:
	 * peers that see this rank gone then name that rank, not this one. */
	_Atomic uint32_t saw_dead;
	uint8_t pad1[BP_CACHELINE - 20];
};
_Static_assert(sizeof(struct npx_bp_rank_ctl) == 2 * BP_CACHELINE, "two cache lines per rank");

struct bp_counter {
	_Atomic uint64_t v;
	uint8_t pad[BP_CACHELINE - 8];
};

/*
 * Ring of one producer: head (fragments published) on its own line, then
 * consumed[reader] (fragments that reader has copied out) one line each,
 * then BP_RING_SLOTS slots.  The producer may write slot (head % slots)
 * only when head - consumed[r] < slots for every reader r still present.
 */
struct bp_ring_hdr {
	struct bp_counter head;
	struct bp_counter consumed[];	/* [n_ranks] */
};

enum bp_op {
	BP_OP_ALLGATHER = 1,
	BP_OP_BCAST	= 2,
};

struct bp_slot_hdr {
	uint32_t op;		/* enum bp_op */
	uint32_t frag_len;	/* payload bytes in this slot */
	uint64_t op_seq;	/* collective number, same on every rank */
	uint64_t msg_len;	/* whole message */
	uint64_t frag_off;	/* offset of this fragment in the message */
	uint8_t pad[BP_SLOT_HDR - 32];
};

/* ---- join wire format (SOCK_SEQPACKET, one message each) ---- */

enum bp_wire_type {
	BP_WIRE_HELLO	= 1,	/* follower -> leader */
	BP_WIRE_BYE	= 2,	/* follower -> leader: hung up before the welcome */
	BP_WIRE_WELCOME	= 3,	/* leader -> follower, SCM_RIGHTS: the memfd */
	BP_WIRE_REFUSE	= 4,	/* leader -> follower: status + text, then close */
};

struct bp_wire_hello {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t rank;
	uint32_t n_ranks;
	uint32_t pid;
	uint32_t reserved;	/* must be 0 */
	char job_id[NPROXY_BP_MAX_JOB_ID + 1];
	uint8_t pad[7];
};

struct bp_wire_reply {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	int32_t status;		/* enum nproxy_status */
	uint32_t n_fds;		/* WELCOME: 1 */
	char text[232];
};

/* ---- process-local state ---- */

enum bp_state {
	BP_S_JOINING,	/* leader admitting followers / follower awaiting welcome */
	BP_S_READY,
	BP_S_BROKEN,	/* sticky error, see bp->sticky */
	BP_S_HUNG_UP,
};

struct bp_conn {
	int fd;
	uint32_t rank;		/* valid once joined */
	pid_t pid;
	int pidfd;
	bool joined;
};

struct nproxy_bp {
	uint32_t rank;
	uint32_t n;
	bool leader;
	uint64_t spin_ns;	/* spin this long before sleeping (0: ranks > cpus) */
	int yields;		/* then yield the cpu this many times */
	enum bp_state state;
	enum nproxy_status sticky;
	char job_id[NPROXY_BP_MAX_JOB_ID + 1];
	struct npx_errbuf err;	/* nproxy_bp_strerror() */

	/* segment */
	void *seg;
	size_t seg_size;
	struct bp_ctl *ctl;
	int memfd;		/* leader, until the welcomes are sent */

	/* peers.  Descriptors stay O(1) per follower and O(processes) for the
	 * leader: the leader holds one pidfd per other process, a follower
	 * only the leader's and the one of the rank it waits for (watch_fd);
	 * ranks in this process are never watched (their death is ours). */
	pid_t pids[NPROXY_BP_MAX_RANKS];
	int pidfds[NPROXY_BP_MAX_RANKS];	/* -1: not watched by this rank */
	uint32_t want_watch;	/* rank the current wait waits for, or BP_WAIT_ANY */
	uint32_t watch_rank;	/* rank watch_fd belongs to, or BP_WAIT_ANY */
	int watch_fd;
	uint64_t next_live_check_ns;

	/* join */
	int sock;		/* leader: listening; follower: to the leader, until welcome */
	struct bp_conn conns[BP_MAX_CONNS];
	uint32_t n_conns;
	uint32_t n_joined;

	/* collectives */
	uint64_t op_seq;		/* ring collectives started */
	uint64_t barrier_seq;		/* last barrier this rank entered */
	uint64_t barrier_published;	/* last barrier seq written to the segment */
	uint64_t barrier_retry;		/* seq of a nproxy_bp_barrier() that timed out, or 0 */
	uint64_t head;			/* local copy of my ring's head */
	uint64_t min_consumed;		/* cached slowest reader of my ring */
	uint64_t consumed[NPROXY_BP_MAX_RANKS];	/* local copy of my consumed[] per ring */
};

/* bananaphone_error.c (a leaf: every other file records errors through it) */
enum nproxy_status npx_bp_fail(struct nproxy_bp *bp, enum nproxy_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
enum nproxy_status npx_bp_error(struct nproxy_bp *bp, enum nproxy_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
enum nproxy_status npx_bp_break(struct nproxy_bp *bp, enum nproxy_status st);
void npx_bp_keep_setup_err(const struct nproxy_bp *bp);

/* bananaphone_segment.c */
size_t npx_bp_segment_size(uint32_t n_ranks);
enum nproxy_status npx_bp_segment_create(struct nproxy_bp *bp);
enum nproxy_status npx_bp_segment_attach(struct nproxy_bp *bp, int memfd);
void npx_bp_segment_unmap(struct nproxy_bp *bp);
struct npx_bp_rank_ctl *npx_bp_rank_ctl(struct nproxy_bp *bp, uint32_t rank);
struct bp_ring_hdr *npx_bp_ring(struct nproxy_bp *bp, uint32_t rank);
void *npx_bp_slot(struct nproxy_bp *bp, uint32_t rank, uint64_t idx);

/* bananaphone_socket.c */
int npx_bp_sock_name(const char *job_id, uid_t uid, void *sun, unsigned int *len);
enum nproxy_status npx_bp_listen(struct nproxy_bp *bp);
enum nproxy_status npx_bp_dial(struct nproxy_bp *bp, uint32_t timeout_ms);
enum nproxy_status npx_bp_join_step(struct nproxy_bp *bp, uint64_t deadline_ns);
void npx_bp_join_abort(struct nproxy_bp *bp, enum nproxy_status st, const char *text);
void npx_bp_refuse_late(struct nproxy_bp *bp);
void npx_bp_close_join(struct nproxy_bp *bp);

/* bananaphone_liveness.c */
int npx_bp_pidfd_open(pid_t pid);
enum nproxy_status npx_bp_check_dead(struct nproxy_bp *bp);

/* bananaphone_wait.c */
enum bp_step {
	BP_STEP_ERROR	= -1,	/* npx_bp_fail() was called */
	BP_STEP_IDLE	= 0,	/* nothing to do until someone else moves */
	BP_STEP_MOVED	= 1,	/* made progress, not done */
	BP_STEP_DONE	= 2,
};
typedef enum bp_step (*bp_step_fn)(struct nproxy_bp *bp, void *arg, uint32_t *wait_for);
enum nproxy_status npx_bp_wait(struct nproxy_bp *bp, bp_step_fn step, void *arg, uint64_t deadline_ns,
			   const char *what);
void npx_bp_notify(struct nproxy_bp *bp, uint32_t target, uint32_t source);
void npx_bp_notify_all(struct nproxy_bp *bp, bool force);
enum nproxy_status npx_bp_check_live(struct nproxy_bp *bp, bool force);

/* bananaphone_ring.c */
enum nproxy_status npx_bp_ring_collective(struct nproxy_bp *bp, enum bp_op op, const void *data,
				      size_t len, uint64_t sources, uint8_t **bufs,
				      size_t *lens, uint64_t deadline_ns);

/* bananaphone_barrier.c */
void npx_bp_barrier_publish(struct nproxy_bp *bp, uint64_t seq);
enum bp_step npx_bp_barrier_check(struct nproxy_bp *bp, uint64_t seq, uint32_t *wait_for);

#endif
