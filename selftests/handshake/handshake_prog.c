// SPDX-License-Identifier: GPL-2.0
/*
 * Device programs on the automatic backend: the emulated device (memfd on
 * the host, nproxy.ko in the VM) must behave as <linux/nproxy.h> documents.
 */
#include "kselftest_harness.h"
#include <nproxy/seam.h>
#include "handshake_test.h"

FIXTURE(region) {
	struct nproxy_hs *hs;
};

FIXTURE_SETUP(region)
{
	self->hs = hs_test_open(NPROXY_HS_AUTO, NPROXY_MAX_STREAMS, 8);
	ASSERT_NE(NULL, self->hs);
}

FIXTURE_TEARDOWN(region)
{
	nproxy_hs_close(self->hs);
}

/*
 * The device bumps a semaphore, then writes the trigger: a host that sees
 * the trigger with one acquire load must also see the semaphore.
 */
TEST_F(region, write_trigger_seen_by_acquire_load)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_DELAY, 0, 0, MS_NS(5)),
		hs_step(NPROXY_STEP_INC_SEM, 2, 5, 0),
		hs_step(NPROXY_STEP_WRITE_TRIGGER, 1, 7, 0),
	};
	struct nproxy_prog_result res;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 3, NULL));
	ASSERT_EQ(7U, hs_test_await_trigger(nproxy_hs_trigger(self->hs, 1), HS_TEST_WAIT_MS));
	EXPECT_EQ(5ULL, nproxy_sem_load(nproxy_hs_sem(self->hs, 2)));
	/* Only the written stream moved. */
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(self->hs, 0)));
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(self->hs, 2)));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ((uint32_t)NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(3U, res.steps_done);
	EXPECT_EQ(0, res.error);
	EXPECT_EQ(1ULL, nproxy_hs_info(self->hs)->triggers_written);
	EXPECT_NE(0ULL, nproxy_hs_info(self->hs)->last_trigger_ns);
}

struct adder_arg {
	volatile uint64_t *sem;
	unsigned int times;
};

static void *sem_adder(void *p)
{
	struct adder_arg *a = p;
	unsigned int i;

	for (i = 0; i < a->times; i++) {
		hs_test_sleep_ms(2);
		nproxy_sem_add(a->sem, 1);
	}
	return NULL;
}

/* The completion back-edge: host atomic adds from another thread release a WAIT_SEM. */
TEST_F(region, wait_sem_released_by_sem_add_from_another_thread)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_WAIT_SEM, 3, 3, MS_NS(HS_TEST_WAIT_MS)),
		hs_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1, 0),
	};
	struct adder_arg arg = { .sem = nproxy_hs_sem(self->hs, 3), .times = 2 };
	struct nproxy_prog_result res;
	pthread_t th;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 2, NULL));
	/* Two of three increments: the device must still be waiting. */
	ASSERT_EQ(0, pthread_create(&th, NULL, sem_adder, &arg));
	pthread_join(th, NULL);
	hs_test_sleep_ms(20);
	EXPECT_EQ((uint32_t)NPROXY_PROG_RUNNING, hs_test_prog_state(self->hs));
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(self->hs, 0)));

	arg.times = 1;
	ASSERT_EQ(0, pthread_create(&th, NULL, sem_adder, &arg));
	pthread_join(th, NULL);
	ASSERT_EQ(1U, hs_test_await_trigger(nproxy_hs_trigger(self->hs, 0), HS_TEST_WAIT_MS));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ((uint32_t)NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(2U, res.steps_done);
}

/*
 * The library's completions add through the region's bell: both devices
 * have one (memfd: the emulator sleeps on it; kmod: the info page's
 * sem_sleepers and the doorbell ioctl), and the increments release the
 * WAIT_SEM and nothing else: a ring adds nothing.
 */
