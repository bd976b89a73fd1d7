/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Comma-separated lists of entries (listen=, remote=, allow=): one splitter
 * for every kind of entry, so that they all refuse empty, excess and
 * duplicate entries the same way and with the same words.  Pure logic with
 * no kernel state, so the same file builds in userspace (ENGRAM_USERSPACE)
 * where it is unit-tested and fuzzed.
 */
#ifndef _ENGRAM_LIST_H
#define _ENGRAM_LIST_H

#include "userspace.h"

/* A refused entry is quoted up to this many bytes: it may be any garbage. */
#define ENGRAM_LIST_QUOTE_MAX	64

/**
 * struct engram_list_ops - one kind of list entry
 * @size: bytes of one parsed entry in the caller's array
 * @parse: parses the @len bytes at @s (not NUL-terminated, never empty)
 *	into @item, with @ctx as given to engram_list_parse(); returns 0, or
 *	a negative errno with the reason in @why
 * @equal: do two parsed entries mean the same thing?  A list holding the
 *	same entry twice is refused.
 * @quote_refused: prefix the reason @parse gave with the entry's text; leave
 *	it false when every reason quotes the text already
 * @quote_first: quote the earlier entry too when refusing a duplicate, for
 *	entries where two different texts can mean the same thing
 */
struct engram_list_ops {
	size_t size;
	int (*parse)(const void *ctx, const char *s, size_t len, void *item,
		     char *why, size_t whylen);
	bool (*equal)(const void *a, const void *b);
	bool quote_refused;
	bool quote_first;
};

int engram_list_parse(const char *s, const struct engram_list_ops *ops,
		      const void *ctx, void *items, unsigned int max,
		      unsigned int *count, char *err, size_t errlen);

#endif /* _ENGRAM_LIST_H */
