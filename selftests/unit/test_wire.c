// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for kmod/wire.c, the wire protocol codec, built in
 * userspace.  The same file runs in the module, so what passes here is what
 * the transports accept and refuse.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "wire.h"

#define RB	ENGRAM_ROW_BYTES

static u8 buf[ENGRAM_WIRE_MAX_REQUEST_BYTES];
static u8 buf2[ENGRAM_WIRE_MAX_REQUEST_BYTES];
static u32 rows[ENGRAM_WIRE_MAX_ROWS];
static char err[256];

static const u8 sha[ENGRAM_SHA256_LEN] = {
	0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
};

static struct engram_wire_params neg_default(void)
{
	struct engram_wire_params p = {
		.version_min = 1, .version_max = 1, .max_inflight = 64,
		.max_ranges = 16, .max_rows = 65536,
	};

	p.max_request_bytes = engram_wire_request_size(p.max_rows, p.max_ranges);
	return p;
}

/* The same limits on a connection of version @v, room for slots. */
static struct engram_wire_params neg_v(u16 v)
{
	struct engram_wire_params p = neg_default();

	p.version_min = v;
	p.version_max = v;
	p.max_request_bytes = engram_wire_request_size_slots(p.max_rows, p.max_ranges);
	return p;
}

/* A request for @n rows, one range exactly big enough at stride 264. */
static struct engram_wire_req req_simple(u32 n)
{
	struct engram_wire_req r;
	u32 i;

	memset(&r, 0, sizeof(r));
	r.ticket = 0x1122334455667788ULL;
	r.generation = 42;
	memcpy(r.digest, sha, sizeof(r.digest));
	r.nr_rows = n;
	r.stride = RB;
	r.nr_ranges = 1;
	r.ranges[0].addr = 0x7f0000001000ULL;
	r.ranges[0].rkey = 0xabcd;
	r.ranges[0].length = (u64)n * RB;
	for (i = 0; i < n; i++)
		rows[i] = i * 7 % 1000;
	return r;
}

static int build(const struct engram_wire_params *neg, const struct engram_wire_req *r)
{
	return engram_wire_req_build(buf, sizeof(buf), neg, r, rows, NULL);
}

static int parse(const struct engram_wire_params *neg, size_t len, struct engram_wire_req *out)
{
	err[0] = '\0';
	return engram_wire_req_parse(buf, len, neg, out, err, sizeof(err));
}

static int all_zero_test(const u8 *p, size_t n)
{
	while (n--)
		if (*p++)
			return 0;
	return 1;
}

