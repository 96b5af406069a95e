/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nproxyctl's subcommands: one row each in the table of nproxyctl.c, which
 * `nproxyctl help`, `nproxyctl CMD --help`, the dispatch and the bash
 * completion (dist/nproxyctl.bash-completion, through `help --list` and
 * `CMD --help`) all read.  Each handler parses its own options with
 * ctl_next_option() into a struct of its own.
 */
#ifndef NPROXY_TOOLS_CTL_CMD_H
#define NPROXY_TOOLS_CTL_CMD_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>

struct ctl_cmd;

/* A subcommand: argv[0] is its name; returns an exit status (enum ctl_exit). */
typedef int ctl_handler(const struct ctl_cmd *cmd, int argc, char **argv);

struct ctl_cmd {
	const char *name;
	const char *group;	/* the heading it is listed under in `nproxyctl help` */
	const char *usage;	/* its arguments and options, after the name */
	const char *summary;	/* one line in `nproxyctl help` */
	const char *help;	/* `nproxyctl CMD --help`: what it does, at length */
	bool names_region;	/* takes a REGION: its help says how to name one */
	ctl_handler *handler;
};

/* Every subcommand accepts these two: put them first in its longopts. */
#define CTL_COMMON_OPTIONS \
	{ "json", no_argument, NULL, 'j' }, \
	{ "help", no_argument, NULL, 'h' }

/*
 * A subcommand's table of long options, called name: CTL_COMMON_OPTIONS,
 * then its own (struct option initializers, at least one), then the end.
 */
#define CTL_LONGOPTS(name, ...) \
	static const struct option name[] = { CTL_COMMON_OPTIONS, __VA_ARGS__, { 0 } }

/*
 * getopt_long over a subcommand's argv with its own longopts (long options
 * only, CTL_COMMON_OPTIONS handled here).  Returns the next option of the
 * command's own (its optarg in optarg); 0 once every option is read, the
 * operands being argv[optind..argc); or -1 when the command ends now with
 * *exit_code: its --help was printed (CTL_OK) or a usage error (CTL_USAGE,
 * message printed).
 */
int ctl_next_option(const struct ctl_cmd *cmd, int argc, char **argv,
		    const struct option *longopts, int *exit_code);

/*
 * After a command's option loop: c is ctl_next_option()'s last return and
 * code its exit status.  *done and the exit status when the command ends
 * here (its --help, a usage error, or an operand: it takes none); else
 * *done false and CTL_OK.
 */
int ctl_no_operands(const struct ctl_cmd *cmd, int c, int code, int argc, bool *done);

/* The help texts' closing lines: how to name a REGION, the exit statuses. */
#define CTL_EXIT_TEXT "Exit status: 0 ok, 1 failed, 2 usage, 3 module not loaded, 4 permission denied.\n"
#define CTL_REGION_TEXT \
	"REGION is a region id (see `nproxyctl regions`) or PID:FD; the owner's fd is\n" \
	"duplicated with pidfd_getfd(2), which needs ptrace access to the owner.\n"

/* `nproxyctl CMD --help` from the command's row; CTL_OK. */
int ctl_cmd_print_help(const struct ctl_cmd *cmd);

/* A usage error (ctl_error.c): the message (JSON with --json), a hint, CTL_USAGE. */
int ctl_usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* SIGINT or SIGTERM arrived: commands that wait stop at their next check. */
extern volatile sig_atomic_t ctl_stop_requested;

/* CLOCK_MONOTONIC in seconds, for deadlines. */
double ctl_now_s(void);

/* The -exit_code convention of ctl.h turned into an exit status. */
static inline int ctl_exit_status(int neg)
{
	return neg < 0 ? -neg : neg;
}

/* Handlers (one concept per file). */
/* ctl_cmd_module.c: the module as a whole */
ctl_handler ctl_cmd_info, ctl_cmd_regions, ctl_cmd_stats, ctl_cmd_watch;
/* ctl_cmd_region.c: one region */
ctl_handler ctl_cmd_state, ctl_cmd_trigger, ctl_cmd_sem, ctl_cmd_create;
/* ctl_cmd_program.c: device programs */
ctl_handler ctl_cmd_program;
/* ctl_top.c, ctl_hang.c: the proxies' published state */
ctl_handler ctl_cmd_top, ctl_cmd_hang_report;
/* ctl_shm.c: host chores */
ctl_handler ctl_cmd_shm_sweep;

#endif
