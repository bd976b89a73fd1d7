// SPDX-License-Identifier: GPL-2.0
/*
 * Replicas: a table opened on no link is served by every link that is up
 * and whose catalog holds that table ready: the same file digest, geometry
 * and tensors' places in the file (struct engram_table_ident; the digest
 * alone names a file, which holds several tables).  Two hosts that serve
 * the same table serve byte-identical rows, so any of them may answer any
 * row, and a GPU node keeps fetching while one host is away.
 *
 * A fetch of such a table (the fd's fetch, which has no link) is sent as
 * one or more parts, each an ordinary fetch on one link for a run of its
 * rows, placed where those rows go in the fd's destination:
 *
 * - spreading: each part goes to the replica with the fewest fetches on
 *   its wire, ties taken in turn;
 * - splitting: a fetch of at least twice replica_split_rows rows is cut
 *   by row count into one part per replica that is up (each at least that
 *   many rows), so several hosts answer it at once;
 * - failover: a part that fails for the replica's sake (its connection
 *   broke, its share of the deadline passed, or the host refused it for a
 *   reason another host may not have) is sent again, from a work item, to
 *   a replica it has not tried, within the fetch's one deadline.
 *
 * A part's own deadline is its share: half of what is left of the fetch's
 * when another replica could still take over, all of it otherwise.  Its
 * link enforces it exactly as for any fetch (a late part breaks its
 * connection, which is drained and destroyed before the part ends), so a
 * part ends only when nothing of it can land any more, and only then are
 * its rows sent again; the no-late-write rule holds unchanged.  The fd's
 * fetch ends when every part has ended for good.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/spinlock.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "cost.h"
#include "link_table.h"
#include "pieces.h"
#include "replica.h"
#include "rowmap.h"
#include "url.h"

/* Links a table's replicas may be: every link there may be (ENGRAM_URL_MAX). */
#define ENGRAM_REPLICA_MAX		16
static_assert(ENGRAM_REPLICA_MAX <= ENGRAM_ROWMAP_MAX_HELD);
/* Parts one fetch is cut into at most. */
#define ENGRAM_REPLICA_MAX_PARTS	16
/* Bytes a row takes in a request with row places: its index and its place. */
#define ENGRAM_REPLICA_PLACED_ROW_BYTES	(2 * sizeof(u32))

/* The rows of a table a link held, with the table's counters there. */
struct engram_replica_member {
	struct engram_link *link;	/* held */
	u64 held_first;
	u64 held_rows;
	u64 generation;			/* of the link's entry, for its name */
	struct engram_link_table *lt;	/* held, or NULL */
	bool tried;			/* lt was looked for (engram_replica_lt_fill()) */
};

/**
 * struct engram_replica - a table opened on no link
 * @name: its name in the catalogs, as first found
 * @id: what identifies it on every link
 * @rows: its rows, as the catalogs say
 * @turn: where the next look for the least busy candidate starts
 * @lock: guards @m and @nr
 * @m: the links that served it so far, for the per-table counters
 * @nr: entries in @m
 * @lt_work: finds the counters of members added on the fetch path
 */
struct engram_replica {
	char name[ENGRAM_NAME_MAX];
	struct engram_table_ident id;
	u64 rows;
	atomic_t turn;
	spinlock_t lock;		/* @m and @nr */
	struct engram_replica_member m[ENGRAM_REPLICA_MAX];
	unsigned int nr;
	struct work_struct lt_work;
};

/**
 * struct engram_replica_fetch - the parts of the fd's fetch
 * @lock: guards everything below but @work
 * @rg: the table
 * @f: the fd's fetch
 * @parts: every part made for it, on the wire or ended (part_node)
 * @retry: ended parts whose rows are to be sent again (retry_node)
 * @pending: parts whose rows are not settled yet
 * @expired: the deadline passed or the fd closes: nothing is sent again
 * @error: the first failure that settled a part, 0 if none
 * @wire_status: its server status
 * @bad_index: its ROW_OUT_OF_RANGE or ROW_NOT_HELD position, in the fd's fetch
 * @bounced: a part went into a bounce buffer: the fetch ends from @work,
 *	once the rows are copied to their places
 * @finishing: every part has ended: @work is to copy the rows and end it
 * @work: sends the parts on @retry again, or ends the fetch
 * @rows: with row places, the rows of every part, grouped by part, then
 *	their places (kvmalloc'ed; parts and their retries point into it)
 * @map: while routing, the table's rows by the candidates that hold them
 * @cnt: while routing, the fetch's rows in each of @map's ranges
 */
struct engram_replica_fetch {
	spinlock_t lock;		/* all below but @work */
	struct engram_replica *rg;
	struct engram_fetch *f;
	struct list_head parts;
	struct list_head retry;
	unsigned int pending;
	bool expired;
	int error;
	u16 wire_status;
	u32 bad_index;
	bool bounced;
	bool finishing;
	struct work_struct work;
	u32 *rows;
	struct engram_rowmap map;
	u32 cnt[ENGRAM_ROWMAP_MAX_RANGES];
};

static void engram_replica_put_cands(struct engram_replica_cand *c, unsigned int n)
{
	while (n)
		engram_link_put(c[--n].link);
}

/*
 * Find or make the counters of every member that has none yet, under the
 * name its link's catalog gives the table.  That takes the links' and the
 * link tables' mutexes and allocates, so it runs at open and from
 * @lt_work, never on the fetch path.
 */
static void engram_replica_lt_fill(struct engram_replica *rg)
{
	struct engram_replica_member *m;
	struct engram_link_table *lt;
	char name[ENGRAM_NAME_MAX];
	unsigned long flags;
	unsigned int i;

	for (;;) {
		spin_lock_irqsave(&rg->lock, flags);
		for (i = 0; i < rg->nr && rg->m[i].tried; i++)
			;
		if (i == rg->nr) {
			spin_unlock_irqrestore(&rg->lock, flags);
			return;
		}
		m = &rg->m[i];
		m->tried = true;
		spin_unlock_irqrestore(&rg->lock, flags);
		/* Only this function writes a tried member's fields, one call at a time. */
		strscpy(name, rg->name, sizeof(name));
		engram_link_admin_entry_name(m->link, m->generation, name);
		lt = engram_link_table_get(m->link, name, rg->id.sha256, rg->id.weight_offset);
		spin_lock_irqsave(&rg->lock, flags);
		m->lt = lt;
		spin_unlock_irqrestore(&rg->lock, flags);
	}
}

