// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA devices.  Server connections and client links on one device share
 * one protection domain, so the device's state is refcounted here rather
 * than owned by either role.
 *
 * The ib_client is what makes device removal safe: the RDMA core calls
 * .remove before it frees the device, and every user of the device (server
 * connections and listeners, client links, the tables' DMA mappings) must
 * be gone when it returns.  Clients are removed in the reverse order of
 * registration, so ours runs before rdma_cm's: our listeners and
 * connections are torn down by us, not by DEVICE_REMOVAL events.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bug.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "engram.h"

static LIST_HEAD(engram_devs);
static DEFINE_MUTEX(engram_devs_mutex);	/* engram_devs, and each kref's last put */

/*
 * Every device our ib_client was told about and not yet told to remove:
 * what a table is mapped for when it is loaded.
 */
struct engram_present {
	struct list_head node;
	struct ib_device *ibdev;
};

static LIST_HEAD(engram_present_devs);	/* under engram_devs_mutex */
static unsigned int engram_npresent;

/*
 * Devices our remove() has run for.  A connection rdma_cm accepts between
 * our remove() and its own must not get a PD (or DMA maps) on it: nothing
 * would free them before the device goes.  An add() for the same pointer
 * (a new device at the same address) clears it.
 */
#define ENGRAM_DEAD_DEVS	8
static struct ib_device *engram_dead_devs[ENGRAM_DEAD_DEVS];
static unsigned int engram_dead_next;

static bool engram_dev_dead_locked(struct ib_device *ibdev)
{
	unsigned int i;

	lockdep_assert_held(&engram_devs_mutex);
	for (i = 0; i < ENGRAM_DEAD_DEVS; i++)
		if (engram_dead_devs[i] == ibdev)
			return true;
	return false;
}

/**
 * engram_dev_dead() - is this device being (or already) removed?
 * @ibdev: the device
 *
 * Return: true after our ib_client remove() started for it, until an add()
 * reports a device at that address again.
 */
bool engram_dev_dead(struct ib_device *ibdev)
{
	bool dead;

	mutex_lock(&engram_devs_mutex);
	dead = engram_dev_dead_locked(ibdev);
	mutex_unlock(&engram_devs_mutex);
	return dead;
}

static struct engram_dev *engram_dev_find(struct ib_device *ibdev)
{
	struct engram_dev *dev;

	lockdep_assert_held(&engram_devs_mutex);
	list_for_each_entry(dev, &engram_devs, node)
		if (dev->ibdev == ibdev)
			return dev;
	return NULL;
}

/**
 * engram_dev_get() - find or create the state of an RDMA device
 * @ibdev: the device, typically a cm_id's device
 *
 * The first user of a device allocates its protection domain.  Callers
 * must hold the device alive (a cm_id bound to it does) and must drop
 * their reference with engram_dev_put() before the device's ib_client
 * .remove returns.  May sleep.
 *
 * Return: the device state with a new reference, or NULL when the PD
 * cannot be allocated or memory is short.
 */
struct engram_dev *engram_dev_get(struct ib_device *ibdev)
{
	struct engram_dev *dev;
	struct ib_pd *pd;

	mutex_lock(&engram_devs_mutex);
	if (engram_dev_dead_locked(ibdev)) {
		dev = NULL;
		goto out;
	}
	dev = engram_dev_find(ibdev);
	if (dev) {
		kref_get(&dev->ref);
		goto out;
	}
	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		goto out;
	pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(pd)) {
		pr_err_ratelimited("%s: cannot allocate a protection domain: %ld\n",
				   dev_name(&ibdev->dev), PTR_ERR(pd));
		kfree(dev);
		dev = NULL;
		goto out;
	}
	kref_init(&dev->ref);
	dev->ibdev = ibdev;
	dev->pd = pd;
	list_add_tail(&dev->node, &engram_devs);
out:
	mutex_unlock(&engram_devs_mutex);
	return dev;
}

/* Called by kref_put_mutex() with engram_devs_mutex held; drops it. */
static void engram_dev_release(struct kref *ref)
{
	struct engram_dev *dev = container_of(ref, struct engram_dev, ref);

	list_del(&dev->node);
	mutex_unlock(&engram_devs_mutex);
	ib_dealloc_pd(dev->pd);
	kfree(dev);
}

