"""# E9502 shard-gated-reset

## What it does
Finds a call to a step that must run at every shard degree that only runs when a **shard-degree
predicate** holds, so that at shard degree 1 (world size 1, `dp_shard == 1`) it is silently skipped.

A must-run step is

* a call of a name in the option `unconditional-calls` (default `reset_sharded_param`,
  `fully_shard` and `register_fsdp_forward_method`; the callee's last name component is matched, so
  `p.reset_sharded_param()`, `fully_shard(m)` and `torch.distributed.fsdp.fully_shard(m)` all count);
* a call of a **project function that always calls a must-run step** (on every path that returns
  normally: `for` bodies count, `if` branches only when both make the call, nothing after a possible
  early exit, no `while` body, `except` handler, comprehension or lambda; a path that raises is no
  normal return, so a helper that refuses invalid input first, `if mesh is None: raise
  ValueError(...)`, and otherwise always ends in the step is must-run, unless a `try` or `with` of the
  helper may catch that raise), transitively and across
  the files of the project: `def apply_fsdp(m): ...; fully_shard(m)` makes `if ws > 1:
  apply_fsdp(m)` a finding, reported as `'apply_fsdp() -> fully_shard()'`. Every `def` of that name
  must qualify (the file's own `def`s when it has one, else every other file's), except abstract
  placeholders (`@abstractmethod`, or a body that only raises `NotImplementedError`) when the name
  has other definitions: a base class's `apply_fsdp` that raises leaves the decision to its overrides,
  also when the base class is in the file being checked and the overrides are elsewhere.

Why `register_fsdp_forward_method`: FSDP2 runs its all-gather/reshard hooks around `forward` only;
a model whose other method (`generate`) runs the forward pass needs
`register_fsdp_forward_method(model, "generate")` wherever `fully_shard` ran, and `fully_shard`
runs at every shard degree. PyTorch makes it safe to call unconditionally: "If `module` is not an
FSDPModule, then this is a no-op ... to allow including both when using/not using FSDP"
(`torch/distributed/fsdp/_fully_shard/_fully_shard.py`). FSDP2 itself handles world size 1
(`FSDPParamGroup.unshard`/`wait_for_unshard` have `world_size == 1` paths without collectives), so
sharding at degree 1 is a supported configuration, not a corner case. Steps considered and **not**
added: `init_process_group` (`fully_shard` without a mesh initializes the default group itself, and
a missing group fails loudly, not silently: `_init_default_mesh` in `_fsdp_init.py`);
`to_empty`/`init_weights` (meta-device materialization must run whenever meta init ran, which a
gate may legitimately mirror); `set_requires_gradient_sync`, `set_reshard_after_backward`,
prefetching (performance knobs: at degree 1 the reduce-scatter is the identity); DCP's
`get_/set_model_state_dict` (work for sharded and plain modules, and the alternative branch usually
loads differently on purpose). Add names to `unconditional-calls` if your project has more.

**Wrap steps and completion steps.** The must-run steps are of two kinds. A *completion* step
(`reset_sharded_param`, `register_fsdp_forward_method`) must run because a wrap *did* happen:
skipping it leaves a sharded module half set up (the seed: parameters still on the meta device),
so it is reported whenever it is gated, whatever else the code does. A *wrap* step (option
`wrap-calls`, default `fully_shard`) creates the sharded module; skipping it as a whole at degree 1
leaves a plain module, which is a bug only when nothing handles that plain module. So a gated wrap
(or a must-run helper whose step is a wrap, `apply_fsdp() -> fully_shard`) is **not** reported when
the code handles the unwrapped degree-1 path explicitly:

* (a) it is one branch of a dispatch: an `if` or ternary between the call and the gate (the gate's
  own `if` included; for an early-exit guard, its exiting branch) has another branch that does
  something (`elif strategy == "ddp": DistributedDataParallel(m)`, `else: m.to(device)`, an
  `assert`, a `raise`); `pass`, `...`, a docstring, `continue`/`break` and a `return` of nothing,
  a constant or a name do nothing (`else: return m` skips the wrap just as no `else` does); a
  ternary's other branch does something unless it is a constant or a name
  (`fully_shard(m) if ws > 1 else m` stays reported);
* (b) the same function (not a nested one) tests the same degree quantity again (the compared
  operand, gate name, property or attribute, a local alias standing for its value) in another `if`
  whose branch taken at degree 1 does something: `if world_size > 1: assert isinstance(m, FSDPModule)`
  / `else: assert ...`, or `if world_size == 1: m.cuda()`; the author branches on the degree in
  more than one place;
* (c) another method of the same class (same class body) dispatches on the same degree quantity:
  an `if` whose branch taken at degree > 1 uses the sharded module without wrapping again (gathers
  a full state dict, saves, asserts the FSDP state) and whose degree-1 path does something else (its
  `else`, or the statements after a degree > 1 branch that always exits): `if config.dp_size > 1:
  return gather_full_state_dict(model)` / `return state_dict`. The class skips the wrap at degree 1
  by design and handles the plain module where it uses it. A re-test whose degree > 1 branch runs a
  must-run step (wraps again, registers a forward method) is another gated step; a degree-1 branch alone (`if dp_size == 1: log(...)`) or a use
  without a degree-1 path handles nothing (`wrap_class_dispatch`, `wrap_class_dispatch_ok`).

Otherwise the wrap stays reported: `if world_size > 1: fully_shard(m)` with nothing for degree 1
(no alternative branch, no re-test, or a re-test without a degree-1 branch such as
`if world_size > 1: dist.init_process_group()`), followed by code that treats `m` as wrapped or by
nothing. Why: on a panel of real training code (Automodel) every gated `fully_shard` was of the
handled kind, the wrap deliberately skipped at world size 1: a recipe that dispatches on the
strategy only with several ranks (`if world_size > 1:` then `if strategy == "fsdp2": fully_shard`
/ `elif strategy == "ddp": DistributedDataParallel`, degree 1 keeping a plain module) and a
functional test that shards only with several processes and asserts the single-process contract
later (`if world_size > 1: assert isinstance(..., FSDPModule)` / `else: assert ... is None`). Nothing
was left half-done in either; the seed's bug is a completion step skipped after a wrap.

**The module's wrapped state.** A step reached only when its module is already wrapped runs exactly
where a wrap ran, at every degree: an enclosing `if`/ternary test or an early-exit guard of the same
function requires `isinstance(obj, C)`, with `C` a class of option `wrapped-classes` (default
`FSDPModule`, `FullyShardedDataParallel`; an import alias such as `FSDP` counts) and `obj` the step's
module (its first positional argument, or the receiver of the call, by source text). Such a step is
not reported, whatever degree gate is around it: the wrap itself happens elsewhere (a library wraps
the model whenever the run is sharded) and the step follows it, which is the invariant (lerobot:
`if not dims.is_sharded: return` ... `if isinstance(policy, FSDPModule): register_fsdp_forward_method(policy, m)`).
The test must be required: a negated one (`not isinstance(m, FSDPModule)`: not wrapped yet), one in
an `or`, one of another object or class, or one after the step does not count (`wrapped_state`,
`wrapped_state_ok`).

A shard-degree predicate is

* a gate name (option `shard-degree-gates`, default `is_shard`) used as a bare name or an attribute
  (`is_shard`, `self.is_shard`); a *method call* such as `placement.is_shard()` is a placement query,
  not a gate;
* a comparison against 1 of a shard-degree quantity (option `shard-degree-quantities`): a name,
  attribute or getter call whose last name matches (`self.world_size > 1`,
  `dist.get_world_size() > 1`, `1 < ws`, `shard_degree != 1`, `dp_shard >= 2`, `dp_size > 1`), the
  size of a data-parallel device mesh (`dp_mesh.size() > 1`, `dp_shard_mesh`, `fsdp_mesh`, and a
  mesh subscript `mesh["dp_shard"].size()`, read as `dp_shard_mesh.size`), or the same negated
  (`ws == 1`, `ws <= 1`, `ws < 2`) with the call in the branch where it is false;
* an `or` of degree predicates of which at least one is a shard-degree predicate and the others
  compare other parallel degrees with 1 (option `parallel-degree-quantities`: `cp`, `tp`, `pp`,
  `ep`, `dp_replicate` degrees and meshes): `dp_shard > 1 or cp > 1` is still false at world size 1,
  where every degree is 1;
* a local alias of one (`shard = self.is_shard`, `need = ws > 1`, assigned exactly once in the
  function, before the test), or a walrus `(shard := self.is_shard)`, also as the compared
  operand (`(ws := dist.get_world_size()) > 1`; no automatic fix there: the test binds a name);
* a `@property` or function of the project whose every `return` is one
  (`@property def dp_shard_enabled(self): return self.dp_shard > 1`, then
  `if dims.dp_shard_enabled:`; `def is_distributed(ws): return ws > 1`), defined in the same file
  or **in another file** of the project (the file's own definitions take precedence; every
  definition of that name must qualify; properties may delegate to properties:
  `return self.dp_shard_enabled or self.cp_enabled`);
* an **instance attribute** every store of which assigns one (`self.use_fsdp = self.world_size > 1`
  in `__init__`, then `if self.use_fsdp:`), in the same file or in another file (a base class); a
  single store of anything else (`self.use_fsdp = cfg.fsdp`, `self.use_fsdp = False`) anywhere in
  the project (the file's own stores take precedence) makes it a flag, not a predicate.

The class, as refactorings of the seed `if self.is_shard and not self._reset_sharded_params:
reset...`, each with a flagged fixture and a clean twin under `tests/fixtures/shard-gated-reset/`:

1. the gate moved into a `@property` or function of the same file (`property_gate`,
   `function_gate`) or of **another file** (`cross_file_gate_project`);
2. the gate stored on the instance (`instance_attribute_gate`) or bound to a local
   (`local_alias`, `walrus_gate` codemod);
3. the gate negated into an early exit (`early_exit`), an `else` branch (`negated_else`), an
   `elif` chain (`elif_chain`);
4. the gate spelled as a degree comparison (`world_size_compare`), a **disjunction of degrees**
   (`degree_disjunction`), a **data-parallel mesh size** (`data_parallel_mesh`);
5. the step moved into a **helper that always runs it**, in the same file (`must_run_helper`) or
   another (`must_run_helper_project`), also behind a guard that raises on invalid input
   (`must_run_helper_guard`, `must_run_helper_guard_project`), or a step that must follow the wrap
   (`forward_method`); a completion step inside a strategy dispatch or next to a degree re-test
   (`wrap_strategy_dispatch`, `wrap_degree_retest`);
6. the gated call written as a ternary, short-circuit, comprehension filter or nested `if`
   (`ternary`, `short_circuit`, `nested_if`);
7. a wrap skipped at degree 1 with nothing handling degree 1: a dispatch branch without an
   alternative, an `else: pass`, a bare early `return m` (`wrap_strategy_dispatch`), a re-test of
   the degree without a degree-1 branch, of another quantity or in another function
   (`wrap_degree_retest`).

Near misses that stay clean: tensor-/expert-parallel degrees and meshes (`other_degrees`,
`data_parallel_mesh_ok`), `is_sharded` state (`is_sharded_state`, `cross_file_gate_project_ok`),
`is_shard or force` (`or_chain`, `degree_disjunction_ok`), a gate whose other branch runs the same
step, directly or through a helper (`complementary_branch_ok`, `must_run_helper_ok`), helpers that
only sometimes run the step (`must_run_helper_project_ok`), a wrap that is one branch of a dispatch
or whose function handles degree 1 elsewhere (`wrap_strategy_dispatch_ok`, `wrap_degree_retest_ok`).

The call is gated when it sits

* in the body of an `if`/`elif` or in a branch of a ternary whose test requires the predicate: the
  test itself, a conjunct of an `and` chain (`if self.is_shard and not self._done:`), a `not` form
  with the call in the `else` branch (`if not self.is_shard: ... else: reset()`), or an `elif`
  reached only through the negation of a preceding test (`if not self.is_shard: ... elif x: reset()`),
  at any nesting depth;
* after an early exit in the same or an enclosing block of the same function:
  `if not self.is_shard: return` (or `raise`, or `continue`/`break` in a loop) before the call;
* in the right operand of a short-circuit `self.is_shard and reset()`, or in a comprehension element
  filtered by `if ws > 1`.

No message for:

* a module that can never be imported (an import of the project itself always fails there:
  the pipeline's rule for every rule, `unimportable_module`);
* a gated wrap (`wrap-calls`) whose degree-1 path the code handles explicitly: one branch of a
  dispatch, a function that tests the same degree again with a degree-1 branch, or a method of its
  class that dispatches on that degree (see "Wrap steps
  and completion steps" above);
* a call whose complementary path runs the same step too (the same last name, or a must-run helper
  that ends in the same step): the other branch of the `if` (its whole `elif`/`else` chain) or of
  the ternary, or the exiting branch of an early-exit guard (`if ws > 1: fully_shard(m, mesh=mesh)`
  / `else: fully_shard(m)`; `if ws > 1: apply_fsdp(m)` / `else: fully_shard(m)`;
  `if not self.is_shard:` resetting and then returning). The step runs at every shard degree. An
  `else: pass` or an `else` with other calls only does not count;
* an `or` chain with anything but degree predicates: `if self.is_shard or force:` runs the reset
  when `force` holds, so it is not gated; an `or` of other degrees only (`tp > 1 or cp > 1`);
* `is_sharded`: in PyTorch FSDP2 `FSDPParam.is_sharded` / `FSDPParamGroup.is_sharded` is the
  sharded **state** of the parameters (sharded vs unsharded right now), not the shard degree. PyTorch's
  own `FSDPParamGroup.lazy_init` runs `if self.is_sharded and not self._reset_sharded_params:`, and
  hyper-parallel's `TorchHSDPStateV2._init_hsdp_params` tests `if hsdp_param.is_sharded:`; both are
  correct and stay clean. Add `is_sharded` to `shard-degree-gates` only if your code uses it as a degree;
* `mesh.size() > 1`: a device mesh may be a tensor- or expert-parallel mesh, so its size is not a
  shard degree; only data-parallel meshes (`dp_mesh`, `dp_shard_mesh`, `fsdp_mesh`, `shard_mesh`,
  `mesh["dp"]`) count by default (the quantity regexes are matched against `receiver.method` of a
  call); `tp_mesh`, `ep_mesh`, `mesh["tp"]` do not;
* `assert ws > 1` before the call: the assertion states a precondition loudly (and vanishes under
  `-O`), it does not skip the step silently;
* comparisons with other bounds (`ws > 2`), and other parallel degrees (`tp_size`, `ep_size`,
  `pp_size`): an expert mesh that only exists when `ep_size > 1` is legitimately gated;
* a call inside a nested function or lambda: the gate around its definition does not gate its call;
* an early exit through a call (`sys.exit()`, `os._exit()`): only `return`, `raise`, `continue` and
  `break` statements are recognized as exits.

Known limits (no message): a must-run step called through a callable alias or a parameter
(`shard_fn = functools.partial(fully_shard, mesh=m)`, then `shard_fn(block)`; `fully_shard_fn=...`
passed in); a class whose constructor always shards (`Wrapper(model)`); module-level constants
(`USE_FSDP = WORLD_SIZE > 1`); an instance attribute stored from a bare gate name
(`self.need = self.is_shard`); a wrap's degree-1 handling is looked for only in the `if`s up to
its innermost gate (a dispatch around an inner `if ws > 1:` does not count) and in re-tests by
`if` statements (not ternaries or `assert`s), whose quantity is compared by source text after
local aliases (`self.world_size` and `self.env.world_size` differ); names are resolved by last name, not through imports, so two
unrelated project functions of one name must both qualify.

**Evidence and confidence.** Every message ends with its evidence: the construct that tests the
gate and its line (`gate tested by an if at line 12`, `an early exit`, `a conditional expression`
...), a local alias it goes through, where a gate read through a property, function or instance
attribute is defined (`'dp_enabled' defined in trainlib/dims.py`, `this file, line 9`), and where a
must-run helper is defined. Confidence is `HIGH` for a gate written in the test itself around the
step (closed-world evidence: the function shows everything that decides it), `CONTROL_FLOW` for an
early exit before the step, and `INFERENCE` when the gate or the step goes through a local alias, a
property, a function, an instance attribute or a must-run helper (of this file or another): the
rule then assumes those names are bound at run time to the definitions it resolved (by name across
the project's files, see "Known limits").

## Why is this bad?
hyper-parallel's `TorchHSDPStateV2.lazy_init` must re-wrap every sharded parameter after meta-device
materialization (`reset_sharded_param()`), so that the optimizer and the forward see the right
`nn.Parameter` objects. A refactor added `self.is_shard` to its guard:

```python
if self.is_shard and not self._reset_sharded_params:
    for hsdp_param in self.hsdp_params:
        hsdp_param.reset_sharded_param()
    self._reset_sharded_params = True
```

At `dp_shard == 1` (world size 1, no real sharding) `is_shard` is False, the reset is skipped and the
parameters stay on the meta device ("HSDP params still on meta device"); the leaf invariant of
E9501 is never established either, and building the optimizer fails with

```
RuntimeError: A view was created in no_grad mode and its base or another view of its base
has been modified inplace with grad mode enabled.
```

The same holds for `fully_shard`: FSDP2 wrapping also applies the mixed-precision policy and the
sharded-parameter invariants, so skipping it at world size 1 changes numerics, not just communication,
and code after it that treats the module as wrapped (`set_reshard_after_backward`, an `FSDPModule`
hook) breaks at world size 1 only. A wrap skipped on purpose, with the plain module handled
explicitly at degree 1, is not reported (see "Wrap steps and completion steps").

## Example
```python
class State:
    def lazy_init(self):
        if self.is_shard and not self._reset_sharded_params:
            for param in self.params:
                param.reset_sharded_param()
            self._reset_sharded_params = True


def parallelize(model, world_size):
    if world_size > 1:
        fully_shard(model)
    return model
```

## Use instead
```python
class State:
    def lazy_init(self):
        if not self._reset_sharded_params:
            for param in self.params:
                param.reset_sharded_param()
            self._reset_sharded_params = True


def parallelize(model, world_size):
    fully_shard(model)
    return model
```

## Fix safety
The fix removes the gate and nothing else:

* `and` chain: the gate conjunct is dropped (`if self.is_shard and not done:` -> `if not done:`),
  comments inside the condition kept;
* `if gate:` without `else`: the `if` line is removed and its body dedented (lines inside multi-line
  strings untouched; a trailing comment of the `if` line is kept as a comment line); for a walrus
  gate `if (need := ws > 1):` the header becomes `need = ws > 1`, so the name stays bound;
* `elif gate:` without a following branch: becomes `else:`;
* ternary `fully_shard(m) if ws > 1 else m`: replaced by the branch holding the call;
* comprehension filter `if ws > 1`: removed; short-circuit `gate and reset()`: the gate operand dropped.

A fix is **safe** (applied by default) only when the rewrite provably changes nothing but "the
step now also runs at shard degree 1" (checked by the executable oracle in
`tests/test_fix_oracle.py`, which runs generated programs before and after the fix):

* the gated region holds only the step: calls of `unconditional-calls` whose receiver and
  arguments have no side effects (names, attribute reads, constants, subscripts, operators and
  `len`/`isinstance`/`range`/`model.parameters()`-like calls), as statements or assigned to a name
  or attribute (`model = fully_shard(model)`); `for` loops without `else` over such an iterable;
  `with` blocks of grad-mode context managers (`no_grad`, `enable_grad`, `inference_mode`,
  `set_grad_enabled`, `nullcontext`); `if` blocks without `else` whose test has no side effects;
  `pass`; and flag assignments of constants (`self._done = True`);
* no name the region binds (a loop variable, `x = step(...)`, `done = True`) is read elsewhere in
  the function (`model = fully_shard(model)` does not count: `fully_shard` returns the module), no
  attribute it stores (`self._done = True`) is read after it in the function (the gate's own
  `not self._done` before it is fine), and no local its loops iterate is read after it unless
  bound only to a list, tuple, set or dict (a generator or `model.children()` would be consumed);
* "no side effects" also means no attribute read that may run project code: a `@property` of
  that name anywhere in the project, or a class-body binding of it to a non-constant in the file;
* for a dropped `and` conjunct: the `if` has no `else`/`elif` (an `else: pass` does not count), and
  the conjuncts after the gate have no side effects (the short circuit skipped them at degree 1);
* for a ternary: the kept branch is the step itself (with side-effect-free arguments), the other
  branch is a constant or a name, and the value is discarded (an expression statement) or is the
  module `fully_shard` wraps and returns (`m = fully_shard(m) if ws > 1 else m`);
* for a comprehension filter: the element is the step, the comprehension is an expression
  statement (its value, `[]` at degree 1, is discarded) and the later filters and `for` clauses
  have no side effects;
* for a short circuit `gate and step()`: an expression statement whose operands between the gate
  and the step have no side effects;
* the dropped gate runs no project code (not a `@property` or function of the project). An
  attribute read in the gate (`self.is_shard`, `self.world_size > 1`) counts as project code when
  the project has a `@property` of that name anywhere, or this file defines the name or binds it
  in a class body to a non-constant (`property(getter)`, a descriptor), or another file defines
  it and this file does not store it as a plain instance attribute (the seed's class stores
  `self.is_shard`, so the seed stays safe); a called name counts when the project defines it or
  what this file aliases it to anywhere (`from utils import dp_size as get_world_size`, also in a
  function or a `try` block, `f = g`, chains of those; bound to a `lambda`, `functools.partial`
  or any other value, it counts). Not followed: `__getattr__`, and `property(...)`/descriptors bound in a class body of
  another file. The dropped gate also binds no name (a walrus gate is safe only as the whole test,
  `if (need := ws > 1):`, kept as `need = ws > 1`).

Where the rewrite sits (inside other `if`/`elif`/`else` branches, loops with `else`,
`try`/`except`/`finally`, `with` blocks) does not change its applicability: the step itself is what
now also runs at degree 1. Everything else with a fix is **unsafe** (applied only with
`--unsafe-fixes`): a region holding more (that code would also run at degree 1; a
`return fully_shard(m)` body counts as more, the return moves out of the gate), a dropped gate with
an `else`/`elif` (that branch would run at other times: `if self.is_shard and not done: reset()`
/ `else: replicate()` no longer replicates at world size 1 on the first call), a conjunct or
argument with side effects that would now run at degree 1, a comprehension or short circuit whose
value is used, a ternary whose value changes, a gate that is a project function or property.

A gated call of a **must-run helper** (`apply_fsdp(m)`) is never safely unwrapped: the helper runs
more than the step. Reading an instance attribute gate (`self.use_fsdp`) runs no code, so dropping
it is like dropping a name.

**Report-only** (no fix): early-exit guards (`if not self.is_shard: return`; removing them changes
everything after the guard), calls in an `else` branch of a negative test or in an `elif` reached
through a preceding negative test, `if gate:` with an `else`/`elif`, `or` forms
(`not is_shard or reset()`), tests where the gate is buried (`need = self.is_shard and x`,
`not (not self.is_shard or x)`), a gate whose removal would drop a `:=` binding (any walrus other
than the whole test of an `if`, e.g. `if (need := ws > 1) and x:`), and an `if gate:`/`elif gate:`
whose body always exits (`return fully_shard(m)`) when code may run after it (later statements, or
an enclosing loop or block): unwrapping it would leave that code unreachable.

## Options
* `unconditional-calls` (csv, default `reset_sharded_param,fully_shard,register_fsdp_forward_method`):
  last name components of the calls that must run at every shard degree (project functions that
  always call one are added at check time).
* `wrap-calls` (csv, default `fully_shard`): the steps of `unconditional-calls` that create the
  sharded module (wraps); a gated wrap is not reported when the code handles the unwrapped
  degree-1 path explicitly. The other steps are completion steps, reported whenever gated. Names
  not in `unconditional-calls` have no effect; set it empty to report every gated wrap.
* `wrapped-classes` (csv, default `FSDPModule,FullyShardedDataParallel`): classes of the modules a
  wrap makes; a step reached only when `isinstance(<its module>, C)` holds is not reported (see
  "The module's wrapped state").
* `shard-degree-gates` (csv, default `is_shard`): names whose truth means "shard degree > 1", used
  as a bare name or an attribute (never a method call).
* `shard-degree-quantities` (regexp_csv, default
  `world_size,ws,(dp|fsdp|shard|dp_shard|data_parallel)_world_size,get_(dp_|fsdp_|shard_|data_parallel_)?world_size,(dp_)?shard(_mesh)?_(size|degree),dp_shard,(num|n)_shards,fsdp_(size|degree),data_parallel_shard_degree,(dp|data_parallel)_(size|degree),(fsdp|shard|dp_shard|dp|data_parallel|fsdp_shard)_mesh\\.size`):
  regular expressions matched (whole name) against the last name of a name, attribute or called
  function, and against `receiver.method` of a call; a comparison of such a quantity with 1 is a
  gate.
* `parallel-degree-quantities` (regexp_csv, default
  `(tp|cp|pp|ep|etp|sp|dp_replicate|dp_rep|replicate)(_world)?_(size|degree),(tp|cp|pp|ep|etp|dp_replicate),(tensor|context|pipeline|expert|sequence)_(model_)?parallel_(world_)?(size|degree),get_(tensor|context|pipeline|expert|sequence)_(model_)?parallel_world_size,(tp|cp|pp|ep|etp|sp|dp_replicate|replicate|tensor|context|pipeline|expert)_mesh\\.size`):
  other parallel degrees; comparing one with 1 is not a gate by itself, but joins a shard-degree
  predicate in an `or`.

Project facts: the rule reads, for every file of the project (the nearest folder with
`pyproject.toml` or `.git`, or `setup.py`/`setup.cfg` outside a package), the return values of its functions and
properties and the values stored into `self.<attr>`, summarized once per file (cached with the
other project facts) and evaluated with the options of the file being checked; and the names each
function always calls, computed when asked, for the files whose text holds a must-run name (or the
name of a helper already found to call one). Without a project (library use with no `Project`), the rule uses what
the file itself shows.

Text prefilter: a file is analysed only if one of the configured `unconditional-calls` names, or
the name of a project function that always calls one, occurs in its text.

## References
* hyper-parallel issue 230 (gitcode mindspore/hyper-parallel): item 2, `TorchHSDPStateV2.lazy_init`.
* PyTorch FSDP2: `torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py` (`lazy_init`,
  `is_sharded`, the `world_size == 1` paths of `unshard`/`wait_for_unshard`),
  `torch.distributed.fsdp.fully_shard`, `register_fsdp_forward_method` (`_fully_shard.py`),
  `_init_default_mesh` (`_fsdp_init.py`).
* E9501 `local-tensor-view-not-detached` (the leaf invariant the reset establishes).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import dataclasses

from hp_invariants.astutil import (SCOPES, EXITS, FunctionNode, always_exits, dotted_name, last_name, nodes_at_line, parent_map,
                                   qualified_scopes, scope_nodes, statement_of, walk_function_body, walk_nodes)
from hp_invariants.model import Applicability, Confidence, Edit
from hp_invariants.api import REPAIRED, REVERTED, UNKNOWN, Repair, RepairState
from hp_invariants.semantic import SemanticModel
from hp_invariants.source import identifier_text
from hp_invariants.rules import shard_gate_facts as facts
from hp_invariants.rules.shard_gate_facts import ShardGateIndex, mesh_receiver

from hp_invariants.declarations import (DEFAULT_CALLS, ShardGatedResetDeclaration, DEFAULT_DEGREES, DEFAULT_GATES, DEFAULT_QUANTITIES,  # noqa: F401
                                       DEFAULT_WRAPPED_CLASSES, DEFAULT_WRAPS)

_EXITS = EXITS
_MAX_DEPTH = 6


@dataclass(frozen=True)
class Gate:
    """A shard-degree predicate found in a test.

    ``node``: the expression at the use site (the conjunct a fix would drop); ``text``: how the message
    names it; ``via``: ``"direct"``, ``"alias"``, ``"property"`` or ``"function"``; ``drop_unsafe``:
    removing the expression may change more than the gate (it calls a project function, which may
    have side effects, or binds a name with ``:=``); ``shard``: the predicate involves the shard
    degree (False: only other parallel degrees, e.g. ``cp > 1``, which alone is not a gate but may
    join a shard-degree predicate in an ``or``).
    """

    node: ast.AST
    text: str
    via: str = "direct"
    drop_unsafe: bool = False
    shard: bool = True


@dataclass
class _FileInfo:
    """Per-file caches: name assignments per scope."""

    scopes: dict[int, dict[str, list[ast.AST | None]]] = field(default_factory=dict)


def _patterns(values) -> list[re.Pattern]:
    return [re.compile(p) if isinstance(p, str) else p for p in values]


def _sign(op: str, k: int) -> int:
    """+1 when ``q <op> k`` means ``q > 1`` for an integer degree ``q >= 1``, -1 when it means
    ``q == 1``, 0 otherwise."""
    if (op, k) in {(">", 1), (">=", 2), ("!=", 1)}:
        return 1
    if (op, k) in {("==", 1), ("<=", 1), ("<", 2)}:
        return -1
    return 0


def _operand_names(operand: tuple) -> tuple[str, ...]:
    """The names a quantity regex is matched against, for an encoded operand."""
    kind = operand[0]
    if kind in ("n", "a"):
        return (operand[1],)
    if kind == "c":
        return (operand[1], operand[2]) if operand[2] else (operand[1],)
    return ()


def _render(enc: tuple) -> str:
    """Source-like text of an encoded expression (for messages)."""
    kind = enc[0]
    if kind == "n":
        return enc[1]
    if kind == "a":
        return f"{enc[2]}.{enc[1]}" if enc[2] else enc[1]
    if kind == "c":
        return f"{enc[2] or enc[1]}()"
    if kind == "cmp":
        return f"{_render(enc[2])} {enc[1]} {enc[3]}"
    if kind == "not":
        return f"not {_render(enc[1])}"
    if kind in ("and", "or"):
        return f" {kind} ".join(_render(v) for v in enc[1])
    return "..."


class _LocalFacts:
    """The checked file's own facts (a :func:`~hp_invariants.rules.shard_gate_facts.summarize`
    result), by name."""

    def __init__(self, summary: tuple):
        functions, attr_values, attr_other = summary
        self.functions: dict[str, list[facts.FunctionFact]] = {}
        for func in functions:
            func = facts.FunctionFact(*func)
            self.functions.setdefault(func.name, []).append(func)
        self.attr_values: dict[str, list[tuple]] = {}
        for attr, value in attr_values:
            self.attr_values.setdefault(attr, []).append(value)
        self.attr_other = attr_other


def _concrete(defs: list) -> list:
    """The definitions that decide a name: abstract placeholders are left out unless all are."""
    concrete = [f for f in defs if not f.abstract]
    return concrete or defs


def _concrete_calls(index: ShardGateIndex, name: str) -> Iterator[tuple[str, ...]]:
    """The call sets of the project's ``def``s of ``name`` that decide it (:func:`_concrete`), each
    computed when reached (:meth:`ShardGateIndex.calls_of` may parse its file)."""
    defs = index.functions.get(name, ())
    for k in [k for k, (_, f) in enumerate(defs) if not f.abstract] or range(len(defs)):
        yield index.calls_of(name, k)


def project_closure(index: ShardGateIndex, calls: frozenset[str]) -> dict[str, str]:
    """Must-run names of the whole project for the option ``calls`` (memoized on the index): each
    maps to a must-run name it always calls; option names map to themselves. A name is must-run
    when every ``def`` of it, in any file, calls a must-run name on every normal path. Only the
    files that can hold a caller are parsed again (:meth:`ShardGateIndex.callers_of`), the names
    waiting in the work list looked up together."""
    key = ("closure", calls)
    cached = index.memo.get(key)
    if cached is not None:
        return cached
    via = {c: c for c in sorted(calls)}
    work = sorted(calls)  # not the frozenset's order: that changes with PYTHONHASHSEED, and with it the chains
    while work:
        callee = work.pop()
        for name in index.callers_of([callee, *work])[callee]:
            if name in via:
                continue
            defs = index.functions.get(name)
            if not defs:  # a caller without a definition: only a damaged cache says so; not must-run
                continue
            first = None
            for called in _concrete_calls(index, name):  # one at a time: the first miss decides
                hit = next((c for c in called if c in via), None)
                if hit is None:
                    break
                first = first or hit
            else:
                via[name] = first
                work.append(name)
    index.memo[key] = via
    return via


_BUILT = facts.BUILT


def _closure_names(calls: frozenset[str]) -> Iterable[str]:
    """Every must-run helper name of the projects built in this process (for the prefilter)."""
    indexes = list(_BUILT)
    if len(indexes) == 1:  # the usual case: that project's (memoized) closure as it is
        return project_closure(indexes[0], calls).keys()
    names: set[str] = set()
    for index in indexes:
        names.update(project_closure(index, calls))
    return names


def _bind_target(table: dict[str, list[ast.AST | None]], target: ast.AST, value: ast.AST | None) -> None:
    """Record in ``table`` each name the assignment target ``target`` binds (``value`` for a plain
    name, ``None`` for an unpacked one). A module function: a closure calling itself would be a
    reference cycle per scope, left for the cyclic collector."""
    if isinstance(target, ast.Name):
        table.setdefault(target.id, []).append(value)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _bind_target(table, elt, None)
    elif isinstance(target, ast.Starred):
        _bind_target(table, target.value, None)


class _Analyzer:
    """Gate analysis for one file (options, alias and definition caches, project facts)."""

    def __init__(self, ctx, rule: "ShardGatedReset", index: ShardGateIndex | None = None):
        self.ctx = ctx
        self.calls = frozenset(ctx.option(rule, "unconditional-calls"))
        self.wraps = frozenset(ctx.option(rule, "wrap-calls")) & self.calls
        self.gates = frozenset(ctx.option(rule, "shard-degree-gates"))
        self.quantities = _patterns(ctx.option(rule, "shard-degree-quantities"))
        self.degrees = _patterns(ctx.option(rule, "parallel-degree-quantities"))
        self.info = _FileInfo()
        self.index = index
        number = index.file_index(ctx.path) if index is not None else None
        self.file_no = -1 if number is None else number
        self._local: _LocalFacts | None = None
        self._class_names: frozenset[str] | None = None
        self._must_run: dict[str, str] | None = None
        self._steps: dict[str, frozenset[str]] | None = None

    # ------------------------------------------------------------------ names
    def _quantity_name(self, name: str | None) -> bool:
        return name is not None and any(p.fullmatch(name) for p in self.quantities)

    def _degree_name(self, name: str | None) -> bool:
        return name is not None and any(p.fullmatch(name) for p in self.degrees)

    def is_unconditional(self, node: ast.AST) -> bool:
        """True for a call whose callee's last name is in ``unconditional-calls``."""
        return isinstance(node, ast.Call) and last_name(node.func) in self.calls

    def is_quantity(self, expr: ast.AST, scope: ast.AST, depth: int, match=None) -> bool:
        """True when ``expr`` is a shard-degree quantity (name, attribute, getter call, alias);
        ``match``: the name test (default: the ``shard-degree-quantities`` regexes)."""
        match = match or self._quantity_name
        if isinstance(expr, ast.NamedExpr):  # (ws := dist.get_world_size()) > 1: the value, named ws
            return match(expr.target.id) or depth < _MAX_DEPTH and self.is_quantity(expr.value, scope, depth + 1, match)
        if isinstance(expr, ast.Call):
            func = expr.func
            if match(last_name(func)):
                return True
            if isinstance(func, ast.Attribute):
                recv = mesh_receiver(func.value)
                return recv is not None and match(f"{recv}.{func.attr}")
            return False
        if isinstance(expr, ast.Attribute):
            return match(expr.attr)
        if isinstance(expr, ast.Name):
            if match(expr.id):
                return True
            value = self.alias_value(expr, scope)
            return value is not None and depth < _MAX_DEPTH and self.is_quantity(value, scope, depth + 1, match)
        return False

    # ------------------------------------------------------------------ project facts
    def local(self) -> "_LocalFacts":
        """The facts of the file being checked, from its current tree (the index's summaries hold no
        call sets, and an edit not saved, a fix round or a file outside the project is not indexed)."""
        if self._local is None:
            self._local = _LocalFacts(facts.summarize(self.ctx.tree))
        return self._local

    def functions_named(self, name: str) -> list[facts.FunctionFact]:
        """The ``def``s of ``name``: this file's when it has one, else every other project file's."""
        local = self.local().functions.get(name)
        if not local:
            local = [f for n, f in self.index.functions.get(name, ()) if n != self.file_no] if self.index else []
        return _concrete(local)

    def attribute_values(self, attr: str) -> list[tuple] | None:
        """Encoded values of every ``self.<attr>`` store (this file's when it stores one, else every
        other project file's), or ``None`` when one of them is not boolean-shaped or there is none."""
        local = self.local()
        if attr in local.attr_other:
            return None
        if attr in local.attr_values:
            return local.attr_values[attr]
        if self.index is None:
            return None
        if any(n != self.file_no for n in self.index.attr_other.get(attr, ())):
            return None
        values = [v for n, v in self.index.attr_values.get(attr, ()) if n != self.file_no]
        return values or None

    def must_run(self) -> dict[str, str]:
        """Map each must-run name to the must-run name it always calls (an option name maps to itself).

        A project function is must-run when every one of its ``def``s (this file's, when it has
        one) unconditionally calls a must-run name; the closure is taken to a fixed point.
        """
        if self._must_run is not None:
            return self._must_run
        base = project_closure(self.index, self.calls) if self.index is not None else {c: c for c in self.calls}
        local = self._local_helpers()
        via = {name: v for name, v in base.items() if name in self.calls or name not in local}
        changed = True
        while changed:
            changed = False
            for name, defs in local.items():
                if name in via or not defs:
                    continue
                hits = [next((c for c in d.calls if c in via), None) for d in defs]
                if all(hits):
                    via[name] = hits[0]
                    changed = True
        self._must_run = via
        return via

    def steps(self, name: str | None) -> frozenset[str]:
        """The must-run steps (``unconditional-calls`` names) a call of ``name`` always runs: the
        step itself for a step; for a must-run helper, the steps that every one of its ``def``s
        reaches through its must-run calls (a least fixed point over the must-run names: a helper
        that always calls both ``fully_shard`` and a helper of ``reset_sharded_param`` runs both);
        empty for any other name."""
        if self._steps is None:
            via = self.must_run()
            local = self._local_helpers()
            defs_calls: dict[str, list[tuple[str, ...]]] = {}
            for helper in via:
                if helper in self.calls:
                    continue
                if helper in local:
                    defs_calls[helper] = [d.calls for d in local[helper]]
                elif self.index is not None:
                    defs_calls[helper] = list(_concrete_calls(self.index, helper))
            steps: dict[str, frozenset[str]] = {c: frozenset((c,)) for c in self.calls}
            steps.update((helper, frozenset()) for helper in defs_calls)
            empty: frozenset[str] = frozenset()
            changed = True
            while changed:
                changed = False
                for helper in sorted(defs_calls):
                    reached = [empty.union(*(steps.get(c, empty) for c in calls if c in via))
                               for calls in defs_calls[helper]]
                    found = reached[0].intersection(*reached[1:]) if reached else empty
                    if found != steps[helper]:
                        steps[helper] = found
                        changed = True
            self._steps = steps
        return self._steps.get(name, frozenset()) if name is not None else frozenset()

    def _local_helpers(self) -> dict[str, list]:
        """The file's own ``def``s by name, which decide a name for the file (abstract placeholders
        left out where a concrete one exists); a name whose every ``def`` here is a placeholder
        (``@abstractmethod``, a body that only raises ``NotImplementedError``) is left to the project:
        ``self.apply_fsdp(model)`` runs a subclass's override, wherever it is defined."""
        return {name: _concrete(defs) for name, defs in self.local().functions.items()
                if any(not d.abstract for d in defs)}

    def root(self, name: str) -> str:
        """The option name that the must-run ``name`` ends up calling."""
        via = self.must_run()
        seen = set()
        while name not in self.calls and name in via and name not in seen:
            seen.add(name)
            name = via[name]
        return name

    def must_run_call(self, node: ast.AST) -> str | None:
        """For a call of a project function that always calls a must-run step: the chain of calls
        down to that step (``"apply_fsdp() -> fully_shard"``), else ``None``."""
        if not isinstance(node, ast.Call):
            return None
        name = last_name(node.func)
        via = self.must_run()
        if name is None or name in self.calls or name not in via:
            return None
        chain = [name]
        while chain[-1] not in self.calls and chain[-1] in via and len(chain) <= _MAX_DEPTH:
            chain.append(via[chain[-1]])
        return "() -> ".join(chain)

    def where_defined(self, name: str | None, attribute: bool = False) -> str:
        """Where ``name`` is defined as this rule resolves it (evidence): this file's ``def``s (or, for
        an instance ``attribute``, its ``self.<name>`` stores) by line, else the project files that
        define (store) it, at most three named."""
        if name is None:
            return "an unknown place"
        local = self.local()
        if attribute:
            here = name in local.attr_values or name in local.attr_other
            numbers = {n for n, _ in self.index.attr_values.get(name, ())} if self.index is not None else set()
        else:
            lines = [d.lineno for d in self.ctx.semantic.definitions(name)]
            if lines:
                return "this file, line " + ", ".join(map(str, lines[:3]))
            here = False
            numbers = {n for n, _ in self.index.functions.get(name, ())} if self.index is not None else set()
        if here:
            return "this file"
        files = sorted(self.index.relative(self.index.paths[n]) for n in numbers if n != self.file_no) if numbers else []
        if not files:
            return "this file"
        return ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")

    def is_wrap(self, node: ast.Call) -> bool:
        """True when ``node`` calls a wrap step (``wrap-calls``), directly or through a must-run
        helper whose steps are all wraps (``apply_fsdp() -> fully_shard``); a helper that also always
        runs a completion step (``reset_sharded_param``) is none: that step is not the wrap a recipe
        may skip on purpose at world size 1."""
        steps = self.steps(last_name(node.func))
        return bool(steps) and steps <= self.wraps

    def degree_keys(self, expr: ast.AST, scope: ast.AST, depth: int = 0) -> set[str]:
        """The degree quantities ``expr`` tests, as source text: the compared operand of each degree
        comparison (``self.world_size`` for ``self.world_size > 1``), each gate name, property,
        function or instance attribute read as a degree predicate; a local alias contributes its
        name and the keys of its value. Parts that are not degree predicates contribute nothing."""
        if depth > _MAX_DEPTH:
            return set()
        if isinstance(expr, ast.NamedExpr):
            return self.degree_keys(expr.value, scope, depth + 1)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return self.degree_keys(expr.operand, scope, depth + 1)
        if isinstance(expr, ast.BoolOp):
            return set().union(*(self.degree_keys(v, scope, depth + 1) for v in expr.values))
        atom, _ = self._atom(expr, scope, depth)
        if atom:
            if not isinstance(expr, ast.Compare):
                return {ast.unparse(expr)}
            quantity = expr.comparators[0] if isinstance(expr.left, ast.Constant) else expr.left
            if isinstance(quantity, ast.NamedExpr):  # (ws := dist.get_world_size()) > 1: ws and its value
                return {quantity.target.id, ast.unparse(quantity.value)}
            keys = {ast.unparse(quantity)}
            if isinstance(quantity, ast.Name):
                value = self.alias_value(quantity, scope)
                if value is not None:
                    keys.add(ast.unparse(value))
            return keys
        if isinstance(expr, ast.Name):
            value = self.alias_value(expr, scope)
            return self.degree_keys(value, scope, depth + 1) | {expr.id} if value is not None else set()
        if self.degree(expr, True, scope, depth) or self.degree(expr, False, scope, depth):
            return {ast.unparse(expr)}
        return set()

    def same_step(self, root: str | None):
        """A predicate on callee names: does calling it run the step ``root``?"""
        via = self.must_run()
        return lambda name: name == root or (name in via and self.root(name) == root)

    # ------------------------------------------------------------------ encoded (cross-file) gates
    def encoded_degree(self, enc: tuple, truth: bool, depth: int) -> tuple[str, bool] | None:
        """``(text, shard)`` when the encoded expression being ``truth`` implies a parallel degree > 1."""
        if depth > _MAX_DEPTH:
            return None
        kind = enc[0]
        if kind == "cmp":
            _, op, operand, k = enc
            sign = _sign(op, k)
            if not sign or (sign > 0) != truth:
                return None
            name = _operand_names(operand)
            text = _render(enc) if sign > 0 else f"not ({_render(enc)})"
            if any(self._quantity_name(n) for n in name):
                return text, True
            if any(self._degree_name(n) for n in name):
                return text, False
            return None
        if kind == "not":
            return self.encoded_degree(enc[1], not truth, depth + 1)
        if kind in ("and", "or"):
            found = [self.encoded_degree(v, truth, depth + 1) for v in enc[1]]
            hits = [g for g in found if g is not None]
            if (kind == "and") != truth:
                if not hits or len(hits) != len(found):
                    return None
                return hits[0][0] if len(hits) == 1 else _render(enc), any(g[1] for g in hits)
            shard = [g for g in hits if g[1]]
            return (shard or hits or [None])[0]
        if kind in ("n", "a") and enc[1] in self.gates:
            return (_render(enc), True) if truth else None
        if kind == "a":
            inner = self.definitions_degree(enc[1], True, truth, depth + 1)
            if inner is None:
                inner = self.attribute_degree(enc[1], truth, depth + 1)
            return (f"{_render(enc)} (= {inner[0]})", inner[1]) if inner else None
        if kind == "c":
            inner = self.definitions_degree(enc[1], False, truth, depth + 1)
            return (f"{_render(enc)} (= {inner[0]})", inner[1]) if inner else None
        return None

    def definitions_degree(self, name: str, is_property: bool, truth: bool, depth: int) -> tuple[str, bool] | None:
        """The degree predicate every ``def`` of ``name`` returns (properties for an attribute read,
        plain functions for a call), or ``None``."""
        defs = self.functions_named(name)
        if not defs or any(d.is_property != is_property or d.returns is None for d in defs):
            return None
        results = []
        for func in defs:
            for value in func.returns:
                inner = self.encoded_degree(value, truth, depth + 1)
                if inner is None:
                    return None
                results.append(inner)
        return results[0][0], any(r[1] for r in results)

    def attribute_degree(self, attr: str, truth: bool, depth: int) -> tuple[str, bool] | None:
        """The degree predicate every ``self.<attr>`` store assigns (an instance attribute set from a
        comparison, ``self.need = self.world_size > 1``), or ``None``."""
        values = self.attribute_values(attr)
        if not values:
            return None
        results = []
        for value in values:
            inner = self.encoded_degree(value, truth, depth + 1)
            if inner is None:
                return None
            results.append(inner)
        return results[0][0], any(r[1] for r in results)

    # ------------------------------------------------------------------ aliases
    def _scope_assignments(self, scope: ast.AST) -> dict[str, list[ast.AST | None]]:
        """Map each name bound in ``scope`` to its simple-assignment values (``None``: other binding)."""
        cached = self.info.scopes.get(id(scope))
        if cached is not None:
            return cached
        table: dict[str, list[ast.AST | None]] = {}

        def bind(target: ast.AST, value: ast.AST | None) -> None:
            _bind_target(table, target, value)

        if isinstance(scope, FunctionNode + (ast.Lambda,)):
            args = scope.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if arg is not None:
                    table.setdefault(arg.arg, []).append(None)
        for node in walk_function_body(scope):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    bind(target, node if isinstance(target, ast.Name) else None)
            elif isinstance(node, ast.AnnAssign):
                bind(node.target, node if node.value is not None else None)
            elif isinstance(node, (ast.AugAssign, ast.For, ast.AsyncFor)):
                bind(node.target, None)
            elif isinstance(node, ast.NamedExpr):
                bind(node.target, None)
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                bind(node.optional_vars, None)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for name in node.names:
                    table.setdefault(name, []).append(None)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    table.setdefault((alias.asname or alias.name).split(".")[0], []).append(None)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                table.setdefault(node.name, []).append(None)
            elif isinstance(node, FunctionNode + (ast.ClassDef,)) and node is not scope:
                table.setdefault(node.name, []).append(None)
        self.info.scopes[id(scope)] = table
        return table

    def alias_value(self, name: ast.Name, scope: ast.AST) -> ast.AST | None:
        """Return the value of ``name`` if it is bound exactly once, by ``name = value``, before use."""
        bindings = self._scope_assignments(scope).get(name.id)
        if not bindings or len(bindings) != 1 or bindings[0] is None:
            return None
        assign = bindings[0]
        if (assign.end_lineno, assign.end_col_offset) > (name.lineno, name.col_offset):
            return None
        return assign.value

    # ------------------------------------------------------------------ gates
    def _atom(self, expr: ast.AST, scope: ast.AST, depth: int) -> tuple[int, bool]:
        """``(sign, shard)``: sign +1: ``expr`` true means degree > 1; -1: ``expr`` true means
        degree 1; 0: not an atom. ``shard``: the degree is the shard degree (a gate name or a
        ``shard-degree-quantities`` comparison), not another parallel degree."""
        if isinstance(expr, (ast.Name, ast.Attribute)) and last_name(expr) in self.gates:
            return 1, True
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and type(expr.ops[0]) in facts._OPS:
            left, op, right = expr.left, facts._OPS[type(expr.ops[0])], expr.comparators[0]
            if isinstance(left, ast.Constant) and not isinstance(right, ast.Constant):
                left, right, op = right, left, facts._FLIP[op]
            if not (isinstance(right, ast.Constant) and type(right.value) is int):
                return 0, False
            sign = _sign(op, right.value)
            if not sign:
                return 0, False
            if self.is_quantity(left, scope, depth):
                return sign, True
            if self.is_quantity(left, scope, depth, self._degree_name):
                return sign, False
        return 0, False

    def runs_project_code(self, expr: ast.AST) -> bool:
        """True when evaluating the gate ``expr`` (a gate name or a degree comparison) may run project
        code, so that dropping it is never a safe fix (its side effects go with it).

        An attribute read runs project code when the project defines a ``@property`` of that name
        anywhere (a data descriptor wins over an instance store), when this file defines that name
        or binds it in a class body to anything but a constant (``property(getter)``, a descriptor
        instance), or, unless this file stores it as a plain instance attribute (``self.is_shard =
        is_shard``: the seed's class), when another project file defines that name. A call of a
        name runs project code when the project defines the name it calls: the name itself, or
        what this file aliases it to (``from utils import dp_size as get_world_size``,
        ``get_world_size = _dp_size``; a ``lambda`` always counts). Not followed: ``__getattr__``,
        and a ``property(getter)`` or descriptor bound in a class body of another file (the index
        does not tell class-body bindings from instance stores there)."""
        local = self.local()
        for node in walk_nodes(expr):
            if node.__class__ is ast.Attribute:
                name = node.attr
                if self.read_runs_code(name) or name in local.functions:
                    return True
                if name in local.attr_values or name in local.attr_other:
                    continue  # a plain instance attribute of this file
                if self.functions_named(name):
                    return True
            elif node.__class__ is ast.Call and node.func.__class__ is ast.Name:
                name = self.alias_target(node.func.id)
                if name is None or self.functions_named(name):
                    return True
        return False

    def read_runs_code(self, name: str) -> bool:
        """True when reading the attribute ``name`` may run project code: the project has a
        ``@property`` of that name anywhere, or this file binds it in a class body to a non-constant
        (``property(getter)``, a descriptor)."""
        return self._is_project_property(name) or name in self._class_bound()

    def alias_target(self, name: str) -> str | None:
        """The name that a call of ``name`` calls, through this file's aliases (followed in chains;
        see :meth:`_aliases`); ``None`` when an alias is bound to anything but a name (a ``lambda``,
        ``functools.partial(...)``), or the chain does not end."""
        aliases = self.ctx.semantic.aliases()
        seen = {name}
        while name in aliases:
            name = aliases[name]  # type: ignore[assignment]
            if name is None or name in seen:
                return None
            seen.add(name)
        return name

    def _is_project_property(self, name: str) -> bool:
        if any(f.is_property for f in self.local().functions.get(name, ())):
            return True
        return self.index is not None and any(f.is_property for n, f in self.index.functions.get(name, ())
                                              if n != self.file_no)

    def _class_bound(self) -> frozenset[str]:
        """Names bound in a class body of this file to something other than a constant."""
        if self._class_names is None:
            names: set[str] = set()
            for cls in self.ctx.nodes_of(ast.ClassDef):
                for stmt in cls.body:
                    if stmt.__class__ is ast.Assign and stmt.value.__class__ is not ast.Constant:
                        names.update(t.id for t in stmt.targets if t.__class__ is ast.Name)
                    elif stmt.__class__ is ast.AnnAssign and stmt.value is not None \
                            and stmt.value.__class__ is not ast.Constant and stmt.target.__class__ is ast.Name:
                        names.add(stmt.target.id)
            self._class_names = frozenset(names)
        return self._class_names

    def _definitions(self, expr: ast.AST, scope: ast.AST) -> tuple[list[ast.AST], str]:
        """The ``def`` statements of this file that ``expr`` runs: the property getters an attribute
        read runs, or the functions a call runs, by the semantic model's resolution (incomplete ones
        included: a gate may live anywhere; what no ``def`` of this file answers is looked up in the
        project facts by :meth:`_project_degree`)."""
        model = self.ctx.semantic
        where = scope if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else None
        if isinstance(expr, ast.Attribute):
            found = model.resolve_attribute(expr, where).candidates
            if found:
                return list(found), "property"
        elif isinstance(expr, ast.Call) and isinstance(expr.func, (ast.Name, ast.Attribute)):
            found = model.resolve_call(expr, where).candidates
            if found:
                return list(found), "function"
        return [], ""

    def requires(self, expr: ast.AST, truth: bool, scope: ast.AST, depth: int = 0) -> Gate | None:
        """Return the gate if ``expr`` evaluating to ``truth`` implies shard degree > 1, else ``None``."""
        gate = self.degree(expr, truth, scope, depth)
        return gate if gate is not None and gate.shard else None

    def degree(self, expr: ast.AST, truth: bool, scope: ast.AST, depth: int = 0) -> Gate | None:
        """Return the predicate if ``expr`` evaluating to ``truth`` implies a parallel degree > 1
        (``Gate.shard``: the shard degree; an ``or`` of degree predicates is one when any is)."""
        if depth > _MAX_DEPTH:
            return None
        atom, shard = self._atom(expr, scope, depth)
        if atom:
            if (atom > 0) == truth:
                text = self.ctx.text_of(expr)
                return Gate(expr, text if atom > 0 else f"not ({text})", drop_unsafe=self.runs_project_code(expr),
                            shard=shard)
            return None
        if isinstance(expr, ast.NamedExpr):
            inner = self.degree(expr.value, truth, scope, depth + 1)
            return Gate(expr, inner.text, inner.via, True, inner.shard) if inner else None
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            inner = self.degree(expr.operand, not truth, scope, depth + 1)
            return Gate(expr, inner.text, inner.via, inner.drop_unsafe, inner.shard) if inner else None
        if isinstance(expr, ast.BoolOp):
            found = [self.degree(v, truth, scope, depth + 1) for v in expr.values]
            need_all = isinstance(expr.op, ast.And) != truth
            hits = [g for g in found if g is not None]
            if not hits or (need_all and len(hits) != len(found)):
                return None
            if need_all:  # every disjunct a degree predicate: the whole is one, a shard gate if any is
                first = next((g for g in hits if g.shard), hits[0])
                text = first.text
                if len(hits) > 1:
                    text = self.ctx.text_of(expr) if truth else f"not ({self.ctx.text_of(expr)})"
                return Gate(expr, text, first.via, any(g.drop_unsafe for g in hits), any(g.shard for g in hits))
            first = next((g for g in hits if g.shard), hits[0])
            return Gate(expr, first.text, first.via, first.drop_unsafe, first.shard)
        if isinstance(expr, ast.Name):
            value = self.alias_value(expr, scope)
            if value is not None:
                inner = self.degree(value, truth, scope, depth + 1)
                if inner:
                    return Gate(expr, f"{expr.id} (= {inner.text})", "alias", inner.drop_unsafe, inner.shard)
            return None
        defs, kind = self._definitions(expr, scope)
        if defs:
            inner_gates = []
            for func in defs:
                values = SemanticModel.returns(func)
                if not values or any(v is None for v in values):
                    return None
                gates = [self.degree(v, truth, func, depth + 1) for v in values]
                if any(g is None for g in gates):
                    return None
                inner_gates.extend(gates)
            text = self.ctx.text_of(expr)
            # a property read runs project code just like a call: dropping it is unsafe either way
            return Gate(expr, f"{text} (= {inner_gates[0].text})", kind, True, any(g.shard for g in inner_gates))
        return self._project_degree(expr, truth, depth)

    def _project_degree(self, expr: ast.AST, truth: bool, depth: int) -> Gate | None:
        """A property or function defined in another file, or an instance attribute stored from a
        degree predicate (``self.need = self.world_size > 1``), read at ``expr``."""
        text = self.ctx.text_of(expr)
        if isinstance(expr, ast.Attribute):
            inner = self.definitions_degree(expr.attr, True, truth, depth + 1)
            if inner is not None:
                return Gate(expr, f"{text} (= {inner[0]})", "property", True, inner[1])
            inner = self.attribute_degree(expr.attr, truth, depth + 1)
            if inner is not None:  # a plain instance attribute: reading it runs no code
                return Gate(expr, f"{text} (= {inner[0]})", "attribute", False, inner[1])
        elif isinstance(expr, ast.Call) and isinstance(expr.func, (ast.Name, ast.Attribute)):
            inner = self.definitions_degree(last_name(expr.func), False, truth, depth + 1)
            if inner is not None:
                return Gate(expr, f"{text} (= {inner[0]})", "function", True, inner[1])
        return None

    def is_pure(self, expr: ast.AST, scope: ast.AST, depth: int = 0) -> bool:
        """True when ``expr`` is nothing but degree predicates (so removing the whole test removes
        only gates)."""
        if depth > _MAX_DEPTH:
            return False
        if self._atom(expr, scope, depth)[0]:
            return True
        if isinstance(expr, ast.NamedExpr):
            return self.is_pure(expr.value, scope, depth + 1)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return self.is_pure(expr.operand, scope, depth + 1)
        if isinstance(expr, ast.BoolOp):
            return all(self.is_pure(v, scope, depth + 1) for v in expr.values)
        if isinstance(expr, ast.Name):
            value = self.alias_value(expr, scope)
            return value is not None and self.is_pure(value, scope, depth + 1)
        defs, _ = self._definitions(expr, scope)
        if not defs:
            if isinstance(expr, ast.Attribute):
                values = self.attribute_values(expr.attr) if not self.functions_named(expr.attr) else None
                if values is None:
                    values = self._returned(expr.attr, True)
                return bool(values) and all(self.encoded_pure(v, depth + 1) for v in values)
            if isinstance(expr, ast.Call) and isinstance(expr.func, (ast.Name, ast.Attribute)):
                values = self._returned(last_name(expr.func), False)
                return bool(values) and all(self.encoded_pure(v, depth + 1) for v in values)
            return False
        for func in defs:
            values = SemanticModel.returns(func)
            if not values or not all(v is not None and self.is_pure(v, func, depth + 1) for v in values):
                return False
        return True

    def _returned(self, name: str, is_property: bool) -> list[tuple] | None:
        defs = self.functions_named(name)
        if not defs or any(d.is_property != is_property or d.returns is None for d in defs):
            return None
        return [v for d in defs for v in d.returns]

    def encoded_pure(self, enc: tuple, depth: int) -> bool:
        """:meth:`is_pure` for an encoded expression of another file."""
        if depth > _MAX_DEPTH:
            return False
        kind = enc[0]
        if kind == "cmp":
            names = _operand_names(enc[2])
            return bool(_sign(enc[1], enc[3])) and any(self._quantity_name(n) or self._degree_name(n) for n in names)
        if kind == "not":
            return self.encoded_pure(enc[1], depth + 1)
        if kind in ("and", "or"):
            return all(self.encoded_pure(v, depth + 1) for v in enc[1])
        if kind in ("n", "a") and enc[1] in self.gates:
            return True
        if kind == "a":
            values = self._returned(enc[1], True) or self.attribute_values(enc[1])
            return bool(values) and all(self.encoded_pure(v, depth + 1) for v in values)
        if kind == "c":
            values = self._returned(enc[1], False)
            return bool(values) and all(self.encoded_pure(v, depth + 1) for v in values)
        return False

    # ------------------------------------------------------------------ reset-only regions
    def pure(self, expr: ast.AST | None) -> bool:
        """True when evaluating ``expr`` has no effect beyond its value (fix applicability).

        Names, constants, attribute reads (not of a name :meth:`read_runs_code` says a read may run
        project code for), subscripts, operators and comparisons of those, and calls of the side-effect-free
        callees in :data:`_PURE_CALLS` (``len``, ``isinstance``, ``model.parameters()``, ...). A
        ``:=`` binding, any other call, ``await`` and ``yield`` are not pure.
        """
        if expr is None or isinstance(expr, (ast.Constant, ast.Name, ast.Lambda)):
            return True
        if isinstance(expr, ast.Attribute):
            return not self.read_runs_code(expr.attr) and self.pure(expr.value)
        if isinstance(expr, ast.Subscript):
            return self.pure(expr.value) and self.pure(expr.slice)
        if isinstance(expr, ast.Slice):
            return all(self.pure(part) for part in (expr.lower, expr.upper, expr.step))
        if isinstance(expr, ast.UnaryOp):
            return self.pure(expr.operand)
        if isinstance(expr, ast.BinOp):
            return self.pure(expr.left) and self.pure(expr.right)
        if isinstance(expr, ast.BoolOp):
            return all(self.pure(v) for v in expr.values)
        if isinstance(expr, ast.Compare):
            return self.pure(expr.left) and all(self.pure(c) for c in expr.comparators)
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            return all(self.pure(e) for e in expr.elts)
        if isinstance(expr, ast.Starred):
            return self.pure(expr.value)
        if isinstance(expr, ast.Call):
            func = expr.func
            if last_name(func) not in _PURE_CALLS or self.ctx.semantic.definitions(last_name(func)):
                return False
            receiver_ok = self.pure(func.value) if isinstance(func, ast.Attribute) else isinstance(func, ast.Name)
            return receiver_ok and self.call_args_pure(expr)
        return False

    def call_args_pure(self, call: ast.Call) -> bool:
        """True when every argument of ``call`` is :meth:`pure`."""
        return all(self.pure(a) for a in call.args) and all(self.pure(k.value) for k in call.keywords)

    def step_pure(self, call: ast.AST) -> bool:
        """A must-always-run call whose receiver and arguments are :meth:`pure` (only the step runs)."""
        if not self.is_unconditional(call):
            return False
        func = call.func
        if isinstance(func, ast.Attribute) and not self.pure(func.value):
            return False
        return self.call_args_pure(call)

    def _plain_target(self, target: ast.AST) -> bool:
        return isinstance(target, ast.Name) or (isinstance(target, ast.Attribute) and self.pure(target.value))

    def reset_only(self, stmts: Sequence[ast.stmt]) -> bool:
        """True when ``stmts`` run nothing but the must-always-run step.

        Allowed: must-always-run calls with :meth:`pure` receivers and arguments (as statements or
        assigned to a name or attribute), ``for`` loops over a pure iterable (no ``else``), ``with``
        blocks of grad-mode context managers (:data:`_TRANSPARENT_CMS`), ``if`` without ``else``
        whose test is pure, ``pass``, and flag assignments of constants (``self._done = True``).
        """
        for stmt in stmts:
            if isinstance(stmt, ast.Pass):
                continue
            if isinstance(stmt, ast.Expr) and self.step_pure(stmt.value):
                continue
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None and (
                    self.step_pure(stmt.value) or _is_flag(stmt.value)) and all(
                    self._plain_target(t) for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])):
                continue
            if isinstance(stmt, (ast.For, ast.AsyncFor)) and not stmt.orelse and self.pure(stmt.iter) \
                    and self.reset_only(stmt.body):
                continue
            if isinstance(stmt, (ast.With, ast.AsyncWith)) and all(
                    isinstance(item.context_expr, ast.Call) and last_name(item.context_expr.func) in _TRANSPARENT_CMS
                    and self.call_args_pure(item.context_expr) and item.optional_vars is None
                    for item in stmt.items) and self.reset_only(stmt.body):
                continue
            if isinstance(stmt, ast.If) and not stmt.orelse and self.pure(stmt.test) and self.reset_only(stmt.body):
                continue
            return False
        return True

    def region_names_leak(self, stmts: Sequence[ast.stmt], scope: ast.AST) -> bool:
        """True when running the region at degree 1 would change what other code of ``scope`` reads:
        a name the region binds (loop variable, ``x = step(...)``, ``done = True``) read outside it;
        an attribute it stores (``self._done = True``) read after it (a read before it, such as the
        gate's own ``not self._done``, sees the flag from the call before, as the step intends); a
        local iterated by one of its loops and read after it, unless bound only to a container
        (a generator or ``model.children()`` would be consumed). ``model = fully_shard(model)``
        does not count (``fully_shard`` returns the module it wraps)."""
        bound: set[str] = set()
        stored: set[tuple[str, str]] = set()
        iterated: set[str] = set()
        inside: set[int] = set()
        for stmt in stmts:
            for node in ast.walk(stmt):
                inside.add(id(node))
                if isinstance(node, (ast.For, ast.AsyncFor)):
                    bound.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
                    if isinstance(node.iter, ast.Name):
                        iterated.add(node.iter.id)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        if isinstance(target, ast.Name) and not _returns_argument(node.value, target.id):
                            bound.add(target.id)
                        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                            stored.add((target.value.id, target.attr))
        if not (bound or stored or iterated):
            return False
        end = max((stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0) for stmt in stmts)
        body = walk_function_body(scope)
        consumable = {name for name in iterated if not _binds_only_containers(body, name)}
        for node in body:
            if id(node) in inside:
                continue
            if isinstance(node, ast.Name) and node.id in bound:
                return True
            after = (node.lineno, node.col_offset) >= end if hasattr(node, "lineno") else False
            if after and isinstance(node, ast.Name) and node.id in consumable and isinstance(node.ctx, ast.Load):
                return True
            if after and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and (node.value.id, node.attr) in stored:
                return True
        return False