static void put32(u8 *p, u32 v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

static void put64(u8 *p, u64 v)
{
	put32(p, (u32)v);
	put32(p + 4, (u32)(v >> 32));
}

static u64 get64(const u8 *p)
{
	u64 v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Parse @len bytes of buf and expect @st; say what came back when not. */
static void expect_status(const struct engram_wire_params *neg, size_t len, int st,
			  const char *what)
{
	struct engram_wire_req r;
	int got = parse(neg, len, &r);

	if (!tap_ok(got == st, "%s: %s", what, engram_wire_status_name(st)))
		tap_diag("got %s (%s)", engram_wire_status_name(got), err);
}

static void test_names(void)
{
	const char *seen[ENGRAM_WIRE_STATUS_MAX + 1];
	int ok = 1;
	unsigned int i, j;

	for (i = 0; i <= ENGRAM_WIRE_STATUS_MAX; i++) {
		seen[i] = engram_wire_status_name(i);
		if (!strcmp(seen[i], "unknown"))
			ok = 0;
		for (j = 0; j < i; j++)
			if (!strcmp(seen[i], seen[j]))
				ok = 0;
	}
	tap_ok(ok && ENGRAM_WIRE_STATUS_MAX == 12,
	       "13 statuses, each with its own name");
	tap_ok(!strcmp(engram_wire_status_name(ENGRAM_WIRE_ROW_OUT_OF_RANGE),
		       "row_out_of_range") &&
	       !strcmp(engram_wire_status_name(ENGRAM_WIRE_ROW_NOT_HELD), "row_not_held") &&
	       !strcmp(engram_wire_status_name(ENGRAM_WIRE_OK), "ok") &&
	       !strcmp(engram_wire_status_name(13), "unknown") &&
	       !strcmp(engram_wire_status_name(65535), "unknown"),
	       "status names are stable; out of range is \"unknown\"");
	tap_ok(!strcmp(engram_wire_type_name(ENGRAM_WIRE_CATALOG_REQUEST), "catalog_request") &&
	       !strcmp(engram_wire_type_name(0), "unknown") &&
	       !strcmp(engram_wire_type_name(7), "unknown"), "type names");
}

static void test_sizes(void)
{
	tap_ok(sizeof(struct engram_wire_hello) == 48 && sizeof(struct engram_wire_hdr) == 16 &&
	       sizeof(struct engram_wire_request) == 48 && sizeof(struct engram_wire_range) == 24 &&
	       sizeof(struct engram_wire_response) == 32 &&
	       sizeof(struct engram_wire_catalog) == 24 &&
	       sizeof(struct engram_wire_catalog_entry) == 120 &&
	       sizeof(struct engram_wire_held) == 16,
	       "uapi struct sizes 48/16/48/24/32/24/120/16");
	tap_ok(engram_wire_request_size(49152, 16) == 48 + 16 * 24 + 49152 * 4 &&
	       engram_wire_request_size(0xffffffffU, 0xffff) ==
	       48 + 0xffffULL * 24 + 0xffffffffULL * 4,
	       "request size formula, no overflow at the extremes");
}

/* ---------------------------------------------------------------- hello */

static int hello_decode_bytes(const u8 *b, size_t len, struct engram_wire_params *p)
{
	err[0] = '\0';
	return engram_wire_hello_decode(b, len, p, err, sizeof(err));
}

/* The one offer every side makes: a valid hello, holding its own largest request. */
static void test_offer(void)
{
	struct engram_wire_params p, q, out;

	memset(&p, 0xa5, sizeof(p));
	engram_wire_offer(&p, ENGRAM_WIRE_OFFER_ROWS, ENGRAM_WIRE_OFFER_INFLIGHT, 0xffff);
	tap_ok(p.version_min == ENGRAM_WIRE_VERSION_MIN && p.version_max == ENGRAM_WIRE_VERSION &&
	       p.max_rows == 65536 && p.max_inflight == 16 &&
	       p.max_ranges == ENGRAM_WIRE_MAX_RANGES &&
	       p.max_request_bytes == engram_wire_request_size(65536, ENGRAM_WIRE_MAX_RANGES),
	       "offer: every version, 65,536 rows, 16 in flight, 16 ranges, exact request bytes");
	tap_ok(!engram_wire_hello_check(&p, err, sizeof(err)), "offer: a valid hello");
	engram_wire_offer(&q, 1, 1, 1);
	tap_ok(!engram_wire_hello_check(&q, err, sizeof(err)) && q.max_rows == 1 &&
	       q.max_request_bytes == 48 + 16 * 24 + 4 && q.version_max == 1,
	       "offer of 1 row, 1 in flight, version 1: valid, exact");
	tap_ok(!engram_wire_negotiate(&p, &q, &out, err, sizeof(err)) && out.max_rows == 1 &&
	       out.max_inflight == 1 && out.version_max == 1,
	       "two offers negotiate to the smaller, and to version 1 with a version 1 peer");
	tap_ok(!engram_wire_negotiate(&q, &p, &out, err, sizeof(err)) && out.version_min == 1 &&
	       out.version_max == 1 && !engram_wire_check_answer(&p, &out, err, sizeof(err)),
	       "a version 1 acceptor answers a 1-4 offer with 1, which the offerer takes");
	engram_wire_offer(&q, 1, 1, 0);
	tap_ok(q.version_min == ENGRAM_WIRE_VERSION_MIN && q.version_max == ENGRAM_WIRE_VERSION_MIN,
	       "an offer below the oldest version is clamped to it");
	tap_ok(ENGRAM_WIRE_VERSION == 6 && ENGRAM_WIRE_VERSION_REMOTE_INV == 2 &&
	       ENGRAM_WIRE_VERSION_SHARDS == 3 && ENGRAM_WIRE_VERSION_TENSOR == 4 &&
	       ENGRAM_WIRE_VERSION_KEPT == 5 && ENGRAM_WIRE_VERSION_DRAIN == 6,
	       "version 6 is the newest, with drain; kept keys since 5, tensor offsets since 4, shards since 3, remote invalidation since 2");
}

static void test_hello(void)
{
	struct engram_wire_params p = neg_default(), q, bad;
	u8 pd[56];
	int ret;
	size_t i;

	p.version_max = 3;
	p.max_inflight = 128;
	p.max_ranges = 7;
	p.max_rows = 49152;
	p.max_request_bytes = 300000;
	ret = engram_wire_hello_encode(pd, 48, &p);
	tap_ok(ret == 48, "hello encodes to 48 bytes");
	tap_ok(pd[0] == 'E' && pd[1] == 'N' && pd[2] == 'G' && pd[3] == 'R' &&
	       pd[4] == 1 && pd[5] == 0 && pd[6] == 3 && pd[7] == 0 &&
	       pd[16] == 128 && pd[17] == 0 && pd[18] == 7,
	       "hello bytes: magic \"ENGR\", little-endian fields at their offsets");
	memset(pd + 48, 0, 8);
	ret = hello_decode_bytes(pd, sizeof(pd), &q);
	tap_ok(!ret && !memcmp(&p, &q, sizeof(p)),
	       "hello round trip, with 8 bytes of CM padding ignored");
	ret = hello_decode_bytes(pd, 47, &q);
	tap_contains(ret == -EPROTO ? err : NULL, "hello of 47 bytes", "hello of 47 bytes refused");
	tap_ok(engram_wire_hello_encode(pd, 47, &p) == -EMSGSIZE, "hello encode: buffer too small");

	pd[3] ^= 1;
	ret = hello_decode_bytes(pd, 48, &q);
	tap_contains(ret == -EPROTO ? err : NULL, "bad magic", "hello with a bad magic refused");
	pd[3] ^= 1;
	pd[21] = 1;
	ret = hello_decode_bytes(pd, 48, &q);
	tap_contains(ret == -EPROTO ? err : NULL, "flags", "hello with flags refused");
	pd[21] = 0;
	{
		int all = 1;

		for (i = 24; i < 48; i++) {
			pd[i] = 0x80;
			if (hello_decode_bytes(pd, 48, &q) != -EPROTO || !strstr(err, "reserved"))
				all = 0;
			pd[i] = 0;
		}
		tap_ok(all, "hello with any reserved byte set refused (24 cases)");
	}

	bad = p;
	bad.version_min = 0;
	tap_contains(engram_wire_hello_check(&bad, err, sizeof(err)) ? err : NULL,
		     "bad version range 0-3", "hello version_min 0 refused");
	bad = p;
	bad.version_min = 4;
	tap_contains(engram_wire_hello_check(&bad, err, sizeof(err)) ? err : NULL,
		     "bad version range 4-3", "hello version_min > version_max refused");
	bad = p;
	bad.max_inflight = 0;
	tap_contains(engram_wire_hello_check(&bad, err, sizeof(err)) ? err : NULL,
		     "max_inflight is 0", "hello max_inflight 0 refused");
	bad = p;
	bad.max_ranges = 17;
	tap_contains(engram_wire_hello_check(&bad, err, sizeof(err)) ? err : NULL,
		     "max_ranges 17 not in 1-16", "hello max_ranges 17 refused");
	bad.max_ranges = 0;
	tap_ok(engram_wire_hello_check(&bad, err, sizeof(err)) == -EPROTO,
	       "hello max_ranges 0 refused");
	bad = p;
	bad.max_rows = ENGRAM_WIRE_MAX_ROWS + 1;
	tap_contains(engram_wire_hello_check(&bad, err, sizeof(err)) ? err : NULL,
		     "max_rows 1048577 not in 1-1048576", "hello max_rows above the hard limit refused");
	bad.max_rows = 0;
	tap_ok(engram_wire_hello_check(&bad, err, sizeof(err)) == -EPROTO, "hello max_rows 0 refused");
	bad = p;
	bad.max_request_bytes = engram_wire_request_size(p.max_rows, p.max_ranges) - 1;
	tap_contains(engram_wire_hello_check(&bad, err, sizeof(err)) ? err : NULL,
		     "cannot hold 49152 rows and 7 ranges",
		     "hello whose max_request_bytes cannot hold max_rows refused");
	bad.max_request_bytes++;
	tap_ok(!engram_wire_hello_check(&bad, err, sizeof(err)),
	       "hello with max_request_bytes exactly enough accepted");
	bad.max_request_bytes = ENGRAM_WIRE_MAX_REQUEST_BYTES + 1;
	tap_ok(engram_wire_hello_check(&bad, err, sizeof(err)) == -EPROTO,
	       "hello max_request_bytes above 8 MiB refused");
	bad = p;
	bad.max_inflight = 0;
	tap_ok(engram_wire_hello_encode(pd, 48, &bad) == -EINVAL, "invalid hello is not encoded");
}

static void test_hello_frame(void)
{
	struct engram_wire_params p = neg_default(), q;
	u8 f[64];
	int ret;

	ret = engram_wire_hello_frame_encode(f, sizeof(f), &p);
	tap_ok(ret == 64 && f[0] == 1 && f[1] == ENGRAM_WIRE_HELLO && f[4] == 64,
	       "TCP hello frame: 64 bytes, header version 1, type HELLO");
	ret = engram_wire_hello_frame_decode(f, 64, &q, err, sizeof(err));
	tap_ok(!ret && !memcmp(&p, &q, sizeof(p)), "TCP hello frame round trip");
	ret = engram_wire_hello_frame_decode(f, 63, &q, err, sizeof(err));
	tap_ok(ret == -EPROTO, "TCP hello frame of 63 bytes refused");
	f[0] = 2;
	ret = engram_wire_hello_frame_decode(f, 64, &q, err, sizeof(err));
	tap_contains(ret ? err : NULL, "frame version 2", "TCP hello frame with header version 2 refused");
	f[0] = 1;
	f[8] = 1;
	ret = engram_wire_hello_frame_decode(f, 64, &q, err, sizeof(err));
	tap_contains(ret ? err : NULL, "ticket", "TCP hello frame with a ticket refused");
	f[8] = 0;
	f[4] = 65;
	ret = engram_wire_hello_frame_decode(f, 64, &q, err, sizeof(err));
	tap_ok(ret == -EPROTO, "TCP hello frame whose length lies refused");
	tap_ok(engram_wire_hello_frame_encode(f, 63, &p) == -EMSGSIZE,
	       "TCP hello frame encode: buffer too small");
}

static void test_negotiate(void)
{
	struct engram_wire_params a = neg_default(), b = neg_default(), out, ans;
	int ret;

	a.version_max = 3;
	a.max_inflight = 32;
	a.max_ranges = 16;
	a.max_rows = 49152;
	a.max_request_bytes = 400000;
	b.version_min = 2;
	b.version_max = 5;
	b.max_inflight = 100;
	b.max_ranges = 4;
	b.max_rows = 65536;
	b.max_request_bytes = 300000;
	ret = engram_wire_negotiate(&a, &b, &out, err, sizeof(err));
	tap_ok(!ret && out.version_min == 3 && out.version_max == 3,
	       "negotiate picks the newest common version (1-3 with 2-5 gives 3)");
	tap_ok(!ret && out.max_inflight == 32 && out.max_ranges == 4 && out.max_rows == 49152 &&
	       out.max_request_bytes == 300000, "negotiated limits are each side's minimum");
	tap_ok(!engram_wire_hello_check(&out, err, sizeof(err)),
	       "negotiated hello is itself valid");
	ret = engram_wire_negotiate(&b, &a, &ans, err, sizeof(err));
	tap_ok(!ret && !memcmp(&out, &ans, sizeof(out)), "negotiation is symmetric");
	tap_ok(!engram_wire_check_answer(&b, &out, err, sizeof(err)),
	       "initiator accepts the acceptor's answer");
	ans = out;
	ans.version_min = 2;
	tap_contains(engram_wire_check_answer(&b, &ans, err, sizeof(err)) ? err : NULL,
		     "chose versions 2-3", "answer with a version range refused");
	ans = out;
	ans.version_min = ans.version_max = 6;
	tap_ok(engram_wire_check_answer(&b, &ans, err, sizeof(err)) == -EPROTO,
	       "answer with a version not offered refused");
	ans = out;
	ans.max_inflight = 101;
	tap_contains(engram_wire_check_answer(&b, &ans, err, sizeof(err)) ? err : NULL,
		     "raised a limit", "answer raising a limit refused");

	b.version_min = 4;
	ret = engram_wire_negotiate(&a, &b, &out, err, sizeof(err));
	tap_ok(ret == -EPROTONOSUPPORT, "disjoint versions refused with EPROTONOSUPPORT");
	tap_contains(err, "no common protocol version: we speak 1-3, peer 4-5",
		     "disjoint versions: message names both ranges");
	b.version_min = 2;
	b.max_ranges = 0;
	tap_contains(engram_wire_negotiate(&a, &b, &out, err, sizeof(err)) == -EPROTO ? err : NULL,
		     "peer hello invalid", "negotiate refuses an invalid peer hello");
	b.max_ranges = 4;
	a.max_rows = 0;
	tap_ok(engram_wire_negotiate(&a, &b, &out, err, sizeof(err)) == -EINVAL,
	       "negotiate refuses an invalid local hello");
}

/* ---------------------------------------------------------------- header */

static int hdr(const u8 *b, size_t len, const struct engram_wire_params *neg, bool to_server,
	       bool tcp, struct engram_wire_hdr_info *h)
{
	err[0] = '\0';
	return engram_wire_hdr_check(b, len, neg, to_server, tcp, h, err, sizeof(err));
}

static void mkhdr(u8 *b, u8 version, u8 type, u16 flags, u32 length, u64 ticket)
{
	b[0] = version;
	b[1] = type;
	b[2] = flags;
	b[3] = flags >> 8;
	put32(b + 4, length);
	put64(b + 8, ticket);
}

static void test_header(void)
{
	struct engram_wire_params neg = neg_default();
	struct engram_wire_hdr_info h;
	u8 b[64] = { 0 };

	mkhdr(b, 1, ENGRAM_WIRE_REQUEST, 0, 100, 5);
	tap_ok(hdr(b, 15, &neg, true, true, &h) == ENGRAM_WIRE_MALFORMED,
	       "header: 15 bytes is truncated");
	tap_ok(hdr(b, 16, &neg, true, true, &h) == ENGRAM_WIRE_OK && h.length == 100 &&
	       h.ticket == 5 && h.type == ENGRAM_WIRE_REQUEST,
	       "header: TCP prefix of a 100-byte request accepted");
	tap_contains(hdr(b, 16, &neg, true, false, &h) ? err : NULL, "says 100 bytes, 16 received",
		     "header: RDMA receive shorter than the length refused");
	tap_contains(hdr(b, 64, &neg, true, false, &h) ? err : NULL,
		     "received", "header: RDMA receive of another size refused");
	mkhdr(b, 1, ENGRAM_WIRE_REQUEST, 0, 60, 5);
	tap_ok(hdr(b, 64, &neg, true, true, &h) == ENGRAM_WIRE_MALFORMED,
	       "header: TCP bytes beyond the length refused");
	mkhdr(b, 2, ENGRAM_WIRE_REQUEST, 0, 100, 5);
	tap_ok(hdr(b, 16, &neg, true, true, &h) == ENGRAM_WIRE_BAD_VERSION && h.ticket == 5,
	       "header: version 2 is BAD_VERSION, ticket still decoded");
	mkhdr(b, 1, ENGRAM_WIRE_REQUEST, 0x100, 100, 5);
	tap_contains(hdr(b, 16, &neg, true, true, &h) == ENGRAM_WIRE_MALFORMED ? err : NULL,
		     "flags 0x100", "header: nonzero flags refused");
	mkhdr(b, 1, 0, 0, 16, 5);
	tap_contains(hdr(b, 16, &neg, true, true, &h) == ENGRAM_WIRE_MALFORMED ? err : NULL,
		     "unknown frame type 0", "header: type 0 refused");
	mkhdr(b, 1, 7, 0, 16, 5);
	tap_ok(hdr(b, 16, &neg, true, true, &h) == ENGRAM_WIRE_MALFORMED, "header: type 7 refused");
	mkhdr(b, 1, ENGRAM_WIRE_RESPONSE, 0, 32, 5);
	tap_contains(hdr(b, 16, &neg, true, true, &h) ? err : NULL, "sent to the server",
		     "header: RESPONSE towards the server refused");
	mkhdr(b, 1, ENGRAM_WIRE_REQUEST, 0, 100, 5);
	tap_contains(hdr(b, 16, &neg, false, true, &h) ? err : NULL, "sent by the server",
		     "header: REQUEST from the server refused");
	mkhdr(b, 1, ENGRAM_WIRE_HELLO, 0, 64, 0);
	tap_contains(hdr(b, 16, &neg, true, true, &h) ? err : NULL, "after negotiation",
		     "header: HELLO after negotiation refused");
	mkhdr(b, 1, ENGRAM_WIRE_REQUEST, 0, 100, 5);
	tap_contains(hdr(b, 16, NULL, true, true, &h) ? err : NULL, "request frame before hello",
		     "header: REQUEST before the hello refused");
	mkhdr(b, 1, ENGRAM_WIRE_REQUEST, 0, neg.max_request_bytes + 1, 5);
	tap_contains(hdr(b, 16, &neg, true, true, &h) ? err : NULL, "not in 76-",
		     "header: request longer than max_request_bytes refused");
	mkhdr(b, 1, ENGRAM_WIRE_REQUEST, 0, 75, 5);
	tap_ok(hdr(b, 16, &neg, true, true, &h) == ENGRAM_WIRE_MALFORMED,
	       "header: request shorter than the smallest request refused");
	mkhdr(b, 1, ENGRAM_WIRE_REQUEST, 0, 0xffffffffU, 5);
	tap_ok(hdr(b, 16, &neg, true, true, &h) == ENGRAM_WIRE_MALFORMED,
	       "header: length 2^32-1 refused");
	mkhdr(b, 1, ENGRAM_WIRE_REQUEST, 0, 100, 0);
	tap_contains(hdr(b, 16, &neg, true, true, &h) ? err : NULL, "ticket 0",
		     "header: REQUEST with ticket 0 refused");
	mkhdr(b, 1, ENGRAM_WIRE_HEARTBEAT, 0, 16, 9);
	tap_ok(!hdr(b, 16, &neg, true, false, &h) && !hdr(b, 16, &neg, false, false, &h),
	       "header: HEARTBEAT accepted both ways");
	mkhdr(b, 1, ENGRAM_WIRE_HEARTBEAT, 0, 17, 9);
	tap_ok(hdr(b, 17, &neg, true, false, &h) == ENGRAM_WIRE_MALFORMED,
	       "header: HEARTBEAT with a body refused");
	mkhdr(b, 1, ENGRAM_WIRE_RESPONSE, 0, 32 + 2 * RB, 5);
	tap_ok(!hdr(b, 16, &neg, false, true, &h) &&
	       hdr(b, 32, &neg, false, false, &h) == ENGRAM_WIRE_MALFORMED,
	       "header: RESPONSE with rows is TCP only");
	mkhdr(b, 1, ENGRAM_WIRE_RESPONSE, 0, 32 + (neg.max_rows + 1) * RB, 5);
	tap_ok(hdr(b, 16, &neg, false, true, &h) == ENGRAM_WIRE_MALFORMED,
	       "header: TCP RESPONSE longer than max_rows rows refused");
	mkhdr(b, 1, ENGRAM_WIRE_CATALOG, 0, ENGRAM_WIRE_MAX_CATALOG_BYTES + 1, 0);
	tap_ok(hdr(b, 16, &neg, false, true, &h) == ENGRAM_WIRE_MALFORMED,
	       "header: CATALOG above 256 entries refused");
}

/* ---------------------------------------------------------------- request */

static void test_request_roundtrip(void)
{
	struct engram_wire_params neg = neg_default();
	struct engram_wire_req r = req_simple(288), p;
	struct engram_wire_place pl;
	int len, ok = 1;
	u32 i;

	len = build(&neg, &r);
	tap_ok(len == 48 + 24 + 288 * 4, "request of 288 rows builds to %d bytes", len);
	tap_ok(buf[0] == 1 && buf[1] == ENGRAM_WIRE_REQUEST && buf[4] == (u8)len &&
	       buf[8] == 0x88 && buf[15] == 0x11 && !memcmp(buf + 16, sha, 8) &&
	       buf[24] == 42 && buf[32] == (288 & 0xff) && buf[36] == (RB & 0xff) &&
	       buf[40] == 1 && buf[48] == 0x00 && buf[49] == 0x10 && buf[56] == 0xcd &&
	       buf[72] == 0 && buf[76] == 7,
	       "request bytes: little-endian fields at the documented offsets");
	tap_ok(parse(&neg, len, &p) == ENGRAM_WIRE_OK, "request parses (%s)", err);
	tap_ok(p.ticket == r.ticket && p.generation == 42 && !memcmp(p.digest, sha, 8) &&
	       p.nr_rows == 288 && p.stride == RB && p.nr_ranges == 1 &&
	       p.ranges[0].addr == r.ranges[0].addr && p.ranges[0].rkey == 0xabcd &&
	       p.ranges[0].length == 288 * RB && p.rows_le == buf + 72,
	       "parsed request equals what was built");
	for (i = 0; i < 288; i++)
		if (engram_wire_req_row(&p, i) != rows[i])
			ok = 0;
	tap_ok(ok, "every row index read back");
	memcpy(buf2, buf, len);
	p.rows_le = NULL;
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &neg, &p, rows, NULL) == len &&
	       !memcmp(buf, buf2, len), "re-encoding the parsed request gives the same bytes");

	/* Several ranges; each row inside one range. */
	r = req_simple(10);
	r.stride = 300;
	r.nr_ranges = 3;
	r.ranges[0].length = 3 * 300;			/* rows 0-2 */
	r.ranges[1].addr = 0x10000;
	r.ranges[1].rkey = 2;
	r.ranges[1].length = 300 + RB;			/* rows 3-4, row 4 ends it */
	r.ranges[2].addr = 0x20000;
	r.ranges[2].rkey = 3;
	r.ranges[2].length = 300 - RB + 4 * 300 + RB;	/* gap, then rows 5-9 */
	len = build(&neg, &r);
	tap_ok(len > 0 && parse(&neg, len, &p) == ENGRAM_WIRE_OK, "three-range request accepted (%s)",
	       err);
	ok = 1;
	for (i = 0; i < 10; i++) {
		static const u16 want_r[] = { 0, 0, 0, 1, 1, 2, 2, 2, 2, 2 };
		static const u64 want_o[] = { 0, 300, 600, 0, 300, 36, 336, 636, 936, 1236 };

		engram_wire_req_place(&p, i, &pl);
		if (pl.range != want_r[i] || pl.offset != want_o[i] ||
		    pl.addr != p.ranges[pl.range].addr + pl.offset ||
		    pl.rkey != p.ranges[pl.range].rkey ||
		    pl.offset + RB > p.ranges[pl.range].length)
			ok = 0;
	}
	tap_ok(ok, "row placement: range, offset, address and rkey of all 10 rows");
	r.ranges[2].length--;
	len = build(&neg, &r);
	tap_ok(len == -EINVAL, "builder refuses a destination one byte short");
	expect_status(&neg, 48 + 3 * 24 + 40, ENGRAM_WIRE_DEST_TOO_SMALL,
		      "three ranges one byte short");

	/* 49,152 rows: the largest Engram chunk. */
	r = req_simple(49152);
	len = build(&neg, &r);
	tap_ok(len == 48 + 24 + 49152 * 4 && parse(&neg, len, &p) == ENGRAM_WIRE_OK,
	       "49,152-row request round trip");
}

