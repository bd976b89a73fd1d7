// SPDX-License-Identifier: GPL-2.0
/*
 * Prometheus text exposition of the module's counters.  Names follow the
 * Prometheus conventions: one prefix (engram_rdma_), base units (seconds,
 * bytes), _total on counters, one family per quantity with the scope in
 * its name (module-wide, table_, link_, link_table_) so that summing over
 * a label never adds a scope to another.
 */
#include <inttypes.h>
#include <string.h>

#include "fmt.h"
#include "prom.h"

enum prom_kind { PROM_COUNTER, PROM_GAUGE };

/*
 * @name, where set, replaces the counter's JSON key in the family's name:
 * a key that reads well under "global" or a table's object ("rows",
 * "connections") says nothing alone on a dashboard.
 */
static const struct {
	const char *help;
	enum prom_kind kind;
	const char *name;
} prom[ENGRAM_STAT_MAX + 1] = {
	[ENGRAM_STAT_TABLES] = { "Tables present.", PROM_GAUGE },
	[ENGRAM_STAT_PINNED_BYTES] = { "Bytes of page cache pinned by tables.", PROM_GAUGE },
	[ENGRAM_STAT_LOADS_STARTED] = { "Table loads started.", PROM_COUNTER },
	[ENGRAM_STAT_LOADS_DONE] = { "Table loads that ended ready.", PROM_COUNTER },
	[ENGRAM_STAT_LOADS_FAILED] = { "Table loads that failed.", PROM_COUNTER },
	[ENGRAM_STAT_LOADS_CANCELLED] = { "Table loads cancelled.", PROM_COUNTER },
	[ENGRAM_STAT_DIGEST_MISMATCHES] = { "Loads whose file did not have the SHA-256 given.",
					    PROM_COUNTER },
	[ENGRAM_STAT_REQUESTS_REFUSED] = { "Netlink requests refused.", PROM_COUNTER,
				"netlink_requests_refused" },
	[ENGRAM_STAT_LOOKUPS] = { "Row requests served.", PROM_COUNTER,
				"served_requests" },
	[ENGRAM_STAT_ROWS] = { "Rows served.", PROM_COUNTER,
				"served_rows" },
	[ENGRAM_STAT_BYTES] = { "Bytes of rows served.", PROM_COUNTER,
				"served_bytes" },
	[ENGRAM_STAT_LOAD_BYTES] = { "Bytes read and hashed by loads.", PROM_COUNTER },
	[ENGRAM_STAT_LOAD_NS] = { "Time spent loading tables.", PROM_COUNTER },
	[ENGRAM_STAT_VERIFY_RUNS] = { "Verifies run.", PROM_COUNTER },
	[ENGRAM_STAT_VERIFY_FAILURES] = { "Verifies that found another digest or failed.",
					  PROM_COUNTER },
	[ENGRAM_STAT_CONNECTIONS] = { "Server connections open.", PROM_GAUGE,
				"server_connections" },
	[ENGRAM_STAT_CONNECTS_ACCEPTED] = { "Server connections accepted.", PROM_COUNTER },
	[ENGRAM_STAT_CONNECTS_REJECTED] = { "Server connections rejected (bad hello, resources).",
					    PROM_COUNTER },
	[ENGRAM_STAT_TRANSPORT_ERRORS] = { "Failed work completions and broken connections.",
					   PROM_COUNTER },
	[ENGRAM_STAT_RDMA_WRITES] = { "RDMA WRITE work requests posted for rows.", PROM_COUNTER,
				"served_rdma_writes" },
	[ENGRAM_STAT_FETCHES] = { "Fetches completed with rows.", PROM_COUNTER },
	[ENGRAM_STAT_FETCH_ROWS] = { "Rows fetched.", PROM_COUNTER },
	[ENGRAM_STAT_FETCH_BYTES] = { "Bytes of rows fetched.", PROM_COUNTER },
	[ENGRAM_STAT_FETCH_ERRORS] = { "Fetches that failed, for any reason.", PROM_COUNTER },
	[ENGRAM_STAT_FETCH_TIMEOUTS] = { "Fetches that missed their deadline.", PROM_COUNTER },
	[ENGRAM_STAT_CONNECTS_DENIED] = { "Connections from peers not on the allow-list.",
					  PROM_COUNTER },
	[ENGRAM_STAT_PEER_TIMEOUTS] = { "TCP peers dropped for stalling.", PROM_COUNTER,
				"tcp_peer_timeouts" },
	[ENGRAM_STAT_FAULTS_INJECTED] = { "Faults injected by the fault_* knobs (testing).",
					  PROM_COUNTER },
	[ENGRAM_STAT_FALLBACKS] = { "Fetches libengram served from its local copy.",
				    PROM_COUNTER },
	[ENGRAM_STAT_FALLBACK_ROWS] = { "Rows libengram read from its local copy.", PROM_COUNTER },
	[ENGRAM_STAT_RECONNECTS] = { "Link connection attempts after a loss.", PROM_COUNTER },
	[ENGRAM_STAT_HEARTBEATS_MISSED] = { "Links marked down by the heartbeat.", PROM_COUNTER },
	[ENGRAM_STAT_TCP_HELLO_TIMEOUTS] = { "TCP peers without a whole HELLO in time.",
					     PROM_COUNTER },
	[ENGRAM_STAT_TCP_FRAME_TIMEOUTS] = { "TCP frames not whole in time.", PROM_COUNTER },
	[ENGRAM_STAT_TCP_IDLE_CLOSES] = { "TCP connections closed for silence.", PROM_COUNTER },
	[ENGRAM_STAT_CONNECTS_OVER_LISTENER] = { "RDMA connections refused by rdma_max_conns.",
						 PROM_COUNTER,
				"rdma_connects_over_listener" },
	[ENGRAM_STAT_CONNECTS_OVER_PEER] = { "RDMA connections refused by rdma_max_conns_per_peer.",
					     PROM_COUNTER,
				"rdma_connects_over_peer" },
	[ENGRAM_STAT_CONNECTS_OVER_TOTAL] = { "RDMA connections refused by rdma_max_conns_total.",
					      PROM_COUNTER,
				"rdma_connects_over_total" },
	[ENGRAM_STAT_IDLE_CLOSES] = { "RDMA connections closed for silence.", PROM_COUNTER,
				"rdma_idle_closes" },
	[ENGRAM_STAT_REMOTE_INVALIDATIONS] = { "Fetches whose RESPONSE invalidated their key.",
					       PROM_COUNTER },
	[ENGRAM_STAT_KEPT_REGISTRATIONS] = { "Buffer windows registered once on a connection and kept.",
					     PROM_COUNTER },
	[ENGRAM_STAT_FAILOVERS] = { "Fetch parts sent again to this replica after failing on another.",
				    PROM_COUNTER,
				"fetch_failovers" },
	[ENGRAM_STAT_SPLITS] = { "Parts of fetches split over replicas.", PROM_COUNTER,
				"fetch_splits" },
	[ENGRAM_STAT_CATALOGS] = { "Catalogs read from hosts.", PROM_COUNTER,
				"catalogs_read" },
	[ENGRAM_STAT_CATALOGS_REPLACED] = { "Catalogs replaced by a newer one before being read.",
					    PROM_COUNTER },
	[ENGRAM_STAT_SERVED_RDMA_ROWS] = { "Rows served over RDMA.", PROM_COUNTER },
	[ENGRAM_STAT_SERVED_RDMA_CPU_NS] = { "CPU time serving rows over RDMA.", PROM_COUNTER },
	[ENGRAM_STAT_SERVED_TCP_ROWS] = { "Rows served over TCP.", PROM_COUNTER },
	[ENGRAM_STAT_SERVED_TCP_CPU_NS] = { "CPU time serving rows over TCP.", PROM_COUNTER },
	[ENGRAM_STAT_CLIENT_POSTS] = { "Posts to links' queue pairs for fetches.", PROM_COUNTER },
	[ENGRAM_STAT_CLIENT_WRS] = { "Work requests in them.", PROM_COUNTER },
	[ENGRAM_STAT_CLIENT_CQES] = { "Completions reaped on links' CQs for fetches.",
				      PROM_COUNTER },
	[ENGRAM_STAT_CLIENT_WORK_ITEMS] = { "Work items queued for fetches.", PROM_COUNTER },
	[ENGRAM_STAT_CLIENT_ALLOCS] = { "Allocation calls on the fetch path.", PROM_COUNTER },
	[ENGRAM_STAT_CLIENT_LINK_LOCKS] = { "Holds of a link's lock by fetches on it.",
					    PROM_COUNTER },
	[ENGRAM_STAT_CLIENT_SOFTIRQ_CQES] = { "Of those completions, the ones reaped in softirq.",
					      PROM_COUNTER },
	[ENGRAM_STAT_HOST_REQUESTS] = { "RDMA requests answered.", PROM_COUNTER },
	[ENGRAM_STAT_HOST_POSTS] = { "Posts to host connections' queue pairs.", PROM_COUNTER },
	[ENGRAM_STAT_HOST_WRS] = { "Work requests in them.", PROM_COUNTER },
	[ENGRAM_STAT_HOST_CQES] = { "Completions reaped on host connections' CQs.",
				    PROM_COUNTER },
	[ENGRAM_STAT_HOST_WORK_ITEMS] = { "Work items queued for host connections.",
					  PROM_COUNTER },
	[ENGRAM_STAT_HOST_REQUEST_NS] = { "Time from an RDMA request's frame to its last post.",
					  PROM_COUNTER },
};

