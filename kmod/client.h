/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The client role's private interface between the character device
 * (chardev.c), registered buffers (ubuf.c) and links (link.c).
 */
#ifndef _ENGRAM_CLIENT_H
#define _ENGRAM_CLIENT_H

#include <linux/completion.h>
#include <linux/kref.h>
#include <linux/ktime.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>

#include "engram.h"
#include "wire.h"

/*
 * The longest a fetch's deadline, and a WAIT's timeout, may be: larger
 * values are cut to it (Documentation/ioctl.rst).  A bound, so that a
 * caller's typo cannot pin a buffer and a request slot for days.
 */
#define ENGRAM_FETCH_MAX_TIMEOUT_NS	(3600ULL * NSEC_PER_SEC)

/* A registered user buffer: pinned pages, charged to RLIMIT_MEMLOCK. */
struct engram_ubuf {
	struct kref ref;		/* the fd's registry, and each fetch using it */
	u32 id;
	u64 addr;
	u64 length;
	struct page **pages;
	unsigned long nr_pages;
	struct mm_struct *mm;		/* charged; mmgrab()bed; NULL: kernel pages */
	struct engram_dma_owner maps;	/* its DMA maps, per device (dma.c) */
	bool keep;			/* ENGRAM_REG_F_KEEP_KEYS */
	struct xarray kept;		/* its kept registrations (kept.c) */
};

int engram_ubuf_create(u64 addr, u64 length, struct engram_ubuf **out);
/* A bounce buffer's size: 7,943 rows, what a gathered part over RDMA takes. */
#define ENGRAM_BOUNCE_BYTES	(2U << 20)
#define ENGRAM_BOUNCE_ROWS	(ENGRAM_BOUNCE_BYTES / ENGRAM_ROW_BYTES)

int engram_ubuf_create_kernel(u64 length, struct engram_ubuf **out);
void engram_ubuf_zero(struct engram_ubuf *b, u64 len);
void engram_ubuf_copy(struct engram_ubuf *dst, u64 doff, struct engram_ubuf *src, u64 soff,
		      u64 len);
void engram_ubuf_set_word(struct engram_ubuf *b, u64 off, u64 val);
void engram_ubuf_get(struct engram_ubuf *b);
void engram_ubuf_put(struct engram_ubuf *b);
const dma_addr_t *engram_ubuf_dma(struct engram_ubuf *b, struct ib_device *dev);
int engram_ubuf_sg(struct engram_ubuf *b, struct ib_device *dev, u64 start, u64 end,
		   struct scatterlist *sgl, unsigned int max);
void engram_ubuf_sync(struct engram_ubuf *b, struct ib_device *dev, u64 off, u64 len,
		      bool to_device);

/* One destination range as the caller gave it, resolved to its buffer. */
struct engram_dest {
	struct engram_ubuf *buf;
	u64 off;
	u64 len;
};

/* One piece of a fetch's destination: part of a buffer, one MR, one wire range. */
struct engram_piece {
	struct engram_ubuf *buf;
	u64 off;			/* in the buffer */
	u64 len;
	struct ib_mr *mr;
};

/*
 * One fetch.  The fd owns one reference until the result is reaped; the link
 * owns one while the fetch is on the wire (until its MRs are invalidated or
 * its QP is drained).
 */
struct engram_fetch {
	struct kref ref;
	struct list_head fd_node;	/* on the fd's fetch list */
	struct engram_link *link;	/* held */
	u64 ticket;			/* unique per link */
	u64 user_ticket;		/* unique per fd, what user space sees */
	u32 conn_gen;			/* the link connection it went out on */
	int slot;			/* request buffer, -1 when none */
	bool responded;			/* a RESPONSE was matched to it */
	bool wire_broken;		/* a WR failed or was not posted: teardown ends it */
	bool finished;			/* off the wire, MRs back in the pool */
	bool kept;			/* its pieces land through kept keys (kept.c) */
	bool polled;			/* its caller busy-polls: a poll queue if any */
	bool poll_q;			/* on a poll queue: its caller reaps it */

