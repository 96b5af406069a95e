// SPDX-License-Identifier: GPL-2.0
/* nproxy-run: progress bar, results table and JSON report. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "json_writer.h"
#include "run.h"

double run_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

size_t run_record_size(const struct run_opts *o)
{
	size_t sz = sizeof(struct run_proc_record) +
		    (size_t)o->n_sizes * o->iters * sizeof(double);

	return (sz + 63) & ~(size_t)63;
}

double run_busbw_factor(enum run_collective c, uint32_t world)
{
	switch (c) {
	case RUN_ALLGATHER: return (double)(world - 1) / world;
	case RUN_ALLREDUCE: return 2.0 * (world - 1) / world;
	case RUN_SENDRECV: return 1.0;
	}
	return 1.0;
}

/* ---- progress ---- */

void run_progress_init(struct run_progress *p, const struct run_opts *o, bool enabled, bool tty)
{
	memset(p, 0, sizeof(*p));
	p->enabled = enabled && !o->quiet && !o->json;
	p->tty = tty;
	p->start = run_now();
	p->per_size = o->warmup + o->iters;
	p->total = (uint64_t)o->n_sizes * p->per_size;
	p->o = o;
}

/*
 * Shown only once the run has taken a second: a bar on a terminal, else a
 * plain line per finished size (logs and pipes stay readable).
 */
void run_progress_update(struct run_progress *p, uint64_t done, const char *what)
{
	const int width = 30;
	double elapsed = run_now() - p->start;
	int fill;

	if (!p->enabled || elapsed < 1.0 || !p->total)
		return;
	if (!p->tty) {
		while (p->sizes_reported < p->o->n_sizes &&
		       done >= (p->sizes_reported + 1) * p->per_size) {
			fprintf(stderr, "nproxy-run: %s %llu B done (%u iterations), %.1f s\n",
				run_coll_name(p->o->coll),
				(unsigned long long)p->o->sizes[p->sizes_reported],
				p->o->iters, elapsed);
			p->sizes_reported++;
		}
		return;
	}
	if (elapsed - p->last_draw < 0.1)
		return;
	p->last_draw = elapsed;
	fill = (int)(done * width / p->total);
	fprintf(stderr, "\r[%.*s%*s] %3d%% %s ", fill,
		"==============================", width - fill, "",
		(int)(done * 100 / p->total), what);
	fflush(stderr);
	p->drawn = true;
}

void run_progress_finish(struct run_progress *p)
{
	if (p->drawn)
		fprintf(stderr, "\r\033[K");
	p->drawn = false;
}

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Quantile q of sorted v[n] (nearest rank). */
static double quantile(const double *v, uint32_t n, double q)
{
	uint32_t idx;

	if (!n)
		return NAN;
	idx = (uint32_t)ceil(q * n);
	if (idx)
		idx--;
	return v[idx < n ? idx : n - 1];
}

struct size_row {
	uint64_t bytes;
	uint32_t iters;
	double median_us, p99_us, min_us, max_us;
	double algbw, busbw;		/* GB/s (1e9 bytes/s) */
	uint32_t verify_errors;
	double cpu_s;			/* every process's CPU during the timed ops */
	double wall_s;			/* the slowest process's wall time of them */
};

/* An iteration's time is the slowest process's time for it. */
static void make_row(const struct run_opts *o, struct run_proc_record **recs, uint32_t n_recs,
		     uint32_t si, uint32_t world, struct size_row *row)
{
	double *lat = calloc(o->iters ? o->iters : 1, sizeof(double));
	uint32_t iters = o->iters;

	memset(row, 0, sizeof(*row));
	row->bytes = recs[0]->sizes[si].bytes;
	for (uint32_t p = 0; p < n_recs; p++) {
		if (recs[p]->sizes[si].iters < iters)
			iters = recs[p]->sizes[si].iters;
		row->verify_errors += recs[p]->sizes[si].verify_errors;
		row->cpu_s += recs[p]->sizes[si].cpu_s;
		if (recs[p]->sizes[si].wall_s > row->wall_s)
			row->wall_s = recs[p]->sizes[si].wall_s;
	}
	row->iters = iters;
	if (!lat || !iters) {
		row->median_us = row->p99_us = row->min_us = row->max_us = NAN;
		row->algbw = row->busbw = NAN;
		free(lat);
		return;
	}
	for (uint32_t it = 0; it < iters; it++)
		for (uint32_t p = 0; p < n_recs; p++)
			if (recs[p]->lat_us[si * o->iters + it] > lat[it])
				lat[it] = recs[p]->lat_us[si * o->iters + it];
	qsort(lat, iters, sizeof(double), cmp_double);
	row->median_us = quantile(lat, iters, 0.5);
	row->p99_us = quantile(lat, iters, 0.99);
	row->min_us = lat[0];
	row->max_us = lat[iters - 1];
	row->algbw = row->bytes / (row->median_us * 1e-6) / 1e9;
	row->busbw = row->algbw * run_busbw_factor(o->coll, world);
	free(lat);
}

static void human_size(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ULL << 20) && !(b % (1ULL << 20)))
		snprintf(buf, len, "%lluM", (unsigned long long)(b >> 20));
	else if (b >= 1024 && !(b % 1024))
		snprintf(buf, len, "%lluK", (unsigned long long)(b >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)b);
}

static const char *exit_name(int code)
{
	switch (code) {
	case RUN_EXIT_OK: return "ok";
	case RUN_EXIT_VERIFY: return "verification-error";
	case RUN_EXIT_USAGE: return "usage-error";
	case RUN_EXIT_TIMEOUT: return "timeout";
	case RUN_EXIT_DEAD: return "rank-died";
	default: return "failure";
	}
}

