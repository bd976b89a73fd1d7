// SPDX-License-Identifier: GPL-2.0
/*
 * Generic netlink transport.  The kernel side refuses anything it does not
 * like with an extended-ack message; printing that message is most of what
 * makes an error here understandable, so the ack TLVs are parsed by hand
 * (libnl 3.7 has no accessor for them).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>

#include "nl.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* libnl folds errno into its own codes; undo that for the few that matter. */
static int nlerr_to_errno(int nlerr)
{
	switch (nlerr < 0 ? -nlerr : nlerr) {
	case NLE_NOMEM:		return ENOMEM;
	case NLE_PERM:		return EPERM;
	case NLE_NOACCESS:	return EACCES;
	case NLE_OBJ_NOTFOUND:	return ENOENT;
	case NLE_INTR:		return EINTR;
	case NLE_AGAIN:		return EAGAIN;
	case NLE_DUMP_INTR:	return EAGAIN;
	case NLE_BAD_SOCK:	return EBADF;
	case NLE_AF_NOSUPPORT:	return EAFNOSUPPORT;
	case NLE_SEQ_MISMATCH:
	case NLE_MSG_TRUNC:
	case NLE_MSG_OVERFLOW:
	case NLE_PARSE_ERR:
	case NLE_MSGTYPE_NOSUPPORT:
		return EPROTO;
	default:		return EIO;
	}
}