	/* what to ask */
	u8 digest[ENGRAM_WIRE_DIGEST_PREFIX];
	u64 generation;
	u32 nr_rows;
	u32 stride;
	u32 *rows;
	u32 rows_cap;			/* entries @rows holds (kept with a spare fetch) */
	/*
	 * NULL, or where each row lands: row i at places[i] * stride of the
	 * pieces (a part of a fetch routed to shards, version 3 only).
	 */
	u32 *places;
	struct engram_piece pieces[ENGRAM_WIRE_MAX_RANGES];
	unsigned int nr_pieces;
	struct engram_link_table *lt;	/* its table's counters (link_table.c), or NULL */

	/* on the wire (link_rdma.c, link_tcp.c) */
	u32 req_len;
	struct ib_device *ibdev;	/* the MRs and the buffer syncs are its */
	struct ib_cqe send_cqe;
	struct ib_cqe inv_cqe;
	atomic_t wire_refs;		/* the SEND and each MR invalidation to come */
	/*
	 * The first piece's key as sent: the RESPONSE is matched against it
	 * without l->lock, under which teardown may give the MR back.
	 */
	u32 rkey0;
	/* Built here, not on the stack: the LOCAL_INVs are posted in softirq. */
	struct ib_reg_wr reg_wrs[ENGRAM_WIRE_MAX_RANGES];
	struct ib_send_wr inv_wrs[ENGRAM_WIRE_MAX_RANGES];
	struct list_head done_node;	/* teardown's list of fetches to publish */

	/*
	 * The fd's fetch: its completion word (ENGRAM_FETCH_DONE_WORD), held,
	 * set once it ends (engram_fetch_signal()), after its rows were synced
	 * for the CPU (@rows_synced: the reap must not sync them again, as the
	 * caller may have written there since).
	 */
	struct engram_ubuf *done_buf;
	u64 done_off;
	u64 done_value;
	bool rows_synced;

	/* outcome */
	ktime_t start;
	ktime_t deadline;
	u64 rtt_ns;
	int error;			/* 0 or -errno */
	u16 wire_status;
	u32 bad_index;
	bool done;			/* result final, buffers safe to reuse */
	wait_queue_head_t *wq;		/* the fd's, woken on done */

	/*
	 * A fetch of a table opened on no link is served by its replicas
	 * (replica.c): the fd's fetch has no link and owns parts, each an
	 * ordinary fetch on one link for some of its rows.
	 */
	struct engram_replica_fetch *rf;	/* the fd's fetch: its parts */
	/* the fd's fetch: freed ones kept for its next use (replica.c) */
	struct engram_replica_fetch *spare_rf;
	struct engram_fetch *spare_part;
	/* the fd's fetch: end it at its deadline (instead of a link break) */
	void (*expire)(struct engram_fetch *f);
	/* the fd's fetch: reap its parts on poll queues (see engram_link_reap) */
	void (*reap)(struct engram_fetch *f, bool now);
	/* a part: called once it is done, in any context */
	void (*part_done)(struct engram_fetch *f);
	struct engram_fetch *parent;	/* a part: the fd's fetch */
	struct list_head part_node;	/* a part: on its parent's list */
	struct list_head retry_node;	/* a part: its rows to be sent again */
	u32 first;			/* a part: its first row of the parent's */
	u32 span;			/* a part: the parent's rows its destination spans */
	u32 row_lo;			/* a part: its lowest and highest table row */
	u32 row_hi;
	/*
	 * A part gathered from anywhere in the parent: where its rows go,
	 * from @first on.  They are @places on the wire, except on a link
	 * whose host writes with RDMA: its keys would then reach the rows
	 * of other parts between these.  There the rows land back to back
	 * in @bounce, registered alone, and are copied to their places
	 * before the fetch ends (replica.c); @bounce_link, held, keeps the
	 * buffer for reuse afterwards.
	 */
	u32 *placed;
	struct engram_ubuf *bounce;
	struct engram_link *bounce_link;
};

void engram_chardev_fetch_put(struct engram_fetch *f);

