// SPDX-License-Identifier: GPL-2.0
/*
 * Library logging without a sink: NPROXY_LOG_LEVEL's threshold (error,
 * warn, info, debug, case-insensitive; unset or unknown: warn), an
 * explicit nproxy_log_set_level() over the variable, a sink that sees
 * every level, nproxy_log_set_sink(NULL) back to stderr, and the stderr
 * line "nproxy[<pid>] <s>.<us> <level> <thread>: <text>".  Each case runs
 * in a child (the level is read once per process) whose stderr is a pipe.
 */
#include "kselftest_harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nproxy/log.h>

enum { SET_LEVEL_NONE = -1 };

static int n_sunk;

static void count_sink(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
	n_sunk++;
}

/*
 * In a child: NPROXY_LOG_LEVEL=env (NULL: unset), then set_level (unless
 * SET_LEVEL_NONE), then one message per level; what reached stderr, in out.
 */
static int log_in_child(const char *env, int set_level, bool sink_then_none, char *out, size_t len)
{
	int fds[2], status;
	ssize_t n, got = 0;
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		if (env)
			setenv("NPROXY_LOG_LEVEL", env, 1);
		else
			unsetenv("NPROXY_LOG_LEVEL");
		if (set_level != SET_LEVEL_NONE)
			nproxy_log_set_level((enum nproxy_log_level)set_level);
		if (sink_then_none) {
			nproxy_log_set_sink(count_sink, NULL);
			nproxy_log(NPROXY_LOG_DEBUG, "to the sink");
			nproxy_log_set_sink(NULL, NULL);
			if (n_sunk != 1)
				_exit(3);
		}
		nproxy_log(NPROXY_LOG_ERROR, "msg-error");
		nproxy_log(NPROXY_LOG_WARN, "msg-warn");
		nproxy_log(NPROXY_LOG_INFO, "msg-info");
		nproxy_log(NPROXY_LOG_DEBUG, "msg-debug");
		_exit(0);
	}
	close(fds[1]);
	while (got + 1 < (ssize_t)len && (n = read(fds[0], out + got, len - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = '\0';
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Which of the four messages reached stderr, as "ewid" letters. */
static void levels_seen(const char *out, char *seen)
{
	static const char *const names[] = { "msg-error", "msg-warn", "msg-info", "msg-debug" };
	static const char letters[] = "ewid";
	int k = 0;

	for (int i = 0; i < 4; i++)
		if (strstr(out, names[i]))
			seen[k++] = letters[i];
	seen[k] = '\0';
}

static void check_env(struct __test_metadata *_metadata, const char *env, const char *want)
{
	char out[4096], seen[8];

	ASSERT_EQ(0, log_in_child(env, SET_LEVEL_NONE, false, out, sizeof(out)));
	levels_seen(out, seen);
	EXPECT_STREQ(want, seen) {
		TH_LOG("NPROXY_LOG_LEVEL=%s: %s", env ? env : "(unset)", out);
	}
}

TEST(unset_is_warn)		{ check_env(_metadata, NULL, "ew"); }
TEST(error_only_errors)		{ check_env(_metadata, "error", "e"); }
TEST(warn_threshold)		{ check_env(_metadata, "warn", "ew"); }
TEST(info_threshold)		{ check_env(_metadata, "info", "ewi"); }
TEST(debug_everything)		{ check_env(_metadata, "debug", "ewid"); }
TEST(names_ignore_case)		{ check_env(_metadata, "DeBuG", "ewid"); }
TEST(unknown_name_is_warn)	{ check_env(_metadata, "verbose", "ew"); }

/* An explicit level wins over the variable, in both directions. */
TEST(set_level_overrides_env)
{
	char out[4096], seen[8];

	ASSERT_EQ(0, log_in_child("debug", NPROXY_LOG_ERROR, false, out, sizeof(out)));
	levels_seen(out, seen);
	EXPECT_STREQ("e", seen);
	ASSERT_EQ(0, log_in_child("error", NPROXY_LOG_INFO, false, out, sizeof(out)));
	levels_seen(out, seen);
	EXPECT_STREQ("ewi", seen);
}

/* A sink sees a debug message below the threshold; NULL brings stderr back. */
TEST(sink_sees_all_and_null_restores_stderr)
{
	char out[4096], seen[8];

	ASSERT_EQ(0, log_in_child("error", SET_LEVEL_NONE, true, out, sizeof(out)));
	levels_seen(out, seen);
	EXPECT_STREQ("e", seen);
	EXPECT_EQ(NULL, strstr(out, "to the sink"));
}

/* "nproxy[<pid>] <s>.<6 digits> <level> <thread>: <text>", one line each. */
TEST(stderr_line_format)
{
	char out[4096], thread[16], text[64], lvl[8];
	unsigned long long secs;
	int pid, usec_digits = 0, fields;
	const char *dot;

	ASSERT_EQ(0, log_in_child("error", SET_LEVEL_NONE, false, out, sizeof(out)));
	fields = sscanf(out, "nproxy[%d] %llu.%*u %7s %15[^:]: %63[^\n]", &pid, &secs, lvl, thread, text);
	ASSERT_EQ(5, fields) {
		TH_LOG("line: %s", out);
	}
	EXPECT_LT(0, pid);
	EXPECT_STREQ("error", lvl);
	EXPECT_STREQ("msg-error", text);
	dot = strchr(out, '.');
	ASSERT_NE(NULL, dot);
	while (dot[1 + usec_digits] >= '0' && dot[1 + usec_digits] <= '9')
		usec_digits++;
	EXPECT_EQ(6, usec_digits);
	EXPECT_EQ(1, (int)(strchr(out, '\n') == out + strlen(out) - 1));
}

TEST_HARNESS_MAIN
