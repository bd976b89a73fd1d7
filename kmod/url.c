// SPDX-License-Identifier: GPL-2.0
/*
 * listen= and remote= URL parsing.
 *
 *   listen: rdma://IP[:PORT]        tcp://IP[:PORT]
 *   remote: rdma://SERVER[:PORT]@LOCAL   tcp://SERVER[:PORT]@LOCAL
 *
 * IPv6 addresses are written in brackets ([2001:db8::1]:18515); after '@'
 * the brackets are optional because no port follows.  The parser is strict
 * on purpose: a typo in a module parameter must fail the load with a message
 * that names the entry, not bind somewhere unexpected.  Wildcard addresses
 * are refused because the server must only ever answer on the fabric it was
 * pointed at.
 */
#ifdef ENGRAM_USERSPACE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#else
#include <linux/errno.h>
#include <linux/inet.h>
#include <linux/kernel.h>
#include <linux/string.h>
#endif

#include <linux/engram_rdma.h>
#include "list.h"
#include "url.h"

#define ENGRAM_HOST_MAX	64

#ifdef ENGRAM_USERSPACE
static bool engram_url_pton(int family, const char *s, void *dst)
{
	return inet_pton(family, s, dst) == 1;
}
#else
static bool engram_url_pton(int family, const char *s, void *dst)
{
	const char *end;
	int ok;

	if (family == AF_INET)
		ok = in4_pton(s, -1, dst, -1, &end);
	else
		ok = in6_pton(s, -1, dst, -1, &end);
	return ok && *end == '\0';
}
#endif

#define url_err(err, errlen, ...) snprintf(err, errlen, __VA_ARGS__)

/*
 * in4_pton() and inet_pton() disagree on leading zeros ("010.1.1.1"), which
 * some tools read as octal.  Refuse them so the kernel and the userspace
 * build accept exactly the same strings.
 */
static bool engram_url_ipv4_canonical(const char *s)
{
	bool start = true;

	for (; *s; s++) {
		if (*s == '.') {
			start = true;
			continue;
		}
		if (*s < '0' || *s > '9')
			return false;
		if (start && *s == '0' && s[1] >= '0' && s[1] <= '9')
			return false;
		start = false;
	}
	return true;
}

static bool engram_url_addr_is_wildcard(const struct sockaddr_storage *ss)
{
	static const u8 zero[16];

	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == 0;
	return !memcmp(&((const struct sockaddr_in6 *)ss)->sin6_addr, zero, 16);
}

static bool engram_url_addr_is_multicast(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const u8 *a = (const u8 *)&((const struct sockaddr_in *)ss)->sin_addr;

		return (a[0] & 0xf0) == 0xe0 ||
		       (a[0] == 255 && a[1] == 255 && a[2] == 255 && a[3] == 255);
	}
	return ((const u8 *)&((const struct sockaddr_in6 *)ss)->sin6_addr)[0] == 0xff;
}

/* Parse one address, bracketed or not, into @ss with @port. */
static int engram_url_parse_addr(const char *s, size_t len, bool bracketed, u16 port,
				 struct sockaddr_storage *ss, const char *what,
			     char *err, size_t errlen)
{
	char host[ENGRAM_HOST_MAX];

	memset(ss, 0, sizeof(*ss));
	if (!len) {
		url_err(err, errlen, "missing %s address", what);
		return -EINVAL;
	}
	if (len >= sizeof(host)) {
		url_err(err, errlen, "%s address too long", what);
		return -EINVAL;
	}
	memcpy(host, s, len);
	host[len] = '\0';

	if (!bracketed && memchr(host, ':', len)) {
		url_err(err, errlen, "IPv6 %s address '%s' must be written in brackets",
			what, host);
		return -EINVAL;
	}
	if (bracketed) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		if (memchr(host, '%', len)) {
			url_err(err, errlen, "scoped IPv6 %s address '%s' is not supported",
				what, host);
			return -EINVAL;
		}
		if (!engram_url_pton(AF_INET6, host, &sin6->sin6_addr)) {
			url_err(err, errlen, "malformed IPv6 %s address '%s'", what, host);
			return -EINVAL;
		}
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		if (!engram_url_ipv4_canonical(host) ||
		    !engram_url_pton(AF_INET, host, &sin->sin_addr)) {
			url_err(err, errlen, "malformed IPv4 %s address '%s'", what, host);
			return -EINVAL;
		}
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
	}
	if (engram_url_addr_is_wildcard(ss)) {
		url_err(err, errlen,
			"wildcard %s address '%s' is not allowed: name a specific address",
			what, host);
		return -EINVAL;
	}
	if (engram_url_addr_is_multicast(ss)) {
		url_err(err, errlen, "%s address '%s' is multicast or broadcast", what, host);
		return -EINVAL;
	}
	return 0;
}

