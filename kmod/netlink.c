// SPDX-License-Identifier: GPL-2.0
/*
 * The engram_rdma generic netlink family: the control plane engramctl talks
 * to.  Handlers here only translate between attributes and the APIs of the
 * other parts; every decision about tables is made in table.c, about
 * listeners in serve_listen.c and about links in link.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/slab.h>
#include <net/genetlink.h>
#include <net/netlink.h>

#include "compat.h"
#include "cost.h"
#include "engram.h"
#include "event.h"
#include "inject.h"
#include "prefix.h"
#include "link_table.h"
#include "netlink.h"

static struct genl_family engram_family;

static const struct nla_policy engram_load_policy[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_TABLE_NAME]		= { .type = NLA_NUL_STRING, .len = ENGRAM_NAME_MAX - 1 },
	[ENGRAM_A_TABLE_FD]		= { .type = NLA_U32 },
	[ENGRAM_A_TABLE_PATH]		= { .type = NLA_NUL_STRING, .len = ENGRAM_PATH_MAX - 1 },
	[ENGRAM_A_TABLE_ROWS]		= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_WEIGHT_OFFSET]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_SCALE_OFFSET]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_WEIGHT_BYTES]	= { .type = NLA_U32 },
	[ENGRAM_A_TABLE_SCALE_BYTES]	= { .type = NLA_U32 },
	[ENGRAM_A_TABLE_SHA256]		= NLA_POLICY_EXACT_LEN(ENGRAM_SHA256_LEN),
	[ENGRAM_A_TABLE_HELD_FIRST]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_HELD_ROWS]	= { .type = NLA_U64 },
};

static const struct nla_policy engram_name_policy[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_TABLE_NAME]		= { .type = NLA_NUL_STRING, .len = ENGRAM_NAME_MAX - 1 },
};

static const struct nla_policy engram_drain_policy[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_TABLE_NAME]		= { .type = NLA_NUL_STRING, .len = ENGRAM_NAME_MAX - 1 },
	[ENGRAM_A_TABLE_DRAINING]	= NLA_POLICY_MAX(NLA_U8, 1),
};

static const struct nla_policy engram_url_policy[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_URL]			= { .type = NLA_NUL_STRING,
					    .len = ENGRAM_URL_TEXT_MAX - 1 },
};

static const struct nla_policy engram_link_id_policy[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_LINK_ID]		= NLA_POLICY_MIN(NLA_U32, 1),
};

static const struct nla_policy engram_stats_policy[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_TABLE_NAME]		= { .type = NLA_NUL_STRING, .len = ENGRAM_NAME_MAX - 1 },
	[ENGRAM_A_LINK_ID]		= NLA_POLICY_MIN(NLA_U32, 1),
};

static const struct nla_policy engram_allow_policy[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_ALLOW]		= { .type = NLA_NUL_STRING,
					    .len = ENGRAM_PREFIX_IN_MAX },
};

/* Every entry NLA_UNSPEC: strict validation refuses any attribute. */
static const struct nla_policy engram_no_attr_policy[ENGRAM_A_MAX + 1];

/*
 * Tables, listeners and links are host-wide, so changing them takes
 * CAP_NET_ADMIN in the initial user namespace.  Checked here rather than with
 * GENL_ADMIN_PERM so that the refusal carries a message like every other one.
 * @msg must be a static string (KBUILD_MODNAME ": ...").
 */
static int engram_netlink_admin_msg(struct sk_buff *skb, struct genl_info *info,
				    const char *msg)
{
	if (netlink_capable(skb, CAP_NET_ADMIN))
		return 0;
	if (info->extack)
		info->extack->_msg = msg;
	return -EPERM;
}

static int engram_netlink_admin(struct sk_buff *skb, struct genl_info *info)
{
	return engram_netlink_admin_msg(skb, info,
				   KBUILD_MODNAME ": changing tables needs CAP_NET_ADMIN");
}

/*
 * What a local user without CAP_NET_ADMIN may read, as iproute2's view of
 * routes and links but not of xfrm state: names, states, sizes, digests,
 * listeners (this host's own bound addresses, which ss(8) shows anyone)
 * and every counter.  Not: where a table's file lives (TABLE_PATH), which
 * servers this node fetches from (a link's URL), and which peers the host
 * trusts (ALLOW_GET); those need CAP_NET_ADMIN, like changing them.
 * @skb is the request.
 */
static bool engram_netlink_sees_all(const struct sk_buff *skb)
{
	return netlink_capable(skb, CAP_NET_ADMIN);
}

/* Extack messages must be static strings; these name what is missing. */
static const char * const engram_missing_msg[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_TABLE_NAME]		= KBUILD_MODNAME ": missing TABLE_NAME",
	[ENGRAM_A_TABLE_FD]		= KBUILD_MODNAME ": missing TABLE_FD",
	[ENGRAM_A_TABLE_ROWS]		= KBUILD_MODNAME ": missing TABLE_ROWS",
	[ENGRAM_A_TABLE_WEIGHT_OFFSET]	= KBUILD_MODNAME ": missing TABLE_WEIGHT_OFFSET",
	[ENGRAM_A_TABLE_SCALE_OFFSET]	= KBUILD_MODNAME ": missing TABLE_SCALE_OFFSET",
	[ENGRAM_A_TABLE_WEIGHT_BYTES]	= KBUILD_MODNAME ": missing TABLE_WEIGHT_BYTES",
	[ENGRAM_A_TABLE_SCALE_BYTES]	= KBUILD_MODNAME ": missing TABLE_SCALE_BYTES",
	[ENGRAM_A_URL]			= KBUILD_MODNAME ": missing URL",
	[ENGRAM_A_LINK_ID]		= KBUILD_MODNAME ": missing LINK_ID",
};

