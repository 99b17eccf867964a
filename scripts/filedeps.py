"""File-level dependencies inside one crate, for scripts/module-deps: which source file uses an item
of which other file, and the circles among them.

What makes an edge A -> B (A uses something B defines):
- a `use` in A (not `pub use`, see below) or a path in A's code starting with `crate::`,
  `super::`, `self::` or the name of a module A declares, resolved to the file that defines the
  item it names: the path is walked down the crate's file modules; at the first segment that is no
  file module, the item is looked up in that module's file, and if the file only imports it there
  (`use x::Item`, or a glob whose module defines it), the import is followed to the file that
  defines it. A path naming a module itself (`use super::sse;`, a glob `use super::*`) depends on
  that module's file.
- not a parent's `mod child;` (declaring a file is not using it);
- not a `pub use` / `pub(crate) use` / `pub(super) use` (a re-export passes a name through: who
  uses the name depends on the file that defines it, not on the file that passes it on);
- not `#[cfg(doc)]` items (an import for a doc link);
- not test code: `#[cfg(test)]` items, files named `tests.rs` or under a `tests/` folder, and files
  a parent declares under `#[cfg(test)]` (a test may reach anywhere);
- not comments, doc links or strings (they are tokenized as such).

So a `mod.rs` that re-exports its children's types does not depend on them, and a child that uses
a type its parent defines does depend on the parent: if the parent's own code then uses the child,
the two are a circle, and the type they share wants a file of its own."""
import os
import rustsrc

ITEM_WORDS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod", "macro_rules"}


