/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A job in which one rank dies, or is reported dead, and every other rank
 * must notice: when it died and what each rank saw, in memory that the
 * forked ranks and the test share.  The ranks record; the test asks
 * nproxy_test_death_missed() about each survivor and asserts.
 */
#ifndef NPROXY_TEST_RANK_DEATH_H
#define NPROXY_TEST_RANK_DEATH_H

#include <stddef.h>
#include <stdint.h>

#define NPROXY_TEST_DEATH_MAX_RANKS	16

/* How one rank's part of the job ended. */
struct nproxy_test_seen {
	int status;		/* the enum nproxy_status it ended with */
	int pid;
	int64_t ended_ms;	/* nproxy_test_now_ms() then */
	char text[400];		/* the library's words for it */
};

struct nproxy_test_death {
	volatile int64_t died_ms;	/* nproxy_test_now_ms() at the death; 0: none yet */
	struct nproxy_test_seen seen[NPROXY_TEST_DEATH_MAX_RANKS];
};

/* Zeroed memory shared with the processes forked after it; NULL on failure. */
struct nproxy_test_death *nproxy_test_death_map(void);
void nproxy_test_death_unmap(struct nproxy_test_death *d);
/* The death happens now. */
void nproxy_test_death_mark(struct nproxy_test_death *d);
/* Rank ended now with status and text (its pid is this process's). */
void nproxy_test_death_saw(struct nproxy_test_death *d, uint32_t rank, int status,
			   const char *text);
/*
 * Whether survivor rank missed the death: NULL when it ended with
 * NPROXY_PEER_DEAD, a text containing want, less than bound_ms after the
 * death; else what it did instead, written to buf.
 */
const char *nproxy_test_death_missed(const struct nproxy_test_death *d, uint32_t rank,
				     const char *want, int64_t bound_ms, char *buf, size_t len);

#endif
