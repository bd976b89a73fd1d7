// SPDX-License-Identifier: GPL-2.0
/* ENGRAM_STAT_* counter sets. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <netlink/attr.h>

#include "fmt.h"
#include "jsonout.h"
#include "statsinfo.h"


enum stat_unit { STAT_COUNT, STAT_BYTES, STAT_NS };

/* The longest name (connects_over_listener), and the largest u64. */
#define NAME_W	22
#define VALUE_W	20

static const struct {
	const char *name;
	enum stat_unit unit;
} stats[ENGRAM_STAT_MAX + 1] = {
	[ENGRAM_STAT_TABLES]		= { "tables", STAT_COUNT },
	[ENGRAM_STAT_PINNED_BYTES]	= { "pinned_bytes", STAT_BYTES },
	[ENGRAM_STAT_LOADS_STARTED]	= { "loads_started", STAT_COUNT },
	[ENGRAM_STAT_LOADS_DONE]	= { "loads_done", STAT_COUNT },
	[ENGRAM_STAT_LOADS_FAILED]	= { "loads_failed", STAT_COUNT },
	[ENGRAM_STAT_LOADS_CANCELLED]	= { "loads_cancelled", STAT_COUNT },
	[ENGRAM_STAT_DIGEST_MISMATCHES]	= { "digest_mismatches", STAT_COUNT },
	[ENGRAM_STAT_REQUESTS_REFUSED]	= { "requests_refused", STAT_COUNT },
	[ENGRAM_STAT_LOOKUPS]		= { "lookups", STAT_COUNT },
	[ENGRAM_STAT_ROWS]		= { "rows", STAT_COUNT },
	[ENGRAM_STAT_BYTES]		= { "bytes", STAT_BYTES },
	[ENGRAM_STAT_LOAD_BYTES]	= { "load_bytes", STAT_BYTES },
	[ENGRAM_STAT_LOAD_NS]		= { "load_ns", STAT_NS },
	[ENGRAM_STAT_VERIFY_RUNS]	= { "verify_runs", STAT_COUNT },
	[ENGRAM_STAT_VERIFY_FAILURES]	= { "verify_failures", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_BAD_VERSION]	= { "refused_bad_version", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_MALFORMED]		= { "refused_malformed", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_UNKNOWN_TABLE]	= { "refused_unknown_table", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_TABLE_NOT_READY]	= { "refused_table_not_ready", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_ROW_OUT_OF_RANGE]	= { "refused_row_out_of_range", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_TOO_MANY_ROWS]	= { "refused_too_many_rows", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_TOO_MANY_RANGES]	= { "refused_too_many_ranges", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_DEST_TOO_SMALL]	= { "refused_dest_too_small", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_BUSY]		= { "refused_busy", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_SHUTTING_DOWN]	= { "refused_shutting_down", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_INTERNAL]		= { "refused_internal", STAT_COUNT },
	[ENGRAM_STAT_CONNECTIONS]	= { "connections", STAT_COUNT },
	[ENGRAM_STAT_CONNECTS_ACCEPTED]	= { "connects_accepted", STAT_COUNT },
	[ENGRAM_STAT_CONNECTS_REJECTED]	= { "connects_rejected", STAT_COUNT },
	[ENGRAM_STAT_TRANSPORT_ERRORS]	= { "transport_errors", STAT_COUNT },
	[ENGRAM_STAT_RDMA_WRITES]	= { "rdma_writes", STAT_COUNT },
	[ENGRAM_STAT_FETCHES]		= { "fetches", STAT_COUNT },
	[ENGRAM_STAT_FETCH_ROWS]	= { "fetch_rows", STAT_COUNT },
	[ENGRAM_STAT_FETCH_BYTES]	= { "fetch_bytes", STAT_BYTES },
	[ENGRAM_STAT_FETCH_ERRORS]	= { "fetch_errors", STAT_COUNT },
	[ENGRAM_STAT_FETCH_TIMEOUTS]	= { "fetch_timeouts", STAT_COUNT },
	[ENGRAM_STAT_CONNECTS_DENIED]	= { "connects_denied", STAT_COUNT },
	[ENGRAM_STAT_PEER_TIMEOUTS]	= { "peer_timeouts", STAT_COUNT },
	[ENGRAM_STAT_FAULTS_INJECTED]	= { "faults_injected", STAT_COUNT },
	[ENGRAM_STAT_FALLBACKS]		= { "fallbacks", STAT_COUNT },
	[ENGRAM_STAT_FALLBACK_ROWS]	= { "fallback_rows", STAT_COUNT },
	[ENGRAM_STAT_RECONNECTS]	= { "reconnects", STAT_COUNT },
	[ENGRAM_STAT_HEARTBEATS_MISSED]	= { "heartbeats_missed", STAT_COUNT },
	[ENGRAM_STAT_TCP_HELLO_TIMEOUTS] = { "tcp_hello_timeouts", STAT_COUNT },
	[ENGRAM_STAT_TCP_FRAME_TIMEOUTS] = { "tcp_frame_timeouts", STAT_COUNT },
	[ENGRAM_STAT_TCP_IDLE_CLOSES]	= { "tcp_idle_closes", STAT_COUNT },
	[ENGRAM_STAT_CONNECTS_OVER_LISTENER] = { "connects_over_listener", STAT_COUNT },
	[ENGRAM_STAT_CONNECTS_OVER_PEER] = { "connects_over_peer", STAT_COUNT },
	[ENGRAM_STAT_CONNECTS_OVER_TOTAL] = { "connects_over_total", STAT_COUNT },
	[ENGRAM_STAT_IDLE_CLOSES]	= { "idle_closes", STAT_COUNT },
	[ENGRAM_STAT_REMOTE_INVALIDATIONS] = { "remote_invalidations", STAT_COUNT },
	[ENGRAM_STAT_KEPT_REGISTRATIONS] = { "kept_registrations", STAT_COUNT },
	[ENGRAM_STAT_FAILOVERS]		= { "failovers", STAT_COUNT },
	[ENGRAM_STAT_SPLITS]		= { "splits", STAT_COUNT },
	[ENGRAM_STAT_REFUSED_ROW_NOT_HELD]	= { "refused_row_not_held", STAT_COUNT },
	[ENGRAM_STAT_CATALOGS]		= { "catalogs", STAT_COUNT },
	[ENGRAM_STAT_CATALOGS_REPLACED]	= { "catalogs_replaced", STAT_COUNT },
	[ENGRAM_STAT_CLIENT_POSTS]	= { "client_posts", STAT_COUNT },
	[ENGRAM_STAT_CLIENT_WRS]	= { "client_wrs", STAT_COUNT },
	[ENGRAM_STAT_CLIENT_CQES]	= { "client_cqes", STAT_COUNT },
	[ENGRAM_STAT_CLIENT_WORK_ITEMS]	= { "client_work_items", STAT_COUNT },
	[ENGRAM_STAT_CLIENT_ALLOCS]	= { "client_allocs", STAT_COUNT },
	[ENGRAM_STAT_CLIENT_LINK_LOCKS]	= { "client_link_locks", STAT_COUNT },
	[ENGRAM_STAT_CLIENT_SOFTIRQ_CQES]	= { "client_softirq_cqes", STAT_COUNT },
	[ENGRAM_STAT_HOST_REQUESTS]	= { "host_requests", STAT_COUNT },
	[ENGRAM_STAT_HOST_POSTS]	= { "host_posts", STAT_COUNT },
	[ENGRAM_STAT_HOST_WRS]		= { "host_wrs", STAT_COUNT },
	[ENGRAM_STAT_HOST_CQES]		= { "host_cqes", STAT_COUNT },
	[ENGRAM_STAT_HOST_WORK_ITEMS]	= { "host_work_items", STAT_COUNT },
	[ENGRAM_STAT_HOST_REQUEST_NS]	= { "host_request_ns", STAT_NS },
	[ENGRAM_STAT_SERVED_RDMA_ROWS]	= { "served_rdma_rows", STAT_COUNT },
	[ENGRAM_STAT_SERVED_RDMA_CPU_NS] = { "served_rdma_cpu_ns", STAT_NS },
	[ENGRAM_STAT_SERVED_TCP_ROWS]	= { "served_tcp_rows", STAT_COUNT },
	[ENGRAM_STAT_SERVED_TCP_CPU_NS]	= { "served_tcp_cpu_ns", STAT_NS },
};

