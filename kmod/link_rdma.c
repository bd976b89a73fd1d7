// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA transport of client links: one or more RC connections (queues)
 * to one server each.  A link connects in its connect worker (for each
 * queue: resolve address, route, create the queue pair, connect with our
 * hello in the private data), and then carries fetches, each on the queue
 * of its request slot, the submitting CPU's when it has a free one.  Each
 * fetch registers its destination with fast registration (one MR per
 * piece, a fresh key each time), sends one REQUEST, and on the RESPONSE
 * invalidates its MRs before it completes, so the server can never write
 * into the buffer once the fetch is over.  From protocol version 2 the
 * server's RESPONSE invalidates the first MR itself (SEND with
 * invalidate), so a fetch of one piece completes on its RESPONSE without
 * a local invalidation to wait for.
 * Teardown disconnects, drains, and destroys every QP and its MRs before
 * any fetch of the connection is let go; one queue failing breaks them
 * all.  Catalogs and heartbeats need no more than one queue: catalogs are
 * read from queue 0 only, heartbeats go round the queues, so that the
 * server's idle timeout spares each and each is probed.  The generic link
 * (link.c) owns the state, catalog, tickets, heartbeat, deadlines and
 * reconnects.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/jiffies.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/mr_pool.h>
#include <rdma/rdma_cm.h>

#include "cost.h"
#include "inject.h"
#include "kept.h"
#include "link.h"

/* Receives: one per ticket, plus room for unsolicited catalogs and heartbeat echoes. */
#define ENGRAM_LINK_EXTRA_RECVS		4
/*
 * The receives of RESPONSEs go back to the device this many in one post:
 * a post per fetch for the REQUEST alone, and one in eight for them.  As
 * many receives as a batch may hold back (one fewer) are added to the
 * queue's, so that as many as before are always posted.
 */
#define ENGRAM_LINK_RECV_BATCH		8
#define ENGRAM_LINK_NR_RECVS		(ENGRAM_WIRE_OFFER_INFLIGHT + ENGRAM_LINK_EXTRA_RECVS + \
					 ENGRAM_LINK_RECV_BATCH - 1)
/* Pages one MR maps at most, whatever the device allows. */
#define ENGRAM_LINK_MR_PAGES		512
/*
 * A kept-keys fetch's SEND is unsignaled but for one in this many on a
 * queue, whose completion frees the send-queue slots of those before it.
 */
#define ENGRAM_LINK_SIGNAL_EVERY	16
/* Further queues are begun for this long after queue 0 connected. */
#define ENGRAM_LINK_MORE_MS		(2 * ENGRAM_LINK_CM_TIMEOUT_MS)
/*
 * A receive takes any frame a server may send, up to a whole catalog
 * (ENGRAM_WIRE_MAX_CATALOG_BYTES).  Not one kmalloc: that is an order-4
 * allocation (64 KiB) per receive, 27 per queue, which a fragmented node
 * may not give a reconnect.  Chunks of pages instead, of order 0 where the
 * device has a receive SGE for each, each mapped for the device, and all
 * vmap()ed into the one buffer the codec reads.
 */
#define ENGRAM_LINK_RECV_PAGES		DIV_ROUND_UP(ENGRAM_WIRE_MAX_CATALOG_BYTES, PAGE_SIZE)

struct engram_link_rdma_q;

struct engram_link_rdma_recv {
	struct ib_cqe cqe;
	/* Its WR and SGEs, set once its chunks are mapped: a repost only chains it. */
	struct ib_recv_wr wr;
	struct ib_sge sge[ENGRAM_LINK_RECV_PAGES];
	struct list_head early;		/* on engram_link_rdma.early */
	u32 early_len;
	bool inv;			/* the SEND that filled it invalidated inv_rkey */
	u32 inv_rkey;
	struct engram_link *link;
	struct engram_link_rdma_q *q;
	void *buf;			/* vmap() of the chunks */
	u32 synced;			/* bytes of the last frame synced for the CPU */
	struct page *chunk[ENGRAM_LINK_RECV_PAGES];
	u64 dma[ENGRAM_LINK_RECV_PAGES];
};

/*
 * A request slot's buffer: vmalloc'ed pages, each DMA-mapped, registered
 * once into a local-only MR (see engram_link_rdma_alloc_slot()).  Slot i
 * is the generic link's slot i, and belongs to queue i / l->q_slots.
 */
struct engram_link_rdma_slot {
	struct engram_link_rdma_q *q;
	void *buf;
	dma_addr_t *dma;		/* per page */
	unsigned int nr_mapped;
	struct ib_mr *mr;
	/*
	 * mr_pages entries, for mapping the fetch that holds the slot: 16 KiB
	 * allocated (and, with init_on_alloc, cleared) per fetch showed in
	 * the profile of a 1-row fetch.
	 */
	struct scatterlist *sgl;
};

/*
 * One queue of a link: an RC connection of its own, with its own PD (so
 * its keys work on no other QP), CQ, MR pool and receives.
 */
struct engram_link_rdma_q {
	struct engram_link *link;
	unsigned int idx;
	struct ib_cqe reg_cqe;		/* failures of REG_MR WRs */
	struct ib_cqe send_cqe;		/* kept-keys fetches' SENDs: every 16th, and failures */
	atomic_t sends;			/* kept-keys SENDs posted, for the 16th */
	struct ib_cqe slot_reg_cqe;	/* the request slots' registration */
	struct completion slot_reg_done;
	enum ib_wc_status slot_reg_status;
	struct ib_cqe hb_cqe;		/* the heartbeat SEND */
	bool hb_busy;			/* the heartbeat SEND has not completed (link.lock) */
	bool hb_out;			/* hb_ticket is unanswered (link.lock) */
	u64 hb_ticket;			/* of the last heartbeat sent here (link.lock) */
	void *hb_buf;
	u64 hb_dma;
	struct rdma_cm_id *cm_id;
	struct completion cm_done;
	int cm_error;
	u8 rep[ENGRAM_WIRE_HELLO_BYTES];
	struct engram_dev *dev;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct list_head mrs;
	struct engram_link_rdma_recv *recvs;
	unsigned int nr_recvs;
	/* RESPONSEs' receives held back for the next batch (link.lock) */
	struct engram_link_rdma_recv *held[ENGRAM_LINK_RECV_BATCH];
	unsigned int nr_held;
	unsigned int recv_order;	/* of each chunk of a receive */
	unsigned int recv_chunks;	/* chunks (SGEs) of a receive */
	/*
	 * Being closed by the connect worker, which found it unfit (link.lock):
	 * its disconnect is not a break of the link.
	 */
	bool dropping;
	/*
	 * A poll queue (link_poll_queues): its CQ is IB_POLL_DIRECT, reaped
	 * by the busy-polling callers of its fetches, by reap_work while
	 * something else is out on it, and by teardown's drain.
	 */
	bool polled;
	struct delayed_work reap_work;
	struct engram_kept_conn kept;	/* buffers registered once here (kept.c) */
};

/*
 * A link over RDMA: the generic link, and the connection's parts, set up
 * and torn down under link.mutex.
 */
struct engram_link_rdma {
	struct engram_link link;
	struct engram_link_rdma_q q[ENGRAM_LINK_MAX_QUEUES];
	unsigned int nr_q;		/* queues set up, q[0] first */
	struct engram_link_rdma_slot *slots;
	unsigned int nr_slots;
	/*
	 * Frames that arrived before the connect worker read the server's
	 * hello, and after, while it reads them (early_draining; link.lock).
	 */
	struct list_head early;
	bool early_draining;
	/*
	 * The connect worker is setting the queues up (link.lock): queues
	 * after the first repost what they hear, and a break of any queue
	 * is kept in broken_early until the link is live, when it counts.
	 */
	bool connecting;
	bool broken_early;
};

/*
 * link_queues: 0 lets each link open one queue per CPU, as many as the
 * device has completion vectors and at most ENGRAM_LINK_AUTO_QUEUES, as
 * nvme-rdma sizes its I/O queues.  1 by default: each queue is a
 * connection the server counts against rdma_max_conns_per_peer.
 */
#define ENGRAM_LINK_AUTO_QUEUES		4

static struct engram_uint_param engram_link_queues = {
	.val = 1, .min = 1, .max = ENGRAM_LINK_MAX_QUEUES, .zero_ok = true,
};

module_param_cb(link_queues, &engram_uint_param_ops, &engram_link_queues, 0644);
MODULE_PARM_DESC(link_queues,
		 "RDMA links: queue pairs per link, a fetch on its CPU's (0: one per CPU, up to the device's completion vectors and 4; or 1-8; default 1)");

