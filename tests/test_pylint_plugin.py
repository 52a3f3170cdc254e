"""The pylint plugin ``hp_invariants.checkers``: options, disables, confidence, torch absent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_cli import GATED
from fixturelib import blocked_torch_env


def _pylint(tmp_path: Path, *args: str) -> tuple[int, list[dict]]:
    proc = subprocess.run(
        [sys.executable, "-m", "pylint", "--load-plugins=hp_invariants.checkers", "--disable=all",
         "--enable=E9501,E9502,E9503,E9504", "--output-format=json", "--score=n", "--persistent=n", *args],
        capture_output=True, text=True, cwd=tmp_path, env=blocked_torch_env(tmp_path),
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout or "[]")


def test_message_fields_and_confidence(tmp_path: Path):
    (tmp_path / "m.py").write_text(GATED)
    proc = subprocess.run(
        [sys.executable, "-m", "pylint", "--load-plugins=hp_invariants.checkers", "--disable=all",
         "--enable=E9502", "--output-format=json2", "--persistent=n", "m.py"],
        capture_output=True, text=True, cwd=tmp_path, env=blocked_torch_env(tmp_path),
    )
    assert proc.returncode & 2  # pylint's bit for an error message
    (msg,) = json.loads(proc.stdout)["messages"]
    assert (msg["messageId"], msg["symbol"], msg["line"]) == ("E9502", "shard-gated-reset", 5)
    assert msg["obj"] == "State.lazy_init"
    assert "reset_sharded_param" in msg["message"]
    assert msg["confidence"] in {"HIGH", "INFERENCE", "CONTROL_FLOW"}


def test_pylint_disable_and_noqa(tmp_path: Path):
    (tmp_path / "a.py").write_text(GATED.replace("p.reset_sharded_param()", "p.reset_sharded_param()  # pylint: disable=E9502"))
    (tmp_path / "b.py").write_text(GATED.replace("p.reset_sharded_param()", "p.reset_sharded_param()  # noqa: E9502"))
    code, messages = _pylint(tmp_path, "a.py", "b.py")
    assert (code, messages) == (0, [])


def test_options_from_pylintrc_and_pyproject(tmp_path: Path):
    (tmp_path / "m.py").write_text(GATED.replace("reset_sharded_param", "materialize"))
    assert _pylint(tmp_path, "m.py")[1] == []
    (tmp_path / "pylintrc").write_text("[HP-INVARIANTS]\nunconditional-calls=materialize,reset_sharded_param\n")
    code, messages = _pylint(tmp_path, "--rcfile=pylintrc", "m.py")
    assert [m["symbol"] for m in messages] == ["shard-gated-reset"]
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pylint.hp-invariants]\nunconditional-calls = ["materialize"]\n')
    code, messages = _pylint(tmp_path, "--rcfile=pyproject.toml", "m.py")
    assert [m["symbol"] for m in messages] == ["shard-gated-reset"]
    # extend-<option> adds to the default (reset_sharded_param stays), the plain key replaces it
    (tmp_path / "d.py").write_text(GATED)
    for body, reported in (('extend-unconditional-calls = ["materialize"]', ["d.py", "m.py"]),
                           ('unconditional-calls = ["materialize"]', ["m.py"])):
        (tmp_path / "pyproject.toml").write_text(f"[tool.pylint.hp-invariants]\n{body}\n")
        code, messages = _pylint(tmp_path, "--rcfile=pyproject.toml", "d.py", "m.py")
        assert sorted(m["path"] for m in messages) == reported, body


def test_an_invalid_configuration_fails_the_run_even_with_only_rule_messages_enabled(tmp_path: Path):
    """A bad ``[tool.hp-invariants]`` table is fatal, as in the CLI (exit 2): with only the rule
    messages enabled the plugin used to report nothing and pylint passed with every check off."""
    (tmp_path / "m.py").write_text(GATED)
    for table in ("select = 5\n", "bogus-key = 1\n"):
        (tmp_path / "pyproject.toml").write_text("[tool.hp-invariants]\n" + table)
        code, messages = _pylint(tmp_path, "m.py")  # --disable=all --enable=E9501,...,E9504
        assert code & 1 and [m["message-id"] for m in messages] == ["F9500"]
        assert "pyproject.toml [tool.hp-invariants]" in messages[0]["message"]


def test_an_invalid_timeout_option_fails_the_run(tmp_path: Path):
    """A new user's find: hp-invariants-timeout=-1, inf or nan ran every module with no budget at all;
    it is a configuration error (F9500), as the CLI's --timeout-per-file and the TOML key are."""
    (tmp_path / "m.py").write_text(GATED)
    for value in ("-1", "inf", "nan"):
        code, messages = _pylint(tmp_path, f"--hp-invariants-timeout={value}", "m.py")
        assert code & 1 and [m["message-id"] for m in messages] == ["F9500"], value
        assert "'hp-invariants-timeout' must be a finite number >= 0" in messages[0]["message"]
    code, messages = _pylint(tmp_path, "--hp-invariants-timeout=30", "m.py")
    assert [m["message-id"] for m in messages] == ["E9502"]


