// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: typed inputs whose results are exactly checkable, for every
 * type and op of the library.  Each element comes from a hash of (rank,
 * element, iteration), so data from the wrong rank, place or iteration
 * fails; its range depends on the op so that no result rounds or
 * overflows in a way the check could not predict:
 *   moved (allgather, sendrecv)  any bits, checked byte for byte;
 *   sum, avg   0 or 1 per rank, except one rank per element (by element
 *              and iteration, special_rank()) giving a wider value, kept small enough that
 *              the sum of all ranks stays exact (int8 below 128, half
 *              within 2048, bfloat16 within 256): with 0/1 alone a
 *              truncated avg would equal min, and an op swapped for
 *              another would pass; unsigned integers any value (they
 *              wrap the same way in any order);
 *   prod       1, except two ranks per element (one with a single rank)
 *              giving 2 or 3: a product 4..9 (exact in int8, half and
 *              bfloat16) that no max, min or sum of the same inputs
 *              always equals;
 *   max, min   any value exact in the type.
 * The expected result is built with the library's public nproxy_reduce()
 * over every rank's input: with these inputs any order of reduction gives
 * the same bits, so the ring's order cannot differ from ours.  avg is the
 * library's definition (<nproxy/seam.h>, lib/coll): the sum divided by the
 * rank count in the type (integers truncate; half and bfloat16 through
 * float); floating types are checked within a relative tolerance, as
 * nccl-tests checks them, integers exactly.
 */
#include <math.h>
#include <string.h>
#include "run_rank.h"

enum { KIND_MOVED = -1 };	/* else an enum nproxy_redop */

static inline uint64_t mix(uint32_t r, uint64_t e, uint64_t iter)
{
	uint64_t x = (e + 1) * 0x9E3779B97F4A7C15ull ^ (r + 1ull) * 0xC2B2AE3D27D4EB4Full ^
		     (iter + 1) * 0x165667B19E3779F9ull;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	return x ^ (x >> 32);
}

