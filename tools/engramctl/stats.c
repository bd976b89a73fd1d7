// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl stats [show] [NAME]: module-wide counters (STATS_GET do), then
 * per-table and per-link counters with their latency histograms (STATS_GET
 * dump: one message per table, then one per link, then one per table
 * opened through a link, shown under its link).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <netlink/attr.h>

#include "engramctl.h"
#include "fmt.h"
#include "jsonout.h"
#include "linkinfo.h"
#include "prom.h"
#include "statsinfo.h"
#include "table.h"

struct table_stats {
	uint32_t link_id;		/* a table opened through this link; 0: served here */
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
	fputs("Usage: engramctl [-j] stats [show] [NAME] [--prometheus [--output FILE]]\n"
	      "\n"
	      "Module-wide counters, then each table's and each link's counters and latency\n"
	      "histogram; with NAME only that table's.\n"
	      "Under each link, the tables opened through it: fetches, rows, errors, timeouts,\n"
	      "transport errors, fallbacks to a local copy, latency.\n"
	      "JSON: {\"global\": {...}, \"tables\": [{\"name\": ..., \"generation\": ..., ...,\n"
	      "       \"latency\": {...}}], \"links\": [{\"id\": ..., \"url\": ..., ..., \"latency\": {...},\n"
	      "       \"tables\": [{\"name\": ..., \"fetches\": ..., \"fallbacks\": ..., ...}]}]}\n"
	      "--prometheus: the same in Prometheus' text format, for node_exporter's textfile\n"
	      "collector (engram_rdma_* families; labels table, link, reason); --output FILE\n"
	      "writes it to FILE through a temporary file renamed over it, so that the\n"
	      "collector never reads half of it.\n",
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

	nv = enl_grow(l->links, &l->lcap, l->nlinks, sizeof(*l->links));
	if (!nv)
		return -ENOMEM;
	l->links = nv;
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
	/* Both: a table opened through that link. */
	if (!tb[ENGRAM_A_TABLE_NAME])
		return -EPROTO;
	nv = enl_grow(l->v, &l->cap, l->n, sizeof(*l->v));
	if (!nv)
		return -ENOMEM;
	l->v = nv;
	ts = &l->v[l->n++];
	memset(ts, 0, sizeof(*ts));
	snprintf(ts->name, sizeof(ts->name), "%s", nla_get_string(tb[ENGRAM_A_TABLE_NAME]));
	if (tb[ENGRAM_A_LINK_ID])
		ts->link_id = nla_get_u32(tb[ENGRAM_A_LINK_ID]);
	if (tb[ENGRAM_A_TABLE_GENERATION]) {
		ts->has_generation = 1;
		ts->generation = nla_get_u64(tb[ENGRAM_A_TABLE_GENERATION]);
	}
	stats_info_from_nest(&ts->si, tb[ENGRAM_A_STATS]);
	lat_info_from_nest(&ts->lat, tb[ENGRAM_A_LATENCY]);
	lat_info_sum_from_attr(&ts->lat, tb[ENGRAM_A_LATENCY_SUM_NS]);
	return 0;
}

/* Served tables first by name, then link tables by link and name. */
static int cmp_name(const void *a, const void *b)
{
	const struct table_stats *x = a, *y = b;

	if (x->link_id != y->link_id)
		return x->link_id < y->link_id ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_link(const void *a, const void *b)
{
	uint32_t x = ((const struct link_info *)a)->id, y = ((const struct link_info *)b)->id;

	return x < y ? -1 : x > y;
}

static int link_listed(const struct stats_list *l, uint32_t id)
{
	size_t i;

	for (i = 0; i < l->nlinks; i++)
		if (l->links[i].id == id)
			return 1;
	return 0;
}

/* The tables opened through link @id, as a JSON array. */
static json_t *link_tables_json(const struct stats_list *l, uint32_t id)
{
	json_t *arr = json_array(), *t;
	size_t i;

	for (i = 0; arr && i < l->n; i++) {
		if (l->v[i].link_id != id)
			continue;
		t = json_object();
		if (!t || json_array_append_new(arr, t) ||
		    json_set(t, "name", json_string(l->v[i].name)) ||
		    stats_info_json(&l->v[i].si, t) ||
		    (l->v[i].lat.present && json_set(t, "latency", lat_info_json(&l->v[i].lat)))) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
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
		if ((only && strcmp(only, l->v[i].name)) || l->v[i].link_id)
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
	for (i = 0; !ret && !only && i < l->nlinks; i++) {
		t = link_info_json(&l->links[i], 1);
		ret = !t || json_set(t, "tables", link_tables_json(l, l->links[i].id)) ||
		      json_array_append_new(links, t);
	}
	/* Tables still open through a link deleted since. */
	for (i = 0; !ret && !only && i < l->n; i++) {
		if (!l->v[i].link_id || link_listed(l, l->v[i].link_id) ||
		    (i && l->v[i - 1].link_id == l->v[i].link_id))
			continue;
		t = json_object();
		ret = !t || json_array_append_new(links, t) ||
		      json_set(t, "id", json_u64(l->v[i].link_id)) ||
		      json_set(t, "deleted", json_true()) ||
		      json_set(t, "tables", link_tables_json(l, l->v[i].link_id));
	}
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

/* One line per table opened through link @id. */
static void print_link_tables(const struct stats_list *l, uint32_t id)
{
	const struct table_stats *t;
	size_t i;

	for (i = 0; i < l->n; i++) {
		t = &l->v[i];
		if (t->link_id != id)
			continue;
		printf("  table %s: fetches %" PRIu64 " rows %" PRIu64 " errors %" PRIu64
		       " timeouts %" PRIu64 " transport_errors %" PRIu64 " fallbacks %" PRIu64
		       " fallback_rows %" PRIu64 " p50 %" PRIu64 "us p99 %" PRIu64 "us\n",
		       t->name, t->si.v[ENGRAM_STAT_FETCHES], t->si.v[ENGRAM_STAT_FETCH_ROWS],
		       t->si.v[ENGRAM_STAT_FETCH_ERRORS], t->si.v[ENGRAM_STAT_FETCH_TIMEOUTS],
		       t->si.v[ENGRAM_STAT_TRANSPORT_ERRORS], t->si.v[ENGRAM_STAT_FALLBACKS],
		       t->si.v[ENGRAM_STAT_FALLBACK_ROWS], lat_info_percentile(&t->lat, 0.5),
		       lat_info_percentile(&t->lat, 0.99));
	}
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
		if ((only && strcmp(only, l->v[i].name)) || l->v[i].link_id)
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
		print_link_tables(l, l->links[i].id);
	}
	for (i = 0; !only && i < l->n; i++) {
		if (!l->v[i].link_id || link_listed(l, l->v[i].link_id) ||
		    (i && l->v[i - 1].link_id == l->v[i].link_id))
			continue;
		printf("\nlink %u (deleted)\n", l->v[i].link_id);
		print_link_tables(l, l->v[i].link_id);
	}
}

/* The Prometheus families of every scope; NAME keeps one table's (served and per link). */
static int print_prometheus(FILE *f, const struct stats_info *global,
			    const struct stats_list *l, const char *only,
			    const struct link_info *st, size_t nst,
			    const struct table_info *tv, size_t ntv)
{
	size_t n = l->n + l->nlinks + 1, i, k, nt = 0, nl = 0, nlt = 0;
	struct prom_sample *t = calloc(n, sizeof(*t)), *lk = calloc(n, sizeof(*lk));
	struct prom_sample *lt = calloc(n, sizeof(*lt));
	char (*lab)[2 * ENGRAM_NAME_MAX + 160] = calloc(n, sizeof(*lab));
	char e1[2 * ENGRAM_NAME_MAX + 8], e2[2 * 128 + 8];
	struct prom_sample g = { "", global, NULL };
	int rc = EXIT_FAIL;

	if (!t || !lk || !lt || !lab) {
		err_msg("out of memory");
		goto out;
	}
	k = 0;
	for (i = 0; i < l->n; i++) {
		if (only && strcmp(only, l->v[i].name))
			continue;
		const char *esc = prom_escape(e1, sizeof(e1), l->v[i].name);

		if (l->v[i].link_id) {
			snprintf(lab[k], sizeof(lab[k]), "link=\"%u\",table=\"%s\"", l->v[i].link_id,
				 esc);
			lt[nlt++] = (struct prom_sample){ lab[k++], &l->v[i].si, &l->v[i].lat };
		} else {
			snprintf(lab[k], sizeof(lab[k]), "table=\"%s\"", esc);
			t[nt++] = (struct prom_sample){ lab[k++], &l->v[i].si, &l->v[i].lat };
		}
	}
	for (i = 0; !only && i < l->nlinks; i++) {
		snprintf(lab[k], sizeof(lab[k]), "link=\"%u\"", l->links[i].id);
		lk[nl++] = (struct prom_sample){ lab[k++], &l->links[i].si, &l->links[i].lat };
	}
	if (!only)
		prom_print_scope(f, "", &g, 1);
	prom_print_scope(f, "table_", t, nt);
	prom_print_tables(f, tv, ntv);
	/* State and transport come from LINK_GET (@st), counters from STATS_GET. */
	if (!only && nst) {
		fprintf(f, "# HELP engram_rdma_link_info A link: its URL and transport.\n"
			"# TYPE engram_rdma_link_info gauge\n");
		for (i = 0; i < nst; i++)
			fprintf(f, "engram_rdma_link_info{link=\"%u\",url=\"%s\",transport=\"%s\"} 1\n",
				st[i].id, prom_escape(e2, sizeof(e2), st[i].url),
				!strncmp(st[i].url, "tcp://", 6) ? "tcp" : "rdma");
		fprintf(f, "# HELP engram_rdma_link_up 1 while the link is connected.\n"
			"# TYPE engram_rdma_link_up gauge\n");
		for (i = 0; i < nst; i++)
			fprintf(f, "engram_rdma_link_up{link=\"%u\"} %d\n", st[i].id,
				st[i].state == ENGRAM_LINK_UP);
	}
	prom_print_scope(f, "link_", lk, nl);
	prom_print_scope(f, "link_table_", lt, nlt);
	rc = fflush(f) || ferror(f) ? EXIT_FAIL : EXIT_OK;
out:
	free(t);
	free(lk);
	free(lt);
	free(lab);
	return rc;
}

/*
 * --output FILE: written beside FILE under a temporary name, then renamed
 * over it, so that node_exporter's textfile collector never reads half a
 * file; readable by all (the collector's user), as Prometheus' own files.
 */
static int write_prometheus(const char *path, const struct stats_info *global,
			    const struct stats_list *l, const char *only,
			    const struct link_info *st, size_t nst,
			    const struct table_info *tv, size_t ntv)
{
	char tmp[PATH_MAX];
	FILE *f;
	int fd, rc;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= sizeof(tmp)) {
		err_msg("%s: name too long", path);
		return EXIT_FAIL;
	}
	fd = mkstemp(tmp);
	if (fd < 0) {
		err_msg("%s: cannot create a file beside it: %s", path, strerror(errno));
		return EXIT_FAIL;
	}
	if (fchmod(fd, 0644) || !(f = fdopen(fd, "w"))) {
		err_msg("%s: %s", tmp, strerror(errno));
		close(fd);
		goto fail;
	}
	rc = print_prometheus(f, global, l, only, st, nst, tv, ntv);
	if (fclose(f) || rc != EXIT_OK) {
		err_msg("%s: write failed", tmp);
		goto fail;
	}
	if (rename(tmp, path)) {
		err_msg("%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
		goto fail;
	}
	return EXIT_OK;
fail:
	unlink(tmp);
	return EXIT_FAIL;
}

int cmd_stats(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "prometheus", no_argument, NULL, 'P' },
		{ "output", required_argument, NULL, 'o' },
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	struct stats_list l = { 0 };
	struct stats_info global;
	const char *only = NULL, *output = NULL;
	struct nl_msg *msg;
	struct enl nl;
	int c, ret, rc = EXIT_USAGE, prometheus = 0;
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
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS "o:", longopts, NULL)) != -1) {
		switch (common_opt(c, argv, "stats", usage_stats, &rc)) {
		case 1:
			continue;
		case -1:
			return rc;
		}
		if (c == 'P')
			prometheus = 1;
		else if (c == 'o')
			output = optarg;
	}
	if (prometheus && opts.json)
		return usage_error("stats", "-j or --prometheus, not both");
	if (output && !prometheus)
		return usage_error("stats", "--output is for --prometheus");
	if (output && !*output)
		return usage_error("stats", "--output wants a file name");
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
	ret = enl_dump(&nl, ENGRAM_CMD_STATS_GET, reply_table, &l);
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
	if (prometheus) {
		struct link_info *st = NULL;
		struct table_info *tv = NULL;
		size_t nst = 0, ntv = 0, t0 = 0;

		ret = only ? 0 : link_dump(&nl, &st, &nst);
		if (ret) {
			enl_perror(&nl, ret, "list links");
			goto out;
		}
		/* table_dump() says what went wrong itself. */
		if (table_dump(&nl, &tv, &ntv)) {
			free(st);
			goto out;
		}
		/* NAME: that table's info alone (tv is sorted by name too). */
		while (only && t0 < ntv && strcmp(tv[t0].name, only))
			t0++;
		if (only)
			ntv = t0 < ntv ? 1 : 0;
		qsort(st, nst, sizeof(*st), cmp_link);
		if (output)
			rc = write_prometheus(output, &global, &l, only, st, nst, tv + t0, ntv);
		else
			rc = print_prometheus(stdout, &global, &l, only, st, nst, tv + t0, ntv);
		free(st);
		free(tv);
	} else if (opts.json) {
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
