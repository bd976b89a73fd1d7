// SPDX-License-Identifier: GPL-2.0
/*
 * Server connections: accept, answer requests with RDMA WRITEs gathered
 * straight from the tables' pinned pages, tear down.
 *
 * Each connection has one RC QP on a CQ from the device's shared pool.
 * Receive completions queue the frame on the connection and kick its work
 * item, which handles frames one at a time, in order, and may sleep.  All
 * sends are posted by that work item, so send-queue credits need no
 * arbitration: the work item reserves them, completions give them back.
 * Only signaled sends complete on success, and RC completes a send queue
 * in order, so every signaled completion also frees the unsignaled WRITEs
 * posted before it; a ring of chain sizes says how many.
 *
 * A request's table hold travels with the control slot of its RESPONSE:
 * the RESPONSE is posted after the WRITEs on the same QP, so its
 * completion means every WRITE is done and the hold can go.
 *
 * Teardown has one path, the release work, whatever triggered it (CM
 * event, failed completion, stalled peer, device removal, listener
 * removal, module unload): mark closing (no post after that), disconnect,
 * stop the work item, drain the QP, drop the holds, free the hardware
 * resources, destroy the cm_id, unlist.
 *
 * Locking: engram_conns_mutex protects the list of connections; it is never
 * held while destroying a cm_id or waiting for a connection.  conn->lock
 * (irqsave: completions and QP events may come from any context) protects
 * the fields marked so below.  Lock order: engram_listen_mutex, then a
 * cm_id's handler mutex, then engram_conns_mutex, then conn->lock.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/highmem.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/timekeeping.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <net/ipv6.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "cover.h"
#include "engram.h"
#include "inject.h"
#include "serve.h"
#include "serve_listen.h"
#include "wbuild.h"
#include "wire.h"

/* Receives beyond max_inflight: room for a CATALOG_REQUEST and a HEARTBEAT. */
#define ENGRAM_SRV_EXTRA_RECV	2
/* Send queue: deep enough for a 49,152-row response in a few chains. */
#define ENGRAM_SRV_SQ_DEPTH	4096
#define ENGRAM_SRV_SQ_MIN	8
#define ENGRAM_SRV_MAX_SGE	32
/* WRs built and posted at once; the scratch arrays hold one chain. */
#define ENGRAM_SRV_CHAIN_MAX	256
/* Bytes in one WRITE, far below any port's max_msg_sz. */
#define ENGRAM_SRV_WR_MAX_BYTES	SZ_1M
/* Room for one RESPONSE or HEARTBEAT, a cache line so slots never share one. */
#define ENGRAM_SRV_CTRL_BYTES	64

/*
 * Limits of the RDMA server, each read afresh where it applies, so a
 * change at run time applies to the next connection request (the
 * connection limits and rdma_max_request_rows) or the next idle check.
 * Every connection costs its receive buffers (max_inflight + 2 of the
 * negotiated request size, about 4.7 MiB at 65,536 rows), a send queue of
 * up to 4,097 entries and their CQEs: the connection limits bound that
 * memory, whoever the peers are.
 */
#define ENGRAM_SRV_CONNS_MAX		4096
#define ENGRAM_SRV_IDLE_MS_MIN		100
#define ENGRAM_SRV_IDLE_MS_MAX		3600000
#define ENGRAM_SRV_STALL_MS_MIN		1000
#define ENGRAM_SRV_STALL_MS_MAX		600000
/* While the idle timeout is off, how often a connection looks again. */
#define ENGRAM_SRV_IDLE_RECHECK		HZ

static struct engram_uint_param engram_srv_max_conns = {
	.val = 64, .min = 1, .max = ENGRAM_SRV_CONNS_MAX,
};

static struct engram_uint_param engram_srv_max_conns_peer = {
	.val = 16, .min = 1, .max = ENGRAM_SRV_CONNS_MAX,
};

static struct engram_uint_param engram_srv_max_conns_total = {
	.val = 256, .min = 1, .max = ENGRAM_SRV_CONNS_MAX,
};

static struct engram_uint_param engram_srv_max_rows = {
	.val = ENGRAM_WIRE_OFFER_ROWS, .min = 1, .max = ENGRAM_WIRE_OFFER_ROWS,
};

static struct engram_uint_param engram_srv_idle_ms = {
	.val = 30000, .min = ENGRAM_SRV_IDLE_MS_MIN, .max = ENGRAM_SRV_IDLE_MS_MAX,
	.zero_ok = true,
};

static struct engram_uint_param engram_srv_stall_ms = {
	.val = 10000, .min = ENGRAM_SRV_STALL_MS_MIN, .max = ENGRAM_SRV_STALL_MS_MAX,
};

module_param_cb(rdma_max_conns, &engram_uint_param_ops, &engram_srv_max_conns, 0644);
MODULE_PARM_DESC(rdma_max_conns,
		 "RDMA server: connections per listener (1-4096, default 64)");
module_param_cb(rdma_max_conns_per_peer, &engram_uint_param_ops, &engram_srv_max_conns_peer,
		0644);
MODULE_PARM_DESC(rdma_max_conns_per_peer,
		 "RDMA server: connections from one peer address, over all listeners (1-4096, default 16)");
module_param_cb(rdma_max_conns_total, &engram_uint_param_ops, &engram_srv_max_conns_total,
		0644);
MODULE_PARM_DESC(rdma_max_conns_total,
		 "RDMA server: connections over all listeners (1-4096, default 256)");
module_param_cb(rdma_max_request_rows, &engram_uint_param_ops, &engram_srv_max_rows, 0644);
MODULE_PARM_DESC(rdma_max_request_rows,
		 "RDMA server: rows per request offered in the hello, which sizes the receive buffers (1-65536, default 65536)");
module_param_cb(rdma_idle_timeout_ms, &engram_uint_param_ops, &engram_srv_idle_ms, 0644);
MODULE_PARM_DESC(rdma_idle_timeout_ms,
		 "RDMA server: close a connection that sent nothing for this many ms (0 off, or 100-3600000, default 30000)");
module_param_cb(rdma_stall_timeout_ms, &engram_uint_param_ops, &engram_srv_stall_ms, 0644);
MODULE_PARM_DESC(rdma_stall_timeout_ms,
		 "RDMA server: close a connection whose peer leaves a send or a response unacknowledged for this many ms (1000-600000, default 10000)");

/*
 * A peer that lets a send stay incomplete this long is considered dead: a
 * live one acknowledges within its RNR and transport retries, far below
 * the default.  Slow hosts (an emulated guest under KASAN) need more.
 */
static unsigned long engram_serve_rdma_stall(void)
{
	return msecs_to_jiffies(READ_ONCE(engram_srv_stall_ms.val));
}

static struct workqueue_struct *engram_srv_wq;
static LIST_HEAD(engram_conns);
static DEFINE_MUTEX(engram_conns_mutex);
/* Bumped whenever a connection leaves the list; waiters watch it. */
static atomic_t engram_conns_gen = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(engram_conns_wq);

/* Catalog pushes: coalesced in one work item (serve.c says when). */
static void engram_serve_rdma_cat_push(struct work_struct *work);
static DECLARE_WORK(engram_cat_work, engram_serve_rdma_cat_push);
static void engram_serve_rdma_cat_changed(void);
static struct engram_serve_transport engram_srv_transport = {
	.node = LIST_HEAD_INIT(engram_srv_transport.node),
	.catalog_changed = engram_serve_rdma_cat_changed,
};

struct engram_conn;

/*
 * A connection request between its admission and its listing (or its
 * failure): counted against the limits like a listed connection, so that
 * requests on several listeners at once cannot all pass the same check.
 * On the admitting handler's stack, listed on engram_conn_resvs under
 * engram_conns_mutex.
 */
struct engram_conn_resv {
	struct list_head node;
	const struct engram_listener *l;
	struct sockaddr_storage peer;
};

static LIST_HEAD(engram_conn_resvs);

/*
 * One receive buffer of max_request_bytes (up to 262,576).  Not one
 * kmalloc: that would be an order-7 allocation per buffer, and a host that
 * has run for months may not have 18 of those per connection.  The buffer
 * is vmalloc'ed (order-0 pages, virtually contiguous for the decoders),
 * each page mapped with ib_dma_map_page(), and the pages registered once
 * into a local-only fast-registration MR (REG_MR, IB_ACCESS_LOCAL_WRITE,
 * never a remote right), so one SGE (lkey, iova) covers the whole buffer.
 * Posting one SGE per page instead would need up to 65 receive SGEs, more
 * than many NICs allow.
 */
struct engram_rx {
	struct ib_cqe cqe;
	struct engram_conn *conn;
	struct list_head node;		/* on rx_pending while queued */
	void *buf;			/* vmalloc, rx_pages pages */
	dma_addr_t *dma;		/* each page's mapping */
	u32 nr_mapped;			/* entries of @dma that are mapped */
	struct ib_mr *mr;
	struct ib_reg_wr reg;		/* registers @mr, once */
	u32 synced;			/* bytes the CPU owns (synced for it) */
	u32 len;			/* bytes received */
	bool is_req;			/* counted in conn->inflight */
	bool busy;			/* over max_inflight when it came */
	u64 t_ns;
};

/* One small send: a RESPONSE or a HEARTBEAT echo. */
struct engram_ctrl {
	struct ib_cqe cqe;
	struct engram_conn *conn;
	struct list_head node;		/* on ctrl_free or ctrl_done, or neither */
	u8 *buf;
	u64 dma;
	struct engram_table *t;		/* hold to drop once this send completed */
	unsigned long posted;		/* jiffies, while in flight */
	bool in_flight;
};

