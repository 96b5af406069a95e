/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Command-line values, read the same way by nproxyctl and nproxy-run:
 * unsigned integers, byte sizes, seconds, durations, pids and size lists.
 *
 * One set of rules for every tool:
 *   - an unsigned value is decimal digits, or 0x and hex digits; a sign
 *     ('+' or '-'), leading blanks and trailing characters are refused
 *     (strtoul would read "-1" as its maximum and skip blanks);
 *   - a value out of range, too large for its type, empty or with an
 *     unknown suffix is refused.
 * On error each parser returns -1 and writes one message to why (when why
 * is not NULL), in one style: "NAME: 'TEXT' is not WHAT[: DETAIL]", NAME
 * being the option ("--count") or argument ("STREAM") the text came from.
 */
#ifndef NPROXY_TOOLS_CLI_H
#define NPROXY_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>

/* An unsigned integer in [min, max]. */
int cli_parse_u64(const char *name, const char *text, uint64_t min, uint64_t max,
		  uint64_t *out, char *why, size_t why_len);
int cli_parse_u32(const char *name, const char *text, uint32_t min, uint32_t max,
		  uint32_t *out, char *why, size_t why_len);

/* A process id: 1 .. 2^30 - 1 (the kernel's PID_MAX_LIMIT is below). */
int cli_parse_pid(const char *name, const char *text, int *out, char *why, size_t why_len);

/*
 * A number of bytes in [min, max]: decimal digits and an optional K, M or
 * G suffix (powers of 1024; KiB and KB read the same).
 */
int cli_parse_size(const char *name, const char *text, uint64_t min, uint64_t max,
		   uint64_t *out, char *why, size_t why_len);

/* Seconds, decimal with an optional fraction ("0.5"), in [min, max]. */
int cli_parse_seconds(const char *name, const char *text, double min, double max,
		      double *out, char *why, size_t why_len);

/* A duration with its unit: digits then ns, us, ms or s ("100ms"). */
int cli_parse_duration_ns(const char *name, const char *text, uint64_t *out_ns, char *why,
			  size_t why_len);

/*
 * A list of sizes, each in [min, max]: "1K,4K,1M", or a geometric sweep
 * "MIN:MAX[:FACTOR]" (factor 2 unless given, at least 2).  At most cap
 * sizes go to sizes[]; *n is how many.
 */
int cli_parse_size_list(const char *name, const char *text, uint64_t min, uint64_t max,
			uint64_t *sizes, uint32_t cap, uint32_t *n, char *why, size_t why_len);

/* The sweep alone: lo, lo*factor, ... up to hi (the -b/-e/-f options). */
int cli_size_sweep(uint64_t lo, uint64_t hi, uint64_t factor, uint64_t *sizes, uint32_t cap,
		   uint32_t *n, char *why, size_t why_len);

#endif
