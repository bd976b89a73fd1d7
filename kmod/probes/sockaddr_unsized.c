// SPDX-License-Identifier: GPL-2.0
/* kernel_bind() and kernel_connect() take struct sockaddr_unsized (7.0). */
#include <linux/net.h>
#include <linux/socket.h>

static __maybe_unused int probe(struct socket *sock, struct sockaddr_unsized *addr)
{
	return kernel_bind(sock, addr, 0) ?: kernel_connect(sock, addr, 0, 0);
}
