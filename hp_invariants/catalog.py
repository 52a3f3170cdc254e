"""The versioned framework catalog of E9503, and the library versions a code base declares.

E9503 (``undefined-method-call``) knows the members of framework base classes (``torch.nn.Module``,
``transformers.PreTrainedModel``, ``diffusers.ModelMixin``, ``mindspore.nn.Cell``, builtins) from
the bundled ``data/framework_members.json`` (``scripts/gen_framework_catalog.py`` writes it from
real releases), never by importing the libraries: this module imports no framework, ever.

Members depend on the library release: ``transformers`` 4.x's ``PreTrainedModel`` inherits
``GenerationMixin``, 5.x's does not. So the catalog holds several releases per library, and a
code base's declared range decides which count (issue #23, "precision by principle"): a member
present in *any* catalogued release inside the range is defined; a range that admits no
catalogued release, or no declared range at all, admits every catalogued release (the most
permissive reading). A catalogued release ``X.Y.Z`` stands for its minor series ``X.Y``: the
range ``==4.36.0`` admits the catalogued ``4.36.2``.

* :func:`declared_ranges` reads the ranges a project declares for the catalogued libraries
  (``pyproject.toml``: ``[project]`` dependencies and optional-dependencies,
  ``[dependency-groups]``, ``[tool.poetry]`` dependencies and groups; ``setup.py``'s literal
  ``install_requires``/``extras_require``, read with :mod:`ast`, never run; ``setup.cfg``;
  ``requirements*.txt`` and ``requirements/*.txt``). Every declaration counts: a version is in the
  range when one declaration of the library admits it.
* :func:`entries_for` gives ``alias -> CatalogEntry`` for those ranges: each class's members are
  the union over the admitted releases, and the members of the classes it inherits from other
  libraries (``torch.nn.Module`` under ``PreTrainedModel``) over *their* admitted releases.
* :func:`members_in` and :func:`breaking_note` name the releases that have a member, for a
  finding on a member that only releases outside the range have.
"""

from __future__ import annotations

import ast
import configparser
import hashlib
import json
import os
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, NamedTuple

if TYPE_CHECKING:  # packaging is imported when a project declares a catalogued library (it costs ~50 ms)
    from packaging.specifiers import SpecifierSet

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11: the same parser, as the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

CATALOG_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "framework_members.json")

DISTRIBUTIONS = {
    "torch": "torch", "transformers": "transformers", "diffusers": "diffusers",
    "mindspore": "mindspore", "mindspore-gpu": "mindspore", "mindspore-ascend": "mindspore",
    "mindspore-cpu": "mindspore", "mindspore-dev": "mindspore",
}
"""Distribution name (canonical, PEP 503) -> catalogued library it installs."""

Ranges = Mapping[str, "tuple[SpecifierSet, ...]"]
"""``library -> declarations``: a version is in the range when one of the specifier sets admits it."""


class CatalogEntry(NamedTuple):
    """A framework class as E9503 sees it for one set of library ranges: ``members`` flattened over
    its MRO and over the admitted releases; ``dynamic``: a class of its MRO defines
    ``__getattr__``/``__getattribute__`` (or a base could not be read); ``registry_getattr``: its
    ``__getattr__`` is ``torch.nn.Module``'s or ``mindspore.nn.Cell``'s registry lookup."""

    qualname: str
    members: frozenset[str]
    dynamic: bool
    registry_getattr: bool


