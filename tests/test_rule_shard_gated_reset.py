"""Unit tests of E9502 shard-gated-reset: options, confidence, messages, fixes, edge cases."""

from __future__ import annotations

import ast
import re
import textwrap

from hp_invariants.engine import session_for_rules
from hp_invariants.fixer import fix_text
from hp_invariants.model import Applicability, Confidence
from hp_invariants.rules.shard_gated_reset import ShardGatedReset
from hp_invariants.source import SourceFile

RULE = ShardGatedReset()


def _check(code: str, **options):
    code = textwrap.dedent(code)
    return session_for_rules([RULE], {"E9502": options} if options else None).check_bytes("t.py", code.encode()).findings


def _fix(code: str, unsafe: bool = False, newline: str = "\n") -> str:
    code = textwrap.dedent(code).replace("\n", newline)
    outcome = fix_text(session_for_rules([RULE]), "t.py", code, unsafe=unsafe)
    assert not outcome.rejected
    return outcome.text


def test_seed_message_position_confidence_and_safe_fix():
    findings = _check("""
        class S:
            def lazy_init(self):
                if self.is_shard and not self._reset_sharded_params:
                    for p in self.hsdp_params:
                        p.reset_sharded_param()
                    self._reset_sharded_params = True
        """)
    assert len(findings) == 1
    finding = findings[0]
    assert (finding.line, finding.col) == (6, 16)
    assert finding.message == (
        "'reset_sharded_param()' runs only when shard-degree gate 'self.is_shard' holds; "
        "at shard degree 1 (world size 1) it is skipped")
    assert finding.confidence is Confidence.HIGH
    assert finding.fix.applicability is Applicability.SAFE
    assert finding.obj == "S.lazy_init"


def test_confidence_levels_by_shape():
    findings = _check("""
        def f(self, m):
            shard = self.is_shard
            if shard:
                fully_shard(m)

        def g(self, m):
            if not self.is_shard:
                return
            fully_shard(m)
        """)
    assert [f.confidence for f in findings] == [Confidence.INFERENCE, Confidence.CONTROL_FLOW]
    assert findings[0].args == ("fully_shard", "shard (= self.is_shard)")
    assert findings[1].fix is None


def test_unconditional_calls_option_replaces_the_defaults():
    code = """
        def f(m, world_size):
            if world_size > 1:
                apply_fsdp(m)
                fully_shard(m)
        """
    assert [f.args[0] for f in _check(code)] == ["fully_shard"]
    assert [f.args[0] for f in _check(code, **{"unconditional-calls": ("apply_fsdp",)})] == ["apply_fsdp"]


def test_is_sharded_is_a_gate_only_when_configured():
    code = """
        def lazy_init(self):
            if self.is_sharded:
                self.p.reset_sharded_param()
        """
    assert _check(code) == []
    findings = _check(code, **{"shard-degree-gates": ("is_shard", "is_sharded")})
    assert [f.args[1] for f in findings] == ["self.is_sharded"]


def test_quantities_option_accepts_strings_and_compiled_patterns():
    code = """
        def f(m, mesh):
            if mesh.dp_mesh.size() > 1:
                fully_shard(m)
        """
    assert _check(code) == []
    assert len(_check(code, **{"shard-degree-quantities": (r"dp_mesh\.size",)})) == 1
    assert len(_check(code, **{"shard-degree-quantities": (re.compile(r"dp_mesh\.size"),)})) == 1


def test_comparison_forms():
    gated = ["ws > 1", "1 < ws", "ws != 1", "1 != ws", "ws >= 2", "2 <= ws", "not ws == 1", "not (ws < 2)"]
    for test in gated:
        assert len(_check(f"def f(m, ws):\n    if {test}:\n        fully_shard(m)\n")) == 1, test
    not_gated = ["ws > 2", "ws > 0", "ws == 1", "ws", "1 < ws < 8", "ws > 1.0", "tp_size > 1", "ep_size != 1"]
    for test in not_gated:
        assert _check(f"def f(m, ws, tp_size, ep_size):\n    if {test}:\n        fully_shard(m)\n") == [], test


def test_boolean_structure():
    assert len(_check("def f(m, a):\n    if a and (b or c) and is_shard:\n        fully_shard(m)\n")) == 1
    assert _check("def f(m, a):\n    if is_shard or a:\n        fully_shard(m)\n") == []
    # `not (A or B)` false -> A or B true: not gated; true -> both false
    assert _check("def f(m):\n    if not (is_shard or a):\n        pass\n    else:\n        fully_shard(m)\n") == []
    both_negative = "def f(m):\n    if ws == 1 or not is_shard:\n        pass\n    else:\n        fully_shard(m)\n"
    assert len(_check(both_negative)) == 1


def test_alias_rules():
    # assigned after use, reassigned, or a parameter: not an alias
    assert _check("def f(m, shard):\n    if shard:\n        fully_shard(m)\n") == []
    reassigned = "def f(m):\n    shard = x\n    shard = self.is_shard\n    if shard:\n        fully_shard(m)\n"
    assert _check(reassigned) == []
    # quantity through an alias of a getter
    assert len(_check("def f(m):\n    n = dist.get_world_size()\n    if n > 1:\n        fully_shard(m)\n")) == 1


