// SPDX-License-Identifier: GPL-2.0
/*
 * The tables file: "NAME FILE TENSOR SHA256 [FIRST-LAST]" a line (the last
 * field for a shard, the rows it holds), blank lines and comments from '#'
 * to the end of a line.  Strict, because a unit loads
 * from it unattended at boot: a line that cannot be read exactly stops the
 * whole file from being used, and the message names the line.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "tablesconf.h"

static int fail(char *err, size_t len, int ret, const char *path, unsigned int line,
		const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int fail(char *err, size_t len, int ret, const char *path, unsigned int line,
		const char *fmt, ...)
{
	va_list ap;
	int n;

	n = line ? snprintf(err, len, "%s:%u: ", path, line) : snprintf(err, len, "%s: ", path);
	if (n >= 0 && (size_t)n < len) {
		va_start(ap, fmt);
		vsnprintf(err + n, len - n, fmt, ap);
		va_end(ap);
	}
	return ret;
}

/* Splits @s at blanks into at most @max fields; returns how many there were. */
static size_t split(char *s, char **f, size_t max)
{
	size_t n = 0;
	char *save = NULL, *tok;

	for (tok = strtok_r(s, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (n < max)
			f[n] = tok;
		n++;
	}
	return n;
}

static int parse_line(char *s, const char *path, unsigned int line, struct tconf_entry *e,
		      char *err, size_t len)
{
	char *f[5], why[96];
	size_t n = split(s, f, 5);
	uint64_t first = 0, rows = 0;

	if (n != 4 && n != 5)
		return fail(err, len, -EINVAL, path, line,
			    "%zu fields, want 4 or 5: NAME FILE TENSOR SHA256 (or - for no digest) [FIRST-LAST]",
			    n);
	if (n == 5 && parse_row_range(f[4], &first, &rows))
		return fail(err, len, -EINVAL, path, line,
			    "rows '%s' are not FIRST-LAST, two row numbers, FIRST <= LAST", f[4]);
	if (!valid_table_name(f[0]))
		return fail(err, len, -EINVAL, path, line,
			    "table name '%s' is not valid: 1-%d characters of A-Z a-z 0-9 . _ -",
			    f[0], ENGRAM_NAME_MAX - 1);
	if (f[1][0] != '/')
		return fail(err, len, -EINVAL, path, line,
			    "file '%s' is not an absolute path", f[1]);
	if (strlen(f[1]) >= sizeof(e->file))
		return fail(err, len, -EINVAL, path, line, "file path longer than %zu bytes",
			    sizeof(e->file) - 1);
	if (strlen(f[2]) >= sizeof(e->tensor))
		return fail(err, len, -EINVAL, path, line, "tensor prefix longer than %zu bytes",
			    sizeof(e->tensor) - 1);
	memset(e, 0, sizeof(*e));
	if (strcmp(f[3], "-")) {
		if (parse_hex(f[3], e->sha256, sizeof(e->sha256), why, sizeof(why)))
			return fail(err, len, -EINVAL, path, line,
				    "SHA256 is 64 hex digits or -: %s", why);
		e->has_sha256 = 1;
	}
	strcpy(e->name, f[0]);
	strcpy(e->file, f[1]);
	strcpy(e->tensor, f[2]);
	e->held_first = first;
	e->held_rows = rows;
	e->line = line;
	return 0;
}

const struct tconf_entry *tconf_find(const struct tconf *tc, const char *name)
{
	size_t i;

	for (i = 0; i < tc->n; i++)
		if (!strcmp(tc->v[i].name, name))
			return &tc->v[i];
	return NULL;
}

void tconf_free(struct tconf *tc)
{
	free(tc->v);
	tc->v = NULL;
	tc->n = 0;
}

int tconf_parse(FILE *f, const char *path, struct tconf *tc, char *err, size_t errlen)
{
	const struct tconf_entry *dup;
	struct tconf_entry e;
	unsigned int line = 0;
	char *buf = NULL, *hash;
	size_t cap = 0;
	ssize_t len;
	int ret = 0;

	tc->v = NULL;
	tc->n = 0;
	while ((len = getline(&buf, &cap, f)) >= 0) {
		line++;
		if (len && buf[len - 1] == '\n')
			buf[--len] = '\0';
		if (len && buf[len - 1] == '\r')
			buf[--len] = '\0';
		if (len > TABLESCONF_LINE_MAX) {
			ret = fail(err, errlen, -E2BIG, path, line, "line longer than %d bytes",
				   TABLESCONF_LINE_MAX);
			goto out_free;
		}
		if (memchr(buf, '\0', len)) {
			ret = fail(err, errlen, -EINVAL, path, line, "a NUL byte in the line");
			goto out_free;
		}
		hash = strchr(buf, '#');
		if (hash)
			*hash = '\0';
		if (buf[strspn(buf, " \t")] == '\0')
			continue;
		ret = parse_line(buf, path, line, &e, err, errlen);
		if (ret)
			goto out_free;
		dup = tconf_find(tc, e.name);
		if (dup) {
			ret = fail(err, errlen, -EINVAL, path, line,
				   "table '%s' is listed already on line %u", e.name, dup->line);
			goto out_free;
		}
		if (tc->n == ENGRAM_MAX_TABLES) {
			ret = fail(err, errlen, -E2BIG, path, line, "more than %d tables",
				   ENGRAM_MAX_TABLES);
			goto out_free;
		}
		if (!tc->v) {
			tc->v = calloc(ENGRAM_MAX_TABLES, sizeof(*tc->v));
			if (!tc->v) {
				ret = fail(err, errlen, -ENOMEM, path, line, "out of memory");
				goto out_free;
			}
		}
		tc->v[tc->n++] = e;
	}
	if (ferror(f))
		ret = fail(err, errlen, -EIO, path, 0, "read error");
out_free:
	free(buf);
	if (ret)
		tconf_free(tc);
	return ret;
}
