// SPDX-License-Identifier: GPL-2.0
/*
 * What engramctl tells systemd when a Type=notify unit runs it
 * (engram-rdma-tables.service): a status line while tables load and hash,
 * the start (or reload) timeout extended while a kernel job is seen alive,
 * and READY=1 once the listed tables serve.  Without $NOTIFY_SOCKET
 * libsystemd sends nothing, so a command run from a shell is unchanged.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "notify.h"
#include "progress.h"

/*
 * A job the kernel still reports as running buys this much more time: the
 * unit's own TimeoutStartSec= then only bounds the steps that show no job
 * (modprobe, netlink, the gaps between tables), and a load of 94 GiB from
 * a cold disk is never cut short while it moves.
 */
#define SVC_EXTEND_USEC		(90ULL * 1000 * 1000)
/* engramctl polls a job every 200 ms; systemd needs to hear far less often. */
#define SVC_INTERVAL_MS		1000
/* How long READY=1 may wait for systemd to have read it (sd_notify_barrier). */
#define SVC_BARRIER_USEC	(5ULL * 1000 * 1000)

static uint64_t last_ms;
static char last_job[256];

static int svc_wanted(void)
{
	return getenv("NOTIFY_SOCKET") != NULL;
}

/* @head (empty, or "READY=1\n"), then STATUS= the formatted line. */
static void svc_vsend(const char *head, const char *fmt, va_list ap)
{
	char line[256];

	vsnprintf(line, sizeof(line), fmt, ap);
	sd_notifyf(0, "%sSTATUS=%s", head, line);
}

/**
 * svc_status() - set the unit's status line (systemctl status)
 * @fmt: printf format of the line
 */
void svc_status(const char *fmt, ...)
{
	va_list ap;

	if (!svc_wanted())
		return;
	va_start(ap, fmt);
	svc_vsend("", fmt, ap);
	va_end(ap);
}

/**
 * svc_progress() - a kernel job's progress, as status and a longer timeout
 * @pg: the job being followed (its verb and table name)
 * @done: bytes read and hashed so far
 * @total: bytes of the file
 * @elapsed_ns: time the job has run
 *
 * Called on every poll of a job that is still running; sends the first
 * poll of each job, then at most once a second.
 */
void svc_progress(const struct progress *pg, uint64_t done, uint64_t total, uint64_t elapsed_ns)
{
	char line[256];
	uint64_t now;

	if (!svc_wanted())
		return;
	now = progress_now_ms();
	snprintf(line, sizeof(line), "%s %s", pg->verb, pg->name);
	if (!strcmp(line, last_job) && now - last_ms < SVC_INTERVAL_MS)
		return;
	snprintf(last_job, sizeof(last_job), "%s", line);
	last_ms = now;
	progress_format_plain(line, sizeof(line), pg->verb, pg->name, done, total, elapsed_ns);
	sd_notifyf(0, "STATUS=%s\nEXTEND_TIMEOUT_USEC=%llu", line,
		   (unsigned long long)SVC_EXTEND_USEC);
}

/**
 * svc_ready() - the listed tables serve: READY=1 with a last status line
 * @fmt: printf format of the status line
 *
 * Waits (up to 5 s) until systemd has read it: engramctl exits right after,
 * and a Type=notify unit whose main process is gone before its READY=1 was
 * read would be taken as failed.
 */
void svc_ready(const char *fmt, ...)
{
	va_list ap;

	if (!svc_wanted())
		return;
	va_start(ap, fmt);
	svc_vsend("READY=1\n", fmt, ap);
	va_end(ap);
	sd_notify_barrier(0, SVC_BARRIER_USEC);
}