static void engram_replica_lt_work(struct work_struct *work)
{
	engram_replica_lt_fill(container_of(work, struct engram_replica, lt_work));
}

/*
 * The table's counters for the rows @c holds on its link.  A link and
 * rows held not seen before become a member here, whose counters
 * engram_replica_lt_fill() finds: at once if @may_sleep (at open), else
 * from a work item, and meanwhile this part is counted on its link only.
 */
static struct engram_link_table *engram_replica_lt(struct engram_replica *rg,
						   const struct engram_replica_cand *c,
						   bool may_sleep)
{
	struct engram_replica_member *m;
	struct engram_link_table *lt = NULL;
	unsigned long flags;
	bool added = false;
	unsigned int i;

	spin_lock_irqsave(&rg->lock, flags);
	for (i = 0; i < rg->nr; i++) {
		m = &rg->m[i];
		if (m->link == c->link && m->held_first == c->held_first &&
		    m->held_rows == c->held_rows) {
			lt = m->lt;
			goto out;
		}
	}
	if (rg->nr < ARRAY_SIZE(rg->m)) {
		m = &rg->m[rg->nr++];
		engram_link_get(c->link);
		m->link = c->link;
		m->held_first = c->held_first;
		m->held_rows = c->held_rows;
		m->generation = c->generation;
		m->lt = NULL;
		m->tried = false;
		added = true;
	}
out:
	spin_unlock_irqrestore(&rg->lock, flags);
	if (added && may_sleep) {
		engram_replica_lt_fill(rg);
		return engram_replica_lt(rg, c, false);
	}
	if (added && queue_work(system_unbound_wq, &rg->lt_work))
		engram_cost_inc(ENGRAM_STAT_CLIENT_WORK_ITEMS);
	return lt;
}

/**
 * engram_replica_open() - open a table on every link that serves it
 * @flags: ENGRAM_OPEN_BY_NAME and/or ENGRAM_OPEN_BY_SHA256
 * @name: with BY_NAME
 * @sha256: with BY_SHA256
 * @out: the catalog entry of the first link that serves it
 * @max_rows: the most rows one of its fetches may ask for
 * @first_link: the id of that first link
 *
 * Every link that has a table of that name and digest must agree on which
 * table it is (engram_link_admin_resolve()); from then on the table is
 * that identity, whatever names other hosts give it, and a name reloaded
 * with another table no longer serves it.
 *
 * Return: the table, or ERR_PTR: -ENOTUNIQ (two tables under the name, or
 * more than one table of the file by digest alone),
 * -ENOTCONN (no link is up), -ENOENT (no link has it), -EAGAIN (it is not
 * ready anywhere), -ENOMEM.
 */
struct engram_replica *engram_replica_open(u32 flags, const char *name, const u8 *sha256,
					   struct engram_wire_table *out, u32 *max_rows,
					   u32 *first_link)
{
	struct engram_replica_cand c[ENGRAM_REPLICA_MAX];
	struct engram_table_ident id;
	struct engram_replica *rg;
	struct engram_link *l;
	unsigned int i;
	int n;

	n = engram_link_admin_resolve(flags, name, sha256, &id, out);
	if (n == -ENOTUNIQ)
		return ERR_PTR(n);
	n = n ? 0 : engram_link_admin_replicas(&id, c, ARRAY_SIZE(c), NULL);
	if (!n) {
		/* Why not: that search knows the most useful reason. */
		l = engram_link_admin_open_table(0, flags, name, sha256, out, max_rows);
		if (IS_ERR(l))
			return ERR_CAST(l);
		engram_link_put(l);
		return ERR_PTR(-EAGAIN);	/* it came up meanwhile: try again */
	}
	rg = kzalloc(sizeof(*rg), GFP_KERNEL);
	if (!rg) {
		engram_replica_put_cands(c, n);
		return ERR_PTR(-ENOMEM);
	}
	spin_lock_init(&rg->lock);
	INIT_WORK(&rg->lt_work, engram_replica_lt_work);
	strscpy(rg->name, out->name, sizeof(rg->name));
	rg->id = id;
	rg->rows = out->rows;
	*max_rows = 0;
	for (i = 0; i < n; i++) {
		*max_rows = max(*max_rows, c[i].max_rows);
		engram_replica_lt(rg, &c[i], true);
	}
	*first_link = engram_link_id(c[0].link);
	engram_replica_put_cands(c, n);
	return rg;
}

/**
 * engram_replica_close() - the fd lets go of the table
 * @rg: the table; no fetch of it is left
 */
void engram_replica_close(struct engram_replica *rg)
{
	unsigned int i;

	if (!rg)
		return;
	cancel_work_sync(&rg->lt_work);
	for (i = 0; i < rg->nr; i++) {
		engram_link_table_put(rg->m[i].lt);
		engram_link_put(rg->m[i].link);
	}
	kfree(rg);
}

/**
 * engram_replica_first_lt() - the counters a fallback is reported to
 * @rg: the table
 *
 * Return: the table's counters on the first link that served it, or NULL.
 */
struct engram_link_table *engram_replica_first_lt(struct engram_replica *rg)
{
	struct engram_link_table *lt;
	unsigned long flags;

	spin_lock_irqsave(&rg->lock, flags);
	lt = rg->nr ? rg->m[0].lt : NULL;
	spin_unlock_irqrestore(&rg->lock, flags);
	return lt;
}

/* What of a part's attempt on a link is given back before another one. */
static void engram_replica_part_unbind(struct engram_fetch *p)
{
	unsigned int i;

	for (i = 0; i < p->nr_pieces; i++)
		engram_ubuf_put(p->pieces[i].buf);
	p->nr_pieces = 0;
	/* A part that moves on to TCP has no device to sync rows from. */
	p->ibdev = NULL;
	if (p->link)
		engram_link_put(p->link);
	p->link = NULL;
}

static void engram_replica_part_done(struct engram_fetch *p);

static void engram_replica_part_free(struct engram_fetch *p)
{
	engram_replica_part_unbind(p);
	if (p->bounce) {
		engram_link_bounce_put(p->bounce_link, p->bounce,
				       (u64)p->nr_rows * ENGRAM_ROW_BYTES);
		engram_link_put(p->bounce_link);
	}
	/* Kept for the fd's fetch's next use, as the fd keeps that fetch. */
	if (!cmpxchg(&p->parent->spare_part, NULL, p))
		return;
	kfree(p);
}

