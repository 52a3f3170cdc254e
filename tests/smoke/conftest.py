"""Fixtures of the smoke suite: the device the tests run on.

Device: ``HP_SMOKE_DEVICE`` (``cpu``, ``cuda``, ``npu``; ``cuda:1`` style indices allowed) or,
when unset, ``npu`` if ``torch_npu`` imports, then ``cuda`` if available, then ``cpu``. A device
that is asked for but absent skips the tests that need it, with the reason. This file never
imports torch at module level: each test module skips itself with
``pytest.importorskip("torch", reason=TORCH_MISSING)`` when torch is absent.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The helpers live in smoke_support.py beside this file; make them importable whatever
# pytest's import mode is.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from smoke_support import TORCH_MISSING  # noqa: E402


def _auto_device() -> str:
    """npu if torch_npu imports, then cuda when available, else cpu."""
    import torch

    try:
        import torch_npu  # noqa: F401  (registers the npu device with torch)

        if torch.npu.is_available():
            return "npu"
    except ImportError:
        pass
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


@pytest.fixture(scope="session")
def device():
    """The ``torch.device`` the smoke tests run on (``HP_SMOKE_DEVICE`` or auto)."""
    torch = pytest.importorskip("torch", reason=TORCH_MISSING)
    name = os.environ.get("HP_SMOKE_DEVICE", "").strip() or _auto_device()
    kind = name.split(":")[0]
    if kind == "npu":
        try:
            import torch_npu  # noqa: F401
        except ImportError:
            pytest.skip(f"HP_SMOKE_DEVICE={name} but torch_npu is not installed")
        if not torch.npu.is_available():
            pytest.skip(f"HP_SMOKE_DEVICE={name} but no NPU is visible to torch_npu")
    elif kind == "cuda" and not torch.cuda.is_available():
        pytest.skip(f"HP_SMOKE_DEVICE={name} but torch.cuda.is_available() is False")
    elif kind not in ("cpu", "cuda", "npu"):
        pytest.fail(f"HP_SMOKE_DEVICE={name!r}: expected cpu, cuda or npu")
    return torch.device(name)
