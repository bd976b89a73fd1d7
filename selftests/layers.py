#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The shape of kmod/, checked (Documentation/design.rst):

 - every function defined in kmod/X.c is named engram_X_* (or engram_X),
   and not engram_X_Y_* when X_Y.c exists, so a call names the file it
   goes to; main.c, which only wires the parts together, is the one
   exception;
 - the calls between files form no circle: each file calls only files
   below it, and reaches up only through ops tables and registered
   callbacks, which are pointers and not calls by name.

Prints the files with their line counts, the arrows, and any offence;
exits 1 on an offence.
"""
import glob
import os
import re
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
if '--root' in sys.argv:        # another tree: the checker's own unit test
    root = sys.argv[sys.argv.index('--root') + 1]
files = sorted(f for f in glob.glob(os.path.join(root, 'kmod', '*.c'))
               if not f.endswith('.mod.c'))
DEF = re.compile(r'^(?:[A-Za-z_]\w*[ \t]+\**)+\**(_*engram_[a-z0-9_]+)\(')


# One pass, so that "rdma://" in a string is no comment and "/*" in a
# comment no string; character literals are kept whole too.
TOKEN = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def strip_comments(src):
    def blank(m):
        t = m.group(0)
        if t.startswith('"'):
            return '""'
        if t.startswith("'"):
            return "' '"
        return '\n' * t.count('\n')
    return TOKEN.sub(blank, src)


stems = [os.path.basename(f)[:-2] for f in files]
defs = {}       # function -> (stem, static)
srcs = {}
bad = []
for f in files:
    stem = os.path.basename(f)[:-2]
    src = strip_comments(open(f).read())
    srcs[stem] = src
    lines = src.split('\n')
    for i, line in enumerate(lines):
        m = DEF.match(line)
        if not m or line.startswith(('return', 'else', 'if')):
            continue
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith((')', ';', '{')):
            j += 1
        if j + 1 >= len(lines) or lines[j].rstrip().endswith(';') or lines[j + 1] != '{':
            continue
        name = m.group(1)
        defs[name] = (stem, line.startswith('static'))
        plain = name.lstrip('_')
        if stem != 'main' and not (plain == 'engram_' + stem or
                                   plain.startswith('engram_' + stem + '_')):
            bad.append('%s.c: %s() is not named engram_%s_*' % (stem, name, stem))
        # serve_rdma.c must not define what reads as serve_rdma_conn.c's.
        for other in stems:
            if (len(other) > len(stem) and other.startswith(stem + '_') and
                    plain.startswith('engram_' + other + '_')):
                bad.append('%s.c: %s() reads as %s.c\'s' % (stem, name, other))

# Arrows: X -> Y when X names a non-static function that Y defines.
public = {n: s for n, (s, st) in defs.items() if not st}
word = re.compile(r'\b_*engram_[a-z0-9_]+\b')
arrows = {s: set() for s in srcs}
for stem, src in srcs.items():
    for n in set(word.findall(src)):
        to = public.get(n)
        if to and to != stem:
            arrows[stem].add(to)

# Circles: strongly connected components of more than one file (Tarjan).
index, low, onstack, stack, sccs = {}, {}, set(), [], []


def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    onstack.add(v)
    for w in sorted(arrows[v]):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in onstack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            onstack.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))


sys.setrecursionlimit(10000)
for v in sorted(arrows):
    if v not in index:
        visit(v)
for comp in sccs:
    bad.append('circle: ' + ', '.join(c + '.c' for c in comp))

if '-v' in sys.argv:
    for stem in sorted(srcs):
        n = open(os.path.join(root, 'kmod', stem + '.c')).read().count('\n')
        print('%-16s %5d  -> %s' % (stem + '.c', n,
                                    ' '.join(sorted(arrows[stem])) or '-'))
print('layers: %d files, %d arrows, %d circles, %d misnamed functions' %
      (len(srcs), sum(len(a) for a in arrows.values()), len(sccs),
       len(bad) - len(sccs)))
for b in bad:
    print('layers: ' + b)
sys.exit(1 if bad else 0)
