// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: the rows of a run.  A row is one (size, data type, op,
 * variant) to run warmup + timed iterations of; nproxy-run's own mode has
 * one type, one op and one variant, so its rows are its sizes.  nccl-tests
 * mode loops as nccl-tests does (its run() and TimeTest()): every type
 * (-d all), every op (-o all), every cycle (-N), every size, out-of-place
 * then in place.
 */
#include <stdio.h>
#include <string.h>
#include "run.h"

size_t run_record_size(const struct run_opts *o)
{
	size_t sz = sizeof(struct run_proc_record) +
		    (size_t)o->n_rows * o->iters * sizeof(double);

	return (sz + 63) & ~(size_t)63;
}

int run_rows_init(struct run_opts *o)
{
	uint64_t per_cycle = (uint64_t)o->n_dtypes * o->n_redops * o->n_sizes * o->variants;
	uint64_t room = RUN_MAX_LAT_SAMPLES / (o->iters ? o->iters : 1), rows;

	if (!per_cycle)
		return run_usage_error("nothing to run");
	room = room < RUN_MAX_ROWS ? room : RUN_MAX_ROWS;
	/* nccl-tests' -N 0 runs forever: here as many cycles as the record holds. */
	if (!o->cycles)
		o->cycles = per_cycle <= room ? (uint32_t)(room / per_cycle) : 1;
	rows = per_cycle * o->cycles;
	if (rows > RUN_MAX_ROWS)
		return run_usage_error("%llu result rows (cycles x types x ops x sizes x variants): at most %u",
				       (unsigned long long)rows, RUN_MAX_ROWS);
	/* Every timed op's latency is kept (for the median and p99). */
	if (rows * o->iters > RUN_MAX_LAT_SAMPLES)
		return run_usage_error("%llu result rows x %u timed iterations: a %.2f GB latency record per process, at most %.2f GB",
				       (unsigned long long)rows, o->iters,
				       rows * o->iters * sizeof(double) / 1e9,
				       RUN_MAX_LAT_SAMPLES * sizeof(double) / 1e9);
	o->n_rows = (uint32_t)rows;
	return 0;
}

void run_row_of(const struct run_opts *o, uint32_t i, struct run_row *r)
{
	uint32_t v = i % o->variants, s, cycle, op;

	i /= o->variants;
	s = i % o->n_sizes;
	i /= o->n_sizes;
	cycle = i % o->cycles;
	i /= o->cycles;
	op = i % o->n_redops;
	*r = (struct run_row){
		.bytes = o->sizes[s], .dtype = o->dtypes[i / o->n_redops], .redop = o->redops[op],
		.size_idx = s, .cycle = cycle,
		/* Own mode: allgather and allreduce in place, sendrecv apart (as always). */
		.in_place = o->variants == 2 ? v == 1 : o->coll != RUN_SENDRECV,
	};
	/* The library refuses a sendrecv whose buffers overlap. */
	r->skipped = r->in_place && o->coll == RUN_SENDRECV;
}

void run_row_count(const struct run_opts *o, const struct run_row *r, uint32_t world,
		   uint64_t *count, uint64_t *bytes)
{
	uint64_t esize = nproxy_dtype_size(r->dtype), c = r->bytes / esize;

	if (o->nccl.on) {
		/* nccl-tests: an allgather's part is a multiple of 16 bytes. */
		if (o->coll == RUN_ALLGATHER)
			c = (c / world) & ~(16 / esize - 1);
	} else if (o->coll == RUN_ALLGATHER) {
		c = c / world ? c / world : 1;
	} else if (o->coll == RUN_ALLREDUCE) {
		/* A whole part per rank, at least one element each. */
		c = c / world ? c / world * world : world;
	} else if (!c) {
		c = 1;
	}
	*count = c;
	*bytes = c * esize * (o->coll == RUN_ALLGATHER ? world : 1);
}

uint32_t run_sizes_finished(const struct run_opts *o, struct run_proc_record **recs,
			    uint32_t n_recs)
{
	uint64_t per_size = (uint64_t)o->warmup + o->iters, done = UINT64_MAX;

	if (!n_recs || !per_size)
		return 0;
	for (uint32_t p = 0; p < n_recs; p++) {
		uint64_t d = __atomic_load_n(&recs[p]->progress, __ATOMIC_ACQUIRE);

		if (d < done)
			done = d;
	}
	done /= per_size;
	return done < o->n_rows ? (uint32_t)done : o->n_rows;
}

/* A type or op by the name nccl-tests and the library use ("float", "max"). */
bool run_dtype_parse(const char *name, enum nproxy_dtype *dt)
{
	for (int i = 0; i < NPROXY_DTYPE_COUNT; i++) {
		if (!strcmp(name, nproxy_dtype_name((enum nproxy_dtype)i))) {
			*dt = (enum nproxy_dtype)i;
			return true;
		}
	}
	return false;
}

bool run_redop_parse(const char *name, enum nproxy_redop *op)
{
	for (int i = 0; i < NPROXY_REDOP_COUNT; i++) {
		if (!strcmp(name, nproxy_redop_name((enum nproxy_redop)i))) {
			*op = (enum nproxy_redop)i;
			return true;
		}
	}
	return false;
}

/* "int8, uint8, ..., bfloat16" or "sum, prod, max, min, avg" for a message. */
void run_names(bool ops, char *buf, size_t len)
{
	int n = ops ? NPROXY_REDOP_COUNT : NPROXY_DTYPE_COUNT;
	size_t at = 0;

	buf[0] = 0;
	for (int i = 0; i < n && at < len; i++)
		at += snprintf(buf + at, len - at, "%s%s", i ? ", " : "",
			       ops ? nproxy_redop_name((enum nproxy_redop)i)
			       : nproxy_dtype_name((enum nproxy_dtype)i));
}
