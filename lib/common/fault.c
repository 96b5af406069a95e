// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Fault injection (<nproxy/fault.h>, lib/common/fault_wrap.h): which call of each kind
 * fails, parsed once from NPROXY_FAULT when the library loads.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <nproxy/fault.h>
#include <nproxy/log.h>
#include "common/common_internal.h"
#include "fault_wrap.h"	/* also force-included: nothing here calls a wrapped function */

int npx_fault_armed;

/* Per kind: the call that fails (0: none) and the calls counted so far. */
static uint64_t fault_at[NPROXY_FAULT_KINDS];
static uint64_t fault_calls[NPROXY_FAULT_KINDS];
static uint64_t fault_injected;

static const char *const fault_names[NPROXY_FAULT_KINDS] = {
	[NPROXY_FAULT_ALLOC] = "alloc",
	[NPROXY_FAULT_THREAD] = "thread",
	[NPROXY_FAULT_FI] = "fi",
	[NPROXY_FAULT_FUTEX] = "futex",
	[NPROXY_FAULT_POST_EAGAIN] = "post_eagain",
};

bool npx_fault_hit(enum nproxy_fault_kind kind)
{
	uint64_t at = __atomic_load_n(&fault_at[kind], __ATOMIC_RELAXED);
	uint64_t n;

	if (!at)
		return false;
	n = __atomic_add_fetch(&fault_calls[kind], 1, __ATOMIC_RELAXED);
	if (n == at || (kind == NPROXY_FAULT_POST_EAGAIN && n > at)) {
		/* Counted, not logged: a log line may allocate, or be the fault. */
		__atomic_add_fetch(&fault_injected, 1, __ATOMIC_RELAXED);
		return true;
	}
	return false;
}

int npx_fault_fi(bool post)
{
	if (post && npx_fault_hit(NPROXY_FAULT_POST_EAGAIN))
		return -FI_EAGAIN;
	return npx_fault_hit(NPROXY_FAULT_FI) ? -FI_EIO : 0;
}

bool npx_fault_futex_wait(long nr, ...)
{
	va_list ap;
	long op;

	va_start(ap, nr);
	(void)va_arg(ap, long);		/* the word */
	op = va_arg(ap, long);
	va_end(ap);
	if ((op & FUTEX_CMD_MASK) != FUTEX_WAIT || !npx_fault_hit(NPROXY_FAULT_FUTEX))
		return false;
	errno = EINTR;
	return true;
}

/* "kind:N[,kind:N...]" into at[]; false when malformed. */
static bool fault_parse(const char *spec, uint64_t at[NPROXY_FAULT_KINDS])
{
	const char *p = spec;

	while (*p) {
		unsigned long long n;
		size_t len = strcspn(p, ":");
		char *end;
		int k;

		for (k = 0; k < NPROXY_FAULT_KINDS; k++)
			if (strlen(fault_names[k]) == len && !strncmp(p, fault_names[k], len))
				break;
		if (k == NPROXY_FAULT_KINDS || p[len] != ':' || p[len + 1] < '1' || p[len + 1] > '9')
			return false;
		errno = 0;
		n = strtoull(p + len + 1, &end, 10);
		if (errno || (*end && *end != ','))
			return false;
		at[k] = n;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			return false;	/* trailing comma */
	}
	return true;
}

enum nproxy_status nproxy_fault_set(const char *spec)
{
	uint64_t at[NPROXY_FAULT_KINDS] = { 0 };
	bool armed = false;
	int k;

	if (spec && !fault_parse(spec, at)) {
		nproxy_log(NPROXY_LOG_ERROR, "NPROXY_FAULT=%s: expected kind:N[,kind:N...] "
			   "with kind alloc, thread, fi, futex or post_eagain and N >= 1", spec);
		nproxy_fault_set(NULL);
		return NPROXY_INVALID;
	}
	for (k = 0; k < NPROXY_FAULT_KINDS; k++) {
		__atomic_store_n(&fault_calls[k], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&fault_at[k], at[k], __ATOMIC_RELAXED);
		armed |= at[k] != 0;
	}
	__atomic_store_n(&fault_injected, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&npx_fault_armed, armed, __ATOMIC_SEQ_CST);
	return NPROXY_SUCCESS;
}

uint64_t nproxy_fault_injected(void)
{
	return __atomic_load_n(&fault_injected, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void fault_from_env(void)
{
	const char *spec;

	if (npx_env_str("NPROXY_FAULT", NULL, &spec) == NPX_ENV_SET)
		nproxy_fault_set(spec);
}
