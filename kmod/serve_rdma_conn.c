// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA transport of the host role, connections: admit a connection
 * request (limits per listener, per peer and in all), negotiate, set up
 * a PD and an RC QP of its own on a CQ from the device's shared pool,
 * receive buffers and control slots, accept; and tear down.  What a
 * connection does in between is serve_rdma.c's.
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
 * the fields marked so in serve_rdma.h.  Lock order: engram_listen_mutex,
 * then a cm_id's handler mutex, then engram_conns_mutex, then conn->lock.
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
#include "serve_rdma.h"
#include "wbuild.h"
#include "wire.h"

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

static LIST_HEAD(engram_conns);
static DEFINE_MUTEX(engram_conns_mutex);
/* Bumped whenever a connection leaves the list; waiters watch it. */
static atomic_t engram_conns_gen = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(engram_conns_wq);

/* Catalog pushes: coalesced in one work item (serve.c says when). */
static void engram_serve_rdma_conn_cat_push(struct work_struct *work);
static DECLARE_WORK(engram_cat_work, engram_serve_rdma_conn_cat_push);
static void engram_serve_rdma_conn_cat_changed(void);
static struct engram_serve_transport engram_srv_transport = {
	.node = LIST_HEAD_INIT(engram_srv_transport.node),
	.catalog_changed = engram_serve_rdma_conn_cat_changed,
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
	kref_put(&conn->ref, engram_serve_rdma_free);
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
	engram_serve_rdma_close(conn);
	if (owns)
		wait_for_completion(&conn->hw_done);
	kref_put(&conn->ref, engram_serve_rdma_free);
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
			queue_work(engram_serve_rdma_wq, &conn->work);
		spin_unlock_irqrestore(&conn->lock, flags);
		return 0;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
	case RDMA_CM_EVENT_ADDR_CHANGE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		engram_serve_rdma_close(conn);
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
static bool engram_serve_rdma_conn_same_peer(const struct sockaddr_storage *a,
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
		from_peer += engram_serve_rdma_conn_same_peer(&conn->peer, &r->peer);
	}
	list_for_each_entry(o, &engram_conn_resvs, node) {
		total++;
		on_l += o->l == r->l;
		from_peer += engram_serve_rdma_conn_same_peer(&o->peer, &r->peer);
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
static int engram_serve_rdma_conn_params(const struct ib_device_attr *attrs,
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
			  min(ENGRAM_WIRE_OFFER_INFLIGHT, room),
			  engram_params_protocol_version());
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

static int engram_serve_rdma_conn_rx_alloc(struct engram_conn *conn, struct engram_rx *rx)
{
	struct ib_device *ibdev = conn->ibdev;
	struct scatterlist *sgl;
	u32 p;
	int n;

	engram_serve_rdma_rx_prepare(conn, rx);
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
		int ret = engram_serve_rdma_conn_rx_alloc(conn, &conn->rx[i]);

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

		engram_serve_rdma_ctrl_prepare(conn, c);
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
	init_waitqueue_head(&conn->sq_wait);
	INIT_WORK(&conn->release_work, engram_serve_rdma_conn_release);
	init_completion(&conn->hw_done);
	/*
	 * Closing until accepted: a completion or QP event during setup must
	 * not queue a release for a connection that setup itself frees.
	 */
	conn->closing = true;
	engram_serve_rdma_prepare(conn);
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
	return engram_serve_rdma_closing(conn) ? 0 : ret;
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
	ret = engram_serve_rdma_conn_params(attrs, &local);
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
		engram_serve_rdma_close(conn);
		return 0;
	}
	ret = engram_serve_rdma_conn_no_remote_access(conn);
	if (ret) {
		engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_REJECTED);
		pr_warn_ratelimited("connection from %pISpc: %s cannot take remote access off the queue pair (%d), closed\n",
				    &conn->peer, dev_name(&conn->ibdev->dev), ret);
		engram_serve_rdma_close(conn);
		return 0;
	}
	/* Silence is measured from the accept until the first frame. */
	WRITE_ONCE(conn->last_rx, jiffies);
	spin_lock_irq(&conn->lock);
	if (!conn->closing)
		queue_delayed_work(engram_serve_rdma_wq, &conn->idle_work, ENGRAM_SRV_IDLE_RECHECK);
	spin_unlock_irq(&conn->lock);
	engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_ACCEPTED);
	pr_info_ratelimited("connection from %pISpc on %s (%s): v%u, %u rows, %u in flight, %u request bytes, sq %u, %u sge\n",
			    &conn->peer, l->url.text, dev_name(&conn->ibdev->dev),
			    neg.version_max, neg.max_rows, neg.max_inflight,
			    neg.max_request_bytes, conn->sq_depth, conn->max_sge);
	return 0;
}

/**
 * engram_serve_rdma_conn_close_sync() - disconnect connections and wait until gone
 * @l: only the connections of this listener, or NULL
 * @ibdev: only the connections on this device, or NULL
 *
 * With both NULL, every connection.  Process context; sleeps.  The caller
 * must hold none of the server's locks.
 */
void engram_serve_rdma_conn_close_sync(const struct engram_listener *l,
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
			engram_serve_rdma_close(conn);
		}
		mutex_unlock(&engram_conns_mutex);
		if (!found)
			return;
		wait_event(engram_conns_wq, atomic_read(&engram_conns_gen) != gen);
	}
}

/* Mark a CATALOG push on every connection; each sends it from its work item. */
static void engram_serve_rdma_conn_cat_push(struct work_struct *work)
{
	struct engram_conn *conn;
	unsigned long flags;

	mutex_lock(&engram_conns_mutex);
	list_for_each_entry(conn, &engram_conns, node) {
		spin_lock_irqsave(&conn->lock, flags);
		if (!conn->closing) {
			conn->cat_push = true;
			if (conn->established)
				queue_work(engram_serve_rdma_wq, &conn->work);
		}
		spin_unlock_irqrestore(&conn->lock, flags);
	}
	mutex_unlock(&engram_conns_mutex);
}

/* serve.c's call: the catalog changed (any context, any lock held). */
static void engram_serve_rdma_conn_cat_changed(void)
{
	queue_work(engram_serve_rdma_wq, &engram_cat_work);
}

/**
 * engram_serve_rdma_conn_init() - set up the connection machinery
 *
 * Return: 0 or -ENOMEM.
 */
int engram_serve_rdma_conn_init(void)
{
	int ret = engram_serve_rdma_init();

	if (ret)
		return ret;
	engram_serve_register(&engram_srv_transport);
	return 0;
}

/**
 * engram_serve_rdma_conn_exit() - disconnect every connection and free the machinery
 *
 * Call once no listener can accept any more.  Returns when every
 * connection is gone.  Process context; sleeps.
 */
void engram_serve_rdma_conn_exit(void)
{
	engram_serve_unregister(&engram_srv_transport);
	cancel_work_sync(&engram_cat_work);
	engram_serve_rdma_conn_close_sync(NULL, NULL);
	engram_serve_rdma_exit();
}
