// SPDX-License-Identifier: GPL-2.0
/* Command-line values shared by nproxyctl and nproxy-run: see cli.h. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

/* "NAME: 'TEXT' is not WHAT" and the detail, when the caller wants it. */
static int refuse(char *why, size_t why_len, const char *name, const char *text,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int refuse(char *why, size_t why_len, const char *name, const char *text,
		  const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!why || !why_len)
		return -1;
	n = snprintf(why, why_len, "%s: '%s' is not ", name, text);
	if (n < 0 || (size_t)n >= why_len)
		return -1;
	va_start(ap, fmt);
	vsnprintf(why + n, why_len - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/*
 * What is wrong with the start of an unsigned value: NULL if nothing, ""
 * if it is no number at all, else the detail that says why.
 */
static const char *bad_start(const char *text)
{
	if (!*text)
		return "empty";
	if (*text == '+' || *text == '-')
		return "no '+' or '-' sign (the value is unsigned)";
	if (!isdigit((unsigned char)*text))
		return "";
	return NULL;
}

/* ": detail", or nothing when there is no detail. */
#define DETAIL(d)	(*(d) ? ": " : ""), (d)

/*
 * Digits (decimal, or hex after 0x) at text; *end after them.  strtoull
 * alone would take a sign and blanks, and read a leading 0 as octal.
 */
static int read_digits(const char *text, bool hex_ok, uint64_t *v, const char **end)
{
	int base = 10;
	char *e;

	if (hex_ok && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
		if (!isxdigit((unsigned char)text[2]))
			return -EINVAL;
		base = 16;
	}
	errno = 0;
	*v = strtoull(text, &e, base);
	*end = e;
	return errno == ERANGE ? -ERANGE : 0;
}

static void range_text(char *buf, size_t len, uint64_t min, uint64_t max, uint64_t type_max)
{
	if (max == type_max && min == 0)
		snprintf(buf, len, "an unsigned integer");
	else if (max == type_max && min == 1)
		snprintf(buf, len, "a positive integer");
	else
		snprintf(buf, len, "%" PRIu64 "..%" PRIu64, min, max);
}

static int parse_unsigned(const char *name, const char *text, uint64_t min, uint64_t max,
			  uint64_t type_max, uint64_t *out, char *why, size_t why_len)
{
	const char *bad = bad_start(text), *end;
	char what[64];
	uint64_t v;
	int err;

	range_text(what, sizeof(what), min, max, type_max);
	if (bad)
		return refuse(why, why_len, name, text, "%s%s%s", what, DETAIL(bad));
	err = read_digits(text, true, &v, &end);
	if (err == -ERANGE || (!err && !*end && v > type_max))
		return refuse(why, why_len, name, text, "%s: too large", what);
	if (err)
		return refuse(why, why_len, name, text, "%s: no hex digits after 0x", what);
	if (*end)
		return refuse(why, why_len, name, text, "%s: trailing '%s'", what, end);
	if (v < min || v > max)
		return refuse(why, why_len, name, text, "%s", what);
	*out = v;
	return 0;
}

int cli_parse_u64(const char *name, const char *text, uint64_t min, uint64_t max,
		  uint64_t *out, char *why, size_t why_len)
{
	return parse_unsigned(name, text, min, max, UINT64_MAX, out, why, why_len);
}

int cli_parse_u32(const char *name, const char *text, uint32_t min, uint32_t max,
		  uint32_t *out, char *why, size_t why_len)
{
	uint64_t v;

	if (parse_unsigned(name, text, min, max, UINT32_MAX, &v, why, why_len))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int cli_parse_pid(const char *name, const char *text, int *out, char *why, size_t why_len)
{
	const char *bad = bad_start(text), *end;
	uint64_t v;

	if (bad)
		return refuse(why, why_len, name, text, "a process id%s%s", DETAIL(bad));
	if (read_digits(text, false, &v, &end) || *end || !v || v > 0x3fffffff)
		return refuse(why, why_len, name, text, "a process id");
	*out = (int)v;
	return 0;
}

/* "256M" for exact multiples, else the byte count. */
static void size_text(char *buf, size_t len, uint64_t v)
{
	if (v && !(v % (1ULL << 30)))
		snprintf(buf, len, "%" PRIu64 "G", v >> 30);
	else if (v && !(v % (1ULL << 20)))
		snprintf(buf, len, "%" PRIu64 "M", v >> 20);
	else if (v && !(v % (1ULL << 10)))
		snprintf(buf, len, "%" PRIu64 "K", v >> 10);
	else
		snprintf(buf, len, "%" PRIu64, v);
}

/* K, M, G and the KiB / KB spellings; 0 if unit is none of them. */
static uint64_t unit_multiplier(const char *unit)
{
	static const char *const tails[] = { "", "i", "B", "iB" };
	const char *p = strchr("kKmMgG", *unit);
	uint64_t mult;

	if (!*unit)
		return 1;
	if (!p)
		return 0;
	mult = 1ULL << (10 * (1 + (p - "kKmMgG") / 2));
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++)
		if (!strcmp(unit + 1, tails[i]))
			return mult;
	return 0;
}

int cli_parse_size(const char *name, const char *text, uint64_t min, uint64_t max,
		   uint64_t *out, char *why, size_t why_len)
{
	const char *bad = bad_start(text), *end;
	char lo[32], hi[32];
	uint64_t v, mult;

	if (bad)
		return refuse(why, why_len, name, text, "a number of bytes (64K, 1M, 4096)%s%s",
			      DETAIL(bad));
	if (read_digits(text, false, &v, &end))
		return refuse(why, why_len, name, text, "a number of bytes: too large");
	mult = unit_multiplier(end);
	if (!mult)
		return refuse(why, why_len, name, text,
			      "a number of bytes: unknown unit '%s' (K, M or G; KiB and KB read as 1024)",
			      end);
	if (v > UINT64_MAX / mult)
		return refuse(why, why_len, name, text, "a number of bytes: too large");
	v *= mult;
	size_text(lo, sizeof(lo), min);
	size_text(hi, sizeof(hi), max);
	if (v < min)
		return refuse(why, why_len, name, text, "a size of at least %s bytes", lo);
	if (v > max)
		return refuse(why, why_len, name, text, "a size of at most %s: above the %s cap",
			      hi, hi);
	*out = v;
	return 0;
}

int cli_parse_seconds(const char *name, const char *text, double min, double max,
		      double *out, char *why, size_t why_len)
{
	const char *bad = bad_start(text);
	char *end;
	double v;

	/* strtod would also take blanks, a sign, "inf", "nan" and hex floats. */
	if (bad && !(*text == '.' && isdigit((unsigned char)text[1])))
		return refuse(why, why_len, name, text, "a number of seconds in [%g, %g]%s%s",
			      min, max, DETAIL(bad));
	if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
		return refuse(why, why_len, name, text, "a number of seconds: decimal only");
	errno = 0;
	v = strtod(text, &end);
	if (*end)
		return refuse(why, why_len, name, text, "a number of seconds: trailing '%s'", end);
	if (errno || !isfinite(v) || v < min || v > max)
		return refuse(why, why_len, name, text, "a number of seconds in [%g, %g]", min, max);
	*out = v;
	return 0;
}

int cli_parse_duration_ns(const char *name, const char *text, uint64_t *out_ns, char *why,
			  size_t why_len)
{
	static const struct { const char *unit; uint64_t mult; } units[] = {
		{ "ns", 1 }, { "us", 1000 }, { "ms", 1000000 }, { "s", 1000000000 },
	};
	const char *bad = bad_start(text), *end;
	uint64_t v;

	if (bad)
		return refuse(why, why_len, name, text, "a duration (100ms, 50us, 2s)%s%s",
			      DETAIL(bad));
	if (read_digits(text, false, &v, &end))
		return refuse(why, why_len, name, text, "a duration: too large");
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit))
			continue;
		if (v > UINT64_MAX / units[i].mult)
			return refuse(why, why_len, name, text, "a duration: too large");
		*out_ns = v * units[i].mult;
		return 0;
	}
	return refuse(why, why_len, name, text, "a duration: %s'%s' (ns, us, ms or s)",
		      *end ? "unknown unit " : "no unit ", end);
}

