// SPDX-License-Identifier: GPL-2.0
/*
 * The TCP rendezvous when something goes wrong, each case forced in a
 * fixed order (the parent starts ranks one after another and waits for the
 * step that must come first), so no result depends on timing:
 *
 *  - a rank that never comes: the root times out and every connected rank
 *    reports *that* ("rank(s) 2 of 3 never connected"), within the
 *    deadline; before, the root closed their sockets with their blobs
 *    unread, the kernel reset them, and they said "the root went away:
 *    Connection reset by peer";
 *  - a rank that dies after its hello, and one that fails locally
 *    (nproxy_rdzv_abort) between two all-gathers: the root relays the
 *    cause to everyone;
 *  - a hello from another job's rank, and a second connection claiming a
 *    rank already connected: refused with a message, the job goes on;
 *  - the root's port held by another process: a prompt error, not a
 *    silent wait while the ranks talk to that process;
 *  - nproxy_net_open() on one rank failing locally: the others' opens
 *    fail within a second with its reason, not at the rendezvous deadline;
 *  - and after a failure, closing the rendezvous closes only its own
 *    sockets: the root that relayed an abort to a rank that was not
 *    listening (its sockets closed when the linger ran out), and the rank
 *    that raised it, still hold their descriptor 0 (a socket number left
 *    stale after the abort's close, then closed again, would take it).
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include "kselftest_harness.h"
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120
#include <nproxy/log.h>
#include "ring_common.h"


/* What a rank saw, in memory shared with the test. */
struct rank_seen {
	int st;			/* nproxy_status of the step that failed, 0 if none */
	int64_t ms;		/* from the rank's start to its return */
	char err[256];
};

struct rdzv_job {
	char root[64];
	uint32_t n;
	int tmo_ms;		/* the rendezvous deadline */
	volatile int opened[8];	/* [rank]: its nproxy_rdzv_open() returned */
	struct rank_seen *seen;	/* [rank] (shared mapping) */
};

/* Descriptor 0 on /dev/null, its identity in *st; -1 on failure. */
static int hold_fd0(struct stat *st)
{
	int fd = open("/dev/null", O_RDONLY);

	if (fd < 0 || (fd != 0 && dup2(fd, 0) < 0))
		return -1;
	if (fd != 0)
		close(fd);
	return fstat(0, st);
}

/* Is descriptor 0 still the file hold_fd0() put there? */
static bool fd0_kept(const struct stat *st, uint32_t rank)
{
	struct stat now;

	if (!fstat(0, &now) && now.st_dev == st->st_dev && now.st_ino == st->st_ino)
		return true;
	fprintf(stderr, "rank %u: descriptor 0 was closed by the rendezvous\n", rank);
	return false;
}

static struct rdzv_job *new_job(uint32_t n, int tmo_ms)
{
	struct rdzv_job *job = mmap(NULL, 4096 * 4, PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (job == MAP_FAILED)
		return NULL;
	memset(job, 0, 4096 * 4);
	job->n = n;
	job->tmo_ms = tmo_ms;
	job->seen = (struct rank_seen *)((char *)job + 4096);
	snprintf(job->root, sizeof(job->root), "127.0.0.1:%d", ring_free_port());
	return job;
}

static void record(struct rank_seen *s, enum nproxy_status st, const char *err, int64_t t0)
{
	s->st = st;
	s->ms = ring_now_ms() - t0;
	snprintf(s->err, sizeof(s->err), "%s", err ? err : "");
}

/* Fork one rank; returns its pid. */
static pid_t start(int (*fn)(uint32_t, struct rdzv_job *), uint32_t rank, struct rdzv_job *job)
{
	pid_t pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		_exit(fn(rank, job));
	}
	return pid;
}

