// SPDX-License-Identifier: GPL-2.0
/*
 * Per-table counters on the client side.  A link's counters say how the
 * link does; an engine wants to know how each of its tables does through
 * it, and how often it had to serve one from its local copy instead.  So
 * every (link, table name, SHA-256) that /dev/engram_rdma opened gets one
 * engram_link_table, shared by every fd that opens the same table through
 * the same link: fetch counters, refusals the server sent back, fetches
 * that failed without a server status (transport errors), the fallbacks
 * user space reports, and a latency histogram.
 *
 * Lifetime: an entry lives while its link exists or while an fd still has
 * the table open, whichever is longer; it holds a reference on its link,
 * so the link's id is not reused while its tables are still listed.  Once
 * the link is deleted and no fd uses the entry, the next open, stats dump
 * or log tick drops it.  Entries are bounded (ENGRAM_LINK_TABLES_MAX): past
 * that, a newly opened table is served but not counted per table.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "client.h"
#include "link_table.h"

#define ENGRAM_LINK_TABLES_MAX	1024

struct engram_link_table {
	struct list_head node;		/* on engram_link_tables */
	struct engram_link *link;	/* held */
	u32 link_id;
	unsigned int users;		/* open handles; under engram_lt_mutex */
	char name[ENGRAM_NAME_MAX];
	u8 sha256[ENGRAM_SHA256_LEN];
	u64 weight_offset;		/* with the digest, which table of the file */
	struct engram_counters stats;
	struct engram_hist lat;
	/* What the last log line covered; only the log worker touches these. */
	u64 logged[__ENGRAM_STAT_MAX];
	u64 logged_lat[ENGRAM_LAT_SLOTS];
};

static LIST_HEAD(engram_link_tables);
static DEFINE_MUTEX(engram_lt_mutex);
static unsigned int engram_nr_link_tables;

/* Is the entry's link still listed?  Its id cannot be reused: we hold it. */
static bool engram_link_table_link_listed(struct engram_link_table *lt,
					  struct engram_link_info *scratch)
{
	return !engram_link_admin_info_by_id(lt->link_id, scratch);
}

static void engram_link_table_free(struct engram_link_table *lt)
{
	list_del(&lt->node);
	engram_nr_link_tables--;
	engram_link_put(lt->link);
	kfree(lt);
}

/* Drop the entries nobody uses whose link is gone; under engram_lt_mutex. */
static void engram_link_table_prune_locked(void)
{
	struct engram_link_table *lt, *tmp;
	struct engram_link_info *li;

	lockdep_assert_held(&engram_lt_mutex);
	li = kmalloc(sizeof(*li), GFP_KERNEL);
	if (!li)
		return;		/* tried again next time */
	list_for_each_entry_safe(lt, tmp, &engram_link_tables, node)
		if (!lt->users && !engram_link_table_link_listed(lt, li))
			engram_link_table_free(lt);
	kfree(li);
}

/**
 * engram_link_table_get() - the counters of a table opened through a link
 * @l: the link the table was opened on (a reference is taken)
 * @name: the table's name in the link's catalog
 * @sha256: its file's SHA-256
 * @weight_offset: where its weight tensor is in the file (0: not known)
 *
 * Counters are per table, that is per identity on the link: a name
 * reloaded with another table of the same file counts apart.  Called at
 * ENGRAM_IOC_OPEN_TABLE; the caller drops the use with
 * engram_link_table_put() when its handle goes.
 *
 * Return: the entry, or NULL when there is no room (or memory) for one:
 * the table is then not counted per table, which must not stop it working.
 */
