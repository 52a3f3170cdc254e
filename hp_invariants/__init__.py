"""hp-invariants: a static invariant linter for PyTorch distributed-training code.

Four rules (E9501-E9504) guard invariants whose loss broke every example training of a real
FSDP-style library; see ``hp-invariants rules`` and ``docs/rules/``. Front ends: the
``hp-invariants`` CLI, the pylint plugin :mod:`hp_invariants.checkers`, and libcst codemods in
:mod:`hp_invariants.codemods`. The package never imports torch.
"""

__version__ = "0.1.0"
