#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Kernel header trees for a build matrix (compile-only: nothing here boots).
#
# Downloads Debian's linux-headers / linux-kbuild packages for each tree
# below and unpacks them with dpkg-deb -x under $CACHE/kheaders/<name>/, so
# that $CACHE/kheaders/<name>/usr/src/linux-headers-<release> works as KDIR
# for `make -C KDIR M=... modules`.  Nothing is installed into the machine:
# packages are only downloaded (apt-get download) through a private apt
# configuration under $CACHE/apt-matrix (its own sources.list, lists,
# package cache and archives; the machine's apt sources are never used).
#
#   name            arch   suite(s)                        headers
#   x86-6.1         amd64  bookworm, bookworm-security     6.1.0-N-amd64
#   x86-6.12        amd64  bookworm-backports              6.12.*-amd64
#   x86-5.10        amd64  bullseye, bullseye-security     5.10.0-N-amd64
#   x86-5.10-oldest amd64  bullseye (main only)            the OLDEST 5.10.0-N
#   x86-6.1-oldest  amd64  bookworm (main only)            the OLDEST 6.1.0-N
#   x86-6.12-trixie amd64  trixie, trixie-security         6.12.*-amd64
#   x86-6.12-rt     amd64  bookworm-backports              6.12.*-rt-amd64
#   x86-7.2         amd64  sid                             7.2.*-amd64
#   x86-7.3-rc      amd64  experimental                    7.3*-amd64
#   arm64-6.12      arm64  bookworm-backports              6.12.*-arm64
#   arm64-6.12-16k  arm64  bookworm-backports              6.12.*-arm64-16k
#
# The newest matching version in the suite(s) is taken, or for an "oldest"
# tree the oldest: a point release's main archive keeps the kernel ABI it
# shipped with beside the later one (bullseye main has 5.10.0-30 and -32),
# and a stable backport an older ABI lacks is what breaks users' DKMS
# builds (ITER_SOURCE, for one, which 5.10.0-32 does not have).  Fix-ups made after
# unpacking, so the tree works from the cache:
#   - absolute symlinks (lib/modules/<rel>/build -> /usr/src/...) are made
#     relative, pointing into the tree;
#   - the flavour Makefile's `include /usr/src/linux-headers-*-common/Makefile`
#     is pointed at the common tree in the cache;
#   - linux-kbuild always comes from amd64, also for the arm64 trees: it
#     holds the host tools (fixdep, modpost, objtool...) that run on this
#     machine (cross-build with ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-);
#   - host tools linked against a newer glibc than this machine's (sid's and
#     experimental's kbuild) are run through sid's libc6, unpacked
#     into <tree>/hostlibc: each such binary X becomes X.bin plus a small
#     shell wrapper X that starts X.bin with hostlibc's dynamic loader.
# The compiler each kernel was built with (CC in .kernelvariables) is not
# provided: `kheaders.sh makeflags NAME` prints the make variables that
# build with what is on this machine (CC falls back to gcc-12 when the
# kernel's own gcc-N is missing).
#
# Kernel images, for the trees the guests also boot (IMAGES below): the
# linux-image package of the same release (the -unsigned one where there is
# one), unpacked beside the headers under $CACHE/kheaders/<name>-image/,
# with modules.dep made by depmod -b there.  Nothing goes to /boot or
# /lib/modules of the machine.
#
# Usage: kheaders.sh [--refresh] [--only NAME,...]
#                                 fetch/unpack what is missing, then print
#                                 one line per tree: name release KDIR
#                                 (--refresh: apt-get update, re-resolve;
#                                 --only: just those trees and their images,
#                                 with the package lists of their suites
#                                 only, under $CACHE/apt-guest: what
#                                 deps.sh needs for the guests' 6.1 and
#                                 6.12, without the matrix's downloads)
#        kheaders.sh list         print the lines for the trees present
#        kheaders.sh kdir NAME    KDIR of tree NAME (nothing if absent)
#        kheaders.sh makeflags NAME  extra make arguments for tree NAME
#        kheaders.sh release|vmlinuz|modroot NAME
#                                 the booted kernel's release, image and
#                                 lib/modules/<release> (nothing if absent)
# Quick (no network, no apt) when every tree is already unpacked.
set -euo pipefail

CACHE=${CACHE:-/var/cache/engram-rdma}
APTDIR=$CACHE/apt-matrix
KHDIR=$CACHE/kheaders

# name|deb arch|suites (comma separated)|headers package regex[|oldest]
TREES=(
	"x86-6.1|amd64|bookworm,bookworm-security|^linux-headers-6\.1\.0-[0-9]+-amd64$"
	"x86-6.12|amd64|bookworm-backports|^linux-headers-6\.12\.[0-9]+[^-]*-amd64$"
	"x86-5.10|amd64|bullseye,bullseye-security|^linux-headers-5\.10\.0-[0-9]+-amd64$"
	"x86-5.10-oldest|amd64|bullseye|^linux-headers-5\.10\.0-[0-9]+-amd64$|oldest"
	"x86-6.1-oldest|amd64|bookworm|^linux-headers-6\.1\.0-[0-9]+-amd64$|oldest"
	"x86-6.12-trixie|amd64|trixie,trixie-security|^linux-headers-6\.12\.[0-9]+[^-]*-amd64$"
	"x86-6.12-rt|amd64|bookworm-backports|^linux-headers-6\.12\.[0-9]+[^-]*-rt-amd64$"
	"x86-7.2|amd64|sid|^linux-headers-7\.2\.[0-9]+[^-]*-amd64$"
	"x86-7.3-rc|amd64|experimental|^linux-headers-7\.3[^-]*-amd64$"
	"arm64-6.12|arm64|bookworm-backports|^linux-headers-6\.12\.[0-9]+[^-]*-arm64$"
	"arm64-6.12-16k|arm64|bookworm-backports|^linux-headers-6\.12\.[0-9]+[^-]*-arm64-16k$"
)
# The arm64 sysroot the tools, libengram and the guest programs are
# cross-built against (bookworm's, as on the machine): development files
# and the libraries they link, unpacked into $CACHE/kheaders/arm64-sysroot.
# The list is unpacked as it is, not resolved: libsystemd0's own libraries
# are named, for the linker follows them.
SYSROOT_PKGS=(libnl-3-200 libnl-3-dev libnl-genl-3-200 libnl-genl-3-dev libnl-route-3-200
	libnl-route-3-dev libjansson4 libjansson-dev libssl3 libssl-dev libibverbs1
	libibverbs-dev librdmacm1 librdmacm-dev
	libsystemd0 libsystemd-dev libcap2 libgcrypt20 libgpg-error0 liblz4-1 liblzma5 libzstd1)
