// SPDX-License-Identifier: GPL-2.0
/*
 * The host role over kernel TCP sockets: the same protocol, statuses,
 * limits and counters as the RDMA server (serve_rdma.c), for diagnosis and as
 * a fallback transport.  Documentation/protocol.rst, "The TCP transport".
 *
 * Listening: one kernel socket per tcp:// URL, bound to exactly its
 * address.  Its sk_data_ready callback (softirq) queues the listener's
 * accept work, which accepts without blocking until the queue is empty,
 * checks the allow-list and the connection limits, and starts one
 * connection work item per socket.
 *
 * Serving: a connection's work item runs the whole connection in process
 * context with blocking socket calls: it reads the hello, then one frame
 * at a time (header, checked, then body), answers it, and reads the next.
 * Blocking calls keep each stream a straight sequence (no partial-frame
 * state machine), the socket timeouts (set before each call from the
 * frame's deadline) give the hello, stall and idle timeouts, and a response can
 * sleep holding its table (the socket is the only thing it waits for).
 * The items run on an unbound workqueue, as nbd's receive work does: an
 * unbound pool starts another worker whenever one blocks, the queue's
 * max_active bounds how many connections exist at once, and
 * destroy_workqueue() waits for the items, so no thread is left running
 * module code after unload (a kthread exiting on its own could not
 * promise that).
 *
 * Sending: only under the connection's send_mutex, one whole frame at a
 * time, so a CATALOG pushed on change (from the connection's cat_work)
 * falls between two responses, never inside one.  Rows go from the
 * table's pinned pages straight into the socket through a bio_vec
 * iterator (the socket copies them into its buffers; nothing else does),
 * while the table is held, so an unload waits for the send.
 *
 * Teardown has one path, the end of the connection's work item: mark the
 * connection dead, shut the socket down (which also ends a blocked send
 * of cat_work), unlist, wait for cat_work, release the socket, free.
 * Anyone else (listen del, rmmod, a failed cat_work) closes a connection
 * by marking it dead and shutting its socket down: the work item's
 * blocking call returns and the work item ends.
 *
 * Locking: engram_tcp_mutex protects the connection list, conn->ready,
 * and the socket of a listed connection against release; conn->send_mutex
 * serializes sends.  Order: engram_listen_mutex (serve_listen.c), send_mutex,
 * engram_tcp_mutex, then the socket's own lock.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/build_bug.h>
#include <linux/bvec.h>
#include <linux/errno.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/net.h>
#include <linux/slab.h>
#include <linux/socket.h>
#include <linux/spinlock.h>
#include <linux/tcp.h>
#include <linux/timekeeping.h>
#include <linux/uio.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <net/tcp_states.h>

#include "cover.h"
#include "engram.h"
#include "inject.h"
#include "serve.h"
#include "serve_listen.h"
#include "serve_tcp.h"
#include "wire.h"

/* Pending connections per listening socket. */
#define ENGRAM_TCP_BACKLOG	128
/*
 * Connections at once, over all listeners: the connection workqueue's
 * max_active, so every connection has a worker and none waits for one.
 */
#define ENGRAM_TCP_CONNS_TOTAL	WQ_UNBOUND_MAX_ACTIVE
/* Row pieces handed to the socket per call: 2 KiB of fixed state. */
#define ENGRAM_TCP_BVECS	128
/* TCP keepalive on accepted sockets: a vanished idle peer goes in ~2 min. */
#define ENGRAM_TCP_KEEPIDLE	60
#define ENGRAM_TCP_KEEPINTVL	10
#define ENGRAM_TCP_KEEPCNT	6

#define ENGRAM_TCP_TIMEOUT_MIN	100
#define ENGRAM_TCP_TIMEOUT_MAX	600000
/*
 * Silence between frames.  A client sends a heartbeat at least every
 * heartbeat_ms (at most 60 s, default 1 s), so the default outlasts any
 * heartbeat interval a client can be given; the minimum stays well above
 * the default interval.
 */
#define ENGRAM_TCP_IDLE_MIN	1000
#define ENGRAM_TCP_IDLE_MAX	3600000

static struct engram_uint_param engram_tcp_hello_ms = {
	.val = 5000, .min = ENGRAM_TCP_TIMEOUT_MIN, .max = ENGRAM_TCP_TIMEOUT_MAX,
	.unit = "milliseconds",
};

static struct engram_uint_param engram_tcp_frame_ms = {
	.val = 10000, .min = ENGRAM_TCP_TIMEOUT_MIN, .max = ENGRAM_TCP_TIMEOUT_MAX,
	.unit = "milliseconds",
};

static struct engram_uint_param engram_tcp_idle_ms = {
	.val = 90000, .min = ENGRAM_TCP_IDLE_MIN, .max = ENGRAM_TCP_IDLE_MAX,
	.unit = "milliseconds",
};

/*
 * Connections per listener.  Checked as modprobe parses it, so a constant:
 * the total (WQ_UNBOUND_MAX_ACTIVE) is computed at run time on some
 * kernels.  Not WQ_MAX_ACTIVE itself, which grew from 512 to 2048 in 7.x:
 * the bound users read in modinfo stays the same on every kernel.
 */
#define ENGRAM_TCP_MAX_CONNS		512
static_assert(ENGRAM_TCP_MAX_CONNS <= WQ_MAX_ACTIVE);

static struct engram_uint_param engram_tcp_max_conns = {
	.val = 64, .min = 1, .max = ENGRAM_TCP_MAX_CONNS,
};

