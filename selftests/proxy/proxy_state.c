// SPDX-License-Identifier: GPL-2.0
/*
 * The proxy state a comm publishes in its region's proxy-state page
 * (struct nproxy_proxy_state, lib/proxy/proxy_state.c): the header names the comm
 * and its worker; a task's slot follows it from WAITING_DEVICE_TRIGGER
 * (with the trigger word it waits on) to DONE; the device program and the
 * step the device is in are there for the hang evidence; nproxy_comm_close marks
 * the worker STOPPED.  Runs on the memfd backend on the host and on the
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

TEST_HARNESS_MAIN
