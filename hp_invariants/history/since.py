"""``--since REV``: the findings a change introduced, relative to a git revision.

:func:`rev_fingerprints` checks the same files as they were at ``REV`` (extracted with
``git archive`` into a temporary folder, renamed files followed back to their old names) and
returns their fingerprints; :func:`hp_invariants.history.fingerprint.match` then splits the
current findings into new and unchanged. Matching is by fingerprint, not by line, so moved code
and renamed files are not "new".
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

from hp_invariants.history import git
from hp_invariants.history.fingerprint import annotate, read_text_file
from hp_invariants.model import Finding

CheckTree = Callable[[str, Sequence[str]], Sequence[Finding]]
"""``check_tree(tree_root, paths) -> findings``: check ``paths`` (files or folders under
``tree_root``) as if ``tree_root`` were the project."""


def _under(rel: str, given: Sequence[str]) -> bool:
    return any(g in ("", ".") or rel == g or rel.startswith(g.rstrip("/") + "/") for g in given)


def rev_paths(rev: str, paths: Sequence[str], root: Path) -> list[str]:
    """Return the repository-relative paths to check at ``rev`` for ``paths`` given now: the paths
    themselves plus the old names of files renamed since ``rev`` (work tree changes included)."""
    given = []
    for path in paths:
        try:
            given.append(git.relpath(path, root))
        except ValueError:
            raise git.GitError(f"{path} is outside the git repository {root}") from None
    given = ["." if g == "." else g for g in given]
    result = list(given)
    for old, new in git.changed_since(rev, root):
        if old and new and old != new and _under(new, given) and not _under(old, given):
            result.append(old)
    return result


def rev_fingerprints(rev: str, paths: Sequence[str], check_tree: CheckTree) -> tuple[git.Commit, Counter, Counter]:
    """Return the commit ``rev`` names, the multiset of fingerprints of the findings in ``paths`` at
    that commit, and the multiset of their ``(fingerprint, path relative to the repository)`` (what
    :func:`~hp_invariants.history.fingerprint.match` prefers to match first; see :func:`place_of`), a
    file renamed since then under its name now (git's rename detection: the renamed file keeps its
    findings, a copy of its code elsewhere is the new one).

    Raises :class:`hp_invariants.history.git.GitError` outside a repository, for an unknown
    revision or a path outside the repository.
    """
    root = git.repo_root(paths[0] if paths else ".")
    commit = git.commit_info(rev, root)
    wanted = rev_paths(commit.sha, paths or ["."], root)
    with tempfile.TemporaryDirectory(prefix="hp-invariants-since-") as tmp:
        git.extract_tree(commit.sha, root, tmp)
        existing = [os.path.join(tmp, rel) for rel in wanted if os.path.exists(os.path.join(tmp, rel))]
        findings = list(check_tree(tmp, existing)) if existing else []
        marked = annotate(findings, read_text_file)
        renamed = {old: new for old, new in git.changed_since(commit.sha, root) if old and new and old != new}
        places = Counter((item.fingerprint, renamed.get(rel, rel)) for item in marked
                         for rel in [os.path.relpath(item.finding.path, tmp).replace(os.sep, "/")])
    return commit, Counter(item.fingerprint for item in marked), places


def place_of(root: str) -> Callable[[Finding], str]:
    """``place(finding)``: the path of a finding of the working tree relative to the repository
    ``root``, as :func:`rev_fingerprints` gives those of the revision."""
    real_root = os.path.realpath(root)
    return lambda finding: os.path.relpath(os.path.realpath(finding.path), real_root).replace(os.sep, "/")
