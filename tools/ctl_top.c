// SPDX-License-Identifier: GPL-2.0
/*
 * nproxyctl top: a live view of every proxy on the host, refreshed every
 * --interval seconds, from the state each library publishes in its region
 * (ctl_proxy.c).  Rates (ops/s, the worker's CPU) are differences between
 * two refreshes, so the first screen shows them as "-".
 *
 * Also the handlers of top and hang-report (their options; the work is
 * cmd_top() here and cmd_hang_report() in ctl_hang.c).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "ctl.h"
#include "ctl_cmd.h"
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
		/* A deferred barrier waits for the application, not a peer. */
		if (s->run_state != NPROXY_TASK_STATE_DONE &&
		    !(s->flags & NPROXY_PROXY_TASK_F_DEFERRED) &&
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

int cmd_top(bool json, uint64_t count, double interval_s, pid_t only_pid)
{
	struct top_prev *prev = NULL;
	size_t n_prev = 0;
	bool clear = !json && isatty(STDOUT_FILENO) && count != 1;

	for (uint64_t shown = 0; !count || shown < count; shown++) {
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

/* ---- the commands' options ---- */

/* Options of top and hang-report (each reads the ones it lists). */
struct proxy_opts {
	uint64_t count;		/* top: refreshes (0: until a signal) */
	double interval_s;	/* top: between refreshes */
	double min_age_s;	/* hang-report: in flight at least this long */
	int pid;		/* only this process's job (0: every proxy) */
};

enum { O_COUNT = 256, O_INTERVAL, O_PID, O_MIN_AGE };

static int proxy_parse(const struct ctl_cmd *cmd, int argc, char **argv,
		       const struct option *longopts, struct proxy_opts *po, bool *done)
{
	char why[200];
	int c, code = CTL_OK, bad = 0;

	*done = true;
	while (!bad && (c = ctl_next_option(cmd, argc, argv, longopts, &code)) > 0) {
		if (c == O_COUNT)
			bad = cli_parse_u64("--count", optarg, 1, UINT64_MAX, &po->count, why,
					    sizeof(why));
		else if (c == O_INTERVAL)
			bad = cli_parse_seconds("--interval", optarg, 0.05, 86400, &po->interval_s,
						why, sizeof(why));
		else if (c == O_MIN_AGE)
			bad = cli_parse_seconds("--min-age", optarg, 0, 86400, &po->min_age_s, why,
						sizeof(why));
		else
			bad = cli_parse_pid("--pid", optarg, &po->pid, why, sizeof(why));
	}
	if (bad)
		return ctl_usage_err("%s", why);
	return ctl_no_operands(cmd, c, code, argc, done);
}

/* The options of top and of hang-report. */
CTL_LONGOPTS(top_longopts,
	{ "count", required_argument, NULL, O_COUNT },
	{ "interval", required_argument, NULL, O_INTERVAL },
	{ "pid", required_argument, NULL, O_PID });
CTL_LONGOPTS(hang_longopts,
	{ "min-age", required_argument, NULL, O_MIN_AGE },
	{ "pid", required_argument, NULL, O_PID });

int ctl_cmd_top(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct proxy_opts po = { .interval_s = 1 };
	bool done;
	int code = proxy_parse(cmd, argc, argv, top_longopts, &po, &done);

	return done ? code : cmd_top(ctl_json, po.count, po.interval_s, po.pid);
}

int ctl_cmd_hang_report(const struct ctl_cmd *cmd, int argc, char **argv)
{
	struct proxy_opts po = { .min_age_s = 5 };
	bool done;
	int code = proxy_parse(cmd, argc, argv, hang_longopts, &po, &done);

	return done ? code : cmd_hang_report(ctl_json, po.min_age_s, po.pid);
}
