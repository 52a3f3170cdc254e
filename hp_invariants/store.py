"""Everything hp-invariants keeps on disk: the per-file project facts and the per-file results.

Nothing outside this module encodes, validates or versions cache files.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from hp_invariants.model import Applicability, Confidence, Edit, FileProblem, FileResult, Finding, Fix

if TYPE_CHECKING:  # pragma: no cover
    from hp_invariants.api import ProjectFacts
    from hp_invariants.config import Settings
    from hp_invariants.engine import _TrackingProject
    from hp_invariants.project import Project


def _plain(value: Any) -> Any:
    kind = type(value)
    if value is None or kind in (str, int, float, bool):
        return value
    if isinstance(value, tuple) or kind is list:
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((_plain(v) for v in value), key=repr)}
    raise TypeError(f"no plain-data form for {kind.__name__}")


def _unplain(data: Any) -> Any:
    kind = type(data)
    if data is None or kind in (str, int, float, bool):
        return data
    if kind is list:
        return tuple(_unplain(v) for v in data)
    if kind is dict and len(data) == 1 and type(data.get("set")) is list:
        return frozenset(_unplain(v) for v in data["set"])
    raise TypeError(f"not a plain-data summary: {kind.__name__}")


# ---------------------------------------------------------------------- cache files
CACHE_FORMAT = "hp-invariants-cache/2"
"""The ``format`` field of every cache file (JSON); another value: the file is ignored (2: built
objects keep their text offsets, checksums and keys in a binary index, see :func:`read_built`)."""


def default_cache_dir() -> str:
    """``$HP_INVARIANTS_CACHE_DIR``, else ``$XDG_CACHE_HOME/hp-invariants``, else ``~/.cache/hp-invariants``."""
    env = os.environ.get("HP_INVARIANTS_CACHE_DIR")
    if env:
        return os.path.abspath(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hp-invariants")


def cache_tag(facts: Sequence[ProjectFacts] = ()) -> str:
    """The version tag of a cache file: package version, Python version, each facts' version, and a
    digest of the installed package's own files (names, sizes, mtimes), so that a changed rule or
    summarizer never reads results of the old code even when nobody bumped a version."""
    from hp_invariants import __version__ as version  # noqa: PLC0415

    kinds = ",".join(f"{f.key}:{f.version}" for f in sorted(facts, key=lambda f: f.key))
    return f"{CACHE_FORMAT}/{kinds}/{version}/{code_digest()}/py{sys.version_info[0]}.{sys.version_info[1]}"


_CODE_DIGEST: list[str] = []


def code_digest() -> str:
    """A digest of the ``stat`` of every file of the ``hp_invariants`` package (computed once)."""
    if not _CODE_DIGEST:
        package = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.blake2b(digest_size=8)
        for folder, dirs, names in os.walk(package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith((".py", ".json")):
                    try:
                        st = os.stat(os.path.join(folder, name))
                    except OSError:
                        continue
                    h.update(f"{os.path.relpath(os.path.join(folder, name), package)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                             .encode("utf-8", "surrogateescape"))
        _CODE_DIGEST.append(h.hexdigest())
    return _CODE_DIGEST[0]


def root_digest(root: Path, kinds: str) -> str:
    """The 20-hex-digit name part of the cache files of ``root`` (and ``kinds``)."""
    return hashlib.blake2b(f"{root}\0{kinds}".encode("utf-8", "surrogateescape"), digest_size=10).hexdigest()


def read_json(path: str, tag: str, root: Path) -> dict | None:
    """Return the ``data`` of the cache file ``path`` when it is a JSON object of this ``tag`` and
    ``root``; ``None`` when missing, unreadable, malformed or of another version or root. Plain
    :func:`json.loads`: nothing in the file can run code."""
    try:
        with open(path, "rb") as handle:
            content = _checked(handle.read())
        if content is None:  # damaged (even into other well-formed JSON): as if missing
            return None
        return _header_data(json.loads(content), tag, root)
    except (OSError, ValueError, RecursionError, MemoryError):
        return None


def _header_data(loaded: Any, tag: str, root: Path) -> dict | None:
    """The ``data`` of a cache file's decoded JSON part when it is of this format, ``tag`` and ``root``."""
    if not isinstance(loaded, dict) or loaded.get("format") != CACHE_FORMAT or loaded.get("tag") != tag \
            or loaded.get("root") != str(root) or not isinstance(loaded.get("data"), dict):
        return None
    return loaded["data"]


def prepare_cache_dir(folder: str) -> None:
    """Create the cache ``folder`` if needed; a folder created here gets a ``.gitignore`` holding
    ``*`` and a ``CACHEDIR.TAG``, so that it never shows in ``git status`` and backup tools skip it.
    Raises ``OSError`` when it cannot be created."""
    if os.path.isdir(folder):
        return
    os.makedirs(folder, exist_ok=True)
    for name, text in ((".gitignore", "# Created by hp-invariants automatically.\n*\n"),
                       ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n"
                                        "# This file is a cache directory tag created by hp-invariants.\n")):
        _write_atomically(os.path.join(folder, name), text.encode())