class Crate:
    def __init__(self, src, skip=()):
        self.src = src
        self.files = {}  # module path (tuple) -> file (relative to src)
        self.info = {}  # file -> (toks, pairs, test spans)
        for dirpath, dirs, names in os.walk(src):
            dirs.sort()
            for f in sorted(names):
                if not f.endswith(".rs"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), src)
                parts = rel[:-3].split(os.sep)
                if any(rel == s or rel.startswith(s + os.sep) for s in skip):
                    continue
                if "tests" in parts[:-1] or parts[-1] == "tests":
                    continue
                if parts[-1] in ("mod", "lib", "main"):
                    parts = parts[:-1]
                self.files[tuple(parts)] = rel
        self.modules = {v: k for k, v in self.files.items()}
        for mod, rel in self.files.items():
            text = open(os.path.join(src, rel), encoding="utf-8").read()
            toks = list(rustsrc.tokens(text))
            pairs = rustsrc.matching(toks)
            self.info[rel] = (toks, pairs, rustsrc.test_spans(toks, pairs))
        # Files declared under #[cfg(test)] are test code.
        for rel, (toks, pairs, spans) in list(self.info.items()):
            for _, _, k, end, _ in spans:
                words = [t[1] for t in toks[k:end + 1]]
                if "mod" in words and words[-1] == ";":
                    name = words[words.index("mod") + 1]
                    child = self.modules[rel] + (name,)
                    if child in self.files and not any(t[1] == "path" for t in toks[k:end]):
                        del self.info[self.files.pop(child)]
        self.modules = {v: k for k, v in self.files.items()}
        self.defined = {rel: self._definitions(rel) for rel in self.info}
        self.imports = {rel: self._imports(rel) for rel in self.info}

    # -- reading a file ------------------------------------------------------------------------

    def _code(self, rel):
        """The file's tokens outside test code, each with its inline module path."""
        toks, pairs, spans = self.info[rel]
        skip = set()
        for _, _, a, b, _ in spans + rustsrc.test_spans(toks, pairs, "doc"):
            skip.update(range(a, b + 1))
        inline = []  # (closing token, name)
        base = self.modules[rel]
        out = []
        for k, t in enumerate(toks):
            while inline and k > inline[-1][0]:
                inline.pop()
            if k in skip:
                continue
            if t[1] == "mod" and k + 2 < len(toks) and toks[k + 2][1] == "{":
                inline.append((pairs.get(k + 2, len(toks)), toks[k + 1][1]))
            out.append((k, base + tuple(n for _, n in inline)))
        return out

    def _use_trees(self, rel):
        """(module path, is a re-export, [(segments, alias)]) of each `use` of the file's code."""
        toks = self.info[rel][0]
        found = []
        for k, mod in self._code(rel):
            if toks[k][1] != "use" or toks[k][0] != "ident":
                continue
            j = k - 1
            while j >= 0 and toks[j][1] in (")", "crate", "super", "self", "in", "(") and toks[j][1] != "pub":
                j -= 1
            public = j >= 0 and toks[j][1] == "pub"
            end = k + 1
            while end < len(toks) and toks[end][1] != ";":
                end += 1
            found.append((mod, public, _expand([t[1] for t in toks[k + 1:end]])))
        return found

    def _imports(self, rel):
        """name -> (module path, segments) of every name the file's `use`s bring in, and
        the globs (module path, segments) under the key "*"."""
        names = {"*": []}
        for mod, _, trees in self._use_trees(rel):
            for segs, alias in trees:
                if segs[-1] == "*":
                    names["*"].append((mod, segs[:-1]))
                elif segs[-1] != "self" or len(segs) > 1:
                    last = segs[-2] if segs[-1] == "self" else segs[-1]
                    names[alias or last] = (mod, segs[:-1] if segs[-1] == "self" else segs)
        return names

    def _definitions(self, rel):
        toks = self.info[rel][0]
        names = set()
        for k, _ in self._code(rel):
            if toks[k][1] in ITEM_WORDS and toks[k][0] == "ident" and k + 2 < len(toks):
                names.add((toks[k + 2] if toks[k + 1][1] == "!" else toks[k + 1])[1])
        return names

    def _defines(self, rel, name):
        return name in self.defined[rel]

    # -- resolving a path ----------------------------------------------------------------------

    def resolve(self, mod, segs, depth=0):
        """The file defining what `segs`, written in module `mod`, names; None outside the crate."""
        if depth > 16 or not segs:
            return None
        first = segs[0]
        if first == "crate":
            cur, rest = (), segs[1:]
        elif first in ("super", "self"):
            cur, rest = mod, segs
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    cur = cur[:-1]
                rest = rest[1:]
        elif mod + (first,) in self.files or self._file_of(mod) and self._declares(mod, first):
            cur, rest = mod, segs
        else:
            return None
        # Inline modules are part of their file.
        while cur not in self.files and cur:
            cur = cur[:-1]
        while rest and cur + (rest[0],) in self.files:
            cur, rest = cur + (rest[0],), rest[1:]
        rel = self.files.get(cur)
        if rel is None or not rest or rest[0] == "*":
            return rel
        name = rest[0]
        if self._defines(rel, name):
            return rel
        imported = self.imports[rel].get(name)
        if imported:
            at, path = imported
            return self.resolve(at, list(path) + list(rest[1:]), depth + 1)
        for at, path in self.imports[rel]["*"]:
            target = self.resolve(at, list(path), depth + 1)
            if target and target != rel and self._defines(target, name):
                return self.resolve(at, list(path) + list(rest), depth + 1)
        return rel

    def _file_of(self, mod):
        while mod not in self.files and mod:
            mod = mod[:-1]
        return self.files.get(mod)

    def _declares(self, mod, name):
        return mod + (name,) in self.files

    # -- the graph -----------------------------------------------------------------------------

    def edges(self):
        """file -> {file: the first path that made the edge}."""
        graph = {rel: {} for rel in self.info}
        for rel in self.info:
            toks = self.info[rel][0]
            # `use`s that are not re-exports.
            for mod, public, trees in self._use_trees(rel):
                if public:
                    continue
                for segs, _ in trees:
                    segs = segs[:-1] if segs[-1] == "self" and len(segs) > 1 else segs
                    target = self.resolve(mod, segs)
                    if target and target != rel:
                        graph[rel].setdefault(target, "use " + "::".join(segs))
            # Paths in the code.
            code = self._code(rel)
            in_use = set()
            for k, _ in code:
                if toks[k][1] == "use" and toks[k][0] == "ident":
                    j = k
                    while j < len(toks) and toks[j][1] != ";":
                        in_use.add(j)
                        j += 1
            prev = None
            for k, mod in code:
                t = toks[k]
                starts = t[0] == "ident" and (prev is None or toks[prev][1] != "::") and k not in in_use
                prev = k
                if not starts or k + 1 >= len(toks) or toks[k + 1][1] != "::":
                    continue
                if t[1] not in ("crate", "super", "self") and mod + (t[1],) not in self.files:
                    continue
                segs, j = [t[1]], k + 1
                while j + 1 < len(toks) and toks[j][1] == "::" and toks[j + 1][0] == "ident":
                    segs.append(toks[j + 1][1])
                    j += 2
                target = self.resolve(mod, segs)
                if target and target != rel:
                    graph[rel].setdefault(target, "::".join(segs))
        return graph


def _expand(words):
    """The paths of a use tree's words: `a::{b, c::d as e, f::*}` -> [(segs, alias), ..]."""
    out = []

    def tree(i, prefix):
        segs = list(prefix)
        while i < len(words):
            w = words[i]
            if w == "{":
                i += 1
                while i < len(words) and words[i] != "}":
                    i = tree(i, segs)
                    if i < len(words) and words[i] == ",":
                        i += 1
                return i + 1
            if w == "::":
                i += 1
                continue
            if w in (",", "}"):
                break
            if w == "as":
                out.append((segs, words[i + 1]))
                return i + 2
            segs.append(w)
            i += 1
        if segs and segs != list(prefix):
            out.append((segs, None))
        return i

    tree(0, [])
    return [(s, a) for s, a in out if s]


def circles(graph):
    """The strongly connected parts with more than one file, each as one circle through them."""
    index, low, stack, on, parts = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                parts.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for part in parts:
        # A shortest circle through the part's first file.
        start, inside = part[0], set(part)
        prev, queue = {start: None}, [start]
        end = None
        while queue and end is None:
            nxt = []
            for v in queue:
                for w in sorted(graph[v]):
                    if w == start:
                        end = v
                        break
                    if w in inside and w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if end is not None:
                    break
            queue = nxt
        path = [end]
        while prev[path[-1]] is not None:
            path.append(prev[path[-1]])
        path.reverse()
        found.append((part, path + [start]))
    return found
