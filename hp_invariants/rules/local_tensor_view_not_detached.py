"""# E9501 local-tensor-view-not-detached

## What it does
Flags a store of an *autograd view* of another tensor into a DTensor's local-tensor attribute
(`_local_tensor`, option `local-tensor-attrs`) without `.detach()`.

Stores (sinks): `x._local_tensor = v`, `x._local_tensor: T = v`, tuple targets
(`a._local_tensor, b = v, w` pairs element-wise), `setattr(x, "_local_tensor", v)` and
`object.__setattr__(x, "_local_tensor", v)`.

Views (sources):

* the view methods `.narrow .view .view_as .as_strided .expand .expand_as .transpose .t .permute
  .select .unflatten .unfold .squeeze .unsqueeze .diagonal .movedim .swapaxes .swapdims` and the
  view attributes `.T .mT .real .imag`;
* basic subscripting: `t[a:b]`, `t[None]`, `t[...]`, `t[:, 0]`. A lone integer index (`t[0]`) is
  a view only when `t` is known to be a tensor (a view, a `torch.*` call, a `_local_tensor`
  attribute), because `outputs[0]` on a list is not; an index that is a name, a list or a tensor
  (advanced indexing copies) is never treated as a view;
* an element of `.split .chunk .unbind .tensor_split` (`t.chunk(2)[0]`, `parts = t.split(n)` then
  `parts[1]`, `a, b = t.split(n)`, `for a in t.unbind(0):`);
* the function forms `torch.narrow(t, ...)`, `torch.transpose(t, ...)`, `torch.chunk(t, 2)[0]`, ...,
  also `torch.Tensor.narrow(t, ...)`, `import torch as th` and `from torch import narrow`.

Chains stay views: `t.narrow(...).view(-1)`. These calls keep whatever they receive, because they
return `self` when there is nothing to do: `.contiguous() .to() .float() .half() .double()
.bfloat16() .type() .cpu() .cuda()` and in-place methods such as `.requires_grad_()` or
`.copy_()`. When `.to()`/`.float()` does convert, the result is a copy and the message is
pessimistic, but the `.detach()` fix is then a no-op for autograd; we prefer it to missing the
no-conversion case, which is the common one (`t.narrow(...).to(t.dtype)`). Not treated as views:
`.reshape()`/`.flatten()` (a view only sometimes) and ops outside the list above.

**A view of a temporary only the store holds** is not reported: `p._local_tensor = t.detach().view(-1)`,
`t.data[0:n]`, `t.new_zeros(m).narrow(...)`, `torch.zeros(m)[:n]`, a `clone()` under no_grad, written
in the store's own expression (a single-target assignment or `setattr`). Its base is a new tensor object
(an alias of `t`'s storage with autograd state of its own, or a fresh allocation) that no name holds and
that does not require grad: an in-place write of `t` goes through `t`'s autograd state, not the
alias's, so nothing can ever write the view's base, its `is_leaf` stays True, and `.detach()` would change
nothing (the smoke test checks both on torch). Near misses stay flagged (`temporary_base`): a name holding
the base (`alias = t.detach()` then `alias.narrow(...)`: the code may write `alias`), a base that may
require grad (`clone()` in grad mode, `requires_grad=True`), a pass-through call that may return `t`
itself (`t.contiguous().narrow(...)`), or a name holding the view or another view of the same base (a
local, `:=`, an unpacked `chunk`, a second store target).

The value may reach the store through local variables of the same function. The analysis follows
statements in source order with branches joined (`if`/`else`, loops, `try`): a reassignment of the
variable to something that is not a view (`v = v.detach()`, `v = v.clone()`, `v = torch.empty(n)`)
ends the track. Values that are clean: a chain ending in `.detach()`, `.clone()` or `.data`.
`v.detach_()` does *not* clean: on a view it raises `RuntimeError: Can't detach views in-place`.

The value may also come from a helper of the same file: a module function, a function nested in
the scope or a lambda bound to a local, a method (`self.m(...)`, `cls.m(...)`, `Cls.m(...)`, looked up in the class and its bases
defined in the file), a `@property`/`cached_property` read as `self.p`, or a generator; the helper
is walked once and whatever view it returns or yields is a view made by the call. Tuples and lists
keep their positions (`local, pad = helper(t)` when the helper returns `(view, pad)`;
`pair = (view, n)`), comprehensions keep their element (`[c.view(-1) for c in t.chunk(n)]`), and
loops over `zip(...)`/`enumerate(...)` bind each target to its own iterable's item
(`for p, shard in zip(params, flat.split(sizes))`).

A helper of **another module of the project** counts the same way: a module-level function that an
import binds the called name to (`from shardlib.views import local_shard`, `from . import views`
then `views.local_shard(...)`, a re-export in a package's `__init__.py`); the project facts map the
module to a file of the project (relative imports from the file's folder, absolute ones by their path
inside the project; nothing when two files match or none does, e.g. an installed package), and that
file's function is walked as a helper of its own file (its own imports, its own helpers, further
imports followed). The rule reads the project facts only when such a helper's value reaches a store:
the file is walked once with imported helpers as unknown values, and again, following them, only
then (`helper_other_module_project`, `helper_other_module_project_ok`: helpers that detach, copy or
make no view, an installed package, a shadowing local).

**The wrapper holds the leaf state.** PyTorch's `DTensor` (`torch.distributed.tensor`) is a wrapper
subclass: the wrapper, not its local tensor, holds the autograd leaf state that `param.is_leaf` and
the optimizer read (hyper-parallel's own `DTensor` instead returns `self._local_tensor.is_leaf`). A
store is not reported when both hold: an `isinstance(obj, DTensor)` with `DTensor` imported from
`torch.distributed` must hold at the store (an enclosing `if` test, an `assert`, or an early-exit
guard before it in the same function), and every view reaching the store has a **fresh base** that
never required grad: a torch factory (`torch.empty/zeros/ones/full/arange/rand...`, `*_like`),
`x.new_empty/new_zeros/new_ones/new_full` (no `requires_grad=`), a `clone()` in no-grad mode, views
and pass-through calls of one, or a local every binding of which is one. Then `is_leaf` cannot
raise or turn False, and the untracked view cannot fail when the local tensor is used (its base never
required grad, so it carries no no-grad-view mark). A class of the project or another package, a
base that is the parameter's own tensor (it may require grad), a base fresh on one path only, a
`requires_grad=True` base, or no proof of the receiver's class keep the finding
(`wrapper_leaf_fresh_base`, `wrapper_leaf_fresh_base_ok`).

Nothing is reported in a module that can never be imported (an import of the project itself
always fails there: the pipeline's rule for every rule, `unimportable_module`).

Only stores into a *parameter's* local tensor are the invariant. A gradient or a buffer is never an
optimizer leaf, so a view of a flat reduce-scatter or buffer storage is how such DTensors are
normally built. A store is skipped when its receiver is evidently one: it is reached through an
attribute or name with a token `grad`/`grads`/`gradient(s)`/`buf(s)`/`buffer(s)` whose last token is
not `param(s)`/`parameter(s)`/`weight(s)` (`p.grad`, `p.main_grad`, `sharded_grad`, `grads[i]`,
`flat_buffer`; `grad_param` is a parameter), a local bound from one, an item of `.buffers()` /
`.named_buffers()` or `get_buffer(...)`. Where the stored tensor comes from is *not* such evidence:
the incident's base, and FSDP2's, is itself a freshly allocated tensor (a padded or pinned copy)
under no_grad, and the store into the parameter is still the bug.

Spellings of the class (each has a flagged fixture and a clean twin, with `.clone()`, `.detach()`
or a non-view element as the near miss): the view stored directly or through locals; a chain; an
element of `split`/`chunk` by index, unpacking or loop; moved into a helper function, a method of a
base class, a static/class method, a nested function, a lambda, a property, a generator; carried in a tuple
or list or a comprehension; looped with `zip`/`enumerate`; a tuple store; `setattr`. Near misses
that stay clean: stores into gradients and buffers, helpers that detach or copy, a same-named method
of an unrelated class, an attribute that is not a property of the file.

**Evidence and confidence.** Every message ends with its evidence: which view op made the view and
where (`made at line 12`, or `returned by '_shard()' (line 5 of this file)` / `returned by
'local_shard()' of shardlib/views.py:7`), and whether it was made under no_grad. A view made by a
helper of another module is `INFERENCE` and its fix unsafe whatever that helper's grad mode: the rule
then assumes the name is bound at run time to the `def` the import shows.

Confidence is `HIGH` when the view is created inside a no-grad region: `with torch.no_grad()`,
`torch.inference_mode()` (not `inference_mode(False)`), `torch.set_grad_enabled(False)` (as a
context manager or as a statement earlier in the same block), a function decorated with
`@torch.no_grad()` / `@torch.inference_mode()`, or a context manager or decorator whose last name
is in option `no-grad-contexts` (`no_grad()` after `from torch import no_grad` matches).
`torch.enable_grad()` inside such a region switches it off again. Otherwise it is `INFERENCE`.
Only the function that creates the view is examined: a caller's `no_grad` gives `INFERENCE`,
except for a helper of the file, which runs under the grad mode of its call.

Location: the view expression when it is written in the store statement itself
(`x._local_tensor = t.narrow(...)` points at `t.narrow(...)`), otherwise the store statement
(`x._local_tensor = local_view`, or the `setattr(...)` call). Either way the position is on the
store's line, where a `# pylint: disable=local-tensor-view-not-detached` comment belongs.

## Why is this bad?
`Tensor.narrow(...)` and the other view ops return a tensor that autograd still records as a view
of its base. In hyper-parallel's `TorchHSDPParamV2.reset_sharded_param` (hyper-parallel issue 230)
the local shard was created with `local_tensor.narrow(...)` under `torch.no_grad()` during meta
init and bound to `sharded_param._local_tensor`; weight loading and the mixed-precision upcast then
wrote its base in place in grad mode. Building `torch.optim.AdamW` reads `param.is_leaf`, which for
a DTensor is `self._local_tensor.is_leaf`, and PyTorch raised:

```text
RuntimeError: A view was created in no_grad mode and its base or another view of its base has been
modified inplace with grad mode enabled. Given that this use case is ambiguous and error-prone, it
is forbidden. ...
```

A view created in grad mode fails differently: after the in-place write to its base it is no
longer a leaf (`is_leaf` is False), and the optimizer refuses it ("can't optimize a non-leaf
Tensor"). `.detach()` returns a tensor sharing the storage that autograd does not link to the
base, so the parameter stays a clean leaf. The `.detach()` had been there (hyper-parallel PR 633)
and a refactor dropped it.

## Example
```python
import torch


def reset_sharded_param(self, local_tensor, length):
    with torch.no_grad():
        local_view = local_tensor.narrow(dim=0, start=0, length=length)
    self.sharded_param._local_tensor = local_view
```

## Use instead
```python
import torch


def reset_sharded_param(self, local_tensor, length):
    with torch.no_grad():
        local_view = local_tensor.narrow(dim=0, start=0, length=length).detach()
    self.sharded_param._local_tensor = local_view
```

## Fix safety
The fix appends `.detach()` where the view is created: at the end of the view chain
(`t.narrow(...).view(-1)` -> `t.narrow(...).view(-1).detach()`, never `.detach().detach()`), at the
assignment of the local variable when the view flows through one, and to the element for
`t.chunk(2)[0]` -> `t.chunk(2)[0].detach()`. For a tuple unpacking (`a, b = t.split(n)`) or a loop
over the pieces (`for a in t.split(n):`) there is no expression for the one element, so the fix
inserts the line `a = a.detach()` right after the unpacking (first in the loop body), with the same
indentation; only the variable that reaches the store changes.

A view expression is fixed in place even when its statement shares a line with other code
(`x = t.narrow(0, 0, 1); self.p._local_tensor = x` -> `x = t.narrow(0, 0, 1).detach(); ...`).
Reported **without a fix** are only the one-liners where that line cannot be inserted: an unpacking
that shares its line with other code (`a, b = t.split(n); p._local_tensor = a`, or code before it
after a `;`), a loop whose body starts on the `for` line (`for a in t.split(n): p._local_tensor = a`)
or whose first body statement shares its line with other code, and a tuple *store*
(`a._local_tensor, b = t.split(n)`).

The fix is **safe** (checked by the executable oracle in `tests/test_fix_oracle.py`) when every
view reaching the store is created where grad mode is certainly off: there the view carries no
`grad_fn` and `requires_grad` is False, exactly as for `.detach()`, so only the view link changes,
also for the other uses of the same variable (in-place updates, returns). Grad mode is certainly
off inside `with torch.no_grad():`, `torch.inference_mode()` (`inference_mode(mode)` with a mode
known only at run time keeps the surrounding mode), `torch.set_grad_enabled(False)` (as a context
manager, or as a statement earlier in the same block), a function decorated with one of them, and
the configured `no-grad-contexts`; and it stops being certainly off

* inside `torch.enable_grad()` or `set_grad_enabled(mode)` with a mode known only at run time (as
  a context manager or a statement);
* after a statement that contains a `set_grad_enabled(...)` statement that may enable grad in a
  branch, loop, `try` or `with` block (`if c: torch.set_grad_enabled(True)`), for the rest of the
  block, and for the whole body of a loop whose body holds one (the next iteration may start with
  grad on), and for the `except`/`else`/`finally` blocks of a `try` whose body holds one; a
  `with` of a grad-mode context manager restores the mode on exit, so statements inside it do not
  count;
* from a call `set_grad_enabled(...)` or `torch._C._set_grad_enabled(...)` of a mode other than a
  constant `False` anywhere in an expression (`prev = torch.set_grad_enabled(True)`, `if
  torch.set_grad_enabled(True):`): the call switches the mode whatever is done with its value.

Other control flow around the view (`if`/`else` branches, ternaries, walrus bindings, loops with
`else`, `try`/`except`/`finally`) does not change the applicability: every path that creates the
view gets `.detach()`. Otherwise the fix is **unsafe**: in grad mode the view may carry gradient
back to its base, and `.detach()` cuts that; apply it with `--unsafe-fixes` after checking that
nothing wants gradient through `_local_tensor` (for a parameter's shard, nothing does). A function
called in a no-grad region that switches grad mode on itself is not seen.

What `.detach()` also drops in grad mode is `requires_grad`: a view of a base that requires grad
requires grad, the detached tensor never does. A DTensor that answers `requires_grad` and `is_leaf`
from its local tensor (hyper-parallel's does) then stops requiring grad, and the optimizer skips the
parameter without an error. After an unsafe fix, set it again where the parameter trains
(`param.requires_grad_(True)` after the store, or the project's own helper: hyper-parallel's repair
calls `set_requires_grad_if_needed`); the fix's title says so. (In the safe case nothing changes: a view
made under no_grad does not require grad either.)

## Options
* `local-tensor-attrs` (csv, default `_local_tensor`): attribute names whose stores are checked.
  The rule's text prefilter follows this option: a file is analysed only if one of the configured
  names occurs in its text.
* `no-grad-contexts` (csv, default `no_grad,inference_mode,set_grad_enabled,_no_grad`): last name
  components of context managers and decorators that disable grad mode. `set_grad_enabled` counts
  only with a literal `False`, `inference_mode` not with a literal `False`.

## References
* hyper-parallel issue 230 (gitcode mindspore/hyper-parallel), file 1: `fully_shard/param.py`.
* PyTorch autograd mechanics, "In-place operations with views" and "no-grad mode":
  <https://pytorch.org/docs/stable/notes/autograd.html>
* `torch.Tensor.detach`: <https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html>
* Tensor views: <https://pytorch.org/docs/stable/tensor_view.html>
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass
from typing import Iterable, Iterator

from hp_invariants.astutil import (SCOPES, always_exits, dotted_name, last_name, names_in_target, parent_map, qualified_scopes,
                                   scope_nodes, statement_of)
from hp_invariants.model import Applicability, Confidence, Edit, Finding
from hp_invariants.api import REPAIRED, REVERTED, UNKNOWN, Repair, RepairState
from hp_invariants.declarations import LocalTensorViewNotDetachedDeclaration
from hp_invariants.rules.shard_gate_facts import may_name_project_module

#: ``ast.Match`` (Python 3.10+); on 3.9, where no match statement parses, nothing is one.
_MATCH = getattr(ast, "Match", ())

# Methods returning an autograd view of their receiver (torch/_tensor_docs.py, tensor_view.html).
VIEW_METHODS = frozenset({
    "narrow", "view", "view_as", "as_strided", "expand", "expand_as", "transpose", "t", "permute",
    "select", "unflatten", "unfold", "squeeze", "unsqueeze", "diagonal", "movedim", "swapaxes",
    "swapdims",
    # an alias of the receiver's storage as another class: ``_base`` is the receiver, its autograd
    # state is the receiver's (``AliasBackward0`` of a parameter: not a leaf)
    "as_subclass",
})
# Attributes that are views: x.T, x.mT, x.real, x.imag.
VIEW_ATTRS = frozenset({"T", "mT", "real", "imag"})
# Methods returning a tuple of views; an element of the result is a view.
SEQ_METHODS = frozenset({"split", "chunk", "unbind", "tensor_split"})
# torch.<op>(t, ...) function forms: views, and tuples of views.
VIEW_FUNCS = frozenset({
    "narrow", "as_strided", "transpose", "t", "permute", "select", "unflatten", "squeeze",
    "unsqueeze", "diagonal", "movedim", "moveaxis", "swapaxes", "swapdims", "real", "imag",
})
SEQ_FUNCS = SEQ_METHODS
# Calls that may return ``self`` (no conversion needed), so a view stays a view.
PASS_METHODS = frozenset({
    "contiguous", "to", "float", "half", "double", "bfloat16", "type", "cpu", "cuda", "npu",
    "type_as",
})
CLEAN_METHODS = frozenset({"detach", "clone"})
# Fresh allocations that do not require grad unless told to (``requires_grad=True``).
FACTORY_FUNCS = frozenset({
    "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like", "empty_strided",
    "arange", "rand", "randn", "randint", "rand_like", "randn_like", "linspace", "eye",
})
FACTORY_METHODS = frozenset({"new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided"})
CLEAN_ATTRS = frozenset({"data"})

SUBSCRIPT_OP = "subscript"


@dataclass(frozen=True)
class _Origin:
    """Where a view (or a tuple of views, ``kind == "seq"``) is created.

    ``kind``: ``view`` (fix: append ``.detach()`` to ``anchor``), ``seq`` (a tuple of views, never
    stored itself), ``unpack`` (``var`` bound by unpacking/looping over a seq in statement
    ``anchor``; fix: insert ``var = var.detach()``), ``store`` (a tuple store of a seq element; no
    fix). AST nodes compare by identity, so origins are equal when they name the same node.
    """

    kind: str
    op: str
    anchor: ast.AST
    nograd: bool
    var: str = ""
    # ``coll`` (a tuple/list literal, a comprehension, a helper's tuple result): the origins of each
    # element (``items``), positional when ``fixed``. ``elem``: an element of a seq or of a helper's
    # tuple with no expression of its own (becomes ``unpack`` where a name binds it, ``view`` where
    # it is subscripted). ``nonparam``: the name holds a gradient or a buffer, not a parameter.
    items: tuple = ()
    fixed: bool = True
    # ``fresh``: a view whose base is a fresh allocation that does not require grad (``torch.empty``,
    # ``x.new_zeros``, a ``clone`` under no_grad, through views and pass-through calls); ``via``: the
    # helper the view comes from, as evidence (``"'shard()' (line 3 of this file)"``), ``""`` when it is
    # made in the walked scope. ``ext``: the value of a call of a helper imported from another module
    # of the project, not looked into yet (``op``: its name).
    fresh: bool = False
    via: str = ""
    # ``temp``: a view whose base is a temporary no name holds and that never requires grad (``t.detach()``,
    # ``t.data``, a factory call, a ``clone`` under no_grad, written in the view's own expression): no
    # in-place write can reach that base (see :meth:`_Walker.temporary`)
    temp: bool = False


_EMPTY: frozenset = frozenset()


@dataclass
class _Value:
    """Origins of an expression: ``inline`` ones created in it, ``carried`` ones from variables."""

    inline: frozenset = _EMPTY
    carried: frozenset = _EMPTY

    def all(self) -> frozenset:
        return self.inline | self.carried

    def has(self, kind: str) -> bool:
        return any(o.kind == kind for o in self.all())

    def union(self, other: "_Value") -> "_Value":
        return _Value(self.inline | other.inline, self.carried | other.carried)


@dataclass
class _Sink:
    """One store into a local-tensor attribute and the origins reaching it."""

    node: ast.AST
    attr: str
    inline: set
    carried: set
    receiver: ast.AST | None = None


class LocalTensorViewNotDetached(LocalTensorViewNotDetachedDeclaration):
    """E9501: an autograd view stored into ``_local_tensor`` without ``.detach()``.

    ``check(ctx)`` yields one :class:`Finding` per store reached by at least one view, with the
    ``.detach()`` fix. The invariant comes from hyper-parallel issue 230: a DTensor parameter's
    local tensor must be an autograd leaf, or ``param.is_leaf`` raises once the view's base is
    written in place in grad mode.
    """


    def check(self, ctx) -> Iterator[Finding]:
        """Yield the findings of ``ctx``'s file (see the module docstring for the shapes)."""
        attrs = frozenset(ctx.option(self, "local-tensor-attrs"))
        nograd_names = frozenset(ctx.option(self, "no-grad-contexts"))
        stores = _scopes_with_stores(ctx, attrs)
        if not stores:
            return
        torch_aliases, imported, modules = _torch_imports(ctx.tree, ctx.nodes_of(ast.Import, ast.ImportFrom))
        config = (attrs, nograd_names, torch_aliases, imported, modules)
        scopes: list[tuple[list[ast.stmt], bool, str | None]] = []
        for scope in stores:
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                decorated = any(_is_nograd_ctx(d, nograd_names) is True for d in scope.decorator_list)
                owner = ctx.parent(scope)
                scopes.append((scope, decorated, owner.name if isinstance(owner, ast.ClassDef) else None))
            else:
                scopes.append((scope, False, None))
        # first pass: a helper imported from another module of the project is an opaque value; only
        # when one reaches a store is the pass run again with the project facts (which follow it)
        helpers = _Helpers(ctx.semantic, *config, path=ctx.path, options=ctx.options)
        sinks = self._sinks(scopes, config, helpers)
        if helpers.asked and any(_has_ext(sink.inline | sink.carried) for sink in sinks):
            project = (lambda: ctx.project_data(self)) if ctx.project is not None else (lambda: None)
            helpers = _Helpers(ctx.semantic, *config, path=ctx.path, options=ctx.options, resolve=project)
            sinks = self._sinks(scopes, config, helpers)
        for sink in sinks:
            finding = self._finding(ctx, sink)
            if finding is not None:
                yield finding

    @staticmethod
    def _sinks(scopes, config, helpers: "_Helpers") -> list[_Sink]:
        """The stores of every scope with the origins reaching them, in source order."""
        out: list[_Sink] = []
        for scope, nograd, owner in scopes:
            walker = _Walker(*config, helpers, owner,
                             _local_names(scope) if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else _EMPTY,
                             scope=scope)
            walker.block(scope.body, {}, nograd)
            out.extend(sorted(walker.sinks.values(), key=lambda s: (s.node.lineno, s.node.col_offset)))
        return out

    # ------------------------------------------------------------------ findings and fixes
    def _finding(self, ctx, sink: _Sink) -> Finding | None:
        origins = [o for o in sink.inline | sink.carried if o.kind in ("view", "unpack", "store")]
        if not origins:
            return None
        # every field that can tell two origins apart: a helper call exports one origin per view op
        # of its body on the same anchor, and a tie left to set order named a different op each run
        origins.sort(key=lambda o: (o.anchor.lineno, o.anchor.col_offset, o.kind, o.var, o.op, o.nograd, o.fresh, o.via))
        if all(o.kind == "view" and o.fresh for o in origins) and _proven_torch_dtensor(ctx, sink):
            return None  # the wrapper holds the leaf state and the base never required grad
        if all(o.kind == "view" and o.temp and not o.via and o in sink.inline for o in origins) \
                and not sink.carried and _sole_holder(sink):
            return None  # a view of a temporary only the store holds: nothing can write its base in place
        inline = [o for o in origins if o in sink.inline]
        location = inline[0].anchor if inline and len(inline) == len(origins) and inline[0].kind == "view" else sink.node
        nograd = [o.nograd for o in origins]
        outside = any(o.via and not o.via.endswith("of this file)") for o in origins)
        confidence = Confidence.HIGH if any(nograd) and not outside else Confidence.INFERENCE
        edits: list[Edit] = []
        complete = True
        for origin in origins:
            edit = _edit_for(ctx, origin)
            if edit is None:
                complete = False
            elif edit not in edits:
                edits.append(edit)
        fix = None
        if complete and edits:
            applicability = Applicability.SAFE if all(nograd) and not outside else Applicability.UNSAFE
            title = "Append .detach() where the view is created"
            if applicability is Applicability.UNSAFE:  # in grad mode the view may require grad; .detach() never does
                title += " (the detached tensor does not require grad: restore requires_grad on the parameter if it trains)"
            fix = ctx.make_fix(edits, title, applicability)
        first = origins[0]
        made = f"returned by {first.via}" if first.via else f"made at line {first.anchor.lineno}"
        evidence = f"'{first.op}' view {made}" + (", under no_grad" if first.nograd else ", grad mode not known off")
        if len(origins) > 1:
            evidence += f", and {len(origins) - 1} more"
        return ctx.finding(self, location, args=(first.op, sink.attr, evidence), confidence=confidence, fix=fix)


    # ------------------------------------------------------------------ history hooks
    def pin_repair(self, finding, before, after):
        """The ``.detach()`` a change added to the view that ``finding`` reported (see the end of this module)."""
        return _pin_repair(finding, before, after)

    def repair_state(self, scope, detail):
        """Reverted when ``scope`` holds more un-detached calls of the view method than at the repair."""
        return _repair_state(scope, detail)


