"""Unit tests of E9501 local-tensor-view-not-detached: options, confidence, messages, fixes, edges."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hp_invariants import engine, fixer
from hp_invariants.model import Applicability, Confidence
from hp_invariants.registry import get_rule
from hp_invariants.source import SourceFile

RULE = get_rule("E9501")


def check(code: str, **options):
    """Return the E9501 findings of ``code`` (dedented), with ``options`` set on the rule."""
    session = engine.session_for_rules([RULE], {"E9501": options} if options else None)
    result = session.check_bytes("case.py", textwrap.dedent(code).encode())
    assert result.problems == []
    return result.findings


def fix(code: str, unsafe: bool = False) -> str:
    """Return ``code`` after applying E9501 fixes until stable."""
    return fixer.fix_text(engine.session_for_rules([RULE]), "case.py", textwrap.dedent(code), unsafe=unsafe).text


def positions(findings):
    return [(f.line, f.col + 1) for f in findings]


SEED = """
import torch

def reset(self, local_tensor, length):
    with torch.no_grad():
        local_view = local_tensor.narrow(dim=0, start=0, length=length)
    self.sharded_param._local_tensor = local_view
"""


def test_seed_shape_is_high_confidence_with_safe_fix_at_the_creation():
    (finding,) = check(SEED)
    assert finding.confidence is Confidence.HIGH
    assert (finding.line, finding.col) == (7, 4)  # the store statement (the view is on line 6)
    assert finding.message.startswith("'narrow' view bound to '_local_tensor' without .detach()")
    assert finding.fix.applicability is Applicability.SAFE
    assert finding.fix.message == "Append .detach() where the view is created"  # no_grad: requires_grad is kept
    (edit,) = finding.fix.edits
    assert edit.start == edit.end == (6, 71) and edit.content == ".detach()"
    assert "narrow(dim=0, start=0, length=length).detach()\n" in fix(SEED)
    assert check(fix(SEED)) == []


def test_grad_mode_view_is_inference_and_unsafe_fix():
    code = """
    def reset(self, local_tensor, n):
        self.sharded_param._local_tensor = local_tensor.narrow(0, 0, n)
    """
    (finding,) = check(code)
    assert finding.confidence is Confidence.INFERENCE
    assert finding.fix.applicability is Applicability.UNSAFE
    # a new user's find: on a DTensor answering requires_grad from its local tensor, the detached view
    # silently froze the parameter; the unsafe fix's title says what to restore
    assert "does not require grad: restore requires_grad on the parameter" in finding.fix.message
    assert (finding.line, finding.col + 1) == (3, 40)  # the view expression itself
    assert fix(code) == textwrap.dedent(code)
    assert "narrow(0, 0, n).detach()" in fix(code, unsafe=True)


@pytest.mark.parametrize("region", [
    "with torch.no_grad():",
    "with torch.inference_mode():",
    "with torch.inference_mode(True):",
    "with torch.set_grad_enabled(False):",
    "with torch.set_grad_enabled(mode=False):",
    "with no_grad():",
    "with torch.autograd.grad_mode.no_grad():",
    "with _no_grad(), open('f') as fh:",
])
def test_no_grad_regions_give_high(region):
    code = f"""
    import torch
    def f(p, t):
        {region}
            v = t[:2]
        p._local_tensor = v
    """
    (finding,) = check(code)
    assert finding.confidence is Confidence.HIGH


@pytest.mark.parametrize("region", [
    "with torch.inference_mode(False):",
    "with torch.set_grad_enabled(True):",
    "with torch.set_grad_enabled(flag):",
    "with torch.enable_grad():",
    "with contextlib.nullcontext():",
])
def test_grad_regions_give_inference(region):
    code = f"""
    import torch
    def f(p, t, flag):
        {region}
            v = t[:2]
        p._local_tensor = v
    """
    (finding,) = check(code)
    assert finding.confidence is Confidence.INFERENCE


def test_enable_grad_inside_no_grad_turns_it_off():
    code = """
    import torch
    def f(p, t):
        with torch.no_grad():
            with torch.enable_grad():
                p._local_tensor = t.view(-1)
    """
    assert check(code)[0].confidence is Confidence.INFERENCE


@pytest.mark.parametrize("decorator", ["@torch.no_grad()", "@torch.no_grad", "@torch.inference_mode()", "@no_grad()"])
def test_decorated_function_gives_high(decorator):
    code = f"""
    import torch
    {decorator}
    def f(p, t):
        p._local_tensor = t.t()
    """
    assert check(code)[0].confidence is Confidence.HIGH


def test_no_grad_of_enclosing_block_does_not_leak_into_nested_function():
    code = """
    import torch
    def outer(p, t):
        with torch.no_grad():
            def inner():
                p._local_tensor = t.t()
            return inner
    """
    assert check(code)[0].confidence is Confidence.INFERENCE


def test_set_grad_enabled_statement_form():
    code = """
    import torch
    def f(p, q, t):
        torch.set_grad_enabled(False)
        p._local_tensor = t.t()
        torch.set_grad_enabled(True)
        q._local_tensor = t.t()
    """
    assert [f.confidence for f in check(code)] == [Confidence.HIGH, Confidence.INFERENCE]


def test_option_no_grad_contexts():
    code = """
    def f(p, t):
        with frozen_params():
            p._local_tensor = t.t()
    """
    assert check(code)[0].confidence is Confidence.INFERENCE
    finding = check(code, **{"no-grad-contexts": ("frozen_params",)})[0]
    assert finding.confidence is Confidence.HIGH


def test_option_local_tensor_attrs():
    code = """
    def f(p, t):
        p._local_tensor = t.t()
        p._shard = t.t()
    """
    assert positions(check(code)) == [(3, 23)]
    found = check(code, **{"local-tensor-attrs": ("_shard", "_local_tensor")})
    assert positions(found) == [(3, 23), (4, 16)]
    assert found[1].message.startswith("'t' view bound to '_shard'")


def test_message_names_innermost_view_op_and_subscript():
    found = check("""
    def f(p, t, n):
        p._local_tensor = t.narrow(0, 0, n).view(-1)
        p._local_tensor = t[:n].transpose(0, 1)
        p._local_tensor = t.chunk(2)[1]
    """)
    assert [f.args[:2] for f in found] == [
        ("narrow", "_local_tensor"), ("subscript", "_local_tensor"), ("chunk", "_local_tensor")]
    assert [f.args[2] for f in found] == ["'narrow' view made at line 3, grad mode not known off",
                                          "'subscript' view made at line 4, grad mode not known off",
                                          "'chunk' view made at line 5, grad mode not known off"]


def test_chain_is_detached_once_at_its_end():
    code = """
    import torch
    @torch.no_grad()
    def f(p, t, n):
        p._local_tensor = t.narrow(0, 0, n).view(-1).float()
    """
    out = fix(code)
    assert "t.narrow(0, 0, n).view(-1).float().detach()\n" in out
    assert ".detach().detach()" not in out


def test_already_detached_chains_are_clean():
    assert check("""
    def f(p, t, n):
        p._local_tensor = t.narrow(0, 0, n).detach()
        p._local_tensor = t.narrow(0, 0, n).clone()
        p._local_tensor = t.narrow(0, 0, n).data
        p._local_tensor = t.narrow(0, 0, n).detach().requires_grad_(True)
        p._local_tensor = t.view(-1).detach().to("cpu")
    """) == []


def test_pass_through_calls_keep_the_view():
    found = check("""
    def f(p, t, n):
        p._local_tensor = t[:n].to("cpu")
        p._local_tensor = t[:n].contiguous()
        p._local_tensor = t[:n].requires_grad_(True)
        p._local_tensor = t[:n].half()
    """)
    assert len(found) == 4


def test_reassignment_order_matters():
    code = """
    def f(p, t, n):
        v = t[:n]
        p._local_tensor = v
        v = v.clone()
        p._local_tensor = v
    """
    assert positions(check(code)) == [(4, 5)]


def test_loop_carried_view_is_found_on_the_second_pass():
    code = """
    def f(p, t, items):
        v = t.clone()
        for item in items:
            p._local_tensor = v
            v = t[:item]
    """
    assert positions(check(code)) == [(5, 9)]


def test_try_and_match_paths_join():
    code = """
    def f(p, t, n, kind):
        try:
            v = t[:n]
        except ValueError:
            v = t.clone()
        p._local_tensor = v
        match kind:
            case 1:
                w = t.t()
            case _:
                w = t.clone()
        p._local_tensor = w
    """
    assert positions(check(code)) == [(7, 5), (13, 5)]


def test_detach_inplace_does_not_clean():
    code = """
    def f(p, t, n):
        v = t[:n]
        v.detach_()
        p._local_tensor = v
    """
    assert len(check(code)) == 1


def test_two_views_reaching_one_store_get_both_fixed():
    code = """
    import torch
    @torch.no_grad()
    def f(p, t, n, flag):
        if flag:
            v = t[:n]
        else:
            v = t.t()
        p._local_tensor = v
    """
    (finding,) = check(code)
    assert len(finding.fix.edits) == 2
    out = fix(code)
    assert "v = t[:n].detach()" in out and "v = t.t().detach()" in out


def test_unpack_fix_keeps_crlf_and_indentation():
    code = "import torch\r\n@torch.no_grad()\r\ndef f(p, t):\r\n    a, b = t.split(2)\r\n    p._local_tensor = a\r\n"
    source = SourceFile.from_bytes("case.py", code.encode())
    out = fixer.fix_source(engine.session_for_rules([RULE]), source, engine.session_for_rules([RULE]).settings_for(source.path)).text
    assert out == code.replace("t.split(2)\r\n", "t.split(2)\r\n    a = a.detach()\r\n")


def test_unpack_at_end_of_file_without_newline():
    code = ("import torch\n@torch.no_grad()\ndef f(p, t, xs):\n    a = t.clone()\n    for x in xs:\n"
            "        p._local_tensor = a\n        a, b = t.split(x)")
    (finding,) = check(code)  # loop-carried: the unpacked `a` reaches the store on the next turn
    source = SourceFile.from_bytes("case.py", code.encode())
    assert fixer.fix_source(engine.session_for_rules([RULE]), source, engine.session_for_rules([RULE]).settings_for(source.path)).text == code + "\n        a = a.detach()"


def test_loop_body_on_the_for_line_is_report_only():
    (finding,) = check("""
    import torch
    @torch.no_grad()
    def f(p, t):
        for a in t.unbind(0): p._local_tensor = a
    """)
    assert finding.fix is None and finding.confidence is Confidence.HIGH


def test_non_views_and_reads_are_clean():
    assert check("""
    import torch
    import numpy as np
    def f(p, other, t, n, outputs, idx):
        p._local_tensor = other._local_tensor
        p._local_tensor = torch.empty(n)
        p._local_tensor = torch.zeros_like(t)
        p._other = t.view(-1)
        x = p._local_tensor.view(-1)
        p._local_tensor = np.transpose(t)
        p._local_tensor = outputs[0]
        p._local_tensor = t[idx]
        p._local_tensor = t[[0, 1]]
        p._local_tensor = t[0, idx]
        p._local_tensor = t.split(2)
        p._local_tensor = t.reshape(-1).clone()
        return x
    """) == []


def test_int_index_needs_tensor_evidence():
    found = check("""
    import torch
    def f(p, q, t, items):
        p._local_tensor = items[0]
        p._local_tensor = q._local_tensor[0]
        p._local_tensor = t.t()[0]
        p._local_tensor = torch.flatten(t)[0]
        p._local_tensor = t[0, 1]
    """)
    assert positions(found) == [(5, 23), (6, 23), (7, 23)]


def test_seq_through_local_and_its_slice():
    found = check("""
    def f(p, t):
        parts = t.chunk(4)
        rest = parts[1:]
        p._local_tensor = rest[0]
        p._local_tensor = parts
    """)
    assert positions(found) == [(5, 23)]


def test_pylint_disable_on_the_store_line():
    code = """
    import torch
    def reset(self, local_tensor, length):
        with torch.no_grad():
            local_view = local_tensor.narrow(0, 0, length)
        self.sharded_param._local_tensor = local_view  # pylint: disable=local-tensor-view-not-detached
        self.sharded_param._local_tensor = local_tensor[:length]  # noqa: E9501
    """
    assert check(code) == []


def test_prefilter_skips_files_without_the_attribute():
    assert RULE.applies_to("x._local_tensor = y")
    assert not RULE.applies_to("x.weight = y.t()")


def test_walrus_and_conditional_values():
    found = check("""
    def f(p, t, c):
        p._local_tensor = t[:2] if c else t.clone()
        p._local_tensor = (v := t.t())
        p._local_tensor = c and t.T
    """)
    assert positions(found) == [(3, 23), (4, 29), (5, 29)]
    assert "t[:2].detach() if c else t.clone()" in fix("""
    import torch
    @torch.no_grad()
    def f(p, t, c):
        p._local_tensor = t[:2] if c else t.clone()
    """)


def test_deeply_nested_loops_stay_fast():
    body = "def f(p, t, xs):\n"
    indent = "    "
    for depth in range(30):
        body += indent * (depth + 1) + f"for x{depth} in xs:\n"
    body += indent * 31 + "v = t[:1]\n" + indent * 31 + "p._local_tensor = v\n"
    assert len(check(body)) == 1


# ---------------------------------------------------------------------- helpers, loops, receivers (issue 11)
HELPER = """
import torch

