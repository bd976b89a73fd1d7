// SPDX-License-Identifier: GPL-2.0
/*
 * rdma_hostile: a hostile RDMA peer for t_66_pd.sh.  It tries to write
 * into a client's buffer through queue pairs that have no business
 * reaching it, and to read or write through a host connection's QP.
 *
 *   rdma_hostile --addr IP --port-a P --port-b P --host-port P
 *                [--table NAME] [--rows N] [--linger-ms N]
 *
 * It listens as an engram server on PORT-A and PORT-B (protocol v1 with
 * the module's own codec, kmod/wire.c built for userspace) and prints
 * "rdma_hostile: ready".  The test then links the module to both, and
 * fetches from link A.  When the REQUEST arrives on connection A, its
 * first range (address, rkey) is what a hostile server learns, and it
 * tries, each from a QP of its own:
 *
 *   link-b-write    an RDMA WRITE with A's key from connection B's QP,
 *                   whose other end is the same client's second link
 *   host-write      an RDMA WRITE with A's key through a connection of
 *                   its own to the module's listener (HOST-PORT)
 *   host-write-0    a zero-length RDMA WRITE through another such
 *                   connection (no key is checked: only the QP's access)
 *   host-read-0     a zero-length RDMA READ, the same way
 *
 * Its connections to the host use queue pairs it creates and moves
 * through INIT, RTR and RTS itself (rdma_init_qp_attr(), then
 * rdma_establish()), with a READ depth of 1 whatever the host answered,
 * and ask for one READ each way in the REQ, as a hostile client would.
 *
 * then the control: an RDMA WRITE of 16 bytes (0x11) at the start of the
 * range from connection A, the server the fetch was sent to, which must
 * succeed.  The attacks write 0x5a and 0x5b elsewhere in the range.  It
 * never answers the REQUEST and keeps serving heartbeats until link A
 * drops the connection (the fetch timed out) or LINGER-MS passed.
 *
 * --answer-inv second|forged: a version 2 server instead, which answers
 * the first REQUEST on link A (after the control write) with a RESPONSE
 * of status ok sent as SEND with invalidate of a key that is not the
 * fetch's first: "second" the key of the fetch's second range (a real
 * key of the same fetch: the client must invalidate the first itself
 * before the fetch returns), "forged" the first range's MR under a key
 * it never had (the client's device must refuse it; the connection
 * breaks).  With "second" it then writes with the first key again, after
 * LINGER-MS / 30 (a late-write try, which must be refused, as with the
 * attacks); with "forged" it reports how its SEND ended and stays
 * connected until the client closes the connection or LINGER-MS passed.
 * Link B is not needed.
 *
 * --answer-inv kept: a version 5 server, whose client keeps its keys
 * (ENGRAM_WIRE_REQ_KEPT_KEYS): the control write, then RESPONSE ok by a
 * plain SEND, then, LINGER-MS / 6 later (by when the client has let the
 * buffer go), a write with the first key, which must be refused.
 * --answer-inv kept-inv: the same, but the RESPONSE is a SEND with
 * invalidate of that kept key: the client must treat it as a protocol
 * error and close the connection.
 *
 * --answer-inv bad-index: the same version 2 server answers the REQUEST
 * (with no control write) with ROW_OUT_OF_RANGE whose bad_index,
 * 0xffffffff, is no position of the fetch's rows, by a plain SEND; the
 * client must refuse it as a protocol error, never hand the position on.
 *
 * --shard FILE,WEIGHT_OFFSET,SCALE_OFFSET,FIRST,COUNT --sha256 HEX: a
 * version 3 server instead, on PORT-A alone, whose catalog lists TABLE
 * (ROWS rows, the file's digest HEX) holding rows FIRST to FIRST + COUNT
 * - 1, as a shard host below version 4 does.  It answers every REQUEST
 * until LINGER-MS passed: 300 ms after it arrives (the other shard's host
 * has placed its rows by then), it writes 0xee over every byte of each
 * range the request registered, then each row's bytes, read from FILE,
 * where its place says, then RESPONSE ok.  A client that registered
 * other parts' rows in those ranges finds them overwritten; one that
 * registered only this part's rows gets them exact.  Once the client
 * closed every connection (or LINGER-MS passed) it prints "rdma_hostile:
 * shard: N requests, M rows", and exits 0.
 *
 * Prints one line per attempt: "rdma_hostile: NAME: refused (STATUS)" for
 * a NAK (remote access, invalid request or operation error), "rdma_hostile:
 * NAME: dropped (transport retry counter exceeded)" when the other end
 * never acknowledged it (5.10's rxe drops such packets without a NAK),
 * or "rdma_hostile: NAME: ACCEPTED".  It exits 0 when every attack
 * was refused or dropped and the control write succeeded, 1 when an
 * attack got through, 2 on a setup failure or a timeout.  A drop only
 * counts because the control write, on the same device and after the
 * attacks, shows that the path acknowledges what the other end accepts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "wire.h"

#define MAX_CONNS	32
#define NR_RX		8
#define RX_BYTES	32768	/* the host's CATALOG can be 30,744 bytes */
#define NR_TX		4
#define TX_BYTES	512
#define DATA_BYTES	(SHARD_MAX_ROWS * ENGRAM_ROW_BYTES)
#define SHARD_MAX_ROWS	256
#define SHARD_DELAY_MS	300
#define STEP_MS		8000	/* one connection or one work request */
#define CONTROL_BYTES	16
/*
 * Local ACK timeout exponent for every QP of ours: 4.096 us << 16 is
 * 268 ms, so a try the other end drops without a NAK (5.10's rxe does
 * that) ends in "retry exceeded" after about 2 s (7 tries), not after
 * rdma_cm's default of about 1 s per try, and the four attacks end well
 * within the fetch's deadline (t_66_pd: 20 s).  Set on the QP itself:
 * rdma_cm's ACK_TIMEOUT option does not reach a user QP's attributes on
 * 5.10.
 */
