// SPDX-License-Identifier: GPL-2.0
/* nproxy-run: command line parsing (long GNU-style options). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
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
"                             (default 1K:1M:4)\n"
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
"  -t, --timeout S            whole-run deadline in seconds (default 60)\n"
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

int run_parse_size(const char *s, uint64_t *out)
{
	char *end;
	uint64_t v, mult = 1;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	if (*end) {
		switch (*end) {
		case 'k': case 'K': mult = 1ULL << 10; break;
		case 'm': case 'M': mult = 1ULL << 20; break;
		case 'g': case 'G': mult = 1ULL << 30; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' || *end == 'B')	/* KiB, KB */
			end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
		if (*end)
			return -1;
	}
	if (v > UINT64_MAX / mult)
		return -1;
	*out = v * mult;
	return 0;
}

int run_parse_sizes(const char *s, struct run_opts *o)
{
	char buf[256], *save = NULL, *tok;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	o->n_sizes = 0;
	if (strchr(buf, ':')) {
		char *a = strtok_r(buf, ":", &save), *b = strtok_r(NULL, ":", &save);
		char *f = strtok_r(NULL, ":", &save);
		uint64_t lo, hi, factor = 2;

		if (!a || !b || strtok_r(NULL, ":", &save) || run_parse_size(a, &lo) ||
		    run_parse_size(b, &hi) || (f && run_parse_size(f, &factor)) ||
		    factor < 2 || !lo || lo > hi || hi > MAX_SIZE_BYTES)
			return -1;
		for (uint64_t v = lo; v <= hi; v *= factor) {
			if (o->n_sizes == RUN_MAX_SIZES)
				return -1;
			o->sizes[o->n_sizes++] = v;
			if (v > UINT64_MAX / factor)
				break;
		}
		return 0;
	}
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (o->n_sizes == RUN_MAX_SIZES || run_parse_size(tok, &v) || !v ||
		    v > MAX_SIZE_BYTES)
			return -1;
		o->sizes[o->n_sizes++] = v;
	}
	return o->n_sizes ? 0 : -1;
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
	enum { O_PROVIDER = 256, O_HANDSHAKE, O_RPP, O_OTPC, O_DELAY, O_BIND };
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
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	int c;

	*o = (struct run_opts){
		.procs = 4, .ranks_per_proc = 1, .coll = RUN_ALLGATHER,
		.iters = 20, .warmup = 5, .handshake = NPROXY_HS_AUTO,
		.device_delay_us = 10, .timeout_s = 60,
	};
	run_parse_sizes("1K:1M:4", o);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:r:c:s:n:w:t:jqhV", longopts, NULL)) != -1) {
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
			if (run_parse_sizes(optarg, o))
				return bad("--size: '%s' is not a size (64K), a sweep (1K:1M[:4]) or a list (1K,4K) of 1 B..256M, at most 64 sizes",
					   optarg);
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
		case 't': {
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
	return 0;
}
