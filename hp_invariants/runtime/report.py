"""What a run found: each world size's verdict, the loss comparison across world sizes, text, JSON.

Pure data and text, no processes and no torch: :mod:`~hp_invariants.runtime.launcher` fills these
objects from the ranks' result files and stacks; the CLI prints :meth:`RunReport.render`, writes
:meth:`RunReport.to_json` for ``--json``, and exits with :attr:`RunReport.exit_code`.

The global loss of a step is the mean over the ranks of the scalar passed to ``backward`` in that
step (summed over the backward calls of one optimizer step, so gradient accumulation over scaled
micro-batches gives the step's loss; without any optimizer step each backward call is a step). It
must agree at every world size with the reference world size (1 when it ran) within
``|a - b| <= atol + rtol * |b|``: a loss averaged twice (divided by the world size and averaged
again) drifts by the world size's factor at step 0. The parameters' digests taken at optimizer
construction (full values, gathered) tell whether the initialisation itself depends on the layout.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, ERROR, SKIPPED = "PASS", "FAIL", "ERROR", "SKIPPED"
INIT_RTOL = 1e-6
STACK_LINES = 14


# ----------------------------------------------------------------------------------------- stacks
_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)[^\n]*:\s*$", re.M)
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]*)", line (?P<line>\d+) in (?P<func>\S+)', re.M)


@dataclass
class Frame:
    """One frame of a faulthandler dump (most recent call first)."""

    file: str
    line: int
    function: str

    def render(self) -> str:
        """``File "x.py", line 3 in f``, as faulthandler writes it (paths under the current folder
        relative to it)."""
        return f'File "{short_path(self.file)}", line {self.line} in {self.function}'


def short_path(path: str) -> str:
    """``path`` relative to the current folder when it lies inside it, else unchanged."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if relative.startswith("..") or os.path.isabs(relative) or path.startswith("<") else relative


def parse_stack(text: str) -> list[Frame]:
    """The main thread's frames of a faulthandler dump (most recent call first).

    A dump holds one block per thread. Threads other than the main one start in
    ``threading.py``'s ``_bootstrap``; of the others, the one running the rank's bootstrap
    (``hp_invariants/runtime/rank.py``) is the main thread, else the ``Current thread``, else the first.
    """
    if not text:
        return []
    starts = list(_THREAD.finditer(text))
    blocks: list[tuple[str, list[Frame]]] = []
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        frames = [Frame(m["file"], int(m["line"]), m["func"]) for m in _FRAME.finditer(text, match.end(), end)]
        blocks.append((match.group(1), frames))
    if not blocks:
        return []
    main = [(kind, frames) for kind, frames in blocks
            if not any(f.function == "_bootstrap" and f.file.endswith("threading.py") for f in frames)] or blocks
    for _, frames in main:
        if any(f.file.replace("\\", "/").endswith("hp_invariants/runtime/rank.py") for f in frames):
            return frames
    for kind, frames in main:
        if kind == "Current thread":
            return frames
    return main[0][1]


def _is_distributed(frame: Frame) -> bool:
    path = frame.file.replace("\\", "/")
    return "/torch/distributed/" in path


def _is_library(frame: Frame) -> bool:
    path = frame.file.replace("\\", "/")
    return ("/torch/" in path or "/site-packages/" in path or "/hp_invariants/runtime/" in path
            or path.startswith("<") or "/lib/python3" in path)


def waiting_in(frames: list[Frame]) -> tuple[bool, str]:
    """Whether a stack is blocked in a torch.distributed call, and a one-line description of where."""
    user = next((f for f in frames if not _is_library(f)), None)
    at = f"{short_path(user.file)}:{user.line} in {user.function}" if user else (frames[0].render() if frames else "?")
    collective = next((f for f in frames if _is_distributed(f)), None)
    if collective is None:
        return False, f"not in a collective (at {at})"
    # the outermost torch.distributed frame of the innermost run of them names the call the script made
    index = frames.index(collective)
    while index + 1 < len(frames) and _is_distributed(frames[index + 1]):
        index += 1
    called = frames[index]
    if called.function in ("wrapper", "inner", "_fn") and index > 0:  # c10d's logging decorator
        called = frames[index - 1]
    return True, f"waiting in {called.function} ({called.file.rsplit('/', 1)[-1]}:{called.line}), called from {at}"


