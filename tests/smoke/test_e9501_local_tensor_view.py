"""E9501 local-tensor-view-not-detached, at run time.

Broken: the local shard is a ``narrow`` view taken under ``no_grad``; the grad-mode weight load
writes its base in place; building AdamW reads ``param.is_leaf`` and torch raises the seed
report's RuntimeError. Fixed by ``hp-invariants fix`` (``.detach()``): AdamW builds, three steps
run, and the local shard still shares storage with the padded buffer (the optimizer updates
land in the buffer). On the runtime harness (a rank of hp-invariants' launcher), the broken module
fails its optimizer-construction check as E9501 and the fixed one passes it.
"""

from __future__ import annotations

import contextlib

import pytest

from smoke_support import TORCH_MISSING, load_module, make_rule_pair

torch = pytest.importorskip("torch", reason=TORCH_MISSING)
launcher = pytest.importorskip("hp_invariants.runtime.launcher")

SEED_ERROR = ("A view was created in no_grad mode and its base or another view of its base "
              "has been modified inplace with grad mode enabled")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return make_rule_pair("E9501", "e9501", tmp_path_factory.mktemp("e9501"))


def _loaded_model(module, device):
    torch.manual_seed(0)
    checkpoint = module.TinyMLP().to(device)  # parameters that require grad, as loaded weights do
    model, states = module.build_sharded_model(device)
    module.load_weights(states, checkpoint)
    return model, states, checkpoint


def build_optimizer(module_path, device):
    """A rank's body on the harness: load the weights into the sharded model, build AdamW."""
    model, _, _ = _loaded_model(load_module(module_path), device)
    torch.optim.AdamW(model.parameters(), lr=1e-2)


def test_check_flags_broken_module(pair):
    pair.assert_flagged()


def test_fix_makes_check_clean(pair):
    pair.assert_fixed_clean()


def test_broken_optimizer_build_raises_seed_error(pair, device):
    module = load_module(pair.broken)
    model, _, _ = _loaded_model(module, device)
    with pytest.raises(RuntimeError, match=SEED_ERROR):
        torch.optim.AdamW(model.parameters(), lr=1e-2)


def test_fixed_optimizer_builds_and_steps(pair, device):
    pair.assert_fixed_clean()
    module = load_module(pair.fixed)
    model, states, checkpoint = _loaded_model(module, device)
    for state, source in zip(states, (checkpoint.up.weight, checkpoint.down.weight)):
        local = state.sharded_param._local_tensor
        assert local.is_leaf and local.requires_grad
        assert local.untyped_storage().data_ptr() == state.padded_buffer.untyped_storage().data_ptr()
        torch.testing.assert_close(local, source.detach())

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(4, 8, generator=generator).to(device)
    target = torch.randn(4, 8, generator=generator).to(device)
    before = [state.sharded_param._local_tensor.detach().clone() for state in states]
    losses = []
    for _ in range(3):
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))), losses
    for state, old in zip(states, before):
        local = state.sharded_param._local_tensor
        rows = local.shape[0]
        assert not torch.equal(local.detach(), old), "the optimizer step did not update the shard"
        # The shard still aliases the padded buffer: the updates are visible through it.
        assert local.untyped_storage().data_ptr() == state.padded_buffer.untyped_storage().data_ptr()
        torch.testing.assert_close(state.padded_buffer[:rows].detach(), local.detach())


def test_harness_reports_e9501_and_passes_the_fix(pair, device):
    pair.assert_fixed_clean()
    broken = launcher.run_function(build_optimizer, [1], {"module_path": pair.broken, "device": device},
                                   timeout=120, static_check=False)
    (result,) = broken.results
    assert result.status == "FAIL" and result.rule and result.rule["id"] == "E9501", broken.render()
    assert "at optimizer construction" in result.reason and SEED_ERROR in result.reason, result.reason
    fixed = launcher.run_function(build_optimizer, [1], {"module_path": pair.fixed, "device": device},
                                  timeout=120, static_check=False)
    (result,) = fixed.results
    assert result.status == "PASS" and "optimizer construction" in result.reason, fixed.render()


def _grad_mode_write(tensor, device):
    """Write ``tensor`` in place in grad mode with a value that requires grad (a weight load or an
    upcast of loaded weights): ``tensor`` now requires grad."""
    tensor.mul_(torch.ones(tensor.shape, device=device, requires_grad=True))


@pytest.mark.parametrize("no_grad", [True, False], ids=["no_grad", "grad_mode"])
def test_a_view_of_a_temporary_stays_a_leaf_when_the_named_tensor_is_written(device, no_grad):
    """Why temporary_base_ok is clean: a view of ``t.detach()``, ``t.data`` or a fresh allocation
    that only the view holds stays a leaf whatever is written into ``t`` in place (the write goes
    through ``t``'s autograd state, not the alias's); the near miss, a view of ``t`` itself, is the
    seed's failure: its ``is_leaf`` raises (made under no_grad) or turns False (made in grad mode)."""
    makers = {"detach": lambda t: t.detach().narrow(0, 0, 2), "data": lambda t: t.data[0:2],
              "new_zeros": lambda t: t.new_zeros(4).narrow(0, 0, 2),
              # as_subclass is a view of its receiver: of a temporary, a view of a temporary (the last
              # one is how to detach `t.narrow(...).as_subclass(nn.Parameter)` by hand and keep its class;
              # E9501 offers no fix for it: `.detach()` after it returns a plain Tensor)
              "detach_as_subclass": lambda t: t.detach().as_subclass(torch.Tensor).narrow(0, 0, 2),
              "factory_as_subclass": lambda t: torch.zeros(4, device=t.device).as_subclass(torch.nn.Parameter)[:2],
              "fixed_as_subclass": lambda t: t.narrow(0, 0, 2).detach().as_subclass(torch.nn.Parameter)}
    for name, make in makers.items():
        base = torch.zeros(4, device=device)
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            local = make(base)
        assert local._is_view(), name
        _grad_mode_write(base, device)
        assert base.requires_grad and local.is_leaf and not local.requires_grad, name
        if name == "fixed_as_subclass":
            assert type(local) is torch.nn.Parameter  # `.detach()` after it would give a plain Tensor
    # the near misses: a view of t itself, also aliased by as_subclass, and a bare alias (temporary_base.py)
    for make in (lambda t: t.narrow(0, 0, 2), lambda t: t.narrow(0, 0, 2).as_subclass(torch.Tensor),
                 lambda t: t.as_subclass(torch.Tensor)):
        base = torch.zeros(4, device=device)
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            local = make(base)
        _grad_mode_write(base, device)
        if no_grad:
            with pytest.raises(RuntimeError, match=SEED_ERROR):
                local.is_leaf  # noqa: B018 - reading it is what raises
        else:
            assert not local.is_leaf
