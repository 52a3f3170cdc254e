"""The shared base of the codemod commands: run the rule's detection, apply its fixes.

A codemod here is a thin :class:`libcst.codemod.CodemodCommand` over
:func:`hp_invariants.fixer.fix_source`, so it changes exactly what ``hp-invariants check``
reports and nothing else, and it is idempotent (a second run finds nothing to fix).
"""

from __future__ import annotations

import argparse
from typing import ClassVar, Sequence

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext, SkipFile

from hp_invariants import engine, fixer
from hp_invariants.model import Rule
from hp_invariants.registry import RULES
from hp_invariants.source import SourceFile

_PROJECT = engine.Project()


class RuleCodemod(CodemodCommand):
    """Apply the fixes of ``RULE_IDS`` to a module (all rules when empty).

    Options: ``--unsafe-fixes`` also applies fixes marked unsafe. Raises
    :class:`libcst.codemod.SkipFile` when nothing applies, so libcst reports the file as skipped.
    """

    RULE_IDS: ClassVar[Sequence[str]] = ()

    def __init__(self, context: CodemodContext, unsafe_fixes: bool = False) -> None:
        super().__init__(context)
        self.unsafe_fixes = unsafe_fixes

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        """Add ``--unsafe-fixes`` to libcst's command line."""
        arg_parser.add_argument("--unsafe-fixes", dest="unsafe_fixes", action="store_true",
                                help="also apply fixes marked unsafe")

    @classmethod
    def rules(cls) -> list[Rule]:
        """The rules this codemod fixes."""
        return [r for r in RULES if not cls.RULE_IDS or r.rule_id in cls.RULE_IDS]

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        """Return ``tree`` with the rule's fixes applied (re-parsed with libcst)."""
        path = self.context.filename or "<module>"
        source = SourceFile(path=path, text=tree.code, encoding=tree.encoding)
        project = (lambda: _PROJECT.index_for(path)) if self.context.filename else None
        outcome = fixer.fix_source(source, self.rules(), project=project, unsafe=self.unsafe_fixes)
        if not outcome.changed:
            raise SkipFile("nothing to fix")
        return cst.parse_module(outcome.text, config=tree.config_for_parsing)
