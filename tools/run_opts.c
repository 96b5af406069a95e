// SPDX-License-Identifier: GPL-2.0
/* nproxy-run: command line parsing (long GNU-style options). */
#include <errno.h>
#include <stddef.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <nproxy/handshake.h>
#include "cli.h"
#include "run.h"

/* Long options without a short one. */
enum {
	O_PROVIDER = RUN_OPT_PROVIDER, O_HANDSHAKE = RUN_OPT_HANDSHAKE, O_RPP = RUN_OPT_RPP,
	O_OTPC = RUN_OPT_OTPC, O_DELAY = RUN_OPT_DELAY, O_BIND = RUN_OPT_BIND,
	O_TIMEOUT = RUN_OPT_TIMEOUT, O_DTYPE = RUN_OPT_DTYPE, O_OP = RUN_OPT_OP,
};

/* The words of --collective and --bind, by value. */
static const char *const coll_words[] = {
	[RUN_ALLGATHER] = "allgather", [RUN_ALLREDUCE] = "allreduce", [RUN_SENDRECV] = "sendrecv",
};
static const char *const bind_words[] = { [RUN_BIND_CORE] = "core", [RUN_BIND_NONE] = "none" };

#define N_WORDS(words) (sizeof(words) / sizeof((words)[0]))

const char *run_coll_name(enum run_collective c)
{
	return (unsigned int)c < N_WORDS(coll_words) ? coll_words[c] : "?";
}

/* arg's place among words, or -1 when it is none of them. */
static int word_index(const char *arg, const char *const *words, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(arg, words[i]))
			return (int)i;
	return -1;
}

void run_usage(FILE *f)
{
	fprintf(f,
"Usage: nproxy-run [OPTION]...\n"
"Run a collective through the whole nproxy stack: bananaphone rendezvous,\n"
"handshake regions, the shared proxy workers, the libfabric engine, and\n"
"verify the data.  Alone it forks --procs local ranks; under mpirun/srun (or\n"
"NPROXY_RANK/NPROXY_WORLD_SIZE) each process is one rank.\n"
"\n"
"  -p, --procs P              processes to fork (default 4; not under a launcher)\n"
"  -r, --ranks-per-proc R     ranks (comms) per process (default 1)\n"
"  -c, --collective NAME      allgather | allreduce | sendrecv (default allgather)\n"
"  -s, --size SPEC            bytes, K/M/G suffixes: 64K; a sweep MIN:MAX[:FACTOR]\n"
"                             (default factor 2); or a list 1K,4K,1M\n"
"                             (default 1K:1M:4; 1 B..256M)\n"
"  -b, --minbytes MIN         as nccl-tests: sweep from MIN (default 1K) ...\n"
"  -e, --maxbytes MAX         ... to MAX (default 1M, or MIN if larger) ...\n"
"  -f, --stepfactor F         ... multiplying by F (default 2); not with -s\n"
"  -n, --iters N              timed iterations per size (default 20)\n"
"  -w, --warmup N             untimed iterations per size (default 5)\n"
"      --dtype NAME           int8 uint8 int32 uint32 int64 uint64 half float\n"
"                             double bfloat16 (default uint32)\n"
"      --op NAME              allreduce: sum prod max min avg (default sum)\n"
"      --provider NAME        libfabric provider (default shm when forking,\n"
"                             else FI_PROVIDER / the engine's choice)\n"
"      --handshake MODE       kmod | memfd | auto (default auto: kmod if /dev/nproxy)\n"
"      --ranks-per-proxy K    comms sharing one proxy worker thread\n"
"      --one-thread-per-core  proxy workers busy-spin instead of yielding\n"
"      --device-delay-us D    emulated device time to reach the net stage (default 10)\n"
"      --bind core|none       pin forked process i to the i-th allowed CPU (round\n"
"                             robin) or not (default core; launchers bind)\n"
"      --timeout S            whole-run deadline in seconds (default 60); -t is\n"
"                             refused: it is nccl-tests' thread count\n"
"  -j, --json                 machine-readable results on stdout\n"
"  -q, --quiet                no progress output\n"
"  -h, --help                 this text\n"
"  -V, --version              version\n"
"\n"
"Run as nproxy_all_reduce_perf, nproxy_all_gather_perf or nproxy_sendrecv_perf\n"
"it takes nccl-tests' options and prints its table (nccl-tests mode).\n"
"\n"
"Exit status: 0 ok, 1 verification error, 2 usage, 3 timeout, 4 a rank died,\n"
"5 setup/library failure, 128+N interrupted by signal N.  See nproxy-run(1).\n");
}

#define bad(...) run_usage_error(__VA_ARGS__)

/* Every size to run: at least a byte, at most the cap (every rank holds the
 * whole result buffer and its inputs). */
#define SIZE_MIN	1ULL

/* The options that take one unsigned integer in a range, by short code. */
struct u32_option {
	int code;
	const char *name;
	size_t field;		/* offset of the uint32_t in struct run_opts */
	uint32_t min, max;
};

