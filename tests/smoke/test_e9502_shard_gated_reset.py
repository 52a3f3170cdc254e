"""E9502 shard-gated-reset, at run time, on real process groups of the runtime harness's ranks.

The multi-rank tests run on the harness (the ``world_size`` marker of hp-invariants' pytest plugin):
each world size's ranks are separate processes with torchrun's environment; each test body creates
its group on the device's backend (gloo on CPU, nccl on CUDA, hccl on NPU). Broken: ``lazy_init``
is gated on ``is_shard`` (False at world size 1), so ``reset_sharded_param`` never runs, every
parameter stays on ``meta`` and the forward raises (with the harness's checks off, torch's own
error); with the checks on, the harness reports E9502 at optimizer construction at world size 1
and passes world size 2, where the gate holds. Fixed by ``hp-invariants fix`` (a safe fix: the gate
conjunct is dropped): every parameter is materialized on the device with rank 0's values and
training steps (forward, backward, all-reduce, AdamW) run at world sizes 1 and 2, with the same
losses.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from smoke_support import TORCH_MISSING, dist_backend, load_module, make_rule_pair

torch = pytest.importorskip("torch", reason=TORCH_MISSING)
dist = pytest.importorskip("torch.distributed", reason=TORCH_MISSING)
launcher = pytest.importorskip("hp_invariants.runtime.launcher")
if not dist.is_available():
    pytest.skip("this torch build has no torch.distributed", allow_module_level=True)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    # Dropping the gate conjunct (`if self.is_shard and not done:` -> `if not done:`) is a safe
    # fix: a plain `hp-invariants fix` must apply it, no --unsafe-fixes.
    return make_rule_pair("E9502", "e9502", tmp_path_factory.mktemp("e9502"))


@contextmanager
def process_group(device):
    """The default group of this rank (torchrun's environment, set by the harness) on ``device``'s
    backend; destroyed on exit. On an accelerator each rank takes the device of its local rank (the
    fixture's ``cuda`` has no index: ``set_device`` refuses it); with fewer devices than ranks they
    share them over gloo (NCCL refuses two ranks on one GPU), so one GPU runs world size 2 too."""
    backend = dist_backend(device)
    if backend == "nccl" and not dist.is_nccl_available():
        pytest.skip("the CUDA device is present but this torch build has no NCCL")
    if device.type in ("cuda", "npu"):
        accelerator = torch.cuda if device.type == "cuda" else torch.npu
        count = accelerator.device_count()
        ranks = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        accelerator.set_device(int(os.environ.get("LOCAL_RANK", "0")) % count)
        if count < ranks and device.type == "cuda":
            backend = "gloo"
    dist.init_process_group(backend)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def build_optimizer_and_train(module_path: Path, device, steps: int = 2) -> None:
    """A rank of the broken module's training: lazy init, AdamW, ``steps`` steps (a harness body)."""
    with process_group(device) as group:
        module = load_module(module_path)
        model, state = module.build(group, device)
        state.lazy_init()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        inputs = torch.randn(16, 8, generator=torch.Generator().manual_seed(2)).to(device)
        for _ in range(steps):
            model(inputs).square().mean().backward()
            state.reduce_grads()
            optimizer.step()
            optimizer.zero_grad()


def test_check_flags_broken_module(pair):
    pair.assert_flagged()


def test_fix_makes_check_clean(pair):
    pair.assert_fixed_clean()


@pytest.mark.world_size(1, checks=False, init_process_group=False)
def test_broken_params_stay_on_meta_and_forward_raises(pair, device):
    # the harness's checks are off: this is torch's own error
    module = load_module(pair.broken)
    with process_group(device) as group:
        model, state = module.build(group, device)
        assert not state.is_shard, "world size 1 must not count as sharded"
        state.lazy_init()
        assert all(param.is_meta for param in model.parameters())
        with pytest.raises((RuntimeError, NotImplementedError), match="(?i)meta"):
            model(torch.randn(4, 8, device=device))


def test_harness_reports_e9502_at_world_size_1_only(pair, device):
    report = launcher.run_function(build_optimizer_and_train, [1, 2], {"module_path": pair.broken, "device": device},
                                   init_process_group=False, timeout=120, static_check=False)
    single, double = report.results
    assert single.status == "FAIL" and single.rule and single.rule["id"] == "E9502", report.render()
    assert "optimizer construction" in single.reason and "on the meta device" in single.reason, single.reason
    assert single.failed_rank == 0
    assert double.status == "PASS", report.render()
    assert report.exit_code == 1 and "world size 1: FAIL (E9502 shard-gated-reset)" in report.summary()


@pytest.mark.world_size(1, 2, init_process_group=False, expect_steps=5, timeout=120)
def test_fixed_materializes_every_param_and_trains(pair, device):
    pair.assert_fixed_clean()
    module = load_module(pair.fixed)
    with process_group(device) as group:
        _train_fixed(module, group, device)


def _train_fixed(module, group, device):
    model, state = module.build(group, device)
    state.lazy_init()
    params = dict(model.named_parameters())
    assert len(params) == 4
    for name, param in params.items():
        assert not param.is_meta, f"{name} left on meta at world size {dist.get_world_size()}"
        assert param.device.type == device.type, (name, param.device)
        assert type(param) is torch.nn.Parameter and param.is_leaf and param.requires_grad

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(2)
    inputs = torch.randn(16, 8, generator=generator).to(device)
    target = torch.randn(16, 8, generator=generator).to(device)
    losses = []
    for _ in range(5):
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        loss.backward()
        state.reduce_grads()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))), losses
    assert losses[-1] < losses[0], f"training did not reduce the loss: {losses}"
