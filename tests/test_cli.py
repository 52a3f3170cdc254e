"""The ``hp-invariants`` command line: exit codes, formats, suppressions, config, parallelism."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from hp_invariants.cli import main
from hp_invariants.docs import rule_doc
from hp_invariants.registry import RULES

REPO = Path(__file__).resolve().parent.parent
REGRESSIONS = REPO / "examples" / "regressions"
FIXED = REPO / "examples" / "fixed"

GATED = textwrap.dedent(
    """\
    class State:
        def lazy_init(self):
            if self.is_shard and not self._done:
                for p in self.params:
                    p.reset_sharded_param()
                self._done = True
    """
)


def run_cli(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    try:
        if cwd:
            os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A temporary project root (has a pyproject.toml) with one violation in gated.py."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "gated.py").write_text(GATED)
    (tmp_path / "clean.py").write_text("x = 1\n")
    return tmp_path


# ---------------------------------------------------------------------- the bundled regressions
EXPECTED_REGRESSIONS = {
    "activation_swap.py": "E9504",
    "hsdp_param.py": "E9501",
    "hsdp_state.py": "E9502",
    "qwen3_vl_moe_model.py": "E9503",
}


def test_regressions_give_exactly_one_finding_each():
    code, out, _ = run_cli("check", "--no-cache", "--format", "json", str(REGRESSIONS))
    findings = json.loads(out)["findings"]
    assert code == 1
    got = sorted((Path(f["path"]).name, f["id"]) for f in findings)
    assert got == sorted(EXPECTED_REGRESSIONS.items())


def test_fixed_examples_are_clean():
    code, out, _ = run_cli("check", "--no-cache", str(FIXED))
    assert (code, out) == (0, "")


def test_console_script_runs_as_a_subprocess():
    # the console script ends the process at once after main() (cli.run): both streams are flushed first
    proc = subprocess.run([sys.executable, "-m", "hp_invariants", "check", "--no-cache", str(REGRESSIONS)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Found 4 finding(s) in 4 file(s), 4 checked")
    import tomllib

    scripts = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"hp-invariants": "hp_invariants.cli:run"}
    lines = proc.stdout.splitlines()
    assert len(lines) == 4
    for line in lines:
        path, lineno, col, rest = line.split(":", 3)
        assert Path(path).name in EXPECTED_REGRESSIONS
        assert rest.strip().startswith(EXPECTED_REGRESSIONS[Path(path).name])
        assert int(lineno) > 0 and int(col) > 0


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_report_lost_at_the_final_flush_is_exit_2_not_success():
    """The console script flushes the streams itself before ending the process (cli.run): a write
    that fails there (a full disk) is exit 2 with a message, not a silent exit 0/1; only a closed
    pipe is quiet. A fresh helper's find (with PYTHONUNBUFFERED set, as here, it did not show)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "hp_invariants", "check", "--no-cache", "--format", "json",
                               str(REGRESSIONS)], stdout=full, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.returncode == 2
    assert "cannot write the report" in proc.stderr


def test_an_error_escaping_main_is_exit_2_not_findings():
    """When main()'s own error handler cannot run (out of file descriptors, its lazy import fails),
    the console script still exits 2, never 1 ("findings")."""
    code = ("import hp_invariants.cli as cli\n"
            "def boom(argv=None):\n    raise OSError(24, 'Too many open files')\n"
            "cli.main = boom\ncli.run()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "internal error: OSError" in proc.stderr


# ---------------------------------------------------------------------- exit codes and formats
def test_exit_codes(project: Path):
    assert run_cli("check", str(project / "clean.py"))[0] == 0
    assert run_cli("check", str(project / "gated.py"))[0] == 1
    assert run_cli("check", "--exit-zero", str(project / "gated.py"))[0] == 0
    assert run_cli("check", str(project / "missing.py"))[0] == 2
    assert run_cli("check", "--select", "E9999", str(project))[0] == 2
    assert run_cli("bogus-command")[0] == 2


def test_text_output_line_format(project: Path):
    code, out, err = run_cli("check", str(project / "gated.py"))
    assert code == 1
    assert re.fullmatch(re.escape(str(project / "gated.py")) + r":\d+:\d+: E9502 shard-gated-reset: .+\n", out)
    assert "Found 1 finding(s)" in err


def test_json_output_carries_fix_edits(project: Path):
    code, out, _ = run_cli("check", "--format", "json", str(project / "gated.py"))
    finding = json.loads(out)["findings"][0]
    assert finding["id"] == "E9502" and finding["symbol"] == "shard-gated-reset"
    assert finding["confidence"] in {"HIGH", "INFERENCE", "CONTROL_FLOW"}
    fix = finding["fix"]
    assert fix["applicability"] == "safe"
    assert fix["edits"] and all({"start", "end", "content"} <= set(e) for e in fix["edits"])


def test_sarif_output_is_valid_shape(project: Path):
    code, out, _ = run_cli("check", "--format", "sarif", str(project))
    log = json.loads(out)
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} == {r.rule_id for r in RULES}
    (result,) = run["results"]
    assert result["ruleId"] == "E9502"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] in (3, 5)
    replacements = result["fixes"][0]["artifactChanges"][0]["replacements"]
    assert replacements and "deletedRegion" in replacements[0]


