// SPDX-License-Identifier: GPL-2.0
/*
 * The thread that waits drives the op (NPROXY_CALLER_DRIVES): a consumer
 * waiting in nproxy_await_status()/nproxy_wait_status() may step its
 * group itself, and hands the group back to the worker when it stops;
 * while it drives, a thread that waits for the group's lock gets it
 * between two ticks.
 *
 * Every engine call goes through a recording seam that counts the threads
 * inside progress() at once (the group's step right must make that 1) and
 * remembers which threads called it.
 */
#include <sched.h>
#include "kselftest_harness.h"
#include "proxy_test_util.h"
#include "../../lib/proxy/proxy_internal.h"

/* ---- the recording seam: wraps a loopback rank ---- */
#define REC_MAX_TIDS 8

/*
 * The library's sched_yield() comes here.  Counted per thread, outside the
 * seam's own yield; with yield_loses set, a yield returns after 300 us,
 * as when another process took the cpu for a time slice.
 */
static __thread bool in_seam;
static int yield_count_tid;
static uint64_t yields_counted;
static bool yield_loses;

int sched_yield(void)
{
	if (!in_seam && (int)gettid() == __atomic_load_n(&yield_count_tid, __ATOMIC_RELAXED))
		__atomic_add_fetch(&yields_counted, 1, __ATOMIC_RELAXED);
	if (!in_seam && __atomic_load_n(&yield_loses, __ATOMIC_RELAXED)) {
		const struct timespec slice = { 0, 300000 };

		nanosleep(&slice, NULL);
		return 0;
	}
	return (int)syscall(SYS_sched_yield);
}

struct rec_seam {
	struct nproxy_seam inner;
	int *inside;		/* shared by the engines of one group */
	int *overlaps;		/* progress() entered while another thread was in it */
	int tids[REC_MAX_TIDS];	/* distinct callers of progress(), first seen first */
	int n_tids;		/* atomic */
	uint64_t calls;		/* atomic */
	int start_tid;		/* atomic: the last caller of start() */
	pthread_mutex_t tid_lock;
};

static void rec_note_tid(struct rec_seam *r)
{
	int tid = (int)gettid(), i;

	pthread_mutex_lock(&r->tid_lock);
	for (i = 0; i < r->n_tids; i++)
		if (r->tids[i] == tid)
			break;
	if (i == r->n_tids && r->n_tids < REC_MAX_TIDS)
		r->tids[r->n_tids++] = tid;
	pthread_mutex_unlock(&r->tid_lock);
}

static bool rec_saw_tid(struct rec_seam *r, int tid)
{
	bool seen = false;
	int i;

	pthread_mutex_lock(&r->tid_lock);
	for (i = 0; i < r->n_tids; i++)
		seen |= r->tids[i] == tid;
	pthread_mutex_unlock(&r->tid_lock);
	return seen;
}

static int rec_n_tids(struct rec_seam *r)
{
	int n;

	pthread_mutex_lock(&r->tid_lock);
	n = r->n_tids;
	pthread_mutex_unlock(&r->tid_lock);
	return n;
}

static enum nproxy_status rec_start(void *e, uint32_t s, uint32_t bb,
				    const struct nproxy_fifo_set *f,
				    const struct nproxy_device_sems *d)
{
	struct rec_seam *r = e;

	__atomic_store_n(&r->start_tid, (int)gettid(), __ATOMIC_RELAXED);
	return r->inner.ops->start(r->inner.engine, s, bb, f, d);
}

static enum nproxy_status rec_progress(void *e, uint32_t s, uint32_t bb, bool *idle,
				       bool *block_done, bool *done)
{
	struct rec_seam *r = e;
	enum nproxy_status st;

	if (__atomic_add_fetch(r->inside, 1, __ATOMIC_SEQ_CST) > 1)
		__atomic_add_fetch(r->overlaps, 1, __ATOMIC_SEQ_CST);
	rec_note_tid(r);
	__atomic_add_fetch(&r->calls, 1, __ATOMIC_RELAXED);
	/* Widen the window a second stepper would have to hit. */
	in_seam = true;
	sched_yield();
	st = r->inner.ops->progress(r->inner.engine, s, bb, idle, block_done, done);
	in_seam = false;
	__atomic_sub_fetch(r->inside, 1, __ATOMIC_SEQ_CST);
	return st;
}

