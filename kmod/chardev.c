// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/engram_rdma: the client role's user interface (Documentation/ioctl.rst).
 * Everything a process sets up here (open tables, registered buffers,
 * fetches) belongs to its open file and ends with it.  Every ioctl struct is
 * read with copy_struct_from_user(), so old and new callers both work.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include "client.h"
#include "cost.h"
#include "kept.h"
#include "link_table.h"
#include "pieces.h"
#include "replica.h"

/* Per fd: bounds, so one process cannot pin the module's memory without end. */
#define ENGRAM_FILE_MAX_BUFS	1024
#define ENGRAM_FILE_MAX_FETCHES	1024

struct engram_open_table {
	struct engram_link *link;	/* NULL: opened on no link, @rg */
	struct engram_replica *rg;	/* the table's replicas, without @link */
	struct engram_link_table *lt;	/* its counters, or NULL */
	struct engram_wire_table e;
	u32 max_rows;
};

struct engram_file {
	struct mutex mutex;		/* everything below but wq */
	struct xarray tables;		/* handle -> struct engram_open_table */
	struct xarray bufs;		/* buf_id -> struct engram_ubuf */
	unsigned int nr_bufs;
	u32 next_buf;			/* ids are not reused soon: a stale id fails */
	u32 next_handle;
	struct list_head fetches;	/* submitted, not yet reaped */
	unsigned int nr_fetches;
	unsigned int nr_words;		/* of them, with a completion word */
	u64 next_ticket;
	wait_queue_head_t wq;		/* a fetch of this fd ended */
	/*
	 * The last fetch freed, kept with its rows array for the next: in
	 * steady state a fetch allocates nothing.  Taken and left with
	 * xchg()/cmpxchg(), as threads sharing the fd submit at once.
	 */
	struct engram_fetch *spare;
};

/* Let go of what a fetch holds; it is then the fd's spare or freed. */
static void engram_chardev_fetch_free(struct engram_fetch *f)
{
	struct engram_file *ef = container_of(f->wq, struct engram_file, wq);
	unsigned int i;

	engram_replica_fetch_free(f);
	for (i = 0; i < f->nr_pieces; i++)
		if (f->pieces[i].buf)
			engram_ubuf_put(f->pieces[i].buf);
	if (f->done_buf)
		engram_ubuf_put(f->done_buf);
	if (f->link)
		engram_link_put(f->link);
	/* The last reference is the fd's, so the fd is still there. */
	if (!cmpxchg(&ef->spare, NULL, f))
		return;
	engram_replica_spares_free(f);
	kvfree(f->rows);
	kfree(f);
}

/* The fd's spare fetch, cleared but for its rows array, or a new one. */
static struct engram_fetch *engram_chardev_fetch_alloc(struct engram_file *ef)
{
	struct engram_fetch *f = xchg(&ef->spare, NULL);
	struct engram_replica_fetch *spare_rf;
	struct engram_fetch *spare_part;
	u32 *rows, cap;

	if (!f) {
		engram_cost_inc(ENGRAM_STAT_CLIENT_ALLOCS);
		f = kzalloc(sizeof(*f), GFP_KERNEL);
		if (!f)
			return NULL;
	} else {
		rows = f->rows;
		cap = f->rows_cap;
		spare_rf = f->spare_rf;
		spare_part = f->spare_part;
		memset(f, 0, sizeof(*f));
		f->rows = rows;
		f->rows_cap = cap;
		f->spare_rf = spare_rf;
		f->spare_part = spare_part;
	}
	f->wq = &ef->wq;
	return f;
}

static void engram_chardev_fetch_release(struct kref *ref)
{
	engram_chardev_fetch_free(container_of(ref, struct engram_fetch, ref));
}

/**
 * engram_chardev_fetch_put() - drop a reference on a fetch
 * @f: the fetch
 *
 * The last reference is always the fd's, dropped in process context once
 * the fetch has ended.
 */
void engram_chardev_fetch_put(struct engram_fetch *f)
{
	kref_put(&f->ref, engram_chardev_fetch_release);
}

/*
 * Read an extensible struct: the first __u32 is its size as the caller
 * knows it.  Too small for version 0 is EINVAL; a larger struct must have
 * zeros where this kernel knows no field (E2BIG otherwise).
 */
static int engram_chardev_get_arg(void *karg, size_t ksize, size_t min, void __user *uarg,
				  u32 *usize)
{
	int ret;

	if (get_user(*usize, (u32 __user *)uarg))
		return -EFAULT;
	if (*usize < min)
		return -EINVAL;
	/* As clone3() and openat2(): no struct will ever be this large. */
	if (*usize > PAGE_SIZE)
		return -E2BIG;
	ret = copy_struct_from_user(karg, ksize, uarg, *usize);
	return ret;
}