/**
 * struct engram_conn - one accepted connection
 * @ctx: ENGRAM_CM_CONN, the cm_id's context
 * @ref: the release work's reference, plus a DEVICE_REMOVAL handler's
 * @node: on engram_conns
 * @l: the listener that accepted it (outlives the connection)
 * @cm_id: the connection's id
 * @dev: the device, and the connection's own PD
 * @ibdev: @cm_id's device
 * @cq: from the device's pool
 * @nr_cqe: entries taken from @cq
 * @qp: RC QP
 * @qp_mutex: keeps the release from destroying @qp while the CM handler
 *	still changes its access flags after the accept
 * @neg: negotiated parameters
 * @peer: client address, for the log
 * @sq_depth: send-queue credits
 * @max_sge: SGEs per WRITE
 * @wr_max_bytes: bytes per WRITE
 * @lkey: the local DMA lkey of the connection's PD
 * @lock: protects the fields down to @id_decided
 * @closing: no post after this is set; the release work is queued
 * @established: the CM said ESTABLISHED
 * @cat_push: a catalog push is pending
 * @cat_busy: the catalog buffer is in flight
 * @inflight: REQUEST frames received and not yet answered
 * @sq_free: send-queue credits available
 * @sig: chain sizes of the signaled sends in flight, in posting order
 * @sig_head: next to complete
 * @sig_tail: next free entry
 * @sig_size: entries in @sig
 * @rx_pending: frames waiting for the work item
 * @ctrl_free: idle control slots
 * @ctrl_done: completed control slots whose hold is still to drop
 * @cm_owns_id: a DEVICE_REMOVAL handler lets the CM destroy @cm_id
 * @id_decided: the release work has decided who destroys @cm_id
 * @cat_sent: the first CATALOG is posted (work item only)
 * @wr_mtu: the QP's path MTU in bytes; 0 until asked, U32_MAX if the
 *	device would not say (work item only)
 * @rx_posted: work requests were posted, so the QP needs draining
 * @rx_ready: the receive MRs are registered and the receives posted
 *	(work item only)
 * @sq_wait: credits, slots, buffer or @closing changed
 * @work: handles frames and catalog pushes
 * @reap_work: drops the holds of completed responses, apart from @work so
 *	that nothing @work waits for can delay an unload
 * @release_work: the teardown
 * @watchdog: catches responses that never complete
 * @idle_work: closes the connection when the peer has been silent for
 *	rdma_idle_timeout_ms
 * @last_rx: jiffies of the last receive completion, of the end of the last
 *	request served, or of the accept
 * @hw_done: the QP, CQ, buffers and PD reference are gone
 * @rx: receive buffers
 * @nr_rx: entries in @rx
 * @rx_size: bytes in each receive buffer
 * @rx_pages: pages in each receive buffer
 * @reg_cqe: the signaled REG_MR that ends a chain of them
 * @reg_err_cqe: the unsignaled REG_MRs (complete only on error)
 * @ctrl: control slots
 * @nr_ctrl: entries in @ctrl
 * @ctrl_buf: their buffers, one DMA mapping
 * @ctrl_dma: its address
 * @cat_buf: the CATALOG buffer
 * @cat_dma: its address
 * @cat_cqe: completion of a CATALOG send
 * @write_cqe: unsignaled WRITEs (completes only on error)
 * @chain_cqe: the signaled last WRITE of a chain
 * @wrs: scratch for one chain of WRITEs (work item only)
 * @sges: their SGEs, @max_sge per WR
 * @req: the request being handled (work item only)
 */
struct engram_conn {
	struct engram_cm_ctx ctx;
	struct kref ref;
	struct list_head node;
	struct engram_listener *l;
	struct rdma_cm_id *cm_id;
	struct engram_dev *dev;
	struct ib_device *ibdev;
	struct ib_cq *cq;
	unsigned int nr_cqe;
	struct ib_qp *qp;
	struct mutex qp_mutex;		/* @qp's destruction vs. the handler */
	struct engram_wire_params neg;
	struct sockaddr_storage peer;
	u32 sq_depth;
	u32 max_sge;
	u32 wr_max_bytes;
	u32 lkey;

	spinlock_t lock;		/* the fields down to id_decided */
	bool closing;
	bool established;
	bool cat_push;
	bool cat_busy;
	u32 inflight;
	u32 sq_free;
	u32 *sig;
	u32 sig_head;
	u32 sig_tail;
	u32 sig_size;
	struct list_head rx_pending;
	struct list_head ctrl_free;
	struct list_head ctrl_done;
	bool cm_owns_id;
	bool id_decided;

	bool cat_sent;
	bool rx_posted;
	bool rx_ready;
	u32 wr_mtu;
	wait_queue_head_t sq_wait;
	struct work_struct work;
	struct work_struct reap_work;
	struct work_struct release_work;
	struct delayed_work watchdog;
	struct delayed_work idle_work;
	unsigned long last_rx;
	struct completion hw_done;

	struct engram_rx *rx;
	u32 nr_rx;
	u32 rx_size;
	u32 rx_pages;
	struct ib_cqe reg_cqe;
	struct ib_cqe reg_err_cqe;
	struct engram_ctrl *ctrl;
	u32 nr_ctrl;
	u8 *ctrl_buf;
	u64 ctrl_dma;
	u8 *cat_buf;
	u64 cat_dma;
	struct ib_cqe cat_cqe;
	struct ib_cqe write_cqe;
	struct ib_cqe chain_cqe;
	struct ib_rdma_wr *wrs;
	struct ib_sge *sges;
	struct engram_wire_req req;
};

static void engram_serve_rdma_conn_free(struct kref *ref)
{
	kfree(container_of(ref, struct engram_conn, ref));
}

/* Any context.  Idempotent: the first call queues the release. */
static void engram_serve_rdma_conn_close(struct engram_conn *conn)
{
	unsigned long flags;
	bool first;

	spin_lock_irqsave(&conn->lock, flags);
	first = !conn->closing;
	conn->closing = true;
	spin_unlock_irqrestore(&conn->lock, flags);
	if (first)
		queue_work(engram_srv_wq, &conn->release_work);
	wake_up_all(&conn->sq_wait);
}

static bool engram_serve_rdma_conn_closing(struct engram_conn *conn)
{
	return READ_ONCE(conn->closing);
}

static void engram_serve_rdma_conn_broken(struct engram_conn *conn, const char *what, int err)
{
	if (!engram_serve_rdma_conn_closing(conn)) {
		engram_count(&engram_global_stats, ENGRAM_STAT_TRANSPORT_ERRORS);
		pr_warn_ratelimited("connection from %pISpc: %s (%d), disconnecting\n",
				    &conn->peer, what, err);
	}
	engram_serve_rdma_conn_close(conn);
}

/*
 * A failed work completion.  Flushes are how a closing QP returns its
 * work requests, so only the others count as transport errors.
 */
static void engram_serve_rdma_wc_failed(struct engram_conn *conn, struct ib_wc *wc,
					const char *what)
{
	if (wc->status != IB_WC_WR_FLUSH_ERR) {
		engram_count(&engram_global_stats, ENGRAM_STAT_TRANSPORT_ERRORS);
		pr_warn_ratelimited("connection from %pISpc: %s failed: %s (%d)\n",
				    &conn->peer, what, ib_wc_status_msg(wc->status),
				    wc->status);
	}
	engram_serve_rdma_conn_close(conn);
}

/* A signaled send completed: it and the unsignaled ones before it are done. */
static void engram_serve_rdma_sig_complete(struct engram_conn *conn)
{
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	if (!WARN_ON_ONCE(conn->sig_head == conn->sig_tail)) {
		conn->sq_free += conn->sig[conn->sig_head];
		conn->sig_head = (conn->sig_head + 1) % conn->sig_size;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up_all(&conn->sq_wait);
}

/*
 * Post a list of @nr send WRs whose last one is signaled.  The caller has
 * waited for the credits.  Checking closing under the lock that closing is
 * set under means nothing is posted once the release has begun.
 */
static int engram_serve_rdma_conn_post(struct engram_conn *conn, struct ib_send_wr *first,
				       u32 nr)
{
	const struct ib_send_wr *bad = NULL;
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&conn->lock, flags);
	if (conn->closing) {
		spin_unlock_irqrestore(&conn->lock, flags);
		return -ESHUTDOWN;
	}
	if (WARN_ON_ONCE(conn->sq_free < nr)) {
		spin_unlock_irqrestore(&conn->lock, flags);
		engram_serve_rdma_conn_close(conn);
		return -EOVERFLOW;
	}
	conn->sq_free -= nr;
	conn->sig[conn->sig_tail] = nr;
	conn->sig_tail = (conn->sig_tail + 1) % conn->sig_size;
	ret = engram_post_send(conn->qp, first, &bad);
	if (ret && bad == first) {
		/* Nothing went out: nothing will complete for it. */
		conn->sig_tail = (conn->sig_tail + conn->sig_size - 1) % conn->sig_size;
		conn->sq_free += nr;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (ret)
		engram_serve_rdma_conn_broken(conn, "posting a send failed", ret);
	return ret;
}

/*
 * Sleep until @ready(@conn, @arg) or closing.  Everything waited for is
 * the peer completing earlier sends: one that stops for
 * rdma_stall_timeout_ms is dead.
 */
static int engram_serve_rdma_conn_wait(struct engram_conn *conn,
				       bool (*ready)(struct engram_conn *conn, u32 arg), u32 arg,
			    const char *what)
{
	long left;

	left = wait_event_timeout(conn->sq_wait,
				  ready(conn, arg) || engram_serve_rdma_conn_closing(conn),
				  engram_serve_rdma_stall());
	if (engram_serve_rdma_conn_closing(conn))
		return -ESHUTDOWN;
	if (!left) {
		engram_serve_rdma_conn_broken(conn, what, -ETIMEDOUT);
		return -ETIMEDOUT;
	}
	return 0;
}

static bool engram_serve_rdma_credits_ready(struct engram_conn *conn, u32 n)
{
	return READ_ONCE(conn->sq_free) >= n;
}

static int engram_serve_rdma_conn_credits(struct engram_conn *conn, u32 n)
{
	return engram_serve_rdma_conn_wait(conn, engram_serve_rdma_credits_ready, n,
					   "send queue stalled");
}

/*
 * Hand the first @rx->synced bytes to the CPU (@for_cpu) or back to the
 * device.  Only what a frame filled is ever taken, page by page; the rest
 * stays the device's from the mapping on.  The decoders read through the
 * vmalloc alias, which a cache that is virtually indexed must drop.
 */
static void engram_serve_rdma_rx_sync(struct engram_conn *conn, struct engram_rx *rx, bool for_cpu)
{
	u32 left = rx->synced, n, i;

	for (i = 0; left; i++, left -= n) {
		n = min_t(u32, left, PAGE_SIZE);
		if (for_cpu)
			ib_dma_sync_single_for_cpu(conn->ibdev, rx->dma[i], n, DMA_FROM_DEVICE);
		else
			ib_dma_sync_single_for_device(conn->ibdev, rx->dma[i], n,
						      DMA_FROM_DEVICE);
	}
	if (for_cpu)
		invalidate_kernel_vmap_range(rx->buf, round_up(rx->synced, PAGE_SIZE));
	else
		rx->synced = 0;
}

/* Give a receive buffer to the device; the caller excludes the release. */
static int __engram_serve_rdma_rx_post(struct engram_conn *conn, struct engram_rx *rx)
{
	struct ib_sge sge = {
		.addr = rx->mr->iova,
		.length = conn->rx_size,
		.lkey = rx->mr->lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &rx->cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	engram_serve_rdma_rx_sync(conn, rx, false);
	return engram_post_recv(conn->qp, &wr, NULL);
}

static int engram_serve_rdma_rx_post(struct engram_conn *conn, struct engram_rx *rx)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&conn->lock, flags);
	ret = conn->closing ? -ESHUTDOWN : __engram_serve_rdma_rx_post(conn, rx);
	spin_unlock_irqrestore(&conn->lock, flags);
	if (ret && ret != -ESHUTDOWN)
		engram_serve_rdma_conn_broken(conn, "posting a receive failed", ret);
	return ret;
}

