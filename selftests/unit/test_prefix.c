// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for kmod/prefix.c (allow-list entries), built in userspace.
 * The same file runs in the module, so what passes here is what allow= and
 * `engramctl listen allow add` accept, and what the server matches.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "prefix.h"
#include "tap.h"

/* @s is accepted and printed back as @canon. */
static void expect_ok(const char *s, const char *canon)
{
	struct engram_prefix p, q;
	char err[256] = "", text[ENGRAM_PREFIX_TEXT_MAX];
	int ret;

	ret = engram_prefix_parse(s, strlen(s), &p, err, sizeof(err));
	if (!tap_ok(!ret, "accepts '%s'", s)) {
		tap_diag("refused: %s", err);
		return;
	}
	engram_prefix_format(&p, text, sizeof(text));
	if (!tap_ok(!strcmp(text, canon), "'%s' prints as '%s'", s, canon))
		tap_diag("printed '%s'", text);
	ret = engram_prefix_parse(text, strlen(text), &q, err, sizeof(err));
	tap_ok(!ret && engram_prefix_equal(&p, &q), "'%s' parses back to the same entry", text);
}

/* @s is refused with a reason that contains @why. */
static void expect_bad(const char *s, size_t len, const char *why)
{
	struct engram_prefix p;
	char err[256] = "", what[200];
	int ret;

	ret = engram_prefix_parse(s, len, &p, err, sizeof(err));
	snprintf(what, sizeof(what), "refuses '%.*s': %s", (int)(len > 80 ? 80 : len), s, why);
	if (!tap_ok(ret == -EINVAL, "%s (EINVAL)", what)) {
		tap_diag("returned %d", ret);
		return;
	}
	tap_contains(err, why, "  ... and says why");
}

static void bad(const char *s, const char *why)
{
	expect_bad(s, strlen(s), why);
}

