// SPDX-License-Identifier: GPL-2.0
/* The page cache in folios: lookups, readahead and reads (5.19, 6.x). */
#include <linux/err.h>
#include <linux/pagemap.h>

static __maybe_unused struct folio *probe(struct file *file, struct file_ra_state *ra,
					  pgoff_t idx)
{
	DEFINE_READAHEAD(ractl, file, ra, file->f_mapping, idx);
	struct folio *folio = filemap_get_folio(file->f_mapping, idx);

	if (IS_ERR_OR_NULL(folio))
		page_cache_sync_ra(&ractl, 1);
	else if (folio_test_readahead(folio))
		page_cache_async_ra(&ractl, folio, 1);
	folio = read_cache_folio(file->f_mapping, idx, NULL, file);
	folio_ref_add(folio, folio_nr_pages(folio));
	return folio;
}
