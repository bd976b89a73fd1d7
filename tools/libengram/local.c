// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The local fallback: when a remote fetch fails for a reason the network
 * caused (deadline, link down, connection broken, table gone from the
 * server), libengram reads the same rows from a local copy of the shard and
 * places them exactly where the server would have written them.  Here are
 * the copy itself (the safetensors header parsed by engramctl's parser, the
 * identity check, reads with O_DIRECT where the file system takes it) and
 * the pure rules the library applies around it.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <linux/engram_rdma.h>

#include "local.h"
#include "safetensors.h"

#define LOCAL_HASH_CHUNK	(1u << 20)

/* "1", "yes", "true", "on" and their opposites; anything else is -EINVAL. */
int local_parse_bool(const char *s, bool *out)
{
	static const char * const yes[] = { "1", "yes", "true", "on" };
	static const char * const no[] = { "0", "no", "false", "off" };
	size_t i;

	if (!s)
		return -EINVAL;
	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* Decimal milliseconds, 1 .. LOCAL_TIMEOUT_MS_MAX. */
int local_parse_ms(const char *s, uint32_t *out)
{
	unsigned long long v = 0;
	const char *p;

	if (!s || !*s)
		return -EINVAL;
	for (p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned int)(*p - '0');
		if (v > LOCAL_TIMEOUT_MS_MAX)
			return -ERANGE;
	}
	if (!v)
		return -ERANGE;
	*out = (uint32_t)v;
	return 0;
}

int local_parse_check(const char *s, enum local_check *out)
{
	if (s && !strcmp(s, "size")) {
		*out = LOCAL_CHECK_SIZE;
		return 0;
	}
	if (s && !strcmp(s, "sha256")) {
		*out = LOCAL_CHECK_SHA256;
		return 0;
	}
	return -EINVAL;
}

/*
 * The variable that names one table's local copy: ENGRAM_RDMA_LOCAL_ and
 * the table name upper-cased, with every character that cannot be in a
 * variable name ('.', '-') as '_'.  "layers.1.engram.embed" gives
 * ENGRAM_RDMA_LOCAL_LAYERS_1_ENGRAM_EMBED.
 */
int local_env_name(const char *table, char *out, size_t len)
{
	size_t plen = strlen(LOCAL_ENV_PREFIX), n, i;

	if (!table || !*table)
		return -EINVAL;
	n = strlen(table);
	if (n >= ENGRAM_NAME_MAX)
		return -ENAMETOOLONG;
	if (plen + n + 1 > len)
		return -ENOSPC;
	memcpy(out, LOCAL_ENV_PREFIX, plen);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)table[i];

		if (!isalnum(c) && c != '_' && c != '.' && c != '-')
			return -EINVAL;
		out[plen + i] = isalnum(c) ? (char)toupper(c) : '_';
	}
	out[plen + n] = '\0';
	return 0;
}

/*
 * Failures that the remote path caused and that a local copy can cure.  A
 * request the caller got wrong (bad row index, handle, destination, too
 * many rows) would be just as wrong locally: it is returned as it is.
 */
bool local_fallback_errno(int err)
{
	switch (err < 0 ? -err : err) {
	case ETIMEDOUT:		/* deadline passed, link reset */
	case ENOTCONN:		/* link down at submit */
	case ECONNRESET:
	case ECONNABORTED:
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENETDOWN:
	case ENOLINK:
	case EPIPE:
	case ESHUTDOWN:		/* link deleted, server or table going away */
	case EIO:		/* server-side failure or transport error */
	case ESTALE:		/* the server no longer has the table */
	case EAGAIN:		/* table not ready (loading, verifying) or drained */
	case EBUSY:		/* the server is out of tickets */
	case EPROTO:
	case ENODEV:
	case ENXIO:		/* no host holds the row: the copy has every row */
		return true;
	default:
		return false;
	}
}

/* Opening a table remotely failed: may a local copy stand in for it? */
bool local_open_fallback_errno(int err)
{
	switch (err < 0 ? -err : err) {
	case ENOTCONN:		/* no link up */
	case ENOENT:		/* no link has it (unloaded on the server) */
	case ENODEV:		/* the link named does not exist */
	case EAGAIN:		/* not ready */
	case ESHUTDOWN:
		return true;
	default:
		return false;
	}
}

