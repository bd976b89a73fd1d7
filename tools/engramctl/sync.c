// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl table sync and table unload --config: make the loaded tables
 * what the tables file lists (engram-rdma-tables.conf(5)), for
 * engram-rdma-tables.service and for an admin who edited the file.
 *
 * Idempotent: a listed table that is loaded from the same file, with the
 * same geometry and (when the file gives one) the same digest is left
 * alone, so restarting the unit costs nothing and serves on; one that
 * differs or failed is unloaded and loaded again; one that is missing is
 * loaded.  Tables the file does not list are unloaded only with --prune,
 * and first, so their memory is free for what is loaded next.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engramctl.h"
#include "fmt.h"
#include "jsonout.h"
#include "notify.h"
#include "table.h"
#include "tablesconf.h"

struct sync_ctx {
	struct enl nl;
	int dry_run;
	int show_progress;
	json_t *out;		/* -j: one object per table */
	unsigned int failed;
	unsigned int loaded;	/* loaded or replaced now */
	unsigned int unchanged;
};

void usage_sync(FILE *f)
{
	fputs("Usage: engramctl [-j] table sync [--config FILE] [--prune] [--dry-run] [--no-progress]\n"
	      "       engramctl [-j] table unload --config FILE\n"
	      "\n"
	      "sync     load the tables FILE lists (default " TABLESCONF_DEFAULT ") that\n"
	      "         are missing, reload those loaded from another file, with another\n"
	      "         geometry or digest, or failed, leave the others alone; --prune also\n"
	      "         unloads the tables FILE does not list; --dry-run only says what it\n"
	      "         would do\n"
	      "unload   --config: unload every table FILE lists (those not loaded are fine)\n",
	      f);
}

static int read_conf(const char *path, struct tconf *tc)
{
	char err[512];
	FILE *f;
	int ret;

	f = fopen(path, "re");
	if (!f) {
		err_msg("%s: %s", path, strerror(errno));
		return -errno;
	}
	ret = tconf_parse(f, path, tc, err, sizeof(err));
	fclose(f);
	if (ret)
		err_msg("%s", err);
	return ret;
}

/* One line of the report: "NAME: ACTION[ (DETAIL)]", or a JSON object. */
static void report(struct sync_ctx *c, const char *name, const char *action, const char *detail)
{
	json_t *o;

	if (!strcmp(action, "failed"))
		c->failed++;
	else if (!strcmp(action, "loaded") || !strcmp(action, "replaced"))
		c->loaded++;
	else if (!strcmp(action, "unchanged"))
		c->unchanged++;
	if (!c->out) {
		printf("%s: %s%s%s%s\n", name, action, detail ? " (" : "", detail ? detail : "",
		       detail ? ")" : "");
		fflush(stdout);
		return;
	}
	o = json_pack("{s:s, s:s}", "name", name, "action", action);
	if (o && detail)
		json_object_set_new(o, "reason", json_string(detail));
	if (o)
		json_array_append_new(c->out, o);
}

/*
 * Why the loaded @ti is not what @e lists, or NULL when it is.  *@keep is
 * set when the answer cannot be known now (the file cannot be read, say
 * an NFS mount is away, or the module shows no paths to this user): a
 * table that serves from its pinned pages is then not given up for a
 * load that would fail.
 */
