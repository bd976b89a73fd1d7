// SPDX-License-Identifier: GPL-2.0
/* struct folio_batch in a header of its own, out of pagevec.h (7.x). */
#include <linux/folio_batch.h>
