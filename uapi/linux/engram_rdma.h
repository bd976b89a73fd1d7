/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * engram_rdma - serve Engram lookup tables from a host's page cache.
 *
 * This header is the whole user-visible ABI of the engram_rdma module.
 *
 * Generic netlink family ENGRAM_GENL_NAME ("engram_rdma"), version 1.
 * Every attribute is validated strictly per operation: an attribute that an
 * operation does not take is refused.  Every refusal of a request carries an
 * extended-ack message naming the reason (and, where one attribute is at
 * fault or missing, that attribute); only a failed memory allocation
 * (ENOMEM) may come without one.  Tables are global to the host: they are loaded, unloaded and
 * verified only by callers with CAP_NET_ADMIN in the initial user namespace.
 *
 * Commands
 *
 * ENGRAM_CMD_TABLE_LOAD (admin, do)
 *	Start loading one table.  Takes TABLE_NAME, TABLE_FD (an fd open for
 *	reading on a regular file), TABLE_ROWS, TABLE_WEIGHT_OFFSET,
 *	TABLE_SCALE_OFFSET, TABLE_WEIGHT_BYTES (must be 256), TABLE_SCALE_BYTES
 *	(must be 8), and optionally TABLE_SHA256 (the expected digest of the
 *	whole file) and TABLE_PATH (informational, shown by list; a path of
 *	1024 bytes or more is kept as "..." and its last 1020 bytes).
 *	The offsets are absolute file offsets of the [rows, 256] F8_E4M3 weight
 *	tensor and the [rows, 8] F8_E8M0 scale tensor.  The kernel checks them
 *	again against the file, denies writes to the file (writers get
 *	ETXTBSY), then reads the whole file through the page cache in a
 *	worker, holding a reference on every folio and hashing it with
 *	SHA-256.  The reply is the table's TABLE_* attributes in state
 *	ENGRAM_TABLE_LOADING; progress is read with TABLE_GET.  A load that
 *	fails (I/O error, digest mismatch) releases everything and leaves the
 *	table in state ENGRAM_TABLE_FAILED with TABLE_ERROR and
 *	TABLE_ERROR_MSG until it is unloaded; loading the same name again
 *	replaces a failed table.  A table whose file, next to the files
 *	already pinned, would leave less than an eighth of RAM free is
 *	refused with ENOMEM: pinned pages cannot be reclaimed.
 *
 * ENGRAM_CMD_TABLE_UNLOAD (admin, do)
 *	Takes TABLE_NAME.  Cancels a load or verify in progress, releases every
 *	page reference and the write denial.  Returns when all is released.
 *
 * ENGRAM_CMD_TABLE_GET (do, dump)
 *	do: takes TABLE_NAME, replies with that table.  dump: one message per
 *	table.  Each message carries TABLE_NAME, TABLE_PATH, TABLE_SHA256 (once
 *	known), TABLE_GENERATION, TABLE_STATE, TABLE_ROWS, TABLE_WEIGHT_BYTES,
 *	TABLE_SCALE_BYTES, TABLE_WEIGHT_OFFSET, TABLE_SCALE_OFFSET,
 *	TABLE_FILE_BYTES, TABLE_DONE_BYTES (progress of the running load or
 *	verify), TABLE_PINNED_BYTES, TABLE_META_BYTES, TABLE_ELAPSED_NS (of
 *	the running or last job), TABLE_VERIFY_RESULT and, for a failed table,
 *	TABLE_ERROR and TABLE_ERROR_MSG.
 *
 * ENGRAM_CMD_TABLE_VERIFY (admin, do)
 *	Takes TABLE_NAME of a READY table.  Re-hashes the pinned pages in a
 *	worker (state ENGRAM_TABLE_VERIFYING); the outcome is reported as
 *	TABLE_VERIFY_RESULT by TABLE_GET once the state is READY again.
 *
 * ENGRAM_CMD_STATS_GET (do, dump)
 *	do: the module-wide counters, nested in ENGRAM_A_STATS; with
 *	TABLE_NAME, that table's counters instead.  dump: one message per
 *	table with TABLE_NAME, TABLE_GENERATION and its counters nested in
 *	ENGRAM_A_STATS.  Counters are u64 ENGRAM_STAT_* attributes.
 *
 * TABLE_GET and STATS_GET dumps take an optional TABLE_NAME as a filter.
 *
 * Table identity is the SHA-256 of the whole file plus a generation number
 * that is unique to each load; generations start from the wall clock when
 * the module loads, so they do not repeat across module reloads either.
 *
 * The wire protocol between a host and its clients (hello, REQUEST,
 * RESPONSE, CATALOG, statuses and limits) is defined after the netlink
 * part below; the RDMA and TCP transports that carry it are not built yet.
 *
 * Module parameters (see Documentation/admin-guide.rst): listen= and remote=
 * take comma-separated URLs, rdma://IP:PORT or tcp://IP:PORT for listen,
 * rdma://SERVER:PORT@LOCAL or tcp://SERVER:PORT@LOCAL for remote; IPv6
 * addresses go in brackets.  Wildcard addresses are refused.
 */
