// SPDX-License-Identifier: GPL-2.0
/*
 * The per-CPU counts of what fetches cost (cost.h), for engramctl stats
 * and make bench's cost report (Documentation/performance.rst).
 */
#include <linux/cpumask.h>

#include "cost.h"

DEFINE_PER_CPU(struct engram_cost, engram_cost);

/**
 * engram_cost_snapshot() - sum the cost counters over every CPU
 * @vals: array of __ENGRAM_STAT_MAX values; those of the cost counters
 *	(ENGRAM_COST_FIRST to ENGRAM_COST_LAST, CLIENT_LINK_LOCKS and
 *	CLIENT_SOFTIRQ_CQES) are set
 *
 * A CPU's counters are read without stopping it, so a sum taken while
 * fetches run is as of no single instant, which is fine for counts taken
 * before and after a benchmark's case.
 */
void engram_cost_snapshot(u64 *vals)
{
	unsigned int i, cpu;

	for (i = 0; i < ENGRAM_COST_NR; i++)
		vals[engram_cost_stat(i)] = 0;
	for_each_possible_cpu(cpu) {
		const struct engram_cost *c = per_cpu_ptr(&engram_cost, cpu);

		for (i = 0; i < ENGRAM_COST_NR; i++)
			vals[engram_cost_stat(i)] += READ_ONCE(c->c[i]);
	}
}
