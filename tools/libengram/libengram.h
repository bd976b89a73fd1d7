/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libengram - fetch rows of Engram lookup tables through /dev/engram_rdma.
 *
 * The GPU-node side of engram-rdma: the engram_rdma module, given remote=
 * links to a host, offers /dev/engram_rdma.  This library wraps its ioctls
 * (uapi/linux/engram_rdma.h, Documentation/ioctl.rst):
 *
 *	struct engram *e;
 *	struct engram_table_info t;
 *	struct engram_result res;
 *	uint32_t buf;
 *	int64_t h;
 *
 *	engram_open(NULL, &e);				   // /dev/engram_rdma
 *	h = engram_table_open(e, 0, "layer1", NULL, &t);   // by name, on its replicas
 *	engram_buf_register(e, stage, stage_bytes, &buf);  // pinned once
 *	engram_fetch(e, h, rows, n, buf, 0, ENGRAM_ROW_BYTES, 0, 0, &res);
 *	// row rows[i] is now at stage + i * ENGRAM_ROW_BYTES: 256 weight
 *	// bytes (F8_E4M3), then 8 scale bytes (F8_E8M0)
 *	engram_close(e);
 *
 * Conventions.  Every function that can fail returns 0 (or a non-negative
 * value: a handle, a ticket) on success and a negative errno on failure;
 * errno itself is not meaningful afterwards.  Nothing prints, nothing exits.
 * Arguments the kernel cannot check (NULL pointers, a zero count) are
 * refused with -EINVAL before any system call; everything else (row indices,
 * strides, buffer bounds, limits) is left to the kernel and the server, so
 * their refusals reach the caller unchanged.
 *
 * The errors of a fetch, as returned and as engram_result.error:
 *	-ERANGE		a row index is not below the table's rows (bad_index)
 *	-ENXIO		no host the fetch may go to holds a row: each holds
 *			only a range of the table's rows (bad_index)
 *	-ESTALE		the server no longer has this table and generation
 *	-ENOSPC		the destination cannot hold the rows at this stride
 *	-E2BIG		more rows (or ranges) than the link's max_rows allows
 *	-ETIMEDOUT	the deadline passed; the link was reset before returning,
 *			so no late write lands in the buffer afterwards
 *	-EPROTO		the server found the request malformed (the library
 *			checked the arguments first: client and server
 *			disagree on the protocol)
 *	-EBUSY		too many fetches in flight on the link
 *	-ESHUTDOWN	the server or the table is going away
 *	-EAGAIN		the table is not ready to serve (loading, verifying), or on
 *			no link every host that serves it drains it
 *	-EIO		server-side failure or transport error
 *	-ENOENT		no such table handle or buffer id in this context
 *	-EINVAL		bad arguments (flags, stride, ranges, ...)
 * engram_result.wire_status has the server's exact status when it answered.
 *
 * Local fallback.  A table may have a local copy of its shard: a
 * safetensors file holding NAME.weight [rows, 256] F8_E4M3 and NAME.scale
 * [rows, 8] F8_E8M0, as the server loaded it.  When a remote fetch fails
 * for a reason the network or the server caused (-ETIMEDOUT, -ENOTCONN,
 * -ESHUTDOWN, -EIO, -ESTALE, -EAGAIN, -EBUSY, -EPROTO, -ENODEV, -ENXIO,
 * -ECONNRESET and the like; never for a bad request such as -ERANGE,
 * -ENOENT or -EINVAL), the library reads the same rows
 * from the copy with pread() (O_DIRECT where the file system takes it),
 * places them exactly where the server would have (same offset, stride,
 * ranges), reports the fallback to the module (counted as FALLBACKS and
 * FALLBACK_ROWS of the table, its link and the module: `engramctl stats`)
 * and returns success with LIBENGRAM_RESULT_FALLBACK in engram_result.flags
 * and the remote error in engram_result.remote_error; engram_result.local_ns
 * says how long the local read took (the rest of the call was the remote
 * attempt).  If the local read fails too, the remote error is returned.  This covers engram_fetch*(),
 * a submission refused at once (the link is down: engram_submit*() then
 * serves it locally and engram_wait() returns it; poll(2) does not see
 * such a ticket) and a submission whose engram_wait() reports a failure.
 *
 * Where the copy comes from, checked once when it is attached:
 *	engram_table_set_local()	a path, for a table already open
 *	ENGRAM_RDMA_LOCAL_<NAME>	a path for table NAME, upper-cased, '.'
 *					and '-' as '_' (layers.1.engram.embed:
 *					ENGRAM_RDMA_LOCAL_LAYERS_1_ENGRAM_EMBED)
 *	ENGRAM_RDMA_LOCAL_DIR		a directory: DIR/NAME.safetensors, else the
 *					first *.safetensors file in name order
 *					that holds NAME's tensors (checkpoint
 *					shards as published); engram_set_local_dir()
 * The variables and the directory are used by engram_table_open() when the
 * table is opened by name.  The check (ENGRAM_RDMA_LOCAL_CHECK=size|sha256,
 * engram_set_local_check()): "size" (the default) compares the row count
 * with the remote table's, so both tensors have the table's size; "sha256"
 * hashes the whole file once and compares it with the table's SHA-256.  A
 * copy that fails the check (-EBADMSG), or is not a valid file, fails the
 * call that attaches it.  If the table cannot be opened remotely at all
 * (no link up, no link has it: -ENOTCONN, -ENOENT, -ENODEV, -EAGAIN,
 * -ESHUTDOWN) and a copy is configured for its name, engram_table_open()
 * returns a local-only handle (>= 0x80000000, info->link 0): its fetches
 * never reach the module, and are not counted there.
 *
 * ENGRAM_RDMA_KEEP_KEYS=1 registers buffers with LIBENGRAM_BUF_KEEP_KEYS
 * (engram_buf_register_flags()).
 *
 * ENGRAM_RDMA_REQUIRED=1 (or engram_set_required()) turns the fallback off
 * altogether: every remote error is returned unchanged and no local copy
 * is looked for.  ENGRAM_RDMA_TIMEOUT_MS (1..600000, or
 * engram_set_timeout_ms()) is the deadline of a fetch whose timeout_ns is
 * 0, instead of the module's timeout_ms.  The variables are read by
 * engram_open(), which fails with -EINVAL when one is malformed; empty
 * counts as unset.
 *
 * Threads: one struct engram may be used by several threads at once.  It
 * must not be used across fork(): the child shares the open file (tables,
 * buffers, fetches) with the parent; open a new one in the child instead.
 *
 * Link with -lengram (pkg-config libengram).
 */
