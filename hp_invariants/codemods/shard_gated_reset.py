"""Codemod for E9502: Drop the shard-degree gate in front of reset_sharded_param()/fully_shard() (E9502 shard-gated-reset).

Run: ``python -m libcst.tool codemod shard_gated_reset.RemoveShardGateCommand --no-format PATH`` with ``modules:
[hp_invariants.codemods]`` in ``.libcst.codemod.yaml``, or ``hp-invariants fix --select E9502 PATH``.
"""

from hp_invariants.codemods._base import RuleCodemod


class RemoveShardGateCommand(RuleCodemod):
    """Drop the shard-degree gate in front of reset_sharded_param()/fully_shard() (E9502 shard-gated-reset)."""

    DESCRIPTION = "Drop the shard-degree gate in front of reset_sharded_param()/fully_shard() (E9502 shard-gated-reset)."
    RULE_IDS = ("E9502",)
