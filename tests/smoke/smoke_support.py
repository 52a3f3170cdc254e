"""Helpers of the smoke suite: the ``hp-invariants`` CLI, module loading, rule pairs, backends.

The suite proves at run time, on torch, that each rule's broken shape fails with the error of
the seed report and that the shape rewritten by ``hp-invariants fix`` works. This module never
imports torch, so importing it without torch is harmless.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType


TORCH_MISSING = "torch not installed (pip install hp-invariants[smoke])"
SMOKE_DIR = Path(__file__).resolve().parent
MODULES_DIR = SMOKE_DIR / "modules"
REPO_ROOT = SMOKE_DIR.parent.parent
CLI_TIMEOUT_S = 120


def _cli_command() -> list[str] | None:
    """Return the argv prefix that runs the ``hp-invariants`` CLI of this interpreter.

    ``python -m hp_invariants`` when ``hp_invariants/__main__.py`` exists, else the console
    script installed next to ``sys.executable``; None when neither exists.
    """
    if importlib.util.find_spec("hp_invariants.__main__") is not None:
        return [sys.executable, "-m", "hp_invariants"]
    script = Path(sys.executable).with_name("hp-invariants")
    if script.exists():
        return [str(script)]
    return None


@dataclass
class CliResult:
    """Exit status and merged output of one CLI run."""

    args: list[str]
    returncode: int
    output: str

    def describe(self) -> str:
        """A readable transcript for assertion messages."""
        return f"$ hp-invariants {' '.join(self.args)}\n(exit {self.returncode})\n{self.output}"


def run_cli(*args: str, cwd: Path | None = None) -> CliResult:
    """Run ``hp-invariants ARGS`` in a subprocess and return its exit code and merged output.

    A missing CLI gives exit code 127 and an explanation, so the calling test fails (it never
    skips: the CLI is part of the product under test).
    """
    command = _cli_command()
    if command is None:
        return CliResult(list(args), 127, "the hp-invariants CLI is missing: neither "
                         "hp_invariants/__main__.py nor a console script next to "
                         f"{sys.executable} exists (pip install -e .)")
    env = dict(os.environ)
    env.pop("HP_SMOKE_DEVICE", None)
    proc = subprocess.run(
        command + list(args),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    return CliResult(list(args), proc.returncode, proc.stdout)


def load_module(path: Path) -> ModuleType:
    """Import the file at ``path`` as a fresh module (unique name, not kept in ``sys.modules``)."""
    name = f"hp_smoke_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up while executing
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


@dataclass
class RulePair:
    """A rule's broken smoke module and its copy rewritten by ``hp-invariants fix``.

    ``broken`` is the pristine copy in the work dir, ``fixed`` the copy that ``fix`` rewrote in
    place; ``check_before`` / ``fix_run`` / ``check_after`` are the CLI transcripts.
    """

    rule_ids: tuple[str, ...]
    source: Path
    broken: Path
    fixed: Path
    check_before: CliResult
    fix_run: CliResult
    check_after: CliResult

    def assert_flagged(self) -> None:
        """(a) ``check`` on the broken module exits 1 and names every expected rule."""
        missing = [rule for rule in self.rule_ids if rule not in self.check_before.output]
        assert self.check_before.returncode == 1 and not missing, (
            f"`hp-invariants check` must report {', '.join(self.rule_ids)} on the broken module "
            f"(exit 1); missing: {missing}\n" + self.check_before.describe())

    def assert_fixed_clean(self) -> None:
        """(b) ``fix`` rewrote the module, and ``check`` on the result exits 0."""
        assert self.fix_run.returncode in (0, 1), (
            f"`hp-invariants fix` failed:\n{self.fix_run.describe()}")
        assert self.fixed.read_bytes() != self.source.read_bytes(), (
            f"`hp-invariants fix` left the {'/'.join(self.rule_ids)} module unchanged: the "
            "codemod is missing or did not fire\n" + self.fix_run.describe())
        assert self.check_after.returncode == 0, (
            "`hp-invariants check` must be clean after the fix:\n" + self.check_after.describe())


def make_rule_pair(rule_ids: str | tuple[str, ...], stem: str, workdir: Path,
                   unsafe: bool = False) -> RulePair:
    """Copy ``modules/<stem>_broken.py`` into ``workdir``, check it, fix a second copy, check that.

    ``rule_ids`` is the rule id (or ids) that ``check`` must report on the broken module.
    The fix runs as ``hp-invariants fix [--unsafe-fixes] FILE`` (in place). The work dir gets an
    empty ``pyproject.toml`` so that it is the project root (E9503's class index). Nothing is
    asserted here: the tests call :meth:`RulePair.assert_flagged` and
    :meth:`RulePair.assert_fixed_clean`, so each failure is reported by the test it belongs to.
    """
    source = MODULES_DIR / f"{stem}_broken.py"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "pyproject.toml").write_text("", encoding="utf-8")
    broken = workdir / f"{stem}_broken.py"
    fixed = workdir / f"{stem}_fixed.py"
    shutil.copyfile(source, broken)
    shutil.copyfile(source, fixed)
    check_before = run_cli("check", str(broken), cwd=workdir)
    fix_args = ["fix"] + (["--unsafe-fixes"] if unsafe else []) + [str(fixed)]
    fix_run = run_cli(*fix_args, cwd=workdir)
    check_after = run_cli("check", str(fixed), cwd=workdir)
    if isinstance(rule_ids, str):
        rule_ids = (rule_ids,)
    return RulePair(tuple(rule_ids), source, broken, fixed, check_before, fix_run, check_after)


def dist_backend(device) -> str:
    """The collective backend for ``device``: gloo on CPU, nccl on CUDA, hccl on NPU."""
    return {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}[device.type]
