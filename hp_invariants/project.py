"""Project-wide facts that rules declare: one walk, one parse per file, one cache, for every rule.

A rule that needs facts about the whole project (E9503 needs every class of the project to
resolve an MRO) declares them with a :class:`ProjectFacts` object on ``Rule.project_facts``. The
engine knows nothing more about them: :class:`Project` walks the project root once, parses each
file once, hands the tree to every declared :meth:`ProjectFacts.summarize`, caches the per-file
summaries on disk (keyed by the file's content), and gives each rule its
:meth:`ProjectFacts.build` result through ``FileContext.project_data(rule)``.

The project root of a file is the nearest folder holding ``pyproject.toml``, ``setup.py``,
``setup.cfg`` or ``.git`` (:func:`hp_invariants.config.find_project_root`). Without such a marker
(a loose script, an installed package) the root is the top package folder or the file's folder, and
the walk is bounded: only the root's own files and package folders (holding ``__init__.py``) below
it are indexed, as Python's imports from that folder would reach them; a project of more than
:data:`MAX_PROJECT_FILES` files is indexed up to that many, with a note (:attr:`Project.notes`).

The cache (see :func:`default_cache_dir` for where it lives; ``hp-invariants cache dir|clear``):

* plain JSON written by :mod:`json` (never pickle: loading it cannot run code); per project root a
  manifest ``project-<hash>.json`` (each file's ``stat`` key and content digest) and the summaries
  ``project-<hash>.summaries.json`` (each facts kind's :meth:`ProjectFacts.encode` output, checked
  on load by :meth:`ProjectFacts.decode`); anything malformed is ignored and rebuilt;
* for a facts kind with :attr:`ProjectFacts.caches_built`, also its whole project object,
  ``project-<hash>.built.<kind>.json``, stamped with the fingerprint of the file set and contents it
  was built from (:attr:`Scan.fingerprint`): while that is the project's fingerprint, the object is
  read back (:meth:`ProjectFacts.decode_built`) instead of being rebuilt from every file's summary:
  its JSON line and a binary index (offsets, CRC-32s and keys of its text tables) are read and
  checked, each text only when the object decodes it (:func:`read_built`);
* a file's cached digest is trusted only when its ``stat`` key (mtime, size, ctime, inode, all in
  nanoseconds) is unchanged AND its ctime and mtime are older than the cache write by more than
  :data:`RACY_WINDOW_NS` (git's "racily clean" rule); otherwise the file is read and hashed
  (blake2b). ``cp -p``, ``rsync -a`` and ``tar -x`` preserve the mtime but set the ctime, so a
  same-length edit restored that way is hashed and seen. Hashing every file on every run was
  measured instead and rejected: it costs 0.33 s on torch (2,285 files, 46 MB), a third of the
  ``ast.parse`` floor of ``torch/distributed``, against 0.02 s for the ``stat`` calls;
* every write is atomic (a temporary file in the same folder, then ``os.replace``); a folder the
  cache creates gets a ``.gitignore`` holding ``*`` (and a ``CACHEDIR.TAG``), so a cache inside a
  repository never shows in ``git status``.
"""

from __future__ import annotations

import ast
import contextlib
import fnmatch
import gc
import hashlib
import json
import os
import re
import sys
import time
import warnings
import zlib
from array import array
from itertools import accumulate
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from hp_invariants.api import ProjectFacts
from hp_invariants.store import (
    _header_data,
    _json_line,
    _write_atomically,
    cache_tag,
    default_cache_dir,
    prepare_cache_dir,
    read_json,
    root_digest,
    write_json,
)
from hp_invariants.config import DEFAULT_EXCLUDES, find_project_root, is_project_root
from hp_invariants.limits import DEFAULT_MAX_FILE_SIZE, DEFAULT_TIMEOUT, AnalysisTimeout, budget_paused, time_budget
from hp_invariants.runner import parallel_map
from hp_invariants.source import SourceDecodeError, SourceFile, content_digest, read_source_bytes

MAX_PROJECT_FILES = 20_000
"""At most this many files are indexed per project root (torch has 2,285); more gives a note."""

EarlyAnalysis = Callable[[str, bytes, SourceFile, ast.Module], Any]
"""``early(path, raw, source, tree)``: what a check computes from a file's bytes, decoded source and
tree before the project facts are built (see :meth:`Project.prepare`); any picklable value, ``None``
for nothing."""


RACY_WINDOW_NS = 2_000_000_000
"""A file whose ctime or mtime is within this much of the cache write (or later) is always hashed:
it may have changed again within the file system's timestamp granularity."""



class TextTable:
    """Part of a project object's plain form (:meth:`ProjectFacts.encode_built`) whose items are
    JSON texts, each decoded only when read: a map (``keys``, one per text) or a list (``keys``
    ``None``). The built-object cache stores the texts after its JSON part, raw (not as JSON strings:
    reading the file then decodes none of them); :meth:`ProjectFacts.decode_built` receives them as a
    :class:`StoredTexts`. Texts are stored as UTF-8 (identifiers need not be ASCII)."""

    __slots__ = ("texts", "keys")

    def __init__(self, texts: list[str], keys: list[str] | None = None):
        if keys is not None and len(keys) != len(texts):
            raise ValueError("one key per text expected")
        self.texts = texts
        self.keys = keys


