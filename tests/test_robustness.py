"""Robustness: bad input never crashes a front end, never corrupts a file (docs/robustness.md).

Every bad file gives one per-file problem (path, what, hint) under a stable id, the run goes on with
the other files, and the exit code is 2 only when something could not be checked. The same holds for
``fix`` (the bad file is left byte-identical) and for the pylint plugin (no traceback).
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hp_invariants import engine, fixer, limits
from hp_invariants.registry import RULES, get_rule
from hp_invariants.source import SourceFile
from test_cli import GATED, run_cli

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
FIXED_GATED = fixer.fix_text(engine.session_for_rules(RULES), "g.py", GATED).text
E9502 = get_rule("E9502")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project with one good file that has a finding (``gated.py``) and one clean file."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "gated.py").write_text(GATED)
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


def check_json(*args: str) -> tuple[int, dict, str]:
    code, out, err = run_cli("check", "--no-cache", "--format", "json", *args)
    return code, json.loads(out), err


def assert_only_problem(report: dict, path: Path, problem_id: str, *needles: str) -> dict:
    """Exactly one problem, for ``path``, with ``problem_id`` and a hint; the good file still checked."""
    (problem,) = report["problems"]
    assert problem["path"] == str(path)
    assert problem["id"] == problem_id, problem
    assert problem["hint"], problem
    for needle in needles:
        assert needle in problem["message"], problem
    assert [f["id"] for f in report["findings"]] == ["E9502"]  # gated.py was still checked
    return problem


# ---------------------------------------------------------------------- bad files, one by one
# Files are parsed only when some rule's text prefilter lets them through (docs/robustness.md): the
# parse-level cases carry the rules' trigger words in a comment so that they are parsed.
TRIGGER = b"\n# self.reset_sharded_param() self.modules() x._local_tensor self.m()\n"

BAD_FILES = {
    "syntax_error": (b"def f(:\n    pass\n" + TRIGGER, "E0001", "cannot parse"),
    "invalid_utf8": (b"x = '\xff\xfe'\n", "E0001", "cannot decode"),
    "wrong_cookie": (b"# -*- coding: ascii -*-\nname = 'caf\xc3\xa9'\n", "E0001", "cannot decode"),
    "unknown_cookie": (b"# coding: klingon\nx = 1\n", "E0001", "unknown encoding"),
    "bom_and_latin1_cookie": (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "E0001", "coding cookie or BOM"),
    "utf16_cookie": (b"# coding: utf-16\nx = 1\n", "E0001", "cannot decode"),
    "nul_bytes": (b"x = 1\n\x00\ny = 2\n", "E0001", "NUL"),
    "binary": (bytes(random.Random(7).randrange(256) for _ in range(4096)) + b"\x00", "E0001", "cannot decode"),
    "deep_unary": (b"x = " + b"-" * 100_000 + b"1\n" + TRIGGER, "F0002", "too deeply nested"),
    "too_many_parens": (b"x = " + b"(" * 300 + b"1" + b")" * 300 + b"\n" + TRIGGER, "E0001", "nested parentheses"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_file_is_one_problem_and_the_run_goes_on(tree: Path, name: str):
    raw, problem_id, needle = BAD_FILES[name]
    bad = tree / f"{name}.py"
    bad.write_bytes(raw)
    code, report, err = check_json(str(tree))
    assert code == 2
    assert_only_problem(report, bad, problem_id, needle)
    # fix leaves the bad file byte-identical, fixes the good one, and exits 2
    code, out, err = run_cli("fix", "--no-cache", str(tree))
    assert code == 2, out + err
    assert bad.read_bytes() == raw
    assert (tree / "gated.py").read_text() == FIXED_GATED
    assert f"{bad}:" in out and problem_id in out


def test_text_problem_line_names_path_id_and_hint(tree: Path):
    (tree / "nul.py").write_bytes(b"\x00")
    code, out, err = run_cli("check", "--no-cache", str(tree / "nul.py"))
    assert code == 2
    assert out.startswith(f"{tree / 'nul.py'}:1:1: E0001 syntax-error: cannot decode: ")
    assert "(hint: " in out and "1 could not be checked" in err
    assert ", 0 checked;" in err  # the file that could not be checked is not also counted as checked


def test_summary_counts_checked_files_apart_from_those_that_could_not_be(tree: Path):
    (tree / "broken.py").write_text("def f(:\n")
    code, _, err = run_cli("check", "--no-cache", str(tree))
    assert code == 2
    assert err == "Found 1 finding(s) in 1 file(s), 2 checked; 1 fixable with `hp-invariants fix`; 1 could not be checked.\n", err


def test_bom_file_is_checked_normally(tree: Path):
    (tree / "gated.py").write_bytes(b"\xef\xbb\xbf" + GATED.encode())
    code, report, _ = check_json(str(tree / "gated.py"))
    plain = tree / "plain.py"
    plain.write_text(GATED)
    code_plain, report_plain, _ = check_json(str(plain))
    assert code == code_plain == 1
    assert report["problems"] == []
    assert [(f["line"], f["column"]) for f in report["findings"]] == \
        [(f["line"], f["column"]) for f in report_plain["findings"]]


def test_empty_and_whitespace_files_are_clean(tree: Path):
    (tree / "empty.py").write_bytes(b"")
    (tree / "blank.py").write_bytes(b"\n\n   \n")
    (tree / "comment.py").write_bytes(b"# only a comment")
    (tree / "gated.py").unlink()
    assert run_cli("check", "--no-cache", str(tree)) == (0, "", "Found 0 finding(s) in 0 file(s), 4 checked.\n")


def test_exit_code_is_2_only_when_something_was_not_checked(tree: Path):
    assert run_cli("check", "--no-cache", str(tree))[0] == 1
    (tree / "gated.py").unlink()
    assert run_cli("check", "--no-cache", str(tree))[0] == 0
    (tree / "bad.py").write_bytes(b"\x00")
    assert run_cli("check", "--no-cache", str(tree))[0] == 2


def test_parallel_run_reports_bad_files_the_same_way(tree: Path):
    for name, (raw, _, _) in BAD_FILES.items():
        (tree / f"{name}.py").write_bytes(raw)
    serial = run_cli("check", "--no-cache", "-j", "1", str(tree))
    parallel = run_cli("check", "--no-cache", "-j", "2", str(tree))
    assert serial[0] == parallel[0] == 2
    assert serial[1] == parallel[1]
    assert len(serial[1].splitlines()) == len(BAD_FILES) + 1


# ---------------------------------------------------------------------- huge and deep files
def test_size_messages_in_mib_and_bytes():
    from hp_invariants.source import FileTooLargeError

    assert FileTooLargeError("a.py", 6 * 2**20, 5 * 2**20).strerror == "6 MiB is over the 5 MiB limit"
    assert FileTooLargeError("a.py", int(5.34 * 2**20), 5 * 2**20).strerror == "5.3 MiB is over the 5 MiB limit"
    assert FileTooLargeError("a.py", 300, 200).strerror == "300 bytes is over the 200 bytes limit"
    assert FileTooLargeError("a.py", 2, 1).strerror == "2 bytes is over the 1 byte limit"  # was "1 bytes"


def test_file_over_the_size_limit_is_not_read(tree: Path):
    big = tree / "big.py"
    big.write_text(GATED + "x = 1\n" * 10_000)  # ~60 kB
    code, report, _ = check_json("--max-file-size", "0.05", str(tree))
    assert code == 2
    # a new user's find: a limit under one MiB read "0.0 MiB is over the 9.53674e-07 MiB limit"
    # 0.05 MiB is 52,428.8 bytes: rounded up
    assert_only_problem(report, big, "F0004", f"{big.stat().st_size} bytes is over the 52429 bytes limit")
    code, report, _ = check_json("--max-file-size", "0.1", str(tree))
    assert code == 1 and report["problems"] == [] and len(report["findings"]) == 2
    # fix does not touch it either
    before = big.read_bytes()
    assert run_cli("fix", "--no-cache", "--max-file-size", "0.05", str(tree))[0] == 2
    assert big.read_bytes() == before


def test_a_huge_size_limit_reads_the_file_without_reserving_the_limit(tree: Path):
    # a new user's find: read(limit + 1) set the limit aside at once: --max-file-size 30000 was a MemoryError,
    # 1e20 an OverflowError (internal errors, exit 2)
    from hp_invariants.source import read_source_bytes

    raw, _ = read_source_bytes(str(tree / "gated.py"), 10**20)
    assert raw == GATED.encode()
    code, report, _ = check_json("--max-file-size", "1e14", str(tree))
    assert code == 1 and report["problems"] == [] and [f["id"] for f in report["findings"]] == ["E9502"]


def test_a_time_budget_too_long_to_wait_for_is_no_budget():
    # a new user's find: a budget of 1e10 s overflowed the watchdog's wait (its thread died with an
    # OverflowError on every run of the pylint plugin)
    from hp_invariants.limits import budgeted, time_budget

    assert [budgeted(s) for s in (5, 0.5, 0, -1, None, 1e10, float("inf"), float("nan"))] == \
        [True, True, False, False, False, False, False, False]
    with time_budget(1e10) as armed:
        assert armed is False


def test_a_size_limit_under_one_byte_is_a_limit_not_none(tree: Path):
    # rounded down, a limit under one byte was 0, which means "no limit": every file was read
    from hp_invariants.config import mib_to_bytes

    assert (mib_to_bytes(0), mib_to_bytes(1e-7), mib_to_bytes(1)) == (0, 1, 2**20)
    assert mib_to_bytes(1e308) == 0  # infinite once in bytes: no limit (was an OverflowError, an internal error)
    files = sorted(str(p) for p in tree.rglob("*.py"))
    for args in (["--max-file-size", "0.0000001"], []):
        if not args:
            (tree / "pyproject.toml").write_text("[tool.hp-invariants]\nmax-file-size = 1e-7\n")
        code, report, _ = check_json(*args, str(tree))
        assert code == 2 and report["findings"] == []
        assert sorted(p["path"] for p in report["problems"]) == files
        assert all(p["id"] == "F0004" and p["message"].endswith("over the 1 byte limit") for p in report["problems"])


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="peak memory read from /proc (Linux)")
def test_50mb_generated_file_finishes_fast_with_bounded_memory(tree: Path):
    big = tree / "generated.py"
    line = b"TABLE_%07d = (1.0, 2.0, 3.0, 'padding to make the generated line longer')\n"
    with open(big, "wb") as handle:
        for start in range(0, 700_000, 10_000):
            handle.write(b"".join(line % i for i in range(start, start + 10_000)))
    assert big.stat().st_size > 50 * 2**20
    script = textwrap.dedent(f"""\
        import json, sys, time
        from hp_invariants.cli import main
        start = time.monotonic()
        code = main(["check", "--no-cache", "--format", "json", {str(tree)!r}])
        # peak resident memory of this process image (ru_maxrss would include the forking parent's)
        peak = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
        print(json.dumps({{"code": code, "seconds": time.monotonic() - start, "rss_mb": peak / 1024}}),
              file=sys.stderr)
        """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    stats = json.loads(proc.stderr.strip().splitlines()[-1])
    report = json.loads(proc.stdout)
    assert stats["code"] == 2
    assert_only_problem(report, big, "F0004")
    assert stats["seconds"] < 10
    assert stats["rss_mb"] < 200, stats  # the 50 MB were never read


def test_long_operator_chain_is_checked_on_the_deep_stack(tree: Path):
    # 6000 nested BinOps: ast.parse raises RecursionError at the default limit; the deep retry checks it
    deep = tree / "deep.py"
    deep.write_text("TOTAL = " + " + ".join(["1"] * 6000) + "\n" + GATED)
    if (3, 11) <= sys.version_info < (3, 13):  # the parsers of 3.9, 3.10 and 3.13+ take it in stride
        with pytest.raises(RecursionError):
            engine.parse(SourceFile.from_bytes("d.py", deep.read_bytes()))
    code, report, _ = check_json(str(deep))
    assert code == 1 and report["problems"] == []
    assert [f["line"] for f in report["findings"]] == [1 + check_json(str(tree / "gated.py"))[1]["findings"][0]["line"]]


def _recursive(depth: int | None):
    """A stand-in rule check that recurses ``depth`` frames deep (``None``: forever) and finds nothing."""

    def check(rule, ctx):
        def down(n):
            return 0 if n == 0 else 1 + down(n - 1)

        down(depth if depth is not None else 10**9)
        return []

    return check


def test_rule_recursion_deeper_than_the_default_limit_is_retried(tree: Path, monkeypatch):
    monkeypatch.setattr(type(E9502), "check", _recursive(20_000))
    code, report, _ = check_json(str(tree))
    assert code == 0 and report["problems"] == []


def test_unbounded_rule_recursion_is_one_problem(tree: Path, monkeypatch):
    monkeypatch.setattr(type(E9502), "check", _recursive(None))
    code, report, _ = check_json(str(tree))
    assert code == 2
    (problem,) = report["problems"]  # clean.py has nothing a rule could match: not analysed at all
    assert problem["path"] == str(tree / "gated.py")
    assert problem["id"] == "F0002" and "too deeply nested" in problem["message"]
    assert sys.getrecursionlimit() < limits.DEEP_RECURSION_LIMIT  # restored


def test_rule_crash_is_an_internal_error_problem(tree: Path, monkeypatch):
    def boom(rule, ctx):
        raise KeyError("oops")

    monkeypatch.setattr(type(E9502), "check", boom)
    code, report, _ = check_json(str(tree))
    assert code == 2
    assert {p["id"] for p in report["problems"]} == {"F0002"}
    assert all("internal error: KeyError" in p["message"] for p in report["problems"])


# ---------------------------------------------------------------------- the file system
def test_symlink_loops_do_not_hang_or_crash(tree: Path):
    sub = tree / "sub"
    sub.mkdir()
    os.symlink("..", sub / "loop")                  # a folder pointing to its parent's parent (tree)
    os.symlink(".", sub / "here")                   # a folder pointing to itself
    os.symlink("self.py", tree / "self.py")         # a file pointing to itself
    os.symlink("missing.py", tree / "dangling.py")  # a file pointing nowhere
    code, report, _ = check_json(str(tree))
    assert code == 2
    problems = {Path(p["path"]).name: p for p in report["problems"]}
    assert set(problems) == {"self.py", "dangling.py"}
    assert "symbolic links" in problems["self.py"]["message"] and problems["self.py"]["id"] == "F0001"
    assert "No such file" in problems["dangling.py"]["message"]
    assert [Path(f["path"]).name for f in report["findings"]] == ["gated.py"]  # once, not through loop/
    # naming the loops explicitly is just as safe
    code, report, _ = check_json(str(sub / "loop"), str(sub / "here"), str(tree / "self.py"))
    assert code == 2 and sorted(Path(p["path"]).name for p in report["problems"]) == ["dangling.py", "self.py"]
    assert [Path(f["path"]).name for f in report["findings"]] == ["gated.py"]


def test_a_symlinked_file_and_a_stub_in_the_walk(tree: Path):
    """New users' finds: a symlink to a file of the walk was checked (and fixed) twice, and a stub
    (.pyi), which never runs, was checked: the link is the same file (checked once, under the first
    path in sorted order); a stub is checked only when named."""
    (tree / "my dir").mkdir()
    os.symlink(tree / "gated.py", tree / "my dir" / "link.py")
    (tree / "stub.pyi").write_text(GATED)
    code, report, _ = check_json(str(tree))
    assert code == 1 and [Path(f["path"]).name for f in report["findings"]] == ["gated.py"]
    code, report, _ = check_json(str(tree / "stub.pyi"))
    assert code == 1 and [Path(f["path"]).name for f in report["findings"]] == ["stub.pyi"]
    code, out, err = run_cli("fix", "--no-cache", "--diff", str(tree))
    assert out.count("+++ ") == 1 and "would fix 1 finding(s) in 1 file(s)" in err


def test_folder_named_like_a_python_file(tree: Path):
    pkg = tree / "pkg.py"
    pkg.mkdir()
    (pkg / "inner.py").write_text(GATED)
    code, report, _ = check_json(str(tree))
    assert code == 1 and report["problems"] == []
    assert sorted(Path(f["path"]).name for f in report["findings"]) == ["gated.py", "inner.py"]
    assert check_json(str(pkg))[0] == 1


def test_fifo_named_py_does_not_hang(tree: Path):
    os.mkfifo(tree / "pipe.py")
    proc = subprocess.run([sys.executable, "-m", "hp_invariants", "check", "--no-cache", str(tree)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"{tree / 'pipe.py'}:1:1: F0001 fatal: cannot read: not a regular file" in proc.stdout
    assert "E9502" in proc.stdout


def _deny(monkeypatch, victim: Path) -> None:
    real_open = os.open

    def fake_open(path, flags, *args, **kwargs):
        if os.fspath(path) == str(victim):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)


def test_unreadable_file_simulated(tree: Path, monkeypatch):
    """Meaningful as root too (root reads chmod 000 files): the read itself is made to fail."""
    locked = tree / "locked.py"
    locked.write_text(GATED)
    _deny(monkeypatch, locked)
    code, report, _ = check_json(str(tree))
    assert code == 2
    assert_only_problem(report, locked, "F0001", "cannot read: Permission denied")
    code, out, _ = run_cli("fix", "--no-cache", str(tree))
    assert code == 2 and "Permission denied" in out
    assert locked.read_text() == GATED and (tree / "gated.py").read_text() == FIXED_GATED


@pytest.mark.skipif(IS_ROOT or sys.platform == "win32", reason="root can read a chmod 000 file")
def test_unreadable_file_real_chmod(tree: Path):
    locked = tree / "locked.py"
    locked.write_text(GATED)
    locked.chmod(0)
    try:
        code, report, _ = check_json(str(tree))
        assert code == 2
        assert_only_problem(report, locked, "F0001", "Permission denied")
    finally:
        locked.chmod(0o644)


def test_file_deleted_between_discovery_and_reading(tree: Path, monkeypatch):
    doomed = tree / "doomed.py"
    doomed.write_text(GATED)
    real = engine.iter_python_files

    def discover_then_delete(paths, config):
        files, problems = real(paths, config)
        doomed.unlink()  # deleted after the walk listed it, before it is read
        return files, problems

    monkeypatch.setattr(engine, "iter_python_files", discover_then_delete)
    code, report, _ = check_json(str(tree))
    assert code == 2
    assert_only_problem(report, doomed, "F0001", "No such file")


def test_file_name_with_undecodable_bytes_is_printed(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    name = os.fsdecode(b"bad\xff.py")
    (tmp_path / name).write_bytes(b"def f(:\n")
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    proc = subprocess.run([sys.executable, "-m", "hp_invariants", "check", "--no-cache", str(tmp_path)],
                          capture_output=True, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert b"E0001 syntax-error" in proc.stdout and b"bad\\xff.py" in proc.stdout  # more: tests/test_output.py


# ---------------------------------------------------------------------- the time budget
def _slow_on(name: str, swallow: bool = False):
    """A rule check that spins (pure Python, like a pathological rule) on files called ``name``."""

    def check(rule, ctx):
        if os.path.basename(ctx.path) == name:
            end = time.thread_time() + 30  # 30 s of CPU: far beyond any budget of these tests
            while time.thread_time() < end:
                try:
                    sum(range(1000))
                except Exception:  # noqa: BLE001 - a rule that swallows everything
                    if not swallow:
                        raise
        return []

    return check


@pytest.mark.parametrize("swallow", [False, True], ids=["plain", "rule-swallows-exceptions"])
def test_slow_file_is_skipped_after_the_time_budget(tree: Path, monkeypatch, swallow: bool):
    (tree / "slow.py").write_text(GATED)
    original = type(E9502).check
    slow = _slow_on("slow.py", swallow)
    monkeypatch.setattr(type(E9502), "check", lambda rule, ctx: slow(rule, ctx) or original(rule, ctx))
    start = time.process_time()  # CPU, not wall: a loaded machine must not fail this test
    code, report, _ = check_json("--timeout-per-file", "0.3", str(tree))
    assert time.process_time() - start < 5
    assert code == 2
    problem = assert_only_problem(report, tree / "slow.py", "F0003", "time budget of 0.3 s")
    assert "timeout-per-file" in problem["hint"]
    assert signal.getsignal(signal.SIGPROF) in (signal.SIG_DFL, None)  # handler restored
    assert signal.getitimer(signal.ITIMER_PROF)[0] == 0


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_slow_file_in_the_early_analysis_is_skipped_not_a_crash(tree: Path, monkeypatch, jobs: str):
    """A new user's find: a file over its budget in a rule the project build runs early (E9501, on the
    tree the build parsed) raised AnalysisTimeout, a BaseException, out of the whole build: a
    traceback, exit 1, and the other files' findings lost. It is F0003 for that file (the check runs
    the rule again under the file's budget), the others are checked."""
    (tree / "slow.py").write_text(GATED + "\n\ndef bind(p, t):\n    p._local_tensor = t.detach()\n")  # E9501's prefilter
    e9501 = get_rule("E9501")
    original = type(e9501).check
    slow = _slow_on("slow.py")
    monkeypatch.setattr(type(e9501), "check", lambda rule, ctx: slow(rule, ctx) or original(rule, ctx))
    start = time.process_time()
    code, report, _ = check_json("-j", jobs, "--timeout-per-file", "0.3", str(tree))
    assert time.process_time() - start < 5
    assert code == 2 and [p["id"] for p in report["problems"]] == ["F0003"]
    assert report["problems"][0]["path"] == str(tree / "slow.py")
    assert [(f["path"], f["id"]) for f in report["findings"]] == [(str(tree / "gated.py"), "E9502")]


