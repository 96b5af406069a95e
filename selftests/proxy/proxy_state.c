// SPDX-License-Identifier: GPL-2.0
/*
 * The proxy state a comm publishes in its region's proxy-state page
 * (struct nproxy_proxy_state, lib/proxy/proxy_state.c): the header names the comm
 * and its worker; a task's slot follows it from WAITING_DEVICE_TRIGGER
 * (with the trigger word it waits on) to DONE; the device program and the
 * step the device is in are there for the hang evidence; nproxy_comm_close marks
 * the worker STOPPED; a host barrier that waits for the next op is flagged
 * DEFERRED until that op decides it.  Runs on the memfd backend on the host and on the
 * module's page in the VM (lib-kmod.vm.sh).
 */
#include "kselftest_harness.h"
#include "proxy_test_util.h"
#include "handshake/handshake_internal.h"

/* The worker and the device write these while we read: atomic loads (TSan). */
#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_ACQUIRE)

/* The newest slot of type NETWORK, or NULL. */
static const volatile struct nproxy_proxy_task *net_slot(const volatile struct nproxy_proxy_state *ps)
{
	const volatile struct nproxy_proxy_task *best = NULL;

	for (int i = 0; i < NPROXY_PROXY_STATE_TASKS; i++)
		if (LOAD(ps->tasks[i].type) == NPROXY_TASK_NETWORK &&
		    (!best || LOAD(ps->tasks[i].exec_id) > LOAD(best->exec_id)))
			best = &ps->tasks[i];
	return best;
}

/* The newest slot of type BARRIER, or NULL. */
static const volatile struct nproxy_proxy_task *barrier_slot(const volatile struct nproxy_proxy_state *ps)
{
	for (int i = 0; i < NPROXY_PROXY_STATE_TASKS; i++)
		if (LOAD(ps->tasks[i].type) == NPROXY_TASK_BARRIER)
			return &ps->tasks[i];
	return NULL;
}

TEST(published_state_follows_the_task)
{
	const volatile struct nproxy_proxy_task *slot;
	const volatile struct nproxy_proxy_state *ps;
	struct nproxy_prog_step prog[3];
	struct nproxy_prog_result res;
	struct nproxy_cc_op op;
	struct hs_comm k;

	if (hs_open_auto(&k.hs) != NPROXY_SUCCESS)
		SKIP(return, "no handshake backend available");
	ps = k.hs->proxy_state;
	ASSERT_NE(NULL, ps);
	EXPECT_EQ(0u, LOAD(ps->magic));	/* no comm yet */
	ASSERT_ST(NPROXY_SUCCESS, hs_comm_open(&k));
	EXPECT_EQ(NPROXY_PROXY_STATE_MAGIC, LOAD(ps->magic));
	EXPECT_EQ((uint32_t)NPROXY_PROXY_STATE_VERSION, LOAD(ps->version));
	EXPECT_EQ((uint32_t)sizeof(struct nproxy_proxy_state), LOAD(ps->size));
	EXPECT_EQ((uint32_t)getpid(), LOAD(ps->pid));
	EXPECT_EQ((uint32_t)getppid(), LOAD(ps->ppid));
	EXPECT_EQ(0u, LOAD(ps->rank));
	EXPECT_EQ(1u, LOAD(ps->n_ranks));
	EXPECT_EQ(NPROXY_PROXY_STATE_F_DEVICE_WAIT, LOAD(ps->flags));
	EXPECT_TRUE(WAIT_UNTIL(LOAD(ps->worker_tid) == nproxy_comm_worker_tid(k.c) &&
			       LOAD(ps->worker_tid) > 0, 10000));

	/* The device waits on sem 3 before it triggers: the task must wait too. */
	prog[0] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM, .index = 3, .value = 1,
					     .timeout_ns = 20000000000ull };
	prog_trigger_then_wait(&prog[1], 2, 20000000000ull);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(k.hs, prog, 3, NULL));
	EXPECT_EQ(3u, LOAD(ps->prog_n_steps));
	EXPECT_EQ(1u, LOAD(ps->prog_seq));
	EXPECT_EQ((uint16_t)NPROXY_STEP_WAIT_SEM, LOAD(ps->prog[0].op));
	EXPECT_EQ(3u, LOAD(ps->prog[0].index));
	EXPECT_EQ(0u, LOAD(ps->prog_seqlock) & 1);

	op = hs_comm_op(&k.r);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 7, &k.ctx));
	EXPECT_EQ(1u, LOAD(ps->ops_enqueued));
	EXPECT_EQ(2u, LOAD(ps->next_slot));	/* network + barrier */
	slot = net_slot(ps);
	ASSERT_NE(NULL, slot);
	EXPECT_EQ(7u, LOAD(slot->exec_id));
	EXPECT_EQ(k.ctx, LOAD(slot->ctx));
	EXPECT_EQ(1u, LOAD(slot->trigger_mask));
	EXPECT_TRUE(WAIT_UNTIL(LOAD(slot->run_state) == NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER, 10000));
	EXPECT_EQ(0u, LOAD(slot->seq) & 1);
	/* The op's barrier task waits at the same gate, and says so. */
	ASSERT_NE(NULL, barrier_slot(ps));
	EXPECT_TRUE(WAIT_UNTIL(LOAD(barrier_slot(ps)->run_state) ==
			       NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER, 10000));
	EXPECT_GE(LOAD(slot->state_ns), LOAD(slot->enqueue_ns));
	EXPECT_EQ((uint32_t)NPROXY_PROG_RUNNING, LOAD(k.hs->info->prog_state));
	EXPECT_EQ(0u, LOAD(k.hs->info->prog_step));	/* blocked in the WAIT_SEM */
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(k.hs, 0)));

	nproxy_sem_add(nproxy_hs_sem(k.hs, 3), 1);
	nproxy_sem_bell_ring(nproxy_hs_sem_bell(k.hs));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_NETWORK, 20000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_BARRIER, 20000));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_hs_wait(k.hs, 20000, &res));
	EXPECT_EQ((unsigned int)NPROXY_PROG_DONE, res.state);
	EXPECT_EQ((uint16_t)NPROXY_TASK_STATE_DONE, LOAD(slot->run_state));
	EXPECT_EQ(0, LOAD(slot->status));
	EXPECT_EQ(2u, LOAD(k.hs->info->prog_step));	/* the last step it ran */
	/* Nothing left: the worker goes to sleep, and says so. */
	EXPECT_TRUE(WAIT_UNTIL(LOAD(ps->worker_state) == NPROXY_WORKER_SLEEPING, 10000));

	nproxy_comm_close(k.c);
	EXPECT_EQ((uint32_t)NPROXY_WORKER_STOPPED, LOAD(ps->worker_state));
	hs_comm_free(&k);
}

