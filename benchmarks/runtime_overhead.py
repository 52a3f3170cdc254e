"""The runtime harness's overhead: ``hp-invariants run`` against a plain torchrun of the same script.

Both run the same training script at the same world sizes (default ``examples/runtime/fsdp2_train.py``,
2 steps, world sizes 1 and 2 one after the other): ``hp-invariants run --world-sizes 1,2 -- SCRIPT``
against ``torchrun --standalone --nproc-per-node 1 SCRIPT`` then ``--nproc-per-node 2``. Each round
runs both, in alternating order; the report gives the median wall time of each, the ratio of the
medians and the median of the per-round ratios (which a slow stretch of a shared machine moves
less), and the children's CPU time. The goal of issue #24: at most 10% more wall time at 2 steps
on CPU.

Usage::

    python benchmarks/runtime_overhead.py [--rounds 5] [--script PATH] [--world-sizes 1,2]
                                          [--results benchmarks/RESULTS.md]

With ``--results``, the section between the ``runtime-overhead`` markers of that file is replaced
(added at the end when missing); the rest of the file is left as it is.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
START, END = "<!-- runtime-overhead:start -->", "<!-- runtime-overhead:end -->"


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``command``; return (wall seconds, children's CPU seconds). A failure stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(command)}\n{proc.stdout[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _machine() -> list[tuple[str, str]]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    torch_version = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True, check=False).stdout.strip() or "not installed"
    return [("nproc", str(os.cpu_count())), ("usable cores (affinity)", str(len(os.sched_getaffinity(0)))),
            ("CPU", cpu), ("OS", f"{platform.system()} {platform.release()}"),
            ("python", platform.python_version()), ("torch", torch_version),
            ("load average at start (1/5/15 min)", " / ".join(f"{x:.2f}" for x in os.getloadavg()))]


def main(argv: list[str] | None = None) -> int:
    """Run the rounds, print the table, update the results file when asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--script", default="examples/runtime/fsdp2_train.py")
    parser.add_argument("--world-sizes", default="1,2")
    parser.add_argument("--results", help="markdown file whose runtime-overhead section to replace")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.world_sizes.split(",")]
    env = dict(os.environ)
    env.pop("HP_INVARIANTS_DEVICE", None)
    harness = [sys.executable, "-m", "hp_invariants", "run", "--world-sizes", args.world_sizes, "--", args.script]
    unchecked = harness[:4] + ["--no-checks"] + harness[4:]
    plain = [[sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n), args.script]
             for n in sizes]
    machine = _machine()
    rows: list[tuple[float, float, float, float, float, float]] = []
    for index in range(args.rounds):
        def run_plain() -> tuple[float, float]:
            walls, cpus = zip(*(_timed(command, env) for command in plain))
            return sum(walls), sum(cpus)

        if index % 2 == 0:
            h_wall, h_cpu = _timed(harness, env)
            p_wall, p_cpu = run_plain()
            u_wall, u_cpu = _timed(unchecked, env)
        else:
            u_wall, u_cpu = _timed(unchecked, env)
            p_wall, p_cpu = run_plain()
            h_wall, h_cpu = _timed(harness, env)
        rows.append((h_wall, p_wall, h_cpu, p_cpu, u_wall, u_cpu))
        print(f"round {index + 1}: hp-invariants run {h_wall:.2f} s (--no-checks {u_wall:.2f} s), torchrun "
              f"{p_wall:.2f} s, ratio {h_wall / p_wall:.3f}", flush=True)
    h_med = statistics.median(r[0] for r in rows)
    p_med = statistics.median(r[1] for r in rows)
    u_med = statistics.median(r[4] for r in rows)
    per_round = statistics.median(r[0] / r[1] for r in rows)
    h_cpu = statistics.median(r[2] for r in rows)
    p_cpu = statistics.median(r[3] for r in rows)
    u_cpu = statistics.median(r[5] for r in rows)
    end_load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        START,
        "## Runtime harness overhead (`benchmarks/runtime_overhead.py`)",
        "",
        f"Generated by `python benchmarks/runtime_overhead.py --rounds {args.rounds} --script {args.script} "
        f"--world-sizes {args.world_sizes}` on {stamp}: each round runs `python {' '.join(harness[1:])}`, the same "
        f"with `--no-checks`, and, for each world size, `python -m torch.distributed.run --standalone "
        f"--nproc-per-node N {args.script}` (torchrun), in alternating order; medians over the rounds. Wall time "
        "is the whole command (process start, torch imports, rendezvous, 2 training steps, shutdown; for the "
        "harness also its checks, the parameter digests and the loss comparison). torchrun's agent process "
        "imports torch before it starts the ranks; the harness's launcher never does.",
        "",
        "| | |",
        "|---|---|",
        *[f"| {key} | {value} |" for key, value in machine],
        f"| load average at end | {end_load} |",
        "",
        "| command | wall s (median) | CPU s, children (median) |",
        "|---|---|---|",
        f"| `hp-invariants run --world-sizes {args.world_sizes}` | {h_med:.2f} | {h_cpu:.2f} |",
        f"| `hp-invariants run --no-checks --world-sizes {args.world_sizes}` (the checks' own cost) | {u_med:.2f} | "
        f"{u_cpu:.2f} |",
        f"| torchrun, world sizes {args.world_sizes} one after the other | {p_med:.2f} | {p_cpu:.2f} |",
        "",
        f"**Overhead over torchrun: {h_med / p_med:.3f}x wall (ratio of the medians), {per_round:.3f}x (median of "
        f"the per-round ratios), {h_cpu / p_cpu:.3f}x CPU.** Goal: at most 1.10x wall. The checks themselves: "
        f"{h_med / u_med:.3f}x wall, {h_cpu / u_cpu:.3f}x CPU of the harness without them.",
        "",
        "Per round (harness / --no-checks / torchrun wall s): "
        + ", ".join(f"{r[0]:.2f}/{r[4]:.2f}/{r[1]:.2f}" for r in rows) + ".",
        END,
    ]
    section = "\n".join(lines)
    print(section)
    if args.results:
        path = Path(args.results)
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        if START in text and END in text:
            text = text[: text.index(START)] + section + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
