// SPDX-License-Identifier: GPL-2.0
/* address_space_operations.read_folio, which replaced readpage (5.19). */
#include <linux/fs.h>

static __maybe_unused bool probe(const struct address_space_operations *a_ops)
{
	return a_ops->read_folio;
}
