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
from typing import Collection, Mapping, Sequence

from hp_invariants.history import BASELINE_FILE
from hp_invariants.history.fingerprint import Fingerprinted, finding_code, match, normalize_code
from hp_invariants.model import Finding

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
               checked: Mapping[str, Collection[str]] | None = None,
               renamed: Mapping[str, str] | None = None) -> tuple[list[Fingerprinted], list[Entry]]:
    """Split fingerprinted ``findings`` against ``baseline``.

    Returns ``(new, stale)``: the findings not accepted by the baseline, and the baseline entries
    that no longer occur. An unmatched entry counts as stale only when this run checked its rule in its
    file (``checked``: each path checked, without a problem, to the ids of the rules run there; a rule
    id no rule has, a history message's, counts as run; ``None``: every entry counts) or its file no
    longer exists. A file over its time or size limit, a path not named, a rule not selected: none can
    tell that a finding is gone. ``renamed``: an entry's path (relative to the baseline's root) to the
    path its file has now (git's renames, with ``--since``): an accepted finding of a renamed file pairs
    with the finding of that file first, so a copy of its code elsewhere is the new one.
    """
    def place(finding: Finding) -> str:
        return relative_path(finding.path, baseline.root)

    def now(entry: Entry) -> str:
        return renamed.get(entry.path, entry.path) if renamed else entry.path

    new, unchanged, _left = match(findings, baseline.fingerprints(),
                                  [(e.fingerprint, now(e)) for e in baseline.entries], place)
    checked_rel = None if checked is None else {relative_path(p, baseline.root): set(ids) for p, ids in checked.items()}

    def can_tell(entry: Entry) -> bool:  # this run would have found it, were it still there
        rules = None if checked_rel is None else checked_rel.get(entry.path)
        return checked_rel is None or not (baseline.root / entry.path).exists() or rules is not None and (
            entry.rule in rules or not _is_rule(entry.rule))

    # the entries the unchanged findings took, as match() paired them: one of the same place first, then
    # any (a moved file's), the ones this run cannot tell about last
    free: dict[tuple[str, str], list[int]] = {}
    for i, entry in enumerate(baseline.entries):
        free.setdefault((entry.fingerprint, now(entry)), []).append(i)
    taken: set[int] = set()
    later = []
    for item in unchanged:
        same = free.get((item.fingerprint, place(item.finding)))
        if same:
            taken.add(same.pop(0))
        else:
            later.append(item)
    for item in later:
        options = [i for i, e in enumerate(baseline.entries) if e.fingerprint == item.fingerprint and i not in taken]
        if options:
            taken.add(min(options, key=lambda i: not can_tell(baseline.entries[i])))
    stale = [e for i, e in enumerate(baseline.entries) if i not in taken and can_tell(e)]
    return new, stale


def _is_rule(rule_id: str) -> bool:
    """True for the id of a registered rule (not a history message such as a pin's E9590)."""
    from hp_invariants.registry import RULES

    return any(rule.rule_id == rule_id for rule in RULES)
