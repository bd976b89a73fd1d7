// SPDX-License-Identifier: GPL-2.0
/*
 * Allow-list entries: "IP" or "IP/PREFIXLEN", IPv4 or IPv6.
 *
 * The address parser and printer are written out here rather than taken
 * from in4_pton()/inet_pton() so that the module and the userspace build
 * accept and print exactly the same strings; the fuzzer holds them to the
 * C library's inet_pton().  Strict on purpose, like the URL parser: an entry
 * that does not mean exactly one prefix is refused with the reason, never
 * guessed at.  In particular:
 *
 *  - bits set past the prefix length (192.0.2.1/24) are refused, with the
 *    prefix that was probably meant, so that what `show` prints is what was
 *    typed and DEL finds what ADD stored;
 *  - 0.0.0.0/0 (every IPv4 peer) and ::/0 (every IPv6 peer) are accepted,
 *    but the bare unspecified addresses 0.0.0.0 and ::, and multicast or
 *    broadcast addresses, are refused: no peer can have them;
 *  - IPv4-mapped IPv6 entries (::ffff:a.b.c.d) are refused: a peer that
 *    connects with an IPv4-mapped address is matched against the IPv4
 *    entries, so the entry is written as IPv4;
 *  - brackets, zone ids (%eth0), leading zeros in IPv4 and in the prefix
 *    length are refused.
 */
#ifdef ENGRAM_USERSPACE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#else
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/string.h>
#endif

#include "list.h"
#include "prefix.h"

#define pfx_err(err, errlen, ...) snprintf(err, errlen, __VA_ARGS__)

static int engram_prefix_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Dotted quad, exactly four decimal parts of 0-255 without leading zeros. */
static bool engram_prefix_parse_ipv4(const char *s, size_t len, u8 *out)
{
	unsigned int part = 0, v = 0, digits = 0;
	size_t i;

	for (i = 0; i <= len; i++) {
		if (i == len || s[i] == '.') {
			if (!digits || part > 3)
				return false;
			out[part++] = v;
			v = 0;
			digits = 0;
			continue;
		}
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (digits && !v)
			return false;	/* leading zero */
		v = v * 10 + (s[i] - '0');
		if (v > 255)
			return false;
		digits++;
	}
	return part == 4;
}

/*
 * RFC 4291 section 2.2 text: up to eight groups of 1-4 hex digits, at most
 * one "::" standing for one or more zero groups, optionally ending in a
 * dotted quad that takes the place of the last two groups.
 */
static bool engram_prefix_parse_ipv6(const char *s, size_t len, u8 *out)
{
	unsigned int ngroups = 0, gap = 0, i;
	bool have_gap = false;
	u8 tmp[16];
	size_t p = 0;

	if (len >= 2 && s[0] == ':' && s[1] == ':') {
		have_gap = true;
		p = 2;
	} else if (len && s[0] == ':') {
		return false;
	}
	while (p < len) {
		size_t start = p;
		unsigned int v = 0;
		int h;

		while (p < len && p - start < 5 && (h = engram_prefix_hexval(s[p])) >= 0) {
			v = v << 4 | h;
			p++;
		}
		if (p < len && s[p] == '.') {
			/* The dotted quad runs to the end and needs two groups. */
			if (ngroups > 6 || !engram_prefix_parse_ipv4(s + start, len - start,
								     tmp + 2 * ngroups))
				return false;
			ngroups += 2;
			p = len;
			break;
		}
		if (p == start || p - start > 4 || ngroups == 8)
			return false;
		tmp[2 * ngroups] = v >> 8;
		tmp[2 * ngroups + 1] = v & 0xff;
		ngroups++;
		if (p == len)
			break;
		if (s[p] != ':')
			return false;
		p++;
		if (p < len && s[p] == ':') {
			if (have_gap)
				return false;
			have_gap = true;
			gap = ngroups;
			p++;
		} else if (p == len) {
			return false;	/* a single trailing ':' */
		}
	}
	if (have_gap) {
		unsigned int tail = ngroups - gap;

		if (ngroups > 7)
			return false;
		memset(out, 0, 16);
		memcpy(out, tmp, 2 * gap);
		memcpy(out + 16 - 2 * tail, tmp + 2 * gap, 2 * tail);
		return true;
	}
	if (ngroups != 8)
		return false;
	for (i = 0; i < 16; i++)
		out[i] = tmp[i];
	return true;
}

static bool engram_prefix_host_bits(const struct engram_prefix *p)
{
	unsigned int bytes = p->family == AF_INET ? 4 : 16, i;

	for (i = p->len / 8; i < bytes; i++) {
		u8 keep = i == p->len / 8 ? (u8)(0xff00 >> (p->len % 8)) : 0;

		if (p->addr[i] & ~keep)
			return true;
	}
	return false;
}

static void engram_prefix_mask(struct engram_prefix *p)
{
	unsigned int bytes = p->family == AF_INET ? 4 : 16, i;

	for (i = p->len / 8; i < bytes; i++)
		p->addr[i] &= i == p->len / 8 ? (u8)(0xff00 >> (p->len % 8)) : 0;
}

