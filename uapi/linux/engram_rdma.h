/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
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
 * (ENOMEM) may come without one.  Tables, listeners and links are global to
 * the host: they are changed only by callers with CAP_NET_ADMIN in the
 * initial user namespace; anyone may read them.
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
 *	the running or last job), TABLE_VERIFY_RESULT, TABLE_INFLIGHT and, for
 *	a failed table, TABLE_ERROR and TABLE_ERROR_MSG; a draining table
 *	also TABLE_DRAINING (1) and TABLE_DRAIN_QUIET_NS.
 *
 * ENGRAM_CMD_TABLE_DRAIN (admin, do)
 *	Takes TABLE_DRAINING, 1 to drain and 0 to undrain, and TABLE_NAME, or
 *	no name for every table loaded now.  A draining table is still served,
 *	but the catalog tells clients (protocol version 6, ENGRAM_TABLE_DRAINING;
 *	older clients are no longer told of it at all) to send it no new
 *	fetch of a table opened on no link (EAGAIN where no other host serves
 *	the rows, and libengram reads them locally).  TABLE_INFLIGHT
 *	(requests holding the table) and TABLE_DRAIN_QUIET_NS (time since the
 *	drain began or the last request for the table came, whichever is
 *	later) say when nothing is sent any more: unloading it then costs no
 *	fetch anything.  A reload is not draining.  ENOENT for no such table.
 *
 * ENGRAM_CMD_TABLE_VERIFY (admin, do)
 *	Takes TABLE_NAME of a READY table.  Re-hashes the pinned pages in a
 *	worker (state ENGRAM_TABLE_VERIFYING); the outcome is reported as
 *	TABLE_VERIFY_RESULT by TABLE_GET once the state is READY again.
 *
 * ENGRAM_CMD_STATS_GET (do, dump)
 *	do: the module-wide counters, nested in ENGRAM_A_STATS; with
 *	TABLE_NAME, that table's counters instead; with LINK_ID, that link's.
 *	dump: one message per table with TABLE_NAME, TABLE_GENERATION and its
 *	counters nested in ENGRAM_A_STATS, then one message per link with
 *	LINK_ID, URL and its counters, then one message per table opened
 *	through a link (client side) with LINK_ID, TABLE_NAME and that table's
 *	fetch counters (including FALLBACKS reported by user space).  Table
 *	and link messages also carry their latency histogram,
 *	ENGRAM_A_LATENCY.  Counters are u64
 *	ENGRAM_STAT_* attributes.  TABLE_NAME and LINK_ID exclude each other.
 *
 * ENGRAM_CMD_LISTEN_ADD, ENGRAM_CMD_LISTEN_DEL (admin, do)
 *	Take URL, a listen URL (rdma://IP[:PORT] or tcp://IP[:PORT]), parsed
 *	by the kernel; a URL it refuses is EINVAL pointing at URL, the reason
 *	in the kernel log.  ADD starts serving on the address (EEXIST when a
 *	listener on the same address exists); DEL stops, closing that
 *	listener's connections (ENOENT when there is none).  URLs are compared
 *	parsed: rdma://192.0.2.1 and rdma://192.0.2.1:18515 are the same.
 *
 * ENGRAM_CMD_LISTEN_GET (dump)
 *	One message per listener: URL, LISTEN_STATE, CONNECTIONS, ALLOW_MODE, DEVICE once
 *	bound to an RDMA device, and LINK_ERROR (the last failure) while
 *	waiting after one.
 *
 * ENGRAM_CMD_LINK_ADD (admin, do)
 *	Takes URL, a remote URL (rdma://SERVER[:PORT]@LOCAL or
 *	tcp://SERVER[:PORT]@LOCAL).  The link connects in the background; the
 *	reply is the new link's LINK_GET message (at least its LINK_ID).
 *
 * ENGRAM_CMD_LINK_DEL (admin, do)
 *	Takes LINK_ID.  Closes the link; ENOENT for an unknown id.
 *
 * ENGRAM_CMD_LINK_GET (do, dump)
 *	do: takes LINK_ID.  dump: one message per link.  Each carries
 *	LINK_ID, URL, TRANSPORT, LINK_STATE, LINK_TABLES, LINK_MAX_ROWS and
 *	LINK_MAX_INFLIGHT (0 until negotiated), LINK_CONNECTS,
 *	LINK_RECONNECTS, LINK_SINCE_NS, LINK_ERROR once a failure happened,
 *	LINK_HEARTBEAT_US once a heartbeat came back, DEVICE once bound, and
 *	the link's counters (STATS) and LATENCY.
 *
 * ENGRAM_CMD_LINK_CATALOG_GET (dump)
 *	What the links' hosts serve: one message per table in a link's
 *	catalog, links in order, with LINK_ID, LINK_STATE, TABLE_NAME,
 *	TABLE_SHA256, TABLE_ROWS, TABLE_GENERATION and TABLE_STATE (as the
 *	host last announced them; a link that is not up has none).  LINK_ID
 *	in the request picks one link.
 *	The links that serve one SHA-256 are the replicas a table opened on
 *	no link is fetched from.
 *
 * ENGRAM_CMD_ALLOW_ADD, ENGRAM_CMD_ALLOW_DEL (admin, do)
 *	Take ALLOW, a client address or prefix (IP or IP/PREFIXLEN, IPv6
 *	without brackets).  Until the allow-list is first given an entry (by
 *	allow= or ADD), any peer that can reach a listening address may
 *	connect (ALLOW_MODE ANY); from then on, a connection from an address
 *	that matches no entry is rejected at the rdma_cm connect request or
 *	the TCP accept (CONNECTS_DENIED, and a rate-limited log line).
 *	Deleting the last entry leaves every peer refused (ALLOW_MODE NONE)
 *	until an entry is added; 0.0.0.0/0 and ::/0 let everyone in again.
 *	ADD: EEXIST for an entry already present; DEL: ENOENT for one that is
 *	not.  Existing connections are kept.
 *
 * ENGRAM_CMD_ALLOW_GET (dump)
 *	One message per allow-list entry: ALLOW and ALLOW_MODE; with no
 *	entry, one message with ALLOW_MODE alone.
 *
 * ENGRAM_CMD_EVENT (notification only)
 *	Sent to the multicast group ENGRAM_MCGRP_EVENTS ("events"; joining it
 *	takes CAP_NET_ADMIN where the kernel can require it) when a table, a
 *	link or a listener changes: EVENT (enum engram_event) says what
 *	happened.  A table's events carry TABLE_NAME and TABLE_STATE, with
 *	TABLE_VERIFY_RESULT after a verification and TABLE_ERROR when it
 *	failed; a link's LINK_ID, URL and LINK_STATE, with LINK_ERROR when it
 *	went down; a listener's URL and LISTEN_STATE, with LINK_ERROR while it
 *	waits for a reason.  Events are queued in a ring of 256 and sent in
 *	the order of the changes; when they come faster than they are sent,
 *	new ones are dropped and the next one sent carries EVENTS_LOST, the
 *	number dropped; so does an EVENT_LOST of its own once the ring is
 *	empty, for events dropped or not sent (no memory for the message)
 *	that no later event has reported.  A member that reads too slowly
 *	gets ENOBUFS, as with any multicast.  Nothing is queued, and no loss
 *	owed, while nobody has joined the group.
 *
 * TABLE_GET and STATS_GET dumps take an optional TABLE_NAME as a filter;
 * LINK_GET and STATS_GET dumps an optional LINK_ID.
 *
 * Table identity is the SHA-256 of the whole file plus a generation number
 * that is unique to each load; generations start from the wall clock when
 * the module loads, so they do not repeat across module reloads either.
 *
 * The wire protocol between a host and its clients (hello, REQUEST,
 * RESPONSE, CATALOG, statuses and limits) is defined after the netlink
 * part below.  It runs over RDMA RC (rdma_cm) or over TCP.  The client
 * role's character device, /dev/engram_rdma, and its ioctls come last
 * (Documentation/ioctl.rst).
 *
 * Module parameters (see Documentation/admin-guide.rst): listen= and remote=
 * take comma-separated URLs, rdma://IP:PORT or tcp://IP:PORT for listen,
 * rdma://SERVER:PORT@LOCAL or tcp://SERVER:PORT@LOCAL for remote; IPv6
 * addresses go in brackets.  Wildcard addresses are refused.
 */
#ifndef _UAPI_LINUX_ENGRAM_RDMA_H
#define _UAPI_LINUX_ENGRAM_RDMA_H

#include <linux/const.h>
#include <linux/ioctl.h>
#include <linux/types.h>

#define ENGRAM_GENL_NAME	"engram_rdma"
#define ENGRAM_GENL_VERSION	1
#define ENGRAM_MCGRP_EVENTS	"events"

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
	ENGRAM_CMD_LISTEN_ADD,
	ENGRAM_CMD_LISTEN_DEL,
	ENGRAM_CMD_LISTEN_GET,
	ENGRAM_CMD_LINK_ADD,
	ENGRAM_CMD_LINK_DEL,
	ENGRAM_CMD_LINK_GET,
	ENGRAM_CMD_ALLOW_ADD,
	ENGRAM_CMD_ALLOW_DEL,
	ENGRAM_CMD_ALLOW_GET,
	ENGRAM_CMD_EVENT,
	ENGRAM_CMD_LINK_CATALOG_GET,
	ENGRAM_CMD_TABLE_DRAIN,

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
	ENGRAM_A_URL,			/* string, rdma://... or tcp://... */
	ENGRAM_A_LISTEN_STATE,		/* u8, enum engram_listen_state */
	ENGRAM_A_LINK_ID,		/* u32, >= 1 */
	ENGRAM_A_LINK_STATE,		/* u8, enum engram_link_state */
	ENGRAM_A_LINK_ERROR,		/* u32, positive errno, last failure (links, listeners) */
	ENGRAM_A_LINK_TABLES,		/* u32, tables in the server's catalog */
	ENGRAM_A_LINK_MAX_ROWS,		/* u32, negotiated rows per request */
	ENGRAM_A_LINK_MAX_INFLIGHT,	/* u32, negotiated tickets in flight */
	ENGRAM_A_LINK_CONNECTS,		/* u64, connections established */
	ENGRAM_A_LINK_SINCE_NS,		/* u64, time since the last state change */
	ENGRAM_A_DEVICE,		/* string, RDMA device name */
	ENGRAM_A_LATENCY,		/* nest of u64 buckets 1..ENGRAM_LAT_BUCKETS; type 0 pads */
	ENGRAM_A_CONNECTIONS,		/* u32, live connections on a listener */
	ENGRAM_A_ALLOW,			/* string, allow-list entry IP[/PREFIXLEN] */
	ENGRAM_A_LINK_RECONNECTS,	/* u64, connection attempts after a loss */
	ENGRAM_A_LINK_HEARTBEAT_US,	/* u32, last heartbeat round trip */
	ENGRAM_A_TRANSPORT,		/* u8, enum engram_transport */
	ENGRAM_A_ALLOW_MODE,		/* u8, enum engram_allow_mode */
	ENGRAM_A_LINK_PROTOCOL,		/* u32, negotiated wire protocol version */
	ENGRAM_A_LINK_QUEUES,		/* u32, queue pairs the connection uses */
	/* nest of u64, attribute i: fetches done on queue i - 1; type 0 pads */
	ENGRAM_A_LINK_QUEUE_FETCHES,
	ENGRAM_A_LATENCY_SUM_NS,	/* u64, sum of the times ENGRAM_A_LATENCY counts */
	ENGRAM_A_EVENT,			/* u8, enum engram_event */
	ENGRAM_A_EVENTS_LOST,		/* u32, events dropped before this one */
	/*
	 * u64: a shard, the rows a host holds of a table (load: both or
	 * neither; without them the whole table); reported for every table,
	 * and for a link's catalog entries.
	 */
	ENGRAM_A_TABLE_HELD_FIRST,
	ENGRAM_A_TABLE_HELD_ROWS,
	ENGRAM_A_TABLE_DRAINING,	/* u8, 1 while draining (TABLE_DRAIN: what to do) */
	ENGRAM_A_TABLE_INFLIGHT,	/* u32, requests of clients holding the table now */
	ENGRAM_A_TABLE_DRAIN_QUIET_NS,	/* u64, while draining: since its last request */

	__ENGRAM_A_MAX,
	ENGRAM_A_MAX = __ENGRAM_A_MAX - 1
};

enum engram_table_state {
	ENGRAM_TABLE_UNSPEC,
	ENGRAM_TABLE_LOADING,
	ENGRAM_TABLE_READY,
	ENGRAM_TABLE_VERIFYING,
	ENGRAM_TABLE_FAILED,
	/* In a catalog of protocol version 6 only: served, but draining. */
	ENGRAM_TABLE_DRAINING
};

enum engram_listen_state {
	ENGRAM_LISTEN_UNSPEC,
	ENGRAM_LISTEN_ACTIVE,		/* rdma_listen() succeeded */
	ENGRAM_LISTEN_WAITING		/* no device or address yet; retried */
};

enum engram_link_state {
	ENGRAM_LINK_UNSPEC,
	ENGRAM_LINK_CONNECTING,		/* resolving, connecting, or waiting for the catalog */
	ENGRAM_LINK_UP,			/* connected, catalog received */
	ENGRAM_LINK_DOWN		/* failed or lost; retried */
};

enum engram_transport {
	ENGRAM_TRANSPORT_UNSPEC,
	ENGRAM_TRANSPORT_RDMA,
	ENGRAM_TRANSPORT_TCP
};

/* What an ENGRAM_CMD_EVENT reports. */
enum engram_event {
	ENGRAM_EVENT_UNSPEC,
	ENGRAM_EVENT_TABLE_STATE,	/* loading, ready, verifying or failed */
	ENGRAM_EVENT_TABLE_UNLOADED,
	ENGRAM_EVENT_LINK_ADDED,
	ENGRAM_EVENT_LINK_STATE,	/* connecting, up or down */
	ENGRAM_EVENT_LINK_DELETED,
	ENGRAM_EVENT_LISTEN_ADDED,
	ENGRAM_EVENT_LISTEN_STATE,	/* active or waiting */
	ENGRAM_EVENT_LISTEN_DELETED,
	ENGRAM_EVENT_LOST		/* only EVENTS_LOST: no other event came to carry it */
};

/* Whom the listeners accept (the allow-list is host-wide). */
enum engram_allow_mode {
	ENGRAM_ALLOW_ANY,		/* no allow-list was ever set: any peer */
	ENGRAM_ALLOW_LIST,		/* only peers that match an entry */
	ENGRAM_ALLOW_NONE		/* its last entry was deleted: no peer */
};

/*
 * Latency histogram: nest attribute i (1-based) counts operations that took
 * less than 2^i microseconds and at least 2^(i-1) (bucket 1: under 2 us;
 * the last bucket also counts everything slower).
 */
#define ENGRAM_LAT_BUCKETS	24

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
	/*
	 * Requests refused, by wire status.  Per table and module-wide on a
	 * server (for an unknown table only module-wide); per link on a
	 * client, where they count the refusals the server sent back.
	 */
	ENGRAM_STAT_REFUSED_BAD_VERSION,
	ENGRAM_STAT_REFUSED_MALFORMED,
	ENGRAM_STAT_REFUSED_UNKNOWN_TABLE,
	ENGRAM_STAT_REFUSED_TABLE_NOT_READY,
	ENGRAM_STAT_REFUSED_ROW_OUT_OF_RANGE,
	ENGRAM_STAT_REFUSED_TOO_MANY_ROWS,
	ENGRAM_STAT_REFUSED_TOO_MANY_RANGES,
	ENGRAM_STAT_REFUSED_DEST_TOO_SMALL,
	ENGRAM_STAT_REFUSED_BUSY,
	ENGRAM_STAT_REFUSED_SHUTTING_DOWN,
	ENGRAM_STAT_REFUSED_INTERNAL,
	/* server, module-wide */
	ENGRAM_STAT_CONNECTIONS,	/* server connections open now */
	ENGRAM_STAT_CONNECTS_ACCEPTED,
	ENGRAM_STAT_CONNECTS_REJECTED,	/* bad hello, no resources */
	ENGRAM_STAT_TRANSPORT_ERRORS,	/* failed work completions, broken connections */
	ENGRAM_STAT_RDMA_WRITES,	/* WRITE work requests posted for rows */
	/* client, per link (and summed module-wide) */
	ENGRAM_STAT_FETCHES,		/* fetches completed with rows */
	ENGRAM_STAT_FETCH_ROWS,
	ENGRAM_STAT_FETCH_BYTES,
	ENGRAM_STAT_FETCH_ERRORS,	/* fetches that failed, for any reason */
	ENGRAM_STAT_FETCH_TIMEOUTS,
	/* server, module-wide */
	ENGRAM_STAT_CONNECTS_DENIED,	/* peers not on the allow-list */
	ENGRAM_STAT_PEER_TIMEOUTS,	/* TCP peers dropped for stalling */
	ENGRAM_STAT_FAULTS_INJECTED,	/* responses delayed or dropped by fault_* */
	/* client, per link and per link table (and summed module-wide) */
	ENGRAM_STAT_FALLBACKS,		/* fetches libengram served from its local copy */
	ENGRAM_STAT_FALLBACK_ROWS,
	ENGRAM_STAT_RECONNECTS,		/* connection attempts after a loss */
	ENGRAM_STAT_HEARTBEATS_MISSED,	/* links marked down by the heartbeat */
	/* TCP server, module-wide */
	ENGRAM_STAT_TCP_HELLO_TIMEOUTS,	/* no whole HELLO in tcp_hello_timeout_ms */
	ENGRAM_STAT_TCP_FRAME_TIMEOUTS,	/* a frame not whole in tcp_frame_timeout_ms */
	ENGRAM_STAT_TCP_IDLE_CLOSES,	/* silent for tcp_idle_timeout_ms */
	/* server, module-wide: RDMA connection requests over a limit, idle closes */
	ENGRAM_STAT_CONNECTS_OVER_LISTENER,	/* rdma_max_conns on the listener */
	ENGRAM_STAT_CONNECTS_OVER_PEER,		/* rdma_max_conns_per_peer */
	ENGRAM_STAT_CONNECTS_OVER_TOTAL,	/* rdma_max_conns_total */
	ENGRAM_STAT_IDLE_CLOSES,	/* silent for rdma_idle_timeout_ms */
	/* client, per link (and summed module-wide) */
	ENGRAM_STAT_REMOTE_INVALIDATIONS,	/* fetches whose RESPONSE invalidated a key */
	/*
	 * Server, module-wide: rows answered per transport, and the CPU time
	 * its threads spent answering them (parse to last post or send),
	 * sampled by the scheduler tick as /proc/stat is.
	 */
	ENGRAM_STAT_SERVED_RDMA_ROWS,
	ENGRAM_STAT_SERVED_RDMA_CPU_NS,
	ENGRAM_STAT_SERVED_TCP_ROWS,
	ENGRAM_STAT_SERVED_TCP_CPU_NS,
	/*
	 * Client, per link, per table on a link, and module-wide: parts of
	 * fetches of tables opened on no link (Documentation/failures.rst,
	 * "Replicas").
	 */
	ENGRAM_STAT_FAILOVERS,		/* parts sent again here after failing elsewhere */
	ENGRAM_STAT_SPLITS,		/* parts of fetches split over replicas, sent here */
	/* Refused for a row outside the host's shard (version 3), as REFUSED_*. */
	ENGRAM_STAT_REFUSED_ROW_NOT_HELD,
	/* client, per link (and summed module-wide) */
	ENGRAM_STAT_CATALOGS,		/* CATALOGs read */
	ENGRAM_STAT_CATALOGS_REPLACED,	/* replaced by a newer one before being read */
	/*
	 * Module-wide: the work fetches cost, per role (make bench divides
	 * them by the fetches of each case).  GPU node: posts to links' QPs
	 * for fetches and their receives (heartbeats left out), the work
	 * requests in them, completions reaped on links' CQs, work items
	 * queued for fetches, and allocation calls on the fetch path (ticket
	 * index stores among them).  Host: RDMA requests answered, posts,
	 * work requests, completions and work items for them, and the CPU
	 * time from a request's frame to its last post (local_clock()).
	 */
	ENGRAM_STAT_CLIENT_POSTS,
	ENGRAM_STAT_CLIENT_WRS,
	ENGRAM_STAT_CLIENT_CQES,
	ENGRAM_STAT_CLIENT_WORK_ITEMS,
	ENGRAM_STAT_CLIENT_ALLOCS,
	ENGRAM_STAT_HOST_REQUESTS,
	ENGRAM_STAT_HOST_POSTS,
	ENGRAM_STAT_HOST_WRS,
	ENGRAM_STAT_HOST_CQES,
	ENGRAM_STAT_HOST_WORK_ITEMS,
	ENGRAM_STAT_HOST_REQUEST_NS,
	/*
	 * Client, per link (and summed module-wide): windows of buffers
	 * registered with ENGRAM_REG_F_KEEP_KEYS that a connection registered
	 * and kept, each once per connection.
	 */
	ENGRAM_STAT_KEPT_REGISTRATIONS,
	/*
	 * Module-wide, a cost as CLIENT_POSTS: holds of a link's lock by
	 * the fetches on it, from submit to the completion that ends each.
	 */
	ENGRAM_STAT_CLIENT_LINK_LOCKS,
	/*
	 * Module-wide, a cost as CLIENT_CQES: those of them reaped in softirq
	 * (after an interrupt), not by a busy-polling caller on a poll queue
	 * (the link_poll_queues parameter).
	 */
	ENGRAM_STAT_CLIENT_SOFTIRQ_CQES,

	__ENGRAM_STAT_MAX,
	ENGRAM_STAT_MAX = __ENGRAM_STAT_MAX - 1
};