class StoredTexts:
    """The texts of a :class:`TextTable` read back from a cache file: a read-only map ``key -> JSON
    text`` (``get``, ``in``, ``len``, iteration over the keys) or, without keys, a sequence of texts
    (``[i]``, ``len``). A text is read from the file when asked for (as ``bytes``, which
    :func:`json.loads` reads) and checked against its own CRC-32: a damaged text raises
    ``ValueError`` (and an unreadable one ``OSError``), which :class:`LazyMap` and :class:`LazyList`
    answer by rebuilding. So a run reads and checks only the texts it decodes, not the megabytes of
    the whole table (measured on torch: 412 of 61,000 texts in a ``check`` of torch/distributed)."""

    __slots__ = ("_reader", "_base", "_ends", "_crcs", "_keys", "_where")

    def __init__(self, reader: "TextReader", base: int, ends: Sequence[int], crcs: Sequence[int],
                 keys: list[str] | None):
        """``reader``: where the texts are; ``ends``: the end of each text, counted from ``base``
        (where the first one starts); ``crcs``: each text's CRC-32; ``keys``: one per text, or ``None``."""
        if len(crcs) != len(ends) or (keys is not None and len(keys) != len(ends)):
            raise ValueError("one end, checksum and key per text expected")
        self._reader = reader
        self._base = base
        self._ends = ends
        self._crcs = crcs
        self._keys = keys
        self._where = dict(zip(keys, range(len(keys)))) if keys is not None else None

    @classmethod
    def from_header(cls, header: Any, reader: "TextReader", index: bytes, base: int, size: int,
                    byteorder: str = sys.byteorder) -> "StoredTexts":
        """The table that :func:`split_text_tables` described by ``header``, whose offsets, checksums
        and keys are in the checked bytes ``index`` and whose texts are the ``size`` bytes of
        ``reader`` from ``base``; ``byteorder``: that of the machine that wrote it. Raises
        ``TypeError``/``ValueError`` when the description does not fit (not ints, a block outside
        ``index``, a text beyond ``size``, keys not valid UTF-8 or of another count)."""
        if type(header) is not dict:
            raise TypeError("table description expected")
        count, at, where, keys_size = header.get("@texts"), header.get("at"), header.get("index"), header.get("keys")
        if type(count) is not int or type(at) is not int or type(where) is not int \
                or (keys_size is not None and type(keys_size) is not int):
            raise TypeError("text offsets expected")
        stop = where + 8 * count + (keys_size or 0)
        if count < 0 or at < 0 or where < 0 or (keys_size or 0) < 0 or stop > len(index):
            raise ValueError("table description out of range")
        ends, crcs = array(_U32), array(_U32)
        ends.frombytes(index[where:where + 4 * count])
        crcs.frombytes(index[where + 4 * count:where + 8 * count])
        if byteorder != sys.byteorder:
            ends.byteswap()
            crcs.byteswap()
        if count and at + ends[-1] > size:
            raise ValueError("text offsets out of range")
        keys = None
        if keys_size is not None:
            keys = index[where + 8 * count:stop].decode("utf-8").split("\0") if count else []
        return cls(reader, base + at, ends, crcs, keys)

    @property
    def keyed(self) -> bool:
        """True for a map (texts by key), False for a list."""
        return self._keys is not None

    def _text(self, i: int) -> bytes:
        start = self._ends[i - 1] if i else 0
        end = self._ends[i]
        if end < start:
            raise ValueError("text offsets out of order")
        text = self._reader.read(self._base + start, end - start)
        if zlib.crc32(text) != self._crcs[i]:
            raise ValueError("a cached text is damaged")
        return text

    def get(self, key: str, default: Any = None) -> Any:
        """The text of ``key``, else ``default`` (raises as :class:`StoredTexts` says)."""
        i = self._where.get(key) if self._where is not None else None
        return default if i is None else self._text(i)

    def __getitem__(self, i: int) -> bytes:
        if self._where is not None:
            raise TypeError("a keyed table is read with get()")
        return self._text(i)

    def __contains__(self, key: object) -> bool:
        return self._where is not None and key in self._where

    def __len__(self) -> int:
        return len(self._ends)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys if self._keys is not None else ())


_U32 = next(code for code in "IL" if array(code).itemsize == 4)
"""The :mod:`array` type code of an unsigned 32-bit integer (``I`` on every platform CPython runs on)."""


class TextReader:
    """Where the texts of a built object's tables are read from: ``read(offset, size)`` gives the
    bytes at ``offset`` of a cache file (``os.pread`` where it exists: processes forked after the
    read share the open file, so a shared file position would not do), or of ``bytes`` given
    (tests); raises ``ValueError`` when fewer bytes are there (a file cut short since) or the file
    was replaced since, and ``OSError`` when it cannot be read.

    At most :data:`MAX_OPEN_READERS` files stay open at once, the most recently read (a run over
    hundreds of project roots would otherwise hold two files per root open and run out of file
    descriptors): a reader whose file was closed opens it again when next read, and refuses it
    (``ValueError``: the object then rebuilds) unless it is the same file (device, inode, size and
    modification time as when first opened)."""

    __slots__ = ("_handle", "_raw", "_path", "_identity")

    def __init__(self, handle: Any = None, raw: bytes | None = None):
        """``handle``: a file opened in binary mode (kept, see :meth:`keep`); ``raw``: the bytes instead."""
        self._handle = handle
        self._raw = raw
        self._path = os.path.abspath(handle.name) if handle is not None else None
        self._identity = _identity(os.fstat(handle.fileno())) if handle is not None else None

    def keep(self) -> None:
        """Count the open file among those kept open (closing the least recently read beyond the cap)."""
        if self._handle is not None:
            _OPEN_READERS[id(self)] = self
            while len(_OPEN_READERS) > MAX_OPEN_READERS:
                _OPEN_READERS.pop(next(iter(_OPEN_READERS))).close()

    def read(self, offset: int, size: int) -> bytes:
        """The ``size`` bytes at ``offset``."""
        if self._raw is not None:
            data = self._raw[offset:offset + size]
        else:
            handle = self._handle
            if handle is None:
                handle = self._reopen()
            elif _OPEN_READERS.get(id(self)) is self:  # the most recently read goes last
                _OPEN_READERS[id(self)] = _OPEN_READERS.pop(id(self))
            if _PREAD is not None:
                data = _PREAD(handle.fileno(), size, offset)
            else:  # pragma: no cover - Windows: no fork there, so the position is this process's own
                handle.seek(offset)
                data = handle.read(size)
        if len(data) != size:
            raise ValueError("the cache file was cut short")
        return data

    def _reopen(self) -> Any:
        if self._path is None:
            raise ValueError("no cache file to read")
        handle = open(self._path, "rb")  # noqa: SIM115 - kept open, see keep()
        if _identity(os.fstat(handle.fileno())) != self._identity:
            handle.close()
            raise ValueError("the cache file was replaced since it was read")
        self._handle = handle
        self.keep()
        return handle

    def close(self) -> None:
        """Close the file (a later read opens it again, see :class:`TextReader`)."""
        if _OPEN_READERS.get(id(self)) is self:
            del _OPEN_READERS[id(self)]
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __del__(self) -> None:
        if self._handle is not None:
            self._handle.close()


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


MAX_OPEN_READERS = 8
"""At most this many built-object cache files stay open (two per project root: four roots)."""

_OPEN_READERS: dict[int, TextReader] = {}
"""The readers whose file is open, least recently read first (see :class:`TextReader`)."""

