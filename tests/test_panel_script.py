"""``scripts/panel.py``: one row per project with findings per registered rule, baselines kept out
of the panel total, verdicts matched by ``project  path:line  rule``, and the findings JSON; the
pinned manifest (``scripts/panel.toml``), the build from fetched snapshots and PyPI releases, and the
blind part whose findings only ``--reveal-blind`` writes (issue #23)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from hp_invariants.registry import RULES

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "panel.py"
FIXTURE = REPO / "tests" / "fixtures" / "undefined-method-call" / "checker" / "self_call_typo.py"


def _rows(table: str) -> dict[str, list[str]]:
    lines = [line for line in table.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def test_panel_table_json_baseline_and_verdicts(tmp_path: Path) -> None:
    panel = tmp_path / "panel"
    flagged = panel / "flagged" / "pkg"
    flagged.mkdir(parents=True)
    (flagged / "model.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    (panel / "flagged" / "PKG-INFO").write_text("Name: flagged\nVersion: 1.2.3\n", encoding="utf-8")
    clean = panel / "clean"
    clean.mkdir()
    (clean / "ok.py").write_text("import torch.nn as nn\n\n\nclass A(nn.Module):\n    pass\n", encoding="utf-8")
    base = panel / "keep"
    base.mkdir()
    (base / "model.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    (panel / "not-a-project").mkdir()  # no Python files: not a project
    verdicts = tmp_path / "verdicts.tsv"
    verdicts.write_text("# comment\nflagged\tpkg/model.py:14\tE9503\tT\tthe typo\n", encoding="utf-8")
    out = tmp_path / "findings.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(panel), "--baseline", "keep", "--mirror", str(tmp_path / "none"),
         "--verdicts", str(verdicts), "-o", str(out), "-j", "1"],
        capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stderr)
    assert list(rows) == ["clean", "flagged", "panel total (2)", "keep (baseline)"]
    for rule in RULES:  # one column per registered rule
        assert rule.rule_id in rows["flagged"]
    assert rows["flagged"]["E9503"] == "1" and rows["flagged"]["version"] == "1.2.3"
    assert rows["flagged"]["true"] == "1" and rows["flagged"]["unjudged"] == "0"
    assert rows["clean"]["files"] == "1" and all(rows["clean"][r.rule_id] == "0" for r in RULES)
    # the baseline's finding is not in the panel total, and is unjudged (no verdict line for it)
    assert rows["panel total (2)"]["E9503"] == "1" and rows["panel total (2)"]["files"] == "2"
    assert rows["keep (baseline)"]["E9503"] == "1" and rows["keep (baseline)"]["unjudged"] == "1"
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["rules"] == [r.rule_id for r in RULES]
    by_name = {p["name"]: p for p in report["projects"]}
    (finding,) = by_name["flagged"]["findings"]
    assert (finding["path"], finding["line"], finding["id"], finding["verdict"]) == ("pkg/model.py", 14, "E9503", "T")
    assert by_name["keep"]["baseline"] is True and by_name["flagged"]["baseline"] is False


def test_a_project_shadowing_the_standard_library_is_still_checked(tmp_path: Path) -> None:
    """Each project is checked from its own folder: a module there named like a standard one (torch
    ships random.py and signal/) must not shadow it, and a run that dies before writing its report is
    a failure (exit 2, the error shown), never a row of zero findings. Found on the installed torch."""
    panel = tmp_path / "panel"
    shadow = panel / "shadow"
    shadow.mkdir(parents=True)
    (shadow / "model.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    (shadow / "signal.py").write_text("raise ImportError('the standard signal module was shadowed')\n",
                                      encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(SCRIPT), str(panel), "--mirror", str(tmp_path / "none"), "-j", "1"],
                          capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _rows(proc.stderr)["shadow"]["E9503"] == "1"
    # a run that writes no report: the script says so and exits 2
    broken = panel / "shadow" / "pyproject.toml"
    broken.write_text("[tool.hp-invariants\n", encoding="utf-8")  # a TOML error: check stops before any report
    proc = subprocess.run([sys.executable, str(SCRIPT), str(panel), "--mirror", str(tmp_path / "none"), "-j", "1"],
                          capture_output=True, text=True, check=False, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2
    assert "shadow: check exited" in proc.stderr


# ------------------------------------------------------------------ manifest, build, blindness (issue #23)

SEALED = '''import torch.nn as nn


class Sealed(nn.Module):
    def sealed_method(self):
        return 1

    def forward(self, x):
        return self.sealed_mthod()
'''
"""A blind code base's module: one E9503 finding whose path and message must never leak."""


