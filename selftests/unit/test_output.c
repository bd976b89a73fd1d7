// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for engramctl's formatting and reply decoding: number and digest
 * helpers, the progress line, table and stats attributes to text and JSON,
 * and the extended-ack decoding that turns a kernel refusal into a message.
 * Netlink messages are built with libnl in memory; no socket is opened.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include "fmt.h"
#include "linkinfo.h"
#include "jsonout.h"
#include "nl.h"
#include "progress.h"
#include "statsinfo.h"
#include "tableinfo.h"
#include "tap.h"

#define FAKE_FAMILY	0x42

static void test_fmt(void)
{
	static const struct { uint64_t v; const char *s; } bytes[] = {
		{ 0, "0 B" }, { 1023, "1023 B" }, { 1024, "1.0 KiB" }, { 1536, "1.5 KiB" },
		{ 1048575, "1.0 MiB" }, { 384006168ULL * 264, "94.4 GiB" },
		{ UINT64_MAX, "16.0 EiB" },
	};
	uint8_t sha[32], back[32];
	char buf[80], err[128];
	uint64_t v;
	size_t i;
	int good = 1;

	for (i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++) {
		fmt_bytes(buf, sizeof(buf), bytes[i].v);
		if (strcmp(buf, bytes[i].s)) {
			tap_diag("fmt_bytes(%" PRIu64 ") = \"%s\", want \"%s\"", bytes[i].v, buf,
				 bytes[i].s);
			good = 0;
		}
	}
	tap_ok(good, "fmt_bytes: binary units, one decimal, no 1024.0");
	tap_ok(!strcmp(fmt_duration(buf, sizeof(buf), 41200000000ULL), "41.2 s") &&
	       !strcmp(fmt_duration(buf, sizeof(buf), 185000000000ULL), "3:05") &&
	       !strcmp(fmt_duration(buf, sizeof(buf), 3723000000000ULL), "1:02:03"),
	       "fmt_duration: seconds, m:ss, h:mm:ss");
	tap_ok(fmt_mbps(2000000, 1000000000) == 2.0 && fmt_mbps(5, 0) == 0.0,
	       "fmt_mbps: decimal MB/s, 0 without time");
	tap_ok(!strcmp(fmt_rate(buf, sizeof(buf), 2291000000ULL, 1000000000), "2291 MB/s") &&
	       !strcmp(fmt_rate(buf, sizeof(buf), 42500000, 1000000000), "42.5 MB/s"),
	       "fmt_rate: decimals only below 100 MB/s");

	for (i = 0; i < 32; i++)
		sha[i] = (uint8_t)(i * 37 + 1);
	fmt_hex(buf, sha, 32);
	tap_ok(strlen(buf) == 64 && !strncmp(buf, "01264b70", 8), "fmt_hex: lower-case, 64 digits");
	tap_ok(!parse_hex(buf, back, 32, err, sizeof(err)) && !memcmp(sha, back, 32),
	       "parse_hex round trip");
	for (i = 0; buf[i]; i++)
		if (buf[i] >= 'a')
			buf[i] -= 32;
	tap_ok(!parse_hex(buf, back, 32, err, sizeof(err)) && !memcmp(sha, back, 32),
	       "parse_hex accepts upper case");
	tap_ok(parse_hex("abc", back, 32, err, sizeof(err)) == -EINVAL, "parse_hex: short refused");
	tap_contains(err, "expected 64 hex digits, got 3", "  ...with the right message");
	buf[10] = 'g';
	tap_ok(parse_hex(buf, back, 32, err, sizeof(err)) == -EINVAL,
	       "parse_hex: bad digit refused");
	tap_contains(err, "invalid hex digit 'g' at position 11", "  ...with the right message");

	tap_ok(!parse_u64("12", &v, 0) && v == 12, "parse_u64 plain");
	tap_ok(parse_u64("-1", &v, 0) && parse_u64("1x", &v, 0) && parse_u64("", &v, 0) &&
	       parse_u64(" 1", &v, 0) && parse_u64("4K", &v, 0),
	       "parse_u64 refuses sign, garbage, empty, blanks, suffix when not asked");
	tap_ok(parse_u64("18446744073709551616", &v, 0) == -ERANGE, "parse_u64 overflow");
	{
		uint64_t first = 7, count = 7;

		tap_ok(!parse_row_range("0-59999", &first, &count) && first == 0 &&
		       count == 60000, "parse_row_range 0-59999: 60,000 rows from 0");
		tap_ok(!parse_row_range("5-5", &first, &count) && first == 5 && count == 1,
		       "parse_row_range 5-5: one row");
		tap_ok(parse_row_range("6-5", &first, &count) == -ERANGE,
		       "parse_row_range refuses LAST before FIRST");
		tap_ok(parse_row_range("5", &first, &count) == -EINVAL &&
		       parse_row_range("-5", &first, &count) == -EINVAL &&
		       parse_row_range("5-", &first, &count) == -EINVAL &&
		       parse_row_range("1-2-3", &first, &count) == -EINVAL &&
		       parse_row_range("1 - 2", &first, &count) == -EINVAL &&
		       parse_row_range("a-b", &first, &count) == -EINVAL,
		       "parse_row_range refuses one number, missing ends, blanks, three parts");
		tap_ok(parse_row_range("0-18446744073709551615", &first, &count) == -ERANGE &&
		       parse_row_range("0-18446744073709551616", &first, &count) == -ERANGE,
		       "parse_row_range refuses a count that does not fit");
		tap_ok(first == 5 && count == 1, "and leaves its results alone on refusal");
	}
	tap_ok(!parse_u64("4K", &v, 1) && v == 4096 && !parse_u64("1GiB", &v, 1) &&
	       v == 1ULL << 30 && !parse_u64("2t", &v, 1) && v == 2ULL << 40,
	       "parse_u64 binary suffixes");
	tap_ok(parse_u64("17179869184T", &v, 1) == -ERANGE && parse_u64("1Q", &v, 1) == -EINVAL,
	       "parse_u64 suffix overflow and unknown suffix");

	memset(buf, 'a', 63);
	buf[63] = '\0';
	tap_ok(valid_table_name("layers.14.engram.embed") && valid_table_name("A-b_c.9") &&
	       valid_table_name(buf), "valid table names accepted (63 bytes too)");
	buf[63] = 'a';
	buf[64] = '\0';
	tap_ok(!valid_table_name(buf) && !valid_table_name("") && !valid_table_name("a b") &&
	       !valid_table_name("a/b") && !valid_table_name("é"),
	       "invalid table names refused (64 bytes, empty, space, slash, non-ASCII)");
}

