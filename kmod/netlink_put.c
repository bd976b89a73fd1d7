// SPDX-License-Identifier: GPL-2.0
/*
 * The objects of the engram_rdma netlink family as attributes: what a
 * table, a link, a table opened through a link and a listener look like
 * in a reply or a dump (Documentation/netlink.rst).  netlink.c decides
 * which to put where and for whom.
 */
#include <net/netlink.h>

#include "compat.h"
#include "engram.h"
#include "event.h"
#include "link_table.h"
#include "netlink.h"

static u32 engram_netlink_put_errno(int error)
{
	return error < 0 ? -error : error;
}

static int engram_netlink_put_stats(struct sk_buff *skb, const u64 *vals, const u8 *ids,
				    unsigned int n)
{
	struct nlattr *nest = nla_nest_start(skb, ENGRAM_A_STATS);
	unsigned int i;

	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < n; i++) {
		if (nla_put_u64_64bit(skb, ids[i], vals[ids[i]], ENGRAM_STAT_PAD)) {
			nla_nest_cancel(skb, nest);
			return -EMSGSIZE;
		}
	}
	nla_nest_end(skb, nest);
	return 0;
}

/*
 * Bucket i of the histogram is attribute i (1-based); attribute type 0 pads
 * the u64s where the architecture needs it, as no bucket can be 0.  The
 * sum of the times goes beside the nest, which keeps only buckets.
 */
static int engram_netlink_put_latency(struct sk_buff *skb, const u64 *lat)
{
	struct nlattr *nest = nla_nest_start(skb, ENGRAM_A_LATENCY);
	unsigned int i;

	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < ENGRAM_LAT_BUCKETS; i++) {
		if (nla_put_u64_64bit(skb, i + 1, lat[i], 0)) {
			nla_nest_cancel(skb, nest);
			return -EMSGSIZE;
		}
	}
	nla_nest_end(skb, nest);
	return nla_put_u64_64bit(skb, ENGRAM_A_LATENCY_SUM_NS, lat[ENGRAM_LAT_SUM], ENGRAM_A_PAD);
}

/* Fetches per queue: attribute i for queue i - 1, up to the last one used. */
static int engram_netlink_put_queues(struct sk_buff *skb, const struct engram_link_info *li)
{
	unsigned int i, n = li->queues;
	struct nlattr *nest;

	for (i = n; i < ENGRAM_LINK_MAX_QUEUES; i++)
		if (li->queue_fetches[i])
			n = i + 1;
	if (li->queues && nla_put_u32(skb, ENGRAM_A_LINK_QUEUES, li->queues))
		return -EMSGSIZE;
	if (!n)
		return 0;
	nest = nla_nest_start(skb, ENGRAM_A_LINK_QUEUE_FETCHES);
	if (!nest)
		return -EMSGSIZE;
	for (i = 0; i < n; i++) {
		if (nla_put_u64_64bit(skb, i + 1, li->queue_fetches[i], 0)) {
			nla_nest_cancel(skb, nest);
			return -EMSGSIZE;
		}
	}
	nla_nest_end(skb, nest);
	return 0;
}

/**
 * engram_netlink_put_table() - a table's attributes, as TABLE_GET reports them
 * @skb: the message
 * @ti: the table's snapshot
 *
 * Return: 0 or -EMSGSIZE.
 */
