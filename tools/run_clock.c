// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run's clock, a leaf every other run_*.c file calls: one monotonic
 * clock for the timing loop, the progress bar and every deadline.
 */
#include <time.h>
#include "run_clock.h"

double run_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int run_remaining_ms(double deadline)
{
	double left = deadline - run_now();

	if (left <= 0)
		return 0;
	return left > 2e9 / 1000 ? 2000000000 : (int)(left * 1000) + 1;
}
