"""Helpers of the runtime-harness tests: what is left running, and waiting for it.

Never imports torch. Linux ``/proc`` is read to assert that no process a test started is left:
a process started with a marker variable in its environment (the CLI's ranks inherit it), and
the live children of the test process itself (forked ranks).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable


def processes_with_marker(marker: str) -> list[int]:
    """Pids of live processes whose initial environment holds ``marker`` (zombies excluded)."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes() and not _zombie(entry):
                found.append(int(entry.name))
        except OSError:  # gone, or not ours
            continue
    return found


def live_children(parent: int | None = None) -> list[int]:
    """Pids of live (not zombie) processes whose parent is ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def in_process_group(pgid: int) -> list[int]:
    """Pids of live processes in process group ``pgid`` (a rank's session and what it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _zombie(entry: Path) -> bool:
    try:
        return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
