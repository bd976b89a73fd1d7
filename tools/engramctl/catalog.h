/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the links' hosts serve (ENGRAM_CMD_LINK_CATALOG_GET): the tables
 * in each link's catalog, and so the links that serve each table.
 */
#ifndef _ENGRAMCTL_CATALOG_H
#define _ENGRAMCTL_CATALOG_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include <linux/engram_rdma.h>
#include "nl.h"

struct catalog_entry {
	uint32_t link;
	uint8_t link_state;
	char name[ENGRAM_NAME_MAX];
	uint8_t sha256[ENGRAM_SHA256_LEN];
	uint64_t rows;
	uint64_t held_first;	/* the rows the link's host holds: a shard, or all */
	uint64_t held_rows;
	uint64_t weight_offset;	/* the tensors in the file; 0: not said (a host before v4) */
	uint64_t scale_offset;
	uint64_t generation;
	uint8_t state;
};

struct catalog {
	struct catalog_entry *v;
	size_t n, cap;
};

/* Every link's catalog; 0 or a negative errno (the list is then empty). */
int catalog_dump(struct enl *nl, struct catalog *c);
void catalog_free(struct catalog *c);
/* "  serves  NAME (STATE), ..." for link @id, nothing when it serves none. */
void catalog_print_link(FILE *f, const struct catalog *c, uint32_t id);
/* The tables of link @id, as JSON objects; NULL when out of memory. */
json_t *catalog_link_json(const struct catalog *c, uint32_t id);
/* engramctl link tables [ID]: each table (by identity) and its links. */
int catalog_print_tables(const struct catalog *c, uint32_t only);

#endif