/*
 * The kernel's placement rule (chardev.c, engram_fetch_cut): row i at
 * i * stride of the concatenated ranges; the ranges together must hold
 * (nr_rows - 1) * stride + ENGRAM_ROW_BYTES bytes (-ENOSPC), and no row may
 * straddle the end of a range other than the last one used (-EINVAL).
 */
int local_place_check(const struct local_dest *d, unsigned int nd, uint32_t nr_rows,
		      uint32_t stride)
{
	uint64_t total, base = 0, end, row;
	unsigned int i;

	if (!nr_rows || stride < ENGRAM_ROW_BYTES || !nd)
		return -EINVAL;
	total = (uint64_t)(nr_rows - 1) * stride + ENGRAM_ROW_BYTES;
	for (i = 0; i < nd && base < total; i++) {
		end = base + d[i].len < total ? base + d[i].len : total;
		if (end < total && i + 1 == nd)
			return -ENOSPC;
		if (end < total) {
			row = end / stride;
			if (end > row * stride && end < row * stride + ENGRAM_ROW_BYTES)
				return -EINVAL;
		}
		base += d[i].len;
	}
	return base >= total ? 0 : -ENOSPC;
}

static int local_pread_all(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!n)
			break;
		done += (size_t)n;
	}
	*got = done;
	return 0;
}

/* Read all of a header; the parser checks every number in it. */
static int local_header(int fd, uint64_t size, struct st_file **st)
{
	uint8_t head[8];
	uint64_t hlen;
	char err[ST_ERR_LEN];
	size_t got;
	void *buf;
	int ret;

	ret = local_pread_all(fd, head, sizeof(head), 0, &got);
	if (ret)
		return ret;
	if (st_header_len(head, got, size, &hlen, err, sizeof(err)))
		return -EINVAL;
	buf = malloc(8 + hlen);
	if (!buf)
		return -ENOMEM;
	ret = local_pread_all(fd, buf, 8 + hlen, 0, &got);
	if (!ret && got != 8 + hlen)
		ret = -EIO;
	if (!ret && st_parse(buf, got, size, st, err, sizeof(err)))
		ret = -EINVAL;
	free(buf);
	return ret;
}

/*
 * What O_DIRECT wants offsets, lengths and memory aligned to: what the file
 * system says (statx's STATX_DIOALIGN, Linux 6.1 on), else the page size,
 * which no logical block exceeds (4 KiB, or 16 and 64 KiB on arm64 kernels
 * built so), rather than a fixed 4 KiB.
 */
static uint32_t local_dio_align(int fd)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint32_t a = pg >= 512 ? (uint32_t)pg : 4096;
#ifdef STATX_DIOALIGN
	struct statx stx;

	if (!statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align) {
		uint32_t d = stx.stx_dio_offset_align > stx.stx_dio_mem_align ?
			     stx.stx_dio_offset_align : stx.stx_dio_mem_align;

		/* posix_memalign() wants a power of two. */
		if (d >= 512 && !(d & (d - 1)))
			a = d;
	}
#endif
	return a;
}

/**
 * local_open() - open a local copy and find a table's tensors in it
 * @path: the safetensors file
 * @tensor: the tensor prefix (PREFIX.weight, PREFIX.scale)
 * @out: set on success
 *
 * Return: 0; -EINVAL when the file is not safetensors or has no Engram
 * table under @tensor; or open(2)'s errno.
 */
int local_open(const char *path, const char *tensor, struct local_copy **out)
{
	char err[ST_ERR_LEN];
	struct local_copy *lc;
	struct st_engram eg;
	struct st_file *st;
	struct stat sb;
	int ret;

	lc = calloc(1, sizeof(*lc));
	if (!lc)
		return -ENOMEM;
	lc->fd_direct = -1;
	lc->path = strdup(path);
	lc->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!lc->path || lc->fd < 0) {
		ret = lc->path ? -errno : -ENOMEM;
		goto err;
	}
	if (fstat(lc->fd, &sb) < 0) {
		ret = -errno;
		goto err;
	}
	if (!S_ISREG(sb.st_mode)) {
		ret = -EINVAL;
		goto err;
	}
	lc->file_size = (uint64_t)sb.st_size;
	ret = local_header(lc->fd, lc->file_size, &st);
	if (ret)
		goto err;
	ret = st_engram_lookup(st, tensor, &eg, err, sizeof(err)) ? -EINVAL : 0;
	st_free(st);
	if (ret)
		goto err;
	lc->rows = eg.rows;
	lc->weight_offset = eg.weight_offset;
	lc->scale_offset = eg.scale_offset;
	/* tmpfs and some others refuse O_DIRECT: buffered reads then. */
	lc->fd_direct = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	lc->dio_align = local_dio_align(lc->fd);
	*out = lc;
	return 0;
