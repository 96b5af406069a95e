/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What bp_bench (Bananaphone) and bp_star (its Unix-socket baseline)
 * share, so that the two are measured and reported the same way: the ops,
 * the options, forked ranks pinned as mpirun pins them, and the RESULT
 * lines.  Each program gives its rank's body (struct bp_impl) and calls
 * bp_driver_main().  A header of static functions: every C file of bench/ is one
 * program (bench/Makefile).
 *
 *   PROG [-r 2,4,8] [-i iters] [-w warmup]    (-d too where impl->detect)
 */
#ifndef NPROXY_BENCH_BP_DRIVER_H
#define NPROXY_BENCH_BP_DRIVER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <nproxy/bananaphone.h>
#include "nproxy_test.h"

enum op { OP_BARRIER, OP_AG64, OP_AG4K, OP_COUNT };
static const char *const op_names[OP_COUNT] = { "barrier", "allgather", "allgather" };
static const size_t op_sizes[OP_COUNT] = { 0, 64, 4096 };

/* Every rank of a run writes its figures for op into the shared page. */
#define BP_MAX_RANKS		NPROXY_BP_MAX_RANKS
#define BP_AVG(out, op)		((out) + ((op) * 2) * BP_MAX_RANKS)
#define BP_P50(out, op)		((out) + ((op) * 2 + 1) * BP_MAX_RANKS)
#define BP_PAGE_SIZE		(sizeof(double) * 2 * OP_COUNT * BP_MAX_RANKS)
/* A run's ranks are killed after this long (bp_run.sh's own limit is 600 s). */
#define BP_RUN_TIMEOUT_MS	600000

struct bp_impl {
	const char *impl;	/* impl= of the RESULT lines */
	const char *prog;	/* for messages */
	/* One rank: BP_AVG(out, op)[rank] and BP_P50(out, op)[rank] for every op; 0 ok. */
	int (*rank)(const char *job, uint32_t rank, uint32_t n, int iters, int warmup,
		    double *out);
	/* -d: death detection at n ranks over `kills` kills, or NULL (no -d). */
	int (*detect)(uint32_t n, int kills);
};

static inline double now_us(void)
{
	return (double)nproxy_test_now_ns() / 1e3;
}

/*
 * Like mpirun's default --bind-to core for np <= cpus (and no binding when
 * oversubscribed): rank r on cpu r, so the implementations are compared
 * under the same placement.  BP_BENCH_NO_PIN turns it off.
 */
static inline void pin_rank(unsigned int rank, unsigned int n)
{
	if (!getenv("BP_BENCH_NO_PIN"))
		nproxy_test_pin_rank(rank, n);
}

struct bp_run {
	const struct bp_impl *impl;
	const char *job;
	int iters, warmup;
	double *out;
};

static int bp_run_rank(uint32_t rank, uint32_t n, void *arg)
{
	const struct bp_run *run = arg;

	pin_rank(rank, n);
	return run->impl->rank(run->job, rank, n, run->iters, run->warmup, run->out);
}

/* Every op at n ranks: fork them, wait, print the RESULT lines; 0 ok. */
static int bp_run_ranks(const struct bp_impl *impl, uint32_t n, int iters, int warmup)
{
	const struct nproxy_test_child how = { .quick_exit = true };
	double *out = mmap(NULL, BP_PAGE_SIZE, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	char job[64];
	struct bp_run run = { impl, job, iters, warmup, out };
	int op, ok;

	if (out == MAP_FAILED)
		return 2;
	snprintf(job, sizeof(job), "bench-%s-%d-%u", impl->impl, (int)getpid(), n);
	fflush(NULL);
	ok = nproxy_test_run_ranks(bp_run_rank, n, &run, BP_RUN_TIMEOUT_MS, &how, NULL);
	if (ok != (int)n) {
		fprintf(stderr, "%s: a rank failed at %u ranks\n", impl->prog, n);
		munmap(out, BP_PAGE_SIZE);
		return 1;
	}
	for (op = 0; op < OP_COUNT; op++) {
		double sum = 0;

		for (uint32_t r = 0; r < n; r++)
			sum += BP_AVG(out, op)[r];
		printf("RESULT impl=%s op=%s ranks=%u size=%zu iters=%d avg_us=%.2f p50_us=%.2f\n",
		       impl->impl, op_names[op], n, op_sizes[op], iters, sum / n,
		       nproxy_test_median_double(BP_P50(out, op), n));
	}
	fflush(stdout);
	munmap(out, BP_PAGE_SIZE);
	return 0;
}

static int bp_driver_main(int argc, char **argv, const struct bp_impl *impl)
{
	char ranks_arg[128] = "2,4,8", *tok, *save = NULL;
	int iters = 2000, warmup = 200, c, death = 0, rc;

	while ((c = getopt(argc, argv, impl->detect ? "dr:i:w:" : "r:i:w:")) != -1) {
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
	if (iters < 1 || warmup < 0)
		return 2;
	for (tok = strtok_r(ranks_arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint32_t n = (uint32_t)atoi(tok);

		if (n < 2 || n > BP_MAX_RANKS)
			return 2;
		rc = death ? impl->detect(n, iters) : bp_run_ranks(impl, n, iters, warmup);
		if (rc)
			return rc;
	}
	return 0;
}

#endif
