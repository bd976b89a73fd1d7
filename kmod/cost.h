/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Counts of the work a fetch costs, on both sides (ENGRAM_STAT_CLIENT_*
 * and ENGRAM_STAT_HOST_*): kept per CPU, so that counting puts no shared
 * cache line on the fetch path, and summed only when read.
 */
#ifndef ENGRAM_COST_H
#define ENGRAM_COST_H

#include <linux/percpu.h>
#include <linux/preempt.h>
#include <rdma/ib_verbs.h>

#include "engram.h"

/*
 * The counters: ENGRAM_COST_FIRST to ENGRAM_COST_LAST, then those the uapi
 * enum gained later, past stats of other kinds (engram_cost_stat()).
 */
#define ENGRAM_COST_FIRST	ENGRAM_STAT_CLIENT_POSTS
#define ENGRAM_COST_LAST	ENGRAM_STAT_HOST_REQUEST_NS
#define ENGRAM_COST_RANGE	(ENGRAM_COST_LAST - ENGRAM_COST_FIRST + 1)
#define ENGRAM_COST_NR		(ENGRAM_COST_RANGE + 2)

struct engram_cost {
	u64 c[ENGRAM_COST_NR];
};

DECLARE_PER_CPU(struct engram_cost, engram_cost);

/* The stat counted at index @i of struct engram_cost. */
static inline enum engram_stat engram_cost_stat(unsigned int i)
{
	if (i < ENGRAM_COST_RANGE)
		return ENGRAM_COST_FIRST + i;
	return i == ENGRAM_COST_RANGE ? ENGRAM_STAT_CLIENT_LINK_LOCKS :
					ENGRAM_STAT_CLIENT_SOFTIRQ_CQES;
}

/* Add @v to cost counter @id (one engram_cost_stat() names); any context. */
static inline void engram_cost_add(enum engram_stat id, u64 v)
{
	unsigned int i;

	if (id == ENGRAM_STAT_CLIENT_LINK_LOCKS)
		i = ENGRAM_COST_RANGE;
	else if (id == ENGRAM_STAT_CLIENT_SOFTIRQ_CQES)
		i = ENGRAM_COST_RANGE + 1;
	else
		i = id - ENGRAM_COST_FIRST;
	this_cpu_add(engram_cost.c[i], v);
}

static inline void engram_cost_inc(enum engram_stat id)
{
	engram_cost_add(id, 1);
}

/* A completion reaped on a link's CQ: in softirq, or by a poller. */
static inline void engram_cost_client_cqe(void)
{
	engram_cost_inc(ENGRAM_STAT_CLIENT_CQES);
	if (in_serving_softirq())
		engram_cost_inc(ENGRAM_STAT_CLIENT_SOFTIRQ_CQES);
}

/* A post of the chain @wr: one post, and a work request per link of it. */
static inline void engram_cost_post_send(bool host, const struct ib_send_wr *wr)
{
	unsigned int n = 0;

	for (; wr; wr = wr->next)
		n++;
	engram_cost_inc(host ? ENGRAM_STAT_HOST_POSTS : ENGRAM_STAT_CLIENT_POSTS);
	engram_cost_add(host ? ENGRAM_STAT_HOST_WRS : ENGRAM_STAT_CLIENT_WRS, n);
}

static inline void engram_cost_post_recv(bool host)
{
	engram_cost_inc(host ? ENGRAM_STAT_HOST_POSTS : ENGRAM_STAT_CLIENT_POSTS);
	engram_cost_inc(host ? ENGRAM_STAT_HOST_WRS : ENGRAM_STAT_CLIENT_WRS);
}

void engram_cost_snapshot(u64 *vals);

#endif
