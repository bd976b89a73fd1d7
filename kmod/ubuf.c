// SPDX-License-Identifier: GPL-2.0
/*
 * Registered buffers: user memory that remote RDMA WRITEs may fill.  The
 * pages are pinned for as long as any fetch may still target them (a fetch
 * holds the buffer, so unregistering one in flight only drops the fd's
 * reference), charged to RLIMIT_MEMLOCK like ib_umem does, and DMA-mapped
 * once per device that uses them, under the buffer's own lock: a fetch
 * takes no module-wide lock, and after the first fetch on a device none at
 * all for the mapping.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "client.h"
#include "inject.h"

/* Largest buffer: far more than a 49,152-row batch, far less than RAM. */
#define ENGRAM_UBUF_MAX		(64ULL << 30)

/**
 * engram_ubuf_create() - pin and charge a user range
 * @addr: user address
 * @length: bytes
 * @out: the buffer, with one reference
 *
 * Return: 0, -EINVAL (empty, wrapping or huge range), -ENOMEM (over
 * RLIMIT_MEMLOCK without CAP_IPC_LOCK, or no memory), -EFAULT (not mapped
 * writable), or another error from pinning.
 */
int engram_ubuf_create(u64 addr, u64 length, struct engram_ubuf **out)
{
	unsigned long first, last, npages, limit, done = 0;
	struct mm_struct *mm = current->mm;
	struct engram_ubuf *b;
	s64 pinned;
	int ret;

	if (!length || length > ENGRAM_UBUF_MAX || addr + length < addr ||
	    addr + length > TASK_SIZE)
		return -EINVAL;
	first = addr >> PAGE_SHIFT;
	last = (addr + length - 1) >> PAGE_SHIFT;
	npages = last - first + 1;

	/* Charged first, so a range over the limit costs no page array. */
	limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	pinned = atomic64_add_return(npages, &mm->pinned_vm);
	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	ret = -ENOMEM;
	b = kzalloc(sizeof(*b), GFP_KERNEL);
	if (!b)
		goto err_uncharge;
	kref_init(&b->ref);
	engram_dma_owner_init(&b->maps);
	xa_init(&b->kept);
	b->addr = addr;
	b->length = length;
	b->pages = kvcalloc(npages, sizeof(*b->pages), GFP_KERNEL);
	if (!b->pages)
		goto err_free;
	mmgrab(mm);
	b->mm = mm;

	while (done < npages) {
		ret = engram_pin_user_pages_fast((addr & PAGE_MASK) + (done << PAGE_SHIFT),
						 min_t(unsigned long, npages - done, 512),
						 FOLL_WRITE | FOLL_LONGTERM, b->pages + done);
		if (ret <= 0) {
			ret = ret ? ret : -EFAULT;
			goto err_unpin;
		}
		done += ret;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto err_unpin;
		}
	}
	b->nr_pages = npages;
	*out = b;
	return 0;

err_unpin:
	unpin_user_pages(b->pages, done);
	mmdrop(mm);
err_free:
	kvfree(b->pages);
	kfree(b);
err_uncharge:
	atomic64_sub(npages, &mm->pinned_vm);
	return ret;
}

/**
 * engram_ubuf_create_kernel() - a zeroed kernel buffer, used as a ubuf
 * @length: bytes
 * @out: the buffer, with one reference
 *
 * For a part whose rows a host writes into a buffer of their own, not
 * next to another part's (see replica.c): kernel pages, charged to the
 * caller's memory cgroup, DMA-mapped per device like a user buffer.
 * Zeroed, so that a row a host does not write shows no kernel memory.
 * Process context.
 *
 * Return: 0, -EINVAL (empty or over ENGRAM_UBUF_MAX), or -ENOMEM.
 */
int engram_ubuf_create_kernel(u64 length, struct engram_ubuf **out)
{
	struct engram_ubuf *b;
	unsigned long i;

	if (!length || length > ENGRAM_UBUF_MAX)
		return -EINVAL;
	b = kzalloc(sizeof(*b), GFP_KERNEL);
	if (!b)
		return -ENOMEM;
	kref_init(&b->ref);
	engram_dma_owner_init(&b->maps);
	xa_init(&b->kept);
	b->length = length;
	b->pages = kvcalloc(DIV_ROUND_UP(length, PAGE_SIZE), sizeof(*b->pages), GFP_KERNEL);
	if (!b->pages)
		goto err;
	for (i = 0; i < DIV_ROUND_UP(length, PAGE_SIZE); i++) {
		b->pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NOWARN);
		if (!b->pages[i])
			goto err;
		b->nr_pages++;
	}
	*out = b;
	return 0;