_PREAD = getattr(os, "pread", None)


class LazyMap:
    """A read-only map whose values stay JSON text until first read (then decoded and kept).

    ``texts``: ``key -> JSON text`` (a dict, or the :class:`StoredTexts` of a cache file);
    ``decode(key, parsed value)``: what the map gives for it,
    raising ``ValueError``/``TypeError`` when it is malformed; ``recover(key, default)``: the value
    to give instead when a text turns out malformed (from the object rebuilt without the cache: see
    :meth:`ProjectFacts.decode_built`). A project object read back from the cache this way decodes
    only what a run asks of it (a check reads a few dozen of the tens of thousands of names a
    project defines).
    """

    __slots__ = ("_texts", "_decode", "_values", "_recover")

    def __init__(self, texts: "dict[str, str] | StoredTexts", decode: Callable[[str, Any], Any],
                 recover: Callable[[str, Any], Any]):
        self._texts = texts
        self._decode = decode
        self._recover = recover
        self._values: dict[str, Any] = {}

    @classmethod
    def from_cache(cls, texts: Any, decode: Callable[[str, Any], Any], recover: Callable[[str, Any], Any]) -> "LazyMap":
        """A map over ``texts`` read from a cache file: raises ``TypeError`` unless it is a keyed
        :class:`StoredTexts` or a dict of strings (checked at C speed; each text is checked when
        decoded)."""
        if isinstance(texts, StoredTexts):
            if not texts.keyed:
                raise TypeError("a keyed table of JSON texts expected")
        elif type(texts) is not dict or (texts and not set(map(type, texts.values())) <= {str}):
            raise TypeError("a map of JSON texts expected")
        return cls(texts, decode, recover)

    def get(self, key: str, default: Any = None) -> Any:
        """The decoded value of ``key``, else ``default``."""
        value = self._values.get(key)
        if value is None:
            try:
                text = self._texts.get(key)  # a stored text is read (and checked) here
                if text is None:
                    return default
                value = self._decode(key, json.loads(text))
            except (ValueError, TypeError, KeyError, IndexError, RecursionError, OSError):
                return self._recover(key, default)
            self._values[key] = value
        return value

    def __getitem__(self, key: str) -> Any:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._texts

    def __len__(self) -> int:
        return len(self._texts)

    def items(self) -> list[tuple[str, Any]]:
        """Every ``(key, decoded value)``, in the stored order (decodes all)."""
        return [(key, self[key]) for key in self._texts]


class LazyList:
    """A read-only sequence whose items stay JSON text until first read (then decoded and kept): the
    list form of :class:`LazyMap`. ``texts``: a list of JSON texts or an unkeyed :class:`StoredTexts`
    (raises ``TypeError`` otherwise); ``decode(parsed value)``: the item, raising ``ValueError`` /
    ``TypeError`` when malformed; ``recover(i)``: the item to give instead of a malformed one."""

    __slots__ = ("_texts", "_items", "_decode", "_recover")

    def __init__(self, texts: Any, decode: Callable[[Any], Any], recover: Callable[[int], Any]):
        if isinstance(texts, StoredTexts):
            if texts.keyed:
                raise TypeError("a list of JSON texts expected")
        elif type(texts) is not list or (texts and not set(map(type, texts)) <= {str}):
            raise TypeError("a list of JSON texts expected")
        self._texts = texts
        self._items: list[Any] = [None] * len(texts)
        self._decode = decode
        self._recover = recover

    def __len__(self) -> int:
        return len(self._texts)

    def __getitem__(self, i: int) -> Any:
        item = self._items[i]
        if item is None:
            try:
                item = self._decode(json.loads(self._texts[i]))  # a stored text is read (and checked) here
            except (ValueError, TypeError, KeyError, IndexError, RecursionError, OSError):
                return self._recover(i)
            self._items[i] = item
        return item

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self._texts)))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector from running inside the block (re-enabled after it, when it
    was enabled before).

    Building project facts parses every file of the project and keeps a summary of each: hundreds of
    thousands of small, long-lived tuples and sets. Each collection of the oldest generation walks
    all of them again, so the collector's cost grows with the project (measured: a fifth of a cold
    build of torch). Trees and summaries hold no reference cycles and are freed by reference
    counting; what cycles the block may leave are collected by the next collection after it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class ScannedFile:
    """One file of a project walk: absolute ``path``, ``rel`` path, ``stat`` key, content ``digest``
    (``None`` when unreadable), ``raw`` bytes when they had to be read, and its dotted ``module``."""

    __slots__ = ("path", "rel", "stat", "digest", "raw", "module")

    def __init__(self, path: str, rel: str, stat: tuple, digest: bytes | None, raw: bytes | None, module: str):
        self.path = path
        self.rel = rel
        self.stat = stat
        self.digest = digest
        self.raw = raw
        self.module = module


class Scan:
    """The walk of one project root: its files (after excludes), whether it was truncated, and the
    fingerprint of the file set (paths and contents)."""

    def __init__(self, root: Path, files: list[ScannedFile], truncated: int, stats: dict[str, int]):
        self.root = root
        self.files = files
        self.truncated = truncated
        self.stats = stats
        h = hashlib.blake2b(digest_size=16)
        for f in files:
            h.update(f.rel.encode("utf-8", "surrogateescape") + b"\0" + (f.digest or b"-") + b"\0"
                     + f.module.encode("utf-8", "surrogateescape") + b"\n")
        self.fingerprint = h.hexdigest()
