r"""# E9503 undefined-method-call

## What it does
Flags an attribute used as a method of an object whose class is known, where no class of that
object's MRO provides it and nothing assigns it:

* `self.m(...)` and `cls.m(...)` inside a class's methods, and `super().m(...)`;
* method references that are not calls: `partial(self.m, ...)`, `self.apply(self.m)`, hooks
  (`register_forward_hook(self.m)`, any `register_*hook`/`add_*hook` callee), the callable given
  to `map`/`filter`/`submit`/`checkpoint` (first argument; `run_in_executor`: second; the data
  after it is not a reference) or to `register` (any argument), keyword arguments `target=`, `hook=`,
  `fn=`, `func=`, `callback=`, `key=`; and `getattr(self, "m")` with a constant name and no
  default;
* `self.child.m(...)` where `self.child` is assigned only in `__init__`, only from the constructor
  of one project class (`self.language_model = TextModel(config)`);
* `p.m(...)` where the parameter `p` is annotated with a project class (confidence INFERENCE,
  since a subclass instance may be passed: a subclass that defines `m` silences it), including
  the annotated first parameter of a `@staticmethod` or module function (a forward
  monkey-patched onto the class: `def forward(self: LlamaModel, ...)`); not when the function
  inspects the parameter's type (`if not isinstance(p, C): raise` narrows `p` to `C`);
* `model.m(...)` after `model = DDP(model)` (a local bound once to `DistributedDataParallel` or
  `DataParallel`): the wrapper provides its catalogued members and `.module`, not the wrapped
  model's methods. Checked in files that name one of the two classes as a word (an import of it,
  under any alias, does); a wrapper re-exported by a project module under another name and
  imported from there is not followed.

Private names are looked up as Python mangles them (`private_name_mangling`): in the body of class
`Child`, `self.__setup()` reads `_Child__setup`, which only `Child`'s own `__setup` provides (a base's
`__setup` is stored as `_Base__setup`: the finding names `_Child__setup`, as the AttributeError does),
and `self._Base__setup()` spelled out reads `Base`'s own `__setup` (`private_name_mangling_ok`).

A function in a class body whose unannotated first parameter is not named `self`/`cls` (without
`@staticmethod`, called through the class: `Cls.f(x)`) is not a method: its parameter is not the
instance.

Ancestors are resolved across the files of the project (the nearest folder holding
`pyproject.toml` or `.git`, or `setup.py`/`setup.cfg` outside a package), through regular packages and through
namespace packages (folders without `__init__.py`, PEP 420: `from models.base import Base` for
`models/base.py`, `from stacks.qwen.layers import Layer` for `src/stacks/qwen/layers.py`; a name two
such files share is unknown unless one is in the importing file's folder; none starts like a regular
package or root module of the project, a catalogued library or a standard-library module, which
Python imports instead: `docs/_mock/torch/nn.py` is not `torch.nn`), and framework bases come from a bundled
catalog generated from real releases of the libraries (`torch.nn.Module` and its containers,
`torch.autograd.Function`, the DDP/FSDP wrappers, `transformers.PreTrainedModel` and its mixins,
`diffusers.ModelMixin`, `ConfigMixin`, `DiffusionPipeline` and `SchedulerMixin`, `mindspore.nn.Cell`,
builtins and common stdlib bases; `scripts/gen_framework_catalog.py` regenerates it), so the rule
needs no torch at lint time. A catalogued class's members are what its class bodies define plus
what the library's own methods assign on `self`, in any method
(`PreTrainedModel._set_gradient_checkpointing` sets `_gradient_checkpointing_func`), as for a
project class.

Members depend on the library release, so the catalog holds several releases of each library
(torch 2.0-2.15, transformers 4.30-5.25, diffusers 0.20-0.42, mindspore 2.0 and 2.7-2.10; the
newest patch of each minor series), each member with the releases that have it, and the rule
reads the version ranges the project declares for these libraries at its root: `pyproject.toml`
(`[project]` dependencies and optional dependencies, `[dependency-groups]`, Poetry's dependency
tables), the literal `install_requires`/`extras_require` of `setup.py` (read, never run),
`setup.cfg`, `requirements*.txt` and `requirements/*.txt`. A member that a catalogued release
inside the range has is defined (a project declaring `transformers<4.50` may call
`self.get_head_mask(...)` on a `PreTrainedModel`, which transformers 5 removed); a library without
a declared range, or whose range admits no catalogued release, counts every catalogued release.
A message on a member that only releases outside the range have names them:
`...; it exists in transformers 4.30.2-4.57.6, outside the declared range transformers>=5`.

A name counts as defined when the class or an ancestor has a method, property, staticmethod or
classmethod, a class attribute or nested class of that name, or assigns it: `self.m = ...`,
`cls.m = ...`, `setattr(self, "m", ...)`, `self.add_module("m", ...)`,
`register_module`/`register_buffer`/`register_parameter`, `object.__setattr__(self, "m", ...)`,
`self.__dict__["m"] = ...`, `vars(self)["m"] = ...`, or `Cls.m = ...` anywhere in the project; or
when the project stores that name on a receiver that may be an instance of the class: a framework
walk setting `module.m = fn` on submodules, a connector's `callback.log = model.log`, a helper's
`encoder.model = model` on its parameter, `self.child.m = ...`. A receiver counts unless it is
bound to an unrelated class (every binding of the name in that file is a constructor call or an
annotation of such a class; `self.child` built in `__init__` by one constructor). Methods that
out-of-tree device backends install on `torch.nn.Module`/`torch.Tensor` (`npu()`, `mlu()`,
`musa()`, ...; option `device-backend-methods`) count as defined there.

No message when:

* an ancestor or the metaclass is unknown (a library class not in the catalog, an expression
  such as `namedtuple(...)`, a name bound in several ways);
* a class of the hierarchy defines `__getattr__`/`__getattribute__` (the registry `__getattr__`
  of `torch.nn.Module` and `mindspore.nn.Cell` does not count: it only serves submodules,
  parameters and buffers, which are created by the assignments the rule sees), sets computed
  names (`setattr(self, name, v)`, `self.__dict__`/`vars(self)` updates), or is a metaclass;
* the class or an ancestor has a decorator matching `member-adding-decorators`, or a decorator
  that may add members: a library decorator the index cannot see into (anything but well-known
  pure ones such as `dataclasses.dataclass`, `functools.total_ordering`, `typing.final`,
  `typing.runtime_checkable`, `enum.unique`, `unittest.skip*`), a project decorator that sets
  computed names (`setattr(cls, name, ...)`), or a project decorator of another file that assigns
  names onto its parameter. A decorator of the same file that assigns `cls.added = ...` adds
  `added` as a member, and the class stays checked for every other name; a project decorator that
  assigns nothing (a registry) keeps the class checked;
* the class is *open* and a project subclass defines or assigns `m` (the template-method
  pattern), or it has no project subclass at all, or only leaf subclasses that are themselves
  open (combined with other bases outside the project). Open means:
  * its name matches `mixin-class-names` (default `.*Mixin.*`); or
  * it is abstract: it lists `ABC`/`ABCMeta` itself, or an `@abstractmethod` of its MRO is not
    implemented in it (a concrete subclass of an ABC that implements every abstract method is
    *not* open); or
  * nobody instantiates it, and either it has project subclasses (a base: its subclasses are what
    is built) or it is *combinable*: test code (a folder `test`/`tests`/`testing`/`*_tests`, a
    file `test_*.py`/`*_test.py`/`conftest.py`, or a `unittest.TestCase` descendant: fixture
    mixins joined with `TestCase` or device bases by the test framework), or a plain class whose
    only framework ancestors are `object`, `ABC`, `Generic`, `Protocol`.

  *Instantiated* is decided per class, not per name: a call `Name(...)`, `mod.Name(...)` or a
  factory classmethod (`Name.from_pretrained(...)`, `Name._from_config(...)`) resolved through
  the imports to this very class (another class of the same simple name does not count), or the
  class passed on as a value where instances are made from it: a branch of a conditional
  expression (`X = A if c else B; X()`), a returned value (a factory function), a registry entry
  (`{"a": A}`, `[A, B]`, `register(A)`), an alias that is then called, or a project class
  decorator (a registry). Test code that constructs a library class (unit tests build mixins bare)
  does not count, and for test classes only calls count (test frameworks hand test classes to
  functions that combine them with more bases). A class reaching a complete framework base
  (`nn.Module`, a `Dataset`) that nobody references is still checked: it is built through a
  string lookup or a registry the index cannot see. A class that is instantiated is concrete:
  its own instances would raise;
* for `super().m(...)`: a project subclass mixes in another base that defines `m` (cooperative
  multiple inheritance), or the class is mixin-like by name;
* the call's line carries `# type: ignore` (the author told the type checker the attribute is
  provided dynamically, e.g. a base calling a method only its GPU subclass has), or the method is
  a dunder (`self.__getattr__("x")` raising on purpose inside a descriptor);
* the call is guarded: `hasattr(self, "m")` or `getattr(self, "m", ...)` in the same function,
  inside `try:` with an `except` catching `AttributeError` (or `Exception`, `BaseException`, bare)
  or inside `with contextlib.suppress(AttributeError):` (or a base of it; `except*` too; not a call
  in a function, lambda or generator expression made in such a block, which runs later, outside it), or under an `if`
  whose test calls `isinstance`/`issubclass`/`type` on the receiver;
* the call runs only under a state of the receiver that no instance lacking the method can be in:
  a flag that must be truthy (`if self.flag:`, `self.flag and self.m()`, an early
  `if not self.flag: return`) while every assignment of it in the class and its ancestors is a falsy
  constant (`flag = False`, `self.flag = None`), or a class tag that must equal a constant
  (`if self.kind == "fused":`, `in ("a", "b")`, an early `if self.kind != "fused": return`) that
  the class and its ancestors never hold (each assigns it one other literal constant), or an
  attribute that must not be `None` (`if self.adapter is not None:`) while the class and its
  ancestors only ever set it to `None` (read as `self.x` or `self.__class__.x`; a method or
  property whose body is `return <constant>` counts as such a tag, read as `self.supports_x()` or
  `self.is_x`; the name of the instance's class, `self.__class__.__name__ == "Fused"`, `"Fused" in
  ...`, `.startswith(...)`/`.endswith(...)`, `cls.__name__` in a class method, is each
  class's own, and so is the class itself, `self.__class__ is Fused` or `in (A, B)`, an early
  exit under `self.__class__ is Base`); in all
  cases nothing in the project stores the name on an object from outside (`module.flag = True`,
  `setattr`), no framework base has it, and every project subclass that may hold the value
  defines the method (the template method selected by a flag or a tag: `flag_never_on`,
  `class_tag_guard`);
* on every path through the method to it, something that always raises AttributeError runs
  first, so this line never runs: a use already reported (of any member, on any receiver), or a
  plain read of a member the instance lacks by the same evidence (`h = self.embed.word(x)` with
  no `embed` anywhere: a read alone is outside this rule; but when reads of the very member the
  use calls raise first on every path, `if self.hook is not None: self.hook(x)`, the finding moves
  to each of them that runs first, where the code fails: not one after another failing read, not
  one in a nested function, lambda or class, `read_first_failing`); for `self` only (calls on
  annotated parameters and on locals bound to a wrapper are silenced the same way, not moved).
  A read counts as running first only where its statement always evaluates it: not in an
  `assert`'s message, a chained comparison's later operands, an `except` clause's type or a local
  annotation.
  "Runs first": a statement before it in an enclosing block never falls through
  (it evaluates such a use unconditionally, or every branch of it does or ends in
  `return`/`raise`/`break`/`continue`: `if`/`else`, a `with` of a context manager known not to
  swallow errors (`open`, `no_grad`, `autocast`, ...; not `contextlib.suppress` nor an unknown
  one), a `try` whose handlers that may catch AttributeError do too), or the use is in its own statement or the header of a compound statement
  holding it, or it is in a `try`'s `else` after such a body. The first failure raises, so this
  one never runs; one finding per path (a loop body may run zero times and a
  handler may swallow the error, so those leave the later use reported: `repeat_use`). Across
  methods: when the class's `__init__` always raises at reported uses or plain reads of its missing
  members (no `return` anywhere in it: an early one builds the instance) and every project subclass lacking this member lacks those too and runs that `__init__`
  (it defines none, or, in this file, one that calls `super().__init__(...)` on every path outside
  any `try`), no such instance can be built, so the uses in the other methods never run;
* the call sits in a private function or method (`_f`, not `__f__`) that nothing in the project
  calls: no file reads the name (a call, a reference, `getattr(self, "_f")`, a handler table, a
  string prefix such as `f"_on_{event}"`) outside private functions that are themselves never
  called (a read on a method's own instance, `self._f()` or `super()._f()`, counts only in a class
  related to the method's: the same, an ancestor, a subclass, or a class sharing a subclass with it,
  since another class's `self._f()` calls that class's own `_f`: `private_same_name_other_class`), it overrides no member of its bases (a framework may call that) and has no decorator but
  pass-through ones (`staticmethod`, `property`, `no_grad`, `lru_cache`, ...): the project's code
  never runs it (a public function stays checked: users may call it);
* the module can never be imported (the pipeline's rule, for every rule: `hp_invariants.engine.never_imported`;
  such a file's results are not cached, since building an extension in place changes the answer): one
  of its unconditional top-level imports of the project
  itself fails (`from pkg.mod import Name` where `pkg/mod.py` binds no `Name`, has no `*` import
  and no module `__getattr__`; `import pkg.sub` where the package holds no file or folder `sub`
  and the build files at the project root do not name it, as a compiled extension). Imports of
  other libraries are never judged;
* the class matches `unchecked-classes`.

## Why is this bad?
The call raises `AttributeError` the first time it runs, and pylint's `no-member` stays silent
on `self` calls whose bases it cannot infer (torch modules). In hyper-parallel a docstring
clean-up (66 files at once) deleted `Qwen3VLMoeModel.get_input_embeddings` while `forward` still
called it; the VL-MoE example died at its first forward step with:

```text
AttributeError: 'Qwen3VLMoeModel' object has no attribute 'get_input_embeddings'
```

## Example
```python
from torch import nn


class VisionLanguageModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.language_model = TextModel(config)

    def forward(self, input_ids, inputs_embeds=None):
        if inputs_embeds is None:
            inputs_embeds = self.get_input_embeddings()(input_ids)
        return self.language_model(inputs_embeds=inputs_embeds)
```

## Use instead
```python
from torch import nn


class VisionLanguageModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.language_model = TextModel(config)

    def get_input_embeddings(self):
        return self.language_model.embed_tokens

    def set_input_embeddings(self, value):
        self.language_model.embed_tokens = value

    def forward(self, input_ids, inputs_embeds=None):
        if inputs_embeds is None:
            inputs_embeds = self.get_input_embeddings()(input_ids)
        return self.language_model(inputs_embeds=inputs_embeds)
```

## Fix safety
For the transformers accessor pairs (`get/set_input_embeddings`, `get/set_output_embeddings`,
`get/set_decoder`) called on `self`, the fix inserts the missing methods of the pair, with
docstrings, right after `__init__`, returning (and replacing) the attribute found by analysis:
the class's own attribute assigned in `__init__` (`self.embed_tokens`, `self.wte`,
`self.word_embeddings`, `self.tok_embeddings`, `self.embed_in`, `self.shared`; `self.lm_head`,
`self.embed_out`; `self.decoder`, `self.model`, `self.language_model`, `self.transformer`), or one
hop into a child model built in `__init__` from a project class that defines it
(`self.language_model.embed_tokens`). The fix is **safe** (checked by the executable oracle in
`tests/test_fix_oracle.py`) when the only behaviour that changes is that the calls that raised
`AttributeError` now return the module: nothing in the file observes whether the accessors exist,
that is no string literal names one of the added methods (`hasattr(self, "set_input_embeddings")`,
`getattr(model, "get_input_embeddings", None)`) and no use of one sits inside a `try` whose handler
may catch `AttributeError` (bare, `AttributeError`, `Exception`, `BaseException`, or a class that is
not a builtin exception) or inside a `with` whose context manager sees the exception (anything but
the grad-mode ones and `nullcontext`). Where the call sits otherwise (`if`/`elif`/`else` branches,
ternaries, walrus bindings, loops with `else`, `try`/`finally`) does not matter. Otherwise the fix
is **unsafe**. Code in other files that probes for the accessors (`hasattr(model, ...)` in a
trainer) is not searched. When no such attribute is found, or for any other method, the rule
reports only (the right body cannot be known).

## Options
* `mixin-class-names` (regexp list, default `.*Mixin.*`): classes treated as mixins.
* `member-adding-decorators` (regexp list, matched against the decorator's last name; default
  `add_metaclass`, `with_metaclass`, `s`, `attrs`, `define`, `frozen`, `mutable`,
  `make_lazy_class`, `inherit_fields_from`, `use_kernelized_func`): class decorators that may add
  members; classes carrying one (or inheriting from one that does) are not checked.
* `device-backend-methods` (list, default `npu`, `mlu`, `musa`, `hpu`, `dipu`, `gcu`, `sdaa`,
  `maca`): methods that out-of-tree device backends install on `torch.nn.Module` and
  `torch.Tensor` (`torch.utils.generate_methods_for_privateuse1_backend`); calls of them on such
  classes (`super().npu()` in an override) are not reported.
* `unchecked-classes` (regexp list, default empty): qualified or simple class names never checked
  (named so as not to clash with pylint's own `ignored-classes`).
* `unchecked-modules` (regexp list, default `(.*\.)?modular_[^.]*`): dotted module names never
  checked. The default skips transformers' `modular_*.py` files: they are input to its modular
  converter, which renames attributes (`self.bert` becomes `self.ernie`) in the generated
  `modeling_*.py`, and they are never executed as written.

## References
* Incident: hyper-parallel issue 230, item 3 (`Qwen3VLMoeModel.get_input_embeddings` deleted).
* Python data model, attribute lookup and `super()`:
  https://docs.python.org/3/reference/datamodel.html#customizing-attribute-access
* transformers `PreTrainedModel.get_input_embeddings` / `set_input_embeddings`.
* pylint `no-member` (E1101), which skips classes whose bases it cannot infer.
"""

