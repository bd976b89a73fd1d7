/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels the module builds for (5.10 to 7.3)
 * is handled here and nowhere else.  The code is written against the newest
 * interfaces; where a kernel lacks one, this header supplies it under the
 * kernel's own name, as WireGuard's compat layer does, or, where the old
 * and new interfaces cannot share a name (the page cache before and after
 * folios), an engram_compat_*() helper with one body per kind of kernel.
 *
 * Nothing here tests a version number.  Each ENGRAM_HAVE_* comes from a
 * probe in probes/ that Kbuild compiles against the headers being built
 * for (compat-probe.sh), so a distribution kernel with a backported
 * interface gets the real one.
 */
#ifndef _ENGRAM_COMPAT_H
#define _ENGRAM_COMPAT_H

#include <linux/highmem.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/socket.h>
#include <linux/swap.h>
#include <linux/uio.h>
#include <net/genetlink.h>
#include <net/netlink.h>
#include <rdma/ib_verbs.h>

#include "compat_probed.h"

#ifdef ENGRAM_HAVE_FOLIO_BATCH_H
#include <linux/folio_batch.h>
#else
#include <linux/pagevec.h>
#endif

/* 7.x: socket addresses passed with their length are "unsized". */
#ifndef ENGRAM_HAVE_SOCKADDR_UNSIZED
#define sockaddr_unsized sockaddr
#endif

#ifndef ENGRAM_HAVE_GET_RANDOM_U32_BELOW
static inline u32 get_random_u32_below(u32 ceil)
{
	return prandom_u32_max(ceil);
}
#endif

/*
 * A generic netlink multicast group that only CAP_NET_ADMIN may join.
 * Before 6.7 (and the stable kernels that took the same fix, such as
 * Debian's 6.1) a group cannot require a capability: there it is open to
 * every user.
 */
#ifdef ENGRAM_HAVE_GENL_MCAST_CAP
#define ENGRAM_COMPAT_MCGRP_ADMIN(n)	{ .name = (n), .flags = GENL_MCAST_CAP_NET_ADMIN }
#define ENGRAM_COMPAT_MCGRP_ADMIN_ONLY	true
#else
#define ENGRAM_COMPAT_MCGRP_ADMIN(n)	{ .name = (n) }
/* So its messages must say only what every local user may read. */
#define ENGRAM_COMPAT_MCGRP_ADMIN_ONLY	false
#endif

/*
 * 6.2 named an iov_iter's direction by what the iterator is to the caller;
 * stable took the names late (Debian's 5.10.0-46 has them; 5.10.0-30 and
 * -32, the kernels of bullseye's main archive, do not).  They are macros
 * with the values of the READ and WRITE they replaced.
 */
#ifndef ITER_SOURCE
#define ITER_SOURCE	WRITE
#define ITER_DEST	READ
#endif

/* Before 6.0 an extack cannot name a missing attribute; the message stays. */
#ifndef NL_SET_ERR_ATTR_MISS
#define NL_SET_ERR_ATTR_MISS(extack, nest, type) ((void)(extack))
#endif

/* Tables are mapped whole and rows addressed by 64-bit offsets. */
#ifndef CONFIG_64BIT
#error "engram-rdma needs a 64-bit kernel"
#endif

/* A 64-bit kernel has no highmem: every page has its kernel address. */
#ifndef ENGRAM_HAVE_KMAP_LOCAL_PAGE
static inline void *kmap_local_page(struct page *page)
{
	return page_address(page);
}

static inline void kunmap_local(const void *addr)
{
}
#endif

#ifndef ENGRAM_HAVE_SG_ALLOC_TABLE_FROM_PAGES_SEGMENT
static inline int sg_alloc_table_from_pages_segment(struct sg_table *sgt, struct page **pages,
						    unsigned int n_pages, unsigned int offset,
						    unsigned long size, unsigned int max_segment,
						    gfp_t gfp_mask)
{
	return PTR_ERR_OR_ZERO(__sg_alloc_table_from_pages(sgt, pages, n_pages, offset, size,
							   max_segment, NULL, 0, gfp_mask));
}
#endif

#ifndef ENGRAM_HAVE_IB_DMA_MAP_SGTABLE_ATTRS
static inline int ib_dma_map_sgtable_attrs(struct ib_device *dev, struct sg_table *sgt,
					   enum dma_data_direction dir, unsigned long attrs)
{
	int n = ib_dma_map_sg_attrs(dev, sgt->sgl, sgt->orig_nents, dir, attrs);

