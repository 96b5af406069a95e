// SPDX-License-Identifier: GPL-2.0
/*
 * Open MPI baseline for bp_bench: MPI_Barrier and MPI_Allgather (64 B and
 * 4 KiB per rank) on this host, run by bench/bp_run.sh under
 * `mpirun --oversubscribe -np N`.  Same output format (impl=openmpi):
 * per-call latency over `iters` after `warmup`: mean (averaged over ranks)
 * and median (median over ranks).
 * Built with mpicc by its own rule in bench/Makefile (skipped without it).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	static const size_t sizes[3] = { 0, 64, 4096 };
	int iters = 2000, warmup = 200, rank, n, op, c, i;
	double *lat, *p50s;
	char *blob, *all;

	MPI_Init(&argc, &argv);
	while ((c = getopt(argc, argv, "i:w:")) != -1) {
		if (c == 'i')
			iters = atoi(optarg);
		else if (c == 'w')
			warmup = atoi(optarg);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	blob = malloc(4096);
	all = malloc((size_t)n * 4096);
	lat = malloc(sizeof(double) * (size_t)iters);
	p50s = malloc(sizeof(double) * (size_t)n);
	if (!blob || !all || !lat || !p50s)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(blob, rank, 4096);
	for (op = 0; op < 3; op++) {
		double t0 = 0, t1, mine, sum = 0, p50;

		for (i = -warmup; i < iters; i++) {
			if (i == 0) {
				MPI_Barrier(MPI_COMM_WORLD);
				t0 = MPI_Wtime();
			}
			t1 = MPI_Wtime();
			if (op == 0)
				MPI_Barrier(MPI_COMM_WORLD);
			else
				MPI_Allgather(blob, (int)sizes[op], MPI_BYTE, all, (int)sizes[op],
					      MPI_BYTE, MPI_COMM_WORLD);
			if (i >= 0)
				lat[i] = (MPI_Wtime() - t1) * 1e6;
		}
		mine = (MPI_Wtime() - t0) * 1e6 / iters;
		p50 = median(lat, iters);
		MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Gather(&p50, 1, MPI_DOUBLE, p50s, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
		if (rank == 0)
			printf("RESULT impl=openmpi op=%s ranks=%d size=%zu iters=%d avg_us=%.2f p50_us=%.2f\n",
			       op ? "allgather" : "barrier", n, sizes[op], iters, sum / n,
			       median(p50s, n));
	}
	fflush(stdout);
	free(blob);
	free(all);
	free(lat);
	free(p50s);
	MPI_Finalize();
	return 0;
}
