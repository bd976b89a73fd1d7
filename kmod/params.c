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
#include <linux/sysfs.h>

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

/*
 * Link liveness and reconnects (link.c).  Each is read afresh every time
 * it is used, so a change at run time applies from the next heartbeat or
 * reconnect on.  The range is in kp->arg's neighbour: see engram_ms_param.
 */
struct engram_ms_param {
	unsigned int val;
	unsigned int min;
	unsigned int max;
};

static struct engram_ms_param engram_hb = { 1000, 0, 60000 };
static struct engram_ms_param engram_hb_timeout = { 3000, 10, 600000 };
static struct engram_ms_param engram_reconnect_min = { 200, 1, 600000 };
static struct engram_ms_param engram_reconnect_max = { 5000, 1, 600000 };

static int engram_ms_set(const char *val, const struct kernel_param *kp)
{
	struct engram_ms_param *p = kp->arg;
	unsigned int v;

	if (kstrtouint(val, 0, &v) || v < p->min || v > p->max) {
		pr_err("%s=%s: want milliseconds in %u-%u\n", kp->name, val, p->min, p->max);
		return -EINVAL;
	}
	WRITE_ONCE(p->val, v);
	return 0;
}

static int engram_ms_get(char *buf, const struct kernel_param *kp)
{
	const struct engram_ms_param *p = kp->arg;

	return sysfs_emit(buf, "%u\n", READ_ONCE(p->val));
}

static const struct kernel_param_ops engram_ms_ops = {
	.set = engram_ms_set,
	.get = engram_ms_get,
};

module_param_cb(heartbeat_ms, &engram_ms_ops, &engram_hb, 0644);
MODULE_PARM_DESC(heartbeat_ms,
		 "interval of link heartbeats in milliseconds (0 disables, up to 60000, default 1000)");
module_param_cb(heartbeat_timeout_ms, &engram_ms_ops, &engram_hb_timeout, 0644);
MODULE_PARM_DESC(heartbeat_timeout_ms,
		 "a link that hears nothing this long while a heartbeat is unanswered is broken (10-600000, default 3000)");
module_param_cb(reconnect_min_ms, &engram_ms_ops, &engram_reconnect_min, 0644);
MODULE_PARM_DESC(reconnect_min_ms, "first reconnect delay in milliseconds (1-600000, default 200)");
module_param_cb(reconnect_max_ms, &engram_ms_ops, &engram_reconnect_max, 0644);
MODULE_PARM_DESC(reconnect_max_ms,
		 "longest reconnect delay in milliseconds, before jitter (1-600000, default 5000)");

/**
 * engram_heartbeat_ms() - interval between link heartbeats
 *
 * Return: milliseconds, 0 when heartbeats are off.
 */
unsigned int engram_heartbeat_ms(void)
{
	return READ_ONCE(engram_hb.val);
}

/**
 * engram_heartbeat_timeout_ms() - silence after which a link is broken
 *
 * Return: milliseconds, at least 10.
 */
unsigned int engram_heartbeat_timeout_ms(void)
{
	return READ_ONCE(engram_hb_timeout.val);
}

/**
 * engram_reconnect_ms() - the bounds of the reconnect backoff
 * @min_ms: first delay
 * @max_ms: largest delay before jitter, never below @min_ms
 */
void engram_reconnect_ms(unsigned int *min_ms, unsigned int *max_ms)
{
	*min_ms = READ_ONCE(engram_reconnect_min.val);
	*max_ms = max(READ_ONCE(engram_reconnect_max.val), *min_ms);
}

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
