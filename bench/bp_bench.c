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
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/bananaphone.h>
#include <nproxy/log.h>
#include <nproxy/status.h>
#include "nproxy_test.h"

enum op { OP_BARRIER, OP_AG64, OP_AG4K, OP_COUNT };
static const char *const op_names[OP_COUNT] = { "barrier", "allgather", "allgather" };
static const size_t op_sizes[OP_COUNT] = { 0, 64, 4096 };

static double now_us(void)
{
	return (double)nproxy_test_now_ns() / 1e3;
}

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
		out[(op * 2) * NPROXY_BP_MAX_RANKS + rank] = (now_us() - t0) / iters;
		out[(op * 2 + 1) * NPROXY_BP_MAX_RANKS + rank] = nproxy_test_median_double(lat, iters);
	}
	free(lat);
	nproxy_bp_hangup(bp);
	nproxy_bp_close(bp);
	return 0;
}

/*
 * Like mpirun's default --bind-to core for np <= cpus (and no binding when
 * oversubscribed): rank r on cpu r, so the three implementations are
 * compared under the same placement.
 */
static void pin_rank(unsigned int rank, unsigned int n)
{
	if (!getenv("BP_BENCH_NO_PIN"))
		nproxy_test_pin_rank(rank, n);
}

struct detect_page {
	double kill_us;
	uint64_t rounds[NPROXY_BP_MAX_RANKS];
	double err_us[NPROXY_BP_MAX_RANKS];
	int status[NPROXY_BP_MAX_RANKS];
};

static int detect_rank(const char *job, uint32_t rank, uint32_t n, struct detect_page *pg)
{
	enum nproxy_status st;
	struct nproxy_bp *bp;

	if (nproxy_test_bp_open(job, rank, n, 10000, &bp) != NPROXY_SUCCESS)
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
		pid_t pids[NPROXY_BP_MAX_RANKS];
		char job[64];
		uint32_t r;
		int spins;

		memset(pg, 0, sizeof(*pg));
		snprintf(job, sizeof(job), "bench-death-%d-%u-%d", (int)getpid(), n, k);
		fflush(NULL);
		for (r = 0; r < n; r++) {
			pids[r] = fork();
			if (pids[r] == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				pin_rank(r, n);
				_exit(detect_rank(job, r, n, pg));
			}
		}
		for (spins = 0; spins < 10000 &&
		     __atomic_load_n(&pg->rounds[n - 1], __ATOMIC_ACQUIRE) < 100; spins++)
			usleep(1000);
		pg->kill_us = now_us();
		kill(pids[n - 1], SIGKILL);
		for (r = 0; r < n; r++)
			waitpid(pids[r], NULL, 0);
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
	char ranks_arg[128] = "2,4,8", *tok, *save = NULL;
	int iters = 2000, warmup = 200, c, death = 0;

	/* Failures are the point of -d; keep the library's warnings out. */
	nproxy_log_set_level(NPROXY_LOG_ERROR);

	while ((c = getopt(argc, argv, "dr:i:w:")) != -1) {
		if (c == 'd')
			death = 1;
		else if (c == 'r')
			snprintf(ranks_arg, sizeof(ranks_arg), "%s", optarg);
		else if (c == 'i')
			iters = atoi(optarg);
		else if (c == 'w')
			warmup = atoi(optarg);
		else
			return 2;
	}
	for (tok = strtok_r(ranks_arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint32_t n = (uint32_t)atoi(tok), r;
		double *res = mmap(NULL, sizeof(double) * 2 * OP_COUNT * NPROXY_BP_MAX_RANKS,
				   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		pid_t pids[NPROXY_BP_MAX_RANKS];
		char job[64];
		int bad = 0, op;

		if (n < 2 || n > NPROXY_BP_MAX_RANKS || res == MAP_FAILED)
			return 2;
		if (death) {
			if (detect(n, iters))
				return 1;
			continue;
		}
		snprintf(job, sizeof(job), "bench-%d-%u", (int)getpid(), n);
		fflush(NULL);
		for (r = 0; r < n; r++) {
			pids[r] = fork();
			if (pids[r] == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				pin_rank(r, n);
				_exit(rank_main(job, r, n, iters, warmup, res));
			}
		}
		for (r = 0; r < n; r++) {
			int st;

			waitpid(pids[r], &st, 0);
			bad |= !WIFEXITED(st) || WEXITSTATUS(st);
		}
		if (bad) {
			fprintf(stderr, "bp_bench: a rank failed at %u ranks\n", n);
			return 1;
		}
		for (op = 0; op < OP_COUNT; op++) {
			double sum = 0;

			for (r = 0; r < n; r++)
				sum += res[(op * 2) * NPROXY_BP_MAX_RANKS + r];
			printf("RESULT impl=bananaphone op=%s ranks=%u size=%zu iters=%d avg_us=%.2f p50_us=%.2f\n",
			       op_names[op], n, op_sizes[op], iters, sum / n,
			       nproxy_test_median_double(&res[(op * 2 + 1) * NPROXY_BP_MAX_RANKS], (int)n));
		}
		fflush(stdout);
		munmap(res, sizeof(double) * 2 * OP_COUNT * NPROXY_BP_MAX_RANKS);
	}
	return 0;
}
