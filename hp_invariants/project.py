"""Project-wide facts that rules declare: one walk, one parse per file, one cache, for every rule.

A rule that needs facts about the whole project (E9503 needs every class of the project to
resolve an MRO) declares them with a :class:`ProjectFacts` object on ``Rule.project_facts``. The
engine knows nothing more about them: :class:`Project` walks the project root once, parses each
file once, hands the tree to every declared :meth:`ProjectFacts.summarize`, caches the per-file
summaries on disk (keyed by the file's content), and gives each rule its
:meth:`ProjectFacts.build` result through ``FileContext.project_data(rule)``.

The project root of a file is the nearest folder holding ``pyproject.toml``, ``setup.py``,
``setup.cfg`` or ``.git``, a ``pyproject.toml`` of other tools' settings only counting when no folder
above is marked (:func:`hp_invariants.config.find_project_root`). Without such a marker
(a loose script, an installed package) the root is the top package folder or the file's folder, and
the walk is bounded: only the root's own files and package folders (holding ``__init__.py``) below
it are indexed, as Python's imports from that folder would reach them; a project of more than
:data:`MAX_PROJECT_FILES` files is indexed up to that many, with a note (:attr:`Project.notes`).

The cache (:class:`hp_invariants.store.ProjectCache`; where it lives: :func:`default_cache_dir`;
``hp-invariants cache dir|clear``): per project root, each file's ``stat`` key and content digest,
each file's summaries (of the types the facts kinds declare; reused while the file's content digest
and module name are unchanged), and each facts kind's built object, stamped with the fingerprint of the file set and
contents it was built from (:attr:`Scan.fingerprint`): while that is the project's fingerprint, the
object is read back (:meth:`ProjectFacts.restore`) instead of being rebuilt from every file's summary.
A file's cached digest is trusted only when its ``stat`` key (mtime, size, ctime, inode, all in
nanoseconds) is unchanged AND its ctime and mtime are older than the manifest's write by more than
:data:`RACY_WINDOW_NS` (git's "racily clean" rule); otherwise the file is read and hashed (blake2b).
``cp -p``, ``rsync -a`` and ``tar -x`` preserve the mtime but set the ctime, so a same-length edit
restored that way is hashed and seen. Hashing every file on every run was measured instead and
rejected: it costs 0.33 s on torch (2,285 files, 46 MB), a third of the ``ast.parse`` floor of
``torch/distributed``, against 0.02 s for the ``stat`` calls. How it is stored (one SQLite
database, checked rows, atomic writes) is the store's business: see :mod:`hp_invariants.store`.
"""

from __future__ import annotations

