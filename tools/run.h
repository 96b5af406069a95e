/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nproxy-run internals.  The job is split by concept:
 *   run_opts.c    command line (getopt_long), sizes and sweeps (cli.c)
 *   run_env.c     launcher environment (NPROXY_*, Open MPI, Slurm, MPICH)
 *   run_pmix.c    the launcher's PMIx server: place and root address
 *   run_job.c     the data path of one process, and its timing loop; the
 *                 files it is made of share run_rank.h (rank setup and
 *                 teardown, ring scheduling, buffers, verification,
 *                 errors, test hooks)
 *   run_crash.c   fatal signals, named;  run_kill.c  kill points
 *   run_fabric.c  the providers libfabric offers here
 *   run_report.c  progress bar, results table, JSON
 *   nproxy-run.c  main: self-fork supervisor or one launched rank
 */
#ifndef NPROXY_TOOLS_RUN_H
#define NPROXY_TOOLS_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <nproxy/seam.h>
#include "run_clock.h"

#define RUN_MAX_SIZES	64
#define RUN_MAX_RANKS	64	/* the bananaphone bus limit (NPROXY_BP_MAX_RANKS) */
/* Every rank holds the whole result buffer and its inputs. */
#define RUN_MAX_SIZE_BYTES	(256ULL << 20)
/* Past --timeout, the time a supervised rank waits for its supervisor (run_job.c). */
#define RUN_SUPERVISED_GRACE_S	3.0
/*
 * Result rows of a run: sizes x data types x ops x variants x cycles
 * (nccl-tests mode may loop over every type and op, out-of-place and in
 * place); each process's record holds one result per row.
 */
#define RUN_MAX_ROWS	2048
/* Timed latencies a process records (rows x iterations, 8 bytes each):
 * 512 MiB, own mode's 64 sizes x 1000000 iterations fit. */
#define RUN_MAX_LAT_SAMPLES	(1ull << 26)

/* Exit statuses (nproxy-run(1)). */
enum run_exit {
	RUN_EXIT_OK	  = 0,
	RUN_EXIT_VERIFY	  = 1,	/* a rank received wrong data */
	RUN_EXIT_USAGE	  = 2,	/* bad command line or environment */
	RUN_EXIT_TIMEOUT  = 3,	/* --timeout expired or an op timed out */
	RUN_EXIT_DEAD	  = 4,	/* a rank died (signal/exit) or a peer went away */
	RUN_EXIT_FAILURE  = 5,	/* setup or library error */
};

enum run_collective {
	RUN_ALLGATHER = 0,
	RUN_ALLREDUCE = 1,
	RUN_SENDRECV  = 2,
};

enum run_bind {
	RUN_BIND_CORE = 0,	/* the default for forked processes */
	RUN_BIND_NONE = 1,
};

/* Codes of the long options without a short one (run_opts.c, run_nccl.c). */
enum run_long_option {
	RUN_OPT_PROVIDER = 256, RUN_OPT_HANDSHAKE, RUN_OPT_RPP, RUN_OPT_OTPC, RUN_OPT_DELAY,
	RUN_OPT_BIND, RUN_OPT_TIMEOUT, RUN_OPT_DTYPE, RUN_OPT_OP, RUN_OPT_PROCS,
};

/*
 * The long options both modes take, with the same code and meaning: each
 * mode's table (run_opts.c, run_nccl.c) starts with these.
 */
#define RUN_SHARED_LONGOPTS \
	{ "provider", required_argument, NULL, RUN_OPT_PROVIDER }, \
	{ "handshake", required_argument, NULL, RUN_OPT_HANDSHAKE }, \
	{ "ranks-per-proxy", required_argument, NULL, RUN_OPT_RPP }, \
	{ "one-thread-per-core", no_argument, NULL, RUN_OPT_OTPC }, \
	{ "device-delay-us", required_argument, NULL, RUN_OPT_DELAY }, \
	{ "bind", required_argument, NULL, RUN_OPT_BIND }, \
	{ "json", no_argument, NULL, 'j' }, \
	{ "quiet", no_argument, NULL, 'q' }, \
	{ "version", no_argument, NULL, 'V' }

