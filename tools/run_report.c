// SPDX-License-Identifier: GPL-2.0
/* nproxy-run: progress bar, results table and JSON report. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/nproxy.h>
#include <nproxy/net.h>
#include <rdma/fabric.h>
#include "json_writer.h"
#include "run.h"

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
	p->total = (uint64_t)o->n_rows * p->per_size;
	p->o = o;
}

/*
 * Shown only once the run has taken a second, and only on a terminal: the
 * table rows (stdout) say which sizes are done; the bar (stderr) is cleared
 * before each row is printed.
 */
void run_progress_update(struct run_progress *p, uint64_t done, const char *what)
{
	const int width = 30;
	double elapsed = run_now() - p->start;
	int fill;

	if (!p->enabled || elapsed < 1.0 || !p->total)
		return;
	/* Off a terminal the streamed table rows are the progress. */
	if (!p->tty)
		return;
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
	uint64_t count;			/* the op's count (an allgather's: per rank) */
	uint32_t iters;
	double median_us, p99_us, min_us, max_us;
	double algbw, busbw;		/* GB/s (1e9 bytes/s), not Gbit/s */
	uint32_t verify_errors;
	uint64_t wrong;			/* wrong elements, over processes */
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
	row->count = recs[0]->sizes[si].count;
	for (uint32_t p = 0; p < n_recs; p++) {
		if (recs[p]->sizes[si].iters < iters)
			iters = recs[p]->sizes[si].iters;
		row->verify_errors += recs[p]->sizes[si].verify_errors;
		row->wrong += recs[p]->sizes[si].wrong;
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
			if (recs[p]->lat_us[(size_t)si * o->iters + it] > lat[it])
				lat[it] = recs[p]->lat_us[(size_t)si * o->iters + it];
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
	default: return code > 128 ? "interrupted" : "failure";
	}
}

/* The run's type and op (own mode has one each; nccl-tests mode's -d all
 * and -o all say "all", each row says its own); only allreduce reduces. */
static const char *data_type(const struct run_opts *o)
{
	return o->nccl.dtype_all ? "all" : nproxy_dtype_name(o->dtypes[0]);
}

static const char *reduction_op(const struct run_opts *o)
{
	if (o->coll != RUN_ALLREDUCE)
		return "none";
	return o->nccl.op_all ? "all" : nproxy_redop_name(o->redops[0]);
}

