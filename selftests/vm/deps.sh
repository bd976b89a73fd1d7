#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything engram-rdma's build and tests need, from Debian's
# registry only.  Idempotent; when everything is already present it returns
# in well under a second without touching the network.
#
# All apt operations go through a private sources list under $CACHE/apt
# (bookworm, -updates, -security, -backports), so the machine's own apt
# configuration is neither used (it may name other registries) nor changed.
# Downloaded .debs stay in $CACHE/apt/archives, outside the work tree.
#
# Results:
#   $CACHE/kernels.env          KREL_6_1=... KREL_6_12=...  (test kernels)
#   $CACHE/checkpatch/          checkpatch.pl, spelling.txt,
#                               const_structs.checkpatch (from linux-source-6.1)
#
# Usage: deps.sh [--refresh]   (--refresh: re-resolve kernels and update lists)
#        deps.sh --download PKG  (only fetch PKG's .deb into $CACHE/apt/archives,
#                                 e.g. linux-source-6.12 for debug-kernel.sh)
set -euo pipefail

CACHE=${CACHE:-/var/cache/engram-rdma}
APTDIR=$CACHE/apt
KENV=$CACHE/kernels.env
CPDIR=$CACHE/checkpatch
REFRESH=0
DOWNLOAD=""
[ "${1:-}" = "--refresh" ] && REFRESH=1
[ "${1:-}" = "--download" ] && DOWNLOAD=${2:?usage: deps.sh --download PKG}

BASE_PKGS=(
	build-essential pkg-config libnl-3-dev libnl-genl-3-dev libjansson-dev libssl-dev
	rdma-core ibverbs-utils rdmacm-utils perftest python3-pyverbs libibverbs-dev librdmacm-dev
	qemu-system-x86 qemu-system-arm busybox-static kmod cpio xz-utils rsync dkms sparse
	linux-source-6.1 clang gnuplot-nox python3 python3-numpy python3-setuptools python3-torch
	python3-prometheus-client bash-completion
	e2fsprogs iproute2 util-linux coreutils dmsetup
	flex bison bc libelf-dev lcov
	gcc-aarch64-linux-gnu libc6-dev-arm64-cross pahole
)

log() { echo "deps: $*" >&2; }

missing() {
	# Print the named packages that are not installed (never re-install or
	# upgrade what is already there).
	local p
	for p in "$@"; do
		dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || echo "$p"
	done
}

installed() {
	# True when every named package is installed (status "install ok installed").
	local out
	out=$(dpkg-query -W -f='${db:Status-Abbrev}\n' "$@" 2>/dev/null) || return 1
	[ "$(grep -c '^ii' <<<"$out")" -eq "$#" ]
}

checkpatch_ok() {
	[ -x "$CPDIR/checkpatch.pl" ] && [ -s "$CPDIR/spelling.txt" ] &&
		[ -s "$CPDIR/const_structs.checkpatch" ]
}

kernel_pkgs() {
	# $1 = release
	echo "linux-image-$1 linux-headers-$1"
}

# ---- fast path: nothing to do ---------------------------------------------
if [ $REFRESH -eq 0 ] && [ -z "$DOWNLOAD" ] && [ -s "$KENV" ]; then
	# shellcheck disable=SC1090
	. "$KENV"
	if [ -n "${KREL_6_1:-}" ] && [ -n "${KREL_6_12:-}" ] &&
	   installed "${BASE_PKGS[@]}" $(kernel_pkgs "$KREL_6_1") $(kernel_pkgs "$KREL_6_12") &&
	   [ -e "/boot/vmlinuz-$KREL_6_1" ] && [ -e "/boot/vmlinuz-$KREL_6_12" ] &&
	   [ -d "/lib/modules/$KREL_6_1/build" ] && [ -d "/lib/modules/$KREL_6_12/build" ] &&
	   checkpatch_ok; then
		log "everything present (6.1=$KREL_6_1, 6.12=$KREL_6_12)"
		exit 0
	fi
fi

[ "$(id -u)" -eq 0 ] || { log "must run as root to install packages"; exit 1; }

# ---- private apt configuration ----------------------------------------------
mkdir -p "$APTDIR/lists/partial" "$APTDIR/archives/partial"
if [ ! -s "$APTDIR/sources.list" ]; then
	kr=/usr/share/keyrings/debian-archive-keyring.gpg
	cat > "$APTDIR/sources.list" <<EOS
deb [signed-by=$kr] http://deb.debian.org/debian bookworm main
deb [signed-by=$kr] http://deb.debian.org/debian bookworm-updates main
deb [signed-by=$kr] http://deb.debian.org/debian-security bookworm-security main
deb [signed-by=$kr] http://deb.debian.org/debian bookworm-backports main
EOS
fi
APT_OPTS=(
	-o "Dir::Etc::sourcelist=$APTDIR/sources.list"
	-o "Dir::Etc::sourceparts=-"
	-o "Dir::State::Lists=$APTDIR/lists"
	-o "Dir::Cache::archives=$APTDIR/archives"
	-o "APT::Keep-Downloaded-Packages=true"
	-o "Binary::apt-get::APT::Keep-Downloaded-Packages=true"
	-o "Acquire::Retries=3"
	-o "Acquire::http::Timeout=60"
	-o "Dpkg::Use-Pty=0"
)
export DEBIAN_FRONTEND=noninteractive
# No initrd for kernel images: initramfs-tools' postinst hook is slow and the
# test VMs boot with their own tiny initramfs.
export INITRD=No

apt_get() { timeout 1800 apt-get -q -y "${APT_OPTS[@]}" "$@" </dev/null; }
apt_cache() { apt-cache "${APT_OPTS[@]}" "$@"; }

lists_fresh() {
	# Lists present and younger than a day.
	local f
	f=$(find "$APTDIR/lists" -maxdepth 1 -name '*bookworm-backports*InRelease' -mmin -1440 2>/dev/null | head -n1)
	[ -n "$f" ] && [ -n "$(find "$APTDIR/lists" -maxdepth 1 -name '*_dists_bookworm_InRelease' 2>/dev/null)" ]
}

if [ $REFRESH -eq 1 ] || ! lists_fresh; then
	log "apt-get update (private sources list $APTDIR/sources.list)"
	apt_get update
fi
if [ -n "$DOWNLOAD" ]; then
	log "downloading $DOWNLOAD into $APTDIR/archives"
	(cd "$APTDIR/archives" && apt_get download "$DOWNLOAD")
	exit 0
fi

# ---- kernel releases, resolved from the meta packages -------------------------
resolve_krel() {
	# $@ = extra apt-cache options; prints the release the meta package
	# linux-image-amd64 points at (e.g. 6.1.0-57-amd64).
	apt_cache "$@" depends linux-image-amd64 2>/dev/null |
		sed -n 's/^ *Depends: linux-image-\([0-9][^ ]*-amd64\)$/\1/p' | head -n1
}
KREL_6_1=$(resolve_krel)
KREL_6_12=$(resolve_krel -t bookworm-backports)
case "$KREL_6_1" in 6.1.*) ;; *) log "cannot resolve the 6.1 release (got '$KREL_6_1')"; exit 1;; esac
case "$KREL_6_12" in 6.12.*) ;; *) log "cannot resolve the 6.12 release (got '$KREL_6_12')"; exit 1;; esac
# The headers meta package must agree with the image.
for t in "" "-t bookworm-backports"; do
	# shellcheck disable=SC2086
	h=$(apt_cache $t depends linux-headers-amd64 2>/dev/null |
		sed -n 's/^ *Depends: linux-headers-\([0-9][^ ]*-amd64\)$/\1/p' | head -n1)
	case "$h" in "$KREL_6_1"|"$KREL_6_12") ;;
	*) log "linux-headers-amd64 ($t) points at '$h', not the image's release"; exit 1;; esac
done
log "test kernels: 6.1=$KREL_6_1 6.12=$KREL_6_12"

# ---- packages -----------------------------------------------------------------
want=($(missing "${BASE_PKGS[@]}" $(kernel_pkgs "$KREL_6_1")))
if [ ${#want[@]} -gt 0 ]; then
	log "installing: ${want[*]}"
	apt_get install --no-install-recommends "${want[@]}"
fi
want=($(missing $(kernel_pkgs "$KREL_6_12")))
if [ ${#want[@]} -gt 0 ]; then
	log "installing from bookworm-backports: ${want[*]}"
	apt_get -t bookworm-backports install --no-install-recommends "${want[@]}"
fi
for r in "$KREL_6_1" "$KREL_6_12"; do
	[ -e "/boot/vmlinuz-$r" ] || { log "/boot/vmlinuz-$r missing after install"; exit 1; }
	[ -d "/lib/modules/$r/build" ] || { log "/lib/modules/$r/build missing after install"; exit 1; }
done

# ---- checkpatch -------------------------------------------------------------------
if ! checkpatch_ok; then
	log "extracting checkpatch.pl from /usr/src/linux-source-6.1.tar.xz"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$tmp" --wildcards --no-anchored \
		'scripts/checkpatch.pl' 'scripts/spelling.txt' 'scripts/const_structs.checkpatch'
	mkdir -p "$CPDIR"
	for f in checkpatch.pl spelling.txt const_structs.checkpatch; do
		src=$(find "$tmp" -path "*/scripts/$f" | head -n1)
		[ -n "$src" ] || { log "scripts/$f not found in linux-source-6.1"; exit 1; }
		install -m 0644 "$src" "$CPDIR/$f"
	done
	chmod 0755 "$CPDIR/checkpatch.pl"
fi

# ---- record ---------------------------------------------------------------------
tmpenv=$(mktemp "$CACHE/.kernels.env.XXXXXX")
printf 'KREL_6_1=%s\nKREL_6_12=%s\n' "$KREL_6_1" "$KREL_6_12" > "$tmpenv"
chmod 0644 "$tmpenv"
mv -f "$tmpenv" "$KENV"
log "done (kernels recorded in $KENV)"
