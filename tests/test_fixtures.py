"""The rule fixtures, run through every front end: CLI, pylint plugin (torch absent), codemods, fix."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from fixturelib import (FIXTURES, alone_copy, blocked_torch_env, cases_as_projects, checker_cases, codemod_cases, fixtures_without_expectations,
                        unexcluded_config)
from hp_invariants import engine, fixer
from hp_invariants.cli import main
from hp_invariants.project import Project
from hp_invariants.registry import RULES, get_rule
from hp_invariants.source import SourceFile

CHECKER = checker_cases()
CODEMOD = codemod_cases()


def _cli_json(args: list[str]) -> tuple[int, dict]:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = main(["check", "--format", "json", "--no-cache", *args])
    return code, json.loads(buffer.getvalue())


def test_every_fixture_has_expectations():
    assert fixtures_without_expectations() == []


def test_every_rule_has_flagged_and_clean_fixtures():
    for rule in RULES:
        cases = [c for c in CHECKER if c.name.startswith(rule.symbol + "/")]
        flagged = [c for c in cases if any(e[3] == rule.symbol for e in c.expected)]
        clean = [c for c in cases if not c.expected]
        assert flagged, f"{rule.symbol}: no flagged fixture"
        assert clean, f"{rule.symbol}: no clean twin fixture"



def _tsv_rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#")]


def test_every_true_panel_finding_names_a_flagged_fixture():
    """Issue #23: each true finding of the panel's tuning part (``docs/panel/verdicts-tuning.tsv``,
    verdict ``T``) has a row in ``docs/panel/true-findings-fixtures.tsv`` whose fixture cases exist and
    expect at least one finding, so a precision change that silences the shape of a true finding fails
    the fixture runs above and below."""
    panel = Path(__file__).resolve().parents[1] / "docs" / "panel"
    true = {(row[0], row[1]) for row in _tsv_rows(panel / "verdicts-tuning.tsv") if row[3] == "T"}
    table = _tsv_rows(panel / "true-findings-fixtures.tsv")
    assert table[0] == ["project", "path:line", "shape", "fixture cases"]
    mapped = {(row[0], row[1]): row[3].split() for row in table[1:]}
    assert len(mapped) == len(table) - 1, "a finding is listed twice"
    assert set(mapped) == true
    flagged = {case.name for case in CHECKER if case.expected}
    for key, cases in mapped.items():
        assert cases and set(cases) <= flagged, (key, set(cases) - flagged)

@pytest.mark.parametrize("case", CHECKER, ids=lambda c: c.name)
def test_cli_reports_exactly_the_expected_findings(case):
    code, report = _cli_json([str(p) for p in case.files])
    got = {(os.path.normpath(f["path"]), f["line"], f["column"], f["symbol"]) for f in report["findings"]}
    assert report["problems"] == []
    assert got == set(case.expected)
    assert code == (1 if case.expected else 0)


def test_pylint_plugin_reports_the_same_findings_without_torch(tmp_path):
    env = blocked_torch_env(tmp_path)
    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True)
    assert probe.returncode != 0 and "torch is not installed here" in probe.stderr
    # each case is its own project, as the CLI checks it (one pylint run for all: the plugin must tell
    # the projects apart); under an empty [tool.hp-invariants] table, since this repository's own
    # configuration excludes the fixtures (violations on purpose) and the plugin applies exclude to
    # every module
    copies = cases_as_projects(CHECKER, tmp_path / "cases")
    symbols = ",".join(r.rule_id for r in RULES)
    proc = subprocess.run(
        [sys.executable, "-m", "pylint", "--load-plugins=hp_invariants.checkers", "--disable=all",
         f"--enable={symbols}", "--output-format=json", "--score=n", "--persistent=n",
         *sorted(str(c) for c in copies)],
        env=env, capture_output=True, text=True, cwd=tmp_path / "cases",
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    messages = json.loads(proc.stdout or "[]")
    got = {(os.path.normpath(copies[(tmp_path / "cases" / m["path"]).resolve()]),
            m["line"], m["column"] + 1, m["symbol"]) for m in messages}
    expected = {e for case in CHECKER for e in case.expected}
    assert got == expected
    assert (proc.returncode != 0) == bool(expected)


def _fix(path: Path, unsafe: bool) -> fixer.FixOutcome:
    source = SourceFile.from_bytes(str(path), path.read_bytes())
    session = engine.session_for_rules(RULES, project=Project(use_cache=False))
    return fixer.fix_source(session, source, session.settings_for(str(path)), unsafe=unsafe)


@pytest.mark.parametrize("case", CODEMOD, ids=lambda c: c.name)
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix_produces_expected_output_and_is_idempotent(case, unsafe, tmp_path):
    expected_file = (case.after_unsafe or case.after) if unsafe else case.after
    outcome = _fix(alone_copy(case.before, tmp_path / "alone"), unsafe)
    assert outcome.text == expected_file.read_bytes().decode()
    assert not outcome.rejected
    # a second pass changes nothing, and check no longer reports what was fixed
    again = tmp_path / case.before.name
    again.write_bytes(outcome.text.encode())
    second = _fix(again, unsafe)
    assert not second.changed
    fixable_left = [f for f in second.remaining if fixer.allowed(f, unsafe)]
    assert fixable_left == []


@pytest.mark.parametrize("case", CODEMOD, ids=lambda c: c.name)
def test_libcst_codemod_command_matches_fix(case, tmp_path):
    from libcst.codemod import CodemodContext, TransformSkip, TransformSuccess, transform_module

    from hp_invariants import codemods

    rule = get_rule(case.rule)
    command_cls = codemods.COMMANDS[rule.rule_id]
    alone = alone_copy(case.before, tmp_path / "alone")
    command = command_cls(CodemodContext(filename=str(alone)), config=str(unexcluded_config(tmp_path)))
    before = case.before.read_bytes().decode()
    result = transform_module(command, before)
    expected = case.after.read_bytes().decode()
    if expected == before:
        assert isinstance(result, TransformSkip)
    else:
        assert isinstance(result, TransformSuccess), getattr(result, "error", result)
        assert result.code == expected
