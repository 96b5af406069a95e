// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run's expected results (tools/run_dtype.c) against a computation
 * of our own, for 3 ranks (an odd count: avg does not divide evenly, one
 * rank of three gives prod its factor): for every type, sum, prod, max and
 * min are the exact result of the inputs (integers wrapped to the type),
 * avg the sum divided by 3 in the type (integers truncated) or within the
 * type's rounding of the true quotient.
 */
#include <math.h>
#include <string.h>
#include "kselftest_harness.h"
#include "run_rank.h"

#define W	3
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
static uint64_t int_result(void *in[W], size_t i, enum nproxy_dtype dt, enum nproxy_redop op)
{
	uint64_t acc = op == NPROXY_PROD ? 1 : 0;
	int64_t best = as_int(in[0], i, dt);

	for (int r = 0; r < W; r++) {
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

static double float_result(void *in[W], size_t i, enum nproxy_dtype dt, enum nproxy_redop op)
{
	double acc = op == NPROXY_PROD ? 1 : 0, best = as_double(in[0], i, dt);

	for (int r = 0; r < W; r++) {
		double v = as_double(in[r], i, dt);

		acc = op == NPROXY_PROD ? acc * v : acc + v;
		best = op == NPROXY_MAX ? fmax(best, v) : op == NPROXY_MIN ? fmin(best, v) : best;
	}
	if (op == NPROXY_MAX || op == NPROXY_MIN)
		return best;
	return op == NPROXY_AVG ? acc / W : acc;
}

TEST(expectations_on_three_ranks)
{
	static const double rel[NPROXY_DTYPE_COUNT] = {
		[NPROXY_FLOAT16] = 0x1p-11, [NPROXY_BFLOAT16] = 0x1p-8,
		[NPROXY_FLOAT32] = 0x1p-24, [NPROXY_FLOAT64] = 0x1p-53,
	};
	static uint64_t bufs[W + 2][N];
	void *in[W] = { bufs[0], bufs[1], bufs[2] };

	for (int dt = 0; dt < NPROXY_DTYPE_COUNT; dt++) {
		for (int op = 0; op < NPROXY_REDOP_COUNT; op++) {
			bool nonzero = false;

			for (uint32_t r = 0; r < W; r++)
				run_dtype_fill(in[r], dt, op, r, W, 0, N, ITER);
			run_dtype_expect_reduce(bufs[W], bufs[W + 1], dt, op, W, N, ITER);
			for (size_t i = 0; i < N; i++) {
				if (floating(dt)) {
					double want = float_result(in, i, dt, op);
					double got = as_double(bufs[W], i, dt);

					ASSERT_TRUE(fabs(got - want) <= rel[dt] * fabs(want))
						TH_LOG("%s %s element %zu: %g, want %g",
						       nproxy_dtype_name(dt), nproxy_redop_name(op), i,
						       got, want);
					nonzero |= got != 0 && got != 1;
				} else {
					uint64_t want = int_result(in, i, dt, op);
					uint64_t got = (uint64_t)as_int(bufs[W], i, dt) & mask(dt);

					ASSERT_EQ(want, got)
						TH_LOG("%s %s element %zu", nproxy_dtype_name(dt),
						       nproxy_redop_name(op), i);
					nonzero |= got > 1;
				}
			}
			/* Not a trivial check: avg gives 1/3 and 2/3, prod 2 and 3. */
			if (floating(dt) && op != NPROXY_SUM)
				ASSERT_TRUE(nonzero) TH_LOG("%s %s: only 0 and 1", nproxy_dtype_name(dt),
							    nproxy_redop_name(op));
		}
	}
}

TEST_HARNESS_MAIN
