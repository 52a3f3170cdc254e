"""Command-line wiring of the history features; ``hp_invariants.cli`` calls in with a few lines.

* :func:`add_arguments`: ``check --baseline/--no-baseline/--fail-on-stale-baseline/--since/--pins``,
  ``fix --since/--pin/--pins``, and the subcommands ``baseline``, ``pin``, ``unpin``
  (:data:`COMMANDS`);
* :func:`prepare_check` (a pass over ``check``'s results) / :func:`map_rules` (``fix``): E9503's restore-from-history
  (check and every fix round);
* :func:`after_check`: pins, fingerprints, ``--since`` and the baseline applied to a check's result;
* :func:`fix_session`: ``fix --since`` (fix only what a change introduced) and ``fix --pin``;
* :func:`explain`: the documentation of ``E9590 reverted-fix`` / ``W9591 stale-pin``.

Configuration keys in ``[tool.hp-invariants]`` (paths relative to that ``pyproject.toml``):
``baseline`` (default ``hp-invariants-baseline.json``, used when it exists), ``pins`` (default
``hp-invariants-pins.json``), ``restore-from-history`` (default true).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import sys
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hp_invariants.model import Finding
from hp_invariants.api import Rule

#: exceptions of this package that become a one-line error and exit 2
def _errors() -> tuple[type[BaseException], ...]:
    from hp_invariants.history.baseline import BaselineError
    from hp_invariants.history.git import GitError
    from hp_invariants.history.pins import PinError

    return (GitError, BaselineError, PinError)


class HistoryError(Exception):
    """A history feature cannot run (no repository, unknown revision, bad file): exit 2."""


# ---------------------------------------------------------------------- arguments
def add_arguments(sub: Any, check: argparse.ArgumentParser, fix: argparse.ArgumentParser,
                  common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the history options to ``check``/``fix`` and the ``baseline``/``pin``/``unpin`` commands."""
    check.add_argument("--baseline", metavar="FILE",
                       help="report only findings not in this baseline (default: config 'baseline', "
                            "or hp-invariants-baseline.json in the project root when it exists)")
    check.add_argument("--no-baseline", action="store_true", help="ignore the baseline: report every finding")
    check.add_argument("--fail-on-stale-baseline", action="store_true",
                       help="exit 1 when baseline entries no longer occur (run `hp-invariants baseline` to drop them)")
    check.add_argument("--since", metavar="REV",
                       help="report only findings introduced since the git revision REV (matched by fingerprint)")
    check.add_argument("--pins", metavar="FILE", help="pins file (default: config 'pins' or hp-invariants-pins.json)")
    fix.add_argument("--since", metavar="REV", help="fix only findings introduced since the git revision REV")
    fix.add_argument("--pin", action="store_true", help="record a pin for each repair made (see `explain E9590`)")
    fix.add_argument("--pins", metavar="FILE", help="pins file (default: config 'pins' or hp-invariants-pins.json)")

    baseline = sub.add_parser("baseline", help="write the baseline: accept the current findings (only shrinks)")
    common(baseline)
    baseline.add_argument("--baseline", metavar="FILE", help="the baseline file to write (default: config 'baseline')")
    baseline.add_argument("--update", action="store_true",
                          help="also add findings that are not in the existing baseline")

    pin = sub.add_parser("pin", help="pin the repairs made by fix commits, so that a revert is reported")
    pin.add_argument("commits", nargs="+", metavar="COMMIT", help="fix commits (sha, branch, HEAD~2 ...)")
    pin.add_argument("--pins", metavar="FILE", help="pins file (default: config 'pins' or hp-invariants-pins.json)")
    pin.add_argument("--config", metavar="PYPROJECT", help="pyproject.toml to read [tool.hp-invariants] from")
    pin.add_argument("--no-cache", action="store_true", help="do not read or write the class-index cache")
    pin.add_argument("--cache-dir", metavar="DIR", help="class-index cache folder")

    unpin = sub.add_parser("unpin", help="remove pins (by id, or all pins of a commit)")
    unpin.add_argument("ids", nargs="+", metavar="ID",
                       help="pin id (RULE:Class.method, as `pin` printed it) or a commit sha (7+ digits)")
    unpin.add_argument("--pins", metavar="FILE", help="pins file (default: config 'pins' or hp-invariants-pins.json)")
    unpin.add_argument("--config", metavar="PYPROJECT", help="pyproject.toml to read [tool.hp-invariants] from")


