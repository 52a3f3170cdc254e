"""Run pylint with the given arguments and report the time spent inside the hp-invariants plugin.

Usage: ``python benchmarks/_pylint_timed.py REPORT_FILE [pylint args...]``. Equivalent to
``pylint [pylint args...]``; when ``--load-plugins=hp_invariants.checkers`` is among the arguments,
``HpInvariantsChecker.process_module`` is wrapped with a ``perf_counter`` timer and the total
seconds spent in it (and the number of modules) are written to REPORT_FILE as
``plugin_seconds=S modules=N``. Without the plugin nothing is patched (so the baseline pays no
import of hp_invariants). Exits with pylint's exit status.
"""

from __future__ import annotations

import sys
import time


def main(argv: list[str]) -> int:
    """Run pylint on ``argv[1:]``; write the plugin's own time to ``argv[0]``; return pylint's status."""
    report, args = argv[0], argv[1:]
    spent = [0.0, 0]
    if any("hp_invariants.checkers" in arg for arg in args):
        from hp_invariants.checkers import HpInvariantsChecker

        original = HpInvariantsChecker.process_module

        def timed(self, node):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return original(self, node)
            finally:
                spent[0] += time.perf_counter() - start
                spent[1] += 1

        HpInvariantsChecker.process_module = timed  # type: ignore[method-assign]
    from pylint.lint import Run

    try:
        status = Run(args, exit=False).linter.msg_status
    except SystemExit as exc:  # pylint exits on usage errors even with exit=False
        status = int(exc.code or 0)
    with open(report, "w", encoding="utf-8") as handle:
        handle.write(f"plugin_seconds={spent[0]:.6f} modules={spent[1]}\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