static const char *differs(const struct tconf_entry *e, const struct table_info *ti,
			   int *keep)
{
	char real[PATH_MAX];
	struct st_engram eg;

	*keep = 0;
	if (ti->state == ENGRAM_TABLE_FAILED)
		return "it failed";
	*keep = 1;
	if (!TI_HAS(ti, ENGRAM_A_TABLE_PATH) || !ti->path[0])
		return "the module shows its file only to CAP_NET_ADMIN; kept loaded";
	if (!realpath(e->file, real))
		return "the file cannot be resolved now; kept loaded";
	*keep = 0;
	if (strcmp(real, ti->path))
		return "loaded from another file";
	if (e->has_sha256 &&
	    (!TI_HAS(ti, ENGRAM_A_TABLE_SHA256) ||
	     memcmp(e->sha256, ti->sha256, sizeof(e->sha256))))
		return "another SHA-256";
	*keep = 1;
	if (table_geometry(e->file, e->tensor, &eg))
		return "the tensor cannot be read now; kept loaded";
	*keep = 0;
	if (eg.rows != ti->rows || eg.weight_offset != ti->weight_offset ||
	    eg.scale_offset != ti->scale_offset)
		return "another tensor or geometry";
	/* A module without shards reports no rows held: the whole table. */
	if (e->held_rows ?
	    !TI_HAS(ti, ENGRAM_A_TABLE_HELD_ROWS) || ti->held_first != e->held_first ||
	    ti->held_rows != e->held_rows :
	    TI_HAS(ti, ENGRAM_A_TABLE_HELD_ROWS) && ti->held_rows != ti->rows)
		return "other rows held";
	return NULL;
}

static int unload(struct sync_ctx *c, const char *name)
{
	int ret = table_cmd_name(&c->nl, ENGRAM_CMD_TABLE_UNLOAD, name);

	if (ret && ret != -ENOENT) {
		enl_perror(&c->nl, ret, "unload %s", name);
		return ret;
	}
	return 0;
}

static int sync_one(struct sync_ctx *c, const struct tconf_entry *e,
		    const struct table_info *loaded)
{
	const char *why = NULL;
	struct table_info ti;
	struct progress pg;
	int rc, keep = 0;

	if (loaded) {
		ti = *loaded;
		if (ti.state == ENGRAM_TABLE_LOADING) {
			/* Someone else's load (an earlier start of the unit): see how it ends. */
			progress_init(&pg, "waiting for the load of", e->name, c->show_progress);
			rc = table_wait(&c->nl, e->name, ENGRAM_TABLE_LOADING, &pg, &ti);
			progress_end(&pg);
			if (rc == -EINTR)
				return EXIT_INTR;
			if (rc == -ENOENT) {
				loaded = NULL;
			} else if (rc) {
				enl_perror(&c->nl, rc, "%s: waiting for the load", e->name);
				report(c, e->name, "failed", "waiting for its load");
				return 0;
			}
		}
	}
	if (loaded) {
		why = differs(e, &ti, &keep);
		if (!why) {
			report(c, e->name, "unchanged", NULL);
			return 0;
		}
		if (keep) {
			report(c, e->name, "failed", why);
			return 0;
		}
	}
	if (c->dry_run) {
		report(c, e->name, loaded ? "to replace" : "to load", why);
		return 0;
	}
	if (loaded && unload(c, e->name)) {
		report(c, e->name, "failed", "cannot unload the table loaded now");
		return 0;
	}
	svc_status("loading %s from %s", e->name, e->file);
	rc = table_load_file(&c->nl, e->file, e->tensor, e->name,
			     e->has_sha256 ? e->sha256 : NULL, e->held_first, e->held_rows,
			     c->show_progress, 0, &ti);
	if (rc == EXIT_INTR) {
		report(c, e->name, "failed", "interrupted");
		return EXIT_INTR;
	}
	if (rc)
		report(c, e->name, "failed", loaded ? why : NULL);
	else
		report(c, e->name, loaded ? "replaced" : "loaded", why);
	return 0;
}

static int finish(struct sync_ctx *c, int rc)
{
	table_signals_disarm();
	if (c->out) {
		if (json_print(c->out, opts.pretty) && rc == EXIT_OK)
			rc = EXIT_FAIL;
		c->out = NULL;
	}
	enl_close(&c->nl);
	if (rc == EXIT_OK && c->failed)
		rc = EXIT_FAIL;
	return rc;
}

