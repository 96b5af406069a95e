// SPDX-License-Identifier: GPL-2.0
/* nproxy-run: command line parsing (long GNU-style options). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <nproxy/handshake.h>
#include "run.h"

#define MAX_SIZE_BYTES	(256ULL << 20)

const char *run_coll_name(enum run_collective c)
{
	switch (c) {
	case RUN_ALLGATHER: return "allgather";
	case RUN_ALLREDUCE: return "allreduce";
	case RUN_SENDRECV: return "sendrecv";
	}
	return "?";
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
"Exit status: 0 ok, 1 verification error, 2 usage, 3 timeout, 4 a rank died,\n"
"5 setup/library failure, 128+N interrupted by signal N.  See nproxy-run(1).\n");
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "nproxy-run: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'nproxy-run --help'.\n");
	return RUN_EXIT_USAGE;
}

/* One size: digits, then K/M/G (KiB, KB also read as powers of 1024). */
static int parse_size_why(const char *s, uint64_t *out, char *why, size_t len)
{
	char *end;
	uint64_t v, mult = 1;

	if (*s < '0' || *s > '9') {
		snprintf(why, len, "'%s' is not a number of bytes (64K, 1M, 4096)", s);
		return -1;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno) {
		snprintf(why, len, "'%s' is too large a number", s);
		return -1;
	}
	if (*end) {
		const char *unit = end;

		switch (*end) {
		case 'k': case 'K': mult = 1ULL << 10; break;
		case 'm': case 'M': mult = 1ULL << 20; break;
		case 'g': case 'G': mult = 1ULL << 30; break;
		default:
			snprintf(why, len, "'%s': unknown unit '%s' (K, M or G; KiB/KB also read as 1024)",
				 s, unit);
			return -1;
		}
		end++;
		if (*end == 'i' || *end == 'B')	/* KiB, KB */
			end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
		if (*end) {
			snprintf(why, len, "'%s': unknown unit '%s' (K, M or G; KiB/KB also read as 1024)",
				 s, unit);
			return -1;
		}
	}
	if (v > UINT64_MAX / mult) {
		snprintf(why, len, "'%s' is too large a number", s);
		return -1;
	}
	*out = v * mult;
	return 0;
}

int run_parse_size(const char *s, uint64_t *out)
{
	char why[160];

	return parse_size_why(s, out, why, sizeof(why));
}

/* A size to run: at least a byte and at most the cap. */
static int check_size(const char *tok, uint64_t v, char *why, size_t len)
{
	if (!v) {
		snprintf(why, len, "'%s': a size is at least 1 byte", tok);
		return -1;
	}
	if (v > MAX_SIZE_BYTES) {
		snprintf(why, len, "'%s' is above the 256M cap (every rank holds the whole result buffer and its inputs)",
			 tok);
		return -1;
	}
	return 0;
}

static int add_sweep(struct run_opts *o, uint64_t lo, uint64_t hi, uint64_t factor, char *why,
		     size_t len)
{
	if (factor < 2) {
		snprintf(why, len, "a sweep's factor is at least 2 (got %llu)", (unsigned long long)factor);
		return -1;
	}
	if (lo > hi) {
		snprintf(why, len, "the sweep's minimum %llu B is above its maximum %llu B",
			 (unsigned long long)lo, (unsigned long long)hi);
		return -1;
	}
	o->n_sizes = 0;
	for (uint64_t v = lo; v <= hi; v *= factor) {
		if (o->n_sizes == RUN_MAX_SIZES) {
			snprintf(why, len, "the sweep has more than %d sizes", RUN_MAX_SIZES);
			return -1;
		}
		o->sizes[o->n_sizes++] = v;
		if (v > UINT64_MAX / factor)
			break;
	}
	return 0;
}

