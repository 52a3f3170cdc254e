"""The on-disk cache (issues #12 and #25): one store (a SQLite database per cache folder) holding plain
data that cannot run code, checked row by row, written in transactions, in a documented place; the
per-file results cache and its invalidation across files; the bounded walk."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fixturelib import built_rows, cache_db, set_built_head, set_built_rows, space_seed, stored_counts
from hp_invariants import engine
from hp_invariants import project as project_module
from hp_invariants import store as store_module
from hp_invariants.cli import main
from hp_invariants.config import Overrides, Resolver
from hp_invariants.registry import RULES
from hp_invariants.rules.undefined_method_call.index import ClassIndexFacts

BASE = """\
class Base:
    def step(self):
        return 1
"""

CHILD = """\
from pkg.base import Base


class Child(Base):
    def forward(self):
        return self.step()


def make():
    return Child()
"""


def _tree(root: Path, files: dict[str, str], marker: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if marker:
        (root / "pyproject.toml").write_text("")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _project(tmp_path: Path) -> Path:
    return _tree(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/base.py": BASE, "pkg/child.py": CHILD,
                                     "pkg/other.py": "def helper():\n    return 2\n"})


def _check(root: Path, cache: Path, *extra: str) -> tuple[int, list[dict]]:
    """``check --format json`` in-process with ``cache`` as cache folder."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", "--format", "json", "--cache-dir", str(cache), *extra, str(root)])
    return code, json.loads(out.getvalue())["findings"]


def _check_built(root: Path, cache: Path, *extra: str) -> tuple[int, list[dict]]:
    """:func:`_check` twice, the results cache emptied between: the second run builds the project
    objects from the cached summaries and stores them (a run that summarizes files stores none)."""
    first = _check(root, cache, *extra)
    with contextlib.closing(cache_db(cache)) as conn:
        conn.execute("DELETE FROM results")
    assert stored_counts(cache)["built"] == 0
    second = _check(root, cache, *extra)
    assert second == first
    return second


def _session(cache: Path) -> engine.Session:
    return engine.default_session(Resolver(RULES, Overrides(cache_dir=str(cache))), cache_dir=str(cache))


