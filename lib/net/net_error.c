// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The network engine's errors: the last error text (nproxy_net_strerror(),
 * by common's rule: "net rank N: why") and the sticky status, whose first value ends the engine.  A leaf every
 * other net file records failures through.
 */
#include <stdio.h>
#include <nproxy/log.h>
#include "net_internal.h"

const char *npx_net_who(const struct nproxy_net *net, char *buf)
{
	snprintf(buf, NET_WHO_LEN, "net rank %u", net->rank);
	return buf;
}

NPROXY_API const char *nproxy_net_strerror(const struct nproxy_net *net)
{
	return npx_err_text(net ? &net->err : NULL, NPX_ERR_NET);
}

enum nproxy_status npx_net_fail(struct nproxy_net *net, enum nproxy_status st)
{
	if (net->failed == NPROXY_SUCCESS)
		net->failed = st;
	return net->failed;
}

enum nproxy_status npx_net_post_error(struct nproxy_net *net, ssize_t rc, const char *what,
				  uint32_t peer)
{
	npx_net_set_err(net, "%s rank %u: %s", what, peer, fi_strerror((int)-rc));
	return npx_net_fail(net, NPROXY_NET_ERROR);
}
