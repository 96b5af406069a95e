// SPDX-License-Identifier: GPL-2.0
/*
 * The host barrier a rank hands to its comm (lib/rank/rank_barrier.c), on
 * a counting stand-in for the engine's: which barriers reach the engine,
 * under which numbers, and when a deferred one is done.  One behaviour
 * per test.  The proxy calls arrive(seq) and then test(seq) until done;
 * the collective handle marks, decides and releases.
 */
#include "kselftest_harness.h"
#include <stdlib.h>
#include "nproxy_test.h"
#include "rank/rank_internal.h"

#define MAX_SEEN 16

/* The engine's barrier, as the rank sees it: every call counted. */
static struct {
	uint64_t arrived[MAX_SEEN];	/* the numbers it was entered with */
	uint32_t n_arrived;
	uint32_t n_tests;
	uint64_t done_upto;		/* barriers <= this are complete */
} eng;

/* Atomic: a comm's worker calls these while the test thread reads (TSan). */
static enum nproxy_status eng_arrive(void *ctx, uint64_t seq)
{
	uint32_t n = __atomic_load_n(&eng.n_arrived, __ATOMIC_RELAXED);

	(void)ctx;
	if (n < MAX_SEEN)
		eng.arrived[n] = seq;
	__atomic_store_n(&eng.n_arrived, n + 1, __ATOMIC_RELEASE);
	return NPROXY_SUCCESS;
}

static enum nproxy_status eng_test(void *ctx, uint64_t seq, bool *done)
{
	(void)ctx;
	__atomic_add_fetch(&eng.n_tests, 1, __ATOMIC_RELAXED);
	*done = seq <= __atomic_load_n(&eng.done_upto, __ATOMIC_ACQUIRE);
	return NPROXY_SUCCESS;
}

static const struct nproxy_host_barrier_ops eng_ops = {
	.name = "counting engine", .arrive = eng_arrive, .test = eng_test,
};

FIXTURE(rank_barrier) {
	struct nproxy_rank r;		/* only its barrier is used; comm NULL: no kicks */
	struct nproxy_host_barrier hb;	/* what the comm gets */
	volatile uint64_t sem;
};

FIXTURE_SETUP(rank_barrier)
{
	const struct nproxy_host_barrier engine = { .ops = &eng_ops };

	memset(&eng, 0, sizeof(eng));
	memset(&self->r, 0, sizeof(self->r));
	self->sem = 0;
	npx_rank_barrier_init(&self->r.barrier, &engine, &self->hb);
	ASSERT_NE(&eng_ops, self->hb.ops);
}

FIXTURE_TEARDOWN(rank_barrier)
{
	npx_rank_barrier_destroy(&self->r.barrier);
}

/* test() once: its status, *done into done. */
static enum nproxy_status test_once(struct nproxy_host_barrier *hb, uint64_t seq, bool *done)
{
	return hb->ops->test(hb->ctx, seq, done);
}

TEST_F(rank_barrier, with_no_handle_every_barrier_runs_on_the_engine_numbered_from_1)
{
	bool done = true;

	/* The proxy's numbers need not start at 1 (a comm's earlier tasks). */
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 7));
	ASSERT_EQ(1u, eng.n_arrived);
	EXPECT_EQ(1u, eng.arrived[0]);
	EXPECT_EQ(NPROXY_SUCCESS, test_once(&self->hb, 7, &done));
	EXPECT_FALSE(done);
	eng.done_upto = 1;
	EXPECT_EQ(NPROXY_SUCCESS, test_once(&self->hb, 7, &done));
	EXPECT_TRUE(done);
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 8));
	ASSERT_EQ(2u, eng.n_arrived);
	EXPECT_EQ(2u, eng.arrived[1]);
}

TEST_F(rank_barrier, a_marked_barrier_waits_for_its_decision_without_the_engine)
{
	bool done = true;

	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	ASSERT_EQ(1u, npx_rank_barrier_mark(&self->r));
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 3));
	/* Not decided: BUSY (the proxy stops polling it), never the engine. */
	EXPECT_EQ(NPROXY_BUSY, test_once(&self->hb, 3, &done));
	EXPECT_FALSE(done);
	EXPECT_EQ(0u, eng.n_arrived);
	EXPECT_EQ(0u, eng.n_tests);
}

