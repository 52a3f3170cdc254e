"""Regenerate ``hp_invariants/data/framework_members.json``, the E9503 framework base catalog.

E9503 (``undefined-method-call``) must know which names exist on framework base classes
(``torch.nn.Module``, ``transformers.PreTrainedModel``, ``mindspore.nn.Cell``, builtins) without
importing those libraries at lint time (codecheck has no torch). This script imports the REAL
libraries and writes, for each catalogued class:

* ``aliases``: every public dotted name under which the same class object is reachable
  (``module.__qualname__`` plus each parent-package path that re-exports it, e.g.
  ``torch.nn.Module`` and ``torch.nn.modules.module.Module``);
* ``members``: ``dir()`` of the class plus the instance attributes its own code sets: those of
  ``instance.__dict__`` where the class can be built without arguments, and the ``self.x = ...``
  assignments in the source of **every method** of every class of its MRO, as E9503 counts the
  members of a project class (``PreTrainedModel._set_gradient_checkpointing`` sets
  ``self._gradient_checkpointing_func``, which the models call);
* ``dynamic_getattr``: whether a class of its MRO (other than ``object``) defines ``__getattr__`` or
  ``__getattribute__`` in its own ``__dict__``. The registry ``__getattr__`` of ``torch.nn.Module``
  and ``mindspore.nn.Cell`` (it only serves parameters, buffers and submodules that an assignment
  or ``register_*`` call created, which E9503 sees) is listed in ``registry_getattr`` instead;
* ``library`` and ``version``.

Run it (re-runnable; output is sorted, so an unchanged library gives an unchanged file)::

    /work/venv/bin/python scripts/gen_framework_catalog.py            # torch, transformers, builtins
    PYTHONPATH=/path/to/mindspore/site python scripts/gen_framework_catalog.py   # + mindspore

A library that cannot be imported is reported on stderr and recorded under ``unavailable`` in the
JSON; its classes are left out (members are never invented). For mindspore, when the package
cannot be imported the script reads ``mindspore/nn/cell.py`` from a wheel given by
``--mindspore-wheel`` (``pip download --no-deps mindspore``) with ``ast``; the C++ base ``Cell_``
is then unknown and recorded as such.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import inspect
import json
import sys
import textwrap
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "hp_invariants" / "data" / "framework_members.json"
FORMAT = 1

# (library, dotted path of the class)
TORCH = [
    "torch.nn.Module", "torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict",
    "torch.nn.ParameterList", "torch.nn.ParameterDict", "torch.nn.Parameter", "torch.Tensor",
    "torch.autograd.Function", "torch.autograd.function.FunctionCtx",
    "torch.optim.Optimizer", "torch.optim.lr_scheduler.LRScheduler",
    "torch.utils.data.Dataset", "torch.utils.data.IterableDataset",
    # wrappers a training script rebinds a model to (model = DDP(model)): E9503 checks calls on them
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
]
TRANSFORMERS = ["transformers.PreTrainedModel", "transformers.PretrainedConfig",
                "transformers.GenerationMixin"]
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


def _import_attr(dotted: str):
    module, _, name = dotted.rpartition(".")
    obj = importlib.import_module(module)
    return getattr(obj, name)


def _aliases(cls, library: str) -> list[str]:
    """Every ``pkg.sub.Name`` under the library where ``Name`` is ``cls`` (walks parent packages)."""
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
            found.update(_self_assigns(tree))
    return found


def _self_assigns(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str):
            func = node.func
            # super().__setattr__("training", True) / object.__setattr__(self, "x", v)
            if isinstance(func, ast.Attribute) and func.attr == "__setattr__":
                names.add(node.args[0].value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__setattr__" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            names.add(node.args[1].value)
    return names


def _dynamic(cls) -> bool:
    for klass in cls.__mro__:
        if klass is object or f"{klass.__module__}.{klass.__qualname__}" in REGISTRY_GETATTR:
            continue
        if "__getattr__" in vars(klass) or "__getattribute__" in vars(klass):
            # pybind/C base types expose a slot wrapper __getattribute__ that is object's
            if "__getattr__" in vars(klass) or type(vars(klass)["__getattribute__"]).__name__ != "wrapper_descriptor":
                return True
    return False


def _entry(cls, library: str, version: str) -> dict:
    qual = f"{cls.__module__}.{cls.__qualname__}"
    members = set(dir(cls)) | _instance_attrs(cls)
    for klass in getattr(cls, "__mro__", ()):  # dir() of an Enum hides value/name: read every __dict__
        members.update(vars(klass))
    return {
        "aliases": _aliases(cls, library),
        "members": sorted(members),
        "dynamic_getattr": _dynamic(cls),
        "registry_getattr": any(f"{k.__module__}.{k.__qualname__}" in REGISTRY_GETATTR for k in cls.__mro__),
        "mro": [f"{k.__module__}.{k.__qualname__}" for k in cls.__mro__],
        "library": library,
        "version": version,
        "qualname": qual,
    }


def _add_library(catalog: dict, library: str, paths: list[str], extra_mro: bool) -> None:
    try:
        mod = importlib.import_module(library)
        version = getattr(mod, "__version__", sys.version.split()[0])
    except Exception as exc:  # noqa: BLE001
        print(f"{library}: cannot import ({type(exc).__name__}: {exc}); left out", file=sys.stderr)
        catalog["unavailable"][library] = f"cannot import: {type(exc).__name__}"
        return
    catalog["libraries"][library] = str(version)
    todo = [_import_attr(p) for p in paths]
    if extra_mro:  # every class of the MRO of each listed class (the mixins of PreTrainedModel)
        todo = [k for cls in todo for k in cls.__mro__ if k.__module__.split(".")[0] == library] + todo
    for cls in todo:
        entry = _entry(cls, library, str(version))
        catalog["classes"][entry["qualname"]] = entry
    print(f"{library} {version}: {len(todo)} classes", file=sys.stderr)


def _add_stdlib(catalog: dict) -> None:
    version = sys.version.split()[0]
    catalog["libraries"]["python"] = version
    names = list(STDLIB)
    names += [f"builtins.{n}" for n, v in vars(builtins).items()
              if isinstance(v, type) and issubclass(v, BaseException)]
    for dotted in names:
        cls = _import_attr(dotted)
        entry = _entry(cls, "python", version)
        entry["aliases"] = sorted(set(entry["aliases"]) | {dotted})
        catalog["classes"][dotted if dotted.startswith("builtins.") else entry["qualname"]] = entry
    # typing.NamedTuple is a function: a class statement based on it gets namedtuple's members
    import collections

    entry = _entry(collections.namedtuple("NamedTuple", []), "python", version)
    entry.update(aliases=["typing.NamedTuple"], qualname="typing.NamedTuple",
                 mro=["typing.NamedTuple", "builtins.tuple", "builtins.object"])
    catalog["classes"]["typing.NamedTuple"] = entry


def _mindspore_from_wheel(catalog: dict, wheel: str) -> None:
    """Read ``Cell`` from the wheel's ``mindspore/nn/cell.py`` with ``ast`` (no import)."""
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read("mindspore/nn/cell.py").decode("utf-8")
        version = Path(wheel).name.split("-")[1]
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Cell":
            members = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            members |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets
                        if isinstance(t, ast.Name)}
            members |= _self_assigns(node) | set(dir(object))
            catalog["classes"]["mindspore.nn.cell.Cell"] = {
                "aliases": ["mindspore.nn.Cell", "mindspore.nn.cell.Cell"],
                "members": sorted(members), "dynamic_getattr": False, "registry_getattr": True,
                "mro": ["mindspore.nn.cell.Cell", "mindspore._c_expression.Cell_", "builtins.object"],
                "library": "mindspore", "version": version, "qualname": "mindspore.nn.cell.Cell",
                "incomplete": "members of the C++ base mindspore._c_expression.Cell_ unknown (read from the wheel source)",
            }
            catalog["libraries"]["mindspore"] = version
            catalog["unavailable"].pop("mindspore", None)
            print(f"mindspore {version}: Cell read from {wheel} (C++ base Cell_ members unknown)", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Build the catalog and write it to ``--out`` (default: the package data file)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--mindspore-wheel", help="wheel to read mindspore.nn.Cell from when it cannot be imported")
    parser.add_argument("--keep-unavailable", action="store_true",
                        help="keep the entries (and recorded versions) of libraries that cannot be imported here "
                             "from the existing --out file, instead of leaving them out")
    args = parser.parse_args(argv)
    catalog: dict = {"format": FORMAT, "generated_by": "scripts/gen_framework_catalog.py",
                     "libraries": {}, "unavailable": {}, "classes": {}}
    _add_stdlib(catalog)
    _add_library(catalog, "torch", TORCH, extra_mro=True)
    _add_library(catalog, "transformers", TRANSFORMERS, extra_mro=True)
    _add_library(catalog, "mindspore", ["mindspore.nn.Cell"], extra_mro=False)
    if "mindspore" in catalog["unavailable"] and args.mindspore_wheel:
        _mindspore_from_wheel(catalog, args.mindspore_wheel)
    if args.keep_unavailable and Path(args.out).exists():
        old = json.loads(Path(args.out).read_text(encoding="utf-8"))
        for library in list(catalog["unavailable"]):
            if library not in old.get("libraries", {}):
                continue
            kept = {q: e for q, e in old["classes"].items() if e.get("library") == library}
            catalog["classes"].update(kept)
            catalog["libraries"][library] = old["libraries"][library]
            del catalog["unavailable"][library]
            print(f"{library}: kept {len(kept)} classes from {args.out}", file=sys.stderr)
    catalog["classes"] = dict(sorted(catalog["classes"].items()))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(catalog, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(catalog['classes'])} classes; unavailable: {catalog['unavailable'] or 'none'}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
