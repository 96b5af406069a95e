// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl: inspect and drive nproxy.ko through its ioctls (on
 * /dev/nproxy and region fds) and its generic netlink family.  It holds no
 * logic of its own beyond naming regions; see nproxyctl(8).  One host
 * chore besides: shm-sweep (ctl_shm.c), the library's own sweep.
 *
 * This file is the subcommand table and what reads it: the dispatch, the
 * help texts and the option loop every subcommand uses (ctl_cmd.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "ctl.h"
#include "ctl_cmd.h"
#include "json_writer.h"

#define PROGRAM_FORMAT \
	"Program format: one step per line, '#' comments:\n" \
	"  write-trigger STREAM VALUE | wait-sem SEM >= VALUE [timeout 100ms] |\n" \
	"  delay 50us | inc-sem SEM VALUE | signal VALUE\n"

static int ctl_cmd_help(const struct ctl_cmd *cmd, int argc, char **argv);

static const char GROUP_READ[] = "Read commands (--json for machine-readable output):";
static const char GROUP_WRITE[] = "Write commands:";
static const char GROUP_PROXY[] =
	"Proxies (the state libnproxy publishes in each region; see nproxyctl top --help):";
static const char GROUP_HOST[] = "Host:";

/* Every subcommand, in the order `nproxyctl help` lists them. */
static const struct ctl_cmd commands[] = {
	{ "info", GROUP_READ, "", "ABI version and limits of the loaded module",
	  "ABI version and limits of the loaded module (NPROXY_IOC_GET_INFO).",
	  false, ctl_cmd_info },
	{ "regions", GROUP_READ, "", "every live region (netlink dump)",
	  "Every live region, from the module's generic netlink dump.", false, ctl_cmd_regions },
	{ "stats", GROUP_READ, "[--reset]",
	  "module-wide counters (--reset: zero them, needs CAP_NET_ADMIN)",
	  "Module-wide counters.  --reset zeroes them first (needs CAP_NET_ADMIN).",
	  false, ctl_cmd_stats },
	{ "watch", GROUP_READ, "[--count N] [--timeout S]",
	  "print netlink events, timestamped, until interrupted",
	  "Print the module's netlink events as they arrive, each with the UTC time it was\n"
	  "received (\"time\") and CLOCK_MONOTONIC seconds (\"mono_s\"), until Ctrl-C, N events\n"
	  "or S seconds.  With --json, one object per line.", false, ctl_cmd_watch },
	{ "state", GROUP_READ, "REGION", "one region's state (triggers, program, counters)",
	  "One region's state: triggers, program, counters.", true, ctl_cmd_state },
	{ "sem", GROUP_READ, "get REGION SEM | set REGION SEM VALUE | inc REGION SEM VALUE",
	  "read (get), set or add to (inc) a semaphore",
	  "Read, set or add to a semaphore of a region.", true, ctl_cmd_sem },
	{ "trigger", GROUP_WRITE, "REGION STREAM [VALUE]",
	  "write a trigger word as the device would (VALUE default 1)",
	  "Write a trigger word as the device would (VALUE default 1).", true, ctl_cmd_trigger },
	{ "program", GROUP_WRITE, "REGION FILE [--no-wait] [--timeout S] | --check FILE",
	  "submit a device program written in the text format (--check: only parse it)",
	  "Submit a device program written in the text format and wait for its result\n"
	  "(--no-wait: do not; --timeout: at most S seconds, default 70, then cancel it).\n"
	  "--check only parses FILE and prints the steps.\n" PROGRAM_FORMAT,
	  true, ctl_cmd_program },
	{ "create", GROUP_WRITE, "[--streams N] [--sems N] [--rank R] [--gid G] [--hold S]",
	  "create a region, print its id, keep it until SIGINT/SIGTERM",
	  "Create a region, print its id, keep it until SIGINT/SIGTERM (or S seconds).",
	  false, ctl_cmd_create },
	{ "top", GROUP_PROXY, "[--count N] [--interval S] [--pid PID]",
	  "live view of every proxy on the host",
	  "A live view of every proxy on the host (process, rank, worker, tasks by state,\n"
	  "op rate, worker CPU, device program), refreshed every S seconds (default 1,\n"
	  "at least 0.05) until interrupted or N refreshes; --json: one object per\n"
	  "refresh.  --pid: only the job of PID (a rank's pid or its launcher's).\n"
	  "Reading another user's process needs ptrace access (root).  See nproxyctl(8).",
	  false, ctl_cmd_top },
	{ "hang-report", GROUP_PROXY, "[--min-age S] [--pid PID]",
	  "who waits for whom in a stuck job (exit 5: hang found)",
	  "Who waits for whom: every task in flight for at least S seconds (default 5),\n"
	  "with its evidence (the trigger word, the device program's step and semaphore,\n"
	  "stopped or missing peer ranks).  Exit 5 when a hang is found, 0 when not.\n"
	  "--pid: only the job of PID (a rank's pid or its launcher's).  Reading another\n"
	  "user's process needs ptrace access (root).  See nproxyctl(8).",
	  false, ctl_cmd_hang_report },
	{ "shm-sweep", GROUP_HOST, "[--dry-run] [--pid PID] [--dir DIR]",
	  "remove libfabric shm regions of processes that are gone",
	  "Remove libfabric shm regions (/dev/shm/<pid>:<uid>:<n>) of processes that no\n"
	  "longer exist and no live process uses (the library's own sweep).  --dry-run:\n"
	  "only list them; --pid: only that process's; --dir: instead of /dev/shm.",
	  false, ctl_cmd_shm_sweep },
	{ "help", NULL, "[COMMAND] | --list",
	  "this list, or one command's help",
	  "This list, or one command's help.  --list: every command's name, one a line\n"
	  "(for shell completion).", false, ctl_cmd_help },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void on_signal(int sig)
{
	(void)sig;
	ctl_stop_requested = 1;
}

static const struct ctl_cmd *find_command(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

/* `nproxyctl help`: every command under its heading, from the table. */
static void print_usage(FILE *f)
{
	const char *group = NULL;

	fprintf(f, "Usage: nproxyctl [--json] COMMAND [ARGS]\n"
		   "       nproxyctl help [COMMAND] | COMMAND --help | --version\n");
	for (size_t i = 0; i < N_COMMANDS; i++) {
		const struct ctl_cmd *c = &commands[i];
		char first[128];

		if (!c->group)
			continue;
		if (c->group != group)
			fprintf(f, "\n%s\n", c->group);
		group = c->group;
		snprintf(first, sizeof(first), "%s%s%s", c->name, *c->usage ? " " : "", c->usage);
		if (strlen(first) < 30)
			fprintf(f, "  %-30s%s\n", first, c->summary);
		else
			fprintf(f, "  %s\n  %-30s%s\n", first, "", c->summary);
	}
	fprintf(f, "\n" CTL_REGION_TEXT PROGRAM_FORMAT CTL_EXIT_TEXT);
}

/* `nproxyctl help CMD`, `nproxyctl --help CMD`. */
static int print_command_help(const char *name)
{
	const struct ctl_cmd *c = find_command(name);

	if (!c)
		return ctl_usage_err("unknown command '%s'", name);
	return ctl_cmd_print_help(c);
}

static int ctl_cmd_help(const struct ctl_cmd *cmd, int argc, char **argv)
{
	enum { O_LIST = 256 };
	CTL_LONGOPTS(longopts, { "list", no_argument, NULL, O_LIST });
	bool list = false;
	int c, code = CTL_OK;

	while ((c = ctl_next_option(cmd, argc, argv, longopts, &code)) > 0)
		list = true;	/* O_LIST */
	if (c < 0)
		return code;
	if (argc - optind > 1 || (list && argc - optind))
		return ctl_usage_err("usage: help %s", cmd->usage);
	if (list) {
		for (size_t i = 0; i < N_COMMANDS; i++)
			printf("%s\n", commands[i].name);
		return CTL_OK;
	}
	if (optind < argc)
		return print_command_help(argv[optind]);
	print_usage(stdout);
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

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	struct sigaction sa = { .sa_handler = on_signal };
	bool help = false, version = false;
	const struct ctl_cmd *cmd;
	int c;

	/* Options before the command: only these three; '+' stops at the command. */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+jhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': ctl_json = true; break;
		case 'h': help = true; break;
		case 'V': version = true; break;
		default:
			return ctl_usage_err("unknown option '%s' before the command (a command's own options go after it)",
					     argv[optind - 1]);
		}
	}
	if (version)
		return print_version();
	if (help && optind < argc)
		return print_command_help(argv[optind]);
	if (help) {
		print_usage(stdout);
		return CTL_OK;
	}
	if (optind >= argc)
		return ctl_usage_err("%s", "missing command");
	cmd = find_command(argv[optind]);
	if (!cmd)
		return ctl_usage_err("unknown command '%s'", argv[optind]);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	argc -= optind;
	argv += optind;
	optind = 0;	/* glibc: start over, argv[0] being the command's name */
	return cmd->handler(cmd, argc, argv);
}
