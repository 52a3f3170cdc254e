"""The declarations of the bundled rules and of the project facts they read: what the configuration,
the front ends and the results cache read of a rule (ids, messages, options, prefilter, the facts
kind's key and :meth:`~hp_invariants.api.ProjectFacts.root_inputs`), without its analysis.

Each declaration names its analysis with ``implementation = "module:Class"``: a subclass of the
declaration in its module under :mod:`hp_invariants.rules`, imported when a file is first checked
(see :class:`hp_invariants.api.Rule`). So a ``check`` that answers every file from the results cache
imports no rule module (``tests/test_fast_paths.py`` checks it). This module imports nothing heavy:
only :mod:`hp_invariants.api` at import time, and :mod:`hp_invariants.catalog` when E9503's facts
read the project's declared library ranges.
"""

from __future__ import annotations

from pathlib import Path

from hp_invariants.api import Option, ProjectFacts, Rule
from hp_invariants.model import Finding


# ---------------------------------------------------------------------- project facts
class ShardGateFactsDeclaration(ProjectFacts):
    """The function facts of a project (summaries of every module-level function: what it returns,
    what it always calls, assigned attribute values) that E9501, E9502 and E9504 read; the analysis
    is :class:`hp_invariants.rules.shard_gate_facts.ShardGateFacts`."""

    key = "shard-gates"
    implementation = "hp_invariants.rules.shard_gate_facts:_RegisteringFacts"


class ClassIndexFactsDeclaration(ProjectFacts):
    """E9503's class index of a project (every class, its bases and members, against the framework
    catalog); the analysis is :class:`hp_invariants.rules.undefined_method_call.index.ClassIndexFacts`."""

    key = "class-index"
    implementation = "hp_invariants.rules.undefined_method_call.index:ClassIndexFacts"

    def root_inputs(self, root: Path) -> str:
        """A digest of the files declaring the project's library ranges (the catalog the index answers
        from): :func:`hp_invariants.catalog.declarations_digest`, so a cached answer parses none."""
        from hp_invariants import catalog  # noqa: PLC0415 - only where a project's facts are asked for

        return catalog.declarations_digest(root)


FUNCTION_FACTS = ShardGateFactsDeclaration()
"""The one project function-facts object of the rules (``Rule.project_facts`` of E9501, E9502 and
E9504): one build, one cache entry per project."""

CLASS_INDEX_FACTS = ClassIndexFactsDeclaration()
"""E9503's ``Rule.project_facts``; also what the pipeline asks of every file with findings (whether its
module can be imported at all: :func:`hp_invariants.engine.never_imported`), whatever rules are on."""

PROJECT_FACTS = (FUNCTION_FACTS, CLASS_INDEX_FACTS)
"""Every kind of project facts of the bundled rules (a cached result may depend on any of them)."""


# ---------------------------------------------------------------------- E9502's option defaults
DEFAULT_CALLS = ("reset_sharded_param", "fully_shard", "register_fsdp_forward_method")
DEFAULT_WRAPS = ("fully_shard",)
DEFAULT_GATES = ("is_shard",)
DEFAULT_WRAPPED_CLASSES = ("FSDPModule", "FullyShardedDataParallel")
DEFAULT_QUANTITIES = (
    "world_size",
    "ws",
    "(dp|fsdp|shard|dp_shard|data_parallel)_world_size",
    "get_(dp_|fsdp_|shard_|data_parallel_)?world_size",
    "(dp_)?shard(_mesh)?_(size|degree)",
    "dp_shard",
    "(num|n)_shards",
    "fsdp_(size|degree)",
    "data_parallel_shard_degree",
    "(dp|data_parallel)_(size|degree)",
    r"(fsdp|shard|dp_shard|dp|data_parallel|fsdp_shard)_mesh\.size",
)
DEFAULT_DEGREES = (
    "(tp|cp|pp|ep|etp|sp|dp_replicate|dp_rep|replicate)(_world)?_(size|degree)",
    "(tp|cp|pp|ep|etp|dp_replicate)",
    "(tensor|context|pipeline|expert|sequence)_(model_)?parallel_(world_)?(size|degree)",
    "get_(tensor|context|pipeline|expert|sequence)_(model_)?parallel_world_size",
    r"(tp|cp|pp|ep|etp|sp|dp_replicate|replicate|tensor|context|pipeline|expert)_mesh\.size",
)


