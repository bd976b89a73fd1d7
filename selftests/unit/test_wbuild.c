// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for kmod/wbuild.c, the builder of a response's RDMA WRITEs,
 * built in userspace.  The owner's flush copies every posted WR and its
 * SGEs into a log, as ib_post_send() copies them, since the builder reuses
 * its scratch at once; the checks then read the log.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wbuild.h"
#include "tap.h"

#define CHAIN_MAX	256
#define SGE_MAX		32
#define NO_FAIL		(~0U)

/* A segment: an input of engram_wbuild_add() or one posted SGE. */
struct run {
	u64 remote;
	u32 rkey;
	u64 local;
	u64 len;
};

struct logged_wr {
	u64 remote;
	u32 rkey;
	u32 nsge;
	u32 sge;		/* first in log_sges */
	u64 len;
	int bad;		/* a field the builder must set was wrong */
};

static struct ib_rdma_wr wrs[CHAIN_MAX];
static struct ib_sge sges[CHAIN_MAX * SGE_MAX];
static struct ib_cqe cqe;

/* The owner: its log and its knobs. */
static struct logged_wr *log_wrs;
static struct ib_sge *log_sges;
static u32 nlog, nlog_sges, log_cap, log_sge_cap;
static u32 flushes, reserves, chain_errors;
static u32 caps[8], ncaps;		/* reserve cycles through these */
static u32 fail_flush_at = NO_FAIL, fail_reserve_at = NO_FAIL;
static struct engram_wb_cfg cur;

static void log_reset(void)
{
	nlog = 0;
	nlog_sges = 0;
	flushes = 0;
	reserves = 0;
	chain_errors = 0;
	fail_flush_at = NO_FAIL;
	fail_reserve_at = NO_FAIL;
}

static int own_flush(void *ctx, struct ib_rdma_wr *first, u32 nr)
{
	struct ib_send_wr *w;
	u32 n = 0;
	int i;

	(void)ctx;
	if (flushes++ == fail_flush_at)
		return -EIO;
	if (first != wrs || !nr || nr > CHAIN_MAX)
		chain_errors++;
	for (w = &first->wr; w; w = w->next, n++) {
		struct ib_rdma_wr *r = (struct ib_rdma_wr *)w;
		struct logged_wr *l;

		if (nlog == log_cap) {
			log_cap = log_cap ? 2 * log_cap : 1024;
			log_wrs = realloc(log_wrs, log_cap * sizeof(*log_wrs));
		}
		while (nlog_sges + (w->num_sge > 0 ? w->num_sge : 0) > log_sge_cap) {
			log_sge_cap = log_sge_cap ? 2 * log_sge_cap : 4096;
			log_sges = realloc(log_sges, log_sge_cap * sizeof(*log_sges));
		}
		if (!log_wrs || !log_sges) {
			perror("realloc");
			exit(2);
		}
		l = &log_wrs[nlog++];
		memset(l, 0, sizeof(*l));
		l->remote = r->remote_addr;
		l->rkey = r->rkey;
		l->sge = nlog_sges;
		l->bad = w->opcode != IB_WR_RDMA_WRITE || w->wr_cqe != cur.cqe ||
			 w->send_flags || w->num_sge < 1 || (u32)w->num_sge > cur.max_sge;
		for (i = 0; i < w->num_sge; i++) {
			log_sges[nlog_sges++] = w->sg_list[i];
			l->len += w->sg_list[i].length;
			if (!w->sg_list[i].length || w->sg_list[i].lkey != cur.lkey)
				l->bad = 1;
		}
		l->nsge = w->num_sge > 0 ? w->num_sge : 0;
		if (l->len > cur.max_bytes)
			l->bad = 1;
	}
	if (n != nr)
		chain_errors++;
	/* What the server does: the last one completes, for the chain. */
	first[nr - 1].wr.send_flags = IB_SEND_SIGNALED;
	return 0;
}

static int own_reserve(void *ctx, u32 *cap)
{
	(void)ctx;
	if (reserves == fail_reserve_at) {
		reserves++;
		return -ETIMEDOUT;
	}
	*cap = caps[reserves++ % ncaps];
	return 0;
}

static const struct engram_wb_ops ops = {
	.flush = own_flush,
	.reserve = own_reserve,
};