#ifndef LIBENGRAM_H
#define LIBENGRAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* engram-rdma's version (dkms.conf's PACKAGE_VERSION), the file name's 0.X.Y. */
#define LIBENGRAM_VERSION_MAJOR	0
#define LIBENGRAM_VERSION_MINOR	1
#define LIBENGRAM_VERSION_PATCH	0

/* The device opened by engram_open(NULL, ...). */
#define LIBENGRAM_DEFAULT_DEV	"/dev/engram_rdma"

/* One row as served (ENGRAM_ROW_BYTES of the uapi header). */
#define LIBENGRAM_WEIGHT_BYTES	256
#define LIBENGRAM_SCALE_BYTES	8
#define LIBENGRAM_ROW_BYTES	264
#define LIBENGRAM_SHA256_LEN	32
/* Table names: 1..63 bytes, NUL-terminated. */
#define LIBENGRAM_NAME_MAX	64
/* Destination ranges of one fetch. */
#define LIBENGRAM_MAX_RANGES	16

/*
 * Flags of engram_fetch(), engram_fetch_ranges(), engram_submit() and
 * engram_wait().  Bits 16 and up are reserved for behaviour of the library
 * itself; a flag this version does not know is -EINVAL.
 */
#define LIBENGRAM_BUSY_POLL	(1U << 0)	/* wait by polling, not sleeping */

/* engram_result.flags */
#define LIBENGRAM_RESULT_FALLBACK	(1U << 0)	/* rows came from the local copy */

/* engram_set_local_check() */
#define LIBENGRAM_CHECK_SIZE	0	/* row count equals the remote table's */
#define LIBENGRAM_CHECK_SHA256	1	/* SHA-256 of the whole file */

/* An open /dev/engram_rdma; opaque. */
struct engram;

