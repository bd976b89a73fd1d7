// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA transport of client links: one RC connection to one server
 * each.  A link connects in its connect worker (resolve address, route,
 * create the queue pair, connect with our hello in the private data),
 * and then carries fetches: each fetch registers its destination with
 * fast registration (one MR per piece, a fresh key each time), sends one
 * REQUEST, and on the RESPONSE invalidates its MRs before it completes,
 * so the server can never write into the buffer once the fetch is over.
 * From protocol version 2 the server's RESPONSE invalidates the first
 * MR itself (SEND with invalidate), so a fetch of one piece completes on
 * its RESPONSE without a local invalidation to wait for.
 * Teardown disconnects, drains, and destroys the QP and its MRs before
 * any fetch of the connection is let go.  The generic link (link.c) owns
 * the state, catalog, tickets, heartbeat, deadlines and reconnects.
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

#include "inject.h"
#include "link.h"

/* Receives: one per ticket, plus room for unsolicited catalogs and heartbeat echoes. */
#define ENGRAM_LINK_EXTRA_RECVS		4
/* Pages one MR maps at most, whatever the device allows. */
#define ENGRAM_LINK_MR_PAGES		512

struct engram_link_rdma_recv {
	struct ib_cqe cqe;
	struct list_head early;		/* on engram_link_rdma.early */
	u32 early_len;
	bool inv;			/* the SEND that filled it invalidated inv_rkey */
	u32 inv_rkey;
	struct engram_link *link;
	void *buf;
	u64 dma;
};

/*
 * A request slot's buffer: vmalloc'ed pages, each DMA-mapped, registered
 * once into a local-only MR (see engram_link_rdma_alloc_slot()).  Slot i
 * is the generic link's slot i.
 */
struct engram_link_rdma_slot {
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
 * A link over RDMA: the generic link, and the connection's parts, set up
 * and torn down under link.mutex.
 */
struct engram_link_rdma {
	struct engram_link link;
	struct ib_cqe reg_cqe;		/* failures of REG_MR WRs */
	struct ib_cqe slot_reg_cqe;	/* the request slots' registration */
	struct completion slot_reg_done;
	enum ib_wc_status slot_reg_status;
	struct ib_cqe hb_cqe;		/* the heartbeat SEND */
	bool hb_busy;			/* the heartbeat SEND has not completed (link.lock) */
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
	struct engram_link_rdma_slot *slots;
	unsigned int nr_slots;
	/*
	 * Frames that arrived before the connect worker read the server's
	 * hello, and after, while it reads them (early_draining; link.lock).
	 */
	struct list_head early;
	bool early_draining;
};

static struct engram_link_rdma *engram_link_rdma_of(struct engram_link *l)
{
	return container_of(l, struct engram_link_rdma, link);
}

static void engram_link_rdma_fail_wc(struct engram_link *l, struct ib_wc *wc, const char *what)
{
	if (wc->status == IB_WC_WR_FLUSH_ERR)
		return;
	engram_count(&engram_global_stats, ENGRAM_STAT_TRANSPORT_ERRORS);
	pr_warn_ratelimited("link %u: %s failed: %s (%d)\n", l->id, what,
			    ib_wc_status_msg(wc->status), wc->status);
	engram_link_fail(l, -ECONNRESET);
}

/* REG_MRs are unsignaled and report only failures, on the link's cqe. */
static void engram_link_rdma_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link_rdma *rl = container_of(wc->wr_cqe, struct engram_link_rdma, reg_cqe);
	struct engram_link *l = &rl->link;

	if (wc->status != IB_WC_SUCCESS)
		engram_link_rdma_fail_wc(l, wc, "memory registration");
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

	spin_lock_irqsave(&l->lock, flags);
	engram_link_wire_broken_locked(l, f, -ECONNRESET);
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_rdma_fail_wc(l, wc, what);
	engram_link_fail(l, -ECONNRESET);
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

	if (wc->status != IB_WC_SUCCESS)
		engram_link_rdma_fetch_wc_failed(l, f, wc, "request send");
	engram_link_rdma_wire_put(l, f);
}

