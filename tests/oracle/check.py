"""The fix-safety oracle: run a program before and after ``hp-invariants fix`` and compare.

``fix`` runs through the public CLI (``hp_invariants.cli.main(["fix", path])``, safe fixes only) on a
temporary file. Then, for every scenario of the program, the traces of the runs (see
:mod:`oracle.runtime`) must be equal except for the rule's one intended difference:

* E9502: at shard degree > 1 the traces are equal; at degree 1 they are equal once the must-run
  steps (``reset_sharded_param``, ``fully_shard``) and the flag they set (``self.done``) are left out:
  the step now also runs at degree 1, nothing else changes.
* E9501: the traces are equal once the added ``.detach()`` calls are left out (a detached tensor
  keeps its id in the trace), and every added ``.detach()`` is on a view created with grad disabled:
  there it changes nothing but the view link.
* E9504: the fixed program behaves as the reference (the raising site replaced by ``continue`` by
  construction); where the original behaves otherwise, it raised a fresh refusal for an
  already-wrapped submodule which left the function unobserved (after it only ``finally``
  clean-ups ran), everything before it was the same, and the reference
  skipped to the next submodule (``continue`` bound to the walk loop).
* E9503: the fixed program behaves as the reference (the accessors written by construction); where
  the original behaves otherwise, it looked up the missing accessor, ran nothing observable after
  that and ended with that ``AttributeError``, and everything before it was the same.

A failure raises :class:`OracleFailure` with both programs, the scenario and the traces.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

from hp_invariants import cli

from oracle.programs import BLIND_CALLS, E9503_PAIRS, STEP_NAMES, Program
from oracle.runtime import Outcome, run_program

ACCESSOR_NAMES = frozenset(name for pair in E9503_PAIRS.values() for name in pair)


class OracleFailure(AssertionError):
    """A safe fix changed more than the rule's intended difference."""


@dataclass
class Result:
    """What the oracle did with one program: ``fixed`` whether ``fix`` changed it."""

    fixed: bool
    scenarios: int = 0


def apply_fix(source: str, workdir: Path, unsafe: bool = False) -> str:
    """Run ``hp-invariants fix`` (the public CLI) on ``source`` in ``workdir``; return the new text."""
    (workdir / "pyproject.toml").write_text("")
    path = workdir / "program.py"
    path.write_text(source)
    argv = ["fix", "--no-cache", str(path)] + (["--unsafe-fixes"] if unsafe else [])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    if code not in (0, 1):
        raise OracleFailure(f"fix failed with exit code {code}: {out.getvalue()}{err.getvalue()}\n{source}")
    return path.read_text()


def _run(program: Program, source: str, scenario: dict) -> Outcome:
    return run_program(source, lambda ns, trace: program.driver(ns, trace, **scenario),
                       lambda trace: program.behaviours(scenario, trace))


def _same(x: Outcome, y: Outcome) -> bool:
    return x.events == y.events and x.end == y.end


def _blind(event: tuple) -> bool:
    """An event that happens whether or not an exception passes (a ``finally`` clean-up)."""
    return event[0] == "call" and event[1] in BLIND_CALLS


def compare_e9502(before: Outcome, after: Outcome, reference: Outcome | None, scenario: dict,
                  flags: bool = False) -> str:
    """'' when ``after`` differs from ``before`` only by the step (and its flag) at degree 1.

    The flag is ``self.done`` in the generated programs; with ``flags`` (the fixtures) any store of a
    constant counts as a flag.
    """
    if scenario["degree"] > 1:
        return "" if _same(before, after) else "behaviour changed at shard degree > 1"

    steps = set(STEP_NAMES) | set(_must_run_steps())

    def project(outcome: Outcome) -> list:
        return [e for e in outcome.events
                if not (e[0] == "call" and e[1].rsplit(".", 1)[-1] in steps)
                and not (e[0] == "set" and (e[1] == "self.done" or flags and _constant(e[2])))]

    if project(before) != project(after) or before.end != after.end:
        return "at shard degree 1 more than the must-run step changed"
    return ""


def _must_run_steps() -> tuple[str, ...]:
    """E9502's default must-run steps (its ``unconditional-calls`` option), from the registry."""
    from hp_invariants.registry import get_rule

    rule = get_rule("shard-gated-reset")
    return next(tuple(opt.default) for opt in rule.options if opt.name == "unconditional-calls")


def _constant(text: str) -> bool:
    return text in ("True", "False", "None") or text.lstrip("-").replace(".", "", 1).isdigit()


