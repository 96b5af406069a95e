// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run's nccl-tests mode: the table as nccl-tests prints it (its
 * src/util.cu), column for column, so that scripts reading nccl-tests'
 * output read ours: one line per size, out-of-place then in place, the
 * "# Out of bounds values" and "# Avg bus bandwidth" footer.  Time is the
 * mean over the timed ops (nccl-tests times the loop and divides), then
 * per -a over the processes; bandwidths as nccl-tests computes them.
 */
#include <math.h>
#include <unistd.h>
#include "run.h"

/* A number in width columns, as precise as fits (nccl-tests' rule). */
static void fit_float(double v, int width, char *buf, size_t len)
{
	for (int prec = 2; prec >= 0; prec--) {
		int n = snprintf(buf, len, "%*.*f", width, prec, v);

		if (n >= 0 && n <= width)
			return;
	}
	snprintf(buf, len, "%*.*e", width, width >= 7 ? 1 : 0, v);
}

/* nccl-tests' getBw: algbw from the op's bytes, busbw by the ring factor. */
static double bus_factor(enum run_collective c, uint32_t world)
{
	if (c == RUN_ALLREDUCE)
		return 2.0 * (world - 1) / world;
	if (c == RUN_ALLGATHER)
		return (double)(world - 1) / world;
	return 1.0;
}

/* Mean op time of each process, combined by -a (0 rank 0, 1 avg, 2 min, 3 max). */
static double row_seconds(const struct run_opts *o, struct run_proc_record **recs,
			  uint32_t n_recs, uint32_t ri)
{
	double acc = 0;

	for (uint32_t p = 0; p < n_recs; p++) {
		const struct run_size_result *sr = &recs[p]->sizes[ri];
		double t = sr->iters ? sr->wall_s / sr->iters : NAN;

		if (!p || o->nccl.average == 1)
			acc = p ? acc + t : t;
		else if (o->nccl.average == 2 && t < acc)
			acc = t;
		else if (o->nccl.average == 3 && t > acc)
			acc = t;
	}
	return o->nccl.average == 1 ? acc / n_recs : acc;
}

/* One variant's columns: time, algbw, busbw, #wrong (or N/A without -c). */
static void print_variant(struct run_table *t, const struct run_opts *o, uint32_t world,
			  struct run_proc_record **recs, uint32_t n_recs, uint32_t ri)
{
	struct run_row r;
	char tm[32], alg[32], bus[32];
	double sec = row_seconds(o, recs, n_recs, ri), algbw, busbw;
	uint64_t wrong = 0;

	run_row_of(o, ri, &r);
	if (r.skipped) {
		/* sendrecv in place: nccl-tests runs it, the library refuses
		 * overlapping buffers; blank columns, not in the average. */
		printf("                                ");
		return;
	}
	algbw = recs[0]->sizes[ri].bytes / 1e9 / sec;
	busbw = algbw * bus_factor(o->coll, world);
	fit_float(sec * 1e6, 7, tm, sizeof(tm));
	fit_float(algbw, 6, alg, sizeof(alg));
	fit_float(busbw, 6, bus, sizeof(bus));
	for (uint32_t p = 0; p < n_recs; p++) {
		wrong += recs[p]->sizes[ri].wrong;
		t->wrong += recs[p]->sizes[ri].wrong != 0;	/* nccl-tests: per thread */
	}
	if (o->check)
		printf("  %7s  %6s  %6s  %6g", tm, alg, bus, (double)wrong);
	else
		printf("  %7s  %6s  %6s    N/A", tm, alg, bus);
	if (!isnan(busbw)) {
		t->busbw_sum += busbw;
		t->busbw_rows++;
	}
}

static void print_header(const struct run_opts *o, const struct run_place *place,
			 const struct run_proc_record *rec0)
{
	const struct run_nccl *n = &o->nccl;
	uint32_t world = place->n_procs * o->ranks_per_proc;

	printf("# nproxy-run %s in nccl-tests mode: %u ranks (%u procs x %u), provider %s, handshake %s, launcher %s\n",
	       NPROXY_VERSION, world, place->n_procs, o->ranks_per_proc,
	       rec0->provider[0] ? rec0->provider : "?", rec0->handshake[0] ? rec0->handshake : "?",
	       place->launcher);
	printf("# Collective test starting: %s\n", n->prog);
	printf("# nThread %u nGpus %u minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %u iters: %u agg iters: %u validation: %u graph: 0 unalign: 0\n",
	       n->threads, n->gpus, (unsigned long long)n->minb, (unsigned long long)n->maxb,
	       (unsigned long long)(n->stepf > 1 ? n->stepf : n->stepb),
	       n->stepf > 1 ? "factor" : "bytes", o->warmup, n->iters, n->agg_iters, n->check);
	printf("#\n");
	printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
	       "", "", "", "", "");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
	       "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
	       "busbw", "#wrong", 0, "");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
	       "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
	       "", 0, "");
}

void run_nccl_stream(struct run_table *t, const struct run_opts *o, const struct run_place *place,
		     struct run_proc_record **recs, uint32_t n_recs)
{
	uint32_t world = place->n_procs * o->ranks_per_proc;
	uint32_t lines = run_sizes_finished(o, recs, n_recs) / o->variants;

	if (t->lines >= lines)
		return;
	if (!t->lines)
		print_header(o, place, recs[0]);
	for (; t->lines < lines; t->lines++) {
		uint32_t ri = t->lines * o->variants;
		struct run_row r;

		run_row_of(o, ri, &r);
		/* nccl-tests: the larger of send and receive bytes, the op's count, root -1. */
		printf("%12lu  %12lu  %8s  %6s  %6s", (unsigned long)recs[0]->sizes[ri].bytes,
		       (unsigned long)recs[0]->sizes[ri].count, nproxy_dtype_name(r.dtype),
		       o->coll == RUN_ALLGATHER ? "none" : nproxy_redop_name(r.redop), "    -1");
		for (uint32_t v = 0; v < o->variants; v++)
			print_variant(t, o, world, recs, n_recs, ri + v);
		printf("\n");
		t->rows_printed += o->variants;
	}
	fflush(stdout);
}

void run_nccl_footer(struct run_table *t, const struct run_opts *o, int exit_code,
		     const char *error)
{
	double avg = t->busbw_rows ? t->busbw_sum / t->busbw_rows : 0;

	if (exit_code) {
		printf("# nproxy-run: %s stopped (exit %d) after %u of %u lines%s%s\n", o->nccl.prog,
		       exit_code, t->lines, o->n_rows / o->variants, error && *error ? ": " : "",
		       error ? error : "");
	}
	printf("# %-20s : %u %s\n", "Out of bounds values", t->wrong, t->wrong ? "FAILED" : "OK");
	printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg, "");
	printf("#\n");
	printf("# Collective test concluded: %s\n", o->nccl.prog);
	fflush(stdout);
}
