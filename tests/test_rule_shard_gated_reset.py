"""Unit tests of E9502 shard-gated-reset: options, confidence, messages, fixes, edge cases."""

from __future__ import annotations

import ast
import re
import textwrap

import pytest

from hp_invariants.engine import session_for_rules
from hp_invariants.fixer import fix_text
from hp_invariants.model import Applicability, Confidence
from hp_invariants.rules.shard_gated_reset import ShardGatedReset

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
        "at shard degree 1 (world size 1) it is skipped (evidence: gate tested by an if at line 4)")
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
    assert findings[0].args[:2] == ("fully_shard", "shard (= self.is_shard)")
    assert findings[0].args[2] == "gate tested by an if at line 4; 'shard' is a local bound once before the test"
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
            if mesh.batch_mesh.size() > 1:
                fully_shard(m)
        """
    assert _check(code) == []
    assert len(_check(code, **{"shard-degree-quantities": (r"batch_mesh\.size",)})) == 1
    assert len(_check(code, **{"shard-degree-quantities": (re.compile(r"batch_mesh\.size"),)})) == 1


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
    assert len(_check("if world_size == 1:\n    raise SystemExit\np.reset_sharded_param()\n")) == 1
    # a wrap after a guard that raises at degree 1 is not skipped silently (see test_wrap_...)
    assert len(_check("if world_size == 1:\n    raise SystemExit\nfully_shard(model)\n")) == 0
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
        "def f(m):\n    if self.is_shard:\n        m.reset_sharded_param()\n    else:\n        m.cuda()\n",
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
    findings = _check("def f(m, ws):\n    return register_fsdp_forward_method(m, 'generate') if ws > 1 else prepare(m)\n")
    assert findings[0].fix.applicability is Applicability.UNSAFE


def test_options_are_declared_with_kinds():
    kinds = {o.name: o.kind for o in RULE.options}
    assert kinds == {"unconditional-calls": "csv", "wrap-calls": "csv", "wrapped-classes": "csv", "shard-degree-gates": "csv",
                     "shard-degree-quantities": "regexp_csv", "parallel-degree-quantities": "regexp_csv"}
    # the text prefilter follows the configured call names
    assert RULE.prefilter_option == "unconditional-calls"
    assert RULE.applies_to("x.reset_sharded_param()")
    assert RULE.applies_to("x.materialize()", {"unconditional-calls": ("materialize",)})


def test_summary_is_capitalised_like_the_other_rules():
    from hp_invariants.registry import RULES

    assert RULE.summary.startswith("A must-always-run")
    assert all(rule.summary[0].isupper() for rule in RULES)


# ---------------------------------------------------------------------- project facts (issue 11)
def _project(tmp_path, files: dict[str, str]):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    for name, code in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(code))
    return tmp_path


def _check_project(root, name, cache_dir=None, keep=None, **options):
    from hp_invariants.project import Project

    project = Project(cache_dir=str(cache_dir) if cache_dir else None, use_cache=cache_dir is not None)
    session = session_for_rules([RULE], {"E9502": options} if options else None, project)
    if keep is not None:
        keep.append(session)
    path = root / name
    return session.check_bytes(str(path), path.read_bytes()).findings


HELPERS = """
    def apply_fsdp(model):
        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)

    class Dims:
        @property
        def dp_enabled(self):
            return self.dp_shard > 1

        @property
        def cp_enabled(self):
            return self.cp > 1
    """
USES = """
    from helpers import apply_fsdp

    def build(model, dims):
        if dims.dp_enabled or dims.cp_enabled:
            apply_fsdp(model)
        if dims.cp_enabled:
            fully_shard(model)
    """


def test_summary_is_plain_option_independent_data():
    import marshal

    from hp_invariants.rules.shard_gate_facts import summarize

    tree = ast.parse(textwrap.dedent(HELPERS + """
        class E:
            def __init__(self, ws):
                self.need = ws > 1
                self.other = ws
                reset_sharded_param(self)
                self.build()
                apply_fsdp(self)
        """))
    summary = summarize(tree)
    assert marshal.loads(marshal.dumps(summary)) == summary  # tuples, frozensets, str, int, bool, None
    functions, attr_values, attr_other = summary
    by_name = {f[0]: f for f in functions}
    assert by_name["apply_fsdp"][3] == ("fully_shard",)
    # a sorted tuple (the index holds one per def of the project: a frozenset takes four times the memory)
    assert by_name["__init__"][3] == ("apply_fsdp", "build", "reset_sharded_param")
    assert by_name["dp_enabled"][1:3] == (True, (("cmp", ">", ("a", "dp_shard", "self"), 1),))
    assert attr_values == (("need", ("cmp", ">", ("n", "ws"), 1)),)
    assert attr_other == frozenset({"other"})


def test_unconditional_calls_follow_every_normal_path():
    from hp_invariants.rules.shard_gate_facts import summarize

    code = """
        def both(m, x):
            if x:
                fully_shard(m, a=1)
            else:
                fully_shard(m)

        def one(m, x):
            if x:
                fully_shard(m)

        def after_exit(m, x):
            if x:
                return
            fully_shard(m)

        def in_with_and_for(m):
            with ctx():
                for b in m.blocks:
                    fully_shard(b)

        def lazy(m):
            return [fully_shard(b) for b in m.blocks], (lambda: fully_shard(m)), x or fully_shard(m)

        def tried(m):
            try:
                prepare(m)
            except ValueError:
                handled(m)
            else:
                fully_shard(m)
            finally:
                cleanup(m)

        def tried_exit(m):
            try:
                return build(m)
            finally:
                cleanup(m)
            fully_shard(m)

        async def loops(m, k):
            while grow(m):
                fully_shard(m)
            async with lock(m):
                async for b in blocks(m):
                    visit(b)
            match k:
                case 1:
                    fully_shard(m)
            def inner():
                fully_shard(m)
            raise Stop(pick(m) if k else pick(m, 2))
        """
    calls = {f[0]: set(f[3]) for f in summarize(ast.parse(textwrap.dedent(code)))[0]}
    assert "fully_shard" in calls["both"] and "fully_shard" in calls["in_with_and_for"]
    assert "fully_shard" not in calls["one"] | calls["after_exit"] | calls["lazy"]
    assert calls["tried"] == {"prepare", "fully_shard", "cleanup"}  # not the handler's
    assert calls["tried_exit"] == {"build", "cleanup"}  # the finally block runs; nothing after it
    assert calls["loops"] == {"grow", "lock", "blocks", "visit", "Stop", "pick"}  # not the while, case or inner body
    assert calls["inner"] == {"fully_shard"}


def test_unconditional_calls_enter_attribute_values_and_f_string_fields(tmp_path):
    """``fully_shard(m).module`` evaluates ``fully_shard(m)``, and so does an f-string field: both
    always call it (the expression walk passed over attributes and f-strings whole, so a helper
    returning ``fully_shard(model).module`` was not known to always run the step: a gated call of it
    went unreported; fails before). Plain names and attributes of names add nothing."""
    from hp_invariants.rules.shard_gate_facts import summarize

    code = """
        def via_attribute(model):
            return fully_shard(model).module

        def via_store(model):
            reset(model).flag = True

        def via_f_string(model):
            log(f"{fully_shard(model)!r} done")

        def plain(model):
            return model.layers.weight, self.x.y
        """
    calls = {f[0]: set(f[3]) for f in summarize(ast.parse(textwrap.dedent(code)))[0]}
    assert calls["via_attribute"] == {"fully_shard"}
    assert calls["via_store"] == {"reset"}
    assert calls["via_f_string"] == {"log", "fully_shard"}
    assert calls["plain"] == set()
    root = _project(tmp_path, {
        "helpers.py": "def wrap(model):\n    return fully_shard(model).module\n",
        "train.py": "import torch.distributed as dist\nfrom .helpers import wrap\n\n\n"
                    "def build(model):\n    if dist.get_world_size() > 1:\n        wrap(model)\n"})
    # the whole check, as a user runs it (the project is built before the files are checked: the
    # prefilter then knows `wrap` always runs the step; train.py never names fully_shard)
    import contextlib
    import io
    import json

    from hp_invariants.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", "--no-cache", "--select", "E9502", "--format", "json", str(root)])
    findings = json.loads(out.getvalue())["findings"]
    assert code == 1 and [(f["line"], f["message"].split("'")[1]) for f in findings] == [(7, "wrap() -> fully_shard()")]


def test_cross_file_gates_and_helpers_need_the_project(tmp_path):
    root = _project(tmp_path, {"helpers.py": HELPERS, "train.py": USES})
    findings = _check_project(root, "train.py")
    assert [(f.line, f.args) for f in findings] == [
        (6, ("apply_fsdp() -> fully_shard", "dims.dp_enabled or dims.cp_enabled",
             "gate tested by an if at line 5; 'dp_enabled' defined in helpers.py; 'cp_enabled' defined in "
             "helpers.py; 'apply_fsdp()' always runs the step, defined in helpers.py"))]
    assert findings[0].confidence is Confidence.INFERENCE
    assert findings[0].fix.applicability is Applicability.UNSAFE  # the helper runs more than the step
    # without a project the rule still runs, on what the file itself shows
    path = root / "train.py"
    assert session_for_rules([RULE]).check_bytes(str(path), path.read_bytes()).findings == []
    seed = "def f(self):\n    if self.is_shard:\n        self.p.reset_sharded_param()\n"
    assert len(session_for_rules([RULE]).check_bytes("t.py", seed.encode()).findings) == 1


def test_cross_file_facts_survive_the_cache(tmp_path):
    root = _project(tmp_path / "p", {"helpers.py": HELPERS, "train.py": USES})
    cache = tmp_path / "cache"
    first = _check_project(root, "train.py", cache)
    second = _check_project(root, "train.py", cache)
    assert [f.args for f in first] == [f.args for f in second] and len(first) == 1
    assert any(cache.iterdir())


MORE = """
    import abc

    class Cfg:
        def __init__(self, ws):
            self.need = self.world_size > 1
            self.other = ws

        @abc.abstractmethod
        def gate(self):
            ...

    def wrap(m):
        apply_fsdp(m)
    """


def test_cached_project_index_answers_as_the_built_one(tmp_path):
    # while no file changed, the index is read back whole from the built-object cache (no file is
    # parsed, no summary decoded) and answers every lookup the rule makes as the built one does
    from hp_invariants.project import Project
    from hp_invariants.rules.shard_gated_reset import project_closure

    root = _project(tmp_path / "p", {"helpers.py": HELPERS, "more.py": MORE, "train.py": USES})
    cache = tmp_path / "cache"
    built = Project(cache_dir=str(cache)).data_for_root(RULE.project_facts, root)  # summarizes: stores no built object
    Project(cache_dir=str(cache)).data_for_root(RULE.project_facts, root)  # from the cached summaries: stores it
    again = Project(cache_dir=str(cache))
    read = again.data_for_root(RULE.project_facts, root)
    assert again.stats["parsed"] == 0 and type(read.functions) is not dict and read.paths == built.paths
    assert {"apply_fsdp", "dp_enabled", "gate", "wrap"} <= set(built.functions)
    names = [*built.functions, "fully_shard", "missing"]
    assert read.callers_of(names) == built.callers_of(names) and built.callers_of(["fully_shard"])["fully_shard"]
    for name in names:
        assert read.functions.get(name, ()) == built.functions.get(name, ())
    for attr in [*built.attr_other, *built.attr_values, "missing"]:
        assert set(read.attr_other.get(attr, ())) == set(built.attr_other.get(attr, ()))
        assert read.attr_values.get(attr, ()) == built.attr_values.get(attr, ())
    calls = frozenset({"fully_shard"})
    assert project_closure(read, calls) == project_closure(built, calls) == {
        "fully_shard": "fully_shard", "apply_fsdp": "fully_shard", "wrap": "apply_fsdp"}
    # an edit anywhere in the project: rebuilt from the summaries, not read back
    (root / "more.py").write_text(textwrap.dedent(MORE).replace("apply_fsdp(m)", "pass"))
    changed = Project(cache_dir=str(cache))
    rebuilt = changed.data_for_root(RULE.project_facts, root)
    assert changed.stats["parsed"] == 1 and "wrap" not in project_closure(rebuilt, calls)


def test_a_malformed_entry_of_the_cached_index_is_rebuilt_not_trusted(tmp_path):
    from fixturelib import built_rows, set_built_head, set_built_rows

    root = _project(tmp_path / "p", {"helpers.py": HELPERS, "train.py": USES})
    cache = tmp_path / "cache"
    expected = [(f.line, f.args) for f in _check_project(root, "train.py", cache)]
    assert len(expected) == 1
    assert [(f.line, f.args) for f in _check_project(root, "train.py", cache)] == expected  # stores the built object
    assert built_rows(cache, "shard-gates", "functions")["apply_fsdp"].startswith("[[")  # one row per name
    set_built_rows(cache, "shard-gates", "functions", {"apply_fsdp": '[["not", "a", "def", 0]]'})
    set_built_rows(cache, "shard-gates", "files", {0: '{"not": "a summary"}'})
    assert [(f.line, f.args) for f in _check_project(root, "train.py", cache)] == expected
    assert "not a summary" not in built_rows(cache, "shard-gates", "files")[0]  # rebuilt and stored again

    def malformed(head):  # a plain part of another shape
        head[0]["paths"] = [3]
        return head

    set_built_head(cache, "shard-gates", malformed)
    assert [(f.line, f.args) for f in _check_project(root, "train.py", cache)] == expected


def test_same_file_definitions_shadow_the_project(tmp_path):
    uses = USES + """
    def apply_fsdp(model):
        if model.ready:
            fully_shard(model)

    class Dims:
        @property
        def dp_enabled(self):
            return self.ready
    """
    root = _project(tmp_path, {"helpers.py": HELPERS, "train.py": uses})
    assert _check_project(root, "train.py") == []


def test_options_are_applied_at_check_time(tmp_path):
    root = _project(tmp_path, {"helpers.py": HELPERS, "train.py": USES})
    # cp is configured as a shard degree: `dims.cp_enabled` alone is now a gate
    findings = _check_project(root, "train.py", **{"shard-degree-quantities": ("dp_shard", "cp")})
    assert [f.line for f in findings] == [6, 8]
    # apply_fsdp is must-run only through fully_shard: with other must-run names it is not
    findings = _check_project(root, "train.py", **{"unconditional-calls": ("reset_sharded_param",)})
    assert findings == []


def test_instance_attribute_is_a_gate_only_when_every_store_is_a_degree_predicate(tmp_path):
    engine = """
        class Engine:
            def __init__(self, world_size):
                self.need = world_size > 1

            def setup(self, model):
                if self.need:
                    fully_shard(model)
        """
    assert len(_check(engine)) == 1
    assert _check(engine + "\n    def off(self):\n        self.need = False\n") == []
    assert _check(engine.replace("world_size > 1", "tp_size > 1")) == []
    # stored in another file of the project (a base class), read here
    root = _project(tmp_path, {"base.py": engine.split("    def setup")[0],
                               "sub.py": "from base import Engine\nclass Sub(Engine):\n    def go(self, m):\n"
                                         "        if self.need:\n            fully_shard(m)\n"})
    assert [f.line for f in _check_project(root, "sub.py")] == [5]
    (root / "other.py").write_text("class O:\n    def __init__(self, cfg):\n        self.need = cfg.need\n")
    assert _check_project(root, "sub.py") == []


def test_disjunctions_of_degrees():
    def check(test):
        return _check(f"def f(m, dp_shard, cp, tp, force):\n    if {test}:\n        fully_shard(m)\n")

    for test in ("dp_shard > 1 or cp > 1", "cp > 1 or dp_shard > 1 or tp > 1", "not (dp_shard == 1 and cp == 1)"):
        assert len(check(test)) == 1, test
    assert check("dp_shard > 1 or cp > 1")[0].args[1] == "dp_shard > 1 or cp > 1"
    for test in ("tp > 1 or cp > 1", "dp_shard > 1 or force", "cp > 1", "tp > 1 and dp_shard > 2"):
        assert check(test) == [], test


def test_mesh_sizes():
    def check(test):
        return _check(f"def f(m, mesh, dp_mesh, tp_mesh):\n    if {test}:\n        fully_shard(m)\n")

    for test in ("dp_mesh.size() > 1", 'mesh["dp_shard"].size() > 1', "self.fsdp_mesh.size() != 1",
                 "mesh.dp_shard_mesh.size() >= 2"):
        assert len(check(test)) == 1, test
    for test in ("tp_mesh.size() > 1", 'mesh["ep"].size() > 1', "mesh.size() > 1", "self.ep_mesh.size() > 1"):
        assert check(test) == [], test


def test_helper_chain_else_branch_and_prefilter(tmp_path):
    code = """
        def shard_all(m):
            fully_shard(m)

        def wrap(m):
            shard_all(m)

        def f(m, ws):
            if ws > 1:
                wrap(m)
            else:
                fully_shard(m)
            if dp_size > 1:
                wrap(m)
        """
    findings = _check(code)
    assert [(f.line, f.args[0]) for f in findings] == [(14, "wrap() -> shard_all() -> fully_shard")]
    # a file that only calls a project helper by name gets through the text prefilter once the
    # project's facts are built
    root = _project(tmp_path, {"helpers.py": HELPERS, "train.py": USES})
    sessions = []  # the project's facts live as long as the session that built them
    _check_project(root, "train.py", keep=sessions)
    assert RULE.applies_to("if ws > 1:\n    apply_fsdp(m)\n")
    assert not RULE.applies_to("if ws > 1:\n    shard(m)\n")
    assert not RULE.applies_to("x.materialize()")


def test_checked_text_newer_than_the_project_facts(tmp_path):
    # the facts come from the files on disk; the checked text (an editor buffer, a fix pass) adds a
    # local apply_fsdp() that only sometimes shards: the file's own def wins for its calls, and the
    # chain through other files is reported as far as it is known
    from hp_invariants.project import Project

    root = _project(tmp_path, {
        "helpers.py": HELPERS,
        "other.py": "def wrap(m):\n    apply_fsdp(m)\n",
        "train.py": "def f(m, ws):\n    pass\n",
    })
    text = ("def apply_fsdp(m):\n    if m.ready:\n        fully_shard(m)\n\n"
            "def f(m, ws):\n    if ws > 1:\n        wrap(m)\n    if ws > 1:\n        apply_fsdp(m)\n")
    session = session_for_rules([RULE], None, Project(use_cache=False))
    findings = session.check_bytes(str(root / "train.py"), text.encode()).findings
    assert [(f.line, f.args[0]) for f in findings] == [(7, "wrap() -> apply_fsdp")]


def test_abstract_placeholders_do_not_veto_the_overrides():
    code = """
        class Base:
            def apply_fsdp(self, mesh):
                "Shard this block."
                raise NotImplementedError

        class Block(Base):
            def apply_fsdp(self, mesh):
                fully_shard(self, mesh=mesh)

        def build(blocks, mesh, dp_mesh):
            if dp_mesh.size() > 1:
                for block in blocks:
                    block.apply_fsdp(mesh)
        """
    findings = _check(code)
    assert [(f.line, f.args[0]) for f in findings] == [(14, "apply_fsdp() -> fully_shard")]
    # a concrete definition that does not always shard still vetoes
    assert _check(code + "\nclass Lazy(Base):\n    def apply_fsdp(self, mesh):\n        pass\n") == []


def test_class_level_default_or_field_is_not_a_predicate():
    code = """
        class Engine:
            use_fsdp: bool = False

            def __init__(self, world_size):
                self.use_fsdp = world_size > 1

            def setup(self, model):
                if self.use_fsdp:
                    fully_shard(model)
        """
    assert _check(code) == []
    assert len(_check(code.replace("use_fsdp: bool = False", "pass"))) == 1


def test_wrap_calls_option_decides_which_steps_a_handled_degree_one_exempts():
    dispatch = """
        def f(m, world_size):
            if world_size > 1:
                {step}
            else:
                m.to("cuda")
        """
    wrap = dispatch.format(step="fully_shard(m)")
    completion = dispatch.format(step='register_fsdp_forward_method(m, "generate")')
    assert _check(wrap) == []
    assert len(_check(completion)) == 1
    # the exemption follows the option, not the spelling
    assert len(_check(wrap, **{"wrap-calls": ()})) == 1
    assert _check(completion, **{"wrap-calls": ("fully_shard", "register_fsdp_forward_method")}) == []
    # a wrap name that is not a must-run step changes nothing
    only_reset = {"unconditional-calls": ("reset_sharded_param",), "wrap-calls": ("reset_sharded_param",)}
    assert _check(wrap, **only_reset) == []
    assert _check(completion.replace("register_fsdp_forward_method", "p.reset_sharded_param"), **only_reset) == []


def test_must_run_helpers_are_wraps_when_their_step_is_one():
    code = """
        def apply_fsdp(m):
            fully_shard(m)

        def register_generate(m):
            register_fsdp_forward_method(m, "generate")

        def f(m, ws):
            if ws > 1:
                apply_fsdp(m)
                register_generate(m)
            else:
                m.cuda()
        """
    assert [f.args[0] for f in _check(code)] == ["register_generate() -> register_fsdp_forward_method"]


def test_trivial_degree_one_branches_do_not_handle_it():
    for other in ("pass", "...", '"""not sharded"""', "return m", "return None", "return self.model"):
        code = f"def f(self, m, ws):\n    if ws > 1:\n        fully_shard(m)\n    else:\n        {other}\n"
        assert len(_check(code)) == 1, other
    for other in ("m.cuda()", "raise ValueError(ws)", "assert not self.need_fsdp", "self.plain = True",
                  "return m.to(self.device)", "logger.info('single process')"):
        code = f"def f(self, m, ws):\n    if ws > 1:\n        fully_shard(m)\n    else:\n        {other}\n"
        assert _check(code) == [], other
    # an exit guard: a bare exit skips the wrap silently, one that does something handles degree 1
    assert len(_check("def f(m, ws):\n    if ws == 1:\n        return m\n    fully_shard(m)\n")) == 1
    assert _check("def f(m, ws):\n    if ws == 1:\n        m.cuda()\n        return m\n    fully_shard(m)\n") == []


def test_a_degree_retest_counts_only_in_the_same_function_and_for_the_same_quantity():
    retest = """
        def f(self, m, ws):
            if ws > 1:
                fully_shard(m)
            {test}
                self.log("sharded")
            else:
                self.log("single process")
        """
    assert _check(retest.format(test="if ws > 1:")) == []
    assert _check(retest.format(test="if not ws == 1:")) == []
    assert len(_check(retest.format(test="if self.dp_size > 1:"))) == 1  # another quantity
    assert len(_check(retest.format(test="if self.tp_size > 1:"))) == 1  # not a shard degree
    # the degree-1 branch of a negated re-test is its body
    assert _check("def f(self, m, ws):\n    if ws == 1:\n        self.log(1)\n    if ws > 1:\n        fully_shard(m)\n") == []
    # an alias and the quantity it stands for are the same quantity
    aliased = """
        def f(self, m):
            shard = dist.get_world_size() > 1
            if shard:
                fully_shard(m)
            if dist.get_world_size() == 1:
                m.cuda()
        """
    assert _check(aliased) == []
    nested = """
        def f(self, m, ws):
            if ws > 1:
                fully_shard(m)

            def report():
                if ws > 1:
                    return "sharded"
                else:
                    print("single process")
            return report
        """
    assert len(_check(nested)) == 1  # a nested function's re-test is another function's


def test_names_are_stored_whatever_they_hold():
    # the stored index keeps names as JSON text: any name comes back as it was
    from hp_invariants.store import codec

    callers = codec(RULE.project_facts.built_parts["paths"])
    for items in ([], ["a"], ["fully_shard", "apply_fsdp"], ["é", "名前"], ['a"b'], ["a\\b"], ["t\tab"], ["\x01", "x"],
                  ['"', '"'], ["\ud800"]):
        assert callers.loads(callers.dumps(items)) == items


def test_the_checked_file_is_known_in_the_index_by_a_relative_path_too(tmp_path, monkeypatch):
    """The index's entries of the file being checked are its own (not another file's) whatever form
    its path takes: an edit not saved that drops the file's only other store of ``self.need`` leaves
    the base class's degree comparison as the one store, so ``if self.need`` gates the step."""
    from hp_invariants.project import Project

    root = _project(tmp_path, {
        "base.py": """
            class Base:
                def __init__(self, world_size):
                    self.need = world_size > 1
            """,
        "engine.py": """
            from base import Base

            class Engine(Base):
                def reset(self):
                    self.need = compute()

                def setup(self, model):
                    if self.need:
                        fully_shard(model)
            """})
    edited = (root / "engine.py").read_text().replace("self.need = compute()", "pass").encode()
    monkeypatch.chdir(root)
    for path in ("engine.py", str(root / "engine.py")):
        session = session_for_rules([RULE], None, Project(use_cache=False))
        assert session.check_bytes(path, (root / "engine.py").read_bytes()).findings == []  # as saved: no gate
        assert [f.line for f in session.check_bytes(path, edited).findings] == [10], path


