"""``hp-invariants run``: the user's training script at world size 1 and N, with the invariants checked.

::

    hp-invariants run [--world-sizes 1,2] [--device cpu|cuda|npu] [--timeout S] [--rtol R]
                      [--json FILE] [--] SCRIPT [ARGS...]
    hp-invariants run [...] -m MODULE [ARGS...]

Each world size prints ``world size N: PASS`` or ``FAIL`` (a check, the script, a hang) or
``ERROR`` (not checkable: device absent, no process group) with the reason, then the consistency
line and a summary. Exit status: 0 everything passed, 1 a check failed, 2 a usage or harness
error, 130 / 143 interrupted (Ctrl-C / SIGTERM; every rank is ended first). ``cli.py`` dispatches
here; nothing in this module imports torch.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import signal
import sys
from pathlib import Path
from typing import Sequence

from hp_invariants.runtime import launcher

USAGE_EXIT = 2


def _world_sizes(text: str) -> list[int]:
    sizes = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise argparse.ArgumentTypeError(f"world sizes are positive integers separated by commas, got {text!r}")
        sizes.append(int(part))
    if len(set(sizes)) != len(sizes):
        raise argparse.ArgumentTypeError(f"a world size is repeated in {text!r}")
    return sizes


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``hp-invariants run`` (the script and its arguments come after the options)."""
    parser = argparse.ArgumentParser(
        prog="hp-invariants run",
        description="Run a training script as N local ranks (torchrun's environment), one world size after "
                    "another, check the distributed-training invariants at run time and compare the global "
                    "loss across world sizes. Exit 0: all passed; 1: a check failed; 2: usage or harness error.",
    )
    parser.add_argument("--world-sizes", type=_world_sizes, default=[1, 2], metavar="N,M",
                        help="world sizes to run, in order (default: 1,2); the first 1 is the loss reference")
    parser.add_argument("--device", choices=launcher.DEVICES, default="cpu",
                        help="cpu (gloo), cuda (nccl) or npu (torch_npu, hccl); default cpu")
    parser.add_argument("--timeout", type=_positive, default=600.0, metavar="S",
                        help="seconds one world size may take before its ranks are ended as hung (default 600)")
    parser.add_argument("--rtol", type=_non_negative, default=1e-4, metavar="R",
                        help="relative tolerance of the global-loss comparison (default 1e-4)")
    parser.add_argument("--atol", type=_non_negative, default=1e-6, metavar="A",
                        help="absolute tolerance of the global-loss comparison (default 1e-6)")
    parser.add_argument("--grace", type=_non_negative, default=3.0, metavar="S",
                        help="seconds the other ranks get to end after one failed (default 3)")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON to FILE")
    parser.add_argument("--no-checks", action="store_true",
                        help="do not install the invariant checks (only record the losses)")
    parser.add_argument("--no-static", action="store_true",
                        help="do not run `hp-invariants check` on the script's files when a rule class fails")
    parser.add_argument("--show-output", action="store_true", help="print every rank's output after each world size")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module (as python -m MODULE)")
    parser.add_argument("script", nargs="?", help="the training script (unchanged)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return parser


def _usage(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    print(f"hp-invariants run: error: {message}", file=sys.stderr)
    return USAGE_EXIT


def _parse(argv: list[str]) -> tuple[argparse.Namespace | None, int]:
    parser = build_parser()
    # `--` ends the options (torchrun-style calls without it work too)
    if "--" in argv:
        index = argv.index("--")
        head, tail = argv[:index], argv[index + 1:]
    else:
        head, tail = argv, None
    try:
        args = parser.parse_args(head)
    except SystemExit as exc:
        return None, int(exc.code or 0)
    if tail is not None:
        if args.script is not None or args.args:
            return None, _usage(parser, f"unexpected argument(s) before '--': {[args.script, *args.args]}")
        if args.module is None:
            if not tail:
                return None, _usage(parser, "no script after '--'")
            args.script, args.args = tail[0], tail[1:]
        else:
            args.args = tail
    elif args.module is not None and args.script is not None:
        args.args = [args.script, *args.args]
        args.script = None
    if args.module is None and args.script is None:
        return None, _usage(parser, "name the training script (hp-invariants run [options] -- SCRIPT [ARGS...]) "
                                    "or a module (-m MODULE)")
    if args.script is not None and not Path(args.script).is_file():
        return None, _usage(parser, f"no such script: {args.script}")
    if args.module is not None:
        top = args.module.partition(".")[0]
        if not top.isidentifier() or importlib.machinery.PathFinder.find_spec(top, [os.getcwd(), *sys.path[1:]]) is None \
                and importlib.util.find_spec(top) is None:
            return None, _usage(parser, f"no module named {top!r} (run from the folder it is found from)")
    problem = _device_problem(args.device)
    if problem:
        return None, _usage(parser, problem)
    return args, 0


def _device_problem(device: str) -> str | None:
    """What keeps the ranks from running on ``device``, found without importing torch (None: nothing)."""
    if not hasattr(os, "killpg") or not hasattr(signal, "SIGUSR1"):
        return "hp-invariants run needs a POSIX system (process groups, SIGUSR1 for the ranks' stacks)"
    if importlib.util.find_spec("torch") is None:
        return f"the ranks need torch, which {sys.executable} cannot import (pip install torch)"
    if device == "npu" and importlib.util.find_spec("torch_npu") is None:
        return (f"--device npu needs torch_npu (Ascend), which {sys.executable} cannot import: install the "
                "torch_npu build matching your torch and CANN, and source CANN's set_env.sh")
    return None


def main(argv: Sequence[str]) -> int:
    """Run the command; return the exit status (see the module docstring). An unexpected error of
    the harness itself is exit 2 with its traceback, never 1 (which means "a check failed")."""
    try:
        return _main(argv)
    except Exception:  # noqa: BLE001
        import traceback  # noqa: PLC0415

        traceback.print_exc()
        print("hp-invariants run: internal error of the harness (the traceback above). Exit 2.", file=sys.stderr)
        return USAGE_EXIT


def _main(argv: Sequence[str]) -> int:
    args, code = _parse(list(argv))
    if args is None:
        return code
    target = launcher.ScriptTarget(args.module, args.args, module=True) if args.module else \
        launcher.ScriptTarget(args.script, args.args)

    def echo(text: str) -> None:
        print(text, flush=True)

    options = launcher.Options(world_sizes=args.world_sizes, device=args.device, timeout=args.timeout,
                               rtol=args.rtol, atol=args.atol, grace=args.grace, checks=not args.no_checks,
                               static_check=not args.no_static, show_output=args.show_output, echo=echo)
    sizes = ", ".join(map(str, args.world_sizes))
    echo(f"hp-invariants run: {target.describe()} at world size(s) {sizes} on {args.device} "
         f"({launcher.BACKENDS[args.device]} unless the script names a backend), timeout {args.timeout:g} s")
    previous = launcher.install_signal_handlers()
    try:
        result = launcher.run(target, options)
    except KeyboardInterrupt:
        print("hp-invariants run: interrupted (Ctrl-C): every rank was ended", file=sys.stderr)
        return 130
    except launcher.LauncherInterrupted as exc:
        print(f"hp-invariants run: {exc}: every rank was ended", file=sys.stderr)
        return 128 + exc.signum
    finally:
        launcher.restore_signal_handlers(previous)
    echo(f"consistency: {result.consistency.status}  {result.consistency.reason}")
    echo(result.summary())
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            print(f"hp-invariants run: cannot write {args.json}: {exc.strerror or exc}", file=sys.stderr)
            return USAGE_EXIT
    return result.exit_code