/*
 * link_poll_queues: queue pairs beyond link_queues whose completion queues
 * raise no interrupt: a fetch whose caller busy-polls (ENGRAM_IOC_FETCH
 * with ENGRAM_FETCH_BUSY_POLL) goes on one and its caller reaps its
 * completions itself, as nvme-rdma's poll queues, with no interrupt, no
 * softirq and no wake-up.  0 by default: each is one more connection the
 * server counts against rdma_max_conns_per_peer.
 */
static struct engram_uint_param engram_link_poll_queues = {
	.val = 0, .min = 0, .max = ENGRAM_LINK_MAX_QUEUES - 1, .zero_ok = true,
};

module_param_cb(link_poll_queues, &engram_uint_param_ops, &engram_link_poll_queues, 0644);
MODULE_PARM_DESC(link_poll_queues,
		 "RDMA links: poll queues per link beyond link_queues, for fetches whose caller busy-polls (0-7, default 0)");

/* Completions a poller reaps at a time: the rest wait for its next turn. */
#define ENGRAM_LINK_POLL_BUDGET		16

static struct engram_link_rdma *engram_link_rdma_of(struct engram_link *l)
{
	return container_of(l, struct engram_link_rdma, link);
}

/* The queue of a fetch's request slot. */
static struct engram_link_rdma_q *engram_link_rdma_fq(struct engram_link *l,
						      const struct engram_fetch *f)
{
	return engram_link_rdma_of(l)->slots[f->slot].q;
}

/*
 * Break the connection.  engram_link_fail() ignores a link that is not
 * live, and a queue set up early can break while the worker is still
 * setting up the others: that is remembered, and the worker breaks the
 * link as soon as it is live.  Not under l->lock.
 */
static void engram_link_rdma_break(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	if (!l->live && rl->connecting)
		rl->broken_early = true;
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_fail(l, -ECONNRESET);
}

static void engram_link_rdma_fail_wc(struct engram_link *l, struct ib_wc *wc, const char *what)
{
	if (wc->status == IB_WC_WR_FLUSH_ERR)
		return;
	engram_count(&engram_global_stats, ENGRAM_STAT_TRANSPORT_ERRORS);
	pr_warn_ratelimited("link %u: %s failed: %s (%d)\n", l->id, what,
			    ib_wc_status_msg(wc->status), wc->status);
	engram_link_rdma_break(l);
}

/* REG_MRs are unsignaled and report only failures, on the link's cqe. */
static void engram_link_rdma_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link_rdma_q *q = container_of(wc->wr_cqe, struct engram_link_rdma_q, reg_cqe);

	engram_cost_client_cqe();
	if (wc->status != IB_WC_SUCCESS)
		engram_link_rdma_fail_wc(q->link, wc, "memory registration");
}

/*
 * A kept-keys fetch's SEND: the fetch ends on its RESPONSE alone (the
 * server had the request, so the device is done with the slot's bytes,
 * and there is no key of the fetch's own to let go), so the SEND is not
 * the fetch's: only every ENGRAM_LINK_SIGNAL_EVERY-th completes here to
 * free the send queue, and a failure breaks the connection, whose
 * teardown ends the fetch that got no answer.
 */
static void engram_link_rdma_kept_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link_rdma_q *q = container_of(wc->wr_cqe, struct engram_link_rdma_q,
						    send_cqe);

	engram_cost_client_cqe();
	if (wc->status != IB_WC_SUCCESS)
		engram_link_rdma_fail_wc(q->link, wc, "request send");
}

/*
 * A WR of a fetch did not complete successfully: the fetch is left to
 * teardown, and the connection is broken even for a flush (which
 * engram_link_rdma_fail_wc() passes over) so that teardown comes: a queue pair
 * that went to error without a failed WR of ours, as a fatal device error
 * leaves it, would otherwise only be noticed by the heartbeat.  During a
 * teardown's drain the break is a no-op.
 */
static void engram_link_rdma_fetch_wc_failed(struct engram_link *l, struct engram_fetch *f,
					     struct ib_wc *wc, const char *what)
{
	unsigned long flags;

	engram_link_lock_fetch(l, flags);
	engram_link_wire_broken_locked(l, f, -ECONNRESET);
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_rdma_fail_wc(l, wc, what);
	engram_link_rdma_break(l);
}

/*
 * One WR of @f completed (the SEND or a LOCAL_INV): the last one ends it,
 * unless one of them broke its wire.
 */
static void engram_link_rdma_wire_put(struct engram_link *l, struct engram_fetch *f)
{
	if (atomic_dec_and_test(&f->wire_refs))
		engram_link_complete(l, f);
}

static void engram_link_rdma_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_fetch *f = container_of(wc->wr_cqe, struct engram_fetch, send_cqe);
	struct engram_link *l = f->link;

	engram_cost_client_cqe();
	if (wc->status != IB_WC_SUCCESS)
		engram_link_rdma_fetch_wc_failed(l, f, wc, "request send");
	engram_link_rdma_wire_put(l, f);
}

static void engram_link_rdma_hb_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link_rdma_q *q = container_of(wc->wr_cqe, struct engram_link_rdma_q, hb_cqe);
	struct engram_link *l = q->link;
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	q->hb_busy = false;
	spin_unlock_irqrestore(&l->lock, flags);
	if (wc->status == IB_WC_SUCCESS)
		return;
	engram_link_rdma_fail_wc(l, wc, "heartbeat send");
	/*
	 * Flushed too: its queue pair is in error, and while the other
	 * queues are heard the heartbeat's timeout would never notice it.
	 */
	engram_link_rdma_break(l);
}

static void engram_link_rdma_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_fetch *f = container_of(wc->wr_cqe, struct engram_fetch, inv_cqe);
	struct engram_link *l = f->link;

	engram_cost_client_cqe();
	if (wc->status != IB_WC_SUCCESS)
		engram_link_rdma_fetch_wc_failed(l, f, wc, "invalidation");
	engram_link_rdma_wire_put(l, f);
}

/*
 * Invalidate the MRs of a fetch from piece @first on (those before were
 * invalidated by the RESPONSE).  Every WR is signaled and holds one
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
static int engram_link_rdma_invalidate(struct engram_link *l, struct engram_fetch *f,
				       unsigned int first)
{
	struct engram_link_rdma_q *q = engram_link_rdma_fq(l, f);
	struct ib_send_wr *wrs = f->inv_wrs;
	unsigned int i, n = f->nr_pieces - first;
	int ret;

	lockdep_assert_held(&l->lock);
	memset(wrs, 0, sizeof(wrs[0]) * n);
	for (i = 0; i < n; i++) {
		wrs[i].opcode = IB_WR_LOCAL_INV;
		wrs[i].ex.invalidate_rkey = f->pieces[first + i].mr->rkey;
		wrs[i].wr_cqe = &f->inv_cqe;
		wrs[i].send_flags = IB_SEND_SIGNALED;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
	}
	engram_cost_post_send(false, wrs);
	ret = engram_fault_client_inv_fail() ? -EIO : engram_post_send(q->qp, wrs, NULL);
	if (ret)
		engram_link_wire_broken_locked(l, f, -ECONNRESET);
	return ret;
}

/*
 * fault_client_inv_flush: break the queue pair as a fatal NIC error would,
 * so the invalidations posted next complete flushed.  Outside l->lock, in
 * the receive completion's softirq: rxe's modify_qp does not sleep.
 */
static void engram_link_rdma_fault_qp_error(struct engram_link *l, struct engram_link_rdma_q *q)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	int ret;

	ret = ib_modify_qp(q->qp, &attr, IB_QP_STATE);
	pr_warn_ratelimited("link %u: fault injected: queue pair moved to the error state (%d)\n",
			    l->id, ret);
}

static int engram_link_rdma_post_recv(struct engram_link_rdma_recv *r);
static int engram_link_rdma_recv_back_locked(struct engram_link_rdma_recv *r);

/*
 * The RESPONSE to @f came.  If its SEND invalidated the fetch's first key
 * (version 2), the device did so before it completed the receive: that
 * MR needs no LOCAL_INV, and a fetch of one piece is over once its
 * request SEND has completed too.  Any other key, or none, and every MR
 * is invalidated here, as in version 1: a server cannot make a fetch end
 * early by invalidating the wrong key.  A kept-keys fetch has nothing to
 * invalidate: the RESPONSE ends it.
 *
 * Entered with l->lock held (taken with @flags), the link live: the hold
 * in which the receive completion noted the link was heard does all the
 * RESPONSE asks of the link: decode it (the negotiated parameters hold
 * while the link is live), claim the fetch, post its invalidations, give
 * the receive back (the frame is decoded, its buffer free) and finish the
 * fetch when this was its last WR.  Teardown takes the same lock to stop
 * the queues, so neither an invalidation nor the receive is posted after
 * the drain has begun.  Returns with the lock released.
 *
 * Return: 0, or an error after which the caller breaks the connection.
 */
