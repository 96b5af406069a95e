// SPDX-License-Identifier: GPL-2.0
/*
 * How an op fails, and that a failure leaves nothing behind: every bad
 * description is refused before anything starts (and the next good op
 * runs), a second start while one is in flight is NPROXY_BUSY, a wait
 * that runs out before the op is NPROXY_BUSY and collects nothing, the
 * op's deadline, a device program that fails, a peer killed before or
 * after its start, or inside the shm provider holding the locks of its
 * peers' regions (named by rank and pid, part PEER, within the test's
 * bound, far below the engine's deadline), and a close with an op in
 * flight.  After a failure the coll
 * refuses new ops, and once closed the process holds what it held before.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "coll_test.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT (3 * RT_WAIT_MS / 1000)

struct job {
	char id[64];
	int phase;		/* peer death: where the victim dies */
};

static int run_job(const char *what, uint32_t n, nproxy_test_rank_fn fn, struct job *job,
		   int *codes)
{
	int bad = 0;

	rt_job_id(job->id, sizeof(job->id), what);
	rt_run_forked(n, fn, job, 2 * RT_WAIT_MS, codes);
	for (uint32_t i = 0; i < n; i++)
		if (codes[i])
			bad++;
	return bad;
}

/* A test's job: two ranks of fn (job->phase = phase); both must exit 0. */
static void two_ranks_ok(struct __test_metadata *_metadata, const char *what,
			 nproxy_test_rank_fn fn, int phase)
{
	struct job job = { .phase = phase };
	int codes[2];

	ASSERT_EQ(0, run_job(what, 2, fn, &job, codes));
}

/* What the process holds, back to before once the rank is closed. */
static int census_back(const struct rt_census *before, uint32_t i)
{
	struct rt_census now;

	if (rt_census_settles(*before, &now))
		return 0;
	fprintf(stderr, "# rank %u: left behind: fds %d -> %d, threads %d -> %d, maps %d -> %d, shm %d -> %d\n",
		i, before->fds, now.fds, before->threads, now.threads, before->shared_maps,
		now.shared_maps, before->shm_files, now.shm_files);
	return 70;
}

/* ---- bad descriptions ---- */

static int check_refused(struct ct_rank *r, const struct nproxy_coll_desc *d, const char *what)
{
	enum nproxy_status st = nproxy_coll_start(r->coll, d);

	if (st == NPROXY_INVALID && *nproxy_coll_strerror(r->coll))
		return 0;
	fprintf(stderr, "# %s: %s (%s)\n", what, nproxy_status_str(st), nproxy_coll_strerror(r->coll));
	if (st == NPROXY_SUCCESS)
		nproxy_coll_wait(r->coll, RT_WAIT_MS, NULL);
	return 1;
}

static int bad_desc_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	uint32_t buf[64];
	struct nproxy_prog_step steps[NPROXY_COLL_MAX_PROLOGUE + 1];
	struct nproxy_cc_op cc = NPROXY_CC_OP_INIT;
	const struct nproxy_coll_desc good = {
		.size = sizeof(good), .kind = NPROXY_COLL_ALLREDUCE, .dtype = NPROXY_UINT32,
		.redop = NPROXY_SUM, .count = 16, .recvbuf = buf,
	};
	struct nproxy_coll_desc d;
	struct ct_rank r;
	int bad = 0, rc = ct_open(job->id, i, n, &r);

	if (rc)
		return rc;
	memset(steps, 0, sizeof(steps));
	bad += nproxy_coll_start(r.coll, NULL) != NPROXY_INVALID;
	d = good, d.size = 0;
	bad += check_refused(&r, &d, "size 0");
	d = good, d.size = sizeof(d) - 1;
	bad += check_refused(&r, &d, "short size");
	d = good, d.reserved = 1;
	bad += check_refused(&r, &d, "reserved");
	d = good, d.kind = 0;
	bad += check_refused(&r, &d, "kind 0");
	d = good, d.kind = NPROXY_COLL_CUSTOM + 1;
	bad += check_refused(&r, &d, "kind past the last");
	d = good, d.dtype = NPROXY_DTYPE_COUNT;
	bad += check_refused(&r, &d, "dtype past the last");
	d = good, d.redop = NPROXY_REDOP_COUNT;
	bad += check_refused(&r, &d, "redop past the last");
	d = good, d.kind = NPROXY_COLL_ALLGATHER, d.redop = NPROXY_MAX;
	bad += check_refused(&r, &d, "redop on an allgather");
	d = good, d.recvbuf = NULL;
	bad += check_refused(&r, &d, "no receive buffer");
	d = good, d.kind = NPROXY_COLL_SENDRECV, d.redop = 0;
	bad += check_refused(&r, &d, "sendrecv without a send buffer");
	d = good, d.kind = NPROXY_COLL_SENDRECV, d.redop = 0, d.sendbuf = buf + 8;
	bad += check_refused(&r, &d, "sendrecv buffers overlap");
	d = good, d.sendbuf = buf + 1;
	bad += check_refused(&r, &d, "allreduce input overlaps the result");
	d = good, d.count = (uint64_t)UINT32_MAX + 1;
	bad += check_refused(&r, &d, "over 4 GiB");
	/* Fewer than 2^32 elements, but 4 GiB of them: the bound is on bytes too. */
	d = good, d.count = (uint64_t)UINT32_MAX / sizeof(uint32_t) + 1;
	bad += check_refused(&r, &d, "4 GiB in fewer than 2^32 elements");
	d = good, d.n_prologue = NPROXY_COLL_MAX_PROLOGUE + 1, d.prologue = steps;
	bad += check_refused(&r, &d, "prologue too long");
	d = good, d.n_prologue = 1, d.prologue = NULL;
	bad += check_refused(&r, &d, "prologue NULL");
	d = good, d.cc = &cc;
	bad += check_refused(&r, &d, "cc on a built-in kind");
	d = good, d.kind = NPROXY_COLL_CUSTOM, d.redop = 0;
	bad += check_refused(&r, &d, "custom without cc or prog");
	/* Nothing started: the good op runs, and its input is its output. */
	for (uint32_t e = 0; e < 16; e++)
		buf[e] = e;
	rc = ct_run(&r, i, &good);
	for (uint32_t e = 0; e < 16 && !rc; e++)
		if (buf[e] != e * n)
			rc = 2;
	ct_close(&r);
	return rc ? rc : bad ? 10 + bad : 0;
}

