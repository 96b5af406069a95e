// SPDX-License-Identifier: GPL-2.0
/*
 * Open MPI baseline for bench/coll_run.sh: MPI_Allgather / MPI_Allreduce
 * measured the way nproxy-run measures its collectives, so that the two
 * columns of coll_run.sh's table can be divided:
 *
 *  - size is the whole result buffer.  Each rank's chunk is size/P rounded
 *    down to whole 32-bit words (at least one), as nproxy-run does; the
 *    size as run (chunk * P) is printed.  allgather: every rank contributes
 *    one chunk of bytes; allreduce: chunk*P/4 uint32_t summed (MPI_SUM).
 *  - before every iteration an MPI_Barrier, outside the timing; an
 *    iteration's time is the slowest rank's (MPI_Reduce MAX over ranks of
 *    each iteration's time); median and p99 are nearest-rank quantiles of
 *    those, the same formula as nproxy-run's (the lower middle for an even
 *    count; with fewer than 100 iterations p99 is the maximum).
 *  - CPU: getrusage(RUSAGE_SELF) user+sys (every thread of the rank) taken
 *    right before and after each timed collective -- like nproxy-run's
 *    cpu_s, the barriers and the checks are left out -- summed over the
 *    timed iterations and over ranks (MPI_Reduce SUM).
 *  - data, as nproxy-run handles it (outside the timing): before every
 *    iteration each rank writes its input afresh, one of DATA_PATTERNS
 *    patterns taken in turn (the previous iteration's data cannot pass),
 *    and poisons its result buffer; after it the result is checked.  This
 *    is not decoration: an input written just before the op sits dirty in
 *    the writer's cache, and a peer's copy of it (CMA) costs about twice
 *    one of an input written once and left clean (2 ranks, 1 MiB
 *    allgather, this host: 63 -> 113 us).  Measured without it, MPI ran on
 *    a warmer cache than nproxy-run and the ratio compared caches, not
 *    libraries.  Each pattern's input and expected result are computed
 *    once per size: the input is copied, the result compared with memcmp.
 *    A check that computed every value burned more CPU than the op, and
 *    with more ranks than CPUs that burst slowed the next timed op (4
 *    ranks on 2 CPUs, 1 MiB allgather: 260-310 -> 790-930 us); nproxy-run
 *    checks the same way.  -k keeps the input of the first iteration and
 *    checks only the last result (nccl-tests' way); nproxy-run has no such
 *    mode, so coll_run.sh does not use it.
 *  - in place (MPI_IN_PLACE), as nproxy-run's own rows are: the input is
 *    this rank's part of the result (allreduce: the whole buffer).  -o runs
 *    out of place, with a separate input buffer (an allgather then copies
 *    its own part locally, an extra pass nproxy-run's in-place row does not
 *    make).
 *
 * One line per size on rank 0:
 *   RESULT impl=openmpi coll=C ranks=P bytes=B iters=N median_us=.. p99_us=..
 *          min_us=.. max_us=.. cpu_s=.. wall_s=.. verify=ok|FAIL
 * (wall_s: the slowest rank's sum of its timed iterations).  Exit status 1
 * if a result was wrong, 2 on a usage error.
 *
 *   mpirun -np P coll_mpi -c allgather|allreduce -n ITERS -w WARMUP -s SIZE[,SIZE...]
 * SIZE takes K/M/G suffixes.  Built with mpicc by its own rule in
 * bench/Makefile (skipped without it).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_SIZES 64
#define DATA_PATTERNS 2	/* input patterns, taken in turn */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Quantile q of sorted v[n], nearest rank (nproxy-run's formula). */
static double quantile(const double *v, int n, double q)
{
	int idx = (int)ceil(q * n);

	if (idx)
		idx--;
	return v[idx < n ? idx : n - 1];
}

static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static int parse_size(const char *s, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || v <= 0)
		return -1;
	switch (*end) {
	case 'G': case 'g': v <<= 10; /* fall through */
	case 'M': case 'm': v <<= 10; /* fall through */
	case 'K': case 'k': v <<= 10; end++; break;
	}
	if (*end || v > (1L << 30))
		return -1;
	*out = v;
	return 0;
}

/* Input word i of rank r at iteration it; the allreduce sum is over r. */
static uint32_t pattern(int r, size_t i, int it)
{
	return (uint32_t)(r + 1) * 0x9e3779b1u + (uint32_t)i * 2654435761u +
	       (uint32_t)it * 0x85ebca6bu;
}

static void usage(int rank)
{
	if (!rank)
		fprintf(stderr, "usage: coll_mpi -c allgather|allreduce [-n ITERS] [-w WARMUP] [-o] [-k] -s SIZE[,SIZE...]\n");
}

struct coll_opts {
	int ag;			/* 1 allgather, 0 allreduce, < 0 bad */
	int iters, warmup, n_sizes;
	int keep;		/* -k: input written once, last result checked (implies -o) */
	int oop;		/* -o: out of place (separate input buffer) */
	long sizes[MAX_SIZES];
};

static int parse_opts(int argc, char **argv, struct coll_opts *o)
{
	int c;

	*o = (struct coll_opts){ .ag = -1, .iters = 20, .warmup = 5 };
	while ((c = getopt(argc, argv, "c:n:w:kos:")) != -1) {
		switch (c) {
		case 'c':
			o->ag = !strcmp(optarg, "allgather") ? 1 : !strcmp(optarg, "allreduce") ? 0 : -1;
			break;
		case 'n':
			o->iters = atoi(optarg);
			break;
		case 'k':
			o->keep = o->oop = 1;
			break;
		case 'o':
			o->oop = 1;
			break;
		case 'w':
			o->warmup = atoi(optarg);
			break;
		case 's':
			for (char *tok = strtok(optarg, ","); tok; tok = strtok(NULL, ",")) {
				if (o->n_sizes == MAX_SIZES || parse_size(tok, &o->sizes[o->n_sizes]))
					o->ag = -2;
				else
					o->n_sizes++;
			}
			break;
		default:
			o->ag = -2;
		}
	}
	return o->ag < 0 || !o->n_sizes || o->iters < 1 || o->warmup < 0 ? -1 : 0;
}