# ---------------------------------------------------------------------- the rules
class LocalTensorViewNotDetachedDeclaration(Rule):
    """E9501 ``local-tensor-view-not-detached``: a view bound to a DTensor's local tensor without ``.detach()``.
    The analysis: :class:`hp_invariants.rules.local_tensor_view_not_detached.LocalTensorViewNotDetached`."""

    implementation = "hp_invariants.rules.local_tensor_view_not_detached:LocalTensorViewNotDetached"
    rule_id = "E9501"
    symbol = "local-tensor-view-not-detached"
    codemod_command = "DetachLocalTensorViewCommand"
    summary = "An autograd view (.narrow(), slicing, ...) is bound to a DTensor's _local_tensor without .detach()"
    msg = ("'%s' view bound to '%s' without .detach(): the tensor stays an autograd view of its base, "
           "so is_leaf raises or turns False once the base is written in place in grad mode (evidence: %s)")
    description = (
        "Used when a view of another tensor (narrow, view, transpose, slicing, an element of split/"
        "chunk, ...) is stored into a DTensor's local-tensor attribute (default _local_tensor) "
        "directly or through local variables, without .detach(). A view created under no_grad makes "
        "param.is_leaf raise 'A view was created in no_grad mode and its base or another view of its "
        "base has been modified inplace with grad mode enabled' when the optimizer is built."
    )
    options = (
        Option("local-tensor-attrs", "csv", ("_local_tensor",),
               "Attribute names whose stores must not receive an autograd view."),
        Option("no-grad-contexts", "csv", ("no_grad", "inference_mode", "set_grad_enabled", "_no_grad"),
               "Last name components of context managers/decorators that disable grad mode."),
    )
    prefilter = ("_local_tensor",)
    prefilter_option = "local-tensor-attrs"
    project_facts = FUNCTION_FACTS  # read only for a helper imported from another module of the project
    project_optional = True
    project_on_demand = True
    repair_summary = "a `.detach()` added to a view bound to a local tensor"


class ShardGatedResetDeclaration(Rule):
    """E9502 ``shard-gated-reset``: a must-always-run FSDP step gated on the shard degree.
    The analysis: :class:`hp_invariants.rules.shard_gated_reset.ShardGatedReset`."""

    implementation = "hp_invariants.rules.shard_gated_reset:ShardGatedReset"
    rule_id = "E9502"
    symbol = "shard-gated-reset"
    codemod_command = "RemoveShardGateCommand"
    summary = "A must-always-run FSDP step (reset_sharded_param, fully_shard) skipped at shard degree 1"
    msg = ("'%s()' runs only when shard-degree gate '%s' holds; at shard degree 1 (world size 1) it is skipped "
           "(evidence: %s)")
    description = (
        "Used when a call that must run at every shard degree (reset_sharded_param, fully_shard) is "
        "reached only when a shard-degree predicate holds (is_shard, world_size > 1, ...), directly, "
        "through an alias or property, or after an early exit. At world size 1 the step is skipped: "
        "parameters stay on the meta device and the leaf invariant is never established."
    )
    options = (
        Option("unconditional-calls", "csv", DEFAULT_CALLS,
               "Last names of calls that must run at every shard degree."),
        Option("wrap-calls", "csv", DEFAULT_WRAPS,
               "The unconditional-calls that create the sharded module (wraps): gated on the shard "
               "degree, they are not reported when the code handles the unwrapped degree-1 path."),
        Option("wrapped-classes", "csv", DEFAULT_WRAPPED_CLASSES,
               "Classes of the modules a wrap makes: a step reached only when isinstance(obj, C) holds "
               "for its module runs exactly where the wrap ran, so its degree gate is not reported."),
        Option("shard-degree-gates", "csv", DEFAULT_GATES,
               "Names (bare or attribute, not method calls) whose truth means shard degree > 1."),
        Option("shard-degree-quantities", "regexp_csv", DEFAULT_QUANTITIES,
               "Regexes for shard-degree quantities; comparing one with 1 is a gate."),
        Option("parallel-degree-quantities", "regexp_csv", DEFAULT_DEGREES,
               "Regexes for other parallel degrees (tp, cp, pp, ep, replicate): comparing one with 1 is "
               "not a gate, but may join a shard-degree predicate in an 'or' (false at world size 1)."),
    )
    prefilter = DEFAULT_CALLS
    prefilter_option = "unconditional-calls"
    project_facts = FUNCTION_FACTS
    project_optional = True
    prefilter_reads_project = True
    repair_summary = "a shard-degree gate removed from a step that must run at every shard degree"


