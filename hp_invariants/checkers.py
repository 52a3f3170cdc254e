"""The pylint plugin: ``pylint --load-plugins=hp_invariants.checkers``.

One raw-file checker exposes every rule of :mod:`hp_invariants.registry` as a pylint message with
the same id and symbol. It reads the module's bytes and runs them through the one per-file pipeline
(:class:`hp_invariants.engine.Session`) on the standard library ``ast``; it never imports torch, so it
works in a codecheck environment without torch. pylint applies ``# pylint: disable=`` itself;
``# noqa: <id>`` comments naming our rules are honoured too. Rule options are pylint options
(pylintrc ``[HP-INVARIANTS]`` or pyproject ``[tool.pylint.hp-invariants]``); the file's
``[tool.hp-invariants]`` table applies too (see :meth:`HpInvariantsChecker._settings`), so the plugin,
the CLI and the codemods give the same answer on the same file.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pylint.checkers import BaseRawFileChecker
from pylint.constants import WarningScope
from pylint.interfaces import CONTROL_FLOW, HIGH, INFERENCE, UNDEFINED

from hp_invariants.config import EXTEND, ConfigError, Resolver, Settings, check_number, extended, is_list_option
from hp_invariants.engine import Session, default_project
from hp_invariants.history import plugin as history_plugin
from hp_invariants.limits import DEFAULT_TIMEOUT
from hp_invariants.model import Confidence
from hp_invariants.api import Option
from hp_invariants.registry import RULES
from hp_invariants.suppressions import USELESS_ID

if TYPE_CHECKING:  # pragma: no cover
    from astroid import nodes
    from pylint.lint import PyLinter

_CONFIDENCE = {
    Confidence.HIGH: HIGH,
    Confidence.CONTROL_FLOW: CONTROL_FLOW,
    Confidence.INFERENCE: INFERENCE,
    Confidence.UNDEFINED: UNDEFINED,
}


def _pylint_options_of(option: Option) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The pylint options of a rule option: itself, and for a list ``extend-<name>`` (entries added to
    its value, as in ``[tool.hp-invariants]``)."""
    if option.kind == "bool":
        spec = {"default": option.default, "type": "yn", "metavar": "<y or n>"}
    elif option.kind == "regexp_csv":  # pylint compiles these: a bad regex is a clear pylint usage error
        spec = {"default": tuple(option.default), "type": "regexp_csv", "metavar": "<comma separated regexes>"}
    else:
        spec = {"default": tuple(option.default), "type": "csv", "metavar": "<comma separated names>"}
    if not is_list_option(option):
        return ((option.name, {**spec, "help": option.help}),)
    return ((option.name, {**spec, "help": option.help}),
            (EXTEND + option.name, {**spec, "default": (), "help": f"Added to {option.name}."}))


