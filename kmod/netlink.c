// SPDX-License-Identifier: GPL-2.0
/*
 * The engram_rdma generic netlink family: the control plane engramctl talks
 * to.  Handlers here only translate between attributes and the table API;
 * every decision about tables is made in table.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/slab.h>
#include <net/genetlink.h>
#include <net/netlink.h>

#include "engram.h"

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
};

static const struct nla_policy engram_name_policy[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_TABLE_NAME]		= { .type = NLA_NUL_STRING, .len = ENGRAM_NAME_MAX - 1 },
};

/*
 * Tables are host-wide, so changing them takes CAP_NET_ADMIN in the initial
 * user namespace.  Checked here rather than with GENL_ADMIN_PERM so that the
 * refusal carries a message like every other one.
 */
static int engram_nl_admin(struct sk_buff *skb, struct genl_info *info)
{
	if (netlink_capable(skb, CAP_NET_ADMIN))
		return 0;
	NL_SET_ERR_MSG_MOD(info->extack, "changing tables needs CAP_NET_ADMIN");
	return -EPERM;
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
};

/* Refuse a request that lacks @attr, saying which, in words and for tools. */
static int engram_nl_require(struct genl_info *info, int attr)
{
	if (info->attrs[attr])
		return 0;
	if (info->extack)
		info->extack->_msg = engram_missing_msg[attr];
	NL_SET_ERR_ATTR_MISS(info->extack, NULL, attr);
	return -EINVAL;
}

static int engram_nl_refused(int ret)
{
	if (ret)
		engram_count(&engram_global_stats, ENGRAM_STAT_REQUESTS_REFUSED);
	return ret;
}

static int engram_put_stats(struct sk_buff *skb, const u64 *vals, const u8 *ids,
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

static int engram_put_table(struct sk_buff *skb, const struct engram_table_info *ti)
{
	if (nla_put_string(skb, ENGRAM_A_TABLE_NAME, ti->name) ||
	    nla_put_string(skb, ENGRAM_A_TABLE_PATH, ti->path) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_GENERATION, ti->generation, ENGRAM_A_PAD) ||
	    nla_put_u8(skb, ENGRAM_A_TABLE_STATE, ti->state) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_ROWS, ti->rows, ENGRAM_A_PAD) ||
	    nla_put_u32(skb, ENGRAM_A_TABLE_WEIGHT_BYTES, ENGRAM_WEIGHT_BYTES) ||
	    nla_put_u32(skb, ENGRAM_A_TABLE_SCALE_BYTES, ENGRAM_SCALE_BYTES) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_WEIGHT_OFFSET, ti->weight_offset, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_SCALE_OFFSET, ti->scale_offset, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_FILE_BYTES, ti->file_bytes, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_DONE_BYTES, ti->done_bytes, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_PINNED_BYTES, ti->pinned_bytes, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_META_BYTES, ti->meta_bytes, ENGRAM_A_PAD) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_ELAPSED_NS, ti->elapsed_ns, ENGRAM_A_PAD) ||
	    nla_put_u8(skb, ENGRAM_A_TABLE_VERIFY_RESULT, ti->verify_result))
		return -EMSGSIZE;
	if (ti->have_sha256 &&
	    nla_put(skb, ENGRAM_A_TABLE_SHA256, ENGRAM_SHA256_LEN, ti->sha256))
		return -EMSGSIZE;
	if (ti->error && (nla_put_u32(skb, ENGRAM_A_TABLE_ERROR, ti->error) ||
			  nla_put_string(skb, ENGRAM_A_TABLE_ERROR_MSG, ti->errmsg)))
		return -EMSGSIZE;
	return 0;
}

static int engram_put_table_stats(struct sk_buff *skb, const struct engram_table_info *ti)
{
	if (nla_put_string(skb, ENGRAM_A_TABLE_NAME, ti->name) ||
	    nla_put_u64_64bit(skb, ENGRAM_A_TABLE_GENERATION, ti->generation, ENGRAM_A_PAD))
		return -EMSGSIZE;
	return engram_put_stats(skb, ti->stats, engram_table_stat_ids, engram_table_stat_count);
}

/* Reply to a do request with one table's attributes. */
static int engram_reply_table(struct genl_info *info, const char *name, u8 cmd, bool stats)
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
	ret = -ENOMEM;
	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		goto out;
	hdr = genlmsg_put_reply(msg, info, &engram_family, 0, cmd);
	ret = -EMSGSIZE;
	if (!hdr)
		goto err_msg;
	ret = stats ? engram_put_table_stats(msg, ti) : engram_put_table(msg, ti);
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