def _binds_only_containers(body: Sequence[ast.AST], name: str) -> bool:
    """True when ``name`` is bound among the nodes ``body`` of a function, each time by an assignment
    of a list, tuple, set or dict (a display, a comprehension other than a generator, or
    ``list(...)``/``tuple(...)``/``sorted(...)``): iterating it twice sees the same items. A
    parameter, a loop or ``with`` target, or any other value (a generator, ``model.children()``)
    is not known to be one."""
    containers: set[int] = set()
    for node in body:
        if isinstance(node, ast.Assign) and (
                isinstance(node.value, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp))
                or isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and node.value.func.id in ("list", "tuple", "sorted", "set", "dict")):
            containers.update(id(t) for t in node.targets if isinstance(t, ast.Name))
    stores = [n for n in body if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)]
    return bool(stores) and all(id(n) in containers for n in stores)


#: Callees that only compute a value (builtins, and ``torch.nn.Module`` walks).
_PURE_CALLS = frozenset({
    "len", "isinstance", "issubclass", "hasattr", "getattr", "bool", "int", "range", "enumerate", "zip",
    "list", "tuple", "reversed", "parameters", "named_parameters", "modules", "named_modules", "children",
    "named_children", "buffers", "named_buffers", "values", "items", "keys",
})
#: Context managers that only set and restore the grad mode (or do nothing): entering them runs no
#: code of the project and they never swallow an exception.
_TRANSPARENT_CMS = frozenset({"no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "nullcontext"})
#: Must-always-run steps that return the module they are given (FSDP2 ``fully_shard``).
_RETURNS_FIRST_ARG = frozenset({"fully_shard"})


def _returns_argument(value: ast.AST | None, name: str) -> bool:
    """True for ``fully_shard(name, ...)``: its result is the object ``name`` already holds."""
    return (isinstance(value, ast.Call) and last_name(value.func) in _RETURNS_FIRST_ARG and bool(value.args)
            and isinstance(value.args[0], ast.Name) and value.args[0].id == name)


def _is_flag(node: ast.AST) -> bool:
    """True for a flag value: ``True``, ``False``, ``None`` or a number."""
    return isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (bool, int, float)))


