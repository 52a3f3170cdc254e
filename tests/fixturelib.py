"""Discovery of the rule fixtures under ``tests/fixtures`` (TorchFix-style trees).

``<symbol>/checker/<case>.py`` + ``<case>.txt`` (``LINE:COL SYMBOL`` per line, 1-based column; empty
for a clean twin); ``<symbol>/checker/<case>/`` project folders with ``expected.txt``
(``RELPATH:LINE:COL SYMBOL``); ``<symbol>/codemod/<case>.in.py`` + ``<case>.out.py`` (safe fixes) and
optionally ``<case>.unsafe.out.py`` (with unsafe fixes).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass(frozen=True)
class CheckerCase:
    """One checker fixture: the files to check and the expected ``(path, line, col, symbol)`` set."""

    name: str
    files: tuple[Path, ...]
    expected: frozenset[tuple[str, int, int, str]]
    base: Path
    """The folder the case's files are relative to (its project: the checker folder for a one-file
    case, the case's own folder for a project case)."""


def _parse_expected(text: str, default_path: str | None, base: Path) -> set[tuple[str, int, int, str]]:
    expected = set()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        position, symbol = line.split()
        parts = position.split(":")
        if default_path is None:
            rel, lineno, col = parts
            path = str(base / rel)
        else:
            lineno, col = parts
            path = default_path
        expected.add((os.path.normpath(path), int(lineno), int(col), symbol))
    return expected


def checker_cases() -> list[CheckerCase]:
    """Return every checker fixture, sorted by name."""
    cases = []
    for checker_dir in sorted(FIXTURES.glob("*/checker")):
        rule = checker_dir.parent.name
        for entry in sorted(checker_dir.iterdir()):
            if entry.suffix == ".py":
                expected_file = entry.with_suffix(".txt")
                if not expected_file.exists():  # reported by test_every_fixture_has_expectations
                    continue
                expected = _parse_expected(expected_file.read_text(), str(entry), entry.parent)
                cases.append(CheckerCase(f"{rule}/{entry.stem}", (entry,), frozenset(expected), entry.parent))
            elif entry.is_dir() and (entry / "expected.txt").exists():
                files = tuple(sorted(entry.rglob("*.py")))
                expected = _parse_expected((entry / "expected.txt").read_text(), None, entry)
                cases.append(CheckerCase(f"{rule}/{entry.name}", files, frozenset(expected), entry))
    return cases


def fixtures_without_expectations() -> list[Path]:
    """Return checker fixture files that have no ``.txt`` (a fixture must say what it expects)."""
    return [p for p in sorted(FIXTURES.glob("*/checker/*.py")) if not p.with_suffix(".txt").exists()]


@dataclass(frozen=True)
class CodemodCase:
    """One codemod fixture: input, expected output with safe fixes, optional unsafe output."""

    name: str
    rule: str
    before: Path
    after: Path
    after_unsafe: Path | None


def codemod_cases() -> list[CodemodCase]:
    """Return every codemod fixture, sorted by name."""
    cases = []
    for codemod_dir in sorted(FIXTURES.glob("*/codemod")):
        rule = codemod_dir.parent.name
        for before in sorted(codemod_dir.glob("*.in.py")):
            stem = before.name[: -len(".in.py")]
            after = before.with_name(f"{stem}.out.py")
            unsafe = before.with_name(f"{stem}.unsafe.out.py")
            cases.append(CodemodCase(f"{rule}/{stem}", rule, before, after, unsafe if unsafe.exists() else None))
    return cases


def alone_copy(fixture: Path, folder: Path) -> Path:
    """A copy of the codemod fixture ``fixture`` as the only file of its own project (what each
    fixture means: no other file of this repository, fixtures or smoke modules, is its project)."""
    folder.mkdir()
    (folder / "pyproject.toml").write_text("")
    copy = folder / fixture.name
    copy.write_bytes(fixture.read_bytes())
    return copy


