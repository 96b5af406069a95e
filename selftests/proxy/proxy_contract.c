// SPDX-License-Identifier: GPL-2.0
/*
 * Points of the reference runtime's contract that no other test would see
 * broken, each found by breaking lib/ on purpose (scripts/mutation-regression.txt):
 * the run-state numbers, the order in which a task's status is published,
 * affinity applied on the create path only, destroy waking a parked worker,
 * the last release joining the worker before it returns, and the debug
 * line a starting barrier task logs.
 */
#include <errno.h>
#include <sched.h>
#include "kselftest_harness.h"
#include "proxy_test_util.h"
#include "futex_spy.h"

/* The reference runtime's proxy_task_run_state_t: the numbers are ABI. */
_Static_assert(NPROXY_TASK_STATE_INIT == 0, "INIT is 0");
_Static_assert(NPROXY_TASK_STATE_PROGRESSING == 1, "PROGRESSING is 1");
_Static_assert(NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER == 2, "WAITING_DEVICE_TRIGGER is 2");
_Static_assert(NPROXY_TASK_STATE_IDLE == 3, "IDLE is 3");
_Static_assert(NPROXY_TASK_STATE_DONE == 4, "DONE is 4");
_Static_assert(NPROXY_TASK_UNKNOWN == 0 && NPROXY_TASK_NETWORK == 1 && NPROXY_TASK_BARRIER == 2,
	       "task types UNKNOWN 0, NETWORK 1, BARRIER 2");

#define SENTINEL NPROXY_PROXY_TRIGGER_SENTINEL

/* /proc/self/task/<tid>/stat: state letter and flags; -1 when the thread is gone. */
static int thread_stat(int tid, char *state, unsigned long *flags)
{
	char path[64], buf[1024], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	/* after "comm)": state ppid pgrp session tty_nr tpgid flags */
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", state, flags) != 2)
		return -1;
	return 0;
}

#define PF_EXITING_FLAG 0x4ul	/* include/linux/sched.h: set first thing in do_exit() */

static void open_gate(struct lb_comm *g)
{
	__atomic_store_n(&g->r.trig[0], 0u, __ATOMIC_RELEASE);
}

/* A consumer parked in nproxy_wait_status, and what the spy saw it wait on. */
static int consumer_tid;
static uint32_t consumer_parked_on = UINT32_MAX;
static uint32_t consumer_parks;

struct consumer {
	pthread_t thread;
	struct lb_comm *g;
	enum nproxy_status rc;
};

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;

	__atomic_store_n(&consumer_tid, (int)gettid(), __ATOMIC_RELEASE);
	c->rc = nproxy_wait_status(c->g->c, c->g->ctx, NPROXY_TASK_NETWORK, 20000);
	return NULL;
}

