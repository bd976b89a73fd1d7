// SPDX-License-Identifier: GPL-2.0
/*
 * A raw-socket peer of the engram_rdma TCP server, for t_59_tcp_bad.sh.
 *
 *   tcp_bad --addr IP --port PORT [options] MODE
 *
 * good    a well-behaved client: HELLO, CATALOG, HEARTBEAT, CATALOG_REQUEST,
 *         pipelined REQUESTs whose rows are compared with the table file
 *         (pread of the weight and scale tensors): --table --file
 *         --weight-offset --scale-offset --count
 * hold    --n good connections, kept open --hold-ms (or until the server
 *         closes them); exit 0 when every one was set up
 * idle    --n connections that finish the hello and then send nothing:
 *         each must be closed --idle-ms after it (tcp_idle_timeout_ms)
 * garbage, hdr, trunc-hello, trunc-hdr, trunc-body, not-hello, bad-hello,
 * req, slow, flood
 *         --n malformed, truncated or stalled cases of one class (see
 *         usage()); every outcome is checked here (the exact refusal, or
 *         the close), and the counters the server must have moved are
 *         printed as "expect COUNTER N" lines for the test to compare.
 *
 * The HELLO, CATALOG and RESPONSE frames are read with the module's own
 * codec (kmod/wire.c built for userspace); the bad frames are built by
 * hand, byte by byte.  Exit 0 when everything was as expected.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"

#define MAX_CONNS	1024

static struct {
	const char *addr;
	const char *port;
	const char *table;
	const char *file;
	uint64_t woff, soff;
	unsigned int n;
	unsigned int count;
	unsigned int wait_ms;
	unsigned int hold_ms;
	unsigned int frame_ms;
	unsigned int idle_ms;
	unsigned int max_conns;
	unsigned int seed;
} o = {
	.port = "18515", .n = 100, .count = 4096, .wait_ms = 5000,
	.frame_ms = 1000, .idle_ms = 3000, .max_conns = 64, .seed = 1,
};

static int failures;
static int filefd = -1;

/* Counters the server must have moved, by name as `engramctl -j stats` says. */
static const char *const counter_names[] = {
	"refused_bad_version", "refused_malformed", "refused_unknown_table",
	"refused_table_not_ready", "refused_row_out_of_range", "refused_too_many_rows",
	"refused_too_many_ranges", "refused_dest_too_small", "connects_accepted",
	"connects_rejected", "transport_errors", "peer_timeouts", "lookups",
	"tcp_hello_timeouts", "tcp_frame_timeouts", "tcp_idle_closes",
};

enum { C_BAD_VERSION, C_MALFORMED, C_UNKNOWN_TABLE, C_NOT_READY, C_ROW_RANGE,
	C_TOO_MANY_ROWS, C_TOO_MANY_RANGES, C_DEST_SMALL, C_ACCEPTED, C_REJECTED,
	C_TRANSPORT, C_TIMEOUTS, C_LOOKUPS, C_HELLO_TIMEOUTS, C_FRAME_TIMEOUTS,
	C_IDLE_CLOSES, C_MAX };

static uint64_t expect[C_MAX];

static void fail(const char *fmt, ...)
{
	va_list ap;

	if (++failures > 20)
		return;
	printf("# FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static uint32_t rnd(void)
{
	static uint64_t s;

	if (!s)
		s = 0x9e3779b97f4a7c15ULL * (o.seed + 1);
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return (uint32_t)(s >> 11);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v); put16(p + 2, v >> 16); }
static void put64(uint8_t *p, uint64_t v) { put32(p, v); put32(p + 4, v >> 32); }

static void hdr(uint8_t *b, uint8_t version, uint8_t type, uint16_t flags,
		uint32_t length, uint64_t ticket)
{
	b[0] = version;
	b[1] = type;
	put16(b + 2, flags);
	put32(b + 4, length);
	put64(b + 8, ticket);
}

/* Socket helpers: every wait is bounded by --wait-ms. */
static int tcp_connect(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
	struct timeval tv = { o.wait_ms / 1000, (o.wait_ms % 1000) * 1000 };
	struct addrinfo *ai;
	int fd, one = 1;

	if (getaddrinfo(o.addr, o.port, &hints, &ai)) {
		fail("bad address %s port %s", o.addr, o.port);
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		fail("connect to %s:%s: %s", o.addr, o.port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* 0 when all sent; -1 otherwise (the server may have closed: not a failure here). */
static int send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t r = send(fd, p, len, MSG_NOSIGNAL);

		if (r <= 0)
			return -1;
		p += r;
		len -= r;
	}
	return 0;
}

/* 0, or -1 on EOF, reset or timeout. */
static int recv_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t r = recv(fd, p, len, 0);

		if (r <= 0)
			return -1;
		p += r;
		len -= r;
	}
	return 0;
}

/*
 * The server closes: EOF or reset, with no byte before it.
 * Return: 0, 1 for data, 2 for a timeout.
 */
static int wait_closed(int fd)
{
	uint8_t b;
	ssize_t r = recv(fd, &b, 1, 0);

	if (r == 0 || (r < 0 && errno == ECONNRESET))
		return 0;
	if (r > 0)
		return 1;
	return 2;
}

static bool closed_without_answer(int fd, const char *what)
{
	int r = wait_closed(fd);

	if (r)
		fail("%s: %s", what, r == 1 ? "server answered, expected a close" :
		     "server did not close in time");
	return !r;
}

