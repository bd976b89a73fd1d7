// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for kmod/list.c, the splitter under listen=, remote= and
 * allow=, built in userspace.  The entries here are decimal numbers 0-999
 * written with any number of leading zeros, so that two different texts can
 * be the same entry; test_url and test_prefix cover the real entry kinds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "tap.h"

#define MAX	4
#define GUARD	0x5a5a5a5au

struct num_ctx {
	unsigned int calls;	/* entries handed to the parser */
	unsigned int last_len;	/* length of the last one */
};

static int num_parse(const void *ctx, const char *s, size_t len, void *item,
		     char *why, size_t whylen)
{
	struct num_ctx *c = (struct num_ctx *)ctx;
	unsigned int v = 0;
	size_t i;

	c->calls++;
	c->last_len = len;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9') {
			snprintf(why, whylen, "not a decimal number");
			return -EINVAL;
		}
		v = v * 10 + (s[i] - '0');
		if (v > 999) {
			snprintf(why, whylen, "above 999");
			return -ERANGE;
		}
	}
	*(unsigned int *)item = v;
	return 0;
}

static bool num_equal(const void *a, const void *b)
{
	return *(const unsigned int *)a == *(const unsigned int *)b;
}

static const struct engram_list_ops plain = {
	.size = sizeof(unsigned int),
	.parse = num_parse,
	.equal = num_equal,
};

static const struct engram_list_ops quoting = {
	.size = sizeof(unsigned int),
	.parse = num_parse,
	.equal = num_equal,
	.quote_refused = true,
	.quote_first = true,
};

/* One array of MAX entries and a guard after it that must never change. */
struct items {
	unsigned int v[MAX];
	unsigned int guard;
};

static struct items it;
static struct num_ctx ctx;
static char err[256];
static unsigned int count;

static int run(const struct engram_list_ops *ops, const char *s, unsigned int max)
{
	memset(&it, 0, sizeof(it));
	it.guard = GUARD;
	memset(&ctx, 0, sizeof(ctx));
	memset(err, 0, sizeof(err));
	count = 99;
	return engram_list_parse(s, ops, &ctx, it.v, max, &count, err, sizeof(err));
}

static void expect_ok(const struct engram_list_ops *ops, const char *s, unsigned int max,
		      unsigned int want_n, const unsigned int *want)
{
	int ret = run(ops, s, max), ok;

	ok = !ret && count == want_n && it.guard == GUARD &&
	     (!want_n || !memcmp(it.v, want, want_n * sizeof(*want)));
	if (!tap_ok(ok, "'%s' (max %u): %u entries", s ? s : "(null)", max, want_n))
		tap_diag("returned %d, %u entries, guard %#x: %s", ret, count, it.guard, err);
}

/* Refused with @want_ret, @count 0 and exactly the message @want. */
static void expect_err(const struct engram_list_ops *ops, const char *s, unsigned int max,
		       int want_ret, const char *want)
{
	int ret = run(ops, s, max);

	if (!tap_ok(ret == want_ret && count == 0 && !strcmp(err, want) && it.guard == GUARD,
		    "'%s' (max %u%s): \"%s\"", s, max, ops->quote_first ? ", quoting" : "", want))
		tap_diag("returned %d (wanted %d), count %u, guard %#x, message \"%s\"",
			 ret, want_ret, count, it.guard, err);
}

static void test_empty(void)
{
	expect_ok(&plain, NULL, MAX, 0, NULL);
	tap_ok(ctx.calls == 0, "  ... NULL is parsed without a call");
	expect_ok(&plain, "", MAX, 0, NULL);
	tap_ok(ctx.calls == 0, "  ... \"\" is parsed without a call");
	expect_ok(&plain, "", 0, 0, NULL);
}

static void test_split(void)
{
	static const unsigned int w[] = { 7, 0, 42, 999 };

	expect_ok(&plain, "7", MAX, 1, w);
	expect_ok(&plain, "7,0,42", MAX, 3, w);
	tap_ok(ctx.calls == 3 && ctx.last_len == 2, "  ... one call per entry, without the comma");
	expect_ok(&plain, "7,000,42,999", MAX, 4, w);
	expect_ok(&quoting, "7,0,42,999", MAX, 4, w);
	/* Spaces are the parser's business, not the splitter's. */
	expect_err(&plain, "7, 8", MAX, -EINVAL, "entry 2: not a decimal number");
}

