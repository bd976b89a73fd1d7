// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA transport of the host role, serving: what an accepted
 * connection does until its release (serve_rdma_conn.c sets it up and
 * tears it down).  Requests are answered with RDMA WRITEs gathered
 * straight from the tables' pinned pages.
 *
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
 * Anything that goes wrong here closes the connection
 * (engram_serve_rdma_close()): no post after that, and the release work
 * does the rest.
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
#include <linux/sched/clock.h>
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

#include "cost.h"
#include "cover.h"
#include "engram.h"
#include "inject.h"
#include "serve.h"
#include "serve_listen.h"
#include "serve_rdma.h"
#include "wbuild.h"
#include "wire.h"

static struct engram_uint_param engram_srv_idle_ms = {
	.val = 30000, .min = ENGRAM_SRV_IDLE_MS_MIN, .max = ENGRAM_SRV_IDLE_MS_MAX,
	.zero_ok = true,
};

static struct engram_uint_param engram_srv_stall_ms = {
	.val = 10000, .min = ENGRAM_SRV_STALL_MS_MIN, .max = ENGRAM_SRV_STALL_MS_MAX,
};

static struct engram_uint_param engram_srv_softirq_rows = {
	.val = ENGRAM_SRV_SOFTIRQ_ROWS, .max = ENGRAM_SRV_SOFTIRQ_ROWS_MAX, .zero_ok = true,
};

module_param_cb(rdma_idle_timeout_ms, &engram_uint_param_ops, &engram_srv_idle_ms, 0644);
MODULE_PARM_DESC(rdma_idle_timeout_ms,
		 "RDMA server: close a connection that sent nothing for this many ms (0 off, or 100-3600000, default 30000)");
module_param_cb(rdma_stall_timeout_ms, &engram_uint_param_ops, &engram_srv_stall_ms, 0644);
MODULE_PARM_DESC(rdma_stall_timeout_ms,
		 "RDMA server: close a connection whose peer leaves a send or a response unacknowledged for this many ms (1000-600000, default 10000)");

module_param_cb(rdma_softirq_rows, &engram_uint_param_ops, &engram_srv_softirq_rows, 0644);
MODULE_PARM_DESC(rdma_softirq_rows,
		 "RDMA server: answer a request of up to this many rows in the softirq that received it, when the connection has nothing queued (0: every request in a work item; 0-65536, default 4096)");

/*
 * A peer that lets a send stay incomplete this long is considered dead: a
 * live one acknowledges within its RNR and transport retries, far below
 * the default.  Slow hosts (an emulated guest under KASAN) need more.
 */
static unsigned long engram_serve_rdma_stall(void)
{
	return msecs_to_jiffies(READ_ONCE(engram_srv_stall_ms.val));
}

/* Connections' work items; unbound: a big response's may run for a while. */
struct workqueue_struct *engram_serve_rdma_wq;

/**
 * engram_serve_rdma_free() - the release of a connection's last reference
 * @ref: its kref
 */
void engram_serve_rdma_free(struct kref *ref)
{
	kfree(container_of(ref, struct engram_conn, ref));
}

/**
 * engram_serve_rdma_close() - close a connection
 * @conn: the connection
 *
 * Any context.  Idempotent: the first call queues the release; no post
 * follows it.
 */
void engram_serve_rdma_close(struct engram_conn *conn)
{
	unsigned long flags;
	bool first;

	spin_lock_irqsave(&conn->lock, flags);
	first = !conn->closing;
	conn->closing = true;
	spin_unlock_irqrestore(&conn->lock, flags);
	if (first)
		queue_work(engram_serve_rdma_wq, &conn->release_work);
	wake_up_all(&conn->sq_wait);
}

/**
 * engram_serve_rdma_closing() - is the connection closing?
 * @conn: the connection
 *
 * Return: true once engram_serve_rdma_close() was called (or before the
 * accept).
 */
bool engram_serve_rdma_closing(struct engram_conn *conn)
{
	return READ_ONCE(conn->closing);
}