import ast
import contextlib
import fnmatch
import gc
import hashlib
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from hp_invariants.api import ProjectFacts
from hp_invariants.store import ProjectCache, default_cache_dir
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
        self.lazy_facts: Sequence[ProjectFacts] = ()
        """Kinds built together with any kind a rule asks for through :meth:`data` (one walk and
        one parse per file for all of them, as :meth:`prepare` does for ``check``)."""
        self.lazy_early: EarlyAnalysis | None = None
        """Set by a host that checks the files of a project one by one without preparing them (the
        pylint plugin): the lazy build of :meth:`data` runs it on every file it parses and keeps the
        values for :meth:`take_early`, so each file is parsed once there too."""
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

    def is_built(self, facts: ProjectFacts, path: str) -> bool:
        """True when ``facts``' project object for the project holding ``path`` is built already."""
        return facts.key in self._built.get(self.root_of(path), ())

    def data(self, facts: ProjectFacts, path: str) -> Any:
        """Return ``facts``' project object for the project holding ``path`` (built on first use; see
        :meth:`prepare`)."""
        return self.data_for_root(facts, self.root_of(path))

    def data_for_root(self, facts: ProjectFacts, root: Path) -> Any:
        """Return ``facts``' project object for the project ``root`` (built on first use)."""
        built = self._built.get(root)
        if built is None or facts.key not in built:
            kinds = [facts, *(f for f in self.lazy_facts if f.key != facts.key and f.key not in (built or {}))]
            self.prepare_root(root, kinds, early=self.lazy_early, keep_all=self.lazy_early is not None)
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
                     early: EarlyAnalysis | None = None, keep_all: bool = False) -> None:
        """:meth:`prepare` for the project ``root`` (``keep_all``: ``early`` runs on every file parsed)."""
        built = self._built.setdefault(root, {})
        missing = [f for f in dict.fromkeys(facts) if f.key not in built]
        if missing:
            wanted: frozenset[str] | None = frozenset(os.path.abspath(p) for p in keep) if early is not None else frozenset()
            if keep_all and early is not None:
                wanted = None  # every file
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
            self.note(f"{root}: no pyproject.toml, setup.py, setup.cfg or .git in this folder or above, so the "
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
            self.note(f"{root}: the project index is limited to {MAX_PROJECT_FILES} files; {truncated} more "
                       f"were left out (classes there count as unknown); exclude folders with "
                       f"'extend-exclude' or mark a smaller project root with a pyproject.toml")
        cache = ProjectCache(self.cache_folder(root), root, facts) if self.use_cache else None
        manifest = cache.manifest() if cache is not None else {}
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
                files.append(ScannedFile(path, rel, key, old[4], None, module))
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

    def note(self, text: str) -> None:
        """Add ``text`` to :attr:`notes` (once): what the run's summary says about the project walk."""
        if text not in self.notes:
            self.notes.append(text)

    # ------------------------------------------------------------------ building
    def _build(self, root: Path, facts: Sequence[ProjectFacts], keep: frozenset[str] | None = frozenset(),
               early: EarlyAnalysis | None = None) -> dict[str, Any]:
        with gc_paused():
            built = self._build_unpaused(root, facts, keep, early)
            if self.freeze_after_build:  # before the collector is back: it never walks what was built
                gc.freeze()
            return built

    def _build_unpaused(self, root: Path, facts: Sequence[ProjectFacts], keep: frozenset[str] | None,
                        early: EarlyAnalysis | None) -> dict[str, Any]:
        root = Path(os.path.abspath(root))
        scan, manifest = self._scan(root, facts)
        cache = ProjectCache(self.cache_folder(root), root, facts) if self.use_cache else None
        ready: dict[str, Any] = {}
        failed_before = None
        if cache is not None:  # project objects cached whole for this very file set and contents
            for fa in facts:
                if fa.built_parts:
                    found = cache.read_built(fa, scan.fingerprint, self._rebuilder(root, facts, scan, manifest, cache, fa))
                    if found is not None:
                        ready[fa.key], failed_before = found
        rest = [fa for fa in facts if fa.key not in ready]
        if not rest:
            self.stats = {"parsed": 0, "cached": len(scan.files), "failed": scan.stats["failed"] + (failed_before or 0),
                          "hashed": scan.stats["hashed"]}
            if scan.stats["hashed"] or any(tuple(manifest.get("entries", {}).get(f.rel, ())[:4]) != f.stat
                                           for f in scan.files):
                cache.write(scan, (), write_summaries=False)  # type: ignore[union-attr]
            for f in scan.files:
                f.raw = None  # the bytes of hashed files are not needed (a rebuild reads them again)
            return ready
        built = self._build_from_summaries(root, facts, scan, manifest, cache, rest, keep, early)
        built.update(ready)
        return built

    def _rebuilder(self, root: Path, facts: Sequence[ProjectFacts], scan: Scan, manifest: dict,
                   cache: ProjectCache, kind: ProjectFacts) -> Callable[[], Any]:
        """The ``rebuild`` callable of :meth:`ProjectFacts.restore`: builds ``kind`` from the
        summaries (project-level work: outside the caller's time budget, collector paused), with a
        project of the same settings: not this one, which holds the restored object that holds the
        rebuild (a reference cycle would keep both, and the store's snapshot they read through, alive
        until a full collection)."""
        settings = {"cache_dir": self.cache_dir, "use_cache": self.use_cache, "jobs": self.jobs,
                    "is_excluded": self.is_excluded}

        def rebuild() -> Any:
            with budget_paused(), gc_paused():
                builder = Project(**settings)
                return builder._build_from_summaries(root, facts, scan, manifest, cache, [kind])[kind.key]
        return rebuild

    def _build_from_summaries(self, root: Path, facts: Sequence[ProjectFacts], scan: Scan, manifest: dict,
                              cache: ProjectCache | None, build: Sequence[ProjectFacts],
                              keep: frozenset[str] | None = frozenset(), early: EarlyAnalysis | None = None) -> dict[str, Any]:
        """Build the kinds ``build`` from every file's summaries (cached or computed; the cache
        holds the summaries of every kind of ``facts``); ``early`` runs on the trees of the files of
        ``keep`` (``None``: every file) that are parsed (see :meth:`prepare`)."""
        summaries = cache.summaries() if cache is not None else {}
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
                decoded = ProjectCache.decode_summaries(build, entry[2])  # only the kinds to build are decoded
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
                f.raw = None  # held by this call only: freed as soon as the file is summarized
                if raw is None:
                    try:
                        raw, _ = read_source_bytes(f.path, DEFAULT_MAX_FILE_SIZE)
                    except OSError:
                        return False, None
                    if content_digest(raw) != f.digest:  # changed since the scan: not cached
                        return False, None
                box: list[Any] = []
                on_tree = None
                if early is not None and (keep is None or f.path in keep):
                    def on_tree(source: SourceFile, tree: ast.Module, path: str = f.path, raw: bytes = raw) -> None:
                        box.append(early(path, raw, source, tree))
                return summarize_file(f.path, raw, facts, on_tree, f.module), (box[0] if box else None)

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
        texts: dict[str, dict] = {}  # the JSON text of each summary encoded for the cache (kind -> id -> text)
        if cache is not None and manifest_changed:
            texts = cache.write(scan, slots, transient, summaries_changed, reuse)
        for f in scan.files:
            f.raw = None  # the bytes were only kept for summarizing
        self.stats = stats
        kept = [(f, s) for f, s in zip(scan.files, slots) if s is not None]
        built = {
            fa.key: fa.build(root, [f.path for f, _ in kept], [s[fa.key] for _, s in kept],
                             [f.digest for f, _ in kept])
            for fa in build
        }
        # the built object is stored only when every summary came from the cache: a run that summarized
        # files (cold, or after an edit) has a new fingerprint that the next edit changes again, so its
        # built object would be written (0.36 s CPU on Megatron-Bridge's 1,713 files) and never read; a
        # run over an unchanged project (results missing: other rules, options, a cleared results
        # cache) builds it once from the summaries, and the runs after it read it
        if cache is not None and not transient and not pending:  # a transient failure is retried next time
            for fa in build:
                if fa.built_parts:
                    cache.write_built(fa, scan.fingerprint, built[fa.key], stats["failed"] - scan.stats["failed"],
                                      texts.get(fa.key))
        return built


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
                   on_tree: Callable[[SourceFile, ast.Module], None] | None = None,
                   module: str | None = None) -> dict[str, Any] | None | bool:
    """Decode and parse ``raw`` once and return ``{facts.key: summary}``; ``None`` when the file
    cannot be decoded or parsed; ``False`` when that takes longer than the per-file time budget or
    runs out of stack or memory (a failure that may not happen again: not cached). ``on_tree``:
    called with the decoded source and the tree once every summary is made, outside the summaries'
    time budget (it keeps its own and must not raise). ``module``: the file's dotted module name,
    given to each kind's ``summarize`` (see :meth:`~hp_invariants.api.ProjectFacts.summarize`)."""
    try:
        with time_budget(DEFAULT_TIMEOUT):
            source = SourceFile.from_bytes(path, raw)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(source.text, filename=path)
            summaries = {f.key: f.summarize(tree, path, module) for f in facts}
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
