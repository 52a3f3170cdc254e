"""History on the shapes real repositories have (issue #26): a pin for any repair (a call renamed to
the existing member, not only the four repairs of the incident), provenance for members that were
assigned, defined or renamed (not only ``def``s), refusals with their reasons, the provenance cache,
and ``--since`` across merge commits.

Every test builds its own git repository under ``tmp_path`` (see ``tests/test_history.py``, whose
fixtures it shares) and runs the CLI in-process.
"""

from __future__ import annotations

import json

import pytest
from test_history import _isolated_git, ids, repo  # noqa: F401 - fixtures shared with test_history

COLLATOR = '''\
class Collator:
    """Applies the data hook to every sample."""

    def __init__(self, fn, hook=None):
        self.data_process_fn = fn
        self.hook = hook

    def run_hook(self, batch):
        if batch:
            self.hook(batch)

    def __call__(self, batch):
        return [self.data_process_fn(x) for x in batch]


COLLATE = Collator(str)
'''


def renamed_then_fixed(repo) -> dict[str, str]:
    """The shape the issue found on a real library: a refactor renames a member, the callers keep
    the old name (E9503), a later hotfix changes the call to the new name. The hook is deleted in
    between (a finding the hotfix leaves alone). Returns subject -> sha."""
    repo.write("pkg/__init__.py", "")
    repo.write("pkg/collate.py", COLLATOR)
    shas = {"add": repo.commit("Add the collator")}
    repo.write("pkg/collate.py", repo.read("pkg/collate.py").replace("self.data_process_fn = fn",
                                                                     "self.data_process_func = fn"))
    shas["rename"] = repo.commit("Rename the collator's process function")
    repo.write("pkg/collate.py", repo.read("pkg/collate.py").replace("        self.hook = hook\n", ""))
    shas["drop"] = repo.commit("Drop the collator hook")
    repo.write("pkg/collate.py", repo.read("pkg/collate.py").replace("self.data_process_fn(x)",
                                                                     "self.data_process_func(x)"))
    shas["fix"] = repo.commit("Call the renamed process function")
    return shas


def by_member(findings: list[dict]) -> dict[str, dict]:
    return {f["message"].split("no attribute '")[1].split("'")[0]: f for f in findings if f["id"] == "E9503"}


# ---------------------------------------------------------------------- provenance of members
def test_provenance_names_the_rename_of_an_assigned_member_and_offers_the_new_name(repo):
    shas = renamed_then_fixed(repo)
    repo.git("checkout", "-q", shas["drop"])  # the parent of the hotfix
    code, findings, _ = repo.check("pkg")
    found = by_member(findings)
    message = found["data_process_fn"]["message"]
    assert "did you mean 'data_process_func'?" in message  # the rule's own hint stays
    assert (f"renamed to 'data_process_func' in {shas['rename'][:7]} 'Rename the collator's process function' "
            f"(attribute of 'Collator', pkg/collate.py)") in message
    fix = found["data_process_fn"]["fix"]
    assert fix["applicability"] == "unsafe"
    assert fix["message"] == f"use 'data_process_func' (renamed in {shas['rename'][:7]})"
    assert repo.hp("fix", "--no-cache", "--unsafe-fixes", "pkg")[0] == 1  # the deleted hook stays
    assert "self.data_process_func(x) for x in batch" in repo.read("pkg/collate.py")


def test_provenance_of_a_deleted_attribute_names_the_commit_and_restores_nothing(repo):
    shas = renamed_then_fixed(repo)
    code, findings, _ = repo.check("pkg")
    (hook,) = findings
    assert (f"deleted by {shas['drop'][:7]} 'Drop the collator hook' (attribute of 'Collator' until then, "
            f"pkg/collate.py)") in hook["message"]
    assert hook["fix"] is None  # an attribute is never restored: its value came from code that may be gone


