"""The per-file semantic model every rule queries: definitions, classes, bindings, and helper resolution.

One model per file (:attr:`hp_invariants.api.FileContext.semantic`, built on first use from the
file's tree), as ruff's ``SemanticModel`` serves all its rules. It answers the questions the rules
used to answer three different ways:

* which ``def`` a call reaches (:meth:`SemanticModel.resolve_call`) and which ``@property`` an
  attribute read runs (:meth:`SemanticModel.resolve_attribute`): **one precision policy**, below;
* what a name bound by an ``import`` denotes (:meth:`SemanticModel.external`): the module and the
  attribute chain a call such as ``helper(...)`` after ``from pkg.util import helper``, or
  ``util.helper(...)`` after ``import pkg.util as util``, reaches in another file (the project layer,
  :mod:`hp_invariants.rules.shard_gate_facts`, finds that file);
* the functions, methods and properties of the file by name (:meth:`SemanticModel.definitions`),
  the class a function is a method of (:meth:`SemanticModel.owner`), a class's same-file bases and
  subclasses, the names a file aliases (``from m import f as g``, ``g = f``), and what a function
  returns (:meth:`SemanticModel.returns`).

The precision policy of resolution (Python's own name and attribute lookup, restricted to what the
file shows):

* ``f(...)``: the ``def`` bound to ``f`` in the innermost enclosing function that binds ``f``, else at
  module level; a name bound there by anything but ``def`` statements (an import, an assignment, a
  parameter) resolves to nothing. Several ``def`` statements of one name in one scope (``if``/``else``
  alternatives) are all candidates.
* ``self.m(...)``/``cls.m(...)`` in a method of class ``C``, and ``C.m(...)``: the first definition of
  ``m`` along ``C``'s method resolution order through the classes of this file; for ``self``/``cls``
  also every override of ``m`` in a class of this file that inherits from ``C`` (the call dispatches
  to it on such instances), since the receiver may be an instance of a subclass. When a base of ``C``
  is not a class of the file (a library class, an import), the lookup stops being complete: a
  definition found below that base is still a candidate, but the resolution says it is incomplete.
* Anything else (``x.m(...)`` on a receiver of unknown class) resolves by name only: every method of
  that name in the file, marked incomplete.

A rule asks for the property it needs of **every** candidate (E9504: every candidate always raises;
E9501: the union of the views the candidates return; E9502: every candidate is a degree predicate),
and treats an incomplete resolution as it documents (E9504 and E9501 require completeness; E9502,
whose gates may live in other files, also reads the project facts).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator, Sequence

from hp_invariants.astutil import FunctionNode, child_bodies, last_name, names_in_target, walk_function_body


def _module_statements(tree: ast.Module) -> list[ast.AST]:
    """The statements of a module outside functions and classes (nested blocks included)."""
    out: list[ast.AST] = []
    stack = list(tree.body)
    while stack:
        stmt = stack.pop()
        out.append(stmt)
        if stmt.__class__ in (ast.With, ast.AsyncWith):
            out.extend(stmt.items)
        if stmt.__class__ not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            for block in child_bodies(stmt):
                stack.extend(block)
    return out

_PROPERTY_DECORATORS = frozenset({"property", "cached_property"})
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def is_property(func: ast.AST) -> bool:
    """True for a property getter: a ``def`` decorated with ``@property`` or ``@cached_property`` (any
    spelling: ``functools.cached_property``)."""
    return any(last_name(d.func if isinstance(d, ast.Call) else d) in _PROPERTY_DECORATORS
               for d in getattr(func, "decorator_list", ()))


def _accessor(func: ast.AST) -> bool:
    """True for a property's ``@x.setter``/``@x.deleter`` (reading the attribute does not run it)."""
    return any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in getattr(func, "decorator_list", ()))


@dataclass(frozen=True)
class Resolution:
    """What a call or attribute read reaches: ``candidates`` (the ``def`` nodes, in lookup order)
    and ``complete`` (False when code the file does not show may be reached instead: a base class
    outside the file, a receiver of unknown class)."""

    candidates: tuple[ast.AST, ...]
    complete: bool

    @property
    def single(self) -> ast.AST | None:
        """The one candidate of a complete resolution, else ``None``."""
        return self.candidates[0] if self.complete and len(self.candidates) == 1 else None


