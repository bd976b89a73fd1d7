// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the safetensors header parser (tools/lib/safetensors.c):
 * valid layouts the tool must accept and every malformed one it must refuse
 * with a message that says why.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "tap.h"

/* A whole file in memory: 8-byte LE length, @json, @data_len zero bytes. */
static uint8_t *mkfile(const char *json, uint64_t data_len, size_t *len)
{
	size_t hlen = strlen(json);
	uint8_t *p = calloc(1, 8 + hlen + data_len);
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
	memcpy(p + 8, json, hlen);
	*len = 8 + hlen + data_len;
	return p;
}

static uint8_t *mkhead(uint64_t hlen, size_t total, size_t *len)
{
	uint8_t *p = calloc(1, total);
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(hlen >> (8 * i));
	memset(p + 8, ' ', total - 8);
	if (total > 8)
		p[8] = '{';
	if (total > 9)
		p[total - 1] = '}';
	*len = total;
	return p;
}

#define T(name, dtype, shape, b, e) \
	"\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape \
	",\"data_offsets\":[" #b "," #e "]}"
/* 3 rows: weight [a,b) of 768 bytes then scale [b,c) of 24 bytes. */
#define ENGRAM3(p, a, b, c) \
	T(p ".weight", "F8_E4M3", "[3,256]", a, b) "," \
	T(p ".scale", "F8_E8M0", "[3,8]", b, c)

static void test_valid_single(void)
{
	const char *json = "{" T("e.weight", "F8_E4M3", "[3,256]", 0, 768) ","
			   T("e.scale", "F8_E8M0", "[3,8]", 768, 792) "}";
	char err[ST_ERR_LEN] = "";
	struct st_file *st = NULL;
	struct st_engram eg;
	size_t len, hlen = strlen(json);
	uint8_t *f = mkfile(json, 792, &len);
	int ret;

	ret = st_parse(f, len, len, &st, err, sizeof(err));
	tap_ok(ret == 0 && st, "valid single prefix parses");
	if (ret) {
		tap_diag("error: %s", err);
		free(f);
		return;
	}
	tap_ok(st->ntensors == 2 && st->header_len == hlen && st->data_start == 8 + hlen &&
	       !st->metadata, "header length, data start and tensor count");
	ret = st_engram_lookup(st, "e", &eg, err, sizeof(err));
	tap_ok(ret == 0 && eg.rows == 3 && eg.weight_offset == 8 + hlen &&
	       eg.scale_offset == 8 + hlen + 768 && eg.weight_size == 768 && eg.scale_size == 24,
	       "single prefix geometry: rows 3, absolute offsets");
	tap_ok(st_find(st, "e.scale") && !st_find(st, "e"), "st_find exact names only");
	st_free(st);
	free(f);
}

static void test_valid_several(void)
{
	/* 13 bytes of padding first: nothing is aligned. */
	const char *json = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"x\"},"
			   T("pad.before", "U8", "[13]", 0, 13) ","
			   ENGRAM3("layers.1.engram.embed", 13, 781, 805) ","
			   T("other", "BF16", "[2,3]", 805, 817) ","
			   ENGRAM3("layers.14.engram.embed", 817, 1585, 1609) ","
			   T("pad.after", "U8", "[7]", 1609, 1616) ","
			   T("empty", "F32", "[0,4]", 1616, 1616) "}    ";
	char err[ST_ERR_LEN] = "", hint[256];
	struct st_file *st = NULL;
	struct st_engram a, b;
	size_t len, hlen = strlen(json);
	uint8_t *f = mkfile(json, 1616, &len);
	int ret;

	ret = st_parse(f, len, len, &st, err, sizeof(err));
	tap_ok(ret == 0, "several prefixes, pads, metadata, trailing spaces parse");
	if (ret) {
		tap_diag("error: %s", err);
		free(f);
		return;
	}
	tap_ok(st->ntensors == 8, "all 8 tensors kept, metadata not counted");
	tap_ok(st->metadata && json_is_string(json_object_get(st->metadata, "format")),
	       "__metadata__ available");
	ret = st_engram_lookup(st, "layers.1.engram.embed", &a, err, sizeof(err)) ||
	      st_engram_lookup(st, "layers.14.engram.embed", &b, err, sizeof(err));
	tap_ok(!ret && a.weight_offset == 8 + hlen + 13 && a.scale_offset == 8 + hlen + 781 &&
	       b.weight_offset == 8 + hlen + 817 && b.scale_offset == 8 + hlen + 1585 &&
	       a.rows == 3 && b.rows == 3, "both prefixes found at unaligned offsets");
	tap_ok(st_engram_candidates(st, hint, sizeof(hint)) == 2 &&
	       !strcmp(hint, "layers.1.engram.embed, layers.14.engram.embed"),
	       "candidate list names both tables in file order");
	tap_ok(st->tensors[0].begin <= st->tensors[1].begin, "tensors sorted by offset");
	st_free(st);
	free(f);

	/* Data past the last tensor is allowed (we only check it fits). */
	json = "{" ENGRAM3("e", 0, 768, 792) "}";
	f = mkfile(json, 4096, &len);
	ret = st_parse(f, len, len, &st, err, sizeof(err));
	tap_ok(ret == 0, "data area larger than the tensors is accepted");
	st_free(st);
	free(f);
}