class _Class:
    """One catalogued class, every release: release sets are bit masks over the library's
    catalogued releases (bit ``i``: ``versions[i]``)."""

    __slots__ = ("qualname", "library", "versions", "read", "present", "fields", "dynamic", "registry")

    def __init__(self, item: dict, versions: tuple[str, ...], mask: "_Masks"):
        self.qualname: str = item["qualname"]
        self.library: str = item["library"]
        self.versions = versions
        self.read = mask(item["read"]) if "read" in item else mask.every
        self.present = mask(item["versions"]) if "versions" in item else self.read
        self.fields: dict[str, tuple[frozenset[str], dict[str, int]]] = {}
        for field in ("aliases", "members", "inherits"):
            always = frozenset(sys.intern(m) for m in item.get(field, ()))
            some = {sys.intern(m): mask(where) for m, where in item.get(f"{field}_some", {}).items()}
            self.fields[field] = (always, some)
        self.dynamic = self._flag(item.get("dynamic_getattr", False), mask)
        for where in item.get("unresolved", {}).values():  # a base nobody could read: members unknown
            self.dynamic |= mask(where)
        self.registry = self._flag(item.get("registry_getattr", False), mask)

    def _flag(self, value: object, mask: "_Masks") -> int:
        if value is True:
            return self.present
        return mask(value) if value else 0  # type: ignore[arg-type]

    def names(self, field: str, wanted: int) -> set[str]:
        """The values of ``field`` that one of the releases of the mask ``wanted`` has."""
        always, some = self.fields[field]
        return set(always) | {name for name, where in some.items() if where & wanted}

    def has(self, field: str, name: str) -> tuple[str, ...]:
        """The releases (of those that have the class) whose ``field`` holds ``name``."""
        always, some = self.fields[field]
        where = self.present if name in always else some.get(name, 0) & self.present
        return tuple(v for i, v in enumerate(self.versions) if where >> i & 1)


class _Masks:
    """Turns a release list of the JSON (versions and ``a..b`` runs of catalogued releases) into a
    bit mask over the library's catalogued releases."""

    def __init__(self, versions: tuple[str, ...]):
        self.index = {v: i for i, v in enumerate(versions)}
        self.every = (1 << len(versions)) - 1
        self._memo: dict[tuple[str, ...], int] = {}

    def __call__(self, items: Iterable[str]) -> int:
        key = tuple(items)
        found = self._memo.get(key)
        if found is None:
            found = 0
            for item in key:
                first, sep, last = item.partition("..")
                low, high = self.index[first], self.index[last if sep else first]
                found |= ((1 << (high + 1)) - 1) ^ ((1 << low) - 1)
            self._memo[key] = found
        return found


