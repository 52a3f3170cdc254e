"""E9502 shard-gated-reset, at run time, with a real process group of one rank.

The group is gloo on CPU, nccl on CUDA, hccl on NPU (a FileStore rendezvous, world size 1).
Broken: ``lazy_init`` is gated on ``is_shard`` (False at world size 1), so ``reset_sharded_param``
never runs, every parameter stays on ``meta`` and the forward raises. Fixed by
``hp-invariants fix`` (a safe fix: the gate conjunct is dropped): every parameter is materialized on
the device with rank 0's values and training steps (forward, backward, all-reduce, AdamW) run.
"""

from __future__ import annotations

import pytest

from smoke_support import TORCH_MISSING, dist_backend, load_module, make_rule_pair

torch = pytest.importorskip("torch", reason=TORCH_MISSING)
dist = pytest.importorskip("torch.distributed", reason=TORCH_MISSING)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    # Dropping the gate conjunct (`if self.is_shard and not done:` -> `if not done:`) is a safe
    # fix: a plain `hp-invariants fix` must apply it, no --unsafe-fixes.
    return make_rule_pair("E9502", "e9502", tmp_path_factory.mktemp("e9502"))


@pytest.fixture(scope="module")
def group(device, tmp_path_factory):
    """A process group of one rank on ``device``'s backend."""
    if not dist.is_available():
        pytest.skip("this torch build has no torch.distributed")
    backend = dist_backend(device)
    if backend == "nccl" and not dist.is_nccl_available():
        pytest.skip("the CUDA device is present but this torch build has no NCCL")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    elif device.type == "npu":
        torch.npu.set_device(device)
    assert not dist.is_initialized(), "another test left a default process group behind"
    store = dist.FileStore(str(tmp_path_factory.mktemp("e9502_store") / "store"), 1)
    dist.init_process_group(backend, store=store, rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def test_check_flags_broken_module(pair):
    pair.assert_flagged()


def test_fix_makes_check_clean(pair):
    pair.assert_fixed_clean()


def test_broken_params_stay_on_meta_and_forward_raises(pair, device, group):
    module = load_module(pair.broken)
    model, state = module.build(group, device)
    assert not state.is_shard, "world size 1 must not count as sharded"
    state.lazy_init()
    assert all(param.is_meta for param in model.parameters())
    with pytest.raises((RuntimeError, NotImplementedError), match="(?i)meta"):
        model(torch.randn(4, 8, device=device))


def test_fixed_materializes_every_param_and_trains(pair, device, group):
    pair.assert_fixed_clean()
    module = load_module(pair.fixed)
    model, state = module.build(group, device)
    state.lazy_init()
    params = dict(model.named_parameters())
    assert len(params) == 4
    for name, param in params.items():
        assert not param.is_meta, f"{name} left on meta at world size 1"
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
