"""The codemod commands, derived from the registry: thin libcst adapters over the one pipeline.

A codemod here is a :class:`libcst.codemod.CodemodCommand` over
:func:`hp_invariants.fixer.fix_source`, run through the same :class:`~hp_invariants.engine.Session`
as ``hp-invariants check``: the file's own configuration (its nearest ``[tool.hp-invariants]``
table: ``select``/``ignore``, ``per-file-ignores``, ``extend-exclude``, rule options) and its
suppression comments apply, so it changes exactly what ``check`` reports and nothing else, and it
is idempotent (a second run finds nothing to fix).

:func:`command_for` makes one command class per rule (named by ``Rule.codemod_command``); the
modules ``hp_invariants.codemods.<rule module>`` expose them for ``python -m libcst.tool codemod``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import ClassVar, Sequence

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext, SkipFile

from hp_invariants import engine, fixer
from hp_invariants.config import Resolver
from hp_invariants.api import Rule
from hp_invariants.registry import RULES
from hp_invariants.source import SourceFile

def session_for(rules: Sequence[Rule], config: str | None = None) -> engine.Session:
    """A session over ``rules``: per-file configuration read from each file's pyproject (``config``:
    this pyproject for every file, as the CLI's ``--config``), project facts cached as for the CLI.
    A command keeps one for the files it transforms (libcst reuses a command for many files)."""
    return engine.default_session(Resolver(rules, config_file=Path(config) if config else None))


class RuleCodemod(CodemodCommand):
    """Apply the fixes of the rules ``RULE_IDS`` (all rules when empty) to a module.

    Options: ``--unsafe-fixes`` also applies fixes marked unsafe; ``--config PYPROJECT`` reads the
    configuration from that file for every module. Raises
    :class:`libcst.codemod.SkipFile` when nothing applies or the file matches an ``exclude`` pattern of
    its configuration (libcst walks folders itself and cannot say which files were named, so exclude
    applies to all, as for the pylint plugin; libcst reports the file as skipped), and
    :class:`hp_invariants.config.ConfigError` for an invalid configuration.
    """

    RULE_IDS: ClassVar[Sequence[str]] = ()

    def __init__(self, context: CodemodContext, unsafe_fixes: bool = False, config: str | None = None) -> None:
        super().__init__(context)
        self.unsafe_fixes = unsafe_fixes
        self.config = config
        self._session: engine.Session | None = None

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        """Add ``--unsafe-fixes`` and ``--config`` to libcst's command line."""
        arg_parser.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true",
                                help="also apply fixes marked unsafe")
        arg_parser.add_argument("--config", dest="config", metavar="PYPROJECT", default=None,
                                help="read [tool.hp-invariants] from this file for every module "
                                     "(default: each module's nearest pyproject.toml that has the table)")

    @classmethod
    def rules(cls) -> list[Rule]:
        """The rules this codemod fixes."""
        return [r for r in _registry() if not cls.RULE_IDS or r.rule_id in cls.RULE_IDS]

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        """Return ``tree`` with the fixes applied (re-parsed with libcst)."""
        path = self.context.filename or os.path.join(os.getcwd(), "<module>.py")
        if self._session is None:
            self._session = session_for(_registry(), self.config)
        session = self._session
        if session.resolver is not None and session.resolver.config_for(path).is_excluded(path):
            raise SkipFile("excluded by the configuration")  # libcst walks folders itself: exclude applies
        settings = session.settings_for(path)
        source = SourceFile(path=path, text=tree.code, encoding=tree.encoding)
        outcome = fixer.fix_source(session, source, settings, unsafe=self.unsafe_fixes, rules=self.rules())
        if not outcome.changed:
            raise SkipFile("nothing to fix")
        return cst.parse_module(outcome.text, config=tree.config_for_parsing)


def _registry() -> tuple[Rule, ...]:
    """The registry's rules, read at call time (so a rule registered later is seen)."""
    return tuple(RULES)


_COMMANDS: dict[str, type[RuleCodemod]] = {}


def command_for(rule: Rule) -> type[RuleCodemod]:
    """Return the codemod command class of ``rule`` (made once per rule id), named
    ``rule.command_name``, described by the rule's summary."""
    found = _COMMANDS.get(rule.rule_id)
    if found is None:
        doc = f"Apply the fix of {rule.rule_id} {rule.symbol}: {rule.summary}."
        found = type(rule.command_name, (RuleCodemod,), {
            "__doc__": doc, "DESCRIPTION": doc, "RULE_IDS": (rule.rule_id,),
            "__module__": f"hp_invariants.codemods.{rule.analysis_module.rsplit('.', 1)[-1]}",
        })
        _COMMANDS[rule.rule_id] = found
    return found


def export_commands(namespace: dict, module: str) -> list[str]:
    """Define in ``namespace`` the command of every registered rule whose module's last name is the
    last name of ``module`` (``hp_invariants.codemods.shard_gated_reset`` gets E9502's); returns the
    names defined."""
    short = module.rsplit(".", 1)[-1]
    names = []
    for rule in _registry():
        rule_module = rule.analysis_module
        if rule_module.rsplit(".", 1)[-1] == short or rule_module.endswith(f".{short}.__init__"):
            command = command_for(rule)
            namespace[command.__name__] = command
            names.append(command.__name__)
    return names
