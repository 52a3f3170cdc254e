"""E9501 `local-tensor-view-not-detached` (placeholder: the detection is being written)."""

from __future__ import annotations

from hp_invariants.model import Rule


class LocalTensorViewNotDetached(Rule):
    """E9501 `local-tensor-view-not-detached`."""

    rule_id = "E9501"
    symbol = "local-tensor-view-not-detached"
    summary = "local-tensor-view-not-detached"
    msg = "%s"

    def check(self, ctx):
        return ()