struct engram_link_table *engram_link_table_get(struct engram_link *l, const char *name,
						const u8 *sha256, u64 weight_offset)
{
	struct engram_link_table *lt;
	u32 id = engram_link_id(l);

	mutex_lock(&engram_lt_mutex);
	list_for_each_entry(lt, &engram_link_tables, node) {
		if (lt->link == l && !strcmp(lt->name, name) &&
		    !memcmp(lt->sha256, sha256, ENGRAM_SHA256_LEN) &&
		    lt->weight_offset == weight_offset) {
			lt->users++;
			goto out;
		}
	}
	if (engram_nr_link_tables >= ENGRAM_LINK_TABLES_MAX)
		engram_link_table_prune_locked();
	lt = NULL;
	if (engram_nr_link_tables >= ENGRAM_LINK_TABLES_MAX) {
		pr_warn_ratelimited("link %u: table %s not counted per table: %u tables already are\n",
				    id, name, ENGRAM_LINK_TABLES_MAX);
		goto out;
	}
	lt = kzalloc(sizeof(*lt), GFP_KERNEL);
	if (!lt)
		goto out;
	engram_link_get(l);
	lt->link = l;
	lt->link_id = id;
	lt->users = 1;
	strscpy(lt->name, name, sizeof(lt->name));
	memcpy(lt->sha256, sha256, ENGRAM_SHA256_LEN);
	lt->weight_offset = weight_offset;
	list_add_tail(&lt->node, &engram_link_tables);
	engram_nr_link_tables++;
out:
	mutex_unlock(&engram_lt_mutex);
	return lt;
}

/**
 * engram_link_table_put() - an fd's handle on the table is gone
 * @lt: from engram_link_table_get(), or NULL
 *
 * The entry stays (it is pruned later) so the counters survive the fds.
 */
void engram_link_table_put(struct engram_link_table *lt)
{
	if (!lt)
		return;
	mutex_lock(&engram_lt_mutex);
	lt->users--;
	mutex_unlock(&engram_lt_mutex);
}

/**
 * engram_link_table_fetched() - count a fetch that has ended
 * @lt: the table's entry, or NULL
 * @error: the fetch's result, 0 or a negative errno
 * @wire_status: the server's status (ENGRAM_WIRE_OK when it sent none)
 * @nr_rows: rows asked for
 * @rtt_ns: submit to completion
 *
 * A failure the server did not state (no wire status) is a transport
 * error: the connection broke, the link went down, or the deadline passed.
 */
void engram_link_table_fetched(struct engram_link_table *lt, int error, u16 wire_status,
			       u32 nr_rows, u64 rtt_ns)
{
	if (!lt)
		return;
	if (!error) {
		engram_count(&lt->stats, ENGRAM_STAT_FETCHES);
		engram_count_add(&lt->stats, ENGRAM_STAT_FETCH_ROWS, nr_rows);
		engram_count_add(&lt->stats, ENGRAM_STAT_FETCH_BYTES,
				 (u64)nr_rows * ENGRAM_ROW_BYTES);
		engram_stats_hist_add(&lt->lat, rtt_ns);
		return;
	}
	engram_count(&lt->stats, ENGRAM_STAT_FETCH_ERRORS);
	if (error == -ETIMEDOUT)
		engram_count(&lt->stats, ENGRAM_STAT_FETCH_TIMEOUTS);
	if (wire_status != ENGRAM_WIRE_OK)
		engram_stats_count_refusal(&lt->stats, wire_status);
	else
		engram_count(&lt->stats, ENGRAM_STAT_TRANSPORT_ERRORS);
}

/**
 * engram_link_table_count() - count one event of a table on a link
 * @lt: the table's entry, or NULL
 * @stat: ENGRAM_STAT_*
 */
void engram_link_table_count(struct engram_link_table *lt, enum engram_stat stat)
{
	if (lt)
		engram_count(&lt->stats, stat);
}

/**
 * engram_link_table_submit_failed() - count a fetch the link could not send
 * @lt: the table's entry, or NULL
 * @error: what engram_link_submit() returned
 *
 * Only the link's state counts here (down, or broken while posting); a
 * request the caller got wrong (too many rows, ...) is not a failure of
 * the table.
 */
void engram_link_table_submit_failed(struct engram_link_table *lt, int error)
{
	if (!lt || (error != -ENOTCONN && error != -EIO))
		return;
	engram_count(&lt->stats, ENGRAM_STAT_FETCH_ERRORS);
	engram_count(&lt->stats, ENGRAM_STAT_TRANSPORT_ERRORS);
}

/**
 * engram_link_table_report() - user space served rows from its local copy
 * @lt: the table's entry, or NULL
 * @rows: rows it served
 *
 * Counted per table here and module-wide; a link's FALLBACKS are the sum
 * over its tables (engram_link_table_fold()).
 */
