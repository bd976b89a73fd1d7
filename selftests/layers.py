#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The shape of kmod/, checked (Documentation/design.rst):

 - every function defined in kmod/X.c is named engram_X_* (or engram_X),
   and not engram_X_Y_* when X_Y.c exists, so a call names the file it
   goes to; main.c, which only wires the parts together, is the one
   exception;
 - the calls between files form no circle: each file calls only files
   below it, and reaches up only through ops tables and registered
   callbacks, which are pointers and not calls by name;
 - nor do the calls between the files of each user-space program
   (engramctl, libengram, each with the tools/lib/ files it links),
   which have no naming rule.

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


DEF_ANY = re.compile(r'^(?:[A-Za-z_]\w*[ \t]+\**)+\**([A-Za-z_]\w*)\(')
WORD_ANY = re.compile(r'\b[A-Za-z_]\w*\b')


def definitions(src, pattern):
    """(name, static) of each function defined in @src: a definition is
    the prototype's lines followed by a "{" line of its own."""
    lines = src.split('\n')
    for i, line in enumerate(lines):
        m = pattern.match(line)
        if not m or line.startswith(('return', 'else', 'if')):
            continue
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith((')', ';', '{')):
            j += 1
        if j + 1 >= len(lines) or lines[j].rstrip().endswith(';') or lines[j + 1] != '{':
            continue
        yield m.group(1), line.startswith('static')


def circles(arrows):
    """The strongly connected components of more than one file (Tarjan)."""
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

    for v in sorted(arrows):
        if v not in index:
            visit(v)
    return sccs


sys.setrecursionlimit(10000)
stems = [os.path.basename(f)[:-2] for f in files]
defs = {}       # function -> (stem, static)
srcs = {}
bad = []
for f in files:
    stem = os.path.basename(f)[:-2]
    src = strip_comments(open(f).read())
    srcs[stem] = src
    for name, static in definitions(src, DEF):
        defs[name] = (stem, static)
        plain = name.lstrip('_')
        if stem != 'main' and not (plain == 'engram_' + stem or
                                   plain.startswith('engram_' + stem + '_')):
            bad.append('%s.c: %s() is not named engram_%s_*' % (stem, name, stem))
        # serve_rdma.c must not define what reads as serve_rdma_conn.c's.
        for other in stems:
            if (len(other) > len(stem) and other.startswith(stem + '_') and
                    plain.startswith('engram_' + other + '_')):
                bad.append('%s.c: %s() reads as %s.c\'s' % (stem, name, other))

def arrows_of(srcs, public, word):
    """X -> Y when X's source names a function Y defines (@public)."""
    arrows = {s: set() for s in srcs}
    for stem, src in srcs.items():
        for n in set(word.findall(src)):
            to = public.get(n)
            if to and to != stem:
                arrows[stem].add(to)
    return arrows


public = {n: s for n, (s, st) in defs.items() if not st}
arrows = arrows_of(srcs, public, re.compile(r'\b_*engram_[a-z0-9_]+\b'))
sccs = circles(arrows)
for comp in sccs:
    bad.append('circle: ' + ', '.join(c + '.c' for c in comp))

# The user-space programs: no naming rule, but no circle either, each
# program with the shared files it links (tools/lib/).
PROGRAMS = {
    'engramctl': ('tools/engramctl', 'tools/lib'),
    'libengram': ('tools/libengram', 'tools/lib'),
}
user = {}
for prog, dirs in sorted(PROGRAMS.items()):
    ufiles = sorted(f for d in dirs for f in glob.glob(os.path.join(root, d, '*.c')))
    if not ufiles:
        continue
    usrcs, udefs = {}, {}
    for f in ufiles:
        rel = os.path.relpath(f, root)
        usrcs[rel] = strip_comments(open(f).read())
        for name, static in definitions(usrcs[rel], DEF_ANY):
            if not static:
                udefs[name] = rel
    uarrows = arrows_of(usrcs, udefs, WORD_ANY)
    ucomps = circles(uarrows)
    user[prog] = (len(usrcs), sum(len(a) for a in uarrows.values()), len(ucomps))
    for comp in ucomps:
        bad.append('circle in %s: %s' % (prog, ', '.join(comp)))
if '-v' in sys.argv:
    for stem in sorted(srcs):
        n = open(os.path.join(root, 'kmod', stem + '.c')).read().count('\n')
        print('%-16s %5d  -> %s' % (stem + '.c', n,
                                    ' '.join(sorted(arrows[stem])) or '-'))
misnamed = sum(1 for b in bad if not b.startswith('circle'))
print('layers: %d files, %d arrows, %d circles, %d misnamed functions%s' %
      (len(srcs), sum(len(a) for a in arrows.values()), len(sccs), misnamed,
       ''.join('; %s: %d files, %d arrows, %d circles' % ((p,) + user[p])
               for p in sorted(user))))
for b in bad:
    print('layers: ' + b)
sys.exit(1 if bad else 0)
