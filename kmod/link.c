// SPDX-License-Identifier: GPL-2.0
/*
 * Client links: one RC connection to one server each, from remote= or
 * netlink.  A link connects in a worker (resolve address, route, create the
 * queue pair, connect with our hello), learns the server's tables from its
 * CATALOG, and then carries fetches: each fetch registers its destination
 * with fast registration (one MR per piece, a fresh key each time), sends
 * one REQUEST, and on the RESPONSE invalidates its MRs before it completes,
 * so the server can never write into the buffer once the fetch is over.
 * A broken connection is torn down (disconnect, drain, fail what was in
 * flight) and retried with backoff.  tcp_link.c carries the same frames
 * over a kernel TCP socket; the list, state, catalog, tickets, heartbeat
 * and reconnects here are shared by both transports.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/idr.h>
#include <linux/jiffies.h>
#include <linux/netlink.h>
#include <linux/random.h>
#include <linux/rwsem.h>
#include <linux/scatterlist.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/xarray.h>
#include <rdma/mr_pool.h>
#include <rdma/rdma_cm.h>

#include "inject.h"
#include "link.h"

/* Receives: one per ticket, plus room for unsolicited catalogs and heartbeat echoes. */
#define ENGRAM_LINK_EXTRA_RECVS		4
/* Pages one MR maps at most, whatever the device allows. */
#define ENGRAM_LINK_MR_PAGES		512
/* How long a closing fd waits for a fetch before it breaks the connection. */
#define ENGRAM_LINK_CLOSE_WAIT_MS	2000
/* A fetch answered at its deadline: how long its invalidations may take. */
#define ENGRAM_LINK_INV_GRACE_MS	1000
/* How often the heartbeat worker looks while heartbeats are off. */
#define ENGRAM_LINK_HB_IDLE_MS		1000

static void engram_link_deadline_arm_locked(struct engram_link *l, ktime_t when);

static LIST_HEAD(engram_links);
static DEFINE_MUTEX(engram_links_mutex);
static DEFINE_IDA(engram_link_ida);
static struct workqueue_struct *engram_link_wq;
static bool engram_links_exiting;

static void engram_link_set_state(struct engram_link *l, u8 state, int error)
{
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	if (l->state != state)
		l->since = ktime_get();
	l->state = state;
	if (error)
		l->error = -error;
	spin_unlock_irqrestore(&l->lock, flags);
}

/**
 * engram_status_errno() - the errno a fetch fails with for a wire status
 * @wire_status: enum engram_wire_status
 *
 * Return: 0 for OK, a negative errno otherwise (Documentation/ioctl.rst).
 */
int engram_status_errno(unsigned int wire_status)
{
	switch (wire_status) {
	case ENGRAM_WIRE_OK:
		return 0;
	case ENGRAM_WIRE_BAD_VERSION:
	case ENGRAM_WIRE_MALFORMED:
		return -EPROTO;
	case ENGRAM_WIRE_UNKNOWN_TABLE:
		return -ESTALE;
	case ENGRAM_WIRE_TABLE_NOT_READY:
		return -EAGAIN;
	case ENGRAM_WIRE_ROW_OUT_OF_RANGE:
		return -ERANGE;
	case ENGRAM_WIRE_TOO_MANY_ROWS:
	case ENGRAM_WIRE_TOO_MANY_RANGES:
		return -E2BIG;
	case ENGRAM_WIRE_DEST_TOO_SMALL:
		return -ENOSPC;
	case ENGRAM_WIRE_BUSY:
		return -EBUSY;
	case ENGRAM_WIRE_SHUTTING_DOWN:
		return -ESHUTDOWN;
	default:
		return -EIO;
	}
}

static void engram_link_release(struct kref *ref)
{
	struct engram_link *l = container_of(ref, struct engram_link, ref);

	ida_free(&engram_link_ida, l->id);
	xa_destroy(&l->fetches);
	kvfree(l->catalog);
	kfree(l);
}

/**
 * engram_link_get() - take a reference on a link
 * @l: the link
 */
void engram_link_get(struct engram_link *l)
{
	kref_get(&l->ref);
}

/**
 * engram_link_put() - drop a reference on a link
 * @l: the link
 */
void engram_link_put(struct engram_link *l)
{
	kref_put(&l->ref, engram_link_release);
}

/**
 * engram_link_id() - a link's id
 * @l: the link
 *
 * Return: the id, >= 1.
 */
u32 engram_link_id(const struct engram_link *l)
{
	return l->id;
}

/**
 * engram_link_max_ranges() - negotiated ranges per request
 * @l: the link
 *
 * Return: the current connection's limit, or ENGRAM_WIRE_MAX_RANGES while
 * down (a fetch then fails on submit anyway).
 */
u32 engram_link_max_ranges(const struct engram_link *l)
{
	u32 n = READ_ONCE(l->neg.max_ranges);

	return n ? n : ENGRAM_WIRE_MAX_RANGES;
}

/*
 * Retry after reconnect_min_ms, doubling up to reconnect_max_ms; the bounds
 * are read each time, so a change applies to the next retry.
 */
static void engram_link_schedule_connect(struct engram_link *l)
{
	unsigned int lo, hi, ms;

	if (l->deleted || READ_ONCE(engram_links_exiting))
		return;
	engram_reconnect_ms(&lo, &hi);
	ms = clamp(l->backoff_ms, lo, hi);
	l->backoff_ms = ms > hi / 2 ? hi : ms * 2;
	/* Jitter, so that clients of one server do not reconnect in step. */
	ms += get_random_u32_below(ms / 2 + 1);
	queue_delayed_work(engram_link_wq, &l->connect_work, msecs_to_jiffies(ms));
}

/**
 * engram_link_fail() - ask for the current connection to be broken
 * @l: the link
 * @error: what its fetches in flight fail with
 *
 * Any context.  Only the connection that is live now is broken, once; a
 * request that comes after it went down (a late completion, a receiver
 * that saw the socket shut) is ignored, so it cannot break the next one.
 */
void engram_link_fail(struct engram_link *l, int error)
{
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	if (l->live && !l->down_pending) {
		l->down_pending = true;
		l->down_gen = l->conn_gen;
		l->down_error = error;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	queue_work(engram_link_wq, &l->down_work);
}

/*
 * Has everything of @f arrived?  Over RDMA its RESPONSE comes after its
 * rows, and only the invalidation of its keys is left, which does not wait
 * for the server; over TCP the rows follow their RESPONSE header, so the
 * fetch is still at the server's mercy until it is finished.
 */
static bool engram_link_answered(const struct engram_link *l, const struct engram_fetch *f)
{
	return f->responded && l->url.transport == ENGRAM_TRANSPORT_RDMA;
}

/*
 * Break connection @gen only: a verdict reached on one connection must not
 * fall on the next one, which a reconnect may have set up meanwhile.
 */
static void engram_link_fail_gen(struct engram_link *l, u32 gen, int error)
{
	unsigned long flags;
	bool same;

	spin_lock_irqsave(&l->lock, flags);
	same = l->conn_gen == gen;
	spin_unlock_irqrestore(&l->lock, flags);
	if (same)
		engram_link_fail(l, error);
}

/**
 * engram_link_heard() - something arrived from the server
 * @l: the link
 *
 * Every frame, and every part of a long one, is proof of life: a link busy
 * with large responses is not broken because a heartbeat waits behind them.
 */
void engram_link_heard(struct engram_link *l)
{
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	l->last_rx = ktime_get();
	spin_unlock_irqrestore(&l->lock, flags);
}

static void engram_link_live_locked(struct engram_link *l)
{
	lockdep_assert_held(&l->lock);
	l->conn_gen++;
	l->live = true;
	l->connects++;
	l->down_pending = false;
	l->last_rx = ktime_get();
	l->probe_since = 0;
	l->hb_ticket = 0;
}

/**
 * engram_link_went_live() - a transport's connection is negotiated
 * @l: the link, its mutex held
 *
 * From here frames are read, fetches may go out once the catalog is in,
 * and the heartbeat watches the connection.
 */
void engram_link_went_live(struct engram_link *l)
{
	unsigned long flags;

	lockdep_assert_held(&l->mutex);
	spin_lock_irqsave(&l->lock, flags);
	engram_link_live_locked(l);
	spin_unlock_irqrestore(&l->lock, flags);
}

/* --- completions --- */

/*
 * Off the wire: MRs back to the pool, slot free, result final.  Called with
 * l->lock held, when the SEND and every invalidation have completed
 * successfully, or by teardown once the queue pair is drained.  The caller
 * publishes the result with engram_link_publish() after dropping l->lock.
 *
 * Return: true if this call finished it (and so must publish it).
 */
static bool engram_link_finish_locked(struct engram_link *l, struct engram_fetch *f)
{
	unsigned int i;

	lockdep_assert_held(&l->lock);
	if (f->finished)
		return false;
	f->finished = true;
	xa_erase(&l->fetches, f->ticket);
	for (i = 0; i < f->nr_pieces; i++) {
		if (f->pieces[i].mr)
			ib_mr_pool_put(l->qp, &l->mrs, f->pieces[i].mr);
		f->pieces[i].mr = NULL;
	}
	if (f->slot >= 0)
		l->slots[f->slot].busy = false;
	f->slot = -1;
	f->rtt_ns = ktime_to_ns(ktime_sub(ktime_get(), f->start));
	if (!f->error) {
		engram_count(&l->stats, ENGRAM_STAT_FETCHES);
		engram_count_add(&l->stats, ENGRAM_STAT_FETCH_ROWS, f->nr_rows);
		engram_count_add(&l->stats, ENGRAM_STAT_FETCH_BYTES,
				 (u64)f->nr_rows * ENGRAM_ROW_BYTES);
		engram_count(&engram_global_stats, ENGRAM_STAT_FETCHES);
		engram_count_add(&engram_global_stats, ENGRAM_STAT_FETCH_ROWS, f->nr_rows);
		engram_count_add(&engram_global_stats, ENGRAM_STAT_FETCH_BYTES,
				 (u64)f->nr_rows * ENGRAM_ROW_BYTES);
		engram_hist_add(&l->lat, f->rtt_ns);
	} else {
		engram_count(&l->stats, ENGRAM_STAT_FETCH_ERRORS);
		engram_count(&engram_global_stats, ENGRAM_STAT_FETCH_ERRORS);
	}
	return true;
}

/*
 * The release of the link's put, which is never the last: reaching zero
 * there is a bug, which the caller WARNs about; leaking then beats freeing
 * (which may sleep) in atomic context.
 */
static void engram_link_release_never(struct kref *ref)
{
}

/*
 * Hand a finished fetch back to its fd.  The fd holds its own reference
 * until it has seen done, so dropping the link's first is never the last
 * put (which must not run here: freeing a fetch may sleep).  done is set
 * and the waiters woken under the wait queue's lock, so a closing fd that
 * takes that lock before freeing cannot free it under us.
 */
static void engram_link_publish(struct engram_fetch *f)
{
	wait_queue_head_t *wq = f->wq;
	unsigned long flags;

	WARN_ON_ONCE(kref_put(&f->ref, engram_link_release_never));
	spin_lock_irqsave(&wq->lock, flags);
	engram_fetch_set_done(f);
	wake_up_locked(wq);
	spin_unlock_irqrestore(&wq->lock, flags);
}

/*
 * A work request of @f failed, was flushed or could not be posted: its
 * keys may still be valid (a flushed LOCAL_INV invalidated nothing), so
 * only teardown may end it, which destroys the queue pair and the MRs
 * before it lets the caller go.  Fails it with @error unless it failed
 * already.
 */
static void engram_link_wire_broken_locked(struct engram_link *l, struct engram_fetch *f,
					   int error)
{
	lockdep_assert_held(&l->lock);
	f->wire_broken = true;
	if (!f->error)
		f->error = error;
}

static void engram_link_wire_put(struct engram_link *l, struct engram_fetch *f)
{
	unsigned long flags;
	bool fin;

	if (!atomic_dec_and_test(&f->wire_refs))
		return;
	spin_lock_irqsave(&l->lock, flags);
	fin = !f->wire_broken && engram_link_finish_locked(l, f);
	spin_unlock_irqrestore(&l->lock, flags);
	if (fin)
		engram_link_publish(f);
}

/**
 * engram_link_complete() - a transport is done with a fetch
 * @l: the link
 * @f: a fetch of its live connection, off the wire for good
 */
void engram_link_complete(struct engram_link *l, struct engram_fetch *f)
{
	unsigned long flags;
	bool fin;

	spin_lock_irqsave(&l->lock, flags);
	fin = engram_link_finish_locked(l, f);
	spin_unlock_irqrestore(&l->lock, flags);
	if (fin)
		engram_link_publish(f);
}

/**
 * engram_link_track() - a fetch is about to go on the wire
 * @l: the link
 * @f: the fetch, its ticket set
 *
 * From here the fetch ends through the link: its response, or teardown.
 * Tracked before it is sent, as its response may come before the send
 * returns.
 *
 * Return: 0 or -ENOMEM.
 */
int engram_link_track(struct engram_link *l, struct engram_fetch *f)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&l->lock, flags);
	ret = xa_err(xa_store(&l->fetches, f->ticket, f, GFP_ATOMIC));
	if (!ret)
		engram_link_deadline_arm_locked(l, f->deadline);
	spin_unlock_irqrestore(&l->lock, flags);
	if (ret)
		return ret;
	kref_get(&f->ref);		/* the link's, dropped when it is finished */
	f->start = ktime_get();
	return 0;
}