static struct engram_fetch *engram_replica_part_alloc(struct engram_fetch *f)
{
	struct engram_fetch *p = xchg(&f->spare_part, NULL);

	if (p) {
		memset(p, 0, sizeof(*p));
	} else {
		engram_cost_inc(ENGRAM_STAT_CLIENT_ALLOCS);
		p = kzalloc(sizeof(*p), GFP_KERNEL);
		if (!p)
			return NULL;
	}
	kref_init(&p->ref);		/* the fd's fetch's, until it is freed */
	/* Its caller reaps it where it busy-polls (engram_replica_reap_parts). */
	p->polled = f->polled;
	INIT_LIST_HEAD(&p->fd_node);
	INIT_LIST_HEAD(&p->done_node);
	INIT_LIST_HEAD(&p->retry_node);
	p->slot = -1;
	p->wq = f->wq;
	p->parent = f;
	p->part_done = engram_replica_part_done;
	p->stride = f->stride;
	memcpy(p->digest, f->digest, sizeof(p->digest));
	return p;
}

/* Its lowest and highest table row: the candidates that hold both may take it. */
static void engram_replica_part_span_rows(struct engram_fetch *p)
{
	u32 i;

	p->row_lo = U32_MAX;
	p->row_hi = 0;
	for (i = 0; i < p->nr_rows; i++) {
		p->row_lo = min(p->row_lo, p->rows[i]);
		p->row_hi = max(p->row_hi, p->rows[i]);
	}
}

/* A part for the fd's fetch's rows @first to @first + @n - 1, in their order. */
static struct engram_fetch *engram_replica_part_new(struct engram_fetch *f, u32 first, u32 n)
{
	struct engram_fetch *p = engram_replica_part_alloc(f);

	if (!p)
		return NULL;
	p->first = first;
	p->nr_rows = n;
	p->span = n;
	p->rows = f->rows + first;	/* the fd's fetch's array, not the part's */
	engram_replica_part_span_rows(p);
	return p;
}

/*
 * A part for @n rows of @rows, gathered from anywhere in the fd's fetch:
 * @places holds their positions there, ascending, and becomes their places
 * from the first one on (in rf->rows, which the part points into).
 */
static struct engram_fetch *engram_replica_part_placed(struct engram_fetch *f, u32 *rows,
						       u32 *places, u32 n)
{
	struct engram_fetch *p = engram_replica_part_alloc(f);
	u32 i;

	if (!p)
		return NULL;
	p->first = places[0];
	p->nr_rows = n;
	p->span = places[n - 1] - places[0] + 1;
	p->rows = rows;
	p->placed = places;
	for (i = 0; i < n; i++)
		places[i] -= p->first;
	engram_replica_part_span_rows(p);
	return p;
}

/* The same rows again, for another replica. */
static struct engram_fetch *engram_replica_part_again(struct engram_fetch *p)
{
	struct engram_fetch *q = engram_replica_part_alloc(p->parent);

	if (!q)
		return NULL;
	/*
	 * Sent by the work item, maybe while the caller sleeps: on an
	 * ordinary queue, whose completions need no poller.
	 */
	q->polled = false;
	q->first = p->first;
	q->nr_rows = p->nr_rows;
	q->span = p->span;
	q->rows = p->rows;
	q->placed = p->placed;
	q->row_lo = p->row_lo;
	q->row_hi = p->row_hi;
	return q;
}

/*
 * A gathered part for a host that writes with RDMA: its rows back to back
 * in a buffer of its own, cut for the limits of that link.  Its host's
 * keys then reach these rows and nothing else of the fd's destination.
 */
static noinline_for_stack int
engram_replica_part_bounce(struct engram_fetch *p, const struct engram_replica_cand *c)
{
	struct engram_pieces_piece pp[ENGRAM_WIRE_MAX_RANGES];
	struct engram_pieces_dest pd = { .len = (u64)p->nr_rows * ENGRAM_ROW_BYTES };
	struct engram_replica_fetch *rf = p->parent->rf;
	unsigned long flags;
	unsigned int i;
	u32 n;
	int ret;

	if (WARN_ON_ONCE(p->nr_rows > ENGRAM_BOUNCE_ROWS))
		return -E2BIG;
	if (!p->bounce) {
		ret = engram_link_bounce_get(c->link, &p->bounce);
		if (ret)
			return ret;
		engram_link_get(c->link);
		p->bounce_link = c->link;
		spin_lock_irqsave(&rf->lock, flags);
		rf->bounced = true;
		spin_unlock_irqrestore(&rf->lock, flags);
	}
	ret = engram_pieces_cut(p->nr_rows, ENGRAM_ROW_BYTES, ENGRAM_ROW_BYTES, &pd, 1,
				(u64)c->mr_pages * PAGE_SIZE, PAGE_SIZE, false, pp,
				min_t(u32, c->max_ranges, ARRAY_SIZE(pp)), &n);
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		engram_ubuf_get(p->bounce);
		p->pieces[i].buf = p->bounce;
		p->pieces[i].off = pp[i].off;
		p->pieces[i].len = pp[i].len;
	}
	p->nr_pieces = n;
	p->places = NULL;
	p->stride = ENGRAM_ROW_BYTES;
	return 0;
}

/*
 * Cut the part's share of the destination (the places of the fd's fetch
 * from @p->first on, @p->span of them, in the ranges the fd's fetch holds
 * as its pieces) for the limits of one link.
 */
