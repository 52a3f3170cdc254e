"""Every front end gives the same answer: ``check``, ``fix``, the pylint plugin and the libcst codemods.

A finding silenced by ``# noqa``, ``# pylint: disable``, ``ignore``, ``per-file-ignores`` or
``extend-exclude`` is neither reported, nor fixed, nor counted by any of them; and in a monorepo each
file is checked and fixed under its own configuration (its nearest ``pyproject.toml`` with a
``[tool.hp-invariants]`` table), whatever the order of the paths, from the root or from a package.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tokenize
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from fixturelib import checker_cases
from hp_invariants.cli import main
from hp_invariants.registry import RULES, get_rule

REPO = Path(__file__).resolve().parent.parent

GATED = '''\
class State:
    def lazy_init(self):
        if self.is_shard and not self._done:
            for p in self.params:
                p.reset_sharded_param()
            self._done = True
'''

WRAP = '''\
def check_and_mark(module):
    for sub in module.modules():
        if sub._is_wrapped:
            raise ValueError("x")
'''


# ---------------------------------------------------------------------- the four front ends
def run_main(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def cli_check(*paths: str) -> set[tuple[str, int, str]]:
    """(absolute path, line, id) of every finding ``hp-invariants check`` reports."""
    code, out, err = run_main("check", "--no-cache", "--format", "json", *paths)
    report = json.loads(out)
    assert report["problems"] == [], report["problems"]
    return {(os.path.abspath(f["path"]), f["line"], f["id"]) for f in report["findings"]}


def cli_fix_diff(*paths: str) -> tuple[int, str, str]:
    """``hp-invariants fix --diff``: exit code, the diff, and the summary line."""
    return run_main("fix", "--no-cache", "--diff", *paths)


def codemod(path: Path) -> str | None:
    """The text ``FixAllCommand`` makes of ``path`` (``None``: skipped, nothing to fix)."""
    from libcst.codemod import CodemodContext, TransformSkip, TransformSuccess, transform_module

    from hp_invariants.codemods import FixAllCommand

    result = transform_module(FixAllCommand(CodemodContext(filename=str(path))), path.read_text())
    if isinstance(result, TransformSkip):
        return None
    assert isinstance(result, TransformSuccess), getattr(result, "error", result)
    return result.code


def pylint(*paths: Path, cwd: Path) -> set[tuple[str, int, str]]:
    """(absolute path, line, id) of every message of ours that pylint with the plugin reports."""
    ids = ",".join(r.rule_id for r in RULES)
    proc = subprocess.run(
        [sys.executable, "-m", "pylint", "--load-plugins=hp_invariants.checkers", "--disable=all",
         f"--enable={ids}", "--output-format=json", "--score=n", "--persistent=n", *map(str, paths)],
        capture_output=True, text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "Traceback" not in proc.stderr, proc.stderr
    return {(os.path.normpath(os.path.join(cwd, m["path"])), m["line"], m["message-id"])
            for m in json.loads(proc.stdout or "[]")}


# ---------------------------------------------------------------------- the reported repro
@pytest.mark.parametrize("comment", ["# noqa: E9504", "# pylint: disable=wrap-overlap-hard-raise",
                                     "# NOQA:E9504", "# noqa"])
def test_suppressed_finding_is_never_fixed(tmp_path: Path, comment: str):
    (tmp_path / "pyproject.toml").write_text("")
    target = tmp_path / "a.py"
    text = WRAP.replace('raise ValueError("x")', f'raise ValueError("x")  {comment}')
    target.write_text(text)
    assert cli_check(str(target)) == set()
    code, diff, summary = cli_fix_diff(str(target))
    assert (code, diff) == (0, "") and "fix 0 finding(s)" in summary
    assert run_main("fix", "--no-cache", str(target))[0] == 0 and target.read_text() == text
    assert codemod(target) is None
    if "pylint" not in comment:  # pylint itself applies pylint comments (and is tested on them below)
        assert pylint(target, cwd=tmp_path) == set()


def test_gate_suppressed_with_pylint_disable_is_not_fixed(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    target = tmp_path / "s.py"
    text = GATED.replace("p.reset_sharded_param()", "p.reset_sharded_param()  # pylint: disable=shard-gated-reset")
    target.write_text(text)
    assert cli_check(str(target)) == set()
    assert cli_fix_diff(str(target))[:2] == (0, "")
    assert codemod(target) is None
    assert pylint(target, cwd=tmp_path) == set()


# ---------------------------------------------------------------------- every fixture, suppressed
def _comment_at_end(text: str, line: int, comment: str) -> str | None:
    """``text`` with ``comment`` appended to ``line``, or ``None`` when the line cannot take a trailing
    comment (it ends inside a string or with a backslash continuation)."""
    lines = text.splitlines(keepends=True)
    body = lines[line - 1].rstrip("\r\n")
    if body.rstrip().endswith("\\"):
        return None
    ending = lines[line - 1][len(body):]
    lines[line - 1] = f"{body}  {comment}{ending or os.linesep}"
    candidate = "".join(lines)
    try:
        comments = [t for t in tokenize.generate_tokens(io.StringIO(candidate).readline)
                    if t.type == tokenize.COMMENT and t.start[0] == line and comment in t.string]
        compile(candidate, "<variant>", "exec")
    except (SyntaxError, tokenize.TokenError, ValueError):
        return None
    return candidate if comments else None


FLAGGED = [c for c in checker_cases() if c.expected and len(c.files) == 1]


def _suppressed_copies(tmp_path: Path, kind: str) -> list[Path]:
    """Copies of every flagged single-file fixture with a ``kind`` comment on each finding's line."""
    (tmp_path / "pyproject.toml").write_text("")
    out = []
    for case in FLAGGED:
        text = case.files[0].read_bytes().decode()
        for _, line, _, symbol in sorted(case.expected, key=lambda e: -e[1]):
            rule = get_rule(symbol)
            comment = f"# noqa: {rule.rule_id}" if kind == "noqa" else f"# pylint: disable={symbol}"
            text = _comment_at_end(text, line, comment) if text is not None else None
        if text is None:
            continue
        target = tmp_path / (case.name.replace("/", "__") + ".py")
        target.write_bytes(text.encode())
        out.append(target)
    return out


