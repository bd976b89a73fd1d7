// SPDX-License-Identifier: GPL-2.0
/*
 * Tables: an Engram table is served straight from the page cache of its
 * safetensors file.  Loading one reads the whole file through the page cache,
 * keeps a reference on every folio (so reclaim cannot drop them and the data
 * path can map them), marks the mapping unevictable (so reclaim does not
 * even scan them), denies writes to the file (so the bytes cannot change
 * under a reader, and truncation is impossible) and hashes the file with
 * SHA-256 on the way.  Nothing is copied: the table costs its file's page
 * cache plus one page pointer per page.  Reading, pinning and hashing the
 * pages are table_pin.c's; the list, the jobs, what the pins mean for the
 * file's mapping and serving are here.
 *
 * Lifetime: a table is on engram_tables from the LOAD request until UNLOAD
 * (or module exit).  Loads and verifies run in a worker; the worker never
 * frees the table, and removal always cancels the worker first, so the
 * worker needs no reference of its own.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bits.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/netlink.h>
#include <linux/overflow.h>
#include <linux/pagemap.h>
#include <linux/percpu.h>
#include <linux/random.h>
#include <linux/rculist.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/swap.h>
#include <linux/timekeeping.h>
#include <linux/wait_bit.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

#include "compat.h"
#include "engram.h"
#include "event.h"
#include "table.h"
#include "wire.h"

/* Longest path kept for display, NUL included. */
#define ENGRAM_PATH_SHOWN	1024
/* Sanity bound on rows: 2^40 rows of 256 bytes is far beyond any checkpoint. */
#define ENGRAM_MAX_ROWS		BIT_ULL(40)

/* Changed under engram_tables_mutex; requests walk it under RCU. */
static LIST_HEAD(engram_tables);
static DEFINE_MUTEX(engram_tables_mutex);	/* the list, and unevictable flags */
static unsigned int engram_ntables;

/* Whom to tell that the catalog changed: the host role's core, once it runs. */
static void (*engram_tables_notify_fn)(void);

/**
 * engram_table_notify() - say whom to tell of catalog changes
 * @fn: called with any lock held, in any context, whenever a table is
 *	added, removed or changes state; NULL for no one
 */
void engram_table_notify(void (*fn)(void))
{
	WRITE_ONCE(engram_tables_notify_fn, fn);
}

static void engram_table_changed(void)
{
	typeof(engram_tables_notify_fn) notify = READ_ONCE(engram_tables_notify_fn);

	if (notify)
		notify();
}

static atomic64_t engram_generation;
static struct workqueue_struct *engram_wq;

static struct engram_table *engram_table_find(const char *name)
{
	struct engram_table *t;

	lockdep_assert_held(&engram_tables_mutex);
	list_for_each_entry(t, &engram_tables, node)
		if (!strcmp(t->name, name))
			return t;
	return NULL;
}

static u64 engram_table_pinned_bytes(const struct engram_table *t)
{
	return (u64)READ_ONCE(t->nr_kept) << PAGE_SHIFT;
}

static u64 engram_table_span_pages(u64 start, u64 len)
{
	return ((start + len - 1) >> PAGE_SHIFT) - (start >> PAGE_SHIFT) + 1;
}

/*
 * What a table will pin: the whole file, or the pages of a shard's weights
 * and scales (a page both share counted twice: a bound, not a count).
 */
static u64 engram_table_held_bytes(const struct engram_table *t)
{
	u64 n;

	if (!t->file)
		return 0;
	if (t->held_rows == t->rows)
		return t->file_bytes;
	n = engram_table_span_pages(t->weight_offset + t->held_first * ENGRAM_WEIGHT_BYTES,
				    t->held_rows * ENGRAM_WEIGHT_BYTES) +
	    engram_table_span_pages(t->scale_offset + t->held_first * ENGRAM_SCALE_BYTES,
				    t->held_rows * ENGRAM_SCALE_BYTES);
	return n << PAGE_SHIFT;
}

/*
 * Sum @val over the files our tables hold, counting each file once: tables
 * loaded from one file share its page cache.
 */
static u64 engram_table_sum_per_file(u64 (*val)(const struct engram_table *))
{
	struct engram_table *o, *p;
	u64 sum = 0;

	lockdep_assert_held(&engram_tables_mutex);
	list_for_each_entry(o, &engram_tables, node) {
		u64 v = val(o);

		if (!v)
			continue;
		/* Counted already with an earlier table of the same file? */
		list_for_each_entry(p, &engram_tables, node) {
			if (p == o)
				break;
			if (p->mapping == o->mapping && val(p))
				v = 0;
		}
		if (!v)
			continue;
		list_for_each_entry_continue(p, &engram_tables, node)
			if (p->mapping == o->mapping)
				v = max(v, val(p));
		sum += v;
	}
	return sum;
}

/* Does a table of ours hold this file? */
static bool engram_table_mapping_pinned(struct address_space *mapping)
{
	struct engram_table *o;

	lockdep_assert_held(&engram_tables_mutex);
	list_for_each_entry(o, &engram_tables, node)
		if (o->file && o->mapping == mapping)
			return true;
	return false;
}

/*
 * Pinned pages cannot be reclaimed, so a table that does not fit would end
 * in the OOM killer rather than in an error.  Keep an eighth of RAM for
 * everything else.
 */
static bool engram_table_fits(struct engram_table *t)
{
	u64 ram = (u64)totalram_pages() << PAGE_SHIFT;

	if (engram_table_mapping_pinned(t->mapping))
		return true;	/* its pages are pinned already */
	/*
	 * Two shards of one file are counted as the larger: a host holds
	 * one shard of a table, not several.
	 */
	return engram_table_sum_per_file(engram_table_held_bytes) + engram_table_held_bytes(t) <=
	       ram - ram / 8;
}

