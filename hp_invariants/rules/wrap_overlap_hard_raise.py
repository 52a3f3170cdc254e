"""# E9504 wrap-overlap-hard-raise

## What it does
Finds code that walks the submodules of a module (`.modules()`, `.named_modules()`, `.children()`,
`.named_children()`, MindSpore's `.cells()`, `.cells_and_names()`, `.name_cells()` and its
`.items()`/`.values()`) and **raises** when a walked submodule is already wrapped: a branch on a wrap
marker of the loop variable (`sub._is_wrapped`, `getattr(sub, "_is_wrapped", False)`,
`hasattr(sub, ...)`, `sub.__dict__.get(...)`, `"..." in vars(sub)`, or `isinstance(sub, W)` /
`type(sub) is W` with `W` a wrapper class) whose body raises directly or calls a helper of the same
file that always raises (`_fail(...)`, `self._fail(...)`). The generator form
`if any(getattr(m, "_is_wrapped", False) for m in layer.modules()): raise ...` is the same hazard.

The class, not the spelling. The walk may also be written by hand: a `while` loop over a stack or
a queue (`sub = stack.pop()` / `queue.popleft()`, the children pushed with `stack.extend(sub.children())`),
a `for` loop over a list that grows with the children, or a function that calls itself on its
parameter's children (its check of the parameter runs for every submodule). The pair of a named walk
may be unpacked in the body (`for item in m.named_modules(): name, sub = item`) or the walk turned
into a dict first (`dict(m.named_modules()).items()`). The marker may be whatever the wrapper itself
stores on walked submodules: an attribute that the checking function, or a helper it calls, sets on
the variable of a walk (`sub._ckpt_done = True`, `setattr(sub, "_owner", owner)`, `_mark(sub)` with
`def _mark(m): m._ckpt_done = True`; `False`/`None`/`0`/`""` clear a mark and do not count), read
as an attribute, with `getattr`/`hasattr` or through the instance dict; a class this file wraps
submodules in (`x.layer = C(x.layer)`, `setattr(parent, name, C(child))` in a loop over `child`) for
`isinstance(sub, C)`; or a predicate helper of the file whose body is `return <marker test>`
(`if _is_wrapped(sub): raise`). The test may read the marker through a local the loop body binds
once, by a plain or annotated assignment before the test (`wrapped = getattr(sub, "_is_wrapped",
False)`, then `if wrapped: raise`; root checks through such locals, `is_root = name == ""`, count as
inline ones), or through a walrus in the test (`if wrapped := getattr(...)`); a local rebound in the
loop, or bound after the test, is not read as the marker.
`assert not <marked>` is the same hazard as a raise, and so is `assert False, msg` under a marker
test (`if getattr(sub, "_is_wrapped", False): assert False, ...`). A test must read a marker of the
walked submodule to be one: a constant (`assert False, msg` under a test of something else, as a muP
shape check in a walk has it; `if False:`; `assert True`) says nothing about the submodule and is
never the hazard (`constant_test`, `constant_test_ok`).

**Helpers, in this file and in other modules of the project.** The raise may sit in a helper the
marker branch calls: a function of this file the semantic model resolves completely (a module
function, a nested function, `self.m(...)` along the class's same-file MRO) whose every path raises,
or a module-level function of **another module of the project** that an import binds the name to
(`from pkg.errors import fail_wrapped`, `from . import errors` then `errors.fail_wrapped(sub)`, a
re-export in a package's `__init__.py`; the module is mapped to a file of the project: relative
imports from the file's folder, absolute ones by their path inside the project, not followed when
two files of the project match or none does, e.g. an installed package). And the whole check may be
**moved into a function the walk calls** with the walked submodule (positionally or by keyword):
`for sub in layer.modules(): _ensure_not_wrapped(sub)` where the function raises (directly, through
a raising helper, or an `assert not <marked>`) under a marker test of the parameter that receives
`sub`, not catching it itself; also a closure of the loop that tests `sub` itself, and a method
testing the mark its caller's walk stores (learned markers pass from the caller). Such a finding is
reported at the call in the walk, without a fix (the raise is elsewhere). Only a call the file
cannot resolve and whose import may name a module of the project (relative, or its top-level
package named like a folder the file is in) makes the rule read the project facts
(`raise_in_called_function`, `raise_in_other_module_project`, and their `_ok` twins: preconditions,
warnings, a caught refusal, another argument, a root-only call, an installed package).

**Evidence and confidence.** Every message ends with its evidence: the marker test and where it
was found (`` `getattr(sub, "_is_wrapped", False)` tested in the walk``), and where the raise is
(`raise here`, `raise in 'fail()' (line 3 of this file)`, `raise in 'fail_wrapped()' of
pkg/errors.py:4`, or the function the check moved into and its file). Confidence is `HIGH` when the
marker test and the raise are both written in the walk itself (closed-world evidence: nothing the
function does not show decides it), `INFERENCE` when a helper decides (of this file or another):
the rule then assumes the name is bound at run time to the `def` the file or its import shows (no
monkey-patching, no shadowing by a star import).

Spellings of the class (each has a flagged fixture and a clean twin): the seed's `.modules()` loop;
named walks, `enumerate`, a local alias, `list(...)`; `children()`; MindSpore cells; the
`any(...)` form; marker attribute, `getattr`, `hasattr`, `__dict__`, `vars`; wrapper classes by
name, `type(sub) is W`; a raising helper; nested `if`; an `or` condition; a nested loop; a stack or
queue walk; a growing list; recursion; pair unpacking in the body; `dict(named_modules())`; a learned
marker (directly, via `setattr`, via a helper); a learned wrapper class; a marker predicate; a
marker read into a local first; `assert not`, `assert False` under a marker test; the raise in a
helper of another module; the check moved into a called function, of this file or another. Near
misses that stay clean: the root check (outside
the walk, `sub is module`, `name == ""`, `depth == 0`, a root passed down a recursion), a marker
that is cleared, an attribute stored by an unrelated function of the file, a raise on a *missing*
mark (a precondition), a caught raise, a stack of things that are not submodules.

No message for:

* a module that can never be imported (an import of the project itself always fails there:
  the pipeline's rule for every rule, `unimportable_module`);
* a check of the root module itself (`if getattr(module, "_is_wrapped", False): raise` outside the
  walk, or inside it under `if sub is module:` / `if name == "":`, or after
  `if sub is not module: continue`): refusing to wrap the same module twice is legitimate;
* a branch on a marker of another variable than the walked submodule;
* the guard of a per-module transformation: the walk calls, only for the modules it selects (under
  an `if` testing the walked submodule: `isinstance(sub, nn.Linear) and matches(name)`), a function
  that stores on the module it is given the very mark whose test raises (it patches that module and
  refuses to patch it twice: `assert not hasattr(linear, "super_fwd")` ... `linear.super_fwd = ...`),
  and no walk of the function marks its submodules with that mark. A deduplicating walk meets a
  shared submodule once, so the raise fires only when the transformation is applied to the same
  module again (a tuner applied twice), which it refuses on purpose. The same guard written in the
  walk itself is not reported either: the raise tests a mark that the walk stores on the walked
  submodule only for the modules it selects (`module.lora_a = ...` after `if not matches(name):
  continue`), and no other walk of the function stores it. Skipping the root (`if sub is module:
  continue`) or a deny-list (`if name in skip: continue`) keeps nearly every submodule and is no
  selection: such a walk still marks the region. A call made for every walked
  submodule, or a walk that marks the region itself (every submodule it meets, in this walk or
  another), stays reported (`transform_guard`, `transform_guard_ok`). The rule does not read the callers: a transformation applied per region
  whose regions share a *selected* module is not reported;
* a raise that a surrounding `try` in the loop catches (`except Exception`, or the same class);
* a raise after the walk has skipped every submodule it met before, in this call or an earlier one:
  a guard `if sub in C: continue` (or `id(sub) in C`) before it in the loop body, the loop body
  recording the walked submodule in `C` (`C.add(sub)`, `C.append(id(sub))`, `C[sub] = ...`), and `C`
  outliving the call (an attribute such as `self._visited`, a parameter the caller passes, a
  module-level name). A submodule shared with a region processed earlier is skipped before the
  raise, which then only refuses a module marked by something else (a tuner applied to the whole
  model twice): a deliberate guard, not the hazard. A set the function makes afresh (`seen =
  set()`) dedups one walk only, as `.modules()` already does; a record by name (one name per
  region), a skip after the raise or a record never written do not count (`visited_skip`,
  `visited_skip_ok`).

## Why is this bad?
A submodule can legitimately belong to several wrapped regions. In Qwen3-VL-MoE every text decoder
layer shares one `MultiModalRotaryEmbedding` instance (the position encoding is computed once and
reused). Activation checkpointing wraps the layers one by one; `_check_and_mark_wrapped` first
raised if any submodule of the layer already carried `_is_wrapped`, then marked them all. Wrapping
layer 0 marked the shared rotary, so wrapping layer 1 failed in `parallelize`:

```
ValueError: Submodule 'MultiModalRotaryEmbedding' of 'Qwen3VLMoeTextDecoder' is already wrapped.
Wrapping overlapping module regions is not allowed.
```

Every `activation_checkpoint: full` training of the VL-MoE example crashed before its first step
(hyper-parallel issue 230). The shared rotary is stateless; wrapping it once, with the first layer,
and skipping it afterwards is correct.

## Example
```python
def _check_and_mark_wrapped(module):
    for sub in module.modules():
        if getattr(sub, "_is_wrapped", False):
            raise ValueError(f"Submodule '{type(sub).__name__}' is already wrapped")
    for sub in module.modules():
        sub._is_wrapped = True
```

## Use instead
```python
def _check_and_mark_wrapped(module):
    if getattr(module, "_is_wrapped", False):  # the same module twice: still an error
        raise ValueError(f"'{type(module).__name__}' is already wrapped")
    for sub in module.modules():
        if getattr(sub, "_is_wrapped", False):
            continue  # shared with a region wrapped earlier
        sub._is_wrapped = True
```

## Fix safety
The fix replaces the `raise` statement (the whole statement, even when it spans several lines), or
the statement calling the always-raising helper, by `continue`. Comment lines above it and a
trailing comment on its last line are kept; comments inside a multi-line `raise` move to lines
above the `continue`.

* **Safe** (checked by the executable oracle in `tests/test_fix_oracle.py`) only when the
  rewrite changes nothing but "an already-wrapped submodule is skipped instead of raising": the
  branch runs only if the submodule is wrapped (`if marker:`, `if strict and marker:`, the `else:`
  of `if not marker:`), `continue` binds to the walk loop, the raise is a fresh exception (not
  `NotImplementedError`) raised outside any `except` handler of the loop body, and the refusal
  would leave the function unobserved: no `try` around it (inside or around the walk, in the same
  function) has a handler that may catch it (a bare `except`, the raised class or a builtin base of
  it such as `Exception`, or any class that is not a builtin exception; when the raised class is
  not a builtin one, or the raise is in a helper, any handler), no `finally` around the walk swallows it
  with `return`/`break`/`continue`, and no `with` around it enters a context manager that sees the
  exception (only the grad-mode ones, `no_grad`, `enable_grad`, `inference_mode`,
  `set_grad_enabled`, and `nullcontext`, are transparent). A `finally` clean-up still runs either
  way; other `if`/`elif`/`else` branches, loops with `else`, walrus bindings and side effects in
  the conditions are unchanged by the rewrite.
* **Unsafe** (applied only with `--unsafe-fixes`) otherwise: when the branch also runs for another
  reason (`if marker or other:`): `continue` would silence that other error too; when a handler
  around the walk may catch the refusal (`try: ... except ValueError: rollback(); raise`: the
  rollback would no longer run), when a context manager around it sees it (`with transaction():`),
  when the raise translates another error inside an `except` handler of the loop body, or sits in a
  `finally` of the loop body (`continue` there would discard what the `try` raised); and when
  the raised exception is `NotImplementedError`
  (`if hasattr(sub, "_fsdp_wrapped_module"): raise NotImplementedError("nested FSDP unsupported")`):
  that is a deliberate unsupported-feature guard, not an overlap check, and skipping the submodule
  instead may silently produce a configuration the code does not support. It is still reported (the
  marker matches `_.*wrapped.*`), but only `--unsafe-fixes` rewrites it.
* **Unsafe** in a stack or queue walk when the raise comes before the push of the children:
  `continue` there also skips the subtree of the wrapped submodule.
* **Report only** (no fix) when a nested `for`/`while` sits between the walk and the raise (there
  `continue` would bind to the inner loop), for the `any(...)` generator form and for recursion
  (there is no walk loop to continue), and for `assert not <marked>` (rewrite it as
  `if <marked>: continue`): restructure by hand, e.g. filter already-wrapped submodules out.
* **No finding** for a bare `raise` or `raise err` of the exception an enclosing `except ... as err`
  caught, under a marker test: it re-raises another error, it is not the overlap refusal.

The fix also stops raising for the root module when the walk yields it (`.modules()` and
`.named_modules()` yield the module itself first); keep an explicit double-wrap check of the root
outside the loop, as in *Use instead*.

## Options
* `wrap-markers` (regexp_csv, default `_is_wrapped, _.*wrapped.*`): attribute names that mark a
  module as wrapped, matched against the whole name.
* `wrapper-classes` (regexp_csv, default `.*Wrap(per|ped).*`): wrapper class names for
  `isinstance(sub, W)` / `type(sub) is W`, matched against the last component of the name
  (`ckpt.CheckpointWrapper` -> `CheckpointWrapper`); a tuple of classes matches if one does.

## References
* hyper-parallel issue 230 (`activation_swap.py` `_check_and_mark_wrapped`)
* `torch.nn.Module.modules` (yields the module itself first)
* `torch.distributed.algorithms._checkpoint.checkpoint_wrapper.apply_activation_checkpointing`
"""