#define ACK_TIMEOUT	16

enum role { SERVER_A, SERVER_B, CLIENT };
enum wr_kind { WR_RECV = 1, WR_SEND, WR_ATTACK };

struct conn {
	enum role role;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;		/* NR_RX receives, NR_TX sends, DATA_BYTES */
	unsigned int tx_next;
	struct engram_wire_params neg;
	bool established;
	bool closed;
	bool failed;		/* a connect that did not make it */
	bool got_catalog;
	bool have_req;
	struct engram_wire_req req;
	uint8_t req_frame[RX_BYTES];	/* what req points into, kept from the receive */
	bool attack_done;
	enum ibv_wc_status attack_status;
};

static struct {
	const char *addr;
	const char *port_a;
	const char *port_b;
	const char *host_port;
	const char *table;
	uint64_t rows;
	unsigned int linger_ms;
	const char *answer_inv;	/* NULL, "second" or "forged" */
	const char *shard;	/* NULL, or FILE,WEIGHT_OFFSET,SCALE_OFFSET,FIRST,COUNT */
	const char *sha256;
	int fd;
	uint64_t weight_offset, scale_offset, first, count;
	uint8_t digest[32];
} o = { .table = "evil", .rows = 1000, .linger_ms = 30000 };

static struct rdma_event_channel *ec;
static struct conn conns[MAX_CONNS];
static unsigned int nr_conns;
static struct rdma_cm_id *listen_a, *listen_b;

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("rdma_hostile: ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	exit(2);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Small limits: the peer's receives then stay small too.  Version 1 only
 * (but with --answer-inv, where it answers as a version 2 server): as a
 * client its buffers are plain MRs, which a version 2 server's SEND with
 * invalidate would try to invalidate (an error that breaks the QP).
 */
static void local_params(struct engram_wire_params *p)
{
	p->version_min = ENGRAM_WIRE_VERSION_MIN;
	p->version_max = o.answer_inv ? ENGRAM_WIRE_VERSION_REMOTE_INV : 1;
	if (o.answer_inv && !strncmp(o.answer_inv, "kept", 4))
		p->version_max = ENGRAM_WIRE_VERSION_KEPT;
	p->max_inflight = 4;
	p->max_ranges = ENGRAM_WIRE_MAX_RANGES;
	p->max_rows = 64;
	p->max_request_bytes = (uint32_t)engram_wire_request_size(64, ENGRAM_WIRE_MAX_RANGES);
	if (o.shard) {
		/* One request at a time, with row places: a shard host below version 4. */
		p->version_max = ENGRAM_WIRE_VERSION_SHARDS;
		p->max_inflight = 1;
		p->max_rows = SHARD_MAX_ROWS;
		p->max_request_bytes = (uint32_t)engram_wire_request_size_slots(SHARD_MAX_ROWS,
									ENGRAM_WIRE_MAX_RANGES);
	}
}

static uint8_t *rx_buf(struct conn *c, unsigned int i)
{
	return c->buf + (size_t)i * RX_BYTES;
}

static uint8_t *data_buf(struct conn *c)
{
	return c->buf + (size_t)NR_RX * RX_BYTES + (size_t)NR_TX * TX_BYTES;
}

static void post_recv(struct conn *c, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)rx_buf(c, i), .length = RX_BYTES, .lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = ((uint64_t)WR_RECV << 32) | i, .sg_list = &sge, .num_sge = 1,
	}, *bad;

	if (ibv_post_recv(c->qp, &wr, &bad))
		die("ibv_post_recv: %s", strerror(errno));
}

/* A SEND of one frame, copied into the next send slot. */
static void post_frame(struct conn *c, const void *frame, size_t len)
{
	unsigned int slot = c->tx_next++ % NR_TX;
	uint8_t *b = c->buf + (size_t)NR_RX * RX_BYTES + (size_t)slot * TX_BYTES;
	struct ibv_sge sge = { .addr = (uintptr_t)b, .length = (uint32_t)len,
			       .lkey = c->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)WR_SEND << 32, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (len > TX_BYTES)
		die("frame of %zu bytes", len);
	memcpy(b, frame, len);
	if (ibv_post_send(c->qp, &wr, &bad))
		fprintf(stderr, "rdma_hostile: send: %s\n", strerror(errno));
}

