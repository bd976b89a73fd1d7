// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl - control the engram_rdma kernel module.
 *
 * engramctl [-j] [-p] OBJECT COMMAND [ARGS]; main.c only parses the global
 * options and hands the rest to the object's file.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "engramctl.h"

static void usage(FILE *f)
{
	fputs("Usage: engramctl [-j] [-p] OBJECT COMMAND [ARGS]\n"
	      "\n"
	      "Objects and commands:\n"
	      "  table list\n"
	      "  table show [NAME]\n"
	      "  table load FILE --tensor PREFIX [--name NAME] [--sha256 HEX] [--rows FIRST-LAST]\n"
	      "             [--no-progress]\n"
	      "  table unload NAME | --config FILE\n"
	      "  table verify NAME [--no-progress]\n"
	      "  table sync [--config FILE] [--prune] [--dry-run] [--no-progress]\n"
	      "  table drain NAME | --all [--wait[=SECONDS]] [--quiet MS] [--no-progress]\n"
	      "  table undrain NAME | --all\n"
	      "  stats [show] [NAME] [--prometheus [--output FILE]]\n"
	      "  link list | link show [ID] | link tables [ID] | link add URL | link del ID\n"
	      "  listen show | listen add URL | listen del URL\n"
	      "  listen allow show | listen allow add PREFIX | listen allow del PREFIX\n"
	      "  mktable FILE --rows N [--seed S] [--prefix P]... [--pad-before BYTES]\n"
	      "          [--pad-after BYTES] [--meta KEY=VALUE]... [--no-progress]\n"
	      "  monitor [all | table | link | listen]... [--count N]\n"
	      "\n"
	      "Shortcuts: load, unload, list, show and verify stand for \"table COMMAND\".\n"
	      "Any word may be shortened to a prefix; the first object or command that\n"
	      "begins with it, in the order above, is taken (\"engramctl t l\" is\n"
	      "\"engramctl table list\", \"engramctl l\" is \"engramctl link\").\n"
	      "\n"
	      "Options:\n"
	      "  -j, --json      print results as JSON on stdout\n"
	      "  -p, --pretty    indent JSON output\n"
	      "  -h, --help      this help; \"engramctl OBJECT help\" for one object\n"
	      "  -V, --version   print the version\n", f);
}

/*
 * Objects, then the table commands that stand alone; a prefix picks the
 * first that it begins, as in iproute2 ("engramctl l" is "link").
 */
static const struct cli_cmd objects[] = {
	{ "table", cmd_table },
	{ "stats", cmd_stats },
	{ "link", cmd_link },
	{ "listen", cmd_listen },
	{ "mktable", cmd_mktable },
	{ "monitor", cmd_monitor },
	{ "list", cmd_table_sub },
	{ "show", cmd_table_sub },
	{ "load", cmd_table_sub },
	{ "unload", cmd_table_sub },
	{ "verify", cmd_table_sub },
	{ "help", NULL },
	{ NULL, NULL },
};

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "pretty", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const struct cli_cmd *c;
	const char *obj;
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+jphV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			opts.json = 1;
			break;
		case 'p':
			opts.pretty = 1;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("engramctl %s (netlink family %s version %d)\n", ENGRAMCTL_VERSION,
			       ENGRAM_GENL_NAME, ENGRAM_GENL_VERSION);
			return EXIT_OK;
		default:
			err_msg("unknown option '%s'", argv[optind - 1]);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	obj = argv[optind];
	argc -= optind;
	argv += optind;

	c = cli_find(objects, obj);
	if (c && c->run)
		return c->run(argc, argv);
	if (c) {
		usage(stdout);
		return EXIT_OK;
	}
	err_msg("unknown object '%s'", obj);
	usage(stderr);
	return EXIT_USAGE;
}
