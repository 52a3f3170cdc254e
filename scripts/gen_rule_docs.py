"""Regenerate docs/rules/<symbol>.md from the rule modules' docstrings.

Run: ``python scripts/gen_rule_docs.py`` (``--check`` exits 1 if a page is out of date).
"""

from __future__ import annotations

import sys
from pathlib import Path

from hp_invariants.docs import rule_doc
from hp_invariants.registry import RULES

DOCS = Path(__file__).resolve().parent.parent / "docs" / "rules"


def main(argv: list[str]) -> int:
    """Write (or with ``--check`` compare) every rule page; return the exit code."""
    check = "--check" in argv
    stale = []
    DOCS.mkdir(parents=True, exist_ok=True)
    for rule in RULES:
        page = DOCS / f"{rule.symbol}.md"
        text = rule_doc(rule)
        if check:
            if not page.is_file() or page.read_text(encoding="utf-8") != text:
                stale.append(str(page))
        else:
            page.write_text(text, encoding="utf-8")
    for page in stale:
        print(f"out of date: {page} (run python scripts/gen_rule_docs.py)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