TEST_F(region, wait_sem_released_through_the_bell)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_WAIT_SEM, 4, 3, MS_NS(HS_TEST_WAIT_MS)),
		hs_step(NPROXY_STEP_WRITE_TRIGGER, 2, 9, 0),
	};
	struct nproxy_device_sems dev = { .sems = nproxy_hs_sem(self->hs, 0), .n_sems = 8,
					  .bell = nproxy_hs_sem_bell(self->hs) };
	struct nproxy_prog_result res;

	ASSERT_NE(NULL, dev.bell);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 2, NULL));
	for (int i = 0; i < 3; i++) {
		hs_test_sleep_ms(2);	/* let the device fall asleep in between */
		nproxy_device_sem_add(&dev, 4, 1);
	}
	ASSERT_EQ(9U, hs_test_await_trigger(nproxy_hs_trigger(self->hs, 2), HS_TEST_WAIT_MS));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ((uint32_t)NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(3ULL, nproxy_sem_load(nproxy_hs_sem(self->hs, 4)));
	EXPECT_EQ(0ULL, nproxy_sem_load(nproxy_hs_sem(self->hs, 0)));
	/* Nobody sleeps now: an add rings nothing and just adds. */
	nproxy_device_sem_add(&dev, 4, 2);
	EXPECT_EQ(5ULL, nproxy_sem_load(nproxy_hs_sem(self->hs, 4)));
}

TEST_F(region, wait_sem_already_reached_does_not_wait)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_WAIT_SEM, 0, 4, MS_NS(HS_TEST_WAIT_MS)),
	};
	struct nproxy_prog_result res;

	nproxy_sem_add(nproxy_hs_sem(self->hs, 0), 9);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 1, NULL));
	/* Far below the step's timeout: it must not have waited for it. */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS / 2, &res));
	EXPECT_EQ((uint32_t)NPROXY_PROG_DONE, res.state);
}

/* Submit a program that writes trigger 0, runs mid, then writes trigger 1. */
static enum nproxy_status submit_around(struct nproxy_hs *hs, struct nproxy_prog_step mid)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1, 0),
		mid,
		hs_step(NPROXY_STEP_WRITE_TRIGGER, 1, 1, 0),
	};

	return nproxy_hs_submit(hs, prog, 3, NULL);
}

/* A submit_around() program ended in its middle step with state and error. */
static void expect_ended_in_the_middle(struct __test_metadata *_metadata, struct nproxy_hs *hs,
				       const struct nproxy_prog_result *res, uint32_t state,
				       int error)
{
	EXPECT_EQ(state, res->state);
	EXPECT_EQ(error, res->error);
	EXPECT_EQ(1U, res->failed_step);
	EXPECT_EQ(1U, res->steps_done);
	/* The step after the failed one never ran. */
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(hs, 1)));
}

/* A semaphore that never arrives is a TIMEDOUT program, never a success. */
TEST_F(region, wait_sem_timeout_reports_timedout_with_failed_step)
{
	struct nproxy_prog_result res;

	ASSERT_ST(NPROXY_SUCCESS, submit_around(self->hs, hs_step(NPROXY_STEP_WAIT_SEM, 4, 1, MS_NS(30))));
	ASSERT_ST(NPROXY_HW_ERROR, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	expect_ended_in_the_middle(_metadata, self->hs, &res, NPROXY_PROG_TIMEDOUT, -ETIMEDOUT);
	EXPECT_GE(res.elapsed_ns, MS_NS(30));
	EXPECT_EQ(1U, nproxy_trigger_load(nproxy_hs_trigger(self->hs, 0)));
	EXPECT_EQ((uint32_t)NPROXY_PROG_NONE, hs_test_prog_state(self->hs));
}

TEST_F(region, second_submit_while_running_is_busy)
{
	struct nproxy_prog_step slow[] = { hs_step(NPROXY_STEP_DELAY, 0, 0, MS_NS(20000)) };
	struct nproxy_prog_step quick[] = { hs_step(NPROXY_STEP_SIGNAL_EVENT, 0, 0, 0) };
	struct nproxy_prog_result res;
	uint64_t seq = 0;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, slow, 1, &seq));
	EXPECT_ST(NPROXY_BUSY, nproxy_hs_submit(self->hs, quick, 1, NULL));
	/* The refused program did not replace the running one. */
	EXPECT_EQ(seq, nproxy_hs_info(self->hs)->prog_seq);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_cancel(self->hs));
	EXPECT_ST(NPROXY_CANCELLED, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ(seq, res.seq);
	EXPECT_EQ(0ULL, nproxy_hs_info(self->hs)->events_signalled);
}