module_param_cb(tcp_hello_timeout_ms, &engram_uint_param_ops, &engram_tcp_hello_ms, 0644);
MODULE_PARM_DESC(tcp_hello_timeout_ms,
		 "TCP server: accept to a complete HELLO frame, in ms (100-600000, default 5000)");
module_param_cb(tcp_frame_timeout_ms, &engram_uint_param_ops, &engram_tcp_frame_ms, 0644);
MODULE_PARM_DESC(tcp_frame_timeout_ms,
		 "TCP server: a frame, once begun, must be received (or sent) within this many ms (100-600000, default 10000)");
module_param_cb(tcp_idle_timeout_ms, &engram_uint_param_ops, &engram_tcp_idle_ms, 0644);
MODULE_PARM_DESC(tcp_idle_timeout_ms,
		 "TCP server: a connection that sends no frame (not even a heartbeat) for this many ms is closed (1000-3600000, default 90000)");
module_param_cb(tcp_max_conns, &engram_uint_param_ops, &engram_tcp_max_conns, 0644);
MODULE_PARM_DESC(tcp_max_conns,
		 "TCP server: connections per listener (1-512, default 64)");

/**
 * struct engram_tcp_listen - the socket of one tcp:// listener
 * @node: on engram_tcp_listeners
 * @l: the listener (serve_listen.c's), which outlives this
 * @sock: listening socket
 * @saved_data_ready: its callback before ours
 * @accept_work: accepts what is pending
 */
struct engram_tcp_listen {
	struct list_head node;
	struct engram_listener *l;
	struct socket *sock;
	void (*saved_data_ready)(struct sock *sk);
	struct work_struct accept_work;
};

/* Set once the connection is going away: nothing more is sent or counted. */
#define ENGRAM_TCP_DEAD		0

/**
 * struct engram_tcp_conn - one accepted connection
 * @node: on engram_tcp_conns
 * @l: the listener that accepted it; not used once unlisted
 * @sock: the socket; released only by the work item, after unlisting
 * @peer: client address, for the log
 * @accepted: jiffies at accept, for the hello timeout
 * @flags: ENGRAM_TCP_DEAD
 * @ready: the hello is answered: catalog pushes may go (engram_tcp_mutex)
 * @neg: negotiated parameters
 * @send_mutex: one frame at a time on the socket
 * @work: the connection: hello, then frames until the end
 * @cat_work: sends a CATALOG pushed on change
 * @rx: receive buffer of @neg.max_request_bytes, after the hello
 * @hello: the HELLO frames, ours and the peer's
 * @resp: a RESPONSE's fixed part, or a HEARTBEAT echo
 * @req: the request being served
 * @bv: row pieces for one socket call
 */
struct engram_tcp_conn {
	struct list_head node;
	struct engram_listener *l;
	struct socket *sock;
	struct sockaddr_storage peer;
	unsigned long accepted;
	unsigned long flags;
	bool ready;
	struct engram_wire_params neg;
	struct mutex send_mutex;	/* see above */
	struct work_struct work;
	struct work_struct cat_work;
	u8 *rx;
	u8 hello[ENGRAM_WIRE_HELLO_FRAME_BYTES];
	u8 resp[ENGRAM_WIRE_RESPONSE_BYTES];
	struct engram_wire_req req;
	struct bio_vec bv[ENGRAM_TCP_BVECS];
};

/**
 * struct engram_tcp_frame - a frame being received
 * @deadline: jiffies by which it must be whole; 0 until its first byte
 *	(the hello's is set from the accept)
 * @idle: jiffies by which its first byte must arrive, if @has_idle
 * @has_idle: @idle applies (jiffies can be 0, so no value means "none")
 * @started: a byte of it has arrived
 */
struct engram_tcp_frame {
	unsigned long deadline;
	unsigned long idle;
	bool has_idle;
	bool started;
};

static struct workqueue_struct *engram_tcp_wq;		/* connections */
static struct workqueue_struct *engram_tcp_ctl_wq;	/* accepts, catalog pushes */
static LIST_HEAD(engram_tcp_listeners);
static DEFINE_MUTEX(engram_tcp_lmutex);			/* engram_tcp_listeners */
static LIST_HEAD(engram_tcp_conns);
static DEFINE_MUTEX(engram_tcp_mutex);			/* see the top */
static atomic_t engram_tcp_nconns = ATOMIC_INIT(0);
/* Bumped whenever a connection leaves the list; waiters watch it. */
static atomic_t engram_tcp_gen = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(engram_tcp_waitq);

static void engram_serve_tcp_cat_all(struct work_struct *work);
static DECLARE_WORK(engram_tcp_cat_all_work, engram_serve_tcp_cat_all);
static void engram_serve_tcp_catalog_changed(void);
static struct engram_serve_transport engram_tcp_transport = {
	.node = LIST_HEAD_INIT(engram_tcp_transport.node),
	.catalog_changed = engram_serve_tcp_catalog_changed,
};

static unsigned long engram_serve_tcp_ms(const struct engram_uint_param *param)
{
	return msecs_to_jiffies(READ_ONCE(param->val));
}

static bool engram_serve_tcp_dead(struct engram_tcp_conn *conn)
{
	return test_bit(ENGRAM_TCP_DEAD, &conn->flags);
}

/*
 * Mark a connection dead; the first caller counts why (a stalled peer, or
 * a broken stream) unless @err is 0 (a clean close or one we asked for).
 * A timeout counts in peer_timeouts and in @stat, the kind of timeout.
 * Counting comes before the socket is shut down, so a peer that sees the
 * close also sees the counter.
 */