def _same_length_edit(path: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` (same length) and put the mtime back, as ``cp -p``/``rsync -a`` do."""
    assert len(old) == len(new)
    st = path.stat()
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size


# ---------------------------------------------------------------------- the test suite's own cache
def test_suite_never_uses_the_real_cache():
    folder = os.environ.get("HP_INVARIANTS_CACHE_DIR", "")
    assert folder and not folder.startswith(os.path.join(os.path.expanduser("~"), ".cache"))
    assert store_module.default_cache_dir() == os.path.abspath(folder)


# ---------------------------------------------------------------------- loading never runs code
class _Boom:
    def __reduce__(self):
        return (os.system, (f"touch {_Boom.marker}",))


def test_planted_pickle_cache_runs_nothing_and_is_rebuilt(tmp_path):
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    assert _check(root, cache) == (0, [])
    marker = tmp_path / "pwned"
    _Boom.marker = marker
    payload = pickle.dumps(_Boom())
    store_module.close_all()
    planted = [p for p in cache.iterdir() if p.name.startswith(store_module.DB_NAME)]
    assert planted
    for path in planted:  # the database (and SQLite's files) replaced by a pickle that would run a command
        path.write_bytes(payload)
    for name in (f"class-index-{'0' * 20}.pickle", f"project-{'0' * 20}.json"):  # the old formats' names
        (cache / name).write_bytes(payload)
    _same_length_edit(root / "pkg" / "base.py", "def step", "def stop")
    code, findings = _check(root, cache)
    assert not marker.exists()
    assert code == 1 and [f["message"].split(":")[0] for f in findings] == ["'Child' object has no attribute 'step'"]
    counts = stored_counts(cache)  # rebuilt: a database of ours again, holding the facts and the results
    assert counts["summaries"] == 4 and counts["built"] == 0 and counts["results"] == 4  # built: see below
    with contextlib.closing(cache_db(cache)) as conn:
        conn.execute("DELETE FROM results")
    assert _check(root, cache) == (code, findings)
    assert stored_counts(cache)["built"] == 2


def test_crafted_rows_are_ignored(tmp_path):
    """Rows of the right space, with valid checksums, holding data of the wrong shapes: each is read as
    missing (the store checks every value against its declared type)."""
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    assert _check_built(root, cache) == (0, [])
    with contextlib.closing(cache_db(cache)) as conn:
        def rewrite(table: str, make) -> None:  # each row as make(row, its space's checksum seed) gives it
            for row in conn.execute(f"SELECT * FROM {table}").fetchall():
                new = make(row, space_seed(conn, row[0]))
                conn.execute(f"INSERT OR REPLACE INTO {table} VALUES ({', '.join('?' * len(new))})", new)

        import zlib

        def summary(row, seed):  # right digest and module, wrong shapes inside
            space, rel, digest, module, _data, _crc = row
            data = json.dumps({"class-index": [1, [2], {"x": 3}], "shard-gates": "x"})
            return space, rel, digest, module, data, zlib.crc32(b"%s\0%s%s\0%s" % (rel, digest, module.encode(),
                                                                                   data.encode()), seed)

        def results(row, seed):  # entries that claim to be current but hold garbage
            space, rel, _data, _crc = row
            data = json.dumps(["0" * 32, {"class-index": ["0" * 32, False, None, [[["__init__", 1]], "0"]]},
                               [["E9503", "x", "not a line"]], []])
            return space, rel, data, zlib.crc32(b"%s\0%s" % (rel, data.encode()), seed)

        def manifest(row, seed):
            space, written, data, _crc = row
            data = json.dumps({rel: ["a", 1] for rel in json.loads(data)})
            return space, written, data, store_module._crc(f"{written}\0{data}", seed)

        rewrite("summaries", summary)
        rewrite("results", results)
        rewrite("manifests", manifest)
    set_built_head(cache, "class-index", lambda head: [{"paths": [3], "functions": {"x": 4}}, head[1]])
    set_built_rows(cache, "shard-gates", "functions", {key: '{"x": 4}' for key in built_rows(cache, "shard-gates",
                                                                                           "functions")})
    _same_length_edit(root / "pkg" / "base.py", "def step", "def stop")
    code, findings = _check(root, cache)
    assert code == 1 and len(findings) == 1 and "'step'" in findings[0]["message"]


def test_summaries_round_trip_and_malformed_ones_are_rejected():
    import ast

    facts = ClassIndexFacts()
    summary = facts.summarize(ast.parse(CHILD), "/p/pkg/child.py")
    stored = store_module.codec(facts.summary_type)
    encoded = json.loads(stored.dumps(summary))
    assert stored.decode(encoded) == summary and type(stored.decode(encoded)) is type(summary)
    for bad in (None, "x", [], encoded[:-1], [1, *encoded[1:]], [*encoded[:4], [[1]], *encoded[5:]],
                [*encoded[:2], {"a": 1}, *encoded[3:]], [*encoded[:5], "abc", *encoded[6:]]):
        with pytest.raises(store_module.Malformed):
            stored.decode(bad)


# ---------------------------------------------------------------------- validation by content
def test_same_length_edit_with_preserved_mtime_is_seen(tmp_path, monkeypatch):
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    assert _check(root, cache) == (0, [])
    # trust every unchanged stat key, however recent: only the ctime can reveal the edit
    monkeypatch.setattr(project_module, "RACY_WINDOW_NS", -10**18)
    _same_length_edit(root / "pkg" / "base.py", "def step", "def stop")
    code, findings = _check(root, cache)
    assert code == 1 and len(findings) == 1
    _same_length_edit(root / "pkg" / "base.py", "def stop", "def step")
    assert _check(root, cache) == (0, [])


def test_copy_with_preserved_times_is_seen(tmp_path):
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    assert _check(root, cache) == (0, [])
    other = tmp_path / "base_edited.py"
    other.write_text(BASE.replace("def step", "def stop"))
    st = (root / "pkg" / "base.py").stat()
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns))
    subprocess.run(["cp", "-p", str(other), str(root / "pkg" / "base.py")], check=True)
    code, findings = _check(root, cache)
    assert code == 1 and len(findings) == 1


def test_stat_trusted_files_are_not_read(tmp_path, monkeypatch):
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    project = project_module.Project(cache_dir=str(cache))
    project.data_for_root(ClassIndexFacts(), root)
    monkeypatch.setattr(project_module, "RACY_WINDOW_NS", -10**18)
    again = project_module.Project(cache_dir=str(cache))
    again.data_for_root(ClassIndexFacts(), root)
    assert again.stats["hashed"] == 0 and again.stats["parsed"] == 0


def test_fingerprint_of_one_kind_reuses_the_walk_of_all_kinds(tmp_path, monkeypatch):
    """A file's results record one fingerprint per kind of facts; the walk behind it does not depend on
    the kinds, so asking for one kind after a build of two must neither walk nor read any file again
    (it used to walk and hash the whole project once per kind, against a manifest that did not exist)."""
    from hp_invariants.rules.shard_gate_facts import ShardGateFacts

    root = _project(tmp_path)
    both = [ClassIndexFacts(), ShardGateFacts()]
    project = project_module.Project(cache_dir=str(tmp_path / "cache"))
    project.prepare_root(root, both)
    child = str(root / "pkg" / "child.py")
    # what each set of kinds' fingerprint is (the class index's kind adds a digest of the root's
    # declaring files, here its pyproject.toml), from another Project: it walks and reads on its own
    fresh = project_module.Project(cache_dir=str(tmp_path / "cache"))
    expected = {n: fresh.fingerprint(child, kinds) for n, kinds in (("both", both), ("index", both[:1]),
                                                                    ("gates", both[1:]))}
    assert len(set(expected.values())) == 3
    assert project.fingerprint(str(root / "pkg" / "base.py"), both) == expected["both"]
    reads: list[str] = []
    real_read = project_module.read_source_bytes
    monkeypatch.setattr(project_module, "read_source_bytes", lambda path, limit: reads.append(path) or real_read(path, limit))
    assert project.fingerprint(child, both[:1]) == expected["index"]
    assert project.fingerprint(child, both[1:]) == expected["gates"]
    assert reads == []
    # a fresh process (new Project) checking against the stored results: one walk, stat-trusted files not read
    monkeypatch.setattr(project_module, "RACY_WINDOW_NS", -10**18)
    again = project_module.Project(cache_dir=str(tmp_path / "cache"))
    assert again.fingerprint(child, both) == expected["both"]
    assert again.fingerprint(child, both[1:]) == expected["gates"]
    assert reads == []


def test_recheck_of_unchanged_files_walks_the_project_once(tmp_path, monkeypatch):
    """``check`` with every file's results cached: the project is walked once and no file is re-hashed."""
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    assert _check(root, cache)[0] == 0
    monkeypatch.setattr(project_module, "RACY_WINDOW_NS", -10**18)
    walks: list[str] = []
    real_entries = project_module.project_entries
    monkeypatch.setattr(project_module, "project_entries", lambda root, *a, **k: walks.append(root) or real_entries(root, *a, **k))
    digests: list[int] = []
    real_digest = project_module.content_digest
    monkeypatch.setattr(project_module, "content_digest", lambda raw: digests.append(1) or real_digest(raw))
    assert _check(root, cache)[0] == 0
    assert walks == [str(root)]
    assert digests == []


def test_gc_paused_restores_the_collector():
    import gc

    assert gc.isenabled()
    with project_module.gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with project_module.gc_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), project_module.gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


# ---------------------------------------------------------------------- location, clear, .gitignore
def test_cache_dir_and_clear(tmp_path, capsys, monkeypatch):
    root = _project(tmp_path)
    monkeypatch.chdir(root)
    env_dir = tmp_path / "env-cache"
    monkeypatch.setenv("HP_INVARIANTS_CACHE_DIR", str(env_dir))
    assert main(["cache", "dir"]) == 0
    assert capsys.readouterr().out.strip() == str(env_dir)
    assert main(["cache", "dir", "--cache-dir", "here"]) == 0
    assert capsys.readouterr().out.strip() == str(root / "here")
    (root / "pyproject.toml").write_text('[tool.hp-invariants]\ncache-dir = ".hp-cache"\n')
    assert main(["cache", "dir"]) == 0
    assert capsys.readouterr().out.strip() == str(root / ".hp-cache")
    assert main(["check", str(root)]) == 0
    capsys.readouterr()
    folder = root / ".hp-cache"
    assert (folder / store_module.DB_NAME).exists()
    with contextlib.closing(cache_db(folder)) as conn:
        conn.execute("DELETE FROM results")  # so that the next check builds from the summaries and stores it
    assert main(["check", str(root)]) == 0
    capsys.readouterr()
    assert built_rows(folder, "shard-gates", "files")  # the built objects, one row per entry
    engine.run_check(_session(folder), [str(root)])  # the results cache (the CLI wraps E9503: see below)
    assert stored_counts(folder)["results"] == 4
    engine.run_check(_session(folder), [str(root)])  # a connection left open: its -wal/-shm files stay
    (folder / "keep.txt").write_text("not ours")
    (folder / "my.sqlite3").write_text("not ours either")
    for old in ("project-0123456789abcdef0123.pickle", "results-0123456789abcdef0123.json"):
        (folder / old).write_bytes(b"an earlier version's format: removed, never read")
    assert main(["cache", "clear"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt", "my.sqlite3"]  # only our files go
    (folder / "my.sqlite3").unlink()
    (folder / "keep.txt").unlink()
    assert main(["cache", "clear"]) == 0
    assert not folder.exists()


def test_cache_actions_take_the_folder_option_anywhere(tmp_path, capsys):
    # a new user's find: 'cache clear --cache-dir X .' was an error (the action and the path were one
    # argparse match), and 'cache clear --help' printed the parent's help
    root = _project(tmp_path)
    for n, argv in enumerate((["cache", "{a}", "--cache-dir", "{d}", "{r}"], ["cache", "--cache-dir", "{d}", "{a}", "{r}"],
                              ["cache", "{a}", "{r}", "--cache-dir", "{d}"])):
        folder = tmp_path / f"c{n}"
        assert _check(root, folder) == (0, [])
        fill = {"d": str(folder), "r": str(root)}
        assert main([part.format(a="dir", **fill) for part in argv]) == 0
        assert capsys.readouterr().out.strip() == str(folder)
        assert main([part.format(a="clear", **fill) for part in argv]) == 0
        assert not folder.exists() and "removed" in capsys.readouterr().err
    assert main(["cache", "clear", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: hp-invariants cache clear")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_cache_inside_a_repository_ignores_itself(tmp_path):
    root = _project(tmp_path)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert _check(root, root / ".hp-cache") == (0, [])
    assert (root / ".hp-cache" / ".gitignore").read_text().splitlines()[-1] == "*"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, check=True,
                            capture_output=True, text=True).stdout
    assert ".hp-cache" not in status and "pkg/base.py" in status


def test_the_wal_file_is_kept_small_after_a_checkpoint(tmp_path):
    """A new user's find: after every run the -wal file stayed as large as the largest transaction (a
    cold run's summaries: the database's size again, 17 MB beside 17 MB). The store's connections set
    SQLite's journal_size_limit, so a checkpoint truncates it."""
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    _check(root, cache)
    store_module.close_all()  # no snapshot of the run left open: a checkpoint can finish
    conn = store_module.database(str(cache))._connection(create=True)
    assert conn.execute("PRAGMA journal_size_limit").fetchone()[0] == store_module.WAL_SIZE_LIMIT
    conn.execute("CREATE TABLE bulk (data BLOB)")  # a transaction far over the limit, then a checkpoint
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO bulk VALUES (?)", [(os.urandom(4096),) for _ in range(2 * store_module.WAL_SIZE_LIMIT // 4096)])
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    conn.execute("CREATE TABLE tiny (x)")  # the next write starts the log over: truncated to the limit
    assert os.path.getsize(cache / (store_module.DB_NAME + "-wal")) <= store_module.WAL_SIZE_LIMIT
    store_module.close_all()


def test_write_is_atomic_and_unwritable_folder_only_costs_speed(tmp_path):
    root = _project(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert _check(root, blocker / "cache") == (0, [])  # cannot create the folder: no cache, same answer
    cache = tmp_path / "cache"
    _check(root, cache)
    assert [p.name for p in cache.iterdir() if p.name.startswith(".tmp")] == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_read_only_cache_folder_is_read_and_only_costs_speed(tmp_path):
    """A cache folder the run cannot write (a shared, read-only cache; a full disk): what is there is
    still read, nothing is written, nothing is raised, and the answers are those of --no-cache."""
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    _same_length_edit(root / "pkg" / "base.py", "def step", "def stop")
    expected = _check(root, cache, "--no-cache")
    assert _check(root, cache) == expected
    store_module.close_all()  # the database holds everything; no -wal/-shm beside it
    before = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    os.chmod(cache / store_module.DB_NAME, 0o444)
    os.chmod(cache, 0o555)
    try:
        _same_length_edit(root / "pkg" / "other.py", "return 2", "return 3")  # something to write
        assert _check(root, cache) == expected
        assert _check(root, cache) == expected
        session = _session(cache)
        engine.run_check(session, [str(root)])
        if os.geteuid() != 0:  # root writes anyway
            assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == before
            assert session.results.stats["hits"] == 3  # the results of the three unchanged files were read
    finally:
        store_module.close_all()
        os.chmod(cache, 0o755)
        os.chmod(cache / store_module.DB_NAME, 0o644)


# ---------------------------------------------------------------------- the per-file results cache
def test_results_cache_base_edit_in_another_file(tmp_path):
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    child = str(root / "pkg" / "child.py")

    def run():
        session = _session(cache)
        result = engine.run_check(session, [str(root)])
        return [f.path for f in result.findings], session.results.stats

    assert run() == ([], {"hits": 0, "misses": 4})
    assert run() == ([], {"hits": 4, "misses": 0})
    # the base class loses the method: the subclass's file is re-checked and the finding appears
    (root / "pkg" / "base.py").write_text(BASE.replace("def step", "def stop"))
    findings, stats = run()
    assert findings == [child] and stats == {"hits": 2, "misses": 2}  # base.py (bytes) and child.py (deps)
    assert run() == ([child], {"hits": 4, "misses": 0})
    # an unrelated edit: every other file's results are still valid
    (root / "pkg" / "other.py").write_text("def helper():\n    return 3\n")
    assert run() == ([child], {"hits": 3, "misses": 1})
    # the method comes back: the finding disappears
    (root / "pkg" / "base.py").write_text(BASE)
    findings, stats = run()
    assert findings == [] and stats == {"hits": 2, "misses": 2}


def test_results_cache_sees_a_new_subclass_that_defines_the_method(tmp_path):
    root = _tree(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/mixin.py": """\
        class LoaderMixin:
            def load(self):
                return self.read_all()
        """})
    cache = tmp_path / "cache"
    code, findings = _check(root, cache)
    assert code == 0  # no subclass at all: combined outside the project
    (root / "pkg" / "impl.py").write_text(textwrap.dedent("""\
        from pkg.mixin import LoaderMixin


        class Impl(LoaderMixin):
            pass


        x = Impl()
        """))
    code, findings = _check(root, cache)
    assert code == 1 and [f["path"] for f in findings] == [str(root / "pkg" / "mixin.py")]


def test_results_cache_keys_on_settings(tmp_path):
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    (root / "pkg" / "base.py").write_text(BASE.replace("def step", "def stop"))
    assert _check(root, cache)[0] == 1
    assert _check(root, cache, "--ignore", "E9503") == (0, [])
    assert _check(root, cache)[0] == 1


def test_fix_never_reuses_cached_results(tmp_path):
    work = tmp_path / "proj"
    _tree(work, {"m.py": """\
        import torch


        def f(p, t):
            with torch.no_grad():
                p._local_tensor = t.narrow(0, 0, 1)
        """})
    cache = tmp_path / "cache"
    code, findings = _check(work, cache)
    assert code == 1 and findings
    assert main(["fix", "--cache-dir", str(cache), str(work)]) == 0
    assert _check(work, cache) == (0, [])


# ---------------------------------------------------------------------- a cold path that scales
def test_index_honours_the_check_excludes(tmp_path):
    root = _project(tmp_path)
    (root / "pyproject.toml").write_text('[tool.hp-invariants]\nextend-exclude = ["vendored"]\n')
    _tree(root, {"vendored/big.py": "class Vendored:\n    pass\n"}, marker=False)
    session = _session(tmp_path / "cache")
    engine.run_check(session, [str(root)])
    index = session.project.data(ClassIndexFacts(), str(root / "pkg" / "base.py"))
    assert not any("vendored" in p for p in index.paths)
    assert any(p.endswith("base.py") for p in index.paths)
    # with the default excludes only, the walk itself leaves out what they match (below the root)
    plain = _tree(tmp_path / "build" / "proj", {"pkg/__init__.py": "", "pkg/a.py": "class A:\n    pass\n",
                                                "pkg/build/gen.py": "class G:\n    pass\n",
                                                "node_modules/x.py": "class X:\n    pass\n"})
    session = _session(tmp_path / "cache2")
    engine.run_check(session, [str(plain)])
    index = session.project.data(ClassIndexFacts(), str(plain / "pkg" / "a.py"))
    assert sorted(os.path.relpath(p, plain) for p in index.paths) == ["pkg/__init__.py", "pkg/a.py"]


def test_loose_script_does_not_index_the_tree_below(tmp_path, capsys):
    top = _tree(tmp_path / "scratch", {"script.py": "class S:\n    def f(self):\n        return self.g()\n\n\nS()\n",
                                       "helpers/__init__.py": "", "helpers/h.py": "class H:\n    pass\n",
                                       "data/run1/gen.py": "class Gen:\n    pass\n",
                                       "data/run2/gen.py": "class Gen2:\n    pass\n"}, marker=False)
    project = project_module.Project(use_cache=False)
    index = project.data(ClassIndexFacts(), str(top / "script.py"))
    assert sorted(os.path.relpath(p, top) for p in index.paths) == ["helpers/__init__.py", "helpers/h.py", "script.py"]
    assert main(["check", "--no-cache", str(top / "script.py")]) == 1
    err = capsys.readouterr().err
    assert "note:" in err and "were not indexed" in err and "add a pyproject.toml" in err


def test_index_is_capped_with_a_note(tmp_path, monkeypatch):
    root = _tree(tmp_path / "proj", {f"m{i}.py": f"class C{i}:\n    pass\n" for i in range(5)})
    monkeypatch.setattr(project_module, "MAX_PROJECT_FILES", 3)
    project = project_module.Project(use_cache=False)
    index = project.data_for_root(ClassIndexFacts(), root)
    assert len(index.paths) == 3
    assert any("limited to 3 files; 2 more" in note for note in project.notes)


def test_module_names_from_the_walk_match_module_name(tmp_path):
    from hp_invariants.rules.undefined_method_call.index import module_name

    files = {"a/__init__.py": "", "a/b/__init__.py": "", "a/b/c.py": "", "a/x/y.py": "", "a/x/p/__init__.py": "",
             "a/x/p/q.py": "", "a/x/p/r/s.py": "", "top.py": "", "__init__.py": ""}
    outer = tmp_path / "outer"  # the root itself a package inside a package: its names start above it
    (outer / "pkg").mkdir(parents=True)
    (outer / "__init__.py").write_text("")
    (outer / "pkg" / "__init__.py").write_text("")
    for root in (_tree(tmp_path / "proj", files), _tree(outer / "pkg" / "proj", files)):
        rels = [e[1] for e in project_module.project_entries(str(root))]
        names = project_module.module_names(root, rels)
        assert names == {rel: module_name(root / rel)[0] for rel in rels}
        assert names["a/x/p/q.py"] == "p.q" and names["a/x/y.py"] == "y"
    assert names["a/b/c.py"] == "outer.pkg.proj.a.b.c" and names["__init__.py"] == "outer.pkg.proj"


def test_the_build_names_each_summary_by_the_walk_without_a_stat_per_folder(tmp_path, monkeypatch):
    """The project walk names every file's module (``module_names``); the build hands that name to the
    summarizers, so E9503's summary of each file carries it and no folder is looked at again
    (``module_name`` stats every folder up the package chain: 1% of a cold check of Megatron-Bridge)."""
    from hp_invariants.rules.undefined_method_call import index as index_module

    root = _tree(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/sub/__init__.py": "class A:\n    pass\n",
                                     "pkg/sub/mod.py": "class B:\n    pass\n", "tool.py": "x = 1\n"})
    expected = {str(root / rel): index_module.module_name(root / rel)
                for rel in ("pkg/__init__.py", "pkg/sub/__init__.py", "pkg/sub/mod.py", "tool.py")}

    def no_stat(path):
        raise AssertionError(f"module_name({path}) called during the build")

    monkeypatch.setattr(index_module, "module_name", no_stat)
    index = index_module.ClassIndex.for_root(root, use_cache=False)
    got = {path: (summary.module, summary.is_package) for path, summary in zip(index.paths, index.files)}
    assert got == expected
    assert got[str(root / "pkg/sub/__init__.py")] == ("pkg.sub", True)
    assert got[str(root / "pkg/sub/mod.py")] == ("pkg.sub.mod", False)


def test_wrapped_or_plugin_rules_are_never_served_from_the_results_cache(tmp_path):
    from hp_invariants.history.proxy import RuleProxy

    root = _project(tmp_path)
    (root / "pkg" / "base.py").write_text(BASE.replace("def step", "def stop"))
    cache = tmp_path / "cache"
    engine.run_check(_session(cache), [str(root)])  # fills the results cache
    calls = []

    def transform(findings, ctx):
        calls.append(ctx.path)
        return findings

    session = _session(cache)
    session.map_settings(lambda base: __import__("dataclasses").replace(
        base, rules=tuple(RuleProxy(r, transform) for r in base.rules)))
    result = engine.run_check(session, [str(root)])
    assert len(result.findings) == 1 and calls  # the wrapped rules ran: nothing came from the cache
    assert session.results.stats == {"hits": 0, "misses": 0}


def test_shard_gate_summaries_round_trip_and_reject_malformed_data():
    """E9502's summary (declared FileFacts) decodes to the very summary, and anything else raises."""
    import ast

    from hp_invariants.rules.shard_gate_facts import ShardGateFacts

    facts = ShardGateFacts()
    tree = ast.parse(textwrap.dedent("""
        class T:
            def __init__(self, ws):
                self.need = ws > 1 and not self.cp
                self.other = ws

            @property
            def sharded(self):
                return self.dp_shard > 1 or self.mesh["dp"].size() > 1

            @abc.abstractmethod
            def step(self):
                ...

        def apply(m):
            fully_shard(m)
            m.reset_sharded_param()
    """))
    summary = facts.summarize(tree, "/p/t.py")
    stored = store_module.codec(facts.summary_type)
    encoded = json.loads(stored.dumps(summary))
    assert stored.decode(encoded) == summary
    functions, values, other = encoded
    for bad in (None, "x", [], encoded[:2], [{"a": 1}, values, other], [functions, values, "other"],
                [[["f", 4, None, [], False]], values, other], [[["f", False, None, "calls", False]], values, other],
                [[["f", False, [["?", {}]], [], False]], values, other], [[[1, False, None, [], False]], values, other],
                [functions, [["need", {"n": 1}]], other], [functions, [["need"]], other],
                [functions, [["need", ["cmp", ">", ["n", "ws"], None]]], other],  # an operand of another type
                [functions, [["need", ["cmp", ">", ["n", "ws"], 1.5]]], other], [functions, [["need", [True]]], other]):
        with pytest.raises(store_module.Malformed):
            stored.decode(bad)


def test_cli_freezes_the_built_facts_library_hosts_do_not(tmp_path):
    """The CLI's short-lived process moves what is alive after the project-facts build out of the
    collector's passes (gc.freeze); a Project made for a library host (the pylint plugin, a Session
    of your own) never touches the collector's generations."""
    import gc

    from hp_invariants.rules.shard_gate_facts import ShardGateFacts

    root = _project(tmp_path)
    gc.unfreeze()
    project = engine.default_project(Resolver(RULES), cache_dir=str(tmp_path / "c1"))
    project.prepare_root(root, [ClassIndexFacts(), ShardGateFacts()])
    assert project.stats["parsed"] > 0 and gc.get_freeze_count() == 0
    assert _check(root, tmp_path / "c2")[0] == 0
    assert gc.get_freeze_count() > 0  # the conftest fixture unfreezes after the test


def test_summaries_leave_no_reference_cycles():
    """The project-facts build runs with the cyclic collector paused (gc_paused), so a summarizer that
    leaves a reference cycle piles up memory for the whole build: a recursive helper closure in
    E9503's class walk kept every class's methods alive (a cold check of torch/distributed peaked at
    723 MiB instead of ~300). Every fixture and example must summarize without leaving garbage."""
    import gc

    from hp_invariants.registry import RULES

    facts = [r.project_facts for r in RULES if r.project_facts is not None]
    repo = Path(__file__).resolve().parents[1]
    files = sorted((repo / "tests" / "fixtures").rglob("*.py")) + sorted((repo / "examples").rglob("*.py"))
    assert len(files) > 50
    gc.collect()
    gc.disable()
    try:
        leaking = {}
        for path in files:
            project_module.summarize_file(str(path), path.read_bytes(), facts)
            found = gc.collect()
            if found:
                leaking[path.name] = found
    finally:
        gc.enable()
    assert leaking == {}


@pytest.mark.parametrize("other_before, other_after, flagged_after", [
    # a class constructed nowhere is read as a mixin; once another file constructs it, it is flagged
    ("x = 1\n", "from a import A\n\nA().f()\n", True),
    # a foreign store of the name, on a receiver that may be an A, in another file makes it defined
    ("from a import A\n\nA().f()\n", "from a import A\n\nA().f()\n\n\ndef g(obj):\n    obj.missing_m = print\n", False),
])
def test_results_follow_uses_and_stores_in_other_files(tmp_path, other_before, other_after, flagged_after):
    # E9503's answers about who constructs a class and who stores a name on it come from other
    # files: the cached results of a.py must not outlive a change to them
    root = _tree(tmp_path / "proj", {"a.py": "class A:\n    def f(self):\n        return self.missing_m()\n",
                                     "b.py": other_before})
    cache = tmp_path / "cache"
    before = _check(root, cache)[1]
    (root / "b.py").write_text(other_after)
    after = _check(root, cache)[1]
    assert after == _check(root, tmp_path / "fresh")[1]  # as a run without any cache says
    assert bool(after) is flagged_after and bool(before) is not flagged_after
    again = _session(cache)  # and the replayed record is reused when nothing changes
    engine.run_check(again, [str(root)])
    assert again.results.stats["hits"] == 2


def test_results_follow_a_helper_that_becomes_must_run_in_another_file(tmp_path):
    # E9502's prefilter lets a file through when it calls one of the project's must-run helpers; a
    # file it skipped must be checked again once a helper in another file starts sharding
    fixture = Path(__file__).parent / "fixtures" / "shard-gated-reset" / "checker" / "must_run_helper_project"
    root = tmp_path / "proj"
    shutil.copytree(fixture, root)
    (root / "expected.txt").unlink()
    helpers = root / "wraplib" / "fsdp.py"
    original = helpers.read_text()
    helpers.write_text("def apply_fsdp(model, mesh, mp_policy):\n    pass\n\n\n"
                       "def parallelize_model(model, mesh, mp_policy):\n    return model\n")
    cache = tmp_path / "cache"
    assert _check(root, cache) == (0, [])
    helpers.write_text(original)
    code, findings = _check(root, cache)
    assert (code, findings) == _check(root, tmp_path / "fresh")  # as a run without any cache says
    assert code == 1 and {f["id"] for f in findings} == {"E9502"} and len(findings) == 2
    helpers.write_text(original + "\n\ndef unrelated():\n    return 1\n")  # the helper names stay the same
    session = _session(cache)
    engine.run_check(session, [str(root)])
    # __init__.py, which the prefilter skipped, is reused (the helper names are the same); fsdp.py
    # changed; recipe.py, which E9502 checked, depends on every E9502 fact and is checked again
    assert session.results.stats == {"hits": 1, "misses": 2}


@pytest.mark.parametrize("extra", [(), ("--ignore", "E9503")])
def test_results_follow_whether_the_module_can_be_imported(tmp_path, extra):
    # every rule is silent in a module whose import of the project always fails (engine.never_imported,
    # asked of E9503's class index even when E9503 is off): the cached results of that module depend on
    # the module it imports from, so adding or removing the name there re-checks it
    view = "def reset(param, t):\n    param._local_tensor = t.narrow(0, 0, 1)\n"
    root = _tree(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/base.py": "def mesh_of(m):\n    return m\n",
                                     "pkg/shard.py": "from pkg.base import mesh_for\n\n\n" + view})
    cache = tmp_path / "cache"
    assert _check(root, cache, *extra) == (0, [])
    assert _check(root, cache, *extra) == (0, [])  # served from the cache
    (root / "pkg" / "base.py").write_text("def mesh_of(m):\n    return m\n\n\nmesh_for = mesh_of\n")
    code, findings = _check(root, cache, *extra)
    assert (code, findings) == _check(root, tmp_path / "fresh", *extra)  # as a run without any cache says
    assert code == 1 and [(f["id"], f["line"]) for f in findings] == [("E9501", 5)]
    (root / "pkg" / "base.py").write_text("def mesh_of(m):\n    return m\n")
    assert _check(root, cache, *extra) == (0, [])


def test_results_of_a_never_imported_module_follow_a_built_extension(tmp_path):
    # a module whose import of the project fails is silent; building the missing compiled extension in
    # place (no .py file changes, so the project's fingerprint does not) makes it importable: its
    # results are not cached, so the finding appears at once (found by a new-user try)
    gated = "from pkg._C import fused_op\n\n\ndef shard(model, ws):\n    if ws > 1:\n        fully_shard(model)\n"
    root = _tree(tmp_path / "proj", {"pkg/__init__.py": "", "pkg/state.py": gated})
    cache = tmp_path / "cache"
    assert _check(root, cache) == (0, [])
    assert _check(root, cache) == (0, [])
    (root / "pkg" / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    code, findings = _check(root, cache)
    assert code == 1 and [f["id"] for f in findings] == ["E9502"]


# ---------------------------------------------------------------------- built objects, entry by entry
def test_table_views_answer_as_the_built_object(tmp_path):
    """A built object's table parts come back as views that read, check and decode each entry when
    asked for: the same answers as the dicts and lists they were built from, in the same order."""
    from hp_invariants.api import KeyedTable, ListTable, ProjectFacts

    class Facts(ProjectFacts):
        key = "demo"
        summary_type = tuple[str, ...]
        built_parts = {"names": list[str], "by_name": KeyedTable[tuple[int, str]], "rows": ListTable[frozenset[str]]}

        def summarize(self, tree, path, module=None):
            return ()

        def build(self, root, paths, summaries, digests):
            return {"names": ["b", "a"], "by_name": {"zeta": (1, "z"), "\u00e9t\u00e9": (2, "\u4e2d"), "a": (3, "")},
                    "rows": [frozenset({"x", "y"}), frozenset()]}

        def persist(self, data):
            return data

        def restore(self, parts, rebuild):
            return parts

    facts = Facts()
    root = _tree(tmp_path / "proj", {"m.py": "x = 1\n"})
    cache = store_module.ProjectCache(str(tmp_path / "cache"), root, [facts])
    built = facts.build(root, [], [], [])
    cache.write_built(facts, "fp", built, 0)
    assert cache.read_built(facts, "another fingerprint", lambda: built) is None
    read, failed = cache.read_built(facts, "fp", lambda: built)
    assert failed == 0 and read["names"] == ["b", "a"]
    by_name, rows = read["by_name"], read["rows"]
    assert isinstance(by_name, KeyedTable) and isinstance(rows, ListTable)
    assert by_name.get("zeta") == (1, "z") and by_name["\u00e9t\u00e9"] == (2, "\u4e2d") and by_name.get("no", 5) == 5
    assert "a" in by_name and "no" not in by_name and 3 not in by_name and by_name.get(("a",)) is None
    assert len(by_name) == 3 and list(by_name) == ["zeta", "\u00e9t\u00e9", "a"]
    assert by_name.items() == list(built["by_name"].items())
    with pytest.raises(KeyError):
        by_name["no"]
    assert len(rows) == 2 and rows[0] == frozenset({"x", "y"}) and rows[-1] == frozenset() and list(rows) == built["rows"]
    with pytest.raises(IndexError):
        rows[2]
    # a key that is not valid Unicode or holds NUL, a part not of its type: nothing is stored
    for bad in ({**built, "by_name": {"\ud800": (1, "")}}, {**built, "by_name": {"a\0b": (1, "")}},
                {**built, "rows": [{"x"}, 3]}, {**built, "names": "ab"}):
        other = store_module.ProjectCache(str(tmp_path / "cache"), root, [facts])
        other.write_built(facts, "fp2", bad, 0)
        assert other.read_built(facts, "fp2", lambda: bad) is None


def test_a_damaged_entry_or_key_is_answered_from_the_rebuilt_object(tmp_path):
    """An entry whose text changed into other valid data (a fresh helper found one letter of a name
    changed), a key changed into another, or rows gone: the views notice (CRC-32 per entry, a count and
    digest of the keys) and answer from the object rebuilt from the summaries."""
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    kinds = list({id(r.project_facts): r.project_facts for r in RULES if r.project_facts is not None}.values())
    for f in kinds:  # the first build summarizes the files, the second stores the built object
        project_module.Project(cache_dir=str(cache)).data_for_root(f, root)
    first = project_module.Project(cache_dir=str(cache))
    expected = {f.key: f.persist(first.data_for_root(f, root)) for f in kinds}
    uses = built_rows(cache, "class-index", "uses")
    assert "Child" in uses and "Base" not in uses
    with contextlib.closing(cache_db(cache)) as conn:
        conn.execute("UPDATE built_rows SET data = replace(data, 'child', 'chold') WHERE part = 'uses'")
        conn.execute("UPDATE built_rows SET key = 'Chold' WHERE part = 'uses' AND key = 'Child'")
        conn.execute("DELETE FROM built_rows WHERE part = 'functions' AND key = 'helper'")
    again = project_module.Project(cache_dir=str(cache))
    for facts in kinds:
        got = facts.persist(again.data_for_root(facts, root))
        assert {k: v if isinstance(v, (dict, list, str)) else dict(v.items()) if hasattr(v, "items") else list(v)
                for k, v in got.items()} == expected[facts.key], facts.key
    index = again.data_for_root(ClassIndexFacts(), root)
    assert index._uses_by_name.get("Child") == expected["class-index"]["uses"]["Child"]
    assert "Chold" not in index._uses_by_name
    assert again.stats["parsed"] == 0  # rebuilt from the cached summaries


def test_a_damaged_database_reads_as_missing(tmp_path):
    """Damage anywhere in the database (a flipped byte: in SQLite's own structures, a key, a value, a
    checksum) makes what it touches read as missing, never as other facts and never as an error: the
    check equals one without cache. SQLite finds damage to its structures itself; every row carries a
    CRC-32 of its content and of its space for the rest."""
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    _same_length_edit(root / "pkg" / "base.py", "def step", "def stop")
    expected = _check(root, cache, "--no-cache")
    assert expected[0] == 1
    assert _check(root, cache) == expected
    store_module.close_all()
    path = cache / store_module.DB_NAME
    raw = path.read_bytes()
    assert raw.count(b"stop") >= 2  # the summaries and the built objects hold the name
    positions = sorted({*range(0, len(raw), max(1, len(raw) // 97)), *range(0, 100, 7),
                        *(i + d for i in (raw.find(b"stop"), raw.rfind(b"stop"), raw.find(b"Child")) for d in (0, 2))})
    for at in positions:
        damaged = bytearray(raw)
        damaged[at] ^= 0x20 if damaged[at] else 0x41
        path.write_bytes(bytes(damaged))
        for extra in ((), ("--no-cache",)) if at % 5 == 0 else ((),):
            assert _check(root, cache, *extra) == expected, at
        store_module.close_all()
        for suffix in ("-wal", "-shm"):
            (cache / (store_module.DB_NAME + suffix)).unlink(missing_ok=True)
    path.write_bytes(raw)
    # the damage the checksums were added for (a fresh helper's): a name in a stored entry changed into
    # another valid name, so it still decodes; the object built from it would no longer report 'step'
    damaged = raw.replace(b"stop", b"step")
    assert damaged != raw
    path.write_bytes(damaged)
    assert _check(root, cache) == expected
    with contextlib.closing(cache_db(cache)) as conn:
        conn.execute("DELETE FROM results")  # else the files' results are reused: no built object read
    path.write_bytes(damaged)
    assert _check(root, cache) == expected


def test_built_objects_are_cached_for_non_ascii_identifiers(tmp_path):
    """Python identifiers need not be ASCII: the built objects of such a project are still cached
    (their texts were once encoded as ASCII, so the write was silently skipped)."""
    root = _tree(tmp_path / "proj", {"m.py": "class Gr\u00f6\u00dfe:\n    def \u00e9t\u00e9(self):\n        return gr\u00f6\u00dfe()\n"})
    cache = tmp_path / "cache"
    assert _check_built(root, cache) == (0, [])
    assert stored_counts(cache)["built"] == 2
    [stored] = built_rows(cache, "class-index", "files").values()
    assert json.loads(stored)[4][0][0] == "Gr\u00f6\u00dfe"  # the file's one class
    assert _check(root, cache) == _check(root, cache, "--no-cache")


def test_many_roots_share_one_database_and_few_files(tmp_path):
    """Each built object's entries are read when asked for. A run over many project roots once held
    two files open per root and ran out of file descriptors (a fresh helper's find: 80 roots under
    `ulimit -n 100` ended in an internal error); all roots now share the folder's one database."""
    top = tmp_path / "many"
    for n in range(6):
        _tree(top / f"r{n}", {"pkg/__init__.py": "",
                              "pkg/base.py": "class Base:\n    def step(self):\n        return 1\n",
                              "pkg/sub.py": f"from pkg.base import Base\n\n\nclass Sub(Base):\n"
                                            f"    def run(self):\n        return self.step() + self.n{n}()\n\n\n"
                                            f"def make():\n    return Sub()\n"})
    cache = tmp_path / "cache"
    expected = _check(top, cache, "--no-cache")
    assert expected[0] == 1 and len(expected[1]) == 6
    assert _check(top, cache) == expected  # writes the built objects
    with contextlib.closing(cache_db(cache)) as conn:
        conn.execute("DELETE FROM results")  # so that the next check reads every root's built objects
    assert _check(top, cache) == expected
    assert {p.name for p in cache.iterdir() if not p.name.startswith(".")} <= {
        store_module.DB_NAME, store_module.DB_NAME + "-shm", store_module.DB_NAME + "-wal", "CACHEDIR.TAG"}
    if os.path.isdir("/proc/self/fd"):
        open_files = [os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")]
        assert sum(str(cache) in f for f in open_files) <= 3 * (1 + store_module.MAX_SNAPSHOTS)


def test_a_restored_object_answers_as_stored_while_a_newer_build_replaces_it(tmp_path):
    """An object restored from the store reads its entries in a snapshot (an open read transaction):
    a later build of a changed project (this process's or another run's) replaces the stored object,
    and the restored one still answers as it was stored (as a file kept open did). The snapshot closes
    with the last object reading through it."""
    import gc

    root = _project(tmp_path)
    cache = tmp_path / "cache"
    project_module.Project(cache_dir=str(cache)).data_for_root(ClassIndexFacts(), root)  # summarized
    project_module.Project(cache_dir=str(cache)).data_for_root(ClassIndexFacts(), root)  # built from them: stored
    old = project_module.Project(cache_dir=str(cache)).data_for_root(ClassIndexFacts(), root)
    assert not isinstance(old.files, list) and store_module._SNAPSHOTS  # restored: read through a snapshot
    (root / "pkg" / "other.py").write_text("class Made:\n    pass\n\n\nclass Other(Made):\n    pass\n\n\nMade()\n")
    new = project_module.Project(cache_dir=str(cache)).data_for_root(ClassIndexFacts(), root)
    assert "Made" in new._uses_table()
    assert new.paths == old.paths and old._uses_by_name.get("Made") is None and "Made" not in old._uses_by_name
    other = old.file_index(str(root / "pkg" / "other.py"))
    assert [c.qualname for c in old.files[other].classes] == []  # the stored (old) summary
    assert old.used((old.file_index(str(root / "pkg" / "child.py")), "Child"))
    del old, new
    gc.collect()
    assert store_module._SNAPSHOTS == []


# ---------------------------------------------------------------------- concurrent runs
def test_concurrent_runs_and_workers_share_the_store(tmp_path):
    """Runs at the same time on one cache folder (an editor's and a pre-commit's), each with forked
    `-j 2` workers: each writes in transactions, none sees another's half-written state, and every
    run's output equals --no-cache."""
    roots = [_tree(tmp_path / f"p{n}", {"pkg/__init__.py": "", "pkg/base.py": BASE.replace("step", f"step{n % 2}"),
                                        "pkg/child.py": CHILD, **{f"pkg/m{i}.py": f"class M{i}:\n    pass\n"
                                                                  for i in range(40)}}) for n in range(3)]
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    expected = [_check(root, cache, "--no-cache") for root in roots]

    def start(root: Path) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "hp_invariants", "check", "--format", "json", "-j", "2",
                                 "--cache-dir", str(cache), str(root)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)

    for round_ in range(3):  # cold: all write at once; warm with no results: all build from the summaries
        if round_ == 1:      # and write their built objects at once; warm: all read while others write results
            with contextlib.closing(cache_db(cache)) as conn:
                conn.execute("DELETE FROM results")
        runs = [start(root) for root in [*roots, *roots]]
        outputs = [run.communicate(timeout=300) for run in runs]
        for (out, err), want in zip(outputs, [*expected, *expected]):
            assert b"Traceback" not in err, err.decode()
            assert json.loads(out)["findings"] == want[1]
        counts = stored_counts(cache)  # a write that waited past BUSY_TIMEOUT_S is skipped: never more rows
        assert counts["spaces"] <= 6 and counts["built"] <= 6 and counts["results"] <= 3 * 43
    # Under load a write can wait past the busy timeout and be skipped (a cache, not the output): one run
    # per project after the others, its results emptied first, stores what the concurrent ones left out.
    with contextlib.closing(cache_db(cache)) as conn:
        conn.execute("DELETE FROM results")
    for root, want in zip(roots, expected):
        assert _check(root, cache, "-j", "2") == want
    counts = stored_counts(cache)
    assert counts["spaces"] == 6 and counts["built"] == 6 and counts["results"] == 3 * 43


