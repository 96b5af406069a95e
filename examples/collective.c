// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * collective: an allgather and an allreduce through the proxy, as a
 * collective library adopting libnproxy drives them.
 *
 *   1. nproxy_rank_open(): the local bus, the libfabric engine, the
 *      handshake region and the proxy comm, from one options struct;
 *   2. nproxy_coll_open(): the op verb on that rank;
 *   3. per op, one description and nproxy_coll_run() (or
 *      nproxy_coll_start() + nproxy_coll_wait() to overlap other work):
 *      the library builds the ring's FIFOs and device program, re-arms the
 *      trigger gate, enqueues the network and barrier tasks, reduces
 *      inside the op and names a dead peer;
 *   4. check the results, close the coll and the rank.
 *
 * Build: cc collective.c $(pkg-config --cflags --libs libnproxy)
 * Run N ranks of one job, each with its rank and a job id they share:
 *   ./collective 0 2 myjob & ./collective 1 2 myjob; wait
 * FI_PROVIDER picks the libfabric provider (shm on one host) and
 * NPROXY_HANDSHAKE the region's backend (memfd without nproxy.ko).
 * Prints one line per rank and exits 0 when its data is right.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nproxy/coll.h>
#include <nproxy/handshake.h>
#include <nproxy/net.h>
#include <nproxy/rank.h>

#define MAX_RANKS	16
#define CHUNK_WORDS	1024		/* 4 KiB per rank */
#define TIMEOUT_MS	30000u

/* What rank r's chunk holds at word w: every rank can check every chunk. */
static uint32_t pattern(uint32_t r, size_t w)
{
	return (r + 1) * 0x9E3779B9u ^ (uint32_t)w;
}

/* One op to its end; 0, or 1 with the reason on stderr. */
static int run(struct nproxy_coll *coll, uint32_t rank, const struct nproxy_coll_desc *d)
{
	struct nproxy_coll_result res;
	enum nproxy_status st = nproxy_coll_run(coll, d, &res);

	if (st == NPROXY_SUCCESS)
		return 0;
	fprintf(stderr, "rank %u: %s: %s (%s)\n", rank,
		nproxy_coll_kind_name((enum nproxy_coll_kind)d->kind), nproxy_status_str(st),
		nproxy_coll_strerror(coll));
	return 1;
}

static size_t check_allgather(const uint32_t *data, uint32_t n)
{
	size_t wrong = 0;

	for (size_t w = 0; w < (size_t)CHUNK_WORDS * n; w++)
		wrong += data[w] != pattern((uint32_t)(w / CHUNK_WORDS), w % CHUNK_WORDS);
	return wrong;
}

/* Every rank adds rank + 1 to every element: the sum is n (n + 1) / 2. */
static size_t check_allreduce(const float *sum, uint32_t n)
{
	size_t wrong = 0;

	for (size_t w = 0; w < CHUNK_WORDS; w++)
		wrong += sum[w] != (float)n * (n + 1) / 2;
	return wrong;
}

int main(int argc, char **argv)
{
	struct nproxy_rank_opts opts = NPROXY_RANK_OPTS_INIT;
	struct nproxy_coll_desc ag = NPROXY_COLL_DESC_INIT, ar = NPROXY_COLL_DESC_INIT;
	struct nproxy_rank *rk;
	struct nproxy_coll *coll;
	enum nproxy_status st;
	uint32_t rank, n, *data;
	float *vec;
	size_t wrong = 0;
	int rc;

	if (argc != 4 || (n = (uint32_t)atoi(argv[2])) < 1 || n > MAX_RANKS ||
	    (rank = (uint32_t)atoi(argv[1])) >= n) {
		fprintf(stderr, "usage: %s RANK NRANKS JOB_ID   (NRANKS 1..%d, all on this host)\n",
			argv[0], MAX_RANKS);
		return 2;
	}
	/* 1. Every rank on this host: local rank = rank, one bus for the job. */
	opts.rank = rank;
	opts.n_ranks = n;
	opts.local_rank = rank;
	opts.local_size = n;
	opts.job_id = argv[3];
	opts.open_timeout_ms = TIMEOUT_MS;
	st = nproxy_rank_open(&opts, &rk);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "rank %u: open: %s: %s\n", rank, nproxy_status_str(st),
			nproxy_rank_strerror(NULL));
		return 1;
	}
	/* 2. */
	st = nproxy_coll_open(rk, &coll);
	data = malloc(CHUNK_WORDS * sizeof(uint32_t) * n);
	vec = malloc(CHUNK_WORDS * sizeof(float));
	if (st != NPROXY_SUCCESS || !data || !vec) {
		fprintf(stderr, "rank %u: coll open: %s\n", rank, nproxy_status_str(st));
		nproxy_rank_close(rk);
		return 1;
	}

	/* 3. An allgather in place: this rank's chunk is part `rank` of data. */
	memset(data, 0xA5, CHUNK_WORDS * sizeof(uint32_t) * n);	/* stale data cannot pass */
	for (size_t w = 0; w < CHUNK_WORDS; w++)
		data[rank * CHUNK_WORDS + w] = pattern(rank, w);
	ag.kind = NPROXY_COLL_ALLGATHER;
	ag.dtype = NPROXY_UINT32;
	ag.count = CHUNK_WORDS;
	ag.recvbuf = data;
	ag.timeout_ms = TIMEOUT_MS;
	rc = run(coll, rank, &ag);

	/* An allreduce (sum of floats) in place. */
	for (size_t w = 0; w < CHUNK_WORDS; w++)
		vec[w] = (float)(rank + 1);
	ar.kind = NPROXY_COLL_ALLREDUCE;
	ar.dtype = NPROXY_FLOAT32;
	ar.redop = NPROXY_SUM;
	ar.count = CHUNK_WORDS;
	ar.recvbuf = vec;
	ar.timeout_ms = TIMEOUT_MS;
	rc = rc ? rc : run(coll, rank, &ar);

	/* 4. */
	if (!rc) {
		wrong = check_allgather(data, n) + check_allreduce(vec, n);
		printf("rank %u: allgather of %u x %zu bytes and allreduce of %zu floats (provider %s, %s handshake): %s\n",
		       rank, n, CHUNK_WORDS * sizeof(uint32_t), (size_t)CHUNK_WORDS,
		       nproxy_net_provider(nproxy_rank_net(rk)),
		       nproxy_hs_backend_name(nproxy_hs_backend_of(nproxy_rank_hs(rk))),
		       wrong ? "WRONG DATA" : "ok");
	}
	nproxy_coll_forget(coll, data, CHUNK_WORDS * sizeof(uint32_t) * n);
	nproxy_coll_forget(coll, vec, CHUNK_WORDS * sizeof(float));
	nproxy_coll_close(coll);
	nproxy_rank_close(rk);
	free(data);
	free(vec);
	return rc || wrong ? 1 : 0;
}