static void send_catalog(struct conn *c, uint64_t ticket)
{
	struct engram_wire_table t = {
		.generation = 1, .rows = o.rows, .row_bytes = ENGRAM_ROW_BYTES,
		.state = ENGRAM_TABLE_READY,
		.held_rows = o.rows,	/* the whole table: version 3 says so */
	};
	uint8_t frame[TX_BYTES];
	int len;

	snprintf(t.name, sizeof(t.name), "%s", o.table);
	memset(t.sha256, 0x42, sizeof(t.sha256));
	/* Version 4 on says where the tensors are: somewhere past the header. */
	t.weight_offset = 4096;
	t.scale_offset = 4096 + o.rows * ENGRAM_WEIGHT_BYTES;
	if (o.shard) {
		memcpy(t.sha256, o.digest, sizeof(t.sha256));
		t.held_first = o.first;
		t.held_rows = o.count;
	}
	len = engram_wire_catalog_encode(frame, sizeof(frame), &c->neg, ticket, &t, 1);
	if (len < 0)
		die("catalog encode: %d", len);
	post_frame(c, frame, (size_t)len);
}

/* Move our own QP to @state with the attributes rdma_cm gives for it. */
static void to_state(struct conn *c, enum ibv_qp_state state)
{
	struct ibv_qp_attr attr = { .qp_state = state };
	int mask;

	if (rdma_init_qp_attr(c->id, &attr, &mask))
		die("rdma_init_qp_attr(%d): %s", state, strerror(errno));
	if (state == IBV_QPS_RTS) {
		attr.timeout = ACK_TIMEOUT;
		/* rxe takes 7, what the module asks for, as "retry forever". */
		attr.retry_cnt = 6;
	}
	/* One READ in flight, even though the host granted none. */
	if (state == IBV_QPS_RTS && c->role == CLIENT)
		attr.max_rd_atomic = 1;
	if (ibv_modify_qp(c->qp, &attr, mask))
		die("ibv_modify_qp(%d): %s", state, strerror(errno));
}

/* Queue pair, memory and receives for a connection whose id has a device. */
static void conn_setup(struct conn *c)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 16, .max_recv_wr = NR_RX, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	size_t bytes = (size_t)NR_RX * RX_BYTES + (size_t)NR_TX * TX_BYTES + DATA_BYTES;
	unsigned int i;

	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = c->pd ? ibv_create_cq(c->id->verbs, 64, NULL, NULL, 0) : NULL;
	if (!c->cq)
		die("pd/cq: %s", strerror(errno));
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	/*
	 * Our own QP, not rdma_cm's, so that we choose its READ depth whatever
	 * the host's answer says (as a hostile client would), and its ACK
	 * timeout.
	 */
	c->qp = ibv_create_qp(c->pd, &qa);
	if (!c->qp)
		die("ibv_create_qp: %s", strerror(errno));
	to_state(c, IBV_QPS_INIT);
	c->buf = calloc(1, bytes);
	/* Local access only: nothing of ours is offered to anyone. */
	c->mr = c->buf ? ibv_reg_mr(c->pd, c->buf, bytes, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!c->mr)
		die("ibv_reg_mr: %s", strerror(errno));
	for (i = 0; i < NR_RX; i++)
		post_recv(c, i);
}

static struct conn *conn_new(enum role role, struct rdma_cm_id *id)
{
	struct conn *c;

	if (nr_conns == MAX_CONNS)
		return NULL;
	c = &conns[nr_conns++];
	memset(c, 0, sizeof(*c));
	c->role = role;
	c->id = id;
	id->context = c;
	return c;
}

static void on_connect_request(struct rdma_cm_event *ev)
{
	struct engram_wire_params local, peer;
	struct rdma_conn_param param = {};
	uint8_t hello[ENGRAM_WIRE_HELLO_BYTES];
	char err[128];
	struct conn *c;

	c = conn_new(ev->listen_id == listen_a ? SERVER_A : SERVER_B, ev->id);
	if (!c) {
		rdma_reject(ev->id, NULL, 0);
		return;
	}
	local_params(&local);
	if (engram_wire_hello_decode(ev->param.conn.private_data,
				     ev->param.conn.private_data_len, &peer, err, sizeof(err)) ||
	    engram_wire_negotiate(&local, &peer, &c->neg, err, sizeof(err)))
		die("hello from the client refused: %s", err);
	conn_setup(c);
	/* Ready to send before the REP, as librdmacm does for its own QPs. */
	to_state(c, IBV_QPS_RTR);
	to_state(c, IBV_QPS_RTS);
	engram_wire_hello_encode(hello, sizeof(hello), &c->neg);
	param.private_data = hello;
	param.private_data_len = sizeof(hello);
	param.flow_control = 1;
	param.rnr_retry_count = 7;
	param.qp_num = c->qp->qp_num;
	if (rdma_accept(ev->id, &param))
		die("rdma_accept: %s", strerror(errno));
}

static void on_route_resolved(struct conn *c)
{
	struct engram_wire_params local;
	struct rdma_conn_param param = {};
	uint8_t hello[ENGRAM_WIRE_HELLO_BYTES];

	conn_setup(c);
	local_params(&local);
	c->neg = local;
	engram_wire_hello_encode(hello, sizeof(hello), &local);
	param.private_data = hello;
	param.private_data_len = sizeof(hello);
	/*
	 * Ask for the right to read the host, as a hostile client would (a
	 * host that copies the peer's numbers grants it).
	 */
	param.initiator_depth = 1;
	param.responder_resources = 1;
	param.retry_count = 2;
	param.rnr_retry_count = 7;
	param.qp_num = c->qp->qp_num;
	if (rdma_connect(c->id, &param))
		die("rdma_connect: %s", strerror(errno));
}