def test_call_sets_are_computed_on_demand_as_the_summary_computes_them(tmp_path):
    """The index's summaries hold no call sets (more than half of the summary's cost, asked of a
    few files): ``calls_of`` parses a file again when first asked, and gives what the full summary
    of that file gives, for a built and a read-back index alike; a file changed since it was indexed,
    or one that no longer parses, calls nothing."""
    from hp_invariants.api import ListTable
    from hp_invariants.project import Project
    from hp_invariants.rules import shard_gate_facts as facts

    twice = HELPERS + """
    def apply_fsdp(model):
        model.reset_sharded_param()
    """
    root = _project(tmp_path / "p", {"helpers.py": twice, "train.py": USES, "broken.py": "def (:\n"})
    cache = tmp_path / "cache"
    built = Project(cache_dir=str(cache)).data_for_root(RULE.project_facts, root)
    Project(cache_dir=str(cache)).data_for_root(RULE.project_facts, root)  # from the cached summaries: stored
    read = Project(cache_dir=str(cache)).data_for_root(RULE.project_facts, root)
    assert isinstance(read.files, ListTable) and not isinstance(read.files, list)  # read back from the cache
    assert all(f.calls is None for _, f in built.functions["apply_fsdp"])  # not computed by the build
    for name in ("helpers.py", "train.py"):
        expected = {}
        for func in facts.summarize(ast.parse((root / name).read_bytes()))[0]:
            expected.setdefault(func[0], []).append(func[3])
        for index in (built, read):
            number = index.file_index(str(root / name))
            got = {}
            for fname, defs in ((n, index.functions[n]) for n in expected):
                got[fname] = [index.calls_of(fname, k) for k, (i, _) in enumerate(defs) if i == number]
            assert got == expected
    assert [built.calls_of("apply_fsdp", k) for k in range(2)] == [("fully_shard",), ("reset_sharded_param",)]
    assert built.callers_of(["fully_shard", "reset_sharded_param"]) == {  # build() shards only when cp_enabled
        "fully_shard": ["apply_fsdp"], "reset_sharded_param": ["apply_fsdp"]}
    stale = Project(cache_dir=str(cache)).data_for_root(RULE.project_facts, root)
    (root / "helpers.py").write_text(textwrap.dedent(twice) + "\n# edited after the build\n")
    assert stale.calls_of("apply_fsdp", 0) == ()  # asked after the edit: the bytes are not the indexed ones
    assert stale.callers_of(["fully_shard"]) == {"fully_shard": []}


