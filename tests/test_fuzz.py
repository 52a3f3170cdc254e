"""Property-based tests (hypothesis + hypothesmith): the checker never crashes, fixes always parse and
are idempotent, and the rule fixtures keep exactly their findings under meaning-preserving edits.

Fast by default (the whole file well under a minute on 2 cores). For a long run set
``HP_FUZZ_EXAMPLES=N`` (examples per property; per fixture for the metamorphic test), e.g.
``HP_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz.py`` (see docs/robustness.md). Failures print the
hypothesis reproduction blob (the example database lives in a temporary folder: tests/conftest.py).
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import os
import re
import tempfile
import tokenize
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import hypothesmith
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fixturelib import FIXTURES, codemod_cases
from hp_invariants import engine, fixer
from hp_invariants.project import Project
from hp_invariants.registry import RULES
from hp_invariants.source import SourceFile

LONG_RUN = os.environ.get("HP_FUZZ_EXAMPLES")
# hypothesmith compiles its programs; their SyntaxWarnings ("'int' object is not callable") are noise
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")


def examples(default: int) -> int:
    """Examples per property: ``HP_FUZZ_EXAMPLES`` when set, else the fast default."""
    return int(LONG_RUN) if LONG_RUN else default


FUZZ = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)


# ---------------------------------------------------------------------- helpers
def internal_errors(problems) -> list:
    """Problems that are bugs of ours (a rule raised), as opposed to bad input."""
    return [p for p in problems if p.problem_id == "F0002" and p.message.startswith("internal error")]


class Workspace:
    """A temporary project root (own class index, no cache) in which one file is checked or fixed."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="hp-fuzz-")
        self.root = Path(self._dir.name)
        (self.root / "pyproject.toml").write_text("")

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc) -> None:
        self._dir.cleanup()

    def write(self, name: str, text: str) -> str:
        path = self.root / name
        path.write_bytes(text.encode("utf-8"))
        return str(path)

    def session(self) -> engine.Session:
        """A session checking every file with every rule, its own class index, no cache."""
        return engine.session_for_rules(RULES, project=Project(use_cache=False))

    def check(self, name: str, text: str) -> engine.FileResult:
        path = self.write(name, text)
        return self.session().check_bytes(path, text.encode("utf-8"))


