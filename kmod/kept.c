// SPDX-License-Identifier: GPL-2.0
/*
 * Kept registrations.  A buffer registered with ENGRAM_REG_F_KEEP_KEYS is
 * not fast-registered and invalidated per fetch: each RDMA connection that
 * writes into it registers it once, window by window (a window is what one
 * MR of the device maps, at fixed places in the buffer, overlapping by one page
 * so that a fetch cut for them never needs a row across two: see
 * engram_pieces_kept_step()), on the first fetch that needs one there,
 * and keeps the key until the buffer or the connection goes.  The REQUEST
 * then says ENGRAM_WIRE_REQ_KEPT_KEYS and its RESPONSE invalidates nothing.
 *
 * What still holds: a missed deadline breaks the connection, whose QP is
 * destroyed (and these MRs deregistered) before the fetch is let go, so no
 * late write lands; unregistering the buffer or closing its fd deregisters
 * its windows on every connection before it returns.  What is given up:
 * while the connection lives, its host may write anywhere in the windows,
 * not only where a fetch asked (Documentation/failures.rst).
 *
 * Lifetimes.  Each buffer indexes its windows by (window, connection) in an
 * xarray; entries are freed only by engram_kept_buf_drop(), when no fetch
 * can use the buffer any more.  A connection lists the entries whose MR it
 * holds, and at teardown deregisters those MRs and leaves the entries dead
 * (no MR), to be filled again by the next connection's first fetch.  Both
 * run under the link's conn_sem, so a teardown (writer) never meets a
 * fetch or a buffer's drop (readers) halfway; each entry holds its link.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/idr.h>
#include <linux/math64.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/xarray.h>

#include "client.h"
#include "cost.h"
#include "inject.h"
#include "kept.h"
#include "link.h"
#include "pieces.h"

/*
 * Bits of a connection's number in a window's index, above which the
 * window's number goes: at most 2^24 windows of a buffer (64 GiB in
 * 4 KiB steps), so an index fits 44 bits.
 */
#define ENGRAM_KEPT_ID_BITS	20

static DEFINE_IDA(engram_kept_ida);

/*
 * One window of one buffer on one connection.  @mr is set while the
 * connection registered it (and the entry is on its keys), NULL once the
 * connection went; both under the connection's lock.
 */
struct engram_kept {
	struct list_head node;
	struct engram_kept_conn *kc;	/* its link held */
	struct ib_mr *mr;
};

/**
 * engram_kept_conn_init() - set up a connection's kept registrations
 * @kc: embedded in @l, zeroed
 * @l: its link
 *
 * Process context.
 *
 * Return: 0, or -ENOSPC / -ENOMEM when no number is left for it.
 */
int engram_kept_conn_init(struct engram_kept_conn *kc, struct engram_link *l)
{
	int id = ida_alloc_max(&engram_kept_ida, (1 << ENGRAM_KEPT_ID_BITS) - 1, GFP_KERNEL);

	BUILD_BUG_ON(sizeof(unsigned long) < sizeof(u64));
	if (id < 0)
		return id;
	spin_lock_init(&kc->lock);
	INIT_LIST_HEAD(&kc->keys);
	kc->link = l;
	kc->id = id;
	return 0;
}

/**
 * engram_kept_conn_exit() - give back what engram_kept_conn_init() took
 * @kc: stopped, or never started
 */
void engram_kept_conn_exit(struct engram_kept_conn *kc)
{
	WARN_ON_ONCE(!list_empty(&kc->keys));
	ida_free(&engram_kept_ida, kc->id);
}

/**
 * engram_kept_conn_start() - a connection is up: its fetches may keep keys
 * @kc: the connection's
 * @qp: its QP
 * @pd: its PD
 * @reg_cqe: where a failed REG_MR completes
 * @mr_pages: pages one MR of the device maps
 *
 * Before the connection carries its first fetch.
 */
void engram_kept_conn_start(struct engram_kept_conn *kc, struct ib_qp *qp, struct ib_pd *pd,
			    struct ib_cqe *reg_cqe, u32 mr_pages)
{
	kc->qp = qp;
	kc->pd = pd;
	kc->ibdev = pd->device;
	kc->reg_cqe = reg_cqe;
	kc->mr_pages = mr_pages;
}

