// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl table load|unload|list|show|verify: the commands; sync and
 * drain have files of their own (sync.c, drain.c).  What they share
 * (loading, waiting, the dump) is in tableops.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "engramctl.h"
#include "fmt.h"
#include "jsonout.h"
#include "table.h"

void usage_table(FILE *f)
{
	fputs("Usage: engramctl [-j] table load FILE --tensor PREFIX [--name NAME] [--sha256 HEX]\n"
	      "                                [--rows FIRST-LAST] [--no-progress]\n"
	      "       engramctl [-j] table unload NAME | --config FILE\n"
	      "       engramctl [-j] table list\n"
	      "       engramctl [-j] table show [NAME]\n"
	      "       engramctl [-j] table verify NAME [--no-progress]\n"
	      "       engramctl [-j] table sync [--config FILE] [--prune] [--dry-run] [--no-progress]\n"
	      "       engramctl [-j] table drain NAME | --all [--wait[=SECONDS]] [--quiet MS]\n"
	      "                                 [--no-progress]\n"
	      "       engramctl [-j] table undrain NAME | --all\n"
	      "\n"
	      "load     pin PREFIX.weight [N,256] F8_E4M3 and PREFIX.scale [N,8] F8_E8M0 of the\n"
	      "         safetensors FILE in the page cache and serve them as table NAME\n"
	      "         (default: PREFIX); --sha256 is the expected digest of the whole file;\n"
	      "         --rows makes this host a shard: it pins and serves those rows only\n"
	      "unload   cancel a load or verify in progress and release the table\n"
	      "list     one line per table\n"
	      "show     every attribute of one table (all tables without NAME)\n"
	      "verify   re-hash the pinned pages and compare with the load-time digest\n"
	      "sync     load what the tables file lists and is missing, leave what is loaded\n"
	      "         and identical alone (engram-rdma-tables.conf(5); see --help of sync)\n"
	      "drain    go on serving, but send GPU nodes' new fetches to other hosts;\n"
	      "         --wait until nothing is in flight (see --help of drain)\n"
	      "undrain  send new fetches to the table again\n", f);
}

static int table_load(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tensor", required_argument, NULL, 't' },
		{ "name", required_argument, NULL, 'n' },
		{ "sha256", required_argument, NULL, 's' },
		{ "rows", required_argument, NULL, 'r' },
		{ "no-progress", no_argument, NULL, 'P' },
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	const char *prefix = NULL, *name = NULL, *sha_hex = NULL, *rows = NULL, *file;
	uint64_t held_first = 0, held_rows = 0;
	int show_progress = 1, c, rc = EXIT_FAIL;
	uint8_t sha[ENGRAM_SHA256_LEN];
	char err[128];
	struct enl nl;

	optind = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS "t:n:s:r:", longopts, NULL)) != -1) {
		switch (common_opt(c, argv, "table load", usage_table, &rc)) {
		case 1:
			continue;
		case -1:
			return rc;
		}
		switch (c) {
		case 't':
			prefix = optarg;
			break;
		case 'n':
			name = optarg;
			break;
		case 's':
			sha_hex = optarg;
			break;
		case 'r':
			rows = optarg;
			break;
		case 'P':
			show_progress = 0;
			break;
		}
	}
	if (rows && parse_row_range(rows, &held_first, &held_rows))
		return usage_error("table load", "--rows takes FIRST-LAST, two row numbers, "
				   "FIRST not above LAST");
	if (optind != argc - 1)
		return usage_error("table load", optind >= argc ? "FILE missing"
								: "one FILE only");
	file = argv[optind];
	if (!prefix)
		return usage_error("table load", "--tensor PREFIX missing");
	if (!name)
		name = prefix;
	if (table_check_name(name, name == prefix ? "; give one with --name" : ""))
		return EXIT_USAGE;
	if (sha_hex && parse_hex(sha_hex, sha, sizeof(sha), err, sizeof(err))) {
		err_msg("--sha256: %s", err);
		return EXIT_USAGE;
	}
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	rc = table_load_file(&nl, file, prefix, name, sha_hex ? sha : NULL, held_first, held_rows,
			     show_progress, 1, NULL);
	enl_close(&nl);
	return rc;
}

/* Commands that take exactly one NAME and the common options. */
static int one_name(int argc, char **argv, const char *cmd, const char **name, int *progress)
{
	static const struct option longopts[] = {
		{ "no-progress", no_argument, NULL, 'P' },
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	int c, rc = EXIT_USAGE;

	optind = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS, longopts, NULL)) != -1) {
		switch (common_opt(c, argv, cmd, usage_table, &rc)) {
		case 1:
			continue;
		case -1:
			return rc;
		}
		if (c == 'P' && progress) {
			*progress = 0;
			continue;
		}
		return usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
	}
	if (optind != argc - 1)
		return usage_error(cmd, optind >= argc ? "NAME missing" : "one NAME only");
	*name = argv[optind];
	return table_check_name(*name, "") ? EXIT_USAGE : -1;
}

static int table_unload(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	const char *name, *config = NULL;
	int c, ret, rc = EXIT_USAGE;
	struct enl nl;

	optind = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS "c:", longopts, NULL)) != -1) {
		switch (common_opt(c, argv, "table unload", usage_table, &rc)) {
		case 1:
			continue;
		case -1:
			return rc;
		}
		if (c == 'c')
			config = optarg;
	}
	/* "unload --config FILE": every table the tables file lists (sync.c). */
	if (config)
		return optind == argc ? table_unload_config(config) :
			usage_error("table unload", "NAME or --config FILE, not both");
	if (optind != argc - 1)
		return usage_error("table unload", optind >= argc ? "NAME missing" : "one NAME only");
	name = argv[optind];
	if (table_check_name(name, ""))
		return EXIT_USAGE;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	ret = table_cmd_name(&nl, ENGRAM_CMD_TABLE_UNLOAD, name);
	if (ret)
		enl_perror(&nl, ret, "unload %s", name);
	enl_close(&nl);
	return ret ? EXIT_FAIL : EXIT_OK;
}

