"""The cross-file class index of one project, used by E9503 (``undefined-method-call``).

Every ``.py`` file under the project root is reduced by :func:`summarize` to a small, plain-data
:class:`FileSummary` (module name, import map, and per class: qualified base names, the member
names it defines or assigns, flags). Summaries hold only tuples, frozensets and interned strings,
never ``ast`` nodes, so the whole installed torch package indexes in a few tens of MiB.

:class:`ClassIndex` answers the questions of E9503: which class a qualified name denotes (a
project class, an entry of the bundled framework catalog ``data/framework_members.json``, or
unknown), the ancestors of a class (and whether all are known), and the project subclasses of a
class. The summaries are E9503's :class:`~hp_invariants.api.ProjectFacts`
(:class:`ClassIndexFacts`): the engine's :class:`~hp_invariants.project.Project` walks, parses,
caches and builds them; nothing outside this rule knows what they hold.
"""

from __future__ import annotations

import ast
import builtins
import errno
import json
import os
import sys
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import Iterable, NamedTuple, Optional, Sequence

from hp_invariants import catalog as framework_catalog
from hp_invariants.astutil import (_CHILD_FIELDS, _HOLEY, child_bodies, child_nodes, dotted_name, names_in_target,
                                   string_value, walk_nodes, walk_nodes_pruned)
from hp_invariants.api import KeyedTable, ListTable, Plain
from hp_invariants.catalog import CatalogEntry
from hp_invariants.declarations import ClassIndexFactsDeclaration

UNKNOWN = "?"
"""A base expression that cannot be named statically (``namedtuple(...)``, a local variable)."""

_BUILTIN_CLASSES = frozenset(n for n, v in vars(builtins).items() if isinstance(v, type))
_ABC_NAMES = frozenset({"abc.ABC", "abc.ABCMeta"})
_ABSTRACT_DECORATORS = frozenset({"abstractmethod", "abstractproperty", "abstractclassmethod",
                                  "abstractstaticmethod"})
_ASSIGN_CALLS = frozenset({"add_module", "register_module", "register_buffer", "register_parameter",
                           "insert_param_to_cell", "insert_child_to_cell"})
_DYNAMIC_MEMBERS = frozenset({"__getattr__", "__getattribute__"})
VALUE_USE = "&"
"""Prefix of a ``FileSummary.constructed`` entry for a class passed on as a value (not called)."""
_NOT_USES = frozenset({"isinstance", "issubclass", "super", "type", "hasattr", "getattr", "cast",
                        "TypeVar", "NewType"})
"""Calls whose class arguments are inspected, not used to build instances (see ``FileSummary.constructed``)."""
FACTORY_METHODS = frozenset({"from_pretrained", "from_config", "_from_config", "from_dict", "from_float",
                             "from_observed", "from_module", "create", "build"})
"""``Cls.<factory>(...)`` counts as constructing ``Cls`` (see :meth:`ClassIndex.used`)."""


class ClassSummary(NamedTuple):
    """What the index keeps of one class statement.

    ``qualname``: dotted path inside the module (``Outer.Inner``; ``f.<locals>.C`` for a class in a
    function); ``bases``: qualified dotted names of the base expressions (``UNKNOWN`` where not
    nameable); ``metaclass``: qualified name or ``""``; ``members``: every name the class defines
    or assigns (methods, class attributes, nested classes, ``self.x = ...``, constant ``setattr``
    and ``add_module``/``register_*`` names); ``dynamic``: attributes may appear that the source
    does not name (``__getattr__``, ``setattr(self, name, ...)`` with a computed name,
    ``self.__dict__`` updates, ``exec``/``locals()`` in the body); ``abstract``: has an
    ``@abstractmethod`` or an ``ABC``/``ABCMeta`` base; ``decorators``: qualified names of the
    class decorators; ``abstracts``: names of its own ``@abstractmethod`` members (a subclass
    that defines them all, without listing ``ABC`` itself, is concrete).

    What E9503's check of this class may ask about, recorded so that the check can tell from the
    index alone that a file holds nothing to report (and skip parsing it: see
    ``UndefinedMethodCall.check``); each a superset of what the check reads, in the methods it
    checks (neither static methods nor functions whose unannotated first parameter has a name
    outside ``RECEIVER_NAMES``, called through the class): ``used``: names read on the first
    parameter (``self.m``, ``getattr(self, "m")``); ``super_used``: names read on ``super()``;
    ``attr_uses``: ``(qualified constructor, name)`` for ``self.a.name`` where ``__init__`` assigns
    ``self.a`` from that constructor call.

    ``falsy``: the members that every assignment of the class sets to a falsy constant (``False``,
    ``None``, ``0``, ``""``, an empty display): class-body ``flag = False`` and ``self.flag = False``
    in its methods, nothing else (an annotated class-body field may be set by a generated
    constructor, a parameter or any other value may be truthy). A branch that needs such a flag
    truthy is not reached on the class's own instances (see ``UndefinedMethodCall``).

    ``tags``: ``(member, value)`` for the members that every assignment of the class sets to one and
    the same literal constant (a class-level tag such as ``kind = "fused"`` or ``self.mode = 2``;
    ``value``: its ``repr``). A branch that needs the tag to equal a value that only the classes
    defining a member set is not reached on the others (see ``UndefinedMethodCall``).
    """

    qualname: str
    lineno: int
    bases: tuple[str, ...]
    metaclass: str
    members: frozenset[str]
    dynamic: bool
    abstract: bool
    decorators: tuple[str, ...]
    abstracts: frozenset[str] = frozenset()
    used: frozenset[str] = frozenset()
    super_used: frozenset[str] = frozenset()
    attr_uses: tuple[tuple[str, str], ...] = ()
    falsy: frozenset[str] = frozenset()
    tags: tuple[tuple[str, str], ...] = ()


class FileSummary(NamedTuple):
    """What the index keeps of one file.

    ``imports`` maps a module-level name to the qualified name it denotes (``""`` when bound in
    several conflicting ways); ``star``: modules imported with ``*``; ``constructed``: names that
    are used as classes that may be instantiated somewhere in the file: called (``Foo(...)``,
    ``mod.Foo(...)``, ``Foo.from_pretrained(...)`` and the other :data:`FACTORY_METHODS`) or passed
    on as a value (an argument, an assigned, returned or registered value, a branch of a
    conditional expression: ``X = A if c else B``, ``{"a": A}``, ``register(A)``); not
    ``isinstance``/``issubclass`` arguments, bases or annotations. Each is the qualified name
    (``pkg.mod.Foo``) where the file's imports name it, else ``?Foo`` (a function-local import, an
    attribute of a local); capitalized names and the names of classes defined in the file are
    kept; a class passed on as a value is prefixed with :data:`VALUE_USE` (``&pkg.mod.Foo``). Used
    to tell mixins and bases from instantiated classes (see :meth:`ClassIndex.used`); ``patched``: ``(qualified class, attr)``
    pairs assigned from outside the class (``Foo.attr = ...``, ``setattr(Foo, "attr", ...)``), and
    by a class decorator of the same file that assigns onto its parameter (``cls.attr = ...``); a
    module-level function that assigns onto its first parameter (or a nested function's, for a
    decorator factory) also records ``("<module>.<function>()", attr)`` pairs, so that a class
    decorated with it from another file is known to gain members (``*``: computed names). See
    :func:`decorator_adds` and :meth:`ClassIndex.decorator_adds`. ``stores``: ``(class, attr)``
    for each attribute stored on a receiver other than a class, a module or the method's own
    ``self`` (``module.fn = ...`` in a walk over submodules, ``callback.log = ...``, a helper's
    ``encoder.model = ...``, ``self.child.attr = ...``): ``class`` is the qualified class the
    receiver is bound to when every binding of that name in the file is a constructor call or an
    annotation (``self.child`` built by one constructor in ``__init__``), else ``""`` (unknown:
    may be an instance of any class). Computed names on unknown receivers are not recorded.
    ``param_calls``: ``(qualified annotation, name)`` for each call ``p.name(...)`` where a parameter
    ``p`` of some function of the file is annotated with a class name (a superset of what E9503's
    check of annotated parameters asks about; see :class:`ClassSummary`). ``flag_sets``: attribute
    names stored on any receiver other than a method's own ``self``/``cls`` (``module.flag = enable``,
    ``self.child.flag = True``, ``setattr(m, "flag", v)``) with a value that is not a falsy
    constant: they may switch a flag on in instances of any class. ``swapped``: qualified names of
    the classes assigned to an object's ``__class__`` (``obj.__class__ = C``): C's instances then
    carry what the original object held, members C does not define.
    ``stores`` leaves out stores of values that cannot be called (a literal, a container display, a
    comprehension, an f-string, a comparison): they define data, not a method E9503 could miss.
    ``private_refs``: the private names (``_x``, not ``__x__``) the file reads, as a name, an
    attribute or a string (``getattr(self, "_x")``, a handler table; a string ending in ``_`` stands
    for every name it begins: ``f"_on_{event}"``), outside the bodies of private functions;
    ``private_defs``: per private function in source order (``def _f``, a method or not, innermost),
    the private names read in its body other than its own (a recursion or ``super()._f()`` call
    does not call it from elsewhere). ``private_self``: ``(name, class, function)`` for each private
    name read on a method's own instance (``self._x``, ``cls._x``, ``super()._x``) in ``class`` (qualified name),
    ``function`` being the innermost private function holding the read (``""``: none); such a read
    can only reach the ``_x`` of a class related to that one, so it is kept apart from
    ``private_refs`` (still in ``private_defs``). See :meth:`ClassIndex.private_live`. ``required``: the qualified targets of
    the module's unconditional top-level imports (``pkg.mod.name`` for ``from pkg.mod import name``,
    ``pkg.mod`` for ``import pkg.mod``): what must exist for the module to import at all (see
    :meth:`ClassIndex.unimportable`). ``late_names``: names bound by ``global`` statements, ``:=`` and
    match captures anywhere in the file (they may bind a module-level name); ``dynamic_globals``: the
    file calls ``globals``/``vars``/``locals``/``exec``/``eval`` or reads ``sys.modules``, so it may bind
    any name in its own namespace. Both keep an import of such a name from counting as one that fails.
    """

    module: str
    is_package: bool
    imports: dict[str, str]
    star: tuple[str, ...]
    classes: tuple[ClassSummary, ...]
    constructed: frozenset[str]
    patched: tuple[tuple[str, str], ...]
    stores: tuple[tuple[str, str], ...] = ()
    param_calls: tuple[tuple[str, str], ...] = ()
    flag_sets: frozenset[str] = frozenset()
    swapped: tuple[str, ...] = ()
    private_refs: frozenset[str] = frozenset()
    private_defs: tuple[tuple[str, frozenset[str]], ...] = ()
    required: tuple[str, ...] = ()
    private_self: tuple[tuple[str, str, str], ...] = ()
    late_names: frozenset[str] = frozenset()
    dynamic_globals: bool = False


RECEIVER_NAMES = frozenset({"self", "cls", "mcs", "mcls", "metacls", "klass", "_self", "self_"})
"""First-parameter names taken as the instance (or class): a function in a class body whose
unannotated first parameter has another name is called through the class (``Cls.f(x)``)."""


# ---------------------------------------------------------------------- module names
def module_name(path: str | os.PathLike[str]) -> tuple[str, bool]:
    """Return ``(dotted module name, is_package)`` of a file.

    Walks up through folders holding ``__init__.py``; a file outside any package is named by its
    stem (as when its folder is on ``sys.path``). String operations and one ``stat`` per folder
    (it runs for every file, twice in a cold check): the same answers as ``pathlib``'s ``stem``
    and ``exists`` (which raises on errors other than a missing path, as :func:`_exists` does).
    """
    p = os.path.abspath(path)
    folder, name = os.path.split(p)
    dot = name.rfind(".")
    stem = name[:dot] if 0 < dot < len(name) - 1 else name
    is_package = stem == "__init__"
    parts = [] if is_package else [stem]
    while _exists(os.path.join(folder, "__init__.py")):
        parent, base = os.path.split(folder)
        parts.append(base)
        if parent == folder:
            break
        folder = parent
    if not parts:  # an __init__.py whose folder is not a package (cannot happen) / odd names
        parts = [os.path.basename(os.path.dirname(p)) or stem]
    return ".".join(reversed(parts)), is_package


_MISSING_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})
"""The ``stat`` errors that mean "no such file" to ``pathlib.Path.exists`` (others raise)."""