int enl_open(struct enl *nl)
{
	int one = 1, ret;

	memset(nl, 0, sizeof(*nl));
	nl->bad_attr = -1;
	nl->miss_attr = -1;
	nl->sk = nl_socket_alloc();
	if (!nl->sk)
		return -ENOMEM;
	ret = genl_connect(nl->sk);
	if (ret) {
		ret = -nlerr_to_errno(ret);
		goto fail;
	}
	/*
	 * Extended acks carry the kernel's reason for a refusal; capped acks
	 * keep our own request out of every error reply.  Kernels without
	 * either still work, only less talkatively.
	 */
	setsockopt(nl_socket_get_fd(nl->sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	setsockopt(nl_socket_get_fd(nl->sk), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));

	nl->family = genl_ctrl_resolve(nl->sk, ENGRAM_GENL_NAME);
	if (nl->family < 0) {
		ret = nl->family == -NLE_OBJ_NOTFOUND ? -ENOENT : -nlerr_to_errno(nl->family);
		goto fail;
	}
	return 0;
fail:
	nl_socket_free(nl->sk);
	nl->sk = NULL;
	return ret;
}

void enl_close(struct enl *nl)
{
	nl_socket_free(nl->sk);
	nl->sk = NULL;
}

struct nl_msg *enl_msg(struct enl *nl, uint8_t cmd, int flags)
{
	struct nl_msg *msg = nlmsg_alloc();

	if (!msg)
		return NULL;
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, nl->family, 0, flags, cmd,
			 ENGRAM_GENL_VERSION)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

struct enl_ctx {
	struct enl *nl;
	struct nl_msg *req;
	enl_reply_cb cb;
	void *arg;
	int err;	/* positive errno */
	int done;
};

/* Which attribute of our own request sits at byte @off of it. */
static int enl_attr_at(struct nl_msg *req, uint32_t off)
{
	struct nlmsghdr *hdr = nlmsg_hdr(req);
	struct nlattr *nla;
	int rem;

	nla_for_each_attr(nla, genlmsg_attrdata(nlmsg_data(hdr), 0),
			  genlmsg_attrlen(nlmsg_data(hdr), 0), rem) {
		if ((uint32_t)((char *)nla - (char *)hdr) == off)
			return nla_type(nla);
	}
	return -1;
}

/* The extack TLVs (message, offending offset, missing type) at @start. */
static void enl_parse_tlvs(struct enl *nl, struct nl_msg *req, const void *start, size_t len)
{
	struct nlattr *tb[NLMSGERR_ATTR_MAX + 1] = { NULL };

	if (nla_parse(tb, NLMSGERR_ATTR_MAX, (struct nlattr *)start, (int)len, NULL))
		return;
	if (tb[NLMSGERR_ATTR_MSG] && nla_len(tb[NLMSGERR_ATTR_MSG]) > 0) {
		int n = nla_len(tb[NLMSGERR_ATTR_MSG]);

		if (n >= (int)sizeof(nl->extack))
			n = sizeof(nl->extack) - 1;
		memcpy(nl->extack, nla_data(tb[NLMSGERR_ATTR_MSG]), n);
		nl->extack[n] = '\0';
	}
	if (req && tb[NLMSGERR_ATTR_OFFS] && nla_len(tb[NLMSGERR_ATTR_OFFS]) >= 4)
		nl->bad_attr = enl_attr_at(req, nla_get_u32(tb[NLMSGERR_ATTR_OFFS]));
	if (tb[NLMSGERR_ATTR_MISS_TYPE] && nla_len(tb[NLMSGERR_ATTR_MISS_TYPE]) >= 4)
		nl->miss_attr = nla_get_u32(tb[NLMSGERR_ATTR_MISS_TYPE]);
}

void enl_ack_tlvs(struct enl *nl, struct nl_msg *req, const struct nlmsghdr *hdr)
{
	const struct nlmsgerr *e = nlmsg_data(hdr);
	size_t off = sizeof(*e);

	if (!(hdr->nlmsg_flags & NLM_F_ACK_TLVS) || hdr->nlmsg_len < NLMSG_HDRLEN + off)
		return;
	/* Without NETLINK_CAP_ACK the kernel echoes our request before the TLVs. */
	if (!(hdr->nlmsg_flags & NLM_F_CAPPED)) {
		if (e->msg.nlmsg_len < NLMSG_HDRLEN)
			return;
		off += e->msg.nlmsg_len - NLMSG_HDRLEN;
	}
	off = NLMSG_ALIGN(off);
	if (off >= hdr->nlmsg_len - NLMSG_HDRLEN)
		return;
	enl_parse_tlvs(nl, req, (const char *)e + off, hdr->nlmsg_len - NLMSG_HDRLEN - off);
}

static int enl_err_cb(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	/* libnl passes nlmsg_data() of the error message; step back to its header. */
	const struct nlmsghdr *hdr = (const struct nlmsghdr *)((char *)e - NLMSG_HDRLEN);
	struct enl_ctx *ctx = arg;

	(void)nla;
	ctx->err = e->error < 0 ? -e->error : EPROTO;
	ctx->done = 1;
	enl_ack_tlvs(ctx->nl, ctx->req, hdr);
	return NL_STOP;
}

static int enl_valid_cb(struct nl_msg *msg, void *arg)
{
	struct enl_ctx *ctx = arg;
	int ret;

	if (!ctx->cb || ctx->err)
		return NL_SKIP;
	ret = ctx->cb(msg, ctx->arg);
	/* Keep reading to the ack so no stale reply is left on the socket. */
	if (ret < 0)
		ctx->err = -ret;
	return NL_SKIP;
}

static int enl_done_cb(struct nl_msg *msg, void *arg)
{
	struct nlmsghdr *hdr = nlmsg_hdr(msg);
	struct enl_ctx *ctx = arg;
	int status;

	/* A dump that fails part-way ends with NLMSG_DONE carrying -errno (and extack). */
	if (hdr->nlmsg_type == NLMSG_DONE && nlmsg_datalen(hdr) >= (int)sizeof(status)) {
		memcpy(&status, nlmsg_data(hdr), sizeof(status));
		if (status < 0 && !ctx->err) {
			ctx->err = -status;
			if ((hdr->nlmsg_flags & NLM_F_ACK_TLVS) &&
			    nlmsg_datalen(hdr) > (int)NLMSG_ALIGN(sizeof(status)))
				enl_parse_tlvs(ctx->nl, ctx->req,
					       (const char *)nlmsg_data(hdr) +
					       NLMSG_ALIGN(sizeof(status)),
					       nlmsg_datalen(hdr) - NLMSG_ALIGN(sizeof(status)));
		}
	}
	ctx->done = 1;
	return NL_STOP;
}

int enl_request(struct enl *nl, struct nl_msg *msg, enl_reply_cb cb, void *arg)
{
	struct enl_ctx ctx = { .nl = nl, .req = msg, .cb = cb, .arg = arg };
	struct nl_cb *ncb;
	int ret;

	nl->extack[0] = '\0';
	nl->bad_attr = -1;
	nl->miss_attr = -1;

	ncb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!ncb) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	nl_cb_set(ncb, NL_CB_VALID, NL_CB_CUSTOM, enl_valid_cb, &ctx);
	nl_cb_set(ncb, NL_CB_FINISH, NL_CB_CUSTOM, enl_done_cb, &ctx);
	nl_cb_set(ncb, NL_CB_ACK, NL_CB_CUSTOM, enl_done_cb, &ctx);
	nl_cb_err(ncb, NL_CB_CUSTOM, enl_err_cb, &ctx);

	ret = nl_send_auto(nl->sk, msg);
	if (ret < 0) {
		snprintf(nl->extack, sizeof(nl->extack), "libnl: %s", nl_geterror(ret));
		ctx.err = nlerr_to_errno(ret);
		goto out;
	}
	while (!ctx.done) {
		ret = nl_recvmsgs(nl->sk, ncb);
		if (ret < 0 && !ctx.done) {
			if (!nl->extack[0])
				snprintf(nl->extack, sizeof(nl->extack), "libnl: %s",
					 nl_geterror(ret));
			if (!ctx.err)
				ctx.err = nlerr_to_errno(ret);
			break;
		}
	}
out:
	nl_cb_put(ncb);
	nlmsg_free(msg);
	return ctx.err ? -ctx.err : 0;
}
