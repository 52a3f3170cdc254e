# The fixed twin of e9502_broken.py: `hp-invariants fix` dropped the shard-degree gate, nothing else changed.
"""The seed incident's single-card path, fixed: the parameter reset runs at every shard degree.

Same training as ``e9502_broken.py``; ``lazy_init`` resets every parameter whatever the number of
ranks (a one-rank mesh is a supported configuration), so AdamW gets materialized DTensor parameters
at world size 1 too. ``hp-invariants run`` passes at world sizes 1 and 2 with the same global loss:
the full values come from seeded generators and are scattered, so the initialisation does not
depend on the layout, and every rank trains on the same batch.

Run: ``hp-invariants run --world-sizes 1,2 -- examples/runtime/e9502_fixed.py`` (or torchrun).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

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


class ShardedParamHandle:
    """One managed parameter (a module attribute) of the shard state."""

    def __init__(self, module: nn.Module, name: str, mesh, device: torch.device, seed: int) -> None:
        self.module, self.name, self.mesh, self.device, self.seed = module, name, mesh, device, seed

    def reset_sharded_param(self) -> None:
        """Materialize a meta parameter: its full value (seeded), scattered as a row-sharded DTensor."""
        param = getattr(self.module, self.name)
        if not param.is_meta:
            return
        generator = torch.Generator().manual_seed(self.seed)
        full = (torch.randn(param.shape, generator=generator) * 0.3).to(self.device)
        setattr(self.module, self.name, nn.Parameter(distribute_tensor(full, self.mesh, [Shard(0)])))


class ShardState:
    """The shard state of a model: one handle per parameter, and the lazy initialization."""

    def __init__(self, model: nn.Module, mesh, device: torch.device) -> None:
        self.hsdp_params = []
        for seed, (qualified, _) in enumerate(list(model.named_parameters())):
            owner, _, name = qualified.rpartition(".")
            self.hsdp_params.append(ShardedParamHandle(model.get_submodule(owner), name, mesh, device, seed))
        self._reset_sharded_params = False
        self.is_shard = mesh.size() > 1  # the parameters are really split over more than one rank

    def lazy_init(self) -> None:
        """Reset every sharded parameter, once."""
        if not self._reset_sharded_params:
            for hsdp_param in self.hsdp_params:
                hsdp_param.reset_sharded_param()
            self._reset_sharded_params = True


def main() -> None:
    """Meta-init, shard, lazy init, build AdamW, train."""
    run = common.start(__doc__.splitlines()[0])
    mesh = init_device_mesh(run.device.type, (run.world_size,))
    with torch.device("meta"):
        model = MLP()
    state = ShardState(model, mesh, run.device)
    state.lazy_init()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(1)
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