def _history_settings(config: Any) -> dict[str, Any]:
    return getattr(config, "history", None) or {}


def _path(config: Any, key: str, default_name: str, given: str | None, for_write: bool = False) -> Path | None:
    """The file of ``key``: ``given`` on the command line, else the configured one, else the
    default name in the project root (for reading: only when it exists)."""
    from hp_invariants.config import ConfigError

    if given:
        return Path(given)
    value = _history_settings(config).get(key)
    if value is not None:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{config.source} [tool.hp-invariants]: '{key}' must be a file path, got {value!r}")
        return Path(config.root) / value
    default = Path(config.root) / default_name
    return default if for_write or default.exists() else None


def _restore_enabled(config: Any) -> bool:
    from hp_invariants.config import ConfigError

    value = _history_settings(config).get("restore-from-history", True)
    if not isinstance(value, bool):
        raise ConfigError(f"{config.source} [tool.hp-invariants]: 'restore-from-history' must be a boolean")
    return value


# ---------------------------------------------------------------------- sessions
def _config(session: Any, args: argparse.Namespace) -> Any:
    """The configuration governing the first path of the run (its ``baseline``/``pins`` keys and its
    project root)."""
    return session.resolver.config_for((getattr(args, "paths", None) or ["."])[0])


def map_rules(session: Any, wrap: Callable[[Rule], Rule]) -> None:
    """Make ``session`` run ``wrap(rule)`` instead of each rule of every file's settings (through
    :meth:`hp_invariants.engine.Session.map_settings`, so every stage of the pipeline sees it)."""
    session.map_settings(lambda base: dataclasses.replace(base, rules=tuple(wrap(r) for r in base.rules)))


def _provenance_cache_dir(args: argparse.Namespace, session: Any) -> str | None:
    """The cache folder of the provenance answers (``None`` with ``--no-cache``)."""
    if getattr(args, "no_cache", False):
        return None
    from hp_invariants.store import default_cache_dir

    return getattr(_config(session, args), "cache_dir", None) or default_cache_dir()


def has_member_hook(rule: Rule) -> bool:
    """Whether ``rule`` (or the rule a proxy wraps) implements :meth:`~hp_invariants.api.Rule.missing_member`
    (a bundled rule's declaration defines it: told without importing the analysis)."""
    from hp_invariants.history.proxy import unwrap

    return type(unwrap(rule)).missing_member is not Rule.missing_member


def _wrap_restore(args: argparse.Namespace, session: Any) -> None:
    """For ``fix``: wrap the rules with the ``missing_member`` hook so that every fix round sees the
    restore-from-history fix (unless ``restore-from-history = false``)."""
    from hp_invariants.history import restore
    from hp_invariants.history.proxy import RuleProxy

    if not _restore_enabled(_config(session, args)):
        return
    transform = restore.RestoreTransform((args.paths or ["."])[0], _provenance_cache_dir(args, session))
    map_rules(session, lambda r: RuleProxy(r, transform) if has_member_hook(r) else r)


def prepare_check(args: argparse.Namespace, session: Any) -> Callable[[Any], None] | None:
    """Return the restore-from-history pass of ``check`` (``None`` when ``restore-from-history =
    false``): for the findings of rules with the ``missing_member`` hook (E9503), the commit that
    deleted or renamed the member, applied to the run's results after the pipeline, so the
    pipeline's rules stay the bundled ones (and its results cache applies). git is only called when
    such a finding occurs, in a git work tree; the answers are cached per ``HEAD``. (``fix`` wraps
    the rules instead: see :func:`fix_session`, its fix loop needs the restore fix on every round.)"""
    if not _restore_enabled(_config(session, args)):
        return None
    start = (args.paths or ["."])[0]
    hooked = {r.rule_id for r in session.resolver.rules if has_member_hook(r)}

    def post(result: Any) -> None:
        transform = None
        for file_result in result.files:
            mine = [f for f in file_result.findings if f.rule_id in hooked]
            if not mine:
                continue
            if transform is None:  # git and the restore machinery only once there is such a finding
                from hp_invariants.history import restore
                from hp_invariants.source import SourceFile, read_source_bytes

                transform = restore.RestoreTransform(start, _provenance_cache_dir(args, session), autosave=False)
            try:
                source = SourceFile.from_bytes(file_result.path, read_source_bytes(file_result.path)[0])
            except (OSError, ValueError):
                continue
            others = [f for f in file_result.findings if f.rule_id not in hooked]
            shaped = transform(mine, types.SimpleNamespace(source=source, path=file_result.path))
            file_result.findings = sorted(others + shaped, key=Finding.sort_key)
        if transform is not None:
            transform.save()

    return post


