"""The on-disk caches (issue #12): plain data that cannot run code, content-validated, atomic, in a
documented place; the per-file results cache and its invalidation across files; the bounded walk."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from fixturelib import read_cache_file, write_cache_file
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
    planted = list(cache.glob("*.json"))
    assert planted
    for path in planted:  # every cache file replaced by a pickle that would run a command
        path.write_bytes(payload)
    (cache / f"class-index-{'0' * 20}.pickle").write_bytes(payload)  # the old format's name
    _same_length_edit(root / "pkg" / "base.py", "def step", "def stop")
    code, findings = _check(root, cache)
    assert not marker.exists()
    assert code == 1 and [f["message"].split(":")[0] for f in findings] == ["'Child' object has no attribute 'step'"]
    # rebuilt as JSON
    for path in planted:
        assert read_cache_file(path)["format"] == store_module.CACHE_FORMAT


def test_crafted_json_cache_is_ignored(tmp_path):
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    assert _check(root, cache) == (0, [])
    for path in cache.glob("*.json"):
        data = read_cache_file(path)
        if path.name.endswith(".summaries.json"):  # right tag and root, wrong shapes inside
            data["data"] = {rel: [entry[0], entry[1], {"class-index": [1, [2], {"x": 3}]}]
                            for rel, entry in data["data"].items()}
        elif ".built." in path.name:  # a built project object of the right tag and root, garbage inside
            data["data"]["object"] = {"paths": [3], "functions": {"x": 4}}
        elif path.name.startswith("results-"):  # entries that claim to be current but hold garbage
            for entry in data["data"]["files"].values():
                entry["findings"] = [["E9503", "x", "not a line"]]
                entry["deps"] = {"class-index": {"fp": "0" * 32, "rec": {"q": [["__init__", 1]], "a": "0"}}}
        else:
            data["data"]["entries"] = {rel: ["a", 1] for rel in data["data"]["entries"]}
        write_cache_file(path, data)
    _same_length_edit(root / "pkg" / "base.py", "def step", "def stop")
    code, findings = _check(root, cache)
    assert code == 1 and len(findings) == 1 and "'step'" in findings[0]["message"]


def test_decode_rejects_malformed_summaries():
    facts = ClassIndexFacts()
    import ast

    summary = facts.summarize(ast.parse(CHILD), "/p/pkg/child.py")
    encoded = json.loads(json.dumps(facts.encode(summary)))
    assert facts.decode(encoded) == summary
    for bad in (None, "x", [], encoded[:-1], [1, *encoded[1:]], [*encoded[:4], [[1]], *encoded[5:]],
                [*encoded[:2], {"a": 1}, *encoded[3:]], [*encoded[:5], "abc", *encoded[6:]]):
        with pytest.raises((TypeError, ValueError)):
            facts.decode(bad)


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
    whole = project.fingerprint(str(root / "pkg" / "base.py"), both)
    reads: list[str] = []
    real_read = project_module.read_source_bytes
    monkeypatch.setattr(project_module, "read_source_bytes", lambda path, limit: reads.append(path) or real_read(path, limit))
    assert project.fingerprint(str(root / "pkg" / "child.py"), [both[0]]) == whole
    assert project.fingerprint(str(root / "pkg" / "child.py"), [both[1]]) == whole
    assert reads == []
    # a fresh process (new Project) checking against the stored results: one walk, stat-trusted files not read
    monkeypatch.setattr(project_module, "RACY_WINDOW_NS", -10**18)
    again = project_module.Project(cache_dir=str(tmp_path / "cache"))
    assert again.fingerprint(str(root / "pkg" / "child.py"), both) == whole
    assert again.fingerprint(str(root / "pkg" / "child.py"), [both[1]]) == whole
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
    assert any(folder.glob("project-*.json")) and any(folder.glob("project-*.built.shard-gates.json"))
    engine.run_check(_session(folder), [str(root)])  # the results cache (the CLI wraps E9503: see below)
    assert any(folder.glob("results-*.json"))
    (folder / "keep.txt").write_text("not ours")
    (folder / "project-0123456789abcdef0123.pickle").write_bytes(b"old format: removed, never read")
    assert main(["cache", "clear"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]  # only our files go
    (folder / "keep.txt").unlink()
    assert main(["cache", "clear"]) == 0
    assert not folder.exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_cache_inside_a_repository_ignores_itself(tmp_path):
    root = _project(tmp_path)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    assert _check(root, root / ".hp-cache") == (0, [])
    assert (root / ".hp-cache" / ".gitignore").read_text().splitlines()[-1] == "*"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, check=True,
                            capture_output=True, text=True).stdout
    assert ".hp-cache" not in status and "pkg/base.py" in status


def test_write_is_atomic_and_unwritable_folder_only_costs_speed(tmp_path):
    root = _project(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert _check(root, blocker / "cache") == (0, [])  # cannot create the folder: no cache, same answer
    cache = tmp_path / "cache"
    _check(root, cache)
    assert [p.name for p in cache.iterdir() if p.name.startswith(".tmp")] == []


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
    """E9502's compact cache form decodes to the very summary, and anything else raises."""
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
    encoded = json.loads(json.dumps(facts.encode(summary)))
    assert facts.decode(encoded) == summary
    functions, values, other = encoded
    for bad in (None, "x", [], encoded[:2], [{"a": 1}, values, other], [functions, values, "other"],
                [[["f", 4, None, []]], values, other], [[["f", 0, None, "calls"]], values, other],
                [[["f", 0, [["?"], 1.5], []]], values, other], [[[1, 0, None, []]], values, other],
                [functions, [["need", [[["deep"]]]]], other], [functions, [["need", {"n": 1}]], other]):
        with pytest.raises((TypeError, ValueError)):
            facts.decode(bad)


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


