// SPDX-License-Identifier: GPL-2.0
/* -j output helpers. */
#include <errno.h>
#include <stdio.h>

#include "engramctl.h"
#include "jsonout.h"

json_t *json_u64(uint64_t v)
{
	/*
	 * jansson integers are signed 64-bit.  No counter gets near 2^63, but
	 * should one, a real keeps the magnitude instead of wrapping negative.
	 */
	if (v > (uint64_t)INT64_MAX)
		return json_real((double)v);
	return json_integer((json_int_t)v);
}

int json_set(json_t *obj, const char *key, json_t *value)
{
	if (!value)
		return -ENOMEM;
	return json_object_set_new(obj, key, value) ? -ENOMEM : 0;
}

int json_print(json_t *v, int pretty)
{
	int ret;

	if (!v) {
		err_msg("cannot build JSON output: out of memory");
		return -ENOMEM;
	}
	ret = json_dumpf(v, stdout, pretty ? JSON_INDENT(2) : JSON_COMPACT);
	json_decref(v);
	if (!ret) {
		fputc('\n', stdout);
		ret = fflush(stdout);
	}
	if (ret) {
		/* Every caller would say the same; say it once, here. */
		err_msg("cannot write JSON output");
		return -EIO;
	}
	return 0;
}