int run_parse_sizes_why(const char *s, struct run_opts *o, char *why, size_t len)
{
	char buf[256], inner[160], *save = NULL, *tok;

	if (strlen(s) >= sizeof(buf)) {
		snprintf(why, len, "the size list is longer than %zu characters", sizeof(buf) - 1);
		return -1;
	}
	strcpy(buf, s);
	o->n_sizes = 0;
	if (strchr(buf, ':')) {
		char *a = strtok_r(buf, ":", &save), *b = strtok_r(NULL, ":", &save);
		char *f = strtok_r(NULL, ":", &save);
		uint64_t lo, hi, factor = 2;

		if (!a || !b || strtok_r(NULL, ":", &save)) {
			snprintf(why, len, "'%s': a sweep is MIN:MAX or MIN:MAX:FACTOR", s);
			return -1;
		}
		if (parse_size_why(a, &lo, why, len) || check_size(a, lo, why, len) ||
		    parse_size_why(b, &hi, why, len) || check_size(b, hi, why, len) ||
		    (f && parse_size_why(f, &factor, why, len)))
			return -1;
		if (add_sweep(o, lo, hi, factor, inner, sizeof(inner))) {
			snprintf(why, len, "'%s': %s", s, inner);
			return -1;
		}
		return 0;
	}
	if (!*buf || buf[strlen(buf) - 1] == ',' || *buf == ',' || strstr(buf, ",,")) {
		snprintf(why, len, "'%s': an empty size in the list", s);
		return -1;
	}
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (o->n_sizes == RUN_MAX_SIZES) {
			snprintf(why, len, "more than %d sizes", RUN_MAX_SIZES);
			return -1;
		}
		if (parse_size_why(tok, &v, why, len) || check_size(tok, v, why, len))
			return -1;
		o->sizes[o->n_sizes++] = v;
	}
	return 0;
}

int run_parse_sizes(const char *s, struct run_opts *o)
{
	char why[160];

	return run_parse_sizes_why(s, o, why, sizeof(why));
}