static void spy_consumer_wait(uint32_t *word, int op, uint32_t val)
{
	if (op != FUTEX_WAIT || (int)gettid() != __atomic_load_n(&consumer_tid, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&consumer_parked_on, val, __ATOMIC_RELEASE);
	__atomic_add_fetch(&consumer_parks, 1, __ATOMIC_RELEASE);
}

/*
 * The numbers a consumer actually sees: parked on a task held at its
 * trigger gate, it waits on the value 2 (WAITING_DEVICE_TRIGGER), and the
 * worker wakes it with 4 (DONE) in the word.
 */
static uint32_t done_word_value = UINT32_MAX;
static int worker_tid_for_spy;

static void spy_worker_wake(uint32_t *word, int op, uint32_t val)
{
	if (op != FUTEX_WAKE || (int)gettid() != __atomic_load_n(&worker_tid_for_spy, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&done_word_value, __atomic_load_n(word, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
}

static void spy_both(uint32_t *word, int op, uint32_t val)
{
	spy_consumer_wait(word, op, val);
	spy_worker_wake(word, op, val);
}

/*
 * The two tests below watch the worker wake a consumer parked on the status
 * word: a consumer that drives the group itself (NPROXY_CALLER_DRIVES,
 * proxy_caller_drive.c) parks on neither.
 */
TEST(published_run_state_numbers_are_the_reference_runtimes)
{
	struct consumer cons = { 0 };
	struct lb_comm g;

	setenv("NPROXY_CALLER_DRIVES", "never", 1);
	ASSERT_EQ(0, gated_start(&g, NULL, 1, 0));
	unsetenv("NPROXY_CALLER_DRIVES");
	__atomic_store_n(&worker_tid_for_spy, nproxy_comm_worker_tid(g.c), __ATOMIC_RELEASE);
	/* The worker has stepped the task into its gate wait. */
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).steps >= 2, 10000));
	futex_spy_set(spy_both, NULL);
	cons.g = &g;
	ASSERT_EQ(0, pthread_create(&cons.thread, NULL, consumer_main, &cons));
	ASSERT_TRUE(WAIT_UNTIL(__atomic_load_n(&consumer_parks, __ATOMIC_ACQUIRE) >= 1, 10000));
	EXPECT_EQ(2u, __atomic_load_n(&consumer_parked_on, __ATOMIC_ACQUIRE));
	open_gate(&g);
	pthread_join(cons.thread, NULL);
	futex_spy_set(NULL, NULL);
	EXPECT_ST(NPROXY_SUCCESS, cons.rc);
	EXPECT_EQ(4u, __atomic_load_n(&done_word_value, __ATOMIC_ACQUIRE));
	lb_comm_close(&g);
}

/*
 * progress_status is published before run_state: a consumer that sees DONE
 * sees the status that goes with it.  The worker's wake of a parked
 * consumer is held back for a while (it comes right after the run_state
 * store), and a second consumer polls meanwhile: if DONE were visible
 * before the status, it would read the stale NPROXY_SUCCESS.
 */
#define HOLD_WAKE_MS 100

static void spy_hold_done_wake(uint32_t *word, int op, uint32_t val)
{
	if (op != FUTEX_WAKE || (int)gettid() != __atomic_load_n(&worker_tid_for_spy, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(word, __ATOMIC_ACQUIRE) != NPROXY_TASK_STATE_DONE)
		return;
	sleep_ms(HOLD_WAKE_MS);
}

static void spy_hold_and_count(uint32_t *word, int op, uint32_t val)
{
	spy_consumer_wait(word, op, val);
	spy_hold_done_wake(word, op, val);
}

TEST(a_consumer_that_sees_done_sees_the_status_published_with_it)
{
	struct consumer cons = { 0 };
	enum nproxy_status st = NPROXY_SUCCESS;
	struct lb_comm g;
	uint64_t polls = 0;
	bool done = false;

	setenv("NPROXY_CALLER_DRIVES", "never", 1);
	ASSERT_EQ(0, gated_start(&g, NULL, 1, 0));
	unsetenv("NPROXY_CALLER_DRIVES");
	__atomic_store_n(&worker_tid_for_spy, nproxy_comm_worker_tid(g.c), __ATOMIC_RELEASE);
	nproxy_loopback_fail_next_progress(g.r.lb, NPROXY_PEER_DEAD);
	futex_spy_set(spy_hold_and_count, NULL);
	cons.g = &g;
	ASSERT_EQ(0, pthread_create(&cons.thread, NULL, consumer_main, &cons));
	/* A parked consumer makes the worker's DONE publish issue a wake. */
	ASSERT_TRUE(WAIT_UNTIL(__atomic_load_n(&consumer_parks, __ATOMIC_ACQUIRE) >= 1, 10000));
	capture_start();
	open_gate(&g);
	{
		uint64_t deadline = now_ns() + 20000000000ull;

		while (!done && now_ns() < deadline) {
			/* FAILURE: the parked consumer was woken first and took it. */
			if (nproxy_check_status(g.c, g.ctx, NPROXY_TASK_NETWORK, &done, &st))
				break;
			polls++;
			if (!done)
				sched_yield();
		}
	}
	capture_stop();
	pthread_join(cons.thread, NULL);
	futex_spy_set(NULL, NULL);
	if (done) {
		TH_LOG("DONE seen by the poller after %llu polls", (unsigned long long)polls);
		EXPECT_ST(NPROXY_PEER_DEAD, st);
		/* The parked consumer found the status already taken by the poller. */
		EXPECT_ST(NPROXY_NOT_FOUND, cons.rc);
	} else {
		/* The host was too busy to poll within HOLD_WAKE_MS: weaker check. */
		TH_LOG("the poller missed the held wake; the parked consumer took DONE");
		EXPECT_ST(NPROXY_PEER_DEAD, cons.rc);
	}
	lb_comm_close(&g);
}

/* The worker's allowed CPUs. */
static int worker_cpus(int tid, cpu_set_t *set)
{
	CPU_ZERO(set);
	return sched_getaffinity(tid, sizeof(*set), set);
}

TEST(affinity_is_applied_when_the_group_is_created_not_when_a_comm_joins)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_SKIP_NET, NULL);
	struct nproxy_comm *first, *joiner;
	cpu_set_t mine, w, want;
	int cpu_a = -1, cpu_b = -1, i;
	char list[16];

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(mine), &mine));
	for (i = 0; i < CPU_SETSIZE && cpu_b < 0; i++) {
		if (!CPU_ISSET(i, &mine))
			continue;
		if (cpu_a < 0)
			cpu_a = i;
		else
			cpu_b = i;
	}
	if (cpu_b < 0)
		SKIP(return, "one CPU allowed: cannot tell two placements apart");
	snprintf(list, sizeof(list), "%d", cpu_a);
	setenv("NPROXY_PROXY_CPUSET", list, 1);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &first));
	/* A later comm of the same group comes with another placement. */
	snprintf(list, sizeof(list), "%d", cpu_b);
	setenv("NPROXY_PROXY_CPUSET", list, 1);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &joiner));
	unsetenv("NPROXY_PROXY_CPUSET");
	EXPECT_EQ(2u, nproxy_proxy_group_refcnt(0));
	ASSERT_EQ(nproxy_comm_worker_tid(first), nproxy_comm_worker_tid(joiner));
	ASSERT_EQ(0, worker_cpus(nproxy_comm_worker_tid(first), &w));
	CPU_ZERO(&want);
	CPU_SET(cpu_a, &want);
	EXPECT_TRUE(CPU_EQUAL(&want, &w));
	nproxy_comm_close(joiner);
	nproxy_comm_close(first);
}