static int engram_nl_table_load(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr **tb = info->attrs;
	struct engram_load_args a = {};
	int ret;

	ret = engram_nl_admin(skb, info);
	if (ret)
		return engram_nl_refused(ret);
	if (engram_nl_require(info, ENGRAM_A_TABLE_NAME) ||
	    engram_nl_require(info, ENGRAM_A_TABLE_FD) ||
	    engram_nl_require(info, ENGRAM_A_TABLE_ROWS) ||
	    engram_nl_require(info, ENGRAM_A_TABLE_WEIGHT_OFFSET) ||
	    engram_nl_require(info, ENGRAM_A_TABLE_SCALE_OFFSET) ||
	    engram_nl_require(info, ENGRAM_A_TABLE_WEIGHT_BYTES) ||
	    engram_nl_require(info, ENGRAM_A_TABLE_SCALE_BYTES))
		return engram_nl_refused(-EINVAL);

	a.name = nla_data(tb[ENGRAM_A_TABLE_NAME]);
	a.fd = nla_get_u32(tb[ENGRAM_A_TABLE_FD]);
	a.path = tb[ENGRAM_A_TABLE_PATH] ? nla_data(tb[ENGRAM_A_TABLE_PATH]) : NULL;
	a.rows = nla_get_u64(tb[ENGRAM_A_TABLE_ROWS]);
	a.weight_offset = nla_get_u64(tb[ENGRAM_A_TABLE_WEIGHT_OFFSET]);
	a.scale_offset = nla_get_u64(tb[ENGRAM_A_TABLE_SCALE_OFFSET]);
	a.weight_bytes = nla_get_u32(tb[ENGRAM_A_TABLE_WEIGHT_BYTES]);
	a.scale_bytes = nla_get_u32(tb[ENGRAM_A_TABLE_SCALE_BYTES]);
	a.sha256 = tb[ENGRAM_A_TABLE_SHA256] ? nla_data(tb[ENGRAM_A_TABLE_SHA256]) : NULL;

	ret = engram_table_load(&a, info->extack);
	if (ret)
		return engram_nl_refused(ret);
	/*
	 * The load has started and holds the file: report success even if the
	 * reply cannot be built or the table is already gone again (a racing
	 * unload); the caller then gets a plain ack.
	 */
	engram_reply_table(info, a.name, ENGRAM_CMD_TABLE_LOAD, false);
	return 0;
}

static int engram_nl_table_unload(struct sk_buff *skb, struct genl_info *info)
{
	int ret = engram_nl_admin(skb, info);

	if (!ret && engram_nl_require(info, ENGRAM_A_TABLE_NAME))
		ret = -EINVAL;
	if (!ret)
		ret = engram_table_unload(nla_data(info->attrs[ENGRAM_A_TABLE_NAME]),
					  info->extack);
	return engram_nl_refused(ret);
}

static int engram_nl_table_verify(struct sk_buff *skb, struct genl_info *info)
{
	const char *name;
	int ret = engram_nl_admin(skb, info);

	if (!ret && engram_nl_require(info, ENGRAM_A_TABLE_NAME))
		ret = -EINVAL;
	if (ret)
		return engram_nl_refused(ret);
	name = nla_data(info->attrs[ENGRAM_A_TABLE_NAME]);
	ret = engram_table_verify(name, info->extack);
	if (ret)
		return engram_nl_refused(ret);
	ret = engram_reply_table(info, name, ENGRAM_CMD_TABLE_VERIFY, false);
	return ret == -ENOENT ? 0 : ret;
}

static int engram_nl_table_get(struct sk_buff *skb, struct genl_info *info)
{
	if (engram_nl_require(info, ENGRAM_A_TABLE_NAME))
		return engram_nl_refused(-EINVAL);
	return engram_nl_refused(engram_reply_table(info,
						    nla_data(info->attrs[ENGRAM_A_TABLE_NAME]),
						    ENGRAM_CMD_TABLE_GET, false));
}

/*
 * Dumps walk the table list by position (cb->args[0]); a table loaded or
 * unloaded mid-dump may be skipped or repeated, as in any netlink dump.
 */