from __future__ import annotations

import ast
import builtins
import re
from typing import Iterable, Iterator

from hp_invariants.astutil import (SCOPES, _CHILD_FIELDS, _HOLEY, EXITS, child_bodies, child_nodes, dotted_name,
                                   qualified_scopes, walk_function_body, walk_nodes)
from hp_invariants.rules.undefined_method_call.index import (
    CatalogEntry,
    ClassIndex,
    ClassKey,
    Hierarchy,
    RECEIVER_NAMES,
    UNKNOWN,
    assigned_name_arg,
    class_nodes,
    is_setattr,
    module_name,
    qualify,
    summarize,
)
from hp_invariants.model import Applicability, Confidence, Edit, Finding
from hp_invariants.api import REPAIRED, REVERTED, Repair, RepairState
from hp_invariants.declarations import UndefinedMethodCallDeclaration
from hp_invariants.api import UNKNOWN as REPAIR_UNKNOWN

ACCESSOR_PAIRS: dict[str, tuple[str, str, str]] = {
    "get_input_embeddings": ("input", "get_input_embeddings", "set_input_embeddings"),
    "set_input_embeddings": ("input", "get_input_embeddings", "set_input_embeddings"),
    "get_output_embeddings": ("output", "get_output_embeddings", "set_output_embeddings"),
    "set_output_embeddings": ("output", "get_output_embeddings", "set_output_embeddings"),
    "get_decoder": ("decoder", "get_decoder", "set_decoder"),
    "set_decoder": ("decoder", "get_decoder", "set_decoder"),
}
"""The transformers accessor pairs the fix can generate."""

ACCESSOR_ATTRS: dict[str, tuple[str, ...]] = {
    "input": ("embed_tokens", "wte", "word_embeddings", "tok_embeddings", "embed_in", "shared"),
    "output": ("lm_head", "embed_out"),
    "decoder": ("decoder", "model", "language_model", "transformer"),
}
"""Attribute names (in preference order) an accessor of each kind returns."""

ACCESSOR_DOCS = {
    "input": ("Return the module that embeds input ids", "Replace the module that embeds input ids"),
    "output": ("Return the output projection (LM head)", "Replace the output projection (LM head)"),
    "decoder": ("Return the decoder model", "Replace the decoder model"),
}

CLS_METHODS = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})
CATCHING = frozenset({"AttributeError", "Exception", "BaseException"})
PURE_DECORATORS = frozenset({
    "dataclasses.dataclass", "functools.total_ordering", "typing.final", "typing.runtime_checkable",
    "typing.type_check_only", "typing.no_type_check", "typing.dataclass_transform",
    "typing_extensions.final", "typing_extensions.runtime_checkable", "typing_extensions.deprecated",
    "typing_extensions.dataclass_transform", "warnings.deprecated", "enum.unique", "enum.verify",
    "unittest.skip", "unittest.skipIf", "unittest.skipUnless", "unittest.expectedFailure",
    "unittest.mock.patch", "unittest.mock.patch.object", "unittest.mock.patch.dict",
})
"""Well-known class decorators that add no member E9503 could miss (others may: not checked)."""
DOC_DECORATORS = frozenset({
    "auto_docstring", "add_start_docstrings", "add_end_docstrings", "add_start_docstrings_to_model_forward",
    "replace_return_docstrings", "add_code_sample_docstrings",
})
"""Decorators (by last name) that only rewrite a class's ``__doc__`` (transformers' documentation
helpers): they add no member and register nothing, so a decorated base is neither unchecked nor
"used" (a registry decorator makes a class used: it may be instantiated by name)."""


def _pure_decorator(dec: str) -> bool:
    """True for a well-known decorator that adds no member and registers nothing."""
    return dec in PURE_DECORATORS or dec.rsplit(".", 1)[-1] in DOC_DECORATORS