static int engram_link_rdma_response(struct engram_link *l, struct engram_link_rdma_recv *r,
				     u32 len, unsigned long flags)
	__releases(&l->lock)
{
	bool bad_pos = false, put = false, fin = false, kept_inv = false;
	struct engram_fetch *f = NULL;
	struct engram_wire_resp resp;
	unsigned int first = 0;
	int inv = 0, ret = 0;
	u32 nr_rows = 0;
	char err[96];

	lockdep_assert_held(&l->lock);
	if (engram_wire_resp_decode(r->buf, len, &l->neg, false, &resp, err, sizeof(err))) {
		spin_unlock_irqrestore(&l->lock, flags);
		pr_warn_ratelimited("link %u: bad response: %s\n", l->id, err);
		return -EPROTO;
	}
	f = engram_link_claim_locked(l, &resp, r->q->idx, &bad_pos);
	if (f && f->kept) {
		/* A server that invalidated a kept key may have killed a window others use. */
		kept_inv = r->inv;
		if (kept_inv)
			engram_link_wire_broken_locked(l, f, -EPROTO);
		put = !kept_inv;
	} else if (f) {
		first = r->inv && r->inv_rkey == f->rkey0 ? 1 : 0;
		if (first < f->nr_pieces && engram_fault_client_inv_flush()) {
			/* Fault injection only: the QP's state changes outside l->lock. */
			spin_unlock_irqrestore(&l->lock, flags);
			engram_link_rdma_fault_qp_error(l, engram_link_rdma_fq(l, f));
			spin_lock_irqsave(&l->lock, flags);
		}
		/* Not live: teardown is draining and will end the fetch itself. */
		if (l->live && first < f->nr_pieces)
			inv = engram_link_rdma_invalidate(l, f, first);
		/* The first MR's wire_ref: its key died with the RESPONSE. */
		put = !inv && first;
	}
	if (f && !kept_inv && !inv && l->live && !r->q->dropping)
		ret = engram_link_rdma_recv_back_locked(r);
	if (f)
		nr_rows = f->nr_rows;
	if (put && atomic_dec_and_test(&f->wire_refs))
		fin = engram_link_complete_locked(l, f);
	spin_unlock_irqrestore(&l->lock, flags);

	engram_link_claim_report(l, &resp, !!f, nr_rows, bad_pos);
	if (fin)
		engram_link_publish(f);
	if (!f)
		return -EPROTO;
	if (kept_inv) {
		pr_warn_ratelimited("link %u: response invalidated a kept key\n", l->id);
		return -EPROTO;
	}
	if (first) {
		engram_count(&l->stats, ENGRAM_STAT_REMOTE_INVALIDATIONS);
		engram_count(&engram_global_stats, ENGRAM_STAT_REMOTE_INVALIDATIONS);
	}
	if (inv) {
		pr_warn_ratelimited("link %u: posting invalidations failed (%d)\n", l->id, inv);
		return inv;
	}
	return ret;
}

/*
 * Sync the first @len bytes of a receive, for the CPU or back for the
 * device: a 32-byte RESPONSE costs a sync of 32 bytes, not of a catalog.
 */
static void engram_link_rdma_recv_sync(struct engram_link_rdma_recv *r, u32 len, bool for_cpu)
{
	struct engram_link_rdma_q *q = r->q;
	u32 cb = PAGE_SIZE << q->recv_order, n;
	unsigned int c;

	for (c = 0; len && c < q->recv_chunks; c++, len -= n) {
		n = min(len, cb);
		if (for_cpu)
			ib_dma_sync_single_for_cpu(q->dev->ibdev, r->dma[c], n, DMA_FROM_DEVICE);
		else
			ib_dma_sync_single_for_device(q->dev->ibdev, r->dma[c], n,
						      DMA_FROM_DEVICE);
	}
}

/* The receive's WR, once its chunks are mapped: the same for every post. */
static void engram_link_rdma_recv_wr(struct engram_link_rdma_recv *r)
{
	struct engram_link_rdma_q *q = r->q;
	u32 left = ENGRAM_WIRE_MAX_CATALOG_BYTES;
	u32 cb = PAGE_SIZE << q->recv_order;
	unsigned int c;

	for (c = 0; c < q->recv_chunks; c++) {
		r->sge[c].addr = r->dma[c];
		r->sge[c].length = min(left, cb);
		r->sge[c].lkey = q->dev->pd->local_dma_lkey;
		left -= r->sge[c].length;
	}
	r->wr.wr_cqe = &r->cqe;
	r->wr.sg_list = r->sge;
	r->wr.num_sge = q->recv_chunks;
}

/* Hand a receive back to the device, to be chained after it (no post yet). */
static void engram_link_rdma_recv_ready(struct engram_link_rdma_recv *r)
{
	/* The CPU read no more than the last frame: nothing else is in its caches. */
	engram_link_rdma_recv_sync(r, r->synced, false);
	r->synced = 0;
	r->wr.next = NULL;
}

static int engram_link_rdma_post_recv(struct engram_link_rdma_recv *r)
{
	engram_link_rdma_recv_ready(r);
	engram_cost_post_recv(false);
	return engram_post_recv(r->q->qp, &r->wr, NULL);
}

/*
 * Give back the receive of a RESPONSE: held until ENGRAM_LINK_RECV_BATCH
 * are, then all posted in one chain.  Under l->lock, the link live and
 * the queue kept (the drain's marker must be the last receive posted);
 * a held receive is never posted once that ends, and goes with the queue.
 */
static int engram_link_rdma_recv_back_locked(struct engram_link_rdma_recv *r)
{
	struct engram_link_rdma_q *q = r->q;
	unsigned int i;

	lockdep_assert_held(&q->link->lock);
	engram_link_rdma_recv_ready(r);
	/* Its WR counts for the fetch it answered, the batch's post for the last. */
	engram_cost_inc(ENGRAM_STAT_CLIENT_WRS);
	q->held[q->nr_held++] = r;
	if (q->nr_held < ENGRAM_LINK_RECV_BATCH)
		return 0;
	for (i = 0; i + 1 < q->nr_held; i++)
		q->held[i]->wr.next = &q->held[i + 1]->wr;
	engram_cost_inc(ENGRAM_STAT_CLIENT_POSTS);
	q->nr_held = 0;
	return engram_post_recv(q->qp, &q->held[0]->wr, NULL);
}

/*
 * Give a receive back to its queue, unless teardown has begun: the drain's
 * marker must be the last receive posted on a queue, or one posted after
 * it would complete into buffers teardown has freed.
 */
static int engram_link_rdma_repost(struct engram_link *l, struct engram_link_rdma_recv *r)
{
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&l->lock, flags);
	if (l->live && !r->q->dropping)
		ret = engram_link_rdma_post_recv(r);
	spin_unlock_irqrestore(&l->lock, flags);
	return ret;
}

static void engram_link_rdma_frame(struct engram_link *l, struct engram_link_rdma_recv *r, u32 len);

static void engram_link_rdma_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link_rdma_recv *r = container_of(wc->wr_cqe, struct engram_link_rdma_recv,
						       cqe);
	struct engram_link *l = r->link;
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned long flags;
	bool resp;
	int ret;

	engram_cost_client_cqe();
	if (wc->status != IB_WC_SUCCESS) {
		engram_link_rdma_fail_wc(l, wc, "receive");
		return;
	}
	r->inv = wc->wc_flags & IB_WC_WITH_INVALIDATE;
	r->inv_rkey = wc->ex.invalidate_rkey;
	r->synced = min_t(u32, wc->byte_len, ENGRAM_WIRE_MAX_CATALOG_BYTES);
	engram_link_rdma_recv_sync(r, r->synced, true);
	resp = engram_wire_frame_type(r->buf, r->synced) == ENGRAM_WIRE_RESPONSE;
	/*
	 * The server may send its catalog as soon as it sees our RTU, which
	 * can be before the connect worker has read its hello: keep the
	 * frame for the worker.  While the worker reads the early frames,
	 * later ones queue behind them, or a newer catalog read here could
	 * be overwritten by an older one the worker reads afterwards.
	 */
	if (resp)
		engram_link_lock_fetch(l, flags);
	else
		spin_lock_irqsave(&l->lock, flags);
	/* Heard under the lock this takes anyway, not a lock of its own. */
	engram_link_heard_locked(l);
	if (r->q->idx && !l->live) {
		/*
		 * Before the link is live a further queue can only hear the
		 * server's catalog, which is read from queue 0 alone.  Not
		 * reposted once teardown has begun: ib_drain_qp() must be the
		 * last to post on the queue.
		 */
		ret = rl->connecting && !r->q->dropping ? engram_link_rdma_post_recv(r) : 0;
		spin_unlock_irqrestore(&l->lock, flags);
		if (ret)
			engram_link_rdma_break(l);
		return;
	}
	if (r->q->idx == 0 && (!l->live || rl->early_draining)) {
		r->early_len = wc->byte_len;
		list_add_tail(&r->early, &rl->early);
		spin_unlock_irqrestore(&l->lock, flags);
		return;
	}
	if (resp) {
		/* A fetch's answer: one hold of the lock from here to its end. */
		if (engram_link_rdma_response(l, r, wc->byte_len, flags))
			engram_link_rdma_break(l);
		return;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_rdma_frame(l, r, wc->byte_len);
}