def _shard(t, n):
    return t.narrow(0, 0, n)

def reset(self, t, n):
    {prefix}self.p._local_tensor = _shard(t, n)
"""


@pytest.mark.parametrize("prefix, confidence", [
    ("", Confidence.INFERENCE),
    ("with torch.no_grad():\n        ", Confidence.HIGH),  # the helper runs under its caller's no_grad
])
def test_helper_view_takes_the_grad_mode_of_its_call(prefix, confidence):
    (finding,) = check(HELPER.format(prefix=prefix))
    assert finding.confidence is confidence
    assert finding.message.startswith("'narrow' view")
    assert (finding.fix.applicability is Applicability.SAFE) == (confidence is Confidence.HIGH)


def test_recursive_and_mutually_recursive_helpers_terminate():
    code = """
    def a(t, n):
        return b(t, n - 1) if n else t.view(-1)

    def b(t, n):
        return a(t, n)

    def loop(t):
        return loop(t)

    def reset(self, t):
        self.p._local_tensor = a(t, 3)
        self.q._local_tensor = loop(t)
    """
    assert [f.line for f in check(code)] == [12]


def test_helper_of_another_class_or_shadowed_name_is_not_followed():
    code = """
    def _shard(t):
        return t[:1]

    class A:
        def m(self, t):
            return t[:1]

    class B:
        def run(self, t, _shard):
            self.p._local_tensor = _shard(t)  # a parameter, not the module function
            self.q._local_tensor = self.m(t)  # B has no m
    """
    assert check(code) == []


@pytest.mark.parametrize("receiver, flagged", [
    ("p.grad", False), ("p.main_grad", False), ("sharded_grad", False), ("grads[0]", False),
    ("self.flat_buffer", False), ("param_grad", False),
    ("p", True), ("grad_param", True), ("self.sharded_param", True), ("gradual", True), ("buffer_weight", True),
])
def test_gradient_and_buffer_receivers_are_not_parameters(receiver, flagged):
    code = f"""
    def bind(p, sharded_grad, grads, param_grad, grad_param, gradual, buffer_weight, flat):
        {receiver}._local_tensor = flat[:1]
    """
    assert bool(check(code)) is flagged


def test_the_reported_view_of_a_helper_call_is_the_same_every_run():
    """A helper whose body makes two views exports two origins on the call; their order was left to
    set order (memory addresses), so the message named 'narrow' in one run and 'view' in the next
    (a fresh helper's find; it also made cached and uncached runs differ)."""
    path = Path(__file__).parent / "fixtures" / "local-tensor-view-not-detached" / "checker" / "helper_function.py"
    messages = set()
    kept = []  # keep every result alive, so that each session's objects get new addresses
    for _ in range(30):
        result = engine.session_for_rules([RULE]).check_bytes(str(path), path.read_bytes())
        kept.append(result)
        messages.add(tuple(f.message for f in result.findings))
    assert len(messages) == 1
    assert any(m.startswith("'narrow' view") for m in next(iter(messages)))


@pytest.mark.parametrize("switch", [
    "prev = torch.set_grad_enabled(True)",
    "if torch.set_grad_enabled(True):\n                        pass",
    "torch._C._set_grad_enabled(True)",
    "state = (torch.set_grad_enabled(mode), 1)",
])
def test_grad_switched_on_inside_an_expression_leaves_no_grad_mode(switch: str):
    """``torch.set_grad_enabled(True)`` switches grad on when called, whatever is done with its value
    (a fresh helper's find: assigned or tested, it was not seen, so the view counted as made under
    no_grad: HIGH confidence and a safe fix that cut the gradient at run time)."""
    def finding_with(line: str):
        code = textwrap.dedent(f"""\
            import torch


            def store(self, t, mode):
                with torch.no_grad():
                    {line}
                    self.p._local_tensor = t.narrow(0, 0, 1)
            """)
        (found,) = engine.session_for_rules([RULE]).check_bytes("m.py", code.encode()).findings
        return found

    finding = finding_with(switch)
    assert finding.confidence is Confidence.INFERENCE
    assert finding.fix is not None and finding.fix.applicability is Applicability.UNSAFE
    for control in ("torch.set_grad_enabled(False)", "prev = torch.set_grad_enabled(False)", "pass"):
        kept = finding_with(control)  # grad stays off: the view is made under no_grad
        assert kept.confidence is Confidence.HIGH and kept.fix.applicability is Applicability.SAFE


def test_a_view_returned_by_a_helper_of_another_module(tmp_path, monkeypatch):
    """Issue #23 recall: a helper of another module of the project returns the view stored into the
    local tensor. Found through the import (re-exports and module attributes too), INFERENCE and an
    unsafe fix whatever the helper's grad mode (the evidence crosses files), the helper's file named.
    A cold check hands the file from the early analysis to the check: same findings, one extra parse."""
    import shutil

    from hp_invariants.config import Overrides, Resolver
    from hp_invariants.registry import RULES

    root = tmp_path / "proj"
    shutil.copytree(Path(__file__).parent / "fixtures" / RULE.symbol / "checker" / "helper_other_module_project", root)

    def run(early: bool, cache: Path):
        parsed: list[str] = []
        real_parse = engine.parse
        monkeypatch.setattr(engine, "parse", lambda source: parsed.append(Path(source.path).name) or real_parse(source))
        session = engine.default_session(Resolver(RULES, Overrides(cache_dir=str(cache))), cache_dir=str(cache))
        if not early:
            monkeypatch.setattr(session, "early_analysis", lambda path, raw, source, tree: None)
        result = engine.run_check(session, [str(root)])
        monkeypatch.setattr(engine, "parse", real_parse)
        return [f for f in result.findings if f.rule_id == RULE.rule_id], parsed

    early, parsed = run(True, tmp_path / "c1")
    late, _ = run(False, tmp_path / "c2")
    assert [(f.line, f.message) for f in early] == [(f.line, f.message) for f in late]
    assert [f.line for f in early] == [13, 17, 22, 25] and parsed == ["param.py"]
    assert {f.confidence for f in early} == {Confidence.INFERENCE}
    assert {f.fix.applicability for f in early if f.fix} == {Applicability.UNSAFE}
    assert "returned by 'local_shard()' of shardlib/views.py:7, under no_grad" in early[0].message
    alone = engine.session_for_rules([RULE]).check_path(str(root / "shardlib" / "param.py"))
    assert alone.findings == []  # without a project: only what the file shows


def test_pytorch_dtensor_spellings_prove_the_wrapper_holds_the_leaf():
    """The isinstance proof of PyTorch's DTensor: a module attribute chain, the private module, an
    alias; a fresh base (held by a name: a view of an unheld temporary is clean on any class, see
    test_a_view_of_an_unheld_temporary). Anything else (a DTensor of another package) keeps the finding."""
    found = check("""
    import torch
    import torch.distributed.tensor as dt
    from torch.distributed._tensor import DTensor as TorchDTensor
    from other.tensor import DTensor


    def a(p, n):
        base = torch.zeros(n)
        if isinstance(p, dt.DTensor):
            p._local_tensor = base[:n]


    def b(p, n):
        assert isinstance(p, TorchDTensor)
        base = torch.ones(n).new_zeros(n)
        p._local_tensor = base.view(-1)


    def c(p, n):
        assert isinstance(p, DTensor)
        base = torch.zeros(n)
        p._local_tensor = base[:n]
    """)
    assert [f.line for f in found] == [23]


def test_a_view_of_an_unheld_temporary():
    """A view of ``t.detach()``/``t.data``/a fresh allocation written in the store itself is clean (no
    code can write its base in place); a name holding the base or the view keeps the finding."""
    found = check("""
    import torch
    def f(p, t, n):
        p._local_tensor = t.detach()[:n]
        p._local_tensor = t.data.view(-1)
        alias = t.detach()
        p._local_tensor = alias[:n]
        view = t.data[:n]
        p._local_tensor = view
        p._local_tensor = t.float().narrow(0, 0, n)
    """)
    assert positions(found) == [(7, 23), (9, 5), (10, 23)]
