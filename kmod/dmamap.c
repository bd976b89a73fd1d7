// SPDX-License-Identifier: GPL-2.0
/*
 * Page arrays mapped for RDMA devices: a table's pinned page-cache pages
 * (read by the server's WRITEs) and a registered user buffer's pages
 * (written by them).  Each array is mapped page by page through
 * ib_dma_map_page() once per device, on first use, and kept on two lists:
 * its owner's, so the owner's end unmaps it, and a module-wide one, so a
 * departing device's maps are all found and unmapped before it goes.
 */
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "engram.h"
#include "inject.h"

struct engram_dma_map {
	struct list_head owner_node;	/* on the owner's list */
	struct list_head dev_node;	/* on engram_dma_maps */
	struct ib_device *dev;
	enum dma_data_direction dir;
	dma_addr_t *addr;
	unsigned long nr;		/* mapped so far */
};

static LIST_HEAD(engram_dma_maps);
static DEFINE_MUTEX(engram_dma_mutex);	/* every map, on both its lists */

static void engram_dma_map_free(struct engram_dma_map *m)
{
	unsigned long i;

	lockdep_assert_held(&engram_dma_mutex);
	list_del(&m->owner_node);
	list_del(&m->dev_node);
	for (i = 0; i < m->nr; i++) {
		ib_dma_unmap_page(m->dev, m->addr[i], PAGE_SIZE, m->dir);
		if ((i & 1023) == 1023)
			cond_resched();
	}
	kvfree(m->addr);
	kfree(m);
}

static struct engram_dma_map *engram_dma_find(struct list_head *owner,
					      struct ib_device *dev)
{
	struct engram_dma_map *m;

	lockdep_assert_held(&engram_dma_mutex);
	list_for_each_entry(m, owner, owner_node)
		if (m->dev == dev)
			return m;
	return NULL;
}

/**
 * engram_dma_map() - the DMA address of every page of an array, for a device
 * @owner: the owner's list of maps (a table's, a buffer's)
 * @dev: the RDMA device that will access the pages
 * @pages: the pages, pinned for as long as @owner keeps maps
 * @nr: how many
 * @dir: DMA_TO_DEVICE for pages the device reads, DMA_BIDIRECTIONAL for
 *	pages it writes next to bytes the CPU keeps
 *
 * Mapped on the first call for @dev and kept until engram_dma_unmap_all()
 * or engram_dma_unmap_device().  A device being removed gets no new map.
 * Process context.
 *
 * Return: one address per page, or NULL.
 */
const dma_addr_t *engram_dma_map(struct list_head *owner, struct ib_device *dev,
				 struct page **pages, unsigned long nr,
				 enum dma_data_direction dir)
{
	struct engram_dma_map *m;
	unsigned long i;

	mutex_lock(&engram_dma_mutex);
	m = engram_dma_find(owner, dev);
	/* Under the mutex, so the device's unmap cannot run in between. */
	if (m || engram_dev_dead(dev))
		goto out;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		goto out;
	m->addr = kvcalloc(nr, sizeof(*m->addr), GFP_KERNEL);
	if (!m->addr) {
		kfree(m);
		m = NULL;
		goto out;
	}
	m->dev = dev;
	m->dir = dir;
	list_add(&m->owner_node, owner);
	list_add(&m->dev_node, &engram_dma_maps);
	for (i = 0; i < nr; i++) {
		m->addr[i] = engram_dma_map_page(dev, pages[i], 0, PAGE_SIZE, dir);
		if (engram_dma_mapping_error(dev, m->addr[i]))
			break;
		m->nr = i + 1;
		if ((i & 1023) == 1023)
			cond_resched();
	}
	if (m->nr != nr) {
		engram_dma_map_free(m);
		m = NULL;
	}
out:
	mutex_unlock(&engram_dma_mutex);
	return m ? m->addr : NULL;
}

/**
 * engram_dma_sync() - hand pages of a mapped array to the device, or back
 * @owner: the owner's list of maps
 * @dev: the device
 * @first: first page index
 * @last: last page index
 * @to_device: before the device accesses them (true) or after (false)
 *
 * A no-op on coherent machines without bounce buffers.  Process context.
 */
void engram_dma_sync(struct list_head *owner, struct ib_device *dev,
		     unsigned long first, unsigned long last, bool to_device)
{
	struct engram_dma_map *m;
	unsigned long i;

	mutex_lock(&engram_dma_mutex);
	m = engram_dma_find(owner, dev);
	for (i = first; m && i <= last && i < m->nr; i++) {
		if (to_device)
			ib_dma_sync_single_for_device(dev, m->addr[i], PAGE_SIZE, m->dir);
		else
			ib_dma_sync_single_for_cpu(dev, m->addr[i], PAGE_SIZE, m->dir);
	}
	mutex_unlock(&engram_dma_mutex);
}

/**
 * engram_dma_unmap_all() - unmap every map of an owner
 * @owner: the owner's list of maps, about to go away
 */
void engram_dma_unmap_all(struct list_head *owner)
{
	struct engram_dma_map *m, *tmp;

	mutex_lock(&engram_dma_mutex);
	list_for_each_entry_safe(m, tmp, owner, owner_node)
		engram_dma_map_free(m);
	mutex_unlock(&engram_dma_mutex);
}

/**
 * engram_dma_unmap_device() - unmap every map of a departing device
 * @dev: the device, with no connection or link left on it
 */
void engram_dma_unmap_device(struct ib_device *dev)
{
	struct engram_dma_map *m, *tmp;

	mutex_lock(&engram_dma_mutex);
	list_for_each_entry_safe(m, tmp, &engram_dma_maps, dev_node)
		if (m->dev == dev)
			engram_dma_map_free(m);
	mutex_unlock(&engram_dma_mutex);
}
