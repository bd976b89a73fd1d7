#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# engram-rdma's version is written in seven places that must agree:
# dkms.conf (what DKMS and the packages are named by), the module's
# ENGRAM_VERSION, engramctl's ENGRAMCTL_VERSION, libengram's
# major/minor/patch (its file name libengram.so.X.Y.Z),
# the Python package's __version__, the manual pages' titles and
# debian/changelog's top entry.
#
#   tools/set-version.sh [--tree DIR] X.Y.Z [CHANGELOG-TEXT]
#
# writes X.Y.Z in all of them, and adds a changelog entry on top (the
# maintainer of the entry below it, the date now) unless the top entry
# already has X.Y.Z.  selftests/unit/version_test.sh and deb-check.sh
# check that they agree; deb-check.sh builds the next patch version with
# this for t_85_packages' upgrade.
set -uo pipefail
export LC_ALL=C

tree=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --tree ]; then
	tree=${2:?--tree DIR}
	shift 2
fi
cd "$tree" || exit 1

die() { echo "set-version: $*" >&2; exit 1; }

new=${1:-}
[[ $new =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] ||
	die "usage: set-version.sh [--tree DIR] X.Y.Z [CHANGELOG-TEXT]"
maj=${BASH_REMATCH[1]} min=${BASH_REMATCH[2]} pat=${BASH_REMATCH[3]}
text=${2:-"New upstream version $new."}

sed -i "s/^PACKAGE_VERSION=.*/PACKAGE_VERSION=\"$new\"/" dkms.conf &&
sed -i "s/^\(#define ENGRAM_VERSION[[:space:]]*\)\".*\"$/\1\"$new\"/" kmod/engram.h &&
sed -i "s/^\(#define ENGRAMCTL_VERSION[[:space:]]*\)\".*\"$/\1\"$new\"/" tools/engramctl/engramctl.h &&
sed -i -e "s/^\(#define LIBENGRAM_VERSION_MAJOR[[:space:]]*\)[0-9]*$/\1$maj/" \
	-e "s/^\(#define LIBENGRAM_VERSION_MINOR[[:space:]]*\)[0-9]*$/\1$min/" \
	-e "s/^\(#define LIBENGRAM_VERSION_PATCH[[:space:]]*\)[0-9]*$/\1$pat/" \
	tools/libengram/libengram.h &&
sed -i "s/^__version__ = \".*\"$/__version__ = \"$new\"/" tools/python/engram_rdma/__init__.py ||
	die "cannot write the version"
for m in tools/man/*.[0-9]; do
	sed -i "s/^\(\.TH .*\"engram-rdma \)[^\"]*\"/\1$new\"/" "$m" || die "cannot write $m"
done
if [ "$(sed -n '1s/^engram-rdma (\([^)]*\)).*/\1/p' debian/changelog)" != "$new" ]; then
	who=$(sed -n 's/^ -- \(.*>\)  .*/\1/p' debian/changelog | head -n1)
	[ -n "$who" ] || die "debian/changelog: no maintainer line to copy"
	{
		printf 'engram-rdma (%s) unstable; urgency=medium\n\n  * %s\n\n -- %s  %s\n\n' \
			"$new" "$text" "$who" "$(date -R)"
		cat debian/changelog
	} >debian/changelog.new && mv debian/changelog.new debian/changelog ||
		die "cannot write debian/changelog"
fi
# A file whose line did not have the expected form is left as it was.
for f in dkms.conf kmod/engram.h tools/engramctl/engramctl.h tools/python/engram_rdma/__init__.py \
	 debian/changelog \
	 $(grep -l '^\.TH .*"engram-rdma ' tools/man/*.[0-9]); do
	grep -qF "$new" "$f" || die "$f: the version was not written"
done
grep -q "^#define LIBENGRAM_VERSION_PATCH[[:space:]]*$pat$" tools/libengram/libengram.h ||
	die "tools/libengram/libengram.h: the version was not written"