/*
 * Wire protocol, versions 1 to 6 (Documentation/protocol.rst has the byte
 * tables).  Their frames have the same layout (the header carries the
 * negotiated version); version 2 lets an RDMA server send a RESPONSE as a
 * SEND with invalidate of the request's first range key, which a version 1
 * client does not expect; version 3 adds what shards need: the rows a host
 * holds in its catalog, slots in a request, and ROW_NOT_HELD; version 4
 * lists each table's tensor offsets in the catalog; version 5 lets a
 * REQUEST say that its keys are kept (ENGRAM_WIRE_REQ_KEPT_KEYS); version
 * 6 lets a catalog entry be ENGRAM_TABLE_DRAINING.
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
 * struct engram_wire_range, then nr_rows __u32 row indices, then (with
 * ENGRAM_WIRE_REQ_SLOTS, version 3) nr_rows __u32 slots; length is exactly
 * 48 + 24 * nr_ranges + 4 * nr_rows (8 * nr_rows with slots).  Row i of
 * the request lands at byte offset i * dest_stride (slot i * dest_stride
 * with slots) of the concatenation of the ranges; no row may straddle two
 * ranges.  Row indices are 32-bit: tables of fewer than 2^32 rows are
 * served.  Duplicate indices are allowed.
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
#define ENGRAM_WIRE_VERSION		6	/* newest version spoken */
#define ENGRAM_WIRE_VERSION_MIN		1	/* oldest version spoken */

