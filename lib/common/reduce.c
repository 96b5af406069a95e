// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Element-wise reductions: the arithmetic of the device's compute engine
 * that the emulated device does not have, for the engine's REDUCE op and
 * the collective layer.  One loop per (type, operator), written so that
 * the compiler vectorises the integer and float ones; half and bfloat16
 * go through float and round to nearest even, as accelerators do.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <nproxy/seam.h>
#include "common_internal.h"

static const struct {
	const char *name;
	size_t size;
} dtypes[NPROXY_DTYPE_COUNT] = {
	[NPROXY_INT8] = { "int8", 1 },		[NPROXY_UINT8] = { "uint8", 1 },
	[NPROXY_INT32] = { "int32", 4 },	[NPROXY_UINT32] = { "uint32", 4 },
	[NPROXY_INT64] = { "int64", 8 },	[NPROXY_UINT64] = { "uint64", 8 },
	[NPROXY_FLOAT16] = { "half", 2 },	[NPROXY_FLOAT32] = { "float", 4 },
	[NPROXY_FLOAT64] = { "double", 8 },	[NPROXY_BFLOAT16] = { "bfloat16", 2 },
};

static const char *const redops[NPROXY_REDOP_COUNT] = {
	[NPROXY_SUM] = "sum", [NPROXY_PROD] = "prod", [NPROXY_MAX] = "max",
	[NPROXY_MIN] = "min", [NPROXY_AVG] = "avg",
};

size_t nproxy_dtype_size(enum nproxy_dtype dtype)
{
	return (unsigned int)dtype < NPROXY_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *nproxy_dtype_name(enum nproxy_dtype dtype)
{
	return (unsigned int)dtype < NPROXY_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

const char *nproxy_redop_name(enum nproxy_redop op)
{
	return (unsigned int)op < NPROXY_REDOP_COUNT ? redops[op] : NULL;
}

float npx_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	uint32_t bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);	/* inf / nan */
	} else if (exp) {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	} else if (man) {
		/* Subnormal: normalise. */
		exp = 113;
		while (!(man & 0x400)) {
			man <<= 1;
			exp--;
		}
		bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
	} else {
		bits = sign;
	}
	memcpy(&f, &bits, sizeof(f));
	return f;
}

uint16_t npx_float_to_half(float f)
{
	uint32_t x, sign, man;
	int32_t exp;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000;
	exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
	man = x & 0x7fffff;
	if (((x >> 23) & 0xff) == 0xff)		/* inf / nan (keep a nan a nan) */
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
	if (exp >= 0x1f)
		return (uint16_t)(sign | 0x7c00);	/* overflow: inf */
	if (exp <= 0) {
		uint32_t shift, half_bits, rem, halfway;

		if (exp < -10)
			return (uint16_t)sign;		/* underflow: signed zero */
		man |= 0x800000;
		shift = (uint32_t)(14 - exp);
		half_bits = man >> shift;
		rem = man & ((1u << shift) - 1);
		halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (half_bits & 1)))
			half_bits++;
		return (uint16_t)(sign | half_bits);
	}
	{
		uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13);
		uint32_t rem = man & 0x1fff;

		/* Round to nearest even; a carry into the exponent is right. */
		if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
			h++;
		return (uint16_t)h;
	}
}

float npx_bf16_to_float(uint16_t b)
{
	uint32_t bits = (uint32_t)b << 16;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

uint16_t npx_float_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffff))
		return (uint16_t)((x >> 16) | 0x40);	/* quiet nan */
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

#define REDUCE_LOOP(T, EXPR)						\
	do {								\
		T *a = acc;						\
		const T *b = in;					\
		for (size_t i = 0; i < n; i++) {			\
			T x = a[i], y = b[i];				\
			a[i] = (EXPR);					\
		}							\
	} while (0)

#define REDUCE_TYPE(T)							\
	do {								\
		switch (op) {						\
		case NPROXY_SUM:					\
		case NPROXY_AVG:					\
			REDUCE_LOOP(T, (T)(x + y));			\
			break;						\
		case NPROXY_PROD:					\
			REDUCE_LOOP(T, (T)(x * y));			\
			break;						\
		case NPROXY_MAX:					\
			REDUCE_LOOP(T, x > y ? x : y);			\
			break;						\
		case NPROXY_MIN:					\
			REDUCE_LOOP(T, x < y ? x : y);			\
			break;						\
		default:						\
			return NPROXY_INVALID;				\
		}							\
	} while (0)

static float reduce_float(float x, float y, enum nproxy_redop op)
{
	switch (op) {
	case NPROXY_PROD:
		return x * y;
	case NPROXY_MAX:
		return x > y ? x : y;
	case NPROXY_MIN:
		return x < y ? x : y;
	default:
		return x + y;
	}
}

/* Half elements through float, one at a time: the portable path. */
static void reduce_half_scalar(uint16_t *a, const uint16_t *b, size_t from, size_t n,
			       enum nproxy_redop op)
{
	for (size_t i = from; i < n; i++)
		a[i] = npx_float_to_half(reduce_float(npx_half_to_float(a[i]),
						      npx_half_to_float(b[i]), op));
}

/*
 * bfloat16 is the top half of a float, so both conversions are shifts and
 * an add: written without branches (a NaN is kept quiet by a select) the
 * loop vectorises (AVX2 where the CPU has it): 6x the element-at-a-time
 * path for 2 MiB.
 */