def _script():
    """``scripts/panel.py`` as a module (its functions: manifest reading, building)."""
    spec = importlib.util.spec_from_file_location("panel_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["panel_script"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


def _commit(repo: Path, files: dict[str, str]) -> str:
    """Write ``files`` in the work tree of ``repo`` and commit them; return the commit SHA."""
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "c")
    return _git(repo, "rev-parse", "HEAD")


def _mirror(tmp_path: Path, owner: str, name: str, commits: list[dict[str, str]]) -> tuple[Path, list[str]]:
    """A fake ``fetch`` snapshot: a bare repository at ``tmp_path/mirror/<owner>+<name>/repo`` holding
    ``commits`` (each a dict of files written on top of the previous); return ``(its path, SHAs)``."""
    work = tmp_path / "src" / f"{owner}+{name}"
    work.mkdir(parents=True)
    _git(work, "init", "-q")
    shas = [_commit(work, files) for files in commits]
    repo = tmp_path / "mirror" / f"{owner}+{name}" / "repo"
    repo.parent.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(repo)], check=True, capture_output=True)
    return repo, shas


def _write_manifest(path: Path, entries: list[dict[str, str]]) -> Path:
    lines = []
    for entry in entries:
        lines.append("[[codebase]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False,
                          env=env, cwd=cwd, timeout=300)


def test_the_issue_23_manifest_pins_34_code_bases_and_the_drawn_blind_part() -> None:
    panel = _script()
    codebases = panel.read_manifest(panel.MANIFEST)
    by_part = {part: {c.name for c in codebases if c.part == part} for part in panel.PARTS}
    assert by_part["blind"] == {"InternVL", "LLaMA-Factory", "bitsandbytes", "metaseq", "mindnlp", "mmcv",
                                "mmdetection", "ms-swift", "lightning-thunder", "vision", "vllm", "xformers"}
    assert len(by_part["tuning"]) == 22 and len(by_part["tuning"] | by_part["blind"]) == 34
    assert by_part["keep-clean"] == {"hyper-parallel", "torch", "transformers-models"}
    for codebase in codebases:
        if codebase.kind == "pypi":
            assert len(codebase.sha256) == 64, codebase.name  # a PyPI release is pinned by digest too
    assert {c.name: c.subfolder for c in codebases}["transformers"] == "src"  # "all of src/"


@pytest.mark.parametrize("change, message", [
    ({"pin": "abc123"}, "full commit SHA"),
    ({"part": "holdout"}, "part 'holdout'"),
    ({"colour": "red"}, "unknown key"),
    ({"subfolder": "../elsewhere"}, "subfolder"),
    ({"sha256": "0" * 64}, "pypi: sources only"),
    ({"source": "gitlab:acme/widgets"}, "source"),
    ({"name": "../x"}, "plain folder name"),
    ({"pin": 3}, "string"),
])
def test_read_manifest_rejects_a_malformed_entry(tmp_path: Path, change: dict, message: str) -> None:
    panel = _script()
    entry = {"name": "widgets", "source": "github:acme/widgets", "pin": "a" * 40, "part": "tuning", **change}
    path = tmp_path / "panel.toml"
    path.write_text("[[codebase]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in entry.items()),
                    encoding="utf-8")
    with pytest.raises(panel.ManifestError, match=message):
        panel.read_manifest(path)
    # a missing key and a duplicate name too
    path.write_text('[[codebase]]\nname = "a"\nsource = "pypi:a"\npart = "tuning"\n', encoding="utf-8")
    with pytest.raises(panel.ManifestError, match="missing key"):
        panel.read_manifest(path)
    one = '[[codebase]]\nname = "a"\nsource = "pypi:a"\npin = "1"\npart = "tuning"\n'
    path.write_text(one + one, encoding="utf-8")
    with pytest.raises(panel.ManifestError, match="used twice"):
        panel.read_manifest(path)


