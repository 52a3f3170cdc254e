"""One rank: hooks in, the user's script as ``__main__``, a result file out.

``python -m hp_invariants.runtime.rank [--] SCRIPT [ARGS...]``, ``... --module NAME [ARGS...]`` or
``... --call SPEC`` (a pickled test function and its arguments, for the pytest plugin's spawned
ranks). The launcher (:mod:`hp_invariants.runtime.launcher`) starts one per rank, in its own
session, with torchrun's environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, ...) and ``HP_INVARIANTS_RESULT_DIR``.

Before the script runs, the rank

* registers :mod:`faulthandler` on ``SIGUSR1`` (every thread's stack into ``rank<R>.stack``: the
  launcher asks for it before ending a hung rank) and for fatal signals (into the rank's log);
* ends itself when the launcher goes away (``PR_SET_PDEATHSIG`` and a watchdog thread on the parent
  pid), so no rank outlives it even after ``SIGKILL``;
* arranges for :func:`hp_invariants.runtime.checks.install` to run as soon as ``torch`` is imported
  (a one-shot import hook: the script's own ``import torch`` triggers it, so environment variables
  the script sets before that import still apply).

The script then runs exactly as ``python SCRIPT ARGS`` would run it (``runpy.run_path`` as
``__main__``, ``sys.argv`` = ``[SCRIPT, ARGS...]``, ``sys.path[0]`` = the script's folder), or as
``python -m NAME`` would. Whatever happens, ``rank<R>.json`` is written: the exception (type, MRO,
message, traceback, frames, the ``nn.Module`` whose attribute was missing), the checks, the losses.
Exit status: 0, 1 (an exception), the script's ``sys.exit`` code, or :data:`HARNESS_EXIT`.
"""

from __future__ import annotations

import faulthandler
import importlib.abc
import importlib.util
import json
import os
import pickle
import runpy
import signal
import sys
import sysconfig
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from hp_invariants.runtime import checks

HARNESS_EXIT = 3  # the rank could not be checked (device absent, hooks failed): exit 2 overall
MAX_USER_FILES = 100


