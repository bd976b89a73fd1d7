// SPDX-License-Identifier: GPL-2.0
/*
 * engram_rdma: serve Engram lookup tables from a host's page cache.
 * This file only wires the parts together; see engram.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <net/genetlink.h>

#include "engram.h"

static int __init engram_init(void)
{
	int ret;

	ret = engram_params_init();
	if (ret)
		return ret;
	ret = engram_allow_init();
	if (ret)
		return ret;
	ret = engram_tables_init();
	if (ret)
		goto err_allow;
	ret = engram_server_init();
	if (ret)
		goto err_tables;
	ret = engram_links_init();
	if (ret)
		goto err_server;
	/* After server and links: its add() callback may start both. */
	ret = engram_dev_init();
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
	engram_dev_exit();
err_links:
	engram_links_exit();
err_server:
	engram_server_exit();
err_tables:
	engram_tables_exit();
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
	engram_links_exit();
	engram_server_exit();
	engram_dev_exit();
	engram_tables_exit();
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
