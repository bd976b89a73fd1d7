// SPDX-License-Identifier: GPL-2.0
/*
 * Round trip of the table generator (tools/engramctl/gen.c) through the
 * parser: the file it writes must be a valid safetensors file whose geometry
 * the parser finds, checked a second time by reading the header with jansson
 * directly, and whose rows are exactly the documented function of the seed.
 *
 * "test_mktable --write-seeds DIR" writes small generated files as a fuzzing
 * corpus instead of testing.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "gen.h"
#include "safetensors.h"
#include "tap.h"

static char tmpdir[4096];

static int tmpfile_in_dir(char *path, size_t len, const char *tag)
{
	const char *dir = getenv("TMPDIR");

	snprintf(path, len, "%s/engram-%s-XXXXXX", dir && *dir ? dir : "/tmp", tag);
	return mkstemp(path);
}

static uint8_t *read_all(const char *path, size_t *len)
{
	struct stat sb;
	uint8_t *p;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &sb)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	p = malloc(sb.st_size ? sb.st_size : 1);
	if (p && read(fd, p, sb.st_size) != sb.st_size) {
		free(p);
		p = NULL;
	}
	close(fd);
	*len = sb.st_size;
	return p;
}

static int write_file(const char *path, const struct gen_params *p, struct gen_plan *plan)
{
	char err[256] = "";
	int fd, ret;

	if (gen_plan(p, plan, err, sizeof(err))) {
		tap_diag("gen_plan: %s", err);
		return -1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	ret = gen_write(fd, p, plan, err, sizeof(err));
	if (ret)
		tap_diag("gen_write: %s", err);
	close(fd);
	return ret;
}

/* Absolute offset of @name's data, read from the header with jansson alone. */
static int64_t raw_offset(const uint8_t *f, const char *name)
{
	uint64_t hlen = 0;
	json_t *root, *t;
	int64_t off = -1;
	int i;

	for (i = 7; i >= 0; i--)
		hlen = hlen << 8 | f[i];
	root = json_loadb((const char *)f + 8, hlen, 0, NULL);
	t = json_object_get(json_object_get(root, name), "data_offsets");
	if (json_is_integer(json_array_get(t, 0)))
		off = 8 + hlen + json_integer_value(json_array_get(t, 0));
	json_decref(root);
	return off;
}

