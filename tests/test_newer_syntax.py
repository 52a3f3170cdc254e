"""A file that needs a newer Python is not a syntax error (issue 12 item 6, docs/robustness.md).

Under a Python older than a construct, the file gets ``F0005 needs-newer-python`` naming the
construct, the Python it needs and the one running; a real syntax error stays ``E0001``. On a Python
that has the construct, the same file parses and is checked normally: run under several Pythons,
this test checks both halves of the claim.
"""

from __future__ import annotations

import ast
import json
import platform
import sys
from pathlib import Path

import pytest

from hp_invariants import newsyntax
from test_cli import GATED, run_cli

TRIGGER = "\n# self.reset_sharded_param() self.modules() x._local_tensor self.m()\n"  # parsed, not prefiltered

NEWER = {  # name: (source, the Python that introduced it, the construct named in the message)
    "type_statement": ("type P = int\n", (3, 12), "type statement"),
    "generic_type_alias": ("type Pair[T] = tuple[T, T]\n", (3, 12), "type statement"),
    "generic_function": ("def g[T](x: T) -> T:\n    return x\n", (3, 12), "type parameters"),
    "generic_async_function": ("async def g[T](x: T) -> T:\n    return x\n", (3, 12), "type parameters"),
    "generic_method": ("class C:\n    async def m[T](self, x: T) -> T:\n        return x\n", (3, 12), "type parameters"),
    "generic_class": ("class Box[T: int, *Ts, **P]:\n    pass\n", (3, 12), "type parameters"),
    "fstring_same_quotes": ("d = {'a': 1}\ns = f\"{d[\"a\"]}\"\n", (3, 12), "f-string with nested quotes"),
    "fstring_backslash": ("x = ['a']\ns = f\"{'\\n'.join(x)}\"\n", (3, 12), "f-string with backslash"),
    "fstring_comment": ("x = 1\ns = f'''{\n    x  # the x\n}'''\n", (3, 12), "f-string with comment"),
    "fstring_nested_deep": ("s = f\"{f\"{f\"{1}\"}\"}\"\n", (3, 12), "f-string with nested quotes"),
    "type_parameter_default": ("def g[T = int](x: T) -> T:\n    return x\n", (3, 13), "type parameter defaults"),
    "except_without_parentheses": ("try:\n    pass\nexcept ValueError, TypeError:\n    pass\n", (3, 14),
                                   "except without parentheses"),
    "template_string": ("name = 'x'\ns = t\"hi {name}\"\n", (3, 14), "template string"),
    "match_statement": ("match x:\n    case [1, *rest] if rest:\n        pass\n    case {'a': b, **kw}:\n"
                        "        pass\n    case _: pass\n", (3, 10), "match statement"),
    "except_star": ("try:\n    pass\nexcept* ValueError:\n    pass\n", (3, 11), "except*"),
}

REAL_ERRORS = {  # still E0001, even with newer syntax around them
    "plain": ("def f(:\n    pass\n", 1),
    "after_newer_syntax": ("type P = int\ndef f(:\n    pass\n", 2),
    "before_newer_syntax": ("def f(:\n    pass\ntype P = int\n", 1),
    "bad_fstring_conversion": ("x = 1\ns = f\"{x!z}\"\n", 2),
    "list_display_not_a_subscript": ("def f(a):\n    return [*a]\ndef g(:\n    pass\n", 3),
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "gated.py").write_text(GATED)
    return tmp_path


def _check(tree: Path) -> tuple[int, dict]:
    code, out, _ = run_cli("check", "--no-cache", "--format", "json", str(tree))
    return code, json.loads(out)


