// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy_coll_forget() gives the engine's registration of a buffer back,
 * one behaviour per test: after it the coll holds no reference to the
 * region its op registered (the engine has no such region left), and
 * forgetting another range keeps it.  Each rank is a forked process with
 * its own rank and coll.
 */
#include "kselftest_harness.h"
#include "coll_test.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT (3 * RT_WAIT_MS / 1000)

#define FG_COUNT	256u

struct fg_job {
	char id[64];
	bool forget_other;	/* forget a range next to the buffer instead of it */
};

/*
 * One allgather into buf, then the region id the coll registered for it
 * (registering the same range again returns it; the extra reference is
 * dropped at once), then forget; then one more deregistration of the id
 * shows whether the coll still held a reference.
 */
static int fg_rank(uint32_t i, uint32_t n, void *arg)
{
	const struct fg_job *job = arg;
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	size_t len = (size_t)FG_COUNT * n * 4;
	uint32_t *buf = calloc(FG_COUNT * n + 64, 4);
	struct nproxy_net *net;
	struct ct_rank r;
	enum nproxy_status st, want;
	uint32_t id;
	int rc;

	if (!buf)
		return 80;
	rc = ct_open(job->id, i, n, &r);
	if (rc)
		return rc;
	net = nproxy_rank_net(r.rank);
	d.kind = NPROXY_COLL_ALLGATHER;
	d.dtype = NPROXY_UINT32;
	d.count = FG_COUNT;
	d.recvbuf = buf;
	rc = ct_run(&r, i, &d);
	if (!rc && nproxy_net_mr_register(net, buf, len, &id) != NPROXY_SUCCESS)
		rc = 10;
	if (!rc && nproxy_net_mr_deregister(net, id) != NPROXY_SUCCESS)
		rc = 11;
	if (!rc) {
		if (job->forget_other)
			nproxy_coll_forget(r.coll, buf + FG_COUNT * n, 64 * 4);
		else
			nproxy_coll_forget(r.coll, buf, len);
		want = job->forget_other ? NPROXY_SUCCESS : NPROXY_INVALID_HANDLE;
		st = nproxy_net_mr_deregister(net, id);
		if (st != want) {
			fprintf(stderr, "# rank %u: deregister after forget: %s, want %s\n", i,
				nproxy_status_str(st), nproxy_status_str(want));
			rc = 12;
		}
		/* Give the coll back the reference this rank took from it. */
		if (!rc && job->forget_other && nproxy_net_mr_register(net, buf, len, &id))
			rc = 13;
	}
	ct_close(&r);
	free(buf);
	return rc;
}

static void fg_run(struct __test_metadata *_metadata, const char *what, bool forget_other)
{
	struct fg_job job = { .forget_other = forget_other };
	int codes[2];

	rt_job_id(job.id, sizeof(job.id), what);
	rt_run_forked(2, fg_rank, &job, 2 * RT_WAIT_MS, codes);
	EXPECT_EQ(0, codes[0]);
	EXPECT_EQ(0, codes[1]);
}

TEST(forget_drops_the_registration)
{
	fg_run(_metadata, "forget", false);
}

TEST(forgetting_another_range_keeps_it)
{
	fg_run(_metadata, "forget-other", true);
}

TEST_HARNESS_MAIN
