// SPDX-License-Identifier: GPL-2.0
/*
 * engram_rdma: serve Engram lookup tables from a host's page cache.
 * This file only wires the parts together; see engram.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <net/genetlink.h>
#include <rdma/ib_verbs.h>

#include "engram.h"
#include "link.h"
#include "link_table.h"

/*
 * RDMA devices come and go through our ib_client.  Its .remove runs before
 * the RDMA core frees the device, and every user of the device must be gone
 * when it returns.  Clients are removed in the reverse order of
 * registration, so ours runs before rdma_cm's: our listeners and
 * connections are torn down by us, not by DEVICE_REMOVAL events.
 */
static int engram_ib_add(struct ib_device *ibdev)
{
	engram_dev_added(ibdev);
	/* A listener waiting for an address on this device can retry now. */
	engram_serve_listen_add_device(ibdev);
	/* Tables get mapped for it in the background, not by its first request. */
	engram_table_device_added();
	return 0;
}

static void engram_ib_remove(struct ib_device *ibdev, void *client_data)
{
	engram_dev_removing(ibdev);
	/* Server first: its connections and listeners accept no new users. */
	engram_serve_listen_remove_device(ibdev);
	engram_link_admin_remove_device(ibdev);
	engram_dma_unmap_device(ibdev);
	engram_dev_removed(ibdev);
}

static struct ib_client engram_ib_client = {
	.name = "engram_rdma",
	.add = engram_ib_add,
	.remove = engram_ib_remove,
};

static int __init engram_init(void)
{
	int ret;

	ret = engram_params_init();
	if (ret)
		return ret;
	ret = engram_allow_init();
	if (ret)
		return ret;
	ret = engram_table_init();
	if (ret)
		goto err_allow;
	/* The host role: its core, then the listeners and transports over it. */
	ret = engram_serve_init();
	if (ret)
		goto err_tables;
	ret = engram_serve_listen_init();
	if (ret)
		goto err_serve;
	/* The client role: its transports, then the links. */
	engram_link_rdma_init();
	ret = engram_link_tcp_init();
	if (ret)
		goto err_rdma_links;
	ret = engram_link_admin_init();
	if (ret)
		goto err_tcp_links;
	/*
	 * After server and links: its add() callback may start both.  Its
	 * remove(), for every device, when it goes: after the server and the
	 * links stopped, before the tables (their DMA maps go there).
	 */
	ret = ib_register_client(&engram_ib_client);
	if (ret)
		goto err_links;
	ret = engram_chardev_init();
	if (ret)
		goto err_dev;
	ret = engram_netlink_init();
	if (ret)
		goto err_chardev;
	engram_statlog_init();
	pr_info("version %s loaded\n", ENGRAM_VERSION);
	return 0;

err_chardev:
	engram_chardev_exit();
err_dev:
	ib_unregister_client(&engram_ib_client);
	engram_dev_exit();
err_links:
	engram_link_admin_exit();
err_tcp_links:
	engram_link_tcp_exit();
err_rdma_links:
	engram_link_rdma_exit();
	engram_serve_listen_exit();
err_serve:
	engram_serve_exit();
err_tables:
	engram_table_exit();
err_allow:
	engram_allow_exit();
	return ret;
}

static void __exit engram_exit(void)
{
	/* Netlink first, so no request can start work on a table going away. */
	engram_netlink_exit();
	/* No new fetch, then no link, no connection, and only then no device. */
	engram_chardev_exit();
	engram_statlog_exit();
	/* The client's per-table counters: no fd uses one now. */
	engram_link_table_exit();
	engram_link_admin_exit();
	engram_link_tcp_exit();
	engram_link_rdma_exit();
	engram_serve_listen_exit();
	engram_serve_exit();
	ib_unregister_client(&engram_ib_client);
	engram_dev_exit();
	engram_table_exit();
	engram_allow_exit();
	pr_info("unloaded\n");
}

module_init(engram_init);
module_exit(engram_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Serve Engram lookup tables from the page cache over RDMA and TCP");
MODULE_AUTHOR("engram-rdma developers");
MODULE_VERSION(ENGRAM_VERSION);
MODULE_ALIAS_GENL_FAMILY(ENGRAM_GENL_NAME);
