// SPDX-License-Identifier: GPL-2.0
/*
 * The tools' parsers, linked directly: nproxyctl's device-program text
 * format (round trip through prog_text_format) and the command-line values
 * both tools read through cli.h (numbers, pids, sizes, seconds, durations,
 * size lists and sweeps), with their edge cases and messages.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "kselftest_harness.h"
#include "cli.h"
#include "prog_text.h"
#include "run.h"

/* A text a parser refuses, with the start of the message it gives. */
struct refused {
	const char *text, *msg;
};

/*
 * Every case of the array cases is refused: call, which reads the case's
 * text as `text`, returns -1 and leaves in why a message starting with the
 * case's msg.
 */
#define EXPECT_REFUSED(cases, call)							\
	for (size_t i_ = 0; i_ < sizeof(cases) / sizeof((cases)[0]); i_++) {		\
		const char *text = (cases)[i_].text, *msg = (cases)[i_].msg;		\
											\
		why[0] = '\0';								\
		EXPECT_EQ(-1, call);							\
		EXPECT_EQ(0, strncmp(why, msg, strlen(msg)))				\
			TH_LOG("'%s': got '%s', want '%s'", text, why, msg);		\
	}

static int parse_str(const char *text, struct nproxy_prog_step *steps, uint32_t max,
		     uint32_t *n, char *err, size_t errlen)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int ret;

	if (!f)
		return -2;
	ret = prog_text_parse(f, "t", steps, max, n, err, errlen);
	fclose(f);
	return ret;
}

TEST(program_every_step)
{
	struct nproxy_prog_step s[8];
	char err[160] = "";
	uint32_t n = 0;

	ASSERT_EQ(0, parse_str("write-trigger 3 0xfffffffe\n"
			       "wait-sem 255 >= 18446744073709551615 timeout 2s\n"
			       "wait-sem 0 >= 1\n"
			       "delay 0ns\n"
			       "inc-sem 7 9 # c\n"
			       "signal 42\n", s, 8, &n, err, sizeof(err))) TH_LOG("%s", err);
	ASSERT_EQ(6u, n);
	EXPECT_EQ(NPROXY_STEP_WRITE_TRIGGER, s[0].op);
	EXPECT_EQ(3u, s[0].index);
	EXPECT_EQ(0xfffffffeULL, s[0].value);
	EXPECT_EQ(NPROXY_STEP_WAIT_SEM, s[1].op);
	EXPECT_EQ(255u, s[1].index);
	EXPECT_EQ(~0ULL, s[1].value);
	EXPECT_EQ(2000000000ULL, s[1].timeout_ns);
	EXPECT_EQ(0ULL, s[2].timeout_ns);	/* 0: the module's maximum */
	EXPECT_EQ(NPROXY_STEP_DELAY, s[3].op);
	EXPECT_EQ(NPROXY_STEP_INC_SEM, s[4].op);
	EXPECT_EQ(9ULL, s[4].value);
	EXPECT_EQ(NPROXY_STEP_SIGNAL_EVENT, s[5].op);
	EXPECT_EQ(42ULL, s[5].value);
	for (uint32_t i = 0; i < n; i++)
		EXPECT_EQ(0, s[i].flags);
}

TEST(program_round_trip)
{
	const char *lines[] = { "write-trigger 0 1", "wait-sem 2 >= 5 timeout 100ms",
				"delay 50us", "inc-sem 1 1", "signal 7", "delay 3s",
				"wait-sem 1 >= 2 timeout 1500ns" };
	char text[512] = "", buf[128], err[160];
	struct nproxy_prog_step s[8];
	uint32_t n;

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		strcat(text, lines[i]);
		strcat(text, "\n");
	}
	ASSERT_EQ(0, parse_str(text, s, 8, &n, err, sizeof(err)));
	ASSERT_EQ(sizeof(lines) / sizeof(lines[0]), n);
	for (uint32_t i = 0; i < n; i++) {
		prog_text_format(&s[i], buf, sizeof(buf));
		EXPECT_STREQ(lines[i], buf);
	}
}