def test_a_module_over_its_budget_is_named_even_with_only_the_rules_enabled(tmp_path: Path):
    """A new user's find: with --disable=all --enable=<the rules>, a module over hp-invariants-timeout
    vanished silently (F9501 off): like F9500, F9501 is turned on when it happens; the other modules
    are still checked."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "slow.py").write_text("".join(
        f"def f{i}(model):\n    for sub in model.modules():\n        if sub._w{i}:\n            raise ValueError()\n"
        for i in range(3000)))
    (tmp_path / "m.py").write_text(GATED)
    code, messages = _pylint(tmp_path, "--hp-invariants-timeout=0.05", "slow.py", "m.py")
    assert sorted((m["module"], m["message-id"]) for m in messages) == [("m", "E9502"), ("slow", "F9501")]
    assert code & 1


def test_disabled_messages_do_no_work(tmp_path: Path):
    (tmp_path / "m.py").write_text(GATED)
    proc = subprocess.run(
        [sys.executable, "-m", "pylint", "--load-plugins=hp_invariants.checkers", "--disable=all",
         "--enable=E9501", "--score=n", "--persistent=n", "m.py"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == ""


def test_unused_noqa_is_reported_not_a_crash(tmp_path: Path):
    """With report-unused-suppressions, the CLI reports an unused '# noqa: E95xx' as I9500; the plugin
    used to crash on it (UnknownMessageError), losing every finding of the module. It now declares the
    message (symbol hp-invariants-useless-suppression, pylint's own useless-suppression being I0021)."""
    (tmp_path / "pyproject.toml").write_text("[tool.hp-invariants]\nreport-unused-suppressions = true\n")
    (tmp_path / "a.py").write_text(GATED + "\nx = 1  # noqa: E9503\n")
    _, only_rules = _pylint(tmp_path, "a.py")
    assert [m["message-id"] for m in only_rules] == ["E9502"]  # I9500 not enabled: left out, no crash
    _, both = _pylint(tmp_path, "--enable=I9500", "a.py")
    assert sorted(m["message-id"] for m in both) == ["E9502", "I9500"]
    (useless,) = [m for m in both if m["message-id"] == "I9500"]
    assert useless["symbol"] == "hp-invariants-useless-suppression" and "E9503" in useless["message"]
    assert useless["line"] == GATED.count("\n") + 2


def test_parallel_jobs_report_what_one_process_reports(tmp_path: Path):
    """pylint -j 2 pickles the linter, plugin included, into its workers (regression: the lazy
    resolver's attribute forwarding recursed on an instance made without __init__)."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a.py").write_text(GATED)
    (tmp_path / "b.py").write_text(GATED)
    code_one, one = _pylint(tmp_path, "a.py", "b.py")
    code_two, two = _pylint(tmp_path, "-j", "2", "a.py", "b.py")
    assert code_one == code_two and code_one & 2
    assert sorted((m["path"], m["line"], m["message-id"]) for m in two) == \
        sorted((m["path"], m["line"], m["message-id"]) for m in one) == [("a.py", 5, "E9502"), ("b.py", 5, "E9502")]


def test_the_lazy_resolver_survives_pickling_and_copying():
    import copy
    import pickle

    from hp_invariants.checkers import _LazyResolver

    bare = _LazyResolver.__new__(_LazyResolver)  # what unpickling makes before restoring __dict__
    assert not hasattr(bare, "_checker")
    copy.copy(bare)
    pickle.loads(pickle.dumps(bare))