int engram_netlink_put_table(struct sk_buff *skb, const struct engram_table_info *ti)
{
	/* An empty path was withheld (engram_netlink_sees_all()). */
	if (nla_put_string(skb, ENGRAM_A_TABLE_NAME, ti->name) ||
	    (ti->path[0] && nla_put_string(skb, ENGRAM_A_TABLE_PATH, ti->path)) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_GENERATION, ti->generation, ENGRAM_A_PAD) ||
	    nla_put_u8(skb, ENGRAM_A_TABLE_STATE, ti->state) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_ROWS, ti->rows, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_HELD_FIRST, ti->held_first, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_HELD_ROWS, ti->held_rows, ENGRAM_A_PAD) ||
	    nla_put_u32(skb, ENGRAM_A_TABLE_WEIGHT_BYTES, ENGRAM_WEIGHT_BYTES) ||
	    nla_put_u32(skb, ENGRAM_A_TABLE_SCALE_BYTES, ENGRAM_SCALE_BYTES) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_WEIGHT_OFFSET, ti->weight_offset, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_SCALE_OFFSET, ti->scale_offset, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_FILE_BYTES, ti->file_bytes, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_DONE_BYTES, ti->done_bytes, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_PINNED_BYTES, ti->pinned_bytes, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_META_BYTES, ti->meta_bytes, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_ELAPSED_NS, ti->elapsed_ns, ENGRAM_A_PAD) ||
	    nla_put_u8(skb, ENGRAM_A_TABLE_VERIFY_RESULT, ti->verify_result) ||
	    nla_put_u32(skb, ENGRAM_A_TABLE_INFLIGHT, ti->inflight))
		return -EMSGSIZE;
	if (ti->draining &&
	    (nla_put_u8(skb, ENGRAM_A_TABLE_DRAINING, 1) ||
	     nla_put_u64_64bit(skb, ENGRAM_A_TABLE_DRAIN_QUIET_NS, ti->drain_quiet_ns,
			       ENGRAM_A_PAD)))
		return -EMSGSIZE;
	if (ti->have_sha256 &&
	    nla_put(skb, ENGRAM_A_TABLE_SHA256, ENGRAM_SHA256_LEN, ti->sha256))
		return -EMSGSIZE;
	if (ti->error && (nla_put_u32(skb, ENGRAM_A_TABLE_ERROR, ti->error) ||
			  nla_put_string(skb, ENGRAM_A_TABLE_ERROR_MSG, ti->errmsg)))
		return -EMSGSIZE;
	return 0;
}

/**
 * engram_netlink_put_table_stats() - a table's counters, as STATS_GET reports them
 * @skb: the message
 * @ti: the table's snapshot
 *
 * Return: 0 or -EMSGSIZE.
 */
int engram_netlink_put_table_stats(struct sk_buff *skb, const struct engram_table_info *ti)
{
	if (nla_put_string(skb, ENGRAM_A_TABLE_NAME, ti->name) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_GENERATION, ti->generation, ENGRAM_A_PAD))
		return -EMSGSIZE;
	if (engram_netlink_put_stats(skb, ti->stats, engram_table_stat_ids,
				     engram_table_stat_count))
		return -EMSGSIZE;
	return engram_netlink_put_latency(skb, ti->lat);
}

/**
 * engram_netlink_put_link_stats() - a link's counters, as STATS_GET reports them
 * @skb: the message
 * @li: the link's snapshot; an empty URL was withheld
 *	by engram_netlink_sees_all()
 *
 * Return: 0 or -EMSGSIZE.
 */
int engram_netlink_put_link_stats(struct sk_buff *skb, const struct engram_link_info *li)
{
	if (nla_put_u32(skb, ENGRAM_A_LINK_ID, li->id) ||
	    (li->url[0] && nla_put_string(skb, ENGRAM_A_URL, li->url)) ||
	    engram_netlink_put_stats(skb, li->stats, engram_link_stat_ids, engram_link_stat_count))
		return -EMSGSIZE;
	return engram_netlink_put_latency(skb, li->lat);
}

/**
 * engram_netlink_put_link_table_stats() - a table opened through a link, as STATS_GET reports it
 * @skb: the message
 * @lt: its snapshot
 *
 * Return: 0 or -EMSGSIZE.
 */
