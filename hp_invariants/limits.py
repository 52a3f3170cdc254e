"""Per-file limits: the analysis time budget, the deep-stack retry, and file problems.

Robustness (see docs/robustness.md): nothing a file contains can stop a run. Reading, decoding,
parsing and analysis errors become one :class:`~hp_invariants.model.FileProblem` per file
(:func:`problem`):

* ``E0001 syntax-error``: a syntax error, undecodable bytes, a bad coding cookie, NUL bytes;
* ``F0001 fatal``: the file cannot be read (missing, unreadable, a folder, a FIFO, a symlink loop);
* ``F0002 analysis-error``: a rule raised, or the file is too deeply nested even for the deep stack;
* ``F0003 analysis-timeout``: the per-file time budget (``timeout-per-file``) ran out;
* ``F0004 file-too-large``: the file is over ``max-file-size`` and was not read;
* ``F0005 needs-newer-python``: the file's syntax is valid only in a later Python than the running
  one (``type X = int`` under 3.11; see :mod:`hp_invariants.newsyntax`), so it was not checked.

:data:`PROBLEM_CODES` explains each code (``hp-invariants explain F0005``).

:func:`guarded` runs the per-file work: under a budget of CPU time (:func:`time_budget`: a
watchdog reads the main thread's CPU clock and signals it with ``SIGPROF``; main thread only;
waiting for a core or blocking never counts), and,
when it hits Python's recursion limit (deeply nested expressions in ``ast.parse`` or in a rule's
recursion), once more in a helper thread with a 512 MiB stack and a raised recursion
limit, so that generated code with long operator chains is still checked rather than rejected.
"""

from __future__ import annotations

import contextlib
import functools
import _signal
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterator, TypeVar

from hp_invariants.model import FileProblem
from hp_invariants.newsyntax import NewerSyntaxError
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
# The budget's clock is CPU time, never wall time: a file that waits for a core (``-j`` above the
# core count, a loaded CI runner) or blocks (sleeps, waits on a lock or on I/O) spends none, so
# waiting never looks like a slow file.
#
# Why not ``setitimer(ITIMER_PROF)``: the kernel checks process CPU-time timers only at a scheduler
# tick that finds the process running. Under heavy contention a process runs in slices shorter than
# a tick and the timer fires late or not at all: measured on the 2-core CI machine at load 10, a
# 0.05 s ``ITIMER_PROF`` had not fired after 0.3 s of CPU in 10 of 30 tries (``ITIMER_VIRTUAL``: 3
# of 30). The exact per-thread CPU clock (``clock_gettime`` of ``pthread_getcpuclockid``) does not
# have that problem, so a watchdog thread reads it and signals the main thread.
_SIGNAL = getattr(signal, "SIGPROF", None)
_SIGNAL_NUMBER = int(_SIGNAL) if _SIGNAL is not None else None
_TIMER = getattr(signal, "ITIMER_PROF", None)


def _on_expiry(signum: int, frame: Any) -> None:
    if _Watchdog.active:
        _Watchdog.active = False
        raise AnalysisTimeout()


_MAIN_CLOCK: list = [None, None]  #: [(pid, thread ident), its clock] of the last budget armed


def _main_clock(ident: int) -> Callable[[], float]:
    """:func:`_cpu_clock_of` ``(ident)``, kept for the next budget of the same thread of the same
    process (a budget is armed per file: the clock is looked up once, not per file; a forked child
    has other thread ids and looks it up again)."""
    key = (os.getpid(), ident)
    if _MAIN_CLOCK[0] != key:
        _MAIN_CLOCK[1] = _cpu_clock_of(ident)
        _MAIN_CLOCK[0] = key
    return _MAIN_CLOCK[1]