/* The worker of gid is parked on its queue (nothing queued or active). */
static int worker_parked(int tid)
{
	unsigned long flags;
	char state;

	return !thread_stat(tid, &state, &flags) && state == 'S';
}

/*
 * Freeing the last comm of a group wakes the worker parked on the queue:
 * it must not wait for the park's safety timeout (1 s) to see stop.  The
 * bound is generous (half of that timeout, and the best of three tries):
 * a free that relies on the timeout takes nearly the whole second every
 * time.
 */
#define DESTROY_BOUND_MS 500

TEST(last_release_wakes_a_parked_worker_at_once)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 7, 1, NPROXY_COMM_F_SKIP_NET, NULL);
	uint64_t best = UINT64_MAX;
	int i;

	for (i = 0; i < 3; i++) {
		struct nproxy_comm *c;
		uint64_t t0, took;
		int tid;

		ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
		tid = nproxy_comm_worker_tid(c);
		ASSERT_TRUE(WAIT_UNTIL(group_stats(7).cv_waits >= 1 && worker_parked(tid), 10000));
		t0 = now_ns();
		nproxy_comm_close(c);
		took = now_ns() - t0;
		TH_LOG("free with the worker parked: %llu us", (unsigned long long)took / 1000);
		if (took < best)
			best = took;
	}
	EXPECT_LT(best, DESTROY_BOUND_MS * 1000000ull);
}

/*
 * When the last nproxy_comm_close() returns, the group's worker has been
 * joined: its thread is gone or already inside do_exit() (PF_EXITING;
 * the kernel wakes the joiner from there).  The worker is made the
 * lowest-priority thread on the caller's CPU, so a worker merely told to
 * stop has not run yet when the free returns.
 */
TEST(last_release_returns_with_the_worker_joined)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 9, 1, NPROXY_COMM_F_SKIP_NET, NULL);
	struct sched_param idle = { .sched_priority = 0 };
	cpu_set_t mine, one;
	int cpu, i;

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(mine), &mine));
	for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mine); cpu++)
		;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(one), &one));
	for (i = 0; i < 10; i++) {
		unsigned long flags = 0;
		struct nproxy_comm *c;
		char state = '?';
		int tid;

		ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
		tid = nproxy_comm_worker_tid(c);
		ASSERT_TRUE(WAIT_UNTIL(group_stats(9).cv_waits >= 1 && worker_parked(tid), 10000));
		ASSERT_EQ(0, sched_setaffinity(tid, sizeof(one), &one));
		ASSERT_EQ(0, sched_setscheduler(tid, SCHED_IDLE, &idle));
		nproxy_comm_close(c);
		if (thread_stat(tid, &state, &flags) == 0 && !(flags & PF_EXITING_FLAG)) {
			TH_LOG("round %d: worker %d still running (state %c) after the last free",
			       i, tid, state);
			ASSERT_TRUE(false);
		}
	}
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(mine), &mine));
	EXPECT_TRUE(WAIT_UNTIL(count_proxy_threads(NULL) == 0, 5000));
}

/*
 * The reference runtime's debug line when a barrier task starts ("[nec_dev
 * D] run barrier proxy task for ctx C"): its users grep their logs for it.
 * Logged once per task, at DEBUG (a sink sees every level: it counts the
 * line's level itself).
 */
static struct {
	pthread_mutex_t lock;
	char want[96];
	uint32_t seen, seen_debug;
} log_rec = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void record_log(enum nproxy_log_level level, const char *msg, void *arg)
{
	pthread_mutex_lock(&log_rec.lock);
	if (log_rec.want[0] && strstr(msg, log_rec.want)) {
		log_rec.seen++;
		log_rec.seen_debug += level == NPROXY_LOG_DEBUG;
	}
	pthread_mutex_unlock(&log_rec.lock);
}

TEST(a_barrier_task_that_starts_logs_the_reference_runtimes_debug_line_once)
{
	struct lb_comm g;

	nproxy_log_set_sink(record_log, NULL);
	/* The gate holds the task in WAITING_DEVICE_TRIGGER: not started yet. */
	ASSERT_EQ(0, gated_start(&g, NULL, 1, 3));
	pthread_mutex_lock(&log_rec.lock);
	snprintf(log_rec.want, sizeof(log_rec.want), "[nec_dev 3] run barrier proxy task for ctx %llu",
		 (unsigned long long)g.ctx);
	pthread_mutex_unlock(&log_rec.lock);
	open_gate(&g);
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(g.c, g.ctx, NPROXY_TASK_BARRIER, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(g.c, g.ctx, NPROXY_TASK_NETWORK, 10000));
	lb_comm_close(&g);
	nproxy_log_set_sink(NULL, NULL);
	pthread_mutex_lock(&log_rec.lock);
	EXPECT_EQ(1u, log_rec.seen);
	EXPECT_EQ(1u, log_rec.seen_debug);
	pthread_mutex_unlock(&log_rec.lock);
}

TEST_HARNESS_MAIN
