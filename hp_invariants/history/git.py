"""Thin wrappers over the ``git`` command line, for the history features.

Every function runs ``git`` with :mod:`subprocess` (no library), in the folder given, and raises
:class:`GitError` with a message meant for the user: outside a repository, an unknown revision,
git missing. Nothing here writes to the repository or to git's configuration.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path


class GitError(Exception):
    """git failed, or the folder is not in a repository, or a revision is unknown."""


def run_git(args: list[str], cwd: str | os.PathLike[str], check: bool = True, binary: bool = False):
    """Run ``git args`` in ``cwd``; return its stdout (``str``, or ``bytes`` when ``binary``).

    Raises :class:`GitError` when git is missing, or (``check``) when it exits non-zero, with git's
    own error line in the message.
    """
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    except FileNotFoundError as exc:
        raise GitError("git is not installed (the history features call the git command)") from exc
    if check and proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(err[-1] if err else f"git {' '.join(args)} failed with exit {proc.returncode}")
    return proc.stdout if binary else proc.stdout.decode("utf-8", "surrogateescape")


def repo_root(path: str | os.PathLike[str]) -> Path:
    """Return the top folder of the git work tree holding ``path``.

    Raises :class:`GitError` ("not inside a git repository") otherwise.
    """
    start = Path(os.path.abspath(path))
    folder = start if start.is_dir() else start.parent
    while not folder.exists():
        folder = folder.parent
    try:
        out = run_git(["rev-parse", "--show-toplevel"], folder)
    except GitError:
        raise GitError(f"{path} is not inside a git repository (the history features need one)") from None
    return Path(out.strip())


def resolve(rev: str, root: str | os.PathLike[str]) -> str:
    """Return the full commit id ``rev`` names (a sha, a branch, ``HEAD~1``, a merge base...).

    Raises :class:`GitError` ("unknown revision") when it names no commit.
    """
    if rev.startswith("-"):
        raise GitError(f"unknown revision {rev!r}")
    try:
        return run_git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], root).strip()
    except GitError:
        raise GitError(f"unknown revision {rev!r}: no commit of that name in {root}") from None


@dataclass(frozen=True)
class Commit:
    """A commit's id, subject line and author date (``YYYY-MM-DD``)."""

    sha: str
    subject: str
    date: str

    @property
    def short(self) -> str:
        """The abbreviated id (7 hex digits)."""
        return self.sha[:7]


def commit_info(rev: str, root: str | os.PathLike[str]) -> Commit:
    """Return the :class:`Commit` of ``rev``; raises :class:`GitError` for an unknown one."""
    sha = resolve(rev, root)
    out = run_git(["show", "-s", "--format=%H%x00%s%x00%ad", "--date=short", sha], root)
    full, subject, date = out.rstrip("\n").split("\x00")
    return Commit(full, subject, date)


def parent_of(sha: str, root: str | os.PathLike[str]) -> str | None:
    """Return the first parent of ``sha``, or ``None`` for a root commit."""
    try:
        return run_git(["rev-parse", "--verify", "--quiet", f"{sha}^1"], root).strip() or None
    except GitError:
        return None


def show_file(rev: str, path: str, root: str | os.PathLike[str]) -> bytes | None:
    """Return the bytes of ``path`` (repo-relative, posix) at ``rev``, or ``None`` if absent."""
    try:
        return run_git(["show", f"{rev}:{path}"], root, binary=True)
    except GitError:
        return None


def changed_files(old: str | None, new: str, root: str | os.PathLike[str],
                  pickaxe: str | None = None) -> list[tuple[str | None, str | None]]:
    """Return ``(old_path, new_path)`` of the ``.py`` files that differ between two commits.

    Renames are detected (``-M``); ``old_path`` is ``None`` for an added file and ``new_path``
    ``None`` for a deleted one. ``old`` ``None`` means the empty tree (a root commit).
    ``pickaxe``: only files where the number of occurrences of that text changed (``-S``).
    """
    base = old or run_git(["hash-object", "-t", "tree", "/dev/null"], root).strip()
    extra = [f"-S{pickaxe}"] if pickaxe else []
    out = run_git(["diff", "--name-status", "-M", "-z", *extra, base, new, "--", "*.py"], root)
    return _parse_name_status(out)


def changed_since(rev: str, root: str | os.PathLike[str]) -> list[tuple[str | None, str | None]]:
    """Like :func:`changed_files` between commit ``rev`` and the work tree (uncommitted changes
    included; untracked files count as added)."""
    out = run_git(["diff", "--name-status", "-M", "-z", rev, "--", "*.py"], root)
    pairs = _parse_name_status(out)
    untracked = run_git(["ls-files", "--others", "--exclude-standard", "-z", "--", "*.py"], root)
    pairs.extend((None, name) for name in untracked.split("\x00") if name)
    return pairs


def _parse_name_status(out: str) -> list[tuple[str | None, str | None]]:
    fields = [f for f in out.split("\x00")]
    pairs: list[tuple[str | None, str | None]] = []
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i]
        if status[0] in "RC":
            pairs.append((fields[i + 1], fields[i + 2]))
            i += 3
        else:
            name = fields[i + 1]
            pairs.append((None if status[0] == "A" else name, None if status[0] == "D" else name))
            i += 2
    return pairs


KEPT_FILES = (".py", ".pyi", "pyproject.toml", "setup.cfg")
"""The files :func:`extract_tree` writes (name endings)."""


