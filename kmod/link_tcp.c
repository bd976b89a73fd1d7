// SPDX-License-Identifier: GPL-2.0
/*
 * The TCP transport of client links: a kernel socket bound to the link's
 * local address, HELLO each way, then the frames of protocol.rst.  A
 * request is built when it is submitted and queued; a sender work item
 * writes the queued requests whole, one at a time, under tx_mutex, so no
 * system call ever waits for room in the socket (a server that stopped
 * reading holds up the sender only, until the first deadline of the
 * fetches it holds breaks the connection).  A receiver work item
 * reads the stream: a header first, checked before anything after it is
 * trusted, then the rest of the frame; the rows of a RESPONSE go straight
 * from the socket into the pinned pages of the fetch's registered buffer,
 * row i at i * stride of its concatenated pieces, the stride gaps untouched.
 *
 * Nothing else writes into a fetch's buffer, and teardown shuts the socket
 * down and waits for the receiver to return before it ends any fetch: a
 * fetch that ended (deadline, broken link) receives no byte afterwards, as
 * over RDMA.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bvec.h>
#include <linux/net.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <linux/tcp.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "cost.h"
#include "inject.h"
#include "link.h"

/* Pieces of rows received with one recvmsg(): a row spans at most 2 pages. */
#define ENGRAM_LINK_TCP_BVECS	64

/* A request waiting for the sender, its frame built at submit. */
struct engram_link_tcp_req {
	struct list_head node;		/* on engram_link_tcp.tx_queue */
	size_t len;
	u8 frame[];
};

/* A link over TCP: the generic link, and its socket and workers. */
struct engram_link_tcp {
	struct engram_link link;
	struct socket *sock;		/* set up and torn down under link.mutex */
	struct work_struct rx_work;	/* the receiver, on its own workqueue */
	struct mutex tx_mutex;		/* one frame at a time into the stream */
	struct list_head tx_queue;	/* requests for the sender, under link.lock */
	struct work_struct tx_work;	/* the sender: callers never wait on the socket */
	void *rx_buf;			/* ENGRAM_WIRE_MAX_CATALOG_BYTES */
};

static struct engram_link_tcp *engram_link_tcp_of(struct engram_link *l)
{
	return container_of(l, struct engram_link_tcp, link);
}

static struct workqueue_struct *engram_link_tcp_rx_wq;

static int engram_link_tcp_addrlen(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in);
}

/* Send all of @len bytes, or fail: a partial frame leaves the stream unusable. */
static int engram_link_tcp_send(struct socket *sock, const void *buf, size_t len,
				int flags)
{
	struct msghdr msg = { .msg_flags = flags | MSG_NOSIGNAL };
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	int ret;

	ret = kernel_sendmsg(sock, &msg, &iov, 1, len);
	if (ret == len)
		return 0;
	return ret < 0 ? ret : -EIO;
}

/* Receive exactly @len bytes; the end of the stream is a reset. */
static int engram_link_tcp_recv(struct socket *sock, void *buf, size_t len)
{
	struct msghdr msg = {};
	struct kvec iov = { .iov_base = buf, .iov_len = len };
	int ret;

	ret = kernel_recvmsg(sock, &msg, &iov, 1, len, MSG_WAITALL);
	if (ret == len)
		return 0;
	if (ret == -EAGAIN)		/* SO_RCVTIMEO during the hello */
		return -ETIMEDOUT;
	return ret < 0 ? ret : -ECONNRESET;
}

static void engram_link_tcp_close(struct engram_link *l)
{
	struct engram_link_tcp *tl = engram_link_tcp_of(l);
	struct engram_link_tcp_req *r, *tmp;

	if (tl->sock) {
		sock_release(tl->sock);
		tl->sock = NULL;
	}
	/* The sender is flushed and conn_sem keeps submitters out: no lock needed. */
	list_for_each_entry_safe(r, tmp, &tl->tx_queue, node) {
		list_del(&r->node);
		kvfree(r);
	}
	kfree(tl->rx_buf);
	tl->rx_buf = NULL;
}

