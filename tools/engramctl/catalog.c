// SPDX-License-Identifier: GPL-2.0
/*
 * What the links' hosts serve.  A GPU node fetches a table opened on no
 * link from every link whose catalog holds that table, so the view that
 * matters is per table: which links serve it, in what state.  Tables are
 * told apart by identity, not by name: the file's SHA-256, the rows and
 * where the tensors are in the file (one file holds several tables; two
 * hosts may name one table differently, or two tables alike).  A host
 * before protocol version 4 does not say where the tensors are: its
 * entries go with those of the same digest, rows and name.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "engramctl.h"
#include "fmt.h"
#include "jsonout.h"
#include "linkinfo.h"
#include "tableinfo.h"

static int reply_catalog(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	struct catalog *c = arg;
	struct catalog_entry *e;

	if (enl_parse(msg, tb) || !tb[ENGRAM_A_LINK_ID] || !tb[ENGRAM_A_TABLE_NAME] ||
	    !tb[ENGRAM_A_TABLE_SHA256] || !tb[ENGRAM_A_TABLE_ROWS] || !tb[ENGRAM_A_TABLE_STATE])
		return -EPROTO;
	e = enl_grow(c->v, &c->cap, c->n, sizeof(*c->v));
	if (!e)
		return -ENOMEM;
	c->v = e;
	e = &c->v[c->n];
	memset(e, 0, sizeof(*e));
	e->link = nla_get_u32(tb[ENGRAM_A_LINK_ID]);
	if (tb[ENGRAM_A_LINK_STATE])
		e->link_state = nla_get_u8(tb[ENGRAM_A_LINK_STATE]);
	snprintf(e->name, sizeof(e->name), "%s", nla_get_string(tb[ENGRAM_A_TABLE_NAME]));
	memcpy(e->sha256, nla_data(tb[ENGRAM_A_TABLE_SHA256]), sizeof(e->sha256));
	e->rows = nla_get_u64(tb[ENGRAM_A_TABLE_ROWS]);
	/* A kernel before shards holds whole tables. */
	e->held_rows = e->rows;
	if (tb[ENGRAM_A_TABLE_HELD_FIRST] && tb[ENGRAM_A_TABLE_HELD_ROWS]) {
		e->held_first = nla_get_u64(tb[ENGRAM_A_TABLE_HELD_FIRST]);
		e->held_rows = nla_get_u64(tb[ENGRAM_A_TABLE_HELD_ROWS]);
	}
	if (tb[ENGRAM_A_TABLE_WEIGHT_OFFSET] && tb[ENGRAM_A_TABLE_SCALE_OFFSET]) {
		e->weight_offset = nla_get_u64(tb[ENGRAM_A_TABLE_WEIGHT_OFFSET]);
		e->scale_offset = nla_get_u64(tb[ENGRAM_A_TABLE_SCALE_OFFSET]);
	}
	if (tb[ENGRAM_A_TABLE_GENERATION])
		e->generation = nla_get_u64(tb[ENGRAM_A_TABLE_GENERATION]);
	e->state = nla_get_u8(tb[ENGRAM_A_TABLE_STATE]);
	c->n++;
	return 0;
}

int catalog_dump(struct enl *nl, struct catalog *c)
{
	int ret;

	memset(c, 0, sizeof(*c));
	ret = enl_dump(nl, ENGRAM_CMD_LINK_CATALOG_GET, reply_catalog, c);
	if (ret)
		catalog_free(c);
	return ret;
}

void catalog_free(struct catalog *c)
{
	free(c->v);
	memset(c, 0, sizeof(*c));
}

void catalog_print_link(FILE *f, const struct catalog *c, uint32_t id)
{
	const char *sep = "";
	size_t i;

	for (i = 0; i < c->n; i++) {
		if (c->v[i].link != id)
			continue;
		if (!*sep)
			fprintf(f, "  %-15s", "serves");
		fprintf(f, "%s %s (%s)", sep, c->v[i].name, table_state_name(c->v[i].state));
		sep = ",";
	}
	if (*sep)
		fputc('\n', f);
}

