"""Fixed twin of regression 1 (E9501): the local shard view is detached, a clean leaf.

Shape of ``TorchHSDPParamV2.reset_sharded_param`` after meta-init + ``to_empty``: the local shard is
cut out of the padded shard buffer with ``narrow`` inside ``torch.no_grad()`` and bound to the
DTensor's ``_local_tensor``. A later grad-mode in-place write to the buffer (weight load,
mixed-precision upcast) makes ``param.is_leaf`` raise when ``torch.optim.AdamW`` is built.
"""

import torch
from torch import nn


def set_requires_grad_if_needed(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Copy ``requires_grad`` from ``src`` to ``dst`` when they differ."""
    if src.requires_grad != dst.requires_grad:
        dst.requires_grad_(src.requires_grad)


class HSDPParam:
    """One parameter managed by the fully-sharded data-parallel state."""

    def __init__(self, sharded_param: nn.Parameter, shard_dim: int = 0):
        self.sharded_param = sharded_param
        self.shard_dim = shard_dim
        self._sharded_param_data = None

    def reset_sharded_param(self) -> None:
        """Re-bind the sharded parameter to the freshly materialized padded shard buffer."""
        local_tensor = self.sharded_param._local_tensor
        length = local_tensor.size(self.shard_dim) if local_tensor.numel() > 0 else 0
        padded = torch.empty_like(local_tensor)
        self._sharded_param_data = padded.view(-1)
        with torch.no_grad():
            local_view = padded.narrow(dim=self.shard_dim, start=0, length=length).detach()
        set_requires_grad_if_needed(self.sharded_param, local_view)
        self.sharded_param._local_tensor = local_view
