// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl listen add|del|show and engramctl link add|del|list|show: the
 * addresses a host serves on, and the connections a GPU node keeps to hosts.
 *
 * URLs are parsed by the kernel, which can only log why it refused one; the
 * same parser (kmod/url.c, built here in its userspace mode) is run again
 * after such a refusal so that the reason reaches the user too.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "engramctl.h"
#include "fmt.h"
#include "jsonout.h"
#include "linkinfo.h"
#include "url.h"

void usage_listen(FILE *f)
{
	fputs("Usage: engramctl [-j] listen add URL\n"
	      "       engramctl [-j] listen del URL\n"
	      "       engramctl [-j] listen show\n"
	      "       engramctl [-j] listen allow add|del PREFIX | listen allow show\n"
	      "\n"
	      "add      serve tables on URL: rdma://IP[:PORT] or tcp://IP[:PORT] (port 18515\n"
	      "         by default; IPv6 in brackets; no wildcard address)\n"
	      "del      stop serving on URL and close its connections\n"
	      "show     one line per listener (also: list), then the allow-list\n"
	      "allow    the client addresses accepted (see 'engramctl listen allow help')\n", f);
}

void usage_link(FILE *f)
{
	fputs("Usage: engramctl [-j] link add URL\n"
	      "       engramctl [-j] link del ID\n"
	      "       engramctl [-j] link list\n"
	      "       engramctl [-j] link show [ID]\n"
	      "       engramctl [-j] link tables [ID]\n"
	      "\n"
	      "add      connect to a host: rdma://SERVER[:PORT]@LOCAL or tcp://SERVER[:PORT]@LOCAL;\n"
	      "         prints the new link's id (the link connects in the background)\n"
	      "del      close link ID and fail the fetches waiting on it\n"
	      "list     one line per link\n"
	      "show     every attribute of link ID (all links without ID), and the tables\n"
	      "         its host serves\n"
	      "tables   each table the links' hosts serve (told apart by SHA-256) and the\n"
	      "         links that serve it, its replicas (only link ID's with ID)\n", f);
}

/* Common options only, then exactly @min..@max positional arguments. */
static int parse_args(int argc, char **argv, const char *cmd, void (*usage_fn)(FILE *),
		      int min, int max, const char *what)
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
		if (common_opt(c, argv, cmd, usage_fn, &rc) < 0)
			return rc;
	}
	if (argc - optind < min)
		return usage_error(cmd, "%s missing", what);
	if (argc - optind > max)
		return usage_error(cmd, "unexpected argument '%s'", argv[optind + max]);
	return -1;
}

static int parse_link_id(const char *cmd, const char *s, uint32_t *id)
{
	uint64_t v;

	if (parse_u64(s, &v, 0) || !v || v > UINT32_MAX) {
		usage_error(cmd, "link ID '%s' is not a number from 1 to %u", s, UINT32_MAX);
		return -EINVAL;
	}
	*id = (uint32_t)v;
	return 0;
}

/* The kernel refused the URL itself: say what its parser objects to. */
static void explain_url(const struct enl *nl, int ret, const char *url, enum engram_url_role role)
{
	struct engram_url u;
	char why[160];

	if (!enl_refused_attr(nl, ret, ENGRAM_A_URL))
		return;
	if (engram_url_parse(url, strlen(url), role, &u, why, sizeof(why)))
		err_msg("%s: %s", url, why);
}

static int listen_change(int argc, char **argv, int add)
{
	const char *cmd = add ? "listen add" : "listen del", *url;
	struct enl nl;
	int ret;

	ret = parse_args(argc, argv, cmd, usage_listen, 1, 1, "URL");
	if (ret >= 0)
		return ret;
	url = argv[optind];
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	ret = enl_request_str(&nl, add ? ENGRAM_CMD_LISTEN_ADD : ENGRAM_CMD_LISTEN_DEL,
			      ENGRAM_A_URL, url, NULL, NULL);
	if (ret) {
		enl_perror(&nl, ret, "%s %s", cmd, url);
		explain_url(&nl, ret, url, ENGRAM_URL_LISTEN);
	}
	enl_close(&nl);
	return ret ? EXIT_FAIL : EXIT_OK;
}

struct listen_list {
	struct listen_info *v;
	size_t n, cap;
};

