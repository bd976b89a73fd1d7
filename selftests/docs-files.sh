#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Part of `make style`: every file git tracks is named where a reader
# looks for it, so that a file added without a word on its role fails.
#  - The code of the module, the tools and the harness (*.c, *.h, *.sh,
#    *.py, *.awk under kmod/, tools/, uapi/ and selftests/, but for the
#    test directories selftests/guest/ and selftests/unit/ and kmod/probes/,
#    whose files are named for what they test) is named by its
#    own name in README.md's layout table or in Documentation/design.rst
#    (not by a pattern: `link*.c` would name linkinfo.c); a header also
#    counts as named when the .c of the same name is.
#  - Any other file is named by its path, or by a directory of it written
#    with its trailing slash (`debian/`, `selftests/guest/`).
#
#   docs-files.sh [ROOT]     (default: this tree)
#
# Prints one line; fails listing the files no document names.
set -uo pipefail
export LC_ALL=C

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 1
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || {
	echo "style: docs-files: not a git work tree, nothing checked"
	exit 0
}
docs=$( { grep '^|' README.md 2>/dev/null; cat Documentation/design.rst 2>/dev/null; } )

# named WORD: WORD appears in the docs, not as part of a longer name.
named() {
	grep -qE "(^|[^A-Za-z0-9_.-])$(sed 's/[.[\*^$]/\\&/g' <<<"$1")([^A-Za-z0-9_-]|\$)" <<<"$docs"
}

n=0
bad=()
while IFS= read -r f; do
	n=$((n + 1))
	b=${f##*/}
	case "$f" in
	selftests/guest/*|selftests/unit/*|kmod/probes/*) code=0 ;;
	kmod/*|tools/*|uapi/*|selftests/*) code=1 ;;
	*) code=0 ;;
	esac
	case "$code:$b" in
	1:*.c|1:*.h|1:*.sh|1:*.py|1:*.awk)
		named "$b" && continue
		case "$b" in *.h) named "${b%.h}.c" && continue ;; esac
		;;
	*)
		named "$f" && continue
		d=$f
		while [ "$d" != "${d%/*}" ]; do
			d=${d%/*}
			named "$d/" && continue 2
		done
		;;
	esac
	bad+=("$f")
done < <(git ls-files)
if [ ${#bad[@]} -eq 0 ]; then
	echo "style: docs-files: each of $n tracked files is named in README.md's layout or design.rst"
	exit 0
fi
echo "style: docs-files: ${#bad[@]} of $n tracked files are named neither in README.md's layout table nor in Documentation/design.rst:"
printf '  %s\n' "${bad[@]}"
exit 1
