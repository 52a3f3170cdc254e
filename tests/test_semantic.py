"""The per-file semantic model (hp_invariants.semantic): one resolution policy for every rule."""

from __future__ import annotations

import ast
import textwrap

from hp_invariants.semantic import SemanticModel, is_property

SOURCE = textwrap.dedent(
    """\
    import torch.nn as nn
    from helpers import imported


    def helper(x):
        raise ValueError(x)


    if flag:
        def branch():
            return 1
    else:
        def branch():
            return 2

    shadowed = None


    def shadowed():
        pass


    class Base:
        def step(self):
            return "base"

        @property
        def ready(self):
            return True

        @ready.setter
        def ready(self, value):
            self._ready = value


    class Model(Base):
        def run(self, helper_arg):
            def inner():
                return 0

            inner()
            helper(1)
            branch()
            shadowed()
            imported()
            helper_arg()
            self.step()
            Model.step(self)
            self.ready
            self.missing()
            other.step()


    class Special(Model):
        def step(self):
            return "special"


    class Mixed(nn.Module, Base):
        def go(self):
            self.step()
            self.own()

        def own(self):
            return 1


    def gen():
        yield 1
        return 2
    """
)


def _model() -> tuple[SemanticModel, ast.Module]:
    tree = ast.parse(SOURCE)
    return SemanticModel(tree), tree


def _function(tree: ast.Module, name: str) -> ast.AST:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _calls(func: ast.AST) -> dict[str, ast.Call]:
    return {ast.unparse(n): n for n in ast.walk(func) if isinstance(n, ast.Call)}


def _where(resolution) -> list[tuple[str, int]]:
    return [(d.name, d.lineno) for d in resolution.candidates]


def test_names_resolve_through_the_innermost_scope_that_binds_them():
    model, tree = _model()
    run = _function(tree, "run")
    calls = _calls(run)
    assert _where(model.resolve_call(calls["inner()"], run)) == [("inner", 38)]
    assert _where(model.resolve_call(calls["helper(1)"], run)) == [("helper", 5)]
    both = model.resolve_call(calls["branch()"], run)  # if/else alternatives: both are candidates
    assert _where(both) == [("branch", 10), ("branch", 13)] and both.complete
    # bound by something else than def at module level, imported, or a parameter: nothing
    for text in ("shadowed()", "imported()", "helper_arg()"):
        assert model.resolve_call(calls[text], run).candidates == (), text


def test_self_calls_follow_the_mro_and_the_overrides_of_subclasses():
    model, tree = _model()
    run = _function(tree, "run")
    calls = _calls(run)
    dispatched = model.resolve_call(calls["self.step()"], run)
    assert _where(dispatched) == [("step", 24), ("step", 55)] and dispatched.complete
    assert dispatched.single is None  # an override may run instead: not one definition
    explicit = model.resolve_call(calls["Model.step(self)"], run)  # no dispatch through the class
    assert _where(explicit) == [("step", 24)] and explicit.single is not None
    assert model.resolve_call(calls["self.missing()"], run).candidates == ()
    by_name = model.resolve_call(calls["other.step()"], run)  # receiver of unknown class
    assert _where(by_name) == [("step", 24), ("step", 55)] and not by_name.complete


def test_a_base_outside_the_file_before_the_definition_makes_the_lookup_incomplete():
    model, tree = _model()
    go = _function(tree, "go")
    calls = _calls(go)
    inherited = model.resolve_call(calls["self.step()"], go)  # nn.Module comes first in the MRO
    assert _where(inherited) == [("step", 24)] and not inherited.complete
    own = model.resolve_call(calls["self.own()"], go)  # the class's own method: found before any base
    assert _where(own) == [("own", 64)] and own.complete


def test_property_reads_run_the_getter_only():
    model, tree = _model()
    run = _function(tree, "run")
    read = next(n for n in ast.walk(run) if isinstance(n, ast.Attribute) and n.attr == "ready")
    resolution = model.resolve_attribute(read, run)
    assert _where(resolution) == [("ready", 28)] and resolution.complete
    assert is_property(resolution.candidates[0])
    # a method is not what an attribute read runs, nor a property what a call runs
    step = next(n for n in ast.walk(run) if isinstance(n, ast.Attribute) and n.attr == "step")
    assert model.resolve_attribute(step, run).candidates == ()


def test_owner_aliases_and_returns():
    model, tree = _model()
    run = _function(tree, "run")
    assert model.owner(run).name == "Model" and model.owner(_function(tree, "inner")) is None
    assert model.enclosing_class(_function(tree, "inner")).name == "Model"
    assert sorted(c.name for c in model.subclasses(model.classes("Base")[0])) == ["Mixed", "Model", "Special"]
    assert SemanticModel.returns(_function(tree, "gen")) == []  # a generator returns a generator
    assert [ast.unparse(v) for v in SemanticModel.returns(_function(tree, "step"))] == ["'base'"]
    aliases = SemanticModel(ast.parse("from m import f as g\nh = g\nk = lambda: 1\nh = f2\n")).aliases()
    assert aliases == {"g": "f", "h": None, "k": None}


def test_external_names_what_an_import_binds():
    """``external``: the module and attribute chain a called name bound only by an import reaches;
    nothing for names bound otherwise too (parameters, assignments, defs, two different imports)."""
    tree = ast.parse(textwrap.dedent("""\
        from pkg.util import helper
        from ..ops import narrow_view as nv
        import pkg.mod as m
        import os.path
        from a import twice
        from b import twice
        from c import rebound
        rebound = 1


        def f(t, param):
            import inner.mod as im
            return helper(t), nv(t), m.f(t), os.path.join(t), im.g(t), twice(t), rebound(t), param(t), self.x(t)


        def g(helper):
            return helper(1)
        """))
    model = SemanticModel(tree)
    f, g = tree.body[-2], tree.body[-1]
    calls = [n for n in ast.walk(f.body[-1]) if isinstance(n, ast.Call)]
    got = {ast.unparse(c.func): model.external(c.func, f) for c in calls}
    refs = {name: (ref.module, ref.level, ref.attrs) if ref else None for name, ref in got.items()}
    assert refs == {
        "helper": ("pkg.util", 0, ("helper",)), "nv": ("ops", 2, ("narrow_view",)), "m.f": ("pkg.mod", 0, ("f",)),
        "os.path.join": ("os", 0, ("path", "join")), "im.g": ("inner.mod", 0, ("g",)), "twice": None,
        "rebound": None, "param": None, "self.x": None,
    }
    assert model.external(next(n for n in ast.walk(g) if isinstance(n, ast.Call)).func, g) is None
    assert model.module_import("helper").attrs == ("helper",) and model.module_import("rebound") is None
