"""The explicit list of rules (TorchFix style: no import-time discovery).

A new rule is one new module under :mod:`hp_invariants.rules`, one line here, its fixtures under
``tests/fixtures/<symbol>/`` and its doc page (generated from the module docstring by
``scripts/gen_rule_docs.py``). Everything else (the CLI's ``rules``/``explain``/``--select``, the
pylint plugin's messages and options, the codemod commands, the benchmarks, the generic tests)
reads :data:`RULES`.
"""

from __future__ import annotations

from hp_invariants.api import Rule
from hp_invariants.rules.local_tensor_view_not_detached import LocalTensorViewNotDetached
from hp_invariants.rules.shard_gated_reset import ShardGatedReset
from hp_invariants.rules.undefined_method_call import UndefinedMethodCall
from hp_invariants.rules.wrap_overlap_hard_raise import WrapOverlapHardRaise

RULES: list[Rule] = [
    LocalTensorViewNotDetached(),
    ShardGatedReset(),
    UndefinedMethodCall(),
    WrapOverlapHardRaise(),
]
"""Every rule, in id order. One list object: modules that imported it see :func:`register` calls."""


def register(rule: Rule) -> None:
    """Add ``rule`` (a plugin's or a test's) to :data:`RULES`. Raises ``ValueError`` when its id or
    symbol is taken. The pylint plugin builds its messages when it is imported: register first."""
    for known in RULES:
        if rule.rule_id == known.rule_id or rule.symbol == known.symbol:
            raise ValueError(f"rule {rule.rule_id} {rule.symbol} clashes with {known.rule_id} {known.symbol}")
    RULES.append(rule)


def unregister(rule: Rule) -> None:
    """Remove ``rule`` from :data:`RULES` (tests)."""
    RULES.remove(rule)


def get_rule(code: str) -> Rule:
    """Return the rule whose id or symbol is ``code`` (case-insensitive id).

    Raises ``KeyError`` when no rule matches.
    """
    for rule in RULES:
        if code.upper() == rule.rule_id or code == rule.symbol:
            return rule
    raise KeyError(code)
