#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The Debian packages (selftests/deb-check.sh builds them into build/deb)
# installed in the guest: in a root that is the machine's seen through an
# overlay (its changes go to the scratch disk), with only this guest's
# kernel in /lib/modules and its headers as /lib/modules/RELEASE/build,
# dpkg -i of all five; the DKMS package's postinst installs engram_rdma
# for the running kernel: from the prebuilt DKMS tarball that
# selftests/dkms-check.sh --tarball made of this version for this kernel,
# put where the postinst loads one (/usr/share/engram-rdma-dkms), or built
# here when there is none; modprobe loads that copy; the installed unit's
# ExecStart loads the table tables.conf lists, engramctl from the package
# links to it, and a fetch from Python through
# the installed python3-engram-rdma and libengram0 is exact; the group
# engram exists.  Then the upgrade of all five to the next version
# (deb-check.sh builds them into build/deb/next) under a fetch loop, which
# must see no failure: DKMS loads the next version's module from its
# prebuilt tarball (dkms-check.sh --next-tree made it; without one, as in
# make check-packages, DKMS builds it here under TCG) and installs it
# beside the running one, which keeps its version, its table,
# its generation and its link; dpkg -r and dpkg -P take everything away
# again.
# dpkg under TCG takes most of the guest's two CPUs: a run of the whole
# suite skips it; make check runs it in a guest of its own, as make
# check-packages does (on 6.12).
# timeout: 1500
# kernels: none
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
PORT=18585
DEBS=$TOP/build/deb
S=$ENGRAM_TEST_TMP
R=$S/root
REL=$(uname -r)
VER=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$TOP/dkms.conf")
KDIR=""
for k in 6.12 6.1 5.10 7.2 debug; do
	[ "$("$TOP/selftests/vm/kernels.sh" release $k 2>/dev/null)" = "$REL" ] || continue
	KDIR=$("$TOP/selftests/vm/kernels.sh" builddir $k)
	break
done
F=$S/pkg.safetensors
ROWS=20000

ls "$DEBS"/*_"$VER"_*.deb >/dev/null 2>&1 || bail "no packages in $DEBS (selftests/deb-check.sh)"
[ -n "$KDIR" ] && [ -d "$KDIR" ] || bail "no headers for $REL"
make_table "$F" $ROWS --seed 85 || bail "mktable"

# --- the root to install into ------------------------------------------------
mkdir -p "$S/up" "$S/work" "$R"
mount -t overlay overlay -o "lowerdir=/,upperdir=$S/up,workdir=$S/work" "$R" ||
	bail "overlay over the root"
DKMS_LOADED=0
cleanup() {
	# Whatever failed: the harness's module back for the tests after this one.
	if [ $DKMS_LOADED -eq 1 ]; then
		rmmod engram_rdma 2>/dev/null
		module_loaded || module_load
	fi
	rm -rf /tmp/debs /tmp/debs-next
	for m in $(awk -v r="$R" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null
	done
}
trap cleanup EXIT
for d in proc sys dev dev/pts run; do
	mkdir -p "$R/$d" && mount --bind "/$d" "$R/$d" || bail "bind /$d"
done
# With the scratch disk under it, where the table and this test's files are.
mount --rbind /tmp "$R/tmp" || bail "bind /tmp"
# man-db's trigger would index every manual page of the machine, for
# minutes under TCG: not what this test is about.
rm -f "$R/var/lib/man-db/auto-update"
# Only the guest's kernel, as on a machine that runs it: dkms builds for
# it.  Of its modules, only those engram_rdma needs, at their own paths, as
# the kernel's modules.dep lists them: depmod reads every module it finds,
# and the 4,228 of Debian's 6.12 kernel, xz-compressed, take it 80 s under TCG
# each time this test, dkms install and dkms remove run it.
mount -t tmpfs -o mode=0755 tmpfs "$R/lib/modules" || bail "tmpfs on lib/modules"
mkdir -p "$R/lib/modules/$REL"
need=""
for m in $(modinfo -F depends "$MODULE" | tr , ' '); do
	line=$(grep -E "(^|/)${m//_/[-_]}\.ko(\.[a-z]+)?:" "/lib/modules/$REL/modules.dep") ||
		bail "$m (a dependency of engram_rdma) is not in the kernel's modules.dep"
	need="$need ${line/:/}"
done
[ -n "$need" ] || bail "modinfo lists no dependency of $MODULE"
need=$(printf '%s\n' $need | sort -u)
for p in $need; do
	mkdir -p "$R/lib/modules/$REL/${p%/*}" &&
		cp "/lib/modules/$REL/$p" "$R/lib/modules/$REL/$p" || bail "copy $p"
done
diag "modules in the root: $(echo $need | sed 's|[^ ]*/||g')"
for f in modules.order modules.builtin modules.builtin.modinfo; do
	cp "/lib/modules/$REL/$f" "$R/lib/modules/$REL/" 2>/dev/null
