// SPDX-License-Identifier: GPL-2.0
/*
 * The memory-registration modes EFA asks for, run on the providers this
 * host has.  shm, tcp;ofi_rxm and udp;ofi_rxd (RDM over datagrams, as
 * EFA's RDM is over SRD) require none of FI_MR_LOCAL / FI_MR_ALLOCATED;
 * NPROXY_NET_MR_MODE=efa makes the engine honour them anyway, and the test
 * watches what reaches the provider: every rank's endpoint gets a tagged-ops
 * table whose send and recv check, before calling the provider's own, that
 * the descriptor passed is the one of the registered region holding the
 * buffer.  A ring all-gather and all-reduce (ring_common.h) then run on 2
 * ranks of each provider.
 *
 * Also: the key each region requested is unique in the domain (none of
 * these providers chooses keys: FI_MR_PROV_KEY is not reported), a range
 * with an unmapped page is refused under FI_MR_ALLOCATED with the cause,
 * and a mode only the provider can set is refused when asked for.
 */
#include "kselftest_harness.h"
/* Multi-process tests on a shared 2-CPU box: each test bounds its ranks
 * itself (ring_fork_ranks); the harness's 30 s default is too tight. */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 240
#include <sys/mman.h>
#include "ring_common.h"
#include "net/net_internal.h"

/* One forked rank's view: its engine, the provider's own ops, what was seen. */
static struct nproxy_net *spy_net;
static struct fi_ops_tagged spy_ops, *provider_ops;
static unsigned long spy_checked, spy_bad;

/* Is desc the descriptor of a live region holding [buf, buf + len)? */
static bool desc_matches(const void *buf, size_t len, void *desc)
{
	for (uint32_t i = 0; i < spy_net->n_mrs; i++) {
		const struct net_mr *m = &spy_net->mrs[i];
		const char *base = m->base;

		if (!m->refs || !m->mr || (const char *)buf < base ||
		    (const char *)buf + len > base + m->len)
			continue;
		if (desc && desc == m->desc && desc == fi_mr_desc(m->mr))
			return true;
	}
	return false;
}

static void spy_check(const char *what, const void *buf, size_t len, void *desc)
{
	spy_checked++;
	if (desc_matches(buf, len, desc))
		return;
	if (spy_bad++ < 4)
		fprintf(stderr, "rank %u: %s of %zu bytes at %p with descriptor %p: not the registered region's\n",
			spy_net->rank, what, len, buf, desc);
}

static ssize_t spy_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			fi_addr_t dest, uint64_t tag, void *context)
{
	spy_check("fi_tsend", buf, len, desc);
	return provider_ops->send(ep, buf, len, desc, dest, tag, context);
}

static ssize_t spy_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			uint64_t tag, uint64_t ignore, void *context)
{
	spy_check("fi_trecv", buf, len, desc);
	return provider_ops->recv(ep, buf, len, desc, src, tag, ignore, context);
}

static void spy_on(struct nproxy_net *net)
{
	spy_net = net;
	provider_ops = net->ep->tagged;
	spy_ops = *provider_ops;
	spy_ops.send = spy_send;
	spy_ops.recv = spy_recv;
	net->ep->tagged = &spy_ops;
}

static void set_provider_env(const char *provider, const char *mr_mode)
{
	setenv("FI_PROVIDER", provider, 1);
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("FI_UDP_IFACE", "lo", 1);
	if (mr_mode)
		setenv("NPROXY_NET_MR_MODE", mr_mode, 1);
	else
		unsetenv("NPROXY_NET_MR_MODE");
}

/* Every live region has an MR and a key no other region has. */
static int keys_unique(struct nproxy_net *net)
{
	uint32_t live = 0;

	for (uint32_t i = 0; i < net->n_mrs; i++) {
		if (!net->mrs[i].refs)
			continue;
		live++;
		if (!net->mrs[i].mr) {
			fprintf(stderr, "rank %u: region %u was not registered\n", net->rank, i);
			return 1;
		}
		for (uint32_t j = i + 1; j < net->n_mrs; j++)
			if (net->mrs[j].refs && net->mrs[j].key == net->mrs[i].key) {
				fprintf(stderr, "rank %u: regions %u and %u share key %llu\n", net->rank,
					i, j, (unsigned long long)net->mrs[i].key);
				return 1;
			}
	}
	/* The host barrier's and the abort messages' regions at least. */
	return live >= 2 ? 0 : 1;
}