def _cpu_clock_of(ident: int | None) -> Callable[[], float]:
    """A clock of the CPU time of the thread ``ident`` (``pthread_getcpuclockid``); where there is
    none (macOS), the process's CPU time (while a file is analysed the process does nothing else)."""
    try:
        clock = time.pthread_getcpuclockid(ident or 0)
        time.clock_gettime(clock)
    except (AttributeError, OSError):
        return time.process_time
    return functools.partial(time.clock_gettime, clock)


class _Watchdog:
    """One daemon thread per process that stops the main thread's work once it has used its CPU
    budget, by sending it ``SIGPROF`` (whose handler, installed while a budget is armed, raises
    :class:`AnalysisTimeout`). It sleeps for the CPU time left: a thread's CPU time grows at most as
    fast as the wall clock, so it never wakes too late, and when the work waited meanwhile it just
    sleeps again for what is left."""

    active = False  #: a budget is armed (read by the signal handler)
    cond = threading.Condition()
    clock: Callable[[], float] = time.process_time
    deadline: float | None = None  #: on ``clock``; None while nothing is armed (or paused)
    thread: threading.Thread | None = None
    pid = 0

    @classmethod
    def ensure_running(cls) -> bool:
        """Start the watchdog of this process (again after a fork); False if no thread can start."""
        if cls.thread is not None and cls.pid == os.getpid() and cls.thread.is_alive():
            return True
        thread = threading.Thread(target=cls._watch, name="hp-invariants-budget", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # cannot start a thread (out of memory / threads)
            return False
        cls.thread, cls.pid = thread, os.getpid()
        return True

    @classmethod
    def _before_fork(cls) -> None:
        """Stop an idle watchdog before this process forks (the ``-j`` pool): a forked child gets
        no copy of the thread anyway (it starts its own on first use), and Python 3.12+ warns
        about forking a process that has threads. A watchdog guarding an armed budget stays."""
        thread = cls.thread
        if thread is None or cls.pid != os.getpid() or cls.active or not thread.is_alive():
            return
        with cls.cond:
            cls.stop = thread
            cls.cond.notify_all()
        thread.join(1.0)
        cls.thread = None

    stop: threading.Thread | None = None  #: the watchdog thread asked to end

    @classmethod
    def _after_fork_in_child(cls) -> None:
        cls.cond = threading.Condition()
        cls.thread, cls.deadline, cls.active, cls.wake_at, cls.stop = None, None, False, float("inf"), None

    wake_at = float("inf")  #: wall time (monotonic) at which the watchdog wakes up next on its own

    @classmethod
    def _watch(cls) -> None:
        main = threading.main_thread().ident
        me = threading.current_thread()
        with cls.cond:
            while True:
                if cls.stop is me:
                    cls.stop = None
                    return
                if cls.deadline is None:
                    cls.wake_at = float("inf")
                    cls.cond.wait()
                    continue
                left = cls.deadline - cls.clock()
                if left > 0:
                    left = max(left, 0.001)
                    cls.wake_at = time.monotonic() + left
                    cls.cond.wait(left)
                    continue
                cls.deadline = None
                if cls.active and main is not None:
                    signal.pthread_kill(main, _SIGNAL)

    @classmethod
    def _set(cls, deadline: float, seconds: float) -> None:
        """Arm ``deadline`` (``seconds`` of CPU from now); wake the watchdog only if its next
        wake-up comes too late. It need not be woken otherwise, nor when a budget ends: CPU time
        grows at most as fast as the wall clock, so ``seconds`` of CPU cannot run out before
        ``seconds`` of wall time, and at its next wake-up the watchdog reads the new deadline."""
        cls.deadline = deadline
        cls.active = True
        if time.monotonic() + seconds < cls.wake_at:
            cls.cond.notify()

    @classmethod
    def arm(cls, seconds: float, clock: Callable[[], float]) -> None:
        with cls.cond:
            cls.clock = clock
            cls._set(clock() + seconds, seconds)

    @classmethod
    def disarm(cls) -> None:
        cls.active = False  # first, without the lock: a SIGPROF already on its way is now ignored
        with cls.cond:
            cls.deadline = None

    @classmethod
    def pause(cls) -> float:
        cls.active = False
        with cls.cond:
            left = (cls.deadline - cls.clock()) if cls.deadline is not None else 0.0
            cls.deadline = None
        return left

    @classmethod
    def resume(cls, left: float) -> None:
        with cls.cond:
            left = max(left, 0.001)
            cls._set(cls.clock() + left, left)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_Watchdog._before_fork, after_in_child=_Watchdog._after_fork_in_child)


