"""Run ``hp-invariants check --format json`` on every code base of a validation panel and tabulate.

Usage::

    python scripts/panel.py [PANEL] [--only NAME,...] [--extra PATH ...] [-j N]
                            [--verdicts FILE] [-o FINDINGS.json]

``PANEL`` (default ``/work/panel``) holds one folder per code base (a git snapshot or an unpacked
PyPI sdist); every sub-folder that contains Python files is one project. Sub-folders named with
``--baseline`` (default ``hyper-parallel``) and folders given with ``--extra`` (e.g. the installed
``torch`` package, named after their last path component) are *keep-clean baselines*: reported
in rows of their own below the panel total, and not counted in it.

Each project is checked from its own folder (so its ``pyproject.toml`` decides the project root, as
for a user) with the checkout this script lives in first on ``PYTHONPATH``, ``--no-cache`` and
``-j N``. Output: a table on stderr (project, version, files, seconds, findings per rule, problems
and, with ``--verdicts``, true/false/unjudged) and a JSON document on stdout (or ``-o FILE``):
``{"projects": [{"name", "version", "files", "seconds", "counts", "problems", "findings": [...]}]}``
where each finding is the CLI's JSON finding with its path made relative to the project folder.

Rule columns come from :data:`hp_invariants.registry.RULES`, so a new rule appears without editing
this script. The version is the short commit of the project's mirror (``<mirror>/<owner>+<name>/repo``,
``--mirror``, default ``/work/.mirror``) or the ``Version:`` of an sdist's ``PKG-INFO``.

``--verdicts FILE`` reads judged findings, one per line, tab-separated:
``project  path:line  rule-id  T|F  reason`` (``#`` starts a comment); findings absent from the file
are counted as unjudged, so a re-run after a rule change shows at once what is new.

Exit status: 0 when every project was checked, 2 when ``check`` failed (exit status above 1) on one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hp_invariants.registry import RULES  # noqa: E402


def project_folders(panel: Path, only: set[str] | None, extra: list[str],
                    baseline: set[str]) -> list[tuple[Path, bool]]:
    """Return ``(folder, is_baseline)``: panel sub-folders holding ``.py`` files (case-insensitive
    name order), then the baseline sub-folders, then ``extra`` (baselines too)."""
    subs = sorted(panel.iterdir(), key=lambda p: p.name.lower()) if panel.is_dir() else []
    subs = [s for s in subs if s.is_dir() and not s.name.startswith(".") and any(s.rglob("*.py"))]
    found = [(s, False) for s in subs if s.name not in baseline]
    found += [(s, True) for s in subs if s.name in baseline]
    found += [(Path(p), True) for p in extra]
    return [(p, b) for p, b in found if only is None or p.name in only]


def version_of(folder: Path, mirror: Path) -> str:
    """Return the short commit of ``folder``'s mirror, an sdist's ``Version:``, or ``"?"``."""
    if mirror.is_dir():
        for entry in sorted(mirror.iterdir()):
            if entry.name.split("+", 1)[-1] == folder.name and (entry / "repo").exists():
                done = subprocess.run(["git", f"--git-dir={entry / 'repo'}", "rev-parse", "--short", "HEAD"],
                                      capture_output=True, text=True, check=False)
                if done.returncode == 0:
                    return done.stdout.strip()
    for meta in (folder / "PKG-INFO", folder / "METADATA"):
        if meta.is_file():
            for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    version = folder / "version.py"
    if folder.name == "torch" and version.is_file():
        for line in version.read_text(encoding="utf-8").splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("'\"")
    return "?"


def count_files(folder: Path) -> int:
    """Return how many files ``check`` walks in ``folder`` (its own discovery, each folder under its
    own configuration)."""
    from hp_invariants.config import ConfigError, Resolver
    from hp_invariants.discovery import iter_python_files

    try:
        files, _ = iter_python_files([str(folder)], Resolver(RULES))
    except ConfigError:  # a broken pyproject.toml (check reported it): count with the default excludes
        from hp_invariants.project import iter_project_files

        files = list(iter_project_files(folder))
    return len(files)


def run_check(folder: Path, jobs: int) -> tuple[dict, float, int, str]:
    """Run ``check --format json`` in ``folder``; return ``(report, seconds, exit status, stderr)``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        env["HP_INVARIANTS_CACHE_DIR"] = tmp
        start = time.perf_counter()
        # -P: the project folder is the working directory, and a module of it must not shadow the standard
        # library (torch/random.py, torch/signal/ would break `import tempfile` / `import signal`)
        done = subprocess.run([sys.executable, "-P", "-m", "hp_invariants", "check", "--format", "json",
                               "--no-cache", "-j", str(jobs), "--output-file", str(out), "."],
                              cwd=folder, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if not out.is_file():  # the run died before writing its report: a failure, never "no findings"
            return {"findings": [], "problems": []}, seconds, max(done.returncode, 3), done.stderr
        report = json.loads(out.read_text(encoding="utf-8"))
    return report, seconds, done.returncode, done.stderr


def read_verdicts(path: str | None) -> dict[tuple[str, str, str], str]:
    """Read ``project  path:line  rule-id  T|F  reason`` lines into ``{(project, path:line, id): T|F}``."""
    verdicts: dict[tuple[str, str, str], str] = {}
    if not path:
        return verdicts
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) >= 4:
            verdicts[(parts[0].strip(), parts[1].strip(), parts[2].strip())] = parts[3].strip().upper()[:1]
    return verdicts


