// SPDX-License-Identifier: GPL-2.0
/*
 * Regions: creation and its bad inputs, the
 * sentinel, the info page, lifetime (freed only when the last fd and the
 * last mapping are gone, observed through the stats), SCM_RIGHTS passing,
 * and the direct trigger/semaphore/state ioctls.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "kmod_util.h"

NP_DEV_FIXTURE(region)

static int create_raw(int dev, struct nproxy_region_create *req)
{
	int fd = ioctl(dev, NPROXY_IOC_CREATE_REGION, req);

	return fd < 0 ? -errno : fd;
}

TEST_F(region, create_returns_cloexec_fd)
{
	int rfd = np_create(self->dev, 2, 4);

	ASSERT_LE(0, rfd);
	EXPECT_EQ(FD_CLOEXEC, fcntl(rfd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(O_RDWR, fcntl(rfd, F_GETFL) & O_ACCMODE);
	close(rfd);
}

TEST_F(region, create_bounds_einval)
{
	EXPECT_EQ(-EINVAL, np_create(self->dev, 0, 1));
	EXPECT_EQ(-EINVAL, np_create(self->dev, NPROXY_MAX_STREAMS + 1, 1));
	EXPECT_EQ(-EINVAL, np_create(self->dev, 1, NPROXY_MAX_SEMS + 1));
	/* The limits themselves are fine. */
	int rfd = np_create(self->dev, NPROXY_MAX_STREAMS, NPROXY_MAX_SEMS);

	ASSERT_LE(0, rfd);
	close(rfd);
}

TEST_F(region, create_unknown_flags_einval)
{
	struct nproxy_region_create req = { .n_streams = 1, .flags = 1 };

	EXPECT_EQ(-EINVAL, create_raw(self->dev, &req));
	req.flags = 0x80000000u;
	EXPECT_EQ(-EINVAL, create_raw(self->dev, &req));
}

TEST_F(region, create_nonzero_pad_or_reserved_einval)
{
	struct nproxy_region_create req = { .n_streams = 1, .pad = 1 };

	EXPECT_EQ(-EINVAL, create_raw(self->dev, &req));
	req.pad = 0;
	req.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, create_raw(self->dev, &req));
	req.reserved[0] = 0;
	req.reserved[1] = 1ULL << 63;
	EXPECT_EQ(-EINVAL, create_raw(self->dev, &req));
}

TEST_F(region, create_bad_pointer_efault)
{
	errno = 0;
	ASSERT_EQ(-1, ioctl(self->dev, NPROXY_IOC_CREATE_REGION, (void *)16));
	EXPECT_EQ(EFAULT, errno);
}

/* Point 2: every trigger word of a new region holds 0xFFFFFFFF. */
TEST_F(region, triggers_start_at_sentinel)
{
	int rfd = np_create(self->dev, NPROXY_MAX_STREAMS, 1);
	struct nproxy_region_state st;
	uint32_t *trig;
	int i;

	ASSERT_LE(0, rfd);
	trig = np_map(rfd, NPROXY_OFF_TRIGGERS, PROT_READ);
	ASSERT_NE(NULL, trig);
	for (i = 0; i < NPROXY_MAX_STREAMS; i++)
		EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, np_load_acquire32(&trig[i]));
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_GET_STATE, &st));
	for (i = 0; i < NPROXY_MAX_STREAMS; i++)
		EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, st.triggers[i]);
	munmap(trig, np_page_size());
	close(rfd);
}

/* Only the first n_streams words are triggers; the rest of the page is 0. */
TEST_F(region, unused_trigger_words_zero)
{
	int rfd = np_create(self->dev, 2, 0);
	uint32_t *trig;

	ASSERT_LE(0, rfd);
	trig = np_map(rfd, NPROXY_OFF_TRIGGERS, PROT_READ);
	ASSERT_NE(NULL, trig);
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, trig[1]);
	EXPECT_EQ(0, trig[2]);
	EXPECT_EQ(0, trig[3]);
	munmap(trig, np_page_size());
	close(rfd);
}

TEST_F(region, info_page_describes_region)
{
	int rfd = np_create(self->dev, 3, 5);
	struct nproxy_region_info *info;
	struct nproxy_region_state st;

	ASSERT_LE(0, rfd);
	info = np_map(rfd, NPROXY_OFF_INFO, PROT_READ);
	ASSERT_NE(NULL, info);
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_GET_STATE, &st));
	EXPECT_EQ(NPROXY_REGION_MAGIC, info->magic);
	EXPECT_EQ(NPROXY_ABI_VERSION, info->abi_version);
	EXPECT_EQ(st.region_id, info->region_id);
	EXPECT_NE(0, info->region_id);
	EXPECT_EQ(3, info->n_streams);
	EXPECT_EQ(5, info->n_sems);
	EXPECT_EQ(NPROXY_PROG_NONE, info->prog_state);
	EXPECT_EQ(0, info->prog_seq);
	EXPECT_EQ(0, info->triggers_written);
	EXPECT_EQ((uint32_t)getpid(), st.owner_pid);
	EXPECT_EQ(3, st.rank);
	EXPECT_EQ(7, st.gid);
	munmap(info, np_page_size());
	close(rfd);
}