# The arm64 guest's root file system (the GPU node of the arm64 pair): these
# packages from bookworm with everything they depend on, resolved by apt
# against an empty package database of its own ($CACHE/apt-arm64root) and
# unpacked with dpkg-deb -x into $CACHE/kheaders/arm64-root (merged /usr).
# No maintainer script runs: nothing is emulated.
# Essential packages are named too: apt takes them as installed.
ROOT_PKGS=(bash dash coreutils libc-bin debianutils gzip hostname busybox-static iproute2
	rdma-core ibverbs-providers ibverbs-utils kmod util-linux mount procps grep sed gawk
	findutils python3 e2fsprogs libnl-genl-3-200 libjansson4 libssl3 libibverbs1
	librdmacm1 libsystemd0 base-passwd)
# Trees whose kernel image is unpacked too: the guests boot them.
IMAGES=(x86-6.1 x86-6.12 x86-5.10-oldest x86-7.2 arm64-6.12-16k)
# The ones deps.sh asks for (--only): make check's and make demo's guests.
DEPS_TREES="x86-6.1 x86-6.12"
# Where the newer libc6 for host tools built against one comes from.
LIBC_SUITE=sid

log() { echo "kheaders: $*" >&2; }
die() { log "$*"; exit 1; }

tree_field() {
	# $1 = name, $2 = field number (1-4); fails for an unknown name.
	local t
	for t in "${TREES[@]}"; do
		[ "${t%%|*}" = "$1" ] && { cut -d'|' -f"$2" <<<"$t"; return 0; }
	done
	return 1
}

stamp_get() {
	# $1 = name, $2 = key: a value recorded when tree NAME was unpacked.
	sed -n "s/^$2=//p" "$KHDIR/$1/.kheaders" 2>/dev/null | tail -n1
}

tree_ok() {
	local kdir
	kdir=$(stamp_get "$1" KDIR)
	[ -n "$kdir" ] && [ -f "$kdir/Makefile" ] && [ -f "$kdir/.config" ] &&
		[ -x "$kdir/scripts/basic/fixdep" ] || return 1
	# Unpacked before checker-valid.sh was supplied (build_tree).
	local c
	for c in "$kdir"/../linux-headers-*; do
		if grep -qs checker-valid.sh "$c/Makefile" && [ ! -x "$c/scripts/checker-valid.sh" ]; then
			return 1
		fi
	done
	return 0
}

image_ok() {
	local v m
	v=$(stamp_get "$1-image" VMLINUZ)
	m=$(stamp_get "$1-image" MODROOT)
	[ -n "$v" ] && [ -f "$v" ] && [ -f "$m/modules.dep" ] && [ -f "$m/modules.builtin" ]
}

print_line() {
	printf '%-15s %-28s %s\n' "$1" "$(stamp_get "$1" RELEASE)" "$(stamp_get "$1" KDIR)"
}

