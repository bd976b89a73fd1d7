// SPDX-License-Identifier: GPL-2.0
/* get_random_u32_below(), which replaced prandom_u32_max() (6.2). */
#include <linux/random.h>

static __maybe_unused u32 probe(void)
{
	return get_random_u32_below(10);
}