static void test_progress(void)
{
	char line[512];
	size_t n;

	n = progress_format(line, sizeof(line), 100, "loading", "t", 45ULL << 30, 100ULL << 30,
			    10000000000ULL);
	if (!tap_ok(n <= 100 && strchr(line, '[') && strstr(line, " 45.0%") &&
		    strstr(line, "45.0 GiB/100.0 GiB") && strstr(line, "4832 MB/s") &&
		    strstr(line, "ETA 12.2 s"), "progress bar line at 100 columns"))
		tap_diag("%s", line);
	n = progress_format(line, sizeof(line), 50, "loading", "t", 1, 2, 1000);
	tap_ok(n <= 60 && !strchr(line, '[') && strstr(line, "50.0%"),
	       "narrow terminal: numbers without the bar");
	progress_format(line, sizeof(line), 100, "verifying", "t", 0, 10, 0);
	tap_ok(!strstr(line, "ETA") && strstr(line, "0.0%"), "no ETA before any progress");
	progress_format_plain(line, sizeof(line), "loading", "t", 40, 100, 1000);
	if (!tap_ok(!strcmp(line, "loading t: 40% (40 B of 100 B, 40.0 MB/s)"),
		    "plain progress line"))
		tap_diag("%s", line);
}

static struct nl_msg *genl_msg(void)
{
	struct nl_msg *msg = nlmsg_alloc();

	genlmsg_put(msg, 0, 0, FAKE_FAMILY, 0, 0, ENGRAM_CMD_TABLE_GET, ENGRAM_GENL_VERSION);
	return msg;
}

static char *capture(void (*fn)(FILE *, const struct table_info *), const struct table_info *ti)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	fn(f, ti);
	fclose(f);
	return buf;
}

