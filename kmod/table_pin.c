// SPDX-License-Identifier: GPL-2.0
/*
 * A table's pages: its file read through the page cache as a streaming
 * read does, a folio reference kept on every page, pages that sit in
 * ZONE_MOVABLE read again outside it, and the SHA-256 of the file taken
 * on the way; and the same hash again for a verify.  The table's list,
 * its state and what the pins mean for the mapping are table.c's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <crypto/hash.h>
#include <linux/fadvise.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/swap.h>

#include "compat.h"
#include "table.h"

/* Readahead window for loads: the whole file is wanted, so read big. */
#define ENGRAM_RA_PAGES		((8U << 20) >> PAGE_SHIFT)

static int engram_table_pin_hash_page(struct engram_table *t, struct shash_desc *desc,
				      struct page *page, pgoff_t i)
{
	u64 pos = (u64)i << PAGE_SHIFT;
	size_t len = min_t(u64, PAGE_SIZE, t->file_bytes - pos);
	void *p = kmap_local_page(page);
	int ret;

	ret = crypto_shash_update(desc, p, len);
	kunmap_local(p);
	return ret;
}

static int engram_table_pin_hash(struct engram_table *t, struct shash_desc *desc,
				 pgoff_t first, pgoff_t count)
{
	pgoff_t i;
	int ret;

	for (i = first; i < first + count; i++) {
		ret = engram_table_pin_hash_page(t, desc, t->pages[i], i);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Does the table pin page @idx of its file?  A whole table pins every page;
 * a shard only those that hold bytes of its rows' weights or scales, so
 * that a table larger than one host's RAM can be served by several.
 */
static bool engram_table_pin_keeps_page(const struct engram_table *t, pgoff_t idx)
{
	u64 lo = (u64)idx << PAGE_SHIFT, hi = lo + PAGE_SIZE;
	u64 w0 = t->weight_offset + t->held_first * ENGRAM_WEIGHT_BYTES;
	u64 w1 = w0 + t->held_rows * ENGRAM_WEIGHT_BYTES;
	u64 s0 = t->scale_offset + t->held_first * ENGRAM_SCALE_BYTES;
	u64 s1 = s0 + t->held_rows * ENGRAM_SCALE_BYTES;

	if (t->held_rows == t->rows)
		return true;
	return (lo < w1 && w0 < hi) || (lo < s1 && s0 < hi);
}

/*
 * A shard keeps only the pages of its rows: let go of the others in
 * [@idx, @idx + @cnt) once hashed, and drop them from the page cache, so
 * that a file larger than RAM streams through.  Pages we keep, or another
 * table of the file pins, are not dropped (they are referenced).
 */
static void engram_table_pin_trim(struct engram_table *t, pgoff_t idx, long cnt)
{
	pgoff_t i, kept = 0;
	bool dropped = false;

	for (i = idx; i < idx + cnt; i++) {
		if (engram_table_pin_keeps_page(t, i)) {
			kept++;
			continue;
		}
		put_page(t->pages[i]);
		t->pages[i] = NULL;
		dropped = true;
	}
	WRITE_ONCE(t->nr_kept, t->nr_kept + kept);
	if (dropped)
		vfs_fadvise(t->file, (loff_t)idx << PAGE_SHIFT, (loff_t)cnt << PAGE_SHIFT,
			    POSIX_FADV_DONTNEED);
}

/*
 * Pinned pages stay where they are for as long as the table is loaded, so,
 * as FOLL_LONGTERM does for user pages, they must not sit where memory has
 * to stay movable: ZONE_MOVABLE (memory hot-unplug, movablecore=) and CMA.
 * Page cache is allocated movable (GFP_HIGHUSER_MOVABLE), so while a table
 * pins a file its mapping allocates without __GFP_MOVABLE, which keeps new
 * pages out of both, and pages cached before are dropped at the start of
 * the load and read again (engram_table_pin_file()).  What survives that (a
 * page mapped or dirtied by someone else) is checked here; a module cannot
 * read a page's CMA pageblock type (get_pfnblock_flags_mask() is not
 * exported), so that check sees ZONE_MOVABLE only.
 */
static bool engram_table_pin_movable(struct page *page)
{
	return page_zonenum(page) == ZONE_MOVABLE;
}

/*
 * Write back and drop the unpinned pages of [@idx, @idx + @nr), so that they
 * are read again outside movable memory.  Pages already pinned have our
 * reference and stay.  POSIX_FADV_DONTNEED rather than
 * invalidate_mapping_pages(): it also drains the per-CPU LRU batches, whose
 * references would keep freshly read pages (the header engramctl just
 * parsed) from being dropped.
 */
static void engram_table_pin_drop_cached(struct engram_table *t, pgoff_t idx, pgoff_t nr)
{
	loff_t start = (loff_t)idx << PAGE_SHIFT, len = (loff_t)nr << PAGE_SHIFT;

	filemap_write_and_wait_range(t->mapping, start, start + len - 1);
	vfs_fadvise(t->file, start, len, POSIX_FADV_DONTNEED);
}

/* Drop the references engram_compat_read_pages() took on @n pages. */
static void engram_table_pin_put(struct page **pages, long n)
{
	while (n-- > 0)
		put_page(pages[n]);
}

/*
 * Read every page of the file into the page cache, take a reference per page
 * and hash it.
 */
static int engram_table_pin_file(struct engram_table *t, struct shash_desc *desc,
				 char *msg, size_t msglen)
{
	struct file_ra_state ra = {};
	pgoff_t idx = 0;
	int ret;

	file_ra_state_init(&ra, t->mapping);
	ra.ra_pages = max_t(unsigned int, ra.ra_pages, ENGRAM_RA_PAGES);
	/*
	 * Pages cached before the load may be in ZONE_MOVABLE or CMA: drop the
	 * clean, unmapped ones, so that they are read again where they may
	 * stay pinned.  (Reading is not what a load costs, hashing is.)
	 */
	if (t->drop_cached)
		engram_table_pin_drop_cached(t, 0, t->nr_pages);

	while (idx < t->nr_pages) {
		u64 pos = (u64)idx << PAGE_SHIFT;
		long cnt;

		if (READ_ONCE(t->cancel))
			return -ECANCELED;
		cnt = engram_compat_read_pages(t->file, &ra, idx, t->nr_pages, t->pages + idx);
		if (cnt > 0 && engram_table_pin_movable(t->pages[idx])) {
			engram_table_pin_put(t->pages + idx, cnt);
			engram_table_pin_drop_cached(t, idx, min_t(pgoff_t, ENGRAM_RA_PAGES,
								   t->nr_pages - idx));
			t->nr_moved += min_t(pgoff_t, ENGRAM_RA_PAGES, t->nr_pages - idx);
			cnt = engram_compat_read_pages(t->file, &ra, idx, t->nr_pages,
						       t->pages + idx);
			if (cnt > 0 && engram_table_pin_movable(t->pages[idx])) {
				engram_table_pin_put(t->pages + idx, cnt);
				snprintf(msg, msglen,
					 "page at offset %llu is in ZONE_MOVABLE and cannot be moved out (mapped or busy): close the file's other users and load again",
					 pos);
				return -EBUSY;
			}
		}
		if (cnt < 0) {
			snprintf(msg, msglen, "read error at offset %llu", pos);
			return cnt;
		}
		WRITE_ONCE(t->nr_pinned, idx + cnt);

		ret = engram_table_pin_hash(t, desc, idx, cnt);
		engram_table_pin_trim(t, idx, cnt);
		if (ret) {
			snprintf(msg, msglen, "SHA-256 update failed");
			return ret;
		}
		idx += cnt;
		atomic64_set(&t->done_bytes, min_t(u64, (u64)idx << PAGE_SHIFT, t->file_bytes));
		cond_resched();
	}
	return 0;
}

/**
 * engram_table_pin_rescue() - put a file's folios back on the LRU lists
 * @mapping: the file's mapping, evictable again
 *
 * Once the mapping is evictable again, move back every folio of the file
 * that reclaim or the page cache parked on the unevictable list while the
 * flag was set: not only the ones we held, but readahead beyond the cursor
 * of a cancelled load and pages other readers brought in.  As
 * shmem_unlock_mapping() does.
 */
void engram_table_pin_rescue(struct address_space *mapping)
{
	engram_compat_rescue_mapping(mapping);
}

static struct shash_desc *engram_table_pin_sha256_alloc(void)
{
	struct crypto_shash *tfm = crypto_alloc_shash("sha256", 0, 0);
	struct shash_desc *desc;

	if (IS_ERR(tfm))
		return ERR_CAST(tfm);
	desc = kmalloc(sizeof(*desc) + crypto_shash_descsize(tfm), GFP_KERNEL);
	if (!desc) {
		crypto_free_shash(tfm);
		return ERR_PTR(-ENOMEM);
	}
	desc->tfm = tfm;
	return desc;
}

static void engram_table_pin_sha256_free(struct shash_desc *desc)
{
	crypto_free_shash(desc->tfm);
	kfree_sensitive(desc);
}

/**
 * engram_table_pin_load() - read, pin and hash a table's whole file
 * @t: the table, loading (its worker)
 * @sha: the file's SHA-256, on success
 * @msg: what went wrong, on failure (may stay empty)
 * @msglen: its size
 *
 * The pages pinned so far stay pinned on failure; table.c releases them.
 *
 * Return: 0, -ECANCELED when @t->cancel was set, or another errno.
 */
int engram_table_pin_load(struct engram_table *t, u8 *sha, char *msg, size_t msglen)
{
	struct shash_desc *desc;
	int ret;

	desc = engram_table_pin_sha256_alloc();
	if (IS_ERR(desc)) {
		snprintf(msg, msglen, "cannot set up SHA-256");
		return PTR_ERR(desc);
	}
	ret = crypto_shash_init(desc);
	if (!ret)
		ret = engram_table_pin_file(t, desc, msg, msglen);
	if (!ret)
		ret = crypto_shash_final(desc, sha);
	engram_table_pin_sha256_free(desc);
	return ret;
}

/* Pages a shard's verify reads at a time, of those it does not keep. */
#define ENGRAM_REHASH_BATCH	64

/*
 * Hash [@i, @i + @cnt) of a shard's file: its own pages as they are, the
 * others read again through the page cache and dropped after.
 */
static int engram_table_pin_rehash_shard(struct engram_table *t, struct shash_desc *desc,
					 struct file_ra_state *ra, pgoff_t i, pgoff_t cnt)
{
	struct page *tmp[ENGRAM_REHASH_BATCH];
	pgoff_t end = i + cnt, k;
	long got;
	int ret = 0;

	while (!ret && i < end) {
		if (t->pages[i]) {
			ret = engram_table_pin_hash_page(t, desc, t->pages[i], i);
			i++;
			continue;
		}
		got = engram_compat_read_pages(t->file, ra, i,
					       min_t(pgoff_t, end, i + ENGRAM_REHASH_BATCH), tmp);
		if (got < 0)
			return got;
		for (k = 0; k < got; k++) {
			if (!ret)
				ret = engram_table_pin_hash_page(t, desc, tmp[k], i + k);
			put_page(tmp[k]);
		}
		vfs_fadvise(t->file, (loff_t)i << PAGE_SHIFT, (loff_t)got << PAGE_SHIFT,
			    POSIX_FADV_DONTNEED);
		i += got;
	}
	return ret;
}

/**
 * engram_table_pin_rehash() - hash a loaded table's file again
 * @t: the table, verifying (its worker)
 * @sha: the SHA-256 of the pages as they are now
 *
 * A whole table's pinned pages; a shard's own pages and the rest of the
 * file read again, since the SHA-256 is the whole file's.
 *
 * Return: 0, -ECANCELED when @t->cancel was set, or another errno.
 */
int engram_table_pin_rehash(struct engram_table *t, u8 *sha)
{
	struct file_ra_state ra = {};
	struct shash_desc *desc;
	pgoff_t i;
	int ret;

	desc = engram_table_pin_sha256_alloc();
	if (IS_ERR(desc))
		return PTR_ERR(desc);
	file_ra_state_init(&ra, t->mapping);
	ra.ra_pages = max_t(unsigned int, ra.ra_pages, ENGRAM_RA_PAGES);
	ret = crypto_shash_init(desc);
	for (i = 0; !ret && i < t->nr_pages; i += 256) {
		pgoff_t cnt = min_t(pgoff_t, 256, t->nr_pages - i);

		if (READ_ONCE(t->cancel)) {
			ret = -ECANCELED;
			break;
		}
		if (t->held_rows == t->rows)
			ret = engram_table_pin_hash(t, desc, i, cnt);
		else
			ret = engram_table_pin_rehash_shard(t, desc, &ra, i, cnt);
		atomic64_set(&t->done_bytes,
			     min_t(u64, (u64)(i + cnt) << PAGE_SHIFT, t->file_bytes));
		cond_resched();
	}
	if (!ret)
		ret = crypto_shash_final(desc, sha);
	engram_table_pin_sha256_free(desc);
	return ret;
}