class Catalog:
    """The versioned catalog (``format`` 2 of ``data/framework_members.json``).

    ``versions[library]``: the catalogued releases, oldest first; ``read[library][version]``: how
    the generator read that release. Raises ``ValueError``/``KeyError`` on data of another shape."""

    def __init__(self, data: dict):
        if data.get("format") != 2:
            raise ValueError(f"framework catalog format {data.get('format')!r}, expected 2")
        self.versions: dict[str, tuple[str, ...]] = {
            lib: tuple(info["versions"]) for lib, info in data["libraries"].items()}
        self.read: dict[str, dict[str, str]] = {lib: dict(info.get("read", {})) for lib, info in data["libraries"].items()}
        masks = {lib: _Masks(versions) for lib, versions in self.versions.items()}
        self.classes: dict[str, _Class] = {
            qual: _Class(item, self.versions[item["library"]], masks[item["library"]])
            for qual, item in sorted(data["classes"].items())}
        self._masks = masks
        self._by_alias: dict[str, _Class] = {}
        for cls in self.classes.values():
            self._by_alias.setdefault(cls.qualname, cls)
        for cls in self.classes.values():
            for alias in sorted(cls.names("aliases", cls.present)):
                self._by_alias.setdefault(alias, cls)
        self._entries: dict[tuple, dict[str, CatalogEntry]] = {}
        self._selections: dict[tuple, dict[str, tuple[str, ...]]] = {}

    # ------------------------------------------------------------------ releases in a range
    def selection(self, ranges: Ranges) -> dict[str, tuple[str, ...]]:
        """``library -> catalogued releases`` the ranges admit (every release of a library without
        a declared range, or whose range admits none of them)."""
        key = tuple(sorted((lib, tuple(sets)) for lib, sets in ranges.items()))
        found = self._selections.get(key)
        if found is not None:
            return found
        out: dict[str, tuple[str, ...]] = {}
        for library, versions in self.versions.items():
            declared = ranges.get(library)
            chosen = tuple(v for v in versions if declared and admits(declared, v)) if declared else ()
            out[library] = chosen or versions
        self._selections[key] = out
        return out

    def selection_key(self, ranges: Ranges) -> str:
        """A text naming the releases :meth:`selection` admits and the declarations as written, for
        cache records: equal keys, equal entries and equal messages."""
        chosen = self.selection(ranges)
        admitted = [f"{lib}=" + ",".join(v for v in chosen[lib]) for lib in sorted(chosen)
                    if chosen[lib] != self.versions[lib]]
        # the declarations as written too: a finding's message quotes them ("outside the declared range
        # transformers>=5"), so a range rewritten to admit the same releases must not keep the old text
        return ";".join(admitted + [f"{lib}@{describe(ranges[lib])}" for lib in sorted(ranges)])

    def _releases(self, cls: _Class, chosen: Mapping[str, tuple[str, ...]]) -> int:
        """The releases of ``cls`` that count (a mask): those chosen that read it, else every release
        read (a class read by import in some releases only)."""
        inside = self._masks[cls.library](chosen.get(cls.library, ())) & cls.read
        return inside or cls.read

    # ------------------------------------------------------------------ entries
    def entries_for(self, ranges: Ranges) -> dict[str, CatalogEntry]:
        """``alias -> CatalogEntry`` of every class present in a release the ranges admit (the
        same object under each alias); memoized per admitted releases."""
        chosen = self.selection(ranges)
        key = tuple(sorted((lib, versions) for lib, versions in chosen.items()))
        found = self._entries.get(key)
        if found is not None:
            return found
        flat: dict[str, tuple[frozenset[str], bool, bool] | None] = {}
        out: dict[str, CatalogEntry] = {}
        for qual, cls in self.classes.items():
            present = self._releases(cls, chosen) & cls.present
            if not present:
                continue
            members, dynamic, registry = self._flatten(cls, chosen, flat)
            entry = CatalogEntry(qual, members, dynamic, registry)
            for alias in sorted(cls.names("aliases", present) | {qual}):
                out.setdefault(alias, entry)
        self._entries[key] = out
        return out

    def _flatten(self, cls: _Class, chosen, flat: dict) -> tuple[frozenset[str], bool, bool]:
        """Members, dynamic, registry of ``cls`` with its inherited classes of other libraries
        (or compiled bases) added, each over its own library's admitted releases."""
        found = flat.get(cls.qualname)
        if found is not None:
            return found
        flat[cls.qualname] = (frozenset(), True, False)  # a cycle reads as dynamic
        present = self._releases(cls, chosen) & cls.present
        members = cls.names("members", present)
        dynamic = bool(cls.dynamic & present)
        registry = bool(cls.registry & present)
        for name in sorted(cls.names("inherits", present)):
            base = self._by_alias.get(name)
            if base is None:
                continue  # a compiled base nobody read (mindspore's Cell_): its members are unknown
            if not self._releases(base, chosen) & base.present:
                continue
            more, more_dynamic, more_registry = self._flatten(base, chosen, flat)
            members |= more
            dynamic |= more_dynamic
            registry |= more_registry
        result = (frozenset(members), dynamic, registry)
        flat[cls.qualname] = result
        return result

    # ------------------------------------------------------------------ where a member exists
    def members_in(self, qualname: str, name: str) -> dict[str, tuple[str, ...]]:
        """``library -> catalogued releases`` in which the class ``qualname`` (or an alias) has
        ``name``, through its own library's classes or a class it inherits from another library
        (whose releases are then named). Empty when no release has it."""
        out: dict[str, set[str]] = {}
        seen: set[str] = set()

        def visit(cls: _Class) -> None:
            if cls.qualname in seen:
                return
            seen.add(cls.qualname)
            where = cls.has("members", name)
            if where:
                out.setdefault(cls.library, set()).update(where)
            for base_name in sorted(cls.names("inherits", cls.present)):
                base = self._by_alias.get(base_name)
                if base is not None:
                    visit(base)

        cls = self._by_alias.get(qualname)
        if cls is not None:
            visit(cls)
        return {lib: tuple(v for v in self.versions[lib] if v in found) for lib, found in sorted(out.items())}

    def breaking_note(self, qualnames: Iterable[str], name: str, ranges: Ranges) -> str:
        """For a finding on ``name`` missing from the catalogued classes ``qualnames`` under
        ``ranges``: ``"; it exists in transformers 4.30.2-4.49.0, outside the declared range
        transformers<4.50"`` when some catalogued release outside the declared range has it
        (else ``""``)."""
        chosen = self.selection(ranges)
        parts: list[str] = []
        libraries: list[str] = []
        for qual in dict.fromkeys(qualnames):
            for library, versions in self.members_in(qual, name).items():
                if library in libraries or not ranges.get(library) or set(versions) & set(chosen[library]):
                    continue
                libraries.append(library)
                parts.append(f"{library} {self.runs(library, versions)}")
        if not parts:
            return ""
        declared = "; ".join(f"{lib}{describe(ranges[lib])}" for lib in libraries)
        return f"; it exists in {' and '.join(parts)}, outside the declared range {declared}"

    def runs(self, library: str, versions: Iterable[str]) -> str:
        """Catalogued releases as runs of consecutive ones: ``"4.30.2-4.49.0, 5.3.0"``."""
        catalogued = self.versions[library]
        positions = sorted(catalogued.index(v) for v in set(versions))
        out: list[str] = []
        start = 0
        while start < len(positions):
            end = start
            while end + 1 < len(positions) and positions[end + 1] == positions[end] + 1:
                end += 1
            first, last = catalogued[positions[start]], catalogued[positions[end]]
            out.append(first if first == last else f"{first}-{last}")
            start = end + 1
        return ", ".join(out)