def test_github_output(project: Path):
    code, out, _ = run_cli("check", "--format", "github", str(project / "gated.py"))
    assert out.startswith(f"::error file={project / 'gated.py'},line=")
    assert "title=E9502 shard-gated-reset::" in out


def test_select_and_ignore(project: Path):
    assert run_cli("check", "--ignore", "E9502", str(project))[0] == 0
    assert run_cli("check", "--ignore", "shard-gated-reset", str(project))[0] == 0
    assert run_cli("check", "--select", "E9501", str(project))[0] == 0
    assert run_cli("check", "--select", "E95", str(project))[0] == 1


def test_command_line_select_wins_over_the_configured_ignore(project: Path):
    # a new user's find: `--select E9502` in a project whose pyproject ignores E9502 ran nothing (ruff
    # runs it); per-file-ignores still apply and `--ignore` on the command line still removes it
    (project / "pyproject.toml").write_text('[tool.hp-invariants]\nignore = ["E9502"]\n')
    assert run_cli("check", "--no-cache", str(project))[0] == 0
    code, out, _ = run_cli("check", "--no-cache", "--select", "E9502", str(project))
    assert code == 1 and "E9502" in out
    assert run_cli("check", "--no-cache", "--select", "E9502", "--ignore", "E9502", str(project))[0] == 0
    (project / "pyproject.toml").write_text('[tool.hp-invariants]\nignore = ["E9502"]\n'
                                            'per-file-ignores = { "gated.py" = ["E9502"] }\n')
    assert run_cli("check", "--no-cache", "--select", "E9502", str(project / "gated.py"))[0] == 0