static int reply_listen(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	struct listen_list *l = arg;
	struct listen_info *nv;

	nv = enl_grow(l->v, &l->cap, l->n, sizeof(*l->v));
	if (!nv)
		return -ENOMEM;
	l->v = nv;
	if (enl_parse(msg, tb) || listen_info_from_attrs(&l->v[l->n], tb))
		return -EPROTO;
	l->n++;
	return 0;
}

static int listen_show(int argc, char **argv)
{
	struct listen_list l = { 0 };
	struct enl nl;
	json_t *arr;
	int ret, rc = EXIT_FAIL;
	size_t i;

	ret = parse_args(argc, argv, "listen show", usage_listen, 0, 0, "");
	if (ret >= 0)
		return ret;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	ret = enl_dump(&nl, ENGRAM_CMD_LISTEN_GET, reply_listen, &l);
	if (ret) {
		enl_perror(&nl, ret, "list listeners");
		goto out;
	}
	/* In the kernel's order: the order they were added in. */
	if (opts.json) {
		arr = json_array();
		for (i = 0; arr && i < l.n; i++) {
			if (json_array_append_new(arr, listen_info_json(&l.v[i]))) {
				json_decref(arr);
				arr = NULL;
			}
		}
		rc = json_print(arr, opts.pretty) ? EXIT_FAIL : EXIT_OK;
	} else {
		for (i = 0; i < l.n; i++)
			listen_info_print_line(stdout, &l.v[i]);
		rc = allow_print_line(&nl, stdout) ? EXIT_FAIL : EXIT_OK;
	}
out:
	free(l.v);
	enl_close(&nl);
	return rc;
}

static int listen_add(int argc, char **argv)
{
	return listen_change(argc, argv, 1);
}

static int listen_del(int argc, char **argv)
{
	return listen_change(argc, argv, 0);
}

static const struct cli_cmd listen_cmds[] = {
	{ "show", listen_show },
	{ "list", listen_show },
	{ "add", listen_add },
	{ "del", listen_del },
	{ "delete", listen_del },
	{ "allow", cmd_listen_allow },
	{ "help", NULL },
	{ NULL, NULL },
};

int cmd_listen(int argc, char **argv)
{
	return cli_dispatch("listen", listen_cmds, "show", argc, argv, usage_listen);
}

struct link_list {
	struct link_info *v;
	size_t n, cap;
};

static int reply_link(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	struct link_list *l = arg;
	struct link_info *nv;

	nv = enl_grow(l->v, &l->cap, l->n, sizeof(*l->v));
	if (!nv)
		return -ENOMEM;
	l->v = nv;
	if (enl_parse(msg, tb) || link_info_from_attrs(&l->v[l->n], tb))
		return -EPROTO;
	l->n++;
	return 0;
}

static int cmp_id(const void *a, const void *b)
{
	uint32_t x = ((const struct link_info *)a)->id, y = ((const struct link_info *)b)->id;

	return x < y ? -1 : x > y;
}

/* @cat: the links' catalogs, for show; NULL for list. */
static int print_links(const struct link_list *l, const struct catalog *cat)
{
	json_t *arr, *o;
	size_t i;

	if (opts.json) {
		arr = json_array();
		for (i = 0; arr && i < l->n; i++) {
			o = link_info_json(&l->v[i], 0);
			if (json_array_append_new(arr, o) ||
			    (cat && json_set(o, "serves", catalog_link_json(cat, l->v[i].id)))) {
				json_decref(arr);
				arr = NULL;
			}
		}
		return json_print(arr, opts.pretty) ? EXIT_FAIL : EXIT_OK;
	}
	for (i = 0; i < l->n; i++) {
		if (!cat) {
			link_info_print_line(stdout, &l->v[i]);
			continue;
		}
		if (i)
			putchar('\n');
		link_info_print_detail(stdout, &l->v[i]);
		catalog_print_link(stdout, cat, l->v[i].id);
	}
	return EXIT_OK;
}