@lru_cache(maxsize=None)
def load(path: str = CATALOG_PATH) -> Catalog:
    """The catalog at ``path`` (default: the bundled one), read once per process. Raises
    ``OSError``/``ValueError`` only if the installed package data is missing or corrupt."""
    with open(path, encoding="utf-8") as handle:
        return Catalog(json.load(handle))


def entries_for(ranges: Ranges) -> dict[str, CatalogEntry]:
    """:meth:`Catalog.entries_for` of the bundled catalog (``{}``: every catalogued release)."""
    return load().entries_for(ranges)


def members_in(qualname: str, name: str) -> dict[str, tuple[str, ...]]:
    """:meth:`Catalog.members_in` of the bundled catalog."""
    return load().members_in(qualname, name)


def breaking_note(qualnames: Iterable[str], name: str, ranges: Ranges) -> str:
    """:meth:`Catalog.breaking_note` of the bundled catalog."""
    return load().breaking_note(qualnames, name, ranges)


def selection_key(ranges: Ranges) -> str:
    """:meth:`Catalog.selection_key` of the bundled catalog."""
    return load().selection_key(ranges)


# ---------------------------------------------------------------------- specifiers
def admits(declared: Iterable[SpecifierSet], version: str) -> bool:
    """True when one of the ``declared`` specifier sets admits a release of the minor series of the
    catalogued ``version``: the version itself, ``X.Y.0``, or a version a specifier names in that
    series (``==4.36.0``, ``>=2.1.0+cu118``)."""
    from packaging.version import InvalidVersion, Version  # noqa: PLC0415

    release = Version(version)
    series = release.release[:2]
    for specifiers in declared:
        candidates = {release, Version(".".join(map(str, series)) + ".0")}
        for spec in specifiers:
            try:
                named = Version(spec.version.replace(".*", ""))
            except InvalidVersion:
                continue
            if named.release[:2] == series:
                candidates.add(named)
        if any(specifiers.contains(c, prereleases=True) for c in candidates):
            return True
    return False


def describe(declared: Iterable[SpecifierSet]) -> str:
    """The declarations as a user wrote them: ``>=5.0`` or ``<4.50 or ==4.36.2``."""
    texts = sorted({str(s) for s in declared})
    return " or ".join(t or " (any version)" for t in texts)


def _canonical(name: str) -> str:
    """A distribution name in its canonical form (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str) -> tuple[str, SpecifierSet] | None:
    """``(library, specifiers)`` of a PEP 508 requirement naming a catalogued library, else None."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
    if name is None or _canonical(name.group(1)) not in DISTRIBUTIONS:
        return None
    from packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415

    try:
        req = Requirement(text.strip())
    except InvalidRequirement:
        return None
    library = DISTRIBUTIONS.get(_canonical(req.name))
    return (library, req.specifier) if library else None


