// SPDX-License-Identifier: GPL-2.0
/*
 * The op verb's results: every built-in kind at 2 and 3 ranks (3: chunks
 * that do not divide evenly), in place and out of place, every data type
 * with every reduction op, empty ops, a one-rank job, buffers that change
 * between ops (the registration cache), and a custom op built by hand.
 * Each rank is a forked process with its own rank and coll.
 */
#include <inttypes.h>
#include <math.h>
#include <sys/mman.h>
#include "kselftest_harness.h"
#include "coll_test.h"
#include "coll/coll_internal.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT (3 * RT_WAIT_MS / 1000)

struct job {
	char id[64];
	uint32_t n;
	uint64_t count;
	bool out_of_place;
	bool large;		/* allreduce: megabytes, so only a few types */
};

static int run_job(const char *what, uint32_t n, nproxy_test_rank_fn fn, struct job *job)
{
	int codes[RT_MAX_RANKS];
	int bad = 0;

	rt_job_id(job->id, sizeof(job->id), what);
	job->n = n;
	rt_run_forked(n, fn, job, 2 * RT_WAIT_MS, codes);
	for (uint32_t i = 0; i < n; i++) {
		if (codes[i]) {
			fprintf(stderr, "# %s: rank %u exited %d\n", what, i, codes[i]);
			bad++;
		}
	}
	return bad;
}

/* A test's job: n ranks of fn on count elements; each rank must exit 0. */
static void job_ok(struct __test_metadata *_metadata, const char *what, uint32_t n,
		   nproxy_test_rank_fn fn, uint64_t count, bool out_of_place)
{
	struct job job = { .count = count, .out_of_place = out_of_place };

	ASSERT_EQ(0, run_job(what, n, fn, &job));
}

/* ---- allgather ---- */

static int allgather_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	uint64_t count = job->count;
	uint32_t *buf = calloc(count * n, 4), *mine = calloc(count, 4);
	struct ct_rank r;
	int rc;

	if (!buf || !mine)
		return 80;
	rc = ct_open(job->id, i, n, &r);
	if (rc)
		return rc;
	for (uint32_t iter = 0; iter < 3 && !rc; iter++) {
		memset(buf, 0xA5, count * n * 4);
		for (uint64_t e = 0; e < count; e++)
			(job->out_of_place ? mine : buf + i * count)[e] = rt_pattern(i + iter, e);
		d.kind = NPROXY_COLL_ALLGATHER;
		d.dtype = NPROXY_UINT32;
		d.count = count;
		d.sendbuf = job->out_of_place ? mine : NULL;
		d.recvbuf = buf;
		rc = ct_run(&r, i, &d);
		for (uint32_t p = 0; p < n && !rc; p++)
			for (uint64_t e = 0; e < count && !rc; e++)
				if (buf[p * count + e] != rt_pattern(p + iter, e)) {
					fprintf(stderr, "# rank %u: part %u word %" PRIu64 " wrong\n", i, p, e);
					rc = 2;
				}
		/* The op reads the input where it is and never writes it. */
		for (uint64_t e = 0; job->out_of_place && e < count && !rc; e++)
			if (mine[e] != rt_pattern(i + iter, e)) {
				fprintf(stderr, "# rank %u: input word %" PRIu64 " changed\n", i, e);
				rc = 3;
			}
	}
	ct_close(&r);
	free(buf);
	free(mine);
	return rc;
}

TEST(allgather_in_place_2_ranks)
{
	job_ok(_metadata, "ag2", 2, allgather_rank, 1024, false);
}

TEST(allgather_out_of_place_3_ranks_odd_count)
{
	job_ok(_metadata, "ag3", 3, allgather_rank, 1001, true);
}

/* Power-of-two rank counts, out of place (the COPY that places the input
 * runs beside the ring's sends) and in place. */
TEST(allgather_out_of_place_4_ranks)
{
	job_ok(_metadata, "ag4", 4, allgather_rank, 1001, true);
}

TEST(allgather_in_place_8_ranks)
{
	job_ok(_metadata, "ag8", 8, allgather_rank, 333, false);
}

/* An odd rank count past 8, odd count: the ring's step indices wrap. */
TEST(allgather_in_place_9_ranks_odd_count)
{
	job_ok(_metadata, "ag9", 9, allgather_rank, 77, false);
}

