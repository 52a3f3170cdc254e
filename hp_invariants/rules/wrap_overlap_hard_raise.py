"""E9504 `wrap-overlap-hard-raise` (placeholder: the detection is being written)."""

from __future__ import annotations

from hp_invariants.model import Rule


class WrapOverlapHardRaise(Rule):
    """E9504 `wrap-overlap-hard-raise`."""

    rule_id = "E9504"
    symbol = "wrap-overlap-hard-raise"
    summary = "wrap-overlap-hard-raise"
    msg = "%s"

    def check(self, ctx):
        return ()