struct conn {
	int fd;
	struct engram_wire_params neg;
	uint8_t digest[ENGRAM_WIRE_DIGEST_PREFIX];
	uint64_t generation;
	uint64_t rows;
	bool have_table;
	uint64_t ticket;
	uint8_t *buf;
};

static void local_params(struct engram_wire_params *p)
{
	p->version_min = 1;
	p->version_max = 1;
	p->max_rows = 65536;
	p->max_ranges = 16;
	p->max_inflight = 16;
	p->max_request_bytes = engram_wire_request_size(65536, 16);
}

/* Read one frame (header checked by the codec) into c->buf; returns its header. */
static int read_frame(struct conn *c, struct engram_wire_hdr_info *h)
{
	char why[160];
	int st;

	if (recv_all(c->fd, c->buf, ENGRAM_WIRE_HDR_BYTES))
		return -1;
	st = engram_wire_hdr_check(c->buf, ENGRAM_WIRE_HDR_BYTES, &c->neg, false, true,
				   h, why, sizeof(why));
	if (st) {
		fail("server frame refused by the codec: %s", why);
		return -1;
	}
	if (h->type == ENGRAM_WIRE_RESPONSE)	/* the caller reads the rows */
		return recv_all(c->fd, c->buf + 16, ENGRAM_WIRE_RESPONSE_BYTES - 16);
	return recv_all(c->fd, c->buf + 16, h->length - 16);
}

static void catalog_take(struct conn *c, const struct engram_wire_hdr_info *h)
{
	struct engram_wire_catalog_view cat;
	struct engram_wire_table t;
	char why[160];
	uint32_t i;

	if (engram_wire_catalog_parse(c->buf, h->length, &c->neg, &cat, why, sizeof(why))) {
		fail("catalog refused by the codec: %s", why);
		return;
	}
	c->have_table = false;
	for (i = 0; o.table && i < cat.nr_entries; i++) {
		engram_wire_catalog_get(&cat, i, &t);
		if (strcmp(t.name, o.table) || t.state != ENGRAM_TABLE_READY)
			continue;
		memcpy(c->digest, t.sha256, sizeof(c->digest));
		c->generation = t.generation;
		c->rows = t.rows;
		c->have_table = true;
	}
}

/*
 * Connect and exchange hellos, then read the first CATALOG.
 * Return: 0, or -1 (counted as a failure).
 */
static int conn_open(struct conn *c)
{
	struct engram_wire_params local, answer;
	struct engram_wire_hdr_info h;
	uint8_t hello[ENGRAM_WIRE_HELLO_FRAME_BYTES];
	char why[160];

	memset(c, 0, sizeof(*c));
	c->ticket = 1;
	c->fd = tcp_connect();
	if (c->fd < 0)
		return -1;
	local_params(&local);
	c->buf = malloc(32 + (size_t)local.max_rows * ENGRAM_ROW_BYTES);
	if (!c->buf || engram_wire_hello_frame_encode(hello, sizeof(hello), &local) < 0 ||
	    send_all(c->fd, hello, sizeof(hello)) ||
	    recv_all(c->fd, hello, sizeof(hello))) {
		fail("hello exchange: %s", strerror(errno));
		goto err;
	}
	if (engram_wire_hello_frame_decode(hello, sizeof(hello), &answer, why, sizeof(why)) ||
	    engram_wire_check_answer(&local, &answer, why, sizeof(why))) {
		fail("server hello refused: %s", why);
		goto err;
	}
	c->neg = answer;
	if (read_frame(c, &h) || h.type != ENGRAM_WIRE_CATALOG || h.ticket) {
		fail("no CATALOG after the hello");
		goto err;
	}
	catalog_take(c, &h);
	if (o.table && !c->have_table) {
		fail("table %s not in the catalog", o.table);
		goto err;
	}
	return 0;
err:
	close(c->fd);
	free(c->buf);
	c->fd = -1;
	c->buf = NULL;
	return -1;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	c->fd = -1;
	c->buf = NULL;
}

/* Read the next RESPONSE (skipping pushed CATALOGs) into @r. */
static int read_response(struct conn *c, struct engram_wire_resp *r)
{
	struct engram_wire_hdr_info h;
	char why[160];

	for (int i = 0; i < 16; i++) {
		if (read_frame(c, &h))
			return -1;
		if (h.type == ENGRAM_WIRE_CATALOG) {
			catalog_take(c, &h);
			continue;
		}
		if (h.type != ENGRAM_WIRE_RESPONSE) {
			fail("%s frame where a RESPONSE was expected",
			     engram_wire_type_name(h.type));
			return -1;
		}
		if (engram_wire_resp_decode(c->buf, ENGRAM_WIRE_RESPONSE_BYTES, &c->neg, true,
					    r, why, sizeof(why))) {
			fail("RESPONSE refused by the codec: %s", why);
			return -1;
		}
		return 0;
	}
	fail("too many CATALOGs in a row");
	return -1;
}

static int check_row(uint32_t row, const uint8_t *got)
{
	uint8_t want[ENGRAM_ROW_BYTES];

	if (pread(filefd, want, 256, o.woff + (uint64_t)row * 256) != 256 ||
	    pread(filefd, want + 256, 8, o.soff + (uint64_t)row * 8) != 8) {
		fail("pread of row %u: %s", row, strerror(errno));
		return -1;
	}
	if (memcmp(want, got, ENGRAM_ROW_BYTES)) {
		fail("row %u differs from the file", row);
		return -1;
	}
	return 0;
}