/* What engram_table_open() found. */
struct engram_table_info {
	uint32_t handle;		/* names the table in fetches on this context */
	uint32_t link;			/* the link the table was found on */
	uint64_t rows;			/* valid row indices: 0 .. rows - 1 */
	uint64_t generation;		/* changes on every load of the table */
	uint32_t row_bytes;		/* LIBENGRAM_ROW_BYTES */
	uint32_t max_rows;		/* rows per fetch on that link */
	uint8_t sha256[LIBENGRAM_SHA256_LEN];	/* SHA-256 of the table's file */
	char name[LIBENGRAM_NAME_MAX];	/* as asked for; "" when opened by sha256 only */
	/*
	 * Where the table's tensors are in its file: with sha256, rows and
	 * row_bytes, which table of the file this is (a file holds several).
	 * 0 when only hosts below protocol version 4 serve it, or for a table
	 * opened from its local copy alone.
	 */
	uint64_t weight_offset;
	uint64_t scale_offset;
	uint64_t reserved[2];		/* 0 */
};

/* One destination range of engram_fetch_ranges(). */
struct engram_range {
	uint32_t buf_id;		/* from engram_buf_register() */
	uint32_t reserved;		/* 0 */
	uint64_t offset;		/* bytes from the start of that buffer */
	uint64_t length;		/* bytes */
};

/*
 * A completion word of engram_submit_word(): 8 bytes at @offset of a
 * registered buffer (the address 8-byte aligned, outside the bytes the
 * fetch's rows span), set to @value once every row is in place.
 */
struct engram_word {
	uint32_t buf_id;		/* from engram_buf_register() */
	uint32_t reserved;		/* 0 */
	uint64_t offset;		/* bytes from the start of that buffer */
	uint64_t value;			/* bit 63 clear */
};

/*
 * A word's value when its fetch failed: this bit and the positive errno.
 * Above any @value, so a wait for "at least @value" ends either way.
 */
#define LIBENGRAM_WORD_FAILED	(1ULL << 63)

/* Outcome of a fetch. */
struct engram_result {
	uint64_t ticket;		/* the fetch's ticket (engram_wait: the one that completed) */
	int32_t error;			/* 0 or a negative errno, as listed above */
	uint32_t wire_status;		/* server status, 0 when it did not refuse */
	uint32_t bad_index;		/* -ERANGE: position in rows[] of the first bad index */
	uint32_t flags;			/* LIBENGRAM_RESULT_* */
	uint64_t rtt_ns;		/* submit to completion, as the kernel measured it */
	int32_t remote_error;		/* with LIBENGRAM_RESULT_FALLBACK: why the remote failed */
	uint32_t reserved0;		/* 0 */
	uint64_t local_ns;		/* with LIBENGRAM_RESULT_FALLBACK: reading the local copy */
	uint64_t reserved[2];		/* 0 */
};

/**
 * engram_open() - open the engram_rdma device
 * @path: device node, or NULL for LIBENGRAM_DEFAULT_DEV
 * @out: set to the new context on success
 *
 * Return: 0, -ENODEV if @path is not a character device, or the errno of
 * open(2) (-ENOENT when the module is not loaded, -EACCES, ...).
 */
int engram_open(const char *path, struct engram **out);

/**
 * engram_close() - close the device and free the context
 * @e: context, or NULL (nothing happens)
 *
 * The kernel releases every table handle, registered buffer and fetch in
 * flight of the context (there is no call to close one table handle: they
 * live as long as the context).  Registered memory stays pinned until then
 * or engram_buf_unregister(): free it afterwards, not before.
 */
void engram_close(struct engram *e);

/**
 * engram_fd() - the file descriptor of the context, for poll(2)
 * @e: context
 *
 * POLLIN is raised while a fetch submitted with engram_submit() has
 * completed and not been collected by engram_wait().  Do not close it.
 *
 * Return: the descriptor, or -EINVAL if @e is NULL.
 */
int engram_fd(const struct engram *e);

/**
 * engram_table_open() - find a table in a link's catalog
 * @e: context
 * @link: link id (engramctl links), or 0 for every link that is up and has
 *	it (its replicas: fetches are spread over them and fail over between them)
 * @name: table name, or NULL
 * @sha256: LIBENGRAM_SHA256_LEN bytes of the table file's SHA-256, or NULL
 * @info: filled on success; may be NULL
 *
 * At least one of @name and @sha256 must be given; with both, both must
 * match.  The handle is valid until the context is closed.
 *
 * One file holds several tables (layers 1 and 14), so its SHA-256 alone
 * may name more than one: then, and when two hosts give one name to two
 * different tables, the open fails with -ENOTUNIQ.  @info's weight_offset
 * and scale_offset say which table of the file the handle names.
 *
 * Return: the handle (0 .. UINT32_MAX), or -EINVAL, -ENAMETOOLONG (name
 * of LIBENGRAM_NAME_MAX bytes or more), or the kernel's error (-ENOENT:
 * no such table on a link that is up, -ENOTUNIQ, ...).
 */
