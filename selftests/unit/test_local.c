// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for libengram's local fallback (tools/libengram/local.c),
 * built from its source: the settings parsers, the per-table variable
 * name, which errors fall back, the placement rule (the kernel's), and
 * rows read from a real table file written by engramctl's generator,
 * compared with the generator's own rows, with a stride, ranges, a bad
 * index (nothing written) and the identity checks (rows, SHA-256).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "gen.h"
#include "local.h"
#include "tap.h"

static void is(long got, long want, const char *what)
{
	if (!tap_ok(got == want, "%s", what))
		tap_diag("got %ld, want %ld", got, want);
}

static void test_parse(void)
{
	enum local_check c = LOCAL_CHECK_SIZE;
	char name[128];
	uint32_t ms = 0;
	bool b = false;

	is(local_parse_bool("1", &b) || !b, 0, "bool: 1 is true");
	is(local_parse_bool("No", &b) || b, 0, "bool: No is false");
	is(local_parse_bool("2", &b), -EINVAL, "bool: 2 is refused");
	is(local_parse_bool("", &b), -EINVAL, "bool: empty is refused");
	is(local_parse_ms("250", &ms) || ms != 250, 0, "ms: 250");
	is(local_parse_ms("0", &ms), -ERANGE, "ms: 0 is out of range");
	is(local_parse_ms("600001", &ms), -ERANGE, "ms: above 600000 is out of range");
	is(local_parse_ms("99999999999999999999", &ms), -ERANGE, "ms: overflow is out of range");
	is(local_parse_ms("10ms", &ms), -EINVAL, "ms: a unit is refused");
	is(local_parse_ms("-1", &ms), -EINVAL, "ms: a sign is refused");
	is(local_parse_check("sha256", &c) || c != LOCAL_CHECK_SHA256, 0, "check: sha256");
	is(local_parse_check("size", &c) || c != LOCAL_CHECK_SIZE, 0, "check: size");
	is(local_parse_check("SHA256", &c), -EINVAL, "check: other spellings are refused");
	is(local_env_name("layers.1.engram.embed", name, sizeof(name)), 0, "env name");
	tap_ok(!strcmp(name, "ENGRAM_RDMA_LOCAL_LAYERS_1_ENGRAM_EMBED"), "env name is %s", name);
	is(local_env_name("a-b_c", name, sizeof(name)) || strcmp(name, "ENGRAM_RDMA_LOCAL_A_B_C"),
	   0, "env name: '-' becomes '_'");
	is(local_env_name("bad/name", name, sizeof(name)), -EINVAL, "env name: '/' is refused");
	is(local_env_name("x", name, 10), -ENOSPC, "env name: too small a buffer");
	tap_ok(local_fallback_errno(-ETIMEDOUT) && local_fallback_errno(-ENOTCONN) &&
	       local_fallback_errno(-ESTALE) && local_fallback_errno(-ESHUTDOWN) &&
	       local_fallback_errno(-EIO), "deadline, link down, table gone, shutdown, EIO fall back");
	tap_ok(local_fallback_errno(-ENXIO), "a row no host holds falls back: the copy has it");
	tap_ok(!local_fallback_errno(-ERANGE) && !local_fallback_errno(-EINVAL) &&
	       !local_fallback_errno(-ENOSPC) && !local_fallback_errno(-E2BIG) &&
	       !local_fallback_errno(-ENOENT) && !local_fallback_errno(0),
	       "bad requests do not fall back");
	tap_ok(local_open_fallback_errno(-ENOTCONN) && local_open_fallback_errno(-ENOENT) &&
	       !local_open_fallback_errno(-EINVAL), "open falls back for no link / no table only");
}

static void test_place(void)
{
	uint8_t m[2048];
	struct local_dest d[3] = { { m, 264 }, { m + 264, 264 }, { m + 528, 1000 } };

	is(local_place_check(d, 1, 1, 264), 0, "place: one row in one exact range");
	is(local_place_check(d, 1, 2, 264), -ENOSPC, "place: two rows do not fit 264 bytes");
	is(local_place_check(d, 3, 3, 264), 0, "place: three rows over three ranges");
	d[0].len = 300;
	is(local_place_check(d, 3, 3, 264), -EINVAL, "place: a row straddling two ranges");
	d[0].len = 320;
	is(local_place_check(d, 2, 2, 320), 0, "place: a range ending in a stride gap");
	is(local_place_check(d, 1, 1, 100), -EINVAL, "place: stride below 264");
}

/*
 * How many of test_read()'s 5 rows (seed 7) are in place: at stride 300
 * from @buf, the second range (@d[1]) taking over at byte 590.
 */
static long rows_in_place(uint8_t *buf, const struct local_dest *d, const uint32_t *rows)
{
	uint8_t want[264];
	long i, ok = 0;

	for (i = 0; i < 5; i++) {
		uint64_t pos = i * 300;
		uint8_t *dst = pos < 590 ? buf + pos : d[1].addr + (pos - 590);

		gen_weight_row(7, 1, rows[i], want);
		gen_scale_row(7, 1, rows[i], want + 256);
		ok += !memcmp(dst, want, 264);
	}
	return ok;
}

static void test_read(void)
{
	const char *const prefixes[] = { "t.a", "t.b" };
	struct gen_params p = { .rows = 5000, .seed = 7, .prefixes = prefixes, .nprefixes = 2,
				.pad_before = 3 };
	char path[] = "/tmp/test_local.XXXXXX", err[256];
	uint32_t rows[] = { 4999, 0, 17, 17, 2500 }, bad = 0;
	uint8_t md[32], *buf;
	struct local_copy *lc;
	struct gen_plan plan;
	struct local_dest d[2];
	unsigned int mdlen;
	size_t i, ok;
	int fd;

	fd = mkstemp(path);
	if (!tap_ok(fd >= 0 && !gen_plan(&p, &plan, err, sizeof(err)) &&
		    !gen_write(fd, &p, &plan, err, sizeof(err)), "table file written")) {
		tap_diag("%s", err);
		return;
	}
	close(fd);
	is(local_open(path, "t.c", &lc), -EINVAL, "open: a tensor the file does not have");
	is(local_open("/nonexistent/x.safetensors", "t.a", &lc), -ENOENT, "open: no file");
	if (!tap_ok(!local_open(path, "t.b", &lc), "open: the second table of the file"))
		return;
	is((long)lc->rows, 5000, "rows from the header");
	tap_ok(lc->dio_align >= 512 && !(lc->dio_align & (lc->dio_align - 1)) &&
	       lc->dio_align <= 65536, "O_DIRECT alignment is a power of two from 512 to 64 KiB");
	tap_diag("O_DIRECT %s, alignment %u (page size %ld)",
		 lc->fd_direct >= 0 ? "open" : "refused", lc->dio_align, sysconf(_SC_PAGESIZE));
	is(local_verify(lc, LOCAL_CHECK_SIZE, 5000, NULL, NULL), 0, "size check passes");
	is(local_verify(lc, LOCAL_CHECK_SIZE, 4999, NULL, NULL), -EBADMSG, "size check fails");
	/* The digest to compare with, by the same library, from the file. */
	{
		FILE *f = fopen(path, "rb");
		EVP_MD_CTX *ctx = EVP_MD_CTX_new();
		uint8_t chunk[65536];
		size_t n;

		EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
		while (f && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
			EVP_DigestUpdate(ctx, chunk, n);
		EVP_DigestFinal_ex(ctx, md, &mdlen);
		EVP_MD_CTX_free(ctx);
		if (f)
			fclose(f);
	}
	is(local_verify(lc, LOCAL_CHECK_SHA256, 5000, md, NULL), 0, "sha256 check passes");
	md[0] ^= 1;
	is(local_verify(lc, LOCAL_CHECK_SHA256, 5000, md, NULL), -EBADMSG, "sha256 check fails");

	/* Stride 300 over two ranges, cut in a stride gap: 5 rows need 1464 bytes. */
	buf = malloc(2000);
	memset(buf, 0xc3, 2000);
	d[0].addr = buf;
	d[0].len = 600 - 10;
	d[1].addr = buf + 590 + 100;	/* a hole the fetch must not touch */
	d[1].len = 2000 - 690;
	is(local_read_rows(lc, rows, 5, d, 2, 300, &bad), 0, "read 5 rows at stride 300, 2 ranges");
	is(rows_in_place(buf, d, rows), 5, "every row is the generator's, at its place");
	ok = 1;
	for (i = 264; i < 300; i++)
		ok &= buf[i] == 0xc3;
	for (i = 590; i < 690; i++)
		ok &= buf[i] == 0xc3;
	tap_ok(ok, "stride gaps and the hole between ranges are untouched");
	/* As on a kernel with 16 KiB pages, whose file system reports no alignment. */
	lc->dio_align = 16384;
	memset(buf, 0xc3, 2000);
	is(local_read_rows(lc, rows, 5, d, 2, 300, &bad), 0, "read again with 16 KiB alignment");
	is(rows_in_place(buf, d, rows), 5, "every row is the generator's with 16 KiB alignment");
	memset(buf, 0xc3, 2000);
	rows[3] = 5000;
	is(local_read_rows(lc, rows, 5, d, 2, 300, &bad), -ERANGE, "a row out of range");
	is(bad, 3, "bad_index names it");
	for (i = 0, ok = 1; i < 2000; i++)
		ok &= buf[i] == 0xc3;
	tap_ok(ok, "nothing was written");
	free(buf);
	local_close(lc);
	gen_plan_free(&plan);
	unlink(path);
}

int main(void)
{
	test_parse();
	test_place();
	test_read();
	return tap_done();
}