static enum nproxy_status rec_stop(void *e, uint32_t s, uint32_t bb)
{
	struct rec_seam *r = e;

	return r->inner.ops->stop(r->inner.engine, s, bb);
}

static const struct nproxy_seam_ops rec_ops = {
	.name = "recording",
	.start = rec_start,
	.progress = rec_progress,
	.stop = rec_stop,
};

/* pair_open()'s idle policy. */
static enum nproxy_idle_policy pair_policy = NPROXY_IDLE_YIELD;

/* Two loopback ranks exchanging 64 bytes; rank i on device dev[i] (ranks_per_proxy rpp). */
struct pair {
	struct nproxy_loopback_fabric *f;
	struct lb_rank r[2];
	struct rec_seam rec[2];
	struct nproxy_comm *c[2];
	int inside[2], overlaps;
};

static int pair_open(struct pair *p, uint32_t dev0, uint32_t dev1, uint32_t rpp)
{
	uint32_t dev[2] = { dev0, dev1 };
	bool one_group = dev0 / rpp == dev1 / rpp;

	memset(p, 0, sizeof(*p));
	if (nproxy_loopback_fabric_create(2, &p->f))
		return -1;
	for (int i = 0; i < 2; i++) {
		struct nproxy_comm_opts o;

		if (lb_rank_setup(&p->r[i], p->f, i, 1 - i, 64))
			return -1;
		p->rec[i].inner = nproxy_loopback_seam(p->r[i].lb);
		p->rec[i].inside = &p->inside[one_group ? 0 : i];
		p->rec[i].overlaps = &p->overlaps;
		pthread_mutex_init(&p->rec[i].tid_lock, NULL);
		o = comm_opts(i, 2, dev[i], rpp, 0, p->r[i].lb);
		o.idle_policy = pair_policy;
		o.seam.ops = &rec_ops;
		o.seam.engine = &p->rec[i];
		if (nproxy_comm_open(&o, &p->c[i]))
			return -1;
	}
	return 0;
}

static void pair_close(struct pair *p)
{
	for (int i = 0; i < 2; i++) {
		nproxy_comm_close(p->c[i]);
		nproxy_loopback_destroy(p->r[i].lb);
		pthread_mutex_destroy(&p->rec[i].tid_lock);
	}
	nproxy_loopback_fabric_destroy(p->f);
}

static enum nproxy_status pair_enq(struct pair *p, int i, uint64_t exec_id, uint64_t *ctx)
{
	struct nproxy_cc_op op = lb_rank_op(&p->r[i]);

	return nproxy_enq_proxy_tasks(p->c[i], &op, exec_id, ctx);
}

/* Poll without waiting (nproxy_check_status never drives) until DONE. */
static enum nproxy_status poll_done(struct nproxy_comm *c, uint64_t ctx,
				    enum nproxy_task_type type, uint32_t timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
	enum nproxy_status st, rc;
	bool done;

	for (;;) {
		rc = nproxy_check_status(c, ctx, type, &done, &st);
		if (rc != NPROXY_SUCCESS)
			return rc;
		if (done)
			return st;
		if (now_ns() >= deadline)
			return NPROXY_TIMEOUT;
		sleep_ms(1);
	}
}

static void drives(const char *mode)
{
	if (mode)
		setenv("NPROXY_CALLER_DRIVES", mode, 1);
	else
		unsetenv("NPROXY_CALLER_DRIVES");
}

/* ---- one group, two waiting threads and the worker ---- */
#define OPS 150

struct rank_loop {
	struct pair *p;
	int i;
	int tid;
	int failures;
	uint64_t exec_id;	/* late_peer_main's op; 0: 1 */
};

