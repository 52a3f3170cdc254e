"""Tell a file that needs a newer Python apart from a file with a syntax error.

``ast.parse`` parses with the grammar of the running interpreter: under Python 3.11 a valid
``type P = int`` (3.12) is an "invalid syntax" like any typo. :func:`explain` is called only when the
parse failed; it looks for constructs of later Pythons, *tries* them by rewriting each one into an
older equivalent (line numbers kept) and parsing again, and says "needs Python 3.12+" only when that
makes the file parse. Otherwise the real syntax error stands (reported where it really is, with a
note when the file also uses newer syntax).

Constructs recognised (the version that introduced them):

* 3.10: ``match`` statements (PEP 634);
* 3.11: ``except*`` (PEP 654), star-unpacking in subscripts and ``*args: *Ts`` (PEP 646);
* 3.12: ``type X = ...`` (PEP 695), type parameter lists ``def f[T]``/``class C[T]`` (PEP 695),
  f-strings with the same quotes nested, backslashes, comments or line breaks in a replacement field
  (PEP 701);
* 3.13: type parameter defaults ``[T = int]`` (PEP 696);
* 3.14: ``except A, B:`` without parentheses (PEP 758), template strings ``t"..."`` (PEP 750).

Only constructs newer than the running Python are considered, so this also works on 3.12 and later.
It scans the text with its own small lexer: the ``tokenize`` module of an older Python splits a
PEP 701 f-string in the wrong places, and libcst's native parser, which knows every newer grammar,
was tried (issue 25) and dies with SIGSEGV on a 20 000-operand ``and`` chain that CPython parses,
takes over 30 s on a 10 000-term sum in one call the per-file budget cannot interrupt, and was ~8
times slower on ordinary failing files. Pure computation on the text, linear in its length; cost
only for files that fail to parse.
"""

from __future__ import annotations

import ast
import keyword
import re
import sys
import tokenize
import warnings
from dataclasses import dataclass, field

RUNNING = sys.version_info[:2]
_NUMBER = re.compile(tokenize.Number)
_OPERATORS = sorted(["**=", "//=", ">>=", "<<=", "...", "->", ":=", "**", "//", ">>", "<<", "<=", ">=", "==", "!=",
                     "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@="], key=len, reverse=True)
_PREFIXES = {"r", "u", "b", "br", "rb", "f", "fr", "rf", "t", "tr", "rt"}
_OPEN, _CLOSE = "([{", ")]}"
#: Names before ``[`` that make it a list display or a pattern, not a subscript (``return [*a]``).
_NOT_SUBSCRIPTED = frozenset(keyword.kwlist) | {"match", "case", "type", "print", "exec"}


@dataclass(frozen=True)
class Feature:
    """One construct of a later Python: what (``name``), since when (``version``), where (``start``
    and ``end`` offsets in the text; ``line``/``col`` 1-based line, 0-based column), and the
    rewrite into older syntax that keeps line numbers (``edits``: ``(start, end, replacement)``)."""

    name: str
    version: tuple[int, int]
    start: int
    end: int
    line: int
    col: int
    edits: tuple[tuple[int, int, str], ...]


class NewerSyntaxError(SyntaxError):
    """The file's syntax is valid for a later Python than the running one.

    ``features``: what it uses (:class:`Feature`), first first; ``needed``: the oldest Python that
    parses all of them."""

    def __init__(self, features: list[Feature], filename: str | None = None):
        self.features = features
        self.needed = max(f.version for f in features)
        first = features[0]
        names = []
        for f in features:
            label = f"{f.name}, line {f.line}"
            if f.name not in {n.split(",")[0] for n in names}:
                names.append(label)
        shown = "; ".join(names[:3]) + ("; ..." if len(names) > 3 else "")
        running = ".".join(str(v) for v in sys.version_info[:3])
        version = f"{self.needed[0]}.{self.needed[1]}"
        message = (f"needs Python {version}+ ({shown}); this is Python {running}: "
                   f"run hp-invariants under Python {version} or later to check it")
        super().__init__(message, (filename, first.line, first.col + 1, None))


# ---------------------------------------------------------------------- a small lexer
@dataclass
class _Tok:
    kind: str  # NAME NUMBER STRING OP NL
    text: str
    start: int
    end: int
    flags: set = field(default_factory=set)  # for STRING: the newer features it uses