# ---------------------------------------------------------------------------------------- results
@dataclass
class RankOutcome:
    """How one rank ended: its exit status, its result file, and what the harness saw."""

    rank: int
    exit_code: int | None
    result: dict[str, Any] | None
    log_tail: str = ""
    stack: list[Frame] = field(default_factory=list)
    waiting: str | None = None
    ended_by_harness: bool = False

    @property
    def failed(self) -> bool:
        """A non-zero exit, a signal, a missing result, or a recorded violation."""
        if self.result and self.result.get("violations"):
            return True
        return self.exit_code != 0 or self.result is None

    def to_json(self) -> dict[str, Any]:
        """The rank's part of the JSON report."""
        result = self.result or {}
        error = result.get("error") or None
        return {
            "rank": self.rank,
            "exit_code": self.exit_code,
            "status": result.get("status", "no result"),
            "error": ({k: error.get(k) for k in ("type", "message", "traceback", "module_receiver")}
                      if error else None),
            "harness_error": result.get("harness_error"),
            "checks": result.get("checks", []),
            "losses": result.get("losses", []),
            "steps": result.get("steps", 0),
            "process_group": result.get("process_group", False),
            "backend": result.get("backend"),
            "ended_by_harness": self.ended_by_harness,
            "waiting": self.waiting,
            "stack": [f.render() for f in self.stack],
            "log_tail": self.log_tail,
        }


def step_losses(result: dict[str, Any]) -> list[float]:
    """A rank's loss per optimizer step (see the module docstring)."""
    losses = result.get("losses") or []
    if not losses:
        return []
    if not result.get("steps"):
        return [float(value) for _, value in losses]
    steps: dict[int, float] = {}
    for step, value in losses:
        steps[int(step)] = steps.get(int(step), 0.0) + float(value)
    return [steps[k] for k in sorted(steps)]


@dataclass
class WorldResult:
    """The verdict of one world size: PASS, FAIL (a check or the script failed) or ERROR (not checkable)."""

    world_size: int
    status: str
    reason: str
    ranks: list[RankOutcome] = field(default_factory=list)
    rule: dict[str, Any] | None = None
    failed_rank: int | None = None
    details: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timed_out: bool = False
    attempts: int = 1
    port: int | None = None
    wall_s: float = 0.0

    @property
    def results(self) -> list[dict[str, Any]]:
        """The ranks' result files that exist, in rank order."""
        return [r.result for r in self.ranks if r.result]

    @property
    def global_losses(self) -> list[float]:
        """The mean over the ranks of each step's loss (over the steps every rank recorded)."""
        per_rank = [step_losses(result) for result in self.results]
        if not per_rank or len(per_rank) != self.world_size or not all(per_rank):
            return []
        steps = min(len(losses) for losses in per_rank)
        return [sum(losses[k] for losses in per_rank) / len(per_rank) for k in range(steps)]

    @property
    def init_digest(self) -> dict[str, Any] | None:
        """Rank 0's parameter digest at optimizer construction."""
        for result in self.results:
            if result.get("rank") == 0:
                return result.get("init_digest")
        return None

    def headline(self) -> str:
        """``world size N: STATUS  reason``."""
        return f"world size {self.world_size}: {self.status}  {self.reason}"

    def to_json(self) -> dict[str, Any]:
        """This world size's part of the JSON report."""
        return {
            "world_size": self.world_size,
            "status": self.status,
            "reason": self.reason,
            "rule": self.rule,
            "failed_rank": self.failed_rank,
            "details": self.details,
            "notes": self.notes,
            "timed_out": self.timed_out,
            "global_losses": self.global_losses,
            "attempts": self.attempts,
            "port": self.port,
            "wall_s": round(self.wall_s, 3),
            "ranks": [rank.to_json() for rank in self.ranks],
        }


