#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Install everything engram-rdma's build and tests need, from Debian's
# registry only.  Idempotent; when everything is already present it returns
# in about a second without touching the network.
#
# All apt operations go through a private sources list under $CACHE/apt
# (bookworm, -updates, -security, -backports), so the machine's own apt
# configuration is neither used (it may name other registries) nor changed.
# Downloaded .debs stay in $CACHE/apt/archives, outside the work tree.
#
# What the machine gets is build tools from bookworm itself (BASE_PKGS and
# what they depend on): never a kernel, kernel headers, or a newer
# linux-libc-dev or linux-perf than bookworm's.  The guests' kernels
# (bookworm's 6.1, bookworm-backports' 6.12: image, modules, headers) are
# unpacked into $CACHE/kheaders by kheaders.sh --only, and checkpatch comes
# out of the linux-source-6.1 package without installing it: the machine's
# /boot, /lib/modules and /usr/src are left as they were, but for an empty
# /lib/modules on a machine that had none (selftests/deps-check.sh proves
# it in make check).
#
# Results:
#   $CACHE/kheaders/x86-6.1{,-image}, x86-6.12{,-image}   (kernels.sh)
#   $CACHE/checkpatch/          checkpatch.pl, spelling.txt,
#                               const_structs.checkpatch (from linux-source-6.1)
#
# Usage: deps.sh [--refresh]   (--refresh: re-resolve kernels and update lists)
#        deps.sh --download PKG  (only fetch PKG's .deb into $CACHE/apt/archives,
#                                 e.g. linux-source-6.12 for debug-kernel.sh)
#        deps.sh --deb PKG       (print the newest cached .deb of PKG,
#                                 fetching it first if there is none)
set -euo pipefail

CACHE=${CACHE:-/var/cache/engram-rdma}
APTDIR=$CACHE/apt
CPDIR=$CACHE/checkpatch
REFRESH=0
DOWNLOAD=""
[ "${1:-}" = "--refresh" ] && REFRESH=1
[ "${1:-}" = "--download" ] && DOWNLOAD=${2:?usage: deps.sh --download PKG}
if [ "${1:-}" = "--deb" ]; then
	pkg=${2:?usage: deps.sh --deb PKG}
	newest() {
		find "$APTDIR/archives" -maxdepth 1 -name "${pkg}_*.deb" 2>/dev/null | sort -V | tail -n1
	}
	deb=$(newest)
	[ -n "$deb" ] || { "$0" --download "$pkg" >&2; deb=$(newest); }
	[ -n "$deb" ] || { echo "deps: $pkg could not be downloaded" >&2; exit 1; }
	echo "$deb"
	exit 0
fi

BASE_PKGS=(
	build-essential pkg-config libnl-3-dev libnl-genl-3-dev libjansson-dev libssl-dev
	libsystemd-dev systemd
	rdma-core ibverbs-utils rdmacm-utils perftest python3-pyverbs libibverbs-dev librdmacm-dev
	qemu-system-x86 qemu-system-arm busybox-static kmod cpio xz-utils rsync dkms sparse
	clang gnuplot-nox python3 python3-numpy python3-setuptools python3-torch
	python3-prometheus-client python3-yaml python3-jsonschema bash-completion man-db
	debhelper dh-dkms dh-python lintian
	e2fsprogs iproute2 util-linux coreutils dmsetup
	flex bison bc libelf-dev lcov
	gcc-aarch64-linux-gnu libc6-dev-arm64-cross pahole
)

log() { echo "deps: $*" >&2; }

# node_exporter for the guests (t_90_stats scrapes the module's metrics
# through it): bookworm's prometheus-node-exporter unpacked into the cache,
# never installed here, where its package would start a daemon.
NE_DIR=$CACHE/node-exporter
ne_ok() { [ -x "$NE_DIR/usr/bin/prometheus-node-exporter" ]; }

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

# The guests' kernels, in the cache.
GUEST_TREES=x86-6.1,x86-6.12
KH=$(dirname "$0")/kheaders.sh

