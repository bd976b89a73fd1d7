// SPDX-License-Identifier: GPL-2.0
/*
 * Counters.  They are plain atomics bumped where things happen; this file
 * only says which counters exist where, so netlink can report them without
 * knowing the parts that count, and how one table's interval reads in the
 * log (statlog.c says when).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/log2.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/printk.h>
#include <linux/string.h>

#include "engram.h"

struct engram_counters engram_global_stats;

const u8 engram_table_stat_ids[] = {
	ENGRAM_STAT_LOOKUPS,
	ENGRAM_STAT_ROWS,
	ENGRAM_STAT_BYTES,
	ENGRAM_STAT_LOAD_BYTES,
	ENGRAM_STAT_LOAD_NS,
	ENGRAM_STAT_VERIFY_RUNS,
	ENGRAM_STAT_VERIFY_FAILURES,
	ENGRAM_STAT_REFUSED_BAD_VERSION,
	ENGRAM_STAT_REFUSED_MALFORMED,
	ENGRAM_STAT_REFUSED_UNKNOWN_TABLE,
	ENGRAM_STAT_REFUSED_TABLE_NOT_READY,
	ENGRAM_STAT_REFUSED_ROW_OUT_OF_RANGE,
	ENGRAM_STAT_REFUSED_TOO_MANY_ROWS,
	ENGRAM_STAT_REFUSED_TOO_MANY_RANGES,
	ENGRAM_STAT_REFUSED_DEST_TOO_SMALL,
	ENGRAM_STAT_REFUSED_BUSY,
	ENGRAM_STAT_REFUSED_SHUTTING_DOWN,
	ENGRAM_STAT_REFUSED_INTERNAL,
	ENGRAM_STAT_REFUSED_ROW_NOT_HELD,
};

const unsigned int engram_table_stat_count = ARRAY_SIZE(engram_table_stat_ids);

/* Reported module-wide before the per-table ids, which are summed there too. */
const u8 engram_global_stat_ids[] = {
	ENGRAM_STAT_LOADS_STARTED,
	ENGRAM_STAT_LOADS_DONE,
	ENGRAM_STAT_LOADS_FAILED,
	ENGRAM_STAT_LOADS_CANCELLED,
	ENGRAM_STAT_DIGEST_MISMATCHES,
	ENGRAM_STAT_REQUESTS_REFUSED,
	ENGRAM_STAT_CONNECTIONS,
	ENGRAM_STAT_CONNECTS_ACCEPTED,
	ENGRAM_STAT_CONNECTS_REJECTED,
	ENGRAM_STAT_TRANSPORT_ERRORS,
	ENGRAM_STAT_RDMA_WRITES,
	ENGRAM_STAT_CONNECTS_DENIED,
	ENGRAM_STAT_CONNECTS_OVER_LISTENER,
	ENGRAM_STAT_CONNECTS_OVER_PEER,
	ENGRAM_STAT_CONNECTS_OVER_TOTAL,
	ENGRAM_STAT_IDLE_CLOSES,
	ENGRAM_STAT_PEER_TIMEOUTS,
	ENGRAM_STAT_FAULTS_INJECTED,
	ENGRAM_STAT_FETCHES,
	ENGRAM_STAT_FETCH_ROWS,
	ENGRAM_STAT_FETCH_BYTES,
	ENGRAM_STAT_FETCH_ERRORS,
	ENGRAM_STAT_FETCH_TIMEOUTS,
	ENGRAM_STAT_REMOTE_INVALIDATIONS,
	ENGRAM_STAT_KEPT_REGISTRATIONS,
	ENGRAM_STAT_FAILOVERS,
	ENGRAM_STAT_SPLITS,
	ENGRAM_STAT_RECONNECTS,
	ENGRAM_STAT_HEARTBEATS_MISSED,
	ENGRAM_STAT_CATALOGS,
	ENGRAM_STAT_CATALOGS_REPLACED,
	ENGRAM_STAT_FALLBACKS,
	ENGRAM_STAT_FALLBACK_ROWS,
	ENGRAM_STAT_TCP_HELLO_TIMEOUTS,
	ENGRAM_STAT_TCP_FRAME_TIMEOUTS,
	ENGRAM_STAT_TCP_IDLE_CLOSES,
	ENGRAM_STAT_SERVED_RDMA_ROWS,
	ENGRAM_STAT_SERVED_RDMA_CPU_NS,
	ENGRAM_STAT_SERVED_TCP_ROWS,
	ENGRAM_STAT_SERVED_TCP_CPU_NS,
	ENGRAM_STAT_CLIENT_POSTS,
	ENGRAM_STAT_CLIENT_WRS,
	ENGRAM_STAT_CLIENT_CQES,
	ENGRAM_STAT_CLIENT_WORK_ITEMS,
	ENGRAM_STAT_CLIENT_ALLOCS,
	ENGRAM_STAT_HOST_REQUESTS,
	ENGRAM_STAT_HOST_POSTS,
	ENGRAM_STAT_HOST_WRS,
	ENGRAM_STAT_HOST_CQES,
	ENGRAM_STAT_HOST_WORK_ITEMS,
	ENGRAM_STAT_HOST_REQUEST_NS,
	ENGRAM_STAT_CLIENT_LINK_LOCKS,
	ENGRAM_STAT_CLIENT_SOFTIRQ_CQES,
};

