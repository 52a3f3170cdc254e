"""Unit tests of E9504 wrap-overlap-hard-raise: message, confidence, options, fix edge cases, fixtures."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hp_invariants import engine, fixer
from hp_invariants.model import Applicability, Confidence
from hp_invariants.rules.wrap_overlap_hard_raise import WrapOverlapHardRaise
from hp_invariants.source import SourceFile

RULE = WrapOverlapHardRaise()
FIXTURES = Path(__file__).parent / "fixtures" / RULE.symbol


def findings(code: str, options: dict | None = None):
    """Findings of the rule on ``code`` (``options``: this rule's option values)."""
    if options is None:
        result = engine.session_for_rules([RULE]).check_bytes("t.py", textwrap.dedent(code).encode())
        assert result.problems == []
        return result.findings
    source = SourceFile.from_bytes("t.py", textwrap.dedent(code).encode())
    session = engine.session_for_rules([RULE], {RULE.rule_id: options})
    return session.analyze(source, engine.parse(source), session.settings_for("t.py"))


def fix(code: str, unsafe: bool = False, newline: str = "\n") -> str:
    text = textwrap.dedent(code).replace("\n", newline)
    return fixer.fix_text(engine.session_for_rules([RULE]), "t.py", text, unsafe=unsafe).text


SEED = """
def _check_and_mark_wrapped(module):
    for sub in module.modules():
        if getattr(sub, "_is_wrapped", False):
            raise ValueError("Submodule is already wrapped")
    for sub in module.modules():
        sub._is_wrapped = True
"""


def test_seed_message_location_confidence_and_safe_fix():
    (finding,) = findings(SEED)
    assert (finding.line, finding.col) == (5, 12)
    assert finding.message == (
        "Raising when submodule 'sub' of 'module.modules()' is already wrapped breaks legitimately shared "
        "submodules (e.g. one rotary embedding shared by all decoder layers); skip it with 'continue' "
        "(evidence: `getattr(sub, \"_is_wrapped\", False)` tested in the walk, raise here)"
    )
    assert finding.confidence is Confidence.HIGH
    assert finding.fix.applicability is Applicability.SAFE
    assert finding.obj == "_check_and_mark_wrapped"
    assert "continue" in fix(SEED) and "raise" not in fix(SEED)


def test_helper_call_is_inference():
    (finding,) = findings("""
        def _fail(sub):
            raise ValueError(sub)

        def wrap(model):
            for sub in model.modules():
                if sub._is_wrapped:
                    _fail(sub)
    """)
    assert finding.confidence is Confidence.INFERENCE
    assert (finding.line, finding.col) == (8, 12)


def test_helper_with_a_return_path_or_a_generator_is_not_always_raising():
    assert findings("""
        def _fail(sub):
            if sub is None:
                return
            raise ValueError(sub)

        def _gen(sub):
            yield sub
            raise ValueError(sub)

        def wrap(model):
            for sub in model.modules():
                if sub._is_wrapped:
                    _fail(sub)
                    _gen(sub)
    """) == []


def test_overridden_method_is_not_resolved():
    code = """
        class Base:
            def _fail(self, sub):
                raise ValueError(sub)

            def wrap(self, model):
                for sub in model.modules():
                    if sub._is_wrapped:
                        self._fail(sub)

        class Lenient(Base):
            def _fail(self, sub):
                print(sub)
    """
    assert findings(code) == []


def test_wrap_markers_option_replaces_the_defaults():
    code = """
        def wrap(model):
            for sub in model.modules():
                if sub._ac_done:
                    raise ValueError("a")
                if sub._is_wrapped:
                    raise ValueError("b")
    """
    assert [f.line for f in findings(code)] == [7]
    assert [f.line for f in findings(code, {"wrap-markers": ("_ac_done",)})] == [5]


def test_wrapper_classes_option_matches_the_last_name_component():
    code = """
        def wrap(model, fsdp):
            for sub in model.modules():
                if isinstance(sub, fsdp.FullyShardedDataParallel):
                    raise ValueError("nested")
    """
    assert findings(code) == []
    (finding,) = findings(code, {"wrapper-classes": ("FullyShardedDataParallel",)})
    assert finding.line == 5


def test_raise_when_not_wrapped_is_not_the_hazard():
    assert findings("""
        def wrap(model):
            for sub in model.modules():
                if not sub._is_wrapped:
                    raise ValueError("expected every submodule to be wrapped")
                if getattr(sub, "_is_wrapped", None) is None:
                    raise ValueError("same, spelled with is None")
    """) == []


def test_a_raise_in_a_finally_inside_the_walk_gets_no_safe_fix():
    """``continue`` in that ``finally`` would discard the exception the ``try`` body raised."""
    code = """
        def wrap_all(model, wrapper):
            for name, sub in model.named_modules():
                try:
                    wrapper(sub)
                finally:
                    if getattr(sub, "_is_wrapped", False):
                        raise ValueError(name)
    """
    (finding,) = findings(code)
    assert finding.fix.applicability is Applicability.UNSAFE
    assert "raise" in fix(code)


def test_or_condition_gets_an_unsafe_fix_applied_only_with_unsafe():
    code = """
        def wrap(model):
            for sub in model.modules():
                if sub._is_wrapped or sub.frozen:
                    raise ValueError("x")
    """
    (finding,) = findings(code)
    assert finding.fix.applicability is Applicability.UNSAFE
    assert "raise" in fix(code)
    assert "raise" not in fix(code, unsafe=True)


def test_report_only_cases_have_no_fix():
    code = """
        def wrap(model, hooks):
            for sub in model.modules():
                while hooks:
                    if sub._is_wrapped:
                        raise ValueError("inner loop")
            if any(m._is_wrapped for m in model.children()):
                raise ValueError("generator form")
    """
    inner, generator = findings(code)
    assert inner.fix is None and "bind to the inner loop" in inner.message
    assert generator.fix is None and generator.args[2] == "skip already-wrapped submodules instead of raising"


def test_root_only_guards_give_no_message_but_children_walk_is_never_root():
    assert findings("""
        def wrap(module):
            for name, sub in module.named_modules():
                if name:
                    continue
                if sub._is_wrapped:
                    raise ValueError("root")
    """) == []
    # a custom prefix: the root's name is not "", so `if not name` says nothing about the root
    assert len(findings("""
        def wrap(module):
            for name, sub in module.named_modules(prefix="model"):
                if not name and sub._is_wrapped:
                    raise ValueError("x")
    """)) == 1


def test_module_level_and_class_level_walks_are_checked():
    assert [f.line for f in findings("""
        for sub in MODEL.modules():
            if sub._is_wrapped:
                raise ValueError("module level")
    """)] == [4]


def test_fix_keeps_crlf_and_moves_inner_comments_above():
    code = """
        def wrap(model):
            for sub in model.modules():
                if sub._is_wrapped:
                    raise ValueError(  # why
                        "x"
                    )  # tail
    """
    out = fix(code, newline="\r\n")
    assert "            # why\r\n            continue  # tail\r\n" in out
    assert "\n" not in out.replace("\r\n", "")


def test_fix_one_line_if_with_inner_comment():
    code = """
        def wrap(model):
            for sub in model.modules():
                if sub._is_wrapped: raise ValueError(  # why
                    "x")
    """
    assert "if sub._is_wrapped: continue  # why\n" in fix(code)


def test_non_ascii_columns_are_characters():
    (finding,) = findings("""
        def wrap(model):
            for sub in model.modules():
                if sub._is_wrapped: raise ValueError("déjà") if "é" else ValueError("é")
    """)
    assert (finding.line, finding.col) == (4, 28)
    assert "continue" in fix("""
        def wrap(model):
            for sub in model.modules():
                ok = "é"; raise ValueError("é") if sub._is_wrapped else None
                if sub._is_wrapped: raise ValueError("é")
    """)


def test_prefilter_and_text_gate_accept_unusual_layouts():
    code = """
        def wrap(model):
            for sub in (model.modules  # walk
                        ()):
                if sub._is_wrapped:
                    raise ValueError("x")
            for sub in model.named_children \\
                    ():
                if sub[1]._is_wrapped:
                    raise ValueError("not a tuple target: no message")
    """
    assert RULE.applies_to(textwrap.dedent(code))
    assert [f.line for f in findings(code)] == [6]


def test_prefilter_skips_files_without_walk_names():
    assert not RULE.applies_to("def f(x):\n    if x._is_wrapped:\n        raise ValueError\n")
    assert RULE.applies_to("for c in net.name_cells().values(): pass\n")


def _checker_cases():
    for path in sorted((FIXTURES / "checker").glob("*.py")):
        yield pytest.param(path, id=path.stem)


@pytest.mark.parametrize("path", list(_checker_cases()))
def test_checker_fixture(path):
    result = engine.session_for_rules([RULE]).check_bytes(str(path), path.read_bytes())
    got = [f"{f.line}:{f.col + 1} {f.symbol}" for f in result.findings]
    expected = [line for line in path.with_suffix(".txt").read_text().splitlines() if line]
    assert got == expected


def _codemod_cases():
    for path in sorted((FIXTURES / "codemod").glob("*.in.py")):
        yield pytest.param(path, id=path.name[: -len(".in.py")])


@pytest.mark.parametrize("path", list(_codemod_cases()))
def test_codemod_fixture_is_applied_until_stable_and_idempotent(path):
    stem = path.name[: -len(".in.py")]
    for unsafe in (False, True):
        expected_path = path.with_name(stem + (".unsafe.out.py" if unsafe else ".out.py"))
        if unsafe and not expected_path.exists():
            expected_path = path.with_name(stem + ".out.py")
        session = engine.session_for_rules([RULE])
        outcome = fixer.fix_text(session, str(path), path.read_bytes().decode(), unsafe=unsafe)
        assert outcome.text == expected_path.read_text()
        again = fixer.fix_text(session, str(path), outcome.text, unsafe=unsafe)
        assert not again.changed


def test_walk_call_text_gate():
    from hp_invariants.rules.wrap_overlap_hard_raise import has_walk_call_text

    assert has_walk_call_text("for n, c in net.cells_and_names ():\n")
    assert has_walk_call_text("x = (m.named_modules\n())")
    assert has_walk_call_text("x = m.name_cells \\\n()")
    assert not has_walk_call_text("self.modules = []\n_no_split_modules = ['x']\nchildren: list\n")


def test_not_implemented_guard_is_reported_with_an_unsafe_fix_only():
    code = (
        "def check(module):\n"
        "    for sub in module.children():\n"
        "        if hasattr(sub, '_fsdp_wrapped_module'):\n"
        "            raise NotImplementedError('nested FSDP unsupported')\n"
    )
    found = findings(code)
    assert len(found) == 1
    assert found[0].fix.applicability is Applicability.UNSAFE
    assert fix(code) == code
    assert "continue" in fix(code, unsafe=True)
    # any other exception class under a plain marker test keeps the safe fix
    other = findings(code.replace("NotImplementedError", "ValueError"))
    assert other[0].fix.applicability is Applicability.SAFE


def _project_run(root: Path, early: bool, monkeypatch, cache: Path):
    """A cold ``check`` of ``root`` with every rule (``early``: the early analysis on, as the CLI
    runs it); the E9504 findings and the files the check parsed again."""
    from hp_invariants.config import Overrides, Resolver
    from hp_invariants.registry import RULES

    parsed: list[str] = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda source: parsed.append(Path(source.path).name) or real_parse(source))
    session = engine.default_session(Resolver(RULES, Overrides(cache_dir=str(cache))), cache_dir=str(cache))
    if not early:
        monkeypatch.setattr(session, "early_analysis", lambda path, raw, source, tree: None)
    result = engine.run_check(session, [str(root)])
    monkeypatch.setattr(engine, "parse", real_parse)
    return [f for f in result.findings if f.rule_id == RULE.rule_id], parsed


def test_a_helper_of_another_module_is_followed_through_its_import(tmp_path, monkeypatch):
    """The raising helper and the moved check of another module of the project (issue #23 recall):
    found through the import, INFERENCE, the file named in the evidence; in a cold check the early
    analysis hands the file to the check (parsed once more) and the findings are the same."""
    import shutil

    root = tmp_path / "proj"
    shutil.copytree(FIXTURES / "checker" / "raise_in_other_module_project", root)
    early, parsed = _project_run(root, True, monkeypatch, tmp_path / "c1")
    late, _ = _project_run(root, False, monkeypatch, tmp_path / "c2")
    assert [(f.line, f.message) for f in early] == [(f.line, f.message) for f in late]
    assert [f.line for f in early] == [12, 18, 24] and parsed == ["wrap.py"]
    assert {f.confidence for f in early} == {Confidence.INFERENCE}
    assert "raise in 'fail_wrapped()' of ckptlib/errors.py:4" in early[0].message
    assert "'ensure_not_wrapped()' of ckptlib/guards.py:6" in early[2].message  # through the re-export
    # without a project the rule sees only the file: nothing to follow
    alone = engine.session_for_rules([RULE]).check_path(str(root / "ckptlib" / "wrap.py"))
    assert alone.findings == []
