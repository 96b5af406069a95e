// SPDX-License-Identifier: GPL-2.0
/*
 * The selftests' and benchmarks' shared helpers (nproxy_test.h).
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "nproxy_test.h"

/* ---- time ---- */

uint64_t nproxy_test_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t nproxy_test_now_ms(void)
{
	return nproxy_test_now_ns() / 1000000ull;
}

void nproxy_test_sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

uint64_t nproxy_test_thread_cpu_ns(pid_t tid)
{
	/* The per-thread scheduler clock of any thread of the process (CPUCLOCK_SCHED). */
	clockid_t clk = (clockid_t)((~(unsigned int)tid << 3) | 6);
	struct timespec ts;

	if (clock_gettime(clk, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- ranks as forked processes ---- */

pid_t nproxy_test_spawn(nproxy_test_rank_fn fn, uint32_t rank, uint32_t n_ranks, void *arg,
			const struct nproxy_test_child *how)
{
	pid_t parent = getpid();
	pid_t pid;
	int rc;

	fflush(NULL);	/* a child that exit()s would print the parent's buffer again */
	pid = fork();
	if (pid != 0)
		return pid;
	/* Never outlive the test. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(99);
	if (how && how->alarm_s)
		alarm(how->alarm_s);
	rc = fn(rank, n_ranks, arg);
	if (how && how->quick_exit)
		_exit(rc);
	exit(rc);
}

/* status[i] while child i is still being waited for. */
#define STATUS_WAITING	INT_MIN

int nproxy_test_reap(const pid_t *pids, int *status, uint32_t count, uint32_t timeout_ms)
{
	uint64_t deadline = nproxy_test_now_ms() + timeout_ms;
	uint32_t left = 0, i;
	int killed = 0;

	for (i = 0; i < count; i++) {
		status[i] = pids[i] > 0 ? STATUS_WAITING : NPROXY_TEST_KILLED;
		left += pids[i] > 0;
	}
	for (;;) {
		for (i = 0; i < count; i++) {
			pid_t got;
			int st;

			if (status[i] != STATUS_WAITING)
				continue;
			got = waitpid(pids[i], &st, WNOHANG);
			if (got == pids[i]) {
				status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
				left--;
			} else if (got < 0 && errno == ECHILD) {
				/* Reaped by someone else: its status is lost. */
				status[i] = NPROXY_TEST_KILLED;
				left--;
			}
		}
		if (!left || nproxy_test_now_ms() >= deadline)
			break;
		nproxy_test_sleep_ms(2);
	}
	for (i = 0; left && i < count; i++) {
		if (status[i] != STATUS_WAITING)
			continue;
		fprintf(stderr, "# straggler: child %u (pid %d) still running after %u ms: killed\n",
			i, (int)pids[i], timeout_ms);
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
		status[i] = NPROXY_TEST_KILLED;
		killed++;
	}
	return killed;
}

int nproxy_test_run_ranks(nproxy_test_rank_fn fn, uint32_t n_ranks, void *arg,
			  uint32_t timeout_ms, const struct nproxy_test_child *how, int *status)
{
	pid_t pids[NPROXY_TEST_MAX_RANKS] = { 0 };
	int own[NPROXY_TEST_MAX_RANKS];
	int ok = 0;
	uint32_t r;

	if (n_ranks > NPROXY_TEST_MAX_RANKS) {
		fprintf(stderr, "# nproxy_test_run_ranks: %u ranks, at most %d\n", n_ranks,
			NPROXY_TEST_MAX_RANKS);
		return 0;
	}
	if (!status)
		status = own;
	for (r = 0; r < n_ranks; r++) {
		pids[r] = nproxy_test_spawn(fn, r, n_ranks, arg, how);
		if (pids[r] < 0)
			fprintf(stderr, "# rank %u: fork: %s\n", r, strerror(errno));
	}
	nproxy_test_reap(pids, status, n_ranks, timeout_ms);
	for (r = 0; r < n_ranks; r++)
		ok += status[r] == 0;
	return ok;
}

/* ---- placement ---- */

int nproxy_test_pin_cpu(unsigned int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

bool nproxy_test_pin_rank(unsigned int rank, unsigned int n_ranks)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (cpus <= 0 || n_ranks > (unsigned long)cpus)
		return false;
	return nproxy_test_pin_cpu(rank) == 0;
}

/* ---- samples ---- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void nproxy_test_sort_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
}

uint64_t nproxy_test_pct_u64(const uint64_t *sorted, size_t n, unsigned int pct)
{
	size_t i;

	if (!n)
		return 0;
	i = n * pct / 100;
	return sorted[i < n ? i : n - 1];
}

double nproxy_test_median_double(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the process ---- */

int nproxy_test_free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	    !getsockname(fd, (struct sockaddr *)&sa, &len))
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Entries of a /proc directory, "." and ".." excluded. */
int nproxy_test_count_dir(const char *path, const char *prefix)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && (!prefix || !strncmp(e->d_name, prefix, strlen(prefix))))
			n++;
	closedir(d);
	return n;
}

int nproxy_test_count_fds(void)
{
	int n = nproxy_test_count_dir("/proc/self/fd", NULL);

	/* opendir's own fd is listed while we read: subtract it. */
	return n < 0 ? -1 : n - 1;
}

#if defined(__SANITIZE_THREAD__)
static void *no_op_thread(void *arg)
{
	*(pid_t *)arg = gettid();
	return NULL;
}

/*
 * ThreadSanitizer starts its own background thread at a process's first
 * pthread_create (and a forked child starts without it), so a count taken
 * before the library's first thread would grow by one that never leaves.
 * Create and join one thread per process before the first count, and wait
 * until it has left /proc/self/task too (pthread_join returns before the
 * kernel has reaped it).
 */
static void start_runtime_threads(void)
{
	static pid_t started_in;
	char path[64];
	pid_t tid = 0;
	pthread_t t;

	if (started_in == getpid())
		return;
	started_in = getpid();
	if (pthread_create(&t, NULL, no_op_thread, &tid))
		return;
	pthread_join(t, NULL);
	snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tid);
	for (int i = 0; i < 1000 && !access(path, F_OK); i++)
		nproxy_test_sleep_ms(1);
}
#else
/* Only ThreadSanitizer adds a thread of its own (see above). */
static void start_runtime_threads(void)
{
}
#endif

