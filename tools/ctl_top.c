// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl top: a live view of every proxy on the host, refreshed every
 * --interval seconds, from the state each library publishes in its region
 * (ctl_proxy.c).  Rates (ops/s, the worker's CPU) are differences between
 * two refreshes, so the first screen shows them as "-".
 *
 * Also the entry point of top and hang-report (ctl_proxy_main): they parse
 * their own options, so nproxyctl's dispatch needs one hook only.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ctl.h"
#include "ctl_proxy.h"
#include "json_writer.h"

struct top_prev {
	pid_t pid;
	uint32_t region_id;
	uint64_t ops, cpu_ticks, ns;
};

struct task_counts {
	uint32_t by_state[5];
	uint64_t oldest_progress_ns;	/* of the tasks in flight */
};

static struct task_counts count_tasks(const struct ctl_proxy *p)
{
	struct task_counts c = { { 0 }, 0 };

	for (int t = 0; t < NPROXY_PROXY_STATE_TASKS; t++) {
		const struct nproxy_proxy_task *s = &p->ps.tasks[t];

		if (!s->type || s->run_state > 4)
			continue;
		c.by_state[s->run_state]++;
		if (s->run_state != NPROXY_TASK_STATE_DONE &&
		    (!c.oldest_progress_ns || s->progress_ns < c.oldest_progress_ns))
			c.oldest_progress_ns = s->progress_ns;
	}
	return c;
}

static const struct top_prev *find_prev(const struct top_prev *prev, size_t n,
					const struct ctl_proxy *p)
{
	for (size_t i = 0; i < n; i++)
		if (prev[i].pid == p->pid && prev[i].region_id == p->info.region_id)
			return &prev[i];
	return NULL;
}

static void print_json(const struct ctl_proxy_list *l, const struct top_prev *prev, size_t n_prev)
{
	long hz = sysconf(_SC_CLK_TCK);
	struct json_writer w;

	json_init(&w, stdout, false);
	json_obj_begin(&w, NULL);
	json_u64(&w, "denied", (uint64_t)l->denied);
	json_arr_begin(&w, "proxies");
	for (size_t i = 0; i < l->n; i++) {
		const struct ctl_proxy *p = &l->v[i];
		const struct top_prev *pr = find_prev(prev, n_prev, p);
		struct task_counts c = count_tasks(p);

		json_obj_begin(&w, NULL);
		json_u64(&w, "pid", (uint64_t)p->pid);
		json_u64(&w, "ppid", p->ps.ppid);
		json_str(&w, "process", p->comm);
		json_str(&w, "backend", p->backend == CTL_PROXY_KMOD ? "kmod" : "memfd");
		json_u64(&w, "region_id", p->info.region_id);
		json_u64(&w, "fd", (uint64_t)p->fd);
		json_u64(&w, "rank", p->ps.rank);
		json_u64(&w, "n_ranks", p->ps.n_ranks);
		json_u64(&w, "gid", p->ps.gid);
		json_i64(&w, "worker_tid", p->ps.worker_tid);
		json_str(&w, "worker_state", ctl_worker_state_name(p->ps.worker_state));
		json_double(&w, "worker_state_age_s", ctl_age_s(p, p->ps.worker_state_ns));
		json_str(&w, "worker_proc_state", (char[2]){ p->worker_proc_state, 0 });
		json_str(&w, "proc_state", (char[2]){ p->proc_state, 0 });
		json_u64(&w, "ops_enqueued", p->ps.ops_enqueued);
		if (pr && p->now_ns > pr->ns) {
			double dt = (double)(p->now_ns - pr->ns) / 1e9;

			json_double(&w, "ops_per_s", (double)(p->ps.ops_enqueued - pr->ops) / dt);
			json_double(&w, "worker_cpu_pct",
				    100.0 * (double)(p->worker_cpu_ticks - pr->cpu_ticks) /
				    ((double)hz * dt));
		} else {
			json_null(&w, "ops_per_s");
			json_null(&w, "worker_cpu_pct");
		}
		json_obj_begin(&w, "tasks");
		for (uint32_t s = 0; s < 4; s++)
			json_u64(&w, ctl_run_state_name(s), c.by_state[s]);
		json_obj_end(&w);
		if (c.oldest_progress_ns)
			json_double(&w, "oldest_task_progress_age_s", ctl_age_s(p, c.oldest_progress_ns));
		else
			json_null(&w, "oldest_task_progress_age_s");
		json_str(&w, "prog_state", ctl_prog_state_name(p->info.prog_state));
		json_u64(&w, "prog_step", p->info.prog_step);
		json_obj_end(&w);
	}
	json_arr_end(&w);
	json_obj_end(&w);
	json_finish(&w);
}

static void print_text(const struct ctl_proxy_list *l, const struct top_prev *prev, size_t n_prev,
		       bool clear)
{
	long hz = sysconf(_SC_CLK_TCK);
	char when[32];
	time_t t = time(NULL);

	strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
	if (clear)
		fputs("\033[H\033[J", stdout);
	printf("nproxyctl top - %s - %zu proxies%s\n", when, l->n,
	       l->denied ? " (some processes could not be read: run as root)" : "");
	printf("%7s %-15s %5s %4s %5s %7s %-9s %5s %4s %4s %4s %4s %7s %7s  %s\n", "PID", "PROCESS",
	       "RANK", "NR", "BE", "WORKER", "WSTATE", "CPU%", "INIT", "WAIT", "PROG", "IDLE",
	       "OPS/s", "STALL_s", "DEVICE");
	for (size_t i = 0; i < l->n; i++) {
		const struct ctl_proxy *p = &l->v[i];
		const struct top_prev *pr = find_prev(prev, n_prev, p);
		struct task_counts c = count_tasks(p);
		char ops[16] = "-", cpu[16] = "-", stall[16] = "-", ws[16];

		if (pr && p->now_ns > pr->ns) {
			double dt = (double)(p->now_ns - pr->ns) / 1e9;

			snprintf(ops, sizeof(ops), "%.0f", (double)(p->ps.ops_enqueued - pr->ops) / dt);
			snprintf(cpu, sizeof(cpu), "%.0f",
				 100.0 * (double)(p->worker_cpu_ticks - pr->cpu_ticks) / ((double)hz * dt));
		}
		if (c.oldest_progress_ns)
			snprintf(stall, sizeof(stall), "%.1f", ctl_age_s(p, c.oldest_progress_ns));
		snprintf(ws, sizeof(ws), "%s/%c", ctl_worker_state_name(p->ps.worker_state),
			 p->worker_proc_state);
		printf("%7d %-15.15s %5u %4u %5s %7d %-9s %5s %4u %4u %4u %4u %7s %7s  %s",
		       (int)p->pid, p->comm, p->ps.rank, p->ps.n_ranks,
		       p->backend == CTL_PROXY_KMOD ? "kmod" : "memfd", p->ps.worker_tid, ws, cpu,
		       c.by_state[NPROXY_TASK_STATE_INIT],
		       c.by_state[NPROXY_TASK_STATE_WAITING_DEVICE_TRIGGER],
		       c.by_state[NPROXY_TASK_STATE_PROGRESSING], c.by_state[NPROXY_TASK_STATE_IDLE],
		       ops, stall, ctl_prog_state_name(p->info.prog_state));
		if (p->info.prog_state == NPROXY_PROG_RUNNING)
			printf(" @%u", p->info.prog_step);
		putchar('\n');
	}
	fflush(stdout);
}

int cmd_top(bool json, long count, double interval_s, pid_t only_pid)
{
	struct top_prev *prev = NULL;
	size_t n_prev = 0;
	bool clear = !json && isatty(STDOUT_FILENO) && count != 1;

	for (long shown = 0; !count || shown < count; shown++) {
		struct ctl_proxy_list l;
		struct timespec ts;
		struct top_prev *next;
		int rc = ctl_proxy_scan(&l, only_pid);

		if (rc < 0) {
			free(prev);
			return -rc;
		}
		if (json)
			print_json(&l, prev, n_prev);
		else
			print_text(&l, prev, n_prev, clear);
		next = calloc(l.n ? l.n : 1, sizeof(*next));
		if (!next) {
			ctl_proxy_list_free(&l);
			free(prev);
			return CTL_FAIL;
		}
		for (size_t i = 0; i < l.n; i++)
			next[i] = (struct top_prev){ .pid = l.v[i].pid,
						     .region_id = l.v[i].info.region_id,
						     .ops = l.v[i].ps.ops_enqueued,
						     .cpu_ticks = l.v[i].worker_cpu_ticks,
						     .ns = l.v[i].now_ns };
		free(prev);
		prev = next;
		n_prev = l.n;
		ctl_proxy_list_free(&l);
		if (count && shown + 1 >= count)
			break;
		ts.tv_sec = (time_t)interval_s;
		ts.tv_nsec = (long)((interval_s - (double)ts.tv_sec) * 1e9);
		/* A signal (SIGINT, SIGTERM) ends the view. */
		if (nanosleep(&ts, NULL) && errno == EINTR)
			break;
	}
	free(prev);
	return CTL_OK;
}

/* ---- option parsing shared by top and hang-report ---- */

static const char *const proxy_cmds[] = { "top", "hang-report" };

bool ctl_proxy_cmd_match(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue;
		for (size_t c = 0; c < sizeof(proxy_cmds) / sizeof(proxy_cmds[0]); c++)
			if (!strcmp(argv[i], proxy_cmds[c]))
				return true;
		return false;
	}
	return false;
}