/*
 * An allgather of a power-of-two rank count of 4 or more is recursive
 * doubling: send k goes to rank i ^ 2^k and carries the 2^k parts of i's
 * aligned group, read from where they sit in the result; receive k takes
 * the partner's group from the same partner.  Other counts take the ring
 * (every send to the next rank, one part each).
 */
static int allgather_block_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	uint64_t part = job->count * 4;
	uint32_t *buf = calloc(job->count * n, 4);
	bool doubling = n >= 4 && !(n & (n - 1));
	uint32_t sends = 0, recvs = 0;
	const struct nproxy_fifo_set *b;
	struct ct_rank r;
	int rc;

	if (!buf)
		return 80;
	rc = ct_open(job->id, i, n, &r);
	if (rc)
		return rc;
	d.kind = NPROXY_COLL_ALLGATHER;
	d.dtype = NPROXY_UINT32;
	d.count = job->count;
	d.recvbuf = buf;
	rc = ct_run(&r, i, &d);
	b = &r.coll->block;
	for (uint32_t k = 0; k < b->n_ops && !rc; k++) {
		const struct nproxy_net_op *op = &b->ops[k];
		uint32_t step = op->kind == NPROXY_NET_OP_SEND ? sends : recvs;
		uint32_t dist = 1u << step, who = op->kind == NPROXY_NET_OP_SEND ? i : i ^ dist;
		uint64_t at = (uint64_t)(who & ~(dist - 1)) * part;

		if (op->kind != NPROXY_NET_OP_SEND && op->kind != NPROXY_NET_OP_RECV)
			continue;
		if (!doubling) {
			if (op->peer != (op->kind == NPROXY_NET_OP_SEND ? (i + 1) % n : (i + n - 1) % n) ||
			    op->len != part)
				rc = 2;
		} else if (op->peer != (i ^ dist) || op->len != dist * part ||
			   (op->kind == NPROXY_NET_OP_RECV && b->dst[k].offset != at) ||
			   (op->kind == NPROXY_NET_OP_SEND && step && b->src[k].offset != at)) {
			rc = 2;
		}
		if (rc)
			fprintf(stderr, "# rank %u: op %u (kind %u, step %u) peer %u len %u\n", i, k,
				op->kind, step, op->peer, op->len);
		sends += op->kind == NPROXY_NET_OP_SEND;
		recvs += op->kind == NPROXY_NET_OP_RECV;
	}
	if (!rc && (sends != (doubling ? (uint32_t)__builtin_ctz(n) : n - 1) || recvs != sends)) {
		fprintf(stderr, "# rank %u: %u sends, %u receives\n", i, sends, recvs);
		rc = 3;
	}
	ct_close(&r);
	free(buf);
	return rc;
}

/*
 * The device program of a built-in op (the proxy state page keeps the
 * last one): the trigger, then a wait on the receive semaphore, and for
 * an op that reduces, a wait on the reduction semaphore up to its last
 * reduction too: a device that reads the result when its program ends
 * must not read it before the sums are in.
 */
static int prog_of(struct ct_rank *r, enum nproxy_coll_kind kind, uint32_t n, uint32_t *buf,
		   uint32_t *steps, struct nproxy_prog_step *prog)
{
	struct nproxy_proxy_state *ps = nproxy_hs_proxy_state(nproxy_rank_hs(r->rank));
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	int rc;

	d.kind = kind;
	d.dtype = NPROXY_UINT32;
	d.redop = NPROXY_SUM;
	d.count = kind == NPROXY_COLL_ALLGATHER ? 64 : 64 * n;
	d.recvbuf = buf;
	rc = ct_run(r, 0, &d);
	if (rc || !ps)
		return rc ? rc : 90;
	*steps = __atomic_load_n(&ps->prog_n_steps, __ATOMIC_ACQUIRE);
	for (uint32_t k = 0; k < *steps && k < 4; k++)
		prog[k] = ps->prog[k];
	return 0;
}

