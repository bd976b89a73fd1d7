/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Declarations shared across the parts of engram_rdma: what main.c wires
 * together, and what one role uses of the other's or of the shared files.
 * Each part owns its state.  Files of one part see each other through that
 * part's own header (serve.h, serve_listen.h, serve_rdma.h, serve_tcp.h,
 * table.h, link.h, client.h, link_table.h, netlink.h); the leaves have
 * theirs (wire.h, wbuild.h, pieces.h, url.h, prefix.h, list.h, inject.h).
 */
#ifndef _ENGRAM_H
#define _ENGRAM_H

#include <linux/atomic.h>
#include <linux/dma-direction.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/types.h>
#include <linux/engram_rdma.h>

#include "url.h"

#define ENGRAM_VERSION		"0.1.0"
/* Longest reason kept for a failed load, shown by `engramctl list`. */
#define ENGRAM_ERRMSG_MAX	160

struct netlink_ext_ack;

/* params.c: what modprobe was given, parsed once at load. */
struct engram_config {
	struct engram_url listen[ENGRAM_URL_MAX];
	unsigned int n_listen;
	struct engram_url remote[ENGRAM_URL_MAX];
	unsigned int n_remote;
};

extern struct engram_config engram_config;

/*
 * params.c: an unsigned module parameter with its range beside its value,
 * for module_param_cb(name, &engram_uint_param_ops, &param, 0644).  A value
 * out of range is refused with "NAME=VALUE: want [UNIT in ][0 or ]MIN-MAX"
 * in the log; readers take READ_ONCE(param.val), each time they use it, so
 * a change applies at once.
 */
struct engram_uint_param {
	unsigned int val;
	unsigned int min;
	unsigned int max;
	bool zero_ok;		/* 0 is allowed besides MIN-MAX (a limit turned off) */
	bool warn;		/* a test knob: logged when set to anything but 0 */
	const char *unit;	/* "milliseconds", "seconds" or NULL */
	void (*changed)(void);	/* called after each change, process context */
};

extern const struct kernel_param_ops engram_uint_param_ops;

int engram_params_init(void);
unsigned int engram_params_timeout_ms(void);
unsigned int engram_params_heartbeat_ms(void);
unsigned int engram_params_heartbeat_timeout_ms(void);
unsigned int engram_params_replica_split_rows(void);
bool engram_params_replica_prefer_rdma(void);
u16 engram_params_protocol_version(void);
void engram_params_reconnect_ms(unsigned int *min_ms, unsigned int *max_ms);

/* fault.c: test knobs on the serving side; may sleep. */
bool engram_fault_response(bool (*stop)(void));
bool engram_fault_response_armed(void);
bool engram_fault_server_softirq_short(void);
void engram_fault_map(void);
bool engram_fault_verify_mismatch(void);
/* fault.c: test knobs on the client side; any context. */
bool engram_fault_client_req_fail(void);
bool engram_fault_client_inv_fail(void);
bool engram_fault_client_inv_flush(void);
bool engram_fault_client_queue_unfit(void);
bool engram_fault_server_catalog_repeat(void);
unsigned int engram_fault_client_live_delay_ms(void);

/* stats.c: counters are indexed by enum engram_stat. */
struct engram_counters {
	atomic64_t c[__ENGRAM_STAT_MAX];
};

extern struct engram_counters engram_global_stats;

static inline void engram_count_add(struct engram_counters *c,
				    enum engram_stat id, u64 v)
{
	atomic64_add(v, &c->c[id]);
}

static inline void engram_count(struct engram_counters *c, enum engram_stat id)
{
	atomic64_inc(&c->c[id]);
}

/* Counters kept per table; the same ids are also summed module-wide. */
extern const u8 engram_table_stat_ids[];
extern const unsigned int engram_table_stat_count;
/* Counters that only exist module-wide (the per-table ones are summed there too). */
extern const u8 engram_global_stat_ids[];
extern const unsigned int engram_global_stat_count;
/* Counters kept per client link. */
extern const u8 engram_link_stat_ids[];
extern const unsigned int engram_link_stat_count;
/* Counters kept per table opened through a link. */
extern const u8 engram_link_table_stat_ids[];
extern const unsigned int engram_link_table_stat_count;

void engram_stats_counters_snapshot(const struct engram_counters *c, u64 *out);

/* table.c */
struct engram_load_args {
	const char *name;
	const char *path;		/* may be NULL: derived from the file */
	int fd;
	u64 rows;
	u64 weight_offset;
	u64 scale_offset;
	u32 weight_bytes;
	u32 scale_bytes;
	const u8 *sha256;		/* may be NULL: no expected digest */
	u64 held_first;			/* a shard: its first row */
	u64 held_rows;			/* a shard: its rows; 0 for the whole table */
};

/* A histogram's snapshot: the buckets, then the sum of the times in ns. */
#define ENGRAM_LAT_SLOTS	(ENGRAM_LAT_BUCKETS + 1)
#define ENGRAM_LAT_SUM		ENGRAM_LAT_BUCKETS

