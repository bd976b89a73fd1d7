// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of kmod/rowmap.c, built in userspace (ENGRAM_USERSPACE): a
 * table's rows cut by the candidates that hold them.  Fixed layouts (a
 * whole table, two shards, a gap, overlaps, a whole copy beside shards),
 * the refusals, then random layouts checked row by row against the
 * candidates' ranges themselves.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rowmap.h"
#include "tap.h"

static struct engram_rowmap m;

/* The candidates that hold @row, from their ranges alone. */
static u32 holders(const struct engram_rowmap_held *h, unsigned int n, u64 row)
{
	u32 mask = 0;
	unsigned int i;

	for (i = 0; i < n; i++)
		if (h[i].first <= row && row - h[i].first < h[i].rows)
			mask |= 1U << i;
	return mask;
}

/* What the map says of @row: its holders, 0 when none. */
static u32 found(u64 row)
{
	unsigned int r = engram_rowmap_find(&m, row);

	return r == m.nr ? 0 : m.mask[r];
}

/*
 * Every row of [0, end) found as its holders say, the ranges ascending and
 * never two neighbours with one mask.  Returns NULL or what is wrong.
 */
static const char *agrees(const struct engram_rowmap_held *h, unsigned int n, u64 end)
{
	static char why[128];
	unsigned int i;
	u64 row;

	for (i = 0; i < m.nr; i++) {
		if (m.pts[i] >= m.pts[i + 1])
			return "ranges not ascending";
		if (i && m.mask[i] == m.mask[i - 1])
			return "two neighbours with one mask";
	}
	for (row = 0; row < end; row++) {
		if (found(row) != holders(h, n, row)) {
			snprintf(why, sizeof(why), "row %llu: map says %#x, ranges %#x",
				 (unsigned long long)row, found(row), holders(h, n, row));
			return why;
		}
	}
	return NULL;
}

static void test_fixed(void)
{
	const struct engram_rowmap_held whole[] = { { 0, 100 } };
	const struct engram_rowmap_held two[] = { { 0, 60 }, { 60, 40 } };
	const struct engram_rowmap_held gap[] = { { 0, 50 }, { 70, 30 } };
	const struct engram_rowmap_held mix[] = { { 0, 100 }, { 0, 50 }, { 50, 50 }, { 0, 100 } };
	const struct engram_rowmap_held over[] = { { 10, 50 }, { 40, 50 } };
	const struct engram_rowmap_held same[] = { { 0, 60 }, { 0, 60 } };

	tap_ok(!engram_rowmap_build(&m, whole, 1) && m.nr == 1 && m.pts[0] == 0 &&
	       m.pts[1] == 100 && m.mask[0] == 1, "a whole table: one range, one holder");
	tap_ok(engram_rowmap_find(&m, 0) == 0 && engram_rowmap_find(&m, 99) == 0 &&
	       engram_rowmap_find(&m, 100) == 1 && engram_rowmap_find(&m, UINT64_MAX) == 1,
	       "its rows are found, the row past its end is not");
	tap_ok(!engram_rowmap_build(&m, two, 2) && m.nr == 2 && m.pts[1] == 60 &&
	       m.mask[0] == 1 && m.mask[1] == 2 && !agrees(two, 2, 101),
	       "two shards: two ranges, one holder each");
	tap_ok(!engram_rowmap_build(&m, gap, 2) && m.nr == 3 && m.mask[1] == 0 &&
	       engram_rowmap_find(&m, 50) == 3 && engram_rowmap_find(&m, 69) == 3 &&
	       engram_rowmap_find(&m, 70) == 2 && !agrees(gap, 2, 101),
	       "a gap between shards is a range no one holds: its rows are not found");
	tap_ok(!engram_rowmap_build(&m, mix, 4) && m.nr == 2 && m.mask[0] == 0xb &&
	       m.mask[1] == 0xd && !agrees(mix, 4, 101),
	       "two whole copies beside two shards: each half held by three");
	tap_ok(!engram_rowmap_build(&m, over, 2) && m.nr == 3 && m.mask[1] == 3 &&
	       engram_rowmap_find(&m, 9) == 3 && !agrees(over, 2, 101),
	       "overlapping shards: the overlap is held by both, nothing before the first");
	tap_ok(!engram_rowmap_build(&m, same, 2) && m.nr == 1 && m.mask[0] == 3,
	       "two replicas of one shard: one range, two holders");
	tap_ok(!engram_rowmap_build(&m, NULL, 0) && m.nr == 0 && engram_rowmap_find(&m, 0) == 0,
	       "no candidate: no range, no row found");
}

static void test_refused(void)
{
	struct engram_rowmap_held h[ENGRAM_ROWMAP_MAX_HELD + 1];
	const struct engram_rowmap_held empty[] = { { 0, 10 }, { 5, 0 } };
	const struct engram_rowmap_held wraps[] = { { UINT64_MAX - 1, 3 } };
	unsigned int i;

	for (i = 0; i < ENGRAM_ROWMAP_MAX_HELD + 1; i++) {
		h[i].first = i;
		h[i].rows = 1000 - 2 * i;
	}
	tap_ok(engram_rowmap_build(&m, h, ENGRAM_ROWMAP_MAX_HELD + 1) == -EINVAL && m.nr == 0,
	       "%d candidates are refused", ENGRAM_ROWMAP_MAX_HELD + 1);
	tap_ok(!engram_rowmap_build(&m, h, ENGRAM_ROWMAP_MAX_HELD) &&
	       m.nr == ENGRAM_ROWMAP_MAX_RANGES && !agrees(h, ENGRAM_ROWMAP_MAX_HELD, 1001),
	       "%d nested candidates: all %d ranges, every row right", ENGRAM_ROWMAP_MAX_HELD,
	       ENGRAM_ROWMAP_MAX_RANGES);
	tap_ok(engram_rowmap_build(&m, empty, 2) == -EINVAL && m.nr == 0,
	       "a range of no rows is refused");
	tap_ok(engram_rowmap_build(&m, wraps, 1) == -EINVAL && m.nr == 0,
	       "a range that wraps is refused");
}

/* Random layouts of up to 16 candidates over 64 rows: every row agrees. */
static void test_random(void)
{
	struct engram_rowmap_held h[ENGRAM_ROWMAP_MAX_HELD];
	unsigned int run, i, n, bad = 0;
	const char *why = NULL;

	srand(17);
	for (run = 0; run < 20000 && !bad; run++) {
		n = 1 + rand() % ENGRAM_ROWMAP_MAX_HELD;
		for (i = 0; i < n; i++) {
			h[i].first = rand() % 64;
			h[i].rows = 1 + rand() % (64 - h[i].first);
			if (rand() % 4 == 0) {	/* a whole copy, often */
				h[i].first = 0;
				h[i].rows = 64;
			}
		}
		if (engram_rowmap_build(&m, h, n) || m.nr > ENGRAM_ROWMAP_MAX_RANGES) {
			why = "build failed";
			bad++;
			break;
		}
		why = agrees(h, n, 66);
		if (why)
			bad++;
	}
	if (!tap_ok(!bad, "20,000 random layouts: every row found as its holders say"))
		tap_diag("run %u: %s", run, why);
}

int main(void)
{
	test_fixed();
	test_refused();
	test_random();
	return tap_done();
}
