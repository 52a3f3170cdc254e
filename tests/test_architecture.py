"""The architecture stays easy to see: no import cycle inside the package, and a rule added from
outside (a fifth rule registered by this test) shows up in every front end without touching any
other file: ``check``, ``fix``, the pylint plugin, ``rules``, ``explain`` and a libcst codemod."""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
from contextlib import redirect_stdout
from pathlib import Path

import pytest

import hp_invariants
from hp_invariants import registry
from hp_invariants.cli import main

REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------- import graph
def _modules() -> dict[str, str]:
    found = {m.name: importlib.util.find_spec(m.name).origin
             for m in pkgutil.walk_packages(hp_invariants.__path__, "hp_invariants.")}
    found["hp_invariants"] = hp_invariants.__file__
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, at any level (function-level imports included;
    ``if TYPE_CHECKING:`` blocks left out: they never run)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        is_package = path.endswith("__init__.py")
        typing_only = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                       for sub in ast.walk(node)}
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    package = name if is_package else name.rsplit(".", 1)[0]
                    for _ in range(node.level - 1):
                        package = package.rsplit(".", 1)[0]
                    base = package + (f".{node.module}" if node.module else "")
                for alias in node.names:
                    deps.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk meets (empty: the graph is acyclic)."""
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_no_import_cycle_inside_the_package():
    graph = import_graph()
    assert "hp_invariants.engine" in graph and "hp_invariants.rules.undefined_method_call.index" in graph
    assert find_cycles(graph) == []


def test_cycle_finder_finds_a_function_level_cycle():
    # the shape the redesign removed: engine imported the class index inside a function, and the
    # index imported the engine's time budget inside another
    assert find_cycles({"engine": {"index"}, "index": {"engine"}}) == [["engine", "index", "engine"]]


def _code_strings(path: str) -> list[str]:
    """The string constants of a module's code (docstrings left out)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_history_knows_no_rule():
    # issue #25: each rule owns its history hooks (pin recognisers, the member a finding misses);
    # hp_invariants.history asks the registered rules and names none of them in its code
    modules = {name: path for name, path in _modules().items() if name.startswith("hp_invariants.history")}
    assert "hp_invariants.history.pins" in modules
    names = [n for rule in registry.RULES for n in (rule.rule_id, rule.symbol)]
    for name, path in modules.items():
        assert not any(n in text for text in _code_strings(path) for n in names), name
        assert not any(dep.startswith("hp_invariants.rules") for dep in import_graph()[name]), name


def test_engine_does_not_know_any_rule():
    graph = import_graph()
    for module in ("hp_invariants.engine", "hp_invariants.project", "hp_invariants.config",
                   "hp_invariants.fixer", "hp_invariants.runner"):
        assert not any(dep.startswith("hp_invariants.rules") for dep in graph[module]), module


def test_rules_never_touch_the_store():
    """One store owns everything on disk (issue #25): a rule declares the types of what it keeps
    (``ProjectFacts.summary_type``, ``built_parts``, ``record_type``) and never imports the store, nor
    encodes, validates or versions stored data itself."""
    graph = import_graph()
    rules = [name for name in graph if name.startswith("hp_invariants.rules")]
    assert len(rules) >= 6
    for name in rules:
        assert "hp_invariants.store" not in graph[name], name
        source = Path(_modules()[name]).read_text(encoding="utf-8")
        for word in ("import json", "VERSION =", "def encode_built", "def decode_built", "TextTable"):
            assert word not in source or name.endswith("undefined_method_call.index") and word == "import json", \
                (name, word)


# ---------------------------------------------------------------------- a fifth rule
FIFTH_RULE = '''\
"""# E9599 demo-print-call

## What it does
Flags `print(...)` calls (a demo rule registered by a test).

## Fix safety
Safe: `print(` becomes `log(`.
"""

from hp_invariants.model import Applicability, Edit
from hp_invariants.api import Rule


class DemoPrintCall(Rule):
    """A tiny rule for the architecture test: one module, one registry line."""

    rule_id = "E9599"
    symbol = "demo-print-call"
    summary = "A print() call (demo rule)"
    msg = "print() call in %s"
    prefilter = ("print",)

    def check(self, ctx):
        import ast

        for node in ctx.nodes_of(ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "print":
                (line, col), (end_line, end_col) = ctx.node_range(node.func)
                fix = ctx.make_fix([Edit((line, col), (end_line, end_col), "log")], "use log()",
                                   Applicability.SAFE)
                yield ctx.finding(self, node, ("demo",), fix=fix)
'''