static void test_request_truncation(void)
{
	struct engram_wire_params neg = neg_default();
	struct engram_wire_req r = req_simple(5), p;
	int len, ok = 1, tickets = 1;
	size_t n;

	r.nr_ranges = 2;
	r.ranges[0].length = 2 * RB;
	r.ranges[1].length = 3 * RB;
	len = build(&neg, &r);
	for (n = 0; n < (size_t)len; n++) {
		if (parse(&neg, n, &p) != ENGRAM_WIRE_MALFORMED)
			ok = 0;
		if (n >= 16 && p.ticket != r.ticket)
			tickets = 0;
	}
	tap_ok(ok, "truncated at each of the %d shorter lengths: MALFORMED", len);
	tap_ok(tickets, "truncated requests still echo the ticket once the header is in");
	tap_ok(parse(&neg, len, &p) == ENGRAM_WIRE_OK, "the full request is accepted");
}

static void test_request_malformed(void)
{
	struct engram_wire_params neg = neg_default(), small;
	struct engram_wire_req r = req_simple(4), p;
	int len, i, all;

	len = build(&neg, &r);

	/* The length field lies. */
	put32(buf + 4, len + 1);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "length field one more than received");
	put32(buf + 4, len + 4);
	expect_status(&neg, len + 4, ENGRAM_WIRE_MALFORMED,
		      "length agrees with what came but not with the counts");
	put32(buf + 4, len - 1);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "length field one less than received");
	put32(buf + 4, len - 4);
	expect_status(&neg, len - 4, ENGRAM_WIRE_MALFORMED, "a row missing, length consistent");
	put32(buf + 4, len);
	expect_status(&neg, len, ENGRAM_WIRE_OK, "restored");

	buf[0] = 2;
	expect_status(&neg, len, ENGRAM_WIRE_BAD_VERSION, "header version 2");
	buf[0] = 0;
	expect_status(&neg, len, ENGRAM_WIRE_BAD_VERSION, "header version 0");
	buf[0] = 1;
	buf[1] = ENGRAM_WIRE_CATALOG_REQUEST;
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "catalog request type with a body");
	buf[1] = ENGRAM_WIRE_REQUEST;

	all = 1;
	for (i = 2; i < 4; i++) {
		buf[i] = 1;
		if (parse(&neg, len, &p) != ENGRAM_WIRE_MALFORMED)
			all = 0;
		buf[i] = 0;
	}
	for (i = 42; i < 48; i++) {
		buf[i] = 0x40;
		if (parse(&neg, len, &p) != ENGRAM_WIRE_MALFORMED ||
		    !strstr(err, i < 44 ? "flags" : "reserved"))
			all = 0;
		buf[i] = 0;
	}
	for (i = 60; i < 64; i++) {
		buf[i] = 1;
		if (parse(&neg, len, &p) != ENGRAM_WIRE_MALFORMED || !strstr(err, "range 0 reserved"))
			all = 0;
		buf[i] = 0;
	}
	tap_ok(all, "any nonzero flag or reserved byte (header, request, range): MALFORMED");
	expect_status(&neg, len, ENGRAM_WIRE_OK, "restored");

	put64(buf + 8, 0);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "ticket 0");
	put64(buf + 8, r.ticket);

	/* Zero rows, zero ranges: hand-made, the builder refuses them. */
	r.nr_rows = 0;
	tap_ok(build(&neg, &r) == -EINVAL, "builder refuses zero rows");
	r = req_simple(4);
	len = build(&neg, &r);
	put32(buf + 32, 0);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "zero rows");
	tap_contains(err, "request with 0 rows and 1 ranges", "zero rows: message says so");
	r = req_simple(4);
	len = build(&neg, &r);
	buf[40] = 0;
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "zero ranges");
	tap_contains(err, "request with 4 rows and 0 ranges", "zero ranges: message says so");

	/* Counts against the negotiated limits. */
	small = neg;
	small.max_rows = 100;
	r = req_simple(101);
	len = build(&neg, &r);
	expect_status(&small, len, ENGRAM_WIRE_TOO_MANY_ROWS, "101 rows with max_rows 100");
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &small, &r, rows, NULL) == -E2BIG,
	       "builder refuses 101 rows with max_rows 100 (E2BIG)");
	r = req_simple(100);
	len = build(&neg, &r);
	expect_status(&small, len, ENGRAM_WIRE_OK, "100 rows with max_rows 100");
	small = neg;
	small.max_ranges = 2;
	r = req_simple(3);
	r.nr_ranges = 3;
	r.ranges[0].length = RB;
	r.ranges[1].length = RB;
	r.ranges[2].length = RB;
	len = build(&neg, &r);
	expect_status(&small, len, ENGRAM_WIRE_TOO_MANY_RANGES, "3 ranges with max_ranges 2");
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &small, &r, rows, NULL) == -E2BIG,
	       "builder refuses 3 ranges with max_ranges 2 (E2BIG)");
	len = build(&neg, &r);
	buf[40] = 17;
	put32(buf + 4, len + 14 * 24);
	memset(buf + len, 0, 14 * 24);
	expect_status(&neg, len + 14 * 24, ENGRAM_WIRE_TOO_MANY_RANGES,
		      "17 ranges (above the hard 16)");
	small = neg;
	small.max_request_bytes = 200;
	r = req_simple(40);
	len = build(&neg, &r);
	expect_status(&small, len, ENGRAM_WIRE_MALFORMED, "frame above max_request_bytes");
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &small, &r, rows, NULL) == -E2BIG,
	       "builder refuses a frame above max_request_bytes");
	tap_ok(engram_wire_req_build(buf, 100, &neg, &r, rows, NULL) == -EMSGSIZE,
	       "builder refuses a buffer too small (EMSGSIZE)");
}

