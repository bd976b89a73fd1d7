// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl stats [show] [NAME]: module-wide counters (STATS_GET do), then
 * per-table and per-link counters with their latency histograms (STATS_GET
 * dump: one message per table, then one per link).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/attr.h>

#include "engramctl.h"
#include "fmt.h"
#include "jsonout.h"
#include "linkinfo.h"
#include "statsinfo.h"

struct table_stats {
	char name[ENGRAM_NAME_MAX];
	int has_generation;
	uint64_t generation;
	struct stats_info si;
	struct lat_info lat;
};

struct stats_list {
	struct table_stats *v;
	size_t n, cap;
	struct link_info *links;
	size_t nlinks, lcap;
};

void usage_stats(FILE *f)
{
	fputs("Usage: engramctl [-j] stats [show] [NAME]\n"
	      "\n"
	      "Module-wide counters, then each table's and each link's counters and latency\n"
	      "histogram; with NAME only that table's.\n"
	      "JSON: {\"global\": {...}, \"tables\": [{\"name\": ..., \"generation\": ..., ...,\n"
	      "       \"latency\": {...}}], \"links\": [{\"id\": ..., \"url\": ..., ..., \"latency\": {...}}]}\n",
	      f);
}

static int reply_global(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];

	if (enl_parse(msg, tb))
		return -EPROTO;
	stats_info_from_nest(arg, tb[ENGRAM_A_STATS]);
	return 0;
}

static int reply_link(struct stats_list *l, struct nlattr **tb)
{
	struct link_info *nv;

	if (l->nlinks == l->lcap) {
		l->lcap = l->lcap ? 2 * l->lcap : 8;
		nv = realloc(l->links, l->lcap * sizeof(*l->links));
		if (!nv)
			return -ENOMEM;
		l->links = nv;
	}
	if (link_info_from_attrs(&l->links[l->nlinks], tb))
		return -EPROTO;
	l->nlinks++;
	return 0;
}

/* A table's message names the table, a link's the link. */
static int reply_table(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	struct stats_list *l = arg;
	struct table_stats *ts, *nv;

	if (enl_parse(msg, tb))
		return -EPROTO;
	if (!tb[ENGRAM_A_TABLE_NAME] && tb[ENGRAM_A_LINK_ID])
		return reply_link(l, tb);
	if (!tb[ENGRAM_A_TABLE_NAME])
		return -EPROTO;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		nv = realloc(l->v, l->cap * sizeof(*l->v));
		if (!nv)
			return -ENOMEM;
		l->v = nv;
	}
	ts = &l->v[l->n++];
	memset(ts, 0, sizeof(*ts));
	snprintf(ts->name, sizeof(ts->name), "%s", nla_get_string(tb[ENGRAM_A_TABLE_NAME]));
	if (tb[ENGRAM_A_TABLE_GENERATION]) {
		ts->has_generation = 1;
		ts->generation = nla_get_u64(tb[ENGRAM_A_TABLE_GENERATION]);
	}
	stats_info_from_nest(&ts->si, tb[ENGRAM_A_STATS]);
	lat_info_from_nest(&ts->lat, tb[ENGRAM_A_LATENCY]);
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct table_stats *)a)->name,
		      ((const struct table_stats *)b)->name);
}

static int cmp_link(const void *a, const void *b)
{
	uint32_t x = ((const struct link_info *)a)->id, y = ((const struct link_info *)b)->id;

	return x < y ? -1 : x > y;
}

