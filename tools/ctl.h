/* SPDX-License-Identifier: GPL-2.0 */
/* nproxyctl internals: device/region access and generic netlink. */
#ifndef NPROXY_TOOLS_CTL_H
#define NPROXY_TOOLS_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/nproxy.h>

#define CTL_DEV_PATH "/dev/" NPROXY_DEVICE_NAME

/* Exit codes: 0 ok, 1 operation failed, 2 usage, 3 module missing, 4 permission. */
enum ctl_exit {
	CTL_OK = 0,
	CTL_FAIL = 1,
	CTL_USAGE = 2,
	CTL_NO_MODULE = 3,
	CTL_DENIED = 4,
};

extern const char *ctl_prog;
extern bool ctl_json;		/* --json: errors too are JSON, on stdout */

/* Error reports (ctl_error.c). */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* status "error" / "usage-error"; text on stderr, or JSON on stdout with --json. */
void ctl_report_error(const char *status, const char *msg);
/* Map an errno from opening/talking to the module to a message + exit code. */
int ctl_errno_exit(int err, const char *what);

/* Open /dev/nproxy; on failure prints why and returns -exit_code. */
int ctl_open_dev(void);

/*
 * A region named on the command line:
 *   ID        region id (as listed by `nproxyctl regions`), found among the
 *             fds of its owner (netlink owner_pid, else every process) and
 *             duplicated with pidfd_getfd(2): needs ptrace access to the
 *             owner (root, or the same user with ptrace_scope 0);
 *   PID:FD    the region fd FD of process PID, duplicated the same way.
 * Returns a region fd whose GET_STATE region_id matches, or -exit_code.
 */
int ctl_region_open(const char *spec, struct nproxy_region_state *state);

/* shm-sweep (ctl_shm.c): dead processes' libfabric shm regions; an exit code. */
int cmd_shm_sweep(bool dry_run, int pid, const char *dir, bool json);

/* ---- generic netlink (libnl-genl) ---- */
struct ctl_nl;

/* -exit_code on failure (message printed). */
int ctl_nl_open(struct ctl_nl **out);
void ctl_nl_close(struct ctl_nl *nl);

/* One attribute set, decoded: present[a] says whether attr a came. */
struct ctl_attrs {
	bool present[NPROXY_A_MAX + 1];
	uint64_t val[NPROXY_A_MAX + 1];
	uint8_t cmd;
};

typedef int (*ctl_nl_cb)(const struct ctl_attrs *a, void *arg);

/* Send cmd (dump if dump) and call cb per reply message; 0 or -exit_code. */
int ctl_nl_request(struct ctl_nl *nl, uint8_t cmd, bool dump, ctl_nl_cb cb, void *arg);
/* Join the "events" group; then ctl_nl_next_event() until it returns > 0 */
int ctl_nl_subscribe(struct ctl_nl *nl);
/* Wait up to timeout_ms for events, calling cb for each; 0 ok, -exit_code on error. */
int ctl_nl_poll_events(struct ctl_nl *nl, int timeout_ms, ctl_nl_cb cb, void *arg);

/* Names for printing. */
const char *ctl_attr_name(int attr);
bool ctl_attr_is_u64(int attr);
const char *ctl_event_name(uint64_t type);
const char *ctl_prog_state_name(uint64_t state);

#endif
