#!/usr/bin/env python3
"""Cost of the history features on long histories (issue #26): provenance and pin.

Usage::

    python benchmarks/history_cost.py [--mirror GITDIR[@REV] ... --paths P ... --fix SHA] [--synthetic N]
                                      [--runs 5] [--output benchmarks/HISTORY.md]

For each repository (a scratch clone of each ``--mirror`` at its ``HEAD`` or ``REV``, and/or a synthetic one of
``--synthetic`` commits built with ``git fast-import``), it times ``hp-invariants check --format
json PATHS``:

* *without provenance*: the same CLI with restore-from-history turned off (the history module's
  switch patched off in the process: same files, same caches, nothing else differs);
* *with provenance, warm*: the default, with the provenance answers cached for this ``HEAD``;
* *with provenance, cold*: the provenance cache file removed first (the per-file results and the
  class index stay warm): what the first check after a new commit pays;

each ``--runs`` times, interleaved, after one warm-up run; wall and CPU time (user+sys of the
child) are medians. Then ``hp-invariants pin FIX`` once (two trees extracted and checked: cold).
The goal (issue #26): a check with provenance at most 2x a check without, warm.

The report goes to ``--output`` and replaces the section between its markers in
``benchmarks/RESULTS.md`` (``benchmarks/run.py`` appends ``--output``'s file to the report it writes,
so the section survives a new run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BEGIN, END = "<!-- history-cost:begin -->", "<!-- history-cost:end -->"
NO_PROVENANCE = ("import sys; import hp_invariants.history.cli as h; h._restore_enabled = lambda config: False; "
                 "from hp_invariants.cli import run; run()")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, errors="replace").stdout.strip()


def forget_provenance(cache: Path) -> None:
    """Remove the provenance answers (the store's ``history`` documents) from the cache folder."""
    import sqlite3  # noqa: PLC0415

    from hp_invariants import store  # noqa: PLC0415

    with sqlite3.connect(cache / store.DB_NAME) as conn:
        conn.execute("DELETE FROM manifests WHERE space IN (SELECT id FROM spaces WHERE what = 'history')")
    conn.close()


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str, int]:
    """Run ``cmd``; return wall seconds, CPU seconds (user+sys of the child), stdout, exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, errors="replace")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr[-400:]}")
    return wall, cpu, proc.stdout, proc.returncode


def synthetic(folder: Path, commits: int) -> Path:
    """A repository of ``commits`` commits: ``pkg/model.py`` holds a class two of whose callable
    attributes are renamed at commits 50 and 60 and one of whose methods is deleted at commit 100,
    their callers left as they were (E9503 findings with provenance); the last commit fixes the first
    caller (a fix to pin). The class's file is touched every 25th commit and 20 other modules every
    commit, so ``git log --follow -- pkg/model.py`` walks the whole history."""
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=folder, check=True)
    model = ("class Collator:\n    def __init__(self, fn, pad):\n        self.data_process_fn = fn\n"
             "        self.pad_fn = pad\n\n"
             "    def get_input_embeddings(self):\n        return self.data_process_fn\n\n"
             "    def __call__(self, batch):\n        emb = self.get_input_embeddings()\n"
             "        return [self.pad_fn(self.data_process_fn(x)) for x in batch], emb\n\n    def touched(self):\n"
             "        return 0\n\n\nCOLLATE = Collator(str, str)\n")
    stream = []

    def blob_cmd(path: str, text: str) -> None:
        data = text.encode()
        stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    for number in range(1, commits + 1):
        message = f"commit {number}".encode()
        stream.append(b"commit refs/heads/main\n")
        stream.append(f"committer Bench <bench@example.invalid> {1_600_000_000 + number * 60} +0000\n".encode())
        stream.append(f"data {len(message)}\n".encode() + message + b"\n")
        if number == 1:
            blob_cmd("pyproject.toml", "[project]\nname = \"synthetic\"\n")
            blob_cmd("pkg/__init__.py", "")
        if number == 50:
            model = model.replace("self.data_process_fn = fn", "self.data_process_func = fn")
        if number == 60:
            model = model.replace("self.pad_fn = pad", "self.pad_func = pad")
        if number == 100:
            start = model.index("    def get_input_embeddings")
            model = model[:start] + model[model.index("    def __call__"):]
        if number == commits:
            model = model.replace("self.data_process_fn(x)", "self.data_process_func(x)")
        if number in (1, 50, 60, 100, commits) or number % 25 == 0:
            blob_cmd("pkg/model.py", model.replace("        return 0\n", f"        return {number}\n"))
        blob_cmd(f"pkg/churn_{number % 20}.py", f"VALUE = {number}\n\n\ndef value():\n    return VALUE\n")
    proc = subprocess.run(["git", "fast-import", "--quiet"], cwd=folder, input=b"".join(stream), capture_output=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr.decode()[-400:])
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=folder, check=True)
    return folder


def measure(name: str, clone: Path, paths: list[str], fix: str | None, runs: int, cache: Path) -> dict:
    """The timings of one repository (see the module docstring)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HP_INVARIANTS_CACHE_DIR": str(cache), "GIT_TERMINAL_PROMPT": "0"}
    with_cmd = [sys.executable, "-m", "hp_invariants", "check", "--format", "json", *paths]
    without_cmd = [sys.executable, "-c", NO_PROVENANCE, "check", "--format", "json", *paths]
    cold_wall, cold_cpu, _, _ = timed(without_cmd, clone, env)  # builds the class index and the results cache
    timed(with_cmd, clone, env)  # and the provenance answers
    samples: dict[str, list[tuple[float, float]]] = {"without": [], "with": [], "with-cold": []}
    report = ""
    for _ in range(runs):
        for kind in ("without", "with", "with-cold"):
            if kind == "with-cold":
                forget_provenance(cache)
            wall, cpu, out, _ = timed(without_cmd if kind == "without" else with_cmd, clone, env)
            samples[kind].append((wall, cpu))
            if kind == "with":
                report = out
    findings = json.loads(report)["findings"]
    hooked = [f for f in findings if f["id"] == "E9503"]
    explained = [f for f in hooked if "; renamed to '" in f["message"] or "; deleted by " in f["message"]]
    row = {
        "name": name, "commits": int(git(clone, "rev-list", "--count", "HEAD") or 0),
        "findings": len(findings), "e9503": len(hooked), "explained": len(explained),
        "cold_index_wall": cold_wall, "cold_index_cpu": cold_cpu,
    }
    for kind, values in samples.items():
        row[f"{kind}_wall"] = statistics.median(v[0] for v in values)
        row[f"{kind}_cpu"] = statistics.median(v[1] for v in values)
    row["ratio_warm"] = row["with_cpu"] / row["without_cpu"] if row["without_cpu"] else float("nan")
    row["ratio_cold"] = row["with-cold_cpu"] / row["without_cpu"] if row["without_cpu"] else float("nan")
    if fix:
        pins = cache / f"pins-{name.replace('/', '+').split()[0]}.json"
        pins.unlink(missing_ok=True)
        wall, cpu, out, rc = timed([sys.executable, "-m", "hp_invariants", "pin", "--pins", str(pins), fix], clone, env)
        row.update(pin_fix=fix[:10], pin_wall=wall, pin_cpu=cpu, pinned=out.count("pinned "))
    return row


