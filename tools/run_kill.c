// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: kill points (selftests).  NPROXY_RUN_KILL_AT=RANK:PHASE makes
 * the process hosting RANK die by SIGKILL the first time that rank reaches
 * PHASE, so that every phase of a job can be shown to turn a dead rank
 * into an error naming it (selftests/tools/run_kill_points.sh).
 * NPROXY_RUN_KILL=RANK:ITER (run_hooks.c) is the per-iteration variant.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"

static const char *const kill_phase_names[RUN_KILL_PHASES] = {
	[RUN_KILL_RENDEZVOUS] = "rendezvous",
	[RUN_KILL_ENGINE] = "engine",
	[RUN_KILL_REGION] = "region",
	[RUN_KILL_COMM] = "comm",
	[RUN_KILL_BARRIER] = "barrier",
	[RUN_KILL_TRIGGER] = "trigger",
	[RUN_KILL_TRANSFER] = "transfer",
	[RUN_KILL_TEARDOWN] = "teardown",
};

static pthread_once_t kill_once = PTHREAD_ONCE_INIT;
static int kill_rank = -1;
static int kill_phase = -1;

static void kill_parse(void)
{
	const char *v = getenv("NPROXY_RUN_KILL_AT");
	char name[32];
	unsigned int r;

	if (!v || sscanf(v, "%u:%31s", &r, name) != 2)
		return;
	for (int p = 0; p < RUN_KILL_PHASES; p++) {
		if (!strcmp(name, kill_phase_names[p])) {
			kill_rank = (int)r;
			kill_phase = p;
			return;
		}
	}
	fprintf(stderr, "nproxy-run: NPROXY_RUN_KILL_AT=%s: unknown phase, ignored\n", v);
}

void run_kill_point(enum run_kill_phase phase, uint32_t rank)
{
	pthread_once(&kill_once, kill_parse);
	if (kill_phase == (int)phase && kill_rank == (int)rank)
		raise(SIGKILL);
}
