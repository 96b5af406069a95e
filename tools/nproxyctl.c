// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl: inspect and drive nproxy.ko through its ioctls (on
 * /dev/nproxy and region fds) and its generic netlink family.  It holds no
 * logic of its own beyond naming regions; see nproxyctl(8).  One host
 * chore besides: shm-sweep (ctl_shm.c), the library's own sweep.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include "ctl.h"
#include "ctl_proxy.h"
#include "json_writer.h"
#include "prog_text.h"

static struct {
	bool json;
	bool reset;
	bool check;
	bool no_wait;
	long count;		/* watch: stop after N events (0: until SIGINT) */
	double timeout_s;	/* watch: stop after; program: wait at most */
	uint32_t streams, sems, rank, gid;
	double hold_s;		/* create: hold the region this long (0: until signal) */
	bool dry_run;		/* shm-sweep: report only */
	int pid;		/* shm-sweep: only this PID's files (0: every dead PID) */
	const char *dir;	/* shm-sweep: instead of /dev/shm */
} opt = { .timeout_s = -1, .streams = NPROXY_MAX_STREAMS, .sems = 16 };

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: nproxyctl [--json] COMMAND [ARGS]\n"
"       nproxyctl help [COMMAND] | COMMAND --help | --version\n"
"\n"
"Read commands (--json for machine-readable output):\n"
"  info                          ABI version and limits of the loaded module\n"
"  regions                       every live region (netlink dump)\n"
"  stats [--reset]               module-wide counters (--reset: zero them, needs CAP_NET_ADMIN)\n"
"  watch [--count N] [--timeout S]\n"
"                                print netlink events, timestamped, until interrupted\n"
"  state REGION                  one region's state (triggers, program, counters)\n"
"  sem get REGION SEM            read a semaphore\n"
"\n"
"Write commands:\n"
"  trigger REGION STREAM [VALUE] write a trigger word as the device would (VALUE default 1)\n"
"  sem set|inc REGION SEM VALUE  set or add to a semaphore\n"
"  program REGION FILE [--no-wait] [--timeout S]\n"
"                                submit a device program written in the text format\n"
"  program --check FILE          only parse FILE and print the steps\n"
"  create [--streams N] [--sems N] [--rank R] [--gid G] [--hold S]\n"
"                                create a region, print its id, keep it until SIGINT/SIGTERM\n"
"\n"
"Proxies (the state libnproxy publishes in each region; see nproxyctl top --help):\n"
"  top [--count N] [--interval S] [--pid PID]\n"
"                                live view of every proxy on the host\n"
"  hang-report [--min-age S] [--pid PID]\n"
"                                who waits for whom in a stuck job (exit 5: hang found)\n"
"\n"
"Host:\n"
"  shm-sweep [--dry-run] [--pid PID] [--dir DIR]\n"
"                                remove libfabric shm regions (/dev/shm/<pid>:<uid>:<n>) of\n"
"                                processes that no longer exist and no live process uses\n"
"\n"
"REGION is a region id (see `nproxyctl regions`) or PID:FD; the owner's fd is\n"
"duplicated with pidfd_getfd(2), which needs ptrace access to the owner.\n"
"Program format: one step per line, '#' comments:\n"
"  write-trigger STREAM VALUE | wait-sem SEM >= VALUE [timeout 100ms] |\n"
"  delay 50us | inc-sem SEM VALUE | signal VALUE\n"
"Exit status: 0 ok, 1 failed, 2 usage, 3 module not loaded, 4 permission denied.\n");
}

static int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_err(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctl_report_error("usage-error", msg);
	if (!ctl_json)
		fprintf(stderr, "Try 'nproxyctl help' or 'nproxyctl COMMAND --help'.\n");
	return CTL_USAGE;
}

/*
 * Every subcommand: its arguments and what it does, for `nproxyctl help`,
 * `nproxyctl help CMD` and `nproxyctl CMD --help` (and bash completion,
 * which reads the list).  A new subcommand adds a row here and a branch in
 * main()'s dispatch.
 */
struct ctl_cmd_help {
	const char *name;
	const char *args;
	const char *text;
};

