"""The check pipeline shared by every front end: read, decode, parse once, run the rules.

* :func:`analyze` runs the selected rules over one decoded, parsed file (no suppressions): the
  pylint plugin and the codemods call it;
* :func:`check_source` adds decoding, parsing, prefilters, per-file ignores and suppressions;
* :func:`run` checks many paths, optionally in a process pool, in deterministic order.

No libcst, pylint or torch import happens on this path.

Robustness (see docs/robustness.md): nothing a file contains can stop a run. Reading, decoding,
parsing and analysis errors become one :class:`FileProblem` per file (:func:`problem`):

* ``E0001 syntax-error``: a syntax error, undecodable bytes, a bad coding cookie, NUL bytes;
* ``F0001 fatal``: the file cannot be read (missing, unreadable, a folder, a FIFO, a symlink loop);
* ``F0002 analysis-error``: a rule raised, or the file is too deeply nested even for the deep stack;
* ``F0003 analysis-timeout``: the per-file time budget (``timeout-per-file``) ran out;
* ``F0004 file-too-large``: the file is over ``max-file-size`` and was not read.

:func:`guarded` runs the per-file work: under a SIGALRM time budget (:func:`time_budget`, main
thread only), and, when it hits Python's recursion limit (deeply nested expressions in ``ast.parse``
or in a rule's recursion), once more in a helper thread with a 512 MiB stack and a raised recursion
limit, so that generated code with long operator chains is still checked rather than rejected.
"""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from hp_invariants import suppressions
from hp_invariants.config import DEFAULT_MAX_FILE_SIZE, DEFAULT_TIMEOUT, Config, find_project_root
from hp_invariants.context import FileContext
from hp_invariants.discovery import iter_python_files
from hp_invariants.model import Confidence, FileProblem, Finding, Rule
from hp_invariants.source import FileTooLargeError, SourceDecodeError, SourceFile, read_source_bytes

T = TypeVar("T")

#: Recursion limit and thread stack of the deep retry (see :func:`guarded`): 60 000 frames on a
#: 512 MiB stack leaves more than 8 KiB of C stack per Python frame, so it cannot overflow.
DEEP_RECURSION_LIMIT = 60_000
DEEP_STACK_SIZE = 512 * 2**20


class AnalysisTimeout(BaseException):
    """The per-file time budget ran out.

    A ``BaseException`` (like ``KeyboardInterrupt``) so that a rule's ``except Exception`` cannot
    swallow it.
    """


# ---------------------------------------------------------------------- limits
class _Budget:
    active = False


def _on_alarm(signum: int, frame: Any) -> None:
    if _Budget.active:
        _Budget.active = False
        raise AnalysisTimeout()


@contextlib.contextmanager
def time_budget(seconds: float | None) -> Iterator[bool]:
    """Raise :class:`AnalysisTimeout` in the body if it runs longer than ``seconds``.

    Uses ``signal.setitimer(ITIMER_REAL)`` and SIGALRM, so it only works in the main thread of a
    process (the CLI, its ``-j`` worker processes, pylint); elsewhere, on platforms without
    ``setitimer``, with ``seconds`` falsy, or when some other code already has a timer armed (a
    test harness, say: it is left alone), the body runs without a budget. Yields whether the budget
    is armed. The previous SIGALRM handler is restored on exit.
    """
    if (
        not seconds
        or seconds <= 0
        or _Budget.active
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0
    ):
        yield False
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    _Budget.active = True
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield True
    finally:
        _Budget.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


@contextlib.contextmanager
def budget_paused() -> Iterator[None]:
    """Stop the clock of an armed :func:`time_budget` for the body (e.g. while the project's class
    index is built: that is per-project work, not per-file) and restart it with what was left."""
    if not _Budget.active:
        yield
        return
    remaining, _ = signal.setitimer(signal.ITIMER_REAL, 0)
    _Budget.active = False
    try:
        yield
    finally:
        _Budget.active = True
        signal.setitimer(signal.ITIMER_REAL, max(remaining, 0.001))


def _interrupt_thread(thread: threading.Thread) -> None:
    """Ask ``thread`` to raise :class:`AnalysisTimeout` at its next bytecode (CPython only)."""
    try:
        import ctypes

        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident or 0), ctypes.py_object(AnalysisTimeout))
    except (ImportError, AttributeError):  # pragma: no cover - not CPython
        pass


