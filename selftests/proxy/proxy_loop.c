// SPDX-License-Identifier: GPL-2.0
/*
 * The worker loop and the status channel: DONE is recycled and never
 * stepped again, IDLE stays active, the worker sleeps only on quiescence,
 * status is published before the task is queued, an abort drops a comm's
 * tasks and status nodes, check/wait semantics and
 * the reference runtime's (libnrt's) watchdog messages.
 */
#include "kselftest_harness.h"
#include "proxy_test_util.h"

/* A one-rank comm without network (skip policy) on device dev; its op waits on one trigger word. */
struct skip_rank {
	struct nproxy_comm_opts o;
	uint32_t trig;
	volatile uint32_t *words[1];
	struct nproxy_cc_op op;
};

static void skip_rank_init(struct skip_rank *k, uint32_t dev, uint32_t trig)
{
	k->o = comm_opts(0, 1, dev, 1, NPROXY_COMM_F_SKIP_NET, NULL);
	k->trig = trig;
	k->words[0] = &k->trig;
	k->op = cc_op(1, k->words, NULL, 0);
}

TEST(done_task_is_recycled_and_never_stepped_again)
{
	struct skip_rank k;
	struct nproxy_proxy_stats st;
	struct nproxy_comm *c;
	uint64_t ctx;

	skip_rank_init(&k, 0, 0);
	capture_start();
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&k.o, &c));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &k.op, 1, &ctx));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c, ctx, NPROXY_TASK_NETWORK, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c, ctx, NPROXY_TASK_BARRIER, 10000));
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).tasks_done == 2, 10000));
	/*
	 * Exactly two steps: network INIT -> DONE (skip policy); barrier
	 * INIT (gate open, arrive, tested at once) -> DONE.  A DONE task
	 * stepped again would make it three.
	 */
	st = group_stats(0);
	EXPECT_EQ(2u, st.steps);
	sleep_ms(50);
	st = group_stats(0);
	EXPECT_EQ(2u, st.steps);
	EXPECT_EQ(0u, st.tasks_active);
	EXPECT_EQ(0, capture_count("Task shouldn't be polled after it reached a done state", 1));
	nproxy_comm_close(c);
	capture_stop();
}

TEST(idle_task_stays_active_until_its_peer_arrives)
{
	struct nproxy_loopback_fabric *f;
	struct lb_rank r0, r1;
	struct nproxy_comm_opts o0, o1;
	struct nproxy_comm *c0, *c1;
	struct nproxy_cc_op op0, op1;
	enum nproxy_status st;
	uint64_t ctx0, ctx1, cv0, t0;
	bool done;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_loopback_fabric_create(2, &f));
	ASSERT_EQ(0, lb_rank_setup(&r0, f, 0, 1, 64));
	ASSERT_EQ(0, lb_rank_setup(&r1, f, 1, 0, 64));
	o0 = comm_opts(0, 2, 0, 2, 0, r0.lb);
	o1 = comm_opts(1, 2, 1, 2, 0, r1.lb);	/* device 1 / 2 -> the same group */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o0, &c0));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o1, &c1));
	EXPECT_EQ(1, count_proxy_threads(NULL));

	op0 = lb_rank_op(&r0);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c0, &op0, 1, &ctx0));
	/* Rank 1 has not posted: rank 0's recv and barrier stay IDLE, ticking. */
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).idle_ticks > 200, 10000));
	cv0 = group_stats(0).cv_waits;
	EXPECT_EQ(2u, group_stats(0).tasks_active);
	EXPECT_EQ(0u, group_stats(0).tasks_done);
	EXPECT_ST(NPROXY_SUCCESS, nproxy_check_status(c0, ctx0, NPROXY_TASK_NETWORK, &done, &st));
	EXPECT_FALSE(done);
	/* Not asleep while tasks are in flight: ticks keep coming, no cv wait. */
	t0 = group_stats(0).ticks;
	EXPECT_TRUE(WAIT_UNTIL(group_stats(0).ticks > t0 + 1000, 10000));
	EXPECT_EQ(cv0, group_stats(0).cv_waits);

	op1 = lb_rank_op(&r1);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c1, &op1, 1, &ctx1));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c0, ctx0, NPROXY_TASK_NETWORK, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c1, ctx1, NPROXY_TASK_NETWORK, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c0, ctx0, NPROXY_TASK_BARRIER, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c1, ctx1, NPROXY_TASK_BARRIER, 10000));
	EXPECT_TRUE(lb_rank_got(&r0, 1, 64));
	EXPECT_TRUE(lb_rank_got(&r1, 0, 64));
	EXPECT_EQ(1u, r0.sems[0]);	/* recv completion back-edge */
	EXPECT_EQ(1u, r1.sems[0]);
	nproxy_comm_close(c0);
	nproxy_comm_close(c1);
	nproxy_loopback_destroy(r0.lb);
	nproxy_loopback_destroy(r1.lb);
	nproxy_loopback_fabric_destroy(f);
}

