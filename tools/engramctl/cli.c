// SPDX-License-Identifier: GPL-2.0
/* What every command shares: global options, usage errors, opening the family. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engramctl.h"

struct global_opts opts;

void err_msg(const char *fmt, ...)
{
	va_list ap;

	fputs("engramctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "engramctl: %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'engramctl %s --help'.\n", cmd);
	return EXIT_USAGE;
}

int common_opt(int c, char **argv, const char *cmd, void (*usage_fn)(FILE *), int *rc)
{
	char shortopt[3] = { '-', (char)optopt, '\0' };
	/* A missing argument can only be the last word; getopt names unknown short ones. */
	const char *bad = c != ':' && optopt ? shortopt : argv[optind - 1];

	switch (c) {
	case 'j':
		opts.json = 1;
		return 1;
	case 'p':
		opts.pretty = 1;
		return 1;
	case 'h':
		usage_fn(stdout);
		*rc = EXIT_OK;
		return -1;
	case ':':
		*rc = usage_error(cmd, "option '%s' needs an argument", bad);
		return -1;
	case '?':
		*rc = usage_error(cmd, "unknown option '%s'", bad);
		return -1;
	default:
		return 0;
	}
}

int nl_open_or_explain(struct enl *nl)
{
	int ret = enl_open(nl);

	if (ret == -ENOENT)
		err_msg("engram_rdma module not loaded (no generic netlink family \"%s\")",
			ENGRAM_GENL_NAME);
	else if (ret)
		err_msg("cannot open generic netlink socket: %s", strerror(-ret));
	return ret;
}

const struct cli_cmd *cli_find(const struct cli_cmd *cmds, const char *word)
{
	const struct cli_cmd *c;
	size_t len = strlen(word);

	if (!len)
		return NULL;
	for (c = cmds; c->name; c++)
		if (!strcmp(c->name, word))
			return c;
	for (c = cmds; c->name; c++)
		if (!strncmp(c->name, word, len))
			return c;
	return NULL;
}

int cli_dispatch(const char *what, const struct cli_cmd *cmds, const char *dflt,
		 int argc, char **argv, void (*usage)(FILE *))
{
	const struct cli_cmd *c;
	const char *word = argc > 1 ? argv[1] : dflt;

	if (!strcmp(word, "-h") || !strcmp(word, "--help")) {
		usage(stdout);
		return EXIT_OK;
	}
	c = cli_find(cmds, word);
	if (!c) {
		err_msg("%s: unknown command '%s'", what, word);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!c->run) {
		usage(stdout);
		return EXIT_OK;
	}
	return argc > 1 ? c->run(argc - 1, argv + 1) : c->run(argc, argv);
}