/* Refuse a request that lacks @attr, saying which, in words and for tools. */
static int engram_netlink_require(struct genl_info *info, int attr)
{
	if (info->attrs[attr])
		return 0;
	if (info->extack)
		info->extack->_msg = engram_missing_msg[attr];
	NL_SET_ERR_ATTR_MISS(info->extack, NULL, attr);
	return -EINVAL;
}

static int engram_netlink_refused(int ret)
{
	if (ret)
		engram_count(&engram_global_stats, ENGRAM_STAT_REQUESTS_REFUSED);
	return ret;
}

/* Reply to a do request with one table's attributes; @all: engram_netlink_sees_all(). */
static int engram_netlink_reply_table(struct genl_info *info, const char *name, u8 cmd, bool stats,
				      bool all)
{
	struct engram_table_info *ti;
	struct sk_buff *msg;
	void *hdr;
	int ret;

	ti = kmalloc(sizeof(*ti), GFP_KERNEL);
	if (!ti)
		return -ENOMEM;
	ret = engram_table_info_by_name(name, ti);
	if (ret) {
		NL_SET_ERR_MSG_MOD(info->extack, "no table of that name");
		NL_SET_BAD_ATTR(info->extack, info->attrs[ENGRAM_A_TABLE_NAME]);
		goto out;
	}
	if (!all)
		ti->path[0] = '\0';
	ret = -ENOMEM;
	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		goto out;
	hdr = genlmsg_put_reply(msg, info, &engram_family, 0, cmd);
	ret = -EMSGSIZE;
	if (!hdr)
		goto err_msg;
	ret = stats ? engram_netlink_put_table_stats(msg, ti) : engram_netlink_put_table(msg, ti);
	if (ret)
		goto err_msg;
	genlmsg_end(msg, hdr);
	ret = genlmsg_reply(msg, info);
	goto out;
err_msg:
	nlmsg_free(msg);
out:
	kfree(ti);
	return ret;
}

static int engram_netlink_table_load(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr **tb = info->attrs;
	struct engram_load_args a = {};
	int ret;

	ret = engram_netlink_admin(skb, info);
	if (ret)
		return engram_netlink_refused(ret);
	if (engram_netlink_require(info, ENGRAM_A_TABLE_NAME) ||
	    engram_netlink_require(info, ENGRAM_A_TABLE_FD) ||
	    engram_netlink_require(info, ENGRAM_A_TABLE_ROWS) ||
	    engram_netlink_require(info, ENGRAM_A_TABLE_WEIGHT_OFFSET) ||
	    engram_netlink_require(info, ENGRAM_A_TABLE_SCALE_OFFSET) ||
	    engram_netlink_require(info, ENGRAM_A_TABLE_WEIGHT_BYTES) ||
	    engram_netlink_require(info, ENGRAM_A_TABLE_SCALE_BYTES))
		return engram_netlink_refused(-EINVAL);

	a.name = nla_data(tb[ENGRAM_A_TABLE_NAME]);
	a.fd = nla_get_u32(tb[ENGRAM_A_TABLE_FD]);
	a.path = tb[ENGRAM_A_TABLE_PATH] ? nla_data(tb[ENGRAM_A_TABLE_PATH]) : NULL;
	a.rows = nla_get_u64(tb[ENGRAM_A_TABLE_ROWS]);
	a.weight_offset = nla_get_u64(tb[ENGRAM_A_TABLE_WEIGHT_OFFSET]);
	a.scale_offset = nla_get_u64(tb[ENGRAM_A_TABLE_SCALE_OFFSET]);
	a.weight_bytes = nla_get_u32(tb[ENGRAM_A_TABLE_WEIGHT_BYTES]);
	a.scale_bytes = nla_get_u32(tb[ENGRAM_A_TABLE_SCALE_BYTES]);
	a.sha256 = tb[ENGRAM_A_TABLE_SHA256] ? nla_data(tb[ENGRAM_A_TABLE_SHA256]) : NULL;
	if (!tb[ENGRAM_A_TABLE_HELD_FIRST] != !tb[ENGRAM_A_TABLE_HELD_ROWS]) {
		NL_SET_ERR_MSG_ATTR(info->extack, tb[ENGRAM_A_TABLE_HELD_FIRST] ?:
				    tb[ENGRAM_A_TABLE_HELD_ROWS],
				    KBUILD_MODNAME ": a shard needs HELD_FIRST and HELD_ROWS");
		return engram_netlink_refused(-EINVAL);
	}
	if (tb[ENGRAM_A_TABLE_HELD_ROWS]) {
		a.held_first = nla_get_u64(tb[ENGRAM_A_TABLE_HELD_FIRST]);
		a.held_rows = nla_get_u64(tb[ENGRAM_A_TABLE_HELD_ROWS]);
		if (!a.held_rows) {
			NL_SET_ERR_MSG_ATTR(info->extack, tb[ENGRAM_A_TABLE_HELD_ROWS],
					    KBUILD_MODNAME ": a shard of 0 rows");
			return engram_netlink_refused(-EINVAL);
		}
	}

	ret = engram_table_load(&a, info->extack);
	if (ret)
		return engram_netlink_refused(ret);
	/*
	 * The load has started and holds the file: report success even if the
	 * reply cannot be built or the table is already gone again (a racing
	 * unload); the caller then gets a plain ack.
	 */
	engram_netlink_reply_table(info, a.name, ENGRAM_CMD_TABLE_LOAD, false, true);
	return 0;
}