/* Publish the end of a job; returns how long it took. */
static u64 engram_table_set_result(struct engram_table *t, u8 state, int error,
				   const char *msg)
{
	u64 ns;

	spin_lock_bh(&t->lock);
	/* Released: a request that reads READY without the lock sees the digest. */
	smp_store_release(&t->state, state);
	t->error = error;
	strscpy(t->errmsg, msg ? msg : "", sizeof(t->errmsg));
	ns = max_t(u64, 1, ktime_to_ns(ktime_sub(ktime_get(), t->job_start)));
	t->job_ns = ns;
	/*
	 * Raised under the lock that publishes the state, so that a verify
	 * started right after READY has its event after this one.  A load
	 * cancelled by an unload says nothing: the unload's event follows.
	 */
	if (error != ECANCELED)
		engram_event_table(ENGRAM_EVENT_TABLE_STATE, t->name, state, t->verify_result,
				   error);
	spin_unlock_bh(&t->lock);
	return ns;
}

/*
 * Drop every page reference, the unevictable flag (unless another table of
 * ours still pins the same file) and the write denial.  Idempotent.  The
 * "last table on this file" decision and giving up the file are one step
 * under engram_tables_mutex, so two tables of one file released at once
 * cannot both think the other one still pins it.
 */
static void engram_table_release(struct engram_table *t)
{
	struct address_space *mapping = t->mapping;
	struct engram_table *o;
	struct page **pages;
	struct file *file;
	bool last = true;
	pgoff_t i, n;

	mutex_lock(&engram_tables_mutex);
	file = t->file;
	t->file = NULL;
	if (file) {
		list_for_each_entry(o, &engram_tables, node)
			if (o != t && o->file && o->mapping == mapping)
				last = false;
		if (last) {
			mapping_clear_unevictable(mapping);
			if (t->gfp_was_movable)
				mapping_set_gfp_mask(mapping,
						     mapping_gfp_mask(mapping) | __GFP_MOVABLE);
		}
	}
	mutex_unlock(&engram_tables_mutex);
	if (!file)
		return;

	n = t->nr_pinned;
	for (i = 0; i < n; i++) {
		if (t->pages[i])
			put_page(t->pages[i]);
		if ((i & 1023) == 1023)
			cond_resched();
	}
	WRITE_ONCE(t->nr_pinned, 0);
	WRITE_ONCE(t->nr_kept, 0);
	/* A failed table may stay listed for long: keep nothing but its reason. */
	pages = t->pages;
	WRITE_ONCE(t->pages, NULL);
	kvfree(pages);
	if (last)
		engram_table_pin_rescue(mapping);
	allow_write_access(file);
	fput(file);
}

/*
 * Map every pinned page for every RDMA device present that the table has
 * no map for yet, so that requests find the addresses without waiting.
 * Runs in the table's workers only: mapping a large table takes seconds.
 */
static void engram_table_map_devices(struct engram_table *t)
{
	unsigned int done = 0;
	u64 seq = 0, start = ktime_get_ns();
	struct ib_device *dev;

	while ((dev = engram_dev_next_present(&seq))) {
		bool created = false;

		if (!READ_ONCE(t->cancel) && !engram_dma_lookup(&t->maps, dev))
			engram_dma_map(&t->maps, dev, t->pages, t->nr_pages,
				       DMA_TO_DEVICE, &created);
		done += created;
		ib_device_put(dev);
	}
	if (done)
		pr_info("table %s: %lu pages mapped for %u device(s) in %llu ms\n",
			t->name, t->nr_pages, done,
			div_u64(ktime_get_ns() - start, NSEC_PER_MSEC));
}

static void engram_table_map_work(struct work_struct *work)
{
	struct engram_table *t = container_of(work, struct engram_table, map_work);

	/* Before that, the load worker maps the table itself when it ends. */
	if (READ_ONCE(t->pinned_all))
		engram_table_map_devices(t);
}

static void engram_table_do_load(struct engram_table *t)
{
	char msg[ENGRAM_ERRMSG_MAX] = "";
	u8 sha[ENGRAM_SHA256_LEN];
	u64 ns;
	int ret;

	ret = engram_table_pin_load(t, sha, msg, sizeof(msg));
	if (ret) {
		if (ret == -ECANCELED)
			snprintf(msg, sizeof(msg), "load cancelled");
		else if (!msg[0])
			snprintf(msg, sizeof(msg), "SHA-256 failed");
		goto fail;
	}
	if (t->have_expect && memcmp(sha, t->expect, sizeof(sha))) {
		ret = -EBADMSG;
		snprintf(msg, sizeof(msg),
			 "SHA-256 mismatch: file is %*phN, expected %*phN",
			 8, sha, 8, t->expect);
		engram_count(&engram_global_stats, ENGRAM_STAT_DIGEST_MISMATCHES);
		goto fail;
	}

	/*
	 * Mapped before READY is published, so no request waits for it.  The
	 * flag first: a device added after engram_table_map_devices() looked
	 * at the present devices has its map worker find it set.
	 */
	WRITE_ONCE(t->pinned_all, true);
	engram_table_map_devices(t);

	spin_lock_bh(&t->lock);
	memcpy(t->sha, sha, sizeof(sha));
	t->have_sha = true;
	spin_unlock_bh(&t->lock);
	/* Counted before READY is published: a verify may start right after. */
	ns = ktime_to_ns(ktime_sub(ktime_get(), t->job_start));
	engram_count_add(&t->stats, ENGRAM_STAT_LOAD_BYTES, t->file_bytes);
	engram_count_add(&t->stats, ENGRAM_STAT_LOAD_NS, ns);
	engram_count_add(&engram_global_stats, ENGRAM_STAT_LOAD_BYTES, t->file_bytes);
	engram_count_add(&engram_global_stats, ENGRAM_STAT_LOAD_NS, ns);
	engram_count(&engram_global_stats, ENGRAM_STAT_LOADS_DONE);
	pr_info("table %s loaded: %llu rows, %llu bytes, sha256 %*phN, generation %llu, %llu ms\n",
		t->name, t->rows, t->file_bytes, ENGRAM_SHA256_LEN, sha,
		t->generation, div_u64(ns, NSEC_PER_MSEC));
	if (t->nr_moved)
		pr_info("table %s: up to %lu cached pages were in ZONE_MOVABLE and were read again outside it\n",
			t->name, t->nr_moved);
	engram_table_set_result(t, ENGRAM_TABLE_READY, 0, NULL);
	engram_table_changed();
	return;

fail:
	engram_table_release(t);
	engram_table_set_result(t, ENGRAM_TABLE_FAILED, -ret, msg);
	engram_count(&engram_global_stats, ret == -ECANCELED ?
		     ENGRAM_STAT_LOADS_CANCELLED : ENGRAM_STAT_LOADS_FAILED);
	if (ret != -ECANCELED)
		pr_warn("table %s: load failed: %s (%d)\n", t->name, msg, ret);
	engram_table_changed();
}

