"""The check pipeline shared by every front end: read, decode, parse once, run the rules.

* :func:`analyze` runs the selected rules over one decoded, parsed file (no suppressions): the
  pylint plugin and the codemods call it;
* :func:`check_source` adds decoding, parsing, prefilters, per-file ignores and suppressions;
* :func:`run` checks many paths, optionally in a process pool, in deterministic order.

No libcst, pylint or torch import happens on this path.
"""

from __future__ import annotations

import ast
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hp_invariants import suppressions
from hp_invariants.config import Config, find_project_root
from hp_invariants.context import FileContext
from hp_invariants.discovery import iter_python_files
from hp_invariants.model import Confidence, FileProblem, Finding, Rule
from hp_invariants.source import SourceDecodeError, SourceFile


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

    def __init__(self, cache_dir: str | None = None, use_cache: bool = True):
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        self._indexes: dict[Path, Any] = {}
        self._roots: dict[str, Path] = {}

    def root_of(self, path: str) -> Path:
        """Return the project root of ``path`` (memoized per folder)."""
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in self._roots:
            self._roots[folder] = find_project_root(path)
        return self._roots[folder]

    def index_for(self, path: str) -> Any:
        """Return the class index of the project holding ``path`` (built or loaded on first use)."""
        root = self.root_of(path)
        if root not in self._indexes:
            from hp_invariants.class_index import ClassIndex

            self._indexes[root] = ClassIndex.for_root(root, cache_dir=self.cache_dir, use_cache=self.use_cache)
        return self._indexes[root]


# ---------------------------------------------------------------------- one file
def parse(source: SourceFile) -> ast.Module:
    """Parse decoded source; raises ``SyntaxError``, ``ValueError`` or ``RecursionError``."""
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
        if use_prefilter and not rule.applies_to(source.text):
            continue
        if rule.needs_project and project is None:
            continue
        findings.extend(rule.check(ctx))
    findings.sort(key=Finding.sort_key)
    return findings


def problem(path: str, exc: BaseException) -> FileProblem:
    """Turn an exception met while reading or parsing ``path`` into a :class:`FileProblem`."""
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

    Never raises for bad input: decoding and syntax errors become :class:`FileProblem` objects.
    """
    result = FileResult(path=path)
    try:
        source = SourceFile.from_bytes(path, raw)
    except SourceDecodeError as exc:
        result.problems.append(problem(path, exc))
        return result
    if config is not None:
        ignored = config.ignored_for_path(path, rules)
        rules = [r for r in rules if r.rule_id not in ignored]
    report_unused = bool(config and config.report_unused_suppressions)
    active = [r for r in rules if r.applies_to(source.text)]
    if not active and not (report_unused and suppressions.mentions_our_codes(source.text, rules)):
        return result
    try:
        tree = parse(source)
        project_fn = (lambda: project.index_for(path)) if project is not None else None
        findings = analyze(source, tree, active, config.options if config else {}, project_fn, use_prefilter=False)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        result.problems.append(problem(path, exc))
        return result
    except Exception as exc:  # noqa: BLE001 - a rule bug must not stop the run
        result.problems.append(problem(path, exc))
        return result
    if findings or report_unused:
        sups = suppressions.parse_suppressions(source.text, tree) if (
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
    """Read ``path`` and :func:`check_source` it; read errors become problems."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
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
    index, when a selected rule needs it, is built in the parent first so workers inherit it.
    """
    files, discovery_problems = iter_python_files(paths, config)
    result = RunResult(problems=discovery_problems)
    if project is None:
        project = Project(cache_dir=config.cache_dir)
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

        _WORKER.update(rules=rules, config=config, project=project)
        chunk = max(1, min(64, len(files) // (jobs * 4) or 1))
        batches = [files[i : i + chunk] for i in range(0, len(files), chunk)]
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            for batch_result in pool.map(_worker_check, batches):
                result.files.extend(batch_result)
    result.files.sort(key=lambda r: r.path)
    return result