static void test_request_geometry(void)
{
	struct engram_wire_params neg = neg_default();
	struct engram_wire_req r, p;
	int len;

	r = req_simple(8);
	r.stride = RB - 1;
	tap_ok(build(&neg, &r) == -EINVAL, "builder refuses stride 263");
	r.stride = RB;
	len = build(&neg, &r);
	put32(buf + 36, RB - 1);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "stride 263");
	tap_contains(err, "stride 263 below the row size 264", "stride 263: message");
	put32(buf + 36, 0);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "stride 0");

	r = req_simple(8);
	r.stride = 1000;
	r.ranges[0].length = 7 * 1000 + RB;
	len = build(&neg, &r);
	expect_status(&neg, len, ENGRAM_WIRE_OK, "8 rows at stride 1000 in 7264 bytes");
	put64(buf + 64, 7 * 1000 + RB - 1);
	expect_status(&neg, len, ENGRAM_WIRE_DEST_TOO_SMALL, "range sum one byte short");
	tap_contains(err, "8 rows at stride 1000 need 7264 bytes, ranges hold 7263",
		     "one byte short: message gives both sizes");

	/* 65,536 rows at stride 2^32-1: the product needs 64 bits. */
	r = req_simple(65536);
	len = build(&neg, &r);
	put32(buf + 36, 0xffffffffU);
	{
		u64 need = 65535ULL * 0xffffffffULL + RB;
		u64 trunc = (u32)need;		/* what a 32-bit product would say */

		put64(buf + 64, trunc + 4096);
		expect_status(&neg, len, ENGRAM_WIRE_DEST_TOO_SMALL,
			      "stride * rows above 2^32 is not truncated");
		put64(buf + 64, need);
		expect_status(&neg, len, ENGRAM_WIRE_OK, "stride 2^32-1 with a range exactly big enough");
		put64(buf + 56, 0);
	}

	/* Range lengths that overflow 64 bits, wrapping ranges, empty ranges. */
	r = req_simple(2);
	r.nr_ranges = 2;
	r.ranges[0].length = RB;
	r.ranges[1].length = RB;
	len = build(&neg, &r);
	tap_ok(parse(&neg, len, &p) == ENGRAM_WIRE_OK, "two one-row ranges");
	put64(buf + 48, 0);
	put64(buf + 48 + 24, 0);
	put64(buf + 64, 1ULL << 63);
	put64(buf + 64 + 24, 1ULL << 63);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "range lengths summing to 2^64");
	tap_contains(err, "overflow", "sum overflow: message");
	put64(buf + 64, RB);
	put64(buf + 64 + 24, RB);
	put64(buf + 48 + 24, 0xffffffffffffff00ULL);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "range wrapping the address space");
	put64(buf + 48 + 24, 0);
	put64(buf + 64 + 24, 0);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "range of length 0");
	put64(buf + 64 + 24, RB);
	expect_status(&neg, len, ENGRAM_WIRE_OK, "restored");

	/* A row may not straddle two ranges. */
	put64(buf + 64, 100);
	put64(buf + 64 + 24, 1000);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "row 0 across ranges 0 and 1");
	tap_contains(err, "row 0 would straddle ranges 0 and 1", "straddle: message names the row");
	put64(buf + 64, RB + 1);
	put64(buf + 64 + 24, 1000);
	expect_status(&neg, len, ENGRAM_WIRE_MALFORMED, "row 1 across ranges 0 and 1");
	put64(buf + 64, 2 * RB);
	put64(buf + 64 + 24, 10);
	expect_status(&neg, len, ENGRAM_WIRE_OK, "ranges past the last row may be any size");
	r = req_simple(2);
	r.stride = 1000;
	r.nr_ranges = 3;
	r.ranges[0].length = 500;	/* row 0 and 236 bytes of gap */
	r.ranges[1].length = 1;		/* inside the gap */
	r.ranges[2].length = RB + 499;	/* rest of the gap, then row 1 */
	len = build(&neg, &r);
	tap_ok(len > 0 && parse(&neg, len, &p) == ENGRAM_WIRE_OK,
	       "a range that falls in the stride gap is allowed");
	{
		struct engram_wire_place pl;

		engram_wire_req_place(&p, 1, &pl);
		tap_ok(pl.range == 2 && pl.offset == 499, "and row 1 lands after it (range 2 + 499)");
	}
}

static void test_request_rows(void)
{
	struct engram_wire_params neg = neg_default();
	struct engram_wire_req r = req_simple(9), p;
	u32 bad = 99;
	int len;

	len = build(&neg, &r);
	parse(&neg, len, &p);
	tap_ok(engram_wire_req_check_rows(&p, 1000, 0, 1000, &bad) == ENGRAM_WIRE_OK && bad == 0,
	       "rows all below 1000: OK, bad_index 0");

	rows[0] = 1000;
	len = build(&neg, &r);
	parse(&neg, len, &p);
	tap_ok(engram_wire_req_check_rows(&p, 1000, 0, 1000, &bad) == ENGRAM_WIRE_ROW_OUT_OF_RANGE && bad == 0,
	       "out-of-range row first: bad_index 0");
	r = req_simple(9);
	rows[4] = 0xffffffffU;
	rows[6] = 5000;
	len = build(&neg, &r);
	parse(&neg, len, &p);
	tap_ok(engram_wire_req_check_rows(&p, 1000, 0, 1000, &bad) == ENGRAM_WIRE_ROW_OUT_OF_RANGE && bad == 4,
	       "out-of-range rows in the middle: bad_index of the first (4)");
	r = req_simple(9);
	rows[8] = 1000;
	len = build(&neg, &r);
	parse(&neg, len, &p);
	tap_ok(engram_wire_req_check_rows(&p, 1000, 0, 1000, &bad) == ENGRAM_WIRE_ROW_OUT_OF_RANGE && bad == 8,
	       "out-of-range row last: bad_index 8");
	tap_ok(engram_wire_req_check_rows(&p, 1001, 0, 1001, &bad) == ENGRAM_WIRE_OK,
	       "row 1000 is fine in a table of 1001 rows");
	r = req_simple(9);
	memset(rows, 0, 9 * sizeof(rows[0]));
	rows[3] = rows[7] = 999;
	len = build(&neg, &r);
	tap_ok(parse(&neg, len, &p) == ENGRAM_WIRE_OK &&
	       engram_wire_req_check_rows(&p, 1000, 0, 1000, &bad) == ENGRAM_WIRE_OK,
	       "duplicate rows are allowed");
	tap_ok(engram_wire_req_check_rows(&p, 1ULL << 40, 0, 1ULL << 40, &bad) == ENGRAM_WIRE_OK,
	       "table_rows above 2^32 does not wrap");
}

/* ---------------------------------------------------------------- response */

static int resp_dec(const u8 *b, size_t len, const struct engram_wire_params *neg, bool tcp,
		    struct engram_wire_resp *out)
{
	err[0] = '\0';
	return engram_wire_resp_decode(b, len, neg, tcp, out, err, sizeof(err));
}

