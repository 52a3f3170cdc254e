"""What a rule author writes against: :class:`Rule`, :class:`Option`, :class:`FileContext` and
:class:`ProjectFacts`, and the optional history hooks' data (:class:`Repair`, :class:`RepairState`).

The layers, inside out: :mod:`hp_invariants.model` is data only (findings, fixes, problems); this
module is the contract between the engine and the rules; the rules (:mod:`hp_invariants.rules`)
implement it; the engine (:mod:`hp_invariants.engine`) and the project facts
(:mod:`hp_invariants.project`) drive it; the front ends (CLI, pylint plugin, codemods) adapt the
engine. A rule imports from here and from :mod:`hp_invariants.model`, never from the engine, the
project walk or the store.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hp_invariants.astutil import walk_with_parents
from hp_invariants.model import Applicability, Confidence, Edit, Finding, Fix
from hp_invariants.source import SourceFile

@dataclass(frozen=True)
class Option:
    """A rule option, settable in ``[tool.hp-invariants]`` and in pylintrc.

    ``kind`` is ``"csv"`` (a list of names), ``"regexp_csv"`` (a list of regular expressions,
    matched against the whole name) or ``"bool"``.
    """

    name: str
    kind: str
    default: Any
    help: str


class Rule:
    """Base class of an invariant rule: one subclass per module under ``hp_invariants.rules``.

    Class attributes a rule sets:

    * ``rule_id``, ``symbol``: the fixed pylint message id and symbol;
    * ``summary``: one line for ``hp-invariants rules``;
    * ``msg``: pylint's message template (``%s`` placeholders filled from ``Finding.args``);
    * ``description``: pylint's long help for the message;
    * ``options``: the rule's :class:`Option` objects;
    * ``prefilter``: substrings of which at least one must occur in a file's text for the rule to
      run (a cheap test that skips files that cannot match); empty means always run;
    * ``project_facts``: a :class:`ProjectFacts` when the rule needs facts
      about the whole project (E9503: every class), read in ``check`` with ``ctx.project_data(self)``;
    * ``project_optional``: True when the rule also runs without a project (``ctx.project is None``:
      it then uses what the file itself shows); False (default): such a rule is not run then;
    * ``prefilter_reads_project``: True when :meth:`applies_to` also reads the project facts (E9502
      lets through files that call a project's must-run helper): a file the prefilter skipped then
      depends on :meth:`prefilter_record` of its project (the per-file results cache checks it);
    * ``codemod_command``: the name of the rule's libcst codemod class (default: the symbol in
      CamelCase + ``Command``; see :mod:`hp_invariants.codemods`);
    * ``repair_summary``: one line naming the repair :meth:`pin_repair` recognises (the table of
      ``hp-invariants explain E9590``); empty when the rule has no such hook.

    History hooks (optional; the defaults know nothing, and :mod:`hp_invariants.history` then
    works from the findings alone): :meth:`pin_repair` and :meth:`repair_state` (a fix commit's
    repair, re-checked on the rule's own terms), :meth:`missing_member` (a finding about a member a
    class lacks: its provenance in the class's history).

    The rule's module docstring is its user documentation (``docs/rules/<symbol>.md`` and
    ``hp-invariants explain`` print it).
    """

    rule_id: str = ""
    symbol: str = ""
    summary: str = ""
    msg: str = "%s"
    description: str = ""
    options: Sequence[Option] = ()
    prefilter: Sequence[str] = ()
    prefilter_option: str | None = None
    project_facts: "ProjectFacts | None" = None
    project_optional: bool = False
    prefilter_reads_project: bool = False
    codemod_command: str = ""
    repair_summary: str = ""

    @property
    def command_name(self) -> str:
        """The codemod class name: ``codemod_command``, else the symbol in CamelCase + ``Command``."""
        return self.codemod_command or "".join(p.title() for p in self.symbol.split("-")) + "Command"

    def applies_to(self, text: str, options: dict[str, Any] | None = None) -> bool:
        """Return True when the rule's text prefilter lets ``text`` through.

        ``options`` are this rule's configured option values: when ``prefilter_option`` names a
        list option (say ``unconditional-calls``), its configured values replace ``prefilter``, so a
        prefilter never skips a file that a configured name could match.
        """
        tokens = self.prefilter
        if self.prefilter_option and options and self.prefilter_option in options:
            tokens = options[self.prefilter_option]
        return not tokens or any(token in text for token in tokens)

    def prefilter_record(self, data: Any, options: dict[str, Any] | None = None) -> str | None:
        """What :meth:`applies_to` reads from the project object ``data`` (of ``project_facts``) under
        this rule's ``options``, as a plain string: a file the prefilter skipped is checked again
        when it differs. Only called when ``prefilter_reads_project``."""
        return None

    def check(self, ctx: "FileContext") -> Iterable[Finding]:  # pragma: no cover - abstract
        """Yield the findings of this rule in the file of ``ctx`` (a
        :class:`FileContext`)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ history hooks (optional)
    def pin_repair(self, finding: Finding, before: ast.Module, after: ast.Module) -> "Repair | None":
        """The repair a change made that removed ``finding`` (located in ``before``, the parsed file
        before the change; ``after``: the file after it), in terms :meth:`repair_state` re-checks;
        ``None`` (the default) when the rule does not recognise it: ``hp-invariants pin`` then
        records the removed finding itself (reported when a finding of the rule returns there)."""
        return None

    def repair_state(self, scope: ast.AST, detail: dict[str, Any]) -> "RepairState | None":
        """The state of a repair of :meth:`pin_repair` (its ``detail``) in ``scope``, the def found
        at the repair's location now; ``None`` (the default) when the rule has no such hook."""
        return None

    def missing_member(self, finding: Finding) -> tuple[str, str] | None:
        """``(class name, member name)`` when ``finding`` says that a class lacks a member (E9503),
        so the history features can name the commit that deleted or renamed it; ``None`` (the
        default) otherwise."""
        return None