/* Repost the frame's buffer once nothing more is read from it. */
static void engram_serve_rdma_rx_done(struct engram_conn *conn, struct engram_rx **rxp)
{
	if (rxp && *rxp) {
		engram_serve_rdma_rx_post(conn, *rxp);
		*rxp = NULL;
	}
}

static void engram_serve_rdma_recv_done_cq(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_rx *rx = container_of(wc->wr_cqe, struct engram_rx, cqe);
	struct engram_conn *conn = rx->conn;
	unsigned long flags;

	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		engram_serve_rdma_wc_failed(conn, wc, "receive");
		return;
	}
	rx->t_ns = ktime_get_ns();
	rx->len = wc->byte_len;
	WRITE_ONCE(conn->last_rx, jiffies);
	rx->synced = min(rx->len, conn->rx_size);
	engram_serve_rdma_rx_sync(conn, rx, true);
	/* Peek at the type only to count requests for BUSY; the work item checks all. */
	rx->is_req = rx->len > 1 && ((u8 *)rx->buf)[1] == ENGRAM_WIRE_REQUEST;
	rx->busy = false;

	spin_lock_irqsave(&conn->lock, flags);
	if (!conn->closing) {
		if (rx->is_req)
			rx->busy = ++conn->inflight > conn->neg.max_inflight;
		list_add_tail(&rx->node, &conn->rx_pending);
		queue_work(engram_srv_wq, &conn->work);
	}
	spin_unlock_irqrestore(&conn->lock, flags);
}

/* Softirq: what a peer sends starts here. */
static void engram_serve_rdma_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	engram_cover_start();
	engram_serve_rdma_recv_done_cq(cq, wc);
	engram_cover_stop();
}

static void engram_serve_rdma_ctrl_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_ctrl *c = container_of(wc->wr_cqe, struct engram_ctrl, cqe);
	struct engram_conn *conn = c->conn;
	unsigned long flags;

	engram_serve_rdma_sig_complete(conn);
	spin_lock_irqsave(&conn->lock, flags);
	c->in_flight = false;
	/* The idle timeout counts from the end of the last answer. */
	if (c->t)
		WRITE_ONCE(conn->last_rx, jiffies);
	list_add_tail(&c->node, &conn->ctrl_done);
	/* The hold is dropped in process context; at teardown the release does it. */
	if (c->t && !conn->closing)
		queue_work(engram_srv_wq, &conn->reap_work);
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up_all(&conn->sq_wait);
	if (unlikely(wc->status != IB_WC_SUCCESS))
		engram_serve_rdma_wc_failed(conn, wc, "response send");
}

static void engram_serve_rdma_cat_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, cat_cqe);

	engram_serve_rdma_sig_complete(conn);
	WRITE_ONCE(conn->cat_busy, false);
	wake_up_all(&conn->sq_wait);
	if (unlikely(wc->status != IB_WC_SUCCESS))
		engram_serve_rdma_wc_failed(conn, wc, "catalog send");
}

static void engram_serve_rdma_chain_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, chain_cqe);

	engram_serve_rdma_sig_complete(conn);
	if (unlikely(wc->status != IB_WC_SUCCESS))
		engram_serve_rdma_wc_failed(conn, wc, "RDMA WRITE");
}

static void engram_serve_rdma_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, reg_cqe);

	engram_serve_rdma_sig_complete(conn);
	if (unlikely(wc->status != IB_WC_SUCCESS))
		engram_serve_rdma_wc_failed(conn, wc, "registering receive buffers");
}

static void engram_serve_rdma_reg_err_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, reg_err_cqe);

	if (wc->status != IB_WC_SUCCESS)
		engram_serve_rdma_wc_failed(conn, wc, "registering a receive buffer");
}

/* Unsignaled WRITEs complete only when they fail (or are flushed). */
static void engram_serve_rdma_write_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, write_cqe);

	if (wc->status != IB_WC_SUCCESS)
		engram_serve_rdma_wc_failed(conn, wc, "RDMA WRITE");
}

/* QP events may come in interrupt context. */
static void engram_serve_rdma_qp_event(struct ib_event *ev, void *ctx)
{
	struct engram_conn *conn = ctx;

	switch (ev->event) {
	case IB_EVENT_COMM_EST:
		/* A SEND arrived before the CM's RTU: let the CM establish now. */
		rdma_notify(conn->cm_id, ev->event);
		break;
	case IB_EVENT_QP_LAST_WQE_REACHED:
		break;
	default:
		engram_serve_rdma_conn_broken(conn, ib_event_msg(ev->event), -EIO);
		break;
	}
}

/* Drop the holds of completed responses and return their slots. */
static void engram_serve_rdma_conn_reap(struct engram_conn *conn)
{
	struct engram_ctrl *c, *tmp;
	unsigned long flags;
	LIST_HEAD(done);

	spin_lock_irqsave(&conn->lock, flags);
	list_splice_init(&conn->ctrl_done, &done);
	spin_unlock_irqrestore(&conn->lock, flags);
	if (list_empty(&done))
		return;
	list_for_each_entry(c, &done, node) {
		if (c->t) {
			engram_table_serve_put(c->t);
			c->t = NULL;
		}
	}
	spin_lock_irqsave(&conn->lock, flags);
	list_for_each_entry_safe(c, tmp, &done, node)
		list_move_tail(&c->node, &conn->ctrl_free);
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up_all(&conn->sq_wait);
}

static void engram_serve_rdma_conn_reap_work(struct work_struct *work)
{
	engram_serve_rdma_conn_reap(container_of(work, struct engram_conn, reap_work));
}

static bool engram_serve_rdma_ctrl_available(struct engram_conn *conn, u32 unused)
{
	unsigned long flags;
	bool ret;

	spin_lock_irqsave(&conn->lock, flags);
	ret = !list_empty(&conn->ctrl_free) || !list_empty(&conn->ctrl_done);
	spin_unlock_irqrestore(&conn->lock, flags);
	return ret;
}

/* A free control slot, or NULL when the connection is closing or stalled. */
static struct engram_ctrl *engram_serve_rdma_ctrl_get(struct engram_conn *conn)
{
	struct engram_ctrl *c;
	unsigned long flags;

	for (;;) {
		engram_serve_rdma_conn_reap(conn);
		spin_lock_irqsave(&conn->lock, flags);
		c = list_first_entry_or_null(&conn->ctrl_free, struct engram_ctrl, node);
		if (c)
			list_del_init(&c->node);
		spin_unlock_irqrestore(&conn->lock, flags);
		if (c)
			return c;
		if (engram_serve_rdma_conn_wait(conn, engram_serve_rdma_ctrl_available, 0,
						"responses stalled"))
			return NULL;
	}
}

static void engram_serve_rdma_ctrl_put(struct engram_conn *conn, struct engram_ctrl *c)
{
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	list_add(&c->node, &conn->ctrl_free);
	spin_unlock_irqrestore(&conn->lock, flags);
}

/*
 * Post a control slot of @len bytes, after reposting the frame it answers
 * (so the peer's next SEND finds a buffer).  On failure the slot is left
 * for the release, which drops any hold it carries.
 */