def _proven_torch_dtensor(ctx, sink: _Sink) -> bool:
    """True when the object whose local tensor ``sink`` stores is certainly PyTorch's ``DTensor`` (a
    wrapper subclass: the wrapper, not its local tensor, holds the autograd leaf state that
    ``param.is_leaf`` and the optimizer read): an ``isinstance(obj, DTensor)`` with ``DTensor`` imported
    from ``torch.distributed`` that must hold at the store (an enclosing ``if`` test, an ``assert``
    or an early-exit guard before it in the same function)."""
    receiver = sink.receiver
    if receiver is None:
        return False
    text = ctx.text_of(receiver)
    scope = next((a for a in ctx.ancestors(sink.node) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)

    implies = _DTensorTest(ctx, scope, text).implied

    child: ast.AST = sink.node
    for anc in ctx.ancestors(sink.node):
        if isinstance(anc, ast.If) and child is not anc.test and implies(anc.test, child in anc.body):
            return True
        for name in ("body", "orelse", "finalbody"):
            block = getattr(anc, name, None)
            if isinstance(block, list) and child in block:
                for prev in block[: block.index(child)]:
                    if isinstance(prev, ast.Assert) and implies(prev.test, True):
                        return True
                    if isinstance(prev, ast.If) and always_exits(prev.body) and not prev.orelse \
                            and implies(prev.test, False):
                        return True
        if anc is scope:
            break
        child = anc
    return False


class _DTensorTest:
    """``implied(test, truth)``: ``test`` being ``truth`` implies ``isinstance(<text>, DTensor)`` with
    PyTorch's ``DTensor`` (an import from ``torch.distributed``). A class, not nested functions: a
    closure that calls itself is a reference cycle per call."""

    def __init__(self, ctx, scope: ast.AST | None, text: str):
        self.ctx, self.scope, self.text = ctx, scope, text

    def torch_dtensor(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Tuple):
            return bool(node.elts) and all(self.torch_dtensor(e) for e in node.elts)
        ref = self.ctx.semantic.external(node, self.scope)
        if ref is None or not ref.attrs or ref.level:
            return False
        return ".".join((ref.module, *ref.attrs)).startswith("torch.distributed.") and ref.attrs[-1] == "DTensor"

    def implied(self, test: ast.AST, truth: bool) -> bool:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.implied(test.operand, not truth)
        if isinstance(test, ast.BoolOp):
            if isinstance(test.op, ast.And) == truth:
                return any(self.implied(v, truth) for v in test.values)
            return all(self.implied(v, truth) for v in test.values)
        return (truth and isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                and test.func.id == "isinstance" and len(test.args) == 2 and not test.keywords
                and self.ctx.text_of(test.args[0]) == self.text and self.torch_dtensor(test.args[1]))


def _changes_class_or_grad(anchor: ast.AST) -> bool:
    """True when ``.detach()`` appended to the view expression ``anchor`` would change more than the
    view link: the outermost view op is an ``as_subclass`` call (``.detach()`` returns a plain Tensor:
    an ``nn.Parameter`` alias would lose its class; detached before it, a named alias stays a view), or
    an in-place ``requires_grad_`` follows it (detached after it, the stored tensor no longer requires
    grad). Such a finding is reported without a fix. What lies below the outermost view op is
    detached with it."""
    node = anchor
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        op = node.func.attr
        if op in ("as_subclass", "requires_grad_"):
            return True
        if op in VIEW_METHODS:
            return False
        node = node.func.value
    return False


def _edit_for(ctx, origin: _Origin) -> Edit | None:
    """Return the edit that detaches ``origin`` where it is created, or ``None`` (report only)."""
    if origin.kind == "view":
        if _changes_class_or_grad(origin.anchor):
            return None
        _, end = ctx.node_range(origin.anchor)
        return Edit(end, end, ".detach()")
    if origin.kind != "unpack":
        return None
    src = ctx.source
    stmt = origin.anchor
    text = f"{origin.var} = {origin.var}.detach()"
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        first = stmt.body[0]
        line = src.line_text(first.lineno)
        col = src.char_col(first.lineno, first.col_offset)
        if first.lineno == stmt.lineno or line[:col].strip():
            return None
        return Edit((first.lineno, 0), (first.lineno, 0), line[:col] + text + src.newline())
    (line_no, col), (end_line, end_col) = ctx.node_range(stmt)
    first_line = src.line_text(line_no)
    rest = src.line_text(end_line)[end_col:].strip()
    if first_line[:col].strip() or (rest and not rest.startswith("#")):
        return None
    indent = first_line[:col]
    if end_line >= len(src.line_starts) and not src.text.endswith(("\n", "\r")):
        end = (end_line, len(src.line_text(end_line)))
        return Edit(end, end, src.newline() + indent + text)
    return Edit((end_line + 1, 0), (end_line + 1, 0), indent + text + src.newline())


# ---------------------------------------------------------------------- helpers
def _torch_imports(tree: ast.Module, nodes: Iterable[ast.AST] | None = None) -> tuple[frozenset, dict, frozenset]:
    """Return the names bound to torch, the view functions imported from torch, and all imported names.

    ``nodes``: the nodes of ``tree`` to look at, in :func:`ast.walk` order (default: all of them;
    the rule passes ``ctx.nodes_of(ast.Import, ast.ImportFrom)``).

    Imported names are modules or functions, never tensors: ``F.unfold(x)`` or ``np.split(a)`` are
    not method calls on a tensor.
    """
    aliases = {"torch"}
    imported: dict[str, str] = {}
    bound: set[str] = set()
    for node in ast.walk(tree) if nodes is None else nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound.add(alias.asname or alias.name.split(".")[0])
                if alias.name == "torch" and alias.asname:
                    aliases.add(alias.asname)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound.add(alias.asname or alias.name)
            if node.module == "torch" and not node.level:
                for alias in node.names:
                    if alias.name in VIEW_FUNCS or alias.name in SEQ_FUNCS:
                        imported[alias.asname or alias.name] = alias.name
    return frozenset(aliases), imported, frozenset(bound - set(imported))


def _const_bool(node: ast.AST | None) -> bool | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    return None


def _is_nograd_ctx(expr: ast.AST, names: frozenset) -> bool | None:
    """True if ``expr`` (a with item or decorator) disables grad, False if it enables it, else None."""
    call = expr if isinstance(expr, ast.Call) else None
    func = call.func if call else expr
    name = last_name(func)
    if name is None:
        return None
    if name == "enable_grad":
        return False
    if name not in names:
        return None
    first = None
    if call is not None:
        if call.args:
            first = call.args[0]
        else:
            first = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if name == "set_grad_enabled":
        value = _const_bool(first)
        # a mode known only at run time may enable grad: not a no-grad region
        return False if value is None else not value
    if name == "inference_mode" and _const_bool(first) is not True and first is not None:
        return None  # inference_mode(False) keeps the current mode; a run-time mode may do either
    return True


def _may_enable_grad(stmts: Iterable[ast.stmt], names: frozenset) -> bool:
    """True when ``stmts`` call ``set_grad_enabled(...)`` (or ``torch._C._set_grad_enabled``) in a
    way that may enable grad mode for what runs after it (also in the next iteration of a loop): as
    a statement, or anywhere in an expression (``prev = torch.set_grad_enabled(True)`` switches the
    mode when called; its value is only the guard object). Statements inside a ``with`` of a
    grad-mode context manager do not count (its exit restores the mode), nor nested functions."""
    stack = list(stmts)
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            continue
        if isinstance(node, (ast.With, ast.AsyncWith)) and all(
                _is_nograd_ctx(item.context_expr, names) is not None for item in node.items):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and last_name(node.value.func) == "set_grad_enabled" \
                and _is_nograd_ctx(node.value, names) is not True:
            return True
        if isinstance(node, ast.stmt):
            children = list(ast.iter_child_nodes(node))
            if _exprs_may_enable_grad(c for c in children if not isinstance(c, _BLOCK_PARTS)):
                return True
            stack.extend(c for c in children if isinstance(c, _BLOCK_PARTS))
        else:
            stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
    return False


_BLOCK_PARTS = (ast.stmt, ast.excepthandler, ast.match_case)
_GRAD_SETTERS = frozenset({"set_grad_enabled", "_set_grad_enabled"})


def _exprs_may_enable_grad(exprs: Iterable[ast.AST]) -> bool:
    """True when a call in ``exprs`` (lambdas left out) sets the grad mode to anything but a
    constant ``False``: ``torch.set_grad_enabled(True)``, ``set_grad_enabled(mode)``,
    ``torch._C._set_grad_enabled(True)``, whatever is done with its value."""
    stack = list(exprs)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Call) and last_name(node.func) in _GRAD_SETTERS:
            first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "mode"), None)
            if _const_bool(first) is not False:
                return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _index_kind(index: ast.AST) -> str | None:
    """Classify a subscript index: ``view`` (basic, always a view), ``int`` (a view on a tensor) or None."""
    if isinstance(index, ast.Slice):
        return "view"
    if isinstance(index, ast.Constant):
        if index.value is None or index.value is Ellipsis:
            return "view"
        if isinstance(index.value, int) and not isinstance(index.value, bool):
            return "int"
        return None
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        return "int" if _index_kind(index.operand) == "int" else None
    if isinstance(index, ast.Tuple) and index.elts:
        kinds = [_index_kind(e) for e in index.elts]
        if None in kinds:
            return None
        return "view" if "view" in kinds else "int"
    return None


