// SPDX-License-Identifier: GPL-2.0
/* sg_alloc_table_from_pages_segment() (5.15). */
#include <linux/scatterlist.h>

static __maybe_unused int probe(struct sg_table *sgt, struct page **pages)
{
	return sg_alloc_table_from_pages_segment(sgt, pages, 1, 0, PAGE_SIZE, UINT_MAX,
						 GFP_KERNEL);
}