const unsigned int engram_global_stat_count = ARRAY_SIZE(engram_global_stat_ids);

/*
 * Per link (client role).  The refusals here are the ones the server sent
 * back on that link; they are not summed module-wide, where REFUSED_* are
 * the refusals this host sent as a server.
 */
const u8 engram_link_stat_ids[] = {
	ENGRAM_STAT_FETCHES,
	ENGRAM_STAT_FETCH_ROWS,
	ENGRAM_STAT_FETCH_BYTES,
	ENGRAM_STAT_FETCH_ERRORS,
	ENGRAM_STAT_FETCH_TIMEOUTS,
	ENGRAM_STAT_REMOTE_INVALIDATIONS,
	ENGRAM_STAT_KEPT_REGISTRATIONS,
	ENGRAM_STAT_FAILOVERS,
	ENGRAM_STAT_SPLITS,
	ENGRAM_STAT_RECONNECTS,
	ENGRAM_STAT_HEARTBEATS_MISSED,
	ENGRAM_STAT_CATALOGS,
	ENGRAM_STAT_CATALOGS_REPLACED,
	ENGRAM_STAT_TRANSPORT_ERRORS,
	ENGRAM_STAT_REFUSED_BAD_VERSION,
	ENGRAM_STAT_REFUSED_MALFORMED,
	ENGRAM_STAT_REFUSED_UNKNOWN_TABLE,
	ENGRAM_STAT_REFUSED_TABLE_NOT_READY,
	ENGRAM_STAT_REFUSED_ROW_OUT_OF_RANGE,
	ENGRAM_STAT_REFUSED_TOO_MANY_ROWS,
	ENGRAM_STAT_REFUSED_TOO_MANY_RANGES,
	ENGRAM_STAT_REFUSED_DEST_TOO_SMALL,
	ENGRAM_STAT_REFUSED_BUSY,
	ENGRAM_STAT_REFUSED_SHUTTING_DOWN,
	ENGRAM_STAT_REFUSED_INTERNAL,
	ENGRAM_STAT_REFUSED_ROW_NOT_HELD,
	ENGRAM_STAT_FALLBACKS,		/* summed over its link tables */
	ENGRAM_STAT_FALLBACK_ROWS,
};

const unsigned int engram_link_stat_count = ARRAY_SIZE(engram_link_stat_ids);

