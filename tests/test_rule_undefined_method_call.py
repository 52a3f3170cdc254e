"""Unit tests of E9503 undefined-method-call and its class index (cache, resolution, options)."""

from __future__ import annotations

import contextlib
import os
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fixturelib import cache_db, stored_counts
from hp_invariants import project as project_module
from hp_invariants import store as store_module
from hp_invariants.engine import session_for_rules
from hp_invariants.project import Project
from hp_invariants.rules.undefined_method_call import index as class_index
from hp_invariants.rules.undefined_method_call.index import ClassIndex, ClassIndexFacts, load_catalog, module_name
from hp_invariants.fixer import fix_source
from hp_invariants.model import Confidence
from hp_invariants.rules.undefined_method_call import UndefinedMethodCall
from hp_invariants.source import SourceFile

RULE = UndefinedMethodCall()

SEED = textwrap.dedent(
    """\
    from torch import nn


    class Text(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(4, 4)


    class VL(nn.Module):
        def __init__(self):
            super().__init__()
            self.language_model = Text()

        def forward(self, ids):
            return self.get_input_embeddings()(ids)


    VL()
    """
)


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("")
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def _check(path: Path, options: dict | None = None, cache: Path | None = None):
    project = Project(cache_dir=str(cache) if cache else None, use_cache=cache is not None)
    return session_for_rules([RULE], {"E9503": options} if options else None, project).check_bytes(
        str(path), path.read_bytes())


def test_seed_message_location_confidence_and_fix(tmp_path):
    root = _project(tmp_path, {"m.py": SEED})
    result = _check(root / "m.py")
    assert not result.problems
    (finding,) = result.findings
    assert finding.message.startswith("'VL' object has no attribute 'get_input_embeddings'")
    assert (finding.line, finding.col) == (16, 15)  # the self.get_input_embeddings node
    assert finding.confidence is Confidence.HIGH
    assert finding.fix is not None and finding.fix.applicability.value == "safe"
    assert "return self.language_model.embed_tokens" in finding.fix.edits[0].content


def test_hint_lists_close_names(tmp_path):
    root = _project(tmp_path, {"m.py": """\
        class A:
            def reset_parameters(self):
                pass

            def go(self):
                self.reset_paramters()


        A()
        """})
    (finding,) = _check(root / "m.py").findings
    assert "did you mean 'reset_parameters'" in finding.message


def test_annotated_receiver_is_inference(tmp_path):
    root = _project(tmp_path, {"m.py": """\
        class Tok:
            def encode(self):
                pass


        def f(tok: Tok):
            return tok.decode()


        Tok()
        """})
    (finding,) = _check(root / "m.py").findings
    assert finding.confidence is Confidence.INFERENCE


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_type_ignore_silences_only_the_lines_of_its_call(tmp_path, newline):
    code = textwrap.dedent("""\
        class A:
            def go(self):  # type: ignore[override]
                (self  # type: ignore[attr-defined]
                 .first)()
                self.second()
                x = 1  # type: ignore
                self.third(); y = 2  # type: ignore


        A()
        """)
    root = _project(tmp_path, {})
    path = root / "m.py"
    path.write_bytes(code.replace("\n", newline).encode())
    # the attribute 'first' spans a line marked "type: ignore"; 'second' lies between marked lines;
    # 'third' shares one
    assert [(f.line, f.args[1]) for f in _check(path).findings] == [(5, "second")]


def test_fix_keeps_crlf_and_is_idempotent(tmp_path):
    root = _project(tmp_path, {})
    path = root / "m.py"
    path.write_bytes(SEED.replace("\n", "\r\n").encode())
    session = session_for_rules([RULE], project=Project(use_cache=False))
    source = SourceFile.from_bytes(str(path), path.read_bytes())
    outcome = fix_source(session, source, session.settings_for(str(path)))
    assert outcome.applied and not outcome.remaining
    assert "\n" not in outcome.text.replace("\r\n", "")
    again = fix_source(session, SourceFile(str(path), outcome.text), session.settings_for(str(path)))
    assert not again.applied and again.text == outcome.text


def test_options_ignored_classes_and_modules(tmp_path):
    root = _project(tmp_path, {"m.py": SEED, "modular_x.py": SEED})
    assert _check(root / "m.py", {"unchecked-classes": ("VL",)}).findings == []
    assert _check(root / "modular_x.py").findings == []
    assert len(_check(root / "modular_x.py", {"unchecked-modules": ()}).findings) == 1