int nproxy_test_count_threads(void)
{
	start_runtime_threads();
	return nproxy_test_count_dir("/proc/self/task", NULL);
}

int nproxy_test_each_thread(void (*fn)(const char *tid, const char *comm, void *arg), void *arg)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;	/* the thread just exited */
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
		comm[strcspn(comm, "\n")] = '\0';
		fn(e->d_name, comm, arg);
		n++;
	}
	closedir(d);
	return n;
}

struct threads_named {
	const char *name;
	size_t len;
	bool prefix;
	int n;
};

static void count_named(const char *tid, const char *comm, void *arg)
{
	struct threads_named *c = arg;

	(void)tid;
	if (c->prefix ? !strncmp(comm, c->name, c->len) : !strcmp(comm, c->name))
		c->n++;
}

int nproxy_test_count_threads_named(const char *name, bool prefix)
{
	struct threads_named c = { .name = name, .len = strlen(name), .prefix = prefix };

	return nproxy_test_each_thread(count_named, &c) < 0 ? -1 : c.n;
}

int nproxy_test_count_shared_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char perms[8];

		if (sscanf(line, "%*x-%*x %7s", perms) == 1 && perms[3] == 's')
			n++;
	}
	fclose(f);
	return n;
}

int nproxy_test_settle(int (*count)(void), int want, unsigned int timeout_ms)
{
	uint64_t deadline = nproxy_test_now_ms() + timeout_ms;
	int n;

	while ((n = count()) != want && nproxy_test_now_ms() < deadline)
		nproxy_test_sleep_ms(1);
	return n;
}

/* ---- files ---- */

int nproxy_test_tmpdir(char *buf, size_t len, const char *tag)
{
	const char *base = getenv("TMPDIR");
	int n;

	if (!base || !*base)
		base = "/tmp";
	n = snprintf(buf, len, "%s/nproxy-%s.XXXXXX", base, tag);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return mkdtemp(buf) ? 0 : -errno;
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	return remove(path) ? -errno : 0;
}

int nproxy_test_rmtree(const char *dir)
{
	int rc;

	/* Depth first, never following a symlink out of the tree. */
	rc = nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc == -1 ? -errno : rc;
}

/* ---- a seam whose every task is idle ---- */

static enum nproxy_status idle_start(void *engine, uint32_t stream, uint32_t bb,
				     const struct nproxy_fifo_set *fifos,
				     const struct nproxy_device_sems *dev)
{
	return NPROXY_SUCCESS;
}

static enum nproxy_status idle_progress(void *engine, uint32_t stream, uint32_t bb, bool *idle,
					bool *block_done, bool *done)
{
	*idle = true;
	*block_done = *done = false;
	return NPROXY_SUCCESS;
}

static enum nproxy_status idle_stop(void *engine, uint32_t stream, uint32_t bb)
{
	return NPROXY_SUCCESS;
}

const struct nproxy_seam_ops nproxy_test_idle_seam_ops = {
	.name = "idle",
	.start = idle_start,
	.progress = idle_progress,
	.stop = idle_stop,
};

/* Never read by the idle seam; the trigger word is consumed (stored 0) once. */
static struct nproxy_fifo_set idle_fifo_set;
static uint32_t idle_trigger_word;

int nproxy_test_idle_task_open(enum nproxy_idle_policy policy, struct nproxy_comm **out)
{
	struct nproxy_comm_opts o = NPROXY_COMM_OPTS_INIT;
	struct nproxy_cc_op op = NPROXY_CC_OP_INIT;

	o.n_ranks = 1;
	o.ranks_per_proxy = 1;
	o.idle_policy = policy;
	o.seam.ops = &nproxy_test_idle_seam_ops;
	if (nproxy_comm_open(&o, out))
		return -1;
	op.streams_n = 1;
	op.streams[0].blocks = &idle_fifo_set;
	op.streams[0].n_blocks = 1;
	op.trigger_words[0] = (volatile uint32_t *)&idle_trigger_word;
	return nproxy_enq_proxy_tasks(*out, &op, 0, NULL) ? -1 : 0;
}

int nproxy_test_idle_tasks_settle(unsigned int n, unsigned int timeout_ms,
				  struct nproxy_proxy_stats *st)
{
	uint64_t deadline = nproxy_test_now_ms() + timeout_ms;

	do {
		if (nproxy_proxy_group_stats(0, st) == NPROXY_SUCCESS && st->tasks_active == n)
			return 0;
		nproxy_test_sleep_ms(10);
	} while (nproxy_test_now_ms() < deadline);
	return -1;
}

enum nproxy_status nproxy_test_bp_open(const char *job, uint32_t rank, uint32_t n_ranks,
				       uint32_t timeout_ms, struct nproxy_bp **bp)
{
	struct nproxy_bp_opts o = NPROXY_BP_OPTS_INIT;

	o.job_id = job;
	o.rank = rank;
	o.n_ranks = n_ranks;
	o.timeout_ms = timeout_ms;
	return nproxy_bp_open(&o, bp);
}