from __future__ import annotations

import ast
import builtins
import io
import os
import re
import tokenize
from dataclasses import dataclass
from typing import Iterator, Sequence

from hp_invariants.astutil import (SCOPES, dotted_name, last_name, nodes_at_line, parent_map, qualified_scopes, scope_nodes,
                                   string_value)
from hp_invariants.model import Applicability, Confidence, Edit, Finding
from hp_invariants.api import REPAIRED, REVERTED, UNKNOWN, Repair, RepairState
from hp_invariants.declarations import WrapOverlapHardRaiseDeclaration
from hp_invariants.rules.shard_gate_facts import may_name_project_module
from hp_invariants.source import identifier_text

WALK_METHODS = {
    # method name -> shape of each item: "module" (the submodule), "pair" ((name, submodule)),
    # "dict" (a name -> submodule mapping: iterate .items()/.values())
    "modules": "module",
    "children": "module",
    "cells": "module",
    "named_modules": "pair",
    "named_children": "pair",
    "cells_and_names": "pair",
    "name_cells": "dict",
}
# Walks that yield the root module itself first (its name is the prefix, "" by default).
ROOT_YIELDING = {"modules", "named_modules", "cells_and_names"}
TRANSPARENT_CALLS = {"list", "tuple", "reversed", "sorted"}
LOOPS = (ast.For, ast.AsyncFor, ast.While)
CATCH_ALL = {"Exception", "BaseException"}
# Context managers that only set and restore the grad mode (or do nothing): they never see or
# swallow an exception, so a `with` of them around a raise does not make its fix unsafe.
TRANSPARENT_CMS = frozenset({"no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "nullcontext"})
# What may follow the name of a walk method in a call: blanks, then its "(", a line continuation, a
# comment or a line break inside brackets.
_AFTER_WALK_NAME = re.compile(r"\s*(?:\(|\\|#|$)", re.MULTILINE)
# What precedes `.<walk method>(`: the receiver's last name (gate for hand-written walks).
_RECEIVER_BEFORE = re.compile(r"(\w+)\s*$")
# What follows `.<name>` in a store `x.<name> = ...` / `x.<name>: T = ...` (not `==`).
_STORE_AFTER_NAME = re.compile(r"\s*(?::[^=\n]*)?=(?!=)")
# Every walk method name ends in one of these (str.find on them is much faster than one regex).
_WALK_NAME_TAILS = ("modules", "children", "cells", "cells_and_names")


def _raises_not_implemented(stmt: ast.stmt) -> bool:
    """True for ``raise NotImplementedError`` / ``raise NotImplementedError(...)``."""
    if not isinstance(stmt, ast.Raise) or stmt.exc is None:
        return False
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return last_name(exc) == "NotImplementedError"


def has_walk_call_text(text: str) -> bool:
    """Return False only if ``text`` cannot contain a call of a walk method, whatever its layout."""
    for word in _WALK_NAME_TAILS:
        start = text.find(word)
        while start != -1:
            if _AFTER_WALK_NAME.match(text, start + len(word)):
                return True
            start = text.find(word, start + 1)
    return False


@dataclass(frozen=True)
class Walk:
    """One submodule walk: ``var`` (the walked submodule's name) comes from ``root`` (receiver text).

    ``name_var`` is the name variable of a named walk (``for name, sub in m.named_modules()``);
    ``yields_root`` says whether the walk yields ``root`` itself first.
    """

    var: str
    root: str | None
    text: str
    name_var: str | None = None
    yields_root: bool = False
    # a stack/queue walk (``while stack: sub = stack.pop(); ...; stack.extend(sub.children())``):
    # the line of the first push of the children (``continue`` before it also skips the subtree)
    push_line: int = 0
    # a recursive function that calls itself on the walked children of its parameter ``var``
    recursive: bool = False
    root_params: tuple = ()  # the recursive function's other parameters (`depth`, `root`)


@dataclass(frozen=True)
class Facts:
    """What a condition ``E`` says about the marker ``M`` of the walked submodule.

    ``a``: E implies M; ``b``: M implies E; ``c``: not E implies M; ``d``: M implies not E;
    ``m``: E reads the marker at all. The branch ``if E:`` is the hazard when ``m`` and ``a`` or ``b``
    hold (safe to ``continue`` when ``a``); its ``else:`` when ``m`` and ``c`` or ``d`` hold (safe
    when ``c``). A test that reads no marker (a constant: ``assert False, msg``, ``if False:``)
    implies whatever the logic says, but it says nothing about the submodule: never the hazard.
    """

    a: bool = False
    b: bool = False
    c: bool = False
    d: bool = False
    m: bool = False

    def negate(self) -> "Facts":
        """Facts of ``not E``."""
        return Facts(self.c, self.d, self.a, self.b, self.m)

    @property
    def body_hazard(self) -> bool:
        """``if E:`` runs when the submodule is marked."""
        return self.m and (self.a or self.b)

    @property
    def else_hazard(self) -> bool:
        """The ``else`` of ``if E:`` (an ``assert E`` failing) runs when the submodule is marked."""
        return self.m and (self.c or self.d)


NONE = Facts()
MARKER = Facts(True, True, False, False, True)


def _walk_call(node: ast.AST) -> tuple[str, ast.Call] | None:
    """Return ``(method, call)`` if ``node`` is ``X.<walk method>(...)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WALK_METHODS:
        return node.func.attr, node
    return None


def _unwrap_dict(node: ast.AST) -> tuple[str, ast.Call] | None:
    """``dict(X.named_modules())`` (or of a named walk's list): the walk, seen as a name -> module mapping."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"
            and len(node.args) == 1 and not node.keywords):
        inner, enumerated = _unwrap_iter(node.args[0])
        hit = _walk_call(inner)
        if hit is not None and not enumerated and WALK_METHODS[hit[0]] == "pair":
            return hit
    return None


def _unwrap_iter(node: ast.AST) -> tuple[ast.AST, bool]:
    """Strip ``list(...)``/``tuple(...)``/``reversed``/``sorted`` and ``[1:]``; return ``(node, enumerate?)``."""
    enumerated = False
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            if node.func.id in TRANSPARENT_CALLS:
                node = node.args[0]
                continue
            if node.func.id == "enumerate" and not enumerated:
                enumerated = True
                node = node.args[0]
                continue
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            node = node.value
            continue
        return node, enumerated


class WrapOverlapHardRaise(WrapOverlapHardRaiseDeclaration):
    """E9504 `wrap-overlap-hard-raise`: a submodule walk that raises on an already-wrapped submodule.

    Input: one parsed file (``ctx.tree``) and the options ``wrap-markers`` and ``wrapper-classes``.
    Output: one finding per raising statement (the ``raise``, or the statement calling a helper of
    the same file that always raises), with a ``continue`` fix (see the module docstring for its
    applicability). The invariant comes from hyper-parallel issue 230: layers that share one
    submodule must all be wrappable.
    """


    # ------------------------------------------------------------------ entry point
    def check(self, ctx) -> Iterator[Finding]:
        """Yield the findings of the file in ``ctx`` (see the class docstring)."""
        checker = _FileChecker(self, ctx)
        yield from checker.run()

    # ------------------------------------------------------------------ history hooks
    def pin_repair(self, finding, before, after):
        """The skip a change made of the ``raise`` that ``finding`` reported in a submodule walk (see the end of this module)."""
        return _pin_repair(finding, before, after)

    def repair_state(self, scope, detail):
        """Reverted when the walk's test (same code, or the same marker strings/attributes) raises again."""
        return _repair_state(scope, detail)


class _FileChecker:
    """Per-file state: compiled options, the always-raising helpers, the reported statements."""

    def __init__(self, rule: WrapOverlapHardRaise, ctx, label: str | None = None, index=None):
        self.rule = rule
        self.ctx = ctx
        # None: the file being checked; else another file of the project, opened for a helper it
        # defines (``label``: its path relative to the project root; ``index``: the project facts)
        self.label = label
        self._index = index
        self._others: dict[str, _FileChecker] = {}
        self._extra_markers: frozenset = frozenset()  # markers learned by the caller of a helper
        self.markers = [re.compile(p) for p in ctx.option(rule, "wrap-markers")]
        self.wrappers = [re.compile(p) for p in ctx.option(rule, "wrapper-classes")]
        self.reported: set[int] = set()
        self._helpers: dict[int, bool] = {}
        self._aliases: dict[int, dict[str, tuple[str, ast.Call, bool]]] = {}
        self._loops: list[tuple[ast.AST, ast.AST, Walk]] = []  # every walk loop: (scope, loop, walk)
        self._learned_markers: dict[int, frozenset] = {}
        self._scope: ast.AST | None = None  # the function being checked (its learned markers count)
        self._predicates: set[int] = set()  # predicate helpers being expanded (recursion guard)
        self._recursive_seen: set[int] = set()  # functions already found to recurse over a walk
        self._text_gates: dict[tuple[str, str], bool] = {}
        self._walk_receivers: frozenset | None = None
        self._defined: dict[str, bool] = {}  # name -> the text has `def name(`
        self._raise_test: ast.AST | None = None  # the test of the raise _raise_on_marker last found
        self._raise_site: list[tuple] = []  # (checker, function, parameter, test) of _callee_raise's finds
        self._learned_wrappers: dict[str, bool] = {}

    # ------------------------------------------------------------------ helpers of the file
    def _always_raises_func(self, func: ast.AST, depth: int = 0) -> bool:
        """True if calling ``func`` raises on every path (no return, no yield, ends in a raise)."""
        key = id(func)
        if key in self._helpers:
            return self._helpers[key]
        self._helpers[key] = False  # recursion guard
        result = False
        if depth < 8 and not any(
            last_name(d.func if isinstance(d, ast.Call) else d) in {"abstractmethod", "overload"}
            for d in func.decorator_list
        ):
            inner = list(_walk_no_scopes(func.body))
            if not any(isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) for n in inner):
                result = self._block_raises(func.body, depth)
        self._helpers[key] = result
        return result

    def _block_raises(self, body: Sequence[ast.stmt], depth: int) -> bool:
        if not body:
            return False
        last = body[-1]
        if isinstance(last, ast.Raise):
            # `raise NotImplementedError` is the abstract-method idiom: subclasses override it.
            exc = last.exc.func if isinstance(last.exc, ast.Call) else last.exc
            return last.exc is not None and last_name(exc) != "NotImplementedError"
        if isinstance(last, ast.If):
            return self._block_raises(last.body, depth) and self._block_raises(last.orelse, depth)
        if isinstance(last, (ast.With, ast.AsyncWith)):
            return self._block_raises(last.body, depth)
        if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and depth < 8:
            return self._always_raising_call(last.value, None, depth + 1)
        return False

    def _helper_target(self, call: ast.Call, func: ast.AST | None) -> ast.AST | None:
        """The one ``def`` a call in ``func`` reaches (``helper(...)``, a helper nested in ``func``,
        ``self.m(...)``/``cls.m(...)``, ``Cls.m(...)``), by the semantic model's resolution
        (:meth:`~hp_invariants.semantic.SemanticModel.resolve_call`); ``None`` when it is not one
        definition of the file for certain (an override in a subclass, a base outside the file)."""
        name = last_name(call.func)
        if name is None:
            return None
        defined = self._defined.get(name)
        if defined is None:  # a cheap text gate before the file's definitions are indexed
            defined = self._defined[name] = f"def {name}(" in self.ctx.source.text
        if not defined:
            return None
        return self.ctx.semantic.resolve_call(call, func).single

    def _always_raising_call(self, call: ast.Call, func: ast.AST | None, depth: int = 0) -> bool:
        """True when every ``def`` the call may reach always raises (see :meth:`_always_raises_func`)."""
        return self._raising_call(call, func, depth) is not None

    def _raising_call(self, call: ast.Call, func: ast.AST | None, depth: int = 0,
                      external: bool = True) -> str | None:
        """Where the ``def`` a call reaches always raises (evidence text), else ``None``: the helpers
        of this file the semantic model resolves completely (every candidate must always raise), or
        the module-level function of another file of the project that an import binds the name to
        (:meth:`_external`)."""
        name = last_name(call.func)
        if name is None:
            return None
        if f"def {name}(" in self.ctx.source.text:
            resolution = self.ctx.semantic.resolve_call(call, func)
            if resolution.candidates:
                if resolution.complete and all(target is not func and self._always_raises_func(target, depth)
                                               for target in resolution.candidates):
                    return self._where(resolution.candidates[0])
                return None
        found = self._external(call, func) if external and depth < 4 else None
        if found is not None and all(found[0]._always_raises_func(d, depth + 1) for d in found[1]):
            return found[0]._where(found[1][0])
        return None

    # ------------------------------------------------------------------ helpers of other files
    def _text(self, node: ast.AST) -> str:
        """The source text of ``node`` for evidence, on one line, cut at 60 characters."""
        return _short(self.ctx.text_of(node))

    def _where(self, func: ast.AST) -> str:
        """How evidence names the ``def`` ``func`` of this checker's file."""
        name = getattr(func, "name", "<lambda>")
        if self.label is None:
            return f"'{name}()' (line {func.lineno} of this file)"
        return f"'{name}()' of {self.label}:{func.lineno}"

    def _project_index(self):
        """The project's function facts (:class:`~hp_invariants.rules.shard_gate_facts.ShardGateIndex`),
        ``None`` without a project. In an early analysis this raises
        :class:`~hp_invariants.api.ProjectFactsDeferred` (the check runs the rule again later)."""
        if self._index is None and self.label is None and self.ctx.project is not None \
                and self.rule.project_facts is not None:
            self._index = self.ctx.project_data(self.rule)
        return self._index

    def _external(self, call: ast.Call, func: ast.AST | None) -> tuple["_FileChecker", list[ast.AST]] | None:
        """The checker of another project file and the module-level ``def``s there that the call
        reaches through an import (:meth:`~hp_invariants.semantic.SemanticModel.external`,
        :meth:`~hp_invariants.rules.shard_gate_facts.ShardGateIndex.external_definitions`)."""
        ref = self.ctx.semantic.external(call.func, func if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
        if ref is None or not may_name_project_module(ref, self.ctx.path):
            return None
        index = self._project_index()
        if index is None:
            return None
        found = index.external_definitions(ref, self.ctx.path, self.ctx.options)
        if found is None:
            return None
        octx, defs = found
        if os.path.abspath(octx.path) == os.path.abspath(self.ctx.path):
            return (self, defs)
        checker = self._others.get(octx.path)
        if checker is None:
            checker = self._others[octx.path] = _FileChecker(self.rule, octx, index.relative(octx.path), index)
        return checker, defs

    # ------------------------------------------------------------------ checks moved into a called function
    _NOT_HELPERS = frozenset({"isinstance", "getattr", "setattr", "hasattr", "type", "id", "print", "len", "str",
                              "repr", "vars", "list", "tuple", "dict", "set", "sorted", "any", "all"})

    def _callee_raise(self, call: ast.Call, var: str, func: ast.AST | None, depth: int = 0) -> str | None:
        """Evidence when the function ``call`` runs (with the walked submodule ``var`` as an argument,
        or a closure of the walk reading ``var``) raises when that submodule is marked: the overlap
        check moved into a helper of this file, a nested function, or a function of another module
        of the project; else ``None``."""
        name = last_name(call.func)
        if name is None or name in self._NOT_HELPERS or depth > 3:
            return None
        positions = [i for i, arg in enumerate(call.args) if self._is_var(arg, var)]
        keywords = [k.arg for k in call.keywords if k.arg and self._is_var(k.value, var)]
        scope = func if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        local = self._helper_target(call, scope)
        if local is not None:
            targets = [(self, local)]
        elif not (positions or keywords) or f"def {name}(" in self.ctx.source.text:
            return None
        else:
            found = self._external(call, scope)
            targets = [(found[0], d) for d in found[1]] if found else []
        evidence = None
        for checker, target in targets:
            if isinstance(target, ast.Lambda) or target is func:
                return None
            params = [a.arg for a in (*target.args.posonlyargs, *target.args.args)]
            if isinstance(call.func, ast.Attribute) and params and params[0] in {"self", "cls"}:
                params = params[1:]
            every = params + [a.arg for a in target.args.kwonlyargs]
            names = [params[i] for i in positions if i < len(params)] + [k for k in keywords if k in every]
            if not positions and not keywords and checker is self and var not in every \
                    and not self.ctx.semantic.resolve_name(var, target).candidates and var not in _assigned(target):
                names = [var]  # a closure of the walk: it reads the walked submodule itself
            found_here = None
            for param in names:
                found_here = checker._raise_on_marker(target, param, depth, self._learned_for(func))
                if found_here:
                    if depth == 0:
                        # the checker of another module only (self here would make a reference cycle)
                        self._raise_site.append((None if checker is self else checker, target, param,
                                                 checker._raise_test))
                    break
            if not found_here:
                return None
            evidence = found_here
        return evidence

    def _guards_own_transform(self, node: ast.stmt, walk: Walk, loop, func) -> bool:
        """True when the check the walk's call ``node`` runs is the guard of a per-module
        transformation, not an overlap check: the called function stores on the module it is given
        the very marker whose test raises (it patches that module and refuses to patch it twice:
        ``assert not hasattr(linear, "super_fwd")`` ... ``linear.super_fwd = ...``), and the walk hands
        it only the modules it selects (the call sits under an ``if`` of the loop body testing the
        walked submodule or its name: ``isinstance(sub, nn.Linear) and matches(name)``,
        ``name.endswith("proj")``, or after ``if not ...: continue`` on them). A deduplicating walk
        (``modules()``/``named_modules()``) meets a shared submodule once, so the raise fires only when
        the transformation is applied to the same module again (a tuner applied twice: what it refuses
        on purpose). A walk that marks every submodule it meets (the seed: the region's submodules
        all marked, the shared rotary with them) is region marking and stays reported (a walk of
        ``func`` storing the tested mark on its walked submodules itself), as does a call made for
        every walked submodule."""
        if not self._selected(node, walk, loop) or not self._raise_site:
            return False
        region = {name for loop_scope, walk_loop, walk in self._loops if loop_scope is func
                  for n in _walk_no_scopes(walk_loop.body) for name in self._stores_on(n, walk.var)}
        for checker, target, param, test in self._raise_site:
            checker = checker or self
            if test is None:
                return False
            stored = {name for n in _walk_no_scopes(target.body) for name in checker._stores_on(n, param)}
            if not stored & _markers(test) or region & _markers(test):
                return False
        return True

    def _selected(self, node: ast.AST, walk: Walk, loop, markers: frozenset | set = frozenset()) -> bool:
        """True when the walk reaches ``node`` only for the submodules it selects: ``node`` sits under
        an ``if`` of the loop body testing the walked submodule or its name (``isinstance(sub,
        nn.Linear) and matches(name)``, ``name.endswith("proj")``), or after ``if not ...: continue``
        on them (a selection keeps the modules its test names: the body of a positive test, the
        modules passing a negative test before ``continue``; skipping the root, ``if sub is
        module: continue``, or a deny-list, ``if name in skip: continue``, keeps nearly every
        module and is no selection). A test reading one of ``markers`` (``if not sub._is_wrapped: sub._is_wrapped =
        True``) selects by the mark, and a membership test of the submodule object (``if sub in
        seen: continue``) by a record of visits, not by what the module is: neither counts."""
        names = {walk.var} | ({walk.name_var} if walk.name_var else set())

        def tests_walked(test: ast.AST) -> bool:
            if markers and _markers(test) & markers:
                return False
            records = {id(n) for c in ast.walk(test) if isinstance(c, ast.Compare) and len(c.ops) == 1
                       and isinstance(c.ops[0], (ast.In, ast.NotIn)) and self._is_walked(c.left, walk.var)
                       for n in ast.walk(c.left)}
            return any(isinstance(n, ast.Name) and n.id in names and id(n) not in records for n in ast.walk(test))

        def negative(test: ast.AST) -> bool:  # `not ...`, `x not in ...`, `x is not ...`, `x != ...`
            return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) or \
                isinstance(test, ast.Compare) and len(test.ops) == 1 and \
                isinstance(test.ops[0], (ast.NotIn, ast.IsNot, ast.NotEq))

        def selects(test: ast.AST, keep_when_true: bool) -> bool:
            # a selection keeps what the test names (the body of a positive test, what passes a
            # negative `continue` test); skipping the root or a deny-list keeps nearly everything
            return tests_walked(test) and self._root_test(test, walk) is None and negative(test) != keep_when_true

        child: ast.AST = node
        for anc in self.ctx.ancestors(node):
            if isinstance(anc, ast.If) and selects(anc.test, True) and any(child is n for n in anc.body):
                return True
            block = next((b for b in (getattr(anc, "body", None), getattr(anc, "orelse", None))
                          if b.__class__ is list and any(child is n for n in b)), None)
            if block is not None and any(  # `if not isinstance(sub, nn.Linear): continue` before it
                    isinstance(stmt, ast.If) and not stmt.orelse and selects(stmt.test, False)
                    and isinstance(stmt.body[-1], ast.Continue)
                    for stmt in block[:next(i for i, n in enumerate(block) if n is child)]):
                return True
            if anc is loop:
                return False
            child = anc
        return False

    def _inline_transform_guard(self, node: ast.If, test: ast.AST, walk: Walk, loop, func) -> bool:
        """True when the raise under ``node`` (its marker test ``test``, in the walk ``loop``) is the
        guard of a per-module transformation written in the walk itself: the marks it tests are
        stored on the walked submodule only by this walk, only for the submodules it selects (under a
        test of the submodule or its name, as :meth:`_selected` reads it: ``module.lora_a = ...`` for
        the targets of a tuner), and by no other walk of the function (no region marking). The walk
        marks only what it transforms, so a shared submodule the transformation does not select is
        never marked, and a selected one is met once per application: the raise refuses a second
        application of the transformation (a tuner applied twice), on purpose; the marking of a
        whole region (the seed: every submodule of a layer) stays reported."""
        markers = _markers(test)
        stores = [n for n in _walk_no_scopes(loop.body) if markers & set(self._stores_on(n, walk.var))]
        if not stores or not all(self._selected(n, walk, loop, markers) for n in stores):
            return False
        if any(isinstance(n, ast.Call) and markers & set(self._helper_stores(n, walk.var, func))
               for n in _walk_no_scopes(loop.body)):
            return False  # a helper marks the walked submodules: not read here
        return not any(loop_scope is func and other is not loop and markers & set(self._stores_on(n, other_walk.var))
                       for loop_scope, other, other_walk in self._loops for n in _walk_no_scopes(other.body))

    def _learned_for(self, func: ast.AST | None) -> frozenset:
        return self.learned_markers(func) | self._extra_markers if func is not None else self._extra_markers

    def _raise_on_marker(self, target: ast.AST, param: str, depth: int, markers: frozenset) -> str | None:
        """Evidence when the body of ``target`` raises (not caught in it) under a test of a wrap
        marker of its parameter ``param`` (``markers``: those the caller's walk stores, as learned
        markers), directly or in a helper it calls with ``param``; else ``None``."""
        saved, saved_extra = self._scope, self._extra_markers
        self._scope, self._extra_markers = target, markers
        try:
            for node, _ in _statements(target.body, rebinding=param):
                if isinstance(node, ast.Assert):
                    if self.facts(node.test, param).else_hazard and not self._caught(node, target):
                        self._raise_test = node.test
                        return f"`{self._text(node.test)}` asserted in {self._where(target)}"
                    continue
                if isinstance(node, ast.If):
                    facts = self.facts(node.test, param)
                    for in_body, branch in ((True, node.body), (False, node.orelse)):
                        if not (facts.body_hazard if in_body else facts.else_hazard):
                            continue
                        for stmt, _via in self._raising_statements(branch, target):
                            if not self._caught(stmt, target):
                                self._raise_test = node.test
                                at = f"line {stmt.lineno}" if self.label is None else f"{self.label}:{stmt.lineno}"
                                return f"`{self._text(node.test)}` tested in {self._where(target)}, raise at {at}"
                    continue
                call = _statement_call(node)
                if call is not None and depth < 3:
                    found = self._callee_raise(call, param, target, depth + 1)
                    if found:
                        self._raise_test = None  # deeper: not this function's own guard
                        return found
        finally:
            self._scope, self._extra_markers = saved, saved_extra
        return None

    # ------------------------------------------------------------------ driver
    def run(self) -> Iterator[Finding]:
        """Check every walk loop and every ``if any(...)`` / ``assert`` of the file (statements only: fast).

        All walks are collected first: the markers a wrapper stores on walked submodules anywhere in
        the file are needed to learn the markers a function or its helpers store on walked submodules
        (see :meth:`learned_markers`).
        """
        if not has_walk_call_text(identifier_text(self.ctx.source.text)):
            return  # no call of a walk method anywhere: nothing can match
        items = list(self._collect(self.ctx.tree, self.ctx.tree.body))
        for scope, node, walk in items:
            if walk is not None:
                yield from self._check_loop(scope, node, walk)
            else:
                yield from self._check_any_form(scope, node)

    def _collect(self, scope: ast.AST, body: Sequence[ast.stmt]) -> Iterator[tuple[ast.AST, ast.AST, Walk | None]]:
        for node, _ in _statements(body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from self._collect(node, node.body)
            elif isinstance(node, ast.ClassDef):
                yield from self._collect(scope, node.body)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                walk = self._walk_of(node.target, node.iter, scope, node.body)
                if walk is None and isinstance(node.iter, ast.Name) and isinstance(node.target, ast.Name):
                    walk = self._stack_walk(node, scope, node.iter.id, node.target.id, None)
                if walk is not None:
                    self._loops.append((scope, node, walk))
                    yield scope, node, walk
                    recursive = self._recursive_walk(scope, node, walk)
                    if recursive is not None:
                        self._loops.append((scope, scope, recursive))
                        yield scope, scope, recursive
            elif isinstance(node, ast.While):
                walk = self._while_walk(node, scope)
                if walk is not None:
                    self._loops.append((scope, node, walk))
                    yield scope, node, walk
            elif isinstance(node, (ast.If, ast.Assert)):
                yield scope, node, None

    # ------------------------------------------------------------------ recursive walks
    def _recursive_walk(self, func, loop, walk: Walk) -> Walk | None:
        """``def f(module): ...; for child in module.children(): f(child)``: ``f`` checks every
        submodule of its first call's module through ``module`` (report only: no loop to continue).
        ``loop``/``walk``: a walk loop directly in ``func``; the recursive walk is returned once."""
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or id(func) in self._recursive_seen:
            return None
        params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
        if walk.root not in params or walk.root in {"self", "cls"} or walk.push_line:
            return None
        for node in _walk_no_scopes(loop.body):
            if (isinstance(node, ast.Call) and last_name(node.func) == func.name
                    and (isinstance(node.func, ast.Name) or dotted_name(node.func.value) in {"self", "cls"})
                    and any(self._is_var(arg, walk.var) for arg in node.args)):
                self._recursive_seen.add(id(func))
                others = tuple(p for p in params if p != walk.root)
                return Walk(var=walk.root, root=None, text=walk.text, yields_root=True, recursive=True,
                            root_params=others)
        return None

    # ------------------------------------------------------------------ stack / queue walks
    def _while_walk(self, loop: ast.While, scope) -> Walk | None:
        """``while stack: sub = stack.pop(); ...; stack.extend(sub.children())`` (also ``popleft``,
        ``pop(0)``, ``name, sub = stack.pop()``): a walk of the submodules of the stack's first items."""
        for stmt in loop.body[:3]:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
                continue
            func = stmt.value.func
            if not (isinstance(func, ast.Attribute) and func.attr in {"pop", "popleft"}
                    and isinstance(func.value, ast.Name)):
                continue
            target, name_var = stmt.targets[0], None
            if isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[0], ast.Name):
                name_var, target = target.elts[0].id, target.elts[1]
            if isinstance(target, ast.Name):
                return self._stack_walk(loop, scope, func.value.id, target.id, name_var)
        return None

    def _stack_walk(self, loop, scope, stack: str, var: str, name_var: str | None) -> Walk | None:
        """A walk if the body of ``loop`` pushes a walk of ``var`` onto ``stack`` (see :meth:`_while_walk`)."""
        if var not in self.walk_receivers():
            return None  # the file never walks `var`'s submodules
        walk_call = push_line = None  # the walk of `var` whose items are pushed, and the first push
        for node in _walk_no_scopes(loop.body):
            hit = _walk_call(node)
            if hit is not None and walk_call is None and self._is_var(hit[1].func.value, var):
                walk_call = hit[1]
            if push_line is None:
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in {"append", "extend", "appendleft", "extendleft", "insert"}
                        and self._is_var(node.func.value, stack)):
                    push_line = node.lineno
                elif isinstance(node, ast.AugAssign) and self._is_var(node.target, stack):
                    push_line = node.lineno
        if walk_call is None or push_line is None:
            return None
        root, yields_root = None, False
        for node, _ in _statements(scope.body if hasattr(scope, "body") else []):
            if node is loop:
                break
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and self._is_var(node.targets[0], stack)):
                value = node.value
                if isinstance(value, ast.Call) and last_name(value.func) == "deque" and value.args:
                    value = value.args[0]
                root, yields_root = None, False
                if isinstance(value, (ast.List, ast.Tuple)) and len(value.elts) == 1:
                    first = value.elts[0]
                    if isinstance(first, ast.Tuple) and len(first.elts) == 2:
                        if string_value(first.elts[0]) != "":
                            name_var = None
                        first = first.elts[1]
                    else:
                        name_var = None
                    root, yields_root = dotted_name(first), True
        if not yields_root:
            name_var = None
        return Walk(var=var, root=root, text=root or stack, name_var=name_var,
                    yields_root=yields_root, push_line=push_line)

    # ------------------------------------------------------------------ what the wrapper stores
    def learned_markers(self, scope: ast.AST | None) -> frozenset:
        """Attribute names that function ``scope`` or its helpers store on walked submodules: the
        wrapper's own wrap markers.

        ``sub.<name> = value`` or ``setattr(sub, "<name>", value)`` in the body of a walk of ``sub`` in
        ``scope`` or in a helper of the file that ``scope`` calls, directly or in a helper called
        there with ``sub`` (``_mark(sub)``), with a value that is not ``False``/``None``/``0``/``""``
        (those clear a mark). Attributes stored by unrelated functions of the file do not count.
        """
        if scope is None:
            return frozenset()
        key = id(scope)
        if key not in self._learned_markers:
            self._learned_markers[key] = frozenset()  # recursion guard
            funcs = [scope]
            for node in _walk_no_scopes(getattr(scope, "body", [])):
                if isinstance(node, ast.Call):
                    target = self._helper_target(node, scope if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
                    if target is not None and target is not scope and not isinstance(target, ast.Lambda):
                        funcs.append(target)
            names: set[str] = set()
            for func in funcs:
                for loop_scope, loop, walk in self._loops:
                    if loop_scope is not func:
                        continue
                    for node in _walk_no_scopes(loop.body):
                        names.update(self._stores_on(node, walk.var))
                        if isinstance(node, ast.Call):
                            names.update(self._helper_stores(node, walk.var, loop_scope))
            self._learned_markers[key] = frozenset(names)
        return self._learned_markers[key]

    def _stores_on(self, node: ast.AST, var: str) -> Iterator[str]:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and not _clears(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and self._is_var(target.value, var):
                    yield target.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                and len(node.args) == 3 and self._is_var(node.args[0], var) and not _clears(node.args[2])):
            name = string_value(node.args[1])
            if name:
                yield name

    def _helper_stores(self, call: ast.Call, var: str, scope) -> Iterator[str]:
        positions = [i for i, arg in enumerate(call.args) if self._is_var(arg, var)]
        if not positions:
            return
        target = self._helper_target(call, scope if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None)
        if target is None or isinstance(target, ast.Lambda):
            return
        params = [a.arg for a in (*target.args.posonlyargs, *target.args.args)]
        if isinstance(call.func, ast.Attribute) and params and params[0] in {"self", "cls"}:
            params = params[1:]
        for position in positions:
            if position < len(params):
                for node in _walk_no_scopes(target.body):
                    yield from self._stores_on(node, params[position])

    def is_learned_wrapper(self, name: str) -> bool:
        """True if this file wraps submodules in class ``name``: ``x.layer = C(x.layer)`` /
        ``x[i] = C(x[i])``, or ``C(v)`` stored into a submodule slot (``setattr``,
        ``add_module``/``register_module``, an attribute or item store, directly or through a local
        assigned in the same loop) inside a ``for`` loop over ``v``. Only calls of ``name`` are examined."""
        if name in self._learned_wrappers:
            return self._learned_wrappers[name]
        found = False
        if _class_like_name(name) and name + "(" in self.ctx.source.text:
            found = self._find_wrapping(name)
        self._learned_wrappers[name] = found
        return found

    def _find_wrapping(self, name: str) -> bool:
        def wrap_call(node: ast.AST) -> ast.Call | None:
            if isinstance(node, ast.Call) and node.args and last_name(node.func) == name:
                return node
            return None

        slots: list[tuple[ast.AST, str]] = []  # (statement, first argument) of C(v) stored into a slot
        aliases: list[tuple[ast.AST, str, str]] = []  # (statement, first argument, local) of w = C(v)
        for node in self.ctx.nodes_of(ast.Assign):
            call = wrap_call(node.value)
            if call is None or len(node.targets) != 1:
                continue
            target, first = node.targets[0], call.args[0]
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                if ast.dump(target).replace("ctx=Store()", "ctx=Load()") == ast.dump(first):
                    return True  # x.layer = C(x.layer)
                if isinstance(first, ast.Name):
                    slots.append((node, first.id))
            elif isinstance(target, ast.Name) and isinstance(first, ast.Name):
                aliases.append((node, first.id, target.id))
        for node in self.ctx.nodes_of(ast.Call):
            if last_name(node.func) in {"setattr", "add_module", "register_module"} and node.args:
                call = wrap_call(node.args[-1])
                if call is not None and isinstance(call.args[0], ast.Name):
                    slots.append((node, call.args[0].id))
        if not slots and not aliases:
            return False
        for loop in self.ctx.nodes_of(ast.For, ast.AsyncFor):
            bound = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
            inside = [item for item in slots + aliases if item[1] in bound
                      and loop.body[0].lineno <= item[0].lineno <= (loop.end_lineno or 0)]
            if not inside:
                continue
            body = None
            for item in inside:
                if len(item) == 2:
                    return True
                if body is None:
                    body = list(_walk_no_scopes(loop.body))
                if any(_is_slot(node, ast.Name(id=item[2])) for node in body):
                    return True
        return False

    def _aliases_of(self, scope: ast.AST) -> dict[str, tuple[str, ast.Call, bool]]:
        key = id(scope)
        if key not in self._aliases:
            self._aliases[key] = self._walk_aliases(scope.body)
        return self._aliases[key]

    def _walk_aliases(self, body: Sequence[ast.stmt]) -> dict[str, tuple[str, ast.Call, bool]]:
        """Local names assigned exactly once, from a walk (``mods = list(m.modules())``; the flag:
        ``mods = dict(m.named_modules())``, a name -> submodule mapping)."""
        counts: dict[str, int] = {}
        found: dict[str, tuple[str, ast.Call]] = {}
        for node, _ in _statements(body):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets = [node.target]
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
                targets = [node.target] if isinstance(node, (ast.For, ast.AsyncFor)) else [
                    item.optional_vars for item in node.items if item.optional_vars is not None]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        counts[name.id] = counts.get(name.id, 0) + 1
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if isinstance(target, ast.Name) and (not isinstance(node, ast.Assign) or len(node.targets) == 1):
                    value = node.value
                    branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
                    for branch in branches:
                        as_dict = _unwrap_dict(branch)
                        if as_dict is not None:
                            found[target.id] = (*as_dict, True)
                            break
                        inner, enumerated = _unwrap_iter(branch)
                        hit = _walk_call(inner)
                        if hit is not None and not enumerated:
                            found[target.id] = (*hit, False)
                            break
        return {name: hit for name, hit in found.items() if counts.get(name) == 1}

    def _resolve_iter(self, node: ast.AST, scope) -> tuple[tuple[str, ast.Call] | None, bool, bool]:
        """Return ``(walk, enumerated, item_shape)`` for an iterable expression.

        ``item_shape`` overrides the walk method's item shape when a mapping is iterated: ``"pair"``
        for ``.items()``, ``"module"`` for ``.values()``; ``None`` otherwise."""
        inner, enumerated = _unwrap_iter(node)
        mode = None
        as_dict = False
        if (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                and inner.func.attr in {"items", "values"} and not inner.args):
            mode = inner.func.attr
            inner, _ = _unwrap_iter(inner.func.value)
            hit = _unwrap_dict(inner)
            as_dict = hit is not None
        else:
            hit = None
        if hit is None:
            hit = _walk_call(inner)
        if hit is None and isinstance(inner, ast.Name):
            alias = self._aliases_of(scope).get(inner.id)
            if alias is not None:
                hit, as_dict = alias[:2], alias[2]
        if hit is None:
            return None, enumerated, None
        method = hit[0]
        shape = "dict" if as_dict else WALK_METHODS[method]
        if shape == "dict":
            if mode is None:
                return None, enumerated, None  # iterating the names only
            return hit, enumerated, "pair" if mode == "items" else "module"
        if mode is not None:
            return None, enumerated, None
        return hit, enumerated, None

    def _walk_of(self, target: ast.AST, iter_node: ast.AST, scope, body: Sequence[ast.stmt] = ()) -> Walk | None:
        hit, enumerated, item_shape = self._resolve_iter(iter_node, scope)
        if hit is None:
            return None
        method, call = hit
        if enumerated:
            if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
                return None
            target = target.elts[1]
        shape = item_shape or WALK_METHODS[method]
        name_var = None
        if shape == "pair" and isinstance(target, ast.Name):
            # `for item in m.named_modules(): name, sub = item` / `sub = item[1]`
            target = self._unpacked_in_body(target.id, body)
            if target is None:
                return None
        if shape == "pair":
            if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
                return None
            if isinstance(target.elts[0], ast.Name):
                name_var = target.elts[0].id
            target = target.elts[1]
        if not isinstance(target, ast.Name):
            return None
        receiver = call.func.value
        root = dotted_name(receiver)
        yields_root = method in ROOT_YIELDING
        if method != "modules" and (call.args or any(k.arg == "prefix" for k in call.keywords)):
            name_var = None  # a custom prefix: the root's name is not ""
        return Walk(var=target.id, root=root, text=self.ctx.text_of(call), name_var=name_var,
                    yields_root=yields_root)

    @staticmethod
    def _unpacked_in_body(item: str, body: Sequence[ast.stmt]) -> ast.AST | None:
        """The ``(name, sub)`` target that the first statements of ``body`` unpack the pair ``item`` into."""
        for stmt in body[:3]:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target, value = stmt.targets[0], stmt.value
            if isinstance(value, ast.Name) and value.id == item and isinstance(target, ast.Tuple) \
                    and len(target.elts) == 2:
                return target
            if (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id == item
                    and isinstance(value.slice, ast.Constant) and value.slice.value in (1, -1)
                    and isinstance(target, ast.Name)):
                return ast.Tuple(elts=[ast.Name(id="", ctx=ast.Store()), target], ctx=ast.Store())
        return None

    # ------------------------------------------------------------------ conditions
    def _is_marker_name(self, name: str | None) -> bool:
        if name is None:
            return False
        if any(p.fullmatch(name) for p in self.markers):
            return True
        if name in self._extra_markers:
            return True
        return self._text_gate("store", name) and name in self.learned_markers(self._scope)

    def walk_receivers(self) -> frozenset:
        """Names ``x`` for which the file's text calls ``x.<walk method>(`` (a cheap gate)."""
        if self._walk_receivers is None:
            text = self.ctx.source.text
            found: set[str] = set()
            for method in WALK_METHODS:
                needle = "." + method
                start = text.find(needle)
                while start != -1:
                    if _AFTER_WALK_NAME.match(text, start + len(needle)):
                        before = _RECEIVER_BEFORE.search(text, max(0, start - 80), start)
                        if before:
                            found.add(before.group(1))
                    start = text.find(needle, start + 1)
            self._walk_receivers = frozenset(found)
        return self._walk_receivers

    def _text_gate(self, kind: str, name: str) -> bool:
        """``store``: the file's text may store attribute ``name`` (``.name = ``, ``.name: T = `` or the
        string ``"name"`` for ``setattr``). Memoized."""
        key = (kind, name)
        found = self._text_gates.get(key)
        if found is None:
            text = self.ctx.source.text
            found = f'"{name}"' in text or f"'{name}'" in text
            needle = "." + name
            start = text.find(needle)
            while start != -1 and not found:
                end = start + len(needle)
                boundary = not (end < len(text) and (text[end].isalnum() or text[end] == "_"))
                found = boundary and _STORE_AFTER_NAME.match(text, end) is not None
                start = text.find(needle, start + 1)
            self._text_gates[key] = found
        return found

    def _is_wrapper_class(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Tuple):
            return any(self._is_wrapper_class(elt) for elt in node.elts)
        name = last_name(node)
        return name is not None and (any(p.fullmatch(name) for p in self.wrappers) or self.is_learned_wrapper(name))

    def _is_var(self, node: ast.AST, var: str) -> bool:
        return isinstance(node, ast.Name) and node.id == var

    def _is_dict_of(self, node: ast.AST, var: str) -> bool:
        """``var.__dict__`` or ``vars(var)``."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return self._is_var(node.value, var)
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars"
                and len(node.args) == 1 and self._is_var(node.args[0], var))

    def _marker_read(self, node: ast.AST, var: str) -> bool:
        """True if ``node`` reads a wrap marker of ``var`` (truthy when ``var`` is wrapped)."""
        if isinstance(node, ast.Attribute):
            return self._is_var(node.value, var) and self._is_marker_name(node.attr)
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else None
            args = node.args
            if name in {"getattr", "hasattr"} and len(args) >= 2 and self._is_var(args[0], var):
                return self._is_marker_name(string_value(args[1]))
            if name == "isinstance" and len(args) == 2 and self._is_var(args[0], var):
                return self._is_wrapper_class(args[1])
            if (isinstance(node.func, ast.Attribute) and node.func.attr == "get" and args
                    and self._is_dict_of(node.func.value, var)):
                return self._is_marker_name(string_value(args[0]))
        if isinstance(node, ast.Subscript) and self._is_dict_of(node.value, var):
            return self._is_marker_name(string_value(node.slice))
        return False

    def _predicate_facts(self, call: ast.Call, var: str) -> Facts:
        """``is_wrapped(sub)`` / ``self._is_wrapped(sub)``: a helper of the file whose body is one
        ``return`` of a marker test of the parameter that receives ``sub`` (refactoring: the test
        moved into a predicate)."""
        scope = self._scope if isinstance(self._scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        target = self._helper_target(call, scope)
        if target is None or isinstance(target, ast.Lambda) or target is scope or id(target) in self._predicates:
            return NONE
        self._predicates.add(id(target))
        try:
            return self._predicate_body_facts(call, var, target)
        finally:
            self._predicates.discard(id(target))

    def _predicate_body_facts(self, call: ast.Call, var: str, target: ast.AST) -> Facts:
        body = [stmt for stmt in target.body
                if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))]
        if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
            return NONE
        params = [a.arg for a in (*target.args.posonlyargs, *target.args.args)]
        if isinstance(call.func, ast.Attribute) and params and params[0] in {"self", "cls"}:
            params = params[1:]
        position = next(i for i, a in enumerate(call.args) if self._is_var(a, var))
        if position >= len(params) or params[position] == var:
            return NONE if position >= len(params) else self.facts(body[0].value, var)
        return self.facts(body[0].value, params[position])

    def _is_type_of(self, node: ast.AST, var: str) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type"
                and len(node.args) == 1 and self._is_var(node.args[0], var))

    def facts(self, node: ast.AST, var: str) -> Facts:
        """The :class:`Facts` of condition ``node`` about the marker of ``var``."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.facts(node.operand, var).negate()
        if isinstance(node, ast.NamedExpr):  # if wrapped := getattr(sub, "_is_wrapped", False): the value
            return self.facts(node.value, var)
        if isinstance(node, ast.BoolOp):
            parts = [self.facts(v, var) for v in node.values]
            read = any(p.m for p in parts)
            if isinstance(node.op, ast.And):
                return Facts(any(p.a for p in parts), all(p.b for p in parts),
                             all(p.c for p in parts), any(p.d for p in parts), read)
            return Facts(all(p.a for p in parts), any(p.b for p in parts),
                         any(p.c for p in parts), all(p.d for p in parts), read)
        if isinstance(node, ast.Constant):
            return Facts(b=True, c=True) if node.value else Facts(a=True, d=True)
        if self._marker_read(node, var):
            return MARKER
        if isinstance(node, ast.Call) and any(self._is_var(a, var) for a in node.args):
            return self._predicate_facts(node, var)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1 \
                and not node.keywords:
            if node.func.id == "bool":
                return self.facts(node.args[0], var)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, op, right = node.left, node.ops[0], node.comparators[0]
            # "_is_wrapped" in sub.__dict__ / vars(sub)
            if isinstance(op, (ast.In, ast.NotIn)) and self._is_dict_of(right, var) \
                    and self._is_marker_name(string_value(left)):
                return MARKER if isinstance(op, ast.In) else MARKER.negate()
            # type(sub) is W / type(sub) == W / type(sub) in (W1, W2)
            if self._is_type_of(left, var) and self._is_wrapper_class(right):
                if isinstance(op, (ast.Is, ast.Eq, ast.In)):
                    return MARKER
                if isinstance(op, (ast.IsNot, ast.NotEq, ast.NotIn)):
                    return MARKER.negate()
            # marker is True / == True / is not None / is False / is None / != False ...
            if isinstance(right, ast.Constant) and any(right.value is v for v in (True, False, None)):
                positive = {ast.Is: True, ast.Eq: True, ast.IsNot: False, ast.NotEq: False}.get(type(op))
                inner = self.facts(left, var)
                if positive is None or inner == NONE:
                    return NONE
                same = positive if right.value is True else not positive
                return inner if same else inner.negate()
        return NONE

    def _root_test(self, node: ast.AST, walk: Walk) -> bool | None:
        """True if ``node`` holds exactly for the root, False if exactly for non-roots, else None."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self._root_test(node.operand, walk)
            return None if inner is None else not inner
        if walk.name_var and isinstance(node, ast.Name) and node.id == walk.name_var:
            return False  # a non-empty name: not the root
        if walk.root_params and isinstance(node, ast.Name) and node.id in walk.root_params:
            return False  # `if depth:` (a non-zero depth): not the first call
        if walk.root_params and isinstance(node, ast.Compare) and len(node.ops) == 1:
            # recursion: `module is root` (a parameter passed down), `depth == 0`
            left, op, right = node.left, node.ops[0], node.comparators[0]
            for one, other in ((left, right), (right, left)):
                if (self._is_var(one, walk.var) and isinstance(other, ast.Name) and other.id in walk.root_params) or (
                        isinstance(one, ast.Name) and one.id in walk.root_params
                        and isinstance(other, ast.Constant) and other.value == 0 and other.value is not False):
                    if isinstance(op, (ast.Is, ast.Eq)):
                        return True
                    if isinstance(op, (ast.IsNot, ast.NotEq)):
                        return False
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, op, right = node.left, node.ops[0], node.comparators[0]
            for one, other in ((left, right), (right, left)):
                if self._is_var(one, walk.var) and walk.root is not None and dotted_name(other) == walk.root:
                    if isinstance(op, (ast.Is, ast.Eq)):
                        return True
                    if isinstance(op, (ast.IsNot, ast.NotEq)):
                        return False
                if walk.name_var and self._is_var(one, walk.name_var) and string_value(other) == "":
                    if isinstance(op, (ast.Is, ast.Eq)):
                        return True
                    if isinstance(op, (ast.IsNot, ast.NotEq)):
                        return False
        return None

    def _side_root_only(self, test: ast.AST, in_body: bool, walk: Walk) -> bool:
        """True if the body (``in_body``) or else-branch of ``if test`` runs only for the root."""
        if in_body:
            parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
            return any(self._root_test(p, walk) is True for p in parts)
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
        return any(self._root_test(p, walk) is False for p in parts)

    # ------------------------------------------------------------------ loop form
    def _check_loop(self, func, loop, walk: Walk) -> Iterator[Finding]:
        self._scope = func
        # a recursive walk (`loop` is the function itself) checks its parameter outside any loop
        fix_loop = None if walk.recursive else loop
        aliases: dict[str, tuple[int, ast.AST]] | None = None  # computed at the first test that matters
        for node, _ in _statements(loop.body, rebinding=None if walk.recursive else walk.var):
            if isinstance(node, ast.Assert):
                # `assert not marked`: raises AssertionError exactly when the test is false
                aliases = _loop_aliases(loop.body, walk.var) if aliases is None else aliases
                test = _expand_aliases(node.test, aliases, node.lineno)
                facts = self.facts(test, walk.var)
                if facts.else_hazard and id(node) not in self.reported \
                        and not self._side_root_only(test, False, walk) \
                        and not self._root_only_context(node, loop, walk, aliases) and not self._caught(node, loop) \
                        and not self._skips_visited(node, loop, walk, func):
                    self.reported.add(id(node))
                    yield self._finding(node, walk, f"`{self._text(node.test)}` asserted in the walk", False, None, True)
                continue
            if not isinstance(node, ast.If):
                call = _statement_call(node)
                if call is not None and id(node) not in self.reported:
                    self._raise_site = []
                    where = self._callee_raise(call, walk.var, func)
                    if where is not None:
                        aliases = _loop_aliases(loop.body, walk.var) if aliases is None else aliases
                        if not self._root_only_context(node, loop, walk, aliases) and not self._caught(node, loop) \
                                and not self._skips_visited(node, loop, walk, func) \
                                and not self._guards_own_transform(node, walk, loop, func):
                            self.reported.add(id(node))
                            yield self._finding(node, walk, where + ", called with the walked submodule",
                                                False, None, False)
                continue
            raising_in = [list(self._raising_statements(node.body, func, False)),
                          list(self._raising_statements(node.orelse, func, False))]
            if not raising_in[0] and not raising_in[1] and not _calls_in(node.body) and not _calls_in(node.orelse):
                continue  # nothing raises here: the condition does not matter (and is not analysed)
            aliases = _loop_aliases(loop.body, walk.var) if aliases is None else aliases
            test = _expand_aliases(node.test, aliases, node.lineno)
            facts = self.facts(test, walk.var)
            for in_body, branch in ((True, node.body), (False, node.orelse)):
                hazard = facts.body_hazard if in_body else facts.else_hazard
                if not hazard or not branch:
                    continue
                safe = facts.a if in_body else facts.c
                if self._side_root_only(test, in_body, walk) or self._root_only_context(node, loop, walk, aliases) \
                        or self._inline_transform_guard(node, test, walk, loop, func):
                    continue
                for stmt, where in self._raising_statements(branch, func):
                    if id(stmt) in self.reported or self._caught(stmt, loop) or self._skips_visited(stmt, loop, walk, func):
                        continue
                    self.reported.add(id(stmt))
                    evidence = f"`{self._text(node.test)}` tested in the walk, " + (
                        "raise here" if where is None else f"raise in {where}")
                    yield self._finding(stmt, walk, evidence, safe, fix_loop, where is None)

    def _skips_visited(self, node: ast.stmt, loop, walk: Walk, func) -> bool:
        """True when, before ``node``, the walk skips every submodule it has met before, in this call
        or an earlier one: a guard ``if sub in C: continue`` (or ``id(sub) in C``) precedes ``node``
        in the loop body, the loop body records the walked submodule in ``C`` (``C.add(sub)``,
        ``C.append(id(sub))``, ``C[sub] = ...``), and ``C`` outlives the call (an attribute such as
        ``self._visited``, a parameter the caller passes, a module-level or enclosing name; not a
        collection the function makes afresh, which dedups only one walk, as ``.modules()`` already
        does). A submodule shared with a region wrapped earlier is then skipped before the raise,
        which can only refuse a module marked by something else (the whole tuner applied twice)."""
        if walk.recursive:
            return False
        recorded = set()
        for sub in _walk_no_scopes(loop.body):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                    and sub.func.attr in ("add", "append", "appendleft", "setdefault") and sub.args \
                    and self._is_walked(sub.args[0], walk.var):
                recorded.add(self.ctx.text_of(sub.func.value))
            elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                for target in sub.targets if isinstance(sub, ast.Assign) else [sub.target]:
                    if isinstance(target, ast.Subscript) and self._is_walked(target.slice, walk.var):
                        recorded.add(self.ctx.text_of(target.value))
        if not recorded:
            return False
        child: ast.AST = node
        for anc in self.ctx.ancestors(node):
            for block in _blocks(anc):
                if child in block:
                    for prev in block[: block.index(child)]:
                        if isinstance(prev, ast.If) and not prev.orelse and prev.body \
                                and isinstance(prev.body[-1], ast.Continue):
                            test = prev.test
                            if isinstance(test, ast.Compare) and len(test.ops) == 1 \
                                    and isinstance(test.ops[0], ast.In) and self._is_walked(test.left, walk.var):
                                collection = self.ctx.text_of(test.comparators[0])
                                if collection in recorded and self._outlives_call(test.comparators[0], func):
                                    return True
            if anc is loop:
                return False
            child = anc
        return False

    def _is_walked(self, node: ast.AST, var: str) -> bool:
        """``var`` or ``id(var)``."""
        if self._is_var(node, var):
            return True
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"
                and len(node.args) == 1 and self._is_var(node.args[0], var))

    @staticmethod
    def _outlives_call(node: ast.AST, func) -> bool:
        """True when the collection ``node`` is not made afresh by the call of ``func``: an attribute
        (``self._visited``), a parameter, or a name ``func`` never assigns (module level, enclosing)."""
        if isinstance(node, ast.Attribute):
            return True
        if not isinstance(node, ast.Name) or not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        args = func.args
        if node.id in {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
            return True
        return node.id not in _assigned(func)

    def _root_only_context(self, node: ast.If, loop, walk: Walk,
                           aliases: dict[str, tuple[int, ast.AST]] | None = None) -> bool:
        """True if ``node`` sits where only the root gets (enclosing root test, early continue);
        ``aliases``: the loop body's locals (see :func:`_loop_aliases`), read in those tests."""
        aliases = aliases or {}
        if not walk.yields_root:
            return False
        child: ast.AST = node
        for anc in self.ctx.ancestors(node):
            for block in _blocks(anc):
                if child in block:
                    for prev in block[: block.index(child)]:
                        if (isinstance(prev, ast.If) and not prev.orelse and prev.body
                                and isinstance(prev.body[-1], (ast.Continue, ast.Break, ast.Return, ast.Raise))
                                and self._side_root_only(_expand_aliases(prev.test, aliases, prev.lineno),
                                                         False, walk)):
                            return True
            if isinstance(anc, ast.If):
                in_body = child in anc.body
                if self._side_root_only(_expand_aliases(anc.test, aliases, anc.lineno), in_body, walk):
                    return True
            if anc is loop:
                return False
            child = anc
        return False

    def _raising_statements(self, branch, func, external: bool = True) -> Iterator[tuple[ast.stmt, str | None]]:
        """Statements of ``branch`` (nested if/with/try included, loops excluded) that raise, with
        ``None`` for a raise written there, else where the helper the statement calls raises
        (``external``: also helpers of other files of the project, which may read the project facts)."""
        for stmt in branch:
            if isinstance(stmt, ast.Raise):
                if not self._reraise(stmt):
                    yield stmt, None
            elif isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Constant) and not stmt.test.value:
                yield stmt, None  # `assert False, msg`: raises AssertionError wherever it runs
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                where = self._raising_call(stmt.value, func, 0, external)
                if where is not None:
                    yield stmt, where
            elif isinstance(stmt, ast.If):
                yield from self._raising_statements(stmt.body, func, external)
                yield from self._raising_statements(stmt.orelse, func, external)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                yield from self._raising_statements(stmt.body, func, external)
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                yield from self._raising_statements(stmt.body, func, external)
                yield from self._raising_statements(stmt.orelse, func, external)
                yield from self._raising_statements(stmt.finalbody, func, external)
                for handler in stmt.handlers:
                    yield from self._raising_statements(handler.body, func, external)

    def _reraise(self, stmt: ast.Raise) -> bool:
        """True for a bare ``raise`` or ``raise e`` of the exception an enclosing ``except ... as e``
        caught: that propagates another error, it is not the overlap refusal (no finding)."""
        if stmt.exc is None:
            return True
        if not isinstance(stmt.exc, ast.Name):
            return False
        for anc in self.ctx.ancestors(stmt):
            if isinstance(anc, SCOPES):
                return False
            if isinstance(anc, ast.ExceptHandler) and anc.name == stmt.exc.id:
                return True
        return False

    def _reaches_caller(self, stmt: ast.stmt, loop) -> bool:
        """True when the refusal raised at ``stmt`` leaves the function unobserved, so that turning it
        into ``continue`` changes nothing but the refusal (fix applicability).

        False when it is raised while another exception is handled (inside an ``except`` between the
        walk loop and ``stmt``: a translation of that error), when a ``try`` around it (inside or
        around the walk, in the same function) has a handler that may catch it, when a ``finally``
        around the walk may swallow it (``return``/``break``/``continue``), when it sits in a ``finally``
        inside the walk (a ``continue`` there discards what the ``try`` body raised), or when a ``with`` around it
        enters a context manager that sees the exception (anything but the grad-mode ones).
        """
        raised = None
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            raised = last_name(stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc)
        inside = True
        child: ast.AST = stmt
        for anc in self.ctx.ancestors(stmt):
            if isinstance(anc, SCOPES):
                return True
            if anc is loop:
                inside = False
            elif isinstance(anc, ast.ExceptHandler) and inside:
                return False
            elif isinstance(anc, ast.Try) or type(anc).__name__ == "TryStar":
                if child in anc.body and any(_may_catch(h.type, raised) for h in anc.handlers):
                    return False
                if inside and child in anc.finalbody:  # `continue` there would drop the body's exception
                    return False
                if not inside and child is not None and child not in anc.finalbody and any(
                        isinstance(n, (ast.Return, ast.Break, ast.Continue)) for n in _walk_no_scopes(anc.finalbody)):
                    return False
            elif isinstance(anc, (ast.With, ast.AsyncWith)):
                if not all(isinstance(item.context_expr, ast.Call)
                           and last_name(item.context_expr.func) in TRANSPARENT_CMS for item in anc.items):
                    return False
            child = anc
        return True

    def _caught(self, stmt: ast.stmt, loop) -> bool:
        """True if a ``try`` between ``stmt`` and ``loop`` catches what ``stmt`` raises."""
        raised = None
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            raised = last_name(stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc)
        elif isinstance(stmt, ast.Assert):
            raised = "AssertionError"
        child: ast.AST = stmt
        for anc in self.ctx.ancestors(stmt):
            if anc is loop:
                return False
            if isinstance(anc, ast.Try) and child in anc.body:
                for handler in anc.handlers:
                    if handler.type is None:
                        return True
                    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
                    names = {last_name(t) for t in types}
                    if names & CATCH_ALL or (raised is not None and raised in names) or raised is None:
                        return True
            child = anc
        return False

    def _inner_loop_between(self, stmt: ast.stmt, loop) -> bool:
        for anc in self.ctx.ancestors(stmt):
            if anc is loop:
                return False
            if isinstance(anc, LOOPS):
                return True
        return True

    # ------------------------------------------------------------------ any(...) form
    def _check_any_form(self, func, node: ast.If | ast.Assert) -> Iterator[Finding]:
        """``if any(marker(m) for m in x.modules()): raise`` (and ``not all(not ...)``,
        ``assert not any(...)``)."""
        self._scope = func
        if isinstance(node, ast.Assert):
            found = self._any_walk(node.test, func, negated=True)
            if found is not None and found[0] and id(node) not in self.reported:
                self.reported.add(id(node))
                yield self._finding(node, found[1], f"`{self._text(node.test)}` asserted over the walk", False, None, True)
            return
        found = self._any_walk(node.test, func, negated=False)
        if found is None:
            return
        in_body, walk, safe_branch = found
        branch = node.body if in_body else node.orelse
        for stmt, where in self._raising_statements(branch, func):
            if id(stmt) in self.reported:
                continue
            self.reported.add(id(stmt))
            evidence = f"`{self._text(node.test)}` tested over the walk, " + (
                "raise here" if where is None else f"raise in {where}")
            yield self._finding(stmt, walk, evidence, safe_branch, None, where is None)

    def _any_walk(self, test: ast.AST, scope, negated: bool):
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self._any_walk(test.operand, scope, not negated)
        if isinstance(test, ast.BoolOp):
            for value in test.values:
                found = self._any_walk(value, scope, negated)
                if found is not None:
                    # `A and any(...)` body / `A or not any(...)` else: the branch needs the marker.
                    return found
            return None
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                and test.func.id in {"any", "all"} and len(test.args) == 1
                and isinstance(test.args[0], (ast.GeneratorExp, ast.ListComp, ast.SetComp))):
            return None
        gen = test.args[0]
        if len(gen.generators) != 1:
            return None
        comp = gen.generators[0]
        walk = self._walk_of(comp.target, comp.iter, scope)
        if walk is None or any(self._root_test(cond, walk) is True for cond in comp.ifs):
            return None
        elt = ast.BoolOp(op=ast.And(), values=[gen.elt, *comp.ifs]) if comp.ifs else gen.elt
        facts = self.facts(elt, walk.var)
        if test.func.id == "any":
            facts = Facts(facts.a, facts.b, facts.c, False, facts.m)
        else:
            facts = Facts(facts.a, False, facts.c, facts.d, facts.m)
        if negated:
            facts = facts.negate()
        if facts.body_hazard:
            return True, walk, facts.a
        if facts.else_hazard:
            return False, walk, facts.c
        return None

    # ------------------------------------------------------------------ findings and fixes
    def _finding(self, stmt: ast.stmt, walk: Walk, evidence: str, safe: bool, loop, closed: bool) -> Finding:
        """The finding at ``stmt``; ``evidence``: where the marker test and the raise were found;
        ``closed``: both are written in this function (HIGH), else through a helper (INFERENCE)."""
        ctx = self.ctx
        confidence = Confidence.HIGH if closed else Confidence.INFERENCE
        fix = None
        if loop is None or isinstance(stmt, ast.Assert):
            advice = "skip already-wrapped submodules instead of raising"
        else:
            advice = "skip it with 'continue'"
            if not self._inner_loop_between(stmt, loop):
                # `raise NotImplementedError(...)` is a deliberate unsupported-feature guard
                # ("nested FSDP unsupported"): turning it into `continue` needs a human decision
                safe = safe and not _raises_not_implemented(stmt) and self._reaches_caller(stmt, loop)
                # in a stack walk, `continue` before the push of the children also skips the subtree
                safe = safe and not (walk.push_line and stmt.lineno <= walk.push_line)
                applicability = Applicability.SAFE if safe else Applicability.UNSAFE
                fix = ctx.make_fix(self._continue_edits(stmt), "Replace the raise with 'continue'", applicability)
            else:
                advice = "skip it (a 'continue' here would bind to the inner loop)"
        return ctx.finding(self.rule, stmt, args=(walk.var, walk.text, advice, evidence), confidence=confidence,
                           fix=fix)

    def _continue_edits(self, stmt: ast.stmt) -> list[Edit]:
        """Replace the whole statement by ``continue``; comments inside it move above it."""
        source = self.ctx.source
        start, end = self.ctx.node_range(stmt)
        text = source.segment(start, end)
        comments = _comments(text) if "#" in text else []
        if not comments:
            return [Edit(start, end, "continue")]
        line = source.line_text(start[0])
        indent = line[: len(line) - len(line.lstrip())]
        if line[: start[1]].strip():  # the statement does not start its line (`if x: raise ...`)
            return [Edit(start, end, "continue  " + "  ".join(comments))]
        newline = source.newline()
        content = "".join(c + newline + indent for c in comments) + "continue"
        return [Edit(start, end, content)]


