// SPDX-License-Identifier: GPL-2.0
/*
 * Listeners: one rdma_cm id per listen URL, bound to exactly that address;
 * a tcp:// URL has a kernel socket instead (serve_tcp.c), with the same
 * states and retries.
 *
 * A host's RDMA addresses come and go (the NIC driver loads late, rxe is
 * added and removed by hand), so a listener that cannot bind or listen is
 * not an error: it waits, and is retried every second and whenever a new
 * RDMA device appears.  When its device goes away it returns to waiting.
 *
 * Locking: engram_listen_mutex protects the list and serializes every
 * start and stop.  rdma_destroy_id() waits for the id's event handler, and
 * the handler (CONNECT_REQUEST in particular, which runs with the
 * listening id's handler mutex held) never takes engram_listen_mutex, so
 * ids may be destroyed with the mutex held.  l->lock settles who destroys
 * an id when the handler (DEVICE_REMOVAL, ADDR_CHANGE) and a stop race:
 * whoever takes l->cm_id out owns it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/errno.h>
#include <linux/mutex.h>
#include <linux/netlink.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>
#include <net/net_namespace.h>
#include <rdma/rdma_cm.h>

#include "cover.h"
#include "engram.h"
#include "event.h"
#include "inject.h"
#include "serve.h"
#include "serve_listen.h"
#include "serve_tcp.h"

/* Pending connection requests per listener, as rdma_listen() takes it. */
#define ENGRAM_LISTEN_BACKLOG	128
#define ENGRAM_LISTEN_RETRY	HZ

static LIST_HEAD(engram_listeners);
static DEFINE_MUTEX(engram_listen_mutex);
static bool engram_listen_running;	/* under engram_listen_mutex */
static void engram_serve_listen_retry(struct work_struct *work);
static DECLARE_DELAYED_WORK(engram_listen_retry_work, engram_serve_listen_retry);

static struct engram_listener *engram_serve_listen_find(const struct engram_url *u)
{
	struct engram_listener *l;

	lockdep_assert_held(&engram_listen_mutex);
	list_for_each_entry(l, &engram_listeners, node)
		if (engram_url_equal(&l->url, u))
			return l;
	return NULL;
}

/* Take the id out of @l if it is still @id (or any id, for @id NULL). */
static struct rdma_cm_id *engram_serve_listen_take(struct engram_listener *l,
						   struct rdma_cm_id *id)
{
	struct rdma_cm_id *taken = NULL;

	spin_lock(&l->lock);
	if (l->cm_id && (!id || l->cm_id == id)) {
		taken = l->cm_id;
		l->cm_id = NULL;
		l->ibdev = NULL;
	}
	spin_unlock(&l->lock);
	return taken;
}

/* Record a failure; log only a change, so the retry does not flood the log. */
static void engram_serve_listen_wait(struct engram_listener *l, int error)
{
	bool changed;

	spin_lock(&l->lock);
	changed = l->state != ENGRAM_LISTEN_WAITING || l->error != error;
	l->state = ENGRAM_LISTEN_WAITING;
	l->error = error;
	l->device[0] = '\0';
	/* Events are raised where the state is published: they stay in order. */
	if (changed)
		engram_event_listen(ENGRAM_EVENT_LISTEN_STATE, l->url.text, ENGRAM_LISTEN_WAITING,
				    error);
	spin_unlock(&l->lock);
	if (changed)
		pr_info("listen %s: waiting (%d), retrying every second\n",
			l->url.text, error);
}

/*
 * An active listener open to every peer, or to none, says so: neither is
 * what an administrator who forgot the allow-list would guess.
 */
static void engram_serve_listen_note_allow(struct engram_listener *l)
{
	switch (engram_allow_mode()) {
	case ENGRAM_ALLOW_ANY:
		pr_notice("listen %s: no allow-list: any peer that reaches it may connect\n",
			  l->url.text);
		break;
	case ENGRAM_ALLOW_NONE:
		pr_notice("listen %s: the allow-list is empty: every peer is refused\n",
			  l->url.text);
		break;
	default:
		break;
	}
}