REPAIRED, REVERTED, UNKNOWN = "repaired", "reverted", "unknown"
"""The states of a pinned repair (:class:`RepairState`)."""


@dataclass(frozen=True)
class Repair:
    """A repair recognised by :meth:`Rule.pin_repair`: what a pin records.

    ``kind`` names its shape (``"detach"``); ``location`` is the qualified name of the def it
    guards (``HSDPParam.reset_sharded_param``; a class for a method added to it), looked up anywhere
    in the project later; ``detail`` is plain JSON data for :meth:`Rule.repair_state`;
    ``repaired``/``broken`` are one line of the code after and before the change (for review);
    ``key`` is appended to the pin's id (``E9503:Model.get_input_embeddings``) when not empty.
    """

    kind: str
    location: str
    detail: dict[str, Any]
    repaired: str
    broken: str
    key: str = ""


@dataclass(frozen=True)
class RepairState:
    """The state of a pinned repair in some code (:meth:`Rule.repair_state`): ``state`` is
    :data:`REPAIRED`, :data:`REVERTED` (``text`` says how, ``anchor`` is the node to report) or
    :data:`UNKNOWN` (the repaired code can no longer be recognised: ``text`` says why)."""

    state: str
    anchor: ast.AST | None = None
    text: str = ""

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