# ---------------------------------------------------------------------- text tables of built objects
def test_text_tables_round_trip_and_reject_bad_descriptions():
    import struct
    import sys
    import zlib

    from hp_invariants.project import StoredTexts, TextReader, TextTable, join_text_tables, split_text_tables

    plain = {"paths": ["a.py"], "named": TextTable(['[1,"x"]', "{}", "[]"], ["f", "g", "h"]),
             "empty": TextTable([]), "listed": TextTable(["[2]", '"y"'])}
    header, index, texts = split_text_tables(plain)
    assert header["paths"] == ["a.py"] and texts == b'[1,"x"]{}[][2]"y"'
    assert header["named"] == {"@texts": 3, "at": 0, "index": 0, "keys": 5}
    assert header["empty"] == {"@texts": 0, "at": 11, "index": 29, "keys": None}
    assert header["listed"] == {"@texts": 2, "at": 11, "index": 29, "keys": None}
    order = "<" if sys.byteorder == "little" else ">"
    assert struct.unpack(f"{order}6I", index[:24]) == (7, 9, 11, *map(zlib.crc32, (b'[1,"x"]', b"{}", b"[]")))
    assert index[24:29] == b"f\0g\0h" and len(index) == 29 + 16
    raw = b"JSON-PART\n" + texts
    back = join_text_tables(header, TextReader(raw=raw), index, 10, len(texts))
    named, listed = back["named"], back["listed"]
    assert isinstance(named, StoredTexts) and named.keyed and not listed.keyed
    assert [json.loads(named.get(k)) for k in named] == [[1, "x"], {}, []] and named.get("zz", 5) == 5
    assert "g" in named and "zz" not in named and len(named) == 3 and len(back["empty"]) == 0
    assert [json.loads(listed[i]) for i in range(len(listed))] == [[2], "y"]
    assert listed.get("x") is None and "x" not in listed and list(listed) == []
    with pytest.raises(TypeError):
        named[0]
    # written on a machine of the other byte order: read with the order its header names
    swapped = bytearray(index)
    for at in [*range(0, 24, 4), *range(29, 45, 4)]:  # the numbers of "named" and "listed", not the keys
        swapped[at:at + 4] = swapped[at:at + 4][::-1]
    other = "big" if sys.byteorder == "little" else "little"
    foreign = join_text_tables(header, TextReader(raw=raw), bytes(swapped), 10, len(texts), other)
    assert foreign["named"].get("h") == b"[]" and foreign["listed"][1] == b'"y"'
    with pytest.raises(ValueError):  # read in the wrong order: offsets out of range
        join_text_tables(header, TextReader(raw=raw), bytes(swapped), 10, len(texts))
    for bad in ({"@texts": 2, "at": 0, "index": 0, "keys": None, "x": 1} | {"index": len(index) - 8},
                {"@texts": 1, "at": 0, "index": "0", "keys": None}, {"@texts": 1, "at": 0, "index": 0, "keys": "3"},
                {"@texts": 1, "at": 16, "index": 0, "keys": None}, {"@texts": 1, "at": -1, "index": 0, "keys": None},
                {"@texts": 1, "index": 0, "keys": None}, {"@texts": 2, "at": 0, "index": 0, "keys": 99},
                {"@texts": 1, "at": 0, "index": -1, "keys": None}, {"@texts": "1", "at": 0, "index": 0, "keys": None},
                {"@texts": 3, "at": 0, "index": 0, "keys": 3}, [1]):
        with pytest.raises((TypeError, ValueError)):
            StoredTexts.from_header(bad, TextReader(raw=raw), index, 10, len(texts))
    # each text is checked when read: a flipped byte or a file cut short raises ValueError
    flipped = join_text_tables(header, TextReader(raw=raw.replace(b'"x"', b'"z"')), index, 10, len(texts))
    assert flipped["named"].get("g") == b"{}"
    with pytest.raises(ValueError):
        flipped["named"].get("f")
    with pytest.raises(ValueError):
        join_text_tables(header, TextReader(raw=raw[:-2]), index, 10, len(texts))["listed"][1]
    unicode = {"t": TextTable(['["gr\u00f6\u00dfe"]', '"\u4e2d"'], ["\u00e9t\u00e9", "x"])}  # identifiers need not be ASCII
    header, index, texts = split_text_tables(unicode)
    back = join_text_tables(header, TextReader(raw=b"H\n" + texts), index, 2, len(texts))["t"]
    assert json.loads(back.get("\u00e9t\u00e9")) == ["gr\u00f6\u00dfe"] and json.loads(back.get("x")) == "\u4e2d"
    with pytest.raises(UnicodeEncodeError):
        split_text_tables({"t": TextTable(['"\ud800"'])})
    with pytest.raises(ValueError):  # keys are joined by NUL
        split_text_tables({"t": TextTable(["1"], ["a\0b"])})


