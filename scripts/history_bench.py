"""Recall from history: run the rules on the parent and the fix of real historical fix commits.

Usage::

    python scripts/history_bench.py [--cases FILE] [--mirror DIR] [--only ID[,ID...]] [-j N]
                                    [--window N] [--json FILE] [--workdir DIR] [--keep]

Each case of ``benchmarks/history/cases.toml`` (``--cases``) names a repository (``owner/name``), a
fix commit and its parent, the path and line of the buggy site in the parent (the call, store or
``raise`` that fails at run time), the rule of its run-time class, and whether the rule's page
(``docs/rules/*.md``) claims that shape (``in_scope``). For every case the script

1. materializes the parent tree and the fix tree from the mirror (``<mirror>/<owner>+<name>/repo``,
   a bare git directory as the ``fetch`` tool leaves it; ``--mirror``, default ``/work/.mirror``):
   every ``.py`` file and every ``pyproject.toml``/``setup.py``/``setup.cfg`` of the commit, the whole
   repository, so the project index sees every base class (blobs the snapshot lacks, files of 4 MiB
   and more, are skipped and counted); when the root holds no project marker an empty ``setup.cfg``
   is written there, as a checkout's ``.git`` would mark it;
2. runs ``python -m hp_invariants check --format json --no-cache --select <rule> -j N .`` in each tree
   with the checkout this script lives in first on ``PYTHONPATH``;
3. scores the parent: *caught* when a finding of the rule sits in the case's file within ``--window``
   lines (default 3) of the recorded line or in the same innermost function (``def``) as that line,
   and, when the case records a ``symbol`` (the missing method's name), its message names it;
4. scores the fix: *flagged at fix* when the same site is still reported: a finding of the rule in the
   fix's version of the file (``fix_path`` if the case records one, else ``path``) inside the function
   of the same qualified name (``Class.method``), or within the window of ``fix_line`` when recorded,
   again naming ``symbol`` when recorded.

Trees are cached per commit for the run in a temporary folder (``--workdir``, default a fresh folder
under the system temporary directory; removed at the end unless ``--keep``), never in ``$HOME``.

Output: a Markdown table on stdout (case, repository, rule, in scope, caught in parent, flagged at fix)
and the totals: in-scope recall (caught / in-scope cases), out-of-scope cases caught, fixed versions
flagged. ``--json FILE`` writes ``{"cases": [...], "totals": {...}}`` with each case's findings.

Exit status: 0 when every case was scored, 2 when a case could not be (missing mirror or commit, a
``check`` that exited above 1, a bad cases file).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CASES = REPO / "benchmarks" / "history" / "cases.toml"
DEFAULT_MIRROR = Path("/work/.mirror")
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg")
REQUIRED = ("id", "repo", "fix", "parent", "path", "line", "rule", "in_scope", "reason", "shape", "pin_candidate")


class BenchError(Exception):
    """A case that cannot be scored: its mirror, commit or file is missing, or ``check`` failed."""


@dataclass
class Case:
    """One historical fix: the buggy site in ``parent`` and the commit ``fix`` that repaired it."""

    id: str
    repo: str
    fix: str
    parent: str
    path: str
    line: int
    rule: str
    in_scope: bool
    reason: str
    shape: str
    pin_candidate: bool
    symbol: str | None = None
    fix_path: str | None = None
    fix_line: int | None = None
    extra: dict = field(default_factory=dict)


def load_cases(path: Path) -> list[Case]:
    """Read the ``[[case]]`` tables of the TOML file ``path``.

    Raises :class:`BenchError` when a case lacks a required key or an id repeats."""
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    cases, seen = [], set()
    for raw in data.get("case", []):
        missing = [key for key in REQUIRED if key not in raw]
        if missing:
            raise BenchError(f"{path}: case {raw.get('id', '?')!r} lacks {', '.join(missing)}")
        if raw["id"] in seen:
            raise BenchError(f"{path}: case id {raw['id']!r} repeats")
        seen.add(raw["id"])
        known = {k: raw[k] for k in (*REQUIRED, "symbol", "fix_path", "fix_line") if k in raw}
        extra = {k: v for k, v in raw.items() if k not in known}
        cases.append(Case(**known, extra=extra))
    return cases


def git_dir(mirror: Path, repo: str) -> Path:
    """The bare git directory of ``owner/name`` under the mirror folder (``<owner>+<name>/repo``)."""
    owner, name = repo.split("/", 1)
    return mirror / f"{owner}+{name}" / "repo"


def materialize(gitdir: Path, sha: str, dest: Path) -> dict:
    """Write the ``.py`` files and project markers of commit ``sha`` of ``gitdir`` under ``dest``.

    Returns ``{"files": n, "missing": m}`` (``m``: blobs the snapshot lacks). Raises
    :class:`BenchError` when git does not know the commit."""
    listing = subprocess.run(["git", "--git-dir", str(gitdir), "ls-tree", "-r", "-z", sha],
                             capture_output=True)
    if listing.returncode != 0:
        raise BenchError(f"{gitdir}: cannot list {sha}: {listing.stderr.decode(errors='replace').strip()}")
    wanted = []
    for entry in listing.stdout.split(b"\0"):
        if not entry:
            continue
        meta, raw_path = entry.split(b"\t", 1)
        mode, kind, obj = meta.split()
        rel = os.fsdecode(raw_path)
        if kind != b"blob" or mode == b"120000":
            continue
        if rel.endswith(".py") or os.path.basename(rel) in PROJECT_MARKERS:
            wanted.append((obj.decode(), rel))
    proc = subprocess.Popen(["git", "--git-dir", str(gitdir), "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def feed() -> None:
        proc.stdin.write("".join(f"{obj}\n" for obj, _ in wanted).encode())
        proc.stdin.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    missing = 0
    for _obj, rel in wanted:
        header = proc.stdout.readline().split()
        if not header or header[-1] == b"missing":
            missing += 1
            continue
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    feeder.join()
    proc.wait()
    dest.mkdir(parents=True, exist_ok=True)
    if not any((dest / marker).exists() for marker in PROJECT_MARKERS):
        (dest / "setup.cfg").write_text("")  # a checkout's .git marks the root; keep git itself out
    return {"files": len(wanted) - missing, "missing": missing}


def run_check(tree: Path, rule: str, jobs: int) -> list[dict]:
    """Findings of ``hp-invariants check --select rule`` over the whole ``tree`` (paths relative to it).

    Raises :class:`BenchError` when the check exits above 1 with no report."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    out = tree.parent / f"{tree.name}.{rule}.json"
    proc = subprocess.run([sys.executable, "-m", "hp_invariants", "check", "--format", "json", "--no-cache",
                           "--select", rule, "-j", str(jobs), "--output-file", str(out), "."],
                          cwd=tree, env=env, capture_output=True, text=True)
    if not out.exists():
        raise BenchError(f"check failed in {tree} (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    report = json.loads(out.read_text(encoding="utf-8"))
    findings = []
    for finding in report.get("findings", []):
        finding = dict(finding)
        finding["path"] = os.path.normpath(finding["path"])
        findings.append(finding)
    return findings


def _functions(source: str) -> list[tuple[str, int, int]]:
    """``(qualified name, first line, last line)`` of every ``def`` of ``source`` (decorators included)."""
    found: list[tuple[str, int, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                found.append((name, start, child.end_lineno or child.lineno))
                walk(child, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    try:
        walk(ast.parse(source), "")
    except (SyntaxError, ValueError):
        pass
    return found


def enclosing_function(source: str, line: int) -> tuple[str, int, int] | None:
    """The innermost ``def`` of ``source`` whose span holds ``line``, or ``None`` (module level)."""
    spans = [f for f in _functions(source) if f[1] <= line <= f[2]]
    return min(spans, key=lambda f: f[2] - f[1]) if spans else None


def function_named(source: str, qualname: str) -> tuple[str, int, int] | None:
    """The ``def`` of ``source`` with the qualified name ``qualname`` (the first one), or ``None``."""
    return next((f for f in _functions(source) if f[0] == qualname), None)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _names_symbol(finding: dict, symbol: str | None) -> bool:
    """Whether the finding is about ``symbol``: E9503 says "has no attribute 'm'" (a name quoted
    elsewhere in the message, a "did you mean" suggestion, does not count); other messages quote it."""
    if symbol is None:
        return True
    message = finding.get("message", "")
    if "has no attribute '" in message:
        return f"has no attribute '{symbol}'" in message
    return f"'{symbol}'" in message


def site_findings(findings: list[dict], rule: str, path: str, line: int | None,
                  span: tuple[str, int, int] | None, window: int, symbol: str | None) -> list[dict]:
    """The findings of ``rule`` at ``path`` within ``window`` lines of ``line`` or inside ``span``
    (a function's first and last line), naming ``symbol`` when given."""
    hits = []
    for finding in findings:
        if finding.get("id") != rule or finding["path"] != os.path.normpath(path):
            continue
        near = line is not None and abs(finding["line"] - line) <= window
        inside = span is not None and span[1] <= finding["line"] <= span[2]
        if (near or inside) and _names_symbol(finding, symbol):
            hits.append(finding)
    return hits


@dataclass
class Score:
    """The outcome of one case."""

    case: Case
    caught: bool = False
    flagged_at_fix: bool = False
    parent_hits: list = field(default_factory=list)
    fix_hits: list = field(default_factory=list)
    function: str | None = None
    error: str | None = None
    seconds: float = 0.0


class Bench:
    """Materialized trees and check results, cached per ``(repository, commit, rule)`` for one run."""

    def __init__(self, mirror: Path, workdir: Path, jobs: int = 1, window: int = 3) -> None:
        self.mirror, self.workdir, self.jobs, self.window = mirror, workdir, jobs, window
        self._trees: dict[tuple[str, str], Path] = {}
        self._findings: dict[tuple[str, str, str], list[dict]] = {}

    def tree(self, repo: str, sha: str) -> Path:
        """The materialized tree of ``sha`` (written on first use)."""
        key = (repo, sha)
        if key not in self._trees:
            gitdir = git_dir(self.mirror, repo)
            if not gitdir.is_dir():
                raise BenchError(f"no mirror of {repo} at {gitdir}")
            dest = self.workdir / repo.replace("/", "+") / sha
            if dest.exists():
                shutil.rmtree(dest)
            materialize(gitdir, sha, dest)
            self._trees[key] = dest
        return self._trees[key]

    def findings(self, repo: str, sha: str, rule: str) -> list[dict]:
        """The findings of ``rule`` in the tree of ``sha`` (checked on first use)."""
        key = (repo, sha, rule)
        if key not in self._findings:
            self._findings[key] = run_check(self.tree(repo, sha), rule, self.jobs)
        return self._findings[key]

    def score(self, case: Case) -> Score:
        """Score ``case``: caught in the parent, flagged at the fix (see the module docstring)."""
        score = Score(case)
        began = time.monotonic()
        try:
            parent = self.tree(case.repo, case.parent)
            source = _read(parent / case.path)
            if not source:
                raise BenchError(f"{case.id}: {case.path} is not in {case.parent[:10]}")
            span = enclosing_function(source, case.line)
            score.function = span[0] if span else None
            score.parent_hits = site_findings(self.findings(case.repo, case.parent, case.rule), case.rule,
                                              case.path, case.line, span, self.window, case.symbol)
            score.caught = bool(score.parent_hits)
            fixed = self.tree(case.repo, case.fix)
            fix_path = case.fix_path or case.path
            fix_span = function_named(_read(fixed / fix_path), span[0]) if span else None
            if fix_span is not None or case.fix_line is not None:
                score.fix_hits = site_findings(self.findings(case.repo, case.fix, case.rule), case.rule, fix_path,
                                               case.fix_line, fix_span, self.window, case.symbol)
            score.flagged_at_fix = bool(score.fix_hits)
        except BenchError as err:
            score.error = str(err)
        score.seconds = time.monotonic() - began
        return score


def totals(scores: list[Score]) -> dict:
    """In-scope recall, out-of-scope catches and fixed versions flagged over ``scores``."""
    scored = [s for s in scores if s.error is None]
    in_scope = [s for s in scored if s.case.in_scope]
    out_scope = [s for s in scored if not s.case.in_scope]
    caught = sum(s.caught for s in in_scope)
    return {
        "cases": len(scores),
        "errors": len(scores) - len(scored),
        "in_scope": len(in_scope),
        "in_scope_caught": caught,
        "in_scope_recall": round(caught / len(in_scope), 4) if in_scope else None,
        "out_of_scope": len(out_scope),
        "out_of_scope_caught": sum(s.caught for s in out_scope),
        "fixed_flagged": sum(s.flagged_at_fix for s in scored),
        "per_rule": {rule: {"cases": sum(s.case.rule == rule for s in scored),
                            "in_scope": sum(s.case.rule == rule for s in in_scope),
                            "in_scope_caught": sum(s.case.rule == rule and s.caught for s in in_scope)}
                     for rule in sorted({s.case.rule for s in scores})},
    }


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def table(scores: list[Score]) -> str:
    """The Markdown table of ``scores`` and a totals paragraph."""
    lines = ["| case | repository | rule | in scope | caught in parent | flagged at fix |",
             "|---|---|---|---|---|---|"]
    for s in scores:
        if s.error:
            lines.append(f"| {s.case.id} | {s.case.repo} | {s.case.rule} | {_yes(s.case.in_scope)} | error | error |")
        else:
            lines.append(f"| {s.case.id} | {s.case.repo} | {s.case.rule} | {_yes(s.case.in_scope)} | "
                         f"{_yes(s.caught)} | {_yes(s.flagged_at_fix)} |")
    t = totals(scores)
    recall = "n/a" if t["in_scope_recall"] is None else f"{100 * t['in_scope_recall']:.0f}%"
    lines += ["", f"In-scope recall: {t['in_scope_caught']}/{t['in_scope']} ({recall}); out-of-scope cases caught: "
                  f"{t['out_of_scope_caught']}/{t['out_of_scope']}; fixed versions flagged: {t['fixed_flagged']}/"
                  f"{t['cases'] - t['errors']}; cases not scored: {t['errors']}."]
    for s in scores:
        if s.error:
            lines.append(f"- {s.case.id}: {s.error}")
    return "\n".join(lines) + "\n"


def as_json(scores: list[Score]) -> dict:
    """The JSON document written by ``--json``."""
    cases = []
    for s in scores:
        cases.append({"id": s.case.id, "repo": s.case.repo, "rule": s.case.rule, "in_scope": s.case.in_scope,
                      "pin_candidate": s.case.pin_candidate, "path": s.case.path, "line": s.case.line,
                      "function": s.function, "caught": s.caught, "flagged_at_fix": s.flagged_at_fix,
                      "parent_findings": s.parent_hits, "fix_findings": s.fix_hits, "error": s.error,
                      "seconds": round(s.seconds, 1)})
    return {"cases": cases, "totals": totals(scores)}


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; see the module docstring. Returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR)
    parser.add_argument("--only", action="append", default=[], help="case ids (comma-separated, repeatable)")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    parser.add_argument("--window", type=int, default=3)
    parser.add_argument("--json", type=Path, dest="json_out")
    parser.add_argument("--workdir", type=Path, help="where trees are materialized (default: a fresh temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the materialized trees")
    args = parser.parse_args(argv)
    try:
        cases = load_cases(args.cases)
    except (BenchError, OSError, tomllib.TOMLDecodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    only = {name for chunk in args.only for name in chunk.split(",") if name}
    if only:
        unknown = only - {c.id for c in cases}
        if unknown:
            print(f"error: unknown case id(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c.id in only]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="history-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    bench = Bench(args.mirror, workdir, args.jobs, args.window)
    scores = []
    try:
        for case in cases:
            score = bench.score(case)
            state = "error" if score.error else f"caught={_yes(score.caught)} flagged_at_fix={_yes(score.flagged_at_fix)}"
            print(f"{case.id}: {state} ({score.seconds:.0f}s)", file=sys.stderr)
            scores.append(score)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    sys.stdout.write(table(scores))
    if args.json_out:
        args.json_out.write_text(json.dumps(as_json(scores), indent=1) + "\n", encoding="utf-8")
    return 2 if any(s.error for s in scores) else 0


if __name__ == "__main__":
    sys.exit(main())
