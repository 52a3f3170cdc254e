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
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, Iterator, Mapping, Sequence, Tuple, TypeVar, Union

from hp_invariants.model import Applicability, Confidence, Edit, Finding, Fix
from hp_invariants.source import SourceFile, identifier_text

if TYPE_CHECKING:  # pragma: no cover - imported where used: a run answered from the results cache never needs them
    from hp_invariants.semantic import SemanticModel

T = TypeVar("T")


class _Declared:
    """What :class:`Rule` and :class:`ProjectFacts` share: a class may be a light *declaration* (its
    class attributes, and the few light methods it defines itself) whose analysis lives in a module
    imported on first use, so that a run that answers every file from the results cache imports none
    of the analysis.

    ``implementation`` is ``"module:Class"``; the class that sets it (in its own body) is the
    declaration, and ``Class`` subclasses it and holds the analysis (the subclass inherits the
    declaration's attributes, so both answer the same ids, options and facts). The base methods that
    need the analysis (``check``, ``build`` ...) hand the call to :meth:`analysis`; an instance of
    ``Class``, or of any class that does not set ``implementation`` itself, is its own analysis.
    """

    implementation: str = ""

    def analysis(self) -> Any:
        """The object holding the analysis: the instance of ``implementation`` (its module imported
        and the class made on first call, once per object) for a declaration, else ``self``. Raises
        ``ImportError``/``AttributeError`` when ``implementation`` names no class."""
        found = self.__dict__.get("_analysis")
        if found is None:
            found = self
            declared = type(self).__dict__.get("implementation")
            if declared:
                module, _, name = declared.partition(":")
                found = getattr(importlib.import_module(module), name)()
            self.__dict__["_analysis"] = found
        return found

    @property
    def analysis_module(self) -> str:
        """The name of the module holding the analysis (``implementation``'s module, else the class's),
        without importing it. A rule's documentation is that module's docstring."""
        return self.implementation.partition(":")[0] if self.implementation else type(self).__module__


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


class Rule(_Declared):
    """Base class of an invariant rule. A bundled rule is two classes: its declaration in
    :mod:`hp_invariants.declarations` (the class attributes below and ``implementation``; all that
    the configuration, the front ends and the results cache read) and, in its module under
    ``hp_invariants.rules``, the subclass of the declaration that holds the analysis (``check``, the
    history hooks), imported when a file is first checked (see :class:`_Declared`). A rule defined in
    one class (a plugin's, a test's) sets no ``implementation`` and works as before.

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
    * ``project_on_demand``: True when the rule reads its ``project_facts`` only for some files (a
      call it cannot resolve in the file: E9501, E9504): it then also runs in the early analysis on
      the tree the project build parsed, where :meth:`FileContext.project_data` raises
      :class:`ProjectFactsDeferred`; the engine drops that rule's findings of the file there and runs
      it again in the check, when the facts exist (a cold ``check`` parses only such files twice);
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

    The docstring of the rule's analysis module (:attr:`analysis_module`) is its user documentation
    (``docs/rules/<symbol>.md`` and ``hp-invariants explain`` print it).
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
    project_on_demand: bool = False
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
        prefilter never skips a file that a configured name could match. A token is also found
        where the text spells it with characters Python reads as it (:func:`identifier_text`).
        """
        analysis = self.analysis()
        if analysis is not self:
            return analysis.applies_to(text, options)
        tokens = self.prefilter
        if self.prefilter_option and options and self.prefilter_option in options:
            tokens = options[self.prefilter_option]
        if not tokens or any(token in text for token in tokens):
            return True
        spelled = identifier_text(text)  # a name spelled with compatibility characters (``ﬁ``, ``ｆ``)
        return spelled is not text and any(token in spelled for token in tokens)

    def prefilter_record(self, data: Any, options: dict[str, Any] | None = None) -> str | None:
        """What :meth:`applies_to` reads from the project object ``data`` (of ``project_facts``) under
        this rule's ``options``, as a plain string: a file the prefilter skipped is checked again
        when it differs. Only called when ``prefilter_reads_project``."""
        analysis = self.analysis()
        return analysis.prefilter_record(data, options) if analysis is not self else None

    def check(self, ctx: "FileContext") -> Iterable[Finding]:  # pragma: no cover - abstract
        """Yield the findings of this rule in the file of ``ctx`` (a
        :class:`FileContext`)."""
        analysis = self.analysis()
        if analysis is self:
            raise NotImplementedError
        return analysis.check(ctx)

    # ------------------------------------------------------------------ history hooks (optional)
    def pin_repair(self, finding: Finding, before: ast.Module, after: ast.Module) -> "Repair | None":
        """The repair a change made that removed ``finding`` (located in ``before``, the parsed file
        before the change; ``after``: the file after it), in terms :meth:`repair_state` re-checks;
        ``None`` (the default) when the rule does not recognise it: ``hp-invariants pin`` then
        records the removed finding itself (reported when a finding of the rule returns there)."""
        analysis = self.analysis()
        return analysis.pin_repair(finding, before, after) if analysis is not self else None

    def repair_state(self, scope: ast.AST, detail: dict[str, Any]) -> "RepairState | None":
        """The state of a repair of :meth:`pin_repair` (its ``detail``) in ``scope``, the def found
        at the repair's location now; ``None`` (the default) when the rule has no such hook."""
        analysis = self.analysis()
        return analysis.repair_state(scope, detail) if analysis is not self else None

    def missing_member(self, finding: Finding) -> tuple[str, str] | None:
        """``(class name, member name)`` when ``finding`` says that a class lacks a member (E9503),
        so the history features can name the commit that deleted or renamed it; ``None`` (the
        default) otherwise."""
        analysis = self.analysis()
        return analysis.missing_member(finding) if analysis is not self else None


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


