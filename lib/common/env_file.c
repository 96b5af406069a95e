// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Site and user defaults for the NPROXY_* settings, as NCCL reads
 * nccl.conf: /etc/nproxy.conf, then ~/.nproxy.conf, each a list of
 * NAME=VALUE lines ('#' starts a comment line; blanks around the name and
 * the value, and one pair of quotes around the value, are dropped).  A
 * later file wins over an earlier one and the environment wins over every
 * file.  NPROXY_CONF (environment only) names the files to read instead,
 * colon-separated, in the same order ("~/" is $HOME); NPROXY_CONF=/dev/null
 * reads none.  The files are read once, on the first setting looked up.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common_internal.h"

/*
 * The real allocators, not fault_wrap.h's: the fault injector reads
 * NPROXY_FAULT through these files, so they are loaded before it is armed,
 * and the allocation it counts to fail must not shift with the files'.
 */
#undef malloc
#undef realloc
#undef strdup

#define CONF_DEFAULT	"/etc/nproxy.conf:~/.nproxy.conf"
#define CONF_PREFIX	"NPROXY_"

struct conf_entry {
	char *name, *value;
};

static struct conf_entry *entries;
static size_t n_entries;
static bool loaded;		/* acquire/release: entries are complete */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * A refused line or file is said on stderr, not through nproxy_log(): the
 * logger reads its own level from these settings while they are loading.
 */
static void conf_warn(const char *path, unsigned int line, const char *why)
{
	if (line)
		fprintf(stderr, "nproxy: %s:%u: %s: line ignored\n", path, line, why);
	else
		fprintf(stderr, "nproxy: %s: %s: file ignored\n", path, why);
}

static void conf_set(const char *name, const char *value)
{
	struct conf_entry *grown;
	char *n, *v;

	for (size_t i = 0; i < n_entries; i++) {
		if (strcmp(entries[i].name, name))
			continue;
		v = strdup(value);
		if (v) {
			free(entries[i].value);
			entries[i].value = v;
		}
		return;
	}
	grown = realloc(entries, (n_entries + 1) * sizeof(*entries));
	if (!grown)
		return;
	entries = grown;
	n = strdup(name);
	v = strdup(value);
	if (!n || !v) {
		free(n);
		free(v);
		return;
	}
	entries[n_entries++] = (struct conf_entry){ .name = n, .value = v };
}

static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

/* NPROXY_ and then capitals, digits and '_'; not NPROXY_CONF itself. */
static bool conf_name_ok(const char *name)
{
	if (strncmp(name, CONF_PREFIX, strlen(CONF_PREFIX)) || !strcmp(name, "NPROXY_CONF") ||
	    !name[strlen(CONF_PREFIX)])
		return false;
	for (const char *c = name; *c; c++)
		if (!isupper((unsigned char)*c) && !isdigit((unsigned char)*c) && *c != '_')
			return false;
	return true;
}

static void conf_line(const char *path, unsigned int lineno, char *line)
{
	char *eq, *name, *value;
	size_t len;

	line = trim(line);
	if (!*line || *line == '#')
		return;
	eq = strchr(line, '=');
	if (!eq) {
		conf_warn(path, lineno, "not NAME=VALUE");
		return;
	}
	*eq = '\0';
	name = trim(line);
	value = trim(eq + 1);
	if (!conf_name_ok(name)) {
		conf_warn(path, lineno, "the name is not an NPROXY_ setting");
		return;
	}
	len = strlen(value);
	if (len >= 2 && (value[0] == '"' || value[0] == '\'') && value[len - 1] == value[0]) {
		value[len - 1] = '\0';
		value++;
	}
	conf_set(name, value);
}

static void conf_read(const char *path)
{
	char line[4096];
	unsigned int lineno = 0;
	FILE *f = fopen(path, "re");

	if (!f) {
		if (errno != ENOENT && errno != ENOTDIR)
			conf_warn(path, 0, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);

		lineno++;
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			int c;

			conf_warn(path, lineno, "longer than 4095 bytes");
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
			continue;
		}
		conf_line(path, lineno, line);
	}
	fclose(f);
}

static void conf_load(void)
{
	const char *list = getenv("NPROXY_CONF"), *home = getenv("HOME");
	char *copy, *save = NULL;

	copy = strdup(list && *list ? list : CONF_DEFAULT);
	if (!copy)
		return;
	for (char *p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		char path[4096];
		int n;

		if (!strncmp(p, "~/", 2)) {
			if (!home || !*home)
				continue;
			n = snprintf(path, sizeof(path), "%s/%s", home, p + 2);
		} else {
			n = snprintf(path, sizeof(path), "%s", p);
		}
		if (n < 0)
			continue;
		/* A cut path could name another file: refuse it whole. */
		if ((size_t)n >= sizeof(path)) {
			fprintf(stderr, "nproxy: %.60s...: a path of %d bytes, longer than %zu: file ignored\n",
				path, n, sizeof(path) - 1);
			continue;
		}
		conf_read(path);
	}
	free(copy);
}

const char *npx_env_file_value(const char *name)
{
	if (!__atomic_load_n(&loaded, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&load_lock);
		if (!loaded) {
			conf_load();
			__atomic_store_n(&loaded, true, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&load_lock);
	}
	for (size_t i = 0; i < n_entries; i++)
		if (!strcmp(entries[i].name, name))
			return *entries[i].value ? entries[i].value : NULL;
	return NULL;
}

void npx_env_file_forget(void)
{
	pthread_mutex_lock(&load_lock);
	for (size_t i = 0; i < n_entries; i++) {
		free(entries[i].name);
		free(entries[i].value);
	}
	free(entries);
	entries = NULL;
	n_entries = 0;
	__atomic_store_n(&loaded, false, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&load_lock);
}
