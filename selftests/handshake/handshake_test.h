/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the selftests/handshake/ programs.  Included
 * after kselftest_harness.h.  Nothing here asserts: tests do.
 */
#ifndef NPROXY_HANDSHAKE_TEST_H
#define NPROXY_HANDSHAKE_TEST_H

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include "nproxy_test.h"

#define HS_TEST_WAIT_MS	10000	/* generous: TSan and TCG are slow */

static inline struct nproxy_hs_opts hs_test_opts(enum nproxy_hs_backend b, uint32_t n_streams,
						 uint32_t n_sems)
{
	struct nproxy_hs_opts o = {
		.size = sizeof(o),
		.backend = b,
		.n_streams = n_streams,
		.n_sems = n_sems,
	};

	return o;
}

static inline struct nproxy_hs *hs_test_open(enum nproxy_hs_backend b, uint32_t n_streams,
					     uint32_t n_sems)
{
	struct nproxy_hs_opts o = hs_test_opts(b, n_streams, n_sems);
	struct nproxy_hs *hs = NULL;

	if (nproxy_hs_open(&o, &hs) != NPROXY_SUCCESS)
		return NULL;
	return hs;
}

/* The shared helpers (testlib/nproxy_test.h) by this area's names. */
static inline uint64_t hs_test_now_ns(void)
{
	return nproxy_test_now_ns();
}

static inline void hs_test_sleep_ms(unsigned int ms)
{
	nproxy_test_sleep_ms(ms);
}

/*
 * Spin (yielding) until the trigger word leaves the sentinel; returns what
 * it then holds, or NPROXY_TRIGGER_SENTINEL on deadline.  (Returned, not
 * stored through a pointer: locals whose address is taken next to the
 * harness's setjmp trip -Wclobbered.)
 */
static inline uint32_t hs_test_await_trigger(volatile uint32_t *word, unsigned int timeout_ms)
{
	uint64_t deadline = hs_test_now_ns() + (uint64_t)timeout_ms * 1000000ULL;

	do {
		uint32_t v = nproxy_trigger_load(word);

		if (v != NPROXY_TRIGGER_SENTINEL)
			return v;
		sched_yield();
	} while (hs_test_now_ns() < deadline);
	return NPROXY_TRIGGER_SENTINEL;
}

static inline int hs_test_settle(int (*count)(void), int want, unsigned int timeout_ms)
{
	return nproxy_test_settle(count, want, timeout_ms);
}

static inline uint32_t hs_test_prog_state(const struct nproxy_hs *hs)
{
	return __atomic_load_n(&nproxy_hs_info(hs)->prog_state, __ATOMIC_ACQUIRE);
}

/* Poll the info page until prog_state == state; false on deadline. */
static inline bool hs_test_wait_state(const struct nproxy_hs *hs, uint32_t state,
				      unsigned int timeout_ms)
{
	uint64_t deadline = hs_test_now_ns() + (uint64_t)timeout_ms * 1000000ULL;

	while (hs_test_prog_state(hs) != state) {
		if (hs_test_now_ns() >= deadline)
			return false;
		hs_test_sleep_ms(1);
	}
	return true;
}

static inline int hs_test_count_fds(void)
{
	return nproxy_test_count_fds();
}

static inline int hs_test_count_threads(void)
{
	return nproxy_test_count_threads();
}

static inline int hs_test_count_shared_maps(void)
{
	return nproxy_test_count_shared_maps();
}

static inline int hs_test_count_threads_named(const char *name)
{
	return nproxy_test_count_threads_named(name, false);
}

/* Collects library log lines so tests can check the exact words. */
struct hs_test_log {
	pthread_mutex_t lock;
	char text[8192];
};

static struct hs_test_log hs_test_log = { .lock = PTHREAD_MUTEX_INITIALIZER };

static inline void hs_test_log_sink(enum nproxy_log_level level, const char *msg, void *arg)
{
	struct hs_test_log *log = arg;
	size_t len;

	pthread_mutex_lock(&log->lock);
	len = strlen(log->text);
	snprintf(log->text + len, sizeof(log->text) - len, "%s\n", msg);
	pthread_mutex_unlock(&log->lock);
}

static inline void hs_test_log_capture(void)
{
	hs_test_log.text[0] = '\0';
	nproxy_log_set_sink(hs_test_log_sink, &hs_test_log);
}

/* True when some captured line contains needle. */
static inline bool hs_test_log_has(const char *needle)
{
	bool found;

	pthread_mutex_lock(&hs_test_log.lock);
	found = strstr(hs_test_log.text, needle) != NULL;
	pthread_mutex_unlock(&hs_test_log.lock);
	return found;
}

static inline struct nproxy_prog_step hs_step(uint16_t op, uint32_t index, uint64_t value,
					      uint64_t timeout_ns)
{
	struct nproxy_prog_step s = {
		.op = op,
		.index = index,
		.value = value,
		.timeout_ns = timeout_ns,
	};

	return s;
}

#define MS_NS(ms)	((uint64_t)(ms) * 1000000ULL)

/*
 * enum nproxy_status has no negative values, so the harness's typeof-based
 * compare would pit an int constant against an unsigned enum: compare as int.
 */
#ifndef ASSERT_ST	/* proxy_test_util.h has the same pair */
#define ASSERT_ST(expected, seen)	ASSERT_EQ((int)(expected), (int)(seen))
#define EXPECT_ST(expected, seen)	EXPECT_EQ((int)(expected), (int)(seen))
#endif

#endif
