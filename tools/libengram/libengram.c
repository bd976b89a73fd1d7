// SPDX-License-Identifier: GPL-2.0
/*
 * libengram: the ioctls of /dev/engram_rdma (uapi/linux/engram_rdma.h) as a
 * small C API.  See libengram.h for the contract.
 *
 * The context keeps a record of every table it opened and every buffer it
 * registered.  The fetch path does not need them today (the kernel checks
 * handles, buffer ids and bounds itself), but the local fallback of a later
 * version does: a table will then carry its local copy of the shard (fd and
 * tensor offsets), and a fetch that fails remotely will read the rows with
 * pread() straight into the registered buffer the record describes.  Tables
 * and buffers are looked up under the context's lock; the ioctls themselves
 * run without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/engram_rdma.h>

#include "libengram.h"
#include "wire.h"

#define PUBLIC	__attribute__((visibility("default")))
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* The library's constants are the ABI's; the public header cannot include it. */
_Static_assert(LIBENGRAM_ROW_BYTES == ENGRAM_ROW_BYTES, "row bytes");
_Static_assert(LIBENGRAM_WEIGHT_BYTES == ENGRAM_WEIGHT_BYTES, "weight bytes");
_Static_assert(LIBENGRAM_SCALE_BYTES == ENGRAM_SCALE_BYTES, "scale bytes");
_Static_assert(LIBENGRAM_SHA256_LEN == ENGRAM_SHA256_LEN, "sha256 length");
_Static_assert(LIBENGRAM_NAME_MAX == ENGRAM_NAME_MAX, "name length");
_Static_assert(LIBENGRAM_MAX_RANGES == ENGRAM_WIRE_MAX_RANGES, "ranges");
/* The structs as the kernel's first version knows them. */
_Static_assert(sizeof(struct engram_ioc_open) == ENGRAM_OPEN_SIZE_VER0, "open size");
_Static_assert(sizeof(struct engram_ioc_reg) == ENGRAM_REG_SIZE_VER0, "reg size");
_Static_assert(sizeof(struct engram_ioc_unreg) == ENGRAM_UNREG_SIZE_VER0, "unreg size");
_Static_assert(sizeof(struct engram_ioc_fetch) == ENGRAM_FETCH_SIZE_VER0, "fetch size");
_Static_assert(sizeof(struct engram_ioc_wait) == ENGRAM_WAIT_SIZE_VER0, "wait size");
_Static_assert(sizeof(struct engram_ioc_range) == 24, "range size");
_Static_assert(sizeof(struct engram_range) == sizeof(struct engram_ioc_range),
	       "engram_range mirrors engram_ioc_range");

#define LIB_FLAGS	LIBENGRAM_BUSY_POLL

/* A table opened on this context. */
struct engram_table {
	struct engram_table_info info;
	/*
	 * Issue 4 (local fallback) adds here: the local copy of the shard
	 * (fd opened O_RDONLY, optionally O_DIRECT, its weight and scale
	 * offsets, checked against info.rows and info.sha256 once) and whether
	 * the caller allows the fallback at all.
	 */
};

/* A buffer registered on this context. */
struct engram_buf {
	uint32_t id;
	void *addr;
	size_t len;
};

struct engram {
	int fd;
	pthread_mutex_t lock;		/* tables, bufs */
	struct engram_table *tables;
	size_t nr_tables, cap_tables;
	struct engram_buf *bufs;
	size_t nr_bufs, cap_bufs;
};

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap * 2 : 8;
	void *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*arr, n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

/* ioctl with the errno as a negative return. */
static int xioctl(const struct engram *e, unsigned long req, void *arg)
{
	int ret;

	ret = ioctl(e->fd, req, arg);
	if (ret < 0)
		return errno ? -errno : -EIO;
	return ret;
}