static int table_verify(int argc, char **argv)
{
	char hex[2 * ENGRAM_SHA256_LEN + 1];
	int show_progress = 1, ret, rc = EXIT_FAIL;
	struct table_info ti;
	struct progress pg;
	const char *name = NULL;
	struct enl nl;

	ret = one_name(argc, argv, "table verify", &name, &show_progress);
	if (ret >= 0)
		return ret;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	table_signals_catch();
	ret = table_cmd_name(&nl, ENGRAM_CMD_TABLE_VERIFY, name);
	if (ret) {
		enl_perror(&nl, ret, "verify %s", name);
		goto out;
	}
	progress_init(&pg, "verifying", name, show_progress);
	ret = table_wait(&nl, name, ENGRAM_TABLE_VERIFYING, &pg, &ti);
	progress_end(&pg);
	if (ret == -EINTR) {
		/* There is no verify-cancel; unloading would be far worse than waiting. */
		err_msg("%s: stopped waiting; the verify goes on in the kernel", name);
		rc = EXIT_INTR;
		goto out;
	}
	if (ret) {
		enl_perror(&nl, ret, "%s: waiting for the verify", name);
		goto out;
	}
	if (opts.json)
		print_json_table(&ti);
	if (TI_HAS(&ti, ENGRAM_A_TABLE_VERIFY_RESULT) &&
	    ti.verify_result == ENGRAM_VERIFY_MISMATCH) {
		if (!opts.json)
			printf("%s: verify MISMATCH: no longer served (unload or load it again)\n",
			       name);
	} else if (ti.state == ENGRAM_TABLE_FAILED) {
		print_table_error(&ti, "table failed during verify");
	} else if (!TI_HAS(&ti, ENGRAM_A_TABLE_VERIFY_RESULT)) {
		err_msg("%s: kernel reported no verify result", name);
	} else if (ti.verify_result == ENGRAM_VERIFY_OK) {
		if (!opts.json)
			printf("%s: verify ok (sha256 %s)\n", name,
			       fmt_hex(hex, ti.sha256, ENGRAM_SHA256_LEN));
		rc = EXIT_OK;
	} else {
		print_table_error(&ti, ti.verify_result == ENGRAM_VERIFY_ERROR ?
				  "verify could not run to the end" : "verify did not run");
	}
out:
	enl_close(&nl);
	return rc;
}

static int print_tables(const struct table_info *v, size_t n, int detail)
{
	json_t *arr;
	size_t i;

	if (opts.json) {
		arr = json_array();
		for (i = 0; arr && i < n; i++) {
			if (json_array_append_new(arr, table_info_json(&v[i]))) {
				json_decref(arr);
				arr = NULL;
			}
		}
		return json_print(arr, opts.pretty) ? EXIT_FAIL : EXIT_OK;
	}
	for (i = 0; i < n; i++) {
		if (detail) {
			if (i)
				putchar('\n');
			table_info_print_detail(stdout, &v[i]);
		} else {
			table_info_print_line(stdout, &v[i]);
		}
	}
	return EXIT_OK;
}

static int table_list(int argc, char **argv, int show)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd = show ? "table show" : "table list";
	struct table_info ti, *v = NULL;
	size_t n = 0;
	struct enl nl;
	int c, ret = 0, rc = EXIT_USAGE;

	optind = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS, longopts, NULL)) != -1) {
		if (common_opt(c, argv, cmd, usage_table, &rc) < 0)
			return rc;
	}
	if (argc - optind > (show ? 1 : 0))
		return usage_error(cmd, "unexpected argument '%s'", argv[argc - 1]);
	if (show && optind < argc && table_check_name(argv[optind], ""))
		return EXIT_USAGE;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;

	if (show && optind < argc) {
		ret = table_get(&nl, argv[optind], &ti);
		if (ret)
			enl_perror(&nl, ret, "table %s", argv[optind]);
		else
			rc = print_tables(&ti, 1, 1);
		goto out;
	}
	ret = table_dump(&nl, &v, &n);
	if (ret)
		goto out;
	rc = print_tables(v, n, show);
out:
	if (ret)
		rc = EXIT_FAIL;
	free(v);
	enl_close(&nl);
	return rc;
}

static int table_list_brief(int argc, char **argv)
{
	return table_list(argc, argv, 0);
}

static int table_show(int argc, char **argv)
{
	return table_list(argc, argv, 1);
}

/* Most used first: a prefix picks the first command it begins. */
static const struct cli_cmd table_cmds[] = {
	{ "list", table_list_brief },
	{ "show", table_show },
	{ "load", table_load },
	{ "unload", table_unload },
	{ "verify", table_verify },
	{ "sync", table_sync },
	{ "drain", table_drain },
	{ "undrain", table_undrain },
	{ "mktable", cmd_mktable },
	{ "help", NULL },
	{ NULL, NULL },
};

/* argv[0] is a table command ("load", or a prefix of one), as in "engramctl load". */
int cmd_table_sub(int argc, char **argv)
{
	const struct cli_cmd *c = cli_find(table_cmds, argv[0]);

	if (!c || !c->run) {
		err_msg("table: unknown command '%s'", argv[0]);
		usage_table(stderr);
		return EXIT_USAGE;
	}
	return c->run(argc, argv);
}

/* argv[0] is "table"; no command means list, as "ip link" means "ip link show". */
int cmd_table(int argc, char **argv)
{
	return cli_dispatch("table", table_cmds, "list", argc, argv, usage_table);
}
