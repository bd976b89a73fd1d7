/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tracepoints (tracefs: events/engram_rdma/): a fetch's submit, completion
 * and missed deadline on the GPU-node side, a link's state changes, and on
 * the host each request admitted or refused.  For following one fetch or
 * one peer through a busy system, where counters only give sums:
 *
 *   echo 1 > /sys/kernel/tracing/events/engram_rdma/enable
 *   cat /sys/kernel/tracing/trace_pipe
 *
 * Off, each costs a patched-out branch.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM engram_rdma

#if !defined(ENGRAM_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define ENGRAM_TRACE_H

#include <linux/tracepoint.h>
#include <linux/engram_rdma.h>

/* Named in the format file too, for perf and trace-cmd. */
TRACE_DEFINE_ENUM(ENGRAM_LINK_UNSPEC);
TRACE_DEFINE_ENUM(ENGRAM_LINK_CONNECTING);
TRACE_DEFINE_ENUM(ENGRAM_LINK_UP);
TRACE_DEFINE_ENUM(ENGRAM_LINK_DOWN);

TRACE_EVENT(engram_fetch_submit,
	    TP_PROTO(u32 link, u64 ticket, u32 rows, s64 timeout_ns),
	    TP_ARGS(link, ticket, rows, timeout_ns),
	    TP_STRUCT__entry(__field(u32, link)
			     __field(u32, rows)
			     __field(u64, ticket)
			     __field(s64, timeout_ns)),
	    TP_fast_assign(__entry->link = link;
			   __entry->rows = rows;
			   __entry->ticket = ticket;
			   __entry->timeout_ns = timeout_ns;),
	    TP_printk("link %u ticket %llu rows %u timeout_ns %lld", __entry->link,
		      __entry->ticket, __entry->rows, __entry->timeout_ns)
);

TRACE_EVENT(engram_fetch_done,
	    TP_PROTO(u32 link, u64 ticket, u32 rows, int error, u64 rtt_ns),
	    TP_ARGS(link, ticket, rows, error, rtt_ns),
	    TP_STRUCT__entry(__field(u32, link)
			     __field(u32, rows)
			     __field(u64, ticket)
			     __field(int, error)
			     __field(u64, rtt_ns)),
	    TP_fast_assign(__entry->link = link;
			   __entry->rows = rows;
			   __entry->ticket = ticket;
			   __entry->error = error;
			   __entry->rtt_ns = rtt_ns;),
	    TP_printk("link %u ticket %llu rows %u error %d rtt_ns %llu", __entry->link,
		      __entry->ticket, __entry->rows, __entry->error, __entry->rtt_ns)
);

/*
 * late_ns is negative when a closing fd ended the fetch before its
 * deadline: it is failed and its connection broken the same way.
 */
TRACE_EVENT(engram_fetch_timeout,
	    TP_PROTO(u32 link, u64 ticket, u32 rows, s64 late_ns),
	    TP_ARGS(link, ticket, rows, late_ns),
	    TP_STRUCT__entry(__field(u32, link)
			     __field(u32, rows)
			     __field(u64, ticket)
			     __field(s64, late_ns)),
	    TP_fast_assign(__entry->link = link;
			   __entry->rows = rows;
			   __entry->ticket = ticket;
			   __entry->late_ns = late_ns;),
	    TP_printk("link %u ticket %llu rows %u late_ns %lld: breaking the connection",
		      __entry->link, __entry->ticket, __entry->rows, __entry->late_ns)
);

TRACE_EVENT(engram_link_state,
	    TP_PROTO(u32 link, u8 old, u8 state, int error),
	    TP_ARGS(link, old, state, error),
	    TP_STRUCT__entry(__field(u32, link)
			     __field(u8, old)
			     __field(u8, state)
			     __field(int, error)),
	    TP_fast_assign(__entry->link = link;
			   __entry->old = old;
			   __entry->state = state;
			   __entry->error = error;),
	    TP_printk("link %u %s -> %s error %d", __entry->link,
		      __print_symbolic(__entry->old, { ENGRAM_LINK_UNSPEC, "unspec" },
				       { ENGRAM_LINK_CONNECTING, "connecting" },
				       { ENGRAM_LINK_UP, "up" }, { ENGRAM_LINK_DOWN, "down" }),
		      __print_symbolic(__entry->state, { ENGRAM_LINK_UNSPEC, "unspec" },
				       { ENGRAM_LINK_CONNECTING, "connecting" },
				       { ENGRAM_LINK_UP, "up" }, { ENGRAM_LINK_DOWN, "down" }),
		      __entry->error)
);

TRACE_EVENT(engram_serve_request,
	    TP_PROTO(u64 ticket, u64 generation, u32 rows, int status),
	    TP_ARGS(ticket, generation, rows, status),
	    TP_STRUCT__entry(__field(u64, ticket)
			     __field(u64, generation)
			     __field(u32, rows)
			     __field(int, status)),
	    TP_fast_assign(__entry->ticket = ticket;
			   __entry->generation = generation;
			   __entry->rows = rows;
			   __entry->status = status;),
	    TP_printk("ticket %llu generation %llu rows %u status %d", __entry->ticket,
		      __entry->generation, __entry->rows, __entry->status)
);

/* A fixed array for the name: __assign_str() changed its arguments in 6.10. */
TRACE_EVENT(engram_serve_refuse,
	    TP_PROTO(const char *table, int status),
	    TP_ARGS(table, status),
	    TP_STRUCT__entry(__array(char, table, ENGRAM_NAME_MAX)
			     __field(int, status)),
	    TP_fast_assign(strscpy(__entry->table, table, ENGRAM_NAME_MAX);
			   __entry->status = status;),
	    TP_printk("table %s status %d", __entry->table, __entry->status)
);

#endif /* ENGRAM_TRACE_H */

/* The event definitions are read from here, not from the kernel's tree. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
