/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private to the host role (serve_listen.c and the transports): how
 * listeners hand connection requests to the RDMA connection code, and how
 * it is told to let go of a listener or a device.
 */
#ifndef _ENGRAM_SERVE_LISTEN_H
#define _ENGRAM_SERVE_LISTEN_H

#include <linux/atomic.h>
#include <linux/list.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <rdma/rdma_cm.h>

#include "engram.h"

/*
 * A connection's cm_id is born from its listener's, with the listener's
 * handler and context; both kinds of context start with this tag so one
 * handler can tell them apart.
 */
enum engram_cm_kind {
	ENGRAM_CM_LISTENER = 1,
	ENGRAM_CM_CONN,
};

struct engram_cm_ctx {
	enum engram_cm_kind kind;
};

/**
 * struct engram_listener - one listen URL
 * @ctx: ENGRAM_CM_LISTENER, the cm_id's context
 * @node: on the listener list (serve_listen.c's mutex)
 * @url: what to listen on
 * @lock: protects @cm_id, @ibdev, @state, @error, @device, @starting and
 *	@gone; a spinlock because the cm_id's event handler takes it
 * @cm_id: the listening id while ACTIVE (or being set up), else NULL;
 *	whoever clears it owns its destruction
 * @ibdev: the device @cm_id is bound to, for device removal
 * @state: enum engram_listen_state
 * @error: last failure while WAITING (negative errno)
 * @device: name of @ibdev, for `engramctl` and the log
 * @starting: engram_serve_listen_start() is using @cm_id: its handler must not
 *	have the CM destroy it, and records @gone instead
 * @gone: @cm_id's device went away while @starting
 * @nconns: live connections accepted on this listener
 */
struct engram_listener {
	struct engram_cm_ctx ctx;
	struct list_head node;
	struct engram_url url;
	spinlock_t lock;		/* see above */
	struct rdma_cm_id *cm_id;
	struct ib_device *ibdev;
	u8 state;
	int error;
	char device[64];
	bool starting;
	bool gone;
	atomic_t nconns;
};

/* serve_rdma_conn.c */
int engram_serve_rdma_conn_init(void);
void engram_serve_rdma_conn_exit(void);
int engram_serve_rdma_conn_request(struct engram_listener *l, struct rdma_cm_id *cm_id,
				   const struct rdma_cm_event *ev);
int engram_serve_rdma_conn_cm_event(struct rdma_cm_id *cm_id, struct rdma_cm_event *ev);
void engram_serve_rdma_conn_close_sync(const struct engram_listener *l,
				       const struct ib_device *ibdev);

/* serve_listen.c */
int engram_serve_listen_cm_handler(struct rdma_cm_id *cm_id, struct rdma_cm_event *ev);

#endif /* _ENGRAM_SERVE_LISTEN_H */