/*
 * The two halves of engram_link_end_all(), for a transport that must
 * destroy something between taking the fetches off the wire and letting
 * their callers go (RDMA: the MRs, whose keys die with them).
 */
static void engram_link_finish_all(struct engram_link *l, int error, struct list_head *done)
{
	struct engram_fetch *f;
	unsigned long flags, idx;

	spin_lock_irqsave(&l->lock, flags);
	xa_for_each(&l->fetches, idx, f) {
		if (!f->error)
			f->error = error;
		if (engram_link_finish_locked(l, f))
			list_add_tail(&f->done_node, done);
	}
	spin_unlock_irqrestore(&l->lock, flags);
}

static void engram_link_publish_all(struct list_head *done)
{
	struct engram_fetch *f, *tmp;

	list_for_each_entry_safe(f, tmp, done, done_node)
		engram_link_publish(f);
}

/**
 * engram_link_end_all() - end every fetch of a connection that is gone
 * @l: the link, in teardown, the transport quiesced
 * @error: what a fetch without an error of its own fails with
 */
void engram_link_end_all(struct engram_link *l, int error)
{
	LIST_HEAD(done);

	engram_link_finish_all(l, error, &done);
	engram_link_publish_all(&done);
}

/**
 * engram_link_claim() - match a RESPONSE to the fetch it answers
 * @l: the link
 * @resp: the decoded response
 *
 * Records the status on the fetch and counts a refusal.  A fetch is
 * claimed once; the caller then places its rows (TCP) or invalidates its
 * registrations (RDMA) and completes it.
 *
 * Return: the fetch, or NULL for a ticket that is not one of this
 * connection's fetches on the wire (a protocol error).
 */
struct engram_fetch *engram_link_claim(struct engram_link *l,
				       const struct engram_wire_resp *resp)
{
	struct engram_fetch *f;
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	f = xa_load(&l->fetches, resp->ticket);
	if (!f || f->responded || f->conn_gen != l->conn_gen) {
		spin_unlock_irqrestore(&l->lock, flags);
		pr_warn_ratelimited("link %u: response to unknown ticket %llu\n",
				    l->id, resp->ticket);
		return NULL;
	}
	f->responded = true;
	f->wire_status = resp->status;
	f->bad_index = resp->bad_index;
	/* A fetch already timed out stays timed out: its caller was told so. */
	if (f->error)
		;
	else if (resp->status == ENGRAM_WIRE_OK &&
		 resp->bytes != (u64)f->nr_rows * ENGRAM_ROW_BYTES)
		f->error = -EPROTO;
	else
		f->error = engram_status_errno(resp->status);
	spin_unlock_irqrestore(&l->lock, flags);
	if (resp->status != ENGRAM_WIRE_OK)
		engram_count_refusal(&l->stats, resp->status);
	return f;
}

/**
 * engram_link_hb_echo() - a HEARTBEAT came back
 * @l: the link
 * @buf: the frame
 * @len: its length
 *
 * Return: 0, or -EPROTO for a malformed one or one that answers no
 * heartbeat of ours.
 */
int engram_link_hb_echo(struct engram_link *l, const void *buf, u32 len)
{
	unsigned long flags;
	char err[96];
	u64 ticket;
	int ret = 0;

	if (engram_wire_simple_parse(buf, len, &l->neg, false, ENGRAM_WIRE_HEARTBEAT, &ticket,
				     err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad heartbeat: %s\n", l->id, err);
		return -EPROTO;
	}
	spin_lock_irqsave(&l->lock, flags);
	if (l->hb_ticket && ticket == l->hb_ticket) {
		l->hb_rtt_us = min_t(u64, ktime_us_delta(ktime_get(), l->hb_sent), U32_MAX);
		l->have_hb_rtt = true;
		l->hb_ticket = 0;
		l->probe_since = 0;
	} else {
		ret = -EPROTO;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	if (ret)
		pr_warn_ratelimited("link %u: heartbeat echo with unknown ticket %llu\n",
				    l->id, ticket);
	return ret;
}

static void engram_link_fail_wc(struct engram_link *l, struct ib_wc *wc, const char *what)
{
	if (wc->status == IB_WC_WR_FLUSH_ERR)
		return;
	engram_count(&engram_global_stats, ENGRAM_STAT_TRANSPORT_ERRORS);
	pr_warn_ratelimited("link %u: %s failed: %s (%d)\n", l->id, what,
			    ib_wc_status_msg(wc->status), wc->status);
	engram_link_fail(l, -ECONNRESET);
}

/* REG_MRs are unsignaled and report only failures, on the link's cqe. */
static void engram_link_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link *l = container_of(wc->wr_cqe, struct engram_link, reg_cqe);

	if (wc->status != IB_WC_SUCCESS)
		engram_link_fail_wc(l, wc, "memory registration");
}

/*
 * A WR of a fetch did not complete successfully: the fetch is left to
 * teardown, and the connection is broken even for a flush (which
 * engram_link_fail_wc() passes over) so that teardown comes: a queue pair
 * that went to error without a failed WR of ours, as a fatal device error
 * leaves it, would otherwise only be noticed by the heartbeat.  During a
 * teardown's drain the break is a no-op.
 */
static void engram_link_fetch_wc_failed(struct engram_link *l, struct engram_fetch *f,
					struct ib_wc *wc, const char *what)
{
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	engram_link_wire_broken_locked(l, f, -ECONNRESET);
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_fail_wc(l, wc, what);
	engram_link_fail(l, -ECONNRESET);
}

static void engram_link_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_fetch *f = container_of(wc->wr_cqe, struct engram_fetch, send_cqe);
	struct engram_link *l = f->link;

	if (wc->status != IB_WC_SUCCESS)
		engram_link_fetch_wc_failed(l, f, wc, "request send");
	engram_link_wire_put(l, f);
}

static void engram_link_hb_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link *l = container_of(wc->wr_cqe, struct engram_link, hb_cqe);
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	l->hb_busy = false;
	spin_unlock_irqrestore(&l->lock, flags);
	if (wc->status != IB_WC_SUCCESS)
		engram_link_fail_wc(l, wc, "heartbeat send");
}

static void engram_link_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_fetch *f = container_of(wc->wr_cqe, struct engram_fetch, inv_cqe);
	struct engram_link *l = f->link;

	if (wc->status != IB_WC_SUCCESS)
		engram_link_fetch_wc_failed(l, f, wc, "invalidation");
	engram_link_wire_put(l, f);
}

/*
 * Invalidate every MR of a fetch.  Every WR is signaled and holds one
 * wire_ref: a flushed chain completes each of them, signaled or not.
 * Called under l->lock while the link is live, so teardown's drain marker
 * always comes after these WRs.  If posting fails the fetch stays on the
 * wire, unfinished, for teardown to end once the QP (and its keys) is gone:
 * it must not complete while a key of it may still be valid.  The WRs live
 * in the fetch: this runs in softirq, where 16 of them are too much stack.
 *
 * Return: 0, or the post's error, which the caller acts on (breaking the
 * connection) once it has dropped l->lock.
 */