/*
 * Send @nreq valid requests of @nrows random rows back to back, read every
 * answer, then check them (checking while the server still sends would make
 * a slow reader of us).  Return: 0 when all were exact.
 */
static int good_requests(struct conn *c, unsigned int nreq, uint32_t nrows)
{
	struct engram_wire_req req;
	struct engram_wire_resp r;
	uint32_t *rows[16];
	uint64_t first = c->ticket;
	size_t size = engram_wire_request_size(nrows, 3);
	size_t rbytes = (size_t)nrows * ENGRAM_ROW_BYTES;
	uint8_t *out = malloc(size), *got = malloc(rbytes * (nreq ? nreq : 1));
	unsigned int k;
	uint32_t i;
	int ret = 0;

	if (!out || !got || nreq > 16) {
		free(out);
		free(got);
		return -1;
	}
	for (k = 0; k < nreq; k++) {
		rows[k] = malloc(nrows * sizeof(uint32_t));
		for (i = 0; i < nrows; i++)
			rows[k][i] = (i && rnd() % 8 == 0) ? rows[k][i - 1] : rnd() % c->rows;
		if (k == 0)
			rows[k][nrows - 1] = c->rows - 1;
		memset(&req, 0, sizeof(req));
		req.ticket = c->ticket++;
		memcpy(req.digest, c->digest, sizeof(req.digest));
		req.generation = c->generation;
		req.nr_rows = nrows;
		/* TCP packs the rows whatever the stride; ranges only count. */
		req.stride = 512;
		req.nr_ranges = 1;
		req.ranges[0].length = (uint64_t)nrows * 512;
		int len = engram_wire_req_build(out, size, &c->neg, &req, rows[k], NULL);

		if (len < 0 || send_all(c->fd, out, len)) {
			fail("sending request %u", k);
			ret = -1;
			nreq = k;
			break;
		}
	}
	for (k = 0; k < nreq; k++) {
		if (read_response(c, &r)) {
			fail("no response %u", k);
			ret = -1;
			break;
		}
		if (r.ticket != first + k || r.status != ENGRAM_WIRE_OK ||
		    r.bytes != (uint64_t)nrows * ENGRAM_ROW_BYTES) {
			fail("response %u: ticket %llu status %s bytes %llu", k,
			     (unsigned long long)r.ticket, engram_wire_status_name(r.status),
			     (unsigned long long)r.bytes);
			ret = -1;
			break;
		}
		if (recv_all(c->fd, got + k * rbytes, rbytes)) {
			fail("rows of response %u cut short", k);
			ret = -1;
			break;
		}
		expect[C_LOOKUPS]++;
	}
	for (k = 0; k < nreq && !ret; k++)
		for (i = 0; i < nrows && !ret; i++)
			ret = check_row(rows[k][i], got + k * rbytes + (size_t)i * ENGRAM_ROW_BYTES);
	for (k = 0; k < nreq; k++)
		free(rows[k]);
	free(out);
	free(got);
	return ret;
}

/* A header-only frame each way: HEARTBEAT echoed, CATALOG_REQUEST answered. */
static int simple_frames(struct conn *c)
{
	struct engram_wire_hdr_info h;
	uint8_t b[16];
	uint64_t t = c->ticket++;

	if (engram_wire_simple_encode(b, sizeof(b), &c->neg, ENGRAM_WIRE_HEARTBEAT, t) < 0 ||
	    send_all(c->fd, b, 16))
		return -1;
	do {
		if (read_frame(c, &h))
			return -1;
	} while (h.type == ENGRAM_WIRE_CATALOG && !h.ticket);
	if (h.type != ENGRAM_WIRE_HEARTBEAT || h.ticket != t) {
		fail("heartbeat %llu answered with %s %llu", (unsigned long long)t,
		     engram_wire_type_name(h.type), (unsigned long long)h.ticket);
		return -1;
	}
	t = c->ticket++;
	if (engram_wire_simple_encode(b, sizeof(b), &c->neg, ENGRAM_WIRE_CATALOG_REQUEST,
				      t) < 0 || send_all(c->fd, b, 16))
		return -1;
	do {
		if (read_frame(c, &h))
			return -1;
	} while (h.type == ENGRAM_WIRE_CATALOG && !h.ticket);
	if (h.type != ENGRAM_WIRE_CATALOG || h.ticket != t) {
		fail("catalog request %llu answered with %s %llu", (unsigned long long)t,
		     engram_wire_type_name(h.type), (unsigned long long)h.ticket);
		return -1;
	}
	catalog_take(c, &h);
	return 0;
}

static int mode_good(void)
{
	struct conn c;
	uint32_t batch = o.count < 4096 ? o.count : 4096;
	unsigned int done = 0;

	if (conn_open(&c))
		return 1;
	expect[C_ACCEPTED]++;
	if (simple_frames(&c))
		fail("heartbeat or catalog request");
	while (!failures && done < o.count) {
		uint32_t n = o.count - done < batch ? o.count - done : batch;

		if (good_requests(&c, 4, n))
			break;
		done += 4 * n;
	}
	/* One of the largest: the negotiated limit. */
	if (!failures && o.count >= 4096 && good_requests(&c, 1, c.neg.max_rows))
		fail("a request of max_rows rows");
	conn_close(&c);
	printf("# good: %u rows checked in batches of %u, exact: %s\n", done, batch,
	       failures ? "no" : "yes");
	return 0;
}

