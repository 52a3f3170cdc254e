"""Regression 3 (E9503): ``forward`` calls ``get_input_embeddings`` that no class defines.

Shape of ``Qwen3VLMoeModel``: a docstring clean-up deleted the accessor pair while ``forward``
still calls it; the text embedding lives one hop down, in ``self.language_model.embed_tokens``.
pylint's ``no-member`` does not see it in an ``nn.Module`` subclass.
"""

from torch import nn


class VisionTower(nn.Module):
    """A stand-in vision encoder that maps patches to the text hidden size."""

    def __init__(self, patch_dim: int, hidden_size: int):
        super().__init__()
        self.proj = nn.Linear(patch_dim, hidden_size)

    def forward(self, pixel_values):
        """Project image patches to hidden states."""
        return self.proj(pixel_values)


class TextModel(nn.Module):
    """The language model: token embedding plus decoder layers."""

    def __init__(self, vocab_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self.layers = nn.ModuleList(nn.Linear(hidden_size, hidden_size) for _ in range(num_layers))

    def forward(self, inputs_embeds):
        """Run the decoder layers over the embeddings."""
        hidden = inputs_embeds
        for layer in self.layers:
            hidden = layer(hidden)
        return hidden


class Qwen3VLMoeModel(nn.Module):
    """Vision-language mixture-of-experts model: vision tower + language model."""

    def __init__(self, vocab_size: int = 32, hidden_size: int = 8, patch_dim: int = 6, num_layers: int = 2):
        super().__init__()
        self.visual = VisionTower(patch_dim, hidden_size)
        self.language_model = TextModel(vocab_size, hidden_size, num_layers)

    def forward(self, input_ids=None, inputs_embeds=None, pixel_values=None):
        """Embed the text (unless embeddings are given), merge image features, run the decoder."""
        if inputs_embeds is None:
            inputs_embeds = self.get_input_embeddings()(input_ids)
        if pixel_values is not None:
            inputs_embeds = inputs_embeds + self.visual(pixel_values).mean(dim=1, keepdim=True)
        return self.language_model(inputs_embeds)


class Qwen3VLMoeForConditionalGeneration(nn.Module):
    """The training entry point: the VL-MoE model plus the language-model head."""

    def __init__(self, vocab_size: int = 32, hidden_size: int = 8):
        super().__init__()
        self.model = Qwen3VLMoeModel(vocab_size=vocab_size, hidden_size=hidden_size)
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)

    def forward(self, input_ids=None, pixel_values=None):
        """Return next-token logits."""
        return self.lm_head(self.model(input_ids=input_ids, pixel_values=pixel_values))
