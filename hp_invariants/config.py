"""Configuration: ``[tool.hp-invariants]`` in pyproject.toml, validated, merged with the CLI.

Keys (kebab-case, as ruff and pylint spell them):

* ``select`` / ``ignore``: rule ids or symbols (``E9501`` or ``local-tensor-view-not-detached``);
  a prefix such as ``E95`` selects every id starting with it;
* ``exclude`` / ``extend-exclude``: gitignore-style patterns of paths not to walk into;
* ``per-file-ignores``: a table ``"glob" = ["E9503", ...]``;
* ``force-exclude``: apply ``exclude`` to paths named on the command line too (what the
  pre-commit hooks pass), as ruff's ``--force-exclude`` does;
* ``report-unused-suppressions``: report ``# pylint: disable``/``# noqa`` comments for our rules
  that suppress nothing (``I9500 useless-suppression``);
* ``cache-dir``: where the E9503 class index is cached;
* ``timeout-per-file``: seconds of analysis per file before it is skipped with ``F0003`` (default
  10; 0 disables the budget);
* ``max-file-size``: MiB; larger files are not read and get ``F0004`` (default 5; 0: no limit);
* every rule option by name (``local-tensor-attrs = ["_local_tensor"]``, see ``hp-invariants rules``).

Errors raise :class:`ConfigError` naming the file and the key; the CLI turns that into exit 2.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from hp_invariants.model import Option, Rule

#: Default per-file analysis budget in seconds (``timeout-per-file``; 0 disables it).
DEFAULT_TIMEOUT = 10.0
#: Default size limit in bytes (``max-file-size``, configured in MiB; 0 disables it). Parsing costs
#: about 110 MB of memory and up to a second per MB of source; the largest file of torch is 1.4 MB.
DEFAULT_MAX_FILE_SIZE = 5 * 2**20

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")

DEFAULT_EXCLUDES = (
    ".git",
    ".hg",
    ".svn",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "__pycache__",
    "__pypackages__",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    ".eggs",
    "*.egg-info",
)

GENERAL_KEYS = {
    "select",
    "ignore",
    "exclude",
    "extend-exclude",
    "per-file-ignores",
    "report-unused-suppressions",
    "force-exclude",
    "cache-dir",
    "timeout-per-file",
    "max-file-size",
}
#: keys of the history features, validated by :mod:`hp_invariants.history.cli`
HISTORY_KEYS = {"baseline", "pins", "restore-from-history"}
GENERAL_KEYS |= HISTORY_KEYS


class ConfigError(Exception):
    """A configuration or usage error: unknown key, wrong type, bad regex, unknown rule."""


def find_project_root(path: str | os.PathLike[str]) -> Path:
    """Return the project root of ``path``.

    The nearest folder (``path`` itself if a folder, else its parent, then upwards) holding
    ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``. Without one, the top folder of the
    Python package holding ``path`` (the last ancestor with ``__init__.py``), else the folder itself.
    """
    start = Path(os.path.abspath(path))
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in ROOT_MARKERS):
            return candidate
    top = folder
    while (top / "__init__.py").exists() and (top.parent / "__init__.py").exists():
        top = top.parent
    return top


def _check_list(value: Any, key: str, where: str) -> list[str]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: '{key}' must be a list of strings, got {value!r}")
    return list(value)


def check_number(value: Any, key: str, where: str) -> float:
    """Return ``value`` as a float if it is a number >= 0 (not a boolean); raise :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        raise ConfigError(f"{where}: '{key}' must be a number >= 0, got {value!r}")
    return float(value)


def coerce_option(option: Option, value: Any, where: str) -> Any:
    """Validate and convert a configured value of ``option``.

    Raises :class:`ConfigError` for a wrong type or an invalid regular expression.
    """
    if option.kind == "bool":
        if isinstance(value, str) and value.lower() in {"yes", "true", "y", "1", "no", "false", "n", "0"}:
            return value.lower() in {"yes", "true", "y", "1"}
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: '{option.name}' must be a boolean, got {value!r}")
        return value
    items = _check_list(value, option.name, where)
    if option.kind == "regexp_csv":
        for item in items:
            try:
                re.compile(item)
            except re.error as exc:
                raise ConfigError(f"{where}: '{option.name}': bad regular expression {item!r}: {exc}") from exc
    return tuple(items)


