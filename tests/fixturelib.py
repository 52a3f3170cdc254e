"""Discovery of the rule fixtures under ``tests/fixtures`` (TorchFix-style trees).

``<symbol>/checker/<case>.py`` + ``<case>.txt`` (``LINE:COL SYMBOL`` per line, 1-based column; empty
for a clean twin); ``<symbol>/checker/<case>/`` project folders with ``expected.txt``
(``RELPATH:LINE:COL SYMBOL``); ``<symbol>/codemod/<case>.in.py`` + ``<case>.out.py`` (safe fixes) and
optionally ``<case>.unsafe.out.py`` (with unsafe fixes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@dataclass(frozen=True)
class CheckerCase:
    """One checker fixture: the files to check and the expected ``(path, line, col, symbol)`` set."""

    name: str
    files: tuple[Path, ...]
    expected: frozenset[tuple[str, int, int, str]]


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
                cases.append(CheckerCase(f"{rule}/{entry.stem}", (entry,), frozenset(expected)))
            elif entry.is_dir() and (entry / "expected.txt").exists():
                files = tuple(sorted(entry.rglob("*.py")))
                expected = _parse_expected((entry / "expected.txt").read_text(), None, entry)
                cases.append(CheckerCase(f"{rule}/{entry.name}", files, frozenset(expected)))
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


def read_cache_file(path: Path) -> dict:
    """The JSON part of a cache file of ours, with each text table of a built object's top level
    read back as a dict (keys) or list of str: an independent reader of the layouts
    :func:`hp_invariants.store.write_json` and :func:`hp_invariants.project.write_built` write (a
    built object: its JSON line, the binary index of its tables, the texts, the checksum line)."""
    import json
    import struct

    content = path.read_bytes()[:-9]  # the checksum line: see hp_invariants.store.with_checksum
    head, _, rest = content.partition(b"\n")
    data = json.loads(head)
    plain = data["data"].get("object")
    if isinstance(plain, dict) and "index" in data["data"]:
        order = "<" if data["data"]["order"] == "little" else ">"
        index, texts = rest[:data["data"]["index"]], rest[data["data"]["index"]:]
        for key, value in plain.items():
            if isinstance(value, dict) and "@texts" in value:
                n, at, where = value["@texts"], value["at"], value["index"]
                ends = struct.unpack(f"{order}{n}I", index[where:where + 4 * n])
                starts = [0, *ends[:-1]]
                table = [texts[at + a:at + b].decode("utf-8") for a, b in zip(starts, ends)]
                if value["keys"] is None:
                    plain[key] = table
                else:
                    names = index[where + 8 * n:where + 8 * n + value["keys"]].decode("utf-8").split("\0") if n else []
                    plain[key] = dict(zip(names, table))
    return data


def write_cache_file(path: Path, data: dict, tables: tuple[str, ...] = ()) -> None:
    """Write ``data`` (as :func:`read_cache_file` gives it) back, with valid checksums (so that what
    is tested is the reader's validation of the content); the values of the built object named in
    ``tables`` (dicts or lists of JSON texts) are written as text tables."""
    import json
    import zlib

    from hp_invariants.project import TextTable, split_text_tables
    from hp_invariants.store import with_checksum

    if "index" not in data["data"]:  # a plain JSON cache file
        path.write_bytes(with_checksum(json.dumps(data, separators=(",", ":")).encode("ascii")))
        return
    plain = dict(data["data"].get("object") or {})
    for key in tables:
        value = plain[key]
        plain[key] = TextTable(list(value.values()), list(value)) if isinstance(value, dict) else TextTable(list(value))
    header, index, texts = split_text_tables(plain)
    data = {**data, "data": {**data["data"], "object": header, "index": len(index), "texts": len(texts)}}
    head = json.dumps(data, separators=(",", ":")).encode("ascii") + b"\n"
    path.write_bytes(head + index + texts + b"\n%08x" % zlib.crc32(head + index))