int engram_netlink_put_link_table_stats(struct sk_buff *skb,
					const struct engram_link_table_info *lt)
{
	if (nla_put_u32(skb, ENGRAM_A_LINK_ID, lt->link_id) ||
	    nla_put_string(skb, ENGRAM_A_TABLE_NAME, lt->name) ||
	    nla_put(skb, ENGRAM_A_TABLE_SHA256, ENGRAM_SHA256_LEN, lt->sha256) ||
	    (lt->weight_offset &&
	     nla_put_u64_64bit(skb, ENGRAM_A_TABLE_WEIGHT_OFFSET, lt->weight_offset,
			       ENGRAM_A_PAD)) ||
	    engram_netlink_put_stats(skb, lt->stats, engram_link_table_stat_ids,
				     engram_link_table_stat_count))
		return -EMSGSIZE;
	return engram_netlink_put_latency(skb, lt->lat);
}

/**
 * engram_netlink_put_link() - everything about a link, as LINK_GET reports it
 * @skb: the message
 * @li: the link's snapshot; an empty URL was withheld, as for
 *	engram_netlink_put_link_stats()
 *
 * Return: 0 or -EMSGSIZE.
 */
int engram_netlink_put_link(struct sk_buff *skb, const struct engram_link_info *li)
{
	if (nla_put_u32(skb, ENGRAM_A_LINK_ID, li->id) ||
	    (li->url[0] && nla_put_string(skb, ENGRAM_A_URL, li->url)) ||
	    nla_put_u8(skb, ENGRAM_A_LINK_STATE, li->state) ||
	    nla_put_u32(skb, ENGRAM_A_LINK_TABLES, li->tables) ||
	    nla_put_u32(skb, ENGRAM_A_LINK_MAX_ROWS, li->max_rows) ||
	    nla_put_u32(skb, ENGRAM_A_LINK_MAX_INFLIGHT, li->max_inflight) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_LINK_CONNECTS, li->connects, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_LINK_SINCE_NS, li->since_ns, ENGRAM_A_PAD) ||
	    nla_put_u8(skb, ENGRAM_A_TRANSPORT, li->transport) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_LINK_RECONNECTS, li->reconnects, ENGRAM_A_PAD))
		return -EMSGSIZE;
	if (li->error &&
	    nla_put_u32(skb, ENGRAM_A_LINK_ERROR, engram_netlink_put_errno(li->error)))
		return -EMSGSIZE;
	if (li->have_heartbeat &&
	    nla_put_u32(skb, ENGRAM_A_LINK_HEARTBEAT_US, li->heartbeat_us))
		return -EMSGSIZE;
	if (li->protocol && nla_put_u32(skb, ENGRAM_A_LINK_PROTOCOL, li->protocol))
		return -EMSGSIZE;
	if (engram_netlink_put_queues(skb, li))
		return -EMSGSIZE;
	if (li->device[0] && nla_put_string(skb, ENGRAM_A_DEVICE, li->device))
		return -EMSGSIZE;
	if (engram_netlink_put_stats(skb, li->stats, engram_link_stat_ids, engram_link_stat_count))
		return -EMSGSIZE;
	return engram_netlink_put_latency(skb, li->lat);
}

/**
 * engram_netlink_put_link_catalog() - one table of a link's catalog
 * @skb: the message
 * @ci: its snapshot
 *
 * Return: 0 or -EMSGSIZE.
 */
int engram_netlink_put_link_catalog(struct sk_buff *skb, const struct engram_link_catalog_info *ci)
{
	if (nla_put_u32(skb, ENGRAM_A_LINK_ID, ci->link_id) ||
	    nla_put_u8(skb, ENGRAM_A_LINK_STATE, ci->link_state) ||
	    nla_put_string(skb, ENGRAM_A_TABLE_NAME, ci->name) ||
	    nla_put(skb, ENGRAM_A_TABLE_SHA256, ENGRAM_SHA256_LEN, ci->sha256) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_ROWS, ci->rows, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_HELD_FIRST, ci->held_first, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_HELD_ROWS, ci->held_rows, ENGRAM_A_PAD) ||
	    (ci->weight_offset &&
	     (nla_put_u64_64bit(skb, ENGRAM_A_TABLE_WEIGHT_OFFSET, ci->weight_offset,
				ENGRAM_A_PAD) ||
	      nla_put_u64_64bit(skb, ENGRAM_A_TABLE_SCALE_OFFSET, ci->scale_offset,
				ENGRAM_A_PAD))) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_GENERATION, ci->generation, ENGRAM_A_PAD) ||
	    nla_put_u8(skb, ENGRAM_A_TABLE_STATE, ci->state))
		return -EMSGSIZE;
	return 0;
}

