"""The examples of ``examples/runtime`` under the runtime harness, at world sizes 1 and 2 on CPU.

Each broken example of the seed incident FAILs naming its rule class, at the world sizes where it
breaks (E9502: world size 1 only), with the static finding `hp-invariants check` has on it; each
fixed twin and the FSDP2 training PASS with the global losses agreeing; the loss averaged twice and
the layout-dependent initialisation FAIL the consistency check. The scripts run in forks of this
process (torch imported once); one runs through the real CLI, as the README shows. Each fixed
twin is what `hp-invariants fix` makes of its broken script.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_support import live_children

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "runtime"
RULES = {"e9501": "E9501", "e9502": "E9502", "e9503": "E9503", "e9504": "E9504"}


def _code(path: Path) -> str:
    """A script without its header (the comment line and the module docstring)."""
    text = path.read_text(encoding="utf-8")
    return text[text.index("from __future__"):]


@pytest.mark.parametrize("stem", sorted(RULES))
def test_each_fixed_twin_is_what_fix_makes_of_the_broken_script(stem, tmp_path: Path):
    for name in (f"{stem}_broken.py", "common.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    (tmp_path / "pyproject.toml").write_text("")
    target = tmp_path / f"{stem}_broken.py"
    proc = subprocess.run([sys.executable, "-m", "hp_invariants", "fix", str(target)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _code(target) == _code(EXAMPLES / f"{stem}_fixed.py")


torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")
from hp_invariants.runtime import launcher  # noqa: E402


def run(name: str, *args: str, static: bool = False):
    target = launcher.ScriptTarget(str(EXAMPLES / name), args, start_method="fork")
    report = launcher.run(target, launcher.Options(world_sizes=[1, 2], timeout=120, static_check=static,
                                                   cwd=str(REPO)))
    assert not live_children(), "a forked rank was left behind"
    return report


@pytest.mark.parametrize("stem, failing", [("e9501", [1, 2]), ("e9502", [1]), ("e9503", [1, 2]), ("e9504", [1, 2])])
def test_broken_examples_fail_naming_their_rule_class_and_world_size(stem, failing):
    report = run(f"{stem}_broken.py", static=True)
    rule = RULES[stem]
    for result in report.results:
        if result.world_size in failing:
            assert result.status == "FAIL", report.render()
            assert result.rule["id"] == rule and result.reason.startswith(f"{rule} {result.rule['symbol']}: rank ")
            assert f"examples/runtime/{stem}_broken.py:" in result.rule["static_finding"], result.details
            assert f"explain: hp-invariants explain {rule}" in result.details
        else:
            assert result.status == "PASS", report.render()
    assert report.exit_code == 1
    assert report.summary().startswith(f"hp-invariants run: FAIL: world size {failing[0]}: FAIL ({rule} ")


@pytest.mark.parametrize("name", ["e9501_fixed.py", "e9502_fixed.py", "e9503_fixed.py", "e9504_fixed.py",
                                  "fsdp2_train.py"])
def test_fixed_examples_and_the_fsdp2_training_pass_with_losses_agreeing(name):
    report = run(name)
    assert [r.status for r in report.results] == ["PASS", "PASS"], report.render()
    assert report.consistency.status == "PASS", report.render()
    assert "agrees with world size 1 at 2 step(s)" in report.consistency.reason
    assert "initial parameters equal" in report.consistency.reason
    for result in report.results:
        assert "checks passed: optimizer construction, first forward, first optimizer step" in result.reason, result.reason
    assert report.exit_code == 0


def test_a_loss_averaged_twice_fails_the_consistency_check():
    report = run("loss_averaged_twice.py")
    assert [r.status for r in report.results] == ["PASS", "PASS"]
    assert report.consistency.status == "FAIL" and report.exit_code == 1
    assert report.consistency.reason.startswith("the global loss drifts at step 0: world size 2 ")
    assert "the loss is divided by the world size once too often" in report.consistency.reason


def test_a_layout_dependent_initialisation_is_named():
    report = run("fsdp2_train.py", "--init", "per-shard")
    assert report.consistency.status == "FAIL"
    assert report.consistency.reason.startswith("the initialisation depends on the layout: at optimizer construction")


def test_the_cli_runs_the_readme_command(tmp_path: Path):
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "hp_invariants", "run", "--world-sizes", "1,2", "--json", str(report),
                           "--", "examples/runtime/e9502_broken.py"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("world size 1: FAIL  E9502 shard-gated-reset: rank 0, at optimizer construction: "
                               "2 parameter(s) on the meta device: up.weight, down.weight") for line in lines), lines
    assert any(line.startswith("    static finding: examples/runtime/e9502_broken.py:") for line in lines)
    assert any(line.startswith("world size 2: PASS  2 step(s), global loss ") for line in lines)
    assert lines[-1] == "hp-invariants run: FAIL: world size 1: FAIL (E9502 shard-gated-reset)"
