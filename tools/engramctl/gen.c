// SPDX-License-Identifier: GPL-2.0
/*
 * Synthetic Engram table files.  Each row is seeded independently (splitmix64
 * over a per-row key), which makes any row checkable on its own and keeps the
 * generator at memory speed: a 1 GiB file is bound by the write path.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <linux/engram_rdma.h>

#include "gen.h"

#define GEN_BUF_BYTES	(4u << 20)
#define ONES		0x0101010101010101ULL

static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t splitmix64(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ULL;
	return mix64(*s);
}

/* stream 0: weights, 1: scales; distinct keys so the two never share values. */
static uint64_t gen_key(uint64_t seed, unsigned int prefix_idx, unsigned int stream)
{
	return mix64(seed ^ mix64(((uint64_t)prefix_idx << 1 | stream) + 0x6a09e667f3bcc909ULL));
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void gen_weight_row_key(uint64_t key, uint64_t row, uint8_t *out)
{
	uint64_t s = mix64(key ^ row), x, m, nan;
	int i;

	for (i = 0; i < ENGRAM_WEIGHT_BYTES / 8; i++) {
		x = splitmix64(&s);
		/*
		 * E4M3 has NaN at 0x7f and 0xff only; turn those into the largest
		 * finite values so the table is a valid tensor.  A byte has low
		 * seven bits all set exactly when adding one carries into bit 7.
		 */
		m = x & (0x7f * ONES);
		nan = ((m + ONES) & (0x80 * ONES)) >> 7;
		put_le64(out + 8 * i, x ^ nan);
	}
}

static inline void gen_scale_row_key(uint64_t key, uint64_t row, uint8_t *out)
{
	uint64_t s = mix64(key ^ row);

	/* E8M0 exponents 112..143, i.e. 2^-15 .. 2^16; never the 0xff NaN. */
	put_le64(out, (splitmix64(&s) & (0x1f * ONES)) + 0x70 * ONES);
}

void gen_weight_row(uint64_t seed, unsigned int prefix_idx, uint64_t row, uint8_t out[256])
{
	gen_weight_row_key(gen_key(seed, prefix_idx, 0), row, out);
}

void gen_scale_row(uint64_t seed, unsigned int prefix_idx, uint64_t row, uint8_t out[8])
{
	gen_scale_row_key(gen_key(seed, prefix_idx, 1), row, out);
}

static json_t *gen_tensor(const char *dtype, uint64_t d0, int has_d1, uint64_t d1,
			  uint64_t begin, uint64_t end)
{
	json_t *shape = has_d1 ? json_pack("[II]", (json_int_t)d0, (json_int_t)d1)
			       : json_pack("[I]", (json_int_t)d0);

	return json_pack("{s:s, s:o, s:[II]}", "dtype", dtype, "shape", shape,
			 "data_offsets", (json_int_t)begin, (json_int_t)end);
}

static int gen_add(json_t *root, const char *name, json_t *t, char *err, size_t errlen)
{
	if (!t)
		return -ENOMEM;
	if (json_object_get(root, name)) {
		json_decref(t);
		snprintf(err, errlen, "tensor '%s' would appear twice", name);
		return -EINVAL;
	}
	return json_object_set_new(root, name, t) ? -ENOMEM : 0;
}

int gen_plan(const struct gen_params *p, struct gen_plan *plan, char *err, size_t errlen)
{
	uint64_t wbytes, sbytes, off = 0, total;
	json_t *root = NULL, *meta;
	char name[1024], *json = NULL;
	size_t i, len;
	int ret = -ENOMEM;

	memset(plan, 0, sizeof(*plan));
	if (!p->rows || !p->nprefixes) {
		snprintf(err, errlen, "need at least one row and one prefix");
		return -EINVAL;
	}
	/* JSON integers are signed 64-bit; stay well inside that. */
	if (__builtin_mul_overflow(p->rows, (uint64_t)ENGRAM_WEIGHT_BYTES, &wbytes) ||
	    __builtin_mul_overflow(p->rows, (uint64_t)ENGRAM_ROW_BYTES, &total) ||
	    __builtin_mul_overflow(total, (uint64_t)p->nprefixes, &total) ||
	    __builtin_add_overflow(total, p->pad_before, &total) ||
	    __builtin_add_overflow(total, p->pad_after, &total) || total > INT64_MAX / 2) {
		snprintf(err, errlen, "file would be too large");
		return -EOVERFLOW;
	}
	sbytes = p->rows * ENGRAM_SCALE_BYTES;

	plan->weight_offset = calloc(p->nprefixes, sizeof(uint64_t));
	plan->scale_offset = calloc(p->nprefixes, sizeof(uint64_t));
	root = json_object();
	if (!plan->weight_offset || !plan->scale_offset || !root)
		goto fail;

	if (p->nmeta) {
		meta = json_object();
		if (!meta || json_object_set_new(root, "__metadata__", meta))
			goto fail;
		for (i = 0; i < p->nmeta; i++) {
			const char *eq = strchr(p->meta[i], '=');
			char key[256];

			if (!eq || eq == p->meta[i] || (size_t)(eq - p->meta[i]) >= sizeof(key)) {
				snprintf(err, errlen, "metadata '%s' is not KEY=VALUE", p->meta[i]);
				ret = -EINVAL;
				goto fail;
			}
			memcpy(key, p->meta[i], eq - p->meta[i]);
			key[eq - p->meta[i]] = '\0';
			if (json_object_set_new(meta, key, json_string(eq + 1))) {
				snprintf(err, errlen, "metadata '%s' is not valid UTF-8",
					 p->meta[i]);
				ret = -EINVAL;
				goto fail;
			}
		}
	}

	if (p->pad_before) {
		ret = gen_add(root, "pad.before",
			      gen_tensor("U8", p->pad_before, 0, 0, off, off + p->pad_before),
			      err, errlen);
		if (ret)
			goto fail;
		off += p->pad_before;
	}
	for (i = 0; i < p->nprefixes; i++) {
		snprintf(name, sizeof(name), "%s.weight", p->prefixes[i]);
		ret = gen_add(root, name, gen_tensor("F8_E4M3", p->rows, 1, ENGRAM_WEIGHT_BYTES,
						     off, off + wbytes), err, errlen);
		if (ret)
			goto fail;
		plan->weight_offset[i] = off;
		off += wbytes;
		snprintf(name, sizeof(name), "%s.scale", p->prefixes[i]);
		ret = gen_add(root, name, gen_tensor("F8_E8M0", p->rows, 1, ENGRAM_SCALE_BYTES,
						     off, off + sbytes), err, errlen);
		if (ret)
			goto fail;
		plan->scale_offset[i] = off;
		off += sbytes;
	}
	if (p->pad_after) {
		ret = gen_add(root, "pad.after",
			      gen_tensor("U8", p->pad_after, 0, 0, off, off + p->pad_after),
			      err, errlen);
		if (ret)
			goto fail;
		off += p->pad_after;
	}

	ret = -ENOMEM;
	json = json_dumps(root, JSON_COMPACT);
	if (!json)
		goto fail;
	len = strlen(json);
	/* Pad with spaces so the data area starts 8-byte aligned, as writers do. */
	plan->header_len = (len + 7) & ~(size_t)7;
	plan->header = malloc(plan->header_len + 1);
	if (!plan->header)
		goto fail;
	memcpy(plan->header, json, len);
	memset(plan->header + len, ' ', plan->header_len - len);
	plan->header[plan->header_len] = '\0';
	for (i = 0; i < p->nprefixes; i++) {
		plan->weight_offset[i] += 8 + plan->header_len;
		plan->scale_offset[i] += 8 + plan->header_len;
	}
	plan->file_size = 8 + plan->header_len + off;
	free(json);
	json_decref(root);
	return 0;
fail:
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	free(json);
	json_decref(root);
	gen_plan_free(plan);
	return ret;
}

void gen_plan_free(struct gen_plan *plan)
{
	free(plan->header);
	free(plan->weight_offset);
	free(plan->scale_offset);
	memset(plan, 0, sizeof(*plan));
}

struct gen_out {
	int fd;
	uint8_t *buf;
	size_t used;
	uint64_t done, total;
	const struct gen_params *p;
};

static int gen_flush(struct gen_out *o)
{
	size_t off = 0;
	ssize_t n;

	while (off < o->used) {
		n = write(o->fd, o->buf + off, o->used - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += n;
	}
	o->done += o->used;
	o->used = 0;
	if (o->p->progress)
		o->p->progress(o->done, o->total, o->p->progress_arg);
	return 0;
}

/* Space for @n bytes in the buffer, flushing first when needed. */
static int gen_reserve(struct gen_out *o, size_t n, uint8_t **dst)
{
	int ret;

	if (o->used + n > GEN_BUF_BYTES) {
		ret = gen_flush(o);
		if (ret)
			return ret;
	}
	*dst = o->buf + o->used;
	o->used += n;
	return 0;
}

static int gen_fill(struct gen_out *o, uint64_t bytes, uint8_t value)
{
	uint8_t *dst;
	size_t n;
	int ret;

	while (bytes) {
		n = bytes < GEN_BUF_BYTES ? bytes : GEN_BUF_BYTES;
		ret = gen_reserve(o, n, &dst);
		if (ret)
			return ret;
		memset(dst, value, n);
		bytes -= n;
	}
	return 0;
}

int gen_write(int fd, const struct gen_params *p, const struct gen_plan *plan,
	      char *err, size_t errlen)
{
	struct gen_out o = { .fd = fd, .total = plan->file_size, .p = p };
	uint64_t row, key;
	uint8_t *dst;
	size_t i;
	int ret;

	o.buf = malloc(GEN_BUF_BYTES);
	if (!o.buf) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = gen_reserve(&o, 8, &dst);
	if (ret)
		goto out;
	put_le64(dst, plan->header_len);
	for (i = 0; i < plan->header_len; i += GEN_BUF_BYTES) {
		size_t n = plan->header_len - i < GEN_BUF_BYTES ? plan->header_len - i
								 : GEN_BUF_BYTES;

		ret = gen_reserve(&o, n, &dst);
		if (ret)
			goto out;
		memcpy(dst, plan->header + i, n);
	}
	ret = gen_fill(&o, p->pad_before, 0xa5);
	if (ret)
		goto out;
	for (i = 0; i < p->nprefixes; i++) {
		key = gen_key(p->seed, i, 0);
		for (row = 0; row < p->rows; row++) {
			ret = gen_reserve(&o, ENGRAM_WEIGHT_BYTES, &dst);
			if (ret)
				goto out;
			gen_weight_row_key(key, row, dst);
		}
		key = gen_key(p->seed, i, 1);
		for (row = 0; row < p->rows; row++) {
			ret = gen_reserve(&o, ENGRAM_SCALE_BYTES, &dst);
			if (ret)
				goto out;
			gen_scale_row_key(key, row, dst);
		}
	}
	ret = gen_fill(&o, p->pad_after, 0x5a);
	if (ret)
		goto out;
	ret = gen_flush(&o);
out:
	if (ret)
		snprintf(err, errlen, "write: %s", strerror(-ret));
	free(o.buf);
	return ret;
}
