// SPDX-License-Identifier: GPL-2.0
/*
 * The splitter behind listen=, remote= and allow=.  Each entry is handed to
 * the caller's parser as it is found; the messages name the entry by its
 * position (1-based, as a person counts) because the text of an empty or
 * excess entry says nothing, and a module parameter has no other place to
 * point at.
 */
#ifdef ENGRAM_USERSPACE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#else
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/string.h>
#endif

#include "list.h"

#define list_err(err, errlen, ...) snprintf(err, errlen, __VA_ARGS__)

/* Entry @i (0-based) of @s, which has more than @i entries. */
static const char *engram_list_entry(const char *s, unsigned int i, size_t *len)
{
	while (i--)
		s = strchr(s, ',') + 1;
	*len = strcspn(s, ",");
	return s;
}

/**
 * engram_list_parse() - parse a comma-separated list
 * @s: NUL-terminated list; NULL or "" is an empty list
 * @ops: what an entry is
 * @ctx: passed to @ops->parse as it is
 * @items: array of @max entries of @ops->size bytes for the results
 * @max: its capacity
 * @count: entries parsed, on success; 0 on failure
 * @err: reason on failure, naming the entry
 * @errlen: size of @err
 *
 * Entries are parsed in order and the first bad one ends the parse: an empty
 * entry ("entry N is empty", which a leading, trailing or doubled comma
 * makes), an entry past @max ("more than MAX entries"), one @ops->parse
 * refuses ("entry N: WHY" or "entry N 'TEXT': WHY") or one @ops->equal finds
 * earlier in the list ("entry N 'TEXT' duplicates entry M", followed by
 * " 'TEXT'" of entry M with @ops->quote_first).
 *
 * Return: 0, the negative errno @ops->parse returned, or -EINVAL.
 */
int engram_list_parse(const char *s, const struct engram_list_ops *ops,
		      const void *ctx, void *items, unsigned int max,
		      unsigned int *count, char *err, size_t errlen)
{
	char why[160], *item;
	unsigned int n = 0, i;
	const char *p = s, *comma, *first;
	size_t len, first_len;
	int ret;

	*count = 0;
	if (!s || !*s)
		return 0;
	for (;;) {
		comma = strchr(p, ',');
		len = comma ? (size_t)(comma - p) : strlen(p);
		if (!len) {
			list_err(err, errlen, "entry %u is empty", n + 1);
			return -EINVAL;
		}
		if (n == max) {
			list_err(err, errlen, "more than %u entries", max);
			return -EINVAL;
		}
		item = (char *)items + (size_t)n * ops->size;
		ret = ops->parse(ctx, p, len, item, why, sizeof(why));
		if (ret) {
			if (ops->quote_refused)
				list_err(err, errlen, "entry %u '%.*s': %s", n + 1,
					 (int)(len < ENGRAM_LIST_QUOTE_MAX ?
					       len : ENGRAM_LIST_QUOTE_MAX), p, why);
			else
				list_err(err, errlen, "entry %u: %s", n + 1, why);
			return ret;
		}
		for (i = 0; i < n; i++) {
			if (!ops->equal((char *)items + (size_t)i * ops->size, item))
				continue;
			/* Both texts passed @ops->parse, which bounds their length. */
			if (ops->quote_first) {
				first = engram_list_entry(s, i, &first_len);
				list_err(err, errlen,
					 "entry %u '%.*s' duplicates entry %u '%.*s'",
					 n + 1, (int)len, p, i + 1, (int)first_len, first);
			} else {
				list_err(err, errlen, "entry %u '%.*s' duplicates entry %u",
					 n + 1, (int)len, p, i + 1);
			}
			return -EINVAL;
		}
		n++;
		if (!comma)
			break;
		p = comma + 1;
	}
	*count = n;
	return 0;
}