TEST_F(rank_barrier, a_carried_barrier_is_done_when_the_semaphore_reaches_its_value)
{
	bool done = true;

	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	npx_rank_barrier_mark(&self->r);
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 1));
	npx_rank_barrier_decide(&self->r, 1, &self->sem, 5, false);
	self->sem = 4;
	/* BUSY: only the group's own step of the next op moves the semaphore. */
	EXPECT_EQ(NPROXY_BUSY, test_once(&self->hb, 1, &done));
	EXPECT_FALSE(done);
	self->sem = 5;
	EXPECT_EQ(NPROXY_SUCCESS, test_once(&self->hb, 1, &done));
	EXPECT_TRUE(done);
	EXPECT_EQ(0u, eng.n_arrived);
}

TEST_F(rank_barrier, a_barrier_decided_to_run_enters_the_engine_with_its_own_number)
{
	bool done = true;

	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	/* Two carried, then one run: the engine sees barrier 1, not 3. */
	for (uint64_t seq = 1; seq <= 2; seq++) {
		npx_rank_barrier_mark(&self->r);
		ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, seq));
		npx_rank_barrier_decide(&self->r, seq, &self->sem, 0, false);
		ASSERT_EQ(NPROXY_SUCCESS, test_once(&self->hb, seq, &done));
		ASSERT_TRUE(done);
	}
	npx_rank_barrier_mark(&self->r);
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 3));
	npx_rank_barrier_decide(&self->r, 3, NULL, 0, false);
	EXPECT_EQ(NPROXY_SUCCESS, test_once(&self->hb, 3, &done));
	EXPECT_FALSE(done);
	ASSERT_EQ(1u, eng.n_arrived);
	EXPECT_EQ(1u, eng.arrived[0]);
	eng.done_upto = 1;
	EXPECT_EQ(NPROXY_SUCCESS, test_once(&self->hb, 3, &done));
	EXPECT_TRUE(done);
	EXPECT_EQ(1u, eng.n_arrived);	/* entered once, tested twice */
}

TEST_F(rank_barrier, each_barrier_keeps_its_own_decision_when_two_are_decided_early)
{
	bool done = false;

	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	npx_rank_barrier_mark(&self->r);
	npx_rank_barrier_mark(&self->r);
	/* Both decided before the first arrives: 1 carried, 2 run. */
	npx_rank_barrier_decide(&self->r, 1, &self->sem, 1, false);
	npx_rank_barrier_decide(&self->r, 2, NULL, 0, false);
	self->sem = 1;
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 10));
	EXPECT_EQ(NPROXY_SUCCESS, test_once(&self->hb, 10, &done));
	EXPECT_TRUE(done);
	EXPECT_EQ(0u, eng.n_arrived);
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 11));
	EXPECT_EQ(NPROXY_SUCCESS, test_once(&self->hb, 11, &done));
	EXPECT_EQ(1u, eng.n_arrived);
}

TEST_F(rank_barrier, a_barrier_with_no_mark_waiting_runs_on_the_engine_at_once)
{
	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	/* A runtime's own barrier task beside the handle's ops. */
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 1));
	EXPECT_EQ(1u, eng.n_arrived);
}

TEST_F(rank_barrier, an_unmarked_failed_enqueue_leaves_no_mark_behind)
{
	uint64_t ordinal;

	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	ordinal = npx_rank_barrier_mark(&self->r);
	npx_rank_barrier_unmark(&self->r, ordinal);
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 1));
	EXPECT_EQ(1u, eng.n_arrived);
	/* The next mark is the same ordinal again. */
	EXPECT_EQ(ordinal, npx_rank_barrier_mark(&self->r));
}

TEST_F(rank_barrier, unmarking_a_barrier_that_already_arrived_keeps_its_mark)
{
	bool done = true;

	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	ASSERT_EQ(1u, npx_rank_barrier_mark(&self->r));
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 1));
	/* Too late: its barrier is bound to the op's task. */
	npx_rank_barrier_unmark(&self->r, 1);
	EXPECT_EQ(NPROXY_BUSY, test_once(&self->hb, 1, &done));
	EXPECT_EQ(2u, npx_rank_barrier_mark(&self->r));
	EXPECT_EQ(0u, eng.n_arrived);
}