static void test_empty_entries(void)
{
	expect_err(&plain, "1,2,", MAX, -EINVAL, "entry 3 is empty");
	expect_err(&plain, ",1", MAX, -EINVAL, "entry 1 is empty");
	tap_ok(ctx.calls == 0, "  ... a leading comma stops before any entry is parsed");
	expect_err(&plain, ",,", MAX, -EINVAL, "entry 1 is empty");
	expect_err(&plain, ",", MAX, -EINVAL, "entry 1 is empty");
	expect_err(&plain, "1,,2", MAX, -EINVAL, "entry 2 is empty");
	expect_err(&quoting, "1,,2", MAX, -EINVAL, "entry 2 is empty");
	/* An empty entry is reported even where the list is already full. */
	expect_err(&plain, "1,2,3,4,", MAX, -EINVAL, "entry 5 is empty");
}

static void test_max(void)
{
	static const unsigned int w[] = { 1, 2, 3, 4 };

	expect_ok(&plain, "1,2,3,4", MAX, MAX, w);
	expect_err(&plain, "1,2,3,4,5", MAX, -EINVAL, "more than 4 entries");
	tap_ok(ctx.calls == MAX, "  ... the entry past the end is not parsed");
	expect_err(&plain, "1,2,3,4,bad", MAX, -EINVAL, "more than 4 entries");
	expect_err(&plain, "1,2,3", 2, -EINVAL, "more than 2 entries");
	tap_ok(it.v[2] == 0, "  ... nor written");
	expect_err(&plain, "1", 0, -EINVAL, "more than 0 entries");
}

static void test_duplicates(void)
{
	static const unsigned int w[] = { 1, 10, 100 };

	expect_err(&plain, "1,1", MAX, -EINVAL, "entry 2 '1' duplicates entry 1");
	expect_err(&plain, "1,2,01", MAX, -EINVAL, "entry 3 '01' duplicates entry 1");
	expect_err(&quoting, "1,2,01", MAX, -EINVAL, "entry 3 '01' duplicates entry 1 '1'");
	expect_err(&quoting, "5,006,7,6", MAX, -EINVAL, "entry 4 '6' duplicates entry 2 '006'");
	/* The first entry it repeats is the one named. */
	expect_err(&quoting, "3,4,3,03", MAX, -EINVAL, "entry 3 '3' duplicates entry 1 '3'");
	expect_ok(&quoting, "1,10,100", MAX, 3, w);
}

static void test_refused(void)
{
	char list[200], want[200];

	expect_err(&plain, "1,x2,3", MAX, -EINVAL, "entry 2: not a decimal number");
	tap_ok(ctx.calls == 2, "  ... and the entries after it are not parsed");
	expect_err(&quoting, "1,x2,3", MAX, -EINVAL, "entry 2 'x2': not a decimal number");
	/* The parser's errno is returned as it is. */
	expect_err(&plain, "1,1000", MAX, -ERANGE, "entry 2: above 999");
	expect_err(&quoting, "1000", MAX, -ERANGE, "entry 1 '1000': above 999");

	/* A long refused entry is quoted to ENGRAM_LIST_QUOTE_MAX bytes. */
	memset(list, 'x', 100);
	list[100] = '\0';
	snprintf(want, sizeof(want), "entry 1 '%.*s': not a decimal number",
		 ENGRAM_LIST_QUOTE_MAX, list);
	expect_err(&quoting, list, MAX, -EINVAL, want);
}

static void test_small_buffer(void)
{
	char small[12];
	unsigned int n = 99;
	int ret;

	memset(small, '#', sizeof(small));
	ret = engram_list_parse("1,2,01", &quoting, &ctx, it.v, MAX, &n, small, 8);
	tap_ok(ret == -EINVAL && n == 0 && !strcmp(small, "entry 3") && small[8] == '#',
	       "a short message buffer is cut, terminated and not overrun");
}

int main(void)
{
	test_empty();
	test_split();
	test_empty_entries();
	test_max();
	test_duplicates();
	test_refused();
	test_small_buffer();
	return tap_done();
}