/* nccl-tests mode (run_nccl.c): the entry point's name chose it. */
struct run_nccl {
	bool on;
	const char *prog;		/* "all_reduce_perf" ..., as nccl-tests names itself */
	uint64_t minb, maxb, stepb, stepf;
	uint32_t iters, agg_iters;	/* -n, -m: timed ops = iters x agg_iters */
	uint32_t gpus, threads;		/* -g, -t: ranks per process = g x t */
	uint32_t check;			/* -c: 0 = no verification */
	int average;			/* -a: 0 rank 0, 1 avg, 2 min, 3 max */
	int blocking, parallel_init, root, cudagraph, cputime, stream_null;
	bool dtype_all, op_all;
};

struct run_opts {
	uint32_t procs;			/* self-fork: processes (0: launcher mode) */
	uint32_t ranks_per_proc;
	enum run_collective coll;
	uint64_t sizes[RUN_MAX_SIZES];
	uint32_t n_sizes;
	uint32_t iters;
	uint32_t warmup;
	const char *provider;		/* NULL: engine default */
	int handshake;			/* enum nproxy_hs_backend */
	uint32_t ranks_per_proxy;	/* 0: library default (environment / 1) */
	bool one_thread_per_core;
	uint32_t device_delay_us;
	double timeout_s;
	bool sizes_given;		/* -s, or one of -b/-e/-f */
	bool json;
	bool quiet;
	bool procs_given;
	bool op_given;
	enum run_bind bind;
	/* --dtype/--op (nccl-tests: -d/-o, "all" lists every one). */
	enum nproxy_dtype dtypes[NPROXY_DTYPE_COUNT];
	uint32_t n_dtypes;
	enum nproxy_redop redops[NPROXY_REDOP_COUNT];
	uint32_t n_redops;
	uint32_t variants;		/* 1; 2 in nccl-tests mode: out-of-place, in place */
	uint32_t cycles;		/* nccl-tests -N: the sweep run this many times */
	uint32_t n_rows;		/* cycles x dtypes x redops x sizes x variants */
	bool check;			/* verify every iteration (nccl-tests -c 0: no) */
	struct run_nccl nccl;
};

/* One result row: what it runs (run_rows.c). */
struct run_row {
	uint64_t bytes;			/* as asked (-b/-e/-s), before rounding */
	enum nproxy_dtype dtype;
	enum nproxy_redop redop;	/* only an allreduce reduces */
	bool in_place;
	bool skipped;			/* this variant cannot run (see run_nccl.c) */
	uint32_t size_idx, cycle;
};

/* This process's place in the job. */
struct run_place {
	bool launched;		/* started by a launcher (one process per rank) */
	const char *launcher;	/* "openmpi", "pmix", "slurm", "nproxy", "self" */
	uint32_t proc_rank;	/* process index in the job */
	uint32_t n_procs;
	uint32_t local_proc;	/* process index on this host */
	uint32_t local_procs;	/* processes on this host (0: unknown -> 1) */
	const char *root;	/* NPROXY_ROOT_COMM_ID or NULL */
	char job_id[64];	/* bananaphone job id (same on every local process) */
};

/* What one process measured (shared with the supervisor in self-fork mode). */
struct run_size_result {
	uint64_t bytes;		/* the collective's size as run (rounded to the ring) */
	uint64_t count;		/* elements of the op's count (allgather: per rank) */
	uint64_t wrong;		/* wrong elements of the first wrong iteration (local ranks) */
	uint32_t iters;		/* timed iterations completed */
	uint32_t verify_errors;	/* iterations with a mismatch (over local ranks) */
	/* Over the timed iterations' ops only (not fill, verify, barrier): */
	double cpu_s;		/* CPU time of this process, every thread */
	double wall_s;		/* wall time, summed over iterations */
};

