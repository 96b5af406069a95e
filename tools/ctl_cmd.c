// SPDX-License-Identifier: GPL-2.0
/*
 * What every nproxyctl subcommand handler uses (ctl_cmd.h): its option
 * loop, its --help from its row of the table, the stop flag of the
 * commands that wait and their clock.  The table itself and the dispatch
 * are nproxyctl.c's; a handler never calls back into them.
 */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include "ctl.h"
#include "ctl_cmd.h"

volatile sig_atomic_t ctl_stop_requested;

double ctl_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int ctl_cmd_print_help(const struct ctl_cmd *c)
{
	printf("Usage: nproxyctl [--json] %s%s%s\n\n%s\n", c->name, *c->usage ? " " : "",
	       c->usage, c->help);
	if (c->names_region)
		printf("\n" CTL_REGION_TEXT);
	printf(CTL_EXIT_TEXT);
	return CTL_OK;
}

int ctl_next_option(const struct ctl_cmd *cmd, int argc, char **argv,
		    const struct option *longopts, int *exit_code)
{
	int c;

	opterr = 0;	/* our own messages, JSON with --json */
	for (;;) {
		c = getopt_long(argc, argv, ":jh", longopts, NULL);
		switch (c) {
		case -1:
			return 0;
		case 'j':
			ctl_json = true;
			continue;
		case 'h':
			*exit_code = ctl_cmd_print_help(cmd);
			return -1;
		case ':':
			*exit_code = ctl_usage_err("%s: option '%s' needs an argument", cmd->name,
						   argv[optind - 1]);
			return -1;
		case '?':
			/* "-1" reads as an option: say what it is instead. */
			if (optopt >= '0' && optopt <= '9')
				*exit_code = ctl_usage_err("%s: '%s' is not an option, and values are unsigned: no '+' or '-' sign",
							   cmd->name, argv[optind - 1]);
			else
				*exit_code = ctl_usage_err("%s: unknown option '%s'", cmd->name,
							   argv[optind - 1]);
			return -1;
		default:
			return c;
		}
	}
}

int ctl_no_operands(const struct ctl_cmd *cmd, int c, int code, int argc, bool *done)
{
	*done = true;
	if (c < 0)
		return code;
	if (optind < argc)
		return ctl_usage_err("%s takes no arguments", cmd->name);
	*done = false;
	return CTL_OK;
}