static void test_response(void)
{
	struct engram_wire_params neg = neg_default();
	struct engram_wire_resp r, d;
	u8 b[32];
	int st, ok = 1, tcp;

	for (tcp = 0; tcp < 2; tcp++) {
		/* Version 1's statuses: version 3 adds ROW_NOT_HELD (test_response_v3). */
		for (st = 0; st <= ENGRAM_WIRE_INTERNAL; st++) {
			memset(&r, 0, sizeof(r));
			r.ticket = 0x0102030405060708ULL + st;
			r.status = st;
			if (st == ENGRAM_WIRE_OK)
				r.bytes = 288 * RB;
			if (st == ENGRAM_WIRE_ROW_OUT_OF_RANGE)
				r.bad_index = 287;
			if (engram_wire_resp_encode(b, sizeof(b), &neg, tcp, &r) != 32 ||
			    resp_dec(b, 32, &neg, tcp, &d) || memcmp(&r, &d, sizeof(r)) ||
			    b[4] + (b[5] << 8) + (b[6] << 16) != 32 + (tcp ? (int)r.bytes : 0))
				ok = 0;
		}
	}
	tap_ok(ok, "response round trip for all 12 statuses, RDMA and TCP");
	memset(&r, 0, sizeof(r));
	r.ticket = 77;
	r.status = ENGRAM_WIRE_OK;
	r.bytes = 2 * RB;
	engram_wire_resp_encode(b, sizeof(b), &neg, false, &r);
	tap_ok(b[1] == ENGRAM_WIRE_RESPONSE && b[4] == 32 && b[16] == 0 && b[24] == (2 * RB & 0xff) &&
	       b[25] == (2 * RB) >> 8, "response bytes at the documented offsets");
	tap_ok(engram_wire_frame_type(b, 32) == ENGRAM_WIRE_RESPONSE &&
	       engram_wire_frame_type(b, ENGRAM_WIRE_HDR_BYTES) == ENGRAM_WIRE_RESPONSE &&
	       engram_wire_frame_type(b, ENGRAM_WIRE_HDR_BYTES - 1) == 0 &&
	       engram_wire_frame_type(b, 0) == 0,
	       "frame type peeked from a whole header only");
	tap_ok(resp_dec(b, 32 + 2 * RB, &neg, false, &d) == -EPROTO,
	       "RDMA response of another size refused");
	tap_ok(resp_dec(b, 32, &neg, true, &d) == -EPROTO,
	       "an RDMA-style response (length 32 with bytes) is refused over TCP");
	engram_wire_resp_encode(b, sizeof(b), &neg, true, &r);
	tap_ok(resp_dec(b, 32, &neg, false, &d) == -EPROTO,
	       "a TCP-style response is refused over RDMA");
	put32(b + 4, 32 + RB);
	tap_contains(resp_dec(b, 32, &neg, true, &d) ? err : NULL, "32 + 528 row bytes expected",
		     "TCP response whose length disagrees with bytes refused");

	engram_wire_resp_encode(b, sizeof(b), &neg, false, &r);
	b[18] = 1;
	tap_contains(resp_dec(b, 32, &neg, false, &d) ? err : NULL, "reserved",
		     "response reserved field refused");
	b[18] = 0;
	b[16] = 12;
	tap_contains(resp_dec(b, 32, &neg, false, &d) ? err : NULL, "unknown status 12",
		     "unknown status refused");
	b[16] = ENGRAM_WIRE_UNKNOWN_TABLE;
	tap_contains(resp_dec(b, 32, &neg, false, &d) ? err : NULL, "with status unknown_table",
		     "a refusal with bytes refused");
	put64(b + 24, 0);
	b[20] = 3;
	tap_contains(resp_dec(b, 32, &neg, false, &d) ? err : NULL, "bad_index 3 with status",
		     "bad_index with a status other than ROW_OUT_OF_RANGE refused");
	b[20] = 0;
	tap_ok(!resp_dec(b, 32, &neg, false, &d) && d.status == ENGRAM_WIRE_UNKNOWN_TABLE,
	       "clean UNKNOWN_TABLE accepted");
	b[16] = ENGRAM_WIRE_OK;
	tap_ok(resp_dec(b, 32, &neg, false, &d) == -EPROTO, "OK with 0 bytes refused");
	put64(b + 24, RB + 1);
	tap_ok(resp_dec(b, 32, &neg, false, &d) == -EPROTO, "OK with a partial row refused");
	put64(b + 24, (u64)(neg.max_rows + 1) * RB);
	tap_ok(resp_dec(b, 32, &neg, false, &d) == -EPROTO, "OK with more than max_rows rows refused");
	put64(b + 24, RB);
	put64(b + 8, 0);
	tap_ok(resp_dec(b, 32, &neg, false, &d) == -EPROTO, "OK with ticket 0 refused");
	put64(b + 24, 0);
	b[16] = ENGRAM_WIRE_MALFORMED;
	tap_ok(!resp_dec(b, 32, &neg, false, &d) && !d.ticket,
	       "MALFORMED with ticket 0 (unreadable request header) accepted");
	b[1] = ENGRAM_WIRE_CATALOG;
	tap_ok(resp_dec(b, 32, &neg, false, &d) == -EPROTO, "a catalog is not a response");

	r.status = ENGRAM_WIRE_BUSY;
	tap_ok(engram_wire_resp_encode(b, sizeof(b), &neg, false, &r) == -EINVAL,
	       "encoder refuses BUSY with bytes");
	r.bytes = 0;
	r.bad_index = 1;
	tap_ok(engram_wire_resp_encode(b, sizeof(b), &neg, false, &r) == -EINVAL,
	       "encoder refuses bad_index with BUSY");
	r.bad_index = 0;
	r.ticket = 0;
	tap_ok(engram_wire_resp_encode(b, sizeof(b), &neg, false, &r) == -EINVAL,
	       "encoder refuses ticket 0 with BUSY");
	r.ticket = 1;
	tap_ok(engram_wire_resp_encode(b, 31, &neg, false, &r) == -EMSGSIZE,
	       "encoder refuses a 31-byte buffer");
}

static void test_simple(void)
{
	struct engram_wire_params neg = neg_default();
	u64 t = 0;
	u8 b[32];

	tap_ok(engram_wire_simple_encode(b, 16, &neg, ENGRAM_WIRE_CATALOG_REQUEST, 5) == 16 &&
	       engram_wire_simple_parse(b, 16, &neg, true, ENGRAM_WIRE_CATALOG_REQUEST, &t,
					err, sizeof(err)) == ENGRAM_WIRE_OK && t == 5,
	       "CATALOG_REQUEST round trip");
	tap_ok(engram_wire_simple_parse(b, 16, &neg, false, ENGRAM_WIRE_CATALOG_REQUEST, &t,
					err, sizeof(err)) == ENGRAM_WIRE_MALFORMED,
	       "CATALOG_REQUEST from the server refused");
	tap_ok(engram_wire_simple_parse(b, 16, &neg, true, ENGRAM_WIRE_HEARTBEAT, &t,
					err, sizeof(err)) == ENGRAM_WIRE_MALFORMED,
	       "CATALOG_REQUEST where a HEARTBEAT is expected refused");
	tap_ok(engram_wire_simple_encode(b, 16, &neg, ENGRAM_WIRE_HEARTBEAT, 6) == 16 &&
	       engram_wire_simple_parse(b, 16, &neg, false, ENGRAM_WIRE_HEARTBEAT, &t,
					err, sizeof(err)) == ENGRAM_WIRE_OK && t == 6,
	       "HEARTBEAT round trip (echo to the client)");
	tap_ok(engram_wire_simple_parse(b, 15, &neg, true, ENGRAM_WIRE_HEARTBEAT, &t,
					err, sizeof(err)) == ENGRAM_WIRE_MALFORMED,
	       "HEARTBEAT truncated refused");
	tap_ok(engram_wire_simple_encode(b, 16, &neg, ENGRAM_WIRE_HEARTBEAT, 0) == -EINVAL &&
	       engram_wire_simple_encode(b, 16, &neg, ENGRAM_WIRE_REQUEST, 1) == -EINVAL &&
	       engram_wire_simple_encode(b, 15, &neg, ENGRAM_WIRE_HEARTBEAT, 1) == -EMSGSIZE,
	       "simple encoder refuses ticket 0, other types, small buffers");
}

/* ---------------------------------------------------------------- catalog */

static int cat_parse(size_t len, struct engram_wire_catalog_view *v)
{
	struct engram_wire_params neg = neg_default();

	err[0] = '\0';
	return engram_wire_catalog_parse(buf, len, &neg, v, err, sizeof(err));
}

static void mktable(struct engram_wire_table *t, const char *name, u64 gen)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	memcpy(t->sha256, sha, sizeof(t->sha256));
	t->sha256[31] = (u8)gen;
	t->generation = gen;
	t->rows = 384006168;
	t->held_rows = t->rows;
	t->weight_offset = 4096 + gen;
	t->scale_offset = t->weight_offset + t->rows * 256;
	t->row_bytes = RB;
	t->state = ENGRAM_TABLE_READY;
}

static void expect_cat_bad(const struct engram_wire_table *tabs, u32 n, const char *phrase,
			   const char *what)
{
	struct engram_wire_params neg = neg_default();

	if (!tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, n) == -EINVAL,
		    "catalog encoder refuses %s", what))
		return;
	/* Force the bad bytes on the wire and check the parser's message. */
	{
		struct engram_wire_catalog_view v;
		static struct engram_wire_table ok[ENGRAM_MAX_TABLES];
		u32 i;
		int len;

		for (i = 0; i < n; i++)
			mktable(&ok[i], "t", 100 + i);
		for (i = 0; i < n; i++)
			snprintf(ok[i].name, sizeof(ok[i].name), "ok%u", i);
		len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, ok, n);
		for (i = 0; i < n; i++) {
			u8 *e = buf + 24 + i * 120;

			memcpy(e, tabs[i].name, 64);
			memcpy(e + 64, tabs[i].sha256, 32);
			put64(e + 96, tabs[i].generation);
			put64(e + 104, tabs[i].rows);
			put32(e + 112, tabs[i].row_bytes);
			put32(e + 116, tabs[i].state);
		}
		tap_contains(cat_parse(len, &v) == -EPROTO ? err : NULL, phrase,
			     "catalog parser refuses it too");
	}
}

