"""Rule documentation: a rule module's docstring is its doc page (ruff style).

``docs/rules/<symbol>.md`` is generated from it by ``scripts/gen_rule_docs.py`` and
``hp-invariants explain`` prints it, so the two never drift apart (a test compares them).
"""

from __future__ import annotations

import inspect
import sys

from hp_invariants.api import Rule


def rule_doc(rule: Rule) -> str:
    """Return the markdown documentation of ``rule`` (its module docstring), newline-terminated."""
    module = sys.modules[type(rule).__module__]
    text = inspect.cleandoc(module.__doc__ or f"# {rule.rule_id} {rule.symbol}\n")
    return text.rstrip("\n") + "\n"