static void test_parse(void)
{
	char big[200];

	expect_ok("192.0.2.1", "192.0.2.1");
	expect_ok("192.0.2.1/32", "192.0.2.1");
	expect_ok("192.0.2.0/24", "192.0.2.0/24");
	expect_ok("192.0.2.128/25", "192.0.2.128/25");
	expect_ok("10.0.0.0/8", "10.0.0.0/8");
	expect_ok("0.0.0.0/0", "0.0.0.0/0");
	expect_ok("0.0.0.0/8", "0.0.0.0/8");
	expect_ok("255.255.255.254", "255.255.255.254");
	expect_ok("2001:db8::1", "2001:db8::1");
	expect_ok("2001:DB8:0:0:0:0:0:1", "2001:db8::1");
	expect_ok("2001:0db8:0000:0000:0000:0000:0000:0001/128", "2001:db8::1");
	expect_ok("2001:db8::/32", "2001:db8::/32");
	expect_ok("::/0", "::/0");
	expect_ok("::1", "::1");
	expect_ok("::/96", "::/96");
	expect_ok("fe80::/10", "fe80::/10");
	expect_ok("1::", "1::");
	expect_ok("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8");
	/* RFC 5952: one zero group is not "::"; the first of equal runs is. */
	expect_ok("::1:2:3:4:5:6:7", "0:1:2:3:4:5:6:7");
	expect_ok("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0");
	expect_ok("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1");
	expect_ok("2001:0:0:1:0:0:0:1", "2001:0:0:1::1");
	/* A dotted tail is read, but never printed. */
	expect_ok("64:ff9b::192.0.2.1", "64:ff9b::c000:201");
	expect_ok("::192.0.2.1", "::c000:201");
	expect_ok("1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:102:304");

	bad("", "empty");
	bad("abc", "is not an IPv4 address");
	bad("abc::g", "is not an IPv6 address");
	bad("1.2.3", "is not an IPv4 address");
	bad("1.2.3.4.5", "is not an IPv4 address");
	bad("256.1.1.1", "is not an IPv4 address");
	bad("010.0.0.1", "is not an IPv4 address");
	bad("1.2.3.4 ", "is not an IPv4 address");
	bad(" 1.2.3.4", "is not an IPv4 address");
	bad("1..2.3", "is not an IPv4 address");
	bad("1:2:3:4:5:6:7:8:9", "is not an IPv6 address");
	bad("1:2:3:4:5:6:7:8::", "is not an IPv6 address");
	bad("1::2::3", "is not an IPv6 address");
	bad(":1::", "is not an IPv6 address");
	bad("1:::", "is not an IPv6 address");
	bad(":::", "is not an IPv6 address");
	bad("1:2:3:4:5:6:7:", "is not an IPv6 address");
	bad("12345::", "is not an IPv6 address");
	bad("::1.2.3.4:5", "is not an IPv6 address");
	bad("::1.2.3", "is not an IPv6 address");
	bad("1:2:3:4:5:6:7:1.2.3.4", "is not an IPv6 address");
	bad("::01.2.3.4", "is not an IPv6 address");
	bad("[2001:db8::1]", "without brackets");
	bad("[2001:db8::1]/64", "without brackets");
	bad("fe80::1%eth0", "scoped");
	bad("192.0.2.0/", "missing prefix length");
	bad("192.0.2.0/33", "out of range 0-32");
	bad("2001:db8::/129", "out of range 0-128");
	bad("192.0.2.0/024", "not a decimal number");
	bad("192.0.2.0/-1", "not a decimal number");
	bad("192.0.2.0/+8", "not a decimal number");
	bad("192.0.2.0/8a", "not a decimal number");
	bad("192.0.2.0/1000", "not a decimal number");
	bad("192.0.2.0/24/1", "not a decimal number");
	bad("192.0.2.1/24", "did you mean 192.0.2.0/24?");
	bad("1.2.3.4/8", "did you mean 1.0.0.0/8?");
	bad("192.0.2.129/25", "did you mean 192.0.2.128/25?");
	bad("2001:db8::1/64", "did you mean 2001:db8::/64?");
	bad("::1/0", "did you mean ::/0?");
	bad("0.0.0.0", "unspecified address");
	bad("0.0.0.0/32", "unspecified address");
	bad("::", "unspecified address");
	bad("::ffff:192.0.2.1", "IPv4-mapped");
	bad("::ffff:192.0.2.0/120", "IPv4-mapped");
	bad("::ffff:0:0/96", "IPv4-mapped");
	bad("224.0.0.1", "multicast");
	bad("239.0.0.0/8", "multicast");
	bad("255.255.255.255", "broadcast");
	bad("ff02::1", "multicast");
	bad("ff00::/8", "multicast");
	memset(big, '1', sizeof(big));
	expect_bad(big, sizeof(big), "longer than");
	expect_bad("1.2.3.4\0/8", 10, "NUL");
	/* Only @len bytes count: the rest of the buffer is not read. */
	expect_ok("192.0.2.7", "192.0.2.7");
	{
		struct engram_prefix p;
		char err[100];

		tap_ok(!engram_prefix_parse("192.0.2.7,10.0.0.1", 9, &p, err, sizeof(err)),
		       "parses only the first len bytes");
	}
}

static struct sockaddr_storage sa4(const char *ip)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

	sin->sin_family = AF_INET;
	sin->sin_port = htons(4791);
	if (inet_pton(AF_INET, ip, &sin->sin_addr) != 1)
		abort();
	return ss;
}

static struct sockaddr_storage sa6(const char *ip)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(4791);
	if (inet_pton(AF_INET6, ip, &sin6->sin6_addr) != 1)
		abort();
	return ss;
}

