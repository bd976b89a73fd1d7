// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl listen allow add|del|show: the client addresses a host accepts
 * connections from.  No list at all means any peer that can reach a
 * listening address; a list whose last entry was deleted, no peer.
 *
 * Entries are parsed by the kernel, which can only log why it refused one;
 * the same parser (kmod/prefix.c, built here in its userspace mode) is run
 * again after such a refusal so that the reason reaches the user too.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/attr.h>

#include "engramctl.h"
#include "jsonout.h"
#include "prefix.h"

void usage_listen_allow(FILE *f)
{
	fputs("Usage: engramctl [-j] listen allow add PREFIX\n"
	      "       engramctl [-j] listen allow del PREFIX\n"
	      "       engramctl [-j] listen allow show\n"
	      "\n"
	      "add      accept connections from PREFIX: IP or IP/LEN (IPv6 without brackets,\n"
	      "         no address bits past LEN; 0.0.0.0/0 is every IPv4 peer, ::/0 every IPv6 one)\n"
	      "del      remove PREFIX; connections already open are kept\n"
	      "show     one entry per line; \"any\" while there is no list, \"none\" when its\n"
	      "         last entry was deleted (also: list); needs CAP_NET_ADMIN\n"
	      "\n"
	      "Until the list is given an entry, any peer that can reach a listening address\n"
	      "may connect; from then on, every other peer is refused.  Deleting the last\n"
	      "entry refuses every peer until one is added (0.0.0.0/0 and ::/0 let all in).\n"
	      "This is a filter on source addresses, not authentication.\n", f);
}

static int parse_args(int argc, char **argv, const char *cmd, int n, const char *what)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	int c, rc = EXIT_USAGE;

	optind = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS, longopts, NULL)) != -1) {
		if (common_opt(c, argv, cmd, usage_listen_allow, &rc) < 0)
			return rc;
	}
	if (argc - optind < n)
		return usage_error(cmd, "%s missing", what);
	if (argc - optind > n)
		return usage_error(cmd, "unexpected argument '%s'", argv[optind + n]);
	return -1;
}

static int allow_change(int argc, char **argv, int add)
{
	const char *cmd = add ? "listen allow add" : "listen allow del", *entry;
	struct engram_prefix p;
	char why[200];
	struct enl nl;
	int ret;

	ret = parse_args(argc, argv, cmd, 1, "PREFIX");
	if (ret >= 0)
		return ret;
	entry = argv[optind];
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	ret = enl_request_str(&nl, add ? ENGRAM_CMD_ALLOW_ADD : ENGRAM_CMD_ALLOW_DEL,
			      ENGRAM_A_ALLOW, entry, NULL, NULL);
	if (ret) {
		enl_perror(&nl, ret, "%s %s", cmd, entry);
		/* The kernel refused the text itself: say what its parser objects to. */
		if (enl_refused_attr(&nl, ret, ENGRAM_A_ALLOW) &&
		    engram_prefix_parse(entry, strlen(entry), &p, why, sizeof(why)))
			err_msg("%s: %s", entry, why);
	}
	enl_close(&nl);
	return ret ? EXIT_FAIL : EXIT_OK;
}

/* The entries, in the kernel's order (the order they were added in). */
struct allow_list {
	char **v;
	size_t n, cap;
	int mode;	/* enum engram_allow_mode, -1 when the kernel did not say */
};

static int reply_allow(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	struct allow_list *l = arg;
	char **nv, *s;

	if (enl_parse(msg, tb))
		return -EPROTO;
	if (tb[ENGRAM_A_ALLOW_MODE])
		l->mode = nla_get_u8(tb[ENGRAM_A_ALLOW_MODE]);
	if (!tb[ENGRAM_A_ALLOW])	/* no entry: the mode alone */
		return tb[ENGRAM_A_ALLOW_MODE] ? 0 : -EPROTO;
	nv = enl_grow(l->v, &l->cap, l->n, sizeof(*l->v));
	if (!nv)
		return -ENOMEM;
	l->v = nv;
	s = strdup(nla_get_string(tb[ENGRAM_A_ALLOW]));
	if (!s)
		return -ENOMEM;
	l->v[l->n++] = s;
	return 0;
}