static void setup(struct engram_wb *b, u32 max_sge, u32 max_bytes, u32 mtu,
		  const u32 *cap_list, u32 n)
{
	cur = (struct engram_wb_cfg){
		.wrs = wrs,
		.sges = sges,
		.max_sge = max_sge,
		.max_bytes = max_bytes,
		.mtu = mtu,
		.lkey = 0x1234,
		.cqe = &cqe,
		.ops = &ops,
		.ctx = &cqe,
	};
	memcpy(caps, cap_list, n * sizeof(*caps));
	ncaps = n;
	log_reset();
	memset(wrs, 0xa5, sizeof(wrs));
	memset(sges, 0x5a, sizeof(sges));
	engram_wbuild_init(b, &cur);
}

/* Add all, flush; 0 or the first error. */
static int build(struct engram_wb *b, const struct run *in, u32 n)
{
	u32 i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = engram_wbuild_add(b, in[i].remote, in[i].rkey, in[i].local, in[i].len);
		if (ret)
			return ret;
	}
	return engram_wbuild_flush(b);
}

/* Append @r to @out, merging it into the last run when both sides continue it. */
static void push(struct run *out, u32 *n, struct run r)
{
	struct run *p = *n ? &out[*n - 1] : NULL;

	if (p && p->rkey == r.rkey && p->remote + p->len == r.remote &&
	    p->local + p->len == r.local) {
		p->len += r.len;
		return;
	}
	out[(*n)++] = r;
}

static int runs_equal(const struct run *a, const struct run *b, u32 n)
{
	u32 i;

	for (i = 0; i < n; i++)
		if (a[i].remote != b[i].remote || a[i].rkey != b[i].rkey ||
		    a[i].local != b[i].local || a[i].len != b[i].len)
			return 0;
	return 1;
}

/*
 * One TAP line, unless @what is NULL: then only a failure says something.
 * (a) and (b): the posted SGEs, in posting order, map the same remote bytes
 * to the same local bytes as the inputs did, each once; every WR is well
 * formed; (c): no WR continued by the next one ends in a short packet.
 */
static u32 cuts;	/* WRs continued by the next one and ending on a packet boundary */

static int check_log(const struct run *in, u32 n, const char *what)
{
	struct run *a = calloc(n + 1, sizeof(*a));
	struct run *b = calloc(nlog_sges + 1, sizeof(*b));
	u32 na = 0, nb = 0, i, j, bad = 0, short_tail = 0;
	u64 off;
	int ok;

	if (!a || !b)
		exit(2);
	for (i = 0; i < n; i++)
		push(a, &na, in[i]);
	for (i = 0; i < nlog; i++) {
		struct logged_wr *l = &log_wrs[i];

		bad += l->bad;
		off = 0;
		for (j = 0; j < l->nsge; j++) {
			struct ib_sge *s = &log_sges[l->sge + j];

			push(b, &nb, (struct run){ l->remote + off, l->rkey, s->addr, s->length });
			off += s->length;
		}
		if (cur.mtu && cur.mtu != U32_MAX && i + 1 < nlog &&
		    log_wrs[i + 1].rkey == l->rkey &&
		    log_wrs[i + 1].remote == l->remote + l->len &&
		    l->len > cur.mtu && l->len % cur.mtu && l->len % cur.mtu <= cur.mtu / 4)
			short_tail++;
		if (cur.mtu && cur.mtu != U32_MAX && i + 1 < nlog &&
		    log_wrs[i + 1].rkey == l->rkey &&
		    log_wrs[i + 1].remote == l->remote + l->len && !(l->len % cur.mtu))
			cuts++;
	}
	ok = na == nb && runs_equal(a, b, na) && !bad && !short_tail &&
	     !chain_errors;
	if (what)
		tap_ok(ok, "%s", what);
	if (!ok)
		tap_diag("runs in %u, posted %u, equal %d; malformed WRs %u, short tails %u, %s %u",
			 na, nb, na == nb && runs_equal(a, b, na), bad,
			 short_tail, "chain errors", chain_errors);
	free(a);
	free(b);
	return ok;
}

/* Expect exactly these WRs, as (remote, nsge, len) triples. */
static void expect_wrs(const u64 (*want)[3], u32 n, const char *what)
{
	u32 i;
	int ok = nlog == n;

	for (i = 0; ok && i < n; i++)
		ok = log_wrs[i].remote == want[i][0] && log_wrs[i].nsge == want[i][1] &&
		     log_wrs[i].len == want[i][2];
	tap_ok(ok, "%s", what);
	for (i = 0; !ok && i < nlog; i++)
		tap_diag("wr %u: remote %llu, %u sges, %llu bytes", i,
			 (unsigned long long)log_wrs[i].remote, log_wrs[i].nsge,
			 (unsigned long long)log_wrs[i].len);
}

static const u32 cap_big[] = { CHAIN_MAX };

