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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from hp_invariants.context import FileContext
    from hp_invariants.project import ProjectFacts


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
    fingerprint: str = ""  # set by hp_invariants.history.fingerprint.annotate (JSON, SARIF, baseline)
    baseline_state: str = ""  # SARIF baselineState ("new", "unchanged") with --baseline/--since

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
            **({"fingerprint": self.fingerprint} if self.fingerprint else {}),
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


@dataclass(frozen=True)
class Option:
    """A rule option, settable in ``[tool.hp-invariants]`` and in pylintrc.

    ``kind`` is ``"csv"`` (a list of names), ``"regexp_csv"`` (a list of regular expressions,
    matched against the whole name) or ``"bool"``.
    """

    name: str
    kind: str
    default: Any
    help: str


class Rule:
    """Base class of an invariant rule: one subclass per module under ``hp_invariants.rules``.

    Class attributes a rule sets:

    * ``rule_id``, ``symbol``: the fixed pylint message id and symbol;
    * ``summary``: one line for ``hp-invariants rules``;
    * ``msg``: pylint's message template (``%s`` placeholders filled from ``Finding.args``);
    * ``description``: pylint's long help for the message;
    * ``options``: the rule's :class:`Option` objects;
    * ``prefilter``: substrings of which at least one must occur in a file's text for the rule to
      run (a cheap test that skips files that cannot match); empty means always run;
    * ``project_facts``: a :class:`hp_invariants.project.ProjectFacts` when the rule needs facts
      about the whole project (E9503: every class), read in ``check`` with ``ctx.project_data(self)``;
    * ``project_optional``: True when the rule also runs without a project (``ctx.project is None``:
      it then uses what the file itself shows); False (default): such a rule is not run then;
    * ``prefilter_reads_project``: True when :meth:`applies_to` also reads the project facts (E9502
      lets through files that call a project's must-run helper): a file the prefilter skipped then
      depends on :meth:`prefilter_record` of its project (the per-file results cache checks it);
    * ``codemod_command``: the name of the rule's libcst codemod class (default: the symbol in
      CamelCase + ``Command``; see :mod:`hp_invariants.codemods`).

    The rule's module docstring is its user documentation (``docs/rules/<symbol>.md`` and
    ``hp-invariants explain`` print it).
    """

    rule_id: str = ""
    symbol: str = ""
    summary: str = ""
    msg: str = "%s"
    description: str = ""
    options: Sequence[Option] = ()
    prefilter: Sequence[str] = ()
    prefilter_option: str | None = None
    project_facts: "ProjectFacts | None" = None
    project_optional: bool = False
    prefilter_reads_project: bool = False
    codemod_command: str = ""

    @property
    def command_name(self) -> str:
        """The codemod class name: ``codemod_command``, else the symbol in CamelCase + ``Command``."""
        return self.codemod_command or "".join(p.title() for p in self.symbol.split("-")) + "Command"

    def applies_to(self, text: str, options: dict[str, Any] | None = None) -> bool:
        """Return True when the rule's text prefilter lets ``text`` through.

        ``options`` are this rule's configured option values: when ``prefilter_option`` names a
        list option (say ``unconditional-calls``), its configured values replace ``prefilter``, so a
        prefilter never skips a file that a configured name could match.
        """
        tokens = self.prefilter
        if self.prefilter_option and options and self.prefilter_option in options:
            tokens = options[self.prefilter_option]
        return not tokens or any(token in text for token in tokens)

    def prefilter_record(self, data: Any, options: dict[str, Any] | None = None) -> str | None:
        """What :meth:`applies_to` reads from the project object ``data`` (of ``project_facts``) under
        this rule's ``options``, as a plain string: a file the prefilter skipped is checked again
        when it differs. Only called when ``prefilter_reads_project``."""
        return None

    def check(self, ctx: "FileContext") -> Iterable[Finding]:  # pragma: no cover - abstract
        """Yield the findings of this rule in the file of ``ctx`` (a
        :class:`hp_invariants.context.FileContext`)."""
        raise NotImplementedError