def _run_deep(fn: Callable[[], T], timeout: float | None) -> T:
    """Run ``fn`` in a helper thread with a large stack and a raised recursion limit."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    old_limit = sys.getrecursionlimit()
    try:
        old_size = threading.stack_size(DEEP_STACK_SIZE)
    except (ValueError, RuntimeError) as exc:  # platform refuses large thread stacks
        raise RecursionError(f"no deep stack available: {exc}") from exc
    thread = threading.Thread(target=target, name="hp-invariants-deep", daemon=True)
    try:
        sys.setrecursionlimit(max(old_limit, DEEP_RECURSION_LIMIT))
        thread.start()
    except RuntimeError as exc:  # cannot start a thread (out of memory / threads)
        sys.setrecursionlimit(old_limit)
        raise RecursionError(f"no deep stack available: {exc}") from exc
    finally:
        threading.stack_size(old_size)
    try:
        thread.join(timeout if timeout and timeout > 0 else None)
        if thread.is_alive():
            _interrupt_thread(thread)
            thread.join(1.0)
            raise AnalysisTimeout()
    finally:
        sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]


def guarded(fn: Callable[[], T], timeout: float | None = DEFAULT_TIMEOUT) -> T:
    """Return ``fn()`` run under the per-file budget of ``timeout`` seconds.

    On ``RecursionError`` (a deeply nested expression in ``ast.parse`` or in a rule's recursion),
    ``fn`` runs once more in a thread with a 512 MiB stack and a recursion limit of 60 000, with
    what is left of the budget (there the budget is a thread join plus an asynchronous
    :class:`AnalysisTimeout`). ``fn`` must be a pure computation (it may run twice). Raises
    :class:`AnalysisTimeout`, and whatever ``fn`` raises, including ``RecursionError`` when even
    the deep stack is not enough.
    """
    start = time.monotonic()
    try:
        with time_budget(timeout):
            return fn()
    except RecursionError:
        pass
    remaining = None
    if timeout and timeout > 0:
        remaining = timeout - (time.monotonic() - start)
        if remaining <= 0:
            raise AnalysisTimeout()
    return _run_deep(fn, remaining)


@dataclass
class FileResult:
    """The outcome of checking one file: findings (after suppressions) and problems."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)


@dataclass
class RunResult:
    """The outcome of a run over many files, ordered by path."""

    files: list[FileResult] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)

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


# ---------------------------------------------------------------------- project (class index)
class Project:
    """Lazily built, per-root project data for rules with ``needs_project`` (the E9503 index).

    ``cache_dir`` is where the index cache lives (``None``: the default user cache); ``use_cache``
    False disables it. Indexes are memoized per root for the life of the process.
    """

    def __init__(self, cache_dir: str | None = None, use_cache: bool = True, jobs: int = 1):
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        self.jobs = jobs  # processes for building an index (the CLI's -j; 1: serial)
        self._indexes: dict[Path, Any] = {}
        self._roots: dict[str, Path] = {}

    def root_of(self, path: str) -> Path:
        """Return the project root of ``path`` (memoized per folder)."""
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in self._roots:
            self._roots[folder] = find_project_root(path)
        return self._roots[folder]

    def index_for(self, path: str) -> Any:
        """Return the class index of the project holding ``path`` (built or loaded on first use).

        The per-file time budget is paused while the index is built (it is per-project work).
        """
        root = self.root_of(path)
        if root not in self._indexes:
            from hp_invariants.class_index import ClassIndex

            with budget_paused():
                self._indexes[root] = ClassIndex.for_root(root, cache_dir=self.cache_dir, use_cache=self.use_cache,
                                                          jobs=self.jobs)
        return self._indexes[root]