static int engram_netlink_table_unload(struct sk_buff *skb, struct genl_info *info)
{
	int ret = engram_netlink_admin(skb, info);

	if (!ret && engram_netlink_require(info, ENGRAM_A_TABLE_NAME))
		ret = -EINVAL;
	if (!ret)
		ret = engram_table_unload(nla_data(info->attrs[ENGRAM_A_TABLE_NAME]),
					  info->extack);
	return engram_netlink_refused(ret);
}

static int engram_netlink_table_verify(struct sk_buff *skb, struct genl_info *info)
{
	const char *name;
	int ret = engram_netlink_admin(skb, info);

	if (!ret && engram_netlink_require(info, ENGRAM_A_TABLE_NAME))
		ret = -EINVAL;
	if (ret)
		return engram_netlink_refused(ret);
	name = nla_data(info->attrs[ENGRAM_A_TABLE_NAME]);
	ret = engram_table_verify(name, info->extack);
	if (ret)
		return engram_netlink_refused(ret);
	ret = engram_netlink_reply_table(info, name, ENGRAM_CMD_TABLE_VERIFY, false, true);
	return ret == -ENOENT ? 0 : ret;
}

/* Without a name, every table: the usual step before a host goes down. */
static int engram_netlink_table_drain(struct sk_buff *skb, struct genl_info *info)
{
	const struct nlattr *name = info->attrs[ENGRAM_A_TABLE_NAME];
	int ret = engram_netlink_admin(skb, info);

	if (!ret && engram_netlink_require(info, ENGRAM_A_TABLE_DRAINING))
		ret = -EINVAL;
	if (!ret)
		ret = engram_table_drain(name ? nla_data(name) : NULL,
					 nla_get_u8(info->attrs[ENGRAM_A_TABLE_DRAINING]),
					 info->extack);
	return engram_netlink_refused(ret);
}

static int engram_netlink_table_get(struct sk_buff *skb, struct genl_info *info)
{
	if (engram_netlink_require(info, ENGRAM_A_TABLE_NAME))
		return engram_netlink_refused(-EINVAL);
	return engram_netlink_refused(engram_netlink_reply_table(info,
						    nla_data(info->attrs[ENGRAM_A_TABLE_NAME]),
						    ENGRAM_CMD_TABLE_GET, false,
						    engram_netlink_sees_all(skb)));
}

/*
 * One link's message for a do request: LINK_GET, STATS_GET, or LINK_ADD's
 * reply; @all: engram_netlink_sees_all().
 */
static int engram_netlink_reply_link(struct genl_info *info, u32 id, u8 cmd, bool all)
{
	struct engram_link_info *li;
	struct sk_buff *msg;
	bool found;
	void *hdr;
	int ret;

	li = kzalloc(sizeof(*li), GFP_KERNEL);
	if (!li)
		return -ENOMEM;
	found = !engram_link_admin_info_by_id(id, li);
	if (found)
		engram_link_table_fold(id, li->stats);
	if (!all)
		li->url[0] = '\0';
	if (!found && cmd != ENGRAM_CMD_LINK_ADD) {
		NL_SET_ERR_MSG_MOD(info->extack, "no link with that id");
		NL_SET_BAD_ATTR(info->extack, info->attrs[ENGRAM_A_LINK_ID]);
		ret = -ENOENT;
		goto out;
	}
	ret = -ENOMEM;
	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		goto out;
	hdr = genlmsg_put_reply(msg, info, &engram_family, 0, cmd);
	ret = -EMSGSIZE;
	if (!hdr)
		goto err_msg;
	if (!found)	/* LINK_ADD, and the link is gone again: the id is all there is */
		ret = nla_put_u32(msg, ENGRAM_A_LINK_ID, id) ? -EMSGSIZE : 0;
	else if (cmd == ENGRAM_CMD_STATS_GET)
		ret = engram_netlink_put_link_stats(msg, li);
	else
		ret = engram_netlink_put_link(msg, li);
	if (ret)
		goto err_msg;
	genlmsg_end(msg, hdr);
	ret = genlmsg_reply(msg, info);
	goto out;
err_msg:
	nlmsg_free(msg);
out:
	kfree(li);
	return ret;
}

static void *engram_netlink_dump_hdr(struct sk_buff *skb, struct netlink_callback *cb, u8 cmd)
{
	return genlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
			   &engram_family, NLM_F_MULTI, cmd);
}

/*
 * The end of one dump call.  @ret is 0 when every object was written and
 * -EMSGSIZE when the message filled up; the next call resumes at the object
 * that did not fit, unless it did not fit even an empty message.
 */
static int engram_netlink_dump_end(struct sk_buff *skb, int ret)
{
	if (ret == -EMSGSIZE && skb->len)
		return skb->len;
	return ret ?: skb->len;
}

/*
 * Dumps walk the lists by position (cb->args[0]); an object added or
 * removed mid-dump may be skipped or repeated, as in any netlink dump.
 * engram_netlink_dump_each() writes from position *@idx on and leaves it at the
 * first object not written.
 */