static int mode_hold(void)
{
	static struct conn cs[MAX_CONNS];
	uint64_t end;
	unsigned int i, n = o.n < MAX_CONNS ? o.n : MAX_CONNS, open = 0;

	for (i = 0; i < n; i++)
		if (!conn_open(&cs[i]))
			open++;
	printf("# hold: %u of %u connections set up\n", open, n);
	fflush(stdout);
	end = now_ms() + o.hold_ms;
	/* Until the time is up or every connection was closed by the server. */
	while (open && now_ms() < end) {
		for (i = 0; i < n; i++) {
			uint8_t b[4096];
			ssize_t r;

			if (cs[i].fd < 0)
				continue;
			r = recv(cs[i].fd, b, sizeof(b), MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN)) {
				conn_close(&cs[i]);
				open--;
			}
		}
		sleep_ms(50);
	}
	printf("# hold: %u still open at the end\n", open);
	for (i = 0; i < n; i++)
		conn_close(&cs[i]);
	return 0;
}

/* Garbage as the first bytes: closed without an answer. */
static int mode_garbage(void)
{
	uint8_t b[256];
	unsigned int k, i, len;

	for (k = 0; k < o.n; k++) {
		int fd = tcp_connect();

		if (fd < 0)
			return 1;
		len = 16 + rnd() % 200;
		for (i = 0; i < len; i++)
			b[i] = rnd();
		if (k % 4 == 0) {
			b[0] = 1;		/* right version: something else is wrong */
			b[1] = 2 + rnd() % 250;	/* anything but HELLO */
			expect[C_MALFORMED]++;
		} else {
			if (b[0] == 1)
				b[0] = 0;
			expect[C_BAD_VERSION]++;
		}
		expect[C_REJECTED]++;
		send_all(fd, b, len);
		shutdown(fd, SHUT_WR);
		closed_without_answer(fd, "garbage");
		close(fd);
	}
	return 0;
}

/*
 * A frame with a bad header after the hello: answered with @status and the
 * header's ticket, then closed.
 */
static void bad_header(uint8_t version, uint8_t type, uint16_t flags, uint32_t length,
		       uint64_t ticket, int status, const char *what)
{
	struct engram_wire_resp r;
	struct conn c;
	uint8_t b[128];

	if (conn_open(&c))
		return;
	expect[C_ACCEPTED]++;
	expect[status == ENGRAM_WIRE_BAD_VERSION ? C_BAD_VERSION : C_MALFORMED]++;
	memset(b, 0, sizeof(b));
	hdr(b, version, type, flags, length, ticket);
	/*
	 * The header alone: bytes the server never reads would make its
	 * close a reset, which may overtake the refusal.
	 */
	send_all(c.fd, b, 16);
	if (read_response(&c, &r))
		fail("%s: no refusal", what);
	else if (r.status != status || r.ticket != ticket || r.bytes)
		fail("%s: answered %s ticket %llu, expected %s ticket %llu", what,
		     engram_wire_status_name(r.status), (unsigned long long)r.ticket,
		     engram_wire_status_name(status), (unsigned long long)ticket);
	else
		closed_without_answer(c.fd, what);
	conn_close(&c);
}

static int mode_hdr(void)
{
	/* What conn_open() offers, below the server's offer: the negotiated limit. */
	const uint32_t max = engram_wire_request_size(65536, 16);
	unsigned int k;

	for (k = 0; k < o.n && !failures; k++) {
		uint64_t t = 1 + rnd();

		switch (k % 16) {
		case 0: bad_header(0, ENGRAM_WIRE_REQUEST, 0, 100, t, ENGRAM_WIRE_BAD_VERSION, "version 0"); break;
		case 1: bad_header(2, ENGRAM_WIRE_REQUEST, 0, 100, t, ENGRAM_WIRE_BAD_VERSION, "version 2"); break;
		case 2: bad_header(255, ENGRAM_WIRE_HEARTBEAT, 0, 16, t, ENGRAM_WIRE_BAD_VERSION, "version 255"); break;
		case 3: bad_header(1, ENGRAM_WIRE_REQUEST, 1 + rnd() % 0xfffe, 100, t, ENGRAM_WIRE_MALFORMED, "flags"); break;
		case 4: bad_header(1, 0, 0, 16, t, ENGRAM_WIRE_MALFORMED, "type 0"); break;
		case 5: bad_header(1, 7 + rnd() % 249, 0, 16, t, ENGRAM_WIRE_MALFORMED, "unknown type"); break;
		case 6: bad_header(1, ENGRAM_WIRE_RESPONSE, 0, 32, t, ENGRAM_WIRE_MALFORMED, "RESPONSE to the server"); break;
		case 7: bad_header(1, ENGRAM_WIRE_CATALOG, 0, 24, t, ENGRAM_WIRE_MALFORMED, "CATALOG to the server"); break;
		case 8: bad_header(1, ENGRAM_WIRE_HELLO, 0, 64, 0, ENGRAM_WIRE_MALFORMED, "second HELLO"); break;
		case 9: bad_header(1, ENGRAM_WIRE_REQUEST, 0, 16 + rnd() % 60, t, ENGRAM_WIRE_MALFORMED, "request shorter than the minimum"); break;
		case 10: bad_header(1, ENGRAM_WIRE_REQUEST, 0, max + 1 + rnd() % 1000, t, ENGRAM_WIRE_MALFORMED, "request over max_request_bytes"); break;
		case 11: bad_header(1, ENGRAM_WIRE_REQUEST, 0, 0xffffffff, t, ENGRAM_WIRE_MALFORMED, "request of 4 GiB"); break;
		case 12: bad_header(1, ENGRAM_WIRE_CATALOG_REQUEST, 0, 17 + rnd() % 1000, t, ENGRAM_WIRE_MALFORMED, "long CATALOG_REQUEST"); break;
		case 13: bad_header(1, ENGRAM_WIRE_HEARTBEAT, 0, rnd() % 16, t, ENGRAM_WIRE_MALFORMED, "HEARTBEAT shorter than a header"); break;
		case 14: bad_header(1, ENGRAM_WIRE_REQUEST, 0, 100, 0, ENGRAM_WIRE_MALFORMED, "request with ticket 0"); break;
		case 15: bad_header(1, ENGRAM_WIRE_HEARTBEAT, 0, 16, 0, ENGRAM_WIRE_MALFORMED, "heartbeat with ticket 0"); break;
		}
	}
	return 0;
}

