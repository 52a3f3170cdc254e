"""Build a validation panel from its pinned manifest, run ``hp-invariants check --format json`` on every
code base of it, and tabulate.

Usage::

    python scripts/panel.py --build [PANEL] [--manifest FILE] [--mirror DIR] [--only NAME,...]
    python scripts/panel.py [PANEL] [--manifest FILE] [--only NAME,...] [--extra PATH ...] [-j N]
                            [--verdicts FILE] [--blind-scores FILE] [--reveal-blind FILE]
                            [-o FINDINGS.json]
    python scripts/panel.py --from-json FINDINGS.json [--verdicts FILE] [--blind-scores FILE] [-o FILE]

``PANEL`` defaults to ``/work/panel``.

**The manifest** (``scripts/panel.toml``, read with :mod:`tomllib`; :func:`read_manifest`) pins each
code base: ``name``, ``source`` (``github:OWNER/NAME``, ``pypi:NAME`` or ``installed:NAME``),
``pin`` (full commit SHA, release version, installed version), ``part`` (``tuning``, ``blind`` or
``keep-clean``) and optionally ``subfolder`` (what ``check`` is given), ``dist`` (``sdist`` or
``wheel``, PyPI only), ``sha256`` (of the PyPI file) and ``note``.

**Building** (``--build``, :func:`build_panel`) makes ``PANEL/<name>`` for every code base: a GitHub
one is ``git archive`` of the pinned commit of the snapshot the ``fetch`` tool left in
``MIRROR/<owner>+<name>/repo`` (``--mirror``, default ``/work/.mirror``; files the snapshot lacks,
those of 4 MiB and more, are left out and named), a PyPI one is the pinned release downloaded with
``pip download`` (digest checked) and unpacked; an ``installed`` one is only checked for its version.
A folder whose build stamp (``PANEL/.panel-build/stamps``) matches its pin is kept. A missing
snapshot or commit is an error naming the ``fetch`` to run. The build leaves a copy of the manifest
in ``PANEL/panel.toml``.

**Checking** (without ``--build``): the code bases are those of ``--manifest`` or, by default, of
``PANEL/panel.toml``; each must have been built at its pin. Without any manifest (a panel put
together by hand) every sub-folder of ``PANEL`` holding Python files is a ``tuning`` code base and the
sub-folders named with ``--baseline`` (default ``hyper-parallel``) are ``keep-clean``. Folders given
with ``--extra`` (e.g. another installed package) are ``keep-clean`` in both cases. Keep-clean rows
come below the panel total and are not counted in it.

Each code base is checked from its own folder (so its ``pyproject.toml`` decides the project root, as
for a user) with the checkout this script lives in first on ``PYTHONPATH``, ``--no-cache`` and
``-j N``. Output: a table on stderr (code base, version, files, seconds, findings per rule, problems
and, with ``--verdicts``/``--blind-scores``, true/false/unjudged; subtotals per part when the panel
has a blind part) and a JSON document on stdout (or ``-o FILE``):
``{"rules", "manifest", "projects": [{"name", "part", "source", "pin", "version", "files", "seconds",
"counts", "problem_count", "problems", "findings": [...]}]}`` where each finding is the CLI's JSON
finding with its path made relative to the code base folder.

**Blindness**: the findings of ``blind`` code bases are judged only by a reviewer who has not seen
them. For those the table and the JSON carry numbers alone (files, seconds, findings per rule,
problem count, and true/false from ``--blind-scores``); neither their findings nor their problems
nor ``check``'s error output are printed or put in the JSON. Only ``--reveal-blind FILE`` writes them
(code base, path, line, rule, message, ...) to ``FILE``, for the blind reviewer alone.

``--verdicts FILE`` reads judged findings of the non-blind code bases, one per line, tab-separated:
``project  path:line  rule-id  T|F  reason`` (``#`` starts a comment); findings absent from the file
are counted as unjudged, so a re-run after a rule change shows at once what is new.
``--blind-scores FILE`` reads what the blind reviewer reports, numbers alone, one line per code base
and rule, whitespace-separated: ``codebase  rule-id  true  false`` (``#`` comments, an optional
``codebase rule true false`` header); a rule not listed is unjudged.
``--from-json FINDINGS.json`` tabulates a saved run (its ``-o`` output) again with these verdicts and
scores instead of checking: a run before a change stays comparable with one after it.

Rule columns come from :data:`hp_invariants.registry.RULES`, so a new rule appears without editing
this script. Exit status: 0 when every code base was checked (or built), 2 when ``check`` failed
(exit status above 1) on one, or the manifest, a build step or an input file was wrong.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path, PurePosixPath
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hp_invariants.registry import RULES  # noqa: E402

MANIFEST = REPO / "scripts" / "panel.toml"
"""The panel of issue #23, pinned."""
PARTS = ("tuning", "blind", "keep-clean")
KINDS = ("github", "pypi", "installed")
PANEL_MANIFEST = "panel.toml"
"""The copy of the manifest a build leaves in the panel folder (what a later check reads)."""
BUILD_DIR = ".panel-build"
"""Under the panel folder: build stamps, downloads, staging (a dot folder: never a code base)."""
WHEEL_TARGET = ["--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp"]
"""Which wheel ``pip download`` takes for ``dist = "wheel"`` (pinned, not this machine's)."""
LABELS = {"tuning": "", "blind": " (blind)", "keep-clean": " (baseline)"}