# The guests see the machine's root read-only and show their kernel's
# modules (from the cache) on its /lib/modules, which must therefore exist.
# A machine without any kernel package (a container) has no such directory:
# it gets an empty one, and nothing is ever put in it.
if [ ! -d /lib/modules ]; then
	[ "$(id -u)" -eq 0 ] || { log "no /lib/modules: run as root once to create it"; exit 1; }
	mkdir -p /lib/modules
	log "created the empty /lib/modules the guests mount their kernel's modules on"
fi

# ---- fast path: nothing to do ---------------------------------------------
if [ $REFRESH -eq 0 ] && [ -z "$DOWNLOAD" ] && installed "${BASE_PKGS[@]}" && checkpatch_ok && ne_ok &&
   [ -n "$("$KH" release x86-6.1)" ] && [ -n "$("$KH" release x86-6.12)" ] &&
   [ -n "$("$KH" kdir x86-6.1)" ] && [ -n "$("$KH" kdir x86-6.12)" ]; then
	log "everything present (6.1=$("$KH" release x86-6.1), 6.12=$("$KH" release x86-6.12))"
	exit 0
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

# ---- packages -----------------------------------------------------------------
# From bookworm only: -t bookworm-backports would also upgrade what the
# packages depend on (linux-libc-dev) past the machine's own.
want=($(missing "${BASE_PKGS[@]}"))
if [ ${#want[@]} -gt 0 ]; then
	log "installing: ${want[*]}"
	apt_get install --no-install-recommends "${want[@]}"
fi

# ---- the guests' kernels, unpacked into the cache --------------------------------
"$KH" $([ $REFRESH -eq 1 ] && echo --refresh) --only "$GUEST_TREES" >&2 ||
	{ log "the guests' kernels could not be unpacked (kheaders.sh --only $GUEST_TREES)"; exit 1; }
for t in x86-6.1 x86-6.12; do
	[ -n "$("$KH" release "$t")" ] || { log "$t: no kernel image in the cache"; exit 1; }
done

# ---- checkpatch -------------------------------------------------------------------
# From linux-source-6.1's .deb (its tarball inside), without installing it.
if ! checkpatch_ok; then
	(cd "$APTDIR/archives" && apt_get download linux-source-6.1)
	deb=$(ls -t "$APTDIR"/archives/linux-source-6.1_*.deb 2>/dev/null | head -n1)
	[ -n "$deb" ] || { log "linux-source-6.1 did not download"; exit 1; }
	log "extracting checkpatch.pl from $(basename "$deb")"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards './usr/src/linux-source-6.1.tar.*'
	tar -xf "$tmp"/usr/src/linux-source-6.1.tar.* -C "$tmp" --wildcards --no-anchored \
		'scripts/checkpatch.pl' 'scripts/spelling.txt' 'scripts/const_structs.checkpatch'
	mkdir -p "$CPDIR"
	for f in checkpatch.pl spelling.txt const_structs.checkpatch; do
		src=$(find "$tmp" -path "*/scripts/$f" | head -n1)
		[ -n "$src" ] || { log "scripts/$f not found in linux-source-6.1"; exit 1; }
		install -m 0644 "$src" "$CPDIR/$f"
	done
	chmod 0755 "$CPDIR/checkpatch.pl"
fi
# ---- node_exporter, for the guests ----------------------------------------------
if ! ne_ok; then
	(cd "$APTDIR/archives" && apt_get download prometheus-node-exporter)
	deb=$(ls -t "$APTDIR"/archives/prometheus-node-exporter_*.deb 2>/dev/null | head -n1)
	[ -n "$deb" ] || { log "prometheus-node-exporter did not download"; exit 1; }
	rm -rf "$NE_DIR.new"
	dpkg-deb -x "$deb" "$NE_DIR.new"
	rm -rf "$NE_DIR"
	mv "$NE_DIR.new" "$NE_DIR"
	log "unpacked $(basename "$deb") into $NE_DIR"
fi
# Left by deps.sh before the kernels moved into the cache; nothing reads it.
rm -f "$CACHE/kernels.env"
log "done"
