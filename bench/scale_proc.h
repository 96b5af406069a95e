/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What bench/scale_rank.c (nproxy) and bench/scale_mpi.mpi.c (Open MPI)
 * both read of their own process: the clocks of its start and its
 * descriptors and resident memory, from /proc, the same way for both.
 */
#ifndef NPROXY_BENCH_SCALE_PROC_H
#define NPROXY_BENCH_SCALE_PROC_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double boot_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_BOOTTIME, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The process's start since boot (/proc/self/stat field 22), in ms; the
 * clock tick (10 ms) is its resolution.  -1 when unreadable. */
static inline double process_start_ms(void)
{
	char buf[1024], *p;
	unsigned long long ticks;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;
	int field;

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the command name may hold spaces */
	if (!p)
		return -1;
	for (field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &ticks) != 1)
		return -1;
	return ticks * 1e3 / (double)sysconf(_SC_CLK_TCK);
}

static inline long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;	/* the directory's own descriptor */
}

static inline long rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

#endif
