# Smoke module for E9501 (local-tensor-view-not-detached): a sharded parameter whose local shard
# is a narrow() view of a padded buffer taken under no_grad and stored without .detach().
"""A DTensor-like sharded parameter bound to a view of a padded buffer (E9501, broken shape).

Flow, as in the seed report: the model is built on ``meta``, ``to_empty`` allocates it, the
shard state pads each weight into a flat-row buffer and binds the local shard to
``sharded_param._local_tensor`` as a ``narrow`` view taken under ``torch.no_grad()``; the weights
are then loaded in grad mode (an in-place ``copy_`` into the buffer from parameters that require
grad); building ``torch.optim.AdamW`` reads ``param.is_leaf``, which this parameter forwards to
``self._local_tensor.is_leaf``. With the view not detached, that read raises torch's RuntimeError
"A view was created in no_grad mode and its base or another view of its base has been modified
inplace with grad mode enabled". ``hp-invariants fix`` appends ``.detach()`` to the view.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ShardedParameter(nn.Parameter):
    """A parameter that aliases its local shard; autograd facts are read from the shard.

    The wrapper shares storage with ``local_tensor``; ``is_leaf`` and ``grad`` forward to
    ``self._local_tensor`` the way a DTensor parameter does.
    """

    def __new__(cls, local_tensor: torch.Tensor, requires_grad: bool = True):
        param = torch.Tensor._make_subclass(cls, local_tensor, requires_grad)
        param._local_tensor = local_tensor
        return param

    @property
    def is_leaf(self) -> bool:
        return self._local_tensor.is_leaf

    @property
    def grad(self):
        return self._local_tensor.grad

    @grad.setter
    def grad(self, value):
        self._local_tensor.grad = value


def local_of(param: torch.Tensor) -> torch.Tensor:
    """The tensor a forward computes with: the local shard of a sharded parameter."""
    return getattr(param, "_local_tensor", param)


class TinyMLP(nn.Module):
    """Two linear layers whose weights become sharded parameters."""

    def __init__(self, dim: int = 8, hidden: int = 12) -> None:
        super().__init__()
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.linear(x, local_of(self.up.weight)).relu()
        return F.linear(h, local_of(self.down.weight))


class ShardParamState:
    """One parameter's shard state: the padded buffer and the sharded parameter bound to it."""

    def __init__(self, module: nn.Module, name: str, pad_rows: int = 3) -> None:
        self.module = module
        self.name = name
        self.pad_rows = pad_rows
        self.padded_buffer = None
        self.sharded_param = None

    def reset_sharded_param(self) -> None:
        """Pad the materialized weight into a buffer and bind the local shard to a view of it."""
        weight = getattr(self.module, self.name)
        rows = weight.shape[0]
        local_tensor = weight.new_zeros((rows + self.pad_rows,) + tuple(weight.shape[1:]))
        with torch.no_grad():
            local_view = local_tensor.narrow(dim=0, start=0, length=rows)
        local_view.requires_grad_(True)
        self.sharded_param = ShardedParameter(local_view)
        self.sharded_param._local_tensor = local_view
        self.padded_buffer = local_tensor
        setattr(self.module, self.name, self.sharded_param)


def build_sharded_model(device: torch.device) -> tuple[TinyMLP, list[ShardParamState]]:
    """Meta-init a TinyMLP, ``to_empty`` it on ``device`` and shard its weights."""
    with torch.device("meta"):
        model = TinyMLP()
    model.to_empty(device=device)
    states = [ShardParamState(model.up, "weight"), ShardParamState(model.down, "weight")]
    for state in states:
        state.reset_sharded_param()
    return model, states


def load_weights(states: list[ShardParamState], checkpoint: TinyMLP) -> None:
    """Copy the checkpoint's weights into the padded buffers, in grad mode as a loader does."""
    sources = [checkpoint.up.weight, checkpoint.down.weight]
    for state, source in zip(states, sources):
        rows = source.shape[0]
        state.padded_buffer[:rows].copy_(source)
