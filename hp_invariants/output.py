"""Report formats of ``hp-invariants check``: text, json, sarif (2.1.0) and github annotations.

JSON and SARIF carry each finding's fix (edits and applicability); SARIF puts them in the standard
``fixes[].artifactChanges[].replacements`` objects. What a layer beside the rules knows about a
finding (the history features: its fingerprint and SARIF ``baselineState``) comes as an
:class:`Annotation` per finding, never inside :class:`~hp_invariants.model.Finding`.

File names that are not valid UTF-8 (on POSIX a name is bytes; Python hands it over with each bad
byte as a lone surrogate, ``os.fsdecode``) never reach the output as lone surrogates, which strict
UTF-8 writers and JSON parsers reject. Every format is valid UTF-8:

* text, JSON ``path`` and GitHub ``file=``: :func:`display_path`, each byte that is not UTF-8 written
  as ``\\xNN`` (``b"bad\\xff.py"`` -> ``bad\\xff.py``), the form Python's ``backslashreplace`` gives;
* JSON ``path_bytes`` (only for such names): the raw bytes, percent-encoded (``bad%FF.py``;
  ``urllib.parse.unquote_to_bytes`` gives them back exactly);
* SARIF ``uri``: the raw bytes percent-encoded, as RFC 3986 and RFC 8089 (``file:`` URIs) prescribe.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote_from_bytes

from hp_invariants import __version__
from hp_invariants.docs import rule_doc
from hp_invariants.model import FileProblem, Finding
from hp_invariants.api import Rule

FORMATS = ("text", "json", "sarif", "github")


@dataclass(frozen=True)
class Annotation:
    """What the report says about one finding beyond the finding itself (set by the history features).

    ``fingerprint``: the finding's identity across moves and renames (JSON ``fingerprint``, SARIF
    ``partialFingerprints``); ``baseline_state``: SARIF ``baselineState`` (``"new"``) under a
    baseline or ``--since``. Empty strings are left out of the report.
    """

    fingerprint: str = ""
    baseline_state: str = ""


NO_ANNOTATION = Annotation()

SARIF_FINGERPRINT_KEY = "hpInvariantsFingerprint/v1"
"""Key of our entry in SARIF ``partialFingerprints`` (versioned: a new scheme gets a new key)."""


def _annotations(findings: Sequence[Finding], annotations: Sequence[Annotation] | None) -> Sequence[Annotation]:
    """``annotations`` (one per finding, in the same order), or none for each; raises ``ValueError``
    when the counts differ."""
    if annotations is None:
        return [NO_ANNOTATION] * len(findings)
    if len(annotations) != len(findings):
        raise ValueError(f"{len(annotations)} annotations for {len(findings)} findings")
    return annotations


def is_utf8(text: str) -> bool:
    """Whether ``text`` holds no lone surrogate (so it encodes as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def path_bytes(path: str) -> bytes:
    """The raw bytes of the file name ``path`` (``os.fsencode``: undoes ``surrogateescape``)."""
    try:
        return os.fsencode(path)
    except UnicodeEncodeError:  # a lone surrogate that no file name decodes to: keep it visible
        return path.encode("utf-8", "backslashreplace")


def display_path(path: str) -> str:
    """``path`` as valid UTF-8 text: unchanged when it is; otherwise each byte of the raw name that
    is not UTF-8 written as ``\\xNN`` (``bad\\udcff.py`` -> ``bad\\xff.py``)."""
    if is_utf8(path):
        return path
    return path_bytes(path).decode("utf-8", "backslashreplace")


def _clean(text: str) -> str:
    """Any other text (messages, hints) as valid UTF-8: a lone surrogate becomes ``\\udcNN``."""
    return text if is_utf8(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def format_text(findings: Sequence[Finding], problems: Sequence[FileProblem]) -> str:
    """One line per finding, ``path:line:col: ID symbol: message`` (1-based column)."""
    lines = [f"{display_path(p.path)}:{p.line}:{p.col + 1}: {p.problem_id} {p.symbol}: {_clean(p.message)}"
             + (f" (hint: {_clean(p.hint)})" if p.hint else "") for p in problems]
    lines.extend(f"{display_path(f.path)}:{f.line}:{f.col + 1}: {f.rule_id} {f.symbol}: {_clean(f.message)}"
                 for f in findings)
    return "\n".join(lines) + ("\n" if lines else "")


def _json_record(record: dict[str, Any]) -> dict[str, Any]:
    """A finding's or problem's JSON object with a file name that is not UTF-8 made representable:
    ``path`` escaped (:func:`display_path`) and ``path_bytes`` added (the raw bytes, percent-encoded)."""
    path = record.get("path")
    if isinstance(path, str) and not is_utf8(path):
        record["path"] = display_path(path)
        record["path_bytes"] = quote_from_bytes(path_bytes(path))
    for key in ("message", "hint"):
        if isinstance(record.get(key), str):
            record[key] = _clean(record[key])
    return record


def _json_finding(finding: Finding, annotation: Annotation) -> dict[str, Any]:
    record = finding.to_dict()
    if annotation.fingerprint:
        record["fingerprint"] = annotation.fingerprint
    return _json_record(record)


def format_json(findings: Sequence[Finding], problems: Sequence[FileProblem],
                annotations: Sequence[Annotation] | None = None) -> str:
    """A JSON object ``{"version", "findings": [...], "problems": [...]}`` with fixes included, and
    each finding's ``fingerprint`` when ``annotations`` (one per finding) give one.

    A record whose file name is not valid UTF-8 has ``path`` escaped and the raw bytes in
    ``path_bytes`` (see the module docstring), so the document holds no lone surrogate. Raises
    ``ValueError`` when ``annotations`` do not match ``findings`` one to one."""
    marks = _annotations(findings, annotations)
    return json.dumps(
        {
            "version": __version__,
            "findings": [_json_finding(f, a) for f, a in zip(findings, marks)],
            "problems": [_json_record(p.to_dict()) for p in problems],
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
        lines.append(f"::error file={_github_property(display_path(p.path))},line={p.line},col={p.col + 1},"
                     f"title={_github_property(p.problem_id + ' ' + p.symbol)}::"
                     + _github_escape(_clean(f"{p.message} (hint: {p.hint})" if p.hint else p.message)))
    for f in findings:
        lines.append(
            f"::error file={_github_property(display_path(f.path))},line={f.line},col={f.col + 1},"
            f"endLine={f.end_line},endColumn={f.end_col + 1},title={_github_property(f.rule_id + ' ' + f.symbol)}::"
            f"{_github_escape(_clean(f.message))}"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def file_uri(path: str) -> str:
    """The ``file://`` URI of the absolute ``path``: its raw bytes percent-encoded (RFC 8089), so a
    name that is not valid UTF-8 keeps its exact bytes (``bad%FF.py``)."""
    if os.name == "posix":
        return "file://" + quote_from_bytes(path_bytes(os.path.normpath(path)))
    return Path(path).as_uri()


def _artifact(path: str) -> dict:
    """A SARIF ``artifactLocation``: a ``file://`` URI for absolute paths, else a percent-encoded
    relative URI against ``%SRCROOT%`` (the folder the run started in). The raw bytes of the name
    are percent-encoded, so names that are not valid UTF-8 are exact too."""
    if os.path.isabs(path):
        return {"uri": file_uri(path)}
    relative = Path(os.path.normpath(path)).as_posix()
    return {"uri": quote_from_bytes(path_bytes(relative)), "uriBaseId": "%SRCROOT%"}


def _region(start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"startLine": start[0], "startColumn": start[1] + 1, "endLine": end[0], "endColumn": end[1] + 1}


def format_sarif(findings: Sequence[Finding], problems: Sequence[FileProblem], rules: Sequence[Rule],
                 annotations: Sequence[Annotation] | None = None) -> str:
    """A SARIF 2.1.0 log with one run; fixes are SARIF ``fixes`` with text replacements; each
    finding's :class:`Annotation` (``annotations``: one per finding) gives ``partialFingerprints``
    and ``baselineState``. Raises ``ValueError`` when ``annotations`` do not match ``findings``."""
    rule_index = {r.rule_id: i for i, r in enumerate(rules)}
    results = []
    for f, mark in zip(findings, _annotations(findings, annotations)):
        result = {
            "ruleId": f.rule_id,
            "level": "error",
            "message": {"text": _clean(f.message)},
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
        if mark.fingerprint:
            result["partialFingerprints"] = {SARIF_FINGERPRINT_KEY: mark.fingerprint}
        if mark.baseline_state:
            result["baselineState"] = mark.baseline_state
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
        "message": {"text": _clean(f"{p.symbol}: {p.message}" + (f" (hint: {p.hint})" if p.hint else ""))},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(p.path),
                                             "region": {"startLine": p.line, "startColumn": p.col + 1}}}],
    } for p in problems]
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "originalUriBaseIds": {"%SRCROOT%": {"uri": file_uri(os.getcwd()).rstrip("/") + "/"}},
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


def render(fmt: str, findings: Sequence[Finding], problems: Sequence[FileProblem], rules: Sequence[Rule],
           annotations: Sequence[Annotation] | None = None) -> str:
    """Render findings and problems in ``fmt`` (one of :data:`FORMATS`), with one :class:`Annotation`
    per finding when given (JSON and SARIF show them); raises ``ValueError`` for an unknown format or
    annotations that do not match the findings."""
    if fmt == "text":
        return format_text(findings, problems)
    if fmt == "json":
        return format_json(findings, problems, annotations)
    if fmt == "sarif":
        return format_sarif(findings, problems, rules, annotations)
    if fmt == "github":
        return format_github(findings, problems)
    raise ValueError(f"unknown format {fmt!r}")