/* Part of a HELLO frame, then our side closes: a broken stream before the hello. */
static int mode_trunc_hello(void)
{
	struct engram_wire_params local;
	uint8_t hello[ENGRAM_WIRE_HELLO_FRAME_BYTES];
	unsigned int k, len;

	local_params(&local);
	engram_wire_hello_frame_encode(hello, sizeof(hello), &local);
	for (k = 0; k < o.n; k++) {
		int fd = tcp_connect();

		if (fd < 0)
			return 1;
		len = k % 8 == 0 ? 0 : 1 + rnd() % (sizeof(hello) - 1);
		expect[C_REJECTED]++;
		if (len)
			expect[C_TRANSPORT]++;
		send_all(fd, hello, len);
		shutdown(fd, SHUT_WR);
		closed_without_answer(fd, "truncated hello");
		close(fd);
	}
	return 0;
}

/* Part of a frame after the hello, then our side closes. */
static int mode_trunc(bool body)
{
	uint8_t b[512];
	unsigned int k, len;

	for (k = 0; k < o.n && !failures; k++) {
		struct conn c;

		if (conn_open(&c))
			return 1;
		expect[C_ACCEPTED]++;
		expect[C_TRANSPORT]++;
		memset(b, 0, sizeof(b));
		if (body) {
			/* A valid header of a 76..512-byte request, then part of the body. */
			uint32_t flen = 76 + rnd() % (512 - 76);

			hdr(b, 1, ENGRAM_WIRE_REQUEST, 0, flen, c.ticket++);
			len = 16 + rnd() % (flen - 16);
		} else {
			hdr(b, 1, ENGRAM_WIRE_REQUEST, 0, 100, c.ticket++);
			len = 1 + rnd() % 15;
		}
		send_all(c.fd, b, len);
		shutdown(c.fd, SHUT_WR);
		closed_without_answer(c.fd, body ? "truncated body" : "truncated header");
		conn_close(&c);
	}
	return 0;
}

/* A valid frame that is not a HELLO, first: closed without an answer. */
static int mode_not_hello(void)
{
	uint8_t b[128];
	unsigned int k;

	for (k = 0; k < o.n; k++) {
		int fd = tcp_connect();
		uint8_t type = k % 3 == 0 ? ENGRAM_WIRE_REQUEST :
			       k % 3 == 1 ? ENGRAM_WIRE_CATALOG_REQUEST : ENGRAM_WIRE_HEARTBEAT;

		if (fd < 0)
			return 1;
		memset(b, 0, sizeof(b));
		hdr(b, 1, type, 0, type == ENGRAM_WIRE_REQUEST ? 76 : 16, 1 + k);
		expect[C_MALFORMED]++;
		expect[C_REJECTED]++;
		send_all(fd, b, type == ENGRAM_WIRE_REQUEST ? 76 : 16);
		closed_without_answer(fd, "frame before the hello");
		close(fd);
	}
	return 0;
}

/* A HELLO frame whose header is right and whose hello is not. */
static int mode_bad_hello(void)
{
	struct engram_wire_params local;
	uint8_t b[ENGRAM_WIRE_HELLO_FRAME_BYTES];
	unsigned int k;

	local_params(&local);
	for (k = 0; k < o.n; k++) {
		uint8_t *h = b + 16;
		int fd = tcp_connect();

		if (fd < 0)
			return 1;
		engram_wire_hello_frame_encode(b, sizeof(b), &local);
		switch (k % 10) {
		case 0: put32(h, 0x12345678); break;		/* magic */
		case 1: put16(h + 4, 0); break;			/* version_min 0 */
		case 2: put16(h + 4, 2); put16(h + 6, 1); break;	/* min > max */
		case 3:	/* no common version: only newer ones than the server speaks */
			put16(h + 4, ENGRAM_WIRE_VERSION + 1);
			put16(h + 6, ENGRAM_WIRE_VERSION + 2);
			break;
		case 4: put32(h + 8, 75); break;		/* max_request_bytes */
		case 5: put32(h + 12, 0); break;		/* max_rows */
		case 6: put16(h + 16, 0); break;		/* max_inflight */
		case 7: put16(h + 18, 17); break;		/* max_ranges */
		case 8: put32(h + 20, 1); break;		/* flags */
		case 9: h[24 + rnd() % 24] = 1 + rnd() % 255; break;	/* reserved */
		}
		expect[C_REJECTED]++;
		send_all(fd, b, sizeof(b));
		closed_without_answer(fd, "bad hello");
		close(fd);
	}
	return 0;
}

/* A request laid out by hand; -1 fields mean "as it should be". */
struct raw {
	uint8_t digest[8];
	uint64_t gen;
	int64_t nr_rows, nr_ranges, length;
	uint32_t stride;
	uint16_t res0;
	uint32_t res1;
	unsigned int nrng, nidx;
	struct { uint64_t addr; uint32_t res; uint64_t len; } rng[17];
	uint32_t idx[8];
};

static size_t raw_put(uint8_t *b, const struct raw *q, uint64_t ticket)
{
	size_t len = 48 + 24 * q->nrng + 4 * q->nidx;
	unsigned int i;

	memset(b, 0, len);
	hdr(b, 1, ENGRAM_WIRE_REQUEST, 0, q->length >= 0 ? q->length : (int64_t)len, ticket);
	memcpy(b + 16, q->digest, 8);
	put64(b + 24, q->gen);
	put32(b + 32, q->nr_rows >= 0 ? q->nr_rows : q->nidx);
	put32(b + 36, q->stride);
	put16(b + 40, q->nr_ranges >= 0 ? q->nr_ranges : q->nrng);
	put16(b + 42, q->res0);
	put32(b + 44, q->res1);
	for (i = 0; i < q->nrng; i++) {
		put64(b + 48 + 24 * i, q->rng[i].addr);
		put32(b + 48 + 24 * i + 8, 0x1234);
		put32(b + 48 + 24 * i + 12, q->rng[i].res);
		put64(b + 48 + 24 * i + 16, q->rng[i].len);
	}
	for (i = 0; i < q->nidx; i++)
		put32(b + 48 + 24 * q->nrng + 4 * i, q->idx[i]);
	return len;
}

/* Refused requests on one connection, which must stay usable. */
static int mode_req(void)
{
	static const int counter_of[] = {
		[ENGRAM_WIRE_MALFORMED] = C_MALFORMED,
		[ENGRAM_WIRE_UNKNOWN_TABLE] = C_UNKNOWN_TABLE,
		[ENGRAM_WIRE_ROW_OUT_OF_RANGE] = C_ROW_RANGE,
		[ENGRAM_WIRE_TOO_MANY_ROWS] = C_TOO_MANY_ROWS,
		[ENGRAM_WIRE_TOO_MANY_RANGES] = C_TOO_MANY_RANGES,
		[ENGRAM_WIRE_DEST_TOO_SMALL] = C_DEST_SMALL,
	};
	struct engram_wire_resp r;
	struct conn c;
	uint8_t b[1024];
	unsigned int k;

	if (conn_open(&c))
		return 1;
	expect[C_ACCEPTED]++;
	for (k = 0; k < o.n && !failures; k++) {
		struct raw q = { .gen = c.generation, .nr_rows = -1, .nr_ranges = -1,
				 .length = -1, .stride = 264, .nrng = 1, .nidx = 2 };
		int status = ENGRAM_WIRE_MALFORMED;
		uint32_t bad = 0;
		uint64_t t;
		size_t len;

		memcpy(q.digest, c.digest, 8);
		q.rng[0].len = 264 * 2;
		q.idx[0] = rnd() % c.rows;
		q.idx[1] = rnd() % c.rows;
		switch (k % 17) {
		case 0: q.res0 = 1 + rnd() % 0xfffe; break;
		case 1: q.res1 = 1 + rnd(); break;
		case 2: q.nr_rows = 0; break;
		case 3: q.nr_ranges = 0; break;
		case 4: q.nr_ranges = 17 + rnd() % 100; status = ENGRAM_WIRE_TOO_MANY_RANGES; break;
		case 5: q.nr_rows = 65537 + rnd() % 100000; status = ENGRAM_WIRE_TOO_MANY_ROWS; break;
		case 6: q.nr_rows = 3; break;				/* length mismatch */
		case 7: q.stride = rnd() % 264; break;
		case 8: q.rng[0].res = 1; break;
		case 9: q.nrng = 2; q.rng[1] = q.rng[0]; q.rng[0].len = 0; break;
		case 10: q.rng[0].addr = UINT64_MAX - rnd() % 500; break;	/* wraps */
		case 11: q.nrng = 2; q.rng[0].len = 300; q.rng[1].len = 600; break;	/* straddles */
		case 12: q.rng[0].len = 264 + rnd() % 264; status = ENGRAM_WIRE_DEST_TOO_SMALL; break;
		case 13: q.digest[rnd() % 8] ^= 1 + rnd() % 255; status = ENGRAM_WIRE_UNKNOWN_TABLE; break;
		case 14: q.gen ^= 1 + rnd(); status = ENGRAM_WIRE_UNKNOWN_TABLE; break;
		case 15: case 16:
			q.nidx = 8;
			q.rng[0].len = 264 * 8;
			for (unsigned int i = 0; i < 8; i++)
				q.idx[i] = rnd() % c.rows;
			bad = rnd() % 8;
			q.idx[bad] = k % 17 == 15 ? c.rows + rnd() % 1000 : 0xffffffff;
			status = ENGRAM_WIRE_ROW_OUT_OF_RANGE;
			break;
		}
		t = c.ticket++;
		len = raw_put(b, &q, t);
		expect[counter_of[status]]++;
		if (send_all(c.fd, b, len) || read_response(&c, &r)) {
			fail("request case %u: connection lost", k % 17);
			break;
		}
		if (r.ticket != t || r.status != status || r.bytes ||
		    r.bad_index != (status == ENGRAM_WIRE_ROW_OUT_OF_RANGE ? bad : 0))
			fail("request case %u: ticket %llu %s bad_index %u, expected %llu %s %u",
			     k % 17, (unsigned long long)r.ticket,
			     engram_wire_status_name(r.status), r.bad_index,
			     (unsigned long long)t, engram_wire_status_name(status), bad);
		/* The connection still serves exact rows. */
		if (k % 200 == 199 && good_requests(&c, 2, 1 + rnd() % 300))
			fail("a good request after %u refusals", k + 1);
	}
	if (!failures && good_requests(&c, 1, 1000))
		fail("a good request at the end");
	conn_close(&c);
	return 0;
}

/*
 * Stalled peers: before the hello (nothing, or part of it), in a header,
 * in a body, and trickling one byte at a time.  Each must be dropped at
 * its timeout, not before; all are open at once.
 */
static int mode_slow(void)
{
	static struct { int fd; uint64_t t0; bool trickle; uint8_t b[128]; unsigned int sent, len; } s[MAX_CONNS];
	struct engram_wire_params local;
	unsigned int k, n = o.n < MAX_CONNS ? o.n : MAX_CONNS, open = 0;
	uint64_t end, early = 0;

	local_params(&local);
	for (k = 0; k < n; k++) {
		struct conn c;

		s[k].trickle = false;
		switch (k % 5) {
		case 0:	/* nothing at all, or part of the hello */
			s[k].fd = tcp_connect();
			if (s[k].fd < 0)
				return 1;
			engram_wire_hello_frame_encode(s[k].b, sizeof(s[k].b), &local);
			send_all(s[k].fd, s[k].b, rnd() % 64);
			expect[C_REJECTED]++;
			expect[C_HELLO_TIMEOUTS]++;
			break;
		default:
			if (conn_open(&c))
				return 1;
			s[k].fd = c.fd;
			free(c.buf);
			expect[C_ACCEPTED]++;
			hdr(s[k].b, 1, ENGRAM_WIRE_REQUEST, 0, 100, 1 + k);
			s[k].len = 100;
			expect[C_FRAME_TIMEOUTS]++;
			if (k % 5 == 1) {
				send_all(s[k].fd, s[k].b, 1 + rnd() % 15);
			} else if (k % 5 == 2) {
				send_all(s[k].fd, s[k].b, 16 + rnd() % 84);
			} else {
				s[k].trickle = true;
				s[k].sent = 0;
			}
			break;
		}
		expect[C_TIMEOUTS]++;
		s[k].t0 = now_ms();
		open++;
	}
	/* Every stalled peer goes within its timeout and some slack. */
	end = now_ms() + 4 * o.frame_ms + o.wait_ms;
	while (open && now_ms() < end) {
		for (k = 0; k < n; k++) {
			uint8_t b[64];
			ssize_t r;

			if (s[k].fd < 0)
				continue;
			if (s[k].trickle && s[k].sent < s[k].len) {
				send(s[k].fd, s[k].b + s[k].sent, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
				s[k].sent++;
			}
			r = recv(s[k].fd, b, sizeof(b), MSG_DONTWAIT);
			if (r > 0) {
				fail("stalled peer %u got an answer", k);
			} else if (r == 0 || errno != EAGAIN) {
				/* A frame gets frame_ms from its first byte (the hello: from accept). */
				if (now_ms() - s[k].t0 + 50 < o.frame_ms)
					early++;
				close(s[k].fd);
				s[k].fd = -1;
				open--;
			}
		}
		sleep_ms(o.frame_ms / 10 ? o.frame_ms / 10 : 1);
	}
	if (open)
		fail("%u stalled peers still connected", open);
	if (early)
		fail("%llu stalled peers dropped before their timeout", (unsigned long long)early);
	for (k = 0; k < n; k++)
		if (s[k].fd >= 0)
			close(s[k].fd);
	printf("# slow: %u stalled peers dropped\n", n - open);
	return 0;
}

/*
 * Silent peers: the hello done, then nothing at all, not even a heartbeat.
 * Each must be closed at the server's idle timeout (--idle-ms), not before
 * and not much after, with nothing but pushed CATALOGs sent to it.
 */
static int mode_idle(void)
{
	static struct { int fd; uint64_t t0; } s[MAX_CONNS];
	unsigned int k, n = o.n < MAX_CONNS ? o.n : MAX_CONNS, open = 0;
	uint64_t end, t, lo = UINT64_MAX, hi = 0, early = 0;

	for (k = 0; k < n; k++) {
		struct conn c;

		if (conn_open(&c))
			return 1;
		s[k].fd = c.fd;
		s[k].t0 = now_ms();
		free(c.buf);
		expect[C_ACCEPTED]++;
		expect[C_IDLE_CLOSES]++;
		open++;
	}
	end = now_ms() + o.idle_ms + o.wait_ms;
	while (open && now_ms() < end) {
		for (k = 0; k < n; k++) {
			uint8_t b[4096];
			ssize_t r;

			if (s[k].fd < 0)
				continue;
			r = recv(s[k].fd, b, sizeof(b), MSG_DONTWAIT);
			if (r > 0 || (r < 0 && errno == EAGAIN))
				continue;	/* a pushed CATALOG, or nothing yet */
			t = now_ms() - s[k].t0;
			/* The server's clock starts a little before ours. */
			if (t + 200 < o.idle_ms)
				early++;
			lo = t < lo ? t : lo;
			hi = t > hi ? t : hi;
			close(s[k].fd);
			s[k].fd = -1;
			open--;
		}
		sleep_ms(20);
	}
	if (open)
		fail("%u silent peers still connected %u ms after the idle time", open, o.wait_ms);
	if (early)
		fail("%llu silent peers closed before the idle time", (unsigned long long)early);
	for (k = 0; k < n; k++)
		if (s[k].fd >= 0)
			close(s[k].fd);
	printf("# idle: %u silent peers closed after %llu-%llu ms (idle time %u ms)\n",
	       n - open, (unsigned long long)(n - open ? lo : 0), (unsigned long long)hi,
	       o.idle_ms);
	return 0;
}

/* More connections than the listener takes: the extra ones are closed at once. */
static int mode_flood(void)
{
	static struct conn cs[MAX_CONNS];
	unsigned int i, extra = o.n, held = 0;

	if (o.max_conns + extra > MAX_CONNS)
		return 1;
	for (i = 0; i < o.max_conns; i++) {
		if (conn_open(&cs[i]))
			break;
		held++;
		expect[C_ACCEPTED]++;
	}
	for (i = 0; i < extra; i++) {
		int fd = tcp_connect();

		if (fd < 0)
			break;
		expect[C_REJECTED]++;
		closed_without_answer(fd, "connection over the limit");
		close(fd);
	}
	/* The held ones still work. */
	if (held && good_requests(&cs[0], 1, 100))
		fail("a good request on a held connection");
	if (held && good_requests(&cs[held - 1], 1, 100))
		fail("a good request on the last held connection");
	for (i = 0; i < held; i++)
		conn_close(&cs[i]);
	printf("# flood: %u held, %u over the limit closed\n", held, extra);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: tcp_bad --addr IP [--port P] [--n N] [--table NAME --file F\n"
		"               --weight-offset W --scale-offset S] [--count ROWS]\n"
		"               [--wait-ms MS] [--frame-ms MS] [--max-conns N] [--hold-ms MS]\n"
		"               [--idle-ms MS] [--seed N] MODE\n"
		"modes: good hold garbage hdr trunc-hello trunc-hdr trunc-body not-hello\n"
		"       bad-hello req slow flood idle\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "addr", 1, NULL, 'a' }, { "port", 1, NULL, 'p' }, { "n", 1, NULL, 'n' },
		{ "table", 1, NULL, 't' }, { "file", 1, NULL, 'f' },
		{ "weight-offset", 1, NULL, 'W' }, { "scale-offset", 1, NULL, 'S' },
		{ "count", 1, NULL, 'c' }, { "wait-ms", 1, NULL, 'w' },
		{ "frame-ms", 1, NULL, 'F' }, { "max-conns", 1, NULL, 'm' },
		{ "hold-ms", 1, NULL, 'h' }, { "seed", 1, NULL, 's' },
		{ "idle-ms", 1, NULL, 'I' }, { NULL, 0, NULL, 0 },
	};
	const char *mode;
	int c, ret;
	unsigned int i;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a': o.addr = optarg; break;
		case 'p': o.port = optarg; break;
		case 'n': o.n = strtoul(optarg, NULL, 0); break;
		case 't': o.table = optarg; break;
		case 'f': o.file = optarg; break;
		case 'W': o.woff = strtoull(optarg, NULL, 0); break;
		case 'S': o.soff = strtoull(optarg, NULL, 0); break;
		case 'c': o.count = strtoul(optarg, NULL, 0); break;
		case 'w': o.wait_ms = strtoul(optarg, NULL, 0); break;
		case 'F': o.frame_ms = strtoul(optarg, NULL, 0); break;
		case 'm': o.max_conns = strtoul(optarg, NULL, 0); break;
		case 'h': o.hold_ms = strtoul(optarg, NULL, 0); break;
		case 's': o.seed = strtoul(optarg, NULL, 0); break;
		case 'I': o.idle_ms = strtoul(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (optind != argc - 1 || !o.addr)
		usage();
	mode = argv[optind];
	if (o.file) {
		filefd = open(o.file, O_RDONLY);
		if (filefd < 0) {
			perror(o.file);
			return 2;
		}
	}
	if (!strcmp(mode, "good") || !strcmp(mode, "req") || !strcmp(mode, "flood")) {
		if (!o.table || filefd < 0 || !o.woff || !o.soff)
			usage();
	}
	if (!strcmp(mode, "good"))
		ret = mode_good();
	else if (!strcmp(mode, "hold"))
		ret = mode_hold();
	else if (!strcmp(mode, "garbage"))
		ret = mode_garbage();
	else if (!strcmp(mode, "hdr"))
		ret = mode_hdr();
	else if (!strcmp(mode, "trunc-hello"))
		ret = mode_trunc_hello();
	else if (!strcmp(mode, "trunc-hdr"))
		ret = mode_trunc(false);
	else if (!strcmp(mode, "trunc-body"))
		ret = mode_trunc(true);
	else if (!strcmp(mode, "not-hello"))
		ret = mode_not_hello();
	else if (!strcmp(mode, "bad-hello"))
		ret = mode_bad_hello();
	else if (!strcmp(mode, "req"))
		ret = mode_req();
	else if (!strcmp(mode, "slow"))
		ret = mode_slow();
	else if (!strcmp(mode, "flood"))
		ret = mode_flood();
	else if (!strcmp(mode, "idle"))
		ret = mode_idle();
	else
		usage();
	for (i = 0; i < C_MAX; i++)
		if (expect[i])
			printf("expect %s %llu\n", counter_names[i], (unsigned long long)expect[i]);
	if (failures)
		printf("# %d failures\n", failures);
	return ret || failures ? 1 : 0;
}
