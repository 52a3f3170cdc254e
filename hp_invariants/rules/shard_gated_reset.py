"""E9502 `shard-gated-reset` (placeholder: the detection is being written)."""

from __future__ import annotations

from hp_invariants.model import Rule


class ShardGatedReset(Rule):
    """E9502 `shard-gated-reset`."""

    rule_id = "E9502"
    symbol = "shard-gated-reset"
    summary = "shard-gated-reset"
    msg = "%s"

    def check(self, ctx):
        return ()
