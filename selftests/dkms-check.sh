#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# DKMS packaging check (TAP): add, build and install engram-rdma through
# dkms for a test kernel (6.1 by default) from a staged copy of the tree
# (Kbuild, kmod, uapi, dkms.conf, LICENSE), check the installed module, then
# remove it.  The test kernels live in the cache, not in the machine
# (kheaders.sh), so dkms works on trees of its own under a scratch
# directory: --dkmstree, --sourcetree and --installtree there,
# --kernelsourcedir the cached headers, and depmod -b over the scratch
# lib/modules (dkms's own depmod would look in the machine's /lib/modules).
# Nothing of the machine's dkms state, /usr/src or /lib/modules is touched;
# the check fails if any of it changes.
#
# With --tarball DIR, the built module and its sources also go to
# DIR/NAME-VERSION.dkms.tar.gz as dkms mktarball makes it: the packages' guest (t_85_packages) puts it
# where engram-rdma-dkms's postinst loads a prebuilt module from
# (/usr/share/engram-rdma-dkms/NAME-VERSION.dkms.tar.gz), so that its first
# install builds nothing under TCG.  With --next-tree SRC as well (the next
# version's tree, which deb-check.sh makes in build/deb/next), that version
# is added, built and made a tarball beside the first, in the same dkms
# trees, then removed: the upgrade of t_85_packages loads it in turn.
# Without it the upgrade builds the module in the guest (make
# check-packages): minutes of TCG that the native build here spares.
#
# Usage: dkms-check.sh [KVER] [--tarball DIR [--next-tree SRC]]   (default 6.1)
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
KVER=6.1 TARBALL="" NEXT_TREE=""
while [ $# -gt 0 ]; do
	case "$1" in
	--tarball) TARBALL=${2:?--tarball DIR}; shift 2 ;;
	--next-tree) NEXT_TREE=${2:?--next-tree SRC}; shift 2 ;;
	-*) echo "dkms-check.sh: unknown option '$1'" >&2; exit 2 ;;
	*) KVER=$1; shift ;;
	esac
done
if [ -n "$NEXT_TREE" ] && [ -z "$TARBALL" ]; then
	echo "dkms-check.sh: --next-tree needs --tarball" >&2
	exit 2
fi
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; }
diag() { sed 's/^/# /'; }

# conf KEY FILE: KEY's value in the dkms.conf FILE, quoted or not.
conf() { sed -n "s/^$1=\"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" "$2" 2>/dev/null; }
name=$(conf PACKAGE_NAME "$root/dkms.conf")
ver=$(conf PACKAGE_VERSION "$root/dkms.conf")
rel=$("$root/selftests/vm/kernels.sh" release "$KVER")

if [ "$name" = engram-rdma ] && [ -n "$ver" ]; then
	ok "dkms.conf names $name $ver"
else
	notok "dkms.conf names engram-rdma and a version (got '$name' '$ver')"
	exit 1
fi
kdir=$("$root/selftests/vm/kernels.sh" builddir "$KVER")
modroot=$("$root/selftests/vm/kernels.sh" modroot "$KVER")
if ! command -v dkms >/dev/null || [ -z "$rel" ] || [ -z "$kdir" ] || [ -z "$modroot" ]; then
	notok "dkms and the $KVER kernel (headers and modules) are there (run 'make deps')"
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "ok 2 - dkms install/remove # SKIP needs root"
	exit 0
fi

# What of the machine the check must leave alone.
machine_state() {
	ls -lA --time-style=+%s /var/lib/dkms /usr/src /lib/modules 2>&1
	dkms status 2>&1
}
before=$(machine_state)