/* The loaded module's ABI, or 0 when there is no /dev/nproxy to ask. */
static uint32_t module_abi(void)
{
	struct nproxy_info info;
	int fd = open("/dev/" NPROXY_DEVICE_NAME, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	memset(&info, 0, sizeof(info));
	if (ioctl(fd, NPROXY_IOC_GET_INFO, &info))
		info.abi_version = 0;
	close(fd);
	return info.abi_version;
}

static void proxy_threads_range(struct run_proc_record **recs, uint32_t n_recs,
				uint32_t *tmin, uint32_t *tmax)
{
	*tmin = n_recs ? UINT32_MAX : 0;
	*tmax = 0;
	for (uint32_t p = 0; p < n_recs; p++) {
		if (recs[p]->proxy_threads < *tmin)
			*tmin = recs[p]->proxy_threads;
		if (recs[p]->proxy_threads > *tmax)
			*tmax = recs[p]->proxy_threads;
	}
}

static void print_header(const struct run_opts *o, const struct run_place *place,
			 const struct run_proc_record *rec0)
{
	uint32_t world = place->n_procs * o->ranks_per_proc, abi = module_abi();
	uint32_t fi = fi_version();
	char host[256] = "?", abi_str[64];

	gethostname(host, sizeof(host) - 1);
	if (abi)
		snprintf(abi_str, sizeof(abi_str), "%u", abi);
	else
		snprintf(abi_str, sizeof(abi_str), "n/a (no /dev/nproxy)");
	if (!o->quiet) {
		printf("# nproxy-run %s: %s, %u ranks (%u procs x %u), provider %s, handshake %s, device delay %u us\n",
		       NPROXY_VERSION, run_coll_name(o->coll), world, place->n_procs, o->ranks_per_proc,
		       rec0->provider[0] ? rec0->provider : "?",
		       rec0->handshake[0] ? rec0->handshake : "?", o->device_delay_us);
		printf("# host %s, pid %d, launcher %s, libfabric %u.%u, module ABI %s (tool built for %u)\n",
		       host, (int)getpid(), place->launcher, FI_MAJOR(fi), FI_MINOR(fi), abi_str,
		       NPROXY_ABI_VERSION);
		printf("# shm large messages: %s\n", nproxy_net_shm_copy());
		printf("# data type %s, reduction op %s; %u warmup + %u timed iterations per size\n",
		       data_type(o), reduction_op(o), o->warmup, o->iters);
		printf("# time: slowest process per iteration; algbw = size / median (GB/s = 1e9 B/s); busbw = algbw x %.3g%s\n",
		       run_busbw_factor(o->coll, world),
		       o->iters < 100 ? "; p99 is the slowest iteration below 100 iterations" : "");
		printf("# #wrong: iterations whose result did not verify (0 = every byte checked and right)\n");
	}
	printf("%10s %10s %7s %5s %6s %12s %12s %10s %10s %7s %8s\n", "size", "count", "type", "redop",
	       "iters", "median(us)", "p99(us)", "algbw", "busbw", "#wrong", "proxies");
	printf("%10s %10s %7s %5s %6s %12s %12s %10s %10s %7s %8s\n", "(B)", "(elems)", "", "", "", "",
	       "", "(GB/s)", "(GB/s)", "", "/proc");
}

void run_table_stream(struct run_table *t, const struct run_opts *o, const struct run_place *place,
		      struct run_proc_record **recs, uint32_t n_recs)
{
	uint32_t world = place->n_procs * o->ranks_per_proc, done, tmin, tmax;

	if (o->json || !n_recs)
		return;
	if (o->nccl.on) {
		run_nccl_stream(t, o, place, recs, n_recs);
		return;
	}
	done = run_sizes_finished(o, recs, n_recs);
	if (t->rows_printed >= done)
		return;
	proxy_threads_range(recs, n_recs, &tmin, &tmax);
	if (!t->rows_printed)
		print_header(o, place, recs[0]);
	for (; t->rows_printed < done; t->rows_printed++) {
		struct size_row row;
		char sz[32], thr[24];

		make_row(o, recs, n_recs, t->rows_printed, world, &row);
		human_size(row.bytes, sz, sizeof(sz));
		if (tmin == tmax)
			snprintf(thr, sizeof(thr), "%u", tmin);
		else
			snprintf(thr, sizeof(thr), "%u-%u", tmin, tmax);
		printf("%10s %10llu %7s %5s %6u %12.1f %12.1f %10.3f %10.3f %7u %8s\n", sz,
		       (unsigned long long)(row.bytes / nproxy_dtype_size(o->dtypes[0])),
		       data_type(o), reduction_op(o), row.iters, row.median_us, row.p99_us, row.algbw,
		       row.busbw, row.verify_errors, thr);
		t->wrong += row.verify_errors;
		if (!isnan(row.busbw)) {
			t->busbw_sum += row.busbw;
			t->busbw_rows++;
		}
	}
	fflush(stdout);
}

/* The job's parameters, as the JSON document's header fields. */
static void json_job(struct json_writer *w, const struct run_opts *o,
		     const struct run_place *place, struct run_proc_record **recs, uint32_t n_recs)
{
	uint32_t abi = module_abi(), fi = fi_version();
	char host[256] = "?", fi_ver[32];

	gethostname(host, sizeof(host) - 1);
	snprintf(fi_ver, sizeof(fi_ver), "%u.%u", FI_MAJOR(fi), FI_MINOR(fi));
	json_str(w, "tool", "nproxy-run");
	json_str(w, "version", NPROXY_VERSION);
	json_str(w, "host", host);
	json_u64(w, "pid", (uint64_t)getpid());
	json_str(w, "collective", run_coll_name(o->coll));
	json_str(w, "data_type", data_type(o));
	json_str(w, "reduction_op", reduction_op(o));
	json_u64(w, "world_size", place->n_procs * o->ranks_per_proc);
	json_u64(w, "procs", place->n_procs);
	json_u64(w, "ranks_per_proc", o->ranks_per_proc);
	json_str(w, "launcher", place->launcher);
	json_str(w, "provider", n_recs && recs[0]->provider[0] ? recs[0]->provider : NULL);
	json_str(w, "libfabric_version", fi_ver);
	json_str(w, "handshake", n_recs && recs[0]->handshake[0] ? recs[0]->handshake : NULL);
	json_str(w, "shm_copy", nproxy_net_shm_copy());
	if (abi)
		json_u64(w, "module_abi", abi);
	else
		json_str(w, "module_abi", NULL);
	/* Not given: the library's choice (NPROXY_RANKS_PER_PROXY, else 1). */
	if (o->ranks_per_proxy)
		json_u64(w, "ranks_per_proxy", o->ranks_per_proxy);
	else
		json_str(w, "ranks_per_proxy", "default");
	json_bool(w, "one_thread_per_core", o->one_thread_per_core);
	json_u64(w, "device_delay_us", o->device_delay_us);
	json_u64(w, "warmup", o->warmup);
	json_u64(w, "iters", o->iters);
	json_double(w, "timeout_s", o->timeout_s);
	json_arr_begin(w, "proxy_threads_per_proc");
	for (uint32_t p = 0; p < n_recs; p++)
		json_u64(w, NULL, recs[p]->proxy_threads);
	json_arr_end(w);
}

static void json_row(struct json_writer *w, const struct run_opts *o, uint32_t i,
		     const struct size_row *row)
{
	struct run_row r;

	run_row_of(o, i, &r);
	json_obj_begin(w, NULL);
	json_u64(w, "bytes", row->bytes);
	/* nccl-tests mode: the table's count (an allgather's per rank). */
	json_u64(w, "count", o->nccl.on ? row->count : row->bytes / nproxy_dtype_size(r.dtype));
	/* nccl-tests mode: what each row ran (own mode: the header says). */
	if (o->nccl.on) {
		json_str(w, "data_type", nproxy_dtype_name(r.dtype));
		json_str(w, "reduction_op", o->coll == RUN_ALLGATHER ? "none"
			 : nproxy_redop_name(r.redop));
		json_bool(w, "in_place", r.in_place);
		json_bool(w, "skipped", r.skipped);
		json_u64(w, "wrong_elements", row->wrong);
	}
	json_u64(w, "iters", row->iters);
	json_double(w, "median_us", row->median_us);
	json_double(w, "p99_us", row->p99_us);
	/* Nearest rank: below 100 iterations p99 is the slowest one. */
	json_bool(w, "p99_is_max", row->iters < 100);
	json_double(w, "min_us", row->min_us);
	json_double(w, "max_us", row->max_us);
	json_double(w, "algbw_GBps", row->algbw);
	json_double(w, "busbw_GBps", row->busbw);
	json_bool(w, "verified", row->verify_errors == 0 && row->iters > 0);
	json_u64(w, "verify_errors", row->verify_errors);
	json_double(w, "cpu_s", row->cpu_s);
	json_double(w, "timed_wall_s", row->wall_s);
	json_double(w, "cpu_us_per_op", row->iters ? row->cpu_s * 1e6 / row->iters : NAN);
	json_obj_end(w);
}

/* The table's last rows and its footer. */
static void report_text(const struct run_opts *o, const struct run_place *place,
			struct run_table *table, struct run_proc_record **recs, uint32_t n_recs,
			int exit_code, const char *error)
{
	run_table_stream(table, o, place, recs, n_recs);
	if (o->nccl.on) {
		run_nccl_footer(table, o, exit_code, error);
		return;
	}
	/* A log of a run stopped in its first size still says why. */
	if (!table->rows_printed && exit_code) {
		printf("# nproxy-run %s: %s stopped before its first size finished: %s (exit %d)\n",
		       NPROXY_VERSION, run_coll_name(o->coll), exit_name(exit_code), exit_code);
		if (error && *error)
			printf("# %s\n", error);
		fflush(stdout);
		return;
	}
	if (!table->rows_printed)
		return;
	printf("# Out of bounds values : %u %s\n", table->wrong, table->wrong ? "FAILED" : "OK");
	printf("# Avg bus bandwidth    : %.3f GB/s (%u of %u sizes%s)\n",
	       table->busbw_rows ? table->busbw_sum / table->busbw_rows : 0.0,
	       table->busbw_rows, o->n_rows,
	       exit_code > 128 ? ", interrupted" : exit_code ? ", stopped early" : "");
	fflush(stdout);
}

void run_report(const struct run_opts *o, const struct run_place *place,
		struct run_table *table, struct run_proc_record **recs, uint32_t n_recs,
		int exit_code, const char *error, double elapsed_s)
{
	uint32_t world = place->n_procs * o->ranks_per_proc, n_sizes;
	struct json_writer w;

	if (!o->json) {
		report_text(o, place, table, recs, n_recs, exit_code, error);
		return;
	}
	/* Rows for the sizes every process finished. */
	n_sizes = run_sizes_finished(o, recs, n_recs);
	json_init(&w, stdout, true);
	json_obj_begin(&w, NULL);
	json_job(&w, o, place, recs, n_recs);
	json_u64(&w, "sizes_requested", o->n_rows);
	json_arr_begin(&w, "results");
	for (uint32_t si = 0; si < n_sizes; si++) {
		struct size_row row;

		make_row(o, recs, n_recs, si, world, &row);
		json_row(&w, o, si, &row);
	}
	json_arr_end(&w);
	json_str(&w, "status", exit_name(exit_code));
	json_u64(&w, "exit_code", (uint64_t)exit_code);
	json_str(&w, "error", error && *error ? error : NULL);
	json_double(&w, "elapsed_s", elapsed_s);
	json_obj_end(&w);
	json_finish(&w);
}