def _short(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut at ``limit`` characters (evidence in messages)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _statement_call(stmt: ast.AST) -> ast.Call | None:
    """The call a simple statement makes as a whole (``f(x)``, ``y = f(x)``, ``return f(x)``)."""
    value = getattr(stmt, "value", None) if isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.Return)) else None
    if isinstance(value, ast.Await):
        value = value.value
    return value if isinstance(value, ast.Call) else None


def _calls_in(branch: Sequence[ast.stmt]) -> bool:
    """True when a statement of ``branch`` (nested if/with/try included) is a call: a helper that may
    raise, looked for only once the test is known to matter."""
    for stmt in branch:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            return True
        if isinstance(stmt, (ast.If, ast.With, ast.AsyncWith, ast.Try)) or type(stmt).__name__ == "TryStar":
            inner = [*getattr(stmt, "body", []), *getattr(stmt, "orelse", []), *getattr(stmt, "finalbody", [])]
            inner += [s for h in getattr(stmt, "handlers", []) for s in h.body]
            if _calls_in(inner):
                return True
    return False


def _assigned(func: ast.AST) -> set[str]:
    """Names ``func`` binds in its body (not entering nested scopes)."""
    names: set[str] = set()
    for node in _walk_no_scopes(func.body):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
    return names


def _clears(value: ast.AST) -> bool:
    """True for a value that clears a mark rather than sets it (``False``, ``None``, ``0``, ``""``)."""
    return isinstance(value, ast.Constant) and not value.value