static void engram_table_do_verify(struct engram_table *t)
{
	u8 sha[ENGRAM_SHA256_LEN];
	u8 result;
	int ret;

	ret = engram_table_pin_rehash(t, sha);

	/* Cancelled by an unload: the table is going away, nothing to report. */
	if (ret == -ECANCELED)
		return;
	engram_count(&t->stats, ENGRAM_STAT_VERIFY_RUNS);
	engram_count(&engram_global_stats, ENGRAM_STAT_VERIFY_RUNS);
	if (!ret && engram_fault_verify_mismatch())
		sha[0] ^= 1;
	if (ret)
		result = ENGRAM_VERIFY_ERROR;
	else if (memcmp(sha, t->sha, sizeof(sha)))
		result = ENGRAM_VERIFY_MISMATCH;
	else
		result = ENGRAM_VERIFY_OK;
	if (result != ENGRAM_VERIFY_OK) {
		engram_count(&t->stats, ENGRAM_STAT_VERIFY_FAILURES);
		engram_count(&engram_global_stats, ENGRAM_STAT_VERIFY_FAILURES);
	}
	spin_lock_bh(&t->lock);
	t->verify_result = result;
	spin_unlock_bh(&t->lock);
	if (result == ENGRAM_VERIFY_MISMATCH) {
		/*
		 * The pinned bytes are not the file's any more: every row
		 * served from now on could be a wrong row that looks right.
		 * FAILED stops serving (TABLE_NOT_READY), and the catalog
		 * tells GPU nodes, whose fetches go to a healthy replica or
		 * to libengram's exact local read.  The pages stay pinned
		 * until the table is unloaded or loaded again.
		 */
		pr_err("table %s: verify found the pinned pages' digest no longer the file's: not served any more; unload it or load it again\n",
		       t->name);
		engram_table_set_result(t, ENGRAM_TABLE_FAILED, EBADMSG,
					"verify: pinned pages no longer match the file's SHA-256");
		engram_table_changed();
		return;
	}
	if (ret)
		pr_warn("table %s: verify could not run to the end (%d); still served\n",
			t->name, ret);
	engram_table_set_result(t, ENGRAM_TABLE_READY, 0, NULL);
}

static void engram_table_work(struct work_struct *work)
{
	struct engram_table *t = container_of(work, struct engram_table, work);

	if (READ_ONCE(t->state) == ENGRAM_TABLE_VERIFYING)
		engram_table_do_verify(t);
	else
		engram_table_do_load(t);
}

/* The last request holding a destroyed table let go of it. */
static void engram_table_holds_gone(struct percpu_ref *ref)
{
	struct engram_table *t = container_of(ref, struct engram_table, holds);

	complete(&t->holds_done);
}

/*
 * Stop any job, wait until no server request reads the pages any more,
 * release everything, free.  The table is off the list, so once the
 * requests that found it there under RCU are gone, no new hold can be taken.
 */
static void engram_table_destroy(struct engram_table *t)
{
	WRITE_ONCE(t->cancel, true);
	cancel_work_sync(&t->work);
	synchronize_rcu();
	percpu_ref_kill(&t->holds);
	wait_for_completion(&t->holds_done);
	/* Only a request (holding the table) or a device add queue it. */
	cancel_work_sync(&t->map_work);
	engram_dma_unmap_all(&t->maps);
	engram_table_release(t);
	if (t->state == ENGRAM_TABLE_LOADING)
		engram_count(&engram_global_stats, ENGRAM_STAT_LOADS_CANCELLED);
	kvfree(t->pages);
	kfree(t->path);
	percpu_ref_exit(&t->holds);
	free_percpu(t->inflight);
	kfree(t);
}

/* Check the geometry against the file; the message says what is wrong. */
static int engram_table_check_geometry(const struct engram_load_args *a, u64 size,
				       struct netlink_ext_ack *extack)
{
	u64 wbytes, sbytes, wend, send;