static void test_table_info(void)
{
	uint8_t sha[ENGRAM_SHA256_LEN];
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	struct table_info ti;
	struct nl_msg *msg;
	char *text, *js;
	json_t *j;
	int i;

	for (i = 0; i < ENGRAM_SHA256_LEN; i++)
		sha[i] = (uint8_t)(0xa0 + i);
	msg = genl_msg();
	nla_put_string(msg, ENGRAM_A_TABLE_NAME, "layers.1.engram.embed");
	nla_put_string(msg, ENGRAM_A_TABLE_PATH, "/models/ds/model-00001.safetensors");
	nla_put(msg, ENGRAM_A_TABLE_SHA256, sizeof(sha), sha);
	/* The kernel pads before u64s with nla_put_u64_64bit(..., ENGRAM_A_PAD). */
	nla_put(msg, ENGRAM_A_PAD, 0, NULL);
	nla_put_u64(msg, ENGRAM_A_TABLE_GENERATION, 7);
	nla_put_u8(msg, ENGRAM_A_TABLE_STATE, ENGRAM_TABLE_LOADING);
	nla_put_u64(msg, ENGRAM_A_TABLE_ROWS, 384006168);
	nla_put_u32(msg, ENGRAM_A_TABLE_WEIGHT_BYTES, 256);
	nla_put_u32(msg, ENGRAM_A_TABLE_SCALE_BYTES, 8);
	nla_put_u64(msg, ENGRAM_A_TABLE_FILE_BYTES, 2ULL << 30);
	nla_put_u64(msg, ENGRAM_A_TABLE_DONE_BYTES, 1ULL << 30);
	nla_put_u64(msg, ENGRAM_A_TABLE_PINNED_BYTES, 1ULL << 30);
	nla_put_u8(msg, ENGRAM_A_TABLE_VERIFY_RESULT, ENGRAM_VERIFY_NONE);
	nla_put_u64(msg, ENGRAM_A_MAX + 7, 99);	/* from a newer kernel */

	tap_ok(enl_parse(msg, tb) == 0 && table_info_from_attrs(&ti, tb) == 0,
	       "table reply parses, PAD and unknown attribute ignored");
	tap_ok(!strcmp(ti.name, "layers.1.engram.embed") && ti.rows == 384006168 &&
	       ti.generation == 7 && ti.state == ENGRAM_TABLE_LOADING &&
	       !memcmp(ti.sha256, sha, 32) && TI_HAS(&ti, ENGRAM_A_TABLE_PINNED_BYTES) &&
	       !TI_HAS(&ti, ENGRAM_A_TABLE_ERROR), "table fields decoded");
	tap_ok(table_info_progress(&ti) == 50.0, "progress 50%%");

	text = capture(table_info_print_line, &ti);
	if (!tap_ok(strstr(text, "layers.1.engram.embed: state loading 50.0% gen 7 rows 384006168 "
				 "row_bytes 264 pinned 1.0 GiB sha256 a0a1a2") &&
		    strstr(text, "path /models/ds/model-00001.safetensors\n") &&
		    !strstr(text, "verify"), "list line"))
		tap_diag("%s", text);
	free(text);
	text = capture(table_info_print_detail, &ti);
	tap_ok(strstr(text, "table layers.1.engram.embed\n") &&
	       strstr(text, "row bytes       264 (weight 256 + scale 8)") &&
	       strstr(text, "pinned          1.0 GiB (1073741824)"), "show detail block");
	free(text);

	j = table_info_json(&ti);
	js = json_dumps(j, JSON_COMPACT);
	if (!tap_ok(j && !strcmp(json_string_value(json_object_get(j, "state")), "loading") &&
		    json_integer_value(json_object_get(j, "rows")) == 384006168 &&
		    json_integer_value(json_object_get(j, "row_bytes")) == 264 &&
		    json_integer_value(json_object_get(j, "pinned_bytes")) == 1 << 30 &&
		    !strncmp(json_string_value(json_object_get(j, "sha256")), "a0a1a2a3", 8) &&
		    strlen(json_string_value(json_object_get(j, "sha256"))) == 64 &&
		    !strcmp(json_string_value(json_object_get(j, "verify_result")), "none") &&
		    !json_object_get(j, "error") && !json_object_get(j, "weight_offset"),
		    "JSON: exact integers, hex digest, only attributes present"))
		tap_diag("%s", js);
	free(js);
	json_decref(j);
	nlmsg_free(msg);

	msg = genl_msg();
	nla_put_string(msg, ENGRAM_A_TABLE_NAME, "t");
	nla_put_u8(msg, ENGRAM_A_TABLE_STATE, ENGRAM_TABLE_FAILED);
	nla_put_u32(msg, ENGRAM_A_TABLE_ERROR, EIO);
	nla_put_string(msg, ENGRAM_A_TABLE_ERROR_MSG, "read error at offset 4096");
	enl_parse(msg, tb);
	table_info_from_attrs(&ti, tb);
	text = capture(table_info_print_line, &ti);
	if (!tap_ok(!strcmp(text, "t: state failed error \"Input/output error\" "
			     "error_msg \"read error at offset 4096\"\n"), "failed table line"))
		tap_diag("%s", text);
	free(text);
	j = table_info_json(&ti);
	tap_ok(json_integer_value(json_object_get(j, "error")) == EIO &&
	       !strcmp(json_string_value(json_object_get(j, "error_msg")),
		       "read error at offset 4096"), "failed table JSON");
	json_decref(j);
	nlmsg_free(msg);

	msg = genl_msg();
	nla_put_string(msg, ENGRAM_A_TABLE_NAME, "d");
	nla_put_u8(msg, ENGRAM_A_TABLE_STATE, ENGRAM_TABLE_READY);
	nla_put_u32(msg, ENGRAM_A_TABLE_INFLIGHT, 17);
	nla_put_u8(msg, ENGRAM_A_TABLE_DRAINING, 1);
	nla_put_u64(msg, ENGRAM_A_TABLE_DRAIN_QUIET_NS, 2500000000ULL);
	tap_ok(enl_parse(msg, tb) == 0 && table_info_from_attrs(&ti, tb) == 0 &&
	       table_info_draining(&ti) && ti.inflight == 17 && ti.drain_quiet_ns == 2500000000ULL,
	       "a draining table's reply decoded");
	text = capture(table_info_print_line, &ti);
	if (!tap_ok(!strcmp(text, "d: state ready draining (quiet 2.5 s) inflight 17\n"),
		    "draining table line"))
		tap_diag("%s", text);
	free(text);
	j = table_info_json(&ti);
	tap_ok(json_is_true(json_object_get(j, "draining")) &&
	       json_integer_value(json_object_get(j, "inflight")) == 17 &&
	       json_integer_value(json_object_get(j, "drain_quiet_ms")) == 2500,
	       "draining table JSON: draining, inflight, drain_quiet_ms");
	json_decref(j);
	nlmsg_free(msg);

	msg = genl_msg();
	nla_put_string(msg, ENGRAM_A_TABLE_NAME, "t");
	nla_put_u8(msg, ENGRAM_A_TABLE_INFLIGHT, 1);
	tap_ok(enl_parse(msg, tb) == -EPROTO, "a one-byte TABLE_INFLIGHT refused by the reply policy");
	nlmsg_free(msg);

	msg = genl_msg();
	nla_put_u64(msg, ENGRAM_A_TABLE_ROWS, 1);
	enl_parse(msg, tb);
	tap_ok(table_info_from_attrs(&ti, tb) == -EPROTO, "reply without a name refused");
	nlmsg_free(msg);

	msg = genl_msg();
	nla_put_string(msg, ENGRAM_A_TABLE_NAME, "t");
	nla_put(msg, ENGRAM_A_TABLE_SHA256, 31, sha);
	tap_ok(enl_parse(msg, tb) == -EPROTO, "31-byte digest refused by the reply policy");
	nlmsg_free(msg);

	msg = genl_msg();
	nla_put(msg, ENGRAM_A_TABLE_NAME, 3, "abc");
	tap_ok(enl_parse(msg, tb) == -EPROTO, "name without NUL refused by the reply policy");
	nlmsg_free(msg);
}

