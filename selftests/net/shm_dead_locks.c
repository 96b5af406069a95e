// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy_net_shm_break_dead_locks() (lib/net/net_shm_locks.c): a region
 * lock that stays held for the whole window is released and the engine
 * moves data again; one let go within the window is left alone; headers
 * the process's own region does not vouch for (no own region, another
 * version) are never touched; NPROXY_SHM_BREAK_LOCKS=0 touches nothing.
 * A lock held by this test's own thread stands for one a dead process
 * held: nothing in the breaker asks who holds it.  Each case runs in a
 * forked child (the setting and the mappings are per process).
 */
#include "kselftest_harness.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/net.h>
#include "nproxy_test.h"
#include "self_pair.h"

/* The provider's header, as lib/net/net_shm_locks.c expects it. */
#define HDR_PID		4
#define HDR_BASE_ADDR	16
#define HDR_LOCK	24
#define FAKE_BYTES	4096

/* This process's own provider region, mapped by the provider: its start. */
static char *own_region(void)
{
	char line[512], prefix[64];
	unsigned long lo;
	FILE *f = fopen("/proc/self/maps", "r");
	char *at = NULL;

	if (!f)
		return NULL;
	snprintf(prefix, sizeof(prefix), "/dev/shm/%d:", (int)getpid());
	while (!at && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (path && !strncmp(path, prefix, strlen(prefix)) && sscanf(line, "%lx", &lo) == 1)
			at = (char *)lo;
	}
	fclose(f);
	return at;
}

static int *lock_of(char *region)
{
	return (int *)(region + HDR_LOCK);
}

/*
 * The lock's word as this libc writes it free and held.  The tests set
 * the word instead of taking the lock: a holder that never lets go is
 * what is being stood for, and a race detector would otherwise see this
 * thread take a lock the library then frees behind its back.
 */
static int word_of(bool held)
{
	pthread_spinlock_t l;

	pthread_spin_init(&l, PTHREAD_PROCESS_SHARED);
	if (held)
		pthread_spin_lock(&l);
	return (int)l;
}