def _class_like_name(name: str | None) -> bool:
    """True if ``name`` names a class by convention (``CheckpointModule``, not ``wrap`` or ``MAX``)."""
    return bool(name) and name[0].isupper() and not name.isupper()


def _is_slot(node: ast.AST, value: ast.AST) -> bool:
    """True if ``node`` stores ``value`` (a node, or a ``Name`` compared by id) into a submodule slot."""
    def same(other: ast.AST) -> bool:
        return other is value or (isinstance(value, ast.Name) and isinstance(other, ast.Name) and other.id == value.id)

    if isinstance(node, ast.Assign):
        return same(node.value) and any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in node.targets)
    if isinstance(node, ast.Call) and node.args and last_name(node.func) in {"setattr", "add_module", "register_module"}:
        return same(node.args[-1])
    return False


def _may_catch(handler_type: ast.AST | None, raised: str | None) -> bool:
    """True when ``except handler_type`` may catch an exception of class ``raised`` (a name, or
    ``None`` when unknown). Only builtin classes are compared exactly; anything else may catch."""
    if handler_type is None or raised is None:
        return True
    types = handler_type.elts if isinstance(handler_type, ast.Tuple) else [handler_type]
    raised_cls = getattr(builtins, raised, None)
    if not (isinstance(raised_cls, type) and issubclass(raised_cls, BaseException)):
        return True
    for node in types:
        cls = getattr(builtins, last_name(node) or "", None)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)) or issubclass(raised_cls, cls):
            return True
    return False


