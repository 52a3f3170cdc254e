# Smoke module for the integration run: one tiny VL-MoE-style model that carries the broken
# shapes of all four rules (E9501-E9504); the test trains the copy `hp-invariants fix` rewrote.
"""A tiny vision-language model with the four idioms of the seed report, in their broken shapes.

- E9501: the final norm keeps its weight in a padded buffer; its parameter's ``_local_tensor``
  is a ``narrow`` view taken under ``no_grad`` and the weight is then loaded in grad mode.
- E9502: ``apply_fully_shard`` runs ``fully_shard`` only when the world size is above 1.
- E9503: ``VLModel.forward`` calls ``self.get_input_embeddings()``, defined nowhere.
- E9504: the checkpoint wrapper's overlap guard raises on the rotary embedding all layers share.

After ``hp-invariants fix`` the same model trains with FSDP2 at any world size; the smoke test
trains it 20 steps in 1 and in 4 processes and compares the losses.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint

IMAGE_TOKEN_ID = 3
VOCAB = 32
HIDDEN = 16
PATCH_DIM = 12
PATCHES = 2


class ShardedParameter(nn.Parameter):
    """A parameter aliasing its local shard; ``is_leaf`` and ``grad`` come from the shard."""

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


class RMSNorm(nn.Module):
    """RMS norm whose weight can be re-bound to a view of a padded buffer."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.padded_weight = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * local_of(self.weight)

    def bind_local_shard(self, pad: int = 4) -> None:
        """Keep the weight in a padded buffer; the parameter's local shard is a view of it."""
        length = self.weight.shape[0]
        local_tensor = self.weight.new_zeros(length + pad)
        with torch.no_grad():
            local_view = local_tensor.narrow(0, 0, length)
        local_view.requires_grad_(True)
        param = ShardedParameter(local_view)
        param._local_tensor = local_view
        self.padded_weight = local_tensor
        self.weight = param

    def load_weight(self, source: torch.Tensor) -> None:
        """Load checkpoint values into the padded buffer (grad mode, as a weight loader does)."""
        self.padded_weight[: source.shape[0]].copy_(source)


class SharedRotaryEmbedding(nn.Module):
    """Rotary position embedding, one instance shared by every decoder layer."""

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
    """Causal attention with the shared rotary, then a two-expert soft MoE MLP."""

    def __init__(self, hidden: int, rotary: SharedRotaryEmbedding, num_experts: int = 2) -> None:
        super().__init__()
        self.rotary_emb = rotary
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        self.router = nn.Linear(hidden, num_experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(num_experts))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(hidden_states).chunk(3, dim=-1)
        attn = F.scaled_dot_product_attention(self.rotary_emb(q), self.rotary_emb(k), v, is_causal=True)
        hidden_states = hidden_states + self.out(attn)
        weights = F.softmax(self.router(hidden_states), dim=-1)
        mixed = torch.stack([F.gelu(expert(hidden_states)) for expert in self.experts], dim=-1)
        return hidden_states + (mixed * weights.unsqueeze(-2)).sum(-1)


class TextModel(nn.Module):
    """Token embedding, decoder layers sharing one rotary embedding, final RMS norm."""

    def __init__(self, num_layers: int = 2) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.rotary_emb = SharedRotaryEmbedding(HIDDEN)
        self.layers = nn.ModuleList(DecoderLayer(HIDDEN, self.rotary_emb) for _ in range(num_layers))
        self.norm = RMSNorm(HIDDEN)

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return self.norm(hidden_states)


class VisionStub(nn.Module):
    """Projects flattened image patches to the text hidden size."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(PATCH_DIM, HIDDEN)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.proj(pixel_values).flatten(0, -2)


class VLModel(nn.Module):
    """Vision stub, language model and LM head; image tokens take the vision features."""

    def __init__(self) -> None:
        super().__init__()
        self.visual = VisionStub()
        self.language_model = TextModel()
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids: torch.Tensor, pixel_values: torch.Tensor) -> torch.Tensor:
        inputs_embeds = self.get_input_embeddings()(input_ids)
        image_embeds = self.visual(pixel_values).to(inputs_embeds.dtype)
        image_mask = (input_ids == IMAGE_TOKEN_ID).unsqueeze(-1).expand_as(inputs_embeds)
        inputs_embeds = inputs_embeds.masked_scatter(image_mask, image_embeds)
        return self.lm_head(self.language_model(inputs_embeds))


def _check_and_mark_wrapped(module: nn.Module) -> None:
    """Refuse to wrap a wrapped module or overlapping regions, then mark the whole region."""
    if getattr(module, "_is_wrapped", False):
        raise ValueError(f"Module '{type(module).__name__}' is already wrapped.")
    for submodule in module.modules():
        if submodule is not module and getattr(submodule, "_is_wrapped", False):
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


def apply_ac(model: VLModel) -> None:
    """Wrap every decoder layer in a CheckpointWrapper, in place."""
    layers = model.language_model.layers
    for index, layer in enumerate(layers):
        layers[index] = CheckpointWrapper(layer)


def apply_fully_shard(model: VLModel, mesh) -> None:
    """FSDP2 per decoder layer and at the root; the padded norm weight is replicated instead."""
    world_size = mesh.size()
    replicated = {model.language_model.norm.weight}
    for layer in model.language_model.layers:
        if world_size > 1:
            fully_shard(layer, mesh=mesh)
    if world_size > 1:
        fully_shard(model, mesh=mesh, ignored_params=replicated)


def sync_replicated_grads(model: VLModel, world_size: int) -> None:
    """Average the gradient of the replicated (FSDP-ignored) norm weight over the ranks."""
    grad = model.language_model.norm.weight.grad
    if grad is not None:
        dist.all_reduce(grad)
        grad /= world_size


def build_model(seed: int = 0) -> VLModel:
    """The model with deterministic initial weights and the norm weight loaded into its buffer."""
    torch.manual_seed(seed)
    model = VLModel()
    norm = model.language_model.norm
    checkpoint_weight = nn.Parameter(torch.linspace(0.5, 1.5, HIDDEN))
    norm.bind_local_shard()
    norm.load_weight(checkpoint_weight)
    return model


def make_batch(step: int, batch: int = 8, seq: int = 8):
    """The global batch of ``step``: token ids with image tokens, pixel patches, labels."""
    generator = torch.Generator().manual_seed(1000 + step)
    input_ids = torch.randint(4, VOCAB, (batch, seq), generator=generator)
    input_ids[:, 1:1 + PATCHES] = IMAGE_TOKEN_ID
    pixel_values = torch.randn(batch, PATCHES, PATCH_DIM, generator=generator)
    labels = torch.randint(0, VOCAB, (batch, seq), generator=generator)
    return input_ids, pixel_values, labels