/* Wait for a rank (bounded); its exit code, 128+sig, or -1 if it hung. */
static int finish(pid_t pid, int timeout_ms)
{
	int64_t until = ring_now_ms() + timeout_ms;
	int status;

	while (ring_now_ms() < until) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		usleep(5000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/* One all-gather; the rank's view of it goes to job->seen[rank]. */
static int gather_once(uint32_t rank, struct rdzv_job *job, struct nproxy_rdzv *rz, int64_t t0)
{
	size_t lens[8], offs[8];
	enum nproxy_status st;
	void *all = NULL;
	char blob[16];

	snprintf(blob, sizeof(blob), "rank-%u", rank);
	st = nproxy_rdzv_allgather(rz, blob, strlen(blob), &all, lens, offs);
	free(all);
	if (st != NPROXY_SUCCESS)
		record(&job->seen[rank], st, nproxy_rdzv_strerror(rz), t0);
	return st;
}

/* Open, then all-gather `rounds` times. */
static int plain_rank(uint32_t rank, struct rdzv_job *job, int rounds)
{
	int64_t t0 = ring_now_ms();
	struct nproxy_rdzv *rz;
	enum nproxy_status st;

	st = ring_rdzv_open(job->root, rank, job->n, job->tmo_ms, &rz);
	if (st != NPROXY_SUCCESS) {
		record(&job->seen[rank], st, "open failed", t0);
		return 0;
	}
	job->opened[rank] = 1;
	for (int i = 0; i < rounds && st == NPROXY_SUCCESS; i++)
		st = gather_once(rank, job, rz, t0);
	job->seen[rank].ms = ring_now_ms() - t0;
	nproxy_rdzv_close(rz);
	return 0;
}

static int one_round(uint32_t rank, struct rdzv_job *job)
{
	return plain_rank(rank, job, 1);
}

static int two_rounds(uint32_t rank, struct rdzv_job *job)
{
	return plain_rank(rank, job, 2);
}

/* The root's open fails on its own; its message is what the root knows. */
static int root_rank(uint32_t rank, struct rdzv_job *job)
{
	int64_t t0 = ring_now_ms();
	struct nproxy_rdzv *rz;
	enum nproxy_status st;
	char msg[256] = "";
	struct stat fd0;

	(void)rank;
	if (hold_fd0(&fd0))
		return 1;
	st = ring_rdzv_open(job->root, 0, job->n, job->tmo_ms, &rz);
	if (st == NPROXY_SUCCESS) {
		st = gather_once(0, job, rz, t0);
		if (st == NPROXY_SUCCESS)
			st = gather_once(0, job, rz, t0);
		nproxy_rdzv_close(rz);
		return !fd0_kept(&fd0, 0);
	}
	snprintf(msg, sizeof(msg), "root open: %s", nproxy_status_str(st));
	record(&job->seen[0], st, msg, t0);
	return !fd0_kept(&fd0, 0);
}

typedef int (*rank_fn)(uint32_t rank, struct rdzv_job *job);

/* Ranks 0..n-1 running fn[rank], reaped last to first; expect exit codes want[] (see finish()). */
static void run_ranks(struct __test_metadata *_metadata, struct rdzv_job *job, const rank_fn *fn,
		      const int *want, uint32_t n)
{
	pid_t pids[8];

	for (uint32_t r = 0; r < n; r++)
		pids[r] = start(fn[r], r, job);
	for (uint32_t r = n; r-- > 0;) {
		EXPECT_EQ(want[r], finish(pids[r], 3 * job->tmo_ms + 5000)) TH_LOG("rank %u", r);
	}
}

/* Expect rank r to have failed with st, its message naming what. */
static void expect_seen(struct __test_metadata *_metadata, const struct rdzv_job *job, uint32_t r,
			enum nproxy_status st, const char *what)
{
	EXPECT_EQ((int)st, job->seen[r].st);
	EXPECT_NE(NULL, strstr(job->seen[r].err, what))
		TH_LOG("rank %u said: %s", r, job->seen[r].err);
}

TEST(missing_rank_is_named_by_every_rank)
{
	static const rank_fn fn[] = { root_rank, one_round };	/* rank 2 never comes */
	static const int want[] = { 0, 0 };
	struct rdzv_job *job = new_job(3, 1500);

	ASSERT_NE(NULL, job);
	run_ranks(_metadata, job, fn, want, 2);
	EXPECT_EQ(NPROXY_TIMEOUT, job->seen[0].st);
	expect_seen(_metadata, job, 1, NPROXY_TIMEOUT, "rank(s) 2 of 3 never connected");
	EXPECT_EQ(NULL, strstr(job->seen[1].err, "reset"));
	/* Rank 1 learns it from the root at the root's deadline, not its own. */
	EXPECT_LT(job->seen[1].ms, job->tmo_ms + 1500);
	munmap(job, 4096 * 4);
}

static int dies_after_hello(uint32_t rank, struct rdzv_job *job)
{
	struct nproxy_rdzv *rz;

	if (ring_rdzv_open(job->root, rank, job->n, job->tmo_ms, &rz))
		return 1;
	raise(SIGKILL);	/* an OOM kill between hello and blob */
	return 1;
}

TEST(rank_killed_after_hello_is_named_by_every_rank)
{
	static const rank_fn fn[] = { root_rank, one_round, dies_after_hello };
	static const int want[] = { 0, 0, 128 + SIGKILL };
	struct rdzv_job *job = new_job(3, 1500);

	ASSERT_NE(NULL, job);
	run_ranks(_metadata, job, fn, want, 3);
	expect_seen(_metadata, job, 0, NPROXY_PEER_DEAD, "rank 2 went away");
	expect_seen(_metadata, job, 1, NPROXY_PEER_DEAD, "rank 2 went away");
	munmap(job, 4096 * 4);
}

/* Rank 2 gets through one all-gather, then its own setup fails. */
static int fails_locally(uint32_t rank, struct rdzv_job *job)
{
	int64_t t0 = ring_now_ms();
	struct nproxy_rdzv *rz;
	struct stat fd0;

	if (hold_fd0(&fd0) || ring_rdzv_open(job->root, rank, job->n, job->tmo_ms, &rz))
		return 1;
	if (gather_once(rank, job, rz, t0))
		return 1;
	nproxy_rdzv_abort(rz, NPROXY_NET_ERROR, "fi_enable on provider shm: Device or resource busy");
	/* Idempotent; later all-gathers return the first error. */
	nproxy_rdzv_abort(rz, NPROXY_TIMEOUT, "ignored");
	if (gather_once(rank, job, rz, t0) != NPROXY_NET_ERROR)
		return 1;
	nproxy_rdzv_close(rz);
	return !fd0_kept(&fd0, rank);
}

/* All-gather, then away from the rendezvous past the root's linger, then again. */
static int away_rank(uint32_t rank, struct rdzv_job *job)
{
	int64_t t0 = ring_now_ms();
	struct nproxy_rdzv *rz;

	if (ring_rdzv_open(job->root, rank, job->n, job->tmo_ms, &rz))
		return 1;
	if (gather_once(rank, job, rz, t0))
		return 1;
	usleep(1500 * 1000);
	gather_once(rank, job, rz, t0);
	nproxy_rdzv_close(rz);
	return 0;
}

TEST(closing_after_a_relayed_abort_closes_only_the_rendezvous_sockets)
{
	static const rank_fn fn[] = { root_rank, away_rank, fails_locally };
	static const int want[] = { 0, 0, 0 };
	struct rdzv_job *job = new_job(3, 20000);

	ASSERT_NE(NULL, job);
	run_ranks(_metadata, job, fn, want, 3);	/* ranks 0 and 2 check their descriptor 0 */
	expect_seen(_metadata, job, 1, NPROXY_NET_ERROR,
		    "fi_enable on provider shm: Device or resource busy");
	munmap(job, 4096 * 4);
}

TEST(local_failure_is_relayed_to_every_rank)
{
	static const rank_fn fn[] = { root_rank, two_rounds, fails_locally };
	static const int want[] = { 0, 0, 0 };
	struct rdzv_job *job = new_job(3, 20000);

	ASSERT_NE(NULL, job);
	run_ranks(_metadata, job, fn, want, 3);
	for (uint32_t r = 0; r < 2; r++) {
		EXPECT_NE(NULL, strstr(job->seen[r].err, "rank 2"));
		expect_seen(_metadata, job, r, NPROXY_NET_ERROR,
			    "fi_enable on provider shm: Device or resource busy");
		/* Told at once, not at the deadline. */
		EXPECT_LT(job->seen[r].ms, 10000);
	}
	munmap(job, 4096 * 4);
}

/* A rank that should not be there, of an n-rank job; seen[7]: its view. */
static int impostor(uint32_t rank, struct rdzv_job *job, uint32_t n)
{
	int64_t t0 = ring_now_ms();
	struct nproxy_rdzv *rz;

	if (ring_rdzv_open(job->root, rank, n, job->tmo_ms, &rz))
		return 1;
	gather_once(7, job, rz, t0);
	nproxy_rdzv_close(rz);
	return 0;
}

/* A rank of another (4-rank) job that uses the same root address. */
static int stray_rank(uint32_t rank, struct rdzv_job *job)
{
	return impostor(rank, job, 4);
}

/*
 * Ranks 0 .. n-2 of job (pids[]) are running: the impostor fn claiming
 * `rank` is refused saying why; then rank n-1 comes and every rank gets
 * through its two all-gathers.
 */
static void impostor_refused(struct __test_metadata *_metadata, struct rdzv_job *job,
			     pid_t *pids, rank_fn fn, uint32_t rank, const char *why)
{
	uint32_t n = job->n;

	EXPECT_EQ(0, finish(start(fn, rank, job), 3 * job->tmo_ms + 5000));
	expect_seen(_metadata, job, 7, NPROXY_INVALID, why);
	pids[n - 1] = start(two_rounds, n - 1, job);
	for (uint32_t r = n; r-- > 0;) {
		EXPECT_EQ(0, finish(pids[r], 3 * job->tmo_ms + 5000)) TH_LOG("rank %u", r);
	}
	for (uint32_t r = 0; r < n; r++) {
		EXPECT_EQ(0, job->seen[r].st) TH_LOG("rank %u said: %s", r, job->seen[r].err);
	}
}

TEST(stray_hello_is_refused_and_the_job_goes_on)
{
	struct rdzv_job *job = new_job(2, 10000);
	pid_t pids[2];

	ASSERT_NE(NULL, job);
	pids[0] = start(two_rounds, 0, job);
	impostor_refused(_metadata, job, pids, stray_rank, 3, "gathers 2 ranks");
	munmap(job, 4096 * 4);
}

/* The second of two processes claiming rank 1 (the first is alive). */
static int duplicate_rank(uint32_t rank, struct rdzv_job *job)
{
	return impostor(rank, job, job->n);
}

TEST(second_claim_of_a_rank_is_refused)
{
	struct rdzv_job *job = new_job(3, 10000);
	pid_t pids[3];

	ASSERT_NE(NULL, job);
	pids[0] = start(two_rounds, 0, job);
	pids[1] = start(two_rounds, 1, job);
	/* Rank 1's hello is queued before the impostor's connects. */
	for (int i = 0; i < 2000 && !job->opened[1]; i++)
		usleep(5000);
	ASSERT_TRUE(job->opened[1]);
	impostor_refused(_metadata, job, pids, duplicate_rank, 1, "already connected");
	munmap(job, 4096 * 4);
}

TEST(root_port_held_by_another_process)
{
	struct rdzv_job *job = new_job(2, 1500);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct nproxy_rdzv *rz;
	int64_t t0;

	ASSERT_NE(NULL, job);
	ASSERT_GE(lfd, 0);
	sa.sin_port = htons((uint16_t)atoi(strrchr(job->root, ':') + 1));
	ASSERT_EQ(0, bind(lfd, (struct sockaddr *)&sa, sizeof(sa)));
	ASSERT_EQ(0, listen(lfd, 4));
	t0 = ring_now_ms();
	/* A deadline far away: the error must not wait for it. */
	EXPECT_EQ((int)NPROXY_RESOURCE, (int)ring_rdzv_open(job->root, 0, 2, 30000, &rz));
	EXPECT_LT(ring_now_ms() - t0, 5000);
	close(lfd);
	munmap(job, 4096 * 4);
}

/* nproxy_net_open on every rank; rank 2 asks for a provider that does not exist. */
static int net_open_rank(uint32_t rank, struct rdzv_job *job)
{
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = job->n,
				     .comm_id = 5, .root = job->root, .rdzv_timeout_ms = 20000,
				     .provider = rank == 2 ? "no-such-provider" : "tcp;ofi_rxm" };
	int64_t t0 = ring_now_ms();
	struct nproxy_net *net = NULL;
	enum nproxy_status st;

	setenv("FI_TCP_IFACE", "lo", 1);
	nproxy_log_set_level(NPROXY_LOG_ERROR);
	st = nproxy_net_open(&o, &net);
	record(&job->seen[rank], st, st ? nproxy_status_str(st) : "", t0);
	nproxy_net_close(net);
	return 0;
}

/* Catch the library's error lines of a rank: the open's reason is logged. */
static void keep_last(enum nproxy_log_level level, const char *msg, void *arg)
{
	struct rank_seen *s = arg;

	if (level == NPROXY_LOG_ERROR && strstr(msg, "rank 2"))
		snprintf(s->err, sizeof(s->err), "%s", msg);
}

static int net_open_rank_logged(uint32_t rank, struct rdzv_job *job)
{
	nproxy_log_set_sink(keep_last, &job->seen[4 + rank]);
	return net_open_rank(rank, job);
}

TEST(failed_open_on_one_rank_ends_every_open_promptly)
{
	struct rdzv_job *job = new_job(3, 1500);
	pid_t pids[3];

	ASSERT_NE(NULL, job);
	for (uint32_t r = 0; r < 3; r++)
		pids[r] = start(net_open_rank_logged, r, job);
	for (uint32_t r = 0; r < 3; r++) {
		EXPECT_EQ(0, finish(pids[r], 60000)) TH_LOG("rank %u", r);
	}
	EXPECT_EQ(NPROXY_UNSUPPORTED, job->seen[2].st);
	for (uint32_t r = 0; r < 2; r++) {
		EXPECT_EQ(NPROXY_UNSUPPORTED, job->seen[r].st) TH_LOG("rank %u: %s", r, job->seen[r].err);
		/* Not the 20 s rendezvous deadline: rank 2's reason, relayed. */
		EXPECT_LT(job->seen[r].ms, 10000);
		EXPECT_NE(NULL, strstr(job->seen[4 + r].err, "no-such-provider"))
			TH_LOG("rank %u logged: %s", r, job->seen[4 + r].err);
	}
	munmap(job, 4096 * 4);
}

TEST_HARNESS_MAIN
