"""The speed-ups must not change results: fast walks, shared node lists, the project scan and the
parallel class-index build give exactly what the straightforward versions give."""

from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path

from hp_invariants import project as project_module
from hp_invariants.astutil import child_nodes, walk_nodes, walk_with_parents
from hp_invariants.rules.undefined_method_call.index import ClassIndex
from hp_invariants.api import FileContext

_SINGLETONS = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)

SAMPLE = textwrap.dedent('''
    import torch as t
    from . import mod
    from .pkg import *


    @decorate(arg=1)
    class A(Base, metaclass=Meta):
        x: int = 0
        y = {1: 2, **extra}

        def f(self, a, /, b=1, *args, c, d=2, **kw) -> "A":
            global G
            self.z = [i async for i in g() if i] if a else {k: v for k, v in kw.items()}
            with open(a) as (h, i):
                del self.z
            try:
                lambda q: q.m()
            except (ValueError, TypeError) as err:
                raise RuntimeError(f"{err!r:>10}") from err
            match a:
                case {"k": 1, **rest}:
                    pass
                case Point(x=0, y=[1, *others]) | None:
                    pass
            return not a and b or -c < d <= 3

        async def g(self):
            await self.h(x := 1, *[2], **{"k": 3})
            nonlocal_names = 1
            yield from (y for y in range(x))
''')


def _reference_walk(tree: ast.AST) -> list[ast.AST]:
    return [n for n in ast.walk(tree) if not isinstance(n, _SINGLETONS)]


def test_walk_nodes_is_ast_walk_without_singletons():
    tree = ast.parse(SAMPLE)
    got = walk_nodes(tree)
    ref = _reference_walk(tree)
    assert len(got) == len(ref) and all(a is b for a, b in zip(got, ref))
    for node in ref:
        children = [c for c in ast.iter_child_nodes(node) if not isinstance(c, _SINGLETONS)]
        assert child_nodes(node) == children


def test_walk_with_parents_and_context_navigation():
    tree = ast.parse(SAMPLE)
    nodes, owners = walk_with_parents(tree)
    assert nodes == walk_nodes(tree) and owners[0] is None
    parents = {}
    for outer in ast.walk(tree):
        for child in ast.iter_child_nodes(outer):
            parents[id(child)] = outer
    ctx = FileContext(source=None, tree=tree)  # type: ignore[arg-type]
    for node in _reference_walk(tree):
        assert ctx.parent(node) is parents.get(id(node))
    for types in [(ast.Call,), (ast.Import, ast.ImportFrom), (ast.FunctionDef, ast.AsyncFunctionDef),
                  (ast.stmt,), (ast.Constant,), (ast.Num,)]:
        ref = [n for n in ast.walk(tree) if isinstance(n, types)]
        got = ctx.nodes_of(*types)
        assert len(got) == len(ref) and all(a is b for a, b in zip(got, ref)), types


def _project(root: Path, count: int) -> Path:
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "__init__.py").write_text("")
    (root / "venv").mkdir()
    (root / "venv" / "skipped.py").write_text("class Skipped:\n    pass\n")
    (root / "pkg" / "broken.py").write_text("def (:\n")
    for i in range(count):
        folder = root / "pkg" / ("sub" if i % 2 else "")
        (folder / f"m{i:03d}.py").write_text(
            f"from pkg.m000 import Base\n\nclass C{i}(Base):\n    def f(self):\n        self.a{i} = 1\n")
    (root / "pkg" / "m000.py").write_text("class Base:\n    def g(self):\n        pass\n")
    os.symlink(root / "pkg", root / "link")  # a symlinked folder is not entered
    return root


def test_project_entries_match_iter_project_files(tmp_path):
    root = _project(tmp_path / "proj", 6)
    entries = project_module.project_entries(str(root))
    assert [e[0] for e in entries] == list(project_module.iter_project_files(root))
    assert [e[1] for e in entries] == [os.path.relpath(p, root) for p in project_module.iter_project_files(root)]


