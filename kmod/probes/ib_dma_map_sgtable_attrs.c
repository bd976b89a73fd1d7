// SPDX-License-Identifier: GPL-2.0
/* ib_dma_map_sgtable_attrs() and its unmap (5.11). */
#include <rdma/ib_verbs.h>

static __maybe_unused int probe(struct ib_device *dev, struct sg_table *sgt)
{
	ib_dma_unmap_sgtable_attrs(dev, sgt, DMA_TO_DEVICE, 0);
	return ib_dma_map_sgtable_attrs(dev, sgt, DMA_TO_DEVICE, 0);
}