static int prog_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	uint32_t *buf = calloc(64 * n, 4), steps = 0;
	struct nproxy_prog_step prog[4] = { { 0 } };
	uint64_t reduces;
	struct ct_rank r;
	int rc;

	if (!buf)
		return 80;
	rc = ct_open(job->id, i, n, &r);
	if (rc) {
		free(buf);
		return rc;
	}
	rc = prog_of(&r, NPROXY_COLL_ALLGATHER, n, buf, &steps, prog);
	if (!rc && (steps != 2 || prog[0].op != NPROXY_STEP_WRITE_TRIGGER ||
		    prog[1].op != NPROXY_STEP_WAIT_SEM || prog[1].index != COLL_SEM_RECV)) {
		fprintf(stderr, "# rank %u: allgather program of %u steps (%u, %u/%u)\n", i, steps,
			prog[0].op, prog[1].op, prog[1].index);
		rc = 2;
	}
	if (!rc)
		rc = prog_of(&r, NPROXY_COLL_ALLREDUCE, n, buf, &steps, prog);
	reduces = nproxy_sem_load(nproxy_hs_sem(nproxy_rank_hs(r.rank), COLL_SEM_REDUCE));
	if (!rc && (steps != 3 || prog[1].index != COLL_SEM_RECV ||
		    prog[2].op != NPROXY_STEP_WAIT_SEM || prog[2].index != COLL_SEM_REDUCE ||
		    prog[2].value != reduces)) {
		fprintf(stderr, "# rank %u: allreduce program of %u steps (last %u/%u up to %" PRIu64
			", reductions %" PRIu64 ")\n", i, steps, prog[2].op, prog[2].index,
			(uint64_t)prog[2].value, reduces);
		rc = 3;
	}
	ct_close(&r);
	free(buf);
	return rc;
}

TEST(a_reducing_ops_device_program_waits_for_its_reductions)
{
	job_ok(_metadata, "prog", 2, prog_rank, 0, false);
}

TEST(allgather_of_4_and_8_ranks_is_recursive_doubling_and_of_3_the_ring)
{
	job_ok(_metadata, "agb4", 4, allgather_block_rank, 100, false);
	job_ok(_metadata, "agb8", 8, allgather_block_rank, 10, false);
	job_ok(_metadata, "agb3", 3, allgather_block_rank, 100, false);
	job_ok(_metadata, "agb2", 2, allgather_block_rank, 100, false);
}

/* Four ranks swap half the result in their last step, 2 MiB. */
TEST(allgather_of_megabytes_4_ranks_out_of_place)
{
	struct job job = { .count = (1 << 20) / 4 + 3, .out_of_place = true };

	ASSERT_EQ(0, run_job("agp4", 4, allgather_rank, &job));
}

/* ---- allreduce: every type, every op ---- */

/* A small allreduce of a power-of-two rank count is recursive doubling:
 * round k sends the whole buffer to rank me ^ 2^k and reduces what comes
 * back, log2 n rounds, no ring chunks. */
static int doubling_block_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	uint32_t *buf = calloc(job->count, 4);
	uint32_t sends = 0, reduces = 0;
	const struct nproxy_fifo_set *b;
	struct ct_rank r;
	int rc;

	if (!buf)
		return 80;
	rc = ct_open(job->id, i, n, &r);
	if (rc)
		return rc;
	d.kind = NPROXY_COLL_ALLREDUCE;
	d.dtype = NPROXY_UINT32;
	d.redop = NPROXY_SUM;
	d.count = job->count;
	d.recvbuf = buf;
	rc = ct_run(&r, i, &d);
	b = &r.coll->block;
	for (uint32_t k = 0; k < b->n_ops && !rc; k++) {
		const struct nproxy_net_op *op = &b->ops[k];

		if (op->kind == NPROXY_NET_OP_SEND &&
		    (op->peer != (i ^ (1u << sends)) || op->len != job->count * 4))
			rc = 2;
		sends += op->kind == NPROXY_NET_OP_SEND;
		reduces += op->kind == NPROXY_NET_OP_REDUCE;
	}
	if (!rc && (sends != (uint32_t)__builtin_ctz(n) || reduces != sends)) {
		fprintf(stderr, "# rank %u: %u sends, %u reductions\n", i, sends, reduces);
		rc = 3;
	}
	ct_close(&r);
	free(buf);
	return rc;
}

TEST(allreduce_small_2_and_4_ranks_is_recursive_doubling)
{
	job_ok(_metadata, "ard2", 2, doubling_block_rank, 64, false);
	job_ok(_metadata, "ard4", 4, doubling_block_rank, 64, false);
}

static const enum nproxy_dtype all_types[] = {
	NPROXY_INT8, NPROXY_UINT8, NPROXY_INT32, NPROXY_UINT32, NPROXY_INT64,
	NPROXY_UINT64, NPROXY_FLOAT16, NPROXY_FLOAT32, NPROXY_FLOAT64, NPROXY_BFLOAT16,
};