static void test_stats(void)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1], *nest;
	struct stats_info si;
	struct nl_msg *msg;
	char *text = NULL;
	size_t len = 0;
	json_t *j;
	FILE *f;
	int id, n, good = 1;

	for (id = ENGRAM_STAT_TABLES; id <= ENGRAM_STAT_MAX; id++) {
		const char *n = stat_name(id);
		size_t i;

		for (i = 0; n && n[i]; i++)
			good &= (n[i] >= 'a' && n[i] <= 'z') || n[i] == '_';
		good &= !!n;
	}
	tap_ok(good && !stat_name(0) && !stat_name(ENGRAM_STAT_MAX + 1) &&
	       !strcmp(stat_name(ENGRAM_STAT_LOADS_STARTED), "loads_started") &&
	       !strcmp(stat_name(ENGRAM_STAT_VERIFY_FAILURES), "verify_failures"),
	       "every counter has its lower-case name");

	msg = genl_msg();
	nest = nla_nest_start(msg, ENGRAM_A_STATS);
	nla_put(msg, ENGRAM_STAT_PAD, 0, NULL);
	nla_put_u64(msg, ENGRAM_STAT_LOADS_STARTED, 3);
	nla_put_u64(msg, ENGRAM_STAT_PINNED_BYTES, 3ULL << 30);
	nla_put_u64(msg, ENGRAM_STAT_LOAD_NS, 90000000000ULL);
	nla_put_u64(msg, ENGRAM_STAT_MAX + 5, 5);	/* newer kernel */
	nla_put_u32(msg, ENGRAM_STAT_ROWS, 1);		/* malformed: not u64 */
	nla_nest_end(msg, nest);
	tap_ok(enl_parse(msg, tb) == 0, "stats reply parses");
	stats_info_from_nest(&si, tb[ENGRAM_A_STATS]);
	for (id = 1, n = 0; id <= ENGRAM_STAT_MAX; id++)
		n += si.present[id];
	tap_ok(n == 3 && si.present[ENGRAM_STAT_LOADS_STARTED] &&
	       si.present[ENGRAM_STAT_PINNED_BYTES] && si.present[ENGRAM_STAT_LOAD_NS] &&
	       si.v[ENGRAM_STAT_LOADS_STARTED] == 3,
	       "known counters kept; PAD, unknown and malformed skipped");
	j = json_object();
	tap_ok(!stats_info_json(&si, j) && json_object_size(j) == 3 &&
	       json_integer_value(json_object_get(j, "loads_started")) == 3 &&
	       json_integer_value(json_object_get(j, "pinned_bytes")) == 3LL << 30,
	       "stats JSON");
	json_decref(j);
	f = open_memstream(&text, &len);
	stats_info_print(f, &si, "  ");
	fclose(f);
	if (!tap_ok(strstr(text, "  pinned_bytes                     3221225472  (3.0 GiB)\n") &&
		    strstr(text, "  loads_started                             3\n") &&
		    strstr(text, "  load_ns                         90000000000  (1:30)\n"),
		    "stats text aligned, with readable units"))
		tap_diag("%s", text);
	free(text);
	nlmsg_free(msg);

	/* Every name, the longest too, leaves the values in one column. */
	memset(&si, 0, sizeof(si));
	for (id = 1; id <= ENGRAM_STAT_MAX; id++) {
		si.present[id] = 1;
		si.v[id] = 7;
	}
	f = open_memstream(&text, &len);
	stats_info_print(f, &si, "  ");
	fclose(f);
	{
		unsigned int lines = 0, aligned = 0;
		char *line, *save = NULL;

		for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			if (!strncmp(line, "  refused", 9))
				continue;	/* the folded refusals line */
			lines++;
			aligned += strlen(line) >= 45 && line[43] == ' ' && line[44] == '7' &&
				   (line[45] == '\0' || line[45] == ' ');
		}
		tap_ok(lines > 40 && aligned == lines, "every counter's value in the same column");
	}
	free(text);

	j = json_pack("[oo]", json_u64(UINT64_MAX), json_u64(5));
	tap_ok(json_is_real(json_array_get(j, 0)) &&
	       json_integer_value(json_array_get(j, 1)) == 5,
	       "json_u64 keeps magnitude above 2^63");
	json_decref(j);
}

