/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The device-program text format (nproxyctl(8) "program"): one step per
 * line, '#' starts a comment, blank lines are ignored.
 *
 *   write-trigger STREAM VALUE
 *   wait-sem SEM >= VALUE [timeout DURATION]
 *   delay DURATION
 *   inc-sem SEM VALUE
 *   signal VALUE
 *
 * DURATION is an integer with a unit: ns, us, ms or s.
 */
#ifndef NPROXY_TOOLS_PROG_TEXT_H
#define NPROXY_TOOLS_PROG_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <linux/nproxy.h>

/*
 * Parse a whole program from f (name is used in messages).  On success
 * returns 0 and stores up to max_steps steps in steps[], the count in
 * *n_steps.  On error returns -1 with "name:LINE: what" in err.
 */
int prog_text_parse(FILE *f, const char *name, struct nproxy_prog_step *steps,
		    uint32_t max_steps, uint32_t *n_steps, char *err, size_t errlen);

/* One step back as text (the inverse of the parser), for dumps. */
void prog_text_format(const struct nproxy_prog_step *step, char *buf, size_t len);

#endif