static const struct ctl_cmd_help cmd_help[] = {
	{ "info", "", "ABI version and limits of the loaded module (NPROXY_IOC_GET_INFO)." },
	{ "regions", "", "Every live region, from the module's generic netlink dump." },
	{ "stats", "[--reset]",
	  "Module-wide counters.  --reset zeroes them first (needs CAP_NET_ADMIN)." },
	{ "watch", "[--count N] [--timeout S]",
	  "Print the module's netlink events as they arrive, each with the UTC time it was\n"
	  "received (\"time\") and CLOCK_MONOTONIC seconds (\"mono_s\"), until Ctrl-C, N events\n"
	  "or S seconds.  With --json, one object per line." },
	{ "state", "REGION", "One region's state: triggers, program, counters." },
	{ "sem", "get REGION SEM | set REGION SEM VALUE | inc REGION SEM VALUE",
	  "Read, set or add to a semaphore of a region." },
	{ "trigger", "REGION STREAM [VALUE]",
	  "Write a trigger word as the device would (VALUE default 1)." },
	{ "program", "REGION FILE [--no-wait] [--timeout S] | --check FILE",
	  "Submit a device program written in the text format and wait for its result\n"
	  "(--no-wait: do not).  --check only parses FILE and prints the steps.\n"
	  "Format: one step per line, '#' comments:\n"
	  "  write-trigger STREAM VALUE | wait-sem SEM >= VALUE [timeout 100ms] |\n"
	  "  delay 50us | inc-sem SEM VALUE | signal VALUE" },
	{ "create", "[--streams N] [--sems N] [--rank R] [--gid G] [--hold S]",
	  "Create a region, print its id, keep it until SIGINT/SIGTERM (or S seconds)." },
	{ "shm-sweep", "[--dry-run] [--pid PID] [--dir DIR]",
	  "Remove libfabric shm regions (/dev/shm/<pid>:<uid>:<n>) of processes that no\n"
	  "longer exist and no live process uses (the library's own sweep)." },
	{ "top", "[--count N] [--interval S] [--pid PID]",
	  "A live view of every proxy on the host (process, rank, worker, tasks by state,\n"
	  "op rate, worker CPU), refreshed every S seconds (default 1); --json: one object\n"
	  "per refresh.  See nproxyctl(8)." },
	{ "hang-report", "[--min-age S] [--pid PID]",
	  "Who waits for whom: every task in flight for at least S seconds (default 5),\n"
	  "with the trigger word, device program step and semaphore it waits on.  Exit 5\n"
	  "when a hang is found, 0 when not.  See nproxyctl(8)." },
	{ "help", "[COMMAND]", "This list, or one command's help." },
};

static const struct ctl_cmd_help *find_cmd_help(const char *name)
{
	for (size_t i = 0; i < sizeof(cmd_help) / sizeof(cmd_help[0]); i++)
		if (!strcmp(cmd_help[i].name, name))
			return &cmd_help[i];
	return NULL;
}

static int cmd_help_print(const char *name)
{
	const struct ctl_cmd_help *h;

	if (!name) {
		usage(stdout);
		return CTL_OK;
	}
	h = find_cmd_help(name);
	if (!h)
		return usage_err("unknown command '%s'", name);
	printf("Usage: nproxyctl [--json] %s%s%s\n\n%s\n", h->name, *h->args ? " " : "", h->args,
	       h->text);
	if (strcmp(h->name, "help") && strcmp(h->name, "shm-sweep") && strcmp(h->name, "program"))
		printf("\nREGION is a region id (see `nproxyctl regions`) or PID:FD.\n");
	printf("Exit status: 0 ok, 1 failed, 2 usage, 3 module not loaded, 4 permission denied.\n");
	return CTL_OK;
}

/* --version: this tool, and the module that is loaded (if one is). */
static int print_version(void)
{
	char ver[64] = "";
	FILE *f = fopen("/sys/module/nproxy/version", "r");
	struct nproxy_info info;
	int fd;

	if (f) {
		if (!fgets(ver, sizeof(ver), f))
			ver[0] = '\0';
		ver[strcspn(ver, "\n")] = '\0';
		fclose(f);
	}
	memset(&info, 0, sizeof(info));
	fd = open(CTL_DEV_PATH, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && ioctl(fd, NPROXY_IOC_GET_INFO, &info))
		info.abi_version = 0;
	if (fd >= 0)
		close(fd);
	if (ctl_json) {
		struct json_writer w;

		json_init(&w, stdout, false);
		json_obj_begin(&w, NULL);
		json_str(&w, "tool", "nproxyctl");
		json_str(&w, "version", NPROXY_VERSION);
		json_u64(&w, "abi_version", NPROXY_ABI_VERSION);
		json_bool(&w, "module_loaded", access("/sys/module/nproxy", F_OK) == 0);
		json_str(&w, "module_version", ver[0] ? ver : NULL);
		if (info.abi_version)
			json_u64(&w, "module_abi_version", info.abi_version);
		else
			json_str(&w, "module_abi_version", NULL);
		json_obj_end(&w);
		json_finish(&w);
		return CTL_OK;
	}
	printf("nproxyctl %s (ABI %u)\n", NPROXY_VERSION, NPROXY_ABI_VERSION);
	if (access("/sys/module/nproxy", F_OK))
		printf("module: not loaded\n");
	else if (info.abi_version)
		printf("module: nproxy %s (ABI %u)\n", ver[0] ? ver : "?", info.abi_version);
	else
		printf("module: nproxy %s (ABI unknown: cannot open %s)\n", ver[0] ? ver : "?",
		       CTL_DEV_PATH);
	return CTL_OK;
}

