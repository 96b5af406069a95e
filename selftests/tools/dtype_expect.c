// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run's expected results (tools/run_dtype.c) against a computation
 * of our own, for 2, 3 (an odd count: avg does not divide evenly) and 64
 * ranks (the most): for every type, sum, prod, max and min are the exact
 * result of the inputs (integers wrapped to the type), avg the sum divided
 * by the rank count in the type (integers truncated) or within the type's
 * rounding of the true quotient.  And no op can stand in for another: on
 * each op's inputs every other op gives a result that fails the check in
 * at least one element (a library swapping two ops cannot pass).
 */
#include <math.h>
#include <string.h>
#include "kselftest_harness.h"
#include "run_rank.h"

#define MAX_W	64
#define N	96
#define ITER	7

static bool signed_int(enum nproxy_dtype dt)
{
	return dt == NPROXY_INT8 || dt == NPROXY_INT32 || dt == NPROXY_INT64;
}

static bool floating(enum nproxy_dtype dt)
{
	return dt == NPROXY_FLOAT16 || dt == NPROXY_FLOAT32 || dt == NPROXY_FLOAT64 ||
	       dt == NPROXY_BFLOAT16;
}

/* Element i as a double (floats) or as its bits, sign-extended (integers). */
static double as_double(const void *buf, size_t i, enum nproxy_dtype dt)
{
	uint16_t h;

	switch (dt) {
	case NPROXY_FLOAT32: return ((const float *)buf)[i];
	case NPROXY_FLOAT64: return ((const double *)buf)[i];
	case NPROXY_FLOAT16:
		h = ((const uint16_t *)buf)[i];
		return (h & 0x8000 ? -1 : 1) * ((h >> 10) & 0x1f
			? ldexp(1024 + (h & 0x3ff), ((h >> 10) & 0x1f) - 25)
			: ldexp(h & 0x3ff, -24));
	default: {
		uint32_t x = (uint32_t)((const uint16_t *)buf)[i] << 16;
		float f;

		memcpy(&f, &x, 4);
		return f;
	}
	}
}

static int64_t as_int(const void *buf, size_t i, enum nproxy_dtype dt)
{
	size_t es = nproxy_dtype_size(dt);
	uint64_t v = 0;

	memcpy(&v, (const char *)buf + i * es, es);
	if (signed_int(dt) && es < 8 && (v >> (es * 8 - 1)) & 1)
		v |= ~0ull << (es * 8);
	return (int64_t)v;
}

static uint64_t mask(enum nproxy_dtype dt)
{
	size_t es = nproxy_dtype_size(dt);

	return es == 8 ? ~0ull : (1ull << (es * 8)) - 1;
}

/* Our own integer result of element i over the W inputs. */
static uint64_t int_result(void *in[], uint32_t W, size_t i, enum nproxy_dtype dt,
			   enum nproxy_redop op)
{
	uint64_t acc = op == NPROXY_PROD ? 1 : 0;
	int64_t best = as_int(in[0], i, dt);

	for (uint32_t r = 0; r < W; r++) {
		int64_t v = as_int(in[r], i, dt);
		uint64_t uv = (uint64_t)v & mask(dt), ub = (uint64_t)best & mask(dt);
		bool lt = signed_int(dt) ? v < best : uv < ub, gt = signed_int(dt) ? v > best : uv > ub;

		if (op == NPROXY_PROD)
			acc *= (uint64_t)v;
		else
			acc += (uint64_t)v;
		if ((op == NPROXY_MIN && lt) || (op == NPROXY_MAX && gt))
			best = v;
	}
	if (op == NPROXY_MAX || op == NPROXY_MIN)
		return (uint64_t)best & mask(dt);
	if (op == NPROXY_AVG) {
		acc &= mask(dt);
		if (signed_int(dt)) {
			int64_t s = as_int(&acc, 0, dt);

			return (uint64_t)(s / W) & mask(dt);
		}
		return (acc / W) & mask(dt);
	}
	return acc & mask(dt);
}

static double float_result(void *in[], uint32_t W, size_t i, enum nproxy_dtype dt,
			   enum nproxy_redop op)
{
	double acc = op == NPROXY_PROD ? 1 : 0, best = as_double(in[0], i, dt);

	for (uint32_t r = 0; r < W; r++) {
		double v = as_double(in[r], i, dt);

		acc = op == NPROXY_PROD ? acc * v : acc + v;
		best = op == NPROXY_MAX ? fmax(best, v) : op == NPROXY_MIN ? fmin(best, v) : best;
	}
	if (op == NPROXY_MAX || op == NPROXY_MIN)
		return best;
	return op == NPROXY_AVG ? acc / W : acc;
}