struct bad_case {
	const char *desc;
	const char *json;
	uint64_t data_len;
	const char *prefix;	/* NULL: st_parse must fail; else st_engram_lookup */
	const char *phrase;
};

static const struct bad_case bad_cases[] = {
	{ "not JSON", "{\"a\": nope}", 0, NULL, "header is not valid JSON" },
	{ "not JSON reports position", "{\"a\":\n nope}", 0, NULL, "line 2" },
	{ "top level not an object", "[1, 2, 3]", 0, NULL, "not a JSON object" },
	{ "duplicate keys",
	  "{" ENGRAM3("e", 0, 768, 792) "," T("e.scale", "F8_E8M0", "[3,8]", 768, 792) "}",
	  792, NULL, "duplicate" },
	{ "metadata not an object", "{\"__metadata__\":[1]}", 0, NULL, "\"__metadata__\" is not" },
	{ "metadata value not a string", "{\"__metadata__\":{\"k\":1}}", 0, NULL, "not a string" },
	{ "tensor not an object", "{\"x\":5}", 0, NULL, "tensor 'x' is not a JSON object" },
	{ "unknown dtype", "{" T("x", "F7", "[1]", 0, 1) "}", 1, NULL, "unknown dtype 'F7'" },
	{ "dtype missing", "{\"x\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, NULL,
	  "no string \"dtype\"" },
	{ "negative shape", "{" T("x", "U8", "[-1]", 0, 1) "}", 1, NULL, "non-negative" },
	{ "fractional shape", "{" T("x", "U8", "[1.5]", 0, 1) "}", 1, NULL, "non-negative" },
	{ "shape missing", "{\"x\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, NULL,
	  "no \"shape\"" },
	{ "data_offsets not a pair",
	  "{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1, NULL,
	  "\"data_offsets\" is not" },
	{ "data_offsets begin > end", "{" T("x", "U8", "[0]", 5, 4) "}", 8, NULL,
	  "begin 5 > end 4" },
	{ "shape overflow", "{" T("x", "U8", "[4294967296,4294967296,2]", 0, 0) "}", 0, NULL,
	  "overflows" },
	{ "shape times dtype size overflow", "{" T("x", "F32", "[4611686018427387904]", 0, 0) "}",
	  0, NULL, "overflows" },
	{ "size/shape mismatch", "{" T("x", "F16", "[3,4]", 0, 12) "}", 24, NULL,
	  "span 12 bytes but F16 shape [3,4] needs 24" },
	{ "offsets past end of file", "{" T("x", "U8", "[10]", 0, 10) "}", 9, NULL,
	  "data offsets past end of file" },
	{ "overlapping tensors",
	  "{" T("x", "U8", "[10]", 0, 10) "," T("y", "U8", "[10]", 5, 15) "}", 15, NULL,
	  "tensors 'x' and 'y' overlap" },
	{ "overlap with an earlier long tensor",
	  "{" T("a", "U8", "[100]", 0, 100) "," T("b", "U8", "[10]", 10, 20) ","
	  T("c", "U8", "[10]", 30, 40) "}", 100, NULL, "tensors 'a' and 'b' overlap" },
	{ "missing weight", "{" T("e.scale", "F8_E8M0", "[3,8]", 0, 24) "}", 24, "e",
	  "tensor 'e.weight' not found" },
	{ "missing scale", "{" T("e.weight", "F8_E4M3", "[3,256]", 0, 768) "}", 768, "e",
	  "tensor 'e.scale' not found" },
	{ "wrong weight dtype", "{" T("e.weight", "BF16", "[3,128]", 0, 768) ","
	  T("e.scale", "F8_E8M0", "[3,8]", 768, 792) "}", 792, "e",
	  "'e.weight' has dtype BF16, expected F8_E4M3" },
	{ "wrong scale dtype", "{" T("e.weight", "F8_E4M3", "[3,256]", 0, 768) ","
	  T("e.scale", "U8", "[3,8]", 768, 792) "}", 792, "e",
	  "'e.scale' has dtype U8, expected F8_E8M0" },
	{ "wrong scale shape", "{" T("e.weight", "F8_E4M3", "[10,256]", 0, 2560) ","
	  T("e.scale", "F8_E8M0", "[10,4]", 2560, 2600) "}", 2600, "e",
	  "'e.scale' has shape [10,4], expected [N,8]" },
	{ "weight not 2-D", "{" T("e.weight", "F8_E4M3", "[768]", 0, 768) ","
	  T("e.scale", "F8_E8M0", "[3,8]", 768, 792) "}", 792, "e",
	  "'e.weight' has shape [768], expected [N,256]" },
	{ "row count mismatch", "{" T("e.weight", "F8_E4M3", "[3,256]", 0, 768) ","
	  T("e.scale", "F8_E8M0", "[4,8]", 768, 800) "}", 800, "e",
	  "'e.weight' has 3 rows but 'e.scale' has 4" },
	{ "zero rows", "{" T("e.weight", "F8_E4M3", "[0,256]", 0, 0) ","
	  T("e.scale", "F8_E8M0", "[0,8]", 0, 0) "}", 0, "e", "'e.weight' has 0 rows" },
};

