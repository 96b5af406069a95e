// SPDX-License-Identifier: GPL-2.0
/*
 * The mmap layout (issue 3, point 3): each page at its own offset, one page
 * per mapping, MAP_SHARED only, the info page read-only, nothing
 * executable, no growing; and that what one mapping writes the kernel and
 * other mappings see.
 */
#include "kselftest_harness.h"
#include "kmod_util.h"

#ifndef MREMAP_MAYMOVE
#define MREMAP_MAYMOVE 1
#endif

FIXTURE(map) {
	int dev;
	int rfd;
	long page;
};

FIXTURE_SETUP(map)
{
	self->rfd = -1;
	NP_OPEN_DEV_OR_SKIP(self->dev);
	self->rfd = np_create(self->dev, 2, 4);
	ASSERT_LE(0, self->rfd);
	self->page = np_page_size();
}

FIXTURE_TEARDOWN(map)
{
	if (self->rfd >= 0)
		close(self->rfd);
	if (self->dev >= 0)
		close(self->dev);
}

static int try_map(int fd, size_t len, int prot, int flags, off_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, off);

	if (p == MAP_FAILED)
		return -errno;
	munmap(p, len);
	return 0;
}

TEST_F(map, good_mappings_accepted)
{
	EXPECT_EQ(0, try_map(self->rfd, self->page, PROT_READ | PROT_WRITE, MAP_SHARED,
			     NPROXY_OFF_TRIGGERS));
	EXPECT_EQ(0, try_map(self->rfd, self->page, PROT_READ | PROT_WRITE, MAP_SHARED,
			     NPROXY_OFF_SEMS));
	EXPECT_EQ(0, try_map(self->rfd, self->page, PROT_READ, MAP_SHARED, NPROXY_OFF_INFO));
	EXPECT_EQ(0, try_map(self->rfd, self->page, PROT_READ, MAP_SHARED | MAP_POPULATE,
			     NPROXY_OFF_TRIGGERS));
}

TEST_F(map, wrong_offset_einval)
{
	const off_t bad[] = {
		(off_t)self->page,
		NPROXY_OFF_SEMS - self->page,
		NPROXY_OFF_SEMS + self->page,
		NPROXY_OFF_INFO + self->page,
		NPROXY_OFF_PROXY + self->page,
		0x40000000,
		0x40000000000LL,
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(-EINVAL, try_map(self->rfd, self->page, PROT_READ, MAP_SHARED, bad[i])) {
			TH_LOG("offset %#llx", (unsigned long long)bad[i]);
		}
	}
}

TEST_F(map, wrong_size_einval)
{
	const uint64_t offs[] = { NPROXY_OFF_TRIGGERS, NPROXY_OFF_SEMS, NPROXY_OFF_INFO };
	size_t i;

	for (i = 0; i < 3; i++) {
		EXPECT_EQ(-EINVAL, try_map(self->rfd, 2 * self->page, PROT_READ, MAP_SHARED, offs[i]));
		EXPECT_EQ(-EINVAL, try_map(self->rfd, 16 * self->page, PROT_READ, MAP_SHARED, offs[i]));
	}
}

TEST_F(map, private_mapping_einval)
{
	EXPECT_EQ(-EINVAL, try_map(self->rfd, self->page, PROT_READ | PROT_WRITE, MAP_PRIVATE,
				   NPROXY_OFF_TRIGGERS));
	EXPECT_EQ(-EINVAL, try_map(self->rfd, self->page, PROT_READ | PROT_WRITE, MAP_PRIVATE,
				   NPROXY_OFF_SEMS));
	EXPECT_EQ(-EINVAL, try_map(self->rfd, self->page, PROT_READ, MAP_PRIVATE, NPROXY_OFF_INFO));
}