static void test_hand(void)
{
	struct engram_wb b;
	static const struct {
		const char *what;
		u32 max_sge, max_bytes, mtu;
		struct run in[4];
		u32 n;
		u64 want[3][3];
		u32 nwant;
	} cases[] = {
		{ "one segment, one WR", 4, 1 << 20, 1024,
		  { { 0, 1, 1000, 100 } }, 1, { { 0, 1, 100 } }, 1 },
		{ "both sides contiguous: one SGE grows", 4, 1 << 20, 1024,
		  { { 0, 1, 1000, 100 }, { 100, 1, 1100, 50 } }, 2, { { 0, 1, 150 } }, 1 },
		{ "remote contiguous only: a second SGE", 4, 1 << 20, 1024,
		  { { 0, 1, 1000, 100 }, { 100, 1, 5000, 50 } }, 2, { { 0, 2, 150 } }, 1 },
		{ "remote gap: a new WR", 4, 1 << 20, 1024,
		  { { 0, 1, 1000, 100 }, { 101, 1, 1100, 50 } }, 2,
		  { { 0, 1, 100 }, { 101, 1, 50 } }, 2 },
		{ "other rkey: a new WR", 4, 1 << 20, 1024,
		  { { 0, 1, 1000, 100 }, { 100, 2, 1100, 50 } }, 2,
		  { { 0, 1, 100 }, { 100, 1, 50 } }, 2 },
		{ "max_bytes: a new WR", 4, 120, 0,
		  { { 0, 1, 1000, 100 }, { 100, 1, 1100, 50 } }, 2,
		  { { 0, 1, 100 }, { 100, 1, 50 } }, 2 },
		{ "cut at an SGE boundary", 2, 1 << 20, 1024,
		  { { 0, 1, 1000, 1024 }, { 1024, 1, 9000, 100 }, { 1124, 1, 20000, 50 } }, 3,
		  { { 0, 1, 1024 }, { 1024, 2, 150 } }, 2 },
		{ "cut inside an SGE", 2, 1 << 20, 1024,
		  { { 0, 1, 1000, 1000 }, { 1000, 1, 9000, 200 }, { 1200, 1, 20000, 50 } }, 3,
		  { { 0, 2, 1024 }, { 1024, 2, 226 } }, 2 },
		{ "tail over mtu/4: no cut", 2, 1 << 20, 1024,
		  { { 0, 1, 1000, 1000 }, { 1000, 1, 9000, 400 }, { 1400, 1, 20000, 50 } }, 3,
		  { { 0, 2, 1400 }, { 1400, 1, 50 } }, 2 },
		{ "one packet or less: no cut", 2, 1 << 20, 1024,
		  { { 0, 1, 1000, 500 }, { 500, 1, 9000, 400 }, { 900, 1, 20000, 50 } }, 3,
		  { { 0, 2, 900 }, { 900, 1, 50 } }, 2 },
		{ "mtu 0: no cut", 2, 1 << 20, 0,
		  { { 0, 1, 1000, 1024 }, { 1024, 1, 9000, 100 }, { 1124, 1, 20000, 50 } }, 3,
		  { { 0, 2, 1124 }, { 1124, 1, 50 } }, 2 },
		{ "mtu U32_MAX: no cut", 2, 1 << 20, U32_MAX,
		  { { 0, 1, 1000, 1024 }, { 1024, 1, 9000, 100 }, { 1124, 1, 20000, 50 } }, 3,
		  { { 0, 2, 1124 }, { 1124, 1, 50 } }, 2 },
		{ "cut whose tail takes two SGEs", 3, 1 << 20, 1024,
		  { { 0, 1, 1000, 1000 }, { 1000, 1, 9000, 100 }, { 1100, 1, 20000, 100 },
		    { 1200, 1, 30000, 50 } }, 4,
		  { { 0, 2, 1024 }, { 1024, 3, 226 } }, 2 },
	};
	static const u32 small_caps[] = { 1, 2, 4 };
	u32 i, c;
	char what[160];

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* The same WRs whatever the chains: cap 1 makes the cut WR's list the new one's. */
		for (c = 0; c < 4; c++) {
			const u32 *cap = c ? &small_caps[c - 1] : cap_big;

			setup(&b, cases[i].max_sge, cases[i].max_bytes, cases[i].mtu, cap, 1);
			snprintf(what, sizeof(what), "%s (cap %u): built", cases[i].what, *cap);
			tap_ok(!build(&b, cases[i].in, cases[i].n), "%s", what);
			snprintf(what, sizeof(what), "%s (cap %u): the WRs", cases[i].what, *cap);
			expect_wrs(cases[i].want, cases[i].nwant, what);
			snprintf(what, sizeof(what), "%s (cap %u): mapping and WR checks",
				 cases[i].what, *cap);
			check_log(cases[i].in, cases[i].n, what);
		}
	}
	setup(&b, 4, 1 << 20, 1024, cap_big, 1);
	tap_ok(!engram_wbuild_flush(&b) && !flushes && !nlog, "flushing nothing posts nothing");

	/*
	 * take: the last chain is left to the owner, to post with its SEND.
	 * Three WRs of other keys with chains of two: the first two flushed,
	 * the third taken, alone, unsignaled, the end of its list.
	 */
	{
		static const u32 two = 2;
		u32 nr;

		setup(&b, 4, 1 << 20, 1024, &two, 1);
		tap_ok(!engram_wbuild_add(&b, 0, 1, 1000, 100) &&
		       !engram_wbuild_add(&b, 100, 2, 2000, 100) &&
		       !engram_wbuild_add(&b, 200, 3, 3000, 100), "take: three WRs built");
		nr = engram_wbuild_take(&b);
		tap_ok(flushes == 1 && nlog == 2 && nr == 1 && wrs[0].rkey == 3 &&
		       wrs[0].remote_addr == 200 && !wrs[0].wr.next && !wrs[0].wr.send_flags &&
		       wrs[0].wr.sg_list[0].addr == 3000,
		       "take: two WRs flushed, the third taken, unsignaled and last (%u flushes, %u taken)",
		       flushes, nr);
		tap_ok(!engram_wbuild_take(&b) && !engram_wbuild_flush(&b) && flushes == 1,
		       "take: the builder is empty afterwards");
		tap_ok(!engram_wbuild_add(&b, 300, 4, 4000, 100) && reserves == 3 &&
		       engram_wbuild_take(&b) == 1,
		       "take: the next chain asks for credits again");
	}
}