static void test_bad_cases(void)
{
	size_t i, len;

	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *c = &bad_cases[i];
		char err[ST_ERR_LEN] = "";
		struct st_file *st = NULL;
		struct st_engram eg;
		uint8_t *f = mkfile(c->json, c->data_len, &len);
		int ret = st_parse(f, len, len, &st, err, sizeof(err));

		if (c->prefix) {
			if (ret) {
				tap_ok(0, "%s: header parses", c->desc);
				tap_diag("error: %s", err);
			} else {
				ret = st_engram_lookup(st, c->prefix, &eg, err, sizeof(err));
				tap_ok(ret == -EINVAL, "%s: lookup refused", c->desc);
				tap_contains(err, c->phrase, "  ...with the right message");
			}
		} else {
			tap_ok(ret == -EINVAL && !st, "%s: refused", c->desc);
			tap_contains(err, c->phrase, "  ...with the right message");
		}
		st_free(st);
		free(f);
	}
}

static void test_truncation(void)
{
	char err[ST_ERR_LEN] = "";
	struct st_file *st = NULL;
	uint64_t hlen;
	size_t len;
	uint8_t *f;
	int ret;

	ret = st_parse("abc", 3, 3, &st, err, sizeof(err));
	tap_ok(ret == -EINVAL, "file shorter than 8 bytes refused");
	tap_contains(err, "file too short", "  ...with the right message");

	ret = st_parse("\x10\0\0\0\0\0\0\0", 8, 8, &st, err, sizeof(err));
	tap_ok(ret == -EINVAL, "8-byte file announcing a header refused");
	tap_contains(err, "header length past end of file", "  ...with the right message");

	/* The buffer holds less header than announced but the file is long enough. */
	f = mkhead(100, 40, &len);
	ret = st_parse(f, len, 1000, &st, err, sizeof(err));
	tap_ok(ret == -EINVAL, "buffer cut inside the header refused");
	tap_contains(err, "header cut short", "  ...with the right message");
	free(f);

	f = mkhead(100, 50, &len);
	ret = st_parse(f, len, len, &st, err, sizeof(err));
	tap_ok(ret == -EINVAL, "header length past EOF refused");
	tap_contains(err, "header length past end of file", "  ...with the right message");
	free(f);

	f = mkhead(ST_HEADER_MAX + 1, 16, &len);
	ret = st_header_len(f, len, UINT64_MAX, &hlen, err, sizeof(err));
	tap_ok(ret == -EINVAL, "header length above 100 MB refused");
	tap_contains(err, "header length absurdly large", "  ...with the right message");
	free(f);

	f = mkhead(UINT64_MAX, 16, &len);
	ret = st_parse(f, len, 1ULL << 40, &st, err, sizeof(err));
	tap_ok(ret == -EINVAL, "header length 2^64-1 refused without overflow");
	tap_contains(err, "absurdly large", "  ...with the right message");
	free(f);

	f = mkhead(1, 16, &len);
	ret = st_parse(f, len, len, &st, err, sizeof(err));
	tap_ok(ret == -EINVAL, "header length 1 refused");
	tap_contains(err, "too small", "  ...with the right message");
	free(f);

	f = mkhead(ST_HEADER_MAX, 16, &len);
	ret = st_header_len(f, len, ST_HEADER_MAX + 8, &hlen, err, sizeof(err));
	tap_ok(ret == 0 && hlen == ST_HEADER_MAX, "header length exactly 100 MB accepted");
	free(f);
}

static void test_dtypes(void)
{
	static const struct { const char *name; unsigned int size; } want[] = {
		{ "F8_E4M3", 1 }, { "F8_E5M2", 1 }, { "F8_E8M0", 1 }, { "BOOL", 1 },
		{ "U8", 1 }, { "I8", 1 }, { "U16", 2 }, { "I16", 2 }, { "F16", 2 },
		{ "BF16", 2 }, { "U32", 4 }, { "I32", 4 }, { "F32", 4 }, { "U64", 8 },
		{ "I64", 8 }, { "F64", 8 },
	};
	enum st_dtype d;
	size_t i;
	int good = 1;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (st_dtype_parse(want[i].name, &d) || st_dtype_size(d) != want[i].size ||
		    strcmp(st_dtype_name(d), want[i].name)) {
			tap_diag("dtype %s wrong", want[i].name);
			good = 0;
		}
	}
	tap_ok(good, "every safetensors dtype known with its size");
	tap_ok(st_dtype_parse("f8_e4m3", &d) == -EINVAL, "dtype names are case-sensitive");
}

int main(void)
{
	test_valid_single();
	test_valid_several();
	test_bad_cases();
	test_truncation();
	test_dtypes();
	return tap_done();
}
