// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for kmod/url.c, built in userspace.  The same file runs in the
 * module, so what passes here is what modprobe accepts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <linux/engram_rdma.h>
#include "url.h"

static int test_no, failed;

static void tap(int ok, const char *what, const char *detail)
{
	printf("%sok %d - %s\n", ok ? "" : "not ", ++test_no, what);
	if (!ok) {
		printf("#   %s\n", detail);
		failed++;
	}
}

static void expect_ok(const char *s, enum engram_url_role role, int transport,
		      int family, const char *addr, unsigned int port, const char *local)
{
	struct engram_url u;
	char err[256] = "", buf[INET6_ADDRSTRLEN], what[300], detail[600];
	const void *a, *l = NULL;
	int ret, ok;

	snprintf(what, sizeof(what), "accepts %s", s);
	ret = engram_url_parse(s, strlen(s), role, &u, err, sizeof(err));
	if (ret) {
		snprintf(detail, sizeof(detail), "refused: %s", err);
		tap(0, what, detail);
		return;
	}
	if (family == AF_INET) {
		a = &((struct sockaddr_in *)&u.addr)->sin_addr;
		if (local)
			l = &((struct sockaddr_in *)&u.local)->sin_addr;
	} else {
		a = &((struct sockaddr_in6 *)&u.addr)->sin6_addr;
		if (local)
			l = &((struct sockaddr_in6 *)&u.local)->sin6_addr;
	}
	inet_ntop(family, a, buf, sizeof(buf));
	ok = u.transport == transport && u.addr.ss_family == family &&
	     !strcmp(buf, addr) && u.port == port && !strcmp(u.text, s) &&
	     ntohs(((struct sockaddr_in *)&u.addr)->sin_port) == port;
	if (ok && local) {
		inet_ntop(family, l, buf, sizeof(buf));
		ok = u.local.ss_family == family && !strcmp(buf, local);
	}
	if (ok && !local)
		ok = u.local.ss_family == 0;
	snprintf(detail, sizeof(detail), "parsed to transport %d family %d addr %s port %u",
		 u.transport, u.addr.ss_family, buf, u.port);
	tap(ok, what, detail);
}

static void expect_bad(const char *s, enum engram_url_role role, const char *phrase)
{
	struct engram_url u;
	char err[256] = "", what[300], detail[600];
	int ret;

	snprintf(what, sizeof(what), "refuses %s '%s'",
		 role == ENGRAM_URL_LISTEN ? "listen" : "remote", s);
	ret = engram_url_parse(s, strlen(s), role, &u, err, sizeof(err));
	snprintf(detail, sizeof(detail), "ret %d, message '%s', wanted '%s'", ret, err, phrase);
	tap(ret == -EINVAL && strstr(err, phrase), what, detail);
}

static void expect_list(const char *s, enum engram_url_role role, int want_ret,
			unsigned int want_count, const char *phrase)
{
	struct engram_url urls[ENGRAM_URL_MAX];
	char err[256] = "", what[400], detail[600];
	unsigned int n = 99;
	int ret, ok;

	snprintf(what, sizeof(what), "list '%s' gives %s", s ? s : "(null)",
		 want_ret ? "an error" : "entries");
	ret = engram_url_list_parse(s, role, urls, ENGRAM_URL_MAX, &n, err, sizeof(err));
	ok = ret == want_ret;
	if (ok && !ret)
		ok = n == want_count;
	if (ok && ret)
		ok = strstr(err, phrase) != NULL;
	snprintf(detail, sizeof(detail), "ret %d count %u message '%s'", ret, n, err);
	tap(ok, what, detail);
}

/* Do URLs A and B reach the same host (SAME), and name the same endpoint (EQUAL)? */
static void expect_host(const char *a, const char *b, int same, int equal)
{
	struct engram_url u, v;
	char err[256], what[300];
	int ok;

	ok = !engram_url_parse(a, strlen(a), ENGRAM_URL_REMOTE, &u, err, sizeof(err)) &&
	     !engram_url_parse(b, strlen(b), ENGRAM_URL_REMOTE, &v, err, sizeof(err)) &&
	     engram_url_same_host(&u, &v) == !!same && engram_url_same_host(&v, &u) == !!same &&
	     engram_url_equal(&u, &v) == !!equal;
	snprintf(what, sizeof(what), "%s and %s: %s host, %s endpoint", a, b,
		 same ? "same" : "another", equal ? "same" : "another");
	tap(ok, what, "engram_url_same_host() or engram_url_equal() said otherwise");
}

