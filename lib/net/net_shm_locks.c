// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Releasing the region locks a dead local peer left held
 * (nproxy_net_shm_break_dead_locks(), <nproxy/net.h>).
 *
 * The shm provider's region starts with a header; in the providers this
 * was checked against (libfabric 1.17, and the later ones' headers keep
 * the same first fields):
 *
 *   +0  u8 version   +4  int pid (the owner)   +16  void *base_addr
 *   +24 pthread_spinlock_t lock
 *
 * base_addr is where the owner mapped its region, so in this process's own
 * region it equals the mapping's own address: that, the pid and a version
 * shared with every other region are what make a header trusted here.  A
 * provider whose header differs is left alone.
 *
 * A lock is only read and, when released, written: never taken.  Its free
 * value is this libc's (what pthread_spin_init() leaves: 0 in glibc's
 * generic code, 1 on x86), and a lock whose word shows that value at any
 * read during the whole window is left alone; one that never does is set
 * to it.  Reading, not trying, keeps the sampling out of the way of the
 * provider's own lockers, and out of a race detector's books, which
 * cannot know that a lock a dead process held is free.  The window is far
 * longer than the provider ever holds the lock (a command's few stores):
 * only a holder that will never run again holds it that long.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <nproxy/log.h>
#include <nproxy/net.h>
#include "common/common_internal.h"
#include "net_internal.h"

#define LOCKS_MAX_REGIONS	1024
#define LOCKS_HOLD_MS_DEFAULT	200
#define HDR_VERSION		0
#define HDR_PID			4
#define HDR_BASE_ADDR		16
#define HDR_LOCK		24
#define HDR_BYTES		(HDR_LOCK + sizeof(pthread_spinlock_t))

static uint8_t hdr_version(const struct npx_shm_mapping *m)
{
	return *(const volatile uint8_t *)m->lo;
}

static long hdr_pid(const struct npx_shm_mapping *m)
{
	return *(const volatile int *)(m->lo + HDR_PID);
}

/* pthread_spinlock_t is a volatile int in glibc on every architecture. */
_Static_assert(sizeof(pthread_spinlock_t) == sizeof(int), "a spinlock is one int");

static int *hdr_lock(const struct npx_shm_mapping *m)
{
	return (int *)(m->lo + HDR_LOCK);
}

/* The word of a free lock, as this libc's pthread_spin_init() writes it. */
static int free_lock_word(void)
{
	pthread_spinlock_t l;

	pthread_spin_init(&l, PTHREAD_PROCESS_SHARED);
	return (int)l;
}

/* The header of a region mapped from its start, owned by the pid in its name. */
static bool hdr_plausible(const struct npx_shm_mapping *m)
{
	return !m->off && m->hi - m->lo >= HDR_BYTES && hdr_pid(m) == m->pid;
}

/* This process's own region vouches for the layout: its version, or -1. */
static int layout_version(const struct npx_shm_mapping *m, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (m[i].pid == npx_self_pid() && hdr_plausible(&m[i]) &&
		    *(void *const volatile *)(m[i].lo + HDR_BASE_ADDR) == (void *)m[i].lo)
			return hdr_version(&m[i]);
	return -1;
}

NPROXY_API uint32_t nproxy_net_shm_break_dead_locks(uint32_t hold_ms)
{
	static struct npx_shm_mapping m[LOCKS_MAX_REGIONS];
	static bool held[LOCKS_MAX_REGIONS];
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const struct timespec nap = { 0, 1000000 };
	uint64_t on, bytes, end;
	uint32_t released = 0, left = 0;
	int version, free_word = free_lock_word();
	unsigned int n;

	npx_env_u64("NPROXY_SHM_BREAK_LOCKS", 1, 0, 1, &on);
	if (!on)
		return 0;
	pthread_mutex_lock(&lock);
	n = npx_net_shm_mapped_regions(m, LOCKS_MAX_REGIONS, &bytes);
	if (n > LOCKS_MAX_REGIONS)
		n = LOCKS_MAX_REGIONS;
	version = layout_version(m, n);
	if (version < 0) {
		nproxy_log(NPROXY_LOG_DEBUG,
			   "shm locks: no region of this process with a header laid out as expected: nothing touched");
		goto out;
	}
	for (unsigned int i = 0; i < n; i++) {
		held[i] = hdr_plausible(&m[i]) && hdr_version(&m[i]) == version &&
			  __atomic_load_n(hdr_lock(&m[i]), __ATOMIC_ACQUIRE) != free_word;
		left += held[i];
	}
	end = npx_now_ms() + (hold_ms ? hold_ms : LOCKS_HOLD_MS_DEFAULT);
	while (left && (uint64_t)npx_now_ms() < end) {
		nanosleep(&nap, NULL);
		for (unsigned int i = 0; i < n; i++)
			if (held[i] &&
			    __atomic_load_n(hdr_lock(&m[i]), __ATOMIC_ACQUIRE) == free_word) {
				held[i] = false;
				left--;
			}
	}
	for (unsigned int i = 0; i < n; i++) {
		if (!held[i])
			continue;
		__atomic_store_n(hdr_lock(&m[i]), free_word, __ATOMIC_RELEASE);
		released++;
		nproxy_log(NPROXY_LOG_WARN,
			   "shm region of pid %ld: its lock stayed held for %u ms after a local peer died: released",
			   m[i].pid, hold_ms ? hold_ms : LOCKS_HOLD_MS_DEFAULT);
	}
out:
	pthread_mutex_unlock(&lock);
	return released;
}