/* First 8 bytes of the table file's SHA-256 name a table in a request. */
#define ENGRAM_WIRE_DIGEST_PREFIX	8
/* Hard limits: a hello outside them is refused. */
#define ENGRAM_WIRE_MAX_RANGES		16
#define ENGRAM_WIRE_MAX_ROWS		0x100000	/* 1,048,576 */
#define ENGRAM_WIRE_MAX_REQUEST_BYTES	0x800000	/* 8 MiB */
/* A CATALOG lists at most ENGRAM_MAX_TABLES tables: 24 + 256 * 152 bytes. */
#define ENGRAM_WIRE_MAX_CATALOG_BYTES	(24 + ENGRAM_MAX_TABLES * 152)

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
	ENGRAM_WIRE_INTERNAL = 11,	/* server-side failure; the request was valid */
	/* Version 3: bad_index names the first row this host does not hold. */
	ENGRAM_WIRE_ROW_NOT_HELD = 12
};

#define ENGRAM_WIRE_STATUS_MAX		ENGRAM_WIRE_ROW_NOT_HELD

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
	__u16 flags;			/* ENGRAM_WIRE_REQ_*; 0 before version 3 */
	__u32 reserved1;		/* 0 */
};

/*
 * Version 3: nr_rows __u32 slots follow the row indices, and row i lands at
 * byte offset slots[i] * dest_stride instead of i * dest_stride.  A GPU
 * node whose table is sharded over hosts sends each host its rows with
 * their places in the one destination.
 */
