"""Small ``ast`` helpers shared by the rules (names of expressions, function walks, qualified scopes)."""

from __future__ import annotations

import ast
from typing import Sequence

FunctionNode = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
"""The nodes that open a new scope (a walk of one scope includes them but does not enter them)."""
_SCOPES = frozenset(SCOPES)


def dotted_name(node: ast.AST) -> str | None:
    """Return ``"a.b.c"`` for a ``Name``/``Attribute`` chain, else ``None``.

    ``torch.no_grad`` -> ``"torch.no_grad"``; ``self.x.y`` -> ``"self.x.y"``; ``f().x`` -> ``None``.
    """
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def last_name(node: ast.AST) -> str | None:
    """Return the last component of a name (``torch.no_grad`` -> ``no_grad``; ``x`` -> ``x``)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def walk_function_body(func: ast.AST) -> list[ast.AST]:
    """Return the nodes of a function (or any node) without entering nested functions, lambdas or
    classes (their own nodes are left out; the nested ``def``/``lambda``/``class`` node itself is
    included), without the ``ctx``/``op`` singletons; breadth-first, as a list (no generator frames)."""
    out = child_nodes(func)
    for node in out:  # the list grows while it is read: a breadth-first walk
        if node.__class__ in _SCOPES:
            continue
        for name in _CHILD_FIELDS[node.__class__]:
            value = getattr(node, name, None)
            if value is None:
                continue
            if value.__class__ is list:
                out.extend([v for v in value if v is not None] if name in _HOLEY else value)
            else:
                out.append(value)
    return out


def names_in_target(target: ast.AST) -> list[str]:
    """The names an assignment target binds: ``x``, ``a, (b, *c)`` -> ``a``, ``b``, ``c``; attributes
    and subscripts (``self.x``, ``t[i]``) bind no name."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in names_in_target(elt)]
    if isinstance(target, ast.Starred):
        return names_in_target(target.value)
    return []