static void engram_link_rdma_hb_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link_rdma *rl = container_of(wc->wr_cqe, struct engram_link_rdma, hb_cqe);
	struct engram_link *l = &rl->link;
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	rl->hb_busy = false;
	spin_unlock_irqrestore(&l->lock, flags);
	if (wc->status != IB_WC_SUCCESS)
		engram_link_rdma_fail_wc(l, wc, "heartbeat send");
}

static void engram_link_rdma_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_fetch *f = container_of(wc->wr_cqe, struct engram_fetch, inv_cqe);
	struct engram_link *l = f->link;

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
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
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
	ret = engram_fault_client_inv_fail() ? -EIO : engram_post_send(rl->qp, wrs, NULL);
	if (ret)
		engram_link_wire_broken_locked(l, f, -ECONNRESET);
	return ret;
}

/*
 * fault_client_inv_flush: break the queue pair as a fatal NIC error would,
 * so the invalidations posted next complete flushed.  Outside l->lock, in
 * the receive completion's softirq: rxe's modify_qp does not sleep.
 */
static void engram_link_rdma_fault_qp_error(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	int ret;

	ret = ib_modify_qp(rl->qp, &attr, IB_QP_STATE);
	pr_warn_ratelimited("link %u: fault injected: queue pair moved to the error state (%d)\n",
			    l->id, ret);
}

/*
 * The RESPONSE to @f came.  If its SEND invalidated the fetch's first key
 * (version 2), the device did so before it completed the receive: that
 * MR needs no LOCAL_INV, and a fetch of one piece is over once its
 * request SEND has completed too.  Any other key, or none, and every MR
 * is invalidated here, as in version 1: a server cannot make a fetch end
 * early by invalidating the wrong key.
 */
static int engram_link_rdma_response(struct engram_link *l, struct engram_link_rdma_recv *r,
				     u32 len)
{
	struct engram_wire_resp resp;
	struct engram_fetch *f;
	unsigned long flags;
	unsigned int first;
	char err[96];
	int ret = 0;

	if (engram_wire_resp_decode(r->buf, len, &l->neg, false, &resp, err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad response: %s\n", l->id, err);
		return -EPROTO;
	}
	f = engram_link_claim(l, &resp);
	if (!f)
		return -EPROTO;
	first = r->inv && r->inv_rkey == f->rkey0 ? 1 : 0;
	if (first) {
		engram_count(&l->stats, ENGRAM_STAT_REMOTE_INVALIDATIONS);
		engram_count(&engram_global_stats, ENGRAM_STAT_REMOTE_INVALIDATIONS);
	}
	if (first < f->nr_pieces && engram_fault_client_inv_flush())
		engram_link_rdma_fault_qp_error(l);
	spin_lock_irqsave(&l->lock, flags);
	/* Not live: teardown is draining and will end the fetch itself. */
	if (l->live && first < f->nr_pieces)
		ret = engram_link_rdma_invalidate(l, f, first);
	spin_unlock_irqrestore(&l->lock, flags);
	/* Only now: engram_link_fail() takes l->lock. */
	if (ret) {
		pr_warn_ratelimited("link %u: posting invalidations failed (%d)\n", l->id, ret);
		engram_link_fail(l, -ECONNRESET);
	} else if (first) {
		/* The first MR's wire_ref: its key died with the RESPONSE. */
		engram_link_rdma_wire_put(l, f);
	}
	return 0;
}

static int engram_link_rdma_post_recv(struct engram_link *l, struct engram_link_rdma_recv *r)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct ib_recv_wr wr = {};
	struct ib_sge sge;

	ib_dma_sync_single_for_device(rl->dev->ibdev, r->dma,
				      ENGRAM_WIRE_MAX_CATALOG_BYTES, DMA_FROM_DEVICE);
	sge.addr = r->dma;
	sge.length = ENGRAM_WIRE_MAX_CATALOG_BYTES;
	sge.lkey = rl->dev->pd->local_dma_lkey;
	wr.wr_cqe = &r->cqe;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return engram_post_recv(rl->qp, &wr, NULL);
}

static void engram_link_rdma_frame(struct engram_link *l, struct engram_link_rdma_recv *r, u32 len);