def _tree_checker(args: argparse.Namespace, resolver: Any, pin_list: Sequence[Any] = (),
                  pins_rel: str = "") -> Callable[[str, Sequence[str]], list[Finding]]:
    """A ``check_tree(tree_root, paths)`` that checks an extracted tree (an old commit) through the
    same pipeline: each file under the configuration the tree holds (``--config`` and command-line
    flags as given), with a class index of that tree, plus the pins."""
    from hp_invariants import engine
    from hp_invariants.config import Resolver
    from hp_invariants.history import pins
    from hp_invariants.history.fingerprint import read_text_file

    sessions: dict[str, Any] = {}  # one session (and class index) per extracted tree

    def check_tree(tree_root: str, paths: Sequence[str]) -> list[Finding]:
        session = sessions.get(tree_root)
        if session is None:
            tree_resolver = Resolver(resolver.rules, resolver.overrides, resolver.config_file)
            session = sessions[tree_root] = engine.default_session(
                tree_resolver, cache_dir=getattr(args, "cache_dir", None), use_cache=not getattr(args, "no_cache", False))
        jobs = getattr(args, "jobs", 1) or (os.cpu_count() or 1)
        result = engine.run_check(session, list(paths), jobs=jobs)
        findings = list(result.findings)
        if pin_list:
            def project_files() -> list[str]:
                return session.discover([tree_root])[0]

            findings += pins.check(pin_list, findings, [r.path for r in result.files], project_files,
                                   read_text_file, os.path.join(tree_root, pins_rel))
        return findings

    return check_tree


# ---------------------------------------------------------------------- check
@dataclass
class CheckOutcome:
    """What the history features made of a check: the findings to report with their fingerprints
    (``marked``), notes for stderr, stale baseline entries and whether they fail the run."""

    marked: list[Any]
    notes: list[str] = field(default_factory=list)
    stale: list[Any] = field(default_factory=list)
    fail_on_stale: bool = False

    @property
    def findings(self) -> list[Finding]:
        """The findings to report, in output order."""
        return [item.finding for item in self.marked]

    @property
    def annotations(self) -> list[Any]:
        """One :class:`hp_invariants.output.Annotation` per finding of :attr:`findings`."""
        return [item.annotation() for item in self.marked]

    def exit_code(self, problems: Sequence[Any]) -> int:
        """2 with problems, 1 with findings (or stale entries under ``--fail-on-stale-baseline``), else 0."""
        if problems:
            return 2
        return 1 if self.marked or (self.fail_on_stale and self.stale) else 0


