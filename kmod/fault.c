// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection, for the tests of error paths that Soft-RoCE never takes.
 * On the serving side, for the client's deadline and fallback paths: a
 * response can be held back for a while before its rows are sent, or
 * dropped.  On the client side: a post can fail, and a queue pair can
 * break, as a real NIC's do (rxe never fails a post), and the connect
 * worker can be held between its steps.  Debian's kernels have no fault
 * injection framework built in for modules, and a knob that is a plain
 * module parameter can be flipped at run time from a test script:
 *
 *   /sys/module/engram_rdma/parameters/fault_delay_ms
 *   /sys/module/engram_rdma/parameters/fault_drop_pct
 *   /sys/module/engram_rdma/parameters/fault_client_*
 *
 * and one that stands in for a slow IOMMU, which Soft-RoCE (no DMA
 * mapping at all) cannot be: fault_map_delay_ms makes every DMA mapping of
 * a table's pages (dma.c) take that long.
 *
 * All are 0 (off) unless set; every response, post, connect or mapping
 * they touch is counted in FAULTS_INJECTED so a production host shows at a
 * glance that a knob was left on.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include <linux/sched.h>

#include "engram.h"

#define ENGRAM_FAULT_DELAY_MAX_MS	60000
/* Client knobs that count: fail the next this many posts (or fetches). */
#define ENGRAM_FAULT_COUNT_MAX		1000
/* The connect worker holds l->mutex meanwhile: keep it short. */
#define ENGRAM_FAULT_LIVE_DELAY_MAX_MS	30000
/* Sleep in slices so an unload does not wait out a long delay. */
#define ENGRAM_FAULT_SLICE_MS		20

static struct engram_uint_param engram_fault_delay = {
	.max = ENGRAM_FAULT_DELAY_MAX_MS, .warn = true,
};

static struct engram_uint_param engram_fault_drop = { .max = 100, .warn = true };

static struct engram_uint_param engram_fault_map_delay = {
	.max = ENGRAM_FAULT_DELAY_MAX_MS, .warn = true,
};

module_param_cb(fault_delay_ms, &engram_uint_param_ops, &engram_fault_delay, 0644);
MODULE_PARM_DESC(fault_delay_ms,
		 "testing only: hold every response this long before sending its rows (0-60000, default 0)");
module_param_cb(fault_drop_pct, &engram_uint_param_ops, &engram_fault_drop, 0644);
MODULE_PARM_DESC(fault_drop_pct,
		 "testing only: drop this percentage of responses, rows and all (0-100, default 0)");
module_param_cb(fault_map_delay_ms, &engram_uint_param_ops, &engram_fault_map_delay, 0644);
MODULE_PARM_DESC(fault_map_delay_ms,
		 "testing only: make every DMA mapping of a table take this long, as a slow IOMMU would (0-60000, default 0)");

/**
 * engram_fault_map() - apply fault_map_delay_ms to one DMA mapping
 *
 * Called where a table's pages are about to be mapped for a device, with
 * whatever lock the mapping holds; sleeps.
 */
void engram_fault_map(void)
{
	unsigned int delay = READ_ONCE(engram_fault_map_delay.val);

	if (!delay)
		return;
	engram_count(&engram_global_stats, ENGRAM_STAT_FAULTS_INJECTED);
	msleep(delay);
}

/**
 * engram_fault_response() - apply the fault knobs to one response
 * @stop: true once the wait must end early (the host role is stopping)
 *
 * Called by a transport in process context after a request passed every
 * check and holds its table, right before the first row is sent, so a
 * delayed response is delayed rows and all: that is what a late write
 * would be.  Sleeps for fault_delay_ms, cut short when @stop says so.
 *
 * Return: true when the response must be dropped (nothing is sent for
 * this ticket), false to send it now.
 */
bool engram_fault_response(bool (*stop)(void))
{
	unsigned int delay = READ_ONCE(engram_fault_delay.val);
	unsigned int drop = READ_ONCE(engram_fault_drop.val);
	unsigned long end;

	if (!delay && !drop)
		return false;
	engram_count(&engram_global_stats, ENGRAM_STAT_FAULTS_INJECTED);
	end = jiffies + msecs_to_jiffies(delay);
	while (delay && time_before(jiffies, end) && !stop())
		msleep(ENGRAM_FAULT_SLICE_MS);
	return drop && get_random_u32() % 100 < drop;
}