static void *rank_loop_main(void *arg)
{
	struct rank_loop *l = arg;
	uint64_t ctx;

	l->tid = (int)gettid();
	for (uint64_t n = 1; n <= OPS; n++) {
		if (pair_enq(l->p, l->i, n, &ctx) ||
		    nproxy_wait_status(l->p->c[l->i], ctx, NPROXY_TASK_NETWORK, 20000) ||
		    nproxy_wait_status(l->p->c[l->i], ctx, NPROXY_TASK_BARRIER, 20000))
			l->failures++;
	}
	return NULL;
}

TEST(two_threads_never_step_one_group_at_once)
{
	struct rank_loop l[2];
	pthread_t th[2];
	struct pair p;

	drives("always");
	/* Devices 0 and 1, two ranks per proxy: one group, one worker, two waiters. */
	ASSERT_EQ(0, pair_open(&p, 0, 1, 2));
	EXPECT_EQ(1, count_proxy_threads(NULL));
	for (int i = 0; i < 2; i++) {
		l[i] = (struct rank_loop){ .p = &p, .i = i };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, rank_loop_main, &l[i]));
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	EXPECT_EQ(0, l[0].failures);
	EXPECT_EQ(0, l[1].failures);
	/* Both waiting threads stepped the group, and never together. */
	EXPECT_TRUE(rec_saw_tid(&p.rec[0], l[0].tid) || rec_saw_tid(&p.rec[1], l[0].tid));
	EXPECT_TRUE(rec_saw_tid(&p.rec[0], l[1].tid) || rec_saw_tid(&p.rec[1], l[1].tid));
	EXPECT_EQ(0, __atomic_load_n(&p.overlaps, __ATOMIC_SEQ_CST));
	EXPECT_TRUE(lb_rank_got(&p.r[0], 1, 64));
	EXPECT_TRUE(lb_rank_got(&p.r[1], 0, 64));
	pair_close(&p);
	drives(NULL);
}

TEST(a_caller_that_stops_waiting_hands_the_op_back_to_the_worker)
{
	enum nproxy_status st;
	uint64_t ctx0, ctx1, calls;
	struct pair p;
	bool done;
	int worker0;

	drives("always");
	/* Devices 0 and 1, one rank per proxy: a group (and worker) per rank. */
	ASSERT_EQ(0, pair_open(&p, 0, 1, 1));
	worker0 = nproxy_comm_worker_tid(p.c[0]);
	ASSERT_ST(NPROXY_SUCCESS, pair_enq(&p, 0, 1, &ctx0));
	/* Rank 1 has not posted: the wait runs out while this thread drives. */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_await_status(p.c[0], ctx0, NPROXY_TASK_NETWORK, 30,
						      &done, &st));
	EXPECT_FALSE(done);
	EXPECT_TRUE(rec_saw_tid(&p.rec[0], (int)gettid()));
	/*
	 * From here nobody waits on rank 0: its worker steps it again, handed
	 * the group at once (well inside the 1 s safety timeout of its park).
	 */
	calls = __atomic_load_n(&p.rec[0].calls, __ATOMIC_RELAXED);
	EXPECT_TRUE(WAIT_UNTIL(__atomic_load_n(&p.rec[0].calls, __ATOMIC_RELAXED) > calls + 10,
			       500));
	EXPECT_TRUE(rec_saw_tid(&p.rec[0], worker0));
	ASSERT_ST(NPROXY_SUCCESS, pair_enq(&p, 1, 1, &ctx1));
	EXPECT_ST(NPROXY_SUCCESS, poll_done(p.c[0], ctx0, NPROXY_TASK_NETWORK, 10000));
	EXPECT_ST(NPROXY_SUCCESS, poll_done(p.c[0], ctx0, NPROXY_TASK_BARRIER, 10000));
	EXPECT_ST(NPROXY_SUCCESS, poll_done(p.c[1], ctx1, NPROXY_TASK_NETWORK, 10000));
	EXPECT_ST(NPROXY_SUCCESS, poll_done(p.c[1], ctx1, NPROXY_TASK_BARRIER, 10000));
	EXPECT_TRUE(lb_rank_got(&p.r[0], 1, 64));
	EXPECT_TRUE(lb_rank_got(&p.r[1], 0, 64));
	EXPECT_EQ(0, __atomic_load_n(&p.overlaps, __ATOMIC_SEQ_CST));
	pair_close(&p);
	drives(NULL);
}