class _Walker:
    """Follow one scope's statements in source order, tracking which locals hold views.

    ``state`` maps a local name to the frozenset of origins it may hold; ``None`` is an unreachable
    path (after ``return``/``raise``). Stores found on the way are collected in ``sinks``.
    """

    def __init__(self, attrs: frozenset, nograd_names: frozenset, torch_aliases: frozenset, imported: dict,
                 modules: frozenset = frozenset(), helpers: "_Helpers | None" = None, owner: str | None = None,
                 local_names: frozenset = frozenset(), scope: ast.AST | None = None):
        self.scope = scope  # the function (or module) walked: its bindings decide a base's freshness
        self._bindings: dict[str, list[ast.AST | None]] | None = None
        self.attrs = attrs
        self.modules = modules | torch_aliases
        self.nograd_names = nograd_names
        self.torch_aliases = torch_aliases
        self.imported = imported
        self.helpers = helpers
        self.owner = owner  # the class whose method is walked (resolves self.m(...) and properties)
        self.local_names = local_names  # parameters and assigned names: they shadow the file's functions
        self.sinks: dict[tuple[int, str], _Sink] = {}
        # set by _Helpers.summary: the origins of every returned / yielded value of a helper
        self.returns: list[frozenset] | None = None
        self.yields: list[frozenset] | None = None

    # ------------------------------------------------------------------ statements
    def block(self, stmts: Iterable[ast.stmt], state: dict | None, nograd: bool) -> dict | None:
        for stmt in stmts:
            if state is None:
                return None
            if nograd and not isinstance(stmt, (ast.With, ast.AsyncWith)) \
                    and _exprs_may_enable_grad(_header_exprs(stmt)):
                nograd = False  # `if torch.set_grad_enabled(True):`: grad is on before the body runs
            state = self.stmt(stmt, state, nograd)
            mode = None
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                    and last_name(stmt.value.func) == "set_grad_enabled":
                mode = _is_nograd_ctx(stmt.value, self.nograd_names)
            if mode is not None:
                nograd = mode
            elif nograd and _may_enable_grad([stmt], self.nograd_names):
                nograd = False  # e.g. `if c: torch.set_grad_enabled(True)`: grad may be on from here
        return state

    def stmt(self, stmt: ast.stmt, state: dict, nograd: bool) -> dict | None:
        for expr in _header_exprs(stmt):
            self.scan_setattr(expr, state, nograd)
        if isinstance(stmt, ast.Assign):
            value = self.ev(stmt.value, state, nograd)
            new = dict(state)
            for target in stmt.targets:
                self.bind(target, stmt.value, value, stmt, state, new, nograd)
            return new
        if isinstance(stmt, ast.AnnAssign):
            new = dict(state)
            if stmt.value is not None:
                self.bind(stmt.target, stmt.value, self.ev(stmt.value, state, nograd), stmt, state, new, nograd)
            return new
        if isinstance(stmt, ast.Return):
            if self.returns is not None and stmt.value is not None:
                self.returns.append(_kept(self.ev(stmt.value, state, nograd).all()))
            return None
        if isinstance(stmt, ast.Raise):
            return None
        if isinstance(stmt, ast.If):
            return _join(self.block(stmt.body, dict(state), nograd), self.block(stmt.orelse, dict(state), nograd))
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)) and nograd \
                and _may_enable_grad(stmt.body, self.nograd_names):
            nograd = False  # a later iteration may start with grad enabled
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            shape = self.iter_items(stmt.iter, state, nograd)

            def enter(entry: dict) -> dict:
                new = dict(entry)
                for name in names_in_target(stmt.target):
                    new.pop(name, None)
                self.bind_items(stmt.target, shape, stmt, new, nograd)
                return new

            first = self.block(stmt.body, enter(state), nograd)
            looped = _join(state, first)
            if looped != state:  # a view carried into the next iteration: one more pass
                looped = _join(looped, self.block(stmt.body, enter(looped), nograd))
            return self.block(stmt.orelse, looped, nograd)
        if isinstance(stmt, ast.While):
            first = self.block(stmt.body, dict(state), nograd)
            looped = _join(state, first)
            if looped != state:
                looped = _join(looped, self.block(stmt.body, dict(looped), nograd))
            return self.block(stmt.orelse, looped, nograd)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            inner = nograd
            new = dict(state)
            for item in stmt.items:
                mode = _is_nograd_ctx(item.context_expr, self.nograd_names)
                if mode is not None:
                    inner = mode
                if item.optional_vars is not None:
                    for name in names_in_target(item.optional_vars):
                        new.pop(name, None)
            return self.block(stmt.body, new, inner)
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            body = self.block(stmt.body, dict(state), nograd)
            if nograd and _may_enable_grad(stmt.body, self.nograd_names):
                nograd = False  # handlers, else and finally may run after grad was enabled
            entry = _join(state, body)
            outs = [self.block(stmt.orelse, body, nograd) if body is not None else None]
            for handler in stmt.handlers:
                start = dict(entry) if entry is not None else None
                if start is not None and handler.name:
                    start.pop(handler.name, None)
                outs.append(self.block(handler.body, start, nograd))
            merged = None
            for out in outs:
                merged = _join(merged, out)
            if stmt.finalbody:
                final = self.block(stmt.finalbody, dict(_join(entry, merged) or {}), nograd)
                return final if merged is not None else None
            return merged
        if isinstance(stmt, _MATCH):
            merged = dict(state)
            for case in stmt.cases:
                merged = _join(merged, self.block(case.body, dict(state), nograd))
            return merged
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            new = dict(state)
            new.pop(stmt.name, None)
            if not isinstance(stmt, ast.ClassDef) and self.helpers is not None:
                new[stmt.name] = frozenset({_Origin("func", stmt.name, stmt, False)})  # a nested helper
            return new
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            new = dict(state)
            for alias in stmt.names:
                new.pop((alias.asname or alias.name).split(".")[0], None)
            return new
        if isinstance(stmt, ast.Delete):
            new = dict(state)
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    new.pop(target.id, None)
            return new
        if isinstance(stmt, ast.Expr):
            if isinstance(stmt.value, (ast.Yield, ast.YieldFrom)):
                if self.yields is not None and stmt.value.value is not None:
                    value = self.ev(stmt.value.value, state, nograd).all()
                    if isinstance(stmt.value, ast.YieldFrom):
                        value = _items(value, None)
                    self.yields.append(_kept(value))
            else:
                self.ev(stmt.value, state, nograd)  # walrus bindings are not tracked further
        return state

    def bind(self, target, value_node, value: _Value, stmt, state: dict, new: dict, nograd: bool) -> None:
        """Assign ``value`` (of ``value_node``) to ``target``: update locals in ``new``, record stores."""
        if isinstance(target, ast.Name):
            kept = _kept(value.all())
            if value_node is not None and self.nonparam(value_node, state):
                kept |= _NONPARAM
            if isinstance(value_node, ast.Lambda) and self.helpers is not None:
                kept |= {_Origin("func", target.id, value_node, False)}  # shard = lambda t: t[:n]
            if kept:
                new[target.id] = kept
            else:
                new.pop(target.id, None)
        elif isinstance(target, ast.Attribute):
            if target.attr in self.attrs and not self.nonparam(target.value, state):
                self.record(stmt, target.attr, value, target.value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            if (isinstance(value_node, (ast.Tuple, ast.List)) and not starred
                    and len(value_node.elts) == len(target.elts)
                    and not any(isinstance(e, ast.Starred) for e in value_node.elts)):
                for sub_target, sub_value in zip(target.elts, value_node.elts):
                    self.bind(sub_target, sub_value, self.ev(sub_value, state, nograd), stmt, state, new, nograd)
                return
            origins = value.all()
            for index, element in enumerate(target.elts):
                items = _items(origins, None if starred else index)
                if isinstance(element, ast.Name):
                    kept = _bound(items, stmt, element.id, nograd)
                    if kept:
                        new[element.id] = kept
                    else:
                        new.pop(element.id, None)
                elif (isinstance(element, ast.Attribute) and element.attr in self.attrs
                      and not self.nonparam(element.value, state)):
                    elems = [o for o in items if o.kind == "elem"]
                    stored = frozenset(o for o in items if o.kind in ("view", "unpack"))
                    if elems:
                        stored |= {_Origin("store", elems[0].op, stmt, elems[0].nograd or nograd)}
                    if stored:
                        self.record(stmt, element.attr, _Value(carried=stored))
                elif isinstance(element, (ast.Tuple, ast.List)):
                    self.bind(element, None, _Value(carried=items), stmt, state, new, nograd)
                else:
                    for name in names_in_target(element):
                        new.pop(name, None)

    def bind_items(self, target, shape, stmt, new: dict, nograd: bool, comprehension: bool = False) -> None:
        """Bind a loop (or comprehension) ``target`` to the items of an iterable.

        ``shape`` comes from :meth:`iter_items`: a frozenset of the origins of one item, or a tuple of
        shapes for ``zip(...)``/``enumerate(...)`` items. A name bound to an element of a seq becomes an
        ``unpack`` origin of ``stmt`` (fix: ``name = name.detach()`` first in the loop body); inside a
        comprehension there is no statement, so the ``elem`` marker is kept for the consumer.
        """
        if isinstance(target, ast.Name):
            origins = _flatten(shape, stmt, nograd)
            kept = origins if comprehension else _bound(origins, stmt, target.id, nograd)
            kept = _kept(kept) | frozenset(o for o in kept if o.kind == "elem")
            if kept:
                new[target.id] = kept
            else:
                new.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in target.elts):
            for index, element in enumerate(target.elts):
                if isinstance(shape, tuple):
                    sub = shape[index] if len(shape) == len(target.elts) else _EMPTY
                else:
                    sub = _items(shape, index)
                self.bind_items(element, sub, stmt, new, nograd, comprehension)
        else:
            for name in names_in_target(target):
                new.pop(name, None)

    def iter_items(self, expr: ast.AST, state: dict, nograd: bool):
        """The shape of one item of iterating ``expr`` (see :meth:`bind_items`)."""
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.args \
                and not any(isinstance(a, ast.Starred) for a in expr.args) and expr.func.id not in state:
            name = expr.func.id
            if name == "zip":
                return tuple(self.iter_items(a, state, nograd) for a in expr.args)
            if name == "enumerate":
                return (_EMPTY, self.iter_items(expr.args[0], state, nograd))
            if name in ITER_PASS and len(expr.args) == 1:
                return self.iter_items(expr.args[0], state, nograd)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            if expr.func.attr == "buffers":
                return _NONPARAM
            if expr.func.attr == "named_buffers":
                return (_EMPTY, _NONPARAM)
        items = _items(self.ev(expr, state, nograd).all(), None)
        if self.nonparam(expr, state):
            items |= _NONPARAM
        return items

    def nonparam(self, expr: ast.AST, state: dict) -> bool:
        """Evidence that ``expr`` is a gradient or a buffer, not a parameter (see the module docstring)."""
        while isinstance(expr, ast.Subscript):
            expr = expr.value
        if isinstance(expr, ast.Name):
            return any(o.kind == "nonparam" for o in state.get(expr.id, _EMPTY)) or _grad_or_buffer_name(expr.id)
        if isinstance(expr, ast.Attribute):
            return _grad_or_buffer_name(expr.attr)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            return expr.func.attr == "get_buffer"
        return False

    def record(self, node: ast.AST, attr: str, value: _Value, receiver: ast.AST | None = None) -> None:
        key = (id(node), attr)
        sink = self.sinks.setdefault(key, _Sink(node, attr, set(), set(), receiver))
        sink.inline.update(value.inline)
        sink.carried.update(value.carried)

    def scan_setattr(self, expr: ast.AST, state: dict, nograd: bool) -> None:
        """Record ``setattr(x, "<attr>", v)`` / ``object.__setattr__(x, "<attr>", v)`` stores in ``expr``."""
        for node in ast.walk(expr):
            if not (isinstance(node, ast.Call) and len(node.args) == 3 and not node.keywords):
                continue
            name = dotted_name(node.func)
            if name not in ("setattr", "object.__setattr__"):
                continue
            attr = node.args[1]
            if isinstance(attr, ast.Constant) and attr.value in self.attrs and not self.nonparam(node.args[0], state):
                self.record(node, attr.value, self.ev(node.args[2], state, nograd), node.args[0])

    # ------------------------------------------------------------------ expressions
    def ev(self, expr: ast.AST, state: dict, nograd: bool) -> _Value:
        """Return the view origins of ``expr`` given the locals in ``state``."""
        if isinstance(expr, ast.Name):
            return _Value(carried=state.get(expr.id, _EMPTY))
        if isinstance(expr, ast.IfExp):
            return self.ev(expr.body, state, nograd).union(self.ev(expr.orelse, state, nograd))
        if isinstance(expr, ast.BoolOp):
            result = _Value()
            for operand in expr.values:
                result = result.union(self.ev(operand, state, nograd))
            return result
        if isinstance(expr, ast.NamedExpr):
            return self.ev(expr.value, state, nograd)
        if isinstance(expr, ast.Attribute):
            if expr.attr in CLEAN_ATTRS:
                return _Value()
            if expr.attr in VIEW_ATTRS:
                return self.view(expr, expr.attr, self.ev(expr.value, state, nograd), nograd, expr.value)
            if self.helpers is not None and isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls") \
                    and self.owner is not None:
                members = self.helpers.member(self.owner, expr.attr, prop=True, dispatch=True)
                found = self.helpers.summaries(members)
                if found is not None:
                    return _Value(inline=_export(found, expr, nograd, self.helpers.where(members[0][0])))
            if _grad_or_buffer_name(expr.attr):
                return _Value(carried=_NONPARAM)  # p.grad, self.flat_buffer: not a parameter
            return _Value()
        if isinstance(expr, (ast.Tuple, ast.List)):
            items = tuple(_kept(self.ev(e.value if isinstance(e, ast.Starred) else e, state, nograd).all())
                          for e in expr.elts)
            if not any(items):
                return _Value()
            if any(isinstance(e, ast.Starred) for e in expr.elts):
                items = (frozenset().union(*items),)
                return _Value(inline=frozenset({_Origin("coll", "", expr, nograd, items=items, fixed=False)}))
            return _Value(inline=frozenset({_Origin("coll", "", expr, nograd, items=items)}))
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self.ev_comprehension(expr, state, nograd)
        if isinstance(expr, ast.Call):
            return self.ev_call(expr, state, nograd)
        if isinstance(expr, ast.Subscript):
            return self.ev_subscript(expr, state, nograd)
        return _Value()

    def ev_call(self, call: ast.Call, state: dict, nograd: bool) -> _Value:
        func = call.func
        name = dotted_name(func)
        function_op = None
        if name is not None:
            parts = name.split(".")
            if parts[0] in self.torch_aliases and len(parts) in (2, 3) and (len(parts) == 2 or parts[1] == "Tensor"):
                function_op = parts[-1]
            elif len(parts) == 1 and name in self.imported:
                function_op = self.imported[name]
        if isinstance(func, ast.Name) and function_op is None:
            local = [o for o in state.get(func.id, _EMPTY) if o.kind == "func"]
            if local and self.helpers is not None:
                return _Value(inline=_export(self.helpers.summary(local[0].anchor, self.owner), call, nograd,
                                             self.helpers.where(local[0].anchor)))
            if func.id in ITER_PASS and len(call.args) == 1 and func.id not in state:
                value = self.ev(call.args[0], state, nograd)
                if func.id in ("list", "tuple"):
                    return value
                items = _items(value.all(), None)
                return _Value(inline=frozenset({_Origin("coll", "", call, nograd, items=(items,), fixed=False)})
                              if items else _EMPTY)
            if self.helpers is not None and func.id not in state and func.id not in self.local_names:
                targets = self.helpers.function(func.id)
                found = self.helpers.summaries([(target, None) for target in targets])
                if found is not None:
                    return _Value(inline=_export(found, call, nograd, self.helpers.where(targets[0])))
                found = self.helpers.external(call, self.scope, nograd)
                if found is not None:
                    return _Value(inline=found)
        if (self.helpers is not None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id not in state):
            receiver_is_self = func.value.id in ("self", "cls")
            owner = self.owner if receiver_is_self else func.value.id
            if owner is not None:
                members = self.helpers.member(owner, func.attr, prop=False, dispatch=receiver_is_self)
                found = self.helpers.summaries(members)
                if found is not None:
                    return _Value(inline=_export(found, call, nograd, self.helpers.where(members[0][0])))
        if function_op is not None:
            if not call.args or isinstance(call.args[0], ast.Starred):
                return _Value()
            receiver = self.ev(call.args[0], state, nograd)
            if function_op in VIEW_FUNCS or (len(name.split(".")) == 3 and function_op in VIEW_METHODS):
                return self.view(call, function_op, receiver, nograd, call.args[0])
            if function_op in SEQ_FUNCS:
                return _Value(inline=frozenset({_Origin("seq", function_op, call, nograd)}))
            if function_op in PASS_METHODS:
                return self.passthrough(call, receiver)
            return _Value()
        if not isinstance(func, ast.Attribute):
            return _Value()
        receiver_name = dotted_name(func.value)
        if receiver_name is not None and receiver_name.split(".")[0] in self.modules:
            found = self.helpers.external(call, self.scope, nograd) if self.helpers is not None else None
            return _Value(inline=found) if found is not None else _Value()  # a module function (F.unfold, np.split)
        method = func.attr
        if method in CLEAN_METHODS:
            return _Value()
        if method in VIEW_METHODS:
            return self.view(call, method, self.ev(func.value, state, nograd), nograd, func.value)
        if method in SEQ_METHODS:
            return _Value(inline=frozenset({_Origin("seq", method, call, nograd)}))
        if method in PASS_METHODS or (method.endswith("_") and not method.startswith("_") and method != "detach_"):
            return self.passthrough(call, self.ev(func.value, state, nograd))
        return _Value()

    def ev_comprehension(self, expr: ast.AST, state: dict, nograd: bool) -> _Value:
        """A list/set/generator comprehension: a ``coll`` of unknown length whose item is ``expr.elt``."""
        inner = dict(state)
        for generator in expr.generators:
            shape = self.iter_items(generator.iter, inner, nograd)
            for name in names_in_target(generator.target):
                inner.pop(name, None)
            self.bind_items(generator.target, shape, expr, inner, nograd, comprehension=True)
        item = self.ev(expr.elt, inner, nograd).all()
        item = _kept(item) | frozenset(o for o in item if o.kind == "elem")
        if not item:
            return _Value()
        return _Value(inline=frozenset({_Origin("coll", "", expr, nograd, items=(item,), fixed=False)}))

    def ev_subscript(self, expr: ast.Subscript, state: dict, nograd: bool) -> _Value:
        receiver = self.ev(expr.value, state, nograd)
        colls = [o for o in receiver.all() if o.kind in ("coll", "seq")]
        if any(o.kind == "coll" for o in colls):
            index = _const_index(expr.slice)
            items = _items(colls, index)
            if isinstance(expr.slice, ast.Slice):
                return _Value(inline=frozenset({_Origin("coll", "", expr, nograd, items=(items,), fixed=False)}))
            inline = frozenset(_Origin("view", o.op, expr, o.nograd or nograd, via=o.via) for o in items if o.kind == "elem")
            return _Value(inline=inline, carried=frozenset(o for o in items if o.kind != "elem"))
        seqs = [o for o in receiver.all() if o.kind == "seq"]
        if seqs:
            if isinstance(expr.slice, ast.Slice):
                return _Value(inline=frozenset({_Origin("seq", seqs[0].op, expr, nograd)}))
            return _Value(inline=frozenset({_Origin("view", seqs[0].op, expr, nograd)}))
        kind = _index_kind(expr.slice)
        if kind == "view" or (kind == "int" and self.is_tensor(expr.value, receiver)):
            return self.view(expr, SUBSCRIPT_OP, receiver, nograd, expr.value)
        return _Value()

    def is_tensor(self, node: ast.AST, value: _Value) -> bool:
        """Evidence that ``node`` is a tensor (so an integer index is a view, not a list item)."""
        if value.has("view") or value.has("unpack"):
            return True
        if isinstance(node, ast.Attribute) and (node.attr in self.attrs or node.attr in CLEAN_ATTRS):
            return True
        if isinstance(node, ast.Call):
            name = dotted_name(node.func)
            if name and name.split(".")[0] in self.torch_aliases:
                return True
            if isinstance(node.func, ast.Attribute) and node.func.attr in CLEAN_METHODS | PASS_METHODS:
                return True
        return False

    def view(self, node: ast.AST, op: str, receiver: _Value, nograd: bool, base: ast.AST | None = None) -> _Value:
        """A new view made at ``node`` of the expression ``base``; a chain keeps the innermost view
        op's name, anchored outermost (and the innermost base's freshness)."""
        inner = sorted((o for o in receiver.inline if o.kind == "view"),
                       key=lambda o: (o.anchor.lineno, o.anchor.col_offset))
        if inner:
            return _Value(inline=frozenset({_Origin("view", inner[0].op, node, inner[0].nograd, fresh=inner[0].fresh,
                                                    temp=inner[0].temp)}))
        fresh = base is not None and self.fresh(base, nograd)
        temp = base is not None and self.temporary(base, nograd)
        return _Value(inline=frozenset({_Origin("view", op, node, nograd, fresh=fresh, temp=temp)}))

    @staticmethod
    def passthrough(node: ast.AST, receiver: _Value) -> _Value:
        """``node`` may return its receiver: views made in this expression are re-anchored at it."""
        inline = frozenset(
            dataclasses.replace(o, anchor=node) if o.kind == "view" else o for o in receiver.inline
        )
        return _Value(inline=inline, carried=receiver.carried)

    # ------------------------------------------------------------------ fresh bases
    def temporary(self, expr: ast.AST, nograd: bool, depth: int = 0) -> bool:
        """True when ``expr``, the base of a view made of it, is a new tensor object that no name holds
        and that does not require grad: ``x.detach()`` and ``x.data`` (aliases of ``x``'s storage with
        autograd state of their own), a torch factory or ``x.new_*`` call without ``requires_grad=``, a
        ``clone()`` in no-grad mode, and pass-through calls of one. Writes to ``x`` in place go through
        ``x``'s autograd state, not the alias's, so they never reach the view (checked at run time in
        ``tests/smoke/test_e9501_local_tensor_view.py``). A name is never one (the code may write it)."""
        if depth > 6:
            return False
        if isinstance(expr, ast.Attribute):
            return expr.attr in CLEAN_ATTRS  # x.data
        if not isinstance(expr, ast.Call) or isinstance(expr.func, ast.Name):
            return False
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr == "detach" and not expr.args and not expr.keywords:
            return True
        if isinstance(func, ast.Attribute) and func.attr in PASS_METHODS:
            return self.temporary(func.value, nograd, depth + 1)  # may return its receiver
        return self.fresh(expr, nograd)  # a factory call or a no-grad clone (not through a name: a call)

    def fresh(self, expr: ast.AST, nograd: bool, depth: int = 0) -> bool:
        """True when ``expr`` is certainly a fresh allocation that does not require grad: a torch
        factory (``torch.empty/zeros/ones/full/...``, ``*_like``), ``x.new_empty/new_zeros/...``
        without ``requires_grad=``, a ``clone()`` in no-grad mode, views and pass-through calls of
        one, or a local of the walked function every binding of which is one (not a parameter)."""
        if depth > 6:
            return False
        if isinstance(expr, ast.Call):
            func = expr.func
            if any(k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                   for k in expr.keywords) or any(k.arg is None for k in expr.keywords):
                return False
            name = dotted_name(func)
            if name is not None:
                parts = name.split(".")
                if parts[0] in self.torch_aliases and len(parts) == 2 and parts[1] in FACTORY_FUNCS:
                    return True
            if isinstance(func, ast.Attribute):
                if func.attr in FACTORY_METHODS:
                    return True
                if func.attr == "clone":
                    return nograd
                if func.attr in PASS_METHODS or func.attr in VIEW_METHODS or func.attr == "detach":
                    return self.fresh(func.value, nograd, depth + 1)
            return False
        if isinstance(expr, ast.Subscript):
            return self.fresh(expr.value, nograd, depth + 1)
        if isinstance(expr, ast.Attribute) and expr.attr in VIEW_ATTRS:
            return self.fresh(expr.value, nograd, depth + 1)
        if isinstance(expr, ast.Name):
            values = self.bindings().get(expr.id)
            return bool(values) and all(v is not None and self.fresh(v, nograd, depth + 1) for v in values)
        return False

    def bindings(self) -> dict[str, list[ast.AST | None]]:
        """``name -> values`` of the walked scope's bindings (``None``: a parameter, an unpacking, a
        loop target or any binding that is not a plain ``name = value``); nested scopes left out."""
        if self._bindings is None:
            table: dict[str, list[ast.AST | None]] = {}
            scope = self.scope
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = scope.args
                for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                    if arg is not None:
                        table.setdefault(arg.arg, []).append(None)
            stack = list(getattr(scope, "body", []) if not isinstance(scope, ast.Lambda) else [])
            while stack:
                node = stack.pop()
                if isinstance(node, SCOPES):
                    if not isinstance(node, ast.Lambda):
                        table.setdefault(node.name, []).append(None)
                    continue
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    table.setdefault(node.targets[0].id, []).append(node.value)
                    stack.append(node.value)
                    continue
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                    table.setdefault(node.target.id, []).append(node.value)
                    stack.append(node.value)
                    continue
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    table.setdefault(node.id, []).append(None)
                stack.extend(ast.iter_child_nodes(node))
            self._bindings = table
        return self._bindings


