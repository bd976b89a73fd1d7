// SPDX-License-Identifier: GPL-2.0
/*
 * A fetch's destination cut into registrations.  The rows of a fetch land
 * back to back at a stride, across the destination ranges in order; each
 * registration (a fast-registered MR) spans at most a window of pages from
 * its first byte's page, so a range longer than that is cut, between rows,
 * into several.
 */
#ifdef ENGRAM_USERSPACE
#include <errno.h>
#else
#include <linux/errno.h>
#include <linux/math64.h>
#endif

#include "pieces.h"

static u64 engram_pieces_min(u64 a, u64 b)
{
	return a < b ? a : b;
}

/**
 * engram_pieces_div() - @x / @m, in 64 bits on every architecture
 * @x: dividend
 * @m: divisor, not 0
 *
 * Return: the quotient.
 */
u64 engram_pieces_div(u64 x, u64 m)
{
#ifdef ENGRAM_USERSPACE
	return x / m;
#else
	return div64_u64(x, m);
#endif
}

/**
 * engram_pieces_kept_step() - bytes between two fixed windows' starts
 * @window: bytes of one window, a whole number of pages
 * @page_size: the page size
 *
 * Fixed windows overlap by one page, more than a row: a row that
 * straddles the end of one lies inside the next, which a piece starting
 * at that row then nearly fills, so a destination takes about as many
 * pieces as with windows begun at each piece.  A window of one page has
 * no overlap: a row across its end cannot be cut for it (-E2BIG).
 *
 * Return: the step, a whole number of pages.
 */
u64 engram_pieces_kept_step(u64 window, u64 page_size)
{
	u64 pages = engram_pieces_div(window, page_size);

	return (pages > 1 ? pages - 1 : 1) * page_size;
}

/**
 * engram_pieces_kept_room() - bytes from @pos to the end of its fixed window
 * @pos: a byte's offset from the buffer's first page's start
 * @window: bytes of a window
 * @page_size: the page size
 *
 * The window is the one that starts last at or before @pos, which ends
 * last: number engram_pieces_div(pos, step).
 *
 * Return: the bytes, at least 1.
 */
u64 engram_pieces_kept_room(u64 pos, u64 window, u64 page_size)
{
	u64 step = engram_pieces_kept_step(window, page_size);

	return engram_pieces_div(pos, step) * step + window - pos;
}

/* The start of the row (or stride gap) that byte offset @x falls in. */
static u64 engram_pieces_row_start(u64 x, u32 stride)
{
#ifdef ENGRAM_USERSPACE
	return x / stride * stride;
#else
	return div64_u64(x, stride) * stride;
#endif
}

/* Does byte offset @x (from the first row) fall inside a row, not at its start? */
static int engram_pieces_splits_row(u64 x, u32 stride, u32 row_bytes)
{
	u64 start = engram_pieces_row_start(x, stride);

	return x > start && x < start + row_bytes;
}

/**
 * engram_pieces_cut() - cut a fetch's destination into registrations
 * @nr_rows: rows of the fetch, at least 1
 * @stride: bytes from one row's start to the next's, at least @row_bytes
 * @row_bytes: bytes of one row
 * @d: the destination ranges, in the order the rows fill them
 * @nd: how many
 * @window: bytes one registration may span from its first byte's page on,
 *	a whole number of pages
 * @page_size: the page size, a power of two
 * @aligned: windows are fixed in each buffer, every
 *	engram_pieces_kept_step() bytes from its first page's start, rather
 *	than begun at each piece's page (kept registrations, kept.c: one MR
 *	per window)
 * @out: the pieces, @max_pieces of them at most
 * @max_pieces: room in @out (the link's ranges per request)
 * @nr_pieces: set to the number of pieces written
 *
 * The rows take ``(nr_rows - 1) * stride + row_bytes`` bytes from the first
 * range's first byte on, continuing in the next range where one ends; only
 * the last range may have room left.  A row may not straddle the end of a
 * range (other than the last), and a piece ends between rows where a range
 * is cut for the window.
 *
 * Return: 0; -ENOSPC when the ranges are too short; -EINVAL when a row
 * would straddle two ranges; -E2BIG when the rows need more pieces than
 * @max_pieces, or a row does not fit one window.
 */
int engram_pieces_cut(u32 nr_rows, u32 stride, u32 row_bytes,
		      const struct engram_pieces_dest *d, unsigned int nd,
		      u64 window, u64 page_size, bool aligned, struct engram_pieces_piece *out,
		      u32 max_pieces, u32 *nr_pieces)
{
	u64 total = (u64)(nr_rows - 1) * stride + row_bytes;
	u64 base = 0, s, end, c;
	unsigned int i;

	*nr_pieces = 0;
	for (i = 0; i < nd && base < total; i++) {
		end = engram_pieces_min(base + d[i].len, total);
		if (end < total && i + 1 == nd)
			return -ENOSPC;
		if (end < total && engram_pieces_splits_row(end, stride, row_bytes))
			return -EINVAL;
		for (s = base; s < end; s = c) {
			u64 boff = d[i].off + (s - base);
			u64 pos = (d[i].addr & (page_size - 1)) + boff;
			u64 room = aligned ? engram_pieces_kept_room(pos, window, page_size) :
				   window - (pos & (page_size - 1));

			c = engram_pieces_min(end, s + room);
			if (c < end && engram_pieces_splits_row(c, stride, row_bytes)) {
				c = engram_pieces_row_start(c, stride);
				if (c <= s)
					return -E2BIG;
			}
			if (*nr_pieces == max_pieces)
				return -E2BIG;
			out[*nr_pieces].dest = i;
			out[*nr_pieces].off = boff;
			out[*nr_pieces].len = c - s;
			(*nr_pieces)++;
		}
		base += d[i].len;
	}
	return base >= total ? 0 : -ENOSPC;
}

/**
 * engram_pieces_locate() - the piece a row's bytes are in, and where
 * @len: the pieces' lengths, in the order rows fill them
 * @n: how many
 * @pos: the row's first byte in the pieces' concatenation (place * stride)
 * @row_bytes: bytes of one row
 * @cur: the cursor of the previous call, or zeroed
 * @off: set to the row's first byte in piece @cur->piece
 *
 * What a fetch synced back for the CPU is exactly its rows' bytes, found
 * here: never the gaps between them, nor the rows of other parts that its
 * pieces span.
 *
 * Return: 0; -ERANGE when no piece holds the whole row.
 */
int engram_pieces_locate(const u64 *len, unsigned int n, u64 pos, u32 row_bytes,
			 struct engram_pieces_cursor *cur, u64 *off)
{
	if (pos < cur->base) {
		cur->piece = 0;
		cur->base = 0;
	}
	while (cur->piece < n && pos >= cur->base + len[cur->piece])
		cur->base += len[cur->piece++];
	if (cur->piece == n || pos + row_bytes > cur->base + len[cur->piece])
		return -ERANGE;
	*off = pos - cur->base;
	return 0;
}