TEST_F(region, submit_before_collect_is_busy)
{
	struct nproxy_prog_step quick[] = { hs_step(NPROXY_STEP_SIGNAL_EVENT, 0, 0, 0) };
	struct nproxy_prog_result res;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, quick, 1, NULL));
	ASSERT_TRUE(hs_test_wait_state(self->hs, NPROXY_PROG_DONE, HS_TEST_WAIT_MS));
	EXPECT_ST(NPROXY_BUSY, nproxy_hs_submit(self->hs, quick, 1, NULL));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, quick, 1, NULL));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
}

TEST_F(region, cancel_stops_running_program)
{
	struct nproxy_prog_result res;

	ASSERT_ST(NPROXY_SUCCESS, submit_around(self->hs, hs_step(NPROXY_STEP_DELAY, 0, 0, MS_NS(20000))));
	/* Make sure it is inside the delay. */
	ASSERT_NE(NPROXY_TRIGGER_SENTINEL, hs_test_await_trigger(nproxy_hs_trigger(self->hs, 0), HS_TEST_WAIT_MS));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_cancel(self->hs));
	/* Cancel is synchronous: the result is there without waiting. */
	ASSERT_ST(NPROXY_CANCELLED, nproxy_hs_wait(self->hs, 0, &res));
	expect_ended_in_the_middle(_metadata, self->hs, &res, NPROXY_PROG_CANCELLED, -ECANCELED);
	EXPECT_LT(res.elapsed_ns, MS_NS(20000));
}

TEST_F(region, cancel_interrupts_wait_sem)
{
	struct nproxy_prog_step prog[] = { hs_step(NPROXY_STEP_WAIT_SEM, 0, 1, 0) };
	struct nproxy_prog_result res;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 1, NULL));
	hs_test_sleep_ms(5);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_cancel(self->hs));
	ASSERT_ST(NPROXY_CANCELLED, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ(0U, res.failed_step);
	EXPECT_EQ(0U, res.steps_done);
}

TEST_F(region, cancel_without_program_is_invalid)
{
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_cancel(self->hs));
}

TEST_F(region, wait_without_program_is_invalid)
{
	struct nproxy_prog_result res;

	EXPECT_ST(NPROXY_INVALID, nproxy_hs_wait(self->hs, 0, &res));
}

TEST_F(region, wait_times_out_while_program_runs)
{
	struct nproxy_prog_step prog[] = { hs_step(NPROXY_STEP_DELAY, 0, 0, MS_NS(20000)) };
	struct nproxy_prog_result res;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 1, NULL));
	EXPECT_ST(NPROXY_TIMEOUT, nproxy_hs_wait(self->hs, 20, &res));
	/* Not collected by the timed-out wait: still running, still cancellable. */
	EXPECT_EQ((uint32_t)NPROXY_PROG_RUNNING, hs_test_prog_state(self->hs));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_cancel(self->hs));
	EXPECT_ST(NPROXY_CANCELLED, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
}

/* The region keeps its last failure's text; "" before any. */
TEST_F(region, strerror_names_the_last_failure)
{
	struct nproxy_prog_result res;

	EXPECT_STREQ("", nproxy_hs_strerror(self->hs));
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_wait(self->hs, 0, &res));
	EXPECT_NE(NULL, strstr(nproxy_hs_strerror(self->hs), "wait: no program submitted"));
	EXPECT_NE(NULL, strstr(nproxy_hs_strerror(self->hs), "handshake region"));
	EXPECT_STREQ("", nproxy_hs_strerror(NULL));
}

TEST_F(region, inc_sem_adds_value)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_INC_SEM, 7, 40, 0),
		hs_step(NPROXY_STEP_INC_SEM, 7, 2, 0),
	};
	struct nproxy_prog_result res;

	nproxy_sem_add(nproxy_hs_sem(self->hs, 7), 100);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 2, NULL));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ(142ULL, nproxy_sem_load(nproxy_hs_sem(self->hs, 7)));
	EXPECT_EQ(0ULL, nproxy_sem_load(nproxy_hs_sem(self->hs, 6)));
}

