"""Project-wide facts that rules declare: one walk, one parse per file, one cache, for every rule.

A rule that needs facts about the whole project (E9503 needs every class of the project to
resolve an MRO) declares them with a :class:`ProjectFacts` object on ``Rule.project_facts``. The
engine knows nothing more about them: :class:`Project` walks the project root once, parses each
file once, hands the tree to every declared :meth:`ProjectFacts.summarize`, caches the per-file
summaries on disk (keyed by the file's content), and gives each rule its
:meth:`ProjectFacts.build` result through ``FileContext.project_data(rule)``.

The project root of a file is the nearest folder holding ``pyproject.toml``, ``setup.py``,
``setup.cfg`` or ``.git`` (:func:`hp_invariants.config.find_project_root`).
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import os
import pickle
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hp_invariants.config import DEFAULT_EXCLUDES, find_project_root
from hp_invariants.limits import DEFAULT_MAX_FILE_SIZE, DEFAULT_TIMEOUT, AnalysisTimeout, budget_paused, time_budget
from hp_invariants.runner import parallel_map
from hp_invariants.source import SourceDecodeError, SourceFile, read_source_bytes


class ProjectFacts:
    """Facts about every file of a project that one rule needs (declared as ``Rule.project_facts``).

    Subclasses set ``key`` (a short name: the cache namespace) and ``version`` (bump it whenever
    :meth:`summarize` changes, so old cache entries are rebuilt), and implement:

    * :meth:`summarize`: a small, picklable, ``ast``-free summary of one parsed file (never raises
      for a valid tree);
    * :meth:`build`: the object the rule reads (``ctx.project_data(rule)``), from every file's summary.
    """

    key: str = ""
    version: int = 1

    def summarize(self, tree: ast.Module, path: str) -> Any:  # pragma: no cover - abstract
        """Return the summary of the parsed file ``path``."""
        raise NotImplementedError

    def build(self, root: Path, paths: list[str], summaries: list[Any], digests: list[bytes]) -> Any:
        """Return the project object from the summaries of ``paths`` (absolute, same order) and their
        content digests (``hashlib.blake2b``, 16 bytes)."""  # pragma: no cover - abstract
        raise NotImplementedError


def content_digest(raw: bytes) -> bytes:
    """The content key of a file's bytes in the project cache (blake2b, 16 bytes)."""
    return hashlib.blake2b(raw, digest_size=16).digest()


class Project:
    """Lazily built, per-root project data for the rules that declare :class:`ProjectFacts`.

    ``cache_dir``: where summaries are cached, or a callable ``root -> folder`` (``None``:
    :func:`default_cache_dir`); ``use_cache`` False: neither read nor write it; ``jobs``: processes
    for summarizing files that are not cached (the CLI's ``-j``); ``is_excluded(path, root)``: project
    files the walk leaves out (the check's own excludes; default excluded folder names always apply).
    Built data is memoized per root for the life of the object.
    """

    def __init__(self, cache_dir: str | Callable[[Path], str | None] | None = None, use_cache: bool = True,
                 jobs: int = 1, is_excluded: Callable[[str, Path], bool] | None = None):
        self.cache_dir = cache_dir
        self.use_cache = use_cache
        self.jobs = jobs
        self.is_excluded = is_excluded
        self._built: dict[Path, dict[str, Any]] = {}
        self._roots: dict[str, Path] = {}
        self.stats: dict[str, int] = {}

    def root_of(self, path: str) -> Path:
        """Return the project root of ``path`` (memoized per folder)."""
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in self._roots:
            self._roots[folder] = find_project_root(path)
        return self._roots[folder]

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

    def prepare(self, path: str, facts: Sequence[ProjectFacts]) -> None:
        """Build every kind of ``facts`` not built yet for the project holding ``path``, together (one
        walk, one parse per file). The per-file time budget of the caller is paused meanwhile: this is
        per-project work, not per-file."""
        self.prepare_root(self.root_of(path), facts)

    def prepare_root(self, root: Path, facts: Sequence[ProjectFacts]) -> None:
        """:meth:`prepare` for the project ``root``."""
        built = self._built.setdefault(root, {})
        missing = [f for f in dict.fromkeys(facts) if f.key not in built]
        if missing:
            with budget_paused():
                built.update(self._build(root, missing))

    # ------------------------------------------------------------------ building
    def _build(self, root: Path, facts: Sequence[ProjectFacts]) -> dict[str, Any]:
        root = Path(os.path.abspath(root))
        entries = project_entries(os.fspath(root))
        if self.is_excluded is not None:
            entries = [e for e in entries if not self.is_excluded(e[0], root)]
        cache_dir = self.cache_dir(root) if callable(self.cache_dir) else self.cache_dir
        cache_file = cache_path(root, cache_dir, facts) if self.use_cache else None
        old = read_cache(cache_file, root, facts) if cache_file else {}
        new: dict[str, tuple] = {}
        stats = {"parsed": 0, "cached": 0, "failed": 0}
        slots: list[tuple[str, str, dict | None]] = []
        pending: list[tuple[int, str, bytes]] = []
        for path, rel, dir_entry in entries:
            try:
                st = dir_entry.stat()
            except OSError:
                stats["failed"] += 1
                continue
            entry = old.get(rel)
            if entry is not None and entry[0] == st.st_mtime_ns and entry[1] == st.st_size:
                new[rel] = entry
                stats["cached"] += 1
                slots.append((path, rel, entry[3]))
                continue
            try:  # non-blocking, regular files only, size-capped (a FIFO or a 50 MB file: skipped)
                raw, _ = read_source_bytes(path, DEFAULT_MAX_FILE_SIZE)
            except OSError:
                stats["failed"] += 1
                continue
            digest = content_digest(raw)
            if entry is not None and entry[2] == digest:
                new[rel] = (st.st_mtime_ns, st.st_size, digest, entry[3])
                stats["cached"] += 1
                slots.append((path, rel, entry[3]))
                continue
            new[rel] = (st.st_mtime_ns, st.st_size, digest, None)
            pending.append((len(slots), path, raw))
            slots.append((path, rel, None))
        if pending:
            summaries = parallel_map(lambda item: summarize_file(item[1], item[2], facts), pending,
                                     self.jobs if len(pending) >= MIN_PARALLEL else 1, on_dead=lambda item: None)
            for (slot, path, _raw), summary in zip(pending, summaries):
                stats["parsed"] += 1
                if summary is None:
                    stats["failed"] += 1
                rel = slots[slot][1]
                new[rel] = new[rel][:3] + (summary,)
                slots[slot] = (path, rel, summary)
        if cache_file and (stats["parsed"] or stats["failed"] or set(new) != set(old)
                           or any(new[k][:2] != old[k][:2] for k in new if k in old)):
            write_cache(cache_file, root, facts, new)
        kept = [(path, summary, new[rel][2]) for path, rel, summary in slots if summary is not None]
        self.stats = stats
        return {
            f.key: f.build(root, [k[0] for k in kept], [k[1][f.key] for k in kept], [k[2] for k in kept])
            for f in facts
        }