def write_json(path: str, tag: str, root: Path, data: Any) -> None:
    """Write ``data`` as a cache file atomically (temp file + rename), with its checksum line; a
    read-only location only costs speed (nothing is raised)."""
    try:
        prepare_cache_dir(os.path.dirname(path))
        _write_atomically(path, with_checksum(_json_line(tag, root, data)))
    except (OSError, ValueError, TypeError):
        pass


def _json_line(tag: str, root: Path, data: Any) -> bytes:
    """The JSON part of a cache file: one line (ASCII, so it holds no raw newline)."""
    return json.dumps({"format": CACHE_FORMAT, "tag": tag, "root": str(root), "data": data},
                      separators=(",", ":"), ensure_ascii=True).encode("ascii")


def with_checksum(content: bytes) -> bytes:
    """``content`` followed by a newline and its CRC-32 in 8 hex digits: what every cache file ends
    with, so that a damaged one (a flipped byte, a cut, swapped keys: damage that may leave valid
    JSON) reads as missing instead of as other facts. CRC-32 runs at C speed (13 MB: 3.5 ms). A built
    object's file checks its texts one by one instead (:func:`read_built`)."""
    return content + b"\n%08x" % zlib.crc32(content)


def _checked(raw: bytes) -> bytes | None:
    """The content of a cache file's bytes ``raw`` when its checksum (:func:`with_checksum`) holds."""
    size = _content_size(raw)
    return None if size is None else raw[:size]


def _content_size(raw: bytes) -> int | None:
    """The length of a cache file's content (what precedes its checksum line) when the checksum
    (:func:`with_checksum`) holds, else ``None``; the content is checked in place, not copied."""
    if len(raw) < 9 or raw[-9:-8] != b"\n":
        return None
    try:
        expected = int(raw[-8:], 16)
    except ValueError:
        return None
    with memoryview(raw) as view:
        return len(raw) - 9 if zlib.crc32(view[:-9]) == expected else None


def _write_atomically(path: str, body: bytes) -> None:
    import tempfile  # noqa: PLC0415 - only when the cache is written

    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------------- the per-file results cache
CACHEABLE_PROBLEMS = frozenset({"E0001"})
"""Problems that depend only on a file's bytes (syntax and decoding errors) are cached; a rule error
(F0002) or a timeout (F0003) is computed again."""