TEST(worker_sleeps_on_cv_only_when_nothing_is_active_or_queued)
{
	struct skip_rank k;
	struct nproxy_proxy_stats a, b;
	uint64_t cpu0, cpu1, ctx;
	struct nproxy_comm *c;
	int tid;

	skip_rank_init(&k, 0, 0);
	k.o.idle_policy = NPROXY_IDLE_SPIN;	/* the policy that would burn a core */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&k.o, &c));
	tid = nproxy_comm_worker_tid(c);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &k.op, 1, &ctx));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c, ctx, NPROXY_TASK_BARRIER, 10000));
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).tasks_done == 2 && group_stats(0).cv_waits >= 2,
			       10000));
	a = group_stats(0);
	cpu0 = thread_cpu_ns(tid);
	ASSERT_GT(cpu0, 0u);
	sleep_ms(300);
	b = group_stats(0);
	cpu1 = thread_cpu_ns(tid);
	/* Asleep: at most one safety-timeout wakeup, and (almost) no CPU. */
	EXPECT_LE(b.ticks - a.ticks, 1u);
	EXPECT_LT(cpu1 - cpu0, 30000000u);
	/* An append wakes it at once (not after the safety timeout). */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &k.op, 2, &ctx));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c, ctx, NPROXY_TASK_BARRIER, 10000));
	nproxy_comm_close(c);
}

/* A seam whose start() blocks until released: holds the worker mid-step. */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int hold_entered, hold_released;

static enum nproxy_status hold_start(void *e, uint32_t s, uint32_t bb,
				     const struct nproxy_fifo_set *f,
				     const struct nproxy_device_sems *d)
{
	pthread_mutex_lock(&hold_lock);
	hold_entered = 1;
	pthread_cond_broadcast(&hold_cv);
	while (!hold_released)
		pthread_cond_wait(&hold_cv, &hold_lock);
	pthread_mutex_unlock(&hold_lock);
	return NPROXY_SUCCESS;
}

static enum nproxy_status hold_progress(void *e, uint32_t s, uint32_t bb, bool *idle,
					bool *block_done, bool *done)
{
	*idle = false;
	*block_done = *done = true;
	return NPROXY_SUCCESS;
}

static enum nproxy_status hold_stop(void *e, uint32_t s, uint32_t bb)
{
	return NPROXY_SUCCESS;
}

static const struct nproxy_seam_ops hold_ops = {
	.name = "hold", .start = hold_start, .progress = hold_progress, .stop = hold_stop,
};

struct enq_args {
	struct nproxy_comm *c;
	struct nproxy_cc_op *op;
	uint64_t ctx;
	int returned;
};