/* The refusal counters, by wire status: version 3's came after the others. */
static const int refusal_ids[] = {
	ENGRAM_STAT_REFUSED_BAD_VERSION, ENGRAM_STAT_REFUSED_MALFORMED,
	ENGRAM_STAT_REFUSED_UNKNOWN_TABLE, ENGRAM_STAT_REFUSED_TABLE_NOT_READY,
	ENGRAM_STAT_REFUSED_ROW_OUT_OF_RANGE, ENGRAM_STAT_REFUSED_TOO_MANY_ROWS,
	ENGRAM_STAT_REFUSED_TOO_MANY_RANGES, ENGRAM_STAT_REFUSED_DEST_TOO_SMALL,
	ENGRAM_STAT_REFUSED_BUSY, ENGRAM_STAT_REFUSED_SHUTTING_DOWN,
	ENGRAM_STAT_REFUSED_INTERNAL, ENGRAM_STAT_REFUSED_ROW_NOT_HELD,
};
#define NR_REFUSALS	(sizeof(refusal_ids) / sizeof(refusal_ids[0]))

static int refusal(int id)
{
	size_t k;

	for (k = 0; k < NR_REFUSALS; k++)
		if (refusal_ids[k] == id)
			return 1;
	return 0;
}

static int has(const struct stats_info *si, int id)
{
	return id > 0 && id <= ENGRAM_STAT_MAX && si->present[id];
}