@pytest.mark.parametrize("name", sorted(NEWER))
def test_newer_syntax_names_the_python_it_needs(tree: Path, name: str):
    source, needed, construct = NEWER[name]
    (tree / "new.py").write_text(source + TRIGGER)
    code, report = _check(tree)
    assert [f["path"] for f in report["findings"]] == [str(tree / "gated.py")]  # the run goes on
    if sys.version_info[:2] >= needed:  # this Python has it: checked like any file
        ast.parse(source)
        assert code == 1 and report["problems"] == []
        return
    assert code == 2
    (problem,) = report["problems"]
    version = f"{needed[0]}.{needed[1]}"
    assert problem["id"] == "F0005" and problem["symbol"] == "needs-newer-python"
    assert problem["message"].startswith(f"needs Python {version}+ ({construct}"), problem
    assert f"this is Python {platform.python_version()}" in problem["message"]
    assert f"run hp-invariants under Python {version} or later" in problem["message"]
    assert "not a syntax error" in problem["hint"]


@pytest.mark.parametrize("name", sorted(REAL_ERRORS))
def test_a_real_syntax_error_stays_e0001(tree: Path, name: str):
    source, line = REAL_ERRORS[name]
    (tree / "bad.py").write_text(source + TRIGGER)
    code, report = _check(tree)
    assert code == 2
    (problem,) = report["problems"]
    assert problem["id"] == "E0001" and problem["line"] == line, problem
    assert not problem["message"].startswith("needs Python")
    if name == "after_newer_syntax" and sys.version_info < (3, 12):
        assert problem["message"].endswith("(the file also needs Python 3.12+: type statement)")


def test_text_output_and_exit_code(tree: Path):
    (tree / "new.py").write_text("type P = int\n" + TRIGGER)
    code, out, err = run_cli("check", "--no-cache", str(tree / "new.py"))
    if sys.version_info >= (3, 12):
        assert code == 0
        return
    assert code == 2 and "1 could not be checked" in err
    assert out.startswith(f"{tree / 'new.py'}:1:1: F0005 needs-newer-python: needs Python 3.12+ (type statement, line 1)")


def test_only_constructs_newer_than_this_python_are_considered(monkeypatch):
    text = "type P = int\nx = 1\n"
    monkeypatch.setattr(newsyntax, "RUNNING", (3, 12))
    assert newsyntax._features(text) == []
    monkeypatch.setattr(newsyntax, "RUNNING", (3, 11))
    (feature,) = newsyntax._features(text)
    assert (feature.name, feature.version, feature.line, feature.col) == ("type statement", (3, 12), 1, 0)


def test_soft_keywords_used_as_names_are_not_constructs(monkeypatch):
    monkeypatch.setattr(newsyntax, "RUNNING", (3, 9))
    text = ("match = re.match(p, s)\ntype = 2\ncase = [match]\nprint(match, type)\nx = match.group(1)\n"
            "match(x).group(1)\ndef f(a):\n    return [*a]\n")
    assert newsyntax._features(text) == []


def test_explain_never_raises_on_junk():
    for text in ("f'{", "f'{x!'", 'f"""{', "type", "def g[", "except", "match x", "t'{'", "\\", "'''"):
        error = SyntaxError("x", ("f.py", 1, 1, text))
        assert isinstance(newsyntax.explain(text, error), SyntaxError)


@pytest.mark.parametrize("chain", [" and ", "+", "."])
def test_long_operator_chains_do_not_stop_the_run(chain: str):
    """Generated code with a long chain next to newer syntax gets an answer, in linear time.

    libcst's native parser (measured with 1.9.0, issue 25) dies with SIGSEGV on a 20 000-operand
    ``and`` chain that CPython parses, and takes over 30 s on a 10 000-term sum inside one native
    call that the per-file budget cannot interrupt: such a parser must not replace this scan."""
    text = "x = a" + chain + chain.join(["a"] * 20_000) + "\ntype P = int\n"
    try:
        ast.parse(text)
    except SyntaxError as exc:
        assert isinstance(newsyntax.explain(text, exc), SyntaxError)
    except (RecursionError, MemoryError):  # not a syntax error: explain is not asked
        pass
