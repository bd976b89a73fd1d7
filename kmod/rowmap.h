/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which of a table's candidates (a link's catalog entry each) hold which
 * rows: the ends of their held ranges cut the table into ranges, each held
 * whole by the same candidates.  Pure logic, so the same file builds in
 * userspace (ENGRAM_USERSPACE) where it is unit-tested
 * (selftests/unit/test_rowmap).
 */
#ifndef _ENGRAM_ROWMAP_H
#define _ENGRAM_ROWMAP_H

#include "userspace.h"

/* Candidates a map takes at most: one bit each in a range's mask. */
#define ENGRAM_ROWMAP_MAX_HELD		16
/* Ranges a map may have: their ends are the candidates' two ends each. */
#define ENGRAM_ROWMAP_MAX_RANGES	(2 * ENGRAM_ROWMAP_MAX_HELD - 1)

/**
 * struct engram_rowmap_held - the rows one candidate holds
 * @first: its first row
 * @rows: how many from there, at least 1
 */
struct engram_rowmap_held {
	u64 first;
	u64 rows;
};

/**
 * struct engram_rowmap - a table's rows, by who holds them
 * @pts: range i is rows [pts[i], pts[i + 1]), ascending
 * @mask: bit k set when candidate k holds all of range i; 0 for a gap
 * @nr: ranges; neighbours never have the same mask
 */
struct engram_rowmap {
	u64 pts[ENGRAM_ROWMAP_MAX_RANGES + 1];
	u32 mask[ENGRAM_ROWMAP_MAX_RANGES];
	unsigned int nr;
};

int engram_rowmap_build(struct engram_rowmap *m, const struct engram_rowmap_held *h,
			unsigned int n);
unsigned int engram_rowmap_find(const struct engram_rowmap *m, u64 row);

#endif /* _ENGRAM_ROWMAP_H */