TEST(program_errors_name_the_line)
{
	static const struct { const char *text, *msg; } cases[] = {
		{ "delay 1us\nbogus\n", "t:2: unknown step 'bogus'" },
		{ "write-trigger 0\n", "t:1: usage: write-trigger STREAM VALUE" },
		{ "write-trigger 0 4294967296\n", "t:1: trigger value '4294967296' is not a u32" },
		{ "wait-sem 256 >= 1\n", "t:1: semaphore '256' is not 0..255" },
		{ "wait-sem 1 >= -1\n", "t:1: threshold '-1' is not a u64" },
		{ "wait-sem 1 >= 1 timeout 0ms\n", "t:1: timeout '0ms'" },
		{ "wait-sem 1 >= 1 deadline 5ms\n", "t:1: expected 'timeout', got 'deadline'" },
		{ "delay 10m\n", "t:1: delay '10m'" },
		{ "inc-sem 1\n", "t:1: usage: inc-sem SEM VALUE" },
		{ "signal\n", "t:1: usage: signal VALUE" },
		{ "\n# nothing\n", "t:2: no steps" },
	};
	struct nproxy_prog_step s[4];
	char err[160];
	uint32_t n;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		EXPECT_EQ(-1, parse_str(cases[i].text, s, 4, &n, err, sizeof(err)));
		EXPECT_EQ(0, strncmp(err, cases[i].msg, strlen(cases[i].msg)))
			TH_LOG("case %zu: got '%s', want '%s'", i, err, cases[i].msg);
	}
}

TEST(program_step_limit)
{
	struct nproxy_prog_step s[2];
	char err[160];
	uint32_t n;

	EXPECT_EQ(-1, parse_str("signal 1\nsignal 2\nsignal 3\n", s, 2, &n, err, sizeof(err)));
	EXPECT_EQ(0, strncmp(err, "t:3: more than 2 steps", 22)) TH_LOG("%s", err);
}

/* Each parser's message for text, or "" when it took it. */
#define WHY_LEN 200