static void handle_cm_event(struct rdma_cm_event *ev)
{
	struct conn *c = ev->id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		on_connect_request(ev);
		break;
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(ev->id, 2000))
			c->failed = true;
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		on_route_resolved(c);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		/* The host's REP, to our own QP: ready it, then send the RTU. */
		to_state(c, IBV_QPS_RTR);
		to_state(c, IBV_QPS_RTS);
		if (rdma_establish(ev->id))
			die("rdma_establish: %s", strerror(errno));
		c->established = true;
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		c->established = true;
		if (c->role != CLIENT)
			send_catalog(c, 0);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rdma_disconnect(ev->id);
		c->closed = true;
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		if (c) {
			c->failed = true;
			c->closed = true;
		}
		printf("rdma_hostile: cm event %s (status %d)\n", rdma_event_str(ev->event),
		       ev->status);
		break;
	default:
		break;
	}
}

static void on_frame(struct conn *c, const uint8_t *b, uint32_t len)
{
	struct engram_wire_hdr_info hdr;
	char err[128];
	u64 ticket;
	uint8_t frame[ENGRAM_WIRE_HDR_BYTES];

	if (c->role == CLIENT) {
		/* The host's CATALOG: its handler is done with the accept. */
		if (len >= 2 && b[1] == ENGRAM_WIRE_CATALOG)
			c->got_catalog = true;
		return;
	}
	if (engram_wire_hdr_check(b, len, &c->neg, true, false, &hdr, err, sizeof(err))) {
		printf("rdma_hostile: frame refused: %s\n", err);
		return;
	}
	switch (hdr.type) {
	case ENGRAM_WIRE_REQUEST:
		if (c->role != SERVER_A || c->have_req)
			break;
		/* The receive is posted again at once: its bytes are not ours to keep. */
		memcpy(c->req_frame, b, len);
		if (engram_wire_req_parse(c->req_frame, len, &c->neg, &c->req, err, sizeof(err)))
			die("request refused: %s", err);
		c->have_req = true;
		printf("rdma_hostile: request on link A: ticket %" PRIu64 ", %u rows, %u ranges,"
		       " range 0 at 0x%" PRIx64 " rkey 0x%x, %" PRIu64 " bytes\n",
		       (uint64_t)c->req.ticket, c->req.nr_rows, c->req.nr_ranges,
		       (uint64_t)c->req.ranges[0].addr, c->req.ranges[0].rkey,
		       (uint64_t)c->req.ranges[0].length);
		break;
	case ENGRAM_WIRE_HEARTBEAT:
		if (engram_wire_simple_parse(b, len, &c->neg, true, ENGRAM_WIRE_HEARTBEAT,
					     &ticket, err, sizeof(err)))
			break;
		if (engram_wire_simple_encode(frame, sizeof(frame), &c->neg,
					      ENGRAM_WIRE_HEARTBEAT, ticket) > 0)
			post_frame(c, frame, sizeof(frame));
		break;
	case ENGRAM_WIRE_CATALOG_REQUEST:
		if (!engram_wire_simple_parse(b, len, &c->neg, true, ENGRAM_WIRE_CATALOG_REQUEST,
					      &ticket, err, sizeof(err)))
			send_catalog(c, ticket);
		break;
	default:
		break;
	}
}

static void poll_cq(struct conn *c)
{
	struct ibv_wc wc[16];
	int n, i;

	if (!c->cq)
		return;
	while ((n = ibv_poll_cq(c->cq, 16, wc)) > 0) {
		for (i = 0; i < n; i++) {
			unsigned int kind = (unsigned int)(wc[i].wr_id >> 32);
			unsigned int idx = (unsigned int)wc[i].wr_id;

			if (kind == WR_ATTACK) {
				c->attack_done = true;
				c->attack_status = wc[i].status;
			} else if (kind == WR_RECV && wc[i].status == IBV_WC_SUCCESS) {
				on_frame(c, rx_buf(c, idx), wc[i].byte_len);
				if (!c->closed)
					post_recv(c, idx);
			}
		}
	}
}

/* Handle CM events and completions for up to @ms, or until @done(@arg). */
static bool pump(unsigned int ms, bool (*done)(void *), void *arg)
{
	uint64_t end = now_ms() + ms;
	struct rdma_cm_event *ev;
	struct pollfd pfd = { .fd = ec->fd, .events = POLLIN };
	unsigned int i;

	for (;;) {
		while (!rdma_get_cm_event(ec, &ev)) {
			handle_cm_event(ev);
			rdma_ack_cm_event(ev);
		}
		for (i = 0; i < nr_conns; i++)
			poll_cq(&conns[i]);
		if (done && done(arg))
			return true;
		if (now_ms() >= end)
			return false;
		poll(&pfd, 1, 1);
	}
}

static struct conn *find(enum role role, bool (*pred)(struct conn *))
{
	unsigned int i;

