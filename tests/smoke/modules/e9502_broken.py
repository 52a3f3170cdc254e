# Smoke module for E9502 (shard-gated-reset): lazy_init runs reset_sharded_param only when
# is_shard holds, so at world size 1 the meta parameters are never materialized.
"""A lazily initialized shard state whose parameter reset is gated on ``is_shard`` (E9502, broken).

The model is built on ``meta``; :func:`shard_model` attaches a :class:`ShardState` whose
``lazy_init`` runs from a forward pre-hook, as FSDP-style roots do. ``lazy_init`` must call
``reset_sharded_param()`` on every parameter at every world size: it materializes the meta
parameter on the device, broadcasts rank 0's initial values and re-registers it as a plain
``nn.Parameter``. Gated on ``self.is_shard`` (False at world size 1), the reset is skipped, the
parameters stay on ``meta`` and the first forward fails. ``hp-invariants fix`` drops the gate.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class TinyNet(nn.Module):
    """Two linear layers, the model the shard state manages."""

    def __init__(self, dim: int = 8, hidden: int = 16) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class ShardedParamHandle:
    """One managed parameter of ``module`` (by attribute name)."""

    def __init__(self, module: nn.Module, name: str, group, device: torch.device, seed: int) -> None:
        self.module = module
        self.name = name
        self.group = group
        self.device = device
        self.seed = seed

    def reset_sharded_param(self) -> None:
        """Materialize a meta parameter on the device with rank 0's values, as a plain Parameter."""
        param = getattr(self.module, self.name)
        if not param.is_meta:
            return
        generator = torch.Generator().manual_seed(self.seed)
        values = torch.randn(param.shape, generator=generator, dtype=param.dtype) * 0.2
        values = values.to(self.device)
        dist.broadcast(values, src=0, group=self.group)
        setattr(self.module, self.name, nn.Parameter(values))


class ShardState:
    """The shard state of one model: its parameter handles and the lazy initialization."""

    def __init__(self, model: nn.Module, group, device: torch.device) -> None:
        self.model = model
        self.group = group
        self.world_size = dist.get_world_size(group)
        self.hsdp_params = []
        for seed, (qualified, _) in enumerate(list(model.named_parameters())):
            owner_name, _, name = qualified.rpartition(".")
            owner = model.get_submodule(owner_name)
            self.hsdp_params.append(ShardedParamHandle(owner, name, group, device, seed))
        self._reset_sharded_params = False
        self.is_shard = self.world_size > 1  # the parameters are really split over more than one rank

    def lazy_init(self) -> None:
        """Run once before the first forward: reset every sharded parameter."""
        if self.is_shard and not self._reset_sharded_params:
            for hsdp_param in self.hsdp_params:
                hsdp_param.reset_sharded_param()
            self._reset_sharded_params = True

    def reduce_grads(self) -> None:
        """Average the gradients over the group (a no-op in value at world size 1)."""
        for param in self.model.parameters():
            if param.grad is not None:
                dist.all_reduce(param.grad, group=self.group)
                param.grad /= self.world_size


def shard_model(model: nn.Module, group, device: torch.device) -> ShardState:
    """Attach a shard state to ``model``; its ``lazy_init`` runs before every forward."""
    state = ShardState(model, group, device)
    model.register_forward_pre_hook(lambda module, args: state.lazy_init())
    return state


def build(group, device: torch.device) -> tuple[TinyNet, ShardState]:
    """Meta-init a TinyNet and attach its shard state."""
    with torch.device("meta"):
        model = TinyNet()
    return model, shard_model(model, group, device)
