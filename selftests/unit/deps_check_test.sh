#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# selftests/deps-check.sh's comparison on made-up records of a machine: it
# passes a machine deps.sh only added bookworm's build tools to (and pulled
# a library to another bookworm version), and fails one where a kernel,
# kernel headers, linux-libc-dev, a backported package, a removal, or a
# file added under /boot or /lib/modules came in.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dc=$here/../deps-check.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 failed=0

cat > "$tmp/before" <<'EOR'
pkg bash 5.2.15-2+b7
pkg linux-libc-dev 6.1.158-1
pkg linux-perf 6.1.158-1
fs /boot d 4096 
fs /boot/vmlinuz-6.1.0-40-amd64 f 8000000 
fs /lib/modules/6.1.0-40-amd64 d
fs /usr/src/linux-headers-6.1.0-40-amd64 d
EOR
# A good run: build tools added, nothing else changed.
{ cat "$tmp/before"; echo "pkg dkms 3.0.10-8+deb12u1"; echo "pkg sparse 0.6.4-3"; } |
	sort > "$tmp/good"

expect() {
	# expect pass|fail DESCRIPTION AFTER-FILE [PATTERN]: PATTERN must be
	# in the output of a failing comparison ("not ok ... PATTERN").
	local want=$1 desc=$2 after=$3 pat=${4:-} out rc
	out=$("$dc" compare "$tmp/before" "$after" 2>&1)
	rc=$?
	n=$((n + 1))
	if { [ "$want" = pass ] && [ $rc -eq 0 ]; } ||
	   { [ "$want" = fail ] && [ $rc -ne 0 ] && grep -q "^not ok .*$pat" <<<"$out"; }; then
		echo "ok $n - $desc"
	else
		failed=$((failed + 1))
		echo "not ok $n - $desc (exit $rc)"
		sed 's/^/#   /' <<<"$out"
	fi
}

expect pass "build tools added: passes" "$tmp/good"
sed 's/^pkg linux-libc-dev .*/pkg linux-libc-dev 6.12.57-1~bpo12+1/' "$tmp/good" > "$tmp/a"
expect fail "linux-libc-dev upgraded: fails" "$tmp/a" "linux-libc-dev"
sed 's/^pkg bash .*/pkg bash 5.2.15-2+b8/' "$tmp/good" > "$tmp/a"
expect pass "a library pulled to another bookworm version: passes (listed)" "$tmp/a"
sed 's|^fs /boot/vmlinuz-6.1.0-40-amd64 f 8000000 |fs /boot/vmlinuz-6.1.0-40-amd64 f 8100000 |' "$tmp/good" > "$tmp/a"
expect pass "a file in /boot rewritten in place (an initrd's trigger): passes" "$tmp/a"
grep -v '^pkg linux-perf ' "$tmp/good" > "$tmp/a"
expect fail "a package removed: fails" "$tmp/a" "removed"
{ cat "$tmp/good"; echo "pkg linux-image-6.12.57+deb12-amd64 6.12.57-1~bpo12+1"; } > "$tmp/a"
expect fail "a kernel image installed: fails" "$tmp/a" "kernel"
{ cat "$tmp/good"; echo "pkg linux-headers-6.1.0-40-common 6.1.158-1"; } > "$tmp/a"
expect fail "kernel headers installed: fails" "$tmp/a" "kernel headers"
{ cat "$tmp/good"; echo "pkg python3-foo 1.0-1~bpo12+1"; } > "$tmp/a"
expect fail "a backported package installed: fails" "$tmp/a" "backports"
{ cat "$tmp/good"; echo "fs /boot/vmlinuz-6.12.57+deb12-amd64 f 9000000 "; } > "$tmp/a"
expect fail "a file added to /boot: fails" "$tmp/a" "/boot"
{ cat "$tmp/good"; echo "fs /lib/modules/6.12.57+deb12-amd64 d"; } > "$tmp/a"
expect fail "a directory added to /lib/modules: fails" "$tmp/a" "/lib/modules"
: > "$tmp/empty"
out=$("$dc" compare "$tmp/empty" "$tmp/good" 2>&1)
rc=$?
n=$((n + 1))
if [ $rc -ne 0 ] && grep -q '^not ok' <<<"$out"; then
	echo "ok $n - no record from before: fails"
else
	failed=$((failed + 1))
	echo "not ok $n - no record from before: fails"
fi
echo "1..$n"
echo "$((n - failed)) passed, $failed failed"
[ $failed -eq 0 ]