# ---------------------------------------------------------------------- values of collections and helpers
ITER_PASS = frozenset({"list", "tuple", "reversed", "sorted", "iter"})
_KEPT = frozenset({"view", "seq", "unpack", "coll", "nonparam", "ext"})
# Name tokens of a gradient or a buffer (``grad``, ``main_grad``, ``sharded_grad``, ``flat_buffer``).
_GRAD_OR_BUFFER = frozenset({"grad", "grads", "gradient", "gradients", "buf", "bufs", "buffer", "buffers"})
_PARAM_TOKENS = frozenset({"param", "params", "parameter", "parameters", "weight", "weights"})
_NONPARAM = frozenset({_Origin("nonparam", "", None, False)})


def _grad_or_buffer_name(name: str) -> bool:
    """True if ``name`` names a gradient or a buffer: a ``_``-separated token is one of
    ``grad(s)``, ``gradient(s)``, ``buf(s)``, ``buffer(s)`` and the last token is not a parameter's
    (``param_grad`` and ``grad`` are gradients; ``grad_param`` is a parameter)."""
    tokens = [t for t in name.lower().split("_") if t]
    return bool(tokens) and not _GRAD_OR_BUFFER.isdisjoint(tokens) and tokens[-1] not in _PARAM_TOKENS


def _kept(origins: Iterable[_Origin]) -> frozenset:
    """The origins a local variable keeps (views, tuples of views, collections, non-parameter marks)."""
    return frozenset(o for o in origins if o.kind in _KEPT)