NOTHING = Resolution((), False)


@dataclass(frozen=True)
class ExternalRef:
    """What a name bound by an import reaches: the module ``module`` (dotted; relative to the file's
    package when ``level`` > 0, as in ``from ..util import f``), then the attribute chain ``attrs``
    (``from pkg.util import helper`` then ``helper(...)``: ``("pkg.util", 0, ("helper",))``; ``import
    pkg.util`` then ``pkg.util.helper(...)``: ``("pkg", 0, ("util", "helper"))``). Where a prefix of
    ``attrs`` is itself a submodule is for the project to decide."""

    module: str
    level: int
    attrs: tuple[str, ...]


class SemanticModel:
    """Definitions and bindings of one parsed file (see the module docstring).

    Input: the file's ``ast.Module``. Built in one pass over the statements (expressions are not
    walked), on first use. Never raises for a valid tree.
    """

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self._built = False
        self._by_name: dict[str, list[ast.AST]] = {}  # every def (function, method, property) by name
        self._owner: dict[int, ast.ClassDef | None] = {}  # function -> the class whose body holds it
        self._parent: dict[int, ast.AST | None] = {}  # def/class -> enclosing function, class or None
        self._classes: dict[str, list[ast.ClassDef]] = {}  # class name -> its class statements
        self._scope_defs: dict[int, dict[str, list[ast.AST]]] = {}  # scope -> name -> its defs there
        self._scope_other: dict[int, set[str]] = {}  # scope -> names bound there by other statements
        self._imports: dict[int, dict[str, list[ExternalRef]]] = {}  # scope -> name -> its import bindings
        self._scope_nodes: dict[int, ast.AST] = {}  # id -> scope (module, function, lambda, class)
        self._members: dict[int, dict[str, list[ast.AST]]] = {}  # class -> name -> defs in its body
        self._subclasses: dict[int, list[ast.ClassDef]] | None = None
        self._aliases: dict[str, str | None] | None = None

    # ------------------------------------------------------------------ building
    def _build(self) -> None:
        self._built = True
        self._scan_scope(self.tree, self.tree.body, None)

    def _scan_scope(self, scope: ast.AST, body: Sequence[ast.stmt], klass: ast.ClassDef | None) -> None:
        """Record the definitions and other bindings of one scope's statements (``klass``: the class
        whose body this is)."""
        defs = self._scope_defs.setdefault(id(scope), {})
        other = self._scope_other.setdefault(id(scope), set())
        self._scope_nodes[id(scope)] = scope
        stack = list(reversed(body))
        nested: list[ast.AST] = []
        while stack:
            stmt = stack.pop()
            kind = stmt.__class__
            if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                defs.setdefault(stmt.name, []).append(stmt)
                self._by_name.setdefault(stmt.name, []).append(stmt)
                self._owner[id(stmt)] = klass
                self._parent[id(stmt)] = scope
                nested.append(stmt)
            elif kind is ast.ClassDef:
                other.add(stmt.name)
                self._classes.setdefault(stmt.name, []).append(stmt)
                self._parent[id(stmt)] = scope
                nested.append(stmt)
            else:
                if kind is ast.Import or kind is ast.ImportFrom:
                    other.update((a.asname or a.name).split(".")[0] for a in stmt.names)
                    self._record_imports(scope, stmt)
                elif kind is ast.Assign:
                    for target in stmt.targets:
                        other.update(names_in_target(target))
                elif kind is ast.AnnAssign or kind is ast.AugAssign:
                    other.update(names_in_target(stmt.target))
                elif kind is ast.For or kind is ast.AsyncFor:
                    other.update(names_in_target(stmt.target))
                elif kind is ast.With or kind is ast.AsyncWith:
                    for item in stmt.items:
                        if item.optional_vars is not None:
                            other.update(names_in_target(item.optional_vars))
                elif kind is ast.Global or kind is ast.Nonlocal:
                    other.update(stmt.names)
                for block in reversed(child_bodies(stmt)):
                    stack.extend(reversed(block))
        if isinstance(scope, FunctionNode) or isinstance(scope, ast.Lambda):
            args = scope.args
            other.update(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
            other.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
        if klass is not None:
            self._members[id(klass)] = defs
        for node in nested:
            if node.__class__ is ast.ClassDef:
                self._scan_scope(node, node.body, node)
            else:
                self._scan_scope(node, node.body, None)

    def _record_imports(self, scope: ast.AST, stmt: ast.Import | ast.ImportFrom) -> None:
        table = self._imports.setdefault(id(scope), {})
        for alias in stmt.names:
            if alias.name == "*":
                continue
            if stmt.__class__ is ast.ImportFrom:
                ref = ExternalRef(stmt.module or "", stmt.level or 0, (alias.name,))
                name = alias.asname or alias.name
            elif alias.asname:  # import a.b as m: m is the module a.b
                ref, name = ExternalRef(alias.name, 0, ()), alias.asname
            else:  # import a.b: binds a
                name = alias.name.split(".")[0]
                ref = ExternalRef(name, 0, ())
            table.setdefault(name, []).append(ref)

    def _ensure(self) -> None:
        if not self._built:
            self._build()

    # ------------------------------------------------------------------ definitions
    def definitions(self, name: str) -> list[ast.AST]:
        """Every ``def`` of ``name`` in the file (functions, methods, properties, nested), in source order."""
        self._ensure()
        return sorted(self._by_name.get(name, ()), key=lambda d: (d.lineno, d.col_offset))

    def owner(self, func: ast.AST) -> ast.ClassDef | None:
        """The class whose body holds ``func`` (the class it is a method of), else ``None``."""
        self._ensure()
        return self._owner.get(id(func))

    def enclosing_class(self, func: ast.AST) -> ast.ClassDef | None:
        """The class of the method ``func`` is, or is nested in (``self`` of a closure in a method)."""
        self._ensure()
        node: ast.AST | None = func
        while node is not None and not isinstance(node, ast.Module):
            owner = self._owner.get(id(node))
            if owner is not None:
                return owner
            node = self._parent.get(id(node))
            if isinstance(node, ast.ClassDef):
                return node
        return None

    def classes(self, name: str) -> list[ast.ClassDef]:
        """The class statements named ``name`` in the file."""
        self._ensure()
        return list(self._classes.get(name, ()))

    def members(self, klass: ast.ClassDef) -> dict[str, list[ast.AST]]:
        """``name -> defs`` of the class body of ``klass`` (methods and properties, ``if`` branches included)."""
        self._ensure()
        return self._members.get(id(klass), {})

    def bases(self, klass: ast.ClassDef) -> list[ast.ClassDef | None]:
        """The classes of ``klass``'s MRO after itself, depth-first, left to right, each once: a class
        of the file, or ``None`` where a base is not a (single) class of the file (a library class,
        an import, an expression): what it defines is unknown."""
        self._ensure()
        order: list[ast.ClassDef | None] = []
        seen = {id(klass)}
        stack = list(reversed(klass.bases))
        while stack:
            base = stack.pop()
            if isinstance(base, ast.Name) and base.id == "object":
                continue
            found = self._classes.get(base.id) if isinstance(base, ast.Name) else None
            if not found or len(found) != 1:
                order.append(None)
                continue
            cls = found[0]
            if id(cls) in seen:
                continue
            seen.add(id(cls))
            order.append(cls)
            stack.extend(reversed(cls.bases))
        return order

    def subclasses(self, klass: ast.ClassDef) -> list[ast.ClassDef]:
        """The classes of the file that inherit from ``klass`` (through classes of the file)."""
        self._ensure()
        if self._subclasses is None:
            table: dict[int, list[ast.ClassDef]] = {}
            for statements in self._classes.values():
                for cls in statements:
                    for base in self.bases(cls):
                        if base is not None:
                            table.setdefault(id(base), []).append(cls)
            self._subclasses = table
        return list(self._subclasses.get(id(klass), ()))

    # ------------------------------------------------------------------ resolution
    def resolve_call(self, call: ast.Call, scope: ast.AST | None) -> Resolution:
        """The ``def`` statements a call may run (see the module docstring for the policy).
        ``scope``: the function (or lambda) holding the call, ``None`` at module level."""
        func = call.func
        if isinstance(func, ast.Name):
            return self.resolve_name(func.id, scope)
        if isinstance(func, ast.Attribute):
            return self._resolve_member(func, scope, prop=False)
        return NOTHING

    def resolve_attribute(self, attr: ast.Attribute, scope: ast.AST | None) -> Resolution:
        """The ``@property`` definitions that reading ``attr`` runs (same policy as for calls)."""
        return self._resolve_member(attr, scope, prop=True)

    def resolve_name(self, name: str, scope: ast.AST | None) -> Resolution:
        """The ``def`` statements the name ``name`` denotes in ``scope`` (innermost function binding
        it, else the module); nothing when that scope binds it by anything but ``def``."""
        self._ensure()
        node = scope
        while node is not None:
            if isinstance(node, (*FunctionNode, ast.Lambda)):
                defs = self._scope_defs.get(id(node), {}).get(name)
                if defs or name in self._scope_other.get(id(node), ()):
                    return Resolution(tuple(defs), True) if defs and name not in self._scope_other[id(node)] else NOTHING
            node = self._parent.get(id(node))
            while isinstance(node, ast.ClassDef):  # class bodies are not enclosing scopes of functions
                node = self._parent.get(id(node))
        defs = self._scope_defs.get(id(self.tree), {}).get(name)
        if not defs or name in self._scope_other.get(id(self.tree), ()):
            return NOTHING
        return Resolution(tuple(defs), True)

    def external(self, func: ast.AST, scope: ast.AST | None) -> ExternalRef | None:
        """What the called expression ``func`` (``helper``, ``util.helper``, ``pkg.util.helper``)
        denotes when its first name is bound by an import (and by nothing else) in the innermost
        scope binding it, seen from ``scope`` (the function holding the call, ``None`` at module
        level), else ``None``: a name bound by ``def``, an assignment or a parameter, or by two
        different imports, or a receiver that is not a plain name chain (``self.helper``)."""
        self._ensure()
        parts: list[str] = []
        node = func
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        name, attrs = node.id, tuple(reversed(parts))
        where: ast.AST | None = scope
        while True:
            key = id(where) if where is not None else id(self.tree)
            bindings = self._imports.get(key, {}).get(name)
            bound = name in self._scope_other.get(key, ()) or name in self._scope_defs.get(key, {})
            if bindings or bound:
                if not bindings or name in self._scope_defs.get(key, {}) or len(set(bindings)) != 1 \
                        or self._bound_otherwise(name, key):
                    return None
                ref = bindings[0]
                return ExternalRef(ref.module, ref.level, ref.attrs + attrs)
            if where is None:
                return None
            where = self._parent.get(id(where))
            while isinstance(where, ast.ClassDef):
                where = self._parent.get(id(where))

    def _bound_otherwise(self, name: str, scope_key: int) -> bool:
        """True when ``name`` is bound in the scope ``scope_key`` by a statement other than an import
        (an assignment, a loop target, ``global``, a parameter): the import is then not what it holds."""
        node = self._scope_nodes.get(scope_key)
        if node is None:
            return True
        if isinstance(node, (*FunctionNode, ast.Lambda)):
            args = node.args
            if name in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)} | {
                    a.arg for a in (args.vararg, args.kwarg) if a is not None}:
                return True
        for stmt in walk_function_body(node) if node is not self.tree else _module_statements(self.tree):
            kind = stmt.__class__
            if kind is ast.Assign and any(name in names_in_target(t) for t in stmt.targets):
                return True
            if kind in (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor) and name in names_in_target(stmt.target):
                return True
            if kind in (ast.Global, ast.Nonlocal) and name in stmt.names:
                return True
            if kind is ast.withitem and stmt.optional_vars is not None and name in names_in_target(stmt.optional_vars):
                return True
        return False

    def _resolve_member(self, attr: ast.Attribute, scope: ast.AST | None, prop: bool) -> Resolution:
        self._ensure()
        receiver = attr.value
        klass: ast.ClassDef | None = None
        dispatch = False
        if isinstance(receiver, ast.Name):
            if receiver.id in ("self", "cls") and scope is not None:
                klass = self.enclosing_class(scope)
                dispatch = True
            elif receiver.id not in ("self", "cls"):
                found = self._classes.get(receiver.id)
                if found and len(found) == 1 and not self._bound_locally(receiver.id, scope):
                    klass = found[0]
        if klass is None:
            by_name = [d for d in self._by_name.get(attr.attr, ()) if self._owner.get(id(d)) is not None
                       and not _accessor(d)]
            if not by_name or any(is_property(d) != prop for d in by_name):
                return NOTHING
            return Resolution(tuple(by_name), False)
        return self.lookup(klass, attr.attr, prop, dispatch)

    def lookup(self, klass: ast.ClassDef, name: str, prop: bool, dispatch: bool = True) -> Resolution:
        """``name`` looked up on ``klass`` (methods when ``prop`` is False, property getters when
        True): the first definition along its MRO through the classes of the file, plus, with
        ``dispatch`` (a ``self``/``cls`` receiver), the overrides in the file's subclasses of
        ``klass``. Incomplete when a base that is not a class of the file comes before the
        definition in the MRO (it may define ``name`` first), or when none is found."""
        found: list[ast.AST] = []
        complete = True
        for cls in (klass, *self.bases(klass)):
            if cls is None:
                complete = False
                continue
            defs = [d for d in self.members(cls).get(name, ()) if not _accessor(d)]
            if defs:
                found = defs
                break
        if dispatch and found:
            for sub in self.subclasses(klass):
                found.extend(d for d in self.members(sub).get(name, ()) if not _accessor(d) and d not in found)
        if not found or any(is_property(d) != prop for d in found):
            return NOTHING
        return Resolution(tuple(found), complete)

    def _bound_locally(self, name: str, scope: ast.AST | None) -> bool:
        node = scope
        while node is not None:
            if name in self._scope_other.get(id(node), ()) or name in self._scope_defs.get(id(node), {}):
                return isinstance(node, (*FunctionNode, ast.Lambda))
            node = self._parent.get(id(node))
        return False

    # ------------------------------------------------------------------ bindings
    def aliases(self) -> dict[str, str | None]:
        """Names bound anywhere in the file to another name: ``from m import f as g`` (``g -> f``),
        ``g = f``, ``g = m.f`` (``g -> f``); ``None``: bound to anything else too (a ``lambda``, a
        call), or to several names. Where a call reads them is not tracked."""
        if self._aliases is None:
            aliases: dict[str, str | None] = {}

            def bind(name: str, target: str | None) -> None:
                if name != target:
                    aliases[name] = None if name in aliases and aliases[name] != target else target

            for node in ast.walk(self.tree):
                if node.__class__ is ast.ImportFrom:
                    for alias in node.names:
                        if alias.asname:
                            bind(alias.asname, alias.name)
                elif node.__class__ is ast.Assign and len(node.targets) == 1 and node.targets[0].__class__ is ast.Name:
                    value = node.value
                    bind(node.targets[0].id, last_name(value) if value.__class__ in (ast.Name, ast.Attribute) else None)
            self._aliases = aliases
        return self._aliases

    @staticmethod
    def returns(func: ast.AST) -> list[ast.AST | None]:
        """The values of the ``return`` statements of ``func`` (``None`` for a bare ``return``; a
        lambda: its body), nested functions and classes left out; ``[]`` for a generator (what a call
        gives is then a generator object, not a returned value)."""
        if isinstance(func, ast.Lambda):
            return [func.body]
        values: list[ast.AST | None] = []
        for node in walk_function_body(func):
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                return []
            if isinstance(node, ast.Return):
                values.append(node.value)
        return values

    def module_definitions(self, name: str) -> Resolution:
        """The module-level ``def`` statements of ``name`` (what ``from <this module> import name``
        gives), complete when nothing else binds ``name`` at module level."""
        return self.resolve_name(name, None)

    def module_import(self, name: str) -> ExternalRef | None:
        """The import that binds ``name`` at module level (a re-export: ``from .impl import helper`` in
        a package's ``__init__.py``), when that is its only binding there, else ``None``."""
        return self.external(ast.Name(id=name), None)

    def walk_definitions(self) -> Iterator[ast.AST]:
        """Every ``def`` and ``class`` of the file, in source order."""
        self._ensure()
        nodes = [d for defs in self._by_name.values() for d in defs]
        nodes += [c for classes in self._classes.values() for c in classes]
        return iter(sorted(nodes, key=lambda d: (d.lineno, d.col_offset)))
