// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the safetensors parser.  The input is a whole file;
 * its last byte also stretches the announced file size so the data-area
 * checks see sizes other than exactly the buffer.  Any accepted file must
 * satisfy the invariants engramctl relies on before it hands offsets to the
 * kernel.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

static void check_engram(const struct st_file *st, const char *prefix)
{
	char err[ST_ERR_LEN];
	struct st_engram eg;

	if (st_engram_lookup(st, prefix, &eg, err, sizeof(err))) {
		if (!err[0])
			abort();
		return;
	}
	/* Accepted geometry must lie inside the file and be exactly [N,256] + [N,8]. */
	if (!eg.rows || eg.weight_size != eg.rows * 256 || eg.scale_size != eg.rows * 8 ||
	    eg.weight_offset < st->data_start || eg.scale_offset < st->data_start ||
	    eg.weight_offset + eg.weight_size > st->file_size ||
	    eg.scale_offset + eg.scale_size > st->file_size)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[ST_ERR_LEN] = "", hint[256];
	uint64_t file_size = size;
	struct st_file *st = NULL;
	size_t i;

	if (size && data[size - 1] & 1)
		file_size += data[size - 1];
	if (st_parse(data, size, file_size, &st, err, sizeof(err))) {
		if (!err[0] || st)
			abort();
		return 0;
	}
	for (i = 0; i < st->ntensors; i++) {
		const struct st_tensor *t = &st->tensors[i];

		if (t->begin > t->end || st->data_start + t->end > st->file_size)
			abort();
		if (i && t->begin != t->end && st->tensors[i - 1].end > t->begin &&
		    st->tensors[i - 1].begin != st->tensors[i - 1].end)
			abort();
	}
	check_engram(st, "layers.1.engram.embed");
	check_engram(st, "a");
	st_engram_candidates(st, hint, sizeof(hint));
	for (i = 0; i < st->ntensors; i++) {
		size_t n = strlen(st->tensors[i].name);

		if (n > 7 && !strcmp(st->tensors[i].name + n - 7, ".weight")) {
			char prefix[256];

			if (n - 7 < sizeof(prefix)) {
				memcpy(prefix, st->tensors[i].name, n - 7);
				prefix[n - 7] = '\0';
				check_engram(st, prefix);
			}
		}
	}
	st_free(st);
	return 0;
}
