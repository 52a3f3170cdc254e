"""What README.md promises a new user is true (issue 12 item 7).

* The quick start's first command exits 1 with the 4 findings the README describes (the bundled
  regressions are violations on purpose), and the fixed twins exit 0.
* The pre-commit example's ``rev`` is the tag the documented release step creates for this version,
  and that exact configuration works against a copy of the repository tagged that way.
* The configuration examples keep every rule option's default (``extend-<option>``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import hp_invariants
from test_cli import FIXED, GATED, REGRESSIONS, run_cli
from test_precommit import PRE_COMMIT, _git, hook_repo  # noqa: F401 - hook_repo is a fixture

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(title)
    end = README.find("\n#", start + len(title))
    return README[start:end if end > 0 else None]


def _precommit_yaml() -> str:
    (block,) = re.findall(r"```yaml\n(repos:.*?)```", _section("### 2. pre-commit hook"), re.S)
    return block


def _release_tag_command() -> list[str]:
    (line,) = [ln for ln in _section("### 2. pre-commit hook").splitlines() if ln.startswith("git tag -a ")]
    return shlex.split(line.split("&&")[0])


def test_quick_start_exits_1_with_the_four_findings_it_describes():
    code, out, err = run_cli("check", "--no-cache", str(REGRESSIONS))
    assert code == 1
    assert len(out.splitlines()) == 4
    assert len({line.split(":")[0] for line in out.splitlines()}) == 4  # one per file
    summary = "Found 4 finding(s) in 4 file(s), 4 checked"
    assert err.startswith(summary)
    quick = " ".join(_section("## Quick start").split())
    assert "Exit 1 is the expected result" in quick and summary in quick
    assert "`hp-invariants check examples/fixed` (the repaired twins) exits 0" in quick
    assert run_cli("check", "--no-cache", str(FIXED))[0] == 0


def test_precommit_rev_is_the_release_tag_of_this_version():
    (rev,) = re.findall(r"^\s+rev: (\S+)", _precommit_yaml(), re.M)
    with open(REPO / "pyproject.toml", "rb") as handle:
        version = tomllib.load(handle)["project"]["version"]
    assert rev == f"v{version}" == f"v{hp_invariants.__version__}"
    tag = _release_tag_command()
    assert tag[:3] == ["git", "tag", "-a"] and tag[3] == rev


@pytest.mark.skipif(sys.platform == "win32", reason="pre-commit hooks are tested on POSIX")
def test_readme_precommit_config_works_against_the_tagged_release(hook_repo: Path, tmp_path: Path):  # noqa: F811
    # the release step, as the README writes it (without the push)
    release = subprocess.run(_release_tag_command(), cwd=hook_repo,
                             capture_output=True, text=True,
                             env=dict(os.environ, GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"))
    assert release.returncode == 0 or "already exists" in release.stderr, release.stderr
    user = tmp_path / "user"
    user.mkdir()
    _git(user, "init", "-q")
    config = _precommit_yaml().replace("https://example.invalid/hp-invariants", str(hook_repo))
    (user / ".pre-commit-config.yaml").write_text(config)
    (user / "state.py").write_text(GATED)
    _git(user, "add", ".")
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "home"), PIP_NO_INDEX="",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    run = subprocess.run([PRE_COMMIT, "run", "--files", "state.py"], cwd=user, capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "E9502 shard-gated-reset" in run.stdout
    (user / "state.py").write_text("x = 1\n")
    _git(user, "add", ".")
    run = subprocess.run([PRE_COMMIT, "run", "--files", "state.py"], cwd=user, capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr


def test_readme_configuration_examples_keep_every_rule_option_default(tmp_path: Path):
    """A list option set by its plain key replaces its default: an example that sets one must repeat
    the default (the examples once set ``no-grad-contexts = ["_no_grad"]``, dropping ``no_grad``, and
    ``unconditional-calls`` without ``register_fsdp_forward_method``); with ``extend-<option>`` the
    default stays. Each example is also a valid configuration."""
    from hp_invariants.config import is_list_option, load_config
    from hp_invariants.registry import RULES

    blocks = re.findall(r"```toml\n(.*?)```", README, re.S)
    tables = [(block, table) for block in blocks
              for table in (tomllib.loads(block)["tool"].get("hp-invariants"),
                            tomllib.loads(block)["tool"].get("pylint", {}).get("hp-invariants")) if table]
    assert len(tables) == 2  # the pylint plugin's and the configuration section's
    for block, table in tables:
        for rule in RULES:
            for option in rule.options:
                if is_list_option(option) and option.name in table:
                    assert set(option.default) <= set(table[option.name]), (option.name, block)
        assert any(key.startswith("extend-") for key in table), block
    (block,) = [block for block, table in tables if block.startswith("[tool.hp-invariants]")]
    (tmp_path / "pyproject.toml").write_text(block)
    options = load_config(tmp_path, RULES).options
    for rule in RULES:
        for option in rule.options:
            assert set(option.default) <= set(options.get(rule.rule_id, {}).get(option.name, option.default))
