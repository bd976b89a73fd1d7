/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Allow-list entries: an IPv4 or IPv6 address prefix, parsed from and
 * printed as "IP" or "IP/PREFIXLEN".  Pure logic with no kernel state, so
 * the same file builds in userspace (ENGRAM_USERSPACE) where it is
 * unit-tested and fuzzed against the C library's inet_pton()/inet_ntop().
 */
#ifndef _ENGRAM_PREFIX_H
#define _ENGRAM_PREFIX_H

#include "userspace.h"

/* Entries on the allow-list at most. */
#define ENGRAM_ALLOW_MAX		64
/* Longest entry text taken (an IPv6 address with leading zeros and a dotted tail). */
#define ENGRAM_PREFIX_IN_MAX		63
/* "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128" and its NUL fit. */
#define ENGRAM_PREFIX_TEXT_MAX		48

/**
 * struct engram_prefix - one allow-list entry
 * @family: AF_INET or AF_INET6
 * @len: prefix length in bits, 0..32 or 0..128
 * @addr: the address in network byte order (IPv4 in the first 4 bytes);
 *	bits past @len are always zero
 */
struct engram_prefix {
	u8 family;
	u8 len;
	u8 addr[16];
};

int engram_prefix_parse(const char *s, size_t len, struct engram_prefix *p,
			char *err, size_t errlen);
int engram_prefix_list_parse(const char *s, struct engram_prefix *out,
			     unsigned int max, unsigned int *count,
			     char *err, size_t errlen);
int engram_prefix_format(const struct engram_prefix *p, char *buf, size_t size);
bool engram_prefix_equal(const struct engram_prefix *a,
			 const struct engram_prefix *b);
bool engram_prefix_match(const struct engram_prefix *p,
			 const struct sockaddr *peer);

#endif /* _ENGRAM_PREFIX_H */