static void expect_match(const char *entry, const struct sockaddr_storage *peer,
			 const char *peer_text, int want)
{
	struct engram_prefix p;
	char err[256];

	if (engram_prefix_parse(entry, strlen(entry), &p, err, sizeof(err))) {
		tap_ok(0, "'%s' parses for matching", entry);
		tap_diag("%s", err);
		return;
	}
	tap_ok(engram_prefix_match(&p, (const struct sockaddr *)peer) == want,
	       "'%s' %s %s", entry, want ? "matches" : "does not match", peer_text);
}

#define M4(e, ip, w)	do { struct sockaddr_storage s = sa4(ip); expect_match(e, &s, ip, w); } while (0)
#define M6(e, ip, w)	do { struct sockaddr_storage s = sa6(ip); expect_match(e, &s, ip, w); } while (0)

static void test_match(void)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct engram_prefix p;
	char err[100];

	M4("192.0.2.0/24", "192.0.2.7", 1);
	M4("192.0.2.0/24", "192.0.2.255", 1);
	M4("192.0.2.0/24", "192.0.3.7", 0);
	M4("192.0.2.7", "192.0.2.7", 1);
	M4("192.0.2.7", "192.0.2.8", 0);
	M4("192.0.2.128/25", "192.0.2.200", 1);
	M4("192.0.2.128/25", "192.0.2.100", 0);
	M4("192.0.2.0/31", "192.0.2.1", 1);
	M4("192.0.2.0/31", "192.0.2.2", 0);
	M4("0.0.0.0/0", "198.51.100.9", 1);
	M4("128.0.0.0/1", "127.255.255.255", 0);
	M4("128.0.0.0/1", "128.0.0.0", 1);
	M4("::/0", "192.0.2.7", 0);
	M4("2001:db8::/32", "192.0.2.7", 0);
	/* IPv4-mapped peers are IPv4 peers. */
	M6("192.0.2.0/24", "::ffff:192.0.2.7", 1);
	M6("192.0.2.7", "::ffff:192.0.2.7", 1);
	M6("192.0.2.0/24", "::ffff:192.0.3.7", 0);
	M6("0.0.0.0/0", "::ffff:10.1.2.3", 1);
	M6("::/0", "::ffff:10.1.2.3", 0);
	M6("::/80", "::ffff:10.1.2.3", 0);
	/* Not mapped: an IPv4-compatible address is IPv6. */
	M6("192.0.2.7", "::192.0.2.7", 0);
	M6("::/0", "::192.0.2.7", 1);
	M6("2001:db8::/32", "2001:db8::5", 1);
	M6("2001:db8::/32", "2001:db9::5", 0);
	M6("2001:db8::5", "2001:db8::5", 1);
	M6("2001:db8::5", "2001:db8::6", 0);
	M6("::/0", "2001:db8::5", 1);
	M6("fe80::/10", "febf::1", 1);
	M6("fe80::/10", "fec0::1", 0);
	M6("2001:db8::/127", "2001:db8::1", 1);
	M6("2001:db8::/127", "2001:db8::2", 0);
	M6("0.0.0.0/0", "2001:db8::5", 0);

	engram_prefix_parse("0.0.0.0/0", 9, &p, err, sizeof(err));
	tap_ok(!engram_prefix_match(&p, (const struct sockaddr *)&un),
	       "an AF_UNIX peer matches nothing");
	tap_ok(!engram_prefix_match(&p, NULL), "a NULL peer matches nothing");
}

static void expect_list(const char *s, unsigned int max, int want_ret, unsigned int want_n,
			const char *why)
{
	struct engram_prefix e[8];
	unsigned int n = 99;
	char err[256] = "";
	int ret;

	ret = engram_prefix_list_parse(s, e, max, &n, err, sizeof(err));
	if (!want_ret) {
		if (!tap_ok(!ret && n == want_n, "list '%s' gives %u entries", s ? s : "(null)",
			    want_n))
			tap_diag("returned %d, %u entries: %s", ret, n, err);
		return;
	}
	if (!tap_ok(ret == want_ret, "list '%s' refused", s))
		tap_diag("returned %d, %u entries", ret, n);
	tap_contains(err, why, "  ... and the reason names the entry");
}