	for (i = 0; i < nr_conns; i++)
		if (conns[i].role == role && pred(&conns[i]))
			return &conns[i];
	return NULL;
}

static bool has_req(struct conn *c) { return c->have_req && !c->closed; }
static bool is_up(struct conn *c) { return c->established && !c->closed; }
static bool req_and_b(void *arg)
{
	(void)arg;
	return find(SERVER_A, has_req) && (o.answer_inv || find(SERVER_B, is_up));
}
static bool attack_done(void *arg) { return ((struct conn *)arg)->attack_done; }
static bool client_ready(void *arg)
{
	struct conn *c = arg;

	return c->failed || (c->established && c->got_catalog);
}
static bool a_closed(void *arg) { return ((struct conn *)arg)->closed; }

static struct rdma_cm_id *listen_on(const char *port)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct rdma_cm_id *id;
	struct addrinfo *ai;

	if (getaddrinfo(o.addr, port, &hints, &ai))
		die("bad address %s port %s", o.addr, port);
	if (rdma_create_id(ec, &id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(id, ai->ai_addr) || rdma_listen(id, 8))
		die("listen on %s:%s: %s", o.addr, port, strerror(errno));
	freeaddrinfo(ai);
	return id;
}

/* A fresh connection to the module's listener, up and past its CATALOG. */
static struct conn *connect_host(void)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *src, *dst;
	struct rdma_cm_id *id;
	struct conn *c;

	if (getaddrinfo(o.addr, "0", &hints, &src) ||
	    getaddrinfo(o.addr, o.host_port, &hints, &dst))
		die("bad address %s", o.addr);
	if (rdma_create_id(ec, &id, NULL, RDMA_PS_TCP))
		die("rdma_create_id: %s", strerror(errno));
	c = conn_new(CLIENT, id);
	if (!c)
		die("too many connections");
	if (rdma_resolve_addr(id, src->ai_addr, dst->ai_addr, 2000))
		die("rdma_resolve_addr: %s", strerror(errno));
	freeaddrinfo(src);
	freeaddrinfo(dst);
	if (!pump(STEP_MS, client_ready, c) || c->failed)
		die("no connection to the host on port %s", o.host_port);
	return c;
}

static const char *status_name(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_REM_ACCESS_ERR:
		return "remote access error";
	case IBV_WC_REM_INV_REQ_ERR:
		return "remote invalid request";
	case IBV_WC_REM_OP_ERR:
		return "remote operation error";
	default:
		return ibv_wc_status_str(s);
	}
}

/*
 * Post one RDMA WRITE or READ of @len bytes (0: no SGE, no key needed) and
 * report.  Returns 0 when refused or dropped by the remote end, 1 when it
 * went through, 2 when neither (no completion, or a local failure).
 */
static int attempt(const char *name, struct conn *c, enum ibv_wr_opcode op, uint64_t addr,
		   uint32_t rkey, uint32_t len, uint8_t fill)
{
	struct ibv_sge sge = { .addr = (uintptr_t)data_buf(c), .length = len,
			       .lkey = c->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)WR_ATTACK << 32, .sg_list = len ? &sge : NULL,
		.num_sge = len ? 1 : 0, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = addr, .rkey = rkey },
	}, *bad;

	memset(data_buf(c), fill, DATA_BYTES);
	c->attack_done = false;
	if (ibv_post_send(c->qp, &wr, &bad)) {
		printf("rdma_hostile: %s: cannot post (%s)\n", name, strerror(errno));
		return 2;
	}
	if (!pump(STEP_MS, attack_done, c)) {
		printf("rdma_hostile: %s: no completion in %u ms\n", name, STEP_MS);
		return 2;
	}
	if (c->attack_status == IBV_WC_SUCCESS) {
		printf("rdma_hostile: %s: ACCEPTED\n", name);
		return 1;
	}
	switch (c->attack_status) {
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
		printf("rdma_hostile: %s: refused (%s)\n", name,
		       status_name(c->attack_status));
		return 0;
	case IBV_WC_RETRY_EXC_ERR:
		/* Sent, retried and never acknowledged: the other end kept it out. */
		printf("rdma_hostile: %s: dropped (%s)\n", name,
		       status_name(c->attack_status));
		return 0;
	default:
		/* Not an answer of the other end's: proves nothing. */
		printf("rdma_hostile: %s: failed (%s)\n", name,
		       status_name(c->attack_status));
		return 2;
	}
}

/*
 * --answer-inv: answer link A's REQUEST "ok" with a SEND that invalidates
 * @rkey, which is not the fetch's first key.  Returns the SEND's status.
 */