static const struct u32_option u32_options[] = {
	{ 'p', "--procs", offsetof(struct run_opts, procs), 1, RUN_MAX_RANKS },
	{ 'r', "--ranks-per-proc", offsetof(struct run_opts, ranks_per_proc), 1, RUN_MAX_RANKS },
	{ 'n', "--iters", offsetof(struct run_opts, iters), 1, 1000000 },
	{ 'w', "--warmup", offsetof(struct run_opts, warmup), 0, 1000000 },
	{ O_RPP, "--ranks-per-proxy", offsetof(struct run_opts, ranks_per_proxy), 1, RUN_MAX_RANKS },
	{ O_DELAY, "--device-delay-us", offsetof(struct run_opts, device_delay_us), 0, 10000000 },
};

/* -b/-e/-f: nccl-tests' sweep, built once every option is read. */
struct sweep_opts {
	uint64_t minb, maxb, factor;
	bool given, max_given;
};

static int u32_option(int c, const char *arg, struct run_opts *o, bool *handled)
{
	char why[200];

	*handled = false;
	for (size_t i = 0; i < sizeof(u32_options) / sizeof(u32_options[0]); i++) {
		const struct u32_option *u = &u32_options[i];

		if (u->code != c)
			continue;
		*handled = true;
		if (cli_parse_u32(u->name, arg, u->min, u->max,
				  (uint32_t *)((char *)o + u->field), why, sizeof(why)))
			return bad("%s", why);
		o->procs_given |= c == 'p';
		return 0;
	}
	return 0;
}

static int size_option(int c, const char *arg, struct run_opts *o, struct sweep_opts *sw)
{
	char why[200];

	switch (c) {
	case 's':
		if (cli_parse_size_list("--size", arg, SIZE_MIN, RUN_MAX_SIZE_BYTES, o->sizes,
					RUN_MAX_SIZES, &o->n_sizes, why, sizeof(why)))
			return bad("%s", why);
		o->sizes_given = true;
		return 0;
	case 'b':
	case 'e':
		if (cli_parse_size(c == 'b' ? "--minbytes" : "--maxbytes", arg, SIZE_MIN,
				   RUN_MAX_SIZE_BYTES, c == 'b' ? &sw->minb : &sw->maxb, why,
				   sizeof(why)))
			return bad("%s", why);
		sw->max_given |= c == 'e';
		sw->given = true;
		return 0;
	default:	/* 'f' */
		if (cli_parse_u64("--stepfactor", arg, 2, RUN_MAX_SIZE_BYTES, &sw->factor, why,
				  sizeof(why)))
			return bad("%s", why);
		sw->given = true;
		return 0;
	}
}

/* --dtype / --op: one of the library's types or ops, by name. */
static int type_option(int c, const char *arg, struct run_opts *o)
{
	char names[160];

	run_names(c == O_OP, names, sizeof(names));
	if (c == O_DTYPE && !run_dtype_parse(arg, &o->dtypes[0]))
		return bad("--dtype: '%s' is not one of %s", arg, names);
	if (c == O_OP && !run_redop_parse(arg, &o->redops[0]))
		return bad("--op: '%s' is not one of %s", arg, names);
	o->op_given |= c == O_OP;
	return 0;
}

/* The options naming a part of the stack: by name, or an enum's words. */
static int stack_option(int c, const char *arg, struct run_opts *o)
{
	enum nproxy_hs_backend b;
	int word;

	switch (c) {
	case 'c':
		word = word_index(arg, coll_words, N_WORDS(coll_words));
		if (word < 0)
			return bad("--collective: '%s' is not allgather, allreduce or sendrecv", arg);
		o->coll = (enum run_collective)word;
		return 0;
	case O_PROVIDER:
		if (!*arg)
			return bad("--provider: '' is not a provider name%s", "");
		o->provider = arg;
		return 0;
	case O_HANDSHAKE:
		if (nproxy_hs_backend_parse(arg, &b) != NPROXY_SUCCESS)
			return bad("--handshake: '%s' is not kmod, memfd or auto", arg);
		o->handshake = b;
		return 0;
	case O_DTYPE:
	case O_OP:
		return type_option(c, arg, o);
	default:	/* O_BIND */
		word = word_index(arg, bind_words, N_WORDS(bind_words));
		if (word < 0)
			return bad("--bind: '%s' is not core or none", arg);
		o->bind = (enum run_bind)word;
		return 0;
	}
}

/* After every option: -b/-e/-f become the size list, unless -s gave one. */
static int finish_sweep(struct run_opts *o, const struct sweep_opts *sw)
{
	uint64_t maxb = sw->maxb;
	char why[200];

	if (!sw->given)
		return 0;
	if (o->sizes_given)
		return bad("-s and -b/-e/-f both give the sizes: use one or the other");
	if (!sw->max_given && maxb < sw->minb)
		maxb = sw->minb;
	if (cli_size_sweep(sw->minb, maxb, sw->factor, o->sizes, RUN_MAX_SIZES, &o->n_sizes, why,
			   sizeof(why)))
		return bad("-b/-e/-f: %s", why);
	o->sizes_given = true;
	return 0;
}