@pytest.mark.parametrize("kind", ["noqa", "pylint"])
def test_suppressed_fixtures_are_silent_in_every_front_end(tmp_path: Path, kind: str):
    files = _suppressed_copies(tmp_path, kind)
    assert len(files) >= len(FLAGGED) * 3 // 4  # most fixtures can take a trailing comment
    assert cli_check(str(tmp_path)) == set()
    code, diff, _ = cli_fix_diff(str(tmp_path))
    assert (code, diff) == (0, "")
    assert [f.name for f in files if codemod(f) is not None] == []
    assert pylint(*files, cwd=tmp_path) == set()


# ---------------------------------------------------------------------- configuration
@pytest.mark.parametrize("table", [
    'ignore = ["E9502", "wrap-overlap-hard-raise"]',
    'per-file-ignores = { "pkg/*" = ["E9502", "E9504"] }',
    'extend-exclude = ["pkg"]',
])
def test_configuration_silences_the_same_findings_everywhere(tmp_path: Path, table: str):
    (tmp_path / "pyproject.toml").write_text(f"[tool.hp-invariants]\n{table}\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "state.py").write_text(GATED)
    (pkg / "wrap.py").write_text(WRAP)
    files = [pkg / "state.py", pkg / "wrap.py"]
    assert cli_check(str(tmp_path)) == set()
    assert cli_fix_diff(str(tmp_path))[:2] == (0, "")
    assert [codemod(f) for f in files] == [None, None]
    assert pylint(pkg, cwd=tmp_path) == set()
    # without the table every front end reports and fixes both
    (tmp_path / "pyproject.toml").write_text("")
    expected = {(str(pkg / "state.py"), 5, "E9502"), (str(pkg / "wrap.py"), 4, "E9504")}
    assert cli_check(str(tmp_path)) == expected
    assert pylint(pkg, cwd=tmp_path) == expected
    assert cli_fix_diff(str(tmp_path))[0] == 1
    assert all(codemod(f) is not None for f in files)


def test_named_file_is_checked_unless_force_exclude(tmp_path: Path):
    """The CLI checks a file named on its command line even when excluded (ruff's rule); the
    pre-commit hooks pass --force-exclude."""
    (tmp_path / "pyproject.toml").write_text('[tool.hp-invariants]\nextend-exclude = ["gen_*.py"]\n')
    target = tmp_path / "gen_state.py"
    target.write_text(GATED)
    assert cli_check(str(target)) == {(str(target), 5, "E9502")}
    code, out, _ = run_main("check", "--no-cache", "--force-exclude", "--format", "json", str(target))
    assert code == 0 and json.loads(out)["findings"] == []
    assert run_main("fix", "--no-cache", "--force-exclude", "--diff", str(target))[:2] == (0, "")


# ---------------------------------------------------------------------- a monorepo
@pytest.fixture
def monorepo(tmp_path: Path) -> Path:
    """root: a table ignoring E9504; pkg_a: a pyproject without a table (the root's applies);
    pkg_b: its own table ignoring E9502 (only). Each package holds both violations."""
    root = tmp_path / "mono"
    (root / "pkg_a").mkdir(parents=True)
    (root / "pkg_b").mkdir()
    (root / "pyproject.toml").write_text('[tool.hp-invariants]\nignore = ["E9504"]\n')
    (root / "pkg_a" / "pyproject.toml").write_text('[project]\nname = "a"\n')
    (root / "pkg_b" / "pyproject.toml").write_text('[project]\nname = "b"\n\n[tool.hp-invariants]\nignore = ["E9502"]\n')
    for pkg in ("pkg_a", "pkg_b"):
        (root / pkg / "state.py").write_text(GATED)
        (root / pkg / "wrap.py").write_text(WRAP)
    return root


def _mono_expected(root: Path) -> set[tuple[str, int, str]]:
    return {(str(root / "pkg_a" / "state.py"), 5, "E9502"), (str(root / "pkg_b" / "wrap.py"), 4, "E9504")}


@pytest.mark.parametrize("order", [("pkg_a", "pkg_b"), ("pkg_b", "pkg_a"), (".",)])
def test_monorepo_each_file_under_its_own_configuration(monorepo: Path, order, monkeypatch):
    expected = _mono_expected(monorepo)
    monkeypatch.chdir(monorepo)
    assert cli_check(*order) == expected
    for pkg in ("pkg_a", "pkg_b"):  # alone, from the root
        assert cli_check(pkg) == {e for e in expected if f"{os.sep}{pkg}{os.sep}" in e[0]}
    monkeypatch.chdir(monorepo / "pkg_b")  # from inside a package
    assert cli_check(".", "../pkg_a") == expected
    assert cli_check("wrap.py", "state.py") == {(str(monorepo / "pkg_b" / "wrap.py"), 4, "E9504")}


def test_monorepo_fix_pylint_and_codemods_agree(monorepo: Path):
    expected = _mono_expected(monorepo)
    files = sorted(monorepo.rglob("*.py"))
    assert pylint(*files, cwd=monorepo) == expected
    rewritten = {str(f) for f in files if codemod(f) is not None}
    assert rewritten == {e[0] for e in expected}
    code, diff, summary = cli_fix_diff(str(monorepo / "pkg_b"), str(monorepo / "pkg_a"))
    assert code == 1 and "fix 2 finding(s) in 2 file(s)" in summary
    assert {line[4:] for line in diff.splitlines() if line.startswith("+++ ")} == {e[0] for e in expected}
    assert run_main("fix", "--no-cache", str(monorepo))[0] == 0
    assert cli_check(str(monorepo)) == set()
    # what the configuration silenced was left alone
    assert (monorepo / "pkg_a" / "wrap.py").read_text() == WRAP
    assert (monorepo / "pkg_b" / "state.py").read_text() == GATED


def test_invalid_nested_configuration_is_an_error_naming_the_file(monorepo: Path):
    (monorepo / "pkg_b" / "pyproject.toml").write_text('[tool.hp-invariants]\nignore = ["E0000"]\n')
    code, _, err = run_main("check", "--no-cache", str(monorepo / "pkg_b"))
    assert code == 2 and "pkg_b" in err and "unknown rule 'E0000'" in err


def test_pre_commit_style_run_copies_fixture_tree(tmp_path: Path):
    """The bundled examples keep their findings under every front end when checked as a project."""
    root = tmp_path / "examples"
    shutil.copytree(REPO / "examples" / "regressions", root)
    (root / "pyproject.toml").write_text("")
    found = cli_check(str(root))
    assert {r for _, _, r in found} == {r.rule_id for r in RULES}
    assert pylint(*sorted(root.glob("*.py")), cwd=root) == found
