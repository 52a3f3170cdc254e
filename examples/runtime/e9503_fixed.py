# The fixed twin of e9503_broken.py: `hp-invariants fix` generated the accessors, nothing else changed.
"""The seed incident's VL-MoE training, fixed: the embedding accessors are back.

Same training as ``e9503_broken.py``; ``get_input_embeddings``/``set_input_embeddings`` return and
replace ``self.language_model.embed_tokens`` again. ``hp-invariants run`` passes at world sizes 1
and 2 with the same global loss (``DistributedDataParallel``, each rank on its slice of the global
batch, gradients averaged).

Run: ``hp-invariants run --world-sizes 1,2 -- examples/runtime/e9503_fixed.py`` (or torchrun).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import common

VOCAB, HIDDEN, PATCH_DIM, IMAGE_TOKEN_ID, PATCHES = 32, 16, 12, 3, 2


class VisionStub(nn.Module):
    """Projects flattened image patches to the text hidden size."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(PATCH_DIM, HIDDEN)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.proj(pixel_values).flatten(0, -2)


class MoeBlock(nn.Module):
    """A residual block mixing its experts with a softmax router."""

    def __init__(self, num_experts: int = 3) -> None:
        super().__init__()
        self.router = nn.Linear(HIDDEN, num_experts, bias=False)
        self.experts = nn.ModuleList(nn.Linear(HIDDEN, HIDDEN) for _ in range(num_experts))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        weights = F.softmax(self.router(hidden_states), dim=-1)
        mixed = torch.stack([expert(hidden_states) for expert in self.experts], dim=-1)
        return hidden_states + (mixed * weights.unsqueeze(-2)).sum(-1)


class TextModel(nn.Module):
    """The language model: token embedding, MoE blocks, final norm."""

    def __init__(self, num_layers: int = 2) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(MoeBlock() for _ in range(num_layers))
        self.norm = nn.LayerNorm(HIDDEN)

    def forward(self, inputs_embeds: torch.Tensor) -> torch.Tensor:
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return self.norm(hidden_states)


class VLMoeModel(nn.Module):
    """Vision stub, language model, LM head; image tokens take the vision features."""

    def __init__(self) -> None:
        super().__init__()
        self.visual = VisionStub()
        self.language_model = TextModel()
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def get_input_embeddings(self):
        """Return the module that embeds input ids: ``self.language_model.embed_tokens``."""
        return self.language_model.embed_tokens

    def set_input_embeddings(self, value):
        """Replace the module that embeds input ids: ``self.language_model.embed_tokens``."""
        self.language_model.embed_tokens = value

    def forward(self, input_ids, pixel_values=None, inputs_embeds=None) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.get_input_embeddings()(input_ids)
        if pixel_values is not None:
            image_embeds = self.visual(pixel_values).to(inputs_embeds.dtype)
            image_mask = (input_ids == IMAGE_TOKEN_ID).unsqueeze(-1).expand_as(inputs_embeds)
            inputs_embeds = inputs_embeds.masked_scatter(image_mask, image_embeds)
        return self.lm_head(self.language_model(inputs_embeds))


def global_batch(step: int, batch: int = 8, seq: int = 8):
    """Step ``step``'s global batch: token ids with image tokens, pixel patches, labels."""
    generator = torch.Generator().manual_seed(1000 + step)
    input_ids = torch.randint(4, VOCAB, (batch, seq), generator=generator)
    input_ids[:, 1:1 + PATCHES] = IMAGE_TOKEN_ID
    pixel_values = torch.randn(batch, PATCHES, PATCH_DIM, generator=generator)
    labels = torch.randint(0, VOCAB, (batch, seq), generator=generator)
    return input_ids, pixel_values, labels


def main() -> None:
    """Build, wrap in DDP, train on each rank's slice of the global batch."""
    run = common.start(__doc__.splitlines()[0])
    torch.manual_seed(0)
    model = DistributedDataParallel(VLMoeModel().to(run.device))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(run.steps):
        input_ids, pixel_values, labels = (t.chunk(run.world_size)[run.rank].to(run.device)
                                           for t in global_batch(step))
        logits = model(input_ids, pixel_values)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        run.log(step, loss)
    del model, optimizer  # DDP before its process group: freed after it, its teardown can hang
    common.end()


if __name__ == "__main__":
    main()
