// SPDX-License-Identifier: GPL-2.0
/*
 * nl_raw: send engram_rdma netlink requests exactly as written on the command
 * line, bypassing engramctl's own checks, so the tests can prove the kernel
 * refuses bad requests by itself.
 *
 *   nl_raw CMD [ATTR=VALUE]...
 *
 * CMD: load, unload, get, verify, stats.  ATTR: name, path, fd (a path to
 * open read-only; "wronly:PATH", "dir:PATH" or "num:N" for other kinds),
 * rows, woff, soff, wbytes, sbytes (numbers), sha (hex of any length),
 * bogus (an attribute id the family does not know).
 *
 * Prints "ok" ("ok N messages" for dump) or "error ERRNO MESSAGE" (MESSAGE
 * is the extended ack, or "-" if none) and exits 0 or 1; 2 means the tool
 * itself failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>

#include <linux/engram_rdma.h>

static char extack_msg[512] = "-";

static int on_error(struct sockaddr_nl *nla, struct nlmsgerr *err, void *arg)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)err - 1;
	int *ret = arg;
	struct nlattr *tb[NLMSGERR_ATTR_MAX + 1];
	unsigned int ack_len = sizeof(*nlh) + sizeof(*err);

	(void)nla;
	*ret = err->error;
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return NL_STOP;
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		ack_len += err->msg.nlmsg_len - sizeof(*nlh);
	if (nlh->nlmsg_len <= ack_len)
		return NL_STOP;
	if (nla_parse(tb, NLMSGERR_ATTR_MAX, (struct nlattr *)((char *)nlh + ack_len),
		      nlh->nlmsg_len - ack_len, NULL))
		return NL_STOP;
	if (tb[NLMSGERR_ATTR_MSG])
		snprintf(extack_msg, sizeof(extack_msg), "%s",
			 (char *)nla_data(tb[NLMSGERR_ATTR_MSG]));
	else if (tb[NLMSGERR_ATTR_OFFS])
		snprintf(extack_msg, sizeof(extack_msg), "(bad attribute at offset %u)",
			 nla_get_u32(tb[NLMSGERR_ATTR_OFFS]));
	return NL_STOP;
}

static int on_ack(struct nl_msg *msg, void *arg)
{
	(void)msg;
	*(int *)arg = 0;
	return NL_STOP;
}

static int messages;

static int on_valid(struct nl_msg *msg, void *arg)
{
	(void)msg;
	(void)arg;
	messages++;
	return NL_OK;
}

static int on_finish(struct nl_msg *msg, void *arg)
{
	(void)msg;
	*(int *)arg = 0;
	return NL_STOP;
}

static int open_fd(const char *spec)
{
	if (!strncmp(spec, "num:", 4))
		return atoi(spec + 4);
	if (!strncmp(spec, "wronly:", 7))
		return open(spec + 7, O_WRONLY);
	if (!strncmp(spec, "dir:", 4))
		return open(spec + 4, O_RDONLY | O_DIRECTORY);
	return open(spec, O_RDONLY);
}

static int put_hex(struct nl_msg *msg, const char *hex)
{
	unsigned char buf[256];
	size_t n = strlen(hex) / 2, i;

	if (n > sizeof(buf))
		return -1;
	for (i = 0; i < n; i++) {
		unsigned int v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		buf[i] = v;
	}
	return nla_put(msg, ENGRAM_A_TABLE_SHA256, n, buf);
}

static int put_attr(struct nl_msg *msg, const char *kv)
{
	const char *v = strchr(kv, '=');
	size_t k;

	if (!v)
		return -1;
	k = v - kv;
	v++;
#define IS(s) (k == strlen(s) && !strncmp(kv, s, k))
	if (IS("name"))
		return nla_put_string(msg, ENGRAM_A_TABLE_NAME, v);
	if (IS("path"))
		return nla_put_string(msg, ENGRAM_A_TABLE_PATH, v);
	if (IS("fd")) {
		int fd = open_fd(v);

		if (fd < 0) {
			perror(v);
			return -1;
		}
		return nla_put_u32(msg, ENGRAM_A_TABLE_FD, fd);
	}
	if (IS("rows"))
		return nla_put_u64(msg, ENGRAM_A_TABLE_ROWS, strtoull(v, NULL, 0));
	if (IS("woff"))
		return nla_put_u64(msg, ENGRAM_A_TABLE_WEIGHT_OFFSET, strtoull(v, NULL, 0));
	if (IS("soff"))
		return nla_put_u64(msg, ENGRAM_A_TABLE_SCALE_OFFSET, strtoull(v, NULL, 0));
	if (IS("wbytes"))
		return nla_put_u32(msg, ENGRAM_A_TABLE_WEIGHT_BYTES, strtoul(v, NULL, 0));
	if (IS("sbytes"))
		return nla_put_u32(msg, ENGRAM_A_TABLE_SCALE_BYTES, strtoul(v, NULL, 0));
	if (IS("sha"))
		return put_hex(msg, v);
	if (IS("bogus"))
		return nla_put_u32(msg, ENGRAM_A_MAX + 10, strtoul(v, NULL, 0));
	if (IS("u32name"))
		return nla_put_u32(msg, ENGRAM_A_TABLE_NAME, strtoul(v, NULL, 0));
#undef IS
	fprintf(stderr, "nl_raw: unknown attribute '%s'\n", kv);
	return -1;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; int cmd; int flags; } cmds[] = {
		{ "load", ENGRAM_CMD_TABLE_LOAD, 0 },
		{ "unload", ENGRAM_CMD_TABLE_UNLOAD, 0 },
		{ "get", ENGRAM_CMD_TABLE_GET, 0 },
		{ "dump", ENGRAM_CMD_TABLE_GET, NLM_F_DUMP },
		{ "verify", ENGRAM_CMD_TABLE_VERIFY, 0 },
		{ "stats", ENGRAM_CMD_STATS_GET, 0 },
	};
	struct nl_sock *sk;
	struct nl_msg *msg;
	struct nl_cb *cb;
	int family, i, c = -1, ret = 1, one = 1;

	if (argc < 2) {
		fprintf(stderr, "usage: nl_raw CMD [ATTR=VALUE]...\n");
		return 2;
	}
	for (i = 0; i < (int)(sizeof(cmds) / sizeof(cmds[0])); i++)
		if (!strcmp(argv[1], cmds[i].name))
			c = i;
	if (c < 0) {
		fprintf(stderr, "nl_raw: unknown command %s\n", argv[1]);
		return 2;
	}
	sk = nl_socket_alloc();
	if (!sk || genl_connect(sk))
		return 2;
	setsockopt(nl_socket_get_fd(sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	family = genl_ctrl_resolve(sk, ENGRAM_GENL_NAME);
	if (family < 0) {
		fprintf(stderr, "nl_raw: family %s not found\n", ENGRAM_GENL_NAME);
		return 2;
	}
	msg = nlmsg_alloc();
	if (!msg || !genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0,
				 NLM_F_REQUEST | NLM_F_ACK | cmds[c].flags, cmds[c].cmd,
				 ENGRAM_GENL_VERSION))
		return 2;
	for (i = 2; i < argc; i++)
		if (put_attr(msg, argv[i]))
			return 2;

	cb = nl_cb_alloc(NL_CB_DEFAULT);
	nl_cb_err(cb, NL_CB_CUSTOM, on_error, &ret);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, on_ack, &ret);
	nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, on_finish, &ret);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_valid, NULL);
	if (nl_send_auto(sk, msg) < 0)
		return 2;
	ret = 1;
	while (ret == 1)
		if (nl_recvmsgs(sk, cb) < 0 && ret == 1)
			return 2;
	if (ret == 0 && cmds[c].flags & NLM_F_DUMP)
		printf("ok %d messages\n", messages);
	else if (ret == 0)
		printf("ok\n");
	else
		printf("error %d %s\n", -ret, extack_msg);
	nlmsg_free(msg);
	nl_cb_put(cb);
	nl_socket_free(sk);
	return ret ? 1 : 0;
}