static void test_list(void)
{
	struct engram_prefix e[4];
	unsigned int n;
	char err[256], text[ENGRAM_PREFIX_TEXT_MAX];

	expect_list(NULL, 8, 0, 0, NULL);
	expect_list("", 8, 0, 0, NULL);
	expect_list("192.0.2.1", 8, 0, 1, NULL);
	expect_list("192.0.2.1,10.0.0.0/8,2001:db8::/32", 8, 0, 3, NULL);
	/* Overlapping entries are fine; only the same one twice is not. */
	expect_list("192.0.2.0/24,192.0.2.1", 8, 0, 2, NULL);
	expect_list("192.0.2.1,,10.0.0.1", 8, -EINVAL, 0, "entry 2 is empty");
	expect_list("192.0.2.1,", 8, -EINVAL, 0, "entry 2 is empty");
	expect_list(",192.0.2.1", 8, -EINVAL, 0, "entry 1 is empty");
	expect_list("192.0.2.1,10.0.0.1/8", 8, -EINVAL, 0, "entry 2: '10.0.0.1/8' has address bits");
	expect_list("192.0.2.1,192.0.2.1/32", 8, -EINVAL, 0,
		    "entry 2 '192.0.2.1/32' duplicates entry 1");
	expect_list("1.0.0.1,1.0.0.2,1.0.0.3", 2, -EINVAL, 0, "more than 2 entries");
	expect_list("192.0.2.1 ,10.0.0.1", 8, -EINVAL, 0, "entry 1: '192.0.2.1 '");

	engram_prefix_list_parse("2001:DB8::1,10.0.0.0/8", e, 4, &n, err, sizeof(err));
	engram_prefix_format(&e[0], text, sizeof(text));
	tap_ok(n == 2 && !strcmp(text, "2001:db8::1"), "list entries keep their order");
}

static void test_format(void)
{
	struct engram_prefix p = { .family = AF_INET6, .len = 128 };
	char text[ENGRAM_PREFIX_TEXT_MAX], small[8];
	int n;

	memset(p.addr, 0xff, sizeof(p.addr));
	p.addr[15] = 0xfe;
	n = engram_prefix_format(&p, text, sizeof(text));
	tap_ok(n == 39 && !strcmp(text, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"),
	       "the longest IPv6 text fits");
	p.len = 127;
	n = engram_prefix_format(&p, text, sizeof(text));
	tap_ok(n == 43 && n < ENGRAM_PREFIX_TEXT_MAX, "... with /127 too");
	n = engram_prefix_format(&p, small, sizeof(small));
	tap_ok(n == 43 && strlen(small) == 7, "a short buffer gets a cut, terminated text");
}

static int write_seed(const char *dir, const char *name, const char *s)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f || fwrite(s, 1, strlen(s), f) != strlen(s) || fclose(f)) {
		perror(path);
		return 1;
	}
	return 0;
}

static int write_seeds(const char *dir)
{
	static const char * const seeds[] = {
		"192.0.2.1", "192.0.2.0/24", "0.0.0.0/0", "2001:db8::1", "2001:db8::/32",
		"::/0", "::ffff:192.0.2.1", "64:ff9b::192.0.2.1", "1:2:3:4:5:6:7:8/127",
		"fe80::1%eth0", "[::1]", "192.0.2.1/24",
	};
	char name[32];
	unsigned int i;
	int ret = 0;

	mkdir(dir, 0755);
	for (i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		snprintf(name, sizeof(name), "seed-%02u", i);
		ret |= write_seed(dir, name, seeds[i]);
	}
	return ret;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write-seeds"))
		return write_seeds(argv[2]);
	test_parse();
	test_match();
	test_list();
	test_format();
	return tap_done();
}
