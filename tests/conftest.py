"""Suite-wide test set-up: nothing a test run writes may land outside temporary folders.

* Hypothesis keeps its example database and a cache of source constants under its home folder
  (default ``./.hypothesis`` in the working directory): for the whole run it is a temporary folder,
  removed at the end. (A failure still prints hypothesis' reproduction blob.)
* Every test run gets its own hp-invariants cache folder: ``HP_INVARIANTS_CACHE_DIR`` points to a
  temporary folder for the whole session (subprocesses inherit it), so no test ever reads or writes
  the real ``~/.cache/hp-invariants``.
* The CLI freezes the objects alive once the project facts are built (:func:`gc.freeze`, right for
  its short-lived process); tests that call it in-process get the collector unfrozen afterwards,
  so that the suite's own garbage is still collected.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile

import pytest
from hypothesis import configuration

_HOME: list[str] = []

# the rule fixtures are code to be checked, not tests: a fixture project may hold its own ``tests/``
collect_ignore = ["fixtures"]


def pytest_configure(config) -> None:
    """Point hypothesis at a temporary home folder before any test runs: its home (the constants
    cache), its example database (the default settings profile, whose database may have been made
    under ``./.hypothesis`` when hypothesis was imported) and, through ``HYPOTHESIS_STORAGE_DIRECTORY``,
    those of the subprocesses the tests start."""
    from hypothesis import settings  # noqa: PLC0415
    from hypothesis.database import DirectoryBasedExampleDatabase  # noqa: PLC0415

    home = tempfile.mkdtemp(prefix="hp-invariants-hypothesis-")
    _HOME.append(home)
    configuration.set_hypothesis_home_dir(home)
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = home
    settings.register_profile("hp-invariants-tests",
                              database=DirectoryBasedExampleDatabase(os.path.join(home, "examples")))
    settings.load_profile("hp-invariants-tests")


def pytest_unconfigure(config) -> None:
    """Remove the temporary hypothesis home folder. The home stays pointed at it: what hypothesis
    writes after this (its constants cache, at exit) lands in a temporary folder, never in
    ``./.hypothesis``."""
    for home in _HOME:
        shutil.rmtree(home, ignore_errors=True)


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


@pytest.fixture(autouse=True)
def _collector_unfrozen():
    """Undo an in-process CLI run's :func:`gc.freeze` after each test."""
    yield
    if gc.get_freeze_count():
        gc.unfreeze()
