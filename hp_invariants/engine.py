"""The one per-file pipeline every front end goes through: :class:`Session`.

``Session.check_bytes`` is the only path from a file's bytes to its final findings:

    size limit -> decode -> rule prefilters -> parse (once) -> guarded analysis
               -> per-file ignores (already in the file's Settings)
               -> a module that can never be imported reports nothing (:func:`never_imported`)
               -> suppressions

``check`` (:func:`run_check`), ``fix`` (:func:`hp_invariants.fixer.fix_source`, which calls
:meth:`Session.findings` on every round), the pylint plugin and the libcst codemods are adapters over
a session, so a finding that ``check`` would not report is never fixed by any front end.
Settings come per file from a :class:`hp_invariants.config.Resolver` (or, in the pylint plugin, from
pylint's options); project-wide facts that rules declare come from a
:class:`hp_invariants.project.Project`. No libcst, pylint or torch import happens on this path.

Nothing a file contains can stop a run: every reading, decoding, parsing and analysis error becomes
one :class:`~hp_invariants.model.FileProblem` (see :mod:`hp_invariants.limits`).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hp_invariants import newsyntax, suppressions
from hp_invariants.api import FileContext, ProjectFactsDeferred, Rule
from hp_invariants.config import DEFAULT_EXCLUDES, ConfigError, Resolver, Settings
from hp_invariants.discovery import iter_python_files
from hp_invariants.limits import AnalysisTimeout, guarded, problem
from hp_invariants.model import Confidence, FileProblem, FileResult, Finding, RunResult
from hp_invariants.project import Project, content_digest
from hp_invariants.store import ResultsCache
from hp_invariants.runner import parallel_map
from hp_invariants.source import FileTooLargeError, SourceDecodeError, SourceFile, read_source_bytes


def parse(source: SourceFile) -> ast.Module:
    """Parse decoded source; raises ``SyntaxError``, ``ValueError``, ``RecursionError`` or
    ``MemoryError`` (the parser's own stack). Syntax warnings (invalid escapes ...) are not printed:
    they are the compiler's business, not a finding of ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(source.text, filename=source.path)
        except SyntaxError as exc:  # valid for a later Python? (F0005, see hp_invariants.newsyntax)
            raise newsyntax.explain(source.text, exc, source.path) from None


def never_imported(project: Any, path: str) -> str:
    """Why the module at ``path`` can never be imported, or ``""``: one of its unconditional top-level
    imports of the project itself always fails (see
    :meth:`hp_invariants.rules.undefined_method_call.index.ClassIndex.unimportable`; read from the
    project's class index, E9503's facts, built on first use whatever rules are enabled). Nothing in
    such a module runs, so no rule reports in it: every finding is a claim about what happens when the
    code runs (issue #23, "a finding is reported only when the code fails at run time in some reachable
    configuration"). ``project``: the session's project or the results cache's tracking view of it
    (the question is then a dependency of the file's cached results). Asked only of a file with
    findings. Raises nothing for a file outside the index (``""``)."""
    from hp_invariants.declarations import CLASS_INDEX_FACTS  # noqa: PLC0415 - light; only for a file with findings

    try:
        index = project.data(CLASS_INDEX_FACTS, path)
    except ValueError:  # not in a project
        return ""
    i = index.file_index(path)
    reason = index.unimportable(i) if i is not None else ""
    if reason and isinstance(project, _TrackingProject):
        # the answer may change without any .py file changing (a compiled extension built in place,
        # a data folder created): such a file's results are not cached
        project.volatile = True
    return reason


def dead_worker_problem(path: str) -> FileProblem:
    """The problem of a file whose worker process died (OOM killer, a signal) before it returned."""
    return FileProblem("F0002", "analysis-error", path, 1, 0,
                       "a worker process died while checking this file's batch",
                       "re-run with -j 1 to find the file; the machine may be out of memory")


class Session:
    """The per-file pipeline, with the settings source and the project facts of one run.

    ``settings``: a :class:`~hp_invariants.config.Resolver` (per-file configuration) or any callable
    ``path -> Settings`` (the pylint plugin builds one from pylint's options); ``project``: the
    :class:`~hp_invariants.project.Project` rules with ``project_facts`` read (``None``: such rules
    stay silent unless ``Rule.project_optional``); ``results``: a :class:`ResultsCache` that
    :meth:`check_bytes` reads and fills (``None``: none). Every method is safe to call for many
    files; nothing is global.
    """

    def __init__(self, settings: Resolver | Callable[[str], Settings], project: Project | None = None,
                 results: "ResultsCache | None" = None):
        self.resolver = settings if isinstance(settings, Resolver) else None
        self._settings_for = settings.settings_for if isinstance(settings, Resolver) else settings
        self.project = project
        self.results = results if project is not None else None

    def settings_for(self, path: str) -> Settings:
        """Return the resolved :class:`Settings` of ``path``."""
        return self._settings_for(path)

    def map_settings(self, fn: Callable[[Settings], Settings]) -> None:
        """From now on, give every file ``fn(settings)`` instead of its resolved settings (a front end
        wrapping rules, e.g. the history features). Every stage reads settings through
        :meth:`settings_for`, so ``check``, each ``fix`` round and forked ``-j`` workers all see it;
        ``fn`` is applied once per distinct settings object (the results are memoized)."""
        inner = self._settings_for
        memo: dict[int, tuple[Settings, Settings]] = {}

        def mapped(path: str) -> Settings:
            base = inner(path)
            hit = memo.get(id(base))
            if hit is None or hit[0] is not base:
                hit = memo[id(base)] = (base, fn(base))
            return hit[1]

        self._settings_for = mapped

    # ------------------------------------------------------------------ the stages
    def analyze(self, source: SourceFile, tree: ast.Module | None, settings: Settings,
                rules: Sequence[Rule] | None = None, project: Any = None,
                deferred: list[Rule] | None = None) -> list[Finding]:
        """Run ``rules`` (default: the settings' rules) on one file; findings sorted, no suppressions
        applied. ``tree``: the parsed file, or ``None``: parsed (:func:`parse`) when the first rule
        asks for it. A rule's exception, a parse error included, propagates (callers report it per
        file). ``project``: what rules read project facts from (default: the session's project).
        ``deferred``: an early analysis (:meth:`_early`): a rule that asks for its project facts
        (:class:`~hp_invariants.api.ProjectFactsDeferred`) is appended to it, its findings dropped.
        With a project, a module that can never be imported gets no findings (:func:`never_imported`;
        for an early analysis the check that takes its findings asks)."""
        project = self.project if project is None else project
        ctx = FileContext(source, tree, settings.options, project, parse=lambda: parse(source),
                          early=deferred is not None)
        findings: list[Finding] = []
        for rule in settings.rules if rules is None else rules:
            if rule.project_facts is not None and project is None and not rule.project_optional:
                continue
            if deferred is None:
                findings.extend(rule.check(ctx))
                continue
            try:
                found = list(rule.check(ctx))
            except ProjectFactsDeferred:
                deferred.append(rule)
                continue
            findings.extend(found)
        if findings and project is not None and deferred is None and never_imported(project, source.path):
            return []  # an early analysis's findings are judged so by the check that takes them (_check)
        findings.sort(key=Finding.sort_key)
        return findings

    def suppress(self, source: SourceFile, findings: list[Finding], settings: Settings) -> list[Finding]:
        """Apply ``# pylint: disable``/``# noqa`` comments to ``findings``; add ``I9500`` findings for
        suppressions of our rules that silence nothing when the settings ask for them."""
        if not settings.suppressions:
            return findings
        report_unused = settings.report_unused_suppressions
        if not findings and not report_unused:
            return findings
        text = source.text
        if "pylint:" not in text and "noqa" not in text.lower():
            return findings
        sups = [s for s in suppressions.parse_suppressions(text) if s.kind in settings.suppressions]
        findings = suppressions.apply_suppressions(findings, sups)
        if report_unused:
            for sup in suppressions.unused(sups, settings.rules):
                findings.append(Finding(
                    rule_id=suppressions.USELESS_ID, symbol=suppressions.USELESS_SYMBOL, path=source.path,
                    line=sup.line, col=sup.col, end_line=sup.line, end_col=sup.col,
                    message=f"Useless suppression of '{sup.code}'", confidence=Confidence.HIGH))
            findings.sort(key=Finding.sort_key)
        return findings

    def findings(self, source: SourceFile, tree: ast.Module, settings: Settings,
                 rules: Sequence[Rule] | None = None) -> list[Finding]:
        """The final findings of a parsed file: :meth:`analyze` then :meth:`suppress`. What ``check``
        reports and the only findings ``fix`` and the codemods may fix."""
        return self.suppress(source, self.analyze(source, tree, settings, rules), settings)

    def active_rules(self, source: SourceFile, settings: Settings, rules: Sequence[Rule] | None = None) -> list[Rule]:
        """The settings' rules (``rules``, some of them, when given) whose text prefilter lets
        ``source`` through."""
        return [r for r in (settings.rules if rules is None else rules)
                if r.applies_to(source.text, settings.options.get(r.rule_id))]

    # ------------------------------------------------------------------ one file
    def check_bytes(self, path: str, raw: bytes, settings: Settings | None = None) -> FileResult:
        """Check the bytes ``raw`` of ``path``: the whole pipeline. Never raises for bad input:
        decoding and syntax errors, rule errors, deep nesting, an exhausted time budget and a file over
        the size limit become :class:`FileProblem` objects."""
        settings = settings or self.settings_for(path)
        if settings.max_file_size and len(raw) > settings.max_file_size:
            return FileResult(path=path, problems=[problem(path, FileTooLargeError(path, len(raw),
                                                                                    settings.max_file_size))])
        if self.results is None or not _cacheable(settings):
            return self._check(path, raw, settings, None, None)
        digest = content_digest(raw)
        try:
            where = self.results.locate(path)
            hit = self.results.lookup(path, digest, settings, where)
        except Exception:  # noqa: BLE001 - the cache only ever costs a re-check
            where, hit = None, None
        if hit is not None:
            return hit
        tracking = _TrackingProject(self.project)
        result = self._check(path, raw, settings, tracking, digest)
        if tracking.volatile:
            return result
        try:
            entry = self.results.make_entry(path, digest, settings, result, tracking, where)
        except Exception:  # noqa: BLE001
            entry = None
        if entry is not None:
            result.cache_entry = entry
            self.results.store(path, entry, where)
        return result

    def _check(self, path: str, raw: bytes, settings: Settings, tracking: Any, digest: bytes | None) -> FileResult:
        """:meth:`check_bytes` without the results cache (``tracking``: see :class:`_TrackingProject`;
        ``digest``: the content digest of ``raw`` when known)."""
        result = FileResult(path=path)
        try:
            source = SourceFile.from_bytes(path, raw)
        except SourceDecodeError as exc:
            result.problems.append(problem(path, exc))
            return result
        source.known_digest = digest
        active = self.active_rules(source, settings)
        is_built = getattr(self.project, "is_built", None)
        if is_built is not None:
            # a prefilter that reads project facts reads those of every project built so far: when the
            # file's own project is not among them (a library session, the pylint plugin over several
            # roots), a file calling only its own project's helpers was skipped for another's. Build
            # the file's project and ask again.
            late = [r for r in settings.rules if r.prefilter_reads_project and r.project_facts is not None
                    and r not in active and not is_built(r.project_facts, path)]
            if late:
                for rule in late:
                    self.project.data(rule.project_facts, path)
                active = [r for r in settings.rules if r in active or r in late
                          and r.applies_to(source.text, settings.options.get(r.rule_id))]
        if tracking is not None:  # a prefilter that read the project skipped the rule: that is a dependency
            for rule in settings.rules:
                if rule.prefilter_reads_project and rule.project_facts is not None and rule not in active:
                    tracking.prefiltered(rule, path, settings.options.get(rule.rule_id))
        if not active and not (settings.report_unused_suppressions
                               and suppressions.mentions_our_codes(source.text, settings.rules)):
            return result
        timeout = settings.timeout_per_file
        early: list[Finding] = []
        if self.project is not None and active:  # what ran on the build's tree (see early_analysis)
            kept = self.project.take_early(path, digest or content_digest(raw))
            if kept is not None and kept[0] == settings.key:
                done = frozenset(kept[1])
                # made under the path the project walk found (absolute): the check's path is the user's
                early = [f if f.path == path else dataclasses.replace(f, path=path) for f in kept[2]]
                active = [r for r in active if r.rule_id not in done]

        def work() -> list[Finding]:
            # no rule to run (only unused suppressions to report): parse anyway, a syntax error is E0001
            if not active and not early:
                parse(source)
            return self.analyze(source, None, settings, active, tracking) if active else []

        try:
            findings = guarded(work, timeout)
        except AnalysisTimeout as exc:
            result.problems.append(problem(path, exc, timeout))
            return result
        except ConfigError:  # read while the rules asked for the project (a nested pyproject.toml): as above
            raise
        except Exception as exc:  # noqa: BLE001 - syntax errors, deep nesting, a rule bug: never stop the run
            result.problems.append(problem(path, exc))
            return result
        if early:
            findings = sorted(early + findings, key=Finding.sort_key)
            if never_imported(self.project if tracking is None else tracking, path):
                findings = []
        result.findings = self.suppress(source, findings, settings)
        return result

    def early_analysis(self, path: str, raw: bytes, source: SourceFile, tree: ast.Module) -> tuple | None:
        """The early analysis of ``path`` (:meth:`Project.prepare`): run, on the tree the project
        build parsed, the active rules that read no project facts or read them on demand
        (``Rule.project_on_demand``), under the file's time budget. Returns ``(settings key, rule ids,
        findings)``, or ``None`` (nothing to run, or any failure: the check then runs those rules
        itself and reports what goes wrong). A rule that asked for its facts is not among the rule
        ids: the check runs it."""
        try:
            settings = self.settings_for(path)
            if settings.max_file_size and len(raw) > settings.max_file_size:
                return None
            rules = self.active_rules(source, settings, [r for r in settings.rules
                                                         if r.project_facts is None or r.project_on_demand])
            if not rules:
                return None
            deferred: list[Rule] = []
            findings = guarded(lambda: self.analyze(source, tree, settings, rules, deferred=deferred),
                               settings.timeout_per_file)
            return settings.key, tuple(r.rule_id for r in rules if r not in deferred), findings
        except (Exception, AnalysisTimeout):  # noqa: BLE001 - the check runs the rules again and reports it
            # (AnalysisTimeout is a BaseException: out of this file's budget, it stopped the whole build)
            return None

    def check_path(self, path: str) -> FileResult:
        """Read ``path`` (non-blocking, regular files only, size-capped) and :meth:`check_bytes` it."""
        settings = self.settings_for(path)
        try:
            raw, _ = read_source_bytes(path, settings.max_file_size)
        except OSError as exc:
            return FileResult(path=path, problems=[problem(path, exc)])
        return self.check_bytes(path, raw, settings)

    # ------------------------------------------------------------------ many files
    def discover(self, paths: Iterable[str]) -> tuple[list[str], list[FileProblem]]:
        """The Python files under ``paths`` (each folder walked under its own configuration's
        excludes) and a problem per path that cannot be walked. Needs a :class:`Resolver`."""
        if self.resolver is None:
            raise ValueError("discovery needs a Resolver")
        return iter_python_files(paths, self.resolver)

    def prepare(self, files: Sequence[str], lazy_if_cached: bool = False, early: bool = False) -> list[FileProblem]:
        """Build the project facts that the rules enabled for ``files`` declare, before a pool forks
        (workers inherit them). Returns a problem per project that could not be indexed.
        ``lazy_if_cached`` (``check``): skip the build of a project when the results cache holds every
        file's results against the project as it is now (only its fingerprint is computed).
        ``early`` (``check``): run the rules that need no project facts on the trees of ``files`` that
        the build parses, keeping their findings for :meth:`check_bytes` (see :meth:`early_analysis` and
        :meth:`~hp_invariants.project.Project.prepare`), so that a cold ``check`` parses each file
        once; the caller calls ``project.release_early()`` when done."""
        if self.project is None:
            return []
        problems: list[FileProblem] = []
        wanted: dict[Path, tuple[str, list, list]] = {}
        for path in files:
            facts = [r.project_facts for r in self.settings_for(path).rules if r.project_facts is not None]
            if facts:
                root = self.project.root_of(path)
                entry = wanted.setdefault(root, (path, [], []))
                entry[1].extend(f for f in facts if f not in entry[1])
                entry[2].append(path)
        for root, (path, facts, paths) in wanted.items():
            try:
                if lazy_if_cached and self.results is not None and self._all_current(root, facts, paths):
                    continue  # every file's results are cached against this very project: build lazily
                self.project.prepare(path, facts, keep=paths if early else (), early=self.early_analysis if early else None)
            except ConfigError:  # a nested pyproject.toml the project walk read: the run's error, not a file's
                raise
            except Exception as exc:  # noqa: BLE001 - reported; the files are still checked
                problems.append(problem(path, exc))
        return problems

    def _all_current(self, root: Path, facts: Sequence[Any], paths: Sequence[str]) -> bool:
        """True when the results cache holds an entry for each of ``paths`` recorded against the
        project as it is now (same fingerprint), so the project facts need not be built."""
        assert self.project is not None and self.results is not None
        # one walk, read against the manifest of these very facts (the one a build would read); then
        # each kind's fingerprint as an entry records it (with what that kind reads besides the Python
        # files: the fingerprint of all kinds together is another value once one kind reads any)
        self.project.fingerprint(paths[0], facts)
        fingerprints = {f.key: self.project.root_fingerprint(root, [f]) for f in facts}
        return self.results.all_current(root, paths, fingerprints)


def run_check(session: Session, paths: Iterable[str], jobs: int = 1) -> RunResult:
    """Check every Python file under ``paths``; ``jobs`` > 1 uses the process pool of
    :func:`hp_invariants.runner.parallel_map`. Output is ordered by path whatever ``jobs`` is."""
    files, discovery_problems = session.discover(paths)
    result = RunResult(problems=discovery_problems)
    if session.project is not None and jobs > 1:
        session.project.jobs = max(session.project.jobs, jobs)
    result.problems.extend(session.prepare(files, lazy_if_cached=True, early=True))
    try:
        result.files = parallel_map(session.check_path, files, jobs,
                                    on_dead=lambda path: FileResult(path=path, problems=[dead_worker_problem(path)]))
    finally:
        if session.project is not None:
            session.project.release_early()  # those of files the check did not need (cached results ...)
    result.files.sort(key=lambda r: r.path)
    if session.results is not None:
        if jobs > 1:  # entries computed in worker processes (in-process checks stored theirs already)
            for file_result in result.files:
                if file_result.cache_entry is not None:
                    session.results.store(file_result.path, file_result.cache_entry)
        session.results.save()
    if session.project is not None:
        result.notes.extend(session.project.notes)
    if "hp_invariants.store" in sys.modules:  # a run that opened the store (never imported: nothing to say)
        result.notes.extend(sys.modules["hp_invariants.store"].unusable_notes())
    return result


_DEFAULT_EXCLUDES = list(DEFAULT_EXCLUDES)


def default_project(resolver: Resolver, cache_dir: str | None = None, use_cache: bool = True, jobs: int = 1,
                    freeze_after_build: bool = False) -> Project:
    """A :class:`Project` whose walk honours the check's excludes (patterns that match the project
    root itself or its parents do not count, so a project inside an excluded folder still sees its own
    files) and whose cache folder is ``cache_dir``, else the ``cache-dir`` of the configuration
    governing the project root. ``freeze_after_build``: see :class:`Project` (short-lived processes)."""

    configs: dict[str, Any] = {}  # folder -> its configuration, None when it excludes only the defaults
    pruned: dict[tuple[str, str], bool] = {}  # (folder, root) -> excluded by the configuration of a folder above it

    def config_of(folder: str) -> Any:
        if folder not in configs:
            try:
                config = resolver.table_config_for(folder or ".")  # None: the defaults (no root lookup)
            except ConfigError as exc:
                # a folder the index walks but no checked file lives in (a sibling's broken
                # pyproject.toml): its files are indexed under the configuration of the folder above,
                # with a note; a checked file's own configuration still fails the run (settings_for)
                parent = os.path.dirname(folder)
                config = config_of(parent) if parent != folder else None
                configs[folder] = config
                project.note(f"{exc}; the project index walks its folder with the settings of the folder above")
                return config
            # with only the default excludes, the project walk already left out what they match
            configs[folder] = None if config is None or config.exclude == _DEFAULT_EXCLUDES else config
        return configs[folder]

    def folder_pruned(folder: str, root: str) -> bool:
        # as the check's walk (discovery) prunes: a folder its parent's configuration excludes is not
        # entered, so its own pyproject.toml is never read (it may not even be valid TOML)
        found = pruned.get((folder, root))
        if found is None:
            parent = os.path.dirname(folder)
            if not folder.startswith(root + os.sep) or parent == folder:  # the root itself, or outside it
                found = False
            else:
                config = config_of(parent)
                found = folder_pruned(parent, root) or config is not None and config.is_excluded(folder, given=root)
            pruned[(folder, root)] = found
        return found

    def excluded(path: str, root: Path) -> bool:  # Resolver.is_excluded, configurations memoized per folder
        folder = os.path.dirname(path)
        if folder_pruned(folder, str(root)):
            return True
        config = config_of(folder)
        return config is not None and config.is_excluded(path, given=str(root))

    def cache_for(root: Path) -> str | None:
        return cache_dir or resolver.config_for(root).cache_dir

    project = Project(cache_dir=cache_for, use_cache=use_cache, jobs=jobs, is_excluded=excluded,
                      freeze_after_build=freeze_after_build)
    return project


def default_session(resolver: Resolver, cache_dir: str | None = None, use_cache: bool = True, jobs: int = 1,
                    freeze_after_build: bool = False) -> Session:
    """A :class:`Session` over ``resolver`` with the :func:`default_project` of that resolver;
    ``use_cache`` also turns on the per-file :class:`ResultsCache` in the same cache folder;
    ``freeze_after_build``: see :class:`~hp_invariants.project.Project` (short-lived processes only)."""
    project = default_project(resolver, cache_dir, use_cache, jobs, freeze_after_build)
    return Session(resolver, project, ResultsCache(project) if use_cache else None)


def session_for_rules(rules: Sequence[Rule], options: dict[str, dict] | None = None, project: Project | None = None,
                      **settings: object) -> Session:
    """A :class:`Session` that checks every file with ``rules`` and ``options`` (rule id -> option
    values), no configuration files: for library users and tests. ``settings`` sets further
    :class:`~hp_invariants.config.Settings` fields (``report_unused_suppressions``, limits ...)."""
    fixed = Settings(rules=tuple(rules), options=dict(options or {}), **settings)  # type: ignore[arg-type]
    return Session(lambda path: fixed, project)


# ---------------------------------------------------------------------- the per-file results cache
class _TrackingProject:
    """The project as one file's check sees it when its results are cached: ``data`` hands each rule
    its facts' tracked view (:meth:`ProjectFacts.track`) and remembers the trackers."""

    def __init__(self, project: Project):
        self.project = project
        self.used: dict[str, tuple] = {}
        self.prefilters: dict[str, str | None] = {}  # facts kind -> prefilter_record of a skipped rule
        self.volatile = False  # the results depend on more than the project's Python files (never_imported)

    def prefiltered(self, rule: Rule, path: str, options: dict | None) -> None:
        """Record that ``rule``'s prefilter, which reads project facts, skipped the file ``path``."""
        facts = rule.project_facts
        if facts is not None and facts.key not in self.prefilters:
            self.prefilters[facts.key] = rule.prefilter_record(self.project.data(facts, path), options)

    def data(self, facts, path: str):
        found = self.used.get(facts.key)
        if found is None:
            view, tracker = facts.track(self.project.data(facts, path))
            found = self.used[facts.key] = (facts, tracker, view)
        return found[2]

    def __getattr__(self, name: str):
        return getattr(self.project, name)


def _cacheable(settings: Settings) -> bool:
    """True when every rule of ``settings`` is one of the bundled rules (a declaration of
    :mod:`hp_invariants.declarations`, or a class defined under :mod:`hp_invariants.rules`; told
    without importing any rule module): their findings are a function of the file, its settings and the
    project facts they read, and the cache's version tag covers their code. A rule wrapped by a front
    end (the history features' proxies, whose findings also depend on git and on pin files) or added
    by a plugin is not: such files are always checked afresh."""
    return all(_bundled(type(rule).__module__) for rule in settings.rules)


def _bundled(module: str) -> bool:
    return module == "hp_invariants.declarations" or module.startswith("hp_invariants.rules.")
