// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl program: a device program in the text format (prog_text.h),
 * parsed here, submitted to a region and waited for (or only checked).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "cli.h"
#include "ctl.h"
#include "ctl_cmd.h"
#include "json_writer.h"
#include "prog_text.h"

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
	if (ctl_json) {
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

/* program's options. */
struct program_opts {
	bool check;		/* only parse the file and print the steps */
	bool no_wait;		/* submit and return */
	double timeout_s;	/* wait at most this long (< 0: 70 s) */
};

static int program_parse(const struct ctl_cmd *cmd, int argc, char **argv,
			 struct program_opts *po, bool *done)
{
	enum { O_CHECK = 256, O_NOWAIT, O_TIMEOUT };
	CTL_LONGOPTS(longopts,
		{ "check", no_argument, NULL, O_CHECK },
		{ "no-wait", no_argument, NULL, O_NOWAIT },
		{ "timeout", required_argument, NULL, O_TIMEOUT });
	char why[200];
	int c, code = CTL_OK;

	*done = true;
	while ((c = ctl_next_option(cmd, argc, argv, longopts, &code)) > 0) {
		if (c == O_CHECK)
			po->check = true;
		else if (c == O_NOWAIT)
			po->no_wait = true;
		else if (cli_parse_seconds("--timeout", optarg, 0, 86400, &po->timeout_s, why,
					   sizeof(why)))
			return ctl_usage_err("%s", why);
	}
	if (c < 0)
		return code;
	if (po->check && argc - optind != 1)
		return ctl_usage_err("%s", "usage: program --check FILE");
	if (!po->check && argc - optind != 2)
		return ctl_usage_err("%s", "usage: program REGION FILE");
	*done = false;
	return CTL_OK;
}

/* --check: the steps as the parser read them. */
static int program_check(const char *path)
{
	struct nproxy_prog_step *steps;
	struct json_writer w;
	char line[128];
	uint32_t n;
	int ret = load_program(path, &steps, &n);

	if (ret)
		return ret;
	if (ctl_json) {
		json_init(&w, stdout, false);
		json_obj_begin(&w, NULL);
		json_str(&w, "file", path);
		json_arr_begin(&w, "steps");
	}
	for (uint32_t i = 0; i < n; i++) {
		prog_text_format(&steps[i], line, sizeof(line));
		if (ctl_json)
			json_str(&w, NULL, line);
		else
			printf("%u: %s\n", i, line);
	}
	if (ctl_json) {
		json_arr_end(&w);
		json_obj_end(&w);
		json_finish(&w);
	}
	free(steps);
	return CTL_OK;
}

/* Hand the steps to the module; the region fd, or -exit_code. */
static int program_submit(const char *region, const char *path,
			  struct nproxy_region_state *st, struct nproxy_prog_submit *sub)
{
	struct nproxy_prog_step *steps;
	uint32_t n;
	int fd, ret = load_program(path, &steps, &n);

	if (ret)
		return -ret;
	fd = ctl_region_open(region, st);
	if (fd < 0) {
		free(steps);
		return fd;
	}
	sub->n_steps = n;
	sub->steps = (uintptr_t)steps;
	if (!ioctl(fd, NPROXY_IOC_SUBMIT_PROG, sub)) {
		free(steps);
		return fd;
	}
	ret = errno;
	free(steps);
	close(fd);
	if (ret == EBUSY) {
		ctl_err("region %u: a program is running or its result was not collected yet",
			st->region_id);
		return -CTL_FAIL;
	}
	if (ret == EINVAL) {
		ctl_err("region %u: program rejected by the module (a stream or semaphore index beyond the region's %u streams / %u semaphores?)",
			st->region_id, st->n_streams, st->n_sems);
		return -CTL_FAIL;
	}
	return ctl_errno_exit(ret, "NPROXY_IOC_SUBMIT_PROG");
}

/*
 * Collect the program's result, polling the region fd; at the deadline or
 * on a signal, cancel it and collect what the cancel left.  0 with *res,
 * or an exit status.
 */
static int program_wait(int fd, const struct nproxy_region_state *st, uint64_t seq,
			double timeout_s, struct nproxy_prog_result *res)
{
	double deadline = ctl_now_s() + (timeout_s >= 0 ? timeout_s : 70.0);
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	for (;;) {
		memset(res, 0, sizeof(*res));
		if (!ioctl(fd, NPROXY_IOC_COLLECT_PROG, res))
			return CTL_OK;
		if (errno != EAGAIN)
			return ctl_exit_status(ctl_errno_exit(errno, "NPROXY_IOC_COLLECT_PROG"));
		if (ctl_stop_requested || ctl_now_s() >= deadline)
			break;
		poll(&pfd, 1, 100);
	}
	ioctl(fd, NPROXY_IOC_CANCEL_PROG);
	ctl_err("region %u program %" PRIu64 ": %s, cancelled", st->region_id, seq,
		ctl_stop_requested ? "interrupted" : "timed out");
	/* The module ends a cancelled program within its step; bounded anyway. */
	for (int tries = 0; ioctl(fd, NPROXY_IOC_COLLECT_PROG, res) && errno == EAGAIN; tries++)
		if (tries > 500 || poll(&pfd, 1, 10) < 0)
			break;
	return CTL_FAIL;
}

int ctl_cmd_program(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct program_opts po = { .timeout_s = -1 };
	struct nproxy_region_state st;
	struct nproxy_prog_submit sub = { 0 };
	struct nproxy_prog_result res;
	bool done;
	int fd = program_parse(cmd, argc, argv, &po, &done), ret;

	if (done)
		return fd;
	if (po.check)
		return program_check(argv[optind]);
	fd = program_submit(argv[optind], argv[optind + 1], &st, &sub);
	if (fd < 0)
		return ctl_exit_status(fd);
	if (po.no_wait) {
		if (ctl_json)
			printf("{\"region_id\":%u,\"seq\":%" PRIu64 "}\n", st.region_id, (uint64_t)sub.seq);
		else
			printf("region %u program %" PRIu64 " submitted\n", st.region_id, (uint64_t)sub.seq);
		close(fd);
		return CTL_OK;
	}
	ret = program_wait(fd, &st, sub.seq, po.timeout_s, &res);
	close(fd);
	if (ret)
		return ret;
	print_result(&st, &res);
	return res.state == NPROXY_PROG_DONE ? CTL_OK : CTL_FAIL;
}
