"""``# pylint: disable=`` and ``# noqa:`` comments for the CLI front end (pylint does its own).

Semantics follow pylint and flake8:

* a trailing ``# pylint: disable=X`` covers its line only (what pylint does for these messages,
  even on a ``def`` or ``if`` line: tested against pylint in ``tests/test_suppressions.py``);
* a ``# pylint: disable=X`` on a line of its own covers the rest of the enclosing block (until a
  code line indented less than the comment), or up to a matching ``# pylint: enable=X``;
* ``# pylint: disable-next=X`` covers the next code line;
* ``# noqa: X`` covers its line; a bare ``# noqa`` covers every rule on its line.

``X`` is a rule id or symbol, a comma-separated list of them, or ``all``. Only comments are read
(:mod:`tokenize`), never strings, and only in files that have findings or mention our codes.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from hp_invariants.model import Finding
from hp_invariants.api import Rule

_PYLINT = re.compile(r"pylint:\s*(disable-next|disable|enable)\s*=\s*([\w\-, ]+)")
_NOQA = re.compile(r"#\s*noqa\b(?::\s*(?P<codes>[\w\-]+(?:\s*,\s*[\w\-]+)*))?", re.IGNORECASE)

USELESS_ID = "I9500"
USELESS_SYMBOL = "useless-suppression"
USELESS_EXPLAINED = ("A `# noqa:`/`# pylint: disable=` comment naming an hp-invariants rule suppresses nothing "
                     "on its line (reported only with `report-unused-suppressions`). Remove it.")
"""What ``hp-invariants explain I9500`` prints after the code and symbol."""


@dataclass
class Suppression:
    """One code named by one suppression comment, and the lines it covers."""

    line: int
    col: int
    code: str
    first: int
    last: int
    kind: str
    used: bool = field(default=False)

    def covers(self, finding: Finding) -> bool:
        """Return True if this suppression silences ``finding``."""
        if not self.first <= finding.line <= self.last:
            return False
        return self.code in ("all", "*", finding.symbol) or self.code.upper() == finding.rule_id


def parse_suppressions(text: str) -> list[Suppression]:
    """Return the suppressions found in the comments of ``text``."""
    lines = text.splitlines()
    result: list[Suppression] = []
    open_regions: dict[str, Suppression] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return result
    for index, tok in enumerate(tokens):
        if tok.type != tokenize.COMMENT:
            continue
        line, col = tok.start
        body = tok.string.lstrip("#").strip()
        own_line = not lines[line - 1][:col].strip() if line - 1 < len(lines) else True
        for match in _PYLINT.finditer(body):
            action, raw_codes = match.group(1), match.group(2)
            codes = [c.strip() for c in raw_codes.split(",") if c.strip()]
            if action == "enable":
                for code in codes:
                    region = open_regions.pop(code, None)
                    if region is not None:
                        region.last = line
                continue
            for code in codes:
                if action == "disable-next":
                    nxt = _next_code_line(tokens, index)
                    result.append(Suppression(line, col, code, nxt, nxt, "pylint"))
                elif own_line:
                    end = _block_end(lines, line, col)
                    sup = Suppression(line, col, code, line, end, "pylint")
                    open_regions[code] = sup
                    result.append(sup)
                else:
                    result.append(Suppression(line, col, code, line, line, "pylint"))
        noqa = _NOQA.search(tok.string)
        if noqa:
            codes_text = noqa.group("codes")
            codes = re.split(r"[,\s]+", codes_text.strip()) if codes_text else ["*"]
            for code in codes:
                if code:
                    result.append(Suppression(line, col, code, line, line, "noqa"))
    return result


def _next_code_line(tokens: list[tokenize.TokenInfo], index: int) -> int:
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for tok in tokens[index + 1 :]:
        if tok.type not in skip:
            return tok.start[0]
    return tokens[index].start[0] + 1


def _block_end(lines: Sequence[str], line: int, col: int) -> int:
    for number in range(line + 1, len(lines) + 1):
        text = lines[number - 1]
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(text) - len(text.lstrip())
        if indent < col:
            return number - 1
    return len(lines) + 1


def apply_suppressions(
    findings: Sequence[Finding], suppressions: Sequence[Suppression]
) -> list[Finding]:
    """Return the findings not silenced; marks the suppressions that silenced something as used."""
    kept: list[Finding] = []
    for finding in findings:
        hit = [s for s in suppressions if s.covers(finding)]
        for sup in hit:
            sup.used = True
        if not hit:
            kept.append(finding)
    return kept


def mentions_our_codes(text: str, rules: Iterable[Rule]) -> bool:
    """Cheap test: does ``text`` hold a suppression comment that could name one of ``rules``?"""
    if "pylint:" not in text and "noqa" not in text.lower():
        return False
    return any(r.rule_id in text or r.symbol in text for r in rules)


def unused(suppressions: Sequence[Suppression], rules: Iterable[Rule]) -> list[Suppression]:
    """Return the suppressions naming one of ``rules`` (by id or symbol) that silenced nothing."""
    names = {name for r in rules for name in (r.rule_id, r.symbol)}
    return [s for s in suppressions if not s.used and (s.code in names or s.code.upper() in names)]