TEST(an_op_nobody_waits_on_completes_after_a_driven_one)
{
	uint64_t ctx0, ctx1;
	struct pair p;
	pthread_t th;
	struct rank_loop l = { 0 };

	drives("always");
	ASSERT_EQ(0, pair_open(&p, 0, 1, 1));
	/* One op both ranks wait on: the waiting threads drive it ... */
	l.p = &p;
	l.i = 1;
	ASSERT_EQ(0, pthread_create(&th, NULL, rank_loop_main, &l));
	for (uint64_t n = 1; n <= OPS; n++) {
		ASSERT_ST(NPROXY_SUCCESS, pair_enq(&p, 0, n, &ctx0));
		ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(p.c[0], ctx0, NPROXY_TASK_NETWORK, 20000));
		ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(p.c[0], ctx0, NPROXY_TASK_BARRIER, 20000));
	}
	pthread_join(th, NULL);
	EXPECT_EQ(0, l.failures);
	EXPECT_TRUE(rec_saw_tid(&p.rec[0], (int)gettid()));
	/*
	 * ... then one nobody waits on: the workers, parked meanwhile, are
	 * woken by the enqueue (well inside their parks' 1 s safety timeout).
	 */
	ASSERT_ST(NPROXY_SUCCESS, pair_enq(&p, 0, OPS + 1, &ctx0));
	ASSERT_ST(NPROXY_SUCCESS, pair_enq(&p, 1, OPS + 1, &ctx1));
	EXPECT_ST(NPROXY_SUCCESS, poll_done(p.c[0], ctx0, NPROXY_TASK_NETWORK, 500));
	EXPECT_ST(NPROXY_SUCCESS, poll_done(p.c[1], ctx1, NPROXY_TASK_NETWORK, 500));
	EXPECT_ST(NPROXY_SUCCESS, poll_done(p.c[0], ctx0, NPROXY_TASK_BARRIER, 10000));
	EXPECT_ST(NPROXY_SUCCESS, poll_done(p.c[1], ctx1, NPROXY_TASK_BARRIER, 10000));
	EXPECT_TRUE(rec_saw_tid(&p.rec[0], nproxy_comm_worker_tid(p.c[0])));
	EXPECT_TRUE(rec_saw_tid(&p.rec[1], nproxy_comm_worker_tid(p.c[1])));
	pair_close(&p);
	drives(NULL);
}

/*
 * An op whose waiter will drive it is left to that waiter: its enqueue
 * holds the worker off for a grace (1 ms).  Before, the enqueue woke the
 * worker, parked with nothing to do, and the worker started the op; on
 * the waiter's cpu it ran the whole op while the waiter was preempted.
 * Here the waiter comes 200 us after its enqueue, as if preempted; a round
 * where it came after 600 us (a loaded or sanitized build: too near the
 * grace's end to tell) does not count.
 * One rank, so the op needs nobody else.
 */
TEST(an_op_its_waiter_will_drive_is_left_to_it)
{
	struct nproxy_comm_opts o;
	int inside = 0, overlaps = 0, counted = 0;
	struct rec_seam rec = { .inside = &inside, .overlaps = &overlaps };
	struct lb_comm k;

	drives("always");
	ASSERT_EQ(0, lb_comm_prepare(&k, 0, 0, &o));
	pthread_mutex_init(&rec.tid_lock, NULL);
	rec.inner = o.seam;
	o.seam = (struct nproxy_seam){ .ops = &rec_ops, .engine = &rec };
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &k.c));
	for (int round = 0; round < 10; round++) {
		struct nproxy_cc_op op = lb_rank_op(&k.r);
		uint64_t ctx, t0, late_us;

		sleep_ms(3);	/* any grace is over: the worker is parked */
		__atomic_store_n(&rec.start_tid, 0, __ATOMIC_RELAXED);
		t0 = now_ns();
		ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 1, &ctx));
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
		late_us = (now_ns() - t0) / 1000;
		ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, ctx, NPROXY_TASK_NETWORK, 20000));
		ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, ctx, NPROXY_TASK_BARRIER, 20000));
		if (late_us >= 600)
			continue;
		counted++;
		EXPECT_EQ((int)gettid(), __atomic_load_n(&rec.start_tid, __ATOMIC_RELAXED))
			TH_LOG("round %d: the worker started the op (the waiter came after %llu us)",
			       round, (unsigned long long)late_us);
	}
	lb_comm_close(&k);
	pthread_mutex_destroy(&rec.tid_lock);
	drives(NULL);
	if (counted < 3)
		SKIP(return, "only %d of 10 rounds came back within 600 us of the enqueue", counted);
}

