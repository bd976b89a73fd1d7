// SPDX-License-Identifier: GPL-2.0
/*
 * A table's rows by the candidates that hold them.  A fetch of a table
 * served by shards (hosts that each hold a range of its rows) sends each
 * row to a candidate that holds it: this finds, for a row, the range it
 * falls in and so the candidates that may take it, in a few comparisons.
 */
#ifdef ENGRAM_USERSPACE
#include <errno.h>
#include <string.h>
#else
#include <linux/errno.h>
#include <linux/string.h>
#endif

#include "rowmap.h"

/* Insert @v into the ascending @pts of @np values, unless it is there. */
static unsigned int engram_rowmap_insert(u64 *pts, unsigned int np, u64 v)
{
	unsigned int at = np;

	while (at && pts[at - 1] > v)
		at--;
	if (at && pts[at - 1] == v)
		return np;
	memmove(&pts[at + 1], &pts[at], (np - at) * sizeof(*pts));
	pts[at] = v;
	return np + 1;
}

/**
 * engram_rowmap_build() - cut a table's rows by who holds them
 * @m: filled in
 * @h: the rows each candidate holds; candidate k is bit k of a mask
 * @n: candidates, up to ENGRAM_ROWMAP_MAX_HELD
 *
 * Return: 0, or -EINVAL (too many candidates, a range of no rows or one
 * that wraps); @m then holds no range.
 */
int engram_rowmap_build(struct engram_rowmap *m, const struct engram_rowmap_held *h,
			unsigned int n)
{
	unsigned int i, j, np = 0;

	m->nr = 0;
	if (n > ENGRAM_ROWMAP_MAX_HELD)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!h[i].rows || h[i].first + h[i].rows < h[i].first)
			return -EINVAL;
		np = engram_rowmap_insert(m->pts, np, h[i].first);
		np = engram_rowmap_insert(m->pts, np, h[i].first + h[i].rows);
	}
	/*
	 * Compacted in place: range j's ends are read before anything at or
	 * after j + 1 is written.
	 */
	for (j = 0; j + 1 < np; j++) {
		u64 lo = m->pts[j], hi = m->pts[j + 1];
		u32 mask = 0;

		for (i = 0; i < n; i++)
			if (h[i].first <= lo && hi <= h[i].first + h[i].rows)
				mask |= 1U << i;
		if (m->nr && m->mask[m->nr - 1] == mask) {
			m->pts[m->nr] = hi;
			continue;
		}
		m->pts[m->nr] = lo;
		m->mask[m->nr++] = mask;
		m->pts[m->nr] = hi;
	}
	return 0;
}

/**
 * engram_rowmap_find() - the range a row falls in
 * @m: built by engram_rowmap_build()
 * @row: a row of the table
 *
 * Return: the range's index, whose mask says who holds the row, or @m->nr
 * when no candidate holds it (before the first range, after the last, or
 * in a gap).
 */
unsigned int engram_rowmap_find(const struct engram_rowmap *m, u64 row)
{
	unsigned int lo = 0, hi = m->nr;

	if (!m->nr || row < m->pts[0] || row >= m->pts[m->nr])
		return m->nr;
	while (hi - lo > 1) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (m->pts[mid] <= row)
			lo = mid;
		else
			hi = mid;
	}
	return m->mask[lo] ? lo : m->nr;
}
