/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Wire protocol codec (versions 1 to 6): encode, decode and validate every message of the
 * RDMA and TCP transports.  Pure logic with no kernel state and no
 * allocation, so the same file builds in userspace (ENGRAM_USERSPACE) where
 * it is unit-tested and fuzzed.  The layout is in uapi/linux/engram_rdma.h,
 * the rules in Documentation/protocol.rst.
 */
#ifndef _ENGRAM_WIRE_H
#define _ENGRAM_WIRE_H

#include "userspace.h"

#include <linux/engram_rdma.h>

/* Sizes of the fixed parts, in bytes (asserted against the uapi structs). */
#define ENGRAM_WIRE_HELLO_BYTES		48
#define ENGRAM_WIRE_HDR_BYTES		16
#define ENGRAM_WIRE_HELLO_FRAME_BYTES	(ENGRAM_WIRE_HDR_BYTES + ENGRAM_WIRE_HELLO_BYTES)
#define ENGRAM_WIRE_REQUEST_BYTES	48
#define ENGRAM_WIRE_RANGE_BYTES		24
#define ENGRAM_WIRE_RESPONSE_BYTES	32
#define ENGRAM_WIRE_CATALOG_BYTES	24
#define ENGRAM_WIRE_ENTRY_BYTES		120
#define ENGRAM_WIRE_HELD_BYTES		16
#define ENGRAM_WIRE_TENSOR_BYTES	16
/* The smallest valid request: one range, one row. */
#define ENGRAM_WIRE_MIN_REQUEST_BYTES	(ENGRAM_WIRE_REQUEST_BYTES + \
					 ENGRAM_WIRE_RANGE_BYTES + 4)

/**
 * struct engram_wire_params - a hello in host byte order
 * @version_min: oldest version offered (equal to @version_max once chosen)
 * @version_max: newest version offered, or the chosen one
 * @max_inflight: tickets in flight per connection
 * @max_ranges: destination ranges per request, 1..ENGRAM_WIRE_MAX_RANGES
 * @max_request_bytes: largest REQUEST frame
 * @max_rows: rows per request, 1..ENGRAM_WIRE_MAX_ROWS
 *
 * Once negotiated, the codec uses @version_max as the version of the
 * connection and the limits as given.
 */
struct engram_wire_params {
	u16 version_min;
	u16 version_max;
	u16 max_inflight;
	u16 max_ranges;
	u32 max_request_bytes;
	u32 max_rows;
};

/**
 * struct engram_wire_hdr_info - a decoded frame header
 * @version: as received
 * @type: enum engram_wire_type
 * @flags: as received (always 0 once validated)
 * @length: whole frame in bytes
 * @ticket: as received
 */
struct engram_wire_hdr_info {
	u8 version;
	u8 type;
	u16 flags;
	u32 length;
	u64 ticket;
};

/**
 * struct engram_wire_dest - one destination range in host byte order
 * @addr: remote virtual address (ignored by TCP)
 * @rkey: remote key (ignored by TCP)
 * @length: bytes
 */
struct engram_wire_dest {
	u64 addr;
	u32 rkey;
	u64 length;
};

/**
 * struct engram_wire_req - a request in host byte order
 * @ticket: client-chosen, nonzero
 * @generation: table generation
 * @digest: first ENGRAM_WIRE_DIGEST_PREFIX bytes of the table's SHA-256
 * @nr_rows: row indices
 * @stride: bytes between consecutive rows in the destination
 * @nr_ranges: entries used in @ranges
 * @flags: ENGRAM_WIRE_REQ_* (version 3)
 * @nr_slots: after a parse, the places the destination must hold: the
 *	highest slot + 1 with ENGRAM_WIRE_REQ_SLOTS, else nr_rows
 * @ranges: destination ranges
 * @rows_le: after a parse, the nr_rows little-endian u32 indices inside the
 *	received buffer (read them with engram_wire_req_row()); unused by
 *	engram_wire_req_build(), which takes the indices separately
 * @slots_le: after a parse with ENGRAM_WIRE_REQ_SLOTS, the nr_rows slots
 *	(engram_wire_req_slot()); else NULL
 */
