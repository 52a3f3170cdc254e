"""Session-wide test setup.

Every test run gets its own cache folder: ``HP_INVARIANTS_CACHE_DIR`` points to a temporary folder for
the whole session (subprocesses inherit it), so no test ever reads or writes the real
``~/.cache/hp-invariants``.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    """Point the hp-invariants cache at a temporary folder for the whole session."""
    folder = tmp_path_factory.mktemp("hp-invariants-cache")
    old = os.environ.get("HP_INVARIANTS_CACHE_DIR")
    os.environ["HP_INVARIANTS_CACHE_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("HP_INVARIANTS_CACHE_DIR", None)
    else:
        os.environ["HP_INVARIANTS_CACHE_DIR"] = old