def after_check(args: argparse.Namespace, session: Any, result: Any) -> CheckOutcome | None:
    """Apply pins, fingerprints, the baseline and ``--since`` to ``result`` (the
    :class:`hp_invariants.engine.RunResult` of ``session``). Returns ``None`` when no history
    feature is in use (the plain check path stays as it was). Raises :class:`HistoryError` (exit 2)
    for a git or file error."""
    from hp_invariants.history import BASELINE_FILE, PINS_FILE

    config = _config(session, args)
    baseline_path = None if args.no_baseline else _path(config, "baseline", BASELINE_FILE, args.baseline)
    pins_path = _path(config, "pins", PINS_FILE, args.pins)
    if not (baseline_path or pins_path or args.since or args.format in ("json", "sarif") or args.fail_on_stale_baseline):
        return None
    from hp_invariants.history import baseline as baseline_mod
    from hp_invariants.history import pins
    from hp_invariants.history.fingerprint import annotate, match, read_text_file
    try:
        checked = _checked_rules(session, result)
        findings = list(result.findings)
        if args.pins and not pins_path.exists():  # named on the command line: a typo must not check nothing
            raise HistoryError(f"pins file {pins_path} not found (write it with `hp-invariants pin COMMIT`)")
        pin_list = pins.load(pins_path) if pins_path else []
        if pin_list:
            def project_files() -> list[str]:
                return session.discover([str(config.root)])[0]

            findings += pins.check(pin_list, findings, [r.path for r in result.files], project_files, read_text_file,
                                   str(pins_path))
            findings.sort(key=Finding.sort_key)
        outcome = CheckOutcome(annotate(findings, read_text_file), fail_on_stale=args.fail_on_stale_baseline)
        # the baseline and --since each split every finding of the run (an accepted finding is stale
        # only when it no longer occurs at all); a finding is reported when both call it new. Both
        # match in the same order, so of identical findings the same ones are new to both: a copy of an
        # accepted finding made since REV is reported (filtered one after the other, the second filter
        # took the copy for the instance the first had already matched)
        everything = outcome.marked
        reported = set(range(len(everything)))
        if baseline_path:
            if not baseline_path.exists():
                raise HistoryError(f"baseline file {baseline_path} not found (write it with `hp-invariants baseline`)")
            accepted = baseline_mod.load(baseline_path, Path(config.root))
            renamed = _renamed_since(args.since, config, accepted.root) if args.since else None
            new, stale = baseline_mod.filter_new(everything, accepted, checked, renamed)
            reported &= _positions(everything, new)
            outcome.stale = stale
            outcome.notes.append(f"baseline {baseline_path}: {len(everything) - len(new)} finding(s) accepted, "
                                 f"{len(new)} new")
            for entry in stale:
                outcome.notes.append(f"stale baseline entry (no longer occurs; `hp-invariants baseline` drops it): "
                                     f"{entry.describe()}")
        if args.since:
            from hp_invariants.history import since

            pins_rel = os.path.relpath(os.path.realpath(pins_path), _repo_root(config)) if pins_path else ""
            commit, old, places = since.rev_fingerprints(args.since, args.paths or ["."],
                                                         _tree_checker(args, session.resolver, pin_list, pins_rel))
            new, unchanged, _ = match(everything, old, places, since.place_of(_repo_root(config)))
            reported &= _positions(everything, new)
            outcome.notes.append(f"--since {commit.short} '{commit.subject}': {len(new)} finding(s) introduced, "
                                 f"{len(unchanged)} already there (not reported)")
        if baseline_path or args.since:
            outcome.marked = [everything[i].marked_new() for i in sorted(reported)]
        return outcome
    except _errors() as exc:
        raise HistoryError(str(exc)) from exc


def _checked_rules(session: Any, result: Any) -> dict[str, frozenset[str]]:
    """Each file ``result`` checked without a problem (not over its time or size limit, parsed) to the ids
    of the rules its settings ran: what a baseline entry may be found stale against."""
    return {r.path: frozenset(rule.rule_id for rule in session.settings_for(r.path).rules)
            for r in result.files if not r.problems}


def _renamed_since(rev: str, config: Any, root: Path) -> dict[str, str]:
    """The files git sees renamed between ``rev`` and the work tree, as paths relative to ``root`` (the
    baseline's): what the baseline pairs with first under ``--since``, as ``--since`` itself does (a
    renamed file keeps its accepted findings, a copy of its code is new)."""
    from hp_invariants.history import baseline as baseline_mod
    from hp_invariants.history import git

    repo = _repo_root(config)
    out = {}
    for old, new in git.changed_since(rev, repo):
        if old and new and old != new:
            out[baseline_mod.relative_path(os.path.join(repo, old), root)] = \
                baseline_mod.relative_path(os.path.join(repo, new), root)
    return out


def _positions(items: Sequence[Any], chosen: Iterable[Any]) -> set[int]:
    """The positions in ``items`` of the objects ``chosen`` (a sub-list of them, by identity)."""
    ids = {id(item) for item in chosen}
    return {i for i, item in enumerate(items) if id(item) in ids}


