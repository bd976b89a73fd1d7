// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libengram: the ioctls of /dev/engram_rdma (uapi/linux/engram_rdma.h) as a
 * small C API.  See libengram.h for the contract.
 *
 * The context keeps a record of every table it opened and every buffer it
 * registered.  A table may carry a local copy of its shard (local.c): a
 * fetch that fails remotely for a reason the network caused is then served
 * from it with pread() straight into the registered buffer the record
 * describes, at the offsets the server would have used, and reported to
 * the kernel (ENGRAM_IOC_REPORT) so it is counted.  Fetches submitted on
 * such a table are remembered (rows copied) until their wait, so a failed
 * wait can fall back too.  Tables, buffers and submissions are looked up
 * under the context's lock; the ioctls and the local reads run without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/engram_rdma.h>

#include "libengram.h"
#include "local.h"
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
_Static_assert(sizeof(struct engram_ioc_fetch) == ENGRAM_FETCH_SIZE_VER1, "fetch size");
_Static_assert(sizeof(struct engram_ioc_wait) == ENGRAM_WAIT_SIZE_VER0, "wait size");
_Static_assert(sizeof(struct engram_ioc_report) == ENGRAM_REPORT_SIZE_VER0, "report size");
_Static_assert(sizeof(struct engram_ioc_range) == 24, "range size");
_Static_assert(sizeof(struct engram_range) == sizeof(struct engram_ioc_range),
	       "engram_range mirrors engram_ioc_range");
_Static_assert(LIBENGRAM_WORD_FAILED == ENGRAM_DONE_FAILED, "failed word");

#define LIB_FLAGS	LIBENGRAM_BUSY_POLL

/*
 * Handles of tables that could not be opened remotely and are served from
 * their local copy only; the kernel's handles stay far below (1..4096).
 */
#define LOCAL_HANDLE_BASE	0x80000000u
/* Tickets of fetches served locally at submit; the kernel's count from 1. */
#define LOCAL_TICKET_BASE	(1ULL << 62)

/* A table opened on this context. */
struct engram_table {
	struct engram_table_info info;
	bool remote;			/* info.handle is the kernel's */
	struct local_copy *local;	/* checked against the table once; or NULL */
};

/* A fetch submitted on a table with a local copy, kept until its wait. */
struct engram_sub {
	uint64_t ticket;
	uint32_t handle;
	uint32_t nr_rows;
	uint32_t *rows;			/* copied: the caller may reuse its array */
	uint32_t stride;
	uint32_t buf_id;		/* with nr_ranges 0 */
	uint64_t offset;
	struct engram_range ranges[LIBENGRAM_MAX_RANGES];
	uint32_t nr_ranges;
	bool local_done;		/* served locally at submit: wait returns it */
	int32_t remote_error;
	uint64_t local_ns;		/* with local_done: how long the read took */
	uint64_t *word;			/* its completion word, or NULL */
	uint64_t word_value;
};

/* A buffer registered on this context. */
struct engram_buf {
	uint32_t id;
	void *addr;
	size_t len;
};

