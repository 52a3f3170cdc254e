"""E9503 undefined-method-call, at run time.

Broken: ``VLMoeModel.forward`` calls ``self.get_input_embeddings()``, which no class in its
hierarchy defines: the first forward raises the seed report's AttributeError. Fixed by
``hp-invariants fix`` (generated ``get_input_embeddings``/``set_input_embeddings`` pointing at
``self.language_model.embed_tokens``): forward and backward run, and output and every gradient
equal those of a twin model (same weights) that is given ``inputs_embeds`` explicitly. On the
runtime harness, the broken module's AttributeError is reported as E9503 by its run-time signature
and the fixed one passes (every parameter gets a gradient in the first backward).
"""

from __future__ import annotations

import pytest

from smoke_support import TORCH_MISSING, load_module, make_rule_pair

torch = pytest.importorskip("torch", reason=TORCH_MISSING)
launcher = pytest.importorskip("hp_invariants.runtime.launcher")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return make_rule_pair("E9503", "e9503", tmp_path_factory.mktemp("e9503"))


def forward_backward(module_path, device):
    """A rank's body on the harness: one forward and backward of the VL-MoE model."""
    module = load_module(module_path)
    torch.manual_seed(0)
    model = module.build_model(device)
    input_ids, pixel_values = module.make_batch(device)
    model(input_ids=input_ids, pixel_values=pixel_values).square().mean().backward()


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


def test_harness_reports_e9503_and_passes_the_fix(pair, device):
    pair.assert_fixed_clean()
    broken = launcher.run_function(forward_backward, [1], {"module_path": pair.broken, "device": device},
                                   timeout=120, static_check=False)
    (result,) = broken.results
    assert result.status == "FAIL" and result.rule and result.rule["id"] == "E9503", broken.render()
    assert "raised AttributeError: 'VLMoeModel' object has no attribute 'get_input_embeddings'" in result.reason
    fixed = launcher.run_function(forward_backward, [1], {"module_path": pair.fixed, "device": device},
                                  timeout=120, static_check=False)
    (result,) = fixed.results
    assert result.status == "PASS" and "first backward" in result.reason, fixed.render()
