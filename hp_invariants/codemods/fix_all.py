"""Codemod applying the fixes of every hp-invariants rule (what ``hp-invariants fix`` does)."""

from hp_invariants.codemods._base import RuleCodemod


class FixAllCommand(RuleCodemod):
    """Apply the safe fixes of every rule (``--unsafe-fixes`` for the unsafe ones too)."""

    DESCRIPTION = "Apply the fixes of every hp-invariants rule (E9501-E9504)."
    RULE_IDS = ()