/*
 * A consistent copy of one table's state, taken under the table's lock so
 * that netlink can format it without holding any lock.
 */
struct engram_table_info {
	char name[ENGRAM_NAME_MAX];
	char path[ENGRAM_PATH_MAX];
	u8 sha256[ENGRAM_SHA256_LEN];
	bool have_sha256;
	u8 state;
	u8 verify_result;
	u64 generation;
	u64 rows;
	u64 held_first;
	u64 held_rows;
	u64 weight_offset;
	u64 scale_offset;
	u64 file_bytes;
	u64 done_bytes;
	u64 pinned_bytes;
	u64 meta_bytes;
	u64 elapsed_ns;
	int error;
	char errmsg[ENGRAM_ERRMSG_MAX];
	bool draining;
	u32 inflight;
	u64 drain_quiet_ns;		/* while draining: since its last request */
	u64 stats[__ENGRAM_STAT_MAX];
	u64 lat[ENGRAM_LAT_SLOTS];
};

int engram_table_init(void);
void engram_table_exit(void);
void engram_table_notify(void (*fn)(void));
int engram_table_load(const struct engram_load_args *args,
		      struct netlink_ext_ack *extack);
int engram_table_unload(const char *name, struct netlink_ext_ack *extack);
int engram_table_verify(const char *name, struct netlink_ext_ack *extack);
int engram_table_drain(const char *name, bool drain, struct netlink_ext_ack *extack);
int engram_table_info_by_name(const char *name, struct engram_table_info *info);
int engram_table_info_nth(unsigned long n, struct engram_table_info *info);
void engram_table_totals(u64 *count, u64 *pinned_bytes);

/*
 * table.c: serving.  A server connection looks a table up by its wire
 * identity and holds it (engram_table_serve_get) only while it builds and
 * completes one response; unload waits for those holds to go.
 */
struct engram_table;
struct ib_device;
struct page;
struct engram_wire_table;

/**
 * struct engram_row_src - where one row lies in the table's pinned pages
 * @seg: up to 2 pieces of the weight row, then up to 2 of the scale bytes
 *	(a piece never crosses a page)
 * @seg.page: index into the table's pages
 * @seg.off: offset inside that page
 * @seg.len: bytes
 * @n: pieces used, 2..4, in row order
 */
struct engram_row_src {
	struct {
		pgoff_t page;
		u32 off;
		u32 len;
	} seg[4];
	unsigned int n;
};

int engram_table_serve_get(const u8 *digest, u64 generation,
			   struct engram_table **tp);
void engram_table_serve_put(struct engram_table *t);
u64 engram_table_rows(const struct engram_table *t);
void engram_table_held(const struct engram_table *t, u64 *first, u64 *rows);
const char *engram_table_name(const struct engram_table *t);
void engram_table_row_src(const struct engram_table *t, u32 row,
			  struct engram_row_src *src);
const dma_addr_t *engram_table_dma(struct engram_table *t, struct ib_device *dev);
struct page *engram_table_page(const struct engram_table *t, pgoff_t idx);
struct engram_counters *engram_table_counters(struct engram_table *t);
void engram_table_count_add(struct engram_table *t, enum engram_stat id, u64 v);
void engram_table_latency(struct engram_table *t, u64 ns);
u32 engram_table_catalog(struct engram_wire_table *out, u32 max, u16 version);
void engram_table_device_added(void);

/*
 * dma.c: page arrays mapped per RDMA device.  An owner (a table, a
 * registered buffer) embeds one of these; lookups take no lock.
 */
struct engram_dma_owner {
	struct list_head maps;		/* per device, RCU; changed under @lock */
	struct list_head node;		/* on dma.c's owners, once mapped */
	struct mutex lock;		/* making and freeing maps */
};

void engram_dma_owner_init(struct engram_dma_owner *o);
const dma_addr_t *engram_dma_map(struct engram_dma_owner *o, struct ib_device *dev,
				 struct page **pages, unsigned long nr,
				 enum dma_data_direction dir, bool *created);
const dma_addr_t *engram_dma_lookup(struct engram_dma_owner *o, struct ib_device *dev);
void engram_dma_sync(struct engram_dma_owner *o, struct ib_device *dev, u64 start, u64 len,
		     bool to_device);
void engram_dma_unmap_all(struct engram_dma_owner *o);
void engram_dma_unmap_device(struct ib_device *dev);

/* Latency histograms (stats.c). */
struct engram_hist {
	atomic64_t b[ENGRAM_LAT_BUCKETS];
	atomic64_t sum_ns;		/* of every time counted, for a mean */
};

void engram_stats_hist_add(struct engram_hist *h, u64 ns);
void engram_stats_hist_snapshot(const struct engram_hist *h, u64 *out);
void engram_stats_log_line(const char *name, u32 link_id, const u64 *cur, const u64 *prev,
			   const u64 *lat, const u64 *prev_lat);
void engram_stats_count_refusal(struct engram_counters *c, unsigned int wire_status);

/*
 * dev.c: one engram_dev per user of an RDMA device (a client link's
 * connection, a server connection), holding that user's own protection
 * domain: an rkey works only on the QP of the user that registered it.
 * ib_client.remove tears down every user of the device before it returns.
 */
