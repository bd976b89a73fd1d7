// SPDX-License-Identifier: GPL-2.0
/*
 * The periodic log line: every statlog_s seconds, one line per table whose
 * counters moved since the last line, with the deltas over that interval.
 * A host's tables and a client's link tables both get one, so an operator
 * reading only the kernel log sees lookups, rows, latency, fallbacks and
 * transport errors without running engramctl.  Quiet tables log nothing.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/math64.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "link_table.h"

#define ENGRAM_STATLOG_MAX_S	86400

static unsigned int engram_statlog_s = 60;
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
	u64 lat[ENGRAM_LAT_BUCKETS];
};

/* Only the worker touches these. */
static struct engram_statlog_prev *engram_statlog_prev;
static unsigned int engram_statlog_nprev;

static void engram_statlog_kick(void)
{
	unsigned int s = READ_ONCE(engram_statlog_s);

	mutex_lock(&engram_statlog_lock);
	if (s && engram_statlog_running)
		mod_delayed_work(system_wq, &engram_statlog_dwork, s * HZ);
	mutex_unlock(&engram_statlog_lock);
}

static int engram_statlog_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v;

	if (kstrtouint(val, 0, &v) || v > ENGRAM_STATLOG_MAX_S) {
		pr_err("statlog_s=%s: want seconds in 0-%u (0: off)\n", val, ENGRAM_STATLOG_MAX_S);
		return -EINVAL;
	}
	WRITE_ONCE(engram_statlog_s, v);
	/* A new interval starts now rather than after the old one ends. */
	engram_statlog_kick();
	return 0;
}

static const struct kernel_param_ops engram_statlog_ops = {
	.set = engram_statlog_set,
	.get = param_get_uint,
};

module_param_cb(statlog_s, &engram_statlog_ops, &engram_statlog_s, 0644);
MODULE_PARM_DESC(statlog_s,
		 "seconds between per-table statistics log lines (0 off, max 86400, default 60)");

/*
 * The upper edge, in microseconds, of the histogram bucket that holds the
 * @pct-th percentile of the operations counted in @lat minus @prev.
 * Bucket b holds [2^b, 2^(b+1)) us (bucket 0 everything under 2 us), so
 * the true value is below the figure logged.  0 when nothing was counted.
 */
static u64 engram_statlog_pct(const u64 *lat, const u64 *prev, unsigned int pct)
{
	u64 total = 0, want, seen = 0;
	unsigned int b;

	for (b = 0; b < ENGRAM_LAT_BUCKETS; b++)
		total += lat[b] - prev[b];
	if (!total)
		return 0;
	/* The smallest count that covers pct percent, at least 1. */
	want = div_u64(total * pct + 99, 100);
	for (b = 0; b < ENGRAM_LAT_BUCKETS; b++) {
		seen += lat[b] - prev[b];
		if (seen >= want)
			break;
	}
	return 2ULL << min_t(unsigned int, b, ENGRAM_LAT_BUCKETS - 1);
}

static u64 engram_statlog_refused(const u64 *cur, const u64 *prev)
{
	unsigned int id;
	u64 n = 0;

	for (id = ENGRAM_STAT_REFUSED_BAD_VERSION; id <= ENGRAM_STAT_REFUSED_INTERNAL; id++)
		n += cur[id] - prev[id];
	return n;
}

/**
 * engram_statlog_line() - log one table's interval, if anything moved
 * @name: the table's name
 * @link_id: the link it is fetched through, or 0 for a table this host serves
 * @cur: its counters now, indexed by enum engram_stat
 * @prev: its counters at the last line
 * @lat: its latency histogram now
 * @prev_lat: the histogram at the last line
 *
 * A client's line counts fetches as lookups; a host's line has no
 * fallbacks or transport errors of its own (those are per connection,
 * module-wide), so it shows the requests it refused instead.
 */
void engram_statlog_line(const char *name, u32 link_id, const u64 *cur, const u64 *prev,
			 const u64 *lat, const u64 *prev_lat)
{
	u64 p50, p99;

	if (!memcmp(cur, prev, __ENGRAM_STAT_MAX * sizeof(*cur)) &&
	    !memcmp(lat, prev_lat, ENGRAM_LAT_BUCKETS * sizeof(*lat)))
		return;
	p50 = engram_statlog_pct(lat, prev_lat, 50);
	p99 = engram_statlog_pct(lat, prev_lat, 99);
	if (link_id)
		pr_info("table %s via link %u: lookups %llu rows %llu p50 %lluus p99 %lluus fallbacks %llu transport_errors %llu\n",
			name, link_id,
			cur[ENGRAM_STAT_FETCHES] - prev[ENGRAM_STAT_FETCHES],
			cur[ENGRAM_STAT_FETCH_ROWS] - prev[ENGRAM_STAT_FETCH_ROWS],
			p50, p99,
			cur[ENGRAM_STAT_FALLBACKS] - prev[ENGRAM_STAT_FALLBACKS],
			cur[ENGRAM_STAT_TRANSPORT_ERRORS] - prev[ENGRAM_STAT_TRANSPORT_ERRORS]);
	else
		pr_info("table %s: lookups %llu rows %llu p50 %lluus p99 %lluus refused %llu\n",
			name, cur[ENGRAM_STAT_LOOKUPS] - prev[ENGRAM_STAT_LOOKUPS],
			cur[ENGRAM_STAT_ROWS] - prev[ENGRAM_STAT_ROWS], p50, p99,
			engram_statlog_refused(cur, prev));
}

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
			engram_statlog_line(ti->name, 0, ti->stats, p->stats, ti->lat, p->lat);
		else
			engram_statlog_line(ti->name, 0, ti->stats, next[n].stats, ti->lat,
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
	engram_link_tables_log();
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
 * engram_statlog_exit() - stop logging and free the per-table client counters
 *
 * After the character device is gone, so no fd still uses a link table.
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
	engram_link_tables_exit();
}
