// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for kmod/wire.c.  The input is one received frame (or
 * rdma_cm private data) and goes through every decoder under two sets of
 * negotiated limits, as both RDMA and TCP.  Besides not crashing (ASan,
 * UBSan), every input a decoder accepts must satisfy the invariants the
 * transports rely on, and must re-encode to exactly the bytes received:
 * nothing is accepted that the encoder would write differently.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static u8 out[ENGRAM_WIRE_MAX_REQUEST_BYTES];
static u32 rows[ENGRAM_WIRE_MAX_ROWS];
static u32 slots[ENGRAM_WIRE_MAX_ROWS];
static struct engram_wire_table tabs[ENGRAM_MAX_TABLES];

#define CHECK(c)	do { if (!(c)) abort(); } while (0)

static void fuzz_hello(const u8 *d, size_t n)
{
	struct engram_wire_params p, local, ans;
	char err[160] = "";

	if (engram_wire_hello_decode(d, n, &p, err, sizeof(err))) {
		CHECK(err[0]);
	} else {
		CHECK(engram_wire_hello_encode(out, sizeof(out), &p) == ENGRAM_WIRE_HELLO_BYTES);
		CHECK(!memcmp(out, d, ENGRAM_WIRE_HELLO_BYTES));
		/* Negotiating with any valid peer gives a valid, acceptable answer. */
		local = (struct engram_wire_params){ 1, 1, 64, 16, 262576, 65536 };
		if (!engram_wire_negotiate(&local, &p, &ans, err, sizeof(err))) {
			CHECK(!engram_wire_hello_check(&ans, err, sizeof(err)));
			CHECK(!engram_wire_check_answer(&local, &ans, err, sizeof(err)));
			CHECK(!engram_wire_check_answer(&p, &ans, err, sizeof(err)));
		}
	}
	if (!engram_wire_hello_frame_decode(d, n, &p, err, sizeof(err))) {
		CHECK(engram_wire_hello_frame_encode(out, sizeof(out), &p) == (int)n);
		CHECK(!memcmp(out, d, n));
	}
}

static void fuzz_hdr(const u8 *d, size_t n, const struct engram_wire_params *neg)
{
	struct engram_wire_hdr_info h;
	char err[160] = "";
	int ts, tcp, st;

	for (ts = 0; ts < 2; ts++) {
		for (tcp = 0; tcp < 2; tcp++) {
			st = engram_wire_hdr_check(d, n, neg, ts, tcp, &h, err, sizeof(err));
			CHECK(st == ENGRAM_WIRE_OK || st == ENGRAM_WIRE_BAD_VERSION ||
			      st == ENGRAM_WIRE_MALFORMED);
			if (st != ENGRAM_WIRE_OK) {
				CHECK(err[0]);
				continue;
			}
			CHECK(n >= ENGRAM_WIRE_HDR_BYTES && !h.flags);
			CHECK(tcp ? h.length >= n : h.length == n);
			if (neg) {
				CHECK(h.type != ENGRAM_WIRE_HELLO && h.version == neg->version_max);
			} else {
				CHECK(h.type == ENGRAM_WIRE_HELLO && h.length == 64 && !h.ticket);
			}
			if (h.type == ENGRAM_WIRE_REQUEST)
				CHECK(ts && h.length <= neg->max_request_bytes && h.ticket);
		}
	}
}