def test_a_truncated_built_object_is_rebuilt(tmp_path):
    from hp_invariants.project import Project

    root = _project(tmp_path)
    cache = tmp_path / "cache"
    assert _check(root, cache) == (0, [])
    built = sorted(cache.glob("*.built.*.json"))
    assert len(built) == 2 and all(b"\n" in path.read_bytes() for path in built)  # JSON part, then the texts
    kinds = list({id(r.project_facts): r.project_facts for r in RULES if r.project_facts is not None}.values())
    first = Project(cache_dir=str(cache))
    expected = {f.key: f.encode_built(first.data_for_root(f, root)) for f in kinds}
    for path in built:
        path.write_bytes(path.read_bytes()[:-3])  # the last texts cut short
    again = Project(cache_dir=str(cache))
    for facts in kinds:
        got = facts.encode_built(again.data_for_root(facts, root))
        assert [vars_of(got[k]) for k in got] == [vars_of(expected[facts.key][k]) for k in got]
    assert again.stats["parsed"] == 0  # rebuilt from the cached summaries
    assert all(Project(cache_dir=str(cache)).data_for_root(f, root) is not None for f in kinds)
    assert [path.read_bytes() for path in built] != [b""] * 2 and all(
        read_cache_file(path)["data"]["object"] for path in built)  # written whole again


def vars_of(value):
    from hp_invariants.project import TextTable

    return (value.texts, value.keys) if isinstance(value, TextTable) else value