#ifndef _UAPI_LINUX_ENGRAM_RDMA_H
#define _UAPI_LINUX_ENGRAM_RDMA_H

#include <linux/types.h>

#define ENGRAM_GENL_NAME	"engram_rdma"
#define ENGRAM_GENL_VERSION	1

/* Port used when a URL names none. */
#define ENGRAM_DEFAULT_PORT	18515

/* One row as served: the weight row, then its scale bytes. */
#define ENGRAM_WEIGHT_BYTES	256
#define ENGRAM_SCALE_BYTES	8
#define ENGRAM_ROW_BYTES	(ENGRAM_WEIGHT_BYTES + ENGRAM_SCALE_BYTES)

#define ENGRAM_SHA256_LEN	32
/* Table names: 1..63 bytes of [A-Za-z0-9._-], NUL-terminated on the wire. */
#define ENGRAM_NAME_MAX		64
#define ENGRAM_PATH_MAX		4096
/* Tables loaded at once. */
#define ENGRAM_MAX_TABLES	256

enum engram_cmd {
	ENGRAM_CMD_UNSPEC,
	ENGRAM_CMD_TABLE_LOAD,
	ENGRAM_CMD_TABLE_UNLOAD,
	ENGRAM_CMD_TABLE_GET,
	ENGRAM_CMD_TABLE_VERIFY,
	ENGRAM_CMD_STATS_GET,

	__ENGRAM_CMD_MAX,
	ENGRAM_CMD_MAX = __ENGRAM_CMD_MAX - 1
};

enum engram_attr {
	ENGRAM_A_UNSPEC,
	ENGRAM_A_PAD,
	ENGRAM_A_TABLE_NAME,		/* string */
	ENGRAM_A_TABLE_FD,		/* u32 */
	ENGRAM_A_TABLE_PATH,		/* string */
	ENGRAM_A_TABLE_ROWS,		/* u64 */
	ENGRAM_A_TABLE_WEIGHT_OFFSET,	/* u64, absolute file offset */
	ENGRAM_A_TABLE_SCALE_OFFSET,	/* u64, absolute file offset */
	ENGRAM_A_TABLE_WEIGHT_BYTES,	/* u32, per row */
	ENGRAM_A_TABLE_SCALE_BYTES,	/* u32, per row */
	ENGRAM_A_TABLE_SHA256,		/* binary, ENGRAM_SHA256_LEN */
	ENGRAM_A_TABLE_GENERATION,	/* u64 */
	ENGRAM_A_TABLE_STATE,		/* u8, enum engram_table_state */
	ENGRAM_A_TABLE_FILE_BYTES,	/* u64 */
	ENGRAM_A_TABLE_DONE_BYTES,	/* u64 */
	ENGRAM_A_TABLE_PINNED_BYTES,	/* u64 */
	ENGRAM_A_TABLE_META_BYTES,	/* u64 */
	ENGRAM_A_TABLE_ELAPSED_NS,	/* u64 */
	ENGRAM_A_TABLE_VERIFY_RESULT,	/* u8, enum engram_verify_result */
	ENGRAM_A_TABLE_ERROR,		/* u32, positive errno */
	ENGRAM_A_TABLE_ERROR_MSG,	/* string */
	ENGRAM_A_STATS,			/* nest of ENGRAM_STAT_* u64 */

	__ENGRAM_A_MAX,
	ENGRAM_A_MAX = __ENGRAM_A_MAX - 1
};

enum engram_table_state {
	ENGRAM_TABLE_UNSPEC,
	ENGRAM_TABLE_LOADING,
	ENGRAM_TABLE_READY,
	ENGRAM_TABLE_VERIFYING,
	ENGRAM_TABLE_FAILED
};

enum engram_verify_result {
	ENGRAM_VERIFY_NONE,		/* never verified since load */
	ENGRAM_VERIFY_OK,
	ENGRAM_VERIFY_MISMATCH,
	ENGRAM_VERIFY_ERROR		/* could not run to the end */
};

/*
 * Counters.  Module-wide ones come from STATS_GET do, per-table ones from
 * its dump or from a do that names the table; a counter that has no meaning
 * for one of the two is left out.
 */
