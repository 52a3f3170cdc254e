"""Validate the history features on real fix commits of real repositories (issue #26).

Three steps, each runnable on its own; nothing here writes outside ``--work`` (default a folder
under the system temp dir) and the output files named on the command line:

``mine REPO...``
    Propose fix commits of the E9503 class: small commits (at most 60 changed lines, no merges) that
    turn a call ``recv.old(`` into ``recv.new(`` on an otherwise identical line (a call renamed to
    the member that exists), or that add ``def m`` to a class whose parent calls ``self.m(``; with
    ``--loose``, also commits of at most 200 changed lines whose subject reads like a fix and that
    call a name fewer times in a file.
    Prints one JSON line per candidate: ``{"repo", "fix", "path", "member", "shape"}``. Cheap: git
    only.
``scan REPO... [--snapshots N]``
    Propose the commits that removed an E9503 finding, whatever their shape: check the whole tree
    at ``N`` evenly spaced commits of the default branch's first-parent line; for each finding of
    one snapshot that the next lacks, bisect the line between them for the first commit without it
    (for a merge, the commit of the merged side that removed it). Prints candidates as ``mine``.
``confirm CANDIDATES.jsonl``
    Keep the candidates that hp-invariants confirms: the parent of the fix has an E9503 finding in
    ``path`` naming ``member`` and the fix has none (one scratch clone per repository, checked out
    at the parent then the fix; the class index comes from the cache after the first commit).
    Prints the confirmed ones as JSON lines.
``validate CASES.toml --table docs/history-validation.md``
    For each case: in a scratch clone checked out at the fix, ``hp-invariants pin FIX`` (pinned?),
    ``git revert`` of the fix and ``check`` (is the revert reported as E9590 naming the pin?), and
    ``check`` on the parent (does the finding's provenance name the commit that deleted or renamed
    the member, and the new name, as the case expects?). Per repository, ``check --since M^1`` at a
    merge commit ``M`` is compared with the findings of ``M`` minus those of ``M^1`` computed
    separately (by fingerprint). Writes the results as a Markdown table between the markers of the
    ``--table`` file.

Repositories are read from the mirrors under ``--mirrors`` (``<owner>+<name>/repo``, bare git
directories); scratch clones are ``git clone --no-checkout`` of them. hp-invariants runs as
``python -m hp_invariants`` of this checkout, with its cache in the work folder.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RENAMED_REF = re.compile(r"(\b\w+(?:\(\))?)\.(\w+)\b")
DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*\(\s*self\b")
BEGIN, END = "<!-- history-validation:begin -->", "<!-- history-validation:end -->"


# ---------------------------------------------------------------------- helpers
def git(cwd: Path, *args: str, check: bool = False) -> str:
    """stdout of ``git args`` in ``cwd`` (text; undecodable bytes replaced)."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, errors="replace",
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    if check and proc.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def mirror(mirrors: Path, repo: str) -> Path:
    """The bare mirror of ``owner/name``."""
    return mirrors / repo.replace("/", "+") / "repo"


def scratch(work: Path, mirrors: Path, repo: str) -> Path:
    """A scratch clone of ``repo`` under ``work`` (made once; its work tree is reset by :func:`goto`)."""
    path = work / "clones" / repo.replace("/", "+")
    if not (path / ".git").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(mirror(mirrors, repo)), str(path)], check=True,
                       capture_output=True)
        git(path, "config", "user.name", "history validation")
        git(path, "config", "user.email", "validation@example.invalid")
        git(path, "config", "advice.detachedHead", "false")
    return path


def goto(clone: Path, rev: str) -> None:
    """Check ``rev`` out in ``clone`` (detached, forced; files git cannot read in a partial mirror
    are left out), untracked files removed."""
    git(clone, "checkout", "-q", "-f", "--detach", rev)
    git(clone, "clean", "-q", "-f", "-d", "-x")