def test_a_cached_caller_without_a_definition_does_not_crash_the_check(tmp_path):
    """A built-object cache damaged so that it stays well-formed (found by a fresh helper: one letter
    changed in a caller's name) must not crash the prefilter's closure (it raised KeyError)."""
    from fixturelib import built_rows, set_built_rows
    from hp_invariants.project import Project
    from hp_invariants.rules.shard_gated_reset import project_closure

    root = _project(tmp_path / "p", {"helpers.py": HELPERS, "train.py": USES})
    cache = tmp_path / "cache"
    assert len(_check_project(root, "train.py", cache)) == 1
    assert len(_check_project(root, "train.py", cache)) == 1  # stores the built object
    rows = built_rows(cache, "shard-gates", "files")
    assert '"apply_fsdp"' in rows[0]
    set_built_rows(cache, "shard-gates", "files", {0: rows[0].replace('"apply_fsdp"', '"apply_fsdq"')})
    index = Project(cache_dir=str(cache)).data_for_root(RULE.project_facts, root)
    assert "apply_fsdq" not in project_closure(index, frozenset({"fully_shard"}))  # it raised KeyError
    assert isinstance(_check_project(root, "train.py", cache), list)


def test_dropping_a_gate_name_that_is_project_code_is_never_a_safe_fix(tmp_path):
    """`is_shard` read as an attribute runs project code when the project defines it (a placement's
    `is_shard()` method, a property elsewhere); the file's own plain store shadows the project."""
    placements = """
        class Shard:
            def is_shard(self, dim=None):
                return True
        """
    reads = """
        class State:
            def lazy_init(self):
                if self.is_shard:
                    for p in self.params:
                        p.reset_sharded_param()
        """
    stores = """
        class State:
            def __init__(self, is_shard):
                self.is_shard = is_shard

            def lazy_init(self):
                if self.is_shard:
                    for p in self.params:
                        p.reset_sharded_param()
        """
    root = _project(tmp_path, {"placements.py": placements, "state.py": reads, "seed.py": stores})
    (unsafe,) = _check_project(root, "state.py")
    assert unsafe.fix.applicability is Applicability.UNSAFE
    (safe,) = _check_project(root, "seed.py")
    assert safe.fix.applicability is Applicability.SAFE
    # without any definition of the name in the project, the read is a plain attribute read
    (tmp_path / "placements.py").write_text("")
    (alone,) = _check_project(root, "state.py")
    assert alone.fix.applicability is Applicability.SAFE
    # the same holds for an attribute inside a degree comparison (`self.world_size` a property)
    compare = """
        class Mesh:
            @property
            def world_size(self):
                return self._ws

        def wrap(self, model):
            if self.world_size > 1:
                fully_shard(model)
        """
    root = _project(tmp_path / "cmp", {"mesh.py": compare})
    (finding,) = _check_project(root, "mesh.py")
    assert finding.fix.applicability is Applicability.UNSAFE