static noinline_for_stack int
engram_replica_part_cut(struct engram_fetch *p, const struct engram_replica_cand *c)
{
	struct engram_pieces_dest pd[ENGRAM_WIRE_MAX_RANGES];
	struct engram_pieces_piece pp[ENGRAM_WIRE_MAX_RANGES];
	const struct engram_fetch *f = p->parent;
	u64 skip = (u64)p->first * f->stride;
	unsigned int i, nd = 0;
	bool keep = true;
	u32 n;
	int ret;

	if (p->placed && c->remote_write)
		return engram_replica_part_bounce(p, c);
	p->places = p->placed;
	p->stride = f->stride;
	for (i = 0; i < f->nr_pieces; i++) {
		const struct engram_piece *d = &f->pieces[i];

		if (skip >= d->len) {
			skip -= d->len;
			continue;
		}
		pd[nd].addr = d->buf->addr;
		pd[nd].off = d->off + skip;
		pd[nd].len = d->len - skip;
		keep &= d->buf->keep;
		skip = 0;
		nd++;
	}
	if (!nd)
		return -ENOSPC;
	/* Kept keys' fixed windows, or, if they need too many pieces, per-fetch keys. */
	ret = engram_pieces_cut(p->span, p->stride, ENGRAM_ROW_BYTES, pd, nd,
				(u64)c->mr_pages * PAGE_SIZE, PAGE_SIZE, keep, pp,
				min_t(u32, c->max_ranges, ARRAY_SIZE(pp)), &n);
	if (ret == -E2BIG && keep)
		ret = engram_pieces_cut(p->span, p->stride, ENGRAM_ROW_BYTES, pd, nd,
					(u64)c->mr_pages * PAGE_SIZE, PAGE_SIZE, false, pp,
					min_t(u32, c->max_ranges, ARRAY_SIZE(pp)), &n);
	if (ret)
		return ret;
	/* pd[] skipped the ranges before the part's: map back to the parent's. */
	for (i = 0; i < n; i++) {
		const struct engram_piece *d = &f->pieces[f->nr_pieces - nd + pp[i].dest];

		engram_ubuf_get(d->buf);
		p->pieces[i].buf = d->buf;
		p->pieces[i].off = pp[i].off;
		p->pieces[i].len = pp[i].len;
	}
	p->nr_pieces = n;
	return 0;
}

/*
 * The most rows a part may have on @c: fewer with row places, which take
 * room, or with a bounce buffer, which takes memory.
 */
static u32 engram_replica_cand_rows(const struct engram_replica_cand *c, bool places)
{
	u64 fixed;

	if (!places)
		return c->max_rows;
	if (c->remote_write)
		return min_t(u32, c->max_rows, ENGRAM_BOUNCE_ROWS);
	if (!c->places)
		return 0;
	fixed = engram_wire_request_size(0, c->max_ranges);
	if (c->max_request_bytes <= fixed)
		return 0;
	return min_t(u64, c->max_rows,
		     (c->max_request_bytes - fixed) / ENGRAM_REPLICA_PLACED_ROW_BYTES);
}

/* May @c take the part: does it hold every row of it, and take that many? */
static bool engram_replica_cand_fits(const struct engram_replica_cand *c,
				     const struct engram_fetch *p)
{
	return c->held_first <= p->row_lo && p->row_hi - c->held_first < c->held_rows &&
	       engram_replica_cand_rows(c, p->placed) >= p->nr_rows;
}

/*
 * Is @c[@i] a TCP link to a host that an RDMA candidate not tried yet
 * reaches, and takes the part?  Then that one goes first, and this one
 * is kept for a failover (or for when it is full).
 */
static bool engram_replica_defer(const struct engram_replica_cand *c, unsigned int n,
				 unsigned int i, const bool *used, const struct engram_fetch *p)
{
	unsigned int k;

	if (c[i].remote_write || !engram_params_replica_prefer_rdma())
		return false;
	for (k = 0; k < n; k++)
		if (!used[k] && c[k].remote_write && engram_replica_cand_fits(&c[k], p) &&
		    engram_url_same_host(c[k].url, c[i].url))
			return true;
	return false;
}

/* Has a part of these rows been on the table @c names already? */
static bool engram_replica_tried(struct engram_replica_fetch *rf, struct engram_fetch *p,
				 const struct engram_replica_cand *c)
{
	struct engram_fetch *q;
	unsigned long flags;
	bool tried = false;

	spin_lock_irqsave(&rf->lock, flags);
	list_for_each_entry(q, &rf->parts, part_node)
		if (q != p && q->first == p->first && q->link == c->link &&
		    q->generation == c->generation)
			tried = true;
	spin_unlock_irqrestore(&rf->lock, flags);
	return tried;
}

/*
 * Put a part on the wire of the best of the @n replicas in @c, fewest
 * fetches first, skipping those its rows were tried on already.  A part
 * that lands on one replica after failing on another (@moved: its rows
 * failed on a replica before) is a failover there.
 */
static noinline_for_stack int
engram_replica_part_send(struct engram_replica_fetch *rf, struct engram_fetch *p,
			 struct engram_replica_cand *c, unsigned int n, bool moved)
{
	bool used[ENGRAM_REPLICA_MAX] = {};
	int ret = -ENOTCONN;
	bool bounced;
	unsigned int k;

	for (k = 0; k < n; k++)
		used[k] = engram_replica_tried(rf, p, &c[k]);
	for (;;) {
		unsigned int i, j, best = n, left = 0;
		/* Ties go round: else the first link listed takes every lone fetch. */
		unsigned int start = atomic_inc_return(&rf->rg->turn) % n;
		ktime_t now = ktime_get();
		s64 rest;

		for (j = 0; j < n; j++) {
			i = (start + j) % n;
			if (used[i] || !engram_replica_cand_fits(&c[i], p))
				continue;
			left++;
			if (engram_replica_defer(c, n, i, used, p))
				continue;
			if (best == n || c[i].inflight < c[best].inflight)
				best = i;
		}
		if (best == n)
			return ret;
		used[best] = true;
		rest = ktime_to_ns(ktime_sub(p->parent->deadline, now));
		if (rest <= 0)
			return -ETIMEDOUT;
		/* Leave half to a replica that could take over. */
		p->deadline = ktime_add_ns(now, left > 1 ? rest / 2 : rest);
		ret = engram_replica_part_cut(p, &c[best]);
		bounced = !ret && p->placed && !p->places;
		if (ret == -E2BIG || (ret == -ENOMEM && p->placed && c[best].remote_write))
			continue;	/* this replica's limits, or a bounce buffer's */
		if (ret)
			return ret;	/* the destination, not the replica */
		engram_link_get(c[best].link);
		p->link = c[best].link;
		p->generation = c[best].generation;
		p->lt = engram_replica_lt(rf->rg, &c[best], false);
		p->error = 0;
		p->wire_status = ENGRAM_WIRE_OK;
		ret = engram_link_submit(p->link, p);
		if (!ret) {
			/* Its link's other shards share that wire. */
			for (i = 0; i < n; i++)
				if (c[i].link == c[best].link)
					c[i].inflight++;
			if (moved) {
				engram_link_count(p->link, ENGRAM_STAT_FAILOVERS, 1);
				engram_count(&engram_global_stats, ENGRAM_STAT_FAILOVERS);
				engram_link_table_count(p->lt, ENGRAM_STAT_FAILOVERS);
			}
			return 0;
		}
		engram_link_table_submit_failed(p->lt, ret);
		engram_replica_part_unbind(p);
		/* Down or broken: a failover.  Full, or limits renegotiated: not. */
		if (ret == -ENOTCONN || ret == -EIO)
			moved = true;
		else if (ret != -EBUSY && ret != -E2BIG && !(ret == -ENOMEM && bounced))
			return ret;
	}
}