class ManifestError(ValueError):
    """The manifest cannot be read or an entry is malformed (the message names the file and entry)."""


class BuildError(RuntimeError):
    """A code base could not be built at its pin (the message says what to do: e.g. which fetch)."""


@dataclasses.dataclass(frozen=True)
class CodeBase:
    """One ``[[codebase]]`` entry of the manifest (see the module docstring for the fields)."""

    name: str
    source: str
    pin: str
    part: str
    subfolder: str = ""
    dist: str = "sdist"
    sha256: str = ""
    note: str = ""

    @property
    def kind(self) -> str:
        """``github``, ``pypi`` or ``installed``: the part of ``source`` before the colon."""
        return self.source.split(":", 1)[0]

    @property
    def ref(self) -> str:
        """``OWNER/NAME`` or the package name: the part of ``source`` after the colon."""
        return self.source.split(":", 1)[1]

    @property
    def version(self) -> str:
        """The pin as shown in the table: a commit shortened to 9 characters, a version as is."""
        return self.pin[:9] if self.kind == "github" else self.pin

    @property
    def stamp(self) -> dict[str, str]:
        """What a built folder must have been built from to be kept by a later build."""
        return {"source": self.source, "pin": self.pin, "dist": self.dist if self.kind == "pypi" else "",
                "sha256": self.sha256}


def read_manifest(path: Path) -> list[CodeBase]:
    """Read and validate the manifest at ``path``; return its code bases in file order.

    Raises :class:`ManifestError` (naming the file and the entry) for unreadable TOML, a missing or
    unknown key, a non-string value, a duplicate or unsafe name, an unknown source kind or part, a
    GitHub pin that is not a full 40-hex commit, ``dist``/``sha256`` on a non-PyPI entry, a malformed
    digest, or a ``subfolder`` that is absolute or climbs out with ``..``."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read the manifest: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from exc
    if set(data) - {"codebase"}:
        raise ManifestError(f"{path}: unknown top-level key(s) {sorted(set(data) - {'codebase'})}; "
                            f"only [[codebase]] entries are read")
    entries = data.get("codebase")
    if not isinstance(entries, list) or not entries:
        raise ManifestError(f"{path}: no [[codebase]] entries")
    fields = {field.name for field in dataclasses.fields(CodeBase)}
    required = {"name", "source", "pin", "part"}
    found: list[CodeBase] = []
    for number, entry in enumerate(entries, 1):
        where = f"{path}: codebase #{number}" + (f" ({entry['name']!r})" if isinstance(entry.get("name"), str) else "")
        if set(entry) - fields:
            raise ManifestError(f"{where}: unknown key(s) {sorted(set(entry) - fields)}")
        if required - set(entry):
            raise ManifestError(f"{where}: missing key(s) {sorted(required - set(entry))}")
        bad = sorted(key for key, value in entry.items() if not isinstance(value, str))
        if bad:
            raise ManifestError(f"{where}: {', '.join(bad)} must be string(s)")
        codebase = CodeBase(**entry)
        _validate(codebase, where)
        if any(codebase.name == other.name for other in found):
            raise ManifestError(f"{where}: the name {codebase.name!r} is used twice")
        found.append(codebase)
    return found


def _validate(codebase: CodeBase, where: str) -> None:
    """Raise :class:`ManifestError` when one entry is malformed (see :func:`read_manifest`)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", codebase.name) or codebase.name == PANEL_MANIFEST:
        raise ManifestError(f"{where}: name {codebase.name!r} is not a plain folder name")
    if ":" not in codebase.source or codebase.kind not in KINDS or not codebase.ref:
        raise ManifestError(f"{where}: source {codebase.source!r} is not github:OWNER/NAME, pypi:NAME or "
                            f"installed:NAME")
    if codebase.kind == "github":
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*/[A-Za-z0-9][A-Za-z0-9._-]*", codebase.ref):
            raise ManifestError(f"{where}: source {codebase.source!r} is not github:OWNER/NAME")
        if not re.fullmatch(r"[0-9a-f]{40}", codebase.pin):
            raise ManifestError(f"{where}: pin {codebase.pin!r} is not a full commit SHA (40 hex digits)")
    elif not codebase.pin.strip():
        raise ManifestError(f"{where}: empty pin")
    if codebase.part not in PARTS:
        raise ManifestError(f"{where}: part {codebase.part!r} is not one of {', '.join(PARTS)}")
    if codebase.kind != "pypi" and (codebase.dist != "sdist" or codebase.sha256):
        raise ManifestError(f"{where}: dist and sha256 apply to pypi: sources only")
    if codebase.dist not in ("sdist", "wheel"):
        raise ManifestError(f"{where}: dist {codebase.dist!r} is not sdist or wheel")
    if codebase.sha256 and not re.fullmatch(r"[0-9a-f]{64}", codebase.sha256):
        raise ManifestError(f"{where}: sha256 {codebase.sha256!r} is not 64 lower-case hex digits")
    sub = PurePosixPath(codebase.subfolder)
    if sub.is_absolute() or ".." in sub.parts or "\\" in codebase.subfolder:
        raise ManifestError(f"{where}: subfolder {codebase.subfolder!r} must be relative, without '..'")