_POETRY_PART = re.compile(r"^\s*(\^|~(?!=))\s*([0-9][0-9A-Za-z.*+!-]*)\s*$")


def poetry_specifiers(constraint: str) -> list[SpecifierSet]:
    """A Poetry version constraint as specifier sets (one per ``||`` alternative): ``^1.2`` is
    ``>=1.2,<2.0``, ``^0.3`` is ``>=0.3,<0.4``, ``~1.2`` is ``>=1.2,<1.3``, ``*`` any version, a bare
    version ``==``. Raises ``InvalidSpecifier`` for a constraint it cannot read."""
    from packaging.specifiers import SpecifierSet  # noqa: PLC0415

    out: list[SpecifierSet] = []
    for alternative in constraint.split("||"):
        parts: list[str] = []
        for piece in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", alternative.strip()):
            if not piece or piece == "*":
                continue
            match = _POETRY_PART.match(piece)
            if match:
                kind, text = match.groups()
                numbers = [int(n) for n in text.split(".") if n.isdigit()]
                if kind == "^":
                    first = next((i for i, n in enumerate(numbers) if n), len(numbers) - 1)
                    upper = numbers[:first + 1]
                else:
                    upper = numbers[:2] if len(numbers) > 1 else numbers[:1]
                upper[-1] += 1
                parts += [f">={text}", "<" + ".".join(map(str, upper))]
            elif piece[0].isdigit():
                parts.append(f"=={piece}")
            else:
                parts.append(piece.replace(" ", ""))
        out.append(SpecifierSet(",".join(parts)))
    return out


# ---------------------------------------------------------------------- declared ranges
def declared_ranges(root: str | os.PathLike[str]) -> dict[str, tuple[SpecifierSet, ...]]:
    """``library -> declarations`` the project at ``root`` declares for the catalogued libraries,
    from ``pyproject.toml``, ``setup.py`` (static literals only, read with :mod:`ast`),
    ``setup.cfg``, ``requirements*.txt`` and ``requirements/*.txt`` at the root. A library
    declared nowhere is absent (every catalogued release counts). Never raises: an unreadable or
    malformed file declares nothing. Memoized on the files' sizes and modification times."""
    files = _declaring_files(os.fspath(root))
    return dict(_read_ranges(files))


def declarations_digest(root: str | os.PathLike[str]) -> str:
    """A digest of the files :func:`declared_ranges` reads at ``root`` (their names and bytes), or
    ``""`` when there is none: what the project facts' cache key holds instead of the parsed ranges,
    so that a check answered from the cache parses no requirement (``packaging`` alone costs about
    0.1 s to import). Any edit of a declaring file changes it, comments included. Never raises."""
    digest = hashlib.blake2b(digest_size=16)
    files = _declaring_files(os.fspath(root))
    for path, _size, _mtime in files:  # every one: a name may be spelled with escapes ("\\u0074orch")
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            data = b"\0unreadable"
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest() if files else ""


def _declaring_files(root: str) -> tuple[tuple[str, int, int], ...]:
    found: list[tuple[str, int, int]] = []
    for folder, pattern in ((root, re.compile(r"^(pyproject\.toml|setup\.py|setup\.cfg|requirements.*\.txt)$")),
                            (os.path.join(root, "requirements"), re.compile(r"^.*\.txt$"))):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if pattern.match(name):
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if os.path.isfile(path):
                    found.append((path, st.st_size, st.st_mtime_ns))
    return tuple(found)


@lru_cache(maxsize=64)
def _read_ranges(files: tuple[tuple[str, int, int], ...]) -> tuple[tuple[str, tuple[SpecifierSet, ...]], ...]:
    declared: dict[str, dict[str, SpecifierSet]] = {}
    for path, _size, _mtime in files:
        name = os.path.basename(path)
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            continue
        if name == "pyproject.toml":
            found = _from_pyproject(text)
        elif name == "setup.py":
            found = _from_setup_py(text)
        elif name == "setup.cfg":
            found = _from_setup_cfg(text)
        else:
            found = _from_requirements(text)
        for library, specifiers in found:
            declared.setdefault(library, {}).setdefault(str(specifiers), specifiers)
    return tuple((lib, tuple(sets[k] for k in sorted(sets))) for lib, sets in sorted(declared.items()))


