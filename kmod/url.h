/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Parsing of the listen= and remote= URL lists.  Pure logic with no kernel
 * state, so the same file builds in userspace (ENGRAM_USERSPACE) where it is
 * unit-tested and fuzzed.
 */
#ifndef _ENGRAM_URL_H
#define _ENGRAM_URL_H

#include "userspace.h"
#include <linux/engram_rdma.h>	/* enum engram_transport */

/* Entries per list; a host serves from, or a node reaches, a few ports. */
#define ENGRAM_URL_MAX		16
/* Longest URL kept for messages: rdma://[v6]:port@[v6] fits easily. */
#define ENGRAM_URL_TEXT_MAX	128

/* A listen URL names one local address; a remote URL a server and a local address. */
enum engram_url_role {
	ENGRAM_URL_LISTEN = 1,
	ENGRAM_URL_REMOTE,
};

/**
 * struct engram_url - one parsed URL
 * @transport: enum engram_transport
 * @role: enum engram_url_role it was parsed for
 * @port: port in host byte order (also set in @addr)
 * @addr: listen address, or the server's address for a remote URL
 * @local: local address a remote URL binds to (port 0); unused for listen
 * @text: the URL as given, NUL-terminated, for log lines
 */
struct engram_url {
	u8 transport;
	u8 role;
	u16 port;
	struct sockaddr_storage addr;
	struct sockaddr_storage local;
	char text[ENGRAM_URL_TEXT_MAX];
};

int engram_url_parse(const char *s, size_t len, enum engram_url_role role,
		     struct engram_url *url, char *err, size_t errlen);
int engram_url_list_parse(const char *s, enum engram_url_role role,
			  struct engram_url *urls, unsigned int max,
			  unsigned int *count, char *err, size_t errlen);
bool engram_url_equal(const struct engram_url *a, const struct engram_url *b);
bool engram_url_same_host(const struct engram_url *a, const struct engram_url *b);

#endif /* _ENGRAM_URL_H */
