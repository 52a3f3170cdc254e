"""The torch-side hooks and checks of a rank (the only module of the harness that uses torch).

Installed by :mod:`hp_invariants.runtime.rank` once ``torch`` is imported (by the script itself,
so variables it sets before ``import torch`` still count), never by editing the script:

* ``torch.optim.Optimizer.__init__`` is wrapped: before the optimizer is built, no parameter it is
  given (nor a buffer of the modules holding them) may be on the ``meta`` device (**E9502**'s class:
  the step that materializes them was skipped, the seed's "HSDP params still on meta" at world size
  1), and every DTensor parameter's local tensor (``_local_tensor``, also of DTensor-like parameters)
  must be a leaf without ``grad_fn`` (**E9501**'s class: a view taken under ``no_grad`` and stored
  without ``.detach()``, its base then written in grad mode; reading its autograd state raises
  "A view was created in no_grad mode ..."). After it is built, a digest of every parameter's full
  value (``DTensor.full_tensor()``) is recorded, so the launcher can tell whether the
  initialisation depends on the layout.
* the first module forward (a global forward pre-hook, removed after use) runs the same two checks
  on the parameters and buffers of the outermost module, at its first nested call, i.e. after the
  module's own pre-hooks (a lazy initialization that materializes the parameters) have run.
* ``torch.autograd.backward`` (which ``Tensor.backward`` calls) is wrapped: the scalar passed to the
  outermost call is recorded as the loss of the current optimizer step; before the first optimizer
  step (or after the first backward when there is no optimizer) every trainable parameter must
  have a gradient.
* ``torch.distributed.init_process_group`` is wrapped: it records that the script created a process
  group and, when the script names no backend, picks the device's (gloo on CPU, nccl on CUDA,
  hccl on NPU).

A failed check raises :class:`InvariantViolation` (a ``RuntimeError``) in the script, with the
rule id; it is also recorded in :data:`STATE`, so a script that swallows the exception still fails.
This module imports torch only inside functions: importing it without torch is harmless.
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import Any, Iterable

# Digests gather every parameter's full value once (DTensor.full_tensor()); above this many
# elements in one optimizer the digest is skipped (said in the report), to bound memory and time.
DIGEST_MAX_ELEMENTS = 1 << 26
NAMES_SHOWN = 6
DEFAULT_BACKENDS = {"cpu": "gloo", "cuda": None, "npu": "hccl"}  # cuda: torch's default, nccl for CUDA tensors


class InvariantViolation(RuntimeError):
    """A run-time invariant of the harness failed in this rank.

    ``rule``: the rule id of the class (E9501, E9502) or None when no class applies; ``check``:
    which check (``optimizer``, ``first forward``, ``gradients``); ``detail``: what was found.
    """

    def __init__(self, rule: str | None, check: str, detail: str) -> None:
        super().__init__(f"hp-invariants {rule or 'check'} at {check}: {detail}")
        self.rule = rule
        self.check = check
        self.detail = detail


class HarnessAbort(BaseException):
    """The rank cannot be checked (device absent, too few devices): ends the rank as a harness error.

    A ``BaseException``, so that a script's ``except Exception`` does not swallow it.
    """


class RankState:
    """What one rank records for the launcher (written as JSON by :mod:`~hp_invariants.runtime.rank`)."""

    def __init__(self, device: str = "cpu", checks: bool = True, rank: int = 0) -> None:
        self.device = device
        self.checks_enabled = checks
        self.rank = rank
        self.installed = False
        self.process_group = False
        self.backend: str | None = None
        self.losses: list[list[float]] = []  # [optimizer step index, scalar passed to backward]
        self.backward_calls = 0
        self.steps = 0
        self.checks: list[dict[str, Any]] = []
        self.violations: list[dict[str, Any]] = []
        self.init_digest: dict[str, Any] | None = None
        self.init_digest_note: str | None = None
        self.notes: list[str] = []
        # hook bookkeeping (not written)
        self.modules: dict[int, weakref.ref] = {}
        self.optimizers: list[weakref.ref] = []
        self.forward_root: weakref.ref | None = None
        self.forward_checked = False
        self.grads_checked = False
        self.backward_depth = 0
        self.in_optimizer_init = 0
        self.handles: list[Any] = []

    def to_json(self) -> dict[str, Any]:
        """The recorded facts as plain JSON data."""
        return {
            "process_group": self.process_group,
            "backend": self.backend,
            "losses": self.losses,
            "backward_calls": self.backward_calls,
            "steps": self.steps,
            "checks": self.checks,
            "violations": self.violations,
            "init_digest": self.init_digest,
            "init_digest_note": self.init_digest_note,
            "notes": self.notes,
            "hooks_installed": self.installed,
        }


STATE = RankState()
_ORIGINALS: dict[str, Any] = {}


# ---------------------------------------------------------------------------------------- helpers
def _torch():
    import torch  # noqa: PLC0415 - only ranks import torch

    return torch


def _dtensor_type():
    try:
        from torch.distributed.tensor import DTensor  # noqa: PLC0415
    except ImportError:  # torch without distributed
        return None
    return DTensor


def _shorten(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f", ... ({len(names)} in all)" if len(names) > NAMES_SHOWN else "")


def _is_meta(tensor: Any) -> bool:
    """True when ``tensor`` (or a DTensor's local tensor) lives on the meta device."""
    local = getattr(tensor, "_local_tensor", None)
    if local is not None and getattr(local, "is_meta", False):
        return True
    return bool(getattr(tensor, "is_meta", False))


def _local_not_leaf(param: Any) -> str | None:
    """Why ``param``'s local tensor is not a leaf (None when it is, or it has no local tensor)."""
    torch = _torch()
    local = getattr(param, "_local_tensor", None)
    if not isinstance(local, torch.Tensor):
        return None
    try:
        grad_fn = local.grad_fn
    except RuntimeError as exc:  # the seed's: a no_grad view whose base was modified in grad mode
        return f"reading its local tensor's grad_fn raises RuntimeError: {exc}".split(". Given")[0]
    if grad_fn is not None:
        return f"its local tensor has grad_fn={type(grad_fn).__name__} (not a leaf)"
    return None


def _module_names() -> dict[int, str]:
    """id(parameter or buffer) -> qualified name, from the modules the script asked for parameters."""
    named_parameters = _ORIGINALS["named_parameters"]
    modules = [ref() for ref in STATE.modules.values()]
    modules = [m for m in modules if m is not None]
    sizes = {id(m): sum(1 for _ in m.modules()) for m in modules}
    names: dict[int, str] = {}
    for module in sorted(modules, key=lambda m: -sizes[id(m)]):  # the largest (the root) names first
        for name, param in named_parameters(module):
            names.setdefault(id(param), name)
        for name, buffer in module.named_buffers():
            names.setdefault(id(buffer), name)
    return names


def _flatten_params(params: Any) -> list[tuple[str | None, Any]]:
    """The tensors of an optimizer's ``params`` argument (tensors, (name, tensor) pairs, groups)."""
    torch = _torch()
    found: list[tuple[str | None, Any]] = []

    def add(item: Any) -> None:
        if isinstance(item, torch.Tensor):
            found.append((None, item))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], torch.Tensor):
            found.append((str(item[0]), item[1]))

    for entry in params:
        if isinstance(entry, dict):
            group = entry.get("params", ())
            for item in [group] if isinstance(group, torch.Tensor) else group:
                add(item)
        else:
            add(entry)
    return found