def _calls_named(nodes: Sequence[ast.AST], name) -> bool:
    """True when ``nodes`` (statements or expressions) call a function whose last name is ``name``
    (a string, or a predicate on last names).

    Nested functions, lambdas and classes are not entered (defining them calls nothing).
    """
    if name is None:
        return False
    test = name if callable(name) else name.__eq__
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call) and test(last_name(node.func)):
            return True
        if not isinstance(node, SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return False


@dataclass
class _Context:
    """Where a gate was found: ``kind`` is if/ifexp/and/or/comp/exit; ``node`` the construct."""

    kind: str
    node: ast.AST
    gate: Gate
    truth: bool
    test: ast.AST | None = None


def _handles(stmts: Sequence[ast.stmt]) -> bool:
    """True when a branch does something: a statement other than ``pass``, a constant expression
    (docstring, ``...``), ``continue``/``break`` or a ``return`` of nothing, a constant or a name.
    ``raise`` and ``assert`` count: they handle a case loudly."""
    for stmt in stmts:
        if isinstance(stmt, (ast.Pass, ast.Continue, ast.Break)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Return) and (stmt.value is None or _side_effect_free(stmt.value)):
            continue
        return True
    return False


def _degree_one_handled(ctx, analyzer: _Analyzer, call: ast.Call, context: _Context, scope: ast.AST) -> bool:
    """True when the code around a gated **wrap** handles the unwrapped degree-1 path explicitly:

    (a) an ``if`` or ternary between ``call`` and the gate (the gate's own ``if`` included; for an
    early-exit guard, its exiting branch) has another branch that does something (:func:`_handles`;
    a ternary branch that is not a constant or a name): the wrap is one branch of a dispatch;
    (b) another ``if`` of the same function tests the same degree quantity (:meth:`_Analyzer.degree_keys`)
    and its branch taken at degree 1 does something: the author branches on the degree elsewhere too;
    (c) another method of the same class dispatches on the same degree quantity
    (:func:`_class_dispatches_on`): the class handles the plain module where it uses it.
    """
    guard_parent = ctx.parent(context.node) if context.kind == "exit" else None
    child: ast.AST = call
    for anc in ctx.ancestors(call):
        if anc is scope or anc is guard_parent:
            break
        if isinstance(anc, ast.If) and child is not anc.test:
            if _handles(anc.orelse if child in anc.body else anc.body):
                return True
        elif isinstance(anc, ast.IfExp) and child is not anc.test:
            if not _side_effect_free(anc.orelse if child is anc.body else anc.body):
                return True
        if anc is context.node:
            break
        child = anc
    if context.kind == "exit":
        guard = context.node
        if _handles(guard.body if always_exits(guard.body) else guard.orelse):
            return True
    keys = analyzer.degree_keys(context.test, scope) if context.test is not None else set()
    if not keys:
        return False
    for node in walk_function_body(scope):
        if not isinstance(node, ast.If):
            continue
        if analyzer.requires(node.test, True, scope):
            degree_one = node.orelse
        elif analyzer.requires(node.test, False, scope):
            degree_one = node.body
        else:
            continue
        if _handles(degree_one) and keys & analyzer.degree_keys(node.test, scope):
            return True
    return _class_dispatches_on(ctx, analyzer, keys, scope)


def _class_dispatches_on(ctx, analyzer: _Analyzer, keys: set[str], scope: ast.AST) -> bool:
    """(c) of :func:`_degree_one_handled`: another method of the class holding ``scope`` (same class
    body, same file) has an ``if`` on the same degree quantity (``keys``) that is a real dispatch:
    its branch taken at degree > 1 does something and calls no must-run step (it uses the sharded
    module: gathers a full state dict, saves, asserts the FSDP state), and its degree-1 path does
    something else (an ``else`` branch, or, after a degree > 1 branch that always exits, the
    statements that follow it). Such a class skips the wrap at degree 1 by design and handles the
    plain module where it uses it (transformers' ``maybe_distribute_model`` /
    ``gather_sharded_state_dict_for_save``). A re-test whose degree > 1 branch runs a must-run step
    (wraps again, registers a forward method) is another gated step, not a use."""
    klass = ctx.semantic.owner(scope) if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if klass is None:
        return False
    must_run = analyzer.must_run()
    steps = lambda name: name is not None and name in must_run  # noqa: E731
    for defs in ctx.semantic.members(klass).values():
        for method in defs:
            if method is scope:
                continue
            for node in walk_function_body(method):
                if not isinstance(node, ast.If):
                    continue
                if analyzer.requires(node.test, True, method):
                    wide, narrow = node.body, node.orelse
                elif analyzer.requires(node.test, False, method):
                    wide, narrow = node.orelse, node.body
                else:
                    continue
                if not narrow and always_exits(wide):
                    narrow = _following(ctx, node)
                if (_handles(wide) and _handles(narrow) and not _calls_named(wide, steps)
                        and keys & analyzer.degree_keys(node.test, method)):
                    return True
    return False


_CONTEXT_WORDS = {"if": "an if", "ifexp": "a conditional expression", "and": "an 'and'", "or": "an 'or'",
                  "comp": "a comprehension filter", "exit": "an early exit"}


def _evidence(ctx, analyzer: _Analyzer, context: _Context, call: ast.Call, helper: str | None) -> str:
    """What a finding rests on: where the gate is tested, where a gate name read through a property,
    function or instance attribute, and a must-run helper, are defined (this file, by line, or the
    project files that define them)."""
    gate = context.gate
    parts = [f"gate tested by {_CONTEXT_WORDS.get(context.kind, context.kind)} at line {context.node.lineno}"]
    if gate.via == "alias":
        parts.append(f"'{gate.text.split(' ', 1)[0]}' is a local bound once before the test")
    elif gate.via in ("property", "function", "attribute"):
        seen: list[str] = []
        for node in walk_nodes(gate.node):
            name = last_name(node.func if isinstance(node, ast.Call) else node) \
                if isinstance(node, (ast.Attribute, ast.Call)) else None
            if name is None or name in seen or len(seen) >= 3:
                continue
            if ctx.semantic.definitions(name) or analyzer.functions_named(name):
                seen.append(name)
                parts.append(f"'{name}' defined in {analyzer.where_defined(name)}")
            elif analyzer.attribute_values(name):
                seen.append(name)
                parts.append(f"instance attribute '{name}' stored in {analyzer.where_defined(name, True)}")
    if helper is not None:
        name = last_name(call.func)
        parts.append(f"'{name}()' always runs the step, defined in {analyzer.where_defined(name)}")
    return "; ".join(parts)


def _only_for_wrapped(ctx, call: ast.Call, scope: ast.AST, classes: frozenset[str]) -> bool:
    """True when ``call`` is reached only if the module it works on is already wrapped: an enclosing
    ``if``/ternary test, or an early-exit guard before it in the same function, requires
    ``isinstance(obj, C)`` with ``C`` one of ``classes`` (option ``wrapped-classes``, through the
    file's aliases: ``FullyShardedDataParallel as FSDP``) and ``obj`` the step's module: its first
    positional argument or the receiver of the call, by source text. Such a step runs exactly where a
    wrap ran, at every degree, which is the invariant: the degree gate around it is not the bug class
    (lerobot: ``register_fsdp_forward_method(policy, ...)`` under ``isinstance(policy, FSDPModule)``)."""
    objects = set()
    if call.args and not isinstance(call.args[0], ast.Starred):
        objects.add(ast.unparse(call.args[0]))
    if isinstance(call.func, ast.Attribute):
        objects.add(ast.unparse(call.func.value))
    if not objects:
        return False
    aliases = ctx.semantic.aliases()
    test = _IsinstanceTest(objects, classes, aliases)
    implies = test.implied

    child: ast.AST = call
    for anc in ctx.ancestors(call):
        if isinstance(anc, (ast.If, ast.IfExp)) and child is not anc.test:
            truth = child in anc.body if isinstance(anc, ast.If) else child is anc.body
            if implies(anc.test, truth):
                return True
        if isinstance(anc, ast.stmt) or anc is scope:
            for name in ("body", "orelse", "finalbody"):
                block = getattr(anc, name, None)
                if isinstance(block, list) and child in block:
                    for prev in block[: block.index(child)]:
                        if isinstance(prev, ast.If) and always_exits(prev.body) != always_exits(prev.orelse) \
                                and implies(prev.test, always_exits(prev.orelse)):
                            return True
        if anc is scope:
            break
        child = anc
    return False


class _IsinstanceTest:
    """``implied(test, truth)``: ``test`` being ``truth`` implies ``isinstance(obj, C)`` with ``obj``'s
    source text in ``objects`` and ``C`` (or every class of a tuple) in ``classes``, directly or through
    the file's ``aliases``. A class, not nested functions: a closure that calls itself is a reference
    cycle per call."""

    def __init__(self, objects: set[str], classes: frozenset[str], aliases: dict):
        self.objects, self.classes, self.aliases = objects, classes, aliases

    def wrapped_class(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Tuple):
            return bool(node.elts) and all(self.wrapped_class(e) for e in node.elts)
        name = last_name(node)
        return name is not None and (name in self.classes or self.aliases.get(name) in self.classes)

    def implied(self, test: ast.AST, truth: bool) -> bool:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.implied(test.operand, not truth)
        if isinstance(test, ast.BoolOp):
            if isinstance(test.op, ast.And) == truth:  # a required conjunct (a disjunct of a false or)
                return any(self.implied(v, truth) for v in test.values)
            return all(self.implied(v, truth) for v in test.values)
        if isinstance(test, ast.NamedExpr):
            return self.implied(test.value, truth)
        return (truth and isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                and test.func.id == "isinstance" and len(test.args) == 2 and not test.keywords
                and ast.unparse(test.args[0]) in self.objects and self.wrapped_class(test.args[1]))


def _following(ctx, stmt: ast.stmt) -> list[ast.stmt]:
    """The statements after ``stmt`` in the block that holds it."""
    parent = ctx.parent(stmt)
    for name in ("body", "orelse", "finalbody"):
        block = getattr(parent, name, None)
        if isinstance(block, list) and stmt in block:
            return block[block.index(stmt) + 1:]
    return []


class ShardGatedReset(ShardGatedResetDeclaration):
    """E9502: a must-always-run FSDP step (``reset_sharded_param``, ``fully_shard``) gated on shard degree.

    Input: a :class:`~hp_invariants.api.FileContext`; output: one finding per gated call, at the
    call, with a fix where one is prescribed (see the module docstring). Never raises on valid ASTs.
    The invariant comes from hyper-parallel issue 230 (item 2, ``TorchHSDPStateV2.lazy_init``).
    """


    def prefilter_record(self, data, options=None) -> str:
        """The must-run helper names of the project ``data`` (its closure under the configured
        ``unconditional-calls``) that the prefilter looks for, as a digest."""
        import hashlib  # noqa: PLC0415

        calls = tuple(options[self.prefilter_option]) if options and self.prefilter_option in options else self.prefilter
        names = "\n".join(sorted(project_closure(data, frozenset(calls))))
        return hashlib.blake2b(names.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    def applies_to(self, text: str, options=None) -> bool:
        """The text prefilter: a configured must-run name, or a project function that always calls
        one (in any project whose facts this process has built), occurs in ``text``. Before any
        project's facts are built (the pylint plugin builds them on first use), every file passes:
        the check itself then builds them and applies the same test."""
        calls = tuple(options[self.prefilter_option]) if options and self.prefilter_option in options else self.prefilter
        text = identifier_text(text)  # ``conﬁgure_fsdp`` calls configure_fsdp
        if any(name in text for name in calls):
            return True
        if not _BUILT:
            return True
        calls = frozenset(calls)  # the closure maps each of them to itself: searched for already
        return any(name in text for name in _closure_names(calls) if name not in calls)

    # ------------------------------------------------------------------ entry point
    def check(self, ctx):
        """Yield a finding for every must-always-run call reached only under a shard-degree gate."""
        calls = ctx.option(self, "unconditional-calls")
        index = ctx.project_data(self) if ctx.project is not None else None
        closure = project_closure(index, frozenset(calls)) if index is not None else {}
        text = identifier_text(ctx.source.text)
        if not any(name in text for name in calls) and not any(name in text for name in closure):
            return
        analyzer = _Analyzer(ctx, self, index)
        for node in ctx.nodes_of(ast.Call):  # ast.walk order; is_unconditional needs a Call
            helper = None
            if not analyzer.is_unconditional(node):
                helper = analyzer.must_run_call(node)
                if helper is None:
                    continue
            found = self._find_gate(ctx, analyzer, node)
            if found is None:
                continue
            context, scope = found
            if analyzer.is_wrap(node) and _degree_one_handled(ctx, analyzer, node, context, scope):
                continue  # a wrap skipped as a whole at degree 1, by design (see "Wrap steps")
            if _only_for_wrapped(ctx, node, scope, frozenset(ctx.option(self, "wrapped-classes"))):
                continue  # it runs exactly where a wrap ran (see "The module's wrapped state")
            if context.kind == "exit":
                confidence = Confidence.CONTROL_FLOW
            elif context.gate.via == "direct":
                confidence = Confidence.HIGH
            else:
                confidence = Confidence.INFERENCE
            fix = _build_fix(ctx, analyzer, node, context, scope)
            name = last_name(node.func)
            if helper is not None:
                # the helper runs more than the step: running it at degree 1 too is never provably safe
                name = helper
                if confidence is Confidence.HIGH:
                    confidence = Confidence.INFERENCE
                if fix is not None and fix.applicability is Applicability.SAFE:
                    fix = dataclasses.replace(fix, applicability=Applicability.UNSAFE)
            evidence = _evidence(ctx, analyzer, context, node, helper)
            yield ctx.finding(self, node, args=(name, context.gate.text, evidence), confidence=confidence, fix=fix)

    # ------------------------------------------------------------------ gate search
    # ------------------------------------------------------------------ history hooks
    def pin_repair(self, finding, before, after):
        """The shard-degree gate a change removed from the must-run step that ``finding`` reported (see the end of this module)."""
        return _pin_repair(finding, before, after)

    def repair_state(self, scope, detail):
        """Reverted when the step's call runs under a condition it did not have after the repair (any name:
        a renamed gate counts)."""
        return _repair_state(scope, detail)

    def _find_gate(self, ctx, analyzer: _Analyzer, call: ast.Call) -> tuple[_Context, ast.AST] | None:
        """Walk from ``call`` up to its function and return the innermost gating context."""
        chain: list[ast.AST] = [call]
        scope: ast.AST = ctx.tree
        for anc in ctx.ancestors(call):
            if isinstance(anc, SCOPES):
                scope = anc
                break
            chain.append(anc)
        name = analyzer.same_step(analyzer.root(last_name(call.func)))
        for index in range(1, len(chain)):
            child, anc = chain[index - 1], chain[index]
            context = self._context(analyzer, child, anc, scope, name)
            if context is not None:
                return context, scope
        if chain[-1] is not ctx.tree and isinstance(scope, SCOPES):
            return self._siblings_in(analyzer, chain[-1], scope, scope, name)
        return None

    def _siblings_in(self, analyzer, child, parent, scope, name=None):
        context = self._early_exit(analyzer, child, parent, scope, name)
        return (context, scope) if context else None

    def _context(self, analyzer: _Analyzer, child: ast.AST, anc: ast.AST, scope: ast.AST,
                 name: str | None = None) -> _Context | None:
        """The gating context ``anc`` puts around ``child``, or ``None``.

        A branch is not gated when the complementary path (the other branch of the ``if`` or
        ternary, including its whole ``elif``/``else`` chain) also calls ``name``: the step then
        runs at every shard degree.
        """
        context = self._early_exit(analyzer, child, anc, scope, name)
        if context is not None:
            return context
        if isinstance(anc, ast.If) and child is not anc.test:
            truth = child in anc.body
            gate = analyzer.requires(anc.test, truth, scope)
            if gate and _calls_named(anc.orelse if truth else anc.body, name):
                return None
            return _Context("if", anc, gate, truth, anc.test) if gate else None
        if isinstance(anc, ast.IfExp) and child is not anc.test:
            truth = child is anc.body
            gate = analyzer.requires(anc.test, truth, scope)
            if gate and _calls_named([anc.orelse if truth else anc.body], name):
                return None
            return _Context("ifexp", anc, gate, truth, anc.test) if gate else None
        if isinstance(anc, ast.BoolOp) and child in anc.values:
            is_and = isinstance(anc.op, ast.And)
            for value in anc.values[: anc.values.index(child)]:
                gate = analyzer.requires(value, is_and, scope)
                if gate:
                    return _Context("and" if is_and else "or", anc, gate, is_and, value)
            return None
        if isinstance(anc, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)) and child in (
                getattr(anc, "elt", None), getattr(anc, "key", None), getattr(anc, "value", None)):
            for generator in anc.generators:
                for cond in generator.ifs:
                    gate = analyzer.requires(cond, True, scope)
                    if gate:
                        return _Context("comp", anc, gate, True, cond)
        return None

    def _early_exit(self, analyzer: _Analyzer, child: ast.AST, parent: ast.AST, scope: ast.AST,
                    callee: str | None = None) -> _Context | None:
        """An ``if ...: return`` (raise/continue/break) before ``child`` in a block of ``parent``.

        A guard whose exiting branch also calls ``callee`` does not gate it (the step runs either way).
        """
        if not isinstance(child, ast.stmt):
            return None
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(parent, name, None)
            if not isinstance(block, list) or child not in block:
                continue
            for stmt in reversed(block[: block.index(child)]):
                if not isinstance(stmt, ast.If):
                    continue
                body_exits, else_exits = always_exits(stmt.body), always_exits(stmt.orelse)
                if body_exits == else_exits:
                    continue
                gate = analyzer.requires(stmt.test, else_exits, scope)
                if gate and not _calls_named(stmt.body if body_exits else stmt.orelse, callee):
                    return _Context("exit", stmt, gate, else_exits, stmt.test)
        return None


# ---------------------------------------------------------------------- fixes
_SEP_TOKEN = re.compile(r"\s+|\\\r?\n|#[^\r\n]*")


def _expand_parens(text: str, start: int, end: int) -> tuple[int, int]:
    """Grow ``[start, end)`` over parentheses that enclose exactly that expression."""
    while True:
        before = start - 1
        while before >= 0 and text[before] in " \t\r\n\\":
            before -= 1
        after = end
        while after < len(text) and text[after] in " \t\r\n\\":
            after += 1
        if before >= 0 and after < len(text) and text[before] == "(" and text[after] == ")":
            start, end = before, after + 1
            continue
        return start, end


def _offsets(ctx, node: ast.AST) -> tuple[int, int]:
    start, end = ctx.node_range(node)
    return ctx.source.offset(*start), ctx.source.offset(*end)


def _delete_with_keyword(ctx, region: tuple[int, int], keep: tuple[int, int], keyword: str) -> list[Edit] | None:
    """Edits deleting ``region`` (an operand plus its ``keyword`` separator) but keeping comments.

    ``keep`` is the operand span inside the region; the rest must be whitespace, continuations,
    comments and exactly one ``keyword``. Returns ``None`` when the separator holds anything else.
    """
    text = ctx.source.text
    pieces = [(region[0], keep[0]), (keep[1], region[1])]
    keyword_at: list[int] = []
    has_comment = False
    for lo, hi in pieces:
        pos = lo
        while pos < hi:
            match = _SEP_TOKEN.match(text, pos, hi)
            if match:
                has_comment = has_comment or match.group(0).startswith("#")
                pos = match.end()
                continue
            if text.startswith(keyword, pos) and pos + len(keyword) <= hi:
                keyword_at.append(pos)
                pos += len(keyword)
                continue
            return None
    if len(keyword_at) != 1:
        return None
    position = ctx.source.position
    if not has_comment:
        return [Edit(position(region[0]), position(region[1]), "")]
    kw = keyword_at[0]
    kw_end = kw + len(keyword)
    while kw_end < len(text) and text[kw_end] in " \t":
        kw_end += 1
    return [Edit(position(keep[0]), position(keep[1]), ""), Edit(position(kw), position(kw_end), "")]


def _drop_operand(ctx, boolop: ast.BoolOp, operand: ast.AST) -> list[Edit] | None:
    """Edits removing ``operand`` and its ``and``/``or`` from ``boolop`` (comments kept)."""
    values = boolop.values
    index = values.index(operand)
    spans = [_expand_parens(ctx.source.text, *_offsets(ctx, v)) for v in values]
    keyword = "and" if isinstance(boolop.op, ast.And) else "or"
    if index == 0:
        region = (spans[0][0], spans[1][0])
    else:
        region = (spans[index - 1][1], spans[index][1])
    return _delete_with_keyword(ctx, region, spans[index], keyword)


def _header_colon(ctx, test: ast.AST) -> int | None:
    """Offset of the ``:`` ending an ``if``/``elif`` header whose test is ``test`` (no comments)."""
    text = ctx.source.text
    pos = _offsets(ctx, test)[1]
    while pos < len(text) and text[pos] in " \t)\\\r\n":
        pos += 1
    return pos if pos < len(text) and text[pos] == ":" else None


def _string_interior_lines(node: ast.AST) -> set[int]:
    lines: set[int] = set()
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Constant, ast.JoinedStr)) and sub.end_lineno > sub.lineno:
            if isinstance(sub, ast.JoinedStr) or isinstance(sub.value, (str, bytes)):
                lines.update(range(sub.lineno + 1, sub.end_lineno + 1))
    return lines