# ---------------------------------------------------------------------------------------------- building
def build_panel(panel: Path, codebases: list[CodeBase], mirror: Path, manifest: Path | None = None,
                log: Callable[[str], None] = print) -> None:
    """Make ``panel/<name>`` for every code base at its pin (:func:`build_one`) and copy ``manifest``
    (when given) to ``panel/panel.toml``. Every code base is attempted; raises :class:`BuildError`
    listing all that failed. ``log`` receives one line per code base."""
    panel.mkdir(parents=True, exist_ok=True)
    failures = []
    for codebase in codebases:
        try:
            log(f"{codebase.name}: {build_one(panel, codebase, mirror)}")
        except BuildError as exc:
            failures.append(str(exc))
            log(f"{codebase.name}: FAILED")
    if manifest is not None:
        shutil.copyfile(manifest, panel / PANEL_MANIFEST)
    shutil.rmtree(panel / BUILD_DIR / "staging", ignore_errors=True)
    if failures:
        raise BuildError("\n".join(failures))


def build_one(panel: Path, codebase: CodeBase, mirror: Path) -> str:
    """Make ``panel/<name>`` from ``codebase``'s source at its pin, unless the folder is there with a
    stamp of the same pin (idempotent); return a one-line account. An ``installed`` code base is
    only verified. Raises :class:`BuildError` (the folder and its stamp are then removed or left
    untouched, never half-built with a matching stamp)."""
    if codebase.kind == "installed":
        return f"installed {codebase.ref} {codebase.pin}, checked in place at {installed_folder(codebase)}"
    target = panel / codebase.name
    stamp = stamp_path(panel, codebase.name)
    if target.is_dir() and read_stamp(stamp) == codebase.stamp:
        return f"kept ({codebase.source} at {codebase.version})"
    staging = panel / BUILD_DIR / "staging" / codebase.name
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if codebase.kind == "github":
        root, detail = unpack_github(codebase, mirror, staging)
    else:
        root, detail = unpack_pypi(codebase, panel / BUILD_DIR / "downloads", staging)
    if codebase.subfolder and not (root / codebase.subfolder).is_dir():
        raise BuildError(f"{codebase.name}: subfolder {codebase.subfolder!r} is not in {codebase.source} "
                         f"{codebase.pin}")
    stamp.unlink(missing_ok=True)
    if target.exists():
        shutil.rmtree(target)
    os.replace(root, target)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(codebase.stamp, indent=1) + "\n", encoding="utf-8")
    return detail


def stamp_path(panel: Path, name: str) -> Path:
    """Where the build stamp of code base ``name`` lives."""
    return panel / BUILD_DIR / "stamps" / f"{name}.json"


