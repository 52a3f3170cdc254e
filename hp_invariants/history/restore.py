"""Restore from history (E9503): the last definition of a method that a commit deleted.

The incident's fix for ``get_input_embeddings`` was exactly this: restore the accessor that a
docstring clean-up deleted. For an E9503 finding (``'C' object has no attribute 'm'``) in a git
work tree, :func:`last_definition` searches the history for the newest commit whose parent still
defined ``m`` in a class named ``C`` (``git log -S "def m"``, newest first, files renamed or moved
included), and :class:`RestoreTransform` then

* appends the provenance to the finding's message (``last defined in <sha> '<subject>'; deleted by
  <sha> '<subject>'``), and
* replaces its fix by one that re-inserts that definition into the class as it is now (after the
  method that preceded it then, if it still exists, else at the end of the class; re-indented).
  The fix is **unsafe** (``fix --unsafe-fixes``; shown by ``fix --diff --unsafe-fixes``): the old
  body may refer to attributes that the class no longer has.

When the history has no such definition, the finding stays as the rule reports it.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hp_invariants.history import git
from hp_invariants.history.pins import parse
from hp_invariants.model import Applicability, Edit, Finding, Fix

RULE_SYMBOL = "undefined-method-call"


@dataclass(frozen=True)
class Definition:
    """A method's last definition: its source, the method it followed, and the commits."""

    class_name: str
    method: str
    source: str
    previous: str | None
    defined_in: git.Commit
    deleted_by: git.Commit
    path: str
    added_by: git.Commit | None = None

    def provenance(self) -> str:
        """``deleted by <sha> '<subject>'; last defined by <sha> '<subject>' (path)``: the commit that
        deleted the method and the one that added its last definition (else the last commit that
        still had it)."""
        origin = self.added_by or self.defined_in
        return (f"deleted by {self.deleted_by.short} '{self.deleted_by.subject}'; last defined by "
                f"{origin.short} '{origin.subject}' ({self.path}), restorable with `fix --unsafe-fixes`")


def _find_method(text: str, class_name: str, method: str) -> tuple[str, str | None] | None:
    tree = parse(text)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            previous = None
            for stmt in node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == method:
                    first = min([stmt.lineno] + [d.lineno for d in stmt.decorator_list])
                    lines = text.splitlines(keepends=True)[first - 1:stmt.end_lineno]
                    return "".join(lines), previous
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    previous = stmt.name
    return None


_CACHE: dict[tuple[str, str, str], Definition | None] = {}


def last_definition(root: Path, class_name: str, method: str) -> Definition | None:
    """Return the last definition of ``class_name.method`` in the history of the repository at
    ``root``, or ``None`` (not a repository, never defined, or still defined at ``HEAD``).

    Searches the commits that add or remove ``def method`` (newest first, at most 200) for one whose
    parent defines the method in a class of that name; memoized per process.
    """
    key = (str(root), class_name, method)
    if key in _CACHE:
        return _CACHE[key]
    found = None
    try:
        commits = git.log_pickaxe(f"def {method}", root)
        for index, commit in enumerate(commits):
            parent = git.parent_of(commit.sha, root)
            if parent is None:
                continue
            for old_path, new_path in git.changed_files(parent, commit.sha, root, pickaxe=f"def {method}"):
                if old_path is None:
                    continue
                raw = git.show_file(parent, old_path, root)
                if raw is None:
                    continue
                hit = _find_method(raw.decode("utf-8", "replace"), class_name, method)
                if hit is None:
                    continue
                if new_path is not None:  # still defined after the commit (moved, not deleted)?
                    after = git.show_file(commit.sha, new_path, root)
                    if after is not None and _find_method(after.decode("utf-8", "replace"), class_name, method):
                        continue
                defined_in = git.commit_info(parent, root)
                found = Definition(class_name, method, hit[0], hit[1], defined_in, commit, old_path,
                                   _added_by(commits[index + 1:], class_name, method, root))
                break
            if found:
                break
    except git.GitError:
        found = None
    _CACHE[key] = found
    return found


def _added_by(older: list[git.Commit], class_name: str, method: str, root: Path) -> git.Commit | None:
    """The newest of ``older`` commits that added ``class_name.method`` (its parent lacks it)."""
    for commit in older:
        parent = git.parent_of(commit.sha, root)
        for old_path, new_path in git.changed_files(parent, commit.sha, root, pickaxe=f"def {method}"):
            raw = git.show_file(commit.sha, new_path, root) if new_path else None
            if raw is None or _find_method(raw.decode("utf-8", "replace"), class_name, method) is None:
                continue
            before = git.show_file(parent, old_path, root) if parent and old_path else None
            if before is None or _find_method(before.decode("utf-8", "replace"), class_name, method) is None:
                return commit
    return None


def restore_edit(text: str, definition: Definition) -> Edit | None:
    """Return the insertion that puts ``definition`` back into its class in ``text`` (the file as
    it is now), or ``None`` when the class is not in ``text``."""
    tree = parse(text)
    if tree is None:
        return None
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == definition.class_name]
    if not classes:
        return None
    cls = classes[0]
    after = cls.body[-1]
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == definition.previous:
            after = stmt
    lines = text.splitlines(keepends=True)
    body_line = lines[cls.body[0].lineno - 1]
    indent = body_line[: len(body_line) - len(body_line.lstrip())]
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    method = textwrap.indent(textwrap.dedent(definition.source), indent)
    method = "".join(line.rstrip("\r\n") + newline if line.strip() else newline
                     for line in method.splitlines(keepends=True))
    end = after.end_lineno or after.lineno
    if end < len(lines):
        return Edit((end + 1, 0), (end + 1, 0), newline + method)
    last = lines[-1] if lines else ""
    col = len(last.rstrip("\r\n"))
    return Edit((end, col), (end, col), newline + newline + method.rstrip("\r\n"))


class RestoreTransform:
    """Shapes E9503 findings: names the commit of the last definition and fixes by restoring it.

    ``start`` is a path of the run; the git work tree holding it is looked up on the first E9503
    finding only (a run without one never calls git). Picklable (used inside ``fix -j`` workers).
    """

    def __init__(self, start: str):
        self.start = os.path.abspath(start)

    def __call__(self, findings: list[Finding], ctx: Any) -> list[Finding]:
        result = []
        root = None
        for finding in findings:
            if len(finding.args) >= 2 and " " not in str(finding.args[1]):
                root = root or in_work_tree(self.start)
                if root is None:
                    return findings
                class_name = str(finding.args[0]).split(".")[-1]
                definition = last_definition(Path(root), class_name, str(finding.args[1]))
                if definition is not None:
                    edit = restore_edit(ctx.source.text, definition)
                    fix = Fix((edit,), Applicability.UNSAFE,
                              f"restore '{definition.method}' from {definition.defined_in.short}") if edit else None
                    finding = dataclasses.replace(
                        finding, message=f"{finding.message}; {definition.provenance()}",
                        fix=fix or finding.fix)
            result.append(finding)
        return result


_ROOTS: dict[str, str | None] = {}


def in_work_tree(path: str) -> str | None:
    """Return the git work tree root holding ``path``, or ``None`` (memoized per path)."""
    if path not in _ROOTS:
        try:
            _ROOTS[path] = str(git.repo_root(path))
        except git.GitError:
            _ROOTS[path] = None
    return _ROOTS[path]