static void proxy_usage(FILE *f)
{
	fprintf(f,
"Usage: nproxyctl [--json] top [--count N] [--interval S] [--pid PID]\n"
"       nproxyctl [--json] hang-report [--min-age S] [--pid PID]\n"
"\n"
"  top          every proxy on the host (process, rank, worker, tasks by state,\n"
"               op rate, worker CPU, device program), refreshed every --interval\n"
"               seconds (default 1) until interrupted or --count refreshes\n"
"  hang-report  who waits for whom: every task in flight for at least --min-age\n"
"               seconds (default 5) with its evidence (trigger words, the device\n"
"               program's step and semaphore, stopped or missing peer ranks)\n"
"  --pid PID    only the job of PID (a rank's pid or its launcher's)\n"
"\n"
"Exit status: 0 ok (hang-report: no hang found), 5 hang-report found a hang,\n"
"1 failed, 2 usage.  Reading another user's process needs ptrace access (root).\n");
}

static int proxy_usage_err(const char *msg, const char *arg)
{
	fprintf(stderr, "%s: %s '%s'\nTry 'nproxyctl top --help'.\n", ctl_prog, msg, arg);
	return CTL_USAGE;
}

static bool parse_seconds(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (!*s || *end || v < 0 || v > 86400)
		return false;
	*out = v;
	return true;
}