static void engram_serve_rdma_broken(struct engram_conn *conn, const char *what, int err)
{
	if (!engram_serve_rdma_closing(conn)) {
		engram_count(&engram_global_stats, ENGRAM_STAT_TRANSPORT_ERRORS);
		pr_warn_ratelimited("connection from %pISpc: %s (%d), disconnecting\n",
				    &conn->peer, what, err);
	}
	engram_serve_rdma_close(conn);
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
	engram_serve_rdma_close(conn);
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
static int engram_serve_rdma_post(struct engram_conn *conn, struct ib_send_wr *first,
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
		engram_serve_rdma_close(conn);
		return -EOVERFLOW;
	}
	conn->sq_free -= nr;
	conn->sig[conn->sig_tail] = nr;
	conn->sig_tail = (conn->sig_tail + 1) % conn->sig_size;
	engram_cost_inc(ENGRAM_STAT_HOST_POSTS);
	engram_cost_add(ENGRAM_STAT_HOST_WRS, nr);
	ret = engram_post_send(conn->qp, first, &bad);
	if (ret && bad == first) {
		/* Nothing went out: nothing will complete for it. */
		conn->sig_tail = (conn->sig_tail + conn->sig_size - 1) % conn->sig_size;
		conn->sq_free += nr;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (ret)
		engram_serve_rdma_broken(conn, "posting a send failed", ret);
	return ret;
}

/*
 * Sleep until @ready(@conn, @arg) or closing.  Everything waited for is
 * the peer completing earlier sends: one that stops for
 * rdma_stall_timeout_ms is dead.
 */
static int engram_serve_rdma_wait(struct engram_conn *conn,
				  bool (*ready)(struct engram_conn *conn, u32 arg), u32 arg,
			    const char *what)
{
	long left;

	left = wait_event_timeout(conn->sq_wait,
				  ready(conn, arg) || engram_serve_rdma_closing(conn),
				  engram_serve_rdma_stall());
	if (engram_serve_rdma_closing(conn))
		return -ESHUTDOWN;
	if (!left) {
		engram_serve_rdma_broken(conn, what, -ETIMEDOUT);
		return -ETIMEDOUT;
	}
	return 0;
}

static bool engram_serve_rdma_credits_ready(struct engram_conn *conn, u32 n)
{
	return READ_ONCE(conn->sq_free) >= n;
}

static int engram_serve_rdma_credits(struct engram_conn *conn, u32 n)
{
	/* Nothing completes while a softirq answer runs: what is free is all. */
	if (conn->irq_answer)
		return READ_ONCE(conn->sq_free) >= n ? 0 : -EAGAIN;
	return engram_serve_rdma_wait(conn, engram_serve_rdma_credits_ready, n,
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
	engram_cost_post_recv(true);
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
		engram_serve_rdma_broken(conn, "posting a receive failed", ret);
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

/* Queue @rx (if any) for the work item, and the work item; under conn->lock. */
static void engram_serve_rdma_queue(struct engram_conn *conn, struct engram_rx *rx)
{
	lockdep_assert_held(&conn->lock);
	if (rx)
		list_add_tail(&rx->node, &conn->rx_pending);
	if (queue_work(engram_serve_rdma_wq, &conn->work))
		engram_cost_inc(ENGRAM_STAT_HOST_WORK_ITEMS);
}

static int engram_serve_rdma_handle_frame(struct engram_conn *conn, struct engram_rx *rx);

static void engram_serve_rdma_recv_done_cq(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_rx *rx = container_of(wc->wr_cqe, struct engram_rx, cqe);
	struct engram_conn *conn = rx->conn;
	unsigned long flags;
	bool irq, is_hb;
	int ret;

	engram_cost_inc(ENGRAM_STAT_HOST_CQES);
	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		engram_serve_rdma_wc_failed(conn, wc, "receive");
		return;
	}
	rx->t_ns = ktime_get_ns();
	rx->len = wc->byte_len;
	WRITE_ONCE(conn->last_rx, jiffies);
	rx->synced = min(rx->len, conn->rx_size);
	engram_serve_rdma_rx_sync(conn, rx, true);
	/*
	 * Peek at the type only to count requests for BUSY and to choose
	 * where to answer; the handler checks all.
	 */
	rx->is_req = rx->len > 1 && ((u8 *)rx->buf)[1] == ENGRAM_WIRE_REQUEST;
	is_hb = rx->len > 1 && ((u8 *)rx->buf)[1] == ENGRAM_WIRE_HEARTBEAT;
	rx->busy = false;

	spin_lock_irqsave(&conn->lock, flags);
	if (conn->closing) {
		spin_unlock_irqrestore(&conn->lock, flags);
		return;
	}
	if (rx->is_req)
		rx->busy = ++conn->inflight > conn->neg.max_inflight;
	/*
	 * A request or a heartbeat is answered here when nothing is queued
	 * before it and the work item is not serving: in order, and with no
	 * hop to another CPU.  Completions of one CQ never run concurrently,
	 * so the send queue's credits only shrink meanwhile.
	 */
	irq = (rx->is_req || is_hb) && !conn->worker_busy && list_empty(&conn->rx_pending) &&
	      conn->cat_sent && !conn->cat_push && conn->wr_mtu && conn->sq_free >= 2 &&
	      READ_ONCE(engram_srv_softirq_rows.val);
	if (irq)
		conn->irq_busy = true;
	else
		engram_serve_rdma_queue(conn, rx);
	spin_unlock_irqrestore(&conn->lock, flags);
	if (!irq)
		return;

	conn->irq_answer = true;
	ret = engram_serve_rdma_handle_frame(conn, rx);
	conn->irq_answer = false;
	spin_lock_irqsave(&conn->lock, flags);
	conn->irq_busy = false;
	if (!conn->closing) {
		/* Left to the work item (first in line), or what came meanwhile. */
		if (ret)
			list_add(&rx->node, &conn->rx_pending);
		if (ret || conn->cat_push)
			engram_serve_rdma_queue(conn, NULL);
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
	struct engram_table *t = NULL;
	unsigned long flags;

	engram_cost_inc(ENGRAM_STAT_HOST_CQES);
	engram_serve_rdma_sig_complete(conn);
	spin_lock_irqsave(&conn->lock, flags);
	c->in_flight = false;
	/* The idle timeout counts from the end of the last answer. */
	if (c->t)
		WRITE_ONCE(conn->last_rx, jiffies);
	/*
	 * The response's WRITEs completed before its SEND did: its table
	 * hold goes here, with no work item for it.  A failed or flushed one
	 * keeps it, and its slot, for the release, which drops holds only
	 * once the QP is drained: the failure breaks the connection.
	 */
	if (c->t && wc->status == IB_WC_SUCCESS && !conn->closing) {
		t = c->t;
		c->t = NULL;
	}
	if (!c->t)
		list_add_tail(&c->node, &conn->ctrl_free);
	spin_unlock_irqrestore(&conn->lock, flags);
	if (t)
		engram_table_serve_put(t);
	wake_up_all(&conn->sq_wait);
	if (unlikely(wc->status != IB_WC_SUCCESS))
		engram_serve_rdma_wc_failed(conn, wc, "response send");
}

static void engram_serve_rdma_cat_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, cat_cqe);

	engram_cost_inc(ENGRAM_STAT_HOST_CQES);
	engram_serve_rdma_sig_complete(conn);
	WRITE_ONCE(conn->cat_busy, false);
	wake_up_all(&conn->sq_wait);
	if (unlikely(wc->status != IB_WC_SUCCESS))
		engram_serve_rdma_wc_failed(conn, wc, "catalog send");
}

static void engram_serve_rdma_chain_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, chain_cqe);

	engram_cost_inc(ENGRAM_STAT_HOST_CQES);
	engram_serve_rdma_sig_complete(conn);
	if (unlikely(wc->status != IB_WC_SUCCESS))
		engram_serve_rdma_wc_failed(conn, wc, "RDMA WRITE");
}

