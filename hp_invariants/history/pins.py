"""Fix pins: remember a repair made by a commit, and report when later code undoes it.

A pin records, for one repair a fix commit made:

* ``rule``/``symbol``: the rule whose finding the commit removed (E9501 ...);
* ``location``: the qualified name of the repaired scope (``HSDPParam.reset_sharded_param``; for a
  method (re)added to a class, the class), looked up **anywhere in the project** at check time, so
  a moved module or a renamed file keeps its pins;
* ``kind`` and ``detail``: what the repair is, in terms this module re-checks without the generic
  rule (so a pin still fires when the rule would stay silent: a gate renamed so that
  ``shard-degree-gates`` no longer matches it, an option changed, a file moved out of the checked
  tree's configuration);
* ``repaired``/``broken``: the normalized code after and before the repair (for review);
* provenance: ``commit``, ``subject``, ``date``.

The repairs known (one recognizer per rule, :data:`RECOGNIZERS`):

* ``detach`` (E9501): a ``.detach()`` added to a view (``narrow``, ``view``, ...) bound to a local
  tensor. Undone when the scope holds more un-detached calls of that view method than at the repair;
* ``ungate`` (E9502): a shard-degree gate removed from a must-run step. Undone when the step's call
  runs under a condition it did not have after the repair (any name: a renamed gate counts);
* ``method`` (E9503): a called method (re)added to a class. Undone when the class no longer
  defines it;
* ``skip`` (E9504): a ``raise`` in a submodule walk turned into a skip. Undone when the loop's
  test (same code, or the same marker strings/attributes) raises again.

``check`` reports an undone pin as ``E9590 reverted-fix`` naming the commit, and a pin whose
location exists nowhere in the project, or whose repaired code can no longer be recognized, as
``W9591 stale-pin`` (re-pin or ``unpin`` it). The pins file (``pins = "..."`` in
``[tool.hp-invariants]``, default ``hp-invariants-pins.json``) is JSON, committed by the user.
"""

from __future__ import annotations

import ast
import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hp_invariants.astutil import always_exits
from hp_invariants.history import PINS_FILE
from hp_invariants.model import Confidence, Finding

DEFAULT_NAME = PINS_FILE
REVERTED_ID, REVERTED_SYMBOL = "E9590", "reverted-fix"
STALE_ID, STALE_SYMBOL = "W9591", "stale-pin"
FORMAT_VERSION = 1

REPAIRED, REVERTED, UNKNOWN = "repaired", "reverted", "unknown"


class PinError(Exception):
    """A pins file that cannot be read, or a pin that cannot be recorded."""


@dataclass
class Pin:
    """One recorded repair (see the module docstring for the fields)."""

    id: str
    rule: str
    symbol: str
    kind: str
    location: str
    path: str
    detail: dict[str, Any]
    repaired: str
    broken: str
    commit: str
    subject: str
    date: str

    def provenance(self) -> str:
        """``the fix from 1a2b3c4 'subject' (date)``, or the ``fix --pin`` run for uncommitted fixes."""
        if self.commit:
            return f"the fix from {self.commit[:7]} '{self.subject}' ({self.date})"
        return f"the fix made by `hp-invariants fix --pin` on {self.date}"


