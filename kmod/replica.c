// SPDX-License-Identifier: GPL-2.0
/*
 * Replicas: a table opened on no link is served by every link that is up
 * and whose catalog holds the table's SHA-256 ready.  Two hosts that serve
 * the same SHA-256 serve byte-identical rows, so any of them may answer
 * any row, and a GPU node keeps fetching while one host is away.
 *
 * A fetch of such a table (the fd's fetch, which has no link) is sent as
 * one or more parts, each an ordinary fetch on one link for a run of its
 * rows, placed where those rows go in the fd's destination:
 *
 * - spreading: each part goes to the replica with the fewest fetches on
 *   its wire;
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

#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "link_table.h"
#include "pieces.h"
#include "replica.h"

/* Links a table's replicas may be: every link there may be (ENGRAM_URL_MAX). */
#define ENGRAM_REPLICA_MAX		16
/* Parts one fetch is cut into at most. */
#define ENGRAM_REPLICA_MAX_PARTS	8

/* A link that served the table, with the table's counters there. */
struct engram_replica_member {
	struct engram_link *link;	/* held */
	struct engram_link_table *lt;	/* held, or NULL */
};

/**
 * struct engram_replica - a table opened on no link
 * @name: its name in the catalogs, as first found
 * @sha256: what identifies it on every link
 * @lock: guards @m and @nr
 * @m: the links that served it so far, for the per-table counters
 * @nr: entries in @m
 */
struct engram_replica {
	char name[ENGRAM_NAME_MAX];
	u8 sha256[ENGRAM_SHA256_LEN];
	struct mutex lock;		/* @m and @nr */
	struct engram_replica_member m[ENGRAM_REPLICA_MAX];
	unsigned int nr;
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
 * @bad_index: its ROW_OUT_OF_RANGE position, in the fd's fetch
 * @work: sends the parts on @retry again
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
	struct work_struct work;
};

static void engram_replica_put_cands(struct engram_replica_cand *c, unsigned int n)
{
	while (n)
		engram_link_put(c[--n].link);
}

/* The table's counters on @l: found, or made once per link (a sleeping lock). */
static struct engram_link_table *engram_replica_lt(struct engram_replica *rg,
						   struct engram_link *l)
{
	struct engram_link_table *lt = NULL;
	unsigned int i;