static void engram_serve_tcp_note_stat(struct engram_tcp_conn *conn, int err, const char *what,
				       unsigned int stat)
{
	if (!test_and_set_bit(ENGRAM_TCP_DEAD, &conn->flags) && err) {
		if (err == -ETIMEDOUT) {
			engram_count(&engram_global_stats, ENGRAM_STAT_PEER_TIMEOUTS);
			engram_count(&engram_global_stats, stat);
			pr_info_ratelimited("tcp connection from %pISpc: %s timed out, dropped\n",
					    &conn->peer, what);
		} else {
			engram_count(&engram_global_stats, ENGRAM_STAT_TRANSPORT_ERRORS);
			pr_info_ratelimited("tcp connection from %pISpc: %s failed (%d), dropped\n",
					    &conn->peer, what, err);
		}
	}
}

/* A timeout here is a frame's, received or sent. */
static void engram_serve_tcp_note(struct engram_tcp_conn *conn, int err, const char *what)
{
	engram_serve_tcp_note_stat(conn, err, what, ENGRAM_STAT_TCP_FRAME_TIMEOUTS);
}

/*
 * Break a connection (engram_serve_tcp_note()), and shut its socket down, which
 * ends whatever blocking call the work items are in.  The socket must
 * still be ours.
 */
static void engram_serve_tcp_kill(struct engram_tcp_conn *conn, int err, const char *what)
{
	engram_serve_tcp_note(conn, err, what);
	kernel_sock_shutdown(conn->sock, SHUT_RDWR);
}

/*
 * Read exactly @len bytes of the frame @f.  Without a deadline the wait
 * for the first byte lasts until @f's idle time (if any); the first byte
 * starts the frame's deadline.
 *
 * Return: 0; -ENOTCONN when the peer closed before the frame began;
 * -EPIPE when it closed inside it; -ETIMEDOUT (idle when !@f->started);
 * another socket error.
 */
static int engram_serve_tcp_recv(struct engram_tcp_conn *conn, struct engram_tcp_frame *f,
				 void *buf, size_t len)
{
	struct sock *sk = conn->sock->sk;
	size_t got = 0;
	long timeo;
	int ret;

	while (got < len) {
		struct kvec iov = { .iov_base = buf + got, .iov_len = len - got };
		struct msghdr msg = {};

		if (f->deadline) {
			timeo = (long)(f->deadline - jiffies);
			if (timeo <= 0)
				return -ETIMEDOUT;
		} else if (f->has_idle) {
			timeo = (long)(f->idle - jiffies);
			if (timeo <= 0)
				return -ETIMEDOUT;
		} else {
			timeo = MAX_SCHEDULE_TIMEOUT;
		}
		WRITE_ONCE(sk->sk_rcvtimeo, timeo);
		ret = kernel_recvmsg(conn->sock, &msg, &iov, 1, len - got, 0);
		if (ret > 0) {
			if (!f->deadline)
				f->deadline = jiffies + engram_serve_tcp_ms(&engram_tcp_frame_ms);
			f->started = true;
			got += ret;
			continue;
		}
		if (!ret)
			return f->started ? -EPIPE : -ENOTCONN;
		if (ret != -EAGAIN)
			return ret;
		/* A timeout; the deadline check above decides. */
	}
	return 0;
}

/* Send what @msg's iterator holds before @deadline; caller holds send_mutex. */
static int engram_serve_tcp_send_msg(struct engram_tcp_conn *conn, struct msghdr *msg,
				     unsigned long deadline)
{
	struct sock *sk = conn->sock->sk;
	long timeo;
	int ret;

	while (msg_data_left(msg)) {
		if (engram_serve_tcp_dead(conn))
			return -ESHUTDOWN;
		timeo = (long)(deadline - jiffies);
		if (timeo <= 0)
			return -ETIMEDOUT;
		WRITE_ONCE(sk->sk_sndtimeo, timeo);
		ret = sock_sendmsg(conn->sock, msg);
		if (ret == -EAGAIN)
			continue;
		if (ret < 0)
			return ret;
		if (!ret)
			return -EPIPE;
	}
	return 0;
}

static int engram_serve_tcp_send_buf(struct engram_tcp_conn *conn, const void *buf,
				     size_t len, unsigned long deadline, bool more)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL | (more ? MSG_MORE : 0) };

	iov_iter_kvec(&msg.msg_iter, ITER_SOURCE, &iov, 1, len);
	return engram_serve_tcp_send_msg(conn, &msg, deadline);
}

static unsigned long engram_serve_tcp_send_deadline(void)
{
	return jiffies + engram_serve_tcp_ms(&engram_tcp_frame_ms);
}

/* A RESPONSE without rows: a refusal.  Caller holds send_mutex. */
static int engram_serve_tcp_send_refusal(struct engram_tcp_conn *conn, u64 ticket,
					 int status, u32 bad_index)
{
	struct engram_wire_resp resp = {
		.ticket = ticket,
		.status = status,
		.bad_index = status == ENGRAM_WIRE_ROW_OUT_OF_RANGE ||
			     status == ENGRAM_WIRE_ROW_NOT_HELD ? bad_index : 0,
	};
	int len;

	len = engram_wire_resp_encode(conn->resp, sizeof(conn->resp), &conn->neg,
				      true, &resp);
	if (WARN_ON_ONCE(len < 0))
		return len;
	return engram_serve_tcp_send_buf(conn, conn->resp, len,
					 engram_serve_tcp_send_deadline(), false);
}