def _items(origins: Iterable[_Origin], index: int | None) -> frozenset:
    """The origins of element ``index`` (``None``: any element) of a value with ``origins``."""
    out: set = set()
    for o in origins:
        if o.kind == "seq":
            out.add(_Origin("elem", o.op, o.anchor, o.nograd, via=o.via))
        elif o.kind == "ext":
            out.add(o)  # an element of an unknown value: unknown too
        elif o.kind == "coll":
            if o.fixed and index is not None and -len(o.items) <= index < len(o.items):
                out |= o.items[index]
            else:
                for item in o.items:
                    out |= item
        elif o.kind == "nonparam":
            out.add(o)
    return frozenset(out)


def _bound(origins: Iterable[_Origin], stmt: ast.AST, var: str, nograd: bool) -> frozenset:
    """Origins of ``var`` bound by unpacking or looping in ``stmt``: an ``elem`` becomes ``unpack``."""
    return frozenset(
        _Origin("unpack", o.op, stmt, o.nograd or nograd, var, via=o.via) if o.kind == "elem" else o
        for o in origins if o.kind == "elem" or o.kind in _KEPT
    )


def _flatten(shape, anchor: ast.AST, nograd: bool) -> frozenset:
    """A zip/enumerate item shape as origins: a tuple of shapes becomes a positional ``coll``."""
    if not isinstance(shape, tuple):
        return shape
    items = tuple(_flatten(s, anchor, nograd) for s in shape)
    if not any(items):
        return _EMPTY
    return frozenset({_Origin("coll", "", anchor, nograd, items=items)})