class Project:
    """Lazily built, per-root project data for the rules that declare :class:`ProjectFacts`.

    ``cache_dir``: where summaries are cached, or a callable ``root -> folder`` (``None``:
    :func:`default_cache_dir`); ``use_cache`` False: neither read nor write it; ``jobs``: processes
    for summarizing files that are not cached (the CLI's ``-j``); ``is_excluded(path, root)``: project
    files the walk leaves out (the check's own excludes; default excluded folder names always apply).
    Built data is memoized per root for the life of the object; ``notes`` collects what a user should
    know about the walk (a bounded or truncated index). ``freeze_after_build`` (for a short-lived
    process such as the CLI's, never a library host like pylint): after each build, move every object
    alive to the collector's permanent generation (:func:`gc.freeze`), so that the checks that follow
    never walk the project facts again (measured: 14% of a ``check`` of torch/distributed whose
    facts come from the cache); what the process frees later is still freed by reference counting.
    """

    def __init__(self, cache_dir: str | Callable[[Path], str | None] | None = None, use_cache: bool = True,
                 jobs: int = 1, is_excluded: Callable[[str, Path], bool] | None = None,
                 freeze_after_build: bool = False):
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        self.jobs = jobs
        self.is_excluded = is_excluded
        self.freeze_after_build = freeze_after_build
        self._built: dict[Path, dict[str, Any]] = {}
        self._roots: dict[str, Path] = {}
        self._marked: dict[str, Any] = {}  # the memo of find_project_root
        self._scans: dict[tuple[Path, str], tuple[Scan, dict]] = {}
        self._inputs: dict[tuple[Path, str], str] = {}  # (root, facts kind) -> ProjectFacts.root_inputs
        self._early: dict[str, tuple[bytes, Any]] = {}  # path -> (content digest, early analysis)
        self.stats: dict[str, int] = {}
        self.notes: list[str] = []

    def root_of(self, path: str) -> Path:
        """Return the project root of ``path`` (memoized per folder)."""
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in self._roots:
            self._roots[folder] = find_project_root(path, self._marked)
        return self._roots[folder]

    def cache_folder(self, root: Path) -> str:
        """The cache folder used for the project ``root``."""
        folder = self.cache_dir(root) if callable(self.cache_dir) else self.cache_dir
        return folder or default_cache_dir()

    def data(self, facts: ProjectFacts, path: str) -> Any:
        """Return ``facts``' project object for the project holding ``path`` (built on first use; see
        :meth:`prepare`)."""
        return self.data_for_root(facts, self.root_of(path))

    def data_for_root(self, facts: ProjectFacts, root: Path) -> Any:
        """Return ``facts``' project object for the project ``root`` (built on first use)."""
        built = self._built.get(root)
        if built is None or facts.key not in built:
            self.prepare_root(root, [facts])
            built = self._built[root]
        return built[facts.key]

    def prepare(self, path: str, facts: Sequence[ProjectFacts], keep: Iterable[str] = (),
                early: EarlyAnalysis | None = None) -> None:
        """Build every kind of ``facts`` not built yet for the project holding ``path``, together (one
        walk, one parse per file). The per-file time budget of the caller is paused meanwhile: this is
        per-project work, not per-file. ``keep``: the files about to be checked; ``early(path, raw, source,
        tree)`` is called with the tree of each of them that the build parses (in this process or a
        worker: the value must pickle), and its value is kept for :meth:`take_early`, so that the
        parts of a check that need no project facts run on the tree the build parsed anyway and a
        cold ``check`` parses each file once. The tree itself is not kept (trees take 25-31 times
        their source's size in memory)."""
        self.prepare_root(self.root_of(path), facts, keep, early)

    def prepare_root(self, root: Path, facts: Sequence[ProjectFacts], keep: Iterable[str] = (),
                     early: EarlyAnalysis | None = None) -> None:
        """:meth:`prepare` for the project ``root``."""
        built = self._built.setdefault(root, {})
        missing = [f for f in dict.fromkeys(facts) if f.key not in built]
        if missing:
            wanted = frozenset(os.path.abspath(p) for p in keep) if early is not None else frozenset()
            with budget_paused():
                try:
                    built.update(self._build(root, missing, wanted, early))
                except Exception:  # noqa: BLE001 - a cached summary of the wrong shape: rebuild without it
                    if not self.use_cache:
                        raise
                    self.use_cache = False
                    self._scans.clear()
                    try:
                        built.update(self._build(root, missing, wanted, early))
                    finally:
                        self.use_cache = True

    def take_early(self, path: str, digest: bytes) -> Any:
        """Return the value :meth:`prepare`'s ``early`` gave for ``path`` when the build parsed bytes
        of content ``digest`` (:func:`content_digest`; else ``None``), and forget it: it serves one
        check."""
        if not self._early:
            return None
        kept = self._early.pop(os.path.abspath(path), None)
        return kept[1] if kept is not None and kept[0] == digest else None

    def release_early(self) -> None:
        """Forget every early analysis kept by :meth:`prepare` that no check took."""
        self._early.clear()

    def fingerprint(self, path: str, facts: Sequence[ProjectFacts]) -> str:
        """The fingerprint of the project holding ``path`` as ``facts`` see it: the walked file set and
        every file's content digest (from the cache manifest where ``stat`` allows), without building
        anything. Equal fingerprints: no file of the project changed."""
        return self.root_fingerprint(self.root_of(path), facts)

    def root_fingerprint(self, root: Path, facts: Sequence[ProjectFacts]) -> str:
        """:meth:`fingerprint` of the project ``root`` (what :meth:`root_of` returns)."""
        root = root if root.is_absolute() else Path(os.path.abspath(root))
        done = next((found for (scanned, _kinds), found in self._scans.items() if scanned == root), None)
        if done is not None:  # the walk and the digests do not depend on the kinds of facts: reuse it
            fingerprint = done[0].fingerprint
        else:
            with budget_paused():
                fingerprint = self._scan(root, facts)[0].fingerprint
        inputs = []
        for fa in facts:  # what the facts read besides the Python files (read once per root and run)
            found = self._inputs.get((root, fa.key))
            if found is None:
                found = self._inputs[(root, fa.key)] = fa.root_inputs(root)
            inputs.append(found)
        if not any(inputs):
            return fingerprint
        return hashlib.blake2b("\0".join([fingerprint, *inputs]).encode("utf-8", "surrogateescape"),
                               digest_size=16).hexdigest()

    # ------------------------------------------------------------------ walking
    def _scan(self, root: Path, facts: Sequence[ProjectFacts]) -> tuple[Scan, dict]:
        """Walk ``root`` and give every file its content digest (memoized per root and facts kinds).
        Returns the scan and the manifest read from the cache (``{}`` when none)."""
        kinds = "+".join(sorted(f.key for f in facts))
        found = self._scans.get((root, kinds))
        if found is not None:
            return found
        marked = is_project_root(root)
        skipped: list[str] = []
        entries = project_entries(os.fspath(root), packages_only=not marked, skipped=skipped)
        if skipped:
            self._note(f"{root}: no pyproject.toml, setup.py, setup.cfg or .git in this folder or above, so the "
                       f"project index covers only its own files and the packages (folders with __init__.py) "
                       f"below it; {len(skipped)} other folder(s) with Python files were not indexed (e.g. "
                       f"{skipped[0]}); add a pyproject.toml to index the whole tree")
        modules = module_names(root, [e[1] for e in entries])
        if self.is_excluded is not None:
            entries = [e for e in entries if not self.is_excluded(e[0], root)]
        truncated = 0
        if len(entries) > MAX_PROJECT_FILES:
            truncated = len(entries) - MAX_PROJECT_FILES
            entries = entries[:MAX_PROJECT_FILES]
            self._note(f"{root}: the project index is limited to {MAX_PROJECT_FILES} files; {truncated} more "
                       f"were left out (classes there count as unknown); exclude folders with "
                       f"'extend-exclude' or mark a smaller project root with a pyproject.toml")
        cache_file = cache_path(root, self.cache_folder(root), facts) if self.use_cache else None
        manifest = read_manifest(cache_file, root, facts) if cache_file else {}
        trusted_before = manifest.get("written", 0) - RACY_WINDOW_NS
        cached = manifest.get("entries", {})
        stats = {"parsed": 0, "cached": 0, "failed": 0, "hashed": 0}
        files: list[ScannedFile] = []
        for path, rel, dir_entry in entries:
            try:
                st = dir_entry.stat()
            except OSError:
                stats["failed"] += 1
                continue
            key = (st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino)
            old = cached.get(rel)
            module = modules.get(rel, "")
            if old is not None and tuple(old[:4]) == key and st.st_ctime_ns < trusted_before \
                    and st.st_mtime_ns < trusted_before:
                files.append(ScannedFile(path, rel, key, bytes.fromhex(old[4]), None, module))
                continue
            try:  # non-blocking, regular files only, size-capped (a FIFO or a 50 MB file: skipped)
                raw, _ = read_source_bytes(path, DEFAULT_MAX_FILE_SIZE)
            except OSError:
                stats["failed"] += 1
                continue
            stats["hashed"] += 1
            files.append(ScannedFile(path, rel, key, content_digest(raw), raw, module))
        scan = Scan(root, files, truncated, stats)
        self._scans[(root, kinds)] = (scan, manifest)
        return scan, manifest

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # ------------------------------------------------------------------ building
    def _build(self, root: Path, facts: Sequence[ProjectFacts], keep: frozenset[str] = frozenset(),
               early: EarlyAnalysis | None = None) -> dict[str, Any]:
        with gc_paused():
            built = self._build_unpaused(root, facts, keep, early)
            if self.freeze_after_build:  # before the collector is back: it never walks what was built
                gc.freeze()
            return built

    def _build_unpaused(self, root: Path, facts: Sequence[ProjectFacts], keep: frozenset[str],
                        early: EarlyAnalysis | None) -> dict[str, Any]:
        root = Path(os.path.abspath(root))
        scan, manifest = self._scan(root, facts)
        cache_file = cache_path(root, self.cache_folder(root), facts) if self.use_cache else None
        ready: dict[str, Any] = {}
        failed_before = None
        if cache_file:  # project objects cached whole for this very file set and contents
            for fa in facts:
                if fa.caches_built:
                    found = read_built(cache_file, root, fa, scan.fingerprint,
                                       self._rebuilder(root, facts, scan, manifest, cache_file, fa))
                    if found is not None:
                        ready[fa.key], failed_before = found
        rest = [fa for fa in facts if fa.key not in ready]
        if not rest:
            self.stats = {"parsed": 0, "cached": len(scan.files), "failed": scan.stats["failed"] + (failed_before or 0),
                          "hashed": scan.stats["hashed"]}
            if scan.stats["hashed"] or any(tuple(manifest.get("entries", {}).get(f.rel, ())[:4]) != f.stat
                                           for f in scan.files):
                write_project_cache(cache_file, root, facts, scan, (), write_summaries=False)
            for f in scan.files:
                f.raw = None  # the bytes of hashed files are not needed (a rebuild reads them again)
            return ready
        built = self._build_from_summaries(root, facts, scan, manifest, cache_file, rest, keep, early)
        built.update(ready)
        return built

    def _rebuilder(self, root: Path, facts: Sequence[ProjectFacts], scan: Scan, manifest: dict,
                   cache_file: str, kind: ProjectFacts) -> Callable[[], Any]:
        """The ``rebuild`` callable of :meth:`ProjectFacts.decode_built`: builds ``kind`` from the
        summaries (project-level work: outside the caller's time budget, collector paused)."""
        def rebuild() -> Any:
            with budget_paused(), gc_paused():
                return self._build_from_summaries(root, facts, scan, manifest, cache_file, [kind])[kind.key]
        return rebuild

    def _build_from_summaries(self, root: Path, facts: Sequence[ProjectFacts], scan: Scan, manifest: dict,
                              cache_file: str | None, build: Sequence[ProjectFacts],
                              keep: frozenset[str] = frozenset(), early: EarlyAnalysis | None = None) -> dict[str, Any]:
        """Build the kinds ``build`` from every file's summaries (cached or computed; the cache
        holds the summaries of every kind of ``facts``); ``early`` runs on the trees of the files of
        ``keep`` that are parsed (see :meth:`prepare`)."""
        summaries = read_summaries(cache_file, root, facts) if cache_file else {}
        stats = dict(scan.stats)
        slots: list[dict | None] = []
        reuse: list[dict | None] = []  # the cached (encoded) summaries of every kind, written back as they are
        pending: list[tuple[int, ScannedFile]] = []
        transient: set[str] = set()
        for f in scan.files:
            entry = summaries.get(f.rel)
            if entry is not None and entry[0] == f.digest and entry[1] == f.module:
                if entry[2] is None:  # a file that could not be parsed: cached as such
                    stats["cached"] += 1
                    stats["failed"] += 1
                    slots.append(None)
                    reuse.append(None)
                    continue
                decoded = _decode_all(build, entry[2])  # only the kinds to build are decoded
                if decoded is not None:
                    stats["cached"] += 1
                    slots.append(decoded)
                    reuse.append(entry[2])
                    continue
            pending.append((len(slots), f))
            slots.append(None)
            reuse.append(None)
        if pending:
            workers = self.jobs if len(pending) >= MIN_PARALLEL else 1

            def summarize_one(item: tuple[int, ScannedFile]) -> tuple[dict | None | bool, Any]:
                f = item[1]
                raw = f.raw
                if raw is None:
                    try:
                        raw, _ = read_source_bytes(f.path, DEFAULT_MAX_FILE_SIZE)
                    except OSError:
                        return False, None
                    if content_digest(raw) != f.digest:  # changed since the scan: not cached
                        return False, None
                box: list[Any] = []
                on_tree = None
                if early is not None and f.path in keep:
                    def on_tree(source: SourceFile, tree: ast.Module, path: str = f.path, raw: bytes = raw) -> None:
                        box.append(early(path, raw, source, tree))
                return summarize_file(f.path, raw, facts, on_tree), (box[0] if box else None)

            results = parallel_map(summarize_one, pending, workers, on_dead=lambda item: (None, None))
            for (_slot, f), (_summary, value) in zip(pending, results):
                if value is not None:
                    self._early[f.path] = (f.digest, value)
            results = [summary for summary, _value in results]
            for (slot, f), summary in zip(pending, results):
                stats["parsed"] += 1
                if summary is None or summary is False:
                    stats["failed"] += 1
                if summary is False:  # out of time or memory: not cached as a failure
                    transient.add(f.rel)
                    summary = None
                slots[slot] = summary
        summaries_changed = bool(pending) or len(summaries) != len(scan.files)
        # a file hashed because it was racily clean is trusted by its stat key once the manifest is newer
        manifest_changed = summaries_changed or bool(scan.stats["hashed"]) or manifest.get("entries") is None \
            or len(manifest["entries"]) != len(scan.files) \
            or any(tuple(manifest["entries"].get(f.rel, ())[:4]) != f.stat for f in scan.files)
        if cache_file and manifest_changed:
            write_project_cache(cache_file, root, facts, scan, slots, transient, summaries_changed, reuse)
        for f in scan.files:
            f.raw = None  # the bytes were only kept for summarizing
        self.stats = stats
        kept = [(f, s) for f, s in zip(scan.files, slots) if s is not None]
        built = {
            fa.key: fa.build(root, [f.path for f, _ in kept], [s[fa.key] for _, s in kept],
                             [f.digest for f, _ in kept])
            for fa in build
        }
        if cache_file and not transient:  # a transient failure is retried next time: not built in
            for fa in build:
                if fa.caches_built:
                    write_built(cache_file, root, fa, scan.fingerprint, built[fa.key],
                                stats["failed"] - scan.stats["failed"])
        return built