TEST_F(region, ids_are_unique)
{
	struct nproxy_region_state a, b;
	int ra = np_create(self->dev, 1, 0), rb = np_create(self->dev, 1, 0);

	ASSERT_LE(0, ra);
	ASSERT_LE(0, rb);
	ASSERT_EQ(0, ioctl(ra, NPROXY_IOC_GET_STATE, &a));
	ASSERT_EQ(0, ioctl(rb, NPROXY_IOC_GET_STATE, &b));
	EXPECT_NE(a.region_id, b.region_id);
	close(ra);
	close(rb);
}

/* Point 2 + stats: freed when the last fd goes. */
TEST_F(region, freed_on_last_close)
{
	long long live0 = np_stat("regions_live");
	long long created0 = np_stat("regions_created");
	int rfd, dup_fd;

	ASSERT_LE(0, live0);
	rfd = np_create(self->dev, 1, 1);
	ASSERT_LE(0, rfd);
	EXPECT_EQ(live0 + 1, np_stat("regions_live"));
	EXPECT_EQ(created0 + 1, np_stat("regions_created"));
	dup_fd = dup(rfd);
	close(rfd);
	EXPECT_EQ(live0 + 1, np_stat("regions_live"));
	close(dup_fd);
	EXPECT_EQ(live0, np_stat("regions_live"));
}

/* A mapping keeps the region alive after its last fd is closed. */
TEST_F(region, mapping_keeps_region_alive)
{
	long long live0 = np_stat("regions_live");
	uint64_t *sems;
	int rfd;

	rfd = np_create(self->dev, 1, 1);
	ASSERT_LE(0, rfd);
	sems = np_map(rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, sems);
	close(rfd);
	EXPECT_EQ(live0 + 1, np_stat("regions_live"));
	__atomic_fetch_add(&sems[0], 1, __ATOMIC_RELEASE);	/* still usable */
	EXPECT_EQ(1, np_load_acquire64(&sems[0]));
	ASSERT_EQ(0, munmap(sems, np_page_size()));
	EXPECT_EQ(live0, np_stat("regions_live"));
}

/* A region passed over SCM_RIGHTS outlives its creator's fd. */
TEST_F(region, scm_rights_keeps_region_alive)
{
	long long live0 = np_stat("regions_live");
	int sv[2], rfd, got;
	struct nproxy_region_state st;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	rfd = np_create(self->dev, 2, 1);
	ASSERT_LE(0, rfd);
	ASSERT_EQ(0, np_send_fd(sv[0], rfd));
	close(rfd);
	got = np_recv_fd(sv[1]);
	ASSERT_LE(0, got);
	EXPECT_EQ(live0 + 1, np_stat("regions_live"));
	ASSERT_EQ(0, ioctl(got, NPROXY_IOC_GET_STATE, &st));
	EXPECT_EQ(2, st.n_streams);
	close(got);
	EXPECT_EQ(live0, np_stat("regions_live"));
	close(sv[0]);
	close(sv[1]);
}

/* Point 4 direct ioctls: a trigger written by ioctl is seen in the mapping. */
TEST_F(region, write_trigger_ioctl_visible_in_mapping)
{
	int rfd = np_create(self->dev, 2, 0);
	struct nproxy_trigger_write tw = { .stream = 1, .value = 42 };
	struct nproxy_region_info *info;
	uint32_t *trig;

	ASSERT_LE(0, rfd);
	trig = np_map(rfd, NPROXY_OFF_TRIGGERS, PROT_READ | PROT_WRITE);
	info = np_map(rfd, NPROXY_OFF_INFO, PROT_READ);
	ASSERT_NE(NULL, trig);
	ASSERT_NE(NULL, info);
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_WRITE_TRIGGER, &tw));
	EXPECT_EQ(42, np_load_acquire32(&trig[1]));
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, np_load_acquire32(&trig[0]));
	EXPECT_EQ(1, info->triggers_written);
	EXPECT_NE(0, info->last_trigger_ns);
	/* The host consumes a trigger with a plain store of 0. */
	__atomic_store_n(&trig[1], 0, __ATOMIC_RELEASE);
	struct nproxy_region_state st;

	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_GET_STATE, &st));
	EXPECT_EQ(0, st.triggers[1]);
	EXPECT_EQ(1, st.triggers_written);
	close(rfd);
}

TEST_F(region, write_trigger_bad_input_einval)
{
	int rfd = np_create(self->dev, 2, 0);
	struct nproxy_trigger_write tw = { .stream = 2, .value = 1 };

	ASSERT_LE(0, rfd);
	errno = 0;
	EXPECT_EQ(-1, ioctl(rfd, NPROXY_IOC_WRITE_TRIGGER, &tw));
	EXPECT_EQ(EINVAL, errno);
	tw.stream = 0;
	tw.reserved = 1;
	errno = 0;
	EXPECT_EQ(-1, ioctl(rfd, NPROXY_IOC_WRITE_TRIGGER, &tw));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(-1, ioctl(rfd, NPROXY_IOC_WRITE_TRIGGER, (void *)8));
	EXPECT_EQ(EFAULT, errno);
	close(rfd);
}