/* One host barrier (its payload is a registered region too); the engine's
 * timeout bounds it. */
static enum nproxy_status host_barrier(struct nproxy_net *net)
{
	struct nproxy_host_barrier hb;
	enum nproxy_status st;
	bool done = false;

	nproxy_net_host_barrier(net, &hb);
	st = hb.ops->arrive(hb.ctx, 1);	/* nproxy_net_open() used 0 */
	while (!st && !done)
		st = hb.ops->test(hb.ctx, 1, &done);
	return st;
}

struct mr_job {
	const char *provider;
	char root[64];
};

static int efa_modes_rank(uint32_t rank, void *arg)
{
	struct mr_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = rank, .n_ranks = 2, .comm_id = 5,
				     .timeout_ms = 20000, .root = job->root };
	static const size_t sizes[] = { 1, 4097, (1 << 20) + 13 };
	const uint64_t want = FI_MR_LOCAL | FI_MR_ALLOCATED;
	struct nproxy_net *net;
	enum nproxy_status st;
	int bad = 0;

	set_provider_env(job->provider, "efa");
	st = nproxy_net_open(&o, &net);
	if (st) {
		fprintf(stderr, "rank %u: nproxy_net_open on %s: %s\n", rank, job->provider,
			nproxy_status_str(st));
		return 2;
	}
	if ((net->mr_mode & want) != want) {
		fprintf(stderr, "rank %u: mr_mode %s lacks FI_MR_LOCAL | FI_MR_ALLOCATED\n", rank,
			fi_tostr(&net->mr_mode, FI_TYPE_MR_MODE));
		bad = 1;
	}
	if (!bad && keys_unique(net))
		bad = 1;
	spy_on(net);
	for (uint32_t i = 0; !bad && i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (ring_allgather(net, sizes[i], i, 2 * i, 20000) ||
		    ring_allreduce(net, sizes[i], i + 100, 2 * i + 1, 20000))
			bad = 1;
	if (!bad && host_barrier(net)) {
		fprintf(stderr, "rank %u: host barrier: %s\n", rank, nproxy_net_strerror(net));
		bad = 1;
	}
	/* The ring posts 2 x (n - 1) sends and recvs per op at least. */
	if (spy_checked < 4 * sizeof(sizes) / sizeof(sizes[0]) || spy_bad) {
		fprintf(stderr, "rank %u: %lu of %lu posted sends/recvs had a wrong descriptor\n",
			rank, spy_bad, spy_checked);
		bad = 1;
	}
	nproxy_net_close(net);
	return bad;
}

static void run_efa_modes(struct __test_metadata *_metadata, const char *provider)
{
	struct mr_job job = { .provider = provider };

	RING_ASSERT_RANKS_OK(2, efa_modes_rank, &job, job.root, 120000);
}

TEST(efa_modes_shm) { run_efa_modes(_metadata, "shm"); }
TEST(efa_modes_tcp_rxm) { run_efa_modes(_metadata, "tcp;ofi_rxm"); }
TEST(efa_modes_udp_rxd) { run_efa_modes(_metadata, "udp;ofi_rxd"); }

/* Without NPROXY_NET_MR_MODE the engine honours what the provider reports, no more. */
static int reported_modes_rank(uint32_t rank, void *arg)
{
	struct mr_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = 0, .n_ranks = 1, .timeout_ms = 5000 };
	static char buf[4096];
	struct nproxy_net *net;
	uint32_t id;
	int bad = 0;

	set_provider_env(job->provider, NULL);
	if (nproxy_net_open(&o, &net))
		return 2;
	if (net->mr_mode != (uint64_t)net->info->domain_attr->mr_mode) {
		char ours[256], theirs[256];

		/* fi_tostr() returns one buffer: two calls in one printf show one. */
		fprintf(stderr, "%s: honours %s, the provider reports %s\n", job->provider,
			fi_tostr_r(ours, sizeof(ours), &net->mr_mode, FI_TYPE_MR_MODE),
			fi_tostr_r(theirs, sizeof(theirs), &net->info->domain_attr->mr_mode,
				   FI_TYPE_MR_MODE));
		bad = 1;
	}
	if (nproxy_net_mr_register(net, buf, sizeof(buf), &id)) {
		bad = 1;
	} else {
		/* A region gets an MR exactly when the provider wants descriptors. */
		if (!net->mrs[id].mr != !(net->mr_mode & FI_MR_LOCAL))
			bad = 1;
		nproxy_net_mr_deregister(net, id);
	}
	nproxy_net_close(net);
	return bad;
}