def child_bodies(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists nested in a compound statement: ``body``, ``orelse``, ``finalbody``, the
    ``except`` handlers' and the ``match`` cases' bodies (empty for a simple statement)."""
    bodies = []
    for field_name in ("body", "orelse", "finalbody"):
        value = getattr(stmt, field_name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            bodies.append(value)
    for handler in getattr(stmt, "handlers", []) or []:
        bodies.append(handler.body)
    for case in getattr(stmt, "cases", []) or []:
        bodies.append(case.body)
    return bodies


EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def always_exits(stmts: Sequence[ast.stmt]) -> bool:
    """True when a block always leaves via return/raise/continue/break (the last statement decides; an
    ``if`` whose branches both always exit counts)."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, EXITS):
        return True
    if isinstance(last, ast.If):
        return always_exits(last.body) and always_exits(last.orelse)
    return False


def string_value(node: ast.AST) -> str | None:
    """Return the value of a ``str`` constant node, else ``None``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


# ---------------------------------------------------------------------- fast traversal
# Fields holding no node (identifiers, strings, ints, constants) and the context/operator singletons
# (``ctx``, ``op``, ``ops``: never looked at by a walk in this package); everything else may hold
# a node, a list of nodes, or ``None``.
_SKIPPED_FIELDS = {
    "FunctionDef": ("name", "type_comment"), "AsyncFunctionDef": ("name", "type_comment"),
    "ClassDef": ("name",), "Assign": ("type_comment",), "For": ("type_comment",),
    "AsyncFor": ("type_comment",), "With": ("type_comment",), "AsyncWith": ("type_comment",),
    "AnnAssign": ("simple",), "ImportFrom": ("module", "level"), "Global": ("names",),
    "Nonlocal": ("names",), "Attribute": ("attr", "ctx"), "Name": ("id", "ctx"),
    "Constant": ("value", "kind"), "FormattedValue": ("conversion",), "comprehension": ("is_async",),
    "ExceptHandler": ("name",), "arg": ("arg", "type_comment"), "keyword": ("arg",),
    "alias": ("name", "asname"), "MatchSingleton": ("value",), "MatchStar": ("name",),
    "MatchMapping": ("rest",), "MatchClass": ("kwd_attrs",), "MatchAs": ("name",),
    "TypeIgnore": ("lineno", "tag"), "TypeVar": ("name",), "ParamSpec": ("name",),
    "TypeVarTuple": ("name",), "Starred": ("ctx",), "List": ("ctx",), "Tuple": ("ctx",),
    "Subscript": ("ctx",), "BinOp": ("op",), "BoolOp": ("op",), "UnaryOp": ("op",),
    "AugAssign": ("op",), "Compare": ("ops",),
}


class _FieldPlans(dict):
    """``node class -> child_fields(node class)``, computed on first lookup (``plans[cls]`` is a
    plain dict lookup in the hot loops)."""

    def __missing__(self, cls: type) -> tuple[str, ...]:
        skipped = _SKIPPED_FIELDS.get(cls.__name__, ())
        fields = self[cls] = tuple(f for f in getattr(cls, "_fields", ()) if f not in skipped)
        return fields


_CHILD_FIELDS: dict[type, tuple[str, ...]] = _FieldPlans()
_HOLEY = frozenset({"keys", "kw_defaults"})  # list fields that may hold None (Dict, arguments)


def child_fields(cls: type) -> tuple[str, ...]:
    """Return the fields of node class ``cls`` that may hold child nodes, in ``_fields`` order.

    Scalar fields and the ``ctx``/``op``/``ops`` singletons are left out, so iterating these fields
    gives the children of :func:`ast.iter_child_nodes` in the same order, minus the
    ``expr_context``/``operator`` nodes (and minus the ``None`` holes of ``Dict.keys`` and
    ``arguments.kw_defaults``, which :func:`ast.iter_child_nodes` skips as well).
    """
    return _CHILD_FIELDS[cls]


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """Return :func:`ast.iter_child_nodes` of ``node`` as a list, without the ``ctx``/``op``
    singletons (see :func:`child_fields`); no generator frames, for hot loops."""
    out: list[ast.AST] = []
    for name in _CHILD_FIELDS[node.__class__]:
        value = getattr(node, name, None)
        if value is None:
            continue
        if value.__class__ is list:
            out.extend([v for v in value if v is not None] if name in _HOLEY else value)
        else:
            out.append(value)
    return out


def walk_nodes(root: ast.AST) -> list[ast.AST]:
    """Return the nodes of :func:`ast.walk` ``(root)`` as a list, in the same (breadth-first) order,
    without the ``ctx``/``op`` singletons (see :func:`child_fields`). About three times faster than
    :func:`ast.walk` for rules that filter by node type."""
    out = [root]
    append = out.append
    extend = out.extend
    plans = _CHILD_FIELDS
    holey = _HOLEY
    for node in out:  # the list grows while it is read: a breadth-first walk
        for name in plans[node.__class__]:
            value = getattr(node, name, None)
            if value is None:
                continue
            if value.__class__ is list:
                if name in holey:  # Dict.keys / arguments.kw_defaults may hold None
                    extend([v for v in value if v is not None])
                else:
                    extend(value)
            else:
                append(value)
    return out


def walk_nodes_pruned(roots: Sequence[ast.AST], functions: set[int]) -> list[ast.AST]:
    """Return the nodes of :func:`walk_nodes` from each of ``roots`` (breadth-first, every root
    first), without the nodes below the function definitions whose ``id`` is in ``functions`` (the
    ``def`` node itself is returned): the rest of a tree whose functions were walked already."""
    out = list(roots)
    append = out.append
    extend = out.extend
    plans = _CHILD_FIELDS
    holey = _HOLEY
    for node in out:  # the list grows while it is read: a breadth-first walk
        kind = node.__class__
        if (kind is ast.FunctionDef or kind is ast.AsyncFunctionDef) and id(node) in functions:
            continue
        for name in plans[kind]:
            value = getattr(node, name, None)
            if value is None:
                continue
            if value.__class__ is list:
                if name in holey:
                    extend([v for v in value if v is not None])
                else:
                    extend(value)
            else:
                append(value)
    return out


def walk_with_parents(root: ast.AST) -> tuple[list[ast.AST], list[ast.AST | None]]:
    """Return ``(nodes, parents)``: :func:`walk_nodes` ``(root)`` and, at the same positions, the
    parent of each node (``None`` for ``root``), from one pass."""
    out = [root]
    owners: list[ast.AST | None] = [None]
    append = out.append
    extend = out.extend
    own_append = owners.append
    own_extend = owners.extend
    plans = _CHILD_FIELDS
    holey = _HOLEY
    for node in out:  # the list grows while it is read: a breadth-first walk
        for name in plans[node.__class__]:
            value = getattr(node, name, None)
            if value is None:
                continue
            if value.__class__ is list:
                if name in holey:
                    value = [v for v in value if v is not None]
                extend(value)
                own_extend([node] * len(value))
            else:
                append(value)
                own_append(node)
    return out, owners


# ---------------------------------------------------------------------- qualified scopes (history hooks)
def qualified_scopes(tree: ast.AST) -> dict[str, ast.AST]:
    """Map every qualified name (``Class.method``, ``outer.inner``) of ``tree`` to its def node.

    Names are those of :meth:`hp_invariants.api.FileContext.enclosing_scope_name` (a finding's
    ``obj``); the first definition of a name wins.
    """
    found: dict[str, ast.AST] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                found.setdefault(name, child)
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def parent_map(root: ast.AST) -> dict[int, ast.AST]:
    """``id(node) -> parent`` for every node below ``root``."""
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(root):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def scope_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope``'s body, depth first, not descending into nested functions, classes or
    lambdas (whose def node itself is included)."""
    out = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        out.append(node)
        if not isinstance(node, SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return out


def statement_of(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST:
    """The statement holding ``node`` (``parents``: :func:`parent_map` of a node above it)."""
    while not isinstance(node, ast.stmt) and id(node) in parents:
        node = parents[id(node)]
    return node


def nodes_at_line(scope: ast.AST, line: int) -> list[ast.AST]:
    """The nodes below ``scope`` that start on ``line``."""
    return [n for n in ast.walk(scope) if getattr(n, "lineno", None) == line]
