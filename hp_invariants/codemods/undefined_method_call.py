"""The codemod of the rule in ``hp_invariants.rules.undefined_method_call`` (its class is derived from the registry).

Run: ``python -m libcst.tool codemod undefined_method_call.<Command> --no-format PATH`` with ``modules:
[hp_invariants.codemods]`` in ``.libcst.codemod.yaml`` (``hp-invariants rules`` names each command).
"""

from hp_invariants.codemods._base import export_commands

__all__ = export_commands(globals(), __name__)
