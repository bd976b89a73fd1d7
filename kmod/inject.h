/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Error injection into the module's calls to the RDMA core, the DMA API,
 * the socket layer and the page pinner: what a real NIC, IOMMU or network
 * can fail and Soft-RoCE and the tests' loopback never do; and into the
 * allocation of an event's message, which only memory pressure fails.
 *
 * Each kind of call has a hook, engram_inject_<kind>(), that returns 0 and
 * is marked ALLOW_ERROR_INJECTION, so that the kernel's fail_function can
 * make it return an errno:
 *
 *   echo engram_inject_post_send > /sys/kernel/debug/fail_function/inject
 *
 * The wrappers below call the hook first and, when it fails, return that
 * error without calling the real function, as the real one would fail:
 * nothing mapped, posted, allocated or pinned (a failed post names its
 * first WR as the bad one).  Documentation/failures.rst lists the hooks,
 * Documentation/testing.rst the test that drives each (t_67_failfunc).
 * Without CONFIG_FUNCTION_ERROR_INJECTION the hooks are constant 0 and
 * compile away.
 */
#ifndef ENGRAM_INJECT_H
#define ENGRAM_INJECT_H

#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/net.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#include "compat.h"

#ifdef CONFIG_FUNCTION_ERROR_INJECTION
int engram_inject_dma_map(void);
int engram_inject_post_send(void);
int engram_inject_post_recv(void);
int engram_inject_alloc_pd(void);
int engram_inject_alloc_cq(void);
int engram_inject_alloc_mr(void);
int engram_inject_map_mr_sg(void);
int engram_inject_create_qp(void);
int engram_inject_cm_id(void);
int engram_inject_cm_bind(void);
int engram_inject_cm_listen(void);
int engram_inject_cm_accept(void);
int engram_inject_sock_create(void);
int engram_inject_sock_listen(void);
int engram_inject_sock_accept(void);
int engram_inject_sock_connect(void);
int engram_inject_pin_pages(void);
int engram_inject_event_msg(void);
#else
static inline int engram_inject_dma_map(void)
{
	return 0;
}

static inline int engram_inject_post_send(void)
{
	return 0;
}

static inline int engram_inject_post_recv(void)
{
	return 0;
}

static inline int engram_inject_alloc_pd(void)
{
	return 0;
}

static inline int engram_inject_alloc_cq(void)
{
	return 0;
}

static inline int engram_inject_alloc_mr(void)
{
	return 0;
}

static inline int engram_inject_map_mr_sg(void)
{
	return 0;
}

static inline int engram_inject_create_qp(void)
{
	return 0;
}

static inline int engram_inject_cm_id(void)
{
	return 0;
}

static inline int engram_inject_cm_bind(void)
{
	return 0;
}

static inline int engram_inject_cm_listen(void)
{
	return 0;
}

static inline int engram_inject_cm_accept(void)
{
	return 0;
}

static inline int engram_inject_sock_create(void)
{
	return 0;
}

static inline int engram_inject_sock_listen(void)
{
	return 0;
}

static inline int engram_inject_sock_accept(void)
{
	return 0;
}

static inline int engram_inject_sock_connect(void)
{
	return 0;
}

static inline int engram_inject_pin_pages(void)
{
	return 0;
}

static inline int engram_inject_event_msg(void)
{
	return 0;
}
#endif

/*
 * An injected mapping failure maps nothing and returns DMA_MAPPING_ERROR,
 * which engram_dma_mapping_error() reports even on a device without DMA
 * (rxe's addresses are kernel virtual ones, never all ones).
 */
static inline u64 engram_dma_map_page(struct ib_device *dev, struct page *page,
				      unsigned long offset, size_t size,
				      enum dma_data_direction dir)
{
	if (engram_inject_dma_map())
		return DMA_MAPPING_ERROR;
	return ib_dma_map_page(dev, page, offset, size, dir);
}

static inline u64 engram_dma_map_single(struct ib_device *dev, void *cpu_addr, size_t size,
					enum dma_data_direction dir)
{
	if (engram_inject_dma_map())
		return DMA_MAPPING_ERROR;
	return ib_dma_map_single(dev, cpu_addr, size, dir);
}

static inline int engram_dma_map_sgtable(struct ib_device *dev, struct sg_table *sgt,
					 enum dma_data_direction dir)
{
	int ret = engram_inject_dma_map();

	if (ret)
		return ret;
	return ib_dma_map_sgtable_attrs(dev, sgt, dir, 0);
}

