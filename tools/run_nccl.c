// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run's nccl-tests mode.  Run as all_reduce_perf, all_gather_perf
 * or sendrecv_perf (the build links nproxy_all_reduce_perf etc. to
 * nproxy-run), the collective comes from the name and the options mean
 * what they mean in nccl-tests (its src/common.cu), so that a command line
 * written for nccl-tests runs here unchanged.  Options that steer a GPU
 * (-G, -z, -p, -y, -C, -r) are accepted with nccl-tests' value ranges and
 * do nothing, except a value that asks for what cannot be (-G >= 1).
 * Every wait here has a deadline: -T 0 (nccl-tests: none) keeps
 * nproxy-run's (60 s).  See "nccl-tests mode" in nproxy-run(1).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "run.h"

#define bad(...) run_usage_error(__VA_ARGS__)

/* Timed operations per row (-n x -m), as own mode's --iters at most. */
#define RUN_MAX_NCCL_OPS	1000000

/* nccl-tests' own short options (those with a meaning here). */
const char run_nccl_optstring[] = ":t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:h";

static const struct option longopts[] = {
	/* nproxy-run's own, where nccl-tests has no such name. */
	RUN_SHARED_LONGOPTS,
	{ "procs", required_argument, NULL, RUN_OPT_PROCS },
	/* nccl-tests' own. */
	{ "nthreads", required_argument, NULL, 't' },
	{ "ngpus", required_argument, NULL, 'g' },
	{ "minbytes", required_argument, NULL, 'b' },
	{ "maxbytes", required_argument, NULL, 'e' },
	{ "stepbytes", required_argument, NULL, 'i' },
	{ "stepfactor", required_argument, NULL, 'f' },
	{ "iters", required_argument, NULL, 'n' },
	{ "agg_iters", required_argument, NULL, 'm' },
	{ "warmup_iters", required_argument, NULL, 'w' },
	{ "run_cycles", required_argument, NULL, 'N' },
	{ "parallel_init", required_argument, NULL, 'p' },
	{ "check", required_argument, NULL, 'c' },
	{ "op", required_argument, NULL, 'o' },
	{ "datatype", required_argument, NULL, 'd' },
	{ "dtype", required_argument, NULL, 'd' },
	{ "root", required_argument, NULL, 'r' },
	{ "blocking", required_argument, NULL, 'z' },
	{ "stream_null", required_argument, NULL, 'y' },
	{ "timeout", required_argument, NULL, 'T' },
	{ "cudagraph", required_argument, NULL, 'G' },
	{ "report_cputime", required_argument, NULL, 'C' },
	{ "average", required_argument, NULL, 'a' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 }
};

const struct option *const run_nccl_longopts = longopts;

static const struct {
	const char *suffix;
	enum run_collective coll;
} tests[] = {
	{ "all_reduce_perf", RUN_ALLREDUCE },
	{ "all_gather_perf", RUN_ALLGATHER },
	{ "sendrecv_perf", RUN_SENDRECV },
};

bool run_nccl_name(const char *argv0, struct run_opts *o)
{
	const char *base = strrchr(argv0, '/');
	size_t n;

	base = base ? base + 1 : argv0;
	n = strlen(base);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		size_t k = strlen(tests[i].suffix);

		if (n >= k && !strcmp(base + n - k, tests[i].suffix)) {
			o->nccl.on = true;
			o->nccl.prog = tests[i].suffix;
			run_usage_error_prog(base);
			o->coll = tests[i].coll;
			return true;
		}
	}
	return false;
}

/* nccl-tests' defaults (src/common.cu); one process without a launcher. */
void run_nccl_defaults(struct run_opts *o)
{
	o->nccl.minb = o->nccl.maxb = 32ULL << 20;
	o->nccl.stepb = 1ULL << 20;
	o->nccl.stepf = 1;
	o->nccl.iters = 20;
	o->nccl.agg_iters = 1;
	o->nccl.gpus = o->nccl.threads = 1;
	o->nccl.check = 1;
	o->nccl.average = 1;
	o->warmup = 1;
	o->procs = 1;
	o->dtypes[0] = NPROXY_FLOAT32;
	o->redops[0] = NPROXY_SUM;
	o->variants = 2;
}