static u64 rnd_state = 0x9e3779b97f4a7c15ULL;

static u64 rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* 264-byte rows, 256 + 8 bytes from random pages, to contiguous remote memory. */
static struct run *rows(u32 nrows, u32 *n)
{
	struct run *in = malloc(2 * nrows * sizeof(*in));
	u32 i;

	if (!in)
		exit(2);
	for (i = 0; i < nrows; i++) {
		in[2 * i] = (struct run){ 0x10000 + 264ULL * i, 7,
					  (rnd() & 0xffffffffff00ULL) | 0x1000000000000ULL, 256 };
		in[2 * i + 1] = (struct run){ 0x10000 + 264ULL * i + 256, 7,
					      (rnd() & 0xffffffffff00ULL) | 0x2000000000000ULL, 8 };
	}
	*n = 2 * nrows;
	return in;
}

static void test_rows(void)
{
	static const u32 mtus[] = { 1024, 4096, 0, U32_MAX };
	const u32 nrows = 49152;
	struct engram_wb b;
	struct run *in;
	u32 n, i, k, full16;
	u64 packets, min, total = 264ULL * nrows;

	in = rows(nrows, &n);
	for (k = 0; k < 4; k++) {
		u32 mtu = mtus[k];

		setup(&b, 32, 1 << 20, mtu, cap_big, 1);
		tap_ok(!build(&b, in, n), "49,152 rows, mtu %u: built", mtu);
		check_log(in, n, "49,152 rows: mapping and WR checks");
		if (mtu && mtu != U32_MAX) {
			packets = 0;
			for (i = 0; i < nlog; i++)
				packets += (log_wrs[i].len + mtu - 1) / mtu;
			min = (total + mtu - 1) / mtu;
			tap_ok(nlog >= 3100 && nlog <= 3250,
			       "49,152 rows, mtu %u: %u WRs (about 3,172 expected)", mtu, nlog);
			tap_ok(packets * 100 <= min * 101,
			       "49,152 rows, mtu %u: %llu packets, within 1%% of %llu", mtu,
			       (unsigned long long)packets, (unsigned long long)min);
		} else {
			full16 = 0;
			for (i = 0; i < nlog; i++)
				full16 += log_wrs[i].nsge == 32 && log_wrs[i].len == 16 * 264;
			tap_ok(nlog == 3072 && full16 == 3072,
			       "49,152 rows, mtu %u (never cut): %u WRs, %u of 16 rows", mtu,
			       nlog, full16);
		}
	}
	free(in);
}

