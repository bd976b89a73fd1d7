#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# engramctl's documentation cannot drift from its code: every object and
# command of its command tables (the struct cli_cmd arrays of
# tools/engramctl/*.c, aliases of an earlier entry left out) and every long
# option of its getopt tables appears in `engramctl --help`, in the
# SYNOPSIS of engramctl(8) and in the bash completion; and --help's
# listing follows the command tables' order, which its prefix rule names.
# Prints TAP.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
ctl=$top/tools/engramctl
make -s -C "$top/tools" >/dev/null 2>&1 || { echo "not ok 1 - the tools build"; echo "1..1"; exit 1; }

python3 - "$ctl" "$top/tools/man/engramctl.8" "$top/tools/completion/engramctl.bash" <<'PY'
import glob, re, subprocess, sys

ctl, man, comp = sys.argv[1:4]
n = failed = 0


def result(good, desc, why=''):
    global n, failed
    n += 1
    if not good:
        failed += 1
    print('%sok %d - %s' % ('' if good else 'not ', n, desc))
    if why and not good:
        print('#   ' + why)


src = {f: open(f).read() for f in sorted(glob.glob(ctl + '/*.c'))}
TABLE = re.compile(r'static const struct cli_cmd (\w+)\[\] = \{(.*?)\n\s*\};', re.S)
ENTRY = re.compile(r'\{ "([a-z-]+)", (\w+) \}')
tables = {}
for text in src.values():
    for name, body in TABLE.findall(text):
        seen, words = set(), []
        for word, fn in ENTRY.findall(body):
            # "help" is everywhere; an entry whose function an earlier one
            # has is an alias ("delete" for "del", "list" for "show").
            if word == 'help' or (fn != 'NULL' and fn in seen):
                continue
            seen.add(fn)
            words.append(word)
        tables[name] = words
opts = set()
for text in src.values():
    opts.update(re.findall(r'\{ "([a-z][a-z0-9-]+)", (?:no|required|optional)_argument', text))
for m in ('JSON', 'PRETTY', 'HELP'):
    d = re.search(r'COMMON_LONGOPTS_%s\s+\{ "([a-z-]+)"' % m,
                  open(ctl + '/engramctl.h').read())
    if d:
        opts.add(d.group(1))
words = sorted({w for ws in tables.values() for w in ws})
result(len(tables) >= 6 and len(words) >= 14 and len(opts) >= 15,
       'read %d command tables, %d words, %d long options' % (len(tables), len(words), len(opts)))

helptext = subprocess.run([ctl + '/engramctl', '--help'], capture_output=True, text=True).stdout
mantext = open(man).read()
synopsis = mantext[mantext.index('.SH SYNOPSIS'):mantext.index('.SH DESCRIPTION')]
synopsis = synopsis.replace('\\-', '-')
comptext = open(comp).read()
# The global options' long forms belong in OPTIONS, the synopsis has -j, -p.
GLOBAL = {'json', 'pretty', 'help', 'version'}
for what, text, skip in (('engramctl --help', helptext, set()),
                         ('engramctl(8) SYNOPSIS', synopsis, GLOBAL),
                         ('engramctl(8)', mantext.replace('\\-', '-'), set()),
                         ('the bash completion', comptext, set())):
    toks = set(re.findall(r'[A-Za-z0-9][A-Za-z0-9-]*', text))
    missing = [w for w in words if w not in toks]
    result(not missing, '%s names every command' % what, 'missing: ' + ' '.join(missing))
    missing = sorted(o for o in opts - skip if '--' + o not in text)
    result(not missing, '%s names every long option' % what,
           'missing: ' + ' '.join('--' + o for o in missing))

# --help lists the objects, and each object's commands, in the order a
# prefix is resolved in.
lines = [l.split() for l in helptext.splitlines() if l.startswith('  ') and l.split()]
objs = [w for w in tables.get('objects', []) if w in {l[0] for l in lines}]
order = []
for l in lines:
    if l[0] in objs and l[0] not in order:
        order.append(l[0])
result(order == objs, '--help lists the objects in the order of the prefix rule',
       'listed %s, resolved %s' % (order, objs))
for obj, tab in (('table', 'table_cmds'), ('link', 'link_cmds'), ('listen', 'listen_cmds')):
    want = [w for w in tables.get(tab, [])]
    got = []
    for l in lines:
        if l[0] != obj:
            continue
        for i, t in enumerate(l):
            if t in want and t not in got and (i == 1 or l[i - 1] == obj):
                got.append(t)
    want = [w for w in want if w in got]
    result(got == want, '--help lists the %s commands in the order of the prefix rule' % obj,
           'listed %s, resolved %s' % (got, want))
print('1..%d' % n)
sys.exit(1 if failed else 0)
PY