def main(argv: list[str] | None = None) -> int:
    """Check every panel project, print the table (stderr) and the findings JSON; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("panel", nargs="?", default="/work/panel")
    parser.add_argument("--only", help="comma-separated project folder names")
    parser.add_argument("--extra", action="append", default=[],
                        help="another folder to check as a keep-clean baseline (repeatable)")
    parser.add_argument("--baseline", action="append", default=None,
                        help="panel sub-folder that is a keep-clean baseline (repeatable; default hyper-parallel)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--mirror", default="/work/.mirror")
    parser.add_argument("--verdicts", help="tab-separated judged findings (see the module docstring)")
    parser.add_argument("-o", "--output", help="write the JSON here instead of stdout")
    args = parser.parse_args(argv)

    only = set(args.only.split(",")) if args.only else None
    verdicts = read_verdicts(args.verdicts)
    rule_ids = [rule.rule_id for rule in RULES]
    projects, failed = [], False
    baseline = set(args.baseline if args.baseline is not None else ["hyper-parallel"])
    for folder, is_baseline in project_folders(Path(args.panel), only, args.extra, baseline):
        report, seconds, status, stderr = run_check(folder, args.jobs)
        if status > 1:
            failed = True
            print(f"{folder.name}: check exited {status}: {stderr.strip()[-500:]}", file=sys.stderr)
        findings = []
        for finding in report.get("findings", []):
            finding = dict(finding)
            finding["path"] = os.path.normpath(finding["path"])
            key = (folder.name, f"{finding['path']}:{finding['line']}", finding["id"])
            finding["verdict"] = verdicts.get(key)
            findings.append(finding)
        counts = {rid: 0 for rid in rule_ids}
        for finding in findings:
            counts[finding["id"]] = counts.get(finding["id"], 0) + 1
        projects.append({
            "name": folder.name, "folder": str(folder), "baseline": is_baseline, "version": version_of(folder, Path(args.mirror)),
            "files": count_files(folder), "seconds": round(seconds, 2), "exit_status": status,
            "counts": counts, "problems": report.get("problems", []), "findings": findings,
        })

    columns = rule_ids + sorted({rid for p in projects for rid in p["counts"]} - set(rule_ids))
    header = ["project", "version", "files", "s"] + columns + ["problems"]
    if verdicts:
        header += ["true", "false", "unjudged"]
    def row_of(p: dict) -> list[str]:
        row = [p["name"] + (" (baseline)" if p["baseline"] else ""), p["version"], str(p["files"]),
               f"{p['seconds']:.1f}"]
        row += [str(p["counts"].get(c, 0)) for c in columns] + [str(len(p["problems"]))]
        if verdicts:
            marks = [f["verdict"] for f in p["findings"]]
            row += [str(marks.count("T")), str(marks.count("F")), str(marks.count(None))]
        return row

    panel = [p for p in projects if not p["baseline"]]
    rows = [row_of(p) for p in panel]
    total = [f"panel total ({len(panel)})", "", str(sum(p["files"] for p in panel)),
             f"{sum(p['seconds'] for p in panel):.1f}"]
    total += [str(sum(p["counts"].get(c, 0) for p in panel)) for c in columns]
    total += [str(sum(len(p["problems"]) for p in panel))]
    if verdicts:
        marks = [f["verdict"] for p in panel for f in p["findings"]]
        total += [str(marks.count("T")), str(marks.count("F")), str(marks.count(None))]
    rows.append(total)
    rows += [row_of(p) for p in projects if p["baseline"]]
    print("| " + " | ".join(header) + " |", file=sys.stderr)
    print("|" + "---|" * len(header), file=sys.stderr)
    for row in rows:
        print("| " + " | ".join(row) + " |", file=sys.stderr)

    text = json.dumps({"rules": rule_ids, "projects": projects}, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
