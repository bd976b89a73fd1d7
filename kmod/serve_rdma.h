/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private to the RDMA transport of the host role: serve_rdma_conn.c sets
 * a connection up and tears it down, serve_rdma.c serves it meanwhile.
 */
#ifndef _ENGRAM_SERVE_RDMA_H
#define _ENGRAM_SERVE_RDMA_H

#include <linux/completion.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "serve_listen.h"
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
/* rdma_softirq_rows: requests of up to this many rows are answered in softirq. */
#define ENGRAM_SRV_SOFTIRQ_ROWS	4096
#define ENGRAM_SRV_SOFTIRQ_ROWS_MAX	65536
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
	struct engram_ctrl *resume;	/* begun in softirq: its slot and hold */
};

/* One small send: a RESPONSE or a HEARTBEAT echo. */
struct engram_ctrl {
	struct ib_cqe cqe;
	struct engram_conn *conn;
	struct list_head node;		/* on ctrl_free, or not while in use */
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
 * @lock: protects the fields down to @irq_busy
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
 * @cm_owns_id: a DEVICE_REMOVAL handler lets the CM destroy @cm_id
 * @id_decided: the release work has decided who destroys @cm_id
 * @worker_busy: the work item is serving a frame or a catalog push
 * @irq_busy: a receive completion is answering a frame in softirq; it
 *	and @worker_busy are never both set, so what is marked "server
 *	only" below has one user at a time
 * @cat_sent: the first CATALOG is posted (set by the work item only)
 * @irq_answer: the frame being served is served in softirq: nothing may
 *	wait (server only)
 * @irq_chains: chains of WRITEs reserved for that frame so far
 * @wr_mtu: the QP's path MTU in bytes; 0 until asked (by the work item,
 *	before the first CATALOG), U32_MAX if the device would not say
 * @rx_posted: work requests were posted, so the QP needs draining
 * @rx_ready: the receive MRs are registered and the receives posted
 *	(work item only)
 * @sq_wait: credits, slots, buffer or @closing changed
 * @work: handles frames and catalog pushes
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
 * @wrs: scratch for one chain of WRITEs (server only)
 * @sges: their SGEs, @max_sge per WR
 * @req: the request being handled (server only)
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
	bool cm_owns_id;
	bool id_decided;
	bool worker_busy;
	bool irq_busy;

	bool cat_sent;
	bool rx_posted;
	bool rx_ready;
	bool irq_answer;
	u32 irq_chains;
	u32 wr_mtu;
	wait_queue_head_t sq_wait;
	struct work_struct work;
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

/* serve_rdma.c */
extern struct workqueue_struct *engram_serve_rdma_wq;
int engram_serve_rdma_init(void);
void engram_serve_rdma_exit(void);
void engram_serve_rdma_prepare(struct engram_conn *conn);
void engram_serve_rdma_rx_prepare(struct engram_conn *conn, struct engram_rx *rx);
void engram_serve_rdma_ctrl_prepare(struct engram_conn *conn, struct engram_ctrl *c);
void engram_serve_rdma_free(struct kref *ref);
void engram_serve_rdma_close(struct engram_conn *conn);
bool engram_serve_rdma_closing(struct engram_conn *conn);
void engram_serve_rdma_qp_event(struct ib_event *ev, void *ctx);

#endif /* _ENGRAM_SERVE_RDMA_H */