static int link_add(int argc, char **argv)
{
	struct link_list l = { 0 };
	const char *url;
	struct enl nl;
	int ret, rc = EXIT_FAIL;

	ret = parse_args(argc, argv, "link add", usage_link, 1, 1, "URL");
	if (ret >= 0)
		return ret;
	url = argv[optind];
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	ret = enl_request_str(&nl, ENGRAM_CMD_LINK_ADD, ENGRAM_A_URL, url, reply_link, &l);
	if (ret) {
		enl_perror(&nl, ret, "link add %s", url);
		explain_url(&nl, ret, url, ENGRAM_URL_REMOTE);
		goto out;
	}
	if (l.n != 1) {
		/* The kernel added the link but could not say which: it is in the list. */
		err_msg("link add %s: the kernel's reply carried no link id; see 'engramctl link list'",
			url);
		goto out;
	}
	if (opts.json) {
		rc = json_print(link_info_json(&l.v[0], 0), opts.pretty) ? EXIT_FAIL : EXIT_OK;
	} else {
		printf("%u\n", l.v[0].id);
		rc = EXIT_OK;
	}
out:
	free(l.v);
	enl_close(&nl);
	return rc;
}

static int link_del(int argc, char **argv)
{
	struct enl nl;
	uint32_t id;
	int ret;

	ret = parse_args(argc, argv, "link del", usage_link, 1, 1, "ID");
	if (ret >= 0)
		return ret;
	if (parse_link_id("link del", argv[optind], &id))
		return EXIT_USAGE;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	ret = enl_request_u32(&nl, ENGRAM_CMD_LINK_DEL, ENGRAM_A_LINK_ID, id, NULL, NULL);
	if (ret)
		enl_perror(&nl, ret, "link del %u", id);
	enl_close(&nl);
	return ret ? EXIT_FAIL : EXIT_OK;
}

int link_dump(struct enl *nl, struct link_info **v, size_t *n)
{
	struct link_list l = { 0 };
	int ret;

	ret = enl_dump(nl, ENGRAM_CMD_LINK_GET, reply_link, &l);
	if (ret) {
		free(l.v);
		l.v = NULL;
		l.n = 0;
	}
	*v = l.v;
	*n = l.n;
	return ret;
}

static int link_show(int argc, char **argv, int detail)
{
	const char *cmd = detail ? "link show" : "link list";
	struct link_list l = { 0 };
	struct catalog cat = { 0 };
	struct enl nl;
	uint32_t id = 0;
	int ret, rc = EXIT_FAIL;

	ret = parse_args(argc, argv, cmd, usage_link, 0, detail ? 1 : 0, "");
	if (ret >= 0)
		return ret;
	if (optind < argc && parse_link_id(cmd, argv[optind], &id))
		return EXIT_USAGE;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	if (id) {
		ret = enl_request_u32(&nl, ENGRAM_CMD_LINK_GET, ENGRAM_A_LINK_ID, id, reply_link,
				      &l);
		if (ret)
			enl_perror(&nl, ret, "link %u", id);
	} else {
		ret = enl_dump(&nl, ENGRAM_CMD_LINK_GET, reply_link, &l);
		if (ret)
			enl_perror(&nl, ret, "list links");
	}
	if (!ret && detail) {
		ret = catalog_dump(&nl, &cat);
		if (ret)
			enl_perror(&nl, ret, "the links' catalogs");
	}
	if (!ret) {
		qsort(l.v, l.n, sizeof(*l.v), cmp_id);
		rc = print_links(&l, detail ? &cat : NULL);
	}
	catalog_free(&cat);
	free(l.v);
	enl_close(&nl);
	return rc;
}

static int link_tables(int argc, char **argv)
{
	struct catalog cat;
	struct enl nl;
	uint32_t id = 0;
	int ret, rc = EXIT_FAIL;

	ret = parse_args(argc, argv, "link tables", usage_link, 0, 1, "");
	if (ret >= 0)
		return ret;
	if (optind < argc && parse_link_id("link tables", argv[optind], &id))
		return EXIT_USAGE;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	ret = catalog_dump(&nl, &cat);
	if (ret)
		enl_perror(&nl, ret, "the links' catalogs");
	else
		rc = catalog_print_tables(&cat, id);
	catalog_free(&cat);
	enl_close(&nl);
	return rc;
}

static int link_list(int argc, char **argv)
{
	return link_show(argc, argv, 0);
}

static int link_show_all(int argc, char **argv)
{
	return link_show(argc, argv, 1);
}

static const struct cli_cmd link_cmds[] = {
	{ "list", link_list },
	{ "show", link_show_all },
	{ "tables", link_tables },
	{ "add", link_add },
	{ "del", link_del },
	{ "delete", link_del },
	{ "help", NULL },
	{ NULL, NULL },
};

int cmd_link(int argc, char **argv)
{
	return cli_dispatch("link", link_cmds, "list", argc, argv, usage_link);
}