def _unwrap_if(ctx, node: ast.If, binding: str = "") -> list[Edit] | None:
    """Edits removing the header of ``if gate:`` and dedenting its body (comments kept).

    ``binding``: a statement (``need = ws > 1``) that replaces the header instead, so that a name
    the test bound with ``:=`` stays bound.
    """
    src = ctx.source
    keep = binding + src.newline() if binding else ""
    colon = _header_colon(ctx, node.test)
    if colon is None or node.orelse:
        return None
    header_start = src.offset(node.lineno, 0)
    if_line = src.line_text(node.lineno)
    indent = if_line[: len(if_line) - len(if_line.lstrip())]
    if len(indent) != src.char_col(node.lineno, node.col_offset):
        return None
    if "#" in src.text[header_start:colon]:
        return None
    colon_line, _ = src.position(colon)
    first = node.body[0]
    if first.lineno == colon_line:
        start = src.offset(first.lineno, src.char_col(first.lineno, first.col_offset))
        if "\n" in src.text[colon:start] or "#" in src.text[colon:start]:
            return None
        return [Edit(src.position(header_start), src.position(start), indent + keep + (indent if keep else ""))]
    rest = src.text[colon + 1: src.offset(colon_line + 1, 0)] if colon_line < len(src.line_starts) else ""
    comment = rest.strip()
    edits: list[Edit] = []
    if comment and not comment.startswith("#"):
        return None
    if comment:
        line_end = src.offset(colon_line, len(src.line_text(colon_line)))
        edits.append(Edit(src.position(header_start), src.position(line_end),
                          indent + (binding + "  " if binding else "") + comment))
    else:
        edits.append(Edit(src.position(header_start), (colon_line + 1, 0), indent + keep if keep else ""))
    body_line = src.line_text(first.lineno)
    body_indent = body_line[: len(body_line) - len(body_line.lstrip())]
    if not body_indent.startswith(indent) or len(body_indent) <= len(indent):
        return None
    skip = _string_interior_lines(node)
    last_line = max(getattr(stmt, "end_lineno", stmt.lineno) for stmt in node.body)
    for line in range(colon_line + 1, last_line + 1):
        if line in skip:
            continue
        if src.line_text(line).startswith(body_indent):
            edits.append(Edit((line, 0), (line, len(body_indent)), indent))
    return edits