static bool is_float(enum nproxy_dtype t)
{
	return t == NPROXY_FLOAT16 || t == NPROXY_FLOAT32 || t == NPROXY_FLOAT64 ||
	       t == NPROXY_BFLOAT16;
}

/* What element e must hold after the allreduce of ct_value over n ranks. */
static double expected(enum nproxy_redop op, enum nproxy_dtype t, uint32_t n, uint64_t e)
{
	double acc = ct_value(0, e, op);

	for (uint32_t r = 1; r < n; r++) {
		double v = ct_value(r, e, op);

		switch (op) {
		case NPROXY_PROD:
			acc *= v;
			break;
		case NPROXY_MAX:
			acc = v > acc ? v : acc;
			break;
		case NPROXY_MIN:
			acc = v < acc ? v : acc;
			break;
		default:
			acc += v;
			break;
		}
	}
	if (op == NPROXY_AVG)
		acc = is_float(t) ? acc / n : floor(acc / n);
	return acc;
}

static int allreduce_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	uint64_t count = job->count;
	void *buf = calloc(count, 8), *in = calloc(count, 8);
	struct ct_rank r;
	int rc;

	if (!buf || !in)
		return 80;
	rc = ct_open(job->id, i, n, &r);
	for (size_t ti = 0; !rc && ti < sizeof(all_types) / sizeof(all_types[0]); ti++) {
		enum nproxy_dtype t = all_types[ti];

		if (job->large && t != NPROXY_INT8 && t != NPROXY_FLOAT32)
			continue;
		for (uint32_t op = 0; !rc && op < NPROXY_REDOP_COUNT; op++) {
			if (job->large && op != NPROXY_SUM && op != NPROXY_MAX)
				continue;
			struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
			/* half and bfloat16 keep 3 significant digits: 0.5 % */
			double tol = t == NPROXY_FLOAT16 || t == NPROXY_BFLOAT16 ? 5e-3 : 1e-6;

			memset(buf, 0xA5, count * 8);
			for (uint64_t e = 0; e < count; e++)
				ct_set(job->out_of_place ? in : buf, t, e, ct_value(i, e, op));
			d.kind = NPROXY_COLL_ALLREDUCE;
			d.dtype = t;
			d.redop = op;
			d.count = count;
			d.sendbuf = job->out_of_place ? in : buf;
			d.recvbuf = buf;
			rc = ct_run(&r, i, &d);
			for (uint64_t e = 0; e < count && !rc; e++) {
				double want = expected((enum nproxy_redop)op, t, n, e);
				double got = ct_get(buf, t, e);

				if (fabs(got - want) > tol * fabs(want)) {
					fprintf(stderr, "# rank %u: %s %s element %" PRIu64 ": %g, want %g\n",
						i, nproxy_dtype_name(t),
						nproxy_redop_name((enum nproxy_redop)op), e, got, want);
					rc = 2;
				}
			}
			for (uint64_t e = 0; job->out_of_place && e < count && !rc; e++)
				if (ct_get(in, t, e) != (double)ct_value(i, e, op)) {
					fprintf(stderr, "# rank %u: %s input element %" PRIu64 " changed\n",
						i, nproxy_dtype_name(t), e);
					rc = 3;
				}
		}
	}
	if (!rc || rc < 90)
		ct_close(&r);
	free(buf);
	free(in);
	return rc;
}

TEST(allreduce_every_type_and_op_2_ranks)
{
	job_ok(_metadata, "ar2", 2, allreduce_rank, 256, false);
}

TEST(allreduce_every_type_and_op_3_ranks_out_of_place_odd_count)
{
	job_ok(_metadata, "ar3", 3, allreduce_rank, 301, true);
}

/* Four ranks: recursive doubling for small ops (float MAX and MIN: the ring). */
TEST(allreduce_every_type_and_op_4_ranks_out_of_place)
{
	job_ok(_metadata, "ar4", 4, allreduce_rank, 301, true);
}

TEST(allreduce_every_type_and_op_4_ranks_in_place)
{
	job_ok(_metadata, "ar4i", 4, allreduce_rank, 64, false);
}

/*
 * Every rank ends with the same bits, whichever algorithm ran: float sums
 * of values no order makes exact (recursive doubling: small ops; the ring:
 * over COLL_DOUBLING_MAX_BYTES), and MAX over -0 and +0, where the order
 * of the operands picks the sign.  Each rank copies its result into a
 * region shared with the test, which compares them.
 */