/*
 * Split "host" or "[v6]" off the front of @s; returns the length consumed, or
 * a negative errno.
 */
static int engram_url_split_host(const char *s, size_t len, const char **host,
				 size_t *hostlen, bool *bracketed, char *err, size_t errlen)
{
	size_t i;

	if (len && s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (!close) {
			url_err(err, errlen, "missing ']' after IPv6 address");
			return -EINVAL;
		}
		*host = s + 1;
		*hostlen = close - s - 1;
		*bracketed = true;
		return close - s + 1;
	}
	for (i = 0; i < len && s[i] != ':' && s[i] != '@'; i++)
		;
	/* A second ':' before any '@' means an unbracketed IPv6 address. */
	if (i < len && s[i] == ':') {
		const char *at = memchr(s, '@', len);
		size_t stop = at ? (size_t)(at - s) : len;

		if (memchr(s + i + 1, ':', stop - i - 1))
			i = stop;
	}
	*host = s;
	*hostlen = i;
	*bracketed = false;
	return i;
}

static int engram_url_parse_port(const char *s, size_t len, u16 *port, char *err,
				 size_t errlen)
{
	unsigned long v = 0;
	size_t i;

	if (!len) {
		url_err(err, errlen, "empty port after ':'");
		return -EINVAL;
	}
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			url_err(err, errlen, "port '%.*s' is not a decimal number",
				(int)len, s);
			return -EINVAL;
		}
		v = v * 10 + (s[i] - '0');
		if (v > 65535)
			break;
	}
	if (v == 0 || v > 65535) {
		url_err(err, errlen, "port %.*s out of range 1-65535", (int)len, s);
		return -EINVAL;
	}
	*port = v;
	return 0;
}

/**
 * engram_url_parse() - parse one listen or remote URL
 * @s: the URL, not necessarily NUL-terminated
 * @len: its length
 * @role: ENGRAM_URL_LISTEN or ENGRAM_URL_REMOTE
 * @url: result, fully initialised on success
 * @err: buffer for a human-readable reason on failure
 * @errlen: size of @err
 *
 * Return: 0, or -EINVAL with @err set.
 */
int engram_url_parse(const char *s, size_t len, enum engram_url_role role,
		     struct engram_url *url, char *err, size_t errlen)
{
	const char *p, *end = s + len, *host, *at;
	size_t hostlen;
	bool bracketed;
	u16 port = ENGRAM_DEFAULT_PORT;
	int n, ret;

	memset(url, 0, sizeof(*url));
	if (len >= sizeof(url->text)) {
		url_err(err, errlen, "URL longer than %d bytes",
			ENGRAM_URL_TEXT_MAX - 1);
		return -EINVAL;
	}
	memcpy(url->text, s, len);
	url->role = role;

	if (len >= 7 && !memcmp(s, "rdma://", 7)) {
		url->transport = ENGRAM_TRANSPORT_RDMA;
		p = s + 7;
	} else if (len >= 6 && !memcmp(s, "tcp://", 6)) {
		url->transport = ENGRAM_TRANSPORT_TCP;
		p = s + 6;
	} else {
		url_err(err, errlen, "'%s' must start with rdma:// or tcp://", url->text);
		return -EINVAL;
	}

	n = engram_url_split_host(p, end - p, &host, &hostlen, &bracketed, err, errlen);
	if (n < 0)
		return n;
	p += n;
	if (p < end && *p == ':') {
		const char *q = p + 1;

		at = memchr(q, '@', end - q);
		ret = engram_url_parse_port(q, (at ? at : end) - q, &port, err, errlen);
		if (ret)
			return ret;
		p = at ? at : end;
	}
	url->port = port;
	ret = engram_url_parse_addr(host, hostlen, bracketed, port, &url->addr,
				    role == ENGRAM_URL_LISTEN ? "listen" : "server",
				err, errlen);
	if (ret)
		return ret;