@dataclass
class Config:
    """The effective configuration of a run.

    ``options`` maps a rule id to its option values (only those set; defaults come from the rule).
    """

    root: Path
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDES))
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    report_unused_suppressions: bool = False
    force_exclude: bool = False
    cache_dir: str | None = None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""
    timeout_per_file: float = DEFAULT_TIMEOUT
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    history: dict[str, Any] = field(default_factory=dict)  # HISTORY_KEYS as written in the table

    # ------------------------------------------------------------------ rule selection
    def enabled_rules(self, rules: Sequence[Rule]) -> list[Rule]:
        """Return the rules left by ``select`` (default all) minus ``ignore``."""
        chosen = [r for r in rules if not self.select or _matches_any(r, self.select)]
        return [r for r in chosen if not _matches_any(r, self.ignore)]

    def ignored_for_path(self, path: str, rules: Sequence[Rule]) -> set[str]:
        """Return the ids of ``rules`` disabled for ``path`` by ``per-file-ignores``."""
        if not self.per_file_ignores:
            return set()
        rel = _relative(path, self.root)
        ignored: set[str] = set()
        for pattern, codes in self.per_file_ignores.items():
            if _glob_match(rel, pattern) or fnmatch.fnmatchcase(rel, pattern):
                ignored.update(r.rule_id for r in rules if _matches_any(r, codes))
        return ignored

    def is_excluded(self, path: str, given: str | None = None) -> bool:
        """Return True if ``path`` (file or folder) matches an ``exclude`` pattern.

        ``given`` is the folder named on the command line that the walk started from: it and its
        parents are exempt (a path named explicitly is always checked, as in ruff).
        """
        rel = _relative(path, self.root)
        skip = 0
        if given is not None:
            given_rel = _relative(given, self.root)
            skip = 0 if given_rel in ("", ".") else len(given_rel.split("/"))
        return any(_glob_match(rel, pattern, skip) for pattern in self.exclude)


def _matches_any(rule: Rule, codes: Iterable[str]) -> bool:
    return any(code == rule.symbol or rule.rule_id.startswith(code) for code in codes)


def _relative(path: str, root: Path) -> str:
    absolute = os.path.abspath(path)
    try:
        return Path(absolute).relative_to(root).as_posix()
    except ValueError:
        return Path(absolute).as_posix()


def _glob_match(rel: str, pattern: str, skip: int = 0) -> bool:
    """gitignore-style match of a root-relative path.

    A pattern without ``/`` matches any path component; one with ``/`` matches the path or a
    folder above it. The first ``skip`` components (the folder given on the command line) never
    match.
    """
    pattern = pattern.rstrip("/")
    parts = rel.split("/")
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in parts[skip:])
    pattern = pattern.lstrip("/")
    return any(fnmatch.fnmatchcase("/".join(parts[:i]), pattern) for i in range(max(skip, 0) + 1, len(parts) + 1))


def validate_codes(codes: Sequence[str], rules: Sequence[Rule], where: str) -> list[str]:
    """Check that every code names a rule (id, id prefix or symbol); raise :class:`ConfigError`."""
    for code in codes:
        if not any(_matches_any(r, [code]) for r in rules):
            known = ", ".join(f"{r.rule_id} ({r.symbol})" for r in rules)
            raise ConfigError(f"{where}: unknown rule {code!r}; known rules: {known}")
    return list(codes)


def load_config(root: Path, rules: Sequence[Rule], pyproject: Path | None = None) -> Config:
    """Read ``[tool.hp-invariants]`` from ``pyproject`` (default ``root/pyproject.toml``).

    Raises :class:`ConfigError` on invalid TOML, unknown keys, wrong types, bad regexes or unknown
    rule codes. A missing file or table gives the defaults.
    """
    config = Config(root=root)
    path = pyproject or root / "pyproject.toml"
    if not path.is_file():
        if pyproject is not None:  # named explicitly (--config): its absence is an error
            raise ConfigError(f"{path}: configuration file not found")
        return config
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from exc
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: 'tool' must be a table")
    table = tool.get("hp-invariants")
    if table is None:
        return config
    where = f"{path} [tool.hp-invariants]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    config.source = str(path)
    options_by_name = {opt.name: (rule, opt) for rule in rules for opt in rule.options}
    for key, value in table.items():
        if key == "select":
            config.select = validate_codes(_check_list(value, key, where), rules, f"{where} select")
        elif key == "ignore":
            config.ignore = validate_codes(_check_list(value, key, where), rules, f"{where} ignore")
        elif key == "exclude":
            config.exclude = _check_list(value, key, where)
        elif key == "extend-exclude":
            config.exclude.extend(_check_list(value, key, where))
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: 'per-file-ignores' must be a table of glob = [codes]")
            for pattern, codes in value.items():
                config.per_file_ignores[pattern] = validate_codes(
                    _check_list(codes, f"per-file-ignores.{pattern}", where), rules, where
                )
        elif key == "report-unused-suppressions":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: '{key}' must be a boolean, got {value!r}")
            config.report_unused_suppressions = value
        elif key == "force-exclude":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: '{key}' must be a boolean, got {value!r}")
            config.force_exclude = value
        elif key == "cache-dir":
            if not isinstance(value, str):
                raise ConfigError(f"{where}: '{key}' must be a string, got {value!r}")
            config.cache_dir = str((root / value).resolve())
        elif key == "timeout-per-file":
            config.timeout_per_file = check_number(value, key, where)
        elif key == "max-file-size":
            config.max_file_size = int(check_number(value, key, where) * 2**20)
        elif key in HISTORY_KEYS:
            config.history[key] = value
        elif key in options_by_name:
            rule, opt = options_by_name[key]
            config.options.setdefault(rule.rule_id, {})[key] = coerce_option(opt, value, where)
        else:
            known = sorted(GENERAL_KEYS | set(options_by_name))
            raise ConfigError(f"{where}: unknown key {key!r}; known keys: {', '.join(known)}")
    return config