def _decode_all(facts: Sequence[ProjectFacts], encoded: Any) -> dict[str, Any] | None:
    """Decode one file's cached summaries (``None``: a facts kind missing or malformed)."""
    if not isinstance(encoded, dict):
        return None
    try:
        return {f.key: f.decode(encoded[f.key]) for f in facts}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None


def module_names(root: Path, rels: Sequence[str]) -> dict[str, str]:
    """Return ``rel -> dotted module name`` for the files ``rels`` of ``root``, named as
    :func:`hp_invariants.rules.undefined_method_call.index.module_name` names them (a folder is a
    package when it holds ``__init__.py``), from the walk itself (no ``stat`` per file). A cached
    summary is reused only when its file's module name is unchanged (an ``__init__.py`` added or
    removed renames modules without changing their bytes)."""
    packages = {os.path.dirname(rel) for rel in rels if os.path.basename(rel) == "__init__.py"}
    above: list[str] = []  # the root and the packages above it, innermost first
    folder = root
    while (folder / "__init__.py").exists():
        above.append(folder.name)
        if folder.parent == folder:
            break
        folder = folder.parent
    chains: dict[str, tuple[str, ...]] = {"": tuple(reversed(above))}  # folder -> its dotted parts

    def chain(folder_rel: str) -> tuple[str, ...]:
        """The parts a file in ``folder_rel`` gets before its own name (outermost first): those of the
        package chain up to the first folder that is not a package (the root: ``above`` too)."""
        found = chains.get(folder_rel)
        if found is None:
            found = chains[folder_rel] = (chain(os.path.dirname(folder_rel)) + (os.path.basename(folder_rel),)
                                          if folder_rel in packages else ())
        return found

    out: dict[str, str] = {}
    for rel in rels:
        folder_rel, name = os.path.split(rel)
        stem = name[:-3] if name.endswith(".py") else name
        parts = chain(folder_rel)
        out[rel] = ".".join(parts if stem == "__init__" else (*parts, stem)) or root.name
    return out