static enum ibv_wc_status answer_inv(struct conn *c, uint32_t rkey)
{
	bool bad_index = !strcmp(o.answer_inv, "bad-index");
	bool kept = !strcmp(o.answer_inv, "kept");
	struct engram_wire_resp resp = {
		.ticket = c->req.ticket,
		.status = bad_index ? ENGRAM_WIRE_ROW_OUT_OF_RANGE : ENGRAM_WIRE_OK,
		.bad_index = bad_index ? 0xffffffffU : 0,
		.bytes = bad_index ? 0 : (uint64_t)c->req.nr_rows * ENGRAM_ROW_BYTES,
	};
	/* Not a send slot: a heartbeat's echo may be in flight from those. */
	uint8_t *b = data_buf(c);
	struct ibv_sge sge = { .addr = (uintptr_t)b, .lkey = c->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)WR_ATTACK << 32, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
		.invalidate_rkey = rkey,
	}, *bad;
	int len;

	len = engram_wire_resp_encode(b, DATA_BYTES, &c->neg, false, &resp);
	if (len < 0)
		die("response encode: %d", len);
	sge.length = (uint32_t)len;
	if (bad_index || kept)
		wr.opcode = IBV_WR_SEND;
	c->attack_done = false;
	if (ibv_post_send(c->qp, &wr, &bad))
		die("SEND with invalidate: %s", strerror(errno));
	if (!pump(STEP_MS, attack_done, c))
		die("SEND with invalidate: no completion in %u ms", STEP_MS);
	printf("rdma_hostile: answer-inv-%s: RESPONSE %s invalidating 0x%x (first key 0x%x):"
	       " %s\n", o.answer_inv, engram_wire_status_name(resp.status),
	       bad_index || kept ? 0 : rkey, c->req.ranges[0].rkey,
	       c->attack_status == IBV_WC_SUCCESS ? "delivered" : status_name(c->attack_status));
	return c->attack_status;
}

/* --answer-inv: the owner's control write at the start of range 0. */
static bool control_write(struct conn *a, struct engram_wire_dest r0)
{
	if (r0.length < 2 * CONTROL_BYTES)
		die("range 0 has %" PRIu64 " bytes, need %u", (uint64_t)r0.length,
		    2 * CONTROL_BYTES);
	if (attempt("control-write-link-a", a, IBV_WR_RDMA_WRITE, r0.addr, r0.rkey,
		    CONTROL_BYTES, 0x11) == 1)
		return true;
	printf("rdma_hostile: the control write did not go through\n");
	return false;
}

/* --answer-inv: stay connected, so that a close is the client's own doing. */
static int await_close(struct conn *a, const char *what)
{
	if (pump(o.linger_ms, a_closed, a))
		printf("rdma_hostile: %s: the client closed the connection\n", what);
	else
		printf("rdma_hostile: %s: still connected after %u ms\n", what, o.linger_ms);
	printf("rdma_hostile: done\n");
	return 0;
}

/* --answer-inv: @ms after the answer, a write with the first key. */
static int late_write(struct conn *a, struct engram_wire_dest r0, unsigned int ms)
{
	int ret;

	pump(ms, NULL, NULL);
	ret = attempt("late-write", a, IBV_WR_RDMA_WRITE, r0.addr + CONTROL_BYTES, r0.rkey,
		      CONTROL_BYTES, 0x5e);
	printf("rdma_hostile: done (%s)\n", ret == 0 ? "all refused" :
	       ret == 1 ? "an attack got through" : "inconclusive");
	return ret;
}

/*
 * --answer-inv kept: a version 5 server.  The REQUEST must keep its keys;
 * the control write, the answer (a plain SEND, as the flag asks), then,
 * LINGER-MS / 6 later, when the client has unregistered the buffer or
 * closed its fd, a write with the first key, which must be refused: the
 * key was kept across fetches, not past the buffer.  kept-inv answers
 * with a SEND that invalidates that key instead.
 */
static int answer_kept(struct conn *a, struct engram_wire_dest r0)
{
	if (a->neg.version_max < ENGRAM_WIRE_VERSION_KEPT)
		die("link A negotiated version %u, not %u", a->neg.version_max,
		    ENGRAM_WIRE_VERSION_KEPT);
	printf("rdma_hostile: answer-kept: the request %s its keys\n",
	       a->req.flags & ENGRAM_WIRE_REQ_KEPT_KEYS ? "keeps" : "does not keep");
	if (!control_write(a, r0))
		return 2;
	if (!strcmp(o.answer_inv, "kept-inv")) {
		/* The key the client keeps: it must break the connection. */
		answer_inv(a, r0.rkey);
		return await_close(a, "answer-kept-inv");
	}
	if (answer_inv(a, 0) != IBV_WC_SUCCESS)
		return 2;
	return late_write(a, r0, o.linger_ms / 6);
}

/* --answer-inv: the control write, the wrong answer, then a late write. */
static int answer_wrong_key(struct conn *a, struct engram_wire_dest r0)
{
	if (a->neg.version_max < ENGRAM_WIRE_VERSION_REMOTE_INV)
		die("link A negotiated version %u, not 2", a->neg.version_max);
	if (!strncmp(o.answer_inv, "kept", 4))
		return answer_kept(a, r0);
	if (!strcmp(o.answer_inv, "bad-index")) {
		/* No control write: a refused fetch's buffer must stay untouched. */
		answer_inv(a, 0);
		pump(o.linger_ms / 30, NULL, NULL);
		printf("rdma_hostile: done\n");
		return 0;
	}
	if (!control_write(a, r0))
		return 2;
	if (!strcmp(o.answer_inv, "forged")) {
		/* rxe keeps the MR's index in the key's upper 24 bits: same MR, new key. */
		answer_inv(a, r0.rkey ^ 0x80);
		return await_close(a, "answer-inv-forged");
	}
	if (a->req.nr_ranges < 2)
		die("the fetch has %u range, need 2", a->req.nr_ranges);
	if (answer_inv(a, a->req.ranges[1].rkey) != IBV_WC_SUCCESS)
		return 2;
	/* Long after the client read the answer: it must be over by now. */
	return late_write(a, r0, o.linger_ms / 30);
}

