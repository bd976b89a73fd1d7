/* SPDX-License-Identifier: GPL-2.0 */
/* Number, size and digest formatting and parsing shared by every command. */
#ifndef ENGRAMCTL_FMT_H
#define ENGRAMCTL_FMT_H

#include <stddef.h>
#include <stdint.h>

/* "94.4 GiB", "512 B": binary units, one decimal above KiB. */
char *fmt_bytes(char *buf, size_t len, uint64_t bytes);
/* "41.2 s", "3:05", "1:02:03" */
char *fmt_duration(char *buf, size_t len, uint64_t ns);
/* Lower-case hex of @n bytes; @buf needs 2 * n + 1 bytes. */
char *fmt_hex(char *buf, const uint8_t *data, size_t n);
/* Decimal MB/s (10^6 bytes per second) over @ns; 0 when no time has passed. */
double fmt_mbps(uint64_t bytes, uint64_t ns);
/* "2291 MB/s", "42.5 MB/s": a decimal only where it carries information. */
char *fmt_rate(char *buf, size_t len, uint64_t bytes, uint64_t ns);

/* Exactly 2 * n hex digits into @out; on failure -EINVAL and a message. */
int parse_hex(const char *s, uint8_t *out, size_t n, char *err, size_t errlen);
/*
 * Plain decimal, no sign, no trailing garbage; an optional K/M/G/T (binary)
 * suffix when @suffix is set.
 */
int parse_u64(const char *s, uint64_t *out, int suffix);
/*
 * "FIRST-LAST", both rows included, FIRST <= LAST: *first and *count.
 * -EINVAL (not that form) or -ERANGE (LAST before FIRST, or overflow).
 */
int parse_row_range(const char *s, uint64_t *first, uint64_t *count);
/* 1..ENGRAM_NAME_MAX-1 bytes of [A-Za-z0-9._-]. */
int valid_table_name(const char *name);

#endif /* ENGRAMCTL_FMT_H */
