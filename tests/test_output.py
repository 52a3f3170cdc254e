"""Report formats and file names that are not valid UTF-8 (issue 12 item 5, docs/robustness.md).

On POSIX a file name is bytes; Python hands a name that is not UTF-8 over with each bad byte as a
lone surrogate (``os.fsdecode``). Every format must still be valid UTF-8 (strict writers and JSON
parsers reject lone surrogates) and must identify the file: text, JSON ``path`` and GitHub escape the
byte as ``\\xNN``; JSON adds the raw bytes percent-encoded (``path_bytes``); SARIF URIs percent-encode
the raw bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote_to_bytes

import pytest

from hp_invariants import output
from test_cli import GATED, run_cli

pytestmark = pytest.mark.skipif(sys.platform in ("win32", "darwin"),
                                reason="file names are bytes only on Linux and the BSDs (macOS wants UTF-8)")

BAD_NAME = b"gated\xff.py"  # a finding
BAD_SYNTAX = b"broken\xfe\xc3.py"  # a problem (E0001)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / os.fsdecode(BAD_NAME)).write_text(GATED)
    (tmp_path / os.fsdecode(BAD_SYNTAX)).write_bytes(b"def f(:\n    pass\n# self.reset_sharded_param()\n")
    return tmp_path


def _strict_utf8(text: str) -> str:
    text.encode("utf-8")  # raises on a lone surrogate
    return text


def test_display_path_escapes_only_the_bad_bytes():
    assert output.display_path("plain/caf\u00e9.py") == "plain/caf\u00e9.py"
    assert output.display_path(os.fsdecode(b"d\xc3\xa9j\xe0/x\xff.py")) == "d\u00e9j\\xe0/x\\xff.py"
    assert output.path_bytes(os.fsdecode(b"x\xff.py")) == b"x\xff.py"


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_sarif_uri_percent_encodes_the_raw_bytes(tree: Path, monkeypatch, relative: bool):
    monkeypatch.chdir(tree)
    target = "." if relative else str(tree)
    code, out, err = run_cli("check", "--no-cache", "--format", "sarif", target)
    assert code == 2, err  # the syntax error is a problem
    run = json.loads(_strict_utf8(out))["runs"][0]
    (result,) = run["results"]
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    (notification,) = run["invocations"][0]["toolExecutionNotifications"]
    problem_location = notification["locations"][0]["physicalLocation"]["artifactLocation"]
    if relative:
        assert location == {"uri": "gated%FF.py", "uriBaseId": "%SRCROOT%"}
        assert problem_location == {"uri": "broken%FE%C3.py", "uriBaseId": "%SRCROOT%"}
    else:
        assert location["uri"] == "file://" + str(tree) + "/gated%FF.py"
        assert unquote_to_bytes(problem_location["uri"][len("file://"):]) == os.fsencode(tree) + b"/" + BAD_SYNTAX
    assert result["fixes"][0]["artifactChanges"][0]["artifactLocation"] == location


def test_json_escapes_the_name_and_carries_the_raw_bytes(tree: Path):
    code, out, _ = run_cli("check", "--no-cache", "--format", "json", str(tree))
    assert code == 2
    assert "\\ud" not in out.lower()  # no lone surrogate, not even as a JSON escape
    report = json.loads(_strict_utf8(out))
    (finding,) = report["findings"]
    (problem,) = report["problems"]
    assert finding["path"] == f"{tree}/gated\\xff.py"
    assert unquote_to_bytes(finding["path_bytes"]) == os.fsencode(tree) + b"/" + BAD_NAME
    assert problem["path"] == f"{tree}/broken\\xfe\\xc3.py"
    assert unquote_to_bytes(problem["path_bytes"]) == os.fsencode(tree) + b"/" + BAD_SYNTAX
    # names that are valid UTF-8 keep the old shape exactly
    (tree / os.fsdecode(BAD_NAME)).rename(tree / "caf\u00e9.py")
    (tree / os.fsdecode(BAD_SYNTAX)).unlink()
    report = json.loads(run_cli("check", "--no-cache", "--format", "json", str(tree))[1])
    assert report["findings"][0]["path"] == f"{tree}/caf\u00e9.py" and "path_bytes" not in report["findings"][0]


def test_text_and_github_escape_the_name(tree: Path):
    code, out, _ = run_cli("check", "--no-cache", str(tree))
    assert code == 2
    lines = _strict_utf8(out).splitlines()
    assert lines[0].startswith(f"{tree}/broken\\xfe\\xc3.py:1:")
    assert "E0001 syntax-error" in lines[0]
    assert lines[1].startswith(f"{tree}/gated\\xff.py:") and "E9502 shard-gated-reset" in lines[1]
    code, out, _ = run_cli("check", "--no-cache", "--format", "github", str(tree))
    assert code == 2
    escaped_root = str(tree).replace(":", "%3A").replace(",", "%2C")
    lines = _strict_utf8(out).splitlines()
    assert lines[0].startswith(f"::error file={escaped_root}/broken\\xfe\\xc3.py,line=1,")
    assert lines[1].startswith(f"::error file={escaped_root}/gated\\xff.py,line=")


@pytest.mark.parametrize("fmt", output.FORMATS)
def test_every_format_writes_strict_utf8_through_a_real_pipe(tree: Path, fmt: str):
    """A subprocess with a strict UTF-8 stdout (no surrogateescape) and an --output-file: no
    traceback, no "internal error", the same valid UTF-8 report in both."""
    env = dict(os.environ, PYTHONIOENCODING="utf-8:strict", PYTHONUTF8="1")
    report = tree.parent / f"{tree.name}-report.{fmt}"
    base = [sys.executable, "-m", "hp_invariants", "check", "--no-cache", "--format", fmt]
    proc = subprocess.run(base + [str(tree)], capture_output=True, env=env, timeout=120, cwd=tree)
    assert proc.returncode == 2, proc.stderr
    assert b"Traceback" not in proc.stderr and b"internal error" not in proc.stderr
    proc.stdout.decode("utf-8")  # strict
    written = subprocess.run(base + ["--output-file", str(report), str(tree)], capture_output=True, env=env,
                             timeout=120, cwd=tree)
    assert written.returncode == 2, written.stderr
    if fmt != "sarif":  # SARIF carries nothing run-specific but the cwd, the same in both runs
        assert report.read_bytes() == proc.stdout
    report.read_bytes().decode("utf-8")
    assert b"gated\\xff.py" in proc.stdout or b"gated%FF.py" in proc.stdout