TEST_F(region, signal_event_counts)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_SIGNAL_EVENT, 0, 11, 0),
		hs_step(NPROXY_STEP_SIGNAL_EVENT, 0, 12, 0),
	};
	struct nproxy_prog_result res;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 2, NULL));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ(2ULL, nproxy_hs_info(self->hs)->events_signalled);
}

TEST_F(region, delay_lasts_at_least_its_duration)
{
	struct nproxy_prog_step prog[] = { hs_step(NPROXY_STEP_DELAY, 0, 0, MS_NS(30)) };
	struct nproxy_prog_result res;
	uint64_t t0 = hs_test_now_ns();

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 1, NULL));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_GE(hs_test_now_ns() - t0, MS_NS(30));
	EXPECT_GE(res.elapsed_ns, MS_NS(30));
}

TEST_F(region, program_ids_count_up)
{
	struct nproxy_prog_step prog[] = { hs_step(NPROXY_STEP_SIGNAL_EVENT, 0, 0, 0) };
	struct nproxy_prog_result res;
	uint64_t seq1 = 0, seq2 = 0;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 1, &seq1));
	EXPECT_EQ(1u, seq1);	/* a region's programs are 1, 2, ... (uapi.md) */
	EXPECT_EQ(seq1, nproxy_hs_info(self->hs)->prog_seq);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ(seq1, res.seq);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 1, &seq2));
	EXPECT_EQ(seq1 + 1, seq2);
	EXPECT_EQ(seq2, nproxy_hs_info(self->hs)->prog_seq);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ(seq2, res.seq);
}

TEST_F(region, collect_resets_state_to_none)
{
	struct nproxy_prog_step prog[] = { hs_step(NPROXY_STEP_SIGNAL_EVENT, 0, 0, 0) };
	struct nproxy_prog_result res;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 1, NULL));
	ASSERT_TRUE(hs_test_wait_state(self->hs, NPROXY_PROG_DONE, HS_TEST_WAIT_MS));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ((uint32_t)NPROXY_PROG_NONE, hs_test_prog_state(self->hs));
	/* Collected once: a second wait has nothing to collect. */
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_wait(self->hs, 0, &res));
}

/* The submitted array is the caller's: the device must have its own copy. */
TEST_F(region, submit_copies_the_program)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_DELAY, 0, 0, MS_NS(20)),
		hs_step(NPROXY_STEP_WRITE_TRIGGER, 2, 5, 0),
	};
	struct nproxy_prog_result res;

	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 2, NULL));
	memset(prog, 0xa5, sizeof(prog));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ(5U, nproxy_trigger_load(nproxy_hs_trigger(self->hs, 2)));
}

/*
 * The memfd device's thread parks up to a second when it has nothing to
 * do; a close wakes it.  A close that left it to its own time took that
 * second (the median of three, in every build: a wake-up costs
 * microseconds, and a join under valgrind milliseconds).
 */
TEST(close_wakes_an_idle_device_at_once)
{
	double ms[3];

	for (int i = 0; i < 3; i++) {
		struct nproxy_hs *hs = hs_test_open(NPROXY_HS_MEMFD, 1, 1);
		uint64_t t0;

		ASSERT_NE(NULL, hs);
		hs_test_sleep_ms(20);	/* the thread is parked by now */
		t0 = hs_test_now_ns();
		nproxy_hs_close(hs);
		ms[i] = (double)(hs_test_now_ns() - t0) / 1e6;
	}
	EXPECT_LT(nproxy_test_median_double(ms, 3), 500.0);
}

/* Close must not wait for a 60 s semaphore wait: it cancels and joins. */
TEST(close_cancels_running_program)
{
	struct nproxy_prog_step prog[] = { hs_step(NPROXY_STEP_WAIT_SEM, 0, 1, 0) };
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 1, 1);
	uint64_t t0;

	ASSERT_NE(NULL, hs);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(hs, prog, 1, NULL));
	hs_test_sleep_ms(5);
	t0 = hs_test_now_ns();
	nproxy_hs_close(hs);
	/* Generous bound; the harness timeout (30 s) also catches a hang. */
	EXPECT_LT(hs_test_now_ns() - t0, MS_NS(HS_TEST_WAIT_MS));
}

TEST_HARNESS_MAIN
