#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# tools/completion/engramctl.bash: what it offers after each kind of word,
# with bash-completion's helpers when installed and without them; names
# the module would give are asked of the tree's engramctl, which (no module
# on this machine) gives none, and then nothing is offered. TAP.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
n=0 failed=0
# complete LINE: COMPREPLY after LINE (the last word the one being completed).
complete_line() {
	local line=$1
	read -r -a COMP_WORDS <<<"$line"
	[[ $line == *" " ]] && COMP_WORDS+=("")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMP_LINE=$line
	COMP_POINT=${#line}
	COMPREPLY=()
	_engramctl engramctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
	echo "${COMPREPLY[*]}"
}
expect() {
	local line=$1 want=$2 got
	n=$((n + 1))
	got=$(complete_line "$line" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')
	want=$(tr ' ' '\n' <<<"$want" | sort | tr '\n' ' ' | sed 's/ $//')
	if [ "$got" = "$want" ]; then
		echo "ok $n - '$line' -> $want"
	else
		echo "not ok $n - '$line' -> '$got', want '$want'"
		failed=$((failed + 1))
	fi
}
run_cases() {
	expect "engramctl ta" "table"
	expect "engramctl l" "link list listen load"
	expect "engramctl table s" "show sync"
	expect "engramctl table d" "drain"
	expect "engramctl table u" "unload undrain"
	expect "engramctl table drain --" "--all --wait --quiet --no-progress --json --pretty --help"
	expect "engramctl table drain x --q" "--quiet"
	expect "engramctl table drain --wait --quiet " ""
	expect "engramctl table undrain --" "--all --json --pretty --help"
	expect "engramctl table sync --" "--config --prune --dry-run --no-progress --json --pretty --help"
	expect "engramctl load x.safetensors --t" "--tensor"
	expect "engramctl stats --pro" "--prometheus"
	expect "engramctl mo" "monitor"
	expect "engramctl monitor " "all table link listen"
	expect "engramctl monitor --c" "--count"
	expect "engramctl link " "add del list show tables help"
	expect "engramctl link add r" "rdma://"
	expect "engramctl listen allow " "add del show help"
	expect "engramctl -j listen " "add del show allow help"
	expect "engramctl table unload --c" "--config"
	expect "engramctl unload " ""
	expect "engramctl link del " ""
	expect "engramctl mktable f --r" "--rows"
}
PATH=$top/tools/engramctl:$PATH
# shellcheck disable=SC1091
. "$top/tools/completion/engramctl.bash"
echo "# without bash-completion's helpers"
run_cases
if [ -r /usr/share/bash-completion/bash_completion ]; then
	echo "# with /usr/share/bash-completion/bash_completion"
	# shellcheck disable=SC1091
	. /usr/share/bash-completion/bash_completion
	. "$top/tools/completion/engramctl.bash"
	run_cases
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/a.safetensors" "$tmp/b.conf"
n=$((n + 1))
got=$(cd "$tmp" && complete_line "engramctl load a")
if [ "$got" = a.safetensors ]; then echo "ok $n - a FILE to load is completed from the directory"
else echo "not ok $n - a FILE to load: '$got'"; failed=$((failed + 1)); fi
n=$((n + 1))
got=$(cd "$tmp" && complete_line "engramctl table sync --config b")
if [ "$got" = b.conf ]; then echo "ok $n - --config takes a file"
else echo "not ok $n - --config: '$got'"; failed=$((failed + 1)); fi
echo "1..$n"
[ $failed -eq 0 ]
