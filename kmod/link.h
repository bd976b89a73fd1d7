/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Client links, private to link.c (the generic part) and its transports,
 * link_rdma.c and link_tcp.c.  The generic part owns the list, ids,
 * state, catalog, fetch tickets and slots, deadlines, heartbeat and
 * reconnect; a transport connects, carries frames and tears its
 * connection down.  Each transport embeds struct engram_link in its own
 * and allocates it, so its fields stay its own.
 */
#ifndef _ENGRAM_LINK_H
#define _ENGRAM_LINK_H

#include <linux/bitmap.h>
#include <linux/rwsem.h>
#include <linux/workqueue.h>

#include "client.h"
#include "cost.h"

/* Connect steps (address, route, connect, TCP hello) each get this long. */
#define ENGRAM_LINK_CM_TIMEOUT_MS	3000
#define ENGRAM_LINK_MAX_SLOTS		(ENGRAM_LINK_MAX_QUEUES * ENGRAM_WIRE_OFFER_INFLIGHT)
/* Bounce buffers a link keeps for reuse (engram_link_bounce_get()). */
#define ENGRAM_LINK_BOUNCE_CACHE	8

struct engram_link;

/**
 * struct engram_link_ops - what a transport does for the generic link
 * @alloc: allocate a zeroed link inside the transport's own structure,
 *	its parts (work items, queues) set up; NULL when out of memory
 * @free: free what @alloc returned, once the last reference is gone
 * @connect: set up a connection, negotiate into l->neg, set l->nr_queues
 *	(the queues it opened, each with l->neg's max_inflight slots), and
 *	call engram_link_went_live() once frames can be read; l->mutex held.
 *	On failure the generic part calls @teardown.
 * @stop: unblock whatever may wait on the connection (a TCP sender
 *	blocked on a full socket, the receiver); l->mutex held, conn_sem not;
 *	may be NULL
 * @teardown: quiesce the connection so that nothing of it can touch a
 *	fetch's buffer any more, end every fetch with engram_link_end_all(),
 *	and free it; l->mutex and conn_sem (write) held, l->live false.
 *	Also called after a failed @connect, on whatever it had set up.
 * @submit: put @f on the wire; conn_sem held for reading, the link live,
 *	f->slot, f->ticket and f->conn_gen set; the slot's queue is
 *	f->slot / l->q_slots.  On success the fetch is
 *	tracked (engram_link_track()) and ends through the link; on failure
 *	nothing of it is on the wire.
 * @heartbeat: send a HEARTBEAT with @ticket without sleeping for long;
 *	conn_sem held for reading, the link live.  -EBUSY: not now, try at
 *	the next tick; any other error breaks the connection.
 * @put_fetch: give back what a fetch leaving the wire held of the
 *	connection (RDMA: its MRs); l->lock held, any context; may be NULL
 * @device: the name of the device the connection runs on, or NULL;
 *	l->mutex or l->lock held, the link live; may be NULL
 * @on_device: does the connection use @ibdev?  l->mutex held; NULL for a
 *	transport that uses no RDMA device
 * @reap: reap the completions of @f's poll queue (@now), or see that a
 *	worker does until that queue is idle (!@now), for a waiter that
 *	stops polling; @f submitted on a poll queue (f->poll_q); process
 *	context, no lock held; may be NULL when the transport has none
 * @answer_last: the RESPONSE comes after the rows (RDMA), so an answered
 *	fetch no longer waits on the server; over TCP the rows follow it
 */
struct engram_link_ops {
	struct engram_link *(*alloc)(void);
	void (*free)(struct engram_link *l);
	int (*connect)(struct engram_link *l);
	void (*stop)(struct engram_link *l);
	void (*teardown)(struct engram_link *l, int error);
	int (*submit)(struct engram_link *l, struct engram_fetch *f);
	int (*heartbeat)(struct engram_link *l, u64 ticket);
	void (*put_fetch)(struct engram_link *l, struct engram_fetch *f);
	const char *(*device)(struct engram_link *l);
	bool (*on_device)(struct engram_link *l, struct ib_device *ibdev);
	void (*reap)(struct engram_link *l, struct engram_fetch *f, bool now);
	bool answer_last;
};

struct engram_link {
	struct kref ref;
	struct list_head node;		/* on link_admin.c's list, until deleted */
	u32 id;
	struct engram_url url;
	const struct engram_link_ops *ops;
	bool deleted;			/* stopped: no reconnect (under mutex) */
	bool removing;			/* being deleted (under link_admin.c's mutex) */

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
	/*
	 * Request slots: one per ticket in flight (under lock), q_slots
	 * (the negotiated max_inflight) for each of nr_queues queues, queue
	 * q's from q * q_slots on.
	 */
	DECLARE_BITMAP(slots_busy, ENGRAM_LINK_MAX_SLOTS);
	unsigned int nr_slots;		/* q_slots * nr_queues; 0 while down */
	unsigned int q_slots;
	unsigned int nr_queues;		/* set by the transport's connect */
	/*
	 * The last nr_poll_queues of them are poll queues (set by the
	 * transport's connect): no interrupt, their completions reaped by
	 * the busy-polling callers whose fetches they carry (ops->reap).
	 */
	unsigned int nr_poll_queues;
	u64 queue_fetches[ENGRAM_LINK_MAX_QUEUES];	/* fetches done, per queue */
	u32 conn_gen;
	bool live;			/* negotiated: frames can be read, fetches posted */
	u32 mr_pages;			/* pages per registration; 0: no limit, or down */

