"""`hp-invariants run`'s command line, and the harness's promise to the linter: no torch outside the ranks.

Usage errors are exit 2 before any rank starts (a missing script, bad flags, a device whose
runtime cannot be imported); `run` is listed by `hp-invariants --help`; importing the CLI does not
import the harness, and importing the harness or the pytest plugin does not import torch (the
plugin is loaded by every pytest run of an environment where hp-invariants is installed, codecheck's
included). None of these tests needs torch.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fixturelib import blocked_torch_env
from hp_invariants.runtime import command

REPO = Path(__file__).resolve().parent.parent


def run_command(capsys, *argv: str) -> tuple[int, str]:
    code = command.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("argv, message", [
    (("--", "no/such/script.py"), "no such script: no/such/script.py"),
    ((), "name the training script"),
    (("--",), "no script after '--'"),
    (("--world-sizes", "0", "--", __file__), "world sizes are positive integers"),
    (("--world-sizes", "1,x", "--", __file__), "world sizes are positive integers"),
    (("--world-sizes", "2,2", "--", __file__), "a world size is repeated"),
    (("--device", "tpu", "--", __file__), "invalid choice: 'tpu'"),
    (("--timeout", "-1", "--", __file__), "must be a positive number"),
    (("--rtol", "nan", "--", __file__), "must be a number >= 0"),
    (("--bogus", "--", __file__), "unrecognized arguments: --bogus"),
    (("-m", "no_such_module_xyz"), "no module named 'no_such_module_xyz'"),
])
def test_usage_errors_exit_2(capsys, argv, message):
    code, output = run_command(capsys, *argv)
    assert code == 2, output
    assert message in output


def test_npu_without_torch_npu_is_a_usage_error(capsys, monkeypatch):
    real = command.importlib.util.find_spec
    monkeypatch.setattr(command.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch_npu" else real(name, *a))
    code, output = run_command(capsys, "--device", "npu", "--", __file__)
    assert code == 2
    assert "--device npu needs torch_npu (Ascend)" in output and "CANN" in output


def test_without_torch_the_ranks_cannot_start(capsys, monkeypatch):
    real = command.importlib.util.find_spec
    monkeypatch.setattr(command.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    code, output = run_command(capsys, "--", __file__)
    assert code == 2 and "the ranks need torch" in output


def test_run_is_listed_and_has_its_help(capsys):
    from hp_invariants.cli import main

    assert main(["--help"]) == 0
    assert "run a training script on N local ranks" in capsys.readouterr().out
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--world-sizes N,M" in out and "--device {cpu,cuda,npu}" in out and "-m MODULE" in out


def test_options_before_the_script_without_a_double_dash(capsys, monkeypatch):
    seen = {}

    def fake_run(target, options):
        seen["target"], seen["options"] = target, options
        raise KeyboardInterrupt  # stop before any rank starts

    monkeypatch.setattr(command.launcher, "run", fake_run)
    code, output = run_command(capsys, "--world-sizes", "1,4", "--timeout", "30", __file__, "--lr", "3")
    assert code == 130 and "interrupted (Ctrl-C)" in output
    assert seen["target"].path == __file__ and list(seen["target"].args) == ["--lr", "3"]
    assert list(seen["options"].world_sizes) == [1, 4] and seen["options"].timeout == 30


def test_nothing_imports_torch_outside_the_ranks(tmp_path: Path):
    code = ("import sys; import hp_invariants.cli; assert 'hp_invariants.runtime' not in sys.modules, 'cli'; "
            "import hp_invariants.runtime.pytest_plugin, hp_invariants.runtime.launcher, "
            "hp_invariants.runtime.command, hp_invariants.runtime.checks, hp_invariants.runtime.rank; "
            "assert 'torch' not in sys.modules, 'torch'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=blocked_torch_env(tmp_path))
    assert proc.returncode == 0, proc.stderr


def test_the_plugin_loads_in_a_pytest_run_without_torch(tmp_path: Path):
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--markers"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=blocked_torch_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "@pytest.mark.world_size(*sizes" in proc.stdout  # registered by the installed plugin
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plain.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=blocked_torch_env(tmp_path))
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr
