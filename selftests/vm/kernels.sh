#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Look up the guests' kernels.  Every one lives in the cache, none in the
# machine's /boot, /lib/modules or /usr/src.
#
#   kernels.sh kdir KVER      build tree of the running kernel if it exists,
#                             else that of test kernel KVER, else nothing
#   kernels.sh release KVER   e.g. 6.1.0-57-amd64 (nothing if unknown)
#   kernels.sh vmlinuz KVER   the kernel image (nothing if missing)
#   kernels.sh builddir KVER  the test kernel's build tree (KDIR)
#   kernels.sh modroot KVER   its lib/modules/<release> (nothing if missing)
#
#   kernels.sh makeflags KVER extra make arguments to build for KVER
#   kernels.sh arch KVER      x86_64, or arm64 for "arm64-16k"
#
# KVER "6.1" and "6.12" are Debian's bookworm and bookworm-backports
# kernels, "5.10" and "7.2" bullseye's (the oldest ABI in its main
# archive, 5.10.0-30: what the oldest installs run) and sid's: headers and image
# unpacked into the cache by kheaders.sh (deps.sh asks it for 6.1 and 6.12).
# KVER "debug" is the kernel selftests/vm/debug-kernel.sh built, recorded in
# $CACHE/debug-kernel.env.
# KVER "arm64-16k" is bookworm-backports' 6.12 for arm64 with 16 KiB pages,
# also from the cache: the GPU node of the arm64 pair (run-arm64-pair.sh).
#
# Prints nothing and exits 0 when the kernel is not installed, so that
# $(shell ...) in a Makefile degrades to an empty value.
set -u
CACHE=${CACHE:-/var/cache/engram-rdma}
KH=$(dirname "$0")/kheaders.sh

# cached KVER: the kheaders.sh tree of a kernel kept in the cache.
cached() {
	case "${1:-}" in
	6.1 | 6.12 | 7.2) echo "x86-$1" ;;
	5.10) echo x86-5.10-oldest ;;
	arm64-16k) echo arm64-6.12-16k ;;
	*) return 1 ;;
	esac
}

# debug VAR: a value debug-kernel.sh recorded (nothing before it ran).
debug() {
	sed -n "s/^$1=//p" "$CACHE/debug-kernel.env" 2>/dev/null | tail -n1
}

release() {
	local t
	if t=$(cached "${1:-}"); then
		"$KH" release "$t" 2>/dev/null
		return 0
	fi
	case "${1:-}" in
	debug) debug KREL_DEBUG; return 0 ;;
	*) echo "kernels.sh: unknown KVER '${1:-}' (6.1, 6.12, 5.10, 7.2, debug or arm64-16k)" >&2
	   return 2 ;;
	esac
}

case "${1:-}" in
kdir)
	d=/lib/modules/$(uname -r)/build
	if [ -d "$d" ]; then echo "$d"; exit 0; fi
	"$0" builddir "${2:-}"
	;;
arch)
	case "${2:-}" in arm64*) echo arm64 ;; *) echo x86_64 ;; esac
	;;
makeflags)
	if t=$(cached "${2:-}"); then "$KH" makeflags "$t" 2>/dev/null; fi
	;;
builddir)
	if t=$(cached "${2:-}"); then
		# Only with the image: a module for a kernel the guests cannot boot
		# is the matrix's business.
		[ -n "$("$KH" release "$t" 2>/dev/null)" ] && "$KH" kdir "$t" 2>/dev/null
		exit 0
	fi
	if [ "${2:-}" = debug ]; then
		d=$(debug KDIR_DEBUG)
		if [ -n "$d" ] && [ -d "$d" ]; then echo "$d"; fi
		exit 0
	fi
	release "${2:-}" >/dev/null || exit 2
	;;
release)
	release "${2:-}" || exit 2
	;;
modroot)
	if t=$(cached "${2:-}"); then "$KH" modroot "$t" 2>/dev/null; exit 0; fi
	[ "${2:-}" = debug ] || exit 0
	d=$(debug MODROOT_DEBUG)
	if [ -n "$d" ] && [ -d "$d" ]; then echo "$d"; fi
	;;
vmlinuz)
	if t=$(cached "${2:-}"); then "$KH" vmlinuz "$t" 2>/dev/null; exit 0; fi
	if [ "${2:-}" = debug ]; then
		v=$(debug VMLINUZ_DEBUG)
		if [ -n "$v" ] && [ -e "$v" ]; then echo "$v"; fi
		exit 0
	fi
	release "${2:-}" >/dev/null || exit 2
	;;
*)
	echo "usage: kernels.sh kdir|builddir|release|vmlinuz|modroot|makeflags|arch KVER" >&2
	exit 2
	;;
esac
exit 0
