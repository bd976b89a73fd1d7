#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Every allocation of the module on the paths a command takes, failed in
# turn (the debug kernel's failslab, as syzkaller drives it): for each
# operation, run it with /proc/self/fail-nth = 1, 2, 3, ... so that its
# first, second, third ... slab allocation made with a module function on
# the stack fails (failslab's stack filter is set to the module area, above
# the kernel's _etext: everything else the guest runs is built in), until
# a run meets no allocation to fail (with ENGRAM_FAILNTH_STRIDE=S, as make
# check sets it, every S-th from a random first).  Each failed allocation
# must end the command with an error (or be absorbed), never a hang or a
# splat, and
# leave the module working: after each operation's series, a fetch is
# exact and nothing of the failed attempts is left (tables, links,
# listeners).  The runner's kmemleak scan at the end of the run catches
# what a failed path leaked.
# Operations: table load, table verify, listen add (RDMA and TCP), listen
# allow add, link add (RDMA and TCP), a fetch through /dev/engram_rdma
# (open, REG_BUF, FETCH), the netlink dumps (list, stats, link list).
# Then the same with the page allocations failed in turn instead
# (fail_page_alloc): table load, link add (RDMA and TCP), listen add, a
# fetch.  And module init (insmod with an allow-list), its slab and then
# its page allocations.
# timeout: 900
# kernels: debug
# needs: the debug kernel (fault injection, KCOV)
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
FS=/sys/kernel/debug/failslab
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/failslab.safetensors
ROWS=20000
F2=$SCRATCH/failslab-small.safetensors	# the one loaded again and again
# fail-nth values per operation at most: above the most allocations one
# makes (a fetch of five ranges, submitted and waited for, made 58 in one
# run and more than 60 in another: a bound that tight fails the series).
NMAX=100
# make check takes every STRIDE-th allocation site, from a random first one
# (each site once in a few runs); a run of its own takes every one.
STRIDE=${ENGRAM_FAILNTH_STRIDE:-1}

if [ ! -w /proc/self/fail-nth ] || [ ! -d "$FS" ]; then
	ok "# SKIP this kernel has no failslab or fail-nth"
	done_testing
fi

make_table "$F" $ROWS --seed 68 || bail "mktable"
make_table "$F2" 64 --seed 69 || bail "mktable (small)"
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:18515" || bail "insmod with listen="
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name fs --no-progress >/dev/null 2>&1
check "the table loads" test "$(table_state fs)" = ready
WOFF=$(table_field fs weight_offset)
SOFF=$(table_field fs scale_offset)
FC=("$CHECK" --table fs --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS)
LINK=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP")
fetchable() { "${FC[@]}" --count 288 --batch 288 >/dev/null 2>&1; }
check "a link to it fetches exact rows" wait_for "$(slow 30)" fetchable

# Only allocations with a module function on the stack: the module area
# starts above the kernel's text.  Sleeping allocations fail too, and
# fail_page_alloc takes every order.
etext=$(awk '$3 == "_etext" { print $1; exit }' /proc/kallsyms)
[ -n "$etext" ] && [ "$etext" != 0000000000000000 ] || bail "no _etext in /proc/kallsyms"
cfg() { echo "$2" >"$1" || bail "cannot set $1 to $2"; }
FPA=/sys/kernel/debug/fail_page_alloc
ATTRS=$FS
[ ! -d $FPA ] || ATTRS="$FS $FPA"
for a in $ATTRS; do
	cfg $a/stacktrace-depth 32
	cfg $a/ignore-gfp-wait N
	cfg $a/probability 0
	cfg $a/verbose 0
done
if [ -d $FPA ]; then
	cfg $FPA/ignore-gfp-highmem N
	cfg $FPA/min-order 0
fi
# inject_into ATTR: fail-nth counts the allocations of ATTR (failslab or
# fail_page_alloc) only; "" for none.  fail-nth ignores "times", so only an
# empty stack range keeps the other attribute out.
inject_into() {
	local a

	for a in $ATTRS; do
		if [ "$a" = "$1" ]; then
			cfg $a/require-start "0x$etext"
			cfg $a/require-end 0xfffffffffffff000
			cfg $a/times 1000000000
		else
			cfg $a/require-start 1
			cfg $a/require-end 1
			cfg $a/times 0
		fi
	done
	INJ=$1
}
# How many failures ATTR has injected so far counts down in its "times".
injected() { cat $INJ/times; }
# Slab first: a failed page allocation prints a stack trace of its own,
# which the runner takes for a report unless the test says it expects it.
inject_into $FS