int cli_size_sweep(uint64_t lo, uint64_t hi, uint64_t factor, uint64_t *sizes, uint32_t cap,
		   uint32_t *n, char *why, size_t why_len)
{
	if (!why)
		why_len = 0;
	if (factor < 2) {
		snprintf(why, why_len, "a sweep's factor is at least 2 (got %" PRIu64 ")", factor);
		return -1;
	}
	if (lo > hi) {
		snprintf(why, why_len, "the sweep's minimum %" PRIu64 " B is above its maximum %" PRIu64
			 " B", lo, hi);
		return -1;
	}
	*n = 0;
	for (uint64_t v = lo; v <= hi; v *= factor) {
		if (*n == cap) {
			snprintf(why, why_len, "the sweep has more than %u sizes", cap);
			return -1;
		}
		sizes[(*n)++] = v;
		if (v > UINT64_MAX / factor)
			break;
	}
	return 0;
}

/* MIN:MAX[:FACTOR]; text is a copy the parser may cut up. */
static int parse_sweep(const char *name, const char *orig, char *text, uint64_t min,
		       uint64_t max, uint64_t *sizes, uint32_t cap, uint32_t *n, char *why,
		       size_t why_len)
{
	char *save = NULL, *a = strtok_r(text, ":", &save), *b = strtok_r(NULL, ":", &save);
	char *f = strtok_r(NULL, ":", &save), inner[160];
	uint64_t lo, hi, factor = 2;

	if (!a || !b || strtok_r(NULL, ":", &save) || strstr(orig, "::") ||
	    orig[strlen(orig) - 1] == ':' || *orig == ':')
		return refuse(why, why_len, name, orig,
			      "a sweep: a sweep is MIN:MAX or MIN:MAX:FACTOR");
	if (cli_parse_size(name, a, min, max, &lo, why, why_len) ||
	    cli_parse_size(name, b, min, max, &hi, why, why_len) ||
	    (f && cli_parse_u64(name, f, 0, UINT64_MAX, &factor, why, why_len)))
		return -1;
	if (cli_size_sweep(lo, hi, factor, sizes, cap, n, inner, sizeof(inner)))
		return refuse(why, why_len, name, orig, "a sweep: %s", inner);
	return 0;
}

int cli_parse_size_list(const char *name, const char *text, uint64_t min, uint64_t max,
			uint64_t *sizes, uint32_t cap, uint32_t *n, char *why, size_t why_len)
{
	char buf[256], *save = NULL, *tok;
	uint32_t count = 0;

	if (strlen(text) >= sizeof(buf))
		return refuse(why, why_len, name, text, "a size list: longer than %zu characters",
			      sizeof(buf) - 1);
	strcpy(buf, text);
	if (strchr(buf, ':'))
		return parse_sweep(name, text, buf, min, max, sizes, cap, n, why, why_len);
	if (!*buf || buf[strlen(buf) - 1] == ',' || *buf == ',' || strstr(buf, ",,"))
		return refuse(why, why_len, name, text, "a size list: an empty size in the list");
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (count == cap)
			return refuse(why, why_len, name, text, "a size list: more than %u sizes",
				      cap);
		if (cli_parse_size(name, tok, min, max, &sizes[count], why, why_len))
			return -1;
		count++;
	}
	*n = count;
	return 0;
}