def test_mixin_option(tmp_path):
    root = _project(tmp_path, {"m.py": """\
        class Helper:
            def go(self):
                return self.step()


        class Impl(Helper):
            def step(self):
                return 1


        Helper()
        Impl()
        """})
    assert len(_check(root / "m.py").findings) == 1  # constructed: its own instances raise
    assert _check(root / "m.py", {"mixin-class-names": ("Helper",)}).findings == []


def test_current_file_is_summarized_fresh(tmp_path):
    """The rule overlays the current text on the (cached) index: an edit is seen at once."""
    root = _project(tmp_path, {"m.py": SEED})
    path = root / "m.py"
    fixed = SEED.replace("    def forward", "    def get_input_embeddings(self):\n        return 1\n\n    def forward")
    result = session_for_rules([RULE], project=Project(use_cache=False)).check_bytes(str(path), fixed.encode())
    assert result.findings == []


# ---------------------------------------------------------------------- class index
def test_module_names(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "mod.py").write_text("")
    (tmp_path / "script.py").write_text("")
    assert module_name(tmp_path / "pkg" / "sub" / "mod.py") == ("pkg.sub.mod", False)
    assert module_name(tmp_path / "pkg" / "sub" / "__init__.py") == ("pkg.sub", True)
    assert module_name(tmp_path / "script.py") == ("script", False)


def test_relative_import_and_reexport_resolution(tmp_path):
    root = _project(tmp_path, {
        "pkg/__init__.py": "from .base import Base\n",
        "pkg/base.py": "from torch import nn\nclass Base(nn.Module):\n    def m(self):\n        pass\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/child.py": "from .. import Base\nclass Child(Base):\n    pass\n",
    })
    index = ClassIndex.for_root(root, use_cache=False)
    i = index.file_index(str(root / "pkg/sub/child.py"))
    hier = index.hierarchy((i, "Child"))
    assert not hier.unknown and "m" in hier.members and "forward" in hier.members
    assert index.resolve("pkg.Base", i) == (index.file_index(str(root / "pkg/base.py")), "Base")
    assert index.subclasses((index.file_index(str(root / "pkg/base.py")), "Base")) == [(i, "Child")]


def test_bad_files_are_skipped(tmp_path):
    root = _project(tmp_path, {"ok.py": "class A:\n    pass\n", "bad.py": "def (:\n"})
    (root / "bin.py").write_bytes(b"\x00\x01")
    index = ClassIndex.for_root(root, use_cache=False)
    assert [Path(p).name for p in index.paths] == ["ok.py"]
    assert index.stats["failed"] == 2


def test_cache_warm_run_reads_and_detects_changes(tmp_path, monkeypatch):
    root = _project(tmp_path / "proj", {"a.py": "class A:\n    pass\n", "b.py": "class B:\n    pass\n"})
    cache = tmp_path / "cache"
    cold = ClassIndex.for_root(root, cache_dir=str(cache), use_cache=True)
    assert (cold.stats["parsed"], cold.stats["cached"], cold.stats["failed"]) == (2, 0, 0)
    names = sorted(p.name for p in cache.iterdir())
    assert [n for n in names if n.startswith(".tmp")] == []  # written atomically, no temp left
    # the manifest, each file's summaries and the built index (its files and uses tables: one row per entry)
    counts = stored_counts(cache)  # a run that summarized files stores no built index (its next edit changes it)
    assert (counts["manifests"], counts["summaries"], counts["built"]) == (1, 2, 0)
    calls = []
    monkeypatch.setattr(project_module, "summarize_file", lambda *a: calls.append(a))
    warm = ClassIndex.for_root(root, cache_dir=str(cache), use_cache=True)
    assert warm.stats["parsed"] == 0 and calls == []
    counts = stored_counts(cache)  # built from the cached summaries: stored, one row per entry of its tables
    assert (counts["manifests"], counts["summaries"], counts["built"]) == (1, 2, 1) and counts["built_rows"] >= 2
    again = ClassIndex.for_root(root, cache_dir=str(cache), use_cache=True)
    assert again.stats["parsed"] == 0 and type(again.files) is not list and calls == []  # read back
    monkeypatch.undo()
    # same content, new mtime: the content hash decides, nothing is parsed
    os.utime(root / "a.py", ns=(1, 1))
    touched = ClassIndex.for_root(root, cache_dir=str(cache), use_cache=True)
    assert touched.stats["parsed"] == 0
    (root / "b.py").write_text("class B:\n    def m(self):\n        pass\n")
    changed = ClassIndex.for_root(root, cache_dir=str(cache), use_cache=True)
    assert changed.stats["parsed"] == 1
    assert "m" in changed.summary((changed.file_index(str(root / "b.py")), "B")).members


