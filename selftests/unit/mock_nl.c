// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel stand-in for the engramctl command tests: implements the nl.h
 * transport in-process.  Requests are real libnl messages, parsed here the
 * way the module would; replies are real messages built with the attributes
 * the uapi header documents, handed to the command's callback.  Jobs
 * advance by a quarter of the file per TABLE_GET.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include "mock_nl.h"
#include "nl.h"
#include "prefix.h"
#include "url.h"

#define MOCK_FAMILY	0x42

struct mock mock;

void mock_reset(void)
{
	memset(&mock, 0, sizeof(mock));
	mock.next_gen = 1;
	mock.next_link_id = 1;
	mock.verify_outcome = ENGRAM_VERIFY_OK;
}

#define ARRAY_LEN(a)	(sizeof(a) / sizeof((a)[0]))

struct mock_listen *mock_add_listen(const char *url, uint8_t state)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(mock.l); i++) {
		if (mock.l[i].used)
			continue;
		memset(&mock.l[i], 0, sizeof(mock.l[i]));
		mock.l[i].used = 1;
		snprintf(mock.l[i].url, sizeof(mock.l[i].url), "%s", url);
		mock.l[i].state = state;
		return &mock.l[i];
	}
	return NULL;
}

struct mock_link *mock_add_link(const char *url, uint8_t state)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(mock.k); i++) {
		if (mock.k[i].used)
			continue;
		memset(&mock.k[i], 0, sizeof(mock.k[i]));
		mock.k[i].used = 1;
		mock.k[i].id = mock.next_link_id++;
		snprintf(mock.k[i].url, sizeof(mock.k[i].url), "%s", url);
		mock.k[i].state = state;
		mock.k[i].since_ns = 1500000000ULL;
		return &mock.k[i];
	}
	return NULL;
}

static struct mock_link *mock_find_link(uint32_t id)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(mock.k); i++)
		if (mock.k[i].used && mock.k[i].id == id)
			return &mock.k[i];
	return NULL;
}

static struct mock_table *mock_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(mock.t) / sizeof(mock.t[0]); i++)
		if (mock.t[i].used && !strcmp(mock.t[i].name, name))
			return &mock.t[i];
	return NULL;
}

struct mock_table *mock_find_table(const char *name)
{
	return mock_find(name);
}

int mock_find_name_ok(const char *name)
{
	return !!mock_find(name);
}

struct mock_table *mock_add(const char *name, uint8_t state, uint64_t rows)
{
	struct mock_table *t = mock_find(name);
	size_t i;

	for (i = 0; !t && i < sizeof(mock.t) / sizeof(mock.t[0]); i++)
		if (!mock.t[i].used)
			t = &mock.t[i];
	memset(t, 0, sizeof(*t));
	t->used = 1;
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->path, sizeof(t->path), "/models/%s.safetensors", name);
	t->state = state;
	t->rows = rows;
	t->gen = mock.next_gen++;
	t->file_bytes = rows * ENGRAM_ROW_BYTES + 4096;
	t->done = state == ENGRAM_TABLE_READY ? t->file_bytes : 0;
	memset(t->sha256, 0x5a, sizeof(t->sha256));
	return t;
}

int enl_open(struct enl *nl)
{
	memset(nl, 0, sizeof(*nl));
	nl->bad_attr = -1;
	nl->miss_attr = -1;
	return mock.no_module ? -ENOENT : 0;
}

void enl_close(struct enl *nl)
{
	(void)nl;
}

struct nl_msg *enl_msg(struct enl *nl, uint8_t cmd, int flags)
{
	struct nl_msg *msg = nlmsg_alloc();

	(void)nl;
	genlmsg_put(msg, 0, 0, MOCK_FAMILY, 0, flags, cmd, ENGRAM_GENL_VERSION);
	return msg;
}

static void mock_log(const char *what)
{
	strncat(mock.log, what, sizeof(mock.log) - strlen(mock.log) - 1);
	strncat(mock.log, " ", sizeof(mock.log) - strlen(mock.log) - 1);
}