/* Per-process shared record (lat_us follows: n_sizes * iters doubles). */
struct run_proc_record {
	volatile int state;		/* 0 running, 1 done ok, 2 failed */
	volatile int exit_code;
	volatile uint32_t progress;	/* iterations done (warmup + timed, all sizes) */
	uint32_t proxy_threads;		/* worker threads in this process */
	char provider[32];
	char handshake[16];
	char error[512];		/* first error, naming the rank */
	/* run_crash.c: what the process is doing, and the signal that killed it */
	volatile char phase[64];
	volatile int death_signal;	/* caught fatal signal, 0 if none */
	volatile uint64_t death_addr;	/* its fault address, 0 if unknown */
	struct run_size_result sizes[RUN_MAX_ROWS];	/* one per row */
	double lat_us[];		/* [row][iter]: max over local ranks */
};

/*
 * run_rows.c: the rows of a run, and how many every record has finished;
 * run_rows_init() counts them after parsing (a usage error if too many).
 */
size_t run_record_size(const struct run_opts *o);
int run_rows_init(struct run_opts *o);
void run_row_of(const struct run_opts *o, uint32_t i, struct run_row *r);
/* The op's element count and bytes for a row (nccl-tests' rounding in its
 * mode: count = bytes / type size, allgather per rank to 16 bytes). */
void run_row_count(const struct run_opts *o, const struct run_row *r, uint32_t world,
		   uint64_t *count, uint64_t *bytes);
uint32_t run_sizes_finished(const struct run_opts *o, struct run_proc_record **recs,
			    uint32_t n_recs);
bool run_dtype_parse(const char *name, enum nproxy_dtype *dt);
bool run_redop_parse(const char *name, enum nproxy_redop *op);
void run_names(bool ops, char *buf, size_t len);

/*
 * run_nccl.c: nccl-tests mode, when argv[0] names one of its tests: its
 * defaults, its options (run_nccl_option() handles those it knows, the
 * caller nproxy-run's own long ones), and the options made into the run.
 */
struct option;
extern const char run_nccl_optstring[];
extern const struct option *const run_nccl_longopts;
bool run_nccl_name(const char *argv0, struct run_opts *o);
void run_nccl_defaults(struct run_opts *o);
int run_nccl_option(int c, const char *arg, struct run_opts *o, bool *handled);
int run_nccl_finish(struct run_opts *o);
void run_nccl_usage(FILE *f, const char *prog);
/* run_nccl_table.c: its table, streamed like run_table_stream(). */
struct run_table;
struct run_place;
void run_nccl_stream(struct run_table *t, const struct run_opts *o, const struct run_place *place,
		     struct run_proc_record **recs, uint32_t n_recs);
void run_nccl_footer(struct run_table *t, const struct run_opts *o, int exit_code,
		     const char *error);

/* run_opts.c */
int run_parse_opts(int argc, char **argv, struct run_opts *o);
const char *run_coll_name(enum run_collective c);
void run_usage(FILE *f);

/*
 * run_usage_error.c: "nproxy-run: <msg>" and the --help hint on stderr,
 * and with --json on the line (run_usage_error_scan) the same error as a
 * JSON object on stdout.  Returns RUN_EXIT_USAGE.
 */
void run_usage_error_scan(int argc, char **argv);
/* The program the hint names (default nproxy-run; nccl-tests mode: its link). */
void run_usage_error_prog(const char *name);
int run_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* run_fabric.c: "'shm', 'tcp;ofi_rxm', ..." (RDM + tagged), empty if none. */
void run_list_providers(char *buf, size_t len);

/*
 * run_env.c: fills place from NPROXY_*, else the launcher's PMIx server,
 * else the launcher's environment; 0, or a run_exit code with a message.
 */
int run_detect_launcher(struct run_place *place);

/* run_pmix.c */
enum run_pmix_result {
	RUN_PMIX_OK,		/* place filled (root too when n_procs > 1) */
	RUN_PMIX_UNAVAILABLE,	/* libpmix cannot be loaded: why */
	RUN_PMIX_FAILED,	/* no server answers, or a query failed: why */
};
/* PMIX_NAMESPACE, PMIX_RANK and a server URI: a PMIx server started us. */
bool run_pmix_server_here(void);
/* Keeps place->root if set, else exchanges rank 0's through PMIx. */
int run_pmix_place(struct run_place *place, char *why, size_t why_len);
/* Rank 0 holds its published port until the rendezvous has bound it. */
void run_pmix_release_root(void);

