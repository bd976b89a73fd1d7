/* SPDX-License-Identifier: GPL-2.0 */
/* The engram_rdma generic netlink family over libnl-3, with extended acks. */
#ifndef ENGRAMCTL_NL_H
#define ENGRAMCTL_NL_H

#include <stdint.h>
#include <netlink/genl/genl.h>
#include <linux/engram_rdma.h>

struct enl {
	struct nl_sock *sk;
	int family;
	/* About the last failed request: kernel extack, or libnl's own reason. */
	char extack[512];
	int bad_attr;		/* attribute the kernel pointed at, or -1 */
	int miss_attr;		/* attribute the kernel found missing, or -1 */
};

/* Called for every reply message; a negative errno fails the request. */
typedef int (*enl_reply_cb)(struct nl_msg *msg, void *arg);

/* 0, -ENOENT when the family is not registered (module not loaded), -errno. */
int enl_open(struct enl *nl);
void enl_close(struct enl *nl);

/* A request for @cmd; @flags is 0 or NLM_F_DUMP.  NULL when out of memory. */
struct nl_msg *enl_msg(struct enl *nl, uint8_t cmd, int flags);
/* Sends @msg (always freed), hands replies to @cb, waits for ack or done. */
int enl_request(struct enl *nl, struct nl_msg *msg, enl_reply_cb cb, void *arg);

/* Parses a reply's attributes into @tb[ENGRAM_A_MAX + 1]. */
int enl_parse(struct nl_msg *msg, struct nlattr **tb);

/* "engramctl: <what>: <strerror>[ (needs CAP_NET_ADMIN)][: <extack>]" on stderr. */
void enl_perror(const struct enl *nl, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

const char *engram_attr_name(int type);

/*
 * Fills @nl's extack fields from the TLVs of the NLMSG_ERROR message @hdr
 * answering request @req.  Internal; exported for the unit tests.
 */
void enl_ack_tlvs(struct enl *nl, struct nl_msg *req, const struct nlmsghdr *hdr);

#endif /* ENGRAMCTL_NL_H */
