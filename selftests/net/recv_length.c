// SPDX-License-Identifier: GPL-2.0
/*
 * The recv length checks fed bad input: a one-rank engine (shm) whose
 * block sends to itself into a 16-byte recv.  8 bytes: the completion's
 * length is checked, the block fails NPROXY_INVALID and the error names the
 * stream, the block, the op, the peer and both lengths.  32 bytes: the
 * provider reports a truncation error completion, which fails the block
 * NPROXY_INVALID naming the recv.  A matching pair (16 into 16) completes.
 */
#include "kselftest_harness.h"
#include <string.h>
#include <nproxy/net.h>
#include <nproxy/seam.h>

#include "self_pair.h"

/* A recv of 16 bytes and a send of send_len: the block's status and what its error says. */
FIXTURE(single) {
	struct nproxy_net *net;
};

FIXTURE_VARIANT(single) {
	uint32_t send_len;
	enum nproxy_status want;
	const char *says[2];	/* in the error text, when set */
};

FIXTURE_VARIANT_ADD(single, matching_lengths_complete) {
	.send_len = 16, .want = NPROXY_SUCCESS,
};

FIXTURE_VARIANT_ADD(single, short_message_fails_the_block_with_both_lengths) {
	.send_len = 8, .want = NPROXY_INVALID,
	.says = { "stream 0 bb 0 op 0: recv from rank 0 got 8 bytes, expected 16" },
};

/* 32 bytes into a 16-byte recv: the provider's truncation error completion. */
FIXTURE_VARIANT_ADD(single, long_message_is_a_truncation_error_of_the_recv) {
	.send_len = 32, .want = NPROXY_INVALID,
	.says = { "stream 0 bb 0 op 0 (recv from rank 0, 16 bytes", "failed: " },
};

FIXTURE_SETUP(single)
{
	self->net = open_single();
	if (!self->net)
		SKIP(return, "no libfabric shm provider here");
}

FIXTURE_TEARDOWN(single)
{
	nproxy_net_close(self->net);
}

TEST_F(single, recv_of_16)
{
	const char *err;

	if (!self->net)
		return;		/* skipped: this harness runs the body after a SKIP in setup */
	EXPECT_EQ((int)variant->want, (int)run_pair(self->net, 0, 16, variant->send_len));
	err = nproxy_net_strerror(self->net);
	for (int i = 0; i < 2 && variant->says[i]; i++) {
		EXPECT_NE(NULL, strstr(err, variant->says[i])) {
			TH_LOG("error: \"%s\"", err);
		}
	}
}

TEST_HARNESS_MAIN