enum engram_stat {
	ENGRAM_STAT_UNSPEC,
	ENGRAM_STAT_PAD,
	/* module-wide */
	ENGRAM_STAT_TABLES,		/* tables present now */
	ENGRAM_STAT_PINNED_BYTES,	/* all tables */
	ENGRAM_STAT_LOADS_STARTED,
	ENGRAM_STAT_LOADS_DONE,
	ENGRAM_STAT_LOADS_FAILED,
	ENGRAM_STAT_LOADS_CANCELLED,
	ENGRAM_STAT_DIGEST_MISMATCHES,
	ENGRAM_STAT_REQUESTS_REFUSED,	/* netlink requests refused */
	/* per table (and summed module-wide) */
	ENGRAM_STAT_LOOKUPS,
	ENGRAM_STAT_ROWS,
	ENGRAM_STAT_BYTES,
	ENGRAM_STAT_LOAD_BYTES,
	ENGRAM_STAT_LOAD_NS,
	ENGRAM_STAT_VERIFY_RUNS,
	ENGRAM_STAT_VERIFY_FAILURES,

	__ENGRAM_STAT_MAX,
	ENGRAM_STAT_MAX = __ENGRAM_STAT_MAX - 1
};

/*
 * Wire protocol, version 1 (Documentation/protocol.rst has the byte tables).
 *
 * Every integer on the wire is little-endian, whatever the host.  The
 * structs below give the layout of the fixed part of each message; all
 * fields are naturally aligned and the padding is explicit, so the layout
 * is the same on every ABI.  Reserved fields and flags must be zero: a
 * receiver refuses anything else.  Trailing arrays are described in the
 * comments and are not part of the structs.
 *
 * Connection setup.  Over RDMA, the client puts a struct engram_wire_hello
 * in the rdma_cm REQ private data and the server answers in the REP private
 * data (bytes after the 48 of the hello, added by the CM as padding, are
 * ignored).  Over TCP, the first frame each way is ENGRAM_WIRE_HELLO: a
 * frame header (version 1, ticket 0) and the hello.  The client offers a
 * range of versions and its limits; the server answers with the chosen
 * version (version_min == version_max) and, for every limit, the smaller of
 * its own and the client's.  Each side's hello must be self-consistent:
 * max_request_bytes must hold a request of max_rows rows and max_ranges
 * ranges, so the negotiated limits are consistent too.
 *
 * Frames.  Every later message starts with struct engram_wire_hdr.
 * @length counts the whole frame, header included; over RDMA one SEND
 * carries exactly one frame.  The client picks @ticket (never 0) for each
 * REQUEST and CATALOG_REQUEST; the server echoes it.  Ticket 0 marks a
 * CATALOG the server sends on its own (after connect, on change).
 *
 * REQUEST (client to server): struct engram_wire_request, then nr_ranges
 * struct engram_wire_range, then nr_rows __u32 row indices; length is
 * exactly 48 + 24 * nr_ranges + 4 * nr_rows.  Row i of the request lands
 * at byte offset i * dest_stride of the concatenation of the ranges; no
 * row may straddle two ranges.  Row indices are 32-bit: version 1 serves
 * tables of fewer than 2^32 rows.  Duplicate indices are allowed.
 *
 * RESPONSE (server to client): struct engram_wire_response.  Over RDMA it
 * is a SEND posted after the RDMA WRITEs of the rows on the same QP, and
 * length is 32.  Over TCP the row bytes follow in the same frame, packed
 * in request order (264 bytes each, no stride gaps), and length is
 * 32 + bytes.  bytes is nr_rows * 264 for ENGRAM_WIRE_OK, 0 otherwise.
 *
 * CATALOG (server to client): struct engram_wire_catalog, then nr_entries
 * struct engram_wire_catalog_entry.  CATALOG_REQUEST (client to server) is
 * a header alone.  HEARTBEAT is a header alone: the client sends it with a
 * nonzero ticket and the server echoes it.
 */
#define ENGRAM_WIRE_MAGIC		0x52474e45	/* "ENGR" on the wire */
#define ENGRAM_WIRE_VERSION		1	/* newest version spoken */
#define ENGRAM_WIRE_VERSION_MIN		1	/* oldest version spoken */

/* First 8 bytes of the table file's SHA-256 name a table in a request. */
#define ENGRAM_WIRE_DIGEST_PREFIX	8
/* Hard limits: a hello outside them is refused. */
#define ENGRAM_WIRE_MAX_RANGES		16
#define ENGRAM_WIRE_MAX_ROWS		0x100000	/* 1,048,576 */
#define ENGRAM_WIRE_MAX_REQUEST_BYTES	0x800000	/* 8 MiB */
/* A CATALOG lists at most ENGRAM_MAX_TABLES tables: 24 + 256 * 120 bytes. */
#define ENGRAM_WIRE_MAX_CATALOG_BYTES	(24 + ENGRAM_MAX_TABLES * 120)

