// SPDX-License-Identifier: GPL-2.0
/*
 * The mmap layout: each page at its own offset, one page
 * per mapping, MAP_SHARED only, the info page read-only, nothing
 * executable, no growing; and that what one mapping writes the kernel and
 * other mappings see.  A mapping stays valid whatever happens to
 * the process's page tables (MADV_DONTNEED, MADV_PAGEOUT, fork, mremap):
 * the next touch faults the region's own page back in, never SIGBUS.
 */
#include <sys/wait.h>

#include "kselftest_harness.h"
#include "kmod_util.h"

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

/* A read-only mapping of the page at off cannot be mprotect()ed to prot. */
static void mprotect_refused(struct __test_metadata *_metadata, int fd, size_t len, off_t off,
			     int prot)
{
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);

	ASSERT_NE(MAP_FAILED, p);
	errno = 0;
	EXPECT_EQ(-1, mprotect(p, len, prot));
	EXPECT_EQ(EACCES, errno);
	munmap(p, len);
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
	mprotect_refused(_metadata, self->rfd, self->page, NPROXY_OFF_INFO,
			 PROT_READ | PROT_WRITE);
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
	mprotect_refused(_metadata, self->rfd, self->page, NPROXY_OFF_SEMS,
			 PROT_READ | PROT_EXEC);
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

/*
 * The three pages of one region, mapped, with data the kernel wrote: a
 * trigger word (WRITE_TRIGGER ioctl) and a semaphore (SEM_SET ioctl).
 */
struct mapped {
	uint32_t *trig;
	uint64_t *sems;
	struct nproxy_region_info *info;
	uint32_t id;
};

static int map_all(int rfd, struct mapped *m)
{
	struct nproxy_trigger_write tw = { .stream = 1, .value = 0x1234 };
	struct nproxy_sem_op op = { .sem = 2, .value = 77 };
	struct nproxy_region_state st;

	m->trig = np_map(rfd, NPROXY_OFF_TRIGGERS, PROT_READ | PROT_WRITE);
	m->sems = np_map(rfd, NPROXY_OFF_SEMS, PROT_READ | PROT_WRITE);
	m->info = np_map(rfd, NPROXY_OFF_INFO, PROT_READ);
	if (!m->trig || !m->sems || !m->info)
		return -1;
	if (ioctl(rfd, NPROXY_IOC_WRITE_TRIGGER, &tw) || ioctl(rfd, NPROXY_IOC_SEM_SET, &op) ||
	    ioctl(rfd, NPROXY_IOC_GET_STATE, &st))
		return -1;
	m->id = st.region_id;
	return 0;
}

static void unmap_all(struct mapped *m, long page)
{
	munmap(m->trig, page);
	munmap(m->sems, page);
	munmap(m->info, page);
}

/* 0 when every page reads what the kernel wrote (a SIGBUS kills the test). */
static int check_data(const struct mapped *m)
{
	if (np_load_acquire32(&m->trig[0]) != NPROXY_TRIGGER_SENTINEL ||
	    np_load_acquire32(&m->trig[1]) != 0x1234)
		return 1;
	if (np_load_acquire64(&m->sems[2]) != 77)
		return 2;
	if (m->info->magic != NPROXY_REGION_MAGIC || m->info->region_id != m->id ||
	    m->info->triggers_written != 1)
		return 3;
	return 0;
}

static int dontneed_all(const struct mapped *m, long page)
{
	return madvise(m->trig, page, MADV_DONTNEED) ||
	       madvise(m->sems, page, MADV_DONTNEED) ||
	       madvise(m->info, page, MADV_DONTNEED);
}

/* MADV_DONTNEED then touch once read SIGBUS; it must read the same data. */
TEST_F(map, dontneed_then_touch_reads_region_data)
{
	struct nproxy_sem_op op = { .sem = 3 };
	struct mapped m;

	ASSERT_EQ(0, map_all(self->rfd, &m));
	ASSERT_EQ(0, check_data(&m));
	ASSERT_EQ(0, dontneed_all(&m, self->page));
	EXPECT_EQ(0, check_data(&m));
	/* A store after DONTNEED lands in the region, not in a fresh page. */
	ASSERT_EQ(0, dontneed_all(&m, self->page));
	__atomic_fetch_add(&m.sems[3], 5, __ATOMIC_RELEASE);
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_SEM_GET, &op));
	EXPECT_EQ(5, op.value);
	unmap_all(&m, self->page);
}

/* DONTNEED before the first touch, and a kernel write while no PTE exists. */
TEST_F(map, dontneed_before_first_touch)
{
	struct nproxy_trigger_write tw = { .stream = 0, .value = 0x55 };
	uint32_t *trig = np_map(self->rfd, NPROXY_OFF_TRIGGERS, PROT_READ | PROT_WRITE);

	ASSERT_NE(NULL, trig);
	ASSERT_EQ(0, madvise(trig, self->page, MADV_DONTNEED));
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_WRITE_TRIGGER, &tw));
	EXPECT_EQ(0x55, np_load_acquire32(&trig[0]));
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, np_load_acquire32(&trig[1]));
	munmap(trig, self->page);
}

/* MADV_PAGEOUT / MADV_COLD: accepted or refused, the data stays. */
TEST_F(map, pageout_keeps_data)
{
	struct mapped m;

	ASSERT_EQ(0, map_all(self->rfd, &m));
	ASSERT_EQ(0, check_data(&m));
	madvise(m.sems, self->page, MADV_PAGEOUT);
	madvise(m.info, self->page, MADV_COLD);
	EXPECT_EQ(0, check_data(&m));
	unmap_all(&m, self->page);
}