/* Caller holds send_mutex.  A CATALOG buffer lives only while it is sent. */
static int engram_serve_tcp_send_catalog(struct engram_tcp_conn *conn, u64 ticket)
{
	void *buf = kvmalloc(ENGRAM_WIRE_MAX_CATALOG_BYTES, GFP_KERNEL);
	int len, ret;

	if (!buf)
		return -ENOMEM;
	len = engram_serve_catalog_encode(buf, ENGRAM_WIRE_MAX_CATALOG_BYTES,
					  &conn->neg, ticket);
	if (WARN_ON_ONCE(len < 0))
		ret = len;
	else
		ret = engram_serve_tcp_send_buf(conn, buf, len,
						engram_serve_tcp_send_deadline(), false);
	kvfree(buf);
	return ret;
}

/* Add one piece of a row, merged with the last when the page bytes touch. */
static unsigned int engram_serve_tcp_bv_add(struct engram_tcp_conn *conn, unsigned int n,
					    struct page *page, u32 off, u32 len)
{
	struct bio_vec *last = n ? &conn->bv[n - 1] : NULL;

	if (last && last->bv_page == page && last->bv_offset + last->bv_len == off) {
		last->bv_len += len;
		return n;
	}
	conn->bv[n].bv_page = page;
	conn->bv[n].bv_offset = off;
	conn->bv[n].bv_len = len;
	return n + 1;
}

/*
 * The RESPONSE and its rows, straight from the held table's pages.
 * Caller holds send_mutex.  A failure leaves the frame cut short: the
 * caller must close the connection.
 */
static int engram_serve_tcp_send_rows(struct engram_tcp_conn *conn, struct engram_table *t,
				      const struct engram_wire_req *req)
{
	struct engram_wire_resp resp = {
		.ticket = req->ticket,
		.status = ENGRAM_WIRE_OK,
		.bytes = (u64)req->nr_rows * ENGRAM_ROW_BYTES,
	};
	unsigned long deadline = engram_serve_tcp_send_deadline();
	struct engram_row_src src;
	struct msghdr msg;
	unsigned int n = 0, j;
	size_t bytes = 0;
	int len, ret;
	u32 i;

	len = engram_wire_resp_encode(conn->resp, sizeof(conn->resp), &conn->neg,
				      true, &resp);
	if (WARN_ON_ONCE(len < 0))
		return len;
	ret = engram_serve_tcp_send_buf(conn, conn->resp, len, deadline, true);
	for (i = 0; !ret && i < req->nr_rows; i++) {
		engram_table_row_src(t, engram_wire_req_row(req, i), &src);
		if (WARN_ON_ONCE(!src.n || src.n > ARRAY_SIZE(src.seg)))
			return -EIO;
		/* Room for a whole row, so a batch always ends between rows. */
		if (n + ARRAY_SIZE(src.seg) > ENGRAM_TCP_BVECS) {
			memset(&msg, 0, sizeof(msg));
			msg.msg_flags = MSG_NOSIGNAL | MSG_MORE;
			iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, conn->bv, n, bytes);
			ret = engram_serve_tcp_send_msg(conn, &msg, deadline);
			n = 0;
			bytes = 0;
			cond_resched();
		}
		for (j = 0; j < src.n; j++) {
			n = engram_serve_tcp_bv_add(conn, n, engram_table_page(t, src.seg[j].page),
						    src.seg[j].off, src.seg[j].len);
			bytes += src.seg[j].len;
		}
	}
	if (!ret) {
		memset(&msg, 0, sizeof(msg));
		msg.msg_flags = MSG_NOSIGNAL;
		iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, conn->bv, n, bytes);
		ret = engram_serve_tcp_send_msg(conn, &msg, deadline);
	}
	return ret;
}

/*
 * Serve one REQUEST of @len bytes in conn->rx, checked in the order of
 * protocol.rst (serve.c's checks after our parse).  A refusal keeps the
 * connection.
 *
 * Return: 0, or a negative errno when the connection must close.
 */
static int engram_serve_tcp_request(struct engram_tcp_conn *conn, u32 len, u64 t_recv)
{
	struct engram_wire_req *req = &conn->req;
	struct engram_table *t = NULL;
	u64 cpu0 = engram_serve_cpu_now();
	char why[128];
	u32 bad = 0;
	int st, ret;

	st = engram_wire_req_parse(conn->rx, len, &conn->neg, req, why, sizeof(why));
	if (st) {
		pr_info_ratelimited("tcp connection from %pISpc: request refused, %s: %s\n",
				    &conn->peer, engram_wire_status_name(st), why);
		goto refuse;
	}
	st = engram_serve_admit(req, &conn->neg, &t, &bad);
	if (st)
		goto refuse;
	if (engram_fault_response(engram_serve_stopping)) {
		/* Dropped: the client's deadline is what ends this ticket. */
		engram_table_serve_put(t);
		return 0;
	}
	mutex_lock(&conn->send_mutex);
	ret = engram_serve_tcp_send_rows(conn, t, req);
	mutex_unlock(&conn->send_mutex);
	if (!ret) {
		engram_serve_answered(t, req->nr_rows, t_recv);
		engram_serve_cpu_spent(true, req->nr_rows, cpu0);
	}
	engram_table_serve_put(t);
	return ret;

refuse:
	engram_serve_refused(t, st);
	mutex_lock(&conn->send_mutex);
	ret = engram_serve_tcp_send_refusal(conn, req->ticket, st, bad);
	mutex_unlock(&conn->send_mutex);
	return ret;
}

