// SPDX-License-Identifier: GPL-2.0
/*
 * Page arrays mapped for RDMA devices: a table's pinned page-cache pages
 * (read by the server's WRITEs) and a registered user buffer's pages
 * (written by them).
 *
 * An array is mapped once per device, outside the data path: a table when
 * its load ends and when a device appears (table.c's map worker), a buffer
 * on its first use per device under the buffer's own mutex.  Mapping goes
 * through scatterlists in chunks of ENGRAM_DMA_CHUNK pages, so an IOMMU gets
 * large segments and one call maps a gigabyte rather than a page; the
 * per-page address the data path needs is then read off the mapped segments
 * into an array.
 *
 * Lookups (engram_dma_lookup(), engram_dma_sync()) take no lock: an owner's
 * maps are an RCU list.  Creating and freeing maps takes the owner's mutex;
 * a departing device's maps are found through the module-wide list of
 * owners, whose mutex only map teardown and owner registration take.
 *
 * Lock order: engram_dma_owners_mutex, then an owner's lock, then
 * dev.c's engram_devs_mutex (inside engram_dev_dead()).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bits.h>
#include <linux/mutex.h>
#include <linux/rculist.h>
#include <linux/scatterlist.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "engram.h"
#include "inject.h"

/*
 * Pages per scatterlist, which bounds one map call: 1 GiB of 4 KiB pages,
 * 4 GiB of 16 KiB ones.
 */
#define ENGRAM_DMA_CHUNK	BIT(18)

struct engram_dma_map {
	struct list_head node;		/* on the owner's maps, RCU */
	/*
	 * On an unmapper's list of maps to free: not @node, which a lock-free
	 * reader may still be following until the grace period ends.
	 */
	struct list_head gone;
	struct rcu_head rcu;
	struct ib_device *dev;
	enum dma_data_direction dir;
	dma_addr_t *addr;		/* one per page */
	unsigned long nr;		/* pages */
	unsigned int nr_chunks;		/* chunks mapped */
	unsigned int nr_alloc;		/* chunks allocated */
	struct sg_table *chunks;
};

static LIST_HEAD(engram_dma_owners);
static DEFINE_MUTEX(engram_dma_owners_mutex);	/* engram_dma_owners */

/**
 * engram_dma_owner_init() - prepare an owner of per-device maps
 * @o: the owner, embedded in a table or a buffer
 */
void engram_dma_owner_init(struct engram_dma_owner *o)
{
	INIT_LIST_HEAD(&o->maps);
	INIT_LIST_HEAD(&o->node);
	mutex_init(&o->lock);
}

/* The map is off every list and no reader can see it any more. */
static void engram_dma_map_free(struct engram_dma_map *m)
{
	unsigned int i;

	for (i = 0; i < m->nr_chunks; i++) {
		ib_dma_unmap_sgtable_attrs(m->dev, &m->chunks[i], m->dir, 0);
		cond_resched();
	}
	/* A map whose chunk array could not be allocated has no table to free. */
	for (i = 0; m->chunks && i < m->nr_alloc; i++)
		sg_free_table(&m->chunks[i]);
	kvfree(m->chunks);
	kvfree(m->addr);
	kfree_rcu(m, rcu);
}

/*
 * Map pages [first, first + n) as chunk @c and read each page's address off
 * the mapped segments.  Every entry is whole pages, so each segment is too;
 * an IOMMU may merge entries, never split a page.
 */
static int engram_dma_map_chunk(struct engram_dma_map *m, struct page **pages,
				unsigned long first, unsigned int n, unsigned int c)
{
	struct sg_table *sgt = &m->chunks[c];
	unsigned int max_seg = max_t(unsigned int, PAGE_SIZE,
				     round_down(ib_dma_max_seg_size(m->dev), PAGE_SIZE));
	unsigned long p = first;
	struct scatterlist *sg;
	unsigned int i;
	int ret;

	ret = sg_alloc_table_from_pages_segment(sgt, pages + first, n, 0,
						(unsigned long)n << PAGE_SHIFT, max_seg,
						GFP_KERNEL);
	if (ret)
		return ret;
	ret = engram_dma_map_sgtable(m->dev, sgt, m->dir);
	if (ret)
		return ret;
	m->nr_chunks = c + 1;
	for_each_sgtable_dma_sg(sgt, sg, i) {
		dma_addr_t a = sg_dma_address(sg);
		unsigned int len = sg_dma_len(sg);

		if (WARN_ON_ONCE(!PAGE_ALIGNED(len) || p + (len >> PAGE_SHIFT) > first + n))
			return -EIO;
		for (; len; len -= PAGE_SIZE, a += PAGE_SIZE)
			m->addr[p++] = a;
	}
	return p == first + n ? 0 : -EIO;
}

