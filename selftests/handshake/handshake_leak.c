// SPDX-License-Identifier: GPL-2.0
/*
 * Nothing leaks: open/close cycles on the automatic backend leave the
 * process with the fds, threads and mappings it had before.
 */
#include "kselftest_harness.h"
#include "handshake_test.h"

#define CYCLES 64

/*
 * One cycle first: what the first open sets up for good (the sanitizers'
 * helper threads, malloc arenas) is not a leak.
 */
static void warm_up(void)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 1, 1);

	nproxy_hs_close(hs);
}

/* CYCLES opens and closes; what is counted is back where it was. */
FIXTURE(cycles) {
};

FIXTURE_SETUP(cycles)
{
}

FIXTURE_TEARDOWN(cycles)
{
}

enum while_open {
	OPEN_ANY,	/* not checked */
	OPEN_ONE_MORE,	/* exactly one more while the first region is open */
	OPEN_MORE,	/* more than before while the first region is open */
};

FIXTURE_VARIANT(cycles) {
	int (*count)(void);
	uint32_t n_streams, n_sems;
	bool some_before;	/* the process has some before the first open */
	enum while_open while_open;
};

/* The region really holds an fd while open: the count can move. */
FIXTURE_VARIANT_ADD(cycles, no_fd) {
	.count = hs_test_count_fds, .n_streams = 4, .n_sems = 16,
	.some_before = true, .while_open = OPEN_ONE_MORE,
};

FIXTURE_VARIANT_ADD(cycles, no_thread) {
	.count = hs_test_count_threads, .n_streams = 1, .n_sems = 1,
	.some_before = true, .while_open = OPEN_ANY,
};

/*
 * Three pages mapped while open (memfd: four, the device's view too); the
 * kernel merges mappings that happen to be adjacent (valgrind places them
 * so), so only "more than before" is sure.
 */
FIXTURE_VARIANT_ADD(cycles, no_mapping) {
	.count = hs_test_count_shared_maps, .n_streams = 2, .n_sems = 2,
	.some_before = false, .while_open = OPEN_MORE,
};

TEST_F(cycles, open_close_cycles_leak)
{
	int before, i;

	warm_up();
	before = variant->count();
	if (variant->some_before)
		ASSERT_GT(before, 0);
	for (i = 0; i < CYCLES; i++) {
		struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, variant->n_streams,
						    variant->n_sems);

		ASSERT_NE(NULL, hs);
		if (i == 0 && variant->while_open == OPEN_ONE_MORE)
			EXPECT_EQ(before + 1, variant->count());
		if (i == 0 && variant->while_open == OPEN_MORE)
			EXPECT_LT(before, variant->count());
		nproxy_hs_close(hs);
	}
	EXPECT_EQ(before, hs_test_settle(variant->count, before, 1000));
}

/* Closing with a program mid-wait must cancel it and release everything. */
TEST(close_with_running_program_leaks_nothing)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_WRITE_TRIGGER, 0, 1, 0),
		hs_step(NPROXY_STEP_WAIT_SEM, 0, 1, 0),
	};
	int fds, threads, i;

	warm_up();
	fds = hs_test_count_fds();
	threads = hs_test_count_threads();
	for (i = 0; i < CYCLES / 4; i++) {
		struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 1, 1);
	
		ASSERT_NE(NULL, hs);
		ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(hs, prog, 2, NULL));
		ASSERT_NE(NPROXY_TRIGGER_SENTINEL, hs_test_await_trigger(nproxy_hs_trigger(hs, 0), HS_TEST_WAIT_MS));
		nproxy_hs_close(hs);
	}
	EXPECT_EQ(fds, hs_test_settle(hs_test_count_fds, fds, 1000));
	EXPECT_EQ(threads, hs_test_settle(hs_test_count_threads, threads, 1000));
}

/* A failed open (forced kmod without the module) releases what it took. */
TEST(failed_open_leaks_nothing)
{
	struct nproxy_hs_opts o = hs_test_opts(NPROXY_HS_KMOD, 1, 1);
	int fds, i;

	if (access("/dev/nproxy", F_OK) == 0)
		SKIP(return, "/dev/nproxy exists: forced kmod does not fail here");
	nproxy_log_set_level(NPROXY_LOG_ERROR);
	hs_test_log_capture();
	fds = hs_test_count_fds();
	for (i = 0; i < CYCLES; i++) {
		struct nproxy_hs *hs = NULL;

		ASSERT_ST(NPROXY_UNSUPPORTED, nproxy_hs_open(&o, &hs));
		ASSERT_EQ(NULL, hs);
	}
	EXPECT_EQ(fds, hs_test_count_fds());
}

TEST_HARNESS_MAIN
