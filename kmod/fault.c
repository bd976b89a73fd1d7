// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection on the serving side, for the tests of the client's
 * deadline and fallback paths: a response can be held back for a while
 * before its rows are sent, or dropped.  Debian's kernels have no fault
 * injection framework built in for modules, and a knob that is a plain
 * module parameter can be flipped at run time from a test script:
 *
 *   /sys/module/engram_rdma/parameters/fault_delay_ms
 *   /sys/module/engram_rdma/parameters/fault_drop_pct
 *
 * and one that stands in for a slow IOMMU, which Soft-RoCE (no DMA
 * mapping at all) cannot be: fault_map_delay_ms makes every DMA mapping of
 * a table's pages (dmamap.c) take that long.
 *
 * Both are 0 (off) unless set; every response they touch is counted in
 * FAULTS_INJECTED so a production host shows at a glance that a knob was
 * left on.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include <linux/sched.h>

#include "engram.h"
#include "server.h"

#define ENGRAM_FAULT_DELAY_MAX_MS	60000
/* Sleep in slices so an unload does not wait out a long delay. */
#define ENGRAM_FAULT_SLICE_MS		20

static unsigned int engram_fault_delay;
static unsigned int engram_fault_drop;
static unsigned int engram_fault_map_delay;

static int engram_fault_set(const char *val, const struct kernel_param *kp,
			    unsigned int max)
{
	unsigned int v;

	if (kstrtouint(val, 0, &v) || v > max) {
		pr_err("%s=%s: want 0-%u\n", kp->name, val, max);
		return -EINVAL;
	}
	if (v)
		pr_warn("fault injection on: %s=%u\n", kp->name, v);
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static int engram_fault_delay_set(const char *val, const struct kernel_param *kp)
{
	return engram_fault_set(val, kp, ENGRAM_FAULT_DELAY_MAX_MS);
}

static int engram_fault_drop_set(const char *val, const struct kernel_param *kp)
{
	return engram_fault_set(val, kp, 100);
}

static const struct kernel_param_ops engram_fault_delay_ops = {
	.set = engram_fault_delay_set,
	.get = param_get_uint,
};

static const struct kernel_param_ops engram_fault_drop_ops = {
	.set = engram_fault_drop_set,
	.get = param_get_uint,
};

module_param_cb(fault_delay_ms, &engram_fault_delay_ops, &engram_fault_delay, 0644);
MODULE_PARM_DESC(fault_delay_ms,
		 "testing only: hold every response this long before sending its rows (0-60000, default 0)");
module_param_cb(fault_drop_pct, &engram_fault_drop_ops, &engram_fault_drop, 0644);
MODULE_PARM_DESC(fault_drop_pct,
		 "testing only: drop this percentage of responses, rows and all (0-100, default 0)");
module_param_cb(fault_map_delay_ms, &engram_fault_delay_ops, &engram_fault_map_delay, 0644);
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
	unsigned int delay = READ_ONCE(engram_fault_map_delay);

	if (!delay)
		return;
	engram_count(&engram_global_stats, ENGRAM_STAT_FAULTS_INJECTED);
	msleep(delay);
}

/**
 * engram_fault_response() - apply the fault knobs to one response
 *
 * Called by a transport in process context after a request passed every
 * check and holds its table, right before the first row is sent, so a
 * delayed response is delayed rows and all: that is what a late write
 * would be.  Sleeps for fault_delay_ms, cut short when the server stops.
 *
 * Return: true when the response must be dropped (nothing is sent for
 * this ticket), false to send it now.
 */
bool engram_fault_response(void)
{
	unsigned int delay = READ_ONCE(engram_fault_delay);
	unsigned int drop = READ_ONCE(engram_fault_drop);
	unsigned long end;

	if (!delay && !drop)
		return false;
	engram_count(&engram_global_stats, ENGRAM_STAT_FAULTS_INJECTED);
	end = jiffies + msecs_to_jiffies(delay);
	while (delay && time_before(jiffies, end) && !READ_ONCE(engram_server_stopping))
		msleep(ENGRAM_FAULT_SLICE_MS);
	return drop && get_random_u32() % 100 < drop;
}