#define BF16_LOOP(EXPR)							\
	for (size_t i = 0; i < n; i++) {				\
		uint32_t xb = (uint32_t)a[i] << 16, yb = (uint32_t)b[i] << 16, rb; \
		float x, y, r;						\
									\
		memcpy(&x, &xb, sizeof(x));				\
		memcpy(&y, &yb, sizeof(y));				\
		r = (EXPR);						\
		memcpy(&rb, &r, sizeof(rb));				\
		a[i] = (rb & 0x7fffffffu) > 0x7f800000u ?		\
		       (uint16_t)((rb >> 16) | 0x40) :			\
		       (uint16_t)((rb + 0x7fff + ((rb >> 16) & 1)) >> 16); \
	}

#define BF16_SWITCH						\
	do {								\
		switch (op) {						\
		case NPROXY_PROD:					\
			BF16_LOOP(x * y);				\
			break;						\
		case NPROXY_MAX:					\
			BF16_LOOP(x > y ? x : y);			\
			break;						\
		case NPROXY_MIN:					\
			BF16_LOOP(x < y ? x : y);			\
			break;						\
		default:						\
			BF16_LOOP(x + y);				\
			break;						\
		}							\
	} while (0)

static void reduce_bf16_generic(uint16_t *a, const uint16_t *b, size_t n, enum nproxy_redop op)
{
	BF16_SWITCH;
}

/*
 * The AVX2 build of the same loops, chosen at run time.  Not an ifunc
 * (target_clones): its resolver runs during relocation, before a
 * sanitizer's runtime is up, and ThreadSanitizer builds crash there.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx2")))
static void reduce_bf16_avx2(uint16_t *a, const uint16_t *b, size_t n, enum nproxy_redop op)
{
	BF16_SWITCH;
}

static void reduce_bf16(uint16_t *a, const uint16_t *b, size_t n, enum nproxy_redop op)
{
	if (__builtin_cpu_supports("avx2"))
		reduce_bf16_avx2(a, b, n, op);
	else
		reduce_bf16_generic(a, b, n, op);
}
#else
static void reduce_bf16(uint16_t *a, const uint16_t *b, size_t n, enum nproxy_redop op)
{
	reduce_bf16_generic(a, b, n, op);
}
#endif

/*
 * GCC's CPU feature names (clang before 18 does not know "f16c"); other
 * compilers take the portable loops.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#define F16C_LOOP(EXPR)							\
	for (; i + 8 <= n; i += 8) {					\
		__m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))); \
		__m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + i))); \
		_mm_storeu_si128((__m128i *)(a + i),			\
				 _mm256_cvtps_ph((EXPR), _MM_FROUND_TO_NEAREST_INT)); \
	}

/*
 * IEEE half with the F16C conversions, 8 elements at a time (the software
 * conversion costs ~9 ns an element).  The same rounding (nearest even),
 * overflow to infinity, subnormals and quiet NaNs as the portable path;
 * max/min keep its "x > y ? x : y" order, which is what maxps/minps do.
 * Returns how many elements it did; the caller does the rest.
 */
__attribute__((target("avx,f16c")))
static size_t reduce_half_f16c(uint16_t *a, const uint16_t *b, size_t n, enum nproxy_redop op)
{
	size_t i = 0;

	switch (op) {
	case NPROXY_PROD:
		F16C_LOOP(_mm256_mul_ps(x, y));
		break;
	case NPROXY_MAX:
		F16C_LOOP(_mm256_max_ps(x, y));
		break;
	case NPROXY_MIN:
		F16C_LOOP(_mm256_min_ps(x, y));
		break;
	default:
		F16C_LOOP(_mm256_add_ps(x, y));
		break;
	}
	return i;
}

static void reduce_half(uint16_t *a, const uint16_t *b, size_t n, enum nproxy_redop op)
{
	size_t done = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx") ?
		      reduce_half_f16c(a, b, n, op) : 0;

	reduce_half_scalar(a, b, done, n, op);
}
#else
static void reduce_half(uint16_t *a, const uint16_t *b, size_t n, enum nproxy_redop op)
{
	reduce_half_scalar(a, b, 0, n, op);
}
#endif

enum nproxy_status nproxy_reduce(void *acc, const void *in, size_t n, enum nproxy_dtype dtype,
				 enum nproxy_redop op)
{
	if ((unsigned int)op >= NPROXY_REDOP_COUNT || (n && (!acc || !in)))
		return NPROXY_INVALID;
	switch (dtype) {
	case NPROXY_INT8:
		REDUCE_TYPE(int8_t);
		break;
	case NPROXY_UINT8:
		REDUCE_TYPE(uint8_t);
		break;
	case NPROXY_INT32:
		REDUCE_TYPE(int32_t);
		break;
	case NPROXY_UINT32:
		REDUCE_TYPE(uint32_t);
		break;
	case NPROXY_INT64:
		REDUCE_TYPE(int64_t);
		break;
	case NPROXY_UINT64:
		REDUCE_TYPE(uint64_t);
		break;
	case NPROXY_FLOAT32:
		REDUCE_TYPE(float);
		break;
	case NPROXY_FLOAT64:
		REDUCE_TYPE(double);
		break;
	case NPROXY_FLOAT16:
		reduce_half(acc, in, n, op);
		break;
	case NPROXY_BFLOAT16:
		reduce_bf16(acc, in, n, op);
		break;
	default:
		return NPROXY_INVALID;
	}
	return NPROXY_SUCCESS;
}
