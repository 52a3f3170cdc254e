"""The versioned framework catalog (issue #23): the library ranges a project declares, and E9503's
members for those ranges: a member present in any catalogued release inside the range is defined,
one that only releases outside it have is reported with those releases named."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from hp_invariants import catalog as catalog_module
from hp_invariants import engine
from hp_invariants.catalog import Catalog, admits, declared_ranges, poetry_specifiers
from hp_invariants.config import Overrides, Resolver
from hp_invariants.project import Project
from hp_invariants.registry import RULES
from hp_invariants.rules.undefined_method_call import UndefinedMethodCall

# a small catalog of the bundled file's shape: transformers' Base had ``old_api`` up to 4.49 and
# gains ``new_api`` in 5.0; it inherits torch's Module, which gains ``compile`` in 2.5
DATA = {
    "format": 2, "generated_by": "test", "unavailable": {},
    "libraries": {
        "transformers": {"versions": ["4.30.2", "4.36.2", "4.49.0", "4.57.6", "5.0.0", "5.3.0"], "read": {}},
        "torch": {"versions": ["2.1.2", "2.5.1"], "read": {}},
        "python": {"versions": ["3.11.7"], "read": {}},
    },
    "classes": {
        "transformers.modeling_utils.Base": {
            "library": "transformers", "qualname": "transformers.modeling_utils.Base", "mro": [],
            "aliases": ["transformers.Base", "transformers.modeling_utils.Base"],
            "members": ["forward"], "members_some": {"old_api": ["4.30.2..4.49.0"], "new_api": ["5.0.0", "5.3.0"]},
            "inherits": ["torch.nn.Module"], "dynamic_getattr": False, "registry_getattr": False,
        },
        "transformers.mixins.OldMixin": {
            "library": "transformers", "qualname": "transformers.mixins.OldMixin", "mro": [],
            "aliases": ["transformers.OldMixin"], "versions": ["4.30.2", "4.36.2"], "members": ["legacy"],
            "inherits": [], "dynamic_getattr": False, "registry_getattr": False,
        },
        "torch.nn.modules.module.Module": {
            "library": "torch", "qualname": "torch.nn.modules.module.Module", "mro": [],
            "aliases": ["torch.nn.Module"], "members": ["to"], "members_some": {"compile": ["2.5.1"]},
            "inherits": [], "dynamic_getattr": False, "registry_getattr": True,
        },
        "torch.Tensor": {
            "library": "torch", "qualname": "torch.Tensor", "mro": [], "read": ["2.5.1"],
            "aliases": [], "members": ["add"], "inherits": [], "dynamic_getattr": False, "registry_getattr": False,
        },
    },
}


def _ranges(**declared: str) -> dict[str, tuple[SpecifierSet, ...]]:
    return {lib: tuple(SpecifierSet(s) for s in specs.split("|")) for lib, specs in declared.items()}


@pytest.fixture()
def small() -> Catalog:
    return Catalog(json.loads(json.dumps(DATA)))


# ---------------------------------------------------------------------- specifiers
@pytest.mark.parametrize(("specs", "version", "expected"), [
    ("<4.50", "4.49.0", True),
    ("<4.50", "4.50.3", False),
    (">=5", "4.57.6", False),
    (">=5", "5.0.0", True),
    ("==4.36.0", "4.36.2", True),  # a catalogued release stands for its minor series
    ("==4.36.*", "4.36.2", True),
    ("==2.1.0+cu118", "2.1.2", True),
    ("~=4.36", "4.57.6", True),
    ("~=4.36.0", "4.37.2", False),
    (">=4.36.3,<4.37", "4.36.2", True),
    ("", "1.0.0", True),
    (">=2.1|<1.0", "2.5.1", True),
])
def test_admits_a_series_of_the_range(specs, version, expected):
    declared = tuple(SpecifierSet(s) for s in specs.split("|"))
    assert admits(declared, version) is expected


@pytest.mark.parametrize(("constraint", "expected"), [
    ("^4.36", ["<5,>=4.36"]),
    ("^0.25.1", ["<0.26,>=0.25.1"]),
    ("^0.0.3", ["<0.0.4,>=0.0.3"]),
    ("~2.1.0", ["<2.2,>=2.1.0"]),
    ("~2", ["<3,>=2"]),
    ("*", [""]),
    (">=4.30,<4.50", ["<4.50,>=4.30"]),
    (">= 4.30, < 4.50", ["<4.50,>=4.30"]),
    ("4.36.2", ["==4.36.2"]),
    ("2.1.*", ["==2.1.*"]),
    ("^4.30 || ^5.0", ["<5,>=4.30", "<6,>=5.0"]),
])
def test_poetry_constraints(constraint, expected):
    assert [str(s) for s in poetry_specifiers(constraint)] == expected


# ---------------------------------------------------------------------- declared ranges, per file kind
def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _declared(root: Path) -> dict[str, list[str]]:
    return {lib: sorted(str(s) for s in sets) for lib, sets in declared_ranges(root).items()}


def test_pyproject_project_tables(tmp_path):
    _write(tmp_path, {"pyproject.toml": """\
        [project]
        name = "x"
        dependencies = ["torch>=2.1,<2.6; platform_system == 'Linux'", "numpy", "Transformers[torch]==4.36.2"]
        [project.optional-dependencies]
        diffusion = ["diffusers>=0.25"]
        [dependency-groups]
        npu = ["mindspore-ascend==2.7.2"]
        """})
    assert _declared(tmp_path) == {"torch": ["<2.6,>=2.1"], "transformers": ["==4.36.2"],
                                   "diffusers": [">=0.25"], "mindspore": ["==2.7.2"]}


def test_pyproject_poetry_tables(tmp_path):
    _write(tmp_path, {"pyproject.toml": """\
        [tool.poetry.dependencies]
        python = "^3.10"
        torch = {version = "^2.1", source = "pytorch"}
        [tool.poetry.group.dev.dependencies]
        transformers = "~4.40"
        """})
    assert _declared(tmp_path) == {"torch": ["<3,>=2.1"], "transformers": ["<4.41,>=4.40"]}


def test_setup_py_literals_are_read_never_run(tmp_path):
    marker = tmp_path / "ran"
    _write(tmp_path, {"setup.py": f"""\
        from setuptools import setup
        open({str(marker)!r}, "w").close()
        REQUIRED = ["torch>=2.2", "einops"]
        setup(
            name="x",
            install_requires=REQUIRED,
            extras_require={{"hf": ["transformers<4.50"], "dev": ["pytest"]}},
        )
        """})
    assert _declared(tmp_path) == {"torch": [">=2.2"], "transformers": ["<4.50"]}
    assert not marker.exists()


def test_setup_cfg(tmp_path):
    _write(tmp_path, {"setup.cfg": """\
        [options]
        install_requires =
            torch>=2.0  # the oldest we test
            transformers>=4.38,<5
        [options.extras_require]
        diffusion = diffusers==0.30.3
        """})
    assert _declared(tmp_path) == {"torch": [">=2.0"], "transformers": ["<5,>=4.38"], "diffusers": ["==0.30.3"]}


def test_requirements_files(tmp_path):
    _write(tmp_path, {
        "requirements.txt": "-r requirements/base.txt\n--extra-index-url https://example.invalid/simple\n"
                            "torch==2.1.0+cu118 --hash=sha256:00\n./local_pkg\n# transformers>=9\n",
        "requirements-dev.txt": "transformers \\\n    >=4.40\n",
        "requirements/npu.txt": "mindspore>=2.7\ngit+https://example.invalid/x.git\n",
    })
    assert _declared(tmp_path) == {"torch": ["==2.1.0+cu118"], "transformers": [">=4.40"], "mindspore": [">=2.7"]}


def test_every_declaration_counts_and_malformed_files_declare_nothing(tmp_path):
    _write(tmp_path, {"pyproject.toml": "[project\nbroken", "setup.py": "def (:\n",
                      "setup.cfg": "[options\n", "requirements.txt": "torch>=2.4\n",
                      "requirements/old.txt": "torch<2.2\n"})
    assert _declared(tmp_path) == {"torch": ["<2.2", ">=2.4"]}
    assert declared_ranges(tmp_path / "missing") == {}


def test_declared_ranges_follow_edits(tmp_path):
    _write(tmp_path, {"requirements.txt": "torch>=2.4\n"})
    assert _declared(tmp_path) == {"torch": [">=2.4"]}
    (tmp_path / "requirements.txt").write_text("torch>=2.5,<3\n")
    assert _declared(tmp_path) == {"torch": ["<3,>=2.5"]}


# ---------------------------------------------------------------------- members for a range
def test_member_of_old_releases_is_defined_only_when_the_range_includes_them(small):
    old = small.entries_for(_ranges(transformers="<4.50"))["transformers.Base"]
    new = small.entries_for(_ranges(transformers=">=5"))["transformers.Base"]
    assert "old_api" in old.members and "new_api" not in old.members
    assert "old_api" not in new.members and "new_api" in new.members
    assert {"forward", "to"} <= old.members & new.members


def test_no_range_or_a_range_outside_the_catalog_is_any_release(small):
    for ranges in ({}, _ranges(torch=">=2"), _ranges(transformers="<4")):
        base = small.entries_for(ranges)["transformers.Base"]
        assert {"old_api", "new_api"} <= base.members


def test_inherited_library_members_follow_that_librarys_range(small):
    assert "compile" in small.entries_for(_ranges(torch=">=2.5"))["transformers.Base"].members
    assert "compile" not in small.entries_for(_ranges(torch="<2.5"))["transformers.Base"].members
    assert small.entries_for({})["transformers.Base"].registry_getattr  # torch's registry __getattr__


def test_classes_and_aliases_for_a_range(small):
    entries = small.entries_for(_ranges(transformers="<4.40"))
    assert entries["transformers.Base"] is entries["transformers.modeling_utils.Base"]
    assert "transformers.OldMixin" in entries
    assert "transformers.OldMixin" not in small.entries_for(_ranges(transformers=">=4.40"))
    # a class read in some releases only (by import): the releases read count when none is in range
    assert "add" in small.entries_for(_ranges(torch="<2.5"))["torch.Tensor"].members
    assert small.entries_for({}) is small.entries_for({})


def test_members_in_and_the_breaking_note(small):
    assert small.members_in("transformers.Base", "old_api") == {"transformers": ("4.30.2", "4.36.2", "4.49.0")}
    assert small.members_in("transformers.Base", "compile") == {"torch": ("2.5.1",)}
    assert small.members_in("transformers.Base", "nowhere") == {}
    note = small.breaking_note(["transformers.modeling_utils.Base"], "old_api", _ranges(transformers=">=5.0"))
    assert note == "; it exists in transformers 4.30.2-4.49.0, outside the declared range transformers>=5.0"
    assert small.breaking_note(["transformers.Base"], "old_api", {}) == ""  # no range: it is defined
    assert small.breaking_note(["transformers.Base"], "nowhere", _ranges(transformers=">=5")) == ""
    assert small.runs("transformers", ["4.30.2", "4.36.2", "5.0.0"]) == "4.30.2-4.36.2, 5.0.0"


# ---------------------------------------------------------------------- the bundled catalog
def test_bundled_catalog_is_versioned_and_small():
    bundled = catalog_module.load()
    for library in ("torch", "transformers", "diffusers", "mindspore"):
        assert len(bundled.versions[library]) >= 3, library
        assert set(bundled.read[library]) == set(bundled.versions[library])
    assert Path(catalog_module.CATALOG_PATH).stat().st_size < 2_000_000
    every = bundled.entries_for({})
    assert "get_input_embeddings" in every["transformers.PreTrainedModel"].members
    assert every["torch.nn.Module"] is every["torch.nn.modules.module.Module"]


def test_bundled_preTrainedModel_members_follow_the_transformers_range():
    """transformers 4.x's PreTrainedModel inherits GenerationMixin; 5.x's does not."""
    old = catalog_module.entries_for(_ranges(transformers="<4.50"))["transformers.PreTrainedModel"]
    new = catalog_module.entries_for(_ranges(transformers=">=5"))["transformers.PreTrainedModel"]
    assert "generate" in old.members and "generate" not in new.members
    where = catalog_module.members_in("transformers.PreTrainedModel", "generate")["transformers"]
    assert "4.49.0" in where and "5.0.0" not in where


def test_catalog_module_never_imports_a_framework():
    code = ("import sys, hp_invariants.catalog as c\n"
            "c.entries_for({}); c.declared_ranges('.')\n"
            "assert not {'torch', 'transformers', 'diffusers', 'mindspore'} & set(sys.modules), sys.modules.keys()\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------- E9503 with declared ranges
MODEL = """\
from transformers import PreTrainedModel