def read_stamp(path: Path) -> dict | None:
    """The build stamp at ``path``, or ``None`` when absent or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={repo}", *args], input=stdin, capture_output=True, text=True,
                          check=False)


def unpack_github(codebase: CodeBase, mirror: Path, staging: Path) -> tuple[Path, str]:
    """Unpack ``git archive`` of the pinned commit of the code base's snapshot into ``staging``.

    Blobs the snapshot lacks (``fetch`` leaves out files of 4 MiB and more) are excluded and named in
    the account; members that would land outside ``staging`` (absolute or escaping symlinks) are
    skipped (:func:`tarfile.data_filter`). Returns ``(staging, account)``. Raises
    :class:`BuildError` when the snapshot or the commit is absent (naming the ``fetch`` to run) or
    ``git archive`` fails."""
    owner, name = codebase.ref.split("/", 1)
    repo = mirror / f"{owner}+{name}" / "repo"
    fetch = f"run the fetch tool with github:{codebase.ref}"
    if not repo.exists():
        raise BuildError(f"{codebase.name}: no snapshot of github:{codebase.ref} at {repo}: {fetch}")
    if _git(repo, "cat-file", "-e", f"{codebase.pin}^{{commit}}").returncode != 0:
        head = _git(repo, "rev-parse", "HEAD").stdout.strip() or "?"
        raise BuildError(f"{codebase.name}: commit {codebase.pin} is not in {repo} (its HEAD is {head}): "
                         f"{fetch} again, or pin a commit the snapshot has")
    listing = _git(repo, "ls-tree", "-r", "-z", "--full-tree", codebase.pin)
    if listing.returncode != 0:
        raise BuildError(f"{codebase.name}: git ls-tree {codebase.pin} failed: {listing.stderr.strip()}")
    blobs = []
    for entry in filter(None, listing.stdout.split("\0")):
        info, path = entry.split("\t", 1)
        _mode, kind, oid = info.split()
        if kind == "blob":  # a "commit" entry is a submodule: git archive leaves it empty
            blobs.append((oid, path))
    checked = _git(repo, "cat-file", "--batch-check", stdin="".join(oid + "\n" for oid, _ in blobs))
    states = checked.stdout.splitlines()
    missing = [path for (_, path), state in zip(blobs, states) if state.endswith(" missing")]
    args = ["archive", "--format=tar", codebase.pin]
    if missing:
        args += ["--", "."] + [f":(exclude,literal){path}" for path in missing]
    skipped: list[str] = []

    def keep(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        try:
            return tarfile.data_filter(member, dest)
        except tarfile.FilterError:
            skipped.append(member.name)
            return None

    with subprocess.Popen(["git", f"--git-dir={repo}", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                tar.extractall(staging, filter=keep)
        except tarfile.TarError as exc:
            proc.kill()
            error = proc.stderr.read().decode(errors="replace").strip()[-500:]
            raise BuildError(f"{codebase.name}: unpacking git archive {codebase.pin} failed: {exc} {error}") from exc
        error = proc.stderr.read().decode(errors="replace")
    if proc.returncode != 0:
        raise BuildError(f"{codebase.name}: git archive {codebase.pin} failed: {error.strip()[-500:]}")
    unpacked = sum(len(files) + sum(os.path.islink(os.path.join(folder, d)) for d in dirs)
                   for folder, dirs, files in os.walk(staging))
    detail = f"git archive {codebase.pin[:9]} of {repo}: {unpacked} files"
    if missing:
        detail += f"; {len(missing)} absent from the snapshot (4 MiB or more), left out: {', '.join(missing)}"
    if skipped:
        detail += f"; {len(skipped)} link(s) pointing outside the tree skipped: {', '.join(skipped)}"
    expected = len(blobs) - len(missing) - len(skipped)
    if unpacked != expected:
        detail += f"; WARNING: the tree lists {expected} (export-ignore attributes?)"
    return staging, detail


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_pypi(codebase: CodeBase, downloads: Path) -> Path:
    """Return the pinned release file of a ``pypi:`` code base in ``downloads``: one already there
    with the pinned digest, else fetched with ``pip download --no-deps`` (``--no-binary :all:`` for
    an sdist; ``--only-binary :all:`` and :data:`WHEEL_TARGET` for a wheel) and digest-checked.
    Raises :class:`BuildError` when pip fails or the digest differs."""
    downloads.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[-_.]+", "_", codebase.ref).lower() + "_" + codebase.pin
    if codebase.sha256:
        for known in sorted(downloads.iterdir()):
            if known.is_file() and known.name.lower().replace("-", "_").startswith(stem) \
                    and _sha256(known) == codebase.sha256:
                return known
    with tempfile.TemporaryDirectory(dir=downloads) as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   "--dest", tmp]
        command += ["--only-binary", ":all:", *WHEEL_TARGET] if codebase.dist == "wheel" else ["--no-binary", ":all:"]
        command.append(f"{codebase.ref}=={codebase.pin}")
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        files = sorted(Path(tmp).iterdir())
        if done.returncode != 0 or len(files) != 1:
            raise BuildError(f"{codebase.name}: `{' '.join(command[1:])}` failed (exit {done.returncode}): "
                             f"{(done.stderr or done.stdout).strip()[-800:]}")
        got = _sha256(files[0])
        if codebase.sha256 and got != codebase.sha256:
            raise BuildError(f"{codebase.name}: {files[0].name} has sha256 {got}; the manifest pins "
                             f"{codebase.sha256}")
        final = downloads / files[0].name
        os.replace(files[0], final)
    return final


def unpack_pypi(codebase: CodeBase, downloads: Path, staging: Path) -> tuple[Path, str]:
    """Unpack the pinned release file (:func:`download_pypi`) into ``staging``; return ``(root,
    account)`` where ``root`` is the sdist's single top folder (or ``staging`` for a wheel).
    Raises :class:`BuildError` for an archive that cannot be read."""
    dist_file = download_pypi(codebase, downloads)
    try:
        if dist_file.name.endswith((".whl", ".zip")):
            with zipfile.ZipFile(dist_file) as archive:
                archive.extractall(staging)
        else:
            with tarfile.open(dist_file) as archive:
                archive.extractall(staging, filter="data")
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
        raise BuildError(f"{codebase.name}: cannot unpack {dist_file}: {exc}") from exc
    tops = list(staging.iterdir())
    root = tops[0] if codebase.dist == "sdist" and len(tops) == 1 and tops[0].is_dir() else staging
    count = sum(len(files) for _, _, files in os.walk(root))
    return root, f"{dist_file.name} (sha256 {_sha256(dist_file)[:12]}...): {count} files"


def installed_folder(codebase: CodeBase) -> Path:
    """The folder of the package an ``installed:`` code base names, in the Python running this script
    (found without importing it). Raises :class:`BuildError` when it is not installed or its version
    is not the pin."""
    spec = importlib.util.find_spec(codebase.ref)
    if spec is None or not spec.submodule_search_locations:
        raise BuildError(f"{codebase.name}: package {codebase.ref} is not installed in {sys.executable}: "
                         f"pip install {codebase.ref}=={codebase.pin}")
    try:
        version = importlib.metadata.version(codebase.ref)
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    if version != codebase.pin:
        raise BuildError(f"{codebase.name}: {codebase.ref} {version} is installed in {sys.executable}; the "
                         f"manifest pins {codebase.pin}")
    return Path(list(spec.submodule_search_locations)[0])


# ---------------------------------------------------------------------------------------------- checking
@dataclasses.dataclass(frozen=True)
class Target:
    """One code base to check: ``check`` runs in ``folder`` on ``path`` (relative to it)."""

    name: str
    folder: Path
    part: str
    version: str
    path: str = "."
    source: str = ""
    pin: str = ""


def project_folders(panel: Path, only: set[str] | None, extra: list[str],
                    baseline: set[str]) -> list[tuple[Path, bool]]:
    """Return ``(folder, is_baseline)``: panel sub-folders holding ``.py`` files (case-insensitive
    name order), then the baseline sub-folders, then ``extra`` (baselines too)."""
    subs = sorted(panel.iterdir(), key=lambda p: p.name.lower()) if panel.is_dir() else []
    subs = [s for s in subs if s.is_dir() and not s.name.startswith(".") and any(s.rglob("*.py"))]
    found = [(s, False) for s in subs if s.name not in baseline]
    found += [(s, True) for s in subs if s.name in baseline]
    found += [(Path(p), True) for p in extra]
    return [(p, b) for p, b in found if only is None or p.name in only]


def manifest_targets(panel: Path, codebases: list[CodeBase], only: set[str] | None) -> list[Target]:
    """The code bases of a manifest as targets: tuning, then blind (each in case-insensitive name
    order), then keep-clean (manifest order). Raises :class:`BuildError` for one not built at its pin
    (run ``--build``) or an ``installed`` one whose version differs."""
    chosen = [c for c in codebases if only is None or c.name in only]
    ordered = sorted((c for c in chosen if c.part != "keep-clean"),
                     key=lambda c: (PARTS.index(c.part), c.name.lower()))
    ordered += [c for c in chosen if c.part == "keep-clean"]
    targets, unbuilt = [], []
    for codebase in ordered:
        if codebase.kind == "installed":
            try:
                folder = installed_folder(codebase)
            except BuildError as exc:
                unbuilt.append(str(exc))
                continue
        else:
            folder = panel / codebase.name
            if not folder.is_dir() or read_stamp(stamp_path(panel, codebase.name)) != codebase.stamp:
                unbuilt.append(f"{codebase.name}: {folder} is not built at {codebase.source} {codebase.pin}: "
                               f"run scripts/panel.py --build {panel}")
                continue
        targets.append(Target(codebase.name, folder, codebase.part, codebase.version,
                              codebase.subfolder or ".", codebase.source, codebase.pin))
    if unbuilt:
        raise BuildError("\n".join(unbuilt))
    return targets


def version_of(folder: Path, mirror: Path) -> str:
    """Return the short commit of ``folder``'s mirror, an sdist's ``Version:``, or ``"?"``."""
    if mirror.is_dir():
        for entry in sorted(mirror.iterdir()):
            if entry.name.split("+", 1)[-1] == folder.name and (entry / "repo").exists():
                done = subprocess.run(["git", f"--git-dir={entry / 'repo'}", "rev-parse", "--short", "HEAD"],
                                      capture_output=True, text=True, check=False)
                if done.returncode == 0:
                    return done.stdout.strip()
    for meta in (folder / "PKG-INFO", folder / "METADATA"):
        if meta.is_file():
            for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    version = folder / "version.py"
    if folder.name == "torch" and version.is_file():
        for line in version.read_text(encoding="utf-8").splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("'\"")
    return "?"


def count_files(folder: Path) -> int:
    """Return how many files ``check`` walks in ``folder`` (its own discovery, each folder under its
    own configuration)."""
    from hp_invariants.config import ConfigError, Resolver
    from hp_invariants.discovery import iter_python_files

    try:
        files, _ = iter_python_files([str(folder)], Resolver(RULES))
    except ConfigError:  # a broken pyproject.toml (check reported it): count with the default excludes
        from hp_invariants.project import iter_project_files

        files = list(iter_project_files(folder))
    return len(files)


def run_check(folder: Path, jobs: int, path: str = ".") -> tuple[dict, float, int, str]:
    """Run ``check --format json`` on ``path`` from ``folder``; return ``(report, seconds, exit status,
    stderr)``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        env["HP_INVARIANTS_CACHE_DIR"] = tmp
        start = time.perf_counter()
        # -P: the project folder is the working directory, and a module of it must not shadow the standard
        # library (torch/random.py, torch/signal/ would break `import tempfile` / `import signal`)
        done = subprocess.run([sys.executable, "-P", "-m", "hp_invariants", "check", "--format", "json",
                               "--no-cache", "-j", str(jobs), "--output-file", str(out), path],
                              cwd=folder, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if not out.is_file():  # the run died before writing its report: a failure, never "no findings"
            return {"findings": [], "problems": []}, seconds, max(done.returncode, 3), done.stderr
        report = json.loads(out.read_text(encoding="utf-8"))
    return report, seconds, done.returncode, done.stderr


def read_verdicts(path: str | None) -> dict[tuple[str, str, str], str]:
    """Read ``project  path:line  rule-id  T|F  reason`` lines into ``{(project, path:line, id): T|F}``."""
    verdicts: dict[tuple[str, str, str], str] = {}
    if not path:
        return verdicts
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) >= 4:
            verdicts[(parts[0].strip(), parts[1].strip(), parts[2].strip())] = parts[3].strip().upper()[:1]
    return verdicts