def compare_e9501(before: Outcome, after: Outcome, reference: Outcome | None, scenario: dict) -> str:
    """'' when ``after`` differs from ``before`` only by ``.detach()`` of no-grad views."""
    for event in after.events:
        if event[0] == "detach" and (event[2] != "view" or event[3] != "nograd"):
            return f"a .detach() on a {event[2]} created with grad {event[3]}: it changes autograd"
    stripped = [e for e in after.events if e[0] != "detach"]
    if stripped != [e for e in before.events if e[0] != "detach"] or before.end != after.end:
        return "more than the .detach() changed"
    return ""


def _first(events: list, predicate) -> int | None:
    return next((i for i, e in enumerate(events) if predicate(e)), None)


def compare_e9504(before: Outcome, after: Outcome, reference: Outcome | None, scenario: dict) -> str:
    """See the module docstring (E9504)."""
    if not _same(after, reference):
        return "the fixed program differs from the reference (the refusal replaced by 'continue')"
    if _same(before, reference):
        return ""
    at = _first(before.events, lambda e: e[0] == "call" and e[1] == "refusal")
    if at is None:
        return "behaviour changed although no refusal was raised (another error was swallowed)"
    sub = before.events[at][2].strip("(),")
    if before.end[0] != "raise" or f"REFUSAL:{sub}:wrapped" not in before.end[2]:
        return f"the refusal for {sub} did not leave the function as raised, or {sub} was not wrapped: {before.end}"
    if not all(_blind(e) for e in before.events[at + 1:]):
        return f"the refusal was observed before leaving the function: {before.events[at + 1:]}"
    if before.events[:at] != reference.events[:at]:
        return "the runs differ before the refusal"
    for event in reference.events[at:]:
        mentions = any(sub == part or f"({sub}" in part or f" {sub}," in part for part in map(str, event[1:]))
        others = any(part.startswith("(sub") and sub not in part for part in map(str, event[2:3]))
        if others:
            break
        if mentions and not _blind(event):
            return f"after 'continue' the run went on with {sub} (continue bound to another loop): {event}"
    return ""


def compare_e9503(before: Outcome, after: Outcome, reference: Outcome | None, scenario: dict) -> str:
    """See the module docstring (E9503)."""
    if not _same(after, reference):
        return "the fixed program differs from the reference (the accessors written by hand)"
    if _same(before, reference):
        return ""
    at = _first(before.events, lambda e: e[0] == "missing" and e[2] in ACCESSOR_NAMES)
    if at is None:
        return "behaviour changed although no accessor was missing"
    name = before.events[at][2]
    if before.events[:at] != reference.events[:at]:
        return "the runs differ before the accessor lookup"
    if not all(_blind(e) for e in before.events[at + 1:]):
        return f"the missing {name} was observed (hasattr, getattr, except AttributeError): {before.events[at + 1:]}"
    if before.end[0] != "raise" or before.end[1] != "AttributeError" or name not in before.end[2]:
        return f"the missing {name} did not end the run with its AttributeError: {before.end}"
    return ""


COMPARE = {"E9501": compare_e9501, "E9502": compare_e9502, "E9503": compare_e9503, "E9504": compare_e9504}


def check_program(program: Program, workdir: Path, unsafe: bool = False) -> Result:
    """Fix ``program`` (safe fixes; ``unsafe``: unsafe ones too, to test the oracle itself), run both
    versions on every scenario, raise :class:`OracleFailure` on a difference beyond the intended one."""
    fixed = apply_fix(program.source, workdir, unsafe)
    if fixed == program.source:
        return Result(False)
    compare = COMPARE[program.rule]
    for scenario in program.scenarios:
        before = _run(program, program.source, scenario)
        after = _run(program, fixed, scenario)
        reference = _run(program, program.reference, scenario) if program.reference is not None else None
        problem = compare(before, after, reference, scenario)
        if problem:
            raise OracleFailure(_report(program, fixed, scenario, problem, before, after, reference))
    return Result(True, len(program.scenarios))


def _report(program: Program, fixed: str, scenario: dict, problem: str, before: Outcome, after: Outcome,
            reference: Outcome | None) -> str:
    parts = [f"{program.rule}: a safe fix changed more than the invariant: {problem}",
             f"context: {program.label}", f"scenario: {scenario}",
             "--- program", program.source, "--- after fix", fixed]
    if program.reference is not None:
        parts += ["--- reference", program.reference]
    parts += ["--- trace before", *map(str, before.events), str(before.end),
              "--- trace after", *map(str, after.events), str(after.end)]
    if reference is not None:
        parts += ["--- trace reference", *map(str, reference.events), str(reference.end)]
    return "\n".join(parts)


def examples(default: int) -> int:
    """Examples per rule: ``HP_ORACLE_EXAMPLES`` when set (the opt-in long run), else ``default``."""
    value = os.environ.get("HP_ORACLE_EXAMPLES")
    return int(value) if value else default

