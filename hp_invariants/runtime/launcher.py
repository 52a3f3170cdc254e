"""Start N local ranks of a script (or a test function), watch them, end them, and judge the run.

One world size after another, each rank is a process in its own session (so that a hung rank, its
children and its process group can be ended together) with torchrun's environment on a free port of
127.0.0.1. Scripts run as ``python -m hp_invariants.runtime.rank -- SCRIPT ARGS`` (a fresh
interpreter, as torchrun starts them); the pytest plugin's test bodies run in a ``fork`` of the
pytest process (fixtures inherited, no second torch import; CPU only) or, on accelerators, in a
fresh interpreter that imports the test function by file (``spawn``).

Faults, and what the harness does:

* a rank fails (an exception, a failed check, a signal): the others get :attr:`Options.grace`
  seconds to end on their own, then each one's stack is taken (``SIGUSR1`` -> faulthandler) and its
  whole session is killed; the report says where each was waiting;
* no rank ends within :attr:`Options.timeout`: the same, and the report names the rank(s) blocked in a
  ``torch.distributed`` call (a mismatched collective) and where the others were;
* the launcher gets ``SIGTERM`` or ``SIGINT`` (Ctrl-C): every rank's session is killed before it
  exits; each rank also ends itself when its parent goes away (:mod:`~hp_invariants.runtime.rank`);
* the rendezvous port is taken between picking and binding (``EADDRINUSE``): the world size is run
  again on another free port, up to :attr:`Options.port_attempts` times.

No torch here: the launcher's process (the CLI) never imports it.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from hp_invariants.runtime import classify, report
from hp_invariants.runtime.report import ERROR, FAIL, PASS, RankOutcome, RunReport, WorldResult

DEVICES = ("cpu", "cuda", "npu")
BACKENDS = {"cpu": "gloo", "cuda": "nccl", "npu": "hccl"}
HARNESS_EXIT = 3  # hp_invariants.runtime.rank.HARNESS_EXIT (not imported: the rank module is for ranks)
LOG_TAIL_LINES = 30
POLL_S = 0.02
_ADDRESS_IN_USE = ("eaddrinuse", "address already in use")
# A rank's error that only says a peer went away: a consequence of another rank's failure.
_PEER_GONE = re.compile(r"(?i)connection (closed|reset) by peer|broken pipe|remote process exited|"
                        r"socket closed|peer.{0,20}(closed|terminated|exited)|ECONNRESET|EPIPE")


@dataclass
class Options:
    """How to run: world sizes, device, limits, tolerances.

    ``timeout``: seconds one world size may take (every rank ended); ``grace``: seconds the other
    ranks get to end on their own after one failed; ``rtol``/``atol``: the loss comparison;
    ``checks``: install the invariant checks (off: only the losses are recorded); ``env``: extra
    environment for the ranks; ``ports``: the rendezvous ports to try first (tests);
    ``echo``: called with each world size's lines as soon as it is judged.
    """

    world_sizes: Sequence[int] = (1, 2)
    device: str = "cpu"
    timeout: float = 600.0
    rtol: float = 1e-4
    atol: float = 1e-6
    checks: bool = True
    grace: float = 3.0
    port_attempts: int = 3
    stack_wait: float = 3.0
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    static_check: bool = True
    show_output: bool = False
    ports: Iterator[int] | None = None
    echo: Callable[[str], None] | None = None
    _static_cache: dict = field(default_factory=dict, repr=False)


@dataclass
class ScriptTarget:
    """A training script (``path`` and its arguments), or a module with ``module=True``.

    ``start_method``: ``exec`` (a fresh interpreter per rank, as torchrun; the CLI's) or ``fork``
    (a fork of the calling process, which has imported torch already: for tests, CPU only).
    """

    path: str
    args: Sequence[str] = ()
    module: bool = False
    start_method: str = "exec"

    def describe(self) -> str:
        """How the target reads in the report (``-m name`` for a module)."""
        return f"-m {self.path}" if self.module else self.path

    def command(self) -> list[str]:
        """The rank's command line."""
        head = ["--module", self.path] if self.module else ["--", self.path]
        return [sys.executable, "-m", "hp_invariants.runtime.rank", *head, *self.args]


@dataclass
class CallTarget:
    """A function to call on every rank (a pytest test body) with keyword arguments.

    ``rank_kwargs`` names the arguments that take the rank's own values (``"rank"``,
    ``"world_size"``, ``"local_rank"``). ``start_method``: ``fork`` (fixtures inherited, CPU) or
    ``spawn`` (a fresh interpreter imports ``function`` from ``file`` and unpickles the arguments).
    """

    function: Callable[..., Any]
    kwargs: Mapping[str, Any]
    name: str
    file: str
    module: str
    qualname: str
    rank_kwargs: Mapping[str, str] = field(default_factory=dict)
    init_process_group: bool = True
    backend: str | None = None
    start_method: str = "fork"

    def describe(self) -> str:
        """The test's name."""
        return self.name

    def kwargs_for(self, rank: int, world_size: int) -> dict[str, Any]:
        """The arguments of the call on ``rank``."""
        values = {"rank": rank, "local_rank": rank, "world_size": world_size}
        kwargs = dict(self.kwargs)
        kwargs.update({name: values[kind] for name, kind in self.rank_kwargs.items()})
        return kwargs


class LauncherInterrupted(BaseException):
    """The launcher got SIGTERM (or another ending signal): ranks are ended, then it exits."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signal.Signals(signum).name}")
        self.signum = signum


def default_start_method() -> str:
    """``fork`` where it is safe (POSIX, no CUDA/NPU runtime initialized in this process), else ``spawn``.

    A forked rank inherits the caller's imported torch and fixtures, but not an initialized
    accelerator runtime ("Cannot re-initialize CUDA in forked subprocess").
    """
    if not hasattr(os, "fork"):
        return "spawn"
    torch = sys.modules.get("torch")
    if torch is not None:
        for name in ("cuda", "npu"):
            backend = getattr(torch, name, None)
            initialized = getattr(backend, "is_initialized", None)
            try:
                if initialized is not None and initialized():
                    return "spawn"
            except Exception:  # noqa: BLE001 - a half-installed backend: be safe
                return "spawn"
    return "fork"


def warm_up_for_fork() -> None:
    """Import, once in the calling process, what torch imports lazily when a training builds its
    first optimizer (``torch._dynamo``, seconds): otherwise every forked rank imports it again."""
    if "torch" in sys.modules and "torch._dynamo" not in sys.modules:
        try:
            import importlib  # noqa: PLC0415

            importlib.import_module("torch._dynamo")
        except Exception:  # noqa: BLE001 - only an optimisation
            pass


# ------------------------------------------------------------------------------------------ ports
def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (the rendezvous retries when it is not)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _next_port(options: Options) -> int:
    if options.ports is not None:
        try:
            return next(options.ports)
        except StopIteration:
            options.ports = None
    return free_port()


# ---------------------------------------------------------------------------------------- a rank
class _Rank:
    """One rank's process (a ``Popen`` or a forked pid), its files, and how it ended."""

    def __init__(self, rank: int, folder: Path) -> None:
        self.rank = rank
        self.folder = folder
        self.pid = 0
        self.popen: subprocess.Popen | None = None
        self.returncode: int | None = None
        self.ended_at: float | None = None
        self.ended_by_harness = False

    @property
    def log(self) -> Path:
        return self.folder / f"rank{self.rank}.log"

    def poll(self) -> int | None:
        """Reap the process if it ended; its exit code (negative: the signal) or None."""
        if self.returncode is not None:
            return self.returncode
        if self.popen is not None:
            code = self.popen.poll()
        else:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            code = os.waitstatus_to_exitcode(status) if pid else None
        if code is not None:
            self.returncode = code
            self.ended_at = time.monotonic()
        return code

    def send(self, signum: int) -> None:
        """Send ``signum`` to the rank's process only (its stack dump)."""
        if self.poll() is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def kill_session(self) -> None:
        """SIGKILL the rank's whole process group (itself and whatever it started)."""
        for kill in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                kill()
                return
            except (ProcessLookupError, PermissionError):
                continue

    def wait(self, timeout: float = 10.0) -> None:
        """Reap the process (it has been killed)."""
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(POLL_S)


def _rank_env(rank: int, world_size: int, port: int, folder: Path, options: Options, run_id: str,
              checks: bool) -> dict[str, str]:
    """torchrun's environment for ``rank``, plus the harness's variables."""
    env = dict(os.environ)
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)  # rank 0 hosts the store, as without an agent
    if options.env:
        env.update(options.env)
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size), "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
        "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world_size), "ROLE_NAME": "default",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
        "PYTHONUNBUFFERED": "1",
        "HP_INVARIANTS_RESULT_DIR": str(folder), "HP_INVARIANTS_DEVICE": options.device,
        "HP_INVARIANTS_LAUNCHER_PID": str(os.getpid()), "HP_INVARIANTS_CHECKS": "1" if checks else "0",
    })
    if world_size > 1:
        env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default for several processes per node
    return env