static bool engram_prefix_addr_zero(const u8 *a, unsigned int bytes)
{
	unsigned int i;

	for (i = 0; i < bytes; i++)
		if (a[i])
			return false;
	return true;
}

static const u8 engram_v4mapped[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
};

/**
 * engram_prefix_parse() - parse one allow-list entry
 * @s: "IP" or "IP/PREFIXLEN", not necessarily NUL-terminated
 * @len: its length
 * @p: result, fully initialised on success
 * @err: buffer for a human-readable reason on failure
 * @errlen: size of @err
 *
 * A bare IP is a host entry (/32 or /128).  See the top of this file for
 * what is refused and why.
 *
 * Return: 0, or -EINVAL with @err set.
 */
int engram_prefix_parse(const char *s, size_t len, struct engram_prefix *p,
			char *err, size_t errlen)
{
	char text[ENGRAM_PREFIX_IN_MAX + 1];
	const char *slash;
	size_t alen;
	unsigned int max, v = 0, i;
	bool v6;

	memset(p, 0, sizeof(*p));
	if (!len) {
		pfx_err(err, errlen, "empty address");
		return -EINVAL;
	}
	if (len > ENGRAM_PREFIX_IN_MAX) {
		pfx_err(err, errlen, "longer than %d bytes", ENGRAM_PREFIX_IN_MAX);
		return -EINVAL;
	}
	memcpy(text, s, len);
	text[len] = '\0';
	if (strlen(text) != len) {
		pfx_err(err, errlen, "contains a NUL byte");
		return -EINVAL;
	}
	if (text[0] == '[') {
		pfx_err(err, errlen, "'%s': write IPv6 addresses without brackets", text);
		return -EINVAL;
	}
	if (memchr(text, '%', len)) {
		pfx_err(err, errlen, "'%s': scoped IPv6 addresses are not supported", text);
		return -EINVAL;
	}
	slash = memchr(text, '/', len);
	alen = slash ? (size_t)(slash - text) : len;
	v6 = !!memchr(text, ':', alen);
	max = v6 ? 128 : 32;
	p->family = v6 ? AF_INET6 : AF_INET;
	if (!(v6 ? engram_prefix_parse_ipv6(text, alen, p->addr) :
		   engram_prefix_parse_ipv4(text, alen, p->addr))) {
		pfx_err(err, errlen, "'%.*s' is not an IPv%c address", (int)alen, text,
			v6 ? '6' : '4');
		return -EINVAL;
	}
	if (slash) {
		const char *l = slash + 1;
		size_t llen = len - alen - 1;

		if (!llen) {
			pfx_err(err, errlen, "'%s': missing prefix length after '/'", text);
			return -EINVAL;
		}
		for (i = 0; i < llen; i++) {
			if (l[i] < '0' || l[i] > '9' || i >= 3 || (i && l[0] == '0')) {
				pfx_err(err, errlen,
					"'%s': prefix length '%s' is not a decimal number 0-%u",
					text, l, max);
				return -EINVAL;
			}
			v = v * 10 + (l[i] - '0');
		}
		if (v > max) {
			pfx_err(err, errlen, "'%s': prefix length %u is out of range 0-%u",
				text, v, max);
			return -EINVAL;
		}
		p->len = v;
	} else {
		p->len = max;
	}
	if (engram_prefix_host_bits(p)) {
		struct engram_prefix m = *p;
		char want[ENGRAM_PREFIX_TEXT_MAX];

		engram_prefix_mask(&m);
		engram_prefix_format(&m, want, sizeof(want));
		pfx_err(err, errlen,
			"'%s' has address bits set past the prefix length: did you mean %s?",
			text, want);
		return -EINVAL;
	}
	if (p->len == max && engram_prefix_addr_zero(p->addr, max / 8)) {
		pfx_err(err, errlen,
			"'%s' is the unspecified address and matches no peer (every IPv%c peer is %s)",
			text, v6 ? '6' : '4', v6 ? "::/0" : "0.0.0.0/0");
		return -EINVAL;
	}
	if (v6 && p->len >= 96 && !memcmp(p->addr, engram_v4mapped, 12)) {
		pfx_err(err, errlen,
			"'%s' is IPv4-mapped: write it as IPv4 (IPv4-mapped peers match IPv4 entries)",
			text);
		return -EINVAL;
	}
	if ((!v6 && p->len >= 4 && (p->addr[0] & 0xf0) == 0xe0) ||
	    (!v6 && p->len == 32 && p->addr[0] == 255 && p->addr[1] == 255 &&
	     p->addr[2] == 255 && p->addr[3] == 255) ||
	    (v6 && p->len >= 8 && p->addr[0] == 0xff)) {
		pfx_err(err, errlen, "'%s' is multicast or broadcast and matches no peer", text);
		return -EINVAL;
	}
	return 0;
}

