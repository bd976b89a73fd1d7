/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Remote KCOV sections for the in-guest fuzzers (selftests/guest/kfuzz.c).
 *
 * What a peer sends over TCP or RDMA is handled in work items and
 * completion handlers, not in the fuzzer's own system calls, so KCOV's
 * per-task tracing never sees it.  These entry points bracket themselves
 * with kcov_remote_start_common() under a fixed instance: a fuzzer that
 * registers that common handle (KCOV_REMOTE_ENABLE) gets their edges.
 *
 * Only the project's coverage build (ENGRAM_COVERAGE=1, debug kernel)
 * compiles them in: kcov_remote_start() takes a global spinlock, which a
 * production fetch path must not.
 */
#ifndef ENGRAM_COVER_H
#define ENGRAM_COVER_H

#include <linux/kcov.h>

/* The instance of the common handle the fuzzers register: "ENG". */
#define ENGRAM_KCOV_INSTANCE	0x454e47

#if defined(ENGRAM_KCOV_REMOTE) && IS_ENABLED(CONFIG_KCOV)
static inline void engram_cover_start(void)
{
	kcov_remote_start_common(ENGRAM_KCOV_INSTANCE);
}

static inline void engram_cover_stop(void)
{
	kcov_remote_stop();
}
#else
static inline void engram_cover_start(void)
{
}

static inline void engram_cover_stop(void)
{
}
#endif

#endif /* ENGRAM_COVER_H */
