"""Codemod for E9504: Replace the raise on an already-wrapped submodule with continue (E9504 wrap-overlap-hard-raise).

Run: ``python -m libcst.tool codemod wrap_overlap_hard_raise.SkipWrappedSubmoduleCommand --no-format PATH`` with ``modules:
[hp_invariants.codemods]`` in ``.libcst.codemod.yaml``, or ``hp-invariants fix --select E9504 PATH``.
"""

from hp_invariants.codemods._base import RuleCodemod


class SkipWrappedSubmoduleCommand(RuleCodemod):
    """Replace the raise on an already-wrapped submodule with continue (E9504 wrap-overlap-hard-raise)."""

    DESCRIPTION = "Replace the raise on an already-wrapped submodule with continue (E9504 wrap-overlap-hard-raise)."
    RULE_IDS = ("E9504",)
