// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: where am I in the job?  Launchers announce rank, size and
 * local rank through the environment; the first complete set wins, in the
 * order NPROXY_*, Open MPI, Slurm, PMIx, MPICH (Hydra's PMI_RANK/PMI_SIZE,
 * MPI_LOCALRANKID/MPI_LOCALNRANKS).  None: self-fork mode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "run.h"

static int env_u32(const char *name, uint32_t *out, bool *bad)
{
	const char *v = getenv(name);
	char digits[32], why[200];
	size_t n;

	if (!v)
		return 0;
	/* Slurm writes "4(x2)" for a repeated count: its number is the head. */
	n = strcspn(v, "(");
	snprintf(digits, sizeof(digits), "%.*s", (int)(n < sizeof(digits) ? n : sizeof(digits) - 1),
		 v);
	if (n >= sizeof(digits) ||
	    cli_parse_u32(name, digits, 0, 1000000, out, why, sizeof(why))) {
		fprintf(stderr, "nproxy-run: %s='%s' is not a number (0..1000000)\n", name, v);
		*bad = true;
		return 0;
	}
	return 1;
}

struct launcher_vars {
	const char *name, *rank, *size, *local_rank, *local_size;
};

static const struct launcher_vars launchers[] = {
	{ "nproxy", "NPROXY_RANK", "NPROXY_WORLD_SIZE", "NPROXY_LOCAL_RANK", "NPROXY_LOCAL_SIZE" },
	{ "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
	  "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE" },
	{ "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE" },
	{ "pmix", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE" },
	{ "mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS" },
};

int run_detect_launcher(struct run_place *p)
{
	bool bad = false;

	memset(p, 0, sizeof(*p));
	p->root = getenv("NPROXY_ROOT_COMM_ID");
	if (p->root && !*p->root)
		p->root = NULL;
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		const struct launcher_vars *l = &launchers[i];
		uint32_t rank, size, lrank = 0, lsize = 0;

		if (!env_u32(l->rank, &rank, &bad)) {
			if (bad)
				return RUN_EXIT_USAGE;
			continue;
		}
		if (!env_u32(l->size, &size, &bad) && !bad) {
			/* PMIx exports no size variable: Open MPI's or Slurm's may. */
			if (!env_u32("OMPI_COMM_WORLD_SIZE", &size, &bad) &&
			    !env_u32("SLURM_NTASKS", &size, &bad)) {
				fprintf(stderr, "nproxy-run: %s is set but %s is not: cannot tell the world size\n",
					l->rank, l->size);
				return RUN_EXIT_USAGE;
			}
		}
		if (bad)
			return RUN_EXIT_USAGE;
		if (!size || rank >= size) {
			fprintf(stderr, "nproxy-run: %s=%u is not below %s=%u\n",
				l->rank, rank, l->size, size);
			return RUN_EXIT_USAGE;
		}
		env_u32(l->local_rank, &lrank, &bad);
		env_u32(l->local_size, &lsize, &bad);
		if (bad)
			return RUN_EXIT_USAGE;
		if (lsize && lrank >= lsize) {
			fprintf(stderr, "nproxy-run: %s=%u is not below %s=%u\n",
				l->local_rank, lrank, l->local_size, lsize);
			return RUN_EXIT_USAGE;
		}
		p->launched = true;
		p->launcher = l->name;
		p->proc_rank = rank;
		p->n_procs = size;
		p->local_proc = lrank;
		p->local_procs = lsize ? lsize : (size == 1 ? 1 : 0);
		if (size > 1 && !p->root) {
			fprintf(stderr, "nproxy-run: started by %s as rank %u of %u, but NPROXY_ROOT_COMM_ID (host:port of rank 0) is not set\n",
				l->name, rank, size);
			return RUN_EXIT_USAGE;
		}
		/* Local processes share the root address: it names the job's bus. */
		snprintf(p->job_id, sizeof(p->job_id), "nproxy-run-%s",
			 p->root ? p->root : "single");
		for (char *c = p->job_id; *c; c++)
			if (*c == '/')
				*c = '_';
		return 0;
	}
	p->launcher = "self";
	return 0;
}
