/* SPDX-License-Identifier: GPL-2.0 */
/* ENGRAM_STAT_* counter sets: decoding a nest and printing it. */
#ifndef ENGRAMCTL_STATSINFO_H
#define ENGRAMCTL_STATSINFO_H

#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include <linux/engram_rdma.h>

struct nlattr;

struct stats_info {
	uint8_t present[ENGRAM_STAT_MAX + 1];	/* 1 per counter received */
	uint64_t v[ENGRAM_STAT_MAX + 1];
};

/* "loads_started" for ENGRAM_STAT_LOADS_STARTED; NULL for unknown ids. */
const char *stat_name(int id);

/*
 * Decodes a nest of u64 counters.  Counters this tool does not know (a newer
 * kernel) and malformed ones are skipped, never fatal.
 */
void stats_info_from_nest(struct stats_info *si, struct nlattr *nest);
/* Adds every present counter to @obj; -ENOMEM on allocation failure. */
int stats_info_json(const struct stats_info *si, json_t *obj);
/* "  name   value" lines, aligned; sizes and times also in readable units. */
void stats_info_print(FILE *f, const struct stats_info *si, const char *indent);

/*
 * A latency histogram (ENGRAM_A_LATENCY): b[i] counts operations of at least
 * 2^i microseconds (0 for i = 0) and under 2^(i+1); the last bucket is open.
 */
struct lat_info {
	int present;
	uint64_t b[ENGRAM_LAT_BUCKETS];
	int has_sum;		/* ENGRAM_A_LATENCY_SUM_NS came (kernels since 0.1.0's) */
	uint64_t sum_ns;
};

/* The buckets; leaves the sum, which comes in an attribute of its own. */
void lat_info_from_nest(struct lat_info *li, struct nlattr *nest);
/* ENGRAM_A_LATENCY_SUM_NS; a malformed one is skipped. */
void lat_info_sum_from_attr(struct lat_info *li, struct nlattr *nla);
uint64_t lat_info_count(const struct lat_info *li);
/*
 * Estimated @q quantile (0.5, 0.99) in microseconds, rounded up: samples are
 * taken as spread evenly over their bucket.  0 without samples.
 */
uint64_t lat_info_percentile(const struct lat_info *li, double q);
/* {"count": N, "p50_us": U, "p99_us": U, "buckets": [{"ge_us", "lt_us", "count"}...]} */
json_t *lat_info_json(const struct lat_info *li);
/* The total with p50/p99, then only the buckets that are not empty. */
void lat_info_print(FILE *f, const struct lat_info *li, const char *indent);

#endif /* ENGRAMCTL_STATSINFO_H */