static void test_roundtrip(void)
{
	static const char *const prefixes[] = { "layers.1.engram.embed", "layers.14.engram.embed" };
	static const char *const meta[] = { "format=pt", "generator=engramctl" };
	static const uint64_t rows_to_check[] = { 0, 1, 2, 499, 998, 999 };
	struct gen_params p = {
		.rows = 1000, .seed = 42, .prefixes = prefixes, .nprefixes = 2,
		.pad_before = 13, .pad_after = 7, .meta = meta, .nmeta = 2,
	};
	char err[ST_ERR_LEN] = "", path[4200];
	struct gen_plan plan;
	struct st_file *st = NULL;
	struct st_engram eg[2];
	uint8_t *f, want[256];
	size_t len, i, r;
	int fd, good, nan = 0, badscale = 0;

	fd = tmpfile_in_dir(path, sizeof(path), "roundtrip");
	if (!tap_ok(fd >= 0, "temporary file in %s", tmpdir))
		return;
	close(fd);
	if (!tap_ok(write_file(path, &p, &plan) == 0, "generator writes 2 tables, pads, metadata"))
		goto out;
	f = read_all(path, &len);
	if (!tap_ok(f && len == plan.file_size, "file size matches the plan (%zu bytes)", len))
		goto out_plan;
	tap_ok(plan.header_len % 8 == 0 && f[8 + plan.header_len - 1] != '\0' &&
	       (plan.header_len == 0 || f[8 + plan.header_len - 1] == ' ' ||
		f[8 + plan.header_len - 1] == '}'),
	       "header padded with spaces to a multiple of 8 (%" PRIu64 ")", plan.header_len);

	if (!tap_ok(st_parse(f, len, len, &st, err, sizeof(err)) == 0, "parser accepts the file")) {
		tap_diag("%s", err);
		goto out_f;
	}
	tap_ok(st->ntensors == 6 && st->metadata &&
	       !strcmp(json_string_value(json_object_get(st->metadata, "generator")), "engramctl"),
	       "6 tensors and the metadata");
	good = 1;
	for (i = 0; i < 2; i++) {
		char name[128];

		if (st_engram_lookup(st, prefixes[i], &eg[i], err, sizeof(err))) {
			tap_diag("%s", err);
			good = 0;
			continue;
		}
		snprintf(name, sizeof(name), "%s.weight", prefixes[i]);
		good &= eg[i].rows == 1000 && eg[i].weight_offset == plan.weight_offset[i] &&
			(int64_t)eg[i].weight_offset == raw_offset(f, name);
		snprintf(name, sizeof(name), "%s.scale", prefixes[i]);
		good &= eg[i].scale_offset == plan.scale_offset[i] &&
			(int64_t)eg[i].scale_offset == raw_offset(f, name);
	}
	tap_ok(good, "parser, plan and raw JSON agree on every offset");
	tap_ok(eg[0].weight_offset == 8 + plan.header_len + 13 && eg[0].weight_offset % 8 == 5,
	       "pad.before shifts the first table off alignment (offset %" PRIu64 ")",
	       eg[0].weight_offset);
	tap_ok(raw_offset(f, "pad.after") == (int64_t)(eg[1].scale_offset + 8000) &&
	       len == eg[1].scale_offset + 8000 + 7, "pad.after is last, 7 bytes");

	good = 1;
	for (i = 0; i < 2; i++) {
		for (r = 0; r < sizeof(rows_to_check) / sizeof(rows_to_check[0]); r++) {
			uint64_t row = rows_to_check[r];

			gen_weight_row(42, i, row, want);
			good &= !memcmp(f + eg[i].weight_offset + row * 256, want, 256);
			gen_scale_row(42, i, row, want);
			good &= !memcmp(f + eg[i].scale_offset + row * 8, want, 8);
		}
	}
	tap_ok(good, "rows in the file equal gen_weight_row/gen_scale_row");

	for (i = 0; i < 2; i++) {
		for (r = 0; r < 1000 * 256; r++) {
			uint8_t b = f[eg[i].weight_offset + r];

			nan += (b & 0x7f) == 0x7f;
		}
		for (r = 0; r < 1000 * 8; r++) {
			uint8_t b = f[eg[i].scale_offset + r];

			badscale += b < 112 || b > 143;
		}
	}
	tap_ok(!nan, "no F8_E4M3 NaN byte in the weights");
	tap_ok(!badscale, "every F8_E8M0 scale is an exponent in 112..143");
	st_free(st);
out_f:
	free(f);
out_plan:
	gen_plan_free(&plan);
out:
	unlink(path);
}

static void test_determinism(void)
{
	uint8_t a[256], b[256];

	gen_weight_row(7, 0, 12345, a);
	gen_weight_row(7, 0, 12345, b);
	tap_ok(!memcmp(a, b, 256), "same (seed, prefix, row): same bytes");
	gen_weight_row(8, 0, 12345, b);
	tap_ok(memcmp(a, b, 256), "another seed: other bytes");
	gen_weight_row(7, 1, 12345, b);
	tap_ok(memcmp(a, b, 256), "another prefix index: other bytes");
	gen_weight_row(7, 0, 12346, b);
	tap_ok(memcmp(a, b, 256), "another row: other bytes");
	gen_weight_row(7, 0, 12345, a);
	gen_scale_row(7, 0, 12345, b);
	tap_ok(memcmp(a, b, 8), "scale stream is not the weight stream");
}