/**
 * engram_dev_put() - drop a reference taken by engram_dev_get()
 * @dev: the device state; NULL is ignored
 *
 * The last reference frees the protection domain, so every QP and MR made
 * on it must be destroyed first.  May sleep.
 */
void engram_dev_put(struct engram_dev *dev)
{
	if (dev)
		kref_put_mutex(&dev->ref, engram_dev_release, &engram_devs_mutex);
}

/**
 * engram_dev_present() - the RDMA devices present now, each held
 * @out: set to an array the caller frees with kfree(), after dropping each
 *	device with ib_device_put()
 *
 * A device whose removal has begun may be in the array; engram_dev_dead()
 * tells.  May sleep.
 *
 * Return: the number of devices in *@out (0 with *@out NULL when there is
 * none or no memory).
 */
unsigned int engram_dev_present(struct ib_device ***out)
{
	struct engram_present *p;
	unsigned int n = 0;

	*out = NULL;
	mutex_lock(&engram_devs_mutex);
	if (engram_npresent)
		*out = kmalloc_array(engram_npresent, sizeof(**out), GFP_KERNEL);
	if (*out) {
		list_for_each_entry(p, &engram_present_devs, node)
			if (ib_device_try_get(p->ibdev))
				(*out)[n++] = p->ibdev;
	}
	mutex_unlock(&engram_devs_mutex);
	if (!n) {
		kfree(*out);
		*out = NULL;
	}
	return n;
}

static int engram_ib_add(struct ib_device *ibdev)
{
	struct engram_present *p = kzalloc(sizeof(*p), GFP_KERNEL);
	unsigned int i;

	mutex_lock(&engram_devs_mutex);
	for (i = 0; i < ENGRAM_DEAD_DEVS; i++)
		if (engram_dead_devs[i] == ibdev)
			engram_dead_devs[i] = NULL;
	if (p) {
		p->ibdev = ibdev;
		list_add_tail(&p->node, &engram_present_devs);
		engram_npresent++;
	}
	mutex_unlock(&engram_devs_mutex);
	if (!p)
		pr_warn("%s: no memory to track it: tables are mapped for it at first use\n",
			dev_name(&ibdev->dev));
	/* A listener waiting for an address on this device can retry now. */
	engram_server_add_device(ibdev);
	/* Tables get mapped for it in the background, not by its first request. */
	engram_tables_device_added();
	return 0;
}

static void engram_ib_remove(struct ib_device *ibdev, void *client_data)
{
	struct engram_present *p, *tmp;
	bool leak;

	mutex_lock(&engram_devs_mutex);
	engram_dead_devs[engram_dead_next++ % ENGRAM_DEAD_DEVS] = ibdev;
	list_for_each_entry_safe(p, tmp, &engram_present_devs, node) {
		if (p->ibdev != ibdev)
			continue;
		list_del(&p->node);
		engram_npresent--;
		kfree(p);
	}
	mutex_unlock(&engram_devs_mutex);
	/* Server first: its connections and listeners accept no new users. */
	engram_server_remove_device(ibdev);
	engram_links_remove_device(ibdev);
	engram_dma_unmap_device(ibdev);

	mutex_lock(&engram_devs_mutex);
	leak = engram_dev_find(ibdev);
	mutex_unlock(&engram_devs_mutex);
	/* A PD left behind would be freed under us by the driver. */
	WARN(leak, KBUILD_MODNAME ": %s removed while still in use\n",
	     dev_name(&ibdev->dev));
}

static struct ib_client engram_ib_client = {
	.name = "engram_rdma",
	.add = engram_ib_add,
	.remove = engram_ib_remove,
};

/**
 * engram_dev_init() - start watching RDMA devices
 *
 * Context: process context.  Registering calls .add for every device
 * present, which only kicks the listeners' retry, so this may run before
 * or after engram_server_init().
 *
 * Return: 0 or a negative errno from ib_register_client().
 */
int engram_dev_init(void)
{
	return ib_register_client(&engram_ib_client);
}

/**
 * engram_dev_exit() - stop watching RDMA devices
 *
 * Unregistering calls .remove for every device, which tears down whatever
 * still uses it; call it after the server and the links are stopped, and
 * before the tables are freed (their DMA mappings are undone here).
 */
void engram_dev_exit(void)
{
	ib_unregister_client(&engram_ib_client);
	WARN_ON(!list_empty(&engram_devs));
}
