#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# DKMS packaging check (TAP): add, build and install engram-rdma through
# dkms for the 6.1 test kernel from a staged copy of the tree (Kbuild, kmod,
# uapi, dkms.conf, LICENSE), check the installed module, then remove it and
# everything the check created.  The machine is left as found: a left-over
# DKMS copy under /lib/modules/<rel>/updates would shadow the tree's build
# inside the test guests.  Refuses to run when engram-rdma is already known
# to dkms.
#
# Usage: dkms-check.sh [KVER]   (default 6.1)
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
KVER=${1:-6.1}
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; }
diag() { sed 's/^/# /'; }

name=$(sed -n 's/^PACKAGE_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/dkms.conf")
ver=$(sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/dkms.conf")
rel=$("$root/selftests/vm/kernels.sh" release "$KVER")

if [ "$name" = engram-rdma ] && [ -n "$ver" ]; then
	ok "dkms.conf names $name $ver"
else
	notok "dkms.conf names engram-rdma and a version (got '$name' '$ver')"
	exit 1
fi
if ! command -v dkms >/dev/null || [ -z "$rel" ] || [ ! -d "/lib/modules/$rel/build" ]; then
	notok "dkms and the $KVER kernel headers are installed (run 'make deps')"
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "ok 2 - dkms install/remove # SKIP needs root"
	exit 0
fi

# --- preconditions: nothing of ours there yet ---------------------------------
src=/usr/src/$name-$ver
if [ -n "$(dkms status "$name" 2>/dev/null)" ] || [ -e "$src" ] || [ -e "/var/lib/dkms/$name" ]; then
	notok "no engram-rdma known to dkms before the check (found: $(dkms status "$name" 2>/dev/null | head -n1) $([ -e "$src" ] && echo "$src")); not touching it"
	exit 1
fi
ok "no engram-rdma known to dkms before the check"

# dkms signs modules and creates a MOK key pair when none exists: remove it
# afterwards if this check created it.
mok_existed=0
[ -e /var/lib/dkms/mok.key ] || [ -e /var/lib/dkms/mok.pub ] && mok_existed=1
stage=$(mktemp -d /tmp/engram-dkms.XXXXXX)
cleanup() {
	timeout 120 dkms remove "$name/$ver" --all >/dev/null 2>&1
	rm -rf "$src" "/var/lib/dkms/$name" "$stage"
	if [ $mok_existed -eq 0 ]; then
		rm -f /var/lib/dkms/mok.key /var/lib/dkms/mok.pub
	fi
	rm -f "/lib/modules/$rel/updates/dkms/engram_rdma.ko"*
	rmdir "/lib/modules/$rel/updates/dkms" "/lib/modules/$rel/updates" 2>/dev/null
	depmod "$rel" 2>/dev/null
}
trap cleanup EXIT

tree=$stage/$name-$ver
mkdir -p "$tree"
for p in Kbuild kmod uapi dkms.conf LICENSE; do
	if [ -e "$root/$p" ]; then
		cp -a "$root/$p" "$tree/"
	else
		notok "tree has $p"
	fi
done
# Only sources: no in-tree build products.
find "$tree" \( -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' \
	-o -name '.*.cmd' -o -name 'modules.order' -o -name 'Module.symvers' \) -delete

step() {
	# step DESCRIPTION CMD...
	local d=$1 out rc
	shift
	out=$(timeout 900 "$@" 2>&1)
	rc=$?
	if [ $rc -eq 0 ]; then
		ok "$d"
	else
		notok "$d (exit $rc)"
		tail -n 25 <<<"$out" | diag
		for f in /var/lib/dkms/"$name"/"$ver"/build/make.log; do
			[ -f "$f" ] && tail -n 25 "$f" | diag
		done
	fi
	return $rc
}

step "dkms add $name/$ver" dkms add "$tree" || exit 1
step "dkms build -k $rel" dkms build "$name/$ver" -k "$rel" || exit 1
step "dkms install -k $rel" dkms install "$name/$ver" -k "$rel" || exit 1

# A kernel outside BUILD_EXCLUSIVE_KERNEL is refused up front, saying why,
# and leaves what is installed alone.
for k in 4.19.0-27-amd64 8.0.0-1-amd64; do
	out=$(timeout 120 dkms build "$name/$ver" -k "$k" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && grep -q 'BUILD_EXCLUSIVE' <<<"$out"; then
		ok "dkms build -k $k refused: BUILD_EXCLUSIVE_KERNEL (exit $rc)"
	else
		notok "dkms build -k $k refused: BUILD_EXCLUSIVE_KERNEL (exit $rc)"
		tail -n 5 <<<"$out" | diag
	fi
done

ko=$(ls /lib/modules/"$rel"/updates/dkms/engram_rdma.ko* 2>/dev/null | head -n1)
if [ -n "$ko" ]; then
	ok "module installed under /lib/modules/$rel/updates/dkms ($(basename "$ko"))"
else
	notok "module installed under /lib/modules/$rel/updates/dkms"
	ls -lR "/lib/modules/$rel/updates" 2>&1 | diag
fi
fn=$(modinfo -k "$rel" -F filename engram_rdma 2>/dev/null)
if [ -n "$ko" ] && [ "$fn" = "$ko" ]; then
	ok "modinfo -k $rel resolves engram_rdma to the dkms copy"
else
	notok "modinfo -k $rel resolves engram_rdma to the dkms copy (got '$fn')"
fi
if [ -n "$ko" ] && [ "$(modinfo -F vermagic "$ko" | cut -d' ' -f1)" = "$rel" ]; then
	ok "installed module's vermagic is $rel"
else
	notok "installed module's vermagic is $rel (got '$(modinfo -F vermagic "$ko" 2>/dev/null)')"
fi
if dkms status "$name/$ver" -k "$rel" 2>/dev/null | grep -q installed; then
	ok "dkms status reports installed"
else
	notok "dkms status reports installed"
fi

step "dkms remove $name/$ver --all" dkms remove "$name/$ver" --all
rm -rf "$src"
if [ -z "$(ls /lib/modules/"$rel"/updates/dkms/engram_rdma.ko* 2>/dev/null)" ] &&
   [ -z "$(dkms status "$name" 2>/dev/null)" ] && [ ! -e "$src" ]; then
	ok "nothing of engram-rdma left in dkms, /usr/src or /lib/modules/$rel/updates"
else
	notok "nothing of engram-rdma left in dkms, /usr/src or /lib/modules/$rel/updates"
fi
if [ -z "$(modinfo -k "$rel" -F filename engram_rdma 2>/dev/null)" ]; then
	ok "modinfo -k $rel no longer finds engram_rdma"
else
	notok "modinfo -k $rel no longer finds engram_rdma"
fi
exit $failed