static inline int engram_dma_mapping_error(struct ib_device *dev, u64 dma_addr)
{
	return dma_addr == DMA_MAPPING_ERROR || ib_dma_mapping_error(dev, dma_addr);
}

static inline int engram_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
				   const struct ib_send_wr **bad_wr)
{
	int ret = engram_inject_post_send();

	if (ret) {
		if (bad_wr)
			*bad_wr = wr;
		return ret;
	}
	return ib_post_send(qp, wr, bad_wr);
}

static inline int engram_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
				   const struct ib_recv_wr **bad_wr)
{
	int ret = engram_inject_post_recv();

	if (ret) {
		if (bad_wr)
			*bad_wr = wr;
		return ret;
	}
	return ib_post_recv(qp, wr, bad_wr);
}

static inline struct ib_pd *engram_alloc_pd(struct ib_device *dev)
{
	int ret = engram_inject_alloc_pd();

	return ret ? ERR_PTR(ret) : ib_alloc_pd(dev, 0);
}

static inline struct ib_cq *engram_alloc_cq(struct ib_device *dev, void *private, int nr_cqe,
					    int comp_vector, enum ib_poll_context poll_ctx)
{
	int ret = engram_inject_alloc_cq();

	return ret ? ERR_PTR(ret) : ib_alloc_cq(dev, private, nr_cqe, comp_vector, poll_ctx);
}

static inline struct ib_cq *engram_cq_pool_get(struct ib_device *dev, unsigned int nr_cqe,
					       int comp_vector_hint, enum ib_poll_context poll_ctx)
{
	int ret = engram_inject_alloc_cq();

	return ret ? ERR_PTR(ret) : ib_cq_pool_get(dev, nr_cqe, comp_vector_hint, poll_ctx);
}

static inline struct ib_mr *engram_alloc_mr(struct ib_pd *pd, enum ib_mr_type type,
					    u32 max_num_sg)
{
	int ret = engram_inject_alloc_mr();

	return ret ? ERR_PTR(ret) : ib_alloc_mr(pd, type, max_num_sg);
}

static inline int engram_map_mr_sg(struct ib_mr *mr, struct scatterlist *sg, int sg_nents,
				   unsigned int *sg_offset, unsigned int page_size)
{
	return engram_inject_map_mr_sg() ?: ib_map_mr_sg(mr, sg, sg_nents, sg_offset, page_size);
}

static inline int engram_create_qp(struct rdma_cm_id *id, struct ib_pd *pd,
				   struct ib_qp_init_attr *attr)
{
	return engram_inject_create_qp() ?: rdma_create_qp(id, pd, attr);
}

static inline struct rdma_cm_id *engram_create_id(struct net *net,
						  rdma_cm_event_handler handler,
						  void *context, enum rdma_ucm_port_space ps,
						  enum ib_qp_type qp_type)
{
	int ret = engram_inject_cm_id();

	return ret ? ERR_PTR(ret) : rdma_create_id(net, handler, context, ps, qp_type);
}

static inline int engram_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return engram_inject_cm_bind() ?: rdma_bind_addr(id, addr);
}

static inline int engram_cm_listen(struct rdma_cm_id *id, int backlog)
{
	return engram_inject_cm_listen() ?: rdma_listen(id, backlog);
}

static inline int engram_cm_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	return engram_inject_cm_accept() ?: rdma_accept(id, param);
}

static inline int engram_sock_create_kern(struct net *net, int family, int type, int proto,
					  struct socket **res)
{
	return engram_inject_sock_create() ?: sock_create_kern(net, family, type, proto, res);
}

static inline int engram_kernel_listen(struct socket *sock, int backlog)
{
	return engram_inject_sock_listen() ?: kernel_listen(sock, backlog);
}

static inline int engram_kernel_accept(struct socket *sock, struct socket **newsock, int flags)
{
	return engram_inject_sock_accept() ?: kernel_accept(sock, newsock, flags);
}

static inline int engram_kernel_connect(struct socket *sock, struct sockaddr_unsized *addr,
					int addrlen, int flags)
{
	return engram_inject_sock_connect() ?: kernel_connect(sock, addr, addrlen, flags);
}

static inline int engram_pin_user_pages_fast(unsigned long start, int nr_pages,
					     unsigned int gup_flags, struct page **pages)
{
	return engram_inject_pin_pages() ?: pin_user_pages_fast(start, nr_pages, gup_flags,
								pages);
}

#endif /* ENGRAM_INJECT_H */
