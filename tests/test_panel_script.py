"""``scripts/panel.py``: one row per project with findings per registered rule, baselines kept out
of the panel total, verdicts matched by ``project  path:line  rule``, and the findings JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hp_invariants.registry import RULES

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "panel.py"
FIXTURE = REPO / "tests" / "fixtures" / "undefined-method-call" / "checker" / "self_call_typo.py"


def _rows(table: str) -> dict[str, list[str]]:
    lines = [line for line in table.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def test_panel_table_json_baseline_and_verdicts(tmp_path: Path) -> None:
    panel = tmp_path / "panel"
    flagged = panel / "flagged" / "pkg"
    flagged.mkdir(parents=True)
    (flagged / "model.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    (panel / "flagged" / "PKG-INFO").write_text("Name: flagged\nVersion: 1.2.3\n", encoding="utf-8")
    clean = panel / "clean"
    clean.mkdir()
    (clean / "ok.py").write_text("import torch.nn as nn\n\n\nclass A(nn.Module):\n    pass\n", encoding="utf-8")
    base = panel / "keep"
    base.mkdir()
    (base / "model.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    (panel / "not-a-project").mkdir()  # no Python files: not a project
    verdicts = tmp_path / "verdicts.tsv"
    verdicts.write_text("# comment\nflagged\tpkg/model.py:14\tE9503\tT\tthe typo\n", encoding="utf-8")
    out = tmp_path / "findings.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(panel), "--baseline", "keep", "--mirror", str(tmp_path / "none"),
         "--verdicts", str(verdicts), "-o", str(out), "-j", "1"],
        capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stderr)
    assert list(rows) == ["clean", "flagged", "panel total (2)", "keep (baseline)"]
    for rule in RULES:  # one column per registered rule
        assert rule.rule_id in rows["flagged"]
    assert rows["flagged"]["E9503"] == "1" and rows["flagged"]["version"] == "1.2.3"
    assert rows["flagged"]["true"] == "1" and rows["flagged"]["unjudged"] == "0"
    assert rows["clean"]["files"] == "1" and all(rows["clean"][r.rule_id] == "0" for r in RULES)
    # the baseline's finding is not in the panel total, and is unjudged (no verdict line for it)
    assert rows["panel total (2)"]["E9503"] == "1" and rows["panel total (2)"]["files"] == "2"
    assert rows["keep (baseline)"]["E9503"] == "1" and rows["keep (baseline)"]["unjudged"] == "1"
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["rules"] == [r.rule_id for r in RULES]
    by_name = {p["name"]: p for p in report["projects"]}
    (finding,) = by_name["flagged"]["findings"]
    assert (finding["path"], finding["line"], finding["id"], finding["verdict"]) == ("pkg/model.py", 14, "E9503", "T")
    assert by_name["keep"]["baseline"] is True and by_name["flagged"]["baseline"] is False


def test_a_project_shadowing_the_standard_library_is_still_checked(tmp_path: Path) -> None:
    """Each project is checked from its own folder: a module there named like a standard one (torch
    ships random.py and signal/) must not shadow it, and a run that dies before writing its report is
    a failure (exit 2, the error shown), never a row of zero findings. Found on the installed torch."""
    panel = tmp_path / "panel"
    shadow = panel / "shadow"
    shadow.mkdir(parents=True)
    (shadow / "model.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    (shadow / "signal.py").write_text("raise ImportError('the standard signal module was shadowed')\n",
                                      encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(SCRIPT), str(panel), "--mirror", str(tmp_path / "none"), "-j", "1"],
                          capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _rows(proc.stderr)["shadow"]["E9503"] == "1"
    # a run that writes no report: the script says so and exits 2
    broken = panel / "shadow" / "pyproject.toml"
    broken.write_text("[tool.hp-invariants\n", encoding="utf-8")  # a TOML error: check stops before any report
    proc = subprocess.run([sys.executable, str(SCRIPT), str(panel), "--mirror", str(tmp_path / "none"), "-j", "1"],
                          capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2
    assert "shadow: check exited" in proc.stderr