void run_nccl_usage(FILE *f, const char *prog)
{
	fprintf(f,
"Usage: %s [OPTION]...   (nproxy-run in nccl-tests mode; see nproxy-run(1))\n"
"  -t,--nthreads T  -g,--ngpus G    ranks per process = G x T (default 1 x 1)\n"
"  -b,--minbytes B  -e,--maxbytes B sizes (default 32M .. 32M; K/M/G suffixes)\n"
"  -i,--stepbytes B -f,--stepfactor F  step: +B (default 1M) or xF when F > 1\n"
"  -n,--iters N (20)  -m,--agg_iters M (1)  -w,--warmup_iters W (1)\n"
"  -N,--run_cycles C  run the sweep C times (default 1; 0: as many as 2048 rows hold)\n"
"  -c,--check 0|N   verify (default 1; 0: no check, #wrong is N/A)\n"
"  -d,--datatype int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|all\n"
"                   (default float)\n"
"  -o,--op sum|prod|max|min|avg|all  (default sum)\n"
"  -a,--average 0|1|2|3  time of rank 0, the average, min or max over processes\n"
"                   (default 1)\n"
"  -T,--timeout S   deadline of the whole run (0 or default: nproxy-run's 60 s)\n"
"  -p 0|1, -r ROOT, -z 0..3, -y 0|1, -C 0|1: accepted, no effect here;\n"
"  -G 0 only (no CUDA graphs)\n"
"  --procs P        fork P processes (default 1; not under a launcher)\n"
"  --provider, --handshake, --ranks-per-proxy, --one-thread-per-core,\n"
"  --device-delay-us, --bind, --json, --quiet, --version: as in nproxy-run\n"
"  -h,--help        this text\n", prog);
}

/* An option as the user wrote it: "-t" as nccl-tests names its own, the
 * long name of ours that have no letter ("--procs"; its code is no char). */
static void option_name(int c, char *buf, size_t len)
{
	for (const struct option *lo = longopts; lo->name; lo++) {
		if (lo->val == c && !(c < 128 && strchr(run_nccl_optstring, c))) {
			snprintf(buf, len, "--%s", lo->name);
			return;
		}
	}
	snprintf(buf, len, "-%c", c);
}

/* An integer option in [min, max], named as nccl-tests names it. */
static int int_option(int c, const char *arg, uint32_t min, uint32_t max, uint32_t *out)
{
	char name[40], why[200];

	option_name(c, name, sizeof(name));
	if (cli_parse_u32(name, arg, min, max, out, why, sizeof(why)))
		return bad("%s", why);
	return 0;
}

/* -d / -o: a name, or "all" as nccl-tests loops over every one. */
static int name_option(int c, const char *arg, struct run_opts *o)
{
	char names[160];

	run_names(c == 'o', names, sizeof(names));
	if (c == 'd') {
		o->nccl.dtype_all = !strcmp(arg, "all");
		if (!o->nccl.dtype_all && !run_dtype_parse(arg, &o->dtypes[0]))
			return bad("-d: '%s' is not one of %s, all", arg, names);
		return 0;
	}
	o->nccl.op_all = !strcmp(arg, "all");
	if (!o->nccl.op_all && !run_redop_parse(arg, &o->redops[0]))
		return bad("-o: '%s' is not one of %s, all", arg, names);
	return 0;
}

static int size_option(int c, const char *arg, struct run_opts *o)
{
	uint64_t *out = c == 'b' ? &o->nccl.minb : c == 'e' ? &o->nccl.maxb : &o->nccl.stepb;
	char why[200], name[4] = { '-', (char)c, 0 };

	if (cli_parse_size(name, arg, c == 'i' ? 1 : 0, RUN_MAX_SIZE_BYTES, out, why, sizeof(why)))
		return bad("%s", why);
	return 0;
}

/* The options that change nothing here, in nccl-tests' ranges. */
static int noop_option(int c, const char *arg)
{
	uint32_t v = 0;
	int ret;

	switch (c) {
	case 'r':
		return int_option(c, arg, 0, RUN_MAX_RANKS - 1, &v);
	case 'z':
		return int_option(c, arg, 0, 3, &v);
	case 'G':
		ret = int_option(c, arg, 0, 1000000, &v);
		if (!ret && v)
			return bad("-G %u: no CUDA graphs here: each op's device program is built and submitted by the proxy at its start, there is nothing to capture and replay (-G 0 only)", v);
		return ret;
	default:	/* p, y, C: 0 or 1 */
		return int_option(c, arg, 0, 1, &v);
	}
}

static int seconds_option(const char *arg, struct run_opts *o)
{
	char why[200];
	double s;

	if (cli_parse_seconds("-T", arg, 0, 86400, &s, why, sizeof(why)))
		return bad("%s", why);
	if (s > 0)
		o->timeout_s = s;	/* 0: nccl-tests' "none", here the default deadline */
	return 0;
}