/* float -> IEEE half, round to nearest even (normal and subnormal). */
static uint16_t to_half(float f)
{
	uint32_t x, sign, man;
	int exp;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (int)((x >> 23) & 0xff) - 112;
	man = x & 0x7fffff;
	if (((x >> 23) & 0xff) == 0xff)
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		uint32_t shift = (uint32_t)(14 - exp), h, rem;

		if (exp < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		h = man >> shift;
		rem = man & ((1u << shift) - 1);
		if (rem > (1u << (shift - 1)) || (rem == (1u << (shift - 1)) && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	x = sign | ((uint32_t)exp << 10) | (man >> 13);
	if ((man & 0x1fff) > 0x1000 || ((man & 0x1fff) == 0x1000 && (x & 1)))
		x++;
	return (uint16_t)x;
}

static float from_half(uint16_t h)
{
	int exp = (h >> 10) & 0x1f;
	float m = (float)(h & 0x3ff);
	float v = exp ? ldexpf(1024 + m, exp - 25) : ldexpf(m, -24);

	if (exp == 0x1f)
		v = (h & 0x3ff) ? NAN : INFINITY;
	return (h & 0x8000) ? -v : v;
}

static uint16_t to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static float from_bf16(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;

	memcpy(&f, &x, 4);
	return f;
}

/*
 * The wide value of a sum or avg: below the largest integer the type holds
 * exactly (the sum's bound) less the world-1 ones of the other ranks.
 */
static inline int64_t wide(enum nproxy_dtype dt, uint32_t world, uint64_t h)
{
	uint64_t exact;

	switch (dt) {
	case NPROXY_INT8: exact = 127; break;
	case NPROXY_FLOAT16: exact = 2048; break;
	case NPROXY_BFLOAT16: exact = 256; break;
	case NPROXY_INT32: return (int64_t)(h & 0x3fffffff);
	case NPROXY_FLOAT32: return (int64_t)(h & 0x7fffff);
	default: return (int64_t)(h & ((1ull << 52) - 1));	/* int64, double (exact below 2^53) */
	}
	return exact > world ? (int64_t)(h % (exact - world + 1)) : 0;
}

/*
 * The rank whose value at element e stands out (sum, avg: the wide one;
 * prod: the first factor): the same on every rank, changing with the
 * element and iteration.  A multiply and a shift (Lemire's range
 * reduction of a multiplicative hash), not a modulo: a 64-bit division
 * per element would slow a fill of millions of elements severalfold.
 */
static inline uint32_t special_rank(uint64_t e, uint64_t iter, uint32_t world)
{
	uint32_t g = (uint32_t)(((e + iter) * 0x9E3779B97F4A7C15ull) >> 32);

	return (uint32_t)(((uint64_t)g * world) >> 32);
}

/* Rank r's value at element e, as an integer every type holds exactly. */
static inline int64_t value(int kind, enum nproxy_dtype dt, uint32_t r, uint32_t world, uint64_t e,
			    uint64_t iter)
{
	uint64_t h = mix(r, e, iter);
	uint32_t first = special_rank(e, iter, world);
	bool unsig = dt == NPROXY_UINT8 || dt == NPROXY_UINT32 || dt == NPROXY_UINT64;

	switch (kind) {
	case NPROXY_SUM:
	case NPROXY_AVG:
		if (unsig)
			return (int64_t)h;
		return r == first ? wide(dt, world, h >> 1) : (int64_t)(h & 1);
	case NPROXY_PROD:
		return r == first || r == (first + 1 == world ? 0 : first + 1) ? 2 + (int64_t)(h & 1)
										: 1;
	default:	/* max, min, moved: any value the type holds exactly */
		switch (dt) {
		case NPROXY_FLOAT32: return (int32_t)h >> 8;
		case NPROXY_FLOAT64: return (int64_t)h >> 11;
		case NPROXY_FLOAT16: return (int64_t)(h & 4095) - 2048;
		case NPROXY_BFLOAT16: return (int64_t)(h & 511) - 256;
		default: return (int64_t)h;
		}
	}
}

#define FILL(T, ENC)								\
	do {									\
		T *p = buf;							\
		for (size_t i = 0; i < n; i++)					\
			p[i] = ENC(value(kind, dt, r, world, base + i, iter));	\
	} while (0)
#define AS(T) (T)
#define AS_HALF(v) to_half((float)(v))
#define AS_BF16(v) to_bf16((float)(v))

/*
 * Moved data is raw bits of the element's width (a float may be a NaN),
 * stored through the element's own type: a store of a known width per
 * element, where a memcpy of a run-time width was a call per element.
 */
#define FILL_MOVED(T)								\
	do {									\
		T *p = buf;							\
		for (size_t i = 0; i < n; i++)					\
			p[i] = (T)mix(r, base + i, iter);			\
	} while (0)

static void fill_moved(void *buf, size_t esize, uint32_t r, uint64_t base, size_t n,
		       uint64_t iter)
{
	switch (esize) {
	case 1: FILL_MOVED(uint8_t); break;
	case 2: FILL_MOVED(uint16_t); break;
	case 4: FILL_MOVED(uint32_t); break;
	default: FILL_MOVED(uint64_t); break;
	}
}

void run_dtype_fill(void *buf, enum nproxy_dtype dt, int kind, uint32_t r, uint32_t world,
		    uint64_t base, size_t n, uint64_t iter)
{
	if (kind == KIND_MOVED) {
		fill_moved(buf, nproxy_dtype_size(dt), r, base, n, iter);
		return;
	}
	switch (dt) {
	case NPROXY_INT8: FILL(int8_t, AS(int8_t)); break;
	case NPROXY_UINT8: FILL(uint8_t, AS(uint8_t)); break;
	case NPROXY_INT32: FILL(int32_t, AS(int32_t)); break;
	case NPROXY_UINT32: FILL(uint32_t, AS(uint32_t)); break;
	case NPROXY_INT64: FILL(int64_t, AS(int64_t)); break;
	case NPROXY_UINT64: FILL(uint64_t, AS(uint64_t)); break;
	case NPROXY_FLOAT32: FILL(float, AS(float)); break;
	case NPROXY_FLOAT64: FILL(double, AS(double)); break;
	case NPROXY_FLOAT16: FILL(uint16_t, AS_HALF); break;
	default: FILL(uint16_t, AS_BF16); break;
	}
}

/* avg: the library's sum / ranks, in the type. */
static void divide(void *buf, size_t n, enum nproxy_dtype dt, uint32_t by)
{
#define DIV(T) do { T *p = buf; for (size_t i = 0; i < n; i++) p[i] = (T)(p[i] / (T)by); } while (0)
	uint16_t *h = buf;

	switch (dt) {
	case NPROXY_INT8: DIV(int8_t); break;
	case NPROXY_UINT8: DIV(uint8_t); break;
	case NPROXY_INT32: DIV(int32_t); break;
	case NPROXY_UINT32: DIV(uint32_t); break;
	case NPROXY_INT64: DIV(int64_t); break;
	case NPROXY_UINT64: DIV(uint64_t); break;
	case NPROXY_FLOAT32: DIV(float); break;
	case NPROXY_FLOAT64: DIV(double); break;
	case NPROXY_FLOAT16:
		for (size_t i = 0; i < n; i++)
			h[i] = to_half(from_half(h[i]) / (float)by);
		break;
	default:
		for (size_t i = 0; i < n; i++)
			h[i] = to_bf16(from_bf16(h[i]) / (float)by);
		break;
	}
#undef DIV
}

void run_dtype_expect_reduce(void *want, void *tmp, enum nproxy_dtype dt, enum nproxy_redop op,
			     uint32_t world, size_t n, uint64_t iter)
{
	run_dtype_fill(want, dt, op, 0, world, 0, n, iter);
	for (uint32_t r = 1; r < world; r++) {
		run_dtype_fill(tmp, dt, op, r, world, 0, n, iter);
		nproxy_reduce(want, tmp, n, dt, op == NPROXY_AVG ? NPROXY_SUM : op);
	}
	if (op == NPROXY_AVG)
		divide(want, n, dt, world);
}

void run_dtype_expect_moved(void *want, enum nproxy_dtype dt, uint32_t r, uint64_t base, size_t n,
			    uint64_t iter)
{
	fill_moved(want, nproxy_dtype_size(dt), r, base, n, iter);
}

/* Bit-exact: one compare per element, a loop the compiler vectorizes. */
#define COUNT_EXACT(T)								\
	do {									\
		const T *a = got, *b = want;					\
		for (size_t i = 0; i < n; i++)					\
			bad += a[i] != b[i];					\
	} while (0)

static double decode(const void *p, size_t i, enum nproxy_dtype dt)
{
	switch (dt) {
	case NPROXY_FLOAT32: return ((const float *)p)[i];
	case NPROXY_FLOAT64: return ((const double *)p)[i];
	case NPROXY_FLOAT16: return from_half(((const uint16_t *)p)[i]);
	default: return from_bf16(((const uint16_t *)p)[i]);
	}
}

static bool is_float(enum nproxy_dtype dt)
{
	return dt == NPROXY_FLOAT16 || dt == NPROXY_FLOAT32 || dt == NPROXY_FLOAT64 ||
	       dt == NPROXY_BFLOAT16;
}

/* A float avg within the type's precision of the expected value. */
static uint64_t count_tolerant(const void *got, const void *want, size_t n, enum nproxy_dtype dt)
{
	double tol = dt == NPROXY_FLOAT16 ? 0x1p-10 : dt == NPROXY_BFLOAT16 ? 0x1p-7
		     : dt == NPROXY_FLOAT32 ? 0x1p-22 : 0x1p-51;
	uint64_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		double g = decode(got, i, dt), w = decode(want, i, dt);

		bad += !(fabs(g - w) <= tol * fabs(w));
	}
	return bad;
}

uint64_t run_dtype_count_wrong(const void *got, const void *want, size_t n, enum nproxy_dtype dt,
			       int kind)
{
	uint64_t bad = 0;

	if (kind == NPROXY_AVG && is_float(dt))
		return count_tolerant(got, want, n, dt);
	switch (nproxy_dtype_size(dt)) {
	case 1: COUNT_EXACT(uint8_t); break;
	case 2: COUNT_EXACT(uint16_t); break;
	case 4: COUNT_EXACT(uint32_t); break;
	default: COUNT_EXACT(uint64_t); break;
	}
	return bad;
}

/* The first element that differs (n when none). */
size_t run_dtype_first_wrong(const void *got, const void *want, size_t n, enum nproxy_dtype dt)
{
	size_t es = nproxy_dtype_size(dt);

	for (size_t i = 0; i < n; i++)
		if (memcmp((const char *)got + i * es, (const char *)want + i * es, es))
			return i;
	return n;
}
