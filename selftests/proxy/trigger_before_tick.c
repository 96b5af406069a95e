// SPDX-License-Identifier: GPL-2.0
/*
 * A device that wrote an op's trigger before the group's first tick of the
 * op: the network task leaves INIT (it starts its blocks) and only then
 * looks at the gate.  That tick moved something, so the stepping thread
 * ticks again and finds the trigger written; it must not park for a
 * signal, because the trigger's signal came before the tick and none
 * follows.  It shows only when the rest of the group waits on nothing a
 * poll sees: here the previous op's host barrier waits for a kick
 * (NPROXY_BUSY, as a carried barrier does) and the op's own barrier is held
 * behind it.  The waiting thread drives (NPROXY_CALLER_DRIVES=always) with
 * no spin window (NPROXY_SPIN_US=0), so an idle tick parks at once: up to
 * the 100 ms safety bound when nothing signals.  Timed by the median of a
 * few ops in plain builds (sanitizers slow every step).
 */
#include "kselftest_harness.h"
#include <stdlib.h>
#include "proxy_test_util.h"

#define ROUNDS		5
#define MEDIAN_BOUND_MS	30.0

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TIMED 0
#else
#define TIMED 1
#endif

static volatile bool released;

static enum nproxy_status held_arrive(void *ctx, uint64_t seq)
{
	return NPROXY_SUCCESS;
}

/* Waits for a kick until released (the kick's side: NPROXY_BUSY). */
static enum nproxy_status held_test(void *ctx, uint64_t seq, bool *done)
{
	*done = __atomic_load_n(&released, __ATOMIC_ACQUIRE);
	return *done ? NPROXY_SUCCESS : NPROXY_BUSY;
}

static const struct nproxy_host_barrier_ops held_ops = {
	.name = "held", .arrive = held_arrive, .test = held_test,
};

TEST(a_trigger_written_before_the_first_tick_is_seen_without_a_park)
{
	volatile uint32_t *trig;
	struct nproxy_comm_opts o;
	struct nproxy_cc_op op;
	uint64_t ctx[ROUNDS + 1];
	double ms[ROUNDS];
	struct hs_comm k;

	if (hs_open_auto(&k.hs) != NPROXY_SUCCESS)
		SKIP(return, "no handshake backend available");
	trig = nproxy_hs_trigger(k.hs, 0);
	released = false;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_loopback_fabric_create(1, &k.f));
	ASSERT_EQ(0, lb_rank_setup(&k.r, k.f, 0, 0, 48));
	o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_DEVICE_WAIT, k.r.lb);
	o.n_ranks = 2;		/* a host barrier to hold */
	o.hs = k.hs;		/* its trigger writes signal the group */
	o.idle_policy = NPROXY_IDLE_ADAPTIVE;
	o.barrier = (struct nproxy_host_barrier){ .ops = &held_ops };
	setenv("NPROXY_CALLER_DRIVES", "always", 1);
	setenv("NPROXY_SPIN_US", "0", 1);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &k.c));
	unsetenv("NPROXY_CALLER_DRIVES");
	unsetenv("NPROXY_SPIN_US");

	/* Op 0: its barrier then waits for a kick, and holds every later one. */
	op = hs_comm_op(&k.r);
	nproxy_trigger_store(trig, 1);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 1, &ctx[0]));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, ctx[0], NPROXY_TASK_NETWORK, 10000));

	for (int i = 0; i < ROUNDS; i++) {
		uint64_t t0;

		op = hs_comm_op(&k.r);
		nproxy_trigger_store(trig, 1);	/* the device is already there */
		ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, i + 2, &ctx[i + 1]));
		t0 = nproxy_test_now_ns();
		ASSERT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, ctx[i + 1], NPROXY_TASK_NETWORK, 10000));
		ms[i] = (double)(nproxy_test_now_ns() - t0) / 1e6;
	}
	TH_LOG("enqueue to network DONE: median %.3f ms of %d",
	       nproxy_test_median_double(ms, ROUNDS), ROUNDS);
	if (TIMED)
		EXPECT_GT(MEDIAN_BOUND_MS, nproxy_test_median_double(ms, ROUNDS));

	__atomic_store_n(&released, true, __ATOMIC_RELEASE);
	nproxy_comm_kick(k.c);
	for (int i = 0; i <= ROUNDS; i++)
		EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, ctx[i], NPROXY_TASK_BARRIER, 10000));
	nproxy_comm_close(k.c);
	hs_comm_free(&k);
}

TEST_HARNESS_MAIN
