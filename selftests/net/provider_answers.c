// SPDX-License-Identifier: GPL-2.0
/*
 * What the engine does with a provider's limits and odd answers, on a
 * one-rank shm engine whose provider is changed under it by interposers
 * (libnproxy is linked statically, so definitions here come first):
 *
 *  - fi_getinfo() lowers every endpoint's max_msg_size to MAX_MSG: a
 *    send and a recv of exactly max_msg_size bytes complete; one byte
 *    more is refused NPROXY_INVALID at start, the error naming the length
 *    and the limit.
 *  - fi_fabric() arranges that the address vector inserts nothing and
 *    says so by a count of 0 (not a negative error): nproxy_net_open()
 *    fails NPROXY_NET_ERROR and the error gives a reason, never
 *    "Success".
 */
#include <dlfcn.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include "kselftest_harness.h"
#include <nproxy/log.h>
#include <nproxy/net.h>
#include <nproxy/seam.h>
#include "ring_common.h"
#include "self_pair.h"

#define MAX_MSG 64u

static bool lower_max_msg;
static bool av_inserts_nothing;

typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t,
			  const struct fi_info *, struct fi_info **);
typedef int (*fabric_fn)(struct fi_fabric_attr *, struct fid_fabric **, void *);

int fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
	       const struct fi_info *hints, struct fi_info **info)
{
	getinfo_fn real = (getinfo_fn)dlsym(RTLD_NEXT, "fi_getinfo");
	int rc = real(version, node, service, flags, hints, info);

	for (struct fi_info *i = rc ? NULL : *info; lower_max_msg && i; i = i->next)
		if (i->ep_attr && i->ep_attr->max_msg_size > MAX_MSG)
			i->ep_attr->max_msg_size = MAX_MSG;
	return rc;
}

/* The provider's tables, copied once with the entry under test replaced. */
static struct fi_ops_fabric fabric_ops;
static struct fi_ops_domain domain_ops;
static struct fi_ops_av av_ops;
static int (*real_domain)(struct fid_fabric *, struct fi_info *, struct fid_domain **, void *);
static int (*real_av_open)(struct fid_domain *, struct fi_av_attr *, struct fid_av **, void *);

static int insert_nothing(struct fid_av *av, const void *addr, size_t count,
			  fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	return 0;
}

static int av_open_spy(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
		       void *context)
{
	int rc = real_av_open(domain, attr, av, context);

	if (!rc) {
		av_ops = *(*av)->ops;
		av_ops.insert = insert_nothing;
		(*av)->ops = &av_ops;
	}
	return rc;
}

static int domain_spy(struct fid_fabric *fabric, struct fi_info *info,
		      struct fid_domain **domain, void *context)
{
	int rc = real_domain(fabric, info, domain, context);

	if (!rc) {
		domain_ops = *(*domain)->ops;
		real_av_open = domain_ops.av_open;
		domain_ops.av_open = av_open_spy;
		(*domain)->ops = &domain_ops;
	}
	return rc;
}

int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	fabric_fn real = (fabric_fn)dlsym(RTLD_NEXT, "fi_fabric");
	int rc = real(attr, fabric, context);

	if (!rc && av_inserts_nothing) {
		fabric_ops = *(*fabric)->ops;
		real_domain = fabric_ops.domain;
		fabric_ops.domain = domain_spy;
		(*fabric)->ops = &fabric_ops;
	}
	return rc;
}

FIXTURE(max_msg) {
	struct nproxy_net *net;
};

FIXTURE_SETUP(max_msg)
{
	enum nproxy_status st;

	lower_max_msg = true;
	self->net = ring_open_single(5000, &st);
	lower_max_msg = false;
	if (!self->net)
		SKIP(return, "no libfabric shm provider here (%s)", nproxy_status_str(st));
}

FIXTURE_TEARDOWN(max_msg)
{
	nproxy_net_close(self->net);
}

TEST_F(max_msg, a_message_of_exactly_max_msg_size_completes)
{
	if (!self->net)
		return;		/* skipped: this harness runs the body after a SKIP in setup */
	EXPECT_EQ((int)NPROXY_SUCCESS, (int)run_pair(self->net, 0, MAX_MSG, MAX_MSG)) {
		TH_LOG("error: \"%s\"", nproxy_net_strerror(self->net));
	}
}

TEST_F(max_msg, one_byte_more_is_refused_naming_length_and_limit)
{
	char want[64];

	if (!self->net)
		return;
	EXPECT_EQ((int)NPROXY_INVALID, (int)run_pair(self->net, 0, MAX_MSG + 1, MAX_MSG + 1));
	snprintf(want, sizeof(want), "len %u (max %u)", MAX_MSG + 1, MAX_MSG);
	EXPECT_NE(NULL, strstr(nproxy_net_strerror(self->net), want)) {
		TH_LOG("error: \"%s\"", nproxy_net_strerror(self->net));
	}
}

/* The error nproxy_net_open() logs about the address vector. */
static char av_error[512];

static void keep_av_error(enum nproxy_log_level level, const char *msg, void *arg)
{
	if (level == NPROXY_LOG_ERROR && strstr(msg, "fi_av_insert"))
		snprintf(av_error, sizeof(av_error), "%s", msg);
}

TEST(av_insert_of_nothing_fails_open_with_a_reason)
{
	const char *err = av_error;
	struct nproxy_net *net;
	enum nproxy_status st;

	nproxy_log_set_sink(keep_av_error, NULL);
	av_inserts_nothing = true;
	net = ring_open_single(5000, &st);
	av_inserts_nothing = false;
	nproxy_log_set_sink(NULL, NULL);
	if (st == NPROXY_UNSUPPORTED)
		SKIP(return, "no libfabric shm provider here");
	ASSERT_EQ(NULL, net);
	EXPECT_EQ((int)NPROXY_NET_ERROR, (int)st);
	EXPECT_NE(NULL, strstr(err, "fi_av_insert of rank 0")) TH_LOG("error: \"%s\"", err);
	EXPECT_NE(NULL, strstr(err, fi_strerror(FI_EINVAL))) TH_LOG("error: \"%s\"", err);
	EXPECT_EQ(NULL, strstr(err, "Success")) TH_LOG("error: \"%s\"", err);
}

TEST_HARNESS_MAIN