/* Rank 1 posts from its own thread a while after rank 0 started waiting. */
static void *late_peer_main(void *arg)
{
	struct rank_loop *l = arg;
	uint64_t ctx;

	sleep_ms(50);
	if (pair_enq(l->p, l->i, l->exec_id ? l->exec_id : 1, &ctx) ||
	    nproxy_wait_status(l->p->c[l->i], ctx, NPROXY_TASK_NETWORK, 20000) ||
	    nproxy_wait_status(l->p->c[l->i], ctx, NPROXY_TASK_BARRIER, 20000))
		l->failures++;
	return NULL;
}

/* Op exec_id with a late peer; returns whether this (waiting) thread called progress(). */
static int wait_with_late_peer_op(struct __test_metadata *_metadata, struct pair *p,
				  uint64_t exec_id)
{
	struct rank_loop l = { .p = p, .i = 1, .exec_id = exec_id };
	uint64_t ctx0;
	pthread_t th;
	int me = (int)gettid();

	EXPECT_ST(NPROXY_SUCCESS, pair_enq(p, 0, exec_id, &ctx0));
	EXPECT_EQ(0, pthread_create(&th, NULL, late_peer_main, &l));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(p->c[0], ctx0, NPROXY_TASK_NETWORK, 20000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(p->c[0], ctx0, NPROXY_TASK_BARRIER, 20000));
	pthread_join(th, NULL);
	EXPECT_EQ(0, l.failures);
	EXPECT_TRUE(lb_rank_got(&p->r[0], 1, 64));
	EXPECT_GT(__atomic_load_n(&p->rec[0].calls, __ATOMIC_RELAXED), 1u);
	return rec_saw_tid(&p->rec[0], me);
}

static int wait_with_late_peer(struct __test_metadata *_metadata, struct pair *p)
{
	return wait_with_late_peer_op(_metadata, p, 1);
}

TEST(never_leaves_every_step_to_the_worker)
{
	struct pair p;

	drives("never");
	ASSERT_EQ(0, pair_open(&p, 0, 1, 1));
	EXPECT_FALSE(wait_with_late_peer(_metadata, &p));
	/* Only the worker ever called progress() for rank 0. */
	EXPECT_EQ(1, rec_n_tids(&p.rec[0]));
	EXPECT_TRUE(rec_saw_tid(&p.rec[0], nproxy_comm_worker_tid(p.c[0])));
	pair_close(&p);
	drives(NULL);
}

TEST(always_makes_the_waiting_thread_step)
{
	struct pair p;

	drives("always");
	ASSERT_EQ(0, pair_open(&p, 0, 1, 1));
	EXPECT_TRUE(wait_with_late_peer(_metadata, &p));
	EXPECT_EQ(0, __atomic_load_n(&p.overlaps, __ATOMIC_SEQ_CST));
	pair_close(&p);
	drives(NULL);
}

/*
 * A driver's yield that lost a time slice (another process wanted the
 * cpu) makes drivers spin without yielding for a while.  That is the
 * group's memory, not one wait's: each op is a new wait, and one that
 * learnt it afresh handed the other process a slice per op (2 ranks,
 * 1 KiB allreduce beside a starting process: ~1 ms per op, not ~6 us).
 */