# ---------------------------------------------------------------------- file
def load(path: Path) -> list[Pin]:
    """Read a pins file (``[]`` when it does not exist); raises :class:`PinError` when invalid."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [Pin(**item) for item in data["pins"]]
    except OSError as exc:
        raise PinError(f"{path}: cannot read the pins: {exc.strerror or exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise PinError(f"{path}: not a pins file ({type(exc).__name__}: {exc})") from exc


def dump(pins: Sequence[Pin], path: Path) -> None:
    """Write ``pins`` sorted by id (diff-friendly JSON)."""
    data = {
        "version": FORMAT_VERSION,
        "comment": "Repairs pinned with `hp-invariants pin COMMIT`: `hp-invariants check` reports code that "
                   "undoes one (E9590 reverted-fix). Remove one with `hp-invariants unpin ID`.",
        "pins": [asdict(p) for p in sorted(pins, key=lambda p: p.id)],
    }
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def merge(existing: Sequence[Pin], new: Iterable[Pin]) -> list[Pin]:
    """Return ``existing`` with ``new`` added; a new pin replaces one with the same id."""
    by_id = {p.id: p for p in existing}
    for pin in new:
        by_id[pin.id] = pin
    return list(by_id.values())


# ---------------------------------------------------------------------- scopes
def parse(text: str, path: str = "<pin>") -> ast.Module | None:
    """Parse ``text``; ``None`` when it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def scopes(tree: ast.AST) -> dict[str, ast.AST]:
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


def _parents(root: ast.AST) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(root):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _own_nodes(scope: ast.AST) -> Iterable[ast.AST]:
    """The nodes of ``scope``'s body, not descending into nested functions, classes or lambdas."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _unparse(node: ast.AST) -> str:
    return ast.unparse(node)


def _statement_of(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST:
    while not isinstance(node, ast.stmt) and id(node) in parents:
        node = parents[id(node)]
    return node


def _nodes_at_line(scope: ast.AST, line: int) -> list[ast.AST]:
    return [n for n in ast.walk(scope) if getattr(n, "lineno", None) == line]


# ---------------------------------------------------------------------- recognizers
@dataclass
class State:
    """The state of a pinned repair in some code: ``repaired``, ``reverted`` or ``unknown``."""

    state: str
    anchor: ast.AST | None = None
    text: str = ""


@dataclass
class Spec:
    """What a recognizer extracted from a repair: kind, location, detail, forms."""

    kind: str
    location: str
    detail: dict[str, Any]
    repaired: str
    broken: str
    key: str = ""


class Recognizer:
    """Knows one rule's repair: builds a :class:`Spec` from a removed finding, and judges code."""

    kind = ""

    def build(self, finding: Finding, before: ast.Module, after: ast.Module) -> Spec | None:
        """Return the spec of the repair that removed ``finding`` (located in ``before``, the
        parent's version of the file) in ``after`` (the repaired version), or ``None``."""
        raise NotImplementedError

    def judge(self, scope: ast.AST, detail: dict[str, Any]) -> State:
        """Return the :class:`State` of the repair in ``scope`` (the def found at the location)."""
        raise NotImplementedError

    def location_of(self, finding: Finding) -> str:
        """The qualified name a pin of ``finding`` is attached to (default the finding's scope)."""
        return finding.obj


def _is_detached(call: ast.Call, parents: dict[int, ast.AST]) -> bool:
    parent = parents.get(id(call))
    if isinstance(parent, ast.Attribute) and parent.attr in ("detach", "detach_"):
        return isinstance(parents.get(id(parent)), ast.Call)
    return False