TEST(bad_descriptions_are_refused_and_start_nothing)
{
	two_ranks_ok(_metadata, "bad", bad_desc_rank, 0);
}

/* A NULL coll: start, wait and run refuse it; close and forget do nothing. */
TEST(a_null_coll_is_refused_and_closing_it_is_a_no_op)
{
	uint32_t buf[4];
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	struct nproxy_coll_result res;

	d.kind = NPROXY_COLL_ALLGATHER;
	d.dtype = NPROXY_UINT32;
	d.count = 1;
	d.recvbuf = buf;
	ASSERT_EQ(NPROXY_INVALID, nproxy_coll_start(NULL, &d));
	ASSERT_EQ(NPROXY_INVALID, nproxy_coll_wait(NULL, 0, &res));
	ASSERT_EQ(NPROXY_INVALID, nproxy_coll_wait(NULL, 10, NULL));
	ASSERT_EQ(NPROXY_INVALID, nproxy_coll_run(NULL, &d, &res));
	nproxy_coll_forget(NULL, buf, sizeof(buf));
	nproxy_coll_close(NULL);
}

/* ---- busy, nothing in flight, a wait that runs out ---- */

static int busy_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	uint32_t buf[64] = { 0 };
	struct nproxy_prog_step delay = { .op = NPROXY_STEP_DELAY, .timeout_ns = 300000000ull };
	struct nproxy_coll_desc d = {
		.size = sizeof(d), .kind = NPROXY_COLL_ALLGATHER, .dtype = NPROXY_UINT32,
		.count = 32, .recvbuf = buf, .prologue = &delay, .n_prologue = 1,
	};
	struct nproxy_coll_result res;
	enum nproxy_status st;
	struct ct_rank r;
	int rc = ct_open(job->id, i, n, &r);

	if (rc)
		return rc;
	if (nproxy_coll_wait(r.coll, 0, &res) != NPROXY_INVALID)
		rc = 1;		/* nothing started */
	if (!rc && nproxy_coll_start(r.coll, &d) != NPROXY_SUCCESS)
		rc = 2;
	if (!rc && nproxy_coll_start(r.coll, &d) != NPROXY_BUSY)
		rc = 3;
	/* The device waits 300 ms before its trigger: a 0 ms look finds it running. */
	if (!rc && nproxy_coll_wait(r.coll, 0, &res) != NPROXY_BUSY)
		rc = 4;
	if (!rc && nproxy_coll_wait(r.coll, 20, &res) != NPROXY_BUSY)
		rc = 5;
	do {
		st = nproxy_coll_wait(r.coll, 1000, &res);
	} while (!rc && st == NPROXY_BUSY);
	if (!rc && (st != NPROXY_SUCCESS || res.seq != 1 || res.part != NPROXY_COLL_PART_NONE ||
		    res.prog.state != NPROXY_PROG_DONE))
		rc = 6;
	ct_close(&r);
	return rc;
}