GATED_READ = """
    class State(Base):
        def lazy_init(self):
            if self.is_shard:
                for p in self.params:
                    p.reset_sharded_param()
    """


@pytest.mark.parametrize(("files", "reader"), [
    # a property made by property(getter) in a class body, here and in a base class of another file
    ({"state.py": "class Base:\n    def _get(self):\n        return self.ws > 1\n    is_shard = property(_get)\n"
      + textwrap.dedent(GATED_READ)}, "state.py"),
    # a descriptor instance bound in the class body
    ({"state.py": "class Flag:\n    def __get__(self, obj, owner):\n        return obj.ws > 1\n\n\n"
      "class Base:\n    is_shard = Flag()\n" + textwrap.dedent(GATED_READ)}, "state.py"),
    # stored by this file, but a base class elsewhere has a property (a data descriptor wins)
    ({"base.py": "class Base:\n    @property\n    def is_shard(self):\n        return self._s\n"
                 "    @is_shard.setter\n    def is_shard(self, v):\n        self._s = v\n",
      "state.py": "from base import Base\n" + textwrap.dedent(GATED_READ).replace(
          "    def lazy_init", "    def __init__(self, s):\n        self.is_shard = s\n\n    def lazy_init")}, "state.py"),
])
def test_gate_names_bound_to_project_code_are_dropped_only_unsafely(tmp_path, files, reader):
    root = _project(tmp_path, files)
    (finding,) = _check_project(root, reader)
    assert finding.fix.applicability is Applicability.UNSAFE


