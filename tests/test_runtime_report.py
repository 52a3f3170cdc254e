"""The runtime harness's verdicts, without processes or torch (hp_invariants.runtime.report, launcher.judge).

Stacks of hung ranks, the world-size verdict from the ranks' results (hang, crash, rule class,
harness error, no process group), the loss comparison across world sizes (agreement, a loss averaged
twice, a layout-dependent initialisation, different step counts) and the exit codes.
"""

from __future__ import annotations

import math

import pytest

from hp_invariants.runtime import launcher, report
from hp_invariants.runtime.report import RankOutcome, WorldResult

DUMP = '''\
Thread 0x00007f3a2effd640 (most recent call first):
  File "/venv/lib/python3.11/site-packages/hp_invariants/runtime/rank.py", line 229 in watch
  File "/usr/lib/python3.11/threading.py", line 982 in run
  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f3a3d9c7740 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252 in all_reduce
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/work/train.py", line 8 in step
  File "/work/train.py", line 20 in <module>
  File "<frozen runpy>", line 88 in _run_code
  File "/venv/lib/python3.11/site-packages/hp_invariants/runtime/rank.py", line 238 in run
'''


def test_the_main_thread_is_found_and_its_collective_named():
    frames = report.parse_stack(DUMP)
    assert frames[0].function == "all_reduce" and frames[2].file == "/work/train.py"
    waiting, where = report.waiting_in(frames)
    assert waiting and where == "waiting in all_reduce (distributed_c10d.py:3252), called from /work/train.py:8 in step"
    # the harness's frames below the script are not shown
    assert report.stack_lines(frames)[-1] == 'File "/work/train.py", line 20 in <module>'


def test_a_rank_outside_a_collective_says_where_it_was():
    dump = 'Current thread 0x1 (most recent call first):\n  File "/work/train.py", line 31 in <module>\n'
    assert report.waiting_in(report.parse_stack(dump)) == (False, "not in a collective (at /work/train.py:31 in <module>)")
    assert report.parse_stack("") == []


def outcome(rank: int, exit_code: int | None = 0, *, losses=(), steps: int = 0, error=None, violations=(),
            harness_error=None, process_group=True, waiting=None, ended_by_harness=False, digest=None) -> RankOutcome:
    """A rank's outcome as the launcher reads it back."""
    result = {"rank": rank, "status": "ok" if exit_code == 0 else "error", "exit_code": exit_code, "error": error,
              "harness_error": harness_error, "losses": [list(x) for x in losses], "steps": steps,
              "violations": list(violations), "checks": list(violations), "process_group": process_group,
              "backend": "gloo", "hooks_installed": True, "user_files": [], "init_digest": digest}
    return RankOutcome(rank, exit_code, result, waiting=waiting, ended_by_harness=ended_by_harness)


OPTIONS = launcher.Options(static_check=False, timeout=30)


def test_a_hang_names_the_rank_waiting_in_the_collective():
    outcomes = [outcome(0, -9, waiting="not in a collective (at t.py:10 in <module>)", ended_by_harness=True),
                outcome(1, -9, waiting="waiting in all_reduce (distributed_c10d.py:3252), called from t.py:8",
                        ended_by_harness=True)]
    for o in outcomes:
        o.result = None  # killed: no result file
    result = launcher.judge(2, outcomes, True, [0, 1], OPTIONS)
    assert result.status == "FAIL" and result.failed_rank == 1 and result.timed_out
    assert result.reason.startswith("hang: rank(s) 1 waiting in a collective at the timeout (30 s)")
    assert "rank 0 was not in a collective (at t.py:10 in <module>)" in result.reason


def test_the_first_rank_with_a_rule_class_is_the_failure_and_the_others_are_explained():
    meta = {"type": "RuntimeError", "mro": ["RuntimeError"], "message": "Tensor on device meta is not on the "
            "expected device cpu!", "frames": [{"file": "/work/t.py", "line": 5, "function": "f"}], "traceback": ""}
    reset = {"type": "RuntimeError", "mro": ["RuntimeError"], "message": "Connection reset by peer", "frames": [],
             "traceback": ""}
    outcomes = [outcome(0, 1, error=reset), outcome(1, 1, error=meta),
                outcome(2, -9, waiting="waiting in barrier (distributed_c10d.py:1), called from t.py:9",
                        ended_by_harness=True)]
    result = launcher.judge(3, outcomes, False, [0, 1, 2], OPTIONS)
    assert result.status == "FAIL" and result.failed_rank == 1 and result.rule["id"] == "E9502"
    assert result.reason.startswith("E9502 shard-gated-reset: rank 1 raised RuntimeError: Tensor on device meta")
    assert any("rank 2: ended by the harness after rank 1 failed; waiting in barrier" in d for d in result.details)
    assert any(d.startswith("rank 0: also failed (RuntimeError: Connection reset by peer)") for d in result.details)
    assert "explain: hp-invariants explain E9502" in result.details


