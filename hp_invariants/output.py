"""Report formats of ``hp-invariants check``: text, json, sarif (2.1.0) and github annotations.

JSON and SARIF carry each finding's fix (edits and applicability); SARIF puts them in the standard
``fixes[].artifactChanges[].replacements`` objects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from hp_invariants import __version__
from hp_invariants.docs import rule_doc
from hp_invariants.model import FileProblem, Finding, Rule

FORMATS = ("text", "json", "sarif", "github")


def format_text(findings: Sequence[Finding], problems: Sequence[FileProblem]) -> str:
    """One line per finding, ``path:line:col: ID symbol: message`` (1-based column)."""
    lines = [f"{p.path}:{p.line}:{p.col + 1}: {p.problem_id} {p.symbol}: {p.message}"
             + (f" (hint: {p.hint})" if p.hint else "") for p in problems]
    lines.extend(f"{f.path}:{f.line}:{f.col + 1}: {f.rule_id} {f.symbol}: {f.message}" for f in findings)
    return "\n".join(lines) + ("\n" if lines else "")


def format_json(findings: Sequence[Finding], problems: Sequence[FileProblem]) -> str:
    """A JSON object ``{"version", "findings": [...], "problems": [...]}`` with fixes included."""
    return json.dumps(
        {
            "version": __version__,
            "findings": [f.to_dict() for f in findings],
            "problems": [p.to_dict() for p in problems],
        },
        indent=2,
    ) + "\n"


def _github_escape(text: str) -> str:
    """Escape a workflow-command message (GitHub's ``escapeData``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    """Escape a workflow-command property value (GitHub's ``escapeProperty``)."""
    return _github_escape(text).replace(":", "%3A").replace(",", "%2C")


def format_github(findings: Sequence[Finding], problems: Sequence[FileProblem]) -> str:
    """GitHub Actions workflow commands (``::error file=...``), one per finding and problem."""
    lines = []
    for p in problems:
        lines.append(f"::error file={_github_property(p.path)},line={p.line},col={p.col + 1},"
                     f"title={_github_property(p.problem_id + ' ' + p.symbol)}::"
                     + _github_escape(f"{p.message} (hint: {p.hint})" if p.hint else p.message))
    for f in findings:
        lines.append(
            f"::error file={_github_property(f.path)},line={f.line},col={f.col + 1},endLine={f.end_line},"
            f"endColumn={f.end_col + 1},title={_github_property(f.rule_id + ' ' + f.symbol)}::"
            f"{_github_escape(f.message)}"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def _artifact(path: str) -> dict:
    """A SARIF ``artifactLocation``: a ``file://`` URI for absolute paths, else a percent-encoded
    relative URI against ``%SRCROOT%`` (the folder the run started in)."""
    import os
    from pathlib import Path
    from urllib.parse import quote

    if os.path.isabs(path):
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(Path(os.path.normpath(path)).as_posix()), "uriBaseId": "%SRCROOT%"}


def _region(start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"startLine": start[0], "startColumn": start[1] + 1, "endLine": end[0], "endColumn": end[1] + 1}


def format_sarif(findings: Sequence[Finding], problems: Sequence[FileProblem], rules: Sequence[Rule]) -> str:
    """A SARIF 2.1.0 log with one run; fixes are SARIF ``fixes`` with text replacements."""
    rule_index = {r.rule_id: i for i, r in enumerate(rules)}
    results = []
    for f in findings:
        result = {
            "ruleId": f.rule_id,
            "level": "error",
            "message": {"text": f.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": _artifact(f.path),
                    "region": _region((f.line, f.col), (f.end_line, f.end_col)),
                }
            }],
            "properties": {"symbol": f.symbol, "confidence": f.confidence.value},
        }
        if f.rule_id in rule_index:
            result["ruleIndex"] = rule_index[f.rule_id]
        if f.fingerprint:
            result["partialFingerprints"] = {"hpInvariantsFingerprint/v1": f.fingerprint}
        if f.baseline_state:
            result["baselineState"] = f.baseline_state
        if f.fix:
            result["fixes"] = [{
                "description": {"text": f.fix.message},
                "properties": {"applicability": f.fix.applicability.value},
                "artifactChanges": [{
                    "artifactLocation": _artifact(f.path),
                    "replacements": [
                        {"deletedRegion": _region(e.start, e.end), "insertedContent": {"text": e.content}}
                        for e in f.fix.edits
                    ],
                }],
            }]
        results.append(result)
    notifications = [{
        "level": "error",
        "descriptor": {"id": p.problem_id},
        "message": {"text": f"{p.symbol}: {p.message}" + (f" (hint: {p.hint})" if p.hint else "")},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(p.path),
                                             "region": {"startLine": p.line, "startColumn": p.col + 1}}}],
    } for p in problems]
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
            "tool": {"driver": {
                "name": "hp-invariants",
                "version": __version__,
                "informationUri": "https://pypi.org/project/hp-invariants/",
                "rules": [{
                    "id": r.rule_id,
                    "name": r.symbol,
                    "shortDescription": {"text": r.summary},
                    "fullDescription": {"text": r.description or r.summary},
                    "help": {"text": rule_doc(r), "markdown": rule_doc(r)},
                } for r in rules],
            }},
            "results": results,
            "invocations": [{"executionSuccessful": not problems, "toolExecutionNotifications": notifications}],
        }],
    }
    return json.dumps(log, indent=2) + "\n"


def render(fmt: str, findings: Sequence[Finding], problems: Sequence[FileProblem], rules: Sequence[Rule]) -> str:
    """Render findings and problems in ``fmt`` (one of :data:`FORMATS`); raises ``ValueError``."""
    if fmt == "text":
        return format_text(findings, problems)
    if fmt == "json":
        return format_json(findings, problems)
    if fmt == "sarif":
        return format_sarif(findings, problems, rules)
    if fmt == "github":
        return format_github(findings, problems)
    raise ValueError(f"unknown format {fmt!r}")
