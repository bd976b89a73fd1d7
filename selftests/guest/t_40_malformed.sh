#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Malformed safetensors files are refused by engramctl with a clear message,
# before anything reaches the kernel.
# timeout: 200
# kernels: 6.1 debug
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/malformed
mkdir -p "$D"
# Write the cases with an independent writer (Python), not with engramctl.
python3 - "$D" <<'PY' || bail "cannot write the malformed files"
import json, struct, sys, os
d = sys.argv[1]
N = 4
W, S = N * 256, N * 8
def hdr(tensors, meta=None):
    h = dict(tensors)
    if meta is not None:
        h["__metadata__"] = meta
    return json.dumps(h).encode()
def write(name, header, data_len, hlen=None):
    with open(os.path.join(d, name), "wb") as f:
        f.write(struct.pack("<Q", len(header) if hlen is None else hlen))
        f.write(header)
        f.write(b"\x11" * data_len)
def t(dtype, shape, b, e):
    return {"dtype": dtype, "shape": shape, "data_offsets": [b, e]}
P = "layers.1.engram.embed"
good = {P + ".weight": t("F8_E4M3", [N, 256], 0, W),
        P + ".scale": t("F8_E8M0", [N, 8], W, W + S)}
write("good", hdr(good), W + S)
with open(os.path.join(d, "good"), "rb") as f:
    whole = f.read()
with open(os.path.join(d, "truncated-data"), "wb") as f:
    f.write(whole[:-100])
with open(os.path.join(d, "truncated-prefix"), "wb") as f:
    f.write(whole[:5])
with open(os.path.join(d, "truncated-header"), "wb") as f:
    f.write(whole[:40])
write("hlen-past-eof", hdr(good), W + S, hlen=len(hdr(good)) + W + S + 1000)
write("hlen-absurd", hdr(good), W + S, hlen=1 << 62)
write("not-json", b"{this is not json" + b" " * 40, W + S)
write("not-object", b"[1, 2, 3]", W + S)
bad = dict(good); bad[P + ".weight"] = t("BF16", [N, 128], 0, W)
write("wrong-dtype", hdr(bad), W + S)
bad = dict(good); bad[P + ".scale"] = t("F8_E8M0", [N * 2, 4], W, W + S)
write("wrong-shape", hdr(bad), W + S)
bad = dict(good); del bad[P + ".scale"]
write("missing-tensor", hdr(bad), W + S)
bad = dict(good); bad[P + ".scale"] = t("F8_E8M0", [N, 8], W + 4096, W + 4096 + S)
write("offsets-past-eof", hdr(bad), W + S)
bad = dict(good); bad[P + ".scale"] = t("F8_E8M0", [N, 8], W - 8, W - 8 + S)
write("overlapping", hdr(bad), W + S)
bad = dict(good); bad[P + ".scale"] = t("F8_E8M0", [N, 8], W, W + S + 1)
write("size-mismatch", hdr(bad), W + S + 1)
write("empty", b"", 0, hlen=0)
PY

# refused FILE PHRASE: engramctl must fail and its message must contain PHRASE.
refused() {
	local out rc
	out=$("$ENGRAMCTL" load "$D/$1" --tensor layers.1.engram.embed --name bad 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && grep -qiF -- "$2" <<<"$out"; then
		ok "refuses $1: $out"
	else
		nok "refuses $1 with a message containing '$2' (rc $rc)"
		echo "$out" | sed 's/^/# /'
	fi
}

refused truncated-prefix "truncated"
refused truncated-header "past end of file"
refused truncated-data "past end of file"
refused hlen-past-eof "past end of file"
refused hlen-absurd "absurd"
refused not-json "not valid JSON"
refused not-object "object"
refused wrong-dtype "dtype BF16, expected F8_E4M3"
refused wrong-shape "shape"
refused missing-tensor "'layers.1.engram.embed.scale' not found"
refused offsets-past-eof "past end of file"
refused overlapping "overlap"
refused size-mismatch "size"
refused empty "header length"
check "nothing was loaded" test "$("$ENGRAMCTL" -j list | jget 'len(d)')" = 0
check "the well-formed file loads" "$ENGRAMCTL" load "$D/good" --tensor layers.1.engram.embed --name good
"$ENGRAMCTL" unload good
done_testing
