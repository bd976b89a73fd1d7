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
 * flight) and retried with backoff.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/idr.h>
#include <linux/jiffies.h>
#include <linux/netlink.h>
#include <linux/random.h>
#include <linux/rwsem.h>
#include <linux/scatterlist.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/xarray.h>
#include <rdma/mr_pool.h>
#include <rdma/rdma_cm.h>

#include "client.h"

/* What a client offers; the server may lower every limit. */
#define ENGRAM_LINK_MAX_ROWS		65536
#define ENGRAM_LINK_MAX_INFLIGHT	16
/* Receives: one per ticket, plus room for unsolicited catalogs. */
#define ENGRAM_LINK_EXTRA_RECVS		4
/* Pages one MR maps at most, whatever the device allows. */
#define ENGRAM_LINK_MR_PAGES		512
#define ENGRAM_LINK_CM_TIMEOUT_MS	3000
#define ENGRAM_LINK_RETRY_MIN_MS	200
#define ENGRAM_LINK_RETRY_MAX_MS	5000
/* How long a closing fd waits for a fetch before it breaks the connection. */
#define ENGRAM_LINK_CLOSE_WAIT_MS	2000

struct engram_link_recv {
	struct ib_cqe cqe;
	struct list_head early;		/* on engram_link.early */
	u32 early_len;
	struct engram_link *link;
	void *buf;
	u64 dma;
};

struct engram_link_slot {
	void *buf;
	u64 dma;
	bool busy;
};

struct engram_link {
	struct kref ref;
	struct list_head node;		/* on engram_links, until deleted */
	u32 id;
	struct engram_url url;
	bool deleted;			/* stopped: no reconnect (under mutex) */
	bool removing;			/* being deleted (under engram_links_mutex) */

	struct mutex mutex;		/* connect and teardown */
	struct rw_semaphore conn_sem;	/* submit (read) vs teardown (write) */
	spinlock_t lock;		/* state, catalog, tickets, slots */
	u8 state;
	int error;
	ktime_t since;
	u64 connects;
	unsigned int backoff_ms;
	struct engram_counters stats;
	struct engram_hist lat;
	struct ib_cqe reg_cqe;		/* failures of REG_MR WRs */

	/* the connection, set up and torn down under mutex */
	struct rdma_cm_id *cm_id;
	struct completion cm_done;
	int cm_error;
	u8 rep[ENGRAM_WIRE_HELLO_BYTES];
	struct engram_dev *dev;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct list_head mrs;
	u32 mr_pages;
	struct engram_wire_params neg;
	struct engram_link_recv *recvs;
	unsigned int nr_recvs;
	struct engram_link_slot *slots;
	unsigned int nr_slots;
	u32 conn_gen;
	bool live;			/* negotiated: frames can be read, fetches posted */
	/* Frames that arrived before the connect worker read the server's hello. */
	struct list_head early;

	struct engram_wire_table *catalog;
	u32 nr_catalog;
	struct xarray fetches;		/* ticket -> fetch on the wire */
	u64 next_ticket;

	struct delayed_work connect_work;
	struct work_struct down_work;
};

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

static void engram_link_schedule_connect(struct engram_link *l)
{
	unsigned int ms = l->backoff_ms;

	if (l->deleted || READ_ONCE(engram_links_exiting))
		return;
	/* Jitter, so that clients of one server do not reconnect in step. */
	ms += get_random_u32_below(ms / 2 + 1);
	l->backoff_ms = min(l->backoff_ms * 2, ENGRAM_LINK_RETRY_MAX_MS);
	queue_delayed_work(engram_link_wq, &l->connect_work, msecs_to_jiffies(ms));
}

/* --- completions --- */

