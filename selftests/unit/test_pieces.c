// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of kmod/pieces.c, built in userspace (ENGRAM_USERSPACE): how a
 * fetch's destination ranges are cut into registrations.  Fixed cases for
 * each refusal, then random destinations checked against the rules every
 * cut must keep: the pieces are the rows' bytes exactly, in order, each
 * within one window from its first page, never ending inside a row unless
 * the rows end there.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pieces.h"
#include "tap.h"

#define ROW	264
#define MAXP	16

/* The kernel's PAGE_SIZE: 4 KiB, or 16 or 64 KiB on arm64 (issue 14). */
static u64 page_size = 4096;

static struct engram_pieces_piece out[MAXP];
static u32 n;
/* Windows aligned in each buffer (kept registrations), or begun at each piece's page. */
static bool aligned;

static int cut(u32 rows, u32 stride, const struct engram_pieces_dest *d, unsigned int nd,
	       u64 window, u32 max)
{
	memset(out, 0xa5, sizeof(out));
	return engram_pieces_cut(rows, stride, ROW, d, nd, window, page_size, aligned, out, max,
				 &n);
}

/*
 * The rules, for a cut that succeeded: walking the pieces reproduces the
 * stream of the rows' bytes over the ranges in order.  Returns NULL or
 * what is wrong.
 */
static const char *check(u32 rows, u32 stride, const struct engram_pieces_dest *d,
			 unsigned int nd, u64 window)
{
	u64 total = (u64)(rows - 1) * stride + ROW, pos = 0, base = 0;
	unsigned int cur = 0;
	u32 i;

	for (i = 0; i < n; i++) {
		const struct engram_pieces_piece *p = &out[i];
		u64 first_page_off = (d[p->dest].addr + p->off) % page_size;

		if (p->dest < cur || p->dest >= nd)
			return "pieces out of range order";
		while (cur < p->dest) {
			/* A range is used up before the next one starts. */
			if (pos != base + d[cur].len)
				return "a range left with room before the next one";
			base += d[cur].len;
			cur++;
		}
		if (p->off != d[cur].off + (pos - base))
			return "a piece does not continue where the last ended";
		if (!p->len || p->off + p->len > d[cur].off + d[cur].len)
			return "a piece is empty or leaves its range";
		if (!aligned && first_page_off + p->len > window)
			return "a piece spans more than one window";
		if (aligned) {
			u64 at = d[p->dest].addr % page_size + p->off;
			u64 step = engram_pieces_kept_step(window, page_size);

			if (at + p->len > at / step * step + window)
				return "a piece leaves the fixed window its first byte starts";
		}
		pos += p->len;
		if (pos < total && pos % stride && pos % stride < ROW)
			return "a piece ends inside a row";
	}
	return pos == total ? NULL : "the pieces do not hold exactly the rows";
}

static void test_fixed(void)
{
	struct engram_pieces_dest one = { .addr = 0x10000, .off = 0, .len = 1 << 20 };
	struct engram_pieces_dest two[2] = {
		{ .addr = 0x10000, .off = 100, .len = 10 * ROW },
		{ .addr = 0x90000, .off = 0, .len = 1 << 20 },
	};
	struct engram_pieces_dest odd = { .addr = 0x10000 + 4000, .off = 0, .len = 1 << 20 };

	tap_ok(!cut(10, ROW, &one, 1, 64 * page_size, MAXP) && n == 1 && out[0].dest == 0 &&
	       out[0].off == 0 && out[0].len == 10 * ROW, "10 rows in one window: one piece");
	tap_ok(!cut(1, 1000, &one, 1, 64 * page_size, MAXP) && n == 1 && out[0].len == ROW,
	       "one row takes row bytes, not a stride");
	tap_ok(!cut(1000, ROW, &one, 1, 16 * page_size, MAXP) && n == 5 &&
	       !check(1000, ROW, &one, 1, 16 * page_size),
	       "264,000 bytes over 64 KiB windows: 5 pieces, cut between rows");
	tap_ok(out[0].len == 248 * ROW, "the first piece ends at the last whole row (%llu)",
	       (unsigned long long)out[0].len);
	tap_ok(!cut(20, ROW, two, 2, 64 * page_size, MAXP) && n == 2 && out[0].dest == 0 &&
	       out[0].off == 100 && out[0].len == 10 * ROW && out[1].dest == 1 &&
	       out[1].off == 0 && out[1].len == 10 * ROW, "two ranges, 10 rows each");
	tap_ok(!cut(20, ROW, &odd, 1, 2 * page_size, MAXP) && n == 2 && out[0].len == 15 * ROW &&
	       !check(20, ROW, &odd, 1, 2 * page_size),
	       "a buffer 96 bytes before a page end, two-page windows: 15 rows, then 5");

	one.len = 9 * ROW;
	tap_ok(cut(10, ROW, &one, 1, 64 * page_size, MAXP) == -ENOSPC, "rows beyond the range: ENOSPC");
	one.len = 9 * ROW + ROW - 1;
	tap_ok(cut(10, ROW, &one, 1, 64 * page_size, MAXP) == -ENOSPC, "one byte short: ENOSPC");
	one.len = 1 << 20;
	two[0].len = 10 * ROW + 1;
	tap_ok(cut(20, ROW, two, 2, 64 * page_size, MAXP) == -EINVAL,
	       "a row across the end of a range: EINVAL");
	two[0].len = 5 * 512 + 100;
	tap_ok(cut(20, 512, two, 2, 64 * page_size, MAXP) == -EINVAL,
	       "stride 512: a range that ends inside a row: EINVAL");
	two[0].len = 5 * 512;
	tap_ok(!cut(20, 512, two, 2, 64 * page_size, MAXP) && !check(20, 512, two, 2, 64 * page_size),
	       "a range that ends exactly at a stride boundary");
	two[0].len = 4 * 512 + ROW + 10;
	tap_ok(!cut(20, 512, two, 2, 64 * page_size, MAXP) && !check(20, 512, two, 2, 64 * page_size),
	       "a range that ends inside a stride gap");
	tap_ok(cut(1000, ROW, &one, 1, 16 * page_size, 4) == -E2BIG,
	       "five pieces needed, four allowed: E2BIG");
	tap_ok(cut(2, ROW, &odd, 1, page_size, MAXP) == -E2BIG,
	       "96 bytes left of a one-page window hold no row: E2BIG");
}