static struct engram_dma_map *engram_dma_find(struct engram_dma_owner *o,
					      struct ib_device *dev)
{
	struct engram_dma_map *m;

	list_for_each_entry_rcu(m, &o->maps, node, lockdep_is_held(&o->lock))
		if (m->dev == dev)
			return m;
	return NULL;
}

/**
 * engram_dma_lookup() - the DMA address of every page of an array, if mapped
 * @o: the owner
 * @dev: the device
 *
 * Takes no lock.  The caller keeps the addresses valid by what it holds: a
 * table hold or a buffer reference keeps the owner's maps, a connection or
 * link on @dev keeps the device's (its removal tears those down first).
 *
 * Return: one address per page, or NULL when @o has no map for @dev yet.
 */
const dma_addr_t *engram_dma_lookup(struct engram_dma_owner *o, struct ib_device *dev)
{
	struct engram_dma_map *m;
	const dma_addr_t *addr;

	rcu_read_lock();
	m = engram_dma_find(o, dev);
	addr = m ? m->addr : NULL;
	rcu_read_unlock();
	return addr;
}

/*
 * The next chunk from @*pos: a run of at most ENGRAM_DMA_CHUNK pages that
 * are there (a shard's table has no page where it holds no rows).
 * Return: its length, 0 when no page is left; *pos is its first page.
 */
static unsigned int engram_dma_next_chunk(struct page **pages, unsigned long nr,
					  unsigned long *pos)
{
	unsigned long s = *pos, e;

	while (s < nr && !pages[s])
		s++;
	for (e = s; e < nr && pages[e] && e - s < ENGRAM_DMA_CHUNK; e++)
		;
	*pos = s;
	return e - s;
}

/**
 * engram_dma_map() - map every page of an array for a device, once
 * @o: the owner
 * @dev: the RDMA device that will access the pages
 * @pages: the pages, pinned for as long as @o keeps maps; NULL entries
 *	(a shard's table) get no address
 * @nr: how many
 * @dir: DMA_TO_DEVICE for pages the device reads, DMA_BIDIRECTIONAL for
 *	pages it writes next to bytes the CPU keeps
 * @created: if not NULL, set to whether this call made the map (rather
 *	than finding one another caller made)
 *
 * Kept until engram_dma_unmap_all() or engram_dma_unmap_device().  A device
 * being removed gets no new map.  Sleeps for as long as the mapping takes
 * (about a second per 10 GiB through an IOMMU): never call it where a
 * request waits.  Holds only @o's lock meanwhile.
 *
 * Return: one address per page, or NULL.
 */
const dma_addr_t *engram_dma_map(struct engram_dma_owner *o, struct ib_device *dev,
				 struct page **pages, unsigned long nr,
				 enum dma_data_direction dir, bool *created)
{
	unsigned long first, nchunks = 0;
	struct engram_dma_map *m;
	unsigned int c, n;
	int ret = -ENOMEM;

	if (created)
		*created = false;
	/* Known module-wide first, so a departing device finds our maps. */
	mutex_lock(&engram_dma_owners_mutex);
	if (list_empty(&o->node))
		list_add(&o->node, &engram_dma_owners);
	mutex_unlock(&engram_dma_owners_mutex);

	mutex_lock(&o->lock);
	m = engram_dma_find(o, dev);
	/* Under the lock, so the device's unmap cannot run in between. */
	if (m || !nr || engram_dev_dead(dev))
		goto out;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		goto out;
	m->dev = dev;
	m->dir = dir;
	m->nr = nr;
	for (first = 0; (n = engram_dma_next_chunk(pages, nr, &first)); first += n)
		nchunks++;
	m->addr = kvcalloc(nr, sizeof(*m->addr), GFP_KERNEL);
	m->chunks = kvcalloc(nchunks, sizeof(*m->chunks), GFP_KERNEL);
	if (!m->addr || !m->chunks)
		goto err;
	m->nr_alloc = nchunks;
	if (dir == DMA_TO_DEVICE)
		engram_fault_map();
	for (c = 0, first = 0; c < nchunks; c++, first += n) {
		n = engram_dma_next_chunk(pages, nr, &first);
		ret = engram_dma_map_chunk(m, pages, first, n, c);
		if (ret)
			goto err;
		/* A device removal waits for our lock: let it have it soon. */
		ret = -ENODEV;
		if (engram_dev_dead(dev))
			goto err;
		cond_resched();
	}
	list_add_tail_rcu(&m->node, &o->maps);
	if (created)
		*created = true;
	goto out;

err:
	pr_warn_ratelimited("cannot map %lu pages for %s: %d\n", nr, dev_name(&dev->dev), ret);
	engram_dma_map_free(m);
	m = NULL;
out:
	mutex_unlock(&o->lock);
	return m ? m->addr : NULL;
}

