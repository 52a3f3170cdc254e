"""Data model shared by every rule and every front end.

A rule turns a parsed file into :class:`Finding` objects. A finding may carry a :class:`Fix`: a
list of text :class:`Edit` objects over the decoded source plus an applicability, the same model
ruff uses (``crates/ruff_diagnostics/src/fix.rs``). The CLI prints findings, the pylint plugin
turns them into pylint messages, and the codemods/``fix`` apply their edits; none of them
re-implements detection.

Positions: ``line`` is 1-based, ``col`` is a 0-based *character* column (``ast`` gives UTF-8 byte
columns; :class:`hp_invariants.source.SourceFile` converts). Front ends that print 1-based columns
(the CLI, like flake8 and ruff) add one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Applicability(str, enum.Enum):
    """How safe a fix is to apply automatically (ruff's model).

    ``SAFE`` fixes are applied by ``hp-invariants fix``; ``UNSAFE`` ones only with
    ``--unsafe-fixes`` (they could change more than the invariant); ``DISPLAY_ONLY`` fixes are shown,
    never applied.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


class Confidence(str, enum.Enum):
    """Confidence of a finding; the names are pylint's (``pylint.interfaces``)."""

    HIGH = "HIGH"
    CONTROL_FLOW = "CONTROL_FLOW"
    INFERENCE = "INFERENCE"
    UNDEFINED = "UNDEFINED"


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text between two positions with ``content``.

    ``start``/``end`` are ``(line, col)`` pairs, line 1-based, col a 0-based character column, end
    exclusive. An insertion has ``start == end``; a deletion has ``content == ""``.
    """

    start: tuple[int, int]
    end: tuple[int, int]
    content: str

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: 1-based columns, as in the text output."""
        return {
            "start": {"line": self.start[0], "column": self.start[1] + 1},
            "end": {"line": self.end[0], "column": self.end[1] + 1},
            "content": self.content,
        }


@dataclass(frozen=True)
class Fix:
    """A repair for one finding: non-overlapping edits applied together, or not at all."""

    edits: tuple[Edit, ...]
    applicability: Applicability
    message: str

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form of the fix."""
        return {
            "message": self.message,
            "applicability": self.applicability.value,
            "edits": [edit.to_dict() for edit in self.edits],
        }


@dataclass(frozen=True)
class Finding:
    """One violation of one invariant at one place.

    ``rule_id``/``symbol`` are the pylint message id and symbol (``E9501``,
    ``local-tensor-view-not-detached``); ``args`` fills the rule's message template.
    """

    rule_id: str
    symbol: str
    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    message: str
    confidence: Confidence = Confidence.HIGH
    fix: Fix | None = None
    args: tuple[Any, ...] = ()
    obj: str = ""

    def sort_key(self) -> tuple[str, int, int, str]:
        """Order findings by path, position and id (deterministic output)."""
        return (self.path, self.line, self.col, self.rule_id)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form of the finding (1-based columns)."""
        return {
            "path": self.path,
            "line": self.line,
            "column": self.col + 1,
            "end_line": self.end_line,
            "end_column": self.end_col + 1,
            "id": self.rule_id,
            "symbol": self.symbol,
            "message": self.message,
            "confidence": self.confidence.value,
            "obj": self.obj,
            "fix": self.fix.to_dict() if self.fix else None,
        }


@dataclass(frozen=True)
class FileProblem:
    """A file that could not be checked (unreadable, undecodable, a syntax error, ...).

    ``problem_id``/``symbol`` mirror pylint's (``E0001 syntax-error``, ``F0001 fatal``); the run goes
    on with the other files and exits 2.
    """

    problem_id: str
    symbol: str
    path: str
    line: int
    col: int
    message: str
    hint: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form of the problem."""
        return {
            "path": self.path,
            "line": self.line,
            "column": self.col + 1,
            "id": self.problem_id,
            "symbol": self.symbol,
            "message": self.message,
            "hint": self.hint,
        }


@dataclass
class FileResult:
    """The outcome of checking one file: findings (after suppressions) and problems."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)
    cache_entry: str | None = field(default=None, repr=False, compare=False)
    """The results-cache entry computed for this file (its stored form, carried back from a worker process)."""


@dataclass
class RunResult:
    """The outcome of a run over many files, ordered by path."""

    files: list[FileResult] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the user should know about the run that is not a problem (a bounded project index)."""

    @property
    def findings(self) -> list[Finding]:
        """All findings of all files, in output order."""
        return [f for result in self.files for f in result.findings]

    @property
    def all_problems(self) -> list[FileProblem]:
        """All problems: those of discovery, then those of each file."""
        return self.problems + [p for result in self.files for p in result.problems]

    @property
    def exit_code(self) -> int:
        """0 clean, 1 findings, 2 when a file could not be checked (pylint/ruff convention)."""
        if self.all_problems:
            return 2
        return 1 if self.findings else 0