static void *enq_thread(void *arg)
{
	struct enq_args *a = arg;

	nproxy_enq_proxy_tasks(a->c, a->op, 2, &a->ctx);
	__atomic_store_n(&a->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

TEST(status_is_published_before_the_task_is_queued)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 0, 1, 0, NULL);
	struct nproxy_fifo_set fs = { 0 };
	uint32_t trig = 0;
	volatile uint32_t *words[1] = { &trig };
	struct nproxy_cc_op op1 = cc_op(1, words, NULL, 0), op2;
	struct enq_args a1 = { 0 }, a2 = { 0 };
	enum nproxy_status st;
	struct nproxy_comm *c;
	pthread_t th1, th2;
	bool done = true;

	o.seam.ops = &hold_ops;
	op1.streams[0].blocks = &fs;
	op1.streams[0].n_blocks = 1;
	op2 = op1;
	op2.ctx = 777;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	/* op1's network task enters start() and holds the worker (and its work lock). */
	a1.c = c;
	a1.op = &op1;
	ASSERT_EQ(0, pthread_create(&th1, NULL, enq_thread, &a1));
	pthread_mutex_lock(&hold_lock);
	while (!hold_entered)
		pthread_cond_wait(&hold_cv, &hold_lock);
	pthread_mutex_unlock(&hold_lock);

	a2.c = c;
	a2.op = &op2;
	ASSERT_EQ(0, pthread_create(&th2, NULL, enq_thread, &a2));
	/*
	 * The producer never waits for the worker (it pushes without the work
	 * lock), and when enqueue returns the status is visible although the
	 * held worker has not stepped the task.
	 */
	ASSERT_TRUE(WAIT_UNTIL(__atomic_load_n(&a2.returned, __ATOMIC_ACQUIRE), 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_check_status(c, 777, NPROXY_TASK_NETWORK, &done, &st));
	EXPECT_FALSE(done);
	EXPECT_ST(NPROXY_SUCCESS, st);
	pthread_mutex_lock(&hold_lock);
	EXPECT_EQ(1, hold_entered);	/* still inside op1's start() */
	EXPECT_EQ(0, hold_released);
	pthread_mutex_unlock(&hold_lock);

	pthread_mutex_lock(&hold_lock);
	hold_released = 1;
	pthread_cond_broadcast(&hold_cv);
	pthread_mutex_unlock(&hold_lock);
	pthread_join(th1, NULL);
	pthread_join(th2, NULL);
	EXPECT_EQ(777u, a2.ctx);
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c, 777, NPROXY_TASK_NETWORK, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c, a1.ctx, NPROXY_TASK_NETWORK, 10000));
	nproxy_comm_close(c);
}

TEST(check_status_erases_when_done_and_fails_when_unknown)
{
	struct skip_rank k;
	enum nproxy_status st;
	struct nproxy_comm *c, *other;
	bool done;

	skip_rank_init(&k, 0, NPROXY_PROXY_TRIGGER_SENTINEL);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&k.o, &c));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&k.o, &other));
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(c, 42, NPROXY_TASK_NETWORK, &done, &st));
	/* The text is this thread's, for the comm that failed only. */
	EXPECT_NE(NULL, strstr(nproxy_comm_strerror(c), "no NETWORK task with ctx 42"));
	EXPECT_STREQ("", nproxy_comm_strerror(other));
	k.op.ctx = 42;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &k.op, 1, NULL));
	/* A live ctx cannot be reused. */
	capture_start();
	EXPECT_ST(NPROXY_BUSY, nproxy_enq_proxy_tasks(c, &k.op, 1, NULL));
	capture_stop();
	/* Same ctx, other comm of the same group: not its task. */
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(other, 42, NPROXY_TASK_NETWORK, &done, &st));
	/* Network task (skip policy) finishes; barrier waits on the closed gate. */
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c, 42, NPROXY_TASK_NETWORK, 10000));
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(c, 42, NPROXY_TASK_NETWORK, &done, &st));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_check_status(c, 42, NPROXY_TASK_BARRIER, &done, &st));
	EXPECT_FALSE(done);
	/* Not done: not erased. */
	EXPECT_ST(NPROXY_SUCCESS, nproxy_check_status(c, 42, NPROXY_TASK_BARRIER, &done, &st));
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(c, 42, NPROXY_TASK_UNKNOWN, &done, &st));
	nproxy_trigger_store(&k.trig, 1);
	ASSERT_TRUE(WAIT_UNTIL(nproxy_check_status(c, 42, NPROXY_TASK_BARRIER, &done, &st) ==
			       NPROXY_SUCCESS && done, 10000));
	EXPECT_ST(NPROXY_SUCCESS, st);
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(c, 42, NPROXY_TASK_BARRIER, &done, &st));
	nproxy_comm_close(other);
	nproxy_comm_close(c);
}