static int engram_chardev_put_arg(void __user *uarg, const void *karg, size_t ksize, u32 usize)
{
	return copy_to_user(uarg, karg, min_t(size_t, ksize, usize)) ? -EFAULT : 0;
}

static bool engram_chardev_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

static void engram_chardev_table_free(struct engram_open_table *ot)
{
	engram_link_table_put(ot->lt);
	if (ot->link)
		engram_link_put(ot->link);
	engram_replica_close(ot->rg);
	kfree(ot);
}

static long engram_chardev_ioc_open(struct engram_file *ef, void __user *uarg)
{
	struct engram_ioc_open a;
	struct engram_open_table *ot;
	struct engram_link *l = NULL;
	u32 usize, handle, first = 0;
	int ret;

	ret = engram_chardev_get_arg(&a, sizeof(a), ENGRAM_OPEN_SIZE_VER0, uarg, &usize);
	if (ret)
		return ret;
	if ((a.flags & ~ENGRAM_OPEN_FLAGS) || !(a.flags & ENGRAM_OPEN_FLAGS) ||
	    a.reserved0 || !engram_chardev_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	if ((a.flags & ENGRAM_OPEN_BY_NAME) && !engram_wire_name_valid(a.name, sizeof(a.name)))
		return -EINVAL;
	ot = kzalloc(sizeof(*ot), GFP_KERNEL);
	if (!ot)
		return -ENOMEM;
	if (a.link) {
		l = engram_link_admin_open_table(a.link, a.flags, a.name, a.sha256, &ot->e,
						 &ot->max_rows);
		if (IS_ERR(l)) {
			kfree(ot);
			return PTR_ERR(l);
		}
		ot->link = l;
		ot->lt = engram_link_table_get(l, ot->e.name, ot->e.sha256, ot->e.weight_offset);
		first = engram_link_id(l);
	} else {
		/* On no link: every link that serves the table (its identity). */
		ot->rg = engram_replica_open(a.flags, a.name, a.sha256, &ot->e, &ot->max_rows,
					     &first);
		if (IS_ERR(ot->rg)) {
			ret = PTR_ERR(ot->rg);
			kfree(ot);
			return ret;
		}
	}
	/* Reserved, not published, until the caller has its handle. */
	mutex_lock(&ef->mutex);
	ret = xa_alloc_cyclic(&ef->tables, &handle, NULL, XA_LIMIT(1, 4096),
			      &ef->next_handle, GFP_KERNEL);
	mutex_unlock(&ef->mutex);
	if (ret < 0) {
		engram_chardev_table_free(ot);
		return ret == -EBUSY ? -EMFILE : ret;
	}
	a.handle = handle;
	a.link_out = first;
	a.rows = ot->e.rows;
	a.generation = ot->e.generation;
	a.row_bytes = ot->e.row_bytes;
	a.max_rows = ot->max_rows;
	memcpy(a.sha256_out, ot->e.sha256, sizeof(a.sha256_out));
	a.weight_offset = ot->e.weight_offset;
	a.scale_offset = ot->e.scale_offset;
	ret = engram_chardev_put_arg(uarg, &a, sizeof(a), usize);
	mutex_lock(&ef->mutex);
	if (ret)
		xa_erase(&ef->tables, handle);
	else
		xa_store(&ef->tables, handle, ot, GFP_KERNEL);	/* reserved: no allocation */
	mutex_unlock(&ef->mutex);
	if (ret)
		engram_chardev_table_free(ot);
	return ret;
}

static long engram_chardev_ioc_reg(struct engram_file *ef, void __user *uarg)
{
	struct engram_ioc_reg a;
	struct engram_ubuf *b;
	u32 usize, id;
	int ret;

	ret = engram_chardev_get_arg(&a, sizeof(a), ENGRAM_REG_SIZE_VER0, uarg, &usize);
	if (ret)
		return ret;
	if ((a.flags & ~ENGRAM_REG_F_KEEP_KEYS) || a.reserved0 ||
	    !engram_chardev_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	if (READ_ONCE(ef->nr_bufs) >= ENGRAM_FILE_MAX_BUFS)
		return -EMFILE;
	/* Pinning may take long: the fd's other calls go on meanwhile. */
	ret = engram_ubuf_create(a.addr, a.length, &b);
	if (ret)
		return ret;
	b->keep = a.flags & ENGRAM_REG_F_KEEP_KEYS;
	mutex_lock(&ef->mutex);
	ret = -EMFILE;
	if (ef->nr_bufs < ENGRAM_FILE_MAX_BUFS)
		ret = xa_alloc_cyclic(&ef->bufs, &id, b, XA_LIMIT(1, U32_MAX),
				      &ef->next_buf, GFP_KERNEL);
	if (ret < 0) {
		mutex_unlock(&ef->mutex);
		engram_ubuf_put(b);
		return ret;
	}
	b->id = id;
	ef->nr_bufs++;
	mutex_unlock(&ef->mutex);
	a.buf_id = id;
	ret = engram_chardev_put_arg(uarg, &a, sizeof(a), usize);
	if (ret) {
		mutex_lock(&ef->mutex);
		if (xa_erase(&ef->bufs, id) == b) {
			ef->nr_bufs--;
			engram_ubuf_put(b);
		}
		mutex_unlock(&ef->mutex);
	}
	return ret;
}

static bool engram_chardev_fetch_targets(const struct engram_fetch *f, const struct engram_ubuf *b)
{
	unsigned int i;

	for (i = 0; i < f->nr_pieces; i++)
		if (f->pieces[i].buf == b)
			return true;
	return f->done_buf == b;
}

/* A fetch of the fd that has not ended and writes into @b, held; or NULL. */
static struct engram_fetch *engram_chardev_buf_writer(struct engram_file *ef,
						      const struct engram_ubuf *b)
{
	struct engram_fetch *f, *found = NULL;

	mutex_lock(&ef->mutex);
	list_for_each_entry(f, &ef->fetches, fd_node) {
		if (!engram_fetch_done(f) && engram_chardev_fetch_targets(f, b)) {
			kref_get(&f->ref);
			found = f;
			break;
		}
	}
	mutex_unlock(&ef->mutex);
	return found;
}

static long engram_chardev_ioc_unreg(struct engram_file *ef, void __user *uarg)
{
	struct engram_fetch *f;
	struct engram_ioc_unreg a;
	struct engram_ubuf *b;
	u32 usize;
	int ret;

	ret = engram_chardev_get_arg(&a, sizeof(a), ENGRAM_UNREG_SIZE_VER0, uarg, &usize);
	if (ret)
		return ret;
	if (a.flags || a.reserved0)
		return -EINVAL;
	mutex_lock(&ef->mutex);
	b = a.buf_id ? xa_erase(&ef->bufs, a.buf_id) : NULL;
	if (b)
		ef->nr_bufs--;
	mutex_unlock(&ef->mutex);
	if (!b)
		return -ENOENT;
	/*
	 * A barrier: once this returns, nothing writes the buffer again.  No
	 * new fetch can name it now, and a fetch is on the list by the time
	 * its submit has let go of ef->mutex.  Each one still running gets the
	 * time a closing fd gives it, then its connection is broken; one break
	 * ends every fetch of that connection, so this takes about 2 s per
	 * link at worst.  The fetches keep their reference (the pages stay
	 * pinned) until they are reaped.
	 */
	while ((f = engram_chardev_buf_writer(ef, b))) {
		engram_link_fetch_end(f);
		engram_chardev_fetch_put(f);
	}
	/* Its kept keys too: a fetch reaped later holds the pages, not a key. */
	engram_kept_buf_drop(b);
	engram_ubuf_put(b);
	return 0;
}

/*
 * Cut the destination into pieces that each fit one registration and hold
 * whole rows: the concatenation of the caller's ranges, row i at i * stride,
 * cut only where no row straddles.  Each piece becomes one MR and one wire
 * range, so the server's placement rule and ours agree byte for byte.
 * The arithmetic is pieces.c's; each piece holds its buffer.
 */
static int engram_chardev_fetch_cut(struct engram_fetch *f, const struct engram_dest *d,
				    unsigned int nd, u32 mr_pages, u32 max_pieces)
{
	struct engram_pieces_dest pd[ENGRAM_WIRE_MAX_RANGES];
	struct engram_pieces_piece pp[ENGRAM_WIRE_MAX_RANGES];
	bool keep = true;
	unsigned int i;
	u32 n;
	int ret;

	for (i = 0; i < nd; i++) {
		pd[i].addr = d[i].buf->addr;
		pd[i].off = d[i].off;
		pd[i].len = d[i].len;
		keep &= d[i].buf->keep;
	}
	/*
	 * Buffers whose keys are kept are cut at their fixed windows (kept.c);
	 * a destination that needs too many pieces so is cut as any other and
	 * registered per fetch.
	 */
	ret = engram_pieces_cut(f->nr_rows, f->stride, ENGRAM_ROW_BYTES, pd, nd,
				(u64)mr_pages * PAGE_SIZE, PAGE_SIZE, keep, pp,
				min_t(u32, max_pieces, ARRAY_SIZE(pp)), &n);
	if (ret == -E2BIG && keep)
		ret = engram_pieces_cut(f->nr_rows, f->stride, ENGRAM_ROW_BYTES, pd, nd,
					(u64)mr_pages * PAGE_SIZE, PAGE_SIZE, false, pp,
					min_t(u32, max_pieces, ARRAY_SIZE(pp)), &n);
	f->nr_pieces = 0;
	if (ret)
		return ret;
	for (i = 0; i < n; i++) {
		engram_ubuf_get(d[pp[i].dest].buf);
		f->pieces[i].buf = d[pp[i].dest].buf;
		f->pieces[i].off = pp[i].off;
		f->pieces[i].len = pp[i].len;
	}
	f->nr_pieces = n;
	return 0;
}

static bool engram_chardev_dest_overlap(const struct engram_dest *a, const struct engram_dest *b)
{
	return a->buf == b->buf && a->off < b->off + b->len && b->off < a->off + a->len;
}

/* Resolve the destination of a fetch; the caller holds ef->mutex. */
static int engram_chardev_fetch_dest(struct engram_file *ef, const struct engram_ioc_fetch *a,
				     struct engram_dest *d, unsigned int *nd)
{
	struct engram_ioc_range r[ENGRAM_WIRE_MAX_RANGES];
	unsigned int i, j;

	if (!(a->flags & ENGRAM_FETCH_RANGES)) {
		if (a->ranges || a->nr_ranges)
			return -EINVAL;
		d[0].buf = xa_load(&ef->bufs, a->buf_id);
		if (!d[0].buf)
			return -ENOENT;
		if (a->offset >= d[0].buf->length)
			return -ENOSPC;
		d[0].off = a->offset;
		d[0].len = d[0].buf->length - a->offset;
		*nd = 1;
		return 0;
	}
	if (a->buf_id || a->offset)
		return -EINVAL;
	if (!a->nr_ranges)
		return -EINVAL;
	if (a->nr_ranges > ENGRAM_WIRE_MAX_RANGES)
		return -E2BIG;
	if (copy_from_user(r, u64_to_user_ptr(a->ranges), sizeof(r[0]) * a->nr_ranges))
		return -EFAULT;
	for (i = 0; i < a->nr_ranges; i++) {
		if (r[i].reserved || !r[i].length)
			return -EINVAL;
		d[i].buf = xa_load(&ef->bufs, r[i].buf_id);
		if (!d[i].buf)
			return -ENOENT;
		if (r[i].offset > d[i].buf->length ||
		    r[i].length > d[i].buf->length - r[i].offset)
			return -EINVAL;
		d[i].off = r[i].offset;
		d[i].len = r[i].length;
		for (j = 0; j < i; j++)
			if (engram_chardev_dest_overlap(&d[i], &d[j]))
				return -EINVAL;
	}
	*nd = a->nr_ranges;
	return 0;
}

/*
 * Resolve a fetch's completion word: inside a registered buffer, and not
 * among the bytes its rows span (they would overwrite it); the caller
 * holds ef->mutex.
 */
static int engram_chardev_fetch_word(struct engram_file *ef, const struct engram_ioc_fetch *a,
				     const struct engram_dest *d, unsigned int nd,
				     struct engram_fetch *f)
{
	u64 span = (u64)(a->nr_rows - 1) * a->stride + ENGRAM_ROW_BYTES;
	struct engram_dest w;
	unsigned int i;

	w.buf = xa_load(&ef->bufs, a->done_buf_id);
	if (!w.buf)
		return -ENOENT;
	/* Aligned in memory, so in one page and stored at once. */
	if (w.buf->length < sizeof(u64) || a->done_offset > w.buf->length - sizeof(u64) ||
	    !IS_ALIGNED(w.buf->addr + a->done_offset, sizeof(u64)))
		return -EINVAL;
	w.off = a->done_offset;
	w.len = sizeof(u64);
	for (i = 0; i < nd && span; i++) {
		struct engram_dest rows = { d[i].buf, d[i].off, min(d[i].len, span) };

		if (engram_chardev_dest_overlap(&w, &rows))
			return -EINVAL;
		span -= rows.len;
	}
	engram_ubuf_get(w.buf);
	f->done_buf = w.buf;
	f->done_off = w.off;
	f->done_value = a->done_value;
	return 0;
}

/* Validate, build and submit one fetch; on success it is on ef->fetches. */
static int engram_chardev_fetch_start(struct engram_file *ef, struct engram_ioc_fetch *a,
				      bool polled, struct engram_fetch **out)
{
	struct engram_dest d[ENGRAM_WIRE_MAX_RANGES];
	struct engram_open_table *ot;
	struct engram_fetch *f;
	unsigned int nd;
	u64 timeout;
	int ret;

	if ((a->flags & ~ENGRAM_FETCH_FLAGS) || a->reserved0 ||
	    !engram_chardev_zero(a->reserved, sizeof(a->reserved)))
		return -EINVAL;
	if (!a->nr_rows || a->stride < ENGRAM_ROW_BYTES || !a->rows || a->reserved1)
		return -EINVAL;
	if (a->flags & ENGRAM_FETCH_DONE_WORD) {
		if (!a->done_buf_id || (a->done_value & ENGRAM_DONE_FAILED))
			return -EINVAL;
	} else if (a->done_buf_id || a->done_offset || a->done_value) {
		return -EINVAL;
	}
	f = engram_chardev_fetch_alloc(ef);
	if (!f)
		return -ENOMEM;
	kref_init(&f->ref);
	f->slot = -1;
	f->polled = polled;
	f->nr_rows = a->nr_rows;
	f->stride = a->stride;
	timeout = a->timeout_ns ? a->timeout_ns :
		  (u64)engram_params_timeout_ms() * NSEC_PER_MSEC;
	f->deadline = ktime_add_ns(ktime_get(), min_t(u64, timeout, ENGRAM_FETCH_MAX_TIMEOUT_NS));

	mutex_lock(&ef->mutex);
	ret = -ENOENT;
	ot = xa_load(&ef->tables, a->handle);
	if (!ot)
		goto err;
	ret = -E2BIG;
	if (a->nr_rows > ot->max_rows)
		goto err;
	ret = -EMFILE;
	if (ef->nr_fetches >= ENGRAM_FILE_MAX_FETCHES)
		goto err;
	if (f->rows_cap < a->nr_rows) {
		kvfree(f->rows);
		f->rows_cap = 0;
		engram_cost_inc(ENGRAM_STAT_CLIENT_ALLOCS);
		f->rows = kvmalloc_array(a->nr_rows, sizeof(*f->rows), GFP_KERNEL);
		ret = -ENOMEM;
		if (!f->rows)
			goto err;
		f->rows_cap = a->nr_rows;
	}
	ret = -EFAULT;
	if (copy_from_user(f->rows, u64_to_user_ptr(a->rows), (size_t)a->nr_rows * 4))
		goto err;
	ret = engram_chardev_fetch_dest(ef, a, d, &nd);
	if (ret)
		goto err;
	if (a->flags & ENGRAM_FETCH_DONE_WORD) {
		ret = engram_chardev_fetch_word(ef, a, d, nd, f);
		if (ret)
			goto err;
	}
	memcpy(f->digest, ot->e.sha256, sizeof(f->digest));
	if (ot->rg) {
		/*
		 * The pieces are the destination as the rows fill it, checked
		 * here; each replica's parts are cut from them for its limits.
		 */
		ret = engram_chardev_fetch_cut(f, d, nd, U32_MAX, ENGRAM_WIRE_MAX_RANGES);
		if (!ret)
			ret = engram_replica_submit(ot->rg, f);
		if (ret)
			goto err;
	} else {
		engram_link_get(ot->link);
		f->link = ot->link;
		f->generation = ot->e.generation;
		f->lt = ot->lt;
		ret = engram_chardev_fetch_cut(f, d, nd, engram_link_mr_pages(f->link),
					       engram_link_max_ranges(f->link));
		if (ret)
			goto err;
		ret = engram_link_submit(f->link, f);
		if (ret) {
			engram_link_table_submit_failed(ot->lt, ret);
			goto err;
		}
	}
	f->user_ticket = ++ef->next_ticket;
	list_add_tail(&f->fd_node, &ef->fetches);
	ef->nr_fetches++;
	ef->nr_words += !!f->done_buf;
	kref_get(&f->ref);		/* the caller's, besides the list's */
	mutex_unlock(&ef->mutex);
	*out = f;
	return 0;

err:
	mutex_unlock(&ef->mutex);
	engram_chardev_fetch_free(f);
	return ret;
}

/*
 * What a reap does once the fetch is off the fd: its table's counters, its
 * rows given to the CPU (unless that was done before its completion word
 * was set: the caller may have written there since), and the list's
 * reference dropped.
 */
static void engram_chardev_fetch_account(struct engram_fetch *f)
{
	if (f->rf) {
		engram_replica_reap(f);
	} else {
		engram_link_table_fetched(f->lt, f->error, f->wire_status, f->nr_rows, f->rtt_ns);
		if (!f->error && !f->rows_synced)
			engram_link_fetch_sync_rows(f);
	}
	engram_chardev_fetch_put(f);		/* the list's */
}

/* Take a finished fetch off the fd; the caller still holds a reference. */
static void engram_chardev_fetch_reap(struct engram_file *ef, struct engram_fetch *f)
{
	bool mine = false;

	mutex_lock(&ef->mutex);
	if (!list_empty(&f->fd_node)) {
		list_del_init(&f->fd_node);
		ef->nr_fetches--;
		ef->nr_words -= !!f->done_buf;
		mine = true;
	}
	mutex_unlock(&ef->mutex);
	if (mine)
		engram_chardev_fetch_account(f);
}

/*
 * A fetch with a completion word needs no WAIT: those that have ended
 * with every row in place are reaped by the fd's next submission, so a
 * caller that only watches words does not fill the fd.  One that failed
 * stays for WAIT, which tells its caller to read the rows some other way.
 * Nothing is scanned while the fd has no fetch with a word.
 */
static void engram_chardev_reap_words(struct engram_file *ef)
{
	struct engram_fetch *f, *ended[32];
	unsigned int i, n;

	while (READ_ONCE(ef->nr_words)) {
		n = 0;
		mutex_lock(&ef->mutex);
		list_for_each_entry(f, &ef->fetches, fd_node) {
			if (f->done_buf && engram_fetch_done(f) && !f->error) {
				ended[n++] = f;
				if (n == ARRAY_SIZE(ended))
					break;
			}
		}
		/*
		 * Off the list here, under ef->mutex: a WAIT that holds one of
		 * them then finds it reaped, and leaves its counters to us.
		 */
		for (i = 0; i < n; i++) {
			list_del_init(&ended[i]->fd_node);
			ef->nr_fetches--;
			ef->nr_words--;
		}
		mutex_unlock(&ef->mutex);
		for (i = 0; i < n; i++)
			engram_chardev_fetch_account(ended[i]);
		if (n < ARRAY_SIZE(ended))
			return;
	}
}

static long engram_chardev_ioc_fetch(struct engram_file *ef, void __user *uarg, bool wait)
{
	struct engram_ioc_fetch a;
	struct engram_fetch *f;
	u32 usize;
	int ret;

	ret = engram_chardev_get_arg(&a, sizeof(a), ENGRAM_FETCH_SIZE_VER0, uarg, &usize);
	if (ret)
		return ret;
	engram_chardev_reap_words(ef);
	/* Only a caller that waits here, polling, reaps a poll queue. */
	ret = engram_chardev_fetch_start(ef, &a, wait && (a.flags & ENGRAM_FETCH_BUSY_POLL), &f);
	if (ret)
		return ret;
	a.ticket = f->user_ticket;
	if (!wait) {
		engram_chardev_fetch_put(f);
		return engram_chardev_put_arg(uarg, &a, sizeof(a), usize);
	}
	ret = engram_link_fetch_wait(f, 0, a.flags & ENGRAM_FETCH_BUSY_POLL);
	if (ret == -EINTR) {
		/* Still in flight: WAIT for a.ticket, or close, ends it. */
		engram_chardev_fetch_put(f);
		engram_chardev_put_arg(uarg, &a, sizeof(a), usize);
		return -EINTR;
	}
	engram_chardev_fetch_reap(ef, f);
	a.wire_status = f->wire_status;
	a.bad_index = f->bad_index;
	a.rtt_ns = f->rtt_ns;
	ret = f->error;
	engram_chardev_fetch_put(f);
	if (engram_chardev_put_arg(uarg, &a, sizeof(a), usize))
		return -EFAULT;
	return ret;
}

/*
 * The fetch a WAIT names, or for "any" one that has ended; failing that
 * (*pending), the one whose deadline comes first, so the waiter can
 * enforce it.
 */
static struct engram_fetch *engram_chardev_fetch_find(struct engram_file *ef, u64 ticket,
						      bool *pending)
{
	struct engram_fetch *f, *found = NULL;

	*pending = false;
	mutex_lock(&ef->mutex);
	list_for_each_entry(f, &ef->fetches, fd_node) {
		if (ticket ? f->user_ticket == ticket : engram_fetch_done(f)) {
			found = f;
			break;
		}
	}
	if (!found && !ticket) {
		list_for_each_entry(f, &ef->fetches, fd_node)
			if (!found || ktime_before(f->deadline, found->deadline))
				found = f;
		*pending = !!found;
	}
	if (found)
		kref_get(&found->ref);
	mutex_unlock(&ef->mutex);
	return found;
}

static bool engram_chardev_any_done(struct engram_file *ef)
{
	struct engram_fetch *f;
	bool done = false;

	mutex_lock(&ef->mutex);
	list_for_each_entry(f, &ef->fetches, fd_node)
		if (engram_fetch_done(f))
			done = true;
	mutex_unlock(&ef->mutex);
	return done;
}

/*
 * WAIT for any fetch: sleep until one of the fd's fetches ends, at most
 * until @until or the first deadline among them (@first), which is then
 * enforced by waiting on that fetch.
 */
static int engram_chardev_wait_any(struct engram_file *ef, struct engram_fetch *first,
				   ktime_t until, bool busy)
{
	ktime_t stop = ktime_before(first->deadline, until) ? first->deadline : until;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	int ret = -EAGAIN;
	s64 left;

	/*
	 * wait_woken(), not wait_event_*(): engram_chardev_any_done() takes the fd's
	 * mutex, which must not be taken with the task already set to sleep:
	 * a mutex that sleeps leaves the task running, and the wait spins.
	 */
	add_wait_queue(&ef->wq, &wait);
	for (;;) {
		if (engram_chardev_any_done(ef)) {
			ret = 0;
			break;
		}
		left = ktime_to_ns(ktime_sub(stop, ktime_get()));
		if (left <= 0)
			break;
		if (signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		if (busy)
			cond_resched();
		else
			wait_woken(&wait, TASK_INTERRUPTIBLE, nsecs_to_jiffies(left) + 1);
	}
	remove_wait_queue(&ef->wq, &wait);
	if (ret != -EAGAIN)
		return ret;
	if (!ktime_before(stop, first->deadline))
		return engram_link_fetch_wait(first, 0, busy);	/* breaks the link */
	return -EAGAIN;
}

static long engram_chardev_ioc_wait(struct engram_file *ef, void __user *uarg)
{
	struct engram_ioc_wait a;
	struct engram_fetch *f;
	bool busy, pending;
	ktime_t until;
	u32 usize;
	int ret;

	ret = engram_chardev_get_arg(&a, sizeof(a), ENGRAM_WAIT_SIZE_VER0, uarg, &usize);
	if (ret)
		return ret;
	if ((a.flags & ~ENGRAM_FETCH_BUSY_POLL) || a.reserved0 ||
	    !engram_chardev_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	busy = a.flags & ENGRAM_FETCH_BUSY_POLL;
	f = engram_chardev_fetch_find(ef, a.ticket, &pending);
	if (!f)
		return -ENOENT;
	if (pending) {
		until = ktime_add_ns(ktime_get(), a.timeout_ns ?
				     min_t(u64, a.timeout_ns, ENGRAM_FETCH_MAX_TIMEOUT_NS) :
				     ENGRAM_FETCH_MAX_TIMEOUT_NS);
		ret = engram_chardev_wait_any(ef, f, until, busy);
		engram_chardev_fetch_put(f);
		if (ret)
			return ret;
		f = engram_chardev_fetch_find(ef, 0, &pending);
		if (!f)
			return -ENOENT;		/* another thread reaped it */
	}
	ret = engram_link_fetch_wait(f, a.timeout_ns, busy);
	if (ret) {
		engram_chardev_fetch_put(f);
		return ret;
	}
	engram_chardev_fetch_reap(ef, f);
	a.done_ticket = f->user_ticket;
	a.error = f->error;
	a.wire_status = f->wire_status;
	a.bad_index = f->bad_index;
	a.rtt_ns = f->rtt_ns;
	engram_chardev_fetch_put(f);
	return engram_chardev_put_arg(uarg, &a, sizeof(a), usize);
}

/*
 * User space served a failed fetch's rows from its local copy: count the
 * fallback with the table (and so its link) and module-wide.  Nothing else
 * changes; the handle stays as it was.
 */
static long engram_chardev_ioc_report(struct engram_file *ef, void __user *uarg)
{
	struct engram_ioc_report a;
	struct engram_open_table *ot;
	u32 usize;
	int ret;

	ret = engram_chardev_get_arg(&a, sizeof(a), ENGRAM_REPORT_SIZE_VER0, uarg, &usize);
	if (ret)
		return ret;
	if (a.flags || a.reserved0 || !engram_chardev_zero(a.reserved, sizeof(a.reserved)))
		return -EINVAL;
	if (!a.rows || a.rows > BIT(31) || a.error > 0 || a.error < -MAX_ERRNO)
		return -EINVAL;
	mutex_lock(&ef->mutex);
	ot = xa_load(&ef->tables, a.handle);
	if (ot)
		engram_link_table_report(ot->rg ? engram_replica_first_lt(ot->rg) : ot->lt,
					 a.rows);
	mutex_unlock(&ef->mutex);
	return ot ? 0 : -ENOENT;
}

static long engram_chardev_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct engram_file *ef = file->private_data;
	void __user *uarg = (void __user *)arg;

	/*
	 * Match by number and direction only: _IOC_SIZE is the caller's
	 * sizeof, which may be older or newer than ours (the size field says).
	 */
	if (_IOC_TYPE(cmd) != ENGRAM_IOC_MAGIC)
		return -ENOTTY;
	switch (cmd & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT)) {
	case ENGRAM_IOC_OPEN_TABLE & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT):
		return engram_chardev_ioc_open(ef, uarg);
	case ENGRAM_IOC_REG_BUF & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT):
		return engram_chardev_ioc_reg(ef, uarg);
	case ENGRAM_IOC_UNREG_BUF & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT):
		return engram_chardev_ioc_unreg(ef, uarg);
	case ENGRAM_IOC_SUBMIT & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT):
		return engram_chardev_ioc_fetch(ef, uarg, false);
	case ENGRAM_IOC_FETCH & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT):
		return engram_chardev_ioc_fetch(ef, uarg, true);
	case ENGRAM_IOC_WAIT & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT):
		return engram_chardev_ioc_wait(ef, uarg);
	case ENGRAM_IOC_REPORT & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT):
		return engram_chardev_ioc_report(ef, uarg);
	default:
		return -ENOTTY;
	}
}