static int engram_serve_rdma_ctrl_send(struct engram_conn *conn, struct engram_ctrl *c,
				       u32 len, struct engram_rx **rxp)
{
	struct ib_sge sge = {
		.addr = c->dma,
		.length = len,
		.lkey = conn->lkey,
	};
	struct ib_send_wr wr = {
		.wr_cqe = &c->cqe,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	unsigned long flags;
	int ret;

	engram_serve_rdma_rx_done(conn, rxp);
	ret = engram_serve_rdma_conn_credits(conn, 1);
	if (ret)
		return ret;
	ib_dma_sync_single_for_device(conn->ibdev, c->dma, len, DMA_TO_DEVICE);
	spin_lock_irqsave(&conn->lock, flags);
	c->posted = jiffies;
	c->in_flight = true;
	spin_unlock_irqrestore(&conn->lock, flags);
	ret = engram_serve_rdma_conn_post(conn, &wr, 1);
	if (ret)
		return ret;
	if (c->t) {
		spin_lock_irqsave(&conn->lock, flags);
		if (!conn->closing)
			queue_delayed_work(engram_srv_wq, &conn->watchdog,
					   engram_serve_rdma_stall());
		spin_unlock_irqrestore(&conn->lock, flags);
	}
	return 0;
}

/*
 * A response that never completes would keep its table hold, and an
 * unload would wait for it forever: a peer that stops acknowledging (or
 * stops posting receives, with RNR retries unlimited) is disconnected.
 */
static void engram_serve_rdma_conn_watchdog(struct work_struct *work)
{
	struct engram_conn *conn = container_of(to_delayed_work(work),
						struct engram_conn, watchdog);
	unsigned long flags, oldest = 0, stall = engram_serve_rdma_stall();
	bool any = false;
	u32 i;

	spin_lock_irqsave(&conn->lock, flags);
	for (i = 0; i < conn->nr_ctrl; i++) {
		struct engram_ctrl *c = &conn->ctrl[i];

		if (!c->in_flight || !c->t)
			continue;
		if (!any || time_before(c->posted, oldest))
			oldest = c->posted;
		any = true;
	}
	if (any && !conn->closing && time_before(jiffies, oldest + stall))
		queue_delayed_work(engram_srv_wq, &conn->watchdog, oldest + stall - jiffies);
	spin_unlock_irqrestore(&conn->lock, flags);
	if (any && !time_before(jiffies, oldest + stall))
		engram_serve_rdma_conn_broken(conn, "response not acknowledged", -ETIMEDOUT);
}

/*
 * A client sends a HEARTBEAT every heartbeat_ms (1 s by default) while it
 * is up, so a connection that has received nothing for much longer belongs
 * to a peer that crashed or went away without a disconnect.  Its buffers
 * would otherwise stay until something is sent to it (the next catalog
 * push), which may be never.
 */
/*
 * Whether @conn is serving a request: one received and not yet answered,
 * or an answer whose rows and RESPONSE the peer has not acknowledged yet
 * (the peer sends nothing meanwhile: its heartbeat's echo is queued
 * behind the answer).  An unacknowledged answer is the stall watchdog's.
 * Called under conn->lock.
 */
static bool engram_serve_rdma_conn_serving(struct engram_conn *conn)
{
	u32 i;

	if (conn->inflight)
		return true;
	for (i = 0; conn->ctrl && i < conn->nr_ctrl; i++)
		if (conn->ctrl[i].in_flight && conn->ctrl[i].t)
			return true;
	return false;
}

static void engram_serve_rdma_conn_idle(struct work_struct *work)
{
	struct engram_conn *conn = container_of(to_delayed_work(work),
						struct engram_conn, idle_work);
	unsigned int ms = READ_ONCE(engram_srv_idle_ms.val);
	unsigned long last = READ_ONCE(conn->last_rx);
	unsigned long due, flags;
	bool idle = false;

	due = ms ? last + msecs_to_jiffies(ms) : jiffies + ENGRAM_SRV_IDLE_RECHECK;
	spin_lock_irqsave(&conn->lock, flags);
	if (!conn->closing) {
		/*
		 * A client may send nothing while it waits for an answer, and
		 * a large one can take longer than the timeout on a slow host:
		 * a connection with a request still being served is not idle.
		 */
		if (ms && !time_before(jiffies, due) && !engram_serve_rdma_conn_serving(conn))
			idle = true;
		else
			queue_delayed_work(engram_srv_wq, &conn->idle_work,
					   time_before(jiffies, due) ?
					   min(due - jiffies, ENGRAM_SRV_IDLE_RECHECK * 60UL) :
					   ENGRAM_SRV_IDLE_RECHECK);
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (!idle)
		return;
	engram_count(&engram_global_stats, ENGRAM_STAT_IDLE_CLOSES);
	pr_info_ratelimited("connection from %pISpc: nothing received for %u ms, closing\n",
			    &conn->peer, jiffies_to_msecs(jiffies - last));
	engram_serve_rdma_conn_close(conn);
}

static int engram_serve_rdma_cat_build(struct engram_conn *conn, u64 ticket)
{
	return engram_serve_catalog_encode(conn->cat_buf, ENGRAM_WIRE_MAX_CATALOG_BYTES,
					   &conn->neg, ticket);
}

static bool engram_serve_rdma_cat_idle(struct engram_conn *conn, u32 unused)
{
	return !READ_ONCE(conn->cat_busy);
}

static int engram_serve_rdma_cat_send(struct engram_conn *conn, u64 ticket,
				      struct engram_rx **rxp)
{
	struct ib_sge sge = {
		.addr = conn->cat_dma,
		.lkey = conn->lkey,
	};
	struct ib_send_wr wr = {
		.wr_cqe = &conn->cat_cqe,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};
	int len, ret;

	ret = engram_serve_rdma_conn_wait(conn, engram_serve_rdma_cat_idle, 0,
					  "catalog send stalled");
	if (ret)
		return ret;
	len = engram_serve_rdma_cat_build(conn, ticket);
	if (WARN_ON_ONCE(len < 0)) {
		engram_serve_rdma_conn_close(conn);
		return len;
	}
	engram_serve_rdma_rx_done(conn, rxp);
	ret = engram_serve_rdma_conn_credits(conn, 1);
	if (ret)
		return ret;
	sge.length = len;
	ib_dma_sync_single_for_device(conn->ibdev, conn->cat_dma, len, DMA_TO_DEVICE);
	WRITE_ONCE(conn->cat_busy, true);
	ret = engram_serve_rdma_conn_post(conn, &wr, 1);
	if (ret)
		WRITE_ONCE(conn->cat_busy, false);
	return ret;
}

/* Answer a frame with a RESPONSE that carries no rows. */
static void engram_serve_rdma_refuse(struct engram_conn *conn, struct engram_ctrl *c,
				     struct engram_rx **rxp, u64 ticket, int status,
			  u32 bad_index)
{
	struct engram_wire_resp resp = {
		.ticket = ticket,
		.status = status,
		.bad_index = status == ENGRAM_WIRE_ROW_OUT_OF_RANGE ? bad_index : 0,
	};
	int len;

	len = engram_wire_resp_encode(c->buf, ENGRAM_SRV_CTRL_BYTES, &conn->neg,
				      false, &resp);
	if (WARN_ON_ONCE(len < 0)) {
		engram_serve_rdma_ctrl_put(conn, c);
		engram_serve_rdma_conn_close(conn);
		return;
	}
	engram_serve_rdma_ctrl_send(conn, c, len, rxp);
}

/* Start a chain: wait for enough credits that chains do not trickle. */
static int engram_serve_rdma_wb_conn_reserve(void *ctx, u32 *cap)
{
	struct engram_conn *conn = ctx;
	u32 want = min_t(u32, ENGRAM_SRV_CHAIN_MAX, conn->sq_depth / 2);
	int ret;

	ret = engram_serve_rdma_conn_credits(conn, max_t(u32, want, 1));
	if (ret)
		return ret;
	*cap = min_t(u32, READ_ONCE(conn->sq_free), ENGRAM_SRV_CHAIN_MAX);
	return 0;
}

/* The last WRITE of a chain is the one that completes, for all of them. */
static int engram_serve_rdma_wb_conn_flush(void *ctx, struct ib_rdma_wr *wrs, u32 nr)
{
	struct engram_conn *conn = ctx;
	struct ib_rdma_wr *last = &wrs[nr - 1];

	last->wr.send_flags = IB_SEND_SIGNALED;
	last->wr.wr_cqe = &conn->chain_cqe;
	engram_count_add(&engram_global_stats, ENGRAM_STAT_RDMA_WRITES, nr);
	return engram_serve_rdma_conn_post(conn, &wrs[0].wr, nr);
}

static const struct engram_wb_ops engram_wb_conn_ops = {
	.flush = engram_serve_rdma_wb_conn_flush,
	.reserve = engram_serve_rdma_wb_conn_reserve,
};

/* The QP's path MTU once connected; U32_MAX (never cut) if unknown. */
static noinline u32 engram_serve_rdma_conn_path_mtu(struct engram_conn *conn)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr;
	int mtu;

	if (ib_query_qp(conn->qp, &attr, IB_QP_PATH_MTU, &init))
		return U32_MAX;
	mtu = ib_mtu_enum_to_int(attr.path_mtu);
	return mtu > 0 ? mtu : U32_MAX;
}

/* Post the WRITEs of every row of @req, straight from the table's pages. */
static int engram_serve_rdma_write_rows(struct engram_conn *conn, struct engram_table *t,
					const dma_addr_t *dma, const struct engram_wire_req *req)
{
	struct engram_wb_cfg cfg;
	struct engram_wb b;
	struct engram_wire_place pl;
	struct engram_row_src src;
	u32 i, j;
	u64 remote;
	int ret;

	if (!conn->wr_mtu)
		conn->wr_mtu = engram_serve_rdma_conn_path_mtu(conn);
	cfg = (struct engram_wb_cfg){
		.wrs = conn->wrs,
		.sges = conn->sges,
		.max_sge = conn->max_sge,
		.max_bytes = conn->wr_max_bytes,
		.mtu = conn->wr_mtu,
		.lkey = conn->lkey,
		.cqe = &conn->write_cqe,
		.ops = &engram_wb_conn_ops,
		.ctx = conn,
	};
	engram_wbuild_init(&b, &cfg);
	for (i = 0; i < req->nr_rows; i++) {
		engram_table_row_src(t, engram_wire_req_row(req, i), &src);
		if (WARN_ON_ONCE(!src.n || src.n > ARRAY_SIZE(src.seg))) {
			/* Rows may be half written: only a disconnect is honest. */
			engram_serve_rdma_conn_broken(conn, "bad row layout from the table", -EIO);
			return -EIO;
		}
		engram_wire_req_place(req, i, &pl);
		remote = pl.addr;
		for (j = 0; j < src.n; j++) {
			ret = engram_wbuild_add(&b, remote, pl.rkey,
						dma[src.seg[j].page] + src.seg[j].off,
					    src.seg[j].len);
			if (ret)
				return ret;
			remote += src.seg[j].len;
		}
		if ((i & 1023) == 1023)
			cond_resched();
	}
	return engram_wbuild_flush(&b);
}

static void engram_serve_rdma_handle_request(struct engram_conn *conn, struct engram_rx **rxp)
{
	struct engram_wire_req *req = &conn->req;
	struct engram_rx *rx = *rxp;
	u64 t_recv = rx->t_ns;		/* the buffer is reposted before the end */
	struct engram_wire_resp resp = {};
	struct engram_table *t = NULL;
	const dma_addr_t *dma;
	struct engram_ctrl *c;
	char why[128];
	u32 bad = 0;
	int st, len;

	c = engram_serve_rdma_ctrl_get(conn);
	if (!c)
		return;
	st = engram_wire_req_parse(rx->buf, rx->len, &conn->neg, req, why, sizeof(why));
	if (st) {
		pr_info_ratelimited("connection from %pISpc: request refused, %s: %s\n",
				    &conn->peer, engram_wire_status_name(st), why);
		goto refuse;
	}
	if (rx->busy) {
		st = ENGRAM_WIRE_BUSY;
		goto refuse;
	}
	st = engram_serve_admit(req, &t, &bad);
	/* From here the hold travels with the slot: the release finds it there. */
	c->t = t;
	if (st)
		goto refuse;
	dma = engram_table_dma(t, conn->ibdev);
	if (!dma) {
		/* Mapped in the background (a device that just appeared): retry later. */
		pr_info_ratelimited("connection from %pISpc: table pages not mapped for %s yet\n",
				    &conn->peer, dev_name(&conn->ibdev->dev));
		st = ENGRAM_WIRE_TABLE_NOT_READY;
		goto refuse;
	}
	if (engram_fault_response(engram_serve_stopping)) {
		/* Dropped: the client's deadline is what ends this ticket. */
		engram_table_serve_put(t);
		c->t = NULL;
		engram_serve_rdma_ctrl_put(conn, c);
		return;
	}
	if (engram_serve_rdma_write_rows(conn, t, dma, req))
		return;		/* closing: the release drops the hold */

	resp.ticket = req->ticket;
	resp.status = ENGRAM_WIRE_OK;
	resp.bytes = (u64)req->nr_rows * ENGRAM_ROW_BYTES;
	len = engram_wire_resp_encode(c->buf, ENGRAM_SRV_CTRL_BYTES, &conn->neg,
				      false, &resp);
	if (WARN_ON_ONCE(len < 0)) {
		engram_serve_rdma_conn_close(conn);
		return;
	}
	/* Counted before the send: once it is posted the hold may go any time. */
	engram_serve_answered(t, req->nr_rows, t_recv);
	/* RC ordering: the client sees this after every WRITE above. */
	engram_serve_rdma_ctrl_send(conn, c, len, rxp);
	return;

refuse:
	engram_serve_refused(c->t, st);
	c->t = NULL;
	engram_serve_rdma_refuse(conn, c, rxp, req->ticket, st, bad);
}

static void engram_serve_rdma_handle_frame(struct engram_conn *conn, struct engram_rx *rx)
{
	struct engram_wire_hdr_info h;
	struct engram_ctrl *c;
	bool is_req = rx->is_req;
	unsigned long flags;
	char why[128];
	u64 ticket;
	int st, len;

	if (is_req) {
		engram_serve_rdma_handle_request(conn, &rx);
		goto out;
	}
	st = engram_wire_hdr_check(rx->buf, rx->len, &conn->neg, true, false, &h,
				   why, sizeof(why));
	if (!st && h.type == ENGRAM_WIRE_CATALOG_REQUEST) {
		st = engram_wire_simple_parse(rx->buf, rx->len, &conn->neg, true,
					      ENGRAM_WIRE_CATALOG_REQUEST, &ticket,
					      why, sizeof(why));
		if (!st) {
			engram_serve_rdma_cat_send(conn, ticket, &rx);
			goto out;
		}
	}
	c = engram_serve_rdma_ctrl_get(conn);
	if (!c)
		goto out;
	if (!st && h.type == ENGRAM_WIRE_HEARTBEAT) {
		len = engram_wire_simple_encode(c->buf, ENGRAM_SRV_CTRL_BYTES, &conn->neg,
						ENGRAM_WIRE_HEARTBEAT, h.ticket);
		if (!WARN_ON_ONCE(len < 0))
			engram_serve_rdma_ctrl_send(conn, c, len, &rx);
		else
			engram_serve_rdma_ctrl_put(conn, c);
		goto out;
	}
	if (!st) {	/* the header check refuses every other type sent to a server */
		st = ENGRAM_WIRE_MALFORMED;
		snprintf(why, sizeof(why), "unexpected %s frame", engram_wire_type_name(h.type));
	}
	pr_info_ratelimited("connection from %pISpc: frame refused, %s: %s\n",
			    &conn->peer, engram_wire_status_name(st), why);
	engram_stats_count_refusal(&engram_global_stats, st);
	engram_serve_rdma_refuse(conn, c, &rx, h.ticket, st, 0);
out:
	/* Whatever happened, the buffer goes back (a no-op when closing). */
	engram_serve_rdma_rx_done(conn, &rx);
	if (is_req) {
		spin_lock_irqsave(&conn->lock, flags);
		conn->inflight--;
		/* The idle timeout counts from the end of the last answer. */
		WRITE_ONCE(conn->last_rx, jiffies);
		spin_unlock_irqrestore(&conn->lock, flags);
	}
}

/*
 * Register the receive MRs and post the receives.  REG_MR is a send-queue
 * operation, so this waits for the connection to be established; until
 * then, and until the registrations completed (a receive must not name a
 * key the device has not registered yet), there is nothing to receive
 * into.  That costs nothing: a client sends nothing before the first
 * CATALOG, which follows this, and an early SEND meets RNR and is retried.
 */
static int engram_serve_rdma_rx_register(struct engram_conn *conn)
{
	struct ib_send_wr *last;
	u32 i = 0, n, k;
	int ret;

	conn->rx_posted = true;
	while (i < conn->nr_rx) {
		n = min(conn->nr_rx - i, conn->sq_depth);
		ret = engram_serve_rdma_conn_credits(conn, n);
		if (ret)
			return ret;
		for (k = i; k < i + n; k++) {
			conn->rx[k].reg.wr.next = &conn->rx[k + 1].reg.wr;
			conn->rx[k].reg.wr.send_flags = 0;
			conn->rx[k].reg.wr.wr_cqe = &conn->reg_err_cqe;
		}
		last = &conn->rx[i + n - 1].reg.wr;
		last->next = NULL;
		last->send_flags = IB_SEND_SIGNALED;
		last->wr_cqe = &conn->reg_cqe;
		ret = engram_serve_rdma_conn_post(conn, &conn->rx[i].reg.wr, n);
		if (ret)
			return ret;
		i += n;
	}
	/* Every credit back: every registration completed. */
	ret = engram_serve_rdma_conn_wait(conn, engram_serve_rdma_credits_ready, conn->sq_depth,
					  "registering receive buffers stalled");
	for (i = 0; !ret && i < conn->nr_rx; i++)
		ret = engram_serve_rdma_rx_post(conn, &conn->rx[i]);
	return ret;
}

static void engram_serve_rdma_conn_serve(struct engram_conn *conn)
{
	struct engram_rx *rx;
	unsigned long flags;
	bool push;

	for (;;) {
		engram_serve_rdma_conn_reap(conn);
		spin_lock_irqsave(&conn->lock, flags);
		if (conn->closing || !conn->established) {
			spin_unlock_irqrestore(&conn->lock, flags);
			return;
		}
		/* The first CATALOG goes before any answer; pushes between frames. */
		push = !conn->cat_sent || conn->cat_push;
		conn->cat_push = false;
		rx = NULL;
		if (!push) {
			rx = list_first_entry_or_null(&conn->rx_pending, struct engram_rx, node);
			if (rx)
				list_del_init(&rx->node);
		}
		spin_unlock_irqrestore(&conn->lock, flags);

		if (push) {
			if (!conn->rx_ready) {
				if (engram_serve_rdma_rx_register(conn))
					return;
				conn->rx_ready = true;
			}
			if (engram_serve_rdma_cat_send(conn, 0, NULL))
				return;
			conn->cat_sent = true;
		} else if (rx) {
			engram_serve_rdma_handle_frame(conn, rx);
		} else {
			return;
		}
		cond_resched();
	}
}

static void engram_serve_rdma_conn_work(struct work_struct *work)
{
	engram_cover_start();
	engram_serve_rdma_conn_serve(container_of(work, struct engram_conn, work));
	engram_cover_stop();
}

/* Free what setup allocated; the QP is drained first if it ever had receives. */
static void engram_serve_rdma_conn_free_hw(struct engram_conn *conn)
{
	u32 i;

	mutex_lock(&conn->qp_mutex);
	if (conn->qp && conn->rx_posted)
		ib_drain_qp(conn->qp);
	mutex_unlock(&conn->qp_mutex);
	/* Drained: no WRITE can still read a table page. */
	for (i = 0; conn->ctrl && i < conn->nr_ctrl; i++) {
		if (conn->ctrl[i].t) {
			engram_table_serve_put(conn->ctrl[i].t);
			conn->ctrl[i].t = NULL;
		}
	}
	mutex_lock(&conn->qp_mutex);
	if (conn->qp) {
		rdma_destroy_qp(conn->cm_id);
		conn->qp = NULL;
	}
	mutex_unlock(&conn->qp_mutex);
	if (conn->cq) {
		ib_cq_pool_put(conn->cq, conn->nr_cqe);
		conn->cq = NULL;
	}
	for (i = 0; conn->rx && i < conn->nr_rx; i++) {
		struct engram_rx *rx = &conn->rx[i];
		u32 p;

		/* The QP is gone: the MR is in no work request any more. */
		if (rx->mr)
			ib_dereg_mr(rx->mr);
		for (p = 0; p < rx->nr_mapped; p++)
			ib_dma_unmap_page(conn->ibdev, rx->dma[p], PAGE_SIZE, DMA_FROM_DEVICE);
		kfree(rx->dma);
		vfree(rx->buf);
	}
	kfree(conn->rx);
	conn->rx = NULL;
	if (conn->ctrl_dma)
		ib_dma_unmap_single(conn->ibdev, conn->ctrl_dma,
				    conn->nr_ctrl * ENGRAM_SRV_CTRL_BYTES, DMA_TO_DEVICE);
	kfree(conn->ctrl_buf);
	kfree(conn->ctrl);
	conn->ctrl = NULL;
	if (conn->cat_dma)
		ib_dma_unmap_single(conn->ibdev, conn->cat_dma,
				    ENGRAM_WIRE_MAX_CATALOG_BYTES, DMA_TO_DEVICE);
	kfree(conn->cat_buf);
	kvfree(conn->wrs);
	kvfree(conn->sges);
	kfree(conn->sig);
	engram_dev_close(conn->dev);
	conn->dev = NULL;
}

static void engram_serve_rdma_conn_release(struct work_struct *work)
{
	struct engram_conn *conn = container_of(work, struct engram_conn, release_work);
	unsigned long flags;
	bool destroy;

	/* Moves the QP to error: every posted WR completes, flushed. */
	rdma_disconnect(conn->cm_id);
	/* Closing is set, so the work item stops at its next wait or frame. */
	cancel_work_sync(&conn->work);
	cancel_work_sync(&conn->reap_work);
	cancel_delayed_work_sync(&conn->watchdog);
	cancel_delayed_work_sync(&conn->idle_work);
	engram_serve_rdma_conn_free_hw(conn);

	spin_lock_irqsave(&conn->lock, flags);
	destroy = !conn->cm_owns_id;
	conn->id_decided = true;
	spin_unlock_irqrestore(&conn->lock, flags);
	complete_all(&conn->hw_done);
	if (destroy)
		rdma_destroy_id(conn->cm_id);

	/* Before unlisting: a listener is freed once none of its connections is listed. */
	atomic_dec(&conn->l->nconns);
	mutex_lock(&engram_conns_mutex);
	list_del(&conn->node);
	mutex_unlock(&engram_conns_mutex);
	atomic64_dec(&engram_global_stats.c[ENGRAM_STAT_CONNECTIONS]);
	pr_info_ratelimited("connection from %pISpc closed\n", &conn->peer);
	atomic_inc(&engram_conns_gen);
	wake_up_all(&engram_conns_wq);
	kref_put(&conn->ref, engram_serve_rdma_conn_free);
}

/*
 * The device goes away under a connection our ib_client has not seen yet
 * (it was accepted in the gap between our .remove and rdma_cm's).  The
 * CM wants the resources gone when this returns: let the release do all
 * but the id, wait for it, and have the CM destroy the id.
 */
static int engram_serve_rdma_conn_device_removal(struct engram_conn *conn)
{
	unsigned long flags;
	bool owns;

	kref_get(&conn->ref);
	spin_lock_irqsave(&conn->lock, flags);
	if (!conn->id_decided)
		conn->cm_owns_id = true;
	owns = conn->cm_owns_id;
	spin_unlock_irqrestore(&conn->lock, flags);
	engram_serve_rdma_conn_close(conn);
	if (owns)
		wait_for_completion(&conn->hw_done);
	kref_put(&conn->ref, engram_serve_rdma_conn_free);
	return owns;
}

/**
 * engram_serve_rdma_conn_cm_event() - rdma_cm events of an accepted connection
 * @cm_id: the connection's id
 * @ev: the event
 *
 * Called by engram_serve_listen_cm_handler() with the id's handler mutex held.
 *
 * Return: nonzero to have the CM destroy @cm_id (DEVICE_REMOVAL only).
 */
int engram_serve_rdma_conn_cm_event(struct rdma_cm_id *cm_id, struct rdma_cm_event *ev)
{
	struct engram_conn *conn = container_of(cm_id->context, struct engram_conn, ctx);
	unsigned long flags;

	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		spin_lock_irqsave(&conn->lock, flags);
		conn->established = true;
		if (!conn->closing)
			queue_work(engram_srv_wq, &conn->work);
		spin_unlock_irqrestore(&conn->lock, flags);
		return 0;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
	case RDMA_CM_EVENT_ADDR_CHANGE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		engram_serve_rdma_conn_close(conn);
		return 0;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return engram_serve_rdma_conn_device_removal(conn);
	default:
		return 0;
	}
}

