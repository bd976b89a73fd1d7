/* SPDX-License-Identifier: GPL-2.0 */
/* -j output: jansson values for u64 counters and the one place that prints them. */
#ifndef ENGRAMCTL_JSONOUT_H
#define ENGRAMCTL_JSONOUT_H

#include <stdint.h>
#include <jansson.h>

json_t *json_u64(uint64_t v);
/* Sets @key on @obj to a new value, returning -ENOMEM when either allocation failed. */
int json_set(json_t *obj, const char *key, json_t *value);
/* Prints @v (compact, or indented when @pretty) and a newline to stdout; steals @v. */
int json_print(json_t *v, int pretty);

#endif /* ENGRAMCTL_JSONOUT_H */