static void fuzz_request(const u8 *d, size_t n, const struct engram_wire_params *neg)
{
	struct engram_wire_place pl, prev = { 0 };
	struct engram_wire_req r;
	char err[160] = "";
	u32 i, bad;
	u64 table_rows, held_first, held_rows, r_i;
	bool slotted;
	int st;

	st = engram_wire_req_parse(d, n, neg, &r, err, sizeof(err));
	CHECK(st >= 0 && st <= ENGRAM_WIRE_STATUS_MAX);
	if (st != ENGRAM_WIRE_OK) {
		CHECK(err[0]);
		CHECK(st == ENGRAM_WIRE_BAD_VERSION || st == ENGRAM_WIRE_MALFORMED ||
		      st == ENGRAM_WIRE_TOO_MANY_ROWS || st == ENGRAM_WIRE_TOO_MANY_RANGES ||
		      st == ENGRAM_WIRE_DEST_TOO_SMALL);
		return;
	}
	CHECK(r.nr_rows >= 1 && r.nr_rows <= neg->max_rows);
	CHECK(r.nr_ranges >= 1 && r.nr_ranges <= neg->max_ranges);
	CHECK(r.stride >= ENGRAM_ROW_BYTES && r.ticket);
	slotted = r.flags & ENGRAM_WIRE_REQ_SLOTS;
	CHECK(!(r.flags & ~ENGRAM_WIRE_REQ_SLOTS));
	CHECK(!slotted || neg->version_max >= ENGRAM_WIRE_VERSION_SHARDS);
	CHECK(!slotted == !r.slots_le);
	CHECK((slotted ? engram_wire_request_size_slots(r.nr_rows, r.nr_ranges) :
		engram_wire_request_size(r.nr_rows, r.nr_ranges)) == n);
	CHECK(r.nr_slots >= (slotted ? 1 : r.nr_rows));
	/*
	 * Every row lies inside one range at slot * stride (i * stride without
	 * slots, in order).
	 */
	for (i = 0; i < r.nr_rows; i++) {
		u64 base = 0;
		u16 k;

		engram_wire_req_place(&r, i, &pl);
		CHECK(pl.range < r.nr_ranges);
		CHECK(pl.offset + ENGRAM_ROW_BYTES <= r.ranges[pl.range].length);
		CHECK(pl.addr == r.ranges[pl.range].addr + pl.offset);
		CHECK(pl.rkey == r.ranges[pl.range].rkey);
		for (k = 0; k < pl.range; k++)
			base += r.ranges[k].length;
		slots[i] = engram_wire_req_slot(&r, i);
		CHECK(slots[i] < r.nr_slots);
		CHECK(base + pl.offset == (u64)slots[i] * r.stride);
		if (i && !slotted)
			CHECK(pl.range >= prev.range && slots[i] == i);
		prev = pl;
		rows[i] = engram_wire_req_row(&r, i);
	}
	table_rows = n > 60 ? d[60] * 1000ULL : 0;
	held_first = n > 61 ? d[61] * 100ULL : 0;
	held_rows = n > 62 ? d[62] * 100ULL : table_rows;
	st = engram_wire_req_check_rows(&r, table_rows, held_first, held_rows, &bad);
	if (st == ENGRAM_WIRE_OK) {
		for (i = 0; i < r.nr_rows; i++) {
			CHECK(rows[i] < table_rows);
			CHECK(rows[i] >= held_first && rows[i] - held_first < held_rows);
		}
	} else {
		CHECK(bad < r.nr_rows);
		r_i = rows[bad];
		if (st == ENGRAM_WIRE_ROW_OUT_OF_RANGE)
			CHECK(r_i >= table_rows);
		else
			CHECK(st == ENGRAM_WIRE_ROW_NOT_HELD && r_i < table_rows &&
			      (r_i < held_first || r_i - held_first >= held_rows));
		for (i = 0; i < bad; i++)
			CHECK(rows[i] < table_rows && rows[i] >= held_first &&
			      rows[i] - held_first < held_rows);
	}
	CHECK(engram_wire_req_build(out, sizeof(out), neg, &r, rows,
				    slotted ? slots : NULL) == (int)n);
	CHECK(!memcmp(out, d, n));
}

static void fuzz_response(const u8 *d, size_t n, const struct engram_wire_params *neg)
{
	struct engram_wire_resp r;
	char err[160] = "";
	int tcp;

	for (tcp = 0; tcp < 2; tcp++) {
		if (engram_wire_resp_decode(d, n, neg, tcp, &r, err, sizeof(err))) {
			CHECK(err[0]);
			continue;
		}
		CHECK(r.status <= ENGRAM_WIRE_STATUS_MAX);
		CHECK(r.status == ENGRAM_WIRE_OK ? r.bytes && r.bytes % ENGRAM_ROW_BYTES == 0 &&
		      r.bytes <= (u64)neg->max_rows * ENGRAM_ROW_BYTES : !r.bytes);
		CHECK(engram_wire_resp_encode(out, sizeof(out), neg, tcp, &r) ==
		      ENGRAM_WIRE_RESPONSE_BYTES);
		CHECK(!memcmp(out, d, ENGRAM_WIRE_RESPONSE_BYTES));
	}
}

