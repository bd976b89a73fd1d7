/* SPDX-License-Identifier: GPL-2.0 */
/*
 * /etc/engram-rdma/tables.conf: the tables a host serves, one a line
 * (engram-rdma-tables.conf(5)).  Parsing only; engramctl table sync acts
 * on the result.
 */
#ifndef ENGRAMCTL_TABLESCONF_H
#define ENGRAMCTL_TABLESCONF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <linux/engram_rdma.h>

#define TABLESCONF_DEFAULT	"/etc/engram-rdma/tables.conf"
/* Longer lines are refused, not cut: a cut path would name another file. */
#define TABLESCONF_LINE_MAX	8192
#define TABLESCONF_TENSOR_MAX	256

struct tconf_entry {
	char name[ENGRAM_NAME_MAX];
	char file[ENGRAM_PATH_MAX];
	char tensor[TABLESCONF_TENSOR_MAX];
	uint8_t sha256[ENGRAM_SHA256_LEN];
	int has_sha256;		/* 0 for "-": the load hashes but compares with nothing */
	uint64_t held_first;	/* a shard's rows (FIRST-LAST), or 0 and 0: all */
	uint64_t held_rows;
	unsigned int line;
};

struct tconf {
	struct tconf_entry *v;
	size_t n;
};

/*
 * Reads every line of @f into @tc (@path names it in messages).  Returns 0,
 * or a negative errno with "PATH:LINE: why" in @err: -EINVAL for a
 * malformed line (fields, name, path, digest, a name listed twice),
 * -E2BIG for more than ENGRAM_MAX_TABLES tables or a line too long,
 * -ENOMEM, or a read error.  @tc is empty after a failure.
 */
int tconf_parse(FILE *f, const char *path, struct tconf *tc, char *err, size_t errlen);
/* The entry named @name, or NULL. */
const struct tconf_entry *tconf_find(const struct tconf *tc, const char *name);
void tconf_free(struct tconf *tc);

#endif /* ENGRAMCTL_TABLESCONF_H */