static int engram_link_tcp_connect(struct engram_link *l)
{
	struct engram_link_tcp *tl = engram_link_tcp_of(l);
	struct engram_wire_params local, answer;
	u8 hello[ENGRAM_WIRE_HELLO_FRAME_BYTES];
	long tmo = msecs_to_jiffies(ENGRAM_LINK_CM_TIMEOUT_MS);
	int alen = engram_link_tcp_addrlen(&l->url.addr);
	struct socket *sock;
	char err[96];
	int ret;

	lockdep_assert_held(&l->mutex);
	ret = engram_sock_create_kern(&init_net, l->url.addr.ss_family, SOCK_STREAM, IPPROTO_TCP,
				      &sock);
	if (ret)
		return ret;
	tl->sock = sock;
	/* Bounded connect and hello; afterwards the heartbeat judges the peer. */
	WRITE_ONCE(sock->sk->sk_sndtimeo, tmo);
	WRITE_ONCE(sock->sk->sk_rcvtimeo, tmo);
	tcp_sock_set_nodelay(sock->sk);
	ret = kernel_bind(sock, (struct sockaddr_unsized *)&l->url.local, alen);
	if (ret) {
		pr_info_ratelimited("link %u (%s): cannot bind the local address (%d)\n",
				    l->id, l->url.text, ret);
		return ret;
	}
	ret = engram_kernel_connect(sock, (struct sockaddr_unsized *)&l->url.addr, alen, 0);
	if (ret)
		return ret == -EINPROGRESS ? -ETIMEDOUT : ret;

	engram_link_local_params(&local);
	ret = engram_wire_hello_frame_encode(hello, sizeof(hello), &local);
	if (WARN_ON_ONCE(ret < 0))
		return ret;
	ret = engram_link_tcp_send(sock, hello, ret, 0);
	if (!ret)
		ret = engram_link_tcp_recv(sock, hello, sizeof(hello));
	if (ret)
		return ret;
	if (engram_wire_hello_frame_decode(hello, sizeof(hello), &answer, err, sizeof(err)) ||
	    engram_wire_check_answer(&local, &answer, err, sizeof(err))) {
		pr_warn("link %u: server's answer refused: %s\n", l->id, err);
		return -EPROTO;
	}
	l->neg = answer;
	tl->rx_buf = kmalloc(ENGRAM_WIRE_MAX_CATALOG_BYTES, GFP_KERNEL);
	if (!tl->rx_buf)
		return -ENOMEM;
	WRITE_ONCE(sock->sk->sk_sndtimeo, MAX_SCHEDULE_TIMEOUT);
	WRITE_ONCE(sock->sk->sk_rcvtimeo, MAX_SCHEDULE_TIMEOUT);
	engram_link_went_live(l);
	queue_work(engram_link_tcp_rx_wq, &tl->rx_work);
	return 0;
}

/* Unblock a sender waiting for room and the receiver waiting for bytes. */
static void engram_link_tcp_stop(struct engram_link *l)
{
	struct engram_link_tcp *tl = engram_link_tcp_of(l);

	if (tl->sock)
		kernel_sock_shutdown(tl->sock, SHUT_RDWR);
}

static void engram_link_tcp_teardown(struct engram_link *l, int error)
{
	struct engram_link_tcp *tl = engram_link_tcp_of(l);

	engram_link_tcp_stop(l);
	/* From here on nothing reads the socket, so no byte lands anywhere. */
	flush_work(&tl->rx_work);
	/* The shutdown ended a send blocked on a full socket; none starts again. */
	flush_work(&tl->tx_work);
	engram_link_end_all(l, error);
	engram_link_tcp_close(l);
}

/*
 * Queue the request and return: the sender writes it.  The frame is built
 * here, into its own buffer, so the fetch's rows are not read afterwards.
 */
