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
#include <linux/string.h>
#include <linux/sysfs.h>

#include "engram.h"

static char *engram_listen;
module_param_named(listen, engram_listen, charp, 0444);
MODULE_PARM_DESC(listen,
		 "comma-separated rdma://IP:PORT or tcp://IP:PORT to serve on (IPv6 in brackets)");

/* Root only: which servers a node fetches from maps the deployment. */
static char *engram_remote;
module_param_named(remote, engram_remote, charp, 0400);
MODULE_PARM_DESC(remote,
		 "comma-separated rdma://SERVER:PORT@LOCAL or tcp://SERVER:PORT@LOCAL to fetch from");

/**
 * engram_params_uint_param_set() - set a &struct engram_uint_param within its range
 * @val: the text written (module load or sysfs)
 * @kp: the parameter; kp->arg is the &struct engram_uint_param
 *
 * Return: 0, or -EINVAL for text that is not a number in range.
 */
static int engram_params_uint_param_set(const char *val, const struct kernel_param *kp)
{
	struct engram_uint_param *p = kp->arg;
	unsigned int v;

	if (kstrtouint(val, 0, &v) || ((v || !p->zero_ok) && (v < p->min || v > p->max))) {
		/* A write through sysfs ends in a newline: not part of the value. */
		pr_err("%s=%.*s: want %s%s%s%u-%u\n", kp->name, (int)strcspn(val, "\n"), val,
		       p->unit ?: "", p->unit ? " in " : "", p->zero_ok ? "0 or " : "",
		       p->min, p->max);
		return -EINVAL;
	}
	if (p->warn && v)
		pr_warn("fault injection on: %s=%u\n", kp->name, v);
	WRITE_ONCE(p->val, v);
	if (p->changed)
		p->changed();
	return 0;
}

static int engram_params_uint_param_get(char *buf, const struct kernel_param *kp)
{
	const struct engram_uint_param *p = kp->arg;

	return sysfs_emit(buf, "%u\n", READ_ONCE(p->val));
}

const struct kernel_param_ops engram_uint_param_ops = {
	.set = engram_params_uint_param_set,
	.get = engram_params_uint_param_get,
};

#define ENGRAM_MS	"milliseconds"

static struct engram_uint_param engram_timeout = {
	.val = 1000, .min = 1, .max = 600000, .unit = ENGRAM_MS,
};

module_param_cb(timeout_ms, &engram_uint_param_ops, &engram_timeout, 0644);
MODULE_PARM_DESC(timeout_ms, "default fetch deadline in milliseconds (1-600000, default 1000)");

/*
 * Link liveness and reconnects (link.c).  Each is read afresh every time
 * it is used, so a change at run time applies from the next heartbeat or
 * reconnect on.
 */
static struct engram_uint_param engram_hb = {
	.val = 1000, .min = 0, .max = 60000, .unit = ENGRAM_MS,
};

static struct engram_uint_param engram_hb_timeout = {
	.val = 3000, .min = 10, .max = 600000, .unit = ENGRAM_MS,
};

static struct engram_uint_param engram_reconnect_min = {
	.val = 200, .min = 1, .max = 600000, .unit = ENGRAM_MS,
};

static struct engram_uint_param engram_reconnect_max = {
	.val = 5000, .min = 1, .max = 600000, .unit = ENGRAM_MS,
};

module_param_cb(heartbeat_ms, &engram_uint_param_ops, &engram_hb, 0644);
MODULE_PARM_DESC(heartbeat_ms,
		 "interval of link heartbeats in milliseconds (0 disables, up to 60000, default 1000)");
module_param_cb(heartbeat_timeout_ms, &engram_uint_param_ops, &engram_hb_timeout, 0644);
MODULE_PARM_DESC(heartbeat_timeout_ms,
		 "a link that hears nothing this long while a heartbeat is unanswered is broken (10-600000, default 3000)");
module_param_cb(reconnect_min_ms, &engram_uint_param_ops, &engram_reconnect_min, 0644);
MODULE_PARM_DESC(reconnect_min_ms, "first reconnect delay in milliseconds (1-600000, default 200)");
module_param_cb(reconnect_max_ms, &engram_uint_param_ops, &engram_reconnect_max, 0644);
MODULE_PARM_DESC(reconnect_max_ms,
		 "longest reconnect delay in milliseconds, before jitter (1-600000, default 5000)");