static int reply_table(const struct mock_table *t, enl_reply_cb cb, void *arg)
{
	struct nl_msg *r = enl_msg(NULL, ENGRAM_CMD_TABLE_GET, 0);
	int ret;

	nla_put_string(r, ENGRAM_A_TABLE_NAME, t->name);
	nla_put_string(r, ENGRAM_A_TABLE_PATH, t->path);
	if (t->state != ENGRAM_TABLE_LOADING)
		nla_put(r, ENGRAM_A_TABLE_SHA256, ENGRAM_SHA256_LEN, t->sha256);
	nla_put_u64(r, ENGRAM_A_TABLE_GENERATION, t->gen);
	nla_put_u8(r, ENGRAM_A_TABLE_STATE, t->state);
	nla_put_u64(r, ENGRAM_A_TABLE_ROWS, t->rows);
	nla_put_u32(r, ENGRAM_A_TABLE_WEIGHT_BYTES, ENGRAM_WEIGHT_BYTES);
	nla_put_u32(r, ENGRAM_A_TABLE_SCALE_BYTES, ENGRAM_SCALE_BYTES);
	nla_put_u64(r, ENGRAM_A_TABLE_WEIGHT_OFFSET, t->woff);
	nla_put_u64(r, ENGRAM_A_TABLE_SCALE_OFFSET, t->soff);
	if (t->held_rows) {
		nla_put_u64(r, ENGRAM_A_TABLE_HELD_FIRST, t->held_first);
		nla_put_u64(r, ENGRAM_A_TABLE_HELD_ROWS, t->held_rows);
	}
	nla_put_u64(r, ENGRAM_A_TABLE_FILE_BYTES, t->file_bytes);
	nla_put_u64(r, ENGRAM_A_TABLE_DONE_BYTES, t->done);
	nla_put_u64(r, ENGRAM_A_TABLE_PINNED_BYTES,
		    t->state == ENGRAM_TABLE_FAILED ? 0 : t->done);
	nla_put_u64(r, ENGRAM_A_TABLE_META_BYTES, 4096);
	nla_put_u64(r, ENGRAM_A_TABLE_ELAPSED_NS, 2000000000ULL);
	nla_put_u8(r, ENGRAM_A_TABLE_VERIFY_RESULT, t->verify);
	if (!mock.no_drain)
		nla_put_u32(r, ENGRAM_A_TABLE_INFLIGHT, t->inflight);
	if (t->draining) {
		nla_put_u8(r, ENGRAM_A_TABLE_DRAINING, 1);
		nla_put_u64(r, ENGRAM_A_TABLE_DRAIN_QUIET_NS, t->quiet_ns);
	}
	if (t->state == ENGRAM_TABLE_FAILED) {
		nla_put_u32(r, ENGRAM_A_TABLE_ERROR, t->error);
		nla_put_string(r, ENGRAM_A_TABLE_ERROR_MSG, t->error_msg);
	}
	ret = cb ? cb(r, arg) : 0;
	nlmsg_free(r);
	return ret;
}

static int reply_stats(const char *name, uint64_t gen, uint64_t base, enl_reply_cb cb, void *arg)
{
	struct nl_msg *r = enl_msg(NULL, ENGRAM_CMD_STATS_GET, 0);
	struct nlattr *nest;
	int ret;

	if (name) {
		nla_put_string(r, ENGRAM_A_TABLE_NAME, name);
		nla_put_u64(r, ENGRAM_A_TABLE_GENERATION, gen);
	}
	nest = nla_nest_start(r, ENGRAM_A_STATS);
	if (!name) {
		nla_put_u64(r, ENGRAM_STAT_TABLES, 2);
		nla_put_u64(r, ENGRAM_STAT_LOADS_STARTED, 3);
		nla_put_u64(r, ENGRAM_STAT_LOAD_NS, 1500000007);
	}
	nla_put_u64(r, ENGRAM_STAT_LOOKUPS, base + 10);
	nla_put_u64(r, ENGRAM_STAT_BYTES, (base + 10) * 264);
	nla_put_u64(r, ENGRAM_STAT_MAX + 3, 77);
	if (name) {
		nla_put_u64(r, ENGRAM_STAT_REFUSED_BUSY, base);
		nla_put_u64(r, ENGRAM_STAT_REFUSED_ROW_OUT_OF_RANGE, 2);
		nla_put_u64(r, ENGRAM_STAT_REFUSED_MALFORMED, 0);
	}
	nla_nest_end(r, nest);
	if (name) {
		/* 2 samples under 2 us, 7 in [8, 16) us, 1 at 8 s or more */
		nest = nla_nest_start(r, ENGRAM_A_LATENCY);
		nla_put(r, 0, 0, NULL);		/* a pad */
		nla_put_u64(r, 1, 2);
		nla_put_u64(r, 4, 7);
		nla_put_u64(r, ENGRAM_LAT_BUCKETS, 1);
		nla_put_u64(r, ENGRAM_LAT_BUCKETS + 1, 99);	/* newer kernel */
		nla_nest_end(r, nest);
		nla_put_u64(r, ENGRAM_A_LATENCY_SUM_NS, 8400123456ULL);
	}
	ret = cb(r, arg);
	nlmsg_free(r);
	return ret;
}