/*
 * Per table opened through a link (client role, link_table.c).
 * TRANSPORT_ERRORS here are the table's fetches that failed without a
 * status from the server: link down, connection broken, deadline passed.
 */
const u8 engram_link_table_stat_ids[] = {
	ENGRAM_STAT_FETCHES,
	ENGRAM_STAT_FETCH_ROWS,
	ENGRAM_STAT_FETCH_BYTES,
	ENGRAM_STAT_FETCH_ERRORS,
	ENGRAM_STAT_FETCH_TIMEOUTS,
	ENGRAM_STAT_TRANSPORT_ERRORS,
	ENGRAM_STAT_FAILOVERS,
	ENGRAM_STAT_SPLITS,
	ENGRAM_STAT_FALLBACKS,
	ENGRAM_STAT_FALLBACK_ROWS,
	ENGRAM_STAT_REFUSED_BAD_VERSION,
	ENGRAM_STAT_REFUSED_MALFORMED,
	ENGRAM_STAT_REFUSED_UNKNOWN_TABLE,
	ENGRAM_STAT_REFUSED_TABLE_NOT_READY,
	ENGRAM_STAT_REFUSED_ROW_OUT_OF_RANGE,
	ENGRAM_STAT_REFUSED_TOO_MANY_ROWS,
	ENGRAM_STAT_REFUSED_TOO_MANY_RANGES,
	ENGRAM_STAT_REFUSED_DEST_TOO_SMALL,
	ENGRAM_STAT_REFUSED_BUSY,
	ENGRAM_STAT_REFUSED_SHUTTING_DOWN,
	ENGRAM_STAT_REFUSED_INTERNAL,
	ENGRAM_STAT_REFUSED_ROW_NOT_HELD,
};

const unsigned int engram_link_table_stat_count = ARRAY_SIZE(engram_link_table_stat_ids);

/**
 * engram_stats_counters_snapshot() - read every counter of a set
 * @c: the counters
 * @out: array of __ENGRAM_STAT_MAX values
 *
 * Each value is read atomically; the set as a whole is not a transaction,
 * which is fine for monitoring.
 */
void engram_stats_counters_snapshot(const struct engram_counters *c, u64 *out)
{
	unsigned int i;

	for (i = 0; i < __ENGRAM_STAT_MAX; i++)
		out[i] = atomic64_read(&c->c[i]);
}

/**
 * engram_stats_count_refusal() - count one refused request by its wire status
 * @c: the counters of the table or link concerned, or &engram_global_stats
 * @wire_status: enum engram_wire_status, not ENGRAM_WIRE_OK
 *
 * Out-of-range statuses are counted as INTERNAL rather than dropped, so a
 * refusal is never lost from the totals.
 */
void engram_stats_count_refusal(struct engram_counters *c, unsigned int wire_status)
{
	unsigned int id;

	if (wire_status == ENGRAM_WIRE_OK)
		return;
	if (wire_status > ENGRAM_WIRE_STATUS_MAX)
		wire_status = ENGRAM_WIRE_INTERNAL;
	/* Version 3's refusal came after the counters that follow INTERNAL. */
	if (wire_status == ENGRAM_WIRE_ROW_NOT_HELD)
		id = ENGRAM_STAT_REFUSED_ROW_NOT_HELD;
	else
		id = ENGRAM_STAT_REFUSED_BAD_VERSION + wire_status - ENGRAM_WIRE_BAD_VERSION;
	engram_count(c, id);
}

/**
 * engram_stats_hist_add() - record one latency
 * @h: the histogram
 * @ns: nanoseconds
 *
 * Bucket i (1-based on the wire, 0-based here) holds [2^i, 2^(i+1)) us,
 * bucket 0 everything under 2 us, the last one everything slower.
 */
