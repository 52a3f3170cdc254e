"""The runtime harness's faults, each ended cleanly: hang, crash, signals to the launcher, a busy port,
no process group, a rank killed by a signal.

Every test asserts that no process it started is left: the CLI's ranks inherit a marker variable
(found in ``/proc/*/environ``), forked ranks are children of the test process (``/proc/*/stat``).
Scripts that need no collective do not import torch, so their ranks start in a fraction of a second.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from runtime_support import in_process_group, live_children, processes_with_marker, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fault tests read /proc (Linux)")


def cli(tmp_path: Path, *argv: str, marker: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``hp-invariants run ARGV`` with ``marker`` in its environment; (result, seconds)."""
    env = dict(os.environ, HP_TEST_MARKER=marker)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hp_invariants", "run", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - started


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return name


@pytest.fixture
def marker():
    """A unique marker for the processes of one test; none may be left when it ends (a rank whose
    launcher was just killed gets a second to end itself)."""
    value = f"hp-test-{uuid.uuid4().hex}"
    yield value
    wait_until(lambda: not processes_with_marker(value), 2)
    left = processes_with_marker(value)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left behind: {left}"


def test_a_crashing_rank_ends_the_others(tmp_path: Path, marker: str):
    name = script(tmp_path, "crash.py", "import os, time\n"
                                        "if os.environ['RANK'] == '1':\n"
                                        "    raise RuntimeError('rank 1 gives up')\n"
                                        "time.sleep(600)\n")
    proc, seconds = cli(tmp_path, "--world-sizes", "2", "--grace", "1", "--timeout", "120", "--", name, marker=marker)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert seconds < 30, f"the sleeping rank was not ended after the crash ({seconds:.1f} s)"
    assert "world size 2: FAIL  rank 1 raised RuntimeError: rank 1 gives up (at crash.py:3)" in proc.stdout
    assert "rank 0: ended by the harness after rank 1 failed; not in a collective (at crash.py:4 in <module>)" \
        in proc.stdout, proc.stdout


def test_a_rank_killed_by_a_signal_and_one_that_exits_nonzero(tmp_path: Path, marker: str):
    name = script(tmp_path, "die.py", "import os, signal, sys\n"
                                      "if os.environ['WORLD_SIZE'] == '1':\n"
                                      "    os.kill(os.getpid(), signal.SIGKILL)\n"
                                      "sys.exit(3 if os.environ['RANK'] == '1' else 0)\n")
    proc, _ = cli(tmp_path, "--world-sizes", "1,2", "--grace", "1", "--", name, marker=marker)
    assert proc.returncode == 1
    assert "world size 1: FAIL  rank 0 was ended by SIGKILL without a result" in proc.stdout
    assert "world size 2: FAIL  rank 1 exited with code 3" in proc.stdout, proc.stdout


def test_a_script_without_a_process_group_is_reported(tmp_path: Path, marker: str):
    name = script(tmp_path, "alone.py", "print('training alone')\n")
    report = tmp_path / "report.json"
    proc, _ = cli(tmp_path, "--json", str(report), "--", name, marker=marker)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "world size 1: PASS" in proc.stdout
    assert "note: no process group at world size 1" in proc.stdout
    assert "world size 2: ERROR  the script never created a process group: its 2 ranks each ran alone" in proc.stdout
    data = json.loads(report.read_text())
    assert (data["status"], data["exit_code"]) == ("ERROR", 2)
    assert [r["status"] for r in data["results"]] == ["PASS", "ERROR"]


def test_a_script_that_does_not_parse_is_not_checkable(tmp_path: Path, marker: str):
    # a new user's find: it was a FAIL ("rank 0 raised SyntaxError"), exit 1, as if a check had failed
    name = script(tmp_path, "broken.py", "import os\ndef f(:\n    pass\n")
    proc, _ = cli(tmp_path, "--world-sizes", "1", "--", name, marker=marker)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "world size 1: ERROR  rank 0: broken.py does not parse: invalid syntax (line 2); nothing was run" \
        in proc.stdout, proc.stdout


