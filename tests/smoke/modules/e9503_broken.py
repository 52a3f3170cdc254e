# Smoke module for E9503 (undefined-method-call): a VL-MoE model whose forward calls
# self.get_input_embeddings() although no class in its hierarchy defines it.
"""A tiny vision-language MoE model missing its embedding accessors (E9503, broken shape).

``VLMoeModel.forward`` embeds the token ids with ``self.get_input_embeddings()`` when no
``inputs_embeds`` are given, then scatters the vision features into the image-token positions;
the accessor was lost in a docstring clean-up, so the first forward raises
``AttributeError: 'VLMoeModel' object has no attribute 'get_input_embeddings'``.
``hp-invariants fix`` generates ``get_input_embeddings``/``set_input_embeddings`` pointing at
``self.language_model.embed_tokens``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

IMAGE_TOKEN_ID = 3


class VisionStub(nn.Module):
    """Projects flattened image patches to the text hidden size."""

    def __init__(self, patch_dim: int = 12, hidden: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(patch_dim, hidden)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.proj(pixel_values).flatten(0, -2)


class MoeBlock(nn.Module):
    """A residual block mixing a few experts with a softmax router."""

    def __init__(self, hidden: int = 16, num_experts: int = 3) -> None:
        super().__init__()
        self.router = nn.Linear(hidden, num_experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(num_experts))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        weights = F.softmax(self.router(hidden_states), dim=-1)
        mixed = torch.stack([expert(hidden_states) for expert in self.experts], dim=-1)
        return hidden_states + (mixed * weights.unsqueeze(-2)).sum(-1)


class TextModel(nn.Module):
    """The language model: token embedding, MoE blocks, final norm."""

    def __init__(self, vocab: int = 32, hidden: int = 16, num_layers: int = 2) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(MoeBlock(hidden) for _ in range(num_layers))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return self.norm(hidden_states)


class VLMoeModel(nn.Module):
    """Vision stub plus language model; image tokens take the vision features."""

    def __init__(self) -> None:
        super().__init__()
        self.visual = VisionStub()
        self.language_model = TextModel()

    def forward(self, input_ids=None, inputs_embeds=None, pixel_values=None) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.get_input_embeddings()(input_ids)
        if pixel_values is not None:
            image_embeds = self.visual(pixel_values).to(inputs_embeds.dtype)
            image_mask = (input_ids == IMAGE_TOKEN_ID).unsqueeze(-1).expand_as(inputs_embeds)
            inputs_embeds = inputs_embeds.masked_scatter(image_mask, image_embeds)
        return self.language_model(inputs_embeds)


def build_model(device: torch.device) -> VLMoeModel:
    """Build the model on ``device`` (the trainer's entry point constructs it this way)."""
    return VLMoeModel().to(device)


def make_batch(device: torch.device, batch: int = 2, seq: int = 6, patches: int = 2):
    """Token ids with ``patches`` image tokens per sample, and matching pixel patches."""
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(4, 32, (batch, seq), generator=generator)
    input_ids[:, 1:1 + patches] = IMAGE_TOKEN_ID
    pixel_values = torch.randn(batch, patches, 12, generator=generator)
    return input_ids.to(device), pixel_values.to(device)