TEST_F(region, sem_ioctls_match_mapping)
{
	int rfd = np_create(self->dev, 1, 4);
	struct nproxy_sem_op op = { .sem = 3, .value = 10 };
	uint64_t *sems;

	ASSERT_LE(0, rfd);
	sems = np_map(rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, sems);
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_SEM_SET, &op));
	EXPECT_EQ(10, np_load_acquire64(&sems[3]));
	op.value = 5;
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_SEM_INC, &op));
	EXPECT_EQ(15, np_load_acquire64(&sems[3]));
	__atomic_fetch_add(&sems[3], 2, __ATOMIC_RELEASE);
	op.value = 0;
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_SEM_GET, &op));
	EXPECT_EQ(17, op.value);
	EXPECT_EQ(0, np_load_acquire64(&sems[0]));
	close(rfd);
}

TEST_F(region, sem_ioctl_bad_input)
{
	int rfd = np_create(self->dev, 1, 2);
	struct nproxy_sem_op op = { .sem = 2 };
	unsigned long cmds[] = { NPROXY_IOC_SEM_GET, NPROXY_IOC_SEM_SET, NPROXY_IOC_SEM_INC };
	size_t i;

	ASSERT_LE(0, rfd);
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		op.sem = 2;
		op.pad = 0;
		errno = 0;
		EXPECT_EQ(-1, ioctl(rfd, cmds[i], &op));
		EXPECT_EQ(EINVAL, errno);
		op.sem = 0;
		op.pad = 1;
		errno = 0;
		EXPECT_EQ(-1, ioctl(rfd, cmds[i], &op));
		EXPECT_EQ(EINVAL, errno);
		errno = 0;
		EXPECT_EQ(-1, ioctl(rfd, cmds[i], (void *)8));
		EXPECT_EQ(EFAULT, errno);
	}
	close(rfd);
}

/* A region with no semaphores refuses every semaphore index. */
TEST_F(region, zero_sems_refuses_sem_ops)
{
	int rfd = np_create(self->dev, 1, 0);
	struct nproxy_sem_op op = { .sem = 0 };

	ASSERT_LE(0, rfd);
	errno = 0;
	EXPECT_EQ(-1, ioctl(rfd, NPROXY_IOC_SEM_GET, &op));
	EXPECT_EQ(EINVAL, errno);
	close(rfd);
}

TEST_F(region, unknown_region_command_enotty)
{
	int rfd = np_create(self->dev, 1, 0);
	struct nproxy_info info;

	ASSERT_LE(0, rfd);
	errno = 0;
	EXPECT_EQ(-1, ioctl(rfd, _IO(NPROXY_IOC_MAGIC, 0x30)));
	EXPECT_EQ(ENOTTY, errno);
	/* Device commands are not region commands. */
	errno = 0;
	EXPECT_EQ(-1, ioctl(rfd, NPROXY_IOC_GET_INFO, &info));
	EXPECT_EQ(ENOTTY, errno);
	/* _IO command with a size encoded. */
	errno = 0;
	EXPECT_EQ(-1, ioctl(rfd, _IOC(_IOC_NONE, NPROXY_IOC_MAGIC, 0x21, 8)));
	EXPECT_EQ(ENOTTY, errno);
	close(rfd);
}

TEST_F(region, get_state_bad_pointer_efault)
{
	int rfd = np_create(self->dev, 1, 0);

	ASSERT_LE(0, rfd);
	errno = 0;
	EXPECT_EQ(-1, ioctl(rfd, NPROXY_IOC_GET_STATE, (void *)8));
	EXPECT_EQ(EFAULT, errno);
	close(rfd);
}

/*
 * GET_STATE reports the region's own streams only: a word past n_streams
 * on the trigger page, which userspace may write, is reported as 0.
 */
TEST_F(region, get_state_reports_only_own_streams)
{
	int rfd = np_create(self->dev, 3, 1);
	struct nproxy_region_state st;
	uint32_t *trig;
	int i;

	ASSERT_LE(0, rfd);
	trig = np_map(rfd, NPROXY_OFF_TRIGGERS, PROT_READ | PROT_WRITE);
	ASSERT_NE(NULL, trig);
	trig[2] = 0x1234;
	trig[3] = 0x55;
	ASSERT_EQ(0, ioctl(rfd, NPROXY_IOC_GET_STATE, &st));
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, st.triggers[0]);
	EXPECT_EQ(0x1234, st.triggers[2]);
	for (i = 3; i < NPROXY_MAX_STREAMS; i++)
		EXPECT_EQ(0, st.triggers[i]);
	munmap(trig, np_page_size());
	close(rfd);
}

TEST_HARNESS_MAIN