static const struct option longopts[] = {
	RUN_SHARED_LONGOPTS,
	{ "procs", required_argument, NULL, 'p' },
	{ "ranks-per-proc", required_argument, NULL, 'r' },
	{ "collective", required_argument, NULL, 'c' },
	{ "size", required_argument, NULL, 's' },
	{ "iters", required_argument, NULL, 'n' },
	{ "warmup", required_argument, NULL, 'w' },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "dtype", required_argument, NULL, O_DTYPE },
	{ "op", required_argument, NULL, O_OP },
	{ "minbytes", required_argument, NULL, 'b' },
	{ "maxbytes", required_argument, NULL, 'e' },
	{ "stepfactor", required_argument, NULL, 'f' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 }
};

/* One option of the rest: flags, the deadline, help and mistakes. */
static int other_option(int c, const char *arg, const char *given, struct run_opts *o)
{
	char why[200];

	switch (c) {
	case O_OTPC: o->one_thread_per_core = true; return 0;
	case 'j': o->json = true; return 0;
	case 'q': o->quiet = true; return 0;
	case O_TIMEOUT:
		if (cli_parse_seconds("--timeout", arg, 0.001, 86400, &o->timeout_s, why,
				      sizeof(why)))
			return bad("%s", why);
		return 0;
	case 't':
		return bad("-t is not an nproxy-run option: in nccl-tests it is threads per process (here: -r, --ranks-per-proc); the deadline is --timeout S");
	case 'h':
		run_usage(stdout);
		exit(0);
	case 'V':
		printf("nproxy-run %s\n", NPROXY_VERSION);
		exit(0);
	case ':':
		return bad("option '%s' needs an argument", given);
	default:
		return bad("unknown option '%s'", given);
	}
}

/*
 * nccl-tests mode: its options first (run_nccl.c), then nproxy-run's own
 * long ones that do not clash (--provider, --json, ...).
 */
static int parse_nccl(int argc, char **argv, struct run_opts *o)
{
	bool handled;
	int c, ret;

	run_nccl_defaults(o);
	run_usage_error_scan(argc, argv);
	opterr = 0;
	while ((c = getopt_long(argc, argv, run_nccl_optstring, run_nccl_longopts, NULL)) != -1) {
		ret = run_nccl_option(c, optarg, o, &handled);
		if (!handled)
			ret = u32_option(c, optarg, o, &handled);
		if (!handled && (c == O_PROVIDER || c == O_HANDSHAKE || c == O_BIND))
			ret = stack_option(c, optarg, o);
		else if (!handled)
			ret = other_option(c, optarg, argv[optind - 1], o);
		if (ret)
			return ret;
	}
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	return run_nccl_finish(o);
}

int run_parse_opts(int argc, char **argv, struct run_opts *o)
{
	struct sweep_opts sw = { .minb = 1ULL << 10, .maxb = 1ULL << 20, .factor = 2 };
	bool handled;
	int c, ret;

	*o = (struct run_opts){
		.procs = 4, .ranks_per_proc = 1, .coll = RUN_ALLGATHER,
		.iters = 20, .warmup = 5, .handshake = NPROXY_HS_AUTO,
		.device_delay_us = 10, .timeout_s = 60,
		.dtypes = { NPROXY_UINT32 }, .n_dtypes = 1, .redops = { NPROXY_SUM }, .n_redops = 1,
		.variants = 1, .cycles = 1, .check = true,
	};
	if (run_nccl_name(argv[0], o))
		return parse_nccl(argc, argv, o);
	cli_size_sweep(1ULL << 10, 1ULL << 20, 4, o->sizes, RUN_MAX_SIZES, &o->n_sizes, NULL, 0);
	run_usage_error_scan(argc, argv);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:r:c:s:n:w:b:e:f:tjqhV", longopts, NULL)) != -1) {
		ret = u32_option(c, optarg, o, &handled);
		if (handled) {
			if (ret)
				return ret;
			continue;
		}
		if (c == 's' || c == 'b' || c == 'e' || c == 'f')
			ret = size_option(c, optarg, o, &sw);
		else if (c == 'c' || c == O_PROVIDER || c == O_HANDSHAKE || c == O_BIND ||
			 c == O_DTYPE || c == O_OP)
			ret = stack_option(c, optarg, o);
		else
			ret = other_option(c, optarg, argv[optind - 1], o);
		if (ret)
			return ret;
	}
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	if (o->op_given && o->coll != RUN_ALLREDUCE)
		return bad("--op: only allreduce reduces (--collective %s)", run_coll_name(o->coll));
	ret = finish_sweep(o, &sw);
	return ret ? ret : run_rows_init(o);
}
