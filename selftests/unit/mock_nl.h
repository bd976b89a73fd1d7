/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A stand-in for the kernel side of the engram_rdma family, linked instead of
 * tools/engramctl/nl.c so the commands' request building, polling, cleanup
 * and output can be tested without the module.
 */
#ifndef ENGRAM_MOCK_NL_H
#define ENGRAM_MOCK_NL_H

#include <stdint.h>
#include <linux/engram_rdma.h>

struct mock_table {
	int used;
	char name[ENGRAM_NAME_MAX];
	char path[ENGRAM_PATH_MAX];
	uint8_t sha256[ENGRAM_SHA256_LEN];
	uint8_t state, verify;
	uint64_t gen, rows, woff, soff, file_bytes, done;
	uint64_t held_first, held_rows;	/* held_rows 0: the module does not say */
	uint32_t error;
	char error_msg[128];
	/* table drain: each TABLE_GET ends one request, or adds drain_step_ns of quiet */
	int draining;
	uint32_t inflight;
	uint64_t quiet_ns;
};

struct mock_listen {
	int used;
	char url[128];
	uint8_t state;
	char device[64];
	uint32_t connections, error;
};

struct mock_link {
	int used;
	uint32_t id;
	char url[128];
	uint8_t state;
	uint32_t error;
	char device[64];
	uint32_t tables, max_rows, max_inflight;
	uint64_t connects, since_ns, fetches, refused_busy;
	uint64_t lat[ENGRAM_LAT_BUCKETS];
};

struct mock {
	/* scenario */
	int no_module;		/* genl family not registered */
	int refuse_load;	/* LOAD answers EINVAL + extack naming TABLE_ROWS */
	int fail_load;		/* load ends FAILED with EIO */
	int eperm;		/* admin commands answer EPERM */
	int interrupt_at_get;	/* raise SIGINT during the Nth TABLE_GET (1-based) */
	int interrupt_at_dump;	/* raise SIGINT during a TABLE_GET dump */
	uint8_t verify_outcome;	/* ENGRAM_VERIFY_* a verify ends with */
	int no_drain;		/* a module before TABLE_DRAIN: EOPNOTSUPP, no INFLIGHT */
	uint64_t drain_step_ns;	/* quiet a draining table gains per TABLE_GET */
	int undrain_at_get;	/* undrain every table during the Nth TABLE_GET */
	int unload_at_get;	/* unload the table named during the Nth TABLE_GET */
	/* what the "kernel" saw */
	char log[512];		/* "LOAD GET GET UNLOAD " */
	int gets;
	int fd_ok;		/* TABLE_FD was open on a regular file of the right size */
	uint64_t rows, woff, soff;
	int drain_named;	/* the last TABLE_DRAIN named a table */
	uint32_t wbytes, sbytes;
	int has_sha;
	char path[ENGRAM_PATH_MAX];
	uint64_t next_gen;
	struct mock_table t[8];
	/* listeners and links */
	int link_reply_empty;	/* LINK_ADD succeeds but its reply carries no LINK_ID */
	uint32_t next_link_id;
	uint32_t last_link_id;	/* LINK_ID of the last LINK_* or STATS_GET request */
	struct mock_listen l[4];
	struct mock_link k[4];
	/* the allow-list, canonical text as the kernel keeps it */
	char allow[4][64];
	unsigned int n_allow;
};

extern struct mock mock;

void mock_reset(void);
struct mock_table *mock_add(const char *name, uint8_t state, uint64_t rows);
int mock_find_name_ok(const char *name);
struct mock_table *mock_find_table(const char *name);
struct mock_listen *mock_add_listen(const char *url, uint8_t state);
struct mock_link *mock_add_link(const char *url, uint8_t state);

#endif /* ENGRAM_MOCK_NL_H */