INDEX_PROJECT = {
    "pkg/__init__.py": "from .base import Base\n",
    "pkg/base.py": """\
        import platform_lib

        class Base:
            def step(self):
                pass

        class Plugin(platform_lib.Base):
            pass

        def patch(cls):
            cls.added = lambda self: None
            return cls
        """,
    "pkg/child.py": """\
        from torch import nn
        from pkg import Base
        from pkg.base import patch

        @patch
        class Child(Base, nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Base()

        def hook(module):
            module.installed = 1

        Child().inner.step()
        Base.late = 3
        """,
    "tests/test_child.py": "from pkg.child import Child\nChild()\n",
}


def test_cached_index_answers_as_the_built_one(tmp_path):
    # while no file changed, the index is read back whole (tables included) without parsing or
    # decoding every summary, and answers every question E9503 asks as the index built from them
    root = _project(tmp_path / "proj", INDEX_PROJECT)
    cache = tmp_path / "cache"
    built = Project(cache_dir=str(cache)).data_for_root(ClassIndexFacts(), root)
    Project(cache_dir=str(cache)).data_for_root(ClassIndexFacts(), root)  # from the cached summaries: stored
    again = Project(cache_dir=str(cache))
    read = again.data_for_root(ClassIndexFacts(), root)
    assert again.stats["parsed"] == 0 and type(read.files) is not list and read.paths == built.paths
    assert read.digests == built.digests and read.root == built.root
    assert all(f.raw is None for scan, _ in again._scans.values() for f in scan.files)  # no file bytes kept
    keys = [(i, c.qualname) for i, f in enumerate(built.files) for c in f.classes] + [(0, "Missing")]
    assert len(keys) == 4
    for key in keys:
        for name in ("summary", "hierarchy", "subclasses", "possible_subclasses", "used"):
            assert getattr(read, name)(key) == getattr(built, name)(key), (name, key)
        for attr in ("step", "added", "installed", "late", "inner", "nothing"):
            assert read.stored(key, attr) == built.stored(key, attr)
    for name in ("pkg.Base", "pkg.child.Child", "pkg.base.Plugin", "torch.nn.Module", "pkg.nothing", "os.path"):
        for i in range(len(built.paths)):
            assert read.resolve(name, i) == built.resolve(name, i)
    for owner in ("pkg.base.Base", "pkg.child.Child", "pkg.base.patch()", "none"):
        assert read.patched_members(owner) == built.patched_members(owner)
    assert list(read.files) == list(built.files)


def test_a_malformed_part_of_the_cached_index_is_rebuilt_not_trusted(tmp_path):
    root = _project(tmp_path / "proj", INDEX_PROJECT)
    cache = tmp_path / "cache"
    built = Project(cache_dir=str(cache)).data_for_root(ClassIndexFacts(), root)
    Project(cache_dir=str(cache)).data_for_root(ClassIndexFacts(), root)  # from the cached summaries: stored
    from fixturelib import built_rows, set_built_head, set_built_rows

    set_built_rows(cache, "class-index", "files", {1: '["not", "a summary"]'})
    set_built_rows(cache, "class-index", "uses", {"Child": '{"not": "a list"}'})
    again = Project(cache_dir=str(cache))
    read = again.data_for_root(ClassIndexFacts(), root)
    assert again.stats["parsed"] == 0  # read back: the entries are checked when first read
    child = (built.file_index(str(root / "pkg" / "child.py")), "Child")
    assert read.used(child) == built.used(child) is True
    assert list(read.files) == list(built.files)
    assert "a summary" not in built_rows(cache, "class-index", "files")[1]  # the cache holds the rebuilt index again

    def malformed(head):  # a plain part of another shape: the head does not decode, rebuilt at once
        head[0]["children"] = [[1, 2, 3]]
        return head

    set_built_head(cache, "class-index", malformed)
    assert list(Project(cache_dir=str(cache)).data_for_root(ClassIndexFacts(), root).files) == list(built.files)


