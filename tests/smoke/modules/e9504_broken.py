# Smoke module for E9504 (wrap-overlap-hard-raise): the activation-checkpoint overlap guard
# raises on a submodule that every decoder layer legitimately shares (the rotary embedding).
"""A decoder whose layers share one rotary embedding, checkpoint-wrapped layer by layer (E9504).

:class:`CheckpointWrapper` runs its layer under ``torch.utils.checkpoint.checkpoint`` (non
reentrant). Before wrapping, ``_check_and_mark_wrapped`` refuses a layer that is itself wrapped
already, then walks ``layer.modules()`` and raises when a submodule carries the ``_is_wrapped``
marker; finally it marks every submodule. Layer 0 marks the shared rotary embedding, so wrapping
layer 1 raises ``ValueError: Submodule 'SharedRotaryEmbedding' of 'DecoderLayer' is already
wrapped``. ``hp-invariants fix`` turns that raise into ``continue``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


class SharedRotaryEmbedding(nn.Module):
    """Rotary position embedding; one instance serves every layer (stateless, no parameters)."""

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[-2], device=x.device, dtype=self.inv_freq.dtype)
        angles = torch.outer(positions, self.inv_freq)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class DecoderLayer(nn.Module):
    """Single-head causal attention with rotary positions, then an MLP; both residual."""

    def __init__(self, hidden: int, rotary: SharedRotaryEmbedding) -> None:
        super().__init__()
        self.rotary_emb = rotary
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Linear(2 * hidden, hidden))
        self.norm1 = nn.LayerNorm(hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm1(hidden_states)).chunk(3, dim=-1)
        q, k = self.rotary_emb(q), self.rotary_emb(k)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        hidden_states = hidden_states + self.out(attn)
        return hidden_states + self.mlp(self.norm2(hidden_states))


class TextDecoder(nn.Module):
    """Embedding, decoder layers sharing one rotary embedding, and an output head."""

    def __init__(self, vocab: int = 32, hidden: int = 16, num_layers: int = 3) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.rotary_emb = SharedRotaryEmbedding(hidden)
        self.layers = nn.ModuleList(DecoderLayer(hidden, self.rotary_emb) for _ in range(num_layers))
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden_states = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return self.lm_head(hidden_states)


def _check_and_mark_wrapped(module: nn.Module) -> None:
    """Refuse to wrap a wrapped module or overlapping regions, then mark the whole region."""
    if getattr(module, "_is_wrapped", False):
        raise ValueError(f"Module '{type(module).__name__}' is already wrapped.")
    for submodule in module.modules():
        if submodule is module:
            continue
        if getattr(submodule, "_is_wrapped", False):
            raise ValueError(
                f"Submodule '{type(submodule).__name__}' of '{type(module).__name__}' is already "
                "wrapped. Wrapping overlapping module regions is not allowed."
            )
    for submodule in module.modules():
        submodule._is_wrapped = True


class CheckpointWrapper(nn.Module):
    """Recomputes the wrapped module's activations in backward (non-reentrant checkpoint)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        _check_and_mark_wrapped(module)
        self.module = module

    def forward(self, *args, **kwargs):
        return checkpoint(self.module, *args, use_reentrant=False, **kwargs)


def apply_ac(model: TextDecoder) -> TextDecoder:
    """Wrap every decoder layer in a CheckpointWrapper, in place."""
    for index, layer in enumerate(model.layers):
        model.layers[index] = CheckpointWrapper(layer)
    return model