PUBLIC int engram_open(const char *path, struct engram **out)
{
	struct engram *e;
	struct stat st;
	int fd, err;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!path)
		path = LIBENGRAM_DEFAULT_DEV;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto err_close;
	}
	if (!S_ISCHR(st.st_mode)) {
		err = -ENODEV;
		goto err_close;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		err = -ENOMEM;
		goto err_close;
	}
	err = -pthread_mutex_init(&e->lock, NULL);
	if (err) {
		free(e);
		goto err_close;
	}
	e->fd = fd;
	*out = e;
	return 0;

err_close:
	close(fd);
	return err;
}

PUBLIC void engram_close(struct engram *e)
{
	if (!e)
		return;
	close(e->fd);
	pthread_mutex_destroy(&e->lock);
	free(e->tables);
	free(e->bufs);
	free(e);
}

PUBLIC int engram_fd(const struct engram *e)
{
	return e ? e->fd : -EINVAL;
}

PUBLIC int64_t engram_table_open(struct engram *e, uint32_t link, const char *name,
				 const uint8_t *sha256, struct engram_table_info *info)
{
	struct engram_ioc_open o;
	struct engram_table t;
	size_t len = 0;
	int ret;

	if (!e || (!name && !sha256))
		return -EINVAL;
	if (name) {
		len = strlen(name);
		if (len >= ENGRAM_NAME_MAX)
			return -ENAMETOOLONG;
	}
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.link = link;
	if (name) {
		o.flags |= ENGRAM_OPEN_BY_NAME;
		memcpy(o.name, name, len);
	}
	if (sha256) {
		o.flags |= ENGRAM_OPEN_BY_SHA256;
		memcpy(o.sha256, sha256, ENGRAM_SHA256_LEN);
	}
	ret = xioctl(e, ENGRAM_IOC_OPEN_TABLE, &o);
	if (ret < 0)
		return ret;

	memset(&t, 0, sizeof(t));
	t.info.handle = o.handle;
	t.info.link = o.link_out;
	t.info.rows = o.rows;
	t.info.generation = o.generation;
	t.info.row_bytes = o.row_bytes;
	t.info.max_rows = o.max_rows;
	memcpy(t.info.sha256, o.sha256_out, ENGRAM_SHA256_LEN);
	if (name)
		memcpy(t.info.name, name, len);

	pthread_mutex_lock(&e->lock);
	ret = grow((void **)&e->tables, &e->cap_tables, e->nr_tables + 1, sizeof(t));
	if (!ret)
		e->tables[e->nr_tables++] = t;
	pthread_mutex_unlock(&e->lock);
	/*
	 * Without memory for the record the handle still works (the kernel
	 * holds the table); only the later fallback would have nothing to use.
	 * Keep it simple: report the failure, the handle dies with the fd.
	 */
	if (ret)
		return ret;
	if (info)
		*info = t.info;
	return o.handle;
}

PUBLIC int engram_buf_register(struct engram *e, void *addr, size_t len, uint32_t *buf_id)
{
	struct engram_ioc_reg r;
	struct engram_buf b;
	int ret;

	if (!e || !addr || !len || !buf_id)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.addr = (uintptr_t)addr;
	r.length = len;
	ret = xioctl(e, ENGRAM_IOC_REG_BUF, &r);
	if (ret < 0)
		return ret;

	b.id = r.buf_id;
	b.addr = addr;
	b.len = len;
	pthread_mutex_lock(&e->lock);
	ret = grow((void **)&e->bufs, &e->cap_bufs, e->nr_bufs + 1, sizeof(b));
	if (!ret)
		e->bufs[e->nr_bufs++] = b;
	pthread_mutex_unlock(&e->lock);
	if (ret) {
		struct engram_ioc_unreg u = { .size = sizeof(u), .buf_id = r.buf_id };

		xioctl(e, ENGRAM_IOC_UNREG_BUF, &u);
		return ret;
	}
	*buf_id = r.buf_id;
	return 0;
}

