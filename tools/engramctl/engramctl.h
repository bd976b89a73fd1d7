/* SPDX-License-Identifier: GPL-2.0 */
/* What the command files share: options, exit codes, error printing. */
#ifndef ENGRAMCTL_H
#define ENGRAMCTL_H

#include <stdio.h>

#include "nl.h"

/* engram-rdma's version: dkms.conf's PACKAGE_VERSION (unit/version_test.sh). */
#define ENGRAMCTL_VERSION	"0.1.0"

enum {
	EXIT_OK		= 0,
	EXIT_FAIL	= 1,
	EXIT_USAGE	= 2,
	EXIT_INTR	= 130,	/* 128 + SIGINT, as shells report it */
};

struct global_opts {
	int json;
	int pretty;
};

extern struct global_opts opts;

/* "engramctl: <message>" on stderr. */
void err_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Unknown option or missing argument for "engramctl @cmd": message, hint, EXIT_USAGE. */
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Opens the netlink family, explaining a failure on stderr. */
int nl_open_or_explain(struct enl *nl);

/* getopt_long options every command takes: -j, -p and -h. */
#define COMMON_LONGOPTS_JSON	{ "json", no_argument, NULL, 'j' }
#define COMMON_LONGOPTS_PRETTY	{ "pretty", no_argument, NULL, 'p' }
#define COMMON_LONGOPTS_HELP	{ "help", no_argument, NULL, 'h' }
#define COMMON_SHORTOPTS	":jph"

/*
 * Handles an option getopt_long returned that is common to every command.
 * Returns 1 when handled, -1 to exit with *@rc (help printed or bad option),
 * 0 when @c is the caller's to handle.
 */
int common_opt(int c, char **argv, const char *cmd, void (*usage)(FILE *), int *rc);

/*
 * One word of a command line and what it runs.  A command line may give
 * the word or any prefix of it; as in iproute2, a prefix picks the first
 * command of the table that begins with it, so tables list their most
 * used commands first ("engramctl t l" is "engramctl table list").
 */
struct cli_cmd {
	const char *name;
	/* Called with argv[0] the word; NULL: print the usage on stdout. */
	int (*run)(int argc, char **argv);
};

/* The entry of @cmds, ended by a NULL name, that @word names; NULL if none. */
const struct cli_cmd *cli_find(const struct cli_cmd *cmds, const char *word);
/*
 * Run "OBJECT WORD ARGS" (argv[0] is OBJECT): WORD's command with
 * argv + 1, or without a WORD @dflt's command with argv as it is.  -h,
 * --help and help print @usage on stdout; an unknown WORD is an error
 * that names @what and prints @usage on stderr.  Returns the exit code.
 */
int cli_dispatch(const char *what, const struct cli_cmd *cmds, const char *dflt,
		 int argc, char **argv, void (*usage)(FILE *));

int cmd_table(int argc, char **argv);
int cmd_table_sub(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_mktable(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
int cmd_listen(int argc, char **argv);
int cmd_link(int argc, char **argv);
int cmd_listen_allow(int argc, char **argv);
struct link_info;
/* Every link as LINK_GET reports it, into *@v (to be freed); 0 or a negative errno. */
int link_dump(struct enl *nl, struct link_info **v, size_t *n);
/* "allow: ..." for listen show (allow.c); 0 or a negative errno, explained. */
int allow_print_line(struct enl *nl, FILE *f);

void usage_table(FILE *f);
void usage_sync(FILE *f);
/* engramctl table sync, and table unload --config FILE (sync.c). */
int table_sync(int argc, char **argv);
int table_unload_config(const char *path);
void usage_drain(FILE *f);
/* engramctl table drain and table undrain (drain.c). */
int table_drain(int argc, char **argv);
int table_undrain(int argc, char **argv);
void usage_stats(FILE *f);
void usage_mktable(FILE *f);
void usage_listen(FILE *f);
void usage_link(FILE *f);
void usage_listen_allow(FILE *f);

#endif /* ENGRAMCTL_H */