def render(rows: list[dict], runs: int, argv: list[str]) -> str:
    lines = [BEGIN, "## History features at scale (`benchmarks/history_cost.py`, issue #26)", "",
             f"`python benchmarks/history_cost.py {' '.join(argv)}` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.python_version()}, "
             f"{os.cpu_count()} cores, git {git(REPO, 'rev-parse', '--short', 'HEAD')}: {runs} run(s) per command, "
             "interleaved; medians. `check --format json PATHS` with the per-file results and the class index "
             "cached (warm); *without*: restore-from-history switched off in the same CLI; *with, warm*: the "
             "provenance answers cached for this HEAD; *with, cold*: their cache file removed before each run. "
             "CPU time is user+sys of the child.", "",
             "| repository | commits (HEAD) | E9503 findings / with provenance | check without: wall / CPU s | "
             "with, warm | ratio (CPU) | with, cold | ratio (CPU) | `pin FIX`: wall s (pins) | goal: warm <= 2x |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pin = f"{r['pin_wall']:.1f} ({r['pinned']}, `{r['pin_fix']}`)" if "pin_wall" in r else "-"
        lines.append(f"| {r['name']} | {r['commits']:,} | {r['e9503']} / {r['explained']} | "
                     f"{r['without_wall']:.2f} / {r['without_cpu']:.2f} | {r['with_wall']:.2f} / {r['with_cpu']:.2f} | "
                     f"{r['ratio_warm']:.2f}x | {r['with-cold_wall']:.2f} / {r['with-cold_cpu']:.2f} | "
                     f"{r['ratio_cold']:.2f}x | {pin} | {'yes' if r['ratio_warm'] <= 2 else '**no**'} |")
    lines += ["", END]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", action="append", metavar="GITDIR[@REV]",
                        help="a git directory (bare mirror) to clone and measure, at REV (default: its HEAD); "
                             "repeatable")
    parser.add_argument("--paths", nargs="*", default=["."], help="what to check, relative to the clone")
    parser.add_argument("--fix", help="a fix commit of the first mirror to time `pin` on")
    parser.add_argument("--synthetic", type=int, default=0, metavar="N", help="also a synthetic history of N commits")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temporary one, removed)")
    parser.add_argument("--output", type=Path, default=HERE / "HISTORY.md")
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md", help="report whose section is replaced")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="hp-history-cost-"))
    rows = []
    try:
        for number, spec in enumerate(args.mirror or []):
            gitdir, _, rev = spec.partition("@")
            mirror = Path(gitdir)
            clone = work / f"clone-{number}"
            if not clone.exists():
                subprocess.run(["git", "clone", "-q", str(mirror), str(clone)], capture_output=True)
            if rev:
                subprocess.run(["git", "checkout", "-q", "-f", "--detach", rev], cwd=clone, capture_output=True)
            name = mirror.parent.name.replace("+", "/") + (f" at `{rev[:10]}`" if rev else "")
            print(f"[history-cost] {name}", file=sys.stderr, flush=True)
            rows.append(measure(name, clone, args.paths, args.fix if number == 0 else None, args.runs,
                                work / f"cache-mirror-{number}"))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        if args.synthetic:
            folder = work / "synthetic"
            if not folder.exists():
                synthetic(folder, args.synthetic)
            print(f"[history-cost] synthetic {args.synthetic}", file=sys.stderr, flush=True)
            fix = git(folder, "rev-parse", "main")
            rows.append(measure(f"synthetic ({args.synthetic:,} commits)", folder, ["pkg"], fix, args.runs,
                                work / "cache-synthetic"))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    text = render(rows, args.runs, argv if argv is not None else sys.argv[1:])
    args.output.write_text(text, encoding="utf-8")
    if args.results.exists():
        report = args.results.read_text(encoding="utf-8")
        if BEGIN in report and END in report:
            report = report[:report.index(BEGIN)] + text.rstrip("\n") + report[report.index(END) + len(END):]
        else:
            report = report.rstrip("\n") + "\n\n" + text
        args.results.write_text(report, encoding="utf-8")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