/*
 * Off the wire: MRs back to the pool, slot free, result final.  Called with
 * l->lock held, when the SEND and every invalidation have completed, or by
 * teardown once the queue pair is drained.  The caller publishes the result
 * with engram_link_publish() after dropping l->lock.
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

	WARN_ON_ONCE(kref_put(&f->ref, engram_fetch_release_never));
	spin_lock_irqsave(&wq->lock, flags);
	engram_fetch_set_done(f);
	wake_up_locked(wq);
	spin_unlock_irqrestore(&wq->lock, flags);
}

static void engram_link_wire_put(struct engram_link *l, struct engram_fetch *f)
{
	unsigned long flags;
	bool fin;

	if (!atomic_dec_and_test(&f->wire_refs))
		return;
	spin_lock_irqsave(&l->lock, flags);
	fin = engram_link_finish_locked(l, f);
	spin_unlock_irqrestore(&l->lock, flags);
	if (fin)
		engram_link_publish(f);
}

static void engram_link_fail_wc(struct engram_link *l, struct ib_wc *wc, const char *what)
{
	if (wc->status == IB_WC_WR_FLUSH_ERR)
		return;
	engram_count(&engram_global_stats, ENGRAM_STAT_TRANSPORT_ERRORS);
	pr_warn_ratelimited("link %u: %s failed: %s (%d)\n", l->id, what,
			    ib_wc_status_msg(wc->status), wc->status);
	queue_work(engram_link_wq, &l->down_work);
}

/* REG_MRs are unsignaled and report only failures, on the link's cqe. */
static void engram_link_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_link *l = container_of(wc->wr_cqe, struct engram_link, reg_cqe);

	if (wc->status != IB_WC_SUCCESS)
		engram_link_fail_wc(l, wc, "memory registration");
}

static void engram_link_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_fetch *f = container_of(wc->wr_cqe, struct engram_fetch, send_cqe);
	struct engram_link *l = f->link;

	if (wc->status != IB_WC_SUCCESS) {
		if (!f->error)
			f->error = -ECONNRESET;
		engram_link_fail_wc(l, wc, "request send");
	}
	engram_link_wire_put(l, f);
}

static void engram_link_inv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_fetch *f = container_of(wc->wr_cqe, struct engram_fetch, inv_cqe);
	struct engram_link *l = f->link;

	if (wc->status != IB_WC_SUCCESS) {
		if (!f->error)
			f->error = -ECONNRESET;
		engram_link_fail_wc(l, wc, "invalidation");
	}
	engram_link_wire_put(l, f);
}

/*
 * Invalidate every MR of a fetch.  Every WR is signaled and holds one
 * wire_ref: a flushed chain completes each of them, signaled or not.
 * Called under l->lock while the link is live, so teardown's drain marker
 * always comes after these WRs.  If posting fails the fetch stays on the
 * wire, unfinished, for teardown to end once the QP (and its keys) is gone:
 * it must not complete while a key of it may still be valid.
 */
static void engram_link_invalidate(struct engram_link *l, struct engram_fetch *f)
{
	struct ib_send_wr wrs[ENGRAM_WIRE_MAX_RANGES];
	unsigned int i, n = f->nr_pieces;

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
	if (ib_post_send(l->qp, wrs, NULL)) {
		if (!f->error)
			f->error = -ECONNRESET;
		queue_work(engram_link_wq, &l->down_work);
	}
}

static void engram_link_response(struct engram_link *l, const void *buf, u32 len)
{
	struct engram_wire_resp resp;
	struct engram_fetch *f;
	unsigned long flags;
	char err[96];
	int ret;

	ret = engram_wire_resp_decode(buf, len, &l->neg, false, &resp, err, sizeof(err));
	if (ret) {
		pr_warn_ratelimited("link %u: bad response: %s\n", l->id, err);
		queue_work(engram_link_wq, &l->down_work);
		return;
	}
	spin_lock_irqsave(&l->lock, flags);
	f = xa_load(&l->fetches, resp.ticket);
	if (!f || f->responded || f->conn_gen != l->conn_gen) {
		spin_unlock_irqrestore(&l->lock, flags);
		pr_warn_ratelimited("link %u: response to unknown ticket %llu\n",
				    l->id, resp.ticket);
		queue_work(engram_link_wq, &l->down_work);
		return;
	}
	f->responded = true;
	f->wire_status = resp.status;
	f->bad_index = resp.bad_index;
	if (resp.status == ENGRAM_WIRE_OK &&
	    resp.bytes != (u64)f->nr_rows * ENGRAM_ROW_BYTES)
		f->error = -EPROTO;
	else
		f->error = engram_status_errno(resp.status);
	if (resp.status != ENGRAM_WIRE_OK)
		engram_count_refusal(&l->stats, resp.status);
	/* Not live: teardown is draining and will end the fetch itself. */
	if (l->live)
		engram_link_invalidate(l, f);
	spin_unlock_irqrestore(&l->lock, flags);
}