/*
 * Try to bind and listen.  On failure the listener is WAITING with the
 * reason; the caller schedules the retry.
 */
static int engram_serve_listen_start(struct engram_listener *l)
{
	struct rdma_cm_id *id;
	int ret;

	lockdep_assert_held(&engram_listen_mutex);
	if (l->url.transport == ENGRAM_TRANSPORT_TCP) {
		ret = engram_serve_tcp_listen_start(l);
		if (ret) {
			engram_serve_listen_wait(l, ret);
			return ret;
		}
		spin_lock(&l->lock);
		l->state = ENGRAM_LISTEN_ACTIVE;
		l->error = 0;
		l->device[0] = '\0';
		engram_event_listen(ENGRAM_EVENT_LISTEN_STATE, l->url.text,
				    ENGRAM_LISTEN_ACTIVE, 0);
		spin_unlock(&l->lock);
		pr_info("listen %s: active\n", l->url.text);
		engram_serve_listen_note_allow(l);
		return 0;
	}
	id = engram_create_id(&init_net, engram_serve_listen_cm_handler, &l->ctx, RDMA_PS_TCP,
			      IB_QPT_RC);
	if (IS_ERR(id)) {
		engram_serve_listen_wait(l, PTR_ERR(id));
		return PTR_ERR(id);
	}
	/*
	 * Published before binding: once bound, the id can receive
	 * DEVICE_REMOVAL (its device may be dying already).  While we still
	 * use the id, the handler only notes that; afterwards it claims it.
	 */
	spin_lock(&l->lock);
	l->cm_id = id;
	l->starting = true;
	l->gone = false;
	spin_unlock(&l->lock);

	/* Exactly the configured address: a wildcard would serve every port. */
	ret = engram_bind_addr(id, (struct sockaddr *)&l->url.addr);
	if (!ret)
		ret = engram_cm_listen(id, ENGRAM_LISTEN_BACKLOG);

	spin_lock(&l->lock);
	l->starting = false;
	if (!ret && l->gone)
		ret = -ENODEV;
	if (!ret) {
		l->ibdev = id->device;
		l->state = ENGRAM_LISTEN_ACTIVE;
		l->error = 0;
		strscpy(l->device, dev_name(&id->device->dev), sizeof(l->device));
		engram_event_listen(ENGRAM_EVENT_LISTEN_STATE, l->url.text,
				    ENGRAM_LISTEN_ACTIVE, 0);
	}
	spin_unlock(&l->lock);
	if (ret) {
		/* Nobody else can have claimed it: it is ours to destroy. */
		if (engram_serve_listen_take(l, id))
			rdma_destroy_id(id);
		engram_serve_listen_wait(l, ret);
		return ret;
	}
	pr_info("listen %s: active on %s\n", l->url.text, l->device);
	engram_serve_listen_note_allow(l);
	return 0;
}

/*
 * Destroy the listening id, if any.  The listener is WAITING afterwards
 * with @why; the caller logs, as only it knows what happened.
 */
static void engram_serve_listen_stop(struct engram_listener *l, int why)
{
	struct rdma_cm_id *id;

	lockdep_assert_held(&engram_listen_mutex);
	if (l->url.transport == ENGRAM_TRANSPORT_TCP)
		engram_serve_tcp_listen_stop(l);
	id = engram_serve_listen_take(l, NULL);
	if (id)
		rdma_destroy_id(id);
	spin_lock(&l->lock);
	l->state = ENGRAM_LISTEN_WAITING;
	l->error = why;
	l->device[0] = '\0';
	/* Without a reason it is being deleted, which has its own event. */
	if (why)
		engram_event_listen(ENGRAM_EVENT_LISTEN_STATE, l->url.text, ENGRAM_LISTEN_WAITING,
				    why);
	spin_unlock(&l->lock);
}

static void engram_serve_listen_kick(unsigned long delay)
{
	lockdep_assert_held(&engram_listen_mutex);
	if (engram_listen_running)
		mod_delayed_work(system_wq, &engram_listen_retry_work, delay);
}

