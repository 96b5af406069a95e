// SPDX-License-Identifier: GPL-2.0
/*
 * The defaults files for NPROXY_* settings (lib/common/env_file.c), read
 * through the library's environment parser: a file's value is used when
 * the variable is not in the environment; the environment wins; a later
 * file (~/.nproxy.conf) wins over an earlier one (/etc/nproxy.conf);
 * NPROXY_CONF names the files instead ("~/" is $HOME, /dev/null reads
 * none); comments, blanks and quotes are dropped; a line that is not an
 * NPROXY_ setting is refused naming the file and the line.  The files are
 * read once per process: each test makes the library forget them first.
 * An entry too long for a path is refused, not cut.
 */
#include "kselftest_harness.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/common_internal.h"
#include "nproxy_test.h"

#define VAR "NPROXY_TEST_CONF_VALUE"
#define ONLY_ETC "NPROXY_TEST_CONF_ONLY_ETC"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f)) {
		fprintf(stderr, "cannot write %s\n", path);
		abort();
	}
}

FIXTURE(conf) {
	char dir[256], etc[300], home[300], err[300];
};

FIXTURE_SETUP(conf)
{
	ASSERT_EQ(0, nproxy_test_tmpdir(self->dir, sizeof(self->dir), "conf"));
	snprintf(self->etc, sizeof(self->etc), "%s/nproxy.conf", self->dir);
	snprintf(self->home, sizeof(self->home), "%s/.nproxy.conf", self->dir);
	snprintf(self->err, sizeof(self->err), "%s/stderr", self->dir);
	unsetenv(VAR);
	unsetenv(ONLY_ETC);
	unsetenv("NPROXY_CONF");
	setenv("HOME", self->dir, 1);
	npx_env_file_forget();
}

FIXTURE_TEARDOWN(conf)
{
	nproxy_test_rmtree(self->dir);
	npx_env_file_forget();
}

/* Send stderr to path; returns the descriptor to give stderr_read(). */
static int stderr_to(const char *path)
{
	int fd, saved;

	fflush(stderr);
	saved = dup(STDERR_FILENO);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (saved < 0 || fd < 0 || dup2(fd, STDERR_FILENO) < 0)
		abort();
	close(fd);
	return saved;
}

/* Put stderr back and read what went to path; the length read. */
static ssize_t stderr_read(int saved, const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

static void use_files(const char *a, const char *b)
{
	char list[700];

	snprintf(list, sizeof(list), "%s%s%s", a, b ? ":" : "", b ? b : "");
	setenv("NPROXY_CONF", list, 1);
}

TEST_F(conf, a_file_value_is_used_when_the_environment_has_none)
{
	uint32_t v = 0;

	write_file(self->etc, "# site defaults\n\n  " VAR " = 17  \n");
	use_files(self->etc, NULL);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_u32(VAR, 5, 1, 100, &v));
	ASSERT_EQ(17u, v);
}

TEST_F(conf, the_environment_wins_over_every_file)
{
	uint32_t v = 0;

	write_file(self->etc, VAR "=17\n");
	write_file(self->home, VAR "=18\n");
	use_files(self->etc, self->home);
	setenv(VAR, "42", 1);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_u32(VAR, 5, 1, 100, &v));
	ASSERT_EQ(42u, v);
}

TEST_F(conf, the_later_file_wins_and_the_earlier_fills_in)
{
	uint32_t v = 0, only = 0;

	write_file(self->etc, VAR "=17\n" ONLY_ETC "=3\n");
	write_file(self->home, VAR "=18\n");
	use_files(self->etc, self->home);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_u32(VAR, 5, 1, 100, &v));
	ASSERT_EQ(18u, v);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_u32(ONLY_ETC, 5, 1, 100, &only));
	ASSERT_EQ(3u, only);
}

