"""Suite-wide test set-up: nothing a test run writes may land outside temporary folders.

Hypothesis keeps its example database and a cache of source constants under its home folder
(default ``./.hypothesis`` in the working directory): for the whole run it is a temporary folder,
removed at the end. (A failure still prints hypothesis' reproduction blob.)
"""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import configuration

_HOME: list[str] = []


def pytest_configure(config) -> None:
    """Point hypothesis at a temporary home folder before any test runs."""
    _HOME.append(tempfile.mkdtemp(prefix="hp-invariants-hypothesis-"))
    configuration.set_hypothesis_home_dir(_HOME[-1])


def pytest_unconfigure(config) -> None:
    """Remove the temporary hypothesis home folder."""
    configuration.set_hypothesis_home_dir(None)
    for home in _HOME:
        shutil.rmtree(home, ignore_errors=True)