int main(void)
{
	const enum engram_url_role L = ENGRAM_URL_LISTEN, R = ENGRAM_URL_REMOTE;
	char big[400];
	int i;

	expect_ok("rdma://192.0.2.1:18515", L, ENGRAM_TRANSPORT_RDMA, AF_INET, "192.0.2.1", 18515, NULL);
	expect_ok("tcp://192.0.2.1:1", L, ENGRAM_TRANSPORT_TCP, AF_INET, "192.0.2.1", 1, NULL);
	expect_ok("tcp://192.0.2.1:65535", L, ENGRAM_TRANSPORT_TCP, AF_INET, "192.0.2.1", 65535, NULL);
	expect_ok("rdma://192.0.2.1", L, ENGRAM_TRANSPORT_RDMA, AF_INET, "192.0.2.1",
		  ENGRAM_DEFAULT_PORT, NULL);
	expect_ok("rdma://[2001:db8::1]:4791", L, ENGRAM_TRANSPORT_RDMA, AF_INET6, "2001:db8::1", 4791, NULL);
	expect_ok("rdma://[2001:db8::1]", L, ENGRAM_TRANSPORT_RDMA, AF_INET6, "2001:db8::1",
		  ENGRAM_DEFAULT_PORT, NULL);
	expect_ok("rdma://[::ffff:192.0.2.7]:9", L, ENGRAM_TRANSPORT_RDMA, AF_INET6, "::ffff:192.0.2.7", 9, NULL);
	expect_ok("rdma://192.0.2.1:18515@192.0.2.2", R, ENGRAM_TRANSPORT_RDMA, AF_INET, "192.0.2.1", 18515,
		  "192.0.2.2");
	expect_ok("tcp://192.0.2.1@192.0.2.2", R, ENGRAM_TRANSPORT_TCP, AF_INET, "192.0.2.1",
		  ENGRAM_DEFAULT_PORT, "192.0.2.2");
	expect_ok("rdma://[2001:db8::1]:7@[2001:db8::2]", R, ENGRAM_TRANSPORT_RDMA, AF_INET6,
		  "2001:db8::1", 7, "2001:db8::2");
	expect_ok("rdma://[2001:db8::1]:7@2001:db8::2", R, ENGRAM_TRANSPORT_RDMA, AF_INET6,
		  "2001:db8::1", 7, "2001:db8::2");

	expect_host("rdma://192.0.2.1@192.0.2.2", "tcp://192.0.2.1:18516@192.0.2.2", 1, 0);
	expect_host("rdma://192.0.2.1:18515@192.0.2.2", "tcp://192.0.2.1@192.0.2.9", 1, 0);
	expect_host("rdma://192.0.2.1@192.0.2.2", "rdma://192.0.2.1:18515@192.0.2.2", 1, 1);
	expect_host("rdma://192.0.2.1@192.0.2.2", "tcp://192.0.2.3@192.0.2.2", 0, 0);
	expect_host("rdma://[2001:db8::1]:7@[2001:db8::9]", "tcp://[2001:db8::1]:8@[2001:db8::9]", 1, 0);
	expect_host("rdma://[2001:db8::1]@[2001:db8::9]", "rdma://[2001:db8::2]@[2001:db8::9]", 0, 0);
	expect_host("rdma://[::ffff:192.0.2.1]@[::ffff:192.0.2.2]", "rdma://192.0.2.1@192.0.2.2", 0, 0);

	expect_bad("rdma://0.0.0.0:18515", L, "wildcard listen address '0.0.0.0'");
	expect_bad("tcp://[::]:18515", L, "wildcard listen address '::'");
	expect_bad("rdma://[::0]:1", L, "wildcard");
	expect_bad("rdma://0.0.0.0:1@192.0.2.2", R, "wildcard server address");
	expect_bad("rdma://192.0.2.1:1@0.0.0.0", R, "wildcard local address");
	expect_bad("rdma://192.0.2.1:0", L, "port 0 out of range");
	expect_bad("rdma://192.0.2.1:65536", L, "port 65536 out of range");
	expect_bad("rdma://192.0.2.1:99999999999999999999", L, "out of range");
	expect_bad("rdma://192.0.2.1:", L, "empty port");
	expect_bad("rdma://192.0.2.1:+80", L, "not a decimal number");
	expect_bad("rdma://192.0.2.1:8x", L, "not a decimal number");
	expect_bad("http://192.0.2.1:80", L, "must start with rdma:// or tcp://");
	expect_bad("rdma:/192.0.2.1:80", L, "must start with");
	expect_bad("RDMA://192.0.2.1:80", L, "must start with");
	expect_bad("", L, "must start with");
	expect_bad("rdma://", L, "missing listen address");
	expect_bad("rdma://:80", L, "missing listen address");
	expect_bad("rdma://192.0.2:80", L, "malformed IPv4");
	expect_bad("rdma://192.0.2.256:80", L, "malformed IPv4");
	expect_bad("rdma://192.0.2.1.5:80", L, "malformed IPv4");
	expect_bad("rdma://010.0.2.1:80", L, "malformed IPv4");
	expect_bad("rdma://host.example:80", L, "malformed IPv4");
	expect_bad("rdma:// 192.0.2.1:80", L, "malformed IPv4");
	expect_bad("rdma://2001:db8::1:80", L, "must be written in brackets");
	expect_bad("rdma://[2001:db8::1:80", L, "missing ']'");
	expect_bad("rdma://[2001:db8::g]:80", L, "malformed IPv6");
	expect_bad("rdma://[fe80::1%eth0]:80", L, "scoped IPv6");
	expect_bad("rdma://[2001:db8::1]x", L, "unexpected 'x'");
	expect_bad("rdma://224.0.0.1:80", L, "multicast");
	expect_bad("rdma://255.255.255.255:80", L, "broadcast");
	expect_bad("rdma://[ff02::1]:80", L, "multicast");
	expect_bad("rdma://192.0.2.1:80@192.0.2.2", L, "takes no '@LOCAL'");
	expect_bad("rdma://192.0.2.1@192.0.2.2", L, "takes no '@LOCAL'");
	expect_bad("rdma://192.0.2.1:80", R, "needs the local address");
	expect_bad("rdma://192.0.2.1:80@", R, "missing local address");
	expect_bad("rdma://192.0.2.1:80@[2001:db8::2]", R, "different families");
	expect_bad("rdma://192.0.2.1:80@192.0.2.2:5", R, "malformed IPv6 local");
	expect_bad("rdma://192.0.2.1:80@[2001:db8::2]x", R, "malformed bracketed");
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	memcpy(big, "rdma://", 7);
	expect_bad(big, L, "URL longer than");

	expect_list(NULL, L, 0, 0, NULL);
	expect_list("", L, 0, 0, NULL);
	expect_list("rdma://192.0.2.1:1,tcp://192.0.2.1:1,rdma://[2001:db8::1]:1", L, 0, 3, NULL);
	expect_list("rdma://192.0.2.1:1,rdma://192.0.2.2:1", L, 0, 2, NULL);
	expect_list("rdma://192.0.2.1:18515,rdma://192.0.2.1", L, -EINVAL, 0,
		    "entry 2 'rdma://192.0.2.1' duplicates entry 1");
	expect_list("rdma://192.0.2.1:1@192.0.2.9,rdma://192.0.2.1:1@192.0.2.9", R, -EINVAL, 0,
		    "duplicates");
	expect_list("rdma://192.0.2.1:1@192.0.2.9,rdma://192.0.2.1:1@192.0.2.8", R, 0, 2, NULL);
	expect_list("rdma://192.0.2.1:1,,rdma://192.0.2.2:1", L, -EINVAL, 0, "entry 2 is empty");
	expect_list("rdma://192.0.2.1:1,", L, -EINVAL, 0, "entry 2 is empty");
	expect_list("rdma://192.0.2.1:1,rdma://0.0.0.0:18515", L, -EINVAL, 0,
		    "entry 2 'rdma://0.0.0.0:18515': wildcard");
	{
		char list[2048] = "";

		for (i = 1; i <= ENGRAM_URL_MAX + 1; i++) {
			char one[40];

			snprintf(one, sizeof(one), "%stcp://192.0.2.1:%d", i > 1 ? "," : "", i);
			strcat(list, one);
		}
		expect_list(list, L, -EINVAL, 0, "more than 16 entries");
	}

	printf("1..%d\n", test_no);
	return failed ? 1 : 0;
}