/* This server's hello: what serve_rdma.c offers, minus the device limits. */
static void engram_serve_tcp_local_params(struct engram_wire_params *p)
{
	engram_wire_offer(p, ENGRAM_WIRE_OFFER_ROWS, ENGRAM_WIRE_OFFER_INFLIGHT,
			  engram_params_protocol_version());
	p->max_request_bytes = round_up(p->max_request_bytes, 4096);
}

static int engram_serve_tcp_reject(struct engram_tcp_conn *conn, int err, const char *why)
{
	engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_REJECTED);
	pr_info_ratelimited("tcp connection from %pISpc rejected: %s (%d)\n",
			    &conn->peer, why, err);
	return err;
}

/*
 * The peer's HELLO frame, then ours and the first CATALOG.  Anything but a
 * valid HELLO frame in time is refused without an answer: no version is
 * agreed to answer in.
 *
 * Return: 0 when the connection is set up, else a negative errno, counted.
 */
static int engram_serve_tcp_hello(struct engram_tcp_conn *conn)
{
	unsigned long end = conn->accepted + engram_serve_tcp_ms(&engram_tcp_hello_ms);
	/* The idle bound too: the deadline alone would mean none if it were 0. */
	struct engram_tcp_frame f = { .deadline = end, .idle = end, .has_idle = true };
	struct engram_wire_params local, peer;
	struct engram_wire_hdr_info h;
	char why[160];
	int ret, st;

	ret = engram_serve_tcp_recv(conn, &f, conn->hello, ENGRAM_WIRE_HDR_BYTES);
	if (!ret) {
		st = engram_wire_hdr_check(conn->hello, ENGRAM_WIRE_HDR_BYTES, NULL, true,
					   true, &h, why, sizeof(why));
		if (st) {
			engram_serve_refused(NULL, st);
			return engram_serve_tcp_reject(conn, -EPROTO, why);
		}
		ret = engram_serve_tcp_recv(conn, &f, conn->hello + ENGRAM_WIRE_HDR_BYTES,
					    ENGRAM_WIRE_HELLO_BYTES);
	}
	if (ret) {
		if (engram_serve_tcp_dead(conn))
			return ret;	/* closed by us: listen del, unload */
		if (ret != -ENOTCONN)
			engram_serve_tcp_note_stat(conn, ret, "hello",
						   ENGRAM_STAT_TCP_HELLO_TIMEOUTS);
		return engram_serve_tcp_reject(conn, ret,
					       ret == -ETIMEDOUT ? "no hello in time" :
								   "closed before its hello");
	}
	ret = engram_wire_hello_frame_decode(conn->hello, ENGRAM_WIRE_HELLO_FRAME_BYTES,
					     &peer, why, sizeof(why));
	if (ret)
		return engram_serve_tcp_reject(conn, ret, why);
	engram_serve_tcp_local_params(&local);
	ret = engram_wire_negotiate(&local, &peer, &conn->neg, why, sizeof(why));
	if (ret)
		return engram_serve_tcp_reject(conn, ret, why);

	conn->rx = kvmalloc(conn->neg.max_request_bytes, GFP_KERNEL);
	if (!conn->rx)
		return engram_serve_tcp_reject(conn, -ENOMEM, "out of memory");
	ret = engram_wire_hello_frame_encode(conn->hello, sizeof(conn->hello), &conn->neg);
	if (WARN_ON_ONCE(ret < 0))
		return engram_serve_tcp_reject(conn, ret, "cannot encode the hello");

	/*
	 * Ready before the first CATALOG is built: a change that races with
	 * it queues a push, which waits for the mutex and sends again.
	 */
	mutex_lock(&conn->send_mutex);
	ret = engram_serve_tcp_send_buf(conn, conn->hello, ENGRAM_WIRE_HELLO_FRAME_BYTES,
					engram_serve_tcp_send_deadline(), true);
	if (!ret) {
		mutex_lock(&engram_tcp_mutex);
		conn->ready = true;
		mutex_unlock(&engram_tcp_mutex);
		ret = engram_serve_tcp_send_catalog(conn, 0);
	}
	mutex_unlock(&conn->send_mutex);
	if (ret) {
		if (engram_serve_tcp_dead(conn))
			return ret;
		engram_serve_tcp_note(conn, ret, "sending the hello");
		return engram_serve_tcp_reject(conn, ret, "cannot send the hello");
	}
	engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_ACCEPTED);
	pr_info_ratelimited("tcp connection from %pISpc on %s: v%u, %u rows, %u in flight, %u request bytes\n",
			    &conn->peer, conn->l->url.text, conn->neg.version_max,
			    conn->neg.max_rows, conn->neg.max_inflight,
			    conn->neg.max_request_bytes);
	return 0;
}

/*
 * A connection that sent no frame for tcp_idle_timeout_ms: a live client
 * sends heartbeats, so this one is gone or holding a slot.  Closed and
 * counted once, not as an error (it broke no rule of the protocol).
 */
static void engram_serve_tcp_idle_close(struct engram_tcp_conn *conn, unsigned int ms)
{
	if (test_and_set_bit(ENGRAM_TCP_DEAD, &conn->flags))
		return;
	engram_count(&engram_global_stats, ENGRAM_STAT_TCP_IDLE_CLOSES);
	pr_info_ratelimited("tcp connection from %pISpc: no frame for %u ms, closed\n",
			    &conn->peer, ms);
	kernel_sock_shutdown(conn->sock, SHUT_RDWR);
}