/**
 * engram_prefix_format() - canonical text of an entry
 * @p: a parsed entry
 * @buf: output, NUL-terminated
 * @size: size of @buf; ENGRAM_PREFIX_TEXT_MAX always suffices
 *
 * IPv4 as a dotted quad, IPv6 as RFC 5952 recommends (lower case, no
 * leading zeros, the longest run of two or more zero groups as "::", never
 * a dotted tail); "/LEN" only when it is not a host entry.
 *
 * Return: the length written, as snprintf() (the text is cut to fit).
 */
int engram_prefix_format(const struct engram_prefix *p, char *buf, size_t size)
{
	char t[ENGRAM_PREFIX_TEXT_MAX];
	unsigned int n = 0, max = 32, i;

	if (p->family == AF_INET) {
		n = snprintf(t, sizeof(t), "%u.%u.%u.%u", p->addr[0], p->addr[1],
			     p->addr[2], p->addr[3]);
	} else {
		unsigned int g[8], best = 8, best_len = 1, run, j;

		max = 128;
		for (i = 0; i < 8; i++)
			g[i] = p->addr[2 * i] << 8 | p->addr[2 * i + 1];
		for (i = 0; i < 8; i += run ? run : 1) {
			for (run = 0; i + run < 8 && !g[i + run]; run++)
				;
			if (run > best_len) {
				best = i;
				best_len = run;
			}
		}
		for (i = 0; i < 8; i++) {
			if (i == best) {
				n += snprintf(t + n, sizeof(t) - n, "::");
				i += best_len - 1;
				continue;
			}
			j = i && i != best + best_len;
			n += snprintf(t + n, sizeof(t) - n, "%s%x", j ? ":" : "", g[i]);
		}
	}
	if (p->len != max)
		n += snprintf(t + n, sizeof(t) - n, "/%u", p->len);
	return snprintf(buf, size, "%s", t);
}

/**
 * engram_prefix_equal() - same entry?
 * @a: one entry
 * @b: the other
 *
 * Return: true for the same family, length and address.
 */
bool engram_prefix_equal(const struct engram_prefix *a,
			 const struct engram_prefix *b)
{
	return a->family == b->family && a->len == b->len &&
	       !memcmp(a->addr, b->addr, sizeof(a->addr));
}

/**
 * engram_prefix_match() - is a peer address inside an entry?
 * @p: the entry
 * @peer: the peer's address, AF_INET or AF_INET6 (port ignored)
 *
 * An IPv6 peer with an IPv4-mapped address (::ffff:a.b.c.d, as a dual-stack
 * socket reports an IPv4 client) is matched as the IPv4 address, against
 * IPv4 entries only.
 *
 * Return: true when the first @p->len bits of the peer's address are @p's.
 */
bool engram_prefix_match(const struct engram_prefix *p,
			 const struct sockaddr *peer)
{
	const u8 *a;
	unsigned int full, rest;
	int family;

	if (!peer)
		return false;
	if (peer->sa_family == AF_INET) {
		family = AF_INET;
		a = (const u8 *)&((const struct sockaddr_in *)peer)->sin_addr;
	} else if (peer->sa_family == AF_INET6) {
		a = (const u8 *)&((const struct sockaddr_in6 *)peer)->sin6_addr;
		family = AF_INET6;
		if (!memcmp(a, engram_v4mapped, 12)) {
			family = AF_INET;
			a += 12;
		}
	} else {
		return false;
	}
	if (family != p->family)
		return false;
	full = p->len / 8;
	rest = p->len % 8;
	if (memcmp(a, p->addr, full))
		return false;
	return !rest || !((a[full] ^ p->addr[full]) & (u8)(0xff00 >> rest));
}

static int engram_prefix_parse_entry(const void *ctx, const char *s, size_t len,
				     void *item, char *why, size_t whylen)
{
	(void)ctx;
	return engram_prefix_parse(s, len, item, why, whylen);
}

static bool engram_prefix_equal_entry(const void *a, const void *b)
{
	return engram_prefix_equal(a, b);
}

/*
 * The parser's reasons quote the entry themselves, all but "longer than N
 * bytes", where the position says enough.
 */
static const struct engram_list_ops engram_prefix_list_ops = {
	.size	= sizeof(struct engram_prefix),
	.parse	= engram_prefix_parse_entry,
	.equal	= engram_prefix_equal_entry,
};

/**
 * engram_prefix_list_parse() - parse a comma-separated list of entries
 * @s: NUL-terminated list; NULL or "" is an empty list
 * @out: array for the results
 * @max: its capacity
 * @count: entries parsed, on success
 * @err: reason on failure, naming the entry
 * @errlen: size of @err
 *
 * Return: 0, or -EINVAL for a malformed, duplicate or excess entry.
 */
int engram_prefix_list_parse(const char *s, struct engram_prefix *out,
			     unsigned int max, unsigned int *count,
			     char *err, size_t errlen)
{
	return engram_list_parse(s, &engram_prefix_list_ops, NULL, out, max, count,
				 err, errlen);
}
