// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy_reduce(): every (type, operator) against an oracle the library
 * does not share.  Half is checked against the compiler's _Float16 (libgcc's
 * IEEE conversions) for every one of the 65536 values of the accumulator;
 * bfloat16 against a rounding that picks the nearer of the two candidates
 * in double.  Lengths are not multiples of the vector width, so both the
 * vector loops and their tails run, and acc == in (x op x) is allowed.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kselftest_harness.h"
#include <nproxy/seam.h>
#include "common/common_internal.h"

static const enum nproxy_redop all_ops[] = { NPROXY_SUM, NPROXY_PROD, NPROXY_MAX, NPROXY_MIN,
					     NPROXY_AVG };

static float oracle_op(float x, float y, enum nproxy_redop op)
{
	switch (op) {
	case NPROXY_PROD: return x * y;
	case NPROXY_MAX: return x > y ? x : y;
	case NPROXY_MIN: return x < y ? x : y;
	default: return x + y;		/* SUM, and AVG before its division */
	}
}

static uint16_t f16_bits(_Float16 h)
{
	uint16_t b;

	memcpy(&b, &h, sizeof(b));
	return b;
}

static _Float16 f16_of(uint16_t b)
{
	_Float16 h;

	memcpy(&h, &b, sizeof(h));
	return h;
}