static void test_catalog(void)
{
	static struct engram_wire_table tabs[ENGRAM_MAX_TABLES + 1];
	struct engram_wire_params neg = neg_default();
	struct engram_wire_catalog_view v;
	struct engram_wire_table t;
	int len, ok = 1;
	u32 i;

	mktable(&tabs[0], "layers.1.engram", 7);
	mktable(&tabs[1], "layers.14.engram", 8);
	mktable(&tabs[2], "a-b_C.9", 9);
	tabs[2].state = ENGRAM_TABLE_LOADING;
	memset(tabs[2].sha256, 0, 32);
	tabs[2].rows = 0xffffffffULL;
	tabs[2].held_rows = tabs[2].rows;
	memset(tabs[0].name + 16, 'x', 10);	/* garbage after the NUL is not sent */
	len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, 3);
	tap_ok(len == 24 + 3 * 120, "catalog of 3 tables encodes to 384 bytes");
	tap_ok(buf[1] == ENGRAM_WIRE_CATALOG && buf[16] == 3 && !memcmp(buf + 24, "layers.1.engram", 16) &&
	       all_zero_test(buf + 24 + 15, 49) && buf[24 + 64] == 0xde && buf[24 + 96] == 7 &&
	       buf[24 + 112] == (RB & 0xff) && buf[24 + 116] == ENGRAM_TABLE_READY,
	       "catalog bytes: NUL-padded name, digest, generation, row_bytes, state");
	tap_ok(!cat_parse(len, &v) && v.nr_entries == 3 && v.ticket == 0,
	       "catalog parses (%s)", err);
	for (i = 0; i < 3; i++) {
		engram_wire_catalog_get(&v, i, &t);
		if (strcmp(t.name, tabs[i].name) || memcmp(t.sha256, tabs[i].sha256, 32) ||
		    t.generation != tabs[i].generation || t.rows != tabs[i].rows ||
		    t.row_bytes != RB || t.state != tabs[i].state)
			ok = 0;
	}
	tap_ok(ok, "every catalog entry read back");
	memcpy(buf2, buf, len);
	for (i = 0; i < 3; i++)
		engram_wire_catalog_get(&v, i, &tabs[i]);
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, 3) == len &&
	       !memcmp(buf, buf2, len), "re-encoding the parsed catalog gives the same bytes");

	len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 12, tabs, 0);
	tap_ok(len == 24 && !cat_parse(len, &v) && v.nr_entries == 0 && v.ticket == 12,
	       "empty catalog answering ticket 12");
	for (i = 0; i <= ENGRAM_MAX_TABLES; i++) {
		char n[16];

		snprintf(n, sizeof(n), "t%u", i);
		mktable(&tabs[i], n, 1000 + i);
	}
	len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, ENGRAM_MAX_TABLES);
	tap_ok(len == 24 + 256 * 120 && !cat_parse(len, &v) && v.nr_entries == 256,
	       "catalog of 256 tables (30,744 bytes)");
	neg = neg_v(3);
	len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, ENGRAM_MAX_TABLES);
	tap_ok(len == 24 + 256 * 136, "in version 3, 34,840 bytes");
	neg = neg_v(4);
	len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, ENGRAM_MAX_TABLES);
	tap_ok(len == ENGRAM_WIRE_MAX_CATALOG_BYTES && len == 24 + 256 * 152,
	       "in version 4, 38,936 bytes: ENGRAM_WIRE_MAX_CATALOG_BYTES");
	neg = neg_default();
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, 257) == -EINVAL,
	       "catalog of 257 tables refused");
	tap_ok(engram_wire_catalog_encode(buf, 100, &neg, 0, tabs, 1) == -EMSGSIZE,
	       "catalog encoder refuses a small buffer");
	len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, 2);
	put32(buf + 16, 3);
	tap_contains(cat_parse(len, &v) ? err : NULL, "catalog of 3 entries in 264 bytes",
		     "catalog whose count disagrees with its length refused");
	put32(buf + 16, 2);
	put32(buf + 20, 1);
	tap_contains(cat_parse(len, &v) ? err : NULL, "reserved", "catalog reserved field refused");
	put32(buf + 20, 0);
	tap_ok(!cat_parse(len, &v), "restored");
	tap_ok(cat_parse(len - 1, &v) == -EPROTO, "catalog one byte short refused");

	/* Names. */
	mktable(&tabs[0], "", 1);
	expect_cat_bad(tabs, 1, "entry 0: bad table name", "an empty name");
	mktable(&tabs[0], "has space", 1);
	expect_cat_bad(tabs, 1, "bad table name", "a name with a space");
	mktable(&tabs[0], "a/b", 1);
	expect_cat_bad(tabs, 1, "bad table name", "a name with '/'");
	mktable(&tabs[0], "caf\xc3\xa9", 1);
	expect_cat_bad(tabs, 1, "bad table name", "a non-ASCII name");
	mktable(&tabs[0], "x", 1);
	memset(tabs[0].name, 'n', 64);
	expect_cat_bad(tabs, 1, "bad table name", "a 64-byte name without NUL");
	mktable(&tabs[0], "x", 1);
	memset(tabs[0].name, 'n', 63);
	tabs[0].name[63] = '\0';
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, 1) > 0,
	       "a 63-byte name is allowed");
	mktable(&tabs[0], "ok", 1);
	len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, 1);
	buf[24 + 10] = 'z';
	tap_contains(cat_parse(len, &v) ? err : NULL, "not NUL-padded",
		     "catalog name with bytes after its NUL refused");
	mktable(&tabs[0], "same", 1);
	mktable(&tabs[1], "same", 2);
	expect_cat_bad(tabs, 2, "are both 'same'", "duplicate names");
	mktable(&tabs[0], "one", 5);
	mktable(&tabs[1], "two", 5);
	tabs[1].sha256[31] ^= 1;	/* same prefix, same generation */
	expect_cat_bad(tabs, 2, "same identity", "two tables with one identity");
	/* The sorted check: duplicates far apart among 256, and none among 256. */
	for (i = 0; i < ENGRAM_MAX_TABLES; i++) {
		char n[16];

		snprintf(n, sizeof(n), "u%u", (i * 97) % ENGRAM_MAX_TABLES);
		mktable(&tabs[i], n, 3000 + i);
	}
	len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, ENGRAM_MAX_TABLES);
	tap_ok(len > 0 && !cat_parse(len, &v) && v.nr_entries == ENGRAM_MAX_TABLES,
	       "256 entries of distinct names and identities pass");
	memcpy(tabs[250].name, tabs[3].name, sizeof(tabs[3].name));
	expect_cat_bad(tabs, ENGRAM_MAX_TABLES, "entries 3 and 250 are both 'u35'",
		       "entries 3 and 250 of 256 with one name: both named");
	snprintf(tabs[250].name, sizeof(tabs[250].name), "fresh");
	memcpy(tabs[255].sha256, tabs[0].sha256, sizeof(tabs[0].sha256));
	tabs[255].generation = tabs[0].generation;
	expect_cat_bad(tabs, ENGRAM_MAX_TABLES, "entries 0 and 255 have the same identity",
		       "entries 0 and 255 of 256 with one identity");
	tabs[255].generation += ENGRAM_MAX_TABLES;
	len = engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, ENGRAM_MAX_TABLES);
	tap_ok(len > 0 && !cat_parse(len, &v), "other generations, they pass");

	/* Other fields. */
	mktable(&tabs[0], "t", 1);
	tabs[0].rows = 0;
	tabs[0].held_rows = 0;
	expect_cat_bad(tabs, 1, "0 rows not in 1-4294967295", "a table of 0 rows");
	tabs[0].rows = 1ULL << 32;
	tabs[0].held_rows = tabs[0].rows;
	expect_cat_bad(tabs, 1, "4294967296 rows", "a table of 2^32 rows");
	tabs[0].rows = 5;
	tabs[0].held_rows = 5;
	tabs[0].row_bytes = 263;
	expect_cat_bad(tabs, 1, "row_bytes 263", "row_bytes 263");
	tabs[0].row_bytes = RB;
	tabs[0].state = 0;
	expect_cat_bad(tabs, 1, "unknown state 0", "state 0");
	tabs[0].state = ENGRAM_TABLE_FAILED + 1;
	expect_cat_bad(tabs, 1, "unknown state 5", "state 5");
	tabs[0].state = ENGRAM_TABLE_READY;
	memset(tabs[0].sha256, 0, 32);
	expect_cat_bad(tabs, 1, "servable table without a digest", "a READY table with no digest");
	tabs[0].state = ENGRAM_TABLE_FAILED;
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, 1) > 0,
	       "a FAILED table with no digest is listed");

	tap_ok(engram_wire_name_valid("a", 2) && !engram_wire_name_valid("a", 1) &&
	       !engram_wire_name_valid("", 64) && engram_wire_name_valid("A.z_0-9", 64),
	       "name_valid: needs the NUL within size, 1+ bytes of the charset");
}

/* Seeds for fuzz_wire: one valid frame of each kind. */
static int write_seed(const char *dir, const char *name, const void *data, int len)
{
	char path[4096];
	FILE *f;

	if (len <= 0)
		return -1;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != (size_t)len) {
		perror(path);
		if (f)
			fclose(f);
		return -1;
	}
	return fclose(f) ? -1 : 0;
}