# dkms signs modules with /var/lib/dkms/mok.key, creating the pair when
# there is none: remove it afterwards if this check created it.
mok_existed=0
[ -e /var/lib/dkms/mok.key ] || [ -e /var/lib/dkms/mok.pub ] && mok_existed=1
dkms_existed=0
[ -d /var/lib/dkms ] && dkms_existed=1
stage=$(mktemp -d /tmp/engram-dkms.XXXXXX)
drop_mok() {
	[ $mok_existed -eq 1 ] || rm -f /var/lib/dkms/mok.key /var/lib/dkms/mok.pub
	[ $dkms_existed -eq 1 ] || rmdir /var/lib/dkms 2>/dev/null
}
cleanup() {
	drop_mok
	rm -rf "$stage"
}
trap cleanup EXIT

# The scratch system: lib/modules/<rel> of the cached kernel (its modules by
# a symlink, its module lists copied for depmod), and dkms's own trees.
sysroot=$stage/root
imods=$sysroot/lib/modules
mkdir -p "$imods/$rel" "$stage/src" "$stage/dkms"
ln -s "$modroot/kernel" "$imods/$rel/kernel"
for f in modules.order modules.builtin modules.builtin.modinfo; do
	[ -e "$modroot/$f" ] && cp "$modroot/$f" "$imods/$rel/"
done
D=(dkms --dkmstree "$stage/dkms" --sourcetree "$stage/src" --installtree "$imods")
K=(-k "$rel" --kernelsourcedir "$kdir")