def test_build_unpacks_the_pinned_commit_keeps_a_built_folder_and_names_the_fetch(tmp_path: Path) -> None:
    repo, (first, second) = _mirror(tmp_path, "acme", "widgets", [
        {"pkg/__init__.py": "", "pkg/model.py": "VERSION = 1\n", "big.bin": "large file\n"},
        {"pkg/model.py": "VERSION = 2\n"},
    ])
    # the snapshot lacks a blob, as fetch leaves out files of 4 MiB and more
    blob = _git(repo, "rev-parse", f"{first}:big.bin")
    (repo / "objects" / blob[:2] / blob[2:]).unlink()
    entry = {"name": "widgets", "source": "github:acme/widgets", "pin": first, "part": "tuning"}
    manifest = _write_manifest(tmp_path / "panel.toml", [entry])
    panel = tmp_path / "panel"
    args = ["--build", str(panel), "--manifest", str(manifest), "--mirror", str(tmp_path / "mirror")]
    proc = _run(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (panel / "widgets" / "pkg" / "model.py").read_text(encoding="utf-8") == "VERSION = 1\n"
    assert not (panel / "widgets" / ".git").exists() and not (panel / "widgets" / "big.bin").exists()
    assert "big.bin" in proc.stderr and "absent from the snapshot" in proc.stderr
    assert (panel / "panel.toml").read_text(encoding="utf-8") == manifest.read_text(encoding="utf-8")
    # idempotent: a folder at its pin is kept as it is
    (panel / "widgets" / "marker").write_text("kept", encoding="utf-8")
    proc = _run(*args, cwd=tmp_path)
    assert proc.returncode == 0 and "kept" in proc.stderr
    assert (panel / "widgets" / "marker").exists()
    # a new pin rebuilds the folder from scratch
    _write_manifest(manifest, [{**entry, "pin": second}])
    proc = _run(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (panel / "widgets" / "pkg" / "model.py").read_text(encoding="utf-8") == "VERSION = 2\n"
    assert not (panel / "widgets" / "marker").exists()
    # a commit the snapshot lacks, and a snapshot never fetched: errors naming the fetch to run
    _write_manifest(manifest, [{**entry, "pin": "f" * 40},
                               {"name": "gadgets", "source": "github:acme/gadgets", "pin": first, "part": "blind"}])
    proc = _run(*args, cwd=tmp_path)
    assert proc.returncode == 2
    assert f"commit {'f' * 40} is not in" in proc.stderr and f"its HEAD is {second}" in proc.stderr
    assert "run the fetch tool with github:acme/widgets" in proc.stderr
    assert "no snapshot of github:acme/gadgets" in proc.stderr and "fetch tool with github:acme/gadgets" in proc.stderr


def test_build_unpacks_a_pypi_sdist_and_wheel_pinned_by_digest(tmp_path: Path) -> None:
    """A release file already downloaded with the pinned digest is unpacked without pip: an sdist's
    top folder becomes the code base folder, a wheel is unpacked as it is."""
    downloads = tmp_path / "panel" / ".panel-build" / "downloads"
    downloads.mkdir(parents=True)
    sdist = downloads / "acme_widgets-1.2.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in {"acme_widgets-1.2/src/widgets/__init__.py": "X = 1\n",
                           "acme_widgets-1.2/PKG-INFO": "Version: 1.2\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    wheel = downloads / "gadgets-3.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("gadgets/__init__.py", "Y = 2\n")
    digest = {path: hashlib.sha256(path.read_bytes()).hexdigest() for path in (sdist, wheel)}
    manifest = _write_manifest(tmp_path / "panel.toml", [
        {"name": "widgets", "source": "pypi:acme-widgets", "pin": "1.2", "part": "tuning", "subfolder": "src",
         "sha256": digest[sdist]},
        {"name": "gadgets", "source": "pypi:gadgets", "pin": "3.0", "part": "blind", "dist": "wheel",
         "sha256": digest[wheel]},
    ])
    proc = _run("--build", str(tmp_path / "panel"), "--manifest", str(manifest), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "panel" / "widgets" / "src" / "widgets" / "__init__.py").is_file()
    assert (tmp_path / "panel" / "gadgets" / "gadgets" / "__init__.py").is_file()


def test_an_installed_package_is_checked_in_place_at_its_pinned_version(tmp_path: Path) -> None:
    panel = _script()
    installed = importlib.metadata.version("pytest")
    good = panel.CodeBase("pytest", "installed:pytest", installed, "keep-clean")
    (target,) = panel.manifest_targets(tmp_path, [good], None)
    assert (target.folder / "__init__.py").is_file() and target.part == "keep-clean"
    with pytest.raises(panel.BuildError, match=f"pytest {installed} is installed"):
        panel.manifest_targets(tmp_path, [panel.CodeBase("pytest", "installed:pytest", "0.0.1", "keep-clean")], None)


def test_blind_findings_appear_only_with_reveal_blind(tmp_path: Path) -> None:
    """A blind code base shows numbers alone (table, JSON on stdout or in -o, scores); its findings,
    problems and check's error output reach only the --reveal-blind file."""
    _, (open_sha,) = _mirror(tmp_path, "acme", "open", [{"pkg/model.py": FIXTURE.read_text(encoding="utf-8")}])
    _, (sealed_sha,) = _mirror(tmp_path, "acme", "sealed", [{"secret_model.py": SEALED}])
    _, (keep_sha,) = _mirror(tmp_path, "acme", "keep", [{"ok.py": "X = 1\n"}])
    manifest = _write_manifest(tmp_path / "panel.toml", [
        {"name": "open", "source": "github:acme/open", "pin": open_sha, "part": "tuning"},
        {"name": "sealed", "source": "github:acme/sealed", "pin": sealed_sha, "part": "blind"},
        {"name": "keep", "source": "github:acme/keep", "pin": keep_sha, "part": "keep-clean"},
    ])
    panel = tmp_path / "panel"
    proc = _run("--build", str(panel), "--manifest", str(manifest), "--mirror", str(tmp_path / "mirror"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    scores = tmp_path / "scores.txt"
    scores.write_text("codebase rule true false\nsealed E9503 1 0  # judged by the blind reviewer\n", encoding="utf-8")
    out, reveal = tmp_path / "findings.json", tmp_path / "blind.json"
    # the panel's own copy of the manifest says which part is blind: no --manifest needed
    proc = _run(str(panel), "-j", "1", "--blind-scores", str(scores), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stderr)
    assert list(rows) == ["open", "tuning total (1)", "sealed (blind)", "blind total (1)", "panel total (2)",
                          "keep (baseline)"]
    assert rows["sealed (blind)"]["E9503"] == "1" and rows["sealed (blind)"]["true"] == "1"
    assert rows["sealed (blind)"]["unjudged"] == "0" and rows["sealed (blind)"]["version"] == sealed_sha[:9]
    assert rows["panel total (2)"]["E9503"] == "2" and rows["panel total (2)"]["files"] == "2"
    assert rows["open"]["unjudged"] == "1"
    text = out.read_text(encoding="utf-8")
    by_name = {p["name"]: p for p in json.loads(text)["projects"]}
    assert "findings" not in by_name["sealed"] and "problems" not in by_name["sealed"]
    assert by_name["sealed"]["counts"]["E9503"] == 1 and by_name["sealed"]["scores"] == {"E9503": {"true": 1, "false": 0}}
    assert by_name["open"]["findings"][0]["path"] == "pkg/model.py" and by_name["open"]["part"] == "tuning"
    for leak in ("secret_model", "sealed_mthod", "Sealed"):
        assert leak not in text and leak not in proc.stderr
    # --from-json: the saved run tabulated again with later verdicts and scores, without checking again
    (panel / "open" / "pkg" / "model.py").unlink()  # a check would now find nothing there
    verdicts = tmp_path / "verdicts.tsv"
    verdicts.write_text(f"open\t{by_name['open']['findings'][0]['path']}:{by_name['open']['findings'][0]['line']}"
                        "\tE9503\tF\tjudged later\n", encoding="utf-8")
    scores.write_text("sealed E9503 0 1\n", encoding="utf-8")
    again = tmp_path / "again.json"
    proc = _run(str(panel), "--from-json", str(out), "--verdicts", str(verdicts), "--blind-scores", str(scores),
                "-o", str(again), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stderr)
    assert rows["open"]["E9503"] == "1" and (rows["open"]["true"], rows["open"]["false"]) == ("0", "1")
    assert (rows["sealed (blind)"]["true"], rows["sealed (blind)"]["false"]) == ("0", "1")
    assert (rows["panel total (2)"]["true"], rows["panel total (2)"]["false"]) == ("0", "2")
    text = again.read_text(encoding="utf-8")
    assert "findings" not in {p["name"]: p for p in json.loads(text)["projects"]}["sealed"]
    for leak in ("secret_model", "sealed_mthod", "Sealed"):
        assert leak not in text and leak not in proc.stderr
    (panel / "open" / "pkg" / "model.py").write_text(FIXTURE.read_text(encoding="utf-8"), encoding="utf-8")
    # stdout JSON, and --reveal-blind: the blind findings go to that file alone
    proc = _run(str(panel), "-j", "1", "--reveal-blind", str(reveal), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "sealed_mthod" not in proc.stdout and "sealed_mthod" not in proc.stderr
    (sealed,) = json.loads(reveal.read_text(encoding="utf-8"))["projects"]
    (finding,) = sealed["findings"]
    assert (finding["codebase"], finding["path"], finding["line"], finding["id"]) == ("sealed", "secret_model.py", 9, "E9503")
    assert "sealed_mthod" in finding["message"]
    # a blind check that fails: its error output is withheld too
    (panel / "sealed" / "pyproject.toml").write_text("[tool.hp-invariants\n", encoding="utf-8")
    proc = _run(str(panel), "-j", "1", "--only", "sealed", "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 2 and "sealed: check exited" in proc.stderr and "withheld" in proc.stderr
    assert "pyproject" not in proc.stderr


def test_a_code_base_not_built_at_its_pin_is_an_error(tmp_path: Path) -> None:
    _, (sha,) = _mirror(tmp_path, "acme", "widgets", [{"a.py": "X = 1\n"}])
    manifest = _write_manifest(tmp_path / "panel.toml",
                               [{"name": "widgets", "source": "github:acme/widgets", "pin": sha, "part": "tuning"}])
    (tmp_path / "panel" / "widgets").mkdir(parents=True)  # a folder, but never built from the manifest
    proc = _run(str(tmp_path / "panel"), "--manifest", str(manifest), cwd=tmp_path)
    assert proc.returncode == 2 and "not built at github:acme/widgets" in proc.stderr and "--build" in proc.stderr
