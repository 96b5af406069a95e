// SPDX-License-Identifier: GPL-2.0
/*
 * The permission model (nproxy(4) "Permissions"):
 * access is checked when /dev/nproxy is opened, and an open fd (of the
 * device or of a region) is a capability, delegated by inheritance or
 * SCM_RIGHTS and by nothing else.  Each test forks a child that drops to
 * nobody (uid/gid 65534, no capabilities).  The netlink half (read-only
 * commands open to all, state changes need CAP_NET_ADMIN) is in
 * kmod-netlink.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "kmod_util.h"

static int drop_to_nobody(void)
{
	return setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534);
}

/* Run @fn(arg) as nobody in a child; returns its exit status or -signal. */
static int as_nobody(int (*fn)(void *), void *arg)
{
	int status;
	pid_t child = fork();

	if (child < 0)
		return -1000;
	if (child == 0) {
		if (drop_to_nobody())
			_exit(200);
		_exit(fn(arg));
	}
	if (waitpid(child, &status, 0) != child)
		return -1001;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

NP_DEV_FIXTURE(perm)

static int open_dev_errno(void *arg)
{
	int fd = open(NP_DEV_PATH, O_RDWR);

	return fd >= 0 ? 0 : errno;
}

TEST_F(perm, nobody_cannot_open_device_under_default_mode)
{
	struct stat st;

	ASSERT_EQ(0, stat(NP_DEV_PATH, &st));
	if ((st.st_mode & 0777) != 0600 || st.st_uid != 0)
		NP_SKIP("/dev/nproxy is %o uid %u, not the default 0600 root", st.st_mode & 0777,
			st.st_uid);
	EXPECT_EQ(EACCES, as_nobody(open_dev_errno, NULL));
}

/* The documented model: an inherited device fd is the right to create. */
static int create_with_inherited_fd(void *arg)
{
	int dev = *(int *)arg;
	int rfd = np_create(dev, 1, 1);
	uint64_t *sems;

	if (rfd < 0)
		return 1;
	sems = np_map(rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	if (!sems)
		return 2;
	__atomic_fetch_add(&sems[0], 1, __ATOMIC_RELEASE);
	close(rfd);
	munmap(sems, np_page_size());
	return 0;
}

TEST_F(perm, inherited_device_fd_is_the_capability)
{
	long long live = np_stat("regions_live");

	EXPECT_EQ(0, as_nobody(create_with_inherited_fd, &self->dev));
	EXPECT_EQ(live, np_stat("regions_live"));
}

struct foreign {
	pid_t owner;
	int rfd;
	int sem_errno;
};

/*
 * Every way of reaching another user's region without being given its fd:
 * /proc/PID/fd/N, /proc/PID/map_files, pidfd_getfd.  Returns a bit per
 * way that worked.
 */
static int reach_foreign_region(void *arg)
{
	const struct foreign *f = arg;
	char path[128];
	int fd, pidfd, got = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", f->owner, f->rfd);
	fd = open(path, O_RDWR);
	if (fd >= 0)
		got |= 1;
	pidfd = syscall(SYS_pidfd_open, f->owner, 0);
	if (pidfd >= 0) {
		fd = syscall(SYS_pidfd_getfd, pidfd, f->rfd, 0);
		if (fd >= 0)
			got |= 2;
	}
	/* An fd number of our own that is not the region: nothing happens. */
	if (ioctl(f->rfd, NPROXY_IOC_SEM_SET, &(struct nproxy_sem_op){ .value = 1 }) == 0)
		got |= 4;
	return got;
}

TEST_F(perm, nobody_cannot_reach_a_region_it_was_not_given)
{
	struct nproxy_sem_op op = { .sem = 0 };
	struct foreign f = { .owner = getpid() };
	char path[128];
	void *map;
	int fd;

	f.rfd = np_create(self->dev, 1, 1);
	ASSERT_LE(0, f.rfd);
	map = np_map(f.rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, map);
	/* The child closes its inherited copy first: it must not be given one. */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", getpid(),
		 (unsigned long)map, (unsigned long)map + np_page_size());
	{
		int status;
		pid_t child = fork();

		ASSERT_LE(0, child);
		if (child == 0) {
			int got;

			close(f.rfd);
			close(self->dev);
			munmap(map, np_page_size());
			if (drop_to_nobody())
				_exit(200);
			got = reach_foreign_region(&f);
			fd = open(path, O_RDWR);
			if (fd >= 0)
				got |= 8;
			_exit(got);
		}
		ASSERT_EQ(child, waitpid(child, &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status)) {
			TH_LOG("ways that reached the region: %#x (1 /proc fd, 2 pidfd_getfd, 4 stale fd number, 8 map_files)",
			       WEXITSTATUS(status));
		}
	}
	ASSERT_EQ(0, ioctl(f.rfd, NPROXY_IOC_SEM_GET, &op));
	EXPECT_EQ(0, op.value);
	munmap(map, np_page_size());
	close(f.rfd);
}

/* Given a region fd over SCM_RIGHTS, nobody can drive it (the model). */
TEST_F(perm, region_fd_passed_over_scm_rights_works_for_nobody)
{
	struct nproxy_sem_op op = { .sem = 0 };
	int sv[2], status, rfd;
	pid_t child;

	rfd = np_create(self->dev, 1, 1);
	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		struct nproxy_sem_op inc = { .sem = 0, .value = 3 };
		int got;

		close(rfd);
		close(self->dev);
		if (drop_to_nobody())
			_exit(200);
		got = np_recv_fd(sv[1]);
		if (got < 0)
			_exit(1);
		_exit(ioctl(got, NPROXY_IOC_SEM_INC, &inc) ? 2 : 0);
	}
	ASSERT_EQ(0, np_send_fd(sv[0], rfd));
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_SEM_GET, &op));
	EXPECT_EQ(3, op.value);
	close(sv[0]);
	close(sv[1]);
	close(rfd);
}

TEST_HARNESS_MAIN
