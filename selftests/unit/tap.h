/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Minimal TAP producer for the unit tests: "ok N - what" / "not ok N - what",
 * "# ..." diagnostics, the plan at the end, exit status 1 on any failure.
 */
#ifndef ENGRAM_TAP_H
#define ENGRAM_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_count, tap_failed;

__attribute__((format(printf, 2, 3)))
static inline int tap_ok(int pass, const char *fmt, ...)
{
	va_list ap;

	tap_count++;
	if (!pass)
		tap_failed++;
	printf("%sok %d - ", pass ? "" : "not ", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	return pass;
}

/* Every line of the message gets its "# ", so multi-line output stays valid TAP. */
__attribute__((format(printf, 1, 2)))
static inline void tap_diag(const char *fmt, ...)
{
	char buf[4096], *line, *save = NULL;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		printf("# %s\n", line);
}

/* Passes when @haystack contains @needle; says what it got when it does not. */
static inline int tap_contains(const char *haystack, const char *needle, const char *what)
{
	int pass = haystack && strstr(haystack, needle);

	tap_ok(pass, "%s", what);
	if (!pass)
		tap_diag("expected \"%s\" in \"%s\"", needle, haystack ? haystack : "(null)");
	return pass;
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_count);
	if (tap_failed)
		tap_diag("%d of %d failed", tap_failed, tap_count);
	return tap_failed ? 1 : 0;
}

#endif /* ENGRAM_TAP_H */
