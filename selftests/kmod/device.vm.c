// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/nproxy: the node, the ABI query, and the
 * ioctl dispatcher's errors (size, direction, type, unknown command, bad
 * pointer) as seen through the device's ioctls.
 */
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "kselftest_harness.h"
#include "kmod_util.h"

NP_DEV_FIXTURE(dev)

/* A misc character device, root-only by default (module param dev_mode). */
TEST_F(dev, node_is_misc_chardev_mode_0600)
{
	struct stat st;

	ASSERT_EQ(0, stat(NP_DEV_PATH, &st));
	ASSERT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(10, major(st.st_rdev));	/* MISC_MAJOR */
	EXPECT_EQ(0600, st.st_mode & 07777);
}

/*
 * The fixed misc minor 249 (local-use range) that the char-major-10-249
 * alias names: a dynamic minor would not autoload the module.
 */
TEST_F(dev, node_has_fixed_minor_249)
{
	struct stat st;

	ASSERT_EQ(0, stat(NP_DEV_PATH, &st));
	EXPECT_EQ(249, minor(st.st_rdev));
}

TEST_F(dev, get_info_reports_abi_and_limits)
{
	struct nproxy_info info;

	memset(&info, 0xa5, sizeof(info));
	ASSERT_EQ(0, ioctl(self->dev, NPROXY_IOC_GET_INFO, &info));
	EXPECT_EQ(NPROXY_ABI_VERSION, info.abi_version);
	EXPECT_EQ(NPROXY_MAX_STREAMS, info.max_streams);
	EXPECT_EQ(NPROXY_MAX_SEMS, info.max_sems);
	EXPECT_EQ(NPROXY_MAX_PROG_STEPS, info.max_prog_steps);
	EXPECT_EQ(NPROXY_MAX_WAIT_NS, info.max_wait_ns);
	EXPECT_EQ((__u32)np_page_size(), info.page_size);
	EXPECT_GE(info.sem_poll_ns, 1000);
	EXPECT_LE(info.sem_poll_ns, 10000000);
	/* Output-only command: reserved fields come back zeroed. */
	EXPECT_EQ(0, info.reserved[0]);
	EXPECT_EQ(0, info.reserved[3]);
}

TEST_F(dev, get_info_bad_pointer_efault)
{
	errno = 0;
	ASSERT_EQ(-1, ioctl(self->dev, NPROXY_IOC_GET_INFO, (void *)8));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(dev, unknown_command_enotty)
{
	errno = 0;
	ASSERT_EQ(-1, ioctl(self->dev, _IO(NPROXY_IOC_MAGIC, 0x7f)));
	EXPECT_EQ(ENOTTY, errno);
	/* A hole in the table. */
	errno = 0;
	ASSERT_EQ(-1, ioctl(self->dev, _IO(NPROXY_IOC_MAGIC, 0x05)));
	EXPECT_EQ(ENOTTY, errno);
}

TEST_F(dev, foreign_magic_enotty)
{
	struct nproxy_info info;

	errno = 0;
	ASSERT_EQ(-1, ioctl(self->dev, _IOR(0x42, 0x00, struct nproxy_info), &info));
	EXPECT_EQ(ENOTTY, errno);
}

TEST_F(dev, wrong_direction_enotty)
{
	struct nproxy_info info = { 0 };

	errno = 0;
	ASSERT_EQ(-1, ioctl(self->dev, _IOW(NPROXY_IOC_MAGIC, 0x00, struct nproxy_info), &info));
	EXPECT_EQ(ENOTTY, errno);
}

/* Region commands are not device commands. */
TEST_F(dev, region_command_on_device_enotty)
{
	struct nproxy_trigger_write tw = { 0 };

	errno = 0;
	ASSERT_EQ(-1, ioctl(self->dev, NPROXY_IOC_WRITE_TRIGGER, &tw));
	EXPECT_EQ(ENOTTY, errno);
}

/* Shorter than ABI v1 of the structure. */
TEST_F(dev, short_struct_einval)
{
	char buf[8] = { 0 };

	errno = 0;
	ASSERT_EQ(-1, ioctl(self->dev, _IOC(_IOC_READ, NPROXY_IOC_MAGIC, 0x00, 8), buf));
	EXPECT_EQ(EINVAL, errno);
}

/* A newer, longer caller: the tail is zeroed on output. */
TEST_F(dev, longer_struct_tail_zeroed)
{
	struct {
		struct nproxy_info info;
		__u64 future[2];
	} big;

	memset(&big, 0xa5, sizeof(big));
	ASSERT_EQ(0, ioctl(self->dev, _IOC(_IOC_READ, NPROXY_IOC_MAGIC, 0x00, sizeof(big)), &big));
	EXPECT_EQ(NPROXY_ABI_VERSION, big.info.abi_version);
	EXPECT_EQ(0, big.future[0]);
	EXPECT_EQ(0, big.future[1]);
}

/* A longer input struct is accepted only when its unknown tail is zero. */
TEST_F(dev, longer_input_nonzero_tail_e2big)
{
	struct {
		struct nproxy_region_create req;
		__u64 future;
	} big;
	unsigned long cmd = _IOC(_IOC_WRITE, NPROXY_IOC_MAGIC, 0x01, sizeof(big));
	int rfd;

	memset(&big, 0, sizeof(big));
	big.req.n_streams = 1;
	rfd = ioctl(self->dev, cmd, &big);
	ASSERT_LE(0, rfd);
	close(rfd);

	big.future = 1;
	errno = 0;
	ASSERT_EQ(-1, ioctl(self->dev, cmd, &big));
	EXPECT_EQ(E2BIG, errno);
}

static int read_param(const char *name, char *buf, size_t len)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/module/nproxy/parameters/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

static int write_param(const char *name, const char *val)
{
	char path[128];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/sys/module/nproxy/parameters/%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

TEST_F(dev, dev_mode_param_shown_in_octal)
{
	char buf[32];

	ASSERT_EQ(0, read_param("dev_mode", buf, sizeof(buf)));
	EXPECT_STREQ("0600\n", buf);
	/* Read-only after load. */
	EXPECT_EQ(-EACCES, write_param("dev_mode", "0666"));
}

/*
 * sem_poll_ns is bounded to 1000..10000000, both ends included, and
 * GET_INFO reports the value in force.
 */
TEST_F(dev, sem_poll_ns_param_bounded_and_reported)
{
	struct nproxy_info info;
	char old[32];

	ASSERT_EQ(0, read_param("sem_poll_ns", old, sizeof(old)));
	EXPECT_EQ(-EINVAL, write_param("sem_poll_ns", "999"));
	EXPECT_EQ(-EINVAL, write_param("sem_poll_ns", "10000001"));
	EXPECT_EQ(0, write_param("sem_poll_ns", "1000"));
	EXPECT_EQ(0, write_param("sem_poll_ns", "10000000"));
	ASSERT_EQ(0, ioctl(self->dev, NPROXY_IOC_GET_INFO, &info));
	EXPECT_EQ(10000000, info.sem_poll_ns);
	ASSERT_EQ(0, write_param("sem_poll_ns", "5000"));
	ASSERT_EQ(0, ioctl(self->dev, NPROXY_IOC_GET_INFO, &info));
	EXPECT_EQ(5000, info.sem_poll_ns);
	ASSERT_EQ(0, write_param("sem_poll_ns", old));
}

TEST_HARNESS_MAIN
