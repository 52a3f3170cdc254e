"""Applying the fixes that rules attach to findings, until nothing changes (ruff's fix loop).

Used by ``hp-invariants fix`` and by every codemod in :mod:`hp_invariants.codemods`. Each round asks
the :class:`~hp_invariants.engine.Session` for the file's final findings (:meth:`Session.findings`:
rules, per-file ignores, suppressions), applies every allowed, non-overlapping fix among them, and
re-parses the result; a round whose output does not parse is rolled back and the run stops there.
So a fix only ever repairs a finding that ``check`` reports, in every front end.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

from hp_invariants.config import Settings
from hp_invariants.engine import Session, dead_worker_problem, parse
from hp_invariants.limits import AnalysisTimeout, guarded, problem
from hp_invariants.model import Applicability, FileProblem, Finding
from hp_invariants.api import Rule
from hp_invariants.runner import parallel_map
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


def _key(finding: Finding) -> tuple:
    """A finding and its fix as :func:`fix_source` compares them between rounds: rule, place, edits."""
    edits = tuple((e.start, e.end, e.content) for e in finding.fix.edits) if finding.fix is not None else ()
    return finding.rule_id, finding.line, finding.col, edits


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
    session: Session,
    source: SourceFile,
    settings: Settings,
    unsafe: bool = False,
    rules: Sequence[Rule] | None = None,
) -> FixOutcome:
    """Apply the fixes of the findings ``check`` reports for ``source`` until none applies.

    ``settings``: the file's resolved settings; ``rules``: restrict to these (a codemod for one
    rule), default the settings' rules (never a rule the settings disable); ``unsafe``: also apply
    fixes marked unsafe. Raises ``SyntaxError`` only if the *input* does not parse; never returns text
    that does not parse.
    """
    if rules is not None:
        allowed_ids = {r.rule_id for r in settings.rules}
        rules = [r for r in rules if r.rule_id in allowed_ids]
    current = source
    tree = parse(current)
    outcome = FixOutcome(text=source.text)
    stuck: set[tuple] = set()  # findings whose fix did not clear them: never applied again
    previous: tuple | None = None  # (text before the last round, its tree, the findings it fixed)
    for round_number in range(MAX_ROUNDS):
        findings = session.findings(current, tree, settings, rules)
        if round_number == 0:
            outcome.initial = findings
        fixable = _non_overlapping(current, [f for f in findings if allowed(f, unsafe) and _key(f) not in stuck])
        again = {_key(f) for f in fixable} & {_key(f) for f in previous[2]} if previous is not None else set()
        if again:
            # the same finding with the same edit after its edit was applied: the edit does not fix it
            # (applied again it would repeat, up to MAX_ROUNDS times). Undo that round and redo it
            # without those findings, which stay reported
            stuck |= again
            current, tree, undone = previous
            del outcome.applied[len(outcome.applied) - len(undone):]
            outcome.text = current.text
            previous = None
            findings = session.findings(current, tree, settings, rules)
            fixable = _non_overlapping(current, [f for f in findings if allowed(f, unsafe) and _key(f) not in stuck])
        if not fixable:
            outcome.remaining = findings
            break
        new_text = current.apply_edits([e for f in fixable for e in f.fix.edits])
        candidate = SourceFile(path=source.path, text=new_text, encoding=source.encoding, bom=source.bom)
        try:
            new_tree = parse(candidate)
            with warnings.catch_warnings():  # compiler warnings on the user's code are not ours to print
                warnings.simplefilter("ignore")
                compile(new_tree, source.path, "exec")
        except (SyntaxError, ValueError) as exc:
            outcome.rejected = f"fix output does not parse ({exc}); left unchanged from here"
            outcome.remaining = findings
            break
        outcome.applied.extend(fixable)
        previous = (current, tree, fixable)
        current, tree = candidate, new_tree
        outcome.text = new_text
    else:
        outcome.remaining = session.findings(current, tree, settings, rules)
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


def diff_label(path: str) -> str:
    """The path shown in a diff header: normalized (``./src/a.py`` -> ``src/a.py``), ``/``-separated,
    so that ``git apply`` and ``patch -p1`` accept it; absolute paths stay absolute."""
    norm = os.path.normpath(path)
    return norm if os.path.isabs(norm) else norm.replace(os.sep, "/")


def unified_diff(path: str, before: str, after: str) -> str:
    """Return a unified diff of ``before`` -> ``after`` labelled with ``path``: git-style ``a/``
    ``b/`` prefixes for relative paths (applies with ``git apply`` and ``patch -p1`` from the folder
    the paths are relative to); an absolute path is shown as it is (``patch -p0``)."""
    import difflib

    label = diff_label(path)
    relative = not os.path.isabs(label)
    return "".join(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile=f"a/{label}" if relative else label,
        tofile=f"b/{label}" if relative else label,
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


def fix_file(session: Session, path: str, unsafe: bool = False, write: bool = True) -> FileFixResult:
    """Fix one file in place (``write``) or only compute the diff, under its own settings.

    Never raises for bad input, and then never touches the file: unreadable, undecodable,
    unparsable, too large or too slow files (the settings' limits; the time budget covers all fix
    rounds, see :func:`hp_invariants.limits.guarded`) get ``problem`` set. A file that is read-only
    or changed on disk while it was being fixed is not written (``skipped`` says why).
    """
    result = FileFixResult(path=path)
    settings = session.settings_for(path)
    timeout = settings.timeout_per_file
    try:
        raw, before_stat = read_source_bytes(path, settings.max_file_size)
        source = SourceFile.from_bytes(path, raw)
        if not session.active_rules(source, settings):
            result.outcome = FixOutcome(text=source.text)
            return result
        result.outcome = guarded(lambda: fix_source(session, source, settings, unsafe=unsafe), timeout)
        data = source.encode(result.outcome.text) if result.outcome.changed else raw
    except AnalysisTimeout as exc:
        result.outcome = None
        result.problem = problem(path, exc, timeout)
        return result
    except Exception as exc:  # noqa: BLE001 - reported per file, run continues
        result.outcome = None
        result.problem = problem(path, exc)
        return result
    if result.outcome.changed:
        result.diff = unified_diff(path, source.text, result.outcome.text)
        if write:
            result.skipped = write_atomically(path, data, before_stat, raw)
            result.written = not result.skipped
    return result


def run_fix(session: Session, paths: Sequence[str], jobs: int = 1, unsafe: bool = False,
            write: bool = True) -> tuple[list[FileFixResult], list[FileProblem]]:
    """Fix every Python file under ``paths`` (see :func:`fix_file`) with up to ``jobs`` processes
    (:func:`hp_invariants.runner.parallel_map`); returns the per-file results in path order and the
    problems of discovery and of the project-facts build. A worker that dies gives its files a problem."""
    files, problems = session.discover(paths)
    problems = list(problems) + session.prepare(files)
    if session.project is not None and jobs > 1:
        session.project.jobs = max(session.project.jobs, jobs)
    results = parallel_map(lambda p: fix_file(session, p, unsafe=unsafe, write=write), files, jobs,
                           on_dead=lambda p: FileFixResult(path=p, problem=dead_worker_problem(p)), chunk=8)
    return results, problems


def fix_text(session: Session, path: str, text: str, unsafe: bool = False,
             rules: Sequence[Rule] | None = None) -> FixOutcome:
    """:func:`fix_source` for a text that claims to be the file ``path`` (its settings apply)."""
    source = SourceFile(path=path, text=text)
    return fix_source(session, source, session.settings_for(path), unsafe=unsafe, rules=rules)