def test_provenance_of_a_method_renamed_in_a_base_class_of_another_file(repo):
    repo.write("pkg/__init__.py", "")
    repo.write("pkg/base.py", "class Base:\n    def setup(self, cfg):\n        self.cfg = cfg\n        return cfg\n")
    repo.write("pkg/child.py", "from pkg.base import Base\n\n\nclass Child(Base):\n    def run(self):\n"
                               "        return self.setup({})\n\n\nCHILD = Child()\n")
    repo.commit("base and child")
    repo.write("pkg/base.py", repo.read("pkg/base.py").replace("def setup", "def prepare"))
    rename = repo.commit("Rename setup to prepare")
    (finding,) = repo.check("pkg")[1]
    assert f"renamed to 'prepare' in {rename[:7]} 'Rename setup to prepare' (method of 'Base', pkg/base.py)" \
        in finding["message"]
    assert finding["fix"] is None  # the class is in another file: nothing to rewrite here


def test_provenance_names_a_rename_to_a_longer_name_holding_the_old_one(repo):
    """``process`` -> ``process_batch``: the old name stays a substring of the new one, so counting
    the text (``git log -S process``) sees no change; whole identifiers are counted instead."""
    repo.write("pkg/__init__.py", "")
    repo.write("pkg/collate.py", "class Collator:\n    def process(self, batch):\n        return batch\n\n"
                                 "    def __call__(self, batch):\n        return self.process(batch)\n\n\n"
                                 "COLLATE = Collator()\n")
    repo.commit("collator")
    repo.write("pkg/collate.py", repo.read("pkg/collate.py").replace("def process(", "def process_batch("))
    rename = repo.commit("Rename process to process_batch")
    (finding,) = repo.check("pkg")[1]
    assert f"renamed to 'process_batch' in {rename[:7]} 'Rename process to process_batch'" in finding["message"]
    assert finding["fix"]["message"] == f"use 'process_batch' (renamed in {rename[:7]})"


def test_a_method_deleted_then_another_added_is_not_a_rename(repo):
    repo.write("pkg/m.py", "class Model:\n    def embed(self, x):\n        return x * 2\n\n"
                           "    def forward(self, x):\n        return self.embed(x)\n\n\nMODEL = Model()\n")
    repo.commit("model")
    repo.write("pkg/m.py", repo.read("pkg/m.py").replace(
        "    def embed(self, x):\n        return x * 2\n",
        "    def logits(self, x, table, bias=None):\n        out = table[x]\n        return out if bias is None else out + bias\n"))
    dropped = repo.commit("Replace embed by a logits head")
    (finding,) = repo.check("pkg")[1]
    assert f"deleted by {dropped[:7]} 'Replace embed by a logits head'" in finding["message"]
    assert "renamed" not in finding["message"] and finding["fix"]["message"].startswith("restore 'embed'")


def test_provenance_answers_are_cached_per_head(repo, monkeypatch):
    from hp_invariants.history import git

    shas = renamed_then_fixed(repo)
    repo.git("checkout", "-q", shas["drop"])
    first = repo.hp("check", "pkg")[1]
    assert "renamed to 'data_process_func'" in first
    calls = []
    monkeypatch.setattr(git, "log_file_pickaxe", lambda *a, **k: calls.append(a) or [])
    assert repo.hp("check", "pkg")[1] == first and calls == []  # same HEAD: from the cache
    repo.git("checkout", "-q", shas["fix"])
    repo.git("checkout", "-q", shas["drop"], "--", ".")  # same files, another HEAD: asked again
    assert "renamed to" not in repo.hp("check", "pkg")[1] and calls


# ---------------------------------------------------------------------- pins of any repair
def test_a_rename_repair_is_pinned_as_its_removed_finding_and_a_revert_is_reported(repo):
    shas = renamed_then_fixed(repo)
    code, out, err = repo.hp("pin", "--no-cache", shas["fix"])
    assert code == 0, err
    assert f"pinned E9503:Collator.__call__ (undefined-method-call, pkg/collate.py) from {shas['fix'][:7]}" in out
    (pin,) = json.loads(repo.read("hp-invariants-pins.json"))["pins"]
    assert (pin["kind"], pin["location"], pin["broken"]) == ("finding", "Collator.__call__", "self.data_process_fn")
    # the hook's finding stays, in another method (run_hook): nothing else kept in __call__
    assert len(pin["detail"]["fingerprints"]) == 1 and len(pin["detail"]["kept"]) == 0
    repo.commit("pin the hotfix")
    code, findings, _ = repo.check()
    assert ids(findings) == ["E9503"]  # the deleted hook: there at the fix, so it is not a return
    repo.git("revert", "--no-edit", shas["fix"])
    code, findings, _ = repo.check()
    (reverted,) = [f for f in findings if f["id"] == "E9590"]
    assert reverted["message"].startswith(
        f"reverts the fix from {shas['fix'][:7]} 'Call the renamed process function'")
    assert "the undefined-method-call finding it removed is back in Collator.__call__: `self.data_process_fn` " \
           "(the same code) (E9503 undefined-method-call; pin E9503:Collator.__call__)" in reverted["message"]
    assert (reverted["line"], reverted["column"]) == (12, 17)


