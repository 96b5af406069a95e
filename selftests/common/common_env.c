// SPDX-License-Identifier: GPL-2.0
/*
 * The library's private common helpers (lib/common/common_internal.h):
 * the environment parser rejects what strtoull()/atoi() would take, warns
 * once naming the variable and the default it used; the clock is
 * monotonic and its three views agree.  The error text has its own
 * program (error_text.c).
 */
#include "kselftest_harness.h"
#include <stdlib.h>
#include <string.h>
#include <nproxy/log.h>
#include "common/common_internal.h"

#define VAR "NPROXY_TEST_COMMON_ENV"

static char last_msg[512];
static int n_msgs;
static enum nproxy_log_level last_level;

static void sink(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)arg;
	snprintf(last_msg, sizeof(last_msg), "%s", msg);
	last_level = level;
	n_msgs++;
}

static void capture(void)
{
	last_msg[0] = 0;
	n_msgs = 0;
	nproxy_log_set_sink(sink, NULL);
}

FIXTURE(env) {};
FIXTURE_SETUP(env) { unsetenv(VAR); capture(); }
FIXTURE_TEARDOWN(env) { nproxy_log_set_sink(NULL, NULL); unsetenv(VAR); }

TEST_F(env, u32_unset_and_empty_give_the_default_silently)
{
	uint32_t v = 7;

	ASSERT_EQ((int)NPX_ENV_UNSET, (int)npx_env_u32(VAR, 42, 1, 100, &v));
	ASSERT_EQ(42u, v);
	setenv(VAR, "", 1);
	v = 7;
	ASSERT_EQ((int)NPX_ENV_UNSET, (int)npx_env_u32(VAR, 42, 1, 100, &v));
	ASSERT_EQ(42u, v);
	ASSERT_EQ(0, n_msgs);
}

TEST_F(env, u32_valid_values_and_the_range_bounds)
{
	static const struct { const char *text; uint32_t want; } ok[] = {
		{ "1", 1 }, { "100", 100 }, { "57", 57 }, { "007", 7 },
	};
	uint32_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		setenv(VAR, ok[i].text, 1);
		v = 0;
		ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_u32(VAR, 42, 1, 100, &v)) TH_LOG("%s", ok[i].text);
		ASSERT_EQ(ok[i].want, v);
	}
	ASSERT_EQ(0, n_msgs);
}

TEST_F(env, u32_rejects_junk_signs_overflow_and_range_with_one_warning)
{
	static const char *const bad[] = {
		"abc", "5x", " 5", "5 ", "+5", "-1", "-0", "0x10", "1e3", "0", "101",
		"4294967296", "99999999999999999999999", "\t", "5.0",
	};
	uint32_t v;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv(VAR, bad[i], 1);
		capture();
		v = 0;
		ASSERT_EQ((int)NPX_ENV_BAD, (int)npx_env_u32(VAR, 42, 1, 100, &v)) TH_LOG("'%s'", bad[i]);
		ASSERT_EQ(42u, v) TH_LOG("'%s'", bad[i]);
		ASSERT_EQ(1, n_msgs) TH_LOG("'%s'", bad[i]);
		ASSERT_EQ((int)NPROXY_LOG_WARN, (int)last_level);
		ASSERT_NE(NULL, strstr(last_msg, VAR)) TH_LOG("%s", last_msg);
		ASSERT_NE(NULL, strstr(last_msg, "using 42")) TH_LOG("%s", last_msg);
		ASSERT_NE(NULL, strstr(last_msg, "1..100")) TH_LOG("%s", last_msg);
	}
}

TEST_F(env, u64_takes_the_full_range_and_rejects_overflow)
{
	uint64_t v = 0;

	setenv(VAR, "18446744073709551615", 1);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_u64(VAR, 3, 0, UINT64_MAX, &v));
	ASSERT_EQ(UINT64_MAX, v);
	setenv(VAR, "18446744073709551616", 1);
	ASSERT_EQ((int)NPX_ENV_BAD, (int)npx_env_u64(VAR, 3, 0, UINT64_MAX, &v));
	ASSERT_EQ(3u, v);
	setenv(VAR, "0", 1);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_u64(VAR, 3, 0, 10, &v));
	ASSERT_EQ(0u, v);
}