/*
 * Fork after DONTNEED: the child's copy of the mapping has no PTEs either;
 * it reads the region's data and its store reaches the region.
 */
TEST_F(map, fork_after_dontneed_child_reads_and_writes)
{
	struct nproxy_sem_op op = { .sem = 1 };
	struct mapped m;
	int status;
	pid_t child;

	ASSERT_EQ(0, map_all(self->rfd, &m));
	ASSERT_EQ(0, check_data(&m));
	ASSERT_EQ(0, dontneed_all(&m, self->page));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		int bad = check_data(&m);

		__atomic_store_n(&m.sems[1], 9, __ATOMIC_RELEASE);
		/* And again after DONTNEED in the child itself. */
		if (!bad && dontneed_all(&m, self->page))
			bad = 10;
		if (!bad)
			bad = check_data(&m);
		_exit(bad);
	}
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("child killed by signal %d", WTERMSIG(status));
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(0, ioctl(self->rfd, NPROXY_IOC_SEM_GET, &op));
	EXPECT_EQ(9, op.value);
	EXPECT_EQ(0, check_data(&m));
	unmap_all(&m, self->page);
}

/* A fork child that never touched the page before the parent's DONTNEED. */
TEST_F(map, fork_child_of_untouched_mapping)
{
	struct mapped m;
	int status;
	pid_t child;

	ASSERT_EQ(0, map_all(self->rfd, &m));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0)
		_exit(check_data(&m));
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) {
		TH_LOG("child killed by signal %d", WTERMSIG(status));
	}
	EXPECT_EQ(0, WEXITSTATUS(status));
	unmap_all(&m, self->page);
}

/*
 * mremap: moving a mapping keeps it working (and DONTNEED after the move);
 * MREMAP_DONTUNMAP is refused (VM_DONTEXPAND) with EINVAL.
 */
TEST_F(map, mremap_move_keeps_mapping)
{
	struct mapped m;
	void *hole, *moved;

	ASSERT_EQ(0, map_all(self->rfd, &m));
	ASSERT_EQ(0, check_data(&m));
	hole = mmap(NULL, self->page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	moved = mremap(m.sems, self->page, self->page, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
	ASSERT_EQ(hole, moved);
	m.sems = moved;
	EXPECT_EQ(0, check_data(&m));
	ASSERT_EQ(0, madvise(m.sems, self->page, MADV_DONTNEED));
	EXPECT_EQ(0, check_data(&m));

	errno = 0;
	EXPECT_EQ(MAP_FAILED, mremap(m.trig, self->page, self->page,
				     MREMAP_MAYMOVE | MREMAP_DONTUNMAP));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, check_data(&m));
	unmap_all(&m, self->page);
}

/*
 * The mapping outlives the fd, and DONTNEED then touch still works after
 * the last fd is closed: the mapping keeps the region alive.
 */
TEST_F(map, mapping_outlives_fd_across_dontneed)
{
	long long live = np_stat("regions_live");
	struct mapped m;

	ASSERT_EQ(0, map_all(self->rfd, &m));
	close(self->rfd);
	self->rfd = -1;
	EXPECT_EQ(live, np_stat("regions_live"));
	ASSERT_EQ(0, dontneed_all(&m, self->page));
	EXPECT_EQ(0, check_data(&m));
	unmap_all(&m, self->page);
}

/* Writes through /proc/self/mem cannot reach the read-only info page. */
TEST_F(map, info_page_not_writable_through_proc_mem)
{
	struct nproxy_region_info *info = np_map(self->rfd, NPROXY_OFF_INFO, PROT_READ);
	uint32_t magic = 0;
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);

	ASSERT_NE(NULL, info);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, madvise(info, self->page, MADV_DONTNEED));
	EXPECT_EQ(sizeof(magic), pread(fd, &magic, sizeof(magic), (off_t)(uintptr_t)info));
	EXPECT_EQ(NPROXY_REGION_MAGIC, magic);
	magic = 0;
	EXPECT_EQ(-1, pwrite(fd, &magic, sizeof(magic), (off_t)(uintptr_t)info));
	EXPECT_EQ(NPROXY_REGION_MAGIC, info->magic);
	close(fd);
	munmap(info, self->page);
}

/*
 * MADV_REMOVE (fallocate punch-hole) never applies to a region page: a
 * mapping that may become writable (trigger, sem, proxy-state pages, even
 * mapped read-only) reaches fallocate and gets ENODEV; the info page, whose
 * mappings can never be writable, is refused before that with EACCES.
 */
TEST_F(map, madv_remove_errnos)
{
	static const struct {
		off_t off;
		int prot;
		int err;
	} cases[] = {
		{ NPROXY_OFF_TRIGGERS, PROT_READ | PROT_WRITE, ENODEV },
		{ NPROXY_OFF_TRIGGERS, PROT_READ, ENODEV },
		{ NPROXY_OFF_SEMS, PROT_READ, ENODEV },
		{ NPROXY_OFF_PROXY, PROT_READ, ENODEV },
		{ NPROXY_OFF_INFO, PROT_READ, EACCES },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		void *p = mmap(NULL, self->page, cases[i].prot, MAP_SHARED, self->rfd, cases[i].off);

		ASSERT_NE(MAP_FAILED, p);
		errno = 0;
		EXPECT_EQ(-1, madvise(p, self->page, MADV_REMOVE));
		EXPECT_EQ(cases[i].err, errno) {
			TH_LOG("offset %#lx prot %d", (long)cases[i].off, cases[i].prot);
		}
		munmap(p, self->page);
	}
}

TEST_HARNESS_MAIN
