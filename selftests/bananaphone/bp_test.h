/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the Bananaphone selftests: run N ranks as forked
 * processes with a hard deadline (stragglers are SIGKILLed and reported;
 * testlib/nproxy_test.h does the forking), unique job ids,
 * join/leave, deterministic payloads.
 */
#ifndef BP_TEST_H
#define BP_TEST_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/bananaphone.h>
#include "nproxy_test.h"

#define BP_T_TIMEOUT_MS 5000	/* per collective in the tests */

typedef int (*bp_rank_fn)(uint32_t rank, uint32_t n, void *arg);

struct bp_run {
	pid_t pids[NPROXY_BP_MAX_RANKS * 2];
	int status[NPROXY_BP_MAX_RANKS * 2];
	int stragglers;
};

/* The shared helpers (testlib/nproxy_test.h) by this area's names. */
static inline uint64_t bp_t_now_ms(void)
{
	return nproxy_test_now_ms();
}

static inline void bp_t_sleep_ms(unsigned int ms)
{
	nproxy_test_sleep_ms(ms);
}

/* A job id no other test (or concurrent test run) uses. */
static inline void bp_t_job(char *buf, size_t len, const char *name)
{
	static unsigned int counter;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, len, "t-%s-%d-%u-%ld", name, (int)getpid(), counter++, ts.tv_nsec);
}

/* Ranks exit() (not _exit()) so that LeakSanitizer checks each of them. */
static inline pid_t bp_t_spawn(bp_rank_fn fn, uint32_t rank, uint32_t n, void *arg)
{
	return nproxy_test_spawn(fn, rank, n, arg, NULL);
}

/*
 * Wait for `count` children until deadline_ms from now; kill and count the
 * ones still running.  status[i] is the exit code, or 128 + signal, or 255
 * for a child killed at the deadline.
 */
static inline void bp_t_reap(struct bp_run *run, int count, unsigned int deadline_ms)
{
	int i;

	run->stragglers += nproxy_test_reap(run->pids, run->status, (uint32_t)count, deadline_ms);
	for (i = 0; i < count; i++)
		if (run->status[i] == NPROXY_TEST_KILLED)
			run->status[i] = 255;
}

/* Run ranks 0..n-1 of fn; returns the number of ranks that did not exit 0. */
static inline int bp_t_run(bp_rank_fn fn, uint32_t n, void *arg, unsigned int deadline_ms)
{
	int status[NPROXY_BP_MAX_RANKS * 2];
	int ok = nproxy_test_run_ranks(fn, n, arg, deadline_ms, NULL, status);
	uint32_t r;

	for (r = 0; r < n; r++)
		if (status[r])
			fprintf(stderr, "# rank %u exited with %d\n", r, status[r]);
	return (int)n - ok;
}

/* Name a new job in arg->job (from name) and bp_t_run() ranks 0..n-1 of fn on arg. */
#define BP_T_RUN_JOB(arg, name, fn, n, deadline_ms) ({			\
	bp_t_job((arg)->job, sizeof((arg)->job), name);			\
	bp_t_run(fn, n, arg, deadline_ms); })

/* Open with the tests' timeout, saying why when it fails. */
static inline enum nproxy_status bp_t_join(const char *job, uint32_t rank, uint32_t n,
					   struct nproxy_bp **bp)
{
	enum nproxy_status st = nproxy_test_bp_open(job, rank, n, BP_T_TIMEOUT_MS, bp);

	if (st)
		fprintf(stderr, "# rank %u: join: %s: %s\n", rank, nproxy_status_str(st),
			nproxy_bp_strerror(NULL));
	return st;
}

/* bp_t_join(); with spin, its waits first spin for 50 us (NPROXY_BP_SPIN_US). */
static inline enum nproxy_status bp_t_join_spin(const char *job, uint32_t rank, uint32_t n,
						bool spin, struct nproxy_bp **bp)
{
	if (spin)
		setenv("NPROXY_BP_SPIN_US", "50", 1);
	return bp_t_join(job, rank, n, bp);
}

/* bp_t_join(), then a first barrier: every rank is in. */
static inline enum nproxy_status bp_t_join_all(const char *job, uint32_t rank, uint32_t n,
					       struct nproxy_bp **bp)
{
	enum nproxy_status st = bp_t_join(job, rank, n, bp);

	if (st)
		return st;
	st = nproxy_bp_barrier(*bp, BP_T_TIMEOUT_MS);
	if (st)
		fprintf(stderr, "# rank %u: first barrier: %s: %s\n", rank, nproxy_status_str(st),
			nproxy_bp_strerror(*bp));
	return st;
}

/* The normal way out: orderly hangup, then release. */
static inline void bp_t_leave(struct nproxy_bp *bp)
{
	nproxy_bp_hangup(bp);
	nproxy_bp_close(bp);
}

static inline int bp_t_count_fds(void)
{
	return nproxy_test_count_fds();
}

/* Deterministic pseudo-random bytes for (seed, rank, round). */
static inline void bp_t_fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
}

static inline size_t bp_t_blob_len(uint64_t seed, size_t max)
{
	uint64_t x = seed * 0x2545f4914f6cdd1dull + 7;

	x ^= x >> 29;
	return (size_t)(x % (max + 1));
}

/* Shared page for children to report to the test (mmap before fork). */
static inline void *bp_t_shared(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

#define BP_T_CHECK(cond, ...)							\
	do {									\
		if (!(cond)) {							\
			fprintf(stderr, "# rank %u: %s:%d: ", rank, __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);				\
			fprintf(stderr, "\n");					\
			return 1;						\
		}								\
	} while (0)

#endif