/* Would another replica answer where this one did not? */
static bool engram_replica_retryable(const struct engram_fetch *p)
{
	switch (p->wire_status) {
	case ENGRAM_WIRE_OK:		/* no answer: the connection or the deadline */
	case ENGRAM_WIRE_UNKNOWN_TABLE:
	case ENGRAM_WIRE_TABLE_NOT_READY:
	case ENGRAM_WIRE_BUSY:
	case ENGRAM_WIRE_SHUTTING_DOWN:
	case ENGRAM_WIRE_INTERNAL:
	case ENGRAM_WIRE_ROW_NOT_HELD:	/* its catalog promised them: another may not lie */
		return true;
	default:
		return false;
	}
}

/*
 * Give the rows of every part that succeeded to the CPU, once: those of a
 * fetch with bounced rows that succeeded were synced before their copies.
 */
static void engram_replica_sync_parts(struct engram_replica_fetch *rf)
{
	struct engram_fetch *f = rf->f, *p;

	if (f->rows_synced)
		return;
	f->rows_synced = true;
	if (rf->bounced && !rf->error)
		return;
	list_for_each_entry(p, &rf->parts, part_node)
		if (p->link && !p->error)
			engram_link_fetch_sync_rows(p);
}

/* The fd's fetch has ended: hand it back, as a link does its own fetches. */
static void engram_replica_publish(struct engram_replica_fetch *rf)
{
	struct engram_fetch *f = rf->f;
	wait_queue_head_t *wq = f->wq;
	unsigned long flags;

	f->error = rf->error;
	f->wire_status = rf->wire_status;
	f->bad_index = rf->bad_index;
	f->rtt_ns = ktime_to_ns(ktime_sub(ktime_get(), f->start));
	if (f->done_buf) {
		/* Every part has ended: the word follows the last one's rows. */
		engram_replica_sync_parts(rf);
		engram_fetch_signal(f, f->error);
	}
	spin_lock_irqsave(&wq->lock, flags);
	engram_fetch_set_done(f);
	wake_up_locked(wq);
	spin_unlock_irqrestore(&wq->lock, flags);
}

/*
 * Copy the rows of a part that succeeded from its bounce buffer to their
 * places in the fd's destination: each row whole in one piece there, at
 * its place * stride of their concatenation, places ascending.
 */
static void engram_replica_unbounce(struct engram_fetch *p)
{
	const struct engram_fetch *f = p->parent;
	struct engram_pieces_cursor cur = {};
	u64 len[ENGRAM_WIRE_MAX_RANGES], off;
	unsigned int j;
	u32 i;

	for (j = 0; j < f->nr_pieces; j++)
		len[j] = f->pieces[j].len;
	for (i = 0; i < p->nr_rows; i++) {
		u64 pos = (u64)(p->first + p->placed[i]) * f->stride;

		if (WARN_ON_ONCE(engram_pieces_locate(len, f->nr_pieces, pos, ENGRAM_ROW_BYTES,
						      &cur, &off)))
			return;
		engram_ubuf_copy(f->pieces[cur.piece].buf, f->pieces[cur.piece].off + off,
				 p->bounce, (u64)i * ENGRAM_ROW_BYTES, ENGRAM_ROW_BYTES);
		cond_resched();
	}
}

/*
 * Every part has ended, nothing is on a wire: give the rows of each to
 * the CPU, copy those that landed in bounce buffers to their places, then
 * end the fetch.  Every sync comes before any copy: a sync of a row that
 * shares a cache line with a copied one would write the line back, or
 * drop it, over the copy (DMA that is not cache-coherent).  Process
 * context.
 */
static void engram_replica_finish(struct engram_replica_fetch *rf)
{
	struct engram_fetch *p;

	if (rf->bounced && !rf->error) {
		list_for_each_entry(p, &rf->parts, part_node)
			if (p->link && !p->error)
				engram_link_fetch_sync_rows(p);
		list_for_each_entry(p, &rf->parts, part_node)
			if (p->link && !p->error && p->bounce && p->nr_pieces &&
			    p->pieces[0].buf == p->bounce)
				engram_replica_unbounce(p);
	}
	engram_replica_publish(rf);
}

/*
 * Every part has ended; any context.  A fetch with bounced rows ends from
 * the work item, after the copies: no waiter may see it done before.
 */
static void engram_replica_end(struct engram_replica_fetch *rf)
{
	unsigned long flags;
	bool later;

	spin_lock_irqsave(&rf->lock, flags);
	later = rf->bounced;
	if (later) {
		rf->finishing = true;
		if (queue_work(system_unbound_wq, &rf->work))
			engram_cost_inc(ENGRAM_STAT_CLIENT_WORK_ITEMS);
	}
	spin_unlock_irqrestore(&rf->lock, flags);
	if (!later)
		engram_replica_publish(rf);
}

/* A part's rows are settled, by @p or by @error; rf->lock held. */
static bool engram_replica_settle_locked(struct engram_replica_fetch *rf,
					 struct engram_fetch *p, int error)
{
	bool late;

	lockdep_assert_held(&rf->lock);
	if (error && !rf->error) {
		/* Rows no replica could give in time are late, whatever broke. */
		late = rf->expired || !ktime_before(ktime_get(), rf->f->deadline);
		rf->error = late && engram_replica_retryable(p) ? -ETIMEDOUT : error;
		rf->wire_status = p->wire_status;
		rf->bad_index = 0;
		if ((p->wire_status == ENGRAM_WIRE_ROW_OUT_OF_RANGE ||
		     p->wire_status == ENGRAM_WIRE_ROW_NOT_HELD) && p->bad_index < p->nr_rows)
			rf->bad_index = p->first +
					(p->placed ? p->placed[p->bad_index] : p->bad_index);
	}
	return !--rf->pending;
}