def _export_item(o: _Origin, anchor: ast.AST, nograd: bool, via: str = "") -> _Origin | None:
    if o.kind in ("view", "unpack", "elem"):
        return _Origin("elem", o.op, anchor, o.nograd or nograd, via=via or o.via)
    if o.kind == "seq":
        return _Origin("seq", o.op, anchor, o.nograd or nograd, via=via or o.via)
    if o.kind == "coll":
        items = tuple(frozenset(filter(None, (_export_item(x, anchor, nograd, via) for x in item))) for item in o.items)
        return _Origin("coll", "", anchor, o.nograd or nograd, items=items, fixed=o.fixed)
    if o.kind == "ext":
        return o
    return None


def _export(origins: Iterable[_Origin], anchor: ast.AST, nograd: bool, via: str = "") -> frozenset:
    """A helper's returned origins seen at its call ``anchor`` (run under the caller's ``nograd``;
    ``via``: the helper, as evidence).

    A returned view becomes a view made by the call (fix: ``helper(...).detach()``); a returned
    tuple keeps its positions, its views become ``elem`` markers (detached where they are unpacked).
    """
    out = set()
    for o in origins:
        if o.kind in ("view", "unpack", "elem"):
            out.add(_Origin("view", o.op, anchor, o.nograd or nograd, via=via or o.via))
        else:
            exported = _export_item(o, anchor, nograd, via)
            if exported is not None:
                out.add(exported)
    return frozenset(out)