def read_blind_scores(path: str | None) -> dict[str, dict[str, tuple[int, int]]]:
    """Read the blind reviewer's ``codebase  rule-id  true  false`` lines into
    ``{codebase: {rule-id: (true, false)}}``. Raises :class:`ValueError` naming the line for a
    malformed one (not four fields, or counts that are not whole numbers >= 0)."""
    scores: dict[str, dict[str, tuple[int, int]]] = {}
    if not path:
        return scores
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields or [f.lower() for f in fields] == ["codebase", "rule", "true", "false"]:
            continue
        if len(fields) != 4 or not fields[2].isdigit() or not fields[3].isdigit():
            raise ValueError(f"{path}:{number}: expected 'codebase rule true false' with whole numbers, "
                             f"got {line.strip()!r}")
        scores.setdefault(fields[0], {})[fields[1]] = (int(fields[2]), int(fields[3]))
    return scores


def check_targets(targets: list[Target], jobs: int, verdicts: dict[tuple[str, str, str], str],
                  scores: dict[str, dict[str, tuple[int, int]]], rule_ids: list[str]) -> tuple[list[dict], bool]:
    """Check every target; return ``(projects, failed)``: one dict per target (with its findings and
    problems, blind ones too: :func:`public` strips them) and whether ``check`` failed on one."""
    projects, failed = [], False
    for target in targets:
        blind = target.part == "blind"
        report, seconds, status, stderr = run_check(target.folder, jobs, target.path)
        if status > 1:
            failed = True
            problems = len(report.get("problems", []))
            detail = "details withheld (blind): see --reveal-blind" if blind else stderr.strip()[-500:]
            detail = f"{problems} problem(s) reported; {detail}" if problems else detail
            print(f"{target.name}: check exited {status}: {detail}", file=sys.stderr)
        findings = [dict(finding, path=os.path.normpath(finding["path"])) for finding in report.get("findings", [])]
        counts = {rid: 0 for rid in rule_ids}
        for finding in findings:
            counts[finding["id"]] = counts.get(finding["id"], 0) + 1
        projects.append({
            "name": target.name, "part": target.part, "baseline": target.part == "keep-clean",
            "source": target.source, "pin": target.pin, "version": target.version, "folder": str(target.folder),
            "path": target.path, "files": count_files(target.folder / target.path), "seconds": round(seconds, 2),
            "exit_status": status, "counts": counts, "problem_count": len(report.get("problems", [])),
            "problems": report.get("problems", []), "findings": findings, "stderr": stderr,
        })
        judge(projects[-1], verdicts, scores)
    return projects, failed


