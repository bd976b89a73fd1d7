/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Declarations shared by the parts of engram_rdma.  Each part owns its state;
 * this header is the only way the parts see each other.
 */
#ifndef _ENGRAM_H
#define _ENGRAM_H

#include <linux/atomic.h>
#include <linux/types.h>
#include <linux/engram_rdma.h>

#include "url.h"

#define ENGRAM_VERSION		"0.1.0"
/* Longest reason kept for a failed load, shown by `engramctl list`. */
#define ENGRAM_ERRMSG_MAX	160

struct netlink_ext_ack;

/* params.c: what modprobe was given, parsed once at load. */
struct engram_config {
	struct engram_url listen[ENGRAM_URL_MAX];
	unsigned int n_listen;
	struct engram_url remote[ENGRAM_URL_MAX];
	unsigned int n_remote;
};

extern struct engram_config engram_config;

int engram_params_init(void);
unsigned int engram_timeout_ms(void);

/* stats.c: counters are indexed by enum engram_stat. */
struct engram_counters {
	atomic64_t c[__ENGRAM_STAT_MAX];
};

extern struct engram_counters engram_global_stats;

static inline void engram_count_add(struct engram_counters *c,
				    enum engram_stat id, u64 v)
{
	atomic64_add(v, &c->c[id]);
}

static inline void engram_count(struct engram_counters *c, enum engram_stat id)
{
	atomic64_inc(&c->c[id]);
}

/* Counters kept per table; the same ids are also summed module-wide. */
extern const u8 engram_table_stat_ids[];
extern const unsigned int engram_table_stat_count;
/* Counters that only exist module-wide (the per-table ones are summed there too). */
extern const u8 engram_global_stat_ids[];
extern const unsigned int engram_global_stat_count;

void engram_counters_snapshot(const struct engram_counters *c, u64 *out);

/* table.c */
struct engram_load_args {
	const char *name;
	const char *path;		/* may be NULL: derived from the file */
	int fd;
	u64 rows;
	u64 weight_offset;
	u64 scale_offset;
	u32 weight_bytes;
	u32 scale_bytes;
	const u8 *sha256;		/* may be NULL: no expected digest */
};

/*
 * A consistent copy of one table's state, taken under the table's lock so
 * that netlink can format it without holding any lock.
 */
struct engram_table_info {
	char name[ENGRAM_NAME_MAX];
	char path[ENGRAM_PATH_MAX];
	u8 sha256[ENGRAM_SHA256_LEN];
	bool have_sha256;
	u8 state;
	u8 verify_result;
	u64 generation;
	u64 rows;
	u64 weight_offset;
	u64 scale_offset;
	u64 file_bytes;
	u64 done_bytes;
	u64 pinned_bytes;
	u64 meta_bytes;
	u64 elapsed_ns;
	int error;
	char errmsg[ENGRAM_ERRMSG_MAX];
	u64 stats[__ENGRAM_STAT_MAX];
};

int engram_tables_init(void);
void engram_tables_exit(void);
int engram_table_load(const struct engram_load_args *args,
		      struct netlink_ext_ack *extack);
int engram_table_unload(const char *name, struct netlink_ext_ack *extack);
int engram_table_verify(const char *name, struct netlink_ext_ack *extack);
int engram_table_info_by_name(const char *name, struct engram_table_info *info);
int engram_table_info_nth(unsigned long n, struct engram_table_info *info);
void engram_tables_totals(u64 *count, u64 *pinned_bytes);

/* netlink.c */
int engram_netlink_init(void);
void engram_netlink_exit(void);

#endif /* _ENGRAM_H */