static void test_latency(void)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1], *nest;
	struct lat_info li;
	struct nl_msg *msg;
	char *text = NULL;
	size_t len = 0;
	json_t *j;
	FILE *f;

	memset(&li, 0, sizeof(li));
	tap_ok(lat_info_percentile(&li, 0.5) == 0 && lat_info_count(&li) == 0,
	       "latency: no samples, no percentile");
	li.b[0] = 100;
	tap_ok(lat_info_percentile(&li, 0.5) == 1 && lat_info_percentile(&li, 1.0) == 2,
	       "latency: all under 2 us");
	memset(&li, 0, sizeof(li));
	li.b[10] = 1;	/* [1024, 2048) us */
	tap_ok(lat_info_percentile(&li, 0.5) == 1536 && lat_info_percentile(&li, 0.99) == 2038,
	       "latency: interpolated inside one bucket, rounded up");
	li.b[ENGRAM_LAT_BUCKETS - 1] = 1;
	tap_ok(lat_info_percentile(&li, 0.99) == 1ULL << (ENGRAM_LAT_BUCKETS - 1),
	       "latency: the open last bucket gives its lower bound");

	msg = genl_msg();
	nest = nla_nest_start(msg, ENGRAM_A_LATENCY);
	nla_put(msg, 0, 0, NULL);
	nla_put_u64(msg, 2, 5);
	nla_put_u32(msg, 3, 9);			/* malformed: not u64 */
	nla_put_u64(msg, ENGRAM_LAT_BUCKETS + 1, 4);	/* newer kernel */
	nla_put_u64(msg, 11, 1);
	nla_nest_end(msg, nest);
	tap_ok(enl_parse(msg, tb) == 0, "latency nest parses");
	lat_info_from_nest(&li, tb[ENGRAM_A_LATENCY]);
	tap_ok(li.present && li.b[1] == 5 && li.b[2] == 0 && li.b[10] == 1 &&
	       lat_info_count(&li) == 6, "latency: pad, malformed and unknown buckets skipped");
	f = open_memstream(&text, &len);
	lat_info_print(f, &li, "  ");
	fclose(f);
	if (!tap_ok(!strcmp(text, "  latency                                   6  (p50 4 us, p99 1987 us)\n"
				  "    <4us: 5  <2.0ms: 1\n"), "latency text: total, p50, p99, nonzero buckets"))
		tap_diag("%s", text);
	free(text);
	j = lat_info_json(&li);
	tap_ok(json_integer_value(json_object_get(j, "count")) == 6 &&
	       json_integer_value(json_object_get(j, "p50_us")) == 4 &&
	       json_integer_value(json_object_get(json_array_get(json_object_get(j, "buckets"), 1),
						  "lt_us")) == 4, "latency JSON");
	json_decref(j);
	memset(&li, 0, sizeof(li));
	j = lat_info_json(&li);
	tap_ok(json_integer_value(json_object_get(j, "count")) == 0 && !json_object_get(j, "p50_us"),
	       "latency JSON without samples: no percentiles");
	json_decref(j);
	nlmsg_free(msg);
}

