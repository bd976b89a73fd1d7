#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The kernel's YNL tooling, from Debian's linux-source-6.12 (the .deb
# debug-kernel.sh builds from), unpacked once into $CACHE/ynl-6.12:
# tools/net/ynl (cli.py and its lib, which drive a family from its spec)
# and Documentation/netlink (the specs' schemas).  Prints the directory.
# selftests/ynl-spec-check.py validates the family's spec with the
# schema; t_50_netlink drives the module with cli.py in a guest.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CACHE:-/var/cache/engram-rdma}
PKG=linux-source-6.12
dir=$CACHE/ynl-6.12

deb=$("$here/deps.sh" --deb "$PKG")
if [ "$(cat "$dir/.source" 2>/dev/null)" != "$(basename "$deb")" ]; then
	rm -rf "$dir.new"
	mkdir -p "$dir.new"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
		xz -dc -T0 | tar -x -C "$dir.new" --strip-components=1 --wildcards \
			'*/tools/net/ynl/*' '*/Documentation/netlink/*'
	[ -f "$dir.new/tools/net/ynl/cli.py" ] &&
		[ -f "$dir.new/Documentation/netlink/genetlink-legacy.yaml" ] ||
		{ echo "ynl-tree: no tools/net/ynl/cli.py or genetlink-legacy.yaml in $(basename "$deb")" >&2; exit 1; }
	basename "$deb" >"$dir.new/.source"
	rm -rf "$dir"
	mv "$dir.new" "$dir"
fi
echo "$dir"
