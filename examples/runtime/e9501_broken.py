# Broken on purpose (E9501 local-tensor-view-not-detached); its fixed twin is e9501_fixed.py.
"""The seed incident's dense training, reduced: a DTensor parameter whose local tensor is a view.

The training stack shards each weight over the ranks itself: a padded local buffer per parameter
(as FSDP2 keeps one) and a DTensor parameter whose local tensor is the unpadded rows of that
buffer. ``reset_sharded_param`` takes those rows with ``narrow()`` under ``torch.no_grad()`` and
stores them without ``.detach()``; the checkpoint loader then writes the buffer in place in grad
mode. The local tensor is now a no_grad view whose base was modified with grad enabled, not a leaf.
The seed's DTensor read ``is_leaf`` from its local tensor, so building AdamW raised "A view was
created in no_grad mode and its base or another view of its base has been modified inplace with
grad mode enabled"; torch's DTensor does not ask, and the training runs on parameters whose local
tensors autograd no longer treats as leaves. ``hp-invariants run`` stops it at optimizer
construction, at every world size.

Run: ``hp-invariants run --world-sizes 1,2 -- examples/runtime/e9501_broken.py`` (or torchrun).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard

import common

DIM, HIDDEN = 16, 24


class ShardedLinear(nn.Module):
    """A bias-free linear layer whose weight becomes a row-sharded DTensor parameter."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight.full_tensor() if isinstance(self.weight, DTensor) else self.weight
        return F.linear(x, weight)


class MLP(nn.Module):
    """Two sharded linear layers."""

    def __init__(self) -> None:
        super().__init__()
        self.up = ShardedLinear(DIM, HIDDEN)
        self.down = ShardedLinear(HIDDEN, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class ShardParamState:
    """One parameter's shard: the padded local buffer, and the DTensor parameter bound to its rows."""

    def __init__(self, module: ShardedLinear, mesh) -> None:
        self.module = module
        self.mesh = mesh
        self.sharded_param = None
        self.padded = None
        self.start = self.length = 0

    def reset_sharded_param(self) -> None:
        """Shard the materialized weight by rows (padded to equal rows per rank) into a DTensor."""
        full = self.module.weight
        world, rank = self.mesh.size(), self.mesh.get_local_rank()
        rows = math.ceil(full.shape[0] / world)
        self.start = rank * rows
        self.length = max(0, min(rows, full.shape[0] - self.start))
        local_tensor = full.new_zeros((rows, *full.shape[1:]))
        self.sharded_param = nn.Parameter(DTensor.from_local(
            torch.empty(self.length, *full.shape[1:], device=full.device), self.mesh, [Shard(0)],
            run_check=False, shape=full.shape, stride=full.stride()))
        with torch.no_grad():
            local_view = local_tensor.narrow(dim=0, start=0, length=self.length)
        local_view.requires_grad_(self.sharded_param.requires_grad)
        self.sharded_param._local_tensor = local_view
        self.padded = local_tensor
        self.module.weight = self.sharded_param


def load_checkpoint(states: list[ShardParamState], checkpoint: list[torch.Tensor]) -> None:
    """Copy each rank's rows of the checkpoint into its padded buffers (grad mode, as loaders do)."""
    for state, source in zip(states, checkpoint):
        state.padded[: state.length].copy_(source[state.start: state.start + state.length])


def main() -> None:
    """Meta-init, materialize, shard, load, build AdamW, train."""
    run = common.start(__doc__.splitlines()[0])
    mesh = init_device_mesh(run.device.type, (run.world_size,))
    with torch.device("meta"):
        model = MLP()
    model.to_empty(device=run.device)
    states = [ShardParamState(model.up, mesh), ShardParamState(model.down, mesh)]
    for state in states:
        state.reset_sharded_param()
    generator = torch.Generator().manual_seed(0)
    checkpoint = [nn.Parameter(torch.randn(HIDDEN, DIM, generator=generator).to(run.device) * 0.3),
                  nn.Parameter(torch.randn(DIM, HIDDEN, generator=generator).to(run.device) * 0.3)]
    load_checkpoint(states, checkpoint)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    inputs = torch.randn(8, DIM, generator=generator).to(run.device)  # the same batch on every rank
    target = torch.randn(8, DIM, generator=generator).to(run.device)
    for step in range(run.steps):
        loss = F.mse_loss(model(inputs), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        run.log(step, loss)
    common.end()


if __name__ == "__main__":
    main()
