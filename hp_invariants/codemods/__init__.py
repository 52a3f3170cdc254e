"""libcst codemods: one command per registered rule, plus ``FixAllCommand``.

Each command is derived from the registry (:func:`hp_invariants.codemods._base.command_for`; its name
is ``Rule.codemod_command``, listed by ``hp-invariants rules``) and is a thin adapter over the one
per-file pipeline, so it fixes exactly what ``hp-invariants check`` reports under the file's own
configuration and suppressions.

With ``modules: [hp_invariants.codemods]`` in ``.libcst.codemod.yaml``:
``python -m libcst.tool codemod <rule module>.<Command> --no-format PATH`` (e.g.
``shard_gated_reset.RemoveShardGateCommand``); without a config file:
``python -m libcst.tool codemod -x hp_invariants.codemods.<Command> --no-format PATH``.
"""

from hp_invariants.codemods._base import RuleCodemod, command_for
from hp_invariants.codemods.fix_all import FixAllCommand
from hp_invariants.registry import RULES

COMMANDS = {rule.rule_id: command_for(rule) for rule in RULES}
"""Rule id -> codemod command class (of the rules registered when this package was imported; for
a rule registered later, :func:`command_for`)."""

globals().update({command.__name__: command for command in COMMANDS.values()})

__all__ = ["COMMANDS", "FixAllCommand", "RuleCodemod", "command_for",
           *(command.__name__ for command in COMMANDS.values())]