def parses(text: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(text, "<fuzz>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
    return True


# ---------------------------------------------------------------------- generated programs
programs = st.one_of(hypothesmith.from_grammar(), hypothesmith.from_node())


@settings(max_examples=examples(60), **FUZZ)
@given(programs)
def test_check_never_raises_on_generated_programs(code: str):
    raw = code.encode("utf-8", "surrogatepass")
    with Workspace() as ws:
        session = ws.session()
        result = session.check_bytes(str(ws.root / "gen.py"), raw)
        assert not internal_errors(result.problems), result.problems
        # the prefilters let few generated programs through: also run every rule unconditionally
        try:
            source = SourceFile.from_bytes("gen.py", raw)
            tree = engine.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        engine.guarded(lambda: session.analyze(source, tree, session.settings_for(str(ws.root / "gen.py"))))


def _fix_twice(ws: Workspace, text: str, unsafe: bool) -> None:
    path = ws.write("m.py", text)
    session = ws.session()
    first = fixer.fix_text(session, path, text, unsafe=unsafe)
    assert parses(first.text), first.text
    again = fixer.fix_text(ws.session(), path, first.text, unsafe=unsafe)
    assert not again.applied and again.text == first.text, "a second fix changed the file again"


@settings(max_examples=examples(40), **FUZZ)
@given(programs, st.booleans())
def test_fix_output_parses_and_is_idempotent_on_generated_programs(code: str, unsafe: bool):
    assume(parses(code))
    with Workspace() as ws:
        _fix_twice(ws, code, unsafe)


# ---------------------------------------------------------------------- meaning-preserving edits
SAFE_WORDS = ("alpha", "beta", "gamma", "filler", "checked", "zzz", "fuzz")
# Names the rules read as part of their patterns (shard-degree quantities, markers, frameworks):
# never renamed, even when they are local variables (a local `world_size` IS the gate).
PATTERN_WORDS = ("shard", "world", "size", "degree", "wrap", "grad", "local", "tensor", "rank", "dp", "tp",
                 "reset", "module", "cell", "child", "embed", "decoder", "torch", "nn", "mindspore", "param")


def _option_names() -> tuple[set[str], list[re.Pattern]]:
    names, patterns = set(), []
    for rule in RULES:
        for option in rule.options:
            if option.kind == "csv":
                names.update(option.default)
            elif option.kind == "regexp_csv":
                patterns.extend(re.compile(p) for p in option.default)
    return names, patterns


OPTION_NAMES, OPTION_PATTERNS = _option_names()


def rename_candidates(text: str, tree: ast.Module) -> list[str]:
    """Local names whose consistent, file-wide renaming cannot change what any rule sees.

    A candidate is bound inside a function (argument or assignment) and is never: bound at module
    or class level, a def/class/import name, an attribute or keyword-argument name, declared
    global/nonlocal, inside any string (f-strings, annotations), a builtin, ``self``/``cls``, a
    dunder, a rule option value, or a name containing one of :data:`PATTERN_WORDS`.
    """
    in_functions: set[str] = set()
    excluded: set[str] = {"self", "cls"}
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

    def stores_in_scope(nodes) -> set[str]:
        """Names stored by ``nodes``, not descending into nested functions, classes or lambdas."""
        found, todo = set(), [n for n in nodes if not isinstance(n, scopes)]
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                found.add(node.id)
            for child in ast.iter_child_nodes(node):
                if not isinstance(child, scopes):
                    todo.append(child)
        return found

    excluded |= stores_in_scope(tree.body)  # module level
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if arg is not None:
                    in_functions.add(arg.arg)
            body = node.body if isinstance(node.body, list) else [node.body]
            in_functions |= stores_in_scope(body)
            if not isinstance(node, ast.Lambda):
                excluded.add(node.name)
        elif isinstance(node, ast.ClassDef):
            excluded.add(node.name)
            excluded |= stores_in_scope(node.body)  # class attributes
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            excluded.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            excluded.add(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            excluded.update(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                excluded.add((alias.asname or alias.name).split(".")[0])
    strings = " ".join(tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                       if tok.type == tokenize.STRING)
    out = []
    for name in sorted(in_functions - excluded):
        lowered = name.lower()
        if (name in OPTION_NAMES or any(p.fullmatch(name) for p in OPTION_PATTERNS)
                or hasattr(builtins, name) or name.startswith("__") or name in strings
                or any(word in lowered for word in PATTERN_WORDS)):
            continue
        out.append(name)
    return out


def rename(text: str, old: str, new: str) -> str:
    """Replace every NAME token ``old`` by ``new`` (same length: no column moves)."""
    assert len(old) == len(new)
    lines = text.splitlines(keepends=True)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string == old:
            row, col = tok.start
            line = lines[row - 1]
            lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "".join(lines)


def fresh_name(draw, length: int, taken: set[str]) -> str | None:
    first = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    rest = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=length - 1, max_size=length - 1)
    for _ in range(5):
        name = draw(first) + draw(rest)
        if name not in taken and not keyword.iskeyword(name) and not keyword.issoftkeyword(name) \
                and not hasattr(builtins, name):
            return name
    return None


def line_starts_for_insertion(text: str) -> list[int]:
    """Lines before which a whole comment or blank line may be inserted: after a NEWLINE/NL token
    (so never inside a string or after a backslash continuation), never before lines 1-2 (a
    shebang or coding cookie lives there)."""
    ends = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type in (tokenize.NEWLINE, tokenize.NL)}
    return sorted(line + 1 for line in ends if line + 1 >= 3)


def break_points(text: str) -> list[tuple[int, int]]:
    """``(line, col)`` just after a ``(``, ``[``, ``{`` or ``,`` inside brackets and followed by more
    code on the same line: a line break there is an implicit continuation."""
    points, depth, tokens = [], 0, list(tokenize.generate_tokens(io.StringIO(text).readline))
    for tok, nxt in zip(tokens, tokens[1:]):
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        if (depth > 0 and tok.type == tokenize.OP and tok.string in "([{,"
                and nxt.start[0] == tok.end[0] and nxt.type not in (tokenize.NL, tokenize.COMMENT)):
            points.append(tok.end)
    return points


Expected = frozenset  # of (line, 1-based col, symbol)


@dataclass(frozen=True)
class Variant:
    text: str
    expected: Expected
    steps: tuple[str, ...]


@st.composite
def variants(draw, text: str, expected: Expected, allow_lines: bool) -> Variant:
    """A meaning-preserving variant of ``text`` and where ``expected`` findings move to."""
    steps = []
    tree = ast.parse(text)
    candidates = rename_candidates(text, tree)
    taken = {tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.NAME}
    for old in draw(st.lists(st.sampled_from(candidates), unique=True, max_size=4)) if candidates else []:
        new = fresh_name(draw, len(old), taken)
        if new is not None:
            text = rename(text, old, new)
            taken.add(new)
            steps.append(f"rename {old}->{new}")
    if allow_lines:
        for _ in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["comment", "blank", "break"]))
            if kind == "break":
                points = break_points(text)
                if not points:
                    continue
                line, col = draw(st.sampled_from(points))
                indent = draw(st.integers(0, 12))
                lines = text.splitlines(keepends=True)
                lines[line - 1] = lines[line - 1][:col] + "\n" + " " * indent + lines[line - 1][col:]
                text = "".join(lines)
                expected = frozenset(
                    (l + 1, c - col + indent, s) if (l == line and c - 1 >= col) else (l + 1 if l > line else l, c, s)
                    for l, c, s in expected)
                steps.append(f"break line {line} at col {col}")
            else:
                points = line_starts_for_insertion(text)
                if not points:
                    continue
                at = draw(st.sampled_from(points))
                lines = text.splitlines(keepends=True)
                following = lines[at - 1] if at - 1 < len(lines) else ""
                indent = following[: len(following) - len(following.lstrip(" \t"))]
                newline = "\r\n" if text.endswith("\r\n") else "\n"
                if at - 1 >= len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
                    lines[-1] += newline
                new_line = newline if kind == "blank" else f"{indent}# {draw(st.sampled_from(SAFE_WORDS))}{newline}"
                lines.insert(at - 1, new_line)
                text = "".join(lines)
                expected = frozenset((l + 1 if l >= at else l, c, s) for l, c, s in expected)
                steps.append(f"{kind} line before {at}")
    return Variant(text, expected, tuple(steps))


