"""The project's function facts: what the functions of every file return and always call (E9502's
gates and must-run helpers), and where each module of the project is (E9501 and E9504 open the file
an imported helper is defined in, on demand).

One layer for the three rules that follow helpers across files: E9502 reads the summaries below;
E9501 and E9504 resolve a call they cannot resolve in the file (a helper imported from another
module of the project) with :meth:`ShardGateIndex.external_definitions`, which maps the import
(:meth:`hp_invariants.semantic.SemanticModel.external`) to a file of the project and parses that file
once (a small per-project cache), so that the same analysis as for a helper of the file runs on it.

E9502 needs to know, for a name used at a call site in one file, what a function, ``@property`` or
instance attribute of that name defined in *another* file of the project evaluates to (is it a
shard-degree predicate?) and which functions always call a must-run step (so that gating them gates
the step). The option values (gate names, quantity regexes, must-run call names) are per file, so
the summaries here hold only raw, option-independent facts; the rule evaluates them with its
options at check time (:class:`ShardGateIndex`).

A summary (:func:`summarize`) is plain data: tuples, frozensets, strings and ints, never ``ast``
nodes. Expressions are kept in a small encoded form (:func:`encode`):

* ``("n", id)``: a name; ``("a", attr, receiver)``: an attribute (``receiver``: the dotted name of
  the object or ``""``); ``("c", name, receiver_method)``: a call (``receiver_method``: ``"x.size"``
  for ``x.size()``; a device-mesh subscript ``mesh["dp_shard"].size()`` reads as
  ``dp_shard_mesh.size``);
* ``("cmp", op, operand, k)``: ``operand <op> k`` with an ``int`` constant ``k`` (normalized so the
  constant is on the right; ``op`` is one of ``> >= < <= == !=``);
* ``("and", items)``, ``("or", items)``, ``("not", item)``; ``("?",)``: anything else.
"""

from __future__ import annotations

import ast
import os
import sys
import weakref
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Optional, Tuple, Union

from hp_invariants.astutil import _CHILD_FIELDS, _HOLEY, EXITS, child_bodies, dotted_name, last_name, walk_function_body
from hp_invariants.api import FileContext, KeyedTable, ListTable
from hp_invariants.declarations import FUNCTION_FACTS, ShardGateFactsDeclaration  # noqa: F401 - FUNCTION_FACTS: re-exported
from hp_invariants.limits import budget_paused
from hp_invariants.semantic import ExternalRef, is_property

UNKNOWN = ("?",)
_OPS = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}
_FLIP = {">": "<", "<": ">", ">=": "<=", "<=": ">=", "==": "==", "!=": "!="}
_ABSTRACT = frozenset({"abstractmethod", "abstractproperty"})
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_BLOCKS = frozenset({ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match,
                     *((ast.TryStar,) if hasattr(ast, "TryStar") else ())})
"""The statements that hold statement lists other than a new scope (see :func:`child_bodies`)."""
_TRIES = frozenset({ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ())})
_EXIT_KINDS = frozenset(EXITS)
_CONTROL = _BLOCKS | _EXIT_KINDS | {ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef}
"""Statements :func:`unconditional_calls` handles by kind; any other is a simple statement."""
_MAX_ENC_DEPTH = 8
_SKIPPED_EXPRESSIONS = frozenset({ast.Lambda, *_COMPS, ast.Constant, ast.Name})
"""Expressions whose evaluation makes no call: names and constants, and lambdas and comprehensions
(lazy or possibly empty). An attribute's value and an f-string's fields are evaluated: entered."""


Operand = Union[str, int, Tuple["Operand", ...]]
"""An item of an encoded expression: a string, an int, or a tuple of such items."""

Expression = Tuple[Operand, ...]
"""An encoded expression (see the module docstring): a tuple of strings, ints and such tuples."""


class FunctionFact(NamedTuple):
    """One ``def`` of a file.

    ``name``: its name; ``is_property``: decorated with ``@property``/``@cached_property``;
    ``returns``: the encoded values of its ``return`` statements when every one returns a value and
    the function is not a generator (``None`` otherwise); ``calls``: the last names of the functions
    it calls on every path that returns normally (see :func:`unconditional_calls`), sorted (a tuple:
    a quarter of a frozenset's memory), or ``None`` where not computed (the project's summaries: see
    :meth:`ShardGateIndex.callers_of`); ``abstract``: an
    ``@abstractmethod`` or a body that only raises ``NotImplementedError`` (a placeholder whose
    overrides decide: it never vetoes the other definitions of its name).
    """

    name: str
    is_property: bool
    returns: Optional[tuple[Expression, ...]]
    calls: Optional[tuple[str, ...]]
    abstract: bool = False