def _exists(path: str) -> bool:
    """``pathlib.Path(path).exists()`` without building a ``Path``."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno in _MISSING_ERRNOS:
            return False
        raise
    except ValueError:  # an embedded NUL
        return False
    return True


# ---------------------------------------------------------------------- summarizer
def _intern(name: str) -> str:
    return sys.intern(name)


class _Summarizer:
    """One pass over a module's ``ast`` building its :class:`FileSummary` (see :func:`summarize`)."""

    def __init__(self, module: str, is_package: bool, nodes: dict[str, ast.ClassDef] | None,
                 functions: list | None = None):
        self.functions = functions
        self.module = module
        self.is_package = is_package
        self.nodes = nodes
        self.bindings: dict[str, set[str]] = {}
        self.star: list[str] = []
        self.raw_classes: list[tuple[str, ast.ClassDef]] = []
        self.module_classes: set[str] = set()
        self.aliases: dict[str, str] = {}
        self.class_stores: list[tuple[str, str]] = []

    # -- imports
    def _package(self, level: int) -> str:
        parts = self.module.split(".")
        if not self.is_package:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
        return ".".join(parts)

    def import_target(self, node: ast.ImportFrom) -> str:
        """Return the absolute module named by a (possibly relative) ``from`` import."""
        if node.level:
            base = self._package(node.level)
            return f"{base}.{node.module}" if node.module and base else (node.module or base)
        return node.module or ""

    def bind(self, name: str, target: str) -> None:
        self.bindings.setdefault(name, set()).add(target)

    def module_scope(self, body: Iterable[ast.stmt], prefix: str, in_function: bool) -> None:
        """Record bindings of a module-level statement list (recursing into if/try/with/loops)."""
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                qual = f"{prefix}{stmt.name}"
                self.raw_classes.append((qual, stmt))
                if not prefix:
                    self.module_classes.add(stmt.name)
                    self.bind(stmt.name, f"{self.module}.{stmt.name}")
                self.class_scope(stmt.body, qual + ".")
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if self.functions is not None:
                    self.functions.append(stmt)
                if not prefix and not in_function:
                    self.bind(stmt.name, f"{self.module}.{stmt.name}")
                self.function_scope(stmt, f"{prefix}{stmt.name}.<locals>.")
            elif in_function:
                continue
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        self.bind(alias.asname, alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        self.bind(top, top)
            elif isinstance(stmt, ast.ImportFrom):
                mod = self.import_target(stmt)
                for alias in stmt.names:
                    if alias.name == "*":
                        self.star.append(mod)
                    else:
                        self.bind(alias.asname or alias.name, f"{mod}.{alias.name}" if mod else alias.name)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                value = stmt.value
                for target in targets:
                    for name_node in names_in_target(target):
                        alias = dotted_name(value) if (value is not None and isinstance(target, ast.Name)
                                                       and not isinstance(stmt, ast.AugAssign)) else None
                        self.bind(name_node, "=" + alias if alias else UNKNOWN)
            else:
                for field_body in child_bodies(stmt):
                    self.module_scope(field_body, prefix, in_function)
                for name_node in _bound_names(stmt):
                    self.bind(name_node, UNKNOWN)

    def function_scope(self, func: ast.AST, prefix: str) -> None:
        """Find classes defined inside a function (indexed as ``f.<locals>.C``)."""
        self.module_scope(getattr(func, "body", []), prefix, in_function=True)

    def class_scope(self, body: Iterable[ast.stmt], prefix: str) -> None:
        """Find nested classes (and classes in methods) of a class body."""
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                qual = f"{prefix}{stmt.name}"
                self.raw_classes.append((qual, stmt))
                self.class_scope(stmt.body, qual + ".")
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if self.functions is not None:
                    self.functions.append(stmt)
                self.function_scope(stmt, f"{prefix}{stmt.name}.<locals>.")
            else:
                for field_body in child_bodies(stmt):
                    self.class_scope(field_body, prefix)

    # -- names
    def build_imports(self) -> dict[str, str]:
        """Turn the bindings into ``name -> qualified`` (aliases ``A = b.C`` resolved one level)."""
        out: dict[str, str] = {}
        for name, targets in self.bindings.items():
            if len(targets) != 1:
                out[_intern(name)] = ""
                continue
            (target,) = targets
            if target.startswith("="):
                first, _, rest = target[1:].partition(".")
                base = self.bindings.get(first)
                if first == name or base is None or len(base) != 1:
                    target = UNKNOWN if base is not None or first not in _BUILTIN_CLASSES else f"builtins.{target[1:]}"
                else:
                    (resolved,) = base
                    target = UNKNOWN if resolved.startswith("=") or resolved == UNKNOWN else (
                        f"{resolved}.{rest}" if rest else resolved)
            out[_intern(name)] = "" if target == UNKNOWN else _intern(target)
        return out

    def qualify(self, node: ast.AST | None, imports: dict[str, str]) -> str:
        """Qualified dotted name of a base/decorator/annotation expression, or ``UNKNOWN``."""
        return qualify(node, imports)

    # -- classes
    def chain_stores(self, chains: list, imports: dict[str, str]) -> None:
        """Record the stores on ``self.child`` of one class as ``(class of child or "", attr)``:
        typed when ``child`` is bound in ``__init__`` by one constructor call of a class only."""
        ctors: dict[str, set[str]] = {}
        for child, value in chains:
            if child.startswith("="):
                ctors.setdefault(child[1:], set()).add(qualify(value, imports))
        for child, attr in chains:
            if child.startswith("="):
                continue
            types = ctors.get(child)
            if types is not None and len(types) == 1 and UNKNOWN not in types and \
                    next(iter(types)).rsplit(".", 1)[-1].lstrip("_")[:1].isupper():
                self.class_stores.append((_intern(next(iter(types))), _intern(attr)))
            else:
                self.class_stores.append(("", _intern(attr)))

    def class_summary(self, qual: str, node: ast.ClassDef, imports: dict[str, str],
                      walked: _MethodWalks | None = None) -> ClassSummary:
        """The :class:`ClassSummary` of the class ``node`` (``walked``: see :func:`class_members`)."""
        bases = tuple(_intern(_base_name(b, imports)) for b in node.bases)
        metaclass = ""
        dynamic = False
        for kw in node.keywords:
            if kw.arg == "metaclass":
                metaclass = self.qualify(kw.value, imports)
            elif kw.arg is None:
                bases += (UNKNOWN,)  # class C(**kwargs): cannot tell
        decorators = tuple(_intern(self.qualify(d.func if isinstance(d, ast.Call) else d, imports))
                           for d in node.decorator_list)
        chains: list = []
        seen = _Uses()
        members, body_dynamic, abstracts = class_members(node, chains, seen, walked)
        if chains:
            self.chain_stores(chains, imports)
        attr_uses: set[tuple[str, str]] = set()
        for attr, name in seen.attrs:
            for ctor in seen.ctors.get(attr, ()):
                ctor_name = qualify(ctor, imports)
                if ctor_name != UNKNOWN:
                    attr_uses.add((_intern(ctor_name), _intern(name)))
        dynamic = body_dynamic or bool(members & _DYNAMIC_MEMBERS)
        abstract = bool(abstracts) or metaclass in _ABC_NAMES or any(b in _ABC_NAMES for b in bases)
        if self.nodes is not None:
            self.nodes[qual] = node
        return ClassSummary(_intern(qual), node.lineno, bases, _intern(metaclass),
                            frozenset(_intern(m) for m in members), dynamic, abstract, decorators,
                            frozenset(_intern(m) for m in abstracts), frozenset(map(_intern, seen.names)),
                            frozenset(map(_intern, seen.supers)), tuple(sorted(attr_uses)),
                            frozenset(map(_intern, seen.falsy_only())), seen.tags())

    def run(self, tree: ast.Module) -> FileSummary:
        self.module_scope(tree.body, "", in_function=False)
        imports = self.build_imports()
        walked = _MethodWalks()  # each method's nodes, walked once (by class_members)
        classes = tuple(self.class_summary(q, n, imports, walked) for q, n in self.raw_classes)
        uses: set[str] = set()
        local_classes = {q.rsplit(".", 1)[-1] for q, _ in self.raw_classes}
        patched: set[tuple[str, str]] = set()
        stores: set[tuple[str, str]] = set(self.class_stores)
        receivers: list[tuple[str, str]] = []  # (receiver name, attr) of stores on plain names
        typed: dict[str, set[str]] = {}  # name -> classes it is bound to (constructor call, annotation)
        untyped: set[str] = set()
        skip: set[int] = set()  # ids of nodes not to read as uses / bindings
        called: set[str] = set()  # last names of every callee (Name ids and attribute names)
        aliases: list[tuple[str, ast.AST]] = []  # X = A / self.x = A: A is used when X is called
        arguments: list[ast.arg] = []  # every parameter (its annotation may type a receiver)
        marks: list[tuple[int, str]] = []  # (line, name) of what a class decorator's assignments need
        first_params: set[str] = set()  # the first parameter of every function and lambda (see decorator_adds)
        name_calls: set[tuple[str, str]] = set()  # (receiver name, method) of each call name.method(...)
        flag_sets: set[str] = set()
        swapped: set[str] = set()
        inert: set[int] = set()  # store targets of a value that is not callable (not a method definition)
        falsy: set[int] = set()  # store targets of a falsy constant (switch no flag on)

        Name, Attribute, Call, Load, Store, Constant = ast.Name, ast.Attribute, ast.Call, ast.Load, ast.Store, ast.Constant
        Assign, Arg, Return, IfExp, Dict = ast.Assign, ast.arg, ast.Return, ast.IfExp, ast.Dict
        sequences = (ast.Tuple, ast.List, ast.Set)
        Arguments = ast.arguments
        AnnAssign = ast.AnnAssign
        handled = frozenset({Assign, Arg, Return, IfExp, Dict, ast.Subscript, Arguments, AnnAssign, ast.ClassDef,
                             *sequences})

        def simple_class_name(expr: ast.AST) -> str | None:  # a capitalized or local class name, else None
            kind = expr.__class__
            simple = expr.id if kind is Name else expr.attr if kind is Attribute else None
            if simple is None or not (simple.lstrip("_")[:1].isupper() or simple in local_classes):
                return None
            return simple

        def use(node: ast.AST, value: bool = True) -> None:
            simple = simple_class_name(node)
            if simple is None:
                return
            qual = qualify(node, imports)
            qual = qual if qual != UNKNOWN else UNKNOWN + simple
            uses.add(_intern(VALUE_USE + qual if value else qual))

        refs: list[tuple[str, int]] = []  # (private name read, line)
        late: set[str] = set()  # names bound by `global`, `:=` or a match capture (may be module-level)
        dynamic_globals = False  # globals()/vars()/locals()/exec/sys.modules: any module name may be bound
        self_refs: list[tuple[str, int]] = []  # (private name read on self/cls/super(), line)
        own_defs: list[ast.AST] = []
        # every node of the tree once, parents before children: those outside the methods, then each
        # method's (breadth-first in each part)
        for node in chain(_nodes_outside_methods(tree, walked), *walked.nodes):
            kind = node.__class__
            if kind is Name:  # the most frequent kind first (a third of all nodes)
                if node.ctx.__class__ is not Load:
                    if id(node) not in skip:
                        untyped.add(node.id)
                elif node.id[:1] == "_":
                    refs.append((node.id, node.lineno))
            elif kind is Constant:  # the second most frequent kind
                text = node.value
                if text.__class__ is str and text[:1] == "_" and len(text) < 80:
                    refs.append((text, node.lineno))
            elif kind is Call:
                func = node.func
                name = func.id if func.__class__ is Name else func.attr if func.__class__ is Attribute else None
                if name in _DYNAMIC_GLOBALS and func.__class__ is Name:
                    dynamic_globals = True
                if name is not None and (name.lstrip("_")[:1].isupper() or name in local_classes):
                    use(func, False)  # simple_class_name(func), inline: use() is rarely needed
                called.add(name)
                if func.__class__ is Attribute and func.value.__class__ is Name:
                    name_calls.add((func.value.id, name))
                if name == "setattr" and node.args and node.args[0].__class__ is Name:
                    marks.append((node.lineno, node.args[0].id))
                if name in FACTORY_METHODS and func.__class__ is Attribute:
                    use(func.value, False)  # Model.from_pretrained(...) builds a Model
                if name in _NOT_USES:
                    skip.update(id(a) for a in node.args)
                else:
                    for arg in chain(node.args, [kw.value for kw in node.keywords]) if node.keywords else node.args:
                        arg_kind = arg.__class__  # simple_class_name(arg), inline (most arguments are not)
                        simple = arg.id if arg_kind is Name else arg.attr if arg_kind is Attribute else None
                        if simple is not None and (simple.lstrip("_")[:1].isupper() or simple in local_classes):
                            use(arg)
                if name == "setattr" and (func.__class__ is Name or func.value.__class__ is Name
                                          and func.value.id == "builtins") and len(node.args) >= 2:  # is_setattr
                    attr_name = string_value(node.args[1])
                    if attr_name and not (node.args[0].__class__ is Name and node.args[0].id in ("self", "cls")) \
                            and not (len(node.args) >= 3 and _falsy_constant(node.args[2])):
                        flag_sets.add(attr_name)
                    owner = dotted_name(node.args[0])
                    if not owner or owner.split(".")[0] not in ("self", "cls"):
                        attr = string_value(node.args[1])
                        qual = qualify(node.args[0], imports) if owner else UNKNOWN
                        if qual != UNKNOWN:
                            # a computed name (setattr(Cls, f"_{op}", fn) in a loop) makes the class dynamic
                            patched.add((_intern(qual), _intern(attr if attr else "*")))
                        elif attr and not (len(node.args) >= 3 and _not_callable(node.args[2])):
                            # on an instance of unknown class (computed names and data: not counted)
                            target = node.args[0]
                            if target.__class__ is ast.Name:
                                receivers.append((target.id, attr))
                            else:
                                stores.add(("", _intern(attr)))
            elif kind is Attribute:
                value = node.value
                if node.attr == "modules" and value.__class__ is Name and value.id == "sys":
                    dynamic_globals = True  # sys.modules[__name__]: the module object itself
                if node.ctx.__class__ is not Store:
                    if node.attr == "__dict__" and value.__class__ is Name:
                        marks.append((node.lineno, value.id))
                    elif node.attr[:1] == "_":
                        if value.__class__ is Name and (value.id == "self" or value.id == "cls") or \
                                value.__class__ is Call and value.func.__class__ is Name and value.func.id == "super":
                            self_refs.append((node.attr, node.lineno))
                        else:
                            refs.append((node.attr, node.lineno))
                    continue
                if value.__class__ is Name:
                    marks.append((node.lineno, value.id))
                if id(node) not in falsy and not (value.__class__ is Name and value.id in ("self", "cls")) \
                        and not (node.attr.startswith("__") and node.attr.endswith("__")):
                    flag_sets.add(node.attr)
                owner = dotted_name(value)
                if owner and owner.split(".")[0] in ("self", "cls"):
                    continue  # the class's own members (see class_members)
                qual = qualify(value, imports) if owner else UNKNOWN
                if id(node) in inert and qual == UNKNOWN or node.attr == "__class__":
                    # data stored on an object (x.count = 0): it defines no method; see swapped. A
                    # module-level name (Config.flag = 0) may be a class: that defines an attribute
                    continue
                if qual != UNKNOWN:
                    patched.add((_intern(qual), _intern(node.attr)))
                elif value.__class__ is ast.Name:
                    receivers.append((value.id, node.attr))
                else:  # x.y.attr = ..., xs[0].attr = ..., f().attr = ...: an instance of unknown class
                    stores.add(("", _intern(node.attr)))
            elif kind not in handled:  # keyword, Expr, BinOp ...: little to record
                if kind in _LATE_BINDINGS:  # names a module may bind outside its plain statements
                    if kind is ast.Global:
                        late.update(node.names)
                    elif kind is ast.NamedExpr:
                        if node.target.__class__ is Name:
                            late.add(node.target.id)
                    elif kind is ast.MatchMapping:
                        if node.rest:
                            late.add(node.rest)
                    elif node.name:  # MatchAs, MatchStar
                        late.add(node.name)
                elif (kind is ast.FunctionDef or kind is ast.AsyncFunctionDef) and node.name[:1] == "_" \
                        and not (node.name.startswith("__") and node.name.endswith("__")):
                    own_defs.append(node)  # a dunder (__enter__, __call__) is called by Python itself
                continue
            elif kind is Assign or kind is AnnAssign:
                value = node.value
                targets = node.targets if kind is Assign else [node.target]
                if value is not None:
                    for target in targets:
                        if target.__class__ is Attribute:
                            if _falsy_constant(value):
                                falsy.add(id(target))
                            if _not_callable(value):
                                inert.add(id(target))
                            if target.attr == "__class__":
                                swapped_class = qualify(value, imports)
                                if swapped_class != UNKNOWN:
                                    swapped.add(_intern(swapped_class))
                if kind is AnnAssign:
                    continue
                if len(targets) == 1 and targets[0].__class__ is ast.Name and value.__class__ is ast.Call and (
                        # qualify's last component is the attribute's, or the imported/builtin name's:
                        # skip the lookup when it cannot be a class name
                        (value.func.attr.lstrip("_")[:1].isupper() if value.func.__class__ is Attribute else
                         value.func.id in imports or value.func.id.lstrip("_")[:1].isupper()
                         if value.func.__class__ is Name else True)):
                    qual = qualify(value.func, imports)
                    last = qual.rsplit(".", 1)[-1]
                    if qual != UNKNOWN and last.lstrip("_")[:1].isupper():
                        typed.setdefault(targets[0].id, set()).add(qual)
                        skip.add(id(targets[0]))
                if value.__class__ is ast.Name or value.__class__ is ast.Attribute:
                    for target in targets:
                        if target.__class__ is ast.Name:
                            aliases.append((target.id, value))
                        elif target.__class__ is ast.Attribute:
                            aliases.append((target.attr, value))
            elif kind is Arguments:
                params = node.posonlyargs or node.args
                if params:
                    first_params.add(params[0].arg)
            elif kind is Arg:
                arguments.append(node)  # typed or not: only asked for receivers of stores (below)
            elif kind is Return:
                value = node.value
                if value is not None:
                    use(value)
                    if value.__class__ is Call and value.func.__class__ is Name and value.func.id == "type":
                        marks.append((node.lineno, ""))  # a class built by type(...): see decorator_adds
            elif kind is ast.ClassDef:
                marks.append((node.lineno, ""))  # a class built inside a decorator: see decorator_adds
            elif kind is IfExp:
                use(node.body)
                use(node.orelse)
            elif kind is Dict:
                for value in node.values:
                    use(value)
            elif kind in sequences:
                if id(node) not in skip:
                    for elt in node.elts:
                        if simple_class_name(elt) is not None:
                            use(elt)
            elif kind is ast.Subscript:
                skip.add(id(node.slice))  # Union[A, B], Tuple[A, B]: annotations, not uses
        for name, value in aliases:  # an alias (re-export, class attribute) is a use only if called
            if name in called:
                use(value)
        receiver_names = {name for name, _ in receivers}
        for node in arguments if receiver_names else ():
            if node.arg not in receiver_names:
                continue
            ann = node.annotation
            qual = qualify(ann, imports) if ann is not None and ann.__class__ in (ast.Name, ast.Attribute) else UNKNOWN
            if qual == UNKNOWN:
                untyped.add(node.arg)
            else:
                typed.setdefault(node.arg, set()).add(qual)
        for name, attr in receivers:
            types = typed.get(name)
            if types is None or name in untyped:
                stores.add(("", _intern(attr)))
            else:
                stores.update((_intern(t), _intern(attr)) for t in types)
        # decorator_adds only reads stores on the first parameter of a function: marks on other names
        # need no walk
        _decorator_patches(tree, self.module, self.raw_classes, imports, patched,
                           [line for line, name in marks if not name or name in first_params])
        patched.discard(("?", ""))
        param_calls: set[tuple[str, str]] = set()
        if name_calls:
            methods_of: dict[str, list[str]] = {}
            for receiver, method in name_calls:
                methods_of.setdefault(receiver, []).append(method)
            for node in arguments:
                ann = node.annotation
                if ann is None or node.arg not in methods_of or ann.__class__ not in (Name, Attribute, ast.Constant):
                    continue
                qual = qualify(ann, imports)
                if qual != UNKNOWN:
                    param_calls.update((_intern(qual), _intern(m)) for m in methods_of[node.arg])
        own_defs.sort(key=_line)  # source order (an enclosing function first), whatever the walk's order
        return FileSummary(_intern(self.module), self.is_package, imports, tuple(self.star), classes,
                           frozenset(uses), tuple(sorted(p for p in patched if p[0] != UNKNOWN)),
                           tuple(sorted(stores)), tuple(sorted(param_calls)),
                           frozenset(map(_intern, flag_sets)), tuple(sorted(swapped)),
                           *_private_refs(refs, own_defs, self_refs, self.raw_classes, self.required(tree)),
                           frozenset(map(_intern, late)), dynamic_globals)

    def required(self, tree: ast.Module) -> tuple[str, ...]:
        """The targets of the unconditional top-level imports (see :class:`FileSummary`)."""
        found: list[str] = []
        for stmt in tree.body:
            if stmt.__class__ is ast.Import:
                found.extend(_intern(alias.name) for alias in stmt.names)
            elif stmt.__class__ is ast.ImportFrom:
                mod = self.import_target(stmt)
                if mod:
                    found.extend(_intern(f"{mod}.{alias.name}") for alias in stmt.names if alias.name != "*")
        return tuple(found)


_LATE_BINDINGS = frozenset({ast.Global, ast.NamedExpr, ast.MatchAs, ast.MatchStar, ast.MatchMapping})
"""Nodes that may bind a module-level name that the module's plain statements do not show."""
_DYNAMIC_GLOBALS = frozenset({"globals", "vars", "locals", "exec", "eval"})
"""Calls through which a module may bind any name in its own namespace."""


def _is_prefix(text: str) -> bool:
    """A string read as the start of names built at run time (``"_on_"`` in ``f"_on_{event}"``): it
    ends in ``_`` and holds a letter (``"_"`` alone is a separator: ``"_".join``, ``split("_")``)."""
    return text.endswith("_") and any(c.isalpha() for c in text)


def _private_refs(refs: list[tuple[str, int]], own_defs: list[ast.AST], self_refs: list[tuple[str, int]],
                  classes: list[tuple[str, ast.ClassDef]], required: tuple[str, ...]) -> tuple:
    """``(private_refs, private_defs, required, private_self)`` of :class:`FileSummary` (``required``
    passed through) from ``refs`` (each private name the file reads,
    with its line), ``self_refs`` (those read on ``self``/``cls``/``super()``), the file's private
    functions ``own_defs`` and its classes: a read on a line of a private function's body belongs to
    the innermost such function, not to the file, and a read on the instance to the innermost class
    holding its line (found by line spans: no second walk of the tree). A read on the instance outside
    every class is an ordinary read."""
    dunder = _dunder_name
    own: list[tuple[str, str, int]] = []  # (name, class, line) of the reads on the instance
    if self_refs:
        cspans = sorted((c.lineno, c.end_lineno or c.lineno, q) for q, c in classes)
        for name, line in self_refs:
            if dunder(name):
                continue
            holder = ""
            for start, end, qual in cspans:  # the innermost: the latest start that holds the line
                if start > line:
                    break
                if end >= line:
                    holder = qual
            if holder:
                own.append((name, holder, line))
            else:
                refs.append((name, line))
    if not own_defs:
        return (frozenset(_intern(n) for n, _ in refs if not dunder(n)), (), required,
                tuple(sorted({(_intern(n), _intern(q), "") for n, q, _ in own})))
    spans = sorted((f.body[0].lineno, f.end_lineno or f.body[-1].lineno, i) for i, f in enumerate(own_defs))
    starts = [span[0] for span in spans]
    inner: list[set[str]] = [set() for _ in own_defs]
    outside: set[str] = set()
    for name, line in refs:
        k = bisect_right(starts, line) - 1
        while k >= 0 and spans[k][1] < line:  # the latest body that starts before the line and holds it
            k -= 1
        if k < 0:
            outside.add(name)
        elif name != own_defs[spans[k][2]].name:
            inner[spans[k][2]].add(name)
    def holder_of(line: int) -> int:
        k = bisect_right(starts, line) - 1
        while k >= 0 and spans[k][1] < line:
            k -= 1
        return k

    mine: set[tuple[str, str, str]] = set()
    for name, qual, line in own:
        k = holder_of(line)
        if k < 0:
            mine.add((_intern(name), _intern(qual), ""))
        else:
            func = own_defs[spans[k][2]]
            if name != func.name:
                mine.add((_intern(name), _intern(qual), _intern(func.name)))
    defs = tuple((_intern(f.name), frozenset(_intern(n) for n in names if not dunder(n)))
                 for f, names in zip(own_defs, inner))
    return frozenset(_intern(n) for n in outside if not dunder(n)), defs, required, tuple(sorted(mine))


def _line(node: ast.AST) -> int:
    return node.lineno


def _dunder_name(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def decorator_adds(func: ast.AST) -> set[str]:
    """Names a function used as a class decorator assigns onto its class (``*``: any name).

    Looks at the first parameter of ``func`` and of every function nested in it (a decorator
    factory returns the inner one): ``param.x = ...``, ``setattr(param, "x", ...)``,
    ``param.__dict__[...] = ...``/``param.__dict__.update(...)`` (``*``). Dunder names are left out
    (they never name a method that E9503 checks), except those that change what the class is:
    ``__getattr__``/``__getattribute__``, ``__bases__``, ``__class__``, ``__dict__`` (``*``). A
    function that returns a class it builds (a subclass defined inside it, ``type(...)``) replaces
    the class by one with other bases: ``*`` (see :func:`_returns_other`).
    """
    adds: set[str] = set()
    nodes = walk_nodes(func)  # order-free (a set); same nodes as ast.walk but the ctx/op singletons
    for node in nodes:  # most functions hold none of the shapes below: then no walk per nested def
        kind = node.__class__
        if kind is ast.Attribute:  # stored on a name, or a name's __dict__
            if node.value.__class__ is ast.Name and (node.ctx.__class__ is ast.Store or node.attr == "__dict__"):
                break
        elif kind is ast.Call:  # a call of something named setattr
            callee = node.func
            if callee.__class__ is ast.Name and callee.id == "setattr" or \
                    callee.__class__ is ast.Attribute and callee.attr == "setattr":
                break
        elif kind is ast.ClassDef or kind is ast.Return and node.value.__class__ is ast.Call:
            break  # may return a class it builds: looked at below
    else:
        if not _returns_other(func, nodes):
            return adds
    if _returns_other(func, nodes):
        adds.add("*")
    for fn in nodes:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        args = fn.args.posonlyargs + fn.args.args
        if not args:
            continue
        param = args[0].arg
        for sub in nodes if fn is func else walk_nodes(fn):
            name = None
            if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) and \
                    isinstance(sub.value, ast.Name) and sub.value.id == param:
                name = sub.attr
            elif isinstance(sub, ast.Call) and is_setattr(sub.func) \
                    and len(sub.args) >= 2 and isinstance(sub.args[0], ast.Name) and sub.args[0].id == param:
                name = string_value(sub.args[1]) or "*"
            elif isinstance(sub, ast.Attribute) and sub.attr == "__dict__" and \
                    isinstance(sub.value, ast.Name) and sub.value.id == param:
                name = "*"
            if name is None:
                continue
            if name in _DYNAMIC_MEMBERS or name in _CLASS_CHANGING:
                name = "*"
            if not (name.startswith("__") and name.endswith("__")):
                adds.add(name)
    return adds


_CLASS_CHANGING = frozenset({"__bases__", "__class__", "__dict__", "__mro_entries__"})
"""Dunders whose assignment onto a class changes which members it has."""


def _returns_other(func: ast.AST, nodes: list[ast.AST]) -> bool:
    """True when ``func`` or a function nested in it returns a class it builds instead of the class
    it was given: a class defined inside it (``class Traced(cls): ...; return Traced``) or one made
    by ``type(name, bases, namespace)``. Used as a class decorator, it binds the decorated name to a
    class with other bases. (Other returned values, such as ``dataclass(cls)``, are taken to be the
    class itself: flagging every call would leave most decorated classes unchecked.)"""
    classes = {n.name for n in nodes if n.__class__ is ast.ClassDef}
    for node in nodes:
        if node.__class__ is not ast.Return or node.value is None:
            continue
        value = node.value
        if value.__class__ is ast.Name and value.id in classes:
            return True
        if value.__class__ is ast.Call and value.func.__class__ is ast.Name and value.func.id == "type" \
                and len(value.args) == 3:
            return True
    return False


def _decorator_patches(tree: ast.Module, module: str, classes: list, imports: dict[str, str],
                       patched: set[tuple[str, str]], marks: Sequence[int] | None = None) -> None:
    """Add the members that module-level functions used as class decorators assign (see
    :class:`FileSummary` ``patched``). ``marks``, when given: the line of every node of ``tree``
    that :func:`decorator_adds` looks for (an attribute stored on a name, a name's ``__dict__``, a
    ``setattr`` call on a name; each on a name that is the first parameter of some function), in any
    order; a function whose lines hold none of them assigns nothing and is not walked."""
    functions: dict[str, set[str]] = {}
    lines = sorted(marks) if marks is not None else None
    stack = list(tree.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if lines is not None:  # the first mark at or after the function's first line (a decorator's)
                first = min([d.lineno for d in stmt.decorator_list], default=stmt.lineno)
                at = bisect_left(lines, first)
                if at == len(lines) or lines[at] > stmt.end_lineno:
                    continue
            adds = decorator_adds(stmt)
            if adds:
                functions[stmt.name] = adds
                for attr in adds:
                    patched.add((_intern(f"{module}.{stmt.name}()"), _intern(attr)))
        elif not isinstance(stmt, ast.ClassDef):
            for body in child_bodies(stmt):
                stack.extend(body)
    if not functions:
        return
    for qual, node in classes:
        for dec in node.decorator_list:
            target = qualify(dec.func if isinstance(dec, ast.Call) else dec, imports)
            local = target[len(module) + 1:] if target.startswith(module + ".") else None
            for attr in functions.get(local, ()) if local else ():
                patched.add((_intern(f"{module}.{qual}"), _intern(attr)))


def qualify(node: ast.AST | None, imports: dict[str, str]) -> str:
    """Return the qualified dotted name of ``node`` using a module's ``imports`` map.

    ``nn.Module`` with ``nn -> torch.nn`` gives ``torch.nn.Module``; ``Generic[T]`` gives
    ``typing.Generic``; a builtin class name gives ``builtins.<name>``; a string annotation is
    parsed. Anything else gives :data:`UNKNOWN`.
    """
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return UNKNOWN
        if isinstance(node, ast.Subscript):
            node = node.value
    name = dotted_name(node) if node is not None else None
    if not name:
        return UNKNOWN
    first, _, rest = name.partition(".")
    if first in imports:
        target = imports[first]
        if not target:
            return UNKNOWN
        return f"{target}.{rest}" if rest else target
    if first in _BUILTIN_CLASSES:
        return f"builtins.{name}"
    return UNKNOWN


def _base_name(node: ast.AST, imports: dict[str, str]) -> str:
    """Qualified base name; an unresolvable one is ``"?"`` + its source name (``?platform.Base``),
    so that :meth:`ClassIndex.possible_subclasses` can still match it by its last name."""
    name = qualify(node, imports)
    if name != UNKNOWN:
        return name
    text = dotted_name(node.value if isinstance(node, ast.Subscript) else node)
    return UNKNOWN + text if text else UNKNOWN


def _bound_names(stmt: ast.stmt) -> list[str]:
    names: list[str] = []
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        names += names_in_target(stmt.target)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                names += names_in_target(item.optional_vars)
    if isinstance(stmt, ast.Try):
        names += [h.name for h in stmt.handlers if h.name]
    return names


_FALSY_CONSTANTS = (False, None, 0, 0.0, "", b"")


def _falsy_constant(value: ast.AST | None) -> bool:
    """True for a constant that is falsy (``False``, ``None``, ``0``, ``""``) or an empty display."""
    kind = value.__class__
    if kind is ast.Constant:
        return any(value.value is c or (type(value.value) is type(c) and value.value == c) for c in _FALSY_CONSTANTS)
    if kind in (ast.Tuple, ast.List, ast.Set):
        return not value.elts
    return kind is ast.Dict and not value.keys


_INERT = (ast.Constant, ast.JoinedStr, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.ListComp, ast.SetComp,
          ast.DictComp, ast.GeneratorExp, ast.Compare)


def _not_callable(value: ast.AST | None) -> bool:
    """True for a value that cannot be called: a literal, a container display or comprehension, an
    f-string, a comparison, ``not x``."""
    return isinstance(value, _INERT) or (value.__class__ is ast.UnaryOp and value.op.__class__ is ast.Not)


class _Uses:
    """What :func:`class_members` records of the reads in a class's methods (see
    :class:`ClassSummary`): ``names`` read on the receiver, ``supers`` read on ``super()``,
    ``attrs`` ``(a, name)`` read as ``self.a.name``, and ``ctors`` ``a -> callee nodes`` of the
    ``self.a = Callee(...)`` / ``self.a: T = Callee(...)`` assignments of ``__init__``; ``falsy`` /
    ``truthy``: the members assigned a falsy constant / anything else (see ``ClassSummary.falsy``)."""

    __slots__ = ("names", "supers", "attrs", "ctors", "falsy", "truthy", "values", "varied")

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.supers: set[str] = set()
        self.attrs: set[tuple[str, str]] = set()
        self.ctors: dict[str, list[ast.AST]] = {}
        self.falsy: set[str] = set()  # members assigned a falsy constant somewhere in the class
        self.truthy: set[str] = set()  # members assigned anything else somewhere (or unknown values)
        self.values: dict[str, set[str]] = {}  # member -> reprs of the literal constants assigned to it
        self.varied: set[str] = set()  # members assigned something that is not a literal constant

    def falsy_only(self) -> set[str]:
        """The members every assignment of the class sets to a falsy constant."""
        return self.falsy - self.truthy

    def assigned(self, name: str, value: ast.AST | None) -> None:
        """Record an assignment of ``value`` to member ``name`` (``None``: not a plain value)."""
        if value is not None and value.__class__ is ast.Constant and \
                isinstance(value.value, (str, int, float, bool, type(None))):
            self.values.setdefault(name, set()).add(repr(value.value))
        else:
            self.varied.add(name)

    def tags(self) -> tuple[tuple[str, str], ...]:
        """``(member, value)`` for the members always assigned the same literal constant."""
        return tuple(sorted((_intern(name), next(iter(values))) for name, values in self.values.items()
                            if len(values) == 1 and name not in self.varied))


_CONSTANT_KINDS = (str, int, float, bool, type(None))


def _constant_method(method: ast.FunctionDef | ast.AsyncFunctionDef, seen: "_Uses") -> None:
    """Record a method whose body (after a docstring) is ``return <literal constant>`` as a tag of
    the class: a property's value under its name (``@property def is_fused(self): return True``),
    a plain, static or class method's under ``name()`` (``def supports_fast(self): return False``,
    read as ``self.supports_fast()``); a property computing its value is not one constant."""
    decorators = {(dotted_name(d) or "").rsplit(".", 1)[-1] for d in method.decorator_list}
    is_property = bool(decorators & {"property", "cached_property"})
    if decorators - {"property", "cached_property", "staticmethod", "classmethod"} or \
            method.__class__ is ast.AsyncFunctionDef:
        if is_property:
            seen.varied.add(method.name)
        return
    body = method.body[1:] if method.body and method.body[0].__class__ is ast.Expr and \
        method.body[0].value.__class__ is ast.Constant and isinstance(method.body[0].value.value, str) else method.body
    value = body[0].value if len(body) == 1 and body[0].__class__ is ast.Return else None
    constant = value if value is not None and value.__class__ is ast.Constant and \
        isinstance(value.value, _CONSTANT_KINDS) else None
    seen.assigned(method.name if is_property else method.name + "()", constant)


def class_members(node: ast.ClassDef, chains: list | None = None, seen: "_Uses | None" = None,
                  walked: _MethodWalks | None = None) -> tuple[set[str], bool, set[str]]:
    """Return ``(members, dynamic, abstracts)`` of one class statement (``abstracts``: the names
    of its ``@abstractmethod`` members).

    When ``chains`` is a list, the stores its methods make on attributes of the instance
    (``self.child.attr = ...``) are appended to it as ``(child, attr)``, ``child`` being ``""`` for
    longer chains; and ``("=child", ctor)`` records ``self.child = Ctor(...)`` in ``__init__``
    (``ctor``: the callee expression node), so the caller can type the receiver.

    Members: names bound in the class body (defs, assignments, imports, nested classes), names
    assigned through the first parameter of its methods (``self.x = ...``, ``cls.x = ...``,
    ``setattr(self, "x", ...)``, ``self.add_module("x", ...)``/``register_*``,
    ``object.__setattr__(self, "x", ...)``) and ``type(self).x = ...``. ``dynamic`` is True when a
    computed name can be set (``setattr(self, name, ...)``, ``self.__dict__`` writes,
    ``locals()``/``vars()``/``exec`` in the class body). ``seen``: filled with the reads of the
    methods (see :class:`_Uses`). ``walked``: when given, each method's nodes as walked here are
    added to it, so that the caller reads them without walking them again.
    """
    members: set[str] = set()
    dynamic = False
    abstract: set[str] = set()
    methods: list[ast.FunctionDef | ast.AsyncFunctionDef] = []

    def body_scope(body: Iterable[ast.stmt]) -> None:
        nonlocal dynamic
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                members.add(stmt.name)
                methods.append(stmt)
                for dec in stmt.decorator_list:
                    dname = dotted_name(dec.func if isinstance(dec, ast.Call) else dec) or ""
                    if dname.rsplit(".", 1)[-1] in _ABSTRACT_DECORATORS:
                        abstract.add(stmt.name)
                    # @x.setter / @x.deleter keep the property name
                if seen is not None:
                    _constant_method(stmt, seen)
            elif isinstance(stmt, ast.ClassDef):
                members.add(stmt.name)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    names = names_in_target(target)
                    members.update(names)
                    if seen is not None and stmt.value is not None:  # `x: int` alone assigns nothing
                        # a plain class attribute (annotated or not) set to a falsy constant: a flag
                        plain = stmt.__class__ is not ast.AugAssign and target.__class__ is ast.Name
                        (seen.falsy if plain and _falsy_constant(stmt.value) else seen.truthy).update(names)
                        for name in names:
                            seen.assigned(name, stmt.value if plain else None)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for alias in stmt.names:
                    members.add((alias.asname or alias.name).split(".")[0])
            else:
                members.update(_bound_names(stmt))
                for child in child_bodies(stmt):
                    body_scope(child)
            simple = not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not child_bodies(stmt)
            for sub in walk_nodes(stmt) if simple else ():
                if isinstance(sub, ast.NamedExpr):
                    members.add(sub.target.id)
                elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and \
                        sub.func.id in ("locals", "vars", "exec", "setattr"):
                    dynamic = True

    try:
        body_scope(node.body)
    finally:
        # body_scope refers to itself through its closure: without this, every class's methods would
        # stay in a reference cycle, which the project-facts build (collector paused) would pile up
        del body_scope
    Name, Attribute, Call, Assign, Load = ast.Name, ast.Attribute, ast.Call, ast.Assign, ast.Load
    for method in methods:
        args = method.args.posonlyargs + method.args.args
        receiver = args[0].arg if args else None
        receivers = {receiver} if receiver else set()
        # the reads E9503's check of the class may report (``_State.check_class``): none in a static
        # method, nor in a function whose unannotated first parameter is no receiver name
        reads = seen is not None and receiver is not None and not _static(method) and \
            (args[0].annotation is not None or receiver in RECEIVER_NAMES)
        in_init = method.name == "__init__" and chains is not None
        in_init_seen = method.name == "__init__" and seen is not None
        falsy_targets: set[int] = set()
        const_targets: dict[int, ast.AST] = {}
        nodes, read = _walk_method(method, walked.classes if walked is not None else None)
        if walked is not None:
            walked.add(method, nodes)
        for sub in read:  # names, constants, keywords, operators ...: nothing to record, not in ``read``
            kind = sub.__class__
            if kind is Attribute:
                if sub.ctx.__class__ is Load:
                    if reads:
                        base = sub.value
                        if base.__class__ is Name:
                            if base.id in receivers:
                                seen.names.add(sub.attr)
                        elif base.__class__ is Attribute:
                            if base.value.__class__ is Name and base.value.id in receivers:
                                seen.attrs.add((base.attr, sub.attr))
                        elif base.__class__ is Call and base.func.__class__ is Name and base.func.id == "super":
                            seen.supers.add(sub.attr)
                    continue
                base = sub.value  # stored or deleted
                if base.__class__ is Name and base.id in receivers:
                    members.add(sub.attr)
                    if seen is not None:
                        (seen.falsy if id(sub) in falsy_targets else seen.truthy).add(sub.attr)
                        seen.assigned(sub.attr, const_targets.get(id(sub)))
                elif chains is not None and base.__class__ is Attribute and sub.ctx.__class__ is ast.Store:
                    root = base
                    while root.__class__ is Attribute:
                        root = root.value
                    if root.__class__ is Name and root.id in receivers:
                        inner = base.value
                        chains.append((base.attr if inner.__class__ is Name else "", sub.attr))
                elif base.__class__ is Call and base.func.__class__ is Name and base.func.id == "type" or \
                        base.__class__ is Attribute and base.attr == "__class__":
                    members.add(sub.attr)  # type(self).x = v, self.__class__.x = v
                    if seen is not None:
                        seen.varied.add(sub.attr)
                elif base.__class__ is Attribute and base.attr == "__dict__":
                    dynamic = True
            elif kind is Call:
                dynamic |= _call_members(sub, receivers, members, None if seen is None else seen.varied)
                if reads and sub.func.__class__ is Name and sub.func.id == "getattr" \
                        and len(sub.args) >= 2 and sub.args[1].__class__ is ast.Constant \
                        and isinstance(sub.args[1].value, str):
                    target = sub.args[0]
                    if target.__class__ is Name and target.id in receivers:
                        seen.names.add(sub.args[1].value)
                    elif target.__class__ is Call and target.func.__class__ is Name \
                            and target.func.id == "super":
                        seen.supers.add(sub.args[1].value)
            elif kind is ast.Subscript:
                if sub.ctx.__class__ is ast.Store and (
                        sub.value.__class__ is Attribute and (
                            sub.value.attr == "__dict__" or sub.value.attr in _MODULE_REGISTRIES
                            and sub.value.value.__class__ is Name and sub.value.value.id in receivers)
                        or _vars_of(sub.value, receivers)):
                    # self.__dict__["x"] = v, vars(self)["x"] = v, and torch.nn.Module's registries
                    # (self._modules["x"] = m: Module.__getattr__ answers self.x from them)
                    name = string_value(sub.slice)
                    if name is None:
                        dynamic = True
                    else:
                        members.add(name)
            else:  # Assign, AnnAssign
                value = sub.value
                targets = sub.targets if kind is Assign else [sub.target]
                if in_init and kind is Assign and len(targets) == 1 and value.__class__ is Call:
                    target = targets[0]
                    if target.__class__ is Attribute and target.value.__class__ is Name and \
                            target.value.id in receivers:
                        chains.append(("=" + target.attr, value.func))
                if seen is not None and value is not None:
                    if value.__class__ is ast.Constant:
                        for t in targets:
                            const_targets[id(t)] = value
                    if _falsy_constant(value):
                        falsy_targets.update(id(t) for t in targets)
                if in_init_seen and len(targets) == 1 and value.__class__ is Call:
                    target = targets[0]
                    if target.__class__ is Attribute and target.value.__class__ is Name and \
                            target.value.id in receivers:
                        seen.ctors.setdefault(target.attr, []).append(value.func)
    return members, dynamic, abstract


def _static(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True when ``method`` is decorated ``@staticmethod`` (``@x.staticmethod``), as E9503's check
    tells a static method (``_method_kind``)."""
    return any((dotted_name(d.func if d.__class__ is ast.Call else d) or "").rsplit(".", 1)[-1] == "staticmethod"
               for d in method.decorator_list)


_MODULE_REGISTRIES = frozenset({"_modules", "_parameters", "_buffers"})
"""torch.nn.Module's registries of submodules, parameters and buffers, which its ``__getattr__`` reads."""

_MEMBER_KINDS = frozenset({ast.Assign, ast.AnnAssign, ast.Attribute, ast.Subscript, ast.Call})
"""The node kinds :func:`class_members` reads in a method (every other node is passed over)."""


def _walk_method(method: ast.AST,
                 classes: list[ast.ClassDef] | None = None) -> tuple[list[ast.AST], list[ast.AST]]:
    """Return the nodes of a method, nested functions included, nested classes excluded (the
    ``ClassDef`` node itself is included, and appended to ``classes`` when given), without the
    ``ctx``/``op`` singletons; and, in the same order, those of them of the kinds
    :func:`class_members` reads (:data:`_MEMBER_KINDS`)."""
    out = child_nodes(method)
    read: list[ast.AST] = []
    plans = _CHILD_FIELDS
    holey = _HOLEY
    member_kinds = _MEMBER_KINDS
    append = out.append
    extend = out.extend
    for node in out:  # the list grows while it is read: a breadth-first walk
        kind = node.__class__
        if kind in member_kinds:
            read.append(node)
        elif kind is ast.ClassDef:
            if classes is not None:
                classes.append(node)
            continue
        for name in plans[kind]:
            value = getattr(node, name, None)
            if value is None:
                continue
            if value.__class__ is list:
                extend([v for v in value if v is not None] if name in holey else value)
            else:
                append(value)
    return out, read


class _MethodWalks:
    """The nodes of a file's methods as :func:`class_members` walked them (:func:`_walk_method`):
    ``nodes``, one list per method; ``methods``: the ``id`` of each method walked; ``classes``: the
    classes defined in those methods (their ``ClassDef`` node is among a method's nodes, their
    bases, decorators and body are not)."""

    __slots__ = ("classes", "methods", "nodes")

    def __init__(self) -> None:
        self.nodes: list[list[ast.AST]] = []
        self.methods: set[int] = set()
        self.classes: list[ast.ClassDef] = []

    def add(self, method: ast.AST, nodes: list[ast.AST]) -> None:
        self.nodes.append(nodes)
        self.methods.add(id(method))


def _nodes_outside_methods(tree: ast.Module, walked: _MethodWalks) -> list[ast.AST]:
    """The nodes of ``tree`` that are in none of the method walks ``walked``: breadth-first from the
    root, not below those methods (their ``def`` node is kept), and below each class defined in one
    of them. With the nodes of ``walked``: every node of :func:`walk_nodes` ``(tree)`` once."""
    roots: list[ast.AST] = [tree]
    for node in walked.classes:
        roots.extend(child_nodes(node))
    return walk_nodes_pruned(roots, walked.methods)


def is_setattr(func: ast.AST) -> bool:
    """``setattr`` or ``builtins.setattr``."""
    if func.__class__ is ast.Name:
        return func.id == "setattr"
    return func.__class__ is ast.Attribute and func.attr == "setattr" and func.value.__class__ is ast.Name \
        and func.value.id == "builtins"


def assigned_name_arg(call: ast.Call) -> ast.AST | None:
    """The argument naming the attribute that an ``add_module``/``register_*`` call creates: the first
    positional one, else the ``name=`` keyword (``None`` when there is neither)."""
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "name"), None)


def _call_members(call: ast.Call, receivers: set[str], members: set[str], varied: set[str] | None = None) -> bool:
    """Add names a call creates on the receiver (also to ``varied`` when given: their values are not
    literal constants); return True when the name is computed."""
    func = call.func
    args = call.args

    def is_receiver(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in receivers

    if is_setattr(func) and len(args) >= 2 and is_receiver(args[0]):
        name = string_value(args[1])
        if name is None:
            return True
        members.add(name)
        if varied is not None:
            varied.add(name)
        return False
    if isinstance(func, ast.Attribute):
        # self.add_module("x", m), self.register_buffer(name="x", tensor=t), ...
        target = assigned_name_arg(call) if func.attr in _ASSIGN_CALLS and is_receiver(func.value) else None
        if target is not None:
            name = string_value(target)
            if name is None:
                return True
            members.add(name)
            if varied is not None:
                varied.add(name)
            return False
        # object.__setattr__(self, "x", v) / super().__setattr__("x", v) / self.__dict__.update(...)
        if func.attr == "__setattr__":
            pos = 1 if (args and is_receiver(args[0])) else 0
            if len(args) > pos:
                name = string_value(args[pos])
                if name is None:
                    return True
                members.add(name)
                if varied is not None:
                    varied.add(name)
            return False
        if func.attr in ("update", "setdefault") and isinstance(func.value, ast.Attribute) and \
                func.value.attr == "__dict__":
            return True
        if func.attr in ("update", "setdefault") and _vars_of(func.value, receivers):
            return True
    return False


def _vars_of(node: ast.AST, receivers: set[str]) -> bool:
    """``vars(r)`` for a receiver ``r``: the instance's ``__dict__``, as ``r.__dict__`` is."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars" \
        and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Name) \
        and node.args[0].id in receivers


def class_nodes(tree: ast.Module, module: str, is_package: bool, nodes: dict[str, ast.ClassDef],
                functions: list | None = None) -> None:
    """Fill ``nodes`` with ``qualname -> ast.ClassDef`` (and ``functions`` with every statement-level
    function definition) using the same walk as :func:`summarize`, without summarizing."""
    walker = _Summarizer(module, is_package, nodes, functions)
    walker.module_scope(tree.body, "", in_function=False)
    for qual, node in walker.raw_classes:
        nodes[qual] = node


def summarize(tree: ast.Module, module: str, is_package: bool = False,
              nodes: dict[str, ast.ClassDef] | None = None, functions: list | None = None) -> FileSummary:
    """Return the :class:`FileSummary` of a parsed module named ``module``.

    The one summarizer: the index applies it to every file of the project, and E9503 to the
    current file's tree (so unsaved edits and fix rounds are seen). When ``nodes`` is a dict, it is
    filled with ``qualname -> ast.ClassDef`` for the caller (``functions``: see :func:`class_nodes`). Never raises for valid ``ast`` input.
    """
    return _Summarizer(module, is_package, nodes, functions).run(tree)


# ---------------------------------------------------------------------- framework catalog
@lru_cache(maxsize=None)
def load_catalog(path: str | None = None) -> dict[str, CatalogEntry]:
    """Return ``alias -> CatalogEntry`` of the bundled catalog for every catalogued release (no
    declared range; see :mod:`hp_invariants.catalog`), read once per process.

    Raises ``OSError``/``ValueError`` only if the installed package data is missing or corrupt.
    """
    catalog = framework_catalog.load(path) if path else framework_catalog.load()
    return catalog.entries_for({})


KEYED_CONTAINERS = frozenset({"torch.nn.modules.container.ModuleDict", "torch.nn.modules.container.ParameterDict",
                              "torch.nn.modules.container.Sequential"})
"""Framework containers whose members are named by the data given to their constructor
(``nn.ModuleDict({"head": ...})`` registers ``head``, served by ``nn.Module.__getattr__``; so does an
``OrderedDict`` given to ``nn.Sequential``): a class reaching one may have any member."""


# ---------------------------------------------------------------------- the index
ClassKey = tuple[int, str]
"""A project class: (file number in the index, qualname)."""


@dataclass
class Hierarchy:
    """The resolved ancestry of one project class.

    ``members``: union of the members of the class and all ancestors (catalog entries included);
    ``own``: the class's own members; ``ancestors``: project class keys of the strict ancestors;
    ``inherited``: the members of the strict ancestors only (what ``super()`` can reach);
    ``unknown``: some ancestor or the metaclass could not be resolved; ``dynamic``: some class
    defines ``__getattr__``/``__getattribute__`` (registry ``__getattr__`` of ``nn.Module`` and
    ``mindspore.nn.Cell`` excepted) or sets computed names; ``abstract``: the class itself is
    abstract: it lists ``ABC``/``ABCMeta`` as a base or metaclass, or some ``@abstractmethod`` of
    its MRO has no concrete definition in it (a subclass that implements every abstract method of
    an ABC ancestor is concrete); ``catalog``: catalog entries reached; ``is_type``: a metaclass;
    ``pending``: the abstract method names still without a concrete definition.
    """

    key: ClassKey
    members: frozenset[str]
    own: frozenset[str]
    ancestors: frozenset[ClassKey]
    unknown: bool
    dynamic: bool
    abstract: bool
    catalog: tuple[str, ...]
    is_type: bool
    inherited: frozenset[str] = frozenset()
    pending: frozenset[str] = frozenset()


class ClassIndex:
    """Summaries of every ``.py`` file of one project root, plus resolution over them.

    Built by :class:`ClassIndexFacts` through :class:`hp_invariants.project.Project`. ``files`` are the :class:`FileSummary` objects; ``paths`` their
    absolute paths (same order). :meth:`overlay` returns a view where one file's summary is
    replaced by a fresh one (the file being checked).
    """

    def __init__(self, root: Path, paths: list[str], files: list[FileSummary], digests: list[bytes] | None = None,
                 modules: list[str] | None = None):
        self.root = Path(root)
        self.digests = digests if digests is not None else [b""] * len(paths)
        self.paths = paths
        self.files = files
        # the catalog for the library versions the project declares (pyproject, setup, requirements)
        self.ranges = framework_catalog.declared_ranges(self.root)
        self.catalog = framework_catalog.entries_for(self.ranges)
        self.catalog_key = framework_catalog.selection_key(self.ranges)
        self._by_module: dict[str, list[int]] = {}
        for i, module in enumerate(modules if modules is not None else (summary.module for summary in files)):
            self._by_module.setdefault(module, []).append(i)
        self._by_path = {os.path.normcase(p): i for i, p in enumerate(paths)}
        self._class_maps: dict[int, dict[str, ClassSummary]] = {}
        self._resolve_memo: dict[tuple[str, str], object] = {}
        self._hier_memo: dict[ClassKey, Hierarchy] = {}
        self._sets: dict[frozenset, frozenset] = {}  # one object per distinct set of the hierarchies
        self._children: dict[ClassKey, list[ClassKey]] | None = None
        self._used: dict[tuple[ClassKey, bool], bool] = {}
        self._uses_by_name: dict[str, list[tuple[int, str]]] | None = None
        self._class_names: dict[str, int] = {}
        self._by_top = frozenset(m.split(".")[0] for m in self._by_module)
        self._namespaces: dict[str, list[int]] | None = None
        self._test_files: dict[int, bool] = {}
        self._stores: dict[str, list[tuple[int, str]]] | None = None
        self._name_children: dict[str, list[ClassKey]] | None = None
        self._possible_memo: dict[ClassKey, list[ClassKey]] = {}
        self._patched: dict[str, set[str]] | None = None
        self._flag_sets: frozenset[str] | None = None
        self._private_refs: tuple[frozenset[str], tuple[str, ...], frozenset[str], tuple[str, ...]] | None = None
        self._unimportable: dict[int, str] = {}
        self._build_text: str | None = None
        self._swapped: frozenset[str] | None = None
        self._catalog_patched: dict[str, set[str]] | None = None
        self._dependency_memo: dict[tuple, tuple] = {}  # question -> normal form, answer's text
        self._record_paths: dict[int, str] = {}  # file number -> its path as a dependency record holds it
        self._names_memo: dict[frozenset[str], list] = {}  # a large name set -> its recorded digest
        self._root_prefix = os.path.join(str(self.root), "")
        self.stats = {"parsed": 0, "cached": 0, "failed": 0}

    # ------------------------------------------------------------------ the parts the store keeps
    def to_parts(self) -> dict:
        """This index as the parts :attr:`ClassIndexFacts.built_parts` declares (:meth:`from_parts`
        reads them back): paths, digests, module names, each file's summary, and the project-wide
        tables that :meth:`patched_members`, :meth:`stored`, :meth:`subclasses`,
        :meth:`possible_subclasses` and :meth:`used` otherwise compute from every file on first use."""
        patched = self._patched if self._patched is not None else self._patched_table()
        stores = self._stores if self._stores is not None else self._stores_table()
        children = self._children if self._children is not None else self._children_table()
        name_children = self._name_children if self._name_children is not None else self._name_children_table()
        uses = self._uses_by_name if self._uses_by_name is not None else self._uses_table()
        files = list(self.files)
        return {"root": str(self.root), "paths": self.paths, "digests": self.digests,
                "modules": [f.module for f in files], "files": files, "patched": patched, "stores": stores,
                "children": children, "name_children": name_children, "uses": uses,
                "class_names": self._class_names, "flag_sets": sorted(self.flag_sets()),
                "private_refs": sorted(self._private_table()[0]),
                "private_plain": sorted(self._private_table()[2]),
                "swapped": sorted(self.swapped())}

    @classmethod
    def from_parts(cls, parts: dict) -> "ClassIndex":
        """The index :meth:`to_parts` gave, from its parts as the store read them back (``files`` and
        ``uses`` are read entry by entry, when first asked for); raises ``ValueError`` when the lists
        do not have one entry per file."""
        paths, modules, files, digests = parts["paths"], parts["modules"], parts["files"], parts["digests"]
        if not len(paths) == len(modules) == len(files) == len(digests):
            raise ValueError("index lists of different lengths")
        index = cls(Path(parts["root"]), paths, files, digests, modules)
        index._patched = parts["patched"]
        index._stores = parts["stores"]
        index._children = parts["children"]
        index._name_children = parts["name_children"]
        index._uses_by_name = parts["uses"]
        index._class_names = parts["class_names"]
        index._flag_sets = frozenset(parts["flag_sets"])
        refs, plain = frozenset(parts["private_refs"]), frozenset(parts["private_plain"])
        index._private_refs = (refs, tuple(sorted(r for r in refs if _is_prefix(r))),
                               plain, tuple(sorted(r for r in plain if _is_prefix(r))))
        index._swapped = frozenset(parts["swapped"])
        return index

    @classmethod
    def for_root(cls, root: Path, cache_dir: str | None = None, use_cache: bool = True, jobs: int = 1) -> "ClassIndex":
        """Build (or read from the cache) the index of the project ``root``: a convenience over
        :class:`hp_invariants.project.Project` for scripts and tests; ``stats`` says what was parsed."""
        from hp_invariants.project import Project  # noqa: PLC0415

        project = Project(cache_dir=cache_dir, use_cache=use_cache, jobs=jobs)
        index = project.data_for_root(ClassIndexFacts(), Path(os.path.abspath(root)))
        index.stats = dict(project.stats)
        return index

    # ------------------------------------------------------------------ views
    def overlay(self, path: str, summary: FileSummary) -> "ClassIndex":
        """Return a view of the index where ``path`` has ``summary`` (added if not indexed)."""
        key = os.path.normcase(os.path.abspath(path))
        i = self._by_path.get(key)
        if i is not None and self.files[i] == summary:
            return self
        paths = list(self.paths)
        files = list(self.files)
        digests = list(self.digests)
        if i is None:
            paths.append(os.path.abspath(path))
            files.append(summary)
            digests.append(b"")
        else:
            files[i] = summary
            digests[i] = b""
        view = ClassIndex.__new__(ClassIndex)
        ClassIndex.__init__(view, self.root, paths, files, digests)
        view.stats = self.stats
        return view

    def cached_summary(self, path: str, digest: bytes) -> FileSummary | None:
        """The indexed summary of ``path`` when the file's bytes have the content ``digest``
        (:func:`~hp_invariants.project.content_digest`) indexed, else ``None``."""
        i = self.file_index(path)
        if i is None or not self.digests[i]:
            return None
        return self.files[i] if digest == self.digests[i] else None

    def file_index(self, path: str) -> int | None:
        """Return the number of ``path`` in the index, or ``None``."""
        return self._by_path.get(os.path.normcase(os.path.abspath(path)))

    def classes_of(self, i: int) -> dict[str, ClassSummary]:
        """Return ``qualname -> ClassSummary`` of file ``i``."""
        found = self._class_maps.get(i)
        if found is None:
            found = {}
            for summary in self.files[i].classes:
                # a qualname bound twice (if/else definitions) is ambiguous: keep a marker
                found[summary.qualname] = None if summary.qualname in found else summary  # type: ignore[assignment]
            self._class_maps[i] = found
        return found

    def summary(self, key: ClassKey) -> ClassSummary | None:
        """Return the :class:`ClassSummary` of a class key (``None`` if ambiguous)."""
        return self.classes_of(key[0]).get(key[1])

    def class_name(self, key: ClassKey) -> str:
        """Return ``module.qualname`` of a class key."""
        return f"{self.files[key[0]].module}.{key[1]}"

    # ------------------------------------------------------------------ resolution
    def resolve(self, qualified: str, from_file: int | None = None) -> object:
        """Resolve a qualified dotted name to a project class key, a :class:`CatalogEntry`, or ``None``.

        Project modules are searched first (re-exports through imports and ``*`` imports followed);
        when several files carry the same module name (scripts outside packages), the one in the
        folder of ``from_file`` wins, else the name is unknown. Then the framework catalog.
        """
        if not qualified or qualified.startswith(UNKNOWN):
            return None
        folder = os.path.dirname(self.paths[from_file]) if from_file is not None else ""
        memo_key = (qualified, folder)
        if memo_key in self._resolve_memo:
            return self._resolve_memo[memo_key]
        self._resolve_memo[memo_key] = None  # cycle guard
        result = self._resolve(qualified, folder, 0)
        self._resolve_memo[memo_key] = result
        return result

    def _module_file(self, module: str, folder: str) -> int | None:
        candidates = self._by_module.get(module)
        if not candidates:
            candidates = self._namespace_modules().get(module)
            if not candidates:
                return None
        if len(candidates) == 1:
            return candidates[0]
        same = [c for c in candidates if os.path.dirname(self.paths[c]) == folder]
        return same[0] if len(same) == 1 else -1

    def _namespace_modules(self) -> dict[str, list[int]]:
        """The names a file also has as part of a namespace package (PEP 420: a folder without
        ``__init__.py`` imported from a folder above it), built on the first module name not found.

        A file's module name (:func:`module_name`) starts at the first folder above it that is not a
        package; each chain of such folders between that folder and the project root, nearest first,
        gives it another name: ``<root>/src/models/base.py`` outside any package is ``base``, and
        also ``models.base`` and ``src.models.base``. Folder names that are not identifiers end the
        chain (nothing can import through them). Only asked after the real module names; and no
        such name starts with what Python would import instead of a namespace package: a module at
        the root of this project, a library of the framework catalog (``docs/_mock/torch/nn.py`` is
        not ``torch.nn``), a standard-library module, or a regular package of the project other than
        the folder itself (``pkg/ns/x.py`` inside the package ``pkg`` is ``pkg.ns.x``;
        ``tests/pkg/x.py`` is not)."""
        if self._namespaces is not None:
            return self._namespaces
        names: dict[str, list[int]] = {}
        root = os.path.normcase(os.path.abspath(self.root)) + os.sep
        sep = os.sep
        candidates: list[tuple[str, int, str]] = []  # (module, file, its top folder below the root)
        blocked = set(sys.stdlib_module_names) | {qual.split(".", 1)[0] for qual in self.catalog}
        packages: dict[str, set[str]] = {}  # a regular top-level package -> its folders
        for module, files in self._by_module.items():
            for i in files:
                path = os.path.normcase(self.paths[i])
                package = path.endswith(sep + "__init__.py")
                top = path.rsplit(sep, module.count(".") + (2 if package else 1))[0]
                first = module.split(".", 1)[0]
                if "." in module or package:
                    packages.setdefault(first, set()).add(top + sep + first)
                elif path.rfind(sep) == len(root) - 1:
                    blocked.add(first)  # a module at the root: `import first` finds it
                if top.startswith(root):
                    candidates.append((module, i, top[len(root):]))
        for module, i, folders in candidates:
            parts = folders.split(sep)
            prefix = module
            for j in range(len(parts) - 1, -1, -1):
                part = parts[j]
                if not part.isidentifier():
                    break
                prefix = f"{part}.{prefix}"
                if part in blocked:
                    continue
                found = packages.get(part)  # a regular package of that name: only inside its own folder
                if found is None or root + sep.join(parts[:j + 1]) in found:
                    names.setdefault(prefix, []).append(i)
        self._namespaces = names
        return names

    def _resolve(self, qualified: str, folder: str, depth: int) -> object:
        if depth > 12:
            return None
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            i = self._module_file(module, folder)
            if i is None:
                continue
            if i == -1:
                return None
            rest = parts[cut:]
            found = self._lookup_in_file(i, rest, depth)
            if found is not None:
                return found
            break
        return self.catalog.get(qualified)

    def _lookup_in_file(self, i: int, rest: list[str], depth: int) -> object:
        classes = self.classes_of(i)
        qual = ".".join(rest)
        if qual in classes:
            summary = classes[qual]
            if summary is None:
                return None
            binding = self.files[i].imports.get(rest[0], None)
            if binding is not None and binding != f"{self.files[i].module}.{rest[0]}":
                return None  # the class name is rebound (try/except fallback, assignment)
            return (i, qual)
        imports = self.files[i].imports
        if rest[0] in imports:
            target = imports[rest[0]]
            if not target:
                return None
            tail = ".".join(rest[1:])
            return self._resolve(f"{target}.{tail}" if tail else target, os.path.dirname(self.paths[i]), depth + 1)
        for star in self.files[i].star:
            found = self._resolve(f"{star}.{qual}", os.path.dirname(self.paths[i]), depth + 1)
            if found is not None:
                return found
        return None

    # ------------------------------------------------------------------ hierarchy
    def hierarchy(self, key: ClassKey) -> Hierarchy:
        """Return the :class:`Hierarchy` of a project class (memoized; cycles count as unknown)."""
        found = self._hier_memo.get(key)
        if found is not None:
            return found
        summary = self.summary(key)
        if summary is None:
            result = Hierarchy(key, frozenset(), frozenset(), frozenset(), True, False, False, (), False)
            self._hier_memo[key] = result
            return result
        # provisional entry: a cyclic base chain ends here as unknown
        self._hier_memo[key] = Hierarchy(key, frozenset(), frozenset(), frozenset(), True, False, False, (), False)
        patched = self.patched_members(self.class_name(key))
        own = set(summary.members) | patched
        members = set(own)
        ancestors: set[ClassKey] = set()
        unknown = False
        dynamic = summary.dynamic or "*" in patched or self.class_name(key) in self.swapped()
        abstract = summary.metaclass in _ABC_NAMES or any(b in _ABC_NAMES for b in summary.bases)
        pending = set(summary.abstracts)
        is_type = False
        catalog: list[str] = []
        this_entry = self.catalog.get(self.class_name(key))
        if this_entry is not None:  # a catalogued class linted inside its own library (torch itself)
            members |= this_entry.members
            catalog.append(this_entry.qualname)
            dynamic = this_entry.dynamic  # its own registry __getattr__ is the catalogued one
        if summary.metaclass and summary.metaclass not in ("abc.ABCMeta", "builtins.type"):
            meta = self.resolve(summary.metaclass, key[0])
            if not type(meta) is tuple:
                unknown = True
        for base in summary.bases:
            target = self.resolve(base, key[0])
            if target is None:
                unknown = True
            elif isinstance(target, CatalogEntry):
                members |= target.members
                members |= self.catalog_patched(target)
                catalog.append(target.qualname)
                dynamic |= target.dynamic or target.qualname in KEYED_CONTAINERS
                is_type |= target.qualname == "builtins.type"
            else:
                sub = self.hierarchy(target)
                ancestors.add(target)
                ancestors |= sub.ancestors
                members |= sub.members
                unknown |= sub.unknown
                dynamic |= sub.dynamic
                pending |= sub.pending
                is_type |= sub.is_type
                catalog.extend(sub.catalog)
        if not summary.bases and summary.metaclass == "":
            members |= self.catalog["builtins.object"].members if "builtins.object" in self.catalog else set()
        pending -= own - summary.abstracts
        abstract = abstract or bool(pending)
        inherited = set()
        for base in summary.bases:
            target = self.resolve(base, key[0])
            if isinstance(target, CatalogEntry):
                inherited |= target.members | self.catalog_patched(target)
            elif target is not None:
                inherited |= self.hierarchy(target).members
        if this_entry is not None:
            inherited |= this_entry.members
        if not summary.bases and "builtins.object" in self.catalog:
            inherited |= self.catalog["builtins.object"].members
        shared = self._shared
        result = Hierarchy(key, shared(members), shared(own), shared(ancestors), unknown, dynamic,
                           abstract, tuple(dict.fromkeys(catalog)), is_type, shared(inherited), shared(pending))
        self._hier_memo[key] = result
        return result

    def _shared(self, items: set) -> frozenset:
        """``frozenset(items)``, the same object for equal sets: most classes of a project inherit
        the same members (``nn.Module``'s) and have no ancestor or abstract method in the project, so
        the hierarchies of a project hold few distinct sets (measured on Megatron-Bridge: 130 distinct
        ``inherited`` sets of 2 952 classes, 5 MB of the index's memory)."""
        found = frozenset(items)
        return self._sets.setdefault(found, found)

    def flag_sets(self) -> frozenset[str]:
        """Attribute names some file stores on a receiver other than a method's own ``self`` with a
        value that may be truthy (:class:`FileSummary` ``flag_sets``): flags of that name may be on
        in instances of any class."""
        if self._flag_sets is None:
            self._flag_sets = frozenset().union(*(f.flag_sets for f in self.files))
        return self._flag_sets

    def _private_table(self) -> tuple[frozenset[str], tuple[str, ...], frozenset[str], tuple[str, ...]]:
        """``(live, live prefixes, plain, plain prefixes)``: ``live``, the private names that may run
        (read anywhere outside private functions, or inside one that is live itself, transitively;
        reads on ``self`` count by name here); ``plain``, the names read so other than on a method's
        own instance (see :meth:`private_live`)."""
        if self._private_refs is None:
            plain = set().union(*(f.private_refs for f in self.files))
            live = set(plain)
            inner: dict[str, set[str]] = {}
            own_reads: dict[str, set[str]] = {}  # function -> the names it reads on its instance
            for f in self.files:
                for name, names in f.private_defs:
                    inner.setdefault(name, set()).update(names)
                for name, _cls, func in f.private_self:
                    if func:
                        own_reads.setdefault(func, set()).add(name)
                    else:
                        live.add(name)
            prefixes = sorted(r for r in live if _is_prefix(r))
            todo = [n for n in set(inner) | set(own_reads) if n in live or any(n.startswith(p) for p in prefixes)]
            done: set[str] = set()
            while todo:  # what the live private functions read is live too
                func = todo.pop()
                if func in done:
                    continue
                done.add(func)
                for name in (*inner.get(func, ()), *own_reads.get(func, ())):
                    if name not in live:
                        live.add(name)
                        if _is_prefix(name):
                            prefixes.append(name)
                            todo.extend(n for n in set(inner) | set(own_reads) if n.startswith(name))
                        if name in inner or name in own_reads:
                            todo.append(name)
            for func in done:
                plain.update(inner.get(func, ()))
            self._private_refs = (frozenset(live), tuple(sorted(r for r in live if _is_prefix(r))),
                                  frozenset(plain), tuple(sorted(r for r in plain if _is_prefix(r))))
        return self._private_refs

    def private_live(self, name: str, key: ClassKey | None = None) -> bool:
        """True when a private function or method ``name`` may run: some file reads the name (a
        call, a reference, a string; a string ending in ``_`` reads every name it begins: a name
        built at run time) outside the private functions, or inside one that may run itself
        (:class:`FileSummary` ``private_refs``, ``private_defs``). For a method (``key``: its class)
        a read on a method's own instance (``self._m()``, ``super()._m()``: ``private_self``) counts
        only in a class related to it (the same, an ancestor, a descendant, or an ancestor of one of
        its project subclasses: what ``type(self)`` may be there), so that another class's method of
        the same name keeps nothing live. False: nothing in the project calls it, so a finding in its
        body is not reached by the project's code (the panel's false kind: a private helper nothing
        calls)."""
        live, prefixes, plain, plain_prefixes = self._private_table()
        if key is None:
            return name in live or any(name.startswith(p) for p in prefixes)
        if name in plain or any(name.startswith(p) for p in plain_prefixes):
            return True
        if name not in live:
            return False
        for i, summary in enumerate(self.files):
            for ref, cls, func in summary.private_self:
                if ref == name and (not func or func in live) and self._related((i, cls), key):
                    return True
        return False

    def _related(self, other: ClassKey, key: ClassKey) -> bool:
        """True when an instance whose class reaches ``other`` may be an instance of ``key``'s class or
        of a subclass of it (so ``self.m`` in ``other`` may find ``key``'s ``m``); unknown ancestry
        counts as related."""
        if other == key:
            return True
        if self.summary(other) is None or self.summary(key) is None:
            return True
        mine = self.hierarchy(other)
        if mine.unknown or mine.dynamic or key in mine.ancestors:
            return True
        if other in self.hierarchy(key).ancestors:
            return True
        return any(other == sub or other in self.hierarchy(sub).ancestors for sub in self.possible_subclasses(key))

    def unimportable(self, i: int) -> str:
        """Why the module of file ``i`` can never be imported, or ``""``: one of its unconditional
        top-level imports names a module of this project that the project does not hold (under a
        project package that holds no file or folder of that name and whose build files do not
        name it as an extension), or a name that the project module it imports from does not
        bind (no such module-level name, no ``*`` import, no module ``__getattr__``, no submodule).
        Nothing in such a module runs, so nothing in it is reported. Imports of other libraries
        are never judged (their releases differ)."""
        memo = self._unimportable
        if i in memo:
            return memo[i]
        memo[i] = ""
        for target in self.files[i].required:
            reason = self._missing_import(target)
            if reason:
                memo[i] = reason
                break
        return memo[i]

    def _missing_import(self, target: str) -> str:
        parts = target.split(".")
        top = self._by_module.get(parts[0])
        if not top or not all(self.files[j].is_package for j in top):
            return ""  # not a package of this project
        for cut in range(len(parts), 0, -1):
            holders = self._by_module.get(".".join(parts[:cut]))
            if holders:
                break
        else:
            return ""
        if cut == len(parts):
            return ""  # the module itself
        module, name = ".".join(parts[:cut]), parts[cut]
        for j in holders:
            summary = self.files[j]
            if name in summary.imports or summary.star or "__getattr__" in summary.imports \
                    or name in summary.late_names or summary.dynamic_globals:
                return ""
            if summary.is_package and self._may_be_built(self.paths[j], name):
                return ""
        return f"'{module}' has no '{name}'"

    def _may_be_built(self, init_path: str, name: str) -> bool:
        """True when the package of ``init_path`` may hold a module ``name`` this index does not show:
        a file or folder of that name (a compiled extension, a stub, data), or the name in the
        project's build files (an extension or generated module declared there)."""
        folder = os.path.dirname(init_path)
        try:
            if any(entry.split(".")[0] == name for entry in os.listdir(folder)):
                return True
        except OSError:
            return True
        if self._build_text is None:
            texts = []
            for build in ("setup.py", "setup.cfg", "pyproject.toml", "CMakeLists.txt", "Makefile"):
                try:
                    with open(os.path.join(str(self.root), build), encoding="utf-8", errors="replace") as handle:
                        texts.append(handle.read())
                except OSError:
                    continue
            self._build_text = "\n".join(texts)
        return name in self._build_text

    def mro_evidence(self, key: ClassKey, limit: int = 6) -> str:
        """The ancestry of a project class as a finding states it: each class with where it is
        defined (``Model (pkg/model.py:12) -> Base (pkg/base.py:3) -> torch.nn.Module (catalog)``),
        depth-first along its bases, at most ``limit`` entries."""
        parts: list[str] = []
        seen: set = set()
        stack: list[object] = [key]
        while stack and len(parts) < limit:
            item = stack.pop()
            if item in seen:
                continue
            seen.add(item)
            if isinstance(item, CatalogEntry):
                parts.append(f"{item.qualname} (catalog)")
                continue
            summary = self.summary(item)  # type: ignore[arg-type]
            if summary is None:
                continue
            where = os.path.relpath(self.paths[item[0]], self.root) if self.paths[item[0]].startswith(
                str(self.root)) else self.paths[item[0]]
            parts.append(f"{item[1].rsplit('.', 1)[-1]} ({where}:{summary.lineno})")
            bases = [self.resolve(b, item[0]) for b in summary.bases]
            stack.extend(reversed([b for b in bases if b is not None]))
        if stack:
            parts.append("...")
        return " -> ".join(parts)

    def flag_set(self, name: str) -> bool:
        """True when some file may switch a flag ``name`` on in an object of any class (see
        :meth:`flag_sets`)."""
        return name in self.flag_sets()

    def swapped(self) -> frozenset[str]:
        """Qualified names of the classes some file assigns to an object's ``__class__``."""
        if self._swapped is None:
            self._swapped = frozenset().union(*(f.swapped for f in self.files))
        return self._swapped

    def catalog_patched(self, entry: CatalogEntry) -> set[str]:
        """Names the project assigns onto the framework class ``entry`` (``setattr(nn.Module, "x",
        f)``, ``nn.Module.x = f``), under any of its aliases: members of every class reaching it."""
        if self._catalog_patched is None:
            table: dict[str, set[str]] = {}
            for owner, attrs in (self._patched if self._patched is not None else self._patched_table()).items():
                found = self.catalog.get(owner)
                if found is not None:
                    table.setdefault(found.qualname, set()).update(attrs)
            self._catalog_patched = table
        return self._catalog_patched.get(entry.qualname, set())

    def patched_members(self, class_name: str) -> set[str]:
        """Names assigned onto ``class_name`` from outside the class, anywhere in the project."""
        return (self._patched or self._patched_table()).get(class_name, set())

    def _patched_table(self) -> dict[str, set[str]]:
        patched: dict[str, set[str]] = {}
        for summary in self.files:
            for owner, attr in summary.patched:
                patched.setdefault(owner, set()).add(attr)
        self._patched = patched
        return patched

    def decorator_adds(self, qualified: str, from_file: int | None = None, depth: int = 0) -> frozenset[str] | None:
        """Members that the project function ``qualified`` adds to a class it decorates.

        Returns the names it assigns onto its parameter (``*`` for computed names; empty when it
        assigns none), following re-exports through project imports, or ``None`` when
        ``qualified`` is not a function defined in a project module (a library decorator, a
        name the index cannot follow).
        """
        module, _, name = qualified.rpartition(".")
        if not module or depth > 8:
            return None
        folder = os.path.dirname(self.paths[from_file]) if from_file is not None else ""
        i = self._module_file(module, folder)
        if i is None or i == -1:
            return None
        adds = self.patched_members(qualified + "()")
        if adds:
            return frozenset(adds)
        target = self.files[i].imports.get(name)
        if target == qualified:
            return None if name in self.classes_of(i) else frozenset()
        if target:
            return self.decorator_adds(target, i, depth + 1)
        return None

    def subclasses(self, key: ClassKey) -> list[ClassKey]:
        """Return every project class that has ``key`` among its ancestors (transitively)."""
        table = self._children if self._children is not None else self._children_table()
        out: list[ClassKey] = []
        seen = {key}
        stack = [key]
        while stack:
            for child in table.get(stack.pop(), []):
                if child not in seen:
                    seen.add(child)
                    out.append(child)
                    stack.append(child)
        return out

    def _children_table(self) -> dict[ClassKey, list[ClassKey]]:
        children: dict[ClassKey, list[ClassKey]] = {}
        for i, summary in enumerate(self.files):
            for cls_summary in summary.classes:
                for base in cls_summary.bases:
                    target = self.resolve(base, i)
                    if type(target) is tuple:
                        children.setdefault(target, []).append((i, cls_summary.qualname))
        self._children = children
        return children

    def _name_children_table(self) -> dict[str, list[ClassKey]]:
        by_name: dict[str, list[ClassKey]] = {}
        for i, summary in enumerate(self.files):
            for cls_summary in summary.classes:
                for base in cls_summary.bases:
                    if base.startswith(UNKNOWN) and len(base) > 1:
                        by_name.setdefault(base.rsplit(".", 1)[-1].lstrip(UNKNOWN), []).append(
                            (i, cls_summary.qualname))
        self._name_children = by_name
        return by_name

    def possible_subclasses(self, key: ClassKey) -> list[ClassKey]:
        """:meth:`subclasses` plus classes whose unresolvable base has the same last name as
        ``key`` (``class S(platform.Base)`` for ``Base``), and their subclasses (for suppression)."""
        memo = self._possible_memo.get(key)
        if memo is not None:
            return memo
        by_name = self._name_children if self._name_children is not None else self._name_children_table()
        out = self.subclasses(key)
        for child in by_name.get(key[1].rsplit(".", 1)[-1], []):
            if child not in out and child != key:
                out.append(child)
                out.extend(k for k in self.subclasses(child) if k not in out)
        self._possible_memo[key] = out
        return out

    def breaking_note(self, catalog: Iterable[str], name: str) -> str:
        """``"; it exists in transformers 4.30.2-4.49.0, outside the declared range
        transformers>=5"`` when ``name``, missing from the catalogued classes ``catalog`` (qualnames)
        under the project's declared library ranges, exists in a catalogued release outside them;
        else ``""`` (see :func:`hp_invariants.catalog.breaking_note`)."""
        return framework_catalog.breaking_note(catalog, name, self.ranges) if self.ranges else ""

    def stored_on_catalog(self, entry: CatalogEntry, name: str) -> bool:
        """True when some file stores ``name`` on a receiver of unknown class or of class ``entry``."""
        stores = self._stores if self._stores is not None else self._stores_table()
        for i, owner in stores.get(name, ()):
            if not owner or self.resolve(owner, i) in (None, entry):
                return True
        return False

    def is_test(self, i: int) -> bool:
        """True when file ``i`` is test code: a folder under the project root named ``test``,
        ``tests``, ``testing``, ``unittests``, ``*_tests`` or ``test_*``, or a file named
        ``test_*.py``, ``*_test.py`` or ``conftest.py``."""
        found = self._test_files.get(i)
        if found is None:
            try:
                parts = Path(os.path.relpath(self.paths[i], self.root)).parts
            except ValueError:
                parts = Path(self.paths[i]).parts
            stem = parts[-1][:-3] if parts and parts[-1].endswith(".py") else (parts[-1] if parts else "")
            found = stem.startswith("test_") or stem.endswith("_test") or stem == "conftest" or any(
                p in ("test", "tests", "testing", "unittests") or p.endswith("_tests") or p.startswith("test_")
                for p in parts[:-1])
            self._test_files[i] = found
        return found

    def used(self, key: ClassKey, values: bool = True) -> bool:
        """True when the class may be instantiated: some file constructs it or (when ``values``)
        passes it on as a value (``FileSummary.constructed``, resolved to this very class; an
        unqualified ``?Name`` counts when only one project class has that name). Uses in test code
        count only for classes defined in test code: tests build mixins bare to test their own
        methods. (Test frameworks hand test classes to functions that combine them with more
        bases: the caller passes ``values=False`` for test classes.)"""
        found = self._used.get((key, values))
        if found is not None:
            return found
        uses = self._uses_by_name if self._uses_by_name is not None else self._uses_table()
        simple = key[1].rsplit(".", 1)[-1]
        test_class = self.is_test(key[0])
        found = False
        for i, name in uses.get(simple, ()):
            if not test_class and self.is_test(i):
                continue
            if name.startswith(VALUE_USE):
                if not values:
                    continue
                name = name[1:]
            if name.startswith(UNKNOWN):
                if self._class_names.get(simple, 0) == 1:
                    found = True
                    break
                continue
            target = self.resolve(name, i)
            if target == key:
                found = True
                break
            if target is None and self._class_names.get(simple, 0) == 1 and name.split(".")[0] in self._by_top:
                found = True  # a project name the index cannot follow (a class bound in a function)
                break
        self._used[(key, values)] = found
        return found

    def _uses_table(self) -> dict[str, list[tuple[int, str]]]:
        by_name: dict[str, list[tuple[int, str]]] = {}
        names: dict[str, int] = {}
        for i, summary in enumerate(self.files):
            for name in summary.constructed:
                by_name.setdefault(name.rsplit(".", 1)[-1].lstrip(UNKNOWN + VALUE_USE), []).append((i, name))
            for cls_summary in summary.classes:
                simple = cls_summary.qualname.rsplit(".", 1)[-1]
                names[simple] = names.get(simple, 0) + 1
        self._uses_by_name, self._class_names = by_name, names
        return by_name

    def _stores_table(self) -> dict[str, list[tuple[int, str]]]:
        stores: dict[str, list[tuple[int, str]]] = {}
        for i, summary in enumerate(self.files):
            for owner, attr in summary.stores:
                stores.setdefault(attr, []).append((i, owner))
        self._stores = stores
        return stores

    def stored(self, key: ClassKey, name: str) -> bool:
        """True when some file stores attribute ``name`` on a receiver that may be an instance of
        the class: of unknown class, or bound to a class related to it by inheritance (either way:
        an annotation admits subclasses, an instance of a subclass is an instance of the class).
        Stores in test code count only for classes of test code (a test stubbing ``fake.step = ...``
        on a mock does not define ``step`` for the library's classes)."""
        stores = self._stores if self._stores is not None else self._stores_table()
        entries = stores.get(name)
        if not entries:
            return False
        hier = None
        library = not self.is_test(key[0])
        for i, owner in entries:
            if library and self.is_test(i):
                continue  # a test's fake or mock (fake.step = ...) does not give library classes a member
            if not owner:
                return True
            target = self.resolve(owner, i)
            if target is None:
                return True
            if hier is None:
                hier = self.hierarchy(key)
            if isinstance(target, CatalogEntry):
                if target.qualname in hier.catalog:
                    return True
            elif target == key or target in hier.ancestors or key in self.hierarchy(target).ancestors:
                return True
        return False


# ---------------------------------------------------------------------- the rule's project facts
class DependencyRecord(NamedTuple):
    """What the findings of one file depend on (:meth:`ClassIndexFacts.dependencies`): the questions
    its check asked of the index, in their normal form without file numbers (:func:`_normal`), and a
    digest of the answers (:func:`_answers_digest`)."""

    questions: tuple[Plain, ...]
    answers: str
    catalog: str
    """The library releases the catalog answered for (:func:`hp_invariants.catalog.selection_key`)."""


class ClassIndexFacts(ClassIndexFactsDeclaration):
    """E9503's declaration of project-wide facts: one :class:`FileSummary` per file, and the
    :class:`ClassIndex` built from them (see :mod:`hp_invariants.project`)."""

    summary_type = FileSummary

    def summarize(self, tree: ast.Module, path: str, module: str | None = None) -> FileSummary:
        """Return the :class:`FileSummary` of the parsed file ``path``; ``module``: its dotted name as
        the project walk named it (:func:`hp_invariants.project.module_names`, the same name
        :func:`module_name` gives, without a ``stat`` per folder), else :func:`module_name`'s."""
        if module is None:
            module, is_package = module_name(path)
        else:
            is_package = os.path.basename(path) == "__init__.py"
        return summarize(tree, module, is_package)

    def build(self, root: Path, paths: list[str], summaries: list[FileSummary], digests: list[bytes]) -> "ClassIndex":
        """Return the :class:`ClassIndex` of the project ``root``."""
        return ClassIndex(root, paths, summaries, digests)

    built_parts = {
        "root": str, "paths": list[str], "digests": list[bytes], "modules": list[str],
        "files": ListTable[FileSummary],
        "patched": dict[str, set[str]],
        "stores": dict[str, list[tuple[int, str]]],
        "children": dict[tuple[int, str], list[tuple[int, str]]],
        "name_children": dict[str, list[tuple[int, str]]],
        "uses": KeyedTable[list[tuple[int, str]]],
        "class_names": dict[str, int],
        "flag_sets": list[str],
        "private_refs": list[str],
        "private_plain": list[str],
        "swapped": list[str],
    }

    def persist(self, data: "ClassIndex") -> dict:
        """Return the parts of the index (:meth:`ClassIndex.to_parts`)."""
        return data.to_parts()

    def restore(self, parts: dict, rebuild) -> "ClassIndex":
        """Return the index from its stored parts (:meth:`ClassIndex.from_parts`)."""
        return ClassIndex.from_parts(parts)

    # ------------------------------------------------------------------ the results cache
    def track(self, data: "ClassIndex") -> tuple["_TrackedIndex", "_Questions"]:
        """Return a view of the index that records every question E9503 asks of it."""
        questions = _Questions()
        return _TrackedIndex(data, questions), questions

    record_type = Optional[DependencyRecord]

    def dependencies(self, tracker: "_Questions", path: str) -> DependencyRecord | None:
        """The questions the check of ``path`` asked, and a digest of the answers; ``None`` when the
        file was not in the index (its summary then came from the tree: the answers cannot be replayed
        without parsing it)."""
        view = tracker.view
        if view is None:
            return DependencyRecord((), _answers_digest([]), "")
        if tracker.overlaid:
            return None
        asked = list(dict.fromkeys(tracker.asked))
        answers = tracker.answers
        if any(answers.get(q, (None,))[0] is not view for q in asked):  # asked of another view: ask again
            questions = [_normal(view, q, question=True) for q in asked]
            return DependencyRecord(tuple(questions), _answers_digest(_answers(view, asked)), view.catalog_key)
        # the files of one run ask the same view many of the same questions: each question's normal
        # form and its answer's text are computed once per view (answers are pure functions of it)
        memo = view._dependency_memo
        questions, texts = [], []
        for q in asked:
            found = memo.get(q)
            if found is None:
                found = memo[q] = (_normal(view, q, question=True), _answer_text(_normal(view, answers[q][1])))
            questions.append(found[0])
            texts.append(found[1])
        return DependencyRecord(tuple(questions), _text_digest("[" + ", ".join(texts) + "]"), view.catalog_key)

    def still_valid(self, data: "ClassIndex", path: str, digest: bytes, record: object) -> bool:
        """Replay the recorded questions on the index ``data``: True when the file is indexed with the
        same content, the catalog answers for the same library releases (the project's declared
        ranges admit the same ones) and every answer is the same as when its findings were computed."""
        if not isinstance(record, DependencyRecord):
            return False
        if record.questions and record.catalog != data.catalog_key:  # a file that asked nothing read no catalog
            return False
        i = data.file_index(path)
        if i is None or data.digests[i] != digest:
            return False
        try:
            asked = [_denormal(data, q) for q in record.questions]
            if any(type(q) is not tuple or not q or q[0] not in _TRACKED or _MISSING in q for q in asked):
                return False
        except (KeyError, TypeError, ValueError, IndexError):
            return False
        try:
            return _answers_digest(_answers(data, asked)) == record.answers
        except Exception:  # noqa: BLE001 - a malformed record: re-check the file
            return False


_ONLY_STR = frozenset({str})


# ---------------------------------------------------------------------- what a file's findings depend on
_TRACKED = ("resolve", "summary", "hierarchy", "class_name", "constructed", "patched_members",
            "decorator_adds", "subclasses", "possible_subclasses", "used", "stored", "stored_on_catalog",
            "is_test", "flag_set", "mro_evidence", "private_live", "unimportable")
"""The :class:`ClassIndex` questions E9503 asks while checking a file: its findings are a function of
the file's tree, its options and these answers (plus the bundled catalog, which the cache's version
tag covers, read for the library releases the project's declared ranges admit: the record's ``catalog``)."""


class _Questions:
    """What one file's check asked of the index: ``asked`` (method name, arguments) in order; ``view``:
    the view that answered; ``overlaid``: the file's summary was not the indexed one."""

    def __init__(self) -> None:
        self.asked: list[tuple] = []
        self.view: ClassIndex | None = None
        self.overlaid = False
        self.answers: dict[tuple, tuple] = {}  # question -> (the view that answered, its answer)


class _TrackedIndex:
    """A :class:`ClassIndex` that records the questions asked of it (see
    :meth:`ClassIndexFacts.track`); everything else is the index's own."""

    def __init__(self, index: ClassIndex, questions: _Questions):
        self._index = index
        self._questions = questions

    def __getattr__(self, name: str):
        value = getattr(self._index, name)
        if name in _TRACKED:
            questions = self._questions
            index = self._index
            answers = questions.answers

            def asked(*args, **keywords):
                if keywords:  # a question is recorded (and replayed) with positional arguments
                    args = _positional(value, args, keywords)
                question = (name, *args)
                questions.asked.append(question)
                questions.view = index
                answer = value(*args)
                answers.setdefault(question, (index, answer))
                return answer

            setattr(self, name, asked)  # later uses skip __getattr__
            return asked
        return value

    def overlay(self, path: str, summary: FileSummary) -> "_TrackedIndex":
        """:meth:`ClassIndex.overlay`, tracked (a summary other than the indexed one is noted)."""
        view = self._index.overlay(path, summary)
        if view is not self._index:
            self._questions.overlaid = True
        self._questions.view = view
        return _TrackedIndex(view, self._questions)


def _positional(method, args: tuple, keywords: dict) -> tuple:
    """``args`` and ``keywords`` of a call of the bound ``method`` as positional arguments only."""
    import inspect  # noqa: PLC0415 - only for a question asked with keywords

    bound = inspect.signature(method).bind(*args, **keywords)
    bound.apply_defaults()
    return tuple(bound.arguments.values())


def _normal(view: ClassIndex, value: object, question: bool = False) -> object:
    """``value`` (a question or an answer) as plain data without file numbers: a class key becomes
    ``["k", path, qualname]``, in a question an int (the ``from_file`` arguments) ``["f", path]``;
    sets and lists are sorted, tuples keep their order."""
    kind = type(value)
    if value is None or kind is str or kind is bool:
        return value
    if kind is int:
        return ["f", _record_path(view, value)] if question else value  # type: ignore[arg-type]
    if kind is tuple and len(value) == 2 and type(value[0]) is int and type(value[1]) is str:  # type: ignore[arg-type]
        return ["k", _record_path(view, value[0]), value[1]]  # type: ignore[index]
    if isinstance(value, CatalogEntry):
        return ["c", value.qualname]
    if isinstance(value, Hierarchy):
        memo = _HIER_MEMO.get(id(value))
        if memo is None or memo[0] is not value:
            memo = _HIER_MEMO[id(value)] = (value, _hierarchy_normal(view, value))
        return memo[1]
    if isinstance(value, (set, frozenset, list)):
        if not value or set(map(type, value)) == _ONLY_STR:  # the common case, tested at C speed
            return sorted(value)
        return sorted((_normal(view, v) for v in value), key=repr)
    if isinstance(value, tuple):
        return [_normal(view, v, question) for v in value]
    raise TypeError(f"cannot record a {kind.__name__}")


def _record_path(view: ClassIndex, number: int) -> str:
    """The path of file ``number`` as a dependency record holds it: relative to the project root
    when under it (a record names hundreds of files: absolute paths made the results file and the
    texts hashed for it twice as long), else absolute; :func:`_denormal` joins it to the root."""
    found = view._record_paths.get(number)
    if found is None:
        path = view.paths[number]
        prefix = view._root_prefix
        found = view._record_paths[number] = path[len(prefix):] if path.startswith(prefix) else path
    return found


def _hierarchy_normal(view: ClassIndex, hierarchy: Hierarchy) -> list:
    """The normal form of a :class:`Hierarchy`: its fields in order, large name sets as digests
    (memoized by value on the view: a class's inherited names are often its siblings'); ``members``,
    nearly always ``own | inherited``, as the names it has beyond that and lacks from it, which with
    the other two fields determine it: hashing it whole doubled the cost of recording a hierarchy."""
    out: list = []
    for name in _HIER_FIELDS:
        value = getattr(hierarchy, name)
        if name == "members":
            known = hierarchy.own | hierarchy.inherited
            out.append(["m", _names_normal(view, value - known), _names_normal(view, known - value)])
        elif _all_names(value):
            out.append(_names_normal(view, value))
        else:
            out.append(_normal(view, value))
    return out


def _names_normal(view: ClassIndex, names: frozenset[str]) -> list:
    """A set of names as recorded: sorted, or past 8 names the digest of :func:`_names_digest`
    (memoized by value on the view)."""
    if len(names) <= 8:
        return sorted(names)
    found = view._names_memo.get(names)
    if found is None:
        found = view._names_memo[names] = _names_digest(names)
    return found


def _all_names(value: object) -> bool:
    return type(value) is frozenset and len(value) > 8 and set(map(type, value)) == _ONLY_STR  # type: ignore[arg-type]


def _names_digest(names: frozenset[str]) -> list:
    """A large set of names in a recorded answer (a hierarchy's member lists: hundreds of names for a
    ``torch.nn.Module`` subclass) as a digest of its sorted names: answers are only compared."""
    import hashlib  # noqa: PLC0415

    text = "\0".join(sorted(names)).encode("utf-8", "surrogatepass")
    return ["d", hashlib.blake2b(text, digest_size=16).hexdigest()]


_MISSING = "\0missing"
"""What :func:`_denormal` gives for a file that is not indexed any more."""


_HIER_FIELDS = tuple(Hierarchy.__dataclass_fields__)
_HIER_MEMO: dict[int, tuple] = {}
"""Normal forms of the :class:`Hierarchy` objects met (they are memoized by the index, so the same
object answers the questions of many files); the object is kept to make its id unambiguous."""


def _denormal(view: ClassIndex, value: object) -> object:
    """Inverse of :func:`_normal` for questions (read back as tuples); :data:`_MISSING` for a file not
    indexed."""
    if isinstance(value, (tuple, list)):
        if value and value[0] == "f" and len(value) == 2:
            i = view.file_index(os.path.join(view._root_prefix, _str(value[1])))
            return _MISSING if i is None else i
        if value and value[0] == "k" and len(value) == 3:
            i = view.file_index(os.path.join(view._root_prefix, _str(value[1])))
            return _MISSING if i is None else (i, _str(value[2]))
        if value and value[0] == "c" and len(value) == 2:
            entry = view.catalog.get(_str(value[1]))
            return entry if entry is not None and entry.qualname == value[1] else _MISSING
        return tuple(_denormal(view, v) for v in value)
    if value is None or type(value) is str or type(value) is bool:
        return value
    raise TypeError("malformed question")


def _str(value: object) -> str:
    if type(value) is not str:
        raise TypeError("str expected")
    return sys.intern(value)


def _answers(view: ClassIndex, asked: list) -> list:
    return [_normal(view, getattr(view, q[0])(*q[1:])) for q in asked]


_answer_text = repr
"""The text of an answer's normal form that is hashed (never stored or parsed): ``repr`` of nested
lists, strings, ints, bools and ``None`` is deterministic, and a third cheaper than :mod:`json`'s
encoder for these small values (measured: 5.8 against 8.6 ms for the 3,504 answers of a check of
torch/distributed)."""


def _answers_digest(answers: list) -> str:
    return _text_digest(_answer_text(answers))


def _text_digest(text: str) -> str:
    """The digest of the text of a list of answers (``repr`` of a list is ``[``, its items' texts
    joined by ``, ``, then ``]``, so a digest can be taken from the items' cached texts)."""
    import hashlib  # noqa: PLC0415

    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