def judge(project: dict, verdicts: dict[tuple[str, str, str], str],
          scores: dict[str, dict[str, tuple[int, int]]]) -> None:
    """Set ``project``'s ``judged`` counts (and ``scores`` for a blind one) from the verdicts of the
    tuning part (each finding gets its ``verdict``) or the blind reviewer's numbers (compared with the
    run's counts: a mismatch is printed, scores of another run)."""
    name, counts, findings = project["name"], project["counts"], project.get("findings", [])
    if project["part"] == "blind":
        judged = scores.get(name, {})
        true = sum(t for rid, (t, _) in judged.items() if rid in counts)
        false = sum(f for rid, (_, f) in judged.items() if rid in counts)
        for rid, (t, f) in judged.items():
            if t + f > counts.get(rid, 0):
                print(f"{name}: the blind scores judge {t + f} {rid} finding(s), the run has "
                      f"{counts.get(rid, 0)} (scores of another run?)", file=sys.stderr)
        project["scores"] = {rid: {"true": t, "false": f} for rid, (t, f) in judged.items()}
        total = sum(counts.values())
    else:
        for finding in findings:
            finding["verdict"] = verdicts.get((name, f"{finding['path']}:{finding['line']}", finding["id"]))
        marks = [f["verdict"] for f in findings]
        true, false = marks.count("T"), marks.count("F")
        project["scores"] = None
        total = len(findings)
    project["judged"] = {"true": true, "false": false, "unjudged": max(total - true - false, 0)}


