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
 *	whole file) and TABLE_PATH (informational, shown by list).
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

#endif /* _UAPI_LINUX_ENGRAM_RDMA_H */