def _from_strings(values: object) -> list[tuple[str, SpecifierSet]]:
    out = []
    for value in values if isinstance(values, (list, tuple)) else ():
        if isinstance(value, str):
            found = _requirement(value)
            if found:
                out.append(found)
    return out


def _from_pyproject(text: str) -> list[tuple[str, SpecifierSet]]:
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    out: list[tuple[str, SpecifierSet]] = []
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    out += _from_strings(project.get("dependencies"))
    optional = project.get("optional-dependencies")
    for values in (optional.values() if isinstance(optional, dict) else ()):
        out += _from_strings(values)
    groups = data.get("dependency-groups")
    for values in (groups.values() if isinstance(groups, dict) else ()):
        out += _from_strings(values)
    tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
    poetry = tool.get("poetry") if isinstance(tool.get("poetry"), dict) else {}
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    group = poetry.get("group")
    for item in (group.values() if isinstance(group, dict) else ()):
        if isinstance(item, dict):
            tables.append(item.get("dependencies"))
    for table in tables:
        for dist, spec in (table.items() if isinstance(table, dict) else ()):
            library = DISTRIBUTIONS.get(_canonical(dist))
            if library is None:
                continue
            from packaging.specifiers import InvalidSpecifier, SpecifierSet  # noqa: PLC0415

            for constraint in spec if isinstance(spec, list) else [spec]:
                if isinstance(constraint, dict):
                    constraint = constraint.get("version", "*")
                if not isinstance(constraint, str):
                    continue
                try:
                    out += [(library, s) for s in poetry_specifiers(constraint)]
                except InvalidSpecifier:
                    out.append((library, SpecifierSet()))  # unreadable: any version
    return out


def _from_setup_py(text: str) -> list[tuple[str, SpecifierSet]]:
    """``install_requires``/``extras_require``/``tests_require`` of a ``setup(...)`` call when they
    are literals or module-level names bound to literals (never executed)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    names: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            names[stmt.targets[0].id] = stmt.value

    def literal(node: ast.AST) -> object:
        if isinstance(node, ast.Name) and node.id in names:
            node = names[node.id]
        try:
            return ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            if isinstance(node, (ast.List, ast.Tuple)):  # a list with some computed items: its strings
                return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            return None

    out: list[tuple[str, SpecifierSet]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "setup"
                                                or getattr(node.func, "attr", None) == "setup")):
            continue
        for keyword in node.keywords:
            if keyword.arg in ("install_requires", "tests_require"):
                out += _from_strings(literal(keyword.value))
            elif keyword.arg == "extras_require":
                value = literal(keyword.value)
                for values in (value.values() if isinstance(value, dict) else ()):
                    out += _from_strings(values)
    return out


def _from_setup_cfg(text: str) -> list[tuple[str, SpecifierSet]]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    lines: list[str] = []
    if parser.has_option("options", "install_requires"):
        lines += parser.get("options", "install_requires").splitlines()
    if parser.has_section("options.extras_require"):
        for _key, value in parser.items("options.extras_require"):
            lines += value.splitlines()
    return _from_strings([line.split("#", 1)[0].strip() for line in lines if line.strip()])


def _from_requirements(text: str) -> list[tuple[str, SpecifierSet]]:
    """A pip requirements file: one requirement a line (``\\`` continues a line); options
    (``-r``, ``-e``, ``--index-url``), paths and URLs without a name are skipped."""
    out: list[tuple[str, SpecifierSet]] = []
    for line in text.replace("\\\n", " ").splitlines():
        line = re.split(r"(^|\s)#", line, maxsplit=1)[0].strip()
        if not line or line.startswith(("-", ".", "/")) or re.match(r"^[a-z+]+://", line):
            continue
        line = line.split(" --", 1)[0]  # per-requirement options (--hash=...)
        found = _requirement(line)
        if found:
            out.append(found)
    return out
