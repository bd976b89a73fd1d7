/* SPDX-License-Identifier: GPL-2.0 */
/* What engramctl tells systemd when a Type=notify unit runs it. */
#ifndef ENGRAMCTL_NOTIFY_H
#define ENGRAMCTL_NOTIFY_H

#include <stdint.h>

struct progress;

void svc_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void svc_progress(const struct progress *pg, uint64_t done, uint64_t total, uint64_t elapsed_ns);
void svc_ready(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* ENGRAMCTL_NOTIFY_H */