err:
	local_close(lc);
	return ret;
}

void local_close(struct local_copy *lc)
{
	if (!lc)
		return;
	if (lc->fd >= 0)
		close(lc->fd);
	if (lc->fd_direct >= 0)
		close(lc->fd_direct);
	free(lc->path);
	free(lc);
}

static bool local_has_table(const char *path, const char *name)
{
	struct local_copy *lc;

	if (local_open(path, name, &lc))
		return false;
	local_close(lc);
	return true;
}

static int local_cmp(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

/**
 * local_find() - the file in a directory that holds a table
 * @dir: the directory (ENGRAM_RDMA_LOCAL_DIR)
 * @name: the table's name, which is also its tensor prefix
 * @path: set to a malloc()ed path on success
 *
 * First DIR/NAME.safetensors; else, in name order, the first *.safetensors
 * file of the directory with tensors NAME.weight and NAME.scale (a
 * checkpoint's shards, as published, are found this way).
 *
 * Return: 0, -ENOENT when no file has it, or opendir(3)'s errno.
 */
int local_find(const char *dir, const char *name, char **path)
{
	char **names = NULL;
	size_t n = 0, i;
	struct dirent *de;
	DIR *d;
	int ret = -ENOENT;

	if (asprintf(path, "%s/%s.safetensors", dir, name) < 0)
		return -ENOMEM;
	if (!access(*path, R_OK) && local_has_table(*path, name))
		return 0;
	free(*path);
	*path = NULL;
	d = opendir(dir);
	if (!d)
		return -errno;
	names = calloc(LOCAL_DIR_MAX_ENTRIES, sizeof(*names));
	if (!names) {
		closedir(d);
		return -ENOMEM;
	}
	while (n < LOCAL_DIR_MAX_ENTRIES && (de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len > 12 && !strcmp(de->d_name + len - 12, ".safetensors"))
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), local_cmp);
	for (i = 0; i < n && ret == -ENOENT; i++) {
		if (!names[i] || asprintf(path, "%s/%s", dir, names[i]) < 0) {
			*path = NULL;
			ret = -ENOMEM;
			break;
		}
		if (local_has_table(*path, name)) {
			ret = 0;
			break;
		}
		free(*path);
		*path = NULL;
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret;
}

static int local_sha256(int fd, uint8_t *md)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint64_t off = 0;
	unsigned int mdlen = 0;
	size_t got;
	void *buf;
	int ret = -ENOMEM;

	buf = malloc(LOCAL_HASH_CHUNK);
	if (!ctx || !buf)
		goto out;
	ret = -EIO;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		goto out;
	for (;;) {
		ret = local_pread_all(fd, buf, LOCAL_HASH_CHUNK, off, &got);
		if (ret)
			goto out;
		if (!got)
			break;
		if (EVP_DigestUpdate(ctx, buf, got) != 1) {
			ret = -EIO;
			goto out;
		}
		off += got;
	}
	ret = EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == ENGRAM_SHA256_LEN ? 0 : -EIO;
out:
	free(buf);
	EVP_MD_CTX_free(ctx);
	return ret;
}

/**
 * local_verify() - check once that the local copy is the table
 * @lc: the copy
 * @check: LOCAL_CHECK_SIZE or LOCAL_CHECK_SHA256
 * @rows: the table's rows, or 0 when unknown (no remote table to compare)
 * @sha256: the table's SHA-256, or NULL when unknown
 * @sha256_out: with LOCAL_CHECK_SHA256, the file's digest; may be NULL
 *
 * With LOCAL_CHECK_SHA256 and no @sha256 (a table only this copy serves)
 * the digest is computed for @sha256_out, the table's identity then, and
 * compared with nothing.
 *
 * Return: 0; -EBADMSG when the file is not the table (row count or
 * digest differ); or a read error.
 */