#define ENGRAM_WIRE_REQ_SLOTS		0x0001
/*
 * Version 5: the client keeps the keys of this request's ranges registered
 * across fetches (ENGRAM_REG_F_KEEP_KEYS): the RESPONSE is a plain SEND
 * that invalidates no key.
 */
#define ENGRAM_WIRE_REQ_KEPT_KEYS	0x0002

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
	__u32 bad_index;		/* ROW_OUT_OF_RANGE, ROW_NOT_HELD: its position */
	__u64 bytes;			/* row bytes written (OK) or 0 */
};

/* CATALOG: 24 bytes, then nr_entries entries. */
struct engram_wire_catalog {
	struct engram_wire_hdr hdr;
	__u32 nr_entries;		/* <= ENGRAM_MAX_TABLES */
	__u32 reserved;			/* 0 */
};

/*
 * One table: 120 bytes; from version 3 a struct engram_wire_held after it,
 * from version 4 then a struct engram_wire_tensor.
 */
struct engram_wire_catalog_entry {
	char name[ENGRAM_NAME_MAX];	/* [A-Za-z0-9._-], NUL-padded */
	__u8 sha256[ENGRAM_SHA256_LEN];	/* all zero while not yet known */
	__u64 generation;
	__u64 rows;			/* 1 .. 2^32 - 1 */
	__u32 row_bytes;		/* ENGRAM_ROW_BYTES */
	__u32 state;			/* enum engram_table_state */
};