MIN_PARALLEL = 64
"""Fewer files than this to summarize: no process pool (starting one costs more)."""


def summarize_file(path: str, raw: bytes, facts: Sequence[ProjectFacts],
                   on_tree: Callable[[SourceFile, ast.Module], None] | None = None) -> dict[str, Any] | None | bool:
    """Decode and parse ``raw`` once and return ``{facts.key: summary}``; ``None`` when the file
    cannot be decoded or parsed; ``False`` when that takes longer than the per-file time budget or
    runs out of stack or memory (a failure that may not happen again: not cached). ``on_tree``:
    called with the decoded source and the tree once every summary is made, outside the summaries'
    time budget (it keeps its own and must not raise)."""
    try:
        with time_budget(DEFAULT_TIMEOUT):
            source = SourceFile.from_bytes(path, raw)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(source.text, filename=path)
            summaries = {f.key: f.summarize(tree, path) for f in facts}
    except (AnalysisTimeout, RecursionError, MemoryError):
        return False
    except (SourceDecodeError, SyntaxError, ValueError, OSError):
        return None
    if on_tree is not None:
        on_tree(source, tree)
    return summaries


# ---------------------------------------------------------------------- walking the project
def iter_project_files(root: Path) -> Iterable[str]:
    """Yield the ``.py`` files under ``root`` (sorted walk, default excludes, no symlinked dirs)."""
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not any(fnmatch.fnmatchcase(d, pat) for pat in DEFAULT_EXCLUDES))
        for name in sorted(names):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


_EXCLUDED_DIR = re.compile("|".join(fnmatch.translate(pat) for pat in DEFAULT_EXCLUDES) or "(?!)")
"""One regex for the default excludes (what ``fnmatch.fnmatchcase`` does per pattern)."""