int64_t engram_table_open(struct engram *e, uint32_t link, const char *name,
			  const uint8_t *sha256, struct engram_table_info *info);

/**
 * engram_table_set_local() - give an open table a local copy of its shard
 * @e: context
 * @handle: from engram_table_open()
 * @path: the safetensors file
 * @tensor: its tensor prefix (PREFIX.weight, PREFIX.scale), or NULL for
 *	    the table's name
 *
 * The copy is checked against the table once, now (see the top of this
 * file), and used for the table's fallbacks until engram_close().
 *
 * Return: 0; -ENOENT for an unknown handle; -EEXIST when the table has a
 * copy already; -EINVAL when the file is not safetensors or lacks the
 * tensors (or @tensor is NULL for a table opened by SHA-256 only);
 * -EBADMSG when it is not this table (with the SHA-256 check, also when
 * its tensors under that name are not where the hosts' are: another table
 * of the same file); or open(2)'s errno.
 */
int engram_table_set_local(struct engram *e, uint32_t handle, const char *path,
			   const char *tensor);

/**
 * engram_set_timeout_ms() - deadline of fetches that name none
 * @e: context
 * @timeout_ms: 1..600000, or 0 for the module's timeout_ms
 *
 * Overrides ENGRAM_RDMA_TIMEOUT_MS.
 *
 * Return: 0, -EINVAL, or -ERANGE above 600000.
 */
int engram_set_timeout_ms(struct engram *e, uint32_t timeout_ms);

/**
 * engram_set_required() - whether the remote path is required
 * @e: context
 * @required: nonzero: never fall back, return remote errors unchanged
 *
 * Overrides ENGRAM_RDMA_REQUIRED; applies from the next call on.
 *
 * Return: 0 or -EINVAL.
 */
int engram_set_required(struct engram *e, int required);

/**
 * engram_set_local_dir() - where engram_table_open() looks for local copies
 * @e: context
 * @dir: a directory, or NULL for none
 *
 * Overrides ENGRAM_RDMA_LOCAL_DIR for tables opened from now on.
 *
 * Return: 0, -ENOTDIR, or stat(2)'s errno.
 */
int engram_set_local_dir(struct engram *e, const char *dir);

/**
 * engram_set_local_check() - how a local copy is matched with its table
 * @e: context
 * @check: LIBENGRAM_CHECK_SIZE or LIBENGRAM_CHECK_SHA256
 *
 * Overrides ENGRAM_RDMA_LOCAL_CHECK for copies attached from now on.
 *
 * Return: 0 or -EINVAL.
 */
int engram_set_local_check(struct engram *e, uint32_t check);

/**
 * engram_buf_register() - pin memory as a destination of fetches
 * @e: context
 * @addr: start of the memory
 * @len: bytes, >= 1
 * @buf_id: set to the buffer's id (>= 1) on success
 *
 * The memory is pinned and charged to RLIMIT_MEMLOCK (-ENOMEM beyond it,
 * as mlock(2) fails) until engram_buf_unregister() or engram_close().  Page-aligned
 * memory (mmap, posix_memalign) pins fewest pages.
 *
 * Return: 0 or a negative errno.
 */
int engram_buf_register(struct engram *e, void *addr, size_t len, uint32_t *buf_id);

/* Keep the buffer registered on each RDMA connection (ENGRAM_REG_F_KEEP_KEYS). */
#define LIBENGRAM_BUF_KEEP_KEYS		(1U << 0)