static void put_link_stats(struct nl_msg *r, const struct mock_link *k)
{
	struct nlattr *nest;
	int i;

	nest = nla_nest_start(r, ENGRAM_A_STATS);
	nla_put_u64(r, ENGRAM_STAT_FETCHES, k->fetches);
	nla_put_u64(r, ENGRAM_STAT_FETCH_BYTES, k->fetches * 264);
	nla_put_u64(r, ENGRAM_STAT_REFUSED_BUSY, k->refused_busy);
	nla_nest_end(r, nest);
	nest = nla_nest_start(r, ENGRAM_A_LATENCY);
	for (i = 0; i < ENGRAM_LAT_BUCKETS; i++)
		nla_put_u64(r, i + 1, k->lat[i]);
	nla_nest_end(r, nest);
	nla_put_u64(r, ENGRAM_A_LATENCY_SUM_NS, 1000000);
}

/* A link as LINK_GET reports it (@full) or as STATS_GET does. */
static int reply_link(const struct mock_link *k, uint8_t cmd, int full, enl_reply_cb cb,
		      void *arg)
{
	struct nl_msg *r = enl_msg(NULL, cmd, 0);
	int ret;

	nla_put_u32(r, ENGRAM_A_LINK_ID, k->id);
	nla_put_string(r, ENGRAM_A_URL, k->url);
	if (full) {
		nla_put_u8(r, ENGRAM_A_LINK_STATE, k->state);
		nla_put_u32(r, ENGRAM_A_LINK_TABLES, k->tables);
		nla_put_u32(r, ENGRAM_A_LINK_MAX_ROWS, k->max_rows);
		nla_put_u32(r, ENGRAM_A_LINK_MAX_INFLIGHT, k->max_inflight);
		nla_put_u64(r, ENGRAM_A_LINK_CONNECTS, k->connects);
		nla_put_u64(r, ENGRAM_A_LINK_SINCE_NS, k->since_ns);
		if (k->error)
			nla_put_u32(r, ENGRAM_A_LINK_ERROR, k->error);
		if (k->device[0])
			nla_put_string(r, ENGRAM_A_DEVICE, k->device);
	}
	put_link_stats(r, k);
	ret = cb ? cb(r, arg) : 0;
	nlmsg_free(r);
	return ret;
}

/* A link that is up serves every table of the mock, as one host would. */
static int reply_catalog(const struct mock_link *k, const struct mock_table *t,
			 enl_reply_cb cb, void *arg)
{
	struct nl_msg *r = enl_msg(NULL, ENGRAM_CMD_LINK_CATALOG_GET, 0);
	int ret;

	nla_put_u32(r, ENGRAM_A_LINK_ID, k->id);
	nla_put_u8(r, ENGRAM_A_LINK_STATE, k->state);
	nla_put_string(r, ENGRAM_A_TABLE_NAME, t->name);
	nla_put(r, ENGRAM_A_TABLE_SHA256, ENGRAM_SHA256_LEN, t->sha256);
	nla_put_u64(r, ENGRAM_A_TABLE_ROWS, t->rows);
	if (t->woff) {
		/* As a host of protocol version 4 lists it. */
		nla_put_u64(r, ENGRAM_A_TABLE_WEIGHT_OFFSET, t->woff);
		nla_put_u64(r, ENGRAM_A_TABLE_SCALE_OFFSET, t->soff);
	}
	nla_put_u64(r, ENGRAM_A_TABLE_GENERATION, t->gen + k->id);
	/* As a host of protocol version 6 lists a table it drains. */
	nla_put_u8(r, ENGRAM_A_TABLE_STATE, t->draining ? ENGRAM_TABLE_DRAINING : t->state);
	ret = cb ? cb(r, arg) : 0;
	nlmsg_free(r);
	return ret;
}