/*
 * Version 3, after each catalog entry: the rows the host holds, a shard
 * (engramctl load --rows) or the whole table (0 and rows).  A host lists
 * only whole tables to a version 1 or 2 peer.
 */
struct engram_wire_held {
	__u64 first_row;
	__u64 nr_rows;			/* >= 1; first_row + nr_rows <= rows */
};

/*
 * Version 4, after the rows held: where the table's tensors are in its
 * file.  The file's SHA-256 names the file, not the table: one file holds
 * several Engram tables (layers 1 and 14).  A table's identity is the
 * digest, these offsets and its geometry (rows, row_bytes); two entries
 * with one identity serve the same bytes, whatever their names.
 */
struct engram_wire_tensor {
	__u64 weight_offset;		/* >= 8: byte offset of the weight tensor */
	__u64 scale_offset;		/* >= 8: byte offset of the scale tensor */
};

/*
 * Character device /dev/engram_rdma (client role; Documentation/ioctl.rst).
 *
 * Every ioctl takes one struct whose first field, size, is sizeof() the
 * struct as the caller knows it.  The kernel reads it with
 * copy_struct_from_user(): a caller built against an older, shorter struct
 * works; a newer, longer one works as long as the bytes the kernel does not
 * know are zero (else E2BIG).  A size below the first version of the struct
 * is EINVAL.  Flags the kernel does not know, and nonzero reserved fields,
 * are EINVAL.  Output fields are written back, up to size bytes, when the
 * call succeeds, and by FETCH also when the fetch failed after it was sent
 * (and on EINTR, with the ticket to WAIT for).
 *
 * State is per open file: tables opened, buffers registered and fetches in
 * flight belong to the fd and are released when it is closed.
 */
