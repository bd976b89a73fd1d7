# SPDX-License-Identifier: GPL-2.0
# The randomized exactness checker's parts (issue 37), sourced after
# lib.sh by exact_random.sh (one guest, host and GPU node at once) and by
# exact_host.sh and exact_spark.sh (three guests, selftests/vm/run-exact.sh).
# Every guest makes the same three files (make_table is seeded), so each
# checks rows by its own reading of them, and the hosts' tables of one
# identity are replicas or shards of each other.

# exact_setup DIR SEED: the files, their digests and the tables, and RANDOM
# seeded, so that the same SEED replays the same schedule.
exact_setup() {
	local f s

	W=$1
	mkdir -p "$W"
	: >"$W/fetch.log"
	make_table "$SCRATCH/exact-a.safetensors" 40000 --seed 761 \
		--prefix layers.1.engram.embed --prefix layers.14.engram.embed --pad-before 77 ||
		return 2
	make_table "$SCRATCH/exact-b.safetensors" 30000 --seed 762 \
		--prefix layers.1.engram.embed --prefix layers.14.engram.embed --pad-before 4000 ||
		return 2
	make_table "$SCRATCH/exact-c.safetensors" 50000 --seed 763 \
		--prefix layers.1.engram.embed || return 2
	FILES=("$SCRATCH/exact-a.safetensors" "$SCRATCH/exact-b.safetensors"
		"$SCRATCH/exact-c.safetensors")
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
	RANDOM=$2
}

# exact_links: the link ids, for the fetchers that pick a named link.
exact_links() {
	"$ENGRAMCTL" -j link list | jget "' '.join(str(l['id']) for l in d)" >"$W/links.tmp" &&
		mv "$W/links.tmp" "$W/links"
}

