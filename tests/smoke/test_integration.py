"""Integration: a tiny model carrying all four fixed idioms trains the same in 1 and 4 processes.

``modules/integration_broken.py`` holds the four broken shapes in one VL-MoE-style model;
``hp-invariants fix`` must report and rewrite all four (E9501-E9504) and leave ``check`` clean.
The rewritten module then trains 20 AdamW steps with activation checkpointing and FSDP2
``fully_shard`` over gloo on CPU, once in 1 process and once in 4 (``train_worker.py``, ranks on
127.0.0.1, one thread each), on the same data and seed; the per-step losses agree to 1e-5
relative (the seed report's 1c <-> FSDP4 consistency check). This test always runs on CPU/gloo:
it is about world-size consistency, not the accelerator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from smoke_support import SMOKE_DIR, TORCH_MISSING, make_rule_pair

torch = pytest.importorskip("torch", reason=TORCH_MISSING)

RULES = ("E9501", "E9502", "E9503", "E9504")
STEPS = 20
RUN_TIMEOUT_S = 150


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return make_rule_pair(RULES, "integration", tmp_path_factory.mktemp("integration"))


def _train(module_path, world_size, out_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("HP_SMOKE_DEVICE", None)
    proc = subprocess.run(
        [sys.executable, str(SMOKE_DIR / "train_worker.py"), str(module_path), str(world_size),
         str(STEPS), str(out_path)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=RUN_TIMEOUT_S, check=False,
    )
    assert proc.returncode == 0, f"training in {world_size} process(es) failed:\n{proc.stdout}"
    return json.loads(out_path.read_text(encoding="utf-8"))


def test_check_reports_all_four_rules(pair):
    pair.assert_flagged()


def test_fix_makes_check_clean(pair):
    pair.assert_fixed_clean()


def test_fixed_model_trains_alike_in_1_and_4_processes(pair, tmp_path):
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("this torch build has no torch.distributed gloo backend")
    pair.assert_fixed_clean()
    single = _train(pair.fixed, 1, tmp_path / "world1.json")
    sharded = _train(pair.fixed, 4, tmp_path / "world4.json")
    for result in (single, sharded):
        assert result["wrapped"], f"not every layer is checkpoint-wrapped: {result}"
        assert result["fsdp_layers"] and result["fsdp_root"], (
            f"fully_shard must run at every world size (E9502): {result}")
        assert len(result["losses"]) == STEPS
        assert all(torch.isfinite(torch.tensor(result["losses"]))), result
    losses_1 = torch.tensor(single["losses"], dtype=torch.float64)
    losses_4 = torch.tensor(sharded["losses"], dtype=torch.float64)
    torch.testing.assert_close(losses_4, losses_1, rtol=1e-5, atol=0.0,
                               msg=lambda m: f"1-process vs 4-process losses differ: {m}\n"
                                             f"1: {single['losses']}\n4: {sharded['losses']}")
    # The same four batches are cycled: the model learns them.
    assert losses_1[-4:].mean() < losses_1[:4].mean() - 0.2, single["losses"]