#define ENGRAM_DEV_NAME		"engram_rdma"
#define ENGRAM_IOC_MAGIC	0xE7

/* ENGRAM_IOC_OPEN_TABLE flags */
#define ENGRAM_OPEN_BY_NAME	_BITUL(0)	/* match name */
#define ENGRAM_OPEN_BY_SHA256	_BITUL(1)	/* match sha256 (both: both must match) */
#define ENGRAM_OPEN_FLAGS	(ENGRAM_OPEN_BY_NAME | ENGRAM_OPEN_BY_SHA256)

/* Open a table of a link's catalog (link 0: the first link that has it). */
struct engram_ioc_open {
	__u32 size;
	__u32 flags;			/* ENGRAM_OPEN_*; at least one BY_ */
	__u32 link;			/* link id, or 0 for any link that is up */
	__u32 reserved0;		/* 0 */
	char name[ENGRAM_NAME_MAX];	/* NUL-terminated, with BY_NAME */
	__u8 sha256[ENGRAM_SHA256_LEN];	/* with BY_SHA256 */
	/* out */
	__u32 handle;			/* names the table in fetches on this fd */
	__u32 link_out;			/* the link chosen */
	__u64 rows;
	__u64 generation;
	__u32 row_bytes;		/* ENGRAM_ROW_BYTES */
	__u32 max_rows;			/* negotiated rows per fetch on that link */
	__u8 sha256_out[ENGRAM_SHA256_LEN];
	/* the table's tensors in its file; 0 when only hosts below version 4 serve it */
	__u64 weight_offset;
	__u64 scale_offset;
	__u64 reserved[2];		/* 0 */
};

