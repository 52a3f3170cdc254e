"""Rule documentation: a rule module's docstring is its doc page (ruff style).

``docs/rules/<symbol>.md`` is generated from it by ``scripts/gen_rule_docs.py`` and
``hp-invariants explain`` prints it, so the two never drift apart (a test compares them).
"""

from __future__ import annotations

import importlib
import inspect

from hp_invariants.api import Rule


def rule_doc(rule: Rule) -> str:
    """Return the markdown documentation of ``rule`` (the docstring of its analysis module,
    :attr:`~hp_invariants.api.Rule.analysis_module`, imported if need be), newline-terminated."""
    module = importlib.import_module(rule.analysis_module)
    text = inspect.cleandoc(module.__doc__ or f"# {rule.rule_id} {rule.symbol}\n")
    return text.rstrip("\n") + "\n"