TEST(a_yield_that_lost_a_slice_is_remembered_by_the_next_op)
{
	struct pair p;

	drives("always");
	pair_policy = NPROXY_IDLE_ADAPTIVE;
	ASSERT_EQ(0, pair_open(&p, 0, 1, 1));
	pair_policy = NPROXY_IDLE_YIELD;
	__atomic_store_n(&yield_count_tid, (int)gettid(), __ATOMIC_RELAXED);
	__atomic_store_n(&yield_loses, true, __ATOMIC_RELAXED);
	EXPECT_TRUE(wait_with_late_peer_op(_metadata, &p, 1));
	__atomic_store_n(&yield_loses, false, __ATOMIC_RELAXED);
	/* The first op's driver yielded in its spin window, and lost. */
	EXPECT_GT(__atomic_exchange_n(&yields_counted, 0, __ATOMIC_RELAXED), 0u);
	EXPECT_TRUE(wait_with_late_peer_op(_metadata, &p, 2));
	/* The second op's driver waited as long, without a yield. */
	EXPECT_EQ(0u, __atomic_load_n(&yields_counted, __ATOMIC_RELAXED));
	__atomic_store_n(&yield_count_tid, 0, __ATOMIC_RELAXED);
	pair_close(&p);
	drives(NULL);
}

TEST(auto_leaves_the_op_to_the_worker_in_a_process_of_two_comms)
{
	struct pair p;

	drives(NULL);
	ASSERT_EQ(0, pair_open(&p, 0, 1, 1));
	/* auto's rule (Documentation/proxy.md): a 2-rank op without
	 * reductions, but the pair's two comms share this process. */
	EXPECT_EQ(2u, npx_proxy_comms_open());
	EXPECT_FALSE(wait_with_late_peer(_metadata, &p));
	EXPECT_EQ(1, rec_n_tids(&p.rec[0]));
	pair_close(&p);
	EXPECT_EQ(0u, npx_proxy_comms_open());
}

TEST(auto_rule_by_ranks_and_reduced_bytes)
{
	EXPECT_TRUE(npx_proxy_auto_drives(1, 0, 1));
	EXPECT_TRUE(npx_proxy_auto_drives(2, 0, 1));
	EXPECT_TRUE(npx_proxy_auto_drives(2, PROXY_AUTO_DRIVE_MAX_REDUCE, 1));
	EXPECT_FALSE(npx_proxy_auto_drives(2, PROXY_AUTO_DRIVE_MAX_REDUCE + 1, 1));
	EXPECT_FALSE(npx_proxy_auto_drives(3, 0, 1));
	EXPECT_FALSE(npx_proxy_auto_drives(64, 1024, 1));
	/* Several comms in the process: one thread may wait on them in turn. */
	EXPECT_FALSE(npx_proxy_auto_drives(2, 0, 2));
	EXPECT_EQ(2u, PROXY_AUTO_DRIVE_MAX_RANKS);
	EXPECT_EQ(65536u, PROXY_AUTO_DRIVE_MAX_REDUCE);
}

/* ---- a driver lets a thread that waits for the group's lock in ---- */

/* A seam whose block keeps moving until the locker below is through. */
static int busy_driver_tid;
static uint64_t busy_driven_calls;
static bool busy_locker_through;

static enum nproxy_status busy_start(void *e, uint32_t s, uint32_t bb,
				     const struct nproxy_fifo_set *f,
				     const struct nproxy_device_sems *d)
{
	return NPROXY_SUCCESS;
}

static enum nproxy_status busy_progress(void *e, uint32_t s, uint32_t bb, bool *idle,
					bool *block_done, bool *done)
{
	if ((int)gettid() == __atomic_load_n(&busy_driver_tid, __ATOMIC_RELAXED))
		__atomic_add_fetch(&busy_driven_calls, 1, __ATOMIC_RELAXED);
	*idle = false;
	*block_done = *done = __atomic_load_n(&busy_locker_through, __ATOMIC_ACQUIRE);
	return NPROXY_SUCCESS;
}

static enum nproxy_status busy_stop(void *e, uint32_t s, uint32_t bb)
{
	return NPROXY_SUCCESS;
}

static const struct nproxy_seam_ops busy_ops = {
	.name = "busy", .start = busy_start, .progress = busy_progress, .stop = busy_stop,
};