def hp(clone: Path, work: Path, *args: str, timeout: int = 1800) -> tuple[int, str, str, float]:
    """Run ``python -m hp_invariants args`` of this checkout in ``clone``: ``(rc, stdout, stderr, seconds)``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HP_INVARIANTS_CACHE_DIR": str(work / "cache"),
           "GIT_TERMINAL_PROMPT": "0"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hp_invariants", *args], cwd=clone, capture_output=True,
                          text=True, errors="replace", env=env, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr, time.perf_counter() - start


def findings_of(out: str) -> list[dict]:
    """The findings of a ``check --format json`` report (``[]`` when it is not one)."""
    try:
        return json.loads(out)["findings"]
    except (ValueError, KeyError, TypeError):
        return []


def names_member(finding: dict, member: str) -> bool:
    """Whether an E9503 finding says its class lacks ``member``."""
    return finding["id"] == "E9503" and f"no attribute '{member}'" in finding["message"]


# ---------------------------------------------------------------------- mine
def commits(gitdir: Path):
    """``(sha, subject, [(path, sign, text)])`` of the non-merge commits touching ``*.py`` (``-U0``)."""
    proc = subprocess.Popen(["git", "--git-dir", str(gitdir), "log", "--no-merges", "-p", "-U0",
                             "--format=@@@COMMIT %H %s", "--", "*.py"], stdout=subprocess.PIPE, text=True,
                            errors="replace")
    sha = subject = path = None
    lines: list[tuple[str, str, str]] = []
    for raw in proc.stdout or ():
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


def renamed_references(removed: str, added: str) -> list[tuple[str, str]]:
    """``(old, new)`` when ``added`` is ``removed`` with one attribute name changed (``self.a(`` ->
    ``self.b(``), else ``[]``."""
    old_refs = [(m.start(2), m.end(2), m.group(2)) for m in RENAMED_REF.finditer(removed)]
    found = []
    for start, end, old in old_refs:
        prefix, suffix = removed[:start], removed[end:]
        if added.startswith(prefix) and added.endswith(suffix) and len(added) > len(prefix) + len(suffix):
            new = added[len(prefix):len(added) - len(suffix)]
            if re.fullmatch(r"\w+", new) and new != old:
                found.append((old, new))
    return found


FIXLIKE = re.compile(r"fix|bug|typo|attributeerror|has no attribute|rename|missing|wrong|broken|error|crash", re.I)
CALLED = re.compile(r"\.(\w+)\(")


def mine(args: argparse.Namespace) -> int:
    """Print the candidates of the ``mine`` step (see the module docstring)."""
    for repo in args.repos:
        gitdir = mirror(args.mirrors, repo)
        seen: set[tuple[str, str]] = set()
        for sha, subject, lines in commits(gitdir):
            if args.loose and len(lines) <= 200 and FIXLIKE.search(subject):
                for path in sorted({p for p, _, _ in lines}):
                    gone = [m for _p, sign, t in lines if _p == path and sign == "-" for m in CALLED.findall(t)]
                    kept = [m for _p, sign, t in lines if _p == path and sign == "+" for m in CALLED.findall(t)]
                    for name in sorted(set(gone)):
                        if gone.count(name) > kept.count(name) and (sha, name) not in seen \
                                and not name.startswith("__"):
                            seen.add((sha, name))
                            print(json.dumps({"repo": repo, "fix": sha, "subject": subject, "path": path,
                                              "member": name, "new": "", "shape": "call dropped"}), flush=True)
            if len(lines) > 60:
                continue
            removed = [(p, t) for p, s, t in lines if s == "-"]
            added = [(p, t) for p, s, t in lines if s == "+"]
            for path, text in removed:
                for apath, atext in added:
                    if apath != path:
                        continue
                    for old, new in renamed_references(text, atext):
                        if f".{old}(" in text and (sha, old) not in seen and not old.startswith("__"):
                            seen.add((sha, old))
                            print(json.dumps({"repo": repo, "fix": sha, "subject": subject, "path": path,
                                              "member": old, "new": new, "shape": "reference renamed"}), flush=True)
            for path, text in added:
                m = DEF.match(text)
                if m and not any(DEF.match(t) and DEF.match(t).group(1) == m.group(1) for _, t in removed):
                    name = m.group(1)
                    if (sha, name) in seen or name.startswith("__"):
                        continue
                    seen.add((sha, name))
                    calls = subprocess.run(["git", "--git-dir", str(gitdir), "grep", "-l", "-E", rf"self\.{name}\(",
                                            f"{sha}^", "--", path], capture_output=True, text=True).stdout
                    if calls.strip():
                        print(json.dumps({"repo": repo, "fix": sha, "subject": subject, "path": path,
                                          "member": name, "new": "", "shape": "method added"}), flush=True)
    return 0


# ---------------------------------------------------------------------- scan
MEMBER = re.compile(r"^'([^']+)' object has no attribute '([^']+)'")


def e9503_keys(clone: Path, work: Path, paths: list[str], timeout: int) -> set[tuple[str, str, str]]:
    """``(path, class, member)`` of the E9503 findings of ``paths`` (``.`` for the whole tree) at
    the checked-out commit."""
    rc, out, err, _ = hp(clone, work, "check", "--format", "json", "--select", "E9503", *paths, timeout=timeout)
    keys = set()
    for finding in findings_of(out):
        m = MEMBER.match(finding["message"])
        if m:
            keys.add((os.path.normpath(finding["path"]), m.group(1), m.group(2)))
    return keys


def scan(args: argparse.Namespace) -> int:
    """Print candidates found by checking snapshots of the history (see the module docstring)."""
    for repo in args.repos:
        clone = scratch(args.work, args.mirrors, repo)
        line = git(clone, "rev-list", "--first-parent", "--reverse", "origin/HEAD").split()
        if len(line) < 2:
            continue
        step = max(1, (len(line) - 1) // max(1, args.snapshots - 1))
        marks = sorted(set(list(range(0, len(line), step)) + [len(line) - 1]))
        known: dict[int, set] = {}

        def at(index: int, paths: list[str] | None = None) -> set:
            goto(clone, line[index])
            present = [p for p in paths if (clone / p).exists()] if paths is not None else ["."]
            return e9503_keys(clone, args.work, present, args.timeout) if present else set()

        for a, b in zip(marks, marks[1:]):
            try:
                if a not in known:
                    known[a] = at(a)
                known[b] = at(b)
            except (subprocess.TimeoutExpired, RuntimeError) as exc:
                print(f"# {repo} {line[b][:10]}: {exc}", file=sys.stderr)
                continue
            for key in sorted(known[a] - known[b]):
                lo, hi = a, b  # present at lo, gone at hi: bisect the first-parent line
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (mid, hi) if key in at(mid, [key[0]]) else (lo, mid)
                fix = line[hi]
                parents = git(clone, "rev-list", "--parents", "-n1", fix).split()[1:]
                if len(parents) > 1:  # a merge: the commit of the merged side that removed it
                    for sha in git(clone, "rev-list", "--reverse", f"{parents[0]}..{parents[1]}", "--",
                                   key[0]).split():
                        goto(clone, sha)
                        if (clone / key[0]).exists() and key not in e9503_keys(clone, args.work, [key[0]],
                                                                                 args.timeout):
                            fix = sha
                            break
                print(json.dumps({"repo": repo, "fix": fix, "subject": git(clone, "log", "-1", "--format=%s",
                                                                            fix).strip(),
                                  "path": key[0], "member": key[2], "class": key[1], "new": "",
                                  "shape": "scan"}), flush=True)
    return 0


# ---------------------------------------------------------------------- confirm
def confirm(args: argparse.Namespace) -> int:
    """Print the candidates hp-invariants confirms (see the module docstring)."""
    work = args.work
    for line in Path(args.candidates).read_text().splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        gitdir = mirror(args.mirrors, case["repo"])
        defined = rf"def {case['member']}\b|\.{case['member']}[[:space:]]*(:[^=]*)?=[^=]|^[[:space:]]+{case['member']}[[:space:]]*="
        if subprocess.run(["git", "--git-dir", str(gitdir), "grep", "-q", "-E", defined, f"{case['fix']}^", "--",
                           case["path"]], capture_output=True).returncode == 0:
            continue  # the parent's file defines or assigns the name: not the missing member (cheap test first)
        clone = scratch(work, args.mirrors, case["repo"])
        try:
            goto(clone, f"{case['fix']}^")
            if not (clone / case["path"]).exists():
                continue
            rc, out, err, _ = hp(clone, work, "check", "--format", "json", "--select", "E9503", case["path"],
                                 timeout=args.timeout)
            before = [f for f in findings_of(out) if names_member(f, case["member"])]
            if not before:
                continue
            goto(clone, case["fix"])
            rc, out, err, _ = hp(clone, work, "check", "--format", "json", "--select", "E9503", case["path"],
                                 timeout=args.timeout)
            after = [f for f in findings_of(out) if names_member(f, case["member"])]
            if not after:
                case["line"] = before[0]["line"]
                print(json.dumps(case), flush=True)
        except (subprocess.TimeoutExpired, RuntimeError) as exc:
            print(f"# {case['repo']} {case['fix'][:10]}: {exc}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------- validate
def expected_text(case: dict) -> str:
    """The provenance text the case expects in the parent's finding."""
    if case.get("renamed_to"):
        return f"renamed to '{case['renamed_to']}' in {case['removed_by'][:7]}"
    if case.get("removed_by"):
        return f"deleted by {case['removed_by'][:7]}"
    return ""


def validate_case(case: dict, work: Path, mirrors: Path, timeout: int) -> dict:
    """Pin, revert and provenance of one case; returns its row of results."""
    clone = scratch(work, mirrors, case["repo"])
    fix, member, path = case["fix"], case["member"], case["path"]
    row = {"id": case["id"], "repo": case["repo"], "fix": fix[:10], "subject": git(clone, "log", "-1", "--format=%s",
                                                                                      fix).strip(),
           "rule": case.get("rule", "E9503"), "member": member, "shape": case.get("shape", "")}
    pins_file = work / f"pins-{case['id']}.json"
    pins_file.unlink(missing_ok=True)
    # 1. pin the fix
    goto(clone, fix)
    rc, out, err, seconds = hp(clone, work, "pin", "--pins", str(pins_file), fix, timeout=timeout)
    pin_ids = [line.split()[1] for line in out.splitlines() if line.startswith("pinned ")]
    row["pinned"] = bool(pin_ids) and rc == 0
    row["expect_pin"] = case.get("expect_pin", True)
    refusal = [line for line in err.splitlines() if "refusing to pin" in line]
    row["pin"] = ", ".join(pin_ids) if pin_ids else (refusal or err.strip().splitlines() or ["?"])[-1]
    row["pin_s"] = round(seconds, 1)
    # 2. revert it; check reports the pin
    row["revert_reported"] = False
    if row["pinned"]:
        reverted = subprocess.run(["git", "revert", "--no-edit", fix], cwd=clone, capture_output=True, text=True)
        row["revert_how"] = "git revert"
        if reverted.returncode != 0:  # a partial mirror lacks a binary file git revert must read: undo the
            goto(clone, fix)          # fix's Python changes in the work tree instead
            diff = git(clone, "diff", "--binary", f"{fix}^", fix, "--", "*.py")
            reverted = subprocess.run(["git", "apply", "-R"], cwd=clone, input=diff, capture_output=True, text=True)
            row["revert_how"] = "git apply -R (the mirror lacks a file git revert reads)"
        if reverted.returncode == 0:
            rc, out, err, seconds = hp(clone, work, "check", "--format", "json", "--pins", str(pins_file), path,
                                       timeout=timeout)
            hits = [f for f in findings_of(out) if f["id"] == "E9590" and f"reverts the fix from {fix[:7]}" in
                    f["message"]]
            row["revert_reported"] = bool(hits)
            row["revert_message"] = hits[0]["message"] if hits else ""
            row["check_s"] = round(seconds, 1)
        else:
            row["revert_message"] = "git revert failed: " + reverted.stderr.strip()[:120]
    # 3. provenance on the parent
    goto(clone, f"{fix}^")
    rc, out, err, seconds = hp(clone, work, "check", "--format", "json", "--select", row["rule"], path,
                               timeout=timeout)
    found = [f for f in findings_of(out) if names_member(f, member)]
    message = found[0]["message"] if found else ""
    said = re.search(r"; (renamed to '[^']+' in \w+ '[^']*'|deleted by \w+ '[^']*')", message)
    row["provenance"] = said.group(1) if said else "(no finding)" if not found else "(none)"
    expected = expected_text(case)
    row["provenance_right"] = bool(found) and (expected in message if expected else not said)
    row["expected"] = expected or "(no provenance)"
    row["parent_check_s"] = round(seconds, 1)
    # provenance must not cost a check without it more than twice (warm): same command, restore off
    rc, out, err, plain = hp(clone, work, "check", "--format", "json", "--select", row["rule"], path,
                             "--config", str(_no_restore_config(work)), timeout=timeout)
    rc, out, err, warm = hp(clone, work, "check", "--format", "json", "--select", row["rule"], path, timeout=timeout)
    row["warm_s"], row["warm_plain_s"] = round(warm, 2), round(plain, 2)
    return row


def _no_restore_config(work: Path) -> Path:
    path = work / "no-restore" / "pyproject.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[tool.hp-invariants]\nrestore-from-history = false\n")
    return path


def since_across_merge(repo: str, work: Path, mirrors: Path, timeout: int, tries: int = 8) -> dict:
    """``check --since M^1`` at a merge commit ``M``, against the findings of ``M`` minus those of
    ``M^1`` computed separately (by fingerprint), on the Python files ``M`` brings: the newest merge
    (of the 60 newest on the default branch, at most ``tries`` looked at) whose files have a finding
    at ``M``, else the last one looked at."""
    clone = scratch(work, mirrors, repo)
    row: dict = {"repo": repo, "merge": "(no merge commit with Python changes among the 60 newest)", "ok": None}
    looked = 0
    for merge in git(clone, "log", "--merges", "--format=%H", "-n", "60", "origin/HEAD").split():
        files = [f for f in git(clone, "diff", "--name-only", f"{merge}^1", merge, "--", "*.py").split() if f]
        if not 0 < len(files) <= 60:
            continue
        looked += 1
        goto(clone, merge)
        present = [f for f in files if (clone / f).exists()]
        rc, out, err, _ = hp(clone, work, "check", "--format", "json", *present, timeout=timeout)
        now = [f.get("fingerprint") for f in findings_of(out)]
        row = {"repo": repo, "merge": merge[:10], "files": len(present), "at_merge": len(now), "ok": None,
               "_merge": merge, "_present": present, "_now": now}
        if now or looked >= tries:
            break
    if "_merge" not in row:
        return row
    merge, present, now = row.pop("_merge"), row.pop("_present"), row.pop("_now")
    goto(clone, f"{merge}^1")
    before_files = [f for f in present if (clone / f).exists()]
    rc, out, err, _ = hp(clone, work, "check", "--format", "json", *before_files, timeout=timeout) \
        if before_files else (0, '{"findings": []}', "", 0.0)
    left = [f.get("fingerprint") for f in findings_of(out)]
    expected = []
    for fp in now:
        if fp in left:
            left.remove(fp)
        else:
            expected.append(fp)
    goto(clone, merge)
    rc, out, err, _ = hp(clone, work, "check", "--format", "json", "--since", f"{merge}^1", *present, timeout=timeout)
    got = [f.get("fingerprint") for f in findings_of(out)]
    row.update(introduced=len(expected), reported=len(got), ok=sorted(got) == sorted(expected) and rc in (0, 1),
               note=err.strip()[-160:])
    return row


def table(rows: list[dict], merges: list[dict]) -> str:
    """The Markdown tables of the results."""
    yes = {True: "yes", False: "**no**", None: "n/a"}
    lines = ["| case | repository | fix commit | rule | member | the repair | pinned? | revert reported? | "
             "provenance on the parent | right? |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        subject = r["subject"].replace("|", "\\|")[:60]
        pinned = r["pin"]
        if not r["pinned"]:  # "hp-invariants: refusing to pin <sha> '<subject>': reason; reason ..."
            reasons = pinned.split(f"{r['subject']}': ", 1)[-1].split("; ")
            pinned = "refused: " + reasons[0].split(": ", 1)[-1] + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1
                                                                   else "")
        lines.append(f"| {r['id']} | {r['repo']} | `{r['fix']}` {subject} | {r['rule']} | `{r['member']}` | "
                     f"{r['shape'].replace('|', '/')} | "
                     f"{yes[r['pinned']] if r['expect_pin'] else 'no, as expected'} ({pinned.replace('|', '/')}) | "
                     f"{yes[r['revert_reported']] if r['expect_pin'] else 'n/a'} | "
                     f"{r['provenance'].replace('|', '/')} | {yes[r['provenance_right']]} |")
    lines += ["", "| repository | merge commit | files it brings | findings at the merge | introduced (computed) | "
              "reported by `--since M^1` | same? |", "|---|---|---|---|---|---|---|"]
    for m in merges:
        lines.append(f"| {m['repo']} | `{m['merge']}` | {m.get('files', '')} | {m.get('at_merge', '')} | "
                     f"{m.get('introduced', '')} | {m.get('reported', '')} | {yes[m['ok']]} |")
    fixes = [r for r in rows if r["expect_pin"]]
    refusals = [r for r in rows if not r["expect_pin"]]
    lines += ["", f"{len(fixes)} fix commits: {sum(r['pinned'] for r in fixes)} pinned, "
                  f"{sum(r['revert_reported'] for r in fixes)} reverts reported; {len(refusals)} commit(s) expected to "
                  f"be refused: {sum(not r['pinned'] for r in refusals)} refused; provenance right on "
                  f"{sum(r['provenance_right'] for r in rows)} of {len(rows)} parents; --since right at "
                  f"{sum(bool(m['ok']) for m in merges)} of {sum(m['ok'] is not None for m in merges)} merges "
                  f"({sum(m['ok'] is None for m in merges)} repositories without a merge commit to try)."]
    return "\n".join(lines) + "\n"


def validate(args: argparse.Namespace) -> int:
    """Run the ``validate`` step (see the module docstring)."""
    cases = tomllib.loads(Path(args.cases).read_text(encoding="utf-8"))["case"]
    if args.only:
        cases = [c for c in cases if c["id"] in args.only]
    rows, merges = [], []
    if args.from_json:  # render again the results of an earlier run
        data = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
        rows, merges, cases = data["cases"], data["merges"], []
        args.no_since = True
    for case in cases:
        print(f"== {case['id']}", file=sys.stderr, flush=True)
        rows.append(validate_case(case, args.work, args.mirrors, args.timeout))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if not args.no_since:
        for repo in sorted({c["repo"] for c in cases}):
            print(f"== --since across a merge: {repo}", file=sys.stderr, flush=True)
            merges.append(since_across_merge(repo, args.work, args.mirrors, args.timeout))
            print(json.dumps(merges[-1]), file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"cases": rows, "merges": merges}, indent=2) + "\n")
    text = table(rows, merges)
    if args.table:
        target = Path(args.table)
        doc = target.read_text(encoding="utf-8") if target.exists() else f"{BEGIN}\n{END}\n"
        start, end = doc.index(BEGIN) + len(BEGIN), doc.index(END)
        target.write_text(doc[:start] + "\n" + text + doc[end:], encoding="utf-8")
    sys.stdout.write(text)
    good = all((r["pinned"] and r["revert_reported"] if r["expect_pin"] else not r["pinned"]) and r["provenance_right"]
               for r in rows)
    return 0 if good else 1


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="folder of <owner>+<name>/repo")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "hp-history-validation",
                        help="scratch clones and the cache")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per hp-invariants run")
    sub = parser.add_subparsers(dest="step", required=True)
    p_mine = sub.add_parser("mine")
    p_mine.add_argument("repos", nargs="+", metavar="OWNER/NAME")
    p_mine.add_argument("--loose", action="store_true",
                        help="also commits of at most 200 changed lines whose subject reads like a fix and "
                             "that call a name fewer times in a file (confirm sorts them out)")
    p_scan = sub.add_parser("scan")
    p_scan.add_argument("repos", nargs="+", metavar="OWNER/NAME")
    p_scan.add_argument("--snapshots", type=int, default=12, help="evenly spaced first-parent commits checked whole")
    p_confirm = sub.add_parser("confirm")
    p_confirm.add_argument("candidates")
    p_validate = sub.add_parser("validate")
    p_validate.add_argument("cases")
    p_validate.add_argument("--table", help="Markdown file whose marked section receives the table")
    p_validate.add_argument("--json", help="write the raw results here")
    p_validate.add_argument("--only", nargs="*", help="case ids")
    p_validate.add_argument("--no-since", action="store_true", help="skip --since across merges")
    p_validate.add_argument("--from-json", help="render the table of an earlier run's --json file (no run)")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    return {"mine": mine, "scan": scan, "confirm": confirm, "validate": validate}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
