"""Regenerate ``hp_invariants/data/framework_members.json``, the versioned E9503 framework catalog.

E9503 (``undefined-method-call``) must know which names exist on framework base classes
(``torch.nn.Module``, ``transformers.PreTrainedModel``, ``diffusers.ModelMixin``,
``mindspore.nn.Cell``, builtins) without importing those libraries at lint time, and a code base
pins a library version: a member that a base class has in the pinned release but that later
releases removed is defined for that code base (issue #23). So the catalog holds, per library,
several releases (:data:`LIBRARIES`), and per class each member with the releases that have it.

How a release is read (recorded per library and release in the JSON, ``libraries.<lib>.read``):

* **statically** (``source``): the release's wheel is downloaded once (``pip download --no-deps``,
  or a wheel already on this machine, :data:`LOCAL_WHEELS`) and its ``.py``/``.pyi`` files kept in a
  slim archive under ``--work``; the classes are found with ``ast`` by following the modules'
  imports (``from x import C``, ``import a.b as c``, ``*`` imports, ``if TYPE_CHECKING`` imports,
  transformers' ``_import_structure`` tables, ``Alias = C``). A class's members are the names its
  body binds (methods, properties, class attributes, nested classes, annotations) and the
  attributes its methods store on their receiver (``self.x = ...``, ``setattr(self, "x", ...)``,
  ``object.__setattr__(self, "x", ...)``) in every method (``PreTrainedModel._set_gradient_checkpointing``
  sets ``_gradient_checkpointing_func``), plus ``C.x = ...`` at module level, for every class of its
  MRO inside the library, plus ``object``'s (and a standard-library base's) members. A base class
  of another catalogued library or a C-level class (``torch.nn.Module`` under
  ``transformers.PreTrainedModel``, ``torch._C._FunctionBase`` under ``torch.autograd.Function``)
  is recorded in ``inherits`` and its members are added when the catalog is read, for the
  releases of that library in the code base's range. A base found nowhere (``unresolved``) makes
  the class dynamic for those releases when read (no message: members unknown); a base in a C
  extension without stub (``mindspore._c_expression.Cell_``) is recorded in ``incomplete``.
* **by import** (``import``): the C-level classes (``torch.Tensor``, ``torch.nn.Parameter``,
  ``torch._C._FunctionBase``) are read with ``dir()`` in an interpreter where that release is
  installed (``--import-python torch=/tmp/venv-torch/bin/python``, a throwaway venv), as the
  previous catalog was; releases not installed have no entry for them (the reader then falls back
  to the releases read: most permissive). The builtins and standard-library bases are read by
  import in this interpreter (one Python release).

Output (``format`` 2): ``libraries.<lib>`` = ``{"versions": [...], "read": {version: how}}``;
``classes.<qualname>`` = ``{"library", "qualname", "aliases", "members", "inherits", "mro",
"registry_getattr", "dynamic_getattr"}`` where a list field holds what every release of the class
has, and ``<field>_some`` maps each other value to the releases that have it; ``read`` (releases
the class was looked for in, when not all) and ``versions`` (releases that have it, when not all
those read). A release list is a list of versions and ``"a..b"`` runs (every catalogued release
of the library from ``a`` to ``b``). ``hp_invariants/catalog.py`` reads it.

Run it (re-runnable; output is sorted, so unchanged inputs give an unchanged file)::

    python scripts/gen_framework_catalog.py --import-python torch=/tmp/venv-torch213/bin/python \\
        --import-python torch=/tmp/venv-torch214/bin/python

A release that cannot be downloaded is reported on stderr and recorded under ``unavailable``.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "hp_invariants" / "data" / "framework_members.json"
FORMAT = 2
WORK = Path(os.environ.get("HP_CATALOG_WORK", os.path.join(tempfile.gettempdir(), "hp-catalog-sources")))

# The releases catalogued: the newest patch release of each minor series that real code bases pin.
LIBRARIES: dict[str, dict] = {
    "torch": {
        "versions": ["2.0.1", "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1",
                     "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"],
        "static": [
            "torch.nn.Module", "torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict",
            "torch.nn.ParameterList", "torch.nn.ParameterDict",
            "torch.autograd.Function", "torch.autograd.function.FunctionCtx",
            "torch.optim.Optimizer", "torch.optim.lr_scheduler.LRScheduler",
            "torch.utils.data.Dataset", "torch.utils.data.IterableDataset",
            # wrappers a training script rebinds a model to (model = DDP(model)): E9503 checks calls on them
            "torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel",
            "torch.distributed.fsdp.FullyShardedDataParallel",
        ],
        # C-level classes: read by import only (dir() of the installed release)
        "imported": ["torch.Tensor", "torch.nn.Parameter", "torch._C._FunctionBase"],
    },
    "transformers": {
        "versions": [f"4.{m}.{p}" for m, p in [
            (30, 2), (31, 0), (32, 1), (33, 3), (34, 1), (35, 2), (36, 2), (37, 2), (38, 2), (39, 3), (40, 2),
            (41, 2), (42, 4), (43, 4), (44, 2), (45, 2), (46, 3), (47, 1), (48, 3), (49, 0), (50, 3), (51, 3),
            (52, 4), (53, 3), (54, 1), (55, 4), (56, 2), (57, 6)]] + [f"5.{m}.{p}" for m, p in [
            (0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 4), (6, 2), (7, 0), (8, 1), (9, 0), (10, 4), (11, 0),
            (12, 1), (13, 1), (14, 1), (15, 1), (16, 1), (17, 0), (18, 0), (19, 0), (20, 2), (21, 1), (22, 2),
            (23, 0), (24, 0), (25, 0)]],
        "static": ["transformers.PreTrainedModel", "transformers.PretrainedConfig", "transformers.GenerationMixin"],
    },
    "diffusers": {
        "versions": ["0.20.1", "0.21.4", "0.22.3", "0.23.1", "0.24.0", "0.25.1", "0.26.3", "0.27.2", "0.28.2",
                     "0.29.2", "0.30.3", "0.31.0", "0.32.2", "0.33.1", "0.34.0", "0.35.2", "0.36.0", "0.37.1",
                     "0.38.0", "0.39.0", "0.40.0", "0.41.0", "0.42.1"],
        "static": ["diffusers.ModelMixin", "diffusers.ConfigMixin", "diffusers.DiffusionPipeline",
                   "diffusers.SchedulerMixin"],
    },
    "mindspore": {
        # PyPI has no wheel of 2.1 .. 2.6 (those came from mindspore's own download site)
        "versions": ["2.0.0", "2.7.2", "2.8.0", "2.9.0", "2.10.0"],
        "static": ["mindspore.nn.Cell"],
    },
}
# wheels already on this machine's disk (read in place instead of downloaded)
LOCAL_WHEELS: dict[tuple[str, str], str] = {
    ("torch", "2.13.0"): "/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
    ("torch", "2.14.1"): "/opt/pypi-more/files/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
    ("transformers", "4.57.6"): "/opt/pypi-more/files/transformers-4.57.6-py3-none-any.whl",
    ("transformers", "5.18.0"): "/opt/pypi-more/files/transformers-5.18.0-py3-none-any.whl",
}
# pip options for releases without a wheel for this Python (only the sources are read)
PIP_EXTRA: dict[tuple[str, str], tuple[str, ...]] = {
    ("mindspore", "2.0.0"): ("--python-version", "3.9"),
}
STDLIB = [
    "builtins.object", "builtins.dict", "builtins.list", "builtins.tuple", "builtins.set",
    "builtins.frozenset", "builtins.str", "builtins.int", "builtins.float", "builtins.bytes",
    "builtins.type", "abc.ABC", "enum.Enum", "enum.IntEnum", "enum.Flag", "enum.IntFlag",
    "typing.Generic", "typing.Protocol", "collections.OrderedDict",
    "collections.defaultdict", "contextlib.ContextDecorator", "threading.Thread",
    "unittest.TestCase", "argparse.Action", "json.JSONEncoder", "logging.Handler",
]
# registry-style __getattr__ (serves only attributes created by assignment / register_* calls)
REGISTRY_GETATTR = {"torch.nn.modules.module.Module", "mindspore.nn.cell.Cell"}


# ---------------------------------------------------------------------- fetching sources
def source_archive(library: str, version: str, work: Path) -> Path:
    """The slim source archive of ``library==version``: the ``.py``/``.pyi`` files of its wheel and
    the list of the wheel's files (``WHEEL-FILES``: C extensions), kept under ``work``
    (``<library>-<version>.src.zip``). Downloaded with ``pip download --no-deps`` when absent; the
    wheel itself is deleted once its sources are copied (torch wheels are 0.6-0.9 GB). A wheel on
    this machine (:data:`LOCAL_WHEELS`) is read in place. Raises ``RuntimeError`` when pip finds none."""
    slim = work / f"{library}-{version}.src.zip"
    if slim.exists():
        return slim
    work.mkdir(parents=True, exist_ok=True)
    local = LOCAL_WHEELS.get((library, version))
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        if local is None or not Path(local).exists():
            env = dict(os.environ)
            if library == "torch":
                env["PIP_CONSTRAINT"] = os.devnull  # a machine-wide cap on torch may hide the newest release
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                       "--progress-bar", "off", "-q", "-d", tmp, f"{library}=={version}",
                       *PIP_EXTRA.get((library, version), ())]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            wheels = sorted(Path(tmp).glob("*.whl"))
            if done.returncode or not wheels:
                raise RuntimeError(f"pip download failed: {done.stderr.strip()[-300:]}")
            local = str(wheels[0])
        part = Path(tmp) / "slim.zip"
        with zipfile.ZipFile(local) as wheel, zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as out:
            for name in sorted(wheel.namelist()):
                if name.endswith((".py", ".pyi")) and ".dist-info/" not in name:
                    out.writestr(name, wheel.read(name))
            out.writestr("WHEEL-NAME", Path(local).name)
            out.writestr("WHEEL-FILES", "\n".join(sorted(wheel.namelist())))
        part.replace(slim)
    return slim


# ---------------------------------------------------------------------- static reading
def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    if isinstance(node, ast.Subscript):  # Generic[T], Dataset[T_co]
        return _dotted(node.value)
    return None


def _target_names(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {n for elt in target.elts for n in _target_names(elt)}
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return set()


def _blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists nested in a compound statement (every branch)."""
    if isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While)):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [stmt.body]
    if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        return [stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody]  # type: ignore[attr-defined]
    return []