def test_a_failed_check_a_signal_and_a_harness_error():
    violation = {"check": "optimizer construction", "status": "fail", "rule": "E9501", "detail": "1 DTensor ..."}
    result = launcher.judge(1, [outcome(0, 1, violations=[violation])], False, [0], OPTIONS)
    assert result.reason == "E9501 local-tensor-view-not-detached: rank 0, at optimizer construction: 1 DTensor ..."
    killed = outcome(0, -11)
    killed.result = None
    assert launcher.judge(1, [killed], False, [0], OPTIONS).reason == "rank 0 was ended by SIGSEGV without a result"
    harness = launcher.judge(1, [outcome(0, 3, harness_error="--device cuda: torch.cuda.is_available() is False")],
                             False, [0], OPTIONS)
    assert harness.status == "ERROR" and "is_available() is False" in harness.reason


def test_no_process_group_is_an_error_above_world_size_1_and_a_note_at_1():
    single = launcher.judge(1, [outcome(0, process_group=False)], False, [0], OPTIONS)
    assert single.status == "PASS" and any("no process group at world size 1" in n for n in single.notes)
    double = launcher.judge(2, [outcome(0, process_group=False), outcome(1, process_group=False)], False, [0, 1],
                            OPTIONS)
    assert double.status == "ERROR" and double.reason.startswith("the script never created a process group")


def world(size: int, per_rank_losses: list[list[float]], digest=None, steps: int = 2) -> WorldResult:
    outcomes = [outcome(r, losses=[(k, v) for k, v in enumerate(losses)], steps=steps, digest=digest)
                for r, losses in enumerate(per_rank_losses)]
    return launcher.judge(size, outcomes, False, list(range(size)), OPTIONS)


def test_global_losses_agree_within_rtol():
    one = world(1, [[2.0, 1.5]])
    two = world(2, [[2.1, 1.6], [1.9, 1.4 + 1e-6]])  # mean over ranks: 2.0, 1.5000005
    assert two.global_losses == pytest.approx([2.0, 1.5000005])
    consistency = report.compare([one, two], rtol=1e-4, atol=0.0)
    assert consistency.status == "PASS" and "agrees with world size 1 at 2 step(s)" in consistency.reason
    assert report.compare([one, two], rtol=1e-8, atol=0.0).status == "FAIL"


def test_a_loss_averaged_twice_fails_at_step_0_with_the_hint():
    consistency = report.compare([world(1, [[4.0, 3.0]]), world(2, [[2.0, 1.5], [2.0, 1.5]])], 1e-4, 1e-6)
    assert consistency.status == "FAIL"
    assert consistency.reason.startswith("the global loss drifts at step 0: world size 2 2 vs world size 1 4")
    assert "1/2 of world size 1's: the loss is divided by the world size once too often" in consistency.reason


def test_a_layout_dependent_initialisation_is_named():
    digest_one = {"w": {"shape": [4, 4], "stats": [1.0, 2.0, 3.0]}, "b": {"shape": [4], "stats": [0.0, 0.0, 0.0]}}
    digest_two = {"w": {"shape": [4, 4], "stats": [1.5, 2.0, 3.0]}, "b": {"shape": [4], "stats": [0.0, 0.0, 0.0]}}
    consistency = report.compare([world(1, [[2.0]], digest_one), world(2, [[2.0], [2.0]], digest_two)], 1e-4, 1e-6)
    assert consistency.status == "FAIL"
    assert "the initialisation depends on the layout: at optimizer construction 1 of 2 parameter(s) differ " \
           "between world sizes 1 and 2 (w)" in consistency.reason


def test_steps_are_optimizer_steps_and_step_counts_must_match():
    # two backward calls per optimizer step (gradient accumulation over halves): the step's loss is their sum
    accumulated = {"losses": [[0, 1.0], [0, 1.5], [1, 0.5], [1, 0.75]], "steps": 2}
    assert report.step_losses(accumulated) == [2.5, 1.25]
    assert report.step_losses({"losses": [[0, 1.0], [0, 2.0]], "steps": 0}) == [1.0, 2.0]  # no optimizer
    consistency = report.compare([world(1, [[1.0, 1.0, 1.0]]), world(2, [[1.0, 1.0], [1.0, 1.0]])], 1e-4, 1e-6)
    assert consistency.status == "FAIL" and "world size 2 recorded 2 step(s), world size 1 3" in consistency.reason


def test_nan_is_a_drift_and_missing_references_skip():
    assert report.compare([world(1, [[1.0]]), world(2, [[math.nan], [math.nan]])], 1e-4, 1e-6).status == "FAIL"
    failed = launcher.judge(1, [outcome(0, 1, error={"type": "KeyError", "mro": ["KeyError"], "message": "'x'",
                                                      "frames": [], "traceback": ""})], False, [0], OPTIONS)
    assert failed.reason.endswith("(not one of the rule classes' run-time signatures)")
    assert report.compare([failed, world(2, [[1.0], [1.0]])], 1e-4, 1e-6).status == "SKIPPED"
    assert report.compare([world(1, [[1.0]])], 1e-4, 1e-6).reason == "one world size only"


def test_exit_codes_follow_the_worst_verdict():
    passing = world(1, [[1.0]])
    agree = report.compare([passing], 1e-4, 1e-6)
    assert report.RunReport("t.py", "cpu", [1], [passing], agree).exit_code == 0
    drift = report.Consistency("FAIL", "drift")
    assert report.RunReport("t.py", "cpu", [1, 2], [passing, passing], drift).exit_code == 1
    error = WorldResult(2, "ERROR", "no process group")
    assert report.RunReport("t.py", "cpu", [1, 2], [passing, error], drift).exit_code == 2