	if (a->weight_bytes != ENGRAM_WEIGHT_BYTES) {
		NL_SET_ERR_MSG_MOD(extack, "weight rows must be 256 bytes (F8_E4M3 [N,256])");
		return -EINVAL;
	}
	if (a->scale_bytes != ENGRAM_SCALE_BYTES) {
		NL_SET_ERR_MSG_MOD(extack, "scale rows must be 8 bytes (F8_E8M0 [N,8])");
		return -EINVAL;
	}
	if (!a->rows || a->rows > ENGRAM_MAX_ROWS) {
		NL_SET_ERR_MSG_MOD(extack, "row count out of range 1 to 2^40");
		return -EINVAL;
	}
	wbytes = a->rows * ENGRAM_WEIGHT_BYTES;
	sbytes = a->rows * ENGRAM_SCALE_BYTES;
	if (a->weight_offset < 8 || a->scale_offset < 8) {
		NL_SET_ERR_MSG_MOD(extack, "tensor offset inside the safetensors length prefix");
		return -EINVAL;
	}
	if (check_add_overflow(a->weight_offset, wbytes, &wend) || wend > size) {
		NL_SET_ERR_MSG_MOD(extack, "weight tensor ends past the file end");
		return -ERANGE;
	}
	if (check_add_overflow(a->scale_offset, sbytes, &send) || send > size) {
		NL_SET_ERR_MSG_MOD(extack, "scale tensor ends past the file end");
		return -ERANGE;
	}
	if (a->weight_offset < send && a->scale_offset < wend) {
		NL_SET_ERR_MSG_MOD(extack, "weight and scale tensors overlap");
		return -EINVAL;
	}
	if (a->held_rows && (a->held_first >= a->rows || a->held_rows > a->rows - a->held_first)) {
		NL_SET_ERR_MSG_MOD(extack, "the shard's rows are not all in the table");
		return -ERANGE;
	}
	return 0;
}

static int engram_table_open_file(struct engram_table *t, const struct engram_load_args *a,
				  struct netlink_ext_ack *extack)
{
	struct file *file = fget(a->fd);
	struct inode *inode;
	int ret;

	if (!file) {
		NL_SET_ERR_MSG_MOD(extack, "TABLE_FD is not an open file descriptor");
		return -EBADF;
	}
	inode = file_inode(file);
	ret = -EINVAL;
	if (!S_ISREG(inode->i_mode)) {
		NL_SET_ERR_MSG_MOD(extack, "TABLE_FD is not a regular file");
		goto err;
	}
	ret = -EBADF;
	if (!(file->f_mode & FMODE_READ)) {
		NL_SET_ERR_MSG_MOD(extack, "TABLE_FD is not open for reading");
		goto err;
	}
	ret = -EOPNOTSUPP;
	if (!engram_compat_can_read_cache(file->f_mapping)) {
		NL_SET_ERR_MSG_MOD(extack,
				   "the file system has no page-cache read path (tmpfs?): put tables on a disk file system");
		goto err;
	}
	/* Deny writes first: only then is the size final. */
	ret = deny_write_access(file);
	if (ret) {
		NL_SET_ERR_MSG_MOD(extack, "the file is open for writing: close its writers first");
		goto err;
	}
	t->file_bytes = i_size_read(inode);
	ret = engram_table_check_geometry(a, t->file_bytes, extack);
	if (ret) {
		allow_write_access(file);
		goto err;
	}
	t->file = file;
	t->mapping = file->f_mapping;
	return 0;
err:
	fput(file);
	return ret;
}

/*
 * The path is for people reading `engramctl list`; keep its informative end
 * and bound it, so that every table fits in one netlink dump message.
 */
static char *engram_table_path(struct file *file, const char *given)
{
	const char *p = given;
	char *buf = NULL, *ret;
	size_t len;

	if (!p) {
		buf = kmalloc(PATH_MAX, GFP_KERNEL);
		if (!buf)
			return NULL;
		p = file_path(file, buf, PATH_MAX);
		if (IS_ERR(p))
			p = "?";
	}
	len = strlen(p);
	if (len < ENGRAM_PATH_SHOWN)
		ret = kstrdup(p, GFP_KERNEL);
	else
		ret = kasprintf(GFP_KERNEL, "...%s", p + len - (ENGRAM_PATH_SHOWN - 4));
	kfree(buf);
	return ret;
}

/*
 * Keep the file's page cache out of ZONE_MOVABLE and CMA from now on (see
 * engram_table_pin_movable()), remembering whether it was movable, so the last
 * table of the file gives it back.  Under engram_tables_mutex, before @t
 * joins the list.
 */
static void engram_table_unmovable(struct engram_table *t)
{
	struct address_space *mapping = t->mapping;
	gfp_t gfp = mapping_gfp_mask(mapping);
	struct engram_table *o;

	lockdep_assert_held(&engram_tables_mutex);
	list_for_each_entry(o, &engram_tables, node) {
		if (o->file && o->mapping == mapping) {
			t->gfp_was_movable = o->gfp_was_movable;
			return;
		}
	}
	t->gfp_was_movable = gfp & __GFP_MOVABLE;
	if (!t->gfp_was_movable)
		return;
	mapping_set_gfp_mask(mapping, gfp & ~__GFP_MOVABLE);
	t->drop_cached = true;
}

/*
 * May @t join the list, replacing @old (a table of the same name, or NULL)?
 * Checked under the table mutex; a refusal leaves @old in place.
 */
static int engram_table_admit(struct engram_table *t, struct engram_table *old,
			      struct netlink_ext_ack *extack)
{
	lockdep_assert_held(&engram_tables_mutex);
	if (old && old->state != ENGRAM_TABLE_FAILED) {
		NL_SET_ERR_MSG_MOD(extack, "a table of that name exists: unload it first");
		return -EEXIST;
	}
	if (engram_ntables - !!old >= ENGRAM_MAX_TABLES) {
		NL_SET_ERR_MSG_MOD(extack, "too many tables loaded (256)");
		return -ENOSPC;
	}
	if (mapping_unevictable(t->mapping) && !engram_table_mapping_pinned(t->mapping)) {
		/* Someone else (ramfs, SHM_LOCK) owns the flag we would clear later. */
		NL_SET_ERR_MSG_MOD(extack, "the file is kept in RAM already (ramfs?)");
		return -EOPNOTSUPP;
	}
	if (!engram_table_fits(t)) {
		NL_SET_ERR_MSG_MOD(extack, "not enough RAM to pin this table next to the others");
		return -ENOMEM;
	}
	/* Only now, so that an absurd file size is refused before it costs memory. */
	t->pages = kvcalloc(t->nr_pages, sizeof(*t->pages), GFP_KERNEL);
	if (!t->pages) {
		NL_SET_ERR_MSG_MOD(extack, "no memory for the page index");
		return -ENOMEM;
	}
	return 0;
}