struct agree_job {
	struct job base;
	uint64_t count;
	enum nproxy_dtype dtype;
	enum nproxy_redop op;
	unsigned char *results;		/* n_ranks x count x 8, MAP_SHARED */
};

static int agree_rank(uint32_t i, uint32_t n, void *arg)
{
	struct agree_job *job = arg;
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	size_t es = nproxy_dtype_size(job->dtype), bytes = job->count * es;
	unsigned char *buf = malloc(bytes);
	struct ct_rank r;
	int rc;

	if (!buf)
		return 80;
	for (uint64_t e = 0; e < job->count; e++) {
		double v = job->op == NPROXY_MAX ? ((e + i) % 3 ? 0.0 : -0.0) :
			   1.0 / (double)(3 + e % 97) + 0.1 * (double)i;

		if (job->dtype == NPROXY_FLOAT32)
			((float *)buf)[e] = (float)v;
		else
			((double *)buf)[e] = v;
	}
	rc = ct_open(job->base.id, i, n, &r);
	if (rc)
		return rc;
	d.kind = NPROXY_COLL_ALLREDUCE;
	d.dtype = job->dtype;
	d.redop = job->op;
	d.count = job->count;
	d.recvbuf = buf;
	rc = ct_run(&r, i, &d);
	if (!rc)
		memcpy(job->results + (size_t)i * bytes, buf, bytes);
	ct_close(&r);
	free(buf);
	return rc;
}

static void agree(struct __test_metadata *_metadata, const char *what, enum nproxy_dtype t,
		  enum nproxy_redop op, uint64_t count)
{
	struct agree_job job = { .count = count, .dtype = t, .op = op };
	size_t bytes = count * nproxy_dtype_size(t);

	job.results = mmap(NULL, 4 * bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	ASSERT_NE(MAP_FAILED, job.results);
	memset(job.results, 0xA5, 4 * bytes);
	ASSERT_EQ(0, run_job(what, 4, agree_rank, &job.base));
	for (uint32_t k = 1; k < 4; k++) {
		if (memcmp(job.results, job.results + k * bytes, bytes))
			TH_LOG("rank %u's %s result differs from rank 0's", k, what);
		EXPECT_EQ(0, memcmp(job.results, job.results + k * bytes, bytes));
	}
	munmap(job.results, 4 * bytes);
}

TEST(allreduce_ranks_agree_bit_for_bit_4_ranks)
{
	agree(_metadata, "sum-f32-small", NPROXY_FLOAT32, NPROXY_SUM, 1000);
	agree(_metadata, "sum-f64-small", NPROXY_FLOAT64, NPROXY_SUM, 4096);
	agree(_metadata, "sum-f32-large", NPROXY_FLOAT32, NPROXY_SUM, 100000);
	agree(_metadata, "max-signed-zero", NPROXY_FLOAT32, NPROXY_MAX, 1000);
}

/*
 * Megabyte chunks (the engine's REDUCE of a whole chunk, and messages the
 * providers send in several protocol steps), an odd count so the last
 * chunk is short.
 */
TEST(allreduce_of_megabytes_3_ranks)
{
	struct job job = { .count = 3000001, .large = true };

	ASSERT_EQ(0, run_job("arl3", 3, allreduce_rank, &job));
}

/* Three ranks forward what they receive, 1.25 MiB a part. */
TEST(allgather_of_megabytes_3_ranks)
{
	struct job job = { .count = 5 * (256 << 10) / 4 + 7 };

	ASSERT_EQ(0, run_job("agp3", 3, allgather_rank, &job));
}

/* Fewer elements than ranks: some chunks are empty. */
TEST(allreduce_fewer_elements_than_ranks)
{
	job_ok(_metadata, "ar3s", 3, allreduce_rank, 2, false);
}

/* ---- sendrecv ---- */

static int sendrecv_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	uint32_t *out = calloc(job->count, 4), *in = calloc(job->count, 4);
	uint32_t prev = (i + n - 1) % n;
	struct ct_rank r;
	int rc;

