/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the userspace test programs, selftests/guest/fetch_check
 * and selftests/bench/engram_bench.  Only what both do the same way is here:
 * their option parsers, error names and percentiles differ on purpose.
 *
 * The helpers that run between two clock readings of engram_bench, or
 * once per row it checks, are static inline, so that moving them here did
 * not add a call to what the benchmark measures.
 */
#ifndef ENGRAM_TEST_UTIL_H
#define ENGRAM_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "libengram.h"

/* The finalizer of splitmix64. */
static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* splitmix64: the same seed draws the same rows in every run and program. */
static inline uint64_t rnd(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ULL;
	return mix64(*s);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * A fetched row @got against the file's: its LIBENGRAM_WEIGHT_BYTES weights
 * @w, then its LIBENGRAM_SCALE_BYTES scales @s (apart in the file, side by
 * side in a row).  Returns the first byte of the row that differs, or
 * LIBENGRAM_ROW_BYTES when none does.
 */
static inline size_t row_mismatch(const uint8_t *got, const uint8_t *w, const uint8_t *s)
{
	size_t b;

	if (!memcmp(got, w, LIBENGRAM_WEIGHT_BYTES) &&
	    !memcmp(got + LIBENGRAM_WEIGHT_BYTES, s, LIBENGRAM_SCALE_BYTES))
		return LIBENGRAM_ROW_BYTES;
	for (b = 0; b < LIBENGRAM_WEIGHT_BYTES && got[b] == w[b]; b++)
		;
	if (b == LIBENGRAM_WEIGHT_BYTES)
		for (; b < LIBENGRAM_ROW_BYTES && got[b] == s[b - LIBENGRAM_WEIGHT_BYTES]; b++)
			;
	return b;
}

int cmp_u64(const void *a, const void *b);

__attribute__((format(printf, 5, 0)))
void vdiag(const char *prog, int *count, int max, unsigned int procno, const char *fmt,
	   va_list ap);

#endif /* ENGRAM_TEST_UTIL_H */