static bool f16_is_nan(uint16_t b)
{
	return (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
}

/*
 * Every 16-bit accumulator value (n of them, wrapping) reduced with each of
 * ins under every operator; wrong(x, y, op, got, &want) says whether the
 * result got is wrong (want: what it should be).
 */
typedef bool (*wrong_fn)(uint16_t x, uint16_t y, enum nproxy_redop op, uint16_t got,
			 uint16_t *want);

static unsigned int check_16bit(struct __test_metadata *_metadata, enum nproxy_dtype dt,
				const uint16_t *ins, size_t n_ins, size_t n, wrong_fn wrong)
{
	uint16_t *acc = malloc(n * 2), *in = malloc(n * 2), want;
	unsigned int bad = 0;

	ASSERT_TRUE(acc && in);
	for (size_t k = 0; k < n_ins; k++) {
		for (size_t o = 0; o < sizeof(all_ops) / sizeof(all_ops[0]); o++) {
			for (size_t i = 0; i < n; i++) {
				acc[i] = (uint16_t)i;
				in[i] = ins[k];
			}
			ASSERT_EQ(NPROXY_SUCCESS, nproxy_reduce(acc, in, n, dt, all_ops[o]));
			for (size_t i = 0; i < n; i++) {
				if (wrong((uint16_t)i, ins[k], all_ops[o], acc[i], &want) && bad++ < 5)
					TH_LOG("%s %s: 0x%04zx op 0x%04x = 0x%04x, want 0x%04x",
					       nproxy_dtype_name(dt), nproxy_redop_name(all_ops[o]),
					       i & 0xffff, ins[k], acc[i], want);
			}
		}
	}
	free(acc);
	free(in);
	return bad;
}

static bool half_wrong(uint16_t x, uint16_t y, enum nproxy_redop op, uint16_t got, uint16_t *want)
{
	*want = f16_bits((_Float16)oracle_op((float)f16_of(x), (float)f16_of(y), op));
	return f16_is_nan(*want) ? !f16_is_nan(got) : got != *want;
}

/* Accumulators: every half value; inputs: the awkward ones. */
TEST(half_matches_ieee_for_every_value)
{
	static const uint16_t ins[] = { 0x0000, 0x8000, 0x3c00, 0xbc00, 0x0001, 0x03ff, 0x0400,
					0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x3555, 0x4248 };

	/* n not a multiple of 8: the tail too */
	EXPECT_EQ(0, check_16bit(_metadata, NPROXY_FLOAT16, ins, sizeof(ins) / sizeof(ins[0]),
				 65536 + 5, half_wrong));
}

static float bf16_to_float(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Round to nearest, ties to even, by comparing the two candidates. */
static uint16_t oracle_bf16(float f)
{
	uint32_t u;
	uint16_t lo, hi;
	double dlo, dhi, d = f;

	memcpy(&u, &f, sizeof(u));
	if (isnan(f))
		return 0x7fc0;
	lo = (uint16_t)(u >> 16);
	if ((u & 0xffff) == 0)
		return lo;
	hi = (uint16_t)(lo + 1);	/* away from zero; may become infinity */
	dlo = fabs(d - bf16_to_float(lo));
	/* Past the largest finite value, infinity stands where 2^128 would. */
	dhi = isinf(bf16_to_float(hi)) ? fabs(d - copysign(ldexp(1.0, 128), d)) :
	      fabs(d - bf16_to_float(hi));
	if (dlo != dhi)
		return dlo < dhi ? lo : hi;
	return (lo & 1) ? hi : lo;
}

static bool bf16_wrong(uint16_t x, uint16_t y, enum nproxy_redop op, uint16_t got, uint16_t *want)
{
	float r = oracle_op(bf16_to_float(x), bf16_to_float(y), op);

	*want = oracle_bf16(r);
	return !(isnan(r) && isnan(bf16_to_float(got))) && got != *want;
}

TEST(bfloat16_rounds_to_nearest_even)
{
	static const uint16_t ins[] = { 0x0000, 0x3f80, 0xbf80, 0x3f81, 0x0001, 0x7f7f, 0x7f80,
					0xff80, 0x7fc0, 0x4049, 0x3c00 };

	EXPECT_EQ(0, check_16bit(_metadata, NPROXY_BFLOAT16, ins, sizeof(ins) / sizeof(ins[0]),
				 65536 + 7, bf16_wrong));
}

/* The integer and float types: C's arithmetic in the type (wrapping). */
#define CHECK_TYPE(T, DT)							\
	do {									\
		T a[37], b[37], want[37];					\
		for (size_t o = 0; o < sizeof(all_ops) / sizeof(all_ops[0]); o++) { \
			for (size_t i = 0; i < 37; i++) {			\
				a[i] = (T)(i * 37 + 100);			\
				b[i] = (T)(i % 3 ? (T)(i * 11) : (T)-(T)(i + 1)); \
				want[i] = (T)oracle_##T(a[i], b[i], all_ops[o]); \
			}							\
			ASSERT_EQ(NPROXY_SUCCESS, nproxy_reduce(a, b, 37, DT, all_ops[o])); \
			EXPECT_EQ(0, memcmp(a, want, sizeof(a))) TH_LOG("%s %s", \
				nproxy_dtype_name(DT), nproxy_redop_name(all_ops[o])); \
		}							\
	} while (0)

#define ORACLE(T)								\
	static T oracle_##T(T x, T y, enum nproxy_redop op)		\
	{									\
		switch (op) {							\
		case NPROXY_PROD: return (T)(x * y);				\
		case NPROXY_MAX: return x > y ? x : y;				\
		case NPROXY_MIN: return x < y ? x : y;				\
		default: return (T)(x + y);					\
		}								\
	}
ORACLE(int8_t)
ORACLE(uint8_t)
ORACLE(int32_t)
ORACLE(uint32_t)
ORACLE(int64_t)
ORACLE(uint64_t)
ORACLE(float)
ORACLE(double)

/*
 * The portable conversions the vector paths fall back to (a CPU without
 * F16C or AVX2 runs only these; a CPU with them only their tails): every
 * half value out, and a million float bit patterns plus the edges in, for
 * half and for bfloat16.
 */
static const uint32_t edge_floats[] = {
	0x00000000, 0x80000000, 0x00000001, 0x007fffff, 0x00800000, 0x33000000, 0x33000001,
	0x387fc000, 0x38800000, 0x477fe000, 0x477fefff, 0x477ff000, 0x7f7fffff, 0x7f800000,
	0xff800000, 0x7fc00000, 0x7f800001, 0x3f808000, 0x3f818000, 0x3f7fffff,
};

static float float_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t next_pattern(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

TEST(portable_conversions_match_the_oracles)
{
	unsigned int bad = 0;
	uint32_t x = 2463534242u;

	for (uint32_t h = 0; h < 65536; h++) {
		float got = npx_half_to_float((uint16_t)h), want = (float)f16_of((uint16_t)h);

		if (isnan(want) ? !isnan(got) : memcmp(&got, &want, sizeof(got)))
			if (bad++ < 5)
				TH_LOG("half 0x%04x -> %a, want %a", h, got, want);
	}
	for (uint32_t i = 0; i < 1000000 + sizeof(edge_floats) / sizeof(edge_floats[0]); i++) {
		uint32_t u = i < sizeof(edge_floats) / sizeof(edge_floats[0]) ? edge_floats[i] :
			     next_pattern(&x);
		float f = float_of(u);
		uint16_t h = npx_float_to_half(f), hw = f16_bits((_Float16)f);
		uint16_t b = npx_float_to_bf16(f), bw = oracle_bf16(f);

		if (isnan(f) ? !f16_is_nan(h) : h != hw)
			if (bad++ < 10)
				TH_LOG("float 0x%08x -> half 0x%04x, want 0x%04x", u, h, hw);
		if (isnan(f) ? !isnan(bf16_to_float(b)) : b != bw)
			if (bad++ < 10)
				TH_LOG("float 0x%08x -> bfloat16 0x%04x, want 0x%04x", u, b, bw);
	}
	EXPECT_EQ(0, bad);
}

TEST(integer_and_float_types_compute_in_the_type)
{
	CHECK_TYPE(int8_t, NPROXY_INT8);
	CHECK_TYPE(uint8_t, NPROXY_UINT8);
	CHECK_TYPE(int32_t, NPROXY_INT32);
	CHECK_TYPE(uint32_t, NPROXY_UINT32);
	CHECK_TYPE(int64_t, NPROXY_INT64);
	CHECK_TYPE(uint64_t, NPROXY_UINT64);
	CHECK_TYPE(float, NPROXY_FLOAT32);
	CHECK_TYPE(double, NPROXY_FLOAT64);
}

/* acc and in may be the same buffer (x op x). */
TEST(the_accumulator_may_be_the_input)
{
	uint32_t v[19];
	uint16_t h[19];

	for (uint32_t i = 0; i < 19; i++) {
		v[i] = i;
		h[i] = f16_bits((_Float16)(float)i);
	}
	ASSERT_EQ(NPROXY_SUCCESS, nproxy_reduce(v, v, 19, NPROXY_UINT32, NPROXY_SUM));
	ASSERT_EQ(NPROXY_SUCCESS, nproxy_reduce(h, h, 19, NPROXY_FLOAT16, NPROXY_SUM));
	for (uint32_t i = 0; i < 19; i++) {
		EXPECT_EQ(2 * i, v[i]);
		EXPECT_EQ(f16_bits((_Float16)(float)(2 * i)), h[i]);
	}
}

/*
 * MAX and MIN of values that compare equal take the input's element, in
 * every float type as in half and bfloat16 (the oracle above): of -0 and
 * +0 the input's zero wins, whichever sign the accumulator had.
 */
#define CHECK_SIGNED_ZEROS(T, DT, OP)						\
	do {									\
		T acc[2] = { -0.0, 0.0 }, in[2] = { 0.0, -0.0 };		\
										\
		ASSERT_EQ(NPROXY_SUCCESS, nproxy_reduce(acc, in, 2, DT, OP));	\
		EXPECT_FALSE(signbit(acc[0])) TH_LOG("%s %s: -0 op +0 kept -0",	\
						     #T, nproxy_redop_name(OP));	\
		EXPECT_TRUE(signbit(acc[1])) TH_LOG("%s %s: +0 op -0 kept +0",	\
						    #T, nproxy_redop_name(OP));	\
	} while (0)

TEST(min_of_signed_zeros_takes_the_input)
{
	CHECK_SIGNED_ZEROS(float, NPROXY_FLOAT32, NPROXY_MIN);
	CHECK_SIGNED_ZEROS(double, NPROXY_FLOAT64, NPROXY_MIN);
}

TEST(max_of_signed_zeros_takes_the_input)
{
	CHECK_SIGNED_ZEROS(float, NPROXY_FLOAT32, NPROXY_MAX);
	CHECK_SIGNED_ZEROS(double, NPROXY_FLOAT64, NPROXY_MAX);
}

TEST(unknown_type_or_operator_is_invalid)
{
	uint32_t a = 1, b = 2;

	EXPECT_EQ(NPROXY_INVALID, nproxy_reduce(&a, &b, 1, NPROXY_DTYPE_COUNT, NPROXY_SUM));
	EXPECT_EQ(NPROXY_INVALID, nproxy_reduce(&a, &b, 1, NPROXY_UINT32, NPROXY_REDOP_COUNT));
	EXPECT_EQ(NPROXY_INVALID, nproxy_reduce(NULL, &b, 1, NPROXY_UINT32, NPROXY_SUM));
	EXPECT_EQ(NPROXY_SUCCESS, nproxy_reduce(NULL, NULL, 0, NPROXY_UINT32, NPROXY_SUM));
	EXPECT_EQ(1u, a);
	EXPECT_EQ(0u, nproxy_dtype_size(NPROXY_DTYPE_COUNT));
	EXPECT_EQ(2u, nproxy_dtype_size(NPROXY_BFLOAT16));
	EXPECT_STREQ("bfloat16", nproxy_dtype_name(NPROXY_BFLOAT16));
	EXPECT_STREQ("avg", nproxy_redop_name(NPROXY_AVG));
	EXPECT_EQ(NULL, nproxy_redop_name(NPROXY_REDOP_COUNT));
}

TEST_HARNESS_MAIN