def test_a_pinned_finding_returns_after_the_file_is_renamed_and_the_code_moves(repo):
    shas = renamed_then_fixed(repo)
    assert repo.hp("pin", "--no-cache", shas["fix"])[0] == 0
    repo.git("mv", "pkg/collate.py", "pkg/batching.py")
    text = repo.read("pkg/batching.py").replace("self.data_process_func(x) for x in batch",
                                                "self.data_process_fn(sample) for sample in batch")
    repo.write("pkg/batching.py", "import os\n\n\n" + text)
    repo.commit("Move the collator; back to the old name")
    (reverted,) = [f for f in repo.check()[1] if f["id"] == "E9590"]
    assert reverted["path"].endswith("batching.py") and "(the same code)" in reverted["message"]


def test_a_repair_made_in_another_file_is_pinned_where_the_finding_was(repo):
    # the fix adds the missing method to the base class in base.py; child.py, where the finding is,
    # does not change: pin also checks the files that name a class of the changed files
    repo.write("pkg/__init__.py", "")
    repo.write("pkg/base.py", "class Base:\n    def prepare(self):\n        return 1\n")
    repo.write("pkg/child.py", "from pkg.base import Base\n\n\nclass Child(Base):\n    def run(self):\n"
                               "        return self.setup()\n\n\nCHILD = Child()\n")
    repo.commit("child calls a setup its base lacks")
    repo.write("pkg/base.py", repo.read("pkg/base.py") + "\n    def setup(self):\n        return self.prepare()\n")
    fix = repo.commit("Give the base its setup")
    code, out, err = repo.hp("pin", "--no-cache", fix)
    assert code == 0, err
    assert "pinned E9503:Child.run (undefined-method-call, pkg/child.py)" in out
    repo.git("revert", "--no-edit", fix)
    (reverted,) = [f for f in repo.check()[1] if f["id"] == "E9590"]
    assert reverted["path"] == "pkg/child.py" and f"reverts the fix from {fix[:7]}" in reverted["message"]


def test_a_fix_that_also_renames_the_scope_is_pinned_under_both_names(repo):
    repo.write("pkg/m.py", "class Inner:\n    def put(self, v):\n        return v\n\n\nclass OldWrapper:\n"
                           "    def __init__(self):\n        self.inner = Inner()\n\n    def set_value(self, v):\n"
                           "        self.inner.set(v)\n        return v\n\n\nW = OldWrapper()\n")
    repo.commit("wrapper")
    text = repo.read("pkg/m.py").replace("OldWrapper", "NewWrapper").replace("self.inner.set(v)", "self.inner.put(v)")
    repo.write("pkg/m.py", text)
    fix = repo.commit("Rename the wrapper; call put")
    code, out, err = repo.hp("pin", "--no-cache", fix)
    assert code == 0 and "pinned E9503:NewWrapper.set_value" in out, err
    (pin,) = json.loads(repo.read("hp-invariants-pins.json"))["pins"]
    assert pin["detail"]["also"] == ["OldWrapper.set_value"]
    assert repo.check()[0] == 0  # the renamed scope exists: not stale
    repo.git("revert", "--no-edit", fix)  # the old names come back, and the finding with them
    (reverted,) = [f for f in repo.check()[1] if f["id"] == "E9590"]
    assert "back in OldWrapper.set_value" in reverted["message"]


