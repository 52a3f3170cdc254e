"""The codemod fixtures as libcst ``CodemodTest`` before/after cases, one per rule command.

Each case asserts the rule's command turns ``<case>.in.py`` into ``<case>.out.py`` (or skips when
the fix is report-only), that a second pass skips (idempotent), and that ``check`` then reports
nothing the command could fix.
"""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

from libcst.codemod import CodemodContext, CodemodTest

from fixturelib import alone_copy, codemod_cases, unexcluded_config
from hp_invariants import codemods, engine, fixer
from hp_invariants.project import Project
from hp_invariants.registry import get_rule
from hp_invariants.source import SourceFile


def _command_for(rule_symbol: str) -> type:
    return codemods.COMMANDS[get_rule(rule_symbol).rule_id]


class _RuleCodemodCase(CodemodTest):
    """Base for the generated ``CodemodTest`` classes (``TRANSFORM`` is set per rule)."""

    def setUp(self) -> None:
        folder = tempfile.TemporaryDirectory(prefix="hp-codemod-")
        self.addCleanup(folder.cleanup)
        self.config = str(unexcluded_config(Path(folder.name)))
        self.folder = Path(folder.name)

    def run_case(self, case) -> None:
        before = case.before.read_bytes().decode()
        after = case.after.read_bytes().decode()
        if "\r" in before:
            self.skipTest("CodemodTest normalizes line endings; CRLF cases run in test_fixtures.py")
        alone = str(alone_copy(case.before, self.folder / "alone"))  # the fixture as its own project
        context = CodemodContext(filename=alone)
        unchanged = CodemodTest.make_fixture_data(before) == CodemodTest.make_fixture_data(after)
        self.assertCodemod(before, after, context_override=CodemodContext(filename=alone),
                           expected_skip=unchanged, config=self.config)
        # idempotent: the expected output is left alone by a second pass
        self.assertCodemod(after, after, context_override=context, expected_skip=True, config=self.config)
        # and check reports nothing the command could fix any more
        source = SourceFile(path=alone, text=CodemodTest.make_fixture_data(after))
        session = engine.session_for_rules([get_rule(case.rule)], project=Project(use_cache=False))
        findings = session.findings(source, engine.parse(source), session.settings_for(alone))
        self.assertEqual([f for f in findings if fixer.allowed(f, unsafe=False)], [])


def _make_tests() -> dict[str, type]:
    classes: dict[str, type] = {}
    for case in codemod_cases():
        command = _command_for(case.rule)
        name = f"Test{command.__name__}"
        cls = classes.setdefault(name, type(name, (_RuleCodemodCase,), {"TRANSFORM": command}))
        method = f"test_{case.name.split('/', 1)[1]}"
        setattr(cls, method, lambda self, case=case: self.run_case(case))
    return classes


globals().update(_make_tests())

if __name__ == "__main__":  # pragma: no cover
    unittest.main()