static int parse_u64_arg(const char *s, uint64_t *v)
{
	char *end;

	if (!*s || *s == '-')
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return (errno || *end) ? -1 : 0;
}

static int parse_u32_arg(const char *s, uint32_t *v)
{
	uint64_t x;

	if (parse_u64_arg(s, &x) || x > UINT32_MAX)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

static int rc(int neg) { return neg < 0 ? -neg : neg; }

/* ---- info ---- */
static int cmd_info(void)
{
	struct nproxy_info info;
	int fd = ctl_open_dev();

	if (fd < 0)
		return rc(fd);
	memset(&info, 0, sizeof(info));
	if (ioctl(fd, NPROXY_IOC_GET_INFO, &info)) {
		int e = errno;

		close(fd);
		return rc(ctl_errno_exit(e, "NPROXY_IOC_GET_INFO"));
	}
	close(fd);
	if (opt.json) {
		struct json_writer w;

		json_init(&w, stdout, false);
		json_obj_begin(&w, NULL);
		json_u64(&w, "abi_version", info.abi_version);
		json_u64(&w, "tool_abi_version", NPROXY_ABI_VERSION);
		json_u64(&w, "max_streams", info.max_streams);
		json_u64(&w, "max_sems", info.max_sems);
		json_u64(&w, "max_prog_steps", info.max_prog_steps);
		json_u64(&w, "max_wait_ns", info.max_wait_ns);
		json_u64(&w, "page_size", info.page_size);
		json_u64(&w, "sem_poll_ns", info.sem_poll_ns);
		json_obj_end(&w);
		json_finish(&w);
	} else {
		printf("abi_version     %u (tool built for %u)\n", info.abi_version, NPROXY_ABI_VERSION);
		printf("max_streams     %u\n", info.max_streams);
		printf("max_sems        %u\n", info.max_sems);
		printf("max_prog_steps  %u\n", info.max_prog_steps);
		printf("max_wait_ns     %" PRIu64 "\n", (uint64_t)info.max_wait_ns);
		printf("page_size       %u\n", info.page_size);
		printf("sem_poll_ns     %u\n", info.sem_poll_ns);
	}
	if (info.abi_version != NPROXY_ABI_VERSION)
		ctl_err("warning: module ABI %u, tool built for ABI %u",
			info.abi_version, NPROXY_ABI_VERSION);
	return CTL_OK;
}

/* ---- netlink read commands ---- */
struct print_ctx {
	struct json_writer w;
	unsigned long n;
	const char *time;	/* watch: when the event was received, or NULL */
	double mono_s;
};

static void print_attrs(struct print_ctx *pc, const struct ctl_attrs *a)
{
	if (opt.json) {
		json_obj_begin(&pc->w, NULL);
		if (pc->time) {
			json_str(&pc->w, "time", pc->time);
			json_double(&pc->w, "mono_s", pc->mono_s);
		}
		for (int i = 1; i <= NPROXY_A_MAX; i++) {
			if (!a->present[i] || !ctl_attr_name(i))
				continue;
			if (i == NPROXY_A_PROG_STATE)
				json_str(&pc->w, "prog_state", ctl_prog_state_name(a->val[i]));
			else if (i == NPROXY_A_EVENT_TYPE)
				json_str(&pc->w, "event", ctl_event_name(a->val[i]));
			else
				json_u64(&pc->w, ctl_attr_name(i), a->val[i]);
		}
		json_obj_end(&pc->w);
		return;
	}
	if (pc->time)
		printf("%s mono=%.6f ", pc->time, pc->mono_s);
	for (int i = 1, first = 1; i <= NPROXY_A_MAX; i++) {
		if (!a->present[i] || !ctl_attr_name(i))
			continue;
		if (!first)
			putchar(' ');
		first = 0;
		if (i == NPROXY_A_PROG_STATE)
			printf("prog_state=%s", ctl_prog_state_name(a->val[i]));
		else if (i == NPROXY_A_EVENT_TYPE)
			printf("event=%s", ctl_event_name(a->val[i]));
		else
			printf("%s=%" PRIu64, ctl_attr_name(i), a->val[i]);
	}
	putchar('\n');
}

static int print_cb(const struct ctl_attrs *a, void *arg)
{
	struct print_ctx *pc = arg;

	print_attrs(pc, a);
	pc->n++;
	return 0;
}

static int cmd_regions(void)
{
	struct print_ctx pc = { .n = 0 };
	struct ctl_nl *nl;
	int ret = ctl_nl_open(&nl);

	if (ret)
		return rc(ret);
	json_init(&pc.w, stdout, false);
	if (opt.json)
		json_arr_begin(&pc.w, NULL);
	ret = ctl_nl_request(nl, NPROXY_CMD_GET_REGIONS, true, print_cb, &pc);
	ctl_nl_close(nl);
	if (opt.json) {
		json_arr_end(&pc.w);
		json_finish(&pc.w);
	} else if (!ret && !pc.n) {
		printf("no regions\n");
	}
	return rc(ret);
}

static int cmd_stats(void)
{
	struct print_ctx pc = { .n = 0 };
	struct ctl_nl *nl;
	int ret = ctl_nl_open(&nl);

	if (ret)
		return rc(ret);
	json_init(&pc.w, stdout, false);
	if (opt.reset)
		ret = ctl_nl_request(nl, NPROXY_CMD_RESET_STATS, false, NULL, NULL);
	if (!ret)
		ret = ctl_nl_request(nl, NPROXY_CMD_GET_STATS, false, print_cb, &pc);
	ctl_nl_close(nl);
	if (opt.json)
		json_finish(&pc.w);
	return rc(ret);
}

/* When watch received an event: wall clock (UTC, to the microsecond) and
 * CLOCK_MONOTONIC, to line it up with logs (the library's are monotonic). */
static void watch_stamp(char *utc, size_t len, double *mono)
{
	struct timespec wall, m;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &wall);
	clock_gettime(CLOCK_MONOTONIC, &m);
	gmtime_r(&wall.tv_sec, &tm);
	n = strftime(utc, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(utc + n, len - n, ".%06ldZ", wall.tv_nsec / 1000);
	*mono = m.tv_sec + m.tv_nsec / 1e9;
}

static int watch_cb(const struct ctl_attrs *a, void *arg)
{
	struct print_ctx *pc = arg;
	char utc[48];
	double mono;

	if (a->cmd != NPROXY_CMD_EVENT)
		return 0;
	watch_stamp(utc, sizeof(utc), &mono);
	pc->time = utc;
	pc->mono_s = mono;
	if (opt.json)
		json_init(&pc->w, stdout, false);	/* one object per line */
	print_attrs(pc, a);
	pc->time = NULL;
	if (opt.json)
		json_finish(&pc->w);
	fflush(stdout);
	pc->n++;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmd_watch(void)
{
	struct print_ctx pc = { .n = 0 };
	double deadline = opt.timeout_s >= 0 ? now_s() + opt.timeout_s : 0;
	struct ctl_nl *nl;
	int ret = ctl_nl_open(&nl);

	if (ret)
		return rc(ret);
	ret = ctl_nl_subscribe(nl);
	if (!opt.json && !ret) {
		fprintf(stderr, "%s: watching nproxy events (Ctrl-C to stop)\n", ctl_prog);
	}
	while (!ret && !stop_requested) {
		if (opt.count && pc.n >= (unsigned long)opt.count)
			break;
		if (deadline && now_s() >= deadline)
			break;
		ret = ctl_nl_poll_events(nl, 200, watch_cb, &pc);
	}
	ctl_nl_close(nl);
	return rc(ret);
}

/* ---- region commands ---- */
static int cmd_state(int argc, char **argv)
{
	struct nproxy_region_state st;
	int fd;

	if (argc != 1)
		return usage_err("%s", "usage: state REGION");
	fd = ctl_region_open(argv[0], &st);
	if (fd < 0)
		return rc(fd);
	close(fd);
	if (opt.json) {
		struct json_writer w;

		json_init(&w, stdout, false);
		json_obj_begin(&w, NULL);
		json_u64(&w, "region_id", st.region_id);
		json_u64(&w, "owner_pid", st.owner_pid);
		json_u64(&w, "rank", st.rank);
		json_u64(&w, "gid", st.gid);
		json_u64(&w, "n_streams", st.n_streams);
		json_u64(&w, "n_sems", st.n_sems);
		json_arr_begin(&w, "triggers");
		for (uint32_t i = 0; i < st.n_streams && i < NPROXY_MAX_STREAMS; i++)
			json_u64(&w, NULL, st.triggers[i]);
		json_arr_end(&w);
		json_str(&w, "prog_state", ctl_prog_state_name(st.prog_state));
		json_u64(&w, "prog_seq", st.prog_seq);
		json_u64(&w, "triggers_written", st.triggers_written);
		json_u64(&w, "events_signalled", st.events_signalled);
		json_obj_end(&w);
		json_finish(&w);
		return CTL_OK;
	}
	printf("region_id         %u\n", st.region_id);
	printf("owner_pid         %u\n", st.owner_pid);
	printf("rank              %u\n", st.rank);
	printf("gid               %u\n", st.gid);
	printf("n_streams         %u\n", st.n_streams);
	printf("n_sems            %u\n", st.n_sems);
	printf("triggers         ");
	for (uint32_t i = 0; i < st.n_streams && i < NPROXY_MAX_STREAMS; i++)
		printf(" %#x", st.triggers[i]);
	printf("\n");
	printf("prog_state        %s\n", ctl_prog_state_name(st.prog_state));
	printf("prog_seq          %" PRIu64 "\n", (uint64_t)st.prog_seq);
	printf("triggers_written  %" PRIu64 "\n", (uint64_t)st.triggers_written);
	printf("events_signalled  %" PRIu64 "\n", (uint64_t)st.events_signalled);
	return CTL_OK;
}

static int cmd_trigger(int argc, char **argv)
{
	struct nproxy_region_state st;
	struct nproxy_trigger_write tw = { .value = 1 };
	int fd;

	if (argc < 2 || argc > 3)
		return usage_err("%s", "usage: trigger REGION STREAM [VALUE]");
	if (parse_u32_arg(argv[1], &tw.stream))
		return usage_err("bad stream '%s'", argv[1]);
	if (argc == 3 && parse_u32_arg(argv[2], &tw.value))
		return usage_err("bad trigger value '%s' (a u32)", argv[2]);
	fd = ctl_region_open(argv[0], &st);
	if (fd < 0)
		return rc(fd);
	if (ioctl(fd, NPROXY_IOC_WRITE_TRIGGER, &tw)) {
		int e = errno;

		close(fd);
		if (e == EINVAL) {
			ctl_err("region %u: stream %u rejected (region has %u streams)",
				st.region_id, tw.stream, st.n_streams);
			return CTL_FAIL;
		}
		return rc(ctl_errno_exit(e, "NPROXY_IOC_WRITE_TRIGGER"));
	}
	close(fd);
	return CTL_OK;
}

static int cmd_sem(int argc, char **argv)
{
	struct nproxy_region_state st;
	struct nproxy_sem_op op = { 0 };
	unsigned long req;
	uint64_t value = 0;
	const char *name;
	int fd, want;

	if (argc < 3)
		return usage_err("%s", "usage: sem get|set|inc REGION SEM [VALUE]");
	if (!strcmp(argv[0], "get")) {
		req = NPROXY_IOC_SEM_GET, want = 3, name = "NPROXY_IOC_SEM_GET";
	} else if (!strcmp(argv[0], "set")) {
		req = NPROXY_IOC_SEM_SET, want = 4, name = "NPROXY_IOC_SEM_SET";
	} else if (!strcmp(argv[0], "inc")) {
		req = NPROXY_IOC_SEM_INC, want = 4, name = "NPROXY_IOC_SEM_INC";
	} else {
		return usage_err("unknown sem operation '%s' (get, set, inc)", argv[0]);
	}
	if (argc != want)
		return usage_err("sem %s: wrong number of arguments", argv[0]);
	if (parse_u32_arg(argv[2], &op.sem))
		return usage_err("bad semaphore index '%s'", argv[2]);
	if (want == 4 && parse_u64_arg(argv[3], &value))
		return usage_err("bad value '%s' (a u64)", argv[3]);
	op.value = value;
	fd = ctl_region_open(argv[1], &st);
	if (fd < 0)
		return rc(fd);
	if (ioctl(fd, req, &op)) {
		int e = errno;

		close(fd);
		if (e == EINVAL) {
			ctl_err("region %u: semaphore %u rejected (region has %u semaphores)",
				st.region_id, op.sem, st.n_sems);
			return CTL_FAIL;
		}
		return rc(ctl_errno_exit(e, name));
	}
	close(fd);
	if (req == NPROXY_IOC_SEM_GET) {
		if (opt.json) {
			struct json_writer w;

			json_init(&w, stdout, false);
			json_obj_begin(&w, NULL);
			json_u64(&w, "region_id", st.region_id);
			json_u64(&w, "sem", op.sem);
			json_u64(&w, "value", op.value);
			json_obj_end(&w);
			json_finish(&w);
		} else {
			printf("%" PRIu64 "\n", (uint64_t)op.value);
		}
	}
	return CTL_OK;
}

static int load_program(const char *path, struct nproxy_prog_step **steps, uint32_t *n)
{
	char err[256];
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;

	if (!f) {
		ctl_err("%s: %s", path, strerror(errno));
		return CTL_FAIL;
	}
	*steps = calloc(NPROXY_MAX_PROG_STEPS, sizeof(**steps));
	if (!*steps) {
		ctl_err("out of memory");
		return CTL_FAIL;
	}
	if (prog_text_parse(f, path, *steps, NPROXY_MAX_PROG_STEPS, n, err, sizeof(err))) {
		ctl_err("%s", err);
		if (f != stdin)
			fclose(f);
		free(*steps);
		return CTL_USAGE;
	}
	if (f != stdin)
		fclose(f);
	return CTL_OK;
}

static void print_result(const struct nproxy_region_state *st, const struct nproxy_prog_result *r)
{
	if (opt.json) {
		struct json_writer w;

		json_init(&w, stdout, false);
		json_obj_begin(&w, NULL);
		json_u64(&w, "region_id", st->region_id);
		json_u64(&w, "seq", r->seq);
		json_str(&w, "state", ctl_prog_state_name(r->state));
		json_u64(&w, "steps_done", r->steps_done);
		json_u64(&w, "failed_step", r->failed_step);
		json_i64(&w, "error", r->error);
		json_u64(&w, "elapsed_ns", r->elapsed_ns);
		json_obj_end(&w);
		json_finish(&w);
	} else {
		printf("region %u program %" PRIu64 ": %s, %u steps done", st->region_id,
		       (uint64_t)r->seq, ctl_prog_state_name(r->state), r->steps_done);
		if (r->state != NPROXY_PROG_DONE)
			printf(", failed at step %u (%s)", r->failed_step, strerror(-r->error));
		printf(", %.3f ms\n", r->elapsed_ns / 1e6);
	}
}

static int cmd_program(int argc, char **argv)
{
	struct nproxy_region_state st;
	struct nproxy_prog_submit sub = { 0 };
	struct nproxy_prog_result res;
	struct nproxy_prog_step *steps;
	double deadline;
	uint32_t n;
	int fd, ret;

	if (opt.check) {
		char line[128];

		if (argc != 1)
			return usage_err("%s", "usage: program --check FILE");
		ret = load_program(argv[0], &steps, &n);
		if (ret)
			return ret;
		if (opt.json) {
			struct json_writer w;

			json_init(&w, stdout, false);
			json_obj_begin(&w, NULL);
			json_str(&w, "file", argv[0]);
			json_arr_begin(&w, "steps");
			for (uint32_t i = 0; i < n; i++) {
				prog_text_format(&steps[i], line, sizeof(line));
				json_str(&w, NULL, line);
			}
			json_arr_end(&w);
			json_obj_end(&w);
			json_finish(&w);
		}
		for (uint32_t i = 0; i < n && !opt.json; i++) {
			prog_text_format(&steps[i], line, sizeof(line));
			printf("%u: %s\n", i, line);
		}
		free(steps);
		return CTL_OK;
	}
	if (argc != 2)
		return usage_err("%s", "usage: program REGION FILE");
	ret = load_program(argv[1], &steps, &n);
	if (ret)
		return ret;
	fd = ctl_region_open(argv[0], &st);
	if (fd < 0) {
		free(steps);
		return rc(fd);
	}
	sub.n_steps = n;
	sub.steps = (uintptr_t)steps;
	if (ioctl(fd, NPROXY_IOC_SUBMIT_PROG, &sub)) {
		int e = errno;

		free(steps);
		close(fd);
		if (e == EBUSY) {
			ctl_err("region %u: a program is running or its result was not collected yet",
				st.region_id);
			return CTL_FAIL;
		}
		if (e == EINVAL) {
			ctl_err("region %u: program rejected by the module (a stream or semaphore index beyond the region's %u streams / %u semaphores?)",
				st.region_id, st.n_streams, st.n_sems);
			return CTL_FAIL;
		}
		return rc(ctl_errno_exit(e, "NPROXY_IOC_SUBMIT_PROG"));
	}
	free(steps);
	if (opt.no_wait) {
		if (opt.json)
			printf("{\"region_id\":%u,\"seq\":%" PRIu64 "}\n", st.region_id, (uint64_t)sub.seq);
		else
			printf("region %u program %" PRIu64 " submitted\n", st.region_id, (uint64_t)sub.seq);
		close(fd);
		return CTL_OK;
	}
	deadline = now_s() + (opt.timeout_s >= 0 ? opt.timeout_s : 70.0);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		memset(&res, 0, sizeof(res));
		if (!ioctl(fd, NPROXY_IOC_COLLECT_PROG, &res))
			break;
		if (errno != EAGAIN) {
			int e = errno;

			close(fd);
			return rc(ctl_errno_exit(e, "NPROXY_IOC_COLLECT_PROG"));
		}
		if (stop_requested || now_s() >= deadline) {
			ioctl(fd, NPROXY_IOC_CANCEL_PROG);
			ctl_err("region %u program %" PRIu64 ": %s, cancelled", st.region_id,
				(uint64_t)sub.seq, stop_requested ? "interrupted" : "timed out");
			while (ioctl(fd, NPROXY_IOC_COLLECT_PROG, &res) && errno == EAGAIN)
				poll(&pfd, 1, 10);
			close(fd);
			return CTL_FAIL;
		}
		poll(&pfd, 1, 100);
	}
	close(fd);
	print_result(&st, &res);
	return res.state == NPROXY_PROG_DONE ? CTL_OK : CTL_FAIL;
}

static int cmd_create(void)
{
	struct nproxy_region_create rc_ = {
		.n_streams = opt.streams, .n_sems = opt.sems, .rank = opt.rank, .gid = opt.gid,
	};
	struct nproxy_region_state st;
	double deadline = opt.hold_s > 0 ? now_s() + opt.hold_s : 0;
	int dev = ctl_open_dev(), fd;

	if (dev < 0)
		return rc(dev);
	fd = ioctl(dev, NPROXY_IOC_CREATE_REGION, &rc_);
	if (fd < 0) {
		int e = errno;

		close(dev);
		if (e == EINVAL) {
			ctl_err("region rejected: streams must be 1..%u, semaphores 0..%u",
				NPROXY_MAX_STREAMS, NPROXY_MAX_SEMS);
			return CTL_FAIL;
		}
		return rc(ctl_errno_exit(e, "NPROXY_IOC_CREATE_REGION"));
	}
	close(dev);
	memset(&st, 0, sizeof(st));
	if (ioctl(fd, NPROXY_IOC_GET_STATE, &st)) {
		int e = errno;

		close(fd);
		return rc(ctl_errno_exit(e, "NPROXY_IOC_GET_STATE"));
	}
	if (opt.json)
		printf("{\"region_id\":%u,\"pid\":%d,\"fd\":%d}\n", st.region_id, (int)getpid(), fd);
	else
		printf("region %u (pid %d fd %d)\n", st.region_id, (int)getpid(), fd);
	fflush(stdout);
	while (!stop_requested && (!deadline || now_s() < deadline))
		usleep(50 * 1000);
	close(fd);
	return CTL_OK;
}

int main(int argc, char **argv)
{
	enum { O_COUNT = 256, O_TIMEOUT, O_RESET, O_CHECK, O_NOWAIT, O_STREAMS, O_SEMS,
	       O_RANK, O_GID, O_HOLD, O_DRY_RUN, O_PID, O_DIR };
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "count", required_argument, NULL, O_COUNT },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "reset", no_argument, NULL, O_RESET },
		{ "check", no_argument, NULL, O_CHECK },
		{ "no-wait", no_argument, NULL, O_NOWAIT },
		{ "streams", required_argument, NULL, O_STREAMS },
		{ "sems", required_argument, NULL, O_SEMS },
		{ "rank", required_argument, NULL, O_RANK },
		{ "gid", required_argument, NULL, O_GID },
		{ "hold", required_argument, NULL, O_HOLD },
		{ "dry-run", no_argument, NULL, O_DRY_RUN },
		{ "pid", required_argument, NULL, O_PID },
		{ "dir", required_argument, NULL, O_DIR },
		{ 0 }
	};
	struct sigaction sa = { .sa_handler = on_signal };
	const char *cmd;
	char *end;
	int c;

	bool help = false, version = false;

	/* top, hang-report: self-contained, with options of their own (ctl_top.c). */
	if (ctl_proxy_cmd_match(argc, argv))
		return ctl_proxy_main(argc, argv);
	opterr = 0;	/* our own message, JSON with --json */
	while ((c = getopt_long(argc, argv, "jhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': opt.json = ctl_json = true; break;
		/* After the loop: `nproxyctl sem --help` is sem's help. */
		case 'h': help = true; break;
		case 'V': version = true; break;
		case O_COUNT:
			opt.count = strtol(optarg, &end, 10);
			if (*end || opt.count <= 0)
				return usage_err("--count: '%s' is not a positive integer", optarg);
			break;
		case O_TIMEOUT:
		case O_HOLD: {
			double v = strtod(optarg, &end);

			if (*end || !*optarg || v < 0 || v > 86400)
				return usage_err("'%s' is not a number of seconds", optarg);
			if (c == O_TIMEOUT)
				opt.timeout_s = v;
			else
				opt.hold_s = v;
			break;
		}
		case O_RESET: opt.reset = true; break;
		case O_DRY_RUN: opt.dry_run = true; break;
		case O_DIR: opt.dir = optarg; break;
		case O_PID: {
			uint32_t v;

			if (parse_u32_arg(optarg, &v) || !v || v > 0x3fffffff)
				return usage_err("--pid: '%s' is not a process id", optarg);
			opt.pid = (int)v;
			break;
		}
		case O_CHECK: opt.check = true; break;
		case O_NOWAIT: opt.no_wait = true; break;
		case O_STREAMS:
		case O_SEMS:
		case O_RANK:
		case O_GID: {
			uint32_t v;

			if (parse_u32_arg(optarg, &v))
				return usage_err("'%s' is not a u32", optarg);
			if (c == O_STREAMS) opt.streams = v;
			else if (c == O_SEMS) opt.sems = v;
			else if (c == O_RANK) opt.rank = v;
			else opt.gid = v;
			break;
		}
		default:
			return usage_err("unknown option or missing argument: '%s'", argv[optind - 1]);
		}
	}
	if (version)
		return print_version();
	if (help)
		return cmd_help_print(optind < argc ? argv[optind] : NULL);
	if (optind >= argc)
		return usage_err("%s", "missing command");
	if (!strcmp(argv[optind], "help")) {
		if (argc - optind > 2)
			return usage_err("%s", "usage: help [COMMAND]");
		return cmd_help_print(optind + 1 < argc ? argv[optind + 1] : NULL);
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	cmd = argv[optind];
	argc -= optind + 1;
	argv += optind + 1;
	if (!strcmp(cmd, "info") && !argc)
		return cmd_info();
	if (!strcmp(cmd, "regions") && !argc)
		return cmd_regions();
	if (!strcmp(cmd, "stats") && !argc)
		return cmd_stats();
	if (!strcmp(cmd, "watch") && !argc)
		return cmd_watch();
	if (!strcmp(cmd, "create") && !argc)
		return cmd_create();
	if (!strcmp(cmd, "trigger"))
		return cmd_trigger(argc, argv);
	if (!strcmp(cmd, "state"))
		return cmd_state(argc, argv);
	if (!strcmp(cmd, "sem"))
		return cmd_sem(argc, argv);
	if (!strcmp(cmd, "program"))
		return cmd_program(argc, argv);
	if (!strcmp(cmd, "shm-sweep") && !argc)
		return cmd_shm_sweep(opt.dry_run, opt.pid, opt.dir, opt.json);
	if (!strcmp(cmd, "info") || !strcmp(cmd, "regions") || !strcmp(cmd, "stats") ||
	    !strcmp(cmd, "watch") || !strcmp(cmd, "create") || !strcmp(cmd, "shm-sweep"))
		return usage_err("%s takes no arguments", cmd);
	return usage_err("unknown command '%s'", cmd);
}