/* A part ended on its link; any context. */
static void engram_replica_part_done(struct engram_fetch *p)
{
	struct engram_replica_fetch *rf = p->parent->rf;
	unsigned long flags;
	bool last = false;

	spin_lock_irqsave(&rf->lock, flags);
	if (p->error && !rf->expired && engram_replica_retryable(p) &&
	    ktime_before(ktime_get(), rf->f->deadline)) {
		list_add_tail(&p->retry_node, &rf->retry);
		/*
		 * Queued under the lock: once unlocked, a running work item
		 * may settle these rows, end the fetch and let it be freed.
		 */
		if (queue_work(system_unbound_wq, &rf->work))
			engram_cost_inc(ENGRAM_STAT_CLIENT_WORK_ITEMS);
	} else {
		last = engram_replica_settle_locked(rf, p, p->error);
	}
	spin_unlock_irqrestore(&rf->lock, flags);
	if (last)
		engram_replica_end(rf);
}

/*
 * Send the rows of failed parts again, each as a new part on a replica
 * they were not on.  Once its last part is on a wire this touches nothing
 * of the fetch any more: it may end, and be freed, at once.  Or, once
 * every part has ended, end a fetch with bounced rows.
 */
static void engram_replica_work(struct work_struct *work)
{
	struct engram_replica_fetch *rf = container_of(work, struct engram_replica_fetch, work);
	struct engram_replica_cand c[ENGRAM_REPLICA_MAX];
	struct engram_fetch *p, *q, *tmp;
	unsigned long flags;
	LIST_HEAD(todo);
	bool finishing;
	int n;

	spin_lock_irqsave(&rf->lock, flags);
	finishing = rf->finishing;
	list_splice_init(&rf->retry, &todo);
	spin_unlock_irqrestore(&rf->lock, flags);
	if (finishing) {
		engram_replica_finish(rf);
		return;
	}
	if (list_empty(&todo))
		return;
	n = engram_link_admin_replicas(&rf->rg->id, c, ARRAY_SIZE(c), NULL);
	list_for_each_entry_safe(p, tmp, &todo, retry_node) {
		bool last;

		list_del_init(&p->retry_node);
		q = NULL;
		if (n > 0 && !READ_ONCE(rf->expired))
			q = engram_replica_part_again(p);
		if (q) {
			spin_lock_irqsave(&rf->lock, flags);
			list_add_tail(&q->part_node, &rf->parts);
			spin_unlock_irqrestore(&rf->lock, flags);
			/* The rows count as tried where the failed part was. */
			if (!engram_replica_part_send(rf, q, c, n, true))
				continue;
		}
		/* No replica takes them: the failed part's result stands. */
		spin_lock_irqsave(&rf->lock, flags);
		last = engram_replica_settle_locked(rf, p, p->error);
		spin_unlock_irqrestore(&rf->lock, flags);
		if (last) {
			engram_replica_put_cands(c, n);
			engram_replica_finish(rf);
			return;
		}
	}
	engram_replica_put_cands(c, n);
}

/*
 * The fd's fetch is past its deadline, or its fd closes: send nothing
 * again, and end every part still on a wire by breaking its connection.
 * Returns once the fetch has ended.
 */
static void engram_replica_expire(struct engram_fetch *f)
{
	struct engram_replica_fetch *rf = f->rf;
	struct engram_fetch *p;
	unsigned long flags;

	spin_lock_irqsave(&rf->lock, flags);
	rf->expired = true;
	spin_unlock_irqrestore(&rf->lock, flags);
	/* Whatever it is sending goes out; nothing is queued for it any more. */
	flush_work(&rf->work);
	/* No part is added now: the list stays as it is. */
	list_for_each_entry(p, &rf->parts, part_node)
		if (p->link && !engram_fetch_done(p))
			engram_link_break_fetch(p);
	/* Parts ended by the breaks settle at once: nothing is sent again. */
	wait_event(*f->wq, engram_fetch_done(f));
}

/*
 * Is @c[@i] a TCP link to a host that an RDMA candidate of @mask reaches,
 * with replica_prefer_rdma on?  It takes a part only when that one
 * cannot: splitting a fetch for it would send both parts to one host.
 */
static bool engram_replica_shadowed(const struct engram_replica_cand *c, unsigned int n,
				    unsigned int i, u32 mask)
{
	unsigned int k;

	if (c[i].remote_write || !engram_params_replica_prefer_rdma())
		return false;
	for (k = 0; k < n; k++)
		if ((mask & BIT(k)) && c[k].remote_write &&
		    engram_url_same_host(c[k].url, c[i].url))
			return true;
	return false;
}

/*
 * Into how many parts @rows rows for the candidates of @mask are cut: one
 * per replica (a host reached over RDMA and TCP is one) when the fetch
 * is large enough to split, and small enough for every one of them, so
 * that any may take a part over; when that takes too many parts, small
 * enough for the largest (what the open promised), and only those that
 * take it are tried.  With @fewest, as few as the largest takes, not
 * split: a fetch's ranges together may not have more parts than
 * ENGRAM_REPLICA_MAX_PARTS.  0: none takes rows this way.
 */
static u32 engram_replica_nr_parts(u32 rows, const struct engram_replica_cand *c,
				   unsigned int n, u32 mask, bool places, bool fewest)
{
	u32 lo = U32_MAX, hi = 0, k = 1, split, m = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		u32 r = engram_replica_cand_rows(&c[i], places);

		if (!(mask & BIT(i)) || !r)
			continue;
		lo = min(lo, r);
		hi = max(hi, r);
		m += !engram_replica_shadowed(c, n, i, mask);
	}
	if (!m)
		return 0;
	if (fewest)
		return DIV_ROUND_UP(rows, hi);
	split = engram_params_replica_split_rows();
	if (split && m > 1)
		k = clamp_t(u32, rows / split, 1, min_t(u32, m, ENGRAM_REPLICA_MAX_PARTS));
	if (DIV_ROUND_UP(rows, lo) <= ENGRAM_REPLICA_MAX_PARTS)
		return max_t(u32, k, DIV_ROUND_UP(rows, lo));
	return max_t(u32, k, DIV_ROUND_UP(rows, hi));
}

/*
 * Rows that fall in two or more ranges go as parts with row places: each
 * range's rows, in the fetch's order, cut into parts of its own.
 */
static noinline_for_stack int
engram_replica_parts_placed(struct engram_replica_fetch *rf,
			    const struct engram_replica_cand *c, unsigned int n, unsigned int nr,
			    struct engram_fetch **part, u32 *nparts)
{
	struct engram_fetch *f = rf->f;
	u32 k[ENGRAM_ROWMAP_MAX_RANGES], at[ENGRAM_ROWMAP_MAX_RANGES];
	u32 i, j, t, total = 0, base = 0;
	unsigned int fewest;
	u32 *places;