int run_nccl_option(int c, const char *arg, struct run_opts *o, bool *handled)
{
	struct run_nccl *n = &o->nccl;
	uint32_t v = 0;
	int ret;

	*handled = true;
	switch (c) {
	case 't': return int_option(c, arg, 1, RUN_MAX_RANKS, &n->threads);
	case 'g': return int_option(c, arg, 1, RUN_MAX_RANKS, &n->gpus);
	case 'b': case 'e': case 'i': return size_option(c, arg, o);
	case 'f':
		ret = int_option(c, arg, 1, 1 << 20, &v);
		n->stepf = v;
		return ret;
	case 'n': return int_option(c, arg, 1, 1000000, &n->iters);
	case 'm': return int_option(c, arg, 1, 1000, &n->agg_iters);
	case 'w': return int_option(c, arg, 0, 1000000, &o->warmup);
	case 'N': return int_option(c, arg, 0, RUN_MAX_ROWS, &o->cycles);
	case 'c': return int_option(c, arg, 0, 1000000, &n->check);
	case 'a':
		ret = int_option(c, arg, 0, 3, &v);
		n->average = (int)v;
		return ret;
	case 'd': case 'o': return name_option(c, arg, o);
	case 'T': return seconds_option(arg, o);
	case 'p': case 'r': case 'z': case 'y': case 'G': case 'C':
		return noop_option(c, arg);
	case RUN_OPT_PROCS:
		o->procs_given = true;
		return int_option(c, arg, 1, RUN_MAX_RANKS, &o->procs);
	case 'h':
		run_nccl_usage(stdout, n->prog);
		exit(0);
	}
	*handled = false;
	return 0;
}

/* nccl-tests' sweep: from -b to -e, times -f when above 1, else plus -i. */
static int make_sizes(struct run_opts *o)
{
	const struct run_nccl *n = &o->nccl;

	if (n->minb > n->maxb)
		return bad("invalid sizes for 'minbytes' and 'maxbytes': %llu > %llu",
			   (unsigned long long)n->minb, (unsigned long long)n->maxb);
	if (!n->minb && n->stepf > 1)
		return bad("-b 0 with -f %llu: the sizes would never grow", (unsigned long long)n->stepf);
	o->n_sizes = 0;
	for (uint64_t s = n->minb; s <= n->maxb; s = n->stepf > 1 ? s * n->stepf : s + n->stepb) {
		if (o->n_sizes == RUN_MAX_SIZES)
			return bad("-b/-e/-i/-f give more than %u sizes", RUN_MAX_SIZES);
		o->sizes[o->n_sizes++] = s;
	}
	o->sizes_given = true;
	return 0;
}

int run_nccl_finish(struct run_opts *o)
{
	struct run_nccl *n = &o->nccl;
	int ret;

	if (n->gpus * n->threads > RUN_MAX_RANKS)
		return bad("-g %u x -t %u = %u ranks per process: at most %u", n->gpus, n->threads,
			   n->gpus * n->threads, RUN_MAX_RANKS);
	o->ranks_per_proc = n->gpus * n->threads;
	/* Each timed op's latency is kept: n x m of them per row. */
	if ((uint64_t)n->iters * n->agg_iters > RUN_MAX_NCCL_OPS)
		return bad("-n %u x -m %u = %llu timed operations per size: at most %u", n->iters,
			   n->agg_iters, (unsigned long long)n->iters * n->agg_iters,
			   RUN_MAX_NCCL_OPS);
	o->ranks_per_proc = n->gpus * n->threads;
	o->iters = n->iters * n->agg_iters;
	o->check = n->check != 0;
	if (n->dtype_all) {
		for (int i = 0; i < NPROXY_DTYPE_COUNT; i++)
			o->dtypes[i] = (enum nproxy_dtype)i;
		o->n_dtypes = NPROXY_DTYPE_COUNT;
	}
	/* An allgather does not reduce: nccl-tests runs it once per type ("none"). */
	if (n->op_all && o->coll != RUN_ALLGATHER) {
		for (int i = 0; i < NPROXY_REDOP_COUNT; i++)
			o->redops[i] = (enum nproxy_redop)i;
		o->n_redops = NPROXY_REDOP_COUNT;
	}
	if (o->coll == RUN_ALLGATHER)
		o->redops[0] = NPROXY_SUM;
	ret = make_sizes(o);
	return ret ? ret : run_rows_init(o);
}