TEST_F(rank_barrier, unmarking_an_older_mark_leaves_the_newer_one)
{
	bool done = true;

	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	ASSERT_EQ(1u, npx_rank_barrier_mark(&self->r));
	ASSERT_EQ(2u, npx_rank_barrier_mark(&self->r));
	/* Only the newest mark can be taken back. */
	npx_rank_barrier_unmark(&self->r, 1);
	EXPECT_EQ(3u, npx_rank_barrier_mark(&self->r));
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 1));
	EXPECT_EQ(NPROXY_BUSY, test_once(&self->hb, 1, &done));
	EXPECT_EQ(0u, eng.n_arrived);
}

TEST_F(rank_barrier, an_undecided_barrier_runs_on_the_engine_once_the_handle_lets_go)
{
	bool done = true;

	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	npx_rank_barrier_mark(&self->r);
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 1));
	ASSERT_EQ(NPROXY_BUSY, test_once(&self->hb, 1, &done));
	npx_rank_barrier_release(&self->r);
	EXPECT_EQ(NPROXY_SUCCESS, test_once(&self->hb, 1, &done));
	EXPECT_EQ(1u, eng.n_arrived);
	/* Marks left at release are gone: the next barrier runs at once. */
	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 2));
	EXPECT_EQ(2u, eng.n_arrived);
}

TEST_F(rank_barrier, one_handle_at_a_time_owns_the_barriers)
{
	ASSERT_TRUE(npx_rank_barrier_claim(&self->r));
	EXPECT_FALSE(npx_rank_barrier_claim(&self->r));
	npx_rank_barrier_release(&self->r);
	EXPECT_TRUE(npx_rank_barrier_claim(&self->r));
}

TEST_F(rank_barrier, only_the_barrier_that_arrived_last_is_tested)
{
	bool done;

	ASSERT_EQ(NPROXY_SUCCESS, self->hb.ops->arrive(self->hb.ctx, 4));
	EXPECT_EQ(NPROXY_INVALID, test_once(&self->hb, 3, &done));
}

/*
 * The handle's calls that change a deferred barrier's answer wake the
 * group: its worker parked on the barrier's NPROXY_BUSY and polls it again
 * only after a safety park of 100 ms (proxy_queue.c).  On a real comm of 2
 * ranks (no network), per round: mark, enqueue, let the worker arrive,
 * test (BUSY) and park, then act and time until the barrier moves on.  The
 * median over the rounds is a wake (microseconds), not the park; timed in
 * plain builds only (sanitizers slow every step).
 */
#define KICK_ROUNDS	5
#define KICK_MEDIAN_MS	40.0

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KICK_TIMED 0
#else
#define KICK_TIMED 1
#endif

enum kick_act { KICK_BY_RELEASE, KICK_BY_DECISION };

static uint64_t bound_marks(struct npx_rank_barrier *b)
{
	uint64_t n;

	pthread_mutex_lock(&b->lock);
	n = b->bound;
	pthread_mutex_unlock(&b->lock);
	return n;
}