static const double rel[NPROXY_DTYPE_COUNT] = {
	[NPROXY_FLOAT16] = 0x1p-11, [NPROXY_BFLOAT16] = 0x1p-8,
	[NPROXY_FLOAT32] = 0x1p-24, [NPROXY_FLOAT64] = 0x1p-53,
};
static const uint32_t worlds[] = { 2, 3, MAX_W };
static uint64_t bufs[MAX_W + 2][N];

/* One case: a world size, a type and an op, every rank's inputs for it
 * and the expected result. */
struct red_case {
	uint32_t W;
	enum nproxy_dtype dt;
	enum nproxy_redop op;
	void *in[MAX_W];
	void *want;
};

#define N_CASES (sizeof(worlds) / sizeof(worlds[0]) * NPROXY_DTYPE_COUNT * NPROXY_REDOP_COUNT)

/* Case c of N_CASES: its inputs in bufs[0..W), its expected result in bufs[W]. */
static void case_at(size_t c, struct red_case *k)
{
	k->op = (enum nproxy_redop)(c % NPROXY_REDOP_COUNT);
	c /= NPROXY_REDOP_COUNT;
	k->dt = (enum nproxy_dtype)(c % NPROXY_DTYPE_COUNT);
	k->W = worlds[c / NPROXY_DTYPE_COUNT];
	for (uint32_t r = 0; r < k->W; r++) {
		k->in[r] = bufs[r];
		run_dtype_fill(k->in[r], k->dt, k->op, r, k->W, 0, N, ITER);
	}
	run_dtype_expect_reduce(bufs[k->W], bufs[k->W + 1], k->dt, k->op, k->W, N, ITER);
	k->want = bufs[k->W];
}

TEST(expectations)
{
	for (size_t c = 0; c < N_CASES; c++) {
		struct red_case k;
		bool nonzero = false;

		case_at(c, &k);
		for (size_t i = 0; i < N; i++) {
			if (floating(k.dt)) {
				double w = float_result(k.in, k.W, i, k.dt, k.op);
				double got = as_double(k.want, i, k.dt);

				ASSERT_TRUE(fabs(got - w) <= rel[k.dt] * fabs(w))
					TH_LOG("W %u %s %s element %zu: %g, want %g", k.W,
					       nproxy_dtype_name(k.dt),
					       nproxy_redop_name(k.op), i, got, w);
				nonzero |= got != 0 && got != 1;
			} else {
				uint64_t w = int_result(k.in, k.W, i, k.dt, k.op);
				uint64_t got = (uint64_t)as_int(k.want, i, k.dt) & mask(k.dt);

				ASSERT_EQ(w, got)
					TH_LOG("W %u %s %s element %zu", k.W,
					       nproxy_dtype_name(k.dt),
					       nproxy_redop_name(k.op), i);
			}
		}
		/* Not a trivial check: avg gives fractions, prod 4..9. */
		if (floating(k.dt) && k.op != NPROXY_SUM)
			ASSERT_TRUE(nonzero)
				TH_LOG("W %u %s %s: only 0 and 1", k.W,
				       nproxy_dtype_name(k.dt), nproxy_redop_name(k.op));
	}
}

/* Whether `other` over op's inputs fails op's check in some element. */
static bool caught(void *in[], uint32_t W, const void *want, enum nproxy_dtype dt,
		   enum nproxy_redop other)
{
	for (size_t i = 0; i < N; i++) {
		if (floating(dt)) {
			double w = as_double(want, i, dt), got = float_result(in, W, i, dt, other);

			/* Beyond the avg tolerance: even the loosest check fails. */
			if (!(fabs(got - w) <= 2 * rel[dt] * fabs(w)))
				return true;
		} else if (int_result(in, W, i, dt, other) !=
			   ((uint64_t)as_int(want, i, dt) & mask(dt))) {
			return true;
		}
	}
	return false;
}

TEST(no_op_passes_for_another)
{
	for (size_t c = 0; c < N_CASES; c++) {
		struct red_case k;

		case_at(c, &k);
		for (int other = 0; other < NPROXY_REDOP_COUNT; other++) {
			if (other == (int)k.op)
				continue;
			ASSERT_TRUE(caught(k.in, k.W, k.want, k.dt, other))
				TH_LOG("W %u %s: %s passes for %s", k.W,
				       nproxy_dtype_name(k.dt), nproxy_redop_name(other),
				       nproxy_redop_name(k.op));
		}
	}
}

TEST_HARNESS_MAIN
