"""Applying the fixes that rules attach to findings, until nothing changes (ruff's fix loop).

Used by ``hp-invariants fix`` and by every codemod in :mod:`hp_invariants.codemods`, so both
change exactly what ``check`` reports. Each round re-runs the detection on the new text, applies
every allowed, non-overlapping fix, and re-parses the result; a round whose output does not parse
is rolled back and the run stops there.
"""

from __future__ import annotations

import ast
import os
import re
import stat
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from hp_invariants import engine
from hp_invariants.model import Applicability, Finding, Rule
from hp_invariants.config import DEFAULT_MAX_FILE_SIZE, DEFAULT_TIMEOUT
from hp_invariants.source import SourceFile, read_source_bytes

MAX_ROUNDS = 10


@dataclass
class FixOutcome:
    """What :func:`fix_source` did to one file.

    ``text`` is the new text (equal to the input when nothing applied); ``applied`` the findings
    fixed; ``remaining`` the findings left after the last round; ``rejected`` a message when a
    round was rolled back because its output did not parse.
    """

    text: str
    applied: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    initial: list[Finding] = field(default_factory=list)
    rejected: str = ""

    @property
    def changed(self) -> bool:
        """True when at least one fix was applied."""
        return bool(self.applied)

    @property
    def fixed_count(self) -> int:
        """How many of the findings ``check`` reported before the fix are gone after it.

        Counted on findings, not on edits: one edit may fix several findings (two calls under
        one gate), and a finding may take several rounds (two gates in one condition).
        """
        return max(0, len(self.initial) - len(self.remaining)) if self.changed else 0


def allowed(finding: Finding, unsafe: bool) -> bool:
    """Return True if ``finding`` has a fix that may be applied (``unsafe``: include unsafe ones)."""
    if finding.fix is None or not finding.fix.edits:
        return False
    if finding.fix.applicability is Applicability.SAFE:
        return True
    return unsafe and finding.fix.applicability is Applicability.UNSAFE


def _non_overlapping(source: SourceFile, findings: Sequence[Finding]) -> list[Finding]:
    chosen: list[Finding] = []
    taken: list[tuple[int, int]] = []
    for finding in findings:
        spans = [(source.offset(*e.start), source.offset(*e.end)) for e in finding.fix.edits]
        clash = any(
            a_start < b_end and b_start < a_end or (a_start == a_end == b_start == b_end)
            for a_start, a_end in spans
            for b_start, b_end in taken
        )
        if not clash:
            chosen.append(finding)
            taken.extend(spans)
    return chosen


def fix_source(
    source: SourceFile,
    rules: Sequence[Rule],
    options: dict[str, dict[str, Any]] | None = None,
    project: Callable[[], Any] | None = None,
    unsafe: bool = False,
) -> FixOutcome:
    """Apply the fixes of ``rules`` to ``source`` until none applies.

    Raises ``SyntaxError`` only if the *input* does not parse; never returns text that does not
    parse.
    """
    current = source
    tree = engine.parse(current)
    outcome = FixOutcome(text=source.text)
    for round_number in range(MAX_ROUNDS):
        findings = engine.analyze(current, tree, rules, options, project)
        if round_number == 0:
            outcome.initial = findings
        fixable = _non_overlapping(current, [f for f in findings if allowed(f, unsafe)])
        if not fixable:
            outcome.remaining = findings
            break
        new_text = current.apply_edits([e for f in fixable for e in f.fix.edits])
        candidate = SourceFile(path=source.path, text=new_text, encoding=source.encoding, bom=source.bom)
        try:
            new_tree = engine.parse(candidate)
            with warnings.catch_warnings():  # compiler warnings on the user's code are not ours to print
                warnings.simplefilter("ignore")
                compile(new_tree, source.path, "exec")
        except (SyntaxError, ValueError) as exc:
            outcome.rejected = f"fix output does not parse ({exc}); left unchanged from here"
            outcome.remaining = findings
            break
        outcome.applied.extend(fixable)
        current, tree = candidate, new_tree
        outcome.text = new_text
    else:
        outcome.remaining = engine.analyze(current, tree, rules, options, project)
    return outcome


# ---------------------------------------------------------------------- files
@dataclass
class FileFixResult:
    """What ``hp-invariants fix`` did to one file.

    ``written``: the file was rewritten; ``diff``: unified diff of the change (empty when none);
    ``skipped``: why a changed file was not written; ``outcome``: the :class:`FixOutcome`, or
    ``None`` when the file could not be read or parsed (then ``problem`` says why).
    """

    path: str
    outcome: FixOutcome | None = None
    diff: str = ""
    written: bool = False
    skipped: str = ""
    problem: Any = None


def unified_diff(path: str, before: str, after: str) -> str:
    """Return a unified diff of ``before`` -> ``after`` labelled with ``path``."""
    import difflib
    import os

    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        # git-style a/ b/ prefixes for relative paths; an absolute path is shown as it is
        fromfile=path if os.path.isabs(path) else f"a/{path}",
        tofile=path if os.path.isabs(path) else f"b/{path}",
    ))


