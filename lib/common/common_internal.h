/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libnproxy private: what every subsystem of the library shares.
 *
 * Spin-then-block hand-offs on one 32-bit word (struct wake):
 *
 * A waker makes its condition true, then calls wake_signal(): one atomic
 * update of the word, and a FUTEX_WAKE only when a waiter has marked the
 * word since the last signal (its low bit: "somebody parks on this
 * value"); a second signal before the woken threads run again finds the
 * mark gone and makes no system call.  A waiter reads wake_seq() *before*
 * it checks its condition and passes that value to wake_wait(): if the
 * waker ran in between, the sequence moved and the futex returns at once.
 * The mark is set with a compare-and-swap on the very value the futex
 * waits on, and a signal clears it in the same update that moves the
 * sequence, so either the waiter's futex sees the new value or the waker
 * sees the mark (no lost wake-up).
 *
 * Every wait has a timeout: callers re-check their condition, stop flags
 * and deadlines after each return, as futex waits can end spuriously.
 */
#ifndef NPX_COMMON_INTERNAL_H
#define NPX_COMMON_INTERNAL_H

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <nproxy/log.h>
#include <nproxy/status.h>

/*
 * Where the waiting thread drives an op by default (the proxy's auto rule,
 * proxy.md): at most this many ranks, reductions of at most this many
 * bytes.  lib/coll carries a barrier on an op's data only there.
 */
#define NPX_AUTO_DRIVE_MAX_RANKS	2u
#define NPX_AUTO_DRIVE_MAX_REDUCE	(64u * 1024)

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
	/*
	 * The futex word: bits 31..1 count signals (each adds 2), bit 0 is
	 * the waiters' mark (WAKE_PARKED).
	 */
	uint32_t seq;
};

#define WAKE_PARKED	1u

