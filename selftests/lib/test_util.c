// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers shared by the userspace test programs; see test_util.h.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "test_util.h"

/**
 * cmp_u64() - qsort() comparator for uint64_t, ascending
 * @a: one sample
 * @b: the other
 *
 * Compares rather than subtracts: a difference of two latencies does not
 * fit an int.
 *
 * Return: -1, 0 or 1.
 */
int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/**
 * vdiag() - print one diagnostic line of a process, within its budget
 * @prog: the program's name, which starts the line
 * @count: lines the process asked for so far; incremented
 * @max: lines printed before one "suppressed" line ends them
 * @procno: the process's number, in brackets after @prog
 * @fmt: printf() format of the message, without its newline
 * @ap: its arguments
 *
 * A run that goes wrong at every fetch would otherwise bury the first,
 * telling lines under thousands of the same.
 */
void vdiag(const char *prog, int *count, int max, unsigned int procno, const char *fmt,
	   va_list ap)
{
	if ((*count)++ >= max) {
		if (*count == max + 1)
			fprintf(stderr, "%s: [%u] (more diagnostics suppressed)\n", prog, procno);
		return;
	}
	fprintf(stderr, "%s: [%u] ", prog, procno);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}