	if (p < end && *p != '@') {
		url_err(err, errlen, "unexpected '%.*s' after the address",
			(int)(end - p), p);
		return -EINVAL;
	}
	if (role == ENGRAM_URL_LISTEN) {
		if (p < end) {
			url_err(err, errlen,
				"a listen URL takes no '@LOCAL' part (that is for remote=)");
			return -EINVAL;
		}
		return 0;
	}

	if (p == end) {
		url_err(err, errlen,
			"a remote URL needs the local address: SERVER:PORT@LOCAL_IP");
		return -EINVAL;
	}
	p++;
	if (p < end && *p == '[') {
		const char *close = memchr(p, ']', end - p);

		if (!close || close + 1 != end) {
			url_err(err, errlen, "malformed bracketed local address");
			return -EINVAL;
		}
		ret = engram_url_parse_addr(p + 1, close - p - 1, true, 0, &url->local,
					    "local", err, errlen);
	} else {
		bracketed = !!memchr(p, ':', end - p);
		ret = engram_url_parse_addr(p, end - p, bracketed, 0, &url->local,
					    "local", err, errlen);
	}
	if (ret)
		return ret;
	if (url->local.ss_family != url->addr.ss_family) {
		url_err(err, errlen, "server and local addresses are of different families");
		return -EINVAL;
	}
	return 0;
}

static bool engram_url_sockaddr_equal(const struct sockaddr_storage *a,
				      const struct sockaddr_storage *b, bool port)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return (!port || x->sin_port == y->sin_port) &&
		       x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return (!port || x->sin6_port == y->sin6_port) &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
	}
	return true;
}

/**
 * engram_url_same_host() - do two URLs reach the same host?
 * @a: one URL
 * @b: the other
 *
 * Whatever their transports and ports: "rdma://192.0.2.1" and
 * "tcp://192.0.2.1:18516" reach one host, which then serves both alike.
 *
 * Return: true when the remote addresses match.
 */
bool engram_url_same_host(const struct engram_url *a, const struct engram_url *b)
{
	return engram_url_sockaddr_equal(&a->addr, &b->addr, false);
}

/**
 * engram_url_equal() - do two URLs name the same endpoint?
 * @a: one URL
 * @b: the other
 *
 * Compares the parsed form, so "rdma://192.0.2.1" and "rdma://192.0.2.1:18515"
 * are equal.
 *
 * Return: true when transport, role and addresses all match.
 */
bool engram_url_equal(const struct engram_url *a, const struct engram_url *b)
{
	return a->transport == b->transport && a->role == b->role &&
	       engram_url_sockaddr_equal(&a->addr, &b->addr, true) &&
	       engram_url_sockaddr_equal(&a->local, &b->local, true);
}

static int engram_url_parse_entry(const void *ctx, const char *s, size_t len,
				  void *item, char *why, size_t whylen)
{
	return engram_url_parse(s, len, *(const enum engram_url_role *)ctx, item,
				why, whylen);
}

static bool engram_url_equal_entry(const void *a, const void *b)
{
	return engram_url_equal(a, b);
}

/*
 * The parser's reasons seldom quote the URL, and two different texts can be
 * the same URL (a default port left out of one), so every message quotes.
 */
static const struct engram_list_ops engram_url_list_ops = {
	.size		= sizeof(struct engram_url),
	.parse		= engram_url_parse_entry,
	.equal		= engram_url_equal_entry,
	.quote_refused	= true,
	.quote_first	= true,
};

/**
 * engram_url_list_parse() - parse a comma-separated list of URLs
 * @s: NUL-terminated list; NULL or "" is an empty list
 * @role: ENGRAM_URL_LISTEN or ENGRAM_URL_REMOTE
 * @urls: array for the results
 * @max: its capacity
 * @count: number of URLs parsed, on success
 * @err: reason on failure, naming the entry
 * @errlen: size of @err
 *
 * Return: 0, or -EINVAL for a malformed, duplicate or excess entry.
 */
int engram_url_list_parse(const char *s, enum engram_url_role role,
			  struct engram_url *urls, unsigned int max,
			  unsigned int *count, char *err, size_t errlen)
{
	return engram_list_parse(s, &engram_url_list_ops, &role, urls, max, count,
				 err, errlen);
}