def test_parallel_index_build_equals_serial(tmp_path):
    root = _project(tmp_path / "proj", project_module.MIN_PARALLEL + 6)
    serial = ClassIndex.for_root(root, use_cache=False)
    parallel = ClassIndex.for_root(root, use_cache=False, jobs=2)
    assert serial.stats == parallel.stats and serial.stats["failed"] == 1
    assert serial.paths == parallel.paths and serial.files == parallel.files and serial.digests == parallel.digests
    cache = tmp_path / "cache"
    cold = ClassIndex.for_root(root, cache_dir=str(cache), jobs=2)
    warm = ClassIndex.for_root(root, cache_dir=str(cache))
    assert cold.files == list(warm.files) == serial.files and warm.stats["parsed"] == 0


# ---------------------------------------------------------------------- one parse per file in a cold check
_FIXTURES = Path(__file__).parent / "fixtures"


def _dump(tree: ast.AST) -> str:
    return ast.dump(tree, include_attributes=True)


def test_summarizers_leave_trees_unchanged():
    """A tree kept from the project build is handed to the check: no summarizer may change it."""
    from hp_invariants.registry import RULES

    kinds = list({id(r.project_facts): r.project_facts for r in RULES if r.project_facts is not None}.values())
    assert len(kinds) == 2
    files = sorted(_FIXTURES.rglob("*.py"))
    assert len(files) > 100
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        before = _dump(tree)
        for kind in kinds:
            kind.summarize(tree, str(path))
        assert _dump(tree) == before, path


def _cold_check(root: Path, cache: Path, early: bool, monkeypatch) -> tuple[list, list[str], object]:
    from hp_invariants import engine
    from hp_invariants.config import Overrides, Resolver
    from hp_invariants.registry import RULES

    parsed: list[str] = []
    real_parse = engine.parse

    def counting_parse(source):
        parsed.append(os.path.basename(source.path))
        return real_parse(source)

    monkeypatch.setattr(engine, "parse", counting_parse)
    session = engine.default_session(Resolver(RULES, Overrides(cache_dir=str(cache))), cache_dir=str(cache))
    if not early:
        monkeypatch.setattr(session, "early_analysis", lambda path, raw, source, tree: None)
    result = engine.run_check(session, [os.path.relpath(root)])  # as the user named it: relative
    monkeypatch.setattr(engine, "parse", real_parse)
    findings = [(f.path, f.line, f.col, f.rule_id, f.message) for f in result.findings]
    return findings, parsed, session.project


def test_cold_check_parses_each_file_once(tmp_path, monkeypatch):
    """A cold ``check`` runs the rules that need no project facts (E9501, E9504) on the trees the
    project build parsed (same findings as parsing again), and parses a file again only where a rule
    reading project facts must look at its tree: E9502 at its gate, E9503 where the index alone cannot
    rule a finding out. Nothing is left over after the run."""
    import shutil

    root = tmp_path / "proj"
    shutil.copytree(_FIXTURES / "shard-gated-reset" / "checker" / "cross_file_gate_project", root)
    (root / "trainlib" / "view.py").write_text(
        "class P:\n    def __init__(self, t):\n        self.p = t\n"
        "    def bad(self):\n        self.p._local_tensor = self.p._local_tensor.view(-1)\n"
        "        self.missing_m()\n\n\ndef make(t):\n    return P(t).bad()\n")
    (root / "trainlib" / "fine.py").write_text(
        "class Q:\n    def __init__(self):\n        self.n = 1\n    def go(self):\n        return self.step()\n"
        "    def step(self):\n        return self.n\n\n\nQ().go()\n")
    (root / "trainlib" / "wrap.py").write_text(
        "def wrap_all(model, wrapper):\n    for name, sub in model.named_modules():\n"
        "        if getattr(sub, '_is_wrapped', False):\n            raise ValueError(f'{name} is already wrapped')\n"
        "        wrapper(sub)\n        sub._is_wrapped = True\n")
    reference, parsed_all, _ = _cold_check(root, tmp_path / "c0", False, monkeypatch)
    assert {f[3] for f in reference} == {"E9501", "E9502", "E9503", "E9504"}
    # without the early analysis: every file a rule looks into (dims.py and fine.py only hold classes
    # whose every call E9503's index already answers: they are never parsed by the check)
    assert sorted(parsed_all) == ["build.py", "view.py", "wrap.py"]

    kept, parsed, project = _cold_check(root, tmp_path / "c1", True, monkeypatch)
    assert kept == reference
    assert sorted(parsed) == ["build.py", "view.py"]  # E9502's gated call; E9503's missing method
    assert project._early == {}

    warm, parsed_warm, _ = _cold_check(root, tmp_path / "c1", True, monkeypatch)
    assert warm == reference and parsed_warm == []  # results cached: nothing parsed at all


