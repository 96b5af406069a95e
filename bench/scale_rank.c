// SPDX-License-Identifier: GPL-2.0
/*
 * scale_rank: one rank's setup cost, for bench/scale_run.sh.  Started once
 * per rank by the script (a network namespace per host, or all on this
 * host), it opens the rank (nproxy_rank_open() + nproxy_coll_open(): bus,
 * libfabric engine with its connections, handshake region, proxy comm),
 * runs one 4 KiB-per-rank allgather, checks it, and prints one line:
 *
 *   RESULT impl=nproxy rank=R ranks=W start_ms=S setup_ms=T first_ms=F fds=D rss_kib=K
 *
 * start_ms: the process's start (its /proc/self/stat start time) to main(),
 * the dynamic loader and library constructors included (libfabric's
 * dependencies run theirs here); setup_ms: the process's start to the
 * rank and its op verb open; first_ms: the first allgather, start to end;
 * fds and rss_kib: open descriptors and VmRSS after it.  scale_mpi is the
 * Open MPI counterpart (MPI_Init, the first MPI_Allgather).
 *
 * Usage: scale_rank RANK NRANKS LOCAL_RANK LOCAL_SIZE JOB_ID
 * FI_PROVIDER, NPROXY_ROOT_COMM_ID and NPROXY_HANDSHAKE as for any rank.
 * Exit 0 when the allgather's data is right.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nproxy/coll.h>
#include <nproxy/net.h>
#include <nproxy/rank.h>
#include "scale_proc.h"

#define CHUNK_WORDS	1024u		/* 4 KiB per rank */
#define TIMEOUT_MS	120000u

static uint32_t pattern(uint32_t r, size_t w)
{
	return (r + 1) * 0x9E3779B9u ^ (uint32_t)w;
}

static int parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (!*s || *end || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	double t_main = boot_ms(), t_start = process_start_ms(), t_open, t0, t1;
	struct nproxy_rank_opts opts = NPROXY_RANK_OPTS_INIT;
	struct nproxy_coll_desc ag = NPROXY_COLL_DESC_INIT;
	struct nproxy_coll_result res;
	struct nproxy_rank *rk;
	struct nproxy_coll *coll;
	enum nproxy_status st;
	uint32_t *data;
	size_t wrong = 0;

	if (argc != 6 || parse_u32(argv[1], &opts.rank) || parse_u32(argv[2], &opts.n_ranks) ||
	    parse_u32(argv[3], &opts.local_rank) || parse_u32(argv[4], &opts.local_size) ||
	    !opts.n_ranks || opts.rank >= opts.n_ranks) {
		fprintf(stderr, "usage: %s RANK NRANKS LOCAL_RANK LOCAL_SIZE JOB_ID\n", argv[0]);
		return 2;
	}
	opts.job_id = argv[5];
	opts.open_timeout_ms = TIMEOUT_MS;
	st = nproxy_rank_open(&opts, &rk);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "rank %u: open: %s: %s\n", opts.rank, nproxy_status_str(st),
			nproxy_rank_strerror(NULL));
		return 1;
	}
	st = nproxy_coll_open(rk, &coll);
	data = calloc((size_t)CHUNK_WORDS * opts.n_ranks, sizeof(*data));
	if (st != NPROXY_SUCCESS || !data) {
		fprintf(stderr, "rank %u: coll open: %s\n", opts.rank, nproxy_status_str(st));
		nproxy_rank_close(rk);
		return 1;
	}
	t_open = boot_ms();
	for (size_t w = 0; w < CHUNK_WORDS; w++)
		data[(size_t)opts.rank * CHUNK_WORDS + w] = pattern(opts.rank, w);
	ag.kind = NPROXY_COLL_ALLGATHER;
	ag.dtype = NPROXY_UINT32;
	ag.count = CHUNK_WORDS;
	ag.recvbuf = data;
	ag.timeout_ms = TIMEOUT_MS;
	t0 = boot_ms();
	st = nproxy_coll_run(coll, &ag, &res);
	t1 = boot_ms();
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "rank %u: allgather: %s (%s)\n", opts.rank, nproxy_status_str(st),
			nproxy_coll_strerror(coll));
	} else {
		for (size_t w = 0; w < (size_t)CHUNK_WORDS * opts.n_ranks; w++)
			wrong += data[w] != pattern((uint32_t)(w / CHUNK_WORDS), w % CHUNK_WORDS);
		if (wrong)
			fprintf(stderr, "rank %u: allgather: %zu words wrong\n", opts.rank, wrong);
		else
			printf("RESULT impl=nproxy rank=%u ranks=%u start_ms=%.1f setup_ms=%.1f first_ms=%.2f fds=%ld rss_kib=%ld provider=%s\n",
			       opts.rank, opts.n_ranks, t_start < 0 ? -1 : t_main - t_start,
			       t_start < 0 ? -1 : t_open - t_start, t1 - t0, open_fds(), rss_kib(),
			       nproxy_net_provider(nproxy_rank_net(rk)));
	}
	fflush(stdout);
	nproxy_coll_forget(coll, data, (size_t)CHUNK_WORDS * opts.n_ranks * sizeof(*data));
	nproxy_coll_close(coll);
	nproxy_rank_close(rk);
	free(data);
	return st != NPROXY_SUCCESS || wrong ? 1 : 0;
}