class _Lexer:
    def __init__(self, text: str):
        self.text = text
        self.n = len(text)

    # strings -------------------------------------------------------------
    def string(self, i: int, prefix: str) -> tuple[int, set]:
        """Scan the literal whose opening quote is at ``i``; return (end offset, flags)."""
        text, flags = self.text, set()
        q = text[i]
        term = q * 3 if text.startswith(q * 3, i) else q
        j = i + len(term)
        formatted = "f" in prefix or "t" in prefix
        if "t" in prefix:
            flags.add("template")
        while j < self.n:
            c = text[j]
            if text.startswith(term, j):
                return j + len(term), flags
            if c == "\\":
                j += 2
                continue
            if c == "\n" and len(term) == 1:
                return j, flags | {"unterminated"}
            if formatted and c == "{":
                if text.startswith("{{", j):
                    j += 2
                    continue
                j = self.field(j + 1, term, flags)
                continue
            j += 1
        return self.n, flags | {"unterminated"}

    def field(self, j: int, term: str, flags: set) -> int:
        """Scan a replacement field from after its ``{``; return the offset after its ``}``."""
        text, depth = self.text, 0
        while j < self.n:
            c = text[j]
            if c == "\\":
                flags.add("backslash")
                j += 2
                continue
            if c == "\n":
                if len(term) == 1:
                    flags.add("line break")
                j += 1
                continue
            if c == "#":
                flags.add("comment")
                while j < self.n and text[j] != "\n":
                    j += 1
                continue
            if c in "'\"" or (c.isalpha() and self._prefixed_quote(j)):
                k = j
                while text[k] not in "'\"":
                    k += 1
                prefix = text[j:k].lower()
                end, inner = self.string(k, prefix)
                if term in text[k:end] or "\\" in text[k:end]:
                    flags.add("nested quotes" if term in text[k:end] else "backslash")
                flags.update(inner - {"unterminated"})
                j = end
                continue
            if c in _OPEN:
                depth += 1
            elif c in _CLOSE:
                if depth == 0:
                    return j + 1  # "}" ends the field
                depth -= 1
            elif depth == 0 and c == "!" and not text.startswith("!=", j):
                j += 1
                continue
            elif depth == 0 and c == ":":
                return self.spec(j + 1, term, flags)
            j += 1
        return j

    def spec(self, j: int, term: str, flags: set) -> int:
        """Scan a format spec (after ``:``) up to the ``}`` that closes its field."""
        text = self.text
        while j < self.n:
            c = text[j]
            if c == "{":
                j = self.field(j + 1, term, flags)
                continue
            if c == "}":
                return j + 1
            if text.startswith(term, j) or (c == "\n" and len(term) == 1):
                return j
            j += 1
        return j

    def _prefixed_quote(self, j: int) -> bool:
        k = j
        while k < self.n and self.text[k].isalpha() and k - j < 3:
            k += 1
        return k < self.n and self.text[k] in "'\"" and self.text[j:k].lower() in _PREFIXES and (
            j == 0 or not (self.text[j - 1].isalnum() or self.text[j - 1] == "_"))

    # tokens --------------------------------------------------------------
    def tokens(self) -> list[_Tok]:
        text, out, depth, i = self.text, [], 0, 0
        while i < self.n:
            c = text[i]
            if c in " \t\f":
                i += 1
            elif c == "\\" and text.startswith("\n", i + 1):
                i += 2
            elif c == "\\" and text.startswith("\r\n", i + 1):
                i += 3
            elif c in "\r\n":
                if depth == 0 and out and out[-1].kind != "NL":
                    out.append(_Tok("NL", "\n", i, i + 1))
                i += 1
            elif c == "#":
                while i < self.n and text[i] not in "\r\n":
                    i += 1
            elif c in "'\"":
                end, flags = self.string(i, "")
                out.append(_Tok("STRING", text[i:end], i, end, flags))
                i = end
            elif c.isalpha() or c == "_" or ord(c) > 127:
                j = i
                while j < self.n and (text[j].isalnum() or text[j] == "_" or ord(text[j]) > 127):
                    j += 1
                if j < self.n and text[j] in "'\"" and text[i:j].lower() in _PREFIXES:
                    end, flags = self.string(j, text[i:j].lower())
                    out.append(_Tok("STRING", text[i:end], i, end, flags))
                    i = end
                else:
                    out.append(_Tok("NAME", text[i:j], i, j))
                    i = j
            elif c.isdigit() or (c == "." and text[i + 1:i + 2].isdigit()):
                m = _NUMBER.match(text, i)
                j = m.end() if m and m.end() > i else i + 1
                out.append(_Tok("NUMBER", text[i:j], i, j))
                i = j
            else:
                op = next((o for o in _OPERATORS if text.startswith(o, i)), c)
                if op in _OPEN:
                    depth += 1
                elif op in _CLOSE:
                    depth = max(0, depth - 1)
                out.append(_Tok("OP", op, i, i + len(op)))
                i += len(op)
        out.append(_Tok("NL", "", self.n, self.n))
        return out