TEST(start_while_in_flight_is_busy_and_a_short_wait_collects_nothing)
{
	two_ranks_ok(_metadata, "busy", busy_rank, 0);
}

/* ---- the op's deadline, a failing device ---- */

static int deadline_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	uint32_t buf[64] = { 0 };
	struct rt_census before = rt_census();
	/* phase 0: the device never triggers in time; 1: the device fails. */
	struct nproxy_prog_step pro = job->phase == 0 ?
		(struct nproxy_prog_step){ .op = NPROXY_STEP_DELAY, .timeout_ns = 3000000000ull } :
		(struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM, .index = 0,
					   .value = 1ull << 40, .timeout_ns = 100000000ull };
	struct nproxy_coll_desc d = {
		.size = sizeof(d), .kind = NPROXY_COLL_ALLGATHER, .dtype = NPROXY_UINT32,
		.count = 32, .recvbuf = buf, .prologue = &pro, .n_prologue = 1,
		.timeout_ms = 400,
	};
	struct nproxy_coll_result res;
	enum nproxy_status st, want = job->phase == 0 ? NPROXY_TIMEOUT : NPROXY_HW_ERROR;
	uint32_t part = job->phase == 0 ? NPROXY_COLL_PART_DEADLINE : NPROXY_COLL_PART_DEVICE;
	struct ct_rank r;
	int rc = ct_open(job->id, i, n, &r);

	if (rc)
		return rc;
	st = nproxy_coll_run(r.coll, &d, &res);
	fprintf(stderr, "# rank %u: %s: %s\n", i, nproxy_status_str(st), nproxy_coll_strerror(r.coll));
	if (st != want || res.status != want || res.part != part)
		rc = 1;
	if (!rc && job->phase == 1 && res.prog.state != NPROXY_PROG_TIMEDOUT)
		rc = 2;
	/* The device's delay holds back the network stage: still running at the deadline. */
	if (!rc && job->phase == 0 && !strstr(nproxy_coll_strerror(r.coll), "network task running"))
		rc = 4;
	/* Broken: the next op is refused with the first failure's status. */
	if (!rc && nproxy_coll_start(r.coll, &d) != want)
		rc = 3;
	/* Closed in order (the ranks meet first): the rank whose deadline
	 * came first must not look dead to the other. */
	nproxy_coll_close(r.coll);
	nproxy_rank_close(r.rank);
	return rc ? rc : census_back(&before, i);
}

TEST(the_ops_deadline_ends_it_and_leaves_nothing)
{
	two_ranks_ok(_metadata, "deadline", deadline_rank, 0);
}

TEST(a_failing_device_program_ends_the_op_and_leaves_nothing)
{
	two_ranks_ok(_metadata, "device", deadline_rank, 1);
}

/* ---- a peer killed before or after its start ---- */

/* The rank killed: 2, or the last of a smaller job. */
#define VICTIM(n)	((n) > 2 ? 2u : (n) - 1)
/* Where the shm provider keeps a region's lock (lib/net/net_shm_locks.c). */
#define SHM_HDR_LOCK	24

/*
 * Die as a process killed inside the shm provider would: holding the lock
 * of every other process's region mapped here (the receivers it was
 * sending to), which the provider takes around each command it writes.
 */
static void hold_peers_region_locks(void)
{
	char line[512], mine[32];
	FILE *f = fopen("/proc/self/maps", "r");

	snprintf(mine, sizeof(mine), "/dev/shm/%d:", (int)getpid());
	while (f && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');
		unsigned long lo, off;

		if (!path || strncmp(path, "/dev/shm/", 9) || !strncmp(path, mine, strlen(mine)) ||
		    strchr(path + 9, '_') || sscanf(line, "%lx-%*x %*s %lx", &lo, &off) != 2 || off)
			continue;
		pthread_spin_lock((pthread_spinlock_t *)(lo + SHM_HDR_LOCK));
	}
	if (f)
		fclose(f);
}