TEST_F(map, info_write_mapping_eperm)
{
	EXPECT_EQ(-EPERM, try_map(self->rfd, self->page, PROT_READ | PROT_WRITE, MAP_SHARED,
				  NPROXY_OFF_INFO));
	EXPECT_EQ(-EPERM, try_map(self->rfd, self->page, PROT_WRITE, MAP_SHARED, NPROXY_OFF_INFO));
}

/* VM_MAYWRITE is cleared: a read-only info mapping cannot be made writable. */
TEST_F(map, info_mprotect_write_refused)
{
	void *p = mmap(NULL, self->page, PROT_READ, MAP_SHARED, self->rfd, NPROXY_OFF_INFO);

	ASSERT_NE(MAP_FAILED, p);
	errno = 0;
	EXPECT_EQ(-1, mprotect(p, self->page, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	munmap(p, self->page);
}

TEST_F(map, exec_mapping_eperm)
{
	EXPECT_EQ(-EPERM, try_map(self->rfd, self->page, PROT_READ | PROT_EXEC, MAP_SHARED,
				  NPROXY_OFF_TRIGGERS));
	EXPECT_EQ(-EPERM, try_map(self->rfd, self->page, PROT_READ | PROT_EXEC, MAP_SHARED,
				  NPROXY_OFF_SEMS));
}

TEST_F(map, mprotect_exec_refused)
{
	void *p = mmap(NULL, self->page, PROT_READ, MAP_SHARED, self->rfd, NPROXY_OFF_SEMS);

	ASSERT_NE(MAP_FAILED, p);
	errno = 0;
	EXPECT_EQ(-1, mprotect(p, self->page, PROT_READ | PROT_EXEC));
	EXPECT_EQ(EACCES, errno);
	munmap(p, self->page);
}

/* VM_DONTEXPAND: a mapping cannot be grown over memory we never gave out. */
TEST_F(map, mremap_grow_refused)
{
	void *p = mmap(NULL, self->page, PROT_READ, MAP_SHARED, self->rfd, NPROXY_OFF_TRIGGERS);
	void *q;

	ASSERT_NE(MAP_FAILED, p);
	q = mremap(p, self->page, 2 * self->page, MREMAP_MAYMOVE);
	EXPECT_EQ(MAP_FAILED, q);
	if (q != MAP_FAILED)
		munmap(q, 2 * self->page);
	else
		munmap(p, self->page);
}

/* Two mappings of the same page share it: one store, seen by the other. */
TEST_F(map, two_mappings_share_page)
{
	uint64_t *a = np_map(self->rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	uint64_t *b = np_map(self->rfd, NPROXY_OFF_SEMS, PROT_READ);

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	ASSERT_NE(a, b);
	__atomic_fetch_add(&a[1], 9, __ATOMIC_RELEASE);
	EXPECT_EQ(9, np_load_acquire64(&b[1]));
	munmap(a, self->page);
	munmap(b, self->page);
}

/* The pages are distinct: a semaphore add does not touch the triggers. */
TEST_F(map, pages_are_distinct)
{
	uint32_t *trig = np_map(self->rfd, NPROXY_OFF_TRIGGERS, PROT_READ | PROT_WRITE);
	uint64_t *sems = np_map(self->rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	struct nproxy_region_info *info = np_map(self->rfd, NPROXY_OFF_INFO, PROT_READ);

	ASSERT_NE(NULL, trig);
	ASSERT_NE(NULL, sems);
	ASSERT_NE(NULL, info);
	__atomic_store_n(&sems[0], 0x1111, __ATOMIC_RELEASE);
	__atomic_store_n(&trig[0], 0, __ATOMIC_RELEASE);
	EXPECT_EQ(0, np_load_acquire32(&trig[0]));
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, np_load_acquire32(&trig[1]));
	EXPECT_EQ(0x1111, np_load_acquire64(&sems[0]));
	EXPECT_EQ(NPROXY_REGION_MAGIC, info->magic);
	munmap(trig, self->page);
	munmap(sems, self->page);
	munmap(info, self->page);
}

TEST_HARNESS_MAIN
