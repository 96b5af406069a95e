// SPDX-License-Identifier: GPL-2.0
/*
 * Open MPI baseline for bp_bench: MPI_Barrier and MPI_Allgather (64 B and
 * 4 KiB per rank) on this host, run by bench/bp_run.sh under
 * `mpirun --oversubscribe -np N`.  Same output format (impl=openmpi):
 * mean latency per call over `iters` after `warmup`, averaged over ranks.
 * Built with mpicc by its own rule in bench/Makefile (skipped without it).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static const size_t sizes[3] = { 0, 64, 4096 };
	int iters = 2000, warmup = 200, rank, n, op, c, i;
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
	if (!blob || !all)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(blob, rank, 4096);
	for (op = 0; op < 3; op++) {
		double t0 = 0, mine, sum = 0;

		for (i = -warmup; i < iters; i++) {
			if (i == 0) {
				MPI_Barrier(MPI_COMM_WORLD);
				t0 = MPI_Wtime();
			}
			if (op == 0)
				MPI_Barrier(MPI_COMM_WORLD);
			else
				MPI_Allgather(blob, (int)sizes[op], MPI_BYTE, all, (int)sizes[op],
					      MPI_BYTE, MPI_COMM_WORLD);
		}
		mine = (MPI_Wtime() - t0) * 1e6 / iters;
		MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rank == 0)
			printf("RESULT impl=openmpi op=%s ranks=%d size=%zu iters=%d avg_us=%.2f\n",
			       op ? "allgather" : "barrier", n, sizes[op], iters, sum / n);
	}
	fflush(stdout);
	free(blob);
	free(all);
	MPI_Finalize();
	return 0;
}