# exact_fetcher K SEED END: fetch until SECONDS reaches END, each run opening
# a table by name, digest or both, on no link or a named one, checked by
# fetch_check --identity against what the open reported.
exact_fetcher() {
	local k=$1 n=0 how link batch out ls end=$3

	RANDOM=$2
	while [ $SECONDS -lt "$end" ]; do
		n=$((n + 1))
		case $((RANDOM % 3)) in
		0) how=(--table "${NAMES[RANDOM % ${#NAMES[@]}]}") ;;
		1) how=(--sha256 "${SUMS[RANDOM % ${#SUMS[@]}]}") ;;
		*) how=(--table "${NAMES[RANDOM % ${#NAMES[@]}]}"
			--sha256 "${SUMS[RANDOM % ${#SUMS[@]}]}") ;;
		esac
		link=0
		if [ $((RANDOM % 4)) -eq 0 ] && read -ra ls <"$W/links" && [ ${#ls[@]} -gt 0 ]; then
			link=${ls[RANDOM % ${#ls[@]}]}
		fi
		batch=$(printf '%s\n' 1 288 288 4096 | sed -n "$((RANDOM % 4 + 1))p")
		out=$("$TOP/selftests/guest/fetch_check" "${how[@]}" --link "${link:-0}" "${IDS[@]}" \
			--count 100000000 --batch "$batch" --timeout-ms 3000 --tolerate --settle-ms 200 \
			--duration-s $((RANDOM % 2 + 1)) --seed $RANDOM 2>&1)
		echo "$out" | sed "s/^/f$k.$n: /" >>"$W/fetch.log"
	done
}

# exact_fetchers N END: N fetchers in the background, their seeds drawn here.
exact_fetchers() {
	local k

	for k in $(seq 1 "$1"); do
		exact_fetcher "$k" $RANDOM "$2" &
	done
}

EXACT_OPS=0
# exact_op COMMAND...: one operation of the schedule, printed, its outcome
# whatever it is (an unload of a name not loaded fails, and that is fine).
exact_op() {
	EXACT_OPS=$((EXACT_OPS + 1))
	echo "exact: op $EXACT_OPS at $SECONDS s: $*"
	"$@" >/dev/null 2>&1
}

# exact_table_op: one draw of the tables' schedule on this host: reload a
# name with another table or file, load a shard of a drawn row range,
# unload, or a verify that finds the pinned bytes changed (the table then
# stops serving).  Returns 1 when the draw is none of these.
exact_table_op() {
	local name fi tensor r a b t

	name=${NAMES[RANDOM % ${#NAMES[@]}]}
	read -r fi tensor <<<"${TABLES[RANDOM % ${#TABLES[@]}]}"
	case $((RANDOM % 10)) in
	0 | 1 | 2)
		exact_op "$ENGRAMCTL" unload "$name"
		exact_op "$ENGRAMCTL" load "${FILES[fi]}" --tensor "$tensor" --name "$name" \
			--no-progress ;;
	3)
		r=${ROWS[fi]}
		a=$(((RANDOM * 32768 + RANDOM) % r))
		b=$(((RANDOM * 32768 + RANDOM) % r))
		[ "$a" -le "$b" ] || { t=$a; a=$b; b=$t; }
		exact_op "$ENGRAMCTL" unload "$name"
		exact_op "$ENGRAMCTL" load "${FILES[fi]}" --tensor "$tensor" --name "$name" \
			--rows "$a-$b" --no-progress ;;
	4 | 5)
		exact_op "$ENGRAMCTL" unload "$name" ;;
	6)
		echo 1 >/sys/module/engram_rdma/parameters/fault_verify_mismatch
		exact_op "$ENGRAMCTL" verify "$name"
		echo 0 >/sys/module/engram_rdma/parameters/fault_verify_mismatch ;;
	*)
		return 1 ;;
	esac
}

# exact_link_fetches [ID]: "URL FETCHES" of link ID (of every link), into
# $W/link-fetches: what a link did is kept when it is deleted.
exact_link_fetches() {
	"$ENGRAMCTL" -j stats | jget "'\\n'.join('%s %d' % (l.get('url', '?'), l.get('fetches', 0)) for l in d['links'] if '${1-}' in ('', str(l['id'])))" >>"$W/link-fetches"
}

# exact_link_op: delete a drawn link and add it again.
exact_link_op() {
	local id url

	read -ra ls <"$W/links"
	[ ${#ls[@]} -gt 0 ] || return 0
	id=${ls[RANDOM % ${#ls[@]}]}
	url=$("$ENGRAMCTL" -j link list | jget "next((l['url'] for l in d if l['id'] == $id), '')")
	[ -n "$url" ] || return 0
	exact_link_fetches "$id"
	exact_op "$ENGRAMCTL" link del "$id"
	exact_op "$ENGRAMCTL" link add "$url"
	exact_links
}

# exact_figures SEED: the figures of the fetch log; 0 only with bad 0, late
# 0, no open of an unknown table, and rows fetched.
exact_figures() {
	local runs rows bad errors late opens unknown
	local log=$W/fetch.log

	sum() { sed -n "s/.*: fetch_check: $1 \([0-9]*\).*/\1/p" "$log" | awk '{ s += $1 } END { print s + 0 }'; }
	runs=$(grep -c ': fetch_check: rows ' "$log")
	rows=$(sed -n 's/.*: fetch_check: rows \([0-9]*\) .*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
	bad=$(sed -n 's/.* bad \([0-9]*\) errors.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
	errors=$(sed -n 's/.* errors \([0-9]*\) p50.*/\1/p' "$log" | awk '{ s += $1 } END { print s + 0 }')
	late=$(sed -n 's/.*: fetch_check: tolerated [0-9]* slow [0-9]* late \([0-9]*\).*/\1/p' "$log" |
		awk '{ s += $1 } END { print s + 0 }')
	opens=$(sum identities)
	unknown=$(grep -c 'no --identity says which bytes' "$log")
	echo "exact: seed $1 ops $EXACT_OPS fetch_runs $runs opens $opens rows $rows bad $bad errors $errors late $late unknown $unknown"
	echo "exact: open errors by kind: $(sed -n 's/.*open_table: \([A-Z0-9]*\).*/\1/p' "$log" |
		sort | uniq -c | awk '{ printf "%s %s ", $2, $1 }')"
	echo "exact: fetch errors by kind: $(sed -n 's/.*: fetch_check: tolerated by kind: //p' "$log" |
		awk '{ for (i = 1; i < NF; i += 2) s[$i] += $(i + 1) } END { for (k in s) printf "%s %d ", k, s[k] }')"
	grep -E 'differs from the file|late write|changed after' "$log" | head -5 | sed 's/^/exact: /'
	[ "$bad" = 0 ] && [ "$late" = 0 ] && [ "$unknown" = 0 ] && [ "$runs" -gt 0 ] &&
		[ "$opens" -gt 0 ]
}