static void engram_link_catalog(struct engram_link *l, const void *buf, u32 len)
{
	struct engram_wire_catalog_view cat;
	unsigned long flags;
	char err[96];
	u32 i;

	if (engram_wire_catalog_parse(buf, len, &l->neg, &cat, err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad catalog: %s\n", l->id, err);
		queue_work(engram_link_wq, &l->down_work);
		return;
	}
	spin_lock_irqsave(&l->lock, flags);
	for (i = 0; i < cat.nr_entries; i++)
		engram_wire_catalog_get(&cat, i, &l->catalog[i]);
	l->nr_catalog = cat.nr_entries;
	if (l->state == ENGRAM_LINK_CONNECTING && l->live) {
		l->state = ENGRAM_LINK_UP;
		l->since = ktime_get();
		l->backoff_ms = ENGRAM_LINK_RETRY_MIN_MS;
	}
	spin_unlock_irqrestore(&l->lock, flags);
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
	return ib_post_recv(l->qp, &wr, NULL);
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
	ib_dma_sync_single_for_cpu(l->dev->ibdev, r->dma, ENGRAM_WIRE_MAX_CATALOG_BYTES,
				   DMA_FROM_DEVICE);
	/*
	 * The server may send its catalog as soon as it sees our RTU, which
	 * can be before the connect worker has read its hello: keep the
	 * frame for the worker.
	 */
	spin_lock_irqsave(&l->lock, flags);
	if (!l->live) {
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

	if (engram_wire_hdr_check(r->buf, len, &l->neg, false, false, &hdr,
				  err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad frame: %s\n", l->id, err);
		queue_work(engram_link_wq, &l->down_work);
		return;
	}
	switch (hdr.type) {
	case ENGRAM_WIRE_RESPONSE:
		engram_link_response(l, r->buf, len);
		break;
	case ENGRAM_WIRE_CATALOG:
		engram_link_catalog(l, r->buf, len);
		break;
	default:
		/* HEARTBEAT echoes: liveness is the next step's business. */
		break;
	}
	if (engram_link_post_recv(l, r))
		queue_work(engram_link_wq, &l->down_work);
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
		queue_work(engram_link_wq, &l->down_work);
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
		if (l->slots[i].dma)
			ib_dma_unmap_single(ibdev, l->slots[i].dma,
					    l->neg.max_request_bytes, DMA_TO_DEVICE);
		kfree(l->slots[i].buf);
	}
	kfree(l->slots);
	l->slots = NULL;
}

/*
 * Tear the connection down: no new fetch, disconnect, drain (every WR
 * completes, flushed), fail what was in flight, free.  After this no WRITE
 * of the old connection can reach any buffer: its QP and MRs are gone.
 */
static void engram_link_teardown(struct engram_link *l, int error)
{
	struct engram_fetch *f, *tmp;
	unsigned long flags, idx;
	LIST_HEAD(done);

	lockdep_assert_held(&l->mutex);
	down_write(&l->conn_sem);
	spin_lock_irqsave(&l->lock, flags);
	l->live = false;
	spin_unlock_irqrestore(&l->lock, flags);
	if (l->qp) {
		rdma_disconnect(l->cm_id);
		ib_drain_qp(l->qp);
		spin_lock_irqsave(&l->lock, flags);
		xa_for_each(&l->fetches, idx, f) {
			if (!f->error)
				f->error = error;
			if (engram_link_finish_locked(l, f))
				list_add_tail(&f->done_node, &done);
		}
		spin_unlock_irqrestore(&l->lock, flags);
		list_for_each_entry_safe(f, tmp, &done, done_node)
			engram_link_publish(f);
		ib_mr_pool_destroy(l->qp, &l->mrs);
		rdma_destroy_qp(l->cm_id);
		l->qp = NULL;
	}
	if (l->cq) {
		ib_free_cq(l->cq);
		l->cq = NULL;
	}
	if (l->dev) {
		engram_link_free_bufs(l);
		engram_dev_put(l->dev);
		l->dev = NULL;
	}
	if (l->cm_id) {
		rdma_destroy_id(l->cm_id);
		l->cm_id = NULL;
	}
	spin_lock_irqsave(&l->lock, flags);
	l->nr_catalog = 0;
	INIT_LIST_HEAD(&l->early);
	spin_unlock_irqrestore(&l->lock, flags);
	up_write(&l->conn_sem);
}

static int engram_link_alloc_recvs(struct engram_link *l)
{
	struct ib_device *ibdev = l->dev->ibdev;
	unsigned int i;

	l->nr_recvs = ENGRAM_LINK_MAX_INFLIGHT + ENGRAM_LINK_EXTRA_RECVS;
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
		r->dma = ib_dma_map_single(ibdev, r->buf, ENGRAM_WIRE_MAX_CATALOG_BYTES,
					   DMA_FROM_DEVICE);
		if (ib_dma_mapping_error(ibdev, r->dma)) {
			r->dma = 0;
			return -ENOMEM;
		}
	}
	return 0;
}

static int engram_link_alloc_slots(struct engram_link *l)
{
	struct ib_device *ibdev = l->dev->ibdev;
	unsigned int i;

	l->nr_slots = l->neg.max_inflight;
	l->slots = kcalloc(l->nr_slots, sizeof(*l->slots), GFP_KERNEL);
	if (!l->slots)
		return -ENOMEM;
	for (i = 0; i < l->nr_slots; i++) {
		struct engram_link_slot *s = &l->slots[i];

		s->buf = kmalloc(l->neg.max_request_bytes, GFP_KERNEL);
		if (!s->buf)
			return -ENOMEM;
		s->dma = ib_dma_map_single(ibdev, s->buf, l->neg.max_request_bytes,
					   DMA_TO_DEVICE);
		if (ib_dma_mapping_error(ibdev, s->dma)) {
			s->dma = 0;
			return -ENOMEM;
		}
	}
	return 0;
}

static void engram_link_local_params(struct engram_wire_params *p)
{
	p->version_min = ENGRAM_WIRE_VERSION_MIN;
	p->version_max = ENGRAM_WIRE_VERSION;
	p->max_inflight = ENGRAM_LINK_MAX_INFLIGHT;
	p->max_ranges = ENGRAM_WIRE_MAX_RANGES;
	p->max_rows = ENGRAM_LINK_MAX_ROWS;
	p->max_request_bytes = engram_wire_request_size(ENGRAM_LINK_MAX_ROWS,
							ENGRAM_WIRE_MAX_RANGES);
}

/* Queue pair, MR pool and receives for the device the route chose. */
static int engram_link_create_qp(struct engram_link *l)
{
	struct ib_device *ibdev = l->cm_id->device;
	struct ib_qp_init_attr init = {};
	unsigned int sq, i;
	int ret;

	l->dev = engram_dev_get(ibdev);
	if (!l->dev)
		return -ENOMEM;
	if (!(ibdev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS)) {
		pr_warn("link %u: %s has no fast registration\n", l->id, dev_name(&ibdev->dev));
		return -EOPNOTSUPP;
	}
	/* Per ticket: one REG_MR and one LOCAL_INV per range, one SEND. */
	sq = ENGRAM_LINK_MAX_INFLIGHT * (2 * ENGRAM_WIRE_MAX_RANGES + 1) + 1;
	sq = min_t(unsigned int, sq, ibdev->attrs.max_qp_wr);
	l->cq = ib_alloc_cq(ibdev, l, sq + ENGRAM_LINK_MAX_INFLIGHT +
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
	init.cap.max_recv_wr = ENGRAM_LINK_MAX_INFLIGHT + ENGRAM_LINK_EXTRA_RECVS + 1;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	init.sq_sig_type = IB_SIGNAL_REQ_WR;
	init.qp_type = IB_QPT_RC;
	ret = rdma_create_qp(l->cm_id, l->dev->pd, &init);
	if (ret)
		return ret;
	l->qp = l->cm_id->qp;

	l->mr_pages = min_t(u32, ibdev->attrs.max_fast_reg_page_list_len,
			    ENGRAM_LINK_MR_PAGES);
	INIT_LIST_HEAD(&l->mrs);
	ret = ib_mr_pool_init(l->qp, &l->mrs, ENGRAM_LINK_MAX_INFLIGHT * ENGRAM_WIRE_MAX_RANGES,
			      IB_MR_TYPE_MEM_REG, l->mr_pages, 0);
	if (ret)
		return ret;
	ret = engram_link_alloc_recvs(l);
	if (ret)
		return ret;
	for (i = 0; i < l->nr_recvs; i++) {
		ret = engram_link_post_recv(l, &l->recvs[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static int engram_link_connect(struct engram_link *l)
{
	struct engram_wire_params local, answer;
	struct engram_link_recv *r, *tmp;
	struct rdma_conn_param param = {};
	LIST_HEAD(early);
	u8 hello[ENGRAM_WIRE_HELLO_BYTES];
	unsigned long flags;
	char err[96];
	int ret;

	lockdep_assert_held(&l->mutex);
	reinit_completion(&l->cm_done);
	l->cm_id = rdma_create_id(&init_net, engram_link_cm_handler, l, RDMA_PS_TCP,
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
	spin_lock_irqsave(&l->lock, flags);
	l->conn_gen++;
	l->live = true;
	l->connects++;
	list_splice_init(&l->early, &early);
	spin_unlock_irqrestore(&l->lock, flags);
	list_for_each_entry_safe(r, tmp, &early, early) {
		list_del(&r->early);
		engram_link_frame(l, r, r->early_len);
	}
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
	engram_link_set_state(l, ENGRAM_LINK_CONNECTING, 0);
	ret = engram_link_connect(l);
	if (ret) {
		engram_link_teardown(l, -ENOTCONN);
		engram_link_set_state(l, ENGRAM_LINK_DOWN, ret);
		pr_info_ratelimited("link %u (%s): connect failed (%d), retrying\n",
				    l->id, l->url.text, ret);
		engram_link_schedule_connect(l);
	} else {
		pr_info("link %u (%s): connected on %s\n", l->id, l->url.text,
			dev_name(&l->dev->ibdev->dev));
	}
	mutex_unlock(&l->mutex);
}

/* Connection lost or broken: tear down, then retry. */
static void engram_link_down(struct engram_link *l, int error)
{
	bool was_live;

	mutex_lock(&l->mutex);
	was_live = l->live;
	if (l->cm_id && was_live) {
		engram_link_teardown(l, error);
		engram_link_set_state(l, ENGRAM_LINK_DOWN, error);
		pr_info("link %u (%s): down (%d)\n", l->id, l->url.text, error);
		engram_link_schedule_connect(l);
	}
	mutex_unlock(&l->mutex);
}

static void engram_link_down_work(struct work_struct *work)
{
	engram_link_down(container_of(work, struct engram_link, down_work), -ECONNRESET);
}

/**
 * engram_link_break() - break a link's connection on purpose
 * @l: the link
 * @error: what its fetches in flight fail with (-ETIMEDOUT for a deadline)
 *
 * Synchronous: when it returns, the old queue pair is drained and destroyed,
 * so no WRITE of it can land any more.  Process context.
 */
void engram_link_break(struct engram_link *l, int error)
{
	engram_link_down(l, error);
}

/* --- fetches --- */

/* Post the REG_MRs and the SEND of a fetch whose pieces have MRs. */
static int engram_link_post_fetch(struct engram_link *l, struct engram_fetch *f)
{
	struct ib_reg_wr regs[ENGRAM_WIRE_MAX_RANGES];
	struct ib_send_wr send = {};
	struct ib_sge sge;
	unsigned int i;

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
	sge.addr = l->slots[f->slot].dma;
	sge.length = f->req_len;
	sge.lkey = l->dev->pd->local_dma_lkey;
	send.opcode = IB_WR_SEND;
	send.send_flags = IB_SEND_SIGNALED;
	send.wr_cqe = &f->send_cqe;
	send.sg_list = &sge;
	send.num_sge = 1;
	ib_dma_sync_single_for_device(l->dev->ibdev, sge.addr, f->req_len, DMA_TO_DEVICE);
	return ib_post_send(l->qp, &regs[0].wr, NULL);
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
	mapped = ib_map_mr_sg(p->mr, sgl, n, &sg_off, PAGE_SIZE);
	if (mapped != n)
		return mapped < 0 ? mapped : -EINVAL;
	return 0;
}

/**
 * engram_link_submit() - put a fetch on the wire
 * @l: the link the fetch's table was opened on
 * @f: the fetch, its pieces and rows filled in
 *
 * Takes the link's reference on @f on success.  Process context.
 *
 * Return: 0; -ENOTCONN while the link is down; -E2BIG above the negotiated
 * rows or ranges, or for a piece larger than one registration; -EBUSY when
 * max_inflight fetches are out; -ENOMEM; -EIO when posting failed (the
 * connection is broken).
 */
int engram_link_submit(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_wire_req req = {};
	struct scatterlist *sgl = NULL;
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
	if (ret)
		goto out;
	f->slot = slot;
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
		req.ranges[i].addr = f->pieces[i].mr->iova;
		req.ranges[i].rkey = f->pieces[i].mr->rkey;
		req.ranges[i].length = f->pieces[i].len;
	}
	req.ticket = f->ticket;
	req.generation = f->generation;
	memcpy(req.digest, f->digest, sizeof(req.digest));
	req.nr_rows = f->nr_rows;
	req.stride = f->stride;
	req.nr_ranges = f->nr_pieces;
	ret = engram_wire_req_build(l->slots[slot].buf, l->neg.max_request_bytes,
				    &l->neg, &req, f->rows);
	if (ret < 0)
		goto err_pieces;
	f->req_len = ret;

	f->send_cqe.done = engram_link_send_done;
	f->inv_cqe.done = engram_link_inv_done;
	atomic_set(&f->wire_refs, 1 + f->nr_pieces);	/* the SEND, each LOCAL_INV */
	spin_lock_irqsave(&l->lock, flags);
	ret = xa_err(xa_store(&l->fetches, f->ticket, f, GFP_ATOMIC));
	spin_unlock_irqrestore(&l->lock, flags);
	if (ret)
		goto err_pieces;
	kref_get(&f->ref);		/* the link's, dropped when it is finished */
	f->start = ktime_get();
	ret = engram_link_post_fetch(l, f);
	if (ret) {
		/*
		 * Part of the chain may be on the wire: leave the fetch to
		 * teardown, which ends it once the QP and its keys are gone.
		 */
		f->error = -EIO;
		queue_work(engram_link_wq, &l->down_work);
		ret = 0;		/* the fetch completes with its error */
	}
	kfree(sgl);
	up_read(&l->conn_sem);
	return ret;

err_pieces:
	kfree(sgl);
	spin_lock_irqsave(&l->lock, flags);
	for (i = 0; i < f->nr_pieces; i++) {
		if (f->pieces[i].mr)
			ib_mr_pool_put(l->qp, &l->mrs, f->pieces[i].mr);
		f->pieces[i].mr = NULL;
	}
	l->slots[slot].busy = false;
	f->slot = -1;
	spin_unlock_irqrestore(&l->lock, flags);
out:
	up_read(&l->conn_sem);
	return ret;
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

	timeout_ns = min_t(u64, timeout_ns, 3600ULL * NSEC_PER_SEC);
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
	engram_count(&f->link->stats, ENGRAM_STAT_FETCH_TIMEOUTS);
	engram_count(&engram_global_stats, ENGRAM_STAT_FETCH_TIMEOUTS);
	engram_link_break(f->link, -ETIMEDOUT);
	/* The break finished every fetch of that connection, this one included. */
	wait_event(*f->wq, engram_fetch_done(f));
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
	engram_count(&f->link->stats, ENGRAM_STAT_FETCH_TIMEOUTS);
	engram_count(&engram_global_stats, ENGRAM_STAT_FETCH_TIMEOUTS);
	engram_link_break(f->link, -ETIMEDOUT);
	wait_event(*f->wq, engram_fetch_done(f));
}

/**
 * engram_link_mr_pages() - pages one registration of this link covers
 * @l: the link
 *
 * Return: the limit of the current connection, or 1 while down.
 */
u32 engram_link_mr_pages(const struct engram_link *l)
{
	return max_t(u32, READ_ONCE(l->mr_pages), 1);
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

static struct engram_link *engram_link_alloc(const struct engram_url *u)
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
	l->reg_cqe.done = engram_link_reg_done;
	xa_init_flags(&l->fetches, XA_FLAGS_LOCK_IRQ);
	INIT_DELAYED_WORK(&l->connect_work, engram_link_connect_work);
	INIT_WORK(&l->down_work, engram_link_down_work);
	l->state = ENGRAM_LINK_CONNECTING;
	l->since = ktime_get();
	l->backoff_ms = ENGRAM_LINK_RETRY_MIN_MS;
	return l;
}

/**
 * engram_link_add() - add a link and start connecting it
 * @u: a parsed remote URL
 * @id: set to the new link's id
 * @extack: where to say why it is refused
 *
 * Return: 0, -EEXIST for a URL already linked, -EOPNOTSUPP for tcp://,
 * -ENOSPC past ENGRAM_URL_MAX links, -ENOMEM.
 */
int engram_link_add(const struct engram_url *u, u32 *id, struct netlink_ext_ack *extack)
{
	struct engram_link *l, *o;
	unsigned int n = 0;

	if (u->transport != ENGRAM_TRANSPORT_RDMA) {
		NL_SET_ERR_MSG_MOD(extack, "only rdma:// links exist so far");
		return -EOPNOTSUPP;
	}
	l = engram_link_alloc(u);
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
	cancel_work_sync(&l->down_work);
	mutex_lock(&l->mutex);
	engram_link_teardown(l, -ESHUTDOWN);
	engram_link_set_state(l, ENGRAM_LINK_DOWN, -ESHUTDOWN);
	mutex_unlock(&l->mutex);
	/* A CQ callback may have queued it again during the teardown. */
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
 * Return: 0 or a negative errno (a tcp:// link, no memory).
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