def _repo_root(config: Any) -> str:
    from hp_invariants.history import git

    return str(git.repo_root(config.root))


def print_notes(outcome: CheckOutcome | None) -> None:
    """Print the notes of :func:`after_check` to stderr."""
    for note in outcome.notes if outcome else ():
        print(f"hp-invariants: {note}", file=sys.stderr)


# ---------------------------------------------------------------------- commands
def _write(text: str) -> None:
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:  # a file name with undecodable bytes
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))


def cmd_baseline(args: argparse.Namespace, make_session: Callable[[argparse.Namespace], tuple[Any, int]]) -> int:
    """``hp-invariants baseline``: write the baseline (creates it; else only drops stale entries,
    and adds new findings only with ``--update``). ``make_session`` is the CLI's
    ``(session, jobs)`` factory (configuration and flags as for ``check``). Returns the exit code."""
    from hp_invariants import engine, output
    from hp_invariants.history import baseline as baseline_mod
    from hp_invariants.history.fingerprint import annotate, read_text_file

    session, jobs = make_session(args)
    config = _config(session, args)
    result = engine.run_check(session, args.paths or ["."], jobs=jobs)
    findings = annotate(result.findings, read_text_file)  # fingerprinted findings
    path = _path(config, "baseline", baseline_mod.DEFAULT_NAME, args.baseline, for_write=True)
    root = Path(config.root)  # entry paths are relative to the project root
    texts: dict[str, str | None] = {}

    def entry(item: Any) -> Any:
        path = item.finding.path
        if path not in texts:
            texts[path] = read_text_file(path)
        return baseline_mod.entry_for(item, texts[path], root)

    try:
        old = baseline_mod.load(path, root) if path.exists() else None
    except baseline_mod.BaselineError as exc:
        raise HistoryError(str(exc)) from exc
    if old is None:
        entries, added, dropped, skipped = [entry(f) for f in findings], len(findings), 0, 0
    else:
        checked = _checked_rules(session, result)
        new, stale = baseline_mod.filter_new(findings, old, checked)
        new_ids = {id(f) for f in new}
        kept = [entry(f) for f in findings if id(f) not in new_ids]
        checked_rel = {baseline_mod.relative_path(p, root): ids for p, ids in checked.items()}
        stale_ids = {id(e) for e in stale}
        matched = Counter(e.fingerprint for e in kept)
        untouched = []
        for e in old.entries:  # entries this run did not check (file, rule) stay as they are
            if id(e) in stale_ids or e.rule in checked_rel.get(e.path, ()):
                continue
            if not (root / e.path).exists() and matched[e.fingerprint] > 0:
                matched[e.fingerprint] -= 1  # a moved file's entry: kept under its new path
                continue
            untouched.append(e)
        entries = untouched + kept + ([entry(f) for f in new] if args.update else [])
        added, dropped, skipped = (len(new) if args.update else 0), len(stale), (0 if args.update else len(new))
    baseline_mod.dump(baseline_mod.Baseline(root, entries), path)
    for note in result.notes:  # the project walk's, an unusable cache folder's: as check prints them
        print(f"hp-invariants: note: {note}", file=sys.stderr)
    message = f"hp-invariants: wrote {path} with {len(entries)} accepted finding(s)"
    if old is not None:
        message += f" ({dropped} no longer occurring removed, {added} added)"
    print(message, file=sys.stderr)
    if skipped:
        print(f"hp-invariants: {skipped} new finding(s) were NOT added (the baseline only shrinks; fix them, "
              f"or accept them with `hp-invariants baseline --update`):", file=sys.stderr)
        _write(output.format_text([item.finding for item in findings if id(item) in new_ids], []))
    if result.all_problems:
        _write(output.format_text([], result.all_problems))
        print(f"hp-invariants: {len(result.all_problems)} file(s) could not be checked: their findings are not "
              f"in the baseline", file=sys.stderr)
        return 2
    return 1 if skipped else 0


def _pin_context(args: argparse.Namespace) -> tuple[Any, Any, Path]:
    """``(resolver, config, pins file)`` of ``pin``/``unpin`` run in the current folder."""
    from hp_invariants.config import Resolver
    from hp_invariants.history import pins
    from hp_invariants.registry import RULES

    resolver = Resolver(RULES, config_file=Path(args.config) if args.config else None)
    config = resolver.config_for(".")
    return resolver, config, _path(config, "pins", pins.DEFAULT_NAME, args.pins, for_write=True)