static void run_single(struct __test_metadata *_metadata, const char *provider,
		       int (*fn)(uint32_t, void *))
{
	struct mr_job job = { .provider = provider };
	int exits[1];

	ASSERT_EQ(1, ring_fork_ranks(1, fn, &job, 60000, exits)) {
		TH_LOG("exit %d", exits[0]);
	}
}

TEST(reported_modes_shm) { run_single(_metadata, "shm", reported_modes_rank); }
TEST(reported_modes_tcp_rxm) { run_single(_metadata, "tcp;ofi_rxm", reported_modes_rank); }
TEST(reported_modes_udp_rxd) { run_single(_metadata, "udp;ofi_rxd", reported_modes_rank); }

/*
 * One mapped page whose next page stays unmapped.  A hole left by munmap()
 * among the other mappings is where the next mmap() goes (the engine's
 * open, a sanitizer's allocator), so the page is placed low, far below
 * where mmap() hands out addresses (top-down from the stack), with
 * MAP_FIXED_NOREPLACE; NULL when no such place is free.
 */
static char *low_page_before_a_hole(size_t page)
{
	for (uintptr_t at = 0x10000000u; at < 0x40000000u; at += 0x1000000u) {
		void *p = mmap((void *)at, page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		unsigned char v;

		if (p == MAP_FAILED)
			continue;
		/* An old kernel ignores the flag and may place it elsewhere. */
		if (p != (void *)at || !mincore((char *)p + page, page, &v) || errno != ENOMEM) {
			munmap(p, page);
			continue;
		}
		return p;
	}
	return NULL;
}

/*
 * FI_MR_ALLOCATED: a range whose second page is unmapped is refused, with
 * the cause; its mapped first page alone is accepted and registered.
 */
static int allocated_rank(uint32_t rank, void *arg)
{
	struct mr_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = 0, .n_ranks = 1, .timeout_ms = 5000 };
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct nproxy_net *net;
	enum nproxy_status st;
	char *map;
	uint32_t id;
	int bad = 0;

	set_provider_env(job->provider, "efa");
	map = low_page_before_a_hole(page);
	if (!map)
		return 3;
	if (nproxy_net_open(&o, &net))
		return 2;
	st = nproxy_net_mr_register(net, map + page / 2, page, &id);
	if (st != NPROXY_INVALID || !strstr(nproxy_net_strerror(net), "FI_MR_ALLOCATED")) {
		fprintf(stderr, "%s: half-unmapped range: %s, '%s'\n", job->provider,
			nproxy_status_str(st), nproxy_net_strerror(net));
		bad = 1;
	}
	st = nproxy_net_mr_register(net, map, page, &id);
	if (st != NPROXY_SUCCESS || !net->mrs[id].mr) {
		fprintf(stderr, "%s: mapped page: %s\n", job->provider, nproxy_status_str(st));
		bad = 1;
	} else {
		nproxy_net_mr_deregister(net, id);
	}
	nproxy_net_close(net);
	munmap(map, page);
	return bad;
}

TEST(allocated_refuses_unmapped_shm) { run_single(_metadata, "shm", allocated_rank); }
TEST(allocated_refuses_unmapped_udp_rxd)
{
	run_single(_metadata, "udp;ofi_rxd", allocated_rank);
}

/* Key and addressing modes are the provider's: asking for one fails open, named. */
static int bad_mode_rank(uint32_t rank, void *arg)
{
	struct mr_job *job = arg;
	struct nproxy_net_opts o = { .size = sizeof(o), .rank = 0, .n_ranks = 1, .timeout_ms = 5000 };
	struct nproxy_net *net = NULL;
	enum nproxy_status st;

	set_provider_env(job->provider, "local,prov_key");
	st = nproxy_net_open(&o, &net);
	if (st == NPROXY_INVALID)
		return 0;
	fprintf(stderr, "NPROXY_NET_MR_MODE=local,prov_key: open gave %s\n", nproxy_status_str(st));
	nproxy_net_close(net);
	return 1;
}

TEST(mode_only_the_provider_sets_is_refused)
{
	run_single(_metadata, "udp;ofi_rxd", bad_mode_rank);
}

TEST_HARNESS_MAIN