/*
 * A fetch of a table opened on no link is split over its replicas when it
 * has at least twice this many rows (replica.c): each part at least this
 * many, at most one part per replica that is up.  0: never split.
 */
static struct engram_uint_param engram_split_rows = {
	.val = 16384, .min = 0, .max = ENGRAM_WIRE_MAX_ROWS, .unit = "rows",
};

module_param_cb(replica_split_rows, &engram_uint_param_ops, &engram_split_rows, 0644);
MODULE_PARM_DESC(replica_split_rows,
		 "split a fetch over replicas into parts of at least this many rows (0 never, up to 1048576, default 16384)");

/*
 * A table opened on no link goes over RDMA to a host that a link of each
 * transport reaches (replica.c): the TCP link takes its parts only when
 * the RDMA link cannot (down, full, refused, failed).  0: both are
 * replicas alike, parts spread over them by load.
 */
static bool engram_prefer_rdma = true;

module_param_named(replica_prefer_rdma, engram_prefer_rdma, bool, 0644);
MODULE_PARM_DESC(replica_prefer_rdma,
		 "a table opened on no link goes to a host over RDMA rather than TCP when links of both reach it (default Y)");

/*
 * The newest wire protocol version offered, by links and listeners alike:
 * lowered to 1, this host speaks only what a version 1 peer does (during
 * a rolling upgrade, or to compare).  Read at each connection.
 */
static struct engram_uint_param engram_protocol = {
	.val = ENGRAM_WIRE_VERSION, .min = ENGRAM_WIRE_VERSION_MIN, .max = ENGRAM_WIRE_VERSION,
};

module_param_cb(protocol_version, &engram_uint_param_ops, &engram_protocol, 0644);
MODULE_PARM_DESC(protocol_version,
		 "newest wire protocol version offered to peers (1-6, default 6)");

/**
 * engram_params_heartbeat_ms() - interval between link heartbeats
 *
 * Return: milliseconds, 0 when heartbeats are off.
 */
unsigned int engram_params_heartbeat_ms(void)
{
	return READ_ONCE(engram_hb.val);
}

/**
 * engram_params_heartbeat_timeout_ms() - silence after which a link is broken
 *
 * Return: milliseconds, at least 10.
 */
unsigned int engram_params_heartbeat_timeout_ms(void)
{
	return READ_ONCE(engram_hb_timeout.val);
}

/**
 * engram_params_reconnect_ms() - the bounds of the reconnect backoff
 * @min_ms: first delay
 * @max_ms: largest delay before jitter, never below @min_ms
 */
void engram_params_reconnect_ms(unsigned int *min_ms, unsigned int *max_ms)
{
	*min_ms = READ_ONCE(engram_reconnect_min.val);
	*max_ms = max(READ_ONCE(engram_reconnect_max.val), *min_ms);
}

/**
 * engram_params_replica_split_rows() - the smallest part of a split fetch
 *
 * Return: rows; 0 when fetches are never split.
 */
unsigned int engram_params_replica_split_rows(void)
{
	return READ_ONCE(engram_split_rows.val);
}

/**
 * engram_params_replica_prefer_rdma() - RDMA first, to a host both reach
 *
 * Return: true when a TCP link to a host is kept for when its RDMA link
 * cannot take a part.
 */
bool engram_params_replica_prefer_rdma(void)
{
	return READ_ONCE(engram_prefer_rdma);
}

struct engram_config engram_config;

/**
 * engram_params_timeout_ms() - the default fetch deadline
 *
 * Return: milliseconds; writable at run time through sysfs.
 */
unsigned int engram_params_timeout_ms(void)
{
	return READ_ONCE(engram_timeout.val);
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

/**
 * engram_params_protocol_version() - newest wire protocol version to offer
 *
 * Return: ENGRAM_WIRE_VERSION_MIN..ENGRAM_WIRE_VERSION.
 */
u16 engram_params_protocol_version(void)
{
	return READ_ONCE(engram_protocol.val);
}
