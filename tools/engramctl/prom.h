/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Prometheus text exposition format (version 0.0.4) of the module's
 * counters, for node_exporter's textfile collector: engramctl stats
 * --prometheus.
 */
#ifndef ENGRAMCTL_PROM_H
#define ENGRAMCTL_PROM_H

#include <stddef.h>
#include <stdio.h>

#include "statsinfo.h"
#include "tableinfo.h"

/* One set of counters and its labels: a table, a link, a table on a link. */
struct prom_sample {
	const char *labels;		/* table="a",link="1" (escaped), or "" */
	const struct stats_info *si;
	const struct lat_info *lat;	/* NULL: no histogram */
};

/* @s with '\\', '"' and newlines escaped as label values need; "" if it does not fit. */
const char *prom_escape(char *buf, size_t len, const char *s);
/*
 * Every counter of @n samples as families named engram_rdma_@scope<name>:
 * _total for counters, seconds for nanoseconds, gauges for what is a level
 * now (tables, pinned_bytes, server_connections), the refused_* counters
 * as one family refused_requests_total with a reason label, and the
 * latency histograms as @scope latency_seconds with cumulative buckets,
 * _sum and _count.  Where a counter's name says too little alone, the
 * family has a clearer one (rows: served_rows; prom.c).  Each family's
 * HELP and TYPE once, then its samples.
 */
void prom_print_scope(FILE *f, const char *scope, const struct prom_sample *s, size_t n);

/*
 * What each of @n tables is, beside its counters: engram_rdma_table_info
 * (its generation, its file's SHA-256, rows, tensor offsets and the rows
 * this host holds, as labels of a sample of 1) and engram_rdma_table_state,
 * one sample per state, 1 for the table's own.
 */
void prom_print_tables(FILE *f, const struct table_info *v, size_t n);

#endif /* ENGRAMCTL_PROM_H */