/**
 * engram_kept_conn_stop() - deregister every window a connection kept
 * @kc: the connection's
 *
 * Once its QP is destroyed, before its PD is: no write of it can land any
 * more, and the keys die here.  The entries stay in their buffers, dead.
 * The link's conn_sem held for writing (teardown).
 */
void engram_kept_conn_stop(struct engram_kept_conn *kc)
{
	struct engram_kept *e;
	struct ib_mr *mr;

	for (;;) {
		spin_lock(&kc->lock);
		e = list_first_entry_or_null(&kc->keys, struct engram_kept, node);
		if (e) {
			list_del_init(&e->node);
			mr = e->mr;
			e->mr = NULL;
		}
		spin_unlock(&kc->lock);
		if (!e)
			break;
		ib_dereg_mr(mr);
	}
	kc->qp = NULL;
}

/*
 * The window byte @off of @b starts, counted from the buffer's first
 * page's start as pieces.c counts (@pos), with its first byte (@start,
 * never before the buffer's) and its end (never past the buffer's).
 */
static u64 engram_kept_window(const struct engram_kept_conn *kc, const struct engram_ubuf *b,
			      u64 off, u64 *pos, u64 *start, u64 *end)
{
	u64 w = (u64)kc->mr_pages << PAGE_SHIFT, head = b->addr & ~PAGE_MASK;
	u64 step = engram_pieces_kept_step(w, PAGE_SIZE), win;

	*pos = head + off;
	win = div64_u64(*pos, step);
	*start = max(win * step, head);
	*end = min(win * step + w, head + b->length);
	return win;
}

/**
 * engram_kept_fits() - does a piece lie in one window of the connection?
 * @kc: the connection's
 * @b: the buffer
 * @off: the piece's first byte in @b
 * @len: its bytes, at least 1
 *
 * A fetch's pieces are cut at window boundaries (engram_pieces_cut() with
 * aligned windows) for the link they were cut for; one cut for a device
 * of other limits may not be, and is registered per fetch instead.
 *
 * Return: true when the piece can use a kept registration here.
 */
bool engram_kept_fits(const struct engram_kept_conn *kc, const struct engram_ubuf *b, u64 off,
		      u64 len)
{
	u64 pos, start, end;

	if (!kc->qp || !kc->mr_pages)
		return false;
	engram_kept_window(kc, b, off, &pos, &start, &end);
	return pos + len <= end;
}

/*
 * Register bytes @start to @end of @b's page-aligned span on @kc into @mr:
 * a window clipped to the buffer (the first from the buffer's first byte,
 * the last to its last), so that no byte outside it is ever exposed.
 */
static int engram_kept_reg(struct engram_kept_conn *kc, struct engram_ubuf *b, u64 start,
			   u64 end, struct scatterlist *sgl, struct ib_mr *mr)
{
	int n, mapped;

	n = engram_ubuf_sg(b, kc->ibdev, start, end, sgl, kc->mr_pages);
	if (n < 0)
		return n;
	mapped = engram_map_mr_sg(mr, sgl, n, NULL, PAGE_SIZE);
	if (mapped < 0)
		return mapped;
	return mapped == n ? 0 : -EINVAL;
}

/* The entry of window @key of @b, a dead one made if there is none. */
static struct engram_kept *engram_kept_entry(struct engram_kept_conn *kc, struct engram_ubuf *b,
					     unsigned long key)
{
	struct engram_kept *e = xa_load(&b->kept, key), *old;

	if (e)
		return e;
	e = kzalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return ERR_PTR(-ENOMEM);
	INIT_LIST_HEAD(&e->node);
	e->kc = kc;
	engram_link_get(kc->link);
	old = xa_cmpxchg(&b->kept, key, NULL, e, GFP_KERNEL);
	if (!old)
		return e;
	/* Another fetch made it meanwhile, or there was no memory for the index. */
	engram_link_put(kc->link);
	kfree(e);
	return xa_is_err(old) ? ERR_PTR(xa_err(old)) : old;
}