class ProjectFacts:
    """Facts about every file of a project that one rule needs (declared as ``Rule.project_facts``).

    Subclasses set ``key`` (a short name: the cache namespace) and ``version`` (bump it whenever
    :meth:`summarize` or :meth:`encode` changes, so old cache entries are rebuilt), and implement:

    * :meth:`summarize`: a small, ``ast``-free summary of one parsed file (never raises for a
      valid tree);
    * :meth:`encode` / :meth:`decode`: the summary to and from plain JSON data (the on-disk cache;
      :meth:`decode` must reject malformed data by raising, since the cache folder may be shared);
    * :meth:`build`: the object the rule reads (``ctx.project_data(rule)``), from every file's summary;
    * optionally :meth:`track` / :meth:`still_valid`: what a file's findings depend on, for the
      per-file results cache (default: on the whole project, so any change in the project re-checks).
    """

    key: str = ""
    version: int = 1

    def summarize(self, tree: ast.Module, path: str) -> Any:  # pragma: no cover - abstract
        """Return the summary of the parsed file ``path``."""
        raise NotImplementedError

    def build(self, root: Path, paths: list[str], summaries: list[Any], digests: list[bytes]) -> Any:
        """Return the project object from the summaries of ``paths`` (absolute, same order) and their
        content digests (``hashlib.blake2b``, 16 bytes)."""  # pragma: no cover - abstract
        raise NotImplementedError

    def encode(self, summary: Any) -> Any:
        """Return ``summary`` as plain data (lists, str, int, float, bool, None). Default: tuples
        (NamedTuples included) become lists and sets ``{"set": [...]}``; anything else raises
        ``TypeError`` (the file's summaries are then not cached)."""
        from hp_invariants.store import _plain  # noqa: PLC0415 - the store owns encoding

        return _plain(summary)

    def decode(self, data: Any) -> Any:
        """Return the summary that :meth:`encode` turned into ``data``; raise ``ValueError``,
        ``TypeError``, ``KeyError`` or ``IndexError`` when ``data`` is not such a value. Default: the
        inverse of the default :meth:`encode` (lists become tuples, NamedTuples are not rebuilt); a
        summary of the wrong shape that makes :meth:`build` raise sends the project to a rebuild
        without the cache (:meth:`Project.prepare_root`)."""
        from hp_invariants.store import _unplain  # noqa: PLC0415

        return _unplain(data)

    # ------------------------------------------------------------------ built-object cache
    caches_built: bool = False
    """True when :meth:`encode_built` and :meth:`decode_built` are implemented: the project object
    is then cached whole, keyed by the project's fingerprint, and read back instead of being rebuilt
    from every file's summary while no file of the project changed."""

    def encode_built(self, data: Any) -> Any:
        """Return the project object ``data`` (what :meth:`build` returned) as plain JSON data
        (only called when :attr:`caches_built`). A value of the top-level dict may be a
        :class:`TextTable`: it is stored raw after the JSON part and comes back to
        :meth:`decode_built` as a :class:`StoredTexts`."""  # pragma: no cover - optional
        raise NotImplementedError

    def decode_built(self, plain: Any, rebuild: Callable[[], Any]) -> Any:
        """Return the project object that :meth:`encode_built` turned into ``plain``; raise
        ``ValueError``, ``TypeError``, ``KeyError`` or ``IndexError`` when ``plain`` is not of that
        shape (the object is then rebuilt from the summaries). An object that decodes its parts
        lazily and finds one malformed later calls ``rebuild()`` (the object built from the
        summaries, as if no built object had been cached) and answers from that."""  # pragma: no cover
        raise NotImplementedError

    # ------------------------------------------------------------------ results-cache hooks
    def track(self, data: Any) -> tuple[Any, Any]:
        """Return ``(view, tracker)``: the object a rule reads while checking one file instead of
        ``data``, and what :meth:`dependencies` turns into that file's dependency record. Default:
        ``(data, None)``, no tracking (the file depends on the whole project)."""
        return data, None

    def dependencies(self, tracker: Any, path: str) -> Any:
        """Return the plain-data dependency record of a file checked with ``tracker`` (``None``:
        the whole project)."""
        return None

    def still_valid(self, data: Any, path: str, digest: bytes, record: Any) -> bool:
        """True when the findings of ``path`` (content ``digest``) that depended on ``record`` are
        still those of the project object ``data``. Must be conservative: when in doubt, False."""
        return False