def test_corrupt_or_old_cache_is_rebuilt(tmp_path, monkeypatch):
    root = _project(tmp_path / "proj", {"a.py": "class A:\n    pass\n"})
    cache = tmp_path / "cache"
    ClassIndex.for_root(root, cache_dir=str(cache), use_cache=True)
    from hp_invariants import store

    store.close_all()
    for name in (store.DB_NAME, store.DB_NAME + "-wal"):
        if (cache / name).exists():
            (cache / name).write_bytes(b"not a database")
    assert ClassIndex.for_root(root, cache_dir=str(cache), use_cache=True).stats["parsed"] == 1
    assert ClassIndex.for_root(root, cache_dir=str(cache), use_cache=True).stats["parsed"] == 0  # written anew
    # another version of the code (a summarizer changed, nobody bumped anything): nothing old is read
    monkeypatch.setattr(store, "_CODE_DIGEST", ["0" * 16])
    assert ClassIndex.for_root(root, cache_dir=str(cache), use_cache=True).stats["parsed"] == 1
    with contextlib.closing(cache_db(cache)) as conn:
        assert [tag for (tag,) in conn.execute("SELECT tag FROM spaces")] == [store.cache_tag()]


def test_default_cache_dir(monkeypatch):
    monkeypatch.setenv("HP_INVARIANTS_CACHE_DIR", "/x/y")
    assert project_module.default_cache_dir() == store_module.default_cache_dir() == "/x/y"
    monkeypatch.delenv("HP_INVARIANTS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert project_module.default_cache_dir() == "/xdg/hp-invariants"


def test_catalog_aliases_and_registry_getattr():
    catalog = load_catalog()
    module = catalog["torch.nn.Module"]
    assert catalog["torch.nn.modules.module.Module"] is module
    assert {"training", "_parameters", "register_buffer", "forward"} <= module.members
    assert module.registry_getattr and not module.dynamic
    assert "get_input_embeddings" in catalog["transformers.PreTrainedModel"].members
    assert "value" in catalog["enum.Enum"].members


def test_lint_path_does_not_import_torch(tmp_path):
    root = _project(tmp_path, {"m.py": SEED})
    code = (
        "import sys\n"
        "from hp_invariants.engine import session_for_rules\n"
        "from hp_invariants.project import Project\n"
        "from hp_invariants.rules.undefined_method_call import UndefinedMethodCall\n"
        f"p = {str(root / 'm.py')!r}\n"
        "s = session_for_rules([UndefinedMethodCall()], project=Project(use_cache=False))\n"
        "r = s.check_bytes(p, open(p, 'rb').read())\n"
        "assert len(r.findings) == 1, r\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("shape", [
    "self.x = Other()\n        self.x = None",  # two different assignments: not precise
])
def test_child_attribute_not_precise(tmp_path, shape):
    root = _project(tmp_path, {"m.py": f"""\
        class Other:
            pass


        class A:
            def __init__(self):
                {shape}

            def go(self):
                return self.x.missing()


        A()
        """})
    assert _check(root / "m.py").findings == []


def test_summary_records_uses_and_foreign_stores_as_plain_data(tmp_path):
    tree = __import__("ast").parse(textwrap.dedent("""\
        from pkg.models import Dense, Sparse
        import helpers

        Model = Dense if helpers.flag else Sparse
        REG = {"x": helpers.Other}


        class Wrapper:
            def __init__(self):
                self.child = Dense()

            def set(self, v):
                self.child.weight = v


        def walk(model, text: Dense):
            for module in model.modules():
                module.checkpoint_fn = print
            text.speak = print
            local = Sparse()
            local.extra = print
            local.count = 1
            helpers.flag = True
            return isinstance(model, Sparse)
        """))
    summary = class_index.summarize(tree, "pkg.run")
    assert "&pkg.models.Dense" in summary.constructed and "&pkg.models.Sparse" in summary.constructed
    assert "&helpers.Other" in summary.constructed
    assert "pkg.models.Dense" in summary.constructed  # the call in __init__
    assert ("", "checkpoint_fn") in summary.stores
    assert ("pkg.models.Dense", "speak") in summary.stores and ("pkg.models.Sparse", "extra") in summary.stores
    assert ("pkg.models.Dense", "weight") in summary.stores  # self.child built by Dense()
    assert not any(attr == "flag" for _, attr in summary.stores)  # a module attribute, not an instance
    assert not any(attr == "count" for _, attr in summary.stores)  # data: it defines no method
    assert {"flag", "count", "extra", "checkpoint_fn"} <= summary.flag_sets  # may switch a flag on
    assert all(isinstance(v, (tuple, frozenset)) for v in (summary.constructed, summary.stores, summary.patched))


