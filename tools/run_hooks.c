// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: the selftests' hooks, read from the environment.  Each makes
 * one failure happen at a chosen place, to show that the job turns it into
 * an error naming the rank (the kill points are in run_kill.c, the crash
 * hook in run_crash.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run_rank.h"

/*
 * NPROXY_RUN_HANG=RANK:OP:KIND (selftests of nproxyctl hang-report): op OP
 * (1, 2, ...) of RANK hangs.  KIND trigger: its device program starts with
 * a 60 s DELAY, so the trigger stays at the sentinel; sem: it starts with
 * a WAIT_SEM on the last semaphore for a value nobody ever adds; stop: the
 * process hosting RANK stops itself (SIGSTOP) before the op, so its peers
 * wait on the network.  Returns the kind ('t', 's', 'p') or 0.
 */
char run_hang_hook(uint32_t rank, uint64_t op)
{
	const char *v = getenv("NPROXY_RUN_HANG");
	unsigned int r;
	unsigned long long hang_op;
	char kind[16];

	if (!v || sscanf(v, "%u:%llu:%15s", &r, &hang_op, kind) != 3 || r != rank ||
	    hang_op != op)
		return 0;
	if (!strcmp(kind, "trigger"))
		return 't';
	if (!strcmp(kind, "sem"))
		return 's';
	return !strcmp(kind, "stop") ? 'p' : 0;
}

/*
 * NPROXY_RUN_PAUSE=OP:MS (selftests of nproxyctl hang-report): every rank
 * spends MS ms before starting op OP (1, 2, ...), as an application
 * computing between two collectives does.  The pause in ms, or 0.
 */
uint32_t run_pause_hook(uint64_t op)
{
	const char *v = getenv("NPROXY_RUN_PAUSE");
	unsigned long long pause_op;
	unsigned int ms;

	if (!v || sscanf(v, "%llu:%u", &pause_op, &ms) != 2 || pause_op != op)
		return 0;
	return ms;
}

/* NPROXY_RUN_CORRUPT=RANK[:ROW]: flip one received byte of RANK's first
 * timed iteration of row ROW (default 0, the first; in nccl-tests mode row
 * 1 is the first size in place), to prove that verification catches it.
 * The rank, or -1. */
int run_corrupt_hook(uint32_t *row)
{
	const char *v = getenv("NPROXY_RUN_CORRUPT");
	unsigned int r, at = 0;

	*row = 0;
	if (!v || sscanf(v, "%u:%u", &r, &at) < 1)
		return -1;
	*row = at;
	return (int)r;
}

/* NPROXY_RUN_KILL=RANK:ITER: the process hosting RANK dies by SIGKILL
 * before its ITER-th iteration (counted over all sizes, warmup included).
 * The rank, or -1. */
int run_kill_hook(uint32_t *iter)
{
	const char *v = getenv("NPROXY_RUN_KILL");
	unsigned int r, it;

	if (!v || sscanf(v, "%u:%u", &r, &it) != 2)
		return -1;
	*iter = it;
	return (int)r;
}
