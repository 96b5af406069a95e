// SPDX-License-Identifier: GPL-2.0
/*
 * Handshake pages as a fresh region presents them, on the automatic backend
 * (memfd on the host, kmod in the VM with NPROXY_HANDSHAKE=kmod).
 */
#include "kselftest_harness.h"
#include "handshake_test.h"

TEST(triggers_start_at_sentinel)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, NPROXY_MAX_STREAMS, 1);
	uint32_t i;

	ASSERT_NE(NULL, hs);
	for (i = 0; i < NPROXY_MAX_STREAMS; i++)
		EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(nproxy_hs_trigger(hs, i)));
	nproxy_hs_close(hs);
}

TEST(unused_trigger_words_read_zero)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 2, 1);
	volatile uint32_t *page;

	ASSERT_NE(NULL, hs);
	page = nproxy_hs_trigger(hs, 0);
	ASSERT_NE(NULL, page);
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(&page[1]));
	/* Words past n_streams are not triggers: the layout says they read 0. */
	EXPECT_EQ(0U, nproxy_trigger_load(&page[2]));
	EXPECT_EQ(0U, nproxy_trigger_load(&page[3]));
	nproxy_hs_close(hs);
}

TEST(sems_start_at_zero)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 1, NPROXY_MAX_SEMS);
	uint32_t i;

	ASSERT_NE(NULL, hs);
	for (i = 0; i < NPROXY_MAX_SEMS; i++)
		EXPECT_EQ(0ULL, nproxy_sem_load(nproxy_hs_sem(hs, i)));
	nproxy_hs_close(hs);
}

TEST(info_page_describes_region)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 3, 17);
	const volatile struct nproxy_region_info *info;

	ASSERT_NE(NULL, hs);
	info = nproxy_hs_info(hs);
	ASSERT_NE(NULL, info);
	EXPECT_EQ(NPROXY_REGION_MAGIC, info->magic);
	EXPECT_EQ((uint32_t)NPROXY_ABI_VERSION, info->abi_version);
	EXPECT_EQ(3U, info->n_streams);
	EXPECT_EQ(17U, info->n_sems);
	EXPECT_EQ((uint32_t)NPROXY_PROG_NONE, info->prog_state);
	EXPECT_EQ(0ULL, info->prog_seq);
	EXPECT_EQ(0ULL, info->triggers_written);
	EXPECT_EQ(0ULL, info->events_signalled);
	EXPECT_EQ(3U, nproxy_hs_n_streams(hs));
	EXPECT_EQ(17U, nproxy_hs_n_sems(hs));
	nproxy_hs_close(hs);
}

TEST(region_ids_are_unique)
{
	struct nproxy_hs *a = hs_test_open(NPROXY_HS_AUTO, 1, 0);
	struct nproxy_hs *b = hs_test_open(NPROXY_HS_AUTO, 1, 0);

	ASSERT_NE(NULL, a);
	ASSERT_NE(NULL, b);
	EXPECT_NE(nproxy_hs_info(a)->region_id, nproxy_hs_info(b)->region_id);
	nproxy_hs_close(b);
	nproxy_hs_close(a);
}

/*
 * The info page is the device's: the host's mapping of it must not be
 * writable, on both backends.  Checked with read() into it, which the
 * kernel refuses with EFAULT (a store would raise SIGSEGV, which the
 * sanitizers intercept).
 */
TEST(info_page_rejects_writes)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 1, 0);
	const uint32_t junk = 0xdeadbeef;
	int pipefd[2];

	ASSERT_NE(NULL, hs);
	ASSERT_EQ(0, pipe(pipefd));
	ASSERT_EQ((ssize_t)sizeof(junk), write(pipefd[1], &junk, sizeof(junk)));
	EXPECT_EQ(-1, read(pipefd[0], (void *)nproxy_hs_info(hs), sizeof(junk)));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(NPROXY_REGION_MAGIC, nproxy_hs_info(hs)->magic);
	close(pipefd[0]);
	close(pipefd[1]);
	nproxy_hs_close(hs);
}

TEST(out_of_range_index_gives_null)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 2, 5);

	ASSERT_NE(NULL, hs);
	EXPECT_NE(NULL, nproxy_hs_trigger(hs, 1));
	EXPECT_EQ(NULL, nproxy_hs_trigger(hs, 2));
	EXPECT_EQ(NULL, nproxy_hs_trigger(hs, UINT32_MAX));
	EXPECT_NE(NULL, nproxy_hs_sem(hs, 4));
	EXPECT_EQ(NULL, nproxy_hs_sem(hs, 5));
	nproxy_hs_close(hs);
}

/* The whole point of the gate: a clear is visible as 0, not the sentinel. */
TEST(trigger_clear_stores_zero)
{
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 1, 0);
	volatile uint32_t *t;

	ASSERT_NE(NULL, hs);
	t = nproxy_hs_trigger(hs, 0);
	nproxy_trigger_clear(t);
	EXPECT_EQ(0U, nproxy_trigger_load(t));
	nproxy_trigger_store(t, NPROXY_TRIGGER_SENTINEL);
	EXPECT_EQ(NPROXY_TRIGGER_SENTINEL, nproxy_trigger_load(t));
	nproxy_hs_close(hs);
}

#define SEM_ADDS_PER_THREAD 20000

static void *sem_adder(void *arg)
{
	volatile uint64_t *sem = arg;
	int i;

	for (i = 0; i < SEM_ADDS_PER_THREAD; i++)
		nproxy_sem_add(sem, 1);
	return NULL;
}

TEST(sem_add_is_atomic_across_threads)
{
	enum { THREADS = 4 };
	struct nproxy_hs *hs = hs_test_open(NPROXY_HS_AUTO, 1, 1);
	pthread_t th[THREADS];
	int i;

	ASSERT_NE(NULL, hs);
	for (i = 0; i < THREADS; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, sem_adder, (void *)nproxy_hs_sem(hs, 0)));
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	EXPECT_EQ((uint64_t)THREADS * SEM_ADDS_PER_THREAD, nproxy_sem_load(nproxy_hs_sem(hs, 0)));
	nproxy_hs_close(hs);
}

TEST_HARNESS_MAIN