/* The result of data pattern it, every rank's the same. */
static void expect(uint32_t *want, int w, int ag, size_t chunk, size_t total, int it)
{
	for (size_t i = 0; i < total / 4; i++) {
		want[i] = 0;
		if (ag) {
			want[i] = pattern((int)(i / (chunk / 4)), i % (chunk / 4), it);
		} else {
			for (int r = 0; r < w; r++)
				want[i] += pattern(r, i, it);
		}
	}
}

/* A result that differs from want, outside the timing: the first wrong word, 1. */
static int check_result(const uint32_t *out, const uint32_t *want, int rank, int ag, size_t total,
			int it)
{
	for (size_t i = 0; i < total / 4; i++) {
		if (out[i] != want[i]) {
			fprintf(stderr, "coll_mpi: rank %d: %s %zu B iteration %d: word %zu is 0x%08x, expected 0x%08x\n",
				rank, ag ? "allgather" : "allreduce", total, it, i, out[i], want[i]);
			return 1;
		}
	}
	return 0;
}

/* One size: warmup + iters timed calls, checked, reported by rank 0; 1 when wrong. */
static int run_size(const struct coll_opts *o, int rank, int w, long size, double *lat,
		    double *mx)
{
	size_t chunk = (size_t)size / (size_t)w / 4 * 4, total, words;
	double cpu = 0, wall = 0, cpu_sum = 0, wall_max = 0;
	int ag = o->ag, iters = o->iters, wrong = 0, any_wrong = 0;
	uint32_t *in, *out, *mine, *pat[DATA_PATTERNS], *want[DATA_PATTERNS];

	if (!chunk)
		chunk = 4;
	total = chunk * (size_t)w;
	words = total / 4;
	in = malloc(ag ? chunk : total);
	out = malloc(total);
	for (int p = 0; p < DATA_PATTERNS; p++) {
		pat[p] = malloc(ag ? chunk : total);
		want[p] = malloc(total);
		if (!pat[p] || !want[p])
			MPI_Abort(MPI_COMM_WORLD, 2);
		for (size_t i = 0; i < (ag ? chunk / 4 : words); i++)
			pat[p][i] = pattern(rank, i, p);
		expect(want[p], w, ag, chunk, total, p);
	}
	if (!in || !out)
		MPI_Abort(MPI_COMM_WORLD, 2);
	/* In place, the input is this rank's part of the result (allreduce: all of it). */
	mine = o->oop ? in : ag ? out + rank * (chunk / 4) : out;
	for (int it = -o->warmup; it < iters; it++) {
		int data_it = o->keep ? 0 : (it + o->warmup) % DATA_PATTERNS;
		double t0, t1, c0, c1;

		if (!o->keep || it == -o->warmup) {
			if (ag || o->oop)
				memset(out, 0xa5, total);
			memcpy(mine, pat[data_it], ag ? chunk : total);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		c0 = cpu_now();
		t0 = MPI_Wtime();
		if (ag)
			MPI_Allgather(o->oop ? in : MPI_IN_PLACE, (int)chunk, MPI_BYTE, out, (int)chunk,
				      MPI_BYTE, MPI_COMM_WORLD);
		else
			MPI_Allreduce(o->oop ? in : MPI_IN_PLACE, out, (int)words, MPI_UINT32_T, MPI_SUM,
				      MPI_COMM_WORLD);
		t1 = MPI_Wtime();
		c1 = cpu_now();
		if (it >= 0) {
			lat[it] = (t1 - t0) * 1e6;
			wall += t1 - t0;
			cpu += c1 - c0;
		}
		if ((!o->keep || it == iters - 1) && !wrong && memcmp(out, want[data_it], total))
			wrong = check_result(out, want[data_it], rank, ag, total, it);
	}

	MPI_Reduce(lat, mx, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&cpu, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&wall, &wall_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&wrong, &any_wrong, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
	if (!rank) {
		qsort(mx, (size_t)iters, sizeof(double), cmp_double);
		printf("RESULT impl=openmpi coll=%s ranks=%d bytes=%zu iters=%d median_us=%.3f p99_us=%.3f min_us=%.3f max_us=%.3f cpu_s=%.6f wall_s=%.6f verify=%s\n",
		       ag ? "allgather" : "allreduce", w, total, iters,
		       quantile(mx, iters, 0.5), quantile(mx, iters, 0.99), mx[0],
		       mx[iters - 1], cpu_sum, wall_max, any_wrong ? "FAIL" : "ok");
		fflush(stdout);
	}
	for (int p = 0; p < DATA_PATTERNS; p++) {
		free(pat[p]);
		free(want[p]);
	}
	free(in);
	free(out);
	return !rank && any_wrong;
}

int main(int argc, char **argv)
{
	struct coll_opts o;
	int rank, w, bad = 0;
	double *lat, *mx;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &w);
	if (parse_opts(argc, argv, &o)) {
		usage(rank);
		MPI_Finalize();
		return 2;
	}
	lat = malloc(sizeof(double) * (size_t)o.iters);
	mx = malloc(sizeof(double) * (size_t)o.iters);
	if (!lat || !mx)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (int si = 0; si < o.n_sizes; si++)
		bad |= run_size(&o, rank, w, o.sizes[si], lat, mx);
	free(lat);
	free(mx);
	MPI_Finalize();
	return bad ? 1 : 0;
}