def extract_tree(rev: str, root: str | os.PathLike[str], dest: str | os.PathLike[str]) -> None:
    """Write the Python files and configuration files of commit ``rev`` under ``dest``.

    Only ``*.py``, ``*.pyi``, ``pyproject.toml`` and ``setup.cfg`` are written (symbolic links
    are not), read with one ``git ls-tree`` and one ``git cat-file --batch`` whatever the size of
    the tree: other files (notebooks, data, binaries) are never read, so a partial clone missing
    them extracts fine, and a file git cannot read is left out. An empty ``.git`` folder marks
    ``dest`` as the project root. Raises :class:`GitError` for an unknown revision.
    """
    listing = run_git(["ls-tree", "-r", "-z", "--full-tree", rev], root)
    wanted: list[tuple[str, str]] = []
    for entry in listing.split("\x00"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob" and parts[0] != "120000" and path.endswith(KEPT_FILES):
            if path.startswith("/") or ".." in path.split("/"):
                continue
            wanted.append((parts[2], path))
    os.makedirs(os.path.join(dest, ".git"), exist_ok=True)
    if not wanted:
        return
    try:
        proc = subprocess.run(["git", "cat-file", "--batch"], cwd=root, capture_output=True, check=False,
                              input="".join(f"{sha}\n" for sha, _ in wanted).encode("ascii"),
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    except FileNotFoundError as exc:
        raise GitError("git is not installed (the history features call the git command)") from exc
    out, at = proc.stdout, 0
    for _sha, path in wanted:
        end = out.find(b"\n", at)
        if end < 0:
            break
        header = out[at:end].split()
        at = end + 1
        if len(header) != 3:  # "<sha> missing": not in this clone
            continue
        size = int(header[2])
        target = os.path.join(dest, *path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(out[at:at + size])
        at += size + 1


def log_pickaxe(text: str, root: str | os.PathLike[str], limit: int = 200) -> list[Commit]:
    """Return the commits (newest first, at most ``limit``) that change the number of occurrences
    of ``text`` in a ``.py`` file (``git log -S``): the commits adding or deleting it."""
    out = run_git(["log", f"-S{text}", f"-n{limit}", "--format=%H%x00%s%x00%ad", "--date=short",
                   "--", "*.py"], root)
    commits = []
    for line in out.splitlines():
        if line:
            sha, subject, date = line.split("\x00")
            commits.append(Commit(sha, subject, date))
    return commits


def relpath(path: str | os.PathLike[str], root: Path) -> str:
    """Return ``path`` relative to the repository ``root``, posix-style."""
    return Path(os.path.realpath(path)).relative_to(root.resolve()).as_posix()


@dataclass(frozen=True)
class FileChange:
    """A commit that changed a file: the commit, its first parent (``None`` for a root commit) and
    the file's path before (``None``: added) and after (``None``: deleted) it."""

    commit: Commit
    parent: str | None
    old_path: str | None
    new_path: str | None


def log_file_pickaxe(text: str, path: str, root: str | os.PathLike[str], limit: int = 50,
                     word: bool = False) -> list[FileChange]:
    """The commits (newest first, at most ``limit``) that change the number of occurrences of
    ``text`` in the file ``path`` (repo-relative), following the file across renames
    (``git log --follow -S``); with ``word``, occurrences of ``text`` as a whole identifier only
    (``process`` is not counted inside ``process_batch``: a rename to a longer name keeps the
    substring's count, so plain ``-S`` never finds it). When git stops part-way (an object missing
    from a partial clone), the commits it listed before are returned; raises :class:`GitError`
    only when git is missing."""
    pickaxe = [f"-S(^|[^A-Za-z0-9_]){re.escape(text)}([^A-Za-z0-9_]|$)", "--pickaxe-regex"] if word else [f"-S{text}"]
    out = run_git(["log", "--follow", *pickaxe, f"-n{limit}", "--format=%x01%H%x00%P%x00%s%x00%ad",
                   "--date=short", "--name-status", "-z", "--", path], root, check=False)
    changes = []
    for chunk in out.split("\x01")[1:]:
        if chunk.count("\x00") < 3:  # cut short
            break
        sha, parents, subject, rest = chunk.split("\x00", 3)
        date, _, names = rest.partition("\n")
        fields = names.split("\x00")
        old = new = None
        if fields and fields[0]:
            status = fields[0]
            if status[0] in "RC" and len(fields) >= 3:
                old, new = fields[1], fields[2]
            elif len(fields) >= 2:
                old = None if status[0] == "A" else fields[1]
                new = None if status[0] == "D" else fields[1]
        changes.append(FileChange(Commit(sha, subject, date.strip("\x00")), parents.split()[0] if parents else None,
                                  old, new))
    return changes


def class_definitions(root: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Class name -> the tracked ``.py`` files of the work tree (repo-relative) with a line
    ``class <name>`` at any indentation: one ``git grep`` for the whole tree; ``{}`` when git fails."""
    try:
        out = run_git(["grep", "-o", "-z", "-E", "-e", r"^[[:space:]]*class[[:space:]]+[A-Za-z_][A-Za-z_0-9]*",
                       "--", "*.py"], root, check=False)
    except GitError:
        return {}
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        path, _, match = line.partition("\x00")
        name = match.split()[-1] if match.split() else ""
        if name and path not in found.setdefault(name, []):
            found[name].append(path)
    return found


def head(root: str | os.PathLike[str]) -> str | None:
    """The commit ``HEAD`` names, or ``None`` (no commit yet)."""
    try:
        return run_git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], root).strip() or None
    except GitError:
        return None