static int engram_serve_rdma_conn_reject(struct rdma_cm_id *cm_id, const char *why, int err)
{
	rdma_reject(cm_id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
	engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_REJECTED);
	pr_info_ratelimited("connection from %pISpc rejected: %s (%d)\n",
			    &cm_id->route.addr.dst_addr, why, err);
	return 1;	/* the CM destroys the id */
}

/* The same host: family and address, whatever the port. */
static bool engram_serve_rdma_same_peer(const struct sockaddr_storage *a,
					const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return ipv6_addr_equal(&((const struct sockaddr_in6 *)a)->sin6_addr,
				       &((const struct sockaddr_in6 *)b)->sin6_addr);
	return false;
}

/*
 * Admit a request under the connection limits, before anything is
 * allocated for it, and reserve its place (@r) until it is listed or
 * fails.  Connections still being torn down count: their memory is not
 * free yet.  The lists are at most rdma_max_conns_total long, and walking
 * them costs nothing next to setting up a queue pair.
 *
 * Return: NULL when admitted, else the reason (the refusal is counted).
 */
static const char *engram_serve_rdma_conn_admit(struct engram_conn_resv *r)
{
	u32 total = 0, on_l = 0, from_peer = 0;
	const struct engram_conn_resv *o;
	const struct engram_conn *conn;
	const char *why = NULL;
	int stat = 0;

	mutex_lock(&engram_conns_mutex);
	list_for_each_entry(conn, &engram_conns, node) {
		total++;
		on_l += conn->l == r->l;
		from_peer += engram_serve_rdma_same_peer(&conn->peer, &r->peer);
	}
	list_for_each_entry(o, &engram_conn_resvs, node) {
		total++;
		on_l += o->l == r->l;
		from_peer += engram_serve_rdma_same_peer(&o->peer, &r->peer);
	}
	if (total >= READ_ONCE(engram_srv_max_conns_total.val)) {
		stat = ENGRAM_STAT_CONNECTS_OVER_TOTAL;
		why = "rdma_max_conns_total connections already";
	} else if (on_l >= READ_ONCE(engram_srv_max_conns.val)) {
		stat = ENGRAM_STAT_CONNECTS_OVER_LISTENER;
		why = "rdma_max_conns connections on this listener already";
	} else if (from_peer >= READ_ONCE(engram_srv_max_conns_peer.val)) {
		stat = ENGRAM_STAT_CONNECTS_OVER_PEER;
		why = "rdma_max_conns_per_peer connections from this address already";
	} else {
		list_add_tail(&r->node, &engram_conn_resvs);
	}
	mutex_unlock(&engram_conns_mutex);
	if (why)
		engram_count(&engram_global_stats, stat);
	return why;
}

