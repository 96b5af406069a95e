/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the Bananaphone selftests: run N ranks as forked
 * processes with a hard deadline (stragglers are SIGKILLed and reported),
 * unique job ids, fd counting.
 */
#ifndef BP_TEST_H
#define BP_TEST_H

#include <dirent.h>
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

#define BP_T_TIMEOUT_MS 5000	/* per collective in the tests */

typedef int (*bp_rank_fn)(uint32_t rank, uint32_t n, void *arg);

struct bp_run {
	pid_t pids[NPROXY_BP_MAX_RANKS * 2];
	int status[NPROXY_BP_MAX_RANKS * 2];
	int stragglers;
};

static inline uint64_t bp_t_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void bp_t_sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* A job id no other test (or concurrent test run) uses. */
static inline void bp_t_job(char *buf, size_t len, const char *name)
{
	static unsigned int counter;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, len, "t-%s-%d-%u-%ld", name, (int)getpid(), counter++, ts.tv_nsec);
}

static inline pid_t bp_t_spawn(bp_rank_fn fn, uint32_t rank, uint32_t n, void *arg)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(NULL);	/* children exit() (so LeakSanitizer runs): no double output */
	pid = fork();
	if (pid == 0) {
		/* Never outlive the test. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
		exit(fn(rank, n, arg));
	}
	return pid;
}

/*
 * Wait for `count` children until deadline_ms from now; kill and count the
 * ones still running.  status[i] is the exit code, or 128 + signal.
 */
static inline void bp_t_reap(struct bp_run *run, int count, unsigned int deadline_ms)
{
	uint64_t end = bp_t_now_ms() + deadline_ms;
	int left = count, i;

	for (i = 0; i < count; i++)
		run->status[i] = -1;
	while (left > 0) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);

		if (pid > 0) {
			for (i = 0; i < count; i++) {
				if (run->pids[i] != pid)
					continue;
				run->status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
				left--;
			}
			continue;
		}
		if (pid < 0 && errno == ECHILD)
			break;
		if (bp_t_now_ms() >= end) {
			for (i = 0; i < count; i++) {
				if (run->status[i] != -1)
					continue;
				fprintf(stderr, "# straggler: child %d (pid %d) killed at the deadline\n",
					i, (int)run->pids[i]);
				kill(run->pids[i], SIGKILL);
				waitpid(run->pids[i], NULL, 0);
				run->status[i] = 255;
				run->stragglers++;
			}
			break;
		}
		bp_t_sleep_ms(2);
	}
}

/* Run ranks 0..n-1 of fn; returns the number of ranks that did not exit 0. */
static inline int bp_t_run(bp_rank_fn fn, uint32_t n, void *arg, unsigned int deadline_ms)
{
	struct bp_run run = { 0 };
	int bad = 0;
	uint32_t r;

	for (r = 0; r < n; r++)
		run.pids[r] = bp_t_spawn(fn, r, n, arg);
	bp_t_reap(&run, (int)n, deadline_ms);
	for (r = 0; r < n; r++) {
		if (run.status[r]) {
			fprintf(stderr, "# rank %u exited with %d\n", r, run.status[r]);
			bad++;
		}
	}
	return bad;
}

/* nproxy_bp_open() from its fields: rank 0 creates, the others connect. */
static inline enum nproxy_status bp_t_open(const char *job, uint32_t rank, uint32_t n,
					   uint32_t timeout_ms, struct nproxy_bp **bp)
{
	struct nproxy_bp_opts o = NPROXY_BP_OPTS_INIT;

	o.job_id = job;
	o.rank = rank;
	o.n_ranks = n;
	o.timeout_ms = timeout_ms;
	return nproxy_bp_open(&o, bp);
}

/* Open with the tests' timeout, saying why when it fails. */
static inline enum nproxy_status bp_t_join(const char *job, uint32_t rank, uint32_t n,
					   struct nproxy_bp **bp)
{
	enum nproxy_status st = bp_t_open(job, rank, n, BP_T_TIMEOUT_MS, bp);

	if (st)
		fprintf(stderr, "# rank %u: join: %s: %s\n", rank, nproxy_status_str(st),
			nproxy_bp_strerror(NULL));
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
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;	/* the DIR's own fd */
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
