// SPDX-License-Identifier: GPL-2.0
/*
 * Each NPROXY_FAULT kind arms its own kind only: the names are matched
 * whole ("futex" is not "alloc", although both have five letters).  The
 * probe is a one-rank Bananaphone leader open, which allocates but makes
 * no futex wait, creates no thread and calls no libfabric: alloc:1 fails
 * it (NPROXY_RESOURCE, one fault injected); every other kind leaves it
 * alone (nothing injected).
 */
#include "kselftest_harness.h"
#include <stdio.h>
#include <unistd.h>
#include <nproxy/bananaphone.h>
#include <nproxy/fault.h>
#include <nproxy/log.h>
#include "nproxy_test.h"

static void quiet(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

static enum nproxy_status probe(const char *spec, uint64_t *injected)
{
	static unsigned int n;
	struct nproxy_bp *bp = NULL;
	enum nproxy_status st;
	char job[64];

	snprintf(job, sizeof(job), "t-fk-%d-%u", (int)getpid(), n++);
	if (nproxy_fault_set(spec) != NPROXY_SUCCESS)
		return NPROXY_INVALID;
	nproxy_log_set_sink(quiet, NULL);
	st = nproxy_test_bp_open(job, 0, 1, 0, &bp);
	nproxy_log_set_sink(NULL, NULL);
	*injected = nproxy_fault_injected();
	nproxy_fault_set(NULL);
	if (bp) {
		nproxy_bp_hangup(bp);
		nproxy_bp_close(bp);
	}
	return st;
}

TEST(alloc_kind_fails_an_allocation)
{
	uint64_t injected;

	EXPECT_EQ((int)NPROXY_RESOURCE, (int)probe("alloc:1", &injected));
	EXPECT_EQ(1u, injected);
}

TEST(other_kinds_do_not_arm_alloc)
{
	static const char *const specs[] = { "futex:1", "thread:1", "fi:1", "post_eagain:1" };
	uint64_t injected;

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		EXPECT_EQ((int)NPROXY_SUCCESS, (int)probe(specs[i], &injected)) {
			TH_LOG("%s", specs[i]);
		}
		EXPECT_EQ(0u, injected);
	}
}

TEST_HARNESS_MAIN
