"""Fix pins: remember a repair made by a commit, and report when later code undoes it.

A pin records, for one finding a fix commit removed:

* ``rule``/``symbol``: the rule whose finding the commit removed;
* ``location``: the qualified name of the scope (``HSDPParam.reset_sharded_param``; for a method
  (re)added to a class, the class), looked up **anywhere in the project** at check time, so a
  moved module or a renamed file keeps its pins;
* ``kind`` and ``detail``: what the repair is;
* ``repaired``/``broken``: the normalized code after and before the repair (for review);
* provenance: ``commit``, ``subject``, ``date``.

Two kinds of pins, whatever the rule:

* a repair the rule itself recognises (its :meth:`~hp_invariants.api.Rule.pin_repair` hook: a
  ``.detach()`` added, a gate removed, a method restored, a ``raise`` turned into a skip): the pin
  is re-checked on the rule's own terms (:meth:`~hp_invariants.api.Rule.repair_state`), without the
  rule's analysis, so it still fires when the rule would stay silent (a gate renamed so that the
  rule's options no longer match it, a file moved out of the checked tree's configuration);
* any other repair (a call renamed to the member that exists, a member restored under another name,
  a gate moved, or a rule without the hook, a plugin's included): kind ``finding``, the removed
  finding itself (``detail``: its fingerprints and messages). ``check`` reports it when a finding
  of that rule is back in that scope (also after moves and renames of the file: the location is
  looked up by name, and fingerprints carry no path).

``check`` reports an undone pin as ``E9590 reverted-fix`` naming the commit, and a pin whose
location exists nowhere in the project, or whose repaired code can no longer be recognized, as
``W9591 stale-pin`` (re-pin or ``unpin`` it). A commit that removed no finding, or that removed it
only by deleting its scope, is refused with the reason. The pins file (``pins = "..."`` in
``[tool.hp-invariants]``, default ``hp-invariants-pins.json``) is JSON, committed by the user.
"""

from __future__ import annotations

import ast
import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hp_invariants.api import REPAIRED, REVERTED, UNKNOWN, RepairState, Rule
from hp_invariants.astutil import qualified_scopes
from hp_invariants.history import PINS_FILE
from hp_invariants.model import Confidence, Finding

DEFAULT_NAME = PINS_FILE
REVERTED_ID, REVERTED_SYMBOL = "E9590", "reverted-fix"
STALE_ID, STALE_SYMBOL = "W9591", "stale-pin"
FORMAT_VERSION = 1
FINDING_KIND = "finding"
"""The ``kind`` of a pin that records the removed finding itself (no rule hook recognised the repair)."""


class PinError(Exception):
    """A pins file that cannot be read, or a pin that cannot be recorded."""


@dataclass
class Pin:
    """One recorded repair (see the module docstring for the fields)."""

    id: str
    rule: str
    symbol: str
    kind: str
    location: str
    path: str
    detail: dict[str, Any]
    repaired: str
    broken: str
    commit: str
    subject: str
    date: str

    def provenance(self) -> str:
        """``the fix from 1a2b3c4 'subject' (date)``, or the ``fix --pin`` run for uncommitted fixes."""
        if self.commit:
            return f"the fix from {self.commit[:7]} '{self.subject}' ({self.date})"
        return f"the fix made by `hp-invariants fix --pin` on {self.date}"


