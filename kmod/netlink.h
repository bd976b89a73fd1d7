/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private to the netlink family: netlink.c's handlers and the attribute
 * writers of netlink_put.c.
 */
#ifndef _ENGRAM_NETLINK_H
#define _ENGRAM_NETLINK_H

#include <linux/skbuff.h>

struct engram_table_info;
struct engram_link_info;
struct engram_link_table_info;
struct engram_listen_info;
struct engram_event_rec;

int engram_netlink_put_table(struct sk_buff *skb, const struct engram_table_info *ti);
int engram_netlink_put_table_stats(struct sk_buff *skb, const struct engram_table_info *ti);
int engram_netlink_put_link_stats(struct sk_buff *skb, const struct engram_link_info *li);
int engram_netlink_put_link_table_stats(struct sk_buff *skb,
					const struct engram_link_table_info *lt);
int engram_netlink_put_link(struct sk_buff *skb, const struct engram_link_info *li);
int engram_netlink_put_link_catalog(struct sk_buff *skb,
				    const struct engram_link_catalog_info *ci);
int engram_netlink_put_listen(struct sk_buff *skb, const struct engram_listen_info *li);
int engram_netlink_put_event(struct sk_buff *skb, const struct engram_event_rec *ev);

#endif /* _ENGRAM_NETLINK_H */
