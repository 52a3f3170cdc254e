"""Stable finding identity: a fingerprint that survives line moves, unrelated edits and renames.

A fingerprint hashes three things, as SARIF's ``partialFingerprints`` intend:

* the rule id (``E9501``);
* the enclosing qualified name (``HSDPParam.reset_sharded_param``, the finding's ``obj``), not the
  file's path, so a moved or renamed file keeps its findings' identity;
* a normalized form of the offending code: the source text of the finding's range, re-printed by
  ``ast.unparse`` when it parses on its own (so indentation, line breaks, comments and quoting do
  not matter), else with its whitespace collapsed.

Line and column numbers are not part of it: code that moves keeps its fingerprint. Two identical
findings in the same scope share one fingerprint; matching (:func:`match`) counts them.

A fingerprint lives beside its finding (:class:`Fingerprinted`), never inside
:class:`~hp_invariants.model.Finding`: the rules know nothing of history; the report gets it as an
:class:`hp_invariants.output.Annotation`.
"""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
import warnings
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from hp_invariants.model import Finding

if TYPE_CHECKING:  # pragma: no cover
    from hp_invariants.output import Annotation



@dataclass(frozen=True)
class Fingerprinted:
    """A finding with its ``fingerprint`` and, under a baseline or ``--since``, its SARIF
    ``baseline_state`` (``"new"``): what the history features add to a finding, kept beside it."""

    finding: Finding
    fingerprint: str
    baseline_state: str = ""

    def annotation(self) -> "Annotation":
        """The :class:`hp_invariants.output.Annotation` the report shows for the finding."""
        from hp_invariants.output import Annotation

        return Annotation(self.fingerprint, self.baseline_state)

    def marked_new(self) -> "Fingerprinted":
        """This finding with ``baseline_state`` ``"new"``."""
        return self if self.baseline_state == "new" else Fingerprinted(self.finding, self.fingerprint, "new")


def normalize_code(text: str) -> str:
    """Return a layout-independent form of a piece of Python code.

    Parses ``text`` (dedented) and re-prints it with ``ast.unparse``; when it does not parse on its
    own (a fragment), falls back to the text with comments dropped and whitespace collapsed.
    """
    snippet = textwrap.dedent(text).strip()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.unparse(ast.parse(snippet))
    except (SyntaxError, ValueError, RecursionError):
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.unparse(ast.parse("(" + snippet + ")"))
    except (SyntaxError, ValueError, RecursionError):
        snippet = re.sub(r"#[^\n]*", "", snippet)
        return " ".join(snippet.split())


def finding_code(finding: Finding, source_text: str) -> str:
    """Return the exact source text of ``finding``'s range in ``source_text`` (its file's text)."""
    lines = source_text.splitlines(keepends=True)
    first, last = finding.line - 1, finding.end_line - 1
    if not 0 <= first < len(lines):
        return ""
    if first == last:
        return lines[first][finding.col:finding.end_col]
    chunk = [lines[first][finding.col:]] + lines[first + 1:last]
    if last < len(lines):
        chunk.append(lines[last][:finding.end_col])
    return "".join(chunk)


def fingerprint(finding: Finding, source_text: str) -> str:
    """Return the fingerprint of ``finding`` (32 hex digits) given its file's ``source_text``."""
    code = normalize_code(finding_code(finding, source_text))
    key = "\x00".join((finding.rule_id, finding.obj, code))
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def annotate(findings: Sequence[Finding], read_text: Callable[[str], str | None]) -> list[Fingerprinted]:
    """Return each of ``findings`` with its fingerprint, in the same order.

    ``read_text(path)`` returns a file's decoded text (``None`` when unreadable: the finding then
    gets a fingerprint of its rule, scope and message); each file is read once.
    """
    texts: dict[str, str | None] = {}
    result = []
    for finding in findings:
        if finding.path not in texts:
            texts[finding.path] = read_text(finding.path)
        text = texts[finding.path]
        if text is None:
            key = "\x00".join((finding.rule_id, finding.obj, finding.message))
            fp = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
        else:
            fp = fingerprint(finding, text)
        result.append(Fingerprinted(finding, fp))
    return result


def match(current: Iterable[Fingerprinted], known: Iterable[str],
          places: Iterable[tuple[str, str]] = (), place_of: Callable[[Finding], str] | None = None,
          ) -> tuple[list[Fingerprinted], list[Fingerprinted], Counter]:
    """Split ``current`` (fingerprinted findings) against the fingerprints ``known`` (a multiset).

    Returns ``(new, unchanged, left)``: the findings whose fingerprint is not (or no longer often
    enough) in ``known``, those matched, and what is left of ``known`` unmatched. ``places``: the
    ``(fingerprint, place)`` of each known finding (a root-relative path) and ``place_of(finding)`` the
    place of a current one: a finding is matched first to a known one of the same place, then to any
    (a fingerprint names no file, so that a moved file keeps its findings): of a violation and its copy
    into another file, the copy is the new one.
    """
    current = list(current)
    left = Counter(known)
    matched: set[int] = set()
    here = Counter(places)
    if here and place_of is not None:
        for i, item in enumerate(current):
            key = (item.fingerprint, place_of(item.finding))
            if here[key] > 0 and left[item.fingerprint] > 0:
                here[key] -= 1
                left[item.fingerprint] -= 1
                matched.add(i)
    new, unchanged = [], []
    for i, finding in enumerate(current):
        if i in matched:
            unchanged.append(finding)
        elif left[finding.fingerprint] > 0:
            left[finding.fingerprint] -= 1
            unchanged.append(finding)
        else:
            new.append(finding)
    return new, unchanged, +left


def read_text_file(path: str) -> str | None:
    """Read and decode a Python file the way the checker does (``None`` when that fails)."""
    from hp_invariants.source import SourceFile, read_source_bytes

    try:
        raw, _ = read_source_bytes(path, None)
        return SourceFile.from_bytes(path, raw).text
    except Exception:  # noqa: BLE001 - an unreadable file only loses its precise fingerprint
        return None