static int write_seeds(const char *dir)
{
	struct engram_wire_params neg = neg_default();
	struct engram_wire_table tabs[3];
	struct engram_wire_resp rsp = { .ticket = 9, .status = ENGRAM_WIRE_OK, .bytes = 3 * RB };
	struct engram_wire_req r;
	int ret = 0;
	u8 b[64] = { 0 };

	ret |= write_seed(dir, "hello", b, engram_wire_hello_encode(b, 48, &neg));
	ret |= write_seed(dir, "hello-padded", b, 56);
	ret |= write_seed(dir, "hello-frame", b, engram_wire_hello_frame_encode(b, 64, &neg));
	r = req_simple(3);
	r.nr_ranges = 2;
	r.ranges[0].length = RB;
	r.ranges[1].length = 2 * RB + 5;
	ret |= write_seed(dir, "request-small", buf, build(&neg, &r));
	r = req_simple(40);
	r.stride = 300;
	r.nr_ranges = 3;
	r.ranges[0].length = 10 * 300;
	r.ranges[1].length = 10 * 300;
	r.ranges[2].length = 20 * 300;
	ret |= write_seed(dir, "request-3-ranges", buf, build(&neg, &r));
	ret |= write_seed(dir, "response-rdma", b, engram_wire_resp_encode(b, 32, &neg, false, &rsp));
	ret |= write_seed(dir, "response-tcp", b, engram_wire_resp_encode(b, 32, &neg, true, &rsp));
	rsp = (struct engram_wire_resp){ .ticket = 9, .status = ENGRAM_WIRE_ROW_OUT_OF_RANGE,
					 .bad_index = 2 };
	ret |= write_seed(dir, "response-refused", b,
			  engram_wire_resp_encode(b, 32, &neg, false, &rsp));
	ret |= write_seed(dir, "catalog-request", b,
			  engram_wire_simple_encode(b, 16, &neg, ENGRAM_WIRE_CATALOG_REQUEST, 3));
	ret |= write_seed(dir, "heartbeat", b,
			  engram_wire_simple_encode(b, 16, &neg, ENGRAM_WIRE_HEARTBEAT, 4));
	mktable(&tabs[0], "layers.1.engram", 7);
	mktable(&tabs[1], "layers.14.engram", 8);
	mktable(&tabs[2], "loading", 9);
	tabs[2].state = ENGRAM_TABLE_LOADING;
	ret |= write_seed(dir, "catalog", buf,
			  engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, 3));

	/* Version 3 (fuzz_wire's third set of limits): slots, rows held. */
	neg = neg_v(3);
	r = req_simple(4);
	r.flags = ENGRAM_WIRE_REQ_SLOTS;
	r.ranges[0].length = 8 * RB;
	{
		static const u32 slots[4] = { 7, 1, 0, 4 };

		ret |= write_seed(dir, "request-slots", buf,
				  engram_wire_req_build(buf, sizeof(buf), &neg, &r, rows, slots));
	}
	rsp = (struct engram_wire_resp){ .ticket = 9, .status = ENGRAM_WIRE_ROW_NOT_HELD,
					 .bad_index = 3 };
	ret |= write_seed(dir, "response-not-held", b,
			  engram_wire_resp_encode(b, 32, &neg, false, &rsp));
	tabs[1].held_first = 1000;
	tabs[1].held_rows = 200000;
	ret |= write_seed(dir, "catalog-v3", buf,
			  engram_wire_catalog_encode(buf, sizeof(buf), &neg, 0, tabs, 3));
	return ret ? 1 : 0;
}

/* ---------------------------------------------------------------- version 5: kept keys */

static void test_kept(void)
{
	struct engram_wire_params v5 = neg_v(5), v4 = neg_v(4);
	struct engram_wire_req r = req_simple(4), p;
	u32 slots[4] = { 3, 0, 2, 1 };
	int len;

	r.flags = ENGRAM_WIRE_REQ_KEPT_KEYS;
	len = engram_wire_req_build(buf, sizeof(buf), &v5, &r, rows, NULL);
	tap_ok(len == 48 + 24 + 4 * 4 && buf[42] == ENGRAM_WIRE_REQ_KEPT_KEYS &&
	       parse(&v5, len, &p) == ENGRAM_WIRE_OK && p.flags == ENGRAM_WIRE_REQ_KEPT_KEYS,
	       "version 5: a request that keeps its keys says so with flag 2 (%s)", err);
	buf[0] = 4;
	tap_ok(parse(&v4, len, &p) == ENGRAM_WIRE_MALFORMED && strstr(err, "flags"),
	       "version 4 refuses the flag as malformed (%s)", err);
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &v4, &r, rows, NULL) == -EINVAL,
	       "the builder refuses kept keys on a version 4 connection");
	r.flags = ENGRAM_WIRE_REQ_KEPT_KEYS | ENGRAM_WIRE_REQ_SLOTS;
	len = engram_wire_req_build(buf, sizeof(buf), &v5, &r, rows, slots);
	tap_ok(len == 48 + 24 + 4 * 8 && parse(&v5, len, &p) == ENGRAM_WIRE_OK &&
	       p.flags == (ENGRAM_WIRE_REQ_KEPT_KEYS | ENGRAM_WIRE_REQ_SLOTS),
	       "kept keys and slots together (%s)", err);
	r.flags = 4;
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &v5, &r, rows, NULL) == -EINVAL,
	       "a flag version 5 does not know is refused");
}

/* ---------------------------------------------------------------- version 3: shards */

static void test_slots(void)
{
	struct engram_wire_params v3 = neg_v(3), v2 = neg_v(2);
	struct engram_wire_req r = req_simple(4), p;
	struct engram_wire_place pl;
	u32 slots[4] = { 9, 0, 5, 2 };
	int len, ok = 1;
	u32 i;

	/* Ten places, four of them filled. */
	r.ranges[0].length = 10ULL * RB;
	r.flags = ENGRAM_WIRE_REQ_SLOTS;
	len = engram_wire_req_build(buf, sizeof(buf), &v3, &r, rows, slots);
	tap_ok(len == 48 + 24 + 4 * 8 && buf[42] == ENGRAM_WIRE_REQ_SLOTS,
	       "version 3: a request with slots is 8 bytes a row, flags 1 at offset 42");
	tap_ok(parse(&v3, len, &p) == ENGRAM_WIRE_OK && p.flags == ENGRAM_WIRE_REQ_SLOTS &&
	       p.nr_slots == 10 && p.slots_le, "it parses, with 10 places (%s)", err);
	for (i = 0; i < 4; i++) {
		engram_wire_req_place(&p, i, &pl);
		if (engram_wire_req_slot(&p, i) != slots[i] || engram_wire_req_row(&p, i) != rows[i] ||
		    pl.offset != (u64)slots[i] * RB || pl.addr != r.ranges[0].addr + slots[i] * RB)
			ok = 0;
	}
	tap_ok(ok, "row i lands at slots[i] * stride");
	tap_ok(engram_wire_req_build(buf2, sizeof(buf2), &v3, &p, rows, slots) == len &&
	       !memcmp(buf, buf2, len), "the parsed request builds to the same bytes");
	buf[0] = 2;
	tap_ok(parse(&v2, len, &p) == ENGRAM_WIRE_MALFORMED,
	       "version 2 refuses the slots flag as malformed (%s)", err);
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &v2, &r, rows, slots) == -EINVAL,
	       "the builder refuses slots on a version 2 connection");
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &v3, &r, rows, NULL) == -EINVAL,
	       "the builder refuses the slots flag without slots");
	r.flags = 0;
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &v3, &r, rows, slots) == -EINVAL,
	       "and slots without the flag");
	r.flags = 2;
	tap_ok(engram_wire_req_build(buf, sizeof(buf), &v3, &r, rows, NULL) == -EINVAL,
	       "and a flag version 3 does not know");
	r.flags = 0;
	len = engram_wire_req_build(buf, sizeof(buf), &v3, &r, rows, NULL);
	tap_ok(len == 48 + 24 + 4 * 4 && parse(&v3, len, &p) == ENGRAM_WIRE_OK && p.nr_slots == 4 &&
	       !p.slots_le && engram_wire_req_slot(&p, 3) == 3,
	       "version 3 without slots: as before, row i at i * stride");

	/* A slot beyond the ranges, and a slot whose row straddles two. */
	r = req_simple(4);
	r.flags = ENGRAM_WIRE_REQ_SLOTS;
	r.ranges[0].length = 9ULL * RB;
	len = engram_wire_req_build(buf, sizeof(buf), &v3, &r, rows, slots);
	tap_ok(len == -EINVAL, "the builder refuses slot 9 of 9 places");
	r.ranges[0].length = 10ULL * RB;
	len = engram_wire_req_build(buf, sizeof(buf), &v3, &r, rows, slots);
	put32(buf + 48 + 24 + 16 + 4, 10);	/* slot of row 1: 0 -> 10 */
	expect_status(&v3, len, ENGRAM_WIRE_DEST_TOO_SMALL, "slot 10 of 10 places");
	r.nr_ranges = 2;
	r.stride = 512;
	r.ranges[0].length = 5ULL * 512 + 100;	/* slot 5 would straddle */
	r.ranges[1].addr = 0x7f0000100000ULL;
	r.ranges[1].length = 8ULL * 512;
	slots[0] = 4;
	slots[2] = 3;
	len = engram_wire_req_build(buf, sizeof(buf), &v3, &r, rows, slots);
	tap_ok(len > 0 && parse(&v3, len, &p) == ENGRAM_WIRE_OK,
	       "two ranges, slots below the boundary: accepted (%s)", err);
	put32(buf + 48 + 48 + 16, 5);		/* slot of row 0: 4 -> 5 */
	expect_status(&v3, len, ENGRAM_WIRE_MALFORMED, "a slot whose row straddles two ranges");
	tap_contains(err, "straddle", "... and the reason says so");
}

static void test_held_rows(void)
{
	struct engram_wire_params v3 = neg_v(3);
	struct engram_wire_req r = req_simple(3), p;
	u32 bad = 99;
	int len;

	rows[0] = 100;
	rows[1] = 200;
	rows[2] = 50;
	len = build(&v3, &r);
	tap_ok(len > 0 && parse(&v3, len, &p) == ENGRAM_WIRE_OK, "three rows: 100, 200, 50");
	tap_ok(engram_wire_req_check_rows(&p, 1000, 0, 1000, &bad) == ENGRAM_WIRE_OK && !bad,
	       "the whole table held: all served");
	tap_ok(engram_wire_req_check_rows(&p, 1000, 50, 151, &bad) == ENGRAM_WIRE_OK && !bad,
	       "rows 50-200 held: all served");
	tap_ok(engram_wire_req_check_rows(&p, 1000, 50, 150, &bad) == ENGRAM_WIRE_ROW_NOT_HELD &&
	       bad == 1, "rows 50-199 held: ROW_NOT_HELD at position 1");
	tap_ok(engram_wire_req_check_rows(&p, 1000, 51, 500, &bad) == ENGRAM_WIRE_ROW_NOT_HELD &&
	       bad == 2, "rows 51-550 held: ROW_NOT_HELD at position 2 (below the shard)");
	tap_ok(engram_wire_req_check_rows(&p, 150, 0, 150, &bad) == ENGRAM_WIRE_ROW_OUT_OF_RANGE &&
	       bad == 1, "a 150-row table: ROW_OUT_OF_RANGE at position 1");
	tap_ok(engram_wire_req_check_rows(&p, 201, 150, 51, &bad) == ENGRAM_WIRE_ROW_NOT_HELD &&
	       bad == 0, "the first bad row decides: not held at 0 before out of range");
}