void engram_link_table_report(struct engram_link_table *lt, u32 rows)
{
	engram_count(&engram_global_stats, ENGRAM_STAT_FALLBACKS);
	engram_count_add(&engram_global_stats, ENGRAM_STAT_FALLBACK_ROWS, rows);
	if (!lt)
		return;
	engram_count(&lt->stats, ENGRAM_STAT_FALLBACKS);
	engram_count_add(&lt->stats, ENGRAM_STAT_FALLBACK_ROWS, rows);
}

/**
 * engram_link_table_info_nth() - snapshot the n-th link table
 * @n: position, from 0; position 0 first drops entries that are over
 * @info: filled on success
 *
 * Return: 0 or -ENOENT past the last one.
 */
int engram_link_table_info_nth(unsigned long n, struct engram_link_table_info *info)
{
	struct engram_link_table *lt;
	int ret = -ENOENT;

	mutex_lock(&engram_lt_mutex);
	if (!n)
		engram_link_table_prune_locked();
	list_for_each_entry(lt, &engram_link_tables, node) {
		if (n--)
			continue;
		memset(info, 0, sizeof(*info));
		info->link_id = lt->link_id;
		strscpy(info->name, lt->name, sizeof(info->name));
		memcpy(info->sha256, lt->sha256, sizeof(info->sha256));
		info->weight_offset = lt->weight_offset;
		engram_stats_counters_snapshot(&lt->stats, info->stats);
		engram_stats_hist_snapshot(&lt->lat, info->lat);
		ret = 0;
		break;
	}
	mutex_unlock(&engram_lt_mutex);
	return ret;
}

/**
 * engram_link_table_fold() - add a link's fallbacks to its counters
 * @link_id: the link
 * @stats: its counters, indexed by enum engram_stat
 *
 * User space reports fallbacks per table; the link's FALLBACKS and
 * FALLBACK_ROWS are the sums over the tables opened through it, which all
 * live as long as the link.
 */
void engram_link_table_fold(u32 link_id, u64 *stats)
{
	struct engram_link_table *lt;

	mutex_lock(&engram_lt_mutex);
	list_for_each_entry(lt, &engram_link_tables, node) {
		if (lt->link_id != link_id)
			continue;
		stats[ENGRAM_STAT_FALLBACKS] +=
			atomic64_read(&lt->stats.c[ENGRAM_STAT_FALLBACKS]);
		stats[ENGRAM_STAT_FALLBACK_ROWS] +=
			atomic64_read(&lt->stats.c[ENGRAM_STAT_FALLBACK_ROWS]);
	}
	mutex_unlock(&engram_lt_mutex);
}

/**
 * engram_link_table_log() - a log line for each link table that moved
 *
 * Called by the statlog worker only, which owns the logged[] snapshots.
 */
void engram_link_table_log(void)
{
	struct engram_link_table *lt;
	u64 *cur;

	cur = kmalloc_array(__ENGRAM_STAT_MAX + ENGRAM_LAT_SLOTS, sizeof(*cur), GFP_KERNEL);
	if (!cur)
		return;
	mutex_lock(&engram_lt_mutex);
	engram_link_table_prune_locked();
	list_for_each_entry(lt, &engram_link_tables, node) {
		engram_stats_counters_snapshot(&lt->stats, cur);
		engram_stats_hist_snapshot(&lt->lat, cur + __ENGRAM_STAT_MAX);
		engram_stats_log_line(lt->name, lt->link_id, cur, lt->logged,
				      cur + __ENGRAM_STAT_MAX, lt->logged_lat);
		memcpy(lt->logged, cur, sizeof(lt->logged));
		memcpy(lt->logged_lat, cur + __ENGRAM_STAT_MAX, sizeof(lt->logged_lat));
	}
	mutex_unlock(&engram_lt_mutex);
	kfree(cur);
}

/**
 * engram_link_table_exit() - free every entry
 *
 * At module unload, after the character device is gone: no fd uses any.
 */
void engram_link_table_exit(void)
{
	struct engram_link_table *lt, *tmp;

	mutex_lock(&engram_lt_mutex);
	list_for_each_entry_safe(lt, tmp, &engram_link_tables, node) {
		WARN_ON_ONCE(lt->users);
		engram_link_table_free(lt);
	}
	mutex_unlock(&engram_lt_mutex);
}
