"""What a warm ``check`` imports and costs: wall and CPU time of ``hp-invariants check PATH`` once the
results cache holds every file (issue #25: such a run imports no rule module), and the rule-analysis
modules it imported.

Usage: ``python benchmarks/warm_imports.py PATH [TREE ...]``: for each TREE (a checkout of
hp-invariants, default the current folder; ``python -m hp_invariants`` runs from it), two runs fill
a cache folder of its own under a temporary folder, then 5 rounds of 3 runs per tree, interleaved
(the machine may be shared), give the median and minimum wall and CPU (user + sys) times; one
``-X importtime`` run gives the ``hp_invariants.cli`` import time and the modules under
``hp_invariants.rules`` (and the semantic model, astutil) imported. Prints one block per tree.
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

_HEAVY = re.compile(r"hp_invariants\.(rules(\..*)?|semantic|astutil)$")


def _run(tree: str, path: str, cache: str, *flags: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HP_INVARIANTS_CACHE_DIR=cache)
    return subprocess.run([sys.executable, *flags, "-m", "hp_invariants", "check", path], cwd=tree, env=env,
                          capture_output=True, text=True)


def main(argv: list[str]) -> int:
    """Measure every tree of ``argv[1:]`` (default: the current folder) on ``argv[0]``; return 0."""
    path, trees = argv[0], [os.path.abspath(t) for t in argv[1:]] or [os.getcwd()]
    with tempfile.TemporaryDirectory() as tmp:
        caches = {tree: os.path.join(tmp, str(i)) for i, tree in enumerate(trees)}
        times: dict[str, tuple[list[float], list[float]]] = {tree: ([], []) for tree in trees}
        for tree in trees:
            for _ in range(2):
                _run(tree, path, caches[tree])
        for _ in range(5):
            for tree in trees:
                for _ in range(3):
                    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
                    _run(tree, path, caches[tree])
                    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
                    times[tree][0].append(wall)
                    times[tree][1].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        for tree in trees:
            rows = [m for m in (re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)", line)
                                for line in _run(tree, path, caches[tree], "-X", "importtime").stderr.splitlines())
                    if m]
            cli = next((int(m[1]) for m in rows if m[3] == "hp_invariants.cli"), 0)
            heavy = sorted(m[3] for m in rows if _HEAVY.match(m[3]))
            wall, cpu = times[tree]
            print(f"{tree}\n  warm wall median {statistics.median(wall) * 1000:.0f} ms (min {min(wall) * 1000:.0f}), "
                  f"cpu median {statistics.median(cpu) * 1000:.0f} ms (min {min(cpu) * 1000:.0f}), n={len(wall)}\n"
                  f"  import hp_invariants.cli {cli / 1000:.1f} ms; rule-analysis modules imported: {heavy or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