def _named(found: list[tuple[str | None, Any]]) -> list[tuple[str, Any]]:
    names = _module_names() if any(name is None for name, _ in found) else {}
    return [(name or names.get(id(t)) or f"parameter #{i} {tuple(t.shape)}", t)
            for i, (name, t) in enumerate(found)]


def _violate(rule: str | None, check: str, detail: str, **extra: Any) -> None:
    record = {"check": check, "status": "fail", "rule": rule, "detail": detail, **extra}
    STATE.checks.append(record)
    STATE.violations.append(record)
    raise InvariantViolation(rule, check, detail)


def _passed(check: str, detail: str) -> None:
    STATE.checks.append({"check": check, "status": "pass", "rule": None, "detail": detail})


def check_tensors(check: str, params: list[tuple[str, Any]], buffers: Iterable[tuple[str, Any]] = ()) -> None:
    """The meta (E9502) and local-tensor leaf (E9501) checks on named parameters and buffers.

    Raises :class:`InvariantViolation` on the first class that fails (meta first: a meta local
    tensor is not worth asking about its leaf state).
    """
    buffers = list(buffers)
    meta = [name for name, t in params if _is_meta(t)]
    meta_buffers = [name for name, t in buffers if _is_meta(t)]
    if meta or meta_buffers:
        parts = []
        if meta:
            parts.append(f"{len(meta)} parameter(s) on the meta device: {_shorten(meta)}")
        if meta_buffers:
            parts.append(f"{len(meta_buffers)} buffer(s) on the meta device: {_shorten(meta_buffers)}")
        _violate("E9502", check, "; ".join(parts) + " (a materializing step, such as reset_sharded_param or "
                 "to_empty + init, did not run at this world size)", tensors=meta + meta_buffers)
    not_leaf = [(name, why) for name, t in params if (why := _local_not_leaf(t))]
    if not_leaf:
        name, why = not_leaf[0]
        _violate("E9501", check, f"{len(not_leaf)} DTensor parameter(s) whose local tensor is not a leaf: "
                 f"{_shorten([n for n, _ in not_leaf])}; '{name}': {why}", tensors=[n for n, _ in not_leaf])
    dtensors = sum(1 for _, t in params if getattr(t, "_local_tensor", None) is not None)
    _passed(check, f"{len(params)} parameter(s) ({dtensors} DTensor), {len(buffers)} buffer(s): none on meta, "
            "every local tensor a leaf")