@dataclass
class Consistency:
    """The comparison of the global loss (and the initial parameters) across world sizes."""

    status: str
    reason: str
    reference: int | None = None
    rtol: float = 0.0
    atol: float = 0.0
    compared: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The consistency part of the JSON report."""
        return {"status": self.status, "reason": self.reason, "reference_world_size": self.reference,
                "rtol": self.rtol, "atol": self.atol, "compared": self.compared}


def _digest_differences(reference: dict[str, Any] | None, other: dict[str, Any] | None) -> tuple[list[str], int]:
    """Parameters whose digests differ (same name and shape), and how many were comparable."""
    if not reference or not other:
        return [], 0
    differ, comparable = [], 0
    for name, ref in reference.items():
        mine = other.get(name)
        if mine is None or mine.get("shape") != ref.get("shape"):
            continue
        comparable += 1
        for a, b in zip(ref["stats"], mine["stats"]):
            if not math.isclose(a, b, rel_tol=INIT_RTOL, abs_tol=1e-9 * max(1.0, abs(ref["stats"][1]) ** 0.5)):
                differ.append(name)
                break
    return differ, comparable


def _hint(ratio: float, world_size: int, reference: int) -> str:
    factor = world_size / reference
    if factor != 1 and math.isclose(ratio, 1 / factor, rel_tol=0.02):
        return (f" (1/{factor:g} of world size {reference}'s: the loss is divided by the world size once too "
                "often, e.g. averaged over the ranks again although the gradients are already averaged)")
    if factor != 1 and math.isclose(ratio, factor, rel_tol=0.02):
        return f" ({factor:g} times world size {reference}'s: the loss is summed over the ranks, not averaged)"
    return ""


def compare(results: list[WorldResult], rtol: float, atol: float) -> Consistency:
    """Compare every passing world size's global losses and digests with the reference world size."""
    ran = [r for r in results if r.status == PASS]
    if len({r.world_size for r in results}) < 2:
        return Consistency(SKIPPED, "one world size only", rtol=rtol, atol=atol)
    sizes = [r.world_size for r in results]
    reference_size = 1 if 1 in sizes else min(sizes)
    reference = next(r for r in results if r.world_size == reference_size)
    if reference.status != PASS:
        return Consistency(SKIPPED, f"world size {reference_size} (the reference) did not pass",
                           reference_size, rtol, atol)
    ref_losses = reference.global_losses
    compared: list[dict[str, Any]] = []
    failures: list[str] = []
    for other in ran:
        if other is reference:
            continue
        entry: dict[str, Any] = {"world_size": other.world_size}
        differ, comparable = _digest_differences(reference.init_digest, other.init_digest)
        entry["init_params_compared"] = comparable
        entry["init_params_differing"] = differ
        if differ:
            failures.append(
                f"the initialisation depends on the layout: at optimizer construction {len(differ)} of "
                f"{comparable} parameter(s) differ between world sizes {reference_size} and {other.world_size} "
                f"({', '.join(differ[:4])}{', ...' if len(differ) > 4 else ''}): the script initialises the "
                "shards, not the full parameters, so its training depends on the world size")
        losses = other.global_losses
        entry["steps"] = min(len(losses), len(ref_losses))
        if not ref_losses or not losses:
            entry["losses"] = "not recorded"
            compared.append(entry)
            continue
        if len(losses) != len(ref_losses):
            failures.append(f"world size {other.world_size} recorded {len(losses)} step(s), world size "
                            f"{reference_size} {len(ref_losses)}")
        worst = 0.0
        for step, (a, b) in enumerate(zip(losses, ref_losses)):
            error = abs(a - b)
            worst = max(worst, error / abs(b) if b else error)
            if not error <= atol + rtol * abs(b):  # also catches NaN
                ratio = a / b if b else float("inf")
                if not differ:
                    failures.append(
                        f"the global loss drifts at step {step}: world size {other.world_size} {a:.6g} vs world "
                        f"size {reference_size} {b:.6g} (relative difference {error / abs(b) if b else error:.3g} > "
                        f"rtol {rtol:g}){_hint(ratio, other.world_size, reference_size)}")
                else:
                    failures.append(f"the global loss drifts from step {step} on (world size {other.world_size} "
                                    f"{a:.6g} vs {b:.6g})")
                break
        entry["max_relative_difference"] = worst
        compared.append(entry)
    if failures:
        return Consistency(FAIL, "; ".join(failures), reference_size, rtol, atol, compared)
    checked = [c for c in compared if c.get("steps")]
    if not checked:
        why = "no loss recorded (the script never called backward on a scalar)" if not ref_losses else \
            "no other world size passed"
        return Consistency(SKIPPED, why, reference_size, rtol, atol, compared)
    sizes_text = ", ".join(str(c["world_size"]) for c in checked)
    steps = min(c["steps"] for c in checked)
    init = sum(c["init_params_compared"] for c in checked)
    return Consistency(PASS, f"the global loss at world size(s) {sizes_text} agrees with world size "
                       f"{reference_size} at {steps} step(s) within rtol {rtol:g}, atol {atol:g}"
                       + (f"; initial parameters equal ({init // max(1, len(checked))} compared)" if init else ""),
                       reference_size, rtol, atol, compared)