# series NAME SETUP OP CLEANUP: OP (a shell command) with fail-nth 1, 2, ...
# after SETUP, then CLEANUP, until OP meets no allocation to fail; OP must
# then succeed.  Every run is bounded; one that hangs fails the series.
series() {
	local name=$1 setup=$2 op=$3 cleanup=$4 n t0 t1 rc out fails=0 hangs=0 absorbed=0
	local stride=${SERIES_STRIDE:-$STRIDE}
	local last_rc=1 done_at=0 first=$((1 + RANDOM % ${SERIES_STRIDE:-$STRIDE}))

	for ((n = first; n <= ${SERIES_MAX:-$NMAX}; n += stride)); do
		eval "$setup" >/dev/null 2>&1
		t0=$(injected)
		out=$(timeout "$(slow 30)" sh -c "echo $n > /proc/self/fail-nth && exec $op" 2>&1)
		rc=$?
		t1=$(injected)
		eval "$cleanup" >/dev/null 2>&1
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			hangs=$((hangs + 1))
			diag "$name: fail-nth $n: timed out"
		fi
		if [ "$t0" -eq "$t1" ]; then
			done_at=$n last_rc=$rc
			break
		fi
		if [ "$rc" -eq 0 ]; then
			absorbed=$((absorbed + 1))
		else
			fails=$((fails + 1))
			[ $fails -gt 3 ] || diag "$name: fail-nth $n: exit $rc: $(head -c 200 <<<"$out")"
		fi
	done
	diag "$name: $((fails + absorbed)) of $((done_at - 1)) allocation sites failed (every $stride from $first): $fails errors, $absorbed absorbed"
	check "$name: every failed allocation ends in an error or is absorbed, none hangs" \
		test $hangs -eq 0
	check "$name: the series reaches a run with nothing to fail (fail-nth $done_at, at most ${SERIES_MAX:-$NMAX})" \
		test $done_at -gt 0
	[ "$stride" -gt 1 ] || check "$name: at least one allocation was failed" test $fails -gt 0 -o $absorbed -gt 0
	check "$name: ... which succeeds" test "$last_rc" -eq 0
	check "$name: afterwards ${AFTER_DESC:-a fetch is exact}" \
		wait_for "$(slow 30)" "${AFTER:-fetchable}"
}

# No python in the loops: it takes seconds to start on this kernel.
links_but_first() {
	"$ENGRAMCTL" link list | awk -v first="$LINK" \
		'$1 == "link" { id = $2; sub(/:$/, "", id); if (id != first) print id }'
}
del_links() { local i; for i in $(links_but_first); do "$ENGRAMCTL" link del "$i"; done; }
unload_fs2() { "$ENGRAMCTL" unload fs2; }

series "table load" unload_fs2 \
	"$ENGRAMCTL load $F2 --tensor $PREFIX --name fs2 --no-progress" unload_fs2
check "no second table is left" test "$(table_state fs2)" = absent
"$ENGRAMCTL" load "$F2" --tensor $PREFIX --name fs3 --no-progress >/dev/null 2>&1
series "table verify" : "$ENGRAMCTL verify fs3 --no-progress" :
series "listen add rdma" "" "$ENGRAMCTL listen add rdma://$IP:18668" \
	"$ENGRAMCTL listen del rdma://$IP:18668"
series "listen add tcp" "" "$ENGRAMCTL listen add tcp://$IP:18669" \
	"$ENGRAMCTL listen del tcp://$IP:18669"
check "no listener is left but the first" \
	test "$("$ENGRAMCTL" -j listen show | jget "len(d)")" = 1
series "listen allow add" "" "$ENGRAMCTL listen allow add 192.0.2.0/24" \
	"$ENGRAMCTL listen allow del 192.0.2.0/24"