static void test_plan_errors(void)
{
	static const char *const dup[] = { "x", "x" };
	static const char *const one[] = { "x" };
	static const char *const badmeta[] = { "novalue" };
	struct gen_params p = { .rows = 4, .prefixes = dup, .nprefixes = 2 };
	struct gen_plan plan;
	char err[256] = "";

	tap_ok(gen_plan(&p, &plan, err, sizeof(err)) == -EINVAL, "duplicate prefix refused");
	tap_contains(err, "'x.weight' would appear twice", "  ...with the right message");
	p.prefixes = one;
	p.nprefixes = 1;
	p.rows = 0;
	tap_ok(gen_plan(&p, &plan, err, sizeof(err)) == -EINVAL, "zero rows refused");
	p.rows = 1ULL << 60;
	tap_ok(gen_plan(&p, &plan, err, sizeof(err)) == -EOVERFLOW, "2^60 rows refused");
	tap_contains(err, "too large", "  ...with the right message");
	p.rows = 4;
	p.meta = badmeta;
	p.nmeta = 1;
	tap_ok(gen_plan(&p, &plan, err, sizeof(err)) == -EINVAL, "metadata without '=' refused");
	tap_contains(err, "not KEY=VALUE", "  ...with the right message");
}

/* The CLI on top: -j output must describe the file it wrote. */
static void test_cli(void)
{
	static const char bin[] = "../../tools/engramctl/engramctl";
	char path[4200], cmd[8600], out[4096] = "";
	struct st_file *st = NULL;
	struct st_engram eg;
	json_t *j, *t;
	uint8_t *f;
	size_t len, n;
	FILE *pp;
	int fd;

	if (access(bin, X_OK)) {
		tap_ok(1, "engramctl mktable CLI # SKIP %s not built", bin);
		return;
	}
	fd = tmpfile_in_dir(path, sizeof(path), "cli");
	if (fd < 0)
		return;
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s -j mktable '%s' --rows 3K --seed 5 --prefix a "
		 "--pad-before 1 --meta k=v --no-progress", bin, path);
	pp = popen(cmd, "r");
	n = pp ? fread(out, 1, sizeof(out) - 1, pp) : 0;
	out[n] = '\0';
	tap_ok(pp && pclose(pp) == 0, "engramctl -j mktable exits 0");
	j = json_loads(out, 0, NULL);
	t = json_array_get(json_object_get(j, "tables"), 0);
	f = read_all(path, &len);
	tap_ok(f && !st_parse(f, len, len, &st, NULL, 0) &&
	       !st_engram_lookup(st, "a", &eg, NULL, 0) && eg.rows == 3072 &&
	       json_integer_value(json_object_get(t, "weight_offset")) ==
	       (json_int_t)eg.weight_offset &&
	       json_integer_value(json_object_get(t, "scale_offset")) ==
	       (json_int_t)eg.scale_offset &&
	       json_integer_value(json_object_get(j, "file_bytes")) == (json_int_t)len,
	       "CLI JSON output matches the file it wrote");
	if (f && st) {
		uint8_t want[256];

		gen_weight_row(5, 0, 3071, want);
		tap_ok(!memcmp(f + eg.weight_offset + 3071 * 256, want, 256),
		       "CLI --seed reaches the generator");
	}
	st_free(st);
	free(f);
	json_decref(j);
	unlink(path);
}

static int write_seeds(const char *dir)
{
	static const char *const one[] = { GEN_DEFAULT_PREFIX };
	static const char *const two[] = { "a", "b.c" };
	static const char *const meta[] = { "format=pt" };
	const struct gen_params seeds[] = {
		{ .rows = 2, .prefixes = one, .nprefixes = 1 },
		{ .rows = 1, .seed = 3, .prefixes = two, .nprefixes = 2, .pad_before = 3,
		  .pad_after = 5, .meta = meta, .nmeta = 1 },
		{ .rows = 4, .prefixes = two, .nprefixes = 1, .pad_after = 1 },
	};
	struct gen_plan plan;
	char path[4200];
	size_t i;

	for (i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		snprintf(path, sizeof(path), "%s/seed%zu.safetensors", dir, i);
		if (write_file(path, &seeds[i], &plan))
			return 1;
		gen_plan_free(&plan);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = getenv("TMPDIR");

	if (argc == 3 && !strcmp(argv[1], "--write-seeds"))
		return write_seeds(argv[2]);
	snprintf(tmpdir, sizeof(tmpdir), "%s", dir && *dir ? dir : "/tmp");
	test_roundtrip();
	test_determinism();
	test_plan_errors();
	test_cli();
	return tap_done();
}
