# The fixed twin of e9504_broken.py: `hp-invariants fix` made the raise a `continue`, nothing else changed.
"""The seed incident's VL-MoE activation checkpointing, fixed: a shared submodule is skipped.

Same training as ``e9504_broken.py``; the overlap guard skips a submodule that an earlier layer's
wrapper already marked (the shared rotary embedding has no parameters to checkpoint and is
wrapped once, with layer 0) and still refuses to wrap a wrapped layer. ``hp-invariants run``
passes at world sizes 1 and 2 with the same global loss.

Run: ``hp-invariants run --world-sizes 1,2 -- examples/runtime/e9504_fixed.py`` (or torchrun).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint

import common

VOCAB, HIDDEN = 32, 16


class SharedRotaryEmbedding(nn.Module):
    """Rotary position embedding; one instance serves every layer (no parameters)."""

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
    """Causal single-head attention with the shared rotary, then an MLP; both residual."""

    def __init__(self, rotary: SharedRotaryEmbedding) -> None:
        super().__init__()
        self.rotary_emb = rotary
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.out = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, 2 * HIDDEN), nn.GELU(), nn.Linear(2 * HIDDEN, HIDDEN))
        self.norm1 = nn.LayerNorm(HIDDEN)
        self.norm2 = nn.LayerNorm(HIDDEN)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.norm1(hidden_states)).chunk(3, dim=-1)
        attn = F.scaled_dot_product_attention(self.rotary_emb(q), self.rotary_emb(k), v, is_causal=True)
        hidden_states = hidden_states + self.out(attn)
        return hidden_states + self.mlp(self.norm2(hidden_states))


class TextDecoder(nn.Module):
    """Embedding, decoder layers sharing one rotary embedding, LM head."""

    def __init__(self, num_layers: int = 3) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.rotary_emb = SharedRotaryEmbedding(HIDDEN)
        self.layers = nn.ModuleList(DecoderLayer(self.rotary_emb) for _ in range(num_layers))
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

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
            continue
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


def main() -> None:
    """Build, checkpoint-wrap every layer, wrap in DDP, train on each rank's slice."""
    run = common.start(__doc__.splitlines()[0])
    torch.manual_seed(0)
    model = DistributedDataParallel(apply_ac(TextDecoder()).to(run.device))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(run.steps):
        generator = torch.Generator().manual_seed(2000 + step)
        input_ids = torch.randint(0, VOCAB, (8, 8), generator=generator)
        labels = torch.randint(0, VOCAB, (8, 8), generator=generator)
        input_ids, labels = (t.chunk(run.world_size)[run.rank].to(run.device) for t in (input_ids, labels))
        loss = F.cross_entropy(model(input_ids).flatten(0, 1), labels.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        run.log(step, loss)
    del model, optimizer  # DDP before its process group: freed after it, its teardown can hang
    common.end()


if __name__ == "__main__":
    main()
