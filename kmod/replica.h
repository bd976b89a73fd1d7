/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A table opened on no link, served by every link whose catalog holds its
 * SHA-256 (replica.c).
 */
#ifndef _ENGRAM_REPLICA_H
#define _ENGRAM_REPLICA_H

#include "client.h"

struct engram_replica;
struct engram_link_table;

struct engram_replica *engram_replica_open(u32 flags, const char *name, const u8 *sha256,
					   struct engram_wire_table *out, u32 *max_rows,
					   u32 *first_link);
void engram_replica_close(struct engram_replica *rg);
struct engram_link_table *engram_replica_first_lt(struct engram_replica *rg);
int engram_replica_submit(struct engram_replica *rg, struct engram_fetch *f);
void engram_replica_reap(struct engram_fetch *f);
void engram_replica_fetch_free(struct engram_fetch *f);
void engram_replica_spares_free(struct engram_fetch *f);

#endif /* _ENGRAM_REPLICA_H */
