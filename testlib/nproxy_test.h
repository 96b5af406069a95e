/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers that the selftests and the benchmarks share (the test-support
 * library, testlib/testlib.mk; never part of libnproxy): a monotonic
 * clock, ranks as forked processes reaped with a deadline, CPU pinning,
 * quantiles of samples, a free TCP port, fd / thread / mapping counts of
 * this process, private temporary directories, and a seam whose tasks are
 * always idle.
 *
 * Nothing here asserts: tests do.  Helpers that belong to one area stay in
 * that area's header (bananaphone/bp_test.h, handshake/handshake_test.h,
 * net/ring_common.h, proxy/proxy_test_util.h).
 */
#ifndef NPROXY_TEST_H
#define NPROXY_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <nproxy/bananaphone.h>
#include <nproxy/proxy.h>
#include <nproxy/seam.h>

/* ---- time ---- */
uint64_t nproxy_test_now_ns(void);
uint64_t nproxy_test_now_ms(void);
/* Sleeps the whole ms, signals or not. */
void nproxy_test_sleep_ms(unsigned int ms);
/* CPU time thread tid of this process has used (ns); 0 when it is gone. */
uint64_t nproxy_test_thread_cpu_ns(pid_t tid);

/* ---- ranks as forked processes ---- */
typedef int (*nproxy_test_rank_fn)(uint32_t rank, uint32_t n_ranks, void *arg);

struct nproxy_test_child {
	/*
	 * Leave with _exit(): no atexit handler runs in the child (a
	 * provider's destructor must not tear down state the parent shares).
	 * false: exit(), so the sanitizers' leak check runs in every rank.
	 */
	bool quick_exit;
	/* The child's own backstop: SIGALRM after this many seconds (0: none). */
	unsigned int alarm_s;
};

/*
 * Fork one rank running fn(rank, n_ranks, arg); its exit status is fn's
 * return.  The child dies with the test (PR_SET_PDEATHSIG).  how may be
 * NULL (exit(), no alarm).  Returns the pid, or -1 when fork failed.
 */
pid_t nproxy_test_spawn(nproxy_test_rank_fn fn, uint32_t rank, uint32_t n_ranks, void *arg,
			const struct nproxy_test_child *how);

/* status[i] of a child killed at the deadline, or never started. */
#define NPROXY_TEST_KILLED	(-1)

/*
 * Wait for the `count` children in pids until timeout_ms from now;
 * SIGKILL (and reap) those still running, each named on stderr.
 * status[i]: exit code, 128 + signal, or NPROXY_TEST_KILLED.  Only these
 * pids are waited for.  Returns how many had to be killed.
 */
int nproxy_test_reap(const pid_t *pids, int *status, uint32_t count, uint32_t timeout_ms);

/*
 * Ranks 0..n_ranks-1 of fn, reaped as above; status (may be NULL) gets
 * each rank's.  Returns how many ranks exited 0.
 */
#define NPROXY_TEST_MAX_RANKS	256
int nproxy_test_run_ranks(nproxy_test_rank_fn fn, uint32_t n_ranks, void *arg,
			  uint32_t timeout_ms, const struct nproxy_test_child *how, int *status);

/* ---- placement ---- */
/* Pin the calling thread to one CPU: 0, or -errno. */
int nproxy_test_pin_cpu(unsigned int cpu);
/*
 * Rank r of n on CPU r when the ranks fit on the online CPUs (then every
 * implementation compared runs under the same placement); otherwise
 * nothing.  Returns true when it pinned.
 */
bool nproxy_test_pin_rank(unsigned int rank, unsigned int n_ranks);

/* ---- samples ---- */
void nproxy_test_sort_u64(uint64_t *v, size_t n);
/* Nearest-rank quantile of sorted v: v[n * pct / 100] (the last for 100). */
uint64_t nproxy_test_pct_u64(const uint64_t *sorted, size_t n, unsigned int pct);
/* Sorts v; the middle value, or the mean of the two middle ones. */
double nproxy_test_median_double(double *v, size_t n);

/* ---- the process ---- */
/* A TCP port on 127.0.0.1 that was free a moment ago, or -1. */
int nproxy_test_free_port(void);
/* Entries of a directory (those whose name starts with prefix, if not NULL), or -1. */
int nproxy_test_count_dir(const char *path, const char *prefix);
/* Open fds of this process (the counting's own excluded), or -1. */
int nproxy_test_count_fds(void);
int nproxy_test_count_threads(void);
/*
 * fn(tid, comm, arg) for every thread of this process (tid as in
 * /proc/self/task, comm without its newline); the threads seen, or -1.
 */
int nproxy_test_each_thread(void (*fn)(const char *tid, const char *comm, void *arg), void *arg);
/* Threads whose name (comm) is name, or starts with it when prefix. */
int nproxy_test_count_threads_named(const char *name, bool prefix);
/* Shared mappings only: the sanitizers' allocators map private memory freely. */
int nproxy_test_count_shared_maps(void);
/*
 * Poll count() until it returns want or timeout_ms passes; returns the
 * last count (/proc lags a joined thread or a closed fd by a hair).
 */
int nproxy_test_settle(int (*count)(void), int want, unsigned int timeout_ms);

/* ---- files ---- */
/*
 * A new private directory $TMPDIR/nproxy-<tag>.XXXXXX (or under /tmp)
 * into buf: 0, or -errno.  Each test gets its own, never a fixed name.
 */
int nproxy_test_tmpdir(char *buf, size_t len, const char *tag);
/* Remove dir and everything under it: 0, or -errno. */
int nproxy_test_rmtree(const char *dir);

/* ---- a seam whose every task is idle ---- */
/*
 * start/stop succeed, progress reports idle and nothing moved, forever:
 * a task that stays on its worker without doing anything.
 */
extern const struct nproxy_seam_ops nproxy_test_idle_seam_ops;
/*
 * A comm on device 0 (every such comm shares one worker) over the idle
 * seam, with one network task already triggered that stays idle for ever
 * (its barrier task finishes).  0, or -1 when the open or enqueue failed.
 */
int nproxy_test_idle_task_open(enum nproxy_idle_policy policy, struct nproxy_comm **out);
/* Poll group 0 until exactly n tasks are active (within timeout_ms); 0 or -1. */
int nproxy_test_idle_tasks_settle(unsigned int n, unsigned int timeout_ms,
				  struct nproxy_proxy_stats *st);

/* ---- Bananaphone ---- */
/* nproxy_bp_open() from its fields: rank 0 creates the bus, the others connect. */
enum nproxy_status nproxy_test_bp_open(const char *job, uint32_t rank, uint32_t n_ranks,
				       uint32_t timeout_ms, struct nproxy_bp **bp);

#endif