static int print_json(const struct stats_info *global, const struct stats_list *l,
		      const char *only)
{
	json_t *root = json_object(), *g = json_object(), *arr = json_array(), *t;
	json_t *links = json_array();
	int ret = !root || !g || !arr || !links;
	size_t i;

	if (!ret)
		ret = stats_info_json(global, g);
	for (i = 0; !ret && i < l->n; i++) {
		if (only && strcmp(only, l->v[i].name))
			continue;
		t = json_object();
		ret = !t || json_array_append_new(arr, t) ||
		      json_set(t, "name", json_string(l->v[i].name)) ||
		      (l->v[i].has_generation &&
		       json_set(t, "generation", json_u64(l->v[i].generation))) ||
		      stats_info_json(&l->v[i].si, t) ||
		      (l->v[i].lat.present && json_set(t, "latency", lat_info_json(&l->v[i].lat)));
	}
	/* Links are listed whole, or not at all when NAME picks a table. */
	for (i = 0; !ret && !only && i < l->nlinks; i++)
		ret = json_array_append_new(links, link_info_json(&l->links[i], 1));
	if (!ret)
		ret = json_set(root, "global", json_incref(g)) ||
		      json_set(root, "tables", json_incref(arr)) ||
		      json_set(root, "links", json_incref(links));
	json_decref(g);
	json_decref(arr);
	json_decref(links);
	if (ret) {
		json_decref(root);
		root = NULL;
	}
	return json_print(root, opts.pretty) ? EXIT_FAIL : EXIT_OK;
}

static void print_text(const struct stats_info *global, const struct stats_list *l,
		       const char *only)
{
	int first = 1;
	size_t i;

	if (!only) {
		printf("module\n");
		stats_info_print(stdout, global, "  ");
		first = 0;
	}
	for (i = 0; i < l->n; i++) {
		if (only && strcmp(only, l->v[i].name))
			continue;
		if (!first)
			putchar('\n');
		first = 0;
		printf("table %s", l->v[i].name);
		if (l->v[i].has_generation)
			printf(" generation %" PRIu64, l->v[i].generation);
		putchar('\n');
		stats_info_print(stdout, &l->v[i].si, "  ");
		lat_info_print(stdout, &l->v[i].lat, "  ");
	}
	for (i = 0; !only && i < l->nlinks; i++) {
		putchar('\n');
		printf("link %u", l->links[i].id);
		if (LI_HAS(&l->links[i], ENGRAM_A_URL))
			printf(" %s", l->links[i].url);
		putchar('\n');
		stats_info_print(stdout, &l->links[i].si, "  ");
		lat_info_print(stdout, &l->links[i].lat, "  ");
	}
}

int cmd_stats(int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	struct stats_list l = { 0 };
	struct stats_info global;
	const char *only = NULL;
	struct nl_msg *msg;
	struct enl nl;
	int c, ret, rc = EXIT_USAGE;
	size_t i;

	/* "stats show ..." and "stats ..." are the same; so is "stats help". */
	if (argc > 1 && !strcmp(argv[1], "show")) {
		argc--;
		argv++;
	} else if (argc > 1 && !strcmp(argv[1], "help")) {
		usage_stats(stdout);
		return EXIT_OK;
	}
	optind = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS, longopts, NULL)) != -1) {
		if (common_opt(c, argv, "stats", usage_stats, &rc) < 0)
			return rc;
	}
	if (argc - optind > 1)
		return usage_error("stats", "unexpected argument '%s'", argv[argc - 1]);
	if (optind < argc)
		only = argv[optind];

	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	rc = EXIT_FAIL;
	memset(&global, 0, sizeof(global));
	msg = enl_msg(&nl, ENGRAM_CMD_STATS_GET, 0);
	ret = msg ? enl_request(&nl, msg, reply_global, &global) : -ENOMEM;
	if (ret) {
		enl_perror(&nl, ret, "module stats");
		goto out;
	}
	msg = enl_msg(&nl, ENGRAM_CMD_STATS_GET, NLM_F_DUMP);
	ret = msg ? enl_request(&nl, msg, reply_table, &l) : -ENOMEM;
	if (ret) {
		enl_perror(&nl, ret, "table stats");
		goto out;
	}
	qsort(l.v, l.n, sizeof(*l.v), cmp_name);
	qsort(l.links, l.nlinks, sizeof(*l.links), cmp_link);
	if (only) {
		for (i = 0; i < l.n && strcmp(l.v[i].name, only); i++)
			;
		if (i == l.n) {
			err_msg("stats: no table named '%s'", only);
			goto out;
		}
	}
	if (opts.json) {
		rc = print_json(&global, &l, only);
	} else {
		print_text(&global, &l, only);
		rc = EXIT_OK;
	}
out:
	free(l.v);
	free(l.links);
	enl_close(&nl);
	return rc;
}