def cases_as_projects(cases: list[CheckerCase], folder: Path) -> dict[Path, Path]:
    """Copy each checker case into a folder of its own under ``folder`` with an empty
    ``[tool.hp-invariants]`` table (its own project, as the CLI checks it: no other fixture's stores
    or classes are its project). Returns the map copy -> original file."""
    copies = {}
    for index, case in enumerate(cases):
        root = folder / f"case{index:04d}"
        if case.base.name == case.name.split("/")[-1]:  # a project case: its own configuration files too
            shutil.copytree(case.base, root)
        root.mkdir(parents=True, exist_ok=True)
        pyproject = root / "pyproject.toml"
        text = pyproject.read_text() if pyproject.exists() else ""
        if "[tool.hp-invariants]" not in text:
            pyproject.write_text(text + "\n[tool.hp-invariants]\n")
        for path in case.files:
            copy = root / path.relative_to(case.base)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(path.read_bytes())
            copies[copy] = path
    return copies


def blocked_torch_env(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``import torch`` fails, as in a codecheck job without torch."""
    blocker = tmp_path / "block"
    (blocker / "torch").mkdir(parents=True, exist_ok=True)
    (blocker / "torch" / "__init__.py").write_text("raise ImportError('torch is not installed here')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), env.get("PYTHONPATH", "")])
    env["HP_INVARIANTS_CACHE_DIR"] = str(tmp_path / "cache")
    return env


def unexcluded_config(tmp_path: Path) -> Path:
    """A pyproject with an empty ``[tool.hp-invariants]`` table: front ends that apply ``exclude`` to
    every file (the pylint plugin, the codemods) check the fixtures under it, since this repository's
    own configuration excludes them (they are violations on purpose)."""
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.hp-invariants]\n")
    return config


def cache_db(folder: Path) -> "sqlite3.Connection":
    """A connection of its own to the store's database in the cache ``folder`` (after closing those of
    this process, so that the database file holds everything written): the tests read and rewrite
    rows with it, independently of the store's reading code."""
    import sqlite3

    from hp_invariants import store

    store.close_all()
    return sqlite3.connect(Path(folder) / store.DB_NAME, isolation_level=None)


def built_rows(folder: Path, kind: str, part: str) -> dict:
    """``key -> JSON text`` of the entries of the table ``part`` of the stored object of ``kind``."""
    with contextlib.closing(cache_db(folder)) as conn:
        return dict(conn.execute("SELECT r.key, r.data FROM built_rows r JOIN built b ON b.gen = r.gen "
                                 "WHERE b.kind = ? AND r.part = ?", (kind, part)).fetchall())


def set_built_rows(folder: Path, kind: str, part: str, entries: dict) -> None:
    """Give entries of the stored table ``part`` of ``kind`` other JSON texts, with valid CRC-32s (so
    that what is tested is the reader's check of their content)."""
    from hp_invariants.store import _row_crc

    with contextlib.closing(cache_db(folder)) as conn:
        (gen,) = conn.execute("SELECT gen FROM built WHERE kind = ?", (kind,)).fetchone()
        for key, data in entries.items():
            (pos,) = conn.execute("SELECT pos FROM built_rows WHERE gen = ? AND part = ? AND key = ?",
                                  (gen, part, key)).fetchone()
            conn.execute("UPDATE built_rows SET data = ?, crc = ? WHERE gen = ? AND part = ? AND key = ?",
                         (data, _row_crc(gen, part, key, pos, data), gen, part, key))


def set_built_head(folder: Path, kind: str, change) -> None:
    """Rewrite the head of the stored object of ``kind`` as ``change(head JSON data)`` returns it, with a
    valid CRC-32."""
    import json

    from hp_invariants.store import _crc

    with contextlib.closing(cache_db(folder)) as conn:
        space, gen, fingerprint, failed, head = conn.execute(
            "SELECT space, gen, fingerprint, failed, head FROM built WHERE kind = ?", (kind,)).fetchone()
        text = json.dumps(change(json.loads(head)), separators=(",", ":"))
        conn.execute("UPDATE built SET head = ?, crc = ? WHERE gen = ?",
                     (text, _crc(f"{kind}\0{gen}\0{fingerprint}\0{failed}\0{text}", space_seed(conn, space)), gen))


def space_seed(conn, space: int) -> int:
    """The CRC-32 seed of the rows of ``space`` (its root, purpose and version tag)."""
    import zlib

    root, what, tag = conn.execute("SELECT root, what, tag FROM spaces WHERE id = ?", (space,)).fetchone()
    return zlib.crc32(b"\0".join((root, what.encode(), tag.encode())))


def stored_counts(folder: Path) -> dict[str, int]:
    """The number of rows of each table of the store's database in ``folder``."""
    with contextlib.closing(cache_db(folder)) as conn:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("spaces", "manifests", "summaries", "built", "built_rows", "results")}