static inline long wake_futex(uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

static inline uint32_t wake_seq(struct wake *w)
{
	return __atomic_load_n(&w->seq, __ATOMIC_SEQ_CST) & ~WAKE_PARKED;
}

static inline void wake_signal(struct wake *w)
{
	uint32_t old = __atomic_load_n(&w->seq, __ATOMIC_RELAXED);

	/* Move the sequence and take the mark down in one update. */
	while (!__atomic_compare_exchange_n(&w->seq, &old, (old + 2) & ~WAKE_PARKED, true,
					    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
	if (old & WAKE_PARKED)
		wake_futex(&w->seq, FUTEX_WAKE, INT_MAX, NULL);
}

/* Park until the sequence leaves seen, a signal, or timeout_ns (relative). */
static inline void wake_wait(struct wake *w, uint32_t seen, uint64_t timeout_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ns / 1000000000ull),
		.tv_nsec = (long)(timeout_ns % 1000000000ull),
	};
	uint32_t cur = __atomic_load_n(&w->seq, __ATOMIC_SEQ_CST);

	for (;;) {
		if ((cur & ~WAKE_PARKED) != seen)
			return;
		if (cur & WAKE_PARKED ||
		    __atomic_compare_exchange_n(&w->seq, &cur, cur | WAKE_PARKED, false,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			break;
		/* cur now holds the word a signal (or another waiter) left. */
	}
	wake_futex(&w->seq, FUTEX_WAIT, seen | WAKE_PARKED, &ts);
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

static inline void wake_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/*
 * The library's one clock: CLOCK_MONOTONIC, the clock every deadline,
 * timestamp in a shared page and log line uses (nproxyctl watch reads the
 * same).  Inline: the proxy worker reads it on its hot path.
 */
static inline uint64_t npx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Milliseconds, signed: callers subtract and compare ("time left" < 0). */
static inline int64_t npx_now_ms(void)
{
	return (int64_t)(npx_now_ns() / 1000000ull);
}

/* The npx_now_ns() value timeout_ms from now. */
static inline uint64_t npx_deadline_ns(uint64_t timeout_ms)
{
	return npx_now_ns() + timeout_ms * 1000000ull;
}

/* getpid(), cached (lib/common/self_pid.c): reset in every fork() child. */
pid_t npx_self_pid(void);

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

/*
 * Environment variables (env.c).  Every tunable the library reads goes
 * through these, so that junk, overflow, a sign on an unsigned value or an
 * out-of-range number is never taken silently: the variable is named in
 * one warning together with the default used instead.
 */
enum npx_env_found {
	NPX_ENV_UNSET = 0,	/* unset or empty: *out is the default */
	NPX_ENV_SET,		/* a valid value: *out is it */
	NPX_ENV_BAD,		/* rejected and warned about: *out is the default */
};

enum npx_env_found npx_env_u32(const char *name, uint32_t dflt, uint32_t min, uint32_t max,
			       uint32_t *out);
enum npx_env_found npx_env_u64(const char *name, uint64_t dflt, uint64_t min, uint64_t max,
			       uint64_t *out);
/* 1/0, yes/no, true/false, on/off (any case). */
enum npx_env_found npx_env_bool(const char *name, bool dflt, bool *out);
/* The defaults files' value of name (env_file.c), NULL when none gives one. */
const char *npx_env_file_value(const char *name);
/* Tests: drop what was read; the next lookup reads the files again.  No
 * other thread may be looking a setting up meanwhile. */
void npx_env_file_forget(void);
/* The variable's text, else the defaults files' (env_file.c); NULL when
 * unset or empty in both. */
static inline const char *npx_env_text(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : npx_env_file_value(name);
}

/* The text as set, or dflt when unset or empty (inline: log.c uses it). */
static inline enum npx_env_found npx_env_str(const char *name, const char *dflt, const char **out)
{
	const char *text = npx_env_text(name);

	*out = text ? text : dflt;
	return text ? NPX_ENV_SET : NPX_ENV_UNSET;
}
/* One of names[] (any case; NULL entries never match): *out is its index, or
 * dflt when unset or unknown. */
enum npx_env_found npx_env_choice(const char *name, const char *const *names, size_t n_names,
				  unsigned int dflt, unsigned int *out);
/*
 * For a variable whose bad value must fail the call that reads it instead
 * of falling back (an explicit sizing the caller asked for): logs an error,
 * not a warning, and leaves *out alone unless the value is valid.
 */
enum npx_env_found npx_env_u32_strict(const char *name, uint32_t min, uint32_t max,
				      uint32_t *out);
/* Ranks per shared proxy: requested, else the environment, else 1 (env.c). */
enum nproxy_status npx_ranks_per_proxy(uint32_t requested, uint32_t *out);

/*
 * Error text (errbuf.c), the library's one mechanism: every object that can
 * fail embeds a struct npx_errbuf (zeroed: no text), every failure goes
 * through npx_err_set(), every nproxy_<x>_strerror() through npx_err_text().
 * The rule is in Documentation/development.md ("Status and errors").
 */
#define NPX_ERR_LEN	512

struct npx_errbuf {
	uint32_t lock;		/* guards the rest: taken for a copy only */
	uint64_t id;		/* 0 until the first failure, then never reused */
	uint64_t seq;		/* bumped by every failure and clear */
	uint64_t lib_seq;	/* seq of the last failure on a library thread */
	char text[NPX_ERR_LEN];
};

/* Whose open failed, for this thread's nproxy_<x>_strerror(NULL). */
enum npx_err_area {
	NPX_ERR_HS,
	NPX_ERR_BP,
	NPX_ERR_NET,
	NPX_ERR_RDZV,
	NPX_ERR_COMM,
	NPX_ERR_RANK,
	NPX_ERR_COLL,
	NPX_ERR_AREAS
};

/* A level for npx_err_set() that logs nothing: an answer a poll expects,
 * or a text the caller logged already. */
#define NPX_LOG_NONE	((enum nproxy_log_level)-1)

/*
 * Format "who: " and fmt (who names the object: "rank 3", NULL for none),
 * truncated to NPX_ERR_LEN - 1, into eb -- or, eb NULL, into this thread's
 * open-failure text of area -- and log it at level, followed by " (STATUS)"
 * when st is not NPROXY_SUCCESS.  Returns st.
 */
enum nproxy_status npx_err_set(struct npx_errbuf *eb, enum npx_err_area area,
			       enum nproxy_log_level level, enum nproxy_status st,
			       const char *who, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
enum nproxy_status npx_err_vset(struct npx_errbuf *eb, enum npx_err_area area,
				enum nproxy_log_level level, enum nproxy_status st,
				const char *who, const char *fmt, va_list ap)
	__attribute__((format(printf, 6, 0)));
/*
 * What nproxy_<x>_strerror(eb's object) returns: this thread's own last
 * failure on it, else its last failure from any thread ("" if none); a
 * failure on a library thread since this thread's own replaces it.  eb
 * NULL: this thread's last failed open of area.  The string is this
 * thread's copy, valid until this thread reads or records the text of
 * eight other objects.
 */
const char *npx_err_text(const struct npx_errbuf *eb, enum npx_err_area area);
/* An operation that succeeded as a whole starts eb afresh (this thread's
 * view and the object's text). */
void npx_err_clear(struct npx_errbuf *eb);
/* A failing open: keep eb's text (about to be freed) for strerror(NULL). */
void npx_err_keep_open(enum npx_err_area area, const struct npx_errbuf *eb);
/* An open starts: this thread has no open failure of area any more. */
void npx_err_clear_open(enum npx_err_area area);
/* A thread the library starts (proxy worker, device emulator) calls this
 * first: what it records is the object's, not this thread's own. */
void npx_err_on_library_thread(void);

/* reduce.c: half and bfloat16 through float, rounding to nearest even. */
float npx_half_to_float(uint16_t h);
uint16_t npx_float_to_half(float f);
float npx_bf16_to_float(uint16_t b);
uint16_t npx_float_to_bf16(float f);

#endif