class ProjectFactsDeferred(Exception):
    """Raised by :meth:`FileContext.project_data` in an early analysis (the project facts are being
    built): the engine runs the asking rule on that file again once they exist (see
    ``Rule.project_on_demand``). A rule never catches it."""


_CONCRETE = frozenset(
    c for c in vars(ast).values()
    if isinstance(c, type) and type(c) is type and issubclass(c, ast.AST) and not c.__subclasses__()
)
"""Node classes without subclasses (and without the deprecated ``ast.Num``-style instance checks):
for these, ``nodes_of`` compares classes instead of calling isinstance."""


class FileContext:
    """Everything a rule's ``check`` needs for one file.

    * ``source``: the decoded :class:`SourceFile`;
    * ``tree``: its ``ast.Module``, parsed once and shared by all rules; parsed on first use when
      the context was made without one (``parse``: how; default :func:`ast.parse` of the source), so
      a rule that can answer from project facts alone (E9503 on a file none of whose calls can fail)
      costs no parse. A parse error propagates out of the rule that asked, as if the engine had parsed;
    * ``options``: option values by rule id, e.g. ``ctx.option(rule, "local-tensor-attrs")``;
    * ``project``: the :class:`hp_invariants.project.Project` that builds the project-wide facts rules
      declare (read them with :meth:`project_data`), or ``None`` when not available (a rule that
      needs project facts then stays silent);
    * ``early``: True in the early analysis (on the tree the project build parsed, before the facts
      exist): :meth:`project_data` raises :class:`ProjectFactsDeferred` there.
    """

    __slots__ = ("source", "options", "project", "early", "_tree", "_parse", "_parents", "_nodes", "_owners", "_by_types",
                 "_semantic")

    def __init__(self, source: SourceFile, tree: ast.Module | None = None,
                 options: dict[str, dict[str, Any]] | None = None, project: Any = None,
                 parse: Callable[[], ast.Module] | None = None, early: bool = False):
        self.source = source
        self.options = options if options is not None else {}
        self.project = project
        self.early = early
        self._tree = tree
        self._parse = parse
        self._parents: dict[int, ast.AST] | None = None
        self._nodes: list[ast.AST] | None = None
        self._owners: list[ast.AST | None] | None = None
        self._by_types: dict[tuple[type, ...], list[ast.AST]] | None = None
        self._semantic: SemanticModel | None = None

    @property
    def tree(self) -> ast.Module:
        """The file's ``ast.Module`` (parsed on first use; see the class docstring)."""
        tree = self._tree
        if tree is None:
            tree = self._tree = self._parse() if self._parse is not None else ast.parse(self.source.text)
        return tree

    @property
    def semantic(self) -> SemanticModel:
        """The file's :class:`~hp_invariants.semantic.SemanticModel` (definitions, classes,
        bindings, helper resolution), built on first use and shared by every rule."""
        if self._semantic is None:
            from hp_invariants.semantic import SemanticModel  # noqa: PLC0415 - see the imports

            self._semantic = SemanticModel(self.tree)
        return self._semantic

    @property
    def has_tree(self) -> bool:
        """True once the tree exists (given, or parsed because a rule asked for it)."""
        return self._tree is not None

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
        from the cache on first use). Raises ``ValueError`` when there is no project, and
        :class:`ProjectFactsDeferred` in an early analysis (``early``)."""
        if self.project is None or rule.project_facts is None:
            raise ValueError(f"{rule.rule_id}: no project data available")
        if self.early:
            raise ProjectFactsDeferred(rule.rule_id)
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
            from hp_invariants.astutil import walk_with_parents  # noqa: PLC0415 - see the imports

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


class KeyedTable(Generic[T]):
    """A part of a built project object that the store keeps entry by entry, declared in
    :attr:`ProjectFacts.built_parts` as ``KeyedTable[item type]``.

    :meth:`ProjectFacts.persist` gives it as a ``dict`` (``str`` keys); :meth:`ProjectFacts.restore`
    receives a read-only map with the same answers, of which each entry is read from the store, checked
    and decoded when first asked for (a check of torch/distributed reads a few hundred of the 61,000
    entries of E9503's tables). An entry found damaged or malformed is answered from the object rebuilt
    from the summaries instead (the ``rebuild`` of :meth:`ProjectFacts.restore`), so a reader never
    sees damage; that raises ``ValueError`` only when the project changed meanwhile.
    """

    __slots__ = ()

    def get(self, key: str, default: Any = None) -> Any:  # pragma: no cover - implemented by the store
        """The item of ``key``, else ``default``."""
        raise NotImplementedError

    def __getitem__(self, key: str) -> T:
        found = self.get(key, _ABSENT)
        if found is _ABSENT:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:  # pragma: no cover - implemented by the store
        raise NotImplementedError

    def __len__(self) -> int:  # pragma: no cover - implemented by the store
        raise NotImplementedError

    def __iter__(self) -> Iterator[str]:  # pragma: no cover - implemented by the store
        raise NotImplementedError

    def items(self) -> list[tuple[str, T]]:
        """Every ``(key, item)`` in the order :meth:`ProjectFacts.persist` gave them (reads all)."""
        return [(key, self[key]) for key in self]


class ListTable(Generic[T]):
    """The list form of :class:`KeyedTable`: declared as ``ListTable[item type]``, persisted as a
    ``list``, restored as a read-only sequence (``[i]``, ``len``, iteration) whose items are read,
    checked and decoded when first asked for."""

    __slots__ = ()

    def __getitem__(self, i: int) -> T:  # pragma: no cover - implemented by the store
        raise NotImplementedError

    def __len__(self) -> int:  # pragma: no cover - implemented by the store
        raise NotImplementedError

    def __iter__(self) -> Iterator[T]:
        return (self[i] for i in range(len(self)))


_ABSENT = object()

Plain = Union[str, int, float, bool, None, Tuple["Plain", ...]]
"""Nested plain data: a string, a number, a boolean, ``None``, or a tuple of such values (the type of
a value whose shape varies, such as an encoded expression or a dependency record's question)."""


class ProjectFacts(_Declared):
    """Facts about every file of a project that one rule needs (declared as ``Rule.project_facts``).

    A subclass sets ``key`` (a short name, unique among the rules) and implements the methods below.
    Bundled facts are declared as rules are (see :class:`_Declared`): the declaration sets ``key``,
    ``implementation`` and defines :meth:`root_inputs` (all that the results cache reads when no
    file changed); the subclass named by ``implementation`` holds everything else, and the methods
    and type attributes here hand over to it. ``root_inputs`` is never handed over: it stays light.


    * :meth:`summarize`: a small, ``ast``-free summary of one parsed file (never raises for a valid
      tree), of the type :attr:`summary_type` declares;
    * :meth:`build`: the object the rule reads (``ctx.project_data(rule)``), from every file's summary;
    * optionally :attr:`built_parts`, :meth:`persist` and :meth:`restore`: the built object is then
      kept whole and read back while no file of the project changed;
    * optionally :meth:`track` / :meth:`dependencies` / :meth:`still_valid` (with
      :attr:`record_type`): what a file's findings depend on, for the per-file results cache
      (default: on the whole project, so any change in the project re-checks).

    Everything on disk is the store's (:mod:`hp_invariants.store`): a facts kind only declares the
    types of what it keeps, never encodes, validates or versions it. Declared types are built from
    ``str``, ``int``, ``float``, ``bool``, ``None``, ``bytes``, enums, ``tuple[T, ...]``,
    fixed-length tuples, ``list[T]``, ``frozenset[T]``, ``set[T]``, ``dict[K, V]``, ``Optional``
    and unions of types that differ in their JSON form, :data:`Plain`, and ``NamedTuple`` or
    dataclass records of these (their fields' annotations are read). The store writes such values
    as JSON text, checks each against the declared type when it reads it back (a stored value of
    another shape counts as missing: the cache folder may be shared or damaged), and ties each to
    a version tag of the package's own code, so a changed summarizer never reads the old summaries.
    """

    key: str = ""

    @property
    def summary_type(self) -> Any:
        """The type of :meth:`summarize`'s result (``None``, the default: the summaries are not
        cached, every file is parsed on every build). A subclass sets it as a class attribute."""
        analysis = self.analysis()
        return analysis.summary_type if analysis is not self else None

    def summarize(self, tree: ast.Module, path: str, module: str | None = None) -> Any:  # pragma: no cover - abstract
        """Return the summary of the parsed file ``path`` (of :attr:`summary_type`). ``module``: the
        file's dotted module name when the caller knows it (the project walk names every file without
        a ``stat``); ``None``: a kind that needs it names the file itself."""
        analysis = self.analysis()
        if analysis is self:
            raise NotImplementedError
        return analysis.summarize(tree, path, module)

    def build(self, root: Path, paths: list[str], summaries: list[Any], digests: list[bytes]) -> Any:
        """Return the project object from the summaries of ``paths`` (absolute, same order) and their
        content digests (``hashlib.blake2b``, 16 bytes)."""  # pragma: no cover - abstract
        analysis = self.analysis()
        if analysis is self:
            raise NotImplementedError
        return analysis.build(root, paths, summaries, digests)

    # ------------------------------------------------------------------ the built object, kept whole
    @property
    def built_parts(self) -> Mapping[str, Any]:
        """The parts of the built object that the store keeps, ``name -> type``: a plain type (the
        part is read back whole, and checked, when the object is restored), ``KeyedTable[T]`` or
        ``ListTable[T]`` (read back entry by entry, when asked for). Empty (default): the object is
        built from the summaries on every run. A subclass sets it as a class attribute."""
        analysis = self.analysis()
        return analysis.built_parts if analysis is not self else {}

    def persist(self, data: Any) -> dict[str, Any]:
        """Return the parts of the built object ``data`` (what :meth:`build` returned), one per name of
        :attr:`built_parts`: a ``KeyedTable`` part as a ``dict`` with ``str`` keys, a ``ListTable``
        part as a ``list``, any other part as a value of its type. Only called when
        :attr:`built_parts` is set."""  # pragma: no cover - optional
        analysis = self.analysis()
        if analysis is self:
            raise NotImplementedError
        return analysis.persist(data)

    def restore(self, parts: dict[str, Any], rebuild: Callable[[], Any]) -> Any:
        """Return the project object from its ``parts`` as the store read them back: plain parts
        decoded and checked, table parts as :class:`KeyedTable`/:class:`ListTable` views. ``rebuild()``
        gives the object built from the summaries (as if nothing had been kept), for an object that
        keeps state of its own to recover from; a damaged table entry never reaches this code (the
        views answer from the rebuilt object's parts instead)."""  # pragma: no cover - optional
        analysis = self.analysis()
        if analysis is self:
            raise NotImplementedError
        return analysis.restore(parts, rebuild)

    # ------------------------------------------------------------------ results-cache hooks
    @property
    def record_type(self) -> Any:
        """The type of the records :meth:`dependencies` returns (the store keeps them with each file's
        results and gives them back to :meth:`still_valid` checked and decoded); default
        :data:`Plain`. A subclass sets it as a class attribute."""
        analysis = self.analysis()
        return analysis.record_type if analysis is not self else Plain

    def root_inputs(self, root: Path) -> str:
        """Return a text of what the project object reads from the project ``root`` besides its
        Python files (E9503: the library versions the project declares), or ``""`` (default). It is
        part of the project's fingerprint (:meth:`hp_invariants.project.Project.root_fingerprint`),
        so the results cache takes no file's results as current once it changed. Read on every run,
        also when every file's results are cached: a declaration defines it itself (light code)."""
        return ""

    def track(self, data: Any) -> tuple[Any, Any]:
        """Return ``(view, tracker)``: the object a rule reads while checking one file instead of
        ``data``, and what :meth:`dependencies` turns into that file's dependency record. Default:
        ``(data, None)``, no tracking (the file depends on the whole project)."""
        analysis = self.analysis()
        return analysis.track(data) if analysis is not self else (data, None)

    def dependencies(self, tracker: Any, path: str) -> Any:
        """Return the dependency record (of :attr:`record_type`) of a file checked with ``tracker``
        (``None``: the whole project)."""
        analysis = self.analysis()
        return analysis.dependencies(tracker, path) if analysis is not self else None

    def still_valid(self, data: Any, path: str, digest: bytes, record: Any) -> bool:
        """True when the findings of ``path`` (content ``digest``) that depended on ``record`` (of
        :attr:`record_type`, as :meth:`dependencies` returned it) are still those of the project
        object ``data``. Must be conservative: when in doubt, False."""
        analysis = self.analysis()
        return analysis.still_valid(data, path, digest, record) if analysis is not self else False