static int reply_listen(const struct mock_listen *l, enl_reply_cb cb, void *arg)
{
	struct nl_msg *r = enl_msg(NULL, ENGRAM_CMD_LISTEN_GET, 0);
	int ret;

	nla_put_string(r, ENGRAM_A_URL, l->url);
	nla_put_u8(r, ENGRAM_A_LISTEN_STATE, l->state);
	nla_put_u32(r, ENGRAM_A_CONNECTIONS, l->connections);
	if (l->device[0])
		nla_put_string(r, ENGRAM_A_DEVICE, l->device);
	if (l->state == ENGRAM_LISTEN_WAITING && l->error)
		nla_put_u32(r, ENGRAM_A_LINK_ERROR, l->error);
	ret = cb ? cb(r, arg) : 0;
	nlmsg_free(r);
	return ret;
}

/* The URL checks of the kernel's handlers, with their messages. */
static int mock_url(struct enl *nl, struct nlattr **tb, enum engram_url_role role,
		    struct engram_url *u)
{
	const char *s;
	char why[160];

	if (!tb[ENGRAM_A_URL]) {
		snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: missing URL");
		nl->miss_attr = ENGRAM_A_URL;
		return -EINVAL;
	}
	s = nla_get_string(tb[ENGRAM_A_URL]);
	if (!engram_url_parse(s, strlen(s), role, u, why, sizeof(why)))
		return 0;
	snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: bad %s URL",
		 role == ENGRAM_URL_LISTEN ? "listen" : "remote");
	nl->bad_attr = ENGRAM_A_URL;
	return -EINVAL;
}

/* ALLOW_ADD and ALLOW_DEL as the kernel does them, on at most 4 entries. */
static int do_allow(struct enl *nl, struct nlattr **tb, int add)
{
	struct engram_prefix p, q;
	char why[200], text[ENGRAM_PREFIX_TEXT_MAX];
	const char *s;
	unsigned int i;

	if (mock.eperm) {
		snprintf(nl->extack, sizeof(nl->extack),
			 "engram_rdma: changing the allow-list needs CAP_NET_ADMIN");
		return -EPERM;
	}
	if (!tb[ENGRAM_A_ALLOW]) {
		snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: missing ALLOW");
		nl->miss_attr = ENGRAM_A_ALLOW;
		return -EINVAL;
	}
	s = nla_get_string(tb[ENGRAM_A_ALLOW]);
	if (engram_prefix_parse(s, strlen(s), &p, why, sizeof(why))) {
		snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: bad allow-list entry");
		nl->bad_attr = ENGRAM_A_ALLOW;
		return -EINVAL;
	}
	for (i = 0; i < mock.n_allow; i++) {
		engram_prefix_parse(mock.allow[i], strlen(mock.allow[i]), &q, why, sizeof(why));
		if (engram_prefix_equal(&p, &q))
			break;
	}
	nl->bad_attr = ENGRAM_A_ALLOW;
	if (add && i < mock.n_allow) {
		snprintf(nl->extack, sizeof(nl->extack),
			 "engram_rdma: the entry is already on the allow-list");
		return -EEXIST;
	}
	if (!add && i == mock.n_allow) {
		snprintf(nl->extack, sizeof(nl->extack),
			 "engram_rdma: no such entry on the allow-list");
		return -ENOENT;
	}
	if (add && mock.n_allow == ARRAY_LEN(mock.allow)) {
		snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: the allow-list is full");
		return -ENOSPC;
	}
	nl->bad_attr = -1;
	if (add) {
		engram_prefix_format(&p, text, sizeof(text));
		snprintf(mock.allow[mock.n_allow++], sizeof(mock.allow[0]), "%s", text);
		return 0;
	}
	memmove(mock.allow[i], mock.allow[i + 1], (mock.n_allow - i - 1) * sizeof(mock.allow[0]));
	mock.n_allow--;
	return 0;
}