def test_parallel_output_is_deterministic(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    for i in range(12):
        (tmp_path / f"m{i:02d}.py").write_text(GATED if i % 3 == 0 else "y = 2\n")
    serial = run_cli("check", "-j", "1", str(tmp_path))
    parallel = run_cli("check", "-j", "2", str(tmp_path))
    assert serial[0] == parallel[0] == 1
    assert serial[1] == parallel[1]
    assert len(serial[1].splitlines()) == 4


# ---------------------------------------------------------------------- bad files among good ones
def test_syntax_error_file_among_good_files(project: Path):
    (project / "broken.py").write_text("def f(:\n    pass\n")
    code, out, err = run_cli("check", str(project))
    assert code == 2
    assert f"{project / 'broken.py'}:1:7: E0001 syntax-error" in out
    assert "E9502" in out  # the other files were still checked
    assert "1 could not be checked" in err


# ---------------------------------------------------------------------- suppressions
@pytest.mark.parametrize("comment", [
    "# pylint: disable=shard-gated-reset",
    "# pylint: disable=E9502",
])
def test_trailing_pylint_disable_covers_its_line_only_as_in_pylint(tmp_path: Path, comment: str):
    (tmp_path / "pyproject.toml").write_text("")
    text = GATED.replace("not self._done:", f"not self._done:  {comment}")
    (tmp_path / "m.py").write_text(text)
    assert run_cli("check", str(tmp_path / "m.py"))[0] == 1


@pytest.mark.parametrize("comment", [
    "# pylint: disable=shard-gated-reset",
    "# noqa: E9502",
    "# noqa: shard-gated-reset",
    "# NOQA:E9502,E9501",
    "# noqa",
])
def test_trailing_suppression_on_the_finding_line(tmp_path: Path, comment: str):
    (tmp_path / "pyproject.toml").write_text("")
    text = GATED.replace("p.reset_sharded_param()", f"p.reset_sharded_param()  {comment}")
    (tmp_path / "m.py").write_text(text)
    assert run_cli("check", str(tmp_path / "m.py"))[:2] == (0, "")


def test_noqa_on_another_line_does_not_silence(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(GATED.replace("not self._done:", "not self._done:  # noqa: E9502"))
    assert run_cli("check", str(tmp_path / "m.py"))[0] == 1


def test_suppression_of_other_rule_does_not_silence(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(GATED.replace("p.reset_sharded_param()", "p.reset_sharded_param()  # noqa: E9501"))
    assert run_cli("check", str(tmp_path / "m.py"))[0] == 1


def test_block_suppression_and_enable(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    text = GATED.replace("    def lazy_init(self):\n",
                         "    def lazy_init(self):\n        # pylint: disable=shard-gated-reset\n")
    text += "\n\ndef g(s):\n    if s.is_shard:\n        s.reset_sharded_param()\n"
    (tmp_path / "m.py").write_text(text)
    code, out, _ = run_cli("check", str(tmp_path / "m.py"))
    assert code == 1
    assert len(out.splitlines()) == 1 and (":11:" in out or ":12:" in out)  # the disable covers lazy_init only


def test_disable_next(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    text = GATED.replace("                p.reset", "                # pylint: disable-next=E9502\n                p.reset")
    (tmp_path / "m.py").write_text(text)
    assert run_cli("check", str(tmp_path / "m.py"))[0] == 0


def test_suppression_inside_string_is_not_a_comment(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    text = GATED.replace("not self._done:", "not self._done and '# noqa':")
    (tmp_path / "m.py").write_text(text)
    assert run_cli("check", str(tmp_path / "m.py"))[0] == 1


def test_unused_suppressions_are_reported(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text("x = 1  # noqa: E9501\ny = 2  # pylint: disable=undefined-method-call\n"
                                   "z = 3  # noqa: F401\n")
    assert run_cli("check", str(tmp_path / "m.py"))[0] == 0
    code, out, _ = run_cli("check", "--report-unused-suppressions", str(tmp_path / "m.py"))
    assert code == 1
    assert [line.split(": ")[1] for line in out.splitlines()] == ["I9500 useless-suppression"] * 2
    assert "'E9501'" in out and "'undefined-method-call'" in out and "F401" not in out


# ---------------------------------------------------------------------- configuration
def test_per_file_ignores_and_exclude(project: Path):
    (project / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.hp-invariants]
        per-file-ignores = { "gated.py" = ["E9502"] }
        """))
    assert run_cli("check", str(project))[0] == 0
    (project / "pyproject.toml").write_text('[tool.hp-invariants]\nextend-exclude = ["gated.py"]\n')
    assert run_cli("check", str(project))[0] == 0
    # a file named explicitly is checked even when excluded
    assert run_cli("check", str(project / "gated.py"))[0] == 1


def _gated_tree(root: Path, *rels: str) -> None:
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(GATED)


@pytest.mark.parametrize("patterns, excluded, checked", [
    # `*` does not cross `/`: only src's own files (fnmatch took src/sub/ too)
    (["src/*.py"], ["src/a.py"], ["src/sub/b.py"]),
    # `**/` is any number of folders, none too (fnmatch missed tests/a.py)
    (["tests/**/*.py"], ["tests/a.py", "tests/x/y/b.py"], ["src/a.py"]),
    # `!` re-includes what an earlier pattern excluded (a literal name before)
    (["*.py", "!keep.py"], ["src/a.py"], ["src/keep.py"]),
    # ... but not inside an excluded folder (as git)
    (["tests/", "!tests/keep.py"], ["tests/keep.py", "tests/a.py"], ["src/a.py"]),
    # a leading ./ or / is the configuration's folder (./ matched nothing before)
    (["./src/gen"], ["src/gen/a.py"], ["src/a.py", "lib/src/gen/b.py"]),
    (["/src/gen"], ["src/gen/a.py"], ["lib/src/gen/b.py"]),
    # `dir/**` is everything below dir, at any depth; `!` re-includes below it (a new user's find: the
    # first matching step took pathspec's `^tests/` for the folder alone, so tests/** excluded nothing)
    (["tests/**"], ["tests/a.py", "tests/unit/t.py"], ["src/tests/b.py"]),
    (["tests/**", "!tests/a.py"], ["tests/b.py"], ["tests/a.py"]),
    # ... at every depth: a folder re-included below it still has its files excluded (as git; a second
    # new user's find: `src/**` counted one level down only)
    (["src/**", "!src/sub/"], ["src/y.py", "src/sub/x.py"], ["lib/z.py"]),
    # a leading ./ anchors at the configuration's folder, as / does (it became a bare name: any depth)
    (["./a.py"], ["a.py"], ["src/a.py"]),
    (["./.hidden.py"], [".hidden.py"], ["src/.hidden.py"]),
    # a bare name matches at any depth; a trailing / only folders
    (["gen"], ["gen/a.py", "src/gen/b.py"], ["src/a.py"]),
    (["gen.py/"], [], ["src/gen.py"]),
    # `*/`, `**/` and `/*/` are every folder: only the files at the top are checked (pathspec reads the
    # first two as a bare `/`: nothing was excluded); `tests/**/` is the folders below tests, not tests
    # itself (tests/a.py was excluded); `*` is every path, `!*.py` re-includes files outside the folders
    # (each as git check-ignore answers; the `*/`, `**/` and `tests/**/` cases fail before)
    (["*/"], ["src/a.py", "src/sub/b.py"], ["top.py"]),
    (["**/"], ["src/a.py", "src/sub/b.py"], ["top.py"]),
    (["/*/"], ["src/a.py"], ["top.py"]),
    (["tests/**/"], ["tests/sub/b.py", "tests/sub/deep/c.py"], ["tests/a.py", "top.py"]),
    (["*", "!*.py"], ["src/a.py"], ["top.py"]),
    # `/**/` and `**/**/` are every folder too, `/**` every path (a new user's find: the first two
    # excluded nothing); an empty component (`/`, `//`, `src//`) matches no path in git: they excluded
    # everything, or src (all but the `/**` case fail before)
    (["/**/"], ["src/a.py", "src/sub/b.py"], ["top.py"]),
    (["**/**/"], ["src/a.py"], ["top.py"]),
    (["/**"], ["src/a.py", "top.py"], []),
    (["/"], [], ["top.py", "src/a.py"]),
    (["//"], [], ["top.py", "src/a.py"]),
    (["src//"], [], ["src/a.py"]),
])
def test_exclude_patterns_are_gitignore_patterns(tmp_path: Path, patterns, excluded, checked):
    """The README and the configuration's doc promise gitignore-style patterns; fnmatch read several
    differently (a new user's find): each case fails before."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.hp-invariants]\nexclude = {patterns!r}\n".replace("'", '"'))
    _gated_tree(tmp_path, *excluded, *checked)
    code, out, err = run_cli("check", "--no-cache", str(tmp_path))
    reported = {line.split(":")[0] for line in out.splitlines()}
    assert reported == {str(tmp_path / rel) for rel in checked}, (out, err)


def test_every_folder_patterns_below_a_folder_named_on_the_command_line(tmp_path: Path):
    """The folder named on the command line is never excluded itself, but `*/` still matches the
    folders below it and `*` every file below it (pathspec's match-everything regex matched the first
    component only: `check src` checked src/sub/b.py under `*`; fails before)."""
    _gated_tree(tmp_path, "src/a.py", "src/sub/b.py")
    for patterns, checked in ((["*/"], {"src/a.py"}), (["*"], set())):
        (tmp_path / "pyproject.toml").write_text(f"[tool.hp-invariants]\nexclude = {patterns!r}\n".replace("'", '"'))
        code, out, err = run_cli("check", "--no-cache", str(tmp_path / "src"))
        reported = {line.split(":")[0] for line in out.splitlines() if line.startswith(str(tmp_path))}
        assert reported == {str(tmp_path / rel) for rel in checked}, (patterns, out, err)


def test_per_file_ignores_read_gitignore_double_stars(tmp_path: Path):
    """``tests/**/*.py`` ignores tests/a.py too (fnmatch needed a folder between); a ``*`` still
    crosses ``/`` in per-file-ignores, as in ruff's (``tests/*`` covers tests/x/b.py)."""
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.hp-invariants]
        per-file-ignores = { "tests/**/*.py" = ["E9502"], "lib/*" = ["E9502"] }
        """))
    _gated_tree(tmp_path, "tests/a.py", "tests/x/b.py", "lib/x/c.py", "src/d.py")
    code, out, _ = run_cli("check", "--no-cache", str(tmp_path))
    assert {line.split(":")[0] for line in out.splitlines()} == {str(tmp_path / "src/d.py")}


def test_a_negated_per_file_ignores_key_is_a_configuration_error(tmp_path: Path):
    # a new user's find: "!pkg/a.py" = [...] was accepted and ignored nothing anywhere
    (tmp_path / "pyproject.toml").write_text('[tool.hp-invariants]\nper-file-ignores = { "!pkg/a.py" = ["E9502"] }\n')
    _gated_tree(tmp_path, "pkg/a.py")
    code, _, err = run_cli("check", "--no-cache", str(tmp_path))
    assert code == 2 and "a '!' pattern is not supported here" in err, err


def test_exclude_pattern_gitignore_cannot_read_is_a_configuration_error(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.hp-invariants]\nextend-exclude = ["gen\\\\"]\n')
    _gated_tree(tmp_path, "a.py")
    code, _, err = run_cli("check", "--no-cache", str(tmp_path))
    assert code == 2 and "'extend-exclude': not a gitignore-style pattern: 'gen\\\\'" in err, err


def test_rule_option_from_pyproject(project: Path):
    (project / "pyproject.toml").write_text(
        '[tool.hp-invariants]\nunconditional-calls = ["materialize"]\n')
    assert run_cli("check", str(project))[0] == 0
    (project / "pyproject.toml").write_text(  # the default reset_sharded_param is kept
        '[tool.hp-invariants]\nextend-unconditional-calls = ["materialize"]\n')
    assert run_cli("check", str(project))[0] == 1


def test_extend_keys_add_to_a_list_and_the_plain_key_replaces_it(tmp_path: Path):
    """``extend-<key>`` adds to the key's value (its default, or what the same table sets, in either
    order of the keys) for every list-valued rule option and ``exclude`` (an ``exclude`` after
    ``extend-exclude`` used to drop its entries); the plain key replaces the default; an ``extend-``
    key of a key it does not add to is a configuration error naming it."""
    from hp_invariants.api import Option, Rule
    from hp_invariants.config import DEFAULT_EXCLUDES, ConfigError, is_list_option, load_config

    class Flagged(Rule):
        rule_id, symbol, summary, msg = "E9598", "flagged", "a rule with a bool option", "%s"
        options = (Option("flag", "bool", False, "a bool option"),)

    rules = [*RULES, Flagged()]
    pyproject = tmp_path / "pyproject.toml"

    def load(body: str):
        pyproject.write_text("[tool.hp-invariants]\n" + body)
        return load_config(tmp_path, rules)

    for rule in RULES:
        for option in filter(is_list_option, rule.options):
            key = option.name
            assert load(f'extend-{key} = ["added"]\n').options[rule.rule_id][key] == (*option.default, "added")
            assert load(f'{key} = ["mine"]\n').options[rule.rule_id][key] == ("mine",)
            for body in (f'{key} = ["mine"]\nextend-{key} = ["added"]\n', f'extend-{key} = ["added"]\n{key} = ["mine"]\n'):
                assert load(body).options[rule.rule_id][key] == ("mine", "added"), body
    assert load('extend-exclude = ["gen"]\n').exclude == [*DEFAULT_EXCLUDES, "gen"]
    assert load('extend-exclude = ["gen"]\nexclude = ["build"]\n').exclude == ["build", "gen"]
    # a new user's find: extend-select said "'select' is not a list" (it is one; extend- only adds to some)
    for body, needle in (('extend-flag = true\n', "unknown key 'extend-flag': extend-<key> only adds to: exclude"),
                         ('extend-select = ["E9501"]\n', "unknown key 'extend-select': extend-<key> only adds to: exclude"),
                         ('extend-report-unused-suppressions = true\n', "'extend-report-unused-suppressions'"),
                         ('extend-nonsense = ["x"]\n', "unknown key 'extend-nonsense'"),
                         ('extend-wrap-markers = ["(unclosed"]\n', "'extend-wrap-markers': bad regular expression"),
                         ('extend-no-grad-contexts = 3\n', "'extend-no-grad-contexts' must be a list")):
        with pytest.raises(ConfigError, match=re.escape(needle)):
            load(body)


@pytest.mark.parametrize("body, needle", [
    ('bogus-key = 1', "unknown key 'bogus-key'"),
    ('select = "E9501"\nignore = 3', "'ignore' must be a list of strings"),
    ('select = ["E9999"]', "unknown rule 'E9999'"),
    ('report-unused-suppressions = "maybe"', "must be a boolean"),
    ('[tool.hp-invariants.per-file-ignores]\n"x.py" = ["nope"]', "unknown rule 'nope'"),
    ('wrap-markers = ["(unclosed"]', "bad regular expression"),
])
def test_config_errors_name_key_and_file(project: Path, body: str, needle: str):
    if not body.startswith("["):
        body = "[tool.hp-invariants]\n" + body
    (project / "pyproject.toml").write_text(body + "\n")
    code, out, err = run_cli("check", str(project))
    assert code == 2
    assert needle in err and str(project / "pyproject.toml") in err


# ---------------------------------------------------------------------- rules / explain
def test_rules_lists_every_rule():
    code, out, _ = run_cli("rules")
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()] == [[r.rule_id, r.symbol] for r in RULES]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.symbol)
def test_explain_prints_the_doc_page(rule):
    page = (REPO / "docs" / "rules" / f"{rule.symbol}.md").read_text(encoding="utf-8")
    assert run_cli("explain", rule.rule_id)[1] == page
    assert run_cli("explain", rule.symbol)[1] == page
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead",
                    "## Fix safety", "## Options", "## References"):
        assert heading in page, f"{rule.symbol}: missing {heading}"
    assert rule_doc(rule).startswith(f"# {rule.rule_id} {rule.symbol}")


def test_explain_unknown_rule():
    code, _, err = run_cli("explain", "E0000")
    assert code == 2 and "unknown rule" in err and "other codes it prints: E0001, F0001" in err and "I9500" in err


@pytest.mark.parametrize("code, symbol", [("E0001", "syntax-error"), ("F0002", "analysis-error"),
                                          ("F0005", "needs-newer-python"), ("I9500", "useless-suppression")])
def test_explain_a_code_the_report_prints_for_a_file_not_checked(code, symbol):
    # a new user's find: `explain F0005` (a code printed in the report) said "unknown rule"
    for name in (code, code.lower(), symbol):
        status, out, _ = run_cli("explain", name)
        assert status == 0 and out.startswith(f"{code} {symbol}: ") and out.count("\n") == 1, out


def test_explain_the_pylint_plugins_own_messages():
    """``explain F9500`` / ``F9501`` (the plugin's messages, not rules) said "unknown rule": each message
    of the plugin that is not a rule is explained, by code or symbol, with its pylint description (an
    ``I9500`` under the plugin's symbol, the CLI's explanation under the code)."""
    from hp_invariants.checkers import HpInvariantsChecker

    own = {code: (symbol, text) for code, (_msg, symbol, text, _) in HpInvariantsChecker.msgs.items()
           if code not in {r.rule_id for r in RULES}}
    assert {"F9500", "F9501"} <= set(own)
    for code, (symbol, text) in own.items():
        names = (symbol,) if code == "I9500" else (code, code.lower(), symbol)
        for name in names:
            assert run_cli("explain", name) == (0, f"{code} {symbol}: {text}\n", ""), name
    assert "configuration is invalid" in own["F9500"][1]  # what _config_error reports as F9500 too
    code, _, err = run_cli("explain", "F9599")
    assert code == 2 and "other codes it prints: E0001, F0001" in err and "I9500, F9500, F9501" in err
    assert "E9590, W9591" in err  # a new user's find: the history codes, which explain knows, were left out


def test_every_problem_code_made_is_explained(tmp_path: Path):
    import re
    made = set(re.findall(r'FileProblem\("([EFI]\d{4})", "([a-z-]+)"', (REPO / "hp_invariants" / "limits.py").read_text()))
    from hp_invariants.limits import PROBLEM_CODES
    assert made and made <= {(code, symbol) for code, (symbol, _) in PROBLEM_CODES.items()}


def test_prefilter_follows_configured_names(tmp_path: Path):
    """Regression: a configured sink/call name must not be skipped by the default text prefilter."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.hp-invariants]\nlocal-tensor-attrs = ["_shard"]\nunconditional-calls = ["materialize"]\n')
    (tmp_path / "m.py").write_text(textwrap.dedent("""\
        def bind(p, buf):
            p._shard = buf.narrow(0, 0, 4)


        def init(s):
            if s.is_shard:
                s.materialize()
        """))
    code, out, _ = run_cli("check", str(tmp_path / "m.py"))
    assert code == 1
    assert [line.split(": ")[1].split()[0] for line in out.splitlines()] == ["E9501", "E9502"]


# ---------------------------------------------------------------------- user-trial regressions
def test_force_exclude_applies_to_named_files(project: Path):
    """Regression: pre-commit names every staged file, so excludes must apply with --force-exclude."""
    (project / "pyproject.toml").write_text('[tool.hp-invariants]\nextend-exclude = ["third_party"]\n')
    (project / "third_party").mkdir()
    (project / "third_party" / "vendored.py").write_text(GATED)
    named = str(project / "third_party" / "vendored.py")
    assert run_cli("check", named)[0] == 1
    code, out, err = run_cli("check", "--force-exclude", named)
    assert (code, out) == (0, "") and "warning: no Python files to check" in err  # said, as ruff says it
    (project / "pyproject.toml").write_text(
        '[tool.hp-invariants]\nextend-exclude = ["third_party"]\nforce-exclude = true\n')
    assert run_cli("check", named)[:2] == (0, "")
    assert run_cli("fix", named)[0] == 0 and (project / "third_party" / "vendored.py").read_text() == GATED


def test_summary_counts_unsafe_fixes_apart(tmp_path: Path):
    """The text summary says how many findings only ``fix --unsafe-fixes`` would fix (a new user read
    "1 finding" with no fix offered and did not know one existed)."""
    mixed = REPO / "tests" / "fixtures" / "local-tensor-view-not-detached" / "codemod" / "mixed_safe_unsafe.in.py"
    (tmp_path / "pyproject.toml").write_text("")
    shutil.copy(mixed, tmp_path / "m.py")
    code, _, err = run_cli("check", str(tmp_path / "m.py"))
    assert code == 1
    assert "2 finding(s)" in err and "; 1 fixable with `hp-invariants fix`;" in err
    assert "1 more fixable only with `hp-invariants fix --unsafe-fixes`" in err
    assert "warning" not in err


def test_negative_jobs_is_a_usage_error(project: Path):
    code, _, err = run_cli("check", "-j", "-1", str(project))
    assert code == 2 and "must be 0" in err


def test_noqa_ids_are_case_insensitive(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(GATED.replace("p.reset_sharded_param()", "p.reset_sharded_param()  # NOQA: e9502"))
    assert run_cli("check", str(tmp_path / "m.py"))[0] == 0


def test_github_format_escapes_property_values(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    odd = tmp_path / "we,ird:na%me.py"
    odd.write_text(GATED)
    _, out, _ = run_cli("check", "--format", "github", str(odd))
    assert out.startswith("::error file=" + str(tmp_path).replace(":", "%3A") + "/we%2Cird%3Ana%25me.py,line=")


def test_sarif_uses_uris_and_inline_help(tmp_path: Path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "bad 100%.py").write_text(GATED)
    monkeypatch.chdir(tmp_path)
    _, out, _ = run_cli("check", "--format", "sarif", "bad 100%.py")
    run = json.loads(out)["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "bad%20100%25.py", "uriBaseId": "%SRCROOT%"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    rule = run["tool"]["driver"]["rules"][0]
    assert "helpUri" not in rule and rule["help"]["markdown"].startswith("# E9501")
    _, out, _ = run_cli("check", "--format", "sarif", str(tmp_path / "bad 100%.py"))
    uri = json.loads(out)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == (tmp_path / "bad 100%.py").as_uri()


def test_configuration_of_a_folder_does_not_depend_on_which_folders_were_asked_first(tmp_path: Path):
    """The nearest ``[tool.hp-invariants]`` table governs a folder; without one, the defaults rooted
    at the folder's own project root, whatever was resolved before (an ancestor's defaults are not
    borrowed)."""
    from hp_invariants.config import Overrides, Resolver
    from hp_invariants.registry import RULES

    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "pyproject.toml").write_text("[project]\nname = 'b'\n")  # a root, no table
    (tmp_path / "t" / "u" / "v").mkdir(parents=True)
    (tmp_path / "t" / "pyproject.toml").write_text('[tool.hp-invariants]\nignore = ["E9504"]\n')
    folders = [tmp_path / "a", tmp_path / "a" / "b" / "c", tmp_path / "a" / "b", tmp_path / "t" / "u" / "v",
               tmp_path / "t"]
    alone = {f: Resolver(RULES, Overrides()).config_for(f) for f in folders}
    assert alone[tmp_path / "a" / "b" / "c"].root == tmp_path / "a" / "b"
    assert alone[tmp_path / "t" / "u" / "v"].source.endswith("pyproject.toml") and alone[tmp_path / "t" / "u" / "v"].root == tmp_path / "t"
    for order in (folders, folders[::-1]):
        resolver = Resolver(RULES, Overrides())
        for folder in order:
            got = resolver.config_for(folder)
            assert (got.root, got.source, got.ignore) == (alone[folder].root, alone[folder].source, alone[folder].ignore), folder


def test_find_project_root(tmp_path: Path):
    """The nearest folder with a marker (``setup.py``/``setup.cfg`` only outside a package); without
    one, the top of the package holding the path, else the folder itself; the same answers with a
    shared memo, for files and for folders."""
    from hp_invariants.config import find_project_root

    (tmp_path / "proj" / "src" / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "proj" / "setup.cfg").write_text("")
    (tmp_path / "loose" / "top" / "inner").mkdir(parents=True)
    for folder in (tmp_path / "loose" / "top", tmp_path / "loose" / "top" / "inner"):
        (folder / "__init__.py").write_text("")
    (tmp_path / "loose" / "top" / "inner" / "m.py").write_text("")
    (tmp_path / "bare").mkdir()
    # a module named setup.py inside a package is not a project marker (Megatron-Bridge's
    # megatron/bridge/training/setup.py): its package belongs to the project above
    for folder in (tmp_path / "proj" / "src" / "pkg", tmp_path / "proj" / "src" / "pkg" / "sub"):
        (folder / "__init__.py").write_text("")
    (tmp_path / "proj" / "src" / "pkg" / "sub" / "setup.py").write_text("def setup_training(): ...\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "setup.py").write_text("")  # outside a package: the project's build script
    (tmp_path / "app" / "lib").mkdir()
    cases = {tmp_path / "proj" / "src" / "pkg" / "sub": tmp_path / "proj",
             tmp_path / "proj" / "src" / "pkg" / "sub" / "setup.py": tmp_path / "proj",
             tmp_path / "app" / "lib": tmp_path / "app",
             tmp_path / "proj": tmp_path / "proj",
             tmp_path / "loose" / "top" / "inner" / "m.py": tmp_path / "loose" / "top",
             tmp_path / "loose" / "top" / "inner": tmp_path / "loose" / "top",
             tmp_path / "bare": tmp_path / "bare"}
    memo: dict[str, bool] = {}
    for _ in range(2):
        for path, root in cases.items():
            assert find_project_root(path) == root == find_project_root(str(path), memo), path


@pytest.mark.parametrize("top", ["[tool.hp-invariants]\n", ""])
def test_a_pyproject_of_other_tools_settings_does_not_end_the_project(tmp_path: Path, top: str):
    """A sub-folder's ``pyproject.toml`` with only ``[tool.black]`` is passed over by the project root
    as by the configuration lookup when a folder above is marked (by our table or a plain marker): the
    class in it is indexed with its base class above it, so E9503 reports the missing method as it
    does without that file (it used to be lost). A ``pyproject.toml`` that declares a project, is
    empty or holds our table still makes the folder a project of its own; with nothing marked above,
    the other tools' file is the root, as before."""
    from hp_invariants.config import Resolver, find_project_root

    (tmp_path / "top").mkdir()
    root = tmp_path / "top"
    (root / "pyproject.toml").write_text(top)
    (root / "pkg" / "sub").mkdir(parents=True)
    for folder in (root / "pkg", root / "pkg" / "sub"):
        (folder / "__init__.py").write_text("")
    (root / "pkg" / "base.py").write_text("class Base:\n    pass\n")
    mod = root / "pkg" / "sub" / "mod.py"
    mod.write_text("from pkg.base import Base\n\n\nclass Child(Base):\n    def f(self):\n"
                   "        return self.missing()\n\n\nchild = Child()\n")
    (root / "pkg" / "sub" / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")
    for args in ((str(root),), (str(mod),)):  # the walk, and the one file pre-commit passes
        code, out, _ = run_cli("check", "--no-cache", "--select", "E9503", *args)
        assert code == 1 and "mod.py:6:16: E9503 undefined-method-call: 'Child' object has no attribute 'missing'" in out, out
    assert find_project_root(mod) == root == Resolver(RULES).config_for(mod).root
    for own in ("[tool.hp-invariants]\n", "[project]\nname = 'sub'\n", "[build-system]\n", ""):
        (root / "pkg" / "sub" / "pyproject.toml").write_text(own)
        assert find_project_root(mod) == root / "pkg" / "sub", own
    (root / "pkg" / "sub" / "pyproject.toml").write_text("[tool.black]\n")
    (root / "pyproject.toml").unlink()  # nothing marked above: the other tools' file is the root
    memo: dict = {}
    assert find_project_root(mod) == root / "pkg" / "sub" == find_project_root(mod, memo) == find_project_root(mod, memo)
    assert find_project_root(root / "pkg", memo) == root / "pkg"  # no marker: the package top