def _elif_to_else(ctx, node: ast.If) -> list[Edit] | None:
    """Edits turning ``elif gate:`` (the last branch) into ``else:``."""
    src = ctx.source
    if node.orelse or not src.line_text(node.lineno)[src.char_col(node.lineno, node.col_offset):].startswith("elif"):
        return None
    colon = _header_colon(ctx, node.test)
    start = src.offset(node.lineno, src.char_col(node.lineno, node.col_offset))
    if colon is None or "#" in src.text[start:colon]:
        return None
    return [Edit(src.position(start), src.position(colon), "else")]


def _is_elif(ctx, node: ast.If) -> bool:
    src = ctx.source
    return src.line_text(node.lineno)[src.char_col(node.lineno, node.col_offset):].startswith("elif")


def _has_walrus(node: ast.AST) -> bool:
    return any(isinstance(sub, ast.NamedExpr) for sub in ast.walk(node))


def _walrus_binding(ctx, test: ast.AST) -> str:
    """``name = value`` for a test that is exactly ``(name := value)`` (no other walrus), else ``""``."""
    if not isinstance(test, ast.NamedExpr) or _has_walrus(test.value):
        return ""
    value = ctx.text_of(test.value)
    if "\n" in value or "\r" in value:
        value = f"({value})"
    return f"{test.target.id} = {value}"