/*
 * run_job.c: run every size on this process's ranks
 * (global ranks proc_rank*R .. proc_rank*R+R-1 of procs*R).
 * Fills rec; returns a run_exit code (rec->error says what, naming the rank).
 */
int run_job(const struct run_opts *o, const struct run_place *place,
	    struct run_proc_record *rec);

/*
 * run_crash.c: run_crash_install() points the fatal-signal handler at rec
 * (print: no supervisor, the handler writes "<who>: killed by signal ..."
 * itself); run_phase() records what the process is doing (not per op);
 * run_describe_death() writes "was killed by signal SIGBUS (Bus error) at
 * address 0x... during engine setup (nproxy_net_open)".
 */
void run_crash_install(struct run_proc_record *rec, bool print, const char *who);
/* rec is about to be freed: a later fatal signal only kills the process. */
void run_crash_forget(void);
void run_phase(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void run_describe_death(const struct run_proc_record *rec, int sig, char *buf, size_t len);
/* Test hook NPROXY_RUN_CRASH=RANK:ITER[:bus|segv]: the rank, or -1. */
int run_crash_hook(uint32_t *iter, int *sig);
void run_crash_now(int sig);	/* a real SIGBUS / SIGSEGV fault */

/* Kill points (run_kill.c): NPROXY_RUN_KILL_AT=RANK:PHASE. */
enum run_kill_phase {
	RUN_KILL_RENDEZVOUS,	/* before the bananaphone rendezvous */
	RUN_KILL_ENGINE,	/* before nproxy_net_open */
	RUN_KILL_REGION,	/* before the handshake region opens */
	RUN_KILL_COMM,		/* before the proxy comm */
	RUN_KILL_BARRIER,	/* entering the first barrier before an iteration */
	RUN_KILL_TRIGGER,	/* first op queued, its task waiting for the device trigger */
	RUN_KILL_TRANSFER,	/* first op's transfer in flight */
	RUN_KILL_TEARDOWN,	/* entering teardown */
	RUN_KILL_PHASES
};
void run_kill_point(enum run_kill_phase phase, uint32_t rank);

/* run_report.c */
struct run_progress {
	bool enabled;		/* not --quiet/--json, and this process reports */
	bool tty;		/* a bar on a terminal, else one line per finished size */
	bool drawn;
	double start;
	double last_draw;	/* the bar is redrawn at most 10 times a second */
	uint64_t total;
	uint64_t per_size;	/* warmup + iters */
	uint32_t sizes_reported;
	const struct run_opts *o;
};
void run_progress_init(struct run_progress *p, const struct run_opts *o, bool enabled, bool tty);
void run_progress_update(struct run_progress *p, uint64_t done, const char *what);
void run_progress_finish(struct run_progress *p);
/*
 * The results table, streamed as nccl-tests prints it: the header once the
 * first size is done (provider and handshake are known by then), one row
 * per size as soon as every process has finished it, a footer at the end.
 * run_table_stream() prints every newly finished size; run_report() calls
 * it a last time, so an interrupted run keeps every finished row.
 */
struct run_table {
	uint32_t rows_printed;
	uint32_t wrong;			/* iterations with a mismatch, all rows */
	uint32_t lines;			/* nccl-tests mode: lines (row pairs) printed */
	double busbw_sum;		/* GB/s over the printed rows */
	uint32_t busbw_rows;
};
void run_table_stream(struct run_table *t, const struct run_opts *o, const struct run_place *place,
		      struct run_proc_record **recs, uint32_t n_recs);
/* recs: n_procs records; prints the table or JSON to stdout. */
void run_report(const struct run_opts *o, const struct run_place *place,
		struct run_table *table, struct run_proc_record **recs, uint32_t n_recs,
		int exit_code, const char *error, double elapsed_s);
double run_busbw_factor(enum run_collective c, uint32_t world);


#endif
