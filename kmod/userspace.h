/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the files that also build in userspace (ENGRAM_USERSPACE: url.c,
 * prefix.c, list.c, wire.c, wbuild.c), to be unit-tested and fuzzed there,
 * need of the kernel's types and socket headers: in the kernel the real
 * ones, in userspace the C library's and the kernel's exported ones, with
 * the kernel's short type names on top.
 */
#ifndef _ENGRAM_USERSPACE_H
#define _ENGRAM_USERSPACE_H

#ifdef ENGRAM_USERSPACE
#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>
#include <sys/socket.h>
#include <netinet/in.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;

#ifndef U32_MAX
#define U32_MAX		((u32)~0U)
#endif
#else
#include <linux/types.h>
#include <linux/socket.h>
#include <linux/in.h>
#include <linux/in6.h>
#endif

#endif