static int engram_link_invalidate(struct engram_link *l, struct engram_fetch *f)
{
	struct ib_send_wr *wrs = f->inv_wrs;
	unsigned int i, n = f->nr_pieces;
	int ret;

	lockdep_assert_held(&l->lock);
	memset(wrs, 0, sizeof(wrs[0]) * n);
	for (i = 0; i < n; i++) {
		wrs[i].opcode = IB_WR_LOCAL_INV;
		wrs[i].ex.invalidate_rkey = f->pieces[i].mr->rkey;
		wrs[i].wr_cqe = &f->inv_cqe;
		wrs[i].send_flags = IB_SEND_SIGNALED;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
	}
	f->inv_posted = true;
	ret = engram_fault_client_inv_fail() ? -EIO : engram_post_send(l->qp, wrs, NULL);
	if (ret)
		engram_link_wire_broken_locked(l, f, -ECONNRESET);
	return ret;
}

/*
 * fault_client_inv_flush: break the queue pair as a fatal NIC error would,
 * so the invalidations posted next complete flushed.  Outside l->lock, in
 * the receive completion's softirq: rxe's modify_qp does not sleep.
 */
static void engram_link_fault_qp_error(struct engram_link *l)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	int ret;

	ret = ib_modify_qp(l->qp, &attr, IB_QP_STATE);
	pr_warn_ratelimited("link %u: fault injected: queue pair moved to the error state (%d)\n",
			    l->id, ret);
}