static int reply_allow(unsigned int i, enl_reply_cb cb, void *arg)
{
	struct nl_msg *r = enl_msg(NULL, ENGRAM_CMD_ALLOW_GET, 0);
	int ret;

	nla_put_string(r, ENGRAM_A_ALLOW, mock.allow[i]);
	ret = cb ? cb(r, arg) : 0;
	nlmsg_free(r);
	return ret;
}

static int do_listen(struct enl *nl, struct nlattr **tb, int add)
{
	struct engram_url u, v;
	char why[160];
	size_t i;
	int ret;

	if (mock.eperm) {
		snprintf(nl->extack, sizeof(nl->extack),
			 "engram_rdma: changing listeners needs CAP_NET_ADMIN");
		return -EPERM;
	}
	ret = mock_url(nl, tb, ENGRAM_URL_LISTEN, &u);
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_LEN(mock.l); i++) {
		if (!mock.l[i].used ||
		    engram_url_parse(mock.l[i].url, strlen(mock.l[i].url), ENGRAM_URL_LISTEN, &v,
				     why, sizeof(why)) || !engram_url_equal(&u, &v))
			continue;
		if (add) {
			snprintf(nl->extack, sizeof(nl->extack),
				 "engram_rdma: already listening on that address");
			nl->bad_attr = ENGRAM_A_URL;
			return -EEXIST;
		}
		mock.l[i].used = 0;
		return 0;
	}
	if (!add) {
		snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: no listener on that URL");
		nl->bad_attr = ENGRAM_A_URL;
		return -ENOENT;
	}
	return mock_add_listen(u.text, ENGRAM_LISTEN_ACTIVE) ? 0 : -ENOSPC;
}

static int do_link(struct enl *nl, uint8_t cmd, int dump, struct nlattr **tb, enl_reply_cb cb,
		   void *arg)
{
	struct mock_link *k = NULL;
	struct engram_url u;
	size_t i;
	int ret = 0;

	if (tb[ENGRAM_A_LINK_ID]) {
		mock.last_link_id = nla_get_u32(tb[ENGRAM_A_LINK_ID]);
		k = mock_find_link(mock.last_link_id);
	}
	if ((cmd == ENGRAM_CMD_LINK_ADD || cmd == ENGRAM_CMD_LINK_DEL) && mock.eperm) {
		snprintf(nl->extack, sizeof(nl->extack),
			 "engram_rdma: changing links needs CAP_NET_ADMIN");
		return -EPERM;
	}
	if (cmd == ENGRAM_CMD_LINK_ADD) {
		ret = mock_url(nl, tb, ENGRAM_URL_REMOTE, &u);
		if (ret)
			return ret;
		k = mock_add_link(u.text, ENGRAM_LINK_CONNECTING);
		if (!k)
			return -ENOSPC;
		if (mock.link_reply_empty)
			return 0;
		return reply_link(k, cmd, 1, cb, arg);
	}
	if (dump) {
		for (i = 0; !ret && i < ARRAY_LEN(mock.k); i++)
			if (mock.k[i].used)
				ret = reply_link(&mock.k[i], cmd, cmd == ENGRAM_CMD_LINK_GET, cb, arg);
		return ret;
	}
	if (!tb[ENGRAM_A_LINK_ID]) {
		snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: missing LINK_ID");
		nl->miss_attr = ENGRAM_A_LINK_ID;
		return -EINVAL;
	}
	if (!k) {
		snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: no link with that id");
		nl->bad_attr = ENGRAM_A_LINK_ID;
		return -ENOENT;
	}
	if (cmd == ENGRAM_CMD_LINK_DEL) {
		k->used = 0;
		return 0;
	}
	return reply_link(k, cmd, cmd == ENGRAM_CMD_LINK_GET, cb, arg);
}

