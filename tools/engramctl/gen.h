/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Synthetic Engram table files: real safetensors files whose row contents
 * are a pure function of (seed, prefix index, row), so a test can check any
 * row it fetched without keeping a copy.
 */
#ifndef ENGRAMCTL_GEN_H
#define ENGRAMCTL_GEN_H

#include <stddef.h>
#include <stdint.h>

#define GEN_DEFAULT_PREFIX	"layers.1.engram.embed"

struct gen_params {
	uint64_t rows;
	uint64_t seed;
	const char *const *prefixes;
	size_t nprefixes;
	uint64_t pad_before;	/* bytes of U8 tensor "pad.before", 0 for none */
	uint64_t pad_after;	/* bytes of U8 tensor "pad.after", 0 for none */
	const char *const *meta;	/* "KEY=VALUE" strings for __metadata__ */
	size_t nmeta;
	/* Called after every buffer flush; may be NULL. */
	void (*progress)(uint64_t done, uint64_t total, void *arg);
	void *progress_arg;
};

struct gen_plan {
	char *header;		/* JSON, space-padded to a multiple of 8 */
	uint64_t header_len;
	uint64_t file_size;
	uint64_t *weight_offset;	/* absolute, one per prefix */
	uint64_t *scale_offset;
};

int gen_plan(const struct gen_params *p, struct gen_plan *plan, char *err, size_t errlen);
void gen_plan_free(struct gen_plan *plan);
/* Writes the whole file to @fd from its current position (normally 0). */
int gen_write(int fd, const struct gen_params *p, const struct gen_plan *plan,
	      char *err, size_t errlen);

/* The exact bytes of one row. */
void gen_weight_row(uint64_t seed, unsigned int prefix_idx, uint64_t row, uint8_t out[256]);
void gen_scale_row(uint64_t seed, unsigned int prefix_idx, uint64_t row, uint8_t out[8]);

#endif /* ENGRAMCTL_GEN_H */