/* --shard: one RDMA WRITE of @len bytes at @off of our data buffer, waited for. */
static void shard_write(struct conn *c, uint64_t addr, uint32_t rkey, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)data_buf(c) + off, .length = len,
			       .lkey = c->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)WR_ATTACK << 32, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = addr, .rkey = rkey },
	}, *bad;

	c->attack_done = false;
	if (ibv_post_send(c->qp, &wr, &bad))
		die("shard: RDMA WRITE: %s", strerror(errno));
	if (!pump(STEP_MS, attack_done, c))
		die("shard: RDMA WRITE: no completion in %u ms", STEP_MS);
	if (c->attack_status != IBV_WC_SUCCESS)
		die("shard: RDMA WRITE: %s", status_name(c->attack_status));
}

/*
 * --shard: overwrite everything the request registered, then place its
 * rows and answer ok.  Returns the rows placed.
 */
static uint32_t shard_serve(struct conn *c)
{
	const struct engram_wire_req *r = &c->req;
	struct engram_wire_resp resp = {
		.ticket = r->ticket, .status = ENGRAM_WIRE_OK,
		.bytes = (uint64_t)r->nr_rows * ENGRAM_ROW_BYTES,
	};
	uint8_t frame[ENGRAM_WIRE_HDR_BYTES + 64];
	struct engram_wire_place pl;
	uint64_t at, n;
	uint32_t i;
	int len;

	if (r->nr_rows > SHARD_MAX_ROWS)
		die("shard: %u rows in one request", r->nr_rows);
	pump(SHARD_DELAY_MS, NULL, NULL);
	memset(data_buf(c), 0xee, DATA_BYTES);
	for (i = 0; i < r->nr_ranges; i++)
		for (at = 0; at < r->ranges[i].length; at += n) {
			n = r->ranges[i].length - at;
			n = n < DATA_BYTES ? n : DATA_BYTES;
			shard_write(c, r->ranges[i].addr + at, r->ranges[i].rkey, 0, (uint32_t)n);
		}
	for (i = 0; i < r->nr_rows; i++) {
		uint64_t row = engram_wire_req_row(r, i);
		uint8_t *d = data_buf(c) + (size_t)i * ENGRAM_ROW_BYTES;

		if (row < o.first || row - o.first >= o.count)
			die("shard: asked for row %" PRIu64 ", which it does not hold", row);
		if (pread(o.fd, d, ENGRAM_WEIGHT_BYTES,
			  (off_t)(o.weight_offset + row * ENGRAM_WEIGHT_BYTES)) != ENGRAM_WEIGHT_BYTES ||
		    pread(o.fd, d + ENGRAM_WEIGHT_BYTES, ENGRAM_SCALE_BYTES,
			  (off_t)(o.scale_offset + row * ENGRAM_SCALE_BYTES)) != ENGRAM_SCALE_BYTES)
			die("shard: cannot read row %" PRIu64, row);
		engram_wire_req_place(r, i, &pl);
		shard_write(c, pl.addr, pl.rkey, i * ENGRAM_ROW_BYTES, ENGRAM_ROW_BYTES);
	}
	len = engram_wire_resp_encode(frame, sizeof(frame), &c->neg, false, &resp);
	if (len < 0)
		die("shard: response encode: %d", len);
	post_frame(c, frame, (size_t)len);
	return r->nr_rows;
}

static bool was_up(struct conn *c) { return c->established; }
static bool is_open(struct conn *c) { return !c->closed; }

/* A request to serve, or every connection there was is closed again. */
static bool shard_wake(void *arg)
{
	(void)arg;
	return find(SERVER_A, has_req) || (find(SERVER_A, was_up) && !find(SERVER_A, is_open));
}

/* --shard: serve requests until the client closed the link or LINGER-MS passed. */
static int shard_main(void)
{
	uint64_t end = now_ms() + o.linger_ms, reqs = 0, rows = 0;
	struct conn *a;

	while (now_ms() < end) {
		if (!pump((unsigned int)(end - now_ms()), shard_wake, NULL))
			break;
		a = find(SERVER_A, has_req);
		if (!a)
			break;
		rows += shard_serve(a);
		reqs++;
		a->have_req = false;
	}
	printf("rdma_hostile: shard: %" PRIu64 " requests, %" PRIu64 " rows\n", reqs, rows);
	return 0;
}

/* FILE,WEIGHT_OFFSET,SCALE_OFFSET,FIRST,COUNT and the digest's hex. */
static void shard_parse(void)
{
	char path[4096];
	unsigned int i, byte;

	if (sscanf(o.shard, "%4095[^,],%" SCNu64 ",%" SCNu64 ",%" SCNu64 ",%" SCNu64, path,
		   &o.weight_offset, &o.scale_offset, &o.first, &o.count) != 5 || !o.count ||
	    !o.sha256 || strlen(o.sha256) != 64)
		die("--shard FILE,WEIGHT_OFFSET,SCALE_OFFSET,FIRST,COUNT and --sha256 HEX");
	for (i = 0; i < 32; i++) {
		if (sscanf(o.sha256 + 2 * i, "%2x", &byte) != 1)
			die("bad --sha256");
		o.digest[i] = (uint8_t)byte;
	}
	o.fd = open(path, O_RDONLY);
	if (o.fd < 0)
		die("%s: %s", path, strerror(errno));
}