/**
 * engram_table_load() - validate a load request and start the load
 * @a: what userspace asked for
 * @extack: where to say why a request is refused
 *
 * The checks that need no I/O run here, so a bad request fails at once with
 * a message; reading and hashing the file runs in the worker.  A failed table
 * of the same name is replaced.
 *
 * Return: 0 when the load has started, or a negative errno.
 */
int engram_table_load(const struct engram_load_args *a, struct netlink_ext_ack *extack)
{
	struct engram_table *t, *old = NULL;
	int ret;

	/* The same rule as the wire catalog's, so every table can be announced. */
	if (!engram_wire_name_valid(a->name, ENGRAM_NAME_MAX)) {
		NL_SET_ERR_MSG_MOD(extack, "table names are 1-63 characters of A-Z a-z 0-9 . _ -");
		return -EINVAL;
	}

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	init_completion(&t->holds_done);
	t->inflight = alloc_percpu(long);
	if (!t->inflight || percpu_ref_init(&t->holds, engram_table_holds_gone, 0, GFP_KERNEL)) {
		free_percpu(t->inflight);
		kfree(t);
		return -ENOMEM;
	}
	strscpy(t->name, a->name, sizeof(t->name));
	spin_lock_init(&t->lock);
	INIT_WORK(&t->work, engram_table_work);
	INIT_WORK(&t->map_work, engram_table_map_work);
	engram_dma_owner_init(&t->maps);
	atomic64_set(&t->done_bytes, 0);
	t->rows = a->rows;
	t->held_first = a->held_rows ? a->held_first : 0;
	t->held_rows = a->held_rows ?: a->rows;
	t->weight_offset = a->weight_offset;
	t->scale_offset = a->scale_offset;
	if (a->sha256) {
		memcpy(t->expect, a->sha256, ENGRAM_SHA256_LEN);
		t->have_expect = true;
	}

	ret = engram_table_open_file(t, a, extack);
	if (ret)
		goto err_free;

	t->nr_pages = DIV_ROUND_UP_ULL(t->file_bytes, PAGE_SIZE);
	t->path = engram_table_path(t->file, a->path);
	ret = -ENOMEM;
	if (!t->path)
		goto err_file;

	mutex_lock(&engram_tables_mutex);
	old = engram_table_find(t->name);
	ret = engram_table_admit(t, old, extack);
	if (ret) {
		mutex_unlock(&engram_tables_mutex);
		goto err_file;
	}
	if (old) {
		list_del_rcu(&old->node);
		engram_ntables--;
	}
	engram_table_unmovable(t);
	mapping_set_unevictable(t->mapping);
	t->generation = atomic64_inc_return(&engram_generation);
	t->state = ENGRAM_TABLE_LOADING;
	t->job_start = ktime_get();
	list_add_tail_rcu(&t->node, &engram_tables);
	engram_ntables++;
	engram_count(&engram_global_stats, ENGRAM_STAT_LOADS_STARTED);
	/* Before the work is queued: its result must come after this. */
	engram_event_table(ENGRAM_EVENT_TABLE_STATE, t->name, ENGRAM_TABLE_LOADING, 0, 0);
	queue_work(engram_wq, &t->work);
	mutex_unlock(&engram_tables_mutex);

	if (old)
		engram_table_destroy(old);
	engram_table_changed();
	return 0;

err_file:
	allow_write_access(t->file);
	fput(t->file);
	t->file = NULL;
err_free:
	kvfree(t->pages);
	kfree(t->path);
	percpu_ref_exit(&t->holds);
	free_percpu(t->inflight);
	kfree(t);
	return ret;
}

/**
 * engram_table_unload() - remove a table, cancelling any job on it
 * @name: table name
 * @extack: where to say why the request is refused
 *
 * Return: 0 once every page and the write denial are released, -ENOENT if
 * there is no such table.
 */
int engram_table_unload(const char *name, struct netlink_ext_ack *extack)
{
	struct engram_table *t;

	mutex_lock(&engram_tables_mutex);
	t = engram_table_find(name);
	if (t) {
		list_del_rcu(&t->node);
		engram_ntables--;
	}
	mutex_unlock(&engram_tables_mutex);
	if (!t) {
		NL_SET_ERR_MSG_MOD(extack, "no table of that name");
		return -ENOENT;
	}
	engram_table_changed();
	engram_table_destroy(t);
	pr_info("table %s unloaded\n", name);
	engram_event_table(ENGRAM_EVENT_TABLE_UNLOADED, name, ENGRAM_TABLE_UNSPEC, 0, 0);
	return 0;
}

/**
 * engram_table_verify() - start re-hashing a loaded table's pinned pages
 * @name: table name
 * @extack: where to say why the request is refused
 *
 * Return: 0 when the verify has started, -ENOENT, or -EBUSY when the table is
 * not in the READY state.
 */