/* A heartbeat came back: it must answer the one on the wire of its queue. */
static int engram_link_rdma_hb_echo(struct engram_link *l, struct engram_link_rdma_recv *r,
				    u32 len)
{
	struct engram_link_rdma_q *q = r->q;
	unsigned long flags;
	u64 ticket;
	bool ours;

	if (engram_link_hb_parse(l, r->buf, len, &ticket))
		return -EPROTO;
	spin_lock_irqsave(&l->lock, flags);
	ours = q->hb_out && ticket == q->hb_ticket;
	q->hb_out = false;
	spin_unlock_irqrestore(&l->lock, flags);
	if (!ours) {
		pr_warn_ratelimited("link %u: heartbeat echo with unknown ticket %llu on queue %u\n",
				    l->id, ticket, q->idx);
		return -EPROTO;
	}
	engram_link_hb_answered(l, ticket);
	return 0;
}

static void engram_link_rdma_frame(struct engram_link *l, struct engram_link_rdma_recv *r, u32 len)
{
	struct engram_wire_hdr_info hdr;
	unsigned long flags;
	char err[96];
	int ret;

	if (engram_wire_hdr_check(r->buf, len, &l->neg, false, false, &hdr,
				  err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad frame: %s\n", l->id, err);
		engram_link_rdma_break(l);
		return;
	}
	switch (hdr.type) {
	case ENGRAM_WIRE_RESPONSE:
		/*
		 * Only from the frames kept while the link came up (a live
		 * link's go straight to it from the receive completion).  It
		 * gives the receive back itself, under the lock it claims with.
		 */
		spin_lock_irqsave(&l->lock, flags);
		if (engram_link_rdma_response(l, r, len, flags))
			engram_link_rdma_break(l);
		return;
	case ENGRAM_WIRE_CATALOG:
		/* Every queue's connection sends it: one copy, in order. */
		ret = r->q->idx ? 0 : engram_link_frame_catalog(l, r->buf, len);
		break;
	case ENGRAM_WIRE_HEARTBEAT:
		ret = engram_link_rdma_hb_echo(l, r, len);
		break;
	default:	/* the header check lets no other type reach a client */
		ret = -EPROTO;
		break;
	}
	if (!ret)
		ret = engram_link_rdma_repost(l, r);
	if (ret)
		engram_link_rdma_break(l);
}

/* --- connection setup and teardown --- */

/* A queue's connection went away: a break, unless the worker is dropping it. */
static void engram_link_rdma_q_lost(struct engram_link_rdma_q *q)
{
	struct engram_link *l = q->link;
	unsigned long flags;
	bool dropping;

	spin_lock_irqsave(&l->lock, flags);
	dropping = q->dropping;
	spin_unlock_irqrestore(&l->lock, flags);
	if (!dropping)
		engram_link_rdma_break(l);
}

static int engram_link_rdma_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct engram_link_rdma_q *q = id->context;
	int error = 0;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		memset(q->rep, 0, sizeof(q->rep));
		if (ev->param.conn.private_data)
			memcpy(q->rep, ev->param.conn.private_data,
			       min_t(u32, ev->param.conn.private_data_len, sizeof(q->rep)));
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
		engram_link_rdma_q_lost(q);
		return 0;
	default:
		return 0;
	}
	q->cm_error = error;
	complete(&q->cm_done);
	return 0;
}

static int engram_link_rdma_cm_wait(struct engram_link_rdma_q *q)
{
	if (!wait_for_completion_timeout(&q->cm_done,
					 msecs_to_jiffies(ENGRAM_LINK_CM_TIMEOUT_MS)))
		return -ETIMEDOUT;
	reinit_completion(&q->cm_done);
	return q->cm_error;
}

static void engram_link_rdma_free_slots(struct engram_link_rdma *rl)
{
	unsigned int i;

	for (i = 0; rl->slots && i < rl->nr_slots; i++) {
		struct engram_link_rdma_slot *sl = &rl->slots[i];
		unsigned int p;

		/* After the QP: no work request names the MR any more. */
		if (sl->mr)
			ib_dereg_mr(sl->mr);
		for (p = 0; p < sl->nr_mapped; p++)
			ib_dma_unmap_page(sl->q->dev->ibdev, sl->dma[p], PAGE_SIZE, DMA_TO_DEVICE);
		kfree(sl->dma);
		vfree(sl->buf);
		kfree(sl->sgl);
	}
	kfree(rl->slots);
	rl->slots = NULL;
	rl->nr_slots = 0;
}

static void engram_link_rdma_free_recv(struct engram_link_rdma_q *q,
				       struct engram_link_rdma_recv *r)
{
	unsigned int c;

	if (r->buf)
		vunmap(r->buf);
	for (c = 0; c < q->recv_chunks && r->chunk[c]; c++) {
		if (r->dma[c])
			ib_dma_unmap_page(q->dev->ibdev, r->dma[c], PAGE_SIZE << q->recv_order,
					  DMA_FROM_DEVICE);
		__free_pages(r->chunk[c], q->recv_order);
	}
}

static void engram_link_rdma_free_bufs(struct engram_link_rdma_q *q)
{
	struct ib_device *ibdev = q->dev->ibdev;
	unsigned int i;

	for (i = 0; q->recvs && i < q->nr_recvs; i++)
		engram_link_rdma_free_recv(q, &q->recvs[i]);
	kfree(q->recvs);
	q->recvs = NULL;
	if (q->hb_dma)
		ib_dma_unmap_single(ibdev, q->hb_dma, ENGRAM_WIRE_HDR_BYTES, DMA_TO_DEVICE);
	q->hb_dma = 0;
	kfree(q->hb_buf);
	q->hb_buf = NULL;
}

/* Stop a queue's connection and wait until every WR of it has completed. */
static void engram_link_rdma_q_quiesce(struct engram_link_rdma_q *q)
{
	if (q->qp) {
		rdma_disconnect(q->cm_id);
		ib_drain_qp(q->qp);
	}
}

/* The QP and its MRs, with every key they had; the queue quiesced. */
static void engram_link_rdma_q_destroy_qp(struct engram_link_rdma_q *q)
{
	if (q->qp) {
		ib_mr_pool_destroy(q->qp, &q->mrs);
		rdma_destroy_qp(q->cm_id);
		q->qp = NULL;
		/* The QP is gone, the PD not yet: no kept key can be used, each may go. */
		engram_kept_conn_stop(&q->kept);
	}
}

/* The rest of a queue, once its QP and the slots registered on it are gone. */
static void engram_link_rdma_q_free(struct engram_link_rdma_q *q)
{
	/* Under conn_sem (write) or before the link was live: none is queued again. */
	cancel_delayed_work_sync(&q->reap_work);
	if (q->cq) {
		ib_free_cq(q->cq);
		q->cq = NULL;
	}
	if (q->dev) {
		engram_link_rdma_free_bufs(q);
		engram_dev_close(q->dev);
		q->dev = NULL;
	}
	if (q->cm_id) {
		rdma_destroy_id(q->cm_id);
		q->cm_id = NULL;
	}
}

/*
 * Disconnect, drain (every WR completes, flushed), end what was in flight,
 * free.  After this no WRITE of the old connection can reach any buffer:
 * every queue's QP is gone, and so are the MRs of its pool, with every key
 * they had.  That holds also for a fetch broken mid-way, whose LOCAL_INVs
 * never ran: its keys die with the MRs here, before the fetch is ended,
 * and the next connection registers through pools of new MRs, so no key
 * of this one can ever work on a new QP.
 */
static void engram_link_rdma_teardown(struct engram_link *l, int error)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned long flags;
	unsigned int i;
	LIST_HEAD(done);

	spin_lock_irqsave(&l->lock, flags);
	rl->connecting = false;
	spin_unlock_irqrestore(&l->lock, flags);
	for (i = 0; i < rl->nr_q; i++)
		engram_link_rdma_q_quiesce(&rl->q[i]);
	/* Off the wire (MRs back in the pools), but nobody told yet... */
	engram_link_finish_all(l, error, &done);
	for (i = 0; i < rl->nr_q; i++)
		engram_link_rdma_q_destroy_qp(&rl->q[i]);
	/* ...until their keys are gone with the MRs and the QPs. */
	engram_link_publish_all(&done);
	l->mr_pages = 0;
	engram_link_rdma_free_slots(rl);
	for (i = 0; i < rl->nr_q; i++)
		engram_link_rdma_q_free(&rl->q[i]);
	rl->nr_q = 0;
	INIT_LIST_HEAD(&rl->early);
	rl->early_draining = false;
}