done
ln -s "$KDIR" "$R/lib/modules/$REL/build"
in_root() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
# installed VERSION PACKAGE...: a check each that dpkg has it at VERSION.
installed() {
	local v=$1 p

	shift
	for p in "$@"; do
		check "$p $v installed" \
			test "$(in_root dpkg-query -W -f '${Status} ${Version}' "$p" 2>/dev/null)" = "install ok installed $v"
	done
}
t0=$SECONDS
in_root depmod "$REL" || bail "depmod"
diag "depmod: $((SECONDS - t0)) s"

# --- install ---------------------------------------------------------------------
PKGS="engram-rdma-dkms engramctl libengram0 libengram-dev python3-engram-rdma"
mkdir -p "$R/tmp/debs"
for p in $PKGS; do
	cp "$DEBS/${p}_${VER}"_*.deb "$R/tmp/debs/" || bail "no $p package"
done
# The module built for this kernel by dkms-check.sh, as a distribution
# ships a prebuilt one: the postinst loads it instead of building.
TB=$TOP/build/dkms-tarball/6.12/engram-rdma-$VER.dkms.tar.gz
PREBUILT=0
if [ "$("$TOP/selftests/vm/kernels.sh" release 6.12 2>/dev/null)" = "$REL" ] && [ -s "$TB" ]; then
	mkdir -p "$R/usr/share/engram-rdma-dkms" && cp "$TB" "$R/usr/share/engram-rdma-dkms/" &&
		PREBUILT=1
fi
t0=$SECONDS
out=$(in_root sh -c 'DEBIAN_FRONTEND=noninteractive dpkg -i /tmp/debs/*.deb' 2>&1)
rc=$?
echo "$out" | grep -Ei 'dkms|error|warn|Setting up|Building|Installing|tarball' | sed 's/^/# dpkg| /'
check "dpkg -i of the five packages ($((SECONDS - t0)) s)" test $rc -eq 0
installed "$VER" $PKGS
check "dkms installed engram-rdma/$VER for $REL" \
	sh -c "chroot '$R' dkms status engram-rdma/$VER -k $REL | grep -q installed"
if [ $PREBUILT -eq 1 ]; then
	check "from the prebuilt tarball: nothing was built here" \
		test -z "$(grep 'Building initial module' <<<"$out")"
	check "... and DKMS loaded its module ($VER, for $REL)" \
		grep -q "Loading /var/lib/dkms/engram-rdma/$VER/$REL/" <<<"$out"
	# Not the package's: dpkg -r would leave its directory behind.
	rm -f "$R/usr/share/engram-rdma-dkms/engram-rdma-$VER.dkms.tar.gz"
else
	diag "no prebuilt DKMS tarball ($TB): the module was built here"
fi
ko=$(ls "$R/lib/modules/$REL/updates/dkms/engram_rdma.ko"* 2>/dev/null | head -n1)
check "the module is in /lib/modules/$REL/updates/dkms" test -n "$ko"
check "its vermagic is $REL" test "$(modinfo -F vermagic "$ko" 2>/dev/null | cut -d' ' -f1)" = "$REL"
check "the group engram exists" in_root getent group engram
check "the udev rule is installed" test -f "$R/usr/lib/udev/rules.d/60-engram-rdma.rules"

# --- the installed module, tool and library ------------------------------------------
module_unload || bail "rmmod the harness's module"
DKMS_LOADED=1
out=$(in_root modprobe -v engram_rdma 2>&1)
rc=$?
diag "modprobe: $out"
check "modprobe engram_rdma loads the DKMS copy (updates/dkms)" \
	test $rc -eq 0 -a -n "$(grep "insmod /lib/modules/$REL/updates/dkms/engram_rdma.ko" <<<"$out")"
check "the loaded module is $VER" test "$(cat /sys/module/engram_rdma/version 2>/dev/null)" = "$VER"
ctl() { in_root /usr/sbin/engramctl "$@"; }
check "engramctl $VER from the package" test "$(ctl -V | awk '{ print $2 }')" = "$VER"
# As the installed unit loads tables at boot: its ExecStart= (this guest's
# init is not systemd; selftests/vm/run-systemd.sh boots one) over the
# tables file an administrator writes.
printf 'pkg %s %s %s\n' "$F" "$PREFIX" "$(sha256sum "$F" | cut -d' ' -f1)" \
	>"$R/etc/engram-rdma/tables.conf"