def _sole_holder(sink: _Sink) -> bool:
    """True when the store ``sink`` is the only place its value goes: a single-target assignment of an
    attribute (``p._local_tensor = v``, annotated or not) or a ``setattr`` call, with no ``:=`` in the
    value (a name bound to the view could make another view of its base and write that in place)."""
    node = sink.node
    if isinstance(node, ast.Assign):
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Attribute):
            return False
        value = node.value
    elif isinstance(node, ast.AnnAssign):
        if not isinstance(node.target, ast.Attribute) or node.value is None:
            return False
        value = node.value
    elif isinstance(node, ast.Call):
        value = node.args[2] if len(node.args) == 3 else None
        if value is None:
            return False
    else:
        return False
    return not any(isinstance(n, ast.NamedExpr) for n in ast.walk(value))


def _has_ext(origins: Iterable[_Origin]) -> bool:
    """True when ``origins`` hold the value of an imported helper not looked into (``ext``)."""
    return any(o.kind == "ext" or (o.kind == "coll" and any(_has_ext(item) for item in o.items)) for o in origins)


def _const_index(index: ast.AST) -> int | None:
    if isinstance(index, ast.Constant) and isinstance(index.value, int) and not isinstance(index.value, bool):
        return index.value
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        inner = _const_index(index.operand)
        return None if inner is None else -inner
    return None




