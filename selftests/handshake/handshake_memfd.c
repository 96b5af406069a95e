// SPDX-License-Identifier: GPL-2.0
/*
 * What only the memfd backend has: the sealed memfd, its layout, and the
 * emulated-device thread.  Asks for memfd explicitly, so it runs the same on
 * the host and in the VM.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "handshake_test.h"

FIXTURE(memfd) {
	struct nproxy_hs *hs;
	int fd;
};

FIXTURE_SETUP(memfd)
{
	self->hs = hs_test_open(NPROXY_HS_MEMFD, 2, 4);
	ASSERT_NE(NULL, self->hs);
	ASSERT_EQ((int)NPROXY_HS_MEMFD, (int)nproxy_hs_backend_of(self->hs));
	self->fd = nproxy_hs_fd(self->hs);
	ASSERT_GE(self->fd, 0);
}

FIXTURE_TEARDOWN(memfd)
{
	nproxy_hs_close(self->hs);
}

TEST_F(memfd, size_is_sealed)
{
	long page = sysconf(_SC_PAGESIZE);

	EXPECT_EQ(F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, fcntl(self->fd, F_GET_SEALS));
	EXPECT_EQ(-1, ftruncate(self->fd, 0));
	EXPECT_EQ(EPERM, errno);
	EXPECT_EQ(-1, ftruncate(self->fd, 5 * page));
	EXPECT_EQ(EPERM, errno);
	/* F_SEAL_SEAL: nobody can add seals either (e.g. F_SEAL_WRITE). */
	EXPECT_EQ(-1, fcntl(self->fd, F_ADD_SEALS, F_SEAL_WRITE));
	EXPECT_EQ(EPERM, errno);
	/* And the pages are still there. */
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(self->hs, 0)));
}

TEST_F(memfd, fd_is_close_on_exec)
{
	int flags = fcntl(self->fd, F_GETFD);

	ASSERT_GE(flags, 0);
	EXPECT_TRUE(flags & FD_CLOEXEC);
}

/* Byte for byte the module's layout: page 0 triggers, 1 sems, 2 info, 3 proxy state. */
TEST_F(memfd, file_layout_matches_pages)
{
	long page = sysconf(_SC_PAGESIZE);
	struct nproxy_region_info info;
	uint32_t trig[2];
	uint64_t sem;

	nproxy_sem_add(nproxy_hs_sem(self->hs, 3), 77);
	EXPECT_EQ(4 * page, lseek(self->fd, 0, SEEK_END));
	ASSERT_EQ((ssize_t)sizeof(trig), pread(self->fd, trig, sizeof(trig), 0));
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, trig[0]);
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, trig[1]);
	ASSERT_EQ((ssize_t)sizeof(sem), pread(self->fd, &sem, sizeof(sem), page + 3 * 8));
	EXPECT_EQ(77ULL, sem);
	ASSERT_EQ((ssize_t)sizeof(info), pread(self->fd, &info, sizeof(info), 2 * page));
	EXPECT_EQ(NPROXY_REGION_MAGIC, info.magic);
	EXPECT_EQ(2U, info.n_streams);
	EXPECT_EQ(4U, info.n_sems);
}

static int count_dev_threads(void)
{
	return hs_test_count_threads_named("nproxy-dev");
}

TEST_F(memfd, emulator_thread_is_named)
{
	struct nproxy_hs *second;

	EXPECT_EQ(1, count_dev_threads());
	second = hs_test_open(NPROXY_HS_MEMFD, 1, 0);
	ASSERT_NE(NULL, second);
	/* One device thread per region. */
	EXPECT_EQ(2, count_dev_threads());
	nproxy_hs_close(second);
	/* Joined, its thread may still be listed in /proc/self/task until the
	 * kernel has released it (a slow VM shows it): a leak stays, so wait. */
	EXPECT_EQ(1, hs_test_settle(count_dev_threads, 1, 1000));
}

/* The user's mapping of the info page is read-only (PROT_READ, r--s). */
TEST_F(memfd, info_mapping_is_read_only)
{
	uintptr_t info = (uintptr_t)nproxy_hs_info(self->hs);
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512], perms[8] = "";
	bool found = false;

	ASSERT_NE(NULL, maps);
	while (fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && lo <= info && info < hi) {
			found = true;
			break;
		}
	}
	fclose(maps);
	ASSERT_TRUE(found);
	EXPECT_STREQ("r--s", perms);
}

/*
 * A forked child inherits the pages but not the emulator thread (and maybe
 * its lock, held): device calls must refuse at once and close must not
 * hang.  The pages themselves stay shared with the parent.
 */
TEST_F(memfd, forked_child_gets_clear_errors_not_a_hang)
{
	struct nproxy_prog_step prog[] = {
		hs_step(NPROXY_STEP_WAIT_SEM, 0, 1, 0),
		hs_step(NPROXY_STEP_WRITE_TRIGGER, 0, 9, 0),
	};
	struct nproxy_prog_result res;
	int status;
	pid_t pid;

	/* The parent's emulator is mid-WAIT_SEM (holding its lock between polls). */
	ASSERT_ST(NPROXY_SUCCESS, nproxy_hs_submit(self->hs, prog, 2, NULL));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int bad = 0;

		alarm(10);	/* a hang becomes SIGALRM, a failure */
		nproxy_log_set_level(NPROXY_LOG_ERROR);
		hs_test_log_capture();
		bad |= nproxy_hs_submit(self->hs, prog, 2, NULL) != NPROXY_INVALID_HANDLE;
		bad |= nproxy_hs_cancel(self->hs) != NPROXY_INVALID_HANDLE;
		bad |= nproxy_hs_wait(self->hs, 0, &res) != NPROXY_INVALID_HANDLE;
		bad |= !hs_test_log_has("inherited across fork");
		/* Completion back-edge from the child still reaches the parent's device. */
		nproxy_sem_add(nproxy_hs_sem(self->hs, 0), 1);
		nproxy_hs_close(self->hs);
		_exit(bad ? 1 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_ST(NPROXY_SUCCESS, nproxy_hs_wait(self->hs, HS_TEST_WAIT_MS, &res));
	EXPECT_EQ(9U, nproxy_trigger_load(nproxy_hs_trigger(self->hs, 0)));
}

TEST_HARNESS_MAIN