void run_report(const struct run_opts *o, const struct run_place *place,
		struct run_proc_record **recs, uint32_t n_recs, int exit_code,
		const char *error, double elapsed_s)
{
	uint32_t world = place->n_procs * o->ranks_per_proc, n_sizes = 0;
	struct size_row rows[RUN_MAX_SIZES];
	uint32_t tmin = UINT32_MAX, tmax = 0;

	for (uint32_t p = 0; p < n_recs; p++) {
		if (recs[p]->proxy_threads < tmin)
			tmin = recs[p]->proxy_threads;
		if (recs[p]->proxy_threads > tmax)
			tmax = recs[p]->proxy_threads;
	}
	if (!n_recs)
		tmin = 0;
	/* Rows for sizes every process started (bytes set). */
	for (uint32_t si = 0; si < o->n_sizes; si++) {
		bool all = n_recs > 0;

		for (uint32_t p = 0; p < n_recs; p++)
			all = all && recs[p]->sizes[si].bytes;
		if (!all)
			break;
		make_row(o, recs, n_recs, si, world, &rows[n_sizes++]);
	}

	if (o->json) {
		struct json_writer w;

		json_init(&w, stdout, true);
		json_obj_begin(&w, NULL);
		json_str(&w, "tool", "nproxy-run");
		json_str(&w, "version", NPROXY_VERSION);
		json_str(&w, "collective", run_coll_name(o->coll));
		json_u64(&w, "world_size", world);
		json_u64(&w, "procs", place->n_procs);
		json_u64(&w, "ranks_per_proc", o->ranks_per_proc);
		json_str(&w, "launcher", place->launcher);
		json_str(&w, "provider", n_recs && recs[0]->provider[0] ? recs[0]->provider : NULL);
		json_str(&w, "handshake", n_recs && recs[0]->handshake[0] ? recs[0]->handshake : NULL);
		json_u64(&w, "ranks_per_proxy", o->ranks_per_proxy);
		json_bool(&w, "one_thread_per_core", o->one_thread_per_core);
		json_u64(&w, "device_delay_us", o->device_delay_us);
		json_u64(&w, "warmup", o->warmup);
		json_arr_begin(&w, "proxy_threads_per_proc");
		for (uint32_t p = 0; p < n_recs; p++)
			json_u64(&w, NULL, recs[p]->proxy_threads);
		json_arr_end(&w);
		json_arr_begin(&w, "results");
		for (uint32_t i = 0; i < n_sizes; i++) {
			json_obj_begin(&w, NULL);
			json_u64(&w, "bytes", rows[i].bytes);
			json_u64(&w, "iters", rows[i].iters);
			json_double(&w, "median_us", rows[i].median_us);
			json_double(&w, "p99_us", rows[i].p99_us);
			json_double(&w, "min_us", rows[i].min_us);
			json_double(&w, "max_us", rows[i].max_us);
			json_double(&w, "algbw_gbps", rows[i].algbw);
			json_double(&w, "busbw_gbps", rows[i].busbw);
			json_bool(&w, "verified", rows[i].verify_errors == 0 && rows[i].iters > 0);
			json_u64(&w, "verify_errors", rows[i].verify_errors);
			json_double(&w, "cpu_s", rows[i].cpu_s);
			json_double(&w, "timed_wall_s", rows[i].wall_s);
			json_double(&w, "cpu_us_per_op", rows[i].iters ?
				    rows[i].cpu_s * 1e6 / rows[i].iters : NAN);
			json_obj_end(&w);
		}
		json_arr_end(&w);
		json_str(&w, "status", exit_name(exit_code));
		json_u64(&w, "exit_code", (uint64_t)exit_code);
		json_str(&w, "error", error && *error ? error : NULL);
		json_double(&w, "elapsed_s", elapsed_s);
		json_obj_end(&w);
		json_finish(&w);
		return;
	}
	if (!n_sizes)
		return;
	if (!o->quiet) {
		printf("# nproxy-run %s: %s, %u ranks (%u procs x %u), provider %s, handshake %s, device delay %u us\n",
		       NPROXY_VERSION, run_coll_name(o->coll), world, place->n_procs, o->ranks_per_proc,
		       recs[0]->provider[0] ? recs[0]->provider : "?",
		       recs[0]->handshake[0] ? recs[0]->handshake : "?", o->device_delay_us);
		printf("# latency: slowest process per iteration; algbw = size / median; busbw = algbw x %.3g\n",
		       run_busbw_factor(o->coll, world));
	}
	printf("%10s %6s %12s %12s %10s %10s %8s %8s\n", "size", "iters", "median(us)", "p99(us)",
	       "algbw", "busbw", "verify", "proxies");
	printf("%10s %6s %12s %12s %10s %10s %8s %8s\n", "(B)", "", "", "", "(GB/s)", "(GB/s)", "",
	       "/proc");
	for (uint32_t i = 0; i < n_sizes; i++) {
		char sz[32], verify[24], thr[24];

		human_size(rows[i].bytes, sz, sizeof(sz));
		if (rows[i].verify_errors)
			snprintf(verify, sizeof(verify), "FAIL(%u)", rows[i].verify_errors);
		else
			snprintf(verify, sizeof(verify), "%s", rows[i].iters ? "OK" : "-");
		if (tmin == tmax)
			snprintf(thr, sizeof(thr), "%u", tmin);
		else
			snprintf(thr, sizeof(thr), "%u-%u", tmin, tmax);
		printf("%10s %6u %12.1f %12.1f %10.3f %10.3f %8s %8s\n", sz, rows[i].iters,
		       rows[i].median_us, rows[i].p99_us, rows[i].algbw, rows[i].busbw, verify, thr);
	}
	fflush(stdout);
}