int table_sync(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "prune", no_argument, NULL, 'r' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "no-progress", no_argument, NULL, 'P' },
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	const char *path = TABLESCONF_DEFAULT;
	struct sync_ctx c = { .show_progress = 1 };
	struct table_info *v = NULL;
	struct tconf tc;
	int prune = 0, ch, ret, rc = EXIT_USAGE;
	size_t i, n = 0;

	optind = 0;
	while ((ch = getopt_long(argc, argv, COMMON_SHORTOPTS "c:", longopts, NULL)) != -1) {
		switch (common_opt(ch, argv, "table sync", usage_sync, &rc)) {
		case 1:
			continue;
		case -1:
			return rc;
		}
		switch (ch) {
		case 'c':
			path = optarg;
			break;
		case 'r':
			prune = 1;
			break;
		case 'n':
			c.dry_run = 1;
			break;
		case 'P':
			c.show_progress = 0;
			break;
		}
	}
	if (optind != argc)
		return usage_error("table sync", "unexpected argument '%s'", argv[optind]);
	/* The whole file is checked before anything is touched. */
	if (read_conf(path, &tc))
		return EXIT_FAIL;
	if (nl_open_or_explain(&c.nl)) {
		tconf_free(&tc);
		return EXIT_FAIL;
	}
	if (opts.json)
		c.out = json_array();
	/* Once for the whole run: a stop between two loads is not lost. */
	table_signals_arm();
	ret = table_dump(&c.nl, &v, &n);
	if (ret) {
		rc = EXIT_FAIL;
		goto out;
	}
	rc = EXIT_OK;
	for (i = 0; prune && i < n && !table_interrupted(); i++) {
		if (tconf_find(&tc, v[i].name))
			continue;
		if (c.dry_run)
			report(&c, v[i].name, "to unload", "not listed");
		else if (unload(&c, v[i].name))
			report(&c, v[i].name, "failed", "cannot unload");
		else
			report(&c, v[i].name, "unloaded", "not listed");
	}
	if (table_interrupted())
		rc = EXIT_INTR;
	svc_status("%zu tables listed in %s", tc.n, path);
	for (i = 0; i < tc.n && rc == EXIT_OK; i++) {
		const struct table_info *loaded = NULL;
		size_t k;

		for (k = 0; k < n && !loaded; k++)
			if (!strcmp(v[k].name, tc.v[i].name))
				loaded = &v[k];
		rc = sync_one(&c, &tc.v[i], loaded);
		if (rc == EXIT_OK && table_interrupted())
			rc = EXIT_INTR;
	}
	/*
	 * READY=1 only when every listed table serves: the unit's start then
	 * fails on engramctl's exit status, with this line in its status.
	 */
	if (rc == EXIT_OK && !c.failed && !c.dry_run)
		svc_ready("%zu tables serving (%u loaded now, %u unchanged)", tc.n, c.loaded,
			  c.unchanged);
	else if (rc == EXIT_OK && c.failed)
		svc_status("%u of %zu tables failed (%u loaded now, %u unchanged)", c.failed, tc.n,
			   c.loaded, c.unchanged);
out:
	free(v);
	tconf_free(&tc);
	return finish(&c, rc);
}

int table_unload_config(const char *path)
{
	struct sync_ctx c = { 0 };
	struct tconf tc;
	size_t i;
	int ret;

	if (read_conf(path, &tc))
		return EXIT_FAIL;
	if (nl_open_or_explain(&c.nl)) {
		tconf_free(&tc);
		return EXIT_FAIL;
	}
	if (opts.json)
		c.out = json_array();
	svc_status("unloading the %zu tables listed in %s", tc.n, path);
	for (i = 0; i < tc.n; i++) {
		ret = table_cmd_name(&c.nl, ENGRAM_CMD_TABLE_UNLOAD, tc.v[i].name);
		if (ret == -ENOENT) {
			report(&c, tc.v[i].name, "not loaded", NULL);
		} else if (ret) {
			enl_perror(&c.nl, ret, "unload %s", tc.v[i].name);
			report(&c, tc.v[i].name, "failed", NULL);
		} else {
			report(&c, tc.v[i].name, "unloaded", NULL);
		}
	}
	tconf_free(&tc);
	return finish(&c, EXIT_OK);
}
