#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Line coverage of kmod/ from the debug kernel's guests:
#   coverage.sh OUTDIR GCOV_TARBALL...
#
# Each tarball is the gcov.tar.gz a debug-kernel guest left in its logs
# directory (selftests/vm/run.sh): the .gcda files of the module from
# /sys/kernel/debug/gcov, under the absolute path of the build directory
# the module was built in (build/<release>/kmod, which holds the .gcno files
# of the same build).  Every run is captured with lcov, the runs are added
# to a zero baseline of every line (so a file that never ran shows 0 %),
# and the sum is kept to kmod/*.c.  Writes OUTDIR/coverage.info and an HTML
# report in OUTDIR/html, and prints TAP diagnostics: one line per file
# (lines run / lines, percent) and the total, then one TAP line saying how
# many runs were merged.  With UNIT_INFO=TRACEFILE (selftests/
# unit-coverage.sh), the same table again with the unit tests' lines of
# the files the module shares with user space added (coverage-all.info,
# and the HTML report from it).  Exits non-zero when no run could be read.
set -uo pipefail
export LC_ALL=C

out=${1:?usage: coverage.sh OUTDIR GCOV_TARBALL...}
shift
GCOV=${GCOV:-gcov-12}
command -v "$GCOV" >/dev/null || GCOV=gcov
command -v lcov >/dev/null || { echo "not ok - coverage: lcov is not installed"; exit 1; }

rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LCOV=(lcov --quiet --gcov-tool "$GCOV" --rc lcov_branch_coverage=0)

n=0 bad=0 moddirs=()
for tb in "$@"; do
	d=$tmp/run$n
	mkdir -p "$d"
	if ! tar -xzf "$tb" -C "$d" 2>/dev/null; then
		echo "# coverage: cannot read $tb"
		bad=$((bad + 1))
		continue
	fi
	# Each directory with .gcda files is a build directory on this machine:
	# its .gcno files go beside the counters.
	found=0
	while IFS= read -r g; do
		src=${g#"$d"}
		if ! compgen -G "$src/*.gcno" >/dev/null; then
			echo "# coverage: $tb: no .gcno files in $src (module rebuilt without coverage?)"
			continue
		fi
		cp "$src"/*.gcno "$g/"
		if "${LCOV[@]}" --capture --directory "$g" --output-file "$tmp/run$n.$found.info" \
			2>"$tmp/lcov.err"; then
			found=$((found + 1))
			case " ${moddirs[*]:-} " in *" $src "*) ;; *) moddirs+=("$src") ;; esac
		else
			echo "# coverage: lcov failed on $tb:"
			sed 's/^/#   /' "$tmp/lcov.err" | head -n 5
		fi
	done < <(find "$d" -name '*.gcda' -printf '%h\n' | sort -u)
	[ $found -gt 0 ] || bad=$((bad + 1))
	n=$((n + 1))
done
if [ ${#moddirs[@]} -eq 0 ]; then
	echo "not ok - coverage: no gcov data in ${*:-no tarball}"
	exit 1
fi

# The baseline: every line of every object, run or not.
add=()
for m in "${moddirs[@]}"; do
	b=$tmp/base.$((${#add[@]} / 2)).info
	"${LCOV[@]}" --capture --initial --directory "$m" --output-file "$b" 2>/dev/null &&
		add+=(-a "$b")
done
for f in "$tmp"/run*.info; do
	add+=(-a "$f")
done
"${LCOV[@]}" "${add[@]}" --output-file "$tmp/all.info" 2>"$tmp/lcov.err" &&
	"${LCOV[@]}" --extract "$tmp/all.info" '*/kmod/*.c' --output-file "$out/coverage.info" \
		2>>"$tmp/lcov.err" || {
	echo "not ok - coverage: merging the runs failed"
	sed 's/^/#   /' "$tmp/lcov.err" | head -n 10
	exit 1
}

# table TRACEFILE LABEL: from the tracefile itself: SF (source), LF (lines),
# LH (hit).
table() {
	awk -v label="$2" '
	/^SF:/ { f = $0; sub(/^SF:/, "", f); sub(/.*\//, "", f) }
	/^LF:/ { lf[f] += substr($0, 4) }
	/^LH:/ { lh[f] += substr($0, 4) }
	END {
		for (f in lf) {
			printf "# coverage%s: %-16s %5d of %5d lines  %5.1f %%\n", label, f, lh[f],
				lf[f], lf[f] ? 100 * lh[f] / lf[f] : 0 | "sort"
			tl += lf[f]; th += lh[f]
		}
		close("sort")
		printf "# coverage%s: %-16s %5d of %5d lines  %5.1f %%\n", label, "kmod/ total",
			th, tl, tl ? 100 * th / tl : 0
	}' "$1"
}
table "$out/coverage.info" "" | tee "$out/summary.txt"

# With UNIT_INFO (selftests/unit-coverage.sh): the user-space unit tests'
# lines of the files the module shares with them, added line by line,
# counted only where the kernel build has a line (the user-space build
# compiles a few lines of its own).
report=$out/coverage.info
title="engram_rdma (kmod/) under make check"
if [ -n "${UNIT_INFO:-}" ] && [ -s "$UNIT_INFO" ]; then
	awk -F'[:,]' '
	FNR == NR {
		if ($1 == "SF") { sf = substr($0, 4); b = sf; sub(/.*\//, "", b); path[b] = sf }
		else if ($1 == "DA") has[b "," $2] = 1
		next
	}
	$1 == "SF" {
		b = substr($0, 4); sub(/.*\//, "", b)
		keep = (b in path)
		if (keep) print "SF:" path[b]
		next
	}
	!keep { next }
	$1 == "DA" { if ((b "," $2) in has) print; next }
	$0 == "end_of_record" { print }
	' "$out/coverage.info" "$UNIT_INFO" >"$tmp/unit.info"
	if "${LCOV[@]}" -a "$out/coverage.info" -a "$tmp/unit.info" \
		--output-file "$out/coverage-all.info" 2>"$tmp/lcov.err"; then
		table "$out/coverage-all.info" " with unit tests" | tee -a "$out/summary.txt"
		report=$out/coverage-all.info
		title="$title, with the user-space unit tests"
	else
		echo "not ok - coverage: adding the unit tests' counters failed"
		sed 's/^/#   /' "$tmp/lcov.err" | head -n 10
		exit 1
	fi
fi

if genhtml --quiet --prefix "${moddirs[0]}" --title "$title" \
	--output-directory "$out/html" "$report" >/dev/null 2>"$tmp/genhtml.err"; then
	echo "# coverage: HTML report in $out/html/index.html"
else
	echo "# coverage: genhtml failed:"
	sed 's/^/#   /' "$tmp/genhtml.err" | head -n 5
fi
if [ $bad -eq 0 ]; then
	echo "ok - coverage: $n guest run(s) merged"
else
	echo "not ok - coverage: $bad of $n guest run(s) gave no coverage"
	exit 1
fi