@pytest.fixture
def fifth_rule(tmp_path: Path, monkeypatch):
    """The demo rule's module written to a folder on ``sys.path`` and registered for the test."""
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    (plugin_dir / "demo_rule.py").write_text(FIFTH_RULE)
    monkeypatch.syspath_prepend(str(plugin_dir))
    module = importlib.import_module("demo_rule")
    rule = module.DemoPrintCall()
    registry.register(rule)
    try:
        yield rule, plugin_dir
    finally:
        registry.unregister(rule)
        sys.modules.pop("demo_rule", None)


def _run(*args: str) -> tuple[int, str]:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = main(list(args))
    return code, buffer.getvalue()


def test_a_rule_registered_from_outside_reaches_every_front_end(fifth_rule, tmp_path: Path):
    rule, plugin_dir = fifth_rule
    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("")
    target = project / "m.py"
    target.write_text("def f():\n    print('x')\n")
    # rules and explain
    code, out = _run("rules")
    assert code == 0 and "E9599  demo-print-call" in out and "DemoPrintCallCommand" in out
    code, out = _run("explain", "demo-print-call")
    assert code == 0 and out.startswith("# E9599 demo-print-call")
    # check (and --select by the new id)
    code, out = _run("check", "--no-cache", "--format", "json", "--select", "E9599", str(project))
    assert code == 1
    assert [(f["id"], f["line"], f["column"]) for f in json.loads(out)["findings"]] == [("E9599", 2, 5)]
    # a libcst codemod derived from the registry
    from libcst.codemod import CodemodContext, TransformSuccess, transform_module

    from hp_invariants.codemods import command_for

    command = command_for(rule)
    assert command.__name__ == "DemoPrintCallCommand"
    result = transform_module(command(CodemodContext(filename=str(target))), target.read_text())
    assert isinstance(result, TransformSuccess) and result.code == "def f():\n    log('x')\n"
    # fix
    code, _ = _run("fix", "--no-cache", "--select", "E9599", str(project))
    assert code == 0 and target.read_text() == "def f():\n    log('x')\n"
    # the pylint plugin, in a process where a plugin module registers the rule before ours loads
    target.write_text("def f():\n    print('x')\n")
    (plugin_dir / "demo_plugin.py").write_text(textwrap.dedent("""\
        from hp_invariants import registry
        from demo_rule import DemoPrintCall

        registry.register(DemoPrintCall())
        from hp_invariants.checkers import register  # noqa: E402
        """))
    env = {**__import__("os").environ, "PYTHONPATH": f"{plugin_dir}:{REPO}"}
    proc = subprocess.run([sys.executable, "-m", "pylint", "--load-plugins=demo_plugin", "--disable=all",
                           "--enable=E9599", "--output-format=json", "--score=n", "--persistent=n", str(target)],
                          capture_output=True, text=True, env=env, cwd=project)
    assert "Traceback" not in proc.stderr, proc.stderr
    messages = json.loads(proc.stdout)
    assert [(m["message-id"], m["symbol"], m["line"]) for m in messages] == [("E9599", "demo-print-call", 2)]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_a_fix_of_a_rule_registered_from_outside_can_be_pinned(fifth_rule, tmp_path: Path, monkeypatch, capsys):
    # the generic pin of issue #26: a rule without history hooks gets its removed finding pinned,
    # and a revert of the fix is reported naming the commit
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    _git(project, "init", "-q", "-b", "main")
    _git(project, "config", "user.name", "T")
    _git(project, "config", "user.email", "t@example.invalid")
    (project / "pyproject.toml").write_text("")
    (project / "m.py").write_text("def report(x):\n    print(x)\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "report with print")
    (project / "m.py").write_text("def report(x):\n    log(x)\n")
    _git(project, "commit", "-qam", "Log instead of printing")
    fix = _git(project, "rev-parse", "HEAD").strip()
    assert main(["pin", "--no-cache", fix]) == 0
    (pin,) = json.loads((project / "hp-invariants-pins.json").read_text())["pins"]
    assert (pin["id"], pin["kind"], pin["location"]) == ("E9599:report", "finding", "report")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "pin")
    assert main(["check", "--no-cache", "--select", "E9599"]) == 0
    _git(project, "revert", "--no-edit", fix)
    capsys.readouterr()
    assert main(["check", "--no-cache", "--format", "json"]) == 1
    found = json.loads(capsys.readouterr().out)["findings"]
    assert sorted(f["id"] for f in found) == ["E9590", "E9599"]
    reverted = next(f for f in found if f["id"] == "E9590")
    assert f"reverts the fix from {fix[:7]} 'Log instead of printing'" in reverted["message"]
    assert "back in report: `print(x)` (the same code)" in reverted["message"]
    assert reverted["line"] == 2


def test_register_refuses_a_clash():
    with pytest.raises(ValueError, match="clashes"):
        registry.register(registry.get_rule("E9501"))
