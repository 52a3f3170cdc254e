"""The ``hp-invariants`` command line: ``check``, ``fix``, ``rules``, ``explain`` (and ``run``, the
runtime harness, dispatched to :mod:`hp_invariants.runtime.command`).

Exit codes (pylint/ruff convention): 0 clean, 1 findings (or, for ``fix``, findings left unfixed /
changes pending with ``--diff``), 2 usage, configuration or internal error, or a file that could
not be checked.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn, Sequence

from hp_invariants import __version__, engine, output
from hp_invariants.config import ConfigError, Overrides, Resolver, mib_to_bytes, validate_codes
from hp_invariants.history import cli as history_cli
from hp_invariants.model import FileProblem, Finding
from hp_invariants.registry import RULES, get_rule
from hp_invariants.runner import effective_jobs


def _codes(values: Sequence[str] | None) -> list[str]:
    return [c.strip() for value in values or () for c in value.split(",") if c.strip()]


def _non_negative_int(text: str) -> int:
    """argparse type for ``-j``: an integer >= 0 (0 means one worker per core); raises
    ``argparse.ArgumentTypeError`` (argparse's message names the option and the reason) otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (one per core) or a positive number, got {value}")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=None, help="files or folders (default: .)")
    parser.add_argument("--select", action="append", metavar="CODES",
                        help="only these rules: ids, id prefixes or symbols, comma-separated")
    parser.add_argument("--ignore", action="append", metavar="CODES", help="skip these rules")
    parser.add_argument("-j", "--jobs", type=_non_negative_int, default=1, metavar="N",
                        help="worker processes (0: one per core; default 1)")
    parser.add_argument("--config", metavar="PYPROJECT",
                        help="pyproject.toml to read [tool.hp-invariants] from, for every file "
                             "(default: each file's nearest pyproject.toml with that table)")
    parser.add_argument("--no-cache", action="store_true",
                        help="do not read or write the cache (class index and per-file results)")
    parser.add_argument("--force-exclude", action="store_true",
                        help="apply exclude patterns to paths named on the command line too (used by pre-commit)")
    parser.add_argument("--cache-dir", metavar="DIR", help="cache folder (default: see `hp-invariants cache dir`)")
    parser.add_argument("--timeout-per-file", type=_non_negative, metavar="SECONDS",
                        help="give up on a file after this much analysis (F0003); 0: no limit (default 10)")
    parser.add_argument("--max-file-size", type=_non_negative, metavar="MIB",
                        help="do not read files larger than this (F0004); 0: no limit (default 5)")


def _non_negative(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {value!r}")
    return number


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``hp-invariants`` command."""
    parser = argparse.ArgumentParser(
        prog="hp-invariants",
        description="Static invariant linter for PyTorch distributed-training code.",
    )
    parser.add_argument("--version", action="version", version=f"hp-invariants {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="report violations")
    _common(check)
    check.add_argument("--format", choices=output.FORMATS, default="text", help="output format")
    check.add_argument("--output-file", "-o", metavar="FILE", help="write the report here instead of stdout")
    check.add_argument("--report-unused-suppressions", action="store_true",
                       help="report '# pylint: disable'/'# noqa' comments for our rules that silence nothing")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")

    fix = sub.add_parser("fix", help="apply the fixes, until none applies")
    _common(fix)
    fix.add_argument("--diff", action="store_true",
                     help="print a unified diff, write nothing; exit 1 if there are changes or findings it cannot fix")
    fix.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")

    cache = sub.add_parser("cache", help="show or clear the cache folder (class index and per-file results)",
                           description="The cache folder: --cache-dir, else the 'cache-dir' key of the project's "
                           "[tool.hp-invariants], else $HP_INVARIANTS_CACHE_DIR, else $XDG_CACHE_HOME/hp-invariants "
                           "(~/.cache/hp-invariants). It holds one SQLite database of plain data (no pickles, nothing that runs); "
                           "clearing it only costs speed.")
    cache.add_argument("--cache-dir", metavar="DIR", help="the cache folder to show or clear")
    actions = cache.add_subparsers(dest="action", required=True, metavar="{dir,clear}")
    for name, text in (("dir", "print the cache folder"), ("clear", "delete the cache files in the cache folder")):
        action = actions.add_parser(name, help=text, description=text[0].upper() + text[1:] + " (see 'cache --help').")
        action.add_argument("path", nargs="?", default=".", help="a file or folder of the project (default: .)")
        # SUPPRESS: an option given before the action ('cache --cache-dir X clear') is not reset
        action.add_argument("--cache-dir", metavar="DIR", default=argparse.SUPPRESS,
                            help="the cache folder to show or clear")
    history_cli.add_arguments(sub, check, fix, _common)
    sub.add_parser("rules", help="list the rules")
    explain = sub.add_parser("explain", help="print a rule's documentation")
    explain.add_argument("rule", help="rule id or symbol, e.g. E9501 or local-tensor-view-not-detached")
    # parsed by hp_invariants.runtime.command (main() hands it every argument after `run`)
    sub.add_parser("run", add_help=False, help="run a training script on N local ranks and check the invariants "
                   "at run time (hp-invariants run --help)")
    return parser


def _resolver(args: argparse.Namespace) -> Resolver:
    """The per-file configuration of this run: each file's nearest ``[tool.hp-invariants]`` table (or
    ``--config`` for all), with the command-line flags on top. Raises :class:`ConfigError`."""
    select, ignore = _codes(args.select), _codes(args.ignore)
    if args.select is not None and not select:  # `--select ''` (an empty variable): not "every rule"
        raise ConfigError("--select: no rule codes given (omit --select to run every rule)")
    overrides = Overrides(
        select=tuple(validate_codes(select, RULES, "--select")) if select else None,
        ignore=tuple(validate_codes(ignore, RULES, "--ignore")),
        force_exclude=True if args.force_exclude else None,
        report_unused_suppressions=True if getattr(args, "report_unused_suppressions", False) else None,
        cache_dir=args.cache_dir,
        timeout_per_file=args.timeout_per_file,
        max_file_size=mib_to_bytes(args.max_file_size) if args.max_file_size is not None else None,
    )
    resolver = Resolver(RULES, overrides, Path(args.config) if args.config else None)
    for path in args.paths or ["."]:  # configuration errors are reported before any work starts
        config = resolver.config_for(path)
    if args.config and not config.source:  # a file named for its table that has none: likely the wrong file
        print(f"hp-invariants: note: {args.config} holds no [tool.hp-invariants] table: every file is checked "
              "with the defaults", file=sys.stderr)
    return resolver


def _session(args: argparse.Namespace) -> tuple[engine.Session, int]:
    """The session of a ``check``/``fix`` run and its worker count (capped at the usable cores, with a
    note on stderr when lowered)."""
    jobs, note = effective_jobs(args.jobs)
    if note:
        print(f"hp-invariants: {note}", file=sys.stderr)
    resolver = _resolver(args)
    # a short-lived process: the project facts, once built, are frozen out of the collector's passes
    return engine.default_session(resolver, cache_dir=args.cache_dir, use_cache=not args.no_cache,
                                  freeze_after_build=True), jobs


def _fewer_gc_passes() -> None:
    """Run the cyclic garbage collector less often (gen0 threshold 100 000 instead of 700).

    Each ``ast.parse`` allocates hundreds of thousands of nodes that stay alive until the file is
    done, and the default thresholds make the collector re-scan them many times over: about 15% of
    the parse time, for nothing (trees hold no reference cycles; they are freed by reference
    counting). The checks create no cycles either (a ``check`` of torch/distributed leaves about 100
    cyclic objects, argparse's), so each pass is pure cost: at 20 000, nine passes took 27 ms of a
    1.3 s check whose facts come from the cache; at 100 000, two passes, 0.2 ms. Cycles are still
    collected, just in larger batches. Process-wide, so only the CLI does it (``-j`` workers inherit
    it), never the library or the pylint plugin.
    """
    import gc  # noqa: PLC0415

    gc.set_threshold(100_000, 10, 10)


def cmd_check(args: argparse.Namespace) -> int:
    """Run ``check``; return the exit code."""
    _fewer_gc_passes()
    session, jobs = _session(args)
    rules = list(RULES)
    restore = history_cli.prepare_check(args, session)  # restore-from-history for E9503 findings
    result = engine.run_check(session, args.paths or ["."], jobs=jobs)
    if restore is not None:
        restore(result)
    findings, problems = result.findings, result.all_problems
    history = history_cli.after_check(args, session, result)  # None unless a history feature is on
    annotations = None
    if history:  # the findings left to report, with their fingerprints beside them
        findings, annotations = history.findings, history.annotations
    text = output.render(args.format, findings, problems, rules, annotations)
    if args.output_file:
        try:
            Path(args.output_file).write_text(text, encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            print(f"hp-invariants: cannot write the report to {args.output_file}: {exc.strerror or exc}",
                  file=sys.stderr)
            return 2
    else:
        _write(sys.stdout, text)
    for note in result.notes:
        print(f"hp-invariants: note: {note}", file=sys.stderr)
    if args.format == "text":
        fixable = sum(1 for f in findings if f.fix and f.fix.applicability.value == "safe")
        files = len({f.path for f in findings})
        checked = sum(1 for r in result.files if not r.problems)  # one that could not be is counted below
        summary = f"Found {len(findings)} finding(s) in {files} file(s), {checked} checked"
        unsafe = sum(1 for f in findings if f.fix and f.fix.applicability.value == "unsafe")
        if fixable:
            summary += f"; {fixable} fixable with `hp-invariants fix`"
        if unsafe:
            summary += f"; {unsafe} {'more ' if fixable else ''}fixable only with `hp-invariants fix --unsafe-fixes`" \
                       " (review them)"
        if problems:
            summary += f"; {len({p.path for p in problems})} could not be checked"  # files, not problems
        print(summary + ".", file=sys.stderr)
        if not result.files and not problems:
            print("hp-invariants: warning: no Python files to check under the given paths "
                  "(all excluded, or none there)", file=sys.stderr)
    history_cli.print_notes(history)
    exit_code = history.exit_code(problems) if history else result.exit_code
    if args.exit_zero and exit_code == 1:
        return 0
    return exit_code


def _write(stream, text: str) -> None:
    """Write ``text`` even if it holds characters the stream cannot encode (a file name with
    undecodable bytes arrives as surrogates): those are written backslash-escaped."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))


def cmd_fix(args: argparse.Namespace) -> int:
    """Run ``fix``; return the exit code.

    The summary counts findings, not edits: fixed, and left by reason (needs ``--unsafe-fixes``,
    report-only, or in a file that was not written: read-only or changed on disk)."""
    from hp_invariants import fixer

    session, jobs = _session(args)
    if not args.diff:  # temp files of a run killed mid-write (see fixer.write_atomically)
        files, _ = session.discover(args.paths or ["."])
        for folder in sorted({os.path.dirname(os.path.realpath(p)) for p in files}):
            for stale in fixer.remove_stale_temp_files(folder):
                print(f"hp-invariants: removed {stale}, left by an interrupted run", file=sys.stderr)
    history = history_cli.fix_session(args, session)  # --since, --pin, restore-from-history for E9503
    results, problems = fixer.run_fix(session, args.paths or ["."], jobs=jobs, unsafe=args.unsafe_fixes,
                                      write=not args.diff)
    history.finish(results)
    remaining = []
    fixed = changed_files = not_written = 0
    for res in results:
        if res.problem is not None:
            problems.append(res.problem)
            continue
        outcome = res.outcome
        left = outcome.remaining
        if outcome.changed:
            if args.diff:
                _write(sys.stdout, res.diff)
            if res.skipped:  # not written: everything it found is still there
                problems.append(FileProblem("F0001", "fatal", res.path, 1, 0, res.skipped,
                                            "re-run after the file is writable and unchanged"))
                left = outcome.initial
                not_written += len(left)
            else:
                changed_files += 1
                fixed += outcome.fixed_count
        if outcome.rejected:
            print(f"{res.path}: {outcome.rejected}", file=sys.stderr)
        remaining.extend(left)
    _write(sys.stdout, output.format_text(remaining, problems) if not args.diff else
           output.format_text([], problems))
    print(fix_summary(fixed, changed_files, remaining, not_written, args.unsafe_fixes, args.diff), file=sys.stderr)
    if "hp_invariants.store" in sys.modules:
        for note in sys.modules["hp_invariants.store"].unusable_notes():
            print(f"hp-invariants: note: {note}", file=sys.stderr)
    if problems:
        return 2
    if remaining or (args.diff and changed_files):
        return 1
    return 0


def fix_summary(fixed: int, files: int, remaining: Sequence[Finding], not_written: int, unsafe: bool,
                preview: bool) -> str:
    """The last line of ``fix``: one count of findings fixed, one of findings left, by reason.

    ``remaining``: the findings left (those of files not written included, ``not_written`` of them);
    ``unsafe``: ``--unsafe-fixes`` was given; ``preview``: ``--diff`` (nothing written: "would fix")."""
    verb = "would fix" if preview else "fixed"
    line = f"{verb} {fixed} finding(s) in {files} file(s)"
    if not remaining:
        return line + "; none left."
    needs_unsafe = sum(1 for f in remaining if not unsafe and f.fix is not None
                       and f.fix.applicability.value == "unsafe")
    reasons = []
    if needs_unsafe:
        reasons.append(f"{needs_unsafe} fixable with --unsafe-fixes")
    if not_written:
        reasons.append(f"{not_written} in file(s) not written (read-only or changed on disk)")
    manual = len(remaining) - needs_unsafe - not_written
    if manual:
        reasons.append(f"{manual} to fix by hand (no automatic fix)")
    return line + f"; {len(remaining)} left: " + ", ".join(reasons) + "."


def cmd_cache(args: argparse.Namespace) -> int:
    """Run ``cache dir`` (print the cache folder of the project holding ``path``) or ``cache clear``
    (delete the cache files there); return 0."""
    from hp_invariants.config import find_project_root  # noqa: PLC0415
    from hp_invariants.store import clear_cache_dir, default_cache_dir  # noqa: PLC0415

    resolver = Resolver(RULES, Overrides(cache_dir=os.path.abspath(args.cache_dir) if args.cache_dir else None))
    folder = resolver.config_for(find_project_root(args.path)).cache_dir or default_cache_dir()
    if args.action == "dir":
        print(folder)
        if os.path.exists(folder) and not os.path.isdir(folder):
            print(f"hp-invariants: warning: {folder} is a file: no cache can be kept there", file=sys.stderr)
    else:
        removed = clear_cache_dir(folder)
        print(f"hp-invariants: removed {len(removed)} cache file(s) from {folder}", file=sys.stderr)
    return 0


def cmd_rules() -> int:
    """Print the rule table; return 0."""
    width = max(len(r.symbol) for r in RULES)
    for rule in RULES:
        print(f"{rule.rule_id}  {rule.symbol:<{width}}  {rule.summary}  [codemod: {rule.command_name}]")
    return 0


def _report_codes() -> list[tuple[str, str, str]]:
    """``(code, symbol, explanation)`` of each code a report prints that is not a rule: the problems of
    files not checked (:data:`hp_invariants.limits.PROBLEM_CODES`), ``I9500``
    (:mod:`hp_invariants.suppressions`), then the pylint plugin's own messages, with their pylint
    descriptions (:attr:`hp_invariants.checkers.HpInvariantsChecker.msgs`; its ``I9500`` under the
    plugin's symbol)."""
    from hp_invariants import suppressions  # noqa: PLC0415
    from hp_invariants.checkers import HpInvariantsChecker  # noqa: PLC0415 - imports pylint: not on the check path
    from hp_invariants.limits import PROBLEM_CODES  # noqa: PLC0415

    rule_ids = {rule.rule_id for rule in RULES}
    return [*((code, symbol, text) for code, (symbol, text) in PROBLEM_CODES.items()),
            (suppressions.USELESS_ID, suppressions.USELESS_SYMBOL, suppressions.USELESS_EXPLAINED),
            *((code, symbol, text) for code, (_msg, symbol, text, _options) in HpInvariantsChecker.msgs.items()
              if code not in rule_ids)]


def cmd_explain(args: argparse.Namespace) -> int:
    """Print the documentation of the rule ``args.rule`` (id or symbol), or the explanation of another
    code a report prints (a history message, a problem, ``I9500``, the pylint plugin's ``F95xx``);
    return 0, or 2 (with a message listing the known codes on stderr) for an unknown one."""
    try:
        rule = get_rule(args.rule)
    except KeyError:
        if history_cli.explain(args.rule):
            return 0
        wanted = args.rule.strip()
        codes = _report_codes()  # the codes a report prints besides the rules' (the first of a code wins)
        for code, symbol, text in codes:
            if wanted.upper() == code or wanted.lower() == symbol:
                print(f"{code} {symbol}: {text}")
                return 0
        from hp_invariants.history.messages import CODES as HISTORY_CODES  # noqa: PLC0415

        known = ", ".join(f"{r.rule_id} ({r.symbol})" for r in RULES)
        others = dict.fromkeys([*(code for code, _symbol, _text in codes), *HISTORY_CODES[::2]])
        print(f"hp-invariants: unknown rule {args.rule!r}; known rules: {known}; other codes it prints: "
              f"{', '.join(others)}", file=sys.stderr)
        return 2
    from hp_invariants.docs import rule_doc  # noqa: PLC0415 - not on the check path (imports inspect)

    sys.stdout.write(rule_doc(rule))
    return 0


def run() -> NoReturn:
    """The ``hp-invariants`` console script (and ``python -m hp_invariants``): :func:`main`, then
    the standard streams flushed and the process ended at once with its exit code, skipping the
    interpreter's teardown, as mypy does: freeing every object of a run (the project facts, the
    modules) and the collections at exit cost 72 M instructions, 0.8% of a ``check`` of
    torch/distributed whose facts come from the cache, for nothing a user sees. Everything the
    commands write (reports, fixed files, cache files) is written and closed before :func:`main`
    returns; the ``-j`` workers are gone by then. Callers in the same process use :func:`main`.
    An exception escaping :func:`main` or a failed final write of the report is exit 2 with a
    message, never 0 or 1; a closed pipe (``| head``) stays quiet."""
    try:
        code = main()
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:  # noqa: BLE001 - main's own handler failed (no descriptor left to import traceback)
        code = 2  # exit 1 would read as "findings"
        try:
            sys.stderr.write(f"hp-invariants: internal error: {type(exc).__name__}: {exc}. Exit 2.\n")
        except (OSError, ValueError):
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            pass
        except (OSError, ValueError) as exc:  # a full disk: the report is lost, which must not read as success
            code = 2
            if stream is sys.stdout:
                try:
                    sys.stderr.write(f"hp-invariants: cannot write the report: {exc}\n")
                    sys.stderr.flush()
                except (OSError, ValueError):
                    pass
    os._exit(code)


_NOT_EMPTY = ("--since", "--baseline", "--pins", "--output-file", "--cache-dir", "--config")
"""Options whose empty value is a usage error (an unset shell variable), not "the default"."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the CLI (:func:`run` for the console script); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:  # the runtime harness parses its own arguments (the script's come after)
        from hp_invariants.runtime.command import main as run_main  # noqa: PLC0415 - off the check path

        return run_main(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        empty = [name for name in _NOT_EMPTY
                 if isinstance(value := getattr(args, name.lstrip("-").replace("-", "_"), None), str) and not value.strip()]
        if empty:  # `--since "$BASE"` with BASE unset must not mean "every finding" (nor a default file)
            parser.error(f"argument {empty[0]}: expected a value, got an empty or blank string")
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        if args.command == "check":
            return cmd_check(args)
        if args.command == "fix":
            return cmd_fix(args)
        if args.command == "cache":
            return cmd_cache(args)
        if args.command == "rules":
            return cmd_rules()
        if args.command in history_cli.COMMANDS:
            return history_cli.run_command(args, _session)
        return cmd_explain(args)
    except ConfigError as exc:
        print(f"hp-invariants: configuration error: {exc}", file=sys.stderr)
        return 2
    except history_cli.HistoryError as exc:
        print(f"hp-invariants: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `hp-invariants check | head`: stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except Exception:  # noqa: BLE001 - an uncaught exception would exit 1, which means "findings"
        import traceback

        traceback.print_exc()
        print("hp-invariants: internal error (the traceback above); please report it. Exit 2.", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