err:
	while (b->nr_pages)
		__free_page(b->pages[--b->nr_pages]);
	kvfree(b->pages);
	kfree(b);
	return -ENOMEM;
}

/**
 * engram_ubuf_zero() - clear the start of a kernel buffer
 * @b: an engram_ubuf_create_kernel() buffer, nothing on a wire
 * @len: bytes from its start (at most its length)
 *
 * With the CPU, after the device's writes were synced for it; the next
 * sync for a device writes the zeros back.  Any context.
 */
void engram_ubuf_zero(struct engram_ubuf *b, u64 len)
{
	unsigned long i;

	for (i = 0; i < b->nr_pages && len; i++) {
		u64 n = min_t(u64, len, PAGE_SIZE);
		void *p = kmap_local_page(b->pages[i]);

		memset(p, 0, n);
		kunmap_local(p);
		len -= n;
	}
}

/**
 * engram_ubuf_copy() - copy bytes from one buffer to another with the CPU
 * @dst: the buffer written
 * @doff: first byte there, from the start of the buffer
 * @src: the buffer read
 * @soff: first byte there
 * @len: bytes
 *
 * Both ranges must be within their buffers.  Any context.
 */
void engram_ubuf_copy(struct engram_ubuf *dst, u64 doff, struct engram_ubuf *src, u64 soff,
		      u64 len)
{
	doff += dst->addr & ~PAGE_MASK;
	soff += src->addr & ~PAGE_MASK;
	while (len) {
		/*
		 * min_t: before their minmax rework, 5.10 kernels (Debian's
		 * 5.10.0-30) refuse to compare a u64 with an unsigned long.
		 */
		u64 n = min_t(u64, len, min(PAGE_SIZE - offset_in_page(doff),
					    PAGE_SIZE - offset_in_page(soff)));
		void *d = kmap_local_page(dst->pages[doff >> PAGE_SHIFT]);
		void *s = kmap_local_page(src->pages[soff >> PAGE_SHIFT]);

		memcpy(d + offset_in_page(doff), s + offset_in_page(soff), n);
		kunmap_local(s);
		kunmap_local(d);
		doff += n;
		soff += n;
		len -= n;
	}
}

/**
 * engram_ubuf_set_word() - store a fetch's completion word
 * @b: the buffer that holds it
 * @off: its place, from the start of the buffer, 8-byte aligned (so in one page)
 * @val: the value
 *
 * The word tells a reader that the rows before it are in place, so every
 * write of theirs comes first: the syncs that ended a device's writes, and
 * the CPU's copies (wmb(), as the reader may be another device: a GPU on a
 * coherent unified-memory node).  Any context.
 */
void engram_ubuf_set_word(struct engram_ubuf *b, u64 off, u64 val)
{
	u64 pos = (b->addr & ~PAGE_MASK) + off;
	void *p;

	/* The rows' stores (syncs, CPU copies) before the word's, for any reader. */
	wmb();
	p = kmap_local_page(b->pages[pos >> PAGE_SHIFT]);
	WRITE_ONCE(*(u64 *)(p + offset_in_page(pos)), val);
	kunmap_local(p);
}

/**
 * engram_ubuf_get() - take a reference
 * @b: the buffer
 */
void engram_ubuf_get(struct engram_ubuf *b)
{
	kref_get(&b->ref);
}

static void engram_ubuf_release(struct kref *ref)
{
	struct engram_ubuf *b = container_of(ref, struct engram_ubuf, ref);

	/* Its kept keys went when it was unregistered (engram_kept_buf_drop()). */
	WARN_ON_ONCE(!xa_empty(&b->kept));
	engram_dma_unmap_all(&b->maps);
	if (!b->mm) {
		/* engram_ubuf_create_kernel()'s */
		while (b->nr_pages)
			__free_page(b->pages[--b->nr_pages]);
	} else {
		/* Remote writes may have dirtied any page. */
		unpin_user_pages_dirty_lock(b->pages, b->nr_pages, true);
		atomic64_sub(b->nr_pages, &b->mm->pinned_vm);
		mmdrop(b->mm);
	}
	kvfree(b->pages);
	kfree(b);
}