TEST(cli_unsigned)
{
	char why[WHY_LEN];
	uint64_t v64;
	uint32_t v;

	ASSERT_EQ(0, cli_parse_u32("--n", "0", 0, 10, &v, why, sizeof(why)));
	EXPECT_EQ(0u, v);
	ASSERT_EQ(0, cli_parse_u32("--n", "4294967295", 0, UINT32_MAX, &v, why, sizeof(why)));
	EXPECT_EQ(UINT32_MAX, v);
	ASSERT_EQ(0, cli_parse_u32("--n", "0xfffffffe", 0, UINT32_MAX, &v, why, sizeof(why)));
	EXPECT_EQ(0xfffffffeu, v);
	/* A leading 0 is decimal, not octal. */
	ASSERT_EQ(0, cli_parse_u32("--n", "010", 0, 100, &v, why, sizeof(why)));
	EXPECT_EQ(10u, v);
	ASSERT_EQ(0, cli_parse_u64("--n", "18446744073709551615", 0, UINT64_MAX, &v64, why,
				   sizeof(why)));
	EXPECT_EQ(UINT64_MAX, v64);

	static const struct refused bad[] = {
		{ "", "--n: '' is not 1..64: empty" },
		{ "+3", "--n: '+3' is not 1..64: no '+' or '-' sign" },
		{ "-1", "--n: '-1' is not 1..64: no '+' or '-' sign" },
		{ " 3", "--n: ' 3' is not 1..64" },
		{ "3x", "--n: '3x' is not 1..64: trailing 'x'" },
		{ "0x", "--n: '0x' is not 1..64: no hex digits after 0x" },
		{ "0x41", "--n: '0x41' is not 1..64" },
		{ "65", "--n: '65' is not 1..64" },
		{ "0", "--n: '0' is not 1..64" },
		{ "4294967296", "--n: '4294967296' is not 1..64: too large" },
		{ "99999999999999999999", "--n: '99999999999999999999' is not 1..64: too large" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		why[0] = '\0';
		EXPECT_EQ(-1, cli_parse_u32("--n", bad[i].text, 1, 64, &v, why, sizeof(why)));
		EXPECT_EQ(7u, v) TH_LOG("'%s' changed the value", bad[i].text);
		EXPECT_EQ(0, strncmp(why, bad[i].msg, strlen(bad[i].msg)))
			TH_LOG("'%s': got '%s', want '%s'", bad[i].text, why, bad[i].msg);
	}
	/* The whole range of the type: named, not spelled out. */
	EXPECT_EQ(-1, cli_parse_u64("--count", "0", 1, UINT64_MAX, &v64, why, sizeof(why)));
	EXPECT_STREQ("--count: '0' is not a positive integer", why);
	EXPECT_EQ(-1, cli_parse_u32("SEM", "-2", 0, UINT32_MAX, &v, why, sizeof(why)));
	EXPECT_STREQ("SEM: '-2' is not an unsigned integer: no '+' or '-' sign (the value is unsigned)",
		     why);
	/* No message wanted: still refused. */
	EXPECT_EQ(-1, cli_parse_u32("--n", "+1", 0, 10, &v, NULL, 0));
	/* A message cut to its buffer stays a string. */
	EXPECT_EQ(-1, cli_parse_u32("--n", "abc", 0, 10, &v, why, 8));
	EXPECT_STREQ("--n: 'a", why);
}

TEST(cli_pid)
{
	char why[WHY_LEN];
	int pid = 0;

	ASSERT_EQ(0, cli_parse_pid("--pid", "1", &pid, why, sizeof(why)));
	EXPECT_EQ(1, pid);
	ASSERT_EQ(0, cli_parse_pid("--pid", "1073741823", &pid, why, sizeof(why)));
	EXPECT_EQ(0x3fffffff, pid);
	EXPECT_EQ(-1, cli_parse_pid("--pid", "0", &pid, why, sizeof(why)));
	EXPECT_STREQ("--pid: '0' is not a process id", why);
	EXPECT_EQ(-1, cli_parse_pid("--pid", "1073741824", &pid, why, sizeof(why)));
	EXPECT_EQ(-1, cli_parse_pid("--pid", "0x10", &pid, why, sizeof(why)));
	EXPECT_EQ(-1, cli_parse_pid("--pid", "+5", &pid, why, sizeof(why)));
	EXPECT_STREQ("--pid: '+5' is not a process id: no '+' or '-' sign (the value is unsigned)",
		     why);
	EXPECT_EQ(-1, cli_parse_pid("--pid", "", &pid, why, sizeof(why)));
	EXPECT_STREQ("--pid: '' is not a process id: empty", why);
}

TEST(cli_sizes)
{
	char why[WHY_LEN];
	uint64_t v;

	ASSERT_EQ(0, cli_parse_size("-s", "4096", 1, UINT64_MAX, &v, why, sizeof(why)));
	EXPECT_EQ(4096ULL, v);
	ASSERT_EQ(0, cli_parse_size("-s", "64K", 1, UINT64_MAX, &v, why, sizeof(why)));
	EXPECT_EQ(65536ULL, v);
	ASSERT_EQ(0, cli_parse_size("-s", "2MiB", 1, UINT64_MAX, &v, why, sizeof(why)));
	EXPECT_EQ(2ULL << 20, v);
	ASSERT_EQ(0, cli_parse_size("-s", "3KB", 1, UINT64_MAX, &v, why, sizeof(why)));
	EXPECT_EQ(3072ULL, v);
	ASSERT_EQ(0, cli_parse_size("-s", "1g", 1, UINT64_MAX, &v, why, sizeof(why)));
	EXPECT_EQ(1ULL << 30, v);
	ASSERT_EQ(0, cli_parse_size("-s", "16777215G", 1, UINT64_MAX, &v, why, sizeof(why)));
	EXPECT_EQ(16777215ULL << 30, v);

	static const struct refused bad[] = {
		{ "", "-s: '' is not a number of bytes (64K, 1M, 4096): empty" },
		{ "K", "-s: 'K' is not a number of bytes (64K, 1M, 4096)" },
		{ "+4K", "-s: '+4K' is not a number of bytes (64K, 1M, 4096): no '+' or '-' sign" },
		{ "-4", "-s: '-4' is not a number of bytes (64K, 1M, 4096): no '+' or '-' sign" },
		{ "4X", "-s: '4X' is not a number of bytes: unknown unit 'X'" },
		{ "4KX", "-s: '4KX' is not a number of bytes: unknown unit 'KX'" },
		{ "4 K", "-s: '4 K' is not a number of bytes: unknown unit ' K'" },
		{ "0x10", "-s: '0x10' is not a number of bytes: unknown unit 'x10'" },
		{ "99999999999999999999", "-s: '99999999999999999999' is not a number of bytes: too large" },
		{ "17179869184G", "-s: '17179869184G' is not a number of bytes: too large" },
		{ "0", "-s: '0' is not a size of at least 1 bytes" },
		{ "512M", "-s: '512M' is not a size of at most 256M: above the 256M cap" },
	};
	EXPECT_REFUSED(bad, cli_parse_size("-s", text, 1, 256 << 20, &v, why, sizeof(why)));
}

TEST(cli_seconds_and_durations)
{
	char why[WHY_LEN];
	uint64_t ns;
	double s;

	ASSERT_EQ(0, cli_parse_seconds("-t", "0.5", 0, 10, &s, why, sizeof(why)));
	EXPECT_EQ(0.5, s);
	ASSERT_EQ(0, cli_parse_seconds("-t", ".25", 0, 10, &s, why, sizeof(why)));
	EXPECT_EQ(0.25, s);
	ASSERT_EQ(0, cli_parse_seconds("-t", "10", 0, 10, &s, why, sizeof(why)));
	EXPECT_EQ(10.0, s);
	static const struct refused bad[] = {
		{ "", "-t: '' is not a number of seconds in [0.05, 10]: empty" },
		{ "-1", "-t: '-1' is not a number of seconds in [0.05, 10]: no '+' or '-' sign" },
		{ "+1", "-t: '+1' is not a number of seconds in [0.05, 10]: no '+' or '-' sign" },
		{ "inf", "-t: 'inf' is not a number of seconds in [0.05, 10]" },
		{ "nan", "-t: 'nan' is not a number of seconds in [0.05, 10]" },
		{ "0x1p1", "-t: '0x1p1' is not a number of seconds: decimal only" },
		{ "1s", "-t: '1s' is not a number of seconds: trailing 's'" },
		{ "0.01", "-t: '0.01' is not a number of seconds in [0.05, 10]" },
		{ "11", "-t: '11' is not a number of seconds in [0.05, 10]" },
		{ "1e999", "-t: '1e999' is not a number of seconds in [0.05, 10]" },
	};
	EXPECT_REFUSED(bad, cli_parse_seconds("-t", text, 0.05, 10, &s, why, sizeof(why)));

	ASSERT_EQ(0, cli_parse_duration_ns("d", "100ms", &ns, why, sizeof(why)));
	EXPECT_EQ(100000000ULL, ns);
	ASSERT_EQ(0, cli_parse_duration_ns("d", "0ns", &ns, why, sizeof(why)));
	EXPECT_EQ(0ULL, ns);
	ASSERT_EQ(0, cli_parse_duration_ns("d", "18446744073s", &ns, why, sizeof(why)));
	EXPECT_EQ(0, cli_parse_duration_ns("d", "7us", &ns, why, sizeof(why)));
	EXPECT_EQ(7000ULL, ns);
	EXPECT_EQ(-1, cli_parse_duration_ns("d", "5", &ns, why, sizeof(why)));
	EXPECT_STREQ("d: '5' is not a duration: no unit '' (ns, us, ms or s)", why);
	EXPECT_EQ(-1, cli_parse_duration_ns("d", "5m", &ns, why, sizeof(why)));
	EXPECT_STREQ("d: '5m' is not a duration: unknown unit 'm' (ns, us, ms or s)", why);
	EXPECT_EQ(-1, cli_parse_duration_ns("d", "18446744074s", &ns, why, sizeof(why)));
	EXPECT_STREQ("d: '18446744074s' is not a duration: too large", why);
	EXPECT_EQ(-1, cli_parse_duration_ns("d", "-5ms", &ns, why, sizeof(why)));
	EXPECT_EQ(-1, cli_parse_duration_ns("d", "", &ns, why, sizeof(why)));
}

TEST(cli_size_lists)
{
	uint64_t sizes[RUN_MAX_SIZES];
	char why[WHY_LEN];
	uint32_t n = 0;

	ASSERT_EQ(0, cli_parse_size_list("-s", "1K:1M:4", 1, RUN_MAX_SIZE_BYTES, sizes,
					 RUN_MAX_SIZES, &n, why, sizeof(why))) TH_LOG("%s", why);
	ASSERT_EQ(6u, n);
	EXPECT_EQ(1024ULL, sizes[0]);
	EXPECT_EQ(1ULL << 20, sizes[5]);
	ASSERT_EQ(0, cli_parse_size_list("-s", "1K:8K", 1, RUN_MAX_SIZE_BYTES, sizes,
					 RUN_MAX_SIZES, &n, why, sizeof(why)));
	ASSERT_EQ(4u, n);
	EXPECT_EQ(8192ULL, sizes[3]);
	ASSERT_EQ(0, cli_parse_size_list("-s", "1K,3K,1M", 1, RUN_MAX_SIZE_BYTES, sizes,
					 RUN_MAX_SIZES, &n, why, sizeof(why)));
	ASSERT_EQ(3u, n);
	EXPECT_EQ(3072ULL, sizes[1]);
	/* The cap on how many: a list and a sweep both stop at it. */
	ASSERT_EQ(0, cli_parse_size_list("-s", "1,2,3", 1, 10, sizes, 3, &n, why, sizeof(why)));
	EXPECT_EQ(-1, cli_parse_size_list("-s", "1,2,3,4", 1, 10, sizes, 3, &n, why, sizeof(why)));
	EXPECT_STREQ("-s: '1,2,3,4' is not a size list: more than 3 sizes", why);
	EXPECT_EQ(-1, cli_parse_size_list("-s", "1:16", 1, 100, sizes, 4, &n, why, sizeof(why)));
	EXPECT_STREQ("-s: '1:16' is not a sweep: the sweep has more than 4 sizes", why);

	static const struct refused bad[] = {
		{ "", "-s: '' is not a size list: an empty size in the list" },
		{ "1K,,2K", "-s: '1K,,2K' is not a size list: an empty size in the list" },
		{ ",1K", "-s: ',1K' is not a size list: an empty size in the list" },
		{ "1K,", "-s: '1K,' is not a size list: an empty size in the list" },
		{ "1K,+2K", "-s: '+2K' is not a number of bytes (64K, 1M, 4096): no '+' or '-' sign" },
		{ "8K:1K", "-s: '8K:1K' is not a sweep: the sweep's minimum 8192 B is above its maximum 1024 B" },
		{ "1K:8K:1", "-s: '1K:8K:1' is not a sweep: a sweep's factor is at least 2 (got 1)" },
		{ "1K:8K:-2", "-s: '-2' is not an unsigned integer: no '+' or '-' sign" },
		{ "1:256M:1:2", "-s: '1:256M:1:2' is not a sweep: a sweep is MIN:MAX or MIN:MAX:FACTOR" },
		{ "1K::8K", "-s: '1K::8K' is not a sweep: a sweep is MIN:MAX or MIN:MAX:FACTOR" },
		{ "1K:", "-s: '1K:' is not a sweep: a sweep is MIN:MAX or MIN:MAX:FACTOR" },
		{ "0", "-s: '0' is not a size of at least 1 bytes" },
		{ "512M", "-s: '512M' is not a size of at most 256M" },
		{ "1K:512M", "-s: '512M' is not a size of at most 256M" },
	};
	EXPECT_REFUSED(bad, cli_parse_size_list("-s", text, 1, RUN_MAX_SIZE_BYTES, sizes,
						RUN_MAX_SIZES, &n, why, sizeof(why)));
}

/* nproxy-run's command line goes through the same parsers. */
TEST(run_opts_sizes)
{
	char *argv_sweep[] = { "nproxy-run", "-b", "1K", "-e", "8K", "-f", "2", NULL };
	char *argv_list[] = { "nproxy-run", "--size", "4K,1M", NULL };
	struct run_opts o;

	optind = 0;
	ASSERT_EQ(0, run_parse_opts(7, argv_sweep, &o));
	ASSERT_EQ(4u, o.n_sizes);
	EXPECT_EQ(8192ULL, o.sizes[3]);
	optind = 0;
	ASSERT_EQ(0, run_parse_opts(3, argv_list, &o));
	ASSERT_EQ(2u, o.n_sizes);
	EXPECT_EQ(1ULL << 20, o.sizes[1]);
	/* The default: 1K..1M by 4. */
	optind = 0;
	ASSERT_EQ(0, run_parse_opts(1, argv_list, &o));
	ASSERT_EQ(6u, o.n_sizes);
	EXPECT_EQ(1024ULL, o.sizes[0]);
}

TEST(busbw_factors)
{
	EXPECT_EQ(0.75, run_busbw_factor(RUN_ALLGATHER, 4));
	EXPECT_EQ(1.5, run_busbw_factor(RUN_ALLREDUCE, 4));
	EXPECT_EQ(1.0, run_busbw_factor(RUN_SENDRECV, 4));
}

TEST_HARNESS_MAIN