class DetachRecognizer(Recognizer):
    """E9501: ``.detach()`` added to a view bound to a local tensor."""

    kind = "detach"

    @staticmethod
    def _views(scope: ast.AST, method: str) -> list[ast.Call]:
        return [n for n in _own_nodes(scope) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute) and n.func.attr == method]

    def build(self, finding, before, after):
        old_scope, new_scope = scopes(before).get(finding.obj), scopes(after).get(finding.obj)
        if old_scope is None or new_scope is None:
            return None
        # the finding sits where the view is bound (``x._local_tensor = view``); its first
        # argument names the view operation (``narrow``), taken in this scope without .detach()
        method = str(finding.args[0]) if finding.args else ""
        old_parents = _parents(old_scope)
        candidates = [c for c in self._views(old_scope, method) if not _is_detached(c, old_parents)]
        if not candidates:
            return None
        candidates.sort(key=lambda c: abs(c.lineno - finding.line))
        view = candidates[0]
        parents = _parents(new_scope)
        undetached = [c for c in self._views(new_scope, method) if not _is_detached(c, parents)]
        detached = [c for c in self._views(new_scope, method) if _is_detached(c, parents)]
        if not detached:
            return None
        detail = {"view": method, "expression": _unparse(view), "undetached": len(undetached)}
        return Spec(self.kind, finding.obj, detail, _unparse(_statement_of(detached[0], parents)).splitlines()[0],
                    _unparse(_statement_of(view, old_parents)).splitlines()[0])

    def judge(self, scope, detail):
        parents = _parents(scope)
        views = self._views(scope, detail["view"])
        if not views:
            return State(UNKNOWN, scope, f"no '{detail['view']}' view is taken there any more")
        undetached = [c for c in views if not _is_detached(c, parents)]
        if len(undetached) > int(detail.get("undetached", 0)):
            same = [c for c in undetached if _unparse(c) == detail.get("expression")]
            anchor = (same or undetached)[0]
            return State(REVERTED, anchor, f"the '{detail['view']}' view `{_unparse(anchor)}` is no longer "
                                           f"followed by .detach() in {scope.name}")
        return State(REPAIRED)


def _and_terms(test: ast.AST) -> list[str]:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [t for value in test.values for t in _and_terms(value)]
    return [_unparse(test)]


def _negated(test: ast.AST) -> str:
    return _unparse(ast.UnaryOp(op=ast.Not(), operand=test))


def conditions(node: ast.AST, scope: ast.AST, parents: dict[int, ast.AST]) -> set[str]:
    """Return the normalized conditions under which ``node`` runs inside ``scope``: the ``and``
    terms of enclosing ``if``/ternary tests (negated in ``else``), left operands of ``and``, and
    the negated tests of early-exit guards before it in an enclosing block."""
    found: set[str] = set()
    child, current = node, parents.get(id(node))
    while current is not None and child is not scope:
        if isinstance(current, (ast.If, ast.IfExp, ast.While)) and child is not current.test:
            in_body = child in current.body if isinstance(current.body, list) else child is current.body
            found.update(_and_terms(current.test) if in_body else [_negated(current.test)])
        elif isinstance(current, ast.BoolOp) and isinstance(current.op, ast.And):
            index = current.values.index(child)
            for value in current.values[:index]:
                found.update(_and_terms(value))
        for name in ("body", "orelse", "finalbody"):
            block = getattr(current, name, None)
            if isinstance(block, list) and child in block:
                for stmt in block[:block.index(child)]:
                    if isinstance(stmt, ast.If) and not stmt.orelse and always_exits(stmt.body):
                        found.add(_negated(stmt.test))
        child, current = current, parents.get(id(current))
    return found


def _guard_text(call: ast.AST, scope: ast.AST, parents: dict[int, ast.AST]) -> str:
    """``if <test>: <call>`` for the innermost ``if`` around ``call``, else the call's statement."""
    node = call
    while id(node) in parents and node is not scope:
        node = parents[id(node)]
        if isinstance(node, ast.If):
            return f"if {_unparse(node.test)}: ... {_unparse(call)}"
    return _unparse(_statement_of(call, parents)).splitlines()[0]