makeflags() {
	# Extra make arguments for tree $1 with the compilers on this machine.
	local name=$1 arch cross want cc have out=() kcfg kp hp
	tree_ok "$name" || return 0
	arch=$(stamp_get "$name" KARCH)
	cross=$(stamp_get "$name" CROSS)
	want=$(stamp_get "$name" CC)
	kcfg=$(stamp_get "$name" KDIR)/.config
	[ "$arch" = arm64 ] && out+=("ARCH=arm64" "CROSS_COMPILE=$cross")
	if [ -n "$want" ] && ! command -v "$cross$want" >/dev/null 2>&1; then
		# The kernel's own gcc-N is not here: the machine's gcc instead;
		# when that is older, through cc-compat, which maps the options
		# only newer gccs know (compile checks only, not for shipping).
		have=$(gcc -dumpversion 2>/dev/null || echo 12)
		cc=${cross}gcc-$have
		if ! command -v "$cc" >/dev/null 2>&1; then
			log "$name wants $cross$want; neither it nor $cc is on this machine"
		elif [ "${want#gcc-}" -gt "$have" ] 2>/dev/null; then
			log "$name was built with $cross$want (not on this machine):" \
				"CC=cc-compat around $cc; expect warnings from newer-gcc features"
			out+=("CC=$KHDIR/$name/cc-compat")
		else
			log "$name was built with $cross$want (not on this machine): CC=$cc"
			out+=("CC=$cc")
		fi
	fi
	# Module BTF needs a pahole at least as new as the kernel's.
	kp=$(sed -n 's/^CONFIG_PAHOLE_VERSION=//p' "$kcfg" 2>/dev/null)
	hp=$(pahole --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\.\([0-9]*\).*/\1\2/p')
	if grep -q '^CONFIG_DEBUG_INFO_BTF_MODULES=y' "$kcfg" 2>/dev/null &&
	   [ -n "$kp" ] && [ "${hp:-0}" -lt "$kp" ]; then
		log "$name: pahole ${hp:-none} older than the kernel's $kp: no module BTF"
		out+=("CONFIG_DEBUG_INFO_BTF_MODULES=")
	fi
	# Kernels that validate their checker (checker-valid.sh, 6.19+) want a
	# sparse that knows __typeof_unqual__: sid's, run with sid's glibc.
	if grep -q checker-valid.sh "$(stamp_get "$name" KDIR)"/../*-common/Makefile 2>/dev/null &&
	   [ -x "$KHDIR/sparse-sid/sparse" ]; then
		out+=("CHECK=$KHDIR/sparse-sid/sparse")
	fi
	echo "${out[*]}"
}

case "${1:-}" in
kdir)
	name=${2:?usage: kheaders.sh kdir NAME}
	tree_field "$name" 1 >/dev/null || die "unknown tree '$name'"
	if tree_ok "$name"; then stamp_get "$name" KDIR; fi
	exit 0
	;;
makeflags)
	name=${2:?usage: kheaders.sh makeflags NAME}
	tree_field "$name" 1 >/dev/null || die "unknown tree '$name'"
	makeflags "$name"
	exit 0
	;;
release | vmlinuz | modroot)
	name=${2:?usage: kheaders.sh $1 NAME}
	tree_field "$name" 1 >/dev/null || die "unknown tree '$name'"
	image_ok "$name" || exit 0
	case "$1" in
	release) stamp_get "$name-image" RELEASE ;;
	vmlinuz) stamp_get "$name-image" VMLINUZ ;;
	modroot) stamp_get "$name-image" MODROOT ;;
	esac
	exit 0
	;;
list)
	for t in "${TREES[@]}"; do
		n=${t%%|*}
		if tree_ok "$n"; then print_line "$n"; fi
	done
	exit 0
	;;
--refresh | --only | "") ;;
*) die "usage: kheaders.sh [--refresh] [--only NAME,...] | list | kdir NAME | makeflags NAME" ;;
esac
REFRESH=0 ONLY=""
while [ $# -gt 0 ]; do
	case "$1" in
	--refresh) REFRESH=1; shift ;;
	--only) ONLY=${2:?usage: kheaders.sh --only NAME,...}; shift 2 ;;
	*) die "unknown argument '$1'" ;;
	esac
done
# The matrix's other pieces (sid's sparse, the arm64 sysroot and root).
EXTRAS=1
if [ -n "$ONLY" ]; then
	keep=() keepi=()
	IFS=, read -r -a only <<<"$ONLY"
	for n in "${only[@]}"; do
		tree_field "$n" 1 >/dev/null || die "unknown tree '$n'"
		for t in "${TREES[@]}"; do [ "${t%%|*}" = "$n" ] && keep+=("$t"); done
		for t in "${IMAGES[@]}"; do [ "$t" = "$n" ] && keepi+=("$t"); done
	done
	TREES=("${keep[@]}")
	IMAGES=("${keepi[@]}")
	EXTRAS=0
	APTDIR=$CACHE/apt-guest
fi

# ---- fast path: every tree unpacked -------------------------------------------
if [ $REFRESH -eq 0 ]; then
	all=1
	for t in "${TREES[@]}"; do tree_ok "${t%%|*}" || { all=0; break; }; done
	for t in "${IMAGES[@]}"; do image_ok "$t" || { all=0; break; }; done
	if [ $EXTRAS -eq 1 ]; then
		[ -x "$KHDIR/sparse-sid/sparse" ] || all=0
		grep -qs '^LAYOUT=merged-usr$' "$KHDIR/arm64-sysroot/.kheaders" || all=0
		[ "$(sed -n 's/^WANT=//p' "$KHDIR/arm64-root/.kheaders" 2>/dev/null)" = \
		  "$(printf '%s\n' "${ROOT_PKGS[@]}")" ] || all=0
	fi
	if [ $all -eq 1 ]; then
		for t in "${TREES[@]}"; do print_line "${t%%|*}"; done
		exit 0
	fi
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (writes $CACHE)"
for tool in apt-get dpkg-deb dpkg ldd; do
	command -v "$tool" >/dev/null || die "$tool not found"
done

# ---- private apt configuration ------------------------------------------------------
mkdir -p "$APTDIR/lists/partial" "$APTDIR/archives/partial" "$APTDIR/cache" \
	"$APTDIR/empty.d" "$KHDIR"
# apt downloads as _apt where it can; let it write the archive directory.
if id _apt >/dev/null 2>&1; then
	chown _apt:root "$APTDIR/archives" "$APTDIR/archives/partial" 2>/dev/null || true
fi
SUITES=(bookworm bookworm-security bullseye bullseye-security bookworm-backports trixie
	trixie-security sid experimental)
ARCHS=(amd64 arm64)
if [ -n "$ONLY" ]; then
	# The suites and architectures of the trees asked for, nothing more.
	mapfile -t SUITES < <(for t in "${TREES[@]}"; do cut -d'|' -f3 <<<"$t" | tr , '\n'; done | sort -u)
	mapfile -t ARCHS < <(for t in "${TREES[@]}"; do cut -d'|' -f2 <<<"$t"; done | sort -u)
	[[ " ${ARCHS[*]} " == *" amd64 "* ]] || ARCHS+=(amd64)
fi
kr=/usr/share/keyrings/debian-archive-keyring.gpg
archs=$(IFS=,; echo "${ARCHS[*]}")
tmp=$(mktemp "$APTDIR/.sources.XXXXXX")
for s in "${SUITES[@]}"; do
	case "$s" in
	*-security) echo "deb [signed-by=$kr arch=$archs] http://deb.debian.org/debian-security $s main" ;;
	*) echo "deb [signed-by=$kr arch=$archs] http://deb.debian.org/debian $s main" ;;
	esac
done > "$tmp"
# Rewritten when the suites change (a suite without lists then updates).
if cmp -s "$tmp" "$APTDIR/sources.list"; then
	rm -f "$tmp"
else
	chmod 0644 "$tmp"
	mv -f "$tmp" "$APTDIR/sources.list"
fi
APT_OPTS=(
	-o "Dir::Etc::sourcelist=$APTDIR/sources.list"
	-o "Dir::Etc::sourceparts=$APTDIR/empty.d"
	-o "Dir::Etc::preferences=$APTDIR/preferences"
	-o "Dir::Etc::preferencesparts=$APTDIR/empty.d"
	-o "Dir::State::Lists=$APTDIR/lists"
	-o "Dir::Cache=$APTDIR/cache"
	-o "Dir::Cache::archives=$APTDIR/archives"
	-o "APT::Architecture=amd64"
	-o "APT::Architectures::=amd64"
	-o "APT::Architectures::=arm64"
	-o "Acquire::Languages=none"
	-o "Acquire::Retries=3"
	-o "Acquire::http::Timeout=60"
)
export DEBIAN_FRONTEND=noninteractive
apt_get() { timeout 1800 nice -n 19 apt-get -q -y "${APT_OPTS[@]}" "$@" </dev/null; }

list_file() {
	# $1 = suite, $2 = arch: the Packages list apt stored (any compression).
	local f
	for f in "$APTDIR"/lists/*_dists_"$1"_main_binary-"$2"_Packages*; do
		[ -e "$f" ] && { echo "$f"; return 0; }
	done
	return 1
}

lists_fresh() {
	local s a f
	for s in "${SUITES[@]}"; do
		for a in "${ARCHS[@]}"; do
			f=$(list_file "$s" "$a") || return 1
			[ -n "$(find "$f" -mmin -1440)" ] || return 1
		done
	done
}

if [ $REFRESH -eq 1 ] || ! lists_fresh; then
	log "apt-get update (private sources list $APTDIR/sources.list)"
	# A suite that vanished from the mirror must not stop the others.
	apt_get update || log "apt-get update reported errors; going on with the lists it got"
fi

# ---- index of the packages of interest ---------------------------------------------
# One line per package version: suite arch package version depends...
INDEX=$(mktemp)
WORK=""
trap 'rm -f "$INDEX"; [ -z "$WORK" ] || rm -rf "$WORK"' EXIT
for s in "${SUITES[@]}"; do
	for a in "${ARCHS[@]}"; do
		f=$(list_file "$s" "$a") || { log "no $s/$a package list"; continue; }
		/usr/lib/apt/apt-helper cat-file "$f" | awk -v s="$s" -v a="$a" '
			/^Package: / { p = $2 }
			/^Version: / { v = $2 }
			/^Architecture: / { arch = $2 }
			/^Depends: / { d = substr($0, 10) }
			/^$/ {
				if (p ~ /^(linux-(headers|kbuild|base|image|binary|modules)-[0-9]|sparse$|libc6$|libelf1t64$|libnl-(3|genl-3|route-3)-(200|dev)$|libjansson(4|-dev)$|libssl(3|-dev)$|lib(ibverbs|rdmacm)(1|-dev)$|libelf1$|libzstd1$|zlib1g$|libsystemd(0|-dev)$|libcap2$|libgcrypt20$|libgpg-error0$|liblz4-1$|liblzma5$)/) {
					gsub(/ /, "", d)
					print s, arch, p, v, d
				}
				p = v = d = arch = ""
			}'
	done
done > "$INDEX"

pick_version() {
	# $1 = gt or lt; stdin: lines "version rest...": prints the line of
	# the newest (gt) or oldest (lt) version.
	local best="" bestv="" v rest
	while read -r v rest; do
		if [ -z "$bestv" ] || dpkg --compare-versions "$v" "$1" "$bestv"; then
			bestv=$v best="$v $rest"
		fi
	done
	[ -n "$best" ] && echo "$best"
}
newest() { pick_version gt; }
oldest() { pick_version lt; }

lookup() {
	# $1 = package, $2 = arch (amd64, arm64 or all), $3.. = suites:
	# prints "version arch" of its newest version there.
	local p=$1 a=$2
	shift 2
	local re
	re=$(IFS='|'; echo "$*")
	awk -v p="$p" -v a="$a" -v re="^($re)\$" \
		'$3 == p && ($2 == a || $2 == "all") && $1 ~ re { print $4, $2 }' "$INDEX" |
		sort -u | newest
}

deb_file() {
	# $1 = package, $2 = version, $3 = arch: the .deb apt-get download writes.
	local v=${2//:/%3a}
	echo "$APTDIR/archives/${1}_${v}_${3}.deb"
}

fetch() {
	# $@ = "package version arch" triples (one per argument).
	local want=() x p v a
	for x in "$@"; do
		read -r p v a <<<"$x"
		[ -s "$(deb_file "$p" "$v" "$a")" ] && continue
		if [ "$a" = all ]; then want+=("$p=$v"); else want+=("$p:$a=$v"); fi
	done
	[ ${#want[@]} -eq 0 ] && return 0
	log "downloading ${want[*]}"
	(cd "$APTDIR/archives" && apt_get download "${want[@]}")
	for x in "$@"; do
		read -r p v a <<<"$x"
		[ -s "$(deb_file "$p" "$v" "$a")" ] || die "download of $p $v ($a) left no $(deb_file "$p" "$v" "$a")"
	done
}

resolve() {
	# $1 = arch, $2 = comma-separated suites, $3.. = packages: prints the
	# "package version arch" triple of each one's newest version there, a
	# line each; fails, naming it, at the first that is not there.
	local arch=$1 suites=$2 sl p x
	IFS=, read -r -a sl <<<"$suites"
	shift 2
	for p in "$@"; do
		x=$(lookup "$p" "$arch" "${sl[@]}") || { log "no $p ($arch) in $suites"; return 1; }
		echo "$p $x"
	done
}

unpack() {
	# $1 = directory, $2.. = "package version arch" triples: downloads what
	# is missing and unpacks each into the directory, listing them in its
	# PACKAGES file when $UNPACK_LIST is set.
	local dir=$1 x p v a
	shift
	fetch "$@"
	mkdir -p "$dir"
	for x in "$@"; do
		read -r p v a <<<"$x"
		dpkg-deb -x "$(deb_file "$p" "$v" "$a")" "$dir" || return 1
		[ -z "${UNPACK_LIST:-}" ] || echo "$p $v $a" >> "$UNPACK_LIST"
	done
}

libc_paths() {
	# $1 = unpacked root holding a libc6: prints "LOADER LIBDIR" there.
	local ldso libdir
	ldso=$(find "$1" -name 'ld-linux-x86-64.so.2' \( -type f -o -type l \) | head -n1)
	libdir=$(dirname "$(find "$1" -name 'libc.so.6' | head -n1)")
	{ [ -n "$ldso" ] && [ -f "$libdir/libc.so.6" ]; } || { log "$1: no loader or libc"; return 1; }
	echo "$(readlink -f "$ldso") $libdir"
}

libc_wrapper() {
	# $1 = unpacked root holding a libc6, $2 = where that root ends up,
	# $3 = the wrapper to write, $4 = the program it runs (as it will be
	# named once the root is in place; '$0.bin' allowed), $5 = why: a
	# script that runs the program with that libc's loader and libraries.
	local root=$1 final=$2 x ldso libdir
	x=$(libc_paths "$root") || return 1
	read -r ldso libdir <<<"$x"
	cat > "$3" <<EOW
#!/bin/sh
# kheaders.sh: $5
exec "$final${ldso#"$root"}" --library-path "$final${libdir#"$root"}" "$4" "\$@"
EOW
	chmod 0755 "$3"
}

fix_symlinks() {
	# Absolute symlinks inside tree $1 point into the tree instead.
	local root=$1 l t
	while IFS= read -r -d '' l; do
		t=$(readlink "$l")
		case "$t" in
		/*) ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$root$t")" "$l" ;;
		esac
	done < <(find "$root" -type l -print0)
}

needs_newer_libc() {
	# True when ELF executable $1 cannot run with this machine's libc.
	# (Not `ldd | grep -q`: with pipefail, grep leaving early fails the pipe.)
	local out
	out=$(ldd "$1" 2>&1) || true
	grep -q "version .GLIBC_[0-9.]*. not found" <<<"$out"
}

wrap_host_tools() {
	# $1 = tree being unpacked, $2 = where it will end up, $3 = tree name.
	# Host tools the machine's glibc cannot run get sid's libc6 (and libelf
	# and what it needs, which follow glibc there).
	local root=$1 final=$2 name=$3 suite=$LIBC_SUITE f bad=() ldso libdir x
	while IFS= read -r -d '' f; do
		case "$f" in *.bin) continue ;; esac
		[ "$(head -c4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
		needs_newer_libc "$f" && bad+=("$f")
	done < <(find "$root"/usr/lib/linux-kbuild-* -type f -perm -u+x -print0)
	[ ${#bad[@]} -eq 0 ] && return 0
	log "$name: ${#bad[@]} host tools need a newer glibc; using $suite's libc6"
	local pkgs
	pkgs=$(resolve amd64 "$suite" libc6 libelf1t64 libzstd1 zlib1g) || die "$name: no $suite libc"
	mapfile -t pkgs <<<"$pkgs"
	UNPACK_LIST=$root/hostlibc/PACKAGES unpack "$root/hostlibc" "${pkgs[@]}" ||
		die "$name: unpacking $suite's libc6"
	x=$(libc_paths "$root/hostlibc") || die "$name: libc6 from $suite has no loader/libc"
	read -r ldso libdir <<<"$x"
	for f in "${bad[@]}"; do
		x=$("$ldso" --list --library-path "$libdir" "$f" 2>&1) || true
		if grep -q 'not found' <<<"$x"; then
			die "$f: unresolved libraries even with $suite's libc"
		fi
		mv "$f" "$f.bin"
		# The wrapper names the loader where the tree ends up ($final).
		libc_wrapper "$root/hostlibc" "$final/hostlibc" "$f" '$0.bin' \
			"run with $suite's glibc (this machine's is too old for it)" ||
			die "$name: no wrapper for $f"
	done
	return 0
}

# ---- per tree ---------------------------------------------------------------------
build_tree() {
	local name=$1 arch=$2 suites_csv=$3 re=$4 pick=${5:-newest}
	local suites=() hdr ver deps rel root kdir x p v a c
	IFS=, read -r -a suites <<<"$suites_csv"

	[ "$pick" = oldest ] || pick=newest
	x=$(awk -v re="$re" -v a="$arch" -v ss=",$suites_csv," \
		'$2 == a && $3 ~ re && index(ss, "," $1 ",") { print $4, $3, $5 }' "$INDEX" | sort -u | $pick) ||
		{ log "$name: no package matching $re in ${suites[*]} ($arch)"; return 1; }
	read -r ver hdr deps <<<"$x"
	rel=${hdr#linux-headers-}
	root=$KHDIR/$name
	kdir=$root/usr/src/linux-headers-$rel
	if tree_ok "$name" && [ "$(stamp_get "$name" RELEASE)" = "$rel" ] &&
	   [ "$(stamp_get "$name" VERSION)" = "$ver" ]; then
		return 0
	fi

	# The headers package, the linux-headers-*/linux-base-* it depends on
	# (same arch or all) and linux-kbuild for amd64 (the host).
	local pkgs=("$hdr $ver $arch") dep
	for dep in ${deps//,/ }; do
		dep=${dep%%|*}
		dep=${dep%%(*}
		case "$dep" in
		linux-headers-[0-9]* | linux-base-[0-9]*)
			x=$(lookup "$dep" "$arch" "${suites[@]}") || die "$name: $dep not found"
			read -r v a <<<"$x"
			pkgs+=("$dep $v $a") ;;
		linux-kbuild-[0-9]*)
			x=$(lookup "$dep" amd64 "${suites[@]}") || die "$name: $dep (amd64) not found"
			read -r v a <<<"$x"
			pkgs+=("$dep $v $a") ;;
		esac
	done
	[[ "${pkgs[*]}" == *linux-kbuild-* ]] || die "$name: $hdr names no linux-kbuild"
	log "$name: unpacking $rel ($ver)"
	WORK=$(mktemp -d "$KHDIR/.new-$name.XXXXXX")
	unpack "$WORK" "${pkgs[@]}" || die "$name: unpacking ${pkgs[*]}"
	# /lib -> /usr/lib for the few packages (bullseye) that ship /lib/modules.
	fix_symlinks "$WORK"
	# The flavour Makefile names the header trees by absolute path (include
	# of the common Makefile; KBUILD_OUTPUT= since 7.x): point those at the
	# tree's final location.
	for c in "$WORK"/usr/src/linux-headers-*/Makefile; do
		sed -i "s@\(^\|[ =]\)/usr/src/linux-headers-@\1$root/usr/src/linux-headers-@g" "$c"
	done
	[ -f "$WORK/usr/src/linux-headers-$rel/.config" ] || die "$name: no .config in $hdr"
	[ -x "$WORK/usr/src/linux-headers-$rel/scripts/basic/fixdep" ] ||
		die "$name: scripts/basic/fixdep missing (linux-kbuild not where the headers expect it)"
	wrap_host_tools "$WORK" "$root" "$name"
	# Debian's headers package leaves out the script its Makefile runs to
	# decide whether sparse is new enough (C=1/C=2 is silently dropped
	# without it): the same test, written here.
	for c in "$WORK"/usr/src/linux-headers-*; do
		grep -qs checker-valid.sh "$c/Makefile" || continue
		[ -e "$c/scripts/checker-valid.sh" ] && continue
		mkdir -p "$c/scripts"
		cat > "$c/scripts/checker-valid.sh" <<'EOV'
#!/bin/sh
# kheaders.sh: prints 1 when the checker ($@) parses __typeof_unqual__,
# which these kernels' headers use, without an error; 0 otherwise.
command -v "$1" >/dev/null 2>&1 || { echo 0; exit 0; }
t=$(mktemp --suffix=.c) || { echo 0; exit 0; }
trap 'rm -f "$t"' EXIT
printf 'static inline int u(const int *q)\n{\n\t__typeof_unqual__(*q) v = *q;\n\treturn v;\n}\n' >"$t"
"$@" "$t" 2>&1 | awk 'BEGIN { c = 1 } /error/ { c = 0 } END { print c }'
EOV
		chmod 0755 "$c/scripts/checker-valid.sh"
	done

	# What the kernel was built with, from Debian's .kernelvariables.
	local kv=$WORK/usr/src/linux-headers-$rel/.kernelvariables cc="" cross="" karch
	if [ -f "$kv" ]; then
		cc=$(sed -n 's/^CC = .*CROSS_COMPILE)\(gcc[^ ]*\).*/\1/p' "$kv" | head -n1)
	fi
	# For a kernel built with a newer gcc than this machine's (see makeflags).
	cat > "$WORK/cc-compat" <<'EOC'
#!/bin/bash
# kheaders.sh: the machine's gcc with options of newer gccs mapped to
# older equivalents.  For compile checks against kernels built with a newer
# gcc only.  GCC (environment) picks the compiler, default gcc.
args=()
for a in "$@"; do
	case "$a" in
	-fmin-function-alignment=*) args+=("-falign-functions=${a#*=}") ;;
	*) args+=("$a") ;;
	esac
