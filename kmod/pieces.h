/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A fetch's destination cut into the pieces the client registers, one MR
 * each.  Pure arithmetic, so the same file builds in userspace
 * (ENGRAM_USERSPACE) where it is unit-tested (selftests/unit/test_pieces).
 */
#ifndef _ENGRAM_PIECES_H
#define _ENGRAM_PIECES_H

#include "userspace.h"

/**
 * struct engram_pieces_dest - one destination range of a fetch
 * @addr: user address of the first byte of the range's buffer
 * @off: the range's first byte, from the start of the buffer
 * @len: its bytes
 */
struct engram_pieces_dest {
	u64 addr;
	u64 off;
	u64 len;
};

/**
 * struct engram_pieces_piece - one registration
 * @dest: index of the destination range it lies in
 * @off: its first byte, from the start of that range's buffer
 * @len: its bytes
 */
struct engram_pieces_piece {
	u32 dest;
	u64 off;
	u64 len;
};

u64 engram_pieces_div(u64 x, u64 m);
u64 engram_pieces_kept_step(u64 window, u64 page_size);
u64 engram_pieces_kept_room(u64 pos, u64 window, u64 page_size);
int engram_pieces_cut(u32 nr_rows, u32 stride, u32 row_bytes,
		      const struct engram_pieces_dest *d, unsigned int nd,
		      u64 window, u64 page_size, bool aligned, struct engram_pieces_piece *out,
		      u32 max_pieces, u32 *nr_pieces);

/**
 * struct engram_pieces_cursor - where engram_pieces_locate() stopped
 * @piece: the piece it was in
 * @base: that piece's first byte in the pieces' concatenation
 *
 * Zero it before the first row: rows in ascending places are then found
 * in one pass over the pieces.
 */
struct engram_pieces_cursor {
	unsigned int piece;
	u64 base;
};

int engram_pieces_locate(const u64 *len, unsigned int n, u64 pos, u32 row_bytes,
			 struct engram_pieces_cursor *cur, u64 *off);

#endif
