"""# E9590 reverted-fix / W9591 stale-pin

## What it does
`hp-invariants pin COMMIT` reads a fix commit's diff, finds the findings it removed and records
each as a *pin* in a committed file (`pins = "hp-invariants-pins.json"` in `[tool.hp-invariants]`,
the default name). Where the finding's rule recognises the repair, the pin records the repair
itself:

{repairs}

Any other repair, of any rule (a call renamed to the member that exists, a member restored under
another name, a gate moved, a plugin's rule), is pinned as the removed finding: its rule, its
enclosing qualified name and its fingerprint.

A pin stores the rule, the qualified location (`HSDPParam.reset_sharded_param`; for an added
method, its class), the repaired code's normalized form and the provenance (commit, subject line,
date). `check` then reports:

* **E9590 `reverted-fix`**: code that undoes a pinned repair, naming the commit:
  `reverts the fix from 1a2b3c4 'Detach the local shard view' (2026-12-01): ...`. A recognised
  repair is re-checked on its own terms, not through the rule, so it fires also when the rule
  would stay silent: a gate renamed (`self.is_shard` became `self.use_sharding`, which
  `shard-degree-gates` does not list), an option changed, the module moved or the file renamed
  (the location is looked up anywhere in the project). A pinned finding fires when a finding of
  its rule is back in its scope (`the undefined-method-call finding it removed is back in
  Trainer.step (the same code): ...`), wherever the file moved;
* **W9591 `stale-pin`**: a pin whose location exists nowhere in the project any more, or whose
  repaired code can no longer be recognised (the view, call, walk or class is gone): re-pin the
  repair where it went, or remove the pin with `hp-invariants unpin ID`. Pins are maintained, not
  forgotten.

A commit is refused, with the reason, when it removed no finding, or removed one only by deleting
its scope (nothing is left to guard). `hp-invariants fix --pin` records pins for what it fixes
(provenance: the `fix` run).

## Why is this bad?
The incident behind this project was four *earlier fixes lost*: a `.detach()` dropped by a
refactor, a guard re-added, a method deleted by a docstring clean-up touching 66 files, an overlap
check made strict again. Each had been fixed and verified before. A reverted fix is a regression
by definition, whatever its new spelling.

## Example
```bash
git log --oneline -1 3f2a9c1        # 3f2a9c1 Detach the local shard view (E9501)
hp-invariants pin 3f2a9c1           # pinned E9501 at HSDPParam.reset_sharded_param
git add hp-invariants-pins.json && git commit -m "pin the detach fix"
# ... months later a refactor drops the .detach() ...
hp-invariants check
# fsdp/param.py:34:26: E9590 reverted-fix: reverts the fix from 3f2a9c1 'Detach the local shard view' ...
```

## Use instead
Restore the repair (`git show <sha>` shows it), or, if the code was deliberately redesigned,
`hp-invariants unpin <id>` in the same change so that the reviewer sees it.

## Fix safety
No automatic fix: the pin names the commit, and `git show <sha>` shows the repair to re-apply. (For
E9503, the rule's own finding names the commit that deleted or renamed the member, and offers, as
an **unsafe** fix, restoring a deleted method or using a renamed member's new name.)

## Options
* `pins` (string, default `hp-invariants-pins.json`): the pins file, relative to the
  `pyproject.toml` holding `[tool.hp-invariants]`; `--pins FILE` on the command line.
* `# noqa: E9590` and `# pylint: disable` do not silence a pin, on purpose: a pin is an explicit
  decision, so undo it explicitly with `hp-invariants unpin ID` (reviewed in the pins file's diff).

## References
* The incident: four earlier fixes lost in hyper-parallel (issue 230), see `docs/rules/`.
* SARIF 2.1.0 `partialFingerprints` and `baselineState`, which the fingerprints and `--since` follow.
"""

from __future__ import annotations

import inspect

CODES = ("E9590", "reverted-fix", "W9591", "stale-pin")


def repairs_table() -> str:
    """The table of the repairs the registered rules recognise (their ``repair_summary``)."""
    from hp_invariants.registry import RULES

    rows = [f"| {r.rule_id} `{r.symbol}` | {r.repair_summary} |" for r in RULES if r.repair_summary]
    return "\n".join(["| rule | the repair pinned |", "|---|---|", *rows])


def doc_for(code: str) -> str | None:
    """Return the documentation of the pin messages if ``code`` names one (id or symbol)."""
    if code.upper() in CODES or code in CODES:
        text = inspect.cleandoc(__doc__ or "").rstrip("\n") + "\n"
        return text.replace("{repairs}", repairs_table())
    return None