@dataclass
class RunReport:
    """Every world size's result and the consistency verdict; the exit code follows from them."""

    target: str
    device: str
    world_sizes: list[int]
    results: list[WorldResult]
    consistency: Consistency
    usage_error: str | None = None

    @property
    def status(self) -> str:
        """ERROR if a world size could not be checked, else FAIL if anything failed, else PASS."""
        if self.usage_error or any(r.status == ERROR for r in self.results):
            return ERROR
        if any(r.status == FAIL for r in self.results) or self.consistency.status == FAIL:
            return FAIL
        return PASS

    @property
    def exit_code(self) -> int:
        """0 all passed, 1 a check failed, 2 a usage or harness error."""
        return {PASS: 0, FAIL: 1, ERROR: 2}[self.status]

    def summary(self) -> str:
        """The last line: the status and what failed where."""
        failed = [r for r in self.results if r.status != PASS]
        parts = []
        for r in failed:
            what = f"{r.rule['id']} {r.rule['symbol']}" if r.rule else r.reason.split(":")[0]
            parts.append(f"world size {r.world_size}: {r.status} ({what})")
        if self.consistency.status == FAIL:
            parts.append("consistency across world sizes: FAIL")
        if not self.results and self.usage_error:
            parts.append(self.usage_error)
        text = f"hp-invariants run: {self.status}"
        return text + (": " + "; ".join(parts) if parts else f" at world size(s) {', '.join(map(str, self.world_sizes))}")

    def render(self) -> str:
        """The whole text report (each world size, the consistency line, the summary)."""
        lines = []
        for result in self.results:
            lines.extend(render_world(result))
        lines.append(f"consistency: {self.consistency.status}  {self.consistency.reason}")
        lines.append(self.summary())
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` report."""
        return {
            "version": 1,
            "target": self.target,
            "device": self.device,
            "world_sizes": self.world_sizes,
            "status": self.status,
            "exit_code": self.exit_code,
            "results": [r.to_json() for r in self.results],
            "consistency": self.consistency.to_json(),
        }


def render_world(result: WorldResult) -> list[str]:
    """The lines of one world size: the headline, then indented details and notes."""
    lines = [result.headline()]
    lines.extend("    " + detail for detail in result.details)
    lines.extend("    note: " + note for note in result.notes)
    return lines


def _harness(frame: Frame) -> bool:
    path = frame.file.replace("\\", "/")
    return path == "<frozen runpy>" or path.endswith("/runpy.py") or "/hp_invariants/runtime/" in path


def stack_lines(frames: list[Frame]) -> list[str]:
    """A stack for the report, most recent call first, without the harness's own frames below the
    script (runpy, the rank bootstrap, pytest), at most :data:`STACK_LINES` frames."""
    cut = next((i for i, f in enumerate(frames) if _harness(f)), len(frames))
    frames = frames[:cut] or frames
    shown = [f.render() for f in frames[:STACK_LINES]]
    if len(frames) > STACK_LINES:
        shown.append(f"... {len(frames) - STACK_LINES} more frame(s)")
    return shown