struct engram_dev {
	struct list_head node;
	struct ib_device *ibdev;
	struct ib_pd *pd;
};

struct engram_dev *engram_dev_open(struct ib_device *ibdev);
bool engram_dev_dead(struct ib_device *ibdev);
struct ib_device *engram_dev_next_present(u64 *seq);
void engram_dev_close(struct engram_dev *dev);
void engram_dev_added(struct ib_device *ibdev);
void engram_dev_removing(struct ib_device *ibdev);
void engram_dev_removed(struct ib_device *ibdev);
void engram_dev_exit(void);

/* serve_listen.c + serve_rdma_conn.c: the host role. */
struct engram_listen_info {
	char url[ENGRAM_URL_TEXT_MAX];
	char device[64];
	u8 state;			/* enum engram_listen_state */
	int error;			/* last failure while WAITING */
	u32 connections;
	u8 allow_mode;			/* enum engram_allow_mode */
};

/* serve.c: the host role's core, under its transports (serve.h). */
int engram_serve_init(void);
void engram_serve_exit(void);

int engram_serve_listen_init(void);
void engram_serve_listen_exit(void);
void engram_serve_listen_remove_device(struct ib_device *ibdev);
void engram_serve_listen_add_device(struct ib_device *ibdev);
int engram_serve_listen_add(const struct engram_url *u, struct netlink_ext_ack *extack);
int engram_serve_listen_del(const struct engram_url *u, struct netlink_ext_ack *extack);
int engram_serve_listen_info_nth(unsigned long n, struct engram_listen_info *info);

/* link.c + chardev.c: the client role. */
/* Connections (RDMA queue pairs) one link may spread its fetches over. */
#define ENGRAM_LINK_MAX_QUEUES		8

struct engram_link_info {
	u32 id;
	char url[ENGRAM_URL_TEXT_MAX];
	char device[64];
	u8 state;			/* enum engram_link_state */
	int error;
	u32 tables;
	u32 max_rows;
	u32 max_inflight;
	u32 protocol;			/* negotiated wire version; 0 while down */
	u32 queues;			/* connections (queue pairs); 0 while down */
	u64 queue_fetches[ENGRAM_LINK_MAX_QUEUES];	/* fetches done on each queue */
	u64 connects;
	u64 reconnects;
	u64 since_ns;
	u8 transport;			/* enum engram_transport */
	bool have_heartbeat;		/* heartbeat_us is known */
	u32 heartbeat_us;		/* last heartbeat round trip */
	u64 stats[__ENGRAM_STAT_MAX];
	u64 lat[ENGRAM_LAT_SLOTS];
};

/* One table of a link's catalog, for netlink. */
struct engram_link_catalog_info {
	u32 link_id;
	u8 link_state;			/* enum engram_link_state */
	char name[ENGRAM_NAME_MAX];
	u8 sha256[ENGRAM_SHA256_LEN];
	u64 rows;
	u64 held_first;			/* the rows the link's host holds */
	u64 held_rows;
	u64 weight_offset;		/* the tensors in the file; 0: not said (before v4) */
	u64 scale_offset;
	u64 generation;
	u8 state;			/* enum engram_table_state */
};

int engram_link_admin_init(void);
void engram_link_admin_exit(void);
void engram_link_admin_remove_device(struct ib_device *ibdev);
int engram_link_admin_add(const struct engram_url *u, u32 *id, struct netlink_ext_ack *extack);
int engram_link_admin_del(u32 id, struct netlink_ext_ack *extack);
int engram_link_admin_info_nth(unsigned long n, struct engram_link_info *info);
int engram_link_admin_info_by_id(u32 id, struct engram_link_info *info);
int engram_link_admin_catalog_nth(unsigned long n, struct engram_link_catalog_info *ci);
int engram_chardev_init(void);
void engram_chardev_exit(void);

/*
 * allow.c: the client allow-list (prefix.h has the entries).  Never set
 * means any peer that can reach a listening address; emptied means none
 * (enum engram_allow_mode).  engram_allow_peer_on() is
 * called at every rdma_cm connect request and TCP accept, may run in any
 * context that can take rcu_read_lock(), and on a refusal counts
 * CONNECTS_DENIED and logs a rate-limited line itself.
 */
struct engram_prefix;
struct sockaddr;

int engram_allow_init(void);
void engram_allow_exit(void);
bool engram_allow_peer_on(const struct sockaddr *peer, const char *listener);
int engram_allow_add(const struct engram_prefix *p, struct netlink_ext_ack *extack);
int engram_allow_del(const struct engram_prefix *p, struct netlink_ext_ack *extack);
int engram_allow_nth(unsigned long n, struct engram_prefix *out);
enum engram_allow_mode engram_allow_mode(void);

/* statlog.c: the per-table log line every statlog_s seconds. */
void engram_statlog_init(void);
void engram_statlog_exit(void);

/* netlink.c */
int engram_netlink_init(void);
void engram_netlink_exit(void);

#endif /* _ENGRAM_H */