struct engram_dump {
	struct sk_buff *skb;
	struct netlink_callback *cb;
	u8 cmd;
	struct nlattr **tb;		/* the request's filters */
	bool all;			/* the reader may see paths and URLs */
	void *obj;			/* one object, read by @nth */
	/* Read object @n into @obj; nonzero past the end. */
	int (*nth)(unsigned long n, void *obj);
	/* Whether the request's filters leave @obj out (none: NULL). */
	bool (*skip)(struct engram_dump *d);
	/* Fill the message for @obj. */
	int (*put)(struct engram_dump *d);
};

static int engram_netlink_dump_each(struct engram_dump *d, unsigned long *idx)
{
	void *hdr;
	int ret;

	for (; !d->nth(*idx, d->obj); (*idx)++) {
		if (d->skip && d->skip(d))
			continue;
		hdr = engram_netlink_dump_hdr(d->skb, d->cb, d->cmd);
		if (!hdr)
			return -EMSGSIZE;
		ret = d->put(d);
		if (ret) {
			genlmsg_cancel(d->skb, hdr);
			return ret;
		}
		genlmsg_end(d->skb, hdr);
	}
	return 0;
}

/* Run @d over a freshly allocated object of @size bytes. */
static int engram_netlink_dump_objects(struct engram_dump *d, size_t size, unsigned long *idx)
{
	int ret;

	d->obj = kmalloc(size, GFP_KERNEL);
	if (!d->obj)
		return -ENOMEM;
	d->all = engram_netlink_sees_all(d->cb->skb);
	ret = engram_netlink_dump_each(d, idx);
	kfree(d->obj);
	return ret;
}

static int engram_netlink_dump_table_nth(unsigned long n, void *obj)
{
	return engram_table_info_nth(n, obj);
}

static bool engram_netlink_dump_table_skip(struct engram_dump *d)
{
	const struct nlattr *filter = d->tb[ENGRAM_A_TABLE_NAME];
	const struct engram_table_info *ti = d->obj;

	return filter && strcmp(ti->name, nla_data(filter));
}

static int engram_netlink_dump_table_put(struct engram_dump *d)
{
	struct engram_table_info *ti = d->obj;

	if (!d->all)
		ti->path[0] = '\0';
	return d->cmd == ENGRAM_CMD_STATS_GET ? engram_netlink_put_table_stats(d->skb, ti) :
						engram_netlink_put_table(d->skb, ti);
}

static int engram_netlink_dump_link_nth(unsigned long n, void *obj)
{
	return engram_link_admin_info_nth(n, obj);
}

static bool engram_netlink_dump_link_skip(struct engram_dump *d)
{
	const struct nlattr *filter = d->tb[ENGRAM_A_LINK_ID];
	const struct engram_link_info *li = d->obj;

	return filter && li->id != nla_get_u32(filter);
}

static int engram_netlink_dump_link_put(struct engram_dump *d)
{
	struct engram_link_info *li = d->obj;

	if (!d->all)
		li->url[0] = '\0';
	engram_link_table_fold(li->id, li->stats);
	return d->cmd == ENGRAM_CMD_STATS_GET ? engram_netlink_put_link_stats(d->skb, li) :
						engram_netlink_put_link(d->skb, li);
}

/* Tables opened through links, filtered by link id or table name. */
static int engram_netlink_dump_link_table_nth(unsigned long n, void *obj)
{
	return engram_link_table_info_nth(n, obj);
}

static bool engram_netlink_dump_link_table_skip(struct engram_dump *d)
{
	const struct engram_link_table_info *lt = d->obj;

	return (d->tb[ENGRAM_A_LINK_ID] &&
		lt->link_id != nla_get_u32(d->tb[ENGRAM_A_LINK_ID])) ||
	       (d->tb[ENGRAM_A_TABLE_NAME] &&
		strcmp(lt->name, nla_data(d->tb[ENGRAM_A_TABLE_NAME])));
}

static int engram_netlink_dump_link_table_put(struct engram_dump *d)
{
	return engram_netlink_put_link_table_stats(d->skb, d->obj);
}

static int engram_netlink_dump_tables_from(struct sk_buff *skb, struct netlink_callback *cb,
					   u8 cmd, struct nlattr **tb, unsigned long *idx)
{
	struct engram_dump d = {
		.skb = skb, .cb = cb, .cmd = cmd, .tb = tb,
		.nth = engram_netlink_dump_table_nth, .skip = engram_netlink_dump_table_skip,
		.put = engram_netlink_dump_table_put,
	};

	return engram_netlink_dump_objects(&d, sizeof(struct engram_table_info), idx);
}

static int engram_netlink_dump_links_from(struct sk_buff *skb, struct netlink_callback *cb,
					  u8 cmd, struct nlattr **tb, unsigned long *idx)
{
	struct engram_dump d = {
		.skb = skb, .cb = cb, .cmd = cmd, .tb = tb,
		.nth = engram_netlink_dump_link_nth, .skip = engram_netlink_dump_link_skip,
		.put = engram_netlink_dump_link_put,
	};

	return engram_netlink_dump_objects(&d, sizeof(struct engram_link_info), idx);
}

static int engram_netlink_dump_link_tables_from(struct sk_buff *skb, struct netlink_callback *cb,
						struct nlattr **tb, unsigned long *idx)
{
	struct engram_dump d = {
		.skb = skb, .cb = cb, .cmd = ENGRAM_CMD_STATS_GET, .tb = tb,
		.nth = engram_netlink_dump_link_table_nth,
		.skip = engram_netlink_dump_link_table_skip,
		.put = engram_netlink_dump_link_table_put,
	};

	return engram_netlink_dump_objects(&d, sizeof(struct engram_link_table_info), idx);
}