void engram_stats_hist_add(struct engram_hist *h, u64 ns)
{
	u64 us = div_u64(ns, NSEC_PER_USEC);
	unsigned int b = us < 2 ? 0 : ilog2(us);

	if (b >= ENGRAM_LAT_BUCKETS)
		b = ENGRAM_LAT_BUCKETS - 1;
	atomic64_inc(&h->b[b]);
	atomic64_add(ns, &h->sum_ns);
}

/**
 * engram_stats_hist_snapshot() - read a histogram
 * @h: the histogram
 * @out: ENGRAM_LAT_SLOTS values: the buckets, then at ENGRAM_LAT_SUM the
 *	sum of the times counted, in ns (read apart from the buckets: a
 *	snapshot taken while times are added may pair a bucket with a sum
 *	that is one time ahead or behind)
 */
void engram_stats_hist_snapshot(const struct engram_hist *h, u64 *out)
{
	unsigned int i;

	for (i = 0; i < ENGRAM_LAT_BUCKETS; i++)
		out[i] = atomic64_read(&h->b[i]);
	out[ENGRAM_LAT_SUM] = atomic64_read(&h->sum_ns);
}

/*
 * The upper edge, in microseconds, of the histogram bucket that holds the
 * @pct-th percentile of the operations counted in @lat minus @prev.
 * Bucket b holds [2^b, 2^(b+1)) us (bucket 0 everything under 2 us), so
 * the true value is below the figure logged.  0 when nothing was counted.
 */
static u64 engram_stats_pct(const u64 *lat, const u64 *prev, unsigned int pct)
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

static u64 engram_stats_refused(const u64 *cur, const u64 *prev)
{
	unsigned int id;
	u64 n = 0;

	for (id = ENGRAM_STAT_REFUSED_BAD_VERSION; id <= ENGRAM_STAT_REFUSED_INTERNAL; id++)
		n += cur[id] - prev[id];
	return n + cur[ENGRAM_STAT_REFUSED_ROW_NOT_HELD] - prev[ENGRAM_STAT_REFUSED_ROW_NOT_HELD];
}

/**
 * engram_stats_log_line() - log one table's interval, if anything moved
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
void engram_stats_log_line(const char *name, u32 link_id, const u64 *cur, const u64 *prev,
			   const u64 *lat, const u64 *prev_lat)
{
	u64 p50, p99;

	if (!memcmp(cur, prev, __ENGRAM_STAT_MAX * sizeof(*cur)) &&
	    !memcmp(lat, prev_lat, ENGRAM_LAT_BUCKETS * sizeof(*lat)))
		return;
	p50 = engram_stats_pct(lat, prev_lat, 50);
	p99 = engram_stats_pct(lat, prev_lat, 99);
	if (link_id)
		pr_info("table %s via link %u: lookups %llu rows %llu p50 %lluus p99 %lluus fallbacks %llu transport_errors %llu failovers %llu splits %llu\n",
			name, link_id,
			cur[ENGRAM_STAT_FETCHES] - prev[ENGRAM_STAT_FETCHES],
			cur[ENGRAM_STAT_FETCH_ROWS] - prev[ENGRAM_STAT_FETCH_ROWS],
			p50, p99,
			cur[ENGRAM_STAT_FALLBACKS] - prev[ENGRAM_STAT_FALLBACKS],
			cur[ENGRAM_STAT_TRANSPORT_ERRORS] - prev[ENGRAM_STAT_TRANSPORT_ERRORS],
			cur[ENGRAM_STAT_FAILOVERS] - prev[ENGRAM_STAT_FAILOVERS],
			cur[ENGRAM_STAT_SPLITS] - prev[ENGRAM_STAT_SPLITS]);
	else
		pr_info("table %s: lookups %llu rows %llu p50 %lluus p99 %lluus refused %llu\n",
			name, cur[ENGRAM_STAT_LOOKUPS] - prev[ENGRAM_STAT_LOOKUPS],
			cur[ENGRAM_STAT_ROWS] - prev[ENGRAM_STAT_ROWS], p50, p99,
			engram_stats_refused(cur, prev));
}