# ------------------------------------------------------------------------------------------ digest
def _digest(named: list[tuple[str, Any]]) -> None:
    """Record, on rank 0, a layout-independent digest of each parameter's full value."""
    torch = _torch()
    dtensor = _dtensor_type()
    total = sum(t.numel() for _, t in named)
    if total > DIGEST_MAX_ELEMENTS:
        STATE.init_digest_note = (f"not recorded: {total} elements at optimizer construction, above "
                                  f"{DIGEST_MAX_ELEMENTS}")
        return
    digest = STATE.init_digest if STATE.init_digest is not None else {}
    with torch.no_grad():
        for name, tensor in named:
            full = tensor.full_tensor() if dtensor is not None and isinstance(tensor, dtensor) else tensor
            flat = full.detach().reshape(-1).to(torch.float64)
            weights = torch.cos(torch.arange(flat.numel(), dtype=torch.float64, device=flat.device) * 0.7548776662466927)
            stats = torch.stack([flat.sum(), (flat * flat).sum(), (flat * weights).sum()]).tolist()
            if STATE.rank == 0:
                digest[name] = {"shape": list(full.shape), "stats": stats}
    if STATE.rank == 0:
        STATE.init_digest = digest


# ------------------------------------------------------------------------------------------- hooks
def _optimizer_init(original):
    @functools.wraps(original)
    def __init__(self, params, *args, **kwargs):  # noqa: N807 - the wrapped method's name
        torch = _torch()
        if STATE.in_optimizer_init or not STATE.checks_enabled:
            return original(self, params, *args, **kwargs)
        if not isinstance(params, torch.Tensor):
            params = list(params)
            for entry in params:
                if isinstance(entry, dict) and not isinstance(entry.get("params"), (torch.Tensor, list, type(None))):
                    entry["params"] = list(entry["params"])
        STATE.in_optimizer_init += 1
        try:
            found = _flatten_params([params] if isinstance(params, torch.Tensor) else params)
            named = _named(found)
            holders = _holders({id(t) for _, t in found})
            buffers = [(name, b) for module in holders for name, b in module.named_buffers()]
            _note_process_group()
            check_tensors("optimizer construction", named, buffers)
            result = original(self, params, *args, **kwargs)
            STATE.optimizers.append(weakref.ref(self))
            _digest(named)
            return result
        finally:
            STATE.in_optimizer_init -= 1

    return __init__


def _holders(param_ids: set[int]) -> list[Any]:
    """The outermost recorded modules that hold any of the parameters (for their buffers)."""
    named_parameters = _ORIGINALS["named_parameters"]
    modules = [m for m in (ref() for ref in STATE.modules.values()) if m is not None]
    holders = [m for m in modules if any(id(p) in param_ids for _, p in named_parameters(m))]
    inner = {id(sub) for m in holders for sub in m.modules() if sub is not m}
    return [m for m in holders if id(m) not in inner]


def _remember(module: Any) -> None:
    """Remember ``module`` (weakly) for naming parameters; at most 256, dead entries dropped first."""
    ref = STATE.modules.get(id(module))
    if ref is not None and ref() is module:
        return
    if len(STATE.modules) >= 256:
        for key in [key for key, value in STATE.modules.items() if value() is None]:
            del STATE.modules[key]
        if len(STATE.modules) >= 256:
            return
    STATE.modules[id(module)] = weakref.ref(module)


def _record_module(original):
    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        _remember(self)
        return original(self, *args, **kwargs)

    return wrapper


