/* SPDX-License-Identifier: GPL-2.0 */
/* Table operations that more than one command file uses (tableops.c). */
#ifndef ENGRAMCTL_TABLE_H
#define ENGRAMCTL_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "nl.h"
#include "progress.h"
#include "safetensors.h"
#include "tableinfo.h"

/* 0 when @name can name a table; else -EINVAL, explained (@hint appended). */
int table_check_name(const char *name, const char *hint);
/* TABLE_GET of @name into @ti; 0 or a negative errno (not explained). */
int table_get(struct enl *nl, const char *name, struct table_info *ti);
/* TABLE_UNLOAD or TABLE_VERIFY of @name; 0 or a negative errno (not explained). */
int table_cmd_name(struct enl *nl, uint8_t cmd, const char *name);
/* Follows a job until the table leaves state @busy; -EINTR when interrupted. */
int table_wait(struct enl *nl, const char *name, uint8_t busy, struct progress *pg,
	       struct table_info *ti);
int table_dump(struct enl *nl, struct table_info **v, size_t *n);
int table_load_file(struct enl *nl, const char *file, const char *prefix, const char *name,
		    const uint8_t *sha, uint64_t held_first, uint64_t held_rows,
		    int show_progress, int report, struct table_info *out);
int table_geometry(const char *file, const char *prefix, struct st_engram *eg);
int table_interrupted(void);
/* Sleeps @ms, or less when a signal table_signals_catch() set up comes. */
void table_sleep_ms(unsigned int ms);
void table_signals_catch(void);
void table_signals_arm(void);
void table_signals_disarm(void);
/* "engramctl: NAME: WHAT: error: message" from a table's error attributes. */
void print_table_error(const struct table_info *ti, const char *what);
/* The table as JSON on stdout; an EXIT_* code. */
int print_json_table(const struct table_info *ti);

#endif /* ENGRAMCTL_TABLE_H */