/*
 * Frames until the connection ends.  A refused header leaves the stream
 * position unknown: it is answered and the connection closed.
 */
static void engram_serve_tcp_serve(struct engram_tcp_conn *conn)
{
	struct engram_wire_hdr_info h;
	struct engram_tcp_frame f;
	const char *what = "receiving a frame";
	unsigned long deadline;
	unsigned int idle_ms;
	char why[128];
	u64 ticket;
	int ret, st;

	for (;;) {
		/* Silence counts from the end of our answer to the last frame. */
		idle_ms = READ_ONCE(engram_tcp_idle_ms.val);
		f.deadline = 0;
		f.idle = jiffies + msecs_to_jiffies(idle_ms);
		f.has_idle = true;
		f.started = false;
		ret = engram_serve_tcp_recv(conn, &f, conn->rx, ENGRAM_WIRE_HDR_BYTES);
		if (ret == -ETIMEDOUT && !f.started && !engram_serve_tcp_dead(conn)) {
			engram_serve_tcp_idle_close(conn, idle_ms);
			return;
		}
		if (ret)
			break;
		st = engram_wire_hdr_check(conn->rx, ENGRAM_WIRE_HDR_BYTES, &conn->neg,
					   true, true, &h, why, sizeof(why));
		if (st) {
			pr_info_ratelimited("tcp connection from %pISpc: frame refused, %s: %s; closing\n",
					    &conn->peer, engram_wire_status_name(st), why);
			engram_serve_refused(NULL, st);
			mutex_lock(&conn->send_mutex);
			engram_serve_tcp_send_refusal(conn, h.ticket, st, 0);
			mutex_unlock(&conn->send_mutex);
			ret = 0;	/* counted as a refusal, not as a broken stream */
			break;
		}
		/* The header check bounds the length by max_request_bytes. */
		if (WARN_ON_ONCE(h.length > conn->neg.max_request_bytes)) {
			ret = -EPROTO;
			break;
		}
		ret = engram_serve_tcp_recv(conn, &f, conn->rx + ENGRAM_WIRE_HDR_BYTES,
					    h.length - ENGRAM_WIRE_HDR_BYTES);
		if (ret)
			break;
		switch (h.type) {
		case ENGRAM_WIRE_REQUEST:
			what = "sending a response";
			ret = engram_serve_tcp_request(conn, h.length, ktime_get_ns());
			break;
		case ENGRAM_WIRE_CATALOG_REQUEST:
		case ENGRAM_WIRE_HEARTBEAT:
			st = engram_wire_simple_parse(conn->rx, h.length, &conn->neg, true,
						      h.type, &ticket, why, sizeof(why));
			if (WARN_ON_ONCE(st)) {	/* the header check made it valid */
				ret = -EPROTO;
				break;
			}
			deadline = engram_serve_tcp_send_deadline();
			mutex_lock(&conn->send_mutex);
			if (h.type == ENGRAM_WIRE_CATALOG_REQUEST) {
				what = "sending a catalog";
				ret = engram_serve_tcp_send_catalog(conn, ticket);
			} else {
				what = "echoing a heartbeat";
				ret = engram_wire_simple_encode(conn->resp, sizeof(conn->resp),
								&conn->neg,
								ENGRAM_WIRE_HEARTBEAT, ticket);
				if (ret > 0)
					ret = engram_serve_tcp_send_buf(conn, conn->resp, ret,
									deadline, false);
			}
			mutex_unlock(&conn->send_mutex);
			break;
		default:	/* the header check refuses every other type */
			WARN_ON_ONCE(1);
			ret = -EPROTO;
			break;
		}
		if (ret)
			break;
		what = "receiving a frame";
		cond_resched();
	}
	/* A clean close between frames, or one we asked for, is no error. */
	if (ret && ret != -ENOTCONN && !engram_serve_tcp_dead(conn))
		engram_serve_tcp_kill(conn, ret, what);
}

/* Send a pushed CATALOG between two frames of the connection. */
static void engram_serve_tcp_cat_work(struct work_struct *work)
{
	struct engram_tcp_conn *conn = container_of(work, struct engram_tcp_conn, cat_work);
	int ret = 0;

	mutex_lock(&conn->send_mutex);
	if (!engram_serve_tcp_dead(conn))
		ret = engram_serve_tcp_send_catalog(conn, 0);
	mutex_unlock(&conn->send_mutex);
	if (ret && !engram_serve_tcp_dead(conn))
		engram_serve_tcp_kill(conn, ret, "sending a catalog");
}

/* The connection, from hello to teardown; the one place it is freed. */
static void engram_serve_tcp_conn_work(struct work_struct *work)
{
	struct engram_tcp_conn *conn = container_of(work, struct engram_tcp_conn, work);

	engram_cover_start();
	if (!engram_serve_tcp_hello(conn))
		engram_serve_tcp_serve(conn);
	engram_cover_stop();

	engram_serve_tcp_kill(conn, 0, NULL);
	atomic_dec(&conn->l->nconns);
	mutex_lock(&engram_tcp_mutex);
	list_del(&conn->node);
	mutex_unlock(&engram_tcp_mutex);
	/* Unlisted: no push can queue it again. */
	cancel_work_sync(&conn->cat_work);
	sock_release(conn->sock);
	kvfree(conn->rx);
	atomic_dec(&engram_tcp_nconns);
	atomic64_dec(&engram_global_stats.c[ENGRAM_STAT_CONNECTIONS]);
	pr_info_ratelimited("tcp connection from %pISpc closed\n", &conn->peer);
	kfree(conn);
	atomic_inc(&engram_tcp_gen);
	wake_up_all(&engram_tcp_waitq);
}