/* One TABLE_GET's worth of progress for a running job. */
static void advance(struct mock_table *t)
{
	if (t->state == ENGRAM_TABLE_LOADING) {
		t->done += t->file_bytes / 4 + 1;
		if (t->done >= t->file_bytes) {
			t->done = t->file_bytes;
			if (mock.fail_load) {
				t->state = ENGRAM_TABLE_FAILED;
				t->error = EIO;
				snprintf(t->error_msg, sizeof(t->error_msg),
					 "read error at offset 4096");
			} else {
				t->state = ENGRAM_TABLE_READY;
			}
		}
	} else if (t->state == ENGRAM_TABLE_VERIFYING) {
		t->done += t->file_bytes / 2 + 1;
		if (t->done >= t->file_bytes) {
			t->done = t->file_bytes;
			t->state = ENGRAM_TABLE_READY;
			t->verify = mock.verify_outcome;
		}
	}
}

/* One TABLE_GET's worth of a drain: a request ends, or quiet time passes. */
static void advance_drain(struct mock_table *t)
{
	if (!t->draining)
		return;
	if (t->inflight)
		t->inflight--;
	else
		t->quiet_ns += mock.drain_step_ns;
}

/* TABLE_DRAIN as the kernel does it: one table, or every table not failed. */
static int do_drain(struct enl *nl, struct nlattr **tb, struct mock_table *t)
{
	int on;
	size_t i;

	if (mock.no_drain)
		return -EOPNOTSUPP;
	if (mock.eperm) {
		snprintf(nl->extack, sizeof(nl->extack),
			 "engram_rdma: draining tables needs CAP_NET_ADMIN");
		return -EPERM;
	}
	if (!tb[ENGRAM_A_TABLE_DRAINING]) {
		snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: missing TABLE_DRAINING");
		nl->miss_attr = ENGRAM_A_TABLE_DRAINING;
		return -EINVAL;
	}
	on = nla_get_u8(tb[ENGRAM_A_TABLE_DRAINING]);
	mock.drain_named = !!tb[ENGRAM_A_TABLE_NAME];
	if (tb[ENGRAM_A_TABLE_NAME] && !t) {
		snprintf(nl->extack, sizeof(nl->extack), "engram_rdma: no table named '%s'",
			 nla_get_string(tb[ENGRAM_A_TABLE_NAME]));
		nl->bad_attr = ENGRAM_A_TABLE_NAME;
		return -ENOENT;
	}
	for (i = 0; i < ARRAY_LEN(mock.t); i++) {
		struct mock_table *u = &mock.t[i];

		if (!u->used || (t && u != t) || (!t && u->state == ENGRAM_TABLE_FAILED))
			continue;
		if (on && !u->draining)
			u->quiet_ns = 0;
		u->draining = on;
	}
	return 0;
}

