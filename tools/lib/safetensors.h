/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Safetensors header parser.
 *
 * Pure functions over a buffer holding the first bytes of a file plus the
 * file's total size, so the same code runs in engramctl, the unit tests and
 * the fuzzer.  Every failure returns a negative errno and fills a message
 * that names the tensor and the rule it broke.
 */
#ifndef ENGRAMCTL_SAFETENSORS_H
#define ENGRAMCTL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/* The reference implementation refuses headers above 100 MB; so do we. */
#define ST_HEADER_MAX		100000000ULL
#define ST_ERR_LEN		256

enum st_dtype {
	ST_BOOL, ST_U8, ST_I8, ST_F8_E4M3, ST_F8_E5M2, ST_F8_E8M0,
	ST_U16, ST_I16, ST_F16, ST_BF16,
	ST_U32, ST_I32, ST_F32,
	ST_U64, ST_I64, ST_F64, ST_C64,
	ST_DTYPE_COUNT
};

struct st_tensor {
	char *name;
	enum st_dtype dtype;
	unsigned int ndim;
	uint64_t *shape;
	uint64_t begin;		/* relative to the data area */
	uint64_t end;
};

struct st_file {
	uint64_t file_size;
	uint64_t header_len;
	uint64_t data_start;	/* 8 + header_len: absolute offset of the data area */
	size_t ntensors;
	struct st_tensor *tensors;	/* sorted by begin */
	json_t *metadata;	/* "__metadata__" object, NULL when absent */
};

/* Geometry of one Engram table, offsets absolute in the file. */
struct st_engram {
	uint64_t rows;
	uint64_t weight_offset;
	uint64_t weight_size;
	uint64_t scale_offset;
	uint64_t scale_size;
};

const char *st_dtype_name(enum st_dtype dtype);
int st_dtype_parse(const char *name, enum st_dtype *dtype);
unsigned int st_dtype_size(enum st_dtype dtype);

/*
 * Reads and checks the 8-byte header length.  @buf holds @len bytes from the
 * start of a file of @file_size bytes.
 */
int st_header_len(const void *buf, size_t len, uint64_t file_size, uint64_t *header_len,
		  char *err, size_t errlen);

/* Parses and validates the whole header; @buf must hold 8 + header_len bytes. */
int st_parse(const void *buf, size_t len, uint64_t file_size, struct st_file **out,
	     char *err, size_t errlen);
void st_free(struct st_file *st);

const struct st_tensor *st_find(const struct st_file *st, const char *name);

/* Finds PREFIX.weight [N,256] F8_E4M3 and PREFIX.scale [N,8] F8_E8M0. */
int st_engram_lookup(const struct st_file *st, const char *prefix, struct st_engram *eg,
		     char *err, size_t errlen);

/*
 * Writes the prefixes of every valid Engram table in @st to @buf, separated by
 * ", " (for "did you mean" hints).  Returns the number found.
 */
size_t st_engram_candidates(const struct st_file *st, char *buf, size_t len);

#endif /* ENGRAMCTL_SAFETENSORS_H */