@pytest.mark.parametrize("signum, code, said", [(signal.SIGTERM, 143, "interrupted by signal SIGTERM"),
                                                (signal.SIGINT, 130, "interrupted (Ctrl-C)")])
def test_the_launcher_ends_every_rank_when_it_is_signalled(tmp_path: Path, marker: str, signum, code, said):
    name = script(tmp_path, "sleeper.py", "import time\ntime.sleep(600)\n")
    # as from a terminal: SIGINT not ignored (a background job's children inherit SIG_IGN for it, and
    # Python then installs no KeyboardInterrupt handler)
    launcher = subprocess.Popen([sys.executable, "-m", "hp_invariants", "run", "--world-sizes", "2", "--", name],
                                cwd=tmp_path, env=dict(os.environ, HP_TEST_MARKER=marker),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert wait_until(lambda: len(processes_with_marker(marker)) == 3, 60), "the two ranks did not start"
        launcher.send_signal(signum)
        out, err = launcher.communicate(timeout=20)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == code, out + err
    assert said in err and "every rank was ended" in err


torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
from hp_invariants.runtime import launcher  # noqa: E402


def test_a_hang_in_a_mismatched_collective_ends_at_the_timeout_naming_the_rank(tmp_path: Path, marker: str):
    name = script(tmp_path, "hang.py", "import time\n"
                                       "import torch\n"
                                       "import torch.distributed as dist\n"
                                       "dist.init_process_group('gloo')\n"
                                       "if dist.get_rank() == 1:\n"
                                       "    dist.all_reduce(torch.ones(1))  # rank 0 never joins\n"
                                       "time.sleep(600)\n")
    report = tmp_path / "hang.json"
    timeout = 15
    proc, seconds = cli(tmp_path, "--world-sizes", "2", "--timeout", str(timeout), "--json", str(report), "--", name,
                        marker=marker)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert seconds < timeout + 10, f"{seconds:.1f} s"
    assert "world size 2: FAIL  hang: rank(s) 1 waiting in a collective at the timeout (15 s)" in proc.stdout
    assert "rank 1 was waiting in all_reduce (distributed_c10d.py:" in proc.stdout
    assert "called from hang.py:6 in <module>" in proc.stdout
    assert "rank 0 was not in a collective (at hang.py:7 in <module>)" in proc.stdout, proc.stdout
    data = json.loads(report.read_text())
    (result,) = data["results"]
    assert result["timed_out"] and result["failed_rank"] == 1
    assert [r["ended_by_harness"] for r in result["ranks"]] == [True, True]
    assert any("in all_reduce" in line for line in result["ranks"][1]["stack"])


def _all_reduce_after_rank_1_fails() -> None:
    if dist.get_rank() == 1:
        raise ValueError("rank 1 fails before the collective")
    dist.all_reduce(torch.ones(1))


def _barrier() -> None:
    dist.barrier()


def test_forked_ranks_are_ended_after_a_crash_and_none_is_left():
    started = time.monotonic()
    report = launcher.run_function(_all_reduce_after_rank_1_fails, [2], grace=1.0, timeout=60, static_check=False)
    (result,) = report.results
    assert time.monotonic() - started < 20
    assert result.status == "FAIL" and result.failed_rank == 1
    assert result.reason.startswith("rank 1 raised ValueError: rank 1 fails before the collective")
    assert not live_children()
    for outcome in result.ranks:
        assert not in_process_group(outcome.result["pid"] if outcome.result else -1)


def test_a_busy_port_is_retried(tmp_path: Path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        report = launcher.run_function(_barrier, [1], ports=iter([port]), timeout=60, static_check=False)
    (result,) = report.results
    assert result.status == "PASS", report.render()
    assert result.attempts == 2 and result.port != port
    assert f"port {port} was in use (EADDRINUSE) at the rendezvous: retried on another free port" in result.notes
    assert not live_children()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the device is not absent")
def test_an_absent_device_is_a_harness_error():
    report = launcher.run_function(_barrier, [1], device="cuda", timeout=60, static_check=False)
    (result,) = report.results
    assert result.status == "ERROR" and report.exit_code == 2, report.render()
    assert result.reason.startswith("rank 0: --device cuda: torch.cuda.is_available() is False")
    assert not live_children()