class TinyModel(PreTrainedModel):
    def forward(self, input_ids):
        return self.generate(input_ids)


def build(config):
    return TinyModel(config)
"""


def _project(root: Path, pyproject: str) -> Path:
    return _write(root, {"pyproject.toml": pyproject, "pkg/__init__.py": "", "pkg/model.py": MODEL})


def _findings(root: Path, cache: Path | None = None):
    project = Project(use_cache=False) if cache is None else None
    if cache is None:
        session = engine.session_for_rules([UndefinedMethodCall()], project=project)
        return session.check_bytes(str(root / "pkg" / "model.py"), (root / "pkg" / "model.py").read_bytes()).findings
    session = engine.default_session(Resolver(RULES, Overrides(cache_dir=str(cache))), cache_dir=str(cache))
    result = engine.run_check(session, [str(root)])
    return [f for f in result.findings if f.rule_id == "E9503"], session.results.stats


def test_e9503_reads_the_declared_range(tmp_path):
    old = _project(tmp_path / "old", '[project]\nname = "x"\ndependencies = ["transformers<4.50"]\n')
    new = _project(tmp_path / "new", '[project]\nname = "x"\ndependencies = ["transformers>=5"]\n')
    none = _project(tmp_path / "none", '[project]\nname = "x"\n')
    assert _findings(old) == [] and _findings(none) == []
    (finding,) = _findings(new)
    assert finding.args[1] == "generate"
    assert "it exists in transformers 4.30.2-" in finding.message
    assert ", outside the declared range transformers>=5" in finding.message


def test_declarations_digest_follows_the_declaring_files(tmp_path):
    # the project facts' cache key: the bytes of every declaring file at the root, nothing parsed
    from hp_invariants.catalog import declarations_digest

    assert declarations_digest(tmp_path) == ""  # no declaring file
    _write(tmp_path, {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["numpy"]\n'})
    seen = {declarations_digest(tmp_path)}
    for files in ({"requirements/dev.txt": "Mindspore_Ascend>=2.7\n"}, {"requirements/dev.txt": "mindspore>=2.8\n"},
                  {"setup.py": "install_requires = ['torch']\n"}, {"pyproject.toml": "# a comment\n"}):
        _write(tmp_path, files)
        seen.add(declarations_digest(tmp_path))
    assert len(seen) == 5 and "" not in seen


def test_results_cache_follows_a_range_spelled_with_escapes(tmp_path):
    # a new user's find: the key once held only files whose bytes name a catalogued library, and a TOML
    # escape names one without those bytes ("\u0074ransformers"): the range edit kept stale results
    pyproject = '[project]\nname = "x"\ndependencies = ["\\u0074ransformers%s"]\n'
    root = _project(tmp_path / "proj", pyproject % "<4.50")
    cache = tmp_path / "cache"
    assert _findings(root, cache)[0] == [] == _findings(root)
    (root / "pyproject.toml").write_text(pyproject % ">=5")
    (finding,) = _findings(root, cache)[0]
    assert finding.args[1] == "generate" and finding.message == _findings(root)[0].message
    assert ", outside the declared range transformers>=5" in finding.message


def test_cached_messages_quote_the_range_as_written_now(tmp_path):
    # a new user's find: a range rewritten to admit the same releases (>=5.0 -> >=5.0.0) kept the cached
    # finding, whose message quoted the old text; the results' catalog key holds the text as written
    pyproject = '[project]\nname = "x"\ndependencies = ["transformers%s", "torch"]\n'
    root = _project(tmp_path / "proj", pyproject % ">=5.0")
    cache = tmp_path / "cache"
    (first,) = _findings(root, cache)[0]
    assert "declared range transformers>=5.0 [" in first.message
    for written in (">=5.0.0", ">=5.0,<9", ">=5.0"):
        (root / "pyproject.toml").write_text(pyproject % written)
        (finding,) = _findings(root, cache)[0]
        assert finding.message == _findings(root)[0].message, written
        assert f"declared range transformers{SpecifierSet(written)} [" in finding.message, written


def test_results_cache_follows_the_declared_range(tmp_path):
    root = _project(tmp_path / "proj", '[project]\nname = "x"\ndependencies = ["transformers>=5"]\n')
    cache = tmp_path / "cache"
    findings, _ = _findings(root, cache)
    assert len(findings) == 1
    findings, stats = _findings(root, cache)
    assert len(findings) == 1 and stats["hits"] == 2
    (root / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["transformers<4.50"]\n')
    findings, stats = _findings(root, cache)
    assert findings == [] and stats["misses"] >= 1
    # a range that admits the same catalogued releases, written otherwise: checked again (a finding's
    # message quotes the range as written: test_cached_messages_quote_the_range_as_written_now)
    (root / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["transformers<=4.49.0"]\n')
    findings, stats = _findings(root, cache)
    assert findings == [] and stats["misses"] >= 1
    findings, stats = _findings(root, cache)
    assert findings == [] and stats["misses"] == 0
