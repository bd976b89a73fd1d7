/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A table as one link's client sees it: its fetch counters, the fallbacks
 * user space reported for it, and its latency histogram (link_table.c).
 */
#ifndef _ENGRAM_LINK_TABLE_H
#define _ENGRAM_LINK_TABLE_H

#include "engram.h"

struct engram_link;
struct engram_link_table;

/* A consistent copy of one link table's counters, for netlink. */
struct engram_link_table_info {
	u32 link_id;
	char name[ENGRAM_NAME_MAX];
	u8 sha256[ENGRAM_SHA256_LEN];
	u64 weight_offset;		/* 0: not known */
	u64 stats[__ENGRAM_STAT_MAX];
	u64 lat[ENGRAM_LAT_SLOTS];
};

struct engram_link_table *engram_link_table_get(struct engram_link *l, const char *name,
						const u8 *sha256, u64 weight_offset);
void engram_link_table_put(struct engram_link_table *lt);
void engram_link_table_fetched(struct engram_link_table *lt, int error, u16 wire_status,
			       u32 nr_rows, u64 rtt_ns);
void engram_link_table_count(struct engram_link_table *lt, enum engram_stat stat);
void engram_link_table_submit_failed(struct engram_link_table *lt, int error);
void engram_link_table_report(struct engram_link_table *lt, u32 rows);
int engram_link_table_info_nth(unsigned long n, struct engram_link_table_info *info);
void engram_link_table_fold(u32 link_id, u64 *stats);
void engram_link_table_log(void);
void engram_link_table_exit(void);

#endif /* _ENGRAM_LINK_TABLE_H */