/* The core validated the request already; parsed again for the filters. */
static int engram_netlink_dump_parse(struct netlink_callback *cb, struct nlattr **tb,
				     const struct nla_policy *policy)
{
	return genlmsg_parse(cb->nlh, &engram_family, tb, ENGRAM_A_MAX, policy, cb->extack);
}

static int engram_netlink_table_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	unsigned long idx = cb->args[0];
	int ret;

	ret = engram_netlink_dump_parse(cb, tb, engram_name_policy);
	if (ret)
		return ret;
	ret = engram_netlink_dump_tables_from(skb, cb, ENGRAM_CMD_TABLE_GET, tb, &idx);
	cb->args[0] = idx;
	return engram_netlink_dump_end(skb, ret);
}

/* STATS_GET names a table or a link, not both. */
static int engram_netlink_stats_filter_ok(struct nlattr **tb, struct netlink_ext_ack *extack)
{
	if (!tb[ENGRAM_A_TABLE_NAME] || !tb[ENGRAM_A_LINK_ID])
		return 0;
	NL_SET_ERR_MSG_MOD(extack, "TABLE_NAME and LINK_ID exclude each other");
	NL_SET_BAD_ATTR(extack, tb[ENGRAM_A_LINK_ID]);
	return -EINVAL;
}

static int engram_netlink_stats_get(struct sk_buff *skb, struct genl_info *info)
{
	static const u8 gauges[] = { ENGRAM_STAT_TABLES, ENGRAM_STAT_PINNED_BYTES };
	DECLARE_BITMAP(seen, __ENGRAM_STAT_MAX) = {};
	u64 vals[__ENGRAM_STAT_MAX];
	struct sk_buff *msg;
	struct nlattr *nest;
	unsigned int i, n;
	void *hdr;
	int ret;

	ret = engram_netlink_stats_filter_ok(info->attrs, info->extack);
	if (ret)
		return engram_netlink_refused(ret);
	if (info->attrs[ENGRAM_A_TABLE_NAME]) {
		const char *name = nla_data(info->attrs[ENGRAM_A_TABLE_NAME]);

		return engram_netlink_refused(engram_netlink_reply_table(info, name,
							    ENGRAM_CMD_STATS_GET, true,
							    engram_netlink_sees_all(skb)));
	}
	if (info->attrs[ENGRAM_A_LINK_ID]) {
		u32 id = nla_get_u32(info->attrs[ENGRAM_A_LINK_ID]);

		ret = engram_netlink_reply_link(info, id, ENGRAM_CMD_STATS_GET,
						engram_netlink_sees_all(skb));
		return engram_netlink_refused(ret);
	}
	engram_stats_counters_snapshot(&engram_global_stats, vals);
	engram_cost_snapshot(vals);
	engram_table_totals(&vals[ENGRAM_STAT_TABLES], &vals[ENGRAM_STAT_PINNED_BYTES]);

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &engram_family, 0, ENGRAM_CMD_STATS_GET);
	if (!hdr)
		goto err;
	nest = nla_nest_start(msg, ENGRAM_A_STATS);
	if (!nest)
		goto err;
	/* The gauges, the module-wide ids, then the per-table ids summed; each once. */
	n = ARRAY_SIZE(gauges) + engram_global_stat_count + engram_table_stat_count;
	for (i = 0; i < n; i++) {
		u8 id;

		if (i < ARRAY_SIZE(gauges))
			id = gauges[i];
		else if (i < ARRAY_SIZE(gauges) + engram_global_stat_count)
			id = engram_global_stat_ids[i - ARRAY_SIZE(gauges)];
		else
			id = engram_table_stat_ids[i - ARRAY_SIZE(gauges) -
						   engram_global_stat_count];
		if (id >= __ENGRAM_STAT_MAX || __test_and_set_bit(id, seen))
			continue;
		if (nla_put_u64_64bit(msg, id, vals[id], ENGRAM_STAT_PAD))
			goto err;
	}
	nla_nest_end(msg, nest);
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
err:
	nlmsg_free(msg);
	return -EMSGSIZE;
}

/*
 * One message per table, then one per link, then one per table opened
 * through a link; cb->args[1] says which list is being walked.  TABLE_NAME
 * limits the dump to that table (served here or opened through a link),
 * LINK_ID to that link and its tables.
 */
static int engram_netlink_stats_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	unsigned long idx;
	int ret;

	ret = engram_netlink_dump_parse(cb, tb, engram_stats_policy);
	if (!ret)
		ret = engram_netlink_stats_filter_ok(tb, cb->extack);
	if (ret)
		return engram_netlink_refused(ret);
	if (!cb->args[1]) {
		idx = cb->args[0];
		if (!tb[ENGRAM_A_LINK_ID])
			ret = engram_netlink_dump_tables_from(skb, cb, ENGRAM_CMD_STATS_GET, tb,
							      &idx);
		cb->args[0] = idx;
		if (ret)
			return engram_netlink_dump_end(skb, ret);
		cb->args[0] = 0;
		cb->args[1] = 1;
	}
	if (cb->args[1] == 1) {
		idx = cb->args[0];
		if (!tb[ENGRAM_A_TABLE_NAME])
			ret = engram_netlink_dump_links_from(skb, cb, ENGRAM_CMD_STATS_GET, tb,
							     &idx);
		cb->args[0] = idx;
		if (ret)
			return engram_netlink_dump_end(skb, ret);
		cb->args[0] = 0;
		cb->args[1] = 2;
	}
	idx = cb->args[0];
	ret = engram_netlink_dump_link_tables_from(skb, cb, tb, &idx);
	cb->args[0] = idx;
	return engram_netlink_dump_end(skb, ret);
}

