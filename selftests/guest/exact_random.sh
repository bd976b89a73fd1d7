#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The randomized exactness checker (issue 37), in one guest that is host
# and GPU node at once (an RDMA and a TCP listener, a link to each):
#
#   exact_random.sh SEED SECONDS [FETCHERS]
#
# A schedule drawn from SEED (bash's RANDOM, seeded: the same seed replays
# the same schedule) runs for SECONDS: it loads a name with a table drawn
# from three files (two of them hold two tables each, so a digest names
# more than one table), as a whole table or as a shard of a drawn row
# range; unloads a name; reloads a name with another table or another
# file; deletes a link and adds it again; and makes a verify find the
# pinned bytes changed (fault_verify_mismatch), which stops that table.
# Beside it FETCHERS loops (3) open tables by name, by digest or by both,
# on no link or on a named link, and fetch for a second or two with
# fetch_check --identity: whatever an open returns is checked, row by row,
# against the file of the digest it reports at the tensor offsets it
# reports, by the checker's own reading of the files; a handle whose
# table is gone must fail (tolerated), and a re-open is checked against
# what it then returns.  A fetch may fail with a clear error; it may never
# return a wrong byte, nor write after it returned.
#
# Prints each operation, then
#   exact: seed S ops N fetch_runs N opens N rows N bad N errors N late N
#   exact: open errors by kind: ...
#   exact: fetch errors by kind: ...
# and exits 0 only with bad 0, late 0 and no open of an unknown table.
. "$(dirname "$0")/lib.sh"

SEED=${1:?seed}
SECS=${2:?seconds}
NF=${3:-3}
IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
P=/sys/module/engram_rdma/parameters
LA=rdma://$IP:18761
LT=tcp://$IP:18762
W=${ENGRAM_TEST_TMP:-$SCRATCH/exact-run}/exact
mkdir -p "$W"
RANDOM=$SEED

make_table "$SCRATCH/exact-a.safetensors" 40000 --seed 761 --prefix layers.1.engram.embed \
	--prefix layers.14.engram.embed --pad-before 77 || exit 2
make_table "$SCRATCH/exact-b.safetensors" 30000 --seed 762 --prefix layers.1.engram.embed \
	--prefix layers.14.engram.embed --pad-before 4000 || exit 2
make_table "$SCRATCH/exact-c.safetensors" 50000 --seed 763 --prefix layers.1.engram.embed || exit 2
FILES=("$SCRATCH/exact-a.safetensors" "$SCRATCH/exact-b.safetensors" "$SCRATCH/exact-c.safetensors")
ROWS=(40000 30000 50000)
IDS=()
SUMS=()
for f in "${FILES[@]}"; do
	s=$(sha256sum "$f" | cut -d' ' -f1)
	SUMS+=("$s")
	IDS+=(--identity "$s:$f")
done
# The tables: file index and tensor prefix.
TABLES=("0 layers.1.engram.embed" "0 layers.14.engram.embed" "1 layers.1.engram.embed"
	"1 layers.14.engram.embed" "2 layers.1.engram.embed")
NAMES=(x0 x1 x2 x3)

module_unload || exit 2
module_load "listen=$LA,$LT" "remote=$LA@$IP,$LT@$IP" heartbeat_ms=300 reconnect_max_ms=1000 ||
	exit 2
echo "exact: seed $SEED, $SECS s, $NF fetchers"
end=$((SECONDS + SECS))