static void engram_serve_rdma_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, reg_cqe);

	engram_cost_inc(ENGRAM_STAT_HOST_CQES);
	engram_serve_rdma_sig_complete(conn);
	if (unlikely(wc->status != IB_WC_SUCCESS))
		engram_serve_rdma_wc_failed(conn, wc, "registering receive buffers");
}

static void engram_serve_rdma_reg_err_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, reg_err_cqe);

	engram_cost_inc(ENGRAM_STAT_HOST_CQES);
	if (wc->status != IB_WC_SUCCESS)
		engram_serve_rdma_wc_failed(conn, wc, "registering a receive buffer");
}

/* Unsignaled WRITEs complete only when they fail (or are flushed). */
static void engram_serve_rdma_write_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct engram_conn *conn = container_of(wc->wr_cqe, struct engram_conn, write_cqe);

	engram_cost_inc(ENGRAM_STAT_HOST_CQES);
	if (wc->status != IB_WC_SUCCESS)
		engram_serve_rdma_wc_failed(conn, wc, "RDMA WRITE");
}

/**
 * engram_serve_rdma_qp_event() - the QP's event handler
 * @ev: the event
 * @ctx: the connection
 *
 * May come in interrupt context.
 */
void engram_serve_rdma_qp_event(struct ib_event *ev, void *ctx)
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
		engram_serve_rdma_broken(conn, ib_event_msg(ev->event), -EIO);
		break;
	}
}

