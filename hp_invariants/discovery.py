"""Finding the Python files to check under the paths given on the command line.

Folders are walked recursively (symlinked folders met during the walk are not followed, so a
symlink loop cannot hang the walk; a symlinked folder named on the command line is walked); the
``exclude`` patterns of the configuration governing each folder (its nearest ``pyproject.toml`` with
a ``[tool.hp-invariants]`` table, see :class:`hp_invariants.config.Resolver`) prune its folders and
files. The walk takes ``.py`` files: a stub (``.pyi``) never runs, and every rule here is about what
happens at run time. A file named explicitly is always checked, whatever its suffix, as ruff and
flake8 do, unless ``force-exclude`` is set (the pre-commit hooks set it: they name every staged file).
"""

from __future__ import annotations

import os
from typing import Iterable

from hp_invariants.config import Resolver
from hp_invariants.model import FileProblem


def iter_python_files(paths: Iterable[str], resolver: Resolver) -> tuple[list[str], list[FileProblem]]:
    """Return ``(files, problems)``: the sorted, de-duplicated ``.py`` files under ``paths`` (and the
    files named) and a :class:`FileProblem` for each path that does not exist or cannot be walked."""
    files: list[str] = []
    problems: list[FileProblem] = []
    for path in paths:
        if resolver.force_excluded(path):
            continue  # --force-exclude: excluded even when named (pre-commit passes every staged file)
        if os.path.isdir(path):
            def onerror(exc: OSError) -> None:
                problems.append(FileProblem("F0001", "fatal", exc.filename or path, 1, 0,
                                            f"cannot read folder: {exc.strerror}", "check its permissions"))

            for folder, dirs, names in os.walk(path, onerror=onerror):
                dirs[:] = sorted(d for d in dirs if not resolver.is_excluded(os.path.join(folder, d), path))
                for name in names:
                    if name.endswith(".py"):
                        full = os.path.join(folder, name)
                        if not resolver.is_excluded(full, path):
                            files.append(full)
        elif os.path.lexists(path):
            files.append(path)
        else:
            problems.append(FileProblem("F0001", "fatal", path, 1, 0, "no such file or folder",
                                        "check the path given on the command line"))
    # de-duplicate by real folder + name: the same file reached through a symlinked folder (or named
    # twice) is checked once, and so is a symlinked file that leads to one (its real path); a link that
    # leads nowhere (dangling, self-referential) stays a path of its own and gets its "cannot read" problem
    seen: set[str] = set()
    real_folders: dict[str, str] = {}
    unique = []
    for name in sorted(files):
        folder, base = os.path.split(os.path.normpath(name))
        if folder not in real_folders:
            real_folders[folder] = os.path.realpath(folder or ".")
        key = os.path.join(real_folders[folder], base)
        if os.path.islink(key) and os.path.exists(key):
            key = os.path.realpath(key)
        if key not in seen:
            seen.add(key)
            unique.append(name)
    return unique, problems