/* A host barrier the application decides: BUSY, then decided (not done), then done. */
static volatile int barrier_phase;

static enum nproxy_status phased_arrive(void *ctx, uint64_t seq)
{
	return NPROXY_SUCCESS;
}

static enum nproxy_status phased_test(void *ctx, uint64_t seq, bool *done)
{
	int phase = __atomic_load_n(&barrier_phase, __ATOMIC_ACQUIRE);

	*done = phase == 2;
	return phase ? NPROXY_SUCCESS : NPROXY_BUSY;
}

static const struct nproxy_host_barrier_ops phased_ops = {
	.name = "phased", .arrive = phased_arrive, .test = phased_test,
};

TEST(a_barrier_waiting_for_the_next_op_is_published_deferred_until_decided)
{
	const volatile struct nproxy_proxy_task *slot;
	const volatile struct nproxy_proxy_state *ps;
	struct nproxy_comm_opts o;
	struct nproxy_cc_op op;
	uint64_t deferred_ns;
	struct hs_comm k;

	if (hs_open_auto(&k.hs) != NPROXY_SUCCESS)
		SKIP(return, "no handshake backend available");
	ps = k.hs->proxy_state;
	barrier_phase = 0;
	ASSERT_ST(NPROXY_SUCCESS, nproxy_loopback_fabric_create(1, &k.f));
	ASSERT_EQ(0, lb_rank_setup(&k.r, k.f, 0, 0, 48));
	o = comm_opts(0, 1, 0, 1, NPROXY_COMM_F_SKIP_NET, k.r.lb);
	o.n_ranks = 2;	/* one rank has no host barrier to run */
	o.hs = k.hs;
	o.barrier = (struct nproxy_host_barrier){ .ops = &phased_ops };
	ASSERT_ST(NPROXY_SUCCESS, nproxy_comm_open(&o, &k.c));
	op = hs_comm_op(&k.r);
	nproxy_trigger_store(nproxy_hs_trigger(k.hs, 0), 1);	/* the device went ahead */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_enq_proxy_tasks(k.c, &op, 1, &k.ctx));
	slot = barrier_slot(ps);
	ASSERT_NE(NULL, slot);
	/* No claim on the flag here: the worker may already have tested it. */

	/* test() said BUSY: IDLE, flagged, for as long as the application takes. */
	ASSERT_TRUE(WAIT_UNTIL(LOAD(slot->flags) == NPROXY_PROXY_TASK_F_DEFERRED, 10000));
	EXPECT_EQ((uint16_t)NPROXY_TASK_STATE_IDLE, LOAD(slot->run_state));
	deferred_ns = LOAD(slot->progress_ns);
	sleep_ms(50);	/* past the coarse clock's tick */
	EXPECT_EQ(NPROXY_PROXY_TASK_F_DEFERRED, LOAD(slot->flags));
	EXPECT_EQ(deferred_ns, LOAD(slot->progress_ns));

	/* Decided, not done yet: a wait of its own, aged from now. */
	__atomic_store_n(&barrier_phase, 1, __ATOMIC_RELEASE);
	nproxy_comm_kick(k.c);
	ASSERT_TRUE(WAIT_UNTIL(LOAD(slot->flags) == 0, 10000));
	EXPECT_EQ((uint16_t)NPROXY_TASK_STATE_IDLE, LOAD(slot->run_state));
	EXPECT_GE(LOAD(slot->progress_ns), deferred_ns + 40000000ull);

	__atomic_store_n(&barrier_phase, 2, __ATOMIC_RELEASE);
	EXPECT_ST(NPROXY_SUCCESS, nproxy_wait_status(k.c, k.ctx, NPROXY_TASK_BARRIER, 10000));
	EXPECT_EQ((uint16_t)NPROXY_TASK_STATE_DONE, LOAD(slot->run_state));
	EXPECT_EQ(0u, LOAD(slot->flags));
	nproxy_comm_close(k.c);
	hs_comm_free(&k);
}

TEST_HARNESS_MAIN