def _forward_pre_hook(module, args):
    """At the first nested module call (the outermost module's own pre-hooks, such as a lazy
    initialization, have run), or at once for a module without submodules: check the outermost one."""
    if STATE.forward_checked:
        return None
    if STATE.forward_root is None:
        STATE.forward_root = weakref.ref(module)
        _remember(module)
        if next(module.children(), None) is not None:
            return None  # checked at its first nested call, after its own pre-hooks
    root = STATE.forward_root() or module
    STATE.forward_checked = True
    for handle in STATE.handles:
        handle.remove()
    STATE.handles.clear()
    _note_process_group()
    params = list(_ORIGINALS["named_parameters"](root))
    check_tensors("first forward", params, list(root.named_buffers()))
    return None


def _scalar(tensors: Any) -> float | None:
    torch = _torch()
    if isinstance(tensors, (list, tuple)):
        if len(tensors) != 1:
            return None
        tensors = tensors[0]
    if not isinstance(tensors, torch.Tensor) or tensors.numel() != 1 or not tensors.is_floating_point():
        return None
    dtensor = _dtensor_type()
    with torch.no_grad():
        if dtensor is not None and isinstance(tensors, dtensor):
            tensors = tensors.full_tensor()
        return float(tensors.detach().reshape(()).item())


def _check_grads(params: list[tuple[str, Any]], check: str, stale: list[str] | None = None) -> None:
    missing = [name for name, p in params if p.requires_grad and p.grad is None]
    if not missing:
        _passed(check, f"{sum(1 for _, p in params if p.requires_grad)} trainable parameter(s), every one with a gradient")
        return
    locals_ = [name for name, p in params if name in missing and getattr(p, "_local_tensor", None) is not None]
    if stale:
        rule, why = "E9502", (f"the optimizer holds {len(stale)} parameter(s) the model no longer uses "
                              f"({_shorten(stale)}): they were replaced after the optimizer was built")
    elif locals_:
        rule, why = "E9501", "their local tensors do not receive the gradient (not the leaf the forward uses)"
    else:
        rule, why = None, "not used by the forward, or detached from the loss"
    _violate(rule, check, f"{len(missing)} trainable parameter(s) without a gradient: {_shorten(missing)}: {why}",
             tensors=missing)


def _stale_optimizer_params(params: list[tuple[str, Any]]) -> list[str]:
    """Optimizer parameters that the first-forward module no longer holds (re-registered since)."""
    root = STATE.forward_root() if STATE.forward_root is not None else None
    if root is None:
        return []
    current = {id(p) for _, p in _ORIGINALS["named_parameters"](root)}
    if not current:
        return []
    return [name for name, p in params if id(p) not in current and p.grad is None and p.requires_grad]


def _optimizer_params(optimizer) -> list[tuple[str, Any]]:
    found = [(None, p) for group in optimizer.param_groups for p in group["params"]]
    return _named(found)


def _step_pre_hook(optimizer, args, kwargs):
    if STATE.grads_checked or not STATE.checks_enabled:
        return None
    STATE.grads_checked = True
    params = _optimizer_params(optimizer)
    _check_grads(params, "first optimizer step", _stale_optimizer_params(params))
    return None


def _step_post_hook(optimizer, args, kwargs):
    STATE.steps += 1
    return None


def _backward(original):
    @functools.wraps(original)
    def backward(tensors, *args, **kwargs):
        STATE.backward_depth += 1
        try:
            result = original(tensors, *args, **kwargs)
        finally:
            STATE.backward_depth -= 1
        if STATE.backward_depth == 0:
            STATE.backward_calls += 1
            value = _scalar(tensors)
            if value is not None:
                STATE.losses.append([STATE.steps, value])
            if STATE.checks_enabled and not STATE.grads_checked and not STATE.optimizers:
                root = STATE.forward_root() if STATE.forward_root is not None else None
                if root is not None:
                    STATE.grads_checked = True
                    _check_grads(list(_ORIGINALS["named_parameters"](root)), "first backward")
        return result

    return backward


def _init_process_group(original):
    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        if args:
            if args[0] is None:
                args = (DEFAULT_BACKENDS.get(STATE.device),) + args[1:]
        elif kwargs.get("backend") is None:
            kwargs["backend"] = DEFAULT_BACKENDS.get(STATE.device)
        result = original(*args, **kwargs)
        _note_process_group()
        return result

    return init_process_group