	/* Parts as small as every candidate takes; else as the largest does. */
	for (fewest = 0; fewest < 2; fewest++) {
		for (total = 0, j = 0; j < nr; j++) {
			k[j] = 0;
			if (!rf->cnt[j])
				continue;
			k[j] = engram_replica_nr_parts(rf->cnt[j], c, n, rf->map.mask[j], true,
						       fewest);
			if (!k[j] || k[j] > rf->cnt[j])
				return -E2BIG;
			total += k[j];
		}
		if (total <= ENGRAM_REPLICA_MAX_PARTS)
			break;
	}
	if (total > ENGRAM_REPLICA_MAX_PARTS)
		return -E2BIG;
	engram_cost_inc(ENGRAM_STAT_CLIENT_ALLOCS);
	rf->rows = kvmalloc_array(f->nr_rows, 2 * sizeof(u32), GFP_KERNEL);
	if (!rf->rows)
		return -ENOMEM;
	places = rf->rows + f->nr_rows;
	for (j = 0; j < nr; j++) {
		at[j] = base;
		base += rf->cnt[j];
	}
	for (i = 0; i < f->nr_rows; i++) {
		j = engram_rowmap_find(&rf->map, f->rows[i]);
		rf->rows[at[j]] = f->rows[i];
		places[at[j]++] = i;
	}
	base = 0;
	*nparts = 0;
	for (j = 0; j < nr; j++) {
		for (t = 0; t < k[j]; t++) {
			u32 s = (u64)rf->cnt[j] * t / k[j], e = (u64)rf->cnt[j] * (t + 1) / k[j];
			struct engram_fetch *p;

			p = engram_replica_part_placed(f, rf->rows + base + s, places + base + s,
						       e - s);
			if (!p)
				return -ENOMEM;
			list_add_tail(&p->part_node, &rf->parts);
			part[(*nparts)++] = p;
		}
		base += rf->cnt[j];
	}
	return 0;
}

/* Rows all in one range go as today's parts: runs of the fetch's rows. */
static int engram_replica_parts_runs(struct engram_replica_fetch *rf,
				     const struct engram_replica_cand *c, unsigned int n,
				     u32 mask, struct engram_fetch **part, u32 *nparts)
{
	struct engram_fetch *f = rf->f;
	u32 i, k = engram_replica_nr_parts(f->nr_rows, c, n, mask, false, false);

	if (!k || k > ENGRAM_REPLICA_MAX_PARTS || k > f->nr_rows)
		return -E2BIG;
	for (i = 0; i < k; i++) {
		u32 first = (u64)f->nr_rows * i / k, next = (u64)f->nr_rows * (i + 1) / k;
		struct engram_fetch *p = engram_replica_part_new(f, first, next - first);

		if (!p)
			return -ENOMEM;
		list_add_tail(&p->part_node, &rf->parts);
		part[i] = p;
	}
	*nparts = k;
	return 0;
}

/* Keep @rf, nothing in it any more, for @f's next use, or free it. */
static void engram_replica_rf_free(struct engram_fetch *f, struct engram_replica_fetch *rf)
{
	if (!cmpxchg(&f->spare_rf, NULL, rf))
		return;
	kfree(rf);
}

/*
 * The fd's fetch's waiter reaps its parts that are on poll queues: those
 * the caller sent itself when it busy-polls (a retry, which the work item
 * sends, is on an ordinary queue).  Parts stay on rf->parts until the
 * fetch is freed, by its waiter, so those seen under rf->lock are still
 * there after it; they are reaped outside it, as their completions take
 * it.
 */
static void engram_replica_reap_parts(struct engram_fetch *f, bool now)
{
	struct engram_fetch *polled[ENGRAM_REPLICA_MAX_PARTS], *p;
	struct engram_replica_fetch *rf = f->rf;
	unsigned int i, n = 0;
	unsigned long flags;

	spin_lock_irqsave(&rf->lock, flags);
	list_for_each_entry(p, &rf->parts, part_node) {
		if (!p->poll_q)
			continue;
		/* Only the caller's own parts, at most ENGRAM_REPLICA_MAX_PARTS. */
		if (WARN_ON_ONCE(n == ARRAY_SIZE(polled)))
			break;
		polled[n++] = p;
	}
	spin_unlock_irqrestore(&rf->lock, flags);
	for (i = 0; i < n; i++)
		engram_link_reap(polled[i], now);
}

/**
 * engram_replica_submit() - send a fetch of a table opened on no link
 * @rg: the table
 * @f: the fd's fetch: rows, stride and deadline set, its pieces the
 *	caller's destination ranges (each holding its buffer), no link
 *
 * Each row goes to a candidate that holds it: a host may hold only a
 * range of the table's rows (a shard).  Rows that all fall in one range
 * of the candidates' go as runs of the fetch's rows, as to any host; rows
 * spread over several go as parts with row places (version 3), one or
 * more per range.  A row that no candidate holds ends the fetch before
 * anything is sent: -ENXIO with ENGRAM_WIRE_ROW_NOT_HELD and its position
 * (-ERANGE with ROW_OUT_OF_RANGE when it is not in the table at all).
 *
 * Process context.
 *
 * Return: 0 once a part is on a wire, or the fetch has ended (the fetch
 * then ends when every part has); otherwise nothing is: -ENOTCONN when no
 * link is up, -ESTALE when links are but none serves the table (its name
 * reloaded with another table, or unloaded everywhere), -EAGAIN when only
 * hosts that drain it do, -E2BIG for more
 * rows than the replicas take, -ENOMEM, or what the destination's cutting
 * found wrong.
 */
