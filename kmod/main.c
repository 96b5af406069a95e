// SPDX-License-Identifier: GPL-2.0
/*
 * nproxy.ko: host-visible device handshake pages (trigger words and
 * semaphores) for on-device collectives, plus an emulated device that plays
 * the device's side of the handshake.  See Documentation/kmod.md.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <net/genetlink.h>

#include "nproxy_priv.h"

/*
 * The emulated device polls semaphore words at this interval while a
 * WAIT_SEM step is pending.  Host increments through the mapping cost no
 * syscall, so the device cannot be told about them; the SEM_SET/SEM_INC
 * ioctls ring a doorbell and are seen at once.
 */
#define NPROXY_SEM_POLL_MIN_NS	1000U
#define NPROXY_SEM_POLL_MAX_NS	10000000U
unsigned int nproxy_sem_poll_ns = 10000;

static int sem_poll_ns_set(const char *val, const struct kernel_param *kp)
{
	return param_set_uint_minmax(val, kp, NPROXY_SEM_POLL_MIN_NS,
				     NPROXY_SEM_POLL_MAX_NS);
}

static const struct kernel_param_ops sem_poll_ns_ops = {
	.set = sem_poll_ns_set,
	.get = param_get_uint,
};

module_param_cb(sem_poll_ns, &sem_poll_ns_ops, &nproxy_sem_poll_ns, 0644);
MODULE_PARM_DESC(sem_poll_ns,
		 "emulated device semaphore poll interval in ns (1000..10000000, default 10000)");

/*
 * The module's parts, set up in this order and torn down in reverse.  The
 * fault points come first and go last (they cannot fail).  Every region
 * file holds a module reference (fops.owner), and every mapping holds its
 * file, so no region exists when the parts are torn down.
 */
static const struct {
	int (*init)(void);
	void (*exit)(void);
} nproxy_parts[] = {
	{ nproxy_regions_init, nproxy_regions_exit },
	{ nproxy_prog_init, nproxy_prog_exit },
	{ nproxy_nl_init, nproxy_nl_exit },
	/* Last: once the node exists, userspace can create regions. */
	{ nproxy_dev_register, nproxy_dev_unregister },
};

/* Tear down the first n parts, last first, then the fault points. */
static void nproxy_parts_exit(size_t n)
{
	while (n--)
		nproxy_parts[n].exit();
	nproxy_fault_exit();
}

static int __init nproxy_init(void)
{
	size_t i;
	int err;

	nproxy_fault_init();
	for (i = 0; i < ARRAY_SIZE(nproxy_parts); i++) {
		err = nproxy_parts[i].init();
		if (err) {
			nproxy_parts_exit(i);
			return err;
		}
	}
	pr_info("loaded, ABI %u, sem_poll_ns %u\n", NPROXY_ABI_VERSION,
		nproxy_sem_poll_ns);
	return 0;
}

static void __exit nproxy_exit(void)
{
	nproxy_parts_exit(ARRAY_SIZE(nproxy_parts));
}

module_init(nproxy_init);
module_exit(nproxy_exit);

MODULE_DESCRIPTION("nproxy: device handshake pages and an emulated device for collective proxies");
MODULE_LICENSE("GPL");
MODULE_VERSION(NPROXY_MODULE_VERSION);
MODULE_ALIAS_GENL_FAMILY(NPROXY_GENL_NAME);
/*
 * With both aliases, kmod static-nodes creates /dev/nproxy before the
 * module is loaded and the first open loads it (as for /dev/fuse).
 */
MODULE_ALIAS_MISCDEV(NPROXY_MISC_MINOR);
MODULE_ALIAS("devname:" NPROXY_DEVICE_NAME);