def test_reads_outside_checked_methods_need_no_parse(tmp_path, monkeypatch):
    """E9503 checks the reads on the receiver of methods only: a static method's first parameter
    (``x.reshape``) and an unannotated first parameter named otherwise than a receiver
    (``cfg.hidden_size``, a function called through the class) are no receivers, so a file whose only
    reads of non-members are there is decided from the index alone (not parsed by the check), while
    a method's own ``self.missing_m()`` is still parsed and reported."""
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "statics.py").write_text(
        "class R:\n    def __init__(self):\n        self.n = 1\n"
        "    @staticmethod\n    def pack(x):\n        return x.reshape(2)\n"
        "    def helper(cfg):\n        return cfg.hidden_size + getattr(cfg, 'width')\n"
        "    def go(self):\n        return self.n\n\n\nR().go()\n")
    (root / "pkg" / "bad.py").write_text(
        "class B:\n    def go(self):\n        return self.missing_m()\n\n\nB().go()\n")
    findings, parsed, _ = _cold_check(root, tmp_path / "c0", False, monkeypatch)
    assert [(os.path.basename(f[0]), f[3]) for f in findings] == [("bad.py", "E9503")]
    assert sorted(parsed) == ["bad.py"]


def test_an_early_analysis_serves_only_the_bytes_it_was_made_from(tmp_path):
    root = _project(tmp_path / "proj", 3)
    from hp_invariants.rules.undefined_method_call.index import ClassIndexFacts

    project = project_module.Project(use_cache=False)
    target = root / "pkg" / "m000.py"
    other = root / "pkg" / "sub" / "m001.py"
    seen: list[str] = []

    def early(path, raw, source, tree):
        seen.append(path)
        assert source.text == Path(path).read_text()
        return ("early", len(raw), type(tree).__name__)

    project.prepare(str(target), [ClassIndexFacts()], keep=[str(target), str(other)], early=early)
    assert sorted(seen) == sorted([str(target), str(other)]) == sorted(project._early)
    raw = target.read_bytes()
    digest = project_module.content_digest
    assert project.take_early(str(target), digest(raw + b"\n")) is None  # other bytes: forgotten all the same
    assert project.take_early(str(target), digest(raw)) is None
    assert project.take_early(os.path.relpath(other), digest(other.read_bytes())) == \
        ("early", len(other.read_bytes()), "Module")
    assert project._early == {}


def test_source_content_digest_is_the_digest_of_the_bytes_read():
    """The rules ask a file's content digest of its text (to find its indexed summary); it must be
    the digest of the bytes it was decoded from, whatever their encoding, BOM and line endings."""
    from hp_invariants.source import SourceFile

    for raw in (b"x = 1\n", b"\xef\xbb\xbfx = 1\r\ny = 2\r\n", b"# -*- coding: latin-1 -*-\ns = '\xe9'\n",
                b"a = 1\rb = 2\r", "t = '\u00e9\u4e2d'\n".encode()):
        source = SourceFile.from_bytes("f.py", raw)
        assert source.content_digest() == project_module.content_digest(raw)
    primed = SourceFile.from_bytes("f.py", b"x = 1\n")
    primed.known_digest = b"given"
    assert primed.content_digest() == b"given"


