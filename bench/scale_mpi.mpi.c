// SPDX-License-Identifier: GPL-2.0
/*
 * Open MPI baseline for scale_rank (bench/scale_run.sh): one rank's setup
 * under `mpirun --oversubscribe -np W`.  Prints the same line:
 *
 *   RESULT impl=openmpi rank=R ranks=W start_ms=S setup_ms=T first_ms=F fds=D rss_kib=K
 *
 * start_ms: the process's start (/proc/self/stat) to main(); setup_ms: the
 * process's start to the end of MPI_Init; first_ms: the first
 * MPI_Allgather of 4 KiB per rank (Open MPI connects lazily too: its first
 * collective carries the connections); fds and rss_kib after it.
 * Built with mpicc by its own rule in bench/Makefile (skipped without it).
 */
#include <dirent.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "scale_proc.h"

#define CHUNK_WORDS	1024u

int main(int argc, char **argv)
{
	double t_main = boot_ms(), t_start = process_start_ms(), t_init, t0, t1;
	uint32_t *mine, *all;
	size_t wrong = 0;
	int rank, n;

	MPI_Init(&argc, &argv);
	t_init = boot_ms();
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	mine = malloc(CHUNK_WORDS * sizeof(*mine));
	all = calloc((size_t)CHUNK_WORDS * n, sizeof(*all));
	if (!mine || !all)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (uint32_t w = 0; w < CHUNK_WORDS; w++)
		mine[w] = ((uint32_t)rank + 1) * 0x9E3779B9u ^ w;
	t0 = boot_ms();
	MPI_Allgather(mine, CHUNK_WORDS, MPI_UINT32_T, all, CHUNK_WORDS, MPI_UINT32_T,
		      MPI_COMM_WORLD);
	t1 = boot_ms();
	for (size_t w = 0; w < (size_t)CHUNK_WORDS * n; w++)
		wrong += all[w] != (((uint32_t)(w / CHUNK_WORDS) + 1) * 0x9E3779B9u ^
				    (uint32_t)(w % CHUNK_WORDS));
	if (wrong)
		fprintf(stderr, "rank %d: MPI_Allgather: %zu words wrong\n", rank, wrong);
	else
		printf("RESULT impl=openmpi rank=%d ranks=%d start_ms=%.1f setup_ms=%.1f first_ms=%.2f fds=%ld rss_kib=%ld\n",
		       rank, n, t_start < 0 ? -1 : t_main - t_start,
		       t_start < 0 ? -1 : t_init - t_start, t1 - t0, open_fds(), rss_kib());
	fflush(stdout);
	free(mine);
	free(all);
	MPI_Finalize();
	return wrong ? 1 : 0;
}
