"""Provenance of a missing member: the commit that deleted or renamed it, found in its class's history.

A finding that says a class lacks a member (a rule's :meth:`~hp_invariants.api.Rule.missing_member`
hook: E9503's ``'Trainer' object has no attribute 'data_process_fn'``) gets the commit that took
the member away. The members of a class, as this module reads them from a version of its file:

* ``method``: a ``def`` in the class body (``async def`` too);
* ``class attribute``: ``name = ...`` or ``name: T = ...`` in the class body;
* ``attribute``: assigned in a method (``self.name = ...``, ``self.name: T = ...``,
  ``setattr(self, "name", ...)``, ``self.register_buffer("name", ...)`` and the other
  ``register_*``/``add_module`` calls);
* ``class``: a nested class.

:func:`member_history` walks the commits that change the number of occurrences of the member's
name in the class's file (``git log --follow -S``: newest first, renames of the file followed) and
returns the newest one whose parent's class has the member and whose own class lacks it. If the
same commit added a member of the same kind whose definition (its body, or the value assigned,
with the two names taken out) reads the same, the member was *renamed* to it. The class is looked
up in the finding's file first, else where ``git grep`` finds it, then in the bases it names (two
levels). :class:`ProvenanceCache` keeps the answers per ``HEAD`` in the cache folder, so a warm
check calls no git beyond ``rev-parse``.
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hp_invariants.history import git

METHOD, ATTRIBUTE, CLASS_ATTRIBUTE, NESTED_CLASS = "method", "attribute", "class attribute", "class"
_STORING_CALLS = frozenset({"register_buffer", "register_parameter", "add_module", "register_module"})
_MAX_CLASSES = 6  # the class, then its bases (two levels), searched at most
_MAX_COMMITS = 60  # commits of one file's -S history looked at, newest first


@dataclass(frozen=True)
class Member:
    """A member of a class in one version of its file.

    ``kind``: see the module docstring; ``source``: a method's whole ``def`` (decorators included),
    else the first statement creating it; ``values``: what identifies it across a rename (a
    method's body, each value assigned to it); ``previous``: the method before it in the class body
    (methods only)."""

    kind: str
    source: str
    values: tuple[str, ...]
    previous: str | None = None


def parse(text: str) -> ast.Module | None:
    """Parse ``text``; ``None`` when it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def find_class(tree: ast.AST, class_name: str) -> ast.ClassDef | None:
    """The first class named ``class_name`` in ``tree`` (at any depth)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return node
    return None


def _segment(lines: list[str], first: int, last: int) -> str:
    return "".join(lines[first - 1:last])


def class_members(text: str, class_name: str) -> dict[str, Member] | None:
    """The members of the class ``class_name`` in the file ``text`` (see :class:`Member`), or
    ``None`` when the file does not parse or has no such class."""
    tree = parse(text)
    cls = find_class(tree, class_name) if tree is not None else None
    if cls is None:
        return None
    lines = text.splitlines(keepends=True)
    members: dict[str, Member] = {}
    previous = None
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([stmt.lineno] + [d.lineno for d in stmt.decorator_list])
            body = "\n".join(ast.unparse(s) for s in stmt.body)
            members.setdefault(stmt.name, Member(METHOD, _segment(lines, first, stmt.end_lineno or stmt.lineno),
                                                 (body,), previous))
            previous = stmt.name
        elif isinstance(stmt, ast.ClassDef):
            members.setdefault(stmt.name, Member(NESTED_CLASS, ast.unparse(stmt).splitlines()[0],
                                                 ("\n".join(ast.unparse(s) for s in stmt.body),)))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        value = ast.unparse(stmt.value) if stmt.value is not None else ""
                        members.setdefault(node.id, Member(CLASS_ATTRIBUTE, ast.unparse(stmt), (value,)))
    stores: dict[str, tuple[str, list[str]]] = {}
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.args.args:
            for name, value, node in _self_stores(stmt, stmt.args.args[0].arg):
                stores.setdefault(name, (ast.unparse(node).splitlines()[0], []))[1].append(value)
    for name, (source, values) in stores.items():
        members.setdefault(name, Member(ATTRIBUTE, source, tuple(values)))
    return members


def _self_stores(func: ast.AST, receiver: str):
    """``(name, value text, statement)`` of each member a method assigns on ``receiver``."""
    for node in ast.walk(func):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = ast.unparse(node.value) if node.value is not None else ""
            for target in targets:
                for sub in ast.walk(target):
                    if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                            and sub.value.id == receiver):
                        yield sub.attr, value, node
        elif isinstance(node, ast.Call) and node.args:
            func_node = node.func
            on_self = (isinstance(func_node, ast.Attribute) and func_node.attr in _STORING_CALLS
                       and isinstance(func_node.value, ast.Name) and func_node.value.id == receiver)
            is_setattr = (isinstance(func_node, ast.Name) and func_node.id == "setattr" and len(node.args) >= 2
                          and isinstance(node.args[0], ast.Name) and node.args[0].id == receiver)
            name_arg = node.args[1] if is_setattr else node.args[0] if on_self else None
            if isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str):
                rest = node.args[2:] if is_setattr else node.args[1:]
                yield name_arg.value, " ".join(ast.unparse(a) for a in rest), node


def _similar(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() if a or b else 0.0


def _without(text: str, name: str) -> str:
    return re.sub(rf"\b{re.escape(name)}\b", "\x00", text)


def _value_likeness(member: str, old: Member, name: str, new: Member) -> float:
    """How alike the definitions of ``member`` (``old``) and ``name`` (``new``) read: the best
    similarity of any two of their values, each as written and with the two names taken out
    (``self.fn = fn`` renamed to ``self.func = func`` reads the same)."""
    best = 0.0
    for a in old.values[:8]:
        for b in new.values[:8]:
            best = max(best, _similar(a, b), _similar(_without(_without(a, member), name),
                                                      _without(_without(b, member), name)))
    return best


def renamed_to(member: str, old: Member, before: dict[str, Member], after: dict[str, Member]) -> str | None:
    """The member of ``after`` (the class after a change) that ``member`` (``old``, of ``before``)
    was renamed to: added by the change, of the same kind, with a definition that reads the same
    (:func:`_value_likeness`) and a name alike enough; ``None`` when none fits."""
    candidates = [(name, new) for name, new in after.items() if name not in before and new.kind == old.kind]
    best, best_key = None, (0.0, 0.0)
    for name, new in candidates:
        same = _value_likeness(member, old, name, new)
        alike = _similar(member.lower(), name.lower())
        if same >= 0.9 or (same >= 0.6 and alike >= 0.4) or (len(candidates) == 1 and alike >= 0.6):
            if (same, alike) > best_key:
                best, best_key = name, (same, alike)
    return best


def _commit_plain(commit: git.Commit | None) -> list[str] | None:
    return [commit.sha, commit.subject, commit.date] if commit else None


def _commit_from(data: Any) -> git.Commit | None:
    if data is None:
        return None
    sha, subject, date = data
    return git.Commit(str(sha), str(subject), str(date))


@dataclass(frozen=True)
class Provenance:
    """Where a missing member went: ``removed_by`` (the commit), ``renamed_to`` (the new name, or
    ``None`` when it was deleted), ``kind``, ``source`` and ``previous`` of its last definition (see
    :class:`Member`), ``path`` (its file then), ``defined_in`` (the parent of ``removed_by``) and
    ``added_by`` (the commit that added that definition, when found; methods only)."""

    class_name: str
    member: str
    kind: str
    removed_by: git.Commit
    renamed_to: str | None
    path: str
    defined_in: git.Commit
    source: str = ""
    previous: str | None = None
    added_by: git.Commit | None = None

    def describe(self, restorable: bool = False) -> str:
        """The text appended to the finding's message."""
        by = f"{self.removed_by.short} '{self.removed_by.subject}'"
        if self.renamed_to:
            return f"renamed to '{self.renamed_to}' in {by} ({self.kind} of '{self.class_name}', {self.path})"
        if self.kind == METHOD:
            origin = self.added_by or self.defined_in
            text = f"deleted by {by}; last defined by {origin.short} '{origin.subject}' ({self.path})"
            return text + (", restorable with `fix --unsafe-fixes`" if restorable else "")
        return f"deleted by {by} ({self.kind} of '{self.class_name}' until then, {self.path})"

    def to_plain(self) -> dict[str, Any]:
        """The JSON form (the cache)."""
        return {"class": self.class_name, "member": self.member, "kind": self.kind,
                "removed_by": _commit_plain(self.removed_by), "renamed_to": self.renamed_to, "path": self.path,
                "defined_in": _commit_plain(self.defined_in), "source": self.source, "previous": self.previous,
                "added_by": _commit_plain(self.added_by)}

    @classmethod
    def from_plain(cls, data: Any) -> "Provenance":
        """Read :meth:`to_plain`'s form; raises ``ValueError``/``TypeError``/``KeyError`` when malformed."""
        removed, defined = _commit_from(data["removed_by"]), _commit_from(data["defined_in"])
        if removed is None or defined is None:
            raise ValueError("a provenance needs its commits")
        renamed, previous = data["renamed_to"], data["previous"]
        return cls(str(data["class"]), str(data["member"]), str(data["kind"]), removed,
                   None if renamed is None else str(renamed), str(data["path"]), defined, str(data["source"]),
                   None if previous is None else str(previous), _commit_from(data["added_by"]))


def _text_at(rev: str, path: str, root: Path) -> str | None:
    raw = git.show_file(rev, path, root)
    return raw.decode("utf-8", "replace") if raw is not None else None


def member_history(root: Path, path: str, class_name: str, member: str) -> Provenance | None:
    """The newest commit of the file ``path`` (repo-relative, followed across renames) whose parent's
    class ``class_name`` has ``member`` and whose own class lacks it, as a :class:`Provenance`
    (renamed or deleted); ``None`` when the history has none (or git cannot read it)."""
    try:
        changes = git.log_file_pickaxe(member, path, root, _MAX_COMMITS, word=True)
    except git.GitError:
        return None
    for index, change in enumerate(changes):
        if change.parent is None or change.old_path is None or change.new_path is None:
            continue
        try:
            before_text = _text_at(change.parent, change.old_path, root)
            after_text = _text_at(change.commit.sha, change.new_path, root)
        except git.GitError:
            continue
        before = class_members(before_text, class_name) if before_text is not None else None
        if before is None or member not in before:
            continue
        after = class_members(after_text, class_name) if after_text is not None else None
        if after is None or member in after:  # the class left the file there, or the member stayed
            continue
        old = before[member]
        added = _added_by(changes[index + 1:index + 21], class_name, member, root) if old.kind == METHOD else None
        return Provenance(class_name, member, old.kind, change.commit, renamed_to(member, old, before, after),
                          change.old_path, git.commit_info(change.parent, root), old.source, old.previous, added)
    return None


def _added_by(older: list[git.FileChange], class_name: str, member: str, root: Path) -> git.Commit | None:
    """The newest of ``older`` changes whose commit has ``class_name.member`` and whose parent lacks it."""
    for change in older:
        if change.new_path is None:
            continue
        try:
            after_text = _text_at(change.commit.sha, change.new_path, root)
            before_text = (_text_at(change.parent, change.old_path, root)
                           if change.parent and change.old_path else None)
        except git.GitError:
            continue
        after = class_members(after_text, class_name) if after_text is not None else None
        if after is None or member not in after:
            continue
        before = class_members(before_text, class_name) if before_text is not None else None
        if before is None or member not in before:
            return change.commit
    return None


def _bases(text: str, class_name: str) -> list[str]:
    tree = parse(text)
    cls = find_class(tree, class_name) if tree is not None else None
    names = []
    for base in cls.bases if cls is not None else ():
        node = base.value if isinstance(base, ast.Subscript) else base  # Generic[T], Base[...]
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name and name not in ("object", "ABC", "Generic", "Protocol"):
            names.append(name)
    return names


def class_files(root: Path, class_name: str, near: str | None = None,
                classes: dict[str, list[str]] | None = None) -> list[str]:
    """Repo-relative files of the work tree defining a class named ``class_name`` (``near``, a
    repo-relative file, first when it is one of them); ``classes``: the answer of
    :func:`hp_invariants.history.git.class_definitions` when the caller has it."""
    found = list((classes if classes is not None else git.class_definitions(root)).get(class_name, ()))
    if near in found:
        found.remove(near)
        found.insert(0, near)
    return found


def lookup(root: Path, path: str, text: str, class_name: str, member: str,
           classes: Callable[[], dict[str, list[str]]] | None = None, memo: dict | None = None) -> Provenance | None:
    """The :class:`Provenance` of ``class_name.member`` for a finding in the file ``path``
    (repo-relative; ``text``: its current text): searched in the class's file (``path`` when it
    defines the class), then in the files of the bases it names, two levels up. ``None`` when the
    member still exists in the class as it is now, or no history has it. ``classes`` (returns class
    name -> files, called only when a class's file is needed) and ``memo`` (the answers of
    :func:`member_history`) may be shared by the lookups of a run."""
    memo = memo if memo is not None else {}
    classes = classes or functools.cache(lambda: git.class_definitions(root))
    queue = [(class_name, path if class_members(text, class_name) is not None else None, 0)]
    seen: set[str] = set()
    while queue and len(seen) < _MAX_CLASSES:
        name, known_file, depth = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        files = [known_file] if known_file else class_files(root, name, classes=classes())[:2]
        for rel in files:
            current = text if rel == path else _work_text(root, rel)
            members = class_members(current, name) if current is not None else None
            if members is None or member in members:
                continue
            key = (rel, name, member)
            if key not in memo:
                memo[key] = member_history(root, rel, name, member)
            if memo[key] is not None:
                return memo[key]
            if depth < 2:
                queue.extend((base, None, depth + 1) for base in _bases(current, name))
    return None


def _work_text(root: Path, rel: str) -> str | None:
    try:
        return (root / rel).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


class ProvenanceCache:
    """The answers of :func:`lookup` for one repository, kept on disk while ``HEAD`` stays the same
    (not pickled with it: a ``fix -j`` worker opens its own).

    ``folder``: the cache folder (``None``: nothing is read or written). The answers are one
    document of :mod:`hp_invariants.store` (:func:`~hp_invariants.store.read_document`, ``"history"``
    for the repository); a damaged or foreign one reads as empty. Keys: the finding's file, the
    class, the member."""

    def __init__(self, root: Path, folder: str | None):
        self.root = root
        self.head = git.head(root)
        self.folder = folder if folder and self.head else None  # the cache folder holding the document
        self.entries: dict[str, Any] = {}
        self.changed = False
        self._classes = functools.cache(lambda: git.class_definitions(root))  # one git grep, when needed
        self._memo: dict = {}
        if self.folder:
            from hp_invariants import store

            data = store.read_document(self.folder, root, "history")
            if isinstance(data, dict) and data.get("head") == self.head and isinstance(data.get("entries"), dict):
                self.entries = data["entries"]

    def get(self, path: str, text: str, class_name: str, member: str) -> Provenance | None:
        """:func:`lookup`, answered from the cache when it can be."""
        key = f"{path}\x00{class_name}\x00{member}"
        if key in self.entries:
            try:
                data = self.entries[key]
                return None if data is None else Provenance.from_plain(data)
            except (ValueError, TypeError, KeyError):
                pass
        found = lookup(self.root, path, text, class_name, member, self._classes, self._memo) if self.head else None
        self.entries[key] = found.to_plain() if found else None
        self.changed = True
        return found

    def save(self) -> None:
        """Write the cache file when something was added (a read-only folder only costs speed)."""
        if self.folder and self.changed:
            from hp_invariants import store

            store.write_document(self.folder, self.root, "history", {"head": self.head, "entries": self.entries})
            self.changed = False