/*
 * The request's URL, parsed for @role.  The parser's reason names the
 * offending part of the URL, but an extack message must be a static string:
 * the reason goes to the kernel log (escaped, it quotes user input).
 */
static int engram_netlink_url(struct genl_info *info, enum engram_url_role role,
			      struct engram_url *u)
{
	const struct nlattr *a = info->attrs[ENGRAM_A_URL];
	const char *s;
	char why[160];

	if (engram_netlink_require(info, ENGRAM_A_URL))
		return -EINVAL;
	s = nla_data(a);
	if (!engram_url_parse(s, strlen(s), role, u, why, sizeof(why)))
		return 0;
	pr_info_ratelimited("%s URL refused: %*pE\n",
			    role == ENGRAM_URL_LISTEN ? "listen" : "remote",
			    (int)strnlen(why, sizeof(why)), why);
	if (role == ENGRAM_URL_LISTEN)
		NL_SET_ERR_MSG_MOD(info->extack,
				   "bad listen URL: rdma://IP[:PORT] or tcp://IP[:PORT], no wildcard (the kernel log has the reason)");
	else
		NL_SET_ERR_MSG_MOD(info->extack,
				   "bad remote URL: rdma://SERVER[:PORT]@LOCAL or tcp://SERVER[:PORT]@LOCAL (the kernel log has the reason)");
	NL_SET_BAD_ATTR(info->extack, a);
	return -EINVAL;
}

/*
 * serve_listen.c and link.c explain their refusals; this covers one that came back
 * without a message (@msg static, with the module prefix) and points at
 * @attr when the callee pointed at nothing.  A failed allocation may stay
 * silent, as everywhere else.
 */
static int engram_netlink_explain(struct genl_info *info, int ret, int attr, const char *msg)
{
	struct netlink_ext_ack *extack = info->extack;

	if (!ret || ret == -ENOMEM || !extack)
		return ret;
	if (!extack->_msg)
		extack->_msg = msg;
	if (!extack->bad_attr && (ret == -EEXIST || ret == -ENOENT))
		NL_SET_BAD_ATTR(extack, info->attrs[attr]);
	return ret;
}

static int engram_netlink_listen_add(struct sk_buff *skb, struct genl_info *info)
{
	struct engram_url u;
	int ret;

	ret = engram_netlink_admin_msg(skb, info,
				       KBUILD_MODNAME ": changing listeners needs CAP_NET_ADMIN");
	if (!ret)
		ret = engram_netlink_url(info, ENGRAM_URL_LISTEN, &u);
	if (!ret)
		ret = engram_netlink_explain(info, engram_serve_listen_add(&u, info->extack),
					     ENGRAM_A_URL,
					     KBUILD_MODNAME ": cannot add the listener");
	return engram_netlink_refused(ret);
}

static int engram_netlink_listen_del(struct sk_buff *skb, struct genl_info *info)
{
	struct engram_url u;
	int ret;

	ret = engram_netlink_admin_msg(skb, info,
				       KBUILD_MODNAME ": changing listeners needs CAP_NET_ADMIN");
	if (!ret)
		ret = engram_netlink_url(info, ENGRAM_URL_LISTEN, &u);
	if (!ret)
		ret = engram_netlink_explain(info, engram_serve_listen_del(&u, info->extack),
					     ENGRAM_A_URL,
					     KBUILD_MODNAME ": cannot remove the listener");
	return engram_netlink_refused(ret);
}

static int engram_netlink_dump_listen_nth(unsigned long n, void *obj)
{
	return engram_serve_listen_info_nth(n, obj);
}

static int engram_netlink_dump_listen_put(struct engram_dump *d)
{
	return engram_netlink_put_listen(d->skb, d->obj);
}

static int engram_netlink_listen_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct engram_listen_info li;
	struct engram_dump d = {
		.skb = skb, .cb = cb, .cmd = ENGRAM_CMD_LISTEN_GET, .obj = &li,
		.nth = engram_netlink_dump_listen_nth, .put = engram_netlink_dump_listen_put,
	};
	unsigned long idx = cb->args[0];
	int ret;

	ret = engram_netlink_dump_each(&d, &idx);
	cb->args[0] = idx;
	return engram_netlink_dump_end(skb, ret);
}

static int engram_netlink_link_add(struct sk_buff *skb, struct genl_info *info)
{
	struct engram_url u;
	u32 id = 0;
	int ret;

	ret = engram_netlink_admin_msg(skb, info,
				       KBUILD_MODNAME ": changing links needs CAP_NET_ADMIN");
	if (!ret)
		ret = engram_netlink_url(info, ENGRAM_URL_REMOTE, &u);
	if (!ret)
		ret = engram_netlink_explain(info, engram_link_admin_add(&u, &id, info->extack),
					     ENGRAM_A_URL, KBUILD_MODNAME ": cannot add the link");
	if (ret)
		return engram_netlink_refused(ret);
	/*
	 * The link exists and connects in the background: report success even
	 * if the reply cannot be built; the caller then gets a plain ack and
	 * finds the link with LINK_GET.
	 */
	engram_netlink_reply_link(info, id, ENGRAM_CMD_LINK_ADD, true);
	return 0;
}