def cpu_time_available() -> bool:
    """Whether :func:`time_budget` can be armed at all on this platform (``SIGPROF`` and
    ``pthread_kill``: Linux, macOS, the BSDs; not Windows)."""
    return _SIGNAL is not None and hasattr(signal, "pthread_kill")


def budgeted(seconds: float | None) -> bool:
    """True when ``seconds`` is a time budget to enforce: above 0 and below what a thread can wait
    for (``threading.TIMEOUT_MAX``, about 292 years: a longer budget, ``inf`` or ``nan`` is no budget;
    the watchdog's wait once overflowed on ``1e10`` and crashed its thread)."""
    return seconds is not None and 0 < seconds < threading.TIMEOUT_MAX


@contextlib.contextmanager
def time_budget(seconds: float | None) -> Iterator[bool]:
    """Raise :class:`AnalysisTimeout` in the body once it has used ``seconds`` of CPU time.

    The clock is the CPU time of the calling (main) thread, not wall time, so a file that waits for
    a core (many ``-j`` workers on few cores, a loaded CI runner) or blocks (sleeps, waits on a lock
    or on I/O) is never stopped for it; only computation counts. A watchdog thread (one per
    process, started on first use) reads that clock and, when the budget is spent, sends the main
    thread ``SIGPROF``; the handler, installed only while the budget is armed, raises.

    Signal handlers run only in the main thread, so the budget is armed only there; elsewhere, on
    platforms without ``SIGPROF``/``pthread_kill`` (Windows), with ``seconds`` falsy, or while some
    other code has a CPU-time interval timer (``ITIMER_PROF``, e.g. a sampling profiler) armed (its
    ``SIGPROF`` is left to its own handler), the body runs without a budget. Yields whether the
    budget is armed. The previous ``SIGPROF`` handler is restored on exit; no interval timer
    (``ITIMER_REAL``/``SIGALRM``, ``ITIMER_VIRTUAL``, ``ITIMER_PROF``) is ever touched.
    """
    if (
        not budgeted(seconds)
        or _Watchdog.active
        or not cpu_time_available()
        or threading.current_thread() is not threading.main_thread()
        or (_TIMER is not None and signal.getitimer(_TIMER)[0] > 0)
        or not _Watchdog.ensure_running()
    ):
        yield False
        return
    # ``_signal.signal``: the same call as ``signal.signal`` without its conversions of numbers to
    # enums and back (a budget is armed per file)
    previous = _signal.signal(_SIGNAL_NUMBER, _on_expiry)
    try:
        _Watchdog.arm(seconds, _main_clock(threading.get_ident()))
        yield True
    finally:
        _Watchdog.disarm()
        _signal.signal(_SIGNAL_NUMBER, previous if previous is not None else _signal.SIG_DFL)


@contextlib.contextmanager
def budget_paused() -> Iterator[None]:
    """Stop the clock of an armed :func:`time_budget` for the body (e.g. while the project's class
    index is built: that is per-project work, not per-file) and restart it with what was left."""
    if not _Watchdog.active or threading.current_thread() is not threading.main_thread():
        yield
        return
    left = _Watchdog.pause()
    try:
        yield
    finally:
        _Watchdog.resume(left)


def _interrupt_thread(thread: threading.Thread) -> None:
    """Ask ``thread`` to raise :class:`AnalysisTimeout` at its next bytecode (CPython only)."""
    try:
        import ctypes

        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident or 0), ctypes.py_object(AnalysisTimeout))
    except (ImportError, AttributeError):  # pragma: no cover - not CPython
        pass