def public(project: dict) -> dict:
    """What the normal JSON output shows of a checked project: a blind one loses its findings, its
    problems and ``check``'s error output (numbers only); every one loses the raw error output."""
    shown = {key: value for key, value in project.items() if key != "stderr"}
    if project["part"] == "blind":
        for key in ("problems", "findings"):
            shown.pop(key)
    else:
        shown.pop("scores")
    return shown


def revealed(project: dict) -> dict:
    """A blind project as ``--reveal-blind`` writes it: every finding (tagged with its code base),
    every problem and ``check``'s error output."""
    shown = {key: value for key, value in project.items() if key not in ("judged", "scores")}
    shown["findings"] = [{"codebase": project["name"], **finding} for finding in project["findings"]]
    return shown


def print_table(projects: list[dict], rule_ids: list[str], judged: bool) -> None:
    """Print the markdown table on stderr: panel rows by part (with part subtotals when the panel has a
    blind part), the panel total, then the keep-clean rows. Numbers only, whatever the part."""
    columns = rule_ids + sorted({rid for p in projects for rid in p["counts"]} - set(rule_ids))
    header = ["project", "version", "files", "s"] + columns + ["problems"]
    if judged:
        header += ["true", "false", "unjudged"]

    def numbers(rows: list[dict]) -> list[str]:
        cells = [str(sum(p["files"] for p in rows)), f"{sum(p['seconds'] for p in rows):.1f}"]
        cells += [str(sum(p["counts"].get(c, 0) for p in rows)) for c in columns]
        cells += [str(sum(p["problem_count"] for p in rows))]
        if judged:
            cells += [str(sum(p["judged"][k] for p in rows)) for k in ("true", "false", "unjudged")]
        return cells

    panel = [p for p in projects if p["part"] != "keep-clean"]
    parts = [part for part in PARTS[:2] if any(p["part"] == part for p in panel)]
    lines = []
    for part in parts:
        rows = [p for p in panel if p["part"] == part]
        lines += [[p["name"] + LABELS[part], p["version"]] + numbers([p]) for p in rows]
        if "blind" in parts:
            lines.append([f"{part} total ({len(rows)})", ""] + numbers(rows))
    lines.append([f"panel total ({len(panel)})", ""] + numbers(panel))
    lines += [[p["name"] + LABELS[p["part"]], p["version"]] + numbers([p])
              for p in projects if p["part"] == "keep-clean"]
    print("| " + " | ".join(header) + " |", file=sys.stderr)
    print("|" + "---|" * len(header), file=sys.stderr)
    for row in lines:
        print("| " + " | ".join(row) + " |", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Build the panel (``--build``) or check every code base, print the table (stderr) and the JSON;
    return the exit code (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("panel", nargs="?", default="/work/panel")
    parser.add_argument("--build", action="store_true",
                        help="build PANEL from the manifest (default scripts/panel.toml) and stop")
    parser.add_argument("--manifest", help="the manifest (build: default scripts/panel.toml; check: default "
                                           "PANEL/panel.toml when present, else every sub-folder of PANEL)")
    parser.add_argument("--only", help="comma-separated code base names")
    parser.add_argument("--extra", action="append", default=[],
                        help="another folder to check as a keep-clean baseline (repeatable)")
    parser.add_argument("--baseline", action="append", default=None,
                        help="without a manifest: panel sub-folder that is a keep-clean baseline (repeatable; "
                             "default hyper-parallel)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--mirror", default="/work/.mirror")
    parser.add_argument("--verdicts", help="tab-separated judged findings (see the module docstring)")
    parser.add_argument("--blind-scores", help="the blind reviewer's numbers: codebase rule true false")
    parser.add_argument("--reveal-blind", metavar="FILE",
                        help="write the blind code bases' findings to FILE (for the blind reviewer alone)")
    parser.add_argument("--from-json", metavar="RUN",
                        help="tabulate the JSON of an earlier run (its -o output) with --verdicts/--blind-scores "
                             "instead of checking again")
    parser.add_argument("-o", "--output", help="write the JSON here instead of stdout")
    args = parser.parse_args(argv)

    panel = Path(args.panel)
    only = set(args.only.split(",")) if args.only else None
    manifest = Path(args.manifest) if args.manifest else (MANIFEST if args.build else panel / PANEL_MANIFEST)
    try:
        codebases = read_manifest(manifest) if args.build or manifest.is_file() else None
    except ManifestError as exc:
        print(exc, file=sys.stderr)
        return 2
    known = {c.name for c in codebases or []} | {Path(p).name for p in args.extra}
    if codebases is not None and only is not None and only - known:
        print(f"--only names no code base of {manifest}: {', '.join(sorted(only - known))}", file=sys.stderr)
        return 2

    if args.build:
        assert codebases is not None
        try:
            build_panel(panel, [c for c in codebases if only is None or c.name in only], Path(args.mirror),
                        manifest, log=lambda line: print(line, file=sys.stderr))
        except BuildError as exc:
            print(f"build failed:\n{exc}", file=sys.stderr)
            return 2
        return 0

    try:
        verdicts = read_verdicts(args.verdicts)
        scores = read_blind_scores(args.blind_scores)
        earlier = json.loads(Path(args.from_json).read_text(encoding="utf-8")) if args.from_json else None
    except (OSError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 2
    if earlier is not None:
        projects = [p for p in earlier["projects"] if only is None or p["name"] in only]
        for project in projects:
            judge(project, verdicts, scores)
        print_table(projects, earlier["rules"], judged=bool(verdicts or scores))
        text = json.dumps({"rules": earlier["rules"], "projects": projects}, indent=2) + "\n"
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
        return 0
    if codebases is not None:
        try:
            targets = manifest_targets(panel, codebases, only)
        except BuildError as exc:
            print(f"not built:\n{exc}", file=sys.stderr)
            return 2
    else:
        baseline = set(args.baseline if args.baseline is not None else ["hyper-parallel"])
        targets = [Target(folder.name, folder, "keep-clean" if is_baseline else "tuning",
                          version_of(folder, Path(args.mirror)))
                   for folder, is_baseline in project_folders(panel, only, [], baseline)]
    targets += [Target(Path(p).name, Path(p), "keep-clean", version_of(Path(p), Path(args.mirror)))
                for p in args.extra if only is None or Path(p).name in only]
    blind_names = {t.name for t in targets if t.part == "blind"}
    for name in sorted(set(scores) - blind_names):
        print(f"--blind-scores: {name} is not a blind code base of this run: its scores are ignored", file=sys.stderr)

    rule_ids = [rule.rule_id for rule in RULES]
    projects, failed = check_targets(targets, args.jobs, verdicts, scores, rule_ids)
    print_table(projects, rule_ids, judged=bool(verdicts or scores))

    if args.reveal_blind:
        blind = [revealed(p) for p in projects if p["part"] == "blind"]
        Path(args.reveal_blind).write_text(json.dumps({"rules": rule_ids, "projects": blind}, indent=2) + "\n",
                                           encoding="utf-8")
    text = json.dumps({"rules": rule_ids, "manifest": str(manifest) if codebases is not None else None,
                       "projects": [public(p) for p in projects]}, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
