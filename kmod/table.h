/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private to the tables: table.c (the list, load, unload, serving) and
 * table_pin.c (reading a table's file into the page cache, pinning and
 * hashing it).
 */
#ifndef _ENGRAM_TABLE_H
#define _ENGRAM_TABLE_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/completion.h>
#include <linux/list.h>
#include <linux/percpu-refcount.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>

#include "engram.h"

struct engram_table {
	struct list_head node;		/* on engram_tables */
	char name[ENGRAM_NAME_MAX];
	char *path;
	struct file *file;		/* NULL once released */
	struct address_space *mapping;
	u64 file_bytes;
	u64 rows;
	/* The rows this host holds: [held_first, held_first + held_rows). */
	u64 held_first;
	u64 held_rows;
	u64 weight_offset;
	u64 scale_offset;
	u64 generation;
	u8 expect[ENGRAM_SHA256_LEN];
	bool have_expect;

	struct page **pages;		/* one per file page, each holds a folio ref */
	pgoff_t nr_pages;
	/* The file's page cache was movable before we pinned it (see below). */
	bool gfp_was_movable;
	bool drop_cached;		/* the load drops the file's cached pages first */
	pgoff_t nr_moved;		/* pages read again out of ZONE_MOVABLE */
	pgoff_t nr_pinned;		/* pages read so far: written by the worker, read racily */
	pgoff_t nr_kept;		/* of them, pinned (a shard drops the others) */
	atomic64_t done_bytes;		/* progress of the running job */
	bool cancel;

	spinlock_t lock;		/* the fields below */
	u8 state;
	u8 verify_result;
	bool have_sha;
	u8 sha[ENGRAM_SHA256_LEN];
	int error;
	char errmsg[ENGRAM_ERRMSG_MAX];
	ktime_t job_start;
	u64 job_ns;			/* 0 while a job runs */

	struct work_struct work;
	struct engram_counters stats;
	struct engram_hist lat;		/* server-side service time */

	/*
	 * Server requests building a response from this table right now:
	 * per CPU, so that requests on many connections share no counter;
	 * holds_done completes once destroy killed it and the last went.
	 */
	struct percpu_ref holds;
	struct completion holds_done;
	/*
	 * The same requests counted per CPU for reports: a percpu_ref cannot
	 * be read.  Summed, the counts say how many hold the table now.
	 */
	long __percpu *inflight;
	/*
	 * Drained (engramctl table drain): still served, but the catalog asks
	 * clients to send new fetches elsewhere.  drain_last is when the drain
	 * began or a request for the table last came; only written while
	 * draining, so that requests share no cache line otherwise.
	 */
	bool draining;
	u64 drain_last;
	/* Per-device DMA addresses of pages[] (dma.c). */
	struct engram_dma_owner maps;
	/* Every page is pinned for good: the map worker may map them. */
	bool pinned_all;
	/* Maps the table for devices it has no map for yet. */
	struct work_struct map_work;
};

/* table_pin.c */
int engram_table_pin_load(struct engram_table *t, u8 *sha, char *msg, size_t msglen);
int engram_table_pin_rehash(struct engram_table *t, u8 *sha);
void engram_table_pin_rescue(struct address_space *mapping);

#endif /* _ENGRAM_TABLE_H */