enum engram_wire_type {
	ENGRAM_WIRE_HELLO = 1,		/* TCP only: first frame each way */
	ENGRAM_WIRE_REQUEST = 2,	/* client to server */
	ENGRAM_WIRE_RESPONSE = 3,	/* server to client */
	ENGRAM_WIRE_CATALOG = 4,	/* server to client */
	ENGRAM_WIRE_CATALOG_REQUEST = 5,	/* client to server */
	ENGRAM_WIRE_HEARTBEAT = 6	/* client to server and echoed back */
};

/* RESPONSE status: each refusal has its own. */
enum engram_wire_status {
	ENGRAM_WIRE_OK = 0,
	ENGRAM_WIRE_BAD_VERSION = 1,	/* header version is not the negotiated one */
	ENGRAM_WIRE_MALFORMED = 2,	/* bad header, lengths, reserved bits, geometry */
	ENGRAM_WIRE_UNKNOWN_TABLE = 3,	/* no table with this digest prefix and generation */
	ENGRAM_WIRE_TABLE_NOT_READY = 4,	/* the table exists but cannot serve now */
	ENGRAM_WIRE_ROW_OUT_OF_RANGE = 5,	/* bad_index names the first bad row */
	ENGRAM_WIRE_TOO_MANY_ROWS = 6,	/* nr_rows above the negotiated max_rows */
	ENGRAM_WIRE_TOO_MANY_RANGES = 7,	/* nr_ranges above the negotiated max_ranges */
	ENGRAM_WIRE_DEST_TOO_SMALL = 8,	/* the ranges cannot hold the rows at this stride */
	ENGRAM_WIRE_BUSY = 9,		/* more tickets in flight than max_inflight */
	ENGRAM_WIRE_SHUTTING_DOWN = 10,	/* server or table going away */
	ENGRAM_WIRE_INTERNAL = 11	/* server-side failure; the request was valid */
};

#define ENGRAM_WIRE_STATUS_MAX		ENGRAM_WIRE_INTERNAL

/* Hello: 48 bytes, fits the 56 bytes of REQ private data left by the IP CM. */
struct engram_wire_hello {
	__u32 magic;			/* ENGRAM_WIRE_MAGIC */
	__u16 version_min;
	__u16 version_max;
	__u32 max_request_bytes;	/* largest REQUEST frame */
	__u32 max_rows;			/* rows per request */
	__u16 max_inflight;		/* tickets in flight per connection */
	__u16 max_ranges;		/* 1..ENGRAM_WIRE_MAX_RANGES */
	__u32 flags;			/* 0 */
	__u32 reserved[6];		/* 0 */
};

/* Frame header: 16 bytes. */
struct engram_wire_hdr {
	__u8 version;			/* negotiated; 1 in HELLO frames */
	__u8 type;			/* enum engram_wire_type */
	__u16 flags;			/* 0 */
	__u32 length;			/* whole frame, header included */
	__u64 ticket;			/* chosen by the client, echoed */
};

/* REQUEST: 48 bytes, then the ranges, then the row indices. */
struct engram_wire_request {
	struct engram_wire_hdr hdr;
	__u8 digest[ENGRAM_WIRE_DIGEST_PREFIX];	/* SHA-256 prefix of the file */
	__u64 generation;
	__u32 nr_rows;			/* >= 1 */
	__u32 dest_stride;		/* >= ENGRAM_ROW_BYTES */
	__u16 nr_ranges;		/* >= 1 */
	__u16 reserved0;		/* 0 */
	__u32 reserved1;		/* 0 */
};

/* One destination range: 24 bytes.  TCP ignores addr and rkey. */
struct engram_wire_range {
	__u64 addr;			/* remote virtual address */
	__u32 rkey;
	__u32 reserved;			/* 0 */
	__u64 length;			/* >= 1; addr + length must not wrap */
};

/* RESPONSE: 32 bytes (over TCP, then the row bytes). */
struct engram_wire_response {
	struct engram_wire_hdr hdr;
	__u16 status;			/* enum engram_wire_status */
	__u16 reserved;			/* 0 */
	__u32 bad_index;		/* ROW_OUT_OF_RANGE: position in the request */
	__u64 bytes;			/* row bytes written (OK) or 0 */
};

/* CATALOG: 24 bytes, then nr_entries entries. */
struct engram_wire_catalog {
	struct engram_wire_hdr hdr;
	__u32 nr_entries;		/* <= ENGRAM_MAX_TABLES */
	__u32 reserved;			/* 0 */
};

/* One table: 120 bytes. */
struct engram_wire_catalog_entry {
	char name[ENGRAM_NAME_MAX];	/* [A-Za-z0-9._-], NUL-padded */
	__u8 sha256[ENGRAM_SHA256_LEN];	/* all zero while not yet known */
	__u64 generation;
	__u64 rows;			/* 1 .. 2^32 - 1 */
	__u32 row_bytes;		/* ENGRAM_ROW_BYTES */
	__u32 state;			/* enum engram_table_state */
};

#endif /* _UAPI_LINUX_ENGRAM_RDMA_H */