static void engram_serve_listen_retry(struct work_struct *work)
{
	struct engram_listener *l;
	bool waiting = false;

	mutex_lock(&engram_listen_mutex);
	if (!engram_listen_running)
		goto out;
	list_for_each_entry(l, &engram_listeners, node) {
		if (READ_ONCE(l->state) == ENGRAM_LISTEN_ACTIVE)
			continue;
		if (engram_serve_listen_start(l))
			waiting = true;
	}
	if (waiting)
		engram_serve_listen_kick(ENGRAM_LISTEN_RETRY);
out:
	mutex_unlock(&engram_listen_mutex);
}

/*
 * The listening id's own events.  DEVICE_REMOVAL and ADDR_CHANGE leave the
 * id useless; it cannot be destroyed from here, so a nonzero return asks
 * the CM to destroy it, and the retry starts a new one.
 */
static int engram_serve_listen_event(struct engram_listener *l, struct rdma_cm_id *id,
				     struct rdma_cm_event *ev)
{
	char url[ENGRAM_URL_TEXT_MAX];

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return engram_serve_rdma_conn_request(l, id, ev);
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
	case RDMA_CM_EVENT_ADDR_CHANGE:
		spin_lock(&l->lock);
		if (l->cm_id != id) {
			/* Someone stopping the listener owns the id: leave it to them. */
			spin_unlock(&l->lock);
			return 0;
		}
		if (l->starting) {
			/* engram_serve_listen_start() still uses it, and destroys it. */
			l->gone = true;
			spin_unlock(&l->lock);
			return 0;
		}
		l->cm_id = NULL;
		l->ibdev = NULL;
		l->state = ENGRAM_LISTEN_WAITING;
		l->error = -ENODEV;
		l->device[0] = '\0';
		engram_event_listen(ENGRAM_EVENT_LISTEN_STATE, l->url.text, ENGRAM_LISTEN_WAITING,
				    -ENODEV);
		/*
		 * With cm_id cleared, a delete no longer waits for this handler
		 * and may free @l as soon as the lock is dropped.
		 */
		strscpy(url, l->url.text, sizeof(url));
		spin_unlock(&l->lock);
		pr_info("listen %s: %s, waiting\n", url, rdma_event_msg(ev->event));
		/*
		 * Not engram_serve_listen_kick(): it needs the mutex, which may be held
		 * by someone destroying this very id and waiting for us.
		 */
		mod_delayed_work(system_wq, &engram_listen_retry_work, ENGRAM_LISTEN_RETRY);
		return 1;
	default:
		return 0;
	}
}

/**
 * engram_serve_listen_cm_handler() - rdma_cm event handler of listeners and connections
 * @cm_id: the id; its context says whether it listens or is a connection
 * @ev: the event
 *
 * Runs in the CM's process context with the id's handler mutex held.
 *
 * Return: nonzero to have the CM destroy @cm_id.
 */
int engram_serve_listen_cm_handler(struct rdma_cm_id *cm_id, struct rdma_cm_event *ev)
{
	struct engram_cm_ctx *ctx = cm_id->context;
	/* Only the CM's own work: a removal may run in any task. */
	bool cover = ev->event != RDMA_CM_EVENT_DEVICE_REMOVAL;
	int ret;

	if (cover)
		engram_cover_start();
	if (ctx->kind == ENGRAM_CM_CONN)
		ret = engram_serve_rdma_conn_cm_event(cm_id, ev);
	else
		ret = engram_serve_listen_event(container_of(ctx, struct engram_listener, ctx),
						cm_id, ev);
	if (cover)
		engram_cover_stop();
	return ret;
}

static int engram_serve_listen_add_locked(const struct engram_url *u,
					  struct netlink_ext_ack *extack)
{
	struct engram_listener *l;
	unsigned int n = 0;

