/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libengram's local fallback, inside the library: the local copy of a
 * table's shard and the pure rules around it (settings from the
 * environment, which failures fall back, where rows land).  Not installed;
 * the unit tests build local.c directly.
 */
#ifndef LIBENGRAM_LOCAL_H
#define LIBENGRAM_LOCAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Environment variables read by engram_open() (libengram.h). */
#define LOCAL_ENV_TIMEOUT	"ENGRAM_RDMA_TIMEOUT_MS"
#define LOCAL_ENV_REQUIRED	"ENGRAM_RDMA_REQUIRED"
#define LOCAL_ENV_DIR		"ENGRAM_RDMA_LOCAL_DIR"
#define LOCAL_ENV_CHECK		"ENGRAM_RDMA_LOCAL_CHECK"
#define LOCAL_ENV_PREFIX	"ENGRAM_RDMA_LOCAL_"
/* The kernel's own bound on a fetch deadline (timeout_ms). */
#define LOCAL_TIMEOUT_MS_MAX	600000u
/* A directory is searched among its first this many entries. */
#define LOCAL_DIR_MAX_ENTRIES	4096

/* How the local file is matched with the table, once. */
enum local_check {
	LOCAL_CHECK_SIZE,		/* same row count: both tensors the same size */
	LOCAL_CHECK_SHA256,		/* SHA-256 of the whole file */
};

int local_parse_bool(const char *s, bool *out);
int local_parse_ms(const char *s, uint32_t *out);
int local_parse_check(const char *s, enum local_check *out);
int local_env_name(const char *table, char *out, size_t len);
bool local_fallback_errno(int err);
bool local_open_fallback_errno(int err);

/* One destination range in the caller's memory. */
struct local_dest {
	uint8_t *addr;
	uint64_t len;
};

int local_place_check(const struct local_dest *d, unsigned int nd, uint32_t nr_rows,
		      uint32_t stride);

/* An open local copy; shared by the threads of a context. */
struct local_copy {
	int fd;				/* buffered */
	int fd_direct;			/* O_DIRECT, or -1 when refused */
	bool direct_failed;		/* a read with O_DIRECT got EINVAL: buffered from now on */
	uint32_t dio_align;		/* O_DIRECT's offset, length and memory alignment */
	char *path;
	uint64_t rows;
	uint64_t weight_offset;		/* absolute, in the file */
	uint64_t scale_offset;
	uint64_t file_size;
};

int local_open(const char *path, const char *tensor, struct local_copy **out);
int local_find(const char *dir, const char *name, char **path);
int local_verify(struct local_copy *lc, enum local_check check, uint64_t rows,
		 const uint8_t *sha256, uint8_t *sha256_out);
int local_read_rows(struct local_copy *lc, const uint32_t *rows, uint32_t nr_rows,
		    const struct local_dest *d, unsigned int nd, uint32_t stride,
		    uint32_t *bad_index);
void local_close(struct local_copy *lc);

#endif /* LIBENGRAM_LOCAL_H */
