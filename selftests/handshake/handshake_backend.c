// SPDX-License-Identifier: GPL-2.0
/*
 * Backend choice and argument checks: explicit choice, NPROXY_HANDSHAKE,
 * automatic choice, and the messages a user sees when a choice fails.
 */
#include <sys/resource.h>
#include "kselftest_harness.h"
#include "handshake_test.h"

#define DEV_PATH "/dev/nproxy"

static bool have_device(void)
{
	return access(DEV_PATH, F_OK) == 0;
}

/*
 * Which backend an open of `asked` gets under NPROXY_HANDSHAKE, or how it
 * is refused: one row a case, named for the behaviour it checks.
 */
FIXTURE(choice) {
};

FIXTURE_SETUP(choice)
{
}

FIXTURE_TEARDOWN(choice)
{
}

enum device_need { ANY_HOST, WITH_DEVICE, WITHOUT_DEVICE };
#define FOLLOWS_DEVICE (-1)	/* want: kmod where the device is, else memfd */
#define ENV_UNSET ""		/* env: no NPROXY_HANDSHAKE at all */

FIXTURE_VARIANT(choice) {
	enum nproxy_hs_backend asked;
	const char *env;	/* NPROXY_HANDSHAKE; NULL: as the run has it */
	enum device_need need;
	int want;		/* the backend opened, or FOLLOWS_DEVICE ... */
	enum nproxy_status refused;	/* ... unless refused: with this status */
	const char *message;		/* and this in the log */
};

FIXTURE_VARIANT_ADD(choice, forced_kmod_without_module_fails_clearly) {
	.asked = NPROXY_HS_AUTO, .env = "kmod", .need = WITHOUT_DEVICE,
	.refused = NPROXY_UNSUPPORTED,
	.message = "NPROXY_HANDSHAKE=kmod: /dev/nproxy: No such file or directory (is nproxy.ko loaded?)",
};

FIXTURE_VARIANT_ADD(choice, explicit_kmod_without_module_fails_clearly) {
	.asked = NPROXY_HS_KMOD, .env = NULL, .need = WITHOUT_DEVICE,
	.refused = NPROXY_UNSUPPORTED,
	.message = "the kmod backend (asked for by the caller): /dev/nproxy: No such file or directory",
};

FIXTURE_VARIANT_ADD(choice, forced_kmod_with_module_uses_it) {
	.asked = NPROXY_HS_AUTO, .env = "kmod", .need = WITH_DEVICE, .want = NPROXY_HS_KMOD,
};

FIXTURE_VARIANT_ADD(choice, env_memfd_forces_memfd) {
	.asked = NPROXY_HS_AUTO, .env = "memfd", .want = NPROXY_HS_MEMFD,
};

FIXTURE_VARIANT_ADD(choice, auto_follows_device_presence) {
	.asked = NPROXY_HS_AUTO, .env = ENV_UNSET, .want = FOLLOWS_DEVICE,
};

FIXTURE_VARIANT_ADD(choice, env_auto_is_automatic) {
	.asked = NPROXY_HS_AUTO, .env = "auto", .want = FOLLOWS_DEVICE,
};

FIXTURE_VARIANT_ADD(choice, bad_env_value_rejected) {
	.asked = NPROXY_HS_AUTO, .env = "kmodd", .refused = NPROXY_INVALID,
	.message = "NPROXY_HANDSHAKE=kmodd: expected kmod, memfd or auto",
};

/* An explicit choice in the code wins over the environment. */
FIXTURE_VARIANT_ADD(choice, explicit_backend_overrides_env) {
	.asked = NPROXY_HS_MEMFD, .env = "kmod", .want = NPROXY_HS_MEMFD,
};

TEST_F(choice, open)
{
	struct nproxy_hs_opts o = hs_test_opts(variant->asked, 1, 1);
	struct nproxy_hs *hs = (struct nproxy_hs *)&o;	/* must be overwritten */
	int want = variant->want == FOLLOWS_DEVICE ?
		   (int)(have_device() ? NPROXY_HS_KMOD : NPROXY_HS_MEMFD) : variant->want;

	if (variant->need == WITHOUT_DEVICE && have_device())
		SKIP(return, DEV_PATH " exists: the kmod backend is available here");
	if (variant->need == WITH_DEVICE && !have_device())
		SKIP(return, "no " DEV_PATH ": nproxy.ko is not loaded (the VM run covers this)");
	if (variant->env && !*variant->env) {
		ASSERT_EQ(0, unsetenv("NPROXY_HANDSHAKE"));
	} else if (variant->env) {
		ASSERT_EQ(0, setenv("NPROXY_HANDSHAKE", variant->env, 1));
	}
	hs_test_log_capture();
	if (variant->refused) {
		EXPECT_ST(variant->refused, nproxy_hs_open(&o, &hs));
		EXPECT_EQ(NULL, hs);
		EXPECT_TRUE(hs_test_log_has(variant->message));
		TH_LOG("message: %s", hs_test_log.text);
		return;
	}
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_open(&o, &hs));
	EXPECT_EQ(want, (int)nproxy_hs_backend_of(hs));
	nproxy_hs_close(hs);
}