	lockdep_assert_held(&engram_listen_mutex);
	if (engram_serve_listen_find(u)) {
		NL_SET_ERR_MSG_MOD(extack, "already listening on that address");
		return -EEXIST;
	}
	/* Each one is a socket or cm_id and a retry: bounded like the links. */
	list_for_each_entry(l, &engram_listeners, node)
		n++;
	if (n >= ENGRAM_URL_MAX) {
		NL_SET_ERR_MSG_MOD(extack, "too many listeners (16)");
		return -ENOSPC;
	}
	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return -ENOMEM;
	l->ctx.kind = ENGRAM_CM_LISTENER;
	l->url = *u;
	spin_lock_init(&l->lock);
	atomic_set(&l->nconns, 0);
	l->state = ENGRAM_LISTEN_UNSPEC;
	list_add_tail(&l->node, &engram_listeners);
	engram_event_listen(ENGRAM_EVENT_LISTEN_ADDED, l->url.text, ENGRAM_LISTEN_UNSPEC, 0);
	/* Not being able to listen yet is not a failure: it is retried. */
	if (engram_serve_listen_start(l))
		engram_serve_listen_kick(ENGRAM_LISTEN_RETRY);
	return 0;
}

/**
 * engram_serve_listen_add() - start listening on one more URL
 * @u: a parsed listen URL
 * @extack: where to say why the request is refused
 *
 * A listener that cannot bind or listen yet (address not configured, no
 * RDMA device on it) is added in state WAITING and retried.  Process
 * context; may sleep.
 *
 * Return: 0; -EEXIST for a URL already listened on, -ENOSPC past
 * ENGRAM_URL_MAX listeners, -ESHUTDOWN while the server stops, or -ENOMEM.
 */
int engram_serve_listen_add(const struct engram_url *u, struct netlink_ext_ack *extack)
{
	int ret;

	mutex_lock(&engram_listen_mutex);
	if (engram_listen_running) {
		ret = engram_serve_listen_add_locked(u, extack);
	} else {
		NL_SET_ERR_MSG_MOD(extack, "the server is not running");
		ret = -ESHUTDOWN;
	}
	mutex_unlock(&engram_listen_mutex);
	return ret;
}

/**
 * engram_serve_listen_del() - stop listening on a URL
 * @u: a parsed listen URL, compared with engram_url_equal()
 * @extack: where to say why the request is refused
 *
 * Connections accepted on that listener are disconnected, and the call
 * returns once they are gone.  Process context; may sleep.
 *
 * Return: 0 or -ENOENT.
 */
int engram_serve_listen_del(const struct engram_url *u, struct netlink_ext_ack *extack)
{
	struct engram_listener *l;

	mutex_lock(&engram_listen_mutex);
	l = engram_serve_listen_find(u);
	if (l) {
		list_del(&l->node);
		engram_serve_listen_stop(l, 0);
	}
	mutex_unlock(&engram_listen_mutex);
	if (!l) {
		NL_SET_ERR_MSG_MOD(extack, "not listening on that address");
		return -ENOENT;
	}
	/* Its id is destroyed: no new connection can name it. */
	engram_serve_rdma_conn_close_sync(l, NULL);
	engram_serve_tcp_conns_close_sync(l);
	pr_info("listen %s: removed\n", l->url.text);
	engram_event_listen(ENGRAM_EVENT_LISTEN_DELETED, l->url.text, ENGRAM_LISTEN_UNSPEC, 0);
	kfree(l);
	return 0;
}

/**
 * engram_serve_listen_info_nth() - snapshot the n-th listener, for dumps
 * @n: position, from 0, in the order the listeners were added
 * @info: filled on success
 *
 * Return: 0, or -ENOENT past the last listener.
 */
int engram_serve_listen_info_nth(unsigned long n, struct engram_listen_info *info)
{
	struct engram_listener *l;
	int ret = -ENOENT;

	mutex_lock(&engram_listen_mutex);
	list_for_each_entry(l, &engram_listeners, node) {
		if (n--)
			continue;
		memset(info, 0, sizeof(*info));
		strscpy(info->url, l->url.text, sizeof(info->url));
		spin_lock(&l->lock);
		strscpy(info->device, l->device, sizeof(info->device));
		info->state = l->state;
		info->error = l->error;
		spin_unlock(&l->lock);
		info->connections = atomic_read(&l->nconns);
		info->allow_mode = engram_allow_mode();
		ret = 0;
		break;
	}
	mutex_unlock(&engram_listen_mutex);
	return ret;
}