# ---------------------------------------------------------------------- file
def load(path: Path) -> list[Pin]:
    """Read a pins file (``[]`` when it does not exist); raises :class:`PinError` when invalid."""
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [Pin(**item) for item in data["pins"]]
    except OSError as exc:
        raise PinError(f"{path}: cannot read the pins: {exc.strerror or exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise PinError(f"{path}: not a pins file ({type(exc).__name__}: {exc})") from exc


def dump(pins: Sequence[Pin], path: Path) -> None:
    """Write ``pins`` sorted by id (diff-friendly JSON); raises :class:`PinError` when the file
    cannot be written (its folder missing, read-only)."""
    data = {
        "version": FORMAT_VERSION,
        "comment": "Repairs pinned with `hp-invariants pin COMMIT`: `hp-invariants check` reports code that "
                   "undoes one (E9590 reverted-fix). Remove one with `hp-invariants unpin ID`.",
        "pins": [asdict(p) for p in sorted(pins, key=lambda p: p.id)],
    }
    try:
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise PinError(f"{path}: cannot write the pins: {exc.strerror or exc}") from exc


def merge(existing: Sequence[Pin], new: Iterable[Pin]) -> list[Pin]:
    """Return ``existing`` with ``new`` added; a new pin replaces one with the same id."""
    by_id = {p.id: p for p in existing}
    for pin in new:
        by_id[pin.id] = pin
    return list(by_id.values())


# ---------------------------------------------------------------------- scopes
def parse(text: str, path: str = "<pin>") -> ast.Module | None:
    """Parse ``text``; ``None`` when it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def scopes(tree: ast.AST) -> dict[str, ast.AST]:
    """Map every qualified name of ``tree`` to its def node (:func:`hp_invariants.astutil.qualified_scopes`)."""
    return qualified_scopes(tree)


def renamed_scope(name: str, before: ast.Module, after: ast.Module) -> str | None:
    """The qualified name that the def ``name`` of ``before`` has in ``after`` when a change renamed
    or moved it (a class renamed around a method, the method moved into another class): a name new
    in ``after`` with the same last part and a body that reads alike (at least 0.6 similar); the
    most alike wins. ``None`` when there is none (the def was deleted)."""
    import difflib

    old_scopes, new_scopes = scopes(before), scopes(after)
    node = old_scopes.get(name)
    if node is None:
        return None
    tail = name.rsplit(".", 1)[-1]
    body = "\n".join(ast.unparse(stmt) for stmt in node.body)
    best, best_ratio = None, 0.6
    for qualname, other in new_scopes.items():
        if qualname in old_scopes or qualname.rsplit(".", 1)[-1] != tail or type(other) is not type(node):
            continue
        ratio = difflib.SequenceMatcher(None, body, "\n".join(ast.unparse(stmt) for stmt in other.body),
                                        autojunk=False).ratio()
        if ratio >= best_ratio:
            best, best_ratio = qualname, ratio
    return best


def _rule(rule_id: str) -> Rule | None:
    """The registered rule of ``rule_id`` (a plugin's too), or ``None``."""
    from hp_invariants.registry import get_rule

    try:
        return get_rule(rule_id)
    except KeyError:
        return None


def _own_state(rule: Rule | None, scope: ast.AST, detail: dict[str, Any]) -> RepairState:
    state = rule.repair_state(scope, detail) if rule is not None else None
    return state if state is not None else RepairState(UNKNOWN, scope, "the rule no longer knows this repair")


# ---------------------------------------------------------------------- recording
def pins_for_repair(removed: Sequence[tuple[Finding, str, str]], commit: str, subject: str, date: str,
                    new_path: Callable[[Finding], str],
                    kept: Sequence[tuple[Finding, str]] = ()) -> tuple[list[Pin], list[str]]:
    """Build pins for findings a change removed.

    ``removed`` holds ``(finding, before_text, after_text)``: a finding of the version before the
    change, the text of its file before and after; ``kept`` holds ``(finding, text)`` for the
    findings of the version after the change (a pinned finding's scope may keep others: they were
    there at the fix, so they do not count as its return). A repair the finding's rule recognises
    (:meth:`~hp_invariants.api.Rule.pin_repair`, confirmed by its
    :meth:`~hp_invariants.api.Rule.repair_state`: broken before, repaired after) gets the rule's
    pin; any other gets a pin of the removed finding (kind ``finding``), unless the change deleted
    the finding's scope (nothing is left to guard). Returns ``(pins, reasons)``: ``reasons`` says
    why each other finding was not pinned.
    """
    from hp_invariants.history.fingerprint import finding_code, fingerprint, normalize_code

    pins: dict[str, Pin] = {}
    generic: dict[str, Pin] = {}
    reasons = []
    staying: dict[tuple[str, str], list[str]] = {}
    for finding, text in kept:
        staying.setdefault((finding.rule_id, finding.obj), []).append(fingerprint(finding, text))
    for finding, before_text, after_text in removed:
        where = f"{finding.rule_id} {finding.symbol} in {finding.obj or '<module>'}"
        before, after = parse(before_text), parse(after_text)
        if before is None or after is None:
            reasons.append(f"{where}: the file does not parse before or after the change")
            continue
        rule = _rule(finding.rule_id)
        spec = rule.pin_repair(finding, before, after) if rule is not None else None
        if spec is not None:
            old_scope, new_scope = scopes(before).get(spec.location), scopes(after).get(spec.location)
            if (old_scope is not None and new_scope is not None
                    and _own_state(rule, old_scope, spec.detail).state == REVERTED
                    and _own_state(rule, new_scope, spec.detail).state == REPAIRED):
                pin_id = f"{finding.rule_id}:{spec.location}" + (f".{spec.key}" if spec.key else "")
                pins[pin_id] = Pin(pin_id, finding.rule_id, finding.symbol, spec.kind, spec.location,
                                   new_path(finding), dict(spec.detail), spec.repaired, spec.broken, commit,
                                   subject, date)
                continue
        location, also = finding.obj, []
        if finding.obj and finding.obj not in scopes(after):
            location = renamed_scope(finding.obj, before, after)
            if location is None:
                reasons.append(f"{where}: the change deleted '{finding.obj}' instead of repairing it (nothing left "
                               f"to guard)")
                continue
            also = [finding.obj]  # the name it had: a revert brings it back
        pin_id = f"{finding.rule_id}:{location or new_path(finding)}"
        code = " ".join(normalize_code(finding_code(finding, before_text)).split())
        pin = generic.get(pin_id)
        if pin is None:
            pin = generic[pin_id] = Pin(pin_id, finding.rule_id, finding.symbol, FINDING_KIND, location,
                                        new_path(finding), {"fingerprints": [], "messages": [], "kept": sorted(
                                            staying.get((finding.rule_id, location), [])), "also": also},
                                        f"no {finding.symbol} finding in {location or new_path(finding)}",
                                        code[:200], commit, subject, date)
        pin.detail["fingerprints"].append(fingerprint(finding, before_text))
        pin.detail["messages"].append(finding.message)
    for pin_id, pin in generic.items():
        pins.setdefault(pin_id, pin)  # a recognised repair at the same place says more
    return list(pins.values()), reasons


# ---------------------------------------------------------------------- checking
@dataclass
class _Parsed:
    path: str
    text: str
    tree: ast.Module | None
    _scopes: dict[str, ast.AST] | None = field(default=None)

    def scopes(self) -> dict[str, ast.AST]:
        if self._scopes is None:
            self._scopes = scopes(self.tree) if self.tree is not None else {}
        return self._scopes


def _names(pin: Pin) -> list[str]:
    """The qualified names a pin watches: its location, and for a pinned finding whose scope the fix
    renamed, the name it had (``detail["also"]``)."""
    also = pin.detail.get("also", []) if pin.kind == FINDING_KIND else []
    return [n for n in [pin.location, *also] if n]


def _find(pins: Sequence[Pin], paths: Iterable[str], read_text: Callable[[str], str | None]) -> dict[str, list[_Parsed]]:
    """For each pin id, the parsed files among ``paths`` that define its location (or, for a pinned
    finding, a name it watches; none for a pin of module level)."""
    tails = {n.split(".")[-1] for p in pins for n in _names(p)}
    found: dict[str, list[_Parsed]] = {p.id: [] for p in pins}
    for path in paths:
        text = read_text(path)
        if text is None or not any(f"def {t}" in text or f"class {t}" in text for t in tails):
            continue
        parsed = _Parsed(path, text, parse(text, path))
        for pin in pins:
            if any(name in parsed.scopes() for name in _names(pin)):
                found[pin.id].append(parsed)
    return found


def _returned(pin: Pin, findings: Sequence[Finding],
              read_text: Callable[[str], str | None]) -> list[tuple[Finding, str, bool]]:
    """The findings of ``pin``'s rule back in its scope (a pin of kind ``finding``): each with its
    normalized code and whether that is the very code the fix removed (same fingerprint). Those the
    scope still had right after the fix (``kept``) do not count; at module level only the same code
    counts."""
    from collections import Counter

    from hp_invariants.history.fingerprint import finding_code, fingerprint, normalize_code

    known = set(pin.detail.get("fingerprints", ()))
    kept = Counter(pin.detail.get("kept", ()))
    hits = []
    watched = set(_names(pin)) or {""}
    for finding in findings:
        if finding.rule_id != pin.rule or finding.obj not in watched:
            continue
        text = read_text(finding.path)
        mark = fingerprint(finding, text) if text is not None else ""
        if kept[mark] > 0:
            kept[mark] -= 1
            continue
        if finding.obj or mark in known:
            code = " ".join(normalize_code(finding_code(finding, text)).split()) if text is not None else ""
            hits.append((finding, code, mark in known))
    return hits


def check(pins: Sequence[Pin], findings: Sequence[Finding], checked: Sequence[str],
          project_files: Callable[[], Iterable[str]], read_text: Callable[[str], str | None],
          pins_path: str) -> list[Finding]:
    """Return the ``E9590 reverted-fix`` and ``W9591 stale-pin`` findings of ``pins``.

    ``findings`` are the findings of this run (a pin of kind ``finding`` fires on one of its rule
    back in its scope); ``checked`` are the files of this run: a rule's own pin is judged in each of
    them that defines its location (anywhere: the file may have moved or been renamed). A pin found
    in none of them is looked up in ``project_files()`` (every Python file of the project); found
    nowhere, it is stale (reported on ``pins_path``, the pins file). Pins of a rule that is no longer
    registered are stale.
    """
    if not pins:
        return []
    found = _find(pins, checked, read_text)
    missing = [p for p in pins if not found[p.id] and p.location]
    elsewhere = _find(missing, project_files(), read_text) if missing else {}
    lines = _pin_lines(pins_path)
    texts: dict[str, str | None] = {}

    def cached_text(path: str) -> str | None:
        if path not in texts:
            texts[path] = read_text(path)
        return texts[path]

    result = []
    for pin in pins:
        if pin.location and not found[pin.id]:
            if not elsewhere.get(pin.id):
                result.append(_finding(STALE_ID, STALE_SYMBOL, pins_path, lines.get(pin.id, 1), 0, pin,
                                       f"pin {pin.id} from {pin.provenance()}: '{pin.location}' no longer "
                                       f"exists in the project; re-pin the repair where it moved, or "
                                       f"`hp-invariants unpin {pin.id}`"))
            continue
        if pin.kind == FINDING_KIND:
            for back, code, same in _returned(pin, findings, cached_text):
                where = back.obj or "the module"
                shown = code if len(code) <= 80 else code[:77] + "..."
                text = (f"the {back.symbol} finding it removed is back in {where}: `{shown}`"
                        + (" (the same code)" if same else ""))
                result.append(Finding(REVERTED_ID, REVERTED_SYMBOL, back.path, back.line, back.col, back.end_line,
                                      back.end_col, f"reverts {pin.provenance()}: {text} ({pin.rule} {pin.symbol}; "
                                                    f"pin {pin.id})", Confidence.HIGH, None, (pin.id,), back.obj))
            continue
        rule = _rule(pin.rule)
        for parsed in found[pin.id]:
            scope = parsed.scopes().get(pin.location)
            if scope is None:
                continue
            state = _own_state(rule, scope, pin.detail)
            anchor = state.anchor or scope
            if state.state == REVERTED:
                result.append(_finding(REVERTED_ID, REVERTED_SYMBOL, parsed.path, anchor.lineno, anchor.col_offset,
                                       pin, f"reverts {pin.provenance()}: {state.text} "
                                            f"({pin.rule} {pin.symbol}; pin {pin.id})", anchor))
            elif state.state == UNKNOWN:
                result.append(_finding(STALE_ID, STALE_SYMBOL, parsed.path, anchor.lineno, anchor.col_offset,
                                       pin, f"pin {pin.id} from {pin.provenance()}: {state.text} in "
                                            f"{pin.location}; re-pin or `hp-invariants unpin {pin.id}`", anchor))
    result.sort(key=Finding.sort_key)
    return result


def _finding(rule_id: str, symbol: str, path: str, line: int, col: int, pin: Pin, message: str,
             node: ast.AST | None = None) -> Finding:
    end_line = getattr(node, "end_lineno", None) or line
    end_col = getattr(node, "end_col_offset", None)
    if node is None or isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        end_line, end_col = line, col  # a whole def: point at its first line only
    return Finding(rule_id, symbol, path, line, col, end_line, end_col if end_col is not None else col, message,
                   Confidence.HIGH, None, (pin.id,), pin.location)


def _pin_lines(pins_path: str) -> dict[str, int]:
    """Line of each pin's ``"id"`` in the pins file (where stale pins are reported)."""
    lines: dict[str, int] = {}
    try:
        with open(pins_path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                stripped = line.strip()
                if stripped.startswith('"id":'):
                    try:
                        lines[json.loads(stripped[5:].rstrip(","))] = number
                    except ValueError:
                        pass
    except OSError:
        pass
    return lines
