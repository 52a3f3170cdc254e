"""History-aware features (issue #13): fingerprints, baseline + ratchet, --since, fix pins,
restore-from-history for E9503, and the runnable demo.

Every test builds its own git repository under ``tmp_path`` (user name and e-mail set in the
repository's own config; git's global and system configuration are not read), and runs the CLI
in-process with ``--no-cache`` (no class-index cache is written).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hp_invariants import cli
from hp_invariants.history import fingerprint as fp_mod
from hp_invariants.history import plugin as history_plugin
from hp_invariants.model import Finding

REPO = Path(__file__).resolve().parent.parent
BROKEN, FIXED = REPO / "examples" / "regressions", REPO / "examples" / "fixed"
SEEDS = {  # module -> (rule id, repair commit subject)
    "hsdp_param.py": ("E9501", "Detach the local shard view"),
    "hsdp_state.py": ("E9502", "Reset at every shard degree"),
    "qwen3_vl_moe_model.py": ("E9503", "Restore get_input_embeddings"),
    "activation_swap.py": ("E9504", "Skip wrapped submodules"),
}


@pytest.fixture(autouse=True)
def _isolated_git(monkeypatch, tmp_path):
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HP_INVARIANTS_CACHE_DIR", str(tmp_path / "cache"))
    from hp_invariants.history import restore

    restore._ROOTS.clear()


class Repo:
    """A throw-away repository under ``tmp_path``; ``hp`` runs the CLI in it."""

    def __init__(self, root: Path, monkeypatch, capsys):
        self.root, self.capsys = root, capsys
        root.mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(root)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.name", "Test User")
        self.git("config", "user.email", "test@example.invalid")
        self.git("config", "commit.gpgsign", "false")
        self.write("pyproject.toml", '[project]\nname = "t"\n')

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, check=True, capture_output=True, text=True).stdout.strip()

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text(encoding="utf-8")

    def commit(self, subject: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", subject)
        return self.git("rev-parse", "HEAD")

    def hp(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = cli.main(list(args))
        out, err = self.capsys.readouterr()
        return code, out, err

    def check(self, *args: str) -> tuple[int, list[dict], str]:
        code, out, err = self.hp("check", "--no-cache", "--format", "json", *args)
        findings = json.loads(out)["findings"]
        for finding in findings:
            finding["path"] = os.path.normpath(finding["path"])
        return code, findings, err


@pytest.fixture
def repo(tmp_path, monkeypatch, capsys) -> Repo:
    return Repo(tmp_path / "repo", monkeypatch, capsys)


def incident(repo: Repo) -> dict[str, str]:
    """Commit the broken modules, then each seed repair as its own commit; return module -> sha."""
    repo.write("pkg/__init__.py", "")
    for name in SEEDS:
        repo.write(f"pkg/{name}", (BROKEN / name).read_text(encoding="utf-8"))
    repo.commit("Import the broken modules")
    shas = {}
    for name, (_rule, subject) in SEEDS.items():
        repo.write(f"pkg/{name}", (FIXED / name).read_text(encoding="utf-8"))
        shas[name] = repo.commit(subject)
    return shas


def ids(findings: list[dict]) -> list[str]:
    return sorted(f["id"] for f in findings)


# ---------------------------------------------------------------------- fingerprints
def _finding(text: str, line: int, col: int, end_line: int, end_col: int, obj: str = "f") -> Finding:
    return Finding("E9501", "local-tensor-view-not-detached", "a.py", line, col, end_line, end_col, "m", obj=obj)


def test_fingerprint_ignores_position_and_layout_but_not_code_or_scope():
    one = "x = 1\ny = t.narrow(0, 0, n)\n"
    moved = "\n\n# a comment\nx = 2\n\ny = t.narrow(0,   0,\n    n)\n"
    a = fp_mod.fingerprint(_finding(one, 2, 4, 2, 21), one)
    b = fp_mod.fingerprint(_finding(moved, 6, 4, 7, 6), moved)
    assert a == b  # moved three lines down, re-wrapped, an unrelated line edited
    assert a != fp_mod.fingerprint(_finding(one, 2, 4, 2, 21, obj="g"), one)  # other scope
    other = "x = 1\ny = t.narrow(1, 0, n)\n"
    assert a != fp_mod.fingerprint(_finding(other, 2, 4, 2, 21), other)  # other code


def test_json_and_sarif_carry_fingerprints_and_baseline_state(repo):
    repo.write("pkg/hsdp_param.py", (BROKEN / "hsdp_param.py").read_text(encoding="utf-8"))
    repo.commit("broken")
    code, findings, _ = repo.check("pkg")
    assert code == 1 and len(findings[0]["fingerprint"]) == 32
    code, out, _ = repo.hp("check", "--no-cache", "--format", "sarif", "pkg")
    result = json.loads(out)["runs"][0]["results"][0]
    assert result["partialFingerprints"] == {"hpInvariantsFingerprint/v1": findings[0]["fingerprint"]}
    assert "baselineState" not in result
    code, out, _ = repo.hp("check", "--no-cache", "--format", "sarif", "--since", "HEAD", "pkg")
    assert code == 0 and json.loads(out)["runs"][0]["results"] == []


def test_findings_stay_history_free_and_the_report_takes_annotations_beside_them():
    # issue #25: the fingerprint and baselineState live beside a finding, never in it
    import dataclasses

    from hp_invariants import output

    assert {f.name for f in dataclasses.fields(Finding)} & {"fingerprint", "baseline_state"} == set()
    finding = _finding("x = t.narrow(0, 0, n)\n", 1, 4, 1, 21)
    plain = json.loads(output.render("json", [finding], [], []))["findings"][0]
    assert "fingerprint" not in plain
    marked = [output.Annotation("ab" * 16, "new")]
    record = json.loads(output.render("json", [finding], [], [], marked))["findings"][0]
    assert list(record)[-1] == "fingerprint" and record["fingerprint"] == "ab" * 16
    result = json.loads(output.render("sarif", [finding], [], [], marked))["runs"][0]["results"][0]
    assert result["partialFingerprints"] == {output.SARIF_FINGERPRINT_KEY: "ab" * 16}
    assert result["baselineState"] == "new"
    with pytest.raises(ValueError, match="annotations"):
        output.render("json", [finding], [], [], [])


# ---------------------------------------------------------------------- pins
def test_pins_catch_each_seed_revert_inside_a_large_cleanup_with_moves_and_renames(repo):
    shas = incident(repo)
    code, out, err = repo.hp("pin", "--no-cache", *shas.values())
    assert code == 0, err
    pins = json.loads(repo.read("hp-invariants-pins.json"))["pins"]
    assert sorted(p["rule"] for p in pins) == ["E9501", "E9502", "E9503", "E9504"]
    assert {p["commit"] for p in pins} == set(shas.values())
    repo.commit("pin the repairs")
    assert repo.check()[0] == 0

    # one clean-up commit: every repair undone, plus unrelated edits, moved code and a renamed file
    param = (BROKEN / "hsdp_param.py").read_text(encoding="utf-8")
    helper = param[param.index("def set_requires_grad_if_needed"):param.index("class HSDPParam")]
    repo.write("pkg/hsdp_param.py", "# unrelated header\n" + param.replace(helper, "") + "\n\n" + helper)
    repo.git("mv", "pkg/hsdp_state.py", "pkg/fsdp_state.py")
    repo.write("pkg/fsdp_state.py", (BROKEN / "hsdp_state.py").read_text(encoding="utf-8")
               .replace("is_shard", "use_sharding").replace("shard_size: int", "sharding: bool")
               .replace("shard_size > 1", "sharding"))  # the gate is a flag the caller computes: E9502 is silent
    repo.write("pkg/qwen3_vl_moe_model.py", (BROKEN / "qwen3_vl_moe_model.py").read_text(encoding="utf-8")
               .replace("A stand-in vision encoder", "The vision encoder"))
    swap = (BROKEN / "activation_swap.py").read_text(encoding="utf-8")
    start, end = swap.index("def _check_and_mark_wrapped"), swap.index("class CheckpointWrapper")
    repo.write("pkg/walks.py", "from torch import nn\n\n\n" + swap[start:end])  # moved function
    repo.write("pkg/activation_swap.py", swap[:start] + "from pkg.walks import _check_and_mark_wrapped\n\n\n"
               + swap[end:])
    repo.write("pkg/unrelated.py", "def helper():\n    return 1\n")
    repo.commit("Clean up docstrings and layout")

    code, findings, _ = repo.check()
    assert code == 1
    reverted = [f for f in findings if f["id"] == "E9590"]
    assert len(reverted) == 4
    by_rule = {next(r for r in ("E9501", "E9502", "E9503", "E9504") if f"({r} " in f["message"]): f
               for f in reverted}
    for name, (rule, subject) in SEEDS.items():
        message = by_rule[rule]["message"]
        assert f"reverts the fix from {shas[name][:7]} '{subject}'" in message
    assert by_rule["E9502"]["path"].endswith("fsdp_state.py")
    assert by_rule["E9504"]["path"].endswith("walks.py")
    assert "E9502" not in ids(findings)  # the generic rule is silent on the renamed gate: only the pin fires


def test_stale_pin_when_location_is_gone_and_unpin(repo):
    shas = incident(repo)
    repo.hp("pin", "--no-cache", shas["activation_swap.py"])
    text = repo.read("pkg/activation_swap.py").replace("_check_and_mark_wrapped", "_mark_wrapped")
    repo.write("pkg/activation_swap.py", text)
    code, findings, _ = repo.check()
    assert [f["id"] for f in findings] == ["W9591"]
    assert findings[0]["path"].endswith("hp-invariants-pins.json") and "no longer exists" in findings[0]["message"]
    code, out, _ = repo.hp("unpin", "E9504:_check_and_mark_wrapped")
    assert code == 0 and "unpinned" in out
    assert repo.check()[0] == 0
    assert repo.hp("unpin", "E9504:nothing")[0] == 2


def test_pin_is_refused_for_a_commit_that_repairs_nothing(repo):
    repo.write("pkg/hsdp_param.py", (BROKEN / "hsdp_param.py").read_text(encoding="utf-8"))
    repo.commit("broken")
    repo.write("pkg/hsdp_param.py", repo.read("pkg/hsdp_param.py").replace("One parameter", "A parameter"))
    sha = repo.commit("Reword a docstring")
    code, _out, err = repo.hp("pin", "--no-cache", sha)
    assert code == 1 and f"refusing to pin {sha[:7]}" in err
    assert not (repo.root / "hp-invariants-pins.json").exists()
    # a commit that removes the finding by deleting the code is not a repair either
    repo.write("pkg/hsdp_param.py", "")
    sha = repo.commit("Delete the module")
    code, _out, err = repo.hp("pin", "--no-cache", sha)
    assert code == 1 and "refusing" in err


def test_fix_pin_records_what_it_fixes(repo):
    repo.write("pkg/activation_swap.py", (BROKEN / "activation_swap.py").read_text(encoding="utf-8"))
    repo.commit("broken")
    code, _out, err = repo.hp("fix", "--no-cache", "--pin", "pkg")
    assert code == 0, err
    (pin,) = json.loads(repo.read("hp-invariants-pins.json"))["pins"]
    assert pin["rule"] == "E9504" and pin["location"] == "_check_and_mark_wrapped" and pin["commit"] == ""
    repo.write("pkg/activation_swap.py", (BROKEN / "activation_swap.py").read_text(encoding="utf-8"))
    code, findings, _ = repo.check()
    assert "E9590" in ids(findings)
    assert any("`hp-invariants fix --pin`" in f["message"] for f in findings)


# ---------------------------------------------------------------------- baseline
LEGACY = "def wrap_all(model):\n    for sub in model.modules():\n        if sub._is_wrapped:\n" \
         "            raise ValueError('x')\n        sub._is_wrapped = True\n"


def test_baseline_adoption_new_violation_then_fixed_one(repo):
    repo.write("pyproject.toml", '[project]\nname = "t"\n\n[tool.hp-invariants]\nbaseline = "lint/baseline.json"\n')
    repo.write("pkg/legacy.py", LEGACY)
    repo.write("pkg/hsdp_param.py", (BROKEN / "hsdp_param.py").read_text(encoding="utf-8"))
    (repo.root / "lint").mkdir()
    code, _out, err = repo.hp("baseline", "--no-cache")
    assert code == 0, err
    data = json.loads(repo.read("lint/baseline.json"))
    assert sorted(e["rule"] for e in data["findings"]) == ["E9501", "E9504"]
    assert {e["path"] for e in data["findings"]} == {"pkg/legacy.py", "pkg/hsdp_param.py"}
    assert repo.check()[0] == 0

    # a new violation is reported, the accepted ones are not; lines moving does not matter
    repo.write("pkg/legacy.py", "\n\nimport os\n\n" + LEGACY)
    repo.write("pkg/new.py", LEGACY.replace("wrap_all", "wrap_new"))
    code, findings, _ = repo.check()
    assert code == 1 and [(f["path"], f["id"]) for f in findings] == [("pkg/new.py", "E9504")]
    code, out, _ = repo.hp("check", "--no-cache", "--format", "sarif")
    assert [r["baselineState"] for r in json.loads(out)["runs"][0]["results"]] == ["new"]
    # `baseline` does not accept the new one without --update (the ratchet)
    code, _out, err = repo.hp("baseline", "--no-cache")
    assert code == 1 and "NOT added" in err
    assert len(json.loads(repo.read("lint/baseline.json"))["findings"]) == 2

    # a fixed one: stale entry reported, fails with --fail-on-stale-baseline, dropped by `baseline`
    (repo.root / "pkg/new.py").unlink()
    repo.hp("fix", "--no-cache", "pkg/legacy.py")
    code, findings, err = repo.check()
    assert code == 0 and "stale baseline entry" in err and "pkg/legacy.py" in err
    assert repo.check("--fail-on-stale-baseline")[0] == 1
    assert repo.hp("baseline", "--no-cache")[0] == 0
    data = json.loads(repo.read("lint/baseline.json"))
    assert [e["rule"] for e in data["findings"]] == ["E9501"]
    assert repo.check("--fail-on-stale-baseline")[0] == 0
    # checking one file does not call the other files' entries stale
    code, _f, err = repo.check("--fail-on-stale-baseline", "pkg/legacy.py")
    assert code == 0 and "stale" not in err


def test_pylint_plugin_applies_a_baseline(repo):
    pytest.importorskip("pylint")
    from pylint.lint import Run

    repo.write("pkg/legacy.py", LEGACY)
    repo.hp("baseline", "--no-cache")
    repo.write("pkg/new.py", LEGACY.replace("wrap_all", "wrap_new"))
    repo.capsys.readouterr()
    Run(["--load-plugins=hp_invariants.checkers", "--disable=all", "--enable=E9504", "--persistent=n",
         "--hp-invariants-baseline=hp-invariants-baseline.json", "pkg"], exit=False)
    out = repo.capsys.readouterr().out
    assert "pkg/new.py" in out and "pkg/legacy.py" not in out
    # a copy of the accepted finding into another module is new there, as in `check` (the plugin
    # matched each module against every entry: the copy was hidden); a moved file keeps its entries
    def plugin_run() -> str:
        history_plugin._LOADED.clear()
        Run(["--load-plugins=hp_invariants.checkers", "--disable=all", "--enable=E9504", "--persistent=n",
             "--hp-invariants-baseline=hp-invariants-baseline.json", "pkg"], exit=False)
        return repo.capsys.readouterr().out

    repo.write("pkg/new.py", "")
    repo.write("pkg/copy.py", LEGACY)
    out = plugin_run()
    assert "pkg/copy.py" in out and "pkg/legacy.py" not in out
    (repo.root / "pkg" / "copy.py").unlink()
    (repo.root / "pkg" / "legacy.py").rename(repo.root / "pkg" / "moved.py")
    assert "E9504" not in plugin_run()


# ---------------------------------------------------------------------- --since
def test_since_across_a_rename_and_fix_since(repo):
    repo.write("pkg/legacy.py", LEGACY)
    base = repo.commit("legacy")
    repo.git("mv", "pkg/legacy.py", "pkg/old_wrapping.py")
    repo.write("pkg/old_wrapping.py", "import os\n\n\n" + LEGACY)  # renamed and its lines moved
    repo.write("pkg/hsdp_state.py", (BROKEN / "hsdp_state.py").read_text(encoding="utf-8"))
    repo.commit("rename + new violation")
    code, findings, err = repo.check("--since", "HEAD~1")
    assert code == 1 and [(f["path"], f["id"]) for f in findings] == [("pkg/hsdp_state.py", "E9502")]
    assert "1 already there" in err
    # naming only the renamed file: its old name is followed
    assert repo.check("--since", base, "pkg/old_wrapping.py")[0] == 0
    assert repo.check("pkg/old_wrapping.py")[0] == 1  # the finding is there, only not new
    # fix --since fixes only what was introduced
    code, _out, err = repo.hp("fix", "--no-cache", "--since", base, "pkg")
    assert "is_shard" not in repo.read("pkg/hsdp_state.py").split("def lazy_init")[1]
    assert "raise ValueError" in repo.read("pkg/old_wrapping.py")


def test_since_with_a_baseline_keeps_still_present_accepted_findings_off_the_stale_list(repo):
    # issue #25: --since ran before the baseline, so an accepted finding that --since dropped as
    # "already there" was reported as a stale baseline entry ("no longer occurs")
    repo.write("pkg/legacy.py", LEGACY)
    assert repo.hp("baseline", "--no-cache")[0] == 0
    base = repo.commit("adopt with a baseline")
    repo.write("pkg/new.py", LEGACY.replace("wrap_all", "wrap_new"))
    repo.commit("a new violation")
    code, findings, err = repo.check("--since", base, "--fail-on-stale-baseline")
    assert [(f["path"], f["id"]) for f in findings] == [("pkg/new.py", "E9504")]
    assert "stale baseline entry" not in err and code == 1
    repo.write("pkg/new.py", "")  # the new one fixed: clean, and still nothing stale
    code, findings, err = repo.check("--since", base, "--fail-on-stale-baseline")
    assert (code, findings) == (0, []) and "stale" not in err
    repo.write("pkg/legacy.py", "")  # the accepted one gone: now it is stale
    code, _findings, err = repo.check("--since", base, "--fail-on-stale-baseline")
    assert code == 1 and "stale baseline entry" in err and "pkg/legacy.py" in err


def test_a_copy_of_old_code_into_another_file_is_new_to_fix_since_and_to_a_baseline_with_since(repo):
    """A new user's find, twice: a fingerprint names no file, so a copy of an old violation into
    another file has the old one's fingerprint. `check --since` reported the copy, but `fix --since`
    matched it against the revision's findings file by file and fixed nothing ("none left"); and with a
    baseline accepting the old one, `check --since` filtered after the baseline took the copy for the
    old instance the baseline had already matched, hiding it."""
    repo.write("pkg/legacy.py", LEGACY)
    assert repo.hp("baseline", "--no-cache")[0] == 0
    base = repo.commit("adopt with a baseline")
    repo.write("pkg/copy.py", LEGACY)  # the same function, the same code: the same fingerprint
    code, findings, err = repo.check("--since", base)
    assert code == 1 and [(f["path"], f["id"]) for f in findings] == [("pkg/copy.py", "E9504")]
    assert "1 finding(s) introduced, 1 already there" in err and "1 finding(s) accepted, 1 new" in err
    code, findings, _ = repo.check("--since", base, "--no-baseline")
    assert [f["path"] for f in findings] == ["pkg/copy.py"]
    code, _out, err = repo.hp("fix", "--no-cache", "--since", base, "pkg")
    assert "raise ValueError" not in repo.read("pkg/copy.py"), err
    assert repo.read("pkg/legacy.py") == LEGACY  # already there at the revision: left alone
    assert repo.check("--since", base)[:2] == (0, [])


def test_since_follows_a_rename_so_the_copy_is_the_new_finding(repo):
    """A second new user's find: with pkg/a.py renamed to pkg/c.py and its code copied into pkg/b.py,
    `check --since` and `fix --since` took the copy for the old finding and blamed the renamed file
    (matched by name order). A renamed file keeps its findings (git's rename detection)."""
    repo.write("pkg/a.py", LEGACY)
    repo.write("pkg/b.py", "x = 1\n")
    base = repo.commit("legacy")
    repo.write("pkg/b.py", "x = 1\n\n\n" + LEGACY)
    repo.git("mv", "pkg/a.py", "pkg/c.py")
    repo.commit("rename and copy")
    code, findings, _ = repo.check("--since", base)
    assert code == 1 and [f["path"] for f in findings] == ["pkg/b.py"]
    repo.hp("fix", "--no-cache", "--since", base, "pkg")
    assert "raise ValueError" not in repo.read("pkg/b.py") and repo.read("pkg/c.py") == LEGACY


def test_a_baseline_with_since_follows_a_rename_so_the_copy_is_reported(repo):
    """A new user's find: a baseline accepting pkg/a.py's finding, then pkg/a.py renamed to pkg/c.py and
    its code copied into pkg/b.py. The baseline paired its entry with the copy (name order) and called
    the renamed file's finding new; `--since` called that one old (git's rename): each filter hid one,
    and `check --since` said "1 introduced" with nothing shown, exit 0. With `--since` the baseline
    follows git's renames too: the copy is reported. Fails before."""
    repo.write("pkg/a.py", LEGACY)
    assert repo.hp("baseline", "--no-cache")[0] == 0
    base = repo.commit("adopt with a baseline")
    repo.git("mv", "pkg/a.py", "pkg/c.py")
    repo.write("pkg/b.py", LEGACY)
    code, findings, err = repo.check("--since", base)
    assert code == 1 and [f["path"] for f in findings] == ["pkg/b.py"], err
    assert "1 finding(s) accepted, 1 new" in err and "1 finding(s) introduced, 1 already there" in err


def test_baseline_keeps_the_entries_a_run_could_not_check(repo):
    """A new user's find: `baseline` and `check --fail-on-stale-baseline` took every entry of a file over
    its time or size limit, of a rule not selected, or of a same-code file not named, for "no longer
    occurring" and dropped it for good (the baseline only shrinks). Only what the run checked (the file,
    parsed within its limits, and the rule run there) can be stale."""
    repo.write("pkg/big.py", "".join(LEGACY.replace("wrap_all", f"wrap_{i}") + "\n\n" for i in range(400)))
    repo.write("pkg/small.py", LEGACY)
    repo.write("pkg/small2.py", LEGACY)  # the same fingerprint as small.py's
    assert repo.hp("baseline", "--no-cache")[0] == 0
    total = len(json.loads(repo.read("hp-invariants-baseline.json"))["findings"])
    assert total == 402
    for args in (["--timeout-per-file", "0.0001"], ["--max-file-size", "0.001"], ["--select", "E9503"],
                 ["pkg/small.py"]):
        _code, _out, err = repo.hp("baseline", "--no-cache", *args)
        assert "(0 no longer occurring removed" in err, (args, err)
        assert len(json.loads(repo.read("hp-invariants-baseline.json"))["findings"]) == total, args
        _code, _findings, err = repo.check("--fail-on-stale-baseline", *args)
        assert "stale baseline entry" not in err, (args, err)
    repo.write("pkg/small2.py", "")  # really gone: stale, and dropped
    _code, _out, err = repo.hp("baseline", "--no-cache")
    assert "(1 no longer occurring removed" in err


def test_since_errors_outside_git_and_for_unknown_rev(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.py").write_text("x = 1\n")
    monkeypatch.chdir(folder)
    assert cli.main(["check", "--no-cache", "--since", "HEAD", "."]) == 2
    assert "not inside a git repository" in capsys.readouterr().err
    repo = Repo(tmp_path / "repo", monkeypatch, capsys)
    repo.write("a.py", "x = 1\n")
    repo.commit("one")
    code, _out, err = repo.hp("check", "--no-cache", "--since", "no-such-branch")
    assert code == 2 and "unknown revision 'no-such-branch'" in err
    code, _out, err = repo.hp("pin", "no-such-commit")
    assert code == 2 and "unknown revision" in err


def test_a_missing_file_named_on_the_command_line_is_an_error(tmp_path, monkeypatch, capsys):
    # a new user's find: `--pins /nonexistent.json` ran without any pin (exit by the findings), while a
    # missing `--baseline` was already an error
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.py").write_text("x = 1\n")
    monkeypatch.chdir(folder)
    assert cli.main(["check", "--no-cache", "--pins", "missing-pins.json", "."]) == 2
    assert "pins file missing-pins.json not found" in capsys.readouterr().err
    assert cli.main(["check", "--no-cache", "--baseline", "missing-baseline.json", "."]) == 2
    assert "baseline file missing-baseline.json not found" in capsys.readouterr().err
    assert cli.main(["check", "--no-cache", "."]) == 0  # neither given: neither is needed


# ---------------------------------------------------------------------- restore
def test_restore_deleted_method_whose_class_was_later_edited(repo):
    repo.write("pkg/model.py", (FIXED / "qwen3_vl_moe_model.py").read_text(encoding="utf-8"))
    added = repo.commit("Add the VL model with its accessors")
    text = repo.read("pkg/model.py")
    start = text.index("    def get_input_embeddings")
    end = text.index("    def set_input_embeddings")
    repo.write("pkg/model.py", text[:start] + text[end:])
    deleted = repo.commit("Docstring clean-up")
    text = repo.read("pkg/model.py").replace(
        "        self.language_model = TextModel(vocab_size, hidden_size, num_layers)\n",
        "        self.language_model = TextModel(vocab_size, hidden_size, num_layers)\n        self.dropout = 0.1\n")
    repo.write("pkg/model.py", text)
    repo.commit("Add dropout to the VL model")
    code, findings, _ = repo.check("pkg")
    (finding,) = findings
    assert finding["id"] == "E9503"
    assert f"deleted by {deleted[:7]} 'Docstring clean-up'" in finding["message"]
    assert f"last defined by {added[:7]} 'Add the VL model with its accessors'" in finding["message"]
    assert finding["fix"]["applicability"] == "unsafe"
    code, out, _ = repo.hp("fix", "--no-cache", "--unsafe-fixes", "--diff", "pkg")
    assert code == 1 and "+    def get_input_embeddings(self):" in out
    assert repo.hp("fix", "--no-cache", "pkg")[0] == 1  # a safe-only run leaves it
    assert repo.hp("fix", "--no-cache", "--unsafe-fixes", "pkg")[0] == 0
    restored = repo.read("pkg/model.py")
    assert restored.index("def get_input_embeddings") < restored.index("def set_input_embeddings")
    assert "self.dropout = 0.1" in restored and repo.check("pkg")[0] == 0


def test_no_history_no_restore(repo):
    repo.write("pkg/model.py", (BROKEN / "qwen3_vl_moe_model.py").read_text(encoding="utf-8"))
    repo.commit("model")
    (finding,) = repo.check("pkg")[1]
    assert "deleted by" not in finding["message"] and finding["fix"]["applicability"] == "safe"


# ---------------------------------------------------------------------- docs, config, demo
def test_explain_pin_messages(capsys):
    for code in ("E9590", "reverted-fix", "W9591", "stale-pin"):
        assert cli.main(["explain", code]) == 0
        out = capsys.readouterr().out
        assert "reverts the fix from" in out and "hp-invariants unpin" in out


def test_config_keys_are_validated(repo):
    repo.write("pyproject.toml", '[project]\nname = "t"\n\n[tool.hp-invariants]\nbaseline = 3\n')
    repo.write("a.py", "x = 1\n")
    code, _out, err = repo.hp("check", "--no-cache")
    assert code == 2 and "'baseline' must be a file path" in err


def test_demo_replays_the_incident():
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "history" / "demo.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert out.count("pinned E95") == 4 and "refusing to pin" in out
    cleanup = out.split("==== 6a.")[1].split("==== 6b.")[0]
    assert cleanup.count("E9590 reverted-fix: reverts the fix from") == 4
    since = out.split("==== 6b.")[1].split("==== 6c.")[0]
    assert "legacy_wrap.py" not in since and "1 already there" in since
    assert "+    def get_input_embeddings(self):" in out.split("==== 6c.")[1]
    assert out.rstrip().endswith("demo OK")


def test_pins_catch_plain_git_reverts_of_each_seed_repair(repo):
    shas = incident(repo)
    assert repo.hp("pin", "--no-cache", *shas.values())[0] == 0
    repo.commit("pin")
    for name, sha in shas.items():
        repo.git("revert", "--no-edit", sha)
        code, findings, _ = repo.check()
        reverted = [f for f in findings if f["id"] == "E9590"]
        assert any(f"reverts the fix from {sha[:7]} '{SEEDS[name][1]}'" in f["message"] for f in reverted), name
        assert SEEDS[name][0] in ids(findings)  # the generic rule fires too: the code is back as it was
    assert len([f for f in repo.check()[1] if f["id"] == "E9590"]) == 4


def test_pins_stay_quiet_when_the_repairs_survive_a_refactor(repo):
    """The clean twin: moves, renames and unrelated edits that keep every repair report nothing."""
    shas = incident(repo)
    assert repo.hp("pin", "--no-cache", *shas.values())[0] == 0
    repo.git("mv", "pkg/hsdp_param.py", "pkg/params.py")
    repo.write("pkg/params.py", repo.read("pkg/params.py").replace("local_view", "shard_view")
               .replace("padded", "buffer"))  # renamed locals, still detached
    repo.write("pkg/hsdp_state.py", repo.read("pkg/hsdp_state.py").replace(
        "            for hsdp_param in self.hsdp_params:",
        "            count = 0\n            for hsdp_param in self.hsdp_params:\n                count += 1"))
    repo.write("pkg/qwen3_vl_moe_model.py", repo.read("pkg/qwen3_vl_moe_model.py").replace(
        "A stand-in vision encoder", "The vision encoder"))
    repo.write("pkg/activation_swap.py", "# moved below\n\n" + repo.read("pkg/activation_swap.py"))
    repo.commit("refactor")
    code, findings, _ = repo.check()
    assert (code, findings) == (0, [])


def test_a_pinned_ungating_repair_is_reverted_only_by_a_condition_about_the_shard_degree(repo):
    """A new user's find: any condition added around the pinned step was a "reverted fix" ('runs only
    when 'self.hsdp_params is not None' holds again'), though it holds at world size 1 and never held
    before. A condition naming the removed gate's word, a degree word or quantity still is (a renamed
    flag included: the generic rule may not see it)."""
    shas = incident(repo)
    assert repo.hp("pin", "--no-cache", shas["hsdp_state.py"])[0] == 0
    fixed = repo.read("pkg/hsdp_state.py")
    for condition, reverted in (("self.hsdp_params is not None", False), ("len(self.hsdp_params) > 0", False),
                                ("self.use_sharding", True), ("dist.get_world_size() > 1", True),
                                # an `or` runs at degree 1 when its other side holds (a second new user's find)
                                ("(self.is_shard or self.force_reset)", False),
                                ("(self.is_shard or dist.get_world_size() > 1)", True)):
        repo.write("pkg/hsdp_state.py", fixed.replace("if not self._reset_sharded_params:",
                                                      f"if {condition} and not self._reset_sharded_params:"))
        _code, findings, _ = repo.check()
        assert ("E9590" in ids(findings)) is reverted, (condition, findings)


def test_check_reshapes_the_findings_of_rules_with_the_member_hook():
    # check's restore pass imports the restore machinery only when a finding of a rule with the
    # missing_member hook occurs: E9503 has it, the other bundled rules do not
    from hp_invariants.history import cli as history_cli
    from hp_invariants.registry import RULES

    assert [r.rule_id for r in RULES if history_cli.has_member_hook(r)] == ["E9503"]
