// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The library's environment parser.  strtoull() alone takes "-1" (as a
 * huge number), "+5", " 5" and "5x" up to the junk; an unchecked atoi()
 * takes anything.  Here a number is decimal digits only, in range, or it
 * is rejected with one warning that names the variable, the value, the
 * range and the default used instead.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <nproxy/log.h>
#include "common/common_internal.h"

/* Digits only (no sign, no space, no suffix), no overflow: 0 on success. */
static int parse_decimal(const char *text, unsigned long long *val)
{
	char *end;

	if (*text < '0' || *text > '9')
		return -1;
	errno = 0;
	*val = strtoull(text, &end, 10);
	return errno || *end ? -1 : 0;
}

static enum npx_env_found env_range(const char *name, unsigned long long min,
				    unsigned long long max, unsigned long long *val,
				    const char **text)
{
	*text = npx_env_text(name);
	if (!*text)
		return NPX_ENV_UNSET;
	if (parse_decimal(*text, val) || *val < min || *val > max)
		return NPX_ENV_BAD;
	return NPX_ENV_SET;
}

enum npx_env_found npx_env_u64(const char *name, uint64_t dflt, uint64_t min, uint64_t max,
			       uint64_t *out)
{
	enum npx_env_found found;
	unsigned long long val;
	const char *text;

	found = env_range(name, min, max, &val, &text);
	if (found == NPX_ENV_SET) {
		*out = val;
		return found;
	}
	if (found == NPX_ENV_BAD)
		nproxy_log(NPROXY_LOG_WARN, "%s=\"%s\": not a number in %llu..%llu, using %llu",
			   name, text, (unsigned long long)min, (unsigned long long)max,
			   (unsigned long long)dflt);
	*out = dflt;
	return found;
}

enum npx_env_found npx_env_u32(const char *name, uint32_t dflt, uint32_t min, uint32_t max,
			       uint32_t *out)
{
	uint64_t val;
	enum npx_env_found found = npx_env_u64(name, dflt, min, max, &val);

	*out = (uint32_t)val;
	return found;
}

enum npx_env_found npx_env_u32_strict(const char *name, uint32_t min, uint32_t max,
				      uint32_t *out)
{
	enum npx_env_found found;
	unsigned long long val;
	const char *text;

	found = env_range(name, min, max, &val, &text);
	if (found == NPX_ENV_SET)
		*out = (uint32_t)val;
	else if (found == NPX_ENV_BAD)
		nproxy_log(NPROXY_LOG_ERROR, "%s=\"%s\": not a number in %u..%u", name, text, min,
			   max);
	return found;
}

enum npx_env_found npx_env_bool(const char *name, bool dflt, bool *out)
{
	static const char *const names[] = { "0", "1", "no", "yes", "false", "true", "off", "on" };
	unsigned int i;
	enum npx_env_found found;

	found = npx_env_choice(name, names, sizeof(names) / sizeof(names[0]), dflt, &i);
	*out = i & 1;
	return found;
}

enum npx_env_found npx_env_choice(const char *name, const char *const *names, size_t n_names,
				  unsigned int dflt, unsigned int *out)
{
	const char *text = npx_env_text(name);
	size_t i;

	*out = dflt;
	if (!text)
		return NPX_ENV_UNSET;
	for (i = 0; i < n_names; i++) {
		if (names[i] && !strcasecmp(text, names[i])) {
			*out = (unsigned int)i;
			return NPX_ENV_SET;
		}
	}
	nproxy_log(NPROXY_LOG_WARN, "%s=\"%s\": unknown value, using %s", name, text,
		   dflt < n_names && names[dflt] ? names[dflt] : "the default");
	return NPX_ENV_BAD;
}

/*
 * Ranks per shared proxy (the group's gid is device index / this): the
 * caller's value, else NPROXY_RANKS_PER_NETWORK_PROXY, else the reference
 * runtime's NEURON_RT_RANKS_PER_NETWORK_PROXY, else 1.  Here so that the
 * comm and a rank's handshake region derive the same gid from one reading.
 */
enum nproxy_status npx_ranks_per_proxy(uint32_t requested, uint32_t *out)
{
	static const char *const vars[] = {
		"NPROXY_RANKS_PER_NETWORK_PROXY",
		"NEURON_RT_RANKS_PER_NETWORK_PROXY",
	};
	size_t i;

	*out = requested ? requested : 1;
	if (requested)
		return NPROXY_SUCCESS;
	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		uint32_t n = 0;

		switch (npx_env_u32_strict(vars[i], 1, INT_MAX, &n)) {
		case NPX_ENV_SET:
			*out = n;
			return NPROXY_SUCCESS;
		case NPX_ENV_BAD:
			return NPROXY_INVALID;
		default:
			break;
		}
	}
	return NPROXY_SUCCESS;
}