static void allow_list_free(struct allow_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int allow_fetch(struct enl *nl, struct allow_list *l)
{
	l->mode = -1;
	return enl_dump(nl, ENGRAM_CMD_ALLOW_GET, reply_allow, l);
}

/* Without entries: what an empty answer means (older modules: any). */
static const char *allow_empty_word(const struct allow_list *l)
{
	return l->mode == ENGRAM_ALLOW_NONE ? "none" : "any";
}

/**
 * allow_print_line() - the allow-list's line of listen show
 * @nl: an open family
 * @f: where to print
 *
 * "allow: ENTRY ENTRY ...", "allow: any (no allow-list: any peer may
 * connect)" or "allow: none (the allow-list is empty: every peer is
 * refused)"; without CAP_NET_ADMIN, a line saying the list is not shown.
 *
 * Return: 0, or a negative errno after explaining it on stderr.
 */
int allow_print_line(struct enl *nl, FILE *f)
{
	struct allow_list l = { 0 };
	size_t i;
	int ret;

	ret = allow_fetch(nl, &l);
	if (ret == -EPERM) {
		fputs("allow: not shown (reading it needs CAP_NET_ADMIN)\n", f);
		allow_list_free(&l);
		return 0;
	}
	if (ret) {
		enl_perror(nl, ret, "read the allow-list");
		allow_list_free(&l);
		return ret;
	}
	fputs("allow:", f);
	if (!l.n)
		fprintf(f, " %s", l.mode == ENGRAM_ALLOW_NONE ?
			"none (the allow-list is empty: every peer is refused)" :
			"any (no allow-list: any peer may connect)");
	for (i = 0; i < l.n; i++)
		fprintf(f, " %s", l.v[i]);
	fputc('\n', f);
	allow_list_free(&l);
	return 0;
}

static json_t *allow_json(const char *entry)
{
	struct engram_prefix p;
	json_t *o = json_object();
	char why[200];

	if (!o || json_set(o, "prefix", json_string(entry))) {
		json_decref(o);
		return NULL;
	}
	/* The kernel's canonical text always parses; the details are a convenience. */
	if (!engram_prefix_parse(entry, strlen(entry), &p, why, sizeof(why)) &&
	    (json_set(o, "family", json_string(p.family == AF_INET ? "ipv4" : "ipv6")) ||
	     json_set(o, "length", json_integer(p.len)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int allow_show(int argc, char **argv)
{
	struct allow_list l = { 0 };
	struct enl nl;
	json_t *arr;
	int ret, rc = EXIT_FAIL;
	size_t i;

	ret = parse_args(argc, argv, "listen allow show", 0, "");
	if (ret >= 0)
		return ret;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	ret = allow_fetch(&nl, &l);
	if (ret) {
		enl_perror(&nl, ret, "read the allow-list");
		goto out;
	}
	if (opts.json) {
		arr = json_array();
		for (i = 0; arr && i < l.n; i++) {
			if (json_array_append_new(arr, allow_json(l.v[i]))) {
				json_decref(arr);
				arr = NULL;
			}
		}
		rc = json_print(arr, opts.pretty) ? EXIT_FAIL : EXIT_OK;
	} else {
		if (!l.n)
			puts(allow_empty_word(&l));
		for (i = 0; i < l.n; i++)
			puts(l.v[i]);
		rc = EXIT_OK;
	}
out:
	allow_list_free(&l);
	enl_close(&nl);
	return rc;
}

static int allow_add(int argc, char **argv)
{
	return allow_change(argc, argv, 1);
}

static int allow_del(int argc, char **argv)
{
	return allow_change(argc, argv, 0);
}

static const struct cli_cmd allow_cmds[] = {
	{ "show", allow_show },
	{ "list", allow_show },
	{ "add", allow_add },
	{ "del", allow_del },
	{ "delete", allow_del },
	{ "help", NULL },
	{ NULL, NULL },
};

/**
 * cmd_listen_allow() - engramctl listen allow ...
 * @argc: arguments from "allow" on
 * @argv: argv[0] is "allow"
 *
 * Return: the exit code.
 */
int cmd_listen_allow(int argc, char **argv)
{
	return cli_dispatch("listen allow", allow_cmds, "show", argc, argv, usage_listen_allow);
}
