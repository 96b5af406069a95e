/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nproxy-run's data path, shared by the files that split it by concept:
 *   run_job.c      the timing loop: every size, every iteration, the
 *                  barrier before each, the test hooks' triggers
 *   run_rank.c     setup and teardown of this process's ranks (bus,
 *                  engine, handshake region, comm), behind one pair
 *   run_ring.c     one collective through the library's op verb
 *   run_buffers.c  each size's buffers, registered with the engine
 *   run_verify.c   the data each rank sends and the check of what arrived
 *   run_error.c    the first error of the process, and status mapping
 *   run_hooks.c    test hooks read from the environment
 */
#ifndef NPROXY_TOOLS_RUN_RANK_H
#define NPROXY_TOOLS_RUN_RANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <nproxy/bananaphone.h>
#include <nproxy/coll.h>
#include <nproxy/handshake.h>
#include <nproxy/net.h>
#include <nproxy/proxy.h>
#include <nproxy/rank.h>
#include "run.h"

/*
 * Iteration i uses data pattern i % RUN_PATTERNS: an op that leaves the
 * previous iteration's data behind fails the check.  Two patterns, not one
 * per iteration, so that the values are computed once per row: the check
 * of an iteration, when it computed every expected value, cost more CPU
 * than the op, and that burst just before the next timed op slowed the op
 * itself (4 ranks on 2 CPUs, 1 MiB allgather: 400 -> 800 us).
 */
#define RUN_PATTERNS	2
#define RUN_KEEP_MAX	(16u << 20)	/* bytes: larger rows compute every iteration */

/* One rank of this process: what it opened, its buffers, its current op. */
struct run_rank {
	const struct run_opts *o;
	const struct run_place *place;
	double deadline;
	uint32_t rank, world, local_idx;
	uint32_t bus_rank, bus_size;	/* bananaphone: 0 size = no bus */
	bool net_over_bus;

	struct nproxy_rank *nrank;	/* owns the four below */
	struct nproxy_bp *bp;
	struct nproxy_net *net;
	struct nproxy_hs *hs;
	struct nproxy_comm *comm;

	/* Buffers of the current row (the coll registers send and recv). */
	struct run_row row;
	void *send, *recv;		/* the op's input and its result */
	void *want, *tmp;		/* the expected result; one rank's input (to build it):
					 * local rank 0's only, the process builds it once */
	size_t send_len, recv_len;	/* bytes */
	/*
	 * The data of each pattern (run_verify.c), kept after its first use
	 * when the row is at most RUN_KEEP_MAX bytes: the input as filled,
	 * the result as checked.  Later iterations copy and compare them,
	 * which costs a memcpy and a memcmp instead of computing every value.
	 */
	void *in_kept[RUN_PATTERNS], *out_kept[RUN_PATTERNS];
	bool in_valid[RUN_PATTERNS], out_valid[RUN_PATTERNS];
	uint64_t count;			/* the op's count (an allgather's: per rank) */
	size_t esize;

	/* The op verb on this rank; exec_id counts the ops started. */
	struct nproxy_coll *coll;
	uint64_t exec_id;

	int rc;			/* run_exit of the setup/teardown thread */
	char err[400];
};


/*
 * run_rank.c: open every local rank (bus, engine, region, comm; each step
 * is collective, so each rank in its own thread) and close them again.
 * ranks[] carries each rank's place (rank, world, bus) on entry.  Open
 * returns a run_exit code, the first failure recorded with run_fail();
 * close also releases what a failed open left and the current buffers.
 */
int run_ranks_open(struct run_rank *ranks, uint32_t n);
void run_ranks_close(struct run_rank *ranks, uint32_t n);

/* run_ring.c: one iteration of the collective on every local rank. */
int run_ring_iteration(struct run_rank *ranks, uint32_t n, double deadline);

/* run_buffers.c: this row's buffers, zeroed; and back. */
int run_buffers_alloc(struct run_rank *rc, const struct run_row *row);
void run_buffers_free(struct run_rank *rc);
/* Before any buffer: every size fits in this host's memory (host_ranks of
 * them, MemAvailable and the memory cgroup's room), else a run_fail()
 * saying "would need N GB, M GB available". */
int run_memory_check(const struct run_rank *ranks, uint32_t n_local, uint32_t host_ranks);

/* run_verify.c: each rank's inputs for iteration iter; an allreduce's
 * expected result into want (tmp: room for one rank's input), the same for
 * every rank, built once per process; the check of the result (against
 * want for an allreduce, block by block for moved data: wrong elements,
 * the first described in msg); where the selftests' corruption hook flips
 * a byte.  iter is the run's iteration (messages name it); the data are
 * those of its pattern. */
void run_fill_inputs(struct run_rank *rc, uint64_t iter);
void run_expect(const struct run_rank *rc, void *want, void *tmp, uint64_t iter);
uint64_t run_verify(const struct run_rank *rc, const void *expected, uint64_t iter, uint64_t size,
		    char *msg, size_t len);
/* A result equal, bit for bit, to one run_verify() passed for the same
 * pattern (true: nothing left to check); and the keeping of such a result. */
bool run_result_kept(const struct run_rank *rc, uint64_t iter);
void run_keep_result(struct run_rank *rc, uint64_t iter);
uint8_t *run_corrupt_byte(struct run_rank *rc);

/*
 * run_dtype.c: typed values (kind: an enum nproxy_redop, or -1 for data
 * only moved) of rank r for elements base .. base+n-1 of iteration iter;
 * the expected results; wrong elements (bit-exact, float avg within the
 * type's precision).
 */
void run_dtype_fill(void *buf, enum nproxy_dtype dt, int kind, uint32_t r, uint32_t world,
		    uint64_t base, size_t n, uint64_t iter);
void run_dtype_expect_reduce(void *want, void *tmp, enum nproxy_dtype dt, enum nproxy_redop op,
			     uint32_t world, size_t n, uint64_t iter);
void run_dtype_expect_moved(void *want, enum nproxy_dtype dt, uint32_t r, uint64_t base, size_t n,
			    uint64_t iter);
uint64_t run_dtype_count_wrong(const void *got, const void *want, size_t n, enum nproxy_dtype dt,
			       int kind);
size_t run_dtype_first_wrong(const void *got, const void *want, size_t n, enum nproxy_dtype dt);

/* run_error.c: record the first error of this process (later ones are
 * usually fallout) and return code; whether a failure left peers unsure
 * of our state (anything but a data mismatch); a status as a run_exit. */
void run_error_init(struct run_proc_record *rec);
int run_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool run_failed_fatally(void);
int run_status_exit(enum nproxy_status st);
/* The same, for a failure that is not the command line's fault. */
int run_status_exit_nonusage(enum nproxy_status st);

/* run_hooks.c: the selftests' hooks (each documented there). */
char run_hang_hook(uint32_t rank, uint64_t op);
uint32_t run_pause_hook(uint64_t op);
int run_corrupt_hook(uint32_t *row);
int run_kill_hook(uint32_t *iter);

#endif
