// SPDX-License-Identifier: GPL-2.0
/*
 * One table as the kernel reports it.  Every attribute is optional on the
 * wire (SHA256 only once known, ERROR only for failed tables, and a newer
 * kernel may drop or add some), so each one is tracked as present or not and
 * only present ones are printed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include <netlink/attr.h>

#include "fmt.h"
#include "jsonout.h"
#include "tableinfo.h"

/* @present is a 64-bit mask indexed by attribute type. */
_Static_assert(ENGRAM_A_MAX < 64, "struct table_info.present needs widening");

const char *table_state_name(uint8_t state)
{
	switch (state) {
	case ENGRAM_TABLE_LOADING:	return "loading";
	case ENGRAM_TABLE_READY:	return "ready";
	case ENGRAM_TABLE_VERIFYING:	return "verifying";
	case ENGRAM_TABLE_FAILED:	return "failed";
	/* Only in a catalog (protocol version 6): served, but draining. */
	case ENGRAM_TABLE_DRAINING:	return "draining";
	default:			return "unknown";
	}
}

const char *verify_result_name(uint8_t result)
{
	switch (result) {
	case ENGRAM_VERIFY_NONE:	return "none";
	case ENGRAM_VERIFY_OK:		return "ok";
	case ENGRAM_VERIFY_MISMATCH:	return "mismatch";
	case ENGRAM_VERIFY_ERROR:	return "error";
	default:			return "unknown";
	}
}

static void get_str(char *dst, size_t len, struct nlattr *nla)
{
	/* Policy guarantees NUL termination; the copy bounds it to our buffer. */
	snprintf(dst, len, "%s", nla_get_string(nla));
}

int table_info_from_attrs(struct table_info *ti, struct nlattr **tb)
{
	int a;

	memset(ti, 0, sizeof(*ti));
	if (!tb[ENGRAM_A_TABLE_NAME])
		return -EPROTO;
	for (a = 1; a <= ENGRAM_A_MAX; a++) {
		struct nlattr *nla = tb[a];

		if (!nla)
			continue;
		ti->present |= 1ULL << a;
		switch (a) {
		case ENGRAM_A_TABLE_NAME:
			get_str(ti->name, sizeof(ti->name), nla);
			break;
		case ENGRAM_A_TABLE_PATH:
			get_str(ti->path, sizeof(ti->path), nla);
			break;
		case ENGRAM_A_TABLE_SHA256:
			memcpy(ti->sha256, nla_data(nla), ENGRAM_SHA256_LEN);
			break;
		case ENGRAM_A_TABLE_GENERATION:
			ti->generation = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_STATE:
			ti->state = nla_get_u8(nla);
			break;
		case ENGRAM_A_TABLE_ROWS:
			ti->rows = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_HELD_FIRST:
			ti->held_first = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_HELD_ROWS:
			ti->held_rows = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_WEIGHT_BYTES:
			ti->weight_bytes = nla_get_u32(nla);
			break;
		case ENGRAM_A_TABLE_SCALE_BYTES:
			ti->scale_bytes = nla_get_u32(nla);
			break;
		case ENGRAM_A_TABLE_WEIGHT_OFFSET:
			ti->weight_offset = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_SCALE_OFFSET:
			ti->scale_offset = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_FILE_BYTES:
			ti->file_bytes = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_DONE_BYTES:
			ti->done_bytes = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_PINNED_BYTES:
			ti->pinned_bytes = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_META_BYTES:
			ti->meta_bytes = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_ELAPSED_NS:
			ti->elapsed_ns = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_VERIFY_RESULT:
			ti->verify_result = nla_get_u8(nla);
			break;
		case ENGRAM_A_TABLE_INFLIGHT:
			ti->inflight = nla_get_u32(nla);
			break;
		case ENGRAM_A_TABLE_DRAINING:
			ti->draining = nla_get_u8(nla);
			break;
		case ENGRAM_A_TABLE_DRAIN_QUIET_NS:
			ti->drain_quiet_ns = nla_get_u64(nla);
			break;
		case ENGRAM_A_TABLE_ERROR:
			ti->error = nla_get_u32(nla);
			break;
		case ENGRAM_A_TABLE_ERROR_MSG:
			get_str(ti->error_msg, sizeof(ti->error_msg), nla);
			break;
		default:
			/* Not a table attribute (FD, STATS): not ours to show. */
			ti->present &= ~(1ULL << a);
			break;
		}
	}
	return 0;
}