PUBLIC int engram_buf_unregister(struct engram *e, uint32_t buf_id)
{
	struct engram_ioc_unreg u;
	size_t i;
	int ret;

	if (!e)
		return -EINVAL;
	memset(&u, 0, sizeof(u));
	u.size = sizeof(u);
	u.buf_id = buf_id;
	ret = xioctl(e, ENGRAM_IOC_UNREG_BUF, &u);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&e->lock);
	for (i = 0; i < e->nr_bufs; i++) {
		if (e->bufs[i].id == buf_id) {
			e->bufs[i] = e->bufs[--e->nr_bufs];
			break;
		}
	}
	pthread_mutex_unlock(&e->lock);
	return 0;
}

static void result_from_fetch(struct engram_result *res, const struct engram_ioc_fetch *f,
			      int error)
{
	if (!res)
		return;
	memset(res, 0, sizeof(*res));
	res->ticket = f->ticket;
	res->error = error;
	res->wire_status = f->wire_status;
	res->bad_index = f->bad_index;
	res->rtt_ns = f->rtt_ns;
}

/*
 * Fill the common part of a fetch request.  Only what the kernel cannot
 * check is checked here: NULL pointers and a zero count, and flags of the
 * library's own.  Returns the kernel's flags or a negative errno.
 */
static int fetch_prep(struct engram_ioc_fetch *f, const struct engram *e, uint32_t handle,
		      const uint32_t *rows, uint32_t nr_rows, uint32_t stride,
		      uint64_t timeout_ns, uint32_t flags)
{
	if (!e || !rows || !nr_rows || (flags & ~LIB_FLAGS))
		return -EINVAL;
	memset(f, 0, sizeof(*f));
	f->size = sizeof(*f);
	f->handle = handle;
	f->nr_rows = nr_rows;
	f->rows = (uintptr_t)rows;
	f->stride = stride ? stride : ENGRAM_ROW_BYTES;
	f->timeout_ns = timeout_ns;
	if (flags & LIBENGRAM_BUSY_POLL)
		f->flags |= ENGRAM_FETCH_BUSY_POLL;
	return 0;
}

static int ranges_prep(struct engram_ioc_fetch *f, const struct engram_range *ranges,
		       uint32_t nr_ranges)
{
	if (!ranges || !nr_ranges)
		return -EINVAL;
	f->flags |= ENGRAM_FETCH_RANGES;
	/* Same layout, checked above: the kernel reads the caller's array. */
	f->ranges = (uintptr_t)ranges;
	f->nr_ranges = nr_ranges;
	return 0;
}

/* Run FETCH or SUBMIT; the outputs are written back also on failure. */
static int64_t fetch_run(struct engram *e, unsigned long req, struct engram_ioc_fetch *f,
			 struct engram_result *res)
{
	int ret;

	ret = xioctl(e, req, f);
	result_from_fetch(res, f, ret < 0 ? ret : 0);
	if (ret < 0)
		return ret;
	if (req == ENGRAM_IOC_SUBMIT)
		return f->ticket > INT64_MAX ? -EOVERFLOW : (int64_t)f->ticket;
	return 0;
}

PUBLIC int engram_fetch(struct engram *e, uint32_t handle, const uint32_t *rows,
			uint32_t nr_rows, uint32_t buf_id, uint64_t offset, uint32_t stride,
			uint64_t timeout_ns, uint32_t flags, struct engram_result *res)
{
	struct engram_ioc_fetch f;
	int ret;

	ret = fetch_prep(&f, e, handle, rows, nr_rows, stride, timeout_ns, flags);
	if (ret)
		return ret;
	f.buf_id = buf_id;
	f.offset = offset;
	return (int)fetch_run(e, ENGRAM_IOC_FETCH, &f, res);
}

PUBLIC int engram_fetch_ranges(struct engram *e, uint32_t handle, const uint32_t *rows,
			       uint32_t nr_rows, const struct engram_range *ranges,
			       uint32_t nr_ranges, uint32_t stride, uint64_t timeout_ns,
			       uint32_t flags, struct engram_result *res)
{
	struct engram_ioc_fetch f;
	int ret;

	ret = fetch_prep(&f, e, handle, rows, nr_rows, stride, timeout_ns, flags);
	if (!ret)
		ret = ranges_prep(&f, ranges, nr_ranges);
	if (ret)
		return ret;
	return (int)fetch_run(e, ENGRAM_IOC_FETCH, &f, res);
}

