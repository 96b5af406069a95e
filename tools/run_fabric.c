// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy-run: what libfabric offers here, to name the alternatives when the
 * provider asked for is not one of them.  Called only after the ranks have
 * exited (libfabric is never initialised in the process that forks them).
 */
#include <stdio.h>
#include <string.h>
#include <rdma/fabric.h>
#include "run.h"

void run_list_providers(char *buf, size_t len)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	size_t n = 0;

	buf[0] = '\0';
	if (!hints)
		return;
	/* What the engine needs: reliable datagrams with tagged messages. */
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | FI_MSG;
	if (fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, hints, &info) == 0) {
		for (struct fi_info *i = info; i; i = i->next) {
			const char *name = i->fabric_attr->prov_name;
			char quoted[80];

			snprintf(quoted, sizeof(quoted), "'%s'", name);
			if (!name || strstr(buf, quoted))
				continue;
			n += snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? ", " : "", quoted);
			if (n >= len)
				break;
		}
		fi_freeinfo(info);
	}
	fi_freeinfo(hints);
}
