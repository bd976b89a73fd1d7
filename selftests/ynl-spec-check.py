#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Hold the YNL spec of the engram_rdma family to what implements it.

Documentation/netlink/specs/engram_rdma.yaml is the family's description
for YNL (the kernel's tools/net/ynl/cli.py drives the module with it).
This compares it, name by name and value by value, with:

  - the kernel's genetlink-legacy schema (from linux-source-6.12,
    unpacked by selftests/vm/ynl-tree.sh), when given (--schema);
  - uapi/linux/engram_rdma.h: the family and group names, the command
    and attribute enums (and each attribute's type, from its comment),
    the value enums and the counters' enum;
  - kmod/netlink.c: each command's handlers (do, dump) and policy: the
    attributes a request may carry, their types and checks;
  - Documentation/netlink.rst: every command and attribute is named.

Prints TAP; exits 1 on any difference.
"""
import argparse
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 0
FAILED = 0


def tap(ok, desc, diffs=()):
    global N, FAILED
    N += 1
    if not ok:
        FAILED += 1
    print(f"{'ok' if ok else 'not ok'} {N} - {desc}")
    for d in list(diffs)[:20]:
        print(f"#   {d}")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def c_name(prefix, name):
    return (prefix + name).upper().replace("-", "_")


def c_enum(text, name):
    """[(NAME, value, comment)] of `enum NAME` (explicit values honoured)."""
    m = re.search(r"enum %s \{(.*?)\n\};" % name, text, re.S)
    if not m:
        return None
    body = re.sub(r"/\*(?:(?!\*/).)*\n(?:(?!\*/).)*\*/", "", m.group(1), flags=re.S)
    out, val = [], 0
    for line in body.split("\n"):
        m = re.match(r"\s*(ENGRAM_\w+)\s*(?:=\s*([^,/]+?))?\s*,?\s*(?:/\*\s*(.*?)\s*\*/)?\s*$",
                     line)
        if not m or m.group(1).startswith("__") or m.group(1).endswith("_MAX"):
            continue
        if m.group(2):
            val = int(m.group(2), 0)
        out.append((m.group(1), val, m.group(3) or ""))
        val += 1
    return out


def c_defines(*texts):
    d = {}
    for t in texts:
        for m in re.finditer(r"#define\s+(ENGRAM_\w+)\s+(\d+|\"[^\"]*\")", t):
            v = m.group(2)
            d[m.group(1)] = v.strip('"') if v.startswith('"') else int(v)
    return d


def c_eval(expr, defs):
    expr = expr.strip()
    m = re.fullmatch(r"(\w+)\s*-\s*(\d+)", expr)
    if m:
        return c_eval(m.group(1), defs) - int(m.group(2))
    if expr.isdigit():
        return int(expr)
    return defs[expr]


def spec_values(items, start=0):
    """[(name, value, item)] of a YNL entries/attributes list."""
    out, val = [], start
    for it in items:
        if isinstance(it, str):
            it = {"name": it}
        if "value" in it:
            val = it["value"]
        out.append((it["name"], val, it))
        val += 1
    return out


def compare(desc, spec, c):
    diffs = []
    for i in range(max(len(spec), len(c))):
        s = spec[i] if i < len(spec) else None
        k = c[i] if i < len(c) else None
        if s != k:
            diffs.append(f"spec {s}, header {k}")
    tap(not diffs, desc, diffs)


def policies(src, defs):
    """{policy name: {attr: (type, checks)}} of kmod/netlink.c."""
    out = {}
    for m in re.finditer(r"static const struct nla_policy (\w+)\[ENGRAM_A_MAX \+ 1\]"
                         r"(?: = \{(.*?)\n\})?;", src, re.S):
        pol = {}
        for e in re.finditer(r"\[ENGRAM_A_(\w+)\]\s*=\s*(\{[^}]*\}|NLA_POLICY_\w+\([^)]*\))",
                             m.group(2) or ""):
            attr, body = e.group(1), " ".join(e.group(2).split())
            if body.startswith("NLA_POLICY_EXACT_LEN"):
                n = re.search(r"\((\w+)\)", body).group(1)
                pol[attr] = ("binary", {"exact-len": c_eval(n, defs)})
            elif body.startswith(("NLA_POLICY_MIN", "NLA_POLICY_MAX")):
                t, n = re.search(r"\(NLA_(\w+), (\w+)\)", body).groups()
                bound = "min" if body.startswith("NLA_POLICY_MIN") else "max"
                pol[attr] = (t.lower(), {bound: c_eval(n, defs)})
            else:
                t = re.search(r"\.type = NLA_(\w+)", body).group(1)
                ln = re.search(r"\.len = ([^,}]+)", body)
                if t == "NUL_STRING":
                    pol[attr] = ("string", {"max-len": c_eval(ln.group(1), defs)} if ln else {})
                else:
                    pol[attr] = (t.lower(), {})
        out[m.group(1)] = pol
    return out


def ops(src):
    """{CMD: {"do": bool, "dump": bool, "policy": name}} of engram_ops[]."""
    m = re.search(r"static const struct genl_ops engram_ops\[\] = \{(.*?)\n\};", src, re.S)
    out = {}
    for blk in re.findall(r"\{(.*?)\}", m.group(1), re.S):
        cmd = re.search(r"\.cmd = ENGRAM_CMD_(\w+)", blk).group(1)
        pol = re.search(r"\.policy = (\w+)", blk)
        out[cmd] = {"do": ".doit" in blk, "dump": ".dumpit" in blk,
                    "policy": pol.group(1) if pol else None}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schema", help="the kernel's genetlink-legacy.yaml")
    args = ap.parse_args()

    spec_path = "Documentation/netlink/specs/engram_rdma.yaml"
    spec = yaml.safe_load(read(spec_path))
    hdr = read("uapi/linux/engram_rdma.h")
    nlc = read("kmod/netlink.c")
    rst = read("Documentation/netlink.rst")
    defs = c_defines(hdr, read("kmod/url.h"), read("kmod/prefix.h"))

    if args.schema:
        import jsonschema
        with open(args.schema, encoding="utf-8") as f:
            schema = yaml.safe_load(f)
        errs = sorted(jsonschema.Draft7Validator(schema).iter_errors(spec), key=str)
        tap(not errs, f"{spec_path} is valid under {os.path.basename(args.schema)}",
            [f"{list(e.path)}: {e.message[:160]}" for e in errs])

    consts = {d["name"]: d.get("value") for d in spec["definitions"] if d["type"] == "const"}
    enums = {d["name"]: d for d in spec["definitions"] if d["type"] == "enum"}
    sets = {s["name"]: s for s in spec["attribute-sets"]}
    tap(spec["name"] == defs.get("ENGRAM_GENL_NAME"),
        f"family name {spec['name']} is ENGRAM_GENL_NAME")
    groups = [g["name"] for g in spec["mcast-groups"]["list"]]
    tap(groups == [defs.get("ENGRAM_MCGRP_EVENTS")], f"multicast groups {groups}")
    for name, val in consts.items():
        cname = {"sha256-len": "ENGRAM_SHA256_LEN", "name-max": "ENGRAM_NAME_MAX",
                 "path-max": "ENGRAM_PATH_MAX"}.get(name, c_name("engram-", name))
        tap(defs.get(cname) == val, f"constant {name} = {val} is {cname}")

    # Commands.
    olist = spec["operations"]["list"]
    sops = [(c_name("engram-cmd-", n), v) for n, v, _ in spec_values(olist, 1)]
    cops = [(n, v) for n, v, _ in c_enum(hdr, "engram_cmd") if not n.endswith("UNSPEC")]
    compare("commands: the spec's operations are enum engram_cmd", sops, cops)

    # Attributes, with their types from the header's comments.
    sattrs = spec_values(sets["engram"]["attributes"])
    compare("attributes: the spec's attribute-set engram is enum engram_attr",
            [(c_name("engram-a-", n), v) for n, v, _ in sattrs],
            [(n, v) for n, v, _ in c_enum(hdr, "engram_attr")])
    diffs = []
    cattrs = {n: cm for n, _, cm in c_enum(hdr, "engram_attr")}
    for n, _, it in sattrs:
        cm = cattrs.get(c_name("engram-a-", n), "")
        t = it["type"]
        want = cm.split(",")[0].strip()
        if t in ("unused", "pad"):
            continue
        if t == "nest" or t == "indexed-array":
            ok = cm.startswith("nest") or "nest of" in cm or n == "link-queue-fetches"
        elif want in ("u8", "u32", "u64", "string", "binary"):
            ok = want == t
            em = re.search(r"enum engram_(\w+)", cm)
            if em and it.get("enum") != em.group(1).replace("_", "-"):
                diffs.append(f"{n}: enum {it.get('enum')}, header says {em.group(1)}")
        else:
            ok = t == "u64"   # held-first and held-rows: the comment is above them
        if not ok:
            diffs.append(f"{n}: spec {t}, header comment '{cm}'")
    tap(not diffs, "attributes: each one's type is the header's", diffs)

    # Value enums and the counters.
    for en, d in enums.items():
        cname = d.get("enum-name", "engram_" + en.replace("-", "_"))
        ce = c_enum(hdr, cname)
        if ce is None:
            tap(False, f"enum {en}: no enum {cname} in the header")
            continue
        compare(f"enum {en} is enum {cname}",
                [(c_name(d["name-prefix"], n), v) for n, v, _ in spec_values(d["entries"])],
                [(n, v) for n, v, _ in ce])
    compare("counters: the spec's attribute-set stat is enum engram_stat",
            [(c_name("engram-stat-", n), v) for n, v, _ in spec_values(sets["stat"]["attributes"])],
            [(n, v) for n, v, _ in c_enum(hdr, "engram_stat")])

    # The module's handlers and policies.
    pols = policies(nlc, defs)
    kops = ops(nlc)
    byname = {it["name"]: it for it in olist}
    attr_of = {n: it for n, _, it in sattrs}
    diffs = []
    for it in olist:
        cmd = c_name("", it["name"])
        if "event" in it:
            if cmd in kops:
                diffs.append(f"{it['name']}: an event in the spec, a handler in the module")
            continue
        k = kops.get(cmd)
        if not k:
            diffs.append(f"{it['name']}: no handler in engram_ops[]")
            continue
        for kind in ("do", "dump"):
            if (kind in it) != k[kind]:
                diffs.append(f"{it['name']}: {kind} in the spec {kind in it}, in the module {k[kind]}")
        pol = pols.get(k["policy"], {})
        for kind in ("do", "dump"):
            if kind not in it:
                continue
            req = set(it[kind].get("request", {}).get("attributes", []))
            got = {a.lower().replace("_", "-") for a in pol}
            if req != got:
                diffs.append(f"{it['name']} {kind}: request {sorted(req)}, "
                             f"{k['policy']} takes {sorted(got)}")
        for a, (t, chk) in pol.items():
            sa = attr_of.get(a.lower().replace("_", "-"), {})
            if sa.get("type") != t:
                diffs.append(f"{a}: spec {sa.get('type')}, {k['policy']} {t}")
            schk = {key: consts.get(v, v) for key, v in sa.get("checks", {}).items()}
            if schk != chk:
                diffs.append(f"{a}: spec checks {schk}, {k['policy']} {chk}")
    for cmd in kops:
        if cmd.lower().replace("_", "-") not in byname:
            diffs.append(f"ENGRAM_CMD_{cmd}: handled by the module, not in the spec")
    tap(not diffs, "each command's handlers and request policy in kmod/netlink.c are the spec's",
        diffs)

    # The reference documentation.
    missing = [c for c, _ in cops if c not in rst]
    missing += [c_name("engram-a-", n) for n, _, it in sattrs
                if it["type"] not in ("unused", "pad")
                and c_name("engram-a-", n) not in rst
                and "``%s``" % c_name("", n) not in rst]
    tap(not missing, "Documentation/netlink.rst names every command and attribute", missing)

    print(f"1..{N}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