const char *prom_escape(char *buf, size_t len, const char *s)
{
	size_t o = 0;

	for (; *s; s++) {
		const char *e = *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : NULL;
		size_t k = e ? 2 : 1;

		if (o + k >= len)
			return "";
		if (e)
			memcpy(buf + o, e, 2);
		else
			buf[o] = *s;
		o += k;
	}
	buf[o] = '\0';
	return buf;
}

/* name{labels[,extra]} value: the braces only when there is a label. */
static void sample(FILE *f, const char *name, const char *labels, const char *extra,
		   const char *value)
{
	int l = labels && *labels, x = extra && *extra;

	fprintf(f, "%s%s%s%s%s%s %s\n", name, l || x ? "{" : "", l ? labels : "",
		l && x ? "," : "", x ? extra : "", l || x ? "}" : "", value);
}

static void u64_text(char *buf, size_t len, uint64_t v, int ns)
{
	if (ns)
		snprintf(buf, len, "%" PRIu64 ".%09" PRIu64, v / 1000000000, v % 1000000000);
	else
		snprintf(buf, len, "%" PRIu64, v);
}

static void print_counter(FILE *f, const char *scope, int id, const struct prom_sample *s,
			  size_t n)
{
	const char *base = prom[id].name ? prom[id].name : stat_name(id);
	char name[128], value[32];
	size_t i, bl;
	int ns, any = 0;

	for (i = 0; i < n; i++)
		any |= has(s[i].si, id);
	/* Counters this tool has no help for are a newer kernel's: left out. */
	if (!any || !base || !prom[id].help)
		return;
	bl = strlen(base);
	ns = bl > 3 && !strcmp(base + bl - 3, "_ns");
	/* load_ns -> load_seconds_total; rows -> rows_total; tables stays a gauge. */
	snprintf(name, sizeof(name), "engram_rdma_%s%.*s%s%s", scope, (int)(ns ? bl - 3 : bl), base,
		 ns ? "_seconds" : "", prom[id].kind == PROM_COUNTER ? "_total" : "");
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, prom[id].help, name,
		prom[id].kind == PROM_COUNTER ? "counter" : "gauge");
	for (i = 0; i < n; i++) {
		if (!has(s[i].si, id))
			continue;
		u64_text(value, sizeof(value), s[i].si->v[id], ns);
		sample(f, name, s[i].labels, NULL, value);
	}
}

