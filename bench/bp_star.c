// SPDX-License-Identifier: GPL-2.0
/*
 * Baseline for bp_bench: the simplest rendezvous one would write without
 * Bananaphone -- a star over an abstract Unix stream socket.  Rank 0
 * accepts n-1 connections; a barrier is one byte in from every follower
 * and one byte back out; an all-gather sends each follower's blob to rank
 * 0, which returns the concatenation to everyone.  Blocking I/O, so
 * waiters sleep in the kernel like Bananaphone's futex waiters.
 * Same output format and options as bp_bench (impl=unix_star).
 */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "bp_driver.h"
#include "nproxy_test.h"

#define MAX_RANKS BP_MAX_RANKS

static int xfer(int fd, void *buf, size_t len, int out)
{
	char *p = buf;

	while (len) {
		ssize_t n = out ? write(fd, p, len) : read(fd, p, len);

		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

struct star {
	uint32_t rank, n;
	int fds[MAX_RANKS];	/* rank 0: one per follower; followers: fds[0] */
	char *gather;		/* n * 4096 */
};

static int star_barrier(struct star *s)
{
	char b = 0;
	uint32_t r;

	if (s->rank)
		return xfer(s->fds[0], &b, 1, 1) || xfer(s->fds[0], &b, 1, 0);
	for (r = 1; r < s->n; r++)
		if (xfer(s->fds[r], &b, 1, 0))
			return -1;
	for (r = 1; r < s->n; r++)
		if (xfer(s->fds[r], &b, 1, 1))
			return -1;
	return 0;
}

/* Fixed-size parts (as in the benchmark); lengths travel first. */
static int star_allgather(struct star *s, const void *blob, size_t len)
{
	uint64_t lens[MAX_RANKS];
	uint32_t r;
	size_t off = 0;

	if (s->rank) {
		uint64_t l = len;

		if (xfer(s->fds[0], &l, sizeof(l), 1) || xfer(s->fds[0], (void *)blob, len, 1) ||
		    xfer(s->fds[0], lens, sizeof(lens[0]) * s->n, 0))
			return -1;
		for (r = 0; r < s->n; r++)
			off += lens[r];
		return xfer(s->fds[0], s->gather, off, 0);
	}
	lens[0] = len;
	memcpy(s->gather, blob, len);
	off = len;
	for (r = 1; r < s->n; r++) {
		if (xfer(s->fds[r], &lens[r], sizeof(lens[r]), 0) || lens[r] > 4096 ||
		    xfer(s->fds[r], s->gather + off, lens[r], 0))
			return -1;
		off += lens[r];
	}
	for (r = 1; r < s->n; r++)
		if (xfer(s->fds[r], lens, sizeof(lens[0]) * s->n, 1) ||
		    xfer(s->fds[r], s->gather, off, 1))
			return -1;
	return 0;
}

static int star_join(struct star *s, const char *name)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
	int fd, i;

	memcpy(sun.sun_path + 1, name, strlen(name));
	if (s->rank == 0) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sun, len) || listen(fd, MAX_RANKS))
			return -1;
		for (i = 1; i < (int)s->n; i++) {
			int c = accept(fd, NULL, NULL);
			uint32_t peer;

			if (c < 0 || xfer(c, &peer, sizeof(peer), 0) || peer >= s->n)
				return -1;
			s->fds[peer] = c;
		}
		close(fd);
		return 0;
	}
	for (i = 0; i < 10000; i++) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connect(fd, (struct sockaddr *)&sun, len) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(1000);
	}
	if (fd < 0)
		return -1;
	s->fds[0] = fd;
	return xfer(fd, &s->rank, sizeof(s->rank), 1);
}

static int rank_main(const char *name, uint32_t rank, uint32_t n, int iters, int warmup,
		     double *out)
{
	struct star s = { .rank = rank, .n = n };
	double *lat = malloc(sizeof(double) * (size_t)iters);
	char blob[4096];
	int op, i;

	s.gather = malloc((size_t)n * 4096);
	memset(blob, (int)rank, sizeof(blob));
	if (!s.gather || !lat || star_join(&s, name))
		return 1;
	for (op = 0; op < OP_COUNT; op++) {
		double t0 = 0, t1;

		for (i = -warmup; i < iters; i++) {
			if (i == 0) {
				if (star_barrier(&s))
					return 1;
				t0 = now_us();
			}
			t1 = now_us();
			if (op == OP_BARRIER ? star_barrier(&s) : star_allgather(&s, blob, op_sizes[op]))
				return 1;
			if (i >= 0)
				lat[i] = now_us() - t1;
		}
		BP_AVG(out, op)[rank] = (now_us() - t0) / iters;
		BP_P50(out, op)[rank] = nproxy_test_median_double(lat, iters);
	}
	free(lat);
	free(s.gather);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct bp_impl unix_star = {
		.impl = "unix_star", .prog = "bp_star", .rank = rank_main,
	};

	return bp_driver_main(argc, argv, &unix_star);
}