def _library_roots() -> tuple[str, ...]:
    """Folders whose files are not the user's (the standard library, site-packages, this package)."""
    roots = {sysconfig.get_paths().get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(str(Path(checks.__file__).resolve().parent.parent))
    return tuple(str(Path(r).resolve()) + os.sep for r in roots if r)


def _is_user_file(path: str, roots: tuple[str, ...]) -> bool:
    if not path or path.startswith("<") or not path.endswith(".py"):
        return False
    resolved = str(Path(path).resolve())
    return not resolved.startswith(roots) and "site-packages" not in resolved and "dist-packages" not in resolved


def user_files(main_file: str | None, frames: list[dict[str, Any]]) -> list[str]:
    """The script, the modules it imported from its own folder tree, and the user frames' files."""
    roots = _library_roots()
    files: list[str] = []
    if main_file:
        files.append(str(Path(main_file).resolve()))
    base = str(Path(main_file).resolve().parent) + os.sep if main_file else str(Path.cwd()) + os.sep
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and str(Path(path).resolve()).startswith(base) and _is_user_file(path, roots):
            files.append(str(Path(path).resolve()))
    files.extend(str(Path(f["file"]).resolve()) for f in frames if _is_user_file(f["file"], roots))
    unique = list(dict.fromkeys(files))
    return unique[:MAX_USER_FILES]


def _module_receiver(exc: BaseException) -> str | None:
    """The class name of the ``nn.Module`` whose missing attribute raised ``exc``, if one did."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(exc, AttributeError):
        return None
    module_type = torch.nn.Module
    obj = getattr(exc, "obj", None)
    if isinstance(obj, module_type):
        return type(obj).__name__
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None and tb.tb_frame.f_code.co_name == "__getattr__":
        receiver = tb.tb_frame.f_locals.get("self")
        if isinstance(receiver, module_type):
            return type(receiver).__name__
    return None


def _one(exc: BaseException) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": type(exc).__name__,
        "mro": [cls.__name__ for cls in type(exc).__mro__],
        "message": str(exc),
        "module_receiver": _module_receiver(exc),
    }
    if isinstance(exc, checks.InvariantViolation):
        record["violation"] = {"rule": exc.rule, "check": exc.check, "detail": exc.detail}
    return record


def describe(exc: BaseException) -> dict[str, Any]:
    """A JSON description of ``exc``: type, MRO, message, traceback, frames, its causes."""
    record = _one(exc)
    record["traceback"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    record["frames"] = [{"file": f.filename, "line": f.lineno, "function": f.name}
                        for f in traceback.extract_tb(exc.__traceback__)]
    chain, seen, current = [], {id(exc)}, exc
    while True:
        current = current.__cause__ or current.__context__
        if current is None or id(current) in seen or len(chain) >= 5:
            break
        seen.add(id(current))
        chain.append(_one(current))
    record["chain"] = chain
    return record


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callback(module)`` once, right after the module ``name`` finished importing."""

    def __init__(self, name: str, callback: Callable[[Any], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname, path, target=None):  # noqa: D102 - importlib protocol
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _CallbackLoader(spec.loader, self)
        return spec


class _CallbackLoader(importlib.abc.Loader):
    """Delegates to the real loader; after ``exec_module`` restores it and runs the callback."""

    def __init__(self, inner, hook: _AfterImport) -> None:
        self._inner = inner
        self._hook = hook

    def create_module(self, spec):  # noqa: D102 - importlib protocol
        return self._inner.create_module(spec)

    def exec_module(self, module):  # noqa: D102 - importlib protocol
        self._inner.exec_module(module)
        module.__loader__ = self._inner
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._inner
        if self._hook in sys.meta_path:
            sys.meta_path.remove(self._hook)
        self._hook.callback(module)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class RankSession:
    """The harness side of one rank: its files, the stack dump, the parent watchdog, the result."""

    def __init__(self) -> None:
        env = os.environ
        self.rank = int(env.get("RANK", "0"))
        self.world_size = int(env.get("WORLD_SIZE", "1"))
        self.folder = Path(env.get("HP_INVARIANTS_RESULT_DIR") or ".")
        self.device = env.get("HP_INVARIANTS_DEVICE", "cpu")
        self.launcher_pid = int(env.get("HP_INVARIANTS_LAUNCHER_PID", "0") or 0)
        self.state = checks.RankState(self.device, env.get("HP_INVARIANTS_CHECKS", "1") != "0", self.rank)
        self.started = time.monotonic()
        self.failed_at: float | None = None  # wall clock of the script's exception
        self.abort: checks.HarnessAbort | None = None  # the device cannot serve this rank
        self._stack_file = None

    # ------------------------------------------------------------------ start-up
    def start(self) -> None:
        """Stack dumps on SIGUSR1, fatal-signal stacks, the parent watchdog, the torch hook."""
        self._stack_file = open(self.folder / f"rank{self.rank}.stack", "w", encoding="utf-8")  # noqa: SIM115
        if hasattr(faulthandler, "register"):
            faulthandler.register(signal.SIGUSR1, file=self._stack_file, all_threads=True, chain=False)
        faulthandler.enable(file=sys.stderr, all_threads=True)
        self._watch_parent()
        if "torch" in sys.modules:
            try:
                self.install(sys.modules["torch"])
            except checks.HarnessAbort as exc:  # reported by run(), which then runs nothing
                self.abort = exc
        else:
            sys.meta_path.insert(0, _AfterImport("torch", self.install))

    def install(self, _torch_module: Any) -> None:
        """The import hook's callback: install the checks (a failure is a harness error)."""
        try:
            checks.install(self.state)
        except checks.HarnessAbort:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not read as the script's failure
            raise checks.HarnessAbort(f"installing the run-time checks failed: {type(exc).__name__}: {exc}") from exc

    def _watch_parent(self) -> None:
        if not self.launcher_pid:
            return
        if sys.platform.startswith("linux"):
            try:
                import ctypes  # noqa: PLC0415

                ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            except (OSError, AttributeError):
                pass
        launcher = self.launcher_pid

        def watch() -> None:
            while True:
                if os.getppid() != launcher:
                    try:
                        os.killpg(os.getpgrp(), signal.SIGKILL)
                    finally:
                        os._exit(HARNESS_EXIT)
                time.sleep(0.5)

        threading.Thread(target=watch, name="hp-invariants-parent-watchdog", daemon=True).start()

    # ------------------------------------------------------------------ running
    def run(self, target: Callable[[], None], main_file: str | None) -> int:
        """Run ``target``; record what happened; write the result file; return the exit status."""
        status, code, error, harness_error = "ok", 0, None, None
        try:
            if self.abort is not None:
                raise self.abort
            target()
        except SystemExit as exc:
            if exc.code not in (0, None):
                status, code = "exit", exc.code if isinstance(exc.code, int) else 1
                if not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)
        except checks.HarnessAbort as exc:
            status, code, harness_error = "harness_error", HARNESS_EXIT, str(exc)
            print(f"hp-invariants: {exc}", file=sys.stderr)
        except BaseException as exc:  # noqa: BLE001 - every failure of the script is reported
            self.failed_at = time.time()
            status, code, error = "error", 1, describe(exc)
            traceback.print_exception(type(exc), exc, exc.__traceback__)
        self.write(status, code, error, harness_error, main_file)
        return code

    def write(self, status: str, code: int, error: dict | None, harness_error: str | None,
              main_file: str | None) -> None:
        """Write ``rank<R>.json`` atomically (temporary file, then rename)."""
        checks.note_end()
        frames = (error or {}).get("frames", [])
        result = {
            "rank": self.rank,
            "world_size": self.world_size,
            "pid": os.getpid(),
            "status": status,
            "exit_code": code,
            "error": error,
            "harness_error": harness_error,
            "user_files": user_files(main_file, frames),
            "wall_s": round(time.monotonic() - self.started, 3),
            "failed_at": self.failed_at,  # which rank failed first
            **self.state.to_json(),
        }
        path = self.folder / f"rank{self.rank}.json"
        temporary = path.with_suffix(".json.tmp")
        temporary.write_text(json.dumps(result, default=str), encoding="utf-8")
        os.replace(temporary, path)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass


def run_script(session: RankSession, script: str, args: list[str]) -> int:
    """Run ``script`` as ``python script args`` would, under ``session``."""
    path = os.path.abspath(script)
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.realpath(path))

    def target() -> None:
        try:  # a script that does not parse never ran: not checkable (ERROR, exit 2), not a failed check
            with open(path, "rb") as handle:
                compile(handle.read(), path, "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise checks.HarnessAbort(f"{script} does not parse: {exc.msg} (line {exc.lineno}); "
                                      "nothing was run") from None
        except OSError:
            pass  # runpy says what is wrong with the path, as python would
        runpy.run_path(path, run_name="__main__")

    return session.run(target, path)


