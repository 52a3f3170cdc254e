"""What a rule sees of one file: source, ``ast`` tree, options, and the project (class index)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Sequence

from hp_invariants.astutil import walk_with_parents
from hp_invariants.model import Applicability, Confidence, Edit, Finding, Fix, Rule
from hp_invariants.source import SourceFile


_CONCRETE = frozenset(
    c for c in vars(ast).values()
    if isinstance(c, type) and type(c) is type and issubclass(c, ast.AST) and not c.__subclasses__()
)
"""Node classes without subclasses (and without the deprecated ``ast.Num``-style instance checks):
for these, ``nodes_of`` compares classes instead of calling isinstance."""


@dataclass
class FileContext:
    """Everything a rule's ``check`` needs for one file.

    * ``source``: the decoded :class:`SourceFile`; ``tree``: its ``ast.Module`` (parsed once, shared
      by all rules);
    * ``options``: option values by rule id, e.g. ``ctx.option(rule, "local-tensor-attrs")``;
    * ``project``: the :class:`hp_invariants.project.Project` that builds the project-wide facts rules
      declare (read them with :meth:`project_data`), or ``None`` when not available (a rule that
      needs project facts then stays silent).
    """

    source: SourceFile
    tree: ast.Module
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    project: Any = None
    _parents: dict[int, ast.AST] | None = field(default=None, repr=False)
    _nodes: list[ast.AST] | None = field(default=None, repr=False)
    _owners: list[ast.AST | None] | None = field(default=None, repr=False)
    _by_types: dict[tuple[type, ...], list[ast.AST]] | None = field(default=None, repr=False)

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

    def project_data(self, rule: Rule) -> Any:
        """Return the project object of ``rule.project_facts`` for this file's project (built or read
        from the cache on first use). Raises ``ValueError`` when there is no project."""
        if self.project is None or rule.project_facts is None:
            raise ValueError(f"{rule.rule_id}: no project data available")
        return self.project.data(rule.project_facts, self.path)

    # ------------------------------------------------------------------ tree navigation
    def nodes(self) -> list[ast.AST]:
        """Return every node of ``tree`` in :func:`ast.walk` order (breadth-first), without the
        ``ctx``/``op`` singletons (``Load``, ``Store``, ``Add`` ...: see
        :func:`hp_invariants.astutil.child_fields`).

        Built by one pass over the tree on first use, shared by every rule and by :meth:`parent`;
        the pass iterates the node fields directly (no :func:`ast.iter_child_nodes` generators).
        """
        if self._nodes is None:
            self._nodes, self._owners = walk_with_parents(self.tree)
        return self._nodes

    def nodes_of(self, *types: type) -> list[ast.AST]:
        """Return the nodes of ``tree`` that are instances of ``types``, in :func:`ast.walk` order
        (so ``for n in ctx.nodes_of(ast.Call)`` visits what ``for n in ast.walk(tree): if
        isinstance(n, ast.Call)`` visits, in the same order). Memoized per ``types``."""
        if self._by_types is None:
            self._by_types = {}
        found = self._by_types.get(types)
        if found is None:
            nodes = self.nodes()
            if len(types) == 1 and types[0] in _CONCRETE:
                kind = types[0]
                found = [n for n in nodes if n.__class__ is kind]
            else:
                found = [n for n in nodes if isinstance(n, types)]
            self._by_types[types] = found
        return found

    def parent(self, node: ast.AST) -> ast.AST | None:
        """Return the parent of ``node`` in ``tree`` (parent links are built on first use, from the
        same pass as :meth:`nodes`)."""
        if self._parents is None:
            self.nodes()
            self._parents = dict(zip(map(id, self._nodes), self._owners))  # type: ignore[arg-type]
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