def test_uses_resolve_to_the_class_not_its_simple_name(tmp_path):
    root = _project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": """\
            class Block:
                def forward(self):
                    return self.conv1()


            class SEBlock(Block):
                def conv1(self):
                    return 1
            """,
        "pkg/b.py": """\
            class Block:
                def forward(self):
                    return self.shortcut()


            Block()
            """,
    })
    index = ClassIndex.for_root(root, use_cache=False)
    a = index.file_index(str(root / "pkg/a.py"))
    b = index.file_index(str(root / "pkg/b.py"))
    assert not index.used((a, "Block")) and index.used((b, "Block"))
    assert not _check(root / "pkg/a.py").findings
    assert len(_check(root / "pkg/b.py").findings) == 1


def test_test_code_construction_does_not_make_a_library_mixin_concrete(tmp_path):
    root = _project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/bridge.py": """\
            class PeftBridge:
                def export(self):
                    return self._unwrap()


            class ModelBridge(PeftBridge):
                def _unwrap(self):
                    return 1
            """,
        "tests/test_bridge.py": "from pkg.bridge import PeftBridge\n\nPeftBridge()\n",
    })
    index = ClassIndex.for_root(root, use_cache=False)
    assert index.is_test(index.file_index(str(root / "tests/test_bridge.py")))
    assert not index.is_test(index.file_index(str(root / "pkg/bridge.py")))
    assert not _check(root / "pkg/bridge.py").findings
    (root / "pkg/use.py").write_text("from pkg.bridge import PeftBridge\n\nPeftBridge()\n")
    assert len(_check(root / "pkg/bridge.py").findings) == 1  # library code builds it bare: concrete


def test_answers_digest_from_cached_item_texts_is_the_digest_of_the_list():
    # dependencies() digests a file's answers from each answer's cached text; still_valid()
    # digests the replayed answers as one list: the two must agree for every kind of answer
    answers = [None, True, "torch.nn.Module", ["k", "/p/a.py", "A"], [["c", "x"], ["é", "\u2028", 3]], [], {"a": 1},
               "it's \"quoted\"", "\ud800"]
    for n in range(len(answers) + 1):
        items = answers[:n]
        joined = "[" + ", ".join(class_index._answer_text(a) for a in items) + "]"
        assert class_index._text_digest(joined) == class_index._answers_digest(items)


def test_tracked_questions_are_recorded_with_positional_arguments(tmp_path):
    # the results cache replays a file's questions on a later index: one asked with a keyword is
    # recorded as the positional call it stands for
    root = _project(tmp_path / "proj", INDEX_PROJECT)
    index = Project(cache_dir=str(tmp_path / "cache")).data_for_root(ClassIndexFacts(), root)
    facts = ClassIndexFacts()
    view, tracker = facts.track(index)
    key = (index.file_index(str(root / "pkg" / "base.py")), "Base")
    assert view.used(key, values=False) == index.used(key, False)
    assert tracker.asked == [("used", key, False)]
    record = facts.dependencies(tracker, str(root / "pkg" / "child.py"))
    assert facts.still_valid(index, str(root / "pkg" / "child.py"),
                             index.digests[index.file_index(str(root / "pkg" / "child.py"))], record)


def test_recorded_hierarchy_answers_keep_every_member_difference():
    """The results cache records a hierarchy's large name sets as digests, and its members as what
    they hold beyond ``own | inherited`` and lack from it: equal hierarchies give equal records, a
    set that differs by one name (an edit to a base class) a different one."""
    from hp_invariants.rules.undefined_method_call.index import _HIER_FIELDS, Hierarchy, _normal

    names = [f"m{i}" for i in range(40)]
    members_at, inherited_at = _HIER_FIELDS.index("members"), _HIER_FIELDS.index("inherited")

    def hier(members, own=("a",), inherited=None):
        return Hierarchy(key=(0, "C"), members=frozenset(members), own=frozenset(own), ancestors=frozenset(),
                         unknown=False, dynamic=False, abstract=False, catalog=(), is_type=False,
                         inherited=frozenset(members if inherited is None else inherited))

    view = type("View", (), {"paths": ["/p/a.py", "/elsewhere/b.py"], "_record_paths": {}, "_root_prefix": "/p/",
                             "_names_memo": {}})()
    same = _normal(view, hier(names)), _normal(view, hier(list(reversed(names))))
    assert same[0] == same[1] and same[0][inherited_at][0] == "d"
    assert same[0][members_at] == ["m", [], ["a"]]  # members lack the own name "a"
    whole = _normal(view, hier(["a", *names]))
    assert whole[members_at] == ["m", [], []] and whole[inherited_at] != same[0][inherited_at]
    # files are named relative to the project root (absolute when outside it)
    assert same[0][0] == ["k", "a.py", "C"] and _normal(view, (1, "D")) == ["k", "/elsewhere/b.py", "D"]
    assert _normal(view, hier(names + ["extra"])) != same[0]
    assert _normal(view, hier(names[:-1] + ["m39_renamed"])) != same[0]
    assert _normal(view, hier(names, own=("b",))) != same[0]  # small sets are kept as they are
    # members alone differing from own | inherited, by one name or by many
    assert _normal(view, hier(names + ["extra"], inherited=names))[members_at] == ["m", ["extra"], ["a"]]
    many = _normal(view, hier(names[:5], inherited=names))[members_at]
    assert many[0] == "m" and many[2][0] == "d" and many != _normal(view, hier(names[:6], inherited=names))[members_at]


@pytest.mark.parametrize(("text", "named"), [
    ("from torch.nn.parallel import DistributedDataParallel as DDP", True),
    ("model = nn.DataParallel(model)", True),
    ("DataParallel", True),
    ("x = (DataParallel)", True),
    ("from torch.distributed.fsdp import FullyShardedDataParallel", False),
    ("class _DataParallel: pass\nDataParallelism = 1", False),
    ("FullyShardedDataParallel(m)\nnn.DataParallel(m)", True),  # a later whole word after a part of one
    ("", False),
])
def test_the_wrapped_local_check_runs_where_a_wrapper_class_is_named_as_a_word(text: str, named: bool):
    from hp_invariants.rules.undefined_method_call import _names_a_wrapper

    assert _names_a_wrapper(text) is named


def test_a_wrapped_local_is_checked_in_a_file_that_also_names_fsdp(tmp_path: Path):
    """The word test does not drop a file naming both FSDP (a part-word match) and DDP."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(textwrap.dedent("""\
        import torch
        from torch.distributed.fsdp import FullyShardedDataParallel


        def train(model, batch):
            model = torch.nn.parallel.DistributedDataParallel(model)
            return model.generate(batch)
        """))
    session = session_for_rules([RULE], project=Project(use_cache=False))
    result = session.check_path(str(tmp_path / "train.py"))
    assert [(f.rule_id, f.line) for f in result.findings] == [("E9503", 7)]


def test_decorator_adds_finds_each_shape_and_nothing_else():
    """What a class decorator assigns onto its class, for each shape ``decorator_adds`` knows (the
    prefilter that skips functions holding none of them must not lose one)."""
    import ast

    from hp_invariants.rules.undefined_method_call.index import decorator_adds

    def adds(source: str) -> set[str]:
        return decorator_adds(ast.parse(textwrap.dedent(source)).body[0])

    assert adds("def d(cls):\n    cls.run = lambda self: 1\n    return cls\n") == {"run"}
    assert adds("def d(cls):\n    setattr(cls, 'go', f)\n") == {"go"}
    assert adds("def d(cls):\n    builtins.setattr(cls, 'go', f)\n") == {"go"}
    assert adds("def d(cls):\n    setattr(cls, name, f)\n") == {"*"}
    assert adds("def d(cls):\n    cls.__dict__.update(table)\n") == {"*"}
    assert adds("def d(names):\n    def apply(cls):\n        for n in names:\n            cls.x = n\n"
                "        return cls\n    return apply\n") == {"x"}
    assert adds("def d(cls):\n    other.run = 1\n    cls.__init__ = g\n    return cls.make(x=cls.y)\n") == set()
    assert adds("def d(cls):\n    return [c.name for c in cls.parts]\n") == set()
    # a decorator that builds a class with other bases in place of the one it was given
    assert adds("def d(cls):\n    return type(cls.__name__, (cls, Extra), {})\n") == {"*"}
    assert adds("def d(cls):\n    class Wrapped(cls):\n        pass\n    return Wrapped\n") == {"*"}
    assert adds("def d(cls):\n    cls.__bases__ = (Extra,) + cls.__bases__\n    return cls\n") == {"*"}
    assert adds("def d(cls):\n    class Helper:\n        pass\n    REG[cls] = Helper\n    return cls\n") == set()


def test_the_summary_reads_every_node_once():
    """The summarizer reads the nodes of each method from the walk ``class_members`` made of it and
    the rest of the tree from a walk pruned at those methods: together, every node of the tree once
    (classes defined in methods, in functions, in a class body's ``if``, in an ``if`` inside a
    method, async methods, lambdas and nested functions included)."""
    import ast
    from collections import Counter

    from hp_invariants.astutil import walk_nodes

    tree = ast.parse(textwrap.dedent('''
        import torch

        def build(n):
            class Local(torch.nn.Module):
                def forward(self, x):
                    return [lambda y: y + i for i in range(n)]
            return Local

        class Outer:
            flag = False
            if torch.cuda.is_available():
                def on_gpu(self):
                    self.flag = True
            async def fetch(self, key: str = "k") -> int:
                def helper(v):
                    return v
                return helper(await self.get(key))
            def make(self):
                class Inner(Outer):
                    size = 1
                    def grow(self):
                        class Deep:
                            def run(self):
                                return self
                        return Deep
                if self.flag:
                    class Hidden:
                        def go(self):
                            return 2
                return Inner
    '''))
    summarizer = class_index._Summarizer("m", False, None)
    summarizer.module_scope(tree.body, "", in_function=False)
    imports = summarizer.build_imports()
    walked = class_index._MethodWalks()
    for qual, node in summarizer.raw_classes:
        summarizer.class_summary(qual, node, imports, walked)
    read = [*class_index._nodes_outside_methods(tree, walked), *(n for nodes in walked.nodes for n in nodes)]
    assert Counter(map(id, read)) == Counter(map(id, walk_nodes(tree)))
    # six methods walked by class_members (Hidden, in an ``if`` of a method, is no indexed class: its
    # method is read with the rest of the tree); Inner, Deep and Hidden met in the methods' walks
    assert len(walked.nodes) == 6 and len(walked.classes) == 3


def test_class_decorator_patches_skip_only_functions_without_a_mark():
    """A module's summary walks a module-level function for what it assigns onto a decorated class
    only when one of its lines (decorators included) holds an attribute stored on a name, a name's
    ``__dict__`` or a ``setattr`` call: the patches are those of walking every function."""
    import ast

    from hp_invariants.rules.undefined_method_call.index import _decorator_patches, summarize

    source = textwrap.dedent('''
        import functools

        def plain(x):
            return x + 1

        @functools.lru_cache(
            maxsize=None)
        def add_run(cls):
            cls.run = lambda self: 1
            return cls

        def add_go(cls): setattr(cls, "go", None); return cls

        def factory(name):
            def apply(cls):
                cls.__dict__.update({})
                return cls
            return apply

        @hook(lambda c: setattr(c, "hooked", 1))
        def odd(cls):
            return cls

        @add_run
        @add_go
        class A:
            def __init__(self):
                self.x = 1
        ''')
    tree = ast.parse(source)
    expected = {("m.add_run()", "run"), ("m.add_go()", "go"), ("m.factory()", "*"), ("m.odd()", "hooked"),
                ("m.A", "run"), ("m.A", "go")}
    assert set(summarize(tree, "m").patched) == expected
    walked: set[tuple[str, str]] = set()  # no marks given: every function walked
    _decorator_patches(tree, "m", [("A", tree.body[-1])], {"add_run": "m.add_run", "add_go": "m.add_go"}, walked)
    assert walked == expected


def test_namespace_package_names_resolve_after_the_real_module_names(tmp_path: Path):
    """A file in folders without ``__init__.py`` (PEP 420 namespace packages) is also found by the
    dotted names through those folders up to the project root, nearest first; a real module name
    wins (and no such name starts with a root module's name), two files with one such name are unknown unless one is in the asking file's folder, and a
    folder name that is not an identifier ends the chain."""
    root = _project(tmp_path, {
        "src/models/base.py": "class Base:\n    pass\n",
        "src/stacks/qwen/__init__.py": "",
        "src/stacks/qwen/layers.py": "class Layer:\n    pass\n",
        "a/shared/util.py": "class A:\n    pass\n",
        "b/shared/util.py": "class A:\n    pass\n",
        "b/shared/run.py": "",
        "my-tools/helpers.py": "class Helper:\n    pass\n",
        "models.py": "class Base:\n    pass\n",
        "pkg/__init__.py": "",
        "pkg/ns/ops.py": "class Op:\n    pass\n",
        "tests/pkg/fakes.py": "class Fake:\n    pass\n",
        "docs/_mock/torch/nn.py": "class Module:\n    pass\n",
    })
    index = ClassIndex.for_root(root, use_cache=False)
    number = {os.path.relpath(p, root): i for i, p in enumerate(index.paths)}
    assert index.resolve("models.Base") == (number["models.py"], "Base")  # the real module
    assert index.resolve("src.models.base.Base") == (number[os.path.join("src", "models", "base.py")], "Base")
    assert index.resolve("models.base.Base") is None  # models.py at the root is what `import models` finds
    assert index.resolve("base.Base") == (number[os.path.join("src", "models", "base.py")], "Base")
    layers = (number[os.path.join("src", "stacks", "qwen", "layers.py")], "Layer")
    assert index.resolve("qwen.layers.Layer") == index.resolve("stacks.qwen.layers.Layer") == layers
    assert index.resolve("src.stacks.qwen.layers.Layer") == layers
    assert index.resolve("shared.util.A") is None  # two files: unknown
    b_util = (number[os.path.join("b", "shared", "util.py")], "A")
    assert index.resolve("shared.util.A", number[os.path.join("b", "shared", "run.py")]) == b_util
    assert index.resolve("helpers.Helper") == (number[os.path.join("my-tools", "helpers.py")], "Helper")
    assert index.resolve("my-tools.helpers.Helper") is None
    ops = (number[os.path.join("pkg", "ns", "ops.py")], "Op")
    assert index.resolve("pkg.ns.ops.Op") == ops  # a namespace folder inside the regular package pkg
    assert index.resolve("pkg.fakes.Fake") is None  # tests/pkg is not the package pkg
    assert index.resolve("tests.pkg.fakes.Fake") == (number[os.path.join("tests", "pkg", "fakes.py")], "Fake")
    assert index.resolve("torch.nn.Module") == load_catalog()["torch.nn.Module"]  # not docs/_mock/torch/nn.py


def test_the_index_only_shortcut_never_drops_a_finding(monkeypatch):
    """E9503 skips parsing a file when the index alone shows that nothing in it can be reported
    (``_may_report``). That must be a necessary condition of every finding: on every E9503 fixture
    (all the shapes the rule reports and the clean twins), the findings are the same when the
    shortcut is turned off (every file parsed and checked in full)."""
    import io
    from contextlib import redirect_stdout

    from fixturelib import checker_cases

    from hp_invariants import cli
    from hp_invariants.rules import undefined_method_call as rule_module

    cases = [case for case in checker_cases() if case.name.startswith("undefined-method-call/")]
    files = sorted({str(p) for case in cases for p in case.files})
    expected = sorted((path, line, col) for case in cases for path, line, col, _symbol in case.expected)

    def findings() -> list[tuple]:
        buffer = io.StringIO()
        with redirect_stdout(buffer):
            cli.main(["check", "--format", "json", "--no-cache", "--select", "E9503", *files])
        return sorted((os.path.normpath(f["path"]), f["line"], f["column"], f["message"])
                      for f in json.loads(buffer.getvalue())["findings"])

    shortcut = findings()
    assert [f[:3] for f in shortcut] == expected  # every flagged shape of the fixtures, nothing else
    monkeypatch.setattr(rule_module, "_may_report", lambda *args: True)
    assert findings() == shortcut


def test_many_findings_in_one_file_each_judged_against_its_own_scope(tmp_path):
    # a new user's find: the "private helper nothing calls" filter scanned the file's body once per finding
    # (a generated file with 8,000 findings took 8 s, one of 4.9 MB 440 s); the defs of each body are now
    # found once per file. The filter still tells a called method from a private one nothing calls.
    classes = "".join(
        f"class C{i}(nn.Module):\n    def run(self):\n        return self.g{i}()\n\n" for i in range(300))
    root = _project(tmp_path, {"m.py": "import torch.nn as nn\n\n\n" + classes + textwrap.dedent("""
        class Quiet(nn.Module):
            def _never(self):  # private, called by nothing: its line is reached by nothing
                return self.missing()
        """)})
    result = _check(root / "m.py")
    assert sorted(f.obj for f in result.findings) == sorted(f"C{i}.run" for i in range(300))


def test_uncalled_private_filter_reads_each_body_once():
    import ast as ast_module

    from hp_invariants.rules.undefined_method_call import _in_uncalled_private

    tree = ast_module.parse("def _helper():\n    pass\n")
    defs: dict = {}
    view = type("View", (), {"private_live": lambda self, name, owner: False})()
    assert _in_uncalled_private(view, 0, tree, {}, "_helper", defs) is True
    assert list(defs) == [id(tree.body)] and set(defs[id(tree.body)]) == {"_helper"}
    defs[id(tree.body)] = {}  # what the memo says is what counts: the body is not scanned again
    assert _in_uncalled_private(view, 0, tree, {}, "_helper", defs) is False
