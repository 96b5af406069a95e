// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl state, trigger, sem, create: one region, through its ioctls
 * (the fd found or duplicated by ctl_region_open(), or a new region).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "cli.h"
#include "ctl.h"
#include "ctl_cmd.h"
#include "json_writer.h"

/*
 * Options (only the common ones), then the operands: their number in
 * [min, max] or a usage error.  Returns 0 to go on, else *done and the
 * exit status.
 */
static int operands(const struct ctl_cmd *cmd, int argc, char **argv, int min, int max,
		    bool *done)
{
	static const struct option longopts[] = { CTL_COMMON_OPTIONS, { 0 } };
	int c, code = CTL_OK;

	*done = true;
	c = ctl_next_option(cmd, argc, argv, longopts, &code);
	if (c < 0)
		return code;
	if (argc - optind < min || argc - optind > max)
		return ctl_usage_err("usage: %s %s", cmd->name, cmd->usage);
	*done = false;
	return CTL_OK;
}

static void state_json(const struct nproxy_region_state *st)
{
	struct json_writer w;

	json_init(&w, stdout, false);
	json_obj_begin(&w, NULL);
	json_u64(&w, "region_id", st->region_id);
	json_u64(&w, "owner_pid", st->owner_pid);
	json_u64(&w, "rank", st->rank);
	json_u64(&w, "gid", st->gid);
	json_u64(&w, "n_streams", st->n_streams);
	json_u64(&w, "n_sems", st->n_sems);
	json_arr_begin(&w, "triggers");
	for (uint32_t i = 0; i < st->n_streams && i < NPROXY_MAX_STREAMS; i++)
		json_u64(&w, NULL, st->triggers[i]);
	json_arr_end(&w);
	json_str(&w, "prog_state", ctl_prog_state_name(st->prog_state));
	json_u64(&w, "prog_seq", st->prog_seq);
	json_u64(&w, "triggers_written", st->triggers_written);
	json_u64(&w, "events_signalled", st->events_signalled);
	json_obj_end(&w);
	json_finish(&w);
}

