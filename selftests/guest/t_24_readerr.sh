#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A table whose file cannot be read: the file sits on ext4 on a
# device-mapper device over a loop device, and part of it is swapped for
# dm's "error" target after the file was written and its cached pages
# dropped, as a disk with bad sectors would be.  The load fails with EIO
# and "read error at offset N" at the bad part (or at the start of the
# folio holding it), releases every page it had pinned and the file's
# write denial, and leaves the module usable; once the device is whole
# again the same file loads and verifies.  Twice: the bad part in the
# middle of the file (1,289 pages before it were pinned and hashed) and on
# its second page (one was; the first holds the header, which engramctl
# reads itself and would report as its own read error).  It reaches the
# page cache's read error through every kind of kernel's path (folios, or
# pages on 5.10) without fault injection, which Debian's kernels do not
# have.
# kernels: 6.1
# timeout: 300
. "$(dirname "$0")/lib.sh"

TMPD=${ENGRAM_TEST_TMP:-$SCRATCH}
DM=engram_t24
IMG=$TMPD/disk.img
MNT=$TMPD/mnt
ROWS=40000	# 10.5 MB: 2,580 pages of 4 KiB
loopdev=""

# Whatever happened: the device running (a failed swap may leave it
# suspended, and umount would wait for it), no table holding the file,
# then the mount, the dm device and the loop device gone.
cleanup() {
	dmsetup resume "$DM" 2>/dev/null
	"$ENGRAMCTL" unload re >/dev/null 2>&1
	"$ENGRAMCTL" unload good >/dev/null 2>&1
	mountpoint -q "$MNT" && umount "$MNT"
	dmsetup remove "$DM" 2>/dev/null
	[ -z "$loopdev" ] || losetup -d "$loopdev" 2>/dev/null
}
trap cleanup EXIT

modprobe -a dm-mod loop ext4 2>/dev/null
# No udev in the guest: dmsetup makes /dev/mapper's nodes itself.
export DM_DISABLE_UDEV=1
command -v dmsetup >/dev/null || bail "dmsetup is not installed (deps.sh installs it)"
truncate -s 64M "$IMG" || bail "disk image"
loopdev=$(losetup -f --show "$IMG") || bail "losetup"
SECTORS=$(blockdev --getsz "$loopdev")
# dm_table whole|ERROR-START ERROR-SECTORS: the device whole, or with sectors
# [START, START + N) failing every I/O.
dm_table() {
	if [ "$1" = whole ]; then
		echo "0 $SECTORS linear $loopdev 0"
		return
	fi
	local s=$1 n=$2
	[ "$s" -eq 0 ] || echo "0 $s linear $loopdev 0"
	echo "$s $n error"
	echo "$((s + n)) $((SECTORS - s - n)) linear $loopdev $((s + n))"
}
# swap TABLE...: replace the live table (what a failing disk does under a
# mounted file system), then drop the file's cached pages but keep its
# inode and dentry (drop_caches 1), so that open() works and reads go to
# the device: none of the file may stay cached.
swap() {
	dm_table "$@" | dmsetup load "$DM" || return 1
	dmsetup suspend "$DM" && dmsetup resume "$DM" || { dmsetup resume "$DM"; return 1; }
	sync
	echo 1 >/proc/sys/vm/drop_caches
	[ "$(resident "$F")" -eq 0 ]
}
dm_table whole | dmsetup create "$DM" || bail "dmsetup create"
# Blocks of a page (4 KiB), whatever mke2fs.conf says for a small disk.
mkfs.ext4 -q -F -b 4096 "/dev/mapper/$DM" || bail "mkfs.ext4"
# noatime: reading the file writes nothing.
mkdir -p "$MNT" && mount -o noatime "/dev/mapper/$DM" "$MNT" || bail "mount"
F=$MNT/re.safetensors
make_table "$F" $ROWS --seed 24 || bail "mktable"
sync
BLK=$(stat -f -c %S "$MNT")