class UngateRecognizer(Recognizer):
    """E9502: a shard-degree gate removed from a step that must run at every shard degree."""

    kind = "ungate"

    @staticmethod
    def _calls(scope: ast.AST, name: str) -> list[ast.Call]:
        return [n for n in _own_nodes(scope) if isinstance(n, ast.Call) and _last_name(n.func) == name]

    def build(self, finding, before, after):
        old_scope, new_scope = scopes(before).get(finding.obj), scopes(after).get(finding.obj)
        if old_scope is None or new_scope is None:
            return None
        calls = [n for n in _nodes_at_line(old_scope, finding.line) if isinstance(n, ast.Call)]
        calls.sort(key=lambda n: (n.col_offset != finding.col, n.col_offset))
        name = _last_name(calls[0].func) if calls else None
        if not name:
            return None
        parents = _parents(new_scope)
        new_calls = self._calls(new_scope, name)
        if not new_calls:
            return None
        allowed = sorted(set().union(*(conditions(c, new_scope, parents) for c in new_calls)))
        gate = str(finding.args[1]) if len(finding.args) > 1 else ""
        detail = {"call": name, "conditions": allowed, "gate": gate}
        return Spec(self.kind, finding.obj, detail, _guard_text(new_calls[0], new_scope, parents),
                    _guard_text(calls[0], old_scope, _parents(old_scope)))

    def judge(self, scope, detail):
        parents = _parents(scope)
        calls = self._calls(scope, detail["call"])
        if not calls:
            return State(UNKNOWN, scope, f"'{detail['call']}()' is no longer called there")
        allowed = set(detail.get("conditions", ()))
        for call in calls:
            extra = sorted(conditions(call, scope, parents) - allowed)
            if extra:
                return State(REVERTED, call, f"'{detail['call']}()' runs only when "
                                             f"{' and '.join(repr(e) for e in extra)} holds again in {scope.name}")
        return State(REPAIRED)


def _defines(cls: ast.ClassDef, name: str) -> bool:
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
            return True
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return True
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            return True
    return False


class MethodRecognizer(Recognizer):
    """E9503: a method that is called (re)added to its class."""

    kind = "method"

    def build(self, finding, before, after):
        if len(finding.args) < 2:
            return None
        class_name, method = str(finding.args[0]).split(".")[-1], str(finding.args[1])
        new_classes = {q: n for q, n in scopes(after).items()
                       if isinstance(n, ast.ClassDef) and n.name == class_name and _defines(n, method)}
        old = scopes(before)
        for qualname, cls in sorted(new_classes.items()):
            old_cls = old.get(qualname)
            if isinstance(old_cls, ast.ClassDef) and not _defines(old_cls, method):
                added = next(s for s in cls.body if getattr(s, "name", None) == method)
                return Spec(self.kind, qualname, {"method": method}, _unparse(added).splitlines()[0],
                            f"class {class_name} without {method}", key=method)
        return None

    def judge(self, scope, detail):
        if not isinstance(scope, ast.ClassDef):
            return State(UNKNOWN, scope, "the location is no longer a class")
        if _defines(scope, detail["method"]):
            return State(REPAIRED)
        return State(REVERTED, scope, f"class '{scope.name}' no longer defines '{detail['method']}'")


