/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private to the host role: the TCP transport of serve_tcp.c, as serve_listen.c
 * and serve_rdma.c drive it.  Listener state (ACTIVE, WAITING, retries) stays
 * in serve_listen.c; this side owns the sockets and the connections.
 */
#ifndef _ENGRAM_SERVE_TCP_H
#define _ENGRAM_SERVE_TCP_H

struct engram_listener;

int engram_serve_tcp_init(void);
void engram_serve_tcp_exit(void);
int engram_serve_tcp_listen_start(struct engram_listener *l);
void engram_serve_tcp_listen_stop(struct engram_listener *l);
void engram_serve_tcp_conns_close_sync(const struct engram_listener *l);

#endif /* _ENGRAM_SERVE_TCP_H */
