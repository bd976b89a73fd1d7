// SPDX-License-Identifier: GPL-2.0
/* kmap_local_page() (5.11). */
#include <linux/highmem.h>

static __maybe_unused void probe(struct page *page)
{
	kunmap_local(kmap_local_page(page));
}