def test_slow_file_in_parallel_workers(tree: Path, monkeypatch):
    (tree / "slow.py").write_text(GATED)
    monkeypatch.setattr(type(E9502), "check", _slow_on("slow.py"))
    start = time.monotonic()
    code, report, _ = check_json("-j", "2", "--timeout-per-file", "0.3", str(tree))
    assert time.monotonic() - start < 25  # without the budget: 30 s of CPU in the worker
    assert code == 2 and [p["id"] for p in report["problems"]] == ["F0003"]


def test_slow_file_is_left_untouched_by_fix(tree: Path, monkeypatch):
    slow = tree / "slow.py"
    slow.write_text(GATED)
    original = type(E9502).check
    spin = _slow_on("slow.py")
    monkeypatch.setattr(type(E9502), "check", lambda rule, ctx: spin(rule, ctx) or original(rule, ctx))
    code, out, _ = run_cli("fix", "--no-cache", "--timeout-per-file", "0.3", str(tree))
    assert code == 2 and "F0003 analysis-timeout" in out
    assert slow.read_text() == GATED
    assert (tree / "gated.py").read_text() == FIXED_GATED


def _spin(seconds: float) -> None:
    """Burn ``seconds`` of this thread's CPU time (pure Python, like a slow rule)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(1000))


def test_timeout_zero_disables_the_budget(tree: Path, monkeypatch):
    def dawdle(rule, ctx):
        _spin(0.2)
        return []

    monkeypatch.setattr(type(E9502), "check", dawdle)
    assert run_cli("check", "--no-cache", "--timeout-per-file", "0", str(tree / "gated.py"))[0] == 0
    assert run_cli("check", "--no-cache", "--timeout-per-file", "0.05", str(tree / "gated.py"))[0] == 2


def test_timeout_also_stops_the_deep_stack_retry(tree: Path, monkeypatch):
    def deep_then_spin(rule, ctx):
        def down(n):
            if n == 0:
                while True:
                    pass
            return down(n - 1)

        down(5000)

    monkeypatch.setattr(type(E9502), "check", deep_then_spin)
    start = time.process_time()  # this process and its deep-stack thread, CPU only
    code, report, _ = check_json("--timeout-per-file", "0.5", str(tree / "gated.py"))
    assert time.process_time() - start < 5
    assert code == 2 and [p["id"] for p in report["problems"]] == ["F0003"]


def test_time_budget_only_in_the_main_thread_and_leaves_other_timers_alone():
    seen = []
    worker = threading.Thread(target=lambda: seen.append(limits.time_budget(1).__enter__()))
    worker.start()
    worker.join()
    assert seen == [False]
    # someone else's CPU-time timer (a sampling profiler, say): not ours to replace
    signal.setitimer(signal.ITIMER_PROF, 100)
    previous = signal.signal(signal.SIGPROF, lambda *a: None)
    try:
        with limits.time_budget(0.01) as armed:
            assert armed is False
        assert signal.getitimer(signal.ITIMER_PROF)[0] > 99
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
    # wall-clock and virtual timers are someone else's business: armed beside them, left untouched
    alarm = signal.signal(signal.SIGALRM, lambda *a: None)
    signal.setitimer(signal.ITIMER_REAL, 100)
    signal.setitimer(signal.ITIMER_VIRTUAL, 100)
    try:
        with limits.time_budget(5) as armed:
            assert armed is True
            assert signal.getitimer(signal.ITIMER_PROF)[0] == 0  # the budget arms no interval timer
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 99
        assert signal.getitimer(signal.ITIMER_VIRTUAL)[0] > 99
        assert signal.getitimer(signal.ITIMER_PROF)[0] == 0
        assert signal.getsignal(signal.SIGALRM) is not signal.SIG_DFL  # not touched either
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGALRM, alarm)


def test_previous_sigprof_handler_is_restored():
    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGPROF, mine)
    try:
        with limits.time_budget(5) as armed:
            assert armed is True and signal.getsignal(signal.SIGPROF) is not mine
        assert signal.getsignal(signal.SIGPROF) is mine
        with pytest.raises(limits.AnalysisTimeout):
            with limits.time_budget(0.05):
                _spin(5)
        assert signal.getsignal(signal.SIGPROF) is mine
    finally:
        signal.signal(signal.SIGPROF, previous)


def test_a_short_budget_after_a_long_one_still_fires_on_time():
    """The watchdog sleeps as long as the last budget allows; a shorter one must wake it."""
    with limits.time_budget(100):
        _spin(0.01)
    for budget in (0.05, 0.2):
        start = time.thread_time()
        with pytest.raises(limits.AnalysisTimeout):
            with limits.time_budget(budget):
                _spin(5)
        assert budget <= time.thread_time() - start < budget + 0.5


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_the_budget_watchdog_leaves_no_thread_behind_at_a_fork():
    """The ``-j`` pool forks after the parent used budgets (the class index): the idle watchdog thread
    is stopped first, so the fork is single-threaded (Python 3.12+ warns otherwise)."""
    import warnings

    with limits.time_budget(5):
        _spin(0.01)
    watchdogs = [t for t in threading.enumerate() if t.name == "hp-invariants-budget"]
    assert watchdogs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pid = os.fork()
        if pid == 0:  # the child: a budget still works there
            try:
                with limits.time_budget(0.05):
                    _spin(5)
                os._exit(1)
            except limits.AnalysisTimeout:
                os._exit(0)
            finally:
                os._exit(2)
    assert not [w for w in caught if "multi-threaded" in str(w.message)]
    assert not any(t.is_alive() for t in watchdogs)
    assert os.waitpid(pid, 0)[1] == 0
    with limits.time_budget(5) as armed:  # and in the parent it starts again
        assert armed


def _wait_on(name: str, how: str):
    """A rule check that only waits, without using the CPU, on files called ``name``."""

    def check(rule, ctx):
        if os.path.basename(ctx.path) == name:
            if how == "sleep":
                time.sleep(1.0)
            else:  # blocked on a lock that another thread holds for a second
                lock = threading.Lock()
                lock.acquire()
                threading.Timer(1.0, lock.release).start()
                lock.acquire()
                lock.release()
        return []

    return check


@pytest.mark.parametrize("how", ["sleep", "blocked"])
def test_a_file_that_only_waits_is_not_timed_out_but_a_spinning_one_is(tree: Path, monkeypatch, how: str):
    """The budget is CPU time: 1 s of waiting under a 0.3 s budget is no timeout; 0.3 s of work is."""
    (tree / "waits.py").write_text(GATED)
    (tree / "spins.py").write_text(GATED)
    original = type(E9502).check
    wait, spin = _wait_on("waits.py", how), _slow_on("spins.py")
    monkeypatch.setattr(type(E9502), "check",
                        lambda rule, ctx: wait(rule, ctx) or spin(rule, ctx) or original(rule, ctx))
    start = time.monotonic()
    code, report, _ = check_json("--timeout-per-file", "0.3", str(tree))
    assert time.monotonic() - start >= 1.0  # it really waited
    assert code == 2
    assert [(Path(p["path"]).name, p["id"]) for p in report["problems"]] == [("spins.py", "F0003")]
    assert sorted(Path(f["path"]).name for f in report["findings"]) == ["gated.py", "waits.py"]


class _CountingPool:
    """Wraps ``ProcessPoolExecutor``: records the worker count asked for and the processes started."""

    asked: list[int] = []
    started: list[int] = []

    def __init__(self, real):
        self.real = real

    def __call__(self, *args, **kwargs):
        pool = self.real(*args, **kwargs)
        _CountingPool.asked.append(kwargs.get("max_workers", args[0] if args else None))
        real_shutdown = pool.shutdown

        def shutdown(*a, **k):
            _CountingPool.started.append(len(getattr(pool, "_processes", None) or {}))
            return real_shutdown(*a, **k)

        pool.shutdown = shutdown
        return pool


def _record_worker_pids(log: Path):
    """A rule check that appends the pid of the process analysing each file to ``log``."""
    original = type(E9502).check

    def check(rule, ctx):
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        return original(rule, ctx)

    return check


def test_jobs_far_above_the_core_count_starts_at_most_one_process_per_core(tmp_path: Path, monkeypatch):
    """Issue 12 item 4: ``check -j 1000`` on many files: at most one worker per usable core, a note
    on stderr, every file checked, no F0003."""
    import concurrent.futures

    from hp_invariants import runner

    (tmp_path / "pyproject.toml").write_text("")
    n = 120
    for i in range(n):
        (tmp_path / f"m{i:03d}.py").write_text(f"# file {i}\n{GATED}")
    log = tmp_path.parent / f"{tmp_path.name}-pids.txt"
    monkeypatch.setattr(type(E9502), "check", _record_worker_pids(log))
    _CountingPool.asked, _CountingPool.started = [], []
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor",
                        _CountingPool(concurrent.futures.ProcessPoolExecutor))
    cores = runner.usable_cores()
    code, out, err = run_cli("check", "--no-cache", "--format", "json", "-j", "1000", str(tmp_path))
    report = json.loads(out)
    assert code == 1, err
    assert report["problems"] == []  # no false analysis-timeout (nor anything else)
    assert len(report["findings"]) == n
    assert f"-j 1000 lowered to {cores}" in err
    pids = set(log.read_text().split())
    assert os.getpid() not in {int(p) for p in pids} or cores == 1
    assert len(pids) <= cores
    if cores > 1:
        assert _CountingPool.asked and max(_CountingPool.asked) <= cores
        assert max(_CountingPool.started) <= cores


def test_contention_never_produces_a_timeout(tmp_path: Path, monkeypatch):
    """Four times more workers than cores, each file 0.15 s of CPU under a 0.5 s budget: a file may
    wait well over 0.5 s of wall time for a core, but its CPU time stays far below the budget."""
    from hp_invariants import runner

    (tmp_path / "pyproject.toml").write_text("")
    cores = runner.usable_cores()
    workers = 4 * cores
    for i in range(2 * workers):
        (tmp_path / f"m{i:03d}.py").write_text(GATED)
    original = type(E9502).check

    def busy(rule, ctx):
        _spin(0.15)
        return original(rule, ctx)

    monkeypatch.setattr(type(E9502), "check", busy)
    monkeypatch.setattr(runner, "usable_cores", lambda: workers)  # let -j overcommit the machine
    start = time.monotonic()
    code, report, _ = check_json("-j", str(workers), "--timeout-per-file", "0.5", str(tmp_path))
    wall = time.monotonic() - start
    assert report["problems"] == [], f"{wall:.1f} s wall"
    assert code == 1 and len(report["findings"]) == 2 * workers


def test_waiting_in_the_deep_stack_retry_is_not_counted(tree: Path, monkeypatch):
    """The deep-stack thread's budget is that thread's CPU time, not the time its join takes."""
    def deep_then_wait(rule, ctx):
        def down(n):
            if n == 0:
                time.sleep(1.0)
                return 0
            return 1 + down(n - 1)

        down(5000)  # over the default recursion limit: retried on the deep stack
        return []

    monkeypatch.setattr(type(E9502), "check", deep_then_wait)
    code, report, _ = check_json("--timeout-per-file", "0.3", str(tree / "gated.py"))
    assert code == 0 and report["problems"] == []


# ---------------------------------------------------------------------- safe writes
def test_file_changed_on_disk_while_fixing_is_not_overwritten(tree: Path, monkeypatch):
    target = tree / "gated.py"
    real_fix = fixer.fix_source

    def fix_while_someone_edits(source, *args, **kwargs):
        outcome = real_fix(source, *args, **kwargs)
        target.write_text(GATED + "# edited meanwhile\n")
        return outcome

    monkeypatch.setattr(fixer, "fix_source", fix_while_someone_edits)
    code, out, _ = run_cli("fix", "--no-cache", str(target))
    assert code == 2 and "changed on disk since it was read; not overwritten" in out
    assert target.read_text() == GATED + "# edited meanwhile\n"


def test_same_size_same_mtime_change_is_still_detected(tree: Path, monkeypatch):
    target = tree / "gated.py"
    real_fix = fixer.fix_source
    edited = GATED.replace("_done", "_DONE")

    def sneaky_edit(source, *args, **kwargs):
        outcome = real_fix(source, *args, **kwargs)
        info = target.stat()
        target.write_text(edited)
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))  # size and mtime look unchanged
        return outcome

    monkeypatch.setattr(fixer, "fix_source", sneaky_edit)
    assert run_cli("fix", "--no-cache", str(target))[0] == 2
    assert target.read_text() == edited


def test_read_only_file_is_not_overwritten_even_as_root(tree: Path):
    target = tree / "gated.py"
    target.chmod(0o444)
    code, out, _ = run_cli("fix", "--no-cache", str(target))
    assert code == 2 and "read-only; not overwritten" in out
    assert target.read_text() == GATED


@pytest.mark.parametrize("failure", ["mkstemp", "fsync", "replace"])
def test_write_failure_leaves_the_file_and_no_temp(tree: Path, monkeypatch, failure: str):
    def fail(*args, **kwargs):
        raise OSError(errno.ENOSPC if failure != "mkstemp" else errno.EACCES,
                      "No space left on device" if failure != "mkstemp" else "Permission denied")

    target = {"mkstemp": (fixer.tempfile, "mkstemp"), "fsync": (os, "fsync"), "replace": (os, "replace")}[failure]
    monkeypatch.setattr(*target, fail)
    code, out, _ = run_cli("fix", "--no-cache", str(tree))
    assert code == 2 and "cannot write: " in out
    monkeypatch.undo()
    assert (tree / "gated.py").read_text() == GATED
    assert sorted(p.name for p in tree.iterdir()) == ["clean.py", "gated.py", "pyproject.toml"]


def test_fix_through_a_symlink_keeps_the_symlink(tree: Path):
    real = tree / "real"
    real.mkdir()
    (tree / "gated.py").rename(real / "gated.py")
    os.symlink(real / "gated.py", tree / "link.py")
    assert run_cli("fix", "--no-cache", str(tree / "link.py"))[0] == 0
    assert (tree / "link.py").is_symlink()
    assert (real / "gated.py").read_text() == FIXED_GATED


@pytest.mark.skipif(not IS_ROOT, reason="only root can give a file to another owner")
def test_fix_keeps_owner_and_group(tree: Path):
    target = tree / "gated.py"
    os.chown(target, 1234, 4321)
    assert run_cli("fix", "--no-cache", str(target))[0] == 0
    info = target.stat()
    assert (info.st_uid, info.st_gid) == (1234, 4321)


def test_stale_temp_files_of_a_dead_run_are_removed(tree: Path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tree / f".hp-invariants-{dead}-abc123.tmp"
    live = tree / f".hp-invariants-{os.getpid()}-def456.tmp"
    other = tree / ".hp-invariants-notes.tmp"
    for path in (stale, live, other):
        path.write_text("partial")
    assert run_cli("fix", "--no-cache", "--diff", str(tree))[0] == 1
    assert stale.exists()  # --diff writes nothing, removes nothing
    code, _, err = run_cli("fix", "--no-cache", str(tree))
    assert code == 0 and f"removed {stale}" in err
    assert not stale.exists() and live.exists() and other.exists()


def _kill_fix_mid_run(folder: Path, first: Path, rng: random.Random, span: float | None = None) -> float:
    """Run ``fix`` on ``folder``; once ``first`` is written, kill it after a random part of ``span``
    seconds (``None``: let it finish). Return the seconds from the first write to the end."""
    proc = subprocess.Popen([sys.executable, "-m", "hp_invariants", "fix", "--no-cache", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while first.read_bytes() == ORIGINAL(0) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)  # wait until writing has started...
    started = time.monotonic()
    if span is not None:
        time.sleep(rng.uniform(0.0, span))  # ...then kill at a random point of it
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    return time.monotonic() - started


def ORIGINAL(i: int) -> bytes:
    return f"# file {i}\n{GATED}".encode()


def FIXED(i: int) -> bytes:
    return f"# file {i}\n{FIXED_GATED}".encode()


def test_sigkill_mid_fix_leaves_every_file_old_or_new(tmp_path: Path):
    folder = tmp_path / "many"
    folder.mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    n = 300
    rng = random.Random(int(os.environ.get("HP_KILL_SEED", "20240")))
    saw_partial = False
    # how long writing takes on this machine (the kills must land inside it, however fast it is)
    for i in range(n):
        (folder / f"m{i:03d}.py").write_bytes(ORIGINAL(i))
    span = 0.8 * _kill_fix_mid_run(folder, folder / "m000.py", rng)
    for _trial in range(3):
        for i in range(n):
            (folder / f"m{i:03d}.py").write_bytes(ORIGINAL(i))
        _kill_fix_mid_run(folder, folder / "m000.py", rng, span)
        states = []
        for i in range(n):
            data = (folder / f"m{i:03d}.py").read_bytes()
            assert data in (ORIGINAL(i), FIXED(i)), f"m{i:03d}.py is neither the old nor the new version"
            states.append(data == FIXED(i))
        saw_partial |= 0 < sum(states) < n
        leftovers = [p.name for p in folder.iterdir() if not p.name.endswith(".py")]
        assert all(name.startswith(".hp-invariants-") and name.endswith(".tmp") for name in leftovers), leftovers
        assert len(leftovers) <= 1
        assert len(list(folder.iterdir())) == n + len(leftovers)
        # the next run finishes the job and removes what the killed one left
        code, out, err = run_cli("fix", "--no-cache", str(folder))
        assert code == 0, out + err
        assert all((folder / f"m{i:03d}.py").read_bytes() == FIXED(i) for i in range(n))
        assert sorted(p.name for p in folder.iterdir()) == [f"m{i:03d}.py" for i in range(n)]
    assert saw_partial, "no kill landed mid-run: the test did not test anything"


# ---------------------------------------------------------------------- configuration errors
@pytest.mark.parametrize("body, needle", [
    ("[tool.hp-invariants\nselect = 1\n", "cannot read configuration"),  # invalid TOML
    ("tool = 3\n", "'tool' must be a table"),
    ('[tool]\nhp-invariants = "yes"\n', "must be a table"),
    ("[tool.hp-invariants]\nlocal-tensor-attrs = 3\n", "'local-tensor-attrs' must be a list of strings"),
    ("[tool.hp-invariants]\nwrap-markers = ['_ok', '[unclosed']\n", "'wrap-markers': bad regular expression '[unclosed'"),
    ("[tool.hp-invariants]\ntimeout-per-file = 'soon'\n", "'timeout-per-file' must be a finite number >= 0"),
    ("[tool.hp-invariants]\nmax-file-size = -1\n", "'max-file-size' must be a finite number >= 0"),
    ("[tool.hp-invariants]\ntimeout-per-file = true\n", "'timeout-per-file' must be a finite number >= 0"),
    # TOML's inf and nan: `max-file-size = inf` was an internal error (OverflowError), as the CLI refuses it
    ("[tool.hp-invariants]\nmax-file-size = inf\n", "'max-file-size' must be a finite number >= 0, got inf"),
    ("[tool.hp-invariants]\nmax-file-size = nan\n", "'max-file-size' must be a finite number >= 0, got nan"),
    ("[tool.hp-invariants]\ntimeout-per-file = inf\n", "'timeout-per-file' must be a finite number >= 0"),
    ("[tool.hp-invariants]\nselect = ['E9502', 'shard-gated-rest']\n", "unknown rule 'shard-gated-rest'"),
    ("[tool.hp-invariants]\nExclude = []\n", "unknown key 'Exclude'"),
    # a new user's find: a misspelled table name was silently ignored (all rules ran)
    ("[tool.hp_invariants]\nselect = ['E9501']\n", "[tool.hp_invariants] is not read (did you mean [tool.hp-invariants]?)"),
    ("[tool.hpinvariant]\nselect = ['E9501']\n", "[tool.hpinvariant] is not read"),
    # a new user's find: the error did not say which per-file-ignores entry named the unknown rule
    ("[tool.hp-invariants.per-file-ignores]\n'tests/*' = ['E9503']\n'a/*' = ['E95O2']\n",
     "per-file-ignores.'a/*': unknown rule 'E95O2'"),
    # empty codes: "" is a prefix of every id, so `ignore = [""]` turned every rule off, silently
    ("[tool.hp-invariants]\nignore = ['']\n", "ignore: an empty rule code"),
    ("[tool.hp-invariants]\nselect = ['E9501', '']\n", "select: an empty rule code"),
    ("[tool.hp-invariants.per-file-ignores]\n'tests/*' = ['']\n", "per-file-ignores.'tests/*': an empty rule code"),
    ("[tool.hp-invariants]\nselect = []\n", "'select' names no rule"),
    ("[tool.hp-invariants]\nselect = ''\n", "'select' names no rule"),
])
def test_config_error_is_one_clear_message(tree: Path, body: str, needle: str):
    (tree / "pyproject.toml").write_text(body)
    for command in ("check", "fix"):
        code, out, err = run_cli(command, "--no-cache", str(tree))
        assert code == 2
        assert out == ""
        assert err.startswith("hp-invariants: configuration error: ") and err.count("\n") == 1, err
        assert needle in err and str(tree / "pyproject.toml") in err
    assert (tree / "gated.py").read_text() == GATED


def test_error_in_a_nested_config_read_only_by_the_project_walk_is_a_note(tree: Path):
    # checking one root file, the project walk reads pkg/pyproject.toml (to know which of pkg's files it
    # indexes). Once two F0002 "internal error" problems of the checked file, then the run's configuration
    # error (a new user's find: an unrelated folder's broken file stopped every check): now a note, and
    # pkg is indexed under the configuration above it. Checking pkg's files themselves still fails.
    (tree / "pyproject.toml").write_text("[tool.hp-invariants]\n")
    (tree / "pkg" / "sub").mkdir(parents=True)
    (tree / "pkg" / "pyproject.toml").write_text("[tool.hp-invariants.per-file-ignores]\n'sub/*' = ['E9599']\n")
    (tree / "pkg" / "sub" / "b.py").write_text("y = 2\n")
    for jobs in ("1", "2"):
        code, out, err = run_cli("check", "--no-cache", "-j", jobs, str(tree / "clean.py"))
        assert code == 0, (out, err)
        note = [line for line in err.splitlines() if line.startswith("hp-invariants: note: ")]
        assert len(note) == 1 and "pkg/pyproject.toml" in note[0] and "unknown rule 'E9599'" in note[0], err
        assert "walks its folder with the settings of the folder above" in note[0]
    code, out, err = run_cli("check", "--no-cache", str(tree / "pkg"))
    assert (code, out) == (2, "") and err.startswith("hp-invariants: configuration error: "), (out, err)
    assert "unknown rule 'E9599'" in err


def test_a_folder_the_configuration_excludes_is_not_read_by_the_project_walk(tree: Path):
    # a new user's find: an unclosed table in an excluded folder's pyproject.toml stopped the check of a
    # file elsewhere (exit 2). The walk now prunes as the check's own walk does: an excluded folder's
    # files and configuration are never read
    (tree / "pyproject.toml").write_text('[tool.hp-invariants]\nextend-exclude = ["third_party"]\n')
    (tree / "third_party" / "vendored").mkdir(parents=True)
    (tree / "third_party" / "vendored" / "pyproject.toml").write_text("[tool.black\n")
    (tree / "third_party" / "vendored" / "v.py").write_text("z = 3\n")
    code, out, err = run_cli("check", "--no-cache", str(tree / "clean.py"))
    assert code == 0 and "note" not in err and "error" not in err, (out, err)
    code, out, err = run_cli("check", "--no-cache", str(tree))
    assert "third_party" not in out + err


def test_config_file_that_is_not_utf8(tree: Path):
    (tree / "pyproject.toml").write_bytes(b"[tool.hp-invariants]\n# caf\xe9\n")
    code, _, err = run_cli("check", str(tree))
    assert code == 2 and "cannot read configuration" in err and "Traceback" not in err


def test_explicit_config_that_does_not_exist(tree: Path):
    code, _, err = run_cli("check", "--config", str(tree / "nope.toml"), str(tree))
    assert code == 2 and "nope.toml: configuration file not found" in err


def test_explicit_config_that_is_a_folder_says_so(tree: Path):
    # a new user's find: `--config .` (the project folder) said "configuration file not found"
    code, _, err = run_cli("check", "--config", str(tree), str(tree))
    assert code == 2 and f"{tree}: is a folder; name its pyproject.toml" in err and "Traceback" not in err


@pytest.mark.parametrize("args", [["check", "--since", ""], ["fix", "--since", ""], ["check", "--baseline", ""],
                                  ["check", "--pins", ""], ["check", "--output-file", ""], ["check", "--cache-dir", ""],
                                  ["check", "--config", ""], ["baseline", "--baseline", ""]])
def test_an_empty_option_value_is_a_usage_error(tree: Path, args: list[str]):
    # a new user's find: `fix --since "$BASE"` with BASE unset fixed every finding of the repository;
    # an empty --baseline, --pins, --output-file or --cache-dir quietly meant the default
    before = (tree / "gated.py").read_text()
    code, out, err = run_cli(*args, str(tree))
    assert code == 2 and f"argument {args[1]}: expected a value, got an empty or blank string" in err and out == ""
    assert (tree / "gated.py").read_text() == before


@pytest.mark.parametrize("value", ['""', '" "'])
def test_a_configured_cache_dir_that_names_no_folder_is_an_error(tree: Path, value: str):
    # a second new user's find: cache-dir = "" put the database in the project folder itself (files to
    # commit by mistake), " " made a folder named " "; --cache-dir ' ' too
    (tree / "pyproject.toml").write_text(f"[tool.hp-invariants]\ncache-dir = {value}\n")
    code, _, err = run_cli("check", str(tree))
    assert code == 2 and "'cache-dir' must name a folder" in err
    assert not list(tree.glob("hp-invariants.sqlite3*")) and not (tree / " ").exists()
    code, _, err = run_cli("check", "--cache-dir", " ", str(tree / "clean.py"))
    assert code == 2 and "argument --cache-dir: expected a value" in err


def test_jobs_that_is_not_a_number_names_the_problem(tree: Path):
    # a new user's find: `-j abc` said "invalid _non_negative_int value" (the function's name)
    code, _, err = run_cli("check", "-j", "abc", str(tree))
    assert code == 2 and "argument -j/--jobs: not a whole number: 'abc'" in err and "_non_negative" not in err


def test_explicit_config_without_our_table_says_so(tree: Path):
    # a new user's find: `--config` naming a file with only other tools' settings ran on the defaults, silently
    other = tree / "other.toml"
    other.write_text("[tool.black]\nline-length = 100\n")
    ours = tree / "ours.toml"
    ours.write_text("[tool.hp-invariants]\n")  # an empty table is a configuration: no note
    for command in (["check"], ["fix", "--diff"]):
        code, _, err = run_cli(*command, "--no-cache", "--config", str(other), str(tree))
        assert code == 1 and f"note: {other} holds no [tool.hp-invariants] table" in err, err
        code, _, err = run_cli(*command, "--no-cache", "--config", str(ours), str(tree))
        assert code == 1 and "holds no" not in err, err
    assert (tree / "gated.py").read_text() == GATED


@pytest.mark.parametrize("args, needle", [
    (["--select", "E9502,bogus"], "--select: unknown rule 'bogus'"),
    (["--ignore", "E77"], "--ignore: unknown rule 'E77'"),
    (["--timeout-per-file", "-1"], "must be a finite number >= 0"),
    (["--max-file-size", "lots"], "not a number"),
    # an empty list (`--select "$RULES"` with RULES unset) ran every rule: now an error
    (["--select", ""], "--select: no rule codes given"),
    (["--select", " , "], "--select: no rule codes given"),
])
def test_bad_command_line_values(tree: Path, args: list[str], needle: str):
    code, out, err = run_cli("check", *args, str(tree))
    assert code == 2 and needle in err and out == ""


def test_unexpected_internal_error_exits_2_not_1(tree: Path, monkeypatch):
    def broken_run(*args, **kwargs):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(engine, "run_check", broken_run)
    code, out, err = run_cli("check", str(tree))
    assert code == 2 and "internal error" in err and "RuntimeError: simulated bug" in err


def test_unwritable_output_file(tree: Path):
    code, _, err = run_cli("check", "--output-file", str(tree / "no" / "such" / "dir.txt"), str(tree))
    assert code == 2 and "cannot write the report" in err


# ---------------------------------------------------------------------- the pylint plugin
SLOW_PLUGIN = '''\
"""Test plugin: hp-invariants with a rule check that spins forever on files named slow*.py."""
import os
import time

from hp_invariants.checkers import register as _register
from hp_invariants.registry import get_rule

_rule_type = type(get_rule("E9502"))
_original = _rule_type.check


def _check(rule, ctx):
    if os.path.basename(ctx.path).startswith("slow"):
        while True:  # busy: the budget counts CPU time
            sum(range(1000))
    if os.path.basename(ctx.path).startswith("crash"):
        raise KeyError("simulated rule bug")
    return _original(rule, ctx)


_rule_type.check = _check


def register(linter):
    _register(linter)
'''


def _pylint(tmp_path: Path, *args: str, plugin: str = "hp_invariants.checkers") -> subprocess.CompletedProcess:
    (tmp_path / "slow_plugin.py").write_text(SLOW_PLUGIN)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
               HP_INVARIANTS_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run(
        [sys.executable, "-m", "pylint", f"--load-plugins={plugin}", "--disable=all",
         "--enable=E9501,E9502,E9503,E9504,F9500,F9501,syntax-error", "--persistent=n", "--score=n", *args],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


def test_pylint_plugin_on_bad_files_never_shows_a_traceback(tree: Path):
    for name in ("syntax_error", "invalid_utf8", "nul_bytes", "wrong_cookie"):
        (tree / f"{name}.py").write_bytes(BAD_FILES[name][0])
    (tree / "crash.py").write_text(GATED)
    (tree / "slow.py").write_text(GATED)
    proc = _pylint(tree, "--hp-invariants-timeout=0.5", *sorted(p.name for p in tree.glob("*.py")),
                   plugin="slow_plugin")
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, output
    assert "slow.py:1:0: F9501: hp-invariants skipped this module: analysis took longer than 0.5 s" in output
    assert "crash.py:1:0: F9500: hp-invariants could not analyse this module: KeyError" in output
    assert "gated.py:5:" in output  # the good file was analysed
    assert "E9502" in output


@pytest.mark.parametrize("where", ["command-line", "rcfile"])
def test_pylint_plugin_bad_regex_option_is_a_clear_error(tree: Path, where: str):
    if where == "rcfile":
        (tree / "pylintrc").write_text("[HP-INVARIANTS]\nwrap-markers=_ok,(unclosed\n")
        proc = _pylint(tree, "--rcfile=pylintrc", "gated.py")
    else:
        proc = _pylint(tree, "--wrap-markers=(unclosed", "gated.py")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "argument --wrap-markers: Error in provided regular expression: (unclosed" in proc.stderr


def test_checks_leave_no_reference_cycles(tmp_path: Path):
    """The CLI runs the cyclic collector rarely (``cli._fewer_gc_passes``) because the checks free
    everything by reference counting. A helper that calls itself as a closure is a cycle per call
    (E9503's ``_self_stores`` was: 32,000 objects left for the collector in a check of
    torch/distributed): checking every rule's fixtures must leave nothing to collect."""
    import gc

    fixtures = sorted((Path(__file__).parent / "fixtures").rglob("*.py"))
    assert len(fixtures) > 50
    session = engine.session_for_rules(RULES)
    session.check_bytes("warm-up.py", b"class A:\n    def f(self):\n        self.x, (self.y, *self.z) = g()\n")
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage, to be named
    try:
        for path in fixtures:
            session.check_bytes(str(path), path.read_bytes())
        gc.collect()
        ours = sorted({f.__qualname__ for f in gc.garbage
                       if type(f).__name__ == "function" and f.__module__.startswith("hp_invariants")})
        left = len(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert ours == []
    assert left < 100  # the standard library's own (ast.dump's recursive helper, for a rare E9504 shape)


def test_a_cache_folder_that_is_a_file_is_named_once_by_the_run(tmp_path):
    """A new user's find: `--cache-dir` naming a file ran without any cache and said nothing, and
    `cache dir` printed it as a usable folder. The run says so in one note (also with -j 2 and for
    fix), the findings unchanged; `cache dir` warns."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "m.py").write_text("class A:\n    def f(self):\n        return self.g()\n\n\nA().f()\n")
    blocker = tmp_path / "cachefile"
    blocker.write_text("")
    expected = run_cli("check", "--no-cache", str(root))
    for jobs in ("1", "2"):
        code, out, err = run_cli("check", "-j", jobs, "--cache-dir", str(blocker), str(root))
        assert (code, out) == expected[:2]
        assert err.count(f"note: cannot use the cache folder {blocker} (a file has that name)") == 1, err
    _, _, err = run_cli("fix", "--diff", "--cache-dir", str(blocker), str(root))
    assert f"note: cannot use the cache folder {blocker}" in err
    _, _, err = run_cli("baseline", "--baseline", str(tmp_path / "bl.json"), "--cache-dir", str(blocker), str(root))
    assert f"note: cannot use the cache folder {blocker}" in err  # a second new user's find
    code, out, err = run_cli("cache", "--cache-dir", str(blocker), "dir")
    assert code == 0 and out.strip() == str(blocker) and f"{blocker} is a file" in err
    _, _, err = run_cli("check", "--cache-dir", str(tmp_path / "cache"), str(root))
    assert "cannot use the cache folder" not in err  # a usable folder: no note (nor one left from before)
