// SPDX-License-Identifier: GPL-2.0
/*
 * The error-injection hooks of inject.h: one function per kind of call,
 * which returns 0 unless fail_function makes it return an errno.  Out of
 * line and never inlined, so that a kprobe can take each one.
 */
#include <linux/compiler.h>
#include <linux/error-injection.h>

#include "inject.h"

#ifdef CONFIG_FUNCTION_ERROR_INJECTION
/**
 * engram_inject_dma_map() - fails the module's DMA mappings (page, single, sg_table)
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_dma_map(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_dma_map, ERRNO);

/**
 * engram_inject_post_send() - fails the module's ib_post_send()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_post_send(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_post_send, ERRNO);

/**
 * engram_inject_post_recv() - fails the module's ib_post_recv()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_post_recv(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_post_recv, ERRNO);

/**
 * engram_inject_alloc_pd() - fails the module's ib_alloc_pd()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_alloc_pd(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_alloc_pd, ERRNO);

/**
 * engram_inject_alloc_cq() - fails ib_alloc_cq() and ib_cq_pool_get()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_alloc_cq(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_alloc_cq, ERRNO);

/**
 * engram_inject_alloc_mr() - fails the module's ib_alloc_mr()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_alloc_mr(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_alloc_mr, ERRNO);

/**
 * engram_inject_map_mr_sg() - fails the module's ib_map_mr_sg()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_map_mr_sg(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_map_mr_sg, ERRNO);

/**
 * engram_inject_create_qp() - fails the module's rdma_create_qp()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_create_qp(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_create_qp, ERRNO);

/**
 * engram_inject_cm_id() - fails the module's rdma_create_id()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_cm_id(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_cm_id, ERRNO);

/**
 * engram_inject_cm_bind() - fails the module's rdma_bind_addr()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_cm_bind(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_cm_bind, ERRNO);

/**
 * engram_inject_cm_listen() - fails the module's rdma_listen()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_cm_listen(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_cm_listen, ERRNO);

/**
 * engram_inject_cm_accept() - fails the module's rdma_accept()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_cm_accept(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_cm_accept, ERRNO);

/**
 * engram_inject_sock_create() - fails the module's sock_create_kern()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_sock_create(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_sock_create, ERRNO);

/**
 * engram_inject_sock_listen() - fails the module's kernel_listen()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_sock_listen(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_sock_listen, ERRNO);

/**
 * engram_inject_sock_accept() - fails the module's kernel_accept()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_sock_accept(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_sock_accept, ERRNO);

/**
 * engram_inject_sock_connect() - fails the module's kernel_connect()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_sock_connect(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_sock_connect, ERRNO);

/**
 * engram_inject_pin_pages() - fails the module's pin_user_pages_fast()
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_pin_pages(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_pin_pages, ERRNO);

/**
 * engram_inject_event_msg() - fails building an event's netlink message
 *
 * As genlmsg_new() failing for want of memory: the event is counted lost.
 *
 * Return: 0, or the errno injected.
 */
noinline int engram_inject_event_msg(void)
{
	return 0;
}

ALLOW_ERROR_INJECTION(engram_inject_event_msg, ERRNO);
#endif
