"""Rule wrappers that let history features shape findings inside every front end's pipeline.

A :class:`RuleProxy` looks like the rule it wraps (same id, symbol, options, prefilter) and passes
each finding of the wrapped rule through a picklable ``transform`` object, so ``check`` and ``fix``
(whose fix loop re-runs detection every round) see the same shaped findings: ``fix --since REV``
fixes only what ``check --since REV`` reports, and E9503 findings carry their restore-from-history
fix.
"""

from __future__ import annotations

from typing import Any, Iterable

from hp_invariants.model import Finding
from hp_invariants.api import Rule


class RuleProxy(Rule):
    """Wrap ``inner``; ``transform(findings, ctx) -> findings`` shapes its findings per file."""

    def __init__(self, inner: Rule, transform: Any):
        self.inner = inner
        self.transform = transform
        for name, value in vars(Rule).items():  # every rule attribute (id, options, project_facts ...)
            if not name.startswith("_") and not callable(value) and not isinstance(value, property):
                setattr(self, name, getattr(inner, name))

    def __getattr__(self, name: str) -> Any:  # anything else a pipeline may read from a rule
        if name in ("inner", "transform", "__setstate__", "__getstate__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def analysis_module(self) -> str:
        """As the wrapped rule (its documentation is that module's docstring)."""
        return self.inner.analysis_module

    def applies_to(self, text: str, options: dict[str, Any] | None = None) -> bool:
        """As the wrapped rule."""
        return self.inner.applies_to(text, options)

    def check(self, ctx: Any) -> Iterable[Finding]:
        """The wrapped rule's findings in ``ctx``, passed through the transform."""
        return self.transform(list(self.inner.check(ctx)), ctx)

    def pin_repair(self, finding: Finding, before: Any, after: Any) -> Any:
        """As the wrapped rule."""
        return self.inner.pin_repair(finding, before, after)

    def repair_state(self, scope: Any, detail: dict[str, Any]) -> Any:
        """As the wrapped rule."""
        return self.inner.repair_state(scope, detail)

    def missing_member(self, finding: Finding) -> tuple[str, str] | None:
        """As the wrapped rule."""
        return self.inner.missing_member(finding)


def unwrap(rule: Rule) -> Rule:
    """Return the innermost rule of a chain of proxies."""
    while isinstance(rule, RuleProxy):
        rule = rule.inner
    return rule
