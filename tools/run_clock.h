/* SPDX-License-Identifier: GPL-2.0 */
/* nproxy-run's clock: CLOCK_MONOTONIC seconds, and deadlines in them. */
#ifndef NPROXY_TOOLS_RUN_CLOCK_H
#define NPROXY_TOOLS_RUN_CLOCK_H

/* CLOCK_MONOTONIC in seconds. */
double run_now(void);
/* Milliseconds until deadline (run_now() seconds), 0 if past, at most 2e9. */
int run_remaining_ms(double deadline);

#endif