#: Context managers that only set and restore the grad mode (or do nothing): they never see or
#: swallow an exception.
TRANSPARENT_CMS = frozenset({"no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "nullcontext"})


def _builtin_exception(name: str) -> bool:
    import builtins  # noqa: PLC0415

    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


GUARD_CALLS = frozenset({"isinstance", "issubclass", "type", "hasattr", "getattr", "callable"})
NEUTRAL_BASES = frozenset({"builtins.object", "abc.ABC", "typing.Generic", "typing.Protocol"})
"""Framework ancestors that leave a class incomplete by itself (see ``_State.combinable``)."""
BACKEND_TARGETS = frozenset({"torch.nn.modules.module.Module", "torch.Tensor", "torch._C.TensorBase"})
"""Classes onto which ``torch.utils.generate_methods_for_privateuse1_backend`` (and out-of-tree
device backends: torch_npu, torch_mlu, torch_musa, ...) install a ``<device>()`` method."""
WRAPPERS = frozenset({"torch.nn.parallel.distributed.DistributedDataParallel",
                      "torch.nn.parallel.data_parallel.DataParallel"})
"""Framework wrappers a script rebinds a model to (``model = DDP(model)``): their instances have
the catalogued members and the registered ``module`` only (no forwarding ``__getattr__``)."""
_WRAPPER_WORDS = tuple(sorted({w.rsplit(".", 1)[-1] for w in WRAPPERS}))


def _names_a_wrapper(text: str) -> bool:
    """True when ``text`` names a class of :data:`WRAPPERS` as a whole word: a file that never does
    has no ``model = DDP(model)`` to check (``FullyShardedDataParallel`` does not name
    ``DataParallel``). Plain substring search (a regular expression starting with ``\\b`` tries
    every offset of the file)."""
    for word in _WRAPPER_WORDS:
        at = text.find(word)
        while at >= 0:
            after = at + len(word)
            if (at == 0 or not _is_word_char(text[at - 1])) and (after == len(text) or not _is_word_char(text[after])):
                return True
            at = text.find(word, at + 1)
    return False


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


CALLABLE_TAKERS: dict[str, int | None] = {
    "partial": 0, "partialmethod": 0, "apply": 0, "map": 0, "filter": 0, "starmap": 0, "submit": 0,
    "checkpoint": 0, "add_done_callback": 0, "call_soon": 0, "run_in_executor": 1, "register": None}
"""Callees taking a callable, and its position: ``partial(self.m, ...)``, ``self.apply(self.m)``,
``map(self.f, ...)``, ``loop.run_in_executor(pool, self.m)``; only that argument is a method
reference (``map(int, self.digits)`` passes data: a fresh helper's false positive). ``None``: any
positional argument (``register`` APIs differ)."""
CALLABLE_KEYWORDS = frozenset({"target", "hook", "fn", "func", "callback", "key", "hook_fn", "default_factory"})
"""Keyword arguments that take a callable, whatever the callee (``Thread(target=self.m)``)."""
_HOOK_CALL = re.compile(r"_?(register|add)\w*_hook|\w*register_hook")
"""Callees registering hooks (``register_forward_hook(self.m)``, ``register_comm_hook(state, self.m)``)."""


class UndefinedMethodCall(UndefinedMethodCallDeclaration):
    """E9503: a call of a method that no class of the receiver's MRO defines or assigns.

    Inputs: the file's tree and the project's :class:`~hp_invariants.rules.undefined_method_call.index.ClassIndex`
    (``ctx.project_data(self)``), overlaid with a fresh summary of the current tree. Output: findings at
    the ``receiver.m`` attribute node, with a safe fix for the transformers accessor pairs.
    The invariant comes from Python's attribute lookup: a name found neither on the instance nor
    in ``type(obj).__mro__`` raises ``AttributeError``.
    """


    # ------------------------------------------------------------------ entry point
    def check(self, ctx) -> Iterator[Finding]:
        """Yield the findings of one file (see the module docstring for the shapes)."""
        if ctx.path.endswith(".pyi") or ctx.project is None:
            return
        index: ClassIndex = ctx.project_data(self)
        module, is_package = module_name(ctx.path)
        if any(re.fullmatch(p, module) for p in ctx.option(self, "unchecked-modules")):
            return
        nodes: dict[str, ast.ClassDef] = {}
        functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        summary = index.cached_summary(ctx.path, ctx.source.content_digest())
        if summary is not None and summary.module == module:
            file_no = index.file_index(ctx.path)
            if not _may_report(index, file_no, summary, ctx.source.text):
                return  # decided from the index alone: the file is not parsed
            class_nodes(ctx.tree, module, is_package, nodes, functions)
            view = index
        else:
            summary = summarize(ctx.tree, module, is_package, nodes, functions)
            view = index.overlay(ctx.path, summary)
            file_no = view.file_index(ctx.path)
        state = _State(ctx, self, view, file_no, summary.imports)
        state.class_nodes = nodes
        found = []
        for qual, class_node in nodes.items():
            if view.summary((file_no, qual)) is not None:
                found.extend(state.check_class((file_no, qual), class_node))
        found.extend(state.check_annotated(functions))
        found.extend(state.check_wrapped(functions))
        defs: dict[int, dict[str, ast.AST]] = {}  # the defs of each body, by name: one scan per body, not per finding
        for finding in found:
            if not _in_uncalled_private(view, file_no, ctx.tree, nodes, finding.obj, defs):
                yield finding

    # ------------------------------------------------------------------ history hooks
    def pin_repair(self, finding, before, after):
        """The called method a change (re)added to the class that ``finding`` reported (see the end of this module)."""
        return _pin_repair(self.missing_member(finding), before, after)

    def repair_state(self, scope, detail):
        """Reverted when the class no longer defines the method."""
        return _repair_state(scope, detail)


_PASS_THROUGH = frozenset({"staticmethod", "classmethod", "property", "cached_property", "abstractmethod",
                           "no_grad", "inference_mode", "enable_grad", "lru_cache", "cache", "wraps"})
"""Decorators that neither register nor expose a function under another name (a private function
decorated otherwise, ``@app.route``, ``@registry.register``, ``@x.setter``, may be called without
its name being read)."""


def _in_uncalled_private(view: ClassIndex, file_no: int, tree: ast.Module, nodes: dict[str, ast.ClassDef],
                         obj: str, defs: dict[int, dict[str, ast.AST]]) -> bool:
    """True when the finding's scope ``obj`` (``Cls._m``, ``_helper.<locals>.f``) lies in a private
    function or method (``_f``, not ``__f__``) that nothing in the project calls
    (:meth:`ClassIndex.private_live`), that is no override of a member of its bases (a framework
    may call that) and has no decorator but :data:`_PASS_THROUGH`: the project's code never runs
    it, so the line is reached by nothing (the panels' false kind: a private helper nothing calls).
    A public function or method may be called by users: its findings stay. ``defs``: each body's
    defs by name (``id(body)`` -> name -> first def), filled on first use and shared by the findings of
    one file (a scan per finding made a file with thousands of findings quadratic)."""
    parts = obj.split(".")
    for k, name in enumerate(parts):
        owner = ".".join(parts[:k])
        if k and owner not in nodes:
            return False  # inside a function: the scope that decides was met before
        body = nodes[owner].body if k else tree.body
        by_name = defs.get(id(body))
        if by_name is None:  # the first def of each name, as a scan of the body finds it
            by_name = defs[id(body)] = {}
            for stmt in body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    by_name.setdefault(stmt.name, stmt)
        func = by_name.get(name)
        if func is None:
            continue  # a class: look in it
        if not name.startswith("_") or _dunder(name):
            return False
        for decorator in func.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if (dotted_name(target) or "").rsplit(".", 1)[-1] not in _PASS_THROUGH:
                return False
        if k:
            hier = view.hierarchy((file_no, owner))
            if hier.unknown or hier.dynamic or name in hier.inherited:
                return False
        return not view.private_live(name, (file_no, owner) if k else None)
    return False


def _may_report(view: ClassIndex, file_no: int, summary, text: str) -> bool:
    """False when no use in the file can be reported, decided from the index alone: every name the
    file's classes read on their receiver (``super()``, a constructor-typed ``self.a``), and every
    method called on an annotated parameter, is a member of that class's MRO (or the class's
    ancestry is unknown or dynamic, where nothing is reported), and the file names no framework
    wrapper (``DDP``). A necessary condition of :meth:`_State.check_class`, ``check_annotated`` and
    ``check_wrapped`` reporting anything (a superset of what they ask), so a file where it is false
    gets no finding and is not parsed: most files of a project, in a cold check."""
    if _names_a_wrapper(text):
        return True
    for cls in summary.classes:
        key = (file_no, cls.qualname)
        if view.summary(key) is None:
            continue
        hier = view.hierarchy(key)
        if hier.unknown or hier.dynamic:
            continue
        if any(not _dunder(name) and not _has_member(view, key, hier, name, key) for name in cls.used):
            return True
        if any(name not in hier.inherited and not _dunder(name) for name in cls.super_used):
            return True
        for ctor, name in cls.attr_uses:
            if _missing(view, ctor, file_no, name):
                return True
    return any(_missing(view, qual, file_no, name) for qual, name in summary.param_calls)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _mangling_prefix(key: ClassKey) -> str:
    """The class name Python puts before a private name written in the body of class ``key``: its
    simple name without leading underscores (``""`` for a name of underscores only: no mangling)."""
    return key[1].rsplit(".", 1)[-1].lstrip("_")


def _runtime_name(name: str, user: ClassKey) -> str:
    """``name`` as Python looks it up in the body of class ``user``: a private ``__x`` is ``_User__x``
    (what the AttributeError names)."""
    owner = _mangling_prefix(user)
    return f"_{owner}{name}" if owner and name.startswith("__") and not name.endswith("__") else name


def _has_member(view: ClassIndex, key: ClassKey, hier: Hierarchy, name: str, user: ClassKey | None) -> bool:
    """True when the MRO of ``key`` provides attribute ``name`` as written in the body of class ``user``
    (``None``: outside any class), with Python's private name mangling (the language reference,
    "Identifiers"): there ``self.__x`` reads ``_User__x`` (the class name without its leading
    underscores), which only ``user``'s own ``__x`` (or an ``_User__x`` spelled out) provides, not a
    base's ``__x``; and ``self._Base__x`` spelled out reads ``Base``'s own ``__x``."""
    if name.startswith("__") and not name.endswith("__") and user is not None:
        owner = _mangling_prefix(user)
        if not owner:  # a class named only with underscores mangles nothing
            return name in hier.members
        if f"_{owner}{name}" in hier.members:
            return True
        if user != key and user not in hier.ancestors:
            return False
        own = view.summary(user)
        return own is not None and name in own.members
    if name in hier.members:
        return True
    if name[:1] == "_" and "__" in name[2:]:  # _Base__x: Base's own __x, mangled
        for k in (key, *hier.ancestors):
            owner = _mangling_prefix(k)
            summary = view.summary(k) if owner and name.startswith(f"_{owner}__") else None
            if summary is not None and name[len(owner) + 1:] in summary.members:
                return True
    return False


def _missing(view: ClassIndex, qualified: str, file_no: int, name: str) -> bool:
    """True when ``qualified`` resolves to a project class whose known MRO lacks ``name``."""
    if _dunder(name):
        return False
    key = view.resolve(qualified, file_no)
    if type(key) is not tuple:
        return False
    hier = view.hierarchy(key)
    return not (hier.unknown or hier.dynamic) and name not in hier.members


class _State:
    """Per-file working state of :class:`UndefinedMethodCall`."""

    def __init__(self, ctx, rule: UndefinedMethodCall, view: ClassIndex, file_no: int, imports: dict[str, str]):
        self.ctx = ctx
        self.rule = rule
        self.view = view
        self.file_no = file_no
        self.imports = imports
        self.mixin_names = tuple(re.compile(p) for p in ctx.option(rule, "mixin-class-names"))
        self.adding_decorators = tuple(re.compile(p) for p in ctx.option(rule, "member-adding-decorators"))
        self.ignored = tuple(re.compile(p) for p in ctx.option(rule, "unchecked-classes"))
        self.scans: dict[ast.AST, _Scan] = {}  # method -> its scan by check_class (reused by check_annotated)
        self.tops: dict[ast.AST, _ScanView] = {}  # function -> its scan outside nested functions
        self.backend_names = frozenset(ctx.option(rule, "device-backend-methods"))
        self._open: dict[ClassKey, bool] = {}
        self._ignored_lines: frozenset[int] | None = None if "type: ignore" in ctx.source.text else frozenset()
        self.class_nodes: dict[str, ast.ClassDef] = {}  # this file's classes by qualified name

    # ------------------------------------------------------------------ class facts
    def checkable(self, key: ClassKey, hier: Hierarchy) -> bool:
        """True when every ancestor is known and nothing can add members behind the source's back."""
        if hier.unknown or hier.dynamic or hier.is_type:
            return False
        for k in (key, *hier.ancestors):
            summary = self.view.summary(k)
            if summary is None:
                return False
            for dec in summary.decorators:
                last = dec.rsplit(".", 1)[-1]
                if dec == UNKNOWN or any(p.fullmatch(last) for p in self.adding_decorators):
                    return False
                if not self.decorator_known(dec, k):
                    return False
        name = self.view.class_name(key)
        return not any(p.fullmatch(name) or p.fullmatch(key[1].rsplit(".", 1)[-1]) for p in self.ignored)

    def decorator_known(self, dec: str, key: ClassKey) -> bool:
        """True when class decorator ``dec`` of ``key`` adds no member the index does not know.

        A well-known pure decorator (:data:`PURE_DECORATORS`) or a catalog entry adds none; a
        project function adds what it assigns onto its parameter, which the index records as
        members of the classes it decorates in its own file (computed names: unknown members);
        anything else (a library decorator, a project decorator of another file that adds names)
        may add members, so the class is not checked.
        """
        if _pure_decorator(dec):
            return True
        adds = self.view.decorator_adds(dec, key[0])
        if adds is None:
            return isinstance(self.view.resolve(dec, key[0]), CatalogEntry)
        if not adds:
            return True
        return "*" not in adds and adds <= self.view.patched_members(self.view.class_name(key))

    def defined(self, key: ClassKey, hier: Hierarchy, name: str, user: ClassKey | None = None) -> bool:
        """True when an instance of ``key`` may have attribute ``name``: a member of its MRO (with
        Python's private name mangling when the use is in the body of class ``user``, see
        :func:`_has_member`), a method a device backend installs on ``torch.nn.Module``/``torch.Tensor``,
        or a store of that name anywhere in the project on a receiver that may be an instance of the class."""
        if _has_member(self.view, key, hier, name, user):
            return True
        if name in self.backend_names and any(c in BACKEND_TARGETS for c in hier.catalog):
            return True
        return self.view.stored(key, name)

    def used(self, key: ClassKey, hier: Hierarchy) -> bool:
        """True when instances of the class itself may exist: the project constructs it, or passes
        it on as a value or hands it to a class decorator (a registry; :meth:`ClassIndex.used`).
        For test code (a test folder, a ``unittest.TestCase`` descendant) only constructions
        count: test frameworks hand test classes to functions that combine them with more bases
        (``instantiate_device_type_tests(TestFoo, globals())``)."""
        test = self.view.is_test(key[0]) or "unittest.case.TestCase" in hier.catalog
        if self.view.used(key, not test):  # values: uses as values count unless test code
            return True
        summary = self.view.summary(key)
        return not test and summary is not None and any(not _pure_decorator(d) for d in summary.decorators)

    def combinable(self, key: ClassKey, hier: Hierarchy) -> bool:
        """True when a class nobody instantiates may be completed by bases outside the project:
        it is test code (a test folder or a class reaching ``unittest.TestCase``: fixture mixins
        are joined with ``TestCase`` or device bases by the test framework), or a plain class
        whose only framework ancestors are ``object``, ``ABC``, ``Generic``, ``Protocol`` (a
        helper for library users). A class reaching a complete framework base (``nn.Module``, a
        ``Dataset``) is built by itself, through a registry or a string lookup."""
        if self.view.is_test(key[0]) or "unittest.case.TestCase" in hier.catalog:
            return True
        return all(c in NEUTRAL_BASES for c in hier.catalog)

    def open_class(self, key: ClassKey, hier: Hierarchy) -> bool:
        """True when the class may rely on members that another class provides: a mixin by name,
        abstract (see :class:`Hierarchy`), a base that nobody instantiates but that has project
        subclasses (the template-method pattern: its subclasses are what is built), or a class
        nobody instantiates that is :meth:`combinable`."""
        found = self._open.get(key)
        if found is None:
            simple = key[1].rsplit(".", 1)[-1]
            if any(p.fullmatch(simple) for p in self.mixin_names) or hier.abstract:
                found = True
            elif self.used(key, hier):
                found = False
            else:
                found = bool(self.view.possible_subclasses(key)) or self.combinable(key, hier)
            self._open[key] = found
        return found

    def subclass_provides(self, key: ClassKey, name: str, outside: bool = True, user: ClassKey | None = None) -> bool:
        """True when a project subclass of ``key`` defines/assigns ``name`` or may (unknown/dynamic
        ancestors), or when ``outside`` is True and ``key`` has no project subclass at all, or a
        leaf subclass that is itself open (a mixin, abstract, or nobody instantiates it and it is
        :meth:`combinable`: combined with more bases outside the project). ``user``: the class in whose
        body ``name`` is written (a private ``__x`` there is mangled: a subclass's own ``__x`` is not it)."""
        subs = self.view.possible_subclasses(key)
        if not subs:
            return outside
        for sub in subs:
            hier = self.view.hierarchy(sub)
            if _has_member(self.view, sub, hier, name, user) or hier.dynamic or hier.unknown:
                return True
            if outside and not self.view.possible_subclasses(sub) and self.open_class(sub, hier):
                return True  # a leaf combined with more bases outside the project
        return False

    def sibling_provides(self, key: ClassKey, hier: Hierarchy, name: str) -> bool:
        """For ``super()``: True when a subclass mixes in another base that may provide ``name``."""
        subs = self.view.subclasses(key)
        line = {key, *hier.ancestors, *subs}
        for sub in subs:
            sub_hier = self.view.hierarchy(sub)
            if sub_hier.unknown or sub_hier.dynamic:
                return True
            for other in sub_hier.ancestors - line:
                other_summary = self.view.summary(other)
                if other_summary is None or name in other_summary.members:
                    return True
            extra = set(sub_hier.catalog) - set(hier.catalog)
            for qual in extra:
                entry = self.view.catalog.get(qual)
                if entry is None or name in entry.members:
                    return True
        return False

    # ------------------------------------------------------------------ reachability
    def unreachable(self, anchor: ast.AST, method: ast.AST, receiver: str, key: ClassKey, hier: Hierarchy,
                    name: str) -> bool:
        """True when the use at ``anchor`` runs only under a state of the receiver that no instance
        lacking ``name`` can be in (:func:`_required_flags`: a flag that must be truthy, a tag that
        must equal one of some constants, an attribute that must not be ``None``; read as
        ``self.x`` or ``self.__class__.x``): see
        :meth:`never_in_state`. The branch is dead on the class's own instances: reaching it needs a
        configuration the code base never makes (gradient-checkpointing branches copied into a port
        whose flag is only ever ``False``; a template method selected by a class tag that only the
        subclass defining the hook sets)."""
        for requirement in _required_flags(self.ctx, anchor, method, receiver):
            if self.never_in_state(key, hier, requirement, name):
                return True
        return False

    def never_in_state(self, key: ClassKey, hier: Hierarchy, requirement: tuple, name: str) -> bool:
        """True when no instance of ``key``'s class or of a project subclass lacking ``name`` can
        meet ``requirement`` (``(attribute, predicate, default)``, see :func:`_required_flags`): every
        assignment of the attribute in the class and its ancestors is a literal constant (or, for a
        truthiness test, a falsy one) that fails the predicate, no framework base has it, nothing in the project stores
        it on an object from outside (``module.flag = True``, ``setattr``: see
        :meth:`ClassIndex.flag_sets`), and every project subclass whose classes may give it a passing
        (or unknown) value defines ``name`` itself."""
        attr, predicate, default = requirement
        view = self.view
        if attr == "__class__.__name__" or attr == "__class__":  # each class's own name, or the class
            if attr == "__class__":
                keys = {view.resolve(qualify(ast.Constant(n), self.imports), self.file_no) for n in predicate[1]}
                if any(type(k) is not tuple for k in keys):
                    return False  # a class the rule cannot resolve

                def passes_class(k):
                    return (k in keys) == predicate[2]
            else:
                def passes_class(k):
                    return _passes(predicate, repr(k[1].rsplit(".", 1)[-1]))
            if passes_class(key):
                return False
            for sub in view.possible_subclasses(key):
                sub_hier = view.hierarchy(sub)
                if sub_hier.unknown or sub_hier.dynamic:
                    return False
                if name not in sub_hier.members and passes_class(sub):
                    return False
            return True
        member = attr[:-2] if attr.endswith("()") else attr  # "m()": the value m returns
        if member == name or view.flag_set(member):
            return False

        def passes(summary) -> bool:  # may this class's own assignments give a passing value?
            value = dict(summary.tags).get(attr)
            if value is None:  # assigned something that is not one literal constant
                return not (predicate[0] == "truthy" and attr in summary.falsy)
            return _passes(predicate, value)

        def framework_has(catalog_names) -> bool:
            return any(member in view.catalog[c].members for c in catalog_names if c in view.catalog)

        if framework_has(hier.catalog):
            return False
        assigned = False
        for k in (key, *hier.ancestors):
            summary = view.summary(k)
            if summary is None:
                return False
            if member in summary.members:
                assigned = True
                if passes(summary):
                    return False  # the class's own instances (or an ancestor's value) may pass
        if not assigned and (default is None or _passes(predicate, default)):
            return False  # nothing assigns it: the read raises first (or a default passes)
        line = {key, *hier.ancestors}
        for sub in view.possible_subclasses(key):
            sub_hier = view.hierarchy(sub)
            if name in sub_hier.members and not (sub_hier.unknown or sub_hier.dynamic):
                continue
            if sub_hier.unknown or sub_hier.dynamic or framework_has(sub_hier.catalog):
                return False
            for k in (sub, *(a for a in sub_hier.ancestors if a not in line)):
                summary = view.summary(k)
                if summary is None or member in summary.members and passes(summary):
                    return False  # a subclass lacking the member may be in the state
        return True

    def missing_reads(self, method: ast.AST, receiver: str, key: ClassKey, hier: Hierarchy,
                      scan: "_Scan") -> list[ast.Attribute]:
        """The attribute reads ``receiver.x`` in ``method`` (plain reads, not calls: those are the
        uses) of members the instance lacks by the same evidence as a finding: not defined nor
        stored anywhere, not dunder, not guarded, no subclass of an open class providing it, not in
        a branch its state never reaches, no ``# type: ignore``. Such a read raises AttributeError
        whenever it runs (``x = self.embeddings.word(...)`` with no ``embeddings`` in the MRO), so a
        use after it on every path never runs."""
        found = []
        uses = {id(call.func) for call in scan.calls}
        for node in ast.walk(method):
            if node.__class__ is not ast.Attribute or node.ctx.__class__ is not ast.Load or id(node) in uses:
                continue
            value, name = node.value, node.attr
            if value.__class__ is not ast.Name or value.id != receiver or name.startswith("__") and name.endswith("__"):
                continue
            if self.defined(key, hier, name, key) or self.guarded(node, method, receiver, name, scan.guards) \
                    or self.open_class(key, hier) and self.subclass_provides(key, name, user=key) \
                    or self.unreachable(node, method, receiver, key, hier, name) or self.type_ignored(node):
                continue
            found.append(node)
        return found

    def never_constructed(self, key: ClassKey, hier: Hierarchy, name: str, failing: set[str]) -> bool:
        """True when no instance lacking ``name`` can be made by calling the class: ``key``'s own
        ``__init__`` always raises at the uses of its missing members ``failing`` (see the caller),
        and every project subclass lacking ``name`` lacks them too and runs that ``__init__`` (no
        class between them defines one). A use of ``name`` in another method of the class then
        never runs on such an instance: the constructor's finding is the one that runs."""
        view = self.view
        line = {key, *hier.ancestors}
        for sub in view.possible_subclasses(key):
            sub_hier = view.hierarchy(sub)
            if sub_hier.unknown or sub_hier.dynamic:
                return False
            if name in sub_hier.members:
                continue
            if failing & sub_hier.members:
                return False  # it provides a member the constructor needs: its instances are built
            for k in (sub, *sub_hier.ancestors):
                if k in line:
                    continue
                summary = view.summary(k)
                if summary is None or "__init__" in summary.members and not self.init_runs_base_first(k):
                    return False
        return True

    def init_runs_base_first(self, key: ClassKey) -> bool:
        """True when ``key`` is a class of this file whose ``__init__`` cannot complete without
        calling its base's: every path to its end runs ``super().__init__(...)`` (or
        ``Base.__init__(self, ...)``) first, outside any ``try``, so it raises whenever that one does."""
        node = self.class_nodes.get(key[1]) if key[0] == self.file_no else None
        init = next((m for m in _methods(node.body) if m.name == "__init__"), None) if node is not None else None
        if init is None:
            return False
        calls = _FailedBefore(self.ctx, init)
        for stmt in init.body:
            call = stmt.value if stmt.__class__ is ast.Expr else None
            if call.__class__ is ast.Call and call.func.__class__ is ast.Attribute and call.func.attr == "__init__" \
                    and (_is_super(call.func.value) or call.func.value.__class__ is ast.Name):
                calls.add(call.func)
        return calls.always_raises(init.body)

    # ------------------------------------------------------------------ guards
    def guarded(self, call: ast.Call, func: ast.AST, receiver: str, name: str, guards: set) -> bool:
        """hasattr/getattr on (receiver, name) in ``func``; try/except AttributeError; ``with
        suppress(AttributeError)``; isinstance if."""
        if (receiver, name) in guards or ("self", name) in guards and receiver == "super()":
            return True
        root = receiver.replace("super()", "self")
        child: ast.AST = call
        deferred = False  # inside a function, lambda or generator nested in ``func``: it runs later, outside the blocks around it
        below: ast.AST | None = None  # the ancestor before ``child`` on the way up
        for anc in self.ctx.ancestors(call):
            if anc is not func and isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                deferred = True
            elif isinstance(anc, ast.GeneratorExp) and not (child is anc.generators[0] and below is anc.generators[0].iter):
                deferred = True  # only the first iterable is evaluated where the generator is made
            if not deferred and isinstance(anc, (ast.Try, ast.TryStar)) and any(child is stmt for stmt in anc.body):
                for handler in anc.handlers:
                    if handler.type is None or CATCHING & _handler_names(handler.type):
                        return True
            if not deferred and isinstance(anc, (ast.With, ast.AsyncWith)) and any(child is stmt for stmt in anc.body) \
                    and any(self._suppresses_attribute_error(item.context_expr, func) for item in anc.items):
                return True
            if isinstance(anc, (ast.If, ast.IfExp, ast.While)) and child is not anc.test and \
                    _test_inspects(anc.test, root, name):
                return True
            if isinstance(anc, ast.BoolOp) and any(
                    _test_inspects(v, root, name) for v in anc.values[: anc.values.index(child)] if child in anc.values):
                return True
            if anc is func:
                break
            below, child = child, anc
        return False

    def _suppresses_attribute_error(self, context: ast.AST, scope: ast.AST) -> bool:
        """True for a ``with`` item ``contextlib.suppress(...)`` (the import resolved from ``scope``:
        not a function of the project that happens to be named ``suppress``) whose arguments name
        ``AttributeError`` or a base of it: an AttributeError raised in the block is swallowed there,
        as an ``except AttributeError`` handler would catch it."""
        if not isinstance(context, ast.Call) or not any(CATCHING & _handler_names(arg) for arg in context.args):
            return False
        ref = self.ctx.semantic.external(context.func, scope)
        return ref is not None and (ref.module, ref.level, ref.attrs) == ("contextlib", 0, ("suppress",))

    def type_ignored(self, func: ast.AST) -> bool:
        """True when a line of the attribute node ``func`` carries ``# type: ignore`` (the author
        has told the type checker that the attribute is provided dynamically)."""
        ignored = self._ignored_lines
        if ignored is None:  # the lines holding "type: ignore", found once per file
            source = self.ctx.source
            text = source.text
            lf_only = "\r" not in text  # then a line number is one more than the "\n" before it
            lines: set[int] = set()
            line, counted = 1, 0
            at = text.find("type: ignore")
            while at >= 0:
                if lf_only:
                    line += text.count("\n", counted, at)
                    counted = at
                lines.add(line if lf_only else source.position(at)[0])
                at = text.find("type: ignore", at + 1)
            ignored = self._ignored_lines = frozenset(lines)
        if not ignored:
            return False
        return any(line in ignored for line in range(func.lineno, (func.end_lineno or func.lineno) + 1))

    # ------------------------------------------------------------------ findings
    def report(self, node: ast.Attribute, class_label: str, name: str, members: Iterable[str],
               confidence: Confidence, fix=None, evidence: str = "", catalog: Iterable[str] = ()) -> Finding:
        """The finding at ``node``; its message names close members, the catalogued releases outside
        the project's declared range that have ``name`` (``catalog``: the catalog classes reached)
        and states ``evidence`` (what was resolved where and what was ruled out: see :meth:`evidence`)."""
        import difflib  # noqa: PLC0415 - only when there is something to report

        close = difflib.get_close_matches(name, sorted(m for m in members if not m.startswith("__")), n=3, cutoff=0.6)
        hint = ("; did you mean " + ", ".join(f"'{c}'" for c in close) + "?") if close else ""
        hint += self.view.breaking_note(catalog, name)  # releases outside the declared range that have it
        if evidence:
            hint += f" [{evidence}]"
        return self.ctx.finding(self.rule, node, args=(class_label, name, hint), confidence=confidence, fix=fix)

    def evidence(self, key: ClassKey, built: bool) -> str:
        """What a finding on an instance of ``key`` rests on: its MRO resolved through the project and
        the framework catalog, whether the project builds the class (closed world: HIGH) or only
        may (a class reaching a complete framework base, built by name or by a registry: INFERENCE),
        and the dynamic features ruled out."""
        how = "built in the project" if built else "not built by name in the project (a registry may build it)"
        return (f"MRO {self.view.mro_evidence(key)}; {how}; ruled out: __getattr__, computed setattr, "
                f"member-adding decorators and metaclasses, stores of the name elsewhere")

    # ------------------------------------------------------------------ self / cls / super / self.attr
    def check_class(self, key: ClassKey, class_node: ast.ClassDef) -> Iterator[Finding]:
        """Check the calls and method references inside the methods of one class."""
        hier = self.view.hierarchy(key)
        ok = self.checkable(key, hier)
        simple = key[1].rsplit(".", 1)[-1]
        if hier.unknown or hier.dynamic:
            return
        scans = []
        for method in _methods(class_node.body):
            kind = _method_kind(method)
            args = method.args.posonlyargs + method.args.args
            if kind == "static" or not args:
                continue
            receiver = args[0].arg
            if args[0].annotation is not None:
                if not self.annotates_self(args[0].annotation, key):
                    continue  # e.g. a function missing @staticmethod whose first parameter is a config
            elif receiver not in RECEIVER_NAMES:
                continue  # a function without self/cls, called through the class (Cls.f(x))
            scan = _Scan(method, receiver)
            self.scans[method] = scan
            scans.append((method, kind, receiver, scan))
        attr_classes: dict[str, ClassKey] | None = None
        scans.sort(key=lambda item: item[0].name != "__init__")  # the constructor first (stable)
        unconstructible: set[str] = set()  # members of the receiver whose uses make __init__ always raise
        for method, kind, receiver, scan in scans:
            if receiver in scan.rebound:
                continue
            failed = _FailedBefore(self.ctx, method)  # the uses reported in this method
            constructor = _FailedBefore(self.ctx, method) if method.name == "__init__" and kind == "self" else None
            own_members: set[str] = set()  # the receiver's members reported in the constructor
            reads: list[ast.Attribute] | None = None  # reads of members the receiver lacks (computed once)
            promoted_reads: set[int] = set()  # ids of the reads reported in place of a use (see below)
            for func, anchor in sorted(_uses(scan), key=lambda use: (use[0].lineno, use[0].col_offset)):
                name = func.attr
                value = func.value
                if name.startswith("__") and name.endswith("__") or self.type_ignored(func):
                    continue
                if failed.before(func):
                    continue  # a reported use already raised on every path to it: this line never runs
                if reads is None and kind == "self" and ok:
                    reads = self.missing_reads(method, receiver, key, hier, scan)
                promoted: list[ast.Attribute] = []
                if reads and _read_fails_first(self.ctx, reads, func, method):
                    # a read of a member the instance lacks raised first: this line never runs. When reads
                    # of this very member raise first on every path (`if self.hook is not None:
                    # self.hook(x)`), each of them that nothing failing runs before is where the code
                    # fails: the findings go there (one per path, and the bug still reported)
                    if isinstance(value, ast.Name) and value.id == receiver:
                        promoted = _first_failing_reads(self.ctx, reads, name, func, method, failed)
                    promoted = [r for r in promoted if id(r) not in promoted_reads]
                    if not promoted:
                        continue
                if isinstance(value, ast.Name) and value.id == receiver and ok:
                    if self.defined(key, hier, name, key) or self.guarded(anchor, method, receiver, name, scan.guards):
                        continue
                    if self.open_class(key, hier) and self.subclass_provides(key, name, user=key):
                        continue
                    if self.unreachable(anchor, method, receiver, key, hier, name):
                        continue
                    if unconstructible and kind == "self" and self.never_constructed(key, hier, name, unconstructible):
                        continue  # no instance lacking it exists: its constructor always raises first
                    fix = self.accessor_fix(key, hier, class_node, name) if not promoted and kind == "self" \
                        and anchor.__class__ is ast.Call and anchor.func is func else None
                    built = self.used(key, hier)
                    promoted_reads.update(id(r) for r in promoted)
                    for where in promoted or [func]:
                        yield self.report(where, simple, _runtime_name(name, key), hier.members,
                                          Confidence.HIGH if built else Confidence.INFERENCE, fix,
                                          self.evidence(key, built), hier.catalog)
                        failed.add(where)
                        if constructor is not None:
                            constructor.add(where)
                            own_members.add(name)
                elif _is_super(value, class_node.name, receiver) and ok:
                    if name in hier.inherited or self.guarded(anchor, method, "super()", name, scan.guards):
                        continue
                    if name in self.backend_names and any(c in BACKEND_TARGETS for c in hier.catalog):
                        continue
                    if any(p.fullmatch(simple) for p in self.mixin_names) or self.sibling_provides(key, hier, name):
                        continue
                    if self.open_class(key, hier) and not self.view.possible_subclasses(key):
                        continue  # combined with other bases outside the project (type(...), users)
                    built = self.used(key, hier)
                    yield self.report(func, f"super({simple})", name, hier.inherited,
                                      Confidence.HIGH if built else Confidence.INFERENCE, evidence=self.evidence(key, built),
                                      catalog=hier.catalog)
                    failed.add(func)
                elif kind == "self" and isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                        and value.value.id == receiver:
                    if attr_classes is None:
                        attr_classes = self.attribute_classes(key, hier, class_node, scans)
                    if value.attr not in attr_classes:
                        continue
                    target = attr_classes[value.attr]
                    target_hier = self.view.hierarchy(target)
                    if not self.checkable(target, target_hier) or self.defined(target, target_hier, name, key):
                        continue
                    if self.guarded(anchor, method, f"{receiver}.{value.attr}", name, scan.guards):
                        continue
                    yield self.report(func, target[1].rsplit(".", 1)[-1], name, target_hier.members, Confidence.HIGH,
                                      evidence=f"self.{value.attr} is built in __init__ by {target[1]}; "
                                               + self.evidence(target, True), catalog=target_hier.catalog)
                    failed.add(func)
            if constructor is not None and ok:
                for read in self.missing_reads(method, receiver, key, hier, scan):
                    constructor.add(read)  # a read of a member it lacks fails the constructor as well
                    own_members.add(read.attr)
                if own_members and constructor.always_raises(method.body):
                    unconstructible = own_members

    def annotates_self(self, annotation: ast.AST, key: ClassKey) -> bool:
        """True when a first parameter's annotation names the class itself, ``Self`` or ``type``."""
        name = qualify(annotation, self.imports)
        if name.rsplit(".", 1)[-1] in ("Self", "type", "Type") or (
                isinstance(annotation, ast.Subscript) and (dotted_name(annotation.value) or "").endswith(("type", "Type"))):
            return True
        return self.view.resolve(name, self.file_no) == key

    def attribute_classes(self, key: ClassKey, hier: Hierarchy, class_node: ast.ClassDef,
                          scans: list) -> dict[str, ClassKey]:
        """``self.attr`` names assigned only in ``__init__``, only from one project class's constructor."""
        assigned: dict[str, set[ClassKey | None]] = {}
        body_names: set[str] | None = None
        for method, kind, _receiver, scan in scans:
            if kind != "self":
                continue
            in_init = method.name == "__init__"
            if True:
                for target, value in scan.stores:
                    cls_key = None
                    if in_init and isinstance(value, ast.Call):
                        resolved = self.view.resolve(qualify(value.func, self.imports), self.file_no)
                        if type(resolved) is tuple and "__new__" not in self.view.hierarchy(resolved).own:
                            cls_key = resolved
                    assigned.setdefault(target, set()).add(cls_key)
        out: dict[str, ClassKey] = {}
        for attr, keys in assigned.items():
            if len(keys) != 1 or None in keys:
                continue
            if body_names is None:
                body_names = _class_body_names(class_node)
            if attr in body_names or attr in hier.inherited:
                continue
            if any(attr in self.view.hierarchy(sub).own for sub in self.view.subclasses(key)):
                continue
            out[attr] = next(iter(keys))
        return out

    def top_scan(self, func: ast.AST) -> "_ScanView":
        """The scan of ``func`` outside nested functions and lambdas (one walk per function: taken
        from :meth:`check_class`'s scan of a method, else made once and kept)."""
        known = self.scans.get(func)
        if known is not None:
            return known.top
        top = self.tops.get(func)
        if top is None:
            top = self.tops[func] = _Scan(func, None).top
        return top

    # ------------------------------------------------------------------ annotated parameters
    def check_annotated(self, functions: list) -> Iterator[Finding]:
        """Calls on parameters annotated with a project class (INFERENCE): also the annotated first
        parameter of a ``@staticmethod`` or module function (a forward monkey-patched onto a
        class); not a parameter whose type the function inspects (``isinstance(p, C)``: the
        annotation is narrowed or contradicted there)."""
        for func in functions:
            if not all(_passes_arguments(d) for d in func.decorator_list):
                continue  # a wrapper may call it with anything: the annotations are not what it gets
            params = func.args.posonlyargs + func.args.args + func.args.kwonlyargs
            typed: dict[str, ClassKey] = {}
            receiver_scanned = func in self.scans  # its first parameter is the instance (check_class)
            for i, param in enumerate(params):
                if param.annotation is None or (i == 0 and receiver_scanned):
                    continue
                if not isinstance(param.annotation, (ast.Name, ast.Attribute, ast.Constant)):
                    continue
                resolved = self.view.resolve(qualify(param.annotation, self.imports), self.file_no)
                if type(resolved) is tuple:
                    typed[param.arg] = resolved
            if not typed:
                continue
            scan = self.top_scan(func)
            for name in scan.rebound:
                typed.pop(name, None)
            for name in list(typed):
                if (name, "") in scan.guards:
                    typed.pop(name)
            failed = _FailedBefore(self.ctx, func)  # one finding per path (see check_class)
            for call in sorted(scan.calls, key=lambda c: (c.lineno, c.col_offset)):
                value = call.func.value  # type: ignore[attr-defined]
                if not (isinstance(value, ast.Name) and value.id in typed) or failed.before(call.func):
                    continue
                key = typed[value.id]
                name = call.func.attr  # type: ignore[attr-defined]
                if name.startswith("__") and name.endswith("__") or self.type_ignored(call.func):
                    continue
                hier = self.view.hierarchy(key)
                if not self.checkable(key, hier) or self.defined(key, hier, name):
                    continue
                # an open class (abstract, a mixin, a base nobody builds) is completed by subclasses, maybe
                # outside the project (companion packages, users): those are the instances passed
                if self.subclass_provides(key, name, outside=self.open_class(key, hier)) \
                        or self.guarded(call, func, value.id, name, scan.guards):
                    continue
                yield self.report(call.func, key[1].rsplit(".", 1)[-1], name, hier.members, Confidence.INFERENCE,
                                  evidence=f"parameter '{value.id}' annotated {key[1].rsplit('.', 1)[-1]} (a subclass "
                                           f"instance may be passed); " + self.evidence(key, self.used(key, hier)),
                                  catalog=hier.catalog)
                failed.add(call.func)

    # ------------------------------------------------------------------ locals bound to framework wrappers
    def check_wrapped(self, functions: list) -> Iterator[Finding]:
        """``model = DDP(model)`` (a local bound once to a framework wrapper of :data:`WRAPPERS`),
        then ``model.m()`` after it where the wrapper's class has no ``m``: DDP forwards
        ``.module``, not arbitrary methods (its catalog entry lists what it provides)."""
        text = self.ctx.source.text
        if not _names_a_wrapper(text):
            return
        for func in functions:
            bound: dict[str, tuple[CatalogEntry, int]] = {}
            for node in _assigned_calls(func.body):  # statements only: most functions bind no call to a local
                entry = self.view.resolve(qualify(node.value.func, self.imports), self.file_no)  # type: ignore[attr-defined]
                if isinstance(entry, CatalogEntry) and entry.qualname in WRAPPERS and not entry.dynamic:
                    bound[node.targets[0].id] = (entry, node.end_lineno or node.lineno)  # type: ignore[attr-defined]
            if not bound:
                continue
            stores: dict[str, int] = {}
            for node in walk_function_body(func):
                if node.__class__ is ast.Name and node.ctx.__class__ is not ast.Load and node.id in bound:
                    stores[node.id] = stores.get(node.id, 0) + 1
            bound = {n: v for n, v in bound.items() if stores.get(n) == 1}
            if not bound:
                continue
            scan = self.top_scan(func)
            failed = _FailedBefore(self.ctx, func)  # one finding per path (see check_class)
            for call in sorted(scan.calls, key=lambda c: (c.lineno, c.col_offset)):
                value = call.func.value  # type: ignore[attr-defined]
                if value.__class__ is not ast.Name or value.id not in bound or failed.before(call.func):
                    continue
                entry, after = bound[value.id]
                name = call.func.attr  # type: ignore[attr-defined]
                if call.lineno <= after or name in entry.members or name.startswith("__") and name.endswith("__"):
                    continue
                if self.type_ignored(call.func) or self.guarded(call, func, value.id, name, scan.guards):
                    continue
                if self.view.stored_on_catalog(entry, name):
                    continue
                yield self.report(call.func, entry.qualname.rsplit(".", 1)[-1], name, entry.members, Confidence.HIGH,
                                  evidence=f"'{value.id}' is bound once to {entry.qualname} (catalog), which forwards "
                                           f"no attribute to the wrapped module", catalog=(entry.qualname,))
                failed.add(call.func)

    # ------------------------------------------------------------------ the accessor fix
    def accessor_fix(self, key: ClassKey, hier: Hierarchy, class_node: ast.ClassDef, name: str):
        """The safe fix inserting a transformers accessor pair after ``__init__``, or ``None``."""
        if name not in ACCESSOR_PAIRS:
            return None
        kind, getter, setter = ACCESSOR_PAIRS[name]
        init = next((m for m in _methods(class_node.body) if m.name == "__init__"
                     and not isinstance(m, ast.AsyncFunctionDef)), None)
        if init is None or init not in class_node.body:
            return None
        path = self.accessor_target(kind, init)
        if path is None:
            return None
        src = self.ctx.source
        nl = src.newline()
        def_line = src.line_text(init.lineno)
        indent = def_line[: len(def_line) - len(def_line.lstrip())]
        first = init.body[0]
        unit = "    "
        if first.lineno != init.lineno:
            body_line = src.line_text(first.lineno)
            body_indent = body_line[: len(body_line) - len(body_line.lstrip())]
            if body_indent.startswith(indent) and len(body_indent) > len(indent):
                unit = body_indent[len(indent):]
        get_doc, set_doc = ACCESSOR_DOCS[kind]
        chunks = []
        if getter not in hier.members:
            chunks.append(f"{indent}def {getter}(self):{nl}"
                          f'{indent}{unit}"""{get_doc}: ``self.{path}``."""{nl}'
                          f"{indent}{unit}return self.{path}{nl}")
        if setter not in hier.members:
            chunks.append(f"{indent}def {setter}(self, value):{nl}"
                          f'{indent}{unit}"""{set_doc}: ``self.{path}``."""{nl}'
                          f"{indent}{unit}self.{path} = value{nl}")
        text = "".join(nl + chunk for chunk in chunks)
        end = init.end_lineno
        if end < len(src.line_starts) and src.line_starts[end] <= len(src.text):
            position = (end + 1, 0)
            if end + 1 <= len(src.line_starts) and src.line_text(end + 1).strip():
                text += nl  # the next statement followed __init__ directly: one blank line before it
        else:  # __init__ ends the file without a final newline
            position = (end, len(src.line_text(end)))
            text = nl + text.rstrip("\r\n")
        added = [name for name in (getter, setter) if name not in hier.members]
        applicability = Applicability.UNSAFE if self.existence_observed(added) else Applicability.SAFE
        return self.ctx.make_fix([Edit(position, position, text)],
                                 f"add {' and '.join(c.split('(')[0].split()[-1] for c in chunks)} "
                                 f"returning self.{path}", applicability)

    def existence_observed(self, names: list[str]) -> bool:
        """True when code of this file may behave differently once methods ``names`` exist, beyond
        the calls that raise today (fix applicability): a string literal naming one (``hasattr(self,
        "set_input_embeddings")``, ``getattr(m, "get_input_embeddings", None)``), or a use of one
        inside a ``try`` whose handler may catch ``AttributeError`` or inside a ``with`` whose context
        manager sees the exception (anything but the grad-mode ones). Other files are not searched.
        """
        wanted = set(names)
        for node in self.ctx.nodes_of(ast.Constant):
            if isinstance(node.value, str) and node.value in wanted:
                return True
        for node in self.ctx.nodes_of(ast.Attribute):
            if node.attr in wanted and self._exception_observed(node):
                return True
        return False

    def _exception_observed(self, node: ast.AST) -> bool:
        """True when an ``AttributeError`` raised at ``node`` may be seen before leaving its function."""
        child = node
        for anc in self.ctx.ancestors(node):
            if isinstance(anc, SCOPES):
                return False
            if isinstance(anc, ast.Try) and any(child is stmt for stmt in anc.body):
                for handler in anc.handlers:
                    names = _handler_names(handler.type) if handler.type is not None else {"BaseException"}
                    if CATCHING & names or any(not _builtin_exception(n) for n in names):
                        return True
            if isinstance(anc, (ast.With, ast.AsyncWith)) and any(child is stmt for stmt in anc.body):
                if not all(isinstance(item.context_expr, ast.Call)
                           and (dotted_name(item.context_expr.func) or "").rsplit(".", 1)[-1] in TRANSPARENT_CMS
                           for item in anc.items):
                    return True
            child = anc
        return False

    def accessor_target(self, kind: str, init: ast.FunctionDef) -> str | None:
        """The attribute path an accessor of ``kind`` should return, found in ``__init__``."""
        args = init.args.posonlyargs + init.args.args
        if not args:
            return None
        receiver = args[0].arg
        own: dict[str, ast.AST | None] = {}
        for node in ast.walk(init):
            for target, value in _self_stores(node, receiver):
                own.setdefault(target, value)
        wanted = ACCESSOR_ATTRS[kind]
        for attr in wanted:
            if attr in own:
                return attr
        if kind == "decoder":
            return None
        for attr, value in own.items():
            if not isinstance(value, ast.Call):
                continue
            resolved = self.view.resolve(qualify(value.func, self.imports), self.file_no)
            if not type(resolved) is tuple:
                continue
            child = self.view.hierarchy(resolved)
            project_members = set(child.own)
            for anc in child.ancestors:
                anc_summary = self.view.summary(anc)
                if anc_summary is not None:
                    project_members |= anc_summary.members
            for name in wanted:
                if name in project_members:
                    return f"{attr}.{name}"
        return None


# ---------------------------------------------------------------------- ast helpers
def _methods(body: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Function definitions of a class body (also under if/try blocks of the body)."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt
        elif isinstance(stmt, (ast.If, ast.Try)):
            for sub in (stmt.body, stmt.orelse, getattr(stmt, "finalbody", []),
                        *[h.body for h in getattr(stmt, "handlers", [])]):
                yield from _methods(sub)


def _method_kind(method: ast.AST) -> str:
    """``static`` (``@staticmethod``), ``cls`` (``@classmethod``, ``__new__``, ``__init_subclass__``,
    ``__class_getitem__``) or ``self`` (anything else: the first parameter is the instance)."""
    names = {(dotted_name(d.func if isinstance(d, ast.Call) else d) or "").rsplit(".", 1)[-1]
             for d in method.decorator_list}
    if "staticmethod" in names:
        return "static"
    if "classmethod" in names or method.name in CLS_METHODS:
        return "cls"
    return "self"


_EXIT = object()
"""Stack marker of :class:`_Scan`: the walk leaves a nested function."""
_FUNCTION_KINDS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_STORE_KINDS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith})


class _ScanView:
    """The part of a :class:`_Scan` outside nested functions and lambdas: what ``_Scan(func, None)``
    finds (calls in the same order, rebound names, guards)."""

    __slots__ = ("calls", "rebound", "guards")

    def __init__(self, calls: list[ast.Call], rebound: set[str], guards: set[tuple[str, str]]):
        self.calls = calls
        self.rebound = rebound
        self.guards = guards


class _Scan:
    """One pass over a function: its method calls, rebound names, hasattr/getattr guards and the
    attributes it stores on ``receiver`` (nested functions that take ``receiver`` as a parameter
    and nested classes are not entered; with ``receiver`` None, no nested function or lambda is
    entered). ``top`` is the :class:`_ScanView` of the nodes outside nested functions and lambdas,
    i.e. the result of ``_Scan(func, None)``, so one pass serves both uses."""

    __slots__ = ("calls", "rebound", "guards", "stores", "top", "refs")

    def __init__(self, func: ast.AST, receiver: str | None):
        calls: list[ast.Call] = []
        refs: list[tuple[ast.Attribute, ast.AST]] = []
        self.refs = refs
        rebound: set[str] = set()
        guards: set[tuple[str, str]] = set()
        stores: list[tuple[str, ast.AST | None]] = []
        self.calls, self.rebound, self.guards, self.stores = calls, rebound, guards, stores
        if receiver is None:
            top = self.top = _ScanView(calls, rebound, guards)
        else:
            top = self.top = _ScanView([], set(), set())
        top_calls, top_rebound, top_guards = top.calls, top.rebound, top.guards
        bound: dict[str, int] = {}  # name -> how many times the function binds it
        aliases: dict[str, ast.Attribute] = {}  # name = receiver.m (a bound method, when called)
        called: set[str] = set()  # names called as functions
        plans = _CHILD_FIELDS
        depth = 0  # number of nested functions/lambdas around the node
        stack = child_nodes(func)
        pop = stack.pop
        push = stack.append
        extend = stack.extend
        while stack:
            node = pop()
            kind = node.__class__
            if kind is ast.Name:
                if node.ctx.__class__ is not ast.Load:
                    rebound.add(node.id)
                    bound[node.id] = bound.get(node.id, 0) + 1
                    if not depth and receiver is not None:
                        top_rebound.add(node.id)
                continue
            if kind is ast.Attribute or kind is ast.keyword:  # the most common inner nodes: one child each
                push(node.value)
                continue
            if kind is ast.Constant:
                continue
            if node is _EXIT:
                depth -= 1
                continue
            if kind is ast.Call:
                func_node = node.func
                if func_node.__class__ is ast.Attribute:
                    calls.append(node)
                    if not depth and receiver is not None:
                        top_calls.append(node)
                elif func_node.__class__ is ast.Name and aliases is not None and func_node.id not in (
                        "hasattr", "getattr", "isinstance", "issubclass", "type"):
                    called.add(func_node.id)
                elif func_node.__class__ is ast.Name and func_node.id in ("hasattr", "getattr") and len(node.args) >= 2:
                    const = node.args[1]
                    if isinstance(const, ast.Constant) and isinstance(const.value, str):
                        target = node.args[0]
                        if func_node.id == "getattr" and len(node.args) == 2 and not node.keywords:
                            # getattr(self, "m") without a default is an attribute read like self.m
                            ref = ast.Attribute(value=target, attr=const.value, ctx=ast.Load())
                            ref.lineno, ref.col_offset = node.lineno, node.col_offset
                            ref.end_lineno, ref.end_col_offset = node.end_lineno, node.end_col_offset
                            refs.append((ref, node))
                        else:
                            text = "super()" if _is_super(target) else dotted_name(target) or ""
                            guards.add((text, const.value))
                            if not depth and receiver is not None:
                                top_guards.add((text, const.value))
                elif func_node.__class__ is ast.Name and func_node.id in ("isinstance", "issubclass", "type") \
                        and node.args and node.args[0].__class__ is ast.Name:
                    guards.add((node.args[0].id, ""))  # the receiver's type is inspected (narrowed)
                    if not depth and receiver is not None:
                        top_guards.add((node.args[0].id, ""))
                if receiver is not None:
                    callee = func_node.attr if func_node.__class__ is ast.Attribute else \
                        func_node.id if func_node.__class__ is ast.Name else ""
                    at = CALLABLE_TAKERS.get(callee, -1)
                    if at != -1 or "hook" in callee and _HOOK_CALL.fullmatch(callee):
                        for arg in node.args if at is None or at == -1 else node.args[at:at + 1]:
                            if arg.__class__ is ast.Attribute:
                                refs.append((arg, arg))
                    for kw in node.keywords:
                        if kw.arg in CALLABLE_KEYWORDS and kw.value.__class__ is ast.Attribute:
                            refs.append((kw.value, kw.value))
                if receiver is not None and (node.args or node.keywords) and (
                        func_node.attr in _STORING_METHODS or func_node.attr == "setattr"
                        if func_node.__class__ is ast.Attribute else func_node.__class__ is ast.Name
                        and func_node.id == "setattr"):
                    stores.extend(_self_stores(node, receiver))
            elif kind is ast.ClassDef:
                continue
            elif kind in _FUNCTION_KINDS:
                if receiver is None:
                    continue
                a = node.args
                params = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
                params |= {a.vararg.arg} if a.vararg else set()
                params |= {a.kwarg.arg} if a.kwarg else set()
                if receiver in params:
                    continue
                depth += 1
                push(_EXIT)
            elif kind is ast.Global or kind is ast.Nonlocal:
                rebound.update(node.names)
                if not depth and receiver is not None:
                    top_rebound.update(node.names)
            elif receiver is not None and kind in _STORE_KINDS and not (
                    kind is ast.Assign and len(node.targets) == 1 and node.targets[0].__class__ is ast.Name):
                stores.extend(_self_stores(node, receiver))  # (``x = ...``, the common store, stores no attribute)
            elif receiver is not None and kind is ast.Assign and node.value.__class__ is ast.Attribute \
                    and node.value.value.__class__ is ast.Name and node.value.value.id == receiver:
                aliases[node.targets[0].id] = node.value  # step = self.step: a bound method, when called
            for name in plans[kind]:
                value = getattr(node, name, None)
                if value is None:
                    continue
                if value.__class__ is list:
                    extend([v for v in value if v is not None] if name in _HOLEY else value)
                else:
                    push(value)

        for name, attr in aliases.items():  # a method reached through a bound-method alias
            if name in called and bound.get(name) == 1:
                refs.append((attr, attr))


def _uses(scan: _Scan) -> Iterator[tuple[ast.Attribute, ast.AST]]:
    """``(attribute node, anchor)`` of each use of an attribute as a method in a scan: the calls
    (anchor: the call), then the references (``partial(self.m)``, ``register_forward_hook(self.m)``,
    ``getattr(self, "m")``; anchor: the node in the tree, for the guard and ignore checks)."""
    for call in scan.calls:
        yield call.func, call  # type: ignore[misc]
    yield from scan.refs


_CONDITIONAL = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_CATCHES_ATTRIBUTE_ERROR = frozenset({"AttributeError", "Exception", "BaseException"})


def _failing_statement(ctx, use: ast.AST, method: ast.AST) -> ast.stmt | None:
    """The innermost statement that evaluates ``use`` whenever it runs (as its expression, or as the
    header of a compound statement: an ``if``/``while`` test, a ``for`` iterable, a ``with`` item), or
    None when ``use`` sits in a branch of its own statement (a conditional expression's arms, a
    short-circuit operand after the first, a chained comparison's operands after the second, a
    comprehension, a lambda, an ``except`` clause's type, an ``assert``'s message, a local
    annotation) or in the method's header."""
    child = use
    for anc in ctx.ancestors(use):
        kind = anc.__class__
        if kind is ast.IfExp and child is not anc.test or kind is ast.BoolOp and child is not anc.values[0] \
                or kind in _CONDITIONAL or kind is ast.ExceptHandler \
                or kind is ast.Compare and any(child is c for c in anc.comparators[1:]) \
                or kind is ast.Assert and child is anc.msg or kind is ast.AnnAssign and child is anc.annotation:
            # conditional: a handler's type (only when something raised), a chained comparison's later
            # operands, an assert's message, a local variable's annotation (never evaluated)
            return None
        if isinstance(anc, ast.stmt):
            return None if anc is method else anc
        child = anc
    return None


_KEEPS_EXCEPTIONS = frozenset({
    "open", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "autocast", "nullcontext",
    "record_function", "profile", "device", "stream", "Lock", "RLock", "TemporaryDirectory", "sdpa_kernel",
})
"""Context managers (last name of the callee) that never swallow an exception of their body
(``__exit__`` returns a false value): a failing use inside them still leaves the statement."""


def _keeps_exceptions(context: ast.AST) -> bool:
    """True for a ``with`` item known to let its body's exceptions through (:data:`_KEEPS_EXCEPTIONS`,
    called or not); any other context manager may swallow them (``contextlib.suppress``)."""
    name = dotted_name(context.func if isinstance(context, ast.Call) else context) or ""
    return name.rsplit(".", 1)[-1] in _KEEPS_EXCEPTIONS


def _may_catch_attribute_error(handler: ast.ExceptHandler) -> bool:
    """True unless the handler names only built-in exceptions that are not AttributeError's bases
    (``except ValueError``, ``except (KeyError, TypeError)``); a bare ``except`` or any other name may."""
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(not isinstance(k, ast.Name) or k.id in _CATCHES_ATTRIBUTE_ERROR or
               not isinstance(getattr(builtins, k.id, None), type) for k in kinds)


class _FailedBefore:
    """Does a reported use of a member always run, and raise, before a later use? ``uses`` are the
    reported uses of one missing member on one receiver in ``method``. A statement *never falls
    through* when it evaluates one of them unconditionally (it raises AttributeError), or ends in
    ``return``/``raise``/``break``/``continue``, or every branch of it never falls through (``if``
    with ``else``, ``with``, ``try`` whose handlers that may catch AttributeError never fall through
    either). A later use runs after a failure on every path when such a statement precedes it in a
    block on its way up to ``method``, when a use is in its own statement or in the header of a
    compound statement holding it, or when it is in a ``try``'s ``else`` whose body never falls
    through. Loops' bodies may run zero times, so they never count for what follows them."""

    __slots__ = ("ctx", "method", "failing", "memo")

    def __init__(self, ctx, method: ast.AST) -> None:
        self.ctx = ctx
        self.method = method
        self.failing: set[int] = set()  # ids of statements that evaluate a reported use unconditionally
        self.memo: dict[int, bool] = {}

    def add(self, use: ast.AST) -> None:
        """Record a reported use."""
        statement = _failing_statement(self.ctx, use, self.method)
        if statement is not None:
            self.failing.add(id(statement))
            self.memo.clear()

    def before(self, later: ast.AST) -> bool:
        """True when every path through the method to ``later`` has raised at a reported use first."""
        if not self.failing:
            return False
        node: ast.AST = later
        for anc in self.ctx.ancestors(later):
            if id(anc) in self.failing and isinstance(anc, ast.stmt):
                return True  # its own statement, or the header of a compound statement holding it
            if anc is self.method:
                break
        node = later
        while True:
            parent = self.ctx.parent(node)
            if parent is None or node is self.method:
                return False
            block = next((b for f in ("body", "orelse", "finalbody") for b in [getattr(parent, f, None)]
                          if b.__class__ is list and any(n is node for n in b)), None)
            if block is not None:
                for stmt in block:
                    if stmt is node:
                        break
                    if self.never_falls_through(stmt):
                        return True
                if parent.__class__ in (ast.Try, ast.TryStar) and block is parent.orelse \
                        and self.never_falls_through_block(parent.body):
                    return True  # a try's else runs only when its body completed
            if parent is self.method:
                return False
            node = parent

    def never_falls_through_block(self, block: list, exits: tuple = EXITS) -> bool:
        return any(self.never_falls_through(stmt, exits) for stmt in block)

    def always_raises(self, block: list) -> bool:
        """True when running ``block`` (a method's body) always raises: it never falls through, it
        holds no ``return`` at all (an early ``return``, or one in a ``finally``, completes the call)
        and ``raise`` is its only exit."""
        # each statement's own nodes (a `def` at the top of the block is entered: as before)
        if any(node.__class__ is ast.Return for stmt in block for node in (stmt, *walk_function_body(stmt))):
            return False
        return self.never_falls_through_block(block, (ast.Raise,))

    def never_falls_through(self, stmt: ast.stmt, exits: tuple = EXITS) -> bool:
        """True when ``stmt`` never completes normally (see the class); ``exits``: the statements
        that leave it."""
        key = (id(stmt), exits is EXITS)
        found = self.memo.get(key)
        if found is None:
            self.memo[key] = found = self._never_falls_through(stmt, exits)
        return found

    def _never_falls_through(self, stmt: ast.stmt, exits: tuple) -> bool:
        if id(stmt) in self.failing or isinstance(stmt, exits):
            return True
        kind = stmt.__class__
        if kind is ast.If:
            return self.never_falls_through_block(stmt.body, exits) and \
                self.never_falls_through_block(stmt.orelse, exits)
        if kind in (ast.With, ast.AsyncWith):  # a context manager may swallow the error
            return all(_keeps_exceptions(item.context_expr) for item in stmt.items) and \
                self.never_falls_through_block(stmt.body, exits)
        if kind in (ast.Try, ast.TryStar):
            if self.never_falls_through_block(stmt.finalbody, exits):
                return True
            if not self.never_falls_through_block(stmt.body + stmt.orelse, exits):
                return False
            # a handler that cannot catch AttributeError runs only for another exception, raised
            # before the failing use unless that use is in the body's first statement
            first_fails = bool(stmt.body) and id(stmt.body[0]) in self.failing
            return all(self.never_falls_through_block(h.body, exits) or
                       first_fails and not _may_catch_attribute_error(h) for h in stmt.handlers)
        return False


def _read_fails_first(ctx, reads: list[ast.Attribute], use: ast.AST, method: ast.AST) -> bool:
    """True when one of ``reads`` (attribute reads that always raise, see
    :meth:`_State.missing_reads`) runs before ``use`` on every path through ``method`` (see
    :class:`_FailedBefore`); a read in the statement of ``use`` counts only when it starts before it
    (``self.m(self.missing)`` looks ``self.m`` up first)."""
    failed = _FailedBefore(ctx, method)
    statement = next((a for a in ctx.ancestors(use) if isinstance(a, ast.stmt)), None)
    position = (use.lineno, use.col_offset)
    for read in reads:
        if read is use or (read.lineno, read.col_offset) >= position and \
                next((a for a in ctx.ancestors(read) if isinstance(a, ast.stmt)), None) is statement:
            continue
        failed.add(read)
    return failed.before(use)


def _first_failing_reads(ctx, reads: list[ast.Attribute], name: str, use: ast.AST, method: ast.AST,
                         failed: "_FailedBefore") -> list[ast.Attribute]:
    """Where a use of ``name`` that never runs fails instead: the reads of ``name`` among ``reads``
    (reads of members the instance lacks) when they alone raise before ``use`` on every path, each
    of them that its statement evaluates whenever it runs, outside nested functions, lambdas and
    classes, with no reported use (``failed``) nor other failing read running before it on every
    path (that one fails first: ``w = self.a.weight; p = self.b.weight; self.b(...)`` fails at
    ``self.a``). Empty when the use is unreached because of something else."""
    same = [r for r in reads if r.attr == name and (r.lineno, r.col_offset) < (use.lineno, use.col_offset)
            and _failing_statement(ctx, r, method) is not None and not _in_nested_scope(ctx, r, method)]
    if not same or not _read_fails_first(ctx, same, use, method):
        return []
    return [r for r in same if not failed.before(r)
            and not _read_fails_first(ctx, [o for o in reads if o is not r], r, method)]


def _in_nested_scope(ctx, node: ast.AST, method: ast.AST) -> bool:
    """True when ``node`` sits in a function, lambda or class nested in ``method``."""
    for anc in ctx.ancestors(node):
        if anc is method:
            return False
        if isinstance(anc, SCOPES):
            return True
    return False


def _is_super(node: ast.AST, class_name: str | None = None, receiver: str | None = None) -> bool:
    """``super()`` or ``super(ThisClass, receiver)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"):
        return False
    if not node.args and not node.keywords:
        return True
    if class_name is None or len(node.args) != 2:
        return False
    first, second = node.args
    return isinstance(first, ast.Name) and first.id == class_name and \
        isinstance(second, ast.Name) and second.id == receiver


def _required_flags(ctx, anchor: ast.AST, method: ast.AST, receiver: str) -> list[tuple]:
    """What must hold of attributes of ``receiver`` for ``anchor`` to run, as ``(attribute,
    predicate, default)`` (see :func:`_flags_of`): the conditions of the ``if``/``while``/conditional
    expression branches and ``and``/``or`` operands around it, up to ``method`` (``if not self.flag:
    ... else: <anchor>`` counts), and early exits before it in an enclosing block (``if not
    self.flag: return``, or ``raise``/``continue``/``break``, with no ``else``)."""
    flags: list[tuple] = []
    child: ast.AST = anchor
    for anc in ctx.ancestors(anchor):
        kind = anc.__class__
        if isinstance(child, ast.stmt):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(anc, field, None)
                if block.__class__ is list and any(child is stmt for stmt in block):
                    for stmt in block:
                        if stmt is child:
                            break
                        if stmt.__class__ is ast.If and not stmt.orelse and stmt.body and \
                                stmt.body[-1].__class__ in EXITS:
                            _flags_of(stmt.test, False, receiver, flags)
                    break
        if kind is ast.If or kind is ast.While:
            if any(child is stmt for stmt in anc.body):
                _flags_of(anc.test, True, receiver, flags)
            elif kind is ast.If and any(child is stmt for stmt in anc.orelse):
                _flags_of(anc.test, False, receiver, flags)
        elif kind is ast.IfExp:
            if child is anc.body:
                _flags_of(anc.test, True, receiver, flags)
            elif child is anc.orelse:
                _flags_of(anc.test, False, receiver, flags)
        elif kind is ast.BoolOp and child in anc.values:
            for earlier in anc.values[: anc.values.index(child)]:
                _flags_of(earlier, anc.op.__class__ is ast.And, receiver, flags)
        if anc is method:
            break
        child = anc
    return flags




def _passes(predicate: tuple, value: str) -> bool:
    """Whether the literal constant ``value`` (its repr) meets ``predicate`` (see :func:`_flags_of`)."""
    kind = predicate[0]
    if kind == "truthy":
        try:
            return bool(ast.literal_eval(value))
        except (ValueError, SyntaxError):
            return True
    if kind == "in":
        return value in predicate[1]
    if kind in ("contains", "startswith", "endswith"):  # a test of a class name (a str constant)
        text = ast.literal_eval(value)
        return isinstance(text, str) and any(
            (p in text) if kind == "contains" else getattr(text, kind)(p) for p in predicate[1])
    return value != "None"  # "not None"


def _state_read(node: ast.AST, receiver: str) -> tuple[str, None] | None:
    """``(attribute, None)`` when ``node`` reads an attribute of the instance ``receiver``:
    ``receiver.x`` or ``receiver.__class__.x``; ``"x()"`` for what a call ``receiver.x()`` returns;
    ``"__class__.__name__"`` for the name of the instance's class (``None``: no default, the read
    raises when nothing defines it). ``getattr(receiver, ...)`` and ``type(receiver)`` tests already guard every use
    under them (:func:`_test_inspects`)."""
    suffix = ""
    if node.__class__ is ast.Call and not node.args and not node.keywords:
        node, suffix = node.func, "()"  # receiver.m(): what the method returns (a constant: a tag)
    if node.__class__ is not ast.Attribute:
        return None
    value = node.value
    if value.__class__ is ast.Name and value.id == receiver:
        if receiver == "cls" and node.attr == "__name__" and not suffix:
            return "__class__.__name__", None  # a class method's class
        return node.attr + suffix, None
    if value.__class__ is ast.Attribute and value.attr == "__class__" and value.value.__class__ is ast.Name \
            and value.value.id == receiver:
        return ("__class__.__name__" if node.attr == "__name__" and not suffix else node.attr + suffix), None
    return None


def _flags_of(test: ast.AST, truth: bool, receiver: str, out: list) -> None:
    """Append to ``out`` what ``test`` being ``truth`` requires of ``receiver``'s attributes, as
    ``(attribute, predicate, default)`` (``default``: see :func:`_state_read`): predicate
    ``("truthy",)`` for ``self.flag`` true, ``("in", values)`` for ``self.tag`` equal to one of
    ``values`` (``==``/``in`` true, ``!=``/``not in`` false; truthy literal constants only, as reprs),
    ``("not None",)`` for ``self.x is not None`` true (``is None`` false); attribute ``"__class__"``
    with ``("class", names, positive)`` for ``self.__class__ is C`` / ``== C`` / ``in (C, D)``
    (``positive`` False: the class must not be one of them); attribute ``"__class__.__name__"`` also
    with ``("contains", (s,))`` for ``s in self.__class__.__name__`` and ``("startswith", prefixes)``
    / ``("endswith", suffixes)`` for those calls on it (``cls.__name__`` in a class method)."""
    kind = test.__class__
    if kind is ast.UnaryOp and test.op.__class__ is ast.Not:
        _flags_of(test.operand, not truth, receiver, out)
    elif kind is ast.BoolOp:
        if (test.op.__class__ is ast.And) == truth:  # a and b true / a or b false: each operand alike
            for value in test.values:
                _flags_of(value, truth, receiver, out)
    elif kind is ast.Compare and len(test.ops) == 1:
        op = test.ops[0].__class__
        left, right = test.left, test.comparators[0]
        if left.__class__ is ast.Attribute and left.attr == "__class__" and left.value.__class__ is ast.Name \
                and left.value.id == receiver:  # the instance's class: is/==/in a named class or not
            items = right.elts if right.__class__ in (ast.Tuple, ast.List, ast.Set) else [right]
            names = [dotted_name(i) for i in items]
            if op in (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In, ast.NotIn) and all(names):
                out.append(("__class__", ("class", frozenset(names), truth == (op in (ast.Is, ast.Eq, ast.In))),
                            None))
            return
        if op in (ast.Is, ast.IsNot):
            if right.__class__ is ast.Constant and right.value is None and truth == (op is ast.IsNot):
                read = _state_read(left, receiver)
                if read is not None:
                    out.append((read[0], ("not None",), read[1]))
            return
        if op not in (ast.Eq, ast.NotEq, ast.In, ast.NotIn) or truth != (op in (ast.Eq, ast.In)):
            return
        if op in (ast.In, ast.NotIn) and left.__class__ is ast.Constant and isinstance(left.value, str) \
                and left.value and _state_read(right, receiver) == ("__class__.__name__", None):
            out.append(("__class__.__name__", ("contains", (left.value,)), None))  # "Qwen" in the class name
            return
        read = _state_read(left, receiver)
        if read is None and op in (ast.Eq, ast.NotEq):
            left, right = right, left
            read = _state_read(left, receiver)
        if read is None:
            return
        items = right.elts if op in (ast.In, ast.NotIn) and right.__class__ in (ast.Tuple, ast.List, ast.Set) \
            else [right] if op in (ast.Eq, ast.NotEq) else None
        if not items or any(i.__class__ is not ast.Constant or not isinstance(i.value, (str, int, float, bool))
                            or not i.value for i in items):
            return
        out.append((read[0], ("in", frozenset(repr(i.value) for i in items)), read[1]))
    elif truth and kind is ast.Call and test.func.__class__ is ast.Attribute and \
            test.func.attr in ("startswith", "endswith") and len(test.args) == 1 and not test.keywords and \
            _state_read(test.func.value, receiver) == ("__class__.__name__", None):
        items = test.args[0].elts if test.args[0].__class__ is ast.Tuple else [test.args[0]]
        if items and all(i.__class__ is ast.Constant and isinstance(i.value, str) for i in items):
            out.append(("__class__.__name__", (test.func.attr, tuple(i.value for i in items)), None))
    elif truth:
        read = _state_read(test, receiver)
        if read is not None:
            out.append((read[0], ("truthy",), read[1]))


ARGUMENT_PRESERVING = frozenset({
    "staticmethod", "classmethod", "abstractmethod", "property", "cached_property", "overload", "override",
    "final", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "lru_cache", "cache", "wraps",
    "contextmanager", "asynccontextmanager", "compile", "script", "ignore", "unused", "export", "jit",
    "deprecated", "wrap", "register", "register_module", "setter", "getter", "deleter",
})
"""Decorators (last name) that call the function with its caller's arguments (or register it):
a parameter's annotation still says what it receives. Any other decorator (a framework's
``@hydra_runner``, ``@click.command``) may call it with objects of its own choosing (an OmegaConf
``DictConfig`` where the annotation names a dataclass schema)."""


def _passes_arguments(decorator: ast.AST) -> bool:
    """True for a decorator of :data:`ARGUMENT_PRESERVING` (called or not)."""
    name = dotted_name(decorator.func if isinstance(decorator, ast.Call) else decorator) or ""
    last = name.rsplit(".", 1)[-1]
    return last in ARGUMENT_PRESERVING or last.startswith("register")


def _handler_names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Tuple):
        return {n for elt in node.elts for n in _handler_names(elt)}
    name = dotted_name(node)
    return {name.rsplit(".", 1)[-1]} if name else set()


def _test_inspects(test: ast.AST, receiver: str, name: str = "") -> bool:
    """True when ``test`` calls isinstance/issubclass/type/hasattr/getattr/callable on the receiver
    (``self.child`` for ``self.child.m()``), on an object it is an attribute of (``self`` guards
    ``self.child``), or on the used attribute itself (``isinstance(self.norm, LayerNorm)`` before
    ``self.norm(x)``: the test reads it first); a test of ``self.child`` does not guard a call of
    another name on ``self``."""
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in GUARD_CALLS \
                and node.args:
            arg = "self" if _is_super(node.args[0]) else dotted_name(node.args[0]) or ""
            if arg and (receiver == arg or receiver.startswith(arg + ".") or arg == f"{receiver}.{name}"):
                return True
    return False


def _class_body_names(class_node: ast.ClassDef) -> set[str]:
    """Names bound directly in a class body (defs, nested classes, class attributes)."""
    names: set[str] = set()
    for stmt in walk_nodes(ast.Module(body=list(class_node.body), type_ignores=[])):
        kind = stmt.__class__
        if kind is ast.Name:
            if stmt.ctx.__class__ is ast.Store:
                names.add(stmt.id)
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.ClassDef:
            names.add(stmt.name)
    return names


_STORING_METHODS = frozenset({"add_module", "register_module", "register_buffer", "register_parameter"})
"""Methods of a module that store an attribute named by their first argument."""


def _self_stores(node: ast.AST, receiver: str) -> list[tuple[str, ast.AST | None]]:
    """``(attr, value)`` pairs a statement/call stores on ``receiver`` (value None when unknown)."""
    out: list[tuple[str, ast.AST | None]] = []

    def targets(target: ast.AST, value: ast.AST | None) -> None:
        _store_targets(target, value, receiver, out)

    if isinstance(node, ast.Assign):
        for target in node.targets:
            targets(target, node.value if len(node.targets) == 1 else None)
    elif isinstance(node, ast.AnnAssign):
        targets(node.target, node.value)
    elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)):
        targets(node.target, None)
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        for item in node.items:
            if item.optional_vars is not None:
                targets(item.optional_vars, None)
    elif isinstance(node, ast.NamedExpr):
        pass
    elif isinstance(node, ast.Call):
        func = node.func
        if is_setattr(func) and len(node.args) >= 2 and \
                isinstance(node.args[0], ast.Name) and node.args[0].id == receiver:
            attr = node.args[1]
            out.append((attr.value if isinstance(attr, ast.Constant) and isinstance(attr.value, str) else "?", None))
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == receiver and \
                func.attr in _STORING_METHODS:
            attr = assigned_name_arg(node)
            if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                out.append((attr.value, None))
    return out


def _assigned_calls(body: list[ast.stmt]) -> list[ast.Assign]:
    """The ``name = <call>`` statements of a function body, nested blocks included, nested functions
    and classes not: what :meth:`_State.check_wrapped` looks for, found among the statements alone
    (a walk of every expression node of every function cost 15 ms of a check of torch/distributed)."""
    found: list[ast.Assign] = []
    stack = [body]
    while stack:
        for stmt in stack.pop():
            kind = stmt.__class__
            if kind is ast.Assign:
                if len(stmt.targets) == 1 and stmt.targets[0].__class__ is ast.Name and stmt.value.__class__ is ast.Call:
                    found.append(stmt)
            elif kind in _COMPOUND:
                stack.extend(child_bodies(stmt))
    return found


_COMPOUND = frozenset(filter(None, (getattr(ast, name, None) for name in (
    "If", "For", "AsyncFor", "While", "With", "AsyncWith", "Try", "TryStar", "Match"))))
"""The statements holding statements, nested functions and classes left out (their own scopes)."""


def _store_targets(target: ast.AST, value: ast.AST | None, receiver: str, out: list) -> None:
    """Append to ``out`` the ``(attr, value)`` of each ``receiver.attr`` in the assignment target
    ``target`` (unpacked targets get ``None``). A module function, not a closure that calls itself:
    such a closure is a reference cycle, left for the cyclic collector once per statement scanned."""
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == receiver:
        out.append((target.attr, value))
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _store_targets(elt, None, receiver, out)
    elif isinstance(target, ast.Starred):
        _store_targets(target.value, None, receiver, out)



# ---------------------------------------------------------------------- history hooks
def _defines(cls: ast.ClassDef, name: str) -> bool:
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
            return True
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return True
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            return True
    return False


def _pin_repair(member: tuple[str, str] | None, before: ast.Module, after: ast.Module) -> Repair | None:
    """A called method (re)added to its class: given ``member``, the ``(class name, method)`` of the
    finding (:meth:`UndefinedMethodCall.missing_member`), a class of that name that lacks the method
    before the change and defines it after (located as the class: the pin's key is the method)."""
    if member is None:
        return None
    class_name, method = member
    new_classes = {q: n for q, n in qualified_scopes(after).items()
                   if isinstance(n, ast.ClassDef) and n.name == class_name and _defines(n, method)}
    old = qualified_scopes(before)
    for qualname, cls in sorted(new_classes.items()):
        old_cls = old.get(qualname)
        if isinstance(old_cls, ast.ClassDef) and not _defines(old_cls, method):
            added = next(s for s in cls.body if getattr(s, "name", None) == method)
            return Repair("method", qualname, {"method": method}, ast.unparse(added).splitlines()[0],
                          f"class {class_name} without {method}", key=method)
    return None


def _repair_state(scope: ast.AST, detail: dict) -> RepairState:
    if not isinstance(scope, ast.ClassDef):
        return RepairState(REPAIR_UNKNOWN, scope, "the location is no longer a class")
    if _defines(scope, detail["method"]):
        return RepairState(REPAIRED)
    return RepairState(REVERTED, scope, f"class '{scope.name}' no longer defines '{detail['method']}'")


__all__ = ["UndefinedMethodCall", "CatalogEntry"]