/**
 * engram_kept_map() - the kept registration a piece of a fetch lands through
 * @kc: the connection the fetch goes on (engram_kept_fits() said yes)
 * @b: the buffer, with ENGRAM_REG_F_KEEP_KEYS
 * @off: the piece's first byte in @b
 * @len: its bytes
 * @sgl: room for kc->mr_pages entries (the fetch's request slot's)
 * @mr: set to the window's MR
 * @addr: set to the remote address of the piece's first byte
 *
 * The first fetch of a window on a connection registers it: a REG_MR,
 * unsignaled, posted on the connection's send queue under its lock, so
 * that every fetch that finds the window registered posts its REQUEST
 * after it.  Later fetches find it with one lookup and take no lock.
 * Process context, the link's conn_sem held for reading.
 *
 * Return: 0; -ENOMEM; or the registration's error (-EIO: not posted).
 */
int engram_kept_map(struct engram_kept_conn *kc, struct engram_ubuf *b, u64 off, u64 len,
		    struct scatterlist *sgl, struct ib_mr **mr, u64 *addr)
{
	u64 pos, start, end, win = engram_kept_window(kc, b, off, &pos, &start, &end);
	unsigned long key = (unsigned long)(win << ENGRAM_KEPT_ID_BITS) | kc->id;
	struct ib_reg_wr reg = {};
	struct engram_kept *e;
	struct ib_mr *m;
	int ret;

	if (WARN_ON_ONCE(pos + len > end))
		return -EINVAL;
	e = engram_kept_entry(kc, b, key);
	if (IS_ERR(e))
		return PTR_ERR(e);
	m = READ_ONCE(e->mr);
	if (!m) {
		m = engram_alloc_mr(kc->pd, IB_MR_TYPE_MEM_REG, kc->mr_pages);
		if (IS_ERR(m))
			return PTR_ERR(m);
		ret = engram_kept_reg(kc, b, start, end, sgl, m);
		if (ret)
			goto err_mr;
		reg.wr.opcode = IB_WR_REG_MR;
		reg.wr.wr_cqe = kc->reg_cqe;
		reg.mr = m;
		reg.key = m->rkey;
		/* Remote write only, as a per-fetch registration. */
		reg.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
		spin_lock(&kc->lock);
		if (e->mr) {
			/* Another fetch registered it first: its REG_MR is ahead of ours. */
			struct ib_mr *first = e->mr;

			spin_unlock(&kc->lock);
			ib_dereg_mr(m);
			m = first;
		} else {
			engram_cost_post_send(false, &reg.wr);
			ret = engram_post_send(kc->qp, &reg.wr, NULL);
			if (ret) {
				spin_unlock(&kc->lock);
				ret = -EIO;
				goto err_mr;
			}
			WRITE_ONCE(e->mr, m);
			list_add_tail(&e->node, &kc->keys);
			spin_unlock(&kc->lock);
			engram_link_count(kc->link, ENGRAM_STAT_KEPT_REGISTRATIONS, 1);
			engram_count(&engram_global_stats, ENGRAM_STAT_KEPT_REGISTRATIONS);
		}
	}
	*mr = m;
	*addr = m->iova + (pos - start);
	return 0;

err_mr:
	ib_dereg_mr(m);
	return ret;
}

/**
 * engram_kept_buf_drop() - deregister a buffer's windows on every connection
 * @b: the buffer, which no fetch can use any more (unregistered, or its
 *	fd closing, after the fetches writing into it ended)
 *
 * When this returns no host can write into @b through a kept key.  Process
 * context; takes each connection's link's conn_sem for reading, so it may
 * wait for a teardown.
 */
void engram_kept_buf_drop(struct engram_ubuf *b)
{
	struct engram_kept *e;
	unsigned long key;
	struct ib_mr *mr;

	xa_for_each(&b->kept, key, e) {
		xa_erase(&b->kept, key);
		/* A teardown is not halfway through this entry's connection. */
		down_read(&e->kc->link->conn_sem);
		spin_lock(&e->kc->lock);
		mr = e->mr;
		e->mr = NULL;
		list_del_init(&e->node);
		spin_unlock(&e->kc->lock);
		if (mr)
			ib_dereg_mr(mr);
		up_read(&e->kc->link->conn_sem);
		engram_link_put(e->kc->link);
		kfree(e);
	}
}