int engram_table_verify(const char *name, struct netlink_ext_ack *extack)
{
	struct engram_table *t;
	int ret = 0;

	mutex_lock(&engram_tables_mutex);
	t = engram_table_find(name);
	if (!t) {
		NL_SET_ERR_MSG_MOD(extack, "no table of that name");
		ret = -ENOENT;
	} else if (t->state != ENGRAM_TABLE_READY) {
		NL_SET_ERR_MSG_MOD(extack, "table is not ready (loading, verifying or failed)");
		ret = -EBUSY;
	} else {
		spin_lock_bh(&t->lock);
		t->state = ENGRAM_TABLE_VERIFYING;
		t->verify_result = ENGRAM_VERIFY_NONE;
		t->job_start = ktime_get();
		t->job_ns = 0;
		engram_event_table(ENGRAM_EVENT_TABLE_STATE, t->name, ENGRAM_TABLE_VERIFYING, 0, 0);
		spin_unlock_bh(&t->lock);
		atomic64_set(&t->done_bytes, 0);
		queue_work(engram_wq, &t->work);
	}
	mutex_unlock(&engram_tables_mutex);
	return ret;
}

/*
 * Requests holding @t now.  A sum taken while requests come and go on
 * other CPUs may be off by those: a report, never a decision the kernel
 * takes (a drain's waiter also asks for a quiet time).
 */
static u32 engram_table_inflight(const struct engram_table *t)
{
	long sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += *per_cpu_ptr(t->inflight, cpu);
	return clamp_t(long, sum, 0, U32_MAX);
}

static bool engram_table_drain_one(struct engram_table *t, bool drain)
{
	lockdep_assert_held(&engram_tables_mutex);
	if (READ_ONCE(t->draining) == drain)
		return false;
	WRITE_ONCE(t->drain_last, ktime_get_ns());
	WRITE_ONCE(t->draining, drain);
	return true;
}

/**
 * engram_table_drain() - drain a table, or every table, or stop draining
 * @name: table name, or NULL for every table loaded now
 * @drain: true to drain, false to undrain
 * @extack: where to say why the request is refused
 *
 * A draining table is served as before; the catalog pushed to clients now
 * marks it so (protocol version 6) or leaves it out (older clients), and
 * clients send new fetches of tables opened on no link to other hosts.
 *
 * Return: 0, or -ENOENT when @name names no table.
 */
int engram_table_drain(const char *name, bool drain, struct netlink_ext_ack *extack)
{
	struct engram_table *t;
	unsigned int n = 0;
	int ret = 0;

	mutex_lock(&engram_tables_mutex);
	if (name) {
		t = engram_table_find(name);
		if (t)
			n += engram_table_drain_one(t, drain);
		else
			ret = -ENOENT;
	} else {
		list_for_each_entry(t, &engram_tables, node)
			n += engram_table_drain_one(t, drain);
	}
	mutex_unlock(&engram_tables_mutex);
	if (ret) {
		NL_SET_ERR_MSG_MOD(extack, "no table of that name");
		return ret;
	}
	if (n) {
		pr_info("%s%s: %s\n", name ?: "every table", name ? "" : " loaded",
			drain ? "draining" : "no longer draining");
		engram_table_changed();
	}
	return 0;
}

static void engram_table_snapshot(struct engram_table *t, struct engram_table_info *info)
{
	lockdep_assert_held(&engram_tables_mutex);
	memset(info, 0, sizeof(*info));
	strscpy(info->name, t->name, sizeof(info->name));
	strscpy(info->path, t->path, sizeof(info->path));
	info->generation = t->generation;
	info->rows = t->rows;
	info->held_first = t->held_first;
	info->held_rows = t->held_rows;
	info->weight_offset = t->weight_offset;
	info->scale_offset = t->scale_offset;
	info->file_bytes = t->file_bytes;
	info->done_bytes = atomic64_read(&t->done_bytes);
	info->pinned_bytes = engram_table_pinned_bytes(t);
	info->meta_bytes = sizeof(*t);
	if (READ_ONCE(t->pages))
		info->meta_bytes += (u64)t->nr_pages * sizeof(*t->pages);
	info->inflight = engram_table_inflight(t);
	info->draining = READ_ONCE(t->draining);
	if (info->draining) {
		u64 last = READ_ONCE(t->drain_last), now = ktime_get_ns();

		info->drain_quiet_ns = now > last ? now - last : 0;
	}
	engram_stats_counters_snapshot(&t->stats, info->stats);
	engram_stats_hist_snapshot(&t->lat, info->lat);

	spin_lock_bh(&t->lock);
	info->state = t->state;
	info->verify_result = t->verify_result;
	info->have_sha256 = t->have_sha;
	memcpy(info->sha256, t->sha, sizeof(info->sha256));
	info->error = t->error;
	strscpy(info->errmsg, t->errmsg, sizeof(info->errmsg));
	info->elapsed_ns = t->job_ns ? t->job_ns :
			   ktime_to_ns(ktime_sub(ktime_get(), t->job_start));
	spin_unlock_bh(&t->lock);
}

/**
 * engram_table_info_by_name() - snapshot one table
 * @name: table name
 * @info: filled on success
 *
 * Return: 0 or -ENOENT.
 */
int engram_table_info_by_name(const char *name, struct engram_table_info *info)
{
	struct engram_table *t;

	mutex_lock(&engram_tables_mutex);
	t = engram_table_find(name);
	if (t)
		engram_table_snapshot(t, info);
	mutex_unlock(&engram_tables_mutex);
	return t ? 0 : -ENOENT;
}

/**
 * engram_table_info_nth() - snapshot the n-th table, for dumps
 * @n: position in load order, from 0
 * @info: filled on success
 *
 * Return: 0, or -ENOENT past the last table.
 */
