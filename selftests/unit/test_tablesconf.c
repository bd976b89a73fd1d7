// SPDX-License-Identifier: GPL-2.0
/*
 * The tables file parser (tools/engramctl/tablesconf.c): what a valid file
 * gives, and every malformed line refused with its line number and reason,
 * leaving nothing parsed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tablesconf.h"
#include "tap.h"

static const char SHA[] = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";

/* Parses @text; returns the result, with @tc and @err filled. */
static int parse(const char *text, size_t len, struct tconf *tc, char *err, size_t errlen)
{
	FILE *f = fmemopen((void *)text, len, "r");
	int ret;

	err[0] = '\0';
	ret = tconf_parse(f, "tables.conf", tc, err, errlen);
	fclose(f);
	return ret;
}

static void refused(const char *text, int want, const char *msg, const char *what)
{
	struct tconf tc;
	char err[512];
	int ret = parse(text, strlen(text), &tc, err, sizeof(err));

	if (!tap_ok(ret == want && tc.n == 0 && !tc.v && strstr(err, msg), "%s", what))
		tap_diag("ret %d, n %zu, err '%s', want %d '%s'", ret, tc.n, err, want, msg);
}

static void test_valid(void)
{
	char text[1024], err[512];
	struct tconf tc;
	int ret;

	snprintf(text, sizeof(text),
		 "# Engram tables of this host\n"
		 "\n"
		 "   \t  \n"
		 "layers.1.engram.embed /models/a.safetensors layers.1.engram.embed %s\n"
		 "\tl2\t/models/b c.d -   # no digest: computed, not compared\r\n"
		 "l3 /m/c x - 60000-119999", SHA);
	ret = parse(text, strlen(text), &tc, err, sizeof(err));
	if (!tap_ok(ret == 0 && tc.n == 3,
		    "a file of three tables, comments and blank lines: 3 entries"))
		tap_diag("ret %d n %zu err %s", ret, tc.n, err);
	if (tc.n != 3)
		return;
	tap_ok(!strcmp(tc.v[0].name, "layers.1.engram.embed") &&
	       !strcmp(tc.v[0].file, "/models/a.safetensors") &&
	       !strcmp(tc.v[0].tensor, "layers.1.engram.embed") && tc.v[0].has_sha256 &&
	       tc.v[0].sha256[0] == 0x00 && tc.v[0].sha256[31] == 0xff && tc.v[0].line == 4,
	       "first entry: name, file, tensor, digest (either case), line 4");
	tap_ok(!strcmp(tc.v[1].name, "l2") && !strcmp(tc.v[1].tensor, "c.d") &&
	       !tc.v[1].has_sha256 && tc.v[1].line == 5,
	       "tabs, a trailing comment and CRLF; '-' is no digest");
	tap_ok(!strcmp(tc.v[2].tensor, "x") && tc.v[2].line == 6, "a last line without newline");
	tap_ok(!tc.v[0].held_rows && !tc.v[1].held_first && !tc.v[1].held_rows,
	       "without a fifth field: the whole table");
	tap_ok(tc.v[2].held_first == 60000 && tc.v[2].held_rows == 60000,
	       "a fifth field: the shard's rows, FIRST-LAST inclusive");
	tap_ok(tconf_find(&tc, "l2") == &tc.v[1] && !tconf_find(&tc, "l4"), "tconf_find");
	tconf_free(&tc);
	tap_ok(!tc.v && !tc.n, "tconf_free empties it");

	ret = parse("", 0, &tc, err, sizeof(err));
	tap_ok(ret == 0 && tc.n == 0, "an empty file lists no table");
	ret = parse("# only\n#comments\n", 17, &tc, err, sizeof(err));
	tap_ok(ret == 0 && tc.n == 0, "a file of comments lists no table");
}