int local_verify(struct local_copy *lc, enum local_check check, uint64_t rows,
		 const uint8_t *sha256, uint8_t *sha256_out)
{
	uint8_t md[ENGRAM_SHA256_LEN];
	int ret;

	if (rows && rows != lc->rows)
		return -EBADMSG;
	if (check != LOCAL_CHECK_SHA256)
		return 0;
	ret = local_sha256(lc->fd, md);
	if (ret)
		return ret;
	if (sha256_out)
		memcpy(sha256_out, md, sizeof(md));
	if (!sha256)
		return 0;
	return memcmp(md, sha256, sizeof(md)) ? -EBADMSG : 0;
}

/* Read len bytes at off into dst, with O_DIRECT through @bounce when possible. */
static int local_read(struct local_copy *lc, uint8_t *dst, size_t len, uint64_t off,
		      uint8_t *bounce)
{
	uint64_t mask = (uint64_t)lc->dio_align - 1;
	uint64_t start = off & ~mask;
	size_t span = (size_t)(((off + len + mask) & ~mask) - start);
	size_t got;
	int ret;

	if (lc->fd_direct >= 0 && !__atomic_load_n(&lc->direct_failed, __ATOMIC_RELAXED)) {
		ret = local_pread_all(lc->fd_direct, bounce, span, start, &got);
		if (!ret) {
			if (got < off - start + len)
				return -EIO;	/* the file is shorter than its header says */
			memcpy(dst, bounce + (off - start), len);
			return 0;
		}
		if (ret != -EINVAL)
			return ret;
		/* This file system takes O_DIRECT at open but not for reads. */
		__atomic_store_n(&lc->direct_failed, true, __ATOMIC_RELAXED);
	}
	ret = local_pread_all(lc->fd, dst, len, off, &got);
	if (!ret && got != len)
		ret = -EIO;
	return ret;
}

/**
 * local_read_rows() - serve a fetch from the local copy
 * @lc: the copy
 * @rows: row indices
 * @nr_rows: how many
 * @d: destination ranges
 * @nd: how many
 * @stride: bytes from one row to the next
 * @bad_index: on -ERANGE, the position of the first bad index
 *
 * Row rows[i] lands at byte i * @stride of the concatenated ranges: its 256
 * weight bytes, then its 8 scale bytes, as the server writes it.  Bytes
 * between rows are left alone.  Every index is checked before any byte is
 * written, as the server refuses a request before it writes.
 *
 * Return: 0, -ERANGE, the errors of local_place_check(), or a read error.
 */
int local_read_rows(struct local_copy *lc, const uint32_t *rows, uint32_t nr_rows,
		    const struct local_dest *d, unsigned int nd, uint32_t stride,
		    uint32_t *bad_index)
{
	uint64_t pos, base = 0;
	unsigned int r = 0;
	uint8_t *bounce;
	uint32_t i;
	int ret;

	ret = local_place_check(d, nd, nr_rows, stride);
	if (ret)
		return ret;
	for (i = 0; i < nr_rows; i++) {
		if (rows[i] >= lc->rows) {
			*bad_index = i;
			return -ERANGE;
		}
	}
	/* Two blocks hold any 256-byte piece, whatever its alignment. */
	if (posix_memalign((void **)&bounce, lc->dio_align, 2 * (size_t)lc->dio_align))
		return -ENOMEM;
	for (i = 0; i < nr_rows; i++) {
		uint8_t *dst;

		pos = (uint64_t)i * stride;
		while (pos >= base + d[r].len) {
			base += d[r].len;
			r++;
		}
		dst = d[r].addr + (pos - base);
		ret = local_read(lc, dst, ENGRAM_WEIGHT_BYTES,
				 lc->weight_offset + (uint64_t)rows[i] * ENGRAM_WEIGHT_BYTES, bounce);
		if (!ret)
			ret = local_read(lc, dst + ENGRAM_WEIGHT_BYTES, ENGRAM_SCALE_BYTES,
					 lc->scale_offset + (uint64_t)rows[i] * ENGRAM_SCALE_BYTES,
					 bounce);
		if (ret)
			break;
	}
	free(bounce);
	return ret;
}
