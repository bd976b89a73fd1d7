// SPDX-License-Identifier: GPL-2.0
/*
 * Progress of a kernel load or verify job, or of a drain.  On a terminal a
 * single line is redrawn in place; otherwise (logs, systemd units) a plain
 * line is written only every 10 % or 5 s so a 100 GiB load does not flood
 * the journal.
 */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"
#include "progress.h"

#define PLAIN_INTERVAL_MS	5000
#define TTY_TEXT_INTERVAL_MS	1000

static double pct_of(uint64_t done, uint64_t total)
{
	if (!total)
		return 0;
	return done >= total ? 100.0 : 100.0 * (double)done / (double)total;
}

size_t progress_format(char *buf, size_t len, unsigned int width, const char *verb,
		       const char *name, uint64_t done, uint64_t total, uint64_t elapsed_ns)
{
	char d[32], t[32], e[24], r[32], eta[32] = "", tail[128], head[160];
	unsigned int barw = 0, fill, i;
	size_t hl, tl, off;

	fmt_bytes(d, sizeof(d), done);
	fmt_bytes(t, sizeof(t), total);
	if (done && done < total && elapsed_ns) {
		double left = (double)elapsed_ns * (double)(total - done) / (double)done;

		snprintf(eta, sizeof(eta), "  ETA %s", fmt_duration(e, sizeof(e), (uint64_t)left));
	}
	tl = snprintf(tail, sizeof(tail), " %5.1f%%  %s/%s  %s%s", pct_of(done, total), d, t,
		      fmt_rate(r, sizeof(r), done, elapsed_ns), eta);
	hl = snprintf(head, sizeof(head), "%s %s ", verb, name);
	if (hl >= sizeof(head))
		hl = sizeof(head) - 1;

	/* The bar takes what is left, within reason; no room means no bar. */
	if (width > hl + tl + 12) {
		barw = width - hl - tl - 3;
		if (barw > 40)
			barw = 40;
	}
	off = snprintf(buf, len, "%s", head);
	if (barw && off + barw + 3 < len) {
		fill = (unsigned int)(pct_of(done, total) * barw / 100.0);
		buf[off++] = '[';
		for (i = 0; i < barw; i++)
			buf[off++] = i < fill ? '#' : '-';
		buf[off++] = ']';
		buf[off] = '\0';
	}
	if (off < len)
		off += snprintf(buf + off, len - off, "%s", tail);
	return off < len ? off : len - 1;
}

size_t progress_format_plain(char *buf, size_t len, const char *verb, const char *name,
			     uint64_t done, uint64_t total, uint64_t elapsed_ns)
{
	char d[32], t[32], r[32];
	int n;

	n = snprintf(buf, len, "%s %s: %.0f%% (%s of %s, %s)", verb, name,
		     pct_of(done, total), fmt_bytes(d, sizeof(d), done),
		     fmt_bytes(t, sizeof(t), total), fmt_rate(r, sizeof(r), done, elapsed_ns));
	return (size_t)n < len ? (size_t)n : len - 1;
}

/**
 * progress_now_ms() - the monotonic clock in milliseconds, for rate limits
 *
 * Return: milliseconds since an arbitrary point.
 */
uint64_t progress_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void progress_init(struct progress *p, const char *verb, const char *name, int enabled)
{
	memset(p, 0, sizeof(*p));
	p->verb = verb;
	p->name = name;
	p->enabled = enabled;
	p->tty = isatty(STDERR_FILENO);
	p->last_decile = -1;
	p->last_ms = progress_now_ms();
}

void progress_update(struct progress *p, uint64_t done, uint64_t total, uint64_t elapsed_ns)
{
	char line[512];
	struct winsize ws;
	unsigned int width = 80;
	int decile;

	if (!p->enabled || !total)
		return;
	if (p->tty) {
		if (!ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) && ws.ws_col > 20)
			width = ws.ws_col - 1;
		progress_format(line, sizeof(line), width, p->verb, p->name, done, total,
				elapsed_ns);
		fprintf(stderr, "\r%s\033[K", line);
		fflush(stderr);
		p->drawn = 1;
		return;
	}
	decile = (int)(pct_of(done, total) / 10);
	if (decile == p->last_decile && progress_now_ms() - p->last_ms < PLAIN_INTERVAL_MS)
		return;
	p->last_decile = decile;
	p->last_ms = progress_now_ms();
	progress_format_plain(line, sizeof(line), p->verb, p->name, done, total, elapsed_ns);
	fprintf(stderr, "%s\n", line);
}

void progress_text(struct progress *p, const char *line)
{
	uint64_t now = progress_now_ms();

	if (!p->enabled)
		return;
	if (p->texts &&
	    now - p->last_ms < (p->tty ? TTY_TEXT_INTERVAL_MS : PLAIN_INTERVAL_MS))
		return;
	p->texts++;
	p->last_ms = now;
	if (p->tty) {
		struct winsize ws;
		int width = 80;

		/* A line that wrapped could not be redrawn in place. */
		if (!ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) && ws.ws_col > 20)
			width = ws.ws_col - 1;
		fprintf(stderr, "\r%.*s\033[K", width, line);
		fflush(stderr);
		p->drawn = 1;
		return;
	}
	fprintf(stderr, "%s\n", line);
}

void progress_end(struct progress *p)
{
	if (p->drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		p->drawn = 0;
	}
}
