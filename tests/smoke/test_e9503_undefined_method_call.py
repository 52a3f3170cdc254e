"""E9503 undefined-method-call, at run time.

Broken: ``VLMoeModel.forward`` calls ``self.get_input_embeddings()``, which no class in its
hierarchy defines: the first forward raises the seed report's AttributeError. Fixed by
``hp-invariants fix`` (generated ``get_input_embeddings``/``set_input_embeddings`` pointing at
``self.language_model.embed_tokens``): forward and backward run, and output and every gradient
equal those of a twin model (same weights) that is given ``inputs_embeds`` explicitly.
"""

from __future__ import annotations

import pytest

from smoke_support import TORCH_MISSING, load_module, make_rule_pair

torch = pytest.importorskip("torch", reason=TORCH_MISSING)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return make_rule_pair("E9503", "e9503", tmp_path_factory.mktemp("e9503"))


def test_check_flags_broken_module(pair):
    pair.assert_flagged()


def test_fix_makes_check_clean(pair):
    pair.assert_fixed_clean()


def test_broken_forward_raises_attribute_error(pair, device):
    module = load_module(pair.broken)
    torch.manual_seed(0)
    model = module.build_model(device)
    input_ids, pixel_values = module.make_batch(device)
    with pytest.raises(AttributeError,
                       match="'VLMoeModel' object has no attribute 'get_input_embeddings'"):
        model(input_ids=input_ids, pixel_values=pixel_values)


def test_fixed_forward_backward_match_explicit_embedding(pair, device):
    pair.assert_fixed_clean()
    module = load_module(pair.fixed)
    torch.manual_seed(0)
    model = module.build_model(device)
    twin = module.build_model(device)
    twin.load_state_dict(model.state_dict())
    assert model.get_input_embeddings() is model.language_model.embed_tokens

    input_ids, pixel_values = module.make_batch(device)
    out = model(input_ids=input_ids, pixel_values=pixel_values)
    ref = twin(input_ids=input_ids, pixel_values=pixel_values,
               inputs_embeds=twin.language_model.embed_tokens(input_ids))
    torch.testing.assert_close(out, ref)
    out.square().mean().backward()
    ref.square().mean().backward()
    grads = dict(twin.named_parameters())
    for name, param in model.named_parameters():
        assert param.grad is not None, f"no gradient reached {name}"
        torch.testing.assert_close(param.grad, grads[name].grad, msg=lambda m, n=name: f"{n}: {m}")

    # The generated setter is the accessor's pair: it swaps the embedding the forward uses.
    replacement = torch.nn.Embedding(32, 16).to(device)
    model.set_input_embeddings(replacement)
    assert model.get_input_embeddings() is replacement
    assert model.language_model.embed_tokens is replacement