def project_entries(root: str, packages_only: bool = False,
                    skipped: list[str] | None = None) -> list[tuple[str, str, os.DirEntry]]:
    """Return ``(path, path relative to root, DirEntry)`` of every file :func:`iter_project_files`
    yields, in the same order (same rules: sorted names, default excludes, symlinked folders not
    entered, unreadable folders skipped), from ``os.scandir`` without ``os.path.relpath``; the
    entries' ``stat()`` is what ``os.stat(path)`` returns. ``packages_only``: below ``root``, only
    folders holding ``__init__.py`` are entered (the bounded walk of a root without project marker);
    the folders left out that hold ``.py`` files are appended to ``skipped``."""
    out: list[tuple[str, str, os.DirEntry]] = []
    excluded = _EXCLUDED_DIR.match

    def walk(folder: str, prefix: str) -> None:
        try:
            with os.scandir(folder) as entries_it:
                entries = list(entries_it)
        except OSError:
            return
        dirs = []
        files = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                dirs.append(entry)
            elif entry.name.endswith(".py"):
                files.append(entry)
        if packages_only and prefix and not any(e.name == "__init__.py" for e in files):
            if skipped is not None and (files or any(_holds_python(d.path) for d in dirs)):
                skipped.append(folder)
            return
        files.sort(key=lambda e: e.name)
        out.extend((entry.path, prefix + entry.name, entry) for entry in files)
        dirs.sort(key=lambda e: e.name)
        for entry in dirs:
            if excluded(entry.name):
                continue
            try:
                if entry.is_symlink():
                    continue
            except OSError:
                pass
            walk(entry.path, prefix + entry.name + os.sep)

    walk(root, "")
    return out


def _holds_python(folder: str) -> bool:
    """True when ``folder`` directly holds a ``.py`` file (for the note of a bounded walk)."""
    try:
        with os.scandir(folder) as entries:
            return any(e.name.endswith(".py") for e in entries)
    except OSError:
        return False


# ---------------------------------------------------------------------- the cache
CACHE_FILE = re.compile(r"(project|results)-[0-9a-f]{20}(\.summaries|\.built\.[a-z0-9-]+)?\.json"
                        r"|(project|class-index)-[0-9a-f]+\.pickle")
"""Names of the cache files (what ``hp-invariants cache clear`` removes), and the pickle files that
earlier versions wrote (removed, never read)."""


def cache_path(root: Path, cache_dir: str | None, facts: Sequence[ProjectFacts]) -> str:
    """The manifest file of ``root`` for this set of ``facts`` under ``cache_dir`` (the summaries
    file is the same name with ``.summaries.json``)."""
    kinds = "+".join(sorted(f.key for f in facts))
    return os.path.join(cache_dir or default_cache_dir(), f"project-{root_digest(root, kinds)}.json")


def _summaries_path(manifest: str) -> str:
    return manifest[: -len(".json")] + ".summaries.json"


def _valid_stat_entry(entry: Any) -> bool:
    return (type(entry) is list and len(entry) == 5 and all(type(x) is int for x in entry[:4])
            and type(entry[4]) is str and len(entry[4]) == 32 and _HEX.fullmatch(entry[4]) is not None)


_HEX = re.compile(r"[0-9a-f]+")


def read_manifest(path: str, root: Path, facts: Sequence[ProjectFacts]) -> dict:
    """Return ``{"written": ns, "entries": {rel: [mtime_ns, size, ctime_ns, inode, digest hex]}}`` of
    the manifest ``path``; ``{}`` when missing or malformed (malformed entries are dropped)."""
    data = read_json(path, cache_tag(facts), root)
    if data is None or type(data.get("written")) is not int or not isinstance(data.get("entries"), dict):
        return {}
    entries = {rel: entry for rel, entry in data["entries"].items() if _valid_stat_entry(entry)}
    return {"written": data["written"], "entries": entries}


def read_summaries(path: str, root: Path, facts: Sequence[ProjectFacts]) -> dict[str, tuple[bytes, str, Any]]:
    """Return ``rel -> (digest, module, encoded summaries)`` from the summaries file next to the
    manifest ``path``; ``{}`` when missing or malformed. Summaries are decoded later, one by one."""
    data = read_json(_summaries_path(path), cache_tag(facts), root)
    if data is None:
        return {}
    out: dict[str, tuple[bytes, str, Any]] = {}
    for rel, entry in data.items():
        if type(entry) is list and len(entry) == 3 and type(entry[0]) is str and type(entry[1]) is str:
            try:
                out[rel] = (bytes.fromhex(entry[0]), entry[1], entry[2])
            except ValueError:
                continue
    return out


def _built_path(manifest: str, facts: ProjectFacts) -> str:
    return f"{manifest[: -len('.json')]}.built.{facts.key}.json"


def read_built(path: str, root: Path, facts: ProjectFacts, fingerprint: str,
               rebuild: Callable[[], Any]) -> tuple[Any, int] | None:
    """Return ``(project object, files that failed to parse)`` from the built-object cache of
    ``facts`` next to the manifest ``path`` when it was written for the project ``fingerprint``;
    ``None`` when missing, of another fingerprint, version or root, or malformed. ``rebuild``: see
    :meth:`ProjectFacts.decode_built`.

    The file (:func:`write_built`) is a JSON line, the checked index of its text tables, the texts,
    then the checksum line of the JSON line and the index only: what is read here is checked whole
    (a damaged file reads as missing), and each text is read and checked when the object decodes it
    (:class:`StoredTexts`). The file stays open for that (:class:`TextReader`: a bounded number of
    such files stay open, others are opened again when read)."""
    try:
        handle = open(_built_path(path, facts), "rb")  # noqa: SIM115 - kept open: the texts are read later
    except OSError:
        return None
    reader = TextReader(handle)
    try:
        found = _read_built_object(handle, reader, root, facts, fingerprint, rebuild)
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError, MemoryError):
        found = None
    if found is None:
        reader.close()
        return None
    reader.keep()  # texts are read from it later
    return found


def _read_built_object(handle: Any, reader: TextReader, root: Path, facts: ProjectFacts, fingerprint: str,
                       rebuild: Callable[[], Any]) -> tuple[Any, int] | None:
    head = handle.readline()
    data = _header_data(json.loads(head), cache_tag([facts]), root)
    if data is None or data.get("fingerprint") != fingerprint or type(data.get("failed")) is not int:
        return None
    index_size, texts_size, byteorder = data.get("index"), data.get("texts"), data.get("order")
    if type(index_size) is not int or type(texts_size) is not int or byteorder not in ("little", "big") \
            or index_size < 0 or texts_size < 0:
        return None
    index = handle.read(index_size)
    base = len(head) + index_size
    if len(index) != index_size or os.fstat(handle.fileno()).st_size != base + texts_size + 9:
        return None  # cut short or grown since it was written
    handle.seek(base + texts_size)
    line = handle.read(9)
    if line[:1] != b"\n" or int(line[1:], 16) != zlib.crc32(index, zlib.crc32(head)):
        return None  # damaged: as if missing
    plain = join_text_tables(data.get("object"), reader, index, base, texts_size, byteorder)
    return facts.decode_built(plain, rebuild), data["failed"]