struct engram_wire_req {
	u64 ticket;
	u64 generation;
	u8 digest[ENGRAM_WIRE_DIGEST_PREFIX];
	u32 nr_rows;
	u32 stride;
	u16 nr_ranges;
	u16 flags;
	u64 nr_slots;
	struct engram_wire_dest ranges[ENGRAM_WIRE_MAX_RANGES];
	const u8 *rows_le;
	const u8 *slots_le;
};

/**
 * struct engram_wire_place - where one row of a request lands
 * @range: index into the request's ranges
 * @offset: byte offset inside that range
 * @addr: ranges[range].addr + offset
 * @rkey: ranges[range].rkey
 */
struct engram_wire_place {
	u16 range;
	u64 offset;
	u64 addr;
	u32 rkey;
};

/**
 * struct engram_wire_resp - a response in host byte order
 * @ticket: echoed from the request
 * @status: enum engram_wire_status
 * @bad_index: for ROW_OUT_OF_RANGE and ROW_NOT_HELD, position of the first
 *	bad row; else 0
 * @bytes: row bytes written (OK), else 0
 */
struct engram_wire_resp {
	u64 ticket;
	u16 status;
	u32 bad_index;
	u64 bytes;
};

/**
 * struct engram_wire_table - one catalog entry in host byte order
 * @name: NUL-terminated, 1..ENGRAM_NAME_MAX - 1 bytes of [A-Za-z0-9._-]
 * @sha256: digest of the table's file; all zero while not yet known
 * @generation: unique to each load
 * @rows: rows in the table, 1..2^32 - 1
 * @row_bytes: ENGRAM_ROW_BYTES
 * @state: enum engram_table_state
 * @held_first: the first row the host holds (0 for a whole table)
 * @held_rows: how many rows from @held_first it holds (@rows for a whole
 *	table); a version 1 or 2 catalog only lists whole tables
 * @weight_offset: where the weight tensor starts in the file (version 4;
 *	0 from an older peer, which cannot say)
 * @scale_offset: where the scale tensor starts, likewise
 *
 * The table's identity is @sha256, @rows, @row_bytes and the two offsets
 * (Documentation/protocol.rst): the digest alone names a file, and a file
 * holds several tables.
 */
struct engram_wire_table {
	char name[ENGRAM_NAME_MAX];
	u8 sha256[ENGRAM_SHA256_LEN];
	u64 generation;
	u64 rows;
	u32 row_bytes;
	u32 state;
	u64 held_first;
	u64 held_rows;
	u64 weight_offset;
	u64 scale_offset;
};

/**
 * struct engram_wire_catalog_view - a validated CATALOG frame
 * @ticket: 0 when unsolicited, else the CATALOG_REQUEST's
 * @nr_entries: entries
 * @entry_bytes: bytes of each (engram_wire_entry_bytes())
 * @entries: the first entry inside the received buffer
 */
struct engram_wire_catalog_view {
	u64 ticket;
	u32 nr_entries;
	u32 entry_bytes;
	const u8 *entries;
};

const char *engram_wire_status_name(unsigned int status);
const char *engram_wire_type_name(unsigned int type);
u8 engram_wire_frame_type(const void *buf, size_t len);

/*
 * Hello and negotiation.  What this implementation offers, in either role
 * and over either transport, unless a limit of the host lowers it; the
 * peer may ask for less.
 */
#define ENGRAM_WIRE_OFFER_ROWS		65536
#define ENGRAM_WIRE_OFFER_INFLIGHT	16
/* The first version whose RDMA RESPONSE may invalidate the first range's key. */
#define ENGRAM_WIRE_VERSION_REMOTE_INV	2
/* The first with shards: held rows in the catalog, slots, ROW_NOT_HELD. */
#define ENGRAM_WIRE_VERSION_SHARDS	3
/* The first whose catalog says where each table's tensors are in its file. */
#define ENGRAM_WIRE_VERSION_TENSOR	4
/* The first whose REQUEST may keep its keys (ENGRAM_WIRE_REQ_KEPT_KEYS). */
#define ENGRAM_WIRE_VERSION_KEPT	5
/* The first whose catalog may say a table is draining (ENGRAM_TABLE_DRAINING). */
#define ENGRAM_WIRE_VERSION_DRAIN	6