def test_a_rule_reading_facts_on_demand_runs_early_and_again_only_where_it_asks(tmp_path, monkeypatch):
    """``Rule.project_on_demand``: the rule runs on the build's tree; in a file where it asks for its
    project facts there (``ProjectFactsDeferred``), its early findings are dropped and the check runs
    it again with the facts (that file alone is parsed again)."""
    from hp_invariants import engine
    from hp_invariants.api import Rule
    from hp_invariants.registry import RULES

    shared = next(r for r in RULES if r.rule_id == "E9502").project_facts

    class OnDemand(Rule):
        rule_id, symbol, msg = "E9599", "on-demand-probe", "%s"
        project_facts, project_on_demand, project_optional = shared, True, True

        def check(self, ctx):
            for node in ctx.nodes_of(ast.Name):
                if node.id == "LOCAL":
                    yield ctx.finding(self, node, ("early" if ctx.early else "late",))
                elif node.id == "NEEDS_FACTS":
                    yield ctx.finding(self, node, (type(ctx.project_data(self)).__name__,))

    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    (root / "pkg" / "a.py").write_text("LOCAL = 1\n")
    (root / "pkg" / "b.py").write_text("LOCAL = 1\nNEEDS_FACTS = 2\n")
    parsed: list[str] = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda source: parsed.append(os.path.basename(source.path)) or real_parse(source))
    session = engine.session_for_rules([OnDemand()], project=project_module.Project(use_cache=False))
    files = [str(root / "pkg" / "a.py"), str(root / "pkg" / "b.py")]
    assert session.prepare(files, early=True) == []
    results = [session.check_path(path) for path in files]
    assert [[f.message for f in r.findings] for r in results] == [["early"], ["late", "ShardGateIndex"]]
    assert parsed == ["b.py"]
    without = engine.session_for_rules([OnDemand()], project=project_module.Project(use_cache=False))
    assert [[f.message for f in without.check_path(path).findings] for path in files] == [["late"], ["late", "ShardGateIndex"]]


# ---------------------------------------------------------------------- a check answered from the results cache
_REPORT_MODULES = textwrap.dedent('''
    import atexit, json, sys

    def report():
        heavy = sorted(m for m in sys.modules if m.startswith("hp_invariants.rules")
                       or m in ("hp_invariants.semantic", "hp_invariants.astutil", "packaging.requirements"))
        sys.stderr.write("MODULES " + json.dumps(heavy) + "\\n")

    atexit.register(report)
    from hp_invariants.cli import main
    sys.exit(main(sys.argv[1:]))
''')


def _check_in_subprocess(project: Path, cache: Path) -> tuple[str, list[str]]:
    """``hp-invariants check project`` in a fresh interpreter: its output and the rule-analysis
    modules (under ``hp_invariants.rules``, the semantic model, the AST helpers) it had imported at exit."""
    import json
    import subprocess
    import sys

    env = dict(os.environ, HP_INVARIANTS_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", _REPORT_MODULES, "check", str(project)], env=env,
                          capture_output=True, text=True, timeout=300)
    line = next(l for l in done.stderr.splitlines() if l.startswith("MODULES "))
    return done.stdout, json.loads(line[len("MODULES "):])


def test_a_check_answered_from_the_results_cache_imports_no_rule_module(tmp_path):
    # issue #25: the registry holds light declarations; each rule's analysis is imported when a file
    # is first checked, so a run whose every file's results are current imports none of it. The
    # project declares a torch range, so E9503's facts read root inputs (their fingerprint then
    # differs from the one of all kinds together: the build must still be skipped)
    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "proj"\ndependencies = ["torch>=2.1"]\n')
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "param.py").write_text(textwrap.dedent('''
        from torch import nn


        class Param:
            def reset_sharded_param(self, local):
                self._local_tensor = local.narrow(0, 0, 4)

        class Model(nn.Module):
            def forward(self):
                return self.missing_method()

        Model()
    '''))
    (project / "pkg" / "plain.py").write_text("def f(x):\n    return x + 1\n")
    cache = tmp_path / "cache"
    cold_out, cold_modules = _check_in_subprocess(project, cache)
    assert "hp_invariants.rules.undefined_method_call" in cold_modules  # the test can fail
    assert "packaging.requirements" in cold_modules  # the declared range is parsed once, when checking
    assert "E9503" in cold_out and "E9501" in cold_out
    warm_out, warm_modules = _check_in_subprocess(project, cache)
    assert warm_modules == []
    assert warm_out == cold_out  # same findings, same report
    (project / "pkg" / "plain.py").write_text("def f(x):\n    return x + 2\n")  # a changed file: checked again
    changed_out, changed_modules = _check_in_subprocess(project, cache)
    assert changed_out == cold_out and "hp_invariants.rules.undefined_method_call" in changed_modules
