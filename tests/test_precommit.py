"""The pre-commit hooks of ``.pre-commit-hooks.yaml``, run with ``pre-commit try-repo``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cli import GATED

REPO = Path(__file__).resolve().parent.parent
PRE_COMMIT = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    """A committed copy of this repository (try-repo needs a git repo at a commit)."""
    if not Path(PRE_COMMIT).exists():
        pytest.fail("pre-commit is not installed: pip install -e '.[test]'")
    dest = tmp_path_factory.mktemp("hookrepo") / "hp-invariants"
    shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(".git", ".venv", "venv", "*.egg-info",
                                                              "__pycache__", ".pytest_cache", "tests", "benchmarks"))
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "hooks")
    return dest


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    """An empty git repository of a user."""
    repo = tmp_path / "user"
    repo.mkdir()
    _git(repo, "init", "-q")
    return repo


def _try_repo(hook_repo: Path, user_repo: Path, hook: str, env_home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PRE_COMMIT_HOME=str(env_home), PIP_NO_INDEX="", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run([PRE_COMMIT, "try-repo", str(hook_repo), hook, "--verbose"], cwd=user_repo,
                          capture_output=True, text=True, env=env, timeout=600)


def test_hook_rejects_violation_passes_clean_and_empty(hook_repo: Path, user_repo: Path, tmp_path_factory):
    home = tmp_path_factory.mktemp("pre-commit-home")
    # an empty file list (no Python file staged) is a clean run
    (user_repo / "README.txt").write_text("hello\n")
    _git(user_repo, "add", "README.txt")
    empty = _try_repo(hook_repo, user_repo, "hp-invariants", home)
    assert empty.returncode == 0, empty.stdout + empty.stderr
    # a commit with a violation is rejected
    (user_repo / "state.py").write_text(GATED)
    _git(user_repo, "add", "state.py")
    bad = _try_repo(hook_repo, user_repo, "hp-invariants", home)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "E9502 shard-gated-reset" in bad.stdout
    # the fix hook repairs it (and fails, since it changed files), then the check passes
    fixed = _try_repo(hook_repo, user_repo, "hp-invariants-fix", home)
    assert fixed.returncode == 1
    assert "if not self._done:" in (user_repo / "state.py").read_text()
    _git(user_repo, "add", "state.py")
    clean = _try_repo(hook_repo, user_repo, "hp-invariants", home)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    # a suppressed violation: both hooks pass, the fix hook leaves it alone (one pipeline)
    suppressed = GATED.replace("p.reset_sharded_param()", "p.reset_sharded_param()  # noqa: E9502")
    (user_repo / "kept.py").write_text(suppressed)
    _git(user_repo, "add", "kept.py")
    for hook in ("hp-invariants", "hp-invariants-fix"):
        run = _try_repo(hook_repo, user_repo, hook, home)
        assert run.returncode == 0, hook + run.stdout + run.stderr
    assert (user_repo / "kept.py").read_text() == suppressed