static void test_links(void)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	struct listen_info ls;
	struct link_info lk;
	struct nl_msg *msg;
	char *text = NULL;
	size_t len = 0;
	json_t *j;
	FILE *f;

	msg = genl_msg();
	nla_put_u32(msg, ENGRAM_A_LINK_ID, 4);
	nla_put_string(msg, ENGRAM_A_URL, "rdma://192.0.2.1:18515@192.0.2.9");
	nla_put_u8(msg, ENGRAM_A_LINK_STATE, ENGRAM_LINK_DOWN);
	nla_put_u32(msg, ENGRAM_A_LINK_ERROR, ETIMEDOUT);
	nla_put_u32(msg, ENGRAM_A_LINK_MAX_ROWS, 0);
	nla_put_u64(msg, ENGRAM_A_LINK_SINCE_NS, 3723000000000ULL);
	nla_put_u64(msg, ENGRAM_A_LINK_CONNECTS, 7);
	tap_ok(enl_parse(msg, tb) == 0 && link_info_from_attrs(&lk, tb) == 0 && lk.id == 4 &&
	       lk.error == ETIMEDOUT && lk.connects == 7 && !LI_HAS(&lk, ENGRAM_A_DEVICE),
	       "link reply decoded");
	f = open_memstream(&text, &len);
	link_info_print_line(f, &lk);
	fclose(f);
	if (!tap_ok(!strcmp(text, "link 4: state down for 1:02:03 url rdma://192.0.2.1:18515@192.0.2.9 "
				  "connects 7 error \"Connection timed out\"\n"),
		    "link line: no limits before they are negotiated"))
		tap_diag("%s", text);
	free(text);
	j = link_info_json(&lk, 1);
	tap_ok(json_integer_value(json_object_get(j, "max_rows")) == 0 &&
	       !strcmp(json_string_value(json_object_get(j, "state")), "down") &&
	       !json_object_get(j, "latency") && !json_object_get(j, "tables"),
	       "link JSON: attributes as received, no latency when none was sent");
	json_decref(j);
	nlmsg_free(msg);

	/* Queues: the count, and fetches per queue with a pad and a queue past ours. */
	msg = genl_msg();
	nla_put_u32(msg, ENGRAM_A_LINK_ID, 5);
	nla_put_u8(msg, ENGRAM_A_LINK_STATE, ENGRAM_LINK_UP);
	nla_put_u32(msg, ENGRAM_A_LINK_MAX_ROWS, 65536);
	nla_put_u32(msg, ENGRAM_A_LINK_MAX_INFLIGHT, 16);
	nla_put_u32(msg, ENGRAM_A_LINK_QUEUES, 2);
	{
		struct nlattr *nest = nla_nest_start(msg, ENGRAM_A_LINK_QUEUE_FETCHES);

		nla_put_u32(msg, 0, 0);
		nla_put_u64(msg, 1, 100);
		nla_put_u64(msg, 2, 7);
		nla_put_u64(msg, 17, 9);
		nla_put_u32(msg, 3, 1);
		nla_nest_end(msg, nest);
	}
	tap_ok(enl_parse(msg, tb) == 0 && link_info_from_attrs(&lk, tb) == 0 && lk.queues == 2 &&
	       lk.nr_queue_fetches == 2 && lk.queue_fetches[0] == 100 && lk.queue_fetches[1] == 7,
	       "link queues decoded; a pad, a queue past 16 and a short value left out");
	text = NULL;
	f = open_memstream(&text, &len);
	link_info_print_line(f, &lk);
	link_info_print_detail(f, &lk);
	fclose(f);
	if (!tap_ok(strstr(text, " max_inflight 16 queues 2\n") &&
		    strstr(text, "\n  queues          2\n") &&
		    strstr(text, "\n  queue fetches   100 7\n"), "link text: queues and fetches per queue"))
		tap_diag("%s", text);
	free(text);
	j = link_info_json(&lk, 0);
	tap_ok(json_integer_value(json_object_get(j, "queues")) == 2 &&
	       json_array_size(json_object_get(j, "queue_fetches")) == 2 &&
	       json_integer_value(json_array_get(json_object_get(j, "queue_fetches"), 0)) == 100 &&
	       json_integer_value(json_array_get(json_object_get(j, "queue_fetches"), 1)) == 7,
	       "link JSON: queues and queue_fetches");
	json_decref(j);
	nlmsg_free(msg);

	msg = genl_msg();
	nla_put_string(msg, ENGRAM_A_URL, "rdma://192.0.2.1");
	enl_parse(msg, tb);
	tap_ok(link_info_from_attrs(&lk, tb) == -EPROTO, "link reply without LINK_ID refused");
	tap_ok(listen_info_from_attrs(&ls, tb) == 0 && !LI_HAS(&ls, ENGRAM_A_LISTEN_STATE),
	       "listener with only a URL decoded");
	nlmsg_free(msg);
	msg = genl_msg();
	nla_put_u8(msg, ENGRAM_A_LISTEN_STATE, ENGRAM_LISTEN_ACTIVE);
	enl_parse(msg, tb);
	tap_ok(listen_info_from_attrs(&ls, tb) == -EPROTO, "listener without URL refused");
	nlmsg_free(msg);
	msg = genl_msg();
	nla_put(msg, ENGRAM_A_URL, 3, "tcp");
	tap_ok(enl_parse(msg, tb) == -EPROTO, "URL without NUL refused by the reply policy");
	nlmsg_free(msg);
	tap_ok(!strcmp(link_state_name(ENGRAM_LINK_CONNECTING), "connecting") &&
	       !strcmp(link_state_name(99), "unknown") &&
	       !strcmp(listen_state_name(ENGRAM_LISTEN_WAITING), "waiting") &&
	       !strcmp(engram_attr_name(ENGRAM_A_CONNECTIONS), "CONNECTIONS"),
	       "state and attribute names");
	tap_ok(!strcmp(table_state_name(ENGRAM_TABLE_DRAINING), "draining") &&
	       !strcmp(table_state_name(ENGRAM_TABLE_DRAINING + 1), "unknown") &&
	       !strcmp(engram_attr_name(ENGRAM_A_TABLE_INFLIGHT), "TABLE_INFLIGHT") &&
	       !strcmp(engram_attr_name(ENGRAM_A_TABLE_DRAIN_QUIET_NS), "TABLE_DRAIN_QUIET_NS"),
	       "a catalog's draining state and the drain attributes have names");
}