struct locker {
	struct nproxy_comm *other;
	bool saw_drive;
	uint64_t done_ns;
};

/* Once the waiting thread drives, take the group's lock (an abort of another comm). */
static void *locker_main(void *arg)
{
	struct locker *l = arg;

	l->saw_drive = WAIT_UNTIL(__atomic_load_n(&busy_driven_calls, __ATOMIC_RELAXED) > 0, 10000);
	nproxy_comm_abort(l->other);
	__atomic_store_n(&l->done_ns, now_ns(), __ATOMIC_RELEASE);
	__atomic_store_n(&busy_locker_through, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * A thread driving an op that keeps moving gives the group's lock to a
 * thread that waits for it between two ticks: an abort of another comm of
 * the group ends while the driver still waits, not after it.  The op ends
 * only once the abort is through, so a driver that kept the lock times out
 * with the op not done; the long timeout costs nothing when the lock is
 * handed over (valgrind, which runs one thread at a time, needs it).
 */
TEST(a_driver_of_a_moving_op_lets_a_lock_waiter_in)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 0, 1, 0, NULL);
	struct nproxy_comm_opts o2 = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_SKIP_NET, NULL);
	struct nproxy_cc_op op = NPROXY_CC_OP_INIT;
	struct nproxy_fifo_set blocks = { 0 };
	uint32_t word = 1;
	struct locker l = { 0 };
	struct nproxy_comm *c;
	enum nproxy_status st;
	uint64_t ctx, ret_ns;
	pthread_t th;
	bool done;

	drives("always");
	o.seam.ops = &busy_ops;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o2, &l.other));
	op.streams_n = 1;
	op.streams[0].blocks = &blocks;
	op.streams[0].n_blocks = 1;
	op.trigger_words[0] = &word;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &op, 1, &ctx));
	__atomic_store_n(&busy_locker_through, false, __ATOMIC_RELAXED);
	__atomic_store_n(&busy_driver_tid, (int)gettid(), __ATOMIC_RELAXED);
	ASSERT_EQ(0, pthread_create(&th, NULL, locker_main, &l));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_await_status(c, ctx, NPROXY_TASK_NETWORK, 20000, &done,
						      &st));
	ret_ns = now_ns();
	pthread_join(th, NULL);
	__atomic_store_n(&busy_driver_tid, 0, __ATOMIC_RELAXED);
	EXPECT_TRUE(done);
	EXPECT_ST(NPROXY_SUCCESS, st);
	EXPECT_TRUE(l.saw_drive);
	EXPECT_LT(l.done_ns, ret_ns);
	nproxy_comm_close(l.other);
	nproxy_comm_close(c);
	drives(NULL);
}

/* ---- a driver stuck inside one step: the stall hook ---- */

/*
 * A seam whose first step on the caller's thread takes stall_ms, then the
 * block is done.  A step on the worker (which may tick the task before
 * the caller starts driving) moves nothing: the stall under test is a
 * driver's, which only the parked worker can see.
 */
static uint32_t stall_ms;
static uint32_t stall_steps;
static uint32_t stall_hook_calls;
static uint64_t stall_hook_ns;
static int stall_tid;

static enum nproxy_status stall_progress(void *e, uint32_t s, uint32_t bb, bool *idle,
					 bool *block_done, bool *done)
{
	*idle = (int)gettid() != __atomic_load_n(&stall_tid, __ATOMIC_RELAXED);
	*block_done = *done = !*idle;
	if (*idle)
		return NPROXY_SUCCESS;
	if (__atomic_fetch_add(&stall_steps, 1, __ATOMIC_RELAXED) == 0)
		sleep_ms(stall_ms);
	return NPROXY_SUCCESS;
}

static const struct nproxy_seam_ops stall_ops = {
	.name = "stall", .start = busy_start, .progress = stall_progress, .stop = busy_stop,
};

static void stall_hook(void)
{
	if (__atomic_add_fetch(&stall_hook_calls, 1, __ATOMIC_RELAXED) == 1)
		__atomic_store_n(&stall_hook_ns, now_ns(), __ATOMIC_RELAXED);
}

