// SPDX-License-Identifier: GPL-2.0
/*
 * Module fault injection: the debugfs knobs of
 * kmod/fault.c fail each allocation of region creation in turn and a
 * program submission; every failure returns its documented errno, leaves
 * no region (regions_live), no fd and no program behind, and the next call
 * works.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "kmod_util.h"

#define NP_DEBUGFS "/sys/kernel/debug/nproxy/"
/* Allocations one region creation makes (kmod/nproxy_priv.h). */
#define REGION_ALLOC_STEPS 8

static int knob_write(const char *name, long long v)
{
	FILE *f = fopen(name, "w");
	int err;

	if (!f)
		return -errno;
	fprintf(f, "%lld\n", v);
	err = fclose(f) ? -errno : 0;
	return err;
}

/* The lowest free fd number: a leaked fd would move it. */
static int lowest_free_fd(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	return fd;
}

FIXTURE(fault) {
	int dev;
};

FIXTURE_SETUP(fault)
{
	NP_OPEN_DEV_OR_SKIP(self->dev);
	if (np_read_ll(NP_DEBUGFS "fail_region_alloc") < 0)
		NP_SKIP(NP_DEBUGFS " not available (debugfs not mounted?)");
}

FIXTURE_TEARDOWN(fault)
{
	knob_write(NP_DEBUGFS "fail_region_alloc", 0);
	knob_write(NP_DEBUGFS "fail_prog_submit", 0);
	if (self->dev >= 0)
		close(self->dev);
}

/* Each of the 8 allocations fails in turn: ENOMEM (EMFILE for the fd). */
TEST_F(fault, every_region_allocation_fails_cleanly)
{
	long long live = np_stat("regions_live");
	long long created = np_stat("regions_created");
	long long injected = np_read_ll(NP_DEBUGFS "faults_injected");
	int n, rfd, free_fd = lowest_free_fd();

	ASSERT_LE(0, free_fd);

	for (n = 1; n <= REGION_ALLOC_STEPS; n++) {
		ASSERT_EQ(0, knob_write(NP_DEBUGFS "fail_region_alloc", n));
		EXPECT_EQ(n == 7 ? -EMFILE : -ENOMEM, np_create(self->dev, 2, 4)) {
			TH_LOG("allocation %d of region creation failed on purpose", n);
		}
		EXPECT_EQ(0, np_read_ll(NP_DEBUGFS "fail_region_alloc"));
		EXPECT_EQ(injected + n, np_read_ll(NP_DEBUGFS "faults_injected"));
		EXPECT_EQ(live, np_stat("regions_live"));
		EXPECT_EQ(created, np_stat("regions_created"));
		EXPECT_EQ(free_fd, lowest_free_fd());
	}
	/* One past the last allocation: the creation works, the knob counts on. */
	ASSERT_EQ(0, knob_write(NP_DEBUGFS "fail_region_alloc", REGION_ALLOC_STEPS + 1));
	rfd = np_create(self->dev, 2, 4);
	ASSERT_LE(0, rfd);
	EXPECT_EQ(1, np_read_ll(NP_DEBUGFS "fail_region_alloc"));
	EXPECT_EQ(-ENOMEM, np_create(self->dev, 1, 0));
	EXPECT_EQ(live + 1, np_stat("regions_live"));
	close(rfd);
	EXPECT_EQ(live, np_stat("regions_live"));
	EXPECT_EQ(injected + REGION_ALLOC_STEPS + 1, np_read_ll(NP_DEBUGFS "faults_injected"));
}

TEST_F(fault, knob_refuses_out_of_range)
{
	EXPECT_EQ(-EINVAL, knob_write(NP_DEBUGFS "fail_region_alloc", 1LL << 40));
	EXPECT_EQ(0, np_read_ll(NP_DEBUGFS "fail_region_alloc"));
}

/*
 * A knob at 0 is disarmed: calls pass it without failing and without
 * counting it below 0 (it reads 0 after a region creation's eight
 * allocations and a submission).
 */
TEST_F(fault, disarmed_knob_stays_zero)
{
	struct nproxy_prog_step step = np_step(NPROXY_STEP_INC_SEM, 0, 1, 0);
	long long injected = np_read_ll(NP_DEBUGFS "faults_injected");
	struct nproxy_prog_result res;
	int rfd;

	ASSERT_EQ(0, knob_write(NP_DEBUGFS "fail_region_alloc", 0));
	ASSERT_EQ(0, knob_write(NP_DEBUGFS "fail_prog_submit", 0));
	rfd = np_create(self->dev, 2, 4);
	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, np_submit(rfd, &step, 1, NULL));
	ASSERT_EQ(0, np_wait_collect(rfd, 5000, &res));
	EXPECT_EQ(0, np_read_ll(NP_DEBUGFS "fail_region_alloc"));
	EXPECT_EQ(0, np_read_ll(NP_DEBUGFS "fail_prog_submit"));
	EXPECT_EQ(injected, np_read_ll(NP_DEBUGFS "faults_injected"));
	close(rfd);
}

/* The 2nd submission fails with ENOMEM and changes nothing; the next works. */
TEST_F(fault, prog_submission_fails_cleanly)
{
	struct nproxy_prog_step steps[] = { np_step(NPROXY_STEP_WRITE_TRIGGER, 0, 9, 0) };
	long long progs = np_stat("progs_run");
	struct nproxy_prog_result res;
	struct nproxy_region_state st;
	uint64_t seq = 0;
	int rfd = np_create(self->dev, 1, 0);

	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, knob_write(NP_DEBUGFS "fail_prog_submit", 2));
	ASSERT_EQ(0, np_submit(rfd, steps, 1, &seq));
	ASSERT_EQ(0, np_wait_collect(rfd, 10000, &res));
	EXPECT_EQ(NPROXY_PROG_DONE, res.state);
	EXPECT_EQ(-ENOMEM, np_submit(rfd, steps, 1, NULL));
	EXPECT_EQ(0, np_read_ll(NP_DEBUGFS "fail_prog_submit"));
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_GET_STATE, &st));
	EXPECT_EQ(NPROXY_PROG_NONE, st.prog_state);
	EXPECT_EQ(seq, st.prog_seq);
	EXPECT_EQ(-ENOENT, ioctl(rfd, NPROXY_IOC_COLLECT_PROG, &res) ? -errno : 0);
	EXPECT_EQ(progs + 1, np_stat("progs_run"));
	ASSERT_EQ(0, np_submit(rfd, steps, 1, NULL));
	ASSERT_EQ(0, np_wait_collect(rfd, 10000, &res));
	EXPECT_EQ(seq + 1, res.seq);
	close(rfd);
}

/* Root only: the knobs are 0600 in a root-only debugfs. */
TEST_F(fault, knobs_are_root_only)
{
	int status;
	pid_t child = fork();

	ASSERT_LE(0, child);
	if (child == 0) {
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(2);
		_exit(knob_write(NP_DEBUGFS "fail_region_alloc", 1) == 0 ? 1 : 0);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(0, np_read_ll(NP_DEBUGFS "fail_region_alloc"));
}

TEST_HARNESS_MAIN