/**
 * engram_fault_response_armed() - would engram_fault_response() do anything?
 *
 * Any context: for a transport that answers in softirq, which must leave
 * a response the knobs delay or drop to a context that may sleep.
 *
 * Return: true when fault_delay_ms or fault_drop_pct is set.
 */
bool engram_fault_response_armed(void)
{
	return READ_ONCE(engram_fault_delay.val) || READ_ONCE(engram_fault_drop.val);
}

static struct engram_uint_param engram_fault_req_fail = {
	.max = ENGRAM_FAULT_COUNT_MAX, .warn = true,
};

static struct engram_uint_param engram_fault_inv_fail = {
	.max = ENGRAM_FAULT_COUNT_MAX, .warn = true,
};

static struct engram_uint_param engram_fault_inv_flush = {
	.max = ENGRAM_FAULT_COUNT_MAX, .warn = true,
};

static struct engram_uint_param engram_fault_queue_unfit = {
	.max = ENGRAM_FAULT_COUNT_MAX, .warn = true,
};

static struct engram_uint_param engram_fault_live_delay = {
	.max = ENGRAM_FAULT_LIVE_DELAY_MAX_MS, .warn = true,
};

module_param_cb(fault_client_req_fail, &engram_uint_param_ops, &engram_fault_req_fail, 0644);
MODULE_PARM_DESC(fault_client_req_fail,
		 "testing only: the client's next N posts of a fetch's registrations and request fail with EIO, nothing posted (0-1000, default 0)");
module_param_cb(fault_client_inv_fail, &engram_uint_param_ops, &engram_fault_inv_fail, 0644);
MODULE_PARM_DESC(fault_client_inv_fail,
		 "testing only: the client's next N posts of a fetch's local invalidations fail with EIO, nothing posted (0-1000, default 0)");
module_param_cb(fault_client_inv_flush, &engram_uint_param_ops, &engram_fault_inv_flush, 0644);
MODULE_PARM_DESC(fault_client_inv_flush,
		 "testing only: for the next N answered fetches with a local invalidation to post, the client's queue pair breaks right before it is posted (0-1000, default 0)");
module_param_cb(fault_client_queue_unfit, &engram_uint_param_ops, &engram_fault_queue_unfit,
		0644);
MODULE_PARM_DESC(fault_client_queue_unfit,
		 "testing only: the connect worker finds the next N further queue pairs of a link unfit once they are connected, and closes them (0-1000, default 0)");
module_param_cb(fault_client_live_delay_ms, &engram_uint_param_ops, &engram_fault_live_delay,
		0644);
MODULE_PARM_DESC(fault_client_live_delay_ms,
		 "testing only: a client link's connect worker waits this long before it goes live, and again before it reads the frames that came early (0-30000, default 0)");

/* Take one from a counting knob; true when the fault is to happen now. */
static bool engram_fault_take(unsigned int *left)
{
	unsigned int v = READ_ONCE(*left);

	do {
		if (!v)
			return false;
	} while (!try_cmpxchg(left, &v, v - 1));
	engram_count(&engram_global_stats, ENGRAM_STAT_FAULTS_INJECTED);
	return true;
}

static struct engram_uint_param engram_fault_verify = {
	.max = ENGRAM_FAULT_COUNT_MAX, .warn = true,
};

static struct engram_uint_param engram_fault_cat_repeat = {
	.max = ENGRAM_FAULT_COUNT_MAX, .warn = true,
};

module_param_cb(fault_server_catalog_repeat, &engram_uint_param_ops,
		&engram_fault_cat_repeat, 0644);
MODULE_PARM_DESC(fault_server_catalog_repeat,
		 "testing only: the next catalog an RDMA connection pushes goes N more times, back to back, as a host flooding its clients with catalogs (0-1000, default 0)");