/**
 * engram_dma_sync() - hand bytes of a mapped array to the device, or back
 * @o: the owner
 * @dev: the device
 * @start: first byte, from the start of the array's first page
 * @len: bytes
 * @to_device: before the device accesses them (true) or after (false)
 *
 * Exactly those bytes, not their whole pages: with bounce buffers
 * (swiotlb) or a non-coherent device, a sync for the CPU copies what the
 * device side holds over the CPU's bytes, and the rest of a page may hold
 * rows another fetch, device or the CPU (TCP) placed meanwhile.  A no-op
 * on coherent machines without bounce buffers, and for an array not
 * mapped for @dev.  Takes no lock; may run while the map is being removed
 * (unmapping waits for an RCU grace period).
 */
void engram_dma_sync(struct engram_dma_owner *o, struct ib_device *dev, u64 start, u64 len,
		     bool to_device)
{
	struct engram_dma_map *m;
	u64 end = start + len;

	rcu_read_lock();
	m = engram_dma_find(o, dev);
	while (m && start < end && (start >> PAGE_SHIFT) < m->nr) {
		unsigned long i = start >> PAGE_SHIFT;
		u32 off = start & ~PAGE_MASK;
		u32 n = min_t(u64, PAGE_SIZE - off, end - start);

		if (to_device)
			ib_dma_sync_single_for_device(dev, m->addr[i] + off, n, m->dir);
		else
			ib_dma_sync_single_for_cpu(dev, m->addr[i] + off, n, m->dir);
		start += n;
	}
	rcu_read_unlock();
}

/* Move @o's maps of @dev (every map when NULL) off its list onto @gone. */
static void engram_dma_take(struct engram_dma_owner *o, struct ib_device *dev,
			    struct list_head *gone)
{
	struct engram_dma_map *m, *tmp;

	mutex_lock(&o->lock);
	list_for_each_entry_safe(m, tmp, &o->maps, node) {
		if (dev && m->dev != dev)
			continue;
		list_del_rcu(&m->node);
		list_add(&m->gone, gone);
	}
	mutex_unlock(&o->lock);
}

/* Free maps taken off their lists, once no lock-free reader can see them. */
static void engram_dma_free_gone(struct list_head *gone)
{
	struct engram_dma_map *m, *tmp;

	if (list_empty(gone))
		return;
	synchronize_rcu();
	list_for_each_entry_safe(m, tmp, gone, gone)
		engram_dma_map_free(m);
}

/**
 * engram_dma_unmap_all() - unmap every map of an owner that is going away
 * @o: the owner; nothing may map it again
 */
void engram_dma_unmap_all(struct engram_dma_owner *o)
{
	LIST_HEAD(gone);

	mutex_lock(&engram_dma_owners_mutex);
	list_del_init(&o->node);
	mutex_unlock(&engram_dma_owners_mutex);
	engram_dma_take(o, NULL, &gone);
	engram_dma_free_gone(&gone);
}

/**
 * engram_dma_unmap_device() - unmap every map of a departing device
 * @dev: the device, with no connection or link left on it, and marked dead
 *	(engram_dev_dead()) so that no new map is made
 *
 * Waits for a map of @dev being made to end, then for one grace period.
 * Holds the owners' mutex throughout, so that an owner going away
 * (engram_dma_unmap_all()) unpins its pages only once they are unmapped.
 */
void engram_dma_unmap_device(struct ib_device *dev)
{
	struct engram_dma_owner *o;
	LIST_HEAD(gone);

	mutex_lock(&engram_dma_owners_mutex);
	list_for_each_entry(o, &engram_dma_owners, node)
		engram_dma_take(o, dev, &gone);
	engram_dma_free_gone(&gone);
	mutex_unlock(&engram_dma_owners_mutex);
}
