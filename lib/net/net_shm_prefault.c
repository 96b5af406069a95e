// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The pages of libfabric's shm regions, mapped in before the first op.
 *
 * Each shm endpoint owns a 16 MiB region (with 1024-entry queues) in a
 * tmpfs file, and every process maps the region of each local peer.  The
 * provider writes a message's command into the next entry of the
 * receiver's queue, so the queues' pages are touched one after another as
 * ops go by: a process takes a page fault every op or two until each
 * queue has wrapped once.  A fault is dear under a hypervisor (here 4
 * ranks, 1 KiB allgather: 130-160 us per op for the first 300 ops, 65-80
 * us after; the same ops with the regions mapped in up front: 75-80 us
 * from the first).
 *
 * So, once the endpoint knows its peers (their regions are mapped at
 * fi_av_insert()), every shm region mapped in this process is populated
 * with MADV_POPULATE_WRITE: page-table entries for each page, allocating
 * the tmpfs pages not yet allocated, never writing a byte.  It costs
 * memory (each region's whole 16 MiB, once per host) and time (about 20
 * ms per process for 4 ranks, 170 ms for 16, on 2 vCPUs), so it is bounded:
 * NPROXY_SHM_PREFAULT_MB (default 256, 0: never) caps the mapped bytes a
 * process populates, and /dev/shm must have room for twice them; over
 * either the regions are left to fault in as ops go by.  Only regions
 * named as the provider names them ("<pid>:<uid>:<index>") are touched.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <nproxy/log.h>
#include "common/common_internal.h"
#include "net_internal.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23	/* Linux 5.14 */
#endif

#define SHM_DIR			"/dev/shm"
#define PREFAULT_DEFAULT_MB	256
#define PREFAULT_MAX_REGIONS	1024

unsigned int npx_net_shm_mapped_regions(struct npx_shm_mapping *m, unsigned int max,
					uint64_t *bytes)
{
	char line[512 + 128];
	unsigned int n = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	*bytes = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off;
		char perms[8], *path, *base;
		int at = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perms, &off, &at) != 4 || !at)
			continue;
		path = line + at;
		path[strcspn(path, "\n")] = 0;
		if (strncmp(path, SHM_DIR "/", sizeof(SHM_DIR)) || perms[1] != 'w' || perms[3] != 's')
			continue;
		base = path + sizeof(SHM_DIR);
		/* Not a per-message mmap file ("_<n>"), not one already unlinked. */
		if (npx_net_shm_name_pid(base) <= 0 || strchr(base, '_'))
			continue;
		if (n < max)
			m[n] = (struct npx_shm_mapping){ .lo = lo, .hi = hi, .off = off,
							 .pid = npx_net_shm_name_pid(base) };
		n++;
		*bytes += hi - lo;
	}
	fclose(f);
	return n;
}

void npx_net_shm_prefault(struct nproxy_net *net)
{
	static struct npx_shm_mapping m[PREFAULT_MAX_REGIONS];
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	uint64_t cap_mb, bytes, done = 0;
	struct statvfs fs;
	unsigned int n;

	npx_env_u64("NPROXY_SHM_PREFAULT_MB", PREFAULT_DEFAULT_MB, 0, UINT64_MAX >> 20, &cap_mb);
	if (!cap_mb)
		return;
	pthread_mutex_lock(&lock);
	n = npx_net_shm_mapped_regions(m, PREFAULT_MAX_REGIONS, &bytes);
	if (!n)
		goto out;
	if (n > PREFAULT_MAX_REGIONS || bytes > cap_mb << 20 || statvfs(SHM_DIR, &fs) ||
	    (uint64_t)fs.f_bavail * fs.f_frsize < 2 * bytes) {
		nproxy_log(NPROXY_LOG_DEBUG,
			   "net rank %u: shm regions (%u, %llu MiB) left to fault in: over NPROXY_SHM_PREFAULT_MB=%llu or twice the room in " SHM_DIR,
			   net->rank, n, (unsigned long long)(bytes >> 20), (unsigned long long)cap_mb);
		goto out;
	}
	for (unsigned int i = 0; i < n; i++) {
		if (madvise((void *)m[i].lo, m[i].hi - m[i].lo, MADV_POPULATE_WRITE)) {
			/* Before 5.14 (EINVAL), or a region shorter than its mapping. */
			nproxy_log(NPROXY_LOG_DEBUG, "net rank %u: shm region prefault: %s", net->rank,
				   strerror(errno));
			break;
		}
		done += m[i].hi - m[i].lo;
	}
	nproxy_log(NPROXY_LOG_DEBUG, "net rank %u: shm regions mapped in: %llu of %llu MiB",
		   net->rank, (unsigned long long)(done >> 20), (unsigned long long)(bytes >> 20));
out:
	pthread_mutex_unlock(&lock);
}
