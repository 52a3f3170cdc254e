"""The baseline: findings accepted when hp-invariants was adopted, so ``check`` reports only new ones.

The file (``baseline = "..."`` in ``[tool.hp-invariants]``, default
``hp-invariants-baseline.json`` next to the project's ``pyproject.toml``) is JSON with one entry per
accepted finding, sorted by path, scope and rule so that a diff of it reads like a review list::

    {"version": 1, "findings": [
      {"rule": "E9504", "symbol": "wrap-overlap-hard-raise", "path": "legacy/wrap.py",
       "obj": "wrap_all", "code": "raise ValueError('already wrapped')",
       "fingerprint": "3f9c..."}]}

Findings are matched by :mod:`fingerprint <hp_invariants.history.fingerprint>`, never by line, so
moved code and renamed files stay baselined. The baseline is a ratchet: ``hp-invariants baseline``
drops entries that no longer occur and adds new findings only with ``--update``; ``check`` names
the stale entries (and fails on them with ``--fail-on-stale-baseline``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from hp_invariants.history import BASELINE_FILE
from hp_invariants.history.fingerprint import Fingerprinted, finding_code, match, normalize_code

DEFAULT_NAME = BASELINE_FILE
FORMAT_VERSION = 1


class BaselineError(Exception):
    """The baseline file cannot be read or is not a baseline."""


@dataclass(frozen=True)
class Entry:
    """One accepted finding: identity (``fingerprint``) plus what a reviewer reads."""

    fingerprint: str
    rule: str
    symbol: str
    path: str
    obj: str
    code: str

    def to_dict(self) -> dict[str, str]:
        """The JSON form (keys in review order)."""
        return {"rule": self.rule, "symbol": self.symbol, "path": self.path, "obj": self.obj,
                "code": self.code, "fingerprint": self.fingerprint}

    def describe(self) -> str:
        """``path: ID symbol in obj: code`` for messages."""
        where = f" in {self.obj}" if self.obj else ""
        return f"{self.path}: {self.rule} {self.symbol}{where}: {self.code}"


@dataclass
class Baseline:
    """The entries of a baseline file; ``root`` is the folder paths are relative to."""

    root: Path
    entries: list[Entry] = field(default_factory=list)

    def fingerprints(self) -> Counter:
        """The multiset of fingerprints."""
        return Counter(e.fingerprint for e in self.entries)


def entry_for(item: Fingerprinted, source_text: str | None, root: Path) -> Entry:
    """Return the baseline :class:`Entry` of a fingerprinted finding (``source_text``: its file's text)."""
    finding = item.finding
    code = normalize_code(finding_code(finding, source_text)) if source_text else finding.message
    code = code if len(code) <= 200 else code[:197] + "..."
    return Entry(item.fingerprint, finding.rule_id, finding.symbol, relative_path(finding.path, root), finding.obj,
                 " ".join(code.split()))


def relative_path(path: str, root: Path) -> str:
    """``path`` relative to ``root`` (posix), or absolute when it lies outside ``root``."""
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    if rel.startswith(".."):
        return Path(os.path.abspath(path)).as_posix()
    return Path(rel).as_posix()


def load(path: Path, root: Path | None = None) -> Baseline:
    """Read a baseline file whose paths are relative to ``root`` (default: the file's folder);
    raises :class:`BaselineError` naming the file when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read the baseline: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise BaselineError(f"{path}: not a baseline file (invalid JSON: {exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise BaselineError(f"{path}: not a baseline file (expected an object with a 'findings' list)")
    entries = []
    for i, item in enumerate(data["findings"]):
        try:
            entries.append(Entry(str(item["fingerprint"]), str(item["rule"]), str(item.get("symbol", "")),
                                 str(item.get("path", "")), str(item.get("obj", "")), str(item.get("code", ""))))
        except (KeyError, TypeError) as exc:
            raise BaselineError(f"{path}: entry {i + 1} lacks 'fingerprint' or 'rule'") from exc
    return Baseline(root or path.parent, entries)


def dump(baseline: Baseline, path: Path) -> None:
    """Write ``baseline`` to ``path`` (sorted entries, one key per line: diff-friendly)."""
    entries = sorted(baseline.entries, key=lambda e: (e.path, e.obj, e.rule, e.code, e.fingerprint))
    data = {
        "version": FORMAT_VERSION,
        "comment": "Findings accepted when hp-invariants was adopted: `hp-invariants check` reports only "
                   "findings not listed here. Review changes to this file; `hp-invariants baseline` only "
                   "removes entries that no longer occur (add new ones with --update).",
        "findings": [e.to_dict() for e in entries],
    }
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def filter_new(findings: Sequence[Fingerprinted], baseline: Baseline,
               checked: Iterable[str] | None = None) -> tuple[list[Fingerprinted], list[Entry]]:
    """Split fingerprinted ``findings`` against ``baseline``.

    Returns ``(new, stale)``: the findings not accepted by the baseline, and the baseline entries
    that no longer occur. An unmatched entry counts as stale only when its file was checked in this
    run (``checked``: the paths checked; ``None``: every entry counts) or its file no longer exists
    (a file that was not part of this run cannot tell).
    """
    new, _unchanged, left = match(findings, baseline.fingerprints(), [(e.fingerprint, e.path) for e in baseline.entries],
                                  lambda finding: relative_path(finding.path, baseline.root))
    checked_rel = None if checked is None else {relative_path(p, baseline.root) for p in checked}
    stale = []
    for entry in baseline.entries:
        if left[entry.fingerprint] <= 0:
            continue
        exists = (baseline.root / entry.path).exists()
        if checked_rel is None or entry.path in checked_rel or not exists:
            left[entry.fingerprint] -= 1
            stale.append(entry)
    return new, stale