static int is_refusal(int id)
{
	return id >= ENGRAM_STAT_REFUSED_BAD_VERSION && id <= ENGRAM_STAT_REFUSED_INTERNAL;
}

const char *stat_name(int id)
{
	return id > 0 && id <= ENGRAM_STAT_MAX ? stats[id].name : NULL;
}

void stats_info_from_nest(struct stats_info *si, struct nlattr *nest)
{
	struct nlattr *nla;
	int rem;

	memset(si, 0, sizeof(*si));
	if (!nest)
		return;
	nla_for_each_nested(nla, nest, rem) {
		int id = nla_type(nla);

		if (!stat_name(id) || nla_len(nla) != sizeof(uint64_t))
			continue;
		si->v[id] = nla_get_u64(nla);
		si->present[id] = 1;
	}
}

int stats_info_json(const struct stats_info *si, json_t *obj)
{
	int id;

	for (id = 1; id <= ENGRAM_STAT_MAX; id++) {
		if (!si->present[id])
			continue;
		if (json_set(obj, stats[id].name, json_u64(si->v[id])))
			return -ENOMEM;
	}
	return 0;
}

/*
 * The REFUSED_* counters as one line: their total, then the reasons that
 * are not zero, named without the "refused_" prefix.
 */
static void print_refusals(FILE *f, const struct stats_info *si, const char *indent)
{
	uint64_t total = 0;
	int id, n = 0;

	for (id = ENGRAM_STAT_REFUSED_BAD_VERSION; id <= ENGRAM_STAT_REFUSED_INTERNAL; id++)
		if (si->present[id])
			total += si->v[id];
	fprintf(f, "%s%-*s %*" PRIu64, indent, NAME_W, "refused", VALUE_W, total);
	for (id = ENGRAM_STAT_REFUSED_BAD_VERSION; id <= ENGRAM_STAT_REFUSED_INTERNAL; id++) {
		if (!si->present[id] || !si->v[id])
			continue;
		fprintf(f, "%s%s %" PRIu64, n++ ? ", " : "  (", stats[id].name + strlen("refused_"),
			si->v[id]);
	}
	fputs(n ? ")\n" : "\n", f);
}