def _comments(text: str) -> list[str]:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    return [tok.string for tok in tokens if tok.type == tokenize.COMMENT]


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    blocks = []
    for name in ("body", "orelse", "finalbody"):
        value = getattr(node, name, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            blocks.append(value)
    return blocks


def _loop_aliases(body: list[ast.stmt], var: str | None = None) -> dict[str, tuple[int, ast.AST]]:
    """``name -> (line, value)`` of each name the loop body binds exactly once, by a plain
    ``name = value`` (or ``name: T = value``) statement of the body itself
    (``wrapped = getattr(sub, "_is_wrapped", False)``): a test after that line reads the value (the
    statement runs first in every iteration). The walk's own variable ``var`` (``sub = stack.pop()``)
    is never one."""
    stores: dict[str, int] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                stores[node.id] = stores.get(node.id, 0) + 1
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for name in node.names:
                    stores[name] = 2
    aliases: dict[str, tuple[int, ast.AST]] = {}
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:  # wrapped: bool = ...
            target = stmt.target
        else:
            continue
        if isinstance(target, ast.Name) and target.id != var and stores.get(target.id) == 1:
            aliases[target.id] = (stmt.lineno, stmt.value)
    return aliases


def _expand_aliases(test: ast.AST, aliases: dict[str, tuple[int, ast.AST]], line: int) -> ast.AST:
    """``test`` with each name of ``aliases`` bound before ``line`` replaced by its value, inside
    ``not``/``and``/``or``, comparisons and ``bool(...)`` (what :meth:`facts` reads); ``test`` itself
    when nothing is replaced."""
    if not aliases:
        return test
    if isinstance(test, ast.Name):
        found = aliases.get(test.id)
        return found[1] if found is not None and found[0] < line else test
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        operand = _expand_aliases(test.operand, aliases, line)
        return test if operand is test.operand else ast.UnaryOp(op=test.op, operand=operand)
    if isinstance(test, ast.BoolOp):
        values = [_expand_aliases(v, aliases, line) for v in test.values]
        return test if all(a is b for a, b in zip(values, test.values)) else ast.BoolOp(op=test.op, values=values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left = _expand_aliases(test.left, aliases, line)
        return test if left is test.left else ast.Compare(left=left, ops=test.ops, comparators=test.comparators)
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "bool" \
            and len(test.args) == 1 and not test.keywords:
        arg = _expand_aliases(test.args[0], aliases, line)
        return test if arg is test.args[0] else ast.Call(func=test.func, args=[arg], keywords=[])
    return test

def _statements(body: Sequence[ast.stmt], rebinding: str | None = None, enter_scopes: bool = False,
                path: tuple[ast.AST, ...] = ()) -> Iterator[tuple[ast.stmt, tuple[ast.AST, ...]]]:
    """Yield ``(statement, ancestors)`` for the statements under ``body``, expressions skipped.

    Nested functions and classes are yielded but not entered unless ``enter_scopes``; with
    ``rebinding``, nested ``for`` loops whose target binds that name are not entered either.
    """
    for stmt in body:
        yield stmt, path
        if not enter_scopes and isinstance(stmt, SCOPES):
            continue
        if rebinding is not None and isinstance(stmt, (ast.For, ast.AsyncFor)) and any(
                isinstance(n, ast.Name) and n.id == rebinding for n in ast.walk(stmt.target)):
            continue
        inner = path + (stmt,)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if block and isinstance(block, list) and isinstance(block[0], ast.stmt):
                yield from _statements(block, rebinding, enter_scopes, inner)
        for sub in getattr(stmt, "handlers", ()) or getattr(stmt, "cases", ()):
            yield from _statements(sub.body, rebinding, enter_scopes, inner + (sub,))


def _walk_no_scopes(body: Sequence[ast.AST], rebinding: str | None = None) -> Iterator[ast.AST]:
    """Yield every node under ``body`` without entering nested functions, lambdas or classes.

    With ``rebinding``, nested ``for`` loops whose target binds that name are not entered either
    (their own walk, if any, is checked on its own).
    """
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, SCOPES):
            continue
        if rebinding is not None and isinstance(node, (ast.For, ast.AsyncFor)) and any(
                isinstance(n, ast.Name) and n.id == rebinding for n in ast.walk(node.target)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


# ---------------------------------------------------------------------- history hooks: the pinned repair
def _markers(test: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found


def _walk_tests(scope: ast.AST) -> list[ast.If]:
    tests = []
    for loop in scope_nodes(scope):
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            tests.extend(n for n in scope_nodes(loop) if isinstance(n, ast.If))
    return tests


def _same_test(node: ast.If, detail: dict) -> bool:
    markers = set(detail.get("markers", ()))
    return ast.unparse(node.test) == detail["test"] or bool(markers) and markers <= _markers(node.test)


def _pin_repair(finding: Finding, before: ast.Module, after: ast.Module) -> Repair | None:
    """A ``raise`` for an already-wrapped submodule turned into a skip: the test guarding the
    reported ``raise`` (its code and its marker strings/attributes), skipping after the change."""
    old_scope, new_scope = qualified_scopes(before).get(finding.obj), qualified_scopes(after).get(finding.obj)
    if old_scope is None or new_scope is None:
        return None
    parents = parent_map(old_scope)
    raises = [n for n in nodes_at_line(old_scope, finding.line) if isinstance(n, ast.Raise)]
    if not raises:
        return None
    node, test = raises[0], None
    while id(node) in parents and node is not old_scope:
        node = parents[id(node)]
        if isinstance(node, ast.If) and test is None:
            test = node
    if test is None:
        return None
    detail = {"test": ast.unparse(test.test), "markers": sorted(_markers(test.test))}
    if _repair_state(new_scope, detail).state != REPAIRED:
        return None
    repaired = next(t for t in _walk_tests(new_scope) if _same_test(t, detail))
    return Repair("skip", finding.obj, detail, f"if {ast.unparse(repaired.test)}: {ast.unparse(repaired.body[0])}",
                  f"if {detail['test']}: raise ...")


def _repair_state(scope: ast.AST, detail: dict) -> RepairState:
    matched = [t for t in _walk_tests(scope) if _same_test(t, detail)]
    if not matched:
        return RepairState(UNKNOWN, scope, "no submodule walk tests it any more")
    for test in matched:
        raising = [s for s in test.body if isinstance(s, ast.Raise)]
        if raising:
            return RepairState(REVERTED, raising[0], f"the walk in {scope.name} raises again when "
                                                     f"`{ast.unparse(test.test)}` instead of skipping the submodule")
    return RepairState(REPAIRED)