static u64 rnd(u64 lo, u64 hi)
{
	return lo + (u64)random() % (hi - lo + 1);
}

/* Random destinations cut at row boundaries: every success keeps the rules. */
static void test_random(void)
{
	unsigned int iter, ok = 0, refused = 0, bad = 0;
	const char *why = NULL;

	srandom(12345);
	for (iter = 0; iter < 20000; iter++) {
		struct engram_pieces_dest d[MAXP];
		u32 stride = ROW + (random() % 2 ? 0 : (u32)rnd(1, 4000));
		u32 rows = (u32)rnd(1, 3000), left = rows, nd = 0;
		u64 window = rnd(1, 32) * page_size;
		int ret;

		while (left && nd < MAXP) {
			u32 take = nd + 1 == MAXP ? left : (u32)rnd(1, left);

			d[nd].addr = rnd(0, 1 << 20) * 8;
			d[nd].off = rnd(0, 9000);
			/* Whole strides, or the last row's bytes only, plus slack at the end. */
			d[nd].len = (u64)take * stride;
			if (take == left)
				d[nd].len = (u64)(take - 1) * stride + ROW + rnd(0, 3) * 100;
			left -= take;
			nd++;
		}
		ret = cut(rows, stride, d, nd, window, MAXP);
		if (!ret) {
			why = check(rows, stride, d, nd, window);
			if (why) {
				bad++;
				tap_diag("rows %u stride %u nd %u window %llu: %s", rows, stride,
					 nd, (unsigned long long)window, why);
			}
			ok++;
		} else if (ret == -E2BIG) {
			refused++;
		} else {
			bad++;
			tap_diag("rows %u stride %u nd %u: unexpected %d", rows, stride, nd, ret);
		}
		if (bad > 5)
			break;
	}
	tap_ok(!bad, "%llu KiB pages%s: 20,000 random destinations: %u cut by the rules, %u need more than %d pieces",
	       (unsigned long long)page_size >> 10, aligned ? ", aligned windows" : "", ok,
	       refused, MAXP);
	tap_ok(ok > 1000 && refused > 100, "both outcomes are exercised");
}

/*
 * Kept registrations: windows at multiples of the window from the
 * buffer's first page, so the same window serves every fetch.
 */