@pytest.mark.parametrize("binding", [
    "from dist_utils import dp_world_size as get_world_size",
    "from dist_utils import dp_world_size\nget_world_size = dp_world_size",
    "get_world_size = lambda: 2",
])
def test_a_degree_call_through_an_alias_of_project_code_is_dropped_only_unsafely(tmp_path, binding):
    utils = "import torch.distributed as dist\n\n\ndef dp_world_size():\n    dist.init_process_group('gloo')\n" \
            "    return dist.get_world_size()\n"
    uses = binding + "\n\n\ndef wrap(model):\n    if get_world_size() > 1:\n        fully_shard(model)\n"
    root = _project(tmp_path, {"dist_utils.py": utils, "train.py": uses})
    (finding,) = _check_project(root, "train.py")
    assert finding.fix.applicability is Applicability.UNSAFE
    # the library's own function, imported under its name, runs no project code
    (tmp_path / "train.py").write_text(uses.replace(binding, "from torch.distributed import get_world_size"))
    (finding,) = _check_project(root, "train.py")
    assert finding.fix.applicability is Applicability.SAFE


UTILS = """
    import torch.distributed as dist


    def dp_size():
        dist.barrier()
        return dist.get_world_size()


    class Base:
        @property
        def _ready(self):
            dist.barrier()
            return True
    """