static int engram_netlink_link_del(struct sk_buff *skb, struct genl_info *info)
{
	int ret;

	ret = engram_netlink_admin_msg(skb, info,
				       KBUILD_MODNAME ": changing links needs CAP_NET_ADMIN");
	if (!ret && engram_netlink_require(info, ENGRAM_A_LINK_ID))
		ret = -EINVAL;
	if (!ret) {
		ret = engram_link_admin_del(nla_get_u32(info->attrs[ENGRAM_A_LINK_ID]),
					    info->extack);
		ret = engram_netlink_explain(info, ret, ENGRAM_A_LINK_ID,
					     KBUILD_MODNAME ": no link with that id");
	}
	return engram_netlink_refused(ret);
}

static int engram_netlink_link_get(struct sk_buff *skb, struct genl_info *info)
{
	if (engram_netlink_require(info, ENGRAM_A_LINK_ID))
		return engram_netlink_refused(-EINVAL);
	return engram_netlink_refused(engram_netlink_reply_link(info,
					nla_get_u32(info->attrs[ENGRAM_A_LINK_ID]),
					ENGRAM_CMD_LINK_GET, engram_netlink_sees_all(skb)));
}

static int engram_netlink_link_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	unsigned long idx = cb->args[0];
	int ret;

	ret = engram_netlink_dump_parse(cb, tb, engram_link_id_policy);
	if (ret)
		return ret;
	ret = engram_netlink_dump_links_from(skb, cb, ENGRAM_CMD_LINK_GET, tb, &idx);
	cb->args[0] = idx;
	return engram_netlink_dump_end(skb, ret);
}

/* What the links' hosts serve, a message per catalog entry. */
static int engram_netlink_dump_catalog_nth(unsigned long n, void *obj)
{
	return engram_link_admin_catalog_nth(n, obj);
}

static bool engram_netlink_dump_catalog_skip(struct engram_dump *d)
{
	const struct nlattr *filter = d->tb[ENGRAM_A_LINK_ID];
	const struct engram_link_catalog_info *ci = d->obj;

	return filter && ci->link_id != nla_get_u32(filter);
}

static int engram_netlink_dump_catalog_put(struct engram_dump *d)
{
	return engram_netlink_put_link_catalog(d->skb, d->obj);
}

static int engram_netlink_link_catalog_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	unsigned long idx = cb->args[0];
	struct engram_dump d = {
		.skb = skb, .cb = cb, .cmd = ENGRAM_CMD_LINK_CATALOG_GET, .tb = tb,
		.nth = engram_netlink_dump_catalog_nth, .skip = engram_netlink_dump_catalog_skip,
		.put = engram_netlink_dump_catalog_put,
	};
	int ret;

	ret = engram_netlink_dump_parse(cb, tb, engram_link_id_policy);
	if (ret)
		return ret;
	ret = engram_netlink_dump_objects(&d, sizeof(struct engram_link_catalog_info), &idx);
	cb->args[0] = idx;
	return engram_netlink_dump_end(skb, ret);
}

/*
 * The allow-list (allow.c).  As with URLs, the parser's reason quotes user
 * input and an extack message must be static, so the reason goes to the
 * kernel log; engramctl runs the same parser to tell the user.
 */
static int engram_netlink_allow_entry(struct genl_info *info, struct engram_prefix *p)
{
	const struct nlattr *a = info->attrs[ENGRAM_A_ALLOW];
	char why[160];
	const char *s;

	if (!a) {
		NL_SET_ERR_MSG_MOD(info->extack, "missing ALLOW");
		NL_SET_ERR_ATTR_MISS(info->extack, NULL, ENGRAM_A_ALLOW);
		return -EINVAL;
	}
	s = nla_data(a);
	if (!engram_prefix_parse(s, strlen(s), p, why, sizeof(why)))
		return 0;
	pr_info_ratelimited("allow-list entry refused: %*pE\n",
			    (int)strnlen(why, sizeof(why)), why);
	NL_SET_ERR_MSG_MOD(info->extack,
			   "bad allow-list entry: IP or IP/PREFIXLEN, IPv6 without brackets, no address bits past the length (the kernel log has the reason)");
	NL_SET_BAD_ATTR(info->extack, a);
	return -EINVAL;
}

static int engram_netlink_allow_change(struct sk_buff *skb, struct genl_info *info, bool add)
{
	struct engram_prefix p;
	int ret;

	ret = engram_netlink_admin_msg(skb, info, KBUILD_MODNAME
				       ": changing the allow-list needs CAP_NET_ADMIN");
	if (!ret)
		ret = engram_netlink_allow_entry(info, &p);
	if (!ret)
		ret = add ? engram_allow_add(&p, info->extack) :
			    engram_allow_del(&p, info->extack);
	if (ret == -EEXIST || ret == -ENOENT)
		NL_SET_BAD_ATTR(info->extack, info->attrs[ENGRAM_A_ALLOW]);
	return engram_netlink_refused(ret);
}

static int engram_netlink_allow_add(struct sk_buff *skb, struct genl_info *info)
{
	return engram_netlink_allow_change(skb, info, true);
}

static int engram_netlink_allow_del(struct sk_buff *skb, struct genl_info *info)
{
	return engram_netlink_allow_change(skb, info, false);
}

/*
 * Each entry with the mode; without entries one message with the mode
 * alone, so that "any peer" and "no peer" read differently.  The mode is
 * read per message: a dump that spans a change shows both, like any dump.
 */
