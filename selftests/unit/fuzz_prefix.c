// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for kmod/prefix.c, the allow-list entry parser and
 * matcher.  Besides not crashing (ASan, UBSan):
 *  - its address parser agrees with the C library's inet_pton() on every
 *    input (the module cannot use inet_pton(), so this is the reference);
 *  - an accepted entry prints as text that parses back to the same entry
 *    and, for IPv6, as inet_ntop() prints it (where that is not dotted);
 *  - an entry matches its own address, an address differing past the
 *    prefix length, and the IPv4-mapped form of an IPv4 entry, but not an
 *    address differing inside the prefix;
 *  - the list parser never reports more entries than it was given room for.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefix.h"

#define CHECK(c)	do { if (!(c)) abort(); } while (0)

static int match_bytes(const struct engram_prefix *p, const u8 *addr, int family)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, addr, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, addr, 16);
	}
	return engram_prefix_match(p, (const struct sockaddr *)&ss);
}

static void check_entry(const struct engram_prefix *p)
{
	unsigned int bytes = p->family == AF_INET ? 4 : 16, max = bytes * 8;
	char text[ENGRAM_PREFIX_TEXT_MAX], ref[INET6_ADDRSTRLEN];
	struct engram_prefix q;
	char err[256];
	u8 a[16], m[16];
	int n;

	CHECK(p->family == AF_INET || p->family == AF_INET6);
	CHECK(p->len <= max);
	n = engram_prefix_format(p, text, sizeof(text));
	CHECK(n > 0 && n < ENGRAM_PREFIX_TEXT_MAX && (size_t)n == strlen(text));
	CHECK(!engram_prefix_parse(text, n, &q, err, sizeof(err)));
	CHECK(engram_prefix_equal(p, &q));
	CHECK(inet_ntop(p->family, p->addr, ref, sizeof(ref)));
	if (!strchr(ref, '.'))
		CHECK(!strncmp(text, ref, strlen(ref)) &&
		      (text[strlen(ref)] == '\0' || text[strlen(ref)] == '/'));

	memcpy(a, p->addr, bytes);
	CHECK(match_bytes(p, a, p->family));
	if (p->len < max) {
		a[max / 8 - 1] ^= 1;	/* the last bit, past the prefix */
		CHECK(match_bytes(p, a, p->family));
		memcpy(a, p->addr, bytes);
	}
	if (p->len) {
		unsigned int bit = p->len - 1;

		a[bit / 8] ^= 0x80 >> (bit % 8);
		CHECK(!match_bytes(p, a, p->family));
		memcpy(a, p->addr, bytes);
	}
	if (p->family == AF_INET) {
		memset(m, 0, 10);
		m[10] = m[11] = 0xff;
		memcpy(m + 12, p->addr, 4);
		CHECK(match_bytes(p, m, AF_INET6));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct engram_prefix p, list[4];
	char s[128], addr[128], want[160], err[256] = "";
	unsigned int count = 99;
	const char *slash;
	u8 ref[16];
	int ret, family, ok;

	ret = engram_prefix_parse((const char *)d, n, &p, err, sizeof(err));
	CHECK(ret == 0 || ret == -EINVAL);
	if (ret)
		CHECK(err[0]);
	else
		check_entry(&p);

	if (n >= 1 && n < sizeof(s) && !memchr(d, '\0', n)) {
		memcpy(s, d, n);
		s[n] = '\0';
		/* The address part must be read exactly as inet_pton() reads it. */
		if (n <= 63 && s[0] != '[' && !strchr(s, '%')) {
			slash = strchr(s, '/');
			snprintf(addr, sizeof(addr), "%.*s", (int)(slash ? slash - s : (long)n), s);
			family = strchr(addr, ':') ? AF_INET6 : AF_INET;
			ok = inet_pton(family, addr, ref) == 1;
			snprintf(want, sizeof(want), "'%s' is not an IPv", addr);
			CHECK(ok == !(ret && !strncmp(err, want, strlen(want))));
			if (!ret)
				CHECK(!memcmp(ref, p.addr, family == AF_INET ? 4 : 16));
		}
		ret = engram_prefix_list_parse(s, list, 4, &count, err, sizeof(err));
		CHECK(ret == 0 || ret == -EINVAL);
		CHECK(ret ? count == 0 : count <= 4);
	}
	return 0;
}