static int engram_link_response(struct engram_link *l, const void *buf, u32 len)
{
	struct engram_wire_resp resp;
	struct engram_fetch *f;
	unsigned long flags;
	char err[96];
	int ret = 0;

	if (engram_wire_resp_decode(buf, len, &l->neg, false, &resp, err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad response: %s\n", l->id, err);
		return -EPROTO;
	}
	f = engram_link_claim(l, &resp);
	if (!f)
		return -EPROTO;
	if (engram_fault_client_inv_flush())
		engram_link_fault_qp_error(l);
	spin_lock_irqsave(&l->lock, flags);
	/* Not live: teardown is draining and will end the fetch itself. */
	if (l->live)
		ret = engram_link_invalidate(l, f);
	spin_unlock_irqrestore(&l->lock, flags);
	/* Only now: engram_link_fail() takes l->lock. */
	if (ret) {
		pr_warn_ratelimited("link %u: posting invalidations failed (%d)\n", l->id, ret);
		engram_link_fail(l, -ECONNRESET);
	}
	return 0;
}

/**
 * engram_link_frame_catalog() - take a CATALOG frame
 * @l: the link
 * @buf: the frame
 * @len: its length
 *
 * The first one after a connect brings the link up.
 *
 * Return: 0 or -EPROTO.
 */
int engram_link_frame_catalog(struct engram_link *l, const void *buf, u32 len)
{
	struct engram_wire_catalog_view cat;
	unsigned long flags;
	char err[96];
	u32 i;

	if (engram_wire_catalog_parse(buf, len, &l->neg, &cat, err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad catalog: %s\n", l->id, err);
		return -EPROTO;
	}
	spin_lock_irqsave(&l->lock, flags);
	for (i = 0; i < cat.nr_entries; i++)
		engram_wire_catalog_get(&cat, i, &l->catalog[i]);
	l->nr_catalog = cat.nr_entries;
	if (l->state == ENGRAM_LINK_CONNECTING && l->live) {
		l->state = ENGRAM_LINK_UP;
		l->since = ktime_get();
		l->backoff_ms = 0;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	return 0;
}

static int engram_link_post_recv(struct engram_link *l, struct engram_link_recv *r)
{
	struct ib_recv_wr wr = {};
	struct ib_sge sge;

	ib_dma_sync_single_for_device(l->dev->ibdev, r->dma,
				      ENGRAM_WIRE_MAX_CATALOG_BYTES, DMA_FROM_DEVICE);
	sge.addr = r->dma;
	sge.length = ENGRAM_WIRE_MAX_CATALOG_BYTES;
	sge.lkey = l->dev->pd->local_dma_lkey;
	wr.wr_cqe = &r->cqe;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return engram_post_recv(l->qp, &wr, NULL);
}

static void engram_link_frame(struct engram_link *l, struct engram_link_recv *r, u32 len);

static void engram_link_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link_recv *r = container_of(wc->wr_cqe, struct engram_link_recv, cqe);
	struct engram_link *l = r->link;
	unsigned long flags;

	if (wc->status != IB_WC_SUCCESS) {
		engram_link_fail_wc(l, wc, "receive");
		return;
	}
	engram_link_heard(l);
	ib_dma_sync_single_for_cpu(l->dev->ibdev, r->dma, ENGRAM_WIRE_MAX_CATALOG_BYTES,
				   DMA_FROM_DEVICE);
	/*
	 * The server may send its catalog as soon as it sees our RTU, which
	 * can be before the connect worker has read its hello: keep the
	 * frame for the worker.  While the worker reads the early frames,
	 * later ones queue behind them, or a newer catalog read here could
	 * be overwritten by an older one the worker reads afterwards.
	 */
	spin_lock_irqsave(&l->lock, flags);
	if (!l->live || l->early_draining) {
		r->early_len = wc->byte_len;
		list_add_tail(&r->early, &l->early);
		spin_unlock_irqrestore(&l->lock, flags);
		return;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_frame(l, r, wc->byte_len);
}

static void engram_link_frame(struct engram_link *l, struct engram_link_recv *r, u32 len)
{
	struct engram_wire_hdr_info hdr;
	char err[96];
	int ret;

	if (engram_wire_hdr_check(r->buf, len, &l->neg, false, false, &hdr,
				  err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad frame: %s\n", l->id, err);
		engram_link_fail(l, -ECONNRESET);
		return;
	}
	switch (hdr.type) {
	case ENGRAM_WIRE_RESPONSE:
		ret = engram_link_response(l, r->buf, len);
		break;
	case ENGRAM_WIRE_CATALOG:
		ret = engram_link_frame_catalog(l, r->buf, len);
		break;
	case ENGRAM_WIRE_HEARTBEAT:
		ret = engram_link_hb_echo(l, r->buf, len);
		break;
	default:	/* the header check lets no other type reach a client */
		ret = -EPROTO;
		break;
	}
	if (ret || engram_link_post_recv(l, r))
		engram_link_fail(l, -ECONNRESET);
}

/* --- connection setup and teardown --- */

static int engram_link_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct engram_link *l = id->context;
	int error = 0;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		memset(l->rep, 0, sizeof(l->rep));
		if (ev->param.conn.private_data)
			memcpy(l->rep, ev->param.conn.private_data,
			       min_t(u32, ev->param.conn.private_data_len, sizeof(l->rep)));
		break;
	case RDMA_CM_EVENT_REJECTED:
		error = -ECONNREFUSED;
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		error = ev->status ? ev->status : -EHOSTUNREACH;
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		error = -EHOSTUNREACH;
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_ADDR_CHANGE:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		/* ib_client.remove has torn the link down already for a removal. */
		engram_link_fail(l, -ECONNRESET);
		return 0;
	default:
		return 0;
	}
	l->cm_error = error;
	complete(&l->cm_done);
	return 0;
}

static int engram_link_cm_wait(struct engram_link *l)
{
	if (!wait_for_completion_timeout(&l->cm_done,
					 msecs_to_jiffies(ENGRAM_LINK_CM_TIMEOUT_MS)))
		return -ETIMEDOUT;
	reinit_completion(&l->cm_done);
	return l->cm_error;
}

static void engram_link_free_bufs(struct engram_link *l)
{
	struct ib_device *ibdev = l->dev->ibdev;
	unsigned int i;

	for (i = 0; l->recvs && i < l->nr_recvs; i++) {
		if (l->recvs[i].dma)
			ib_dma_unmap_single(ibdev, l->recvs[i].dma,
					    ENGRAM_WIRE_MAX_CATALOG_BYTES, DMA_FROM_DEVICE);
		kfree(l->recvs[i].buf);
	}
	kfree(l->recvs);
	l->recvs = NULL;
	for (i = 0; l->slots && i < l->nr_slots; i++) {
		struct engram_link_slot *sl = &l->slots[i];
		unsigned int p;

		/* After the QP: no work request names the MR any more. */
		if (sl->mr)
			ib_dereg_mr(sl->mr);
		for (p = 0; p < sl->nr_mapped; p++)
			ib_dma_unmap_page(ibdev, sl->dma[p], PAGE_SIZE, DMA_TO_DEVICE);
		kfree(sl->dma);
		vfree(sl->buf);
	}
	kfree(l->slots);
	l->slots = NULL;
	if (l->hb_dma)
		ib_dma_unmap_single(ibdev, l->hb_dma, ENGRAM_WIRE_HDR_BYTES, DMA_TO_DEVICE);
	l->hb_dma = 0;
	kfree(l->hb_buf);
	l->hb_buf = NULL;
}

/*
 * Disconnect, drain (every WR completes, flushed), end what was in flight,
 * free.  After this no WRITE of the old connection can reach any buffer:
 * the QP is gone, and so are the MRs of its pool, with every key they had.
 * That holds also for a fetch broken mid-way, whose LOCAL_INVs never ran:
 * its keys die with the MRs here, before the fetch is ended, and the next
 * connection registers through a pool of new MRs, so no key of this one
 * can ever work on the new QP.
 */
static void engram_link_rdma_teardown(struct engram_link *l, int error)
{
	LIST_HEAD(done);

	if (l->qp) {
		rdma_disconnect(l->cm_id);
		ib_drain_qp(l->qp);
		/* Off the wire (MRs back in the pool), but nobody told yet... */
		engram_link_finish_all(l, error, &done);
		ib_mr_pool_destroy(l->qp, &l->mrs);
		rdma_destroy_qp(l->cm_id);
		l->qp = NULL;
		/* ...until their keys are gone with the MRs and the QP. */
		engram_link_publish_all(&done);
	}
	l->mr_pages = 0;
	if (l->cq) {
		ib_free_cq(l->cq);
		l->cq = NULL;
	}
	if (l->dev) {
		engram_link_free_bufs(l);
		engram_dev_close(l->dev);
		l->dev = NULL;
	}
	if (l->cm_id) {
		rdma_destroy_id(l->cm_id);
		l->cm_id = NULL;
	}
	INIT_LIST_HEAD(&l->early);
	l->early_draining = false;
}

/*
 * Tear the connection down: no new fetch, the transport quiesced and every
 * fetch of the connection ended, then freed.
 */
static void engram_link_teardown(struct engram_link *l, int error)
{
	unsigned long flags;

	lockdep_assert_held(&l->mutex);
	spin_lock_irqsave(&l->lock, flags);
	l->live = false;
	spin_unlock_irqrestore(&l->lock, flags);
	/* A TCP sender may hold conn_sem while it blocks on the socket. */
	if (l->ops->stop)
		l->ops->stop(l);
	down_write(&l->conn_sem);
	l->ops->teardown(l, error);
	/* Whatever the transport left (it should leave nothing) ends too. */
	engram_link_end_all(l, error);
	spin_lock_irqsave(&l->lock, flags);
	l->nr_catalog = 0;
	l->hb_ticket = 0;
	l->probe_since = 0;
	spin_unlock_irqrestore(&l->lock, flags);
	up_write(&l->conn_sem);
}

static int engram_link_alloc_recvs(struct engram_link *l)
{
	struct ib_device *ibdev = l->dev->ibdev;
	unsigned int i;

	l->nr_recvs = ENGRAM_WIRE_OFFER_INFLIGHT + ENGRAM_LINK_EXTRA_RECVS;
	l->recvs = kcalloc(l->nr_recvs, sizeof(*l->recvs), GFP_KERNEL);
	if (!l->recvs)
		return -ENOMEM;
	for (i = 0; i < l->nr_recvs; i++) {
		struct engram_link_recv *r = &l->recvs[i];

		r->link = l;
		r->cqe.done = engram_link_recv_done;
		r->buf = kmalloc(ENGRAM_WIRE_MAX_CATALOG_BYTES, GFP_KERNEL);
		if (!r->buf)
			return -ENOMEM;
		r->dma = engram_dma_map_single(ibdev, r->buf, ENGRAM_WIRE_MAX_CATALOG_BYTES,
					       DMA_FROM_DEVICE);
		if (engram_dma_mapping_error(ibdev, r->dma)) {
			r->dma = 0;
			return -ENOMEM;
		}
	}
	return 0;
}

/*
 * One request slot of @pages pages.  Not a kmalloc of max_request_bytes
 * (up to 262,576: order 7), which a long-running host may not have: pages,
 * virtually contiguous through vmalloc for the encoder, each mapped with
 * ib_dma_map_page() and registered into a local-only MR, so that one SGE
 * (lkey, iova) sends the request whatever its size.  One SGE per page
 * would need up to 65 send SGEs, more than many NICs have.
 */
static int engram_link_alloc_slot(struct engram_link *l, struct engram_link_slot *sl,
				  unsigned int pages, struct scatterlist *sgl)
{
	struct ib_device *ibdev = l->dev->ibdev;
	unsigned int p;
	int n;

	sl->buf = vmalloc(pages * PAGE_SIZE);
	sl->dma = kcalloc(pages, sizeof(*sl->dma), GFP_KERNEL);
	if (!sl->buf || !sl->dma)
		return -ENOMEM;
	for (p = 0; p < pages; p++) {
		struct page *page = vmalloc_to_page(sl->buf + p * PAGE_SIZE);
		u64 dma = engram_dma_map_page(ibdev, page, 0, PAGE_SIZE, DMA_TO_DEVICE);

		if (engram_dma_mapping_error(ibdev, dma))
			return -ENOMEM;
		sl->dma[p] = dma;
		sl->nr_mapped++;
	}
	sl->mr = engram_alloc_mr(l->dev->pd, IB_MR_TYPE_MEM_REG, pages);
	if (IS_ERR(sl->mr)) {
		n = PTR_ERR(sl->mr);
		sl->mr = NULL;
		return n;
	}
	sg_init_table(sgl, pages);
	for (p = 0; p < pages; p++) {
		sg_dma_address(&sgl[p]) = sl->dma[p];
		sg_dma_len(&sgl[p]) = PAGE_SIZE;
	}
	n = engram_map_mr_sg(sl->mr, sgl, pages, NULL, PAGE_SIZE);
	if (n != pages)
		return n < 0 ? n : -EINVAL;
	return 0;
}

static void engram_link_slot_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link *l = container_of(wc->wr_cqe, struct engram_link, slot_reg_cqe);

	l->slot_reg_status = wc->status;
	complete(&l->slot_reg_done);
}

/*
 * Register every slot's MR: REG_MRs on the send queue, which is empty and
 * in RTS once connected, the last one signaled.  Waited for, so that the
 * queue is empty again when fetches start and its sizing (per ticket)
 * holds.
 */
static int engram_link_reg_slots(struct engram_link *l)
{
	struct ib_reg_wr *regs;
	unsigned int i;
	int ret;

	regs = kcalloc(l->nr_slots, sizeof(*regs), GFP_KERNEL);
	if (!regs)
		return -ENOMEM;
	for (i = 0; i < l->nr_slots; i++) {
		regs[i].wr.opcode = IB_WR_REG_MR;
		regs[i].wr.wr_cqe = &l->reg_cqe;
		regs[i].wr.next = i + 1 < l->nr_slots ? &regs[i + 1].wr : NULL;
		regs[i].mr = l->slots[i].mr;
		regs[i].key = l->slots[i].mr->lkey;
		/* The device only reads it: no remote right, no key handed out. */
		regs[i].access = IB_ACCESS_LOCAL_WRITE;
	}
	regs[l->nr_slots - 1].wr.send_flags = IB_SEND_SIGNALED;
	regs[l->nr_slots - 1].wr.wr_cqe = &l->slot_reg_cqe;
	reinit_completion(&l->slot_reg_done);
	ret = engram_post_send(l->qp, &regs[0].wr, NULL);
	kfree(regs);	/* the device copied the WRs when they were posted */
	if (ret)
		return ret;
	if (!wait_for_completion_timeout(&l->slot_reg_done,
					 msecs_to_jiffies(ENGRAM_LINK_CM_TIMEOUT_MS)))
		return -ETIMEDOUT;	/* teardown's drain flushes it */
	return l->slot_reg_status == IB_WC_SUCCESS ? 0 : -EIO;
}

static int engram_link_alloc_slots(struct engram_link *l)
{
	unsigned int i, pages = DIV_ROUND_UP(l->neg.max_request_bytes, PAGE_SIZE);
	struct scatterlist *sgl;
	int ret = 0;

	if (pages > l->dev->ibdev->attrs.max_fast_reg_page_list_len) {
		pr_warn("link %u: a request of %u bytes does not fit one registration on %s\n",
			l->id, l->neg.max_request_bytes, dev_name(&l->dev->ibdev->dev));
		return -E2BIG;
	}
	l->nr_slots = l->neg.max_inflight;
	l->slots = kcalloc(l->nr_slots, sizeof(*l->slots), GFP_KERNEL);
	sgl = kmalloc_array(pages, sizeof(*sgl), GFP_KERNEL);
	if (!l->slots || !sgl)
		ret = -ENOMEM;
	for (i = 0; !ret && i < l->nr_slots; i++)
		ret = engram_link_alloc_slot(l, &l->slots[i], pages, sgl);
	kfree(sgl);
	return ret ?: engram_link_reg_slots(l);
}

/**
 * engram_link_fetch_req() - the REQUEST of a fetch, as both transports send it
 * @f: the fetch, cut into its pieces
 * @req: filled in; each range has its piece's length, and an RDMA transport
 *	adds the address and key of the piece's registration
 */
void engram_link_fetch_req(const struct engram_fetch *f, struct engram_wire_req *req)
{
	unsigned int i;

	memset(req, 0, sizeof(*req));
	req->ticket = f->ticket;
	req->generation = f->generation;
	memcpy(req->digest, f->digest, sizeof(req->digest));
	req->nr_rows = f->nr_rows;
	req->stride = f->stride;
	req->nr_ranges = f->nr_pieces;
	for (i = 0; i < f->nr_pieces; i++)
		req->ranges[i].length = f->pieces[i].len;
}

/**
 * engram_link_local_params() - the hello a client offers
 * @p: filled with our version range and limits
 */
void engram_link_local_params(struct engram_wire_params *p)
{
	engram_wire_offer(p, ENGRAM_WIRE_OFFER_ROWS, ENGRAM_WIRE_OFFER_INFLIGHT);
}

/* Queue pair, MR pool and receives for the device the route chose. */
static int engram_link_create_qp(struct engram_link *l)
{
	struct ib_device *ibdev = l->cm_id->device;
	struct ib_qp_init_attr init = {};
	unsigned int sq, i;
	int ret;

	/* A PD of this connection's own: its rkeys work on no other QP. */
	l->dev = engram_dev_open(ibdev);
	if (!l->dev)
		return -ENOMEM;
	if (!(ibdev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS)) {
		pr_warn("link %u: %s has no fast registration\n", l->id, dev_name(&ibdev->dev));
		return -EOPNOTSUPP;
	}
	/*
	 * Per ticket: one REG_MR and one LOCAL_INV per range, one SEND; one
	 * heartbeat SEND; the drain's WR.
	 */
	sq = ENGRAM_WIRE_OFFER_INFLIGHT * (2 * ENGRAM_WIRE_MAX_RANGES + 1) + 2;
	sq = min_t(unsigned int, sq, ibdev->attrs.max_qp_wr);
	l->cq = engram_alloc_cq(ibdev, l, sq + ENGRAM_WIRE_OFFER_INFLIGHT +
			    ENGRAM_LINK_EXTRA_RECVS + 2, 0, IB_POLL_SOFTIRQ);
	if (IS_ERR(l->cq)) {
		ret = PTR_ERR(l->cq);
		l->cq = NULL;
		return ret;
	}
	init.event_handler = NULL;
	init.qp_context = l;
	init.send_cq = l->cq;
	init.recv_cq = l->cq;
	init.cap.max_send_wr = sq;
	init.cap.max_recv_wr = ENGRAM_WIRE_OFFER_INFLIGHT + ENGRAM_LINK_EXTRA_RECVS + 1;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	init.sq_sig_type = IB_SIGNAL_REQ_WR;
	init.qp_type = IB_QPT_RC;
	ret = engram_create_qp(l->cm_id, l->dev->pd, &init);
	if (ret)
		return ret;
	l->qp = l->cm_id->qp;

	l->mr_pages = min_t(u32, ibdev->attrs.max_fast_reg_page_list_len,
			    ENGRAM_LINK_MR_PAGES);
	INIT_LIST_HEAD(&l->mrs);
	ret = ib_mr_pool_init(l->qp, &l->mrs, ENGRAM_WIRE_OFFER_INFLIGHT * ENGRAM_WIRE_MAX_RANGES,
			      IB_MR_TYPE_MEM_REG, l->mr_pages, 0);
	if (ret)
		return ret;
	ret = engram_link_alloc_recvs(l);
	if (ret)
		return ret;
	l->hb_buf = kzalloc(ENGRAM_WIRE_HDR_BYTES, GFP_KERNEL);
	if (!l->hb_buf)
		return -ENOMEM;
	l->hb_dma = engram_dma_map_single(ibdev, l->hb_buf, ENGRAM_WIRE_HDR_BYTES, DMA_TO_DEVICE);
	if (engram_dma_mapping_error(ibdev, l->hb_dma)) {
		l->hb_dma = 0;
		return -ENOMEM;
	}
	l->hb_busy = false;
	for (i = 0; i < l->nr_recvs; i++) {
		ret = engram_link_post_recv(l, &l->recvs[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * fault_client_live_delay_ms: hold the connect worker, so frames arrive
 * while it is between two steps.  Cut short when the module goes away.
 */
static void engram_link_fault_hold(unsigned int ms)
{
	unsigned long end = jiffies + msecs_to_jiffies(ms);

	while (ms && time_before(jiffies, end) && !READ_ONCE(engram_links_exiting))
		msleep(20);
}

/*
 * Read, in order, the frames that arrived before the link went live and
 * those that arrive meanwhile: the completion handler queues them behind
 * while early_draining is set, and reads them itself once this has found
 * the list empty and cleared it, under the same lock.  Frames are read
 * one at a time, without l->lock, as the completion handler reads them.
 */
static void engram_link_drain_early(struct engram_link *l)
{
	struct engram_link_recv *r;
	unsigned long flags;

	for (;;) {
		spin_lock_irqsave(&l->lock, flags);
		r = list_first_entry_or_null(&l->early, struct engram_link_recv, early);
		if (r)
			list_del(&r->early);
		else
			l->early_draining = false;
		spin_unlock_irqrestore(&l->lock, flags);
		if (!r)
			return;
		engram_link_frame(l, r, r->early_len);
	}
}

static int engram_link_rdma_connect(struct engram_link *l)
{
	struct engram_wire_params local, answer;
	struct rdma_conn_param param = {};
	u8 hello[ENGRAM_WIRE_HELLO_BYTES];
	unsigned int hold;
	unsigned long flags;
	char err[96];
	int ret;

	lockdep_assert_held(&l->mutex);
	reinit_completion(&l->cm_done);
	l->cm_id = engram_create_id(&init_net, engram_link_cm_handler, l, RDMA_PS_TCP,
				    IB_QPT_RC);
	if (IS_ERR(l->cm_id)) {
		ret = PTR_ERR(l->cm_id);
		l->cm_id = NULL;
		return ret;
	}
	ret = rdma_resolve_addr(l->cm_id, (struct sockaddr *)&l->url.local,
				(struct sockaddr *)&l->url.addr, ENGRAM_LINK_CM_TIMEOUT_MS);
	if (!ret)
		ret = engram_link_cm_wait(l);
	if (!ret)
		ret = rdma_resolve_route(l->cm_id, ENGRAM_LINK_CM_TIMEOUT_MS);
	if (!ret)
		ret = engram_link_cm_wait(l);
	if (ret)
		return ret;
	ret = engram_link_create_qp(l);
	if (ret)
		return ret;

	engram_link_local_params(&local);
	engram_wire_hello_encode(hello, sizeof(hello), &local);
	param.private_data = hello;
	param.private_data_len = sizeof(hello);
	param.retry_count = 7;
	param.rnr_retry_count = 7;
	ret = rdma_connect(l->cm_id, &param);
	if (!ret)
		ret = engram_link_cm_wait(l);
	if (ret)
		return ret;
	if (engram_wire_hello_decode(l->rep, sizeof(l->rep), &answer, err, sizeof(err)) ||
	    engram_wire_check_answer(&local, &answer, err, sizeof(err))) {
		pr_warn("link %u: server's answer refused: %s\n", l->id, err);
		return -EPROTO;
	}
	l->neg = answer;
	ret = engram_link_alloc_slots(l);
	if (ret)
		return ret;
	hold = engram_fault_client_live_delay_ms();
	engram_link_fault_hold(hold);
	spin_lock_irqsave(&l->lock, flags);
	engram_link_live_locked(l);
	l->early_draining = true;
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_fault_hold(hold);
	engram_link_drain_early(l);
	return 0;
}

static void engram_link_connect_work(struct work_struct *work)
{
	struct engram_link *l = container_of(to_delayed_work(work), struct engram_link,
					     connect_work);
	int ret;

	mutex_lock(&l->mutex);
	if (l->deleted || l->live) {
		mutex_unlock(&l->mutex);
		return;
	}
	/* Every attempt after the link had a connection is a reconnect. */
	if (l->connects) {
		engram_count(&l->stats, ENGRAM_STAT_RECONNECTS);
		engram_count(&engram_global_stats, ENGRAM_STAT_RECONNECTS);
	}
	engram_link_set_state(l, ENGRAM_LINK_CONNECTING, 0);
	ret = l->ops->connect(l);
	if (ret) {
		engram_link_teardown(l, -ENOTCONN);
		engram_link_set_state(l, ENGRAM_LINK_DOWN, ret);
		pr_info_ratelimited("link %u (%s): connect failed (%d), retrying\n",
				    l->id, l->url.text, ret);
		engram_link_schedule_connect(l);
	} else if (l->dev) {
		pr_info("link %u (%s): connected on %s\n", l->id, l->url.text,
			dev_name(&l->dev->ibdev->dev));
	} else {
		pr_info("link %u (%s): connected\n", l->id, l->url.text);
	}
	mutex_unlock(&l->mutex);
}

/* Connection lost or broken: tear down, then retry. */
static void engram_link_down_locked(struct engram_link *l, int error)
{
	lockdep_assert_held(&l->mutex);
	if (!l->live)
		return;
	/*
	 * A timeout names the link's error; the fetches that did not time out
	 * themselves were cut off with the connection (the late ones carry
	 * their ETIMEDOUT already).
	 */
	engram_link_teardown(l, error == -ETIMEDOUT ? -ECONNRESET : error);
	engram_count(&l->stats, ENGRAM_STAT_TRANSPORT_ERRORS);
	engram_link_set_state(l, ENGRAM_LINK_DOWN, error);
	pr_info("link %u (%s): down (%d)\n", l->id, l->url.text, error);
	engram_link_schedule_connect(l);
}

static void engram_link_down_work(struct work_struct *work)
{
	struct engram_link *l = container_of(work, struct engram_link, down_work);
	unsigned long flags;
	bool mine;
	int error;

	mutex_lock(&l->mutex);
	spin_lock_irqsave(&l->lock, flags);
	/* Only the connection the request was made for. */
	mine = l->down_pending && l->down_gen == l->conn_gen;
	error = l->down_error;
	l->down_pending = false;
	spin_unlock_irqrestore(&l->lock, flags);
	if (mine)
		engram_link_down_locked(l, error);
	mutex_unlock(&l->mutex);
}

/*
 * Is a fetch on the wire whose deadline is still ahead?  Its deadline
 * watches the connection then: a server busy writing a long response may
 * answer the heartbeat only after it, and the client hears nothing of
 * RDMA WRITEs, so silence is no proof of death while a fetch runs.
 */
static bool engram_link_deadline_pending_locked(struct engram_link *l, ktime_t now)
{
	struct engram_fetch *f;
	unsigned long idx;

	lockdep_assert_held(&l->lock);
	xa_for_each(&l->fetches, idx, f)
		if (!f->finished && !engram_link_answered(l, f) &&
		    ktime_before(now, f->deadline))
			return true;
	return false;
}

/*
 * The heartbeat.  Every heartbeat_ms, a link that is up and has no
 * heartbeat on the wire sends one; the server echoes it.  The link is
 * broken when, since the oldest unanswered heartbeat was due, nothing at
 * all has come from the server for heartbeat_timeout_ms: any frame is
 * proof of life, so a link busy with large responses stays up while its
 * echo waits behind them, and a quiet one is still probed (while a fetch
 * is on the wire within its deadline, that deadline watches instead: the
 * client hears nothing of the WRITEs of a long response).  At most one
 * heartbeat is outstanding, which is what the server's spare receive
 * allows for; heartbeats take no fetch slot, so they never make a fetch
 * fail with EBUSY.  The worker runs for as long as the link exists and
 * never sleeps on the connection: a break is left to down_work.
 */
static void engram_link_hb_work(struct work_struct *work)
{
	struct engram_link *l = container_of(to_delayed_work(work), struct engram_link,
					     hb_work);
	unsigned int every = engram_heartbeat_ms(), limit = engram_heartbeat_timeout_ms();
	bool dead = false, send = false, stuck = false;
	ktime_t now = ktime_get();
	unsigned long flags;
	u64 ticket = 0;
	u32 gen = 0;
	int ret;

	spin_lock_irqsave(&l->lock, flags);
	/*
	 * Connected but no catalog: a server that dies right after the hello
	 * leaves an idle QP that nothing would ever notice.
	 */
	if (l->live && l->state == ENGRAM_LINK_CONNECTING &&
	    ktime_ms_delta(now, l->last_rx) >= limit) {
		gen = l->conn_gen;
		stuck = true;
	}
	if (every && l->live && l->state == ENGRAM_LINK_UP) {
		gen = l->conn_gen;
		if (l->probe_since) {
			ktime_t heard = ktime_after(l->last_rx, l->probe_since) ?
					l->last_rx : l->probe_since;

			dead = ktime_ms_delta(now, heard) >= limit &&
			       !engram_link_deadline_pending_locked(l, now);
		}
		if (!dead && !l->hb_ticket) {
			ticket = ++l->next_ticket;
			l->hb_ticket = ticket;
			l->hb_sent = now;
			if (!l->probe_since)
				l->probe_since = now;
			send = true;
		}
	}
	spin_unlock_irqrestore(&l->lock, flags);

	if (dead) {
		engram_count(&l->stats, ENGRAM_STAT_HEARTBEATS_MISSED);
		engram_count(&engram_global_stats, ENGRAM_STAT_HEARTBEATS_MISSED);
		pr_info_ratelimited("link %u (%s): no answer for %u ms, breaking the connection\n",
				    l->id, l->url.text, limit);
		engram_link_fail_gen(l, gen, -ETIMEDOUT);
	} else if (stuck) {
		pr_info_ratelimited("link %u (%s): no catalog %u ms after connecting, breaking the connection\n",
				    l->id, l->url.text, limit);
		engram_link_fail_gen(l, gen, -ETIMEDOUT);
	} else if (send) {
		/* Not taken: a teardown runs, and this heartbeat is moot. */
		ret = -EBUSY;
		if (down_read_trylock(&l->conn_sem)) {
			if (READ_ONCE(l->live) && READ_ONCE(l->conn_gen) == gen)
				ret = l->ops->heartbeat(l, ticket);
			up_read(&l->conn_sem);
		}
		if (ret) {
			/* Not sent: try again at the next tick; the clock runs on. */
			spin_lock_irqsave(&l->lock, flags);
			if (l->hb_ticket == ticket)
				l->hb_ticket = 0;
			spin_unlock_irqrestore(&l->lock, flags);
		}
		if (ret && ret != -EBUSY)
			engram_link_fail_gen(l, gen, -ECONNRESET);
	}
	if (!READ_ONCE(l->deleted) && !READ_ONCE(engram_links_exiting))
		queue_delayed_work(engram_link_wq, &l->hb_work,
				   msecs_to_jiffies(every ? every : ENGRAM_LINK_HB_IDLE_MS));
}

/* Have deadline_work run by @when, unless it already runs earlier. */
static void engram_link_deadline_arm_locked(struct engram_link *l, ktime_t when)
{
	s64 ns;

	lockdep_assert_held(&l->lock);
	if (l->deadline_armed && !ktime_before(when, l->deadline_next))
		return;
	l->deadline_armed = true;
	l->deadline_next = when;
	ns = ktime_to_ns(ktime_sub(when, ktime_get()));
	mod_delayed_work(engram_link_wq, &l->deadline_work,
			 ns > 0 ? nsecs_to_jiffies(ns) + 1 : 0);
}

/*
 * Mark @f late: it fails with ETIMEDOUT, and the caller breaks the
 * connection so nothing of it can land afterwards.  False when it was
 * answered or ended meanwhile (its rows are in, or it failed otherwise).
 */
static bool engram_link_expire_locked(struct engram_link *l, struct engram_fetch *f)
{
	lockdep_assert_held(&l->lock);
	if (f->finished || f->error || engram_link_answered(l, f))
		return false;
	f->error = -ETIMEDOUT;
	engram_count(&l->stats, ENGRAM_STAT_FETCH_TIMEOUTS);
	engram_count(&engram_global_stats, ENGRAM_STAT_FETCH_TIMEOUTS);
	return true;
}

/*
 * The deadline holds even when nobody waits (SUBMIT, then poll() or no
 * call at all): a fetch still unanswered at its deadline fails with
 * ETIMEDOUT and breaks the connection, the other fetches on it fail with
 * ECONNRESET, as the nvme host's timeout handler does.
 */
static void engram_link_deadline_work(struct work_struct *work)
{
	struct engram_link *l = container_of(to_delayed_work(work), struct engram_link,
					     deadline_work);
	ktime_t now = ktime_get(), next = 0;
	struct engram_fetch *f;
	unsigned long flags, idx;
	bool late = false;
	u32 gen;

	spin_lock_irqsave(&l->lock, flags);
	l->deadline_armed = false;
	gen = l->conn_gen;
	xa_for_each(&l->fetches, idx, f) {
		if (f->finished || f->error || engram_link_answered(l, f))
			continue;
		if (!ktime_before(now, f->deadline))
			late |= engram_link_expire_locked(l, f);
		else if (!next || ktime_before(f->deadline, next))
			next = f->deadline;
	}
	if (next)
		engram_link_deadline_arm_locked(l, next);
	spin_unlock_irqrestore(&l->lock, flags);
	if (late)
		engram_link_fail_gen(l, gen, -ETIMEDOUT);
}

/* --- fetches --- */

/* Post the REG_MRs and the SEND of a fetch whose pieces have MRs. */
static int engram_link_post_fetch(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_link_slot *slot = &l->slots[f->slot];
	struct ib_reg_wr *regs = f->reg_wrs;
	struct ib_send_wr send = {};
	struct ib_sge sge;
	unsigned int i;
	u32 left, n;

	memset(regs, 0, sizeof(regs[0]) * f->nr_pieces);
	for (i = 0; i < f->nr_pieces; i++) {
		struct ib_mr *mr = f->pieces[i].mr;

		regs[i].wr.opcode = IB_WR_REG_MR;
		regs[i].wr.wr_cqe = &l->reg_cqe;
		regs[i].wr.next = &regs[i + 1].wr;
		regs[i].mr = mr;
		regs[i].key = mr->rkey;
		/* Remote write only: the server can neither read nor reuse it later. */
		regs[i].access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	}
	regs[f->nr_pieces - 1].wr.next = &send;
	sge.addr = slot->mr->iova;
	sge.length = f->req_len;
	sge.lkey = slot->mr->lkey;
	send.opcode = IB_WR_SEND;
	send.send_flags = IB_SEND_SIGNALED;
	send.wr_cqe = &f->send_cqe;
	send.sg_list = &sge;
	send.num_sge = 1;
	/* Written through the vmalloc alias: out of a virtually indexed cache first. */
	flush_kernel_vmap_range(slot->buf, round_up(f->req_len, PAGE_SIZE));
	for (i = 0, left = f->req_len; left; i++, left -= n) {
		n = min_t(u32, left, PAGE_SIZE);
		ib_dma_sync_single_for_device(l->dev->ibdev, slot->dma[i], n, DMA_TO_DEVICE);
	}
	if (engram_fault_client_req_fail())
		return -EIO;
	return engram_post_send(l->qp, &regs[0].wr, NULL);
}

/* Fast-register one piece of the destination, exposing exactly its bytes. */
static int engram_link_map_piece(struct engram_link *l, struct engram_piece *p,
				 struct scatterlist *sgl)
{
	const dma_addr_t *dma = engram_ubuf_dma(p->buf, l->dev->ibdev);
	u64 start = (p->buf->addr & ~PAGE_MASK) + p->off;
	unsigned long first = start >> PAGE_SHIFT;
	unsigned long last = (start + p->len - 1) >> PAGE_SHIFT;
	unsigned int i, n = last - first + 1;
	unsigned int sg_off = offset_in_page(start);
	int mapped;

	if (!dma)
		return -ENOMEM;
	if (n > l->mr_pages)
		return -E2BIG;
	sg_init_table(sgl, n);
	for (i = 0; i < n; i++) {
		/*
		 * A soft device (rxe, siw) writes through these addresses
		 * with the CPU: a stale one would land rows in whatever
		 * memory it now points to.  Its address is the page's own.
		 */
		if (ib_uses_virt_dma(l->dev->ibdev) &&
		    WARN_ON_ONCE(dma[first + i] !=
				 (uintptr_t)page_address(p->buf->pages[first + i])))
			return -EIO;
		sg_dma_address(&sgl[i]) = dma[first + i];
		sg_dma_len(&sgl[i]) = PAGE_SIZE;
	}
	sg_dma_len(&sgl[n - 1]) = start + p->len - ((u64)last << PAGE_SHIFT);
	if (n == 1)
		sg_dma_len(&sgl[0]) = sg_off + p->len;
	p->mr = ib_mr_pool_get(l->qp, &l->mrs);
	if (!p->mr)
		return -EBUSY;
	ib_update_fast_reg_key(p->mr, ib_inc_rkey(p->mr->rkey));
	mapped = engram_map_mr_sg(p->mr, sgl, n, &sg_off, PAGE_SIZE);
	if (mapped != n)
		return mapped < 0 ? mapped : -EINVAL;
	return 0;
}

/* The RDMA transport's submit: register each piece, post REG_MRs and the SEND. */
static int engram_link_rdma_submit(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_wire_req req = {};
	struct scatterlist *sgl;
	unsigned long flags;
	unsigned int i;
	int ret;

	f->ibdev = l->dev->ibdev;
	sgl = kmalloc_array(l->mr_pages, sizeof(*sgl), GFP_KERNEL);
	ret = -ENOMEM;
	if (!sgl)
		goto err_pieces;
	for (i = 0; i < f->nr_pieces; i++) {
		ret = engram_link_map_piece(l, &f->pieces[i], sgl);
		if (ret)
			goto err_pieces;
		engram_ubuf_sync(f->pieces[i].buf, l->dev->ibdev, f->pieces[i].off,
				 f->pieces[i].len, true);
	}
	engram_link_fetch_req(f, &req);
	for (i = 0; i < f->nr_pieces; i++) {
		req.ranges[i].addr = f->pieces[i].mr->iova;
		req.ranges[i].rkey = f->pieces[i].mr->rkey;
	}
	ret = engram_wire_req_build(l->slots[f->slot].buf, l->neg.max_request_bytes,
				    &l->neg, &req, f->rows);
	if (ret < 0)
		goto err_pieces;
	f->req_len = ret;

	f->send_cqe.done = engram_link_send_done;
	f->inv_cqe.done = engram_link_inv_done;
	atomic_set(&f->wire_refs, 1 + f->nr_pieces);	/* the SEND, each LOCAL_INV */
	ret = engram_link_track(l, f);
	if (ret)
		goto err_pieces;
	ret = engram_link_post_fetch(l, f);
	if (ret) {
		/*
		 * Part of the chain may be on the wire: leave the fetch to
		 * teardown, which ends it once the QP and its keys are gone.
		 */
		spin_lock_irqsave(&l->lock, flags);
		engram_link_wire_broken_locked(l, f, -EIO);
		spin_unlock_irqrestore(&l->lock, flags);
		engram_link_fail(l, -ECONNRESET);
		ret = 0;		/* the fetch completes with its error */
	}
	kfree(sgl);
	return ret;

err_pieces:
	kfree(sgl);
	spin_lock_irqsave(&l->lock, flags);
	for (i = 0; i < f->nr_pieces; i++) {
		if (f->pieces[i].mr)
			ib_mr_pool_put(l->qp, &l->mrs, f->pieces[i].mr);
		f->pieces[i].mr = NULL;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	return ret;
}

/* The RDMA transport's heartbeat: a SEND of the header from its own buffer. */
static int engram_link_rdma_heartbeat(struct engram_link *l, u64 ticket)
{
	struct ib_send_wr wr = {};
	unsigned long flags;
	struct ib_sge sge;
	int len;

	spin_lock_irqsave(&l->lock, flags);
	if (l->hb_busy) {
		spin_unlock_irqrestore(&l->lock, flags);
		return -EBUSY;
	}
	l->hb_busy = true;
	spin_unlock_irqrestore(&l->lock, flags);
	len = engram_wire_simple_encode(l->hb_buf, ENGRAM_WIRE_HDR_BYTES, &l->neg,
					ENGRAM_WIRE_HEARTBEAT, ticket);
	if (WARN_ON_ONCE(len < 0))
		return len;
	ib_dma_sync_single_for_device(l->dev->ibdev, l->hb_dma, len, DMA_TO_DEVICE);
	sge.addr = l->hb_dma;
	sge.length = len;
	sge.lkey = l->dev->pd->local_dma_lkey;
	wr.opcode = IB_WR_SEND;
	wr.send_flags = IB_SEND_SIGNALED;
	wr.wr_cqe = &l->hb_cqe;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return engram_post_send(l->qp, &wr, NULL) ? -EIO : 0;
}

/**
 * engram_link_submit() - put a fetch on the wire
 * @l: the link the fetch's table was opened on
 * @f: the fetch, its pieces and rows filled in
 *
 * Takes the link's reference on @f on success.  Process context.
 *
 * Return: 0; -ENOTCONN while the link is down (at once, without waiting
 * for a reconnect); -E2BIG above the negotiated rows or ranges, or for a
 * piece larger than one registration; -EBUSY when max_inflight fetches
 * are out; -ENOMEM; -EIO when posting failed (the connection is broken).
 */
int engram_link_submit(struct engram_link *l, struct engram_fetch *f)
{
	unsigned long flags;
	unsigned int i;
	int ret, slot = -1;

	down_read(&l->conn_sem);
	spin_lock_irqsave(&l->lock, flags);
	if (!l->live || l->state != ENGRAM_LINK_UP) {
		ret = -ENOTCONN;
	} else if (f->nr_rows > l->neg.max_rows || f->nr_pieces > l->neg.max_ranges) {
		ret = -E2BIG;
	} else {
		ret = -EBUSY;
		for (i = 0; i < l->nr_slots; i++) {
			if (!l->slots[i].busy) {
				l->slots[i].busy = true;
				slot = i;
				ret = 0;
				break;
			}
		}
	}
	if (!ret) {
		f->ticket = ++l->next_ticket;
		f->conn_gen = l->conn_gen;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	if (!ret) {
		f->slot = slot;
		ret = l->ops->submit(l, f);
		if (ret) {
			spin_lock_irqsave(&l->lock, flags);
			l->slots[slot].busy = false;
			f->slot = -1;
			spin_unlock_irqrestore(&l->lock, flags);
		}
	}
	up_read(&l->conn_sem);
	return ret;
}

/*
 * @f is past its deadline (or its fd is closing): end it now.  A fetch
 * still waiting for its server is marked timed out and its connection
 * broken, unless a reconnect replaced that connection meanwhile (whose
 * teardown ended @f already).  One whose answer is in, with only its keys
 * left to invalidate, gets a moment for that first; so does one whose
 * invalidation failed, for the teardown its failure asked for.  Returns
 * when @f is done: after that nothing of it can land any more.
 */
static void engram_link_break_fetch(struct engram_fetch *f)
{
	struct engram_link *l = f->link;
	unsigned long flags;
	bool late;

	spin_lock_irqsave(&l->lock, flags);
	late = engram_link_expire_locked(l, f);
	spin_unlock_irqrestore(&l->lock, flags);
	if (!late)
		wait_event_timeout(*f->wq, engram_fetch_done(f),
				   msecs_to_jiffies(ENGRAM_LINK_INV_GRACE_MS));
	mutex_lock(&l->mutex);
	if (!engram_fetch_done(f) && l->live && l->conn_gen == f->conn_gen)
		engram_link_down_locked(l, -ETIMEDOUT);
	mutex_unlock(&l->mutex);
	/* The break finished every fetch of that connection, this one included. */
	wait_event(*f->wq, engram_fetch_done(f));
}

/**
 * engram_link_fetch_wait() - wait for a submitted fetch to end
 * @f: the fetch
 * @timeout_ns: how long to wait at most; 0 waits until the fetch's deadline
 * @busy: poll instead of sleeping
 *
 * When the fetch's deadline passes first, the connection is broken (queue
 * pair drained and destroyed) before this returns, so no late WRITE can land
 * in the destination, and the fetch fails with -ETIMEDOUT.  Process context.
 *
 * Return: 0 when the fetch has ended (its own result is in @f), -EAGAIN when
 * @timeout_ns passed first, -EINTR on a signal (the fetch goes on).
 */
int engram_link_fetch_wait(struct engram_fetch *f, u64 timeout_ns, bool busy)
{
	ktime_t until = f->deadline;
	bool own_deadline = true;
	long left;

	timeout_ns = min_t(u64, timeout_ns, ENGRAM_FETCH_MAX_TIMEOUT_NS);
	if (timeout_ns && ktime_before(ktime_add_ns(ktime_get(), timeout_ns), until)) {
		until = ktime_add_ns(ktime_get(), timeout_ns);
		own_deadline = false;
	}
	while (!engram_fetch_done(f)) {
		ktime_t now = ktime_get();

		if (!ktime_before(now, until))
			break;
		if (busy) {
			if (signal_pending(current))
				return -EINTR;
			cond_resched();
			continue;
		}
		left = nsecs_to_jiffies(ktime_to_ns(ktime_sub(until, now))) + 1;
		left = wait_event_interruptible_timeout(*f->wq, engram_fetch_done(f), left);
		if (left < 0)
			return -EINTR;
	}
	if (engram_fetch_done(f))
		return 0;
	if (!own_deadline)
		return -EAGAIN;
	engram_link_break_fetch(f);
	return 0;
}

/**
 * engram_link_fetch_end() - make sure a fetch is over, without signals
 * @f: a submitted fetch
 *
 * For a closing fd or a dying process: waits (uninterruptibly) until the
 * fetch ends or its deadline passes, and then breaks the connection, so the
 * buffer may be unpinned safely afterwards.  Process context.
 */
void engram_link_fetch_end(struct engram_fetch *f)
{
	s64 left = ktime_to_ns(ktime_sub(f->deadline, ktime_get()));

	/* A dying process is not kept in D state for a long deadline. */
	left = min_t(s64, left, ENGRAM_LINK_CLOSE_WAIT_MS * NSEC_PER_MSEC);
	if (left > 0)
		wait_event_timeout(*f->wq, engram_fetch_done(f), nsecs_to_jiffies(left) + 1);
	if (engram_fetch_done(f))
		return;
	engram_link_break_fetch(f);
}

/**
 * engram_link_mr_pages() - pages one registration of this link covers
 * @l: the link
 *
 * Return: the limit of the current RDMA connection; no limit (U32_MAX)
 * over TCP, which registers nothing, and while down, so that a fetch then
 * fails on submit with -ENOTCONN rather than for its size.
 */
u32 engram_link_mr_pages(const struct engram_link *l)
{
	u32 n = READ_ONCE(l->mr_pages);

	return n ? n : U32_MAX;
}

/* --- tables --- */

static bool engram_link_entry_match(const struct engram_wire_table *e, u32 flags,
				    const char *name, const u8 *sha256)
{
	if ((flags & ENGRAM_OPEN_BY_NAME) && strcmp(e->name, name))
		return false;
	if ((flags & ENGRAM_OPEN_BY_SHA256) && memcmp(e->sha256, sha256, ENGRAM_SHA256_LEN))
		return false;
	return true;
}

static int engram_link_find_locked(struct engram_link *l, u32 flags, const char *name,
				   const u8 *sha256, struct engram_wire_table *out)
{
	int ret = -ENOENT;
	u32 i;

	for (i = 0; i < l->nr_catalog; i++) {
		const struct engram_wire_table *e = &l->catalog[i];

		if (!engram_link_entry_match(e, flags, name, sha256))
			continue;
		if (e->state != ENGRAM_TABLE_READY && e->state != ENGRAM_TABLE_VERIFYING) {
			ret = -EAGAIN;
			continue;
		}
		*out = *e;
		return 0;
	}
	return ret;
}

/**
 * engram_link_open_table() - find a table in a link's catalog
 * @link_id: a link id, or 0 for the first link that is up and has it
 * @flags: ENGRAM_OPEN_BY_NAME and/or ENGRAM_OPEN_BY_SHA256
 * @name: with BY_NAME
 * @sha256: with BY_SHA256
 * @out: the catalog entry
 * @max_rows: the link's negotiated rows per request
 *
 * Return: the link, held, or ERR_PTR: -ENODEV (no such link), -ENOTCONN
 * (the link named is not up), -ENOENT (no such table), -EAGAIN (the table
 * exists but is not ready).
 */
struct engram_link *engram_link_open_table(u32 link_id, u32 flags, const char *name,
					   const u8 *sha256, struct engram_wire_table *out,
					   u32 *max_rows)
{
	struct engram_link *l, *found = NULL;
	int ret = link_id ? -ENODEV : -ENOENT;
	bool any_up = false;
	unsigned long irq;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node) {
		int r;

		if ((link_id && l->id != link_id) || l->removing)
			continue;
		spin_lock_irqsave(&l->lock, irq);
		if (l->state != ENGRAM_LINK_UP) {
			r = -ENOTCONN;
		} else {
			r = engram_link_find_locked(l, flags, name, sha256, out);
			*max_rows = l->neg.max_rows;
		}
		spin_unlock_irqrestore(&l->lock, irq);
		if (!r) {
			found = l;
			engram_link_get(l);
			break;
		}
		if (r != -ENOTCONN)
			any_up = true;
		/* Report the most useful reason: a table not ready beats none. */
		if (link_id || r == -EAGAIN || (ret == -ENOENT && r != -ENOTCONN))
			ret = r;
		if (link_id)
			break;
	}
	mutex_unlock(&engram_links_mutex);
	if (!found && !link_id && !any_up)
		ret = -ENOTCONN;	/* no link up: the table may well exist */
	return found ? found : ERR_PTR(ret);
}

/* --- administration --- */

static const struct engram_link_ops engram_rdma_link_ops = {
	.connect = engram_link_rdma_connect,
	.teardown = engram_link_rdma_teardown,
	.submit = engram_link_rdma_submit,
	.heartbeat = engram_link_rdma_heartbeat,
};

/* A link's transport by its URL's; the TCP one registers itself. */
static const struct engram_link_ops *engram_link_transports[] = {
	[ENGRAM_TRANSPORT_RDMA] = &engram_rdma_link_ops,
	[ENGRAM_TRANSPORT_TCP] = NULL,
};

/**
 * engram_link_transport_set() - offer a transport to new links, or stop
 * @t: the URL scheme's transport
 * @ops: its operations, or NULL once no link uses them any more
 */
void engram_link_transport_set(enum engram_transport t, const struct engram_link_ops *ops)
{
	if (!WARN_ON_ONCE(t >= ARRAY_SIZE(engram_link_transports)))
		WRITE_ONCE(engram_link_transports[t], ops);
}

static struct engram_link *engram_link_alloc(const struct engram_url *u,
					     const struct engram_link_ops *ops)
{
	struct engram_link *l;
	int id;

	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return NULL;
	l->catalog = kvcalloc(ENGRAM_MAX_TABLES, sizeof(*l->catalog), GFP_KERNEL);
	id = ida_alloc_min(&engram_link_ida, 1, GFP_KERNEL);
	if (!l->catalog || id < 0) {
		if (id >= 0)
			ida_free(&engram_link_ida, id);
		kvfree(l->catalog);
		kfree(l);
		return NULL;
	}
	l->id = id;
	kref_init(&l->ref);
	l->url = *u;
	mutex_init(&l->mutex);
	init_rwsem(&l->conn_sem);
	spin_lock_init(&l->lock);
	init_completion(&l->cm_done);
	INIT_LIST_HEAD(&l->early);
	mutex_init(&l->tx_mutex);
	l->ops = ops;
	l->reg_cqe.done = engram_link_reg_done;
	l->slot_reg_cqe.done = engram_link_slot_reg_done;
	init_completion(&l->slot_reg_done);
	l->hb_cqe.done = engram_link_hb_send_done;
	xa_init_flags(&l->fetches, XA_FLAGS_LOCK_IRQ);
	INIT_DELAYED_WORK(&l->connect_work, engram_link_connect_work);
	INIT_DELAYED_WORK(&l->hb_work, engram_link_hb_work);
	INIT_WORK(&l->down_work, engram_link_down_work);
	INIT_DELAYED_WORK(&l->deadline_work, engram_link_deadline_work);
	if (l->ops->init)
		l->ops->init(l);
	l->state = ENGRAM_LINK_CONNECTING;
	l->since = ktime_get();
	return l;
}

/**
 * engram_link_add() - add a link and start connecting it
 * @u: a parsed remote URL
 * @id: set to the new link's id
 * @extack: where to say why it is refused
 *
 * Return: 0, -EEXIST for a URL already linked, -EINVAL for a URL that is
 * not a remote one, -ENOSPC past ENGRAM_URL_MAX links, -ENOMEM.
 */
int engram_link_add(const struct engram_url *u, u32 *id, struct netlink_ext_ack *extack)
{
	const struct engram_link_ops *ops = NULL;
	struct engram_link *l, *o;
	unsigned int n = 0;

	if (u->transport < ARRAY_SIZE(engram_link_transports))
		ops = READ_ONCE(engram_link_transports[u->transport]);
	if (u->role != ENGRAM_URL_REMOTE || !ops) {
		NL_SET_ERR_MSG_MOD(extack, "not a remote rdma:// or tcp:// URL");
		return -EINVAL;
	}
	l = engram_link_alloc(u, ops);
	if (!l)
		return -ENOMEM;
	mutex_lock(&engram_links_mutex);
	list_for_each_entry(o, &engram_links, node) {
		n++;
		if (engram_url_equal(&o->url, u)) {
			mutex_unlock(&engram_links_mutex);
			engram_link_put(l);
			NL_SET_ERR_MSG_MOD(extack, "that link exists already");
			return -EEXIST;
		}
	}
	if (n >= ENGRAM_URL_MAX) {
		mutex_unlock(&engram_links_mutex);
		engram_link_put(l);
		NL_SET_ERR_MSG_MOD(extack, "too many links (16)");
		return -ENOSPC;
	}
	list_add_tail(&l->node, &engram_links);
	*id = l->id;
	queue_delayed_work(engram_link_wq, &l->connect_work, 0);
	queue_delayed_work(engram_link_wq, &l->hb_work, 0);
	mutex_unlock(&engram_links_mutex);
	pr_info("link %u: %s added\n", l->id, u->text);
	return 0;
}

/* Stop a link for good: no reconnect, connection gone, off the list. */
static void engram_link_stop(struct engram_link *l)
{
	mutex_lock(&l->mutex);
	l->deleted = true;
	mutex_unlock(&l->mutex);
	cancel_delayed_work_sync(&l->connect_work);
	cancel_delayed_work_sync(&l->hb_work);
	cancel_work_sync(&l->down_work);
	mutex_lock(&l->mutex);
	engram_link_teardown(l, -ESHUTDOWN);
	engram_link_set_state(l, ENGRAM_LINK_DOWN, -ESHUTDOWN);
	mutex_unlock(&l->mutex);
	/* A CQ callback may have queued it again during the teardown. */
	cancel_delayed_work_sync(&l->deadline_work);
	cancel_work_sync(&l->down_work);
}

/**
 * engram_link_del() - remove a link
 * @id: its id
 * @extack: where to say why it is refused
 *
 * Fetches in flight on it fail with -ESHUTDOWN; tables opened on it stay
 * open but every fetch on them fails with -ENOTCONN.
 *
 * Return: 0 or -ENOENT.
 */
int engram_link_del(u32 id, struct netlink_ext_ack *extack)
{
	struct engram_link *l, *found = NULL;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node) {
		if (l->id == id && !l->removing) {
			found = l;
			l->removing = true;
			break;
		}
	}
	mutex_unlock(&engram_links_mutex);
	if (!found) {
		NL_SET_ERR_MSG_MOD(extack, "no link with that id");
		return -ENOENT;
	}
	/*
	 * Stopped while still listed, so a device removal meanwhile still
	 * finds (and waits for) its connection.
	 */
	engram_link_stop(found);
	mutex_lock(&engram_links_mutex);
	list_del(&found->node);
	mutex_unlock(&engram_links_mutex);
	pr_info("link %u: %s deleted\n", found->id, found->url.text);
	engram_link_put(found);
	return 0;
}

static void engram_link_snapshot(struct engram_link *l, struct engram_link_info *info)
{
	unsigned long flags;

	memset(info, 0, sizeof(*info));
	info->id = l->id;
	strscpy(info->url, l->url.text, sizeof(info->url));
	engram_counters_snapshot(&l->stats, info->stats);
	engram_hist_snapshot(&l->lat, info->lat);
	spin_lock_irqsave(&l->lock, flags);
	info->state = l->state;
	info->error = l->error;
	info->tables = l->nr_catalog;
	if (l->live) {
		info->max_rows = l->neg.max_rows;
		info->max_inflight = l->neg.max_inflight;
	}
	info->connects = l->connects;
	info->reconnects = info->stats[ENGRAM_STAT_RECONNECTS];
	info->transport = l->url.transport;
	info->have_heartbeat = l->have_hb_rtt;
	info->heartbeat_us = l->hb_rtt_us;
	info->since_ns = ktime_to_ns(ktime_sub(ktime_get(), l->since));
	if (l->live && l->dev)
		strscpy(info->device, dev_name(&l->dev->ibdev->dev), sizeof(info->device));
	spin_unlock_irqrestore(&l->lock, flags);
}

/**
 * engram_link_info_nth() - snapshot the n-th link
 * @n: position, from 0
 * @info: filled on success
 *
 * Return: 0 or -ENOENT past the last link.
 */
int engram_link_info_nth(unsigned long n, struct engram_link_info *info)
{
	struct engram_link *l;
	int ret = -ENOENT;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node) {
		if (n--)
			continue;
		engram_link_snapshot(l, info);
		ret = 0;
		break;
	}
	mutex_unlock(&engram_links_mutex);
	return ret;
}

/**
 * engram_link_info_by_id() - snapshot one link
 * @id: link id
 * @info: filled on success
 *
 * Return: 0 or -ENOENT.
 */
int engram_link_info_by_id(u32 id, struct engram_link_info *info)
{
	struct engram_link *l;
	int ret = -ENOENT;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node) {
		if (l->id != id)
			continue;
		engram_link_snapshot(l, info);
		ret = 0;
		break;
	}
	mutex_unlock(&engram_links_mutex);
	return ret;
}

/**
 * engram_links_remove_device() - tear down every link on a departing device
 * @ibdev: the device
 *
 * Synchronous; the links reconnect later, on whatever device then carries
 * their addresses.
 */
void engram_links_remove_device(struct ib_device *ibdev)
{
	struct engram_link *l;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node) {
		/* A TCP link has no device; do not wait for its connect. */
		if (l->url.transport != ENGRAM_TRANSPORT_RDMA)
			continue;
		mutex_lock(&l->mutex);
		if (l->dev && l->dev->ibdev == ibdev) {
			engram_link_teardown(l, -ENODEV);
			engram_link_set_state(l, ENGRAM_LINK_DOWN, -ENODEV);
			engram_link_schedule_connect(l);
		}
		mutex_unlock(&l->mutex);
	}
	mutex_unlock(&engram_links_mutex);
}

/**
 * engram_links_init() - start the links of remote=
 *
 * Return: 0 or a negative errno (no memory).
 */
int engram_links_init(void)
{
	unsigned int i;
	u32 id;
	int ret;

	engram_link_wq = alloc_workqueue("engram_link", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!engram_link_wq)
		return -ENOMEM;
	for (i = 0; i < engram_config.n_remote; i++) {
		ret = engram_link_add(&engram_config.remote[i], &id, NULL);
		if (ret) {
			pr_err("remote=%s: cannot add link (%d)\n",
			       engram_config.remote[i].text, ret);
			engram_links_exit();
			return ret;
		}
	}
	return 0;
}

/**
 * engram_links_exit() - stop every link
 *
 * The character device is gone, so no fetch can start; fetches still in
 * flight fail with -ESHUTDOWN.
 */
void engram_links_exit(void)
{
	struct engram_link *l;

	WRITE_ONCE(engram_links_exiting, true);
	for (;;) {
		mutex_lock(&engram_links_mutex);
		l = list_first_entry_or_null(&engram_links, struct engram_link, node);
		mutex_unlock(&engram_links_mutex);
		if (!l)
			break;
		/* Netlink is gone, so nothing else removes links now. */
		engram_link_stop(l);
		mutex_lock(&engram_links_mutex);
		list_del(&l->node);
		mutex_unlock(&engram_links_mutex);
		engram_link_put(l);
	}
	destroy_workqueue(engram_link_wq);
	engram_link_wq = NULL;
}