#define ENGRAM_OPEN_SIZE_VER0	208

/* Register a buffer for fetches: pinned, charged to RLIMIT_MEMLOCK. */
struct engram_ioc_reg {
	__u32 size;
	__u32 flags;			/* ENGRAM_REG_F_* */
	__u64 addr;			/* user address */
	__u64 length;			/* bytes, >= 1 */
	/* out */
	__u32 buf_id;			/* >= 1 */
	__u32 reserved0;		/* 0 */
	__u64 reserved[2];		/* 0 */
};

#define ENGRAM_REG_SIZE_VER0	48

/*
 * Keep the buffer registered on each RDMA connection that writes into it,
 * from its first fetch there until the buffer or the connection goes: no
 * registration and no invalidation per fetch.  For hosts the operator
 * trusts: while the connection lives, its host can write anywhere in the
 * buffer's registered windows, not only where a fetch asked
 * (Documentation/failures.rst, "Kept registrations").
 */
#define ENGRAM_REG_F_KEEP_KEYS	0x0001

struct engram_ioc_unreg {
	__u32 size;
	__u32 flags;			/* 0 */
	__u32 buf_id;
	__u32 reserved0;		/* 0 */
};

#define ENGRAM_UNREG_SIZE_VER0	16

/* One destination range of a fetch, inside a registered buffer. */
struct engram_ioc_range {
	__u32 buf_id;
	__u32 reserved;			/* 0 */
	__u64 offset;			/* from the start of the buffer */
	__u64 length;
};

/* ENGRAM_IOC_SUBMIT / ENGRAM_IOC_FETCH / ENGRAM_IOC_WAIT flags */
#define ENGRAM_FETCH_RANGES	_BITUL(0)	/* destination is ranges[], not buf_id/offset */
#define ENGRAM_FETCH_BUSY_POLL	_BITUL(1)	/* wait by polling, not sleeping */
#define ENGRAM_FETCH_DONE_WORD	_BITUL(2)	/* set a completion word when it ends */
#define ENGRAM_FETCH_FLAGS	(ENGRAM_FETCH_RANGES | ENGRAM_FETCH_BUSY_POLL | \
				 ENGRAM_FETCH_DONE_WORD)

/*
 * A completion word's value when its fetch failed: bit 63 and the positive
 * errno.  It compares above any value a fetch may ask for (bit 63 clear),
 * so a GPU stream waiting for "at least done_value" goes on either way and
 * the engine tells the two apart.
 */
#define ENGRAM_DONE_FAILED	_BITULL(63)

/*
 * Fetch nr_rows rows of a table into registered memory.  Row i lands at
 * i * stride of the destination: (buf_id, offset), or with
 * ENGRAM_FETCH_RANGES the concatenation of the nr_ranges ranges at
 * ranges (no row may straddle two of them).  timeout_ns is relative to the
 * call (0: the module's timeout_ms).  SUBMIT returns once the request is
 * sent, with its ticket; FETCH also waits for it.
 *
 * With ENGRAM_FETCH_DONE_WORD (size >= ENGRAM_FETCH_SIZE_VER1), the 8-byte
 * word at done_offset of registered buffer done_buf_id (its address 8-byte
 * aligned, outside the bytes the rows span) is set when the fetch has ended: to
 * done_value (bit 63 clear) once every row is in place, or to
 * ENGRAM_DONE_FAILED | errno once nothing more can land.  Such a fetch
 * needs no WAIT when it succeeds: the fd reaps it at its next SUBMIT or
 * FETCH, and WAIT returns its result until then.  One that failed stays
 * until WAIT (or close) reaps it, as any other.
 */