def _receiver_stores(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Attributes a method stores on its receiver (its first parameter): ``self.x = ...``,
    ``setattr(self, "x", ...)``, ``object.__setattr__(self, "x", ...)``, ``super().__setattr__("x", ...)``."""
    args = func.args.posonlyargs + func.args.args
    receiver = args[0].arg if args else "self"
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and node.value.id == receiver:
            names.add(node.attr)
        if not isinstance(node, ast.Call):
            continue
        consts = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
        func_node = node.func
        if isinstance(func_node, ast.Name) and func_node.id == "setattr" and len(consts) >= 2 and \
                isinstance(node.args[0], ast.Name) and node.args[0].id == receiver and consts[1]:
            names.add(consts[1])
        if isinstance(func_node, ast.Attribute) and func_node.attr == "__setattr__":
            if len(consts) >= 2 and consts[1] and isinstance(node.args[0], ast.Name) and node.args[0].id == receiver:
                names.add(consts[1])  # object.__setattr__(self, "x", v)
            elif consts and consts[0]:
                names.add(consts[0])  # super().__setattr__("training", True)
    return names


def class_body_members(node: ast.ClassDef) -> tuple[set[str], bool]:
    """The names a class statement defines (methods, properties, class attributes, annotations,
    nested classes, in every branch of its body) and stores on the receiver in any method; and
    whether it defines ``__getattr__``/``__getattribute__``."""
    names: set[str] = set()

    def walk(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(stmt.name)
                if not any(_dotted(d) == "staticmethod" for d in stmt.decorator_list):
                    names.update(_receiver_stores(stmt))
            elif isinstance(stmt, ast.ClassDef):
                names.add(stmt.name)
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    names.update(_target_names(target))
            elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
                names.update(_target_names(stmt.target))
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*")
            for block in _blocks(stmt):
                walk(block)

    walk(node.body)
    names.update({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__"})
    return names, bool(names & {"__getattr__", "__getattribute__"})


class ModuleScope:
    """What the top level of one module binds: classes, imports, aliases, star imports, lazy
    ``_import_structure`` entries, and attributes assigned onto its classes (``C.x = ...``)."""

    def __init__(self, module: str, is_package: bool, tree: ast.Module):
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.classes: dict[str, ast.ClassDef] = {}
        self.bindings: dict[str, tuple[str, str]] = {}  # name -> ("qual", dotted) | ("local", dotted)
        self.stars: list[str] = []
        self.patches: dict[str, set[str]] = {}
        self._walk(tree.body)

    def _absolute(self, level: int, module: str | None) -> str:
        if not level:
            return module or ""
        base = self.package.split(".") if self.package else []
        base = base[:len(base) - (level - 1)] if level > 1 else base
        return ".".join([*base, module] if module else base)

    def _walk(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.ClassDef):
                self.classes.setdefault(stmt.name, stmt)
            elif isinstance(stmt, ast.ImportFrom):
                source = self._absolute(stmt.level, stmt.module)
                for alias in stmt.names:
                    if alias.name == "*":
                        self.stars.append(source)
                    else:
                        self.bindings.setdefault(alias.asname or alias.name, ("qual", f"{source}.{alias.name}"))
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        self.bindings.setdefault(alias.asname, ("qual", alias.name))
                    else:
                        top = alias.name.split(".")[0]
                        self.bindings.setdefault(top, ("qual", top))
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                self._assign(stmt)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self._call(stmt.value)
            for block in _blocks(stmt):
                self._walk(block)

    def _assign(self, stmt: ast.Assign | ast.AnnAssign) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        value = stmt.value
        for target in targets:
            if isinstance(target, ast.Name) and value is not None:
                dotted = _dotted(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
                if dotted and target.id != dotted:
                    self.bindings.setdefault(target.id, ("local", dotted))
                if target.id == "_import_structure" and isinstance(value, ast.Dict):
                    for key, names in zip(value.keys, value.values):
                        self._lazy(key, names)
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                self.patches.setdefault(target.value.id, set()).add(target.attr)
            elif isinstance(target, ast.Subscript) and _dotted(target.value) == "_import_structure":
                self._lazy(target.slice, value)

    def _lazy(self, key: ast.AST | None, names: ast.AST | None) -> None:
        """``"submodule": ["Name", ...]`` of transformers/diffusers' lazy ``_import_structure``."""
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(names, (ast.List, ast.Tuple))):
            return
        for elt in names.elts:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                self.bindings.setdefault(elt.value, ("qual", f"{self.package}.{key.value}.{elt.value}"))

    def _call(self, call: ast.Call) -> None:
        func = call.func
        if isinstance(func, ast.Name) and func.id == "setattr" and len(call.args) >= 2 and \
                isinstance(call.args[0], ast.Name) and isinstance(call.args[1], ast.Constant) and \
                isinstance(call.args[1].value, str):
            self.patches.setdefault(call.args[0].id, set()).add(call.args[1].value)
        if isinstance(func, ast.Attribute) and func.attr == "extend" and _dotted(func.value) and \
                isinstance(func.value, ast.Subscript) and _dotted(func.value.value) == "_import_structure" and call.args:
            self._lazy(func.value.slice, call.args[0])


