"""Project-wide facts of E9502 (``shard-gated-reset``): gates and must-run helpers of every file.

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
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Optional, Tuple, Union

from hp_invariants.astutil import _CHILD_FIELDS, _HOLEY, EXITS, child_bodies, dotted_name, last_name, walk_function_body
from hp_invariants.api import KeyedTable, ListTable, ProjectFacts
from hp_invariants.semantic import is_property

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
_SKIPPED_EXPRESSIONS = frozenset({ast.Lambda, *_COMPS, ast.Constant, ast.Name, ast.JoinedStr, ast.Attribute})


Operand = Union[str, int, Tuple["Operand", ...]]
"""An item of an encoded expression: a string, an int, or a tuple of such items."""

Expression = Tuple[Operand, ...]
"""An encoded expression (see the module docstring): a tuple of strings, ints and such tuples."""


class FunctionFact(NamedTuple):
    """One ``def`` of a file.

    ``name``: its name; ``is_property``: decorated with ``@property``/``@cached_property``;
    ``returns``: the encoded values of its ``return`` statements when every one returns a value and
    the function is not a generator (``None`` otherwise); ``calls``: the last names of the functions
    it calls on every path that returns normally (see :func:`unconditional_calls`); ``abstract``: an
    ``@abstractmethod`` or a body that only raises ``NotImplementedError`` (a placeholder whose
    overrides decide: it never vetoes the other definitions of its name).
    """

    name: str
    is_property: bool
    returns: Optional[tuple[Expression, ...]]
    calls: frozenset[str]
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
    stack = [node]
    pop, push, extend, add = stack.pop, stack.append, stack.extend, out.add
    Call, Attribute, Name, IfExp, BoolOp = ast.Call, ast.Attribute, ast.Name, ast.IfExp, ast.BoolOp
    skipped, plans, holey = _SKIPPED_EXPRESSIONS, _CHILD_FIELDS, _HOLEY
    while stack:
        cur = pop()
        cls = cur.__class__
        if cls in skipped:  # names, attributes and constants: a third of all nodes
            continue
        if cls is Call:
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
        else:  # child_nodes(cur), inline
            for name in plans[cls]:
                value = getattr(cur, name, None)
                if value is None:
                    continue
                if value.__class__ is list:
                    extend([v for v in value if v is not None] if name in holey else value)
                else:
                    push(value)


def unconditional_calls(stmts: list[ast.stmt], out: set[str]) -> bool:
    """Add to ``out`` the names called on every normal path through ``stmts``; return False when the
    block stops being unconditional (a possible exit was met), True when it ran to its end.

    ``for`` bodies count (the step runs for every element), ``while`` bodies, ``except`` handlers and
    ``match`` cases do not; an ``if`` contributes the calls both branches make, and a branch that may
    exit ends the unconditional part.
    """
    for stmt in stmts:
        cls = stmt.__class__
        if cls not in _CONTROL:  # a simple statement: its expressions are evaluated in order
            expression_calls(stmt, out)
        elif cls is ast.If:
            expression_calls(stmt.test, out)
            body: set[str] = set()
            other: set[str] = set()
            body_done = unconditional_calls(stmt.body, body)
            other_done = unconditional_calls(stmt.orelse, other)
            out |= body & other
            if not (body_done and other_done):
                return False
        elif cls is ast.For or cls is ast.AsyncFor:
            expression_calls(stmt.iter, out)
            unconditional_calls(stmt.body, out)
        elif cls is ast.While:
            expression_calls(stmt.test, out)
        elif cls is ast.With or cls is ast.AsyncWith:
            for item in stmt.items:
                expression_calls(item.context_expr, out)
            if not unconditional_calls(stmt.body, out):
                return False
        elif cls in _TRIES:
            if not unconditional_calls(stmt.body, out):
                unconditional_calls(stmt.finalbody, out)
                return False
            if not unconditional_calls(stmt.orelse, out) or not unconditional_calls(stmt.finalbody, out):
                return False
        elif cls in _EXIT_KINDS:
            value = getattr(stmt, "value", None) or getattr(stmt, "exc", None)
            if value is not None:
                expression_calls(value, out)
            return False
        # a nested def or class, or a match statement: nothing
    return True


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
def summarize(tree: ast.Module) -> tuple:
    """Return the summary of a parsed file (never raises for a valid tree): the fields of
    :class:`FileFacts` as plain tuples (functions as plain :class:`FunctionFact` tuples), so that any
    cache format that keeps tuples, frozensets, strings, ints, bools and ``None`` can store it."""
    functions: list[tuple] = []
    attr_values: list[tuple[str, tuple]] = []
    attr_other: set[str] = set()
    stack: list[list[ast.stmt]] = [tree.body]
    while stack:  # statements only: defs and stores are statements, expressions need no walk
        for node in stack.pop():
            cls = node.__class__
            if cls is ast.FunctionDef or cls is ast.AsyncFunctionDef:
                calls: set[str] = set()
                unconditional_calls(node.body, calls)
                functions.append((_intern(node.name), is_property(node), function_returns(node), frozenset(calls),
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


class ShardGateIndex:
    """Every file's :class:`FileFacts` of one project, by name (what E9502 reads at check time).

    ``functions[name]``: ``(file number, FunctionFact)`` of every ``def`` of that name;
    ``attr_values[attr]``: ``(file number, encoded value)`` of every boolean-shaped ``self.attr``
    store; ``attr_other[attr]``: the file numbers storing anything else. ``memo`` holds results the
    rule derives with its options (the must-run closure), keyed by the option values. Read back from
    the store (:meth:`from_parts`), ``files`` is a :class:`~hp_invariants.api.ListTable` and
    ``functions``, ``attr_other`` and :meth:`callers` are :class:`~hp_invariants.api.KeyedTable` views
    with the same ``get``/``[]`` answers.
    """

    def __init__(self, paths: Iterable[str], summaries: Iterable[FileFacts], digests: Iterable[bytes] = ()):
        self.paths = list(paths)
        self.file_no = {path: i for i, path in enumerate(self.paths)}
        self.digests = list(digests)
        self.files: Any = []  # each file's summary (a lazy sequence when read back from the cache)
        self.functions: dict[str, list[tuple[int, FunctionFact]]] = {}
        self.attr_values: dict[str, list[tuple[int, tuple]]] = {}
        self.attr_other: dict[str, set[int]] = {}
        self.memo: dict[Any, Any] = {}
        self._callers: dict[str, list[str]] | None = None
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

    def file_facts(self, path: str, digest: bytes) -> tuple | None:
        """The indexed summary of ``path`` (:func:`summarize` of its tree) when the file's bytes have
        the content ``digest`` indexed, else ``None`` (also when the cached text of it is malformed)."""
        number = self.file_index(path)
        if number is None or number >= len(self.digests) or not self.digests[number] \
                or digest != self.digests[number]:
            return None
        facts = self.files[number]
        if facts is None:
            return None
        return facts if isinstance(facts, (tuple, list)) and len(facts) == 3 else None

    def to_parts(self) -> dict[str, Any]:
        """This index as the parts :attr:`ShardGateFacts.built_parts` declares (:meth:`from_parts`
        reads them back)."""
        return {"paths": self.paths, "digests": self.digests, "files": list(self.files), "functions": self.functions,
                "callers": self.callers(), "attr_values": self.attr_values, "attr_other": self.attr_other}

    @classmethod
    def from_parts(cls, parts: dict[str, Any]) -> "ShardGateIndex":
        """The index :meth:`to_parts` gave, from its parts as the store read them back (the per-name
        tables are read entry by entry, when first asked for); raises ``ValueError`` when the lists
        do not have one entry per file."""
        index = cls.__new__(cls)
        index.paths = parts["paths"]
        index.file_no = {path: i for i, path in enumerate(index.paths)}
        index.digests = parts["digests"]
        index.files = parts["files"]
        if not len(index.paths) == len(index.digests) == len(index.files):
            raise ValueError("index lists of different lengths")
        index.functions = parts["functions"]
        index.attr_values = parts["attr_values"]
        index.attr_other = parts["attr_other"]
        index._callers = parts["callers"]
        index.memo = {}
        return index

    def callers(self) -> dict[str, list[str]]:
        """``callee -> names of the functions that call it on every normal path`` (a name once per
        ``def``), over the whole project; computed on first use (it does not depend on options)."""
        if self._callers is None:
            callers: dict[str, list[str]] = {}
            get = callers.get
            for name, defs in self.functions.items():
                for _, func in defs:
                    for callee in func.calls:
                        found = get(callee)
                        if found is None:
                            callers[callee] = [name]
                        else:
                            found.append(name)
            self._callers = callers
        return self._callers


class ShardGateFacts(ProjectFacts):
    """E9502's :class:`~hp_invariants.api.ProjectFacts`: :func:`summarize` per file, a
    :class:`ShardGateIndex` per project."""

    key = "shard-gates"
    summary_type = FileFacts

    def summarize(self, tree: ast.Module, path: str) -> tuple:
        """Return the summary of ``tree`` (:func:`summarize`; the path is not used)."""
        return summarize(tree)

    def build(self, root: Path, paths: list[str], summaries: list[Any], digests: list[bytes]) -> ShardGateIndex:
        """Return the :class:`ShardGateIndex` of the project's files."""
        return ShardGateIndex(paths, (s if isinstance(s, (tuple, list)) and len(s) == 3 else EMPTY
                                      for s in summaries), digests)

    built_parts = {
        "paths": list[str], "digests": list[bytes],
        "files": ListTable[FileFacts],
        "functions": KeyedTable[list[tuple[int, FunctionFact]]],
        "callers": KeyedTable[list[str]],
        "attr_values": dict[str, list[tuple[int, Expression]]],
        "attr_other": KeyedTable[set[int]],
    }

    def persist(self, data: ShardGateIndex) -> dict[str, Any]:
        """Return the parts of the index (:meth:`ShardGateIndex.to_parts`)."""
        return data.to_parts()

    def restore(self, parts: dict[str, Any], rebuild: Callable[[], ShardGateIndex]) -> ShardGateIndex:
        """Return the index from its stored parts (:meth:`ShardGateIndex.from_parts`)."""
        return ShardGateIndex.from_parts(parts)