int ctl_cmd_state(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct nproxy_region_state st;
	bool done;
	int fd = operands(cmd, argc, argv, 1, 1, &done);

	if (done)
		return fd;
	fd = ctl_region_open(argv[optind], &st);
	if (fd < 0)
		return ctl_exit_status(fd);
	close(fd);
	if (ctl_json) {
		state_json(&st);
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

/*
 * One ioctl (req, named req_name) on REGION, opened for it and closed: CTL_OK,
 * *st the region's state.  The module refuses an index beyond the region's
 * streams (of a trigger) or semaphores (sem) with EINVAL: CTL_FAIL, saying so.
 */
static int region_ioctl(const char *region, unsigned long req, const char *req_name, void *arg,
			struct nproxy_region_state *st, bool sem, uint32_t index)
{
	const char *what = sem ? "semaphore" : "stream";
	int fd = ctl_region_open(region, st), e;

	if (fd < 0)
		return ctl_exit_status(fd);
	if (!ioctl(fd, req, arg)) {
		close(fd);
		return CTL_OK;
	}
	e = errno;
	close(fd);
	if (e != EINVAL)
		return ctl_exit_status(ctl_errno_exit(e, req_name));
	ctl_err("region %u: %s %u rejected (region has %u %ss)", st->region_id, what, index,
		sem ? st->n_sems : st->n_streams, what);
	return CTL_FAIL;
}

int ctl_cmd_trigger(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct nproxy_region_state st;
	struct nproxy_trigger_write tw = { .value = 1 };
	char why[200];
	bool done;
	int fd = operands(cmd, argc, argv, 2, 3, &done);

	if (done)
		return fd;
	argv += optind;
	argc -= optind;
	if (cli_parse_u32("STREAM", argv[1], 0, UINT32_MAX, &tw.stream, why, sizeof(why)) ||
	    (argc == 3 &&
	     cli_parse_u32("VALUE", argv[2], 0, UINT32_MAX, &tw.value, why, sizeof(why))))
		return ctl_usage_err("%s", why);
	return region_ioctl(argv[0], NPROXY_IOC_WRITE_TRIGGER, "NPROXY_IOC_WRITE_TRIGGER", &tw,
			    &st, false, tw.stream);
}

int ctl_cmd_sem(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct nproxy_region_state st;
	struct nproxy_sem_op op = { 0 };
	unsigned long req;
	uint64_t value = 0;
	const char *name;
	char why[200];
	bool done;
	int fd = operands(cmd, argc, argv, 0, 4, &done), want;

	if (done)
		return fd;
	argv += optind;
	argc -= optind;
	if (argc < 3)
		return ctl_usage_err("%s", "usage: sem get|set|inc REGION SEM [VALUE]");
	if (!strcmp(argv[0], "get")) {
		req = NPROXY_IOC_SEM_GET, want = 3, name = "NPROXY_IOC_SEM_GET";
	} else if (!strcmp(argv[0], "set")) {
		req = NPROXY_IOC_SEM_SET, want = 4, name = "NPROXY_IOC_SEM_SET";
	} else if (!strcmp(argv[0], "inc")) {
		req = NPROXY_IOC_SEM_INC, want = 4, name = "NPROXY_IOC_SEM_INC";
	} else {
		return ctl_usage_err("unknown sem operation '%s' (get, set, inc)", argv[0]);
	}
	if (argc != want)
		return ctl_usage_err("sem %s: wrong number of arguments", argv[0]);
	if (cli_parse_u32("SEM", argv[2], 0, UINT32_MAX, &op.sem, why, sizeof(why)) ||
	    (want == 4 && cli_parse_u64("VALUE", argv[3], 0, UINT64_MAX, &value, why, sizeof(why))))
		return ctl_usage_err("%s", why);
	op.value = value;
	fd = region_ioctl(argv[1], req, name, &op, &st, true, op.sem);
	if (fd != CTL_OK)
		return fd;
	if (req == NPROXY_IOC_SEM_GET) {
		if (ctl_json) {
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

/* create's options: the region's shape, and how long to hold it. */
struct create_opts {
	struct nproxy_region_create shape;
	double hold_s;		/* 0: until SIGINT/SIGTERM */
};

static int create_parse(const struct ctl_cmd *cmd, int argc, char **argv, struct create_opts *co,
			bool *done)
{
	enum { O_STREAMS = 256, O_SEMS, O_RANK, O_GID, O_HOLD };
	CTL_LONGOPTS(longopts,
		{ "streams", required_argument, NULL, O_STREAMS },
		{ "sems", required_argument, NULL, O_SEMS },
		{ "rank", required_argument, NULL, O_RANK },
		{ "gid", required_argument, NULL, O_GID },
		{ "hold", required_argument, NULL, O_HOLD });
	char why[200];
	int c, code = CTL_OK, bad = 0;

	*done = true;
	while (!bad && (c = ctl_next_option(cmd, argc, argv, longopts, &code)) > 0) {
		switch (c) {
		case O_STREAMS:
			bad = cli_parse_u32("--streams", optarg, 0, UINT32_MAX, &co->shape.n_streams,
					    why, sizeof(why));
			break;
		case O_SEMS:
			bad = cli_parse_u32("--sems", optarg, 0, UINT32_MAX, &co->shape.n_sems, why,
					    sizeof(why));
			break;
		case O_RANK:
			bad = cli_parse_u32("--rank", optarg, 0, UINT32_MAX, &co->shape.rank, why,
					    sizeof(why));
			break;
		case O_GID:
			bad = cli_parse_u32("--gid", optarg, 0, UINT32_MAX, &co->shape.gid, why,
					    sizeof(why));
			break;
		default:	/* O_HOLD */
			bad = cli_parse_seconds("--hold", optarg, 0, 86400, &co->hold_s, why,
						sizeof(why));
			break;
		}
	}
	if (bad)
		return ctl_usage_err("%s", why);
	return ctl_no_operands(cmd, c, code, argc, done);
}

int ctl_cmd_create(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct create_opts co = {
		.shape = { .n_streams = NPROXY_MAX_STREAMS, .n_sems = 16 },
	};
	struct nproxy_region_state st;
	double deadline;
	bool done;
	int dev, fd = create_parse(cmd, argc, argv, &co, &done);

	if (done)
		return fd;
	deadline = co.hold_s > 0 ? ctl_now_s() + co.hold_s : 0;
	dev = ctl_open_dev();
	if (dev < 0)
		return ctl_exit_status(dev);
	fd = ioctl(dev, NPROXY_IOC_CREATE_REGION, &co.shape);
	if (fd < 0) {
		int e = errno;

		close(dev);
		if (e == EINVAL) {
			ctl_err("region rejected: streams must be 1..%u, semaphores 0..%u",
				NPROXY_MAX_STREAMS, NPROXY_MAX_SEMS);
			return CTL_FAIL;
		}
		return ctl_exit_status(ctl_errno_exit(e, "NPROXY_IOC_CREATE_REGION"));
	}
	close(dev);
	memset(&st, 0, sizeof(st));
	if (ioctl(fd, NPROXY_IOC_GET_STATE, &st)) {
		int e = errno;

		close(fd);
		return ctl_exit_status(ctl_errno_exit(e, "NPROXY_IOC_GET_STATE"));
	}
	if (ctl_json)
		printf("{\"region_id\":%u,\"pid\":%d,\"fd\":%d}\n", st.region_id, (int)getpid(), fd);
	else
		printf("region %u (pid %d fd %d)\n", st.region_id, (int)getpid(), fd);
	fflush(stdout);
	while (!ctl_stop_requested && (!deadline || ctl_now_s() < deadline))
		usleep(50 * 1000);
	close(fd);
	return CTL_OK;
}