# An allow-list emptied again refuses every peer (admin-guide.rst): let
# this guest's own links reconnect after a failure below breaks them.
"$ENGRAMCTL" listen allow add 192.0.2.0/24 >/dev/null 2>&1
# The first link has rdma://$IP:18515: a second link needs another server.
"$ENGRAMCTL" listen add "rdma://$IP:18516" >/dev/null 2>&1
series "link add rdma" del_links "$ENGRAMCTL link add rdma://$IP:18516@$IP" del_links
"$ENGRAMCTL" listen add "tcp://$IP:18670" >/dev/null 2>&1
series "link add tcp" del_links "$ENGRAMCTL link add tcp://$IP:18670@$IP" del_links
check "no link is left but the first" test -z "$(links_but_first)"
series "fetch through /dev/engram_rdma" "" "${FC[*]} --count 288 --batch 288,17" ""
series "fetch of five ranges, submit and wait" "" \
	"${FC[*]} --count 576 --batch 288 --ranges 5 --mode submit" ""
series "table list" "" "$ENGRAMCTL -j list" ""
series "stats" "" "$ENGRAMCTL -j stats" ""
series "link list" "" "$ENGRAMCTL -j link list" ""

inject_into ""

# Then the page allocations (fail_page_alloc, stack filter on the module as
# above, every order, sleeping allocations too): vmalloc'ed slot buffers,
# kvmalloc'ed row lists and frames, the table's page-cache reads, and what
# the RDMA core and rxe allocate for the module.  failslab gets the empty
# range (inject_into), so fail-nth counts page allocations only.  A failed page
# allocation without __GFP_NOWARN is reported by the allocator with a stack
# dump: the runner expects those in this test (selftests/splats.awk).
if [ -d $FPA ]; then
	: >"$ENGRAM_TEST_TMP/kmsg-alloc-failures-expected"
	inject_into $FPA
	series "pages: table load" unload_fs2 \
		"$ENGRAMCTL load $F2 --tensor $PREFIX --name fs2 --no-progress" unload_fs2
	check "pages: no second table is left" test "$(table_state fs2)" = absent
	series "pages: link add rdma" del_links "$ENGRAMCTL link add rdma://$IP:18516@$IP" del_links
	series "pages: link add tcp" del_links "$ENGRAMCTL link add tcp://$IP:18670@$IP" del_links
	check "pages: no link is left but the first" test -z "$(links_but_first)"
	series "pages: listen add tcp" "" "$ENGRAMCTL listen add tcp://$IP:18669" \
		"$ENGRAMCTL listen del tcp://$IP:18669"
	# A small fetch: in a large one, most page allocations are rxe's
	# packets (kmalloc slabs refilled on the poster's stack), and each
	# failed one costs a deadline, as a lost packet does.
	series "pages: fetch of 288 rows" "" "${FC[*]} --count 288 --batch 288" ""
	inject_into ""
else
	ok "# SKIP pages: this kernel has no fail_page_alloc"
fi
check "the table is still there and ready" test "$(table_state fs)" = ready
check "the first link still fetches exact rows" "${FC[@]}" --count 2000 --batch 288,1000

# Last, the module's initialisation, with an allow-list from its
# parameters: a failed init must undo all it did (the runner's kmemleak
# scan sees what it did not), and the next insmod must work.  Listeners
# and links are left out: what creating them allocates is the series of
# listen add and link add above.  Even so, init makes more than 120 slab
# allocations with a module function on the stack (registering the
# character device, the netlink family and the RDMA client, whose add()
# sets up each device): failed ten strides apart, up to the 1,000th.
PARAMS="allow=192.0.2.0/24"
loaded_up() { module_loaded && [ -e /dev/engram_rdma ]; }
MOD_MAX=1000
MOD_STRIDE=$((STRIDE * 10))
for a in $ATTRS; do
	inject_into "$a"
	what=slab
	[ "$a" = "$FS" ] || what=pages
	SERIES_MAX=$MOD_MAX SERIES_STRIDE=$MOD_STRIDE AFTER=loaded_up AFTER_DESC="the module is loaded" \
		series "module load ($what)" module_unload "insmod $MODULE $PARAMS" :
done
inject_into ""
module_unload
module_load "listen=rdma://$IP:18515" "allow=192.0.2.0/24" || bail "insmod"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name fs --no-progress >/dev/null 2>&1
LINK=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP")
check "after the failed inits, a table and a link fetch exact rows" \
	wait_for "$(slow 30)" fetchable
done_testing
