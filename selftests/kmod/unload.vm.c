// SPDX-License-Identifier: GPL-2.0
/*
 * Module lifetime: nproxy.ko cannot be unloaded while a
 * region fd or a mapping of one exists, and unloads once they are gone.
 * Each test reloads the module afterwards from the .ko next to the build
 * tree (or $NPROXY_KMOD), so the VM runner's final rmmod still finds it.
 *
 * delete_module(O_NONBLOCK), as rmmod calls it, fails with EWOULDBLOCK
 * (== EAGAIN) while the module's refcount is held: that is the kernel's
 * "in use" answer (rmmod prints "Resource temporarily unavailable").
 */
#include <limits.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "kselftest_harness.h"
#include "kmod_util.h"

static int delete_module(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK) ? -errno : 0;
}

static int find_ko(char *path, size_t len)
{
	const char *env = getenv("NPROXY_KMOD");
	char exe[PATH_MAX];
	ssize_t n;

	if (env) {
		snprintf(path, len, "%s", env);
		return access(path, R_OK);
	}
	/* build/selftests/vm/kmod-unload -> kmod/nproxy.ko */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -1;
	exe[n] = 0;
	snprintf(path, len, "%s/../../../kmod/nproxy.ko", dirname(exe));
	return access(path, R_OK);
}

static int load_module_with(const char *path, const char *params)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret;

	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, params, 0) ? -errno : 0;
	close(fd);
	return ret;
}

static int load_module(const char *path)
{
	return load_module_with(path, "");
}

/* Nothing holds the module any more: it unloads, and loads again for what follows. */
static void expect_unload_and_reload(struct __test_metadata *_metadata, const char *ko)
{
	EXPECT_EQ(0, delete_module("nproxy"));
	EXPECT_EQ(0, load_module(ko));
}

FIXTURE(unload) {
	char ko[PATH_MAX];
};

FIXTURE_SETUP(unload)
{
	int dev;

	NP_OPEN_DEV_OR_SKIP(dev);
	close(dev);
	if (find_ko(self->ko, sizeof(self->ko)))
		NP_SKIP("nproxy.ko not found (set NPROXY_KMOD)");
	if (np_stat("regions_live") != 0)
		NP_SKIP("other regions are live; unload tests need an idle module");
}

FIXTURE_TEARDOWN(unload)
{
	/* Leave the module loaded, as the runner expects. */
	if (access(NP_DEV_PATH, F_OK))
		load_module(self->ko);
}

TEST_F(unload, busy_while_device_open)
{
	int dev = open(NP_DEV_PATH, O_RDWR);

	ASSERT_LE(0, dev);
	EXPECT_EQ(-EWOULDBLOCK, delete_module("nproxy"));
	close(dev);
	expect_unload_and_reload(_metadata, self->ko);
}

TEST_F(unload, busy_while_region_fd_open)
{
	int dev = open(NP_DEV_PATH, O_RDWR);
	int rfd;

	ASSERT_LE(0, dev);
	rfd = np_create(dev, 1, 1);
	ASSERT_LE(0, rfd);
	close(dev);
	EXPECT_EQ(-EWOULDBLOCK, delete_module("nproxy"));
	close(rfd);
	expect_unload_and_reload(_metadata, self->ko);
}

TEST_F(unload, busy_while_mapping_exists)
{
	int dev = open(NP_DEV_PATH, O_RDWR);
	void *sems;
	int rfd;

	ASSERT_LE(0, dev);
	rfd = np_create(dev, 1, 1);
	ASSERT_LE(0, rfd);
	sems = np_map(rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, sems);
	close(rfd);
	close(dev);
	EXPECT_EQ(-EWOULDBLOCK, delete_module("nproxy"));
	munmap(sems, np_page_size());
	expect_unload_and_reload(_metadata, self->ko);
}

/* A running program holds the region; closing cancels it and unload works. */
TEST_F(unload, unload_after_closing_running_program)
{
	struct nproxy_prog_step step = np_step(NPROXY_STEP_DELAY, 0, 0, 30000 * NP_MS);
	int dev = open(NP_DEV_PATH, O_RDWR);
	int rfd;

	ASSERT_LE(0, dev);
	rfd = np_create(dev, 1, 0);
	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, np_submit(rfd, &step, 1, NULL));
	close(dev);
	EXPECT_EQ(-EWOULDBLOCK, delete_module("nproxy"));
	close(rfd);
	expect_unload_and_reload(_metadata, self->ko);
}

/*
 * dev_mode is checked when the module loads: permission bits only, never
 * world-writable, or the load fails with EINVAL; an accepted mode is the
 * device node's.
 */
TEST_F(unload, dev_mode_checked_at_load)
{
	static const char *const refused[] = {
		"dev_mode=0666", "dev_mode=0602", "dev_mode=01600", "dev_mode=010600",
	};
	struct stat st;
	size_t i;

	ASSERT_EQ(0, delete_module("nproxy"));
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		EXPECT_EQ(-EINVAL, load_module_with(self->ko, refused[i])) {
			TH_LOG("%s", refused[i]);
			delete_module("nproxy");
		}
	}
	ASSERT_EQ(0, load_module_with(self->ko, "dev_mode=0660"));
	ASSERT_EQ(0, stat(NP_DEV_PATH, &st));
	EXPECT_EQ(0660, st.st_mode & 07777);
	expect_unload_and_reload(_metadata, self->ko);
}

TEST_HARNESS_MAIN
