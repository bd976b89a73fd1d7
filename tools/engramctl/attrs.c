// SPDX-License-Identifier: GPL-2.0
/*
 * The engram_rdma family's attributes as this tool sees them: their names
 * (for error messages that point at one), the policy replies are checked
 * against, the error line that puts strerror and the kernel's extended ack
 * together, and the requests and replies every command builds the same way
 * (one attribute in, a dump out, replies collected into an array).  Kept
 * apart from the socket code so tests can replace the transport and keep
 * these.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/attr.h>
#include <netlink/genl/genl.h>

#include "nl.h"

static const char *const attr_names[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_TABLE_NAME]		= "TABLE_NAME",
	[ENGRAM_A_TABLE_FD]		= "TABLE_FD",
	[ENGRAM_A_TABLE_PATH]		= "TABLE_PATH",
	[ENGRAM_A_TABLE_ROWS]		= "TABLE_ROWS",
	[ENGRAM_A_TABLE_WEIGHT_OFFSET]	= "TABLE_WEIGHT_OFFSET",
	[ENGRAM_A_TABLE_SCALE_OFFSET]	= "TABLE_SCALE_OFFSET",
	[ENGRAM_A_TABLE_WEIGHT_BYTES]	= "TABLE_WEIGHT_BYTES",
	[ENGRAM_A_TABLE_SCALE_BYTES]	= "TABLE_SCALE_BYTES",
	[ENGRAM_A_TABLE_SHA256]		= "TABLE_SHA256",
	[ENGRAM_A_TABLE_GENERATION]	= "TABLE_GENERATION",
	[ENGRAM_A_TABLE_STATE]		= "TABLE_STATE",
	[ENGRAM_A_TABLE_FILE_BYTES]	= "TABLE_FILE_BYTES",
	[ENGRAM_A_TABLE_DONE_BYTES]	= "TABLE_DONE_BYTES",
	[ENGRAM_A_TABLE_PINNED_BYTES]	= "TABLE_PINNED_BYTES",
	[ENGRAM_A_TABLE_META_BYTES]	= "TABLE_META_BYTES",
	[ENGRAM_A_TABLE_ELAPSED_NS]	= "TABLE_ELAPSED_NS",
	[ENGRAM_A_TABLE_VERIFY_RESULT]	= "TABLE_VERIFY_RESULT",
	[ENGRAM_A_TABLE_ERROR]		= "TABLE_ERROR",
	[ENGRAM_A_TABLE_ERROR_MSG]	= "TABLE_ERROR_MSG",
	[ENGRAM_A_STATS]		= "STATS",
	[ENGRAM_A_URL]			= "URL",
	[ENGRAM_A_LISTEN_STATE]		= "LISTEN_STATE",
	[ENGRAM_A_LINK_ID]		= "LINK_ID",
	[ENGRAM_A_LINK_STATE]		= "LINK_STATE",
	[ENGRAM_A_LINK_ERROR]		= "LINK_ERROR",
	[ENGRAM_A_LINK_TABLES]		= "LINK_TABLES",
	[ENGRAM_A_LINK_MAX_ROWS]	= "LINK_MAX_ROWS",
	[ENGRAM_A_LINK_MAX_INFLIGHT]	= "LINK_MAX_INFLIGHT",
	[ENGRAM_A_LINK_CONNECTS]	= "LINK_CONNECTS",
	[ENGRAM_A_LINK_SINCE_NS]	= "LINK_SINCE_NS",
	[ENGRAM_A_DEVICE]		= "DEVICE",
	[ENGRAM_A_LATENCY]		= "LATENCY",
	[ENGRAM_A_CONNECTIONS]		= "CONNECTIONS",
	[ENGRAM_A_ALLOW]		= "ALLOW",
	[ENGRAM_A_LINK_RECONNECTS]	= "LINK_RECONNECTS",
	[ENGRAM_A_LINK_HEARTBEAT_US]	= "LINK_HEARTBEAT_US",
	[ENGRAM_A_LINK_PROTOCOL]	= "LINK_PROTOCOL",
	[ENGRAM_A_LINK_QUEUES]		= "LINK_QUEUES",
	[ENGRAM_A_LINK_QUEUE_FETCHES]	= "LINK_QUEUE_FETCHES",
	[ENGRAM_A_TRANSPORT]		= "TRANSPORT",
	[ENGRAM_A_ALLOW_MODE]		= "ALLOW_MODE",
	[ENGRAM_A_LATENCY_SUM_NS]	= "LATENCY_SUM_NS",
	[ENGRAM_A_EVENT]		= "EVENT",
	[ENGRAM_A_EVENTS_LOST]		= "EVENTS_LOST",
	[ENGRAM_A_TABLE_HELD_FIRST]	= "TABLE_HELD_FIRST",
	[ENGRAM_A_TABLE_HELD_ROWS]	= "TABLE_HELD_ROWS",
	[ENGRAM_A_TABLE_DRAINING]	= "TABLE_DRAINING",
	[ENGRAM_A_TABLE_INFLIGHT]	= "TABLE_INFLIGHT",
	[ENGRAM_A_TABLE_DRAIN_QUIET_NS]	= "TABLE_DRAIN_QUIET_NS",
};

const char *engram_attr_name(int type)
{
	if (type > 0 && type <= ENGRAM_A_MAX && attr_names[type])
		return attr_names[type];
	return NULL;
}

/* Replies are checked as strictly as the kernel checks requests. */
static struct nla_policy engram_policy[ENGRAM_A_MAX + 1] = {
	[ENGRAM_A_TABLE_NAME]		= { .type = NLA_STRING, .maxlen = ENGRAM_NAME_MAX },
	[ENGRAM_A_TABLE_FD]		= { .type = NLA_U32 },
	[ENGRAM_A_TABLE_PATH]		= { .type = NLA_STRING, .maxlen = ENGRAM_PATH_MAX },
	[ENGRAM_A_TABLE_ROWS]		= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_WEIGHT_OFFSET]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_SCALE_OFFSET]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_WEIGHT_BYTES]	= { .type = NLA_U32 },
	[ENGRAM_A_TABLE_SCALE_BYTES]	= { .type = NLA_U32 },
	[ENGRAM_A_TABLE_SHA256]		= { .type = NLA_UNSPEC, .minlen = ENGRAM_SHA256_LEN,
					    .maxlen = ENGRAM_SHA256_LEN },
	[ENGRAM_A_TABLE_GENERATION]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_STATE]		= { .type = NLA_U8 },
	[ENGRAM_A_TABLE_FILE_BYTES]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_DONE_BYTES]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_PINNED_BYTES]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_META_BYTES]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_ELAPSED_NS]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_VERIFY_RESULT]	= { .type = NLA_U8 },
	[ENGRAM_A_TABLE_ERROR]		= { .type = NLA_U32 },
	[ENGRAM_A_TABLE_ERROR_MSG]	= { .type = NLA_STRING },
	[ENGRAM_A_STATS]		= { .type = NLA_NESTED },
	[ENGRAM_A_URL]			= { .type = NLA_STRING, .maxlen = 128 },
	[ENGRAM_A_LISTEN_STATE]		= { .type = NLA_U8 },
	[ENGRAM_A_LINK_ID]		= { .type = NLA_U32 },
	[ENGRAM_A_LINK_STATE]		= { .type = NLA_U8 },
	[ENGRAM_A_LINK_ERROR]		= { .type = NLA_U32 },
	[ENGRAM_A_LINK_TABLES]		= { .type = NLA_U32 },
	[ENGRAM_A_LINK_MAX_ROWS]	= { .type = NLA_U32 },
	[ENGRAM_A_LINK_MAX_INFLIGHT]	= { .type = NLA_U32 },
	[ENGRAM_A_LINK_CONNECTS]	= { .type = NLA_U64 },
	[ENGRAM_A_LINK_SINCE_NS]	= { .type = NLA_U64 },
	[ENGRAM_A_DEVICE]		= { .type = NLA_STRING, .maxlen = 64 },
	[ENGRAM_A_LATENCY]		= { .type = NLA_NESTED },
	[ENGRAM_A_CONNECTIONS]		= { .type = NLA_U32 },
	[ENGRAM_A_ALLOW]		= { .type = NLA_STRING, .maxlen = 64 },
	[ENGRAM_A_LINK_RECONNECTS]	= { .type = NLA_U64 },
	[ENGRAM_A_LINK_HEARTBEAT_US]	= { .type = NLA_U32 },
	[ENGRAM_A_LINK_PROTOCOL]	= { .type = NLA_U32 },
	[ENGRAM_A_LINK_QUEUES]		= { .type = NLA_U32 },
	[ENGRAM_A_LINK_QUEUE_FETCHES]	= { .type = NLA_NESTED },
	[ENGRAM_A_TRANSPORT]		= { .type = NLA_U8 },
	[ENGRAM_A_ALLOW_MODE]		= { .type = NLA_U8 },
	[ENGRAM_A_LATENCY_SUM_NS]	= { .type = NLA_U64 },
	[ENGRAM_A_EVENT]		= { .type = NLA_U8 },
	[ENGRAM_A_EVENTS_LOST]		= { .type = NLA_U32 },
	[ENGRAM_A_TABLE_HELD_FIRST]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_HELD_ROWS]	= { .type = NLA_U64 },
	[ENGRAM_A_TABLE_DRAINING]	= { .type = NLA_U8 },
	[ENGRAM_A_TABLE_INFLIGHT]	= { .type = NLA_U32 },
	[ENGRAM_A_TABLE_DRAIN_QUIET_NS]	= { .type = NLA_U64 },
};