@pytest.mark.parametrize("code", [
    # an alias of a project function bound in a function, a try block, by partial, in a chain
    "def wrap(model):\n    from utils import dp_size as get_world_size\n    if get_world_size() > 1:\n"
    "        fully_shard(model)\n",
    "try:\n    from utils import dp_size as get_world_size\nexcept ImportError:\n    get_world_size = None\n\n\n"
    "def wrap(model):\n    if get_world_size() > 1:\n        fully_shard(model)\n",
    "import functools\nfrom utils import dp_size\nget_world_size = functools.partial(dp_size)\n\n\n"
    "def wrap(model):\n    if get_world_size() > 1:\n        fully_shard(model)\n",
    "from utils import dp_size\n_ws = dp_size\nget_world_size = _ws\n\n\n"
    "def wrap(model):\n    if get_world_size() > 1:\n        fully_shard(model)\n",
    # a later conjunct, or a nested test, reads a property of a base class in another file
    "from utils import Base\n\n\nclass State(Base):\n    def __init__(self, s):\n        self.is_shard = s\n\n"
    "    def init(self, model):\n        if self.is_shard and self._ready:\n            fully_shard(model)\n",
    "from utils import Base\n\n\nclass State(Base):\n    def __init__(self, s):\n        self.is_shard = s\n\n"
    "    def init(self, model):\n        if self.is_shard:\n            if self._ready:\n                fully_shard(model)\n",
    # a flag the region sets is read after it
    "class State:\n    def __init__(self, s):\n        self.is_shard = s\n\n    def init(self, model):\n"
    "        if self.is_shard:\n            fully_shard(model)\n            self._done = True\n"
    "        if not self._done:\n            self.log = 'plain'\n",
    # a generator the region's loop consumes is iterated again after it
    "def wrap(model, ws):\n    blocks = (m for m in model.children())\n    if ws > 1:\n        for b in blocks:\n"
    "            fully_shard(b)\n    return [m for m in blocks]\n",
])
def test_fixes_that_would_change_more_than_the_step_are_unsafe(tmp_path, code):
    root = _project(tmp_path, {"utils.py": UTILS, "train.py": code})
    (finding,) = _check_project(root, "train.py")
    assert finding.fix.applicability is Applicability.UNSAFE


@pytest.mark.parametrize("code", [
    # the seed: the flag is read by the gate's own test, before the region
    "class State:\n    def __init__(self, s):\n        self.is_shard = s\n        self._done = False\n\n"
    "    def init(self, model):\n        if self.is_shard and not self._done:\n            fully_shard(model)\n"
    "            self._done = True\n",
    # a list is iterated again after the region: the same items
    "def wrap(model, ws):\n    blocks = list(model.children())\n    if ws > 1:\n        for b in blocks:\n"
    "            fully_shard(b)\n    return [m for m in blocks]\n",
    # the library's function under an alias that names it
    "from torch.distributed import get_world_size as ws\n\n\ndef wrap(model):\n    if ws() > 1:\n"
    "        fully_shard(model)\n",
])
def test_their_near_misses_keep_a_safe_fix(tmp_path, code):
    root = _project(tmp_path, {"utils.py": UTILS, "train.py": code})
    (finding,) = _check_project(root, "train.py")
    assert finding.fix.applicability is Applicability.SAFE


def test_a_walrus_in_a_gate_function_of_another_file_reads_as_its_value():
    """``return (ws := get_world_size()) > 1`` in a project function encodes as ``get_world_size() > 1``."""
    from hp_invariants.rules.shard_gate_facts import summarize

    tree = ast.parse("def need_shard():\n    return (ws := get_world_size()) > 1\n")
    (function,), _, _ = summarize(tree)
    assert function[2] == (("cmp", ">", ("c", "get_world_size", ""), 1),)


