"""Smoke test of ``benchmarks/run.py --quick``: it completes and writes the expected table.

No timing is asserted (the numbers depend on the machine). Needs neither semgrep nor the big
corpora: semgrep is disabled with ``--semgrep ''`` and the hyper-parallel corpus points at a missing
folder, and both must show up as skipped rows with a printed reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN = REPO / "benchmarks" / "run.py"


def _table_rows(text: str, header_start: str) -> list[list[str]]:
    """Return the cells of the markdown table whose header line starts with ``header_start``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_quick_benchmark_writes_the_table(tmp_path: Path) -> None:
    corpus = tmp_path / "five"
    corpus.mkdir()
    # four fixed modules and one bundled regression (examples/history/ holds a demo script, not a corpus)
    sources = sorted((REPO / "examples" / "fixed").glob("*.py"))[:4] + sorted((REPO / "examples" / "regressions").glob("*.py"))[:1]
    assert len(sources) == 5
    for index, source in enumerate(sources):
        shutil.copy(source, corpus / f"m{index}_{source.name}")
    output = tmp_path / "RESULTS.md"
    env_missing = tmp_path / "no-such-snapshot"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick",
         "--corpus", f"examples={REPO / 'examples'}", "--corpus", f"five={corpus}",
         "--corpus", "hyper-parallel",
         "--pylint-on", "five", "--skip", "baseline", "--precommit-on", "five",
         "--single-in", "five", "--semgrep", "", "--output", str(output), "--notes", str(tmp_path / "none.md")],
        capture_output=True, text=True, timeout=600, cwd=REPO,
        env={**__import__("os").environ, "HP_BENCH_HP": str(env_missing)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Skips are printed with their reason.
    assert f"[skip] hyper-parallel: corpus: folder {env_missing} not found" in proc.stdout
    assert "[skip] five: semgrep, 4 approximate rules: semgrep not found" in proc.stdout

    text = output.read_text(encoding="utf-8")
    assert "Quick mode" in text
    rows = _table_rows(text, "| corpus | command |")
    by_key = {(cells[0], cells[1]): cells for cells in rows}
    expected = ["ast.parse floor", "hp-invariants check -j1 (index-only cache)"] + [
        f"hp-invariants check -j{j} ({cache} cache)" for j in (1, 2) for cache in ("cold", "warm")]
    for name in ("examples", "five"):
        for label in expected:
            cells = by_key[(name, label)]
            float(cells[2])  # a median wall time was recorded
            assert cells[6] != "-", f"{name} {label}: file count missing"
        assert by_key[(name, "semgrep, 4 approximate rules")][9].startswith("skipped: semgrep not found")
    # Every tool saw the same five files.
    assert by_key[("five", "ast.parse floor")][6] == "5"
    assert by_key[("five", "hp-invariants check -j1 (warm cache)")][6] == "5"
    assert by_key[("five", "pylint, only our plugin")][6] == "5"
    # The copy holds a bundled regression (examples/regressions/*.py sorts after examples/fixed/):
    # check finds it, cold and warm, -j1 and -j2 alike.
    assert any("regressions" in str(source) for source in sources)
    findings = {by_key[("five", label)][7] for label in expected[1:]}
    assert len(findings) == 1 and int(findings.pop()) > 0
    assert by_key[("hyper-parallel", "corpus")][9].startswith("skipped: folder")
    # The pre-commit rows, with the whole-project floor they are compared with.
    assert ("five", "pre-commit: check 5 files (cold cache)") in by_key
    assert ("five", "pre-commit: check 5 files (warm cache)") in by_key
    assert ("five", "one file inside a copy of the package (cold cache)") in by_key
    assert ("five", "one file inside a copy of the package (warm cache)") in by_key
    assert ("five", "floor of the whole-project index (5 files)") in by_key
    # The headline and goal tables exist, and the versions are recorded.
    headline = _table_rows(text, "| corpus | files | check / floor")
    assert [cells[0] for cells in headline] == ["examples", "five"]
    goals = _table_rows(text, "| goal | corpus |")
    assert any(cells[0].startswith("pre-commit, 5 files, warm cache") for cells in goals)
    for version in ("| python |", "| hp-invariants |", "| pylint |", "| semgrep | not found |"):
        assert version in text


def test_compare_with_times_an_earlier_version_beside_the_current_one(tmp_path: Path) -> None:
    """``--compare-with PATH``: the check rows of that tree run interleaved with the current ones, on
    the same files, and the report gives current / baseline ratios and the at-most-10%-slower goal.
    The baseline here is a copy of this very package with no rules registered: its rows must show
    no findings where the current tree's show the bundled regressions."""
    corpus = tmp_path / "two"
    corpus.mkdir()
    for index, source in enumerate(sorted((REPO / "examples" / "regressions").glob("*.py"))[:2]):
        shutil.copy(source, corpus / f"m{index}_{source.name}")
    baseline = tmp_path / "baseline"
    shutil.copytree(REPO / "hp_invariants", baseline / "hp_invariants",
                    ignore=shutil.ignore_patterns("__pycache__"))
    registry = baseline / "hp_invariants" / "registry.py"
    registry.write_text(registry.read_text() + "\nRULES.clear()\n")
    output = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--runs", "2", "--corpus", f"two={corpus}", "--compare-with", str(baseline),
         "--skip", "pylint,baseline,semgrep,precommit", "--single-in", "",
         "--output", str(output), "--notes", str(tmp_path / "none.md")],
        capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = output.read_text(encoding="utf-8")
    rows = {(cells[0], cells[1]): cells for cells in _table_rows(text, "| corpus | command |")}
    for cache in ("cold", "index-only", "warm"):
        current = rows[("two", f"hp-invariants check -j1 ({cache} cache)")]
        base = rows[("two", f"hp-invariants check -j1 ({cache} cache) [baseline]")]
        assert base[6] == current[6] == "2"  # same files
        assert int(current[7]) > 0 and base[7] == "0"  # the baseline rows ran the other tree
    compared = _table_rows(text, "| corpus | files | cache | CPU s: current / baseline")
    assert [cells[2] for cells in compared] == ["cold", "index-only", "warm"]
    assert all(cells[4].endswith("x") for cells in compared)
    assert all(re.fullmatch(r"\d+\.\d{3}x \(\d+\.\d\d-\d+\.\d\d\)", cells[5]) for cells in compared)  # per round
    # the two versions of a command run back to back, the baseline first in the second round
    log = [line.split(": ", 1)[1].rsplit(":", 1)[0] for line in proc.stdout.splitlines()
           if line.startswith("[run ") and "check -j1" in line]
    first, second = log[: len(log) // 2], log[len(log) // 2:]
    labels = [f"hp-invariants check -j1 ({cache} cache)" for cache in ("cold", "index-only", "warm")]
    assert first == [x for label in labels for x in (label, label + " [baseline]")]
    assert second == [x for label in labels for x in (label + " [baseline]", label)]
    goals = _table_rows(text, "| goal | corpus |")
    slower = [cells for cells in goals if "at most 10% slower than the tree at" in cells[0]]
    assert len(slower) == 3 and all(cells[3] in ("yes", "**no**") for cells in slower)


def test_compare_with_rejects_what_is_neither_a_tree_nor_a_revision(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--corpus", f"none={tmp_path}", "--compare-with", "no-such-rev-xyz",
         "--output", str(tmp_path / "R.md")], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode != 0
    assert "--compare-with 'no-such-rev-xyz' is neither a folder holding hp_invariants/ nor a git revision" \
        in proc.stdout + proc.stderr


def _run_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_run", RUN)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module  # dataclasses resolve the module's annotations through it
    spec.loader.exec_module(module)
    return module


def test_round_order_swaps_each_pair_every_other_round() -> None:
    run = _run_module()
    row = run.Row("c", "x")
    jobs = [run.Job(row, lambda r: ([], REPO, {}), pair=p) for p in (None, "a", "a", "b", "b", None, "c")]
    assert run.round_order(jobs, 0) == jobs and run.round_order(jobs, 2) == jobs
    odd = run.round_order(jobs, 1)
    assert odd == [jobs[0], jobs[2], jobs[1], jobs[4], jobs[3], jobs[5], jobs[6]]  # an unpaired job stays put


def test_paired_ratios_divide_the_samples_of_one_round() -> None:
    run = _run_module()
    cur, base = run.Row("c", "x", ok_rcs=(0, 1)), run.Row("c", "y", ok_rcs=(0, 1))
    for c, b, rc in ((2.0, 1.0, 0), (3.0, 2.0, 1), (5.0, 1.0, 9), (1.0, 0.0, 0)):
        cur.samples.append(run.Sample(wall=c, cpu=c, rss_kb=1, rc=rc, stdout="", stderr=""))
        base.samples.append(run.Sample(wall=b, cpu=b, rss_kb=1, rc=0, stdout="", stderr=""))
    assert run.paired_ratios(cur, base) == [2.0, 1.5]  # a failed round and a zero baseline are left out


def test_precompile_writes_the_bytecode_of_a_package(tmp_path: Path) -> None:
    """A fresh ``git archive`` export has no ``.pyc``: without this, the baseline's first timed run
    would also compile its package (found by a fresh helper: cold 0.39 s against 0.25 s)."""
    run = _run_module()
    shutil.copytree(REPO / "hp_invariants", tmp_path / "hp_invariants", ignore=shutil.ignore_patterns("__pycache__"))
    run.precompile(tmp_path)
    assert (tmp_path / "hp_invariants" / "__pycache__").is_dir()
    assert any(p.name.startswith("engine.") for p in (tmp_path / "hp_invariants" / "__pycache__").glob("*.pyc"))


def test_a_baseline_that_crashes_is_a_failed_row_not_a_clean_one(tmp_path: Path) -> None:
    """A traceback exits 1, as findings do: the sample is marked failed (found by a fresh helper: a
    crashing baseline counted as a fast, clean one) and left out of the per-round ratios."""
    corpus = tmp_path / "one"
    corpus.mkdir()
    shutil.copy(sorted((REPO / "examples" / "regressions").glob("*.py"))[0], corpus / "m.py")
    baseline = tmp_path / "baseline"
    shutil.copytree(REPO / "hp_invariants", baseline / "hp_invariants", ignore=shutil.ignore_patterns("__pycache__"))
    cli = baseline / "hp_invariants" / "cli.py"
    cli.write_text(cli.read_text() + "\n\ndef main(argv=None):\n    raise RuntimeError('boom')\n")
    output = tmp_path / "R.md"
    proc = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--corpus", f"one={corpus}", "--compare-with", str(baseline),
         "--skip", "pylint,baseline,semgrep,precommit", "--single-in", "", "--output", str(output),
         "--notes", str(tmp_path / "none.md")], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert "check -j1 (cold cache) [baseline]: " in proc.stdout and "FAILED rc=70" in proc.stdout
    assert not [line for line in proc.stdout.splitlines() if "FAILED" in line and "[baseline]" not in line]
    compared = _table_rows(output.read_text(encoding="utf-8"), "| corpus | files | cache | CPU s: current / baseline")
    assert compared and all(cells[5] == "-" for cells in compared)  # no round of a crashed baseline counts