static void engram_serve_tcp_sock_setup(struct socket *sock)
{
	struct sock *sk = sock->sk;

	tcp_sock_set_nodelay(sk);
	sock_set_keepalive(sk);
	tcp_sock_set_keepidle(sk, ENGRAM_TCP_KEEPIDLE);
	tcp_sock_set_keepintvl(sk, ENGRAM_TCP_KEEPINTVL);
	tcp_sock_set_keepcnt(sk, ENGRAM_TCP_KEEPCNT);
}

/* One accepted socket: admit it or close it at once. */
static void engram_serve_tcp_admit(struct engram_tcp_listen *tl, struct socket *sock)
{
	struct engram_listener *l = tl->l;
	struct engram_tcp_conn *conn;
	struct sockaddr_storage peer;
	struct sock *sk = sock->sk;
	const char *why;

	/*
	 * The socket was cloned from the listener, callbacks and all: give
	 * it back the default ones, or a blocking receive would never wake.
	 */
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = tl->saved_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);

	memset(&peer, 0, sizeof(peer));
	if (kernel_getpeername(sock, (struct sockaddr *)&peer) < 0) {
		/* Reset before we looked: there is nobody to answer. */
		engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_REJECTED);
		sock_release(sock);
		return;
	}
	if (!engram_allow_peer_on((struct sockaddr *)&peer, l->url.text)) {
		/* Counted and logged by allow.c. */
		sock_release(sock);
		return;
	}
	if (engram_serve_stopping()) {
		why = "server shutting down";
		goto reject;
	}
	if (atomic_inc_return(&l->nconns) > READ_ONCE(engram_tcp_max_conns.val)) {
		why = "tcp_max_conns connections on this listener already";
		goto reject_l;
	}
	if (atomic_inc_return(&engram_tcp_nconns) > ENGRAM_TCP_CONNS_TOTAL) {
		why = "too many TCP connections";
		goto reject_all;
	}
	conn = kzalloc(sizeof(*conn), GFP_KERNEL);
	if (!conn) {
		why = "out of memory";
		goto reject_all;
	}
	engram_serve_tcp_sock_setup(sock);
	INIT_LIST_HEAD(&conn->node);
	conn->l = l;
	conn->sock = sock;
	conn->peer = peer;
	conn->accepted = jiffies;
	mutex_init(&conn->send_mutex);
	INIT_WORK(&conn->work, engram_serve_tcp_conn_work);
	INIT_WORK(&conn->cat_work, engram_serve_tcp_cat_work);
	atomic64_inc(&engram_global_stats.c[ENGRAM_STAT_CONNECTIONS]);
	mutex_lock(&engram_tcp_mutex);
	list_add_tail(&conn->node, &engram_tcp_conns);
	mutex_unlock(&engram_tcp_mutex);
	queue_work(engram_tcp_wq, &conn->work);
	return;

reject_all:
	atomic_dec(&engram_tcp_nconns);
reject_l:
	atomic_dec(&l->nconns);
reject:
	engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_REJECTED);
	pr_info_ratelimited("tcp connection from %pISpc on %s rejected: %s\n",
			    &peer, l->url.text, why);
	sock_release(sock);
}

static void engram_serve_tcp_accept_work(struct work_struct *work)
{
	struct engram_tcp_listen *tl = container_of(work, struct engram_tcp_listen,
						    accept_work);
	struct socket *sock;
	int ret;

	engram_cover_start();
	for (;;) {
		ret = engram_kernel_accept(tl->sock, &sock, O_NONBLOCK);
		if (ret) {
			if (ret != -EAGAIN)
				pr_warn_ratelimited("listen %s: accept failed (%d)\n",
						    tl->l->url.text, ret);
			break;
		}
		engram_serve_tcp_admit(tl, sock);
		cond_resched();
	}
	engram_cover_stop();
}

/* Softirq: a connection is ready to be accepted. */
static void engram_serve_tcp_listen_data_ready(struct sock *sk)
{
	struct engram_tcp_listen *tl;

	read_lock_bh(&sk->sk_callback_lock);
	tl = sk->sk_user_data;
	if (tl && sk->sk_state == TCP_LISTEN)
		queue_work(engram_tcp_ctl_wq, &tl->accept_work);
	read_unlock_bh(&sk->sk_callback_lock);
}

/**
 * engram_serve_tcp_listen_start() - listen on a tcp:// URL
 * @l: the listener (serve_listen.c's); its URL names the address
 *
 * Binds exactly the URL's address (never a wildcard) with SO_REUSEADDR,
 * and accepts from then on.  Called with serve_listen.c's mutex held, which
 * serializes starts and stops.  Process context.
 *
 * Return: 0, or a negative errno (-EADDRNOTAVAIL while the address is not
 * configured, -EADDRINUSE, ...) after which the listener waits and retries.
 */