static struct nl_msg *fake_load_request(uint32_t *rows_off)
{
	struct nl_msg *req = genl_msg();

	nla_put_string(req, ENGRAM_A_TABLE_NAME, "t");
	nla_put_u32(req, ENGRAM_A_TABLE_FD, 3);
	*rows_off = nlmsg_hdr(req)->nlmsg_len;
	nla_put_u64(req, ENGRAM_A_TABLE_ROWS, 12);
	nla_put_u32(req, ENGRAM_A_TABLE_WEIGHT_BYTES, 256);
	return req;
}

/* An NLMSG_ERROR as the kernel builds it, capped or with the request echoed. */
static struct nl_msg *fake_error(struct nl_msg *req, int capped, uint32_t off, int miss)
{
	struct nl_msg *m = nlmsg_alloc_simple(NLMSG_ERROR,
					      NLM_F_ACK_TLVS | (capped ? NLM_F_CAPPED : 0));
	int error = -EINVAL;

	nlmsg_append(m, &error, sizeof(error), 0);
	if (capped)
		nlmsg_append(m, nlmsg_hdr(req), NLMSG_HDRLEN, NLMSG_ALIGNTO);
	else
		nlmsg_append(m, nlmsg_hdr(req), nlmsg_hdr(req)->nlmsg_len, NLMSG_ALIGNTO);
	nla_put_string(m, NLMSGERR_ATTR_MSG, "rows do not fit the file");
	if (off)
		nla_put_u32(m, NLMSGERR_ATTR_OFFS, off);
	if (miss)
		nla_put_u32(m, NLMSGERR_ATTR_MISS_TYPE, miss);
	return m;
}