# ---------------------------------------------------------------------- the constructs
def _matching(toks: list[_Tok], k: int) -> int:
    """Index of the bracket closing the one at ``toks[k]`` (or the last token)."""
    depth = 0
    for m in range(k, len(toks)):
        if toks[m].kind == "OP" and toks[m].text in _OPEN:
            depth += 1
        elif toks[m].kind == "OP" and toks[m].text in _CLOSE:
            depth -= 1
            if depth == 0:
                return m
    return len(toks) - 1


def _header_colon(toks: list[_Tok], k: int) -> int | None:
    """Index of the first ``:`` at bracket depth 0 from ``k`` on, in the same logical line."""
    depth = 0
    for m in range(k, len(toks)):
        t = toks[m]
        if t.kind == "NL":
            return None
        if t.kind == "OP":
            if t.text in _OPEN:
                depth += 1
            elif t.text in _CLOSE:
                depth -= 1
            elif t.text == ":" and depth == 0:
                return m
    return None


def _blank(text: str, start: int, end: int) -> str:
    """What replaces ``text[start:end]`` so that lines stay where they were: its line breaks."""
    return "\n" * text.count("\n", start, end)


def _features(text: str) -> list[Feature]:
    toks = _Lexer(text).tokens()
    line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def where(offset: int) -> tuple[int, int]:
        import bisect

        line = bisect.bisect_right(line_starts, offset)
        return line, offset - line_starts[line - 1]

    found: list[Feature] = []

    def add(name: str, version: tuple[int, int], start: int, end: int, *edits: tuple[int, int, str]) -> None:
        line, col = where(start)
        found.append(Feature(name, version, start, end, line, col, tuple(edits)))

    def params(k: int) -> tuple[int, tuple[int, int]]:
        """The type parameter list opening at ``toks[k]``: its closing index and its version."""
        close = _matching(toks, k)
        depth, version = 0, (3, 12)
        for t in toks[k + 1:close]:
            if t.kind == "OP" and t.text in _OPEN:
                depth += 1
            elif t.kind == "OP" and t.text in _CLOSE:
                depth -= 1
            elif t.kind == "OP" and t.text == "=" and depth == 0:
                version = (3, 13)
        return close, version

    stmt_start = True
    depth = 0
    for k, t in enumerate(toks):
        nxt = toks[k + 1] if k + 1 < len(toks) else None
        after = toks[k + 2] if k + 2 < len(toks) else None
        if t.kind == "STRING":
            pep701 = t.flags & {"nested quotes", "backslash", "comment", "line break"}
            if "template" in t.flags:
                add("template string", (3, 14), t.start, t.end,
                    (t.start, t.end, '""' if "\n" not in t.text else '"""' + _blank(text, t.start, t.end) + '"""'))
            elif pep701:
                name = "f-string with " + sorted(pep701)[0] + " in a replacement field"
                add(name, (3, 12), t.start, t.end,
                    (t.start, t.end, '""' if "\n" not in t.text else '"""' + _blank(text, t.start, t.end) + '"""'))
        elif t.kind == "NAME" and stmt_start and depth == 0 and nxt is not None:
            if t.text == "type" and nxt.kind == "NAME" and after is not None and after.text in ("=", "["):
                edits = [(t.start, nxt.start, "")]
                version = (3, 12)
                if after.text == "[":
                    close, version = params(k + 2)
                    edits.append((after.start, toks[close].end, _blank(text, after.start, toks[close].end)))
                add("type statement", version, t.start, nxt.end, *edits)
            elif t.text in ("def", "class") and nxt.kind == "NAME" and after is not None and after.text == "[":
                close, version = params(k + 2)
                add("type parameters" if version < (3, 13) else "type parameter defaults", version,
                    after.start, toks[close].end, (after.start, toks[close].end, _blank(text, after.start, toks[close].end)))
            elif t.text == "except":
                star = nxt.kind == "OP" and nxt.text == "*"
                first = k + 2 if star else k + 1
                if star:
                    add("except*", (3, 11), t.start, nxt.end, (nxt.start, nxt.end, " "))
                colon = _header_colon(toks, first)
                if colon is not None and colon > first:
                    inner = toks[first:colon]
                    level, commas, has_as = 0, False, False
                    for u in inner:
                        if u.kind == "OP" and u.text in _OPEN:
                            level += 1
                        elif u.kind == "OP" and u.text in _CLOSE:
                            level -= 1
                        elif level == 0 and u.kind == "OP" and u.text == ",":
                            commas = True
                        elif level == 0 and u.kind == "NAME" and u.text == "as":
                            has_as = True
                    if commas and not has_as:
                        add("except without parentheses", (3, 14), toks[first].start, toks[colon - 1].end,
                            (toks[first].start, toks[first].start, "("), (toks[colon].start, toks[colon].start, ")"))
            elif t.text in ("match", "case") and nxt.kind != "NL" and not (
                    nxt.kind == "OP" and nxt.text in ("=", ".", ":", ",", ")", "]", "}", ";") or
                    (nxt.kind == "OP" and nxt.text.endswith("=") and nxt.text not in ("==",))):
                colon = _header_colon(toks, k + 1)
                if colon is not None:
                    end = toks[colon].start
                    add("match statement", (3, 10), t.start, end,
                        (t.start, end, "if (1" + _blank(text, t.start, end) + ")"))
        # PEP 646: a star in a subscript ``x[*Ts]`` or in an annotation of *args ``*args: *Ts``
        if t.kind == "OP" and t.text == "[" and k > 0 and not (k >= 2 and toks[k - 2].text in ("def", "class", "type")) and (
                (toks[k - 1].kind == "NAME" and toks[k - 1].text not in _NOT_SUBSCRIPTED)
                or toks[k - 1].text in (")", "]")):
            close = _matching(toks, k)
            level = 0
            for m in range(k + 1, close):
                u = toks[m]
                if u.kind == "OP" and u.text in _OPEN:
                    level += 1
                elif u.kind == "OP" and u.text in _CLOSE:
                    level -= 1
                elif level == 0 and u.kind == "OP" and u.text == "*" and toks[m - 1].text in ("[", ","):
                    add("star-unpacking in a subscript", (3, 11), u.start, u.end, (u.start, u.end, " "))
        if t.kind == "OP" and t.text == "*" and k >= 3 and toks[k - 1].text == ":" and toks[k - 2].kind == "NAME" \
                and toks[k - 3].text == "*" and depth > 0:
            add("star annotation of *args", (3, 11), t.start, t.end, (t.start, t.end, " "))
        # bookkeeping: bracket depth and where statements start
        if t.kind == "OP" and t.text in _OPEN:
            depth += 1
        elif t.kind == "OP" and t.text in _CLOSE:
            depth = max(0, depth - 1)
        stmt_start = t.kind == "NL" or (t.kind == "OP" and t.text in (";", ":") and depth == 0) or (
            stmt_start and t.kind == "NAME" and t.text == "async")  # ``async def g[T]()``
    found.sort(key=lambda f: f.start)
    return [f for f in found if f.version > RUNNING]


