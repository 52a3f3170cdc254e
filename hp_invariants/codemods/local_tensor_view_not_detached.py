"""Codemod for E9501: Append .detach() where a view is bound to a DTensor's _local_tensor (E9501 local-tensor-view-not-detached).

Run: ``python -m libcst.tool codemod local_tensor_view_not_detached.DetachLocalTensorViewCommand --no-format PATH`` with ``modules:
[hp_invariants.codemods]`` in ``.libcst.codemod.yaml``, or ``hp-invariants fix --select E9501 PATH``.
"""

from hp_invariants.codemods._base import RuleCodemod


class DetachLocalTensorViewCommand(RuleCodemod):
    """Append .detach() where a view is bound to a DTensor's _local_tensor (E9501 local-tensor-view-not-detached)."""

    DESCRIPTION = "Append .detach() where a view is bound to a DTensor's _local_tensor (E9501 local-tensor-view-not-detached)."
    RULE_IDS = ("E9501",)