	mutex_lock(&rg->lock);
	for (i = 0; i < rg->nr; i++) {
		if (rg->m[i].link == l) {
			lt = rg->m[i].lt;
			goto out;
		}
	}
	if (rg->nr < ARRAY_SIZE(rg->m)) {
		engram_link_get(l);
		rg->m[rg->nr].link = l;
		lt = engram_link_table_get(l, rg->name, rg->sha256);
		rg->m[rg->nr++].lt = lt;
	}
out:
	mutex_unlock(&rg->lock);
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
 * By name alone, every link that has a table of that name must agree on
 * its SHA-256; from then on the table is the SHA-256, whatever names other
 * hosts give it.
 *
 * Return: the table, or ERR_PTR: -ENOTUNIQ (two files under the name),
 * -ENOTCONN (no link is up), -ENOENT (no link has it), -EAGAIN (it is not
 * ready anywhere), -ENOMEM.
 */
struct engram_replica *engram_replica_open(u32 flags, const char *name, const u8 *sha256,
					   struct engram_wire_table *out, u32 *max_rows,
					   u32 *first_link)
{
	struct engram_replica_cand c[ENGRAM_REPLICA_MAX];
	struct engram_replica *rg;
	struct engram_link *l;
	unsigned int i;
	int n;

	n = engram_link_admin_replicas(flags, name, sha256, c, out, ARRAY_SIZE(c));
	if (n < 0)
		return ERR_PTR(n);
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
	mutex_init(&rg->lock);
	strscpy(rg->name, out->name, sizeof(rg->name));
	memcpy(rg->sha256, out->sha256, sizeof(rg->sha256));
	*max_rows = 0;
	for (i = 0; i < n; i++) {
		*max_rows = max(*max_rows, c[i].max_rows);
		engram_replica_lt(rg, c[i].link);
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
	for (i = 0; i < rg->nr; i++) {
		engram_link_table_put(rg->m[i].lt);
		engram_link_put(rg->m[i].link);
	}
	mutex_destroy(&rg->lock);
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

	mutex_lock(&rg->lock);
	lt = rg->nr ? rg->m[0].lt : NULL;
	mutex_unlock(&rg->lock);
	return lt;
}

/* What of a part's attempt on a link is given back before another one. */
static void engram_replica_part_unbind(struct engram_fetch *p)
{
	unsigned int i;

	for (i = 0; i < p->nr_pieces; i++)
		engram_ubuf_put(p->pieces[i].buf);
	p->nr_pieces = 0;
	if (p->link)
		engram_link_put(p->link);
	p->link = NULL;
}

static void engram_replica_part_done(struct engram_fetch *p);

static struct engram_fetch *engram_replica_part_new(struct engram_fetch *f, u32 first, u32 n)
{
	struct engram_fetch *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p)
		return NULL;
	kref_init(&p->ref);		/* the fd's fetch's, until it is freed */
	INIT_LIST_HEAD(&p->fd_node);
	INIT_LIST_HEAD(&p->done_node);
	INIT_LIST_HEAD(&p->retry_node);
	p->slot = -1;
	p->wq = f->wq;
	p->parent = f;
	p->part_done = engram_replica_part_done;
	p->first = first;
	p->nr_rows = n;
	p->stride = f->stride;
	p->rows = f->rows + first;	/* the fd's fetch's array, not the part's */
	memcpy(p->digest, f->digest, sizeof(p->digest));
	return p;
}

/*
 * Cut the part's share of the destination (its rows from the fd's
 * fetch's row @p->first on, in the ranges the fd's fetch holds as its
 * pieces) for the limits of one link.
 */
static int engram_replica_part_cut(struct engram_fetch *p, const struct engram_replica_cand *c)
{
	struct engram_pieces_dest pd[ENGRAM_WIRE_MAX_RANGES];
	struct engram_pieces_piece pp[ENGRAM_WIRE_MAX_RANGES];
	const struct engram_fetch *f = p->parent;
	u64 skip = (u64)p->first * f->stride;
	unsigned int i, nd = 0;
	u32 n;
	int ret;

	for (i = 0; i < f->nr_pieces; i++) {
		const struct engram_piece *d = &f->pieces[i];

		if (skip >= d->len) {
			skip -= d->len;
			continue;
		}
		pd[nd].addr = d->buf->addr;
		pd[nd].off = d->off + skip;
		pd[nd].len = d->len - skip;
		skip = 0;
		nd++;
	}
	if (!nd)
		return -ENOSPC;
	ret = engram_pieces_cut(p->nr_rows, p->stride, ENGRAM_ROW_BYTES, pd, nd,
				(u64)c->mr_pages * PAGE_SIZE, PAGE_SIZE, pp,
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

/* Has a part of these rows been on @l already? */
static bool engram_replica_tried(struct engram_replica_fetch *rf, struct engram_fetch *p,
				 struct engram_link *l)
{
	struct engram_fetch *q;
	unsigned long flags;
	bool tried = false;

	spin_lock_irqsave(&rf->lock, flags);
	list_for_each_entry(q, &rf->parts, part_node)
		if (q != p && q->first == p->first && q->link == l)
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
static int engram_replica_part_send(struct engram_replica_fetch *rf, struct engram_fetch *p,
				    struct engram_replica_cand *c, unsigned int n, bool moved)
{
	bool used[ENGRAM_REPLICA_MAX] = {};
	int ret = -ENOTCONN;
	unsigned int k;

	for (k = 0; k < n; k++)
		used[k] = engram_replica_tried(rf, p, c[k].link);
	for (;;) {
		unsigned int i, best = n, left = 0;
		ktime_t now = ktime_get();
		s64 rest;

		for (i = 0; i < n; i++) {
			if (used[i] || c[i].max_rows < p->nr_rows)
				continue;
			left++;
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
		if (ret == -E2BIG)
			continue;	/* this replica's limits: another may take it */
		if (ret)
			return ret;	/* the destination, not the replica */
		engram_link_get(c[best].link);
		p->link = c[best].link;
		p->generation = c[best].generation;
		p->lt = engram_replica_lt(rf->rg, p->link);
		p->error = 0;
		p->wire_status = ENGRAM_WIRE_OK;
		ret = engram_link_submit(p->link, p);
		if (!ret) {
			c[best].inflight++;
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
		else if (ret != -EBUSY && ret != -E2BIG)
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
		return true;
	default:
		return false;
	}
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
	spin_lock_irqsave(&wq->lock, flags);
	engram_fetch_set_done(f);
	wake_up_locked(wq);
	spin_unlock_irqrestore(&wq->lock, flags);
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
		rf->bad_index = p->wire_status == ENGRAM_WIRE_ROW_OUT_OF_RANGE ?
				p->first + p->bad_index : 0;
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
		queue_work(system_unbound_wq, &rf->work);
	} else {
		last = engram_replica_settle_locked(rf, p, p->error);
	}
	spin_unlock_irqrestore(&rf->lock, flags);
	if (last)
		engram_replica_publish(rf);
}

/*
 * Send the rows of failed parts again, each as a new part on a replica
 * they were not on.  Once its last part is on a wire this touches nothing
 * of the fetch any more: it may end, and be freed, at once.
 */
static void engram_replica_work(struct work_struct *work)
{
	struct engram_replica_fetch *rf = container_of(work, struct engram_replica_fetch, work);
	struct engram_replica_cand c[ENGRAM_REPLICA_MAX];
	struct engram_fetch *p, *q, *tmp;
	unsigned long flags;
	LIST_HEAD(todo);
	int n;

	spin_lock_irqsave(&rf->lock, flags);
	list_splice_init(&rf->retry, &todo);
	spin_unlock_irqrestore(&rf->lock, flags);
	if (list_empty(&todo))
		return;
	/* By SHA-256 alone, never -ENOTUNIQ: 0 or more replicas. */
	n = engram_link_admin_replicas(ENGRAM_OPEN_BY_SHA256, NULL, rf->rg->sha256, c, NULL,
				       ARRAY_SIZE(c));
	list_for_each_entry_safe(p, tmp, &todo, retry_node) {
		bool last;

		list_del_init(&p->retry_node);
		q = NULL;
		if (n > 0 && !READ_ONCE(rf->expired))
			q = engram_replica_part_new(rf->f, p->first, p->nr_rows);
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
			engram_replica_publish(rf);
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

/**
 * engram_replica_submit() - send a fetch of a table opened on no link
 * @rg: the table
 * @f: the fd's fetch: rows, stride and deadline set, its pieces the
 *	caller's destination ranges (each holding its buffer), no link
 *
 * Process context.
 *
 * Return: 0 once a part is on a wire (the fetch then ends when every part
 * has); otherwise nothing is: -ENOTCONN when no replica is up or takes
 * it, -E2BIG for more rows than the replicas take, -ENOMEM, or what the
 * destination's cutting found wrong.
 */
int engram_replica_submit(struct engram_replica *rg, struct engram_fetch *f)
{
	struct engram_fetch *part[ENGRAM_REPLICA_MAX_PARTS];
	struct engram_replica_cand c[ENGRAM_REPLICA_MAX];
	struct engram_replica_fetch *rf;
	unsigned int i, k = 1, split, sent = 0, failed = 0;
	struct engram_fetch *p, *tmp;
	u32 min_rows = U32_MAX, max_rows = 0;
	unsigned long flags;
	int n, ret = 0, err = 0;
	bool last;

	n = engram_link_admin_replicas(ENGRAM_OPEN_BY_SHA256, NULL, rg->sha256, c, NULL,
				       ARRAY_SIZE(c));
	if (n <= 0)
		return n ? n : -ENOTCONN;
	rf = kzalloc(sizeof(*rf), GFP_KERNEL);
	if (!rf) {
		engram_replica_put_cands(c, n);
		return -ENOMEM;
	}
	spin_lock_init(&rf->lock);
	INIT_LIST_HEAD(&rf->parts);
	INIT_LIST_HEAD(&rf->retry);
	INIT_WORK(&rf->work, engram_replica_work);
	rf->rg = rg;
	rf->f = f;
	for (i = 0; i < n; i++) {
		min_rows = min(min_rows, c[i].max_rows);
		max_rows = max(max_rows, c[i].max_rows);
	}
	split = engram_params_replica_split_rows();
	if (split && n > 1)
		k = clamp_t(u32, f->nr_rows / split, 1, min_t(u32, n, ENGRAM_REPLICA_MAX_PARTS));
	/*
	 * Each part fits every replica, so that any may take it over; when
	 * that takes too many parts, each fits the largest (what the open
	 * promised), and only the replicas that take it are tried.
	 */
	if (DIV_ROUND_UP(f->nr_rows, min_rows) <= ENGRAM_REPLICA_MAX_PARTS)
		k = max_t(u32, k, DIV_ROUND_UP(f->nr_rows, min_rows));
	else
		k = max_t(u32, k, DIV_ROUND_UP(f->nr_rows, max_rows));
	if (k > ENGRAM_REPLICA_MAX_PARTS || k > f->nr_rows) {
		ret = -E2BIG;
		goto out;
	}
	memcpy(f->digest, rg->sha256, sizeof(f->digest));
	for (i = 0; i < k; i++) {
		u32 first = (u64)f->nr_rows * i / k, next = (u64)f->nr_rows * (i + 1) / k;

		p = engram_replica_part_new(f, first, next - first);
		if (!p) {
			ret = -ENOMEM;
			goto out;
		}
		list_add_tail(&p->part_node, &rf->parts);
		part[i] = p;
	}
	f->rf = rf;
	f->expire = engram_replica_expire;
	f->start = ktime_get();
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
			engram_replica_publish(rf);
	}
	engram_replica_put_cands(c, n);
	return 0;

out:
	engram_replica_put_cands(c, n);
	list_for_each_entry_safe(p, tmp, &rf->parts, part_node) {
		engram_replica_part_unbind(p);
		kfree(p);
	}
	kfree(rf);
	return ret;
}

/**
 * engram_replica_reap() - count an ended fetch's parts and sync its rows
 * @f: the fd's fetch, done
 *
 * Each part counts with the table on its own link; the rows of each part
 * that succeeded are synced for the CPU from its link's device.
 */
void engram_replica_reap(struct engram_fetch *f)
{
	struct engram_fetch *p;
	unsigned int i;

	list_for_each_entry(p, &f->rf->parts, part_node) {
		if (!p->link)
			continue;	/* never sent */
		engram_link_table_fetched(p->lt, p->error, p->wire_status, p->nr_rows, p->rtt_ns);
		if (p->error)
			continue;
		for (i = 0; i < p->nr_pieces; i++)
			engram_ubuf_sync(p->pieces[i].buf, p->ibdev, p->pieces[i].off,
					 p->pieces[i].len, false);
	}
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
	list_for_each_entry_safe(p, tmp, &rf->parts, part_node) {
		engram_replica_part_unbind(p);
		kfree(p);
	}
	kfree(rf);
	f->rf = NULL;
}
