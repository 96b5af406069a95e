// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * An object's last error text.  The network engine and the rendezvous
 * (lib/net) format theirs here, so the text a caller reads back is always
 * terminated and is exactly what the log said, there after the object's
 * name (who: "net rank 3").  The other subsystems format their own text
 * by the same rule.
 */
#include <stdio.h>
#include "common/common_internal.h"

void npx_errbuf_vset(char *buf, size_t len, enum nproxy_log_level level, const char *who,
		     const char *fmt, va_list ap)
{
	if (!len)
		return;
	vsnprintf(buf, len, fmt, ap);
	if (who)
		nproxy_log(level, "%s: %s", who, buf);
	else
		nproxy_log(level, "%s", buf);
}

void npx_errbuf_set(char *buf, size_t len, enum nproxy_log_level level, const char *who,
		    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	npx_errbuf_vset(buf, len, level, who, fmt, ap);
	va_end(ap);
}

void npx_errbuf_vset_rank(char *buf, size_t len, uint32_t rank, const char *fmt, va_list ap)
{
	int n;

	if (!len)
		return;
	n = snprintf(buf, len, "rank %u: ", rank);
	if (n < 0 || (size_t)n >= len)
		n = 0;
	vsnprintf(buf + n, len - (size_t)n, fmt, ap);
	nproxy_log(NPROXY_LOG_ERROR, "%s", buf);
}
