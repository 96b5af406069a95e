// SPDX-License-Identifier: GPL-2.0
/*
 * Device-program validation: every malformed step is NPROXY_INVALID at
 * submit, on both backends, and nothing runs (state NONE, seq unchanged,
 * no trigger written).  Region: 2 streams, 3 sems.
 */
#include "kselftest_harness.h"
#include "handshake_test.h"

FIXTURE(region) {
	struct nproxy_hs *hs;
};

FIXTURE_VARIANT(region) {
	struct nproxy_prog_step step;
	const char *why;	/* expected in the library's message */
};

#define BAD_STEP(name, op_, index_, value_, timeout_, flags_, why_)		\
	FIXTURE_VARIANT_ADD(region, name) {					\
		.step = { .op = op_, .flags = flags_, .index = index_,		\
			  .value = value_, .timeout_ns = timeout_ },		\
		.why = why_,							\
	}

BAD_STEP(op_zero, 0, 0, 0, 0, 0, "unknown op");
BAD_STEP(op_unknown, 6, 0, 0, 0, 0, "unknown op");
BAD_STEP(op_huge, 0xffff, 0, 0, 0, 0, "unknown op");
BAD_STEP(flags_set, NPROXY_STEP_SIGNAL_EVENT, 0, 0, 0, 1, "flags must be 0");
BAD_STEP(trigger_index_past_n_streams, NPROXY_STEP_WRITE_TRIGGER, 2, 1, 0, 0, "index >= n_streams");
BAD_STEP(trigger_value_over_32_bits, NPROXY_STEP_WRITE_TRIGGER, 0, 0x100000000ULL, 0, 0,
	 "does not fit");
BAD_STEP(trigger_with_timeout, NPROXY_STEP_WRITE_TRIGGER, 0, 1, 5, 0, "timeout_ns unused");
BAD_STEP(wait_sem_index_past_n_sems, NPROXY_STEP_WAIT_SEM, 3, 1, 0, 0, "index >= n_sems");
BAD_STEP(wait_sem_timeout_too_long, NPROXY_STEP_WAIT_SEM, 0, 1, NPROXY_MAX_WAIT_NS + 1, 0,
	 "NPROXY_MAX_WAIT_NS");
BAD_STEP(delay_too_long, NPROXY_STEP_DELAY, 0, 0, NPROXY_MAX_WAIT_NS + 1, 0, "NPROXY_MAX_WAIT_NS");
BAD_STEP(delay_with_index, NPROXY_STEP_DELAY, 1, 0, 10, 0, "unused");
BAD_STEP(delay_with_value, NPROXY_STEP_DELAY, 0, 1, 10, 0, "unused");
BAD_STEP(inc_sem_index_past_n_sems, NPROXY_STEP_INC_SEM, 3, 1, 0, 0, "index >= n_sems");
BAD_STEP(inc_sem_with_timeout, NPROXY_STEP_INC_SEM, 0, 1, 1, 0, "timeout_ns unused");
BAD_STEP(signal_with_index, NPROXY_STEP_SIGNAL_EVENT, 1, 0, 0, 0, "unused");
BAD_STEP(signal_with_timeout, NPROXY_STEP_SIGNAL_EVENT, 0, 0, 1, 0, "unused");

FIXTURE_SETUP(region)
{
	self->hs = hs_test_open(NPROXY_HS_AUTO, 2, 3);
	ASSERT_NE(NULL, self->hs);
	hs_test_log_capture();
}

FIXTURE_TEARDOWN(region)
{
	nproxy_log_set_sink(NULL, NULL);
	nproxy_hs_close(self->hs);
}

/* The bad step sits behind a good one: the whole program is refused. */
TEST_F(region, bad_step_rejected_at_submit)
{
	struct nproxy_prog_step prog[2] = {
		hs_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1, 0),
		variant->step,
	};
	struct nproxy_prog_result res;
	uint64_t seq = 12345;

	EXPECT_ST(NPROXY_INVALID, nproxy_hs_submit(self->hs, prog, 2, &seq));
	EXPECT_EQ(12345ULL, seq);
	EXPECT_TRUE(hs_test_log_has("step 1"));
	EXPECT_TRUE(hs_test_log_has(variant->why));
	EXPECT_NE(NULL, strstr(nproxy_hs_strerror(self->hs), variant->why));
	if (!hs_test_log_has(variant->why))
		TH_LOG("log was: %s", hs_test_log.text);
	EXPECT_EQ((uint32_t)NPROXY_PROG_NONE, hs_test_prog_state(self->hs));
	EXPECT_EQ(0ULL, nproxy_hs_info(self->hs)->prog_seq);
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_wait(self->hs, 0, &res));
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(self->hs, 0)));
}

TEST(empty_and_oversized_programs_rejected)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 1, 1);
	struct nproxy_prog_step *big;
	uint32_t i;

	ASSERT_NE(NULL, hs);
	big = calloc(NPROXY_MAX_PROG_STEPS + 1, sizeof(*big));
	ASSERT_NE(NULL, big);
	for (i = 0; i <= NPROXY_MAX_PROG_STEPS; i++)
		big[i] = hs_step(NPROXY_STEP_SIGNAL_EVENT, 0, 0, 0);
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_submit(hs, big, 0, NULL));
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_submit(hs, NULL, 1, NULL));
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_submit(hs, big, NPROXY_MAX_PROG_STEPS + 1, NULL));
	EXPECT_EQ(0ULL, nproxy_hs_info(hs)->prog_seq);
	free(big);
	nproxy_hs_close(hs);
}

/* The limits themselves are valid: the check is not off by one. */
TEST(boundary_steps_accepted)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 2, 3);
	struct nproxy_prog_step *prog;
	struct nproxy_prog_result res;
	uint32_t i;

	ASSERT_NE(NULL, hs);
	prog = calloc(NPROXY_MAX_PROG_STEPS, sizeof(*prog));
	ASSERT_NE(NULL, prog);
	for (i = 0; i < NPROXY_MAX_PROG_STEPS; i++)
		prog[i] = hs_step(NPROXY_STEP_INC_SEM, 2, 1, 0);
	prog[0] = hs_step(NPROXY_STEP_WRITE_TRIGGER, 1, UINT32_MAX - 1, 0);
	prog[1] = hs_step(NPROXY_STEP_WAIT_SEM, 2, 0, NPROXY_MAX_WAIT_NS);
	prog[2] = hs_step(NPROXY_STEP_DELAY, 0, 0, 0);
	prog[3] = hs_step(NPROXY_STEP_SIGNAL_EVENT, 0, UINT64_MAX, 0);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(hs, prog, NPROXY_MAX_PROG_STEPS, NULL));
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_wait(hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ((uint32_t)NPROXY_MAX_PROG_STEPS, res.steps_done);
	EXPECT_EQ(UINT32_MAX - 1, nproxy_trigger_load(nproxy_hs_trigger(hs, 1)));
	EXPECT_EQ((uint64_t)NPROXY_MAX_PROG_STEPS - 4, nproxy_sem_load(nproxy_hs_sem(hs, 2)));
	free(prog);
	nproxy_hs_close(hs);
}

TEST_HARNESS_MAIN