/* check, await and wait are one wait (status_wait) with three ways to answer. */
TEST(the_three_status_names_give_one_answer)
{
	enum nproxy_status st = NPROXY_FAILURE;
	struct skip_rank k;
	struct nproxy_comm *c;
	bool done = true;
	uint64_t ctx;

	skip_rank_init(&k, 5, NPROXY_PROXY_TRIGGER_SENTINEL);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&k.o, &c));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &k.op, 1, &ctx));
	/* Not done (the barrier waits on the trigger): "not yet" three ways. */
	EXPECT_ST(NPROXY_SUCCESS, nproxy_check_status(c, ctx, NPROXY_TASK_BARRIER, &done, &st));
	EXPECT_FALSE(done);
	done = true;
	EXPECT_ST(NPROXY_SUCCESS, nproxy_await_status(c, ctx, NPROXY_TASK_BARRIER, 20, &done, &st));
	EXPECT_FALSE(done);
	capture_start();
	EXPECT_ST(NPROXY_TIMEOUT, nproxy_wait_status(c, ctx, NPROXY_TASK_BARRIER, 20));
	EXPECT_EQ(1, capture_count("Timeout exceeded: Waiting on proxy task type 2", 0));
	capture_stop();
	EXPECT_NE(NULL, strstr(nproxy_comm_strerror(c), "not done after 20 ms"));
	/* None of them consumed it. */
	EXPECT_ST(NPROXY_SUCCESS, nproxy_check_status(c, ctx, NPROXY_TASK_BARRIER, &done, &st));
	EXPECT_FALSE(done);
	/* Done: the first to look consumes it, the others find nothing. */
	nproxy_trigger_store(&k.trig, 1);
	EXPECT_ST(NPROXY_SUCCESS, nproxy_await_status(c, ctx, NPROXY_TASK_BARRIER, 10000, &done, &st));
	EXPECT_TRUE(done);
	EXPECT_ST(NPROXY_SUCCESS, st);
	capture_start();
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(c, ctx, NPROXY_TASK_BARRIER, &done, &st));
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_await_status(c, ctx, NPROXY_TASK_BARRIER, 20, &done, &st));
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_wait_status(c, ctx, NPROXY_TASK_BARRIER, 20));
	/* An answer a poll expects: kept for strerror, not logged. */
	EXPECT_EQ(0, capture_count("task with ctx", 0));
	capture_stop();
	EXPECT_NE(NULL, strstr(nproxy_comm_strerror(c), "no BARRIER task with ctx"));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(c, ctx, NPROXY_TASK_NETWORK, 10000));
	/* Bad arguments, the same three ways. */
	EXPECT_ST(NPROXY_INVALID, nproxy_check_status(NULL, ctx, NPROXY_TASK_BARRIER, &done, &st));
	EXPECT_ST(NPROXY_INVALID, nproxy_await_status(NULL, ctx, NPROXY_TASK_BARRIER, 0, &done, &st));
	EXPECT_ST(NPROXY_INVALID, nproxy_await_status(c, ctx, NPROXY_TASK_BARRIER, 0, NULL, &st));
	EXPECT_ST(NPROXY_INVALID, nproxy_wait_status(NULL, ctx, NPROXY_TASK_BARRIER, 0));
	nproxy_comm_close(c);
}

TEST(wait_timeout_logs_the_watchdog_message)
{
	struct skip_rank k;
	struct nproxy_comm *c;
	uint64_t ctx;

	skip_rank_init(&k, 7, NPROXY_PROXY_TRIGGER_SENTINEL);
	capture_start();
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&k.o, &c));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &k.op, 1, &ctx));
	EXPECT_ST(NPROXY_TIMEOUT, nproxy_wait_status(c, ctx, NPROXY_TASK_BARRIER, 100));
	EXPECT_EQ(1, capture_count(
		"[nec_dev 7 gid 7] Timeout exceeded: Waiting on proxy task type 2: 1 sec "
		"(who waits for whom: nproxyctl hang-report)", 1));
	nproxy_comm_close(c);	/* aborts the waiting barrier task */
	capture_stop();
}

