"""The oracle on the codemod fixtures (``tests/fixtures/*/codemod/*.in.py`` whose safe output differs).

A fixture is not written for a driver, so it runs in a generic *world*: every top-level function and
every method of every top-level class is called on its own (a fresh run each), with stub arguments:
a parameter named like a shard-degree quantity (``world_size``, ``ws``, ``dp_shard``) gets the shard
degree, one named like a tensor (``t``, ``x``, ``*tensor*``) a stub tensor, anything else a
:class:`WorldStub`. A world stub answers the rules' vocabulary: ``is_shard`` is ``degree > 1``, a
quantity attribute or getter gives the degree, a wrap marker (``_is_wrapped``, ``_..wrapped..``) is
set on the walked submodules the scenario wraps, ``.modules()`` and the other walks yield the
receiver then three submodules, view methods return stub tensors, ``fully_shard(m)`` returns ``m``,
the queries the rules treat as side-effect free (``.parameters()``, ``.values()``, ``.items()``)
return two child stubs unrecorded;
other attributes are child stubs (falsy, iterable, recorded when called or stored); ``self`` of a
method also has the members of its class (so ``self._fail(...)`` runs the helper). For E9503 the
fixture's classes are instantiated for real (``torch.nn.Module`` is the recording stub).

Scenarios: shard degree 1 and 2, and no / one / two walked submodules already wrapped. The
comparison per call is the rule's (see :mod:`oracle.check`), with a generic form for E9504 and
E9503 where the generated programs use a reference: where the runs differ, the original stopped
with an exception (E9503: the ``AttributeError`` of the missing accessor) after exactly the events
the fixed run also had at that point.
"""

from __future__ import annotations

import ast
import inspect
import re
import types
from typing import Any

from oracle.check import ACCESSOR_NAMES, OracleFailure, compare_e9501, compare_e9502
from oracle.runtime import Func, Outcome, Tensor, Trace, fmt, run_program

QUANTITY = re.compile(
    r"world_size|ws|(dp|fsdp|shard|dp_shard|data_parallel)_world_size|get_(dp_|fsdp_|shard_|data_parallel_)?"
    r"world_size|(dp_)?shard(_mesh)?_(size|degree)|dp_shard|(num|n)_shards|fsdp_(size|degree)|data_parallel_shard_degree"
    r"|(dp|dp_shard|fsdp|shard|data_parallel)_mesh\.size")
MARKER = re.compile(r"_is_wrapped|_.*wrapped.*")
OTHER_DEGREE = re.compile(r"(tp|cp|pp|ep|etp|sp|dp_replicate)((_world)?_(size|degree))?")
TENSOR_PARAM = re.compile(r"t|x|.*tensor.*|weight|data")
WALKS = {"modules": "module", "children": "module", "cells": "module", "named_modules": "pair",
         "named_children": "pair", "cells_and_names": "pair", "name_cells": "dict"}
ROOT_FIRST = {"modules", "named_modules", "cells_and_names"}
VIEW_METHODS = frozenset({"narrow", "view", "view_as", "as_strided", "expand", "expand_as", "transpose", "t",
                          "permute", "select", "unflatten", "unfold", "squeeze", "unsqueeze", "diagonal",
                          "movedim", "swapaxes", "swapdims"})
SEQ_METHODS = frozenset({"split", "chunk", "unbind", "tensor_split"})
QUERIES = frozenset({"parameters", "named_parameters", "buffers", "named_buffers", "values", "items", "keys"})
PAIR_QUERIES = frozenset({"named_parameters", "named_buffers", "items"})


class World:
    """One scenario: the shard degree and which walked submodules (indices 0-2) are already wrapped."""

    def __init__(self, trace: Trace, degree: int, wrapped: tuple[int, ...]) -> None:
        self.trace, self.degree, self.wrapped = trace, degree, wrapped