/**
 * engram_buf_register_flags() - engram_buf_register() with flags
 * @e: context
 * @addr: start of the memory
 * @len: bytes, >= 1
 * @flags: LIBENGRAM_BUF_KEEP_KEYS or 0
 * @buf_id: set to the buffer's id (>= 1) on success
 *
 * LIBENGRAM_BUF_KEEP_KEYS: each RDMA connection that writes into the
 * buffer registers it once and keeps the keys until the buffer or the
 * connection goes, instead of registering and invalidating per fetch; the
 * fetch path is then one SEND a fetch.  For hosts the operator trusts:
 * while a connection lives, its host could write anywhere in the buffer,
 * not only where a fetch asked.  Deadlines still end with the connection
 * broken, and engram_buf_unregister() still returns only once nothing can
 * write the buffer.  Hosts below protocol version 5 are sent per-fetch keys
 * as before.  engram_buf_register() passes this flag when the environment
 * has ENGRAM_RDMA_KEEP_KEYS=1.
 *
 * Return: 0, -EINVAL for an unknown flag (or a module that does not know
 * it), or as engram_buf_register().
 */
int engram_buf_register_flags(struct engram *e, void *addr, size_t len, uint32_t flags,
			      uint32_t *buf_id);

/**
 * engram_buf_unregister() - unpin a buffer
 * @e: context
 * @buf_id: from engram_buf_register()
 *
 * Fetches still writing into the buffer are waited for (about 2 s at
 * most), then their connection is broken: once this returns nothing writes
 * the buffer again, and the memory may be reused or freed.
 *
 * Return: 0, or the kernel's negative errno (such as -ENOENT for an id
 * that names no buffer of this context).
 */
int engram_buf_unregister(struct engram *e, uint32_t buf_id);

/**
 * engram_fetch() - fetch rows into a registered buffer and wait
 * @e: context
 * @handle: from engram_table_open()
 * @rows: @nr_rows row indices; repeats are allowed
 * @nr_rows: 1 .. the table's max_rows
 * @buf_id: destination buffer
 * @offset: byte offset of row 0 in the buffer
 * @stride: bytes from one row to the next, >= LIBENGRAM_ROW_BYTES, or 0 for
 *	    LIBENGRAM_ROW_BYTES; bytes between rows are left untouched
 * @timeout_ns: deadline relative to the call; 0 for the module's timeout_ms
 * @flags: LIBENGRAM_BUSY_POLL or 0
 * @res: filled with the outcome, also on failure; may be NULL
 *
 * Row @rows[i] lands at @offset + i * @stride of the buffer.
 *
 * A signal does not cut the call short: the kernel's fetch goes on after
 * one, and may write the buffer until it ends, so this waits for it (until
 * its deadline at most) and returns its result.
 *
 * Return: 0 once every row is in place, or a negative errno (see the top
 * of this file); on failure the destination content is undefined, but
 * nothing writes it any more once the call has returned.
 */
int engram_fetch(struct engram *e, uint32_t handle, const uint32_t *rows, uint32_t nr_rows,
		 uint32_t buf_id, uint64_t offset, uint32_t stride, uint64_t timeout_ns,
		 uint32_t flags, struct engram_result *res);

/**
 * engram_fetch_ranges() - fetch rows into a list of destination ranges
 * @e, @handle, @rows, @nr_rows, @stride, @timeout_ns, @flags, @res: as for engram_fetch()
 * @ranges: @nr_ranges ranges of registered buffers
 * @nr_ranges: 1 .. LIBENGRAM_MAX_RANGES (or the link's limit)
 *
 * Row i lands at byte i * @stride of the concatenation of the ranges; no
 * row may straddle two ranges.
 *
 * Return: as engram_fetch().
 */
int engram_fetch_ranges(struct engram *e, uint32_t handle, const uint32_t *rows,
			uint32_t nr_rows, const struct engram_range *ranges, uint32_t nr_ranges,
			uint32_t stride, uint64_t timeout_ns, uint32_t flags,
			struct engram_result *res);

/**
 * engram_submit() - send a fetch without waiting for it
 * @e, @handle, @rows, @nr_rows, @buf_id, @offset, @stride, @timeout_ns: as
 *	for engram_fetch(); the deadline counts from this call
 * @flags: 0 (LIBENGRAM_BUSY_POLL belongs to engram_wait())
 * @res: filled (ticket, or the refusal) also on failure; may be NULL
 *
 * The row indices are copied by the call: @rows may be reused at once.
 * The buffer must not be touched until engram_wait() reports the ticket.
 *
 * Return: the ticket (>= 1), or a negative errno.
 */