static void engram_serve_rdma_conn_unreserve(struct engram_conn_resv *r)
{
	mutex_lock(&engram_conns_mutex);
	list_del(&r->node);
	mutex_unlock(&engram_conns_mutex);
}

/* Refused by a limit: not a bad peer, so not in connects_rejected. */
static int engram_serve_rdma_conn_refuse_limit(struct rdma_cm_id *cm_id, const char *why)
{
	rdma_reject(cm_id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
	pr_info_ratelimited("connection from %pISpc refused: %s\n",
			    &cm_id->route.addr.dst_addr, why);
	return 1;	/* the CM destroys the id */
}

/* This server's hello, within what the device can queue. */
static int engram_serve_rdma_server_params(const struct ib_device_attr *attrs,
					   struct engram_wire_params *p)
{
	int room = attrs->max_qp_wr - 1 - ENGRAM_SRV_EXTRA_RECV;
	u64 fit;

	if (room < 1)
		return -EINVAL;
	/* Receive buffers are fast-registered (struct engram_rx): one MR each. */
	if (!(attrs->device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS))
		return -EOPNOTSUPP;
	fit = (u64)attrs->max_fast_reg_page_list_len * PAGE_SIZE;
	if (fit < 4096 + engram_wire_request_size(1, ENGRAM_WIRE_MAX_RANGES))
		return -EINVAL;
	/* Rows whose request, rounded up, fits one registration. */
	fit = (fit - 4096 - engram_wire_request_size(0, ENGRAM_WIRE_MAX_RANGES)) / 4;
	/*
	 * The server, not the peer, bounds its receive buffers: the answer
	 * carries the smaller of both sides' limits, and a request over them
	 * is refused (TOO_MANY_ROWS) by the codec.
	 */
	engram_wire_offer(p, min_t(u64, READ_ONCE(engram_srv_max_rows.val), fit),
			  min(ENGRAM_WIRE_OFFER_INFLIGHT, room));
	p->max_request_bytes = round_up(p->max_request_bytes, 4096);
	return 0;
}

/* Size the queues from the device's own limits; nothing assumes rxe's. */
static int engram_serve_rdma_conn_size(struct engram_conn *conn)
{
	const struct ib_device_attr *attrs = &conn->ibdev->attrs;
	struct ib_port_attr pattr;
	u32 rq = conn->neg.max_inflight + ENGRAM_SRV_EXTRA_RECV;
	int sq;

	conn->nr_rx = rq;
	/* One WR each of the two queues is ib_drain_qp()'s. */
	sq = min_t(int, ENGRAM_SRV_SQ_DEPTH, attrs->max_qp_wr - 1);
	sq = min_t(int, sq, attrs->max_cqe - (int)rq - 2);
	if (sq < ENGRAM_SRV_SQ_MIN)
		return -EINVAL;
	conn->sq_depth = sq;
	conn->nr_cqe = sq + rq + 2;
	conn->max_sge = min_t(u32, attrs->max_send_sge, ENGRAM_SRV_MAX_SGE);
	if (!conn->max_sge)
		return -EINVAL;
	conn->wr_max_bytes = ENGRAM_SRV_WR_MAX_BYTES;
	if (!ib_query_port(conn->ibdev, conn->cm_id->port_num, &pattr) &&
	    pattr.max_msg_sz)
		conn->wr_max_bytes = clamp_t(u32, pattr.max_msg_sz, ENGRAM_WEIGHT_BYTES,
					     ENGRAM_SRV_WR_MAX_BYTES);
	return 0;
}

static int engram_serve_rdma_conn_create_qp(struct engram_conn *conn)
{
	struct ib_qp_init_attr qa;
	int ret;

	conn->cq = engram_cq_pool_get(conn->ibdev, conn->nr_cqe, -1, IB_POLL_SOFTIRQ);
	if (IS_ERR(conn->cq)) {
		ret = PTR_ERR(conn->cq);
		conn->cq = NULL;
		return ret;
	}
	/* Some devices cannot make a deep SQ of many SGEs: settle for less. */
	for (;;) {
		memset(&qa, 0, sizeof(qa));
		qa.event_handler = engram_serve_rdma_qp_event;
		qa.qp_context = conn;
		qa.send_cq = conn->cq;
		qa.recv_cq = conn->cq;
		qa.cap.max_send_wr = conn->sq_depth + 1;
		qa.cap.max_recv_wr = conn->nr_rx + 1;
		qa.cap.max_send_sge = conn->max_sge;
		qa.cap.max_recv_sge = 1;
		qa.sq_sig_type = IB_SIGNAL_REQ_WR;
		qa.qp_type = IB_QPT_RC;
		ret = engram_create_qp(conn->cm_id, conn->dev->pd, &qa);
		if (!ret)
			break;
		if ((ret != -ENOMEM && ret != -EINVAL) ||
		    conn->sq_depth / 2 < ENGRAM_SRV_SQ_MIN)
			return ret;
		conn->sq_depth /= 2;
	}
	conn->qp = conn->cm_id->qp;
	return 0;
}

static int engram_serve_rdma_rx_alloc(struct engram_conn *conn, struct engram_rx *rx)
{
	struct ib_device *ibdev = conn->ibdev;
	struct scatterlist *sgl;
	u32 p;
	int n;

	rx->conn = conn;
	rx->cqe.done = engram_serve_rdma_recv_done;
	INIT_LIST_HEAD(&rx->node);
	rx->buf = vmalloc(conn->rx_pages * PAGE_SIZE);
	rx->dma = kcalloc(conn->rx_pages, sizeof(*rx->dma), GFP_KERNEL);
	if (!rx->buf || !rx->dma)
		return -ENOMEM;
	for (p = 0; p < conn->rx_pages; p++) {
		struct page *page = vmalloc_to_page(rx->buf + p * PAGE_SIZE);
		u64 dma = engram_dma_map_page(ibdev, page, 0, PAGE_SIZE, DMA_FROM_DEVICE);

		if (engram_dma_mapping_error(ibdev, dma))
			return -ENOMEM;
		rx->dma[p] = dma;
		rx->nr_mapped++;
	}
	rx->mr = engram_alloc_mr(conn->dev->pd, IB_MR_TYPE_MEM_REG, conn->rx_pages);
	if (IS_ERR(rx->mr)) {
		n = PTR_ERR(rx->mr);
		rx->mr = NULL;
		return n;
	}
	/* The pages are mapped already: the MR takes their DMA addresses as they are. */
	sgl = kmalloc_array(conn->rx_pages, sizeof(*sgl), GFP_KERNEL);
	if (!sgl)
		return -ENOMEM;
	sg_init_table(sgl, conn->rx_pages);
	for (p = 0; p < conn->rx_pages; p++) {
		sg_dma_address(&sgl[p]) = rx->dma[p];
		sg_dma_len(&sgl[p]) = PAGE_SIZE;
	}
	n = engram_map_mr_sg(rx->mr, sgl, conn->rx_pages, NULL, PAGE_SIZE);
	kfree(sgl);
	if (n != conn->rx_pages)
		return n < 0 ? n : -EINVAL;
	rx->reg.wr.opcode = IB_WR_REG_MR;
	rx->reg.wr.wr_cqe = &conn->reg_err_cqe;
	rx->reg.mr = rx->mr;
	rx->reg.key = rx->mr->lkey;
	/* Local write only: the peer SENDs into it, and never gets a key. */
	rx->reg.access = IB_ACCESS_LOCAL_WRITE;
	return 0;
}

static int engram_serve_rdma_conn_alloc_bufs(struct engram_conn *conn)
{
	struct ib_device *ibdev = conn->ibdev;
	u32 i;

	conn->sig_size = conn->sq_depth + 1;
	conn->sig = kcalloc(conn->sig_size, sizeof(*conn->sig), GFP_KERNEL);
	conn->wrs = kvcalloc(ENGRAM_SRV_CHAIN_MAX, sizeof(*conn->wrs), GFP_KERNEL);
	conn->sges = kvcalloc(ENGRAM_SRV_CHAIN_MAX * conn->max_sge, sizeof(*conn->sges),
			      GFP_KERNEL);
	conn->rx = kcalloc(conn->nr_rx, sizeof(*conn->rx), GFP_KERNEL);
	conn->nr_ctrl = conn->neg.max_inflight + ENGRAM_SRV_EXTRA_RECV + 2;
	conn->ctrl = kcalloc(conn->nr_ctrl, sizeof(*conn->ctrl), GFP_KERNEL);
	conn->ctrl_buf = kcalloc(conn->nr_ctrl, ENGRAM_SRV_CTRL_BYTES, GFP_KERNEL);
	conn->cat_buf = kzalloc(ENGRAM_WIRE_MAX_CATALOG_BYTES, GFP_KERNEL);
	if (!conn->sig || !conn->wrs || !conn->sges || !conn->rx || !conn->ctrl ||
	    !conn->ctrl_buf || !conn->cat_buf)
		return -ENOMEM;

	/* Receives: pages, see struct engram_rx. */
	conn->rx_size = conn->neg.max_request_bytes;
	conn->rx_pages = DIV_ROUND_UP(conn->rx_size, PAGE_SIZE);
	for (i = 0; i < conn->nr_rx; i++) {
		int ret = engram_serve_rdma_rx_alloc(conn, &conn->rx[i]);

		if (ret)
			return ret;
	}

	conn->ctrl_dma = engram_dma_map_single(ibdev, conn->ctrl_buf,
					       conn->nr_ctrl * ENGRAM_SRV_CTRL_BYTES,
					       DMA_TO_DEVICE);
	if (engram_dma_mapping_error(ibdev, conn->ctrl_dma)) {
		conn->ctrl_dma = 0;
		return -ENOMEM;
	}
	for (i = 0; i < conn->nr_ctrl; i++) {
		struct engram_ctrl *c = &conn->ctrl[i];

		c->conn = conn;
		c->cqe.done = engram_serve_rdma_ctrl_done;
		c->buf = conn->ctrl_buf + i * ENGRAM_SRV_CTRL_BYTES;
		c->dma = conn->ctrl_dma + i * ENGRAM_SRV_CTRL_BYTES;
		list_add_tail(&c->node, &conn->ctrl_free);
	}

	conn->cat_dma = engram_dma_map_single(ibdev, conn->cat_buf,
					      ENGRAM_WIRE_MAX_CATALOG_BYTES, DMA_TO_DEVICE);
	if (engram_dma_mapping_error(ibdev, conn->cat_dma)) {
		conn->cat_dma = 0;
		return -ENOMEM;
	}
	return 0;
}

static struct engram_conn *engram_serve_rdma_conn_alloc(struct engram_listener *l,
							struct rdma_cm_id *cm_id,
					     const struct engram_wire_params *neg)
{
	struct engram_conn *conn = kzalloc(sizeof(*conn), GFP_KERNEL);

	if (!conn)
		return NULL;
	conn->ctx.kind = ENGRAM_CM_CONN;
	kref_init(&conn->ref);
	INIT_LIST_HEAD(&conn->node);
	conn->l = l;
	conn->cm_id = cm_id;
	conn->ibdev = cm_id->device;
	conn->neg = *neg;
	memcpy(&conn->peer, &cm_id->route.addr.dst_addr, sizeof(conn->peer));
	spin_lock_init(&conn->lock);
	mutex_init(&conn->qp_mutex);
	INIT_LIST_HEAD(&conn->rx_pending);
	INIT_LIST_HEAD(&conn->ctrl_free);
	INIT_LIST_HEAD(&conn->ctrl_done);
	init_waitqueue_head(&conn->sq_wait);
	INIT_WORK(&conn->work, engram_serve_rdma_conn_work);
	INIT_WORK(&conn->reap_work, engram_serve_rdma_conn_reap_work);
	INIT_WORK(&conn->release_work, engram_serve_rdma_conn_release);
	INIT_DELAYED_WORK(&conn->watchdog, engram_serve_rdma_conn_watchdog);
	INIT_DELAYED_WORK(&conn->idle_work, engram_serve_rdma_conn_idle);
	init_completion(&conn->hw_done);
	/*
	 * Closing until accepted: a completion or QP event during setup must
	 * not queue a release for a connection that setup itself frees.
	 */
	conn->closing = true;
	conn->cat_cqe.done = engram_serve_rdma_cat_done;
	conn->reg_cqe.done = engram_serve_rdma_reg_done;
	conn->reg_err_cqe.done = engram_serve_rdma_reg_err_done;
	conn->write_cqe.done = engram_serve_rdma_write_done;
	conn->chain_cqe.done = engram_serve_rdma_chain_done;
	return conn;
}

/* Everything a connection needs before it is accepted. */
static int engram_serve_rdma_conn_setup(struct engram_conn *conn)
{
	int ret;

	/*
	 * A PD of its own: no MR of a client link (or of another connection)
	 * is reachable through this QP, whoever drives its peer end.
	 */
	conn->dev = engram_dev_open(conn->ibdev);
	if (!conn->dev)
		return -ENOMEM;
	conn->lkey = conn->dev->pd->local_dma_lkey;
	ret = engram_serve_rdma_conn_size(conn);
	if (!ret)
		ret = engram_serve_rdma_conn_create_qp(conn);
	if (!ret)
		ret = engram_serve_rdma_conn_alloc_bufs(conn);
	if (ret)
		return ret;
	conn->sq_free = conn->sq_depth;
	return 0;
}

/*
 * The IB CM readies every connected QP with remote write access, and with
 * remote read and atomics once the peer asks for responder resources.  A
 * server connection lets its peer neither write nor read its memory, so
 * take them all away.  Only possible once rdma_accept() has moved the QP
 * to RTS; until then the peer can reach nothing anyway, since the
 * connection's own PD holds no MR with remote access.  The connection is
 * live by then: a completion error may already have queued its release.
 *
 * Return: 0, or a negative errno when the device refused (a connection
 * that is closing meanwhile counts as done).
 */
static int engram_serve_rdma_conn_no_remote_access(struct engram_conn *conn)
{
	struct ib_qp_attr attr = { .qp_access_flags = 0 };
	int ret = 0;

	mutex_lock(&conn->qp_mutex);
	if (conn->qp)
		ret = ib_modify_qp(conn->qp, &attr, IB_QP_ACCESS_FLAGS);
	mutex_unlock(&conn->qp_mutex);
	return engram_serve_rdma_conn_closing(conn) ? 0 : ret;
}

/**
 * engram_serve_rdma_conn_request() - answer a CONNECT_REQUEST on a listener
 * @l: the listener
 * @cm_id: the new connection's id (its context is still @l's)
 * @ev: the event, whose private data is the client's hello
 *
 * Negotiates, sets the connection up and accepts it, or rejects it.
 * Called by the listener's event handler, with the listening id's and
 * @cm_id's handler mutexes held; sleeps.
 *
 * Return: 0 when the connection is listed (accepted, or failed to accept
 * and handed to the release work, which destroys @cm_id); nonzero when
 * rejected, so that the CM destroys @cm_id.
 */
int engram_serve_rdma_conn_request(struct engram_listener *l, struct rdma_cm_id *cm_id,
				   const struct rdma_cm_event *ev)
{
	const struct ib_device_attr *attrs = &cm_id->device->attrs;
	struct engram_wire_params local, peer, neg;
	u8 hello[ENGRAM_WIRE_HELLO_BYTES];
	struct engram_conn_resv resv = { .l = l };
	struct rdma_conn_param param;
	struct engram_conn *conn;
	const char *over;
	char why[160];
	int ret;

	/* Before anything is allocated; counted and logged by allow.c. */
	if (!engram_allow_peer_on((struct sockaddr *)&cm_id->route.addr.dst_addr,
				  l->url.text)) {
		rdma_reject(cm_id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		return 1;	/* the CM destroys the id */
	}
	if (engram_serve_stopping())
		return engram_serve_rdma_conn_reject(cm_id, "server shutting down", -ESHUTDOWN);
	ret = engram_wire_hello_decode(ev->param.conn.private_data,
				       ev->param.conn.private_data_len, &peer,
				       why, sizeof(why));
	if (ret)
		return engram_serve_rdma_conn_reject(cm_id, why, ret);
	ret = engram_serve_rdma_server_params(attrs, &local);
	if (ret)
		return engram_serve_rdma_conn_reject(cm_id, ret == -EOPNOTSUPP ?
					  "device has no fast registration" :
					  "device queues too small", ret);
	ret = engram_wire_negotiate(&local, &peer, &neg, why, sizeof(why));
	if (ret)
		return engram_serve_rdma_conn_reject(cm_id, why, ret);

	memcpy(&resv.peer, &cm_id->route.addr.dst_addr, sizeof(resv.peer));
	over = engram_serve_rdma_conn_admit(&resv);
	if (over)
		return engram_serve_rdma_conn_refuse_limit(cm_id, over);
	conn = engram_serve_rdma_conn_alloc(l, cm_id, &neg);
	if (!conn) {
		engram_serve_rdma_conn_unreserve(&resv);
		return engram_serve_rdma_conn_reject(cm_id, "out of memory", -ENOMEM);
	}
	ret = engram_serve_rdma_conn_setup(conn);
	if (ret) {
		engram_serve_rdma_conn_free_hw(conn);
		kfree(conn);
		engram_serve_rdma_conn_unreserve(&resv);
		return engram_serve_rdma_conn_reject(cm_id, "cannot set up the queue pair", ret);
	}

	ret = engram_wire_hello_encode(hello, sizeof(hello), &neg);
	if (WARN_ON_ONCE(ret < 0)) {
		engram_serve_rdma_conn_free_hw(conn);
		kfree(conn);
		engram_serve_rdma_conn_unreserve(&resv);
		return engram_serve_rdma_conn_reject(cm_id, "cannot encode the hello", ret);
	}
	memset(&param, 0, sizeof(param));
	param.private_data = hello;
	param.private_data_len = sizeof(hello);
	/*
	 * We never read from the client, and it may never read (or write)
	 * us: no RDMA READ resources either way, whatever the peer offered.
	 */
	param.initiator_depth = 0;
	param.responder_resources = 0;
	param.flow_control = 1;
	param.rnr_retry_count = 7;

	/*
	 * Live from here: listed, so that removal and unload find it, and torn
	 * down by the release work alone, even if the accept fails (the id
	 * then stays ours to destroy: we return 0).
	 */
	cm_id->context = &conn->ctx;
	spin_lock_irq(&conn->lock);
	conn->closing = false;
	spin_unlock_irq(&conn->lock);
	atomic_inc(&l->nconns);
	atomic64_inc(&engram_global_stats.c[ENGRAM_STAT_CONNECTIONS]);
	mutex_lock(&engram_conns_mutex);
	list_del(&resv.node);	/* counted as a listed connection from here */
	list_add_tail(&conn->node, &engram_conns);
	mutex_unlock(&engram_conns_mutex);

	ret = engram_cm_accept(cm_id, &param);
	if (ret) {
		engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_REJECTED);
		pr_info_ratelimited("connection from %pISpc: accept failed (%d)\n",
				    &conn->peer, ret);
		engram_serve_rdma_conn_close(conn);
		return 0;
	}
	ret = engram_serve_rdma_conn_no_remote_access(conn);
	if (ret) {
		engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_REJECTED);
		pr_warn_ratelimited("connection from %pISpc: %s cannot take remote access off the queue pair (%d), closed\n",
				    &conn->peer, dev_name(&conn->ibdev->dev), ret);
		engram_serve_rdma_conn_close(conn);
		return 0;
	}
	/* Silence is measured from the accept until the first frame. */
	WRITE_ONCE(conn->last_rx, jiffies);
	spin_lock_irq(&conn->lock);
	if (!conn->closing)
		queue_delayed_work(engram_srv_wq, &conn->idle_work, ENGRAM_SRV_IDLE_RECHECK);
	spin_unlock_irq(&conn->lock);
	engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_ACCEPTED);
	pr_info_ratelimited("connection from %pISpc on %s (%s): v%u, %u rows, %u in flight, %u request bytes, sq %u, %u sge\n",
			    &conn->peer, l->url.text, dev_name(&conn->ibdev->dev),
			    neg.version_max, neg.max_rows, neg.max_inflight,
			    neg.max_request_bytes, conn->sq_depth, conn->max_sge);
	return 0;
}

