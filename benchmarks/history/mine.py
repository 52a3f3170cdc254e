"""Candidate miners for the history benchmark (issue #23): the git commands that found the cases of
``cases.toml``, runnable again on any mirror. They only *propose* commits; every case was judged by
reading its diff (see ``docs/history-benchmark.md``).

Usage::

    python benchmarks/history/mine.py KIND [--mirror DIR] [REPO ...]

``REPO`` is ``owner/name`` (default: every ``<owner>+<name>/repo`` under ``--mirror``, default
``/work/.mirror``). Each line printed is a JSON list ``[repo, commit, subject, path, detail...]``.
Kinds:

``renames``   E9503: one-line renames of a call on ``self``/``cls``/``super()``
              (``git log --no-merges -p -U0 -G'(self|cls|super\\(\\))\\.\\w+\\(' -- '*.py'``) in commits
              changing at most 60 lines, where the old name is not a member of a catalogued framework
              class; ``--undefined`` keeps those whose old name the parent defines nowhere
              (``git grep -E 'def NAME\\b|\\bNAME\\s*=[^=]|["']NAME["']' PARENT -- '*.py'``).
``added``     E9503: a ``def m(self...)`` added by a commit of at most 400 changed lines and 8 files
              while the parent calls ``self.m(``/``cls.m(``/``super().m(`` and defines ``m`` nowhere
              (``git log --no-merges -p -U0 -- '*.py'``, then ``git grep`` at the parent).
``ddp``       E9503: ``model.m(`` turned into ``model.module.m(`` (``-G'\\.module\\.\\w+\\('``).
``gates``     E9502: hunks of fix commits (``--grep='fix|bug|crash|broken|error|single|world.size'``)
              that remove a line ``if ...<shard-degree quantity> <op> 1`` (``-G`` on that pattern).
``steps``     E9502: commits touching ``fully_shard(``/``reset_sharded_param``/
              ``register_fsdp_forward_method`` whose changed lines compare a degree with 1 or 2.
``stores``    E9501: added or removed stores into ``._local_tensor`` (``-G'_local_tensor'``).
``raises``    E9504: hunks that remove a ``raise``/``assert`` mentioning a wrap marker next to a submodule
              walk (``-G'raise|assert'``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "hp_invariants" / "data" / "framework_members.json"
CALL = re.compile(r"\b(self|cls|super\(\))\.(\w+)\(")
DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*\(\s*(self|cls)?")
GATE = (r"^[[:space:]]*(if|elif) .*(world_size|dp_shard|shard_degree|shard_size|fsdp_size|dp_size|num_shards|"
        r"is_shard|get_world_size[(][)]).*(> ?1|>= ?2|!= ?1|== ?1|<= ?1|< ?2)")
GATE_PY = re.compile(GATE.replace("[[:space:]]", r"\s").replace("[(][)]", r"\(\)"))
WALK = re.compile(r"\.(modules|named_modules|children|named_children|cells|cells_and_names|name_cells)\(")
MARK = re.compile(r"wrap|_fsdp|fsdp|checkpoint|shared|already", re.I)


def git(gitdir: Path, *args: str) -> str:
    """Output of ``git --git-dir gitdir args`` (text, errors replaced)."""
    return subprocess.run(["git", "--git-dir", str(gitdir), *args], capture_output=True, text=True,
                          errors="replace").stdout


def library_members() -> set[str]:
    """Every member name of the catalogued framework classes (calls of those are not candidates)."""
    data = json.loads(CATALOG.read_text(encoding="utf-8"))
    return {m for entry in data["classes"].values() for m in entry["members"]}


def commits(gitdir: Path, *log_args: str):
    """Yield ``(sha, subject, [(path, '+'|'-', line)])`` of ``git log --no-merges -p -U0 log_args``."""
    proc = subprocess.Popen(["git", "--git-dir", str(gitdir), "log", "--no-merges", "-p", "-U0",
                             "--format=@@@COMMIT %H %s", *log_args, "--", "*.py"],
                            stdout=subprocess.PIPE, text=True, errors="replace")
    sha = subject = path = None
    lines: list = []
    for raw in proc.stdout:
        if raw.startswith("@@@COMMIT "):
            if sha:
                yield sha, subject, lines
            sha, _, subject = raw[10:].rstrip("\n").partition(" ")
            lines, path = [], None
        elif raw.startswith("+++ "):
            path = raw[6:].rstrip("\n") if raw.startswith("+++ b/") else None
        elif raw.startswith("--- "):
            continue
        elif raw[:1] in "+-" and path:
            lines.append((path, raw[0], raw[1:].rstrip("\n")))
    if sha:
        yield sha, subject, lines
    proc.wait()


def defined_anywhere(gitdir: Path, rev: str, name: str) -> bool:
    """Whether the tree of ``rev`` defines, assigns or names ``name`` as a string anywhere."""
    return bool(git(gitdir, "grep", "-l", "-E", rf"def {name}\b|\b{name}\s*=[^=]|['\"]{name}['\"]", rev,
                    "--", "*.py").strip())


def mine_renames(gitdir: Path, undefined: bool):
    """Yield ``[sha, subject, path, old, new]``: a call on self/cls/super() renamed on one line (kind ``renames``)."""
    lib = library_members()
    for sha, subject, lines in commits(gitdir, "-G", r"(self|cls|super\(\))\.\w+\("):
        if len(lines) > 60:
            continue
        added = [(p, t) for p, s, t in lines if s == "+"]
        seen = set()
        for path, sign, text in lines:
            if sign != "-":
                continue
            for m in CALL.finditer(text):
                old = m.group(2)
                for apath, atext in added:
                    for m2 in CALL.finditer(atext):
                        new = m2.group(2)
                        if new != old and apath == path and text.replace(f".{old}(", f".{new}(") == atext \
                                and old not in lib and (old, new) not in seen:
                            seen.add((old, new))
                            if undefined and defined_anywhere(gitdir, f"{sha}^", old):
                                continue
                            yield [sha, subject, path, old, new]


def mine_added(gitdir: Path):
    """Yield ``[sha, subject, path, name, first parent call]``: a called method written by the commit (kind ``added``)."""
    lib = library_members()
    for sha, subject, lines in commits(gitdir):
        if len(lines) > 400 or len({p for p, _, _ in lines}) > 8:
            continue
        removed = {DEF.match(t).group(1) for _, s, t in lines if s == "-" and DEF.match(t)}
        for path, sign, text in lines:
            m = DEF.match(text)
            if sign != "+" or not m or not m.group(2):
                continue
            name = m.group(1)
            if name in removed or name.startswith(("__", "test")) or name in lib:
                continue
            if defined_anywhere(gitdir, f"{sha}^", name):
                continue
            calls = git(gitdir, "grep", "-n", "-E", rf"(self|cls|super\(\))\.{name}\(", f"{sha}^", "--", "*.py")
            if calls.strip():
                yield [sha, subject, path, name, calls.splitlines()[0].split(":", 1)[1]]


def mine_ddp(gitdir: Path):
    """Yield ``[sha, subject, path, line]``: ``m.f(`` turned into ``m.module.f(`` (kind ``ddp``)."""
    for sha, subject, lines in commits(gitdir, "-G", r"\.module\.[A-Za-z_]+\("):
        removed = [t.strip() for _, s, t in lines if s == "-"]
        for path, sign, text in lines:
            m = re.search(r"(\w+)\.module\.(\w+)\(", text) if sign == "+" else None
            if m and text.replace(f"{m.group(1)}.module.{m.group(2)}(", f"{m.group(1)}.{m.group(2)}(").strip() in removed:
                yield [sha, subject, path, text.strip()]


def _hunks(gitdir: Path, sha: str, context: int):
    """Yield ``(path, hunk lines)`` of commit ``sha`` with ``context`` lines of context."""
    diff = git(gitdir, "show", f"-U{context}", "--format=", sha, "--", "*.py")
    path, hunk = None, []
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[6:]
        elif line.startswith("@@"):
            if hunk:
                yield path, hunk
            hunk = [line]
        elif hunk:
            hunk.append(line)
    if hunk:
        yield path, hunk


def mine_gates(gitdir: Path):
    """Yield ``[sha, subject, path, removed gate]``: a shard-degree gate removed by a fix (kind ``gates``)."""
    shas = git(gitdir, "log", "--no-merges", "-i", "-E", "--grep=fix|bug|crash|broken|error|single|world.size",
               "-G", GATE, "--format=%H %s", "--", "*.py").splitlines()
    for row in shas:
        sha, _, subject = row.partition(" ")
        for path, hunk in _hunks(gitdir, sha, 3):
            gone = [l[1:].strip() for l in hunk if l.startswith("-") and GATE_PY.match(l[1:])]
            if gone and len(hunk) < 40:
                yield [sha, subject, path, gone[0]]


def mine_steps(gitdir: Path):
    """Yield ``[sha, subject, "", changed line]``: a must-run step's commit comparing a degree (kind ``steps``)."""
    degree = re.compile(r"(world_size|dp_shard|shard_size|dp_size|fsdp_size|num_shards|_degree|is_shard|"
                        r"mesh.*size\(\)).*(>|==|!=|<|>=) ?[12]")
    for row in git(gitdir, "log", "--no-merges", "-G", r"fully_shard\(|reset_sharded_param|register_fsdp_forward_method",
                   "--format=%H %s", "--", "*.py").splitlines():
        sha, _, subject = row.partition(" ")
        changed = [l for l in git(gitdir, "show", "-U0", "--format=", sha, "--", "*.py").splitlines()
                   if l[:1] in "+-" and not l.startswith(("+++", "---"))]
        hits = [l for l in changed if degree.search(l)]
        if hits:
            yield [sha, subject, "", hits[0].strip()]


def mine_stores(gitdir: Path):
    """Yield ``[sha, subject, path, +/-store]``: a store into ``._local_tensor`` changed (kind ``stores``)."""
    store = re.compile(r"_local_tensor\s*(:[^=]*)?=[^=]|setattr\([^,]*, *.?_local_tensor")
    for sha, subject, lines in commits(gitdir, "-G", "_local_tensor"):
        for path, sign, text in lines:
            if store.search(text):
                yield [sha, subject, path, sign + text.strip()]


def mine_raises(gitdir: Path):
    """Yield ``[sha, subject, path, removed line]``: a raise/assert on a wrap marker removed near a walk (``raises``)."""
    for row in git(gitdir, "log", "--no-merges", "-G", r"raise|assert", "--format=%H %s", "--", "*.py").splitlines():
        sha, _, subject = row.partition(" ")
        for path, hunk in _hunks(gitdir, sha, 6):
            gone = [l for l in hunk if l.startswith("-") and re.search(r"\braise\b|\bassert\b", l) and MARK.search(l)]
            if gone and any(WALK.search(l) for l in hunk) and len(hunk) < 60:
                yield [sha, subject, path, gone[0][1:].strip()]


KINDS = {"renames": None, "added": mine_added, "ddp": mine_ddp, "gates": mine_gates, "steps": mine_steps,
         "stores": mine_stores, "raises": mine_raises}


def main(argv: list[str] | None = None) -> int:
    """Print the candidates of one kind for each repository; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("repos", nargs="*")
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--undefined", action="store_true", help="renames: old name defined nowhere in the parent")
    args = parser.parse_intermixed_args(argv)
    repos = args.repos or sorted(p.parent.name.replace("+", "/", 1) for p in args.mirror.glob("*/repo"))
    for repo in repos:
        gitdir = args.mirror / repo.replace("/", "+", 1) / "repo"
        if not gitdir.is_dir():
            print(f"no mirror of {repo} at {gitdir}", file=sys.stderr)
            continue
        found = mine_renames(gitdir, args.undefined) if args.kind == "renames" else KINDS[args.kind](gitdir)
        for row in found:
            print(json.dumps([repo, *row]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