# ---------------------------------------------------------------------- the fixtures
@dataclass(frozen=True)
class FixtureFile:
    name: str
    path: Path
    expected: Expected


def single_file_fixtures() -> list[FixtureFile]:
    """Every ``<rule>/checker/<case>.py`` with its ``.txt`` (works on whatever fixtures exist).

    Project (folder) cases are not used: renaming across files is out of scope. A ``.py`` whose
    ``.txt`` is not written yet is left out (test_fixtures.py reports it).
    """
    cases = []
    for checker in sorted(FIXTURES.glob("*/checker")):
        for path in sorted(checker.glob("*.py")):
            txt = path.with_suffix(".txt")
            if not txt.exists():
                continue
            expected = set()
            for raw in txt.read_text().splitlines():
                if raw.strip() and not raw.strip().startswith("#"):
                    position, symbol = raw.split()
                    line, col = position.split(":")
                    expected.add((int(line), int(col), symbol))
            cases.append(FixtureFile(f"{checker.parent.name}/{path.stem}", path, frozenset(expected)))
    return cases


FIXTURE_FILES = single_file_fixtures()


def found(result: engine.FileResult) -> Expected:
    return frozenset((f.line, f.col + 1, f.symbol) for f in result.findings)


@lru_cache(maxsize=None)
def baseline_problem(case: FixtureFile) -> str:
    """Why a fixture cannot serve as a baseline ("" when it can)."""
    text = case.path.read_text(encoding="utf-8")
    with Workspace() as ws:
        result = ws.check(case.path.name, text)
    if result.problems:
        return f"the fixture itself has problems: {result.problems}"
    if found(result) != case.expected:
        return "the fixture does not pass its own checker test yet (test_fixtures.py reports it)"
    return ""


