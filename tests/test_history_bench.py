"""``scripts/history_bench.py``: a fake mirror (a bare git repository in ``tmp_path``) with a parent
holding E9503 bugs and a fix commit; the scorer counts caught, missed and flagged-at-fix right."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "history_bench.py"

BASE = '''import torch.nn as nn


class Base(nn.Module):
    def compute_scale(self, x):
        return x * 2
'''

# caught: Head.forward calls a method renamed in Base (compute_factor -> compute_scale);
# missed: build() calls a misspelled method on a local of unknown class (out of scope);
# flagged at fix: Tail.forward calls a method nobody defines, and the "fix" only edits a comment
PARENT = '''from pkg.base import Base


class Head(Base):
    def forward(self, x):
        return self.compute_factor(x)


class Tail(Base):
    def forward(self, x):
        # TODO
        return self.compute_offset(x)


def build(factory):
    head = factory()
    return head.compute_factr(1)


Head()
Tail()
'''

FIXED = '''from pkg.base import Base


class Head(Base):
    def forward(self, x):
        return self.compute_scale(x)


class Tail(Base):
    def forward(self, x):
        # later
        return self.compute_offset(x)


def build(factory):
    head = factory()
    return head.compute_scale(1)


Head()
Tail()
'''


def _load():
    spec = importlib.util.spec_from_file_location("history_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["history_bench"] = module
    spec.loader.exec_module(module)
    return module


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def mirror(tmp_path: Path) -> tuple[Path, str, str]:
    """A mirror folder ``<mirror>/acme+demo/repo`` (bare) with the parent and the fix commit."""
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    _git(work, "init", "-q", "-b", "main")
    (work / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (work / "pkg" / "__init__.py").write_text("")
    (work / "pkg" / "base.py").write_text(BASE)
    (work / "pkg" / "model.py").write_text(PARENT)
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "parent")
    parent = _git(work, "rev-parse", "HEAD")
    (work / "pkg" / "model.py").write_text(FIXED)
    _git(work, "commit", "-q", "-am", "fix")
    fix = _git(work, "rev-parse", "HEAD")
    root = tmp_path / "mirror"
    (root / "acme+demo").mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(root / "acme+demo" / "repo"))
    return root, parent, fix


def _cases(path: Path, parent: str, fix: str) -> Path:
    common = f'repo = "acme/demo"\nfix = "{fix}"\nparent = "{parent}"\npath = "pkg/model.py"\nrule = "E9503"\n'
    path.write_text(
        f'[[case]]\nid = "renamed"\n{common}line = 6\nsymbol = "compute_factor"\nin_scope = true\n'
        f'reason = "self call"\nshape = "method renamed in base, caller not updated"\npin_candidate = true\n\n'
        f'[[case]]\nid = "local"\n{common}line = 17\nin_scope = false\n'
        f'reason = "out of scope: receiver\'s class not known statically"\nshape = "typo on a local"\n'
        f'pin_candidate = false\n\n'
        f'[[case]]\nid = "unfixed"\n{common}line = 12\nsymbol = "compute_offset"\nin_scope = true\n'
        f'reason = "self call"\nshape = "fix that did not fix"\npin_candidate = false\n',
        encoding="utf-8")
    return path


def test_scorer_counts_caught_missed_and_flagged(tmp_path, mirror, capsys):
    root, parent, fix = mirror
    bench = _load()
    cases = _cases(tmp_path / "cases.toml", parent, fix)
    out = tmp_path / "result.json"
    workdir = tmp_path / "trees"
    code = bench.main(["--cases", str(cases), "--mirror", str(root), "--json", str(out), "--workdir", str(workdir)])
    table = capsys.readouterr().out
    assert code == 0
    result = json.loads(out.read_text())
    by_id = {c["id"]: c for c in result["cases"]}
    assert (by_id["renamed"]["caught"], by_id["renamed"]["flagged_at_fix"]) == (True, False)
    assert by_id["renamed"]["function"] == "Head.forward"
    assert (by_id["local"]["caught"], by_id["local"]["flagged_at_fix"]) == (False, False)
    assert (by_id["unfixed"]["caught"], by_id["unfixed"]["flagged_at_fix"]) == (True, True)
    totals = result["totals"]
    assert (totals["in_scope"], totals["in_scope_caught"], totals["in_scope_recall"]) == (2, 2, 1.0)
    assert (totals["out_of_scope"], totals["out_of_scope_caught"], totals["fixed_flagged"]) == (1, 0, 1)
    assert "| renamed | acme/demo | E9503 | yes | yes | no |" in table
    assert "| local | acme/demo | E9503 | no | no | no |" in table
    assert "In-scope recall: 2/2 (100%)" in table
    # the trees were written where asked, the whole repository of each commit
    assert (workdir / "acme+demo" / parent / "pkg" / "base.py").exists()
    assert (workdir / "acme+demo" / fix / "pyproject.toml").exists()


def test_only_selects_cases_and_symbol_must_match(tmp_path, mirror, capsys):
    root, parent, fix = mirror
    bench = _load()
    cases = _cases(tmp_path / "cases.toml", parent, fix)
    text = cases.read_text().replace('symbol = "compute_factor"', 'symbol = "something_else"')
    cases.write_text(text)
    code = bench.main(["--cases", str(cases), "--mirror", str(root), "--only", "renamed",
                       "--workdir", str(tmp_path / "trees")])
    table = capsys.readouterr().out
    assert code == 0
    assert "| renamed | acme/demo | E9503 | yes | no | no |" in table  # a finding about another name
    assert "| local |" not in table


def test_missing_mirror_and_bad_cases_exit_2(tmp_path, mirror, capsys):
    root, parent, fix = mirror
    bench = _load()
    cases = _cases(tmp_path / "cases.toml", parent, fix)
    assert bench.main(["--cases", str(cases), "--mirror", str(tmp_path / "nowhere"), "--only", "local",
                       "--workdir", str(tmp_path / "t")]) == 2
    assert "no mirror of acme/demo" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text('[[case]]\nid = "x"\n')
    assert bench.main(["--cases", str(bad), "--mirror", str(root)]) == 2
    assert "lacks" in capsys.readouterr().err


def test_enclosing_function_and_window_helpers():
    bench = _load()
    source = "class A:\n    @staticmethod\n    def f():\n        x = 1\n        return x\n\n\ndef g():\n    pass\n"
    assert bench.enclosing_function(source, 4)[0] == "A.f"
    assert bench.enclosing_function(source, 2)[0] == "A.f"  # the decorator belongs to the def
    assert bench.enclosing_function(source, 7) is None
    assert bench.function_named(source, "g")[1:] == (8, 9)
    findings = [{"id": "E9503", "path": "a.py", "line": 20, "message": "'A' object has no attribute 'm'"}]
    assert bench.site_findings(findings, "E9503", "a.py", 17, None, 3, "m")
    assert not bench.site_findings(findings, "E9503", "a.py", 16, None, 3, "m")
    assert bench.site_findings(findings, "E9503", "a.py", 1, ("f", 15, 25), 3, None)
    assert not bench.site_findings(findings, "E9502", "a.py", 20, None, 3, None)
    # a name that the message only suggests ("did you mean") is another finding's business
    other = [{"id": "E9503", "path": "a.py", "line": 20,
              "message": "'A' object has no attribute 'tie': no class in its MRO defines or assigns it; did you mean 'm'?"}]
    assert not bench.site_findings(other, "E9503", "a.py", 20, None, 3, "m")
    assert bench.site_findings(other, "E9503", "a.py", 20, None, 3, "tie")