int64_t engram_submit(struct engram *e, uint32_t handle, const uint32_t *rows,
		      uint32_t nr_rows, uint32_t buf_id, uint64_t offset, uint32_t stride,
		      uint64_t timeout_ns, uint32_t flags, struct engram_result *res);

/**
 * engram_submit_ranges() - engram_submit() with destination ranges
 *
 * Arguments as engram_fetch_ranges(); return as engram_submit().
 */
int64_t engram_submit_ranges(struct engram *e, uint32_t handle, const uint32_t *rows,
			     uint32_t nr_rows, const struct engram_range *ranges,
			     uint32_t nr_ranges, uint32_t stride, uint64_t timeout_ns,
			     uint32_t flags, struct engram_result *res);

/**
 * engram_submit_word() - send a fetch that sets a completion word
 * @e, @handle, @rows, @nr_rows, @stride, @timeout_ns, @res: as for engram_submit()
 * @ranges: destination ranges as for engram_submit_ranges(), or NULL
 * @nr_ranges: with @ranges
 * @buf_id: without @ranges, the destination buffer (0 with @ranges)
 * @offset: without @ranges, byte offset of row 0 (0 with @ranges)
 * @word: where and what to set
 * @flags: 0
 *
 * When the fetch has placed every row, the word becomes @word->value,
 * stored after the rows: a thread (or a GPU stream on a coherent
 * unified-memory node) that sees the value may read them at once, with no
 * engram_wait().  When it fails, the word becomes LIBENGRAM_WORD_FAILED |
 * errno once nothing more can land; engram_wait() on its ticket then
 * returns the error, or, on a table with a local copy, reads the rows from
 * it and sets the word to @word->value.  A fetch the library serves from
 * the local copy at once sets the word before this returns.  The word is
 * only ever set: clear it (or use a new value) before each fetch.
 *
 * A fetch that succeeded needs no wait; engram_wait() may still report it
 * until the next submission on the context, which forgets it.
 *
 * Return: the ticket (>= 1), or a negative errno (-EINVAL for a word that
 * is misaligned, inside the rows, or has bit 63 set; -ENOENT for an
 * unknown buffer); the word is not touched then.
 */
int64_t engram_submit_word(struct engram *e, uint32_t handle, const uint32_t *rows,
			   uint32_t nr_rows, const struct engram_range *ranges,
			   uint32_t nr_ranges, uint32_t buf_id, uint64_t offset, uint32_t stride,
			   uint64_t timeout_ns, const struct engram_word *word, uint32_t flags,
			   struct engram_result *res);

/**
 * engram_wait() - wait for a submitted fetch
 * @e: context
 * @ticket: from engram_submit(), or 0 for whichever completes first
 * @timeout_ns: how long to wait; 0 until the fetch's own deadline
 * @flags: LIBENGRAM_BUSY_POLL or 0
 * @res: filled with the outcome; res->ticket is the completed fetch, or 0
 *	 when none completed (the wait itself failed); may be NULL
 *
 * Return: 0 when the fetch completed with every row in place; the fetch's
 * negative errno when it failed (res->ticket names it); or the wait's own
 * negative errno, with res->ticket 0 (-EAGAIN: nothing completed within
 * @timeout_ns, which ended before the fetch's own deadline, and the fetch
 * stays in flight; -ENOENT for a ticket that is not in flight on this
 * context; -EINTR: a signal, the fetch goes on and
 * may still write its buffer until a later wait reports it).
 */
int engram_wait(struct engram *e, uint64_t ticket, uint64_t timeout_ns, uint32_t flags,
		struct engram_result *res);

/**
 * engram_status_name() - stable name of a server status
 * @wire_status: engram_result.wire_status
 *
 * Return: "ok", "row_out_of_range", ... as in counters and kernel logs;
 * "unknown" for a value outside the protocol.
 */
const char *engram_status_name(uint32_t wire_status);

/**
 * engram_strerror() - what an error of this library means
 * @err: a negative (or positive) errno returned by this library
 *
 * Return: for the errors of a fetch, their meaning here ("row index out of
 * range", ...); for others, strerror()'s text.  Never NULL.
 */
const char *engram_strerror(int err);

/**
 * engram_version() - the library's version
 *
 * Return: "MAJOR.MINOR.PATCH", engram-rdma's version.
 */
const char *engram_version(void);

#ifdef __cplusplus
}
#endif

#endif /* LIBENGRAM_H */