static bool engram_serve_rdma_ctrl_available(struct engram_conn *conn, u32 unused)
{
	unsigned long flags;
	bool ret;

	spin_lock_irqsave(&conn->lock, flags);
	ret = !list_empty(&conn->ctrl_free);
	spin_unlock_irqrestore(&conn->lock, flags);
	return ret;
}

/*
 * A free control slot, or NULL when the connection is closing or stalled
 * (or, in softirq, when none is free now).
 */
static struct engram_ctrl *engram_serve_rdma_ctrl_get(struct engram_conn *conn)
{
	struct engram_ctrl *c;
	unsigned long flags;

	for (;;) {
		spin_lock_irqsave(&conn->lock, flags);
		c = list_first_entry_or_null(&conn->ctrl_free, struct engram_ctrl, node);
		if (c)
			list_del_init(&c->node);
		spin_unlock_irqrestore(&conn->lock, flags);
		if (c || conn->irq_answer)
			return c;
		if (engram_serve_rdma_wait(conn, engram_serve_rdma_ctrl_available, 0,
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

/* The last WRITE of a chain is the one that completes, for all of them. */
static int engram_serve_rdma_wb_conn_flush(void *ctx, struct ib_rdma_wr *wrs, u32 nr)
{
	struct engram_conn *conn = ctx;
	struct ib_rdma_wr *last = &wrs[nr - 1];

	last->wr.send_flags = IB_SEND_SIGNALED;
	last->wr.wr_cqe = &conn->chain_cqe;
	engram_count_add(&engram_global_stats, ENGRAM_STAT_RDMA_WRITES, nr);
	return engram_serve_rdma_post(conn, &wrs[0].wr, nr);
}

/*
 * Post a control slot of @len bytes, after reposting the frame it answers
 * (so the peer's next SEND finds a buffer).  With @inv_rkey, a RESPONSE
 * to a request goes as a SEND with invalidate of that key (protocol
 * version 2): the client's registration dies as the RESPONSE arrives, and
 * the client has no LOCAL_INV to wait for.  The last @tail WRITEs of the
 * answer's rows, left in conn->wrs by engram_serve_rdma_write_rows(), go
 * in the same post, before the SEND: one post and one completion for
 * both.  On failure the slot is left for the release, which drops any
 * hold it carries.
 */
static int engram_serve_rdma_ctrl_send(struct engram_conn *conn, struct engram_ctrl *c,
				       u32 len, struct engram_rx **rxp, const u32 *inv_rkey,
				       u32 tail)
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
	struct ib_send_wr *first = &wr;
	unsigned long flags;
	int ret;

	if (inv_rkey && conn->neg.version_max >= ENGRAM_WIRE_VERSION_REMOTE_INV) {
		wr.opcode = IB_WR_SEND_WITH_INV;
		wr.ex.invalidate_rkey = *inv_rkey;
	}
	engram_serve_rdma_rx_done(conn, rxp);
	/*
	 * The worker alone posts, and the chain's credits were there when it
	 * was built; without one more for the SEND now, the chain goes alone
	 * (a chain may take every credit).
	 */
	if (tail && READ_ONCE(conn->sq_free) <= tail) {
		ret = engram_serve_rdma_wb_conn_flush(conn, conn->wrs, tail);
		if (ret)
			return ret;
		tail = 0;
	}
	if (tail) {
		engram_count_add(&engram_global_stats, ENGRAM_STAT_RDMA_WRITES, tail);
		conn->wrs[tail - 1].wr.next = &wr;
		first = &conn->wrs[0].wr;
	}
	ret = engram_serve_rdma_credits(conn, tail + 1);
	if (ret) {
		/* A softirq answer saw the credits before it began: a bug. */
		if (WARN_ON_ONCE(ret == -EAGAIN))
			engram_serve_rdma_broken(conn, "send queue full in softirq", ret);
		return ret;
	}
	ib_dma_sync_single_for_device(conn->ibdev, c->dma, len, DMA_TO_DEVICE);
	spin_lock_irqsave(&conn->lock, flags);
	c->posted = jiffies;
	c->in_flight = true;
	spin_unlock_irqrestore(&conn->lock, flags);
	ret = engram_serve_rdma_post(conn, first, tail + 1);
	if (ret)
		return ret;
	if (c->t) {
		spin_lock_irqsave(&conn->lock, flags);
		if (!conn->closing)
			queue_delayed_work(engram_serve_rdma_wq, &conn->watchdog,
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
static void engram_serve_rdma_watchdog(struct work_struct *work)
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
		queue_delayed_work(engram_serve_rdma_wq, &conn->watchdog, oldest + stall - jiffies);
	spin_unlock_irqrestore(&conn->lock, flags);
	if (any && !time_before(jiffies, oldest + stall))
		engram_serve_rdma_broken(conn, "response not acknowledged", -ETIMEDOUT);
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
static bool engram_serve_rdma_serving(struct engram_conn *conn)
{
	u32 i;

	if (conn->inflight)
		return true;
	for (i = 0; conn->ctrl && i < conn->nr_ctrl; i++)
		if (conn->ctrl[i].in_flight && conn->ctrl[i].t)
			return true;
	return false;
}

static void engram_serve_rdma_idle(struct work_struct *work)
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
		if (ms && !time_before(jiffies, due) && !engram_serve_rdma_serving(conn))
			idle = true;
		else
			queue_delayed_work(engram_serve_rdma_wq, &conn->idle_work,
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
	engram_serve_rdma_close(conn);
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

	ret = engram_serve_rdma_wait(conn, engram_serve_rdma_cat_idle, 0,
				     "catalog send stalled");
	if (ret)
		return ret;
	len = engram_serve_rdma_cat_build(conn, ticket);
	if (WARN_ON_ONCE(len < 0)) {
		engram_serve_rdma_close(conn);
		return len;
	}
	engram_serve_rdma_rx_done(conn, rxp);
	ret = engram_serve_rdma_credits(conn, 1);
	if (ret)
		return ret;
	sge.length = len;
	ib_dma_sync_single_for_device(conn->ibdev, conn->cat_dma, len, DMA_TO_DEVICE);
	WRITE_ONCE(conn->cat_busy, true);
	ret = engram_serve_rdma_post(conn, &wr, 1);
	if (ret)
		WRITE_ONCE(conn->cat_busy, false);
	return ret;
}

/* The key a RESPONSE to @req invalidates: its first range's, unless the client keeps it. */
static const u32 *engram_serve_rdma_inv_key(const struct engram_wire_req *req)
{
	return req->flags & ENGRAM_WIRE_REQ_KEPT_KEYS ? NULL : &req->ranges[0].rkey;
}

/* Answer a frame with a RESPONSE that carries no rows (@inv_rkey: as ctrl_send). */
static void engram_serve_rdma_refuse(struct engram_conn *conn, struct engram_ctrl *c,
				     struct engram_rx **rxp, u64 ticket, int status,
				     u32 bad_index, const u32 *inv_rkey)
{
	struct engram_wire_resp resp = {
		.ticket = ticket,
		.status = status,
		.bad_index = status == ENGRAM_WIRE_ROW_OUT_OF_RANGE ||
			     status == ENGRAM_WIRE_ROW_NOT_HELD ? bad_index : 0,
	};
	int len;

	len = engram_wire_resp_encode(c->buf, ENGRAM_SRV_CTRL_BYTES, &conn->neg,
				      false, &resp);
	if (WARN_ON_ONCE(len < 0)) {
		engram_serve_rdma_ctrl_put(conn, c);
		engram_serve_rdma_close(conn);
		return;
	}
	engram_serve_rdma_ctrl_send(conn, c, len, rxp, inv_rkey, 0);
}

/* Start a chain: wait for enough credits that chains do not trickle. */
static int engram_serve_rdma_wb_conn_reserve(void *ctx, u32 *cap)
{
	struct engram_conn *conn = ctx;
	u32 want = min_t(u32, ENGRAM_SRV_CHAIN_MAX, conn->sq_depth / 2);
	u32 free;
	int ret;

	if (conn->irq_answer) {
		/*
		 * Whatever is free, one credit kept for the SEND.  Short of
		 * that, the work item finishes the response (rewriting the
		 * rows posted so far: the same bytes to the same place).
		 */
		free = READ_ONCE(conn->sq_free);
		if (free < 2 ||
		    (++conn->irq_chains > 1 && engram_fault_server_softirq_short()))
			return -EAGAIN;
		*cap = min_t(u32, free - 1, ENGRAM_SRV_CHAIN_MAX);
		return 0;
	}
	ret = engram_serve_rdma_credits(conn, max_t(u32, want, 1));
	if (ret)
		return ret;
	*cap = min_t(u32, READ_ONCE(conn->sq_free), ENGRAM_SRV_CHAIN_MAX);
	return 0;
}

static const struct engram_wb_ops engram_wb_conn_ops = {
	.flush = engram_serve_rdma_wb_conn_flush,
	.reserve = engram_serve_rdma_wb_conn_reserve,
};

/* The QP's path MTU once connected; U32_MAX (never cut) if unknown. */
static noinline u32 engram_serve_rdma_path_mtu(struct engram_conn *conn)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr;
	int mtu;

	if (ib_query_qp(conn->qp, &attr, IB_QP_PATH_MTU, &init))
		return U32_MAX;
	mtu = ib_mtu_enum_to_int(attr.path_mtu);
	return mtu > 0 ? mtu : U32_MAX;
}

/*
 * Post the WRITEs of every row of @req, straight from the table's pages,
 * but the last chain: its WRs are left at the start of conn->wrs, @tail
 * of them, for the RESPONSE's post (engram_serve_rdma_ctrl_send()).
 */
static int engram_serve_rdma_write_rows(struct engram_conn *conn, struct engram_table *t,
					const dma_addr_t *dma, const struct engram_wire_req *req,
					u32 *tail)
{
	struct engram_wb_cfg cfg;
	struct engram_wb b;
	struct engram_wire_place pl;
	struct engram_row_src src;
	u32 i, j;
	u64 remote;
	int ret;

	if (!conn->wr_mtu)
		conn->wr_mtu = engram_serve_rdma_path_mtu(conn);
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
			engram_serve_rdma_broken(conn, "bad row layout from the table", -EIO);
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
		if ((i & 1023) == 1023 && !conn->irq_answer)
			cond_resched();
	}
	*tail = engram_wbuild_take(&b);
	return 0;
}

/*
 * May a softirq answer @req?  Up to rdma_softirq_rows rows, and when the
 * send queue has room for its WRITEs as they are likely built: a row each
 * when rows land apart, far fewer when they land back to back.  A guess
 * too low costs a response finished by the work item, not a wrong one.
 */
static bool engram_serve_rdma_irq_fits(struct engram_conn *conn,
				       const struct engram_wire_req *req)
{
	bool packed = req->stride == ENGRAM_ROW_BYTES && !req->slots_le;
	u32 wrs = packed ? req->nr_rows / 8 + req->nr_ranges : req->nr_rows;

	return req->nr_rows <= READ_ONCE(engram_srv_softirq_rows.val) &&
	       wrs + 2 <= READ_ONCE(conn->sq_free);
}

/*
 * Answer a REQUEST.  In softirq (conn->irq_answer) nothing may wait: with no
 * control slot free, fault knobs that sleep, more rows than
 * rdma_softirq_rows or a send queue too full, it returns -EAGAIN for the
 * work item to answer the frame.  Once rows may have been posted that
 * happens only with the slot and its hold kept in @rx->resume: the
 * WRITEs posted must keep the table's pages.
 */
static int engram_serve_rdma_handle_request(struct engram_conn *conn, struct engram_rx **rxp)
{
	struct engram_wire_req *req = &conn->req;
	struct engram_rx *rx = *rxp;
	u64 t_recv = rx->t_ns;		/* the buffer is reposted before the end */
	u64 cpu0 = engram_serve_cpu_now();
	u64 t0 = local_clock();
	struct engram_wire_resp resp = {};
	struct engram_table *t = NULL;
	const dma_addr_t *dma;
	struct engram_ctrl *c;
	char why[128];
	bool parsed;
	u32 bad = 0, tail = 0;
	int st, len, ret;

	if (rx->resume) {
		/* Admitted in softirq: the request is still conn->req. */
		c = rx->resume;
		rx->resume = NULL;
		t = c->t;
		dma = engram_table_dma(t, conn->ibdev);
		if (WARN_ON_ONCE(!dma)) {	/* maps outlive every hold */
			engram_serve_rdma_broken(conn, "table pages unmapped", -EIO);
			return 0;
		}
		goto write;
	}
	c = engram_serve_rdma_ctrl_get(conn);
	if (!c)
		return conn->irq_answer ? -EAGAIN : 0;
	st = engram_wire_req_parse(rx->buf, rx->len, &conn->neg, req, why, sizeof(why));
	parsed = !st;
	if (st) {
		pr_info_ratelimited("connection from %pISpc: request refused, %s: %s\n",
				    &conn->peer, engram_wire_status_name(st), why);
		goto refuse;
	}
	if (rx->busy) {
		st = ENGRAM_WIRE_BUSY;
		goto refuse;
	}
	if (conn->irq_answer &&
	    (!engram_serve_rdma_irq_fits(conn, req) || engram_fault_response_armed())) {
		engram_serve_rdma_ctrl_put(conn, c);
		return -EAGAIN;
	}
	st = engram_serve_admit(req, &conn->neg, &t, &bad);
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
		return 0;
	}
write:
	conn->irq_chains = 0;
	ret = engram_serve_rdma_write_rows(conn, t, dma, req, &tail);
	if (ret == -EAGAIN && conn->irq_answer) {
		rx->resume = c;
		return -EAGAIN;
	}
	if (ret)
		return 0;	/* closing: the release drops the hold */

	resp.ticket = req->ticket;
	resp.status = ENGRAM_WIRE_OK;
	resp.bytes = (u64)req->nr_rows * ENGRAM_ROW_BYTES;
	len = engram_wire_resp_encode(c->buf, ENGRAM_SRV_CTRL_BYTES, &conn->neg,
				      false, &resp);
	if (WARN_ON_ONCE(len < 0)) {
		engram_serve_rdma_close(conn);
		return 0;
	}
	/* Counted before the send: once it is posted the hold may go any time. */
	engram_serve_answered(t, req->nr_rows, t_recv);
	/*
	 * RC ordering: the client sees this after every WRITE above.  A
	 * client that keeps its keys (version 5) would lose one if we
	 * invalidated it.
	 */
	engram_serve_rdma_ctrl_send(conn, c, len, rxp, engram_serve_rdma_inv_key(req), tail);
	/* A softirq never sleeps: all of its time is CPU time. */
	if (conn->irq_answer)
		engram_serve_rows_spent(false, req->nr_rows, local_clock() - t0);
	else
		engram_serve_cpu_spent(false, req->nr_rows, cpu0);
	return 0;

refuse:
	engram_serve_refused(c->t, st);
	c->t = NULL;
	/* Only a request that parsed has a key we know to be the client's. */
	engram_serve_rdma_refuse(conn, c, rxp, req->ticket, st, bad,
				 parsed ? engram_serve_rdma_inv_key(req) : NULL);
	return 0;
}

/*
 * Serve one frame, then repost its buffer.  Returns -EAGAIN only in
 * softirq, for a frame left to the work item with its buffer unposted.
 */
static int engram_serve_rdma_handle_frame(struct engram_conn *conn, struct engram_rx *rx)
{
	struct engram_wire_hdr_info h;
	struct engram_ctrl *c;
	bool is_req = rx->is_req;
	unsigned long flags;
	char why[128];
	u64 ticket;
	int st, len;

	if (is_req) {
		u64 t0 = local_clock();
		int ret = engram_serve_rdma_handle_request(conn, &rx);

		engram_cost_add(ENGRAM_STAT_HOST_REQUEST_NS, local_clock() - t0);
		if (ret)
			return ret;
		engram_cost_inc(ENGRAM_STAT_HOST_REQUESTS);
		goto out;
	}
	st = engram_wire_hdr_check(rx->buf, rx->len, &conn->neg, true, false, &h,
				   why, sizeof(why));
	if (!st && h.type == ENGRAM_WIRE_CATALOG_REQUEST) {
		st = engram_wire_simple_parse(rx->buf, rx->len, &conn->neg, true,
					      ENGRAM_WIRE_CATALOG_REQUEST, &ticket,
					      why, sizeof(why));
		if (!st) {
			/* It may wait for the last catalog's send. */
			if (conn->irq_answer)
				return -EAGAIN;
			engram_serve_rdma_cat_send(conn, ticket, &rx);
			goto out;
		}
	}
	c = engram_serve_rdma_ctrl_get(conn);
	if (!c) {
		if (conn->irq_answer)
			return -EAGAIN;
		goto out;
	}
	if (!st && h.type == ENGRAM_WIRE_HEARTBEAT) {
		len = engram_wire_simple_encode(c->buf, ENGRAM_SRV_CTRL_BYTES, &conn->neg,
						ENGRAM_WIRE_HEARTBEAT, h.ticket);
		if (!WARN_ON_ONCE(len < 0))
			engram_serve_rdma_ctrl_send(conn, c, len, &rx, NULL, 0);
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
	engram_serve_refused(NULL, st);
	engram_serve_rdma_refuse(conn, c, &rx, h.ticket, st, 0, NULL);
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
	return 0;
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
		ret = engram_serve_rdma_credits(conn, n);
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
		ret = engram_serve_rdma_post(conn, &conn->rx[i].reg.wr, n);
		if (ret)
			return ret;
		i += n;
	}
	/* Every credit back: every registration completed. */
	ret = engram_serve_rdma_wait(conn, engram_serve_rdma_credits_ready, conn->sq_depth,
				     "registering receive buffers stalled");
	for (i = 0; !ret && i < conn->nr_rx; i++)
		ret = engram_serve_rdma_rx_post(conn, &conn->rx[i]);
	return ret;
}

static void engram_serve_rdma_serve(struct engram_conn *conn)
{
	struct engram_rx *rx;
	unsigned long flags;
	bool push;

	for (;;) {
		spin_lock_irqsave(&conn->lock, flags);
		/*
		 * A softirq answering a frame queues this again when done; meanwhile
		 * it owns the send queue and conn->req.
		 */
		if (conn->closing || !conn->established || conn->irq_busy) {
			conn->worker_busy = false;
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
		conn->worker_busy = push || rx;
		spin_unlock_irqrestore(&conn->lock, flags);

		if (push) {
			if (!conn->rx_ready) {
				/* Asked once: the device may sleep to answer. */
				conn->wr_mtu = engram_serve_rdma_path_mtu(conn);
				if (engram_serve_rdma_rx_register(conn))
					return;
				conn->rx_ready = true;
			}
			if (engram_serve_rdma_cat_send(conn, 0, NULL))
				return;
			conn->cat_sent = true;
			while (engram_fault_server_catalog_repeat())
				if (engram_serve_rdma_cat_send(conn, 0, NULL))
					return;
		} else if (rx) {
			engram_serve_rdma_handle_frame(conn, rx);
		} else {
			return;
		}
		cond_resched();
	}
}

static void engram_serve_rdma_work(struct work_struct *work)
{
	engram_cover_start();
	engram_serve_rdma_serve(container_of(work, struct engram_conn, work));
	engram_cover_stop();
}

/**
 * engram_serve_rdma_prepare() - point a new connection's work items and
 *	completions at the code that serves it
 * @conn: the connection, being allocated
 */
void engram_serve_rdma_prepare(struct engram_conn *conn)
{
	INIT_WORK(&conn->work, engram_serve_rdma_work);
	INIT_DELAYED_WORK(&conn->watchdog, engram_serve_rdma_watchdog);
	INIT_DELAYED_WORK(&conn->idle_work, engram_serve_rdma_idle);
	conn->cat_cqe.done = engram_serve_rdma_cat_done;
	conn->reg_cqe.done = engram_serve_rdma_reg_done;
	conn->reg_err_cqe.done = engram_serve_rdma_reg_err_done;
	conn->write_cqe.done = engram_serve_rdma_write_done;
	conn->chain_cqe.done = engram_serve_rdma_chain_done;
}

/**
 * engram_serve_rdma_rx_prepare() - the same for one receive buffer
 * @conn: its connection
 * @rx: the buffer
 */
void engram_serve_rdma_rx_prepare(struct engram_conn *conn, struct engram_rx *rx)
{
	rx->conn = conn;
	rx->cqe.done = engram_serve_rdma_recv_done;
}

/**
 * engram_serve_rdma_ctrl_prepare() - the same for one control slot
 * @conn: its connection
 * @c: the slot
 */
void engram_serve_rdma_ctrl_prepare(struct engram_conn *conn, struct engram_ctrl *c)
{
	c->conn = conn;
	c->cqe.done = engram_serve_rdma_ctrl_done;
}

/**
 * engram_serve_rdma_init() - the connections' workqueue
 *
 * Return: 0 or -ENOMEM.
 */
int engram_serve_rdma_init(void)
{
	engram_serve_rdma_wq = alloc_workqueue("engram_srv", WQ_UNBOUND, 0);
	return engram_serve_rdma_wq ? 0 : -ENOMEM;
}

/**
 * engram_serve_rdma_exit() - once every connection is gone
 */
void engram_serve_rdma_exit(void)
{
	destroy_workqueue(engram_serve_rdma_wq);
	engram_serve_rdma_wq = NULL;
}
