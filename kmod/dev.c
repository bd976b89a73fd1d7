// SPDX-License-Identifier: GPL-2.0
/*
 * RDMA devices.  Every user of a device (a client link's connection, a
 * server connection) opens it here and gets a protection domain of its
 * own.  A PD is the boundary of an rkey: memory a link registers for
 * remote write is reachable through that link's queue pair alone, never
 * through another link's or through a server connection's QP that a
 * different peer drives.  What is per device stays per device: DMA
 * addresses (dma.c, ubuf.c) belong to the device, not to a PD, and a
 * PD's local_dma_lkey covers any of them.
 *
 * The module's ib_client (main.c, where the order of init and exit is
 * written) tells this file when a device comes and goes: the devices
 * present (what tables are mapped for) and those whose removal began,
 * which no new user may open.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bug.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "engram.h"
#include "inject.h"

static LIST_HEAD(engram_devs);
static DEFINE_MUTEX(engram_devs_mutex);	/* engram_devs and engram_dead_devs */

/*
 * Every device our ib_client was told about and not yet told to remove:
 * what a table is mapped for when it is loaded.
 */
struct engram_present {
	struct list_head node;
	struct ib_device *ibdev;
	u64 seq;			/* order of arrival, from 1 */
};

static LIST_HEAD(engram_present_devs);	/* under engram_devs_mutex, by seq */
static u64 engram_present_seq;

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

static bool engram_dev_in_use_locked(struct ib_device *ibdev)
{
	struct engram_dev *dev;

	lockdep_assert_held(&engram_devs_mutex);
	list_for_each_entry(dev, &engram_devs, node)
		if (dev->ibdev == ibdev)
			return true;
	return false;
}

/**
 * engram_dev_open() - a new user of an RDMA device, with its own PD
 * @ibdev: the device, typically a cm_id's device
 *
 * Each call allocates a protection domain that no other caller shares, so
 * an rkey of one user's MR is refused on every other user's QP.  Callers
 * must hold the device alive (a cm_id bound to it does) and must close
 * the handle with engram_dev_close() before the device's ib_client
 * .remove returns.  May sleep.
 *
 * Return: the handle, or NULL when the device is being removed, the PD
 * cannot be allocated or memory is short.
 */
struct engram_dev *engram_dev_open(struct ib_device *ibdev)
{
	struct engram_dev *dev;
	struct ib_pd *pd;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return NULL;
	dev->ibdev = ibdev;
	/*
	 * The PD is allocated and listed under the mutex, so that .remove,
	 * which marks the device dead under it too, either sees this user
	 * or makes us refuse.
	 */
	mutex_lock(&engram_devs_mutex);
	if (engram_dev_dead_locked(ibdev))
		goto fail;
	pd = engram_alloc_pd(ibdev);
	if (IS_ERR(pd)) {
		pr_err_ratelimited("%s: cannot allocate a protection domain: %ld\n",
				   dev_name(&ibdev->dev), PTR_ERR(pd));
		goto fail;
	}
	dev->pd = pd;
	list_add_tail(&dev->node, &engram_devs);
	mutex_unlock(&engram_devs_mutex);
	return dev;
fail:
	mutex_unlock(&engram_devs_mutex);
	kfree(dev);
	return NULL;
}

/**
 * engram_dev_close() - end a use begun by engram_dev_open()
 * @dev: the handle; NULL is ignored
 *
 * Frees the user's protection domain, so every QP and MR made on it must
 * be destroyed first.  May sleep.
 */
void engram_dev_close(struct engram_dev *dev)
{
	if (!dev)
		return;
	/* Listed until the PD is gone: .remove's check must not miss it. */
	ib_dealloc_pd(dev->pd);
	mutex_lock(&engram_devs_mutex);
	list_del(&dev->node);
	mutex_unlock(&engram_devs_mutex);
	kfree(dev);
}

/**
 * engram_dev_next_present() - the next RDMA device present, held
 * @seq: 0 to start; the cursor, advanced past the device returned
 *
 * Walks the devices present in order of arrival, one at a time, so that a
 * caller that works long on each holds only the device it works on (a
 * device being unregistered waits for its holders).  A device that arrives
 * during the walk is found by it; one whose removal has begun may be
 * returned (engram_dev_dead() tells).  May sleep.
 *
 * Return: a device the caller drops with ib_device_put(), or NULL at the end.
 */
struct ib_device *engram_dev_next_present(u64 *seq)
{
	struct ib_device *ibdev = NULL;
	struct engram_present *p;

	mutex_lock(&engram_devs_mutex);
	list_for_each_entry(p, &engram_present_devs, node) {
		if (p->seq <= *seq)
			continue;
		*seq = p->seq;
		if (ib_device_try_get(p->ibdev)) {
			ibdev = p->ibdev;
			break;
		}
	}
	mutex_unlock(&engram_devs_mutex);
	return ibdev;
}

/**
 * engram_dev_added() - a device appeared
 * @ibdev: the device, from the ib_client's add
 *
 * Tables are mapped for the devices present (engram_dev_next_present()),
 * and a device at the address of one removed before is alive again.
 */
void engram_dev_added(struct ib_device *ibdev)
{
	struct engram_present *p = kzalloc(sizeof(*p), GFP_KERNEL);
	unsigned int i;

	mutex_lock(&engram_devs_mutex);
	for (i = 0; i < ENGRAM_DEAD_DEVS; i++)
		if (engram_dead_devs[i] == ibdev)
			engram_dead_devs[i] = NULL;
	if (p) {
		p->ibdev = ibdev;
		p->seq = ++engram_present_seq;
		list_add_tail(&p->node, &engram_present_devs);
	}
	mutex_unlock(&engram_devs_mutex);
	if (!p)
		pr_warn("%s: no memory to track it: no table is mapped for it, its requests are refused as not ready\n",
			dev_name(&ibdev->dev));
}

/**
 * engram_dev_removing() - a device is going: no new user may open it
 * @ibdev: the device, from the ib_client's remove, before its users are
 *	torn down
 */
void engram_dev_removing(struct ib_device *ibdev)
{
	struct engram_present *p, *tmp;

	mutex_lock(&engram_devs_mutex);
	engram_dead_devs[engram_dead_next++ % ENGRAM_DEAD_DEVS] = ibdev;
	list_for_each_entry_safe(p, tmp, &engram_present_devs, node) {
		if (p->ibdev != ibdev)
			continue;
		list_del(&p->node);
		kfree(p);
	}
	mutex_unlock(&engram_devs_mutex);
}

/**
 * engram_dev_removed() - check that a departing device has no user left
 * @ibdev: the device, once every user was torn down
 *
 * A PD left behind would be freed under us by the driver: warns.
 */
void engram_dev_removed(struct ib_device *ibdev)
{
	bool leak;

	mutex_lock(&engram_devs_mutex);
	leak = engram_dev_in_use_locked(ibdev);
	mutex_unlock(&engram_devs_mutex);
	WARN(leak, KBUILD_MODNAME ": %s removed while still in use\n",
	     dev_name(&ibdev->dev));
}

/**
 * engram_dev_exit() - after the ib_client is gone: no device is open
 */
void engram_dev_exit(void)
{
	WARN_ON(!list_empty(&engram_devs));
}
