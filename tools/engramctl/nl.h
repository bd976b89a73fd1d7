/* SPDX-License-Identifier: GPL-2.0 */
/* The engram_rdma generic netlink family over libnl-3, with extended acks. */
#ifndef ENGRAMCTL_NL_H
#define ENGRAMCTL_NL_H

#include <errno.h>
#include <stddef.h>
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

/*
 * enl_request() of @cmd carrying the one attribute @attr, a string or a u32;
 * -ENOMEM when the request cannot be built.  These and enl_grow() live in
 * attrs.c, over enl_msg() and enl_request(), so the unit tests' stand-in
 * transport runs them too.
 */
int enl_request_str(struct enl *nl, uint8_t cmd, int attr, const char *s,
		    enl_reply_cb cb, void *arg);
int enl_request_u32(struct enl *nl, uint8_t cmd, int attr, uint32_t v,
		    enl_reply_cb cb, void *arg);
/* enl_request() of a dump of @cmd: @cb gets every object. */
int enl_dump(struct enl *nl, uint8_t cmd, enl_reply_cb cb, void *arg);

/*
 * For reply callbacks that collect objects into an array: @v with room for
 * element @n, grown (doubling its capacity @*cap, in elements of @size
 * bytes) when full.  NULL when out of memory; @v and @*cap are then kept.
 */
void *enl_grow(void *v, size_t *cap, size_t n, size_t size);

/* Was @err the kernel refusing the value of @attr itself, not the request? */
static inline int enl_refused_attr(const struct enl *nl, int err, int attr)
{
	return err == -EINVAL && nl->bad_attr == attr;
}

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
