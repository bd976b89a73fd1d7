/* SPDX-License-Identifier: GPL-2.0 */
/* One table as the kernel reports it, and its text and JSON forms. */
#ifndef ENGRAMCTL_TABLEINFO_H
#define ENGRAMCTL_TABLEINFO_H

#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include <linux/engram_rdma.h>

struct nlattr;

struct table_info {
	uint64_t present;	/* bit (1 << ENGRAM_A_*) for every attribute received */
	char name[ENGRAM_NAME_MAX];
	char path[ENGRAM_PATH_MAX];
	uint8_t sha256[ENGRAM_SHA256_LEN];
	uint64_t generation;
	uint8_t state;
	uint64_t rows;
	uint64_t held_first;	/* a shard: the rows this host holds */
	uint64_t held_rows;
	uint32_t weight_bytes;
	uint32_t scale_bytes;
	uint64_t weight_offset;
	uint64_t scale_offset;
	uint64_t file_bytes;
	uint64_t done_bytes;
	uint64_t pinned_bytes;
	uint64_t meta_bytes;
	uint64_t elapsed_ns;
	uint8_t verify_result;
	uint32_t inflight;	/* server requests holding the table now */
	uint8_t draining;	/* table drain: served, but GPU nodes sent elsewhere */
	uint64_t drain_quiet_ns; /* while draining: since the drain or its last request */
	uint32_t error;
	char error_msg[256];
};

#define TI_HAS(ti, attr)	(!!((ti)->present & (1ULL << (attr))))

const char *table_state_name(uint8_t state);
const char *verify_result_name(uint8_t result);

/* From attributes parsed by enl_parse(); -EPROTO when TABLE_NAME is missing. */
int table_info_from_attrs(struct table_info *ti, struct nlattr **tb);
/* Whether the table is a shard: a row range of the file, not all of it. */
int table_info_is_shard(const struct table_info *ti);
/* Percent of the running load or verify, or -1 when not known. */
double table_info_progress(const struct table_info *ti);
/* Whether the kernel says the table is draining (engramctl table drain). */
int table_info_draining(const struct table_info *ti);

json_t *table_info_json(const struct table_info *ti);
/* One line per table, iproute2 style: "NAME state ready rows ... path FILE". */
void table_info_print_line(FILE *f, const struct table_info *ti);
/* Every attribute, one per line, for "table show NAME". */
void table_info_print_detail(FILE *f, const struct table_info *ti);

#endif /* ENGRAMCTL_TABLEINFO_H */
