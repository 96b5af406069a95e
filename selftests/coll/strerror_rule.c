// SPDX-License-Identifier: GPL-2.0
/*
 * Every area's nproxy_<x>_strerror() follows the one rule of
 * Documentation/development.md ("Status and errors"), through the public
 * API: after a failure on an object its text names the object and says
 * why; a failure on another object, or on another thread, leaves it alone;
 * a thread that failed on nothing reads the object's last failure; a
 * failed open's text is this thread's nproxy_<x>_strerror(NULL), per area.
 * One lone rank (shm, memfd region) in one process; threads are ordered
 * by joins.
 */
#include "kselftest_harness.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <nproxy/bananaphone.h>
#include <nproxy/coll.h>
#include <nproxy/handshake.h>
#include <nproxy/log.h>
#include <nproxy/net.h>
#include <nproxy/proxy.h>
#include <nproxy/rank.h>

#define HAS(text, needle) (strstr((text), (needle)) != NULL)

static void quiet(enum nproxy_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

/* ---- a failed open in every area: strerror(NULL) ---- */

static void fail_hs_open(void)
{
	struct nproxy_hs_opts o = NPROXY_HS_OPTS_INIT;
	struct nproxy_hs *hs;

	o.n_streams = 0;
	nproxy_hs_open(&o, &hs);
}

static void fail_bp_open(void)
{
	struct nproxy_bp_opts o = NPROXY_BP_OPTS_INIT;
	struct nproxy_bp *bp;

	o.job_id = "no/slash";
	o.n_ranks = 1;
	nproxy_bp_open(&o, &bp);
}

static void fail_net_open(void)
{
	struct nproxy_net_opts o = { .size = sizeof(o) };
	struct nproxy_net *net;

	nproxy_net_open(&o, &net);	/* n_ranks 0 */
}

static void fail_rdzv_open(void)
{
	struct nproxy_rdzv_opts o = NPROXY_RDZV_OPTS_INIT;
	struct nproxy_rdzv *rz;

	o.n_ranks = 1;
	o.root = "no-port-here";
	nproxy_rdzv_open(&o, &rz);
}

static void fail_comm_open(void)
{
	struct nproxy_comm *c;

	nproxy_comm_open(NULL, &c);
}

static void fail_rank_open(void)
{
	struct nproxy_rank_opts o = { .size = sizeof(o) };
	struct nproxy_rank *r;

	nproxy_rank_open(&o, &r);	/* 0 ranks */
}

static void fail_coll_open(void)
{
	struct nproxy_coll *c;

	nproxy_coll_open(NULL, &c);
}

static const char *hs_null(void) { return nproxy_hs_strerror(NULL); }
static const char *bp_null(void) { return nproxy_bp_strerror(NULL); }
static const char *net_null(void) { return nproxy_net_strerror(NULL); }
static const char *rdzv_null(void) { return nproxy_rdzv_strerror(NULL); }
static const char *comm_null(void) { return nproxy_comm_strerror(NULL); }
static const char *rank_null(void) { return nproxy_rank_strerror(NULL); }
static const char *coll_null(void) { return nproxy_coll_strerror(NULL); }

static const struct area {
	const char *name;
	void (*fail_open)(void);
	const char *(*text)(void);
	const char *why;	/* what the text says */
} areas[] = {
	{ "handshake", fail_hs_open, hs_null, "n_streams 0" },
	{ "bananaphone", fail_bp_open, bp_null, "job id 'no/slash'" },
	{ "net", fail_net_open, net_null, "bad options (rank 0 of 0" },
	{ "rendezvous", fail_rdzv_open, rdzv_null, "\"no-port-here\" is not host:port" },
	{ "comm", fail_comm_open, comm_null, "nproxy_comm_open: invalid options" },
	{ "rank", fail_rank_open, rank_null, "rank 0 of 0 ranks" },
	{ "coll", fail_coll_open, coll_null, "coll: open: rank is NULL" },
};
#define N_AREAS (sizeof(areas) / sizeof(areas[0]))

struct thread_view {
	char open_text[N_AREAS][512];	/* strerror(NULL) per area, before failing */
};

static void *other_thread_fails_every_open(void *p)
{
	struct thread_view *v = p;

	for (size_t i = 0; i < N_AREAS; i++)
		snprintf(v->open_text[i], sizeof(v->open_text[i]), "%s", areas[i].text());
	/* Different failures of the same opens on this thread. */
	fail_rank_open();
	nproxy_coll_open(NULL, NULL);
	return NULL;
}

TEST(a_failed_open_is_this_threads_strerror_null_in_every_area)
{
	struct thread_view other;
	pthread_t t;

	nproxy_log_set_sink(quiet, NULL);
	for (size_t i = 0; i < N_AREAS; i++) {
		EXPECT_STREQ("", areas[i].text());
		areas[i].fail_open();
		EXPECT_TRUE(HAS(areas[i].text(), areas[i].why)) {
			TH_LOG("%s: strerror(NULL) = \"%s\" lacks \"%s\"", areas[i].name,
			       areas[i].text(), areas[i].why);
		}
	}
	ASSERT_EQ(0, pthread_create(&t, NULL, other_thread_fails_every_open, &other));
	pthread_join(t, NULL);
	for (size_t i = 0; i < N_AREAS; i++) {
		/* The other thread saw none of this thread's failed opens ... */
		EXPECT_STREQ("", other.open_text[i]) {
			TH_LOG("%s: another thread read \"%s\"", areas[i].name, other.open_text[i]);
		}
		/* ... and its own failures left this thread's texts alone. */
		EXPECT_TRUE(HAS(areas[i].text(), areas[i].why)) {
			TH_LOG("%s: now \"%s\"", areas[i].name, areas[i].text());
		}
	}
	nproxy_log_set_sink(NULL, NULL);
}

/* ---- a failure on each object ---- */

struct objects {
	struct nproxy_hs *hs;
	struct nproxy_bp *bp;
	struct nproxy_net *net;
	struct nproxy_rdzv *rz;
	struct nproxy_rank *rank;
	struct nproxy_coll *coll;
	char job[64];
};

FIXTURE(objects) {
	struct objects o;
};

FIXTURE_SETUP(objects)
{
	struct nproxy_hs_opts ho = NPROXY_HS_OPTS_INIT;
	struct nproxy_bp_opts bo = NPROXY_BP_OPTS_INIT;
	struct nproxy_net_opts no = { .size = sizeof(no), .n_ranks = 1, .provider = "shm" };
	struct nproxy_rdzv_opts ro = NPROXY_RDZV_OPTS_INIT;
	struct nproxy_rank_opts rk = { .size = sizeof(rk) };
	struct objects *o = &self->o;

	memset(o, 0, sizeof(*o));
	nproxy_log_set_sink(quiet, NULL);
	snprintf(o->job, sizeof(o->job), "strerror-rule-%d", (int)getpid());
	ho.backend = NPROXY_HS_MEMFD;
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_hs_open(&ho, &o->hs));
	bo.job_id = o->job;
	bo.n_ranks = 1;
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_bp_open(&bo, &o->bp));
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_net_open(&no, &o->net)) {
		TH_LOG("net: %s", nproxy_net_strerror(NULL));
	}
	ro.n_ranks = 1;
	ro.root = "127.0.0.1:1";	/* a lone root listens nowhere */
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_rdzv_open(&ro, &o->rz));
	rk.n_ranks = 1;
	rk.provider = "shm";
	rk.backend = NPROXY_HS_MEMFD;
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_rank_open(&rk, &o->rank)) {
		TH_LOG("rank: %s", nproxy_rank_strerror(NULL));
	}
	ASSERT_EQ((int)NPROXY_SUCCESS, (int)nproxy_coll_open(o->rank, &o->coll));
}

