"""Compare the fix applicability of two checkouts on the same generated programs (a dev script).

    PYTHONPATH=tests python tests/oracle/applicability_log.py BASELINE_CHECKOUT [N] > log.md

Generates ``N`` programs per rule (derandomized, so both sides see the same programs), runs
``hp-invariants check --format json`` and ``fix`` of the baseline checkout and of this one on them (in
subprocesses, in a temp folder), runs the oracle on both fixed versions, and prints one Markdown
table row per (rule, context label, baseline -> this applicability): the number of programs and how
many of the baseline's safe rewrites the oracle rejected. Rows whose applicability did not change
and whose baseline passed are left out. It asserts that the oracle accepts every rewrite of this
checkout.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle.check import COMPARE, _run
from oracle.programs import GENERATORS

HERE = Path(__file__).resolve().parents[2]


def _generate(rule: str, count: int) -> list:
    items: list = []

    @settings(max_examples=count, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data):
        items.append(data.draw(GENERATORS[rule]()))

    draw()
    return items


def _cli(tree: Path, cwd: Path, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(tree), HP_INVARIANTS_CACHE_DIR=str(cwd / "cache"))
    return subprocess.run([sys.executable, "-m", "hp_invariants", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, check=False).stdout


def main(baseline: Path, count: int) -> None:
    """Print the log (see the module docstring)."""
    root = Path(tempfile.mkdtemp(prefix="hp-oracle-log-"))
    programs = {rule: _generate(rule, count) for rule in sorted(GENERATORS)}
    src = root / "src"
    for rule, items in programs.items():
        (src / rule).mkdir(parents=True)
        for i, program in enumerate(items):
            (src / rule / f"p{i:04d}.py").write_text(program.source)
    (src / "pyproject.toml").write_text("")
    sides = {}
    for name, tree in (("baseline", baseline), ("this", HERE)):
        report = json.loads(_cli(tree, root, "check", "--no-cache", "--format", "json", "--exit-zero", str(src)))
        applicability = collections.defaultdict(list)
        for finding in report["findings"]:
            parts = Path(finding["path"]).parts
            applicability[(parts[-2], parts[-1], finding["id"])].append(
                finding["fix"]["applicability"] if finding["fix"] else "report-only")
        fixed = root / f"fixed-{name}"
        shutil.copytree(src, fixed)
        _cli(tree, root, "fix", "--no-cache", str(fixed))
        sides[name] = (applicability, fixed)
    rows: collections.Counter = collections.Counter()
    for rule, items in programs.items():
        for i, program in enumerate(items):
            name = f"p{i:04d}.py"
            labels, verdicts = [], []
            for side in ("baseline", "this"):
                applicability, fixed = sides[side]
                labels.append("/".join(sorted(applicability.get((rule, name, rule), []))) or "no finding")
                text = (fixed / rule / name).read_text()
                problem = ""
                if text != program.source:
                    for scenario in program.scenarios:
                        reference = _run(program, program.reference, scenario) if program.reference else None
                        problem = COMPARE[rule](_run(program, program.source, scenario),
                                                _run(program, text, scenario), reference, scenario)
                        if problem:
                            break
                verdicts.append(bool(problem))
            assert not verdicts[1], (rule, program.label, program.source)
            if labels[0] != labels[1] or verdicts[0]:
                rows[(rule, program.label, labels[0], labels[1], verdicts[0])] += 1
    print("| rule | context | baseline -> this | programs | baseline rejected by the oracle |")
    print("|---|---|---|---|---|")
    for (rule, label, before, after, rejected), n in sorted(rows.items()):
        print(f"| {rule} | {label} | {before} -> {after} | {n} | {'yes' if rejected else 'no'} |")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), int(sys.argv[2]) if len(sys.argv) > 2 else 200)
