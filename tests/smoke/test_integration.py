"""Integration: a tiny model carrying all four fixed idioms trains the same in 1 and 4 processes.

``modules/integration_broken.py`` holds the four broken shapes in one VL-MoE-style model;
``hp-invariants fix`` must report and rewrite all four (E9501-E9504) and leave ``check`` clean.
The rewritten module then trains 20 AdamW steps with activation checkpointing and FSDP2
``fully_shard`` over gloo on CPU, on the runtime harness (the ``world_size`` marker of
hp-invariants' pytest plugin): once on 1 rank and once on 4 (processes on 127.0.0.1, one thread
each), on the same data and seed. Each rank trains on its equal slice of the global batch; the
harness checks the invariants at run time (nothing on meta, every local tensor a leaf, every
trainable parameter with a gradient) and compares the global loss of every step (the mean of
the rank losses) between world sizes 4 and 1 to 1e-5 relative (the seed report's 1c <-> FSDP4
consistency check). This test always runs on CPU/gloo: it is about world-size consistency, not
the accelerator.
"""

from __future__ import annotations

import pytest

from smoke_support import TORCH_MISSING, load_module, make_rule_pair

torch = pytest.importorskip("torch", reason=TORCH_MISSING)

RULES = ("E9501", "E9502", "E9503", "E9504")
STEPS = 20


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return make_rule_pair(RULES, "integration", tmp_path_factory.mktemp("integration"))


def test_check_reports_all_four_rules(pair):
    pair.assert_flagged()


def test_fix_makes_check_clean(pair):
    pair.assert_fixed_clean()


@pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                    reason="this torch build has no torch.distributed gloo backend")
@pytest.mark.world_size(1, 4, device="cpu", rtol=1e-5, atol=0.0, expect_steps=STEPS, timeout=150)
def test_fixed_model_trains_alike_in_1_and_4_processes(pair, rank, world_size):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule

    pair.assert_fixed_clean()
    module = load_module(pair.fixed)
    mesh = init_device_mesh("cpu", (world_size,))
    model = module.build_model(seed=0)
    module.apply_ac(model)
    module.apply_fully_shard(model, mesh)
    layers = model.language_model.layers
    assert all(isinstance(layer, module.CheckpointWrapper) for layer in layers), "not every layer is wrapped"
    assert all(isinstance(layer, FSDPModule) for layer in layers) and isinstance(model, FSDPModule), (
        "fully_shard must run at every world size (E9502)")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in range(STEPS):
        input_ids, pixel_values, labels = module.make_batch(step % 4)  # 4 batches, cycled
        logits = model(input_ids.chunk(world_size)[rank], pixel_values.chunk(world_size)[rank])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.chunk(world_size)[rank].flatten())
        loss.backward()  # the harness records it; the global losses of 1 and 4 ranks are compared
        module.sync_replicated_grads(model, world_size)
        optimizer.step()
        optimizer.zero_grad()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        losses.append(mean_loss.item() / world_size)
    losses = torch.tensor(losses, dtype=torch.float64)
    assert len(losses) == STEPS and bool(torch.isfinite(losses).all()), losses
    # The same four batches are cycled: the model learns them.
    assert losses[-4:].mean() < losses[:4].mean() - 0.2, losses.tolist()