static void test_response_v3(void)
{
	struct engram_wire_params v3 = neg_v(3), v2 = neg_v(2);
	struct engram_wire_resp r = { .ticket = 5, .status = ENGRAM_WIRE_ROW_NOT_HELD,
				      .bad_index = 7 }, got;
	int len;

	len = engram_wire_resp_encode(buf, sizeof(buf), &v3, false, &r);
	tap_ok(len == ENGRAM_WIRE_RESPONSE_BYTES &&
	       !engram_wire_resp_decode(buf, len, &v3, false, &got, err, sizeof(err)) &&
	       got.status == ENGRAM_WIRE_ROW_NOT_HELD && got.bad_index == 7,
	       "version 3: ROW_NOT_HELD with its bad_index round-trips (%s)", err);
	tap_ok(engram_wire_resp_encode(buf, sizeof(buf), &v2, false, &r) == -EINVAL,
	       "version 2: the encoder refuses ROW_NOT_HELD");
	buf[0] = 2;
	err[0] = '\0';
	tap_ok(engram_wire_resp_decode(buf, len, &v2, false, &got, err, sizeof(err)) == -EPROTO,
	       "and the decoder too");
	tap_contains(err, "unknown status 12 in version 2", "... saying why");
}

static void test_catalog_v3(void)
{
	struct engram_wire_params v3 = neg_v(3), v2 = neg_v(2);
	struct engram_wire_catalog_view v;
	struct engram_wire_table tabs[2], t;
	int len;

	mktable(&tabs[0], "whole", 1);
	mktable(&tabs[1], "shard", 2);
	tabs[1].held_first = 1000;
	tabs[1].held_rows = 5000;
	len = engram_wire_catalog_encode(buf, sizeof(buf), &v3, 0, tabs, 2);
	tap_ok(len == 24 + 2 * 136, "version 3: 136-byte entries");
	err[0] = '\0';
	tap_ok(len > 0 && !engram_wire_catalog_parse(buf, len, &v3, &v, err, sizeof(err)) &&
	       v.nr_entries == 2 && v.entry_bytes == 136, "it parses (%s)", err);
	engram_wire_catalog_get(&v, 0, &t);
	tap_ok(!t.held_first && t.held_rows == t.rows, "a whole table holds rows 0 to rows");
	engram_wire_catalog_get(&v, 1, &t);
	tap_ok(!strcmp(t.name, "shard") && t.held_first == 1000 && t.held_rows == 5000,
	       "a shard holds its 5000 rows from row 1000");
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &v2, 0, tabs, 2) == -EINVAL,
	       "version 2 cannot list a shard: the encoder refuses it");
	len = engram_wire_catalog_encode(buf, sizeof(buf), &v2, 0, tabs, 1);
	err[0] = '\0';
	tap_ok(len == 24 + 120 && !engram_wire_catalog_parse(buf, len, &v2, &v, err, sizeof(err)),
	       "version 2: 120-byte entries, as before");
	engram_wire_catalog_get(&v, 0, &t);
	tap_ok(!t.held_first && t.held_rows == t.rows, "... read as whole tables");
	buf[0] = 3;
	err[0] = '\0';
	tap_contains(engram_wire_catalog_parse(buf, len, &v3, &v, err, sizeof(err)) == -EPROTO ?
		     err : NULL, "catalog of 1 entries in 144 bytes",
		     "120-byte entries are not version 3's");

	tabs[1].held_rows = 0;
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &v3, 0, tabs, 2) == -EINVAL,
	       "the encoder refuses a shard of 0 rows");
	tabs[1].held_first = tabs[1].rows - 10;
	tabs[1].held_rows = 11;
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &v3, 0, tabs, 2) == -EINVAL,
	       "and one that ends beyond the table");
	tabs[1].held_rows = 10;
	len = engram_wire_catalog_encode(buf, sizeof(buf), &v3, 0, tabs, 2);
	tap_ok(len > 0, "the shard of the table's last 10 rows is fine");
	put64(buf + 24 + 136 + 128, 11);
	err[0] = '\0';
	tap_contains(engram_wire_catalog_parse(buf, len, &v3, &v, err, sizeof(err)) == -EPROTO ?
		     err : NULL, "rows held", "the parser refuses 11 rows from 10 before the end");
	put64(buf + 24 + 136 + 120, tabs[1].rows);
	put64(buf + 24 + 136 + 128, 1);
	err[0] = '\0';
	tap_ok(engram_wire_catalog_parse(buf, len, &v3, &v, err, sizeof(err)) == -EPROTO,
	       "and a first row at the table's end");
}

static void test_catalog_v4(void)
{
	struct engram_wire_params v4 = neg_v(4), v3 = neg_v(3);
	struct engram_wire_catalog_view v;
	struct engram_wire_table tabs[2], t;
	int len;

	/* Two tables of one file: one digest, two places in it. */
	mktable(&tabs[0], "layer1", 1);
	mktable(&tabs[1], "layer14", 2);
	memcpy(tabs[1].sha256, tabs[0].sha256, sizeof(tabs[1].sha256));
	tabs[1].weight_offset = tabs[0].scale_offset + tabs[0].rows * 8;
	tabs[1].scale_offset = tabs[1].weight_offset + tabs[1].rows * 256;
	len = engram_wire_catalog_encode(buf, sizeof(buf), &v4, 0, tabs, 2);
	tap_ok(len == 24 + 2 * 152, "version 4: 152-byte entries");
	err[0] = '\0';
	tap_ok(len > 0 && !engram_wire_catalog_parse(buf, len, &v4, &v, err, sizeof(err)) &&
	       v.entry_bytes == 152, "two tables of one file in one catalog parse (%s)", err);
	tap_ok(get64(buf + 24 + 152 + 136) == tabs[1].weight_offset &&
	       get64(buf + 24 + 152 + 144) == tabs[1].scale_offset,
	       "the offsets follow the rows held, weight then scale");
	engram_wire_catalog_get(&v, 1, &t);
	tap_ok(t.weight_offset == tabs[1].weight_offset && t.scale_offset == tabs[1].scale_offset &&
	       !memcmp(t.sha256, tabs[0].sha256, sizeof(t.sha256)),
	       "they round-trip: same digest, other tensors");
	len = engram_wire_catalog_encode(buf, sizeof(buf), &v3, 0, tabs, 2);
	tap_ok(len == 24 + 2 * 136 && !engram_wire_catalog_parse(buf, len, &v3, &v, err, sizeof(err)),
	       "version 3 lists them without offsets");
	engram_wire_catalog_get(&v, 0, &t);
	tap_ok(!t.weight_offset && !t.scale_offset, "read as 0: not known");

	len = engram_wire_catalog_encode(buf, sizeof(buf), &v4, 0, tabs, 2);
	put64(buf + 24 + 136, 7);
	err[0] = '\0';
	tap_contains(engram_wire_catalog_parse(buf, len, &v4, &v, err, sizeof(err)) == -EPROTO ?
		     err : NULL, "tensor offsets 7", "a weight offset inside the header length is refused");
	put64(buf + 24 + 136, get64(buf + 24 + 144));
	err[0] = '\0';
	tap_contains(engram_wire_catalog_parse(buf, len, &v4, &v, err, sizeof(err)) == -EPROTO ?
		     err : NULL, "tensor offsets", "and one tensor at both places");
	tabs[0].scale_offset = 0;
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &v4, 0, tabs, 2) == -EINVAL,
	       "the encoder refuses a table without its tensors' places in version 4");
}

static void test_catalog_drain(void)
{
	struct engram_wire_params v6 = neg_v(6), v5 = neg_v(5);
	struct engram_wire_catalog_view v;
	struct engram_wire_table tabs[2], t;
	int len;

	mktable(&tabs[0], "layer1", 1);
	mktable(&tabs[1], "layer14", 2);
	tabs[1].state = ENGRAM_TABLE_DRAINING;
	len = engram_wire_catalog_encode(buf, sizeof(buf), &v6, 0, tabs, 2);
	err[0] = '\0';
	tap_ok(len == 24 + 2 * 152 && !engram_wire_catalog_parse(buf, len, &v6, &v, err, sizeof(err)),
	       "version 6: a draining entry encodes and parses (%s)", err);
	engram_wire_catalog_get(&v, 1, &t);
	tap_ok(t.state == ENGRAM_TABLE_DRAINING && buf[24 + 152 + 116] == 5 &&
	       all_zero_test(buf + 24 + 152 + 117, 3),
	       "its state is 5 on the wire and read back");
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &v5, 0, tabs, 2) == -EINVAL,
	       "the encoder refuses it in version 5, which cannot say it");
	len = engram_wire_catalog_encode(buf, sizeof(buf), &v5, 0, tabs, 1);
	put32(buf + 24 + 116, ENGRAM_TABLE_DRAINING);
	err[0] = '\0';
	tap_contains(engram_wire_catalog_parse(buf, len, &v5, &v, err, sizeof(err)) == -EPROTO ?
		     err : NULL, "unknown state 5", "a version 5 parser refuses it as unknown");
	memset(tabs[1].sha256, 0, sizeof(tabs[1].sha256));
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &v6, 0, tabs, 2) == -EINVAL,
	       "a draining entry without a digest is refused: it is served");
	mktable(&tabs[1], "layer14", 2);
	tabs[1].state = ENGRAM_TABLE_DRAINING + 1;
	tap_ok(engram_wire_catalog_encode(buf, sizeof(buf), &v6, 0, tabs, 2) == -EINVAL,
	       "state 6 is unknown in version 6");
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write-seeds"))
		return write_seeds(argv[2]);
	test_names();
	test_sizes();
	test_offer();
	test_hello();
	test_hello_frame();
	test_negotiate();
	test_header();
	test_request_roundtrip();
	test_request_truncation();
	test_request_malformed();
	test_request_geometry();
	test_request_rows();
	test_response();
	test_simple();
	test_catalog();
	test_slots();
	test_kept();
	test_held_rows();
	test_response_v3();
	test_catalog_v3();
	test_catalog_v4();
	test_catalog_drain();
	return tap_done();
}
