// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Wire protocol codec, versions 1 to 5.
 *
 * Every message is read and written byte by byte at the offsets of the
 * uapi structs, so neither the host's byte order nor its alignment rules
 * matter and no unaligned-access header is needed in either environment.
 * Nothing here allocates, sleeps or keeps state: the transports own the
 * buffers and call in.
 *
 * Receivers never trust a length field: every count is checked against
 * the negotiated limits and against the bytes actually received, and every
 * size computation is done in 64 bits from 32-bit operands, so it cannot
 * overflow.  Server-side parsers return an enum engram_wire_status that
 * goes straight into the RESPONSE; client-side decoders return 0 or
 * -EPROTO.  Both write a reason into @err for the log.
 */
#ifdef ENGRAM_USERSPACE
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#define ENGRAM_STATIC_ASSERT(c)	static_assert(c, #c)
#else
#include <linux/build_bug.h>
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/math64.h>
#include <linux/stddef.h>
#include <linux/string.h>
#define ENGRAM_STATIC_ASSERT(c)	static_assert(c)
#endif

#include "wire.h"

#ifdef ENGRAM_USERSPACE
static u64 div_u64_rem(u64 dividend, u32 divisor, u32 *remainder)
{
	*remainder = dividend % divisor;
	return dividend / divisor;
}
#endif

ENGRAM_STATIC_ASSERT(sizeof(struct engram_wire_hello) == ENGRAM_WIRE_HELLO_BYTES);
ENGRAM_STATIC_ASSERT(sizeof(struct engram_wire_hdr) == ENGRAM_WIRE_HDR_BYTES);
ENGRAM_STATIC_ASSERT(sizeof(struct engram_wire_request) == ENGRAM_WIRE_REQUEST_BYTES);
ENGRAM_STATIC_ASSERT(sizeof(struct engram_wire_range) == ENGRAM_WIRE_RANGE_BYTES);
ENGRAM_STATIC_ASSERT(sizeof(struct engram_wire_response) == ENGRAM_WIRE_RESPONSE_BYTES);
ENGRAM_STATIC_ASSERT(sizeof(struct engram_wire_catalog) == ENGRAM_WIRE_CATALOG_BYTES);
ENGRAM_STATIC_ASSERT(sizeof(struct engram_wire_catalog_entry) == ENGRAM_WIRE_ENTRY_BYTES);
ENGRAM_STATIC_ASSERT(sizeof(struct engram_wire_held) == ENGRAM_WIRE_HELD_BYTES);
ENGRAM_STATIC_ASSERT(sizeof(struct engram_wire_tensor) == ENGRAM_WIRE_TENSOR_BYTES);
ENGRAM_STATIC_ASSERT(ENGRAM_WIRE_MAX_CATALOG_BYTES ==
		     ENGRAM_WIRE_CATALOG_BYTES + ENGRAM_MAX_TABLES *
		     (ENGRAM_WIRE_ENTRY_BYTES + ENGRAM_WIRE_HELD_BYTES +
		      ENGRAM_WIRE_TENSOR_BYTES));
/* A TCP RESPONSE of ENGRAM_WIRE_MAX_ROWS rows still fits the u32 length. */
ENGRAM_STATIC_ASSERT((u64)ENGRAM_WIRE_MAX_ROWS * ENGRAM_ROW_BYTES +
		     ENGRAM_WIRE_RESPONSE_BYTES < (1ULL << 32));
/* The largest request allowed by the row and range limits is allowed in bytes. */
ENGRAM_STATIC_ASSERT((u64)ENGRAM_WIRE_REQUEST_BYTES +
		     (u64)ENGRAM_WIRE_MAX_RANGES * ENGRAM_WIRE_RANGE_BYTES +
		     (u64)ENGRAM_WIRE_MAX_ROWS * 4 <= ENGRAM_WIRE_MAX_REQUEST_BYTES);

#define wire_err(err, errlen, ...) snprintf(err, errlen, __VA_ARGS__)

/* Field offsets, named once. */
#define HELLO(f)	offsetof(struct engram_wire_hello, f)
#define HDR(f)		offsetof(struct engram_wire_hdr, f)
#define REQ(f)		offsetof(struct engram_wire_request, f)
#define RANGE(f)	offsetof(struct engram_wire_range, f)
#define RESP(f)		offsetof(struct engram_wire_response, f)
#define CAT(f)		offsetof(struct engram_wire_catalog, f)
#define ENTRY(f)	offsetof(struct engram_wire_catalog_entry, f)
#define HELD(f)		(ENGRAM_WIRE_ENTRY_BYTES + offsetof(struct engram_wire_held, f))
#define TENSOR(f)	(ENGRAM_WIRE_ENTRY_BYTES + ENGRAM_WIRE_HELD_BYTES + \
			 offsetof(struct engram_wire_tensor, f))

static u16 get16(const u8 *p)
{
	return (u16)p[0] | (u16)p[1] << 8;
}

static u32 get32(const u8 *p)
{
	return (u32)p[0] | (u32)p[1] << 8 | (u32)p[2] << 16 | (u32)p[3] << 24;
}

static u64 get64(const u8 *p)
{
	return (u64)get32(p) | (u64)get32(p + 4) << 32;
}