class WorldStub:
    """An object of a fixture's world (see the module docstring)."""

    def __init__(self, world: World, name: str, wrapped: bool = False, parent: "WorldStub | None" = None,
                 cls: type | None = None) -> None:
        object.__setattr__(self, "_world", world)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_wrapped", wrapped)
        object.__setattr__(self, "_parent", parent)
        object.__setattr__(self, "_cls", cls)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        world = self._world
        cls = self._cls
        if cls is not None and hasattr(cls, attr):  # `self` of a method: the class's own members
            member = inspect.getattr_static(cls, attr)
            if isinstance(member, property):
                return member.fget(self)
            if isinstance(member, (staticmethod, classmethod)):
                return getattr(cls, attr)
            return types.MethodType(member, self) if callable(member) else member
        if attr == "is_shard":
            return world.degree > 1
        if QUANTITY.fullmatch(attr):
            return world.degree
        if OTHER_DEGREE.fullmatch(attr):
            return 1  # only the data-parallel shard degree varies in the scenarios
        if MARKER.fullmatch(attr):
            return self._wrapped
        child = WorldStub(world, f"{self._name}.{attr}", parent=self)
        object.__setattr__(self, attr, child)
        return child

    def __setattr__(self, attr: str, value: Any) -> None:
        self._world.trace.add("set", f"{self._name}.{attr}", fmt(value))
        object.__setattr__(self, attr, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        world = self._world
        receiver, _, method = self._name.rpartition(".")
        if method in QUERIES:  # side-effect-free queries (as the rules model them): not recorded
            items = [WorldStub(world, f"{receiver}.{method}()[{i}]") for i in range(2)]
            return [(f"k{i}", item) for i, item in enumerate(items)] if method in PAIR_QUERIES else items
        if QUANTITY.fullmatch(method) or QUANTITY.fullmatch(f"{receiver.rpartition('.')[2]}.{method}"):
            return world.degree  # degree queries (a data-parallel mesh's size too) are side-effect free
        world.trace.add("call", self._name, fmt(args), fmt(kwargs))
        if method in WALKS:
            root = self._parent if self._parent is not None else WorldStub(world, receiver)
            # the root has three submodules, which are leaves: a stack or recursive walk ends
            subs = [] if ".sub" in receiver else [
                WorldStub(world, f"{receiver}.sub{i}", i in world.wrapped) for i in range(3)]
            items = ([root] if method in ROOT_FIRST else []) + subs
            if WALKS[method] == "pair":
                return [("" if sub is root else f"sub{i}", sub) for i, sub in enumerate(items)]
            if WALKS[method] == "dict":
                return {f"sub{i}": sub for i, sub in enumerate(subs)}
            return items
        if method in VIEW_METHODS:
            return Tensor(world.trace, base=Tensor(world.trace))
        if method in SEQ_METHODS:
            base = Tensor(world.trace)
            return (Tensor(world.trace, base=base), Tensor(world.trace, base=base))
        return None

    def __bool__(self) -> bool:
        return False

    def __iter__(self):
        return iter([WorldStub(self._world, f"{self._name}[0]"), WorldStub(self._world, f"{self._name}[1]")])

    def __len__(self) -> int:
        return 2

    def __getitem__(self, key: Any) -> Any:
        return WorldStub(self._world, f"{self._name}[{key!r}]")

    def __repr__(self) -> str:
        return self._name


def _argument(world: World, name: str) -> Any:
    if name == "is_shard":
        return world.degree > 1
    if QUANTITY.fullmatch(name):
        return world.degree
    if OTHER_DEGREE.fullmatch(name):
        return 1
    if TENSOR_PARAM.fullmatch(name):
        return Tensor(world.trace)
    return WorldStub(world, name)


def _callables(tree: ast.Module) -> list[tuple[str | None, str, ast.AST]]:
    """(class name or None, function name, def node) of the top-level functions and methods."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out.append((None, node.name, node))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not (item.name.startswith("__") and item.name != "__init__"):
                    out.append((node.name, item.name, item))
    return out


def _params(func: ast.FunctionDef) -> list[str]:
    return [a.arg for a in func.args.posonlyargs + func.args.args]


def _run_callable(source: str, rule: str, owner: str | None, name: str, params: list[str], degree: int,
                  wrapped: tuple[int, ...]) -> Outcome:
    holder: dict[str, World] = {}

    def behaviours(trace: Trace) -> dict:
        world = World(trace, degree, wrapped)
        holder["world"] = world
        return {"fully_shard": lambda module, *a, **k: module,
                "get_world_size": lambda *a: degree}

    def driver(ns: dict, trace: Trace) -> Any:
        world = holder["world"]
        for key, value in list(ns.items()):
            if isinstance(value, Func) and QUANTITY.fullmatch(key):
                ns[key] = degree
        if owner is None:
            return ns[name](*[_argument(world, p) for p in params])
        cls = ns[owner]
        if rule == "E9503":
            init = cls.__dict__.get("__init__")
            args = [_argument(world, p) for p in _params_of(init)[1:]] if init else []
            instance = cls(*args)
            if name == "__init__":
                return instance
            method = getattr(instance, name)
            return method(*[_argument(world, p) for p in params[1:]])
        func = cls.__dict__[name]
        this = WorldStub(world, "self", cls=cls)
        init = cls.__dict__.get("__init__")
        if init is not None and name != "__init__":  # the state __init__ sets (a gate attribute, say)
            init(this, *[_argument(world, p) for p in _params_of(init)[1:]])
        return func(this, *[_argument(world, p) for p in params[1:]])

    return run_program(source, driver, behaviours)


def _params_of(func: Any) -> list[str]:
    code = func.__code__
    return list(code.co_varnames[: code.co_argcount])


def _generic_stop(before: Outcome, after: Outcome, rule: str) -> str:
    """E9504/E9503 on fixtures: equal, or the original stopped with an exception where the fixed run
    went on: up to where they part the events are the same, and what the original did after that
    (``finally`` clean-ups) the fixed run does later too, in the same order (nothing is lost)."""
    if before.events == after.events and before.end == after.end:
        return ""
    if before.end[0] != "raise":
        return f"the runs differ although the original did not raise: {before.end} vs {after.end}"
    events = list(before.events)
    if rule == "E9503":
        at = next((i for i, e in enumerate(events) if e[0] == "missing" and e[2] in ACCESSOR_NAMES), None)
        if at is None or before.end[1] != "AttributeError" or events[at][2] not in before.end[2]:
            return f"the original did not stop at a missing accessor: {before.end}"
        del events[at]
    common = 0
    while common < min(len(events), len(after.events)) and events[common] == after.events[common]:
        common += 1
    rest = iter(after.events[common:])
    if not all(any(event == other for other in rest) for event in events[common:]):
        return f"the original did something the fixed run never does: {events[common:]}"
    if after.end == before.end:
        return "the same exception after more events"
    return ""


def check_fixture(rule: str, before_text: str, after_text: str) -> int:
    """Run every function and method of a fixture before and after its safe fix on every scenario;
    raise :class:`OracleFailure` on a difference beyond the rule's. Return the runs compared."""
    tree = ast.parse(before_text)
    runs = 0
    for owner, name, node in _callables(tree):
        params = _params(node)
        for degree in (1, 2):
            for wrapped in ((), (1,), (0, 2)):
                before = _run_callable(before_text, rule, owner, name, params, degree, wrapped)
                after = _run_callable(after_text, rule, owner, name, params, degree, wrapped)
                if rule == "E9502":
                    problem = compare_e9502(before, after, None, {"degree": degree}, flags=True)
                elif rule == "E9501":
                    problem = compare_e9501(before, after, None, {})
                else:
                    problem = _generic_stop(before, after, rule)
                runs += 1
                if problem:
                    raise OracleFailure(
                        f"{rule}: the safe fix of a fixture changed more than the invariant in "
                        f"{owner + '.' if owner else ''}{name} (degree {degree}, wrapped {wrapped}): {problem}\n"
                        f"--- before\n{before.events}\n{before.end}\n--- after\n{after.events}\n{after.end}")
    return runs
