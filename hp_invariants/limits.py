"""Per-file limits: the analysis time budget, the deep-stack retry, and file problems.

Robustness (see docs/robustness.md): nothing a file contains can stop a run. Reading, decoding,
parsing and analysis errors become one :class:`~hp_invariants.model.FileProblem` per file
(:func:`problem`):

* ``E0001 syntax-error``: a syntax error, undecodable bytes, a bad coding cookie, NUL bytes;
* ``F0001 fatal``: the file cannot be read (missing, unreadable, a folder, a FIFO, a symlink loop);
* ``F0002 analysis-error``: a rule raised, or the file is too deeply nested even for the deep stack;
* ``F0003 analysis-timeout``: the per-file time budget (``timeout-per-file``) ran out;
* ``F0004 file-too-large``: the file is over ``max-file-size`` and was not read.

:func:`guarded` runs the per-file work: under a SIGALRM time budget (:func:`time_budget`, main
thread only), and, when it hits Python's recursion limit (deeply nested expressions in ``ast.parse``
or in a rule's recursion), once more in a helper thread with a 512 MiB stack and a raised recursion
limit, so that generated code with long operator chains is still checked rather than rejected.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterator, TypeVar

from hp_invariants.model import FileProblem
from hp_invariants.source import FileTooLargeError, SourceDecodeError

T = TypeVar("T")

#: Default per-file analysis budget in seconds (``timeout-per-file``; 0 disables it).
DEFAULT_TIMEOUT = 10.0
#: Default size limit in bytes (``max-file-size``, configured in MiB; 0 disables it). Parsing costs
#: about 110 MB of memory and up to a second per MB of source; the largest file of torch is 1.4 MB.
DEFAULT_MAX_FILE_SIZE = 5 * 2**20

#: Recursion limit and thread stack of the deep retry (see :func:`guarded`): 60 000 frames on a
#: 512 MiB stack leaves more than 8 KiB of C stack per Python frame, so it cannot overflow.
DEEP_RECURSION_LIMIT = 60_000
DEEP_STACK_SIZE = 512 * 2**20


class AnalysisTimeout(BaseException):
    """The per-file time budget ran out.

    A ``BaseException`` (like ``KeyboardInterrupt``) so that a rule's ``except Exception`` cannot
    swallow it.
    """


# ---------------------------------------------------------------------- limits
class _Budget:
    active = False


def _on_alarm(signum: int, frame: Any) -> None:
    if _Budget.active:
        _Budget.active = False
        raise AnalysisTimeout()


@contextlib.contextmanager
def time_budget(seconds: float | None) -> Iterator[bool]:
    """Raise :class:`AnalysisTimeout` in the body if it runs longer than ``seconds``.

    Uses ``signal.setitimer(ITIMER_REAL)`` and SIGALRM, so it only works in the main thread of a
    process (the CLI, its ``-j`` worker processes, pylint); elsewhere, on platforms without
    ``setitimer``, with ``seconds`` falsy, or when some other code already has a timer armed (a
    test harness, say: it is left alone), the body runs without a budget. Yields whether the budget
    is armed. The previous SIGALRM handler is restored on exit.
    """
    if (
        not seconds
        or seconds <= 0
        or _Budget.active
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0
    ):
        yield False
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    _Budget.active = True
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        yield True
    finally:
        _Budget.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


@contextlib.contextmanager
def budget_paused() -> Iterator[None]:
    """Stop the clock of an armed :func:`time_budget` for the body (e.g. while the project's class
    index is built: that is per-project work, not per-file) and restart it with what was left."""
    if not _Budget.active:
        yield
        return
    remaining, _ = signal.setitimer(signal.ITIMER_REAL, 0)
    _Budget.active = False
    try:
        yield
    finally:
        _Budget.active = True
        signal.setitimer(signal.ITIMER_REAL, max(remaining, 0.001))


def _interrupt_thread(thread: threading.Thread) -> None:
    """Ask ``thread`` to raise :class:`AnalysisTimeout` at its next bytecode (CPython only)."""
    try:
        import ctypes

        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident or 0), ctypes.py_object(AnalysisTimeout))
    except (ImportError, AttributeError):  # pragma: no cover - not CPython
        pass


def _run_deep(fn: Callable[[], T], timeout: float | None) -> T:
    """Run ``fn`` in a helper thread with a large stack and a raised recursion limit."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    old_limit = sys.getrecursionlimit()
    try:
        old_size = threading.stack_size(DEEP_STACK_SIZE)
    except (ValueError, RuntimeError) as exc:  # platform refuses large thread stacks
        raise RecursionError(f"no deep stack available: {exc}") from exc
    thread = threading.Thread(target=target, name="hp-invariants-deep", daemon=True)
    try:
        sys.setrecursionlimit(max(old_limit, DEEP_RECURSION_LIMIT))
        thread.start()
    except RuntimeError as exc:  # cannot start a thread (out of memory / threads)
        sys.setrecursionlimit(old_limit)
        raise RecursionError(f"no deep stack available: {exc}") from exc
    finally:
        threading.stack_size(old_size)
    try:
        thread.join(timeout if timeout and timeout > 0 else None)
        if thread.is_alive():
            _interrupt_thread(thread)
            thread.join(1.0)
            raise AnalysisTimeout()
    finally:
        sys.setrecursionlimit(old_limit)
    if "error" in box:
        raise box["error"]
    return box["value"]