def _code_follows(ctx, node: ast.If, scope: ast.AST) -> bool:
    """True when a statement may run after the ``if``/``elif`` chain holding ``node`` (conservative)."""
    parent = ctx.parent(node)
    while isinstance(parent, ast.If) and parent.orelse == [node]:
        node, parent = parent, ctx.parent(parent)
    for name in ("body", "orelse", "finalbody"):
        block = getattr(parent, name, None)
        if isinstance(block, list) and node in block:
            return block[-1] is not node or parent is not scope
    return True


def _side_effect_free(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) or dotted_name(node) is not None


def _inert(stmts: Sequence[ast.stmt]) -> bool:
    """True for an absent or ``pass``-only ``else`` block."""
    return all(isinstance(stmt, ast.Pass) for stmt in stmts)


def _value_unchanged(ctx, node: ast.AST, call: ast.Call, other: ast.AST) -> bool:
    """True when replacing the expression ``node`` (the step ``call`` or ``other``) by ``call`` keeps
    its value where it is used: the value is discarded (an expression statement), or ``other`` is the
    module that ``call`` wraps and returns (``fully_shard(m) if ws > 1 else m``)."""
    if isinstance(ctx.parent(node), ast.Expr):
        return True
    if last_name(call.func) not in _RETURNS_FIRST_ARG or not call.args:
        return False
    name = dotted_name(other)
    return name is not None and name == dotted_name(call.args[0])