TEST(wait_reports_a_failed_task_with_the_reference_message)
{
	struct nproxy_loopback_fabric *f;
	struct nproxy_loopback_counters lc;
	struct nproxy_comm_opts o;
	struct nproxy_cc_op op;
	struct nproxy_comm *c;
	struct lb_rank r;
	uint64_t ctx;
	char want[128];

	ASSERT_ST(NPROXY_SUCCESS, nproxy_loopback_fabric_create(1, &f));
	ASSERT_EQ(0, lb_rank_setup(&r, f, 0, 0, 16));
	o = comm_opts(0, 1, 3, 1, 0, r.lb);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	nproxy_loopback_fail_next_progress(r.lb, NPROXY_NET_ERROR);
	op = lb_rank_op(&r);
	capture_start();
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &op, 1, &ctx));
	EXPECT_ST(NPROXY_NET_ERROR, nproxy_wait_status(c, ctx, NPROXY_TASK_NETWORK, 10000));
	snprintf(want, sizeof(want), "[nec_dev 3 gid 3] Proxy failed to execute task, status = %d",
		 NPROXY_NET_ERROR);
	EXPECT_EQ(1, capture_count(want, 1));
	capture_stop();
	/* The failed task stopped the block it had started. */
	nproxy_loopback_counters(r.lb, &lc);
	EXPECT_EQ(0u, lc.blocks_live);
	EXPECT_EQ(lc.starts, lc.stops);
	EXPECT_EQ(0u, lc.misuse);
	nproxy_comm_close(c);
	nproxy_loopback_destroy(r.lb);
	nproxy_loopback_fabric_destroy(f);
}

TEST(comm_free_aborts_in_flight_tasks)
{
	struct nproxy_loopback_fabric *f;
	struct nproxy_loopback_counters lc;
	struct nproxy_comm_opts o, o2;
	struct nproxy_comm *c, *keep;
	struct nproxy_cc_op op;
	struct lb_rank r;
	uint64_t ctx;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_loopback_fabric_create(2, &f));
	ASSERT_EQ(0, lb_rank_setup(&r, f, 0, 1, 16));	/* peer 1 never shows up */
	o = comm_opts(0, 2, 0, 1, 0, r.lb);
	o2 = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_SKIP_NET, NULL);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o2, &keep));	/* keeps the group alive */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	op = lb_rank_op(&r);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &op, 1, &ctx));
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).idle_ticks > 10, 10000));
	nproxy_comm_close(c);
	EXPECT_TRUE(WAIT_UNTIL(group_stats(0).tasks_active == 0, 10000));
	nproxy_loopback_counters(r.lb, &lc);
	EXPECT_EQ(0u, lc.blocks_live);		/* the started block was stopped */
	EXPECT_EQ(0u, lc.misuse);
	EXPECT_EQ(1u, nproxy_proxy_group_refcnt(0));
	nproxy_comm_close(keep);
	nproxy_loopback_destroy(r.lb);
	nproxy_loopback_fabric_destroy(f);
}

/* nproxy_comm_abort(): the comm's tasks are stopped and their status nodes
 * dropped (a check finds no such task); the comm stays open. */
TEST(comm_abort_drops_the_tasks_status_nodes)
{
	struct nproxy_loopback_fabric *f;
	struct nproxy_loopback_counters lc;
	struct nproxy_comm_opts o;
	struct nproxy_comm *c;
	struct nproxy_cc_op op;
	enum nproxy_status st;
	struct lb_rank r;
	uint64_t ctx;
	bool done;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_loopback_fabric_create(2, &f));
	ASSERT_EQ(0, lb_rank_setup(&r, f, 0, 1, 16));	/* peer 1 never shows up */
	o = comm_opts(0, 2, 0, 1, 0, r.lb);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	op = lb_rank_op(&r);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &op, 1, &ctx));
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).idle_ticks > 10, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_check_status(c, ctx, NPROXY_TASK_NETWORK, &done, &st));
	nproxy_comm_abort(c);
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(c, ctx, NPROXY_TASK_NETWORK, &done, &st));
	EXPECT_ST(NPROXY_NOT_FOUND, nproxy_check_status(c, ctx, NPROXY_TASK_BARRIER, &done, &st));
	EXPECT_TRUE(WAIT_UNTIL(group_stats(0).tasks_active == 0, 10000));
	nproxy_loopback_counters(r.lb, &lc);
	EXPECT_EQ(0u, lc.blocks_live);		/* the started block was stopped */
	EXPECT_EQ(1u, nproxy_proxy_group_refcnt(0));	/* the comm is still open */
	nproxy_comm_close(c);
	nproxy_loopback_destroy(r.lb);
	nproxy_loopback_fabric_destroy(f);
}

