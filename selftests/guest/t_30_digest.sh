#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# An expected digest that does not match refuses the table and pins nothing;
# the right one is accepted.
# timeout: 300
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/digest.safetensors
make_table "$F" 20000 --seed 3 --pad-before 5 || bail "mktable"
want=$(sha256sum "$F" | cut -d' ' -f1)
wrong=$(printf '%s' "$want" | tr '0-9a-f' '1-9a-f0')

drop_caches
out=$("$ENGRAMCTL" load "$F" --tensor $PREFIX --name dg --sha256 "$wrong" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
check "a wrong --sha256 is refused" test $rc -ne 0
check "the refusal says the digest does not match" grep -qi "mismatch" <<<"$out"
check "no table is left behind" test "$(table_state dg)" = absent
check "the file is writable" writable "$F"
drop_caches
check "nothing stays pinned" test "$(resident "$F")" -eq 0
check "stats count the digest mismatch" test "$(stat_global digest_mismatches)" -ge 1

out=$("$ENGRAMCTL" load "$F" --tensor $PREFIX --name dg --sha256 "${want^^}" 2>&1)
check "the right --sha256 (upper case) is accepted" test $? -eq 0
check "state is ready" test "$(table_state dg)" = ready
"$ENGRAMCTL" unload dg

out=$("$ENGRAMCTL" load "$F" --tensor $PREFIX --name dg --sha256 1234 2>&1)
check "a short --sha256 is refused by engramctl" test $? -ne 0
check "a short --sha256 gets a clear message" grep -qi "sha256" <<<"$out"
check "still no table" test "$(table_state dg)" = absent
done_testing