struct engram_ioc_fetch {
	__u32 size;
	__u32 flags;			/* ENGRAM_FETCH_* */
	__u32 handle;			/* from ENGRAM_IOC_OPEN_TABLE */
	__u32 nr_rows;			/* 1 .. the link's max_rows */
	__u64 rows;			/* user pointer to nr_rows __u32 indices */
	__u32 buf_id;			/* without ENGRAM_FETCH_RANGES */
	__u32 stride;			/* >= ENGRAM_ROW_BYTES */
	__u64 offset;			/* without ENGRAM_FETCH_RANGES */
	__u64 ranges;			/* user pointer to struct engram_ioc_range[] */
	__u32 nr_ranges;		/* 1 .. ENGRAM_WIRE_MAX_RANGES, with RANGES */
	__u32 reserved0;		/* 0 */
	__u64 timeout_ns;
	/* out */
	__u64 ticket;			/* SUBMIT: what to WAIT for */
	__u32 wire_status;		/* enum engram_wire_status from the server */
	__u32 bad_index;		/* ROW_OUT_OF_RANGE, ROW_NOT_HELD: first bad position */
	__u64 rtt_ns;			/* FETCH: submit to completion */
	__u64 reserved[2];		/* 0 */
	/* ENGRAM_FETCH_SIZE_VER1 */
	__u32 done_buf_id;		/* with ENGRAM_FETCH_DONE_WORD */
	__u32 reserved1;		/* 0 */
	__u64 done_offset;		/* from the start of the buffer; 8-byte aligned address */
	__u64 done_value;		/* bit 63 clear */
};

#define ENGRAM_FETCH_SIZE_VER0	104
#define ENGRAM_FETCH_SIZE_VER1	128

/* Wait for one fetch submitted on this fd (ticket), or any (ticket 0). */
struct engram_ioc_wait {
	__u32 size;
	__u32 flags;			/* ENGRAM_FETCH_BUSY_POLL */
	__u64 ticket;			/* 0: any completed fetch */
	__u64 timeout_ns;		/* 0: until the fetch's own deadline */
	/* out */
	__u64 done_ticket;
	__s32 error;			/* 0 or a negative errno, as a FETCH returns */
	__u32 wire_status;
	__u32 bad_index;
	__u32 reserved0;		/* 0 */
	__u64 rtt_ns;
	__u64 reserved[2];		/* 0 */
};

#define ENGRAM_WAIT_SIZE_VER0	72

/*
 * Tell the module that user space served rows itself (from a local copy of
 * the table) after a remote fetch failed, so the fallback is counted with
 * the table's link: FALLBACKS, FALLBACK_ROWS.
 */
struct engram_ioc_report {
	__u32 size;
	__u32 flags;			/* 0 */
	__u32 handle;			/* from ENGRAM_IOC_OPEN_TABLE */
	__u32 rows;			/* rows served locally, >= 1 */
	__s32 error;			/* the remote fetch's negative errno, or 0 */
	__u32 reserved0;		/* 0 */
	__u64 reserved[2];		/* 0 */
};

#define ENGRAM_REPORT_SIZE_VER0	40

#define ENGRAM_IOC_OPEN_TABLE	_IOWR(ENGRAM_IOC_MAGIC, 1, struct engram_ioc_open)
#define ENGRAM_IOC_REG_BUF	_IOWR(ENGRAM_IOC_MAGIC, 2, struct engram_ioc_reg)
#define ENGRAM_IOC_UNREG_BUF	_IOW(ENGRAM_IOC_MAGIC, 3, struct engram_ioc_unreg)
#define ENGRAM_IOC_SUBMIT	_IOWR(ENGRAM_IOC_MAGIC, 4, struct engram_ioc_fetch)
#define ENGRAM_IOC_WAIT		_IOWR(ENGRAM_IOC_MAGIC, 5, struct engram_ioc_wait)
#define ENGRAM_IOC_FETCH	_IOWR(ENGRAM_IOC_MAGIC, 6, struct engram_ioc_fetch)
#define ENGRAM_IOC_REPORT	_IOW(ENGRAM_IOC_MAGIC, 7, struct engram_ioc_report)

#endif /* _UAPI_LINUX_ENGRAM_RDMA_H */
