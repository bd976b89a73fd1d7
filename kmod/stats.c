// SPDX-License-Identifier: GPL-2.0
/*
 * Counters.  They are plain atomics bumped where things happen; this file
 * only says which counters exist where, so netlink can report them without
 * knowing the parts that count.
 */
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
};

const unsigned int engram_global_stat_count = ARRAY_SIZE(engram_global_stat_ids);

/**
 * engram_counters_snapshot() - read every counter of a set
 * @c: the counters
 * @out: array of __ENGRAM_STAT_MAX values
 *
 * Each value is read atomically; the set as a whole is not a transaction,
 * which is fine for monitoring.
 */
void engram_counters_snapshot(const struct engram_counters *c, u64 *out)
{
	unsigned int i;

	for (i = 0; i < __ENGRAM_STAT_MAX; i++)
		out[i] = atomic64_read(&c->c[i]);
}