	if (n <= 0)
		return -ENOMEM;
	sgt->nents = n;
	return 0;
}

static inline void ib_dma_unmap_sgtable_attrs(struct ib_device *dev, struct sg_table *sgt,
					      enum dma_data_direction dir, unsigned long attrs)
{
	ib_dma_unmap_sg_attrs(dev, sgt->sgl, sgt->orig_nents, dir, attrs);
}
#endif

/**
 * engram_compat_can_read_cache() - whether a mapping can be read through the page cache
 * @mapping: the file's mapping
 *
 * Return: true when the file system reads pages into the page cache (tmpfs,
 * for one, does not).
 */
static inline bool engram_compat_can_read_cache(struct address_space *mapping)
{
#ifdef ENGRAM_HAVE_AOPS_READ_FOLIO
	return mapping->a_ops->read_folio;
#else
	return mapping->a_ops->readpage;
#endif
}

/**
 * engram_compat_read_pages() - read a file's pages at @idx, with readahead
 * @file: the file
 * @ra: its readahead state, for this reader
 * @idx: the page wanted
 * @end: the page after the last one the reader will want
 * @pages: where the pages go
 *
 * Streams as filemap_read() does: synchronous readahead where the page is
 * missing, asynchronous readahead when the reader reaches the marker of the
 * previous window, so that I/O runs ahead of the reader.  Returns the pages
 * from @idx to the end of the folio holding it (one page on a kernel whose
 * page cache is not in folios), capped at @end, each uptodate and with a
 * reference of its own that put_page() drops.
 *
 * Return: the number of pages in @pages (at least 1), or a negative errno.
 */
static inline long engram_compat_read_pages(struct file *file, struct file_ra_state *ra,
					    pgoff_t idx, pgoff_t end, struct page **pages)
{
#ifdef ENGRAM_HAVE_READ_CACHE_FOLIO
	DEFINE_READAHEAD(ractl, file, ra, file->f_mapping, idx);
	struct folio *folio;
	pgoff_t first, cnt, i;

	/* NULL on older kernels, ERR_PTR(-ENOENT) on newer ones. */
	folio = filemap_get_folio(file->f_mapping, idx);
	if (IS_ERR_OR_NULL(folio)) {
		page_cache_sync_ra(&ractl, end - idx);
	} else {
		if (folio_test_readahead(folio))
			page_cache_async_ra(&ractl, folio, end - idx);
		folio_put(folio);
	}
	folio = read_cache_folio(file->f_mapping, idx, NULL, file);
	if (IS_ERR(folio))
		return PTR_ERR(folio);
	/* The folio may be large and may start before idx. */
	first = idx - folio->index;
	cnt = min_t(pgoff_t, folio_nr_pages(folio) - first, end - idx);
	if (cnt > 1)
		folio_ref_add(folio, cnt - 1);
	for (i = 0; i < cnt; i++)
		pages[i] = folio_page(folio, first + i);
	return cnt;
#else
	struct address_space *mapping = file->f_mapping;
	struct page *page = find_get_page(mapping, idx);

	if (!page) {
		page_cache_sync_readahead(mapping, ra, file, idx, end - idx);
	} else {
		if (PageReadahead(page))
			page_cache_async_readahead(mapping, ra, file, page, idx, end - idx);
		put_page(page);
	}
	page = read_cache_page(mapping, idx, NULL, file);
	if (IS_ERR(page))
		return PTR_ERR(page);
	pages[0] = page;
	return 1;
#endif
}

/**
 * engram_compat_rescue_mapping() - put a mapping's pages back on the LRU lists
 * @mapping: the mapping, evictable again
 *
 * As shmem_unlock_mapping() does: every page or folio of the mapping that
 * sits on the unevictable list is moved back.
 */
static inline void engram_compat_rescue_mapping(struct address_space *mapping)
{
	pgoff_t index = 0;
#ifdef ENGRAM_HAVE_FILEMAP_GET_FOLIOS
	struct folio_batch fbatch;

	folio_batch_init(&fbatch);
	while (filemap_get_folios(mapping, &index, ~0UL, &fbatch)) {
		check_move_unevictable_folios(&fbatch);
		folio_batch_release(&fbatch);
		cond_resched();
	}
#else
	struct pagevec pvec;

	pagevec_init(&pvec);
	while (pagevec_lookup_range(&pvec, mapping, &index, ~0UL)) {
		check_move_unevictable_pages(&pvec);
		pagevec_release(&pvec);
		cond_resched();
	}
#endif
}

#endif /* _ENGRAM_COMPAT_H */