static __poll_t engram_chardev_poll(struct file *file, struct poll_table_struct *wait)
{
	struct engram_file *ef = file->private_data;
	struct engram_fetch *f;
	__poll_t mask = 0;

	poll_wait(file, &ef->wq, wait);
	mutex_lock(&ef->mutex);
	list_for_each_entry(f, &ef->fetches, fd_node) {
		if (engram_fetch_done(f)) {
			mask = EPOLLIN | EPOLLRDNORM;
			break;
		}
	}
	mutex_unlock(&ef->mutex);
	return mask;
}

static int engram_chardev_open(struct inode *inode, struct file *file)
{
	struct engram_file *ef = kzalloc(sizeof(*ef), GFP_KERNEL);

	if (!ef)
		return -ENOMEM;
	mutex_init(&ef->mutex);
	xa_init_flags(&ef->tables, XA_FLAGS_ALLOC1);
	xa_init_flags(&ef->bufs, XA_FLAGS_ALLOC1);
	INIT_LIST_HEAD(&ef->fetches);
	init_waitqueue_head(&ef->wq);
	file->private_data = ef;
	return 0;
}

/*
 * Last close, also when the process was killed: every fetch must be over
 * (or its connection broken) before the buffers it targets are unpinned.
 */
static int engram_chardev_release(struct inode *inode, struct file *file)
{
	struct engram_file *ef = file->private_data;
	struct engram_open_table *ot;
	struct engram_fetch *f, *tmp;
	struct engram_ubuf *b;
	unsigned long idx;

	list_for_each_entry_safe(f, tmp, &ef->fetches, fd_node) {
		engram_link_fetch_end(f);
		list_del_init(&f->fd_node);
		engram_chardev_fetch_put(f);
	}
	xa_for_each(&ef->bufs, idx, b) {
		engram_kept_buf_drop(b);
		engram_ubuf_put(b);
	}
	xa_destroy(&ef->bufs);
	xa_for_each(&ef->tables, idx, ot)
		engram_chardev_table_free(ot);
	xa_destroy(&ef->tables);
	if (ef->spare) {
		engram_replica_spares_free(ef->spare);
		kvfree(ef->spare->rows);
		kfree(ef->spare);
	}
	/* A completion handler may still hold the lock it woke us under. */
	spin_lock_irq(&ef->wq.lock);
	spin_unlock_irq(&ef->wq.lock);
	kfree(ef);
	return 0;
}

static const struct file_operations engram_fops = {
	.owner = THIS_MODULE,
	.open = engram_chardev_open,
	.release = engram_chardev_release,
	.unlocked_ioctl = engram_chardev_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.poll = engram_chardev_poll,
	.llseek = noop_llseek,
};

static struct miscdevice engram_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = ENGRAM_DEV_NAME,
	.fops = &engram_fops,
	.mode = 0600,
};

/**
 * engram_chardev_init() - create /dev/engram_rdma
 *
 * Return: 0 or a negative errno from misc_register().
 */
int engram_chardev_init(void)
{
	return misc_register(&engram_misc);
}

/**
 * engram_chardev_exit() - remove /dev/engram_rdma
 *
 * Open files keep the module loaded, so none is left when this runs.
 */
void engram_chardev_exit(void)
{
	misc_deregister(&engram_misc);
}