/**
 * engram_serve_listen_add_device() - a new RDMA device appeared
 * @ibdev: the device (unused: any device may carry a waiting address)
 *
 * Called from the ib_client's .add; retries waiting listeners at once, from
 * a work item, since binding here would run inside device registration.
 */
void engram_serve_listen_add_device(struct ib_device *ibdev)
{
	mutex_lock(&engram_listen_mutex);
	engram_serve_listen_kick(0);
	mutex_unlock(&engram_listen_mutex);
}

/**
 * engram_serve_listen_remove_device() - let go of an RDMA device
 * @ibdev: the device being removed
 *
 * Called from the ib_client's .remove.  Destroys the listening ids bound
 * to @ibdev (their listeners wait for it, or another device, to come
 * back), then disconnects every connection on it and waits until they are
 * gone.  Process context; sleeps.
 */
void engram_serve_listen_remove_device(struct ib_device *ibdev)
{
	struct engram_listener *l;
	bool mine;

	mutex_lock(&engram_listen_mutex);
	list_for_each_entry(l, &engram_listeners, node) {
		spin_lock(&l->lock);
		mine = l->cm_id && l->ibdev == ibdev;
		spin_unlock(&l->lock);
		if (!mine)
			continue;
		engram_serve_listen_stop(l, -ENODEV);
		pr_info("listen %s: device %s removed, waiting\n", l->url.text,
			dev_name(&ibdev->dev));
	}
	/* Not at once: the dying device is still listed by rdma_cm for a moment. */
	engram_serve_listen_kick(ENGRAM_LISTEN_RETRY);
	mutex_unlock(&engram_listen_mutex);

	engram_serve_rdma_conn_close_sync(NULL, ibdev);
}

/**
 * engram_serve_listen_init() - start the host role
 *
 * Context: process context.  Starts one listener per listen= URL.
 * Listeners (rdma:// and tcp://) that cannot listen yet wait and are
 * retried.
 *
 * Return: 0 or a negative errno.
 */
int engram_serve_listen_init(void)
{
	unsigned int i;
	int ret;

	ret = engram_serve_rdma_conn_init();
	if (ret)
		return ret;
	ret = engram_serve_tcp_init();
	if (ret) {
		engram_serve_rdma_conn_exit();
		return ret;
	}
	mutex_lock(&engram_listen_mutex);
	engram_listen_running = true;
	for (i = 0; i < engram_config.n_listen; i++) {
		const struct engram_url *u = &engram_config.listen[i];

		ret = engram_serve_listen_add_locked(u, NULL);
		if (ret) {
			pr_err("listen %s: cannot add (%d)\n", u->text, ret);
			break;
		}
	}
	mutex_unlock(&engram_listen_mutex);
	if (ret)
		engram_serve_listen_exit();
	return ret;
}

/**
 * engram_serve_listen_exit() - stop the host role
 *
 * New requests are answered SHUTTING_DOWN from here on; the listeners are
 * destroyed, every connection is disconnected, and the call returns when
 * all of them are gone.  Process context; sleeps.
 */
void engram_serve_listen_exit(void)
{
	struct engram_listener *l, *tmp;
	LIST_HEAD(gone);

	engram_serve_stop();
	mutex_lock(&engram_listen_mutex);
	engram_listen_running = false;
	mutex_unlock(&engram_listen_mutex);
	/* The retry takes the mutex; it cannot be waited for under it. */
	cancel_delayed_work_sync(&engram_listen_retry_work);

	mutex_lock(&engram_listen_mutex);
	list_for_each_entry_safe(l, tmp, &engram_listeners, node) {
		engram_serve_listen_stop(l, -ESHUTDOWN);
		list_move_tail(&l->node, &gone);
	}
	mutex_unlock(&engram_listen_mutex);
	/* A DEVICE_REMOVAL handler may have queued the retry meanwhile. */
	cancel_delayed_work_sync(&engram_listen_retry_work);

	engram_serve_tcp_exit();
	engram_serve_rdma_conn_exit();
	list_for_each_entry_safe(l, tmp, &gone, node) {
		list_del(&l->node);
		kfree(l);
	}
}