void stats_info_print(FILE *f, const struct stats_info *si, const char *indent)
{
	int refusals = 0;
	char buf[32];
	int id;

	for (id = 1; id <= ENGRAM_STAT_MAX; id++) {
		if (!si->present[id])
			continue;
		if (is_refusal(id)) {
			refusals = 1;
			continue;
		}
		fprintf(f, "%s%-*s %*" PRIu64, indent, NAME_W, stats[id].name, VALUE_W,
			si->v[id]);
		if (stats[id].unit == STAT_BYTES && si->v[id] >= 1024)
			fprintf(f, "  (%s)", fmt_bytes(buf, sizeof(buf), si->v[id]));
		else if (stats[id].unit == STAT_NS && si->v[id])
			fprintf(f, "  (%s)", fmt_duration(buf, sizeof(buf), si->v[id]));
		fputc('\n', f);
	}
	/* Last: one line however many reasons the module knows. */
	if (refusals)
		print_refusals(f, si, indent);
}

void lat_info_from_nest(struct lat_info *li, struct nlattr *nest)
{
	struct nlattr *nla;
	int rem;

	li->present = 0;
	memset(li->b, 0, sizeof(li->b));
	if (!nest)
		return;
	li->present = 1;
	nla_for_each_nested(nla, nest, rem) {
		int b = nla_type(nla);

		/* Type 0 pads; buckets a newer kernel adds are not ours to place. */
		if (b < 1 || b > ENGRAM_LAT_BUCKETS || nla_len(nla) != sizeof(uint64_t))
			continue;
		li->b[b - 1] = nla_get_u64(nla);
	}
}

void lat_info_sum_from_attr(struct lat_info *li, struct nlattr *nla)
{
	if (!nla || nla_len(nla) != sizeof(uint64_t))
		return;
	li->has_sum = 1;
	li->sum_ns = nla_get_u64(nla);
}

