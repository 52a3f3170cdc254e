"""The CLI's reading of ``# pylint: disable`` comments agrees with pylint's own on our messages."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from fixturelib import blocked_torch_env
from test_cli import run_cli

MIXED = textwrap.dedent(
    """\
    class State:
        def lazy_init(self):  # pylint: disable=E9502
            if self.is_shard:
                self.reset_sharded_param()


    def g(s):
        if s.is_shard:
            # pylint: disable=shard-gated-reset
            s.reset_sharded_param()
        if s.is_shard:
            s.reset_sharded_param()


    def h(s):
        # pylint: disable-next=E9502
        if s.is_shard:
            s.reset_sharded_param()
        if s.is_shard:
            # pylint: disable-next=E9502
            s.reset_sharded_param()
        for x in s:  # pylint: disable=E9502
            if x.is_shard:
                x.reset_sharded_param()  # pylint: disable=E9501


    def k(s):
        # pylint: disable=E9502
        if s.is_shard:
            s.reset_sharded_param()
        # pylint: enable=E9502
        if s.is_shard:
            s.reset_sharded_param()
    """
)


def test_cli_and_pylint_agree_on_disable_comments(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / "m.py"
    path.write_text(MIXED)
    _, out, _ = run_cli("check", "--select", "E9502", "--format", "json", str(path))
    cli_lines = sorted(f["line"] for f in json.loads(out)["findings"])
    proc = subprocess.run(
        [sys.executable, "-m", "pylint", "--load-plugins=hp_invariants.checkers", "--disable=all",
         "--enable=E9502", "--output-format=json", "--score=n", "--persistent=n", "m.py"],
        capture_output=True, text=True, cwd=tmp_path, env=blocked_torch_env(tmp_path),
    )
    pylint_lines = sorted(m["line"] for m in json.loads(proc.stdout))
    assert cli_lines == pylint_lines == [4, 12, 18, 24, 33]