/* Hold a free lock (false: it was not free). */
static bool hold(int *lock)
{
	int free_word = word_of(false);

	return __atomic_compare_exchange_n(lock, &free_word, word_of(true), false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static void let_go(int *lock)
{
	__atomic_store_n(lock, word_of(false), __ATOMIC_RELEASE);
}

/* Free now. */
static bool lock_free(int *lock)
{
	return __atomic_load_n(lock, __ATOMIC_ACQUIRE) == word_of(false);
}

/* A held lock that nobody lets go is released, and a block moves again. */
static int a_lock_held_for_good_is_released(void)
{
	struct nproxy_net *net = open_single();
	char *region;
	int rc = 0;

	if (!net)
		return 1;
	region = own_region();
	if (!region)
		return 2;
	if (!hold(lock_of(region)))
		return 3;	/* held before the test held it */
	if (nproxy_net_shm_break_dead_locks(50) != 1)
		rc = 4;
	else if (!lock_free(lock_of(region)))
		rc = 5;
	for (size_t i = 0; !rc && i < 1024; i++)
		self_pair_buf[i] = (uint8_t)(i * 3 + 1);
	memset(self_pair_buf + 1024, 0, 1024);
	if (!rc && run_pair(net, 0, 1024, 1024) != NPROXY_SUCCESS)
		rc = 6;
	if (!rc && memcmp(self_pair_buf, self_pair_buf + 1024, 1024))
		rc = 7;
	nproxy_net_close(net);
	return rc;
}

static void *let_go_after_20_ms(void *arg)
{
	const struct timespec t = { 0, 20 * 1000000 };

	nanosleep(&t, NULL);
	let_go(arg);
	return NULL;
}

/* A holder that lets go within the window keeps its lock: nothing released. */
static int a_lock_let_go_in_the_window_is_left(void)
{
	struct nproxy_net *net = open_single();
	pthread_t th;
	char *region;
	int rc = 0;

	if (!net)
		return 1;
	region = own_region();
	if (!region || !hold(lock_of(region)))
		return 2;
	if (pthread_create(&th, NULL, let_go_after_20_ms, lock_of(region)))
		return 3;
	if (nproxy_net_shm_break_dead_locks(2000) != 0)
		rc = 4;
	pthread_join(th, NULL);
	if (!rc && !lock_free(lock_of(region)))
		rc = 5;
	nproxy_net_close(net);
	return rc;
}

/*
 * A file named as the provider names this process's regions, its header
 * holding this pid and a held lock; base_addr its own address when
 * vouched, else not; version as given.  Returns the mapping or NULL.
 */
static char *fake_region(int index, bool vouched, uint8_t version)
{
	char path[96];
	char *p;
	int fd;

	snprintf(path, sizeof(path), "/dev/shm/%d:%d:%d", (int)getpid(), (int)getuid(), index);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, FAKE_BYTES)) {
		close(fd);
		unlink(path);
		return NULL;
	}
	p = mmap(NULL, FAKE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	/* Still mapped, with its name in /proc/self/maps, until the test
	 * unmaps it: the name goes once the breaker has looked. */
	if (p == MAP_FAILED) {
		unlink(path);
		return NULL;
	}
	p[0] = (char)version;
	*(int *)(p + HDR_PID) = getpid();
	*(void **)(p + HDR_BASE_ADDR) = vouched ? p : p + 4096;
	*lock_of(p) = word_of(true);
	return p;
}

static void fake_done(char *p, int index)
{
	char path[96];

	snprintf(path, sizeof(path), "/dev/shm/%d:%d:%d", (int)getpid(), (int)getuid(), index);
	unlink(path);
	munmap(p, FAKE_BYTES);
}

/* No region of this process vouches for the layout: nothing is touched. */
static int no_own_region_touches_nothing(void)
{
	char *p = fake_region(900, false, 4);
	int rc = 0;

	if (!p)
		return 1;
	if (nproxy_net_shm_break_dead_locks(20) != 0)
		rc = 2;
	else if (lock_free(lock_of(p)))
		rc = 3;
	fake_done(p, 900);
	return rc;
}

/* The own region vouches for one version: a header of another is untouched. */
static int another_version_is_untouched(void)
{
	struct nproxy_net *net = open_single();
	char *region, *p;
	int rc = 0;

	if (!net)
		return 1;
	region = own_region();
	if (!region)
		return 2;
	p = fake_region(901, true, (uint8_t)(region[0] + 1));
	if (!p)
		return 3;
	if (nproxy_net_shm_break_dead_locks(20) != 0)
		rc = 4;
	else if (lock_free(lock_of(p)))
		rc = 5;
	fake_done(p, 901);
	nproxy_net_close(net);
	return rc;
}

/*
 * A vouched-for header of this layout, its lock held, is released by each
 * of `calls` calls in turn (held again before each after the first): the
 * fake above is fair, and a second call runs too (the calls are
 * serialised, and one that kept the serialising lock would hang the next).
 */
static int release_vouched_fake(int index, int calls)
{
	struct nproxy_net *net = open_single();
	char *region, *p;
	int rc = 0;

	if (!net)
		return 1;
	region = own_region();
	if (!region)
		return 2;
	p = fake_region(index, false, (uint8_t)region[0]);
	if (!p)
		return 3;
	for (int i = 0; i < calls && !rc; i++) {
		if (i && !hold(lock_of(p)))
			rc = 4;
		else if (nproxy_net_shm_break_dead_locks(20) != 1)
			rc = 5;
		else if (!lock_free(lock_of(p)))
			rc = 6;
	}
	fake_done(p, index);
	nproxy_net_close(net);
	return rc;
}

static int a_fake_of_the_same_layout_is_released(void)
{
	return release_vouched_fake(902, 1);
}

static int calls_in_turn_each_do_their_work(void)
{
	return release_vouched_fake(903, 2);
}

/* NPROXY_SHM_BREAK_LOCKS=0: a lock held for good stays held. */
static int off_touches_nothing(void)
{
	struct nproxy_net *net = open_single();
	char *region;
	int rc = 0;

	if (!net)
		return 1;
	region = own_region();
	if (!region || !hold(lock_of(region)))
		return 2;
	setenv("NPROXY_SHM_BREAK_LOCKS", "0", 1);
	if (nproxy_net_shm_break_dead_locks(20) != 0)
		rc = 3;
	else if (lock_free(lock_of(region)))
		rc = 4;
	let_go(lock_of(region));
	nproxy_net_close(net);
	return rc;
}

TEST(a_lock_held_for_good_is_released_and_data_moves_again)
{
	ASSERT_EQ(0, in_child(a_lock_held_for_good_is_released));
}

TEST(a_lock_let_go_within_the_window_is_left_to_its_holder)
{
	ASSERT_EQ(0, in_child(a_lock_let_go_in_the_window_is_left));
}

TEST(without_an_own_region_to_vouch_for_the_layout_nothing_is_touched)
{
	ASSERT_EQ(0, in_child(no_own_region_touches_nothing));
}

TEST(a_header_of_another_version_is_untouched)
{
	ASSERT_EQ(0, in_child(another_version_is_untouched));
}

TEST(a_header_of_the_vouched_layout_is_released)
{
	ASSERT_EQ(0, in_child(a_fake_of_the_same_layout_is_released));
}

TEST(a_second_call_runs_and_releases_a_lock_held_again)
{
	ASSERT_EQ(0, in_child(calls_in_turn_each_do_their_work));
}

TEST(break_locks_0_leaves_a_held_lock_held)
{
	ASSERT_EQ(0, in_child(off_touches_nothing));
}

TEST_HARNESS_MAIN