class HpInvariantsChecker(BaseRawFileChecker):
    """Runs the hp-invariants rules on each module pylint checks.

    Input: pylint's module node (only its bytes and path are used). Output: one pylint message per
    finding, with the rule's id and symbol and pylint's confidence. Files we cannot decode or parse are left to pylint's own
    ``syntax-error``; an unexpected internal error or a file too deeply nested becomes one ``F9500``
    message, an exhausted per-file time budget (option ``hp-invariants-timeout``, as the CLI's
    ``--timeout-per-file``) one ``F9501`` message; never a traceback.
    """

    name = "hp-invariants"
    msgs = {
        rule.rule_id: (rule.msg, rule.symbol, rule.description or rule.summary, {"scope": WarningScope.NODE})
        for rule in RULES
    }
    msgs["F9500"] = (
        "hp-invariants could not analyse this module: %s",
        "hp-invariants-internal-error",
        "hp-invariants could not analyse this module: its [tool.hp-invariants] configuration is invalid "
        "(the message says which key of which file; shown even when disabled, and the run fails), the "
        "module is nested too deeply even for the deep-stack retry, or a rule raised an unexpected error "
        "(please report it with the module).",
        {"scope": WarningScope.NODE},
    )
    msgs[USELESS_ID] = (  # report-unused-suppressions; pylint's own symbol useless-suppression is I0021's
        "%s",
        "hp-invariants-useless-suppression",
        "A '# noqa' naming an hp-invariants rule silences nothing on its line (reported when the "
        "[tool.hp-invariants] option report-unused-suppressions is true, as by the CLI's I9500).",
        {"scope": WarningScope.NODE},
    )
    msgs["F9501"] = (
        "hp-invariants skipped this module: analysis took longer than %s s",
        "hp-invariants-timeout",
        "The hp-invariants analysis of this module ran over its per-file time budget "
        "(option hp-invariants-timeout) and was stopped; the module was not checked by hp-invariants.",
        {"scope": WarningScope.NODE},
    )
    options = tuple(spec for rule in RULES for opt in rule.options for spec in _pylint_options_of(opt)) + (
        ("hp-invariants-timeout", {
            "default": DEFAULT_TIMEOUT, "type": "float", "metavar": "<seconds>",
            "help": "Per-module time budget of the hp-invariants analysis in seconds (0: no limit).",
        }),
        ("hp-invariants-config", {
            "default": "", "type": "string", "metavar": "<pyproject.toml>",
            "help": "Read [tool.hp-invariants] from this file for every module (as the CLI's --config); "
                    "default: each module's nearest pyproject.toml that has the table.",
        }),
        history_plugin.OPTION,
    )

    def __init__(self, linter: "PyLinter") -> None:
        super().__init__(linter)
        self._resolver: Resolver | None = None
        project = default_project(_LazyResolver(self))
        self._session = Session(self._settings, project)
        # pylint hands modules one by one, never a list to prepare: the first rule that reads project
        # facts builds every kind at once, and the rules that read none run on the trees that build
        # parses (each file parsed once, as in a cold `check`)
        project.lazy_facts = [rule.project_facts for rule in RULES if rule.project_facts is not None]
        project.lazy_early = self._session.early_analysis

    def resolver(self) -> Resolver:
        """The per-file configuration (made on first use, once pylint has read its options)."""
        if self._resolver is None:
            config_file = getattr(self.linter.config, "hp_invariants_config", "") or None
            self._resolver = Resolver(RULES, config_file=Path(config_file) if config_file else None)
        return self._resolver

    def _settings(self, path: str) -> Settings:
        """The file's :class:`Settings`: its own ``[tool.hp-invariants]`` configuration (the one the CLI
        and the codemods read: ``select``/``ignore``, ``per-file-ignores``, ``exclude``, rule options;
        option ``hp-invariants-config`` names one pyproject for all, as the CLI's ``--config``),
        narrowed to the rules whose messages are enabled in pylint, with the rule options and the
        ``hp-invariants-timeout`` set in pylint's configuration taking precedence where they differ from
        the defaults. ``# pylint: disable`` comments are pylint's own business (it also tracks their use
        for ``useless-suppression``); ``# noqa`` ones go through the pipeline. Raises
        :class:`~hp_invariants.config.ConfigError` for an invalid ``[tool.hp-invariants]`` table."""
        resolver = self.resolver()
        base = resolver.settings_for(path)
        if resolver.config_for(path).is_excluded(path):  # pylint cannot tell us which files were named:
            return replace(base, rules=())               # exclude applies to all, as pylint's ignore-paths
        rules = tuple(r for r in base.rules if self.linter.is_message_enabled(r.rule_id))
        options = {rule_id: dict(values) for rule_id, values in base.options.items()}
        for rule_id, values in self._pylint_options().items():
            options.setdefault(rule_id, {}).update(values)
        timeout = getattr(self.linter.config, "hp_invariants_timeout", DEFAULT_TIMEOUT)
        if timeout != DEFAULT_TIMEOUT:  # -1, inf and nan ran with no budget at all; as the CLI's option
            check_number(timeout, "hp-invariants-timeout", "pylint option")
        return replace(base, rules=rules, options=options, suppressions=frozenset({"noqa"}), max_file_size=0,
                       timeout_per_file=timeout if timeout != DEFAULT_TIMEOUT else base.timeout_per_file)

    def _pylint_options(self) -> dict[str, dict[str, Any]]:
        """The rule options set in pylint's configuration to something other than their default (a
        list option's ``extend-<name>`` entries added to its value)."""
        values: dict[str, dict[str, Any]] = {}
        for rule in RULES:
            for opt in rule.options:
                value = self._pylint_value(opt, opt.name, opt.default)
                if is_list_option(opt):
                    value = extended(value, self._pylint_value(opt, EXTEND + opt.name, ()))
                default = tuple(opt.default) if is_list_option(opt) else opt.default
                if value != default:
                    values.setdefault(rule.rule_id, {})[opt.name] = value
        return values

    def _pylint_value(self, option: Option, name: str, default: Any) -> Any:
        """The value of the pylint option ``name`` (``option``'s own or its ``extend-`` twin) as the
        configuration holds it: a bool, or a tuple of strings (regexes as their patterns)."""
        value = getattr(self.linter.config, name.replace("-", "_"), default)
        if option.kind == "regexp_csv":
            return tuple(p.pattern if isinstance(p, re.Pattern) else p for p in value)
        return tuple(value) if is_list_option(option) else value

    def process_module(self, node: "nodes.Module") -> None:
        """Run the shared pipeline on one module and add a pylint message per finding."""
        if not node.file:
            return
        try:
            settings = self._settings(node.file)
        except ConfigError as exc:
            self._config_error(node, f"configuration error: {exc}")
            return
        if not settings.rules:
            return
        try:
            with node.stream() as stream:
                raw = stream.read()
        except OSError:
            return  # pylint reports unreadable files itself
        try:
            result = self._session.check_bytes(node.file, raw, settings)
        except ConfigError as exc:  # a nested pyproject.toml read for the project's facts
            self._config_error(node, f"configuration error: {exc}")
            return
        for prob in result.problems:
            if prob.problem_id == "F0003":  # the module was not checked: shown even with only the rules on
                if not self.linter.is_message_enabled("F9501"):
                    self.linter.enable("F9501")
                self.add_message("F9501", line=1, node=node, args=(f"{settings.timeout_per_file:g}",))
            elif prob.problem_id == "F0002":
                self.add_message("F9500", line=1, node=node, args=(prob.message.removeprefix("internal error: "),))
            # E0001 (undecodable, syntax error): pylint reports syntax-error itself
        findings = history_plugin.filter_findings(self.linter.config.hp_invariants_baseline, raw, result.findings)
        for finding in findings:
            self.add_message(
                finding.rule_id,
                line=finding.line,
                node=_scope_at(node, finding.line),
                args=(finding.message,) if finding.rule_id == USELESS_ID else finding.args or None,
                confidence=_CONFIDENCE[finding.confidence],
                col_offset=finding.col,
                end_lineno=finding.end_line,
                end_col_offset=finding.end_col,
            )


    def _config_error(self, node: "nodes.Module", text: str) -> None:
        """Report an invalid ``[tool.hp-invariants]`` table as ``F9500``, turned on when it was off
        (a configuration error is fatal, as pylint's own option errors and the CLI's exit 2 are): a
        run that enables only the rule messages (``--disable=all --enable=E9502``) must not pass
        with every check silently off."""
        if not self.linter.is_message_enabled("F9500"):
            self.linter.enable("F9500")
        self.add_message("F9500", line=1, node=node, args=(text,))


class _LazyResolver:
    """Stands for the checker's :class:`Resolver` before pylint has read its options."""

    def __init__(self, checker: HpInvariantsChecker):
        self._checker = checker

    def __getattr__(self, name: str) -> Any:
        """Every public :class:`Resolver` attribute, from the checker's resolver. Private and dunder
        names are not forwarded: an instance made without ``__init__`` (unpickled into pylint's
        ``-j`` workers, copied) has no ``_checker`` yet, and looking it up must not recurse."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._checker.resolver(), name)


def _scope_at(module: "nodes.Module", line: int) -> "nodes.NodeNG":
    """Return the innermost function or class of ``module`` spanning ``line`` (pylint's ``obj``)."""
    from astroid import nodes as astroid_nodes

    best: "nodes.NodeNG" = module
    for scope in module.nodes_of_class((astroid_nodes.FunctionDef, astroid_nodes.ClassDef)):
        if scope.fromlineno <= line <= (scope.tolineno or scope.fromlineno) and scope.fromlineno >= best.fromlineno:
            best = scope
    return best


def register(linter: "PyLinter") -> None:
    """pylint entry point: register :class:`HpInvariantsChecker` with ``linter``."""
    linter.register_checker(HpInvariantsChecker(linter))
