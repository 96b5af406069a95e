// SPDX-License-Identifier: GPL-2.0
/*
 * memory_footprint: what nproxy keeps resident.
 *
 *  1. A proxy worker: the process's resident set (VmRSS) before any comm
 *     (the baseline: libnproxy linked, nothing started), with 1 idle network
 *     task (its worker thread started), and with 256; the per-task figure
 *     is (RSS at 256 - RSS at 1) / 255.
 *  2. That per-task figure again after TICKS more worker ticks (default
 *     1000000) with the 256 tasks idle: it must not grow (a leak per tick
 *     would show here).  ratio = after / before.
 *  3. A Bananaphone segment for each rank count given (default 8,64): ranks
 *     as forked processes do one barrier and one 4 KiB all-gather; the
 *     leader then reports the segment's mapped size and the memory the
 *     memfd actually holds (st_blocks: pages touched by any rank).
 *
 * Prints a table and one "RESULT key=value ..." line per figure (for
 * bench/run's record of the run).
 *
 *   memory_footprint [TICKS [RANKS,RANKS...]]
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/bananaphone.h>
#include <nproxy/proxy.h>
#include "nproxy_test.h"

#define TICK_WAIT_S	120	/* bound on waiting for the ticks to pass */
#define WARM_TICKS	20000	/* before the first per-task figure */

static double rss_kib(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &res) != 2)
		res = -1;
	fclose(f);
	return res < 0 ? -1 : (double)res * (double)sysconf(_SC_PAGESIZE) / 1024.0;
}

/* Wait (bounded) until the worker has ticked n times since `from`. */
static int wait_ticks(unsigned long long from, unsigned long long n,
		      struct nproxy_proxy_stats *st)
{
	time_t deadline = time(NULL) + TICK_WAIT_S;

	do {
		usleep(20000);
		nproxy_proxy_group_stats(0, st);
	} while (st->ticks - from < n && time(NULL) < deadline);
	if (st->ticks - from < n) {
		fprintf(stderr, "memory_footprint: only %llu of %llu ticks in %d s\n",
			(unsigned long long)(st->ticks - from), n, TICK_WAIT_S);
		return -1;
	}
	return 0;
}

static int proxy_part(unsigned long long ticks)
{
	enum { MANY = 256 };
	struct nproxy_comm *comms[MANY];
	struct nproxy_proxy_stats st;
	double base, one, many, per_task, per_task_after;
	unsigned long long t0;
	unsigned int i;

	base = rss_kib();
	if (nproxy_test_idle_task_open(NPROXY_IDLE_YIELD, &comms[0]) ||
	    nproxy_test_idle_tasks_settle(1, TICK_WAIT_S * 1000, &st)) {
		fprintf(stderr, "memory_footprint: no idle task on the worker after %d s\n",
			TICK_WAIT_S);
		return -1;
	}
	usleep(100000);
	one = rss_kib();
	for (i = 1; i < MANY; i++)
		if (nproxy_test_idle_task_open(NPROXY_IDLE_YIELD, &comms[i]))
			return -1;
	if (nproxy_test_idle_tasks_settle(MANY, TICK_WAIT_S * 1000, &st)) {
		fprintf(stderr, "memory_footprint: worker has %u tasks, not %u, after %d s\n",
			(unsigned int)st.tasks_active, MANY, TICK_WAIT_S);
		return -1;
	}
	usleep(100000);
	many = rss_kib();
	/* "Before" is taken after WARM_TICKS, once one-time lazy allocations are done. */
	if (wait_ticks(st.ticks, WARM_TICKS, &st))
		return -1;
	per_task = (rss_kib() - one) / (MANY - 1);
	t0 = st.ticks;
	if (wait_ticks(t0, ticks, &st))
		return -1;
	per_task_after = (rss_kib() - one) / (MANY - 1);

	printf("proxy worker resident memory (VmRSS, KiB)\n");
	printf("  no comm (baseline)        %10.0f\n", base);
	printf("  1 idle task               %10.0f  (+%.0f)\n", one, one - base);
	printf("  %u idle tasks            %10.0f  (+%.0f)\n", MANY, many, many - base);
	printf("  per task                  %10.2f\n", per_task);
	printf("  per task after %llu ticks %10.2f  (x%.3f)\n",
	       (unsigned long long)(st.ticks - t0), per_task_after,
	       per_task > 0 ? per_task_after / per_task : 0.0);
	printf("RESULT what=proxy_rss tasks=0 rss_kib=%.0f\n", base);
	printf("RESULT what=proxy_rss tasks=1 rss_kib=%.0f\n", one);
	printf("RESULT what=proxy_rss tasks=%u rss_kib=%.0f\n", MANY, many);
	printf("RESULT what=per_task ticks=0 kib=%.3f\n", per_task);
	printf("RESULT what=per_task ticks=%llu kib=%.3f\n",
	       (unsigned long long)(st.ticks - t0), per_task_after);
	for (i = 0; i < MANY; i++)
		nproxy_comm_close(comms[i]);
	return 0;
}

