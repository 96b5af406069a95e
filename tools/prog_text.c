// SPDX-License-Identifier: GPL-2.0
/* Parser for the device-program text format, see prog_text.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "prog_text.h"

#define MAX_WORDS 8

/* The numbers of the format follow the tools' command-line rules (cli.h). */
static int parse_u64(const char *s, __u64 *out)
{
	uint64_t v;

	if (cli_parse_u64("", s, 0, UINT64_MAX, &v, NULL, 0))
		return -1;
	*out = v;
	return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
	return cli_parse_u32("", s, 0, UINT32_MAX, out, NULL, 0);
}

static int parse_duration(const char *s, __u64 *ns)
{
	uint64_t v;

	if (cli_parse_duration_ns("", s, &v, NULL, 0))
		return -1;
	*ns = v;
	return 0;
}

static int fail(char *err, size_t errlen, const char *name, unsigned int line,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(char *err, size_t errlen, const char *name, unsigned int line,
		const char *fmt, ...)
{
	int n = snprintf(err, errlen, "%s:%u: ", name, line);
	va_list ap;

	if (n < 0 || (size_t)n >= errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - n, fmt, ap);
	va_end(ap);
	return -1;
}

static int parse_line(char **w, int nw, struct nproxy_prog_step *st,
		      char *msg, size_t msglen)
{
	memset(st, 0, sizeof(*st));
	if (!strcmp(w[0], "write-trigger")) {
		uint32_t v;

		if (nw != 3)
			return snprintf(msg, msglen, "usage: write-trigger STREAM VALUE"), -1;
		if (parse_u32(w[1], &st->index) || st->index >= NPROXY_MAX_STREAMS)
			return snprintf(msg, msglen, "stream '%s' is not 0..%u", w[1],
					NPROXY_MAX_STREAMS - 1), -1;
		if (parse_u32(w[2], &v))
			return snprintf(msg, msglen, "trigger value '%s' is not a u32", w[2]), -1;
		st->op = NPROXY_STEP_WRITE_TRIGGER;
		st->value = v;
	} else if (!strcmp(w[0], "wait-sem")) {
		if (nw != 4 && nw != 6)
			return snprintf(msg, msglen,
					"usage: wait-sem SEM >= VALUE [timeout DURATION]"), -1;
		if (parse_u32(w[1], &st->index) || st->index >= NPROXY_MAX_SEMS)
			return snprintf(msg, msglen, "semaphore '%s' is not 0..%u", w[1],
					NPROXY_MAX_SEMS - 1), -1;
		if (strcmp(w[2], ">="))
			return snprintf(msg, msglen, "expected '>=' after the semaphore, got '%s'",
					w[2]), -1;
		if (parse_u64(w[3], &st->value))
			return snprintf(msg, msglen, "threshold '%s' is not a u64", w[3]), -1;
		if (nw == 6) {
			if (strcmp(w[4], "timeout"))
				return snprintf(msg, msglen, "expected 'timeout', got '%s'", w[4]), -1;
			if (parse_duration(w[5], &st->timeout_ns) || !st->timeout_ns ||
			    st->timeout_ns > NPROXY_MAX_WAIT_NS)
				return snprintf(msg, msglen,
						"timeout '%s' is not a duration in 1ns..60s (e.g. 100ms)",
						w[5]), -1;
		}
		st->op = NPROXY_STEP_WAIT_SEM;
	} else if (!strcmp(w[0], "delay")) {
		if (nw != 2)
			return snprintf(msg, msglen, "usage: delay DURATION"), -1;
		if (parse_duration(w[1], &st->timeout_ns) ||
		    st->timeout_ns > NPROXY_MAX_WAIT_NS)
			return snprintf(msg, msglen,
					"delay '%s' is not a duration up to 60s (e.g. 50us)", w[1]), -1;
		st->op = NPROXY_STEP_DELAY;
	} else if (!strcmp(w[0], "inc-sem")) {
		if (nw != 3)
			return snprintf(msg, msglen, "usage: inc-sem SEM VALUE"), -1;
		if (parse_u32(w[1], &st->index) || st->index >= NPROXY_MAX_SEMS)
			return snprintf(msg, msglen, "semaphore '%s' is not 0..%u", w[1],
					NPROXY_MAX_SEMS - 1), -1;
		if (parse_u64(w[2], &st->value))
			return snprintf(msg, msglen, "increment '%s' is not a u64", w[2]), -1;
		st->op = NPROXY_STEP_INC_SEM;
	} else if (!strcmp(w[0], "signal")) {
		if (nw != 2)
			return snprintf(msg, msglen, "usage: signal VALUE"), -1;
		if (parse_u64(w[1], &st->value))
			return snprintf(msg, msglen, "event value '%s' is not a u64", w[1]), -1;
		st->op = NPROXY_STEP_SIGNAL_EVENT;
	} else {
		return snprintf(msg, msglen,
				"unknown step '%s' (write-trigger, wait-sem, delay, inc-sem, signal)",
				w[0]), -1;
	}
	return 0;
}

int prog_text_parse(FILE *f, const char *name, struct nproxy_prog_step *steps,
		    uint32_t max_steps, uint32_t *n_steps, char *err, size_t errlen)
{
	char *line = NULL, *w[MAX_WORDS], msg[160];
	unsigned int lineno = 0;
	size_t cap = 0;
	uint32_t n = 0;
	int ret = 0;

	while (getline(&line, &cap, f) >= 0) {
		char *hash, *save = NULL, *tok;
		int nw = 0;

		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		for (tok = strtok_r(line, " \t\r\n", &save); tok;
		     tok = strtok_r(NULL, " \t\r\n", &save)) {
			if (nw == MAX_WORDS) {
				ret = fail(err, errlen, name, lineno, "too many words");
				goto out;
			}
			w[nw++] = tok;
		}
		if (!nw)
			continue;
		if (n == max_steps) {
			ret = fail(err, errlen, name, lineno, "more than %u steps", max_steps);
			goto out;
		}
		if (parse_line(w, nw, &steps[n], msg, sizeof(msg))) {
			ret = fail(err, errlen, name, lineno, "%s", msg);
			goto out;
		}
		n++;
	}
	if (ferror(f)) {
		ret = fail(err, errlen, name, lineno, "read error: %s", strerror(errno));
		goto out;
	}
	if (!n) {
		ret = fail(err, errlen, name, lineno, "no steps");
		goto out;
	}
	*n_steps = n;
out:
	free(line);
	return ret;
}

static void format_duration(uint64_t ns, char *buf, size_t len)
{
	if (ns && ns % 1000000000 == 0)
		snprintf(buf, len, "%" PRIu64 "s", ns / 1000000000);
	else if (ns && ns % 1000000 == 0)
		snprintf(buf, len, "%" PRIu64 "ms", ns / 1000000);
	else if (ns && ns % 1000 == 0)
		snprintf(buf, len, "%" PRIu64 "us", ns / 1000);
	else
		snprintf(buf, len, "%" PRIu64 "ns", ns);
}

void prog_text_format(const struct nproxy_prog_step *st, char *buf, size_t len)
{
	char d[32];

	switch (st->op) {
	case NPROXY_STEP_WRITE_TRIGGER:
		snprintf(buf, len, "write-trigger %u %" PRIu64, st->index, (uint64_t)st->value);
		break;
	case NPROXY_STEP_WAIT_SEM:
		if (st->timeout_ns) {
			format_duration(st->timeout_ns, d, sizeof(d));
			snprintf(buf, len, "wait-sem %u >= %" PRIu64 " timeout %s",
				 st->index, (uint64_t)st->value, d);
		} else {
			snprintf(buf, len, "wait-sem %u >= %" PRIu64, st->index, (uint64_t)st->value);
		}
		break;
	case NPROXY_STEP_DELAY:
		format_duration(st->timeout_ns, d, sizeof(d));
		snprintf(buf, len, "delay %s", d);
		break;
	case NPROXY_STEP_INC_SEM:
		snprintf(buf, len, "inc-sem %u %" PRIu64, st->index, (uint64_t)st->value);
		break;
	case NPROXY_STEP_SIGNAL_EVENT:
		snprintf(buf, len, "signal %" PRIu64, (uint64_t)st->value);
		break;
	default:
		snprintf(buf, len, "unknown-op-%u", st->op);
	}
}
