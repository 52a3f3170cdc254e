"""A rank's exception -> the rule class it belongs to, and the static finding that names the line.

The four rules (E9501-E9504) each prevent one run-time failure of the seed incident. When a rank
raises, the exception is matched here against each class's **run-time signature**: the exception
type (anywhere in its MRO, so torch's subclasses match) and a regular expression on its message,
plus, for E9503, the fact that the receiver of the missing attribute is a ``torch.nn.Module`` (the
rank records it from the traceback: the innermost frame is ``nn.Module.__getattr__``). The
signatures are data (:data:`SIGNATURES`), one per class, each with a test. A failed run-time check
of the harness (:class:`hp_invariants.runtime.checks.InvariantViolation`) carries its rule id
itself and needs no matching.

For a matched class, :func:`static_finding` runs ``hp-invariants check --select <id>`` on the
script's own files (the script, the project modules it imported, the user frames of the traceback)
in a subprocess of the launcher (never in a rank) and names the finding nearest to the failure, so
the report can say which line the rule would have caught.

No torch here: this runs in the launcher.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

CHECK_TIMEOUT_S = 120


@dataclass(frozen=True)
class Signature:
    """The run-time signature of one rule class.

    ``exception_types``: class names, matched against the names of the exception's MRO;
    ``pattern``: a regular expression searched in the message; ``needs_module_receiver``: the
    missing attribute was looked up on a ``torch.nn.Module`` (E9503); ``invariant``: the invariant
    that broke, in words, for the report.
    """

    rule_id: str
    symbol: str
    exception_types: tuple[str, ...]
    pattern: str
    invariant: str
    needs_module_receiver: bool = False

    def matches(self, error: Mapping[str, Any]) -> bool:
        """True when the recorded ``error`` (see :func:`classify`) has this signature."""
        names = set(error.get("mro") or [error.get("type", "")])
        if not names.intersection(self.exception_types):
            return False
        if not re.search(self.pattern, str(error.get("message", ""))):
            return False
        return not self.needs_module_receiver or bool(error.get("module_receiver"))

    @property
    def explain(self) -> str:
        """The command that prints the rule's page."""
        return f"hp-invariants explain {self.rule_id}"


# One signature per rule class. The messages are torch's (and the seed incident's); see
# tests/test_runtime_classify.py for one real message per class and the near misses.
SIGNATURES: tuple[Signature, ...] = (
    Signature(
        rule_id="E9501",
        symbol="local-tensor-view-not-detached",
        exception_types=("RuntimeError",),
        pattern=(r"A view was created in no_grad mode and (its base or another view of its base "
                 r"has been |is being )?modified inplace with grad mode enabled"),
        invariant=("a DTensor parameter's local tensor must be a leaf: a view taken under no_grad "
                   "and stored without .detach() is not one once its base is written in grad mode"),
    ),
    Signature(
        rule_id="E9502",
        symbol="shard-gated-reset",
        exception_types=("RuntimeError", "NotImplementedError", "ValueError", "TypeError",
                         "AssertionError"),
        pattern=(r"(?i)\bmeta\b[^.\n]{0,40}?\b(tensors?|devices?)\b"
                 r"|\b(tensors?|devices?)\b[^.\n]{0,40}?\bmeta\b"),
        invariant=("no parameter or buffer may stay on the meta device: the step that materializes "
                   "them (reset_sharded_param, fully_shard) must run at every shard degree"),
    ),
    Signature(
        rule_id="E9503",
        symbol="undefined-method-call",
        exception_types=("AttributeError",),
        pattern=r"'[\w.]+' object has no attribute '\w+'",
        invariant="a method the model calls must be defined by a class of its MRO",
        needs_module_receiver=True,
    ),
    Signature(
        rule_id="E9504",
        symbol="wrap-overlap-hard-raise",
        exception_types=("ValueError", "RuntimeError", "AssertionError"),
        pattern=r"(?i)\balready\s+wrapped\b",
        invariant=("activation-checkpoint wrapping must tolerate a submodule shared by the layers "
                   "(a shared rotary embedding): skip it, do not raise"),
    ),
)

BY_RULE = {signature.rule_id: signature for signature in SIGNATURES}


def classify(error: Mapping[str, Any] | None) -> Signature | None:
    """The rule class of a rank's recorded exception, or None when it has no class's signature.

    ``error`` is the ``error`` object of a rank's result file: ``type`` (class name), ``mro``
    (class names), ``message``, ``module_receiver`` (the class name of the ``nn.Module`` whose
    attribute was missing, or null) and, for a failed check of the harness, ``violation`` with its
    ``rule``. The first matching signature of :data:`SIGNATURES` wins.
    """
    if not error:
        return None
    violation = error.get("violation")
    if violation and violation.get("rule") in BY_RULE:
        return BY_RULE[violation["rule"]]
    for signature in SIGNATURES:
        if signature.matches(error):
            return signature
    return None


@dataclass(frozen=True)
class StaticFinding:
    """A finding of ``hp-invariants check`` on the script's files (path as ``check`` printed it)."""

    path: str
    line: int
    column: int
    rule_id: str
    symbol: str
    message: str

    def render(self) -> str:
        """``path:line:col: ID symbol: message``, as ``check`` prints it."""
        return f"{self.path}:{self.line}:{self.column}: {self.rule_id} {self.symbol}: {self.message}"


def _distance(finding: StaticFinding, frames: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """Rank a finding: in a file of the traceback first (innermost frame first), then by line gap."""
    resolved = str(Path(finding.path).resolve())
    for depth, frame in enumerate(reversed(list(frames))):
        if str(Path(str(frame.get("file", ""))).resolve()) == resolved:
            return depth, abs(int(frame.get("line") or 0) - finding.line)
    return len(frames) + 1, finding.line


def _relative(path: str, cwd: str | None) -> str:
    """``path`` relative to ``cwd`` (default: the current folder) when inside it, so that ``check``
    prints it that way."""
    base = Path(cwd or ".").resolve()
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(base))
    except ValueError:
        return str(resolved)


def static_finding(rule_id: str, files: Iterable[str], frames: Sequence[Mapping[str, Any]] = (),
                   cwd: str | None = None) -> tuple[StaticFinding | None, str]:
    """Run ``hp-invariants check --select RULE_ID`` on ``files``; return (nearest finding, note).

    The check runs as ``python -m hp_invariants check --format json`` in a subprocess (the public
    interface: the launcher never loads the rules into a process that may hold a pytest session).
    The finding in the innermost traceback file, nearest the failing line, is returned; the note
    says how many files were checked or why none could be (no file, the check failed).
    """
    paths = sorted({_relative(f, cwd) for f in files if f and Path(f).is_file()})
    if not paths:
        return None, "no file of the script to check"
    command = [sys.executable, "-m", "hp_invariants", "check", "--format", "json", "--select", rule_id, *paths]
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S,
                              check=False)
        report = json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return None, f"the static check could not run: {exc}"
    findings = [StaticFinding(str(f["path"]), int(f["line"]), int(f["column"]), str(f["id"]), str(f["symbol"]),
                              str(f["message"]))
                for f in report.get("findings", []) if f.get("id") == rule_id]
    if not findings:
        return None, f"`hp-invariants check` has no {rule_id} finding in the script's {len(paths)} file(s)"
    best = min(findings, key=lambda finding: _distance(finding, frames))
    return best, f"{len(findings)} {rule_id} finding(s) in the script's {len(paths)} file(s)"