def _start(target: ScriptTarget | CallTarget, rank: int, world_size: int, env: dict[str, str],
           folder: Path, options: Options) -> _Rank:
    handle = _Rank(rank, folder)
    if target.start_method == "fork":
        handle.pid = _fork(target, rank, world_size, env, handle.log)
        return handle
    if isinstance(target, CallTarget):
        spec = folder / f"call{rank}.pkl"
        spec.write_bytes(pickle.dumps({
            "sys_path": list(sys.path), "module": target.module, "file": target.file,
            "qualname": target.qualname, "kwargs": pickle.dumps(target.kwargs_for(rank, world_size)),
            "init_process_group": target.init_process_group, "backend": target.backend,
        }))
        command = [sys.executable, "-m", "hp_invariants.runtime.rank", "--call", str(spec)]
    else:
        command = target.command()
    with open(handle.log, "wb") as log:
        handle.popen = subprocess.Popen(command, cwd=options.cwd, env=env, stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    handle.pid = handle.popen.pid
    return handle


def _fork(target: ScriptTarget | CallTarget, rank: int, world_size: int, env: dict[str, str], log: Path) -> int:
    """Fork a rank that runs the script or calls the test body (fixtures inherited); the child never
    returns."""
    kwargs = target.kwargs_for(rank, world_size) if isinstance(target, CallTarget) else {}
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    pid = os.fork()
    if pid:
        return pid
    code = HARNESS_EXIT
    try:  # the child: never return into pytest
        os.setsid()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.stdout = open(1, "w", buffering=1, closefd=False, encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False, encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(env)
        torch = sys.modules.get("torch")
        if torch is not None:
            # The parent's OpenMP pool does not survive fork: a child using more than one thread
            # hangs in its first parallel region (libgomp). One thread per rank, as torchrun sets.
            torch.set_num_threads(1)
        from hp_invariants.runtime import rank as rank_module  # noqa: PLC0415

        session = rank_module.RankSession()
        session.start()
        if isinstance(target, ScriptTarget):
            run = rank_module.run_module if target.module else rank_module.run_script
            code = run(session, target.path, list(target.args))
        else:
            code = rank_module.call_function(session, target.function, kwargs, target.init_process_group,
                                             target.backend, target.file)
    except BaseException:  # noqa: BLE001 - the child must end here whatever happened
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


# ------------------------------------------------------------------------------ one world size
def _wait_for_stacks(ranks: list[_Rank], limit: float) -> None:
    """Wait until each rank's stack file is written and stops growing (at most ``limit`` s)."""
    deadline = time.monotonic() + limit
    sizes: dict[int, int] = {}
    stable_since: dict[int, float] = {}
    while time.monotonic() < deadline:
        done = True
        for handle in ranks:
            path = handle.folder / f"rank{handle.rank}.stack"
            size = path.stat().st_size if path.exists() else 0
            if handle.poll() is not None:
                continue
            if size == 0 or sizes.get(handle.rank) != size:
                sizes[handle.rank] = size
                stable_since[handle.rank] = time.monotonic()
                done = False
            elif time.monotonic() - stable_since[handle.rank] < 0.2:
                done = False
        if done:
            return
        time.sleep(0.05)


def _end(ranks: list[_Rank], take_stacks: bool, stack_wait: float) -> None:
    """Take the stacks of the ranks still running (if asked), then kill every rank's session."""
    blocked = _block_signals()
    try:
        alive = [h for h in ranks if h.poll() is None]
        if alive and take_stacks:
            for handle in alive:
                handle.send(signal.SIGUSR1)
            _wait_for_stacks(alive, stack_wait)
        for handle in ranks:
            if handle.poll() is None:
                handle.ended_by_harness = True
            handle.kill_session()
        for handle in ranks:
            handle.wait()
    finally:
        _unblock_signals(blocked)


def _block_signals() -> set[int] | None:
    if not hasattr(signal, "pthread_sigmask"):
        return None
    try:
        return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    except (OSError, ValueError):
        return None


def _unblock_signals(previous: set[int] | None) -> None:
    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _supervise(ranks: list[_Rank], options: Options) -> tuple[bool, float]:
    """Wait until every rank ended, one failed and the grace passed, or the timeout; (timed out, s)."""
    started = time.monotonic()
    failed_at: float | None = None
    while True:
        codes = [h.poll() for h in ranks]
        now = time.monotonic()
        if all(code is not None for code in codes):
            return False, now - started
        if failed_at is None and any(code not in (None, 0) for code in codes):
            failed_at = now
        if failed_at is not None and now - failed_at >= options.grace:
            return False, now - started
        if now - started >= options.timeout:
            return True, now - started
        time.sleep(POLL_S if now - started < 2 else 2 * POLL_S)


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        data = path.read_bytes()[-16384:].decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _outcomes(ranks: list[_Rank]) -> list[RankOutcome]:
    outcomes = []
    for handle in ranks:
        path = handle.folder / f"rank{handle.rank}.json"
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            result = None
        stack_path = handle.folder / f"rank{handle.rank}.stack"
        try:
            frames = report.parse_stack(stack_path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            frames = []
        waiting = report.waiting_in(frames)[1] if frames else None
        outcomes.append(RankOutcome(handle.rank, handle.returncode, result, _tail(handle.log), frames, waiting,
                                    handle.ended_by_harness))
    return outcomes


def _address_in_use(outcomes: list[RankOutcome]) -> bool:
    """A rank failed because the rendezvous port was taken (its error or its log says EADDRINUSE)."""
    for outcome in outcomes:
        if not outcome.failed or outcome.ended_by_harness:
            continue
        error = (outcome.result or {}).get("error") or {}
        texts = [str(error.get("message", ""))] + [str(c.get("message", "")) for c in error.get("chain", [])]
        texts.append(outcome.log_tail)
        if any(word in text.lower() for text in texts for word in _ADDRESS_IN_USE):
            return True
    return False


def run_world_size(target: ScriptTarget | CallTarget, world_size: int, options: Options) -> WorldResult:
    """Run ``target`` on ``world_size`` ranks (retrying a taken port) and judge it."""
    run_id = f"hp-invariants-{uuid.uuid4().hex[:12]}"
    notes: list[str] = []
    attempt = 0
    while True:
        attempt += 1
        port = _next_port(options)
        with tempfile.TemporaryDirectory(prefix=f"hp-invariants-ws{world_size}-") as tmp:
            folder = Path(tmp)
            ranks: list[_Rank] = []
            timed_out, wall, finished = False, 0.0, False
            started = time.monotonic()
            try:
                for rank in range(world_size):
                    env = _rank_env(rank, world_size, port, folder, options, run_id, options.checks)
                    ranks.append(_start(target, rank, world_size, env, folder, options))
                timed_out, wall = _supervise(ranks, options)
                finished = True
            finally:
                # interrupted (SIGTERM, Ctrl-C) or not: no rank survives this block
                _end(ranks, take_stacks=finished, stack_wait=options.stack_wait)
            wall = wall or time.monotonic() - started
            outcomes = _outcomes(ranks)
            order = sorted((h.ended_at or float("inf"), h.rank) for h in ranks)
            if options.show_output:
                for outcome in outcomes:
                    text = _tail(folder / f"rank{outcome.rank}.log", 10**6)
                    if text and options.echo:
                        options.echo("\n".join(f"[world size {world_size}, rank {outcome.rank}] {line}"
                                               for line in text.splitlines()))
        if not timed_out and attempt < options.port_attempts and _address_in_use(outcomes):
            notes.append(f"port {port} was in use (EADDRINUSE) at the rendezvous: retried on another free port")
            continue
        result = judge(world_size, outcomes, timed_out, [rank for _, rank in order], options)
        result.notes = notes + result.notes
        result.attempts, result.port, result.wall_s = attempt, port, wall
        return result


# ------------------------------------------------------------------------------------ the verdict
def _first_line(text: str, limit: int = 300) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _rule_details(signature: classify.Signature, result: dict[str, Any], options: Options) -> tuple[dict, list[str]]:
    rule = {"id": signature.rule_id, "symbol": signature.symbol, "invariant": signature.invariant,
            "explain": signature.explain, "static_finding": None}
    details = [f"invariant: {signature.invariant}"]
    if options.static_check:
        error = result.get("error") or {}
        files = tuple(result.get("user_files") or ())
        key = (signature.rule_id, files)
        if key not in options._static_cache:
            options._static_cache[key] = classify.static_finding(signature.rule_id, files, error.get("frames", []),
                                                                 options.cwd)
        finding, note = options._static_cache[key]
        if finding is not None:
            rule["static_finding"] = finding.render()
            details.append(f"static finding: {finding.render()}")
        else:
            details.append(f"static check: {note}")
    details.append(f"explain: {signature.explain}")
    return rule, details


def _traceback_tail(text: str, lines: int = 8) -> list[str]:
    """The end of a traceback, without the harness's frames (the rank bootstrap, runpy)."""
    kept: list[str] = []
    skip = False
    for line in text.rstrip().splitlines():
        if line.startswith("  File "):
            skip = "hp_invariants/runtime/" in line or "<frozen runpy>" in line
        if not skip:
            kept.append(line)
    return kept[-lines:]


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def judge(world_size: int, outcomes: list[RankOutcome], timed_out: bool, end_order: list[int],
          options: Options) -> WorldResult:
    """The verdict of one world size from its ranks' outcomes (see :class:`WorldResult`)."""
    by_rank = {o.rank: o for o in outcomes}

    def make(status: str, reason: str, **kwargs: Any) -> WorldResult:
        return WorldResult(world_size, status, reason, ranks=outcomes, timed_out=timed_out, **kwargs)

    harness = [o for o in outcomes if o.result and o.result.get("harness_error")]
    if harness:
        return make(ERROR, f"rank {harness[0].rank}: {harness[0].result['harness_error']}",
                    failed_rank=harness[0].rank)
    if timed_out:
        return _hang(make, outcomes, options)
    failed = [by_rank[r] for r in end_order if by_rank[r].failed and not by_rank[r].ended_by_harness]
    if failed:
        # the rank that failed first on its own: a peer's "connection closed" is a consequence
        failed.sort(key=lambda o: (_peer_gone(o), (o.result or {}).get("failed_at") or float("inf")))
        return _failure(make, failed, outcomes, options)
    # every rank ended well
    results = [o.result for o in outcomes if o.result]
    notes = []
    if not any(r.get("hooks_installed") for r in results):
        notes.append("the script never imported torch: no invariant was checked")
    if not any(r.get("process_group") for r in results):
        if world_size > 1:
            return make(ERROR, f"the script never created a process group: its {world_size} ranks each ran alone "
                        "(no torch.distributed.init_process_group or init_device_mesh), nothing distributed was "
                        "checked", notes=notes)
        notes.append("no process group at world size 1 (the script does not create one there)")
    result = make(PASS, "", notes=notes)
    losses = result.global_losses
    checks_run = list(dict.fromkeys(c["check"] for r in results for c in r.get("checks", [])))
    backend = next((r.get("backend") for r in results if r.get("backend")), None)
    parts = []
    if losses:
        parts.append(f"{len(losses)} step(s), global loss " + " -> ".join(f"{x:.6g}" for x in
                                                                          (losses if len(losses) <= 3 else
                                                                           [losses[0], losses[-1]])))
    else:
        parts.append("no loss recorded")
    if backend:
        parts.append(backend)
    parts.append("checks passed: " + (", ".join(checks_run) if checks_run else "none ran"))
    result.reason = "; ".join(parts)
    for r in results:
        if r.get("init_digest_note") and r.get("rank") == 0:
            result.notes.append(f"initial parameter digest {r['init_digest_note']}")
    return result


def _peer_gone(outcome: RankOutcome) -> bool:
    error = (outcome.result or {}).get("error") or {}
    return bool(_PEER_GONE.search(str(error.get("message", ""))))


def _others(primary: RankOutcome, outcomes: list[RankOutcome]) -> list[str]:
    lines = []
    for other in outcomes:
        if other is primary:
            continue
        if other.ended_by_harness:
            lines.append(f"rank {other.rank}: ended by the harness after rank {primary.rank} failed; "
                         f"{other.waiting or 'no stack'}")
        elif other.failed:
            error = (other.result or {}).get("error") or {}
            what = (f"{error.get('type')}: {_first_line(error.get('message', ''), 160)}" if error
                    else f"exit code {other.exit_code}")
            lines.append(f"rank {other.rank}: also failed ({what})")
    return lines


def _failure(make, failed: list[RankOutcome], outcomes: list[RankOutcome], options: Options) -> WorldResult:
    """FAIL: the first rank that failed with a rule class, else the first that failed."""

    def signature_of(outcome: RankOutcome) -> classify.Signature | None:
        result = outcome.result or {}
        for violation in result.get("violations") or []:
            if violation.get("rule") in classify.BY_RULE:
                return classify.BY_RULE[violation["rule"]]
        error = result.get("error")
        if not error:
            return None
        for candidate in [error, *error.get("chain", [])]:
            signature = classify.classify(candidate)
            if signature is not None:
                return signature
        return None

    classified = [(o, signature_of(o)) for o in failed]
    primary, signature = next(((o, s) for o, s in classified if s is not None), (failed[0], None))
    result = primary.result or {}
    error = result.get("error") or {}
    violations = result.get("violations") or []
    details: list[str] = []
    rule = None
    if violations:
        violation = violations[0]
        head = f"{violation['rule']} {signature.symbol}" if signature else "invariant check"
        reason = f"{head}: rank {primary.rank}, at {violation['check']}: {violation['detail']}"
    elif error:
        message = _first_line(error.get("message", ""))
        where = next((f"{report.short_path(f['file'])}:{f['line']}" for f in reversed(error.get("frames", []))
                      if "/torch/" not in f["file"] and "site-packages" not in f["file"]), None)
        raised = f"rank {primary.rank} raised {error.get('type')}: {message}" + (f" (at {where})" if where else "")
        if signature:
            reason = f"{signature.rule_id} {signature.symbol}: {raised}"
        else:
            reason = raised + " (not one of the rule classes' run-time signatures)"
        details.extend("| " + line for line in _traceback_tail(error.get("traceback", "")))
    elif result.get("status") == "exit":
        reason = f"rank {primary.rank} exited with code {primary.exit_code}"
    elif primary.exit_code is not None and primary.exit_code < 0:
        reason = f"rank {primary.rank} was ended by {_signal_name(primary.exit_code)} without a result"
    else:
        reason = f"rank {primary.rank} exited with code {primary.exit_code} without a result"
    if signature is not None:
        rule, rule_lines = _rule_details(signature, result, options)
        details = rule_lines + details
    if not error and not violations and primary.log_tail:
        details.extend("| " + line for line in primary.log_tail.splitlines()[-10:])
    details.extend(_others(primary, outcomes))
    return make(FAIL, reason, rule=rule, failed_rank=primary.rank, details=details)


def _hang(make, outcomes: list[RankOutcome], options: Options) -> WorldResult:
    """FAIL: the timeout passed; name the rank(s) waiting in a collective and where the others were."""
    waiting = [o for o in outcomes if o.waiting and o.waiting.startswith("waiting")]
    parts, details = [], []
    for outcome in outcomes:
        if not outcome.ended_by_harness:
            parts.append(f"rank {outcome.rank} had ended (exit code {outcome.exit_code})")
        elif outcome.waiting:
            parts.append(f"rank {outcome.rank} was {outcome.waiting}")
        else:
            parts.append(f"rank {outcome.rank}: no stack (it did not answer SIGUSR1)")
        if outcome.stack:
            details.append(f"rank {outcome.rank} stack (most recent call first):")
            details.extend("  " + line for line in report.stack_lines(outcome.stack))
    names = ", ".join(str(o.rank) for o in waiting)
    head = (f"hang: rank(s) {names} waiting in a collective at the timeout ({options.timeout:g} s)" if waiting
            else f"hang: no rank ended within the timeout ({options.timeout:g} s)")
    return make(FAIL, f"{head}: " + "; ".join(parts), failed_rank=waiting[0].rank if waiting else None,
                details=details)


# ------------------------------------------------------------------------------------------ a run
def run(target: ScriptTarget | CallTarget, options: Options) -> RunReport:
    """Run ``target`` at each of ``options.world_sizes`` in turn; compare; return the report."""
    if target.start_method == "fork":
        warm_up_for_fork()
    results: list[WorldResult] = []
    for world_size in options.world_sizes:
        result = run_world_size(target, world_size, options)
        results.append(result)
        if options.echo:
            options.echo("\n".join(report.render_world(result)))
    consistency = report.compare(results, options.rtol, options.atol)
    return RunReport(target.describe(), options.device, list(options.world_sizes), results, consistency)


def install_signal_handlers() -> dict[int, Any]:
    """Make SIGTERM (and SIGHUP) raise :class:`LauncherInterrupted` so that ranks are ended first.

    SIGINT already raises ``KeyboardInterrupt``. Returns the previous handlers, for
    :func:`restore_signal_handlers`.
    """

    def handler(signum, frame):
        raise LauncherInterrupted(signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None:
            previous[signum] = signal.signal(signum, handler)
    return previous


def restore_signal_handlers(previous: dict[int, Any]) -> None:
    """Put back the handlers :func:`install_signal_handlers` replaced."""
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def call_target(function: Callable[..., Any], kwargs: Mapping[str, Any] | None = None, *,
                init_process_group: bool = True, backend: str | None = None,
                start_method: str | None = None) -> CallTarget:
    """A :class:`CallTarget` for ``function`` (its module file and qualified name for ``spawn``)."""
    import inspect  # noqa: PLC0415

    module = sys.modules.get(function.__module__)
    file = inspect.getsourcefile(function) or getattr(module, "__file__", "") or ""
    return CallTarget(function=function, kwargs=dict(kwargs or {}), name=function.__qualname__, file=file,
                      module=function.__module__, qualname=function.__qualname__,
                      init_process_group=init_process_group, backend=backend,
                      start_method=start_method or default_start_method())


def run_function(function: Callable[..., Any], world_sizes: Sequence[int], kwargs: Mapping[str, Any] | None = None,
                 *, init_process_group: bool = True, backend: str | None = None, start_method: str | None = None,
                 **options: Any) -> RunReport:
    """Call ``function(**kwargs)`` on every rank of each world size; return the report.

    For tests that assert what the harness finds (``report.results[0].rule["id"] == "E9502"``).
    ``options`` are :class:`Options` fields (``timeout``, ``rtol``, ``checks``, ``device``...).
    """
    target = call_target(function, kwargs, init_process_group=init_process_group, backend=backend,
                         start_method=start_method)
    return run(target, Options(world_sizes=list(world_sizes), **options))
