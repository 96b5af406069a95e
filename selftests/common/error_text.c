// SPDX-License-Identifier: GPL-2.0
/*
 * The library's one error-text mechanism (lib/common/errbuf.c), the rule
 * of Documentation/development.md "Status and errors": a failure's text
 * names its object, is logged once as it is kept, and reads back through
 * npx_err_text() -- the reading thread's own failure on the object first,
 * else the object's last; a failed open's text per thread and area.
 * Threads here are ordered by joins, never by sleeps.
 */
#include "kselftest_harness.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/log.h>
#include "common/common_internal.h"

/* What the library logged while a test ran (its sink's argument). */
struct logged {
	char last[1024];
	enum nproxy_log_level level;
	int n;
};

static void into(enum nproxy_log_level level, const char *msg, void *arg)
{
	struct logged *l = arg;

	snprintf(l->last, sizeof(l->last), "%s", msg);
	l->level = level;
	l->n++;
}

/* Run fn(arg) on a new thread and wait for it: its failures are another thread's. */
static void on_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;

	if (pthread_create(&t, NULL, fn, arg) == 0)
		pthread_join(t, NULL);
}

TEST(set_names_the_object_logs_it_once_and_reads_back)
{
	struct logged logs = { .n = 0 };
	struct npx_errbuf eb = { 0 };

	nproxy_log_set_sink(into, &logs);
	EXPECT_STREQ("", npx_err_text(&eb, NPX_ERR_NET));
	EXPECT_EQ((int)NPROXY_TIMEOUT,
		  (int)npx_err_set(&eb, NPX_ERR_NET, NPROXY_LOG_WARN, NPROXY_TIMEOUT, "net rank 3",
				   "peer %d gone", 12345));
	EXPECT_STREQ("net rank 3: peer 12345 gone", npx_err_text(&eb, NPX_ERR_NET));
	EXPECT_STREQ("net rank 3: peer 12345 gone (NPROXY_TIMEOUT)", logs.last);
	EXPECT_EQ((int)NPROXY_LOG_WARN, (int)logs.level);
	EXPECT_EQ(1, logs.n);
	/* No status, no name: the text alone; NPX_LOG_NONE: not logged. */
	npx_err_set(&eb, NPX_ERR_NET, NPROXY_LOG_ERROR, NPROXY_SUCCESS, NULL, "%s", "plain");
	EXPECT_STREQ("plain", logs.last);
	EXPECT_STREQ("plain", npx_err_text(&eb, NPX_ERR_NET));
	npx_err_set(&eb, NPX_ERR_NET, NPX_LOG_NONE, NPROXY_NOT_FOUND, "comm", "polled");
	EXPECT_EQ(2, logs.n);
	EXPECT_STREQ("comm: polled", npx_err_text(&eb, NPX_ERR_NET));
	nproxy_log_set_sink(NULL, NULL);
}

TEST(a_long_text_is_terminated_and_truncated)
{
	struct logged logs = { .n = 0 };
	struct npx_errbuf eb = { 0 };
	char big[2 * NPX_ERR_LEN];
	const char *t;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	nproxy_log_set_sink(into, &logs);
	npx_err_set(&eb, NPX_ERR_HS, NPROXY_LOG_ERROR, NPROXY_SUCCESS, "who", "%s", big);
	t = npx_err_text(&eb, NPX_ERR_HS);
	EXPECT_EQ((size_t)NPX_ERR_LEN - 1, strlen(t));
	EXPECT_EQ(0, strncmp(t, "who: xxx", 8));
	nproxy_log_set_sink(NULL, NULL);
}

TEST(another_objects_failure_leaves_the_text_alone)
{
	struct logged logs = { .n = 0 };
	struct npx_errbuf a = { 0 }, b = { 0 };
	const char *ta;

	nproxy_log_set_sink(into, &logs);
	npx_err_set(&a, NPX_ERR_BP, NPROXY_LOG_ERROR, NPROXY_SUCCESS, "a", "first");
	ta = npx_err_text(&a, NPX_ERR_BP);
	npx_err_set(&b, NPX_ERR_BP, NPROXY_LOG_ERROR, NPROXY_SUCCESS, "b", "second");
	EXPECT_STREQ("a: first", npx_err_text(&a, NPX_ERR_BP));
	EXPECT_STREQ("b: second", npx_err_text(&b, NPX_ERR_BP));
	/* The string read before is this thread's copy: still a's. */
	EXPECT_STREQ("a: first", ta);
	nproxy_log_set_sink(NULL, NULL);
}