def _note_process_group() -> None:
    """Record that a default process group exists (and its backend), if it does."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    STATE.process_group = True
    if STATE.backend is None:
        try:
            STATE.backend = str(dist.get_backend())
        except (RuntimeError, ValueError):  # a backend without a name
            STATE.backend = "?"


def note_end() -> None:
    """Called when the rank ends: a process group still alive counts as created."""
    if "torch" in sys.modules:
        _note_process_group()


def _patch_init_process_group() -> None:
    import torch.distributed as dist  # noqa: PLC0415

    if not dist.is_available():
        STATE.notes.append("this torch build has no torch.distributed")
        return
    from torch.distributed import distributed_c10d  # noqa: PLC0415

    original = distributed_c10d.init_process_group
    wrapper = _init_process_group(original)
    # Bound under this name in c10d, torch.distributed and the modules that imported it (device_mesh).
    for name, module in list(sys.modules.items()):
        if (name == "torch.distributed" or name.startswith("torch.distributed.")) and \
                getattr(module, "init_process_group", None) is original:
            setattr(module, "init_process_group", wrapper)


def probe_device(device: str, local_world_size: int) -> None:
    """Check that ``device`` can serve ``local_world_size`` ranks; raise :class:`HarnessAbort` if not.

    cpu: always. cuda: ``torch.cuda.is_available()``, enough visible GPUs, NCCL in the build.
    npu: ``torch_npu`` imports (it registers the npu device and hccl), ``torch.npu.is_available()``,
    enough visible NPUs.
    """
    torch = _torch()
    if device == "cuda":
        if not torch.cuda.is_available():
            raise HarnessAbort(f"--device cuda: torch.cuda.is_available() is False (torch {torch.__version__}, "
                               f"CUDA build {torch.version.cuda})")
        count = torch.cuda.device_count()
        if count < local_world_size:
            raise HarnessAbort(f"--device cuda: world size {local_world_size} needs {local_world_size} GPUs, "
                               f"{count} visible")
        import torch.distributed as dist  # noqa: PLC0415

        if not dist.is_nccl_available():
            raise HarnessAbort("--device cuda: this torch build has no NCCL")
    elif device == "npu":
        try:
            import torch_npu  # noqa: F401, PLC0415 - registers the npu device and the hccl backend
        except ImportError as exc:
            raise HarnessAbort(f"--device npu needs torch_npu in the ranks' Python ({sys.executable}): {exc}. "
                               "Install the torch_npu build matching your torch and CANN") from None
        if not torch.npu.is_available():
            raise HarnessAbort("--device npu: torch_npu imports but torch.npu.is_available() is False "
                               "(CANN environment sourced? NPUs visible?)")
        count = torch.npu.device_count()
        if count < local_world_size:
            raise HarnessAbort(f"--device npu: world size {local_world_size} needs {local_world_size} NPUs, "
                               f"{count} visible")


def install(state: RankState) -> None:
    """Install the hooks into the imported torch; ``state`` receives what they record.

    Idempotent per process. Raises :class:`HarnessAbort` when the device cannot serve the rank.
    """
    global STATE  # noqa: PLW0603 - one state per rank process
    if state.installed:
        return
    STATE = state
    torch = _torch()
    import os  # noqa: PLC0415

    probe_device(state.device, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    _patch_init_process_group()
    nn = torch.nn
    _ORIGINALS.setdefault("named_parameters", nn.Module.named_parameters)
    if "backward" not in _ORIGINALS:
        _ORIGINALS["backward"] = torch.autograd.backward
        torch.autograd.backward = _backward(_ORIGINALS["backward"])
    from torch.optim import optimizer as optimizer_module  # noqa: PLC0415

    optimizer_module.register_optimizer_step_post_hook(_step_post_hook)
    if state.checks_enabled:
        if "optimizer_init" not in _ORIGINALS:
            _ORIGINALS["optimizer_init"] = torch.optim.Optimizer.__init__
            torch.optim.Optimizer.__init__ = _optimizer_init(_ORIGINALS["optimizer_init"])
            _ORIGINALS["parameters"] = nn.Module.parameters
            nn.Module.parameters = _record_module(nn.Module.parameters)
            nn.Module.named_parameters = _record_module(_ORIGINALS["named_parameters"])
        optimizer_module.register_optimizer_step_pre_hook(_step_pre_hook)
        from torch.nn.modules.module import register_module_forward_pre_hook  # noqa: PLC0415

        state.handles.append(register_module_forward_pre_hook(_forward_pre_hook))
    state.installed = True