int engram_table_info_nth(unsigned long n, struct engram_table_info *info)
{
	struct engram_table *t;
	int ret = -ENOENT;

	mutex_lock(&engram_tables_mutex);
	list_for_each_entry(t, &engram_tables, node) {
		if (n--)
			continue;
		engram_table_snapshot(t, info);
		ret = 0;
		break;
	}
	mutex_unlock(&engram_tables_mutex);
	return ret;
}

/**
 * engram_table_totals() - module-wide gauges
 * @count: number of tables present
 * @pinned_bytes: bytes of page cache pinned by all tables, each file once
 */
void engram_table_totals(u64 *count, u64 *pinned_bytes)
{
	mutex_lock(&engram_tables_mutex);
	*count = engram_ntables;
	*pinned_bytes = engram_table_sum_per_file(engram_table_pinned_bytes);
	mutex_unlock(&engram_tables_mutex);
}

/**
 * engram_table_serve_get() - find the table a request names and hold it
 * @digest: the request's ENGRAM_WIRE_DIGEST_PREFIX bytes of SHA-256
 * @generation: the request's generation
 * @tp: set to the held table on ENGRAM_WIRE_OK
 *
 * The hold keeps the table's pages and DMA maps alive (unload waits for it)
 * until engram_table_serve_put().  A table serves while READY or
 * VERIFYING: both keep every page pinned.  Takes no module-wide lock, and
 * for a table served no lock or counter that requests on other CPUs
 * share: the list is walked under RCU, the hold is per CPU, and unload
 * waits for a grace period before it kills the holds and waits for them.
 * Any context that may take a spinlock.
 *
 * Return: ENGRAM_WIRE_OK, ENGRAM_WIRE_UNKNOWN_TABLE or
 * ENGRAM_WIRE_TABLE_NOT_READY.
 */
int engram_table_serve_get(const u8 *digest, u64 generation, struct engram_table **tp)
{
	int status = ENGRAM_WIRE_UNKNOWN_TABLE;
	struct engram_table *t;
	u8 state;

	rcu_read_lock();
	list_for_each_entry_rcu(t, &engram_tables, node) {
		if (t->generation != generation)
			continue;
		/*
		 * Generations are unique, so the digest only guards against a
		 * stale client.  A table served has its digest for good, set
		 * before READY was published: read without the table's lock,
		 * which every request on every connection would share.
		 */
		state = smp_load_acquire(&t->state);
		if (state == ENGRAM_TABLE_READY || state == ENGRAM_TABLE_VERIFYING) {
			if (!memcmp(t->sha, digest, ENGRAM_WIRE_DIGEST_PREFIX) &&
			    percpu_ref_tryget_live(&t->holds)) {
				this_cpu_inc(*t->inflight);
				if (unlikely(READ_ONCE(t->draining)))
					WRITE_ONCE(t->drain_last, ktime_get_ns());
				*tp = t;
				status = ENGRAM_WIRE_OK;
			}
			break;
		}
		spin_lock_bh(&t->lock);
		if (t->have_sha && !memcmp(t->sha, digest, ENGRAM_WIRE_DIGEST_PREFIX))
			status = ENGRAM_WIRE_TABLE_NOT_READY;
		spin_unlock_bh(&t->lock);
		break;
	}
	rcu_read_unlock();
	return status;
}

/**
 * engram_table_serve_put() - drop a hold taken by engram_table_serve_get()
 * @t: the table
 *
 * Any context.
 */
void engram_table_serve_put(struct engram_table *t)
{
	this_cpu_dec(*t->inflight);
	percpu_ref_put(&t->holds);
}

/**
 * engram_table_rows() - rows of a table
 * @t: a held table
 *
 * Return: the row count.
 */
u64 engram_table_rows(const struct engram_table *t)
{
	return t->rows;
}

/**
 * engram_table_held() - the rows a table's host holds
 * @t: a held table
 * @first: set to the first
 * @rows: set to how many (engram_table_rows() for a whole table)
 */
void engram_table_held(const struct engram_table *t, u64 *first, u64 *rows)
{
	*first = t->held_first;
	*rows = t->held_rows;
}

/**
 * engram_table_name() - name of a table
 * @t: a held table
 *
 * Return: its name, valid while @t is held.
 */
const char *engram_table_name(const struct engram_table *t)
{
	return t->name;
}

/* Split [off, off + len) of the file into pieces that do not cross a page. */
static void engram_table_row_src_add(struct engram_row_src *src, u64 off, u32 len)
{
	while (len) {
		u32 in_page = offset_in_page(off);
		u32 n = min_t(u32, len, PAGE_SIZE - in_page);

		src->seg[src->n].page = off >> PAGE_SHIFT;
		src->seg[src->n].off = in_page;
		src->seg[src->n].len = n;
		src->n++;
		off += n;
		len -= n;
	}
}

/**
 * engram_table_row_src() - where a row's 264 bytes lie in the pinned pages
 * @t: a held table
 * @row: row index, below engram_table_rows()
 * @src: filled with 2 to 4 pieces, weight bytes first
 */
void engram_table_row_src(const struct engram_table *t, u32 row,
			  struct engram_row_src *src)
{
	src->n = 0;
	engram_table_row_src_add(src, t->weight_offset + (u64)row * ENGRAM_WEIGHT_BYTES,
				 ENGRAM_WEIGHT_BYTES);
	engram_table_row_src_add(src, t->scale_offset + (u64)row * ENGRAM_SCALE_BYTES,
				 ENGRAM_SCALE_BYTES);
}

/**
 * engram_table_page() - one of a table's pinned pages
 * @t: a held table (so every page is pinned)
 * @idx: page index in the file, as in struct engram_row_src
 *
 * For transports that hand the pages to the CPU (TCP) rather than to a
 * device.
 *
 * Return: the page.
 */
struct page *engram_table_page(const struct engram_table *t, pgoff_t idx)
{
	return t->pages[idx];
}

