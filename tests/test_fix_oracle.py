"""The executable fix-safety oracle (issue #10): a fix marked safe changes nothing but the invariant.

For every rule, hypothesis generates programs that place the rule's site inside random nested
control-flow contexts (``tests/oracle/programs.py``), ``hp-invariants fix`` (the public CLI, safe fixes
only) rewrites them, and both versions run with recording stubs at shard degree 1 and > 1, with and
without already-wrapped submodules, with grad mode on and off; the traces must be equal except for
the rule's one intended difference (``tests/oracle/check.py``). Every codemod fixture whose safe
output differs runs through the oracle too (``tests/oracle/fixtures.py``), and the oracle itself is
shown to reject the unsafe fixes.

Bounded in CI (derandomized, ``EXAMPLES`` programs per rule, a few seconds each on 2 cores); the
opt-in long run explores new programs: ``HP_ORACLE_EXAMPLES=2000 pytest tests/test_fix_oracle.py``.
``HP_ORACLE_STATS=FILE`` appends one JSON line per rule (programs generated, fixed, unchanged).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, configuration, given, settings
from hypothesis import strategies as st

from fixturelib import codemod_cases
from hp_invariants import cli
from hp_invariants.registry import RULES, get_rule
from oracle.check import OracleFailure, apply_fix, check_program, examples
from oracle.fixtures import check_fixture
from oracle.programs import GENERATORS, make_program

EXAMPLES = examples(40)
LONG_RUN = bool(os.environ.get("HP_ORACLE_EXAMPLES"))
ORACLE_SETTINGS = settings(
    max_examples=EXAMPLES, database=None, deadline=None, derandomize=not LONG_RUN,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.fixture(autouse=True)
def _hypothesis_storage_in_tmp(tmp_path_factory):
    """Hypothesis writes a cache of source constants under its home folder (default ``./.hypothesis``):
    keep it in a temp folder while these tests run (``database=None`` already keeps examples out)."""
    configuration.set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis-home"))
    yield
    configuration.set_hypothesis_home_dir(None)


def test_every_rule_has_a_generator():
    assert sorted(GENERATORS) == sorted(rule.rule_id for rule in RULES)


@pytest.mark.parametrize("rule", [rule.rule_id for rule in RULES])
def test_safe_fixes_pass_the_oracle_on_generated_programs(rule):
    stats: Counter = Counter()

    @ORACLE_SETTINGS
    @given(st.data())
    def run(data):
        program = data.draw(GENERATORS[rule](), label="program")
        with tempfile.TemporaryDirectory() as folder:
            result = check_program(program, Path(folder))
        stats["programs"] += 1
        stats["fixed" if result.fixed else "unchanged"] += 1
        stats["runs"] += result.scenarios * 2

    run()
    if os.environ.get("HP_ORACLE_STATS"):
        with open(os.environ["HP_ORACLE_STATS"], "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"rule": rule, **stats}) + "\n")
    # not vacuous: some generated programs were rewritten, and some were left alone
    assert stats["fixed"] > 0 and stats["unchanged"] > 0, stats


# ---------------------------------------------------------------------- the issue's repros
REPROS = {
    "E9502-else": ("E9502", "unsafe", (
        "class S:\n    def init(self):\n        if self.is_shard and not self.done:\n"
        "            self.p.reset_sharded_param()\n        else:\n            self.replicate()\n")),
    "E9502-elif": ("E9502", "unsafe", (
        "class S:\n    def init(self):\n        if self.is_shard and not self.done:\n"
        "            self.p.reset_sharded_param()\n        elif not self.is_shard:\n            self.replicate()\n")),
    "E9504-bare-reraise": ("E9504", None, (
        "def f(m):\n    for s in m.modules():\n        if s._is_wrapped:\n            try:\n"
        "                check(s)\n            except KeyError:\n                raise\n")),
    "E9504-rollback": ("E9504", "unsafe", (
        "def f(m):\n    try:\n        for s in m.modules():\n            if s._is_wrapped:\n"
        "                raise ValueError('wrapped')\n    except ValueError:\n        rollback()\n        raise\n")),
}


@pytest.mark.parametrize("name", sorted(REPROS))
def test_issue_10_repros_are_not_rewritten_by_default(name, tmp_path, capsys):
    rule, applicability, source = REPROS[name]
    path = tmp_path / "repro.py"
    path.write_text(source)
    cli.main(["fix", "--no-cache", str(path)])
    assert path.read_text() == source
    for fmt in ("json", "sarif"):
        report = tmp_path / f"report.{fmt}"
        cli.main(["check", "--no-cache", "--format", fmt, "-o", str(report), str(path)])
        data = json.loads(report.read_text())
        if fmt == "json":
            found = [f["fix"]["applicability"] if f["fix"] else None
                     for f in data["findings"] if f["id"] == rule]
        else:
            found = [r["fixes"][0]["properties"]["applicability"] if r.get("fixes") else None
                     for r in data["runs"][0]["results"] if r["ruleId"] == rule]
        assert found == ([applicability] if applicability else []), (fmt, found)
    capsys.readouterr()


# ---------------------------------------------------------------------- the oracle has teeth
UNSAFE_PROGRAMS = {
    # each is rewritten only with --unsafe-fixes, and the oracle must reject that rewrite
    "E9502": ("class State:\n    def init(self, ws):\n        if self.is_shard and not self.done:\n"
              "            self.p.reset_sharded_param()\n        else:\n            self.replicate()\n", None),
    "E9504": ("def wrap(m, strict):\n    try:\n        for s in m.modules():\n            if s._is_wrapped:\n"
              "                raise ValueError(refusal(s))\n            log('mark', s)\n"
              "    except ValueError:\n        rollback()\n        raise\n",
              "def wrap(m, strict):\n    try:\n        for s in m.modules():\n            if s._is_wrapped:\n"
              "                continue\n            log('mark', s)\n"
              "    except ValueError:\n        rollback()\n        raise\n"),
    "E9501": ("import torch\n\n\nclass Param:\n    def reset(self, t, flag):\n"
              "        with torch.set_grad_enabled(flag):\n            v = t.narrow(0, 0, 2)\n"
              "        self.param._local_tensor = v\n        return v\n", None),
    "E9503": ("from torch import nn\n\n\nclass Emb(nn.Module):\n    pass\n\n\nclass Model(nn.Module):\n"
              "    def __init__(self, cfg):\n        super().__init__()\n        self.embed_tokens = Emb()\n\n"
              "    def api(self):\n        if hasattr(self, 'set_input_embeddings'):\n            log('has')\n\n"
              "    def forward(self, x):\n        log(self.get_input_embeddings())\n        return x\n\n\n"
              "def build(cfg):\n    return Model(cfg)\n",
              "from torch import nn\n\n\nclass Emb(nn.Module):\n    pass\n\n\nclass Model(nn.Module):\n"
              "    def __init__(self, cfg):\n        super().__init__()\n        self.embed_tokens = Emb()\n\n"
              "    def get_input_embeddings(self):\n        return self.embed_tokens\n\n"
              "    def set_input_embeddings(self, value):\n        self.embed_tokens = value\n\n"
              "    def api(self):\n        if hasattr(self, 'set_input_embeddings'):\n            log('has')\n\n"
              "    def forward(self, x):\n        log(self.get_input_embeddings())\n        return x\n\n\n"
              "def build(cfg):\n    return Model(cfg)\n"),
}


@pytest.mark.parametrize("rule", sorted(UNSAFE_PROGRAMS))
def test_oracle_rejects_the_unsafe_fix(rule, tmp_path):
    source, reference = UNSAFE_PROGRAMS[rule]
    program = make_program(rule, source, reference)
    assert not check_program(program, tmp_path).fixed  # the default fix leaves it alone
    with pytest.raises(OracleFailure):
        check_program(program, tmp_path, unsafe=True)


# ---------------------------------------------------------------------- the codemod fixtures
FIXTURE_CASES = [case for case in codemod_cases() if case.after.read_bytes() != case.before.read_bytes()]


@pytest.mark.parametrize("case", FIXTURE_CASES, ids=lambda case: case.name)
def test_safe_codemod_fixtures_pass_the_oracle(case):
    runs = check_fixture(get_rule(case.rule).rule_id, case.before.read_text(), case.after.read_text())
    assert runs > 0


@pytest.mark.parametrize("name", ["shard-gated-reset/and_chain_other_branch", "shard-gated-reset/unwrap_more",
                                  "wrap-overlap-hard-raise/refusal_observed",
                                  "local-tensor-view-not-detached/mixed_safe_unsafe"])
def test_fixture_oracle_rejects_unsafe_outputs(name):
    case = next(c for c in codemod_cases() if c.name == name)
    with pytest.raises(OracleFailure):
        check_fixture(get_rule(case.rule).rule_id, case.before.read_text(), case.after_unsafe.read_text())


def test_apply_fix_is_the_cli(tmp_path):
    source = "def wrap(model, world_size):\n    if world_size > 1:\n        fully_shard(model)\n    return model\n"
    assert apply_fix(source, tmp_path) == "def wrap(model, world_size):\n    fully_shard(model)\n    return model\n"