/*
 * The segment's mapping, found in /proc/self/maps by its memfd name; its
 * memfd (closed after mmap) is reopened through /proc/self/map_files for
 * st_blocks, the pages every rank touched, not only this one.
 */
static int segment_stat(struct stat *out)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], range[64], path[128];
	int found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "memfd:nproxy-bp") || sscanf(line, "%63s", range) != 1)
			continue;
		snprintf(path, sizeof(path), "/proc/self/map_files/%s", range);
		if (!stat(path, out))
			found = 0;
		else
			perror("memory_footprint: stat of the segment's map_files entry");
		break;
	}
	fclose(f);
	return found;
}

static int bp_rank_main(const char *job, uint32_t rank, uint32_t n, struct stat *st)
{
	static char blob[4096];
	void *gathered = NULL;
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS];
	struct nproxy_bp *bp;
	int rc = 1;

	if (nproxy_test_bp_open(job, rank, n, 30000, &bp) !=
	    NPROXY_SUCCESS) {
		fprintf(stderr, "memory_footprint: rank %u of %u: join failed\n", rank, n);
		return 1;
	}
	memset(blob, (int)rank, sizeof(blob));
	if (nproxy_bp_barrier(bp, 60000) == NPROXY_SUCCESS &&
	    nproxy_bp_allgather(bp, blob, sizeof(blob), &gathered, lens, offs, 60000) == NPROXY_SUCCESS) {
		free(gathered);
		rc = 0;
		if (!rank && segment_stat(st)) {
			fprintf(stderr, "memory_footprint: no memfd:nproxy-bp mapping\n");
			rc = 1;
		}
		if (nproxy_bp_barrier(bp, 60000) != NPROXY_SUCCESS)
			rc = 1;
	}
	if (rc)
		fprintf(stderr, "memory_footprint: rank %u of %u: %s\n", rank, n, nproxy_bp_strerror(bp));
	nproxy_bp_close(bp);
	return rc;
}

static int bp_part(uint32_t n)
{
	pid_t pids[NPROXY_BP_MAX_RANKS];
	struct stat st;
	char job[64];
	int rc = 0, status;
	uint32_t r;

	snprintf(job, sizeof(job), "bench-mem-%d-%u", (int)getpid(), n);
	for (r = 1; r < n; r++) {
		pids[r] = fork();
		if (pids[r] < 0)
			return -1;
		if (!pids[r]) {
			alarm(120);	/* a follower never outlives a stuck leader */
			_exit(bp_rank_main(job, r, n, &st));
		}
	}
	memset(&st, 0, sizeof(st));
	rc = bp_rank_main(job, 0, n, &st);
	for (r = 1; r < n; r++) {
		if (waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			rc = 1;
	}
	if (rc) {
		fprintf(stderr, "memory_footprint: bananaphone job of %u ranks failed\n", n);
		return -1;
	}
	printf("bananaphone segment, %2u ranks: mapped %8.0f KiB, resident %8.0f KiB\n", n,
	       (double)st.st_size / 1024, (double)st.st_blocks * 512 / 1024);
	printf("RESULT what=bp_segment ranks=%u size_kib=%.0f resident_kib=%.0f\n", n,
	       (double)st.st_size / 1024, (double)st.st_blocks * 512 / 1024);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long long ticks = argc > 1 ? strtoull(argv[1], NULL, 0) : 1000000;
	char *list = strdup(argc > 2 ? argv[2] : "8,64");
	char *tok, *save = NULL;
	int rc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!list)
		return 1;
	/* Bananaphone first: forking after the worker threads start is not wanted. */
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned long n = strtoul(tok, NULL, 10);

		if (n < 2 || n > NPROXY_BP_MAX_RANKS) {
			fprintf(stderr, "memory_footprint: rank count %s not in 2..%d\n", tok,
				NPROXY_BP_MAX_RANKS);
			rc = 1;
			continue;
		}
		if (bp_part((uint32_t)n))
			rc = 1;
	}
	free(list);
	if (proxy_part(ticks))
		rc = 1;
	return rc;
}