static void put16(u8 *p, u16 v)
{
	p[0] = v;
	p[1] = v >> 8;
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

static bool all_zero(const u8 *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

/* Version of a negotiated connection. */
static u8 wire_version(const struct engram_wire_params *neg)
{
	return neg->version_max;
}

static const char * const engram_wire_status_names[] = {
	[ENGRAM_WIRE_OK] = "ok",
	[ENGRAM_WIRE_BAD_VERSION] = "bad_version",
	[ENGRAM_WIRE_MALFORMED] = "malformed",
	[ENGRAM_WIRE_UNKNOWN_TABLE] = "unknown_table",
	[ENGRAM_WIRE_TABLE_NOT_READY] = "table_not_ready",
	[ENGRAM_WIRE_ROW_OUT_OF_RANGE] = "row_out_of_range",
	[ENGRAM_WIRE_TOO_MANY_ROWS] = "too_many_rows",
	[ENGRAM_WIRE_TOO_MANY_RANGES] = "too_many_ranges",
	[ENGRAM_WIRE_DEST_TOO_SMALL] = "dest_too_small",
	[ENGRAM_WIRE_BUSY] = "busy",
	[ENGRAM_WIRE_SHUTTING_DOWN] = "shutting_down",
	[ENGRAM_WIRE_INTERNAL] = "internal",
	[ENGRAM_WIRE_ROW_NOT_HELD] = "row_not_held",
};

ENGRAM_STATIC_ASSERT(sizeof(engram_wire_status_names) /
		     sizeof(engram_wire_status_names[0]) == ENGRAM_WIRE_STATUS_MAX + 1);

/**
 * engram_wire_status_name() - stable name of a status, for logs and stats
 * @status: enum engram_wire_status
 *
 * Return: a lowercase name such as "row_out_of_range", or "unknown".
 */
const char *engram_wire_status_name(unsigned int status)
{
	if (status > ENGRAM_WIRE_STATUS_MAX)
		return "unknown";
	return engram_wire_status_names[status];
}

/**
 * engram_wire_type_name() - stable name of a frame type, for logs
 * @type: enum engram_wire_type
 *
 * Return: a lowercase name such as "request", or "unknown".
 */
const char *engram_wire_type_name(unsigned int type)
{
	switch (type) {
	case ENGRAM_WIRE_HELLO:
		return "hello";
	case ENGRAM_WIRE_REQUEST:
		return "request";
	case ENGRAM_WIRE_RESPONSE:
		return "response";
	case ENGRAM_WIRE_CATALOG:
		return "catalog";
	case ENGRAM_WIRE_CATALOG_REQUEST:
		return "catalog_request";
	case ENGRAM_WIRE_HEARTBEAT:
		return "heartbeat";
	}
	return "unknown";
}

/**
 * engram_wire_request_size() - bytes of a REQUEST frame
 * @nr_rows: row indices
 * @nr_ranges: destination ranges
 *
 * Return: 48 + 24 * @nr_ranges + 4 * @nr_rows, computed without overflow.
 */
u64 engram_wire_request_size(u32 nr_rows, u16 nr_ranges)
{
	return ENGRAM_WIRE_REQUEST_BYTES + (u64)nr_ranges * ENGRAM_WIRE_RANGE_BYTES +
	       (u64)nr_rows * 4;
}

/**
 * engram_wire_request_size_slots() - bytes of a REQUEST with ENGRAM_WIRE_REQ_SLOTS
 * @nr_rows: row indices, and as many slots
 * @nr_ranges: destination ranges
 *
 * Return: 48 + 24 * @nr_ranges + 8 * @nr_rows, computed without overflow.
 */
u64 engram_wire_request_size_slots(u32 nr_rows, u16 nr_ranges)
{
	return engram_wire_request_size(nr_rows, nr_ranges) + (u64)nr_rows * 4;
}

/* ------------------------------------------------------------------------ */
/* Hello and negotiation                                                    */

/**
 * engram_wire_offer() - the hello this side sends
 * @p: filled in
 * @max_rows: rows per request, 1..ENGRAM_WIRE_MAX_ROWS
 *	(ENGRAM_WIRE_OFFER_ROWS unless a limit of this host is lower)
 * @max_inflight: tickets in flight (ENGRAM_WIRE_OFFER_INFLIGHT unless lower)
 * @version_max: newest version to offer, clamped to the versions this
 *	build speaks (an administrator may hold a host back during an upgrade)
 *
 * Every version this build speaks up to @version_max, the most ranges the
 * protocol allows, and a max_request_bytes that holds exactly a request of
 * @max_rows rows in that many ranges (a side whose buffers come in pages
 * may round it up).
 */
void engram_wire_offer(struct engram_wire_params *p, u32 max_rows, u16 max_inflight,
		       u16 version_max)
{
	if (version_max > ENGRAM_WIRE_VERSION)
		version_max = ENGRAM_WIRE_VERSION;
	if (version_max < ENGRAM_WIRE_VERSION_MIN)
		version_max = ENGRAM_WIRE_VERSION_MIN;
	p->version_min = ENGRAM_WIRE_VERSION_MIN;
	p->version_max = version_max;
	p->max_inflight = max_inflight;
	p->max_ranges = ENGRAM_WIRE_MAX_RANGES;
	p->max_rows = max_rows;
	p->max_request_bytes = engram_wire_request_size(max_rows, ENGRAM_WIRE_MAX_RANGES);
}

/**
 * engram_wire_hello_check() - validate a hello's versions and limits
 * @p: the hello, host byte order
 * @err: reason on failure
 * @errlen: size of @err
 *
 * Checks 1 <= version_min <= version_max, every limit within its hard
 * bound, and that max_request_bytes holds a request of max_rows rows and
 * max_ranges ranges (which makes the minimum of two valid hellos valid).
 *
 * Return: 0, or -EPROTO with @err set.
 */
int engram_wire_hello_check(const struct engram_wire_params *p, char *err,
			    size_t errlen)
{
	u64 need;

	if (!p->version_min || p->version_min > p->version_max) {
		wire_err(err, errlen, "bad version range %u-%u",
			 p->version_min, p->version_max);
		return -EPROTO;
	}
	if (!p->max_inflight) {
		wire_err(err, errlen, "max_inflight is 0");
		return -EPROTO;
	}
	if (!p->max_ranges || p->max_ranges > ENGRAM_WIRE_MAX_RANGES) {
		wire_err(err, errlen, "max_ranges %u not in 1-%u", p->max_ranges,
			 ENGRAM_WIRE_MAX_RANGES);
		return -EPROTO;
	}
	if (!p->max_rows || p->max_rows > ENGRAM_WIRE_MAX_ROWS) {
		wire_err(err, errlen, "max_rows %u not in 1-%u", p->max_rows,
			 ENGRAM_WIRE_MAX_ROWS);
		return -EPROTO;
	}
	if (p->max_request_bytes < ENGRAM_WIRE_MIN_REQUEST_BYTES ||
	    p->max_request_bytes > ENGRAM_WIRE_MAX_REQUEST_BYTES) {
		wire_err(err, errlen, "max_request_bytes %u not in %u-%u",
			 p->max_request_bytes, ENGRAM_WIRE_MIN_REQUEST_BYTES,
			 ENGRAM_WIRE_MAX_REQUEST_BYTES);
		return -EPROTO;
	}
	need = engram_wire_request_size(p->max_rows, p->max_ranges);
	if (p->max_request_bytes < need) {
		wire_err(err, errlen,
			 "max_request_bytes %u cannot hold %u rows and %u ranges (%llu bytes)",
			 p->max_request_bytes, p->max_rows, p->max_ranges,
			 (unsigned long long)need);
		return -EPROTO;
	}
	return 0;
}

static void hello_put(u8 *b, const struct engram_wire_params *p)
{
	memset(b, 0, ENGRAM_WIRE_HELLO_BYTES);
	put32(b + HELLO(magic), ENGRAM_WIRE_MAGIC);
	put16(b + HELLO(version_min), p->version_min);
	put16(b + HELLO(version_max), p->version_max);
	put32(b + HELLO(max_request_bytes), p->max_request_bytes);
	put32(b + HELLO(max_rows), p->max_rows);
	put16(b + HELLO(max_inflight), p->max_inflight);
	put16(b + HELLO(max_ranges), p->max_ranges);
}

/**
 * engram_wire_hello_encode() - write a hello for rdma_cm private data
 * @buf: destination
 * @size: its size, at least ENGRAM_WIRE_HELLO_BYTES
 * @p: a valid hello (engram_wire_hello_check())
 *
 * Return: ENGRAM_WIRE_HELLO_BYTES, -EMSGSIZE when @buf is too small, or
 * -EINVAL when @p is not a valid hello.
 */
int engram_wire_hello_encode(void *buf, size_t size,
			     const struct engram_wire_params *p)
{
	char why[8];

	if (size < ENGRAM_WIRE_HELLO_BYTES)
		return -EMSGSIZE;
	if (engram_wire_hello_check(p, why, sizeof(why)))
		return -EINVAL;
	hello_put(buf, p);
	return ENGRAM_WIRE_HELLO_BYTES;
}

/**
 * engram_wire_hello_decode() - read and validate a hello
 * @buf: rdma_cm private data
 * @len: its length; bytes after the first ENGRAM_WIRE_HELLO_BYTES are CM
 *	padding and ignored
 * @p: result
 * @err: reason on failure
 * @errlen: size of @err
 *
 * Return: 0, or -EPROTO for a short, foreign (magic), nonzero-reserved or
 * invalid hello, with @err set.
 */
int engram_wire_hello_decode(const void *buf, size_t len,
			     struct engram_wire_params *p, char *err, size_t errlen)
{
	const u8 *b = buf;
	u32 magic;

	memset(p, 0, sizeof(*p));
	if (len < ENGRAM_WIRE_HELLO_BYTES) {
		wire_err(err, errlen, "hello of %zu bytes, need %u", len,
			 ENGRAM_WIRE_HELLO_BYTES);
		return -EPROTO;
	}
	magic = get32(b + HELLO(magic));
	if (magic != ENGRAM_WIRE_MAGIC) {
		wire_err(err, errlen, "bad magic 0x%08x: not an engram_rdma peer", magic);
		return -EPROTO;
	}
	if (get32(b + HELLO(flags))) {
		wire_err(err, errlen, "hello flags 0x%x, must be 0",
			 get32(b + HELLO(flags)));
		return -EPROTO;
	}
	if (!all_zero(b + HELLO(reserved), ENGRAM_WIRE_HELLO_BYTES - HELLO(reserved))) {
		wire_err(err, errlen, "hello reserved bytes not zero");
		return -EPROTO;
	}
	p->version_min = get16(b + HELLO(version_min));
	p->version_max = get16(b + HELLO(version_max));
	p->max_request_bytes = get32(b + HELLO(max_request_bytes));
	p->max_rows = get32(b + HELLO(max_rows));
	p->max_inflight = get16(b + HELLO(max_inflight));
	p->max_ranges = get16(b + HELLO(max_ranges));
	return engram_wire_hello_check(p, err, errlen);
}

static void hdr_put(u8 *b, u8 version, u8 type, u32 length, u64 ticket)
{
	b[HDR(version)] = version;
	b[HDR(type)] = type;
	put16(b + HDR(flags), 0);
	put32(b + HDR(length), length);
	put64(b + HDR(ticket), ticket);
}

static void hdr_get(const u8 *b, struct engram_wire_hdr_info *h)
{
	h->version = b[HDR(version)];
	h->type = b[HDR(type)];
	h->flags = get16(b + HDR(flags));
	h->length = get32(b + HDR(length));
	h->ticket = get64(b + HDR(ticket));
}

/**
 * engram_wire_frame_type() - the type a frame says it is, unchecked
 * @buf: the frame
 * @len: its bytes
 *
 * A hint for choosing a path before the parameters a check needs can be
 * read (a receive handler takes the link's lock once, and only under it
 * are they fixed); whatever path it picks checks the whole frame.
 *
 * Return: the header's type byte, or 0 (no type) for a frame shorter than
 * a header.
 */
u8 engram_wire_frame_type(const void *buf, size_t len)
{
	return len < ENGRAM_WIRE_HDR_BYTES ? 0 : ((const u8 *)buf)[HDR(type)];
}

/**
 * engram_wire_hello_frame_encode() - write the HELLO frame that opens TCP
 * @buf: destination
 * @size: its size, at least ENGRAM_WIRE_HELLO_FRAME_BYTES
 * @p: a valid hello
 *
 * The header carries version 1 and ticket 0 whatever versions are offered.
 *
 * Return: ENGRAM_WIRE_HELLO_FRAME_BYTES, -EMSGSIZE or -EINVAL.
 */
int engram_wire_hello_frame_encode(void *buf, size_t size,
				   const struct engram_wire_params *p)
{
	u8 *b = buf;
	int ret;

	if (size < ENGRAM_WIRE_HELLO_FRAME_BYTES)
		return -EMSGSIZE;
	ret = engram_wire_hello_encode(b + ENGRAM_WIRE_HDR_BYTES,
				       size - ENGRAM_WIRE_HDR_BYTES, p);
	if (ret < 0)
		return ret;
	hdr_put(b, 1, ENGRAM_WIRE_HELLO, ENGRAM_WIRE_HELLO_FRAME_BYTES, 0);
	return ENGRAM_WIRE_HELLO_FRAME_BYTES;
}

/**
 * engram_wire_hello_frame_decode() - read and validate a TCP HELLO frame
 * @buf: the frame
 * @len: bytes received; must be exactly ENGRAM_WIRE_HELLO_FRAME_BYTES
 * @p: result
 * @err: reason on failure
 * @errlen: size of @err
 *
 * Return: 0, or -EPROTO with @err set.
 */
int engram_wire_hello_frame_decode(const void *buf, size_t len,
				   struct engram_wire_params *p, char *err,
				   size_t errlen)
{
	struct engram_wire_hdr_info h;
	const u8 *b = buf;

	memset(p, 0, sizeof(*p));
	if (len != ENGRAM_WIRE_HELLO_FRAME_BYTES) {
		wire_err(err, errlen, "HELLO frame of %zu bytes, must be %u", len,
			 ENGRAM_WIRE_HELLO_FRAME_BYTES);
		return -EPROTO;
	}
	if (engram_wire_hdr_check(b, len, NULL, false, true, &h, err, errlen))
		return -EPROTO;
	return engram_wire_hello_decode(b + ENGRAM_WIRE_HDR_BYTES,
					ENGRAM_WIRE_HELLO_BYTES, p, err, errlen);
}

static u32 wire_min(u32 a, u32 b)
{
	return a < b ? a : b;
}

static u32 wire_max(u32 a, u32 b)
{
	return a > b ? a : b;
}

/**
 * engram_wire_negotiate() - the acceptor's answer to a peer's hello
 * @local: this side's hello
 * @peer: the hello received
 * @out: the answer: version_min = version_max = the newest version both
 *	speak, and each limit the smaller of the two
 * @err: reason on failure
 * @errlen: size of @err
 *
 * Return: 0; -EINVAL when @local is invalid; -EPROTO when @peer is;
 * -EPROTONOSUPPORT when the version ranges do not meet.  @err is set on
 * failure.
 */
int engram_wire_negotiate(const struct engram_wire_params *local,
			  const struct engram_wire_params *peer,
			  struct engram_wire_params *out, char *err, size_t errlen)
{
	char why[128];
	u16 v;

	memset(out, 0, sizeof(*out));
	if (engram_wire_hello_check(local, why, sizeof(why))) {
		wire_err(err, errlen, "local hello invalid: %s", why);
		return -EINVAL;
	}
	if (engram_wire_hello_check(peer, why, sizeof(why))) {
		wire_err(err, errlen, "peer hello invalid: %s", why);
		return -EPROTO;
	}
	v = wire_min(local->version_max, peer->version_max);
	if (v < local->version_min || v < peer->version_min) {
		wire_err(err, errlen,
			 "no common protocol version: we speak %u-%u, peer %u-%u",
			 local->version_min, local->version_max,
			 peer->version_min, peer->version_max);
		return -EPROTONOSUPPORT;
	}
	out->version_min = v;
	out->version_max = v;
	out->max_inflight = wire_min(local->max_inflight, peer->max_inflight);
	out->max_ranges = wire_min(local->max_ranges, peer->max_ranges);
	out->max_request_bytes = wire_min(local->max_request_bytes,
					  peer->max_request_bytes);
	out->max_rows = wire_min(local->max_rows, peer->max_rows);
	return 0;
}

/**
 * engram_wire_check_answer() - the initiator's check of the acceptor's hello
 * @local: the hello this side offered
 * @answer: the hello received in reply
 * @err: reason on failure
 * @errlen: size of @err
 *
 * The answer must name one version inside the offered range and no limit
 * above the offered one.  On success @answer is the connection's
 * negotiated parameters.
 *
 * Return: 0, or -EPROTO with @err set.
 */
int engram_wire_check_answer(const struct engram_wire_params *local,
			     const struct engram_wire_params *answer,
			     char *err, size_t errlen)
{
	if (engram_wire_hello_check(answer, err, errlen))
		return -EPROTO;
	if (answer->version_min != answer->version_max ||
	    answer->version_max < local->version_min ||
	    answer->version_max > local->version_max) {
		wire_err(err, errlen, "answer chose versions %u-%u, we offered %u-%u",
			 answer->version_min, answer->version_max,
			 local->version_min, local->version_max);
		return -EPROTO;
	}
	if (answer->max_inflight > local->max_inflight ||
	    answer->max_ranges > local->max_ranges ||
	    answer->max_request_bytes > local->max_request_bytes ||
	    answer->max_rows > local->max_rows) {
		wire_err(err, errlen, "answer raised a limit above our offer");
		return -EPROTO;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Frame header                                                             */

/*
 * Validate the header at @b.  @len is what was received of this frame.
 * With @exact the frame must be exactly @len bytes (one RDMA receive, or a
 * whole frame read from TCP); without, @len is a prefix (at least the
 * header) of a TCP frame whose length is still to be trusted.
 */
static int hdr_check(const u8 *b, size_t len, const struct engram_wire_params *neg,
		     bool to_server, bool tcp, bool exact,
		     struct engram_wire_hdr_info *h, char *err, size_t errlen)
{
	u64 lo, hi;

	memset(h, 0, sizeof(*h));
	if (len < ENGRAM_WIRE_HDR_BYTES) {
		wire_err(err, errlen, "frame of %zu bytes is shorter than its header", len);
		return ENGRAM_WIRE_MALFORMED;
	}
	hdr_get(b, h);
	if (h->version != (neg ? wire_version(neg) : 1)) {
		wire_err(err, errlen, "frame version %u, connection speaks %u",
			 h->version, neg ? wire_version(neg) : 1);
		return ENGRAM_WIRE_BAD_VERSION;
	}
	if (h->flags) {
		wire_err(err, errlen, "header flags 0x%x, must be 0", h->flags);
		return ENGRAM_WIRE_MALFORMED;
	}
	if (neg && h->type == ENGRAM_WIRE_HELLO) {
		wire_err(err, errlen, "hello frame after negotiation");
		return ENGRAM_WIRE_MALFORMED;
	}
	if (!neg && h->type != ENGRAM_WIRE_HELLO) {
		wire_err(err, errlen, "%s frame before hello",
			 engram_wire_type_name(h->type));
		return ENGRAM_WIRE_MALFORMED;
	}
	switch (h->type) {
	case ENGRAM_WIRE_HELLO:
		lo = ENGRAM_WIRE_HELLO_FRAME_BYTES;
		hi = lo;
		break;
	case ENGRAM_WIRE_REQUEST:
		if (!to_server)
			goto wrong_way;
		lo = ENGRAM_WIRE_MIN_REQUEST_BYTES;
		hi = neg->max_request_bytes;
		break;
	case ENGRAM_WIRE_CATALOG_REQUEST:
		if (!to_server)
			goto wrong_way;
		lo = ENGRAM_WIRE_HDR_BYTES;
		hi = lo;
		break;
	case ENGRAM_WIRE_HEARTBEAT:
		lo = ENGRAM_WIRE_HDR_BYTES;
		hi = lo;
		break;
	case ENGRAM_WIRE_RESPONSE:
		if (to_server)
			goto wrong_way;
		lo = ENGRAM_WIRE_RESPONSE_BYTES;
		hi = tcp ? lo + (u64)neg->max_rows * ENGRAM_ROW_BYTES : lo;
		break;
	case ENGRAM_WIRE_CATALOG:
		if (to_server)
			goto wrong_way;
		lo = ENGRAM_WIRE_CATALOG_BYTES;
		hi = ENGRAM_WIRE_MAX_CATALOG_BYTES;
		break;
	default:
		wire_err(err, errlen, "unknown frame type %u", h->type);
		return ENGRAM_WIRE_MALFORMED;
	}
	if (h->length < lo || h->length > hi) {
		wire_err(err, errlen, "%s frame length %u not in %llu-%llu",
			 engram_wire_type_name(h->type), h->length,
			 (unsigned long long)lo, (unsigned long long)hi);
		return ENGRAM_WIRE_MALFORMED;
	}
	if (exact ? h->length != len : h->length < len) {
		wire_err(err, errlen, "%s frame says %u bytes, %zu received",
			 engram_wire_type_name(h->type), h->length, len);
		return ENGRAM_WIRE_MALFORMED;
	}
	/* Ticket 0: always in HELLO; unsolicited CATALOG; RESPONSE to an unreadable ticket. */
	if (h->type == ENGRAM_WIRE_HELLO ? h->ticket != 0 :
	    h->type != ENGRAM_WIRE_CATALOG && h->type != ENGRAM_WIRE_RESPONSE &&
	    !h->ticket) {
		wire_err(err, errlen, "%s frame with ticket %llu",
			 engram_wire_type_name(h->type), (unsigned long long)h->ticket);
		return ENGRAM_WIRE_MALFORMED;
	}
	return ENGRAM_WIRE_OK;

wrong_way:
	wire_err(err, errlen, "%s frame sent %s the server",
		 engram_wire_type_name(h->type), to_server ? "to" : "by");
	return ENGRAM_WIRE_MALFORMED;
}

/**
 * engram_wire_hdr_check() - validate a frame header before reading the body
 * @buf: the received bytes of the frame, header first
 * @len: bytes received: over RDMA the receive's byte_len (the frame must
 *	be exactly that long); over TCP what has been read so far (at least
 *	ENGRAM_WIRE_HDR_BYTES, at most the frame)
 * @neg: negotiated parameters, or NULL before the hello (only a HELLO
 *	frame is then accepted)
 * @to_server: the frame travels client to server
 * @tcp: TCP transport (frames may be read in parts; RESPONSE carries rows)
 * @hdr: the decoded header, filled whenever @len covers it, so that a
 *	refusal can echo the ticket
 * @err: reason on refusal
 * @errlen: size of @err
 *
 * Checks version, flags, the type and its direction, the length against
 * the type's bounds and the negotiated limits, the length against @len,
 * and the ticket rule (0 always in HELLO, never in REQUEST,
 * CATALOG_REQUEST or HEARTBEAT; see engram_wire_resp_decode() for RESPONSE).
 * A refused header leaves the stream position unknown: a TCP receiver
 * must close the connection.
 *
 * Return: ENGRAM_WIRE_OK, ENGRAM_WIRE_BAD_VERSION or ENGRAM_WIRE_MALFORMED.
 */
int engram_wire_hdr_check(const void *buf, size_t len,
			  const struct engram_wire_params *neg, bool to_server,
			  bool tcp, struct engram_wire_hdr_info *hdr,
			  char *err, size_t errlen)
{
	return hdr_check(buf, len, neg, to_server, tcp, !tcp, hdr, err, errlen);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */

/*
 * Everything about the destination that needs no table: nonzero, non-wrapping
 * ranges whose lengths sum without overflow to at least the last row's end,
 * and no row across a boundary between two ranges.
 */
static int dest_check(const struct engram_wire_req *r, char *err, size_t errlen)
{
	u64 sum = 0, need;
	u16 i;

	for (i = 0; i < r->nr_ranges; i++) {
		const struct engram_wire_dest *d = &r->ranges[i];

		if (!d->length) {
			wire_err(err, errlen, "range %u has length 0", i);
			return ENGRAM_WIRE_MALFORMED;
		}
		if (d->addr + d->length < d->addr) {
			wire_err(err, errlen, "range %u wraps the address space", i);
			return ENGRAM_WIRE_MALFORMED;
		}
		if (sum + d->length < sum) {
			wire_err(err, errlen, "range lengths overflow at range %u", i);
			return ENGRAM_WIRE_MALFORMED;
		}
		sum += d->length;
		/*
		 * Boundary after range i (not the last): the row starting at
		 * or before it must end by it, or start at it.
		 */
		if (i + 1 < r->nr_ranges) {
			u32 into;
			u64 k = div_u64_rem(sum, r->stride, &into);

			if (k < r->nr_slots && into && into < ENGRAM_ROW_BYTES) {
				wire_err(err, errlen,
					 "row %llu would straddle ranges %u and %u",
					 (unsigned long long)k, i, i + 1);
				return ENGRAM_WIRE_MALFORMED;
			}
		}
	}
	/* nr_slots <= 2^32, so (2^32 - 1) * u32 + 264 < 2^64: no overflow. */
	need = (r->nr_slots - 1) * r->stride + ENGRAM_ROW_BYTES;
	if (sum < need) {
		wire_err(err, errlen, "%llu %s at stride %u need %llu bytes, ranges hold %llu",
			 (unsigned long long)r->nr_slots,
			 (r->flags & ENGRAM_WIRE_REQ_SLOTS) ? "row places" : "rows",
			 r->stride, (unsigned long long)need, (unsigned long long)sum);
		return ENGRAM_WIRE_DEST_TOO_SMALL;
	}
	return ENGRAM_WIRE_OK;
}

/**
 * engram_wire_req_parse() - validate a received REQUEST (server side)
 * @buf: the frame
 * @len: bytes received; the frame's length must equal it
 * @neg: negotiated parameters
 * @req: result; ticket is set as soon as the header is readable, the rest
 *	only on success.  rows_le points into @buf, so @buf must outlive @req.
 * @err: reason on refusal
 * @errlen: size of @err
 *
 * Checks, in this order: the header (engram_wire_hdr_check() rules, exact
 * length); type REQUEST; reserved field zero; no flag the version does not
 * know (ENGRAM_WIRE_REQ_SLOTS from version 3, ENGRAM_WIRE_REQ_KEPT_KEYS
 * from version 5); nr_rows and nr_ranges
 * nonzero; nr_ranges and nr_rows within the negotiated limits; the length
 * exactly 48 + 24 * nr_ranges + 4 * nr_rows (8 * nr_rows with slots);
 * dest_stride at least ENGRAM_ROW_BYTES; each range's reserved field zero,
 * length nonzero, no wrap; no row place straddling two ranges; the ranges'
 * total at least (nr_slots - 1) * dest_stride + ENGRAM_ROW_BYTES, where
 * nr_slots is nr_rows, or the highest slot + 1.  The table identity and
 * the row indices are left to the caller (engram_table_serve_get(),
 * engram_wire_req_check_rows()).
 *
 * Return: ENGRAM_WIRE_OK, or the refusal's status (BAD_VERSION, MALFORMED,
 * TOO_MANY_ROWS, TOO_MANY_RANGES, DEST_TOO_SMALL) with @err set.
 */
int engram_wire_req_parse(const void *buf, size_t len,
			  const struct engram_wire_params *neg,
			  struct engram_wire_req *req, char *err, size_t errlen)
{
	struct engram_wire_hdr_info h;
	const u8 *b = buf, *rb, *sb = NULL;
	u16 known = 0;
	u64 size;
	u32 k;
	int st;
	u16 i;

	memset(req, 0, sizeof(*req));
	st = hdr_check(b, len, neg, true, false, true, &h, err, errlen);
	req->ticket = h.ticket;
	if (st)
		return st;
	if (h.type != ENGRAM_WIRE_REQUEST) {
		wire_err(err, errlen, "%s frame where a request was expected",
			 engram_wire_type_name(h.type));
		return ENGRAM_WIRE_MALFORMED;
	}
	if (get32(b + REQ(reserved1))) {
		wire_err(err, errlen, "request reserved field not zero");
		return ENGRAM_WIRE_MALFORMED;
	}
	if (wire_version(neg) >= ENGRAM_WIRE_VERSION_SHARDS)
		known = ENGRAM_WIRE_REQ_SLOTS;
	if (wire_version(neg) >= ENGRAM_WIRE_VERSION_KEPT)
		known |= ENGRAM_WIRE_REQ_KEPT_KEYS;
	req->flags = get16(b + REQ(flags));
	if (req->flags & ~known) {
		wire_err(err, errlen, "request flags %#x unknown in version %u",
			 req->flags & ~known, wire_version(neg));
		return ENGRAM_WIRE_MALFORMED;
	}
	memcpy(req->digest, b + REQ(digest), ENGRAM_WIRE_DIGEST_PREFIX);
	req->generation = get64(b + REQ(generation));
	req->nr_rows = get32(b + REQ(nr_rows));
	req->stride = get32(b + REQ(dest_stride));
	req->nr_ranges = get16(b + REQ(nr_ranges));
	if (!req->nr_rows || !req->nr_ranges) {
		wire_err(err, errlen, "request with %u rows and %u ranges",
			 req->nr_rows, req->nr_ranges);
		return ENGRAM_WIRE_MALFORMED;
	}
	if (req->nr_ranges > neg->max_ranges ||
	    req->nr_ranges > ENGRAM_WIRE_MAX_RANGES) {
		wire_err(err, errlen, "%u ranges, limit %u", req->nr_ranges,
			 neg->max_ranges);
		return ENGRAM_WIRE_TOO_MANY_RANGES;
	}
	if (req->nr_rows > neg->max_rows) {
		wire_err(err, errlen, "%u rows, limit %u", req->nr_rows, neg->max_rows);
		return ENGRAM_WIRE_TOO_MANY_ROWS;
	}
	if (req->flags & ENGRAM_WIRE_REQ_SLOTS)
		size = engram_wire_request_size_slots(req->nr_rows, req->nr_ranges);
	else
		size = engram_wire_request_size(req->nr_rows, req->nr_ranges);
	if (size != h.length) {
		wire_err(err, errlen, "%u rows and %u ranges make %llu bytes, frame is %u",
			 req->nr_rows, req->nr_ranges, (unsigned long long)size,
			 h.length);
		return ENGRAM_WIRE_MALFORMED;
	}
	if (req->stride < ENGRAM_ROW_BYTES) {
		wire_err(err, errlen, "stride %u below the row size %u", req->stride,
			 ENGRAM_ROW_BYTES);
		return ENGRAM_WIRE_MALFORMED;
	}
	rb = b + ENGRAM_WIRE_REQUEST_BYTES;
	for (i = 0; i < req->nr_ranges; i++, rb += ENGRAM_WIRE_RANGE_BYTES) {
		if (get32(rb + RANGE(reserved))) {
			wire_err(err, errlen, "range %u reserved field not zero", i);
			return ENGRAM_WIRE_MALFORMED;
		}
		req->ranges[i].addr = get64(rb + RANGE(addr));
		req->ranges[i].rkey = get32(rb + RANGE(rkey));
		req->ranges[i].length = get64(rb + RANGE(length));
	}
	req->nr_slots = req->nr_rows;
	if (req->flags & ENGRAM_WIRE_REQ_SLOTS) {
		u32 top = 0;

		sb = rb + (size_t)req->nr_rows * 4;
		for (k = 0; k < req->nr_rows; k++)
			top = wire_max(top, get32(sb + (size_t)k * 4));
		req->nr_slots = (u64)top + 1;
	}
	st = dest_check(req, err, errlen);
	if (st)
		return st;
	req->rows_le = rb;
	req->slots_le = sb;
	return ENGRAM_WIRE_OK;
}

/**
 * engram_wire_req_build() - write a REQUEST frame (client side)
 * @buf: destination
 * @size: its size
 * @neg: negotiated parameters
 * @req: ticket, identity, stride, ranges, nr_rows and flags (rows_le,
 *	slots_le and nr_slots unused)
 * @rows: nr_rows row indices, host byte order
 * @slots: with ENGRAM_WIRE_REQ_SLOTS in flags, nr_rows places (row i lands
 *	at slots[i] * stride); else NULL
 *
 * The frame is validated with the server's own rules before returning, so
 * a built request is never refused as malformed or too large.
 *
 * Return: the frame's length; -EMSGSIZE when @buf is too small; -E2BIG
 * when nr_rows or nr_ranges exceed the negotiated limits, or the frame
 * the negotiated bytes; -EINVAL for anything else the server would refuse
 * (zero counts or ticket, stride, ranges, slots without a version 3
 * connection or beyond the ranges).
 */
int engram_wire_req_build(void *buf, size_t size,
			  const struct engram_wire_params *neg,
			  const struct engram_wire_req *req, const u32 *rows,
			  const u32 *slots)
{
	struct engram_wire_req check;
	u8 *b = buf, *rb;
	char why[8];
	u64 len;
	u32 i;
	int st;

	if (req->nr_rows > neg->max_rows || req->nr_ranges > neg->max_ranges)
		return -E2BIG;
	if (!req->nr_rows || !req->nr_ranges || !req->ticket)
		return -EINVAL;
	if (!(req->flags & ENGRAM_WIRE_REQ_SLOTS) != !slots)
		return -EINVAL;
	if (slots)
		len = engram_wire_request_size_slots(req->nr_rows, req->nr_ranges);
	else
		len = engram_wire_request_size(req->nr_rows, req->nr_ranges);
	if (len > neg->max_request_bytes)
		return -E2BIG;
	if (len > size)
		return -EMSGSIZE;
	hdr_put(b, wire_version(neg), ENGRAM_WIRE_REQUEST, len, req->ticket);
	memcpy(b + REQ(digest), req->digest, ENGRAM_WIRE_DIGEST_PREFIX);
	put64(b + REQ(generation), req->generation);
	put32(b + REQ(nr_rows), req->nr_rows);
	put32(b + REQ(dest_stride), req->stride);
	put16(b + REQ(nr_ranges), req->nr_ranges);
	put16(b + REQ(flags), req->flags);
	put32(b + REQ(reserved1), 0);
	rb = b + ENGRAM_WIRE_REQUEST_BYTES;
	for (i = 0; i < req->nr_ranges; i++, rb += ENGRAM_WIRE_RANGE_BYTES) {
		put64(rb + RANGE(addr), req->ranges[i].addr);
		put32(rb + RANGE(rkey), req->ranges[i].rkey);
		put32(rb + RANGE(reserved), 0);
		put64(rb + RANGE(length), req->ranges[i].length);
	}
	for (i = 0; i < req->nr_rows; i++, rb += 4)
		put32(rb, rows[i]);
	for (i = 0; slots && i < req->nr_rows; i++, rb += 4)
		put32(rb, slots[i]);
	st = engram_wire_req_parse(b, len, neg, &check, why, sizeof(why));
	if (st == ENGRAM_WIRE_TOO_MANY_ROWS || st == ENGRAM_WIRE_TOO_MANY_RANGES)
		return -E2BIG;
	if (st)
		return -EINVAL;
	return len;
}

/**
 * engram_wire_req_row() - row index at a position of a parsed request
 * @req: a request accepted by engram_wire_req_parse()
 * @i: position, below nr_rows
 *
 * Return: the row index.
 */
u32 engram_wire_req_row(const struct engram_wire_req *req, u32 i)
{
	return get32(req->rows_le + (size_t)i * 4);
}

/**
 * engram_wire_req_slot() - where in the destination a position's row lands
 * @req: a request accepted by engram_wire_req_parse()
 * @i: position, below nr_rows
 *
 * Return: the slot: its row starts at slot * stride of the ranges' concatenation.
 */
u32 engram_wire_req_slot(const struct engram_wire_req *req, u32 i)
{
	return req->slots_le ? get32(req->slots_le + (size_t)i * 4) : i;
}

/**
 * engram_wire_req_check_rows() - check every row index against a table
 * @req: a request accepted by engram_wire_req_parse()
 * @table_rows: rows in the table
 * @held_first: the first row this host holds (0 for the whole table)
 * @held_rows: how many it holds from there (@table_rows for all)
 * @bad_index: on refusal, the position in the request of the first row
 *	that is refused; 0 on success
 *
 * Duplicate indices are allowed.  The first bad row decides: beyond the
 * table, or inside it but outside the rows held.
 *
 * Return: ENGRAM_WIRE_OK, ENGRAM_WIRE_ROW_OUT_OF_RANGE or
 * ENGRAM_WIRE_ROW_NOT_HELD.
 */
int engram_wire_req_check_rows(const struct engram_wire_req *req, u64 table_rows,
			       u64 held_first, u64 held_rows, u32 *bad_index)
{
	u32 i;
	u64 r;

	*bad_index = 0;
	for (i = 0; i < req->nr_rows; i++) {
		r = engram_wire_req_row(req, i);
		if (r >= table_rows) {
			*bad_index = i;
			return ENGRAM_WIRE_ROW_OUT_OF_RANGE;
		}
		/* Unsigned: a row below held_first wraps above held_rows. */
		if (r - held_first >= held_rows) {
			*bad_index = i;
			return ENGRAM_WIRE_ROW_NOT_HELD;
		}
	}
	return ENGRAM_WIRE_OK;
}

/**
 * engram_wire_req_place() - where row @i of a request lands
 * @req: a request accepted by engram_wire_req_parse()
 * @i: position, below nr_rows
 * @place: result: the range that holds all ENGRAM_ROW_BYTES bytes of the
 *	row, the offset inside it, and the remote address and key
 *
 * The parse guarantees that the row lies inside one range.
 */
void engram_wire_req_place(const struct engram_wire_req *req, u32 i,
			   struct engram_wire_place *place)
{
	u64 off = (u64)engram_wire_req_slot(req, i) * req->stride;
	u16 r = 0;

	while (r + 1 < req->nr_ranges && off >= req->ranges[r].length) {
		off -= req->ranges[r].length;
		r++;
	}
	place->range = r;
	place->offset = off;
	place->addr = req->ranges[r].addr + off;
	place->rkey = req->ranges[r].rkey;
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                */

static bool resp_fields_valid(const struct engram_wire_params *neg, u64 ticket,
			      u16 status, u32 bad_index, u64 bytes,
			      char *err, size_t errlen)
{
	u16 top = ENGRAM_WIRE_INTERNAL;
	u32 rem;

	if (wire_version(neg) >= ENGRAM_WIRE_VERSION_SHARDS)
		top = ENGRAM_WIRE_ROW_NOT_HELD;
	if (status > top) {
		wire_err(err, errlen, "unknown status %u in version %u", status,
			 wire_version(neg));
		return false;
	}
	/* Ticket 0 answers a frame whose header could not be trusted. */
	if (!ticket && status != ENGRAM_WIRE_MALFORMED &&
	    status != ENGRAM_WIRE_BAD_VERSION) {
		wire_err(err, errlen, "ticket 0 with status %s",
			 engram_wire_status_name(status));
		return false;
	}
	if (status != ENGRAM_WIRE_ROW_OUT_OF_RANGE &&
	    status != ENGRAM_WIRE_ROW_NOT_HELD && bad_index) {
		wire_err(err, errlen, "bad_index %u with status %s", bad_index,
			 engram_wire_status_name(status));
		return false;
	}
	if (status != ENGRAM_WIRE_OK && bytes) {
		wire_err(err, errlen, "%llu bytes with status %s",
			 (unsigned long long)bytes, engram_wire_status_name(status));
		return false;
	}
	if (status == ENGRAM_WIRE_OK) {
		div_u64_rem(bytes, ENGRAM_ROW_BYTES, &rem);
		if (!bytes || rem || bytes > (u64)neg->max_rows * ENGRAM_ROW_BYTES) {
			wire_err(err, errlen, "%llu bytes is not 1-%u whole rows",
				 (unsigned long long)bytes, neg->max_rows);
			return false;
		}
	}
	return true;
}

/**
 * engram_wire_resp_encode() - write a RESPONSE (server side)
 * @buf: destination
 * @size: its size, at least ENGRAM_WIRE_RESPONSE_BYTES
 * @neg: negotiated parameters
 * @tcp: TCP transport: the length field then counts the @resp->bytes of
 *	rows the caller sends right after these 32 bytes
 * @resp: ticket, status, bad_index and bytes
 *
 * Return: ENGRAM_WIRE_RESPONSE_BYTES, -EMSGSIZE, or -EINVAL when the fields
 * are inconsistent (bytes must be a nonzero multiple of the row size, at
 * most max_rows rows, for OK and 0 otherwise; bad_index nonzero only with
 * ROW_OUT_OF_RANGE and ROW_NOT_HELD; ROW_NOT_HELD only in version 3;
 * ticket nonzero except for MALFORMED and BAD_VERSION, which answer frames
 * whose ticket could not be read).
 */
int engram_wire_resp_encode(void *buf, size_t size,
			    const struct engram_wire_params *neg, bool tcp,
			    const struct engram_wire_resp *resp)
{
	u8 *b = buf;
	char why[8];

	if (size < ENGRAM_WIRE_RESPONSE_BYTES)
		return -EMSGSIZE;
	if (!resp_fields_valid(neg, resp->ticket, resp->status, resp->bad_index,
			       resp->bytes, why, sizeof(why)))
		return -EINVAL;
	hdr_put(b, wire_version(neg), ENGRAM_WIRE_RESPONSE,
		ENGRAM_WIRE_RESPONSE_BYTES + (tcp ? (u32)resp->bytes : 0),
		resp->ticket);
	put16(b + RESP(status), resp->status);
	put16(b + RESP(reserved), 0);
	put32(b + RESP(bad_index), resp->bad_index);
	put64(b + RESP(bytes), resp->bytes);
	return ENGRAM_WIRE_RESPONSE_BYTES;
}

/**
 * engram_wire_resp_decode() - read and validate a RESPONSE (client side)
 * @buf: the frame's first bytes
 * @len: over RDMA the receive's byte_len (exactly the frame); over TCP
 *	exactly ENGRAM_WIRE_RESPONSE_BYTES, the rows being still unread
 * @neg: negotiated parameters
 * @tcp: TCP transport
 * @resp: result
 * @err: reason on failure
 * @errlen: size of @err
 *
 * Over TCP the length field must be 32 + bytes.  Ticket 0 is accepted only
 * with MALFORMED or BAD_VERSION (the server could not read the ticket of
 * what it refused).  The caller still checks that the ticket is one of its
 * own and that bytes is its nr_rows * 264.
 *
 * Return: 0, or -EPROTO with @err set.
 */
int engram_wire_resp_decode(const void *buf, size_t len,
			    const struct engram_wire_params *neg, bool tcp,
			    struct engram_wire_resp *resp, char *err, size_t errlen)
{
	struct engram_wire_hdr_info h;
	const u8 *b = buf;

	memset(resp, 0, sizeof(*resp));
	if (len != ENGRAM_WIRE_RESPONSE_BYTES) {
		wire_err(err, errlen, "response of %zu bytes, must be %u", len,
			 ENGRAM_WIRE_RESPONSE_BYTES);
		return -EPROTO;
	}
	if (hdr_check(b, len, neg, false, tcp, !tcp, &h, err, errlen))
		return -EPROTO;
	if (h.type != ENGRAM_WIRE_RESPONSE) {
		wire_err(err, errlen, "%s frame where a response was expected",
			 engram_wire_type_name(h.type));
		return -EPROTO;
	}
	if (get16(b + RESP(reserved))) {
		wire_err(err, errlen, "response reserved field not zero");
		return -EPROTO;
	}
	resp->ticket = h.ticket;
	resp->status = get16(b + RESP(status));
	resp->bad_index = get32(b + RESP(bad_index));
	resp->bytes = get64(b + RESP(bytes));
	if (!resp_fields_valid(neg, resp->ticket, resp->status, resp->bad_index,
			       resp->bytes, err, errlen))
		return -EPROTO;
	if (tcp && h.length != ENGRAM_WIRE_RESPONSE_BYTES + resp->bytes) {
		wire_err(err, errlen, "response length %u, 32 + %llu row bytes expected",
			 h.length, (unsigned long long)resp->bytes);
		return -EPROTO;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Header-only frames                                                       */

/**
 * engram_wire_simple_encode() - write a CATALOG_REQUEST or HEARTBEAT
 * @buf: destination
 * @size: its size, at least ENGRAM_WIRE_HDR_BYTES
 * @neg: negotiated parameters
 * @type: ENGRAM_WIRE_CATALOG_REQUEST or ENGRAM_WIRE_HEARTBEAT
 * @ticket: nonzero
 *
 * Return: ENGRAM_WIRE_HDR_BYTES, -EMSGSIZE or -EINVAL.
 */
int engram_wire_simple_encode(void *buf, size_t size,
			      const struct engram_wire_params *neg, u8 type,
			      u64 ticket)
{
	if (size < ENGRAM_WIRE_HDR_BYTES)
		return -EMSGSIZE;
	if ((type != ENGRAM_WIRE_CATALOG_REQUEST && type != ENGRAM_WIRE_HEARTBEAT) ||
	    !ticket)
		return -EINVAL;
	hdr_put(buf, wire_version(neg), type, ENGRAM_WIRE_HDR_BYTES, ticket);
	return ENGRAM_WIRE_HDR_BYTES;
}

/**
 * engram_wire_simple_parse() - validate a CATALOG_REQUEST or HEARTBEAT
 * @buf: the frame
 * @len: bytes received; must be exactly the frame
 * @neg: negotiated parameters
 * @to_server: the frame travels client to server
 * @type: the type expected
 * @ticket: the frame's ticket, set whenever the header is readable
 * @err: reason on refusal
 * @errlen: size of @err
 *
 * Return: ENGRAM_WIRE_OK, ENGRAM_WIRE_BAD_VERSION or ENGRAM_WIRE_MALFORMED.
 */
int engram_wire_simple_parse(const void *buf, size_t len,
			     const struct engram_wire_params *neg, bool to_server,
			     u8 type, u64 *ticket, char *err, size_t errlen)
{
	struct engram_wire_hdr_info h;
	int st;

	st = hdr_check(buf, len, neg, to_server, false, true, &h, err, errlen);
	*ticket = h.ticket;
	if (st)
		return st;
	if (h.type != type) {
		wire_err(err, errlen, "%s frame where %s was expected",
			 engram_wire_type_name(h.type), engram_wire_type_name(type));
		return ENGRAM_WIRE_MALFORMED;
	}
	return ENGRAM_WIRE_OK;
}

/* ------------------------------------------------------------------------ */
/* Catalog                                                                  */

/**
 * engram_wire_name_valid() - is this a table name?
 * @name: the name
 * @size: bytes readable at @name
 *
 * Return: true when a NUL ends the name within @size and
 * ENGRAM_NAME_MAX bytes, and the 1..ENGRAM_NAME_MAX - 1 bytes before it are
 * all in [A-Za-z0-9._-].
 */
bool engram_wire_name_valid(const char *name, size_t size)
{
	size_t i;

	if (size > ENGRAM_NAME_MAX)
		size = ENGRAM_NAME_MAX;
	for (i = 0; i < size && name[i]; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return i > 0 && i < size;
}

static bool state_valid(u32 state, u16 version)
{
	if (state == ENGRAM_TABLE_DRAINING)
		return version >= ENGRAM_WIRE_VERSION_DRAIN;
	return state >= ENGRAM_TABLE_LOADING && state <= ENGRAM_TABLE_FAILED;
}

/**
 * engram_wire_entry_bytes() - bytes of one catalog entry on a connection
 * @neg: negotiated parameters
 *
 * Return: 120, 136 from version 3 (the rows held follow the entry), 152
 * from version 4 (then the tensors' offsets).
 */
u32 engram_wire_entry_bytes(const struct engram_wire_params *neg)
{
	if (wire_version(neg) >= ENGRAM_WIRE_VERSION_TENSOR)
		return ENGRAM_WIRE_ENTRY_BYTES + ENGRAM_WIRE_HELD_BYTES +
		       ENGRAM_WIRE_TENSOR_BYTES;
	if (wire_version(neg) >= ENGRAM_WIRE_VERSION_SHARDS)
		return ENGRAM_WIRE_ENTRY_BYTES + ENGRAM_WIRE_HELD_BYTES;
	return ENGRAM_WIRE_ENTRY_BYTES;
}

/*
 * One entry's own rules; @e is the wire entry of a @version catalog, with
 * rows held from version 3 and then the tensors' offsets from version 4.
 */
static int entry_check(const u8 *e, u16 version, u32 i, char *err, size_t errlen)
{
	bool held = version >= ENGRAM_WIRE_VERSION_SHARDS;
	bool tensor = version >= ENGRAM_WIRE_VERSION_TENSOR;
	const char *name = (const char *)e + ENTRY(name);
	size_t n;
	u64 rows = get64(e + ENTRY(rows));
	u32 state = get32(e + ENTRY(state));

	if (!engram_wire_name_valid(name, ENGRAM_NAME_MAX)) {
		wire_err(err, errlen, "entry %u: bad table name", i);
		return -EPROTO;
	}
	n = strnlen(name, ENGRAM_NAME_MAX);
	if (!all_zero(e + ENTRY(name) + n, ENGRAM_NAME_MAX - n)) {
		wire_err(err, errlen, "entry %u: name not NUL-padded", i);
		return -EPROTO;
	}
	if (!rows || rows > 0xffffffffULL) {
		wire_err(err, errlen, "entry %u '%s': %llu rows not in 1-%u", i, name,
			 (unsigned long long)rows, 0xffffffffU);
		return -EPROTO;
	}
	if (get32(e + ENTRY(row_bytes)) != ENGRAM_ROW_BYTES) {
		wire_err(err, errlen, "entry %u '%s': row_bytes %u, must be %u", i,
			 name, get32(e + ENTRY(row_bytes)), ENGRAM_ROW_BYTES);
		return -EPROTO;
	}
	if (!state_valid(state, version)) {
		wire_err(err, errlen, "entry %u '%s': unknown state %u", i, name, state);
		return -EPROTO;
	}
	if ((state == ENGRAM_TABLE_READY || state == ENGRAM_TABLE_VERIFYING ||
	     state == ENGRAM_TABLE_DRAINING) &&
	    all_zero(e + ENTRY(sha256), ENGRAM_SHA256_LEN)) {
		wire_err(err, errlen, "entry %u '%s': servable table without a digest",
			 i, name);
		return -EPROTO;
	}
	if (held) {
		u64 first = get64(e + HELD(first_row)), n_held = get64(e + HELD(nr_rows));

		if (!n_held || first >= rows || n_held > rows - first) {
			wire_err(err, errlen, "entry %u '%s': rows held %llu+%llu not in its %llu",
				 i, name, (unsigned long long)first,
				 (unsigned long long)n_held, (unsigned long long)rows);
			return -EPROTO;
		}
	}
	if (tensor && (get64(e + TENSOR(weight_offset)) < 8 ||
		       get64(e + TENSOR(scale_offset)) < 8 ||
		       get64(e + TENSOR(weight_offset)) == get64(e + TENSOR(scale_offset)))) {
		/* A safetensors file's data starts after its 8-byte header length. */
		wire_err(err, errlen, "entry %u '%s': tensor offsets %llu and %llu", i, name,
			 (unsigned long long)get64(e + TENSOR(weight_offset)),
			 (unsigned long long)get64(e + TENSOR(scale_offset)));
		return -EPROTO;
	}
	return 0;
}

/* Entries @a and @b ordered by name, or by identity if @ident. */
static int cat_cmp(const u8 *ents, u32 eb, bool ident, u16 a, u16 b)
{
	const u8 *x = ents + (size_t)a * eb, *y = ents + (size_t)b * eb;
	u64 gx, gy;
	int c;

	if (!ident)
		return memcmp(x + ENTRY(name), y + ENTRY(name), ENGRAM_NAME_MAX);
	c = memcmp(x + ENTRY(sha256), y + ENTRY(sha256), ENGRAM_WIRE_DIGEST_PREFIX);
	if (c)
		return c;
	gx = get64(x + ENTRY(generation));
	gy = get64(y + ENTRY(generation));
	return gx < gy ? -1 : gx > gy;
}

static void cat_sift(u16 *idx, u32 root, u32 n, const u8 *ents, u32 eb, bool ident)
{
	u32 child;
	u16 t;

	while ((child = 2 * root + 1) < n) {
		if (child + 1 < n && cat_cmp(ents, eb, ident, idx[child], idx[child + 1]) < 0)
			child++;
		if (cat_cmp(ents, eb, ident, idx[root], idx[child]) >= 0)
			return;
		t = idx[root];
		idx[root] = idx[child];
		idx[child] = t;
		root = child;
	}
}

/*
 * Two of a catalog's @n entries with one name, or one identity if @ident
 * (digest prefix and generation).  Indices heapsorted by the key and
 * neighbours compared: O(n log n), in place, the same in both builds.  A
 * host may send a catalog whenever it likes, and comparing every pair is
 * 32,640 comparisons for 256 entries.
 */
static int cat_dups(const u8 *ents, u32 n, u32 eb, bool ident, char *err, size_t errlen)
{
	u16 idx[ENGRAM_MAX_TABLES];
	u32 i, lo, hi;
	u16 t;

	for (i = 0; i < n; i++)
		idx[i] = i;
	for (i = n / 2; i-- > 0;)
		cat_sift(idx, i, n, ents, eb, ident);
	for (i = n; i-- > 1;) {
		t = idx[0];
		idx[0] = idx[i];
		idx[i] = t;
		cat_sift(idx, 0, i, ents, eb, ident);
	}
	for (i = 1; i < n; i++) {
		if (cat_cmp(ents, eb, ident, idx[i - 1], idx[i]))
			continue;
		lo = wire_min(idx[i - 1], idx[i]);
		hi = idx[i - 1] + idx[i] - lo;
		if (ident)
			wire_err(err, errlen, "entries %u and %u have the same identity", lo, hi);
		else
			wire_err(err, errlen, "entries %u and %u are both '%s'", lo, hi,
				 (const char *)ents + (size_t)hi * eb + ENTRY(name));
		return -EPROTO;
	}
	return 0;
}

/**
 * engram_wire_catalog_parse() - validate a received CATALOG (client side)
 * @buf: the frame
 * @len: bytes received; must be exactly the frame
 * @neg: negotiated parameters
 * @cat: result; entries point into @buf
 * @err: reason on failure
 * @errlen: size of @err
 *
 * Checks the header, nr_entries against ENGRAM_MAX_TABLES and the length
 * (entries of engram_wire_entry_bytes()), and every entry: name valid and
 * NUL-padded, 1..2^32 - 1 rows, row_bytes ENGRAM_ROW_BYTES, a known state,
 * a digest for READY and VERIFYING tables, in version 3 at least one row
 * held and none beyond the table, in version 4 tensor offsets of at least 8
 * that differ; and no two entries with the same name
 * or the same identity (digest prefix and generation).
 *
 * Return: 0, or -EPROTO with @err set.
 */
int engram_wire_catalog_parse(const void *buf, size_t len,
			      const struct engram_wire_params *neg,
			      struct engram_wire_catalog_view *cat,
			      char *err, size_t errlen)
{
	u32 eb = engram_wire_entry_bytes(neg);
	struct engram_wire_hdr_info h;
	const u8 *b = buf, *e;
	u32 n, i;

	memset(cat, 0, sizeof(*cat));
	if (hdr_check(b, len, neg, false, false, true, &h, err, errlen))
		return -EPROTO;
	if (h.type != ENGRAM_WIRE_CATALOG) {
		wire_err(err, errlen, "%s frame where a catalog was expected",
			 engram_wire_type_name(h.type));
		return -EPROTO;
	}
	if (get32(b + CAT(reserved))) {
		wire_err(err, errlen, "catalog reserved field not zero");
		return -EPROTO;
	}
	n = get32(b + CAT(nr_entries));
	if (n > ENGRAM_MAX_TABLES ||
	    h.length != ENGRAM_WIRE_CATALOG_BYTES + (u64)n * eb) {
		wire_err(err, errlen, "catalog of %u entries in %u bytes", n, h.length);
		return -EPROTO;
	}
	e = b + ENGRAM_WIRE_CATALOG_BYTES;
	for (i = 0; i < n; i++, e += eb)
		if (entry_check(e, wire_version(neg), i, err, errlen))
			return -EPROTO;
	if (cat_dups(b + ENGRAM_WIRE_CATALOG_BYTES, n, eb, false, err, errlen) ||
	    cat_dups(b + ENGRAM_WIRE_CATALOG_BYTES, n, eb, true, err, errlen))
		return -EPROTO;
	cat->ticket = h.ticket;
	cat->nr_entries = n;
	cat->entry_bytes = eb;
	cat->entries = b + ENGRAM_WIRE_CATALOG_BYTES;
	return 0;
}

/**
 * engram_wire_catalog_get() - one entry of a validated catalog
 * @cat: from engram_wire_catalog_parse()
 * @i: index, below nr_entries
 * @table: result, host byte order, name NUL-terminated
 */
void engram_wire_catalog_get(const struct engram_wire_catalog_view *cat, u32 i,
			     struct engram_wire_table *table)
{
	const u8 *e = cat->entries + (size_t)i * cat->entry_bytes;

	memcpy(table->name, e + ENTRY(name), ENGRAM_NAME_MAX);
	memcpy(table->sha256, e + ENTRY(sha256), ENGRAM_SHA256_LEN);
	table->generation = get64(e + ENTRY(generation));
	table->rows = get64(e + ENTRY(rows));
	table->row_bytes = get32(e + ENTRY(row_bytes));
	table->state = get32(e + ENTRY(state));
	table->held_first = 0;
	table->held_rows = table->rows;
	if (cat->entry_bytes > ENGRAM_WIRE_ENTRY_BYTES) {
		table->held_first = get64(e + HELD(first_row));
		table->held_rows = get64(e + HELD(nr_rows));
	}
	table->weight_offset = 0;
	table->scale_offset = 0;
	if (cat->entry_bytes > ENGRAM_WIRE_ENTRY_BYTES + ENGRAM_WIRE_HELD_BYTES) {
		table->weight_offset = get64(e + TENSOR(weight_offset));
		table->scale_offset = get64(e + TENSOR(scale_offset));
	}
}

/**
 * engram_wire_catalog_encode() - write a CATALOG (server side)
 * @buf: destination
 * @size: its size
 * @neg: negotiated parameters
 * @ticket: 0 when sent unasked, else the CATALOG_REQUEST's ticket
 * @tables: @n tables, host byte order
 * @n: at most ENGRAM_MAX_TABLES
 *
 * Names are copied up to their NUL and zero-padded.  The result is checked
 * with the client's rules before returning, so a catalog this accepts is
 * never refused by a peer.  Before version 3 a catalog cannot say which
 * rows a host holds: the caller lists only whole tables there.
 *
 * Return: the frame's length, -EMSGSIZE, or -EINVAL for a table that
 * breaks the rules of engram_wire_catalog_parse(), or a shard before
 * version 3.
 */
int engram_wire_catalog_encode(void *buf, size_t size,
			       const struct engram_wire_params *neg, u64 ticket,
			       const struct engram_wire_table *tables, u32 n)
{
	struct engram_wire_catalog_view check;
	u8 *b = buf, *e;
	u32 eb = engram_wire_entry_bytes(neg);
	char why[8];
	size_t len;
	u32 i;

	if (n > ENGRAM_MAX_TABLES)
		return -EINVAL;
	len = ENGRAM_WIRE_CATALOG_BYTES + (size_t)n * eb;
	if (len > size)
		return -EMSGSIZE;
	for (i = 0; i < n; i++) {
		if (!engram_wire_name_valid(tables[i].name, ENGRAM_NAME_MAX))
			return -EINVAL;
		if (eb == ENGRAM_WIRE_ENTRY_BYTES &&
		    (tables[i].held_first || tables[i].held_rows != tables[i].rows))
			return -EINVAL;
	}
	hdr_put(b, wire_version(neg), ENGRAM_WIRE_CATALOG, len, ticket);
	put32(b + CAT(nr_entries), n);
	put32(b + CAT(reserved), 0);
	e = b + ENGRAM_WIRE_CATALOG_BYTES;
	for (i = 0; i < n; i++, e += eb) {
		const struct engram_wire_table *t = &tables[i];
		size_t nl = strnlen(t->name, ENGRAM_NAME_MAX);

		memset(e + ENTRY(name), 0, ENGRAM_NAME_MAX);
		memcpy(e + ENTRY(name), t->name, nl);
		memcpy(e + ENTRY(sha256), t->sha256, ENGRAM_SHA256_LEN);
		put64(e + ENTRY(generation), t->generation);
		put64(e + ENTRY(rows), t->rows);
		put32(e + ENTRY(row_bytes), t->row_bytes);
		put32(e + ENTRY(state), t->state);
		if (eb > ENGRAM_WIRE_ENTRY_BYTES) {
			put64(e + HELD(first_row), t->held_first);
			put64(e + HELD(nr_rows), t->held_rows);
		}
		if (eb > ENGRAM_WIRE_ENTRY_BYTES + ENGRAM_WIRE_HELD_BYTES) {
			put64(e + TENSOR(weight_offset), t->weight_offset);
			put64(e + TENSOR(scale_offset), t->scale_offset);
		}
	}
	if (engram_wire_catalog_parse(b, len, neg, &check, why, sizeof(why)))
		return -EINVAL;
	return len;
}