#: Temp files of :func:`write_atomically`: ``.hp-invariants-<pid>-<random>.tmp`` in the target's
#: folder (never ``*.py``, so never picked up as source). One left behind by a killed run is
#: removed by the next ``fix`` run over that folder (:func:`remove_stale_temp_files`).
TEMP_PREFIX = ".hp-invariants-"
TEMP_SUFFIX = ".tmp"
_TEMP_NAME = re.compile(r"\.hp-invariants-(\d+)-[A-Za-z0-9_]+\.tmp")


def write_atomically(path: str, data: bytes, expected_stat: Any = None, expected: bytes | None = None) -> str:
    """Replace the file at ``path`` with ``data`` via a temp file in the same folder + rename.

    Keeps the permission bits (and owner and group where allowed); a symlink is kept and its
    target replaced. Returns ``""`` on success, else why nothing was written: the file is
    read-only (by its mode bits, so also when running as root), it changed on disk since it was
    read (``expected_stat``: the ``os.stat`` result taken when it was read, mtime and size are
    compared; ``expected``: the bytes read, compared again just before the rename), or the
    write failed (``OSError``: a read-only folder, a full disk). The temp file is removed on any
    failure; because the rename is atomic, a run killed at any point leaves either the old or the
    new file, never a mix (at worst a stale temp file, see :data:`TEMP_PREFIX`).
    """
    target = os.path.realpath(path)
    try:
        current = os.stat(target)
    except OSError as exc:
        return f"cannot stat: {exc.strerror}"
    if not stat.S_ISREG(current.st_mode):
        return "not a regular file; not overwritten"
    if expected_stat is not None and (
        current.st_mtime_ns != expected_stat.st_mtime_ns or current.st_size != expected_stat.st_size
    ):
        return "changed on disk since it was read; not overwritten"
    if not current.st_mode & 0o222 or not os.access(target, os.W_OK):
        return "read-only; not overwritten"  # checked by mode bits too: root may write anything
    folder = os.path.dirname(target)
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", suffix=TEMP_SUFFIX, dir=folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(current.st_mode))
        if hasattr(os, "chown"):
            try:
                os.chown(tmp, current.st_uid, current.st_gid)
            except OSError:
                pass  # not allowed to give it away: the new file belongs to us
        if expected is not None:
            with open(target, "rb") as handle:
                if handle.read(len(expected) + 1) != expected:
                    os.unlink(tmp)
                    return "changed on disk since it was read; not overwritten"
        os.replace(tmp, target)
        tmp = ""
    except OSError as exc:
        _unlink_quietly(tmp)
        return f"cannot write: {exc.strerror or exc}; left unchanged"
    except BaseException:
        _unlink_quietly(tmp)
        raise
    _fsync_folder(folder)
    return ""


def _unlink_quietly(path: str) -> None:
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


def _fsync_folder(folder: str) -> None:
    """Make the rename durable (best effort; not possible on every platform)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: it exists, owned by someone else
        return True
    return True


def remove_stale_temp_files(folder: str) -> list[str]:
    """Remove the temp files of :func:`write_atomically` left in ``folder`` by a killed run.

    Only files named ``.hp-invariants-<pid>-*.tmp`` whose process no longer exists are removed
    (a concurrent ``fix`` run keeps its own). Returns the removed paths; never raises. Does nothing
    on Windows, where process ids cannot be probed this way.
    """
    if sys.platform == "win32":
        return []
    removed = []
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return []
    for name in names:
        match = _TEMP_NAME.fullmatch(name)
        if match and not _pid_alive(int(match.group(1))):
            full = os.path.join(folder, name)
            try:
                os.unlink(full)
                removed.append(full)
            except OSError:
                pass
    return removed


def fix_file(
    path: str,
    rules: Sequence[Rule],
    options: dict[str, dict[str, Any]] | None = None,
    project: Any = None,
    unsafe: bool = False,
    write: bool = True,
    timeout: float | None = DEFAULT_TIMEOUT,
    max_size: int | None = DEFAULT_MAX_FILE_SIZE,
) -> FileFixResult:
    """Fix one file in place (``write``) or only compute the diff.

    Never raises for bad input, and then never touches the file: unreadable, undecodable,
    unparsable, too large (``max_size`` bytes) or too slow (``timeout`` seconds for all fix
    rounds, see :func:`hp_invariants.engine.guarded`) files get ``problem`` set. A file that is
    read-only or changed on disk while it was being fixed is not written (``skipped`` says why).
    ``project`` is an :class:`hp_invariants.engine.Project` or ``None``.
    """
    result = FileFixResult(path=path)
    try:
        raw, before_stat = read_source_bytes(path, max_size)
        source = SourceFile.from_bytes(path, raw)
        project_fn = (lambda: project.index_for(path)) if project is not None else None
        result.outcome = engine.guarded(
            lambda: fix_source(source, rules, options, project_fn, unsafe=unsafe), timeout)
        data = source.encode(result.outcome.text) if result.outcome.changed else raw
    except engine.AnalysisTimeout as exc:
        result.outcome = None
        result.problem = engine.problem(path, exc, timeout)
        return result
    except Exception as exc:  # noqa: BLE001 - reported per file, run continues
        result.outcome = None
        result.problem = engine.problem(path, exc)
        return result
    if result.outcome.changed:
        result.diff = unified_diff(path, source.text, result.outcome.text)
        if write:
            result.skipped = write_atomically(path, data, before_stat, raw)
            result.written = not result.skipped
    return result
