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
 * A lock is taken only with pthread_spin_trylock() and, if taken, let go at
 * once; one that no try takes during the whole window is released with
 * pthread_spin_unlock(), which writes the free value of this libc.  The
 * window is far longer than the provider ever holds the lock (a command's
 * few stores): only a holder that will never run again holds it that long.
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

static pthread_spinlock_t *hdr_lock(const struct npx_shm_mapping *m)
{
	return (pthread_spinlock_t *)(m->lo + HDR_LOCK);
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

/* Taken at this try: free (let go at once). */
static bool lock_free_now(pthread_spinlock_t *lock)
{
	if (pthread_spin_trylock(lock))
		return false;
	pthread_spin_unlock(lock);
	return true;
}

NPROXY_API uint32_t nproxy_net_shm_break_dead_locks(uint32_t hold_ms)
{
	static struct npx_shm_mapping m[LOCKS_MAX_REGIONS];
	static bool held[LOCKS_MAX_REGIONS];
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const struct timespec nap = { 0, 1000000 };
	uint64_t on, bytes, end;
	uint32_t released = 0, left = 0;
	unsigned int n;
	int version;

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
			  !lock_free_now(hdr_lock(&m[i]));
		left += held[i];
	}
	end = npx_now_ms() + (hold_ms ? hold_ms : LOCKS_HOLD_MS_DEFAULT);
	while (left && (uint64_t)npx_now_ms() < end) {
		nanosleep(&nap, NULL);
		for (unsigned int i = 0; i < n; i++)
			if (held[i] && lock_free_now(hdr_lock(&m[i]))) {
				held[i] = false;
				left--;
			}
	}
	for (unsigned int i = 0; i < n; i++) {
		if (!held[i])
			continue;
		pthread_spin_unlock(hdr_lock(&m[i]));
		released++;
		nproxy_log(NPROXY_LOG_WARN,
			   "shm region of pid %ld: its lock stayed held for %u ms after a local peer died: released",
			   m[i].pid, hold_ms ? hold_ms : LOCKS_HOLD_MS_DEFAULT);
	}
out:
	pthread_mutex_unlock(&lock);
	return released;
}
