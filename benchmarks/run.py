#!/usr/bin/env python3
"""Speed at scale: hp-invariants against the ``ast.parse`` floor, pylint and semgrep.

Usage::

    python benchmarks/run.py [--quick] [--runs N] [--corpus NAME | NAME=PATH ...] [--output FILE]

For every corpus, on the SAME sorted file list (what hp-invariants' own discovery finds under the
corpus folder, passed explicitly to every tool), each run times:

* the ``ast.parse`` floor: read + decode + ``ast.parse`` of every file in one process
  (``benchmarks/_floor.py``), the least work any ``ast``-based checker must do;
* ``hp-invariants check`` at ``-j1`` and ``-j2``, with a cold cache (``HP_INVARIANTS_CACHE_DIR`` =
  a fresh empty folder), then (``-j1`` only) an ``index-only`` one (a copy of that folder without the
  per-file results cache: the class index is warm, every file is parsed and checked), then a warm one
  (the same folder again: class index and per-file results cached, a re-check of unchanged files);
* pylint running only our plugin (``--disable=all --enable=<every rule id>``), on the
  corpora of ``--pylint-on``;
* pylint's own default run without and with the plugin, on the corpora of ``--baseline-on``
  (the plugin's added cost, also measured in-process by timing the plugin's ``process_module``);
* semgrep with the local, pattern-based approximations in ``benchmarks/semgrep/*.yml``
  (``--metrics=off --disable-version-check``, offline);

then a single file checked inside a copy of the ``--single-in`` package (its ``.py`` files copied to
a folder without project markers; the probe file holds one small class), cold and warm, next to the
floor of the whole copy (what the cold class index must parse once);

with ``--compare-with REV`` (a git revision of this repository, or a folder holding an
``hp_invariants`` package), the same ``check -j1`` commands (cold, index-only and warm cache) of that
earlier version on the same files, each run right before or after the current version's same
command (the order swapped every other round), and the slowdown of the current version against it
(the goal, judged on the ratio of the median CPU times: at most 10% more, issue #11; the median of
the per-round ratios is reported beside it);

then the pre-commit path: ``hp-invariants check`` on 10 files of the ``--precommit-on`` corpus,
run from its project root with root-relative paths (as pre-commit passes them), cold and warm,
next to the floor of the whole project (what the E9503 class index must parse once when cold).

Each command runs ``--runs`` times (default 3; ``--quick``: 1, on ``--quick-files`` evenly spaced
files per corpus) interleaved with the others; the report gives the median wall time, the spread
(min-max), the median CPU time (user+sys, less sensitive to other load on the machine) and the
peak RSS of the command (``/usr/bin/time -v``; without it, ``os.wait4`` of the child: the largest
single process of the tree, not the sum over ``-j`` workers). Results go to ``--output``
(default ``benchmarks/RESULTS.md``) as markdown, with the machine, the versions and the commands.

Default corpora (a missing one is skipped with a printed reason):

=====================  =======================================================================
``torch-distributed``  ``$HP_BENCH_TORCH/distributed`` (default: the installed torch package)
``torch``              ``$HP_BENCH_TORCH``
``transformers-models`` ``$HP_BENCH_TRANSFORMERS/models`` (default: the installed transformers)
``hyper-parallel``     ``$HP_BENCH_HP`` (default ``/tmp/hp``)
=====================  =======================================================================

``--corpus NAME=PATH`` adds a corpus of your own. semgrep comes from ``--semgrep``,
``$HP_BENCH_SEMGREP``, ``PATH`` or beside the running Python; without it its rows are skipped.
Exit status: 0 when every command ran (goals missed or not), 1 when a measured command failed,
2 on a usage error.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PY = sys.executable
GNU_TIME = "/usr/bin/time"
DEFAULT_CORPORA = ("torch-distributed", "torch", "transformers-models", "hyper-parallel")

# Row labels (the smoke test and the goal table refer to these).
FLOOR = "ast.parse floor"
CHECK = "hp-invariants check -j{j} ({cache} cache)"
PYLINT_PLUGIN = "pylint, only our plugin"
PYLINT_BASE = "pylint default (baseline, no plugin)"
PYLINT_WITH = "pylint default + our plugin"
SEMGREP = "semgrep, 4 approximate rules"
PRE_COLD = "pre-commit: check {n} files (cold cache)"
PRE_WARM = "pre-commit: check {n} files (warm cache)"
PRE_FLOOR = "floor of the whole-project index ({n} files)"
SINGLE_COLD = "one file inside a copy of the package (cold cache)"
SINGLE_WARM = "one file inside a copy of the package (warm cache)"
SINGLE_FLOOR = "floor of the whole copy ({n} files)"
PROBE = "_hp_bench_probe.py"
PROBE_TEXT = "class Probe:\n    def value(self):\n        return self.other()\n\n    def other(self):\n        return 1\n"


def check_label(jobs: int, cache: str) -> str:
    """Return the row label of ``hp-invariants check -j<jobs>`` with a ``cold``/``warm`` cache."""
    return CHECK.format(j=jobs, cache=cache)


BASELINE_SUFFIX = " [baseline]"
SLOWDOWN_GOAL = 1.10
"""``--compare-with``: the current version may take at most this times the baseline's CPU time."""

# ``hp-invariants`` of another source tree: its ``cli.main`` with that tree first on ``sys.path``
# (``-P``: not the working directory, which may be a corpus folder shadowing the standard library).
_LAUNCH = "import sys; sys.argv[0] = 'hp-invariants'; from hp_invariants.cli import main; sys.exit(main())"


def baseline_label(jobs: int, cache: str) -> str:
    """The row label of the ``--compare-with`` version's ``check -j<jobs>`` run."""
    return check_label(jobs, cache) + BASELINE_SUFFIX


CRASHED = 70
"""The exit status a check sample is given when its command printed a Python traceback."""


def precompile(folder: Path) -> None:
    """Write the ``.pyc`` files of the ``hp_invariants`` package in ``folder`` before anything is timed
    (a fresh ``git archive`` export has none: its first run would also compile the package). Nothing
    happens where the folder cannot be written."""
    subprocess.run([PY, "-m", "compileall", "-q", str(folder / "hp_invariants")], capture_output=True,
                   timeout=300, env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})


def export_baseline(spec: str, into: Path) -> tuple[Path, str]:
    """Make the ``--compare-with`` version importable; return ``(folder for PYTHONPATH, description)``.

    ``spec``: a folder that holds an ``hp_invariants`` package (used as it is), or a git revision of
    this repository (its ``hp_invariants`` folder is exported with ``git archive`` into ``into``).
    Raises ``SystemExit`` with a message when it is neither.
    """
    folder = Path(spec)
    if (folder / "hp_invariants" / "__init__.py").is_file():
        return folder.resolve(), f"the tree at {folder.resolve()}"
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", f"{spec}^{{commit}}"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
        into.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev, "hp_invariants"],
                                 capture_output=True, timeout=120, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, capture_output=True, timeout=120, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SystemExit(f"run.py: --compare-with {spec!r} is neither a folder holding hp_invariants/ nor a git "
                         f"revision of {REPO} ({exc})") from None
    return into, f"git {rev}"


# ---------------------------------------------------------------------- data
@dataclass
class Corpus:
    """A named folder and the sorted file list every tool gets (``subset``: --quick sample)."""

    name: str
    path: Path
    files: list[str] = field(default_factory=list)
    total: int = 0
    subset: bool = False


