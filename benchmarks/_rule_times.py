"""Where the time of ``hp-invariants check -j1`` goes, per stage and per rule, without a profiler.

Usage: ``python -P benchmarks/_rule_times.py FILELIST``. Runs the engine's steps by hand on every
file of the list (one path per line): read, decode, prefilters, ``ast.parse``, each rule's ``check``
(its prefilter first), and the class index of the project (built or loaded once, from
``$HP_INVARIANTS_CACHE_DIR``). Prints a markdown table of seconds per stage. Only
``perf_counter`` around each step: no tracing overhead, so the shares are those of a real run
(suppressions and output formatting, both small, are left out).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict


def main(argv: list[str]) -> int:
    """Time each stage over the files listed in ``argv[0]``; print the table; return 0."""
    start_all = time.perf_counter()
    from hp_invariants import engine
    from hp_invariants.api import FileContext
    from hp_invariants.project import Project
    from hp_invariants.registry import RULES
    from hp_invariants.source import SourceFile

    imports = time.perf_counter() - start_all
    with open(argv[0], encoding="utf-8") as handle:
        paths = [line.rstrip("\n") for line in handle if line.strip()]
    project = Project()
    spent: dict[str, float] = defaultdict(float)
    ran: dict[str, int] = defaultdict(int)
    spent["python start + imports"] = imports
    facts = [r.project_facts for r in RULES if r.project_facts is not None]
    if facts and paths:
        t0 = time.perf_counter()
        for root_file in {str(project.root_of(p)): p for p in paths}.values():  # as Session.prepare does
            try:
                project.prepare(root_file, facts)
            except Exception as exc:  # noqa: BLE001
                print(f"class index failed: {exc!r}", file=sys.stderr)
        spent["project facts (build or load)"] = time.perf_counter() - t0
    for path in paths:
        t0 = time.perf_counter()
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        t1 = time.perf_counter()
        try:
            source = SourceFile.from_bytes(path, raw)
        except Exception:  # noqa: BLE001
            continue
        t2 = time.perf_counter()
        active = [r for r in RULES if r.applies_to(source.text)]
        t3 = time.perf_counter()
        spent["read"] += t1 - t0
        spent["decode (SourceFile)"] += t2 - t1
        spent["prefilters"] += t3 - t2
        if not active:
            continue
        try:
            tree = engine.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        t4 = time.perf_counter()
        spent["ast.parse"] += t4 - t3
        ctx = FileContext(source=source, tree=tree, options={}, project=project)
        for rule in active:
            t5 = time.perf_counter()
            try:
                list(rule.check(ctx))
            except Exception as exc:  # noqa: BLE001
                print(f"{rule.rule_id} failed on {path}: {exc!r}", file=sys.stderr)
            key = f"rule {rule.rule_id} {rule.symbol}"
            spent[key] += time.perf_counter() - t5
            ran[key] += 1
    total = time.perf_counter() - start_all
    print("| stage | seconds | share | files |")
    print("|---|---|---|---|")
    for key, value in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"| {key} | {value:.3f} | {value / total * 100:.0f}% | {ran.get(key, '')} |")
    print(f"| total ({len(paths)} files) | {total:.3f} | 100% | |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