static int engram_dump_tables(struct sk_buff *skb, struct netlink_callback *cb, u8 cmd)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	const struct nlattr *filter;
	struct engram_table_info *ti;
	unsigned long idx = cb->args[0];
	void *hdr;
	int ret;

	/* Already validated by the core; parsed again for the optional name filter. */
	ret = genlmsg_parse(cb->nlh, &engram_family, tb, ENGRAM_A_MAX,
			    engram_name_policy, cb->extack);
	if (ret)
		return ret;
	filter = tb[ENGRAM_A_TABLE_NAME];
	ti = kmalloc(sizeof(*ti), GFP_KERNEL);
	if (!ti)
		return -ENOMEM;
	for (; !engram_table_info_nth(idx, ti); idx++) {
		if (filter && strcmp(ti->name, nla_data(filter)))
			continue;
		hdr = genlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
				  &engram_family, NLM_F_MULTI, cmd);
		if (!hdr) {
			ret = -EMSGSIZE;
			break;
		}
		ret = cmd == ENGRAM_CMD_STATS_GET ? engram_put_table_stats(skb, ti) :
						    engram_put_table(skb, ti);
		if (ret) {
			genlmsg_cancel(skb, hdr);
			break;
		}
		genlmsg_end(skb, hdr);
	}
	kfree(ti);
	/* Stop at a table that did not fit; the next call resumes there. */
	if (ret == -EMSGSIZE && idx == cb->args[0])
		return ret;
	cb->args[0] = idx;
	return skb->len;
}

static int engram_nl_table_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	return engram_dump_tables(skb, cb, ENGRAM_CMD_TABLE_GET);
}

static int engram_nl_stats_get(struct sk_buff *skb, struct genl_info *info)
{
	static const u8 gauges[] = { ENGRAM_STAT_TABLES, ENGRAM_STAT_PINNED_BYTES };
	u64 vals[__ENGRAM_STAT_MAX];
	struct sk_buff *msg;
	struct nlattr *nest;
	unsigned int i;
	void *hdr;

	if (info->attrs[ENGRAM_A_TABLE_NAME]) {
		const char *name = nla_data(info->attrs[ENGRAM_A_TABLE_NAME]);

		return engram_nl_refused(engram_reply_table(info, name,
							    ENGRAM_CMD_STATS_GET, true));
	}
	engram_counters_snapshot(&engram_global_stats, vals);
	engram_tables_totals(&vals[ENGRAM_STAT_TABLES], &vals[ENGRAM_STAT_PINNED_BYTES]);

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &engram_family, 0, ENGRAM_CMD_STATS_GET);
	if (!hdr)
		goto err;
	nest = nla_nest_start(msg, ENGRAM_A_STATS);
	if (!nest)
		goto err;
	for (i = 0; i < ARRAY_SIZE(gauges); i++)
		if (nla_put_u64_64bit(msg, gauges[i], vals[gauges[i]], ENGRAM_STAT_PAD))
			goto err;
	for (i = 0; i < engram_global_stat_count + engram_table_stat_count; i++) {
		u8 id = i < engram_global_stat_count ? engram_global_stat_ids[i] :
			engram_table_stat_ids[i - engram_global_stat_count];

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

static int engram_nl_stats_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	return engram_dump_tables(skb, cb, ENGRAM_CMD_STATS_GET);
}

static const struct genl_ops engram_ops[] = {
	{
		.cmd = ENGRAM_CMD_TABLE_LOAD,
		.doit = engram_nl_table_load,
		.policy = engram_load_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_TABLE_UNLOAD,
		.doit = engram_nl_table_unload,
		.policy = engram_name_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_TABLE_GET,
		.doit = engram_nl_table_get,
		.dumpit = engram_nl_table_dump,
		.policy = engram_name_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_TABLE_VERIFY,
		.doit = engram_nl_table_verify,
		.policy = engram_name_policy,
		.maxattr = ENGRAM_A_MAX,
	},
	{
		.cmd = ENGRAM_CMD_STATS_GET,
		.doit = engram_nl_stats_get,
		.dumpit = engram_nl_stats_dump,
		.policy = engram_name_policy,
		.maxattr = ENGRAM_A_MAX,
	},
};

static struct genl_family engram_family __ro_after_init = {
	.name		= ENGRAM_GENL_NAME,
	.version	= ENGRAM_GENL_VERSION,
	.maxattr	= ENGRAM_A_MAX,
	.parallel_ops	= true,
	.module		= THIS_MODULE,
	.ops		= engram_ops,
	.n_ops		= ARRAY_SIZE(engram_ops),
};

/**
 * engram_netlink_init() - register the generic netlink family
 *
 * Return: 0 or a negative errno from genl_register_family().
 */
int engram_netlink_init(void)
{
	return genl_register_family(&engram_family);
}

/**
 * engram_netlink_exit() - unregister the family; waits for running handlers
 */
void engram_netlink_exit(void)
{
	genl_unregister_family(&engram_family);
}