TEST(backend_names_round_trip)
{
	enum nproxy_hs_backend b = NPROXY_HS_KMOD;
	const enum nproxy_hs_backend all[] = { NPROXY_HS_AUTO, NPROXY_HS_KMOD, NPROXY_HS_MEMFD };
	unsigned int i;

	for (i = 0; i < 3; i++) {
		ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_backend_parse(nproxy_hs_backend_name(all[i]), &b));
		EXPECT_EQ((int)all[i], (int)b);
	}
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_backend_parse("KMOD", &b));
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_backend_parse("", &b));
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_backend_parse(NULL, &b));
}

TEST(bad_open_arguments_rejected)
{
	struct nproxy_hs_opts o;
	struct nproxy_hs *hs;
	struct {
		struct nproxy_hs_opts opts;
		uint64_t future_field;
	} longer = { .opts = hs_test_opts(NPROXY_HS_AUTO, 1, 1) };

	hs_test_log_capture();
	o = hs_test_opts(NPROXY_HS_AUTO, 1, 1);
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_open(&o, NULL));
	hs = (struct nproxy_hs *)&o;
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_open(NULL, &hs));
	EXPECT_EQ(NULL, hs);

	o.size = sizeof(o) - 1;
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_open(&o, &hs));
	EXPECT_TRUE(hs_test_log_has("options size"));
	o.size = 0;				/* a caller that forgot to set it */
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_open(&o, &hs));
	EXPECT_TRUE(hs_test_log_has("options size is 0"));
	o = hs_test_opts(NPROXY_HS_AUTO, 0, 1);
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_open(&o, &hs));
	EXPECT_TRUE(hs_test_log_has("n_streams 0 not in 1..4"));
	o = hs_test_opts(NPROXY_HS_AUTO, NPROXY_MAX_STREAMS + 1, 1);
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_open(&o, &hs));
	o = hs_test_opts(NPROXY_HS_AUTO, 1, NPROXY_MAX_SEMS + 1);
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_open(&o, &hs));
	EXPECT_TRUE(hs_test_log_has("n_sems 257 not in 0..256"));
	o = hs_test_opts((enum nproxy_hs_backend)7, 1, 1);
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_open(&o, &hs));
	EXPECT_EQ(NULL, hs);

	/* A newer caller's longer struct: fine while the tail is zero. */
	longer.opts.size = sizeof(longer);
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_open(&longer.opts, &hs));
	nproxy_hs_close(hs);
	longer.future_field = 1;
	hs = NULL;
	EXPECT_ST(NPROXY_INVALID, nproxy_hs_open(&longer.opts, &hs));
	EXPECT_EQ(NULL, hs);
}

/* Zero semaphores is a valid region (a task with no completion edge). */
TEST(zero_sems_region_opens)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 1, 0);

	ASSERT_NE(NULL, hs);
	EXPECT_EQ(NULL, nproxy_hs_sem(hs, 0));
	nproxy_hs_close(hs);
}

TEST(null_region_calls_rejected)
{
	struct nproxy_prog_step step = hs_step(NPROXY_STEP_SIGNAL_EVENT, 0, 0, 0);
	struct nproxy_prog_result res;

	hs_test_log_capture();
	EXPECT_ST(NPROXY_INVALID_HANDLE, nproxy_hs_submit(NULL, &step, 1, NULL));
	EXPECT_ST(NPROXY_INVALID_HANDLE, nproxy_hs_cancel(NULL));
	EXPECT_ST(NPROXY_INVALID_HANDLE, nproxy_hs_wait(NULL, 0, &res));
	EXPECT_EQ(NULL, nproxy_hs_trigger(NULL, 0));
	EXPECT_EQ(NULL, nproxy_hs_sem(NULL, 0));
	EXPECT_EQ(NULL, nproxy_hs_info(NULL));
	EXPECT_EQ(-1, nproxy_hs_fd(NULL));
	nproxy_hs_close(NULL);
}

/* Out of fds: a clear resource error, whichever backend auto tries. */
TEST(open_without_free_fd_fails_with_resource)
{
	struct nproxy_hs_opts o = hs_test_opts(NPROXY_HS_AUTO, 1, 1);
	struct nproxy_hs *hs = NULL;
	struct rlimit rl;
	int fd;

	/* Lowest free fd is where the next open lands: allow none from there. */
	fd = dup(0);
	ASSERT_GE(fd, 0);
	close(fd);
	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &rl));
	rl.rlim_cur = (rlim_t)fd;
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	hs_test_log_capture();
	EXPECT_ST(NPROXY_RESOURCE, nproxy_hs_open(&o, &hs));
	EXPECT_EQ(NULL, hs);
	EXPECT_TRUE(hs_test_log_has("Too many open files"));
	TH_LOG("message: %s", hs_test_log.text);
}

TEST_HARNESS_MAIN