int table_info_is_shard(const struct table_info *ti)
{
	return TI_HAS(ti, ENGRAM_A_TABLE_HELD_ROWS) && TI_HAS(ti, ENGRAM_A_TABLE_ROWS) &&
	       ti->held_rows != ti->rows;
}

double table_info_progress(const struct table_info *ti)
{
	if (!TI_HAS(ti, ENGRAM_A_TABLE_DONE_BYTES) || !TI_HAS(ti, ENGRAM_A_TABLE_FILE_BYTES) ||
	    !ti->file_bytes)
		return -1;
	if (ti->done_bytes >= ti->file_bytes)
		return 100.0;
	return 100.0 * (double)ti->done_bytes / (double)ti->file_bytes;
}

int table_info_draining(const struct table_info *ti)
{
	return TI_HAS(ti, ENGRAM_A_TABLE_DRAINING) && ti->draining;
}

static int row_bytes_known(const struct table_info *ti)
{
	return TI_HAS(ti, ENGRAM_A_TABLE_WEIGHT_BYTES) && TI_HAS(ti, ENGRAM_A_TABLE_SCALE_BYTES);
}

json_t *table_info_json(const struct table_info *ti)
{
	static const struct {
		int attr;
		const char *key;
		size_t off;
	} u64s[] = {
#define U64(a, k, f) { ENGRAM_A_TABLE_##a, k, offsetof(struct table_info, f) }
		U64(GENERATION, "generation", generation),
		U64(ROWS, "rows", rows),
		U64(HELD_FIRST, "held_first", held_first),
		U64(HELD_ROWS, "held_rows", held_rows),
		U64(WEIGHT_OFFSET, "weight_offset", weight_offset),
		U64(SCALE_OFFSET, "scale_offset", scale_offset),
		U64(FILE_BYTES, "file_bytes", file_bytes),
		U64(DONE_BYTES, "done_bytes", done_bytes),
		U64(PINNED_BYTES, "pinned_bytes", pinned_bytes),
		U64(META_BYTES, "meta_bytes", meta_bytes),
		U64(ELAPSED_NS, "elapsed_ns", elapsed_ns),
#undef U64
	};
	char hex[2 * ENGRAM_SHA256_LEN + 1];
	json_t *o = json_object();
	int ret = 0;
	size_t i;

	if (!o)
		return NULL;
	ret |= json_set(o, "name", json_string(ti->name));
	if (TI_HAS(ti, ENGRAM_A_TABLE_PATH))
		ret |= json_set(o, "path", json_string(ti->path));
	if (TI_HAS(ti, ENGRAM_A_TABLE_SHA256))
		ret |= json_set(o, "sha256",
				json_string(fmt_hex(hex, ti->sha256, ENGRAM_SHA256_LEN)));
	if (TI_HAS(ti, ENGRAM_A_TABLE_STATE))
		ret |= json_set(o, "state", json_string(table_state_name(ti->state)));
	for (i = 0; i < sizeof(u64s) / sizeof(u64s[0]); i++) {
		if (TI_HAS(ti, u64s[i].attr))
			ret |= json_set(o, u64s[i].key,
					json_u64(*(const uint64_t *)((const char *)ti +
								     u64s[i].off)));
	}
	if (TI_HAS(ti, ENGRAM_A_TABLE_WEIGHT_BYTES))
		ret |= json_set(o, "weight_bytes", json_integer(ti->weight_bytes));
	if (TI_HAS(ti, ENGRAM_A_TABLE_SCALE_BYTES))
		ret |= json_set(o, "scale_bytes", json_integer(ti->scale_bytes));
	if (row_bytes_known(ti))
		ret |= json_set(o, "row_bytes",
				json_integer((json_int_t)ti->weight_bytes + ti->scale_bytes));
	if (TI_HAS(ti, ENGRAM_A_TABLE_VERIFY_RESULT))
		ret |= json_set(o, "verify_result",
				json_string(verify_result_name(ti->verify_result)));
	if (TI_HAS(ti, ENGRAM_A_TABLE_INFLIGHT))
		ret |= json_set(o, "inflight", json_integer(ti->inflight));
	/* Always there: a module that cannot drain has nothing draining. */
	ret |= json_set(o, "draining", json_boolean(table_info_draining(ti)));
	if (table_info_draining(ti) && TI_HAS(ti, ENGRAM_A_TABLE_DRAIN_QUIET_NS))
		ret |= json_set(o, "drain_quiet_ms", json_u64(ti->drain_quiet_ns / 1000000));
	if (TI_HAS(ti, ENGRAM_A_TABLE_ERROR)) {
		ret |= json_set(o, "error", json_integer(ti->error));
		ret |= json_set(o, "error_str", json_string(strerror(ti->error)));
	}
	if (TI_HAS(ti, ENGRAM_A_TABLE_ERROR_MSG))
		ret |= json_set(o, "error_msg", json_string(ti->error_msg));
	if (ret) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static void print_state(FILE *f, const struct table_info *ti)
{
	double pct = table_info_progress(ti);

	fputs(table_state_name(ti->state), f);
	if ((ti->state == ENGRAM_TABLE_LOADING || ti->state == ENGRAM_TABLE_VERIFYING) &&
	    pct >= 0)
		fprintf(f, " %.1f%%", pct);
}

/* "draining (quiet 1.2 s)": a drained table's marker, after its state. */
static void print_draining(FILE *f, const struct table_info *ti)
{
	char buf[32];

	if (!table_info_draining(ti))
		return;
	fputs(" draining", f);
	if (TI_HAS(ti, ENGRAM_A_TABLE_DRAIN_QUIET_NS))
		fprintf(f, " (quiet %s)", fmt_duration(buf, sizeof(buf), ti->drain_quiet_ns));
}

void table_info_print_line(FILE *f, const struct table_info *ti)
{
	char hex[2 * ENGRAM_SHA256_LEN + 1], sz[32];

	fprintf(f, "%s:", ti->name);
	if (TI_HAS(ti, ENGRAM_A_TABLE_STATE)) {
		fputs(" state ", f);
		print_state(f, ti);
	}
	print_draining(f, ti);
	if (TI_HAS(ti, ENGRAM_A_TABLE_GENERATION))
		fprintf(f, " gen %" PRIu64, ti->generation);
	if (TI_HAS(ti, ENGRAM_A_TABLE_ROWS))
		fprintf(f, " rows %" PRIu64, ti->rows);
	if (table_info_is_shard(ti))
		fprintf(f, " held %" PRIu64 "-%" PRIu64, ti->held_first,
			ti->held_first + ti->held_rows - 1);
	if (row_bytes_known(ti))
		fprintf(f, " row_bytes %u", ti->weight_bytes + ti->scale_bytes);
	if (TI_HAS(ti, ENGRAM_A_TABLE_PINNED_BYTES))
		fprintf(f, " pinned %s", fmt_bytes(sz, sizeof(sz), ti->pinned_bytes));
	if (TI_HAS(ti, ENGRAM_A_TABLE_INFLIGHT))
		fprintf(f, " inflight %u", ti->inflight);
	if (TI_HAS(ti, ENGRAM_A_TABLE_VERIFY_RESULT) && ti->verify_result != ENGRAM_VERIFY_NONE)
		fprintf(f, " verify %s", verify_result_name(ti->verify_result));
	if (TI_HAS(ti, ENGRAM_A_TABLE_SHA256))
		fprintf(f, " sha256 %s", fmt_hex(hex, ti->sha256, ENGRAM_SHA256_LEN));
	if (TI_HAS(ti, ENGRAM_A_TABLE_PATH))
		fprintf(f, " path %s", ti->path);
	if (TI_HAS(ti, ENGRAM_A_TABLE_ERROR))
		fprintf(f, " error \"%s\"", strerror(ti->error));
	if (TI_HAS(ti, ENGRAM_A_TABLE_ERROR_MSG))
		fprintf(f, " error_msg \"%s\"", ti->error_msg);
	fputc('\n', f);
}

static void detail_bytes(FILE *f, const char *key, uint64_t v)
{
	char sz[32];

	fprintf(f, "  %-15s %s (%" PRIu64 ")\n", key, fmt_bytes(sz, sizeof(sz), v), v);
}

void table_info_print_detail(FILE *f, const struct table_info *ti)
{
	char hex[2 * ENGRAM_SHA256_LEN + 1], buf[32];

	fprintf(f, "table %s\n", ti->name);
	if (TI_HAS(ti, ENGRAM_A_TABLE_STATE)) {
		fprintf(f, "  %-15s ", "state");
		print_state(f, ti);
		fputc('\n', f);
	}
	if (table_info_draining(ti)) {
		fprintf(f, "  %-15s yes", "draining");
		if (TI_HAS(ti, ENGRAM_A_TABLE_DRAIN_QUIET_NS))
			fprintf(f, ", quiet %s",
				fmt_duration(buf, sizeof(buf), ti->drain_quiet_ns));
		fputc('\n', f);
	}
	if (TI_HAS(ti, ENGRAM_A_TABLE_INFLIGHT))
		fprintf(f, "  %-15s %u\n", "inflight", ti->inflight);
	if (TI_HAS(ti, ENGRAM_A_TABLE_PATH))
		fprintf(f, "  %-15s %s\n", "path", ti->path);
	if (TI_HAS(ti, ENGRAM_A_TABLE_SHA256))
		fprintf(f, "  %-15s %s\n", "sha256", fmt_hex(hex, ti->sha256, ENGRAM_SHA256_LEN));
	if (TI_HAS(ti, ENGRAM_A_TABLE_GENERATION))
		fprintf(f, "  %-15s %" PRIu64 "\n", "generation", ti->generation);
	if (TI_HAS(ti, ENGRAM_A_TABLE_ROWS))
		fprintf(f, "  %-15s %" PRIu64 "\n", "rows", ti->rows);
	if (table_info_is_shard(ti))
		fprintf(f, "  %-15s %" PRIu64 "-%" PRIu64 " (%" PRIu64 " rows)\n", "held",
			ti->held_first, ti->held_first + ti->held_rows - 1, ti->held_rows);
	if (row_bytes_known(ti))
		fprintf(f, "  %-15s %u (weight %u + scale %u)\n", "row bytes",
			ti->weight_bytes + ti->scale_bytes, ti->weight_bytes, ti->scale_bytes);
	if (TI_HAS(ti, ENGRAM_A_TABLE_WEIGHT_OFFSET))
		fprintf(f, "  %-15s %" PRIu64 "\n", "weight offset", ti->weight_offset);
	if (TI_HAS(ti, ENGRAM_A_TABLE_SCALE_OFFSET))
		fprintf(f, "  %-15s %" PRIu64 "\n", "scale offset", ti->scale_offset);
	if (TI_HAS(ti, ENGRAM_A_TABLE_FILE_BYTES))
		detail_bytes(f, "file", ti->file_bytes);
	if (TI_HAS(ti, ENGRAM_A_TABLE_DONE_BYTES))
		detail_bytes(f, "done", ti->done_bytes);
	if (TI_HAS(ti, ENGRAM_A_TABLE_PINNED_BYTES))
		detail_bytes(f, "pinned", ti->pinned_bytes);
	if (TI_HAS(ti, ENGRAM_A_TABLE_META_BYTES))
		detail_bytes(f, "metadata", ti->meta_bytes);
	if (TI_HAS(ti, ENGRAM_A_TABLE_ELAPSED_NS))
		fprintf(f, "  %-15s %s\n", "elapsed",
			fmt_duration(buf, sizeof(buf), ti->elapsed_ns));
	if (TI_HAS(ti, ENGRAM_A_TABLE_VERIFY_RESULT))
		fprintf(f, "  %-15s %s\n", "verify", verify_result_name(ti->verify_result));
	if (TI_HAS(ti, ENGRAM_A_TABLE_ERROR))
		fprintf(f, "  %-15s %s (%u)\n", "error", strerror(ti->error), ti->error);
	if (TI_HAS(ti, ENGRAM_A_TABLE_ERROR_MSG))
		fprintf(f, "  %-15s %s\n", "error message", ti->error_msg);
}