static int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int run_parse_opts(int argc, char **argv, struct run_opts *o)
{
	enum { O_PROVIDER = 256, O_HANDSHAKE, O_RPP, O_OTPC, O_DELAY, O_BIND, O_TIMEOUT };
	static const struct option longopts[] = {
		{ "procs", required_argument, NULL, 'p' },
		{ "ranks-per-proc", required_argument, NULL, 'r' },
		{ "collective", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "provider", required_argument, NULL, O_PROVIDER },
		{ "handshake", required_argument, NULL, O_HANDSHAKE },
		{ "ranks-per-proxy", required_argument, NULL, O_RPP },
		{ "one-thread-per-core", no_argument, NULL, O_OTPC },
		{ "device-delay-us", required_argument, NULL, O_DELAY },
		{ "bind", required_argument, NULL, O_BIND },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "minbytes", required_argument, NULL, 'b' },
		{ "maxbytes", required_argument, NULL, 'e' },
		{ "stepfactor", required_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	uint64_t minb = 1ULL << 10, maxb = 1ULL << 20, factor = 2;
	bool sweep_given = false, max_given = false;
	char why[200];
	int c;

	*o = (struct run_opts){
		.procs = 4, .ranks_per_proc = 1, .coll = RUN_ALLGATHER,
		.iters = 20, .warmup = 5, .handshake = NPROXY_HS_AUTO,
		.device_delay_us = 10, .timeout_s = 60,
	};
	run_parse_sizes("1K:1M:4", o);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:r:c:s:n:w:b:e:f:tjqhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_u32(optarg, 1, RUN_MAX_RANKS, &o->procs))
				return bad("--procs: '%s' is not 1..64", optarg);
			o->procs_given = true;
			break;
		case 'r':
			if (parse_u32(optarg, 1, RUN_MAX_RANKS, &o->ranks_per_proc))
				return bad("--ranks-per-proc: '%s' is not 1..64", optarg);
			break;
		case 'c':
			if (!strcmp(optarg, "allgather"))
				o->coll = RUN_ALLGATHER;
			else if (!strcmp(optarg, "allreduce"))
				o->coll = RUN_ALLREDUCE;
			else if (!strcmp(optarg, "sendrecv"))
				o->coll = RUN_SENDRECV;
			else
				return bad("--collective: '%s' is not allgather, allreduce or sendrecv",
					   optarg);
			break;
		case 's':
			if (run_parse_sizes_why(optarg, o, why, sizeof(why)))
				return bad("--size: %s", why);
			o->sizes_given = true;
			break;
		case 'b':
		case 'e':
			if (parse_size_why(optarg, c == 'b' ? &minb : &maxb, why, sizeof(why)) ||
			    check_size(optarg, c == 'b' ? minb : maxb, why, sizeof(why)))
				return bad("--%s: %s", c == 'b' ? "minbytes" : "maxbytes", why);
			max_given |= c == 'e';
			sweep_given = true;
			break;
		case 'f':
			if (parse_size_why(optarg, &factor, why, sizeof(why)) || factor < 2)
				return bad("--stepfactor: '%s' is not a whole factor of at least 2", optarg);
			sweep_given = true;
			break;
		case 'n':
			if (parse_u32(optarg, 1, 1000000, &o->iters))
				return bad("--iters: '%s' is not 1..1000000", optarg);
			break;
		case 'w':
			if (parse_u32(optarg, 0, 1000000, &o->warmup))
				return bad("--warmup: '%s' is not 0..1000000", optarg);
			break;
		case O_PROVIDER:
			if (!*optarg)
				return bad("--provider: empty provider name%s", "");
			o->provider = optarg;
			break;
		case O_HANDSHAKE: {
			enum nproxy_hs_backend b;

			if (nproxy_hs_backend_parse(optarg, &b) != NPROXY_SUCCESS)
				return bad("--handshake: '%s' is not kmod, memfd or auto", optarg);
			o->handshake = b;
			break;
		}
		case O_RPP:
			if (parse_u32(optarg, 1, RUN_MAX_RANKS, &o->ranks_per_proxy))
				return bad("--ranks-per-proxy: '%s' is not 1..64", optarg);
			break;
		case O_OTPC:
			o->one_thread_per_core = true;
			break;
		case O_BIND:
			if (!strcmp(optarg, "core"))
				o->bind = RUN_BIND_CORE;
			else if (!strcmp(optarg, "none"))
				o->bind = RUN_BIND_NONE;
			else
				return bad("--bind: '%s' is not core or none", optarg);
			break;
		case O_DELAY:
			if (parse_u32(optarg, 0, 10000000, &o->device_delay_us))
				return bad("--device-delay-us: '%s' is not 0..10000000", optarg);
			break;
		case 't':
			return bad("-t is not an nproxy-run option: in nccl-tests it is threads per process (here: -r, --ranks-per-proc); the deadline is --timeout S");
		case O_TIMEOUT: {
			char *end;

			errno = 0;
			o->timeout_s = strtod(optarg, &end);
			if (errno || *end || !*optarg || !(o->timeout_s > 0) || o->timeout_s > 86400)
				return bad("--timeout: '%s' is not a number of seconds in (0, 86400]",
					   optarg);
			break;
		}
		case 'j':
			o->json = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'h':
			run_usage(stdout);
			exit(0);
		case 'V':
			printf("nproxy-run %s\n", NPROXY_VERSION);
			exit(0);
		case ':':
			return bad("option '%s' needs an argument", argv[optind - 1]);
		default:
			return bad("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	if (sweep_given) {
		if (o->sizes_given)
			return bad("-s and -b/-e/-f both give the sizes: use one or the other");
		if (!max_given && maxb < minb)
			maxb = minb;
		if (add_sweep(o, minb, maxb, factor, why, sizeof(why)))
			return bad("-b/-e/-f: %s", why);
		o->sizes_given = true;
	}
	return 0;
}
