// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: each row's buffers.  send holds the op's input (used in
 * place it is left alone), recv the whole result (the allgather's W parts,
 * the allreduce's vector, sendrecv's incoming part); want and tmp build
 * an allreduce's expected result when the run verifies, local rank 0's for
 * the whole process (moved data is checked a block at a time); in_kept and
 * out_kept each pattern's input and result (run_verify.c).  The op verb registers send
 * and recv on first use and forgets them before they are freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run_rank.h"

/* Bytes one rank's buffers take at `size` (as run_buffers_alloc() sizes
 * them, for the widest type): the op's input and result, and with
 * verification the expected result and one rank's input; and the kept
 * patterns (run_rank.h). */
static uint64_t rank_bytes(const struct run_opts *o, uint32_t world, uint64_t size)
{
	uint64_t in = o->coll == RUN_ALLGATHER ? size / world + 16 : size + 8;
	uint64_t kept = size <= RUN_KEEP_MAX ? RUN_PATTERNS * (in + (o->check ? size : 0)) : 0;

	return (size + in + 8) * (o->check ? 2 : 1) + kept;
}

static uint64_t read_u64(const char *path)
{
	unsigned long long v = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* Room left under this process's memory cgroup limit (v1 or v2); 0: no limit found. */
static uint64_t cgroup_room(void)
{
	char line[512], path[700];
	uint64_t room = 0;
	FILE *f = fopen("/proc/self/cgroup", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':'), *q = p ? strchr(p + 1, ':') : NULL;
		uint64_t lim, use;

		if (!q)
			continue;
		q[strcspn(q, "\n")] = 0;
		if (!strncmp(p, ":memory:", 8)) {
			snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", q + 1);
			lim = read_u64(path);
			snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", q + 1);
		} else if (!strncmp(line, "0::", 3)) {
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", q + 1);
			lim = read_u64(path);	/* "max" reads as 0: no limit */
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", q + 1);
		} else {
			continue;
		}
		use = read_u64(path);
		/* v1 writes "no limit" as a huge number. */
		if (lim && lim < (1ull << 60)) {
			uint64_t r = lim > use ? lim - use : 0;

			if (!room || r < room)
				room = r;
		}
	}
	fclose(f);
	return room;
}

/* MemAvailable, or 0 when /proc/meminfo does not say. */
static uint64_t mem_available(void)
{
	char line[256];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

int run_memory_check(const struct run_rank *ranks, uint32_t n_local, uint32_t host_ranks)
{
	const struct run_opts *o = ranks[0].o;
	uint64_t max = 0, need, avail, room;

	for (uint32_t i = 0; i < o->n_sizes; i++)
		if (o->sizes[i] > max)
			max = o->sizes[i];
	if (host_ranks < n_local)
		host_ranks = n_local;
	need = (uint64_t)host_ranks * rank_bytes(o, ranks[0].world, max);
	avail = mem_available();
	room = cgroup_room();
	if (room && (!avail || room < avail))
		avail = room;
	if (!avail || need <= avail)
		return RUN_EXIT_OK;
	return run_fail(RUN_EXIT_FAILURE,
			"%u ranks on this host with %llu-byte buffers would need %.2f GB, %.2f GB available%s",
			host_ranks, (unsigned long long)max, need / 1e9, avail / 1e9,
			avail == room ? " (memory cgroup limit)" : " (MemAvailable)");
}

static void *zeroed(size_t len)
{
	void *p = NULL;

	/* At least a cache line: an empty op still has a buffer to point at. */
	len = len < 64 ? 64 : len;
	if (posix_memalign(&p, 4096, len))
		return NULL;
	memset(p, 0, len);
	return p;
}

int run_buffers_alloc(struct run_rank *rc, const struct run_row *row)
{
	uint64_t count, bytes;

	run_row_count(rc->o, row, rc->world, &count, &bytes);
	rc->row = *row;
	rc->count = count;
	rc->esize = nproxy_dtype_size(row->dtype);
	rc->recv_len = bytes;
	rc->send_len = count * rc->esize;
	rc->send = zeroed(rc->send_len);
	rc->recv = zeroed(rc->recv_len);
	/* One expected allreduce result per process: every local rank checks
	 * against it (moved data is checked a block at a time, run_verify.c). */
	if (rc->o->check && !rc->local_idx && rc->o->coll == RUN_ALLREDUCE) {
		rc->want = zeroed(rc->recv_len);
		rc->tmp = zeroed(rc->send_len);
		if (!rc->want || !rc->tmp)
			return run_fail(RUN_EXIT_FAILURE, "rank %u: out of memory for %zu-byte buffers",
					rc->rank, rc->recv_len);
	}
	if (!rc->send || !rc->recv)
		return run_fail(RUN_EXIT_FAILURE, "rank %u: out of memory for %zu-byte buffers",
				rc->rank, rc->recv_len);
	for (int p = 0; p < RUN_PATTERNS && rc->recv_len <= RUN_KEEP_MAX; p++) {
		rc->in_kept[p] = zeroed(rc->send_len);
		rc->out_kept[p] = rc->o->check ? zeroed(rc->recv_len) : NULL;
		if (!rc->in_kept[p] || (rc->o->check && !rc->out_kept[p]))
			return run_fail(RUN_EXIT_FAILURE, "rank %u: out of memory for %zu-byte buffers",
					rc->rank, rc->recv_len);
	}
	return RUN_EXIT_OK;
}

void run_buffers_free(struct run_rank *rc)
{
	/* A later row's buffer may come back at the same address. */
	if (rc->send)
		nproxy_coll_forget(rc->coll, rc->send, rc->send_len ? rc->send_len : 64);
	if (rc->recv)
		nproxy_coll_forget(rc->coll, rc->recv, rc->recv_len ? rc->recv_len : 64);
	free(rc->send);
	free(rc->recv);
	free(rc->want);
	free(rc->tmp);
	rc->send = rc->recv = rc->want = rc->tmp = NULL;
	for (int p = 0; p < RUN_PATTERNS; p++) {
		free(rc->in_kept[p]);
		free(rc->out_kept[p]);
		rc->in_kept[p] = rc->out_kept[p] = NULL;
		rc->in_valid[p] = rc->out_valid[p] = false;
	}
}
