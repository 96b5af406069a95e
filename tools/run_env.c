// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: where am I in the job?  In this order:
 *   1. NPROXY_RANK/NPROXY_WORLD_SIZE/... set by hand;
 *   2. the launcher's PMIx server (run_pmix.c: Open MPI's mpirun, srun
 *      --mpi=pmix), which also hands out rank 0's root address;
 *   3. the launcher's environment, first complete set wins: Open MPI,
 *      Slurm (inside an srun step only), MPICH (Hydra's PMI_RANK/PMI_SIZE,
 *      MPI_LOCALRANKID/MPI_LOCALNRANKS).  These need NPROXY_ROOT_COMM_ID
 *      when there is more than one process.
 * None: self-fork mode.
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
	bool (*started_us)(void);	/* NULL: the rank variable is enough */
};

/*
 * A Slurm task started by srun has SLURM_STEP_ID; a batch script (and what
 * it runs outside srun) inherits SLURM_PROCID and SLURM_NTASKS too, but is
 * one process, not rank 0 of a job.  Slurm numbers its batch, extern and
 * interactive steps from 0xfffffff0 up.
 */
static bool slurm_step(void)
{
	const char *id = getenv("SLURM_STEP_ID");
	char *end;
	unsigned long v;

	if (!id || !*id)
		return false;
	v = strtoul(id, &end, 10);
	return !*end && v < 0xfffffff0UL;
}

static const struct launcher_vars launchers[] = {
	{ "nproxy", "NPROXY_RANK", "NPROXY_WORLD_SIZE", "NPROXY_LOCAL_RANK", "NPROXY_LOCAL_SIZE",
	  NULL },
	{ "openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
	  "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", NULL },
	{ "slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID",
	  "SLURM_NTASKS_PER_NODE", slurm_step },
	{ "mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", NULL },
};

/* Local processes share the root address: it names the job's bus. */
static void name_job(struct run_place *p)
{
	snprintf(p->job_id, sizeof(p->job_id), "nproxy-run-%s", p->root ? p->root : "single");
	for (char *c = p->job_id; *c; c++)
		if (*c == '/')
			*c = '_';
}

/* The launcher's PMIx server: 1 found, 0 none here, else a run_exit code. */
static int from_pmix(struct run_place *p)
{
	char why[300];

	if (!run_pmix_server_here())
		return 0;
	switch (run_pmix_place(p, why, sizeof(why))) {
	case RUN_PMIX_OK:
		name_job(p);
		return 1;
	case RUN_PMIX_UNAVAILABLE:
		/* The environment path may still do (with NPROXY_ROOT_COMM_ID). */
		if (!p->root)
			fprintf(stderr, "nproxy-run: PMIX_NAMESPACE and PMIX_RANK name a PMIx server, but PMIx cannot be used (%s); reading the launcher's environment instead\n",
				why);
		return 0;
	default:
		fprintf(stderr, "nproxy-run: PMIx: %s\n", why);
		return RUN_EXIT_FAILURE;
	}
}

int run_detect_launcher(struct run_place *p)
{
	bool bad = false;
	int rc;

	memset(p, 0, sizeof(*p));
	p->root = getenv("NPROXY_ROOT_COMM_ID");
	if (p->root && !*p->root)
		p->root = NULL;
	for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
		const struct launcher_vars *l = &launchers[i];
		uint32_t rank, size, lrank = 0, lsize = 0;

		/* NPROXY_* by hand first, then the PMIx server, then the rest. */
		if (i == 1 && (rc = from_pmix(p)) != 0)
			return rc == 1 ? 0 : rc;
		if (l->started_us && !l->started_us())
			continue;
		if (!env_u32(l->rank, &rank, &bad)) {
			if (bad)
				return RUN_EXIT_USAGE;
			continue;
		}
		/* SLURM_STEP_NUM_TASKS is the step's size; SLURM_NTASKS (the
		 * job's, the same unless the step asked for fewer) if it is missing. */
		if (!env_u32(l->size, &size, &bad) && !bad &&
		    (strcmp(l->name, "slurm") != 0 || !env_u32("SLURM_NTASKS", &size, &bad))) {
			if (!bad) {
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
			fprintf(stderr, "nproxy-run: started by %s as rank %u of %u, but NPROXY_ROOT_COMM_ID (host:port of rank 0) is not set%s\n",
				l->name, rank, size,
				strcmp(l->name, "nproxy") ? " and no PMIx server is at hand (mpirun and srun --mpi=pmix provide one; nproxy-run loads libpmix.so.2 to use it)" : "");
			return RUN_EXIT_USAGE;
		}
		name_job(p);
		return 0;
	}
	p->launcher = "self";
	return 0;
}
