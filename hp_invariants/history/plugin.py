"""The baseline in the pylint plugin: option ``hp-invariants-baseline`` (a baseline file written
by ``hp-invariants baseline``); findings it accepts are not reported as pylint messages.

Matching is by fingerprint, per module, as in ``hp-invariants check``; stale entries are not
reported by the plugin (pylint sees one module at a time): use ``hp-invariants check
--fail-on-stale-baseline`` in CI for the ratchet.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from hp_invariants.model import Finding

OPTION: tuple[str, dict[str, Any]] = ("hp-invariants-baseline", {
    "default": "", "type": "string", "metavar": "<file>",
    "help": "Baseline file written by `hp-invariants baseline`: findings listed there are not reported.",
})

_LOADED: dict[str, Any] = {}


def filter_findings(baseline_path: str, source: str | bytes, findings: Sequence[Finding]) -> list[Finding]:
    """Return ``findings`` (of one module, whose text or bytes are ``source``) minus those the baseline
    at ``baseline_path`` accepts; all of them when no baseline is set, or when the baseline cannot
    be read (said once on stderr: pylint must not crash on every module). A module is matched against
    the entries of its own path and those whose file is gone (moved or renamed): a copy of an accepted
    finding into another module is new there, as in ``hp-invariants check``."""
    if not baseline_path or not findings:
        return list(findings)
    from hp_invariants.history import baseline
    from hp_invariants.history.fingerprint import annotate, match

    if baseline_path not in _LOADED:
        try:
            _LOADED[baseline_path] = baseline.load(Path(baseline_path))
        except baseline.BaselineError as exc:
            print(f"hp-invariants: {exc}; reporting every finding", file=sys.stderr)
            _LOADED[baseline_path] = None
    accepted = _LOADED[baseline_path]
    if accepted is None:
        return list(findings)
    if isinstance(source, bytes):
        from hp_invariants.source import SourceFile

        source = SourceFile.from_bytes(findings[0].path, source).text
    text = source
    here = baseline.relative_path(findings[0].path, accepted.root)
    known = Counter(e.fingerprint for e in accepted.entries
                    if e.path == here or not (accepted.root / e.path).exists())
    new, _unchanged, _left = match(annotate(findings, lambda _path: text), known)
    return [item.finding for item in new]