/**
 * engram_serve_rdma_conns_close_sync() - disconnect connections and wait until gone
 * @l: only the connections of this listener, or NULL
 * @ibdev: only the connections on this device, or NULL
 *
 * With both NULL, every connection.  Process context; sleeps.  The caller
 * must hold none of the server's locks.
 */
void engram_serve_rdma_conns_close_sync(const struct engram_listener *l,
					const struct ib_device *ibdev)
{
	struct engram_conn *conn;
	bool found;
	int gen;

	for (;;) {
		found = false;
		mutex_lock(&engram_conns_mutex);
		gen = atomic_read(&engram_conns_gen);
		list_for_each_entry(conn, &engram_conns, node) {
			if ((l && conn->l != l) || (ibdev && conn->ibdev != ibdev))
				continue;
			found = true;
			engram_serve_rdma_conn_close(conn);
		}
		mutex_unlock(&engram_conns_mutex);
		if (!found)
			return;
		wait_event(engram_conns_wq, atomic_read(&engram_conns_gen) != gen);
	}
}

/* Mark a CATALOG push on every connection; each sends it from its work item. */
static void engram_serve_rdma_cat_push(struct work_struct *work)
{
	struct engram_conn *conn;
	unsigned long flags;

	mutex_lock(&engram_conns_mutex);
	list_for_each_entry(conn, &engram_conns, node) {
		spin_lock_irqsave(&conn->lock, flags);
		if (!conn->closing) {
			conn->cat_push = true;
			if (conn->established)
				queue_work(engram_srv_wq, &conn->work);
		}
		spin_unlock_irqrestore(&conn->lock, flags);
	}
	mutex_unlock(&engram_conns_mutex);
}

/* serve.c's call: the catalog changed (any context, any lock held). */
static void engram_serve_rdma_cat_changed(void)
{
	queue_work(engram_srv_wq, &engram_cat_work);
}

/**
 * engram_serve_rdma_conns_init() - set up the connection machinery
 *
 * Return: 0 or -ENOMEM.
 */
int engram_serve_rdma_conns_init(void)
{
	/* Unbound: a big response's work item may run for a while. */
	engram_srv_wq = alloc_workqueue("engram_srv", WQ_UNBOUND, 0);
	if (!engram_srv_wq)
		return -ENOMEM;
	engram_serve_register(&engram_srv_transport);
	return 0;
}

/**
 * engram_serve_rdma_conns_exit() - disconnect every connection and free the machinery
 *
 * Call once no listener can accept any more.  Returns when every
 * connection is gone.  Process context; sleeps.
 */
void engram_serve_rdma_conns_exit(void)
{
	engram_serve_unregister(&engram_srv_transport);
	cancel_work_sync(&engram_cat_work);
	engram_serve_rdma_conns_close_sync(NULL, NULL);
	destroy_workqueue(engram_srv_wq);
	engram_srv_wq = NULL;
}