def run_module(session: RankSession, name: str, args: list[str]) -> int:
    """Run module ``name`` as ``python -m name args`` would, under ``session``."""
    sys.argv = [name, *args]  # runpy sets sys.argv[0] to the module's file
    spec = importlib.util.find_spec(name)
    main_file = spec.origin if spec is not None else None
    return session.run(lambda: runpy.run_module(name, run_name="__main__", alter_sys=True), main_file)


def call_function(session: RankSession, function: Callable[..., Any], kwargs: dict[str, Any],
                  init_process_group: bool, backend: str | None, main_file: str | None) -> int:
    """Call ``function(**kwargs)`` under ``session`` (the pytest plugin's rank body).

    With ``init_process_group``, the default process group is created first (``env://``, the
    device's backend unless ``backend`` is given) and destroyed afterwards.
    """

    def body() -> None:
        if "torch" not in sys.modules:
            import torch  # noqa: F401, PLC0415 - triggers the hook
        if init_process_group:
            import torch.distributed as dist  # noqa: PLC0415

            dist.init_process_group(backend=backend)
            try:
                function(**kwargs)
            finally:
                if dist.is_initialized():
                    checks.note_end()
                    dist.destroy_process_group()
        else:
            function(**kwargs)

    return session.run(body, main_file)


def _load_call(spec_path: str) -> tuple[Callable[..., Any], dict[str, Any], bool, str | None, str | None]:
    """Unpickle a call spec written by the launcher: import the test module by file, get the function."""
    with open(spec_path, "rb") as handle:
        spec = pickle.load(handle)  # noqa: S301 - written by our own launcher, in its private folder
    sys.path[:] = spec["sys_path"]
    module = sys.modules.get(spec["module"])
    if module is None:
        module_spec = importlib.util.spec_from_file_location(spec["module"], spec["file"])
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[spec["module"]] = module
        module_spec.loader.exec_module(module)
    target: Any = module
    parts = spec["qualname"].split(".")
    for index, part in enumerate(parts):
        target = getattr(target, part)
        if isinstance(target, type) and index < len(parts) - 1:
            target = target()  # a test class: its method is called on a fresh instance
    kwargs = pickle.loads(spec["kwargs"])  # noqa: S301 - same
    return target, kwargs, spec["init_process_group"], spec["backend"], spec["file"]


def main(argv: list[str] | None = None) -> int:
    """``python -m hp_invariants.runtime.rank``: see the module docstring."""
    argv = list(sys.argv[1:] if argv is None else argv)
    session = RankSession()
    session.start()
    if argv[:1] == ["--call"]:
        try:
            function, kwargs, init_pg, backend, main_file = _load_call(argv[1])
        except BaseException as exc:  # noqa: BLE001 - reported as a harness error
            session.write("harness_error", HARNESS_EXIT, None, f"cannot load the test function: {exc!r}", None)
            return HARNESS_EXIT
        return call_function(session, function, kwargs, init_pg, backend, main_file)
    if argv[:1] == ["--module"]:
        return run_module(session, argv[1], argv[2:])
    if argv[:1] == ["--"]:
        argv = argv[1:]
    return run_script(session, argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main())
