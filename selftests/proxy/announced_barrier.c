// SPDX-License-Identifier: GPL-2.0
/*
 * A host barrier whose test() answers NPROXY_BUSY (<nproxy/seam.h>): its
 * answer changes only with nproxy_comm_kick().  The barrier task stays
 * IDLE; the group's threads stop polling it (the worker parks until the
 * kick, a waiting thread whose task is done does not stay to finish it),
 * and the kick finishes it.  A barrier still carried by the next op's data
 * (lib/rank's) is the one in use.
 */
#include "kselftest_harness.h"
#include <pthread.h>
#include "proxy_test_util.h"

/* test(): BUSY until released, then done; every call counted. */
static struct {
	volatile bool released;
	volatile uint32_t tests;
} bar;

static enum nproxy_status kick_arrive(void *ctx, uint64_t seq)
{
	(void)ctx;
	(void)seq;
	return NPROXY_SUCCESS;
}

static enum nproxy_status kick_test(void *ctx, uint64_t seq, bool *done)
{
	(void)ctx;
	(void)seq;
	__atomic_add_fetch(&bar.tests, 1, __ATOMIC_RELAXED);
	*done = __atomic_load_n(&bar.released, __ATOMIC_ACQUIRE);
	return *done ? NPROXY_SUCCESS : NPROXY_BUSY;
}

static const struct nproxy_host_barrier_ops kick_ops = {
	.name = "kick", .arrive = kick_arrive, .test = kick_test,
};

static uint32_t tests_now(void)
{
	return __atomic_load_n(&bar.tests, __ATOMIC_RELAXED);
}

/* A 2-rank comm of device dev whose barrier is kick_ops; one op enqueued (gated: closed trigger). */
static int open_and_enqueue(struct lb_comm *k, uint32_t dev, uint32_t flags, bool gated)
{
	struct nproxy_comm_opts o;
	struct nproxy_cc_op op;

	memset(&bar, 0, sizeof(bar));
	if (lb_comm_prepare(k, dev, flags, &o))
		return -1;
	o.n_ranks = 2;
	o.idle_policy = NPROXY_IDLE_ADAPTIVE;
	o.barrier = (struct nproxy_host_barrier){ .ops = &kick_ops };
	if (gated)
		k->r.trig[0] = NPROXY_PROXY_TRIGGER_SENTINEL;
	if (nproxy_comm_open(&o, &k->c))
		return -1;
	op = lb_rank_op(&k->r);
	return nproxy_enq_proxy_tasks(k->c, &op, 1, &k->ctx) ? -1 : 0;
}

TEST(the_worker_parks_on_a_barrier_that_waits_for_a_kick_and_the_kick_ends_it)
{
	struct lb_comm k;
	uint32_t before;

	ASSERT_EQ(0, open_and_enqueue(&k, 0, NPROXY_COMM_F_SKIP_NET, false));
	ASSERT_TRUE(WAIT_UNTIL(tests_now() >= 1, 10000));
	/* Polled, the worker would test it thousands of times in 200 ms. */
	before = tests_now();
	sleep_ms(200);
	EXPECT_LE(tests_now() - before, 6u);
	__atomic_store_n(&bar.released, true, __ATOMIC_RELEASE);
	nproxy_comm_kick(k.c);
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_BARRIER, 10000));
	lb_comm_close(&k);
}

static void *open_trigger_later(void *arg)
{
	sleep_ms(30);
	nproxy_trigger_store(arg, 1);
	return NULL;
}

TEST(a_waiting_thread_leaves_when_its_op_has_only_a_kicked_barrier_left)
{
	struct lb_comm k;
	pthread_t opener;

	/*
	 * The waiting thread drives, and stays after its task is DONE to
	 * finish the op's other task for up to the spin window (here 2 s);
	 * a barrier that waits for a kick is not one it can finish.  The
	 * trigger opens once the thread waits, so the op runs in its drive.
	 */
	setenv("NPROXY_CALLER_DRIVES", "always", 1);
	setenv("NPROXY_SPIN_US", "2000000", 1);
	ASSERT_EQ(0, open_and_enqueue(&k, 1, NPROXY_COMM_F_DEVICE_WAIT, true));
	unsetenv("NPROXY_CALLER_DRIVES");
	unsetenv("NPROXY_SPIN_US");
	ASSERT_EQ(0, pthread_create(&opener, NULL, open_trigger_later, (void *)&k.r.trig[0]));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_NETWORK, 10000));
	pthread_join(opener, NULL);
	EXPECT_GE(tests_now(), 1u);	/* it arrived, and answered BUSY */
	/* Staying, it would have tested the barrier on every tick for 2 s. */
	EXPECT_LE(tests_now(), 20u);
	__atomic_store_n(&bar.released, true, __ATOMIC_RELEASE);
	nproxy_comm_kick(k.c);
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_BARRIER, 10000));
	lb_comm_close(&k);
}

/* test() fails the first barrier (a dead peer), passes the next. */
static enum nproxy_status failing_test(void *ctx, uint64_t seq, bool *done)
{
	*done = seq != 1;
	return seq == 1 ? NPROXY_PEER_DEAD : NPROXY_SUCCESS;
}

static const struct nproxy_host_barrier_ops failing_ops = {
	.name = "failing", .arrive = kick_arrive, .test = failing_test,
};

TEST(a_barrier_whose_test_fails_ends_with_that_status_and_lets_the_next_one_run)
{
	struct nproxy_comm_opts o;
	struct nproxy_cc_op op;
	struct lb_comm k;
	uint64_t second;

	ASSERT_EQ(0, lb_comm_prepare(&k, 2, NPROXY_COMM_F_SKIP_NET, &o));
	o.n_ranks = 2;
	o.barrier = (struct nproxy_host_barrier){ .ops = &failing_ops };
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &k.c));
	op = lb_rank_op(&k.r);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 1, &k.ctx));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 2, &second));
	EXPECT_ST(NPROXY_PEER_DEAD, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_BARRIER, 10000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, second, NPROXY_TASK_BARRIER, 10000));
	lb_comm_close(&k);
}

TEST(kicking_no_comm_is_a_no_op)
{
	nproxy_comm_kick(NULL);
}

TEST_HARNESS_MAIN