# stage_tree FROM TO: the sources of tree FROM as debian/rules ships them.
stage_tree() {
	local p

	mkdir -p "$2"
	for p in Kbuild kmod uapi dkms.conf LICENSE; do
		if [ -e "$1/$p" ]; then
			cp -a "$1/$p" "$2/"
		else
			notok "tree $1 has $p"
		fi
	done
	# No in-tree build products, and no compat_probed.h, which is the
	# probes' answer for the kernel the tree was built for.  A file here
	# the package lacks would also be left behind in /usr/src by dpkg -r
	# once the tarball was loaded (t_85_packages).
	find "$2" \( -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' \
		-o -name '.*.cmd' -o -name 'modules.order' -o -name 'Module.symvers' \
		-o -name compat_probed.h -o -name '*.d' \) -delete
}
tree=$stage/$name-$ver
stage_tree "$root" "$tree"

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
		for f in "$stage/dkms/$name"/*/build/make.log; do
			[ -f "$f" ] && tail -n 25 "$f" | diag
		done
	fi
	return $rc
}

step "dkms add $name/$ver" "${D[@]}" add "$tree" || exit 1
step "dkms build -k $rel" "${D[@]}" build "$name/$ver" "${K[@]}" || exit 1
step "dkms install -k $rel" "${D[@]}" install "$name/$ver" "${K[@]}" --no-depmod || exit 1
step "depmod -b over the scratch lib/modules" depmod -b "$sysroot" "$rel" || exit 1

# A kernel outside BUILD_EXCLUSIVE_KERNEL is refused up front, saying why,
# and leaves what is installed alone.
for k in 4.19.0-27-amd64 8.0.0-1-amd64; do
	out=$(timeout 120 "${D[@]}" build "$name/$ver" -k "$k" --kernelsourcedir "$kdir" 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && grep -q 'BUILD_EXCLUSIVE' <<<"$out"; then
		ok "dkms build -k $k refused: BUILD_EXCLUSIVE_KERNEL (exit $rc)"
	else
		notok "dkms build -k $k refused: BUILD_EXCLUSIVE_KERNEL (exit $rc)"
		tail -n 5 <<<"$out" | diag
	fi
done

ko=$(ls "$imods/$rel"/updates/dkms/engram_rdma.ko* 2>/dev/null | head -n1)
if [ -n "$ko" ]; then
	ok "module installed under lib/modules/$rel/updates/dkms ($(basename "$ko"))"
else
	notok "module installed under lib/modules/$rel/updates/dkms"
	ls -lR "$imods/$rel/updates" 2>&1 | diag
fi
fn=$(modinfo -b "$sysroot" -k "$rel" -F filename engram_rdma 2>/dev/null)
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
# What it needs (ib_core, rdma_cm) resolves among the kernel's own modules.
deps=$(modinfo -F depends "$ko" 2>/dev/null)
miss=""
for m in ${deps//,/ }; do
	modinfo -b "$sysroot" -k "$rel" -F filename "$m" >/dev/null 2>&1 || miss="$miss $m"
done
if [ -n "$deps" ] && [ -z "$miss" ]; then
	ok "its dependencies ($deps) are modules of $rel"
else
	notok "its dependencies ($deps) are modules of $rel (missing:$miss)"
fi
if "${D[@]}" status "$name/$ver" -k "$rel" 2>/dev/null | grep -q installed; then
	ok "dkms status reports installed"
else
	notok "dkms status reports installed"
fi

if [ -n "$TARBALL" ]; then
	mkdir -p "$TARBALL" && TARBALL=$(cd "$TARBALL" && pwd) && rm -f "$TARBALL"/*.dkms.tar.gz
	step "dkms mktarball: the module built for $rel and its sources, in $TARBALL" \
		"${D[@]}" mktarball "$name/$ver" "${K[@]}" --archive="$TARBALL/$name-$ver.dkms.tar.gz"
	# Its sources are the tree's, no more: what is not git's (ignored,
	# built) is not the package's either.
	if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
		want=$(git -C "$root" ls-files --cached --others --exclude-standard \
			Kbuild kmod uapi dkms.conf LICENSE | sort)
		got=$(tar tzf "$TARBALL/$name-$ver.dkms.tar.gz" 2>/dev/null |
			sed -n 's#^\./dkms_source_tree/##p' | grep -v -e '/$' -e '^$' | sort)
		if [ -n "$want" ] && [ "$want" = "$got" ]; then
			ok "the tarball's sources are the tree's files, none built ($(wc -l <<<"$got"))"
		else
			notok "the tarball's sources are the tree's files, none built"
			diff <(echo "$want") <(echo "$got") | head -n 20 | diag
		fi
	fi
	if [ -n "$NEXT_TREE" ]; then
		nver=$(conf PACKAGE_VERSION "$NEXT_TREE/dkms.conf")
		if [ -n "$nver" ] && [ "$nver" != "$ver" ]; then
			stage_tree "$NEXT_TREE" "$stage/$name-$nver"
			step "next version: dkms add $name/$nver beside $ver" \
				"${D[@]}" add "$stage/$name-$nver" &&
			step "next version: dkms build -k $rel" \
				"${D[@]}" build "$name/$nver" "${K[@]}" &&
			step "next version: dkms mktarball, in $TARBALL" \
				"${D[@]}" mktarball "$name/$nver" "${K[@]}" \
				--archive="$TARBALL/$name-$nver.dkms.tar.gz"
			step "next version: dkms remove $name/$nver --all" \
				"${D[@]}" remove "$name/$nver" --all --no-depmod
		else
			notok "next version: $NEXT_TREE/dkms.conf names a version other than $ver (got '$nver')"
		fi
	fi
fi
step "dkms remove $name/$ver --all" "${D[@]}" remove "$name/$ver" --all --no-depmod
if [ -z "$(ls "$imods/$rel"/updates/dkms/engram_rdma.ko* 2>/dev/null)" ] &&
   [ -z "$("${D[@]}" status "$name" 2>/dev/null)" ]; then
	ok "dkms remove took the module and its dkms entry away"
else
	notok "dkms remove took the module and its dkms entry away"
fi
drop_mok
after=$(machine_state)
if [ "$before" = "$after" ]; then
	ok "the machine's /var/lib/dkms, /usr/src, /lib/modules and dkms status unchanged"
else
	notok "the machine's /var/lib/dkms, /usr/src, /lib/modules and dkms status unchanged"
	diff <(echo "$before") <(echo "$after") | head -n 20 | diag
fi
exit $failed
