/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Client links, private to link.c (the generic part and the RDMA
 * transport) and tcp_link.c (the TCP transport).  The generic part owns
 * the list, ids, state, catalog, fetch tickets, heartbeat and reconnect;
 * a transport connects, carries frames and tears its connection down.
 */
#ifndef _ENGRAM_LINK_H
#define _ENGRAM_LINK_H

#include <linux/rwsem.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include "client.h"

/* Connect steps (address, route, connect, TCP hello) each get this long. */
#define ENGRAM_LINK_CM_TIMEOUT_MS	3000

struct engram_link;

/**
 * struct engram_link_ops - what a transport does for the generic link
 * @init: set up the transport's parts of a new link (its work items and
 *	queues), before anything else can use it; may be NULL
 * @connect: set up a connection, negotiate into l->neg, and call
 *	engram_link_went_live() once frames can be read; l->mutex held.  On
 *	failure the generic part calls @teardown.
 * @stop: unblock whatever may wait on the connection (a TCP sender
 *	blocked on a full socket, the receiver); l->mutex held, conn_sem not;
 *	may be NULL
 * @teardown: quiesce the connection so that nothing of it can touch a
 *	fetch's buffer any more, end every fetch with engram_link_end_all(),
 *	and free it; l->mutex and conn_sem (write) held, l->live false.
 *	Also called after a failed @connect, on whatever it had set up.
 * @submit: put @f on the wire; conn_sem held for reading, the link live,
 *	f->slot, f->ticket and f->conn_gen set.  On success the fetch is
 *	tracked (engram_link_track()) and ends through the link; on failure
 *	nothing of it is on the wire.
 * @heartbeat: send a HEARTBEAT with @ticket without sleeping for long;
 *	conn_sem held for reading, the link live.  -EBUSY: not now, try at
 *	the next tick; any other error breaks the connection.
 */
struct engram_link_ops {
	void (*init)(struct engram_link *l);
	int (*connect)(struct engram_link *l);
	void (*stop)(struct engram_link *l);
	void (*teardown)(struct engram_link *l, int error);
	int (*submit)(struct engram_link *l, struct engram_fetch *f);
	int (*heartbeat)(struct engram_link *l, u64 ticket);
};

struct engram_link_recv {
	struct ib_cqe cqe;
	struct list_head early;		/* on engram_link.early */
	u32 early_len;
	struct engram_link *link;
	void *buf;
	u64 dma;
};

/*
 * A request slot: one ticket in flight; RDMA also keeps its buffer here:
 * vmalloc'ed pages, each DMA-mapped, registered once into a local-only MR
 * (see engram_link_alloc_slots()).
 */
struct engram_link_slot {
	void *buf;
	dma_addr_t *dma;		/* per page */
	unsigned int nr_mapped;
	struct ib_mr *mr;
	bool busy;
};

struct engram_link {
	struct kref ref;
	struct list_head node;		/* on engram_links, until deleted */
	u32 id;
	struct engram_url url;
	const struct engram_link_ops *ops;
	bool deleted;			/* stopped: no reconnect (under mutex) */
	bool removing;			/* being deleted (under engram_links_mutex) */

	struct mutex mutex;		/* connect and teardown */
	struct rw_semaphore conn_sem;	/* submit (read) vs teardown (write) */
	spinlock_t lock;		/* state, catalog, tickets, slots, heartbeat */
	u8 state;
	int error;
	ktime_t since;
	u64 connects;
	unsigned int backoff_ms;	/* next reconnect delay before jitter; 0: the minimum */
	struct engram_counters stats;
	struct engram_hist lat;

	/* a connection break asked for from any context (down_work) */
	bool down_pending;
	u32 down_gen;
	int down_error;

	/* liveness (under lock) */
	ktime_t last_rx;		/* last frame, or part of one, received */
	ktime_t probe_since;		/* first unanswered heartbeat; 0: none */
	ktime_t hb_sent;
	u64 hb_ticket;			/* the heartbeat on the wire; 0: none */
	u32 hb_rtt_us;
	bool have_hb_rtt;

	/* the connection, set up and torn down under mutex */
	struct engram_wire_params neg;
	struct engram_link_slot *slots;
	unsigned int nr_slots;
	u32 conn_gen;
	bool live;			/* negotiated: frames can be read, fetches posted */
	u32 mr_pages;			/* RDMA: pages per registration; 0 otherwise */

	/* RDMA */
	struct ib_cqe reg_cqe;		/* failures of REG_MR WRs */
	struct ib_cqe slot_reg_cqe;	/* the request slots' registration */
	struct completion slot_reg_done;
	enum ib_wc_status slot_reg_status;
	struct ib_cqe hb_cqe;		/* the heartbeat SEND */
	bool hb_busy;			/* the heartbeat SEND has not completed */
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
	struct engram_link_recv *recvs;
	unsigned int nr_recvs;
	/*
	 * Frames that arrived before the connect worker read the server's
	 * hello, and after, while it reads them (early_draining; under lock).
	 */
	struct list_head early;
	bool early_draining;

	/* TCP */
	struct socket *sock;
	struct work_struct rx_work;	/* the receiver, on its own workqueue */
	struct mutex tx_mutex;		/* one frame at a time into the stream */
	struct list_head tx_queue;	/* requests for the sender, under lock */
	struct work_struct tx_work;	/* the sender: callers never wait on the socket */
	void *rx_buf;			/* ENGRAM_WIRE_MAX_CATALOG_BYTES */

	struct engram_wire_table *catalog;
	u32 nr_catalog;
	struct xarray fetches;		/* ticket -> fetch on the wire */
	u64 next_ticket;

	struct delayed_work connect_work;
	struct delayed_work hb_work;
	struct work_struct down_work;
	/* Breaks the connection when a fetch passes its deadline unanswered. */
	struct delayed_work deadline_work;
	ktime_t deadline_next;		/* when deadline_work runs; under lock */
	bool deadline_armed;
};

/* link.c, for the transports */
void engram_link_transport_set(enum engram_transport t, const struct engram_link_ops *ops);
void engram_link_local_params(struct engram_wire_params *p);
void engram_link_fetch_req(const struct engram_fetch *f, struct engram_wire_req *req);
void engram_link_went_live(struct engram_link *l);
void engram_link_fail(struct engram_link *l, int error);
void engram_link_heard(struct engram_link *l);
int engram_link_frame_catalog(struct engram_link *l, const void *buf, u32 len);
int engram_link_hb_echo(struct engram_link *l, const void *buf, u32 len);
struct engram_fetch *engram_link_claim(struct engram_link *l,
				       const struct engram_wire_resp *resp);
void engram_link_complete(struct engram_link *l, struct engram_fetch *f);
int engram_link_track(struct engram_link *l, struct engram_fetch *f);
void engram_link_end_all(struct engram_link *l, int error);

/* tcp_link.c */
int engram_tcp_links_init(void);
void engram_tcp_links_exit(void);

#endif /* _ENGRAM_LINK_H */
