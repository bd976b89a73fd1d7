// SPDX-License-Identifier: GPL-2.0
/*
 * The periodic log line: every statlog_s seconds, one line per table whose
 * counters moved since the last line, with the deltas over that interval.
 * A host's tables and a client's link tables both get one, so an operator
 * reading only the kernel log sees lookups, rows, latency, fallbacks and
 * transport errors without running engramctl.  Quiet tables log nothing.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "link_table.h"

#define ENGRAM_STATLOG_MAX_S	86400

static void engram_statlog_kick(void);
static struct engram_uint_param engram_statlog_s = {
	.val = 60, .max = ENGRAM_STATLOG_MAX_S, .unit = "seconds",
	/* A new interval starts now rather than after the old one ends. */
	.changed = engram_statlog_kick,
};

static void engram_statlog_work(struct work_struct *work);
static DECLARE_DELAYED_WORK(engram_statlog_dwork, engram_statlog_work);
/* Between init and exit; under the lock, so nothing requeues after exit. */
static bool engram_statlog_running;
static DEFINE_MUTEX(engram_statlog_lock);

/* A server table's counters at its last line, matched by name and generation. */
struct engram_statlog_prev {
	char name[ENGRAM_NAME_MAX];
	u64 generation;
	u64 stats[__ENGRAM_STAT_MAX];
	u64 lat[ENGRAM_LAT_SLOTS];
};

/* Only the worker touches these. */
static struct engram_statlog_prev *engram_statlog_prev;
static unsigned int engram_statlog_nprev;

static void engram_statlog_kick(void)
{
	unsigned int s = READ_ONCE(engram_statlog_s.val);

	mutex_lock(&engram_statlog_lock);
	if (s && engram_statlog_running)
		mod_delayed_work(system_wq, &engram_statlog_dwork, s * HZ);
	mutex_unlock(&engram_statlog_lock);
}

module_param_cb(statlog_s, &engram_uint_param_ops, &engram_statlog_s, 0644);
MODULE_PARM_DESC(statlog_s,
		 "seconds between per-table statistics log lines (0 off, max 86400, default 60)");

/* The host's tables: match each with its last line, keep the list current. */
static void engram_statlog_tables(void)
{
	struct engram_statlog_prev *next, *p;
	struct engram_table_info *ti;
	unsigned int n = 0, i;

	ti = kmalloc(sizeof(*ti), GFP_KERNEL);
	next = kcalloc(ENGRAM_MAX_TABLES, sizeof(*next), GFP_KERNEL);
	if (!ti || !next)
		goto out;
	while (n < ENGRAM_MAX_TABLES && !engram_table_info_nth(n, ti)) {
		p = NULL;
		for (i = 0; i < engram_statlog_nprev; i++) {
			if (engram_statlog_prev[i].generation == ti->generation &&
			    !strcmp(engram_statlog_prev[i].name, ti->name)) {
				p = &engram_statlog_prev[i];
				break;
			}
		}
		/* A table new since the last tick: its whole count is the delta. */
		if (p)
			engram_stats_log_line(ti->name, 0, ti->stats, p->stats, ti->lat, p->lat);
		else
			engram_stats_log_line(ti->name, 0, ti->stats, next[n].stats, ti->lat,
					      next[n].lat);
		strscpy(next[n].name, ti->name, sizeof(next[n].name));
		next[n].generation = ti->generation;
		memcpy(next[n].stats, ti->stats, sizeof(next[n].stats));
		memcpy(next[n].lat, ti->lat, sizeof(next[n].lat));
		n++;
	}
	kfree(engram_statlog_prev);
	engram_statlog_prev = next;
	engram_statlog_nprev = n;
	next = NULL;
out:
	kfree(next);
	kfree(ti);
}

static void engram_statlog_work(struct work_struct *work)
{
	engram_statlog_tables();
	engram_link_table_log();
	engram_statlog_kick();
}

/**
 * engram_statlog_init() - start the periodic log line
 *
 * Counters that moved before the first tick are logged at the first tick.
 */
void engram_statlog_init(void)
{
	mutex_lock(&engram_statlog_lock);
	engram_statlog_running = true;
	mutex_unlock(&engram_statlog_lock);
	engram_statlog_kick();
}

/**
 * engram_statlog_exit() - stop logging
 */
void engram_statlog_exit(void)
{
	mutex_lock(&engram_statlog_lock);
	engram_statlog_running = false;
	mutex_unlock(&engram_statlog_lock);
	cancel_delayed_work_sync(&engram_statlog_dwork);
	kfree(engram_statlog_prev);
	engram_statlog_prev = NULL;
	engram_statlog_nprev = 0;
}
