// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * device_trigger: the host side of one device hand-off, and nothing else.
 *
 * A device tells the host "I reached the network stage of this op" by
 * writing a stream's trigger word; the host answers "the network part is
 * done" by adding to a completion semaphore the device waits on.  This
 * program plays both ends with a handshake region (libnproxy's pages;
 * without nproxy.ko loaded its memfd backend runs a device emulator):
 *
 *   1. open a handshake region (1 stream, 1 semaphore);
 *   2. arm the trigger word (the sentinel: "not reached yet");
 *   3. start a device program: wait 20 ms, write trigger word 0,
 *      then wait for semaphore 0 to reach 1;
 *   4. on the host, wait for the trigger word with a timeout;
 *   5. post the completion: semaphore 0 += 1 (ringing the device's
 *      doorbell in case it sleeps);
 *   6. collect the device program's result: it must have run every step.
 *
 * Build: cc device_trigger.c $(pkg-config --cflags --libs libnproxy)
 * Run:   ./device_trigger            (NPROXY_HANDSHAKE=memfd|kmod to choose)
 * Prints one line per step and exits 0 when the hand-off went through.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <nproxy/handshake.h>
#include <nproxy/seam.h>

#define TIMEOUT_MS	10000u
#define DEVICE_DELAY_NS	20000000ull	/* the device "computes" for 20 ms first */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * Wait until the device moves the trigger word off the sentinel, or
 * timeout_ms.  A real runtime would let the proxy worker do this (it
 * parks on the region's notifications); a short poll keeps this simple.
 */
static int wait_trigger(volatile uint32_t *word, uint32_t timeout_ms, uint32_t *value)
{
	const struct timespec nap = { .tv_nsec = 100000 };	/* 100 us */
	uint64_t deadline = now_ms() + timeout_ms;

	for (;;) {
		*value = nproxy_trigger_load(word);
		if (*value != NPROXY_TRIGGER_SENTINEL)
			return 0;
		if (now_ms() >= deadline)
			return -1;
		nanosleep(&nap, NULL);
	}
}

int main(void)
{
	struct nproxy_hs_opts opts = NPROXY_HS_OPTS_INIT;
	struct nproxy_prog_step prog[3];
	struct nproxy_prog_result result;
	struct nproxy_device_sems dev;
	enum nproxy_status st;
	struct nproxy_hs *hs;
	uint32_t trigger;
	int rc = 1;

	/* 1. The region: backend from NPROXY_HANDSHAKE, else kmod if loaded, else memfd. */
	opts.backend = NPROXY_HS_AUTO;
	opts.n_streams = 1;
	opts.n_sems = 1;
	st = nproxy_hs_open(&opts, &hs);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "device_trigger: handshake region: %s\n", nproxy_status_str(st));
		return 1;
	}
	printf("region: %s backend, %u stream, %u semaphore\n",
	       nproxy_hs_backend_name(nproxy_hs_backend_of(hs)), nproxy_hs_n_streams(hs),
	       nproxy_hs_n_sems(hs));

	/* 2. Before the device runs: the word says "not reached". */
	nproxy_trigger_store(nproxy_hs_trigger(hs, 0), NPROXY_TRIGGER_SENTINEL);

	/* 3. The device program (every field an op does not use stays 0). */
	memset(prog, 0, sizeof(prog));
	prog[0].op = NPROXY_STEP_DELAY;
	prog[0].timeout_ns = DEVICE_DELAY_NS;
	prog[1].op = NPROXY_STEP_WRITE_TRIGGER;
	prog[1].index = 0;
	prog[1].value = 1;
	prog[2].op = NPROXY_STEP_WAIT_SEM;
	prog[2].index = 0;
	prog[2].value = 1;
	prog[2].timeout_ns = (uint64_t)TIMEOUT_MS * 1000000ull;
	st = nproxy_hs_submit(hs, prog, 3, NULL);
	if (st != NPROXY_SUCCESS) {
		fprintf(stderr, "device_trigger: submit: %s\n", nproxy_status_str(st));
		goto out;
	}
	printf("device: program started\n");

	/* 4. The host waits for the trigger, never forever. */
	if (wait_trigger(nproxy_hs_trigger(hs, 0), TIMEOUT_MS, &trigger)) {
		fprintf(stderr, "device_trigger: no trigger within %u ms\n", TIMEOUT_MS);
		nproxy_hs_cancel(hs);
		nproxy_hs_wait(hs, TIMEOUT_MS, NULL);
		goto out;
	}
	printf("host: trigger word 0 = %u\n", trigger);

	/* 5. The completion back-edge: one atomic add, and the device's
	 * doorbell only if it sleeps in its WAIT_SEM step. */
	dev = (struct nproxy_device_sems){
		.sems = nproxy_hs_sem(hs, 0), .n_sems = 1, .bell = nproxy_hs_sem_bell(hs),
	};
	nproxy_device_sem_add(&dev, 0, 1);
	printf("host: semaphore 0 posted\n");

	/* 6. The device must finish every step. */
	memset(&result, 0, sizeof(result));
	st = nproxy_hs_wait(hs, TIMEOUT_MS, &result);
	if (st != NPROXY_SUCCESS || result.state != NPROXY_PROG_DONE) {
		fprintf(stderr, "device_trigger: device program: %s (state %u, step %u)\n",
			nproxy_status_str(st), result.state, result.failed_step);
		goto out;
	}
	printf("device: program done, %u steps\n", result.steps_done);
	printf("device_trigger: ok\n");
	rc = 0;
out:
	nproxy_hs_close(hs);
	return rc;
}
