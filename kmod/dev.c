// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/nproxy: the misc device that creates regions, and the ioctl
 * dispatcher shared with region fds.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compat.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/stat.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>

#include "nproxy_priv.h"

/* Node mode; a udev rule (kmod/60-nproxy.rules) hands it to a group. */
static ushort dev_mode = 0600;

/* Shown in octal, as modes are written ("0600", not "384"). */
static int dev_mode_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%#o\n", *(ushort *)kp->arg);
}

static const struct kernel_param_ops dev_mode_ops = {
	.set = param_set_ushort,	/* kstrtou16(base 0): "0660" is octal */
	.get = dev_mode_get,
};

module_param_cb(dev_mode, &dev_mode_ops, &dev_mode, 0444);
MODULE_PARM_DESC(dev_mode, "mode of /dev/nproxy (default 0600; world-writable refused)");

/* Largest ioctl argument any command takes, rounded up. */
#define NPROXY_IOCTL_MAX_SIZE	128

/*
 * Dispatch on _IOC_NR through @table (indexed by _IOC_NR); the type,
 * direction and size of @cmd must match the table entry's, except that a
 * larger size is accepted when its tail is zero (copy_struct_from_user()).
 * Commands that only return data zero the user buffer first, and commands
 * that read and write it get their own bytes written back first, so a bad
 * or read-only pointer fails with -EFAULT before any state changes.
 */
long nproxy_ioctl_dispatch(const struct nproxy_ioctl_desc *table,
			   unsigned int n_entries, struct file *file,
			   unsigned int cmd, unsigned long arg)
{
	u64 karg[NPROXY_IOCTL_MAX_SIZE / sizeof(u64)];
	void __user *uarg = (void __user *)arg;
	const struct nproxy_ioctl_desc *desc;
	unsigned int nr = _IOC_NR(cmd);
	unsigned int dir = _IOC_DIR(cmd);
	size_t usize = _IOC_SIZE(cmd);
	size_t ksize;
	bool copied;
	long ret;

	if (_IOC_TYPE(cmd) != NPROXY_IOC_MAGIC || nr >= n_entries)
		return -ENOTTY;
	desc = &table[nr];
	if (!desc->handler || dir != _IOC_DIR(desc->cmd))
		return -ENOTTY;
	ksize = _IOC_SIZE(desc->cmd);
	if (WARN_ON_ONCE(ksize > sizeof(karg)))
		return -ENOTTY;
	if (dir == _IOC_NONE) {
		if (usize)
			return -ENOTTY;
	} else if (usize < ksize) {
		/* Shorter than ABI v1 of the structure. */
		return -EINVAL;
	}

	memset(karg, 0, ksize);
	if (dir & _IOC_WRITE) {
		ret = copy_struct_from_user(karg, ksize, uarg, usize);
		if (ret)
			return ret;
		/*
		 * A command that also writes back (SUBMIT_PROG's seq) must not
		 * act and then fail the copy-out: write the caller's own bytes
		 * back first, so a read-only struct is -EFAULT with nothing done.
		 */
		if ((dir & _IOC_READ) && copy_to_user(uarg, karg, ksize))
			return -EFAULT;
	} else if (dir & _IOC_READ) {
		if (clear_user(uarg, usize))
			return -EFAULT;
	}

	ret = desc->handler(file, karg);
	if (ret < 0 || !(dir & _IOC_READ))
		return ret;
	copied = !copy_to_user(uarg, karg, ksize) &&
		 !(usize > ksize && clear_user(uarg + ksize, usize - ksize));
	if (desc->finish)
		desc->finish(file, karg, copied);
	return copied ? ret : -EFAULT;
}

static long nproxy_dev_get_info(struct file *file, void *karg)
{
	struct nproxy_info *info = karg;

	info->abi_version = NPROXY_ABI_VERSION;
	info->max_streams = NPROXY_MAX_STREAMS;
	info->max_sems = NPROXY_MAX_SEMS;
	info->max_prog_steps = NPROXY_MAX_PROG_STEPS;
	info->max_wait_ns = NPROXY_MAX_WAIT_NS;
	info->page_size = PAGE_SIZE;
	info->sem_poll_ns = READ_ONCE(nproxy_sem_poll_ns);
	return 0;
}

static long nproxy_dev_create_region(struct file *file, void *karg)
{
	return nproxy_region_create(karg);
}

static const struct nproxy_ioctl_desc nproxy_dev_ioctls[] = {
	[_IOC_NR(NPROXY_IOC_GET_INFO)] = {
		NPROXY_IOC_GET_INFO, nproxy_dev_get_info },
	[_IOC_NR(NPROXY_IOC_CREATE_REGION)] = {
		NPROXY_IOC_CREATE_REGION, nproxy_dev_create_region },
};

static long nproxy_dev_ioctl(struct file *file, unsigned int cmd,
			     unsigned long arg)
{
	return nproxy_ioctl_dispatch(nproxy_dev_ioctls,
				     ARRAY_SIZE(nproxy_dev_ioctls), file, cmd,
				     arg);
}

static const struct file_operations nproxy_dev_fops = {
	NPROXY_IOCTL_FOPS(nproxy_dev_ioctl),
	.open		= nonseekable_open,
	.llseek		= no_llseek,
};

static struct miscdevice nproxy_miscdev = {
	.minor	= NPROXY_MISC_MINOR,
	.name	= NPROXY_DEVICE_NAME,
	.fops	= &nproxy_dev_fops,
	.groups	= nproxy_stats_groups,
};

int nproxy_dev_register(void)
{
	int err;

	if (dev_mode & ~0777 || dev_mode & 0002) {
		pr_err("dev_mode %#o refused: permission bits only, never world-writable\n",
		       dev_mode);
		return -EINVAL;
	}
	nproxy_miscdev.mode = dev_mode;
	err = misc_register(&nproxy_miscdev);
	if (err != -EBUSY)
		return err;
	/* Another local driver took the minor: no autoload, but a device. */
	pr_warn("misc minor %d is taken; using a dynamic one (open will not autoload the module)\n",
		NPROXY_MISC_MINOR);
	nproxy_miscdev.minor = MISC_DYNAMIC_MINOR;
	return misc_register(&nproxy_miscdev);
}

void nproxy_dev_unregister(void)
{
	misc_deregister(&nproxy_miscdev);
}
