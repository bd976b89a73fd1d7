// SPDX-License-Identifier: GPL-2.0
/*
 * Module parameters.  listen= and remote= are parsed once at load and the
 * load fails on the first bad entry, with a log line naming it: a host that
 * silently listened on fewer addresses than configured is worse than one
 * that refuses to start.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/moduleparam.h>

#include "engram.h"

static char *engram_listen;
module_param_named(listen, engram_listen, charp, 0444);
MODULE_PARM_DESC(listen,
		 "comma-separated rdma://IP:PORT or tcp://IP:PORT to serve on (IPv6 in brackets)");

static char *engram_remote;
module_param_named(remote, engram_remote, charp, 0444);
MODULE_PARM_DESC(remote,
		 "comma-separated rdma://SERVER:PORT@LOCAL or tcp://SERVER:PORT@LOCAL to fetch from");

#define ENGRAM_TIMEOUT_MS_MAX	600000

static unsigned int engram_timeout = 1000;

static int engram_timeout_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret;

	ret = kstrtouint(val, 0, &v);
	if (ret || !v || v > ENGRAM_TIMEOUT_MS_MAX) {
		pr_err("timeout_ms=%s: want milliseconds in 1-%u\n", val, ENGRAM_TIMEOUT_MS_MAX);
		return -EINVAL;
	}
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static const struct kernel_param_ops engram_timeout_ops = {
	.set = engram_timeout_set,
	.get = param_get_uint,
};

module_param_cb(timeout_ms, &engram_timeout_ops, &engram_timeout, 0644);
MODULE_PARM_DESC(timeout_ms, "default fetch deadline in milliseconds (1-600000, default 1000)");

struct engram_config engram_config;

/**
 * engram_timeout_ms() - the default fetch deadline
 *
 * Return: milliseconds; writable at run time through sysfs.
 */
unsigned int engram_timeout_ms(void)
{
	return READ_ONCE(engram_timeout);
}

/**
 * engram_params_init() - parse listen= and remote=
 *
 * Return: 0, or -EINVAL after logging which entry is wrong and why.
 */
int engram_params_init(void)
{
	char err[200];
	unsigned int i;
	int ret;

	ret = engram_url_list_parse(engram_listen, ENGRAM_URL_LISTEN,
				    engram_config.listen, ENGRAM_URL_MAX,
				    &engram_config.n_listen, err, sizeof(err));
	if (ret) {
		pr_err("listen=: %s\n", err);
		return ret;
	}
	ret = engram_url_list_parse(engram_remote, ENGRAM_URL_REMOTE,
				    engram_config.remote, ENGRAM_URL_MAX,
				    &engram_config.n_remote, err, sizeof(err));
	if (ret) {
		pr_err("remote=: %s\n", err);
		return ret;
	}
	for (i = 0; i < engram_config.n_listen; i++)
		pr_info("listen %s\n", engram_config.listen[i].text);
	for (i = 0; i < engram_config.n_remote; i++)
		pr_info("remote %s\n", engram_config.remote[i].text);
	return 0;
}