static int death_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	uint64_t words = 64;
	uint32_t *buf = calloc(words * n, 4);
	struct rt_census before = rt_census();
	struct nproxy_coll_desc d = {
		.size = sizeof(d), .kind = NPROXY_COLL_ALLGATHER, .dtype = NPROXY_UINT32,
		.count = words, .recvbuf = buf,
	};
	struct nproxy_coll_result res;
	uint64_t t0;
	char named[32];
	enum nproxy_status st;
	struct ct_rank r;
	int rc;

	if (!buf)
		return 80;
	rc = ct_open(job->id, i, n, &r);
	if (rc)
		return rc;
	/* One good op first: every connection is up. */
	d.count = 16;
	rc = ct_run(&r, i, &d);
	if (rc)
		return rc;
	d.count = words;
	if (i == VICTIM(n)) {
		/* A second op first: its wait collects the first one's barrier,
		 * so every survivor is past the good op before the locks go. */
		if (job->phase == 2) {
			rc = ct_run(&r, i, &d);
			if (rc)
				return rc;
			hold_peers_region_locks();
		}
		if (job->phase != 1)
			raise(SIGKILL);
		nproxy_coll_start(r.coll, &d);
		raise(SIGKILL);
	}
	/*
	 * A victim killed after its start may have sent its part already, so
	 * a survivor's op can still end well: the next op must then fail.
	 */
	t0 = nproxy_test_now_ms();
	for (int k = 0; k < 3; k++) {
		st = nproxy_coll_run(r.coll, &d, &res);
		if (st != NPROXY_SUCCESS)
			break;
	}
	fprintf(stderr, "# rank %u: %s after %" PRIu64 " ms: %s\n", i, nproxy_status_str(st),
		nproxy_test_now_ms() - t0, nproxy_coll_strerror(r.coll));
	snprintf(named, sizeof(named), "peer rank %u (pid", VICTIM(n));
	if (st != NPROXY_PEER_DEAD || res.part != NPROXY_COLL_PART_PEER)
		rc = 1;
	else if (res.dead_rank != VICTIM(n) || res.dead_pid <= 0)
		rc = 2;
	else if (!strstr(nproxy_coll_strerror(r.coll), named))
		rc = 3;
	nproxy_coll_close(r.coll);
	nproxy_rank_abandon(r.rank);
	free(buf);
	return rc ? rc : census_back(&before, i);
}

static void peer_death(struct __test_metadata *_metadata, uint32_t n, int phase,
		       const char *what)
{
	struct job job = { .phase = phase };
	int codes[RT_MAX_RANKS];

	run_job(what, n, death_rank, &job, codes);
	for (uint32_t i = 0; i < n; i++)
		EXPECT_EQ(i == VICTIM(n) ? 128 + SIGKILL : 0, codes[i]);
}

/* Three ranks run the ring allgather; four, recursive doubling. */
TEST(a_peer_killed_before_its_start_is_named)
{
	peer_death(_metadata, 3, 0, "death0");
	peer_death(_metadata, 4, 0, "death0w4");
}

TEST(a_peer_killed_after_its_start_is_named)
{
	peer_death(_metadata, 3, 1, "death1");
	peer_death(_metadata, 4, 1, "death1w4");
}

/*
 * Killed inside the shm provider, holding its peers' region locks: each
 * survivor's worker spins on its own region's lock in fi_cq_read() (and
 * on the next rank's in fi_tsend()), holding the engine's lock, until the
 * waiting thread, told of the death by the bus, releases what the dead
 * process held (nproxy_net_shm_break_dead_locks()).  With 2 ranks the
 * waiting thread drives the op itself and is the one stuck: the worker
 * sees its step last a second and releases them.
 */
TEST(a_peer_killed_holding_its_peers_shm_locks_is_named)
{
	peer_death(_metadata, 3, 2, "death2");
	peer_death(_metadata, 4, 2, "death2w4");
	peer_death(_metadata, 2, 2, "death2w2");
}

/* ---- close with an op in flight ---- */

static int close_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	uint32_t buf[64] = { 0 };
	struct rt_census before = rt_census();
	struct nproxy_prog_step delay = { .op = NPROXY_STEP_DELAY, .timeout_ns = 5000000000ull };
	struct nproxy_coll_desc d = {
		.size = sizeof(d), .kind = NPROXY_COLL_ALLGATHER, .dtype = NPROXY_UINT32,
		.count = 32, .recvbuf = buf, .prologue = &delay, .n_prologue = 1,
	};
	uint64_t t0;
	struct ct_rank r;
	int rc = ct_open(job->id, i, n, &r);

	if (rc)
		return rc;
	if (nproxy_coll_start(r.coll, &d) != NPROXY_SUCCESS)
		rc = 1;
	t0 = nproxy_test_now_ms();
	nproxy_coll_close(r.coll);
	/* The device's 5 s delay is cancelled, not waited out. */
	if (!rc && nproxy_test_now_ms() - t0 > 4000)
		rc = 2;
	nproxy_rank_close(r.rank);
	return rc ? rc : census_back(&before, i);
}

TEST(close_with_an_op_in_flight_cancels_it)
{
	two_ranks_ok(_metadata, "close", close_rank, 0);
}

TEST_HARNESS_MAIN