def write_built(path: str, root: Path, facts: ProjectFacts, fingerprint: str, built: Any, failed: int) -> None:
    """Write the project object ``built`` of ``facts`` (:meth:`ProjectFacts.encode_built`) for the
    project ``fingerprint`` next to the manifest ``path`` (see :func:`read_built` for the layout);
    nothing when it has no plain form."""
    try:
        plain, index, texts = split_text_tables(facts.encode_built(built))
        head = _json_line(cache_tag([facts]), root, {
            "fingerprint": fingerprint, "failed": failed, "object": plain,
            "index": len(index), "texts": len(texts), "order": sys.byteorder}) + b"\n"
    except (NotImplementedError, TypeError, ValueError, UnicodeEncodeError):
        return
    target = _built_path(path, facts)
    try:
        prepare_cache_dir(os.path.dirname(target))
        _write_atomically(target, b"".join((head, index, texts, b"\n%08x" % zlib.crc32(index, zlib.crc32(head)))))
    except OSError:
        pass


def split_text_tables(plain: Any) -> tuple[Any, bytes, bytes]:
    """``(header, index, texts)``: ``plain`` (a project object's plain form) with each
    :class:`TextTable` value of its top-level dict replaced by its description (count, where its
    block of ``index`` starts, where its texts start, the size of its keys), the index (per table:
    the end offset of each text and its CRC-32 as unsigned 32-bit integers in this machine's byte
    order, then the keys joined by NUL, UTF-8), and the bytes of all texts in order. Raises
    ``UnicodeEncodeError`` for a text or key that is not valid Unicode (a lone surrogate),
    ``ValueError`` for a key holding NUL or a table of 4 GiB or more."""
    if type(plain) is not dict:
        return plain, b"", b""
    index: list[bytes] = []
    texts: list[bytes] = []
    size = where = 0
    header: dict[str, Any] = {}
    for key, value in plain.items():
        if isinstance(value, TextTable):
            encoded = [t.encode("utf-8") for t in value.texts]
            ends = array(_U32, accumulate(map(len, encoded)))  # relative to the table's start, ``at``
            crcs = array(_U32, map(zlib.crc32, encoded))
            keys = b""
            if value.keys is not None:
                if any("\0" in k for k in value.keys):
                    raise ValueError("a key holds NUL")
                keys = "\0".join(value.keys).encode("utf-8")
            value = {"@texts": len(encoded), "at": size, "index": where,
                     "keys": None if value.keys is None else len(keys)}
            block = ends.tobytes() + crcs.tobytes() + keys
            index.append(block)
            where += len(block)
            size += ends[-1] if ends else 0
            texts.extend(encoded)
        header[key] = value
    return header, b"".join(index), b"".join(texts)


def join_text_tables(plain: Any, reader: TextReader, index: bytes, base: int, size: int,
                     byteorder: str = sys.byteorder) -> Any:
    """The inverse of :func:`split_text_tables`: each table description of ``plain`` becomes a
    :class:`StoredTexts` over the checked ``index`` and the ``size`` bytes of texts at ``base`` of
    ``reader`` (see :meth:`StoredTexts.from_header` for the errors raised)."""
    if type(plain) is not dict:
        return plain
    return {k: StoredTexts.from_header(v, reader, index, base, size, byteorder)
            if type(v) is dict and "@texts" in v else v for k, v in plain.items()}


def write_project_cache(path: str, root: Path, facts: Sequence[ProjectFacts], scan: Scan,
                        summaries: Sequence[dict | None], transient: set[str] = frozenset(),  # type: ignore[assignment]
                        write_summaries: bool = True, reuse: Sequence[dict | None] = ()) -> None:
    """Write the summaries (when ``write_summaries``), then the manifest of ``scan`` (each
    atomically). The manifest's write time is taken before anything is written, so a file edited
    meanwhile is hashed next time; ``transient`` failures are not recorded. ``reuse[i]``, when
    given and not ``None``: the cached encoded summaries of file ``i``, written as they are."""
    written = time.time_ns()
    tag = cache_tag(facts)
    if not write_summaries:
        entries = {f.rel: [*f.stat, f.digest.hex()] for f in scan.files if f.digest is not None}
        write_json(path, tag, root, {"written": written, "entries": entries})
        return
    encoded: dict[str, Any] = {}
    for i, (f, summary) in enumerate(zip(scan.files, summaries)):
        if f.digest is None or f.rel in transient:
            continue
        if i < len(reuse) and reuse[i] is not None:
            encoded[f.rel] = [f.digest.hex(), f.module, reuse[i]]
            continue
        if summary is None:
            encoded[f.rel] = [f.digest.hex(), f.module, None]
            continue
        try:
            encoded[f.rel] = [f.digest.hex(), f.module, {fa.key: fa.encode(summary[fa.key]) for fa in facts}]
        except (NotImplementedError, TypeError, ValueError):
            return  # a facts kind without a plain-data form is not cached
    write_json(_summaries_path(path), tag, root, encoded)
    entries = {f.rel: [*f.stat, f.digest.hex()] for f in scan.files if f.digest is not None}
    write_json(path, tag, root, {"written": written, "entries": entries})


def clear_cache_dir(folder: str) -> list[str]:
    """Remove the cache files of ``folder`` (only names the cache writes: ``project-*.json``,
    ``results-*.json``, leftover temp files, and its own ``.gitignore``/``CACHEDIR.TAG``), then the
    folder when it is left empty. Returns the removed paths; a missing folder removes nothing."""
    removed: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    ours = {".gitignore": b"# Created by hp-invariants", "CACHEDIR.TAG": b"Signature: 8a477f597d28d172789f06886806bc55"}
    for name in names:
        path = os.path.join(folder, name)
        mine = CACHE_FILE.fullmatch(name) is not None or name.startswith(".tmp-")
        if name in ours:
            try:
                with open(path, "rb") as handle:
                    mine = handle.read(len(ours[name])) == ours[name]
            except OSError:
                mine = False
        if mine:
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    try:
        os.rmdir(folder)
    except OSError:
        pass
    return removed
