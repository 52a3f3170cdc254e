"""Codemod applying the fixes of every hp-invariants rule (what ``hp-invariants fix`` does)."""

from hp_invariants.codemods._base import RuleCodemod


class FixAllCommand(RuleCodemod):
    """Apply the safe fixes of every registered rule (``--unsafe-fixes`` for the unsafe ones too)."""

    DESCRIPTION = "Apply the fixes of every hp-invariants rule (what `hp-invariants fix` does)."
    RULE_IDS = ()
