"""Hypothesis generators of programs for the fix-safety oracle, one per rule.

Each generator places the rule's *site* (a gated reset, a raising overlap check, a view stored into
``_local_tensor``, a call of a missing accessor) inside random nested control-flow contexts
(:data:`CONTEXTS`: ``if``/``elif``/``else`` branches with side-effecting or walrus conditions,
``for`` loops with ``else`` and ``break``, ``try``/``except``/``finally``, ``with`` blocks, a
``while`` run once) and returns a :class:`Program`: the source, the scenarios to run it on (shard
degree 1 and > 1, already-wrapped submodules or not, grad mode, the results of the ``probe(...)``
conditions) and, where the intended difference is not a projection of the trace, a *reference*
source in which the intended repair was made by construction (independently of the fixer).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import strategies as st

from oracle.runtime import Stub, Trace

IND = "    "


def indent(lines: list[str], levels: int = 1) -> list[str]:
    """Indent every non-empty line by ``levels`` steps."""
    return [IND * levels + line if line else line for line in lines]


@dataclass
class Program:
    """A generated program and how to run it.

    ``source``: the text given to ``hp-invariants fix``; ``reference``: the same program with the
    intended repair made by construction (``None`` where the oracle compares by projection);
    ``scenarios``: keyword dicts for ``driver``; ``driver(namespace, trace, **scenario)`` runs it;
    ``behaviours(scenario, trace)`` gives the results of the stub functions; ``label``: the contexts, for
    the statistics.
    """

    rule: str
    source: str
    driver: Callable[..., Any]
    scenarios: list[dict]
    behaviours: Callable[[dict, Trace], dict]
    reference: str | None = None
    label: str = ""
    probes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------- contexts
def _ctx_if(inner, k, choose):
    other = choose(["none", "else", "elif"])
    lines = [f'if probe("c{k}"):'] + indent(inner)
    if other == "else":
        lines += ["else:", f'{IND}log("else{k}")']
    elif other == "elif":
        lines += [f'elif probe("d{k}"):', f'{IND}log("elif{k}")']
    return lines, [f"c{k}", f"d{k}"]


def _ctx_else(inner, k, choose):
    return [f'if probe("c{k}"):', f'{IND}log("then{k}")', "else:"] + indent(inner), [f"c{k}"]


def _ctx_elif(inner, k, choose):
    return [f'if probe("c{k}"):', f'{IND}log("then{k}")', f'elif probe("d{k}"):'] + indent(inner), [f"c{k}", f"d{k}"]


def _ctx_walrus(inner, k, choose):
    return [f'if (w{k} := probe("c{k}")):'] + indent(inner + [f"log(w{k})"]), [f"c{k}"]


def _ctx_side_effect_test(inner, k, choose):
    return [f'if log("test{k}") is None and probe("c{k}"):'] + indent(inner), [f"c{k}"]


def _ctx_for_else(inner, k, choose):
    brk = choose((False, True))
    body = inner + ([f'if probe("b{k}"):', f"{IND}break"] if brk else [])
    return [f"for i{k} in range(2):"] + indent(body) + ["else:", f'{IND}log("loopelse{k}")'], [f"b{k}"]


def _ctx_while_once(inner, k, choose):
    return [f'while probe("c{k}"):'] + indent(inner + ["break"]), [f"c{k}"]


def _ctx_try_except(inner, k, choose):
    handler = choose(["KeyError", "Exception", "ValueError"])
    reraise = choose((False, True))
    lines = ["try:"] + indent(inner) + [f"except {handler}:", f'{IND}log("handler{k}")']
    if reraise:
        lines.append(f"{IND}raise")
    return lines, []


def _ctx_try_finally(inner, k, choose):
    return ["try:"] + indent(inner) + ["finally:", f'{IND}cleanup("finally{k}")'], []


def _ctx_with(inner, k, choose):
    return [f'with ctx("w{k}"):'] + indent(inner), []


def _ctx_with_nograd(inner, k, choose):
    return ["with nullcontext():"] + indent(inner), []


def _ctx_pre(inner, k, choose):
    return [f'log("pre{k}")'] + inner, []


CONTEXTS: dict[str, Callable] = {
    "if": _ctx_if,
    "else": _ctx_else,
    "elif": _ctx_elif,
    "walrus": _ctx_walrus,
    "side-effect-test": _ctx_side_effect_test,
    "for-else": _ctx_for_else,
    "while-once": _ctx_while_once,
    "try-except": _ctx_try_except,
    "try-finally": _ctx_try_finally,
    "with": _ctx_with,
    "with-transparent": _ctx_with_nograd,
    "pre": _ctx_pre,
}
"""The control-flow contexts the generators nest around a site (issue #10's list)."""


def wrap_in_contexts(choose, inner: list[str], names: list[str], start: int = 0) -> tuple[list[str], list[str], list[str]]:
    """Nest ``inner`` in the contexts ``names`` (innermost first); return (lines, probes, used)."""
    probes: list[str] = []
    for offset, name in enumerate(names):
        inner, new = CONTEXTS[name](inner, start + offset, choose)
        probes += new
    return inner, probes, names


def chooser(draw) -> Callable[[Any], Any]:
    """``choose(options)``: one of ``options`` drawn by hypothesis (a sequence of choices it can shrink)."""
    return lambda options: draw(st.sampled_from(list(options)))


class Replay:
    """A chooser that records its choices, then replays them (a program and its reference must nest
    the same contexts)."""

    def __init__(self, choose: Callable[[Any], Any]) -> None:
        self.choose, self.made, self.at = choose, [], None

    def __call__(self, options: Any) -> Any:
        if self.at is None:
            value = self.choose(options)
            self.made.append(value)
            return value
        value = self.made[self.at]
        self.at += 1
        return value

    def replay(self) -> "Replay":
        self.at = 0
        return self


def context_names(max_depth: int = 3, exclude: tuple[str, ...] = ()):
    """Strategy: a list of context names (innermost first)."""
    return st.lists(st.sampled_from([c for c in CONTEXTS if c not in exclude]), max_size=max_depth)


def probe_scenarios(probes: list[str]) -> list[dict[str, bool]]:
    """Assignments of the ``probe(...)`` results: all true, all false, and three mixes."""
    out = [dict.fromkeys(probes, True), dict.fromkeys(probes, False)]
    for seed in (1, 2, 3):
        out.append({p: bool(zlib.crc32(f"{seed}:{p}".encode()) & 1) for p in probes})
    return out


def _common_behaviours(scenario: dict, trace: Trace) -> dict:
    probes = scenario.get("probes", {})
    raise_on = set(scenario.get("raise_on", ()))

    def check(obj, *rest):
        if repr(obj) in raise_on:
            raise KeyError(repr(obj))

    return {
        "probe": lambda label: probes.get(label, False),
        "fully_shard": lambda module, *a, **k: module,
        "check": check,
        "validate": check,
        "params_of": lambda obj: [Stub(trace, f"{obj!r}.q0"), Stub(trace, f"{obj!r}.q1")],
    }


# ---------------------------------------------------------------------- E9502 shard-gated-reset
E9502_GATES = [
    "self.is_shard", "self.world_size > 1", "ws > 1", "ws != 1", "1 < ws",
    "self.is_shard and not self.done", 'self.is_shard and probe("g")', 'probe("g") and self.is_shard',
    "not self.done and ws > 1", "(need := ws > 1)", "(need := ws > 1) and not self.done",
    "self.is_shard and self.ready", 'ws > 1 and log("conj") is None',
]
E9502_REGIONS = [
    ["self.p.reset_sharded_param()"],
    ["for p in self.params:", f"{IND}p.reset_sharded_param()"],
    ["self.p.reset_sharded_param()", "self.done = True"],
    ["for p in self.params:", f"{IND}p.reset_sharded_param()", "self.done = True"],
    ["with no_grad():", f"{IND}self.p.reset_sharded_param()"],
    ["fully_shard(m)"],
    ["m = fully_shard(m)"],
    ["self.p.reset_sharded_param()", 'log("more")'],
    ["fully_shard(self.get_module())"],
    ['with ctx("region"):', f"{IND}fully_shard(m)"],
    ["for p in params_of(self):", f"{IND}p.reset_sharded_param()"],
    ["if self.p.ready:", f"{IND}self.p.reset_sharded_param()"],
    ["if probe_p(self.p):", f"{IND}self.p.reset_sharded_param()"],
    ["for p in self.params:", f"{IND}p.reset_sharded_param()", "log(p)"],
]
E9502_OTHER = [
    [], ["else:", f"{IND}pass"], ["else:", f"{IND}self.replicate()"],
    ['elif probe("e"):', f'{IND}log("e")'], ["elif not self.is_shard:", f"{IND}self.replicate()"],
]
E9502_EXPRESSION_SITES = [
    ["m = fully_shard(m) if ws > 1 else m", "log(m)"],
    ["m = m if ws == 1 else fully_shard(m)", "log(m)"],
    ["x = fully_shard(m) if ws > 1 else None", "log(x)"],
    ['fully_shard(m) if ws > 1 else log("no")'],
    ["fully_shard(m) if ws > 1 else m"],
    ['fully_shard(m) if ws > 1 and probe("t") else m'],
    ["[fully_shard(layer) for layer in self.layers if ws > 1]"],
    ["out = [fully_shard(layer) for layer in self.layers if ws > 1]", "log(out)"],
    ['[fully_shard(layer) for layer in self.layers if ws > 1 if probe_p(layer)]'],
    ["ws > 1 and fully_shard(m)"],
    ["ok = ws > 1 and fully_shard(m)", "log(ok)"],
    ["self.is_shard and self.p.reset_sharded_param()"],
    ['self.is_shard and probe("t") and self.p.reset_sharded_param()'],
]
STEP_NAMES = ("reset_sharded_param", "fully_shard")
"""The steps the generated programs gate (a subset of E9502's default must-run steps)."""


def _e9502_driver(ns: dict, trace: Trace, degree: int, probes: dict, **_: Any) -> Any:
    params = [Stub(trace, "self.params[0]"), Stub(trace, "self.params[1]")]
    layers = [Stub(trace, "self.layers[0]"), Stub(trace, "self.layers[1]")]
    state = Stub(trace, "self", is_shard=degree > 1, world_size=degree, done=False, params=params,
                 layers=layers, ready=True)
    results = [ns["State"].init(state, degree) for _ in range(2)]
    return results


@st.composite
def e9502_programs(draw) -> Program:
    """A gated must-run step (``if``/``elif`` with an ``else``, ternary, comprehension filter,
    short circuit, early exit) inside random contexts."""
    choose = chooser(draw)
    kind = choose(["if", "elif", "expression", "early-exit"])
    probes = ["g", "e", "t"]
    if kind in ("if", "elif"):
        gate = choose(E9502_GATES)
        region = choose(E9502_REGIONS)
        other = choose(E9502_OTHER)
        head = [f"if {gate}:"] if kind == "if" else ['if probe("a"):', f'{IND}log("a")', f"elif {gate}:"]
        probes.append("a")
        site = head + indent(region) + other
        label = f"{kind}[{gate}|{'/'.join(region)}|{'/'.join(other) or '-'}]"
    elif kind == "expression":
        site = list(choose(E9502_EXPRESSION_SITES))
        label = f"expr[{site[0]}]"
    else:
        region = choose(E9502_REGIONS)
        site = ["if not self.is_shard:", f"{IND}return"] + region
        label = "early-exit"
    names = draw(context_names())
    body, ctx_probes, _ = wrap_in_contexts(choose, site, names)
    probes += ctx_probes
    lines = ["class State:", f"{IND}def init(self, ws):"] + indent(["m = self.module"] + body + ['log("end")'], 2)
    source = "\n".join(lines) + "\n"
    return make_program("E9502", source, probes=probes, label=f"{label} in {'>'.join(names) or 'function body'}")


# ---------------------------------------------------------------------- E9504 wrap-overlap-hard-raise
E9504_TESTS = {
    # marker test -> (site in the body?)
    "s._is_wrapped": True,
    'getattr(s, "_is_wrapped", False)': True,
    "s._is_wrapped and strict": True,
    'strict and hasattr(s, "_is_wrapped") and s._is_wrapped': True,
    's._is_wrapped or probe("x")': True,
    "not s._is_wrapped": False,
}
E9504_SITES = {
    # name -> (lines of the raising site, the statement to replace by `continue` (index))
    "refusal": (["raise ValueError(refusal(s))"], 0),
    "refusal-multiline": (["raise ValueError(", f"{IND}refusal(s)  # why", ")"], None),
    "helper": (["_fail(s)"], 0),
    "not-implemented": (["raise NotImplementedError(refusal(s))"], 0),
    "bare-reraise": (["try:", f"{IND}check(s)", "except KeyError:", f"{IND}raise"], 3),
    "caught-reraise": (["try:", f"{IND}check(s)", "except KeyError as err:", f"{IND}raise err"], 3),
    "translated": (["try:", f"{IND}check(s)", "except KeyError:", f"{IND}raise ValueError(refusal(s))"], 3),
    "nested-function": (["def fail():", f"{IND}raise ValueError(refusal(s))", "fail()"], 2),
    "log-then-refusal": (['log("refusing", s)', "raise ValueError(refusal(s))"], 1),
}
BLIND_CALLS = frozenset({"cleanup"})
"""Stub functions only called from ``finally`` blocks: they run whether or not an exception passes."""


def _e9504_driver(ns: dict, trace: Trace, wrapped: tuple, strict: bool, **_: Any) -> Any:
    subs = [Stub(trace, f"sub{i}", _is_wrapped=flag) for i, flag in enumerate(wrapped)]
    module = Stub(trace, "module")
    object.__setattr__(module, "modules", lambda: list(subs))
    return ns["wrap"](module, strict)


@st.composite
def e9504_programs(draw) -> Program:
    """A submodule walk raising on an already-wrapped submodule, with contexts between the walk and
    the raise and around the walk (``try`` with handlers that may catch it, ``with``, ``finally``)."""
    choose = chooser(draw)
    test = choose(sorted(E9504_TESTS))
    site_name = choose(sorted(E9504_SITES))
    site, replace_at = E9504_SITES[site_name]
    in_body = E9504_TESTS[test]
    ref_site = list(site)
    if replace_at is None:
        ref_site = ["continue"]
    else:
        line = site[replace_at]
        ref_site[replace_at] = line[: len(line) - len(line.lstrip())] + "continue"
    if site_name == "nested-function":
        ref_site = site[:2] + ["continue"]

    def branch(site_lines):
        if in_body:
            return [f"if {test}:"] + indent(site_lines)
        return [f"if {test}:", f'{IND}log("fresh", s)', "else:"] + indent(site_lines)

    inner_names = draw(context_names(2))
    outer_names = draw(context_names(2, exclude=("for-else",)))
    replay = Replay(choose)

    def render(site_lines):
        inner, p1, _ = wrap_in_contexts(replay, branch(site_lines), inner_names)
        loop = ["for s in m.modules():"] + indent(['log("visit", s)'] + inner + ['log("mark", s)'])
        outer, p2, _ = wrap_in_contexts(replay, loop, outer_names, start=len(inner_names))
        helper = ["def _fail(sub):", f"{IND}raise ValueError(refusal(sub))", "", ""]
        lines = helper + ["def wrap(m, strict):"] + indent(outer + ['log("done")', 'return "ok"'])
        return "\n".join(lines) + "\n", p1 + p2

    source, probes = render(site)
    replay.replay()
    reference, _ = render(ref_site)
    return make_program("E9504", source, reference, probes=probes,
                        label=f"{site_name} under '{test}' in {'>'.join(inner_names) or '-'} / {'>'.join(outer_names) or '-'}")


# ---------------------------------------------------------------------- E9501 local-tensor-view-not-detached
E9501_VIEWS = {
    "narrow": ["v = t.narrow(0, 0, 2)"],
    "slice": ["v = t[1:]"],
    "chain": ["v = t.narrow(0, 0, 2).view(-1)"],
    "to": ["v = t.transpose(0, 1).to(t)"],
    "element": ["v = t.split(2)[0]"],
    "unpack": ["v, w = t.split(2)"],
    "function": ["v = torch.narrow(t, 0, 0, 2)"],
}
E9501_GRAD = {
    # name -> (lines before the view, lines wrapping (None: none), decorator)
    "no_grad": ([], "with torch.no_grad():", ""),
    "decorator": ([], None, "@torch.no_grad()"),
    "inference_mode": ([], "with torch.inference_mode():", ""),
    "inference_mode_flag": ([], "with torch.inference_mode(flag):", ""),
    "set_grad_enabled_stmt": (["torch.set_grad_enabled(False)"], None, ""),
    "set_grad_enabled_flag_cm": ([], "with torch.set_grad_enabled(flag):", ""),
    "no_grad_then_flag_cm": ([], "with torch.no_grad():\n    with torch.set_grad_enabled(flag):", ""),
    "no_grad_then_enable": ([], "with torch.no_grad():\n    with torch.enable_grad():", ""),
    "stmt_then_flag_stmt": (["torch.set_grad_enabled(False)", "torch.set_grad_enabled(flag)"], None, ""),
    "stmt_then_branch_enable": (["torch.set_grad_enabled(False)", 'if probe("ge"):',
                                 f"{IND}torch.set_grad_enabled(True)"], None, ""),
    "decorator_then_loop_enable": ([], "for i in range(2):", "@torch.no_grad()"),
    "grad": ([], None, ""),
}
E9501_USES = [[], ["v.add_(1)"], ["log(v)"], ["v.add_(1)", "log(v)"]]


def _e9501_driver(ns: dict, trace: Trace, flag: bool, probes: dict, **_: Any) -> Any:
    torch_base = __import__("oracle.runtime", fromlist=["Tensor"]).Tensor(trace)
    trace.add("op", "input", "-", "()", repr(torch_base), "grad")
    owner = Stub(trace, "self", param=Stub(trace, "self.param"))
    out = ns["Param"].reset(owner, torch_base, flag)
    trace.add("mode-after", "grad" if trace.grad_enabled else "nograd")
    trace.grad_enabled = True
    return out


@st.composite
def e9501_programs(draw) -> Program:
    """A view of a tensor stored into ``_local_tensor``, created under the grad-mode constructs the
    rule models, inside random contexts."""
    choose = chooser(draw)
    view_name = choose(sorted(E9501_VIEWS))
    grad_name = choose(sorted(E9501_GRAD))
    uses = choose(E9501_USES)
    before, wrapper, decorator = E9501_GRAD[grad_name]
    view = list(E9501_VIEWS[view_name])
    if grad_name == "decorator_then_loop_enable":
        inner = ["for i in range(2):"] + indent(view + ['if probe("ge"):', f"{IND}torch.set_grad_enabled(True)"])
    elif wrapper is not None:
        heads = wrapper.split("\n")
        inner = heads + indent(view, len(heads)) if len(heads) == 1 else [heads[0], heads[1]] + indent(view, 2)
    else:
        inner = view
    inner = before + inner
    names = draw(context_names(2))
    body, probes, _ = wrap_in_contexts(choose, inner, names)
    method = ["v = torch.empty(2)"] + body + uses + ["self.param._local_tensor = v", "return v"]
    lines = ["import torch", "", "", "class Param:"]
    if decorator:
        lines.append(IND + decorator)
    lines += [f"{IND}def reset(self, t, flag):"] + indent(method, 2)
    source = "\n".join(lines) + "\n"
    return make_program("E9501", source, probes=probes,
                        label=f"{view_name} under {grad_name} in {'>'.join(names) or '-'} uses {uses}")


# ---------------------------------------------------------------------- E9503 undefined-method-call
E9503_TARGETS = {
    # name -> (__init__ lines, accessor kind, attribute path)
    "own": (["self.embed_tokens = Emb()"], "input", "embed_tokens"),
    "child": (["self.language_model = Text()"], "input", "language_model.embed_tokens"),
    "head": (["self.lm_head = Emb()"], "output", "lm_head"),
    "decoder": (["self.model = Text()"], "decoder", "model"),
    "conditional": (["if cfg:", f"{IND}self.embed_tokens = Emb()"], "input", "embed_tokens"),
}
E9503_PAIRS = {
    "input": ("get_input_embeddings", "set_input_embeddings"),
    "output": ("get_output_embeddings", "set_output_embeddings"),
    "decoder": ("get_decoder", "set_decoder"),
}
E9503_OBSERVERS = [
    [],
    ["def api(self):", f'{IND}if hasattr(self, "{{setter}}"):', f'{IND}{IND}log("has setter")', f"{IND}return 1"],
    ["def api(self):", f'{IND}getter = getattr(self, "{{getter}}", None)', f"{IND}log(getter is None)"],
    ["def api(self):", f"{IND}try:", f"{IND}{IND}return self.{{getter}}()", f"{IND}except AttributeError:",
     f'{IND}{IND}log("no accessor")'],
    ["def api(self):", f'{IND}log("api")'],
]


def _e9503_driver(ns: dict, trace: Trace, cfg: bool, call_api: bool, **_: Any) -> Any:
    model = ns["build"](cfg)
    if call_api and hasattr(type(model), "api"):
        model.api()
    return model.forward(1)


@st.composite
def e9503_programs(draw) -> Program:
    """A call of a missing transformers accessor on ``self`` inside random contexts, optionally with
    another method that observes whether the accessor exists (``hasattr``, ``getattr``, ``try``)."""
    choose = chooser(draw)
    target = choose(sorted(E9503_TARGETS))
    init_lines, kind, path = E9503_TARGETS[target]
    getter, setter = E9503_PAIRS[kind]
    use_setter = choose((False, True))
    site = ["self.{}(self.head)".format(setter)] if use_setter else [f"e = self.{getter}()", "log(e)"]
    names = draw(context_names(2))
    body, probes, _ = wrap_in_contexts(choose, site, names)
    observer = [line.replace("{getter}", getter).replace("{setter}", setter)
                for line in choose(E9503_OBSERVERS)]

    def render(with_accessors: bool) -> str:
        lines = ["from torch import nn", "", "", "class Emb(nn.Module):", f"{IND}pass", "", "",
                 "class Text(nn.Module):", f"{IND}def __init__(self):", f"{IND}{IND}super().__init__()",
                 f"{IND}{IND}self.embed_tokens = Emb()", "", "", "class Model(nn.Module):",
                 f"{IND}def __init__(self, cfg):"]
        lines += indent(["super().__init__()"] + init_lines + ["self.head = Emb()"], 2)
        if with_accessors:
            lines += ["", f"{IND}def {getter}(self):", f"{IND}{IND}return self.{path}",
                      "", f"{IND}def {setter}(self, value):", f"{IND}{IND}self.{path} = value"]
        if observer:
            lines += [""] + indent(observer)
        lines += ["", f"{IND}def forward(self, x):"] + indent(body + ["return x"], 2)
        lines += ["", "", "def build(cfg):", f"{IND}return Model(cfg)"]
        return "\n".join(lines) + "\n"

    return make_program("E9503", render(False), render(True), probes=probes,
                        label=f"{'setter' if use_setter else 'getter'} of {target} in {'>'.join(names) or '-'}"
                              f" observer={bool(observer) and observer[1].strip()[:20]}")


def _e9502_behaviours(scenario: dict, trace: Trace) -> dict:
    out = _common_behaviours(scenario, trace)
    out["probe_p"] = lambda obj: scenario["probes"].get("t", False)
    return out


def _e9504_behaviours(scenario: dict, trace: Trace) -> dict:
    out = _common_behaviours(scenario, trace)
    out["refusal"] = lambda sub: f"REFUSAL:{sub!r}:{'wrapped' if sub._is_wrapped else 'not-wrapped'}"
    return out


def _e9504_scenarios(probes: list[str]) -> list[dict]:
    wrapped_sets = [(False, False, False), (False, True, False), (True, False, True), (False, False, True)]
    scenarios = []
    for wrapped in wrapped_sets:
        for probe_values in probe_scenarios(probes + ["x"])[:3]:
            for raise_on in ((), ("sub1",)):
                scenarios.append({"wrapped": wrapped, "strict": True, "probes": probe_values, "raise_on": raise_on})
        scenarios.append({"wrapped": wrapped, "strict": False, "probes": {}, "raise_on": ()})
    return scenarios


def make_program(rule: str, source: str, reference: str | None = None, probes: list[str] = (),
                 label: str = "") -> Program:
    """A :class:`Program` of ``rule`` with that rule's driver, behaviours and scenarios.

    The drivers call: E9502 ``State.init(self, ws)`` twice (``self`` a stub with ``is_shard``,
    ``world_size``, ``done``, ``params``, ``layers``); E9504 ``wrap(module, strict)`` (``module.modules()``
    yields three submodules, some already wrapped); E9501 ``Param.reset(self, t, flag)`` (``t`` a stub
    tensor); E9503 ``build(cfg)`` then ``api()`` if defined, then ``forward(1)``.
    """
    probes = list(probes)
    if rule == "E9502":
        scenarios = [{"degree": d, "probes": p} for d in (1, 2) for p in probe_scenarios(probes)]
        return Program(rule, source, _e9502_driver, scenarios, _e9502_behaviours, reference, label, probes)
    if rule == "E9504":
        return Program(rule, source, _e9504_driver, _e9504_scenarios(probes), _e9504_behaviours, reference,
                       label, probes)
    if rule == "E9501":
        scenarios = [{"flag": f, "probes": p} for f in (False, True) for p in probe_scenarios(probes + ["ge"])[:4]]
        return Program(rule, source, _e9501_driver, scenarios, _common_behaviours, reference, label, probes)
    scenarios = [{"cfg": c, "call_api": a, "probes": p}
                 for c in (True, False) for a in (False, True) for p in probe_scenarios(probes)[:3]]
    return Program(rule, source, _e9503_driver, scenarios, _common_behaviours, reference, label, probes)


GENERATORS = {
    "E9501": e9501_programs,
    "E9502": e9502_programs,
    "E9503": e9503_programs,
    "E9504": e9504_programs,
}
"""Rule id -> hypothesis strategy of :class:`Program`."""