static void print_refusals(FILE *f, const char *scope, const struct prom_sample *s, size_t n)
{
	char name[96], reason[64], value[32];
	int id, any = 0;
	size_t i, k;

	for (i = 0; i < n; i++)
		for (k = 0; k < NR_REFUSALS; k++)
			any |= has(s[i].si, refusal_ids[k]);
	if (!any)
		return;
	snprintf(name, sizeof(name), "engram_rdma_%srefused_requests_total", scope);
	fprintf(f, "# HELP %s Row requests refused, by the status sent.\n# TYPE %s counter\n",
		name, name);
	for (i = 0; i < n; i++) {
		for (k = 0; k < NR_REFUSALS; k++) {
			id = refusal_ids[k];
			if (!has(s[i].si, id))
				continue;
			snprintf(reason, sizeof(reason), "reason=\"%s\"",
				 stat_name(id) + strlen("refused_"));
			u64_text(value, sizeof(value), s[i].si->v[id], 0);
			sample(f, name, s[i].labels, reason, value);
		}
	}
}

/* Bucket b holds [2^b, 2^(b+1)) us, bucket 0 under 2 us, the last is open. */
static void print_latency(FILE *f, const char *scope, const struct prom_sample *s, size_t n)
{
	char name[96], bucket[112], le[32], value[32];
	uint64_t cum;
	size_t i, any = 0;
	int b;

	for (i = 0; i < n; i++)
		any += s[i].lat && s[i].lat->present;
	if (!any)
		return;
	snprintf(name, sizeof(name), "engram_rdma_%slatency_seconds", scope);
	snprintf(bucket, sizeof(bucket), "%s_bucket", name);
	/* A table's is the host's, a link's the GPU node's (netlink.rst). */
	fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name,
		!strcmp(scope, "table_") ? "Time the host took to serve a request." :
		"Time from a fetch's submit to its completion.", name);
	for (i = 0; i < n; i++) {
		if (!s[i].lat || !s[i].lat->present)
			continue;
		cum = 0;
		for (b = 0; b < ENGRAM_LAT_BUCKETS; b++) {
			cum += s[i].lat->b[b];
			if (b == ENGRAM_LAT_BUCKETS - 1)
				snprintf(le, sizeof(le), "le=\"+Inf\"");
			else
				snprintf(le, sizeof(le), "le=\"%.6f\"", (double)(2ULL << b) / 1e6);
			u64_text(value, sizeof(value), cum, 0);
			sample(f, bucket, s[i].labels, le, value);
		}
		snprintf(bucket, sizeof(bucket), "%s_sum", name);
		u64_text(value, sizeof(value), s[i].lat->sum_ns, 1);
		if (s[i].lat->has_sum)
			sample(f, bucket, s[i].labels, NULL, value);
		snprintf(bucket, sizeof(bucket), "%s_count", name);
		u64_text(value, sizeof(value), cum, 0);
		sample(f, bucket, s[i].labels, NULL, value);
		snprintf(bucket, sizeof(bucket), "%s_bucket", name);
	}
}