static void fuzz_simple(const u8 *d, size_t n, const struct engram_wire_params *neg)
{
	static const u8 types[] = { ENGRAM_WIRE_CATALOG_REQUEST, ENGRAM_WIRE_HEARTBEAT };
	char err[160] = "";
	unsigned int i;
	int ts;
	u64 t;

	for (i = 0; i < sizeof(types); i++) {
		for (ts = 0; ts < 2; ts++) {
			if (engram_wire_simple_parse(d, n, neg, ts, types[i], &t, err, sizeof(err)))
				continue;
			CHECK(engram_wire_simple_encode(out, sizeof(out), neg, types[i], t) == (int)n);
			CHECK(!memcmp(out, d, n));
		}
	}
}

static void fuzz_catalog(const u8 *d, size_t n, const struct engram_wire_params *neg)
{
	struct engram_wire_catalog_view v;
	char err[160] = "";
	u32 i;

	if (engram_wire_catalog_parse(d, n, neg, &v, err, sizeof(err))) {
		CHECK(err[0]);
		return;
	}
	CHECK(v.nr_entries <= ENGRAM_MAX_TABLES);
	for (i = 0; i < v.nr_entries; i++) {
		engram_wire_catalog_get(&v, i, &tabs[i]);
		CHECK(engram_wire_name_valid(tabs[i].name, sizeof(tabs[i].name)));
		CHECK(tabs[i].rows && tabs[i].rows < (1ULL << 32));
		CHECK(tabs[i].row_bytes == ENGRAM_ROW_BYTES);
		CHECK(tabs[i].held_rows && tabs[i].held_first < tabs[i].rows &&
		      tabs[i].held_rows <= tabs[i].rows - tabs[i].held_first);
		if (neg->version_max < ENGRAM_WIRE_VERSION_SHARDS)
			CHECK(!tabs[i].held_first && tabs[i].held_rows == tabs[i].rows);
		if (neg->version_max < ENGRAM_WIRE_VERSION_TENSOR)
			CHECK(!tabs[i].weight_offset && !tabs[i].scale_offset);
		else
			CHECK(tabs[i].weight_offset >= 8 && tabs[i].scale_offset >= 8 &&
			      tabs[i].weight_offset != tabs[i].scale_offset);
	}
	CHECK(engram_wire_catalog_encode(out, sizeof(out), neg, v.ticket, tabs,
					 v.nr_entries) == (int)n);
	CHECK(!memcmp(out, d, n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/*
	 * The limits test_wire's seeds were built with, tight ones, and
	 * version 3's (slots, rows held, ROW_NOT_HELD), and version 4's
	 * (the tensors' offsets in the catalog).
	 */
	static const struct engram_wire_params wide = { 1, 1, 64, 16, 262576, 65536 };
	static const struct engram_wire_params tight = { 1, 1, 1, 2, 160, 16 };
	static const struct engram_wire_params v3 = { 3, 3, 64, 16, 524720, 65536 };
	static const struct engram_wire_params v4 = { 4, 4, 64, 16, 524720, 65536 };
	const struct engram_wire_params *negs[] = { &wide, &tight, &v3, &v4 };
	unsigned int i;

	fuzz_hello(data, size);
	fuzz_hdr(data, size, NULL);
	for (i = 0; i < sizeof(negs) / sizeof(negs[0]); i++) {
		fuzz_hdr(data, size, negs[i]);
		fuzz_request(data, size, negs[i]);
		fuzz_response(data, size, negs[i]);
		fuzz_simple(data, size, negs[i]);
		fuzz_catalog(data, size, negs[i]);
	}
	return 0;
}