def _removed(before: Sequence[Finding], after: Sequence[Finding]) -> list[Finding]:
    """Findings of ``before`` with no counterpart (same rule and scope) left in ``after``."""
    left = Counter((f.rule_id, f.obj) for f in after)
    removed = []
    for finding in before:
        key = (finding.rule_id, finding.obj)
        if left[key] > 0:
            left[key] -= 1
        else:
            removed.append(finding)
    return removed


def cmd_pin(args: argparse.Namespace, make_session: Any = None) -> int:
    """``hp-invariants pin COMMIT...``: record the repairs of fix commits. Exit 0, or 1 when a
    commit is refused (nothing it changed is a repair this tool knows), 2 on errors."""
    import tempfile

    from hp_invariants.history import git, pins

    resolver, _config_, pins_path = _pin_context(args)
    try:
        root = git.repo_root(".")
        existing = pins.load(pins_path)
        check_tree = _tree_checker(args, resolver)
        recorded, status = [], 0
        for rev in args.commits:
            commit = git.commit_info(rev, root)
            parent = git.parent_of(commit.sha, root)
            changes = git.changed_files(parent, commit.sha, root)
            pairs = [(old, new) for old, new in changes if old and new]
            deleted = [old for old, new in changes if old and not new]
            removed: list[tuple[Finding, str, str]] = []
            kept: list[tuple[Finding, str]] = []
            renamed: dict[str, str] = {}
            gone: list[str] = []  # why findings of deleted files are not pinned
            if parent is not None and (pairs or deleted):
                with tempfile.TemporaryDirectory(prefix="hp-invariants-pin-") as tmp:
                    before_root, after_root = os.path.join(tmp, "before"), os.path.join(tmp, "after")
                    git.extract_tree(parent, root, before_root)
                    git.extract_tree(commit.sha, root, after_root)
                    # files the commit left alone whose findings it may still have removed: those that name
                    # a class of a changed file (a base, a protocol, the class of a child attribute)
                    pairs += [(rel, rel) for rel in _dependents(before_root, after_root, pairs)]
                    b_paths = {old: os.path.join(before_root, old) for old, _new in pairs}
                    a_paths = {new: os.path.join(after_root, new) for _old, new in pairs}
                    d_paths = {os.path.join(before_root, old): old for old in deleted}
                    b_list = sorted(set(b_paths.values()) | set(d_paths))
                    b_all = _by_path(check_tree(before_root, b_list) if b_list else [])
                    for path, old in sorted(d_paths.items()):
                        gone.extend(f"{f.rule_id} {f.symbol} in {f.obj or '<module>'}: the change deleted {old} "
                                    f"(nothing left to guard)" for f in b_all.get(path, []))
                    a_list = sorted(set(a_paths.values()))
                    a_all = _by_path(check_tree(after_root, a_list) if a_list else [])
                    for old, new in pairs:
                        b_path, a_path = b_paths[old], a_paths[new]
                        b_found, a_found = b_all.get(b_path, []), a_all.get(a_path, [])
                        if not b_found and not a_found:
                            continue
                        b_text = _read(b_path)
                        a_text = _read(a_path)
                        for finding in _removed(b_found, a_found):
                            removed.append((finding, b_text, a_text))
                            renamed[b_path] = new
                        kept.extend((f, a_text) for f in a_found)
            new_pins, reasons = pins.pins_for_repair(removed, commit.sha, commit.subject, commit.date,
                                                     lambda f: renamed.get(f.path, f.path), kept)
            reasons = list(dict.fromkeys(reasons + gone))  # one line per reason
            if not new_pins:
                status = 1
                why = "; ".join(reasons) if reasons else (
                    "it removed no finding (every finding of its parent's version of the files it changed is "
                    "still there after it)" if parent else "it is a root commit")
                print(f"hp-invariants: refusing to pin {commit.short} '{commit.subject}': {why}", file=sys.stderr)
                continue
            for pin in new_pins:
                print(f"pinned {pin.id} ({pin.symbol}, {pin.path}) from {commit.short} '{commit.subject}'")
            for reason in reasons:
                print(f"hp-invariants: {commit.short}: not pinned: {reason}", file=sys.stderr)
            recorded.extend(new_pins)
        if recorded:
            pins.dump(pins.merge(existing, recorded), pins_path)
            print(f"hp-invariants: {len(recorded)} pin(s) recorded in {pins_path}", file=sys.stderr)
        return status
    except _errors() as exc:
        raise HistoryError(str(exc)) from exc