static void engram_link_rdma_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link_rdma_recv *r = container_of(wc->wr_cqe, struct engram_link_rdma_recv,
						       cqe);
	struct engram_link *l = r->link;
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned long flags;

	if (wc->status != IB_WC_SUCCESS) {
		engram_link_rdma_fail_wc(l, wc, "receive");
		return;
	}
	r->inv = wc->wc_flags & IB_WC_WITH_INVALIDATE;
	r->inv_rkey = wc->ex.invalidate_rkey;
	engram_link_heard(l);
	ib_dma_sync_single_for_cpu(rl->dev->ibdev, r->dma, ENGRAM_WIRE_MAX_CATALOG_BYTES,
				   DMA_FROM_DEVICE);
	/*
	 * The server may send its catalog as soon as it sees our RTU, which
	 * can be before the connect worker has read its hello: keep the
	 * frame for the worker.  While the worker reads the early frames,
	 * later ones queue behind them, or a newer catalog read here could
	 * be overwritten by an older one the worker reads afterwards.
	 */
	spin_lock_irqsave(&l->lock, flags);
	if (!l->live || rl->early_draining) {
		r->early_len = wc->byte_len;
		list_add_tail(&r->early, &rl->early);
		spin_unlock_irqrestore(&l->lock, flags);
		return;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_rdma_frame(l, r, wc->byte_len);
}

static void engram_link_rdma_frame(struct engram_link *l, struct engram_link_rdma_recv *r, u32 len)
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
		ret = engram_link_rdma_response(l, r, len);
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
	if (ret || engram_link_rdma_post_recv(l, r))
		engram_link_fail(l, -ECONNRESET);
}

/* --- connection setup and teardown --- */

static int engram_link_rdma_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct engram_link *l = id->context;
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	int error = 0;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		memset(rl->rep, 0, sizeof(rl->rep));
		if (ev->param.conn.private_data)
			memcpy(rl->rep, ev->param.conn.private_data,
			       min_t(u32, ev->param.conn.private_data_len, sizeof(rl->rep)));
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
	rl->cm_error = error;
	complete(&rl->cm_done);
	return 0;
}

static int engram_link_rdma_cm_wait(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);

	if (!wait_for_completion_timeout(&rl->cm_done,
					 msecs_to_jiffies(ENGRAM_LINK_CM_TIMEOUT_MS)))
		return -ETIMEDOUT;
	reinit_completion(&rl->cm_done);
	return rl->cm_error;
}

static void engram_link_rdma_free_bufs(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct ib_device *ibdev = rl->dev->ibdev;
	unsigned int i;

	for (i = 0; rl->recvs && i < rl->nr_recvs; i++) {
		if (rl->recvs[i].dma)
			ib_dma_unmap_single(ibdev, rl->recvs[i].dma,
					    ENGRAM_WIRE_MAX_CATALOG_BYTES, DMA_FROM_DEVICE);
		kfree(rl->recvs[i].buf);
	}
	kfree(rl->recvs);
	rl->recvs = NULL;
	for (i = 0; rl->slots && i < rl->nr_slots; i++) {
		struct engram_link_rdma_slot *sl = &rl->slots[i];
		unsigned int p;

		/* After the QP: no work request names the MR any more. */
		if (sl->mr)
			ib_dereg_mr(sl->mr);
		for (p = 0; p < sl->nr_mapped; p++)
			ib_dma_unmap_page(ibdev, sl->dma[p], PAGE_SIZE, DMA_TO_DEVICE);
		kfree(sl->dma);
		vfree(sl->buf);
		kfree(sl->sgl);
	}
	kfree(rl->slots);
	rl->slots = NULL;
	if (rl->hb_dma)
		ib_dma_unmap_single(ibdev, rl->hb_dma, ENGRAM_WIRE_HDR_BYTES, DMA_TO_DEVICE);
	rl->hb_dma = 0;
	kfree(rl->hb_buf);
	rl->hb_buf = NULL;
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
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	LIST_HEAD(done);

	if (rl->qp) {
		rdma_disconnect(rl->cm_id);
		ib_drain_qp(rl->qp);
		/* Off the wire (MRs back in the pool), but nobody told yet... */
		engram_link_finish_all(l, error, &done);
		ib_mr_pool_destroy(rl->qp, &rl->mrs);
		rdma_destroy_qp(rl->cm_id);
		rl->qp = NULL;
		/* ...until their keys are gone with the MRs and the QP. */
		engram_link_publish_all(&done);
	}
	l->mr_pages = 0;
	if (rl->cq) {
		ib_free_cq(rl->cq);
		rl->cq = NULL;
	}
	if (rl->dev) {
		engram_link_rdma_free_bufs(l);
		engram_dev_close(rl->dev);
		rl->dev = NULL;
	}
	if (rl->cm_id) {
		rdma_destroy_id(rl->cm_id);
		rl->cm_id = NULL;
	}
	INIT_LIST_HEAD(&rl->early);
	rl->early_draining = false;
}