void engram_wire_offer(struct engram_wire_params *p, u32 max_rows, u16 max_inflight,
		       u16 version_max);
int engram_wire_hello_check(const struct engram_wire_params *p, char *err,
			    size_t errlen);
int engram_wire_hello_encode(void *buf, size_t size,
			     const struct engram_wire_params *p);
int engram_wire_hello_decode(const void *buf, size_t len,
			     struct engram_wire_params *p, char *err, size_t errlen);
int engram_wire_hello_frame_encode(void *buf, size_t size,
				   const struct engram_wire_params *p);
int engram_wire_hello_frame_decode(const void *buf, size_t len,
				   struct engram_wire_params *p, char *err,
				   size_t errlen);
int engram_wire_negotiate(const struct engram_wire_params *local,
			  const struct engram_wire_params *peer,
			  struct engram_wire_params *out, char *err, size_t errlen);
int engram_wire_check_answer(const struct engram_wire_params *local,
			     const struct engram_wire_params *answer,
			     char *err, size_t errlen);

/* Frames. */
u64 engram_wire_request_size(u32 nr_rows, u16 nr_ranges);
u64 engram_wire_request_size_slots(u32 nr_rows, u16 nr_ranges);
int engram_wire_hdr_check(const void *buf, size_t len,
			  const struct engram_wire_params *neg, bool to_server,
			  bool tcp, struct engram_wire_hdr_info *hdr,
			  char *err, size_t errlen);

/* Requests. */
int engram_wire_req_build(void *buf, size_t size,
			  const struct engram_wire_params *neg,
			  const struct engram_wire_req *req, const u32 *rows,
			  const u32 *slots);
int engram_wire_req_parse(const void *buf, size_t len,
			  const struct engram_wire_params *neg,
			  struct engram_wire_req *req, char *err, size_t errlen);
u32 engram_wire_req_row(const struct engram_wire_req *req, u32 i);
u32 engram_wire_req_slot(const struct engram_wire_req *req, u32 i);
int engram_wire_req_check_rows(const struct engram_wire_req *req, u64 table_rows,
			       u64 held_first, u64 held_rows, u32 *bad_index);
void engram_wire_req_place(const struct engram_wire_req *req, u32 i,
			   struct engram_wire_place *place);

/* Responses. */
int engram_wire_resp_encode(void *buf, size_t size,
			    const struct engram_wire_params *neg, bool tcp,
			    const struct engram_wire_resp *resp);
int engram_wire_resp_decode(const void *buf, size_t len,
			    const struct engram_wire_params *neg, bool tcp,
			    struct engram_wire_resp *resp, char *err, size_t errlen);

/* Header-only frames: CATALOG_REQUEST and HEARTBEAT. */
int engram_wire_simple_encode(void *buf, size_t size,
			      const struct engram_wire_params *neg, u8 type,
			      u64 ticket);
int engram_wire_simple_parse(const void *buf, size_t len,
			     const struct engram_wire_params *neg, bool to_server,
			     u8 type, u64 *ticket, char *err, size_t errlen);

/* Catalog. */
bool engram_wire_name_valid(const char *name, size_t size);
u32 engram_wire_entry_bytes(const struct engram_wire_params *neg);
int engram_wire_catalog_encode(void *buf, size_t size,
			       const struct engram_wire_params *neg, u64 ticket,
			       const struct engram_wire_table *tables, u32 n);
int engram_wire_catalog_parse(const void *buf, size_t len,
			      const struct engram_wire_params *neg,
			      struct engram_wire_catalog_view *cat,
			      char *err, size_t errlen);
void engram_wire_catalog_get(const struct engram_wire_catalog_view *cat, u32 i,
			     struct engram_wire_table *table);

#endif /* _ENGRAM_WIRE_H */