	/*
	 * Bounce buffers of gathered parts that were sent here, kept for
	 * the next ones (under lock): mapped for the device already, and
	 * freed (an RCU grace period) only when the link is stopped.
	 */
	struct engram_ubuf *bounce[ENGRAM_LINK_BOUNCE_CACHE];
	unsigned int nr_bounce;
	bool bounce_closed;		/* stopped: what comes back is freed */

	struct engram_wire_table *catalog;
	u32 nr_catalog;
	struct engram_wire_table *catalog_spare;	/* cat_work decodes into it */
	/*
	 * The newest CATALOG received and not read yet (under cat_lock), and
	 * the buffer cat_work reads from; they swap at each read.
	 */
	spinlock_t cat_lock;
	u8 *cat_new;
	u8 *cat_read;
	u32 cat_len;			/* of cat_new; 0: nothing waiting */
	u32 cat_gen;			/* the connection it came on */
	unsigned long cat_next;		/* jiffies: the earliest next read */
	struct delayed_work cat_work;
	/*
	 * The fetch on the wire in each request slot (under lock): a RESPONSE
	 * is matched among its queue's slots by ticket, so tracking a fetch
	 * allocates nothing.
	 */
	struct engram_fetch *slot_fetch[ENGRAM_LINK_MAX_SLOTS];
	unsigned int inflight;		/* fetches in it; written under lock */
	u64 next_ticket;

	struct delayed_work connect_work;
	struct delayed_work hb_work;
	struct work_struct down_work;
	/* Breaks the connection when a fetch passes its deadline unanswered. */
	struct delayed_work deadline_work;
	ktime_t deadline_next;		/* when deadline_work runs; under lock */
	bool deadline_armed;
};

/*
 * l->lock taken for a fetch, from its submit to the completion that ends
 * it: counted (ENGRAM_STAT_CLIENT_LINK_LOCKS), so that make bench shows
 * how often a fetch takes the lock every fetch of the link shares.
 */
#define engram_link_lock_fetch(l, flags)				\
	do {								\
		engram_cost_inc(ENGRAM_STAT_CLIENT_LINK_LOCKS);		\
		spin_lock_irqsave(&(l)->lock, flags);			\
	} while (0)

/* link.c, for link_admin.c */
struct engram_link *engram_link_alloc(const struct engram_url *u,
				      const struct engram_link_ops *ops);
void engram_link_start(struct engram_link *l);
void engram_link_stop(struct engram_link *l);
void engram_link_drop_device(struct engram_link *l, struct ib_device *ibdev);
int engram_link_init(void);
void engram_link_shutdown(void);
void engram_link_exit(void);

/* link_admin.c, for the transports */
void engram_link_admin_transport_set(enum engram_transport t,
				     const struct engram_link_ops *ops);

/* link.c, for the transports */
void engram_link_local_params(struct engram_wire_params *p);
void engram_link_fetch_req(const struct engram_fetch *f, struct engram_wire_req *req);
bool engram_link_exiting(void);
void engram_link_went_live(struct engram_link *l);
void engram_link_fail(struct engram_link *l, int error);
void engram_link_heard(struct engram_link *l);
void engram_link_heard_locked(struct engram_link *l);
int engram_link_frame_catalog(struct engram_link *l, const void *buf, u32 len);
int engram_link_hb_echo(struct engram_link *l, const void *buf, u32 len);
int engram_link_hb_parse(struct engram_link *l, const void *buf, u32 len, u64 *ticket);
bool engram_link_hb_answered(struct engram_link *l, u64 ticket);
struct engram_fetch *engram_link_claim_locked(struct engram_link *l,
					      const struct engram_wire_resp *resp,
					      unsigned int queue, bool *bad_pos);
void engram_link_claim_report(struct engram_link *l, const struct engram_wire_resp *resp,
			      bool found, u32 nr_rows, bool bad_pos);
struct engram_fetch *engram_link_claim(struct engram_link *l,
				       const struct engram_wire_resp *resp, unsigned int queue);
void engram_link_complete(struct engram_link *l, struct engram_fetch *f);
bool engram_link_complete_locked(struct engram_link *l, struct engram_fetch *f);
void engram_link_publish(struct engram_fetch *f);
int engram_link_track(struct engram_link *l, struct engram_fetch *f);
void engram_link_wire_broken_locked(struct engram_link *l, struct engram_fetch *f,
				    int error);
void engram_link_finish_all(struct engram_link *l, int error, struct list_head *done);
void engram_link_publish_all(struct list_head *done);
void engram_link_end_all(struct engram_link *l, int error);

/* link_rdma.c */
void engram_link_rdma_init(void);
void engram_link_rdma_exit(void);

/* link_tcp.c */
int engram_link_tcp_init(void);
void engram_link_tcp_exit(void);

#endif /* _ENGRAM_LINK_H */