/* One round on comm c; the ms from the act until the barrier moved on, or < 0. */
static double kick_round(struct nproxy_rank *r, enum kick_act act, volatile uint64_t *sem)
{
	struct nproxy_cc_op op = NPROXY_CC_OP_INIT;
	static volatile uint32_t trig = 1;	/* the device went ahead */
	uint32_t engine_before = __atomic_load_n(&eng.n_arrived, __ATOMIC_ACQUIRE);
	uint64_t ordinal, ctx, t0, end;
	bool moved = false;

	if (!npx_rank_barrier_claim(r))
		return -1;
	ordinal = npx_rank_barrier_mark(r);
	op.streams_n = 1;
	op.trigger_words[0] = &trig;
	if (nproxy_enq_proxy_tasks(r->comm, &op, ordinal, &ctx) != NPROXY_SUCCESS)
		return -2;
	end = nproxy_test_now_ns() + 10000000000ull;
	while (bound_marks(&r->barrier) < ordinal && nproxy_test_now_ns() < end)
		nproxy_test_sleep_ms(1);
	nproxy_test_sleep_ms(20);	/* it tests (BUSY) and parks */
	t0 = nproxy_test_now_ns();
	if (act == KICK_BY_RELEASE) {
		npx_rank_barrier_release(r);	/* undecided: the engine runs it */
		while (!moved && nproxy_test_now_ns() < end)
			moved = __atomic_load_n(&eng.n_arrived, __ATOMIC_ACQUIRE) > engine_before;
	} else {
		*sem = ordinal;			/* carried, and its data is in */
		npx_rank_barrier_decide(r, ordinal, sem, ordinal, true);
		while (!moved && nproxy_test_now_ns() < end) {
			enum nproxy_status st;

			if (nproxy_check_status(r->comm, ctx, NPROXY_TASK_BARRIER, &moved, &st))
				return -3;
		}
	}
	t0 = nproxy_test_now_ns() - t0;
	if (!moved)
		return -4;
	if (act == KICK_BY_RELEASE &&
	    nproxy_wait_status(r->comm, ctx, NPROXY_TASK_BARRIER, 10000) != NPROXY_SUCCESS)
		return -5;
	if (nproxy_wait_status(r->comm, ctx, NPROXY_TASK_NETWORK, 10000) != NPROXY_SUCCESS)
		return -6;
	if (act == KICK_BY_DECISION)
		npx_rank_barrier_release(r);
	return (double)t0 / 1e6;
}

static void kick_rounds(struct __test_metadata *_metadata, struct nproxy_rank *r,
			struct nproxy_host_barrier *hb, volatile uint64_t *sem, enum kick_act act)
{
	struct nproxy_comm_opts o = NPROXY_COMM_OPTS_INIT;
	double ms[KICK_ROUNDS];

	eng.done_upto = UINT64_MAX;
	o.n_ranks = 2;
	o.flags = NPROXY_COMM_F_SKIP_NET;
	o.idle_policy = NPROXY_IDLE_ADAPTIVE;
	o.barrier = *hb;
	setenv("NPROXY_CALLER_DRIVES", "never", 1);	/* the worker steps, and parks */
	ASSERT_EQ(NPROXY_SUCCESS, nproxy_comm_open(&o, &r->comm));
	unsetenv("NPROXY_CALLER_DRIVES");
	for (int i = 0; i < KICK_ROUNDS; i++) {
		ms[i] = kick_round(r, act, sem);
		ASSERT_LE(0.0, ms[i]) TH_LOG("round %d failed: %.0f", i, ms[i]);
	}
	nproxy_comm_close(r->comm);
	r->comm = NULL;
	TH_LOG("act to barrier moving on: median %.3f ms of %d",
	       nproxy_test_median_double(ms, KICK_ROUNDS), KICK_ROUNDS);
	if (KICK_TIMED)
		EXPECT_GT(KICK_MEDIAN_MS, nproxy_test_median_double(ms, KICK_ROUNDS));
}

TEST_F(rank_barrier, letting_go_of_an_undecided_barrier_wakes_the_parked_group)
{
	kick_rounds(_metadata, &self->r, &self->hb, &self->sem, KICK_BY_RELEASE);
}

TEST_F(rank_barrier, deciding_with_a_kick_wakes_the_parked_group)
{
	kick_rounds(_metadata, &self->r, &self->hb, &self->sem, KICK_BY_DECISION);
}

TEST(without_an_engine_barrier_the_comm_gets_none_and_nobody_owns_it)
{
	const struct nproxy_host_barrier none = { 0 };
	struct nproxy_host_barrier out = { .ops = &eng_ops };
	struct nproxy_rank r;

	memset(&r, 0, sizeof(r));
	npx_rank_barrier_init(&r.barrier, &none, &out);
	EXPECT_EQ(NULL, out.ops);
	EXPECT_FALSE(npx_rank_barrier_claim(&r));
	npx_rank_barrier_destroy(&r.barrier);
}

TEST_HARNESS_MAIN
