/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy private: what every subsystem of the library shares.
 *
 * Spin-then-block hand-offs on one 32-bit word (struct wake):
 *
 * A waker makes its condition true, then calls wake_signal(): one atomic
 * increment, and a FUTEX_WAKE only when somebody is parked (the sleepers
 * count next to the word).  A waiter reads wake_seq() *before* it checks
 * its condition and passes that value to wake_wait(): if the waker ran in
 * between, the sequence moved and the futex returns at once.  Both sides
 * use sequentially consistent atomics, so either the waiter sees the new
 * sequence or the waker sees the sleeper (no lost wake-up).
 *
 * Every wait has a timeout: callers re-check their condition, stop flags
 * and deadlines after each return, as futex waits can end spuriously.
 */
#ifndef NPX_COMMON_INTERNAL_H
#define NPX_COMMON_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <nproxy/status.h>

/*
 * The check of every public *_opts struct, whose first field is
 * `uint32_t size` (the caller's sizeof): NPROXY_INVALID, logged with `what`,
 * when opts is NULL, size is 0 or below min_size (the first released
 * layout), or when bytes past known_size (this library's sizeof) are not 0.
 */
enum nproxy_status npx_opts_check(const void *opts, size_t min_size, size_t known_size,
				  const char *what);
/* The usual call: a struct whose layout has not grown since it was released. */
#define NPX_OPTS_CHECK(opts, what) \
	npx_opts_check((opts), sizeof(*(opts)), sizeof(*(opts)), (what))

struct wake {
	uint32_t seq;		/* the futex word: bumped by every signal */
	uint32_t sleepers;	/* threads inside wake_wait() */
};

static inline long wake_futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

static inline uint32_t wake_seq(struct wake *w)
{
	return __atomic_load_n(&w->seq, __ATOMIC_SEQ_CST);
}

static inline void wake_signal(struct wake *w)
{
	__atomic_add_fetch(&w->seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->sleepers, __ATOMIC_SEQ_CST))
		wake_futex(&w->seq, FUTEX_WAKE, INT_MAX, NULL);
}

/* Park until the sequence leaves seen, a signal, or timeout_ns (relative). */
static inline void wake_wait(struct wake *w, uint32_t seen, uint64_t timeout_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ns / 1000000000ull),
		.tv_nsec = (long)(timeout_ns % 1000000000ull),
	};

	__atomic_add_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->seq, __ATOMIC_SEQ_CST) == seen)
		wake_futex(&w->seq, FUTEX_WAIT, seen, &ts);
	__atomic_sub_fetch(&w->sleepers, 1, __ATOMIC_SEQ_CST);
}

/*
 * The same protocol on a word that carries a state instead of a sequence
 * (a task's run_state): the waiter parks while *word == seen.
 */
static inline void wake_word_wait(uint32_t *word, uint32_t *sleepers, uint32_t seen,
				  uint64_t timeout_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ns / 1000000000ull),
		.tv_nsec = (long)(timeout_ns % 1000000000ull),
	};

	__atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(word, __ATOMIC_SEQ_CST) == seen)
		wake_futex(word, FUTEX_WAIT, seen, &ts);
	__atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
}

static inline void wake_word_store(uint32_t *word, uint32_t *sleepers, uint32_t value)
{
	__atomic_store_n(word, value, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST))
		wake_futex(word, FUTEX_WAKE, INT_MAX, NULL);
}

static inline uint64_t wake_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void wake_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * The proxy-state page's clock: COARSE is a vDSO read of the tick, no
 * hardware counter and no syscall, cheap enough for every task transition.
 */
static inline uint64_t npx_coarse_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Seqlock writer halves: the word is odd while the fields change.  Every
 * field between them is stored with NPX_SEQ_STORE (release), which keeps
 * it after the odd word without a fence: on x86 each is a plain mov, and
 * TSan (which has no atomic_thread_fence) follows it.
 */
#define NPX_SEQ_STORE(field, val)	__atomic_store_n(&(field), (val), __ATOMIC_RELEASE)

static inline uint32_t npx_seq_write_begin(uint32_t *seq)
{
	uint32_t s = __atomic_load_n(seq, __ATOMIC_RELAXED) + 1;

	__atomic_store_n(seq, s, __ATOMIC_RELAXED);
	return s;
}

static inline void npx_seq_write_end(uint32_t *seq, uint32_t s)
{
	__atomic_store_n(seq, s + 1, __ATOMIC_RELEASE);
}

#endif