int engram_serve_tcp_listen_start(struct engram_listener *l)
{
	struct engram_tcp_listen *tl;
	struct socket *sock;
	struct sock *sk;
	int alen, ret;

	tl = kzalloc(sizeof(*tl), GFP_KERNEL);
	if (!tl)
		return -ENOMEM;
	alen = l->url.addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
						   sizeof(struct sockaddr_in);
	ret = engram_sock_create_kern(&init_net, l->url.addr.ss_family, SOCK_STREAM,
				      IPPROTO_TCP, &sock);
	if (ret) {
		kfree(tl);
		return ret;
	}
	sk = sock->sk;
	sock_set_reuseaddr(sk);
	ret = kernel_bind(sock, (struct sockaddr_unsized *)&l->url.addr, alen);
	if (!ret)
		ret = engram_kernel_listen(sock, ENGRAM_TCP_BACKLOG);
	if (ret) {
		sock_release(sock);
		kfree(tl);
		return ret;
	}
	tl->l = l;
	tl->sock = sock;
	INIT_WORK(&tl->accept_work, engram_serve_tcp_accept_work);
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = tl;
	tl->saved_data_ready = sk->sk_data_ready;
	sk->sk_data_ready = engram_serve_tcp_listen_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
	mutex_lock(&engram_tcp_lmutex);
	list_add_tail(&tl->node, &engram_tcp_listeners);
	mutex_unlock(&engram_tcp_lmutex);
	/* Whatever arrived before the callback was in place. */
	queue_work(engram_tcp_ctl_wq, &tl->accept_work);
	return 0;
}

/**
 * engram_serve_tcp_listen_stop() - stop accepting on a tcp:// listener
 * @l: the listener; nothing happens when it has no socket
 *
 * Closes the listening socket once no accept runs any more.  Connections
 * already accepted stay: engram_serve_tcp_conns_close_sync() closes them.
 * Called with serve_listen.c's mutex held.  Process context; sleeps.
 */
void engram_serve_tcp_listen_stop(struct engram_listener *l)
{
	struct engram_tcp_listen *tl, *found = NULL;
	struct sock *sk;

	mutex_lock(&engram_tcp_lmutex);
	list_for_each_entry(tl, &engram_tcp_listeners, node) {
		if (tl->l == l) {
			found = tl;
			list_del(&tl->node);
			break;
		}
	}
	mutex_unlock(&engram_tcp_lmutex);
	if (!found)
		return;
	sk = found->sock->sk;
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = found->saved_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
	cancel_work_sync(&found->accept_work);
	sock_release(found->sock);
	kfree(found);
}

/**
 * engram_serve_tcp_conns_close_sync() - close TCP connections and wait until gone
 * @l: only the connections accepted on this listener, or NULL for all
 *
 * Process context; sleeps.  The caller holds none of the server's locks.
 */
void engram_serve_tcp_conns_close_sync(const struct engram_listener *l)
{
	struct engram_tcp_conn *conn;
	bool found;
	int gen;

	for (;;) {
		found = false;
		mutex_lock(&engram_tcp_mutex);
		gen = atomic_read(&engram_tcp_gen);
		list_for_each_entry(conn, &engram_tcp_conns, node) {
			if (l && conn->l != l)
				continue;
			found = true;
			engram_serve_tcp_kill(conn, 0, NULL);
		}
		mutex_unlock(&engram_tcp_mutex);
		if (!found)
			return;
		wait_event(engram_tcp_waitq, atomic_read(&engram_tcp_gen) != gen);
	}
}

/* Queue a CATALOG push on every connection past its hello. */
static void engram_serve_tcp_cat_all(struct work_struct *work)
{
	struct engram_tcp_conn *conn;

	mutex_lock(&engram_tcp_mutex);
	list_for_each_entry(conn, &engram_tcp_conns, node)
		if (conn->ready && !engram_serve_tcp_dead(conn))
			queue_work(engram_tcp_ctl_wq, &conn->cat_work);
	mutex_unlock(&engram_tcp_mutex);
}

/* serve.c's call: push a fresh CATALOG everywhere (any context, any lock held). */
static void engram_serve_tcp_catalog_changed(void)
{
	queue_work(engram_tcp_ctl_wq, &engram_tcp_cat_all_work);
}

/**
 * engram_serve_tcp_init() - set up the TCP transport of the host role
 *
 * Call after engram_serve_init() (the catalog is the host core's).
 *
 * Return: 0 or -ENOMEM.
 */
int engram_serve_tcp_init(void)
{
	engram_tcp_wq = alloc_workqueue("engram_tcp", WQ_UNBOUND, ENGRAM_TCP_CONNS_TOTAL);
	engram_tcp_ctl_wq = alloc_workqueue("engram_tcp_ctl", WQ_UNBOUND, 0);
	if (!engram_tcp_wq || !engram_tcp_ctl_wq) {
		engram_serve_tcp_exit();
		return -ENOMEM;
	}
	engram_serve_register(&engram_tcp_transport);
	return 0;
}

/**
 * engram_serve_tcp_exit() - close every TCP connection and free the transport
 *
 * Call once every TCP listener is stopped.  Returns when every connection
 * is gone.  Safe after a failed or missing
 * engram_serve_tcp_init().  Process context; sleeps.
 */
void engram_serve_tcp_exit(void)
{
	engram_serve_unregister(&engram_tcp_transport);
	cancel_work_sync(&engram_tcp_cat_all_work);
	engram_serve_tcp_conns_close_sync(NULL);
	/* Each waits for its work items' last instructions. */
	if (engram_tcp_wq)
		destroy_workqueue(engram_tcp_wq);
	if (engram_tcp_ctl_wq)
		destroy_workqueue(engram_tcp_ctl_wq);
	engram_tcp_wq = NULL;
	engram_tcp_ctl_wq = NULL;
}