def guarded(fn: Callable[[], T], timeout: float | None = DEFAULT_TIMEOUT) -> T:
    """Return ``fn()`` run under the per-file budget of ``timeout`` seconds.

    On ``RecursionError`` (a deeply nested expression in ``ast.parse`` or in a rule's recursion),
    ``fn`` runs once more in a thread with a 512 MiB stack and a recursion limit of 60 000, with
    what is left of the budget (there the budget is a thread join plus an asynchronous
    :class:`AnalysisTimeout`). ``fn`` must be a pure computation (it may run twice). Raises
    :class:`AnalysisTimeout`, and whatever ``fn`` raises, including ``RecursionError`` when even
    the deep stack is not enough.
    """
    start = time.monotonic()
    try:
        with time_budget(timeout):
            return fn()
    except RecursionError:
        pass
    remaining = None
    if timeout and timeout > 0:
        remaining = timeout - (time.monotonic() - start)
        if remaining <= 0:
            raise AnalysisTimeout()
    return _run_deep(fn, remaining)



def problem(path: str, exc: BaseException, timeout: float | None = None) -> FileProblem:
    """Turn an exception met while reading, parsing or analysing ``path`` into a :class:`FileProblem`.

    ``timeout`` is the budget in seconds, quoted in the message of an :class:`AnalysisTimeout`.
    """
    if isinstance(exc, AnalysisTimeout):
        limit = f" of {timeout:g} s" if timeout else ""
        return FileProblem("F0003", "analysis-timeout", path, 1, 0,
                           f"analysis stopped: over the per-file time budget{limit}",
                           "the file was skipped; raise --timeout-per-file / timeout-per-file, or exclude it")
    if isinstance(exc, FileTooLargeError):
        return FileProblem("F0004", "file-too-large", path, 1, 0, f"not checked: {exc.strerror}",
                           "exclude it (generated code?) or raise --max-file-size / max-file-size")
    if isinstance(exc, SyntaxError):
        line = exc.lineno or 1
        col = max((exc.offset or 1) - 1, 0)
        return FileProblem("E0001", "syntax-error", path, line, col, f"cannot parse: {exc.msg}",
                           "fix the syntax error; the file was not checked")
    if isinstance(exc, SourceDecodeError):
        return FileProblem("E0001", "syntax-error", path, 1, 0, f"cannot decode: {exc}",
                           "save the file as UTF-8 or fix its coding cookie; the file was not checked")
    if isinstance(exc, (RecursionError, MemoryError)):
        return FileProblem("F0002", "analysis-error", path, 1, 0,
                           f"too deeply nested to analyse ({type(exc).__name__})",
                           "simplify the nested expression; the file was not checked")
    if isinstance(exc, OSError):
        return FileProblem("F0001", "fatal", path, 1, 0, f"cannot read: {exc.strerror or exc}",
                           "check that the path exists, is a regular file and is readable")
    if isinstance(exc, UnicodeError):  # e.g. a fix that the file's encoding cannot represent
        return FileProblem("F0002", "analysis-error", path, 1, 0, f"cannot encode the result: {exc}",
                           "the file was left unchanged")
    return FileProblem("F0002", "analysis-error", path, 1, 0,
                       f"internal error: {type(exc).__name__}: {exc}",
                       "please report this with the file; the file was not checked")