FIXTURE_TEARDOWN(objects)
{
	nproxy_coll_close(self->o.coll);
	nproxy_rank_close(self->o.rank);
	nproxy_rdzv_close(self->o.rz);
	nproxy_net_close(self->o.net);
	nproxy_bp_close(self->o.bp);
	nproxy_hs_close(self->o.hs);
	nproxy_log_set_sink(NULL, NULL);
}

/* One failure on each object, in this order. */
static void fail_every_object(struct objects *o, uint64_t ctx)
{
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	enum nproxy_status st;
	bool done;
	void *out;
	char blob[8] = "";
	uint32_t id;

	nproxy_hs_wait(o->hs, 0, NULL);
	nproxy_bp_allgather(o->bp, NULL, 0, NULL, NULL, NULL, 0);
	nproxy_net_mr_register(o->net, NULL, 0, &id);
	nproxy_rdzv_allgather(o->rz, blob, (size_t)1 << 21, &out, NULL, NULL);
	nproxy_check_status(nproxy_rank_comm(o->rank), ctx, NPROXY_TASK_NETWORK, &done, &st);
	d.kind = 99;
	nproxy_coll_start(o->coll, &d);
}

struct texts {
	char hs[512], bp[512], net[512], rz[512], comm[512], coll[512];
};