	if (!out || !in)
		return 80;
	rc = ct_open(job->id, i, n, &r);
	if (rc)
		return rc;
	for (uint64_t e = 0; e < job->count; e++)
		out[e] = rt_pattern(i, e);
	d.kind = NPROXY_COLL_SENDRECV;
	d.dtype = NPROXY_UINT32;
	d.count = job->count;
	d.sendbuf = out;
	d.recvbuf = in;
	rc = ct_run(&r, i, &d);
	for (uint64_t e = 0; e < job->count && !rc; e++)
		if (in[e] != rt_pattern(prev, e))
			rc = 2;
	ct_close(&r);
	free(out);
	free(in);
	return rc;
}

TEST(sendrecv_passes_to_the_next_rank)
{
	job_ok(_metadata, "sr3", 3, sendrecv_rank, 4096, false);
}

/* ---- empty ops, one rank ---- */

static int empty_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	struct nproxy_coll_result res;
	uint32_t buf[4] = { 1, 2, 3, 4 }, src[4] = { 5, 6, 7, 8 };
	struct ct_rank r;
	int rc;

	rc = ct_open(job->id, i, n, &r);
	if (rc)
		return rc;
	d.kind = NPROXY_COLL_ALLREDUCE;
	d.dtype = NPROXY_UINT32;
	d.recvbuf = buf;
	/* count 0: succeeds at once and touches nothing. */
	if (nproxy_coll_run(r.coll, &d, &res) != NPROXY_SUCCESS || res.seq != 1 || buf[0] != 1)
		rc = 3;
	/* A one-rank allreduce is the input itself; out of place it is copied. */
	d.count = 4;
	d.sendbuf = src;
	if (!rc && n == 1 && (ct_run(&r, i, &d) || memcmp(buf, src, sizeof(buf))))
		rc = 4;
	if (!rc && n == 1 && (nproxy_coll_wait(r.coll, 0, NULL) != NPROXY_INVALID))
		rc = 5;	/* nothing in flight any more */
	ct_close(&r);
	return rc;
}

TEST(an_empty_op_completes_and_touches_nothing)
{
	job_ok(_metadata, "empty2", 2, empty_rank, 0, false);
}

TEST(a_one_rank_job_copies_the_input)
{
	job_ok(_metadata, "one", 1, empty_rank, 0, false);
}

/* ---- buffers that change between ops ---- */

/*
 * Buffers inside a region an earlier op registered: the coll reuses that
 * registration, so the op must address them at their offset in it, not
 * at its start.  Op 1 registers all of big; op 2 (allgather) and op 3
 * (allreduce), both out of place, use ranges that start inside it.
 */
static int inner_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	uint64_t count = job->count, words = 4 * count * n;
	uint32_t *big = calloc(words, 4), *out = big + 16, *in = big + 16 + count * n + 8;
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	struct ct_rank r;
	int rc;

	if (!big)
		return 80;
	rc = ct_open(job->id, i, n, &r);
	if (rc)
		return rc;
	d.kind = NPROXY_COLL_ALLGATHER;
	d.dtype = NPROXY_UINT32;
	d.count = 4 * count;
	d.recvbuf = big;
	rc = ct_run(&r, i, &d);
	for (uint64_t e = 0; e < count; e++)
		in[e] = rt_pattern(i, e);
	memset(out, 0xA5, count * n * 4);
	d.count = count;
	d.sendbuf = in;
	d.recvbuf = out;
	if (!rc)
		rc = ct_run(&r, i, &d);
	for (uint32_t p = 0; p < n && !rc; p++)
		for (uint64_t e = 0; e < count && !rc; e++)
			if (out[p * count + e] != rt_pattern(p, e)) {
				fprintf(stderr, "# rank %u: allgather part %u word %" PRIu64 " wrong\n",
					i, p, e);
				rc = 2;
			}
	for (uint64_t e = 0; e < count * n; e++)
		out[e] = 0xA5A5A5A5u;
	for (uint64_t e = 0; e < count; e++)
		in[e] = (uint32_t)(i + 1) * (uint32_t)(e + 1);
	d.kind = NPROXY_COLL_ALLREDUCE;
	d.redop = NPROXY_SUM;
	if (!rc)
		rc = ct_run(&r, i, &d);
	for (uint64_t e = 0; e < count && !rc; e++)
		if (out[e] != (uint32_t)(n * (n + 1) / 2) * (uint32_t)(e + 1)) {
			fprintf(stderr, "# rank %u: allreduce word %" PRIu64 " is %u\n", i, e, out[e]);
			rc = 3;
		}
	ct_close(&r);
	free(big);
	return rc;
}