/* Drive one op whose first step takes ms; the hook's calls. */
static uint32_t drive_a_step_of(struct __test_metadata *_metadata, uint32_t ms,
				uint64_t *hook_after_ms)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 0, 1, 0, NULL);
	struct nproxy_cc_op op = NPROXY_CC_OP_INIT;
	struct nproxy_fifo_set blocks = { 0 };
	uint32_t word = 1;
	struct nproxy_comm *c;
	uint64_t ctx, t0;

	stall_ms = ms;
	stall_tid = (int)gettid();
	stall_steps = stall_hook_calls = 0;
	stall_hook_ns = 0;
	drives("always");
	npx_proxy_set_stall_hook(stall_hook);
	o.seam.ops = &stall_ops;
	if (nproxy_comm_open(&o, &c) != NPROXY_SUCCESS)
		return UINT32_MAX;
	op.streams_n = 1;
	op.streams[0].blocks = &blocks;
	op.streams[0].n_blocks = 1;
	op.trigger_words[0] = &word;
	t0 = now_ns();
	EXPECT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &op, 1, &ctx));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c, ctx, NPROXY_TASK_NETWORK, 20000));
	nproxy_comm_close(c);
	npx_proxy_set_stall_hook(NULL);
	drives(NULL);
	*hook_after_ms = stall_hook_ns ? (stall_hook_ns - t0) / 1000000 : 0;
	return __atomic_load_n(&stall_hook_calls, __ATOMIC_RELAXED);
}

/*
 * The worker, parked while a caller drives, calls the stall hook once when
 * the driver has been inside one step for a second (a thread stuck inside
 * an engine cannot ask for help itself), and never for a step shorter.
 */
TEST(a_driver_stuck_in_a_step_for_a_second_calls_the_stall_hook_once)
{
	uint64_t after_ms;

	EXPECT_EQ(1u, drive_a_step_of(_metadata, 2500, &after_ms));
	EXPECT_LE(1000u, after_ms);
	EXPECT_EQ(0u, drive_a_step_of(_metadata, 300, &after_ms));
}

/* The queue's answer for an op that auto would drive (a 1- or 2-rank op
 * without reductions, alone in the process): never says no, always yes. */
static bool queue_drives(const char *mode)
{
	struct proxy_task_status st = { .auto_drive = true };
	struct proxy_queue *q;
	bool yes;

	drives(mode);
	q = npx_proxy_queue_create(99, NPROXY_IDLE_YIELD, 0);
	drives(NULL);
	if (!q)
		return false;
	yes = npx_proxy_queue_caller_drives(q, &st);
	npx_proxy_queue_destroy(q);
	return yes;
}

TEST(never_and_always_override_auto_for_an_op_auto_would_drive)
{
	EXPECT_TRUE(queue_drives(NULL));
	EXPECT_FALSE(queue_drives("never"));
	EXPECT_TRUE(queue_drives("always"));
}

TEST(the_value_is_read_in_any_case)
{
	struct pair p;

	drives("NeVeR");
	ASSERT_EQ(0, pair_open(&p, 0, 1, 1));
	EXPECT_FALSE(wait_with_late_peer(_metadata, &p));
	pair_close(&p);
	drives(NULL);
}

TEST(a_bad_value_is_warned_about_and_means_auto)
{
	struct pair p;

	drives("sometimes");
	capture_start();
	ASSERT_EQ(0, pair_open(&p, 0, 1, 1));
	capture_stop();
	/* Read once per group: one line per group created. */
	EXPECT_EQ(2, capture_count("NPROXY_CALLER_DRIVES=\"sometimes\": unknown value, using auto",
				   1));
	/* Still a working group, with auto's rule: two comms, the worker's. */
	EXPECT_FALSE(wait_with_late_peer(_metadata, &p));
	pair_close(&p);

	/* Read at group creation only: a later change does not touch a live group. */
	drives("never");
	ASSERT_EQ(0, pair_open(&p, 0, 1, 1));
	drives("always");
	EXPECT_FALSE(wait_with_late_peer(_metadata, &p));
	pair_close(&p);
	drives(NULL);
}

TEST_HARNESS_MAIN