static int engram_link_rdma_alloc_recv(struct engram_link_rdma_q *q,
				       struct engram_link_rdma_recv *r)
{
	struct page *pages[ENGRAM_LINK_RECV_PAGES];
	unsigned int c, k, n = 0;

	for (c = 0; c < q->recv_chunks; c++) {
		r->chunk[c] = alloc_pages(GFP_KERNEL, q->recv_order);
		if (!r->chunk[c])
			return -ENOMEM;
		r->dma[c] = engram_dma_map_page(q->dev->ibdev, r->chunk[c], 0,
						PAGE_SIZE << q->recv_order, DMA_FROM_DEVICE);
		if (engram_dma_mapping_error(q->dev->ibdev, r->dma[c])) {
			r->dma[c] = 0;
			return -ENOMEM;
		}
		for (k = 0; k < (1U << q->recv_order) && n < ENGRAM_LINK_RECV_PAGES; k++)
			pages[n++] = r->chunk[c] + k;
	}
	r->buf = vmap(pages, n, VM_MAP, PAGE_KERNEL);
	return r->buf ? 0 : -ENOMEM;
}

static int engram_link_rdma_alloc_recvs(struct engram_link_rdma_q *q)
{
	unsigned int i;
	int ret;

	q->nr_recvs = ENGRAM_LINK_NR_RECVS;
	q->nr_held = 0;
	q->recvs = kcalloc(q->nr_recvs, sizeof(*q->recvs), GFP_KERNEL);
	if (!q->recvs)
		return -ENOMEM;
	for (i = 0; i < q->nr_recvs; i++) {
		struct engram_link_rdma_recv *r = &q->recvs[i];

		r->link = q->link;
		r->q = q;
		r->cqe.done = engram_link_rdma_recv_done;
		ret = engram_link_rdma_alloc_recv(q, r);
		if (ret)
			return ret;
		engram_link_rdma_recv_wr(r);
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
static int engram_link_rdma_alloc_slot(struct engram_link *l, struct engram_link_rdma_slot *sl,
				       unsigned int pages, struct scatterlist *sgl)
{
	struct ib_device *ibdev = sl->q->dev->ibdev;
	unsigned int p;
	int n;

	sl->buf = vmalloc(pages * PAGE_SIZE);
	sl->dma = kcalloc(pages, sizeof(*sl->dma), GFP_KERNEL);
	sl->sgl = kmalloc_array(l->mr_pages, sizeof(*sl->sgl), GFP_KERNEL);
	if (!sl->buf || !sl->dma || !sl->sgl)
		return -ENOMEM;
	for (p = 0; p < pages; p++) {
		struct page *page = vmalloc_to_page(sl->buf + p * PAGE_SIZE);
		u64 dma = engram_dma_map_page(ibdev, page, 0, PAGE_SIZE, DMA_TO_DEVICE);

		if (engram_dma_mapping_error(ibdev, dma))
			return -ENOMEM;
		sl->dma[p] = dma;
		sl->nr_mapped++;
	}
	sl->mr = engram_alloc_mr(sl->q->dev->pd, IB_MR_TYPE_MEM_REG, pages);
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

static void engram_link_rdma_slot_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link_rdma_q *q = container_of(wc->wr_cqe, struct engram_link_rdma_q,
						    slot_reg_cqe);

	q->slot_reg_status = wc->status;
	complete(&q->slot_reg_done);
}

/* Reap a poll queue's completions, in the context its handlers expect. */
static void engram_link_rdma_q_poll(struct engram_link_rdma_q *q)
{
	local_bh_disable();
	ib_process_cq_direct(q->cq, ENGRAM_LINK_POLL_BUDGET);
	local_bh_enable();
}

/* The slots' registration, reaped here on a poll queue: false on timeout. */
static bool engram_link_rdma_wait_reg(struct engram_link_rdma_q *q)
{
	unsigned long end = jiffies + msecs_to_jiffies(ENGRAM_LINK_CM_TIMEOUT_MS);

	if (!q->polled)
		return wait_for_completion_timeout(&q->slot_reg_done,
						   msecs_to_jiffies(ENGRAM_LINK_CM_TIMEOUT_MS));
	while (!try_wait_for_completion(&q->slot_reg_done)) {
		if (time_after(jiffies, end))
			return false;
		engram_link_rdma_q_poll(q);
		usleep_range(20, 100);
	}
	return true;
}

/*
 * Register the MRs of a queue's @n slots: REG_MRs on its send queue, which
 * is empty and in RTS once connected, the last one signaled.  Waited for,
 * so that the queue is empty again when fetches start and its sizing (per
 * ticket) holds.
 */
static int engram_link_rdma_reg_slots(struct engram_link_rdma_q *q,
				      struct engram_link_rdma_slot *slots, unsigned int n)
{
	struct ib_reg_wr *regs;
	unsigned int i;
	int ret;

	regs = kcalloc(n, sizeof(*regs), GFP_KERNEL);
	if (!regs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		regs[i].wr.opcode = IB_WR_REG_MR;
		regs[i].wr.wr_cqe = &q->reg_cqe;
		regs[i].wr.next = i + 1 < n ? &regs[i + 1].wr : NULL;
		regs[i].mr = slots[i].mr;
		regs[i].key = slots[i].mr->lkey;
		/* The device only reads it: no remote right, no key handed out. */
		regs[i].access = IB_ACCESS_LOCAL_WRITE;
	}
	regs[n - 1].wr.send_flags = IB_SEND_SIGNALED;
	regs[n - 1].wr.wr_cqe = &q->slot_reg_cqe;
	reinit_completion(&q->slot_reg_done);
	ret = engram_post_send(q->qp, &regs[0].wr, NULL);
	kfree(regs);	/* the device copied the WRs when they were posted */
	if (ret)
		return ret;
	if (!engram_link_rdma_wait_reg(q))
		return -ETIMEDOUT;	/* teardown's drain flushes it */
	return q->slot_reg_status == IB_WC_SUCCESS ? 0 : -EIO;
}

/* Each queue's slots, as many as the generic link gives it (l->q_slots). */
static int engram_link_rdma_alloc_slots(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned int i, pages = DIV_ROUND_UP(l->neg.max_request_bytes, PAGE_SIZE);
	unsigned int per = min_t(u32, l->neg.max_inflight, ENGRAM_WIRE_OFFER_INFLIGHT);
	struct ib_device *ibdev = rl->q[0].dev->ibdev;
	struct scatterlist *sgl;
	int ret = 0;

	if (pages > ibdev->attrs.max_fast_reg_page_list_len) {
		pr_warn("link %u: a request of %u bytes does not fit one registration on %s\n",
			l->id, l->neg.max_request_bytes, dev_name(&ibdev->dev));
		return -E2BIG;
	}
	rl->slots = kcalloc(per * rl->nr_q, sizeof(*rl->slots), GFP_KERNEL);
	sgl = kmalloc_array(pages, sizeof(*sgl), GFP_KERNEL);
	if (!rl->slots || !sgl) {
		kfree(sgl);
		return -ENOMEM;
	}
	rl->nr_slots = per * rl->nr_q;
	for (i = 0; !ret && i < rl->nr_slots; i++) {
		rl->slots[i].q = &rl->q[i / per];
		ret = engram_link_rdma_alloc_slot(l, &rl->slots[i], pages, sgl);
	}
	kfree(sgl);
	for (i = 0; !ret && i < rl->nr_q; i++)
		ret = engram_link_rdma_reg_slots(&rl->q[i], &rl->slots[i * per], per);
	return ret;
}

/* Queue pair, MR pool and receives for the device the route chose. */
static int engram_link_rdma_create_qp(struct engram_link_rdma_q *q)
{
	struct engram_link *l = q->link;
	struct ib_device *ibdev = q->cm_id->device;
	struct ib_qp_init_attr init = {};
	unsigned int sq, i;
	int ret;

	/* A PD of this queue's own: its rkeys work on no other QP. */
	q->dev = engram_dev_open(ibdev);
	if (!q->dev)
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
	/* Each queue's completions on a vector of their own, when there are several. */
	q->cq = engram_alloc_cq(ibdev, l, sq + ENGRAM_LINK_NR_RECVS + 2,
				q->idx % max(ibdev->num_comp_vectors, 1),
				q->polled ? IB_POLL_DIRECT : IB_POLL_SOFTIRQ);
	if (IS_ERR(q->cq)) {
		ret = PTR_ERR(q->cq);
		q->cq = NULL;
		return ret;
	}
	init.event_handler = NULL;
	init.qp_context = l;
	init.send_cq = q->cq;
	init.recv_cq = q->cq;
	init.cap.max_send_wr = sq;
	init.cap.max_recv_wr = ENGRAM_LINK_NR_RECVS + 1;
	init.cap.max_send_sge = 1;
	/* Chunks of a receive: as small as the device's receive SGEs allow. */
	q->recv_order = 0;
	while (DIV_ROUND_UP(ENGRAM_LINK_RECV_PAGES, 1U << q->recv_order) >
	       max(ibdev->attrs.max_recv_sge, 1))
		q->recv_order++;
	q->recv_chunks = DIV_ROUND_UP(ENGRAM_LINK_RECV_PAGES, 1U << q->recv_order);
	init.cap.max_recv_sge = q->recv_chunks;
	init.sq_sig_type = IB_SIGNAL_REQ_WR;
	init.qp_type = IB_QPT_RC;
	ret = engram_create_qp(q->cm_id, q->dev->pd, &init);
	if (ret)
		return ret;
	q->qp = q->cm_id->qp;

	/* Queues after the first run on queue 0's device (connect_more). */
	if (!q->idx)
		l->mr_pages = min_t(u32, ibdev->attrs.max_fast_reg_page_list_len,
				    ENGRAM_LINK_MR_PAGES);
	INIT_LIST_HEAD(&q->mrs);
	ret = ib_mr_pool_init(q->qp, &q->mrs, ENGRAM_WIRE_OFFER_INFLIGHT * ENGRAM_WIRE_MAX_RANGES,
			      IB_MR_TYPE_MEM_REG, l->mr_pages, 0);
	if (ret)
		return ret;
	engram_kept_conn_start(&q->kept, q->qp, q->dev->pd, &q->reg_cqe, l->mr_pages);
	ret = engram_link_rdma_alloc_recvs(q);
	if (ret)
		return ret;
	q->hb_buf = kzalloc(ENGRAM_WIRE_HDR_BYTES, GFP_KERNEL);
	if (!q->hb_buf)
		return -ENOMEM;
	q->hb_dma = engram_dma_map_single(ibdev, q->hb_buf, ENGRAM_WIRE_HDR_BYTES, DMA_TO_DEVICE);
	if (engram_dma_mapping_error(ibdev, q->hb_dma)) {
		q->hb_dma = 0;
		return -ENOMEM;
	}
	q->hb_busy = false;
	q->hb_out = false;
	for (i = 0; i < q->nr_recvs; i++) {
		ret = engram_link_rdma_post_recv(&q->recvs[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * fault_client_live_delay_ms: hold the connect worker, so frames arrive
 * while it is between two steps.  Cut short when the module goes away.
 */
static void engram_link_rdma_fault_hold(unsigned int ms)
{
	unsigned long end = jiffies + msecs_to_jiffies(ms);

	while (ms && time_before(jiffies, end) && !engram_link_exiting())
		msleep(20);
}

/*
 * Read, in order, the frames that arrived before the link went live and
 * those that arrive meanwhile: the completion handler queues them behind
 * while early_draining is set, and reads them itself once this has found
 * the list empty and cleared it, under the same lock.  Frames are read
 * one at a time, without l->lock, as the completion handler reads them.
 */
static void engram_link_rdma_drain_early(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct engram_link_rdma_recv *r;
	unsigned long flags;

	for (;;) {
		spin_lock_irqsave(&l->lock, flags);
		r = list_first_entry_or_null(&rl->early, struct engram_link_rdma_recv, early);
		if (r)
			list_del(&r->early);
		else
			rl->early_draining = false;
		spin_unlock_irqrestore(&l->lock, flags);
		if (!r)
			return;
		engram_link_rdma_frame(l, r, r->early_len);
	}
}

/* How many queues to open on @ibdev (link_queues; read at each connect). */
static unsigned int engram_link_rdma_nr_queues(struct ib_device *ibdev)
{
	unsigned int n = READ_ONCE(engram_link_queues.val);

	if (n)
		return min_t(unsigned int, n, ENGRAM_LINK_MAX_QUEUES);
	n = min_t(unsigned int, num_online_cpus(), ENGRAM_LINK_AUTO_QUEUES);
	return clamp_t(unsigned int, ibdev->num_comp_vectors, 1, n);
}

/*
 * Connect one queue: its own CM id, route, QP and hello; the server's
 * answer in @answer, checked against what we offered.
 */
static int engram_link_rdma_connect_q(struct engram_link_rdma_q *q,
				      struct engram_wire_params *answer)
{
	struct engram_link *l = q->link;
	struct engram_wire_params local;
	struct rdma_conn_param param = {};
	u8 hello[ENGRAM_WIRE_HELLO_BYTES];
	char err[96];
	int ret;

	reinit_completion(&q->cm_done);
	q->dropping = false;	/* no CM id yet: nothing reads it */
	q->cm_id = engram_create_id(&init_net, engram_link_rdma_cm_handler, q, RDMA_PS_TCP,
				    IB_QPT_RC);
	if (IS_ERR(q->cm_id)) {
		ret = PTR_ERR(q->cm_id);
		q->cm_id = NULL;
		return ret;
	}
	ret = rdma_resolve_addr(q->cm_id, (struct sockaddr *)&l->url.local,
				(struct sockaddr *)&l->url.addr, ENGRAM_LINK_CM_TIMEOUT_MS);
	if (!ret)
		ret = engram_link_rdma_cm_wait(q);
	if (!ret)
		ret = rdma_resolve_route(q->cm_id, ENGRAM_LINK_CM_TIMEOUT_MS);
	if (!ret)
		ret = engram_link_rdma_cm_wait(q);
	if (ret)
		return ret;
	ret = engram_link_rdma_create_qp(q);
	if (ret)
		return ret;

	engram_link_local_params(&local);
	engram_wire_hello_encode(hello, sizeof(hello), &local);
	param.private_data = hello;
	param.private_data_len = sizeof(hello);
	param.retry_count = 7;
	param.rnr_retry_count = 7;
	ret = rdma_connect(q->cm_id, &param);
	if (!ret)
		ret = engram_link_rdma_cm_wait(q);
	if (ret)
		return ret;
	if (engram_wire_hello_decode(q->rep, sizeof(q->rep), answer, err, sizeof(err)) ||
	    engram_wire_check_answer(&local, answer, err, sizeof(err))) {
		pr_warn("link %u: server's answer refused: %s\n", l->id, err);
		return -EPROTO;
	}
	return 0;
}

/*
 * Queues after the first: a link is as good with fewer, so one that fails
 * (the server's rdma_max_conns_per_peer, say) or negotiates other limits
 * than queue 0 is closed and the link goes on with those it has.
 */
static void engram_link_rdma_connect_more(struct engram_link *l, unsigned int want)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned long end = jiffies + msecs_to_jiffies(ENGRAM_LINK_MORE_MS);
	struct engram_wire_params answer;
	struct engram_link_rdma_q *q;
	unsigned long flags;
	int ret;

	while (rl->nr_q < want) {
		/*
		 * Queue 0 sends nothing until the link is live, and the
		 * server closes a connection it has not heard from for its
		 * idle timeout (30 s by default): each further queue takes up
		 * to three CM timeouts, so no more are begun after this long.
		 */
		if (time_after(jiffies, end)) {
			pr_warn_ratelimited("link %u: %u of %u queues connected in %u ms; going on with them\n",
					    l->id, rl->nr_q, want, ENGRAM_LINK_MORE_MS);
			return;
		}
		q = &rl->q[rl->nr_q];
		ret = engram_link_rdma_connect_q(q, &answer);
		/* Another route or other limits: not a queue of the same connection. */
		if (!ret && (q->cm_id->device != rl->q[0].cm_id->device ||
			     memcmp(&answer, &l->neg, sizeof(answer)) ||
			     engram_fault_client_queue_unfit()))
			ret = -EPROTO;
		if (ret) {
			pr_warn_ratelimited("link %u: queue %u of %u not connected (%d); going on with %u\n",
					    l->id, rl->nr_q + 1, want, ret, rl->nr_q);
			/* Its DREQ's answer comes as DISCONNECTED: not a break. */
			spin_lock_irqsave(&l->lock, flags);
			q->dropping = true;
			spin_unlock_irqrestore(&l->lock, flags);
			engram_link_rdma_q_quiesce(q);
			engram_link_rdma_q_destroy_qp(q);
			engram_link_rdma_q_free(q);
			return;
		}
		rl->nr_q++;
	}
}

static int engram_link_rdma_connect(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned int hold, want, poll, i;
	struct engram_wire_params answer;
	unsigned long flags;
	bool broken;
	int ret;

	lockdep_assert_held(&l->mutex);
	spin_lock_irqsave(&l->lock, flags);
	rl->connecting = true;
	rl->broken_early = false;
	spin_unlock_irqrestore(&l->lock, flags);
	/* Counted first: teardown frees what a failed connect set up. */
	rl->nr_q = 1;
	ret = engram_link_rdma_connect_q(&rl->q[0], &answer);
	if (ret)
		return ret;
	l->neg = answer;
	want = engram_link_rdma_nr_queues(rl->q[0].cm_id->device);
	poll = min_t(unsigned int, READ_ONCE(engram_link_poll_queues.val),
		     ENGRAM_LINK_MAX_QUEUES - want);
	for (i = 0; i < ENGRAM_LINK_MAX_QUEUES; i++)
		rl->q[i].polled = i >= want && i < want + poll;
	engram_link_rdma_connect_more(l, want);
	/* Poll queues only beside every queue that takes interrupts. */
	if (rl->nr_q == want && poll)
		engram_link_rdma_connect_more(l, want + poll);
	l->nr_queues = rl->nr_q;
	l->nr_poll_queues = rl->nr_q > want ? rl->nr_q - want : 0;
	ret = engram_link_rdma_alloc_slots(l);
	if (ret)
		return ret;
	hold = engram_fault_client_live_delay_ms();
	engram_link_rdma_fault_hold(hold);
	/* Frames that come from now on queue behind the early ones. */
	spin_lock_irqsave(&l->lock, flags);
	rl->early_draining = true;
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_went_live(l);
	/* From here a break reaches engram_link_fail() itself. */
	spin_lock_irqsave(&l->lock, flags);
	broken = rl->broken_early;
	rl->connecting = false;
	spin_unlock_irqrestore(&l->lock, flags);
	if (broken) {
		pr_warn_ratelimited("link %u: a queue broke while connecting\n", l->id);
		engram_link_fail(l, -ECONNRESET);
	}
	engram_link_rdma_fault_hold(hold);
	engram_link_rdma_drain_early(l);
	return 0;
}

/* --- fetches --- */

/* Post the REG_MRs and the SEND of a fetch whose pieces have MRs. */
static int engram_link_rdma_post_fetch(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_link_rdma_slot *slot = &engram_link_rdma_of(l)->slots[f->slot];
	struct engram_link_rdma_q *q = slot->q;
	struct ib_reg_wr *regs = f->reg_wrs;
	struct ib_send_wr send = {};
	struct ib_send_wr *first;
	unsigned int i, nr_regs;
	struct ib_sge sge;
	u32 left, n;

	/* Kept keys were registered once, ahead of this on the same send queue. */
	nr_regs = f->kept ? 0 : f->nr_pieces;
	memset(regs, 0, sizeof(regs[0]) * nr_regs);
	for (i = 0; i < nr_regs; i++) {
		struct ib_mr *mr = f->pieces[i].mr;

		regs[i].wr.opcode = IB_WR_REG_MR;
		regs[i].wr.wr_cqe = &q->reg_cqe;
		regs[i].wr.next = &regs[i + 1].wr;
		regs[i].mr = mr;
		regs[i].key = mr->rkey;
		/* Remote write only: the server can neither read nor reuse it later. */
		regs[i].access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	}
	if (nr_regs)
		regs[nr_regs - 1].wr.next = &send;
	first = nr_regs ? &regs[0].wr : &send;
	sge.addr = slot->mr->iova;
	sge.length = f->req_len;
	sge.lkey = slot->mr->lkey;
	send.opcode = IB_WR_SEND;
	send.send_flags = IB_SEND_SIGNALED;
	send.wr_cqe = &f->send_cqe;
	if (f->kept) {
		send.wr_cqe = &q->send_cqe;
		if (atomic_inc_return(&q->sends) % ENGRAM_LINK_SIGNAL_EVERY)
			send.send_flags = 0;
	}
	send.sg_list = &sge;
	send.num_sge = 1;
	/* Written through the vmalloc alias: out of a virtually indexed cache first. */
	flush_kernel_vmap_range(slot->buf, round_up(f->req_len, PAGE_SIZE));
	for (i = 0, left = f->req_len; left; i++, left -= n) {
		n = min_t(u32, left, PAGE_SIZE);
		ib_dma_sync_single_for_device(q->dev->ibdev, slot->dma[i], n, DMA_TO_DEVICE);
	}
	if (engram_fault_client_req_fail())
		return -EIO;
	engram_cost_post_send(false, first);
	return engram_post_send(q->qp, first, NULL);
}

/* Fast-register one piece of the destination, exposing exactly its bytes. */
static int engram_link_rdma_map_piece(struct engram_link *l, struct engram_link_rdma_q *q,
				      struct engram_piece *p, struct scatterlist *sgl)
{
	u64 start = (p->buf->addr & ~PAGE_MASK) + p->off;
	int n, mapped;

	n = engram_ubuf_sg(p->buf, q->dev->ibdev, start, start + p->len, sgl, l->mr_pages);
	if (n < 0)
		return n;
	p->mr = ib_mr_pool_get(q->qp, &q->mrs);
	if (!p->mr)
		return -EBUSY;
	ib_update_fast_reg_key(p->mr, ib_inc_rkey(p->mr->rkey));
	mapped = engram_map_mr_sg(p->mr, sgl, n, NULL, PAGE_SIZE);
	if (mapped != n)
		return mapped < 0 ? mapped : -EINVAL;
	return 0;
}

/*
 * Can @f land through kept keys on @q: every piece in a buffer registered
 * with ENGRAM_REG_F_KEEP_KEYS and inside one of its windows there, and a
 * server that will not invalidate them (version 5)?
 */
static bool engram_link_rdma_keeps(struct engram_link *l, struct engram_link_rdma_q *q,
				   const struct engram_fetch *f)
{
	unsigned int i;

	if (l->neg.version_max < ENGRAM_WIRE_VERSION_KEPT)
		return false;
	for (i = 0; i < f->nr_pieces; i++)
		if (!f->pieces[i].buf->keep ||
		    !engram_kept_fits(&q->kept, f->pieces[i].buf, f->pieces[i].off,
				      f->pieces[i].len))
			return false;
	return true;
}

/* The RDMA transport's submit: register each piece, post REG_MRs and the SEND. */
static int engram_link_rdma_submit(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_link_rdma_slot *slot = &engram_link_rdma_of(l)->slots[f->slot];
	struct engram_link_rdma_q *q = slot->q;
	struct engram_wire_req req;
	u64 addr[ENGRAM_WIRE_MAX_RANGES];
	unsigned long flags;
	unsigned int i;
	int ret;

	f->ibdev = q->dev->ibdev;
	f->kept = engram_link_rdma_keeps(l, q, f);
	for (i = 0; i < f->nr_pieces; i++)
		f->pieces[i].mr = NULL;
	for (i = 0; i < f->nr_pieces; i++) {
		struct engram_piece *p = &f->pieces[i];

		if (f->kept) {
			ret = engram_kept_map(&q->kept, p->buf, p->off, p->len, slot->sgl, &p->mr,
					      &addr[i]);
		} else {
			ret = engram_link_rdma_map_piece(l, q, p, slot->sgl);
			addr[i] = ret ? 0 : p->mr->iova;
		}
		if (ret)
			goto err_pieces;
		engram_ubuf_sync(p->buf, q->dev->ibdev, p->off, p->len, true);
	}
	engram_link_fetch_req(f, &req);
	for (i = 0; i < f->nr_pieces; i++) {
		req.ranges[i].addr = addr[i];
		req.ranges[i].rkey = f->pieces[i].mr->rkey;
	}
	/* The key a version 2 server invalidates with its RESPONSE, unless kept. */
	f->rkey0 = f->pieces[0].mr->rkey;
	if (f->kept)
		req.flags |= ENGRAM_WIRE_REQ_KEPT_KEYS;
	ret = engram_wire_req_build(slot->buf, l->neg.max_request_bytes,
				    &l->neg, &req, f->rows, f->places);
	if (ret < 0)
		goto err_pieces;
	f->req_len = ret;

	f->send_cqe.done = engram_link_rdma_send_done;
	f->inv_cqe.done = engram_link_rdma_inv_done;
	/*
	 * The SEND, and each MR's invalidation (a LOCAL_INV, or the RESPONSE);
	 * kept keys are not invalidated, and the SEND is not the fetch's: the
	 * RESPONSE alone.
	 */
	atomic_set(&f->wire_refs, f->kept ? 1 : 1 + f->nr_pieces);
	ret = engram_link_track(l, f);
	if (ret)
		goto err_pieces;
	ret = engram_link_rdma_post_fetch(l, f);
	if (ret) {
		/*
		 * Part of the chain may be on the wire: leave the fetch to
		 * teardown, which ends it once the QP and its keys are gone.
		 */
		engram_link_lock_fetch(l, flags);
		engram_link_wire_broken_locked(l, f, -EIO);
		spin_unlock_irqrestore(&l->lock, flags);
		engram_link_rdma_break(l);
		ret = 0;		/* the fetch completes with its error */
	}
	return ret;

err_pieces:
	engram_link_lock_fetch(l, flags);
	for (i = 0; i < f->nr_pieces; i++) {
		if (f->pieces[i].mr && !f->kept)
			ib_mr_pool_put(q->qp, &q->mrs, f->pieces[i].mr);
		f->pieces[i].mr = NULL;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	return ret;
}

/* One queue's heartbeat: a SEND of the header from the queue's own buffer. */
static int engram_link_rdma_hb_send(struct engram_link *l, struct engram_link_rdma_q *q,
				    u64 ticket)
{
	struct ib_send_wr wr = {};
	struct ib_sge sge;
	int len;

	len = engram_wire_simple_encode(q->hb_buf, ENGRAM_WIRE_HDR_BYTES, &l->neg,
					ENGRAM_WIRE_HEARTBEAT, ticket);
	if (WARN_ON_ONCE(len < 0))
		return len;
	ib_dma_sync_single_for_device(q->dev->ibdev, q->hb_dma, len, DMA_TO_DEVICE);
	sge.addr = q->hb_dma;
	sge.length = len;
	sge.lkey = q->dev->pd->local_dma_lkey;
	wr.opcode = IB_WR_SEND;
	wr.send_flags = IB_SEND_SIGNALED;
	wr.wr_cqe = &q->hb_cqe;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return engram_post_send(q->qp, &wr, NULL) ? -EIO : 0;
}

/*
 * The RDMA transport's heartbeat goes on every queue, so that each queue's
 * connection is heard within the server's idle timeout and probed for a
 * silent break whatever link_queues is: in turn, with 8 queues and
 * heartbeat_ms=4000, each would be heard every 32 s, past the server's
 * default 30 s.  A queue whose last one is still unanswered is passed
 * over: the server keeps one spare receive for it.
 */
static int engram_link_rdma_heartbeat(struct engram_link *l, u64 ticket)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct engram_link_rdma_q *q;
	unsigned int i, sent = 0;
	unsigned long flags;
	bool skip;
	int ret;

	for (i = 0; i < rl->nr_q; i++) {
		q = &rl->q[i];
		spin_lock_irqsave(&l->lock, flags);
		skip = q->hb_busy || q->hb_out;
		if (!skip) {
			q->hb_busy = true;
			q->hb_out = true;
			q->hb_ticket = ticket;
		}
		spin_unlock_irqrestore(&l->lock, flags);
		if (skip)
			continue;
		ret = engram_link_rdma_hb_send(l, q, ticket);
		if (ret)
			return ret;
		/* Its completion and its echo: nobody else polls for them. */
		if (q->polled)
			queue_delayed_work(system_highpri_wq, &q->reap_work, 1);
		sent++;
	}
	return sent ? 0 : -EBUSY;
}

/* Is anything of @q's out: a fetch in one of its slots, or its heartbeat? */
static bool engram_link_rdma_q_busy(struct engram_link *l, struct engram_link_rdma_q *q)
{
	unsigned long first = q->idx * l->q_slots, end = first + l->q_slots, flags;
	bool busy;

	spin_lock_irqsave(&l->lock, flags);
	busy = find_next_bit(l->slots_busy, end, first) < end || q->hb_busy || q->hb_out;
	spin_unlock_irqrestore(&l->lock, flags);
	return busy;
}

/*
 * A poll queue's reaper, while something is out on it that no caller
 * polls for: a heartbeat, or a fetch whose caller stopped polling (a
 * signal, a WAIT, a closing fd, a deadline being enforced).  Every tick
 * until the queue is idle.  It never waits for teardown, which cancels it
 * under conn_sem and whose drain reaps the rest.
 */
static void engram_link_rdma_reap_work(struct work_struct *work)
{
	struct engram_link_rdma_q *q = container_of(to_delayed_work(work),
						    struct engram_link_rdma_q, reap_work);
	struct engram_link *l = q->link;

	if (!down_read_trylock(&l->conn_sem))
		return;
	if (l->live && q->cq && q->polled) {
		engram_cost_inc(ENGRAM_STAT_CLIENT_WORK_ITEMS);
		engram_link_rdma_q_poll(q);
		if (engram_link_rdma_q_busy(l, q))
			queue_delayed_work(system_highpri_wq, &q->reap_work, 1);
	}
	up_read(&l->conn_sem);
}

/*
 * The RDMA transport's reap: a busy-polling caller reaps its fetch's
 * queue itself; any other waiter leaves it to reap_work.  Not while the
 * connection goes: teardown's drain reaps every WR of it.
 */
static void engram_link_rdma_reap(struct engram_link *l, struct engram_fetch *f, bool now)
{
	struct engram_link_rdma_q *q;
	int slot;

	if (!down_read_trylock(&l->conn_sem))
		return;
	/*
	 * Read once: another poller of the queue may finish @f meanwhile and
	 * give its slot back (-1).  A slot taken again since is on the same
	 * queue, and the slots outlive this hold of conn_sem.
	 */
	slot = READ_ONCE(f->slot);
	if (l->live && f->conn_gen == l->conn_gen && slot >= 0) {
		q = engram_link_rdma_of(l)->slots[slot].q;
		if (q->polled && now)
			engram_link_rdma_q_poll(q);
		else if (q->polled)
			mod_delayed_work(system_highpri_wq, &q->reap_work, 0);
	}
	up_read(&l->conn_sem);
}

/* Give a finished fetch's MRs back to its queue's pool; l->lock held. */
static void engram_link_rdma_put_fetch(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_link_rdma_q *q;
	unsigned int i;

	/* Only a fetch that held a slot can have MRs; kept ones are not the pool's. */
	if (f->slot < 0)
		return;
	q = engram_link_rdma_fq(l, f);
	for (i = 0; i < f->nr_pieces; i++) {
		if (f->pieces[i].mr && !f->kept)
			ib_mr_pool_put(q->qp, &q->mrs, f->pieces[i].mr);
		f->pieces[i].mr = NULL;
	}
}

static const char *engram_link_rdma_device(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);

	return rl->nr_q && rl->q[0].dev ? dev_name(&rl->q[0].dev->ibdev->dev) : NULL;
}

static bool engram_link_rdma_on_device(struct engram_link *l, struct ib_device *ibdev)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned int i;

	for (i = 0; i < rl->nr_q; i++)
		if (rl->q[i].dev && rl->q[i].dev->ibdev == ibdev)
			return true;
	return false;
}

static struct engram_link *engram_link_rdma_alloc(void)
{
	struct engram_link_rdma *rl = kzalloc(sizeof(*rl), GFP_KERNEL);
	unsigned int i;

	if (!rl)
		return NULL;
	INIT_LIST_HEAD(&rl->early);
	for (i = 0; i < ENGRAM_LINK_MAX_QUEUES; i++) {
		struct engram_link_rdma_q *q = &rl->q[i];

		if (engram_kept_conn_init(&q->kept, &rl->link)) {
			while (i--)
				engram_kept_conn_exit(&rl->q[i].kept);
			kfree(rl);
			return NULL;
		}
		q->link = &rl->link;
		q->idx = i;
		init_completion(&q->cm_done);
		q->reg_cqe.done = engram_link_rdma_reg_done;
		q->send_cqe.done = engram_link_rdma_kept_send_done;
		q->slot_reg_cqe.done = engram_link_rdma_slot_reg_done;
		init_completion(&q->slot_reg_done);
		q->hb_cqe.done = engram_link_rdma_hb_send_done;
		INIT_DELAYED_WORK(&q->reap_work, engram_link_rdma_reap_work);
	}
	return &rl->link;
}

static void engram_link_rdma_free(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned int i;

	for (i = 0; i < ENGRAM_LINK_MAX_QUEUES; i++)
		engram_kept_conn_exit(&rl->q[i].kept);
	kfree(rl);
}

static const struct engram_link_ops engram_link_rdma_ops = {
	.alloc = engram_link_rdma_alloc,
	.free = engram_link_rdma_free,
	.connect = engram_link_rdma_connect,
	.teardown = engram_link_rdma_teardown,
	.submit = engram_link_rdma_submit,
	.heartbeat = engram_link_rdma_heartbeat,
	.put_fetch = engram_link_rdma_put_fetch,
	.device = engram_link_rdma_device,
	.on_device = engram_link_rdma_on_device,
	.reap = engram_link_rdma_reap,
	.answer_last = true,
};

/**
 * engram_link_rdma_init() - offer the RDMA transport to new links
 */
void engram_link_rdma_init(void)
{
	engram_link_admin_transport_set(ENGRAM_TRANSPORT_RDMA, &engram_link_rdma_ops);
}

/**
 * engram_link_rdma_exit() - after every link has stopped (engram_link_admin_exit())
 */
void engram_link_rdma_exit(void)
{
	engram_link_admin_transport_set(ENGRAM_TRANSPORT_RDMA, NULL);
}