TEST(buffers_inside_an_earlier_registration_3_ranks)
{
	job_ok(_metadata, "inner", 3, inner_rank, 1000, true);
}

static int churn_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	struct ct_rank r;
	int rc = ct_open(job->id, i, n, &r);

	/* More distinct buffers than the cache holds, freed and reallocated. */
	for (uint32_t iter = 0; iter < 3 * NPROXY_COLL_MR_CACHE && !rc; iter++) {
		struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
		uint64_t count = 64 + 32 * (iter % 5);
		uint32_t *buf = malloc(count * n * 4);

		if (!buf)
			return 80;
		for (uint64_t e = 0; e < count; e++)
			buf[i * count + e] = rt_pattern(i + iter, e);
		d.kind = NPROXY_COLL_ALLGATHER;
		d.dtype = NPROXY_UINT32;
		d.count = count;
		d.recvbuf = buf;
		rc = ct_run(&r, i, &d);
		for (uint32_t p = 0; p < n && !rc; p++)
			for (uint64_t e = 0; e < count && !rc; e++)
				if (buf[p * count + e] != rt_pattern(p + iter, e))
					rc = 2;
		nproxy_coll_forget(r.coll, buf, count * n * 4);
		free(buf);
	}
	ct_close(&r);
	return rc;
}

TEST(buffers_freed_and_reallocated_between_ops)
{
	job_ok(_metadata, "churn", 2, churn_rank, 0, false);
}

/* ---- a custom op: the caller's block and program ---- */

static int custom_rank(uint32_t i, uint32_t n, void *arg)
{
	struct job *job = arg;
	struct nproxy_coll_desc d = NPROXY_COLL_DESC_INIT;
	struct nproxy_cc_op cc = NPROXY_CC_OP_INIT;
	struct nproxy_net_op ops[2];
	struct nproxy_net_addr src, dst;
	struct nproxy_fifo_set block;
	struct nproxy_prog_step prog[2];
	uint32_t out = rt_pattern(i, 7), in = 0, mr_out, mr_in;
	struct nproxy_net *net;
	uint64_t base;
	struct ct_rank r;
	int rc = ct_open(job->id, i, n, &r);

	if (rc)
		return rc;
	net = nproxy_rank_net(r.rank);
	if (nproxy_net_mr_register(net, &out, 4, &mr_out) ||
	    nproxy_net_mr_register(net, &in, 4, &mr_in))
		return 81;
	base = nproxy_sem_load(nproxy_hs_sem(nproxy_rank_hs(r.rank), 1));
	memset(ops, 0, sizeof(ops));
	ops[0] = (struct nproxy_net_op){ .kind = NPROXY_NET_OP_SEND, .peer = (i + 1) % n, .len = 4 };
	ops[1] = (struct nproxy_net_op){ .kind = NPROXY_NET_OP_RECV, .peer = (i + n - 1) % n,
		.len = 4, .flags = NPROXY_NET_OP_F_COMPLETE, .post_sem = 1, .post_inc = 1 };
	src = (struct nproxy_net_addr){ .mr = mr_out };
	dst = (struct nproxy_net_addr){ .mr = mr_in };
	block = (struct nproxy_fifo_set){ .ops = ops, .n_ops = 2, .src = &src, .n_src = 1,
					  .dst = &dst, .n_dst = 1 };
	cc.streams_n = 1;
	cc.streams[0].blocks = &block;
	cc.streams[0].n_blocks = 1;
	prog[0] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WRITE_TRIGGER, .value = 1 };
	prog[1] = (struct nproxy_prog_step){ .op = NPROXY_STEP_WAIT_SEM, .index = 1,
		.value = base + 1, .timeout_ns = (uint64_t)RT_WAIT_MS * 1000000ull };
	d.kind = NPROXY_COLL_CUSTOM;
	d.cc = &cc;
	d.prog = prog;
	d.n_prog = 2;
	rc = ct_run(&r, i, &d);
	if (!rc && in != rt_pattern((i + n - 1) % n, 7))
		rc = 2;
	nproxy_net_mr_deregister(net, mr_out);
	nproxy_net_mr_deregister(net, mr_in);
	ct_close(&r);
	return rc;
}

TEST(a_custom_op_runs_the_callers_block_and_program)
{
	job_ok(_metadata, "custom", 2, custom_rank, 0, false);
}

TEST_HARNESS_MAIN