/**
 * engram_netlink_put_listen() - a listener, as LISTEN_DUMP reports it
 * @skb: the message
 * @li: its snapshot
 *
 * Return: 0 or -EMSGSIZE.
 */
int engram_netlink_put_listen(struct sk_buff *skb, const struct engram_listen_info *li)
{
	if (nla_put_string(skb, ENGRAM_A_URL, li->url) ||
	    nla_put_u8(skb, ENGRAM_A_LISTEN_STATE, li->state) ||
	    nla_put_u32(skb, ENGRAM_A_CONNECTIONS, li->connections) ||
	    nla_put_u8(skb, ENGRAM_A_ALLOW_MODE, li->allow_mode))
		return -EMSGSIZE;
	if (li->device[0] && nla_put_string(skb, ENGRAM_A_DEVICE, li->device))
		return -EMSGSIZE;
	if (li->state == ENGRAM_LISTEN_WAITING && li->error &&
	    nla_put_u32(skb, ENGRAM_A_LINK_ERROR, engram_netlink_put_errno(li->error)))
		return -EMSGSIZE;
	return 0;
}

/**
 * engram_netlink_put_event() - one event's attributes (ENGRAM_CMD_EVENT)
 * @skb: message being built
 * @ev: the event
 *
 * Return: 0, or -EMSGSIZE when @skb is full.
 */
int engram_netlink_put_event(struct sk_buff *skb, const struct engram_event_rec *ev)
{
	int ret = 0;

	if (nla_put_u8(skb, ENGRAM_A_EVENT, ev->event) ||
	    (ev->lost && nla_put_u32(skb, ENGRAM_A_EVENTS_LOST, ev->lost)))
		return -EMSGSIZE;
	switch (ev->event) {
	case ENGRAM_EVENT_TABLE_STATE:
	case ENGRAM_EVENT_TABLE_UNLOADED:
		ret = nla_put_string(skb, ENGRAM_A_TABLE_NAME, ev->name) ||
		      nla_put_u8(skb, ENGRAM_A_TABLE_STATE, ev->state) ||
		      (ev->verify && nla_put_u8(skb, ENGRAM_A_TABLE_VERIFY_RESULT, ev->verify)) ||
		      (ev->error && nla_put_u32(skb, ENGRAM_A_TABLE_ERROR, ev->error));
		break;
	case ENGRAM_EVENT_LINK_ADDED:
	case ENGRAM_EVENT_LINK_STATE:
	case ENGRAM_EVENT_LINK_DELETED:
		/*
		 * Which servers this node fetches from is for administrators
		 * (LINK_GET): where any user may join the group, the id only.
		 */
		ret = nla_put_u32(skb, ENGRAM_A_LINK_ID, ev->id) ||
		      (ENGRAM_COMPAT_MCGRP_ADMIN_ONLY &&
		       nla_put_string(skb, ENGRAM_A_URL, ev->name)) ||
		      nla_put_u8(skb, ENGRAM_A_LINK_STATE, ev->state) ||
		      (ev->error && nla_put_u32(skb, ENGRAM_A_LINK_ERROR, ev->error));
		break;
	case ENGRAM_EVENT_LOST:
		/* EVENTS_LOST, put above, is all it says. */
		break;
	default:
		ret = nla_put_string(skb, ENGRAM_A_URL, ev->name) ||
		      nla_put_u8(skb, ENGRAM_A_LISTEN_STATE, ev->state) ||
		      (ev->error && nla_put_u32(skb, ENGRAM_A_LINK_ERROR, ev->error));
		break;
	}
	return ret ? -EMSGSIZE : 0;
}
