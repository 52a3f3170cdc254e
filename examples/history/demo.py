"""Replay the incident in a throw-away git repository: four fixes, pinned, lost in one clean-up.

Run from anywhere (nothing outside a temporary folder is written; git's global configuration is
not touched)::

    python examples/history/demo.py            # add --keep to keep the repository and print its path

It builds a repository from the bundled ``examples/regressions`` (the broken modules) and
``examples/fixed`` (their repaired twins), then:

1. commits the broken modules plus a legacy module with a finding nobody will fix today;
2. commits the four repairs separately, as the original PRs did;
3. ``hp-invariants pin`` on the four repair commits (and shows a refused pin on a non-repair);
4. ``hp-invariants baseline`` accepts the legacy finding; ``check`` is clean;
5. one large "clean-up" commit reintroduces all four bugs among unrelated edits: a function moved
   to a new module, a file renamed, a gate renamed so that the generic E9502 rule stays silent,
   the accessor pair deleted by a docstring clean-up, the legacy module's functions reordered;
6. ``check`` reports each reverted pin with its provenance; ``check --since HEAD~1`` reports only
   what the clean-up introduced; ``fix --unsafe-fixes --diff`` restores the deleted method from
   history; the baseline ratchet drops the legacy entry once it is fixed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BROKEN, FIXED = REPO / "examples" / "regressions", REPO / "examples" / "fixed"

LEGACY = '''"""Legacy wrapping helper kept for old checkpoints (not fixed yet: accepted by the baseline)."""


def wrap_all(model, wrap):
    """Wrap every submodule of ``model`` once."""
    for sub in model.modules():
        if getattr(sub, "_is_wrapped", False):
            raise RuntimeError("already wrapped")
        wrap(sub)


def unwrap_all(model):
    """Remove the wrapped markers."""
    for sub in model.modules():
        sub._is_wrapped = False
'''

PYPROJECT = '''[project]
name = "hsdp-demo"
version = "0.0.1"

[tool.hp-invariants]
baseline = "hp-invariants-baseline.json"   # written by `hp-invariants baseline`, committed
pins = "hp-invariants-pins.json"           # written by `hp-invariants pin COMMIT`, committed
'''

REPAIRS = [  # (module, commit subject), in the order the original PRs landed
    ("hsdp_param.py", "Detach the local shard view so the sharded param stays a leaf (#231)"),
    ("hsdp_state.py", "Reset sharded params at every shard degree, world size 1 included (#232)"),
    ("qwen3_vl_moe_model.py", "Restore Qwen3VLMoeModel.get_input_embeddings (#233)"),
    ("activation_swap.py", "Skip already-wrapped shared submodules instead of raising (#234)"),
]


class Demo:
    """Runs git and hp-invariants in the temporary repository and prints what a user would see."""

    def __init__(self, root: Path):
        self.root = root
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
                    "HP_INVARIANTS_CACHE_DIR": str(root.parent / "cache"), "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_CONFIG_GLOBAL": os.devnull, "NO_COLOR": "1"}

    def git(self, *args: str) -> str:
        out = subprocess.run(["git", *args], cwd=self.root, env=self.env, check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def commit(self, subject: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", subject)
        return self.git("rev-parse", "--short", "HEAD")

    def hp(self, *args: str) -> int:
        print(f"\n$ hp-invariants {' '.join(args)}")
        proc = subprocess.run([sys.executable, "-m", "hp_invariants", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True)
        text = (proc.stdout + proc.stderr).replace(str(self.root) + os.sep, "")
        print(text.rstrip("\n"))
        print(f"[exit {proc.returncode}]")
        return proc.returncode

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def edit(self, rel: str, old: str, new: str) -> None:
        path = self.root / rel
        text = path.read_text(encoding="utf-8")
        assert old in text, (rel, old)
        path.write_text(text.replace(old, new, 1), encoding="utf-8")


def step(title: str) -> None:
    print(f"\n==== {title}")


def run(root: Path) -> int:
    """Replay the incident in the empty folder ``root``; return 0 when every step behaved."""
    demo = Demo(root)
    demo.git("init", "-q", "-b", "main")
    demo.git("config", "user.name", "Demo User")
    demo.git("config", "user.email", "demo@example.invalid")
    demo.git("config", "commit.gpgsign", "false")
    failures = []

    step("1. the broken modules (examples/regressions) and a legacy module")
    demo.write("pyproject.toml", PYPROJECT)
    demo.write("hsdp/__init__.py", "")
    for name, _ in REPAIRS:
        demo.write(f"hsdp/{name}", (BROKEN / name).read_text(encoding="utf-8"))
    demo.write("hsdp/legacy_wrap.py", LEGACY)
    print("initial commit", demo.commit("Import HSDP, the VL-MoE model and the checkpoint wrapper"))

    step("2. the four repairs, one commit each (examples/fixed)")
    shas = []
    for name, subject in REPAIRS:
        demo.write(f"hsdp/{name}", (FIXED / name).read_text(encoding="utf-8"))
        shas.append(demo.commit(subject))
        print(shas[-1], subject)
    demo.edit("hsdp/legacy_wrap.py", "(not fixed yet", "(still used; not fixed yet")
    tidy = demo.commit("Tidy the legacy module's docstring")

    step("3. pin the repairs (and try to pin a commit that repairs nothing)")
    if demo.hp("pin", *shas) != 0:
        failures.append("pin of the four repairs")
    if demo.hp("pin", tidy) != 1:
        failures.append("pin of a non-repair should be refused")

    step("4. adopt: baseline the legacy finding; check is clean")
    demo.hp("baseline")
    demo.commit("Adopt hp-invariants: baseline and fix pins")
    if demo.hp("check") != 0:
        failures.append("check after adoption should be clean")

    step("5. one large 'clean-up' commit reintroduces all four among unrelated edits")
    # E9501: the .detach() is lost while a helper moves below the class and docstrings change
    param = (BROKEN / "hsdp_param.py").read_text(encoding="utf-8")
    helper_start = param.index("def set_requires_grad_if_needed")
    helper_end = param.index("class HSDPParam")
    helper = param[helper_start:helper_end]
    param = param[:helper_start] + param[helper_end:].rstrip("\n") + "\n\n\n" + helper.rstrip("\n") + "\n"
    demo.write("hsdp/hsdp_param.py", param.replace("Regression 1 (E9501): the", "HSDP parameter: the"))
    # E9502: the file is renamed and the gate comes back under a new name the rule does not know
    demo.git("mv", "hsdp/hsdp_state.py", "hsdp/fsdp_state.py")
    state = (BROKEN / "hsdp_state.py").read_text(encoding="utf-8").replace("is_shard", "use_sharding")
    demo.write("hsdp/fsdp_state.py", state.replace("Regression 2 (E9502): ", "FSDP state: "))
    # E9503: the docstring clean-up deletes the accessor pair again
    model = (BROKEN / "qwen3_vl_moe_model.py").read_text(encoding="utf-8")
    demo.write("hsdp/qwen3_vl_moe_model.py", model.replace("Regression 3 (E9503): ", "VL-MoE model: "))
    # E9504: the walk moves to a new module and raises again
    swap = (BROKEN / "activation_swap.py").read_text(encoding="utf-8")
    start, end = swap.index("def _check_and_mark_wrapped"), swap.index("class CheckpointWrapper")
    demo.write("hsdp/wrap_utils.py", '"""Wrapping helpers shared by the wrappers."""\n\nfrom torch import nn\n\n\n'
               + swap[start:end].rstrip("\n") + "\n")
    demo.write("hsdp/activation_swap.py", swap[:start].replace("from torch import nn\n",
               "from torch import nn\n\nfrom hsdp.wrap_utils import _check_and_mark_wrapped\n") + swap[end:])
    # unrelated: the legacy module's functions swap places
    legacy = (root / "hsdp/legacy_wrap.py").read_text(encoding="utf-8")
    first, second = legacy.index("def wrap_all"), legacy.index("def unwrap_all")
    demo.write("hsdp/legacy_wrap.py", legacy[:first] + legacy[second:].rstrip("\n") + "\n\n\n"
               + legacy[first:second].rstrip("\n") + "\n")
    print("clean-up commit", demo.commit("Clean up docstrings and module layout"))
    print(demo.git("show", "--stat", "--format=", "HEAD"))

    step("6a. check: every reverted pin names its original commit")
    demo.hp("check")
    step("6b. --since HEAD~1 (no baseline): only what the clean-up introduced; the legacy finding moved but is not new")
    demo.hp("check", "--no-baseline", "--since", "HEAD~1")
    step("6c. restore the deleted method from history (unsafe fix, shown as a diff)")
    demo.hp("fix", "--unsafe-fixes", "--diff", "hsdp/qwen3_vl_moe_model.py")

    step("7. the baseline ratchet: fix the legacy finding, the stale entry is reported, then dropped")
    demo.hp("fix", "hsdp/legacy_wrap.py")
    if demo.hp("check", "--fail-on-stale-baseline", "hsdp/legacy_wrap.py") != 1:
        failures.append("a stale baseline entry should fail with --fail-on-stale-baseline")
    demo.hp("baseline", "hsdp/legacy_wrap.py")
    if demo.hp("check", "--fail-on-stale-baseline", "hsdp/legacy_wrap.py") != 0:
        failures.append("after `baseline` the entry should be gone")

    step("result")
    print("demo OK" if not failures else "demo FAILED: " + "; ".join(failures))
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: build the repository in a temporary folder and replay the incident."""
    argv = sys.argv[1:] if argv is None else argv
    if shutil.which("git") is None:
        print("the demo needs git on PATH", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="hp-invariants-history-demo-"))
    try:
        (tmp / "repo").mkdir()
        return run(tmp / "repo")
    finally:
        if "--keep" in argv:
            print(f"(repository kept in {tmp / 'repo'})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