def _markers(test: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found


class SkipRecognizer(Recognizer):
    """E9504: a ``raise`` for an already-wrapped submodule in a module walk turned into a skip."""

    kind = "skip"

    @staticmethod
    def _walk_tests(scope: ast.AST) -> list[ast.If]:
        tests = []
        for loop in _own_nodes(scope):
            if isinstance(loop, (ast.For, ast.AsyncFor)):
                tests.extend(n for n in _own_nodes(loop) if isinstance(n, ast.If))
        return tests

    def build(self, finding, before, after):
        old_scope, new_scope = scopes(before).get(finding.obj), scopes(after).get(finding.obj)
        if old_scope is None or new_scope is None:
            return None
        parents = _parents(old_scope)
        raises = [n for n in _nodes_at_line(old_scope, finding.line) if isinstance(n, ast.Raise)]
        if not raises:
            return None
        node, test = raises[0], None
        while id(node) in parents and node is not old_scope:
            node = parents[id(node)]
            if isinstance(node, ast.If) and test is None:
                test = node
        if test is None:
            return None
        detail = {"test": _unparse(test.test), "markers": sorted(_markers(test.test))}
        state = self.judge(new_scope, detail)
        if state.state != REPAIRED:
            return None
        repaired = next(t for t in self._walk_tests(new_scope) if self._matches(t, detail))
        return Spec(self.kind, finding.obj, detail, f"if {_unparse(repaired.test)}: {_unparse(repaired.body[0])}",
                    f"if {detail['test']}: raise ...")

    @staticmethod
    def _matches(node: ast.If, detail: dict[str, Any]) -> bool:
        markers = set(detail.get("markers", ()))
        return _unparse(node.test) == detail["test"] or bool(markers) and markers <= _markers(node.test)

    def judge(self, scope, detail):
        matched = [t for t in self._walk_tests(scope) if self._matches(t, detail)]
        if not matched:
            return State(UNKNOWN, scope, "no submodule walk tests it any more")
        for test in matched:
            raising = [s for s in test.body if isinstance(s, ast.Raise)]
            if raising:
                return State(REVERTED, raising[0], f"the walk in {scope.name} raises again when "
                                                   f"`{_unparse(test.test)}` instead of skipping the submodule")
        return State(REPAIRED)


#: Repairs this tool knows, by rule symbol (rules without one cannot be pinned).
RECOGNIZERS: dict[str, Recognizer] = {
    "local-tensor-view-not-detached": DetachRecognizer(),
    "shard-gated-reset": UngateRecognizer(),
    "undefined-method-call": MethodRecognizer(),
    "wrap-overlap-hard-raise": SkipRecognizer(),
}


# ---------------------------------------------------------------------- recording
def pins_for_repair(removed: Sequence[tuple[Finding, str, str]], commit: str, subject: str, date: str,
                    new_path: Callable[[Finding], str]) -> tuple[list[Pin], list[str]]:
    """Build pins for findings a change removed.

    ``removed`` holds ``(finding, before_text, after_text)``: a finding of the version before the
    change, the text of its file before and after. Only repairs whose recognizer confirms them are
    pinned: the code before must be judged ``reverted`` and the code after ``repaired`` (so a pin
    always pins a real repair). Returns ``(pins, reasons)``: ``reasons`` says why each other finding
    was not pinned.
    """
    pins: dict[str, Pin] = {}
    reasons = []
    for finding, before_text, after_text in removed:
        recognizer = RECOGNIZERS.get(finding.symbol)
        where = f"{finding.rule_id} {finding.symbol} in {finding.obj or '<module>'}"
        if recognizer is None:
            reasons.append(f"{where}: no known repair for this rule")
            continue
        before, after = parse(before_text), parse(after_text)
        spec = recognizer.build(finding, before, after) if before and after else None
        if spec is None:
            reasons.append(f"{where}: the change removed the finding but not by a repair this tool knows")
            continue
        old_scope, new_scope = scopes(before).get(spec.location), scopes(after).get(spec.location)
        if old_scope is None or new_scope is None:
            reasons.append(f"{where}: the scope is missing before or after the change")
            continue
        if recognizer.judge(old_scope, spec.detail).state != REVERTED:
            reasons.append(f"{where}: the code before the change does not violate the repair")
            continue
        if recognizer.judge(new_scope, spec.detail).state != REPAIRED:
            reasons.append(f"{where}: the code after the change is not recognised as repaired")
            continue
        pin_id = f"{finding.rule_id}:{spec.location}" + (f".{spec.key}" if spec.key else "")
        pins[pin_id] = Pin(pin_id, finding.rule_id, finding.symbol, spec.kind, spec.location, new_path(finding),
                           spec.detail, spec.repaired, spec.broken, commit, subject, date)
    return list(pins.values()), reasons


# ---------------------------------------------------------------------- checking
@dataclass
class _Parsed:
    path: str
    text: str
    tree: ast.Module | None
    _scopes: dict[str, ast.AST] | None = field(default=None)

    def scopes(self) -> dict[str, ast.AST]:
        if self._scopes is None:
            self._scopes = scopes(self.tree) if self.tree is not None else {}
        return self._scopes


def _find(pins: Sequence[Pin], paths: Iterable[str], read_text: Callable[[str], str | None]) -> dict[str, list[_Parsed]]:
    """For each pin id, the parsed files among ``paths`` that define its location."""
    tails = {p.id: p.location.split(".")[-1] for p in pins}
    found: dict[str, list[_Parsed]] = {p.id: [] for p in pins}
    for path in paths:
        text = read_text(path)
        if text is None or not any(f"def {t}" in text or f"class {t}" in text for t in tails.values()):
            continue
        parsed = _Parsed(path, text, parse(text, path))
        for pin in pins:
            if pin.location in parsed.scopes():
                found[pin.id].append(parsed)
    return found


def check(pins: Sequence[Pin], checked: Sequence[str], project_files: Callable[[], Iterable[str]],
          read_text: Callable[[str], str | None], pins_path: str) -> list[Finding]:
    """Return the ``E9590 reverted-fix`` and ``W9591 stale-pin`` findings of ``pins``.

    ``checked`` are the files of this run: a pin is judged in each of them that defines its
    location (anywhere: the file may have moved or been renamed). A pin found in none of them is
    looked up in ``project_files()`` (every Python file of the project); found nowhere, it is
    stale (reported on ``pins_path``, the pins file).
    """
    if not pins:
        return []
    found = _find(pins, checked, read_text)
    missing = [p for p in pins if not found[p.id]]
    elsewhere = _find(missing, project_files(), read_text) if missing else {}
    lines = _pin_lines(pins_path)
    findings = []
    for pin in pins:
        recognizer = RECOGNIZERS.get(pin.symbol)
        if not found[pin.id]:
            if not elsewhere.get(pin.id):
                findings.append(_finding(STALE_ID, STALE_SYMBOL, pins_path, lines.get(pin.id, 1), 0, pin,
                                         f"pin {pin.id} from {pin.provenance()}: '{pin.location}' no longer "
                                         f"exists in the project; re-pin the repair where it moved, or "
                                         f"`hp-invariants unpin {pin.id}`"))
            continue
        for parsed in found[pin.id]:
            scope = parsed.scopes()[pin.location]
            state = recognizer.judge(scope, pin.detail) if recognizer else State(UNKNOWN, scope, "unknown rule")
            anchor = state.anchor or scope
            if state.state == REVERTED:
                findings.append(_finding(REVERTED_ID, REVERTED_SYMBOL, parsed.path, anchor.lineno, anchor.col_offset,
                                         pin, f"reverts {pin.provenance()}: {state.text} "
                                              f"({pin.rule} {pin.symbol}; pin {pin.id})", anchor))
            elif state.state == UNKNOWN:
                findings.append(_finding(STALE_ID, STALE_SYMBOL, parsed.path, anchor.lineno, anchor.col_offset,
                                         pin, f"pin {pin.id} from {pin.provenance()}: {state.text} in "
                                              f"{pin.location}; re-pin or `hp-invariants unpin {pin.id}`", anchor))
    findings.sort(key=Finding.sort_key)
    return findings


def _finding(rule_id: str, symbol: str, path: str, line: int, col: int, pin: Pin, message: str,
             node: ast.AST | None = None) -> Finding:
    end_line = getattr(node, "end_lineno", None) or line
    end_col = getattr(node, "end_col_offset", None)
    if node is None or isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        end_line, end_col = line, col  # a whole def: point at its first line only
    return Finding(rule_id, symbol, path, line, col, end_line, end_col if end_col is not None else col, message,
                   Confidence.HIGH, None, (pin.id,), pin.location)


def _pin_lines(pins_path: str) -> dict[str, int]:
    """Line of each pin's ``"id"`` in the pins file (where stale pins are reported)."""
    lines: dict[str, int] = {}
    try:
        with open(pins_path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                stripped = line.strip()
                if stripped.startswith('"id":'):
                    try:
                        lines[json.loads(stripped[5:].rstrip(","))] = number
                    except ValueError:
                        pass
    except OSError:
        pass
    return lines
