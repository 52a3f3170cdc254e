"""What a rule sees of one file: source, ``ast`` tree, options, and the project (class index)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from hp_invariants.model import Applicability, Confidence, Edit, Finding, Fix, Rule
from hp_invariants.source import SourceFile


@dataclass
class FileContext:
    """Everything a rule's ``check`` needs for one file.

    * ``source``: the decoded :class:`SourceFile`; ``tree``: its ``ast.Module`` (parsed once, shared
      by all rules);
    * ``options``: option values by rule id, e.g. ``ctx.option(rule, "local-tensor-attrs")``;
    * ``project``: a zero-argument callable returning the project's class index (built or loaded
      lazily; only rules with ``needs_project`` call it), or ``None`` when not available.
    """

    source: SourceFile
    tree: ast.Module
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    project: Callable[[], Any] | None = None
    _parents: dict[int, ast.AST] | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        """The file's path as given on the command line."""
        return self.source.path

    def option(self, rule: Rule, name: str) -> Any:
        """Return the value of option ``name`` of ``rule`` (its default when not configured)."""
        values = self.options.get(rule.rule_id, {})
        if name in values:
            return values[name]
        for opt in rule.options:
            if opt.name == name:
                return opt.default
        raise KeyError(f"{rule.rule_id} has no option {name!r}")

    # ------------------------------------------------------------------ tree navigation
    def parent(self, node: ast.AST) -> ast.AST | None:
        """Return the parent of ``node`` in ``tree`` (parent links are built on first use)."""
        if self._parents is None:
            parents: dict[int, ast.AST] = {}
            for outer in ast.walk(self.tree):
                for child in ast.iter_child_nodes(outer):
                    parents[id(child)] = outer
            self._parents = parents
        return self._parents.get(id(node))

    def ancestors(self, node: ast.AST):
        """Yield the ancestors of ``node``, innermost first."""
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def enclosing_scope_name(self, node: ast.AST) -> str:
        """Return ``Class.method``-style name of the scope holding ``node`` (pylint's ``obj``)."""
        names = [
            anc.name
            for anc in self.ancestors(node)
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ]
        return ".".join(reversed(names))

    # ------------------------------------------------------------------ building results
    def node_range(self, node: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
        """Character range of ``node`` (see :meth:`SourceFile.node_range`)."""
        return self.source.node_range(node)

    def text_of(self, node: ast.AST) -> str:
        """Return the exact source text of ``node``."""
        start, end = self.node_range(node)
        return self.source.segment(start, end)

    def finding(
        self,
        rule: Rule,
        node: ast.AST,
        args: Sequence[Any] = (),
        confidence: Confidence = Confidence.HIGH,
        fix: Fix | None = None,
    ) -> Finding:
        """Build a :class:`Finding` of ``rule`` located at ``node``; ``args`` fill ``rule.msg``."""
        (line, col), (end_line, end_col) = self.node_range(node)
        return Finding(
            rule_id=rule.rule_id,
            symbol=rule.symbol,
            path=self.path,
            line=line,
            col=col,
            end_line=end_line,
            end_col=end_col,
            message=rule.msg % tuple(args) if args else rule.msg,
            confidence=confidence,
            fix=fix,
            args=tuple(args),
            obj=self.enclosing_scope_name(node),
        )

    @staticmethod
    def make_fix(edits: Sequence[Edit], message: str, applicability: Applicability = Applicability.SAFE) -> Fix:
        """Bundle ``edits`` into a :class:`Fix`."""
        return Fix(edits=tuple(edits), applicability=applicability, message=message)