/**
 * engram_fault_server_catalog_repeat() - must this pushed catalog go once more?
 *
 * Any context.  True (and counted) while fault_server_catalog_repeat is
 * not 0, which it counts down.
 *
 * Return: true to send the same catalog again at once.
 */
bool engram_fault_server_catalog_repeat(void)
{
	return engram_fault_take(&engram_fault_cat_repeat.val);
}

static struct engram_uint_param engram_fault_softirq_short = {
	.max = ENGRAM_FAULT_COUNT_MAX, .warn = true,
};

module_param_cb(fault_server_softirq_short, &engram_uint_param_ops,
		&engram_fault_softirq_short, 0644);
MODULE_PARM_DESC(fault_server_softirq_short,
		 "testing only: the next N responses answered in softirq find the send queue full after their first chain of WRITEs, and are finished by a work item, as on a backlogged connection (0-1000, default 0)");

/**
 * engram_fault_server_softirq_short() - must this softirq answer stop here?
 *
 * Any context.  True (and counted) while fault_server_softirq_short is
 * not 0, which it counts down.
 *
 * Return: true to take the send queue as full.
 */
bool engram_fault_server_softirq_short(void)
{
	return engram_fault_take(&engram_fault_softirq_short.val);
}

module_param_cb(fault_verify_mismatch, &engram_uint_param_ops, &engram_fault_verify,
		0644);
MODULE_PARM_DESC(fault_verify_mismatch,
		 "testing only: the next N verifies find the pinned pages' digest different from the load's, as after memory corruption (0-1000, default 0)");

/**
 * engram_fault_verify_mismatch() - must this verify find a mismatch?
 *
 * Stands in for pinned pages that changed under the table (a bit flipped
 * in RAM), which no test can cause on a file whose writes are denied.
 * Any context.  True (and counted) while fault_verify_mismatch is not 0,
 * which it counts down.
 *
 * Return: true to take the re-hash as different from the load's digest.
 */
bool engram_fault_verify_mismatch(void)
{
	return engram_fault_take(&engram_fault_verify.val);
}

/**
 * engram_fault_client_req_fail() - must this post of a fetch's request fail?
 *
 * Any context.  True (and counted) while fault_client_req_fail is not 0,
 * which it counts down.
 *
 * Return: true to fail the post as a NIC in error would, posting nothing.
 */
bool engram_fault_client_req_fail(void)
{
	return engram_fault_take(&engram_fault_req_fail.val);
}

/**
 * engram_fault_client_inv_fail() - must this post of a fetch's invalidations fail?
 *
 * Any context.  True (and counted) while fault_client_inv_fail is not 0,
 * which it counts down.
 *
 * Return: true to fail the post as a NIC in error would, posting nothing.
 */
bool engram_fault_client_inv_fail(void)
{
	return engram_fault_take(&engram_fault_inv_fail.val);
}

/**
 * engram_fault_client_inv_flush() - must the queue pair break before this invalidation?
 *
 * Any context.  True (and counted) while fault_client_inv_flush is not 0,
 * which it counts down.
 *
 * Return: true to move the queue pair to the error state first.
 */
bool engram_fault_client_inv_flush(void)
{
	return engram_fault_take(&engram_fault_inv_flush.val);
}

/**
 * engram_fault_client_queue_unfit() - must the worker drop this connected queue?
 *
 * Any context.  True (and counted) while fault_client_queue_unfit is not
 * 0, which it counts down: the worker then treats a further queue pair
 * that connected as it treats one on another device or with other limits.
 *
 * Return: true to close the queue pair and go on without it.
 */
bool engram_fault_client_queue_unfit(void)
{
	return engram_fault_take(&engram_fault_queue_unfit.val);
}

/**
 * engram_fault_client_live_delay_ms() - how long a connect worker waits
 *
 * Any context; counts a nonzero answer as one fault injected.
 *
 * Return: fault_client_live_delay_ms.
 */
unsigned int engram_fault_client_live_delay_ms(void)
{
	unsigned int ms = READ_ONCE(engram_fault_live_delay.val);

	if (ms)
		engram_count(&engram_global_stats, ENGRAM_STAT_FAULTS_INJECTED);
	return ms;
}