class ResultsCache:
    """Per-file results of earlier runs, one JSON file per project root in the project's cache folder
    (``results-<hash>.json``), as ruff keeps one.

    An entry is used only when the file's bytes (content digest), its resolved settings
    (``Settings.key``) and the project facts its findings read are unchanged: for each facts kind the
    check read, either the project's fingerprint (every file's content) is the one recorded, or the
    facts kind's :meth:`~hp_invariants.api.ProjectFacts.still_valid` replays what the file's check
    read and gets the same answers. Anything else, or any malformed entry, is a miss (the file is
    checked again). Only :meth:`Session.check_bytes` reads it; ``fix`` never does.
    """

    def __init__(self, project: Project):
        self.project = project
        self._loaded: dict[Path, dict] = {}
        self._fresh: dict[Path, dict[str, Any]] = {}
        self.stats = {"hits": 0, "misses": 0}

    def file_of(self, root: Path) -> str:
        """The results file of the project ``root``."""
        return os.path.join(self.project.cache_folder(root), f"results-{root_digest(root, 'results')}.json")

    def entries(self, root: Path) -> dict:
        """The stored entries of ``root`` (loaded once)."""
        found = self._loaded.get(root)
        if found is None:
            data = read_json(self.file_of(root), cache_tag(), root) or {}
            files = data.get("files")
            found = self._loaded[root] = files if isinstance(files, dict) else {}
        return found

    @staticmethod
    def key(digest: bytes, settings: Settings, with_project: bool) -> str:
        """The key of a file's entry: its content digest, its settings, whether project facts exist."""
        import hashlib  # noqa: PLC0415

        text = repr((digest.hex(), settings.key, with_project))
        return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()

    def locate(self, path: str) -> tuple[Path, str]:
        """``(project root, path relative to it)`` of ``path``: where its entry lives."""
        root = self.project.root_of(path)
        return root, _rel(path, root)

    def lookup(self, path: str, digest: bytes, settings: Settings,
               where: tuple[Path, str] | None = None) -> FileResult | None:
        """The cached :class:`FileResult` of ``path`` or ``None`` (a miss); ``where``: :meth:`locate`
        of ``path`` when the caller has it."""
        root, rel = where or self.locate(path)
        entry = self.entries(root).get(rel)
        if not isinstance(entry, dict) or entry.get("key") != self.key(digest, settings, True):
            self.stats["misses"] += 1
            return None
        try:
            if not self._deps_valid(path, digest, settings, entry.get("deps")):
                self.stats["misses"] += 1
                return None
            result = FileResult(path=path, findings=[_finding_from(path, f) for f in entry["findings"]],
                                problems=[_problem_from(path, p) for p in entry["problems"]])
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        return result

    def _deps_valid(self, path: str, digest: bytes, settings: Settings, deps: Any) -> bool:
        if not isinstance(deps, dict):
            return False
        facts_by_key = {r.project_facts.key: r.project_facts for r in settings.rules if r.project_facts is not None}
        for key, dep in deps.items():
            facts = facts_by_key.get(key)
            if facts is None or not isinstance(dep, dict):
                return False
            if dep.get("fp") == self.project.fingerprint(path, [facts]):
                continue
            if "pre" in dep:  # only a prefilter that reads the project skipped a rule: ask it again
                rule = next((r for r in settings.rules if r.prefilter_reads_project and r.project_facts is facts), None)
                if rule is None or rule.prefilter_record(self.project.data(facts, path),
                                                         settings.options.get(rule.rule_id)) != dep["pre"]:
                    return False
                continue
            if not facts.still_valid(self.project.data(facts, path), path, digest, dep.get("rec")):
                return False
        return True

    def make_entry(self, path: str, digest: bytes, settings: Settings, result: FileResult,
                   tracking: _TrackingProject | None, where: tuple[Path, str] | None = None) -> dict | None:
        """The entry to store for ``result`` (``None``: not cacheable); ``where``: see :meth:`lookup`."""
        if any(p.problem_id not in CACHEABLE_PROBLEMS for p in result.problems):
            return None
        deps: dict[str, Any] = {}
        root = where[0] if where else self.project.root_of(path)
        for key, (facts, tracker, _view) in (tracking.used.items() if tracking else ()):
            deps[key] = {"fp": self.project.root_fingerprint(root, [facts]), "rec": facts.dependencies(tracker, path)}
        for key, record in (tracking.prefilters.items() if tracking else ()):
            if key not in deps:
                facts = next(r.project_facts for r in settings.rules if r.project_facts is not None
                             and r.project_facts.key == key)
                deps[key] = {"fp": self.project.root_fingerprint(root, [facts]), "pre": record}
        try:
            findings = [_finding_to(f) for f in result.findings]
        except TypeError:
            return None
        return {"key": self.key(digest, settings, True), "deps": deps, "findings": findings,
                "problems": [[p.problem_id, p.symbol, p.line, p.col, p.message, p.hint] for p in result.problems]}

    def store(self, path: str, entry: dict, where: tuple[Path, str] | None = None) -> None:
        """Remember ``entry`` for ``path`` (written by :meth:`save`); ``where``: see :meth:`lookup`."""
        root, rel = where or self.locate(path)
        self._fresh.setdefault(root, {})[rel] = entry

    def save(self) -> None:
        """Write the stored entries of each root (merged with the old ones of files that still exist)."""
        for root, fresh in self._fresh.items():
            old = self.entries(root)
            if all(old.get(rel) == entry for rel, entry in fresh.items()):
                continue
            merged = {rel: e for rel, e in old.items() if rel not in fresh and os.path.exists(os.path.join(root, rel))}
            merged.update(fresh)
            write_json(self.file_of(root), cache_tag(), root, {"files": merged})
            self._loaded[root] = merged
        self._fresh.clear()


def _rel(path: str, root: Path) -> str:
    return os.path.relpath(os.path.abspath(path), root)


_ARG_TYPES = (str, int, float, bool, type(None))


def _finding_to(f: Finding) -> list:
    if not all(type(a) in _ARG_TYPES for a in f.args):
        raise TypeError("finding arguments are not plain data")
    fix = None
    if f.fix is not None:
        fix = [[[list(e.start), list(e.end), e.content] for e in f.fix.edits], f.fix.applicability.value, f.fix.message]
    return [f.rule_id, f.symbol, f.line, f.col, f.end_line, f.end_col, f.message, f.confidence.value, fix,
            list(f.args), f.obj]


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError("int expected")
    return value


def _text(value: Any) -> str:
    if type(value) is not str:
        raise TypeError("str expected")
    return value


def _finding_from(path: str, data: Any) -> Finding:
    rule_id, symbol, line, col, end_line, end_col, message, confidence, fix, args, obj = data
    made_fix = None
    if fix is not None:
        edits, applicability, fix_message = fix
        made_fix = Fix(tuple(Edit((_int(s[0]), _int(s[1])), (_int(e[0]), _int(e[1])), _text(c)) for s, e, c in edits),
                       Applicability(applicability), _text(fix_message))
    if type(args) is not list or not all(type(a) in _ARG_TYPES for a in args):
        raise TypeError("bad arguments")
    return Finding(rule_id=_text(rule_id), symbol=_text(symbol), path=path, line=_int(line), col=_int(col),
                   end_line=_int(end_line), end_col=_int(end_col), message=_text(message),
                   confidence=Confidence(confidence), fix=made_fix, args=tuple(args), obj=_text(obj))


def _problem_from(path: str, data: Any) -> FileProblem:
    problem_id, symbol, line, col, message, hint = data
    if problem_id not in CACHEABLE_PROBLEMS:
        raise ValueError("not a cacheable problem")
    return FileProblem(_text(problem_id), _text(symbol), path, _int(line), _int(col), _text(message), _text(hint))
