"""E9504 wrap-overlap-hard-raise, at run time.

Broken: every decoder layer shares one rotary embedding; the overlap guard of the checkpoint
wrapper raises the seed report's ValueError when layer 1 is wrapped. Fixed by
``hp-invariants fix`` (the raise becomes ``continue``): every layer wraps, the rotary is still
one shared instance, double-wrapping the same layer is still refused, and loss and every
gradient equal those of the unwrapped model with the same weights. On the runtime harness, the
broken module's ValueError is reported as E9504 by its run-time signature and the fixed one passes.
"""

from __future__ import annotations

import copy

import pytest

from smoke_support import TORCH_MISSING, load_module, make_rule_pair

torch = pytest.importorskip("torch", reason=TORCH_MISSING)
launcher = pytest.importorskip("hp_invariants.runtime.launcher")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return make_rule_pair("E9504", "e9504", tmp_path_factory.mktemp("e9504"))


def _batch(device):
    generator = torch.Generator().manual_seed(4)
    input_ids = torch.randint(0, 32, (2, 7), generator=generator).to(device)
    labels = torch.randint(0, 32, (2, 7), generator=generator).to(device)
    return input_ids, labels


def _loss(model, input_ids, labels):
    logits = model(input_ids)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())


def wrap_and_step(module_path, device):
    """A rank's body on the harness: checkpoint-wrap every layer, one forward and backward."""
    module = load_module(module_path)
    model = module.apply_ac(module.TextDecoder().to(device))
    _loss(model, *_batch(device)).backward()


def test_check_flags_broken_module(pair):
    pair.assert_flagged()


def test_fix_makes_check_clean(pair):
    pair.assert_fixed_clean()


def test_broken_wrapping_layer_one_raises(pair, device):
    module = load_module(pair.broken)
    model = module.TextDecoder().to(device)
    with pytest.raises(ValueError, match="Submodule 'SharedRotaryEmbedding' of 'DecoderLayer' "
                                         "is already wrapped"):
        module.apply_ac(model)
    # Layer 0 got wrapped, layer 1 was refused.
    assert isinstance(model.layers[0], module.CheckpointWrapper)
    assert not isinstance(model.layers[1], module.CheckpointWrapper)


def test_fixed_wraps_every_layer_and_matches_unwrapped(pair, device):
    pair.assert_fixed_clean()
    module = load_module(pair.fixed)
    torch.manual_seed(0)
    reference = module.TextDecoder().to(device)
    model = module.apply_ac(copy.deepcopy(reference))
    assert all(isinstance(layer, module.CheckpointWrapper) for layer in model.layers)
    rotaries = {id(layer.module.rotary_emb) for layer in model.layers}
    assert rotaries == {id(model.rotary_emb)}, "the layers must still share one rotary embedding"
    with pytest.raises(ValueError, match="already wrapped"):
        module.CheckpointWrapper(model.layers[0].module)  # the root check still holds

    input_ids, labels = _batch(device)
    loss = _loss(model, input_ids, labels)
    ref_loss = _loss(reference, input_ids, labels)
    torch.testing.assert_close(loss, ref_loss)
    loss.backward()
    ref_loss.backward()
    ref_params = dict(reference.named_parameters())
    names = []
    for name, param in model.named_parameters():
        ref_name = name.replace(".module.", ".")
        names.append(ref_name)
        assert param.grad is not None, f"no gradient reached {name}"
        torch.testing.assert_close(param.grad, ref_params[ref_name].grad,
                                   msg=lambda m, n=name: f"{n}: {m}")
    assert sorted(names) == sorted(ref_params)


def test_harness_reports_e9504_and_passes_the_fix(pair, device):
    pair.assert_fixed_clean()
    broken = launcher.run_function(wrap_and_step, [1], {"module_path": pair.broken, "device": device},
                                   timeout=120, static_check=False)
    (result,) = broken.results
    assert result.status == "FAIL" and result.rule and result.rule["id"] == "E9504", broken.render()
    assert "Submodule 'SharedRotaryEmbedding' of 'DecoderLayer' is already wrapped" in result.reason
    fixed = launcher.run_function(wrap_and_step, [1], {"module_path": pair.fixed, "device": device},
                                  timeout=120, static_check=False)
    assert fixed.results[0].status == "PASS", fixed.render()