static void read_texts(struct objects *o, struct texts *t)
{
	snprintf(t->hs, sizeof(t->hs), "%s", nproxy_hs_strerror(o->hs));
	snprintf(t->bp, sizeof(t->bp), "%s", nproxy_bp_strerror(o->bp));
	snprintf(t->net, sizeof(t->net), "%s", nproxy_net_strerror(o->net));
	snprintf(t->rz, sizeof(t->rz), "%s", nproxy_rdzv_strerror(o->rz));
	snprintf(t->comm, sizeof(t->comm), "%s", nproxy_comm_strerror(nproxy_rank_comm(o->rank)));
	snprintf(t->coll, sizeof(t->coll), "%s", nproxy_coll_strerror(o->coll));
}

#define EXPECT_HAS(text, needle)						\
	EXPECT_TRUE(HAS((text), (needle))) {					\
		TH_LOG("\"%s\" lacks \"%s\"", (text), (needle));		\
	}

TEST_F(objects, each_objects_text_names_it_and_says_why)
{
	struct objects *o = &self->o;
	struct texts t;

	read_texts(o, &t);
	EXPECT_STREQ("", t.hs);
	EXPECT_STREQ("", t.bp);
	EXPECT_STREQ("", t.net);
	EXPECT_STREQ("", t.comm);
	EXPECT_STREQ("", t.coll);
	fail_every_object(o, 4242);
	/* Each after the failures on every other object: none clobbered another. */
	read_texts(o, &t);
	EXPECT_HAS(t.hs, "handshake region");
	EXPECT_HAS(t.hs, "no program submitted");
	EXPECT_HAS(t.bp, "rank 0: allgather: NULL argument");
	EXPECT_HAS(t.bp, o->job);
	EXPECT_HAS(t.net, "net rank 0: mr_register: empty buffer");
	EXPECT_HAS(t.rz, "rank 0: blob of 2097152 bytes is over");
	EXPECT_HAS(t.rz, "rendezvous 127.0.0.1:1");
	EXPECT_HAS(t.comm, "rank 0: no NETWORK task with ctx 4242");
	EXPECT_HAS(t.coll, "rank 0: ");
	EXPECT_HAS(t.coll, "99");
}

struct other_thread {
	struct objects *o;
	struct texts before;	/* read before failing: this thread failed on nothing */
	struct texts after;
};

static void *other_thread_fails_too(void *p)
{
	struct other_thread *a = p;

	read_texts(a->o, &a->before);
	fail_every_object(a->o, 999);
	read_texts(a->o, &a->after);
	return NULL;
}

TEST_F(objects, another_threads_failure_leaves_this_threads_text_alone)
{
	struct other_thread other = { .o = &self->o };
	const char *comm_text;
	struct texts t;
	pthread_t th;

	fail_every_object(&self->o, 4242);
	comm_text = nproxy_comm_strerror(nproxy_rank_comm(self->o.rank));
	ASSERT_EQ(0, pthread_create(&th, NULL, other_thread_fails_too, &other));
	pthread_join(th, NULL);
	/* A thread with no failure of its own reads each object's last. */
	EXPECT_HAS(other.before.comm, "ctx 4242");
	EXPECT_HAS(other.before.net, "mr_register: empty buffer");
	EXPECT_HAS(other.before.hs, "no program submitted");
	/* Its own failure is its text ... */
	EXPECT_HAS(other.after.comm, "ctx 999");
	/* ... and not this thread's: neither the string read before nor a new read. */
	EXPECT_HAS(comm_text, "ctx 4242");
	read_texts(&self->o, &t);
	EXPECT_HAS(t.comm, "ctx 4242");
	EXPECT_HAS(t.hs, "no program submitted");
	EXPECT_HAS(t.net, "mr_register: empty buffer");
}

TEST_HARNESS_MAIN
