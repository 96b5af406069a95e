/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A spy on the library's futex calls, for tests that must see a wake-up
 * that a timeout would otherwise hide.  libnproxy (linked statically into
 * every test) reaches the kernel through syscall(2) for its futexes
 * (lib/common/common_internal.h, lib/bananaphone/bananaphone_wait.c); defining syscall() here puts this
 * wrapper in front of libc's for the library's calls.  glibc's own futexes
 * (mutexes, joins) use inline system calls and never come through here.
 *
 * futex_spy_set(before, after): hooks run around every futex call (op
 * without FUTEX_PRIVATE_FLAG); the counters are per process.  The same
 * wrapper counts the library's pidfd_open calls (futex_spy_pidfd_opens),
 * which also go through syscall(2) (lib/bananaphone/bananaphone_liveness.c).
 */
#ifndef FUTEX_SPY_H
#define FUTEX_SPY_H

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <linux/futex.h>
#include <sys/syscall.h>

typedef long (*futex_spy_syscall_fn)(long, ...);

typedef void (*futex_spy_before_fn)(uint32_t *word, int op, uint32_t val);
typedef void (*futex_spy_after_fn)(uint32_t *word, int op, uint32_t val, long rc, int err);
/* Called on the calling thread before the real futex call (set with futex_spy_set). */
static futex_spy_before_fn futex_spy_before;
/* After it: rc and errno of the real call. */
static futex_spy_after_fn futex_spy_after;

static inline void futex_spy_set(futex_spy_before_fn before, futex_spy_after_fn after)
{
	__atomic_store_n(&futex_spy_before, before, __ATOMIC_RELEASE);
	__atomic_store_n(&futex_spy_after, after, __ATOMIC_RELEASE);
}

/* FUTEX_WAIT calls that returned 0: woken by a FUTEX_WAKE (or spuriously). */
static uint64_t futex_spy_waits_woken;
static uint64_t futex_spy_waits;
static uint64_t futex_spy_wakes;
static uint64_t futex_spy_pidfd_opens;

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

long syscall(long nr, ...)
{
	static futex_spy_syscall_fn real;
	futex_spy_syscall_fn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
	long a[6], rc;
	va_list ap;
	int i, err;

	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!fn) {
		fn = (futex_spy_syscall_fn)dlsym(RTLD_NEXT, "syscall");
		__atomic_store_n(&real, fn, __ATOMIC_RELEASE);
	}
	if (nr == SYS_pidfd_open)
		__atomic_add_fetch(&futex_spy_pidfd_opens, 1, __ATOMIC_RELAXED);
	if (nr != SYS_futex)
		return fn(nr, a[0], a[1], a[2], a[3], a[4], a[5]);

	uint32_t *word = (uint32_t *)a[0];
	int op = (int)a[1] & FUTEX_CMD_MASK;
	uint32_t val = (uint32_t)a[2];
	futex_spy_before_fn before = __atomic_load_n(&futex_spy_before, __ATOMIC_ACQUIRE);
	futex_spy_after_fn after = __atomic_load_n(&futex_spy_after, __ATOMIC_ACQUIRE);

	if (op == FUTEX_WAKE)
		__atomic_add_fetch(&futex_spy_wakes, 1, __ATOMIC_RELAXED);
	if (before)
		before(word, op, val);
	rc = fn(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	err = errno;
	if (op == FUTEX_WAIT) {
		__atomic_add_fetch(&futex_spy_waits, 1, __ATOMIC_RELAXED);
		if (rc == 0)
			__atomic_add_fetch(&futex_spy_waits_woken, 1, __ATOMIC_RELAXED);
	}
	if (after)
		after(word, op, val, rc, err);
	errno = err;
	return rc;
}

#endif
