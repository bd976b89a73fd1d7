// SPDX-License-Identifier: GPL-2.0
/* Walking a mapping in folio batches, back to the LRU (6.0, 6.1). */
#include <linux/pagemap.h>
#include <linux/swap.h>

static __maybe_unused void probe(struct address_space *mapping, struct folio_batch *fbatch)
{
	pgoff_t index = 0;

	if (filemap_get_folios(mapping, &index, ~0UL, fbatch))
		check_move_unevictable_folios(fbatch);
}
