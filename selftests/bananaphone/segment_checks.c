// SPDX-License-Identifier: GPL-2.0
/*
 * What a follower checks on the segment memfd its leader hands it
 * (npx_bp_segment_attach), fed bad input: a memfd of the wrong size, one
 * not sealed, one sealed against resizing but not against new seals, one
 * with a foreign layout; each is refused with NPROXY_FAILURE and a reason.
 * One sealed against writes cannot be mapped for writing: NPROXY_RESOURCE,
 * naming the mmap, and the follower is broken, not left half attached.
 * A real leader's segment is accepted (the checks refuse only what they
 * should).
 */
#include <fcntl.h>
#include <sys/mman.h>
#include "kselftest_harness.h"
#include "bp_test.h"
#include <nproxy/log.h>
#include "bananaphone/bananaphone_internal.h"

#define SEALS	(F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

static void quiet(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

FIXTURE(seg) {
	struct nproxy_bp follower;
	size_t size;
};

FIXTURE_SETUP(seg)
{
	memset(&self->follower, 0, sizeof(self->follower));
	self->follower.rank = 1;
	self->follower.n = 2;
	snprintf(self->follower.job_id, sizeof(self->follower.job_id), "seg-%d", (int)getpid());
	self->size = npx_bp_segment_size(2);
	nproxy_log_set_sink(quiet, NULL);
}

FIXTURE_TEARDOWN(seg)
{
	npx_bp_segment_unmap(&self->follower);
	nproxy_log_set_sink(NULL, NULL);
}

static int memfd_of(size_t size, int seals)
{
	int fd = memfd_create("seg-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)size) || (seals && fcntl(fd, F_ADD_SEALS, seals))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void expect_refused(struct __test_metadata *_metadata, struct nproxy_bp *bp, int fd,
			   const char *why)
{
	ASSERT_LE(0, fd);
	EXPECT_EQ(NPROXY_FAILURE, npx_bp_segment_attach(bp, fd));
	EXPECT_NE(NULL, strstr(nproxy_bp_strerror(bp), why)) {
		TH_LOG("\"%s\" lacks \"%s\"", nproxy_bp_strerror(bp), why);
	}
	close(fd);
}

TEST_F(seg, wrong_size_refused)
{
	expect_refused(_metadata, &self->follower, memfd_of(self->size + 4096, SEALS), "expected");
}

TEST_F(seg, unsealed_refused)
{
	expect_refused(_metadata, &self->follower, memfd_of(self->size, 0), "not sealed");
}

TEST_F(seg, resizing_sealed_but_not_seal_sealed_refused)
{
	expect_refused(_metadata, &self->follower,
		       memfd_of(self->size, F_SEAL_GROW | F_SEAL_SHRINK), "not sealed");
}

TEST_F(seg, foreign_layout_refused)
{
	expect_refused(_metadata, &self->follower, memfd_of(self->size, SEALS), "foreign layout");
}

TEST_F(seg, a_segment_that_cannot_be_mapped_writable_refused)
{
	int fd = memfd_of(self->size, SEALS | F_SEAL_WRITE);

	ASSERT_LE(0, fd);
	EXPECT_EQ(NPROXY_RESOURCE, npx_bp_segment_attach(&self->follower, fd));
	EXPECT_NE(NULL, strstr(nproxy_bp_strerror(&self->follower), "mmap of the")) {
		TH_LOG("\"%s\"", nproxy_bp_strerror(&self->follower));
	}
	EXPECT_EQ(NULL, self->follower.ctl);
	EXPECT_EQ(BP_S_BROKEN, self->follower.state);
	close(fd);
}

TEST_F(seg, real_leaders_segment_accepted)
{
	struct nproxy_bp *leader;

	ASSERT_EQ(NPROXY_SUCCESS, nproxy_test_bp_open(self->follower.job_id, 0, 2, 0, &leader));
	ASSERT_LE(0, leader->memfd);
	EXPECT_EQ(NPROXY_SUCCESS, npx_bp_segment_attach(&self->follower, leader->memfd)) {
		TH_LOG("%s", nproxy_bp_strerror(&self->follower));
	}
	nproxy_bp_hangup(leader);
	nproxy_bp_close(leader);
}

TEST_HARNESS_MAIN
