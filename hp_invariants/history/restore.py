"""Restore from history: name the commit that took a missing member away, and repair from there.

The incident's fix for ``get_input_embeddings`` was exactly this: restore the accessor that a
docstring clean-up deleted. For a finding whose rule says a class lacks a member
(:meth:`~hp_invariants.api.Rule.missing_member`) in a git work tree,
:class:`RestoreTransform` looks up the member's :mod:`provenance
<hp_invariants.history.provenance>` and

* appends it to the finding's message: ``renamed to 'data_process_func' in <sha> '<subject>'``,
  or ``deleted by <sha> '<subject>'; last defined by <sha> '<subject>' (path)``;
* for a deleted **method** of a class in the finding's file, replaces its fix by one that
  re-inserts that definition into the class as it is now (after the method that preceded it then,
  if it still exists, else at the end of the class; re-indented). The fix is **unsafe**
  (``fix --unsafe-fixes``; shown by ``fix --diff --unsafe-fixes``): the old body may refer to
  attributes that the class no longer has. An attribute is never restored (its value came from
  code that may be gone);
* for a **renamed** member that the class in the finding's file has under its new name, replaces
  its fix by an unsafe one that uses the new name at the reference.

When the history has nothing, the finding stays as the rule reports it.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import textwrap
from pathlib import Path
from typing import Any

from hp_invariants.history import git
from hp_invariants.history.provenance import METHOD, Provenance, ProvenanceCache, class_members, find_class, parse
from hp_invariants.model import Applicability, Edit, Finding, Fix


def restore_edit(text: str, found: Provenance) -> Edit | None:
    """Return the insertion that puts the deleted method of ``found`` back into its class in
    ``text`` (the file as it is now), or ``None`` when the class is not in ``text``."""
    tree = parse(text)
    cls = find_class(tree, found.class_name) if tree is not None else None
    if cls is None:
        return None
    after = cls.body[-1]
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == found.previous:
            after = stmt
    lines = text.splitlines(keepends=True)
    body_line = lines[cls.body[0].lineno - 1]
    indent = body_line[: len(body_line) - len(body_line.lstrip())]
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    method = textwrap.indent(textwrap.dedent(found.source), indent)
    method = "".join(line.rstrip("\r\n") + newline if line.strip() else newline
                     for line in method.splitlines(keepends=True))
    end = after.end_lineno or after.lineno
    if end < len(lines):
        return Edit((end + 1, 0), (end + 1, 0), newline + method)
    last = lines[-1] if lines else ""
    col = len(last.rstrip("\r\n"))
    return Edit((end, col), (end, col), newline + newline + method.rstrip("\r\n"))


def rename_edit(text: str, finding: Finding, member: str, new_name: str) -> Edit | None:
    """The edit that writes ``new_name`` for ``member`` where ``finding``'s range ends with it (a
    reference ``self.old``), or ``None`` when the range does not end with the name."""
    lines = text.splitlines(keepends=True)
    if not 0 < finding.end_line <= len(lines):
        return None
    start = finding.end_col - len(member)
    if start < 0 or lines[finding.end_line - 1][start:finding.end_col] != member:
        return None
    return Edit((finding.end_line, start), (finding.end_line, finding.end_col), new_name)


def reshape(finding: Finding, found: Provenance, text: str) -> Finding:
    """``finding`` with ``found`` appended to its message and, where one applies, the fix from
    history (see the module docstring); ``text`` is its file's current text."""
    fix = None
    if found.renamed_to:
        members = class_members(text, found.class_name) or {}
        edit = rename_edit(text, finding, found.member, found.renamed_to) if found.renamed_to in members else None
        if edit is not None:
            fix = Fix((edit,), Applicability.UNSAFE,
                      f"use '{found.renamed_to}' (renamed in {found.removed_by.short})")
    elif found.kind == METHOD:
        edit = restore_edit(text, found)
        if edit is not None:
            fix = Fix((edit,), Applicability.UNSAFE, f"restore '{found.member}' from {found.defined_in.short}")
    restorable = fix is not None and not found.renamed_to
    return dataclasses.replace(finding, message=f"{finding.message}; {found.describe(restorable)}",
                               fix=fix or finding.fix)


def _member_of(finding: Finding) -> tuple[str, str] | None:
    from hp_invariants.registry import get_rule

    try:
        rule = get_rule(finding.rule_id)
    except KeyError:
        return None
    return rule.missing_member(finding)


class RestoreTransform:
    """Shapes the findings of rules with the :meth:`~hp_invariants.api.Rule.missing_member` hook:
    names the commit that took the member away, and fixes from history.

    ``start`` is a path of the run; the git work tree holding it is looked up on the first such
    finding only (a run without one never calls git). ``cache_dir``: the folder of the
    :class:`~hp_invariants.history.provenance.ProvenanceCache` (``None``: not kept on disk).
    Picklable (used inside ``fix -j`` workers); with ``autosave`` the cache is written after each
    call that added to it, else call :meth:`save` after the run.
    """

    def __init__(self, start: str, cache_dir: str | None = None, autosave: bool = True):
        self.start = os.path.abspath(start)
        self.cache_dir = cache_dir
        self.autosave = autosave
        self._cache: ProvenanceCache | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": None}

    def cache(self) -> ProvenanceCache | None:
        """The provenance cache of the work tree holding ``start`` (``None`` outside one)."""
        if self._cache is None:
            root = in_work_tree(self.start)
            if root is None:
                return None
            self._cache = ProvenanceCache(Path(root), self.cache_dir)
        return self._cache

    def __call__(self, findings: list[Finding], ctx: Any) -> list[Finding]:
        result = []
        for finding in findings:
            member = _member_of(finding)
            if member is not None:
                cache = self.cache()
                if cache is None:
                    return findings
                try:
                    rel = git.relpath(ctx.path, cache.root)
                except ValueError:
                    rel = None
                found = cache.get(rel, ctx.source.text, *member) if rel is not None else None
                if found is not None:
                    finding = reshape(finding, found, ctx.source.text)
            result.append(finding)
        if self.autosave:
            self.save()
        return result

    def save(self) -> None:
        """Write the provenance cache (when something was added)."""
        if self._cache is not None:
            self._cache.save()


_ROOTS: dict[str, str | None] = {}


def in_work_tree(path: str) -> str | None:
    """Return the git work tree root holding ``path``, or ``None`` (memoized per path)."""
    if path not in _ROOTS:
        try:
            _ROOTS[path] = str(git.repo_root(path))
        except git.GitError:
            _ROOTS[path] = None
    return _ROOTS[path]
