/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private to the host role: the TCP transport of tcp_server.c, as listen.c
 * and server.c drive it.  Listener state (ACTIVE, WAITING, retries) stays
 * in listen.c; this side owns the sockets and the connections.
 */
#ifndef _ENGRAM_TCP_SERVER_H
#define _ENGRAM_TCP_SERVER_H

struct engram_listener;

int engram_tcp_init(void);
void engram_tcp_exit(void);
int engram_tcp_listen_start(struct engram_listener *l);
void engram_tcp_listen_stop(struct engram_listener *l);
void engram_tcp_conns_close_sync(const struct engram_listener *l);

#endif /* _ENGRAM_TCP_SERVER_H */
