// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Safetensors header parser: 8-byte little-endian header length, a JSON
 * object of tensors, then the data area.  The header comes from an untrusted
 * file, so every number is range- and overflow-checked before it is used to
 * compute an offset that ends up in the kernel.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/engram_rdma.h>

#include "safetensors.h"

static const struct {
	const char *name;
	unsigned int size;
} st_dtypes[ST_DTYPE_COUNT] = {
	[ST_BOOL]	= { "BOOL", 1 },
	[ST_U8]		= { "U8", 1 },
	[ST_I8]		= { "I8", 1 },
	[ST_F8_E4M3]	= { "F8_E4M3", 1 },
	[ST_F8_E5M2]	= { "F8_E5M2", 1 },
	[ST_F8_E8M0]	= { "F8_E8M0", 1 },
	[ST_U16]	= { "U16", 2 },
	[ST_I16]	= { "I16", 2 },
	[ST_F16]	= { "F16", 2 },
	[ST_BF16]	= { "BF16", 2 },
	[ST_U32]	= { "U32", 4 },
	[ST_I32]	= { "I32", 4 },
	[ST_F32]	= { "F32", 4 },
	[ST_U64]	= { "U64", 8 },
	[ST_I64]	= { "I64", 8 },
	[ST_F64]	= { "F64", 8 },
	[ST_C64]	= { "C64", 8 },
};

const char *st_dtype_name(enum st_dtype dtype)
{
	return (unsigned int)dtype < ST_DTYPE_COUNT ? st_dtypes[dtype].name : "?";
}

unsigned int st_dtype_size(enum st_dtype dtype)
{
	return (unsigned int)dtype < ST_DTYPE_COUNT ? st_dtypes[dtype].size : 0;
}

int st_dtype_parse(const char *name, enum st_dtype *dtype)
{
	unsigned int i;

	for (i = 0; i < ST_DTYPE_COUNT; i++) {
		if (!strcmp(name, st_dtypes[i].name)) {
			*dtype = i;
			return 0;
		}
	}
	return -EINVAL;
}

__attribute__((format(printf, 3, 4)))
static int st_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

int st_header_len(const void *buf, size_t len, uint64_t file_size, uint64_t *header_len,
		  char *err, size_t errlen)
{
	uint64_t hlen;

	if (file_size < 8 || len < 8)
		return st_fail(err, errlen,
			       "file too short (%" PRIu64 " bytes): not a safetensors file",
			       file_size < len ? file_size : (uint64_t)len);
	hlen = get_le64(buf);
	if (hlen > ST_HEADER_MAX)
		return st_fail(err, errlen,
			       "header length absurdly large (%" PRIu64 " bytes, limit %llu)",
			       hlen, ST_HEADER_MAX);
	if (hlen > file_size - 8)
		return st_fail(err, errlen,
			       "header length past end of file (%" PRIu64 " bytes, file has %"
			       PRIu64 " after the length)", hlen, file_size - 8);
	if (hlen < 2)
		return st_fail(err, errlen, "header length too small (%" PRIu64 " bytes)", hlen);
	*header_len = hlen;
	return 0;
}

static void st_tensor_free(struct st_tensor *t)
{
	free(t->name);
	free(t->shape);
}

void st_free(struct st_file *st)
{
	size_t i;

	if (!st)
		return;
	for (i = 0; i < st->ntensors; i++)
		st_tensor_free(&st->tensors[i]);
	free(st->tensors);
	json_decref(st->metadata);
	free(st);
}

/* JSON integers are signed 64-bit in jansson; negative ones never make sense here. */
static int st_get_u64(json_t *v, uint64_t *out)
{
	json_int_t i;

	if (!json_is_integer(v))
		return -1;
	i = json_integer_value(v);
	if (i < 0)
		return -1;
	*out = (uint64_t)i;
	return 0;
}