# phys_sector LOGICAL_BLOCK: the device sector holding that block of $F,
# from filefrag's extent list (in file system blocks).
phys_sector() {
	filefrag -v "$F" | awk -v l="$1" -v bs="$BLK" '
		$1 ~ /^[0-9]+:$/ {
			# "N: LSTART.. LEND: PSTART.. PEND: LEN: ...", however padded
			line = $0
			gsub(/[.:]+/, " ", line)
			split(line, f, " ")
			if (l >= f[2] && l <= f[3]) { print (f[4] + l - f[2]) * bs / 512; exit }
		}'
}

# bad_load LABEL BYTE: make the file's block at BYTE fail, then load; the
# load must fail at that block and leave nothing behind.
bad_load() {
	local label=$1 byte=$2 lblk sec out rc off lo hi
	lblk=$((byte / BLK))
	sec=$(phys_sector $lblk)
	[ -n "$sec" ] || { nok "$label: block $lblk of the file is on the device"; return; }
	check "$label: the device fails the file's block at byte $byte, none of it cached" \
		swap "$sec" $((BLK / 512))
	pinned0=$(stat_global pinned_bytes)
	failed0=$(stat_global loads_failed)
	out=$(timeout 120 "$ENGRAMCTL" load "$F" --tensor $PREFIX --name re 2>&1)
	rc=$?
	diag "$out"
	check "$label: the load fails (exit $rc)" test $rc -ne 0
	check "$label: with EIO and the offset" \
		grep -q "Input/output error: read error at offset [0-9]*" <<<"$out"
	off=$(sed -n 's/.*read error at offset \([0-9]*\).*/\1/p' <<<"$out" | head -n1)
	# A large folio starts at or before the bad block; a folio is at most
	# 2 MiB on these file systems.
	lo=$((lblk * BLK > 2097152 ? lblk * BLK - 2097152 : 0))
	hi=$((lblk * BLK))
	check "$label: the offset ($off) is the bad block's or its folio's start" \
		test -n "$off" -a "${off:-0}" -ge $lo -a "${off:-0}" -le $hi
	check "$label: the failure is counted" \
		test "$(stat_global loads_failed)" -eq $((failed0 + 1))
	check "$label: no page stays pinned" test "$(stat_global pinned_bytes)" -eq "$pinned0"
	check "$label: the failed table is not left behind" test "$(table_state re)" = absent
	check "$label: the file is writable again" writable "$F"
	check "$label: the kernel log is clean" kmsg_clean
}

module_loaded || module_load || bail "insmod"
G=$SCRATCH/good.safetensors
make_table "$G" 2000 --seed 25 || bail "mktable good"

bad_load "mid-file" $((ROWS * 264 / 2))
check "mid-file: after the failure another table loads" \
	sh -c "timeout 120 '$ENGRAMCTL' load '$G' --tensor $PREFIX --name good >/dev/null 2>&1"
check "mid-file: and verifies" sh -c "'$ENGRAMCTL' verify good >/dev/null 2>&1"
"$ENGRAMCTL" unload good >/dev/null 2>&1
bad_load "second page" 4096

check "the device is whole again" swap whole
out=$(timeout 120 "$ENGRAMCTL" load "$F" --tensor $PREFIX --name re 2>&1)
rc=$?
check "the same file loads now (exit $rc)" test $rc -eq 0 -a "$(table_state re)" = ready
check "and verifies" sh -c "'$ENGRAMCTL' verify re >/dev/null 2>&1"
check "its pages are pinned" test "$(stat_global pinned_bytes)" -ge $((ROWS * 264))
check "the file is write-denied while loaded" write_denied "$F"
check "it unloads" sh -c "'$ENGRAMCTL' unload re >/dev/null 2>&1"
check "no page stays pinned" test "$(stat_global pinned_bytes)" -eq 0
done_testing