/* Segments whose remote side mostly continues, and whose local side sometimes. */
static u32 random_input(struct run *in, u32 max, u32 max_bytes)
{
	u32 n = 1 + rnd() % max, i;
	u64 cursor[3] = { 0, 1ULL << 32, 1ULL << 40 };
	u32 key = 0;

	for (i = 0; i < n; i++) {
		u32 len = 1 + rnd() % (rnd() % 4 ? 300 : max_bytes);
		u64 r = rnd() % 16;

		if (len > max_bytes)
			len = max_bytes;
		if (r == 0)
			key = rnd() % 3;
		else if (r == 1)
			cursor[key] += 1 + rnd() % 64;
		in[i].rkey = 100 + key;
		in[i].remote = cursor[key];
		if (i && rnd() % 4 == 0)
			in[i].local = in[i - 1].local + in[i - 1].len;
		else
			in[i].local = rnd() & 0xffffffffffffULL;
		in[i].len = len;
		cursor[key] += len;
	}
	return n;
}

static void test_random(void)
{
	static const u32 mtus[] = { 256, 512, 1024, 4096, 0, U32_MAX };
	static const u32 cap_sets[][3] = { { 1, 1, 1 }, { 2, 2, 2 }, { 4, 4, 4 },
					   { 1, 3, 2 }, { CHAIN_MAX, 5, 17 } };
	struct run in[200];
	struct engram_wb b;
	u32 iter, n, fails = 0, ok_cases = 0;
	int ret;

	cuts = 0;
	for (iter = 0; iter < 20000; iter++) {
		u32 max_sge = 1 + rnd() % (rnd() % 2 ? 4 : SGE_MAX);
		u32 mtu = mtus[rnd() % 6];
		u32 max_bytes = rnd() % 2 ? 1 << 20 : 64 + rnd() % 8192;
		const u32 *cs = cap_sets[rnd() % 5];

		n = random_input(in, 200, max_bytes);
		setup(&b, max_sge, max_bytes, mtu, cs, 3);
		ret = build(&b, in, n);
		if (ret || !check_log(in, n, NULL)) {
			tap_diag("iteration %u: ret %d, max_sge %u, max_bytes %u, mtu %u",
				 iter, ret, max_sge, max_bytes, mtu);
			tap_diag("caps %u %u %u, %u segments", cs[0], cs[1], cs[2], n);
			if (++fails == 5)
				break;
		} else {
			ok_cases++;
		}
	}
	tap_diag("random inputs: %u WRs continued on a packet boundary", cuts);
	tap_ok(!fails && ok_cases == 20000,
	       "20,000 random inputs (caps 1, 2, 4 and mixed, mtu 256-4096, 0, U32_MAX): mappings and WRs right");
}

static void test_errors(void)
{
	struct engram_wb b;
	struct run *in;
	u32 n, i;
	int ret = 0;

	in = rows(64, &n);
	setup(&b, 4, 1 << 20, 1024, (const u32[]){ 2 }, 1);
	fail_flush_at = 1;		/* the first is the empty chain's, never called */
	for (i = 0; i < n && !ret; i++)
		ret = engram_wbuild_add(&b, in[i].remote, in[i].rkey, in[i].local, in[i].len);
	tap_ok(ret == -EIO && flushes == 2, "a flush error comes back from engram_wbuild_add() (%d)",
	       ret);

	setup(&b, 4, 1 << 20, 1024, (const u32[]){ 2 }, 1);
	fail_reserve_at = 2;
	ret = 0;
	for (i = 0; i < n && !ret; i++)
		ret = engram_wbuild_add(&b, in[i].remote, in[i].rkey, in[i].local, in[i].len);
	tap_ok(ret == -ETIMEDOUT && reserves == 3,
	       "a reserve error comes back from engram_wbuild_add() (%d)", ret);

	setup(&b, 4, 1 << 20, 1024, (const u32[]){ 2 }, 1);
	fail_reserve_at = 0;
	ret = engram_wbuild_add(&b, in[0].remote, in[0].rkey, in[0].local, in[0].len);
	tap_ok(ret == -ETIMEDOUT && !flushes, "the first reserve's error comes back (%d)", ret);

	setup(&b, 4, 1 << 20, 1024, cap_big, 1);
	ret = engram_wbuild_add(&b, in[0].remote, in[0].rkey, in[0].local, in[0].len);
	fail_flush_at = 0;
	tap_ok(!ret && engram_wbuild_flush(&b) == -EIO,
	       "a flush error comes back from engram_wbuild_flush()");
	free(in);
}

int main(void)
{
	clock_t t0 = clock();

	test_hand();
	test_rows();
	test_random();
	test_errors();
	tap_diag("%.2f s of CPU", (double)(clock() - t0) / CLOCKS_PER_SEC);
	free(log_wrs);
	free(log_sges);
	return tap_done();
}
