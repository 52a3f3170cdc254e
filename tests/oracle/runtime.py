"""Recording stubs and the runner of the fix-safety oracle.

A generated program runs with stub objects in place of everything it does not define itself: every
call of a stub (a free function such as ``check(s)``, a method such as ``self.replicate()``), every
attribute store on a stub, every entry and exit of a stub context manager (with the class of the
exception it sees), and every tensor operation of the stub ``torch`` lands in one :class:`Trace`.
The oracle runs a program before and after ``hp-invariants fix`` on the same scenarios and compares
the traces (see :mod:`oracle.check`).

Nothing here imports torch: ``torch`` and ``torch.nn`` inside the programs are :class:`FakeTorch`
objects, so a run takes microseconds and the grad mode is modelled exactly where the rules need it
(``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode`` as context managers,
decorators and statements).
"""

from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass, field
from typing import Any, Callable

#: Context managers the rules treat as exception-transparent: they only set and restore the grad
#: mode (their exit is recorded without the exception class).
TRANSPARENT_CMS = frozenset({"no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "nullcontext"})


class Trace:
    """The ordered list of observable events of one run (tuples of strings)."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.grad_enabled = True
        self.tensor_count = 0

    def add(self, *event: Any) -> None:
        """Record one event; a run past :data:`MAX_EVENTS` events stops with :class:`RunLimit`."""
        self.events.append(tuple(event))
        if len(self.events) > MAX_EVENTS:
            raise RunLimit(f"over {MAX_EVENTS} events: the program does not terminate in this world")


MAX_EVENTS = 20_000
"""A run that records more events than this is stopped (a loop the stub world never ends)."""


class RunLimit(BaseException):
    """A run went past :data:`MAX_EVENTS` (a ``BaseException``: the program's handlers cannot catch it)."""


def fmt(value: Any) -> str:
    """A deterministic text form of a value as it appears in events (stubs by their name)."""
    if isinstance(value, (Stub, Tensor, Func)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(fmt(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={fmt(v)}" for k, v in value.items()) + "}"
    if isinstance(value, ModuleBase):
        return f"<{type(value).__name__}#{value._oid}>"
    if isinstance(value, BaseException):
        return f"{type(value).__name__}({fmt(value.args)})"
    return repr(value)


class Stub:
    """An object of the program's world: reads of unknown attributes give child stubs (not recorded),
    stores are recorded, calls are recorded and return ``None``."""

    def __init__(self, trace: Trace, name: str, **attrs: Any) -> None:
        object.__setattr__(self, "_trace", trace)
        object.__setattr__(self, "_name", name)
        for key, value in attrs.items():
            object.__setattr__(self, key, value)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        child = Stub(self._trace, f"{self._name}.{attr}")
        object.__setattr__(self, attr, child)
        return child

    def __setattr__(self, attr: str, value: Any) -> None:
        self._trace.add("set", f"{self._name}.{attr}", fmt(value))
        object.__setattr__(self, attr, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._trace.add("call", self._name, fmt(args), fmt(kwargs))
        return None

    def __repr__(self) -> str:
        return self._name


class Func:
    """A free function of the program's world (``check``, ``log``, ``fully_shard``): calls are recorded.

    ``behaviour(args)`` computes the result (or raises); the default returns ``None``.
    """

    def __init__(self, trace: Trace, name: str, behaviour: Callable[..., Any] | None = None) -> None:
        self.trace, self.name, self.behaviour = trace, name, behaviour

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.trace.add("call", self.name, fmt(args), fmt(kwargs))
        return self.behaviour(*args, **kwargs) if self.behaviour else None

    def __repr__(self) -> str:
        return self.name


class RecordingCM:
    """A context manager of the program's world: entry and exit are recorded, the exit with the class
    of the exception it sees (a grad-mode one, :data:`TRANSPARENT_CMS`, records nothing: it only sets
    and restores state that nothing outside the block sees)."""

    def __init__(self, trace: Trace, name: str, label: Any = None) -> None:
        self.trace, self.name, self.label = trace, name, label

    def __enter__(self) -> "RecordingCM":
        if self.name not in TRANSPARENT_CMS:  # a grad-mode one has no effect outside the block
            self.trace.add("enter", self.name, fmt(self.label))
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.name not in TRANSPARENT_CMS:
            self.trace.add("exit", self.name, fmt(self.label), exc_type.__name__ if exc_type else "-")
        return False


# ---------------------------------------------------------------------- a fake torch
class Tensor:
    """A stub tensor: ops are recorded with the grad mode; ``detach`` returns an alias (same id)
    marked detached, so traces with and without an added ``.detach()`` line up."""

    def __init__(self, trace: Trace, base: "Tensor | None" = None, grad: bool | None = None,
                 tid: int | None = None, detached: bool = False) -> None:
        self.trace = trace
        if tid is None:
            trace.tensor_count += 1
            tid = trace.tensor_count
        self.tid = tid
        self.base = base
        self.grad = trace.grad_enabled if grad is None else grad  # grad mode when created
        self.detached = detached

    def __repr__(self) -> str:
        return f"T{self.tid}"

    def _view(self, op: str, *args: Any) -> "Tensor":
        out = Tensor(self.trace, base=self)
        self.trace.add("op", op, repr(self), fmt(args), repr(out), "grad" if self.trace.grad_enabled else "nograd")
        return out

    def _seq(self, op: str, n: int, *args: Any) -> tuple:
        outs = tuple(Tensor(self.trace, base=self) for _ in range(n))
        self.trace.add("op", op, repr(self), fmt(args), fmt(outs), "grad" if self.trace.grad_enabled else "nograd")
        return outs

    def narrow(self, *args: Any, **kw: Any) -> "Tensor":
        return self._view("narrow", *args, *kw.values())

    def view(self, *args: Any) -> "Tensor":
        return self._view("view", *args)

    def transpose(self, *args: Any) -> "Tensor":
        return self._view("transpose", *args)

    def to(self, *args: Any) -> "Tensor":
        self.trace.add("op", "to", repr(self), fmt(args), repr(self), "-")
        return self

    def contiguous(self) -> "Tensor":
        self.trace.add("op", "contiguous", repr(self), "()", repr(self), "-")
        return self

    def __getitem__(self, index: Any) -> "Tensor":
        return self._view("getitem", index if not isinstance(index, slice) else (index.start, index.stop))

    def split(self, n: int) -> tuple:
        return self._seq("split", 2, n)

    def chunk(self, n: int) -> tuple:
        return self._seq("chunk", n, n)

    def unbind(self, dim: int = 0) -> tuple:
        return self._seq("unbind", 2, dim)

    def clone(self) -> "Tensor":
        return self._view("clone")

    def add_(self, value: Any) -> "Tensor":
        self.trace.add("op", "add_", repr(self), fmt((value,)), repr(self), "grad" if self.trace.grad_enabled else "nograd")
        return self

    def detach(self) -> "Tensor":
        self.trace.add("detach", repr(self), "view" if self.base is not None else "tensor",
                       "grad" if self.grad else "nograd")
        return Tensor(self.trace, base=None, grad=False, tid=self.tid, detached=True)

    @property
    def is_leaf(self) -> bool:
        return self.base is None


class GradMode:
    """``torch.no_grad()`` and friends: a context manager, a decorator, and (``set_grad_enabled``)
    a statement that switches the mode at once. ``mode`` is the grad mode inside (None: unchanged)."""

    def __init__(self, trace: Trace, name: str, mode: bool | None, immediate: bool = False) -> None:
        self.trace, self.name, self.mode = trace, name, mode
        self.prev: list[bool] = []
        if immediate and mode is not None:
            self.prev_at_call = trace.grad_enabled
            trace.grad_enabled = mode

    def __enter__(self) -> "GradMode":
        self.prev.append(getattr(self, "prev_at_call", self.trace.grad_enabled))
        if self.mode is not None:
            self.trace.grad_enabled = self.mode
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.trace.grad_enabled = self.prev.pop()
        return False

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with GradMode(self.trace, self.name, self.mode):
                return func(*args, **kwargs)
        return wrapper


class FakeTorch:
    """The ``torch`` module of a run (also serves ``torch.nn`` and ``torch.distributed``)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.nn = FakeNN(trace)
        self.distributed = self

    def no_grad(self, func: Callable | None = None) -> Any:
        cm = GradMode(self.trace, "no_grad", False)
        return cm(func) if callable(func) else cm

    def enable_grad(self) -> GradMode:
        return GradMode(self.trace, "enable_grad", True)

    def inference_mode(self, mode: bool = True) -> GradMode:
        return GradMode(self.trace, "inference_mode", False if mode else None)

    def set_grad_enabled(self, mode: bool) -> GradMode:
        return GradMode(self.trace, "set_grad_enabled", bool(mode), immediate=True)

    def empty(self, *shape: Any) -> Tensor:
        out = Tensor(self.trace)
        self.trace.add("op", "empty", "-", fmt(shape), repr(out), "grad" if self.trace.grad_enabled else "nograd")
        return out

    def narrow(self, tensor: Tensor, *args: Any) -> Tensor:
        return tensor.narrow(*args)

    def get_world_size(self) -> int:  # a pure query: not recorded
        return self.world_size

    world_size = 1


class ModuleBase:
    """Base of the ``torch.nn.Module`` stub classes (one class per run, see :class:`FakeNN`)."""

    _oid = 0


class FakeNN:
    """``torch.nn``: ``Module`` records lookups of missing attributes (the E9503 AttributeError)."""

    def __init__(self, trace: Trace) -> None:
        recorder = trace
        counter = [0]

        class Module(ModuleBase):
            def __new__(cls, *args: Any, **kwargs: Any) -> Any:
                obj = super().__new__(cls)
                counter[0] += 1
                object.__setattr__(obj, "_oid", counter[0])
                return obj

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                pass

            def __call__(self, *args: Any, **kwargs: Any) -> Any:
                recorder.add("module-call", fmt(self), fmt(args))
                return args[0] if args else None

            def __getattr__(self, attr: str) -> Any:
                if attr.startswith("__"):
                    raise AttributeError(attr)
                recorder.add("missing", type(self).__name__, attr)
                raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")

        self.Module = Module
        self._classes: dict[str, type] = {}

    def __getattr__(self, name: str) -> type:
        """Any other ``torch.nn`` class (``Embedding``, ``Linear``, ``ModuleList``): a ``Module`` subclass."""
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in self._classes:
            self._classes[name] = type(name, (self.Module,), {})
        return self._classes[name]


# ---------------------------------------------------------------------- running a program
@dataclass
class Outcome:
    """What one run did: its events and how it ended (``("return", value)`` or ``("raise", cls, args)``)."""

    events: list[tuple]
    end: tuple
    namespace: dict = field(default_factory=dict, repr=False)


def free_names(tree: ast.Module) -> set[str]:
    """Names a program reads but never binds anywhere and that are not builtins (its stub functions)."""
    bound: set[str] = set()
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return {n for n in loaded - bound if not hasattr(builtins, n)}


def run_program(source: str, driver: Callable[[dict, Trace], Any],
                behaviours: Callable[[Trace], dict[str, Callable[..., Any]]] | None = None) -> Outcome:
    """Execute ``source`` with stubs and call ``driver(namespace, trace)``; return its :class:`Outcome`.

    Free names become recording :class:`Func` stubs (``behaviours`` gives their results; a name in
    :data:`TRANSPARENT_CMS` or ``ctx`` gives a recording context manager); ``import torch`` gives a
    :class:`FakeTorch`. The run ends with the driver's return value or the exception it raised.
    """
    trace = Trace()
    torch = FakeTorch(trace)
    real_import = builtins.__import__

    def fake_import(name, globals=None, locals=None, fromlist=(), level=0):
        if name == "torch" or name.startswith("torch."):
            return torch
        return real_import(name, globals, locals, fromlist, level)

    fake_builtins = dict(vars(builtins))
    fake_builtins["__import__"] = fake_import
    namespace: dict[str, Any] = {"__builtins__": fake_builtins, "__name__": "oracle_program"}
    tree = ast.parse(source)
    behaviours = behaviours(trace) if behaviours is not None else {}
    for name in free_names(tree):
        if name in TRANSPARENT_CMS or name == "ctx":
            namespace[name] = (lambda n: lambda *a: RecordingCM(trace, n, a))(name)
        else:
            namespace[name] = Func(trace, name, behaviours.get(name))
    exec(compile(tree, "<oracle program>", "exec"), namespace)  # noqa: S102 - generated test programs
    try:
        value = driver(namespace, trace)
        end: tuple = ("return", fmt(value))
    except Exception as exc:  # the program's own exceptions are part of its behaviour
        end = ("raise", type(exc).__name__, fmt(exc.args))
    return Outcome(trace.events, end, namespace)
