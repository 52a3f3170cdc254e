"""The explicit list of rules (TorchFix style: no import-time discovery).

A new rule is one declaration in :mod:`hp_invariants.declarations` (ids, messages, options,
prefilter, project facts, and ``implementation`` naming its analysis), one new module under
:mod:`hp_invariants.rules` holding the analysis (a subclass of the declaration), one line here, its
fixtures under ``tests/fixtures/<symbol>/`` and its doc page (generated from the analysis module's
docstring by ``scripts/gen_rule_docs.py``). Everything else (the CLI's ``rules``/``explain``/
``--select``, the pylint plugin's messages and options, the codemod commands, the benchmarks, the
generic tests) reads :data:`RULES`. The list holds the declarations: no rule module is imported
until a file is checked (a ``check`` answered from the results cache imports none).
"""

from __future__ import annotations

from hp_invariants.api import Rule
from hp_invariants.declarations import (LocalTensorViewNotDetachedDeclaration, ShardGatedResetDeclaration,
                                        UndefinedMethodCallDeclaration, WrapOverlapHardRaiseDeclaration)

RULES: list[Rule] = [
    LocalTensorViewNotDetachedDeclaration(),
    ShardGatedResetDeclaration(),
    UndefinedMethodCallDeclaration(),
    WrapOverlapHardRaiseDeclaration(),
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