class StaticRelease:
    """One release of a library read from its slim source archive (:func:`source_archive`)."""

    def __init__(self, archive: Path, library: str):
        self.archive = zipfile.ZipFile(archive)
        self.names = set(self.archive.namelist())
        self.library = library
        listing = self.archive.read("WHEEL-FILES").decode() if "WHEEL-FILES" in self.names else ""
        self.files = set(listing.splitlines()) | self.names
        self.tops = {n.split("/")[0] for n in self.files if "/" in n and ".dist-info" not in n.split("/")[0]}
        self._scopes: dict[str, ModuleScope | None] = {}
        self._resolved: dict[tuple[str, str], tuple | None] = {}
        self._texts: dict[str, str] = {}
        self.problems: list[str] = []

    def module_file(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if candidate in self.names:
                return candidate
        return None

    def is_extension(self, module: str) -> bool:
        """A module without Python source: a stub (``.pyi``) or a compiled extension."""
        base = module.replace(".", "/")
        if f"{base}.pyi" in self.names or f"{base}/__init__.pyi" in self.names:
            return True
        folder, _, stem = base.rpartition("/")
        prefix = f"{folder}/{stem}." if folder else f"{stem}."
        return any(f.startswith(prefix) and f.endswith((".so", ".pyd")) and "/" not in f[len(prefix):]
                   for f in self.files)

    def scope(self, module: str) -> ModuleScope | None:
        if module not in self._scopes:
            path = self.module_file(module)
            scope = None
            if path is not None:
                try:
                    text = self._texts.pop(path, None) or self.archive.read(path).decode("utf-8")
                    tree = ast.parse(text, filename=path)
                    scope = ModuleScope(module, path.endswith("__init__.py"), tree)
                except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
                    self.problems.append(f"{path}: {type(exc).__name__}")
            self._scopes[module] = scope
        return self._scopes[module]

    # resolution: ("class", module, name) | ("external", dotted) | ("c-level", dotted) | None
    def resolve_qualified(self, qualified: str, depth: int = 0) -> tuple | None:
        parts = qualified.split(".")
        if parts[0] not in self.tops:
            return ("external", qualified)
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if self.module_file(module) is not None:
                return self.resolve(module, ".".join(parts[cut:]), depth + 1)
            if self.is_extension(module):
                return ("c-level", qualified)
        return None

    def resolve(self, module: str, dotted: str, depth: int = 0) -> tuple | None:
        key = (module, dotted)
        if key in self._resolved:
            return self._resolved[key]
        self._resolved[key] = None  # an import cycle resolves to nothing
        found = self._resolve(module, dotted, depth)
        self._resolved[key] = found
        return found

    def _resolve(self, module: str, dotted: str, depth: int) -> tuple | None:
        if depth > 40 or not dotted:
            return None
        path = self.module_file(module)
        if path is None:
            return None
        head = dotted.partition(".")[0]
        if module not in self._scopes:
            text = self._texts.get(path)
            if text is None:
                text = self._texts[path] = self.archive.read(path).decode("utf-8", "replace")
            if head not in text and "import *" not in text:
                return None  # cheap: most modules a star import chain passes never name it
        scope = self.scope(module)
        if scope is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in scope.classes:
            return ("class", module, head) if not rest else None  # nested classes are not catalogued
        binding = scope.bindings.get(head)
        if binding is not None:
            kind, target = binding
            full = f"{target}.{rest}" if rest else target
            if kind == "local":
                return self.resolve(module, full, depth + 1)
            submodule = f"{module}.{head}"  # `from . import x` inside a package: x may be a submodule
            if target == submodule and self.module_file(submodule) is not None and rest:
                return self.resolve(submodule, rest, depth + 1)
            return self.resolve_qualified(full, depth + 1)
        if scope.package == module and rest and self.module_file(f"{module}.{head}") is not None:
            return self.resolve(f"{module}.{head}", rest, depth + 1)  # torch.nn.modules.Module
        for star in scope.stars:
            if self.module_file(star) is not None:
                found = self.resolve(star, dotted, depth + 1)
                if found is not None:
                    return found
        if not rest and isinstance(getattr(builtins, head, None), type):
            return ("external", f"builtins.{head}")
        return None

    def find(self, public: str) -> tuple | None:
        """Resolve a public dotted name (``transformers.PreTrainedModel``) to its class."""
        found = self.resolve_qualified(public)
        return found if found and found[0] == "class" else None

    def aliases(self, module: str, name: str, public: str | None) -> list[str]:
        """Every ``pkg.sub.Name`` of the library, along the defining module's parent packages, that
        names the class (re-exports and ``Alias = C`` included)."""
        target = ("class", module, name)
        spelled = {name}
        scope = self.scope(module)
        if scope is not None:
            spelled |= {n for n, (kind, _) in scope.bindings.items()
                        if kind == "local" and self.resolve(module, n) == target}
        if public:
            spelled.add(public.rsplit(".", 1)[1])
        out = {f"{module}.{name}"}
        parts = module.split(".")
        for cut in range(1, len(parts) + 1):
            package = ".".join(parts[:cut])
            for simple in spelled:
                if self.resolve(package, simple) == target:
                    out.add(f"{package}.{simple}")
        return sorted(out)

    def read_class(self, module: str, name: str) -> dict:
        """The members and ancestry of one class of this release (see the module docstring)."""
        members: set[str] = set(dir(object))
        inherits: set[str] = set()
        unresolved: set[str] = set()
        mro: list[str] = []
        dynamic = registry = False
        library_classes: list[tuple[str, str]] = []
        todo = [(module, name)]
        while todo:
            mod, cls = todo.pop(0)
            qual = f"{mod}.{cls}"
            if qual in mro:
                continue
            mro.append(qual)
            library_classes.append((mod, cls))
            scope = self.scope(mod)
            node = scope.classes[cls]  # type: ignore[union-attr]
            own, getattr_ = class_body_members(node)
            members |= own | scope.patches.get(cls, set())  # type: ignore[union-attr]
            if qual in REGISTRY_GETATTR:
                registry = True
            elif getattr_:
                dynamic = True
            for keyword in node.keywords:  # what a metaclass of the library stores on the class
                meta = self.resolve(mod, _dotted(keyword.value) or "") if keyword.arg == "metaclass" else None
                if meta is not None and meta[0] == "class":
                    meta_node = self.scope(meta[1]).classes[meta[2]]  # type: ignore[union-attr]
                    for stmt in meta_node.body:
                        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                            members |= _receiver_stores(stmt)
            for base in node.bases:
                dotted = _dotted(base)
                found = self.resolve(mod, dotted) if dotted else None
                if found is None:
                    unresolved.add(f"{qual}({dotted or ast.unparse(base)})")
                elif found[0] == "class":
                    todo.append((found[1], found[2]))
                elif found[0] == "c-level":  # a compiled base of this library: read by import, or unknown
                    inherits.add(found[1])
                    mro.append(found[1])
                else:
                    external = found[1]
                    mro.append(external)
                    top = external.split(".")[0]
                    if top in sys.stdlib_module_names or top == "builtins":
                        try:
                            klass = _import_attr(external)
                            klass = klass if isinstance(klass, type) else klass.__origin__  # typing.Iterable
                            members.update(*(vars(k) for k in klass.__mro__))
                        except Exception:  # noqa: BLE001
                            unresolved.add(f"{qual}({external})")
                    elif top in LIBRARIES:  # torch.nn.Module under transformers.PreTrainedModel
                        inherits.add(external)
                    else:  # a library the catalog does not read: members unknown
                        unresolved.add(f"{qual}({external})")
        return {"members": members, "inherits": inherits, "unresolved": unresolved,
                "mro": list(dict.fromkeys(mro + ["builtins.object"])), "dynamic": dynamic, "registry": registry,
                "library_classes": library_classes}


def read_static(library: str, version: str, archive: Path) -> tuple[dict, list[str]]:
    """``qualname -> observation`` of the catalogued classes of one release (and every class of
    their MRO inside the library), read from its sources; and the public names not found."""
    release = StaticRelease(archive, library)
    out: dict[str, dict] = {}
    missing: list[str] = []
    wanted: list[tuple[str, str, str | None]] = []
    for public in LIBRARIES[library]["static"]:
        found = release.find(public)
        if found is None:
            missing.append(public)
            continue
        wanted.append((found[1], found[2], public))
    seen: set[tuple[str, str]] = set()
    while wanted:
        module, name, public = wanted.pop(0)
        if (module, name) in seen:
            continue
        seen.add((module, name))
        info = release.read_class(module, name)
        qual = f"{module}.{name}"
        aliases = release.aliases(module, name, public)
        if public and release.find(public) == ("class", module, name):
            aliases = sorted(set(aliases) | {public})
        out[qual] = {
            "aliases": set(aliases), "members": info["members"], "inherits": info["inherits"],
            "dynamic": info["dynamic"] or bool(info["unresolved"]), "registry": info["registry"],
            "mro": info["mro"], "unresolved": sorted(info["unresolved"]),
        }
        for mod, cls in info["library_classes"][1:]:
            wanted.append((mod, cls, None))
    for problem in release.problems:
        print(f"{library} {version}: cannot parse {problem}", file=sys.stderr)
    return out, missing


# ---------------------------------------------------------------------- reading by import
def _import_attr(dotted: str):
    module, _, name = dotted.rpartition(".")
    obj = importlib.import_module(module)
    return getattr(obj, name)


def _aliases(cls) -> list[str]:
    """Every ``pkg.sub.Name`` where ``Name`` is ``cls`` (walks the parent packages)."""
    names = {f"{cls.__module__}.{cls.__qualname__}"}
    parts = cls.__module__.split(".")
    for i in range(1, len(parts) + 1):
        mod_name = ".".join(parts[:i])
        try:
            mod = sys.modules.get(mod_name) or importlib.import_module(mod_name)
        except Exception:  # noqa: BLE001
            continue
        for attr, value in vars(mod).items():
            if value is cls:
                names.add(f"{mod_name}.{attr}")
    return sorted(names)


def _instance_attrs(cls) -> set[str]:
    """Instance attributes the class's own code sets: from a built instance, and from the source of
    every method (not only ``__init__``) of every class of its MRO."""
    found: set[str] = set()
    try:
        inst = cls()
        found.update(getattr(inst, "__dict__", {}) or {})
    except Exception:  # noqa: BLE001 - needs arguments: the source says it
        pass
    for klass in cls.__mro__:
        if klass is object:
            continue
        for value in vars(klass).values():
            func = getattr(value, "__func__", value)  # classmethod/staticmethod: the function
            if not inspect.isfunction(func):
                continue
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
            except (OSError, TypeError, SyntaxError, IndentationError):
                continue
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.update(_receiver_stores(node))
    return found


def _dynamic(cls) -> bool:
    for klass in cls.__mro__:
        if klass is object or f"{klass.__module__}.{klass.__qualname__}" in REGISTRY_GETATTR:
            continue
        if "__getattr__" in vars(klass) or "__getattribute__" in vars(klass):
            # pybind/C base types expose a slot wrapper __getattribute__ that is object's
            if "__getattr__" in vars(klass) or type(vars(klass)["__getattribute__"]).__name__ != "wrapper_descriptor":
                return True
    return False


def imported_observation(cls) -> dict:
    """The observation of a class read by import: ``dir()`` plus what its methods store on ``self``."""
    members = set(dir(cls)) | _instance_attrs(cls)
    for klass in getattr(cls, "__mro__", ()):  # dir() of an Enum hides value/name: read every __dict__
        members.update(vars(klass))
    return {
        "aliases": set(_aliases(cls)), "members": members, "inherits": set(),
        "dynamic": _dynamic(cls),
        "registry": any(f"{k.__module__}.{k.__qualname__}" in REGISTRY_GETATTR for k in cls.__mro__),
        "mro": [f"{k.__module__}.{k.__qualname__}" for k in cls.__mro__], "unresolved": [],
    }


def dump_import(library: str) -> dict:
    """``{"version", "classes"}`` of the installed ``library``'s C-level classes (``--dump-import``:
    run in the interpreter where that release is installed)."""
    mod = importlib.import_module(library)
    version = str(mod.__version__).split("+")[0]
    classes: dict[str, dict] = {}
    for dotted in LIBRARIES[library].get("imported", ()):
        try:
            cls = _import_attr(dotted)
        except AttributeError:
            continue
        for klass in cls.__mro__:  # TensorBase under Tensor
            if klass.__module__.split(".")[0] != library:
                continue
            qual = f"{klass.__module__}.{klass.__qualname__}"
            obs = imported_observation(klass)
            if klass is cls:
                obs["aliases"].add(dotted)
            classes[qual] = {k: sorted(v) if isinstance(v, set) else v for k, v in obs.items()}
    return {"version": version, "full_version": str(mod.__version__), "classes": classes}


def read_stdlib() -> dict[str, dict]:
    """The builtins and standard-library bases, read by import in this interpreter."""
    import collections

    out: dict[str, dict] = {}
    names = list(STDLIB) + [f"builtins.{n}" for n, v in vars(builtins).items()
                            if isinstance(v, type) and issubclass(v, BaseException)]
    for dotted in names:
        obs = imported_observation(_import_attr(dotted))
        obs["aliases"].add(dotted)
        qual = dotted if dotted.startswith("builtins.") else f"{obs['mro'][0]}"
        out[qual] = obs
    # typing.NamedTuple is a function: a class statement based on it gets namedtuple's members
    obs = imported_observation(collections.namedtuple("NamedTuple", []))
    obs.update(aliases={"typing.NamedTuple"}, mro=["typing.NamedTuple", "builtins.tuple", "builtins.object"])
    out["typing.NamedTuple"] = obs
    return out


# ---------------------------------------------------------------------- merging releases
def _runs(versions: list[str], catalogued: list[str]) -> list[str]:
    """``versions`` (a subset of ``catalogued``, sorted like it) as single versions and ``a..b`` runs
    of consecutive catalogued versions (three or more)."""
    index = {v: i for i, v in enumerate(catalogued)}
    positions = sorted(index[v] for v in versions)
    out: list[str] = []
    start = 0
    while start < len(positions):
        end = start
        while end + 1 < len(positions) and positions[end + 1] == positions[end] + 1:
            end += 1
        if end - start >= 2:
            out.append(f"{catalogued[positions[start]]}..{catalogued[positions[end]]}")
        else:
            out.extend(catalogued[p] for p in positions[start:end + 1])
        start = end + 1
    return out


def _split(per_version: dict[str, set[str]], present: list[str], catalogued: list[str]) -> tuple[list, dict]:
    """A set-valued field observed per release: what every release has (sorted list) and the other
    values with the releases that have them."""
    always = set.intersection(*(per_version[v] for v in present)) if present else set()
    some: dict[str, list[str]] = {}
    for value in sorted(set().union(*per_version.values()) - always):
        some[value] = _runs([v for v in present if value in per_version[v]], catalogued)
    return sorted(always), some


def merge(library: str, catalogued: list[str], observed: dict[str, dict[str, dict]],
          kinds: dict[str, set[str]]) -> dict[str, dict]:
    """The versioned class entries of one library from ``observed[version][qualname]`` (each
    observation has a ``kind``, ``static`` or ``import``; ``kinds[version]``: the kinds of reading
    that release had). Classes of different releases sharing an alias are one class
    (``PretrainedConfig`` became ``PreTrainedConfig`` in transformers 5), named by its newest
    qualname. A class is looked for (``read``) in the releases read by its kind."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    by_alias: dict[str, tuple[str, str]] = {}
    for version, classes in observed.items():
        for qual, obs in classes.items():
            node = find((version, qual))
            for alias in sorted(obs["aliases"] | {qual}):
                other = by_alias.setdefault(alias, node)
                if find(other) != find(node):
                    parent[find(other)] = find(node)
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for version, classes in observed.items():
        for qual in classes:
            groups.setdefault(find((version, qual)), []).append((version, qual))
    order = {v: i for i, v in enumerate(catalogued)}
    out: dict[str, dict] = {}
    for members in groups.values():
        members.sort(key=lambda vq: order[vq[0]])
        newest_version, canonical = members[-1]
        obs_by_version = {v: observed[v][q] for v, q in members}
        kind = obs_by_version[newest_version]["kind"]
        read = [v for v in catalogued if kind in kinds.get(v, ())]
        present = [v for v in catalogued if v in obs_by_version]
        entry: dict = {"library": library, "qualname": canonical, "mro": obs_by_version[newest_version]["mro"]}
        if read != catalogued:
            entry["read"] = _runs(read, catalogued)
        if present != read:
            entry["versions"] = _runs(present, catalogued)
        for field in ("aliases", "members", "inherits"):
            always, some = _split({v: set(o[field]) for v, o in obs_by_version.items()}, present, catalogued)
            entry[field] = always
            if some:
                entry[f"{field}_some"] = some
        for flag, key in (("dynamic", "dynamic_getattr"), ("registry", "registry_getattr")):
            where = [v for v in present if obs_by_version[v][flag]]
            entry[key] = True if where == present else (_runs(where, catalogued) if where else False)
        where_unresolved: dict[str, list[str]] = {}
        for v in present:
            for item in obs_by_version[v]["unresolved"]:
                where_unresolved.setdefault(item, []).append(v)
        if where_unresolved:
            entry["unresolved"] = {item: _runs(vs, catalogued) for item, vs in sorted(where_unresolved.items())}
        out[canonical] = entry
    return out


def _note_incomplete(classes: dict[str, dict]) -> None:
    """Mark the classes inheriting a class that no entry describes (a compiled base such as
    ``mindspore._c_expression.Cell_``): its members are unknown, the rest is checked."""
    known = {alias for entry in classes.values() for alias in
             [entry["qualname"], *entry["aliases"], *entry.get("aliases_some", {})]}
    for entry in classes.values():
        missing = sorted(name for name in [*entry["inherits"], *entry.get("inherits_some", {})] if name not in known)
        if missing:
            entry["incomplete"] = f"members of {', '.join(missing)} unknown (compiled, not read)"


# ---------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    """Build the catalog and write it to ``--out`` (default: the package data file)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--work", default=str(WORK), help="folder of the slim source archives (download cache)")
    parser.add_argument("--import-python", action="append", default=[], metavar="LIB=PYTHON",
                        help="an interpreter where a release of LIB is installed: its C-level classes are read by import")
    parser.add_argument("--only", action="append", default=[], help="catalog only these libraries (trials)")
    parser.add_argument("--dump-import", metavar="LIB", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.dump_import:
        json.dump(dump_import(args.dump_import), sys.stdout, sort_keys=True)
        return 0
    work = Path(args.work)
    catalog: dict = {"format": FORMAT, "generated_by": "scripts/gen_framework_catalog.py",
                     "libraries": {}, "unavailable": {}, "classes": {}}
    python_version = sys.version.split()[0]
    catalog["libraries"]["python"] = {"versions": [python_version],
                                      "read": {python_version: "import (builtins and standard-library bases)"}}
    for qual, obs in read_stdlib().items():
        obs["kind"] = "import"
        catalog["classes"].update(merge("python", [python_version], {python_version: {qual: obs}},
                                        {python_version: {"import"}}))
    imported: dict[str, dict[str, dict]] = {}
    for spec in args.import_python:
        library, _, python = spec.partition("=")
        done = subprocess.run([python, __file__, "--dump-import", library], capture_output=True, text=True, check=False)
        if done.returncode:
            print(f"{library} by import with {python}: failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
            continue
        dumped = json.loads(done.stdout)
        imported.setdefault(library, {})[dumped["version"]] = dumped
        print(f"{library} {dumped['full_version']}: {len(dumped['classes'])} C-level classes by import", file=sys.stderr)
    for library, plan in LIBRARIES.items():
        if args.only and library not in args.only:
            continue
        observed: dict[str, dict[str, dict]] = {}
        kinds: dict[str, set[str]] = {}
        read: dict[str, str] = {}
        for version in plan["versions"]:
            try:
                archive = source_archive(library, version, work)
            except (RuntimeError, OSError, zipfile.BadZipFile) as exc:
                print(f"{library} {version}: {exc}", file=sys.stderr)
                catalog["unavailable"][f"{library}=={version}"] = str(exc).splitlines()[0][:200]
                continue
            classes, missing = read_static(library, version, archive)
            with zipfile.ZipFile(archive) as slim:
                wheel = slim.read("WHEEL-NAME").decode()
            how = f"source of {wheel}, read with ast"
            if missing:
                how += "; not in this release: " + ", ".join(missing)
            for obs in classes.values():
                obs["kind"] = "static"
            kinds[version] = {"static"}
            dumped = imported.get(library, {}).get(version)
            if dumped is not None:
                for qual, obs in dumped["classes"].items():
                    classes[qual] = {k: set(v) if k in ("aliases", "members", "inherits") else v for k, v in obs.items()}
                    classes[qual]["kind"] = "import"
                kinds[version].add("import")
                how += f"; C-level classes by import of {dumped['full_version']}"
            observed[version] = classes
            read[version] = how
            print(f"{library} {version}: {len(classes)} classes; {how}", file=sys.stderr)
        versions = [v for v in plan["versions"] if v in observed]
        if versions:
            catalog["libraries"][library] = {"versions": versions, "read": read}
            catalog["classes"].update(merge(library, versions, observed, kinds))
    _note_incomplete(catalog["classes"])
    write(catalog, Path(args.out))
    print(f"wrote {args.out}: {len(catalog['classes'])} classes, {Path(args.out).stat().st_size:,} bytes; "
          f"unavailable: {catalog['unavailable'] or 'none'}", file=sys.stderr)
    return 0


def write(catalog: dict, out: Path) -> None:
    """Write the catalog as compact JSON, one class per line (sorted: deterministic, readable diffs)."""
    head = {k: v for k, v in catalog.items() if k != "classes"}
    lines = [json.dumps(head, sort_keys=True, separators=(",", ":"))[:-1] + ',"classes":{']
    items = sorted(catalog["classes"].items())
    for i, (qual, entry) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        lines.append(json.dumps(qual) + ":" + json.dumps(entry, sort_keys=True, separators=(",", ":")) + comma)
    lines.append("}}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