done
exec "${GCC:-gcc}" "${args[@]}"
EOC
	chmod 0755 "$WORK/cc-compat"
	karch=$([ "$arch" = arm64 ] && echo arm64 || echo x86)
	[ "$arch" = arm64 ] && cross=aarch64-linux-gnu- || cross=""
	{
		echo "NAME=$name"
		echo "RELEASE=$rel"
		echo "VERSION=$ver"
		echo "DEBARCH=$arch"
		echo "KARCH=$karch"
		echo "CROSS=$cross"
		echo "CC=$cc"
		echo "KDIR=$kdir"
		printf 'PACKAGE=%s\n' "${pkgs[@]}"
	} > "$WORK/.kheaders"
	rm -rf "$root"
	mv "$WORK" "$root"
	chmod 0755 "$root"
	WORK=""
}

# sid's sparse (0.6.5~rc1 parses __typeof_unqual__, bookworm's 0.6.4 does
# not), run with sid's glibc, for the kernels that need it (makeflags).
sparse_tool() {
	local dir=$KHDIR/sparse-sid pkgs
	[ -x "$dir/sparse" ] && return 0
	pkgs=$(resolve amd64 sid sparse libc6) || { log "no sparse for 7.x"; return 1; }
	mapfile -t pkgs <<<"$pkgs"
	rm -rf "$dir.new"
	UNPACK_LIST=$dir.new/PACKAGES unpack "$dir.new/root" "${pkgs[@]}" || return 1
	if [ ! -x "$dir.new/root/usr/bin/sparse" ]; then
		log "sid's sparse unpacked incomplete"
		return 1
	fi
	libc_wrapper "$dir.new/root" "$dir/root" "$dir.new/sparse" "$dir/root/usr/bin/sparse" \
		"sid's sparse with sid's glibc (this machine's is too old for it)" || return 1
	rm -rf "$dir"
	mv "$dir.new" "$dir"
}