static int engram_link_tcp_submit(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_link_tcp *tl = engram_link_tcp_of(l);
	struct engram_wire_req req;
	struct engram_link_tcp_req *r;
	unsigned long flags;
	u64 size;
	int len, ret;

	/* TCP ignores addr and rkey; the lengths count as over RDMA. */
	engram_link_fetch_req(f, &req);

	/* Checked before allocating; the builder checks the rest. */
	size = f->places ? engram_wire_request_size_slots(f->nr_rows, f->nr_pieces) :
			   engram_wire_request_size(f->nr_rows, f->nr_pieces);
	if (size > l->neg.max_request_bytes)
		return -E2BIG;
	r = kvmalloc(struct_size(r, frame, size), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	len = engram_wire_req_build(r->frame, size, &l->neg, &req, f->rows, f->places);
	ret = len < 0 ? len : engram_link_track(l, f);
	if (ret) {
		kvfree(r);
		return ret;
	}
	r->len = len;
	spin_lock_irqsave(&l->lock, flags);
	list_add_tail(&r->node, &tl->tx_queue);
	spin_unlock_irqrestore(&l->lock, flags);
	if (queue_work(engram_link_tcp_rx_wq, &tl->tx_work))
		engram_cost_inc(ENGRAM_STAT_CLIENT_WORK_ITEMS);
	return 0;		/* tracked: the fetch completes, with its error if any */
}

/*
 * A TCP link's sender, on its tx_work: writes the queued requests in
 * order.  A send that fails, or is cut short by teardown's shutdown,
 * breaks the connection (part of a frame may be in the stream); the
 * requests after it are dropped, as their fetches end with the connection.
 */
static void engram_link_tcp_tx_work(struct work_struct *work)
{
	struct engram_link_tcp *tl = container_of(work, struct engram_link_tcp, tx_work);
	struct engram_link *l = &tl->link;
	struct engram_link_tcp_req *r;
	unsigned long flags;
	int ret = 0;

	for (;;) {
		spin_lock_irqsave(&l->lock, flags);
		r = list_first_entry_or_null(&tl->tx_queue, struct engram_link_tcp_req, node);
		if (r)
			list_del(&r->node);
		spin_unlock_irqrestore(&l->lock, flags);
		if (!r)
			break;
		if (!ret) {
			mutex_lock(&tl->tx_mutex);
			ret = engram_link_tcp_send(tl->sock, r->frame, r->len, 0);
			mutex_unlock(&tl->tx_mutex);
		}
		kvfree(r);
	}
	if (ret) {
		/* No later run may put a frame after the broken one. */
		kernel_sock_shutdown(tl->sock, SHUT_RDWR);
		engram_link_fail(l, -ECONNRESET);
	}
}

/*
 * Never blocks: with a full send buffer (a server that stopped reading) the
 * heartbeat is skipped and the silence timer goes on running.  A frame cut
 * short by a nearly full buffer breaks the stream and so the connection.
 */
static int engram_link_tcp_heartbeat(struct engram_link *l, u64 ticket)
{
	struct engram_link_tcp *tl = engram_link_tcp_of(l);
	u8 buf[ENGRAM_WIRE_HDR_BYTES];
	int len, ret;

	len = engram_wire_simple_encode(buf, sizeof(buf), &l->neg, ENGRAM_WIRE_HEARTBEAT,
					ticket);
	if (WARN_ON_ONCE(len < 0))
		return len;
	if (!mutex_trylock(&tl->tx_mutex))
		return -EBUSY;
	ret = engram_link_tcp_send(tl->sock, buf, len, MSG_DONTWAIT);
	mutex_unlock(&tl->tx_mutex);
	return ret == -EAGAIN ? -EBUSY : ret;
}

/*
 * Receive the rows of an answered fetch into its pieces.  engram_chardev_fetch_cut()
 * put every row inside one piece; the pages are pinned for as long as the
 * fetch holds its buffers, which is until it ends, after this returns.
 */
static int engram_link_tcp_recv_rows(struct engram_link *l, struct engram_fetch *f)
{
	struct engram_link_tcp *tl = engram_link_tcp_of(l);
	struct bio_vec bv[ENGRAM_LINK_TCP_BVECS];
	unsigned int p = 0, n;
	u64 pbase = 0;
	u32 i = 0;

	while (i < f->nr_rows) {
		struct msghdr msg = {};
		size_t bytes = 0;
		int ret;

		for (n = 0; i < f->nr_rows && n + 2 <= ARRAY_SIZE(bv); i++) {
			u64 d = (u64)(f->places ? f->places[i] : i) * f->stride, pos;
			const struct engram_piece *pc;
			u32 left = ENGRAM_ROW_BYTES;

			if (d < pbase) {
				/* Row places need not rise: look again from the start. */
				p = 0;
				pbase = 0;
			}
			while (p < f->nr_pieces && d >= pbase + f->pieces[p].len)
				pbase += f->pieces[p++].len;
			if (WARN_ON_ONCE(p == f->nr_pieces ||
					 d - pbase + ENGRAM_ROW_BYTES > f->pieces[p].len))
				return -EINVAL;
			pc = &f->pieces[p];
			pos = (pc->buf->addr & ~PAGE_MASK) + pc->off + (d - pbase);
			while (left) {
				u32 off = offset_in_page(pos);
				u32 chunk = min_t(u32, left, PAGE_SIZE - off);

				bv[n].bv_page = pc->buf->pages[pos >> PAGE_SHIFT];
				bv[n].bv_offset = off;
				bv[n].bv_len = chunk;
				n++;
				pos += chunk;
				left -= chunk;
			}
			bytes += ENGRAM_ROW_BYTES;
		}
		iov_iter_bvec(&msg.msg_iter, ITER_DEST, bv, n, bytes);
		ret = sock_recvmsg(tl->sock, &msg, MSG_WAITALL);
		if (ret != bytes)
			return ret < 0 ? ret : -ECONNRESET;
		engram_link_heard(l);
	}
	return 0;
}

static int engram_link_tcp_response(struct engram_link *l, u8 *buf)
{
	struct engram_link_tcp *tl = engram_link_tcp_of(l);
	struct engram_wire_resp resp;
	struct engram_fetch *f;
	char err[96];
	int ret;

	ret = engram_link_tcp_recv(tl->sock, buf + ENGRAM_WIRE_HDR_BYTES,
				   ENGRAM_WIRE_RESPONSE_BYTES - ENGRAM_WIRE_HDR_BYTES);
	if (ret)
		return ret;
	if (engram_wire_resp_decode(buf, ENGRAM_WIRE_RESPONSE_BYTES, &l->neg, true, &resp,
				    err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad response: %s\n", l->id, err);
		return -EPROTO;
	}
	f = engram_link_claim(l, &resp, 0);
	if (!f)
		return -EPROTO;
	if (resp.bytes) {
		/*
		 * Rows we cannot place (a count that is not ours) stay in the
		 * stream: only a new connection gets past them.  Teardown ends
		 * the fetch with the -EPROTO the claim gave it.
		 */
		if (f->error)
			return -EPROTO;
		ret = engram_link_tcp_recv_rows(l, f);
		if (ret)
			return ret;
	}
	engram_link_complete(l, f);
	return 0;
}

/*
 * A TCP link's receiver, on its rx_work: reads frames until the connection
 * fails or is shut down, then asks for the connection to be broken (a no-op
 * when teardown shut it).
 */
static void engram_link_tcp_rx_work(struct work_struct *work)
{
	struct engram_link_tcp *tl = container_of(work, struct engram_link_tcp, rx_work);
	struct engram_link *l = &tl->link;
	struct engram_wire_hdr_info h;
	u8 *buf = tl->rx_buf;
	char err[96];
	int ret;

	for (;;) {
		ret = engram_link_tcp_recv(tl->sock, buf, ENGRAM_WIRE_HDR_BYTES);
		if (ret)
			break;
		engram_link_heard(l);
		if (engram_wire_hdr_check(buf, ENGRAM_WIRE_HDR_BYTES, &l->neg, false, true, &h,
					  err, sizeof(err))) {
			pr_warn_ratelimited("link %u: bad frame: %s\n", l->id, err);
			ret = -EPROTO;
			break;
		}
		switch (h.type) {
		case ENGRAM_WIRE_RESPONSE:
			ret = engram_link_tcp_response(l, buf);
			break;
		case ENGRAM_WIRE_CATALOG:
			/* The header check bounded the length by the buffer's size. */
			ret = engram_link_tcp_recv(tl->sock, buf + ENGRAM_WIRE_HDR_BYTES,
						   h.length - ENGRAM_WIRE_HDR_BYTES);
			if (!ret)
				ret = engram_link_frame_catalog(l, buf, h.length);
			break;
		case ENGRAM_WIRE_HEARTBEAT:
			ret = engram_link_hb_echo(l, buf, h.length);
			break;
		default:	/* the header check lets no other type reach a client */
			ret = -EPROTO;
			break;
		}
		if (ret)
			break;
	}
	engram_link_fail(l, -ECONNRESET);
}

static struct engram_link *engram_link_tcp_alloc(void)
{
	struct engram_link_tcp *tl = kzalloc(sizeof(*tl), GFP_KERNEL);

	if (!tl)
		return NULL;
	INIT_WORK(&tl->rx_work, engram_link_tcp_rx_work);
	mutex_init(&tl->tx_mutex);
	INIT_LIST_HEAD(&tl->tx_queue);
	INIT_WORK(&tl->tx_work, engram_link_tcp_tx_work);
	return &tl->link;
}

static void engram_link_tcp_free(struct engram_link *l)
{
	kfree(engram_link_tcp_of(l));
}

static const struct engram_link_ops engram_link_tcp_ops = {
	.alloc = engram_link_tcp_alloc,
	.free = engram_link_tcp_free,
	.connect = engram_link_tcp_connect,
	.stop = engram_link_tcp_stop,
	.teardown = engram_link_tcp_teardown,
	.submit = engram_link_tcp_submit,
	.heartbeat = engram_link_tcp_heartbeat,
};

/**
 * engram_link_tcp_init() - the workqueue of the receivers and senders
 *
 * Its own, reclaim-safe one: link teardown, itself on a reclaim workqueue,
 * waits for a receiver and a sender.  Before engram_link_admin_init().
 *
 * Return: 0 or -ENOMEM.
 */
int engram_link_tcp_init(void)
{
	engram_link_tcp_rx_wq = alloc_workqueue("engram_tcp_rx", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!engram_link_tcp_rx_wq)
		return -ENOMEM;
	engram_link_admin_transport_set(ENGRAM_TRANSPORT_TCP, &engram_link_tcp_ops);
	return 0;
}

/**
 * engram_link_tcp_exit() - after every link has stopped (engram_link_admin_exit())
 */
void engram_link_tcp_exit(void)
{
	engram_link_admin_transport_set(ENGRAM_TRANSPORT_TCP, NULL);
	destroy_workqueue(engram_link_tcp_rx_wq);
	engram_link_tcp_rx_wq = NULL;
}
