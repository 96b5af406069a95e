// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl info, regions, stats, watch: the module as a whole, through
 * NPROXY_IOC_GET_INFO and the generic netlink family (dumps and events).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "ctl.h"
#include "ctl_cmd.h"
#include "json_writer.h"

static const struct option no_options[] = { CTL_COMMON_OPTIONS, { 0 } };

/* Options, then no operand: 0 to go on, else the exit status. */
static int no_operands(const struct ctl_cmd *cmd, int argc, char **argv, bool *done)
{
	int c, code = CTL_OK;

	*done = true;
	c = ctl_next_option(cmd, argc, argv, no_options, &code);
	return ctl_no_operands(cmd, c, code, argc, done);
}

int ctl_cmd_info(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct nproxy_info info;
	bool done;
	int fd, code = no_operands(cmd, argc, argv, &done);

	if (done)
		return code;
	fd = ctl_open_dev();
	if (fd < 0)
		return ctl_exit_status(fd);
	memset(&info, 0, sizeof(info));
	if (ioctl(fd, NPROXY_IOC_GET_INFO, &info)) {
		int e = errno;

		close(fd);
		return ctl_exit_status(ctl_errno_exit(e, "NPROXY_IOC_GET_INFO"));
	}
	close(fd);
	if (ctl_json) {
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

struct print_ctx {
	struct json_writer w;
	unsigned long n;
	const char *time;	/* watch: when the event was received, or NULL */
	double mono_s;
};

/*
 * The netlink socket and the printer a read command reports through, its
 * JSON an array of objects with array: 0, or an exit status.
 */
static int open_printing(struct ctl_nl **nl, struct print_ctx *pc, bool array)
{
	int ret = ctl_nl_open(nl);

	if (ret)
		return ctl_exit_status(ret);
	json_init(&pc->w, stdout, false);
	if (array && ctl_json)
		json_arr_begin(&pc->w, NULL);
	return 0;
}

static void print_attrs(struct print_ctx *pc, const struct ctl_attrs *a)
{
	if (ctl_json) {
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

int ctl_cmd_regions(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct print_ctx pc = { .n = 0 };
	struct ctl_nl *nl;
	bool done;
	int ret = no_operands(cmd, argc, argv, &done);

	if (done)
		return ret;
	ret = open_printing(&nl, &pc, true);
	if (ret)
		return ret;
	ret = ctl_nl_request(nl, NPROXY_CMD_GET_REGIONS, true, print_cb, &pc);
	ctl_nl_close(nl);
	if (ctl_json) {
		json_arr_end(&pc.w);
		json_finish(&pc.w);
	} else if (!ret && !pc.n) {
		printf("no regions\n");
	}
	return ctl_exit_status(ret);
}

int ctl_cmd_stats(const struct ctl_cmd *cmd, int argc, char **argv)
{
	enum { O_RESET = 256 };
	CTL_LONGOPTS(longopts, { "reset", no_argument, NULL, O_RESET });
	struct print_ctx pc = { .n = 0 };
	bool reset = false, done;
	struct ctl_nl *nl;
	int c, ret = CTL_OK;

	while ((c = ctl_next_option(cmd, argc, argv, longopts, &ret)) > 0)
		reset = true;	/* O_RESET, the only option of its own */
	ret = ctl_no_operands(cmd, c, ret, argc, &done);
	if (done)
		return ret;
	ret = open_printing(&nl, &pc, false);
	if (ret)
		return ret;
	if (reset)
		ret = ctl_nl_request(nl, NPROXY_CMD_RESET_STATS, false, NULL, NULL);
	if (!ret)
		ret = ctl_nl_request(nl, NPROXY_CMD_GET_STATS, false, print_cb, &pc);
	ctl_nl_close(nl);
	if (ctl_json)
		json_finish(&pc.w);
	return ctl_exit_status(ret);
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
	if (ctl_json)
		json_init(&pc->w, stdout, false);	/* one object per line */
	print_attrs(pc, a);
	pc->time = NULL;
	if (ctl_json)
		json_finish(&pc->w);
	fflush(stdout);
	pc->n++;
	return 0;
}

/* watch's options: when to stop besides Ctrl-C. */
struct watch_opts {
	uint64_t count;		/* after this many events (0: no limit) */
	double timeout_s;	/* after this long (< 0: no limit) */
};

static int watch_parse(const struct ctl_cmd *cmd, int argc, char **argv, struct watch_opts *wo,
		       bool *done)
{
	enum { O_COUNT = 256, O_TIMEOUT };
	CTL_LONGOPTS(longopts,
		{ "count", required_argument, NULL, O_COUNT },
		{ "timeout", required_argument, NULL, O_TIMEOUT });
	char why[200];
	int c, code = CTL_OK;

	*done = true;
	while ((c = ctl_next_option(cmd, argc, argv, longopts, &code)) > 0) {
		if (c == O_COUNT &&
		    cli_parse_u64("--count", optarg, 1, UINT64_MAX, &wo->count, why, sizeof(why)))
			return ctl_usage_err("%s", why);
		if (c == O_TIMEOUT &&
		    cli_parse_seconds("--timeout", optarg, 0, 86400, &wo->timeout_s, why, sizeof(why)))
			return ctl_usage_err("%s", why);
	}
	return ctl_no_operands(cmd, c, code, argc, done);
}

int ctl_cmd_watch(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct watch_opts wo = { .timeout_s = -1 };
	struct print_ctx pc = { .n = 0 };
	double deadline;
	struct ctl_nl *nl;
	bool done;
	int ret = watch_parse(cmd, argc, argv, &wo, &done);

	if (done)
		return ret;
	deadline = wo.timeout_s >= 0 ? ctl_now_s() + wo.timeout_s : 0;
	ret = ctl_nl_open(&nl);
	if (ret)
		return ctl_exit_status(ret);
	ret = ctl_nl_subscribe(nl);
	if (!ctl_json && !ret) {
		fprintf(stderr, "%s: watching nproxy events (Ctrl-C to stop)\n", ctl_prog);
	}
	while (!ret && !ctl_stop_requested) {
		if (wo.count && pc.n >= wo.count)
			break;
		if (deadline && ctl_now_s() >= deadline)
			break;
		ret = ctl_nl_poll_events(nl, 200, watch_cb, &pc);
	}
	ctl_nl_close(nl);
	return ctl_exit_status(ret);
}