static int engram_link_rdma_alloc_recvs(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct ib_device *ibdev = rl->dev->ibdev;
	unsigned int i;

	rl->nr_recvs = ENGRAM_WIRE_OFFER_INFLIGHT + ENGRAM_LINK_EXTRA_RECVS;
	rl->recvs = kcalloc(rl->nr_recvs, sizeof(*rl->recvs), GFP_KERNEL);
	if (!rl->recvs)
		return -ENOMEM;
	for (i = 0; i < rl->nr_recvs; i++) {
		struct engram_link_rdma_recv *r = &rl->recvs[i];

		r->link = l;
		r->cqe.done = engram_link_rdma_recv_done;
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
static int engram_link_rdma_alloc_slot(struct engram_link *l, struct engram_link_rdma_slot *sl,
				       unsigned int pages, struct scatterlist *sgl)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct ib_device *ibdev = rl->dev->ibdev;
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
	sl->mr = engram_alloc_mr(rl->dev->pd, IB_MR_TYPE_MEM_REG, pages);
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
	struct engram_link_rdma *rl = container_of(wc->wr_cqe, struct engram_link_rdma,
						      slot_reg_cqe);

	rl->slot_reg_status = wc->status;
	complete(&rl->slot_reg_done);
}

/*
 * Register every slot's MR: REG_MRs on the send queue, which is empty and
 * in RTS once connected, the last one signaled.  Waited for, so that the
 * queue is empty again when fetches start and its sizing (per ticket)
 * holds.
 */
static int engram_link_rdma_reg_slots(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct ib_reg_wr *regs;
	unsigned int i;
	int ret;

	regs = kcalloc(rl->nr_slots, sizeof(*regs), GFP_KERNEL);
	if (!regs)
		return -ENOMEM;
	for (i = 0; i < rl->nr_slots; i++) {
		regs[i].wr.opcode = IB_WR_REG_MR;
		regs[i].wr.wr_cqe = &rl->reg_cqe;
		regs[i].wr.next = i + 1 < rl->nr_slots ? &regs[i + 1].wr : NULL;
		regs[i].mr = rl->slots[i].mr;
		regs[i].key = rl->slots[i].mr->lkey;
		/* The device only reads it: no remote right, no key handed out. */
		regs[i].access = IB_ACCESS_LOCAL_WRITE;
	}
	regs[rl->nr_slots - 1].wr.send_flags = IB_SEND_SIGNALED;
	regs[rl->nr_slots - 1].wr.wr_cqe = &rl->slot_reg_cqe;
	reinit_completion(&rl->slot_reg_done);
	ret = engram_post_send(rl->qp, &regs[0].wr, NULL);
	kfree(regs);	/* the device copied the WRs when they were posted */
	if (ret)
		return ret;
	if (!wait_for_completion_timeout(&rl->slot_reg_done,
					 msecs_to_jiffies(ENGRAM_LINK_CM_TIMEOUT_MS)))
		return -ETIMEDOUT;	/* teardown's drain flushes it */
	return rl->slot_reg_status == IB_WC_SUCCESS ? 0 : -EIO;
}

static int engram_link_rdma_alloc_slots(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned int i, pages = DIV_ROUND_UP(l->neg.max_request_bytes, PAGE_SIZE);
	struct scatterlist *sgl;
	int ret = 0;

	if (pages > rl->dev->ibdev->attrs.max_fast_reg_page_list_len) {
		pr_warn("link %u: a request of %u bytes does not fit one registration on %s\n",
			l->id, l->neg.max_request_bytes, dev_name(&rl->dev->ibdev->dev));
		return -E2BIG;
	}
	rl->nr_slots = l->neg.max_inflight;
	rl->slots = kcalloc(rl->nr_slots, sizeof(*rl->slots), GFP_KERNEL);
	sgl = kmalloc_array(pages, sizeof(*sgl), GFP_KERNEL);
	if (!rl->slots || !sgl)
		ret = -ENOMEM;
	for (i = 0; !ret && i < rl->nr_slots; i++)
		ret = engram_link_rdma_alloc_slot(l, &rl->slots[i], pages, sgl);
	kfree(sgl);
	return ret ?: engram_link_rdma_reg_slots(l);
}

/* Queue pair, MR pool and receives for the device the route chose. */
static int engram_link_rdma_create_qp(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct ib_device *ibdev = rl->cm_id->device;
	struct ib_qp_init_attr init = {};
	unsigned int sq, i;
	int ret;

	/* A PD of this connection's own: its rkeys work on no other QP. */
	rl->dev = engram_dev_open(ibdev);
	if (!rl->dev)
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
	rl->cq = engram_alloc_cq(ibdev, l, sq + ENGRAM_WIRE_OFFER_INFLIGHT +
			    ENGRAM_LINK_EXTRA_RECVS + 2, 0, IB_POLL_SOFTIRQ);
	if (IS_ERR(rl->cq)) {
		ret = PTR_ERR(rl->cq);
		rl->cq = NULL;
		return ret;
	}
	init.event_handler = NULL;
	init.qp_context = l;
	init.send_cq = rl->cq;
	init.recv_cq = rl->cq;
	init.cap.max_send_wr = sq;
	init.cap.max_recv_wr = ENGRAM_WIRE_OFFER_INFLIGHT + ENGRAM_LINK_EXTRA_RECVS + 1;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	init.sq_sig_type = IB_SIGNAL_REQ_WR;
	init.qp_type = IB_QPT_RC;
	ret = engram_create_qp(rl->cm_id, rl->dev->pd, &init);
	if (ret)
		return ret;
	rl->qp = rl->cm_id->qp;

	l->mr_pages = min_t(u32, ibdev->attrs.max_fast_reg_page_list_len,
			    ENGRAM_LINK_MR_PAGES);
	INIT_LIST_HEAD(&rl->mrs);
	ret = ib_mr_pool_init(rl->qp, &rl->mrs, ENGRAM_WIRE_OFFER_INFLIGHT * ENGRAM_WIRE_MAX_RANGES,
			      IB_MR_TYPE_MEM_REG, l->mr_pages, 0);
	if (ret)
		return ret;
	ret = engram_link_rdma_alloc_recvs(l);
	if (ret)
		return ret;
	rl->hb_buf = kzalloc(ENGRAM_WIRE_HDR_BYTES, GFP_KERNEL);
	if (!rl->hb_buf)
		return -ENOMEM;
	rl->hb_dma = engram_dma_map_single(ibdev, rl->hb_buf, ENGRAM_WIRE_HDR_BYTES, DMA_TO_DEVICE);
	if (engram_dma_mapping_error(ibdev, rl->hb_dma)) {
		rl->hb_dma = 0;
		return -ENOMEM;
	}
	rl->hb_busy = false;
	for (i = 0; i < rl->nr_recvs; i++) {
		ret = engram_link_rdma_post_recv(l, &rl->recvs[i]);
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

static int engram_link_rdma_connect(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct engram_wire_params local, answer;
	struct rdma_conn_param param = {};
	u8 hello[ENGRAM_WIRE_HELLO_BYTES];
	unsigned int hold;
	unsigned long flags;
	char err[96];
	int ret;

	lockdep_assert_held(&l->mutex);
	reinit_completion(&rl->cm_done);
	rl->cm_id = engram_create_id(&init_net, engram_link_rdma_cm_handler, l, RDMA_PS_TCP,
				     IB_QPT_RC);
	if (IS_ERR(rl->cm_id)) {
		ret = PTR_ERR(rl->cm_id);
		rl->cm_id = NULL;
		return ret;
	}
	ret = rdma_resolve_addr(rl->cm_id, (struct sockaddr *)&l->url.local,
				(struct sockaddr *)&l->url.addr, ENGRAM_LINK_CM_TIMEOUT_MS);
	if (!ret)
		ret = engram_link_rdma_cm_wait(l);
	if (!ret)
		ret = rdma_resolve_route(rl->cm_id, ENGRAM_LINK_CM_TIMEOUT_MS);
	if (!ret)
		ret = engram_link_rdma_cm_wait(l);
	if (ret)
		return ret;
	ret = engram_link_rdma_create_qp(l);
	if (ret)
		return ret;

	engram_link_local_params(&local);
	engram_wire_hello_encode(hello, sizeof(hello), &local);
	param.private_data = hello;
	param.private_data_len = sizeof(hello);
	param.retry_count = 7;
	param.rnr_retry_count = 7;
	ret = rdma_connect(rl->cm_id, &param);
	if (!ret)
		ret = engram_link_rdma_cm_wait(l);
	if (ret)
		return ret;
	if (engram_wire_hello_decode(rl->rep, sizeof(rl->rep), &answer, err, sizeof(err)) ||
	    engram_wire_check_answer(&local, &answer, err, sizeof(err))) {
		pr_warn("link %u: server's answer refused: %s\n", l->id, err);
		return -EPROTO;
	}
	l->neg = answer;
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
	engram_link_rdma_fault_hold(hold);
	engram_link_rdma_drain_early(l);
	return 0;
}

/* --- fetches --- */

/* Post the REG_MRs and the SEND of a fetch whose pieces have MRs. */
static int engram_link_rdma_post_fetch(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct engram_link_rdma_slot *slot = &rl->slots[f->slot];
	struct ib_reg_wr *regs = f->reg_wrs;
	struct ib_send_wr send = {};
	struct ib_sge sge;
	unsigned int i;
	u32 left, n;

	memset(regs, 0, sizeof(regs[0]) * f->nr_pieces);
	for (i = 0; i < f->nr_pieces; i++) {
		struct ib_mr *mr = f->pieces[i].mr;

		regs[i].wr.opcode = IB_WR_REG_MR;
		regs[i].wr.wr_cqe = &rl->reg_cqe;
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
		ib_dma_sync_single_for_device(rl->dev->ibdev, slot->dma[i], n, DMA_TO_DEVICE);
	}
	if (engram_fault_client_req_fail())
		return -EIO;
	return engram_post_send(rl->qp, &regs[0].wr, NULL);
}

/* Fast-register one piece of the destination, exposing exactly its bytes. */
static int engram_link_rdma_map_piece(struct engram_link *l, struct engram_piece *p,
				      struct scatterlist *sgl)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	const dma_addr_t *dma = engram_ubuf_dma(p->buf, rl->dev->ibdev);
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
		if (ib_uses_virt_dma(rl->dev->ibdev) &&
		    WARN_ON_ONCE(dma[first + i] !=
				 (uintptr_t)page_address(p->buf->pages[first + i])))
			return -EIO;
		sg_dma_address(&sgl[i]) = dma[first + i];
		sg_dma_len(&sgl[i]) = PAGE_SIZE;
	}
	sg_dma_len(&sgl[n - 1]) = start + p->len - ((u64)last << PAGE_SHIFT);
	if (n == 1)
		sg_dma_len(&sgl[0]) = sg_off + p->len;
	p->mr = ib_mr_pool_get(rl->qp, &rl->mrs);
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
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct scatterlist *sgl = rl->slots[f->slot].sgl;
	struct engram_wire_req req;
	unsigned long flags;
	unsigned int i;
	int ret;

	f->ibdev = rl->dev->ibdev;
	for (i = 0; i < f->nr_pieces; i++) {
		ret = engram_link_rdma_map_piece(l, &f->pieces[i], sgl);
		if (ret)
			goto err_pieces;
		engram_ubuf_sync(f->pieces[i].buf, rl->dev->ibdev, f->pieces[i].off,
				 f->pieces[i].len, true);
	}
	engram_link_fetch_req(f, &req);
	for (i = 0; i < f->nr_pieces; i++) {
		req.ranges[i].addr = f->pieces[i].mr->iova;
		req.ranges[i].rkey = f->pieces[i].mr->rkey;
	}
	/* The key a version 2 server invalidates with its RESPONSE. */
	f->rkey0 = f->pieces[0].mr->rkey;
	ret = engram_wire_req_build(rl->slots[f->slot].buf, l->neg.max_request_bytes,
				    &l->neg, &req, f->rows);
	if (ret < 0)
		goto err_pieces;
	f->req_len = ret;

	f->send_cqe.done = engram_link_rdma_send_done;
	f->inv_cqe.done = engram_link_rdma_inv_done;
	/* The SEND, and each MR's invalidation (a LOCAL_INV, or the RESPONSE). */
	atomic_set(&f->wire_refs, 1 + f->nr_pieces);
	ret = engram_link_track(l, f);
	if (ret)
		goto err_pieces;
	ret = engram_link_rdma_post_fetch(l, f);
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
	return ret;

err_pieces:
	spin_lock_irqsave(&l->lock, flags);
	for (i = 0; i < f->nr_pieces; i++) {
		if (f->pieces[i].mr)
			ib_mr_pool_put(rl->qp, &rl->mrs, f->pieces[i].mr);
		f->pieces[i].mr = NULL;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	return ret;
}

/* The RDMA transport's heartbeat: a SEND of the header from its own buffer. */
static int engram_link_rdma_heartbeat(struct engram_link *l, u64 ticket)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	struct ib_send_wr wr = {};
	unsigned long flags;
	struct ib_sge sge;
	int len;

	spin_lock_irqsave(&l->lock, flags);
	if (rl->hb_busy) {
		spin_unlock_irqrestore(&l->lock, flags);
		return -EBUSY;
	}
	rl->hb_busy = true;
	spin_unlock_irqrestore(&l->lock, flags);
	len = engram_wire_simple_encode(rl->hb_buf, ENGRAM_WIRE_HDR_BYTES, &l->neg,
					ENGRAM_WIRE_HEARTBEAT, ticket);
	if (WARN_ON_ONCE(len < 0))
		return len;
	ib_dma_sync_single_for_device(rl->dev->ibdev, rl->hb_dma, len, DMA_TO_DEVICE);
	sge.addr = rl->hb_dma;
	sge.length = len;
	sge.lkey = rl->dev->pd->local_dma_lkey;
	wr.opcode = IB_WR_SEND;
	wr.send_flags = IB_SEND_SIGNALED;
	wr.wr_cqe = &rl->hb_cqe;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return engram_post_send(rl->qp, &wr, NULL) ? -EIO : 0;
}

/* Give a finished fetch's MRs back to the pool; l->lock held. */
static void engram_link_rdma_put_fetch(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);
	unsigned int i;

	for (i = 0; i < f->nr_pieces; i++) {
		if (f->pieces[i].mr)
			ib_mr_pool_put(rl->qp, &rl->mrs, f->pieces[i].mr);
		f->pieces[i].mr = NULL;
	}
}

static const char *engram_link_rdma_device(struct engram_link *l)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);

	return rl->dev ? dev_name(&rl->dev->ibdev->dev) : NULL;
}

static bool engram_link_rdma_on_device(struct engram_link *l, struct ib_device *ibdev)
{
	struct engram_link_rdma *rl = engram_link_rdma_of(l);

	return rl->dev && rl->dev->ibdev == ibdev;
}

static struct engram_link *engram_link_rdma_alloc(void)
{
	struct engram_link_rdma *rl = kzalloc(sizeof(*rl), GFP_KERNEL);

	if (!rl)
		return NULL;
	init_completion(&rl->cm_done);
	INIT_LIST_HEAD(&rl->early);
	rl->reg_cqe.done = engram_link_rdma_reg_done;
	rl->slot_reg_cqe.done = engram_link_rdma_slot_reg_done;
	init_completion(&rl->slot_reg_done);
	rl->hb_cqe.done = engram_link_rdma_hb_send_done;
	return &rl->link;
}

static void engram_link_rdma_free(struct engram_link *l)
{
	kfree(engram_link_rdma_of(l));
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