static int engram_netlink_allow_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	char text[ENGRAM_PREFIX_TEXT_MAX];
	unsigned long idx = cb->args[0];
	struct engram_prefix p;
	bool entry;
	void *hdr;
	int ret = 0;

	if (!engram_netlink_sees_all(cb->skb)) {
		NL_SET_ERR_MSG_MOD(cb->extack, "reading the allow-list needs CAP_NET_ADMIN");
		return -EPERM;
	}
	for (;; idx++) {
		entry = !engram_allow_nth(idx, &p);
		/* Past the end, or past the mode-only message at 0. */
		if (!entry && idx)
			break;
		hdr = engram_netlink_dump_hdr(skb, cb, ENGRAM_CMD_ALLOW_GET);
		if (!hdr) {
			ret = -EMSGSIZE;
			break;
		}
		if (entry)
			engram_prefix_format(&p, text, sizeof(text));
		if ((entry && nla_put_string(skb, ENGRAM_A_ALLOW, text)) ||
		    nla_put_u8(skb, ENGRAM_A_ALLOW_MODE, engram_allow_mode())) {
			genlmsg_cancel(skb, hdr);
			ret = -EMSGSIZE;
			break;
		}
		genlmsg_end(skb, hdr);
	}
	cb->args[0] = idx;
	return engram_netlink_dump_end(skb, ret);
}

static const struct genl_ops engram_ops[] = {
	{
		.cmd = ENGRAM_CMD_TABLE_LOAD,
		.doit = engram_netlink_table_load,
		.policy = engram_load_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_TABLE_UNLOAD,
		.doit = engram_netlink_table_unload,
		.policy = engram_name_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_TABLE_GET,
		.doit = engram_netlink_table_get,
		.dumpit = engram_netlink_table_dump,
		.policy = engram_name_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_TABLE_VERIFY,
		.doit = engram_netlink_table_verify,
		.policy = engram_name_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_TABLE_DRAIN,
		.doit = engram_netlink_table_drain,
		.policy = engram_drain_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_STATS_GET,
		.doit = engram_netlink_stats_get,
		.dumpit = engram_netlink_stats_dump,
		.policy = engram_stats_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_LISTEN_ADD,
		.doit = engram_netlink_listen_add,
		.policy = engram_url_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_LISTEN_DEL,
		.doit = engram_netlink_listen_del,
		.policy = engram_url_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_LISTEN_GET,
		.dumpit = engram_netlink_listen_dump,
		.policy = engram_no_attr_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_LINK_ADD,
		.doit = engram_netlink_link_add,
		.policy = engram_url_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_LINK_DEL,
		.doit = engram_netlink_link_del,
		.policy = engram_link_id_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_LINK_GET,
		.doit = engram_netlink_link_get,
		.dumpit = engram_netlink_link_dump,
		.policy = engram_link_id_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_LINK_CATALOG_GET,
		.dumpit = engram_netlink_link_catalog_dump,
		.policy = engram_link_id_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_ALLOW_ADD,
		.doit = engram_netlink_allow_add,
		.policy = engram_allow_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_ALLOW_DEL,
		.doit = engram_netlink_allow_del,
		.policy = engram_allow_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_ALLOW_GET,
		.dumpit = engram_netlink_allow_dump,
		.policy = engram_no_attr_policy,
		.maxattr = ENGRAM_A_MAX,
	},
};

/*
 * Events name tables, listeners and links: for administrators where the
 * kernel can tell (6.7, and stable kernels with the fix: Debian's 6.1.0-57
 * has it, its 6.1.0-47 and every 5.10 do not); elsewhere any local user
 * may join, and a link's event leaves out its URL
 * (engram_netlink_put_event()).
 */
static const struct genl_multicast_group engram_mcgrps[] = {
	ENGRAM_COMPAT_MCGRP_ADMIN(ENGRAM_MCGRP_EVENTS),
};

static struct genl_family engram_family __ro_after_init = {
	.name		= ENGRAM_GENL_NAME,
	.version	= ENGRAM_GENL_VERSION,
	.maxattr	= ENGRAM_A_MAX,
	.parallel_ops	= true,
	.module		= THIS_MODULE,
	.ops		= engram_ops,
	.n_ops		= ARRAY_SIZE(engram_ops),
	.mcgrps		= engram_mcgrps,
	.n_mcgrps	= ARRAY_SIZE(engram_mcgrps),
};

static bool engram_netlink_event_wanted(void)
{
	return genl_has_listeners(&engram_family, &init_net, 0) > 0;
}

/*
 * 0 once the message went to the group; a negative errno when it could not
 * be built, and event.c counts the event as lost.  A member whose socket
 * was full is told by its own ENOBUFS, and the last member having left
 * (ESRCH) loses nobody anything.
 */
static int engram_netlink_event_send(const struct engram_event_rec *ev)
{
	struct sk_buff *msg;
	void *hdr;
	int ret;

	ret = engram_inject_event_msg();
	if (ret)
		return ret;
	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put(msg, 0, 0, &engram_family, 0, ENGRAM_CMD_EVENT);
	if (!hdr || engram_netlink_put_event(msg, ev)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	genlmsg_multicast(&engram_family, msg, 0, 0, GFP_KERNEL);
	return 0;
}

/**
 * engram_netlink_init() - register the generic netlink family
 *
 * Return: 0 or a negative errno from genl_register_family().
 */
int engram_netlink_init(void)
{
	int ret = genl_register_family(&engram_family);

	if (!ret)
		engram_event_register(engram_netlink_event_wanted, engram_netlink_event_send);
	return ret;
}

/**
 * engram_netlink_exit() - unregister the family; waits for running handlers
 */
void engram_netlink_exit(void)
{
	engram_event_register(NULL, NULL);
	genl_unregister_family(&engram_family);
}