static void st_format_shape(const struct st_tensor *t, char *buf, size_t len)
{
	size_t off = 0;
	unsigned int i;

	off += snprintf(buf + off, len - off, "[");
	for (i = 0; i < t->ndim && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%" PRIu64, i ? "," : "", t->shape[i]);
	if (off < len)
		snprintf(buf + off, len - off, "]");
}

static int st_parse_tensor(const char *name, json_t *obj, uint64_t data_len,
			   struct st_tensor *t, char *err, size_t errlen)
{
	json_t *dtype, *shape, *offs, *v;
	uint64_t nelem = 1, bytes;
	size_t i;

	if (!json_is_object(obj))
		return st_fail(err, errlen, "tensor '%s' is not a JSON object", name);
	/* Unknown keys are ignored, as the reference implementation does. */
	dtype = json_object_get(obj, "dtype");
	if (!json_is_string(dtype))
		return st_fail(err, errlen, "tensor '%s' has no string \"dtype\"", name);
	if (st_dtype_parse(json_string_value(dtype), &t->dtype))
		return st_fail(err, errlen, "tensor '%s' has unknown dtype '%s'", name,
			       json_string_value(dtype));

	shape = json_object_get(obj, "shape");
	if (!json_is_array(shape))
		return st_fail(err, errlen, "tensor '%s' has no \"shape\" array", name);
	t->ndim = json_array_size(shape);
	if (t->ndim) {
		t->shape = calloc(t->ndim, sizeof(*t->shape));
		if (!t->shape)
			return -ENOMEM;
	}
	json_array_foreach(shape, i, v) {
		if (st_get_u64(v, &t->shape[i]))
			return st_fail(err, errlen,
				       "tensor '%s': shape[%zu] is not a non-negative integer",
				       name, i);
		if (__builtin_mul_overflow(nelem, t->shape[i], &nelem))
			return st_fail(err, errlen, "tensor '%s': shape overflows 64 bits", name);
	}
	if (__builtin_mul_overflow(nelem, (uint64_t)st_dtype_size(t->dtype), &bytes))
		return st_fail(err, errlen, "tensor '%s': shape overflows 64 bits", name);

	offs = json_object_get(obj, "data_offsets");
	if (!json_is_array(offs) || json_array_size(offs) != 2 ||
	    st_get_u64(json_array_get(offs, 0), &t->begin) ||
	    st_get_u64(json_array_get(offs, 1), &t->end))
		return st_fail(err, errlen,
			       "tensor '%s': \"data_offsets\" is not [begin, end] of non-negative integers",
			       name);
	if (t->begin > t->end)
		return st_fail(err, errlen,
			       "tensor '%s': data offsets begin %" PRIu64 " > end %" PRIu64,
			       name, t->begin, t->end);
	if (t->end - t->begin != bytes) {
		char sh[128];

		st_format_shape(t, sh, sizeof(sh));
		return st_fail(err, errlen,
			       "tensor '%s': data offsets span %" PRIu64
			       " bytes but %s shape %s needs %" PRIu64,
			       name, t->end - t->begin, st_dtype_name(t->dtype), sh, bytes);
	}
	if (t->end > data_len)
		return st_fail(err, errlen,
			       "tensor '%s': data offsets past end of file (end %" PRIu64
			       ", data area %" PRIu64 " bytes)", name, t->end, data_len);
	t->name = strdup(name);
	return t->name ? 0 : -ENOMEM;
}

static int st_cmp_begin(const void *a, const void *b)
{
	const struct st_tensor *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int st_parse_metadata(json_t *meta, char *err, size_t errlen)
{
	const char *key;
	json_t *v;

	if (!json_is_object(meta))
		return st_fail(err, errlen, "\"__metadata__\" is not a JSON object");
	json_object_foreach(meta, key, v) {
		if (!json_is_string(v))
			return st_fail(err, errlen,
				       "\"__metadata__\" value of '%s' is not a string", key);
	}
	return 0;
}

int st_parse(const void *buf, size_t len, uint64_t file_size, struct st_file **out,
	     char *err, size_t errlen)
{
	struct st_file *st = NULL;
	json_t *root = NULL, *v;
	json_error_t jerr;
	uint64_t hlen, data_len;
	const char *key;
	size_t i, n;
	int ret;

	*out = NULL;
	ret = st_header_len(buf, len, file_size, &hlen, err, errlen);
	if (ret)
		return ret;
	if (len - 8 < hlen)
		return st_fail(err, errlen,
			       "header cut short: %" PRIu64 " bytes announced, %zu read",
			       hlen, len - 8);

	root = json_loadb((const char *)buf + 8, hlen, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return st_fail(err, errlen, "header is not valid JSON: %s (line %d, column %d)",
			       jerr.text, jerr.line, jerr.column);
	if (!json_is_object(root)) {
		ret = st_fail(err, errlen, "header is not a JSON object");
		goto out;
	}

	st = calloc(1, sizeof(*st));
	if (!st) {
		ret = -ENOMEM;
		goto out;
	}
	st->file_size = file_size;
	st->header_len = hlen;
	st->data_start = 8 + hlen;
	data_len = file_size - 8 - hlen;

	n = json_object_size(root);
	st->tensors = calloc(n ? n : 1, sizeof(*st->tensors));
	if (!st->tensors) {
		ret = -ENOMEM;
		goto out;
	}
	json_object_foreach(root, key, v) {
		if (!strcmp(key, "__metadata__")) {
			ret = st_parse_metadata(v, err, errlen);
			if (ret)
				goto out;
			st->metadata = json_incref(v);
			continue;
		}
		ret = st_parse_tensor(key, v, data_len, &st->tensors[st->ntensors], err, errlen);
		if (ret) {
			/* A half-built tensor is not counted; free its parts now. */
			st_tensor_free(&st->tensors[st->ntensors]);
			goto out;
		}
		st->ntensors++;
	}

	qsort(st->tensors, st->ntensors, sizeof(*st->tensors), st_cmp_begin);
	/*
	 * Sorted by begin, so while no overlap has been found the ends are
	 * increasing and the previous non-empty tensor is the one to check.
	 * Empty tensors occupy no bytes and cannot overlap anything.
	 */
	{
		const struct st_tensor *prev = NULL;

		for (i = 0; i < st->ntensors; i++) {
			const struct st_tensor *t = &st->tensors[i];

			if (t->begin == t->end)
				continue;
			if (prev && prev->end > t->begin) {
				ret = st_fail(err, errlen,
					      "tensors '%s' and '%s' overlap ([%" PRIu64 ",%" PRIu64
					      ") and [%" PRIu64 ",%" PRIu64 "))",
					      prev->name, t->name, prev->begin, prev->end,
					      t->begin, t->end);
				goto out;
			}
			prev = t;
		}
	}
	*out = st;
	st = NULL;
	ret = 0;
out:
	st_free(st);
	json_decref(root);
	return ret;
}

const struct st_tensor *st_find(const struct st_file *st, const char *name)
{
	size_t i;

	for (i = 0; i < st->ntensors; i++)
		if (!strcmp(st->tensors[i].name, name))
			return &st->tensors[i];
	return NULL;
}

static int st_check_2d(const struct st_tensor *t, enum st_dtype dtype, uint64_t cols,
		       char *err, size_t errlen)
{
	if (t->dtype != dtype)
		return st_fail(err, errlen, "'%s' has dtype %s, expected %s", t->name,
			       st_dtype_name(t->dtype), st_dtype_name(dtype));
	if (t->ndim != 2 || t->shape[1] != cols) {
		char sh[128];

		st_format_shape(t, sh, sizeof(sh));
		return st_fail(err, errlen, "'%s' has shape %s, expected [N,%" PRIu64 "]",
			       t->name, sh, cols);
	}
	return 0;
}

static int st_engram_find(const struct st_file *st, const char *prefix,
			  const struct st_tensor **w, const struct st_tensor **s,
			  char *err, size_t errlen)
{
	char name[1024];

	if (snprintf(name, sizeof(name), "%s.weight", prefix) >= (int)sizeof(name))
		return st_fail(err, errlen, "tensor prefix too long");
	*w = st_find(st, name);
	if (!*w)
		return st_fail(err, errlen, "tensor '%s' not found", name);
	snprintf(name, sizeof(name), "%s.scale", prefix);
	*s = st_find(st, name);
	if (!*s)
		return st_fail(err, errlen, "tensor '%s' not found", name);
	return 0;
}

int st_engram_lookup(const struct st_file *st, const char *prefix, struct st_engram *eg,
		     char *err, size_t errlen)
{
	const struct st_tensor *w, *s;
	int ret;

	ret = st_engram_find(st, prefix, &w, &s, err, errlen);
	if (ret)
		return ret;
	ret = st_check_2d(w, ST_F8_E4M3, ENGRAM_WEIGHT_BYTES, err, errlen);
	if (ret)
		return ret;
	ret = st_check_2d(s, ST_F8_E8M0, ENGRAM_SCALE_BYTES, err, errlen);
	if (ret)
		return ret;
	if (w->shape[0] != s->shape[0])
		return st_fail(err, errlen, "'%s' has %" PRIu64 " rows but '%s' has %" PRIu64,
			       w->name, w->shape[0], s->name, s->shape[0]);
	if (!w->shape[0])
		return st_fail(err, errlen, "'%s' has 0 rows", w->name);

	eg->rows = w->shape[0];
	eg->weight_offset = st->data_start + w->begin;
	eg->weight_size = w->end - w->begin;
	eg->scale_offset = st->data_start + s->begin;
	eg->scale_size = s->end - s->begin;
	return 0;
}

size_t st_engram_candidates(const struct st_file *st, char *buf, size_t len)
{
	static const char suffix[] = ".weight";
	size_t i, found = 0, off = 0;
	struct st_engram eg;

	if (len)
		buf[0] = '\0';
	for (i = 0; i < st->ntensors; i++) {
		const char *name = st->tensors[i].name;
		size_t nlen = strlen(name);
		char prefix[1024];

		if (nlen <= sizeof(suffix) - 1 || nlen - (sizeof(suffix) - 1) >= sizeof(prefix) ||
		    strcmp(name + nlen - (sizeof(suffix) - 1), suffix))
			continue;
		memcpy(prefix, name, nlen - (sizeof(suffix) - 1));
		prefix[nlen - (sizeof(suffix) - 1)] = '\0';
		if (st_engram_lookup(st, prefix, &eg, NULL, 0))
			continue;
		if (off < len)
			off += snprintf(buf + off, len - off, "%s%s", found ? ", " : "", prefix);
		found++;
	}
	return found;
}
