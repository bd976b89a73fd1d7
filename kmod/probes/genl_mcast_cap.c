// SPDX-License-Identifier: GPL-2.0
/* A multicast group can require CAP_NET_ADMIN to join (6.7, and stable kernels with the fix). */
#include <net/genetlink.h>

static const struct genl_multicast_group probe[] __maybe_unused = {
	{ .name = "probe", .flags = GENL_MCAST_CAP_NET_ADMIN },
};
