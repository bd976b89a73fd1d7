#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Look up the test kernels recorded by deps.sh.
#
#   kernels.sh kdir KVER      build tree of the running kernel if it exists,
#                             else that of test kernel KVER (6.1 or 6.12),
#                             else nothing
#   kernels.sh release KVER   e.g. 6.1.0-57-amd64 (nothing if unknown)
#   kernels.sh vmlinuz KVER   /boot/vmlinuz-<release> (nothing if missing)
#   kernels.sh builddir KVER  /lib/modules/<release>/build (test kernel only)
#
# Prints nothing and exits 0 when the kernel is not installed, so that
# $(shell ...) in a Makefile degrades to an empty value.
set -u
CACHE=${CACHE:-/var/cache/engram-rdma}

release() {
	local var
	case "${1:-}" in
	6.1) var=KREL_6_1 ;;
	6.12) var=KREL_6_12 ;;
	*) echo "kernels.sh: unknown KVER '${1:-}' (6.1 or 6.12)" >&2; return 2 ;;
	esac
	if [ -r "$CACHE/kernels.env" ]; then
		# shellcheck disable=SC1090
		(. "$CACHE/kernels.env"; eval "echo \${$var:-}")
		return 0
	fi
	# Not recorded yet: fall back to what is installed.
	local d r=""
	for d in /lib/modules/"$1".*-amd64/build; do
		[ -d "$d" ] && r=$(basename "$(dirname "$d")")
	done
	[ -n "$r" ] && echo "$r"
	return 0
}

case "${1:-}" in
kdir)
	d=/lib/modules/$(uname -r)/build
	if [ -d "$d" ]; then echo "$d"; exit 0; fi
	r=$(release "${2:-}") || exit 2
	[ -n "$r" ] && [ -d "/lib/modules/$r/build" ] && echo "/lib/modules/$r/build"
	;;
builddir)
	r=$(release "${2:-}") || exit 2
	[ -n "$r" ] && [ -d "/lib/modules/$r/build" ] && echo "/lib/modules/$r/build"
	;;
release)
	release "${2:-}" || exit 2
	;;
vmlinuz)
	r=$(release "${2:-}") || exit 2
	[ -n "$r" ] && [ -e "/boot/vmlinuz-$r" ] && echo "/boot/vmlinuz-$r"
	;;
*)
	echo "usage: kernels.sh kdir|builddir|release|vmlinuz KVER" >&2
	exit 2
	;;
esac
exit 0