# ---------------------------------------------------------------------- trying them
def _apply(text: str, features: list[Feature]) -> str:
    edits = sorted((e for f in features for e in f.edits), key=lambda e: (e[0], e[1]), reverse=True)
    for start, end, replacement in edits:
        text = text[:start] + replacement + text[end:]
    return text


def _parse_error(text: str) -> SyntaxError | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as exc:
        return exc
    except (ValueError, RecursionError, MemoryError) as exc:  # not "parses": no claim on this basis
        return SyntaxError(type(exc).__name__)
    return None


def explain(text: str, error: SyntaxError, filename: str | None = None) -> SyntaxError:
    """Return what to report for ``text``, whose parse raised ``error``.

    A :class:`NewerSyntaxError` when rewriting the constructs of later Pythons found in ``text``
    makes it parse; else, when some of them were confirmed (the error moved past them) but another
    error remains, that error (a ``SyntaxError`` whose message says the file also needs a newer
    Python); else ``error`` itself. Never raises.
    """
    try:
        features = _features(text)
    except Exception:  # noqa: BLE001 - an explanation must never make things worse
        return error
    if not features:
        return error
    if _parse_error(_apply(text, features)) is None:
        return NewerSyntaxError(features, filename)
    # some construct is not what it looked like, or there is a real error too: try them in order
    kept: list[Feature] = []
    current = error
    for feature in features:
        if current.lineno is not None and feature.line > current.lineno:
            break
        remaining = _parse_error(_apply(text, kept + [feature]))
        if remaining is None:
            return NewerSyntaxError(kept + [feature], filename)
        end_line = text.count("\n", 0, feature.end) + 1
        if (remaining.lineno or 0) > end_line:
            kept.append(feature)
            current = remaining
    if not kept:
        return error
    needed = max(f.version for f in kept)
    real = SyntaxError(f"{current.msg} (the file also needs Python {needed[0]}.{needed[1]}+: {kept[0].name})",
                       (filename, current.lineno, current.offset, current.text))
    return real
