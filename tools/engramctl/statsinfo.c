// SPDX-License-Identifier: GPL-2.0
/* ENGRAM_STAT_* counter sets. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <netlink/attr.h>

#include "fmt.h"
#include "jsonout.h"
#include "statsinfo.h"

/* @present is a 64-bit mask indexed by counter id. */
_Static_assert(ENGRAM_STAT_MAX < 64, "struct stats_info.present needs widening");

enum stat_unit { STAT_COUNT, STAT_BYTES, STAT_NS };

static const struct {
	const char *name;
	enum stat_unit unit;
} stats[ENGRAM_STAT_MAX + 1] = {
	[ENGRAM_STAT_TABLES]		= { "tables", STAT_COUNT },
	[ENGRAM_STAT_PINNED_BYTES]	= { "pinned_bytes", STAT_BYTES },
	[ENGRAM_STAT_LOADS_STARTED]	= { "loads_started", STAT_COUNT },
	[ENGRAM_STAT_LOADS_DONE]	= { "loads_done", STAT_COUNT },
	[ENGRAM_STAT_LOADS_FAILED]	= { "loads_failed", STAT_COUNT },
	[ENGRAM_STAT_LOADS_CANCELLED]	= { "loads_cancelled", STAT_COUNT },
	[ENGRAM_STAT_DIGEST_MISMATCHES]	= { "digest_mismatches", STAT_COUNT },
	[ENGRAM_STAT_REQUESTS_REFUSED]	= { "requests_refused", STAT_COUNT },
	[ENGRAM_STAT_LOOKUPS]		= { "lookups", STAT_COUNT },
	[ENGRAM_STAT_ROWS]		= { "rows", STAT_COUNT },
	[ENGRAM_STAT_BYTES]		= { "bytes", STAT_BYTES },
	[ENGRAM_STAT_LOAD_BYTES]	= { "load_bytes", STAT_BYTES },
	[ENGRAM_STAT_LOAD_NS]		= { "load_ns", STAT_NS },
	[ENGRAM_STAT_VERIFY_RUNS]	= { "verify_runs", STAT_COUNT },
	[ENGRAM_STAT_VERIFY_FAILURES]	= { "verify_failures", STAT_COUNT },
};

const char *stat_name(int id)
{
	return id > 0 && id <= ENGRAM_STAT_MAX ? stats[id].name : NULL;
}

void stats_info_from_nest(struct stats_info *si, struct nlattr *nest)
{
	struct nlattr *nla;
	int rem;

	memset(si, 0, sizeof(*si));
	if (!nest)
		return;
	nla_for_each_nested(nla, nest, rem) {
		int id = nla_type(nla);

		if (!stat_name(id) || nla_len(nla) != sizeof(uint64_t))
			continue;
		si->v[id] = nla_get_u64(nla);
		si->present |= 1ULL << id;
	}
}

int stats_info_json(const struct stats_info *si, json_t *obj)
{
	int id;

	for (id = 1; id <= ENGRAM_STAT_MAX; id++) {
		if (!(si->present & (1ULL << id)))
			continue;
		if (json_set(obj, stats[id].name, json_u64(si->v[id])))
			return -ENOMEM;
	}
	return 0;
}

void stats_info_print(FILE *f, const struct stats_info *si, const char *indent)
{
	char buf[32];
	int id;

	for (id = 1; id <= ENGRAM_STAT_MAX; id++) {
		if (!(si->present & (1ULL << id)))
			continue;
		fprintf(f, "%s%-18s %20" PRIu64, indent, stats[id].name, si->v[id]);
		if (stats[id].unit == STAT_BYTES && si->v[id] >= 1024)
			fprintf(f, "  (%s)", fmt_bytes(buf, sizeof(buf), si->v[id]));
		else if (stats[id].unit == STAT_NS && si->v[id])
			fprintf(f, "  (%s)", fmt_duration(buf, sizeof(buf), si->v[id]));
		fputc('\n', f);
	}
}