uint64_t lat_info_count(const struct lat_info *li)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < ENGRAM_LAT_BUCKETS; i++)
		n += li->b[i];
	return n;
}

/* Bucket i (0-based here) holds [lat_lo(i), lat_lo(i + 1)) microseconds. */
static uint64_t lat_lo(int i)
{
	return i ? 1ULL << i : 0;
}

uint64_t lat_info_percentile(const struct lat_info *li, double q)
{
	uint64_t n = lat_info_count(li), lo, hi;
	double target, before = 0;
	int i;

	if (!n)
		return 0;
	target = q * (double)n;
	for (i = 0; i < ENGRAM_LAT_BUCKETS; i++) {
		if (!li->b[i] || before + (double)li->b[i] < target) {
			before += (double)li->b[i];
			continue;
		}
		lo = lat_lo(i);
		if (i == ENGRAM_LAT_BUCKETS - 1)
			return lo;	/* open-ended: its lower bound is all we know */
		hi = lat_lo(i + 1);
		/* Spread evenly over the bucket, rounded up to a whole microsecond. */
		return lo + (uint64_t)((double)(hi - lo) * (target - before) / (double)li->b[i] +
				       0.999999);
	}
	return lat_lo(ENGRAM_LAT_BUCKETS - 1);
}

json_t *lat_info_json(const struct lat_info *li)
{
	json_t *o = json_object(), *arr = json_array(), *b;
	uint64_t n = lat_info_count(li);
	int i, ret = !o || !arr;

	for (i = 0; !ret && i < ENGRAM_LAT_BUCKETS; i++) {
		b = json_object();
		ret = !b || json_array_append_new(arr, b) ||
		      json_set(b, "ge_us", json_u64(lat_lo(i))) ||
		      (i < ENGRAM_LAT_BUCKETS - 1 && json_set(b, "lt_us", json_u64(lat_lo(i + 1)))) ||
		      json_set(b, "count", json_u64(li->b[i]));
	}
	if (!ret)
		ret = json_set(o, "count", json_u64(n)) ||
		      (n && json_set(o, "p50_us", json_u64(lat_info_percentile(li, 0.50)))) ||
		      (n && json_set(o, "p99_us", json_u64(lat_info_percentile(li, 0.99)))) ||
		      (li->has_sum && json_set(o, "sum_ns", json_u64(li->sum_ns))) ||
		      json_set(o, "buckets", json_incref(arr));
	json_decref(arr);
	if (ret) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* "<512us", "<1.0ms", "<8.4s": microseconds, as a rough upper bound. */
static void lat_label(char *buf, size_t len, uint64_t us)
{
	if (us < 1000)
		snprintf(buf, len, "%" PRIu64 "us", us);
	else if (us < 1000000)
		snprintf(buf, len, "%.1fms", (double)us / 1e3);
	else
		snprintf(buf, len, "%.1fs", (double)us / 1e6);
}

void lat_info_print(FILE *f, const struct lat_info *li, const char *indent)
{
	uint64_t n = lat_info_count(li);
	char lbl[32];
	int i;

	if (!li->present)
		return;
	if (!n) {
		fprintf(f, "%s%-*s %*s\n", indent, NAME_W, "latency", VALUE_W, "no samples");
		return;
	}
	fprintf(f, "%s%-*s %*" PRIu64 "  (p50 %" PRIu64 " us, p99 %" PRIu64 " us)\n", indent,
		NAME_W, "latency", VALUE_W, n, lat_info_percentile(li, 0.50),
		lat_info_percentile(li, 0.99));
	fputs(indent, f);
	for (i = 0; i < ENGRAM_LAT_BUCKETS; i++) {
		if (!li->b[i])
			continue;
		if (i == ENGRAM_LAT_BUCKETS - 1) {
			lat_label(lbl, sizeof(lbl), lat_lo(i));
			fprintf(f, "  >=%s: %" PRIu64, lbl, li->b[i]);
		} else {
			lat_label(lbl, sizeof(lbl), lat_lo(i + 1));
			fprintf(f, "  <%s: %" PRIu64, lbl, li->b[i]);
		}
	}
	fputc('\n', f);
}