/**
 * engram_ubuf_put() - drop a reference; the last one unpins and uncharges
 * @b: the buffer
 *
 * Process context (unpinning may sleep).
 */
void engram_ubuf_put(struct engram_ubuf *b)
{
	kref_put(&b->ref, engram_ubuf_release);
}

/**
 * engram_ubuf_dma() - DMA addresses of a buffer's pages for a device
 * @b: the buffer
 * @dev: the device that will write into it
 *
 * Mapped on the first use for @dev (in coalesced chunks, holding only this
 * buffer's lock, so fetches into other buffers do not wait) and kept until
 * the buffer goes or the device does; later calls take no lock.  Process
 * context.
 *
 * Return: one address per page, or NULL.
 */
const dma_addr_t *engram_ubuf_dma(struct engram_ubuf *b, struct ib_device *dev)
{
	const dma_addr_t *dma = engram_dma_lookup(&b->maps, dev);

	if (dma)
		return dma;
	/* Bidirectional: a fetch writes rows next to bytes the CPU keeps. */
	return engram_dma_map(&b->maps, dev, b->pages, b->nr_pages, DMA_BIDIRECTIONAL,
			      NULL);
}

/**
 * engram_ubuf_sg() - a byte range of a buffer as a device's scatterlist
 * @b: the buffer
 * @dev: the device that will write into it
 * @start: the range's first byte, counted from the buffer's first page's start
 * @end: one past its last byte
 * @sgl: room for @max entries
 * @max: pages one registration maps
 *
 * One entry per page, for ib_map_mr_sg() with no sg_offset.  Process
 * context (the first use on @dev maps the buffer).
 *
 * Return: the entries; -ENOMEM when the buffer cannot be mapped, -E2BIG
 * when the range spans more than @max pages, -EIO when a soft device's
 * address is not its page's.
 */
int engram_ubuf_sg(struct engram_ubuf *b, struct ib_device *dev, u64 start, u64 end,
		   struct scatterlist *sgl, unsigned int max)
{
	const dma_addr_t *dma = engram_ubuf_dma(b, dev);
	unsigned long first = start >> PAGE_SHIFT, last = (end - 1) >> PAGE_SHIFT;
	unsigned int i, n = last - first + 1;

	if (!dma)
		return -ENOMEM;
	if (n > max)
		return -E2BIG;
	sg_init_table(sgl, n);
	for (i = 0; i < n; i++) {
		/*
		 * A soft device (rxe, siw) writes through these addresses
		 * with the CPU: a stale one would land rows in whatever
		 * memory it now points to.  Its address is the page's own.
		 */
		if (ib_uses_virt_dma(dev) &&
		    WARN_ON_ONCE(dma[first + i] != (uintptr_t)page_address(b->pages[first + i])))
			return -EIO;
		sg_dma_address(&sgl[i]) = dma[first + i];
		sg_dma_len(&sgl[i]) = PAGE_SIZE;
	}
	sg_dma_len(&sgl[n - 1]) = end - ((u64)last << PAGE_SHIFT);
	/*
	 * The list starts at the range's first byte, not at its page with an
	 * sg_offset: siw ignores ib_map_mr_sg()'s sg_offset when it builds
	 * its page list, and wrote every page of such an MR after the first
	 * sg_offset bytes too low, rows that looked right to the fetch.
	 */
	sg_dma_address(&sgl[0]) += offset_in_page(start);
	sg_dma_len(&sgl[0]) = n == 1 ? end - start : PAGE_SIZE - offset_in_page(start);
	return n;
}

/**
 * engram_ubuf_sync() - hand part of a buffer to the device, or back
 * @b: the buffer
 * @dev: the device that writes into it
 * @off: first byte, from the start of the buffer
 * @len: bytes
 * @to_device: before a fetch (true) or after it (false)
 *
 * A no-op on coherent machines without bounce buffers.  Elsewhere exactly
 * those bytes are synced (engram_dma_sync()): after a fetch, only the bytes
 * of the rows it placed, so that nothing else in their pages (stride gaps,
 * rows of other parts of a fetch, placed by another device or by TCP) is
 * overwritten with what the device side held.  Any context.
 */
void engram_ubuf_sync(struct engram_ubuf *b, struct ib_device *dev, u64 off, u64 len,
		      bool to_device)
{
	if (len)
		engram_dma_sync(&b->maps, dev, (b->addr & ~PAGE_MASK) + off, len, to_device);
}