static void test_extack(void)
{
	struct enl nl = { .bad_attr = -1, .miss_attr = -1 };
	struct nl_msg *req, *err;
	char out[512] = "";
	uint32_t off;
	FILE *tmp;
	int saved;
	size_t n;

	req = fake_load_request(&off);
	err = fake_error(req, 1, off, 0);
	enl_ack_tlvs(&nl, req, nlmsg_hdr(err));
	tap_ok(!strcmp(nl.extack, "rows do not fit the file") &&
	       nl.bad_attr == ENGRAM_A_TABLE_ROWS, "capped ack: message and offending attribute");
	nlmsg_free(err);

	memset(&nl, 0, sizeof(nl));
	nl.bad_attr = -1;
	nl.miss_attr = -1;
	err = fake_error(req, 0, off, ENGRAM_A_TABLE_SCALE_BYTES);
	enl_ack_tlvs(&nl, req, nlmsg_hdr(err));
	tap_ok(!strcmp(nl.extack, "rows do not fit the file") &&
	       nl.bad_attr == ENGRAM_A_TABLE_ROWS && nl.miss_attr == ENGRAM_A_TABLE_SCALE_BYTES,
	       "uncapped ack (request echoed): message, attribute, missing attribute");

	tmp = tmpfile();
	fflush(stderr);
	saved = dup(2);
	dup2(fileno(tmp), 2);
	enl_perror(&nl, -EINVAL, "load %s", "t");
	enl_perror(NULL, EPERM, "unload t");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, sizeof(out) - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	if (!tap_ok(!strcmp(out, "engramctl: load t: Invalid argument: rows do not fit the file "
			    "(attribute TABLE_ROWS) (missing attribute TABLE_SCALE_BYTES)\n"
			    "engramctl: unload t: Operation not permitted (needs CAP_NET_ADMIN)\n"),
		    "error lines: what, strerror, CAP_NET_ADMIN hint, extack, attribute"))
		tap_diag("%s", out);
	nlmsg_free(err);

	memset(&nl, 0, sizeof(nl));
	err = nlmsg_alloc_simple(NLMSG_ERROR, NLM_F_ACK_TLVS | NLM_F_CAPPED);
	{
		int error = -EPERM;

		nlmsg_append(err, &error, sizeof(error), 0);
	}
	enl_ack_tlvs(&nl, req, nlmsg_hdr(err));
	tap_ok(!nl.extack[0], "truncated error message: nothing read past its end");
	nlmsg_free(err);
	nlmsg_free(req);
}

int main(void)
{
	test_fmt();
	test_progress();
	test_table_info();
	test_stats();
	test_latency();
	test_links();
	test_extack();
	return tap_done();
}
