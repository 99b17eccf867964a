"""Reading Rust sources well enough for the repository's checks (scripts/sizes, scripts/module-deps):
a tokenizer that knows comments (nested block comments too), strings, raw strings, byte strings,
char literals and lifetimes, so braces and paths inside them are not taken for code; the spans of
`#[cfg(test)]` items; the functions of a file with their bodies' lines; and the workspace's
crates. Python 3 standard library only."""
import os, re

# A token: (kind, text, line, index into the source). Kinds: "ident", "punct", "lit".
_IDENT = re.compile(r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*")
_NUM = re.compile(r"[0-9][0-9A-Za-z_]*(?:\.[0-9][0-9A-Za-z_]*)?")
_CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]+\}|.)|[^\\'\n])'")
_RAW = re.compile(r'(?:br|cr|r)(#*)"')


def tokens(src):
    """Yields the code tokens of `src`, comments left out, literals as one token each."""
    i, line, n = 0, 1, len(src)
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            line += src.count("\n", i, j)
            i = j
        elif (m := _RAW.match(src, i)) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, m.end())
            j = n if j < 0 else j + len(end)
            yield ("lit", src[i:j], line, i)
            line += src.count("\n", i, j)
            i = j
        elif c == '"' or (c in "bc" and src.startswith('"', i + 1)):
            j = i + (2 if c != '"' else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            yield ("lit", src[i:j], line, i)
            line += src.count("\n", i, j)
            i = j
        elif c == "'" or (c == "b" and src.startswith("'", i + 1)):
            m = _CHAR.match(src, i + (1 if c == "b" else 0))
            if m:
                yield ("lit", src[i:m.end()], line, i)
                i = m.end()
            else:  # a lifetime or a label
                m = _IDENT.match(src, i + 1)
                j = m.end() if m else i + 1
                yield ("lifetime", src[i:j], line, i)
                i = j
        elif (m := _IDENT.match(src, i)):
            yield ("ident", m.group(0), line, i)
            i = m.end()
        elif (m := _NUM.match(src, i)):
            yield ("lit", m.group(0), line, i)
            i = m.end()
        else:
            if src.startswith("::", i):
                yield ("punct", "::", line, i)
                i += 2
            else:
                yield ("punct", c, line, i)
                i += 1


def matching(toks):
    """Maps each opening brace, bracket or parenthesis's token index to its closing one's."""
    pairs, stack = {}, []
    for k, t in enumerate(toks):
        if t[0] != "punct":
            continue
        if t[1] in "{[(":
            stack.append(k)
        elif t[1] in "}])" and stack:
            pairs[stack.pop()] = k
    return pairs


def _attr_end(toks, k, pairs):
    """If toks[k] starts an attribute (`#[..]`, `#![..]`), the index after it; else None."""
    if toks[k][1] != "#" or toks[k][0] != "punct":
        return None
    j = k + 1
    if j < len(toks) and toks[j][1] == "!":
        j += 1
    if j < len(toks) and toks[j][1] == "[" and j in pairs:
        return pairs[j] + 1
    return None


def _is_cfg(toks, k, end, word):
    """Whether the attribute toks[k:end] is `#[cfg(word)]` (or `cfg(all(word, ..))`)."""
    words = [t[1] for t in toks[k:end]]
    return len(words) > 4 and words[2] == "cfg" and word in words and "not" not in words


def item_end(toks, k, pairs):
    """The index of the last token of the item starting at toks[k] (its closing brace, or `;`)."""
    j = k
    while j < len(toks):
        t = toks[j]
        if t[0] == "punct" and t[1] in "([" and j in pairs:
            j = pairs[j] + 1
            continue
        if t[0] == "punct" and t[1] == "{":
            return pairs.get(j, len(toks) - 1)
        if t[0] == "punct" and t[1] == ";":
            return j
        j += 1
    return len(toks) - 1


def test_spans(toks, pairs, word="test"):
    """(first line, last line, first token, last token, is an inline `mod`) of every item under
    `#[cfg(test)]` (or `#[cfg(word)]`: `doc`, for items only the documentation sees)."""
    spans, k = [], 0
    while k < len(toks):
        end = _attr_end(toks, k, pairs)
        if end is None:
            k += 1
            continue
        if not _is_cfg(toks, k, end, word) or toks[k + 1][1] == "!":
            k = end
            continue
        # Further attributes, then the item itself.
        j = end
        while (e := _attr_end(toks, j, pairs)) is not None:
            j = e
        last = item_end(toks, j, pairs)
        words = [t[1] for t in toks[j:j + 4]]
        is_mod = "mod" in words and toks[last][1] == "}"
        spans.append((toks[k][2], toks[last][2], k, last, is_mod))
        k = last + 1
    return spans


def functions(toks, pairs):
    """(name, line of `fn`, first body line, last body line, token index) of every function with a
    body, nested ones too."""
    found = []
    for k, t in enumerate(toks):
        if t[0] != "ident" or t[1] != "fn" or k + 1 >= len(toks) or toks[k + 1][0] != "ident":
            continue
        j = k + 2
        while j < len(toks):
            u = toks[j]
            if u[0] == "punct" and u[1] in "([" and j in pairs:
                j = pairs[j] + 1
                continue
            if u[0] == "punct" and u[1] in "{;":
                break
            j += 1
        if j < len(toks) and toks[j][1] == "{" and j in pairs:
            found.append((toks[k + 1][1], t[2], toks[j][2], toks[pairs[j]][2], k))
    return found


def workspace_crates(root):
    """The `src` folders of the workspace's member crates, from the root Cargo.toml's `members`."""
    text = open(os.path.join(root, "Cargo.toml"), encoding="utf-8").read()
    m = re.search(r"^members\s*=\s*\[(.*?)\]", text, re.S | re.M)
    members = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return [os.path.join(root, d, "src") for d in members if os.path.isdir(os.path.join(root, d, "src"))]