class _Helpers:
    """The helpers of one file that a store's value may come from, and what their calls return.

    Which ``def`` a call or a property read reaches is the semantic model's answer
    (:class:`~hp_invariants.semantic.SemanticModel`: module functions, ``self.m(...)``/``cls.m(...)``
    and ``self.<property>`` through the class's same-file MRO and the overrides of its same-file
    subclasses, ``Cls.m(...)``); a resolution that is not complete (a base outside the file comes
    first) gives nothing. Nested functions of the walked scope are the walker's own locals.
    ``summary(func, owner)`` walks a helper once (cached) and returns the origins of the values it
    returns or yields, in the helper's own terms; :func:`_export` turns them into origins at a call.
    Built lazily: a file whose stores call no helper pays nothing.
    """

    def __init__(self, model, *config, path: str = "", options: dict | None = None, resolve=None,
                 label: str | None = None):
        self.model = model
        self.config = config
        self._summaries: dict[int, frozenset] = {}
        self._depth = 0
        # helpers imported from other modules of the project: ``resolve`` is ``None`` in the first
        # pass (their values are ``ext`` origins, the project is not read), else a callable giving the
        # project facts (``ShardGateIndex`` or ``None``); ``label``: this file's path relative to the
        # project root when it is not the checked file
        self.path = path
        self.options = options if options is not None else {}
        self.resolve = resolve
        self.label = label
        self.asked = False
        self._others: dict[str, _Helpers] = {}
        self.chain = 0  # how many imports away from the checked file this file was reached

    def where(self, func: ast.AST) -> str:
        """How evidence names the helper ``func`` of this file."""
        name = getattr(func, "name", "<lambda>")
        if self.label is None:
            return f"'{name}()' (line {func.lineno} of this file)"
        return f"'{name}()' of {self.label}:{func.lineno}"

    def external(self, call: ast.Call, scope: ast.AST | None, nograd: bool) -> frozenset | None:
        """The origins the value of ``call`` has at the call when it runs a module-level function of
        another module of the project that an import binds (the project facts map the import to the
        file; that file is parsed once and its function summarized as a helper of its own file), else
        ``None``. In the first pass the value is an ``ext`` origin and nothing is read."""
        where = scope if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        ref = self.model.external(call.func, where)
        if ref is None or not ref.attrs or not may_name_project_module(ref, self.path) or self.chain >= 4:
            return None
        if self.resolve is None:
            self.asked = True
            return frozenset({_Origin("ext", ref.attrs[-1], call, False)})
        index = self.resolve()
        if index is None:
            return None
        found = index.external_definitions(ref, self.path, self.options)
        if found is None:
            return None
        octx, defs = found
        other = self._others.get(octx.path)
        if other is None:
            attrs, nograd_names = self.config[0], self.config[1]
            torch_aliases, imported, modules = _torch_imports(octx.tree, octx.nodes_of(ast.Import, ast.ImportFrom))
            other = self._others[octx.path] = _Helpers(octx.semantic, attrs, nograd_names, torch_aliases, imported,
                                                       modules, path=octx.path, options=self.options,
                                                       resolve=lambda: index, label=index.relative(octx.path))
            other._depth, other.chain = self._depth, self.chain + 1
        summary = other.summaries([(d, None) for d in defs])
        return _export(summary or _EMPTY, call, nograd, other.where(defs[0]))

    def function(self, name: str) -> list[ast.AST]:
        """The module-level ``def`` statements ``name`` denotes (``[]`` when it is bound otherwise)."""
        resolution = self.model.resolve_name(name, None)
        return list(resolution.candidates) if resolution.complete else []

    def member(self, owner: str, name: str, prop: bool, dispatch: bool) -> list[tuple[ast.AST, str]]:
        """``(definition, its class name)`` of each method (or ``prop``: property getter) ``name`` that
        a read on an instance of class ``owner`` of the file may run (``dispatch``: through ``self``,
        so also the overrides of subclasses)."""
        classes = self.model.classes(owner)
        if len(classes) != 1:
            return []
        resolution = self.model.lookup(classes[0], name, prop, dispatch)
        if not resolution.complete:
            return []
        return [(d, self.model.owner(d).name) for d in resolution.candidates if self.model.owner(d) is not None]

    def summaries(self, targets: list[tuple[ast.AST, str | None]]) -> frozenset | None:
        """The union of :meth:`summary` over ``targets`` (``None`` when there are none)."""
        if not targets:
            return None
        return frozenset().union(*(self.summary(func, owner) for func, owner in targets))

    def summary(self, func: ast.AST, owner: str | None) -> frozenset:
        """The origins of the values ``func`` returns (a ``coll`` of the yielded ones for a generator)."""
        key = id(func)
        if key in self._summaries:
            return self._summaries[key]
        self._summaries[key] = _EMPTY  # recursion guard
        if self._depth >= 8:
            return _EMPTY
        nograd_names = self.config[1]
        nograd = any(_is_nograd_ctx(d, nograd_names) is True for d in getattr(func, "decorator_list", ()))
        walker = _Walker(*self.config, helpers=self, owner=owner, local_names=_local_names(func), scope=func)
        walker.returns, walker.yields = [], []
        self._depth += 1
        try:
            if isinstance(func, ast.Lambda):
                walker.returns.append(_kept(walker.ev(func.body, {}, nograd).all()))
            else:
                walker.block(func.body, {}, nograd)
        finally:
            self._depth -= 1
        result = frozenset().union(*walker.returns) if walker.returns else _EMPTY
        if walker.yields:
            item = frozenset().union(*walker.yields)
            if item:
                result |= {_Origin("coll", "", func, nograd, items=(item,), fixed=False)}
        self._summaries[key] = result
        return result


def _local_names(func: ast.AST) -> frozenset:
    """The parameters of ``func`` and the names its body assigns (nested scopes excluded)."""
    args = func.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    stack = [func.body] if isinstance(func, ast.Lambda) else list(func.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        if not isinstance(node, SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return frozenset(names)


def _scopes_with_stores(ctx, attrs: frozenset) -> list[ast.AST]:
    """Return the scopes (module, functions, classes) whose own body stores into one of ``attrs``.

    Only these are analysed, which keeps the rule cheap on files that merely read ``_local_tensor``.
    A store is ``x.<attr> = ...`` (any store context) or a three-argument call whose second argument
    is the attribute name (``setattr(x, "<attr>", v)``); its scope is the innermost function or
    class around it (the module otherwise). Uses the file's shared node lists and parent links
    (``ctx.nodes_of``, ``ctx.parent``).
    """
    hits: list[ast.AST] = [n for n in ctx.nodes_of(ast.Attribute)
                           if n.ctx.__class__ is ast.Store and n.attr in attrs]
    hits.extend(n for n in ctx.nodes_of(ast.Call)
                if len(n.args) == 3 and isinstance(n.args[1], ast.Constant) and n.args[1].value in attrs)
    found: dict[int, ast.AST] = {}
    for node in hits:
        scope = ctx.parent(node)
        while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = ctx.parent(scope)
        if scope is None:
            scope = ctx.tree
        found.setdefault(id(scope), scope)
    return sorted(found.values(), key=lambda n: getattr(n, "lineno", 0))


def _header_exprs(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (not those of nested statement bodies)."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in stmt.items]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    if isinstance(stmt, _MATCH):
        return [stmt.subject]
    if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
        return []
    return [stmt]


def _join(left: dict | None, right: dict | None) -> dict | None:
    """Merge the states of two paths (``None`` = unreachable)."""
    if left is None:
        return None if right is None else dict(right)
    if right is None:
        return dict(left)
    merged = dict(left)
    for name, origins in right.items():
        merged[name] = merged.get(name, _EMPTY) | origins
    return merged


# ---------------------------------------------------------------------- history hooks: the pinned repair
def _views(scope: ast.AST, method: str) -> list[ast.Call]:
    return [n for n in scope_nodes(scope) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and n.func.attr == method]


def _is_detached(call: ast.Call, parents: dict[int, ast.AST]) -> bool:
    parent = parents.get(id(call))
    if isinstance(parent, ast.Attribute) and parent.attr in ("detach", "detach_"):
        return isinstance(parents.get(id(parent)), ast.Call)
    return False


def _pin_repair(finding: Finding, before: ast.Module, after: ast.Module) -> Repair | None:
    """``.detach()`` added to a view bound to a local tensor: the view the finding named (its first
    argument, ``narrow``) taken in its scope without ``.detach()`` before, with it after."""
    old_scope, new_scope = qualified_scopes(before).get(finding.obj), qualified_scopes(after).get(finding.obj)
    if old_scope is None or new_scope is None:
        return None
    method = str(finding.args[0]) if finding.args else ""
    old_parents = parent_map(old_scope)
    candidates = [c for c in _views(old_scope, method) if not _is_detached(c, old_parents)]
    if not candidates:
        return None
    candidates.sort(key=lambda c: abs(c.lineno - finding.line))
    view = candidates[0]
    parents = parent_map(new_scope)
    undetached = [c for c in _views(new_scope, method) if not _is_detached(c, parents)]
    detached = [c for c in _views(new_scope, method) if _is_detached(c, parents)]
    if not detached:
        return None
    detail = {"view": method, "expression": ast.unparse(view), "undetached": len(undetached)}
    return Repair("detach", finding.obj, detail, ast.unparse(statement_of(detached[0], parents)).splitlines()[0],
                  ast.unparse(statement_of(view, old_parents)).splitlines()[0])


def _repair_state(scope: ast.AST, detail: dict) -> RepairState:
    parents = parent_map(scope)
    views = _views(scope, detail["view"])
    if not views:
        return RepairState(UNKNOWN, scope, f"no '{detail['view']}' view is taken there any more")
    undetached = [c for c in views if not _is_detached(c, parents)]
    if len(undetached) > int(detail.get("undetached", 0)):
        same = [c for c in undetached if ast.unparse(c) == detail.get("expression")]
        anchor = (same or undetached)[0]
        return RepairState(REVERTED, anchor, f"the '{detail['view']}' view `{ast.unparse(anchor)}` is no longer "
                                             f"followed by .detach() in {scope.name}")
    return RepairState(REPAIRED)
