"""Configuration: ``[tool.hp-invariants]`` in pyproject.toml, validated, resolved per file.

Each file is checked under its own configuration, as ruff resolves hierarchical configuration:
the nearest ``pyproject.toml`` above the file that has a ``[tool.hp-invariants]`` table (a
``pyproject.toml`` without the table is passed over), else the defaults; then the command-line
flags on top (:class:`Overrides`), or ``--config FILE`` for every file. Patterns (``exclude``,
``per-file-ignores``) are relative to the folder of the ``pyproject.toml`` that sets them.
:class:`Resolver` does this and hands out one :class:`Settings` object per file: the enabled
rules, their options, the suppression policy and the limits; every front end reads only that.

Keys (kebab-case, as ruff and pylint spell them):

* ``select`` / ``ignore``: rule ids or symbols (``E9501`` or ``local-tensor-view-not-detached``);
  a prefix such as ``E95`` selects every id starting with it;
* ``exclude``: gitignore-style patterns of paths not to walk into (git's rules, ``!`` included: see
  :func:`_exclude_matcher`);
* ``per-file-ignores``: a table ``"glob" = ["E9503", ...]`` (a gitignore-style pattern, or an
  ``fnmatch`` one whose ``*`` crosses ``/`` as in ruff's);
* ``force-exclude``: apply ``exclude`` to paths named on the command line too (what the
  pre-commit hooks pass), as ruff's ``--force-exclude`` does;
* ``report-unused-suppressions``: report ``# pylint: disable``/``# noqa`` comments for our rules
  that suppress nothing (``I9500 useless-suppression``);
* ``cache-dir``: where the E9503 class index is cached;
* ``timeout-per-file``: seconds of analysis per file before it is skipped with ``F0003`` (default
  10; 0 disables the budget);
* ``max-file-size``: MiB; larger files are not read and get ``F0004`` (default 5; 0: no limit; rounded up to whole bytes);
* every rule option by name (``local-tensor-attrs = ["_local_tensor"]``, see ``hp-invariants rules``);
* ``extend-<key>`` for ``exclude`` and every list-valued rule option (:func:`is_list_option`): entries
  added to the key's value (the one the same table sets, else the default) instead of replacing it, as
  ruff's ``extend-exclude`` (``extend-no-grad-contexts = ["no_grad_ctx"]`` keeps ``no_grad``).

Errors raise :class:`ConfigError` naming the file and the key; the CLI turns that into exit 2.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import os
import re
try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11: the same parser, as the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hp_invariants.limits import DEFAULT_MAX_FILE_SIZE, DEFAULT_TIMEOUT
from hp_invariants.api import Option, Rule


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


EXTEND = "extend-"
"""The prefix of a key that adds to a list-valued key (``exclude``, a list rule option) instead of
replacing its value."""


class ConfigError(Exception):
    """A configuration or usage error: unknown key, wrong type, bad regex, unknown rule."""


def is_project_root(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` holds a project marker: ``pyproject.toml`` or ``.git``, or ``setup.py`` /
    ``setup.cfg`` outside a package (see :func:`find_project_root`)."""
    return os.path.exists(os.path.join(folder, "pyproject.toml")) or _marked_besides_pyproject(folder)