int engram_replica_submit(struct engram_replica *rg, struct engram_fetch *f)
{
	struct engram_rowmap_held held[ENGRAM_REPLICA_MAX];
	struct engram_fetch *part[ENGRAM_REPLICA_MAX_PARTS];
	struct engram_replica_cand c[ENGRAM_REPLICA_MAX];
	struct engram_replica_fetch *rf;
	unsigned int i, j, nr, used = 0, sent = 0, failed = 0;
	struct engram_fetch *p, *tmp;
	u32 k = 0, in = U32_MAX;
	unsigned long flags;
	int n, none, ret = 0, err = 0;
	bool last;

	n = engram_link_admin_replicas(&rg->id, c, ARRAY_SIZE(c), &none);
	if (!n)
		return none;
	rf = xchg(&f->spare_rf, NULL);
	if (rf) {
		memset(rf, 0, sizeof(*rf));
	} else {
		engram_cost_inc(ENGRAM_STAT_CLIENT_ALLOCS);
		rf = kzalloc(sizeof(*rf), GFP_KERNEL);
		if (!rf) {
			engram_replica_put_cands(c, n);
			return -ENOMEM;
		}
	}
	spin_lock_init(&rf->lock);
	INIT_LIST_HEAD(&rf->parts);
	INIT_LIST_HEAD(&rf->retry);
	INIT_WORK(&rf->work, engram_replica_work);
	rf->rg = rg;
	rf->f = f;
	memcpy(f->digest, rg->id.sha256, sizeof(f->digest));
	f->start = ktime_get();

	for (i = 0; i < n; i++) {
		held[i].first = c[i].held_first;
		held[i].rows = c[i].held_rows;
	}
	/* The catalogs' checks make every range valid: it cannot fail. */
	WARN_ON_ONCE(engram_rowmap_build(&rf->map, held, n));
	nr = rf->map.nr;
	for (i = 0; i < f->nr_rows; i++) {
		j = engram_rowmap_find(&rf->map, f->rows[i]);
		if (j == nr) {
			/*
			 * Not in the table, or no host holds it: nothing is
			 * sent, the fetch ends here as a host would end it.
			 */
			rf->wire_status = f->rows[i] >= rg->rows ? ENGRAM_WIRE_ROW_OUT_OF_RANGE :
				ENGRAM_WIRE_ROW_NOT_HELD;
			rf->error = engram_link_status_errno(rf->wire_status);
			rf->bad_index = i;
			f->rf = rf;
			f->expire = engram_replica_expire;
			engram_replica_put_cands(c, n);
			engram_replica_publish(rf);
			return 0;
		}
		if (!rf->cnt[j]++) {
			used++;
			in = j;
		}
	}
	ret = -E2BIG;
	if (used > 1)
		ret = engram_replica_parts_placed(rf, c, n, nr, part, &k);
	if (ret == -E2BIG) {
		/*
		 * One range, or no way to place rows where the ranges need
		 * it (hosts below version 3): the hosts that hold every row
		 * of the fetch, if any, take it as runs.
		 */
		u32 mask = used > 1 ? U32_MAX : rf->map.mask[in];

		for (j = 0; used > 1 && j < nr; j++)
			if (rf->cnt[j])
				mask &= rf->map.mask[j];
		list_for_each_entry_safe(p, tmp, &rf->parts, part_node) {
			list_del(&p->part_node);
			engram_replica_part_free(p);
		}
		kvfree(rf->rows);
		rf->rows = NULL;
		ret = engram_replica_parts_runs(rf, c, n, mask, part, &k);
	}
	if (ret)
		goto out;
	f->rf = rf;
	f->expire = engram_replica_expire;
	f->reap = engram_replica_reap_parts;
	rf->pending = k;
	/*
	 * Not rf->parts: once one part is on a wire, its failure may add a
	 * part there (the work item) while this goes on.
	 */
	for (i = 0; i < k; i++) {
		p = part[i];
		ret = engram_replica_part_send(rf, p, c, n, false);
		if (ret) {
			failed++;
			err = err ? err : ret;
			continue;
		}
		sent++;
		if (k > 1) {
			engram_link_count(p->link, ENGRAM_STAT_SPLITS, 1);
			engram_count(&engram_global_stats, ENGRAM_STAT_SPLITS);
			engram_link_table_count(p->lt, ENGRAM_STAT_SPLITS);
		}
	}
	if (!sent) {
		f->rf = NULL;
		f->expire = NULL;
		f->reap = NULL;
		ret = err;
		goto out;
	}
	ret = 0;
	if (failed) {
		/* Those rows found no replica: the fetch fails once the rest ends. */
		spin_lock_irqsave(&rf->lock, flags);
		rf->pending -= failed;
		if (!rf->error)
			rf->error = err;
		last = !rf->pending;
		spin_unlock_irqrestore(&rf->lock, flags);
		if (last)
			engram_replica_finish(rf);
	}
	engram_replica_put_cands(c, n);
	return 0;

out:
	engram_replica_put_cands(c, n);
	list_for_each_entry_safe(p, tmp, &rf->parts, part_node)
		engram_replica_part_free(p);
	kvfree(rf->rows);
	engram_replica_rf_free(f, rf);
	return ret;
}

/**
 * engram_replica_reap() - count an ended fetch's parts and sync its rows
 * @f: the fd's fetch, done
 *
 * Each part counts with the table on its own link (a fetch refused before
 * any part was sent, with the first link's, as a fallback is); the rows
 * of each part that succeeded are synced for the CPU from its link's
 * device, unless the fetch did that before it ended (bounced rows).
 * Process context.
 */
void engram_replica_reap(struct engram_fetch *f)
{
	struct engram_fetch *p;

	if (list_empty(&f->rf->parts)) {
		/* Refused before anything was sent: a row no host holds. */
		engram_link_table_fetched(engram_replica_first_lt(f->rf->rg), f->error,
					  f->wire_status, f->nr_rows, 0);
		return;
	}

	list_for_each_entry(p, &f->rf->parts, part_node) {
		if (!p->link)
			continue;	/* never sent */
		engram_link_table_fetched(p->lt, p->error, p->wire_status, p->nr_rows, p->rtt_ns);
	}
	engram_replica_sync_parts(f->rf);
}

/**
 * engram_replica_fetch_free() - free the parts of an ended fetch
 * @f: the fd's fetch, done, being freed
 *
 * Process context.
 */
void engram_replica_fetch_free(struct engram_fetch *f)
{
	struct engram_replica_fetch *rf = f->rf;
	struct engram_fetch *p, *tmp;

	if (!rf)
		return;
	cancel_work_sync(&rf->work);
	list_for_each_entry_safe(p, tmp, &rf->parts, part_node)
		engram_replica_part_free(p);
	kvfree(rf->rows);
	f->rf = NULL;
	engram_replica_rf_free(f, rf);
}

/**
 * engram_replica_spares_free() - free what a fd's fetch kept for its next use
 * @f: the fd's fetch, being freed for good
 *
 * Process context.
 */
void engram_replica_spares_free(struct engram_fetch *f)
{
	kfree(f->spare_rf);
	f->spare_rf = NULL;
	kfree(f->spare_part);
	f->spare_part = NULL;
}
