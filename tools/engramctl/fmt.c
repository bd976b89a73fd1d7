// SPDX-License-Identifier: GPL-2.0
/* Number, size and digest formatting and parsing shared by every command. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/engram_rdma.h>

#include "fmt.h"

char *fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", bytes);
		return buf;
	}
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	/* Avoid "1024.0 MiB" from rounding just below a unit boundary. */
	if (v >= 1023.95 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

char *fmt_duration(char *buf, size_t len, uint64_t ns)
{
	uint64_t s = ns / 1000000000ULL;

	if (s < 60)
		snprintf(buf, len, "%.1f s", (double)ns / 1e9);
	else if (s < 3600)
		snprintf(buf, len, "%" PRIu64 ":%02" PRIu64, s / 60, s % 60);
	else
		snprintf(buf, len, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64,
			 s / 3600, s / 60 % 60, s % 60);
	return buf;
}

char *fmt_hex(char *buf, const uint8_t *data, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		buf[2 * i] = digits[data[i] >> 4];
		buf[2 * i + 1] = digits[data[i] & 15];
	}
	buf[2 * n] = '\0';
	return buf;
}

double fmt_mbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes * 1e3 / (double)ns : 0.0;
}

char *fmt_rate(char *buf, size_t len, uint64_t bytes, uint64_t ns)
{
	double r = fmt_mbps(bytes, ns);

	snprintf(buf, len, r < 99.95 ? "%.1f MB/s" : "%.0f MB/s", r);
	return buf;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int parse_hex(const char *s, uint8_t *out, size_t n, char *err, size_t errlen)
{
	size_t len = strlen(s), i;

	for (i = 0; i < len; i++) {
		if (hexval(s[i]) < 0) {
			snprintf(err, errlen, "invalid hex digit '%c' at position %zu",
				 isprint((unsigned char)s[i]) ? s[i] : '?', i + 1);
			return -EINVAL;
		}
	}
	if (len != 2 * n) {
		snprintf(err, errlen, "expected %zu hex digits, got %zu", 2 * n, len);
		return -EINVAL;
	}
	for (i = 0; i < n; i++)
		out[i] = (uint8_t)(hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]));
	return 0;
}

int parse_row_range(const char *s, uint64_t *first, uint64_t *count)
{
	const char *dash = strchr(s, '-');
	uint64_t a, b;
	char head[24];
	int ret;

	if (!dash || (size_t)(dash - s) >= sizeof(head))
		return -EINVAL;
	memcpy(head, s, dash - s);
	head[dash - s] = '\0';
	ret = parse_u64(head, &a, 0);
	if (!ret)
		ret = parse_u64(dash + 1, &b, 0);
	if (ret)
		return ret;
	if (b < a || b == UINT64_MAX)
		return -ERANGE;
	*first = a;
	*count = b - a + 1;
	return 0;
}

int parse_u64(const char *s, uint64_t *out, int suffix)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -errno;
	if (suffix && *end) {
		const char *units = "kmgt", *u = strchr(units, tolower((unsigned char)*end));

		if (!*end || !u)
			return -EINVAL;
		shift = 10 * (unsigned int)(u - units + 1);
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
		if (v > (UINT64_MAX >> shift))
			return -ERANGE;
		v <<= shift;
	}
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int valid_table_name(const char *name)
{
	size_t len = strlen(name), i;

	if (!len || len >= ENGRAM_NAME_MAX)
		return 0;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return 0;
	return 1;
}
