// SPDX-License-Identifier: GPL-2.0
/*
 * Bananaphone latency: barrier and all-gather (64 B, 4 KiB per rank) for
 * a list of rank counts, ranks as forked processes on this host.  Prints
 * one "RESULT impl=bananaphone ..." line per (op, ranks): per-call latency
 * over `iters` calls after `warmup`; avg_us is the mean over calls averaged
 * over ranks, p50_us the median over calls (median over ranks).
 * bench/bp_run.sh runs it next to bp_star (Unix-socket star) and
 * bp_mpi (Open MPI) and prints the table.
 *
 *   bp_bench [-r 2,4,8] [-i iters] [-w warmup]
 *   bp_bench -d [-r 2,4,8] [-i kills]
 *
 * -d measures death detection instead: ranks stream barriers, the last
 * rank is SIGKILLed, and every survivor's time from kill() to its
 * NPROXY_PEER_DEAD is recorded ("op=detect_death", over `kills` kills).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/bananaphone.h>
#include <nproxy/log.h>
#include <nproxy/status.h>
#include "bp_driver.h"
#include "nproxy_test.h"

/* lat: per-call latencies in us, or NULL for warmup. */
static int run_op(struct nproxy_bp *bp, enum op op, const void *blob, int iters, double *lat)
{
	size_t lens[NPROXY_BP_MAX_RANKS], offs[NPROXY_BP_MAX_RANKS];
	int i;

	for (i = 0; i < iters; i++) {
		double t0 = now_us();
		enum nproxy_status st;
		void *all = NULL;

		if (op == OP_BARRIER)
			st = nproxy_bp_barrier(bp, 10000);
		else
			st = nproxy_bp_allgather(bp, blob, op_sizes[op], &all, lens, offs, 10000);
		free(all);
		if (lat)
			lat[i] = now_us() - t0;
		if (st) {
			fprintf(stderr, "bp_bench: %s\n", nproxy_bp_strerror(bp));
			return -1;
		}
	}
	return 0;
}

static int rank_main(const char *job, uint32_t rank, uint32_t n, int iters, int warmup,
		     double *out)
{
	double *lat = malloc(sizeof(double) * (size_t)iters);
	char blob[4096];
	struct nproxy_bp *bp;
	int op;

	memset(blob, (int)rank, sizeof(blob));
	if (nproxy_test_bp_open(job, rank, n, 10000, &bp) != NPROXY_SUCCESS) {
		fprintf(stderr, "bp_bench: join: %s\n", nproxy_bp_strerror(NULL));
		return 1;
	}
	for (op = 0; op < OP_COUNT && lat; op++) {
		double t0;

		if (run_op(bp, op, blob, warmup, NULL) || nproxy_bp_barrier(bp, 10000))
			return 1;
		t0 = now_us();
		if (run_op(bp, op, blob, iters, lat))
			return 1;
		BP_AVG(out, op)[rank] = (now_us() - t0) / iters;
		BP_P50(out, op)[rank] = nproxy_test_median_double(lat, iters);
	}
	free(lat);
	nproxy_bp_hangup(bp);
	nproxy_bp_close(bp);
	return 0;
}

struct detect_page {
	double kill_us;
	uint64_t rounds[NPROXY_BP_MAX_RANKS];
	double err_us[NPROXY_BP_MAX_RANKS];
	int status[NPROXY_BP_MAX_RANKS];
};

struct detect_run {
	char job[64];
	struct detect_page *pg;
};

static int detect_rank(uint32_t rank, uint32_t n, void *arg)
{
	struct detect_run *run = arg;
	struct detect_page *pg = run->pg;
	enum nproxy_status st;
	struct nproxy_bp *bp;

	pin_rank(rank, n);
	if (nproxy_test_bp_open(run->job, rank, n, 10000, &bp) != NPROXY_SUCCESS)
		return 1;
	do {
		st = nproxy_bp_barrier(bp, 20000);
		__atomic_store_n(&pg->rounds[rank], pg->rounds[rank] + 1, __ATOMIC_RELEASE);
	} while (st == NPROXY_SUCCESS);
	pg->err_us[rank] = now_us();
	pg->status[rank] = st;
	nproxy_bp_hangup(bp);
	nproxy_bp_close(bp);
	return 0;
}

/* Kill the last rank while everyone streams barriers; collect latencies. */
static int detect(uint32_t n, int kills)
{
	double *lat = malloc(sizeof(double) * (size_t)kills * n), sum = 0, max = 0;
	struct detect_page *pg = mmap(NULL, sizeof(*pg), PROT_READ | PROT_WRITE,
				      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int k, nlat = 0;

	if (!lat || pg == MAP_FAILED)
		return 1;
	for (k = 0; k < kills; k++) {
		const struct nproxy_test_child how = { .quick_exit = true };
		struct detect_run run = { .pg = pg };
		pid_t pids[NPROXY_BP_MAX_RANKS];
		int status[NPROXY_BP_MAX_RANKS];
		uint32_t r;
		int spins;

		memset(pg, 0, sizeof(*pg));
		snprintf(run.job, sizeof(run.job), "bench-death-%d-%u-%d", (int)getpid(), n, k);
		fflush(NULL);
		for (r = 0; r < n; r++)
			pids[r] = nproxy_test_spawn(detect_rank, r, n, &run, &how);
		for (spins = 0; spins < 10000 &&
		     __atomic_load_n(&pg->rounds[n - 1], __ATOMIC_ACQUIRE) < 100; spins++)
			usleep(1000);
		pg->kill_us = now_us();
		kill(pids[n - 1], SIGKILL);
		nproxy_test_reap(pids, status, n, BP_RUN_TIMEOUT_MS);
		for (r = 0; r + 1 < n; r++) {
			if (pg->status[r] != NPROXY_PEER_DEAD) {
				fprintf(stderr, "bp_bench: rank %u ended with %s\n", r,
					nproxy_status_str(pg->status[r]));
				return 1;
			}
			lat[nlat++] = pg->err_us[r] - pg->kill_us;
		}
	}
	for (k = 0; k < nlat; k++) {
		sum += lat[k];
		if (lat[k] > max)
			max = lat[k];
	}
	printf("RESULT impl=bananaphone op=detect_death ranks=%u size=0 iters=%d avg_us=%.0f p50_us=%.0f max_us=%.0f\n",
	       n, kills, sum / nlat, nproxy_test_median_double(lat, nlat), max);
	fflush(stdout);
	munmap(pg, sizeof(*pg));
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct bp_impl bananaphone = {
		.impl = "bananaphone", .prog = "bp_bench", .rank = rank_main, .detect = detect,
	};

	/* Failures are the point of -d; keep the library's warnings out. */
	nproxy_log_set_level(NPROXY_LOG_ERROR);
	return bp_driver_main(argc, argv, &bananaphone);
}