PUBLIC int64_t engram_submit(struct engram *e, uint32_t handle, const uint32_t *rows,
			     uint32_t nr_rows, uint32_t buf_id, uint64_t offset, uint32_t stride,
			     uint64_t timeout_ns, uint32_t flags, struct engram_result *res)
{
	struct engram_ioc_fetch f;
	int ret;

	/* Busy polling is a property of the wait, not of the submission. */
	if (flags & LIBENGRAM_BUSY_POLL)
		return -EINVAL;
	ret = fetch_prep(&f, e, handle, rows, nr_rows, stride, timeout_ns, flags);
	if (ret)
		return ret;
	f.buf_id = buf_id;
	f.offset = offset;
	return fetch_run(e, ENGRAM_IOC_SUBMIT, &f, res);
}

PUBLIC int64_t engram_submit_ranges(struct engram *e, uint32_t handle, const uint32_t *rows,
				    uint32_t nr_rows, const struct engram_range *ranges,
				    uint32_t nr_ranges, uint32_t stride, uint64_t timeout_ns,
				    uint32_t flags, struct engram_result *res)
{
	struct engram_ioc_fetch f;
	int ret;

	if (flags & LIBENGRAM_BUSY_POLL)
		return -EINVAL;
	ret = fetch_prep(&f, e, handle, rows, nr_rows, stride, timeout_ns, flags);
	if (!ret)
		ret = ranges_prep(&f, ranges, nr_ranges);
	if (ret)
		return ret;
	return fetch_run(e, ENGRAM_IOC_SUBMIT, &f, res);
}

PUBLIC int engram_wait(struct engram *e, uint64_t ticket, uint64_t timeout_ns, uint32_t flags,
		       struct engram_result *res)
{
	struct engram_ioc_wait w;
	int ret;

	if (!e || (flags & ~LIB_FLAGS))
		return -EINVAL;
	memset(&w, 0, sizeof(w));
	w.size = sizeof(w);
	w.ticket = ticket;
	w.timeout_ns = timeout_ns;
	if (flags & LIBENGRAM_BUSY_POLL)
		w.flags |= ENGRAM_FETCH_BUSY_POLL;
	ret = xioctl(e, ENGRAM_IOC_WAIT, &w);
	if (ret >= 0)
		ret = w.error > 0 ? -EIO : w.error;	/* a positive error is not in the ABI */
	if (res) {
		memset(res, 0, sizeof(*res));
		res->ticket = w.done_ticket;
		res->error = ret;
		res->wire_status = w.wire_status;
		res->bad_index = w.bad_index;
		res->rtt_ns = w.rtt_ns;
	}
	return ret;
}

/* The module's own names (kmod/wire.c, built in its userspace mode). */
PUBLIC const char *engram_status_name(uint32_t wire_status)
{
	return engram_wire_status_name(wire_status);
}

PUBLIC const char *engram_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case ERANGE:
		return "row index out of range";
	case ESTALE:
		return "table or generation unknown to the server";
	case ENOSPC:
		return "destination too small for the rows";
	case E2BIG:
		return "too many rows or ranges for the link";
	case ETIMEDOUT:
		return "deadline passed";
	case EPROTO:
		return "request malformed";
	case EBUSY:
		return "too many fetches in flight";
	case ESHUTDOWN:
		return "server or table shutting down";
	case EAGAIN:
		return "table not ready";
	case EIO:
		return "server or transport failure";
	default:
		return strerror(err);
	}
}

#define STR_(x)	#x
#define STR(x)	STR_(x)

PUBLIC const char *engram_version(void)
{
	return STR(LIBENGRAM_VERSION_MAJOR) "." STR(LIBENGRAM_VERSION_MINOR);
}