def _later_pure(analyzer: _Analyzer, values: Sequence[ast.AST], dropped: ast.AST) -> bool:
    """True when the operands after ``dropped`` in an ``and`` chain are pure: dropping the gate makes
    them run at shard degree 1 too, where the short circuit skipped them."""
    return all(analyzer.pure(v) for v in values[values.index(dropped) + 1:])


def _comp_rest_pure(analyzer: _Analyzer, node: ast.AST, test: ast.AST) -> bool:
    """True when what a comprehension evaluates after the filter ``test`` is pure, apart from its
    element (later filters, later ``for`` clauses)."""
    seen = False
    for generator in node.generators:
        if seen and not analyzer.pure(generator.iter):
            return False
        for cond in generator.ifs:
            if seen and not analyzer.pure(cond):
                return False
            seen = seen or cond is test
    return True


def _build_fix(ctx, analyzer: _Analyzer, call: ast.Call, context: _Context, scope: ast.AST):
    """Return the :class:`Fix` for a finding, or ``None`` when the shape is report-only."""
    if context.kind in ("exit", "or") or not (context.truth or context.kind == "ifexp"):
        return None
    gate, test, node = context.gate, context.test, context.node
    edits: list[Edit] | None = None
    contained = False
    description = ""
    if _has_walrus(test) and not (context.kind == "if" and _walrus_binding(ctx, test) and not _is_elif(ctx, node)):
        return None  # removing the test would unbind a name; only `if (name := gate):` keeps it
    if context.kind == "and":
        edits = _drop_operand(ctx, node, test)
        parent = ctx.parent(node)
        contained = (isinstance(parent, ast.Expr) and node.values[-1] is call and analyzer.step_pure(call)
                     and _later_pure(analyzer, node.values[:-1], test))
        description = f"drop the shard-degree gate '{ctx.text_of(test)}'"
    elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and context.truth:
        operand = next((v for v in test.values if analyzer.requires(v, True, scope)), None)
        if operand is None:
            return None
        gate = analyzer.requires(operand, True, scope)
        edits = _drop_operand(ctx, test, operand)
        description = f"drop the shard-degree gate '{ctx.text_of(operand)}' from the condition"
        contained = _later_pure(analyzer, test.values, operand)
        if context.kind == "if":
            # with an `else`/`elif`, dropping the gate also changes when that other branch runs
            contained = (contained and _inert(node.orelse) and analyzer.reset_only(node.body)
                         and not analyzer.region_names_leak(node.body, scope))
        elif context.kind == "ifexp":
            contained = (contained and node.body is call and analyzer.step_pure(call)
                         and analyzer.pure(node.orelse) and _value_unchanged(ctx, node, call, node.orelse))
        elif context.kind == "comp":
            contained = (contained and getattr(node, "elt", None) is call and analyzer.step_pure(call)
                         and isinstance(ctx.parent(node), ast.Expr) and _comp_rest_pure(analyzer, node, test))
    elif not analyzer.is_pure(test, scope):
        return None
    elif context.kind == "if":
        if always_exits(node.body) and _code_follows(ctx, node, scope):
            return None  # unwrapping `if gate: return step()` would leave the code after it unreachable
        if _is_elif(ctx, node):
            edits = _elif_to_else(ctx, node)
            description = f"turn 'elif {ctx.text_of(test)}:' into 'else:'"
        else:
            binding = _walrus_binding(ctx, test)
            edits = _unwrap_if(ctx, node, binding)
            description = f"unwrap 'if {ctx.text_of(test)}:' (dedent its body)"
            if binding:
                description += f", keeping '{binding}'"
        contained = analyzer.reset_only(node.body) and not analyzer.region_names_leak(node.body, scope)
    elif context.kind == "ifexp":
        branch, other = (node.body, node.orelse) if context.truth else (node.orelse, node.body)
        edits = [Edit(*ctx.node_range(node), ctx.text_of(branch))]
        contained = (branch is call and analyzer.step_pure(call) and _side_effect_free(other)
                     and _value_unchanged(ctx, node, call, other))
        description = f"replace the conditional expression by '{ctx.text_of(branch)}'"
    elif context.kind == "comp":
        generator = next(g for g in node.generators if test in g.ifs)
        index = generator.ifs.index(test)
        previous = generator.ifs[index - 1] if index else generator.iter
        prev_end = _expand_parens(ctx.source.text, *_offsets(ctx, previous))[1]
        span = _expand_parens(ctx.source.text, *_offsets(ctx, test))
        edits = _delete_with_keyword(ctx, (prev_end, span[1]), span, "if")
        # the comprehension's value changes at degree 1 ([] -> the wrapped modules): only a discarded one
        contained = (getattr(node, "elt", None) is call and analyzer.step_pure(call)
                     and isinstance(ctx.parent(node), ast.Expr) and _comp_rest_pure(analyzer, node, test))
        description = f"remove the filter 'if {ctx.text_of(test)}'"
    if not edits:
        return None
    safe = contained and not gate.drop_unsafe
    return ctx.make_fix(edits, description, Applicability.SAFE if safe else Applicability.UNSAFE)