/**
 * engram_table_dma() - the DMA address of every page of a table for a device
 * @t: a held table (so every page is pinned)
 * @dev: the RDMA device that will read the pages
 *
 * The table is mapped for every device present when its load ends, and for
 * a device that appears later by the map worker.  This only looks the
 * addresses up, without a lock; when there are none yet (the worker is
 * still mapping, or an earlier attempt failed) it kicks the worker and
 * returns NULL, and the request is refused as TABLE_NOT_READY.
 *
 * Return: an array indexed like the table's pages, or NULL.
 */
const dma_addr_t *engram_table_dma(struct engram_table *t, struct ib_device *dev)
{
	const dma_addr_t *dma = engram_dma_lookup(&t->maps, dev);

	if (!dma)
		queue_work(engram_wq, &t->map_work);
	return dma;
}

/**
 * engram_table_counters() - a table's counters
 * @t: a held table
 *
 * Return: the counters; per-table ids must also be counted in
 * engram_global_stats (use engram_table_count_add()).
 */
struct engram_counters *engram_table_counters(struct engram_table *t)
{
	return &t->stats;
}

/**
 * engram_table_count_add() - count for a table and module-wide
 * @t: a held table
 * @id: a per-table counter id
 * @v: amount
 */
void engram_table_count_add(struct engram_table *t, enum engram_stat id, u64 v)
{
	engram_count_add(&t->stats, id, v);
	engram_count_add(&engram_global_stats, id, v);
}

/**
 * engram_table_latency() - record one request's service time
 * @t: a held table
 * @ns: nanoseconds from receive to response posted
 */
void engram_table_latency(struct engram_table *t, u64 ns)
{
	engram_stats_hist_add(&t->lat, ns);
}

/**
 * engram_table_catalog() - what a server announces to its clients
 * @out: array of @max entries
 * @max: its size
 * @version: the connection's protocol version
 *
 * Tables of 2^32 rows or more cannot be named by a request and are left
 * out; so are shards on a connection whose catalog cannot say which rows
 * they hold (below version 3), where a peer would take them for whole
 * tables, and draining tables below version 6, which cannot say so: a
 * table left out gets no new fetch either, and the fetches in flight end.
 *
 * Return: entries filled.
 */
u32 engram_table_catalog(struct engram_wire_table *out, u32 max, u16 version)
{
	bool shards = version >= ENGRAM_WIRE_VERSION_SHARDS;
	bool drain = version >= ENGRAM_WIRE_VERSION_DRAIN;
	struct engram_table *t;
	u32 n = 0;

	mutex_lock(&engram_tables_mutex);
	list_for_each_entry(t, &engram_tables, node) {
		if (n == max)
			break;
		if (!t->rows || t->rows > U32_MAX)
			continue;
		if (t->held_rows != t->rows && !shards)
			continue;
		if (READ_ONCE(t->draining) && !drain)
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		strscpy(out[n].name, t->name, sizeof(out[n].name));
		out[n].generation = t->generation;
		out[n].rows = t->rows;
		out[n].held_first = t->held_first;
		out[n].held_rows = t->held_rows;
		out[n].weight_offset = t->weight_offset;
		out[n].scale_offset = t->scale_offset;
		out[n].row_bytes = ENGRAM_ROW_BYTES;
		spin_lock_bh(&t->lock);
		if (t->have_sha)
			memcpy(out[n].sha256, t->sha, ENGRAM_SHA256_LEN);
		out[n].state = t->state;
		spin_unlock_bh(&t->lock);
		if (READ_ONCE(t->draining) && (out[n].state == ENGRAM_TABLE_READY ||
					       out[n].state == ENGRAM_TABLE_VERIFYING))
			out[n].state = ENGRAM_TABLE_DRAINING;
		n++;
	}
	mutex_unlock(&engram_tables_mutex);
	return n;
}

/**
 * engram_table_device_added() - map every table for a new RDMA device
 *
 * Called from the ib_client's add; the mapping runs in the tables' map
 * workers.
 */
void engram_table_device_added(void)
{
	struct engram_table *t;

	mutex_lock(&engram_tables_mutex);
	list_for_each_entry(t, &engram_tables, node)
		queue_work(engram_wq, &t->map_work);
	mutex_unlock(&engram_tables_mutex);
}

/**
 * engram_table_init() - set up the table worker
 *
 * Return: 0 or -ENOMEM.
 */
int engram_table_init(void)
{
	/*
	 * Generations start at a random point, not the clock: a module
	 * reloaded within a second, or after the clock stepped back, must not
	 * reissue a generation a client may still send, since a request names
	 * its table by generation and an 8-byte digest prefix, which two
	 * tables of one file share.  Bits 20-61 are random: a million loads
	 * follow without wrapping, and two module loads meet with odds of
	 * about 2^-42.
	 */
	atomic64_set(&engram_generation, get_random_u64() & GENMASK_ULL(61, 20));
	/* Unbound: loads are long, I/O-bound and may run side by side. */
	engram_wq = alloc_workqueue("engram_rdma", WQ_UNBOUND, 0);
	return engram_wq ? 0 : -ENOMEM;
}

/**
 * engram_table_exit() - unload every table, cancelling jobs in flight
 *
 * Called after netlink is gone, so nothing can add a table meanwhile.
 */
void engram_table_exit(void)
{
	struct engram_table *t;

	for (;;) {
		mutex_lock(&engram_tables_mutex);
		t = list_first_entry_or_null(&engram_tables, struct engram_table, node);
		if (t) {
			list_del_rcu(&t->node);
			engram_ntables--;
		}
		mutex_unlock(&engram_tables_mutex);
		if (!t)
			break;
		engram_table_destroy(t);
	}
	destroy_workqueue(engram_wq);
}