def has_suppressions(text: str) -> bool:
    """Suppression comments (``noqa``, ``pylint:``, ``type: ignore``) are line-based (pylint's
    disable-next is literally the next line; a ``type: ignore`` covers its own line, as in mypy):
    moving lines around them is not meaning-preserving, so such fixtures get renames only."""
    return "noqa" in text.lower() or "pylint:" in text or "type: ignore" in text


@pytest.mark.skipif(not FIXTURE_FILES, reason="no checker fixtures yet")
@pytest.mark.parametrize("case", FIXTURE_FILES, ids=lambda c: c.name)
@settings(max_examples=examples(3), **FUZZ)
@given(data=st.data())
def test_fixture_variants_keep_exactly_their_findings(case: FixtureFile, data):
    reason = baseline_problem(case)
    if reason:
        pytest.skip(reason)
    text = case.path.read_text(encoding="utf-8")
    variant = data.draw(variants(text, case.expected, allow_lines=not has_suppressions(text)), label="variant")
    assert parses(variant.text), f"transformation bug: {variant.steps}"
    with Workspace() as ws:
        result = ws.check(case.path.name, variant.text)
    assert result.problems == []
    assert found(result) == variant.expected, f"after {variant.steps}:\n{variant.text}"


def test_the_transformations_do_something():
    """Guard against a generator that silently skips everything."""
    assert FIXTURE_FILES, "no checker fixtures found"
    usable = [c for c in FIXTURE_FILES if not baseline_problem(c)]
    assert len(usable) >= len(FIXTURE_FILES) // 2, "most fixtures cannot serve as baselines"
    with_renames = [c for c in usable if rename_candidates(c.path.read_text(), ast.parse(c.path.read_text()))]
    with_breaks = [c for c in usable if break_points(c.path.read_text())]
    assert len(with_renames) >= len(usable) // 3, [c.name for c in usable]
    assert len(with_breaks) >= len(usable) // 2
    sample = "def f(a, b):\n    total = a + g(b, [1, 2])\n    return total\n"
    assert rename_candidates(sample, ast.parse(sample)) == ["a", "b", "total"]
    assert break_points(sample) == [(1, 6), (1, 8), (2, 18), (2, 20), (2, 22), (2, 24)]


CODEMOD_INPUTS = [c for c in codemod_cases()]


@pytest.mark.skipif(not CODEMOD_INPUTS, reason="no codemod fixtures yet")
@pytest.mark.parametrize("case", CODEMOD_INPUTS, ids=lambda c: c.name)
@settings(max_examples=examples(2), **FUZZ)
@given(data=st.data(), unsafe=st.booleans())
def test_fix_of_codemod_variants_parses_and_is_idempotent(case, data, unsafe: bool):
    text = case.before.read_text(encoding="utf-8")
    variant = data.draw(variants(text, frozenset(), allow_lines=not has_suppressions(text)), label="variant")
    assume(parses(variant.text))
    with Workspace() as ws:
        _fix_twice(ws, variant.text, unsafe)
