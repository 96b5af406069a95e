// SPDX-License-Identifier: GPL-2.0
/* A rank's death and what the others saw of it (rank_death.h). */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <nproxy/status.h>
#include "nproxy_test.h"
#include "rank_death.h"

struct nproxy_test_death *nproxy_test_death_map(void)
{
	void *p = mmap(NULL, sizeof(struct nproxy_test_death), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void nproxy_test_death_unmap(struct nproxy_test_death *d)
{
	if (d)
		munmap(d, sizeof(*d));
}

void nproxy_test_death_mark(struct nproxy_test_death *d)
{
	d->died_ms = (int64_t)nproxy_test_now_ms();
}

void nproxy_test_death_saw(struct nproxy_test_death *d, uint32_t rank, int status,
			   const char *text)
{
	struct nproxy_test_seen *s = &d->seen[rank];

	s->status = status;
	s->pid = getpid();
	s->ended_ms = (int64_t)nproxy_test_now_ms();
	snprintf(s->text, sizeof(s->text), "%s", text ? text : "");
}

const char *nproxy_test_death_missed(const struct nproxy_test_death *d, uint32_t rank,
				     const char *want, int64_t bound_ms, char *buf, size_t len)
{
	const struct nproxy_test_seen *s = &d->seen[rank];
	int64_t after = s->ended_ms - d->died_ms;

	if (s->status != NPROXY_PEER_DEAD)
		snprintf(buf, len, "rank %u ended with %s: '%s'", rank,
			 nproxy_status_str((enum nproxy_status)s->status), s->text);
	else if (!strstr(s->text, want))
		snprintf(buf, len, "rank %u: '%s' does not name '%s'", rank, s->text, want);
	else if (after >= bound_ms)
		snprintf(buf, len, "rank %u ended %lld ms after the death, not within %lld ms",
			 rank, (long long)after, (long long)bound_ms);
	else
		return NULL;
	return buf;
}