struct engram {
	int fd;
	pthread_mutex_t lock;		/* tables, bufs, subs, settings */
	struct engram_table *tables;
	size_t nr_tables, cap_tables;
	struct engram_buf *bufs;
	size_t nr_bufs, cap_bufs;
	struct engram_sub *subs;
	size_t nr_subs, cap_subs;
	uint64_t next_local_ticket;
	uint32_t next_local_handle;
	/* settings: from the environment at open, then the engram_set_*() calls */
	uint64_t timeout_ns;		/* 0: the module's timeout_ms */
	bool required;			/* never fall back */
	bool keep_keys;			/* ENGRAM_RDMA_KEEP_KEYS: engram_buf_register()'s flag */
	char *local_dir;
	enum local_check check;
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

#define ENV_KEEP_KEYS	"ENGRAM_RDMA_KEEP_KEYS"

/* An empty variable counts as unset. */
static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* The ENGRAM_RDMA_* variables; a malformed one fails engram_open(). */
static int env_settings(struct engram *e)
{
	uint32_t ms;
	bool b;
	const char *v;

	v = env(LOCAL_ENV_TIMEOUT);
	if (v) {
		if (local_parse_ms(v, &ms))
			return -EINVAL;
		e->timeout_ns = (uint64_t)ms * 1000000;
	}
	v = env(LOCAL_ENV_REQUIRED);
	if (v) {
		if (local_parse_bool(v, &b))
			return -EINVAL;
		e->required = b;
	}
	v = env(LOCAL_ENV_CHECK);
	if (v && local_parse_check(v, &e->check))
		return -EINVAL;
	v = env(ENV_KEEP_KEYS);
	if (v) {
		if (local_parse_bool(v, &b))
			return -EINVAL;
		e->keep_keys = b;
	}
	v = env(LOCAL_ENV_DIR);
	if (v) {
		e->local_dir = strdup(v);
		if (!e->local_dir)
			return -ENOMEM;
	}
	return 0;
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
	e->check = LOCAL_CHECK_SIZE;
	err = env_settings(e);
	if (err) {
		pthread_mutex_destroy(&e->lock);
		free(e->local_dir);
		free(e);
		goto err_close;
	}
	*out = e;
	return 0;

err_close:
	close(fd);
	return err;
}

PUBLIC void engram_close(struct engram *e)
{
	size_t i;

	if (!e)
		return;
	close(e->fd);
	pthread_mutex_destroy(&e->lock);
	for (i = 0; i < e->nr_tables; i++)
		local_close(e->tables[i].local);
	for (i = 0; i < e->nr_subs; i++)
		free(e->subs[i].rows);
	free(e->tables);
	free(e->bufs);
	free(e->subs);
	free(e->local_dir);
	free(e);
}

PUBLIC int engram_fd(const struct engram *e)
{
	return e ? e->fd : -EINVAL;
}

/*
 * The local copy configured for a table: ENGRAM_RDMA_LOCAL_<NAME>, else the
 * local directory's file for it.  0 with *path NULL when there is none.
 */
static int local_path_for(struct engram *e, const char *name, char **path)
{
	char var[sizeof(LOCAL_ENV_PREFIX) + ENGRAM_NAME_MAX];
	const char *v = NULL;
	char *dir = NULL;
	int ret;

	*path = NULL;
	if (!name || !*name)
		return 0;
	/* Tables named "dir" or "check" have no variable of their own. */
	if (!local_env_name(name, var, sizeof(var)) && strcmp(var, LOCAL_ENV_DIR) &&
	    strcmp(var, LOCAL_ENV_CHECK))
		v = env(var);
	if (v) {
		*path = strdup(v);
		return *path ? 0 : -ENOMEM;
	}
	pthread_mutex_lock(&e->lock);
	if (e->local_dir)
		dir = strdup(e->local_dir);
	ret = e->local_dir && !dir ? -ENOMEM : 0;
	pthread_mutex_unlock(&e->lock);
	if (!dir)
		return ret;
	ret = local_find(dir, name, path);
	free(dir);
	return ret == -ENOENT ? 0 : ret;
}

/*
 * The file a local copy's digest proved is the table's file: its tensors
 * under the table's name must then be the ones the hosts serve, or a
 * fallback would read another table of that file.
 */
static int local_same_tensors(struct engram *e, const struct engram_table_info *info,
			      const struct local_copy *lc)
{
	bool same_file;

	pthread_mutex_lock(&e->lock);
	same_file = e->check == LOCAL_CHECK_SHA256;
	pthread_mutex_unlock(&e->lock);
	if (!same_file || !info->weight_offset ||
	    (lc->weight_offset == info->weight_offset && lc->scale_offset == info->scale_offset))
		return 0;
	return -EBADMSG;
}

/* Open a local copy and check, once, that it is the table. */
static int local_attach(struct engram *e, const char *path, const char *tensor, uint64_t rows,
			const uint8_t *sha256, uint8_t *sha256_out, struct local_copy **out)
{
	enum local_check check;
	struct local_copy *lc;
	int ret;

	pthread_mutex_lock(&e->lock);
	check = e->check;
	pthread_mutex_unlock(&e->lock);
	ret = local_open(path, tensor, &lc);
	if (ret)
		return ret;
	ret = local_verify(lc, check, rows, sha256, sha256_out);
	if (ret) {
		local_close(lc);
		return ret;
	}
	*out = lc;
	return 0;
}

static int64_t table_add(struct engram *e, struct engram_table *t, struct engram_table_info *info)
{
	int ret;

	pthread_mutex_lock(&e->lock);
	if (!t->remote)
		t->info.handle = LOCAL_HANDLE_BASE + e->next_local_handle++;
	ret = grow((void **)&e->tables, &e->cap_tables, e->nr_tables + 1, sizeof(*t));
	if (!ret)
		e->tables[e->nr_tables++] = *t;
	pthread_mutex_unlock(&e->lock);
	/*
	 * Without memory for the record a remote handle still works (the
	 * kernel holds the table), but it would have no fallback.  Keep it
	 * simple: report the failure, the handle dies with the fd.
	 */
	if (ret) {
		local_close(t->local);
		return ret;
	}
	if (info)
		*info = t->info;
	return t->info.handle;
}

/*
 * The table could not be opened remotely: serve it from its local copy
 * alone, if one is configured; else the remote error stands.
 */
static int64_t table_open_local(struct engram *e, const char *name, const uint8_t *sha256,
				struct engram_table_info *info, int remote_err)
{
	struct engram_table t;
	char *path;
	int ret;

