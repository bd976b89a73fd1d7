/* SPDX-License-Identifier: GPL-2.0 */
/* Progress of a kernel load or verify job, or of a drain, drawn on stderr. */
#ifndef ENGRAMCTL_PROGRESS_H
#define ENGRAMCTL_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

struct progress {
	const char *verb;	/* "loading", "verifying", "writing" */
	const char *name;
	int enabled;
	int tty;
	int drawn;		/* a bar is on the terminal line */
	int last_decile;
	uint64_t last_ms;
	int texts;		/* progress_text() lines written */
};

/*
 * One bar line fitting @width columns:
 * "loading NAME [#####-----]  45.2%  42.7 GiB/94.4 GiB  2310 MB/s  ETA 0:23"
 */
size_t progress_format(char *buf, size_t len, unsigned int width, const char *verb,
		       const char *name, uint64_t done, uint64_t total, uint64_t elapsed_ns);
/* One log line for files and pipes: "loading NAME: 40% (37.8 GiB of 94.4 GiB, 2310 MB/s)". */
size_t progress_format_plain(char *buf, size_t len, const char *verb, const char *name,
			     uint64_t done, uint64_t total, uint64_t elapsed_ns);

void progress_init(struct progress *p, const char *verb, const char *name, int enabled);
void progress_update(struct progress *p, uint64_t done, uint64_t total, uint64_t elapsed_ns);
/*
 * A wait that has no bytes to count (a drain): @line as it is, redrawn at
 * most once a second on a terminal, else written at most every 5 s; the
 * first call always shows it.
 */
void progress_text(struct progress *p, const char *line);
/* The monotonic clock in ms: progress lines and systemd's status share it. */
uint64_t progress_now_ms(void);
/* Clears the bar so the next line starts clean. */
void progress_end(struct progress *p);

#endif /* ENGRAMCTL_PROGRESS_H */
