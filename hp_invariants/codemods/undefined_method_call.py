"""Codemod for E9503: Add the missing transformers accessor pair a model calls (E9503 undefined-method-call).

Run: ``python -m libcst.tool codemod undefined_method_call.AddEmbeddingAccessorsCommand --no-format PATH`` with ``modules:
[hp_invariants.codemods]`` in ``.libcst.codemod.yaml``, or ``hp-invariants fix --select E9503 PATH``.
"""

from hp_invariants.codemods._base import RuleCodemod


class AddEmbeddingAccessorsCommand(RuleCodemod):
    """Add the missing transformers accessor pair a model calls (E9503 undefined-method-call)."""

    DESCRIPTION = "Add the missing transformers accessor pair a model calls (E9503 undefined-method-call)."
    RULE_IDS = ("E9503",)