TEST(clear_starts_afresh)
{
	struct logged logs = { .n = 0 };
	struct npx_errbuf eb = { 0 };

	nproxy_log_set_sink(into, &logs);
	npx_err_set(&eb, NPX_ERR_COLL, NPROXY_LOG_ERROR, NPROXY_SUCCESS, "rank 0", "bad op");
	npx_err_clear(&eb);
	EXPECT_STREQ("", npx_err_text(&eb, NPX_ERR_COLL));
	nproxy_log_set_sink(NULL, NULL);
}

struct fail_arg {
	struct npx_errbuf *eb;
	const char *text;
	bool library;		/* fail as one of the library's own threads */
	char seen[NPX_ERR_LEN];	/* what this thread read back afterwards */
};

static void *fail_on(void *p)
{
	struct fail_arg *a = p;

	if (a->library)
		npx_err_on_library_thread();
	if (a->text)
		npx_err_set(a->eb, NPX_ERR_COMM, NPROXY_LOG_ERROR, NPROXY_SUCCESS, NULL, "%s",
			    a->text);
	snprintf(a->seen, sizeof(a->seen), "%s", npx_err_text(a->eb, NPX_ERR_COMM));
	return NULL;
}

TEST(another_threads_failure_does_not_clobber_this_threads_text)
{
	struct logged logs = { .n = 0 };
	struct npx_errbuf eb = { 0 };
	struct fail_arg other = { .eb = &eb, .text = "consumer: no such ctx" };
	struct fail_arg reader = { .eb = &eb };
	const char *mine;

	nproxy_log_set_sink(into, &logs);
	npx_err_set(&eb, NPX_ERR_COMM, NPROXY_LOG_ERROR, NPROXY_SUCCESS, NULL, "producer: bad op");
	mine = npx_err_text(&eb, NPX_ERR_COMM);
	on_thread(fail_on, &other);
	EXPECT_STREQ("consumer: no such ctx", other.seen);
	/* Neither the string read before nor a new read is the other's text. */
	EXPECT_STREQ("producer: bad op", mine);
	EXPECT_STREQ("producer: bad op", npx_err_text(&eb, NPX_ERR_COMM));
	/* A thread that failed on nothing reads the object's last failure. */
	on_thread(fail_on, &reader);
	EXPECT_STREQ("consumer: no such ctx", reader.seen);
	nproxy_log_set_sink(NULL, NULL);
}

TEST(a_library_threads_later_failure_replaces_the_callers_older_text)
{
	struct logged logs = { .n = 0 };
	struct npx_errbuf eb = { 0 };
	struct fail_arg worker = { .eb = &eb, .text = "worker: peer 2 gone", .library = true };

	nproxy_log_set_sink(into, &logs);
	npx_err_set(&eb, NPX_ERR_NET, NPROXY_LOG_ERROR, NPROXY_SUCCESS, NULL, "mr_register: empty");
	on_thread(fail_on, &worker);
	EXPECT_STREQ("worker: peer 2 gone", npx_err_text(&eb, NPX_ERR_NET));
	/* This thread's own failure after it is its text again. */
	npx_err_set(&eb, NPX_ERR_NET, NPROXY_LOG_ERROR, NPROXY_SUCCESS, NULL, "stream 9: bad");
	EXPECT_STREQ("stream 9: bad", npx_err_text(&eb, NPX_ERR_NET));
	nproxy_log_set_sink(NULL, NULL);
}

struct open_arg {
	enum npx_err_area area;
	char seen[NPX_ERR_LEN];
};

static void *fail_open(void *p)
{
	struct open_arg *a = p;

	snprintf(a->seen, sizeof(a->seen), "%s", npx_err_text(NULL, a->area));
	npx_err_set(NULL, a->area, NPX_LOG_NONE, NPROXY_INVALID, NULL, "other thread's open");
	return NULL;
}