def test_pin_refusals_say_why(repo):
    shas = renamed_then_fixed(repo)
    repo.write("pkg/collate.py", repo.read("pkg/collate.py").replace("Applies the data hook", "Applies the hook"))
    reword = repo.commit("Reword a docstring")
    code, _out, err = repo.hp("pin", "--no-cache", reword)
    assert code == 1 and f"refusing to pin {reword[:7]} 'Reword a docstring': it removed no finding" in err
    repo.write("pkg/collate.py", repo.read("pkg/collate.py").replace(
        "            self.hook(batch)\n", "            pass\n"))
    repo.write("pkg/other.py", "x = 1\n")
    cleanup = repo.commit("Remove the hook call")
    assert repo.hp("pin", "--no-cache", cleanup)[0] == 0  # a finding removed in place: pinned
    repo.git("checkout", "-q", shas["drop"], "--", "pkg/collate.py")
    repo.commit("back to the broken collator")
    text = repo.read("pkg/collate.py")
    repo.write("pkg/collate.py", text[:text.index("    def __call__")].rstrip() + "\n\n\nCOLLATE = Collator(str)\n")
    removed_scope = repo.commit("Delete the broken __call__")
    code, _out, err = repo.hp("pin", "--no-cache", removed_scope)
    assert code == 1 and "the change deleted 'Collator.__call__' instead of repairing it (nothing left to guard)" in err
    repo.git("rm", "-q", "pkg/collate.py")
    repo.git("checkout", "-q", shas["drop"], "--", "pkg/collate.py")
    repo.commit("the broken collator once more")
    repo.git("rm", "-q", "pkg/collate.py")
    removed_file = repo.commit("Delete the collator module")
    code, _out, err = repo.hp("pin", "--no-cache", removed_file)
    assert code == 1 and "the change deleted pkg/collate.py (nothing left to guard)" in err


def test_a_pins_file_that_cannot_be_written_is_a_one_line_error(repo):
    shas = renamed_then_fixed(repo)
    code, _out, err = repo.hp("pin", "--no-cache", "--pins", str(repo.root / "no" / "such" / "pins.json"),
                              shas["fix"])
    assert code == 2 and "cannot write the pins" in err and "Traceback" not in err


# ---------------------------------------------------------------------- --since across merges
LEGACY = "def {name}(model):\n    for sub in model.modules():\n        if sub._is_wrapped:\n" \
         "            raise ValueError('x')\n        sub._is_wrapped = True\n"


def test_since_across_a_merge_commit(repo):
    repo.write("pkg/a.py", LEGACY.format(name="wrap_a"))
    base = repo.commit("a")
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("pkg/b.py", LEGACY.format(name="wrap_b"))
    repo.commit("b on the branch")
    repo.git("checkout", "-q", "main")
    repo.write("pkg/c.py", LEGACY.format(name="wrap_c"))
    repo.commit("c on main")
    repo.git("merge", "-q", "--no-ff", "--no-edit", "feature")
    assert len(repo.git("rev-list", "--parents", "-n1", "HEAD").split()) == 3  # HEAD is a merge
    code, findings, err = repo.check("--since", base)
    assert sorted(f["path"] for f in findings) == ["pkg/b.py", "pkg/c.py"] and "1 already there" in err
    code, findings, _ = repo.check("--since", "HEAD^1")  # main before the merge: what the merge brought
    assert [f["path"] for f in findings] == ["pkg/b.py"]
    code, findings, _ = repo.check("--since", "HEAD^2")  # the branch: what main had meanwhile
    assert [f["path"] for f in findings] == ["pkg/c.py"]
    assert repo.check("--since", "HEAD")[:2] == (0, [])


@pytest.mark.parametrize("rev", ["HEAD~1", "main~1"])
def test_since_names_the_revision_it_compared_with(repo, rev):
    repo.write("pkg/a.py", LEGACY.format(name="wrap_a"))
    repo.commit("a")
    repo.write("pkg/b.py", LEGACY.format(name="wrap_b"))
    repo.commit("b")
    code, findings, err = repo.check("--since", rev)
    assert [f["path"] for f in findings] == ["pkg/b.py"] and "'a': 1 finding(s) introduced" in err