static enum nproxy_idle_policy policy_of_new_group(void)
{
	struct nproxy_comm_opts o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_SKIP_NET, NULL);
	enum nproxy_idle_policy p;
	struct nproxy_comm *c;

	o.idle_policy = NPROXY_IDLE_DEFAULT;
	if (nproxy_comm_open(&o, &c))
		return (enum nproxy_idle_policy)-1;
	p = group_stats(0).idle_policy;
	nproxy_comm_close(c);
	return p;
}

TEST(default_idle_policy_follows_the_environment)
{
	unsetenv("NPROXY_IDLE_POLICY");
	unsetenv("NPROXY_ONE_THREAD_PER_CORE");
	/* Spin, then park on what ends the idleness. */
	EXPECT_ST(NPROXY_IDLE_ADAPTIVE, policy_of_new_group());
	setenv("NPROXY_ONE_THREAD_PER_CORE", "1", 1);
	/* The reference runtime's dedicated-core rule. */
	EXPECT_ST(NPROXY_IDLE_SPIN, policy_of_new_group());
	setenv("NPROXY_IDLE_POLICY", "adaptive", 1);
	EXPECT_ST(NPROXY_IDLE_ADAPTIVE, policy_of_new_group());
	setenv("NPROXY_IDLE_POLICY", "yield", 1);
	EXPECT_ST(NPROXY_IDLE_YIELD, policy_of_new_group());
	setenv("NPROXY_IDLE_POLICY", "adaptive-yield", 1);
	EXPECT_ST(NPROXY_IDLE_ADAPTIVE_YIELD, policy_of_new_group());
	unsetenv("NPROXY_IDLE_POLICY");
	unsetenv("NPROXY_ONE_THREAD_PER_CORE");
}

TEST(adaptive_policy_sleeps_between_idle_ticks)
{
	struct nproxy_loopback_fabric *f;
	struct nproxy_comm_opts o;
	struct nproxy_cc_op op;
	struct nproxy_comm *c;
	struct lb_rank r;
	uint64_t t0, ticks0, ticks1, elapsed_ns;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_loopback_fabric_create(2, &f));
	ASSERT_EQ(0, lb_rank_setup(&r, f, 0, 1, 16));	/* peer 1 never posts: IDLE forever */
	o = comm_opts(0, 2, 0, 1, 0, r.lb);
	o.idle_policy = NPROXY_IDLE_ADAPTIVE;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &c));
	op = lb_rank_op(&r);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(c, &op, 1, NULL));
	/* Past the spin (256) and yield (256) phases: every idle tick now sleeps >= 50 us. */
	ASSERT_TRUE(WAIT_UNTIL(group_stats(0).idle_ticks > 600, 10000));
	ticks0 = group_stats(0).ticks;
	t0 = now_ns();
	sleep_ms(200);
	ticks1 = group_stats(0).ticks;
	elapsed_ns = now_ns() - t0;
	/* nanosleep never returns early: at most one tick per 50 us (+1 in flight). */
	EXPECT_LE(ticks1 - ticks0, elapsed_ns / 50000 + 1);
	EXPECT_GT(ticks1, ticks0);	/* still ticking: not asleep on the cv */
	nproxy_comm_close(c);
	nproxy_loopback_destroy(r.lb);
	nproxy_loopback_fabric_destroy(f);
}

TEST_HARNESS_MAIN