TEST(a_failed_open_is_kept_per_thread_and_per_area)
{
	struct logged logs = { .n = 0 };
	struct open_arg other = { .area = NPX_ERR_RANK };
	struct npx_errbuf gone = { 0 };

	nproxy_log_set_sink(into, &logs);
	npx_err_clear_open(NPX_ERR_RANK);
	npx_err_clear_open(NPX_ERR_BP);
	npx_err_set(NULL, NPX_ERR_RANK, NPROXY_LOG_ERROR, NPROXY_INVALID, NULL, "rank: open: opts is NULL");
	EXPECT_STREQ("rank: open: opts is NULL (NPROXY_INVALID)", logs.last);
	on_thread(fail_open, &other);
	/* The other thread saw none of this thread's, and left this one alone. */
	EXPECT_STREQ("", other.seen);
	EXPECT_STREQ("rank: open: opts is NULL", npx_err_text(NULL, NPX_ERR_RANK));
	EXPECT_STREQ("", npx_err_text(NULL, NPX_ERR_BP));
	/* An object's text kept as it goes away. */
	npx_err_set(&gone, NPX_ERR_BP, NPX_LOG_NONE, NPROXY_TIMEOUT, "bananaphone job 'j' rank 1",
		    "no leader");
	npx_err_keep_open(NPX_ERR_BP, &gone);
	EXPECT_STREQ("bananaphone job 'j' rank 1: no leader", npx_err_text(NULL, NPX_ERR_BP));
	npx_err_clear_open(NPX_ERR_RANK);
	EXPECT_STREQ("", npx_err_text(NULL, NPX_ERR_RANK));
	EXPECT_STREQ("bananaphone job 'j' rank 1: no leader", npx_err_text(NULL, NPX_ERR_BP));
	nproxy_log_set_sink(NULL, NULL);
}

/* Texts of one length each, so a torn copy shows as a mix of letters. */
struct race_arg {
	struct npx_errbuf *eb;
	char letter;
	int rounds;
	int torn;
};

static void *write_then_read(void *p)
{
	struct race_arg *a = p;
	char text[64];

	memset(text, a->letter, sizeof(text) - 1);
	text[sizeof(text) - 1] = 0;
	for (int i = 0; i < a->rounds; i++) {
		const char *t;

		npx_err_set(a->eb, NPX_ERR_NET, NPX_LOG_NONE, NPROXY_SUCCESS, NULL, "%s", text);
		t = npx_err_text(a->eb, NPX_ERR_NET);
		if (strcmp(t, text))
			a->torn++;
	}
	return NULL;
}

static void *read_only(void *p)
{
	struct race_arg *a = p;

	for (int i = 0; i < a->rounds; i++) {
		const char *t = npx_err_text(a->eb, NPX_ERR_NET);
		size_t n = strlen(t);

		if (n && (n != 63 || strspn(t, t[0] == 'a' ? "a" : "b") != n))
			a->torn++;
	}
	return NULL;
}

TEST(concurrent_failures_hand_out_neither_a_torn_nor_another_threads_text)
{
	struct npx_errbuf eb = { 0 };
	struct race_arg a = { .eb = &eb, .letter = 'a', .rounds = 20000 };
	struct race_arg b = { .eb = &eb, .letter = 'b', .rounds = 20000 };
	struct race_arg r = { .eb = &eb, .rounds = 20000 };
	pthread_t ta, tb, tr;

	ASSERT_EQ(0, pthread_create(&ta, NULL, write_then_read, &a));
	ASSERT_EQ(0, pthread_create(&tb, NULL, write_then_read, &b));
	ASSERT_EQ(0, pthread_create(&tr, NULL, read_only, &r));
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_join(tr, NULL);
	/* Each writer read back its own text every time, the reader whole ones. */
	EXPECT_EQ(0, a.torn);
	EXPECT_EQ(0, b.torn);
	EXPECT_EQ(0, r.torn);
}

TEST_HARNESS_MAIN
