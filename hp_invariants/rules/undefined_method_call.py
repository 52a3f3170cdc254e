"""E9503 `undefined-method-call` (placeholder: the detection is being written)."""

from __future__ import annotations

from hp_invariants.model import Rule


class UndefinedMethodCall(Rule):
    """E9503 `undefined-method-call`."""

    rule_id = "E9503"
    symbol = "undefined-method-call"
    summary = "undefined-method-call"
    msg = "%s"

    def check(self, ctx):
        return ()