def test_property_and_function_resolution_is_guarded():
    cyclic = """
        class C:
            @property
            def a(self):
                return self.b

            @property
            def b(self):
                return self.a

            def f(self, m):
                if self.a:
                    fully_shard(m)
        """
    assert _check(cyclic) == []
    generator = """
        def sharded():
            yield world_size > 1

        def f(m):
            if sharded():
                fully_shard(m)
        """
    assert _check(generator) == []
    two_defs = """
        class A:
            @property
            def big(self):
                return self.world_size > 1

        class B:
            @property
            def big(self):
                return self.size > 1000

        def f(x, m):
            if x.big:
                fully_shard(m)
        """
    assert _check(two_defs) == []


def test_scopes_and_module_level():
    assert len(_check("if WORLD_SIZE > 1:\n    fully_shard(model)\n", **{
        "shard-degree-quantities": ("WORLD_SIZE",)})) == 1
    assert len(_check("import sys\nif world_size == 1:\n    sys.exit(0)\nfully_shard(model)\n")) == 0
    assert len(_check("if world_size == 1:\n    raise SystemExit\nfully_shard(model)\n")) == 1
    code = """
        async def f(m):
            async with ctx():
                if self.is_shard:
                    await g(fully_shard(m))
        """
    assert len(_check(code)) == 1
    assert _check("def f(m):\n    if self.is_shard:\n        cb = lambda: fully_shard(m)\n") == []


def test_continue_guard_outside_the_loop_does_not_gate_code_after_it():
    code = """
        def f(self):
            for p in self.params:
                if not self.is_shard:
                    continue
                self.log(p)
            for p in self.params:
                p.reset_sharded_param()
        """
    assert _check(code) == []


def test_file_without_the_call_names_is_skipped_cheaply():
    assert _check("def f(m, ws):\n    if ws > 1:\n        shard(m)\n") == []


def test_fix_keeps_crlf_line_endings():
    code = """
        class S:
            def lazy_init(self):
                if self.is_shard:  # sharded only
                    for p in self.params:
                        p.reset_sharded_param()
                if self.is_shard and not self._done:
                    fully_shard(self.module)
        """
    text = _fix(code, newline="\r\n")
    assert "\n" not in text.replace("\r\n", "")
    assert text.replace("\r\n", "\n") == textwrap.dedent("""
        class S:
            def lazy_init(self):
                # sharded only
                for p in self.params:
                    p.reset_sharded_param()
                if not self._done:
                    fully_shard(self.module)
        """)


def test_fix_is_idempotent_and_clears_the_finding():
    code = """
        def f(self, m, world_size):
            if self.is_shard:
                if world_size > 1 and self.ready:
                    fully_shard(m)
        """
    once = _fix(code)
    assert ast.parse(once)
    assert "is_shard" not in once and "world_size > 1" not in once and "if self.ready:" in once
    assert _fix(once) == once
    assert session_for_rules([RULE]).check_bytes("t.py", once.encode()).findings == []


def test_unsafe_fix_only_with_unsafe_flag():
    code = """
        def f(m, world_size):
            if world_size > 1:
                fully_shard(m)
                m.register_comm_hook(hook)
        """
    assert _fix(code) == textwrap.dedent(code)
    assert _fix(code, unsafe=True) == textwrap.dedent("""
        def f(m, world_size):
            fully_shard(m)
            m.register_comm_hook(hook)
        """)


def test_report_only_shapes_have_no_fix():
    for code in (
        "def f(m):\n    if self.is_shard:\n        fully_shard(m)\n    else:\n        m.cuda()\n",
        "def f(m):\n    if not self.is_shard:\n        return\n    fully_shard(m)\n",
        "def f(m):\n    not self.is_shard or fully_shard(m)\n",
        "def f(m):\n    need = self.is_shard and m.ready\n    if need:\n        fully_shard(m)\n",
    ):
        findings = _check(code)
        assert len(findings) == 1, code
        assert findings[0].fix is None, code


def test_walrus_gate_is_flagged_and_its_removal_unsafe():
    findings = _check("def f(m):\n    if (shard := self.is_shard):\n        fully_shard(m)\n    return shard\n")
    assert [f.args[1] for f in findings] == ["self.is_shard"]
    assert findings[0].fix.applicability is Applicability.UNSAFE


def test_ternary_with_side_effects_in_the_other_branch_is_unsafe():
    findings = _check("def f(m, ws):\n    return fully_shard(m) if ws > 1 else prepare(m)\n")
    assert findings[0].fix.applicability is Applicability.UNSAFE


def test_options_are_declared_with_kinds():
    kinds = {o.name: o.kind for o in RULE.options}
    assert kinds == {"unconditional-calls": "csv", "shard-degree-gates": "csv",
                     "shard-degree-quantities": "regexp_csv"}
    # the text prefilter follows the configured call names
    assert RULE.prefilter_option == "unconditional-calls"
    assert RULE.applies_to("x.reset_sharded_param()") and not RULE.applies_to("x.materialize()")
    assert RULE.applies_to("x.materialize()", {"unconditional-calls": ("materialize",)})


def test_summary_is_capitalised_like_the_other_rules():
    from hp_invariants.registry import RULES

    assert RULE.summary.startswith("A must-always-run")
    assert all(rule.summary[0].isupper() for rule in RULES)