def test_a_guard_that_raises_on_invalid_input_leaves_the_helper_must_run():
    """A path that raises is no normal return: a helper that refuses invalid input first and
    otherwise always ends in the step is still must-run (issue #23); a guard that returns is not."""
    from hp_invariants.rules.shard_gate_facts import summarize

    code = """
        def validated(m, mesh):
            if mesh is None:
                raise ValueError("a device mesh is required")
            elif not m.layers:
                raise ValueError("no layers")
            fully_shard(m, mesh=mesh)

        def one_branch(m, x):
            if x:
                raise ValueError(x)
            else:
                fully_shard(m)

        def returns_early(m, x):
            if x:
                return m
            fully_shard(m)

        def caught(m, x):
            try:
                if x:
                    raise ValueError(x)
            except ValueError:
                return m
            fully_shard(m)

        def suppressed(m, x):
            with contextlib.suppress(ValueError):
                if x:
                    raise ValueError(x)
            fully_shard(m)
        """
    calls = {f[0]: set(f[3]) for f in summarize(ast.parse(textwrap.dedent(code)))[0]}
    assert "fully_shard" in calls["validated"] and "fully_shard" in calls["one_branch"]
    assert "fully_shard" not in calls["returns_early"] | calls["caught"] | calls["suppressed"]


def test_wrapped_classes_option_names_the_wrapped_state():
    code = """
        def register(policy, world_size):
            if world_size > 1 and isinstance(policy, MyShardedModule):
                register_fsdp_forward_method(policy, "generate")
        """
    assert len(_check(code)) == 1
    assert _check(code, **{"wrapped-classes": ("MyShardedModule",)}) == []


def _eager_closure(index, calls):
    """The must-run closure as it was computed before call sets became lazy: every file's full
    summary, callers in the order of each name's first ``def`` (the reference for the lazy one)."""
    from hp_invariants.rules import shard_gate_facts as facts

    functions = {}
    for number, path in enumerate(index.paths):
        try:
            summary = facts.summarize(ast.parse(open(path, "rb").read()))
        except SyntaxError:
            continue
        for func in summary[0]:
            functions.setdefault(func[0], []).append(facts.FunctionFact(*func))
    callers = {}
    for name, defs in functions.items():
        for func in defs:
            for callee in func.calls:
                callers.setdefault(callee, []).append(name)
    via = {c: c for c in sorted(calls)}
    work = sorted(calls)
    while work:
        callee = work.pop()
        for name in callers.get(callee, ()):
            if name in via:
                continue
            defs = [f for f in functions[name] if not f.abstract] or functions[name]
            hits = [next((c for c in f.calls if c in via), None) for f in defs]
            if all(hits):
                via[name] = hits[0]
                work.append(name)
    return via, callers


def test_the_lazy_closure_is_the_eager_one_in_order_and_chains(tmp_path):
    """Call sets computed on demand give the same must-run closure, and the same chains (which
    must-run name each helper is said to call: the messages), as the full summaries did: names first
    defined in a file that does not mention the callee, several defs of a name (in one file and
    across files), abstract placeholders, helpers calling two must-run names, a name spelled in
    NFKC-equivalent letters (the parser normalizes identifiers: ``ﬁx`` is ``fix``), a file that does
    not parse."""
    from hp_invariants.project import Project
    from hp_invariants.rules.shard_gated_reset import project_closure

    files = {
        "a_first.py": """
            def setup(m):
                log(m)

            def both(m):
                prepare(m)
                fully_shard(m)
            """,
        "b_tools.py": """
            import abc

            def prepare(m):
                m.reset_sharded_param()

            def setup(m):
                prepare(m)
                fully_shard(m)

            def setup(m):
                fully_shard(m)

            class Base:
                @abc.abstractmethod
                def shard(self, m):
                    ...

            def ﬁx_model(m):
                fully_shard(m)
            """,
        "c_more.py": """
            class Impl:
                def shard(self, m):
                    both(m)

            def outer(m):
                fix_model(m)
                shard(m)
            """,
        "e_spelled.py": """
            def helper(m):
                ﬁx_model(m)
            """,
        "d_broken.py": "def fully_shard(:\n",
    }
    root = _project(tmp_path / "p", files)
    cache = tmp_path / "cache"
    for index in (Project(use_cache=False).data_for_root(RULE.project_facts, root),
                  Project(cache_dir=str(cache)).data_for_root(RULE.project_facts, root)):
        for calls in ({"fully_shard"}, {"fully_shard", "reset_sharded_param"}, {"reset_sharded_param"}, {"log"}):
            via, callers = _eager_closure(index, frozenset(calls))
            assert project_closure(index, frozenset(calls)) == via
            assert index.callers_of(sorted(callers)) == {c: callers[c] for c in sorted(callers)}
    via, _ = _eager_closure(index, frozenset({"fully_shard", "reset_sharded_param"}))
    assert {"prepare", "both", "shard", "fix_model", "helper", "outer"} <= set(via) and "setup" not in via


def test_a_file_of_many_functions_is_scanned_once_per_closure(tmp_path):
    """Finding the callers of a step in a file of thousands of ``def``s read that file's function
    list once per function name (quadratic: 14 s for 20,000 defs, a new user's find); each file's
    positions are now read once."""
    from hp_invariants.project import Project
    from hp_invariants.rules.shard_gated_reset import project_closure

    many = "".join(f"def case_{i}(x):\n    return x + {i}\n" for i in range(3000))
    root = _project(tmp_path / "p", {"big.py": many + "def big_helper(model):\n    fully_shard(model)\n",
                                     "main.py": "if world_size > 1:\n    big_helper(model)\n"})
    index = Project(use_cache=False).data_for_root(RULE.project_facts, root)

    class Counting(list):
        reads = 0

        def __getitem__(self, i):
            Counting.reads += 1
            return super().__getitem__(i)

    index.files = Counting(index.files)
    assert project_closure(index, frozenset({"fully_shard"})) == {"fully_shard": "fully_shard",
                                                                  "big_helper": "fully_shard"}
    assert Counting.reads <= 3 * len(index.paths)
    assert len(_check_project(root, "main.py")) == 1