class UndefinedMethodCallDeclaration(Rule):
    """E9503 ``undefined-method-call``: a method that no class of the receiver's MRO provides.
    The analysis: :class:`hp_invariants.rules.undefined_method_call.UndefinedMethodCall`."""

    implementation = "hp_invariants.rules.undefined_method_call:UndefinedMethodCall"
    rule_id = "E9503"
    symbol = "undefined-method-call"
    codemod_command = "AddEmbeddingAccessorsCommand"
    summary = "Call of a method that no class of the receiver's MRO defines (AttributeError at run time)"
    msg = "'%s' object has no attribute '%s': no class in its MRO defines or assigns it%s"
    description = (
        "Used when self.m(), cls.m(), super().m(), or a call on a receiver of precisely known class "
        "names a method that no class of the MRO defines and no assignment creates; it raises "
        "AttributeError at run time (hyper-parallel: Qwen3VLMoeModel.get_input_embeddings deleted "
        "while forward still called it)."
    )
    options = (
        Option("mixin-class-names", "regexp_csv", (".*Mixin.*",),
               "Class names treated as mixins: no message when a project subclass defines the method."),
        Option("member-adding-decorators", "regexp_csv",
               ("add_metaclass", "with_metaclass", "s", "attrs", "define", "frozen", "mutable",
                "make_lazy_class", "inherit_fields_from", "use_kernelized_func"),
               "Class decorators (last name) that may add members; such classes are not checked."),
        Option("device-backend-methods", "csv", ("npu", "mlu", "musa", "hpu", "dipu", "gcu", "sdaa", "maca"),
               "Methods that out-of-tree device backends install on torch.nn.Module and torch.Tensor "
               "(torch.utils.generate_methods_for_privateuse1_backend): taken as defined there."),
        Option("unchecked-classes", "regexp_csv", (),
               "Classes (simple or qualified name) whose method calls are never checked."),
        Option("unchecked-modules", "regexp_csv", (r"(.*\.)?modular_[^.]*",),
               "Modules (dotted name) never checked; default: transformers' modular_*.py templates, "
               "which its modular converter rewrites (renaming attributes) and which are never run."),
    )
    prefilter = ("def",)
    project_facts = CLASS_INDEX_FACTS
    repair_summary = "a called method (re)added to its class"

    def missing_member(self, finding: Finding) -> tuple[str, str] | None:
        """``(class, member)`` of the finding: its provenance is looked up in the class's history.
        Declared here (light): the history features ask it of every rule before any file is checked."""
        if len(finding.args) < 2 or " " in str(finding.args[1]):
            return None
        return str(finding.args[0]).split(".")[-1], str(finding.args[1])


class WrapOverlapHardRaiseDeclaration(Rule):
    """E9504 ``wrap-overlap-hard-raise``: a hard ``raise`` on an already-wrapped submodule in a walk.
    The analysis: :class:`hp_invariants.rules.wrap_overlap_hard_raise.WrapOverlapHardRaise`."""

    implementation = "hp_invariants.rules.wrap_overlap_hard_raise:WrapOverlapHardRaise"
    rule_id = "E9504"
    symbol = "wrap-overlap-hard-raise"
    codemod_command = "SkipWrappedSubmoduleCommand"
    summary = "A submodule walk raises when a (possibly shared) submodule is already wrapped"
    msg = (
        "Raising when submodule '%s' of '%s' is already wrapped breaks legitimately shared submodules "
        "(e.g. one rotary embedding shared by all decoder layers); %s (evidence: %s)"
    )
    description = (
        "Used when a loop over .modules()/.named_modules()/.children()/.cells() (or any(...) over them) "
        "raises because a walked submodule carries a wrap marker or is a wrapper instance. Submodules "
        "shared between wrapped regions (a rotary embedding shared by all decoder layers) then make the "
        "second wrap fail; skip them with 'continue' and check the root module itself outside the loop."
    )
    options = (
        Option("wrap-markers", "regexp_csv", ("_is_wrapped", "_.*wrapped.*"),
               "Attribute names marking a module as wrapped (regular expressions, whole-name match)."),
        Option("wrapper-classes", "regexp_csv", (".*Wrap(per|ped).*",),
               "Wrapper class names for isinstance(sub, W) (regular expressions on the last name component)."),
    )
    prefilter = ("modules", "children", "cells")
    project_facts = FUNCTION_FACTS  # read only for a helper imported from another module of the project
    project_optional = True
    project_on_demand = True
    repair_summary = "a `raise` in a submodule walk turned into a skip"
