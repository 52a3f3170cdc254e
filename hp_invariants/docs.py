"""Rule documentation: a rule module's docstring is its doc page (ruff style).

``docs/rules/<symbol>.md`` is generated from it by ``scripts/gen_rule_docs.py`` and
``hp-invariants explain`` prints it, so the two never drift apart (a test compares them).
"""

from __future__ import annotations

import importlib
import inspect
import textwrap

from hp_invariants.api import Rule
from hp_invariants.config import EXTEND, is_list_option


def rule_doc(rule: Rule) -> str:
    """Return the markdown documentation of ``rule`` (the docstring of its analysis module,
    :attr:`~hp_invariants.api.Rule.analysis_module`, imported if need be), newline-terminated; its
    ``## Options`` section opens with how the ``extend-`` keys of its list options work (see
    :data:`hp_invariants.config.EXTEND`)."""
    module = importlib.import_module(rule.analysis_module)
    text = inspect.cleandoc(module.__doc__ or f"# {rule.rule_id} {rule.symbol}\n")
    lists = [option.name for option in rule.options if is_list_option(option)]
    if lists:
        heading = "\n## Options\n"
        note = (f"A list option set by its name replaces its default; `{EXTEND}<option>` adds entries to it "
                f"instead (`{EXTEND}{lists[0]} = [...]`), in `[tool.hp-invariants]` and in pylint's "
                f"configuration alike.")
        text = text.replace(heading, heading + textwrap.fill(note, 100, break_on_hyphens=False) + "\n\n", 1)
    return text.rstrip("\n") + "\n"