MIN_PARALLEL = 64
"""Fewer files than this to summarize: no process pool (starting one costs more)."""


def summarize_file(path: str, raw: bytes, facts: Sequence[ProjectFacts]) -> dict[str, Any] | None:
    """Decode and parse ``raw`` once and return ``{facts.key: summary}``; ``None`` when the file
    cannot be decoded or parsed, or when that takes longer than the per-file time budget."""
    try:
        with time_budget(DEFAULT_TIMEOUT):
            text = SourceFile.from_bytes(path, raw).text
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text, filename=path)
            return {f.key: f.summarize(tree, path) for f in facts}
    except (AnalysisTimeout, SourceDecodeError, SyntaxError, ValueError, RecursionError, MemoryError, OSError):
        return None


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


def project_entries(root: str) -> list[tuple[str, str, os.DirEntry]]:
    """Return ``(path, path relative to root, DirEntry)`` of every file :func:`iter_project_files`
    yields, in the same order (same rules: sorted names, default excludes, symlinked folders not
    entered, unreadable folders skipped), from ``os.scandir`` without ``os.path.relpath``; the
    entries' ``stat()`` is what ``os.stat(path)`` returns."""
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


# ---------------------------------------------------------------------- the cache
def default_cache_dir() -> str:
    """``$HP_INVARIANTS_CACHE_DIR``, else ``$XDG_CACHE_HOME/hp-invariants``, else ``~/.cache/hp-invariants``."""
    env = os.environ.get("HP_INVARIANTS_CACHE_DIR")
    if env:
        return env
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hp-invariants")


def cache_tag(facts: Sequence[ProjectFacts]) -> str:
    """The version tag of a cache file: package version, Python version, and each facts' version."""
    from hp_invariants import __version__ as version  # noqa: PLC0415

    kinds = ",".join(f"{f.key}:{f.version}" for f in sorted(facts, key=lambda f: f.key))
    return f"hp-invariants-project/{kinds}/{version}/py{sys.version_info[0]}.{sys.version_info[1]}"


def cache_path(root: Path, cache_dir: str | None, facts: Sequence[ProjectFacts]) -> str:
    """The cache file of ``root`` for this set of ``facts`` under ``cache_dir``."""
    kinds = "+".join(sorted(f.key for f in facts))
    digest = hashlib.blake2b(f"{root}\0{kinds}".encode("utf-8", "surrogateescape"), digest_size=10).hexdigest()
    return os.path.join(cache_dir or default_cache_dir(), f"project-{digest}.pickle")


def read_cache(path: str, root: Path, facts: Sequence[ProjectFacts]) -> dict[str, tuple]:
    """Return the cached ``rel -> (mtime_ns, size, digest, summaries)`` entries, ``{}`` when the file
    is missing, corrupt, or of another version or root."""
    try:
        with open(path, "rb") as handle:
            data = pickle.load(handle)
        if not isinstance(data, dict) or data.get("tag") != cache_tag(facts) or data.get("root") != str(root):
            return {}
        entries = data["entries"]
        return entries if isinstance(entries, dict) else {}
    except Exception:  # noqa: BLE001 - missing or corrupt cache: rebuild silently
        return {}


def write_cache(path: str, root: Path, facts: Sequence[ProjectFacts], entries: dict[str, tuple]) -> None:
    """Write ``entries`` atomically (temp file + rename); a read-only location only costs speed."""
    import tempfile  # noqa: PLC0415 - only when the cache is written

    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".project-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                pickle.dump({"tag": cache_tag(facts), "root": str(root), "entries": entries}, handle,
                            protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass
