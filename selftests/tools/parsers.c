// SPDX-License-Identifier: GPL-2.0
/*
 * The tools' parsers, linked directly: nproxyctl's device-program text
 * format (round trip through prog_text_format) and nproxy-run's sizes and
 * sweeps.
 */
#include <stdio.h>
#include <string.h>
#include "kselftest_harness.h"
#include "prog_text.h"
#include "run.h"

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

TEST(sizes)
{
	struct run_opts o;
	uint64_t v;

	ASSERT_EQ(0, run_parse_size("4096", &v));
	EXPECT_EQ(4096ULL, v);
	ASSERT_EQ(0, run_parse_size("64K", &v));
	EXPECT_EQ(65536ULL, v);
	ASSERT_EQ(0, run_parse_size("2MiB", &v));
	EXPECT_EQ(2ULL << 20, v);
	ASSERT_EQ(0, run_parse_size("1g", &v));
	EXPECT_EQ(1ULL << 30, v);
	EXPECT_EQ(-1, run_parse_size("K", &v));
	EXPECT_EQ(-1, run_parse_size("4X", &v));
	EXPECT_EQ(-1, run_parse_size("-4", &v));
	EXPECT_EQ(-1, run_parse_size("99999999999999999999", &v));

	memset(&o, 0, sizeof(o));
	ASSERT_EQ(0, run_parse_sizes("1K:1M:4", &o));
	ASSERT_EQ(6u, o.n_sizes);
	EXPECT_EQ(1024ULL, o.sizes[0]);
	EXPECT_EQ(1ULL << 20, o.sizes[5]);
	ASSERT_EQ(0, run_parse_sizes("1K:8K", &o));
	ASSERT_EQ(4u, o.n_sizes);
	EXPECT_EQ(8192ULL, o.sizes[3]);
	ASSERT_EQ(0, run_parse_sizes("1K,3K,1M", &o));
	ASSERT_EQ(3u, o.n_sizes);
	EXPECT_EQ(3072ULL, o.sizes[1]);
	EXPECT_EQ(-1, run_parse_sizes("8K:1K", &o));
	EXPECT_EQ(-1, run_parse_sizes("1K:8K:1", &o));
	EXPECT_EQ(-1, run_parse_sizes("1:256M:1:2", &o));
	EXPECT_EQ(-1, run_parse_sizes("0", &o));
	EXPECT_EQ(-1, run_parse_sizes("512M", &o));
}

TEST(busbw_factors)
{
	EXPECT_EQ(0.75, run_busbw_factor(RUN_ALLGATHER, 4));
	EXPECT_EQ(1.5, run_busbw_factor(RUN_ALLREDUCE, 4));
	EXPECT_EQ(1.0, run_busbw_factor(RUN_SENDRECV, 4));
}

TEST_HARNESS_MAIN