TEST_F(env, strict_logs_an_error_and_leaves_out_alone)
{
	uint32_t v = 9;

	ASSERT_EQ((int)NPX_ENV_UNSET, (int)npx_env_u32_strict(VAR, 1, 10, &v));
	ASSERT_EQ(9u, v);
	setenv(VAR, "11", 1);
	ASSERT_EQ((int)NPX_ENV_BAD, (int)npx_env_u32_strict(VAR, 1, 10, &v));
	ASSERT_EQ(9u, v);
	ASSERT_EQ((int)NPROXY_LOG_ERROR, (int)last_level);
	ASSERT_NE(NULL, strstr(last_msg, VAR));
	setenv(VAR, "10", 1);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_u32_strict(VAR, 1, 10, &v));
	ASSERT_EQ(10u, v);
}

TEST_F(env, bool_words_any_case_and_junk)
{
	static const struct { const char *text; bool want; } ok[] = {
		{ "1", true }, { "0", false }, { "yes", true }, { "NO", false },
		{ "True", true }, { "false", false }, { "on", true }, { "OFF", false },
	};
	bool v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		setenv(VAR, ok[i].text, 1);
		v = !ok[i].want;
		ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_bool(VAR, !ok[i].want, &v)) TH_LOG("%s", ok[i].text);
		ASSERT_EQ(ok[i].want, v) TH_LOG("%s", ok[i].text);
	}
	ASSERT_EQ(0, n_msgs);
	setenv(VAR, "2", 1);
	ASSERT_EQ((int)NPX_ENV_BAD, (int)npx_env_bool(VAR, true, &v));
	ASSERT_TRUE(v);
	ASSERT_EQ(1, n_msgs);
	ASSERT_NE(NULL, strstr(last_msg, VAR));
	unsetenv(VAR);
	ASSERT_EQ((int)NPX_ENV_UNSET, (int)npx_env_bool(VAR, false, &v));
	ASSERT_FALSE(v);
}

TEST_F(env, choice_matches_a_name_skips_null_and_warns_on_unknown)
{
	static const char *const names[] = { NULL, "spin", "adaptive-yield" };
	unsigned int v;

	setenv(VAR, "ADAPTIVE-yield", 1);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_choice(VAR, names, 3, 1, &v));
	ASSERT_EQ(2u, v);
	setenv(VAR, "adaptive", 1);
	ASSERT_EQ((int)NPX_ENV_BAD, (int)npx_env_choice(VAR, names, 3, 1, &v));
	ASSERT_EQ(1u, v);
	ASSERT_NE(NULL, strstr(last_msg, "using spin")) TH_LOG("%s", last_msg);
}

TEST_F(env, str_is_the_text_or_the_default)
{
	const char *v;

	ASSERT_EQ((int)NPX_ENV_UNSET, (int)npx_env_str(VAR, "dflt", &v));
	ASSERT_STREQ("dflt", v);
	setenv(VAR, "", 1);
	ASSERT_EQ((int)NPX_ENV_UNSET, (int)npx_env_str(VAR, NULL, &v));
	ASSERT_EQ(NULL, v);
	setenv(VAR, "x y", 1);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_str(VAR, "dflt", &v));
	ASSERT_STREQ("x y", v);
}

TEST(clock_is_monotonic_and_its_views_agree)
{
	uint64_t a = npx_now_ns(), b, d;
	int64_t ms = npx_now_ms();
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* The same clock as CLOCK_MONOTONIC: ours was read first. */
	ASSERT_LE(a, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
	ASSERT_LE((uint64_t)ms, a / 1000000 + 1000);
	ASSERT_GE((uint64_t)ms, a / 1000000);
	for (int i = 0; i < 100000; i++) {
		b = npx_now_ns();
		ASSERT_GE(b, a);
		a = b;
	}
	d = npx_deadline_ns(250);
	b = npx_now_ns();
	ASSERT_LE(d, b + 250ull * 1000000ull);
	ASSERT_GE(d, a + 250ull * 1000000ull);
	/* The coarse clock is the same timeline at tick resolution. */
	ASSERT_LE(npx_coarse_now_ns(), npx_now_ns() + 100000000ull);
}

TEST_HARNESS_MAIN