def _dependents(before_root: str, after_root: str, pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Repo-relative ``.py`` files that a commit did not change (the same in ``before_root`` and
    ``after_root``, its extracted parent and itself) and that name, as a word, a class defined in one
    of the changed files ``pairs`` (old, new) before or after it: their findings may depend on the
    change (E9503 reads a class's bases, a protocol, the class of a child attribute)."""
    import ast
    import re

    from hp_invariants.history.pins import parse

    names: set[str] = set()
    for root, rels in ((before_root, [old for old, _ in pairs]), (after_root, [new for _, new in pairs])):
        for rel in rels:
            tree = parse(_read(os.path.join(root, rel)))
            if tree is not None:
                names.update(n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef))
    changed = {new for _, new in pairs} | {old for old, _ in pairs}
    found = []
    if not names:
        return found
    word = re.compile(r"\w+")
    for folder, dirs, files in os.walk(after_root):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            if not name.endswith((".py", ".pyi")):
                continue
            path = os.path.join(folder, name)
            rel = Path(os.path.relpath(path, after_root)).as_posix()
            if rel in changed or not os.path.exists(os.path.join(before_root, rel)):
                continue
            if names.intersection(word.findall(_read(path))):
                found.append(rel)
    return found


def _by_path(findings: Sequence[Finding]) -> dict[str, list[Finding]]:
    grouped: dict[str, list[Finding]] = {}
    for finding in findings:
        grouped.setdefault(finding.path, []).append(finding)
    return grouped


def _read(path: str) -> str:
    from hp_invariants.history.fingerprint import read_text_file

    return read_text_file(path) or ""


def cmd_unpin(args: argparse.Namespace, make_session: Any = None) -> int:
    """``hp-invariants unpin ID...``: remove pins by id, or every pin of a commit (7+ hex digits)."""
    from hp_invariants.history import pins

    _resolver, _config_, pins_path = _pin_context(args)
    try:
        current = pins.load(pins_path)
    except pins.PinError as exc:
        raise HistoryError(str(exc)) from exc
    remaining = list(current)
    for ident in args.ids:
        hit = [p for p in remaining if p.id == ident or (len(ident) >= 7 and p.commit.startswith(ident))]
        if not hit:
            known = ", ".join(p.id for p in current) or "none"
            raise HistoryError(f"no pin {ident!r} in {pins_path}; pins: {known}")
        for pin in hit:
            print(f"unpinned {pin.id} (from {pin.provenance()})")
        remaining = [p for p in remaining if p not in hit]
    try:
        pins.dump(remaining, pins_path)
    except pins.PinError as exc:
        raise HistoryError(str(exc)) from exc
    return 0


COMMANDS: dict[str, Callable[..., int]] = {
    "baseline": cmd_baseline, "pin": cmd_pin, "unpin": cmd_unpin,
}


def run_command(args: argparse.Namespace, make_session: Callable[[argparse.Namespace], tuple[Any, int]]) -> int:
    """Run a history subcommand (``make_session``: the CLI's ``(session, jobs)`` factory); a
    :class:`HistoryError` becomes a one-line message and exit 2."""
    try:
        return COMMANDS[args.command](args, make_session)
    except HistoryError as exc:
        print(f"hp-invariants: {exc}", file=sys.stderr)
        return 2


# ---------------------------------------------------------------------- fix
class SinceFilter:
    """Drops the findings of a file that were already there at the revision (picklable): ``old`` maps
    each file (real path) to the fingerprints of its findings matched to the revision's, by
    :func:`~hp_invariants.history.fingerprint.match` over the whole run."""

    def __init__(self, old: dict[str, Counter]):
        self.old = old

    def __call__(self, findings: list[Finding], ctx: Any) -> list[Finding]:
        from hp_invariants.history.fingerprint import fingerprint

        left = Counter(self.old.get(os.path.realpath(ctx.path), ()))
        kept = []
        for finding in findings:
            fp = fingerprint(finding, ctx.source.text)
            if left[fp] > 0:
                left[fp] -= 1
            else:
                kept.append(finding)
        return kept


@dataclass
class FixSession:
    """The history side of one ``fix`` run: pins to record at the end (``--pin``)."""

    args: argparse.Namespace
    config: Any
    before: dict[str, str | None] = field(default_factory=dict)

    def finish(self, results: Sequence[Any]) -> None:
        """After the fixes: record a pin for each repair written (``--pin``)."""
        if not getattr(self.args, "pin", False) or self.args.diff:
            return
        from hp_invariants.history import pins

        pins_path = _path(self.config, "pins", pins.DEFAULT_NAME, self.args.pins, for_write=True)
        removed, kept = [], []
        for res in results:
            outcome = getattr(res, "outcome", None)
            if outcome is None or not outcome.changed or not getattr(res, "written", False):
                continue
            before = self.before.get(res.path)
            if before is None:
                continue
            for finding in _removed(outcome.initial, outcome.remaining):
                removed.append((finding, before, outcome.text))
            kept.extend((finding, outcome.text) for finding in outcome.remaining)
        root = pins_path.parent
        today = datetime.date.today().isoformat()
        new_pins, reasons = pins.pins_for_repair(
            removed, "", "hp-invariants fix", today,
            lambda f: Path(os.path.relpath(os.path.realpath(f.path), root)).as_posix(), kept)
        for pin in new_pins:
            print(f"hp-invariants: pinned {pin.id} ({pin.symbol}, {pin.path})", file=sys.stderr)
        for reason in reasons:
            print(f"hp-invariants: not pinned: {reason}", file=sys.stderr)
        if new_pins:
            try:
                pins.dump(pins.merge(pins.load(pins_path), new_pins), pins_path)
            except pins.PinError as exc:
                raise HistoryError(str(exc)) from exc


def fix_session(args: argparse.Namespace, session: Any) -> FixSession:
    """Prepare a ``fix`` run over ``session``: restore-from-history for E9503, ``--since`` (only
    findings introduced since REV are fixed: the filter sits in the rules, so every fix round sees
    it), and the texts before fixing for ``--pin``."""
    from hp_invariants.history.fingerprint import read_text_file
    from hp_invariants.history.proxy import RuleProxy

    config = _config(session, args)
    _wrap_restore(args, session)
    if args.since:
        from hp_invariants.history import since
        from hp_invariants.history.fingerprint import annotate, match

        try:
            check_tree = _tree_checker(args, session.resolver)
            commit, old, places = since.rev_fingerprints(args.since, args.paths or ["."], check_tree)
            # which of today's findings were already there is decided over the whole run, as `check
            # --since` does: a fingerprint names no file, so a copy of old code into another file
            # matched the old finding again in each file and nothing was fixed
            _new, unchanged, _left = match(annotate(check_tree(".", args.paths or ["."]), read_text_file), old,
                                           places, since.place_of(_repo_root(config)))
        except _errors() as exc:
            raise HistoryError(str(exc)) from exc
        print(f"hp-invariants: --since {commit.short}: fixing only findings introduced since then", file=sys.stderr)
        old_by_file: dict[str, Counter] = {}
        for item in unchanged:
            old_by_file.setdefault(os.path.realpath(item.finding.path), Counter())[item.fingerprint] += 1
        since_filter = SinceFilter(old_by_file)
        map_rules(session, lambda r: RuleProxy(r, since_filter))
    fix = FixSession(args, config)
    if args.pin and not args.diff:
        files, _problems = session.discover(args.paths or ["."])
        fix.before = {path: read_text_file(path) for path in files}
    return fix


def explain(code: str) -> bool:
    """Print the documentation of a history message (E9590/W9591) if ``code`` names one."""
    from hp_invariants.history.messages import doc_for

    text = doc_for(code)
    if text is None:
        return False
    sys.stdout.write(text)
    return True