def _run_deep(fn: Callable[[], T], timeout: float | None) -> T:
    """Run ``fn`` in a helper thread with a large stack and a raised recursion limit, stopped with
    an asynchronous :class:`AnalysisTimeout` once the thread has used ``timeout`` seconds of CPU."""
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
        if not budgeted(timeout):
            thread.join()
        else:
            cpu = _cpu_clock_of(thread.ident)
            start = cpu()
            while True:
                left = timeout - (cpu() - start)
                if left <= 0:
                    break
                # one thread's CPU time grows at most as fast as the wall clock: waiting ``left``
                # seconds cannot overshoot the budget, and a thread that waits for a core or blocks
                # simply gets more wall time
                thread.join(left)
                if not thread.is_alive():
                    break
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
    """Return ``fn()`` run under the per-file budget of ``timeout`` seconds of CPU time.

    On ``RecursionError`` (a deeply nested expression in ``ast.parse`` or in a rule's recursion),
    ``fn`` runs once more in a thread with a 512 MiB stack and a recursion limit of 60 000, with
    what is left of the budget (there the helper thread's own CPU clock is watched and an
    asynchronous :class:`AnalysisTimeout` stops it). ``fn`` must be a pure computation (it may run twice). Raises
    :class:`AnalysisTimeout`, and whatever ``fn`` raises, including ``RecursionError`` when even
    the deep stack is not enough.
    """
    start = time.thread_time()
    try:
        with time_budget(timeout):
            return fn()
    except RecursionError:
        pass
    remaining = None
    if timeout and timeout > 0:
        remaining = timeout - (time.thread_time() - start)
        if remaining <= 0:
            raise AnalysisTimeout()
    return _run_deep(fn, remaining)



PROBLEM_CODES: dict[str, tuple[str, str]] = {
    "E0001": ("syntax-error", "The file does not parse with the running Python, or its bytes do not decode (invalid "
              "UTF-8, a wrong or unknown coding cookie, NUL bytes). The file was not checked; the run goes on and "
              "exits 2. Fix the syntax error, or save the file as UTF-8 / fix its coding cookie."),
    "F0001": ("fatal", "The path cannot be read: missing, unreadable, a folder named like a module, a FIFO or a "
              "symlink loop. Nothing of it was checked; the run exits 2."),
    "F0002": ("analysis-error", "A rule raised while analysing the file, or the file is too deeply nested even "
              "for the deep-stack retry. The file was not checked; the run exits 2. \"internal error\" messages "
              "are bugs of hp-invariants: please report them with the file."),
    "F0003": ("analysis-timeout", "The analysis of the file used up its per-file CPU-time budget "
              "(`timeout-per-file`, `--timeout-per-file`). The file was skipped; raise the budget or exclude it."),
    "F0004": ("file-too-large", "The file is over `max-file-size` (`--max-file-size`, in MiB) and was not read "
              "(generated code?). Exclude it or raise the limit."),
    "F0005": ("needs-newer-python", "The file's syntax is valid only in a later Python than the one running "
              "hp-invariants (`type X = int` under 3.11): not a syntax error, but the file was not checked. Run "
              "hp-invariants with that Python, or exclude the file if this Python must stay."),
}
"""The codes of the problems :func:`problem` makes: ``code -> (symbol, what it means and what to do)``, for
``hp-invariants explain`` (with :data:`hp_invariants.suppressions.USELESS_EXPLAINED`)."""

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
    if isinstance(exc, NewerSyntaxError):
        return FileProblem("F0005", "needs-newer-python", path, exc.lineno or 1, max((exc.offset or 1) - 1, 0),
                           exc.msg, "the file was not checked (it is not a syntax error); "
                                    "exclude it if this Python must stay")
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