def test_a_damaged_cache_file_reads_as_missing(tmp_path):
    """Every cache file ends with a CRC-32 of its content: a flipped byte anywhere (found by a fresh
    helper: one letter of a caller's name changed the findings silently) or swapped keys make the
    file read as missing, and the check equals one without cache."""
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    _same_length_edit(root / "pkg" / "base.py", "def step", "def stop")
    expected = _check(root, cache, "--no-cache")
    assert expected[0] == 1
    assert _check(root, cache) == expected
    files = sorted(cache.glob("*.json"))
    assert len(files) == 5  # manifest, summaries, two built objects, results
    for path in files:
        raw = path.read_bytes()
        assert store_module.read_json(path, "x", root) is None  # wrong tag
        positions = [5, len(raw) // 2, len(raw) - 12, len(raw) - 1]
        if ".built." in path.name:  # a JSON line and a binary index checked on read, texts checked one by one
            head = raw.index(b"\n") + 1
            index_size = read_cache_file(path)["data"]["index"]
            assert index_size > 0 and raw[-9:-8] == b"\n"
            positions += [head + 2, head + index_size - 1, head + index_size + 1]  # the index, the first text
        for at in positions:
            damaged = bytearray(raw)
            damaged[at] = ord("x") if damaged[at] != ord("x") else ord("y")
            path.write_bytes(bytes(damaged))
            if ".built." not in path.name:
                assert store_module._checked(bytes(damaged)) is None
            else:  # else the files' results are reused and the index is not read
                for results in cache.glob("results-*.json"):
                    results.unlink()
            assert _check(root, cache) == expected, (path.name, at)
            path.write_bytes(raw)
    # the damage the checksum was added for (a fresh helper's): a name in a text changed into another
    # valid name, so the text still decodes; the object built from it would no longer report 'step'
    for path in (p for p in files if ".built." in p.name):
        raw = path.read_bytes()
        start = raw.index(b"\n") + 1 + read_cache_file(path)["data"]["index"]
        texts = raw[start:-9]
        if b"stop" in texts:
            path.write_bytes(raw[:start] + texts.replace(b"stop", b"step") + raw[-9:])
            for results in cache.glob("results-*.json"):  # else the files' results are reused: no index read
                results.unlink()
            assert _check(root, cache) == expected, path.name
            path.write_bytes(raw)
    assert any(b"stop" in p.read_bytes() for p in files if ".built." in p.name)
    manifest = next(p for p in files if p.name.count(".") == 1 and p.name.startswith("project-"))
    head = manifest.read_bytes()[:-9]
    swapped = head.replace(b'"format"', b'"FORMAT"', 1)
    manifest.write_bytes(swapped + manifest.read_bytes()[-9:])  # content changed, old checksum
    assert _check(root, cache) == expected


def test_built_objects_are_cached_for_non_ascii_identifiers(tmp_path):
    """Python identifiers need not be ASCII: the built objects of such a project are still cached
    (their texts were encoded as ASCII, so the write was silently skipped)."""
    root = _tree(tmp_path / "proj", {"m.py": "class Gr\u00f6\u00dfe:\n    def \u00e9t\u00e9(self):\n        return gr\u00f6\u00dfe()\n"})
    cache = tmp_path / "cache"
    assert _check(root, cache) == (0, [])
    assert len(list(cache.glob("*.built.*.json"))) == 2
    assert _check(root, cache) == _check(root, cache, "--no-cache")


def test_built_objects_of_many_roots_keep_few_files_open(tmp_path, monkeypatch):
    """Each built object reads its texts from its cache file, kept open: two files per project root.
    A run over many roots ran out of file descriptors (a fresh helper's find: 80 roots under
    `ulimit -n 100` ended in an internal error that exited 1). At most MAX_OPEN_READERS stay open;
    the others are opened again when read, and a file replaced meanwhile is not read as the old one."""
    monkeypatch.setattr(project_module, "MAX_OPEN_READERS", 2)
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
    for results in cache.glob("results-*.json"):
        results.unlink()  # so that the next check reads every root's built objects

    def open_built() -> int:
        return sum(1 for fd in os.listdir("/proc/self/fd")
                   if ".built." in os.path.realpath(f"/proc/self/fd/{fd}"))

    assert _check(top, cache) == expected
    if os.path.isdir("/proc/self/fd"):
        assert open_built() <= 2
    # a reader whose file was closed opens it again; a file replaced since is refused (and rebuilt)
    readers = list(project_module._OPEN_READERS.values())
    old = next(r for r in readers)
    project_module._OPEN_READERS.clear()
    old.close()
    path = Path(old._path)
    assert old.read(0, 1) == path.read_bytes()[:1] and project_module._OPEN_READERS
    old.close()
    copy = path.read_bytes()
    path.unlink()
    path.write_bytes(copy)  # same bytes, another file
    with pytest.raises(ValueError):
        old.read(0, 1)