def _marked_besides_pyproject(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` holds ``.git``, or ``setup.py`` / ``setup.cfg`` outside a package."""
    if os.path.exists(os.path.join(folder, ".git")):
        return True
    return not os.path.exists(os.path.join(folder, "__init__.py")) and \
        any(os.path.exists(os.path.join(folder, marker)) for marker in ("setup.py", "setup.cfg"))


def find_project_root(path: str | os.PathLike[str], marked: dict[str, Any] | None = None) -> Path:
    """Return the project root of ``path``.

    The nearest folder (``path`` itself if a folder, else its parent, then upwards) holding
    ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``; a ``setup.py`` or ``setup.cfg``
    inside a package (a folder holding ``__init__.py``) is a module of that package, not a project's
    build script (Megatron-Bridge's ``megatron/bridge/training/setup.py``), and marks nothing. A
    ``pyproject.toml`` that holds only other tools' settings (:func:`_other_tools_only`: a sub-folder's
    ``[tool.black]``) is passed over, as the configuration lookup passes it over, when a folder above
    holds a marker; else it is the root. Without any, the top folder of the Python package holding
    ``path`` (the last ancestor with ``__init__.py``), else the folder itself.
    ``marked``: a memo the caller keeps for the life of one run (``folder -> how it marks``, and,
    for folders with no marker but such a ``pyproject.toml`` here or above, the nearest of those, and
    where their package tops are: the folders of a project share their ancestors, each is looked at
    once).
    """
    start = os.path.abspath(path)
    folder = start if os.path.isdir(start) else os.path.dirname(start)
    memo: dict[str, Any] = marked if marked is not None else {}
    candidate = folder
    passed: list[str] = []
    fallback = ""  # the nearest folder at or above the last one passed marked only by other tools' settings
    while True:  # plain strings: called for every folder of a project
        # known from an earlier call: no marker here or above but other tools' settings (the nearest, or "")
        known = memo.get("\0none-above:" + candidate)
        if known is not None:
            fallback = known
            break
        found = memo.get(candidate)
        if found is None:
            found = memo[candidate] = _marks(candidate)
        if found == _MARKER:
            return Path(candidate)
        passed.append(candidate)
        parent = os.path.dirname(candidate)
        if parent == candidate:
            break
        candidate = parent
    for seen in reversed(passed):
        if memo[seen] == _OTHER_TOOLS:
            fallback = seen
        memo["\0none-above:" + seen] = fallback
    nearest = memo["\0none-above:" + folder]
    return Path(nearest or _package_top(folder, memo))


_MARKER, _OTHER_TOOLS, _NONE = 2, 1, 0  # how a folder marks a project (see _marks)


def _marks(folder: str) -> int:
    """``_MARKER`` when ``folder`` holds a project marker (:func:`is_project_root`) other than a
    ``pyproject.toml`` of other tools' settings only; ``_OTHER_TOOLS`` when that is its only marker;
    else ``_NONE``."""
    pyproject = os.path.join(folder, "pyproject.toml")
    if _marked_besides_pyproject(folder):
        return _MARKER
    if not os.path.exists(pyproject):
        return _NONE
    return _OTHER_TOOLS if _other_tools_only(pyproject) else _MARKER


def _other_tools_only(pyproject: str) -> bool:
    """True when ``pyproject`` is a readable TOML file whose only table is ``[tool]`` and which has no
    ``[tool.hp-invariants]`` table: the settings of other tools (``[tool.black]``, ``[tool.ruff]``),
    neither a project (``[project]``, ``[build-system]``, or an empty file: a marker on purpose) nor
    our configuration. A file that cannot be read or parsed is not (it stays a project marker; the
    configuration lookup reports it)."""
    try:
        data = read_toml(Path(pyproject))
    except ConfigError:
        return False
    if data is None:
        return False
    tool = data.get("tool")
    return set(data) == {"tool"} and isinstance(tool, dict) and "hp-invariants" not in tool


def _package_top(folder: str, memo: dict[str, Any]) -> str:
    """The last ancestor of ``folder`` (itself included) reached through folders that all hold
    ``__init__.py``, memoized in ``memo``."""
    key = "\0top:" + folder
    top = memo.get(key)
    if top is None:
        parent = os.path.dirname(folder)
        if parent != folder and os.path.exists(os.path.join(folder, "__init__.py")) \
                and os.path.exists(os.path.join(parent, "__init__.py")):
            top = _package_top(parent, memo)
        else:
            top = folder
        memo[key] = top
    return top


def _check_list(value: Any, key: str, where: str) -> list[str]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where}: '{key}' must be a list of strings, got {value!r}")
    return list(value)


def check_number(value: Any, key: str, where: str) -> float:
    """Return ``value`` as a float if it is a finite number >= 0 (not a boolean; TOML's ``inf`` and
    ``nan`` are not); raise :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise ConfigError(f"{where}: '{key}' must be a finite number >= 0, got {value!r}")
    return float(value)


def mib_to_bytes(mib: float) -> int:
    """The byte count of a ``max-file-size`` of ``mib`` MiB (a finite number >= 0), rounded up: 0
    stays 0 (no limit) and any positive size is a limit of at least one byte (rounding down made a
    size under one byte, ``1e-7``, no limit at all). A size too large to count in bytes (``1e308``
    MiB) is no limit either."""
    size = mib * 2**20
    return 0 if size == math.inf else math.ceil(size)


def is_list_option(option: Option) -> bool:
    """True when ``option`` holds a list (kind ``csv`` or ``regexp_csv``, not ``bool``): it then also
    takes an ``extend-<name>`` key (see :data:`EXTEND`)."""
    return option.kind != "bool"


def coerce_option(option: Option, value: Any, where: str, key: str | None = None) -> Any:
    """Validate and convert a configured value of ``option``, set under ``key`` (default: the option's
    name; ``extend-<name>`` for entries to add). Returns a bool or a tuple of strings.

    Raises :class:`ConfigError` naming ``key`` for a wrong type or an invalid regular expression.
    """
    key = key or option.name
    if option.kind == "bool":
        if isinstance(value, str) and value.lower() in {"yes", "true", "y", "1", "no", "false", "n", "0"}:
            return value.lower() in {"yes", "true", "y", "1"}
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: '{key}' must be a boolean, got {value!r}")
        return value
    items = _check_list(value, key, where)
    if option.kind == "regexp_csv":
        for item in items:
            try:
                re.compile(item)
            except re.error as exc:
                raise ConfigError(f"{where}: '{key}': bad regular expression {item!r}: {exc}") from exc
    return tuple(items)


def extended(value: Sequence[str], extra: Sequence[str]) -> tuple[str, ...]:
    """``value`` followed by the entries of ``extra`` it lacks (what an ``extend-`` key makes of it)."""
    return tuple(dict.fromkeys((*value, *extra)))


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
        skip = 0 if given is None else _given_skip(self.root, os.path.abspath(given))
        return _exclude_matcher(tuple(self.exclude))(rel, skip, lambda: os.path.isdir(path))


def _matches_any(rule: Rule, codes: Iterable[str]) -> bool:
    return any(code == rule.symbol or rule.rule_id.startswith(code) for code in codes)


@functools.lru_cache(maxsize=256)
def _given_skip(root: Path, given: str) -> int:
    """The number of leading components of root-relative paths that lie in ``given`` (the folder a
    walk started from), which exclude patterns never match."""
    try:
        given_rel = Path(given).relative_to(root).as_posix()
    except ValueError:  # the walk started above this configuration's folder
        given_rel = ""
    return 0 if given_rel in ("", ".") else len(given_rel.split("/"))


@functools.lru_cache(maxsize=64)
def _exclude_matcher(patterns: tuple[str, ...]) -> Callable[..., bool]:
    """``(rel, skip, is_folder=None) -> bool``: is the root-relative path ``rel`` excluded by the
    gitignore-style ``patterns``, the first ``skip`` components (the folder given on the command line
    and its parents) never matching; ``is_folder()`` tells whether ``rel`` itself is a folder (asked
    once, by patterns other than bare names; ``None``: taken as one). Raises ``ValueError`` for a
    pattern gitignore cannot read.

    gitignore's rules (git's documentation): a pattern without a ``/`` but a trailing one matches a
    component at any depth, one with a ``/`` is relative to the configuration's folder (so is one with a
    leading ``/`` or ``./``), ``*`` and ``?`` do not cross ``/``, ``**/`` is any number of
    folders (none too), ``dir/**`` is everything below ``dir``, a trailing ``/`` matches folders only,
    ``!`` re-includes what an earlier pattern excluded (not inside an excluded folder) and the last
    matching pattern decides. Bare names (the defaults) are matched per component by one regular
    expression; any other pattern is read by pathspec's gitignore patterns, imported only then."""
    patterns = tuple(_plain_pattern(p) for p in patterns)
    patterns = tuple(p for p in patterns if p)
    if not any(_needs_gitignore(p) for p in patterns):
        one = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)).match \
            if patterns else None
        return lambda rel, skip, is_folder=None: one is not None and any(one(part) for part in rel.split("/")[skip:])
    from pathspec.patterns.gitignore.basic import GitIgnoreBasicPattern  # noqa: PLC0415 - see above

    rules: list[tuple[Callable[[str], Any], bool, bool, bool]] = []
    for pattern in patterns:
        core = pattern[1:] if pattern.startswith("!") else pattern
        if core.strip("/") == "" or "//" in core:
            continue  # `/`, `//`, `b//`: an empty path component, which no path has (git matches nothing)
        # a trailing `/` matches folders only: the rest of the pattern is read as git reads it (pathspec
        # reads `*/` and `**/` as a bare `/`, which matches no path, and `tests/**/` as `tests/` itself)
        folders_only = pattern.endswith("/") and not pattern.endswith("\\/")
        body = pattern[:-1] if folders_only else pattern
        regex, include = GitIgnoreBasicPattern.pattern_to_regex(body)
        if regex is not None:  # a comment or a blank
            inside = body.endswith("/**")
            if regex == ".":  # pathspec's "every path" (`*`, `**`, `/**`, `**/**`): every component
                regex, inside = ".*", False
            rules.append((re.compile(regex).match, bool(include), inside, folders_only))
    negates = any(not include for _, include, _, _ in rules)

    def match(rel: str, skip: int, is_folder: Callable[[], bool] | None = None) -> bool:
        parts = rel.split("/")
        last = len(parts)
        start = len("/".join(parts[:skip])) + 1 if skip > 0 else 0  # where component ``i`` begins
        for i in range(max(skip, 0) + 1, last + 1):  # each folder above, then the path itself
            path = "/".join(parts[:i])
            folder = i < last or is_folder is None or is_folder()
            text = path + "/" if folder else path  # a folder: what `dir/` patterns need
            decision = None
            for regex, include, inside, folders_only in rules:
                if folders_only and not folder:
                    continue
                # pathspec's regexes match the start of a path (a folder above it included): count a
                # match here only when it is about component i. `dir/**` is everything below dir, not
                # dir itself (its regex ends at `dir/`): component i must lie below the match
                found = regex(text)
                if found is None:
                    continue
                end = found.end()
                if not (end <= len(path) if inside else end > start):
                    continue
                if not negates:
                    return True
                decision = include
            if decision:
                return True  # an excluded folder: nothing below it is re-included (as in git)
            start = len(path) + 1
        return False

    return match


def _plain_pattern(pattern: str) -> str:
    """``pattern`` without surrounding blanks, a leading ``./`` read as ``/`` (anchored at the
    configuration's folder: ``./a.py`` is that folder's ``a.py`` only)."""
    pattern = pattern.strip()
    if pattern.startswith("./"):  # the configuration's folder, as a leading `/` says (git reads neither)
        while pattern.startswith("./"):
            pattern = pattern[2:]
        pattern = "/" + pattern if pattern else ""
    return pattern


def _needs_gitignore(pattern: str) -> bool:
    """False for a bare name (``build``, ``*.pyc``), which fnmatch matches per component
    exactly as gitignore does; True for anything gitignore reads differently."""
    return "/" in pattern or pattern.startswith(("!", "#")) or "\\" in pattern or "**" in pattern


def _relative(path: str, root: Path) -> str:
    absolute = os.path.abspath(path)
    prefix = str(root).rstrip(os.sep) + os.sep
    if absolute.startswith(prefix):  # the common case, without pathlib
        return absolute[len(prefix):].replace(os.sep, "/")
    try:
        return Path(absolute).relative_to(root).as_posix()
    except ValueError:
        return Path(absolute).as_posix()


def _glob_match(rel: str, pattern: str) -> bool:
    """gitignore-style match of the root-relative path of a file against one pattern (see
    :func:`_exclude_matcher`)."""
    try:
        return _exclude_matcher((pattern,))(rel, 0, lambda: False)
    except ValueError:  # validated when the configuration is read: only a pattern made elsewhere
        return False


def _check_patterns(patterns: list[str], key: str, where: str) -> list[str]:
    """``patterns`` when gitignore can read each of them; raises :class:`ConfigError` naming the key."""
    for pattern in patterns:
        try:
            _exclude_matcher((pattern,))
        except ValueError as exc:
            raise ConfigError(f"{where}: '{key}': not a gitignore-style pattern: {pattern!r} ({exc})") from None
    return patterns


def validate_codes(codes: Sequence[str], rules: Sequence[Rule], where: str) -> list[str]:
    """Check that every code names a rule (id, id prefix or symbol); raise :class:`ConfigError`."""
    for code in codes:
        if not code.strip():  # "" is a prefix of every id: it would select (or ignore) every rule
            raise ConfigError(f"{where}: an empty rule code")
        if not any(_matches_any(r, [code]) for r in rules):
            known = ", ".join(f"{r.rule_id} ({r.symbol})" for r in rules)
            raise ConfigError(f"{where}: unknown rule {code!r}; known rules: {known}")
    return list(codes)


def load_config(root: Path, rules: Sequence[Rule], pyproject: Path | None = None) -> Config:
    """Read ``[tool.hp-invariants]`` from ``pyproject`` (default ``root/pyproject.toml``).

    Raises :class:`ConfigError` on invalid TOML, unknown keys (an ``extend-`` key of a key that is
    not a list), wrong types, bad regexes or unknown rule codes. A missing file or table gives the
    defaults. ``extend-<key>`` entries are added to ``<key>``'s value whatever the order of the keys.
    """
    config = Config(root=root)
    path = pyproject or root / "pyproject.toml"
    if not path.is_file():
        if pyproject is not None:  # named explicitly (--config): its absence is an error
            if path.is_dir():
                raise ConfigError(f"{path}: is a folder; name its pyproject.toml (--config FILE)")
            raise ConfigError(f"{path}: configuration file not found")
        return config
    data = read_toml(path)
    if data is None:  # removed since the check above
        raise ConfigError(f"{path}: cannot read configuration: the file is gone")
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: 'tool' must be a table")
    table = tool.get("hp-invariants")
    if table is None:
        _refuse_misspelled_table(tool, path)
        return config
    where = f"{path} [tool.hp-invariants]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    config.source = str(path)
    options_by_name = {opt.name: (rule, opt) for rule in rules for opt in rule.options}
    extends: dict[str, Any] = {}  # applied once every plain key is read
    for key, value in table.items():
        if key == "select":
            config.select = validate_codes(_check_list(value, key, where), rules, f"{where} select")
            if not config.select:  # as `--select ''`: an empty list is not "every rule"
                raise ConfigError(f"{where}: 'select' names no rule (leave it out to run every rule)")
        elif key == "ignore":
            config.ignore = validate_codes(_check_list(value, key, where), rules, f"{where} ignore")
        elif key == "exclude":
            config.exclude = _check_patterns(_check_list(value, key, where), key, where)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: 'per-file-ignores' must be a table of glob = [codes]")
            for pattern, codes in value.items():
                if pattern.strip().startswith("!"):  # was read as a pattern that never matches: silently nothing
                    raise ConfigError(f"{where}: 'per-file-ignores.{pattern!r}': a '!' pattern is not supported "
                                      f"here; list the files the codes are ignored in")
                _check_patterns([pattern], f"per-file-ignores.{pattern!r}", where)
                config.per_file_ignores[pattern] = validate_codes(
                    _check_list(codes, f"per-file-ignores.{pattern}", where), rules,
                    f"{where} per-file-ignores.{pattern!r}")
        elif key == "report-unused-suppressions":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: '{key}' must be a boolean, got {value!r}")
            config.report_unused_suppressions = value
        elif key == "force-exclude":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: '{key}' must be a boolean, got {value!r}")
            config.force_exclude = value
        elif key == "cache-dir":
            if not isinstance(value, str) or not value.strip():  # "" was the project folder itself
                raise ConfigError(f"{where}: '{key}' must name a folder, got {value!r}")
            config.cache_dir = str((root / value).resolve())
        elif key == "timeout-per-file":
            config.timeout_per_file = check_number(value, key, where)
        elif key == "max-file-size":
            config.max_file_size = mib_to_bytes(check_number(value, key, where))
        elif key in HISTORY_KEYS:
            config.history[key] = value
        elif key in options_by_name:
            rule, opt = options_by_name[key]
            config.options.setdefault(rule.rule_id, {})[key] = coerce_option(opt, value, where)
        elif key.startswith(EXTEND) and key.removeprefix(EXTEND) in GENERAL_KEYS | set(options_by_name):
            extends[key.removeprefix(EXTEND)] = value
        else:
            known = sorted(GENERAL_KEYS | set(options_by_name))
            raise ConfigError(f"{where}: unknown key {key!r}; known keys: {', '.join(known)} "
                              f"(and {EXTEND}<key> for exclude and the list options)")
    for name, value in extends.items():
        key = EXTEND + name
        if name == "exclude":
            config.exclude = list(extended(config.exclude, _check_patterns(_check_list(value, key, where), key, where)))
        elif name in options_by_name and is_list_option(options_by_name[name][1]):
            rule, opt = options_by_name[name]
            values = config.options.setdefault(rule.rule_id, {})
            values[name] = extended(values.get(name, opt.default), coerce_option(opt, value, where, key))
        else:
            lists = ", ".join(["exclude", *(n for n, (_r, o) in options_by_name.items() if is_list_option(o))])
            raise ConfigError(f"{where}: unknown key {key!r}: {EXTEND}<key> only adds to: {lists}")
    return config


# ---------------------------------------------------------------------- per-file resolution
@dataclass(frozen=True)
class Overrides:
    """Command-line settings applied on top of every file's configuration (``None``: not given)."""

    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    force_exclude: bool | None = None
    report_unused_suppressions: bool | None = None
    cache_dir: str | None = None
    timeout_per_file: float | None = None
    max_file_size: int | None = None

    def apply(self, config: "Config", rules: Sequence[Rule]) -> "Config":
        """Return a copy of ``config`` with these overrides applied (codes validated against ``rules``;
        raises :class:`ConfigError` for an unknown one)."""
        import copy

        out = copy.copy(config)
        if self.select is not None:  # the command line's selection wins over the file's (as ruff's):
            out.select = validate_codes(list(self.select), rules, "--select")
            out.ignore = []  # `--select E9503` runs E9503 where the file ignores it (per-file-ignores stay)
        if self.ignore:
            out.ignore = list(out.ignore) + validate_codes(list(self.ignore), rules, "--ignore")
        if self.force_exclude is not None:
            out.force_exclude = self.force_exclude
        if self.report_unused_suppressions is not None:
            out.report_unused_suppressions = self.report_unused_suppressions
        if self.cache_dir is not None:
            out.cache_dir = self.cache_dir
        if self.timeout_per_file is not None:
            out.timeout_per_file = self.timeout_per_file
        if self.max_file_size is not None:
            out.max_file_size = self.max_file_size
        return out


@dataclass(frozen=True)
class Settings:
    """Everything the pipeline needs to check one file, resolved once (see :class:`Resolver`).

    ``rules``: the rules that run on the file (``select``/``ignore`` and ``per-file-ignores``
    applied); ``options``: option values by rule id (only those configured; rule defaults fill the
    rest); ``report_unused_suppressions``: report ``I9500`` for suppressions that silence nothing;
    ``suppressions``: the comment kinds this pipeline honours, ``"pylint"`` (``# pylint: disable``)
    and ``"noqa"`` (the pylint plugin leaves ``"pylint"`` to pylint itself, which also tracks their
    use for its ``useless-suppression``); ``timeout_per_file`` (seconds, 0: none) and ``max_file_size``
    (bytes, 0: none): the limits; ``config``: the :class:`Config` it came from (its ``source`` names
    the pyproject, ``""`` for the defaults).
    """

    rules: tuple[Rule, ...]
    options: dict[str, dict[str, Any]]
    report_unused_suppressions: bool = False
    suppressions: frozenset[str] = frozenset({"pylint", "noqa"})
    timeout_per_file: float = DEFAULT_TIMEOUT
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    config: "Config | None" = None

    @property
    def key(self) -> tuple:
        """A hashable summary of what changes findings (for caches and comparisons)."""
        return (tuple(r.rule_id for r in self.rules),
                tuple(sorted((k, tuple(sorted(v.items()))) for k, v in self.options.items())),
                self.report_unused_suppressions, tuple(sorted(self.suppressions)))


def read_toml(path: Path) -> dict[str, Any] | None:
    """The TOML document ``path`` as a dict, ``None`` when the file does not exist. Raises
    :class:`ConfigError` (``<path>: cannot read configuration: ...``) when it cannot be read or parsed."""
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from exc


def has_table(pyproject: Path) -> bool:
    """True when ``pyproject`` is a readable TOML file with a ``[tool.hp-invariants]`` table.

    Raises :class:`ConfigError` when the file exists but is not valid TOML (a broken configuration is
    never skipped silently)."""
    data = read_toml(pyproject)
    if data is None:
        return False
    tool = data.get("tool")
    if tool is not None and not isinstance(tool, dict):
        raise ConfigError(f"{pyproject}: 'tool' must be a table")
    if isinstance(tool, dict) and "hp-invariants" not in tool:
        _refuse_misspelled_table(tool, pyproject)
    return isinstance(tool, dict) and "hp-invariants" in tool


def _refuse_misspelled_table(tool: dict, pyproject: Path) -> None:
    """Raise :class:`ConfigError` when ``tool`` (a pyproject's ``[tool]`` table, without
    ``hp-invariants``) holds a table whose name differs from it only in case, ``_``/``-``/``.`` or a
    letter or two (``[tool.hp_invariants]``): its settings would otherwise be silently ignored."""
    import difflib  # noqa: PLC0415 - only for a project with other tool tables

    for name in tool:
        folded = re.sub(r"[-_.]+", "-", str(name).lower())
        if folded == "hp-invariants" or difflib.SequenceMatcher(None, folded, "hp-invariants").ratio() >= 0.9:
            raise ConfigError(f"{pyproject}: [tool.{name}] is not read (did you mean [tool.hp-invariants]?)")


class Resolver:
    """Resolves the :class:`Settings` of each file (memoized per folder).

    ``rules``: every known rule (the registry); ``overrides``: command-line flags; ``config_file``:
    an explicit ``--config`` pyproject used for every file (its folder anchors the patterns).
    Raises :class:`ConfigError` (from :meth:`config_for`) for an invalid configuration.
    """

    def __init__(self, rules: Sequence[Rule], overrides: Overrides = Overrides(), config_file: Path | None = None):
        self.rules = tuple(rules)
        self.overrides = overrides
        self.config_file = Path(os.path.abspath(config_file)) if config_file else None
        self._by_folder: dict[str, Config] = {}
        self._by_file: dict[str, Config] = {}  # a file's absolute path -> the config of its folder
        self._by_pyproject: dict[str, Config] = {}
        self._tables: dict[str, Config | None] = {}  # folder -> config of the nearest table at or above it
        self._defaults: dict[Path, Config] = {}  # project root -> the default configuration rooted there
        self._settings: dict[tuple[str, str], Settings] = {}
        self._by_path: dict[str, Settings] = {}
        self._marked: dict[str, Any] = {}  # the memo of find_project_root

    def config_for(self, path: str | os.PathLike[str]) -> Config:
        """Return the configuration governing ``path`` (a file, or a folder: that folder's own)."""
        absolute = os.path.abspath(path)
        found = self._by_folder.get(absolute) or self._by_file.get(absolute)  # no stat for a path met before
        if found is not None:
            return found
        is_folder = os.path.isdir(absolute)
        folder = absolute if is_folder else os.path.dirname(absolute)
        found = self._by_folder.get(folder)
        if found is not None:
            if not is_folder:
                self._by_file[absolute] = found
            return found
        if self.config_file is not None:
            config = self._load(self.config_file)
        else:
            config = self._table_config(folder)
            if config is None:  # no table: the defaults, rooted at this folder's own project root
                root = find_project_root(folder, self._marked)
                config = self._defaults.get(root)
                if config is None:
                    config = self._defaults[root] = self.overrides.apply(Config(root=root), self.rules)
        self._by_folder[folder] = config
        if not is_folder:
            self._by_file[absolute] = config
        return config

    def table_config_for(self, folder: str) -> Config | None:
        """The configuration read from a file that governs the folder ``folder`` (``--config``, else
        the nearest ``[tool.hp-invariants]`` table at or above it), or ``None`` when only the defaults
        govern it: then its ``exclude`` is :data:`DEFAULT_EXCLUDES` whatever its project root (the
        command-line overrides never change ``exclude``), so a walk need not look the root up."""
        if self.config_file is not None:
            return self._load(self.config_file)
        return self._table_config(os.path.abspath(folder))

    def _table_config(self, folder: str) -> Config | None:
        """The configuration of the nearest ``pyproject.toml`` with a ``[tool.hp-invariants]`` table in
        ``folder`` or above, else ``None``; memoized for every folder the search passes (they all have
        the same answer), so each folder's ``pyproject.toml`` is looked at once per run."""
        visited: list[str] = []
        config: Config | None = None
        candidate = folder
        while True:
            if candidate in self._tables:
                config = self._tables[candidate]
                break
            visited.append(candidate)
            pyproject = os.path.join(candidate, "pyproject.toml")
            if os.path.isfile(pyproject) and has_table(Path(pyproject)):
                config = self._load(Path(pyproject))
                break
            parent = os.path.dirname(candidate)
            if parent == candidate:
                break
            candidate = parent
        for seen in visited:
            self._tables[seen] = config
        return config

    def _load(self, pyproject: Path) -> Config:
        key = str(pyproject)
        if key not in self._by_pyproject:
            loaded = load_config(pyproject.parent, self.rules, pyproject)
            self._by_pyproject[key] = self.overrides.apply(loaded, self.rules)
        return self._by_pyproject[key]

    def settings_for(self, path: str) -> Settings:
        """Return the :class:`Settings` of the file ``path`` (memoized per path: the configuration
        files are read once per run)."""
        found = self._by_path.get(path)
        if found is None:
            found = self._by_path[path] = self._settings_for(path)
        return found

    def _settings_for(self, path: str) -> Settings:
        config = self.config_for(path)
        ignored = config.ignored_for_path(path, self.rules)
        key = (config.source or str(config.root), ",".join(sorted(ignored)))
        found = self._settings.get(key)
        if found is None:
            rules = tuple(r for r in config.enabled_rules(self.rules) if r.rule_id not in ignored)
            found = Settings(rules=rules, options=config.options,
                             report_unused_suppressions=config.report_unused_suppressions,
                             timeout_per_file=config.timeout_per_file, max_file_size=config.max_file_size,
                             config=config)
            self._settings[key] = found
        return found

    def is_excluded(self, path: str, given: str | None = None) -> bool:
        """True when ``path`` matches an ``exclude`` pattern of the configuration of its folder
        (``given``: the path named on the command line that a walk started from; see
        :meth:`Config.is_excluded`)."""
        return self.config_for(os.path.dirname(os.path.abspath(path)) or ".").is_excluded(path, given)

    def force_excluded(self, path: str) -> bool:
        """True when ``path`` is named on the command line but ``force-exclude`` is set and it matches
        an ``exclude`` pattern of its own configuration."""
        config = self.config_for(path)
        return config.force_exclude and config.is_excluded(path)

    def configs(self) -> list[Config]:
        """The configurations met so far (for messages and the project-facts build)."""
        return list({id(c): c for c in self._by_folder.values()}.values())