static void usage(void)
{
	fprintf(stderr, "usage: rdma_hostile --addr IP --port-a P --port-b P --host-port P"
		" [--table NAME] [--rows N] [--linger-ms N] [--answer-inv second|forged|bad-index|kept|kept-inv]\n"
		"       rdma_hostile --addr IP --port-a P --shard FILE,WOFF,SOFF,FIRST,COUNT"
		" --sha256 HEX [--table NAME] [--rows N] [--linger-ms N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "port-a", required_argument, NULL, 'A' },
		{ "port-b", required_argument, NULL, 'B' },
		{ "host-port", required_argument, NULL, 'H' },
		{ "table", required_argument, NULL, 't' },
		{ "rows", required_argument, NULL, 'r' },
		{ "linger-ms", required_argument, NULL, 'l' },
		{ "answer-inv", required_argument, NULL, 'i' },
		{ "shard", required_argument, NULL, 's' },
		{ "sha256", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 }
	};
	struct engram_wire_dest r0;
	struct conn *a, *b, *h;
	int ch, worst = 0, ret;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'a': o.addr = optarg; break;
		case 'A': o.port_a = optarg; break;
		case 'B': o.port_b = optarg; break;
		case 'H': o.host_port = optarg; break;
		case 't': o.table = optarg; break;
		case 'r': o.rows = strtoull(optarg, NULL, 0); break;
		case 'l': o.linger_ms = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'i': o.answer_inv = optarg; break;
		case 's': o.shard = optarg; break;
		case 'S': o.sha256 = optarg; break;
		default: usage();
		}
	}
	if (o.shard) {
		if (!o.addr || !o.port_a || !o.rows || o.answer_inv)
			usage();
		shard_parse();
	} else if (!o.addr || !o.port_a || !o.port_b || !o.host_port || !o.rows) {
		usage();
	}
	if (o.answer_inv && strcmp(o.answer_inv, "second") && strcmp(o.answer_inv, "forged") &&
	    strcmp(o.answer_inv, "bad-index") && strcmp(o.answer_inv, "kept") &&
	    strcmp(o.answer_inv, "kept-inv"))
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);

	ec = rdma_create_event_channel();
	if (!ec || fcntl(ec->fd, F_SETFL, fcntl(ec->fd, F_GETFL) | O_NONBLOCK))
		die("event channel: %s", strerror(errno));
	listen_a = listen_on(o.port_a);
	if (o.shard) {
		printf("rdma_hostile: ready\n");
		return shard_main();
	}
	listen_b = listen_on(o.port_b);
	printf("rdma_hostile: ready\n");

	if (!pump(60000, req_and_b, NULL))
		die("no request on link A with link B up within 60 s");
	a = find(SERVER_A, has_req);
	b = find(SERVER_B, is_up);
	r0 = a->req.ranges[0];
	if (o.answer_inv)
		return answer_wrong_key(a, r0);
	if (r0.length < 192)
		die("range 0 has %" PRIu64 " bytes, need 192", (uint64_t)r0.length);

	/* The key another link's QP carries must not reach link A's buffer. */
	ret = attempt("link-b-write", b, IBV_WR_RDMA_WRITE, r0.addr + 64, r0.rkey, 64, 0x5a);
	worst = ret > worst ? ret : worst;

	/* Nor a connection of the host's, in the same kernel. */
	h = connect_host();
	ret = attempt("host-write", h, IBV_WR_RDMA_WRITE, r0.addr + 128, r0.rkey, 64, 0x5b);
	worst = ret > worst ? ret : worst;
	rdma_disconnect(h->id);

	/* The host's QPs grant no remote access at all, key or no key. */
	h = connect_host();
	ret = attempt("host-write-0", h, IBV_WR_RDMA_WRITE, 0, 0, 0, 0x5c);
	worst = ret > worst ? ret : worst;
	rdma_disconnect(h->id);
	h = connect_host();
	ret = attempt("host-read-0", h, IBV_WR_RDMA_READ, 0, 0, 0, 0x5d);
	worst = ret > worst ? ret : worst;
	rdma_disconnect(h->id);

	/* The server the fetch went to may write: the key and address were right. */
	ret = attempt("control-write-link-a", a, IBV_WR_RDMA_WRITE, r0.addr, r0.rkey,
		      CONTROL_BYTES, 0x11);
	if (ret != 1) {
		printf("rdma_hostile: the control write did not go through\n");
		worst = 2;
	}

	/* Heartbeats go on until the fetch times out and link A lets go. */
	if (!pump(o.linger_ms, a_closed, a))
		printf("rdma_hostile: link A still connected after %u ms\n", o.linger_ms);
	printf("rdma_hostile: done (%s)\n", worst == 0 ? "all refused" :
	       worst == 1 ? "an attack got through" : "inconclusive");
	return worst;
}
