#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The Spark guest of the two-guest test (selftests/vm/run-pair.sh): builds
# the same table file as the host guest (the generator is deterministic),
# opens the host's table by that file's SHA-256, fetches rows over the
# guest-to-guest link and compares every byte with its own copy.  First,
# the host guest's allow-list leaves this guest out: its link must be
# refused until the host lets it in, and then come up on its own.
. "$(dirname "$0")/lib.sh"

SIGNAL_PORT=18601
link_field() { "$ENGRAMCTL" -j link show 1 | jget "str(d[0].get('$1', ''))"; }
refused_now() {
	[ "$(link_field state)" != up ] && [ "$(link_field error_str)" = "Connection refused" ]
}
# The host guest keeps this guest off until told that we saw it (bounded).
seen=timeout
end=$((SECONDS + 300))
for _ in $(seq 1 1500); do
	if refused_now; then
		seen=refused
		break
	fi
	[ $SECONDS -lt $end ] || break
	sleep 0.2
done
check "the link is refused while not on the host's allow-list (state $(link_field state), error '$(link_field error_str)')" \
	test $seen = refused
check "tell the host guest ($seen)" timeout 90 python3 - "$SIGNAL_PORT" "$seen" <<'PY'
import socket, sys, time
for _ in range(80):
    try:
        c = socket.create_connection(("192.0.2.1", int(sys.argv[1])), timeout=5)
        c.sendall((sys.argv[2] + "\n").encode())
        c.close()
        sys.exit(0)
    except OSError:
        time.sleep(1)
sys.exit(1)
PY

F=$SCRATCH/pair.safetensors
ROWS=400000
make_table "$F" $ROWS --seed 41 --pad-before 7 --pad-after 3 || bail "mktable"
sha=$(sha256sum "$F" | cut -d' ' -f1)
read -r WOFF SOFF < <(tensor_offsets "$F")
FC=("$TOP/selftests/guest/fetch_check" --sha256 "$sha" --file "$F" --weight-offset "$WOFF"
	--scale-offset "$SOFF" --rows-total $ROWS --timeout-ms 60000)
fetchable() {
	local i
	for i in $(seq 1 "$1"); do
		"${FC[@]}" --count 1 >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}
run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }

check "the link to the host guest comes up with the table (by SHA-256)" fetchable 300
"$ENGRAMCTL" link show | sed 's/^/# /'
check "200,000 rows in batches of 288 and 49,152 across guests are exact" \
	run --count 200000 --batch 288,49152 --seed 1
check "two processes at once, exact" run --count 50000 --batch 4096 --procs 2 --seed 2
check "a row past the end is refused with ERANGE, then a fetch works" \
	run --rows-list 1,$ROWS --expect-errno ERANGE --verify-after --count 2000
check "rmmod with the link up" module_unload
done_testing