static void test_refused(void)
{
	char text[12000], err[64];
	struct tconf tc;
	size_t i;
	int ret;

	refused("a /f t\n", -EINVAL, "tables.conf:1: 3 fields, want 4", "three fields");
	refused("\n\na /f t - x y\n", -EINVAL, "tables.conf:3: 6 fields, want 4 or 5",
		"six fields, with the line number");
	refused("a /f t - x\n", -EINVAL, ":1: rows 'x' are not FIRST-LAST",
		"a fifth field that is not a row range");
	refused("a /f t - 9-3\n", -EINVAL, "rows '9-3' are not FIRST-LAST", "a reversed row range");
	refused("a /f t - 3-\n", -EINVAL, "rows '3-' are not FIRST-LAST", "a row range without its end");
	refused("a# /f t -\n", -EINVAL, ":1: 1 fields", "a comment cuts the line where it starts");
	refused("bad/name /f t -\n", -EINVAL, "table name 'bad/name' is not valid",
		"a name with a slash");
	snprintf(text, sizeof(text), "%065d /f t -\n", 1);
	refused(text, -EINVAL, "is not valid: 1-63 characters", "a 65-character name");
	refused("a f t -\n", -EINVAL, "file 'f' is not an absolute path", "a relative path");
	refused("a ./f t -\n", -EINVAL, "not an absolute path", "a ./ path");
	refused("a /f t 0011\n", -EINVAL, "SHA256 is 64 hex digits or -: expected 64 hex digits, got 4",
		"a short digest");
	snprintf(text, sizeof(text), "a /f t %.63sg\n", SHA);
	refused(text, -EINVAL, "invalid hex digit 'g' at position 64", "a digest with a non-hex digit");
	snprintf(text, sizeof(text), "a /f t %sa\n", SHA);
	refused(text, -EINVAL, "expected 64 hex digits, got 65", "a digest one digit long");
	refused("a /f t -\nb /g u -\na /h v -\n", -EINVAL,
		":3: table 'a' is listed already on line 1", "a name listed twice");
	memset(text, 'x', sizeof(text));
	memcpy(text, "a /", 3);
	memcpy(text + 9000, " t -\n", 6);
	refused(text, -E2BIG, ":1: line longer than 8192 bytes", "a line longer than 8192 bytes");
	memset(text, 'x', 5000);
	memcpy(text, "a /", 3);
	memcpy(text + 5000, " t -\n", 6);
	refused(text, -EINVAL, "file path longer than 4095 bytes", "a path longer than ENGRAM_PATH_MAX");
	memset(text, 'y', 400);
	memcpy(text, "a /f ", 5);
	memcpy(text + 400, " -\n", 4);
	refused(text, -EINVAL, "tensor prefix longer than 255 bytes", "a tensor prefix too long");
	{
		static const char nul[] = "a /f t -\nb /g\0 u -\n";
		struct tconf t2;
		char e2[256];

		ret = parse(nul, sizeof(nul) - 1, &t2, e2, sizeof(e2));
		if (!tap_ok(ret == -EINVAL && t2.n == 0 && strstr(e2, ":2: a NUL byte in the line"),
			    "a NUL byte, after a good line: refused, nothing kept"))
			tap_diag("%d %s", ret, e2);
	}
	/* ENGRAM_MAX_TABLES lines, then one more. */
	{
		char *big = malloc(64 * (ENGRAM_MAX_TABLES + 2));
		size_t off = 0;

		for (i = 0; i <= ENGRAM_MAX_TABLES; i++)
			off += sprintf(big + off, "t%zu /f t -\n", i);
		ret = parse(big, off - strlen("t256 /f t -\n"), &tc, err, sizeof(err));
		tap_ok(ret == 0 && tc.n == ENGRAM_MAX_TABLES, "exactly %d tables are accepted",
		       ENGRAM_MAX_TABLES);
		tconf_free(&tc);
		ret = parse(big, off, &tc, err, sizeof(err));
		if (!tap_ok(ret == -E2BIG && tc.n == 0 && strstr(err, ":257: more than 256 tables"),
			    "one more is refused, naming its line"))
			tap_diag("%d %s", ret, err);
		free(big);
	}
	ret = parse("a /f t\n", 7, &tc, err, 20);
	tap_ok(ret == -EINVAL && strlen(err) == 19, "a short message buffer is cut, not overrun");
}

int main(void)
{
	test_valid();
	test_refused();
	return tap_done();
}