start=$(sed -n 's/^ExecStart=//p' "$R/lib/systemd/system/engram-rdma-tables.service")
# shellcheck disable=SC2086
out=$(in_root $start 2>&1)
diag "ExecStart=$start: $out"
check "the unit's ExecStart loads the table tables.conf lists" \
	test "$(ctl show pkg | awk '$1 == "state" { print $2 }')" = ready
ctl listen add "rdma://$IP:$PORT" >/dev/null || nok "listen add"
ID=$(ctl link add "rdma://$IP:$PORT@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
up() { [ "$(ctl -j link show "$ID" | jget "d[0]['state']")" = up ]; }
check "the link comes up" wait_for 30 up
WOFF=$(ctl -j list | jget "[t for t in d if t['name'] == 'pkg'][0]['weight_offset']")
SOFF=$(ctl -j list | jget "[t for t in d if t['name'] == 'pkg'][0]['scale_offset']")
# The example, copied out of the tree: it imports the installed package.
cp "$TOP/tools/python/example.py" "$S/example.py"
out=$(in_root python3 -c 'import engram_rdma, sys
lib = engram_rdma.load_library()
print(engram_rdma.__file__, lib._name, engram_rdma.__version__)' 2>&1)
diag "python3: $out"
check "python3 imports the installed package and libengram.so.0" \
	grep -q "^/usr/lib/python3/dist-packages/engram_rdma/__init__.py .*libengram.so.0 $VER\$" <<<"$out"
out=$(in_root python3 "$S/example.py" --table pkg --file "$F" \
	--weight-offset "$WOFF" --scale-offset "$SOFF" --link "$ID" --count 2000 2>&1)
rc=$?
echo "$out" | sed 's/^/# example| /'
check "a fetch from Python through the installed packages is exact" test $rc -eq 0

# --- upgrade, while serving --------------------------------------------------------------
# dpkg -i of the next version of all five (deb-check.sh builds them) while
# a loop fetches through the installed library with no fallback
# (--required): the old packages' prerm and the new ones' postinst run
# under it, DKMS removes the old version's module file and installs the
# new one (from its prebuilt tarball when dkms-check.sh made one, else
# built here under TCG: ten minutes), and the library is replaced under
# running processes.  The running module,
# its table and its link must not notice.
NEXT=$(awk -F. '{ printf "%d.%d.%d", $1, $2, $3 + 1 }' <<<"$VER")
UPKGS="engram-rdma-dkms engramctl libengram0 libengram-dev python3-engram-rdma"
mkdir -p "$R/tmp/debs-next"
for p in $UPKGS; do
	cp "$DEBS/next/${p}_${NEXT}"_*.deb "$R/tmp/debs-next/" || bail "no $p $NEXT package"
done
gen0=$(ctl -j list | jget "[t for t in d if t['name'] == 'pkg'][0]['generation']")
conn0=$(ctl -j link show "$ID" | jget "d[0]['connects']")
errs0=$(ctl -j stats | jget "d['global']['fetch_errors'] + d['global']['fallbacks']")
loop() {
	local n=0 bad=0 end=$((SECONDS + 900))

	while [ -e "$S/upgrading" ] && [ $SECONDS -lt $end ] && [ $n -lt 2000 ]; do
		in_root timeout 120 python3 "$S/example.py" --table pkg --file "$F" --required \
			--weight-offset "$WOFF" --scale-offset "$SOFF" --link "$ID" --count 1000 \
			--seed $n >/dev/null 2>"$S/loop.err" || bad=$((bad + 1))
		n=$((n + 1))
		# A run every few seconds: the rest of the CPUs are dpkg's
		# (and DKMS's build, when there is no prebuilt tarball).
		sleep 2
	done
	echo "$n $bad" >"$S/loop.out"
}
NTB=$(dirname "$TB")/engram-rdma-$NEXT.dkms.tar.gz
NEXT_PREBUILT=0
if [ $PREBUILT -eq 1 ] && [ -s "$NTB" ]; then
	cp "$NTB" "$R/usr/share/engram-rdma-dkms/" && NEXT_PREBUILT=1
fi
touch "$S/upgrading"
loop &
lpid=$!
t0=$SECONDS
out=$(in_root sh -c 'DEBIAN_FRONTEND=noninteractive dpkg -i /tmp/debs-next/*.deb' 2>&1)
rc=$?
secs=$((SECONDS - t0))
rm -f "$S/upgrading"
wait $lpid
read -r runs bad <"$S/loop.out" 2>/dev/null
echo "$out" | grep -Ei 'dkms|error|warn|Setting up|Unpacking|Building|Installing|Removing' |
	sed 's/^/# dpkg| /'
check "dpkg -i of the five $NEXT packages over $VER ($secs s)" test $rc -eq 0
installed "$NEXT" $UPKGS
next_installed() {
	in_root dkms status "engram-rdma/$NEXT" -k "$REL" | grep -q installed || return 1
	if [ $NEXT_PREBUILT -eq 1 ]; then
		! grep -q "Building initial module" <<<"$out" &&
			grep -q "Loading /var/lib/dkms/engram-rdma/$NEXT/$REL/" <<<"$out"
	else
		grep -q "Building initial module for $REL" <<<"$out"
	fi
}
if [ $NEXT_PREBUILT -eq 1 ]; then
	check "dkms installed engram-rdma/$NEXT for $REL from its prebuilt tarball, building nothing" \
		next_installed
	rm -f "$R/usr/share/engram-rdma-dkms/engram-rdma-$NEXT.dkms.tar.gz"
else
	check "dkms built engram-rdma/$NEXT here and installed it for $REL" next_installed
fi
check "engram-rdma/$VER is gone from dkms" \
	test -z "$(in_root dkms status engram-rdma/$VER 2>/dev/null)"
ko=$(ls "$R/lib/modules/$REL/updates/dkms/engram_rdma.ko"* 2>/dev/null | head -n1)
check "the module file is $NEXT ($(modinfo -F version "$ko" 2>/dev/null)), for modprobe's next load" \
	test "$(modinfo -F version "$ko" 2>/dev/null)" = "$NEXT"
check "the running module is still $VER" \
	test "$(cat /sys/module/engram_rdma/version 2>/dev/null)" = "$VER"
check "the table is still ready, its generation unchanged" \
	test "$(ctl -j list | jget "[t['state'] + ' ' + str(t['generation']) for t in d if t['name'] == 'pkg'][0]")" = "ready $gen0"
check "the link never reconnected ($conn0 connects before, state up)" \
	test "$(ctl -j link show "$ID" | jget "d[0]['state'] + ' ' + str(d[0]['connects'])")" = "up $conn0"
diag "fetch loop during the upgrade: ${runs:-?} runs of 1,000 rows, ${bad:-?} failed"
[ "${bad:-1}" = 0 ] || sed 's/^/# loop| /' "$S/loop.err"
check "every fetch during the upgrade was exact and remote (${runs:-0} runs, ${bad:-?} failed)" \
	test "${runs:-0}" -ge 1 -a "${bad:-1}" = 0
check "no fetch error or fallback counted by the module" \
	test "$(ctl -j stats | jget "d['global']['fetch_errors'] + d['global']['fallbacks']")" = "$errs0"
check "engramctl $NEXT talks to the running $VER module" \
	test "$(ctl -V | awk '{ print $2 }'):$(ctl show pkg | awk '$1 == "state" { print $2 }')" = "$NEXT:ready"
ctl link del "$ID" >/dev/null
ctl listen del "rdma://$IP:$PORT" >/dev/null
ctl unload pkg >/dev/null

# --- removal ---------------------------------------------------------------------------
rmmod engram_rdma
DKMS_LOADED=0
# The harness's own module back, for the tests after this one.
module_load || nok "insmod the harness's module again"
check "dpkg -r of the DKMS package" in_root dpkg -r engram-rdma-dkms
check "takes the module out of /lib/modules/$REL" \
	test -z "$(ls "$R/lib/modules/$REL/updates/dkms/engram_rdma.ko"* 2>/dev/null)"
check "and its sources out of /usr/src" \
	test ! -e "$R/usr/src/engram-rdma-$VER" -a ! -e "$R/usr/src/engram-rdma-$NEXT"
find "$R/usr/src" -maxdepth 3 -path "*engram*" 2>/dev/null | head -n 20 | sed 's/^/# left in \/usr\/src: /'
check "dpkg -r of the other four" \
	in_root dpkg -r python3-engram-rdma libengram-dev libengram0 engramctl
check "leaves no program or library" \
	test ! -e "$R/usr/sbin/engramctl" -a -z "$(ls "$R"/usr/lib/*/libengram.so* 2>/dev/null)" \
	-a ! -e "$R/usr/lib/python3/dist-packages/engram_rdma"
check "but the configuration (conffiles) until a purge" \
	test -e "$R/etc/modprobe.d/engram_rdma.conf"
check "dpkg -P of the five" in_root dpkg -P $PKGS
# tables.conf is the administrator's, not the package's: dpkg leaves it.
check "leaves nothing under /etc but the group engram and the administrator's tables.conf" \
	test ! -e "$R/etc/modprobe.d/engram_rdma.conf" \
	-a "$(ls -A "$R/etc/engram-rdma" 2>&1)" = tables.conf \
	-a ! -e "$R/etc/modules-load.d/engram_rdma.conf"
diag "left after the purge: group $(in_root getent group engram || echo none)"
check "the kernel log is clean" kmsg_clean
done_testing
