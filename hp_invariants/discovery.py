"""Finding the Python files to check under the paths given on the command line.

Folders are walked recursively (symlinked folders are not followed, so a symlink loop cannot
hang the walk); ``exclude`` patterns from :class:`hp_invariants.config.Config` prune folders and
files. A file named explicitly is always checked, whatever its suffix, as ruff and flake8 do.
"""

from __future__ import annotations

import os
from typing import Iterable

from hp_invariants.config import Config
from hp_invariants.model import FileProblem


def iter_python_files(paths: Iterable[str], config: Config) -> tuple[list[str], list[FileProblem]]:
    """Return ``(files, problems)``: the sorted, de-duplicated ``.py``/``.pyi`` files under
    ``paths`` and a :class:`FileProblem` for each path that does not exist or cannot be walked."""
    files: list[str] = []
    problems: list[FileProblem] = []
    for path in paths:
        if os.path.isdir(path):
            def onerror(exc: OSError) -> None:
                problems.append(FileProblem("F0001", "fatal", exc.filename or path, 1, 0,
                                            f"cannot read folder: {exc.strerror}", "check its permissions"))

            for folder, dirs, names in os.walk(path, onerror=onerror):
                dirs[:] = sorted(d for d in dirs if not config.is_excluded(os.path.join(folder, d), path))
                for name in names:
                    if name.endswith((".py", ".pyi")):
                        full = os.path.join(folder, name)
                        if not config.is_excluded(full, path):
                            files.append(full)
        elif os.path.lexists(path):
            files.append(path)
        else:
            problems.append(FileProblem("F0001", "fatal", path, 1, 0, "no such file or folder",
                                        "check the path given on the command line"))
    seen: set[str] = set()
    unique = []
    for name in sorted(files):
        normal = os.path.normpath(name)
        if normal not in seen:
            seen.add(normal)
            unique.append(name)
    return unique, problems