# The kernel image of tree $1's release, for booting in a guest.
image_tree() {
	local name=$1 arch suites_csv rel ver x p dir v a vmlinuz modroot
	arch=$(tree_field "$name" 2)
	suites_csv=$(tree_field "$name" 3)
	rel=$(stamp_get "$name" RELEASE)
	[ -n "$rel" ] || { log "$name: no headers, so no image"; return 1; }
	dir=$KHDIR/$name-image
	if image_ok "$name" && [ "$(stamp_get "$name-image" RELEASE)" = "$rel" ]; then
		return 0
	fi
	local deps dep pkgs=()
	for p in "linux-image-$rel-unsigned" "linux-image-$rel"; do
		x=$(awk -v p="$p" -v a="$arch" -v ss=",$suites_csv," \
			'$3 == p && $2 == a && index(ss, "," $1 ",") { print $4, $2, $5 }' "$INDEX" |
			sort -u | newest) && break
	done
	[ -n "$x" ] || { log "$name: no linux-image-$rel(-unsigned) in $suites_csv"; return 1; }
	read -r v a deps <<<"$x"
	pkgs+=("$p $v $a")
	# 7.x splits the image into linux-binary (vmlinuz) and linux-modules.
	for dep in ${deps//,/ }; do
		dep=${dep%%|*}
		dep=${dep%%(*}
		case "$dep" in
		linux-binary-"$rel" | linux-modules-"$rel")
			local sl; IFS=, read -r -a sl <<<"$suites_csv"
			x=$(lookup "$dep" "$arch" "${sl[@]}") || { log "$name: $dep not found"; return 1; }
			read -r v a <<<"$x"
			pkgs+=("$dep $v $a") ;;
		esac
	done
	log "$name: unpacking ${pkgs[*]}"
	rm -rf "$dir.new"
	unpack "$dir.new" "${pkgs[@]}" || return 1
	# boot/vmlinuz-<rel>, or (7.x) usr/lib/modules/<rel>/vmlinuz.
	vmlinuz=$(find "$dir.new" -maxdepth 5 \( -name "vmlinuz-$rel" -o -path "*/modules/$rel/vmlinuz" \) |
		head -n1)
	modroot=$(find "$dir.new" -maxdepth 4 -type d -path "*/lib/modules/$rel" | head -n1)
	if [ -z "$vmlinuz" ] || [ -z "$modroot" ]; then
		log "$name: ${pkgs[*]}: no vmlinuz or lib/modules/$rel"
		rm -rf "$dir.new"
		return 1
	fi
	# 7.x ships modules.builtin* and modules.order with the headers: without
	# them modprobe takes built-in drivers for missing modules.
	for x in modules.builtin modules.builtin.modinfo modules.order; do
		[ -e "$modroot/$x" ] && continue
		p=$(find "$KHDIR/$name" -maxdepth 5 -path "*/modules/$rel/$x" | head -n1)
		[ -n "$p" ] && cp "$p" "$modroot/$x"
	done
	# The tree as modprobe -d sees it: the directory above lib/modules.
	depmod -b "${modroot%/lib/modules/*}" "$rel" || { log "$name: depmod failed"; return 1; }
	rm -rf "$dir"
	mv "$dir.new" "$dir"
	{
		echo "RELEASE=$rel"
		printf 'PACKAGE=%s\n' "${pkgs[@]}"
		echo "VMLINUZ=$dir${vmlinuz#"$dir.new"}"
		echo "MODROOT=$dir${modroot#"$dir.new"}"
	} > "$dir/.kheaders"
}

# The arm64 sysroot: SYSROOT_PKGS from bookworm, unpacked.
sysroot_tree() {
	local dir=$KHDIR/arm64-sysroot pkgs
	pkgs=$(resolve arm64 bookworm,bookworm-security "${SYSROOT_PKGS[@]}") || return 1
	mapfile -t pkgs <<<"$pkgs"
	if grep -qs '^LAYOUT=merged-usr$' "$dir/.kheaders" &&
	   [ "$(sed -n 's/^PACKAGE=//p' "$dir/.kheaders")" = "$(printf '%s\n' "${pkgs[@]}")" ]; then
		return 0
	fi
	log "arm64-sysroot: unpacking ${#pkgs[@]} packages"
	rm -rf "$dir.new"
	unpack "$dir.new" "${pkgs[@]}" || return 1
	# Merged /usr, as the machine's: bookworm's libnl ships in /lib.
	merge_usr "$dir.new"
	# Development symlinks are absolute (/usr/lib/...): into the sysroot.
	fix_symlinks "$dir.new"
	printf 'PACKAGE=%s\n' "${pkgs[@]}" > "$dir.new/.kheaders"
	echo "LAYOUT=merged-usr" >> "$dir.new/.kheaders"
	rm -rf "$dir"
	mv "$dir.new" "$dir"
}

# Bin, sbin and lib of an unpacked tree into usr/, as usrmerge does.
merge_usr() {
	local d
	for d in bin sbin lib lib64; do
		if [ ! -d "$1/$d" ] || [ -L "$1/$d" ]; then continue; fi
		mkdir -p "$1/usr/$d"
		cp -a "$1/$d/." "$1/usr/$d/"
		rm -rf "${1:?}/$d"
		ln -s "usr/$d" "$1/$d"
	done
}

# The arm64 guest's root: ROOT_PKGS and their dependencies, unpacked.
root_tree() {
	local dir=$KHDIR/arm64-root ad=$CACHE/apt-arm64root f want
	want=$(printf '%s\n' "${ROOT_PKGS[@]}")
	if [ -f "$dir/.kheaders" ] && [ "$(sed -n 's/^WANT=//p' "$dir/.kheaders")" = "$want" ]; then
		return 0
	fi
	mkdir -p "$ad/lists/partial" "$ad/archives/partial" "$ad/cache"
	: > "$ad/status"
	printf 'deb [signed-by=%s arch=arm64] http://deb.debian.org/%s main\n' \
		"$kr" "debian bookworm" "$kr" "debian-security bookworm-security" > "$ad/sources.list"
	local o=(-o "Dir::Etc::sourcelist=$ad/sources.list" -o "Dir::Etc::sourceparts=$APTDIR/empty.d"
		 -o "Dir::Etc::preferencesparts=$APTDIR/empty.d" -o "Dir::State::Lists=$ad/lists"
		 -o "Dir::State::status=$ad/status" -o "Dir::Cache=$ad/cache"
		 -o "Dir::Cache::archives=$ad/archives" -o "APT::Architecture=arm64"
		 -o "APT::Architectures::=arm64" -o "APT::Install-Recommends=0"
		 -o "Debug::NoLocking=1" -o "Acquire::Retries=3")
	log "arm64-root: resolving ${#ROOT_PKGS[@]} packages and their dependencies (bookworm, arm64)"
	timeout 1800 apt-get -q "${o[@]}" update </dev/null >&2 || return 1
	rm -f "$ad"/archives/*.deb
	timeout 1800 apt-get -q -y "${o[@]}" install -d "${ROOT_PKGS[@]}" </dev/null >&2 || return 1
	rm -rf "$dir.new"
	mkdir -p "$dir.new"
	for f in "$ad"/archives/*.deb; do
		dpkg-deb -x "$f" "$dir.new" || return 1
	done
	merge_usr "$dir.new"
	fix_symlinks "$dir.new"
	# What the package scripts would have made: accounts, mount points.
	cp "$dir.new/usr/share/base-passwd/passwd.master" "$dir.new/etc/passwd"
	cp "$dir.new/usr/share/base-passwd/group.master" "$dir.new/etc/group"
	mkdir -p "$dir.new"/{proc,sys,dev,tmp,run,mnt,root,hostfs,usr/lib/modules}
	# ... and the alternatives their scripts would have set.
	[ -e "$dir.new/usr/bin/sh" ] || ln -s dash "$dir.new/usr/bin/sh"
	[ -e "$dir.new/usr/bin/awk" ] || ln -s gawk "$dir.new/usr/bin/awk"
	if [ ! -x "$dir.new/usr/bin/busybox" ] || [ ! -x "$dir.new/usr/bin/bash" ]; then
		log "arm64-root: no busybox or bash after unpacking"
		return 1
	fi
	{
		printf 'WANT=%s\n' "${ROOT_PKGS[@]}"
		for f in "$ad"/archives/*.deb; do echo "DEB=$(basename "$f")"; done
	} > "$dir.new/.kheaders"
	rm -rf "$dir"
	mv "$dir.new" "$dir"
	log "arm64-root: $(du -sh "$dir" | cut -f1), $(grep -c '^DEB=' "$dir/.kheaders") packages"
}

rc=0
if [ $EXTRAS -eq 1 ]; then
	sparse_tool || rc=1
	sysroot_tree || rc=1
	root_tree || rc=1
fi
# The guests' kernels are deps.sh's (--only): a full run leaves them as they
# are, rather than resolve them again from lists refreshed at another time
# and swap the guests' kernel between two runs.  --refresh takes them too.
owned() {
	[ -z "$ONLY" ] && [ $REFRESH -eq 0 ] && [[ " $DEPS_TREES " == *" $1 "* ]] &&
		tree_ok "$1" && image_ok "$1"
}
for t in "${TREES[@]}"; do
	IFS='|' read -r n a s r o <<<"$t"
	owned "$n" && continue
	build_tree "$n" "$a" "$s" "$r" "$o" || rc=1
done
for t in "${IMAGES[@]}"; do
	owned "$t" && continue
	image_tree "$t" || rc=1
done
for t in "${TREES[@]}"; do
	n=${t%%|*}
	if tree_ok "$n"; then print_line "$n"; else log "$n: not available"; rc=1; fi
done
for t in "${IMAGES[@]}"; do
	if image_ok "$t"; then
		printf '%-15s %-28s %s\n' "$t" "(image)" "$(stamp_get "$t-image" VMLINUZ)"
	fi
done
exit $rc