void prom_print_scope(FILE *f, const char *scope, const struct prom_sample *s, size_t n)
{
	int id;

	for (id = 1; id <= ENGRAM_STAT_MAX; id++)
		if (!refusal(id))
			print_counter(f, scope, id, s, n);
	print_refusals(f, scope, s, n);
	print_latency(f, scope, s, n);
}

/*
 * The state as a stateset (a sample per state, 1 for the current one), so
 * that an alert on "not ready" needs no table of the enum's numbers; what
 * names a table as labels of an info family, so that a dashboard can join
 * on the digest and see which replica or shard a host holds.  The
 * generation is a label too: a random 64-bit number, which a sample's
 * float64 value would round.
 */
void prom_print_tables(FILE *f, const struct table_info *v, size_t n)
{
	static const uint8_t states[] = {
		ENGRAM_TABLE_LOADING, ENGRAM_TABLE_READY, ENGRAM_TABLE_VERIFYING,
		ENGRAM_TABLE_FAILED,
	};
	char name[2 * ENGRAM_NAME_MAX + 8], sha[2 * ENGRAM_SHA256_LEN + 1];
	uint64_t first, held;
	size_t i, k;

	if (!n)
		return;
	fprintf(f, "# HELP engram_rdma_table_info A table: its generation, its file's SHA-256 "
		"(empty until known), rows, tensor offsets and the rows this host holds.\n"
		"# TYPE engram_rdma_table_info gauge\n");
	for (i = 0; i < n; i++) {
		sha[0] = '\0';
		if (TI_HAS(&v[i], ENGRAM_A_TABLE_SHA256))
			fmt_hex(sha, v[i].sha256, ENGRAM_SHA256_LEN);
		first = table_info_is_shard(&v[i]) ? v[i].held_first : 0;
		held = table_info_is_shard(&v[i]) ? v[i].held_rows : v[i].rows;
		fprintf(f, "engram_rdma_table_info{table=\"%s\",generation=\"%" PRIu64
			"\",sha256=\"%s\",rows=\"%" PRIu64
			"\",weight_offset=\"%" PRIu64 "\",scale_offset=\"%" PRIu64
			"\",held_first=\"%" PRIu64 "\",held_rows=\"%" PRIu64 "\"} 1\n",
			prom_escape(name, sizeof(name), v[i].name), v[i].generation, sha, v[i].rows,
			v[i].weight_offset, v[i].scale_offset, first, held);
	}
	fprintf(f, "# HELP engram_rdma_table_state 1 for the table's state, 0 for the others.\n"
		"# TYPE engram_rdma_table_state gauge\n");
	for (i = 0; i < n; i++) {
		const char *esc = prom_escape(name, sizeof(name), v[i].name);

		for (k = 0; k < sizeof(states); k++)
			fprintf(f, "engram_rdma_table_state{table=\"%s\",state=\"%s\"} %d\n",
				esc, table_state_name(states[k]), v[i].state == states[k]);
	}
	/* Apart from the state: a table drains while it is ready or verifying. */
	fprintf(f, "# HELP engram_rdma_table_draining 1 while the table drains "
		"(engramctl table drain), else 0.\n"
		"# TYPE engram_rdma_table_draining gauge\n");
	for (i = 0; i < n; i++)
		fprintf(f, "engram_rdma_table_draining{table=\"%s\"} %d\n",
			prom_escape(name, sizeof(name), v[i].name), table_info_draining(&v[i]));
	fprintf(f, "# HELP engram_rdma_table_inflight_requests Clients' requests holding "
		"the table now.\n"
		"# TYPE engram_rdma_table_inflight_requests gauge\n");
	for (i = 0; i < n; i++)
		if (TI_HAS(&v[i], ENGRAM_A_TABLE_INFLIGHT))
			fprintf(f, "engram_rdma_table_inflight_requests{table=\"%s\"} %" PRIu32 "\n",
				prom_escape(name, sizeof(name), v[i].name), v[i].inflight);
}
