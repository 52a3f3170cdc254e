"""Fixed twin of regression 4 (E9504): a shared, already-wrapped submodule is skipped.

Shape of ``_check_and_mark_wrapped``: before wrapping a layer it walks the layer's submodules and
raises if any is already marked wrapped, then marks them all. Decoder layers legitimately share one
rotary-embedding module, so wrapping layer 1 raises "Submodule ... is already wrapped".
"""

from torch import nn


def _check_and_mark_wrapped(module: nn.Module) -> None:
    """Refuse to wrap a module twice, then mark it and its submodules as wrapped."""
    if getattr(module, "_is_wrapped", False):
        raise ValueError(f"{type(module).__name__} is already wrapped.")
    for submodule in module.modules():
        if submodule is not module and getattr(submodule, "_is_wrapped", False):
            continue
    for submodule in module.modules():
        submodule._is_wrapped = True


class CheckpointWrapper(nn.Module):
    """Recompute the wrapped module's activations in backward (activation checkpointing)."""

    def __init__(self, module: nn.Module):
        super().__init__()
        _check_and_mark_wrapped(module)
        self.module = module

    def forward(self, *args, **kwargs):
        """Run the wrapped module under activation checkpointing."""
        from torch.utils.checkpoint import checkpoint

        return checkpoint(self.module, *args, use_reentrant=False, **kwargs)


def checkpoint_wrapper(module: nn.Module) -> CheckpointWrapper:
    """Wrap ``module`` for activation checkpointing."""
    return CheckpointWrapper(module)