	ret = local_path_for(e, name, &path);
	if (ret)
		return ret;
	if (!path)
		return remote_err;
	memset(&t, 0, sizeof(t));
	ret = local_attach(e, path, name, 0, sha256, t.info.sha256, &t.local);
	free(path);
	if (ret)
		return ret;
	if (sha256)
		memcpy(t.info.sha256, sha256, ENGRAM_SHA256_LEN);
	t.info.rows = t.local->rows;
	t.info.row_bytes = ENGRAM_ROW_BYTES;
	t.info.max_rows = ENGRAM_WIRE_MAX_ROWS;
	strcpy(t.info.name, name);
	return table_add(e, &t, info);
}

PUBLIC int64_t engram_table_open(struct engram *e, uint32_t link, const char *name,
				 const uint8_t *sha256, struct engram_table_info *info)
{
	bool required;
	char *path;
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
	pthread_mutex_lock(&e->lock);
	required = e->required;
	pthread_mutex_unlock(&e->lock);
	ret = xioctl(e, ENGRAM_IOC_OPEN_TABLE, &o);
	if (ret < 0) {
		if (required || !name || !local_open_fallback_errno(ret))
			return ret;
		return table_open_local(e, name, sha256, info, ret);
	}

	memset(&t, 0, sizeof(t));
	t.remote = true;
	t.info.handle = o.handle;
	t.info.link = o.link_out;
	t.info.rows = o.rows;
	t.info.generation = o.generation;
	t.info.row_bytes = o.row_bytes;
	t.info.max_rows = o.max_rows;
	t.info.weight_offset = o.weight_offset;
	t.info.scale_offset = o.scale_offset;
	memcpy(t.info.sha256, o.sha256_out, ENGRAM_SHA256_LEN);
	if (name)
		memcpy(t.info.name, name, len);
	/* A configured local copy that is not this table is an error now, not at failover. */
	if (!required && name) {
		ret = local_path_for(e, name, &path);
		if (ret)
			return ret;
		if (path) {
			ret = local_attach(e, path, name, t.info.rows, t.info.sha256, NULL, &t.local);
			free(path);
			if (ret)
				return ret;
			ret = local_same_tensors(e, &t.info, t.local);
			if (ret) {
				local_close(t.local);
				return ret;
			}
		}
	}
	return table_add(e, &t, info);
}

/* What a fetch needs to know of its table, copied under the lock. */
struct table_ref {
	bool found;
	bool remote;
	bool required;
	struct local_copy *local;	/* lives until engram_close() */
};

static void table_ref(struct engram *e, uint32_t handle, struct table_ref *r)
{
	size_t i;

	memset(r, 0, sizeof(*r));
	pthread_mutex_lock(&e->lock);
	r->required = e->required;
	for (i = 0; i < e->nr_tables; i++) {
		if (e->tables[i].info.handle == handle) {
			r->found = true;
			r->remote = e->tables[i].remote;
			r->local = e->tables[i].local;
			break;
		}
	}
	pthread_mutex_unlock(&e->lock);
}

PUBLIC int engram_table_set_local(struct engram *e, uint32_t handle, const char *path,
				  const char *tensor)
{
	struct engram_table_info ti;
	struct local_copy *lc;
	bool found = false;
	size_t i;
	int ret;

	if (!e || !path)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	for (i = 0; i < e->nr_tables; i++) {
		if (e->tables[i].info.handle == handle) {
			ti = e->tables[i].info;
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&e->lock);
	if (!found)
		return -ENOENT;
	if (!tensor)
		tensor = ti.name;
	if (!*tensor)
		return -EINVAL;
	ret = local_attach(e, path, tensor, ti.rows, ti.sha256, NULL, &lc);
	if (ret)
		return ret;
	ret = local_same_tensors(e, &ti, lc);
	if (ret) {
		local_close(lc);
		return ret;
	}
	ret = -ENOENT;
	pthread_mutex_lock(&e->lock);
	for (i = 0; i < e->nr_tables; i++) {
		if (e->tables[i].info.handle != handle)
			continue;
		/* Readers use the copy without the lock: it is never replaced. */
		ret = e->tables[i].local ? -EEXIST : 0;
		if (!ret)
			e->tables[i].local = lc;
		break;
	}
	pthread_mutex_unlock(&e->lock);
	if (ret)
		local_close(lc);
	return ret;
}

PUBLIC int engram_set_timeout_ms(struct engram *e, uint32_t timeout_ms)
{
	if (!e)
		return -EINVAL;
	if (timeout_ms > LOCAL_TIMEOUT_MS_MAX)
		return -ERANGE;
	pthread_mutex_lock(&e->lock);
	e->timeout_ns = (uint64_t)timeout_ms * 1000000;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

PUBLIC int engram_set_required(struct engram *e, int required)
{
	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	e->required = required != 0;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

PUBLIC int engram_set_local_dir(struct engram *e, const char *dir)
{
	struct stat st;
	char *copy = NULL;

	if (!e)
		return -EINVAL;
	if (dir) {
		if (stat(dir, &st) < 0)
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		copy = strdup(dir);
		if (!copy)
			return -ENOMEM;
	}
	pthread_mutex_lock(&e->lock);
	free(e->local_dir);
	e->local_dir = copy;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

PUBLIC int engram_set_local_check(struct engram *e, uint32_t check)
{
	if (!e || (check != LIBENGRAM_CHECK_SIZE && check != LIBENGRAM_CHECK_SHA256))
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	e->check = check == LIBENGRAM_CHECK_SHA256 ? LOCAL_CHECK_SHA256 : LOCAL_CHECK_SIZE;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

PUBLIC int engram_buf_register(struct engram *e, void *addr, size_t len, uint32_t *buf_id)
{
	if (!e)
		return -EINVAL;
	return engram_buf_register_flags(e, addr, len, e->keep_keys ? LIBENGRAM_BUF_KEEP_KEYS : 0,
					 buf_id);
}

PUBLIC int engram_buf_register_flags(struct engram *e, void *addr, size_t len, uint32_t flags,
				     uint32_t *buf_id)
{
	struct engram_ioc_reg r;
	struct engram_buf b;
	int ret;

	if (!e || !addr || !len || !buf_id || (flags & ~LIBENGRAM_BUF_KEEP_KEYS))
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	if (flags & LIBENGRAM_BUF_KEEP_KEYS)
		r.flags |= ENGRAM_REG_F_KEEP_KEYS;
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
 * library's own.  A zero timeout takes the context's (ENGRAM_RDMA_TIMEOUT_MS,
 * engram_set_timeout_ms()), else the module's.
 */
static int fetch_prep(struct engram_ioc_fetch *f, struct engram *e, uint32_t handle,
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
	if (!timeout_ns) {
		pthread_mutex_lock(&e->lock);
		timeout_ns = e->timeout_ns;
		pthread_mutex_unlock(&e->lock);
	}
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

/* The destination of a fetch in the caller's memory, from the buffer records. */
static int dest_build(struct engram *e, const struct engram_ioc_fetch *f,
		      struct local_dest *d, unsigned int *nd)
{
	const struct engram_range *r = (const struct engram_range *)(uintptr_t)f->ranges;
	const struct engram_buf *b;
	uint32_t i, n = f->flags & ENGRAM_FETCH_RANGES ? f->nr_ranges : 1;
	int ret = 0;
	size_t k;

	if (n > LIBENGRAM_MAX_RANGES)
		return -E2BIG;
	pthread_mutex_lock(&e->lock);
	for (i = 0; i < n && !ret; i++) {
		uint32_t id = f->flags & ENGRAM_FETCH_RANGES ? r[i].buf_id : f->buf_id;
		uint64_t off = f->flags & ENGRAM_FETCH_RANGES ? r[i].offset : f->offset;

		b = NULL;
		for (k = 0; k < e->nr_bufs; k++)
			if (e->bufs[k].id == id)
				b = &e->bufs[k];
		if (!b) {
			ret = -ENOENT;
		} else if (!(f->flags & ENGRAM_FETCH_RANGES)) {
			if (off >= b->len)
				ret = -ENOSPC;
			d[i].addr = (uint8_t *)b->addr + off;
			d[i].len = b->len - off;
		} else if (r[i].reserved || !r[i].length || off > b->len ||
			   r[i].length > b->len - off) {
			ret = -EINVAL;
		} else {
			d[i].addr = (uint8_t *)b->addr + off;
			d[i].len = r[i].length;
		}
	}
	pthread_mutex_unlock(&e->lock);
	*nd = n;
	return ret;
}

/* Count a fallback with the table in the kernel; best effort. */
static void report(struct engram *e, uint32_t handle, uint32_t nr_rows, int remote_err)
{
	struct engram_ioc_report r;

	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.handle = handle;
	r.rows = nr_rows;
	r.error = remote_err;
	xioctl(e, ENGRAM_IOC_REPORT, &r);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Serve a fetch from the local copy; 0 or the local error (bad_index set).
 * *took_ns: how long the read took, so that an engine (and the tests) can
 * tell the remote attempt's time from the disk's.
 */
static int local_fetch(struct engram *e, const struct table_ref *tr,
		       const struct engram_ioc_fetch *f, uint32_t *bad_index, uint64_t *took_ns)
{
	struct local_dest d[LIBENGRAM_MAX_RANGES];
	uint64_t t0 = mono_ns();
	unsigned int nd;
	int ret;

	ret = dest_build(e, f, d, &nd);
	if (!ret)
		ret = local_read_rows(tr->local, (const uint32_t *)(uintptr_t)f->rows, f->nr_rows,
				      d, nd, f->stride, bad_index);
	*took_ns = mono_ns() - t0;
	return ret;
}

static void result_fallback(struct engram_result *res, uint64_t ticket, int remote_err,
			    uint64_t local_ns)
{
	if (!res)
		return;
	res->ticket = ticket;
	res->error = 0;
	res->flags |= LIBENGRAM_RESULT_FALLBACK;
	res->remote_error = remote_err;
	res->local_ns = local_ns;
}

/*
 * A remote fetch failed with @err: fall back when the table has a local
 * copy, the caller does not require the remote path, and the failure is one
 * the network caused.  Returns 0 when the rows are in place, else @err.
 */
static int try_fallback(struct engram *e, const struct table_ref *tr,
			const struct engram_ioc_fetch *f, int err, struct engram_result *res)
{
	uint64_t took;
	uint32_t bad = 0;

	if (!tr->local || tr->required || !local_fallback_errno(err))
		return err;
	/* Counted only once the rows are there; a local failure leaves the remote error. */
	if (local_fetch(e, tr, f, &bad, &took))
		return err;
	report(e, f->handle, f->nr_rows, err);
	result_fallback(res, f->ticket, err, took);
	return 0;
}

/* A fetch on a table that only has its local copy. */
static int local_only(struct engram *e, const struct table_ref *tr, struct engram_ioc_fetch *f,
		      struct engram_result *res)
{
	uint64_t took;
	uint32_t bad = 0;
	int ret;

	ret = local_fetch(e, tr, f, &bad, &took);
	if (res) {
		memset(res, 0, sizeof(*res));
		res->error = ret;
		res->bad_index = ret == -ERANGE ? bad : 0;
		if (!ret) {
			res->flags = LIBENGRAM_RESULT_FALLBACK;
			res->local_ns = took;
		}
	}
	return ret;
}

/*
 * A FETCH that a signal interrupted goes on in the kernel and may write the
 * destination until it ends (Documentation/ioctl.rst): wait for its ticket,
 * again after each signal (its deadline bounds this), so that the caller
 * never gets the buffer back while the fetch can still write it.  -ENOENT:
 * a wait for any fetch, on another thread, reaped it; it has ended, but
 * its result went there, so the call reports the interruption.
 */
static int fetch_finish(struct engram *e, struct engram_ioc_fetch *f,
			struct engram_result *res)
{
	struct engram_ioc_wait w;
	int ret;

	do {
		memset(&w, 0, sizeof(w));
		w.size = sizeof(w);
		w.ticket = f->ticket;
		w.flags = f->flags & ENGRAM_FETCH_BUSY_POLL;
		ret = xioctl(e, ENGRAM_IOC_WAIT, &w);
	} while (ret == -EINTR);
	if (ret == -ENOENT)
		ret = -EINTR;
	else if (ret >= 0)
		ret = w.error > 0 ? -EIO : w.error;	/* a positive error is not in the ABI */
	f->wire_status = w.wire_status;
	f->bad_index = w.bad_index;
	f->rtt_ns = w.rtt_ns;
	result_from_fetch(res, f, ret);
	return ret;
}

static int fetch_sync(struct engram *e, struct engram_ioc_fetch *f, struct engram_result *res)
{
	struct table_ref tr;
	int ret;

	table_ref(e, f->handle, &tr);
	if (tr.found && !tr.remote)
		return local_only(e, &tr, f, res);
	ret = (int)fetch_run(e, ENGRAM_IOC_FETCH, f, res);
	if (ret == -EINTR && f->ticket)
		ret = fetch_finish(e, f, res);
	if (ret < 0)
		ret = try_fallback(e, &tr, f, ret, res);
	return ret;
}

/*
 * Set a completion word from here, once rows this library read itself are
 * in place: the same rule as the kernel's, so an engine sees one.
 */
static void word_set(uint64_t *word, uint64_t value)
{
	if (word)
		__atomic_store_n(word, value, __ATOMIC_RELEASE);
}

/*
 * Resolve a completion word to the caller's memory, from the buffer
 * records, and ask the kernel to set it.
 */
static int word_prep(struct engram *e, struct engram_ioc_fetch *f, const struct engram_word *w,
		     uint64_t **addr)
{
	const struct engram_buf *b = NULL;
	size_t k;

	if (!w || w->reserved || (w->value & LIBENGRAM_WORD_FAILED))
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	for (k = 0; k < e->nr_bufs; k++)
		if (e->bufs[k].id == w->buf_id)
			b = &e->bufs[k];
	if (b && b->len >= sizeof(uint64_t) && w->offset <= b->len - sizeof(uint64_t))
		*addr = (uint64_t *)(void *)((uint8_t *)b->addr + w->offset);
	pthread_mutex_unlock(&e->lock);
	if (!b)
		return -ENOENT;
	if (!*addr || (uintptr_t)*addr % sizeof(uint64_t))
		return -EINVAL;
	f->flags |= ENGRAM_FETCH_DONE_WORD;
	f->done_buf_id = w->buf_id;
	f->done_offset = w->offset;
	f->done_value = w->value;
	return 0;
}

/*
 * Forget the submissions with a word that ended with their rows in place:
 * the kernel reaps those at the next submission, and no wait is owed.
 */
static void sub_prune_words(struct engram *e)
{
	size_t i = 0;

	pthread_mutex_lock(&e->lock);
	while (i < e->nr_subs) {
		struct engram_sub *s = &e->subs[i];

		if (s->word && __atomic_load_n(s->word, __ATOMIC_ACQUIRE) == s->word_value) {
			free(s->rows);
			*s = e->subs[--e->nr_subs];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&e->lock);
}

/* Remember a submission on a table with a local copy; 0 or -ENOMEM. */
static int sub_add(struct engram *e, const struct engram_ioc_fetch *f, uint64_t ticket,
		   bool local_done, int remote_err, uint64_t local_ns, uint64_t *word)
{
	struct engram_sub s;
	int ret;

	memset(&s, 0, sizeof(s));
	s.word = word;
	s.word_value = f->done_value;
	s.ticket = ticket;
	s.handle = f->handle;
	s.nr_rows = f->nr_rows;
	s.stride = f->stride;
	s.local_done = local_done;
	s.remote_error = remote_err;
	s.local_ns = local_ns;
	if (!local_done) {
		s.rows = malloc((size_t)f->nr_rows * sizeof(*s.rows));
		if (!s.rows)
			return -ENOMEM;
		memcpy(s.rows, (const void *)(uintptr_t)f->rows, (size_t)f->nr_rows * sizeof(*s.rows));
		s.buf_id = f->buf_id;
		s.offset = f->offset;
		if (f->flags & ENGRAM_FETCH_RANGES) {
			s.nr_ranges = f->nr_ranges;
			memcpy(s.ranges, (const void *)(uintptr_t)f->ranges,
			       f->nr_ranges * sizeof(s.ranges[0]));
		}
	}
	pthread_mutex_lock(&e->lock);
	ret = grow((void **)&e->subs, &e->cap_subs, e->nr_subs + 1, sizeof(s));
	if (!ret)
		e->subs[e->nr_subs++] = s;
	pthread_mutex_unlock(&e->lock);
	if (ret)
		free(s.rows);
	return ret;
}

static uint64_t local_ticket(struct engram *e)
{
	uint64_t t;

	pthread_mutex_lock(&e->lock);
	t = LOCAL_TICKET_BASE + ++e->next_local_ticket;
	pthread_mutex_unlock(&e->lock);
	return t;
}

/*
 * SUBMIT.  On a table with a local copy (and the remote path not required),
 * a submission the link refuses at once (down) is served locally now, and
 * one that goes out is remembered so that its wait can fall back.  @word:
 * the completion word's address, which rows read here are followed by.
 */
static int64_t submit_run(struct engram *e, struct engram_ioc_fetch *f, uint64_t *word,
			  struct engram_result *res)
{
	struct engram_result own;
	struct table_ref tr;
	uint64_t ticket;
	int64_t ret;
	int err;

	if (!res) {		/* the local read's time goes to the wait's result */
		memset(&own, 0, sizeof(own));
		res = &own;
	}
	table_ref(e, f->handle, &tr);
	if (tr.found && !tr.remote) {
		err = local_only(e, &tr, f, res);
		if (err)
			return err;
		word_set(word, f->done_value);
		err = sub_add(e, f, ticket = local_ticket(e), true, 0, res->local_ns, word);
		if (err)
			return err;
		if (res)
			res->ticket = ticket;
		return (int64_t)ticket;
	}
	ret = fetch_run(e, ENGRAM_IOC_SUBMIT, f, res);
	if (!tr.local || tr.required)
		return ret;
	if (ret < 0) {
		f->ticket = local_ticket(e);
		err = try_fallback(e, &tr, f, (int)ret, res);
		if (err)
			return err;
		word_set(word, f->done_value);
		err = sub_add(e, f, f->ticket, true, (int)ret, res->local_ns, word);
		return err ? err : (int64_t)f->ticket;
	}
	/* Without memory to remember it, the fetch just has no fallback. */
	sub_add(e, f, (uint64_t)ret, false, 0, 0, word);
	return ret;
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
	return fetch_sync(e, &f, res);
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
	return fetch_sync(e, &f, res);
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
	return submit_run(e, &f, NULL, res);
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
	return submit_run(e, &f, NULL, res);
}

PUBLIC int64_t engram_submit_word(struct engram *e, uint32_t handle, const uint32_t *rows,
				  uint32_t nr_rows, const struct engram_range *ranges,
				  uint32_t nr_ranges, uint32_t buf_id, uint64_t offset,
				  uint32_t stride, uint64_t timeout_ns,
				  const struct engram_word *word, uint32_t flags,
				  struct engram_result *res)
{
	struct engram_ioc_fetch f;
	uint64_t *addr = NULL;
	int ret;

	if (flags & LIBENGRAM_BUSY_POLL)
		return -EINVAL;
	ret = fetch_prep(&f, e, handle, rows, nr_rows, stride, timeout_ns, flags);
	if (!ret && ranges) {
		ret = buf_id || offset ? -EINVAL : ranges_prep(&f, ranges, nr_ranges);
	} else if (!ret) {
		f.buf_id = buf_id;
		f.offset = offset;
	}
	if (!ret)
		ret = word_prep(e, &f, word, &addr);
	if (ret)
		return ret;
	sub_prune_words(e);
	return submit_run(e, &f, addr, res);
}

/*
 * Take the record of a submission off the context: the one served locally
 * that @ticket names (0: any), or (@local false) the one of @ticket.
 */
static bool sub_take(struct engram *e, uint64_t ticket, bool local, struct engram_sub *out)
{
	bool found = false;
	size_t i;

	pthread_mutex_lock(&e->lock);
	for (i = 0; i < e->nr_subs; i++) {
		struct engram_sub *s = &e->subs[i];

		if (local ? s->local_done && (!ticket || s->ticket == ticket) :
			    !s->local_done && s->ticket == ticket) {
			*out = *s;
			e->subs[i] = e->subs[--e->nr_subs];
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&e->lock);
	return found;
}

PUBLIC int engram_wait(struct engram *e, uint64_t ticket, uint64_t timeout_ns, uint32_t flags,
		       struct engram_result *res)
{
	struct engram_ioc_wait w;
	struct engram_sub s;
	bool have;
	int ret;

	if (!e || (flags & ~LIB_FLAGS))
		return -EINVAL;
	if (res)
		memset(res, 0, sizeof(*res));
	/* Fetches already served locally come back first, without a system call. */
	if (sub_take(e, ticket, true, &s)) {
		result_fallback(res, s.ticket, s.remote_error, s.local_ns);
		return 0;
	}
	if (ticket >= LOCAL_TICKET_BASE)
		return -ENOENT;		/* as the kernel says for a ticket not in flight */
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
		res->ticket = w.done_ticket;
		res->error = ret;
		res->wire_status = w.wire_status;
		res->bad_index = w.bad_index;
		res->rtt_ns = w.rtt_ns;
	}
	if (!w.done_ticket)
		return ret;		/* the wait itself failed: the fetch goes on */
	have = sub_take(e, w.done_ticket, false, &s);
	if (have && ret < 0) {
		struct engram_ioc_fetch f;
		struct table_ref tr;

		memset(&f, 0, sizeof(f));
		f.handle = s.handle;
		f.nr_rows = s.nr_rows;
		f.rows = (uintptr_t)s.rows;
		f.stride = s.stride;
		f.ticket = s.ticket;
		f.buf_id = s.buf_id;
		f.offset = s.offset;
		if (s.nr_ranges) {
			f.flags = ENGRAM_FETCH_RANGES;
			f.ranges = (uintptr_t)s.ranges;
			f.nr_ranges = s.nr_ranges;
			f.buf_id = 0;
			f.offset = 0;
		}
		table_ref(e, s.handle, &tr);
		ret = try_fallback(e, &tr, &f, ret, res);
		if (!ret)
			word_set(s.word, s.word_value);
	}
	if (have)
		free(s.rows);
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
	case ENXIO:
		return "no host holds the row";
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
	case EBADMSG:
		return "local copy is not this table (rows or SHA-256 differ)";
	default:
		return strerror(err);
	}
}

#define STR_(x)	#x
#define STR(x)	STR_(x)

PUBLIC const char *engram_version(void)
{
	return STR(LIBENGRAM_VERSION_MAJOR) "." STR(LIBENGRAM_VERSION_MINOR) "."
	       STR(LIBENGRAM_VERSION_PATCH);
}