int enl_parse(struct nl_msg *msg, struct nlattr **tb)
{
	return genlmsg_parse(nlmsg_hdr(msg), 0, tb, ENGRAM_A_MAX, engram_policy) ? -EPROTO : 0;
}

void enl_perror(const struct enl *nl, int err, const char *fmt, ...)
{
	const char *attr;
	va_list ap;

	if (err < 0)
		err = -err;
	fputs("engramctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s", strerror(err));
	if (err == EPERM)
		fputs(" (needs CAP_NET_ADMIN)", stderr);
	if (nl && nl->extack[0])
		fprintf(stderr, ": %s", nl->extack);
	attr = nl ? engram_attr_name(nl->bad_attr) : NULL;
	if (attr)
		fprintf(stderr, " (attribute %s)", attr);
	attr = nl ? engram_attr_name(nl->miss_attr) : NULL;
	if (attr)
		fprintf(stderr, " (missing attribute %s)", attr);
	fputc('\n', stderr);
}

int enl_request_str(struct enl *nl, uint8_t cmd, int attr, const char *s,
		    enl_reply_cb cb, void *arg)
{
	struct nl_msg *msg = enl_msg(nl, cmd, 0);

	if (!msg || nla_put_string(msg, attr, s)) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	return enl_request(nl, msg, cb, arg);
}

int enl_request_u32(struct enl *nl, uint8_t cmd, int attr, uint32_t v,
		    enl_reply_cb cb, void *arg)
{
	struct nl_msg *msg = enl_msg(nl, cmd, 0);

	if (!msg || nla_put_u32(msg, attr, v)) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	return enl_request(nl, msg, cb, arg);
}

int enl_dump(struct enl *nl, uint8_t cmd, enl_reply_cb cb, void *arg)
{
	struct nl_msg *msg = enl_msg(nl, cmd, NLM_F_DUMP);

	return msg ? enl_request(nl, msg, cb, arg) : -ENOMEM;
}

void *enl_grow(void *v, size_t *cap, size_t n, size_t size)
{
	size_t ncap;

	if (n < *cap)
		return v;
	ncap = *cap ? 2 * *cap : 8;
	v = realloc(v, ncap * size);
	if (v)
		*cap = ncap;
	return v;
}