@dataclass
class Sample:
    """One timed execution of a command."""

    wall: float
    cpu: float
    rss_kb: int
    rc: int
    stdout: str
    stderr: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Row:
    """All samples of one command of one corpus (or the reason it was skipped)."""

    corpus: str
    label: str
    display: str = ""
    samples: list[Sample] = field(default_factory=list)
    skipped: str = ""
    ok_rcs: tuple[int, ...] = (0,)
    note: str = ""

    @property
    def walls(self) -> list[float]:
        return [s.wall for s in self.samples]

    def median(self, attr: str = "wall") -> float | None:
        values = [getattr(s, attr) for s in self.samples]
        return statistics.median(values) if values else None

    def extra_median(self, key: str) -> float | None:
        values = [s.extra[key] for s in self.samples if key in s.extra]
        return statistics.median(values) if values else None

    @property
    def failed(self) -> bool:
        return any(s.rc not in self.ok_rcs for s in self.samples)


# ---------------------------------------------------------------------- measuring
class Runner:
    """Runs commands under ``/usr/bin/time -v`` (or ``os.wait4``) and records samples."""

    def __init__(self, use_gnu_time: bool, timeout: float, workdir: Path, verbose: bool = True):
        self.use_gnu_time = use_gnu_time
        self.timeout = timeout
        self.workdir = workdir
        self.verbose = verbose
        self._count = 0

    def run(self, cmd: list[str], cwd: Path, env: dict[str, str]) -> Sample:
        """Run ``cmd`` once; return its wall/CPU time, peak RSS, exit status and output."""
        self._count += 1
        out_path = self.workdir / f"out{self._count}.txt"
        err_path = self.workdir / f"err{self._count}.txt"
        time_path = self.workdir / f"time{self._count}.txt"
        full = [GNU_TIME, "-v", "-o", str(time_path), *cmd] if self.use_gnu_time else cmd
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(full, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
            try:
                rc, rusage = _wait(proc, self.timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc, rusage = 124, None
            wall = time.perf_counter() - start
        stdout = out_path.read_text(encoding="utf-8", errors="replace")
        stderr = err_path.read_text(encoding="utf-8", errors="replace")
        cpu, rss = 0.0, 0
        if self.use_gnu_time and time_path.exists():
            info = _parse_gnu_time(time_path.read_text(encoding="utf-8", errors="replace"))
            cpu, rss = info.get("cpu", 0.0), info.get("rss_kb", 0)
            if rc != 124 and "status" in info:
                rc = info["status"]
        elif rusage is not None:
            cpu, rss = rusage.ru_utime + rusage.ru_stime, int(rusage.ru_maxrss)
        for path in (out_path, err_path, time_path):
            path.unlink(missing_ok=True)
        return Sample(wall=wall, cpu=cpu, rss_kb=rss, rc=rc, stdout=stdout, stderr=stderr)


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[int, Any]:
    """Wait for ``proc`` with ``os.wait4`` (its rusage: the child and its waited descendants)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, rusage
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        time.sleep(0.002)


def _parse_gnu_time(text: str) -> dict[str, Any]:
    """Extract CPU seconds, peak RSS (kB) and exit status from ``/usr/bin/time -v`` output."""
    info: dict[str, Any] = {}
    user = re.search(r"User time \(seconds\): ([\d.]+)", text)
    system = re.search(r"System time \(seconds\): ([\d.]+)", text)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    status = re.search(r"Exit status: (\d+)", text)
    signal = re.search(r"Command terminated by signal (\d+)", text)
    if user and system:
        info["cpu"] = float(user.group(1)) + float(system.group(1))
    if rss:
        info["rss_kb"] = int(rss.group(1))
    if status:
        info["status"] = int(status.group(1))
    elif signal:
        info["status"] = 128 + int(signal.group(1))
    return info


# ---------------------------------------------------------------------- corpora
def _package_dir(name: str) -> Path | None:
    """Folder of the installed top-level package ``name`` without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def default_corpus_paths() -> dict[str, Path | None]:
    """Paths of the default corpora from the environment or the installed packages."""
    torch = Path(os.environ["HP_BENCH_TORCH"]) if os.environ.get("HP_BENCH_TORCH") else _package_dir("torch")
    transformers = (Path(os.environ["HP_BENCH_TRANSFORMERS"]) if os.environ.get("HP_BENCH_TRANSFORMERS")
                    else _package_dir("transformers"))
    return {
        "torch-distributed": torch / "distributed" if torch else None,
        "torch": torch,
        "transformers-models": transformers / "models" if transformers else None,
        "hyper-parallel": Path(os.environ.get("HP_BENCH_HP") or "/tmp/hp"),
    }


def rule_ids() -> str:
    """The ids of every registered rule, comma-separated (what pylint's ``--enable`` takes)."""
    from hp_invariants.registry import RULES

    return ",".join(r.rule_id for r in RULES)


def discover(path: Path) -> list[str]:
    """The sorted files ``hp-invariants check PATH`` would check (its own discovery and excludes)."""
    from hp_invariants.config import ConfigError, Resolver
    from hp_invariants.discovery import iter_python_files
    from hp_invariants.registry import RULES

    try:
        files, _ = iter_python_files([str(path)], Resolver(RULES))
    except ConfigError:  # a broken pyproject of the corpus: use the defaults
        files, _ = iter_python_files([str(path)], Resolver(RULES, config_file=None))
    return [os.path.abspath(f) for f in files]


def evenly(items: list[str], count: int) -> list[str]:
    """``count`` items spread evenly over ``items`` (all of them when there are fewer)."""
    if count <= 0 or len(items) <= count:
        return list(items)
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


# ---------------------------------------------------------------------- versions and machine
def _version(cmd: list[str], env: dict[str, str] | None = None) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[-1].strip() if text else "unknown"


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, str]:
    """nproc, CPU model, RAM, OS and load average (this machine may be shared)."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    return {
        "nproc": str(os.cpu_count()),
        "usable cores (affinity)": str(len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else "?",
        "CPU": cpu,
        "RAM": ram,
        "OS": f"{platform.system()} {platform.release()}",
    }


def _git_rev() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=30)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return out.stdout.strip() + (" (+ uncommitted changes)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


# ---------------------------------------------------------------------- output parsing
_CHECK_LINE = re.compile(r"^.+:\d+:\d+: (E95\d\d) ", re.M)
_CHECK_SUMMARY = re.compile(r"(\d+) checked")
_PYLINT_OURS = re.compile(r"^.+:\d+:\d+: (E95\d\d): ", re.M)
_PYLINT_ANY = re.compile(r"^.+:\d+:\d+: [CRWEFI]\d{4}: ", re.M)
_PLUGIN_TIME = re.compile(r"plugin_seconds=([\d.]+) modules=(\d+)")


def drop_stored_results(cache: Path) -> None:
    """Delete the per-file results from the store's database in the cache folder ``cache`` (a copy
    of a cold run's cache: what is left is the index-only cache), when there is one: SQLite's own
    ``sqlite3`` module, so that this works for any version whose database has a ``results`` table."""
    import sqlite3

    database = cache / "hp-invariants.sqlite3"
    if database.exists():
        conn = sqlite3.connect(database, isolation_level=None)
        try:
            conn.execute("DELETE FROM results")
        finally:
            conn.close()  # the write-ahead log is folded into the database


def parse_check(sample: Sample) -> None:
    if "Traceback (most recent call last):" in sample.stderr:  # a crash exits 1, as findings do: a failure
        sample.rc = CRASHED
    sample.extra["findings"] = len(_CHECK_LINE.findall(sample.stdout))
    match = _CHECK_SUMMARY.search(sample.stderr)
    if match:
        sample.extra["files"] = int(match.group(1))


def parse_floor(sample: Sample) -> None:
    match = re.search(r"files=(\d+) parsed=(\d+) errors=(\d+)", sample.stdout)
    if match:
        sample.extra["files"] = int(match.group(1))
        sample.extra["parse_errors"] = int(match.group(3))


def parse_semgrep(sample: Sample) -> None:
    try:
        data = json.loads(sample.stdout)
    except json.JSONDecodeError:
        return
    sample.extra["findings"] = len(data.get("results", []))
    scanned = data.get("paths", {}).get("scanned")
    if isinstance(scanned, list):
        sample.extra["files"] = len(scanned)
    sample.extra["errors"] = len(data.get("errors", []))


def parse_pylint(report: Path, ours_only: bool) -> Callable[[Sample], None]:
    def parse(sample: Sample) -> None:
        pattern = _PYLINT_OURS if ours_only else _PYLINT_ANY
        sample.extra["findings"] = len(pattern.findall(sample.stdout))
        if ours_only is False:
            sample.extra["our_findings"] = len(_PYLINT_OURS.findall(sample.stdout))
        try:
            match = _PLUGIN_TIME.search(report.read_text(encoding="utf-8"))
        except OSError:
            match = None
        if match and int(match.group(2)):
            sample.extra["plugin_seconds"] = float(match.group(1))
            sample.extra["files"] = int(match.group(2))
    return parse


# ---------------------------------------------------------------------- the benchmark
@dataclass
class Job:
    """One command of the plan: how to build it for a run and where its samples go."""

    row: Row
    make: Callable[[int], tuple[list[str], Path, dict[str, str]]]
    parse: Callable[[Sample], None] | None = None
    runs: int | None = None  # None: the corpus's number of runs
    pair: str | None = None  # jobs sharing it run back to back, in swapped order every other round


def round_order(jobs: list[Job], run: int) -> list[Job]:
    """``jobs`` in the order of round ``run``: as planned, except that in every other round the two
    jobs of a pair (the current version and the baseline, same command) swap places. On a shared VM
    the speed drifts over minutes; timing the two versions back to back, each first half of the
    time, keeps a slow stretch from landing on one side only."""
    out = list(jobs)
    if run % 2:
        i = 0
        while i + 1 < len(out):
            if out[i].pair is not None and out[i].pair == out[i + 1].pair:
                out[i], out[i + 1] = out[i + 1], out[i]
                i += 2
            else:
                i += 1
    return out


class Bench:
    """Builds the plan from the options, runs it, and renders the report."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.runs = args.runs
        self.tmp = Path(tempfile.mkdtemp(prefix="hp-bench-"))
        self.runner = Runner(use_gnu_time=args.gnu_time, timeout=args.timeout, workdir=self.tmp)
        self.rows: list[Row] = []
        self.skips: list[tuple[str, str, str]] = []  # (corpus, what, reason)
        self.corpora: list[Corpus] = []
        self.cache_dirs_unused: list[str] = []
        self.commands: dict[str, str] = {}
        self.profiles: list[tuple[str, str, str]] = []
        self.precommit: dict[str, Any] = {}
        env = dict(os.environ)
        # Let the interpreters write .pyc (a real install has them); PYTHONDONTWRITEBYTECODE would make
        # every tool recompile its own modules at each start.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["SEMGREP_SEND_METRICS"] = "off"
        env["SEMGREP_ENABLE_VERSION_CHECK"] = "0"
        env.pop("HP_INVARIANTS_CACHE_DIR", None)
        self.env = env
        hp_script = Path(PY).parent / "hp-invariants"
        self.hp_cmd = [str(hp_script)] if hp_script.exists() else [PY, "-m", "hp_invariants"]
        self.semgrep = self._find_semgrep()
        self.baseline: tuple[Path, str] | None = None  # (PYTHONPATH folder, description)
        if args.compare_with:
            self.baseline = export_baseline(args.compare_with, self.tmp / "baseline")
            precompile(self.baseline[0])
            precompile(REPO)  # the current version too, when it runs from this checkout: both start warm

    # ------------------------------------------------------------------ setup
    def say(self, text: str) -> None:
        print(text, flush=True)

    def skip(self, corpus: str, what: str, reason: str) -> None:
        self.say(f"[skip] {corpus}: {what}: {reason}")
        self.skips.append((corpus, what, reason))
        self.rows.append(Row(corpus=corpus, label=what, skipped=reason))

    def _find_semgrep(self) -> str | None:
        if self.args.semgrep is not None:
            return self.args.semgrep or None
        if os.environ.get("HP_BENCH_SEMGREP"):
            return os.environ["HP_BENCH_SEMGREP"]
        found = shutil.which("semgrep")
        if found:
            return found
        beside = Path(PY).parent / "semgrep"
        return str(beside) if beside.exists() else None

    def load_corpora(self) -> None:
        defaults = default_corpus_paths()
        specs: list[tuple[str, Path | None]] = []
        for item in self.args.corpus or list(DEFAULT_CORPORA):
            if "=" in item:
                name, path = item.split("=", 1)
                specs.append((name, Path(path)))
            elif item in defaults:
                specs.append((item, defaults[item]))
            else:
                raise SystemExit(f"run.py: unknown corpus {item!r}; known: {', '.join(defaults)} or NAME=PATH")
        for name, path in specs:
            if path is None:
                self.skip(name, "corpus", "package not installed (set the HP_BENCH_* variable)")
                continue
            if not path.is_dir():
                hint = " (recreate it with the `fetch` of mindspore-ai/hyper-parallel, or set HP_BENCH_HP)" \
                    if name == "hyper-parallel" else ""
                self.skip(name, "corpus", f"folder {path} not found{hint}")
                continue
            files = discover(path)
            if not files:
                self.skip(name, "corpus", f"no Python files under {path}")
                continue
            corpus = Corpus(name=name, path=path.resolve(), total=len(files))
            corpus.files = evenly(files, self.args.quick_files) if self.args.quick else files
            corpus.subset = len(corpus.files) < len(files)
            self.corpora.append(corpus)
            self.say(f"[corpus] {name}: {path} ({len(corpus.files)} of {len(files)} files)")

    def file_list(self, corpus: Corpus) -> Path:
        path = self.tmp / f"files-{corpus.name}.txt"
        path.write_text("\n".join(corpus.files) + "\n", encoding="utf-8")
        return path

    def fresh_cache(self, tag: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"cache-{tag}-", dir=self.tmp))
        return path

    def env_with_cache(self, cache: Path | None) -> dict[str, str]:
        env = dict(self.env)
        if cache is not None:
            env["HP_INVARIANTS_CACHE_DIR"] = str(cache)
        return env

    # ------------------------------------------------------------------ plan
    def plan_corpus(self, corpus: Corpus) -> list[Job]:
        jobs: list[Job] = []
        files = corpus.files
        listing = self.file_list(corpus)
        name = corpus.name
        files_ph = f"<{len(files)} files of {name}>"

        floor = Row(name, FLOOR, display=f"python benchmarks/_floor.py <list of the {len(files)} files>")
        jobs.append(Job(floor, lambda r: ([PY, str(HERE / "_floor.py"), str(listing)], corpus.path, self.env),
                        parse_floor))

        if "check" not in self.args.skip:
            caches: dict[tuple[str, int, int], Path] = {}  # ("baseline" or "", j, run)

            def check_job(j: int, cache_kind: str, baseline: bool = False) -> Job:
                label = baseline_label(j, cache_kind) if baseline else check_label(j, cache_kind)
                launcher = (f"PYTHONPATH=<{self.baseline[1]}> python -P -c <cli.main>" if baseline
                            else "hp-invariants")
                row = Row(name, label, ok_rcs=(0, 1, 2),
                          display=f"HP_INVARIANTS_CACHE_DIR=<{'fresh empty' if cache_kind == 'cold' else 'same'}"
                                  f" dir> {launcher} check -j{j} {files_ph}")
                cmd = [PY, "-P", "-c", _LAUNCH] if baseline else self.hp_cmd
                key = ("baseline" if baseline else "", j)

                state: dict[str, Path] = {}

                def make(run: int) -> tuple[list[str], Path, dict[str, str]]:
                    if cache_kind == "cold":
                        caches[(*key, run)] = self.fresh_cache(f"{name}-j{j}-r{run}{'-base' if baseline else ''}")
                    if cache_kind == "index-only":  # the class index of the cold run, no per-file results
                        copy = self.fresh_cache(f"{name}-j{j}-r{run}-index")
                        for item in caches[(*key, run)].iterdir():
                            if not item.name.startswith("results-"):  # the JSON files of earlier versions
                                shutil.copy2(item, copy / item.name)
                        drop_stored_results(copy)
                        state["cache"] = copy
                    else:
                        state["cache"] = caches[(*key, run)]
                    env = self.env_with_cache(state["cache"])
                    if baseline:
                        env["PYTHONPATH"] = os.pathsep.join([str(self.baseline[0]), *filter(None, [
                            env.get("PYTHONPATH")])])
                    return [*cmd, "check", f"-j{j}", *files], corpus.path, env

                def parse(sample: Sample) -> None:
                    parse_check(sample)
                    if cache_kind == "cold" and not any(state["cache"].rglob("*")):
                        self.cache_dirs_unused.append(f"{name} -j{j}")
                return Job(row, make, parse, pair=f"{name} -j{j} {cache_kind}" if self.baseline and j == 1 else None)

            for j in (1, 2):
                for cache_kind in ("cold", "index-only", "warm") if j == 1 else ("cold", "warm"):
                    for baseline in ((False, True) if self.baseline and j == 1 else (False,)):
                        jobs.append(check_job(j, cache_kind, baseline))
            self._warm_cache_for_pylint = {(j, run): path for (kind, j, run), path in caches.items() if not kind}
        else:
            self.skip(name, "hp-invariants check", "--skip check")

        if name in self.args.pylint_on and "pylint" not in self.args.skip:
            report = self.tmp / f"pylint-plugin-{name}.txt"
            args = ["--persistent=n", "--score=n", "--load-plugins=hp_invariants.checkers", "--disable=all",
                    f"--enable={rule_ids()}"]
            row = Row(name, PYLINT_PLUGIN, ok_rcs=tuple(range(0, 32)),
                      display=f"HP_INVARIANTS_CACHE_DIR=<warm dir> pylint {' '.join(args)} {files_ph}")
            jobs.append(Job(row, self._pylint_make(report, args, files, corpus, warm=True),
                            parse_pylint(report, ours_only=True)))
        elif name in self.args.pylint_on:
            self.skip(name, PYLINT_PLUGIN, "--skip pylint")

        if name in self.args.baseline_on and "baseline" not in self.args.skip:
            for label, extra in ((PYLINT_BASE, []), (PYLINT_WITH, ["--load-plugins=hp_invariants.checkers"])):
                report = self.tmp / f"pylint-{'with' if extra else 'base'}-{name}.txt"
                args = ["--persistent=n", "--score=n", *extra]
                row = Row(name, label, ok_rcs=tuple(range(0, 32)),
                          display=f"{'HP_INVARIANTS_CACHE_DIR=<warm dir> ' if extra else ''}pylint "
                                  f"{' '.join(args)} {files_ph}")
                jobs.append(Job(row, self._pylint_make(report, args, files, corpus, warm=bool(extra)),
                                parse_pylint(report, ours_only=False), runs=self.args.baseline_runs))
        elif name in self.args.baseline_on:
            self.skip(name, "pylint baseline", "--skip baseline")

        if "semgrep" in self.args.skip:
            self.skip(name, SEMGREP, "--skip semgrep")
        elif not self.semgrep:
            self.skip(name, SEMGREP, "semgrep not found (pass --semgrep PATH or set HP_BENCH_SEMGREP)")
        else:
            args = ["scan", "--metrics=off", "--disable-version-check", "--config", str(HERE / "semgrep"),
                    "--no-git-ignore", "--max-target-bytes=0", "--json", "--quiet"]
            row = Row(name, SEMGREP, ok_rcs=(0, 1),
                      display=f"semgrep {' '.join(args).replace(str(HERE), 'benchmarks')} {files_ph}")
            jobs.append(Job(row, lambda r: ([self.semgrep, *args, *files], corpus.path, self.env),
                            parse_semgrep))
        return jobs

    def _pylint_make(self, report: Path, args: list[str], files: list[str], corpus: Corpus, warm: bool):
        def make(run: int) -> tuple[list[str], Path, dict[str, str]]:
            cache = None
            if warm:
                caches = getattr(self, "_warm_cache_for_pylint", {})
                cache = caches.get((1, run)) or self.shared_warm_cache(corpus)
            env = self.env_with_cache(cache) if cache else self.env
            return [PY, str(HERE / "_pylint_timed.py"), str(report), *args, *files], corpus.path, env
        return make

    def shared_warm_cache(self, corpus: Corpus) -> Path:
        path = self.tmp / f"cache-shared-{corpus.name}"
        path.mkdir(exist_ok=True)
        return path

    # ------------------------------------------------------------------ executing
    def runs_for(self, name: str) -> int:
        """Runs per command for corpus ``name`` (``--runs-for NAME=N``, else ``--runs``)."""
        return self.args.runs_for.get(name, self.runs)

    def execute(self, jobs: list[Job], runs: int) -> None:
        for job in jobs:
            self.rows.append(job.row)
            self.commands[f"{job.row.corpus}: {job.row.label}"] = job.row.display
        for run in range(max([runs] + [job.runs or 0 for job in jobs])):
            for job in round_order(jobs, run):
                if run >= (job.runs or runs):
                    continue
                cmd, cwd, env = job.make(run)
                sample = self.runner.run(cmd, cwd, env)
                if job.parse:
                    job.parse(sample)
                job.row.samples.append(sample)
                flag = "" if sample.rc in job.row.ok_rcs else f"  FAILED rc={sample.rc}"
                self.say(f"[run {run + 1}/{job.runs or runs}] {job.row.corpus}: {job.row.label}: "
                         f"{sample.wall:.2f} s wall, {sample.cpu:.2f} s cpu, {sample.rss_kb / 1024:.0f} MiB{flag}")
                if flag:
                    tail = (sample.stderr or sample.stdout).strip().splitlines()[-5:]
                    for line in tail:
                        self.say(f"    {line}")

    def warm_page_cache(self, corpus: Corpus) -> None:
        """Read every file once, untimed, so that no tool pays the first, cold disk read."""
        for path in corpus.files:
            try:
                with open(path, "rb") as handle:
                    handle.read()
            except OSError:
                pass

    def run_precommit(self) -> None:
        name = self.args.precommit_on
        if "precommit" in self.args.skip:
            self.skip(name, "pre-commit", "--skip precommit")
            return
        corpus = next((c for c in self.corpora if c.name == name), None)
        if corpus is None:
            defaults = default_corpus_paths()
            path = defaults.get(name)
            if path is None or not path.is_dir():
                self.skip(name, "pre-commit", f"corpus {name!r} not available")
                return
            corpus = Corpus(name=name, path=path.resolve(), files=discover(path))
            corpus.total = len(corpus.files)
        from hp_invariants.config import find_project_root

        root = find_project_root(corpus.path)
        candidates = [f for f in corpus.files if os.sep + "distributed" + os.sep in f] or corpus.files
        chosen = evenly(candidates, self.args.precommit_files)
        rel = [os.path.relpath(f, root) for f in chosen]
        n = len(rel)
        index_files = discover(root)
        self.warm_page_cache(Corpus(name="index", path=root, files=index_files))
        self.precommit = {"root": str(root), "files": rel, "index_files": len(index_files)}
        reuse = next((r for r in self.rows if r.label == FLOOR and r.samples and
                      any(c.name == r.corpus and c.path == root and not c.subset for c in self.corpora)), None)
        jobs: list[Job] = []
        idx = Corpus(name=f"{name} (project root)", path=root, files=index_files)
        floor_row = Row(name, PRE_FLOOR.format(n=len(index_files)),
                        display=f"python benchmarks/_floor.py <list of the {len(index_files)} files under {root}>")
        if reuse is not None:
            floor_row.samples = reuse.samples
            floor_row.note = f"same measurement as the {reuse.corpus} floor"
            self.rows.append(floor_row)
            self.commands[f"{name}: {floor_row.label}"] = floor_row.display
        else:
            listing = self.file_list(idx)
            jobs.append(Job(floor_row, lambda r: ([PY, str(HERE / "_floor.py"), str(listing)], root, self.env),
                            parse_floor))
        caches: dict[int, Path] = {}

        def make_cold(run: int) -> tuple[list[str], Path, dict[str, str]]:
            caches[run] = self.fresh_cache(f"pre-r{run}")
            return [*self.hp_cmd, "check", *rel], root, self.env_with_cache(caches[run])

        def make_warm(run: int) -> tuple[list[str], Path, dict[str, str]]:
            return [*self.hp_cmd, "check", *rel], root, self.env_with_cache(caches[run])

        shown = " ".join(shlex.quote(p) for p in rel)
        jobs.append(Job(Row(name, PRE_COLD.format(n=n), ok_rcs=(0, 1, 2),
                            display=f"cd {root} && HP_INVARIANTS_CACHE_DIR=<fresh empty dir> "
                                    f"hp-invariants check {shown}"), make_cold, parse_check))
        jobs.append(Job(Row(name, PRE_WARM.format(n=n), ok_rcs=(0, 1, 2),
                            display=f"cd {root} && HP_INVARIANTS_CACHE_DIR=<same dir> hp-invariants check {shown}"),
                        make_warm, parse_check))
        self.say(f"[pre-commit] {n} files of {name}, project root {root} ({len(index_files)} files)")
        self.execute(jobs, self.runs)

    def run_single(self) -> None:
        """A cold and a warm check of one small file inside a copy of the ``--single-in`` package,
        beside the floor of parsing every file of the copy once (issue #12: the cold class index must
        cost no more than 1.5x that floor)."""
        name = self.args.single_in
        if name is None:
            name = "" if self.args.quick else "torch"
        if not name:
            return
        known = {c.name: c.path for c in self.corpora}
        source = known.get(name) or (default_corpus_paths().get(name) if name in DEFAULT_CORPORA else Path(name))
        if source is None or not Path(source).is_dir():
            self.skip(name, "single file", f"package {name!r} not available")
            return
        source = Path(source)
        copy = self.tmp / "single" / source.name
        shutil.copytree(source, copy, ignore=lambda d, names: [n for n in names if not n.endswith(".py")
                                                               and not os.path.isdir(os.path.join(d, n))])
        (copy / PROBE).write_text(PROBE_TEXT)
        files = discover(copy)
        self.warm_page_cache(Corpus(name="copy", path=copy, files=files))
        listing = self.file_list(Corpus(name="single-copy", path=copy, files=files))
        jobs = [Job(Row(name, SINGLE_FLOOR.format(n=len(files)),
                        display=f"python benchmarks/_floor.py <list of the {len(files)} files of the copy>"),
                    lambda r: ([PY, str(HERE / "_floor.py"), str(listing)], copy, self.env), parse_floor)]
        caches: dict[int, Path] = {}

        def make(run: int, cold: bool) -> tuple[list[str], Path, dict[str, str]]:
            if cold:
                caches[run] = self.fresh_cache(f"single-r{run}")
            return [*self.hp_cmd, "check", PROBE], copy, self.env_with_cache(caches[run])

        for label, cold in ((SINGLE_COLD, True), (SINGLE_WARM, False)):
            jobs.append(Job(Row(name, label, ok_rcs=(0, 1, 2),
                                display=f"cd <copy of {source}> && HP_INVARIANTS_CACHE_DIR=<"
                                        f"{'fresh empty' if cold else 'same'} dir> hp-invariants check {PROBE}"),
                            lambda r, c=cold: make(r, c), parse_check))
        self.say(f"[single] {PROBE} inside a copy of {source} ({len(files)} files)")
        self.execute(jobs, self.args.single_runs or self.runs)

    # ------------------------------------------------------------------ profiling
    def profile(self, corpus: Corpus, cache_kind: str) -> None:
        """cProfile ``hp-invariants check -j1`` on ``corpus``; keep the top entries for the report."""
        import pstats
        import io

        cache = self.fresh_cache(f"prof-{corpus.name}")
        env = self.env_with_cache(cache)
        out = self.tmp / f"prof-{corpus.name}-{cache_kind}.pstats"
        # -P and the console script: ``python -m hp_invariants`` run from inside the torch package would
        # put that folder first on sys.path, and torch/random.py would shadow the stdlib's random.
        check = [*self.hp_cmd, "check", "-j1", *corpus.files]
        target = [self.hp_cmd[0]] if len(self.hp_cmd) == 1 else ["-m", "hp_invariants"]
        cmd = [PY, "-P", "-m", "cProfile", "-o", str(out), *target, "check", "-j1", *corpus.files]
        if cache_kind == "warm":
            subprocess.run(check, cwd=corpus.path, env=env, capture_output=True, timeout=self.args.timeout)
        subprocess.run(cmd, cwd=corpus.path, env=env, capture_output=True, timeout=self.args.timeout)
        if not out.exists():
            return
        text = io.StringIO()
        stats = pstats.Stats(str(out), stream=text)
        stats.strip_dirs()
        stats.sort_stats("tottime").print_stats(15)
        stats.sort_stats("cumulative").print_stats(25)
        body = "\n".join(line for line in text.getvalue().splitlines()
                         if line.strip() and not line.startswith(("   Ordered by", "   List reduced")))
        listing = self.file_list(corpus)
        stages = subprocess.run([PY, "-P", str(HERE / "_rule_times.py"), str(listing)], cwd=corpus.path, env=env,
                                capture_output=True, text=True, timeout=self.args.timeout).stdout.strip()
        self.profiles.append((f"{corpus.name}, check -j1, {cache_kind} cache", stages, body))

    # ------------------------------------------------------------------ main
    def main(self) -> int:
        started = _dt.datetime.now().astimezone()
        load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
        self.say(f"[bench] runs={self.runs} quick={self.args.quick} temp={self.tmp}")
        self.versions = self.collect_versions()
        self.load_corpora()
        for corpus in self.corpora:
            self.warm_page_cache(corpus)
            self.execute(self.plan_corpus(corpus), self.runs_for(corpus.name))
        self.run_single()
        self.run_precommit()
        self.evaluate()
        if self.args.profile == "always" or (self.args.profile == "auto" and not self.args.quick):
            for corpus in self.corpora:
                for cache_kind in ("warm", "cold"):
                    verdict = self.goal_status.get((corpus.name, cache_kind))
                    if self.args.profile == "always" or verdict is False:
                        self.say(f"[profile] {corpus.name} ({cache_kind} cache)")
                        self.profile(corpus, cache_kind)
        load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
        text = self.render(started, load_before, load_after)
        output = Path(self.args.output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        self.say(f"[bench] wrote {output}")
        if not self.args.keep_temp:
            shutil.rmtree(self.tmp, ignore_errors=True)
        failed = [r for r in self.rows if r.failed]
        for row in failed:
            self.say(f"[bench] FAILED: {row.corpus}: {row.label}")
        return 1 if failed else 0

    def collect_versions(self) -> dict[str, str]:
        import hp_invariants

        versions = {
            "python": platform.python_version(),
            "hp-invariants": f"{getattr(hp_invariants, '__version__', '?')} (git {_git_rev()})",
            "pylint": _dist_version("pylint"),
            "astroid": _dist_version("astroid"),
            "semgrep": (_version([self.semgrep, "--version", "--disable-version-check"], self.env)
                        if self.semgrep else "not found"),
            "torch": _dist_version("torch"),
            "transformers": _dist_version("transformers"),
            "peak-RSS method": "/usr/bin/time -v" if self.args.gnu_time else "os.wait4 rusage of the child",
        }
        # Warm the interpreters (and let them write their .pyc) outside the timings.
        subprocess.run([*self.hp_cmd, "rules"], env=self.env, capture_output=True, timeout=300)
        subprocess.run([PY, "-c", "import pylint.lint, astroid, hp_invariants.checkers"], env=self.env,
                       capture_output=True, timeout=300)
        return versions

    # ------------------------------------------------------------------ evaluation
    def row(self, corpus: str, label: str) -> Row | None:
        return next((r for r in self.rows if r.corpus == corpus and r.label == label and r.samples), None)

    def ratio(self, corpus: str, num: str, den: str, attr: str = "wall") -> float | None:
        a, b = self.row(corpus, num), self.row(corpus, den)
        if a is None or b is None:
            return None
        x, y = a.median(attr), b.median(attr)
        return x / y if x is not None and y else None

    def evaluate(self) -> None:
        """Compute the goal table: (goal, corpus, measured text, met: True/False/None)."""
        self.goals: list[tuple[str, str, str, bool | None]] = []
        self.goal_status: dict[tuple[str, str], bool] = {}

        def add(goal: str, corpus: str, value: float | None, fmt: str, test: Callable[[float], bool],
                status_key: tuple[str, str] | None = None) -> None:
            if value is None:
                self.goals.append((goal, corpus, "not measured", None))
                return
            met = test(value)
            self.goals.append((goal, corpus, fmt.format(value), met))
            if status_key is not None:
                self.goal_status[status_key] = self.goal_status.get(status_key, True) and met

        present = {c.name for c in self.corpora}
        for name, floor_goal, semgrep_goal, pylint_goal in (
            ("torch-distributed", 2.0, 3.0, 30.0),
            ("torch", 2.0, 1.0, None),
        ):
            if name not in present:
                continue
            for cache in ("warm", "index-only", "cold"):
                add(f"check -j1 ({cache} cache) within 2x of the ast.parse floor", name,
                    self.ratio(name, check_label(1, cache), FLOOR), "{:.2f}x the floor",
                    lambda v, g=floor_goal: v <= g, (name, cache) if cache != "index-only" else None)
            add("re-check of unchanged files (warm cache: per-file results) at most 0.3x the floor", name,
                self.ratio(name, check_label(1, "warm"), FLOOR), "{:.2f}x the floor", lambda v: v <= 0.3)
            for cache in ("warm", "cold"):
                better = "at least 3x faster" if semgrep_goal > 1 else "faster"
                add(f"check -j1 ({cache} cache) {better} than semgrep", name,
                    self.ratio(name, SEMGREP, check_label(1, cache)), "semgrep takes {:.2f}x as long",
                    lambda v, g=semgrep_goal: v >= g if g > 1 else v > 1)
            if pylint_goal:
                for cache in ("warm", "cold"):
                    add(f"check -j1 ({cache} cache) at least 30x faster than pylint with only our plugin", name,
                        self.ratio(name, PYLINT_PLUGIN, check_label(1, cache)), "pylint takes {:.1f}x as long",
                        lambda v, g=pylint_goal: v >= g)
        if self.baseline is not None:
            for corpus in self.corpora:
                for cache in ("cold", "index-only", "warm"):
                    add(f"check -j1 ({cache} cache) at most {SLOWDOWN_GOAL - 1:.0%} slower than "
                        f"{self.baseline[1]} (CPU time)", corpus.name,
                        self.ratio(corpus.name, check_label(1, cache), baseline_label(1, cache), "cpu"),
                        "{:.3f}x its CPU time", lambda v: v <= SLOWDOWN_GOAL)
        overhead = self.overhead("hyper-parallel") if "hyper-parallel" in present else None
        if overhead is not None:
            add("the plugin adds under 5% to a pylint run (wall-time difference of medians)", "hyper-parallel",
                overhead[0], "{:+.1f}%", lambda v: v < 5.0)
            add("the plugin adds under 5% to a pylint run (time inside the plugin / baseline)", "hyper-parallel",
                overhead[1], "{:.1f}%", lambda v: v < 5.0)
        single = self.args.single_in if self.args.single_in is not None else ("" if self.args.quick else "torch")
        floor_row = next((r for r in self.rows if r.corpus == single and r.label.startswith("floor of the whole copy")
                          and r.samples), None)
        if single and floor_row is not None:
            add("one file inside a copy of the package, cold cache: within 1.5x the floor of the whole copy", single,
                self.ratio(single, SINGLE_COLD, floor_row.label), "{:.2f}x that floor", lambda v: v <= 1.5)
        if self.precommit:
            name = self.args.precommit_on
            n = len(self.precommit["files"])
            warm = self.row(name, PRE_WARM.format(n=n))
            add(f"pre-commit, {n} files, warm cache: under 0.5 s wall", name,
                warm.median() if warm else None, "{:.2f} s", lambda v: v < 0.5)
            cold_ratio = self.ratio(name, PRE_COLD.format(n=n), PRE_FLOOR.format(n=self.precommit["index_files"]))
            add(f"pre-commit, {n} files, cold cache: under 2x the floor of the whole-project index", name,
                cold_ratio, "{:.2f}x that floor", lambda v: v < 2.0)

    def overhead(self, name: str) -> tuple[float | None, float | None] | None:
        base, with_plugin = self.row(name, PYLINT_BASE), self.row(name, PYLINT_WITH)
        if base is None or with_plugin is None:
            return None
        b, w = base.median(), with_plugin.median()
        inside = with_plugin.extra_median("plugin_seconds")
        return ((w - b) / b * 100 if b else None, inside / b * 100 if inside is not None and b else None)

    # ------------------------------------------------------------------ report
    def render(self, started: _dt.datetime, load_before, load_after) -> str:
        a = self.args
        lines: list[str] = []
        add = lines.append
        argv = " ".join(shlex.quote(x) for x in sys.argv[1:])
        add("# hp-invariants benchmark results")
        add("")
        add(f"Generated by `python benchmarks/run.py{(' ' + argv) if argv else ''}` on "
            f"{started.strftime('%Y-%m-%d %H:%M %Z')}: {self.runs} run(s) per command"
            + "".join(f", {v} for {k}" for k, v in a.runs_for.items())
            + (f", {a.baseline_runs} for the pylint default runs" if a.baseline_runs else "")
            + " (the `runs` column), interleaved; "
            "wall times are medians with the min-max spread. "
            + ("**Quick mode: small file subsets, one run: not a measurement to quote.**" if a.quick else ""))
        add("")
        add("## Machine and versions")
        add("")
        add("| | |")
        add("|---|---|")
        for key, value in machine_info().items():
            add(f"| {key} | {value} |")
        if load_before is not None:
            add(f"| load average (1/5/15 min) at start | {' / '.join(f'{x:.2f}' for x in load_before)} |")
            add(f"| load average at end | {' / '.join(f'{x:.2f}' for x in load_after)} |")
        for key, value in self.versions.items():
            add(f"| {key} | {value} |")
        add("")
        add("## Headline: ratios")
        add("")
        add("Ratios of median wall times (median CPU times, user+sys, in brackets: they move less when "
            "other work shares the machine). `check` is `hp-invariants check -j1`.")
        add("")
        add("| corpus | files | check / floor (warm cache) | check / floor (cold cache) | semgrep / check (warm) "
            "| semgrep / check (cold) | pylint, plugin only / check (warm) | check -j2 / -j1 (warm) |")
        add("|---|---|---|---|---|---|---|---|")
        for corpus in self.corpora:
            n = corpus.name
            cw, cc = check_label(1, "warm"), check_label(1, "cold")

            def cell(num: str, den: str, digits: int = 2) -> str:
                w, c = self.ratio(n, num, den), self.ratio(n, num, den, "cpu")
                if w is None:
                    return "-"
                return f"{w:.{digits}f}x ({c:.{digits}f}x)" if c else f"{w:.{digits}f}x"

            files = f"{len(corpus.files)}" + (f" of {corpus.total}" if corpus.subset else "")
            add(f"| {n} | {files} | {cell(cw, FLOOR)} | {cell(cc, FLOOR)} | {cell(SEMGREP, cw)} | "
                f"{cell(SEMGREP, cc)} | {cell(PYLINT_PLUGIN, cw, 1)} | {cell(check_label(2, 'warm'), cw)} |")
        over = self.overhead("hyper-parallel")
        if over is not None:
            add("")
            add(f"Plugin overhead on the hyper-parallel pylint run: "
                f"{'-' if over[0] is None else f'{over[0]:+.1f}%'} (difference of the median wall times), "
                f"{'-' if over[1] is None else f'{over[1]:.1f}%'} (time spent inside the plugin's "
                "`process_module`, measured in-process, over the baseline's median wall time).")
        if self.baseline is not None:
            add("")
            add(f"## Against the baseline ({self.baseline[1]}, `--compare-with {a.compare_with}`)")
            add("")
            add("Current / baseline, same files, same run, the two versions of each command back to back "
                "(each first in every other round): median CPU time (user+sys), median wall time, peak RSS; "
                "`per round`: the median, over the rounds, of the two CPU times of one round divided (and "
                "their range), which a slow stretch of a shared machine moves less. Below 1.00x the current "
                "version is faster.")
            add("")
            add("| corpus | files | cache | CPU s: current / baseline | ratio | per round (range) "
                "| wall s: current / baseline | ratio | peak RSS MiB: current / baseline | findings: current / baseline |")
            add("|---|---|---|---|---|---|---|---|---|---|")
            for corpus in self.corpora:
                for cache in ("cold", "index-only", "warm"):
                    cur, base = self.row(corpus.name, check_label(1, cache)), self.row(corpus.name,
                                                                                       baseline_label(1, cache))
                    if not (cur and base and cur.samples and base.samples):
                        continue
                    rss = [max(s.rss_kb for s in r.samples) / 1024 for r in (cur, base)]
                    rounds = paired_ratios(cur, base)
                    per_round = (f"{statistics.median(rounds):.3f}x ({min(rounds):.2f}-{max(rounds):.2f})"
                                 if rounds else "-")
                    add(f"| {corpus.name} | {len(corpus.files)} | {cache} | {cur.median('cpu'):.2f} / "
                        f"{base.median('cpu'):.2f} | {_div(cur.median('cpu'), base.median('cpu'))} | {per_round} | "
                        f"{cur.median():.2f} / {base.median():.2f} | {_div(cur.median(), base.median())} | "
                        f"{rss[0]:.0f} / {rss[1]:.0f} | {_extra_text(cur, 'findings')} / "
                        f"{_extra_text(base, 'findings')} |")
        add("")
        add("## Goals (DESIGN.md, Quality bars; 2 cores)")
        add("")
        add("| goal | corpus | measured | met |")
        add("|---|---|---|---|")
        for goal, corpus, measured, met in self.goals:
            mark = "n/a" if met is None else ("yes" if met else "**no**")
            add(f"| {goal} | {corpus} | {measured} | {mark} |")
        if a.quick:
            add("")
            add("Quick mode: the goals above are computed on small subsets and one run; they say nothing.")
        add("")
        add("## All measurements")
        add("")
        add("| corpus | command | wall s (median) | min-max | CPU s (median) | peak RSS MiB | files | findings "
            "| runs | notes |")
        add("|---|---|---|---|---|---|---|---|---|---|")
        order = list(dict.fromkeys(r.corpus for r in self.rows))
        for row in sorted(self.rows, key=lambda r: (order.index(r.corpus), bool(r.skipped))):
            if row.skipped:
                add(f"| {row.corpus} | {row.label} | - | - | - | - | - | - | 0 | skipped: {row.skipped} |")
                continue
            if not row.samples:
                continue
            walls = row.walls
            rss = max(s.rss_kb for s in row.samples) / 1024
            files = _extra_text(row, "files")
            findings = _extra_text(row, "findings")
            notes = [row.note] if row.note else []
            bad = sorted({s.rc for s in row.samples if s.rc not in row.ok_rcs})
            if bad:
                notes.append(f"FAILED rc={bad}")
            rcs = sorted({s.rc for s in row.samples})
            if row.label.startswith(("hp-invariants", "pre-commit")) and 2 in rcs:
                notes.append("exit 2: some file could not be parsed (e.g. a Python 3.12-only file)")
            pe = row.extra_median("parse_errors")
            if pe:
                notes.append(f"{pe:.0f} file(s) do not parse")
            ours = row.extra_median("our_findings")
            if row.label == PYLINT_WITH and ours is not None:
                notes.append(f"{ours:.0f} of them ours")
            inside = row.extra_median("plugin_seconds")
            if inside is not None:
                notes.append(f"{inside:.2f} s inside the plugin")
            errors = row.extra_median("errors")
            if errors:
                notes.append(f"{errors:.0f} semgrep error(s)")
            add(f"| {row.corpus} | {row.label} | {row.median():.3f} | {min(walls):.3f}-{max(walls):.3f} | "
                f"{row.median('cpu'):.3f} | {rss:.0f} | {files} | {findings} | {len(row.samples)} | {'; '.join(notes)} |")
        if self.cache_dirs_unused:
            add("")
            add("**Warning**: the cold-cache runs left their cache folder empty for: "
                + ", ".join(sorted(set(self.cache_dirs_unused)))
                + " (no rule needed the class index, or it ignores HP_INVARIANTS_CACHE_DIR).")
        if self.precommit:
            add("")
            add(f"Pre-commit files (relative to the project root {self.precommit['root']}, which the class index "
                f"covers: {self.precommit['index_files']} files): " + ", ".join(f"`{p}`" for p in
                                                                                  self.precommit["files"]))
        add("")
        add("## Commands")
        add("")
        add("Every tool gets the same file list: the files hp-invariants' own discovery finds under the corpus "
            "folder (its default excludes), sorted, passed explicitly on the command line; commands run from "
            "the corpus folder (pre-commit: from the project root, with root-relative paths). Each command runs "
            f"under `{GNU_TIME} -v`" if a.gnu_time else "Each command's rusage comes from `os.wait4`")
        add("(peak RSS = the largest single process, for `-j2` a worker or the parent, not their sum). "
            "`PYTHONDONTWRITEBYTECODE` is unset so every tool runs from .pyc files, as after a normal install; "
            "the page cache is warmed by reading every file once before timing. pylint runs through "
            "`benchmarks/_pylint_timed.py REPORT <pylint args>`, which is `pylint <pylint args>` plus a timer "
            "around our plugin's `process_module` when the plugin is loaded. semgrep runs with its default "
            "`--jobs` (the number of cores), its rules are pattern-based approximations of the four shapes "
            "(see the comment atop each `benchmarks/semgrep/*.yml`: no cross-file MRO for E9503, no alias "
            "or property following for E9502, no helper following for E9504), so its findings differ from ours.")
        add("")
        add("| corpus: row | command |")
        add("|---|---|")
        for key, command in self.commands.items():
            add(f"| {key} | `{command}` |")
        if self.profiles:
            add("")
            add("## Profiles of missed goals")
            add("")
            for title, stages, body in self.profiles:
                add(f"### {title}")
                add("")
                add("Time per stage, measured in-process with `benchmarks/_rule_times.py` (no profiler; "
                    "the cache as in the title, already filled by the cProfile run):")
                add("")
                add(stages or "(no output)")
                add("")
                add("cProfile of `hp-invariants check -j1` (tracing inflates Python code relative to C code "
                    "such as `ast.parse`/`compile`):")
                add("")
                add("```")
                add(body)
                add("```")
                add("")
        if self.skips:
            add("")
            add("## Skipped")
            add("")
            for corpus, what, reason in self.skips:
                add(f"- {corpus}: {what}: {reason}")
        if a.notes and Path(a.notes).exists():
            add("")
            add(Path(a.notes).read_text(encoding="utf-8").rstrip())
        if a.history_notes and Path(a.history_notes).exists():  # benchmarks/history_cost.py's last report
            add("")
            add(Path(a.history_notes).read_text(encoding="utf-8").rstrip())
        return "\n".join(lines).rstrip() + "\n"


def paired_ratios(cur: Row, base: Row) -> list[float]:
    """Current / baseline CPU time of each round (the i-th samples of the two rows were taken back to
    back, see :func:`round_order`); rounds where either failed or took no CPU time are left out."""
    return [c.cpu / b.cpu for c, b in zip(cur.samples, base.samples)
            if b.cpu > 0 and c.rc in cur.ok_rcs and b.rc in base.ok_rcs]


def _div(x: float | None, y: float | None) -> str:
    return f"{x / y:.3f}x" if x is not None and y else "-"


def _extra_text(row: Row, key: str) -> str:
    value = row.extra_median(key)
    return "-" if value is None else f"{value:.0f}"


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of ``benchmarks/run.py``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 run, --quick-files files per corpus")
    parser.add_argument("--runs", type=int, default=None, help="runs per command (default 3; --quick: 1)")
    parser.add_argument("--corpus", action="append", metavar="NAME|NAME=PATH",
                        help=f"corpora to run (default: {', '.join(DEFAULT_CORPORA)})")
    parser.add_argument("--runs-for", action="append", default=[], metavar="NAME=N",
                        help="runs per command for one corpus (e.g. torch=1 for the slow whole-package runs)")
    parser.add_argument("--baseline-runs", type=int, default=None, metavar="N",
                        help="runs of pylint default without/with the plugin (default: the corpus's runs)")
    parser.add_argument("--quick-files", type=int, default=20, metavar="N", help="files per corpus in --quick")
    parser.add_argument("--output", default=str(HERE / "RESULTS.md"), help="markdown report (default: %(default)s)")
    parser.add_argument("--pylint-on", default="torch-distributed,hyper-parallel", metavar="NAMES",
                        help="corpora for pylint with only our plugin (default: %(default)s)")
    parser.add_argument("--baseline-on", default="hyper-parallel", metavar="NAMES",
                        help="corpora for pylint default vs default + plugin (default: %(default)s)")
    parser.add_argument("--precommit-on", default="torch", metavar="NAME",
                        help="corpus whose files the pre-commit run checks (default: %(default)s)")
    parser.add_argument("--precommit-files", type=int, default=10, metavar="N")
    parser.add_argument("--single-in", default=None, metavar="NAME|PATH",
                        help="corpus or package folder to copy for the one-file cold check ('' to skip; "
                             "default: torch, none in --quick)")
    parser.add_argument("--single-runs", type=int, default=None, metavar="N",
                        help="runs of the one-file check (default: --runs)")
    parser.add_argument("--semgrep", default=None, metavar="PATH", help="semgrep executable ('' to skip semgrep)")
    parser.add_argument("--skip", default="", metavar="WHAT",
                        help="comma-separated: check, pylint, baseline, semgrep, precommit")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per command (default: %(default)s)")
    parser.add_argument("--profile", choices=("auto", "always", "never"), default="auto",
                        help="cProfile check -j1 where a floor goal is missed (auto; never in --quick)")
    parser.add_argument("--no-gnu-time", dest="gnu_time", action="store_false",
                        help="measure with os.wait4 instead of /usr/bin/time -v")
    parser.add_argument("--history-notes", default=str(HERE / "HISTORY.md"), metavar="FILE",
                        help="report of benchmarks/history_cost.py appended at the end (default: %(default)s)")
    parser.add_argument("--notes", default=str(HERE / "ANALYSIS.md"), metavar="FILE",
                        help="markdown appended to the report when it exists (analysis; default: %(default)s)")
    parser.add_argument("--keep-temp", action="store_true", help="keep the temporary folder (file lists, caches)")
    parser.add_argument("--compare-with", default=None, metavar="REV|PATH",
                        help="also time check -j1 of this git revision (or of the hp_invariants package in PATH), "
                             "interleaved, and report the slowdown against it")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    if args.runs < 1:
        print("run.py: --runs must be at least 1", file=sys.stderr)
        return 2
    try:
        args.runs_for = {k: max(1, int(v)) for k, v in (item.split("=", 1) for item in args.runs_for)}
    except ValueError:
        print("run.py: --runs-for takes NAME=N", file=sys.stderr)
        return 2
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    unknown = args.skip - {"check", "pylint", "baseline", "semgrep", "precommit"}
    if unknown:
        print(f"run.py: unknown --skip value(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    args.pylint_on = {s.strip() for s in args.pylint_on.split(",") if s.strip()}
    args.baseline_on = {s.strip() for s in args.baseline_on.split(",") if s.strip()}
    if args.gnu_time and not os.access(GNU_TIME, os.X_OK):
        print(f"[bench] {GNU_TIME} not found (apt-get install time): peak RSS from os.wait4 instead", flush=True)
        args.gnu_time = False
    return Bench(args).main()


if __name__ == "__main__":
    sys.exit(main())
