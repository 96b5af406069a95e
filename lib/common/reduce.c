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

static void reduce_half(uint16_t *a, const uint16_t *b, size_t n, enum nproxy_redop op, bool bf16)
{
	for (size_t i = 0; i < n; i++) {
		float x = bf16 ? npx_bf16_to_float(a[i]) : npx_half_to_float(a[i]);
		float y = bf16 ? npx_bf16_to_float(b[i]) : npx_half_to_float(b[i]);
		float r = reduce_float(x, y, op);

		a[i] = bf16 ? npx_float_to_bf16(r) : npx_float_to_half(r);
	}
}

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
		reduce_half(acc, in, n, op, false);
		break;
	case NPROXY_BFLOAT16:
		reduce_half(acc, in, n, op, true);
		break;
	default:
		return NPROXY_INVALID;
	}
	return NPROXY_SUCCESS;
}