# ---------------------------------------------------------------------- history hooks: the pinned repair
def _and_terms(test: ast.AST) -> list[str]:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [t for value in test.values for t in _and_terms(value)]
    return [ast.unparse(test)]


def _negated(test: ast.AST) -> str:
    return ast.unparse(ast.UnaryOp(op=ast.Not(), operand=test))


def _conditions(node: ast.AST, scope: ast.AST, parents: dict[int, ast.AST]) -> set[str]:
    """The normalized conditions under which ``node`` runs inside ``scope``: the ``and`` terms of
    enclosing ``if``/ternary tests (negated in ``else``), left operands of ``and``, and the negated
    tests of early-exit guards before it in an enclosing block."""
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
    """``if <test>: ... <call>`` for the innermost ``if`` around ``call``, else the call's statement."""
    node = call
    while id(node) in parents and node is not scope:
        node = parents[id(node)]
        if isinstance(node, ast.If):
            return f"if {ast.unparse(node.test)}: ... {ast.unparse(call)}"
    return ast.unparse(statement_of(call, parents)).splitlines()[0]


def _step_calls(scope: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in scope_nodes(scope) if isinstance(n, ast.Call) and last_name(n.func) == name]


def _pin_repair(finding, before: ast.Module, after: ast.Module) -> Repair | None:
    """A shard-degree gate removed from a must-run step: the call the finding named, and the
    conditions it runs under after the change (a gate coming back adds one)."""
    old_scope, new_scope = qualified_scopes(before).get(finding.obj), qualified_scopes(after).get(finding.obj)
    if old_scope is None or new_scope is None:
        return None
    calls = [n for n in nodes_at_line(old_scope, finding.line) if isinstance(n, ast.Call)]
    calls.sort(key=lambda n: (n.col_offset != finding.col, n.col_offset))
    name = last_name(calls[0].func) if calls else None
    if not name:
        return None
    parents = parent_map(new_scope)
    new_calls = _step_calls(new_scope, name)
    if not new_calls:
        return None
    allowed = sorted(set().union(*(_conditions(c, new_scope, parents) for c in new_calls)))
    gate = str(finding.args[1]) if len(finding.args) > 1 else ""
    detail = {"call": name, "conditions": allowed, "gate": gate}
    return Repair("ungate", finding.obj, detail, _guard_text(new_calls[0], new_scope, parents),
                  _guard_text(calls[0], old_scope, parent_map(old_scope)))


_DEGREE_WORDS = ("shard", "world", "fsdp", "degree")
"""Parts of a name that speak of the shard degree (``use_sharding``, ``get_world_size``, ``fsdp_size``)."""
_PLAIN_WORDS = frozenset({"is", "has", "use", "should", "enable", "enabled", "self", "cls", "not"})


def _about_shard_degree(condition: str, gate: str) -> bool:
    """True when the condition text ``condition`` may be about the shard degree: a name in it holds
    a word of the removed ``gate`` (``is_shard``: ``shard``) or of the degree (``shard``, ``world``,
    ``fsdp``, ``degree``), or is a gate or quantity of the rule's defaults. A condition that names
    none (``self.params is not None``, ``len(self.params) > 0``) holds at world size 1 as well."""
    try:
        tree = ast.parse(condition, mode="eval")
    except SyntaxError:
        return True  # cannot tell: as before
    if isinstance(tree.body, ast.BoolOp) and isinstance(tree.body.op, ast.Or):
        # `self.is_shard or not self._done` runs at degree 1 whenever the other side holds: a gate on the
        # degree only when every side is about it
        return all(_about_shard_degree(ast.unparse(value), gate) for value in tree.body.values)
    gate_words = {w for w in re.split(r"[^a-z0-9]+", gate.lower()) if len(w) > 1 and w not in _PLAIN_WORDS}
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name is None:
            continue
        lowered = name.lower()
        dotted = f"{last_name(node.value)}.{name}" if isinstance(node, ast.Attribute) else name  # dp_mesh.size
        if any(word in lowered for word in (*_DEGREE_WORDS, *gate_words)) or name in DEFAULT_GATES \
                or any(re.fullmatch(q, name) or re.fullmatch(q, dotted) for q in DEFAULT_QUANTITIES):
            return True
    return False


def _repair_state(scope: ast.AST, detail: dict) -> RepairState:
    parents = parent_map(scope)
    calls = _step_calls(scope, detail["call"])
    if not calls:
        return RepairState(UNKNOWN, scope, f"'{detail['call']}()' is no longer called there")
    allowed = set(detail.get("conditions", ()))
    for call in calls:
        # a condition added around the step reverts the repair when it is about the shard degree (the
        # removed gate, a shard-degree name or quantity): `if self.params is not None:` holds at world
        # size 1 too, and E9502 itself judges any new gate of another spelling
        extra = sorted(c for c in _conditions(call, scope, parents) - allowed
                       if _about_shard_degree(c, str(detail.get("gate", ""))))
        if extra:
            return RepairState(REVERTED, call, f"'{detail['call']}()' runs only when "
                                               f"{' and '.join(repr(e) for e in extra)} holds again in {scope.name}")
    return RepairState(REPAIRED)
