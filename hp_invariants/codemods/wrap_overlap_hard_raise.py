"""The codemod of the rule in ``hp_invariants.rules.wrap_overlap_hard_raise`` (its class is derived from the registry).

Run: ``python -m libcst.tool codemod wrap_overlap_hard_raise.<Command> --no-format PATH`` with ``modules:
[hp_invariants.codemods]`` in ``.libcst.codemod.yaml`` (``hp-invariants rules`` names each command).
"""

from hp_invariants.codemods._base import export_commands

__all__ = export_commands(globals(), __name__)
