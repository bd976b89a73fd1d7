/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one place that knows kernels differ.  Each block probes a feature
 * (not a version number) and gives the rest of the module one spelling.
 */
#ifndef _ENGRAM_COMPAT_H
#define _ENGRAM_COMPAT_H

#include <linux/netlink.h>
#include <linux/kernel.h>

/*
 * Formatted extack messages (6.2+).  Without them, the message must outlive
 * the handler until the ack is built.  Genl serialises handlers and their
 * acks under genl_mutex unless the family sets parallel_ops, so such kernels
 * get a serialised family and one static buffer.
 */
#ifdef NL_SET_ERR_MSG_FMT
#define ENGRAM_GENL_PARALLEL_OPS	true
#else
#define ENGRAM_GENL_PARALLEL_OPS	false
#define ENGRAM_EXTACK_FMT_LEN		80
extern char engram_extack_buf[ENGRAM_EXTACK_FMT_LEN];
#define NL_SET_ERR_MSG_FMT(extack, fmt, args...) do {			\
	struct netlink_ext_ack *__extack = (extack);			\
									\
	if (__extack) {							\
		snprintf(engram_extack_buf, sizeof(engram_extack_buf),	\
			 fmt, ##args);					\
		__extack->_msg = engram_extack_buf;			\
	}								\
} while (0)
#endif

#endif /* _ENGRAM_COMPAT_H */