static void test_aligned(void)
{
	/* 96 bytes before a page's end: the first window holds 2 pages less 4000 bytes. */
	struct engram_pieces_dest odd = { .addr = 0x10000 + 4000, .off = 0, .len = 1 << 20 };
	struct engram_pieces_dest mid = { .addr = 0x10000, .off = 2 * 4096 + 3000, .len = 1 << 20 };
	struct engram_pieces_dest big = { .addr = 0x10000, .off = 0, .len = 64 << 20 };

	aligned = true;
	tap_ok(engram_pieces_kept_step(4 * page_size, page_size) == 3 * page_size &&
	       engram_pieces_kept_step(page_size, page_size) == page_size,
	       "fixed windows overlap by one page");
	tap_ok(!cut(20, ROW, &odd, 1, 2 * page_size, MAXP) && n == 2 &&
	       out[0].len == 15 * ROW && out[1].len == 5 * ROW &&
	       !check(20, ROW, &odd, 1, 2 * page_size),
	       "fixed: the row across the first window's end starts the next piece, in the next window");
	tap_ok(!cut(60, ROW, &mid, 1, 4 * page_size, MAXP) && n == 2 &&
	       out[0].len == 19 * ROW && !check(60, ROW, &mid, 1, 4 * page_size),
	       "fixed: 2 pages and 3000 bytes in, the piece ends where window 0 does (%llu)",
	       (unsigned long long)out[0].len);
	tap_ok(!cut(49152, ROW, &big, 1, 512 * page_size, MAXP) && n == 7 &&
	       !check(49152, ROW, &big, 1, 512 * page_size),
	       "fixed: 49,152 packed rows in 512-page windows are 7 pieces, as unaligned (%u)", n);
	aligned = false;
	tap_ok(!cut(60, ROW, &mid, 1, 4 * page_size, MAXP) && n == 2 && out[0].len == 50 * ROW,
	       "unaligned: its window starts at the piece's page (%llu)",
	       (unsigned long long)out[0].len);
}

/* The batch ioctl.rst describes, in windows of 512 pages of each size. */
static void test_page_sizes(void)
{
	struct engram_pieces_dest d = { .addr = 0x7f0000000000ULL, .off = 0, .len = 49152 * ROW };
	static const struct { u64 page; u32 pieces; } want[] = {
		{ 4096, 7 }, { 16384, 2 }, { 65536, 1 },
	};
	unsigned int i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		page_size = want[i].page;
		tap_ok(!cut(49152, ROW, &d, 1, 512 * page_size, MAXP) && n == want[i].pieces &&
		       !check(49152, ROW, &d, 1, 512 * page_size),
		       "49,152 rows in 512-page windows of %llu KiB pages: %u pieces",
		       (unsigned long long)page_size >> 10, want[i].pieces);
	}
	page_size = 4096;
}

/*
 * The bytes a part syncs back are exactly its rows': a part of every
 * other row of a fetch (two shards alternating), cut into pieces of a
 * small window, with a stride gap.  Every byte of the span is marked by
 * who owns it; the rows located must cover the part's rows and nothing of
 * the others' or of the gaps.
 */
static void test_locate(void)
{
	enum { ROWS = 600, STRIDE = 300 };
	static u8 owner[ROWS * STRIDE];
	static u32 places[ROWS / 2];
	struct engram_pieces_dest d = { .addr = 0, .off = 0, .len = sizeof(owner) };
	struct engram_pieces_cursor cur = { 0 };
	u64 len[MAXP], off, start, pos;
	u32 i, k, span = ROWS - 1;
	int bad = 0, outside = 0;

	for (i = 0; i < ROWS / 2; i++)
		places[i] = 2 * i;	/* the part's; odd places are the other shard's */
	k = !cut(span, STRIDE, &d, 1, 4 * page_size, MAXP);
	tap_ok(k && n > 2, "a part spanning 599 places cut into %u pieces", n);
	memset(owner, 0, sizeof(owner));
	for (i = 0; i < n; i++)
		len[i] = out[i].len;
	for (i = 0; i < ROWS / 2; i++) {
		pos = (u64)places[i] * STRIDE;
		if (places[i] >= span || engram_pieces_locate(len, n, pos, ROW, &cur, &off)) {
			bad += places[i] < span;
			continue;
		}
		start = out[cur.piece].off + off;	/* the buffer's byte */
		for (k = 0; k < ROW; k++)
			owner[start + k]++;
	}
	for (i = 0; i < span; i++)
		for (k = 0; k < STRIDE && (u64)i * STRIDE + k < sizeof(owner); k++) {
			u8 want = !(i & 1) && k < ROW;

			outside += owner[(u64)i * STRIDE + k] != want;
		}
	tap_ok(!bad && !outside,
	       "each of the part's rows is found whole, once; no byte of a gap or of the other shard's rows (%d not found, %d wrong)",
	       bad, outside);
	cur.piece = 0;
	cur.base = 0;
	tap_ok(engram_pieces_locate(len, n, (u64)span * STRIDE, ROW, &cur, &off) == -ERANGE,
	       "a place past the pieces: ERANGE");
	tap_ok(!engram_pieces_locate(len, n, 4 * STRIDE, ROW, &cur, &off) &&
	       !engram_pieces_locate(len, n, 0, ROW, &cur, &off) && cur.piece == 0 && off == 0,
	       "a cursor past the place asked for starts over");
}

int main(void)
{
	static const u64 pages[] = { 4096, 16384, 65536 };
	unsigned int i;

	test_fixed();
	test_aligned();
	test_page_sizes();
	test_locate();
	for (i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		page_size = pages[i];
		aligned = false;
		test_random();
		aligned = true;
		test_random();
	}
	aligned = false;
	return tap_done();
}
