"""The explicit list of rules (TorchFix style: no import-time discovery).

A new rule is one new module under :mod:`hp_invariants.rules`, added here, plus its fixtures and
its doc page (generated from the module docstring by ``scripts/gen_rule_docs.py``).
"""

from __future__ import annotations

from hp_invariants.model import Rule
from hp_invariants.rules.local_tensor_view_not_detached import LocalTensorViewNotDetached
from hp_invariants.rules.shard_gated_reset import ShardGatedReset
from hp_invariants.rules.undefined_method_call import UndefinedMethodCall
from hp_invariants.rules.wrap_overlap_hard_raise import WrapOverlapHardRaise

RULES: tuple[Rule, ...] = (
    LocalTensorViewNotDetached(),
    ShardGatedReset(),
    UndefinedMethodCall(),
    WrapOverlapHardRaise(),
)


def get_rule(code: str) -> Rule:
    """Return the rule whose id or symbol is ``code`` (case-insensitive id).

    Raises ``KeyError`` when no rule matches.
    """
    for rule in RULES:
        if code.upper() == rule.rule_id or code == rule.symbol:
            return rule
    raise KeyError(code)
