"""pytest plugin (entry point ``pytest11``): the ``world_size`` marker runs a test body on N ranks.

::

    @pytest.mark.world_size(1, 2)                 # world size 1, then 2
    def test_training_step(rank, world_size):     # optional fixtures: this rank's values
        model = build()                           # the default process group exists (env://)
        ...

Each world size starts its ranks with torchrun's environment and, unless
``init_process_group=False``, a default process group (gloo on CPU, nccl on CUDA, hccl on NPU),
destroyed after the body. The harness's run-time checks apply as for ``hp-invariants run`` (no
parameter on meta at optimizer construction and first forward, every DTensor local tensor a leaf,
every trainable parameter with a gradient at the first optimizer step), and with several world
sizes the global loss of each step (mean over ranks of the scalar passed to backward) must agree
with the first world size's. Any rank's failure (an assertion, an exception, a failed check, a
hang past ``timeout``) fails the test with the report: world size, rank, rule class.

Marker keywords: ``timeout`` (s, default 300), ``rtol`` / ``atol`` (1e-4 / 1e-6), ``compare``
(compare losses across world sizes, default True), ``expect_steps`` (the comparison must cover at
least this many steps: a body that records no loss then fails instead of passing unchecked),
``checks`` (default True), ``device``
(``cpu``/``cuda``/``npu``; default ``$HP_INVARIANTS_DEVICE`` or cpu), ``backend``,
``init_process_group`` (default True), ``start_method`` (``fork``: the ranks are forks of the
pytest process and inherit its fixtures; ``spawn``: a fresh interpreter imports the test and
unpickles its fixtures; default: fork, unless this process has initialized CUDA or an NPU, whose
runtime does not survive a fork), ``grace`` (s).

The plugin is loaded by every pytest run of an environment where hp-invariants is installed
(codecheck's included), so importing it is cheap: pytest and the standard library only, never
torch; an unmarked test is not touched.
"""

from __future__ import annotations

import inspect
import os
import sys

import pytest

MARKER = ("world_size(*sizes, timeout=300, rtol=1e-4, atol=1e-6, compare=True, expect_steps=0, checks=True, "
          "device=None, backend=None, init_process_group=True, start_method=None, grace=3): run the test body on N local "
          "ranks for each world size, with hp-invariants' run-time checks and the loss comparison across "
          "world sizes (hp_invariants.runtime.pytest_plugin)")
KEYWORDS = {"timeout": 300.0, "rtol": 1e-4, "atol": 1e-6, "compare": True, "checks": True, "device": None,
            "backend": None, "init_process_group": True, "start_method": None, "grace": 3.0, "expect_steps": 0}


class _RankValue(int):
    """The value of the ``rank``/``world_size`` fixtures outside a rank; replaced in each rank."""

    kind = ""

    def __new__(cls, value: int, kind: str):
        self = super().__new__(cls, value)
        self.kind = kind
        return self


def pytest_configure(config) -> None:
    """Register the ``world_size`` marker."""
    config.addinivalue_line("markers", MARKER)


@pytest.fixture
def rank() -> int:
    """This rank's number in a ``world_size``-marked test (0 outside one)."""
    return _RankValue(0, "rank")


@pytest.fixture
def world_size() -> int:
    """The world size of the running rank in a ``world_size``-marked test (1 outside one)."""
    return _RankValue(1, "world_size")


def _options(marker) -> dict:
    unknown = sorted(set(marker.kwargs) - set(KEYWORDS))
    if unknown:
        raise pytest.UsageError(f"world_size marker: unknown keyword(s) {unknown}; known: {sorted(KEYWORDS)}")
    options = dict(KEYWORDS, **marker.kwargs)
    sizes = marker.args
    if not sizes or not all(isinstance(s, int) and s >= 1 for s in sizes):
        raise pytest.UsageError(f"world_size marker needs positive world sizes, got {sizes!r}")
    options["sizes"] = [int(s) for s in sizes]
    options["device"] = options["device"] or os.environ.get("HP_INVARIANTS_DEVICE", "").strip() or "cpu"
    if options["device"] not in ("cpu", "cuda", "npu"):
        raise pytest.UsageError(f"world_size marker: device must be cpu, cuda or npu, got {options['device']!r}")
    if options["start_method"] not in (None, "fork", "spawn"):
        raise pytest.UsageError(f"world_size marker: start_method must be fork or spawn, got {options['start_method']!r}")
    return options


def _default_group_exists() -> bool:
    dist = sys.modules.get("torch.distributed")
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run a ``world_size``-marked test on its ranks; leave every other test to pytest."""
    marker = pyfuncitem.get_closest_marker("world_size")
    if marker is None:
        return None
    options = _options(marker)
    from hp_invariants.runtime import launcher  # noqa: PLC0415 - only for marked tests

    options["start_method"] = options["start_method"] or launcher.default_start_method()
    if options["start_method"] == "fork" and _default_group_exists():
        pytest.fail("world_size marker: this pytest process has a default process group; a forked rank cannot "
                    "use it (destroy it first, or use start_method='spawn')", pytrace=False)
    function = pyfuncitem.obj
    names = [name for name in inspect.signature(function).parameters if name in pyfuncitem.funcargs]
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    rank_kwargs = {name: value.kind for name, value in kwargs.items() if isinstance(value, _RankValue)}
    target = launcher.CallTarget(
        function=function, kwargs=kwargs, name=pyfuncitem.nodeid, file=str(pyfuncitem.path),
        module=pyfuncitem.module.__name__, qualname=getattr(function, "__qualname__", function.__name__),
        rank_kwargs=rank_kwargs, init_process_group=options["init_process_group"], backend=options["backend"],
        start_method=options["start_method"])
    run_options = launcher.Options(world_sizes=options["sizes"], device=options["device"],
                                   timeout=float(options["timeout"]), rtol=float(options["rtol"]),
                                   atol=float(options["atol"]), checks=bool(options["checks"]),
                                   grace=float(options["grace"]), cwd=str(pyfuncitem.config.rootpath))
    result = launcher.run(target, run_options)
    failed = [r for r in result.results if r.status != "PASS"]
    drift = options["compare"] and result.consistency.status == "FAIL"
    compared = min((c.get("steps", 0) for c in result.consistency.compared), default=0)
    if failed or drift:
        text = result.render() if options["compare"] else "".join(
            "\n".join(launcher.report.render_world(r)) + "\n" for r in result.results)
        pytest.fail(text, pytrace=False)
    if options["expect_steps"] and (result.consistency.status != "PASS" or compared < options["expect_steps"]):
        pytest.fail(f"world_size marker: the loss comparison covered {compared} step(s), expected at least "
                    f"{options['expect_steps']}:\n{result.render()}", pytrace=False)
    return True
