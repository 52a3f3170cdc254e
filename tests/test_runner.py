"""The one process pool (:mod:`hp_invariants.runner`): a dead worker is a per-file problem in every
mode, and no worker outlives its parent (a SIGKILL-ed ``fix -j 2`` leaves nothing running)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from hp_invariants import registry, runner
from hp_invariants.cli import main
from hp_invariants.api import Rule

REPO = Path(__file__).resolve().parent.parent
LINUX = sys.platform.startswith("linux")


class KillerRule(Rule):
    """Kills the worker process that checks a file containing ``KILL_ME`` (as the OOM killer would)."""

    rule_id = "E9598"
    symbol = "test-killer"
    summary = "kills its worker (test)"
    prefilter = ("KILL_ME",)

    def check(self, ctx):
        if os.getpid() != PARENT[0]:
            os.kill(os.getpid(), signal.SIGKILL)
        return iter(())


PARENT = [os.getpid()]


@pytest.fixture
def killer(monkeypatch):
    PARENT[0] = os.getpid()
    rule = KillerRule()
    registry.register(rule)
    monkeypatch.setattr(runner, "usable_cores", lambda: 2)  # a pool even on a one-core runner
    try:
        yield rule
    finally:
        registry.unregister(rule)


def _tree(tmp_path: Path, files: int = 12) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("")
    for i in range(files):
        (tmp_path / f"m{i:02}.py").write_text("x = 1\n" if i != 5 else "x = 'KILL_ME'\n")
    return tmp_path


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the pool needs fork")
@pytest.mark.parametrize("command", ["check", "fix"])
def test_dead_worker_is_a_per_file_problem(killer, tmp_path: Path, command: str):
    root = _tree(tmp_path)
    args = [command, "--no-cache", "-j", "2", "--select", killer.rule_id, str(root)]
    if command == "check":
        args[1:1] = ["--format", "json"]
    code, out, _ = _run(*args)
    assert code == 2
    problems = json.loads(out)["problems"] if command == "check" else [
        line for line in out.splitlines() if "F0002" in line]
    text = json.dumps(problems)
    assert "a worker process died" in text and "m05.py" in text
    assert len(problems) == 1  # exactly the file that killed its worker; the others were checked


def test_effective_jobs_caps_at_the_usable_cores(monkeypatch):
    monkeypatch.setattr(runner, "usable_cores", lambda: 2)
    assert runner.effective_jobs(1000) == (2, "-j 1000 lowered to 2: this machine gives the process 2 core(s)")
    assert runner.effective_jobs(0) == (2, "")
    assert runner.effective_jobs(1) == (1, "")
    assert runner.effective_jobs(2, items=1) == (1, "")


def test_parallel_map_keeps_order_and_falls_back_serially():
    items = list(range(50))
    assert runner.parallel_map(lambda x: x * x, items, 2, on_dead=lambda x: -1) == [x * x for x in items]
    assert runner.parallel_map(lambda x: x + 1, [1], 4, on_dead=lambda x: -1) == [2]


SLOW_PLUGIN = '''\
import time
from hp_invariants import registry
from hp_invariants.api import Rule


class Slow(Rule):
    rule_id = "E9597"
    symbol = "test-slow"
    summary = "sleeps (test)"

    def check(self, ctx):
        time.sleep(60)
        return iter(())


registry.register(Slow())
'''


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_no_worker_outlives_a_killed_parent(tmp_path: Path):
    root = _tree(tmp_path / "proj", files=8)
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "slow_plugin.py").write_text(SLOW_PLUGIN)
    code = textwrap.dedent(f"""\
        import sys
        import slow_plugin
        from hp_invariants import runner
        runner.usable_cores = lambda: 2
        from hp_invariants.cli import main
        sys.exit(main(["fix", "--no-cache", "-j", "2", "--select", "E9597", {str(root)!r}]))
        """)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'plugins'}{os.pathsep}{REPO}"}
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline and len(workers) < 2:
            time.sleep(0.2)
            workers = _children(parent.pid)
        assert len(workers) >= 2, "the pool did not start"
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "a worker outlived its parent"
    finally:
        parent.kill()
        for worker in _children(parent.pid):
            os.kill(worker, signal.SIGKILL)