TEST_F(conf, the_default_list_reads_the_home_file)
{
	uint32_t v = 0;

	/* NPROXY_CONF unset: /etc/nproxy.conf, then $HOME/.nproxy.conf. */
	write_file(self->home, VAR "=\"19\"\n");
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_u32(VAR, 5, 1, 100, &v));
	ASSERT_EQ(19u, v);
}

TEST_F(conf, tilde_is_home_in_nproxy_conf)
{
	const char *text;

	write_file(self->home, VAR "='spaced value'\n");
	setenv("NPROXY_CONF", "~/.nproxy.conf", 1);
	ASSERT_EQ((int)NPX_ENV_SET, (int)npx_env_str(VAR, "dflt", &text));
	ASSERT_STREQ("spaced value", text);
}

TEST_F(conf, dev_null_reads_no_file)
{
	uint32_t v = 0;

	write_file(self->home, VAR "=19\n");
	setenv("NPROXY_CONF", "/dev/null", 1);
	ASSERT_EQ((int)NPX_ENV_UNSET, (int)npx_env_u32(VAR, 5, 1, 100, &v));
	ASSERT_EQ(5u, v);
}

TEST_F(conf, bad_lines_are_refused_naming_file_and_line)
{
	char said[2048] = "";
	enum npx_env_found rc;
	uint32_t v = 0;
	int saved;

	unsetenv("FI_PROVIDER");
	write_file(self->etc, "garbage line\nFI_PROVIDER=tcp\nnproxy_lower=1\n" VAR "=21\n");
	use_files(self->etc, NULL);
	saved = stderr_to(self->err);
	rc = npx_env_u32(VAR, 5, 1, 100, &v);
	ASSERT_GT(stderr_read(saved, self->err, said, sizeof(said)), 0);
	ASSERT_EQ((int)NPX_ENV_SET, (int)rc);
	ASSERT_EQ(21u, v);
	ASSERT_NE(NULL, strstr(said, ":1: not NAME=VALUE: line ignored"));
	ASSERT_NE(NULL, strstr(said, ":2: the name is not an NPROXY_ setting: line ignored"));
	ASSERT_NE(NULL, strstr(said, ":3: the name is not an NPROXY_ setting: line ignored"));
	ASSERT_NE(NULL, strstr(said, self->etc));
	/* Never put in the environment: only the library's readers see file values. */
	ASSERT_EQ(NULL, getenv("FI_PROVIDER"));
	ASSERT_EQ(NULL, getenv(VAR));
}

/*
 * An NPROXY_CONF entry longer than a path can be is refused, not cut: cut
 * to 4095 bytes this one would name the file that holds 17.
 */
TEST_F(conf, an_over_long_path_is_refused_not_cut)
{
	char list[4200], said[1024] = "";
	enum npx_env_found rc;
	uint32_t v = 0;
	size_t len;
	int saved;

	write_file(self->etc, VAR "=17\n");
	len = (size_t)snprintf(list, sizeof(list), "%s/", self->dir);
	if ((4095 - len - strlen("nproxy.conf")) % 2)
		list[len++] = '/';
	while (len + strlen("nproxy.conf") < 4095)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "./");
	len += (size_t)snprintf(list + len, sizeof(list) - len, "nproxy.conf");
	ASSERT_EQ(4095u, len);
	list[4095] = '\0';
	ASSERT_EQ(0, access(list, R_OK));	/* the cut path is the file */
	strcat(list, "X");
	setenv("NPROXY_CONF", list, 1);
	saved = stderr_to(self->err);
	rc = npx_env_u32(VAR, 5, 1, 100, &v);
	ASSERT_GT(stderr_read(saved, self->err, said, sizeof(said)), 0);
	EXPECT_EQ((int)NPX_ENV_UNSET, (int)rc);
	EXPECT_EQ(5u, v);
	EXPECT_NE(NULL, strstr(said, "a path of 4096 bytes, longer than 4095: file ignored"));
}

TEST_HARNESS_MAIN