# ---------------------------------------------------------------------- one file
def parse(source: SourceFile) -> ast.Module:
    """Parse decoded source; raises ``SyntaxError``, ``ValueError``, ``RecursionError`` or
    ``MemoryError`` (the parser's own stack). Syntax warnings (invalid escapes ...) are not printed:
    they are the compiler's business, not a finding of ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(source.text, filename=source.path)


def analyze(
    source: SourceFile,
    tree: ast.Module,
    rules: Sequence[Rule],
    options: dict[str, dict[str, Any]] | None = None,
    project: Callable[[], Any] | None = None,
    use_prefilter: bool = True,
) -> list[Finding]:
    """Run ``rules`` on one parsed file and return their findings, sorted, without suppressions.

    ``project`` returns the class index (see :class:`Project`); rules needing it are skipped when it
    is ``None``. Exceptions raised by a rule propagate (callers report them as internal errors).
    """
    ctx = FileContext(source=source, tree=tree, options=options or {}, project=project)
    findings: list[Finding] = []
    for rule in rules:
        if use_prefilter and not rule.applies_to(source.text, (options or {}).get(rule.rule_id)):
            continue
        if rule.needs_project and project is None:
            continue
        findings.extend(rule.check(ctx))
    findings.sort(key=Finding.sort_key)
    return findings


def problem(path: str, exc: BaseException, timeout: float | None = None) -> FileProblem:
    """Turn an exception met while reading, parsing or analysing ``path`` into a :class:`FileProblem`.

    ``timeout`` is the budget in seconds, quoted in the message of an :class:`AnalysisTimeout`.
    """
    if isinstance(exc, AnalysisTimeout):
        limit = f" of {timeout:g} s" if timeout else ""
        return FileProblem("F0003", "analysis-timeout", path, 1, 0,
                           f"analysis stopped: over the per-file time budget{limit}",
                           "the file was skipped; raise --timeout-per-file / timeout-per-file, or exclude it")
    if isinstance(exc, FileTooLargeError):
        return FileProblem("F0004", "file-too-large", path, 1, 0, f"not checked: {exc.strerror}",
                           "exclude it (generated code?) or raise --max-file-size / max-file-size")
    if isinstance(exc, SyntaxError):
        line = exc.lineno or 1
        col = max((exc.offset or 1) - 1, 0)
        return FileProblem("E0001", "syntax-error", path, line, col, f"cannot parse: {exc.msg}",
                           "fix the syntax error; the file was not checked")
    if isinstance(exc, SourceDecodeError):
        return FileProblem("E0001", "syntax-error", path, 1, 0, f"cannot decode: {exc}",
                           "save the file as UTF-8 or fix its coding cookie; the file was not checked")
    if isinstance(exc, (RecursionError, MemoryError)):
        return FileProblem("F0002", "analysis-error", path, 1, 0,
                           f"too deeply nested to analyse ({type(exc).__name__})",
                           "simplify the nested expression; the file was not checked")
    if isinstance(exc, OSError):
        return FileProblem("F0001", "fatal", path, 1, 0, f"cannot read: {exc.strerror or exc}",
                           "check that the path exists, is a regular file and is readable")
    if isinstance(exc, UnicodeError):  # e.g. a fix that the file's encoding cannot represent
        return FileProblem("F0002", "analysis-error", path, 1, 0, f"cannot encode the result: {exc}",
                           "the file was left unchanged")
    return FileProblem("F0002", "analysis-error", path, 1, 0,
                       f"internal error: {type(exc).__name__}: {exc}",
                       "please report this with the file; the file was not checked")


def check_source(
    path: str,
    raw: bytes,
    rules: Sequence[Rule],
    config: Config | None = None,
    project: Project | None = None,
) -> FileResult:
    """Check the bytes ``raw`` of ``path``: decode, prefilter, parse once, run, suppress.

    Never raises for bad input: decoding and syntax errors, rule errors, deep nesting, an exhausted
    time budget (``config.timeout_per_file``) and a file over ``config.max_file_size`` become
    :class:`FileProblem` objects (see :func:`problem`).
    """
    result = FileResult(path=path)
    timeout = config.timeout_per_file if config is not None else DEFAULT_TIMEOUT
    max_size = config.max_file_size if config is not None else DEFAULT_MAX_FILE_SIZE
    if max_size and len(raw) > max_size:
        result.problems.append(problem(path, FileTooLargeError(path, len(raw), max_size)))
        return result
    try:
        source = SourceFile.from_bytes(path, raw)
    except SourceDecodeError as exc:
        result.problems.append(problem(path, exc))
        return result
    if config is not None:
        ignored = config.ignored_for_path(path, rules)
        rules = [r for r in rules if r.rule_id not in ignored]
    report_unused = bool(config and config.report_unused_suppressions)
    active = [r for r in rules if r.applies_to(source.text, (config.options if config else {}).get(r.rule_id))]
    if not active and not (report_unused and suppressions.mentions_our_codes(source.text, rules)):
        return result
    project_fn = (lambda: project.index_for(path)) if project is not None else None
    options = config.options if config else {}

    def work() -> tuple[ast.Module, list[Finding]]:
        tree = parse(source)
        return tree, analyze(source, tree, active, options, project_fn, use_prefilter=False)

    try:
        tree, findings = guarded(work, timeout)
    except AnalysisTimeout as exc:
        result.problems.append(problem(path, exc, timeout))
        return result
    except Exception as exc:  # noqa: BLE001 - syntax errors, deep nesting, a rule bug: never stop the run
        result.problems.append(problem(path, exc))
        return result
    if findings or report_unused:
        sups = suppressions.parse_suppressions(source.text) if (
            "pylint:" in source.text or "noqa" in source.text.lower()) else []
        findings = suppressions.apply_suppressions(findings, sups)
        if report_unused:
            for sup in suppressions.unused(sups, rules):
                findings.append(Finding(
                    rule_id=suppressions.USELESS_ID, symbol=suppressions.USELESS_SYMBOL, path=path,
                    line=sup.line, col=sup.col, end_line=sup.line, end_col=sup.col,
                    message=f"Useless suppression of '{sup.code}'", confidence=Confidence.HIGH))
            findings.sort(key=Finding.sort_key)
    result.findings = findings
    return result


def check_path(path: str, rules: Sequence[Rule], config: Config | None, project: Project | None) -> FileResult:
    """Read ``path`` and :func:`check_source` it; read errors become problems.

    Reading goes through :func:`hp_invariants.source.read_source_bytes`: non-blocking, regular files
    only, at most ``max-file-size`` bytes.
    """
    max_size = config.max_file_size if config is not None else DEFAULT_MAX_FILE_SIZE
    try:
        raw, _ = read_source_bytes(path, max_size)
    except OSError as exc:
        return FileResult(path=path, problems=[problem(path, exc)])
    return check_source(path, raw, rules, config, project)


# ---------------------------------------------------------------------- many files
_WORKER: dict[str, Any] = {}


def _worker_check(paths: list[str]) -> list[FileResult]:
    return [check_path(p, _WORKER["rules"], _WORKER["config"], _WORKER["project"]) for p in paths]


def run(
    paths: Iterable[str],
    config: Config,
    rules: Sequence[Rule],
    jobs: int = 1,
    project: Project | None = None,
) -> RunResult:
    """Check every Python file under ``paths`` with ``rules``.

    ``jobs`` > 1 uses a process pool (fork); output order is by path whatever ``jobs`` is. The class
    index, when a selected rule needs it, is built in the parent first so workers inherit it; with
    ``jobs`` > 1 the files it has to parse are summarized by ``jobs`` processes too.
    """
    files, discovery_problems = iter_python_files(paths, config)
    result = RunResult(problems=discovery_problems)
    if project is None:
        project = Project(cache_dir=config.cache_dir)
    if jobs > 1:
        project.jobs = max(project.jobs, jobs)
    if any(r.needs_project for r in rules) and files:
        for root_file in {str(project.root_of(f)): f for f in files}.values():
            try:
                project.index_for(root_file)
            except Exception as exc:  # noqa: BLE001
                result.problems.append(problem(root_file, exc))
    jobs = max(1, min(jobs, len(files) or 1))
    if jobs == 1 or sys.platform == "win32":
        result.files = [check_path(p, rules, config, project) for p in files]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        _WORKER.update(rules=rules, config=config, project=project)
        chunk = max(1, min(64, len(files) // (jobs * 4) or 1))
        batches = [files[i : i + chunk] for i in range(0, len(files), chunk)]
        from concurrent.futures.process import BrokenProcessPool

        done = 0
        try:
            with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
                for batch_result in pool.map(_worker_check, batches):
                    result.files.extend(batch_result)
                    done += 1
        except BrokenProcessPool:  # a worker was killed (out of memory, signal): report, do not crash
            for batch in batches[done:]:
                result.files.extend(FileResult(path=p, problems=[FileProblem(
                    "F0002", "analysis-error", p, 1, 0, "a worker process died while checking this file's batch",
                    "re-run with -j 1 to find the file; the machine may be out of memory")]) for p in batch)
    result.files.sort(key=lambda r: r.path)
    return result