/*
 * Set the completion word of the fd's fetch, if it asked for one: the
 * caller has synced its rows for the CPU, and nothing more can land.
 */
static inline void engram_fetch_signal(struct engram_fetch *f, int error)
{
	if (f->done_buf)
		engram_ubuf_set_word(f->done_buf, f->done_off,
				     error ? ENGRAM_DONE_FAILED | (u64)-error : f->done_value);
}

/* Has the fetch ended?  Its result fields may be read once this is true. */
static inline bool engram_fetch_done(const struct engram_fetch *f)
{
	/* Pairs with the release in engram_fetch_set_done(). */
	return smp_load_acquire(&f->done);
}

/* Publish the result: every field written before is seen by readers of done. */
static inline void engram_fetch_set_done(struct engram_fetch *f)
{
	/* Pairs with the acquire in engram_fetch_done(). */
	smp_store_release(&f->done, true);
}

struct engram_link_table;
struct engram_url;

/* A link that serves a table, as engram_link_admin_replicas() found it. */
struct engram_replica_cand {
	struct engram_link *link;	/* held */
	u64 generation;			/* the table's there */
	u64 held_first;			/* the rows it holds there */
	u64 held_rows;
	u32 max_rows;
	u32 max_ranges;
	u32 max_request_bytes;
	u32 mr_pages;			/* U32_MAX: no limit */
	unsigned int inflight;		/* fetches on its wire when looked at */
	bool places;			/* takes requests with row places (version 3) */
	bool remote_write;		/* its host writes rows with RDMA */
	const struct engram_url *url;	/* its link's, while it is held */
};

/**
 * struct engram_table_ident - the table a handle opened on no link names
 * @sha256: its file's digest
 * @rows: its rows
 * @weight_offset: where its weight tensor is in the file; 0 when only
 *	hosts below protocol version 4, which cannot say, served it at open
 * @scale_offset: where its scale tensor is, likewise
 * @name: the name it was opened by, with @by_name
 * @by_name: it was opened by name
 *
 * The digest names a file, and a file holds several tables: only all of
 * the digest, the geometry and the tensors' places name one table.
 */
struct engram_table_ident {
	u8 sha256[ENGRAM_SHA256_LEN];
	u64 rows;
	u64 weight_offset;
	u64 scale_offset;
	char name[ENGRAM_NAME_MAX];
	bool by_name;
};

int engram_link_admin_resolve(u32 flags, const char *name, const u8 *sha256,
			      struct engram_table_ident *id, struct engram_wire_table *e);
int engram_link_admin_replicas(const struct engram_table_ident *id,
			       struct engram_replica_cand *c, unsigned int max, int *none);
bool engram_link_admin_entry_name(struct engram_link *l, u64 generation, char *name);

/* link.c */
struct engram_link;

struct engram_link *engram_link_admin_open_table(u32 link_id, u32 flags, const char *name,
						 const u8 *sha256, struct engram_wire_table *out,
					   u32 *max_rows);
void engram_link_get(struct engram_link *l);
void engram_link_put(struct engram_link *l);
u32 engram_link_id(const struct engram_link *l);
int engram_link_bounce_get(struct engram_link *l, struct engram_ubuf **out);
void engram_link_bounce_put(struct engram_link *l, struct engram_ubuf *b, u64 used);
u32 engram_link_max_ranges(const struct engram_link *l);
int engram_link_submit(struct engram_link *l, struct engram_fetch *f);
void engram_link_break_fetch(struct engram_fetch *f);
void engram_link_reap(struct engram_fetch *f, bool now);
void engram_link_count(struct engram_link *l, enum engram_stat stat, u64 n);
int engram_link_fetch_wait(struct engram_fetch *f, u64 timeout_ns, bool busy);
void engram_link_fetch_end(struct engram_fetch *f);
void engram_link_fetch_sync_rows(struct engram_fetch *f);
u32 engram_link_mr_pages(const struct engram_link *l);

int engram_link_status_errno(unsigned int wire_status);

#endif /* _ENGRAM_CLIENT_H */