static json_t *entry_json(const struct catalog_entry *e, int with_table)
{
	char hex[2 * ENGRAM_SHA256_LEN + 1];
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (json_set(o, "name", json_string(e->name)) ||
	    (with_table && json_set(o, "sha256", json_string(fmt_hex(hex, e->sha256,
								       sizeof(e->sha256))))) ||
	    (with_table && json_set(o, "rows", json_u64(e->rows))) ||
	    (with_table && e->weight_offset &&
	     (json_set(o, "weight_offset", json_u64(e->weight_offset)) ||
	      json_set(o, "scale_offset", json_u64(e->scale_offset)))) ||
	    (!with_table && json_set(o, "link", json_u64(e->link))) ||
	    (!with_table &&
	     json_set(o, "link_state", json_string(link_state_name(e->link_state)))) ||
	    json_set(o, "state", json_string(table_state_name(e->state))) ||
	    json_set(o, "held_first", json_u64(e->held_first)) ||
	    json_set(o, "held_rows", json_u64(e->held_rows)) ||
	    json_set(o, "generation", json_u64(e->generation))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *catalog_link_json(const struct catalog *c, uint32_t id)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr && i < c->n; i++) {
		if (c->v[i].link == id && json_array_append_new(arr, entry_json(&c->v[i], 1))) {
			json_decref(arr);
			arr = NULL;
		}
	}
	return arr;
}

/* Are @a and @b one table: the same file, rows and tensors? */
static int same_table(const struct catalog_entry *a, const struct catalog_entry *b)
{
	if (memcmp(a->sha256, b->sha256, ENGRAM_SHA256_LEN) || a->rows != b->rows)
		return 0;
	if (a->weight_offset && b->weight_offset)
		return a->weight_offset == b->weight_offset && a->scale_offset == b->scale_offset;
	return !a->weight_offset && !b->weight_offset && !strcmp(a->name, b->name);
}

/* Is entry @i the first of its table (among those of link @only)? */
static int first_of_table(const struct catalog *c, size_t i, uint32_t only)
{
	size_t j;

	for (j = 0; j < i; j++)
		if ((!only || c->v[j].link == only) && same_table(&c->v[j], &c->v[i]))
			return 0;
	return 1;
}

static json_t *tables_json(const struct catalog *c, uint32_t only)
{
	char hex[2 * ENGRAM_SHA256_LEN + 1];
	json_t *arr = json_array(), *t, *links;
	size_t i, j;
	int bad = !arr;

	for (i = 0; !bad && i < c->n; i++) {
		const struct catalog_entry *e = &c->v[i];

		if ((only && e->link != only) || !first_of_table(c, i, only))
			continue;
		t = json_object();
		links = json_array();
		/* Each call takes its value's reference, whatever it returns. */
		if (!t || json_array_append_new(arr, t)) {
			json_decref(links);
			bad = 1;
			break;
		}
		if (!links || json_set(t, "links", links)) {
			bad = 1;
			break;
		}
		fmt_hex(hex, e->sha256, sizeof(e->sha256));
		bad = json_set(t, "name", json_string(e->name)) ||
		      json_set(t, "sha256", json_string(hex)) ||
		      json_set(t, "rows", json_u64(e->rows)) ||
		      (e->weight_offset &&
		       (json_set(t, "weight_offset", json_u64(e->weight_offset)) ||
			json_set(t, "scale_offset", json_u64(e->scale_offset))));
		for (j = i; !bad && j < c->n; j++)
			if ((!only || c->v[j].link == only) && same_table(&c->v[j], e))
				bad = json_array_append_new(links, entry_json(&c->v[j], 0));
	}
	if (bad) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

int catalog_print_tables(const struct catalog *c, uint32_t only)
{
	char hex[2 * ENGRAM_SHA256_LEN + 1];
	size_t i, j;

	if (opts.json)
		return json_print(tables_json(c, only), opts.pretty) ? EXIT_FAIL : EXIT_OK;
	for (i = 0; i < c->n; i++) {
		const struct catalog_entry *e = &c->v[i];

		if ((only && e->link != only) || !first_of_table(c, i, only))
			continue;
		printf("%s sha256 %.16s rows %" PRIu64, e->name,
		       fmt_hex(hex, e->sha256, sizeof(e->sha256)), e->rows);
		if (e->weight_offset)
			printf(" weight@%" PRIu64 " scale@%" PRIu64, e->weight_offset,
			       e->scale_offset);
		putchar(':');
		for (j = i; j < c->n; j++) {
			const struct catalog_entry *r = &c->v[j];

			if ((only && r->link != only) || !same_table(r, e))
				continue;
			printf(" link %u (%s, %s", r->link, link_state_name(r->link_state),
			       table_state_name(r->state));
			if (r->held_rows != r->rows)
				printf(", rows %" PRIu64 "-%" PRIu64, r->held_first,
				       r->held_first + r->held_rows - 1);
			if (strcmp(r->name, e->name))
				printf(", as %s", r->name);
			putchar(')');
		}
		putchar('\n');
	}
	return EXIT_OK;
}
