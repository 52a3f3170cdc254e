"""The one process-pool helper: ``check``, ``fix`` and the project-facts build all map through it.

:func:`parallel_map` applies a function to many items, in order, serially or in a pool of forked
worker processes. What every caller gets from it, the same way:

* ``jobs`` is capped at the cores this process may use (:func:`usable_cores`): more workers than
  cores only make files wait, and a file that waits must never look slow (see
  :mod:`hp_invariants.limits`). :func:`effective_jobs` says when it lowered the number.
* A worker that dies (killed by the OOM killer, a signal, a crash in C code) becomes a per-item
  result: the items not returned yet are run again, one at a time in a single fresh worker, so the
  item that kills its worker is found exactly and handed to ``on_dead``; the others get their
  normal result. The run never crashes.
* No worker outlives its parent: on Linux each worker asks the kernel for ``SIGKILL`` when its
  parent dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere a watchdog thread in the worker exits when
  the parent is gone. So a ``SIGKILL``-ed ``hp-invariants fix -j 2`` leaves no worker running.

Workers are forked, so ``fn`` and the items' shared state are inherited, not pickled; only items
(by index) and results travel. Where ``fork`` is not available (Windows) everything runs serially.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_TASK: dict[str, object] = {}
"""What forked workers read: the function and the items (set in the parent before the fork)."""


def usable_cores() -> int:
    """Return the number of cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def effective_jobs(requested: int, items: int | None = None) -> tuple[int, str]:
    """Return ``(jobs, note)``: ``requested`` (0: one per core) capped at :func:`usable_cores` and at
    ``items``; ``note`` says why it was lowered below a positive request (``""`` when it was not)."""
    cores = usable_cores()
    jobs = cores if requested <= 0 else requested
    note = ""
    if jobs > cores:
        note = f"-j {requested} lowered to {cores}: this machine gives the process {cores} core(s)"
        jobs = cores
    if items is not None:
        jobs = max(1, min(jobs, items))
    return max(1, jobs), note


def _die_with_parent(parent: int) -> None:
    """Worker initializer: make sure this process ends when ``parent`` does."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and tears the pool down
    armed = False
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            PR_SET_PDEATHSIG = 1
            armed = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
    if not armed:
        def watch() -> None:
            import time

            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, name="hp-invariants-parent-watch", daemon=True).start()


def _run_chunk(bounds: tuple[int, int]) -> list:
    fn = _TASK["fn"]
    items = _TASK["items"]
    return [fn(items[i]) for i in range(*bounds)]  # type: ignore[operator, index]


def parallel_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    jobs: int,
    on_dead: Callable[[T], R],
    chunk: int | None = None,
) -> list[R]:
    """Return ``[fn(item) for item in items]``, computed by up to ``jobs`` forked processes.

    ``jobs`` <= 1, fewer than two items, or no ``fork`` (Windows): a plain serial loop in this
    process. Otherwise items go to the workers in chunks (``chunk`` items each, default about
    ``len(items) / (4 * jobs)``, at most 64) and the results come back in item order. When a worker
    dies, every item of the chunks not yet returned gets ``on_dead(item)`` (a per-file problem for
    ``check`` and ``fix``, a skipped file for the project-facts build); the run goes on. ``fn`` must
    not raise (callers turn per-item errors into results); an exception it raises propagates.
    """
    if jobs <= 1 or len(items) < 2 or sys.platform == "win32" or not hasattr(os, "fork"):
        return [fn(item) for item in items]
    from concurrent.futures.process import BrokenProcessPool  # noqa: PLC0415 - only where a pool runs

    jobs = min(jobs, len(items))
    size = chunk or max(1, min(64, len(items) // (jobs * 4) or 1))
    out: list[R] = []
    try:
        _pool_map(fn, items, jobs, size, out)
    except BrokenProcessPool:
        out.extend(_isolate(fn, items[len(out):], on_dead))
    return out


def _pool_map(fn: Callable[[T], R], items: Sequence[T], jobs: int, size: int, out: list) -> None:
    """Extend ``out`` with ``fn(item)`` in item order, computed by ``jobs`` forked workers in chunks of
    ``size`` items. Raises ``BrokenProcessPool`` when a worker dies (``out`` then holds the results
    returned before)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    bounds = [(i, min(i + size, len(items))) for i in range(0, len(items), size)]
    _TASK.update(fn=fn, items=items)
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_die_with_parent, initargs=(os.getpid(),)) as pool:
            for part in pool.map(_run_chunk, bounds):
                out.extend(part)
    finally:
        _TASK.clear()


def _isolate(fn: Callable[[T], R], items: Sequence[T], on_dead: Callable[[T], R]) -> list[R]:
    """Run ``items`` one at a time in a single worker (a new one after each death): the item being
    run when a worker dies is the one that killed it and gets ``on_dead(item)``."""
    from concurrent.futures.process import BrokenProcessPool  # noqa: PLC0415

    out: list[R] = []
    while len(out) < len(items):
        try:
            done: list[R] = []
            try:
                _pool_map(fn, items[len(out):], 1, 1, done)
            finally:
                out.extend(done)
        except BrokenProcessPool:
            out.append(on_dead(items[len(out)]))
    return out