static int do_load(struct enl *nl, struct nlattr **tb, enl_reply_cb cb, void *arg)
{
	struct mock_table *t;
	struct stat sb;
	int fd;

	if (!tb[ENGRAM_A_TABLE_NAME] || !tb[ENGRAM_A_TABLE_FD] || !tb[ENGRAM_A_TABLE_ROWS] ||
	    !tb[ENGRAM_A_TABLE_WEIGHT_OFFSET] || !tb[ENGRAM_A_TABLE_SCALE_OFFSET] ||
	    !tb[ENGRAM_A_TABLE_WEIGHT_BYTES] || !tb[ENGRAM_A_TABLE_SCALE_BYTES])
		return -EINVAL;
	fd = nla_get_u32(tb[ENGRAM_A_TABLE_FD]);
	mock.rows = nla_get_u64(tb[ENGRAM_A_TABLE_ROWS]);
	mock.woff = nla_get_u64(tb[ENGRAM_A_TABLE_WEIGHT_OFFSET]);
	mock.soff = nla_get_u64(tb[ENGRAM_A_TABLE_SCALE_OFFSET]);
	mock.wbytes = nla_get_u32(tb[ENGRAM_A_TABLE_WEIGHT_BYTES]);
	mock.sbytes = nla_get_u32(tb[ENGRAM_A_TABLE_SCALE_BYTES]);
	mock.has_sha = tb[ENGRAM_A_TABLE_SHA256] &&
		       nla_len(tb[ENGRAM_A_TABLE_SHA256]) == ENGRAM_SHA256_LEN;
	if (tb[ENGRAM_A_TABLE_PATH])
		snprintf(mock.path, sizeof(mock.path), "%s",
			 nla_get_string(tb[ENGRAM_A_TABLE_PATH]));
	mock.fd_ok = !fstat(fd, &sb) && S_ISREG(sb.st_mode) &&
		     (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY &&
		     (fcntl(fd, F_GETFD) & FD_CLOEXEC) &&
		     mock.soff + mock.rows * ENGRAM_SCALE_BYTES <= (uint64_t)sb.st_size;
	if (mock.refuse_load) {
		snprintf(nl->extack, sizeof(nl->extack), "rows do not fit the file");
		nl->bad_attr = ENGRAM_A_TABLE_ROWS;
		return -EINVAL;
	}
	t = mock_add(nla_get_string(tb[ENGRAM_A_TABLE_NAME]), ENGRAM_TABLE_LOADING, mock.rows);
	snprintf(t->path, sizeof(t->path), "%s", mock.path);
	/* A load with a digest ends only if the file has it: the table then does. */
	if (mock.has_sha)
		memcpy(t->sha256, nla_data(tb[ENGRAM_A_TABLE_SHA256]), ENGRAM_SHA256_LEN);
	t->woff = mock.woff;
	t->soff = mock.soff;
	t->file_bytes = sb.st_size;
	/* As the module: a table says which rows it holds, all of them unless a shard. */
	t->held_first = tb[ENGRAM_A_TABLE_HELD_FIRST] ?
			nla_get_u64(tb[ENGRAM_A_TABLE_HELD_FIRST]) : 0;
	t->held_rows = tb[ENGRAM_A_TABLE_HELD_ROWS] ?
		       nla_get_u64(tb[ENGRAM_A_TABLE_HELD_ROWS]) : mock.rows;
	return reply_table(t, cb, arg);
}

int enl_request(struct enl *nl, struct nl_msg *msg, enl_reply_cb cb, void *arg)
{
	struct genlmsghdr *gh = genlmsg_hdr(nlmsg_hdr(msg));
	int dump = nlmsg_hdr(msg)->nlmsg_flags & NLM_F_DUMP;
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	struct mock_table *t = NULL;
	int ret = 0;
	size_t i;

	nl->extack[0] = '\0';
	nl->bad_attr = -1;
	nl->miss_attr = -1;
	genlmsg_parse(nlmsg_hdr(msg), 0, tb, ENGRAM_A_MAX, NULL);
	if (tb[ENGRAM_A_TABLE_NAME])
		t = mock_find(nla_get_string(tb[ENGRAM_A_TABLE_NAME]));

	switch (gh->cmd) {
	case ENGRAM_CMD_TABLE_LOAD:
		mock_log("LOAD");
		ret = mock.eperm ? -EPERM : do_load(nl, tb, cb, arg);
		break;
	case ENGRAM_CMD_TABLE_UNLOAD:
		mock_log("UNLOAD");
		if (mock.eperm)
			ret = -EPERM;
		else if (!t)
			ret = -ENOENT;
		else
			t->used = 0;
		break;
	case ENGRAM_CMD_TABLE_VERIFY:
		mock_log("VERIFY");
		if (!t) {
			ret = -ENOENT;
		} else if (t->state != ENGRAM_TABLE_READY) {
			snprintf(nl->extack, sizeof(nl->extack), "table is not ready");
			ret = -EBUSY;
		} else {
			t->state = ENGRAM_TABLE_VERIFYING;
			t->done = 0;
		}
		break;
	case ENGRAM_CMD_TABLE_GET:
		if (dump) {
			mock_log("DUMP");
			if (mock.interrupt_at_dump)
				raise(SIGINT);
			for (i = 0; !ret && i < sizeof(mock.t) / sizeof(mock.t[0]); i++) {
				if (!mock.t[i].used)
					continue;
				advance_drain(&mock.t[i]);
				ret = reply_table(&mock.t[i], cb, arg);
			}
			break;
		}
		mock_log("GET");
		if (++mock.gets == mock.interrupt_at_get)
			raise(SIGINT);
		for (i = 0; mock.gets == mock.undrain_at_get && i < ARRAY_LEN(mock.t); i++)
			mock.t[i].draining = 0;
		if (t && mock.gets == mock.unload_at_get) {
			t->used = 0;
			t = NULL;
		}
		if (t)
			advance_drain(t);
		if (!t) {
			snprintf(nl->extack, sizeof(nl->extack), "no table named '%s'",
				 tb[ENGRAM_A_TABLE_NAME] ? nla_get_string(tb[ENGRAM_A_TABLE_NAME])
							 : "");
			ret = -ENOENT;
			break;
		}
		advance(t);
		ret = reply_table(t, cb, arg);
		break;
	case ENGRAM_CMD_TABLE_DRAIN:
		mock_log(tb[ENGRAM_A_TABLE_DRAINING] && !nla_get_u8(tb[ENGRAM_A_TABLE_DRAINING]) ?
			 "UNDRAIN" : "DRAIN");
		ret = do_drain(nl, tb, t);
		break;
	case ENGRAM_CMD_STATS_GET:
		mock_log(dump ? "STATSDUMP" : "STATS");
		if (!dump && tb[ENGRAM_A_LINK_ID]) {
			ret = do_link(nl, gh->cmd, 0, tb, cb, arg);
			break;
		}
		if (!dump) {
			ret = reply_stats(NULL, 0, 100, cb, arg);
			break;
		}
		for (i = 0; !ret && i < sizeof(mock.t) / sizeof(mock.t[0]); i++)
			if (mock.t[i].used)
				ret = reply_stats(mock.t[i].name, mock.t[i].gen, i, cb, arg);
		if (!ret)
			ret = do_link(nl, gh->cmd, 1, tb, cb, arg);
		break;
	case ENGRAM_CMD_LISTEN_ADD:
	case ENGRAM_CMD_LISTEN_DEL:
		mock_log(gh->cmd == ENGRAM_CMD_LISTEN_ADD ? "LISTENADD" : "LISTENDEL");
		ret = do_listen(nl, tb, gh->cmd == ENGRAM_CMD_LISTEN_ADD);
		break;
	case ENGRAM_CMD_LISTEN_GET:
		mock_log("LISTENDUMP");
		if (!dump) {
			ret = -EOPNOTSUPP;
			break;
		}
		for (i = 0; !ret && i < ARRAY_LEN(mock.l); i++)
			if (mock.l[i].used)
				ret = reply_listen(&mock.l[i], cb, arg);
		break;
	case ENGRAM_CMD_ALLOW_ADD:
	case ENGRAM_CMD_ALLOW_DEL:
		mock_log(gh->cmd == ENGRAM_CMD_ALLOW_ADD ? "ALLOWADD" : "ALLOWDEL");
		ret = do_allow(nl, tb, gh->cmd == ENGRAM_CMD_ALLOW_ADD);
		break;
	case ENGRAM_CMD_ALLOW_GET:
		mock_log("ALLOWDUMP");
		if (!dump) {
			ret = -EOPNOTSUPP;
			break;
		}
		for (i = 0; !ret && i < mock.n_allow; i++)
			ret = reply_allow(i, cb, arg);
		break;
	case ENGRAM_CMD_LINK_CATALOG_GET:
		mock_log("CATALOGDUMP");
		if (!dump) {
			ret = -EOPNOTSUPP;
			break;
		}
		for (i = 0; !ret && i < ARRAY_LEN(mock.k); i++) {
			size_t j;

			if (!mock.k[i].used || mock.k[i].state != ENGRAM_LINK_UP)
				continue;
			for (j = 0; !ret && j < ARRAY_LEN(mock.t); j++)
				if (mock.t[j].used)
					ret = reply_catalog(&mock.k[i], &mock.t[j], cb, arg);
		}
		break;
	case ENGRAM_CMD_LINK_ADD:
	case ENGRAM_CMD_LINK_DEL:
	case ENGRAM_CMD_LINK_GET:
		mock_log(gh->cmd == ENGRAM_CMD_LINK_ADD ? "LINKADD" :
			 gh->cmd == ENGRAM_CMD_LINK_DEL ? "LINKDEL" : dump ? "LINKDUMP" : "LINKGET");
		ret = do_link(nl, gh->cmd, dump, tb, cb, arg);
		break;
	default:
		ret = -EOPNOTSUPP;
	}
	nlmsg_free(msg);
	return ret;
}