int ctl_proxy_main(int argc, char **argv)
{
	enum { O_COUNT = 256, O_INTERVAL, O_PID, O_MIN_AGE };
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "count", required_argument, NULL, O_COUNT },
		{ "interval", required_argument, NULL, O_INTERVAL },
		{ "pid", required_argument, NULL, O_PID },
		{ "min-age", required_argument, NULL, O_MIN_AGE },
		{ 0 }
	};
	double interval_s = 1, min_age_s = 5;
	const char *cmd = NULL;
	bool json = false;
	long count = 0;
	pid_t pid = 0;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h': proxy_usage(stdout); return CTL_OK;
		case O_COUNT:
			count = strtol(optarg, &end, 10);
			if (*end || count <= 0)
				return proxy_usage_err("--count: not a positive integer", optarg);
			break;
		case O_INTERVAL:
			if (!parse_seconds(optarg, &interval_s) || interval_s < 0.05)
				return proxy_usage_err("--interval: not a number of seconds >= 0.05",
						       optarg);
			break;
		case O_MIN_AGE:
			if (!parse_seconds(optarg, &min_age_s))
				return proxy_usage_err("--min-age: not a number of seconds", optarg);
			break;
		case O_PID:
			pid = (pid_t)strtol(optarg, &end, 10);
			if (*end || pid <= 0)
				return proxy_usage_err("--pid: not a process id", optarg);
			break;
		default:
			fprintf(stderr, "Try 'nproxyctl top --help'.\n");
			return CTL_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "%s: top and hang-report take no arguments besides options\n",
			ctl_prog);
		return CTL_USAGE;
	}
	cmd = argv[optind];
	if (!strcmp(cmd, "top"))
		return cmd_top(json, count, interval_s, pid);
	return cmd_hang_report(json, min_age_s, pid);
}