class FileFacts(NamedTuple):
    """E9502's summary of one file: its functions, and its ``self.<attr> = ...`` stores.

    ``attr_values``: ``(attr, encoded value)`` for each store of a boolean-shaped value (a
    comparison, ``and``/``or``, ``not``); ``attr_other``: the attributes stored with anything else
    (or by augmented assignment or unpacking), and the class attributes and dataclass fields of the
    file's classes (a default the instance may keep): these are not predicates.
    """

    functions: tuple[FunctionFact, ...]
    attr_values: tuple[tuple[str, Expression], ...]
    attr_other: frozenset[str]


EMPTY = ((), (), frozenset())


def _intern(name: str) -> str:
    return sys.intern(name)


def is_abstract(func: ast.AST) -> bool:
    """True for an ``@abstractmethod`` or a function whose body (after a docstring) only raises
    ``NotImplementedError``."""
    if any(last_name(dec.func if isinstance(dec, ast.Call) else dec) in _ABSTRACT for dec in func.decorator_list):
        return True
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1:
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    return last_name(exc.func if isinstance(exc, ast.Call) else exc) == "NotImplementedError"


def mesh_receiver(node: ast.AST) -> str | None:
    """The receiver name of a method call: ``x.y`` -> ``"y"``; ``mesh["dp"]`` -> ``"dp_mesh"``."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value + "_mesh"
    return last_name(node)


def receiver_method(func: ast.AST) -> str:
    """``"recv.method"`` of a called attribute (``dp_mesh.size``), else ``""``."""
    if isinstance(func, ast.Attribute):
        recv = mesh_receiver(func.value)
        if recv is not None:
            return f"{recv}.{func.attr}"
    return ""


# ---------------------------------------------------------------------- encoding
def encode(node: ast.AST, aliases: dict[str, ast.AST] | None = None, depth: int = 0) -> tuple:
    """Encode an expression (see the module docstring); ``aliases``: local names bound once."""
    if depth > _MAX_ENC_DEPTH:
        return UNKNOWN
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1 or type(node.ops[0]) not in _OPS:
            return UNKNOWN
        left, right, op = node.left, node.comparators[0], _OPS[type(node.ops[0])]
        if isinstance(left, ast.Constant) and not isinstance(right, ast.Constant):
            left, right, op = right, left, _FLIP[op]
        if not (isinstance(right, ast.Constant) and type(right.value) is int):
            return UNKNOWN
        return ("cmp", op, _operand(left, aliases, depth + 1), right.value)
    if isinstance(node, ast.BoolOp):
        return ("and" if isinstance(node.op, ast.And) else "or",
                tuple(encode(v, aliases, depth + 1) for v in node.values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ("not", encode(node.operand, aliases, depth + 1))
    if isinstance(node, ast.NamedExpr):
        return encode(node.value, aliases, depth + 1)
    return _operand(node, aliases, depth + 1)


def _operand(node: ast.AST, aliases: dict[str, ast.AST] | None, depth: int) -> tuple:
    if isinstance(node, ast.NamedExpr) and depth <= _MAX_ENC_DEPTH:  # (n := f()) > 1 compares f()'s value
        return _operand(node.value, aliases, depth + 1)
    if isinstance(node, ast.Name):
        if aliases and node.id in aliases and depth <= _MAX_ENC_DEPTH:
            return encode(aliases[node.id], None, depth + 1)
        return ("n", _intern(node.id))
    if isinstance(node, ast.Attribute):
        return ("a", _intern(node.attr), dotted_name(node.value) or "")
    if isinstance(node, ast.Call):
        name = last_name(node.func)
        if name is None:
            return UNKNOWN
        return ("c", _intern(name), receiver_method(node.func))
    return UNKNOWN


def _boolean_shaped(node: ast.AST) -> bool:
    return isinstance(node, (ast.Compare, ast.BoolOp)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not))


# ---------------------------------------------------------------------- unconditional calls
def expression_calls(node: ast.AST, out: set[str]) -> None:
    """Add the last names of the calls that evaluating ``node`` always makes.

    Not entered: lambdas, comprehensions (lazy or possibly empty), the branches of a conditional
    expression unless both make the call, and ``and``/``or`` operands after the first.
    """
    statements_calls([node], out)


def statements_calls(nodes: list[ast.AST], out: set[str]) -> None:
    """:func:`expression_calls` of each of ``nodes`` (simple statements, evaluated in turn, or
    expressions), in one walk."""
    stack = list(nodes)
    pop, push, extend, add = stack.pop, stack.append, stack.extend, out.add
    Call, Attribute, Name, IfExp, BoolOp = ast.Call, ast.Attribute, ast.Name, ast.IfExp, ast.BoolOp
    JoinedStr, FormattedValue, Assign, Expr, Compare = ast.JoinedStr, ast.FormattedValue, ast.Assign, ast.Expr, ast.Compare
    skipped, plans, holey = _SKIPPED_EXPRESSIONS, _CHILD_FIELDS, _HOLEY
    while stack:
        cur = pop()
        cls = cur.__class__
        if cls in skipped:  # names and constants: nearly half of all nodes
            continue
        if cls is Attribute:  # x.y.z: nothing to enter; f(m).y: f(m) is evaluated
            value = cur.value
            while value.__class__ is Attribute:
                value = value.value
            if value.__class__ is not Name:
                push(value)
        elif cls is JoinedStr:  # f"{f(m)!r:>{w}}": each field is evaluated
            for part in cur.values:
                if part.__class__ is FormattedValue:
                    value = part.value
                    if value.__class__ is not Name:
                        push(value)
                    if part.format_spec is not None:
                        push(part.format_spec)
        elif cls is Call:
            func = cur.func
            if func.__class__ is Attribute:
                add(func.attr)  # identifiers of a parsed tree are interned by the parser
                push(func.value)
            elif func.__class__ is Name:
                add(func.id)
            else:
                push(func)
            extend(cur.args)
            for keyword in cur.keywords:
                push(keyword.value)
        elif cls is IfExp:
            push(cur.test)
            body: set[str] = set()
            other: set[str] = set()
            expression_calls(cur.body, body)
            expression_calls(cur.orelse, other)
            out |= body & other
        elif cls is BoolOp:
            push(cur.values[0])
        elif cls is Assign:  # the most frequent statement: its fields directly, names not pushed
            for target in cur.targets:
                if target.__class__ is not Name:
                    push(target)
            push(cur.value)
        elif cls is Expr:
            push(cur.value)
        elif cls is Compare:
            push(cur.left)
            extend(cur.comparators)
        else:  # child_nodes(cur), inline
            for name in plans[cls]:
                value = getattr(cur, name, None)
                if value is None:
                    continue
                if value.__class__ is list:
                    extend([v for v in value if v is not None] if name in holey else value)
                else:
                    push(value)


_FALLS, _EXITS, _RAISES = 0, 1, 2
"""How a block ends (:func:`_block_calls`): it runs to its end, it may leave by ``return``/``break``/
``continue``, or every path through it raises."""


def unconditional_calls(stmts: list[ast.stmt], out: set[str]) -> bool:
    """Add to ``out`` the names called on every normal path through ``stmts``; return False when the
    block stops being unconditional (a possible exit was met, or every path raises), True when it
    ran to its end.

    A normal path is one that does not raise: a branch that always raises (``if not valid: raise
    ValueError(...)``, a guard on invalid input) is no path of a normal return, so what the other
    branch calls, and what follows, is still called on every normal path. ``for`` bodies count (the
    step runs for every element), ``while`` bodies, ``except`` handlers and ``match`` cases do not;
    an ``if`` contributes the calls both branches make (or those of the one branch that does not
    always raise), and a branch that may exit ends the unconditional part. A raise inside a ``try``
    or a ``with`` may be caught or suppressed there: it ends the unconditional part like an exit.
    """
    return _block_calls(stmts, out) == _FALLS


def _block_calls(stmts: list[ast.stmt], out: set[str], caught: bool = False) -> int:
    """:func:`unconditional_calls` with how the block ends (``_FALLS``, ``_EXITS``, ``_RAISES``);
    ``caught``: inside a ``try`` body or a ``with`` block of the function, where a raise may be caught
    or suppressed and execution go on normally (a raise there counts as an exit)."""
    simple: list[ast.stmt] = []  # the simple statements since the last other one (walked together)
    for stmt in stmts:
        cls = stmt.__class__
        if cls not in _CONTROL:
            simple.append(stmt)
            continue
        if simple:
            statements_calls(simple, out)
            simple = []
        if cls is ast.If:
            expression_calls(stmt.test, out)
            body: set[str] = set()
            other: set[str] = set()
            body_end = _block_calls(stmt.body, body, caught)
            other_end = _block_calls(stmt.orelse, other, caught)
            if body_end == _RAISES and other_end == _RAISES:
                return _RAISES
            if body_end == _RAISES:
                out |= other
                end = other_end
            elif other_end == _RAISES:
                out |= body
                end = body_end
            else:
                out |= body & other
                end = _FALLS if body_end == other_end == _FALLS else _EXITS
            if end != _FALLS:
                return end
        elif cls is ast.For or cls is ast.AsyncFor:
            expression_calls(stmt.iter, out)
            _block_calls(stmt.body, out, caught)
        elif cls is ast.While:
            expression_calls(stmt.test, out)
        elif cls is ast.With or cls is ast.AsyncWith:
            for item in stmt.items:
                expression_calls(item.context_expr, out)
            if _block_calls(stmt.body, out, True) != _FALLS:
                return _EXITS
        elif cls in _TRIES:
            if _block_calls(stmt.body, out, True) != _FALLS:
                _block_calls(stmt.finalbody, out, caught)
                return _EXITS
            ends = (_block_calls(stmt.orelse, out, caught), _block_calls(stmt.finalbody, out, caught))
            if ends != (_FALLS, _FALLS):
                return _EXITS
        elif cls in _EXIT_KINDS:
            value = getattr(stmt, "value", None) or getattr(stmt, "exc", None)
            if value is not None:
                expression_calls(value, out)
            return _RAISES if cls is ast.Raise and not caught else _EXITS
        # a nested def or class, or a match statement: nothing
    if simple:
        statements_calls(simple, out)
    return _FALLS


# ---------------------------------------------------------------------- returns and aliases
def _return_statements(stmts: list[ast.stmt], out: list[ast.Return]) -> None:
    """Append the ``return`` statements of ``stmts`` (nested blocks included, nested scopes not)."""
    for stmt in stmts:
        if stmt.__class__ is ast.Return:
            out.append(stmt)
        elif stmt.__class__ in _BLOCKS:  # a simple statement holds no other statement
            for body in child_bodies(stmt):
                _return_statements(body, out)


def _local_aliases(func: ast.AST) -> dict[str, ast.AST]:
    """Names of ``func`` bound exactly once, by a simple ``name = value`` (parameters excluded)."""
    counts: dict[str, int] = {}
    values: dict[str, ast.AST] = {}
    args = func.args
    for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
        if arg is not None:
            counts[arg.arg] = 2
    for node in walk_function_body(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        counts[sub.id] = counts.get(sub.id, 0) + 1
                        if sub is target:
                            values[sub.id] = node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
            target = node.target
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    counts[sub.id] = counts.get(sub.id, 0) + 2
    return {name: value for name, value in values.items() if counts.get(name) == 1}


def function_returns(func: ast.AST) -> tuple | None:
    """The encoded return values of ``func``, or ``None`` (no return, a bare return, a generator, or
    a value that is neither boolean-shaped, a name, an attribute nor an argument-free call)."""
    returns: list[ast.Return] = []
    _return_statements(func.body, returns)
    if not returns:
        return None
    for ret in returns:
        value = ret.value
        if value is None:
            return None
        if not (_boolean_shaped(value) or isinstance(value, (ast.Name, ast.Attribute))
                or (isinstance(value, ast.Call) and not value.args and not value.keywords)):
            return None
    encoded = tuple(encode(ret.value) for ret in returns)
    if not any(_boolean_shaped(ret.value) for ret in returns):
        return encoded  # a getter or a delegation: no generator check, no alias needed
    if any(isinstance(node, (ast.Yield, ast.YieldFrom)) for node in walk_function_body(func)):
        return None
    if "'n'," in repr(encoded):
        aliases = _local_aliases(func)
        if aliases:
            encoded = tuple(encode(ret.value, aliases) for ret in returns)
    return encoded


# ---------------------------------------------------------------------- the summary
def summarize(tree: ast.Module, calls: bool = True) -> tuple:
    """Return the summary of a parsed file (never raises for a valid tree): the fields of
    :class:`FileFacts` as plain tuples (functions as plain :class:`FunctionFact` tuples), so that any
    cache format that keeps tuples, frozensets, strings, ints, bools and ``None`` can store it.
    ``calls`` False: every function's ``calls`` is ``None`` (not computed: the project index
    computes them for the few files that can hold a caller of a must-run name, see
    :meth:`ShardGateIndex.callers_of`); it is more than half of the summary's cost."""
    functions: list[tuple] = []
    attr_values: list[tuple[str, tuple]] = []
    attr_other: set[str] = set()
    stack: list[list[ast.stmt]] = [tree.body]
    while stack:  # statements only: defs and stores are statements, expressions need no walk
        for node in stack.pop():
            cls = node.__class__
            if cls is ast.FunctionDef or cls is ast.AsyncFunctionDef:
                called: tuple[str, ...] | None = None
                if calls:
                    found: set[str] = set()
                    unconditional_calls(node.body, found)
                    called = tuple(sorted(found))
                functions.append((_intern(node.name), is_property(node), function_returns(node), called,
                                  is_abstract(node)))
                stack.append(node.body)
            elif cls is ast.Assign:
                for target in node.targets:
                    _store(target, node.value, attr_values, attr_other)
            elif cls is ast.AnnAssign:
                _store(node.target, node.value, attr_values, attr_other)
            elif cls is ast.AugAssign:
                _store(node.target, None, attr_values, attr_other)
            elif cls is ast.Expr or cls is ast.Return or cls is ast.Import or cls is ast.ImportFrom:
                continue
            elif cls is ast.ClassDef:
                for stmt in node.body:  # class attributes and dataclass fields: not predicates
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else (
                        [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
                    for target in targets:
                        if isinstance(target, ast.Name):
                            attr_other.add(_intern(target.id))
                stack.append(node.body)
            else:
                for name in ("body", "orelse", "finalbody"):
                    block = getattr(node, name, None)
                    if block:
                        stack.append(block)
                for handler in getattr(node, "handlers", None) or ():
                    stack.append(handler.body)
                for case in getattr(node, "cases", None) or ():
                    stack.append(case.body)
    return (tuple(functions), tuple(attr_values), frozenset(attr_other))


def _store(target: ast.AST, value: ast.AST | None, attr_values: list, attr_other: set) -> None:
    """Record a store into ``self.<attr>`` (``value`` ``None``: augmented or without a value)."""
    if isinstance(target, ast.Attribute):
        if isinstance(target.value, ast.Name) and target.value.id == "self":
            if value is not None and _boolean_shaped(value):
                attr_values.append((_intern(target.attr), encode(value)))
            else:
                attr_other.add(_intern(target.attr))
    elif isinstance(target, (ast.Tuple, ast.List, ast.Starred)):
        for sub in ast.walk(target):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self":
                attr_other.add(_intern(sub.attr))


def may_name_project_module(ref: ExternalRef, path: str) -> bool:
    """A cheap test before the project facts are read: the import ``ref`` of the file ``path`` is
    relative, or its top-level package is named like a folder ``path`` is in (``megatron.bridge`` from
    ``.../src/megatron/bridge/x.py``); ``torch``, ``functools`` ... are not, so a call of theirs never
    makes a rule read the project facts."""
    if ref.level:
        return True
    top = (ref.module or "").split(".")[0]
    return bool(top) and top in os.path.dirname(os.path.abspath(path)).split(os.sep)


class ShardGateIndex:
    """Every file's :class:`FileFacts` of one project, by name (what E9502 reads at check time).

    ``functions[name]``: ``(file number, FunctionFact)`` of every ``def`` of that name;
    ``attr_values[attr]``: ``(file number, encoded value)`` of every boolean-shaped ``self.attr``
    store; ``attr_other[attr]``: the file numbers storing anything else. The functions' call sets are
    not indexed: :meth:`callers_of` and :meth:`calls_of` compute them for the files that can hold a
    caller. ``memo`` holds results the rule derives with its options (the must-run closure), keyed
    by the option values, and those call sets. Read back from the store (:meth:`from_parts`),
    ``files`` is a :class:`~hp_invariants.api.ListTable` and ``functions`` and ``attr_other`` are
    :class:`~hp_invariants.api.KeyedTable` views with the same ``get``/``[]`` answers.
    """

    def __init__(self, paths: Iterable[str], summaries: Iterable[FileFacts], digests: Iterable[bytes] = (),
                 root: str = ""):
        self.root = str(root)
        self.paths = list(paths)
        self.file_no = {path: i for i, path in enumerate(self.paths)}
        self.digests = list(digests)
        self.files: Any = []  # each file's summary (a lazy sequence when read back from the cache)
        self.functions: dict[str, list[tuple[int, FunctionFact]]] = {}
        self.attr_values: dict[str, list[tuple[int, tuple]]] = {}
        self.attr_other: dict[str, set[int]] = {}
        self.memo: dict[Any, Any] = {}
        for number, facts in enumerate(summaries):
            self.files.append(facts)
            functions, attr_values, attr_other = FileFacts(*facts)
            for func in functions:
                func = FunctionFact(*func)
                self.functions.setdefault(func.name, []).append((number, func))
            for attr, value in attr_values:
                self.attr_values.setdefault(attr, []).append((number, value))
            for attr in attr_other:
                self.attr_other.setdefault(attr, set()).add(number)

    def file_index(self, path: str) -> int | None:
        """The number of the file ``path`` (relative to the working folder or absolute), else ``None``."""
        number = self.file_no.get(path)
        return number if number is not None else self.file_no.get(os.path.abspath(path))

    def to_parts(self) -> dict[str, Any]:
        """This index as the parts :attr:`ShardGateFacts.built_parts` declares (:meth:`from_parts`
        reads them back)."""
        return {"root": self.root, "paths": self.paths, "digests": self.digests, "files": list(self.files),
                "functions": self.functions, "attr_values": self.attr_values, "attr_other": self.attr_other}

    @classmethod
    def from_parts(cls, parts: dict[str, Any]) -> "ShardGateIndex":
        """The index :meth:`to_parts` gave, from its parts as the store read them back (the per-name
        tables are read entry by entry, when first asked for); raises ``ValueError`` when the lists
        do not have one entry per file."""
        index = cls.__new__(cls)
        index.root = parts["root"]
        index.paths = parts["paths"]
        index.file_no = {path: i for i, path in enumerate(index.paths)}
        index.digests = parts["digests"]
        index.files = parts["files"]
        if not len(index.paths) == len(index.digests) == len(index.files):
            raise ValueError("index lists of different lengths")
        index.functions = parts["functions"]
        index.attr_values = parts["attr_values"]
        index.attr_other = parts["attr_other"]
        index.memo = {}
        return index

    # ------------------------------------------------------------------ other files, on demand
    _OPEN_FILES = 16
    """At most this many other files' trees are kept per project (least recently used dropped)."""

    def module_path(self, module: str, level: int, from_path: str) -> str | None:
        """The file of the project that the module ``module`` (dotted; relative to the folder of
        ``from_path`` when ``level`` > 0, as Python resolves ``from ..m import f``) is: ``a/b.py`` or
        ``a/b/__init__.py``; ``None`` when the project has no such file, or several (two folders of
        the project both hold an ``a/b.py``: which one is imported depends on ``sys.path``)."""
        parts = [p for p in module.split(".") if p]
        key = ("module", module, level, os.path.dirname(os.path.abspath(from_path)) if level else "")
        if key in self.memo:
            return self.memo[key]
        found: str | None = None
        if level:
            base = os.path.dirname(os.path.abspath(from_path))
            for _ in range(level - 1):
                base = os.path.dirname(base)
            stem = os.path.join(base, *parts)
            candidates = (stem + ".py", os.path.join(stem, "__init__.py")) if parts else (os.path.join(base, "__init__.py"),)
            hits = [c for c in candidates if self.file_index(c) is not None]
            found = hits[0] if len(hits) == 1 else None
        elif parts:
            tails = (os.sep + os.path.join(*parts) + ".py", os.sep + os.path.join(*parts, "__init__.py"))
            hits = [p for p in self.paths if p.endswith(tails)]
            found = os.path.abspath(hits[0]) if len(hits) == 1 else None
        self.memo[key] = found
        return found

    def open_file(self, path: str, options: dict[str, Any]) -> FileContext | None:
        """A :class:`~hp_invariants.api.FileContext` of the project file ``path`` (read and parsed
        once, kept among the last few opened), with ``options``; ``None`` when it cannot be read,
        decoded or parsed."""
        from collections import OrderedDict  # noqa: PLC0415
        import warnings  # noqa: PLC0415

        from hp_invariants.source import SourceFile, read_source_bytes  # noqa: PLC0415

        opened = self.memo.setdefault("open", OrderedDict())
        key = os.path.abspath(path)
        if key in opened:
            opened.move_to_end(key)
            ctx = opened[key]
        else:
            try:
                raw, _ = read_source_bytes(key, _MAX_READ)
                source = SourceFile.from_bytes(key, raw)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tree = ast.parse(source.text, filename=key)
            except (OSError, ValueError, SyntaxError, RecursionError, MemoryError):
                ctx = None
            else:
                ctx = FileContext(source, tree)
            opened[key] = ctx
            while len(opened) > self._OPEN_FILES:
                opened.popitem(last=False)
        if ctx is not None:
            ctx.options = options
        return ctx

    def external_definitions(self, ref: ExternalRef, from_path: str, options: dict[str, Any],
                             depth: int = 0) -> tuple[FileContext, list[ast.AST]] | None:
        """The module-level ``def`` statements an import reaches (``ref``, of the file ``from_path``),
        with the context of their file: the module named by ``ref`` and the leading names of its
        attribute chain, then the last name defined there (complete: nothing else binds it at module
        level), or re-exported there by another import (followed, at most 4 deep); ``None`` when the
        module is not a file of the project, or the name is not a function defined in it."""
        if not ref.attrs or depth > 4:
            return None
        module = ".".join(p for p in (ref.module, *ref.attrs[:-1]) if p)
        path = self.module_path(module, ref.level, from_path) if module or ref.level else None
        ctx = self.open_file(path, options) if path is not None else None
        if ctx is None:
            return None
        name = ref.attrs[-1]
        resolution = ctx.semantic.module_definitions(name)
        if resolution.complete and resolution.candidates:
            return ctx, list(resolution.candidates)
        again = ctx.semantic.module_import(name)
        if again is not None:
            return self.external_definitions(again, ctx.path, options, depth + 1)
        return None

    def relative(self, path: str) -> str:
        """``path`` relative to the project root (for messages)."""
        return os.path.relpath(os.path.abspath(path), self.root) if self.root else path

    # ------------------------------------------------------------------ calls, on demand
    def callers_of(self, callees: Iterable[str]) -> dict[str, list[str]]:
        """``callee -> names of the functions that call it on every normal path`` for each of
        ``callees``, over the whole project: a name once per ``def`` that calls it, the names in the
        order of their first ``def`` in the project (files in index order, a file's functions in
        source order). Memoized per callee.

        The summaries hold no call sets (:func:`summarize` with ``calls=False``): a function can
        only call ``f`` if ``f`` occurs in its file's text (an identifier is its source spelling, or
        its NFKC form: :func:`~hp_invariants.source.identifier_text`; a file whose coding cookie reads
        ASCII bytes as other text is decoded first), so only the files holding
        one of ``callees`` are parsed again (:meth:`calls_of`), after one pass over the
        project's files."""
        callees = list(callees)
        memo = self.memo.setdefault("callers", {})
        wanted = [name for name in dict.fromkeys(callees) if name not in memo]
        if wanted:
            holding = self._files_naming(wanted)
            for callee in wanted:
                memo[callee] = self._callers_in(callee, holding[callee])
        return {name: memo[name] for name in callees}

    def calls_of(self, name: str, k: int) -> tuple[str, ...]:
        """The names the ``k``-th ``def`` of ``name`` (``functions[name][k]``) calls on every normal
        path, from its file's tree (read and parsed once: :meth:`_file_calls`); ``()`` where the file
        changed since it was indexed, or no longer parses."""
        defs = self.functions.get(name, ())
        number = defs[k][0]
        nth = 0  # the defs of `name` before it in its file (defs are in file order: a short walk back)
        while k - nth - 1 >= 0 and defs[k - nth - 1][0] == number:
            nth += 1
        found = self._file_calls(number).get(name, ())
        return found[nth] if nth < len(found) else ()

    def _callers_in(self, callee: str, numbers: list[int]) -> list[str]:
        """:meth:`callers_of` for one callee, given the files whose text holds it."""
        names: dict[str, tuple[int, int]] = {}  # name -> where it is first defined in the project
        for number in numbers:
            for name in self._positions(number):
                if name not in names:
                    first = self.functions.get(name)
                    where = first[0][0] if first else number
                    names[name] = (where, self._positions(where).get(name, 0))
        holding = set(numbers)
        found: list[str] = []
        for name in sorted(names, key=names.__getitem__):
            for k, (number, _func) in enumerate(self.functions.get(name, ())):
                if number in holding and callee in self.calls_of(name, k):
                    found.append(name)
        return found

    def _positions(self, number: int) -> dict[str, int]:
        """``name -> position of its first def among the functions of file number`` (memoized: a
        file of many functions is asked about each of them)."""
        memo = self.memo.setdefault("positions", {})
        found = memo.get(number)
        if found is None:
            facts = self.files[number]
            found = {}
            for i, func in enumerate(facts[0] if isinstance(facts, (tuple, list)) and len(facts) == 3 else ()):
                found.setdefault(func[0], i)
            memo[number] = found
        return found

    def _files_naming(self, names: list[str]) -> dict[str, list[int]]:
        """The numbers of the indexed files whose text holds each of ``names`` (one read of each file
        with functions; a file that can no longer be read holds none)."""
        from hp_invariants.source import (SourceDecodeError, SourceFile, ascii_as_written,  # noqa: PLC0415
                                          identifier_text, read_source_bytes)

        out: dict[str, list[int]] = {name: [] for name in names}
        encoded = [(name, name.encode("utf-8", "surrogatepass")) for name in names]
        with budget_paused():  # per-project work, not the checked file's
            for number, path in enumerate(self.paths):
                facts = self.files[number]
                if not (isinstance(facts, (tuple, list)) and len(facts) == 3 and facts[0]):
                    continue  # no function: no caller
                try:
                    raw, _ = read_source_bytes(os.path.abspath(path), _MAX_READ)
                except (OSError, ValueError):
                    continue
                if ascii_as_written(raw):
                    hits = [name for name, data in encoded if data in raw]
                else:
                    try:
                        text = identifier_text(SourceFile.from_bytes(path, raw).text, remember=False)
                    except (SourceDecodeError, ValueError):
                        continue
                    hits = [name for name, _ in encoded if name in text]
                for name in hits:
                    out[name].append(number)
        return out

    def _file_calls(self, number: int) -> dict[str, list[tuple[str, ...]]]:
        """``name -> calls of each def of it`` in the file ``number`` (in source order), from its tree
        (read and parsed once); ``{}`` when its bytes are no longer the indexed ones or do not parse."""
        memo = self.memo.setdefault("calls", {})
        found = memo.get(number)
        if found is not None:
            return found
        import warnings  # noqa: PLC0415

        from hp_invariants.source import SourceFile, content_digest, read_source_bytes  # noqa: PLC0415

        found = {}
        with budget_paused():
            try:
                raw, _ = read_source_bytes(os.path.abspath(self.paths[number]), _MAX_READ)
                if number < len(self.digests) and content_digest(raw) == self.digests[number]:
                    source = SourceFile.from_bytes(self.paths[number], raw)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        tree = ast.parse(source.text, filename=self.paths[number])
                    for func in summarize(tree)[0]:
                        found.setdefault(func[0], []).append(func[3])
            except (OSError, ValueError, SyntaxError, RecursionError, MemoryError):
                found = {}
        memo[number] = found
        return found


_MAX_READ = 8 * 1024 * 1024
"""Bytes read at most of a project file opened again (as :meth:`ShardGateIndex.open_file`)."""


class ShardGateFacts(ShardGateFactsDeclaration):
    """E9502's :class:`~hp_invariants.api.ProjectFacts`: :func:`summarize` per file, a
    :class:`ShardGateIndex` per project."""

    summary_type = FileFacts

    def summarize(self, tree: ast.Module, path: str, module: str | None = None) -> tuple:
        """Return the summary of ``tree`` without call sets (:func:`summarize` with ``calls=False``;
        the path and module name are not used)."""
        return summarize(tree, calls=False)

    def build(self, root: Path, paths: list[str], summaries: list[Any], digests: list[bytes]) -> ShardGateIndex:
        """Return the :class:`ShardGateIndex` of the project's files."""
        return ShardGateIndex(paths, (s if isinstance(s, (tuple, list)) and len(s) == 3 else EMPTY
                                      for s in summaries), digests, str(root))

    built_parts = {
        "root": str, "paths": list[str], "digests": list[bytes],
        "files": ListTable[FileFacts],
        "functions": KeyedTable[list[tuple[int, FunctionFact]]],
        "attr_values": dict[str, list[tuple[int, Expression]]],
        "attr_other": KeyedTable[set[int]],
    }

    def persist(self, data: ShardGateIndex) -> dict[str, Any]:
        """Return the parts of the index (:meth:`ShardGateIndex.to_parts`)."""
        return data.to_parts()

    def restore(self, parts: dict[str, Any], rebuild: Callable[[], ShardGateIndex]) -> ShardGateIndex:
        """Return the index from its stored parts (:meth:`ShardGateIndex.from_parts`)."""
        return ShardGateIndex.from_parts(parts)


BUILT: "weakref.WeakSet[ShardGateIndex]" = weakref.WeakSet()
"""Every index :data:`FUNCTION_FACTS` built or read in this process (E9502's text prefilter lets
through files that call a must-run helper of one of these projects by name)."""


class _RegisteringFacts(ShardGateFacts):
    """:class:`ShardGateFacts` that remembers each index it builds in :data:`BUILT`."""

    def build(self, root, paths, summaries, digests):
        """Build the index (see :meth:`ShardGateFacts.build`) and register it."""
        index = super().build(root, paths, summaries, digests)
        BUILT.add(index)
        return index

    def restore(self, parts, rebuild):
        """Restore the stored index (see :meth:`ShardGateFacts.restore`) and register it."""
        index = super().restore(parts, rebuild)
        BUILT.add(index)
        return index