# --- the fetchers: each run's seed is drawn here, so the schedule of opens replays too
fetcher() {
	local k=$1 rnd=$2 n=0 how link batch out ls
	RANDOM=$rnd
	while [ $SECONDS -lt "$end" ]; do
		n=$((n + 1))
		case $((RANDOM % 3)) in
		0) how=(--table "${NAMES[RANDOM % ${#NAMES[@]}]}") ;;
		1) how=(--sha256 "${SUMS[RANDOM % ${#SUMS[@]}]}") ;;
		*) how=(--table "${NAMES[RANDOM % ${#NAMES[@]}]}" --sha256 "${SUMS[RANDOM % ${#SUMS[@]}]}") ;;
		esac
		link=0
		if [ $((RANDOM % 4)) -eq 0 ] && read -ra ls <"$W/links" && [ ${#ls[@]} -gt 0 ]; then
			link=${ls[RANDOM % ${#ls[@]}]}
		fi
		batch=$(printf '%s\n' 1 288 288 4096 | sed -n "$((RANDOM % 4 + 1))p")
		out=$("$CHECK" "${how[@]}" --link "${link:-0}" "${IDS[@]}" --count 100000000 \
			--batch "$batch" --timeout-ms 3000 --tolerate --settle-ms 200 \
			--duration-s $((RANDOM % 2 + 1)) --seed $RANDOM 2>&1)
		echo "$out" | sed "s/^/f$k.$n: /" >>"$W/fetch.log"
	done
}
for k in $(seq 1 "$NF"); do
	fetcher "$k" $RANDOM &
done

# --- the schedule
links() { "$ENGRAMCTL" -j link list | jget "' '.join(str(l['id']) for l in d)" >"$W/links.tmp" && mv "$W/links.tmp" "$W/links"; }
links
ops=0
op() { ops=$((ops + 1)); echo "exact: op $ops at $((SECS - end + SECONDS)) s: $*"; "$@" >/dev/null 2>&1; }
while [ $SECONDS -lt "$end" ]; do
	name=${NAMES[RANDOM % ${#NAMES[@]}]}
	read -r fi tensor <<<"${TABLES[RANDOM % ${#TABLES[@]}]}"
	case $((RANDOM % 10)) in
	0 | 1 | 2)
		op "$ENGRAMCTL" unload "$name"
		op "$ENGRAMCTL" load "${FILES[fi]}" --tensor "$tensor" --name "$name" --no-progress ;;
	3)
		r=${ROWS[fi]}
		a=$(((RANDOM * 32768 + RANDOM) % r))
		b=$(((RANDOM * 32768 + RANDOM) % r))
		[ "$a" -le "$b" ] || { t=$a; a=$b; b=$t; }
		op "$ENGRAMCTL" unload "$name"
		op "$ENGRAMCTL" load "${FILES[fi]}" --tensor "$tensor" --name "$name" --rows "$a-$b" --no-progress ;;
	4 | 5)
		op "$ENGRAMCTL" unload "$name" ;;
	6)
		id=$(tr ' ' '\n' <"$W/links" | sed -n "$((RANDOM % 2 + 1))p")
		url=$("$ENGRAMCTL" -j link list | jget "next((l['url'] for l in d if l['id'] == ${id:-0}), '')")
		if [ -n "$url" ]; then
			op "$ENGRAMCTL" link del "$id"
			op "$ENGRAMCTL" link add "$url"
			links
		fi ;;
	7)
		echo 1 >$P/fault_verify_mismatch
		op "$ENGRAMCTL" verify "$name"
		echo 0 >$P/fault_verify_mismatch ;;
	*)
		op sleep 0.$((RANDOM % 9 + 1)) ;;
	esac
	sleep 0.$((RANDOM % 5))
done
wait

# --- the figures
runs=$(grep -c ': fetch_check: rows ' "$W/fetch.log")
sum() { sed -n "s/.*: fetch_check: $1 \([0-9]*\).*/\1/p" "$W/fetch.log" | awk '{ s += $1 } END { print s + 0 }'; }
rows=$(sed -n 's/.*: fetch_check: rows \([0-9]*\) .*/\1/p' "$W/fetch.log" | awk '{ s += $1 } END { print s + 0 }')
bad=$(sed -n 's/.* bad \([0-9]*\) errors.*/\1/p' "$W/fetch.log" | awk '{ s += $1 } END { print s + 0 }')
errors=$(sed -n 's/.* errors \([0-9]*\) p50.*/\1/p' "$W/fetch.log" | awk '{ s += $1 } END { print s + 0 }')
late=$(sed -n 's/.*: fetch_check: tolerated [0-9]* slow [0-9]* late \([0-9]*\).*/\1/p' "$W/fetch.log" | awk '{ s += $1 } END { print s + 0 }')
opens=$(sum identities)
unknown=$(grep -c 'no --identity says which bytes' "$W/fetch.log")
echo "exact: seed $SEED ops $ops fetch_runs $runs opens $opens rows $rows bad $bad errors $errors late $late unknown $unknown"
echo "exact: open errors by kind: $(sed -n 's/.*open_table: \([A-Z0-9]*\).*/\1/p' "$W/fetch.log" | sort | uniq -c | awk '{ printf "%s %s ", $2, $1 }')"
echo "exact: fetch errors by kind: $(sed -n 's/.*: fetch_check: tolerated by kind: //p' "$W/fetch.log" |
	awk '{ for (i = 1; i < NF; i += 2) s[$i] += $(i + 1) } END { for (k in s) printf "%s %d ", k, s[k] }')"
grep -E 'differs from the file|late write|changed after' "$W/fetch.log" | head -5 | sed 's/^/exact: /'
for n in "${NAMES[@]}"; do "$ENGRAMCTL" unload "$n" >/dev/null 2>&1; done
[ "$bad" = 0 ] && [ "$late" = 0 ] && [ "$unknown" = 0 ] && [ "$runs" -gt 0 ] && [ "$opens" -gt 0 ]
