#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The udev rule that make install and the package ship (tools/udev/): with
# systemd-udevd running on it, /dev/engram_rdma goes from the module's
# 0600 root:root to root:engram 0660; a process in the group may open it
# and register a buffer within its RLIMIT_MEMLOCK (the limits.d snippet's
# value lets it register what the default 8 MiB does not), one outside the
# group gets EACCES.  The guest's /etc is the host's, read-only: the group
# is added to a copy of /etc/group bound over it, the rule goes to
# /run/udev/rules.d.
# timeout: 180
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

RULE=$TOP/tools/udev/60-engram-rdma.rules
LIMITS=$TOP/tools/udev/engram-rdma-memlock.conf
GID=4242
command -v udevadm >/dev/null || bail "udevadm missing"
# The guest's root is a chroot of the host's, where udevadm otherwise refuses.
export SYSTEMD_IGNORE_CHROOT=1

check "the module creates the node root-only" test "$(stat -c '%U:%G %a' /dev/engram_rdma)" = "root:root 600"
cp /etc/group "$SCRATCH/group" && echo "engram:x:$GID:" >> "$SCRATCH/group" &&
	mount --bind "$SCRATCH/group" /etc/group || bail "cannot add the group"
mkdir -p /run/udev/rules.d && cp "$RULE" /run/udev/rules.d/ || bail "cannot place the rule"
/lib/systemd/systemd-udevd --daemon 2>"$SCRATCH/udevd.log" || bail "systemd-udevd does not start"
udevadm trigger --action=add --subsystem-match=misc --sysname-match=engram_rdma
udevadm settle --timeout=20
check "with the rule, udevd gives it to the group engram, 0660" \
	test "$(stat -c '%U:%G %a' /dev/engram_rdma)" = "root:engram 660"

py_open() {
	# $1 = bytes to register; prints "ok" or the errno's name.
	/usr/bin/python3 - "$TOP" "$1" <<'PY'
import errno, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tools", "python"))
import engram_rdma as er
try:
    with er.Engram() as e:
        e.register(bytearray(int(sys.argv[2])))
    print("ok")
except OSError as ex:
    print(errno.errorcode.get(ex.errno, ex.errno))
PY
}
# $1 = RLIMIT_MEMLOCK in bytes, set as root (only root raises a hard limit).
member() {
	local lim=$1
	shift
	prlimit --memlock="$lim" -- setpriv --reuid=65534 --regid=65534 --groups=$GID \
		--inh-caps=-all -- "$@"
}
outsider() { setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all -- "$@"; }

out=$(member 8388608 bash -c "$(declare -f py_open); py_open 4096" 2>&1)
check "a member of engram opens it and registers a buffer ($out)" test "$out" = ok
out=$(outsider bash -c "$(declare -f py_open); py_open 4096" 2>&1)
check "a process outside the group gets EACCES ($out)" test "$out" = EACCES
kib=$(awk '$1 == "@engram" && $2 == "hard" && $3 == "memlock" {print $4}' "$LIMITS")
check "the memlock snippet sets a hard limit for the group ($kib KiB)" test "${kib:-0}" -gt 8192
out=$(member 8388608 bash -c "$(declare -f py_open); py_open 67108864" 2>&1)
check "64 MiB cannot be pinned within the default 8 MiB ($out)" test "$out" != ok
lim=$((kib * 1024))
out=$(member $lim bash -c "$(declare -f py_open); py_open 67108864" 2>&1)
check "with the snippet's limit it can ($out)" test "$out" = ok

udevadm control --exit 2>/dev/null
umount /etc/group
rm -f /run/udev/rules.d/60-engram-rdma.rules
chmod 0600 /dev/engram_rdma && chgrp root /dev/engram_rdma
done_testing