def test_a_caller_in_a_file_whose_cookie_reads_ascii_as_other_text_is_found(tmp_path):
    """``# coding: utf-7`` reads ``wrap+AF8-model`` as ``wrap_model`` (``unicode_escape``: ``\\u005f``):
    the closure's text search decodes such a file instead of searching its bytes (it found no
    caller: a new user's find)."""
    root = _project(tmp_path / "p", {
        "a.py": "def wrap_model(model):\n    fully_shard(model)\n",
        "main.py": "from b import mid\n\nif world_size > 1:\n    mid(model)\n"})
    (root / "b.py").write_bytes(b"# coding: utf-7\nimport a\n\ndef mid(model):\n    a.wrap+AF8-model(model)\n")
    (root / "c.py").write_bytes(b"# coding: unicode_escape\nimport a\n\ndef other(model):\n    a.wrap\\u005fmodel(model)\n")
    (root / "main2.py").write_text("from c import other\n\nif world_size > 1:\n    other(model)\n")
    found = _check_project(root, "main.py")
    assert len(found) == 1 and "mid() -> wrap_model() -> fully_shard" in found[0].message
    assert len(_check_project(root, "main2.py")) == 1


def test_a_call_spelled_with_compatibility_characters_passes_the_text_prefilter(tmp_path):
    """Python reads ``a.conﬁgure_fsdp`` (the ``ﬁ`` ligature) and ``F.ｆully_shard`` (fullwidth) as
    ``configure_fsdp`` and ``fully_shard``; the prefilters and the check's text test searched the
    raw text and skipped the file (a new user's find)."""
    root = _project(tmp_path / "p", {
        "a.py": "def configure_fsdp(model):\n    fully_shard(model)\n",
        "main.py": "import a\n\nif world_size > 1:\n    a.conﬁgure_fsdp(model)\n",
        "direct.py": "import F\n\nif world_size > 1:\n    F.ｆully_shard(model)\n"})
    assert len(_check_project(root, "main.py")) == 1
    assert len(_check_project(root, "direct.py")) == 1
    from hp_invariants.rules.local_tensor_view_not_detached import LocalTensorViewNotDetached

    e9501 = LocalTensorViewNotDetached()  # every rule's token prefilter (Rule.applies_to) reads names so
    assert e9501.applies_to("p._ｌocal_tensor = t.view(-1)") and not e9501.applies_to("p.x = t  # 中文，注释")


HASH_SEEDED = {
    "helpers.py": """
        def a_reset(model):
            for p in model.params:
                p.reset_sharded_param()

        def setup(model):
            fully_shard(model)
            a_reset(model)
        """,
    "main.py": """
        from helpers import setup

        if world_size > 1:
            setup(model)
        else:
            model.to("cuda")
        """,
}


def test_a_helper_running_a_wrap_and_a_completion_step_is_no_wrap_whatever_the_hash_seed(tmp_path):
    """``setup`` always runs ``fully_shard`` (a wrap: a handled world size 1 may skip it) and, through
    ``a_reset``, ``reset_sharded_param`` (a completion step: never skipped). The closure credited it
    with whichever step it met first, in the order of a frozenset (PYTHONHASHSEED): the finding came
    and went between runs (a new user's find). Its steps are now both, so it is no wrap: reported."""
    import os
    import subprocess
    import sys

    root = _project(tmp_path / "p", HASH_SEEDED)
    assert len(_check_project(root, "main.py")) == 1
    outputs = set()
    for seed in ("0", "1", "8"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "HP_INVARIANTS_CACHE_DIR": str(tmp_path / f"c{seed}")}
        done = subprocess.run([sys.executable, "-m", "hp_invariants", "check", "--select", "E9502", "--format",
                               "json", "main.py"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
        outputs.add(done.stdout)
        assert done.returncode == 1, done.stderr
    assert len(outputs) == 1


def test_a_file_of_a_project_not_built_yet_is_checked_with_its_own_helpers(tmp_path):
    """The prefilter reads the must-run helpers of the projects built so far: a session (the pylint
    plugin over two roots, a library session) that built project A first skipped a file of project B
    that calls only B's own helper under a gate. The file's own project is built before asking again."""
    from hp_invariants.project import Project

    a = _project(tmp_path / "a", {"helpers.py": HELPERS, "train.py": USES})
    b = _project(tmp_path / "b", {"tools.py": "def wrap_b(model):\n    fully_shard(model)\n",
                                  "main.py": "from tools import wrap_b\n\nif world_size > 1:\n    wrap_b(model)\n"})
    session = session_for_rules([RULE], None, Project(use_cache=False))
    assert len(session.check_bytes(str(a / "train.py"), (a / "train.py").read_bytes()).findings) == 1  # builds A
    found = session.check_bytes(str(b / "main.py"), (b / "main.py").read_bytes()).findings
    assert [f.line for f in found] == [4] and "wrap_b() -> fully_shard" in found[0].message


def test_the_callers_search_does_not_displace_the_prefilters_last_spelling(tmp_path):
    """The NFKC form of a non-ASCII text is kept for the next prefilter asking about the same text;
    the closure's pass over the project's files (a one-off question per file) must not replace it (a
    new user measured every file with full-width punctuation normalized once more per check)."""
    from hp_invariants import source
    from hp_invariants.project import Project

    root = _project(tmp_path / "p", {"a.py": "def wrap(m):\n    fully_shard(m)  # 中文，注释\n",
                                     "b.py": "def other(m):\n    pass  # 中文，注释\n"})
    index = Project(use_cache=False).data_for_root(RULE.project_facts, root)
    text = "x = 1  # 全角，标点\n"
    spelled = source.identifier_text(text)
    assert spelled != text and spelled.endswith("全角,标点\n")
    assert index.callers_of(["fully_shard"]) == {"fully_shard": ["wrap"]}
    assert source.identifier_text(text) is spelled  # still the remembered answer


def test_an_abstract_placeholder_in_the_checked_file_leaves_the_step_to_the_overrides(tmp_path):
    """``self.apply_fsdp(model)`` in the base class runs a subclass's override: a placeholder of the
    checked file (``@abstractmethod``) does not shadow the project's overrides that always shard (it
    did: no finding; a new user's find, the doc says placeholders leave the decision to overrides)."""
    root = _project(tmp_path / "p", {
        "base.py": """
            from abc import ABC, abstractmethod

            class Trainer(ABC):
                @abstractmethod
                def apply_fsdp(self, model):
                    ...

                def setup(self, model):
                    if self.world_size > 1:
                        self.apply_fsdp(model)
            """,
        "impl.py": """
            from base import Trainer

            class MyTrainer(Trainer):
                def apply_fsdp(self, model):
                    fully_shard(model)
            """})
    found = _check_project(root, "base.py")
    assert [f.line for f in found] == [11] and "apply_fsdp() -> fully_shard" in found[0].message
